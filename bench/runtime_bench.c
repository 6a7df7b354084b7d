/* The engine runtime's start-up and lookup cost (results/cpu/runtime.md):
 * a table of N kernels (softmax at rows 1..N/2, f32 GEMMs at m = 1..N/2,
 * tuned in-process under the fake device's fingerprint, rows taken at run
 * time where a config allows), exported as a bundle and a JSON table (and
 * that table as version 1, without its index, which the runtime reads whole), then
 * on the fake driver (tests/fake_cuda.c, the CPU emulator: module loads
 * parse PTX, launches run on the CPU, so load and launch here measure the
 * runtime's work plus the fake's; a real driver's cubin load differs):
 *   open (lazy), first select, first load, first launch,
 *   open with every kernel loaded (eager),
 *   select per call over mixed sizes (the lookup).
 *
 *   runtime_bench [--kernels N] [--reps R] [--fake PATH-to-libcuda.so.1] [--tables DIR]
 * Prints a markdown table (medians over R runs of CPU time). --tables DIR
 * keeps the tables in DIR (made there once, reused by later runs: the same
 * table before and after a change, and a quick loop for a profiler). */
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptxtune/ptxtune.h"
#include "search/problem.h"
#include "tuner/tune.h"

/* CPU time of the process: this machine is shared (load averages of 20 on
 * 2 cores), where wall time mostly measures the queue */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static const db_fingerprint fake_fp = {"Fake GPU (ptxtune emulator)", 90, 4, "13000",
                                       "none", 90, "ptxtune 0.1.0", "bench/1"};

static int measure(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    (void)ctx;
    (void)e;
    uint64_t h = pt_hash64(c->config_str, strlen(c->config_str));
    double t = 1e-5 * (1 + (double)(h % 1000) / 1000.0);
    if (pt_config_get(c->config, "shape_imm", 1) == 0)
        t /= 100;
    snprintf(m->cls, sizeof m->cls, "ok");
    m->verified = m->timed = true;
    m->t_min = m->t_median = m->t_max = t;
    m->spread = 0.001;
    m->reps = 10;
    return PT_OK;
}

int main(int argc, char **argv)
{
    int nk = 100, reps = 9;
    const char *keep = NULL;
    const char *fake = getenv("PTXTUNE_FAKE_CUDA");
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kernels") == 0)
            nk = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--fake") == 0)
            fake = argv[i + 1];
        else if (strcmp(argv[i], "--tables") == 0)
            keep = argv[i + 1];
    }
    if (nk < 2 || nk > 2000 || reps < 1 || reps > 1000 || !fake) {
        fprintf(stderr, "usage: runtime_bench [--kernels 2..2000] [--reps R] --fake libcuda.so.1\n");
        return 2;
    }
    if (!dlopen(fake, RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "runtime_bench: %s\n", dlerror());
        return 2;
    }
    char dir[512] = "/tmp/ptxtune_rtbench_XXXXXX";
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        mkdir(dir, 0700);
    } else if (!mkdtemp(dir))
        return 1;
    char db[512], bundle[512], json[512], json1[512];
    snprintf(db, sizeof db, "%s/t.db", dir);
    snprintf(bundle, sizeof bundle, "%s/b.db", dir);
    snprintf(json, sizeof json, "%s/t.json", dir);
    snprintf(json1, sizeof json1, "%s/t1.json", dir);
    pt_arena *a = pt_arena_new();
    search_problem *p = calloc((size_t)nk, sizeof *p);
    pt_err e = {0};
    if (!a || !p)
        return 1;
    for (int i = 0; i < nk; i++) {
        char items[256];
        int r = i / 2 + 1;
        if (i % 2 == 0)
            snprintf(items, sizeof items, "expr=\"y = softmax(x, -1)\" shape=x=%dx256", r);
        else
            snprintf(items, sizeof items, "m=%d n=64 k=32", r);
        if (search_problem_parse(a, i % 2 ? "gemm" : "elementwise", items, &p[i], &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
    }
    double tune_s = 0;
    int rows = 0;
    bool have = keep && access(bundle, R_OK) == 0 && access(json, R_OK) == 0;
    if (have)
        goto measure;
    db_store *s;
    if (db_open(db, NULL, &s, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    sweep_opts o = {.arch = "sm_90", .strategy = SEARCH_RANDOM, .budget = 2, .seed = 1,
                    .no_compile = true, .tool_version = "bench", .git_rev = "bench",
                    .measure = measure, .fingerprint = &fake_fp};
    sweep_summary sum;
    double t0 = now();
    if (sweep_run(s, p, nk, &o, &sum, &e)) {
        fprintf(stderr, "sweep: %s\n", e.msg);
        return 1;
    }
    tune_s = now() - t0;
    pt_buf jb;
    pt_buf_init(&jb);
    if (db_export_bundle(s, NULL, NULL, bundle, &rows, &e) ||
        db_export_text(s, DB_FMT_JSON, NULL, NULL, &jb, NULL, &e)) {
        fprintf(stderr, "export: %s\n", e.msg);
        return 1;
    }
    FILE *f = fopen(json, "w");
    if (!f || fwrite(jb.s, 1, jb.len, f) != jb.len)
        return 1;
    fclose(f);
    pt_buf_free(&jb);
    db_close(s);
measure:;
    { /* the same table as version 1: no index, read whole */
        json_error_t je;
        json_t *doc = json_load_file(json, 0, &je);
        if (!doc || json_object_del(doc, "index") ||
            json_object_set_new(doc, "version", json_integer(1)) ||
            json_dump_file(doc, json1, JSON_INDENT(1) | JSON_PRESERVE_ORDER)) {
            fprintf(stderr, "runtime_bench: %s: cannot write its version 1 copy\n", json);
            return 1;
        }
        json_decref(doc);
    }
    char sm_class[256], gm_class[256];
    snprintf(sm_class, sizeof sm_class, "%s", p[0].klass);
    snprintf(gm_class, sizeof gm_class, "%s", p[1].klass);

    const char *paths[3] = {bundle, json, json1},
               *names[3] = {"bundle", "JSON table (version 2: index)", "JSON table (version 1: read whole)"};
    printf("| table | kernels | open (lazy) | first select | first load | first launch | "
           "open to first launch | open, all loaded (eager) |\n|---|---|---|---|---|---|---|---|\n");
    ptxtune_error err;
    for (int t = 0; t < 3; t++) {
        double *v[6];
        for (int k = 0; k < 6; k++)
            v[k] = calloc((size_t)reps, sizeof(double));
        int n = 0;
        for (int r = 0; r < reps; r++) {
            ptxtune_options oo = {.flags = PTXTUNE_ALLOW_PTX_JIT};
            ptxtune_runtime *rt;
            double a0 = now();
            if (ptxtune_open(paths[t], &oo, &rt, &err)) {
                fprintf(stderr, "open: %s\n", err.msg);
                return 1;
            }
            double a1 = now();
            n = ptxtune_entry_count(rt);
            ptxtune_selection sel;
            int64_t dims[2] = {3, 256};
            if (ptxtune_select(rt, sm_class, dims, 2, &sel, &err))
                return 1;
            double a2 = now();
            if (ptxtune_load(rt, sel.entry, &err)) {
                fprintf(stderr, "load: %s\n", err.msg);
                return 1;
            }
            double a3 = now();
            /* a launch with device buffers of the fake */
            static uint64_t bufs[2];
            if (!bufs[0]) {
                typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
                gpa_fn gpa;
                *(void **)&gpa = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
                int (*alloc)(uint64_t *, size_t) = NULL;
                int st;
                if (!gpa || gpa("cuMemAlloc", (void **)&alloc, 12000, 1, &st) || !alloc ||
                    alloc(&bufs[0], 1 << 20) || alloc(&bufs[1], 1 << 20))
                    return 1;
            }
            ptxtune_launch_args la = {.tensors = bufs, .ntensors = 2};
            if (ptxtune_launch(rt, &sel, &la, &err)) {
                fprintf(stderr, "launch: %s\n", err.msg);
                return 1;
            }
            double a4 = now();
            ptxtune_close(rt);
            oo.flags |= PTXTUNE_LOAD_EAGER;
            double b0 = now();
            if (ptxtune_open(paths[t], &oo, &rt, &err))
                return 1;
            double b1 = now();
            ptxtune_close(rt);
            v[0][r] = a1 - a0;
            v[1][r] = a2 - a1;
            v[2][r] = a3 - a2;
            v[3][r] = a4 - a3;
            v[4][r] = a4 - a0;
            v[5][r] = b1 - b0;
        }
        printf("| %s | %d | %.2f ms | %.2f us | %.2f ms | %.2f ms | %.2f ms | %.1f ms |\n",
               names[t], n, median(v[0], reps) * 1e3, median(v[1], reps) * 1e6,
               median(v[2], reps) * 1e3, median(v[3], reps) * 1e3, median(v[4], reps) * 1e3,
               median(v[5], reps) * 1e3);
        for (int k = 0; k < 6; k++)
            free(v[k]);
    }
    /* the lookup */
    for (int t = 0; t < 2; t++) {
        ptxtune_options oo = {.flags = PTXTUNE_ALLOW_PAD};
        ptxtune_runtime *rt;
        if (ptxtune_open(paths[t], &oo, &rt, &err))
            return 1;
        enum { N = 1000000 };
        double l0 = now();
        int64_t sink = 0;
        for (int i = 0; i < N; i++) {
            ptxtune_selection sel;
            int64_t sd[2] = {1 + i % (nk / 2), 256}, gd[4] = {1 + i % (nk / 2), 64, 32, 1};
            int rc = i & 1 ? ptxtune_select(rt, gm_class, gd, 4, &sel, &err)
                           : ptxtune_select(rt, sm_class, sd, 2, &sel, &err);
            if (rc)
                return 1;
            sink += sel.dims[0];
        }
        double lookup = (now() - l0) / N;
        ptxtune_close(rt);
        printf("%slookup, %s (ptxtune_select, softmax and GEMM alternating, sizes 1..%d, %d "
               "entries): %.0f ns per call (checksum %lld)\n",
               t ? "" : "\n", names[t], nk / 2, nk, lookup * 1e9, (long long)sink);
    }
    if (have)
        printf("setup: the tables of %s\n", dir);
    else
        printf("setup (not timed above): %d problems tuned in %.1f s, %d rows exported\n", nk,
               tune_s, rows);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!keep && system(cmd))
        return 1;
    pt_arena_free(a);
    free(p);
    return 0;
}
