/* The engine runtime (include/ptxtune/runtime.h) end to end on the fake
 * driver (tests/fake_cuda.c): a store tuned in-process under the fake
 * device's fingerprint (softmax at 16 and 64 rows, where the configs that
 * take the rows at run time are timed fastest, and an f32 GEMM at m = 16
 * and 64), exported by `ptxtune export --format bundle` and `--format json`,
 * then opened, selected for sizes that were not tuned, launched and checked
 * against a CPU reference. Also: the default and padded rules, fingerprint
 * and JIT refusals, eager loads, concurrent lookups, the installed library
 * (only ptxtune_* exported, no generator code), the public headers in C and
 * C++ with -Wpedantic -Werror, and `meson install` + pkg-config building the
 * C and C++ examples, which run on the bundle. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <jansson.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "examples/example.h"
#include "ptxtune/ptxtune.h"
#include "search/problem.h"
#include "test_util.h"
#include "tuner/tune.h"
#include "tuner/verify.h"
#include "gen/attention.h"
#include "gen/gemm.h"
#include "ptx/target.h"

static char dir[256];            /* the shared store, bundle and table */
static char softmax_class[512];
static char gemm_class[512];

static const db_fingerprint fake_fp = {"Fake GPU (ptxtune emulator)", 90, 4, "13000",
                                       "none", 90, "ptxtune 0.1.0", "test-bench/1"};

/* Configs that take the rows at run time are the fastest; the rest by hash. */
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
    m->t_min = t * 0.99;
    m->t_median = t;
    m->t_max = t * 1.01;
    m->spread = 0.001;
    m->reps = 10;
    return PT_OK;
}

static int build_store(void)
{
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    search_problem p[4];
    static const char *const ops[] = {"elementwise", "elementwise", "gemm", "gemm"};
    static const char *const items[] = {
        "expr=\"y = softmax(x, -1)\" shape=x=16x256", "expr=\"y = softmax(x, -1)\" shape=x=64x256",
        "m=16 n=64 k=32", "m=64 n=64 k=32"};
    for (int i = 0; i < 4; i++)
        if (search_problem_parse(a, ops[i], items[i], &p[i], &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
    snprintf(softmax_class, sizeof softmax_class, "%s", p[0].klass);
    snprintf(gemm_class, sizeof gemm_class, "%s", p[2].klass);
    char path[512];
    snprintf(path, sizeof path, "%s/t.db", dir);
    db_store *s;
    if (db_open(path, NULL, &s, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    sweep_opts o = {.arch = "sm_90", .strategy = SEARCH_RANDOM, .budget = 12, .seed = 1,
                    .no_compile = true, .tool_version = "test", .git_rev = "test",
                    .measure = measure, .fingerprint = &fake_fp};
    sweep_summary sum;
    int rc = sweep_run(s, p, 4, &o, &sum, &e);
    if (rc)
        fprintf(stderr, "sweep: %s\n", e.msg);
    db_close(s);
    pt_arena_free(a);
    char out[4096], err[4096];
    if (!rc)
        rc = test_run_ptxtune(dir, "export --db t.db --format bundle --out b.db", out, sizeof out,
                              err, sizeof err);
    if (!rc)
        rc = test_run_ptxtune(dir, "export --db t.db --format json --out t.json", out,
                              sizeof out, err, sizeof err);
    if (rc)
        fprintf(stderr, "export: %s\n", err);
    return rc;
}

/* The shared table: built once per run of this program by the first test
 * that needs it (under a lock; Criterion runs every test in its own
 * process), in a folder named by the runner's pid, removed at the end. */
static void shared_dir(char *out, size_t n, pid_t runner)
{
    snprintf(out, n, "/tmp/ptxtune_rt_%ld", (long)runner);
}

static void need_store(void)
{
    if (!getenv("PTXTUNE_FAKE_CUDA"))
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    if (dir[0])
        return;
    char d[256], lock[300], done[300];
    shared_dir(d, sizeof d, getppid());
    mkdir(d, 0700);
    snprintf(lock, sizeof lock, "%s/lock", d);
    snprintf(done, sizeof done, "%s/done", d);
    int fd = open(lock, O_CREAT | O_RDWR, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(flock(fd, LOCK_EX), 0);
    snprintf(dir, sizeof dir, "%s", d);
    if (access(done, F_OK) != 0) {
        cr_assert_eq(build_store(), 0, "building the store failed");
        FILE *f = fopen(done, "w");
        cr_assert(f);
        fprintf(f, "%s\n%s\n", softmax_class, gemm_class);
        fclose(f);
    } else {
        char buf[2048];
        test_slurp(done, buf, sizeof buf);
        char *nl = strchr(buf, '\n');
        cr_assert(nl);
        *nl = '\0';
        snprintf(softmax_class, sizeof softmax_class, "%s", buf);
        char *nl2 = strchr(nl + 1, '\n');
        if (nl2)
            *nl2 = '\0';
        snprintf(gemm_class, sizeof gemm_class, "%s", nl + 1);
    }
    flock(fd, LOCK_UN);
    close(fd);
}

ReportHook(POST_ALL)(struct criterion_global_stats *st)
{
    (void)st;
    char d[256], cmd[512];
    shared_dir(d, sizeof d, getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd))
        fprintf(stderr, "cannot remove %s\n", d);
}

static void load_fake(void)
{
    need_store();
    const char *p = getenv("PTXTUNE_FAKE_CUDA");
    if (!p)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    cr_assert(dlopen(p, RTLD_NOW | RTLD_GLOBAL), "%s", dlerror());
}

static char *P(const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

static ptxtune_runtime *open_rt(const char *file, unsigned flags)
{
    load_fake();
    ptxtune_options o = {.flags = flags};
    ptxtune_runtime *rt;
    ptxtune_error e;
    cr_assert_eq(ptxtune_open(P(file), &o, &rt, &e), PTXTUNE_OK, "%s", e.msg);
    return rt;
}

static const unsigned ALL = PTXTUNE_ALLOW_PTX_JIT | PTXTUNE_ALLOW_PAD;

Test(runtime, softmax_at_untuned_rows_takes_the_next_bucket)
{
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    cr_expect_eq(ptxtune_entry_count(rt), 4);
    ptxtune_selection sel;
    ptxtune_error e;
    int64_t dims[2] = {40, 256};
    cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    ptxtune_entry_info info;
    ptxtune_entry_info_get(sel.entry, &info);
    cr_expect_eq(sel.match, PTXTUNE_MATCH_BUCKET);
    cr_expect_eq(info.tuned[0], 64, "%s", info.problem);
    cr_expect(strstr(info.config, "shape_imm=0"), "%s", info.config);
    cr_expect(!sel.padded);
    cr_expect_eq(sel.dims[0], 40);
    cr_expect_eq(info.loaded, 0, "lazy: nothing loaded before the first launch");
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 40, 256), 0);
    ptxtune_entry_info_get(sel.entry, &info);
    cr_expect_eq(info.loaded, 1);
    /* exactly tuned */
    dims[0] = 16;
    cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_eq(sel.match, PTXTUNE_MATCH_EXACT);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 16, 256), 0);
    ptxtune_close(rt);
}

Test(runtime, above_every_bucket_is_the_flagged_default)
{
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    ptxtune_selection sel;
    ptxtune_error e;
    int64_t dims[2] = {100, 256};
    cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_eq(sel.match, PTXTUNE_MATCH_DEFAULT);
    ptxtune_entry_info info;
    ptxtune_entry_info_get(sel.entry, &info);
    cr_expect_eq(info.tuned[0], 64);
    cr_expect_eq(sel.grid[0] * sel.block[0] >= 100 * 32 || sel.grid[0] >= 100 / 8, 1);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 100, 256), 0);
    /* more rows than any kernel takes */
    dims[0] = (int64_t)1 << 40;
    cr_expect_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_ENOTFOUND);
    cr_expect(strstr(e.msg, "none of its 2 entries serves"), "%s", e.msg);
    ptxtune_close(rt);
}

Test(runtime, gemm_at_untuned_m_runs_padded_in_the_bucket)
{
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    ptxtune_selection sel;
    ptxtune_error e;
    int64_t dims[4] = {40, 64, 32, 1};
    cr_assert_eq(ptxtune_select(rt, gemm_class, dims, 4, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_eq(sel.match, PTXTUNE_MATCH_BUCKET);
    cr_expect(sel.padded);
    cr_expect_eq(sel.dims[0], 64);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 40, 64, 32), 0);
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 16, 64, 32), 0);
    dims[0] = 16;
    cr_assert_eq(ptxtune_select(rt, gemm_class, dims, 4, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_eq(sel.match, PTXTUNE_MATCH_EXACT);
    cr_expect(!sel.padded);
    ptxtune_close(rt);
    /* without padding a baked-in m serves only itself */
    rt = open_rt("b.db", PTXTUNE_ALLOW_PTX_JIT);
    dims[0] = 40;
    cr_expect_eq(ptxtune_select(rt, gemm_class, dims, 4, &sel, &e), PTXTUNE_ENOTFOUND);
    cr_expect(strstr(e.msg, "PTXTUNE_ALLOW_PAD"), "%s", e.msg);
    cr_expect_eq(ptxtune_select(rt, "gemm dtype=bf16", dims, 4, &sel, &e), PTXTUNE_ENOTFOUND);
    cr_expect(strstr(e.msg, "no entry of this class"), "%s", e.msg);
    ptxtune_close(rt);
}

Test(runtime, the_json_table_serves_the_same)
{
    ptxtune_runtime *rt = open_rt("t.json", ALL | PTXTUNE_LOAD_EAGER);
    cr_expect_eq(ptxtune_entry_count(rt), 4);
    for (int i = 0; i < ptxtune_entry_count(rt); i++) {
        ptxtune_entry_info info;
        ptxtune_entry_info_get(ptxtune_entry_get(rt, i), &info);
        cr_expect_eq(info.loaded, 1, "eager: %s loaded at open", info.problem);
    }
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 33, 256), 0);
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 64, 64, 32), 0);
    ptxtune_close(rt);
}

Test(runtime, another_device_or_no_jit_is_refused_in_one_line)
{
    load_fake();
    ptxtune_runtime *rt;
    ptxtune_error e;
    setenv("FAKE_CUDA_CC", "80", 1);
    cr_expect_eq(ptxtune_open(P("b.db"), NULL, &rt, &e), PTXTUNE_ENOTFOUND);
    cr_expect(strstr(e.msg, "no entry tuned on this device"), "%s", e.msg);
    /* a named fingerprint is served as is */
    ptxtune_options o = {.flags = ALL};
    char key[17];
    db_fingerprint_key(&fake_fp, key);
    o.fingerprint = key;
    cr_assert_eq(ptxtune_open(P("b.db"), &o, &rt, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_str_eq(ptxtune_fingerprint(rt), key);
    ptxtune_close(rt);
    unsetenv("FAKE_CUDA_CC");
    o.fingerprint = "ffff";
    cr_expect_eq(ptxtune_open(P("b.db"), &o, &rt, &e), PTXTUNE_ENOTFOUND);
    /* no cubin (not compiled) and no JIT allowed */
    rt = open_rt("b.db", 0);
    ptxtune_selection sel;
    int64_t dims[2] = {16, 256};
    cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_eq(ptxtune_load(rt, sel.entry, &e), PTXTUNE_ENOTFOUND);
    cr_expect(strstr(e.msg, "PTXTUNE_ALLOW_PTX_JIT"), "%s", e.msg);
    ptxtune_close(rt);
    /* not a table */
    cr_expect_eq(ptxtune_open(P("t.db-nope"), NULL, &rt, &e), PTXTUNE_EIO);
    FILE *f = fopen(P("bad.json"), "w");
    fputs("{\"format\": \"other\"}", f);
    fclose(f);
    cr_expect_eq(ptxtune_open(P("bad.json"), NULL, &rt, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "not a ptxtune table"), "%s", e.msg);
}

typedef struct th {
    ptxtune_runtime *rt;
    int bad;
} th;

static void *lookups(void *arg)
{
    th *t = arg;
    ptxtune_error e;
    for (int i = 0; i < 2000; i++) {
        ptxtune_selection sel;
        int64_t dims[2] = {1 + i % 64, 256};
        if (ptxtune_select(t->rt, softmax_class, dims, 2, &sel, &e) ||
            ptxtune_load(t->rt, sel.entry, &e))
            t->bad++;
    }
    return NULL;
}

Test(runtime, concurrent_lookups_and_first_loads)
{
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    pthread_t t[4];
    th a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (th){rt, 0};
        pthread_create(&t[i], NULL, lookups, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_expect_eq(a[i].bad, 0);
    }
    ptxtune_close(rt);
}

/* The driver's own entry points, for a caller that manages contexts. */
typedef int (*gpa_t)(const char *, void **, int, unsigned long long, int *);
static void *fake_fn(const char *name)
{
    void *lib = dlopen(getenv("PTXTUNE_FAKE_CUDA"), RTLD_NOW | RTLD_GLOBAL);
    cr_assert(lib);
    gpa_t gpa;
    *(void **)&gpa = dlsym(lib, "cuGetProcAddress_v2");
    cr_assert(gpa);
    void *f = NULL;
    int st = 0;
    cr_assert_eq(gpa(name, &f, 13000, 0, &st), 0, "the driver has no %s", name);
    return f;
}

static int fake_counter(const char *name)
{
    int (*f)(void);
    *(void **)&f = dlsym(dlopen(getenv("PTXTUNE_FAKE_CUDA"), RTLD_NOW), name);
    cr_assert(f, "%s", name);
    return f();
}

/* issue 14: a context the caller made (torch makes its device's primary one
 * current; an engine may have its own) is the one the runtime loads and
 * launches in: it retains no primary context of its own and leaves the
 * caller's current. */
Test(runtime, the_callers_context_is_used_and_kept)
{
    load_fake();
    typedef int (*create_t)(void **, void *, unsigned, int);
    typedef int (*get_t)(void **);
    typedef int (*destroy_t)(void *);
    create_t create;
    get_t get;
    destroy_t destroy;
    *(void **)&create = fake_fn("cuCtxCreate");
    *(void **)&get = fake_fn("cuCtxGetCurrent");
    *(void **)&destroy = fake_fn("cuCtxDestroy");
    int (*init)(unsigned);
    *(void **)&init = fake_fn("cuInit");
    cr_assert_eq(init(0), 0);
    void *mine = NULL, *cur = NULL;
    cr_assert_eq(create(&mine, NULL, 0, 0), 0);
    int retains = fake_counter("fake_cuda_primary_retain_calls");
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    cr_expect_eq(fake_counter("fake_cuda_primary_retain_calls"), retains,
                 "the runtime retained the primary context although one was current");
    cr_assert_eq(get(&cur), 0);
    cr_expect_eq(cur, mine, "the runtime changed the caller's current context");
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 40, 256), 0);
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 40, 64, 32), 0);
    ptxtune_close(rt);
    cr_assert_eq(get(&cur), 0);
    cr_expect_eq(cur, mine);
    cr_expect_eq(destroy(mine), 0);
    /* none current: the primary one, retained once and released at close */
    retains = fake_counter("fake_cuda_primary_retains");
    rt = open_rt("b.db", ALL);
    cr_expect_eq(fake_counter("fake_cuda_primary_retains"), retains + 1);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 16, 256), 0);
    ptxtune_close(rt);
    cr_expect_eq(fake_counter("fake_cuda_primary_retains"), retains);
}

typedef struct launch_job {
    ptxtune_runtime *rt;
    int rc;
    char msg[512];
} launch_job;

/* a thread of the caller's with no context current (a worker thread) */
static void *launch_on_a_new_thread(void *arg)
{
    launch_job *j = arg;
    ptxtune_selection sel;
    ptxtune_error e = {0};
    int64_t dims[2] = {64, 256};
    j->rc = ptxtune_select(j->rt, softmax_class, dims, 2, &sel, &e);
    if (!j->rc)
        j->rc = ptxtune_load(j->rt, sel.entry, &e);
    snprintf(j->msg, sizeof j->msg, "%s", e.msg);
    return NULL;
}

Test(runtime, a_thread_without_a_current_context_loads_in_the_runtimes)
{
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    launch_job j = {rt, -1, ""};
    pthread_t t;
    pthread_create(&t, NULL, launch_on_a_new_thread, &j);
    pthread_join(t, NULL);
    cr_expect_eq(j.rc, 0, "%s", j.msg);
    /* and the module works on the opening thread */
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 64, 256), 0);
    ptxtune_close(rt);
}

/* issue 14 item 6: a kernel's identity (its hash against its PTX) is
 * checked when it is first loaded, not at open: a lazy open of a table with
 * a tampered kernel succeeds, the load of that kernel fails naming it, the
 * others load; an eager open fails. Bundle and JSON table alike. */
static void tamper_bundle(const char *src, const char *dst)
{
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    cr_assert_eq(system(cmd), 0);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(dst, &db), SQLITE_OK);
    char *err = NULL;
    int rc = sqlite3_exec(db,
                          "UPDATE kernels SET ptx = ptx || char(10) || '.tampered' WHERE id IN (SELECT "
                          "m.kernel_id FROM winners w JOIN measurements m ON m.id = "
                          "w.measurement_id JOIN problems p ON p.id = w.problem_id WHERE p.key "
                          "LIKE '%x=16x256%')",
                          NULL, NULL, &err);
    snprintf(out, sizeof out, "%s", err ? err : "");
    sqlite3_free(err);
    cr_assert_eq(sqlite3_changes(db) > 0, 1, "nothing tampered: %s", out);
    cr_assert_eq(rc, SQLITE_OK, "%s", out);
    sqlite3_close(db);
}

static void tamper_json(const char *src, const char *dst)
{
    json_error_t je;
    json_t *root = json_load_file(src, 0, &je);
    cr_assert(root, "%s", je.text);
    json_t *rows = json_object_get(root, "rows");
    int n = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        const char *key = json_string_value(json_object_get(json_object_get(r, "problem"), "key"));
        json_t *kn = json_object_get(r, "kernel");
        if (key && strstr(key, "x=16x256")) {
            char *t = NULL;
            cr_assert(asprintf(&t, "%s\n.tampered", json_string_value(json_object_get(kn, "ptx"))) > 0);
            json_object_set_new(kn, "ptx", json_string(t));
            free(t);
            n++;
        }
    }
    cr_assert_eq(n, 1);
    cr_assert_eq(json_dump_file(root, dst, 0), 0);
    json_decref(root);
}

Test(runtime, a_tampered_kernel_is_refused_at_its_first_load)
{
    need_store();
    tamper_bundle(P("b.db"), P("tampered.db"));
    tamper_json(P("t.json"), P("tampered.json"));
    static const char *const files[] = {"tampered.db", "tampered.json"};
    for (int f = 0; f < 2; f++) {
        ptxtune_runtime *rt = open_rt(files[f], ALL);
        ptxtune_selection sel;
        ptxtune_error e;
        int64_t dims[2] = {16, 256};
        cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
        cr_expect_eq(sel.match, PTXTUNE_MATCH_EXACT);
        cr_expect_eq(ptxtune_load(rt, sel.entry, &e), PTXTUNE_EINVAL, "%s: loaded", files[f]);
        cr_expect(strstr(e.msg, "does not match its PTX") && strstr(e.msg, "x=16x256"), "%s", e.msg);
        drv d;
        cr_assert_eq(drv_open(&d), 0);
        cr_expect_eq(run_gemm(rt, &d, gemm_class, 64, 64, 32), 0, "%s: the others load", files[f]);
        ptxtune_close(rt);
        ptxtune_options o = {.flags = ALL | PTXTUNE_LOAD_EAGER};
        cr_expect_eq(ptxtune_open(P(files[f]), &o, &rt, &e), PTXTUNE_EINVAL, "%s: eager", files[f]);
        cr_expect(strstr(e.msg, "does not match its PTX"), "%s", e.msg);
    }
}

/* issue 14 item 6: a bundle's entries read their contract's sizes at open
 * and the rest of it at their first selection or load: a contract damaged
 * past its sizes is refused there, naming the problem; the others serve; an
 * eager open refuses the table. */
Test(runtime, a_damaged_contract_is_refused_at_its_first_selection)
{
    need_store();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", P("b.db"), P("badc.db"));
    cr_assert_eq(system(cmd), 0);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(P("badc.db"), &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db,
                              "UPDATE measurements SET launch = json_set(launch, '$.contract.block',"
                              " json('[0,1,1]')) WHERE id IN (SELECT w.measurement_id FROM winners w"
                              " JOIN problems p ON p.id = w.problem_id WHERE p.key LIKE '%x=16x256%')",
                              NULL, NULL, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_changes(db), 1);
    sqlite3_close(db);
    ptxtune_runtime *rt = open_rt("badc.db", ALL);
    ptxtune_selection sel;
    ptxtune_error e;
    int64_t dims[2] = {16, 256};
    cr_expect_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "malformed launch contract") && strstr(e.msg, "x=16x256"), "%s", e.msg);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 40, 256), 0, "the 64-row entry serves");
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 16, 64, 32), 0);
    ptxtune_close(rt);
    ptxtune_options o = {.flags = ALL | PTXTUNE_LOAD_EAGER};
    cr_expect_eq(ptxtune_open(P("badc.db"), &o, &rt, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "malformed launch contract"), "%s", e.msg);
}

/* issue 14 item 6 (start-up): a bundle carries its contracts' sizes as a
 * table (rt_sizes: per winner the contract version and "i:tuned:min:max:group"
 * per size, and the length of the launch text they were cut from), which the
 * open reads instead of any JSON. A bundle without it (an older export) is
 * read as before, to the same entries; an index that disagrees with its
 * contract is refused at that entry's first selection, never used. */
static void entry_ranges(ptxtune_runtime *rt, char *out, size_t n)
{
    size_t o = 0;
    for (int i = 0; i < ptxtune_entry_count(rt) && o + 128 < n; i++) {
        ptxtune_entry_info info;
        cr_assert_eq(ptxtune_entry_info_get(ptxtune_entry_get(rt, i), &info), PTXTUNE_OK);
        o += (size_t)snprintf(out + o, n - o, "%s:", info.problem);
        for (int d = 0; d < info.ndims; d++)
            o += (size_t)snprintf(out + o, n - o, " %lld..%lld", (long long)info.min[d],
                                  (long long)info.max[d]);
        o += (size_t)snprintf(out + o, n - o, "\n");
    }
}

Test(runtime, a_bundle_indexes_its_contract_sizes_and_an_older_one_reads_the_same)
{
    need_store();
    sqlite3 *db;
    int64_t nw = -1, ns = -2;
    cr_assert_eq(sqlite3_open_v2(P("b.db"), &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM winners),"
                                        " (SELECT count(*) FROM rt_sizes)", -1, &st, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    nw = sqlite3_column_int64(st, 0);
    ns = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
    cr_expect_eq(ns, nw, "%lld sizes rows for %lld winners", (long long)ns, (long long)nw);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", P("b.db"), P("old.db"));
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(sqlite3_open(P("old.db"), &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "DROP TABLE rt_sizes", NULL, NULL, NULL), SQLITE_OK, "%s",
                 sqlite3_errmsg(db));
    sqlite3_close(db);
    static char a[16384], b[16384];
    ptxtune_runtime *rt = open_rt("b.db", ALL);
    entry_ranges(rt, a, sizeof a);
    ptxtune_close(rt);
    rt = open_rt("old.db", ALL);
    entry_ranges(rt, b, sizeof b);
    cr_expect_str_eq(b, a);
    cr_expect(strstr(a, " 1..") != NULL, "no size taken at run time: %s", a);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 40, 256), 0);
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 16, 64, 32), 0);
    ptxtune_close(rt);
}

Test(runtime, a_size_index_that_disagrees_with_its_contract_is_refused)
{
    need_store();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", P("b.db"), P("bads.db"));
    cr_assert_eq(system(cmd), 0);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(P("bads.db"), &db), SQLITE_OK);
    /* the 16-row softmax's first size: its max one larger than the contract's */
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT s.measurement_id, s.sizes FROM rt_sizes s JOIN"
                                        " winners w ON w.measurement_id = s.measurement_id JOIN"
                                        " problems p ON p.id = w.problem_id WHERE p.key LIKE"
                                        " '%x=16x256%'", -1, &st, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t id = sqlite3_column_int64(st, 0);
    long long i0, t, lo, hi, g;
    char rest[512] = "";
    cr_assert_geq(sscanf((const char *)sqlite3_column_text(st, 1), "%lld:%lld:%lld:%lld:%lld%511s",
                         &i0, &t, &lo, &hi, &g, rest), 5);
    sqlite3_finalize(st);
    char upd[1024];
    snprintf(upd, sizeof upd, "UPDATE rt_sizes SET sizes = '%lld:%lld:%lld:%lld:%lld%s' WHERE"
                              " measurement_id = %lld", i0, t, lo, hi + 1, g, rest, (long long)id);
    cr_assert_eq(sqlite3_exec(db, upd, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_changes(db), 1);
    sqlite3_close(db);
    ptxtune_runtime *rt = open_rt("bads.db", ALL);
    ptxtune_selection sel;
    ptxtune_error e;
    int64_t dims[2] = {16, 256};
    cr_expect_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "does not match its launch contract") && strstr(e.msg, "x=16x256"),
              "%s", e.msg);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 40, 256), 0, "the 64-row entry serves");
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 16, 64, 32), 0);
    ptxtune_close(rt);
    ptxtune_options o = {.flags = ALL | PTXTUNE_LOAD_EAGER};
    cr_expect_eq(ptxtune_open(P("bads.db"), &o, &rt, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "does not match its launch contract"), "%s", e.msg);
}

/* issue 14: a kernel that takes a tensor map (tests/ptx/sm90/tma_load_sm90.ptx,
 * the TMA-load probe: one 2-D box of a 64 x 64 f32 tensor copied to out)
 * from a hand-made JSON table entry whose contract carries the map's encode
 * parameters: the runtime encodes it over the caller's pointer at launch
 * (cuTensorMapEncodeTiled; the fake encodes as ptx/emu/tmap.h does) and
 * passes the 128 bytes by value. The tensor has no pointer argument of its
 * own, so the map's argument is a tensor of the launch. */
static const char *tma_table_at(const char *file, const char *tmap_json, const char *pkey,
                                const char *pdims)
{
    const char *t = getenv("PTXTUNE_TESTS_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/ptx/sm90/tma_load_sm90.ptx", t);
    static char ptx[16384];
    test_slurp(path, ptx, sizeof ptx);
    cr_assert(strstr(ptx, ".entry tma_load_2d"));
    char hash[17], key[17];
    db_kernel_hash(ptx, strlen(ptx), hash);
    db_fingerprint_key(&fake_fp, key);
    json_error_t je;
    json_t *launch = json_loads(tmap_json, 0, &je);
    cr_assert(launch, "%s", je.text);
    json_t *row = json_pack(
        "{s:{s:s,s:s,s:i,s:i,s:s,s:s,s:i,s:s,s:s},s:{s:s,s:s,s:s,s:s},s:s,"
        "s:{s:s,s:s,s:s},s:o,s:{s:f}}",
        "fingerprint", "key", key, "gpu", fake_fp.gpu, "cc", fake_fp.cc, "sm_count",
        fake_fp.sm_count, "driver", fake_fp.driver, "compiler", fake_fp.compiler, "ptx_version",
        fake_fp.ptx_version, "generator", fake_fp.generator, "protocol", fake_fp.protocol,
        "problem", "key", pkey, "class", "probe tma", "dims", pdims, "op", "probe",
        "config", "box=16x8", "kernel", "entry", "tma_load_2d", "hash", hash, "ptx", ptx,
        "launch", launch, "time_s", "median", 1e-6);
    cr_assert(row);
    json_t *root = json_pack("{s:s,s:i,s:[o]}", "format", "ptxtune-table", "version", 1, "rows", row);
    cr_assert_eq(json_dump_file(root, P(file), 0), 0);
    json_decref(root);
    return P(file);
}

static const char *tma_table(const char *file, const char *tmap_json)
{
    return tma_table_at(file, tmap_json, "probe tma n=1", "1");
}

#define TMA_CONTRACT(TMAP)                                                                    \
    "{\"contract\":{\"v\":1,\"entry\":\"tma_load_2d\",\"block\":[128,1,1],\"smem\":2560,"        \
    "\"smem_optin\":false,\"cluster\":[1,1,1],\"align\":16,\"workspace\":{\"bytes\":0,"        \
    "\"zero_fill\":\"once\",\"scratch_bytes\":0},\"dims\":[{\"name\":\"n\",\"tuned\":1,"       \
    "\"min\":1,\"max\":1,\"group\":0}],\"grid\":[{\"const\":1},{\"const\":1},{\"const\":1}],"  \
    "\"args\":[{\"name\":\"tmap\",\"kind\":\"tensormap\",\"tmap\":" TMAP "},"                 \
    "{\"name\":\"out\",\"kind\":\"output\",\"tensor\":0,\"dtype\":\"f32\",\"elements\":128,"   \
    "\"scales\":[]},{\"name\":\"c0\",\"kind\":\"u32\",\"value\":8},"                        \
    "{\"name\":\"c1\",\"kind\":\"u32\",\"value\":4},{\"name\":\"nbytes\",\"kind\":\"u32\","    \
    "\"value\":512}]}}"

Test(runtime, a_tensor_map_kernel_is_encoded_over_the_callers_pointer)
{
    load_fake();
    /* the box: 16 f32 columns x 8 rows at column 8, row 4 of a 64 x 64 tensor */
    const char *table =
        tma_table("tma.json", TMA_CONTRACT("{\"of\":\"input\",\"tensor\":0,\"offset\":0,"
                                           "\"dtype\":7,\"rank\":2,\"dims\":[64,64],"
                                           "\"strides\":[256],\"box\":[16,8],\"swizzle\":0,"
                                           "\"oobfill\":0,\"l2promo\":0}"));
    char key[17];
    db_fingerprint_key(&fake_fp, key);
    ptxtune_options o = {.flags = PTXTUNE_ALLOW_PTX_JIT, .fingerprint = key};
    ptxtune_runtime *rt;
    ptxtune_error e;
    cr_assert_eq(ptxtune_open(table, &o, &rt, &e), PTXTUNE_OK, "%s", e.msg);
    ptxtune_selection sel;
    int64_t n = 1;
    cr_assert_eq(ptxtune_select(rt, "probe tma", &n, 1, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    /* the arguments: out (tensor 0), then the map's tensor (tensor 1) */
    cr_assert_eq(ptxtune_arg_count(&sel), 5);
    ptxtune_arg_info ai;
    ptxtune_arg_get(&sel, 0, &ai);
    cr_expect_str_eq(ai.kind, "tensormap");
    cr_expect_eq(ai.tensor, 1);
    cr_expect_str_eq(ai.dtype, "f32");
    cr_expect_eq(ai.elements, 64 * 64);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    static float in[64 * 64], got[128];
    for (int i = 0; i < 64 * 64; i++)
        in[i] = (float)i;
    uint64_t din = upload(&d, in, 64 * 64), dout = upload(&d, NULL, 128);
    cr_assert(din && dout);
    uint64_t ptrs[2] = {dout, din};
    ptxtune_launch_args la = {.tensors = ptrs, .ntensors = 2};
    cr_assert_eq(ptxtune_launch(rt, &sel, &la, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(d.sync(), 0);
    cr_assert_eq(d.d2h(got, dout, sizeof got), 0);
    int bad = 0;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 16; c++)
            if (got[r * 16 + c] != in[(4 + r) * 64 + 8 + c] && bad++ < 4)
                cr_expect_eq(got[r * 16 + c], in[(4 + r) * 64 + 8 + c], "box (%d, %d)", r, c);
    cr_expect_eq(bad, 0);
    /* a second tensor: the map follows the pointer */
    for (int i = 0; i < 64 * 64; i++)
        in[i] = (float)(-i);
    uint64_t din2 = upload(&d, in, 64 * 64);
    ptrs[1] = din2;
    cr_assert_eq(ptxtune_launch(rt, &sel, &la, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(d.sync(), 0);
    cr_assert_eq(d.d2h(got, dout, sizeof got), 0);
    cr_expect_eq(got[0], in[4 * 64 + 8]);
    cr_expect_eq(got[127], in[11 * 64 + 23]);
    /* a pointer the map cannot take (not 16-byte aligned): refused naming its argument */
    ptrs[1] = din2 + 4;
    cr_expect_neq(ptxtune_launch(rt, &sel, &la, &e), PTXTUNE_OK);
    cr_expect(strstr(e.msg, "'tmap'") && strstr(e.msg, "aligned"), "%s", e.msg);
    ptxtune_close(rt);
    /* a malformed map is refused at open, naming the argument */
    table = tma_table("tma_bad.json", TMA_CONTRACT("{\"of\":\"input\",\"tensor\":0,\"offset\":0,"
                                                   "\"dtype\":7,\"rank\":6}"));
    cr_expect_eq(ptxtune_open(table, &o, &rt, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "'tmap'") && strstr(e.msg, "malformed tensor map"), "%s", e.msg);
}

/* The build tree: PTXTUNE_BIN is BUILD/cli/ptxtune. */
static void build_root(char *out, size_t n)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", bin);
    snprintf(out, n, "%s", dirname(dirname(tmp)));
}

static int sh(const char *cmd, char *out, size_t n)
{
    char tmp[] = "/tmp/ptxtune_rt_sh_XXXXXX", full[16384];
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(full, sizeof full, "(%s) >'%s' 2>&1", cmd, tmp);
    int st = system(full);
    test_slurp(tmp, out, n);
    remove(tmp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A map over a tensor whose rows are a run-time size (a dyn=m GEMM's A):
 * the contract's "dims_scale" says the map's row count follows size 0
 * (tuned 64, served 1..128), so a launch at 8 rows encodes an 8-row map and
 * the box's rows past 8 are the TMA's zero fill; the map's launch tensor is
 * 8 rows long. */
Test(runtime, a_tensor_map_follows_a_run_time_size)
{
    load_fake();
    const char *contract =
        "{\"contract\":{\"v\":1,\"entry\":\"tma_load_2d\",\"block\":[128,1,1],\"smem\":2560,"
        "\"smem_optin\":false,\"cluster\":[1,1,1],\"align\":16,\"workspace\":{\"bytes\":0,"
        "\"zero_fill\":\"once\",\"scratch_bytes\":0},\"dims\":[{\"name\":\"rows\",\"tuned\":64,"
        "\"min\":1,\"max\":128,\"group\":0}],\"grid\":[{\"const\":1},{\"const\":1},{\"const\":1}],"
        "\"args\":[{\"name\":\"tmap\",\"kind\":\"tensormap\",\"tmap\":{\"of\":\"input\","
        "\"tensor\":0,\"offset\":0,\"dtype\":7,\"rank\":2,\"dims\":[64,64],\"dims_scale\":[-1,0],"
        "\"strides\":[256],\"strides_scale\":[-1],\"box\":[16,8],\"swizzle\":0,\"oobfill\":0,"
        "\"l2promo\":0}},{\"name\":\"out\",\"kind\":\"output\",\"tensor\":0,\"dtype\":\"f32\","
        "\"elements\":128,\"scales\":[]},{\"name\":\"c0\",\"kind\":\"u32\",\"value\":8},"
        "{\"name\":\"c1\",\"kind\":\"u32\",\"value\":4},{\"name\":\"nbytes\",\"kind\":\"u32\","
        "\"value\":512}]}}";
    const char *table = tma_table_at("tma_dyn.json", contract, "probe tma rows=64", "64");
    char key[17];
    db_fingerprint_key(&fake_fp, key);
    ptxtune_options o = {.flags = PTXTUNE_ALLOW_PTX_JIT, .fingerprint = key};
    ptxtune_runtime *rt;
    ptxtune_error e;
    cr_assert_eq(ptxtune_open(table, &o, &rt, &e), PTXTUNE_OK, "%s", e.msg);
    ptxtune_selection sel;
    int64_t rows = 8;
    cr_assert_eq(ptxtune_select(rt, "probe tma", &rows, 1, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_eq(sel.match, PTXTUNE_MATCH_BUCKET);
    ptxtune_arg_info ai;
    ptxtune_arg_get(&sel, 0, &ai);
    cr_expect_str_eq(ai.kind, "tensormap");
    cr_expect_eq(ai.elements, 8 * 64, "the map's tensor at 8 rows: %lld", (long long)ai.elements);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    static float in[64 * 64], got[128];
    for (int i = 0; i < 64 * 64; i++)
        in[i] = (float)(i + 1);
    uint64_t din = upload(&d, in, 64 * 64), dout = upload(&d, NULL, 128);
    cr_assert(din && dout);
    uint64_t ptrs[2] = {dout, din};
    ptxtune_launch_args la = {.tensors = ptrs, .ntensors = 2};
    cr_assert_eq(ptxtune_launch(rt, &sel, &la, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(d.sync(), 0);
    cr_assert_eq(d.d2h(got, dout, sizeof got), 0);
    int bad = 0;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 16; c++) {
            float want = 4 + r < 8 ? in[(4 + r) * 64 + 8 + c] : 0.0f; /* rows 8.. out of the map */
            if (got[r * 16 + c] != want && bad++ < 4)
                cr_expect_eq(got[r * 16 + c], want, "box (%d, %d)", r, c);
        }
    cr_expect_eq(bad, 0);
    /* at the tuned 64 rows the whole box is in the map */
    rows = 64;
    cr_assert_eq(ptxtune_select(rt, "probe tma", &rows, 1, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(ptxtune_launch(rt, &sel, &la, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(d.sync(), 0);
    cr_assert_eq(d.d2h(got, dout, sizeof got), 0);
    cr_expect_eq(got[127], in[11 * 64 + 23]);
    ptxtune_close(rt);
    /* a scale naming a size the contract lacks: refused at open naming the argument */
    char c2[4096];
    snprintf(c2, sizeof c2, "%s", contract);
    char *at = strstr(c2, "\"dims_scale\":[-1,0]");
    cr_assert(at);
    at[strlen("\"dims_scale\":[-1,")] = '1';
    table = tma_table_at("tma_dyn_bad.json", c2, "probe tma rows=64", "64");
    cr_expect_eq(ptxtune_open(table, &o, &rt, &e), PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "'tmap'") && strstr(e.msg, "malformed tensor map"), "%s", e.msg);
}

/* issue 14 acceptance: a paged-decode attention kernel runs from the export
 * alone. One decode problem (paged KV in pages of 16, GQA 4:2) tuned
 * in-process (mock timings), exported as a bundle by the CLI; the runtime
 * selects it, the test binds the op's tensors to the launch's pointers by
 * the contract's tensor indices, launches through the fake driver and
 * compares o with the op's float64 reference (the inputs and page table are
 * the verifier's: tuner_io_random with the op's structured inputs). */
/* run_exported_at's options beside its arguments (the persistent test's):
 * configs holding every item of prefer (",k=v,..." tested as substrings of
 * ",config,") win, the sweep's budget (0: 2), the fingerprint served (NULL:
 * the device's) and the grid x the selection must have (0: any). */
static const char *rx_prefer, *rx_fingerprint;
static int64_t rx_budget;
static unsigned rx_grid_x;

static bool rx_preferred(const char *cfg)
{
    if (!rx_prefer)
        return false;
    char all[512], item[64];
    snprintf(all, sizeof all, ",%s,", cfg);
    for (const char *q = rx_prefer; *q;) {
        const char *end = strchr(q, ',');
        size_t n = end ? (size_t)(end - q) : strlen(q);
        snprintf(item, sizeof item, ",%.*s,", (int)n, q);
        if (!strstr(all, item))
            return false;
        q += n + (end != NULL);
    }
    return true;
}

static int measure1(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    (void)ctx;
    (void)e;
    uint64_t h = pt_hash64(c->config_str, strlen(c->config_str));
    double t = 1e-5 * (1 + (double)(h % 1000) / 1000.0);
    if (rx_preferred(c->config_str))
        t /= 100;
    snprintf(m->cls, sizeof m->cls, "ok");
    m->verified = m->timed = true;
    m->t_min = m->t_median = m->t_max = t;
    m->spread = 0.001;
    m->reps = 10;
    return PT_OK;
}

/* One problem of op opname tuned at arch, exported, run by the runtime at
 * its tuned sizes on the verifier's inputs, checked against the reference. */
/* want_maps: 1 the kernel must take tensor maps, 0 none, -1 either (said
 * on stdout). run_item, run_dims: the problem launched (NULL: the
 * tuned one, at its tuned sizes). */
static void run_exported_at(const pt_op *op, const char *opname, const char *item,
                            const char *arch, const char *tag, int want_maps,
                            const char *run_item, const int64_t *run_dims, int nrun)
{
    load_fake();
    pt_arena *a = pt_arena_new();
    pt_err pe = {0};
    search_problem sp;
    cr_assert_eq(search_problem_parse(a, opname, item, &sp, &pe), PT_OK, "%s", pe.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/%s_%ld.db", dir, tag, (long)getpid());
    unlink(path);
    db_store *s;
    cr_assert_eq(db_open(path, NULL, &s, &pe), PT_OK, "%s", pe.msg);
    sweep_opts so = {.arch = arch, .strategy = SEARCH_RANDOM, .budget = rx_budget ? rx_budget : 2, .seed = 1,
                     .no_compile = true, .tool_version = "test", .git_rev = "test",
                     .measure = measure1, .fingerprint = &fake_fp};
    sweep_summary sum;
    cr_assert_eq(sweep_run(s, &sp, 1, &so, &sum, &pe), PT_OK, "sweep: %s", pe.msg);
    db_close(s);
    char args[1400], out[4096], err[4096], bpath[600];
    snprintf(bpath, sizeof bpath, "%s.bundle", path);
    unlink(bpath);
    snprintf(args, sizeof args, "export --db '%s' --format bundle --out '%s'", path, bpath);
    cr_assert_eq(test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err), 0, "%s", err);
    if (rx_grid_x) { /* the CSV's grid rule has the SM term */
        snprintf(args, sizeof args, "export --db '%s' --format csv", path);
        cr_assert_eq(test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err), 0, "%s", err);
        cr_expect(strstr(out, ",1*sms)") != NULL, "no SM term in the CSV: %s", out);
        /* and the C header's table has it as a field */
        snprintf(args, sizeof args, "export --db '%s' --format c-header --out '%s.h'", path, path);
        cr_assert_eq(test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err), 0, "%s", err);
        snprintf(args, sizeof args, "grep -c 'grid_per_sm \\*/ 1,' '%s.h'", path);
        cr_expect_eq(sh(args, out, sizeof out), 0, "no grid_per_sm 1 in the C header: %s", out);
    }
    /* the contract's tensor indices, in launch order */
    sqlite3 *db;
    cr_assert_eq(sqlite3_open_v2(bpath, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT m.launch FROM winners w JOIN measurements m ON"
                                        " m.id = w.measurement_id", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    json_t *launch = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
    sqlite3_finalize(st);
    char fpkey[64] = ""; /* rx_fingerprint "*": the bundle's one fingerprint, named */
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT key FROM fingerprints", -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        snprintf(fpkey, sizeof fpkey, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    cr_assert(launch);
    json_t *cargs = json_object_get(json_object_get(launch, "contract"), "args");
    int kind_of[16], index_of[16], nt = 0; /* per launch tensor: input 0 / output 1, op index */
    int map_kind[8], map_index[8], nmaps = 0; /* maps' own tensors, after the pointers */
    for (size_t i = 0; i < json_array_size(cargs); i++) {
        json_t *x = json_array_get(cargs, i);
        const char *kind = json_string_value(json_object_get(x, "kind"));
        json_t *tm = json_object_get(x, "tmap");
        if (strcmp(kind, "tensormap") == 0) { /* over a tensor without a pointer: one of its own */
            bool has_ptr = false;
            const char *of = json_string_value(json_object_get(tm, "of"));
            int ti = (int)json_integer_value(json_object_get(tm, "tensor"));
            for (size_t j = 0; j < json_array_size(cargs); j++) {
                json_t *y = json_array_get(cargs, j);
                has_ptr = has_ptr || (strcmp(json_string_value(json_object_get(y, "kind")), of) == 0 &&
                                      json_integer_value(json_object_get(y, "tensor")) == ti);
            }
            for (int j = 0; j < nmaps && !has_ptr; j++)
                has_ptr = map_kind[j] == (strcmp(of, "output") == 0) && map_index[j] == ti;
            if (has_ptr)
                continue;
            map_kind[nmaps] = strcmp(of, "output") == 0;
            map_index[nmaps++] = ti;
            continue;
        }
        if (strcmp(kind, "input") && strcmp(kind, "output"))
            continue;
        cr_assert_lt(nt, 16);
        kind_of[nt] = strcmp(kind, "output") == 0;
        index_of[nt++] = (int)json_integer_value(json_object_get(x, "tensor"));
    }
    int ntm = 0;
    for (size_t i = 0; i < json_array_size(cargs); i++)
        ntm += strcmp(json_string_value(json_object_get(json_array_get(cargs, i), "kind")),
                      "tensormap") == 0;
    if (want_maps < 0)
        printf("%s on %s: %d tensor maps\n", item, arch, ntm);
    else
        cr_expect_eq(ntm > 0, want_maps > 0, "%d tensor maps", ntm);
    json_decref(launch);
    for (int i = 0; i < nmaps; i++) {
        kind_of[nt] = map_kind[i];
        index_of[nt++] = map_index[i];
    }
    /* the runtime: the entry at its tuned sizes */
    ptxtune_options o = {.flags = PTXTUNE_ALLOW_PTX_JIT,
                         .fingerprint = rx_fingerprint && !strcmp(rx_fingerprint, "*") ? fpkey : rx_fingerprint};
    ptxtune_runtime *rt;
    ptxtune_error e;
    cr_assert_eq(ptxtune_open(bpath, &o, &rt, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(ptxtune_entry_count(rt), 1);
    ptxtune_entry_info info;
    cr_assert_eq(ptxtune_entry_info_get(ptxtune_entry_get(rt, 0), &info), PTXTUNE_OK);
    cr_expect_str_eq(info.op, opname);
    ptxtune_selection sel;
    cr_assert_eq(ptxtune_select(rt, info.klass, run_dims ? run_dims : info.tuned,
                                run_dims ? nrun : info.ndims, &sel, &e),
                 PTXTUNE_OK, "%s", e.msg);
    cr_assert(!sel.padded, "a padded selection");
    if (rx_prefer)
        cr_expect(rx_preferred(info.config), "the winner [%s] is not [%s]", info.config, rx_prefer);
    if (rx_grid_x)
        cr_expect_eq(sel.grid[0], rx_grid_x, "the selection's grid x");
    search_problem rp = sp;
    if (run_item)
        cr_assert_eq(search_problem_parse(a, opname, run_item, &rp, &pe), PT_OK, "%s", pe.msg);
    /* the op's tensors and inputs, as the verifier makes them */
    pt_target t;
    cr_assert_eq(pt_target_parse(arch, &t, &pe), PT_OK);
    pt_prepared *pp = NULL;
    cr_assert_eq(op->prepare(a, &rp.prob, &t, &pp, &pe), PT_OK, "%s", pe.msg);
    tuner_io *io;
    cr_assert_eq(tuner_io_new(op, pp, &io, &pe), PT_OK, "%s", pe.msg);
    tuner_io_random(io, 7, 0, 0);
    cr_assert_eq(tuner_io_check_inputs(io, &pe), PT_OK, "%s", pe.msg);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    uint64_t ptrs[16], outp[TUNER_MAX_TENSORS] = {0};
    for (int i = 0; i < nt; i++) {
        int j = index_of[i];
        size_t bytes = kind_of[i] ? io->out_bytes[j] : io->in_bytes[j];
        cr_assert_eq(d.alloc(&ptrs[i], bytes ? bytes : 16), 0);
        if (!kind_of[i])
            cr_assert_eq(d.h2d(ptrs[i], io->in_bits[j], bytes), 0);
        else
            outp[j] = ptrs[i];
    }
    uint64_t ws = 0;
    if (sel.workspace_bytes) {
        void *z = calloc(1, sel.workspace_bytes);
        cr_assert(z);
        cr_assert_eq(d.alloc(&ws, sel.workspace_bytes), 0);
        cr_assert_eq(d.h2d(ws, z, sel.workspace_bytes), 0);
        free(z);
    }
    ptxtune_launch_args la = {.tensors = ptrs, .ntensors = nt, .workspace = ws};
    cr_assert_eq(ptxtune_launch(rt, &sel, &la, &e), PTXTUNE_OK, "%s", e.msg);
    cr_assert_eq(d.sync(), 0);
    if (rx_grid_x)
        cr_expect_eq(fake_counter("fake_cuda_last_grid_x"), (int)rx_grid_x, "the driver's grid x");
    /* o against the float64 reference */
    pt_tensor ref[TUNER_MAX_TENSORS];
    for (int i = 0; i < io->nout; i++) {
        cr_assert(outp[i], "output %d has no pointer", i);
        void *bits = malloc(io->out_bytes[i]);
        cr_assert(bits);
        cr_assert_eq(d.d2h(bits, outp[i], io->out_bytes[i]), 0);
        io->out[i].data = malloc((size_t)io->out[i].numel * sizeof(double));
        cr_assert(io->out[i].data);
        for (int64_t j = 0; j < io->out[i].numel; j++)
            io->out[i].data[j] = pt_dtype_load(io->out[i].dtype, bits, (size_t)j);
        free(bits);
        ref[i] = io->out[i];
        ref[i].data = calloc((size_t)ref[i].numel, sizeof(double));
        cr_assert(ref[i].data);
    }
    cr_assert_eq(op->reference(pp, io->in, ref, &pe), PT_OK, "%s", pe.msg);
    for (int i = 0; i < io->nout; i++) {
        tuner_verify_result r;
        memset(&r, 0, sizeof r);
        tuner_compare(io->out[i].name, io->out[i].dtype, io->out[i].data, ref[i].data, NULL,
                      io->out[i].numel, &r);
        double maxref = 0;
        for (int64_t j = 0; j < ref[i].numel; j++)
            maxref = fabs(ref[i].data[j]) > maxref ? fabs(ref[i].data[j]) : maxref;
        cr_expect_gt(maxref, 0.01, "a vacuous reference");
        cr_expect_eq(r.bad, 0, "%s: %lld of %lld elements wrong (worst %g)", io->out[i].name,
                     (long long)r.bad, (long long)io->out[i].numel, r.max_err);
        free(ref[i].data);
    }
    ptxtune_close(rt);
    tuner_io_free(NULL, io);
    pt_arena_free(a);
}

static void run_exported(const pt_op *op, const char *opname, const char *item, const char *arch,
                         const char *tag, bool want_maps)
{
    run_exported_at(op, opname, item, arch, tag, want_maps, NULL, NULL, 0);
}

Test(runtime, a_paged_decode_attention_kernel_runs_from_the_export, .timeout = 300)
{
    run_exported(&gen_attention_op, "attention",
                 "batch=2 heads_q=4 heads_kv=2 seqlen_q=1 seqlen_k=40 head_dim=64 page_size=16"
                 " dtype=f16",
                 "sm_90", "attn", false);
}

/* An sm_90a wgmma GEMM (TMA loads: its A and B are tensor maps, encoded by
 * the runtime from the contract at every launch) from the export alone. */
Test(runtime, an_sm90a_wgmma_gemm_with_tensor_maps_runs_from_the_export, .timeout = 300)
{
    run_exported(&gen_gemm_op, "gemm", "m=128 n=128 k=64 dtype=bf16 layout=nt", "sm_90a", "wg",
                 true);
}

/* A dyn=m GEMM on sm_90a tuned at the 128 bucket, launched at M = 100 from
 * the export: on the wgmma loop (issue 13 item 4, 0abf61f: its tensor maps,
 * the one over A and with epi=1 the one over D, encoded at the launch's M
 * from the contract's dims_scale). */
Test(runtime, a_dyn_m_sm90a_gemm_runs_at_an_untuned_m, .timeout = 300)
{
    static const int64_t dims[4] = {100, 128, 64, 1};
    run_exported_at(&gen_gemm_op, "gemm", "m=128 n=128 k=64 dtype=bf16 layout=nt dyn=m", "sm_90a",
                    "wgdyn", 1, "m=100 n=128 k=64 dtype=bf16 layout=nt dyn=m", dims, 4);
}

Test(runtime, the_library_exports_the_api_and_links_no_generator)
{
    char root[1024], cmd[4096], out[65536];
    build_root(root, sizeof root);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/runtime/lib/libptxtune.so' | awk '{print $3}'",
             root);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "ptxtune_open"), "%s", out);
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n"))
        cr_expect(strncmp(l, "ptxtune_", 8) == 0 || strncmp(l, "PTXTUNE_", 8) == 0,
                  "exported: %s", l);
    /* no object of gen/ (the generator, the kit), the emulator, the parser,
     * the printer, the compile gate or the op registry */
    snprintf(cmd, sizeof cmd,
             "nm -A '%s/runtime/lib/libptxtune.a' | grep -E ' [TtDdBbRr] "
             "(gen_|kit_|emu_|ex_|pt_op_|ptx_parse|ptx_print|pt_compile|tuner_dev|search_)' ; "
             "nm -A '%s/runtime/lib/libptxtune.a' | grep -oE '^[^:]*:[^:]*' | sort -u",
             root, root);
    sh(cmd, out, sizeof out);
    cr_expect(!strstr(out, " T "), "generator code in the runtime library:\n%s", out);
    cr_expect(!strstr(out, "gen_") && !strstr(out, "emu") && !strstr(out, "compile.c"),
              "objects:\n%s", out);
    cr_expect(strstr(out, "runtime.c.o"), "%s", out);
}

Test(runtime, the_headers_compile_in_c_and_cpp_with_pedantic_errors)
{
    const char *t = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(t);
    char cmd[4096], out[16384];
    static const char *const std[] = {"cc -std=c99", "cc -std=c11", "cc -std=c17",
                                      "c++ -std=c++17 -x c++"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd,
                 "%s -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I'%s/../include' '%s/../examples/example.%s'",
                 std[i], t, t, i == 3 ? "cpp" : "c");
        cr_expect_eq(sh(cmd, out, sizeof out), 0, "%s: %s", std[i], out);
    }
}

Test(runtime, meson_install_and_pkg_config_build_the_examples, .timeout = 600)
{
    load_fake();
    const char *t = getenv("PTXTUNE_TESTS_DIR");
    char root[1024], cmd[8192], out[65536], fake[1024];
    build_root(root, sizeof root);
    snprintf(fake, sizeof fake, "%s", getenv("PTXTUNE_FAKE_CUDA"));
    char *fakedir = dirname(fake);
    snprintf(cmd, sizeof cmd,
             "set -e; D='%s/destdir'; meson install --no-rebuild -C '%s' --destdir \"$D\" >/dev/null; "
             "pc=$(find \"$D\" -name ptxtune.pc | head -1); test -n \"$pc\"; "
             /* the .pc names the install prefix; point it into D */
             "mkdir -p \"$D/pc\"; sed \"s|^prefix=|prefix=$D|\" \"$pc\" > \"$D/pc/ptxtune.pc\"; "
             "export PKG_CONFIG_PATH=\"$D/pc\"; "
             "flags=$(pkg-config --cflags --libs ptxtune); echo \"flags: $flags\"; "
             "libdir=$(pkg-config --variable=libdir ptxtune); "
             "test -e \"$libdir/libptxtune.so.0\"; test -e \"$libdir/libptxtune.a\"; "
             "test -e \"$(pkg-config --variable=includedir ptxtune)/ptxtune/runtime.h\"; "
             "cc -std=c11 -Wall -Wextra -Wpedantic -Werror '%s/../examples/example.c' -o '%s/ex_c' $flags -ldl -lm; "
             "c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror '%s/../examples/example.cpp' -o '%s/ex_cpp' $flags -ldl; "
             "export LD_LIBRARY_PATH=\"$libdir:%s\"; "
             "'%s/ex_c' '%s/b.db' '%s' '%s'; '%s/ex_cpp' '%s/b.db' '%s' '%s'",
             dir, root, t, dir, t, dir, fakedir, dir, dir, softmax_class, gemm_class, dir, dir,
             softmax_class, gemm_class);
    /* the classes hold double quotes: pass them through single quotes */
    cr_assert(!strchr(softmax_class, '\'') && !strchr(gemm_class, '\''));
    int rc = sh(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "softmax 40x256: bucket match"), "%s", out);
    cr_expect(strstr(out, "gemm m=40 n=64 k=32: bucket match (padded)"), "%s", out);
    char *first = strstr(out, "\nok\n");
    cr_expect(first && strstr(first + 1, "\nok\n"), "both examples end ok:\n%s", out);
}

Test(runtime, c_header_and_csv_exports_carry_the_contract)
{
    need_store();
    char out[65536], err[4096];
    cr_assert_eq(test_run_ptxtune(dir, "export --db t.db --format c-header --out t.h", out,
                                  sizeof out, err, sizeof err),
                 0, "%s", err);
    FILE *f = fopen(P("eng.c"), "w");
    cr_assert(f);
    fputs("#define PTXTUNE_TABLE_IMPLEMENTATION\n#include \"t.h\"\n#include <stdio.h>\n"
          "#include <string.h>\n"
          "int main(void) {\n  int ok = ptxtune_table_size == 4;\n"
          "  for (size_t i = 0; i < ptxtune_table_size; i++)\n"
          "    ok = ok && ptxtune_table[i].contract && strstr(ptxtune_table[i].contract, \"\\\"dims\\\"\")\n"
          "         && ptxtune_table[i].align > 0 && ptxtune_table[i].cluster[0] == 1\n"
          "         && strstr(ptxtune_table[i].ptx, \".entry\");\n"
          "  return ok ? 0 : 1;\n}\n",
          f);
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cp eng.c eng.cpp && cc -std=c11 -Wall -Wextra -Wpedantic -Werror eng.c -o eng_c && "
             "./eng_c && c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror eng.cpp -o eng_cpp && ./eng_cpp",
             dir);
    cr_expect_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    /* CSV: one column per problem key and config parameter, then the contract */
    cr_assert_eq(test_run_ptxtune(dir, "export --db t.db --format csv", out, sizeof out, err,
                                  sizeof err),
                 0, "%s", err);
    char *nl = strchr(out, '\n');
    cr_assert(nl);
    *nl = '\0';
    static const char *const cols[] = {",expr,", ",shape,", ",dtype", ",m,", ",n,", ",k,",
                                       ",cfg_tpb,", ",cfg_shape_imm,", ",cfg_bm,",
                                       ",workspace_bytes,", ",runtime_dims,", ",grid_rule"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        cr_expect(strstr(out, cols[i]), "no column %s in %s", cols[i], out);
    cr_expect(strstr(nl + 1, "x[0]=1.."), "the run-time rows of a softmax row:\n%s", nl + 1);
}

/* ptxtune emit compiles nothing: once the toolchain's version cap is cached,
 * it neither loads nvJitLink nor forks ptxas (issue 14 item 6). */
Test(runtime, emit_starts_without_loading_the_compiler)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin);
    if (access("/usr/local/cuda/lib64/libnvJitLink.so.13", F_OK) != 0)
        cr_skip_test("no nvJitLink under /usr/local/cuda");
    char d[] = "/tmp/ptxtune_rt_emit_XXXXXX", cmd[4096], out[65536];
    cr_assert(mkdtemp(d));
    snprintf(cmd, sizeof cmd,
             "export PTXTUNE_CACHE_DIR='%s/cache'; "
             "'%s' emit elementwise 'expr=y = relu(x)' shape=x=64x64 > '%s/a.ptx' 2>/dev/null && "
             "LD_DEBUG=libs '%s' emit elementwise 'expr=y = relu(x)' shape=x=64x64 2>&1 >'%s/b.ptx' "
             "| grep -c -e nvJitLink -e ptxas; cmp '%s/a.ptx' '%s/b.ptx' && echo same",
             d, bin, d, bin, d, d, d);
    sh(cmd, out, sizeof out);
    cr_expect_eq(strncmp(out, "0\n", 2), 0, "the second emit loaded the compiler: %s", out);
    cr_expect(strstr(out, "same"), "the cached cap changed the PTX: %s", out);
    snprintf(cmd, sizeof cmd, "cat '%s/cache/toolchain-v1'", d);
    sh(cmd, out, sizeof out);
    cr_expect(strstr(out, "libnvJitLink.so.13"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    sh(cmd, out, sizeof out);
}

/* ---- the JSON table's index (version 2; issue 14 item 6) ------------------
 * The export writes {"format", "version": 2, "index": {...}, "rows": [...]}
 * with the index first: per row the byte spans of the row and of its launch
 * value. The runtime's open reads only the index; a row's launch is read at
 * its first selection, the row (PTX, cubin) at its first load, each checked
 * against what the index said. */

static const char v2_prefix[] = "{\"format\": \"ptxtune-table\", \"version\": 2, \"index\": ";

static char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    cr_assert(b && fread(b, 1, (size_t)len, f) == (size_t)len);
    b[len] = '\0';
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void write_bytes(const char *path, const char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(b, 1, n, f) == n && fclose(f) == 0, "%s", path);
}

/* The index of a version 2 table as written: *ilen its text's length. */
static json_t *index_of(const char *b, size_t n, size_t *ilen)
{
    size_t pl = strlen(v2_prefix);
    cr_assert(n > pl && memcmp(b, v2_prefix, pl) == 0, "not a version 2 table: %.80s", b);
    json_error_t je;
    json_t *ix = json_loadb(b + pl, n - pl, JSON_DISABLE_EOF_CHECK, &je);
    cr_assert(ix, "%s", je.text);
    char *t = json_dumps(ix, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    *ilen = strlen(t);
    cr_assert_eq(memcmp(t, b + pl, *ilen), 0, "the index is not the writer's text");
    free(t);
    return ix;
}

/* The index replaced in place by ix (padded with spaces to its length). */
static void put_index(char *b, size_t ilen, json_t *ix)
{
    char *t = json_dumps(ix, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    cr_assert(strlen(t) <= ilen, "the edited index is longer (%zu > %zu)", strlen(t), ilen);
    memset(b + strlen(v2_prefix), ' ', ilen);
    memcpy(b + strlen(v2_prefix), t, strlen(t));
    free(t);
}

static json_t *irow(json_t *ix, size_t i) { return json_array_get(json_object_get(ix, "rows"), i); }

/* the index row of the problem whose key has s */
static size_t irow_of(json_t *ix, const char *s)
{
    json_t *rows = json_object_get(ix, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (strstr(json_string_value(json_array_get(json_array_get(rows, i), 5)), s))
            return i;
    cr_assert_fail("no row has %s", s);
    return 0;
}

static void one_line_refusal(int rc, const ptxtune_error *e, const char *want, const char *what)
{
    cr_expect_neq(rc, PTXTUNE_OK, "%s: accepted", what);
    cr_expect(e->msg[0] && !strchr(e->msg, '\n'), "%s: not one line: '%s'", what, e->msg);
    cr_expect(!want || strstr(e->msg, want), "%s: '%s' lacks '%s'", what, e->msg, want);
}

Test(runtime, the_json_table_is_indexed_and_its_rows_are_read_at_first_use)
{
    need_store();
    size_t n, ilen;
    char *b = read_bytes(P("t.json"), &n);
    json_t *ix = index_of(b, n, &ilen);
    cr_expect_eq(json_integer_value(json_object_get(ix, "file_bytes")), (json_int_t)n);
    json_t *doc = json_loadb(b, n, 0, NULL);
    cr_assert(doc, "the table is one JSON document");
    json_t *rows = json_object_get(doc, "rows");
    cr_assert_eq(json_array_size(rows), 4);
    cr_assert_eq(json_array_size(json_object_get(ix, "rows")), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *r = irow(ix, i), *sp = json_array_get(r, 1), *lp = json_array_get(r, 2);
        size_t o = (size_t)json_integer_value(json_array_get(sp, 0)),
               l = (size_t)json_integer_value(json_array_get(sp, 1));
        json_t *row = json_loadb(b + o, l, 0, NULL), *ln = json_loadb(
            b + json_integer_value(json_array_get(lp, 0)), (size_t)json_integer_value(json_array_get(lp, 1)), 0, NULL);
        cr_expect(row && json_equal(row, json_array_get(rows, i)), "row %zu: its span is not the row", i);
        cr_expect(ln && json_equal(ln, json_object_get(json_array_get(rows, i), "launch")),
                  "row %zu: its launch span is not its launch", i);
        json_decref(row);
        json_decref(ln);
    }
    /* lazy: the 16-row softmax's PTX damaged (the document is no longer
     * JSON): the table opens, the others serve, that one is refused at its
     * first load, in one line */
    size_t r16 = irow_of(ix, "x=16x256");
    json_t *sp = json_array_get(irow(ix, r16), 1);
    char *row = b + json_integer_value(json_array_get(sp, 0));
    char *ptx = strstr(row, "\"ptx\": \"");
    cr_assert(ptx && ptx < row + json_integer_value(json_array_get(sp, 1)));
    memset(ptx + 8, '"', 12);
    write_bytes(P("lazy.json"), b, n);
    ptxtune_runtime *rt = open_rt("lazy.json", ALL);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_expect_eq(run_gemm(rt, &d, gemm_class, 64, 64, 32), 0);
    cr_expect_eq(run_softmax(rt, &d, softmax_class, 40, 256), 0, "the 64-row entry serves");
    ptxtune_selection sel;
    ptxtune_error e;
    int64_t dims[2] = {16, 256};
    cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    one_line_refusal(ptxtune_load(rt, sel.entry, &e), &e, "does not match the table's index",
                     "a damaged row");
    ptxtune_close(rt);
    ptxtune_options o = {.flags = ALL | PTXTUNE_LOAD_EAGER};
    one_line_refusal(ptxtune_open(P("lazy.json"), &o, &rt, &e), &e, "not one JSON value", "eager");
    json_decref(doc);
    json_decref(ix);
    free(b);
}

/* Old tables (version 1) and tables rewritten by another tool (the offsets
 * no longer hold: the index's file_bytes is not the file's) are read whole;
 * another version is refused in one line. */
Test(runtime, a_version_1_or_rewritten_json_table_is_read_whole)
{
    need_store();
    json_t *doc = json_load_file(P("t.json"), 0, NULL);
    cr_assert(doc);
    json_object_del(doc, "index");
    json_object_set_new(doc, "version", json_integer(1));
    cr_assert_eq(json_dump_file(doc, P("v1.json"), JSON_INDENT(1) | JSON_PRESERVE_ORDER), 0);
    json_object_set_new(doc, "version", json_integer(3));
    cr_assert_eq(json_dump_file(doc, P("v3.json"), 0), 0);
    json_decref(doc);
    doc = json_load_file(P("t.json"), 0, NULL);
    cr_assert_eq(json_dump_file(doc, P("re.json"), 0), 0); /* same prefix, other offsets */
    json_decref(doc);
    static const char *const files[] = {"v1.json", "re.json"};
    for (int f = 0; f < 2; f++) {
        ptxtune_runtime *rt = open_rt(files[f], ALL);
        cr_expect_eq(ptxtune_entry_count(rt), 4);
        drv d;
        cr_assert_eq(drv_open(&d), 0);
        cr_expect_eq(run_softmax(rt, &d, softmax_class, 33, 256), 0, "%s", files[f]);
        cr_expect_eq(run_gemm(rt, &d, gemm_class, 64, 64, 32), 0, "%s", files[f]);
        ptxtune_close(rt);
    }
    ptxtune_runtime *rt;
    ptxtune_error e;
    one_line_refusal(ptxtune_open(P("v3.json"), NULL, &rt, &e), &e, "table version", "version 3");
    size_t n;
    char *b = read_bytes(P("t.json"), &n);
    write_bytes(P("cut.json"), b, n - 100);
    one_line_refusal(ptxtune_open(P("cut.json"), NULL, &rt, &e), &e, "not a JSON table", "truncated");
    free(b);
}

/* An index edited in place (the file's size kept, so its offsets are
 * believed): every inconsistency is refused in one line, at open or at the
 * row's first selection or load, and never serves another row's kernel. */
Test(runtime, a_damaged_json_index_is_refused_in_one_line)
{
    need_store();
    load_fake();
    size_t n, ilen;
    char *orig = read_bytes(P("t.json"), &n);
    json_t *ix0 = index_of(orig, n, &ilen);
    size_t a = irow_of(ix0, "x=16x256"), c = irow_of(ix0, "x=64x256");
    enum { SWAP_BOTH, SWAP_ROW, HASH, LAUNCH_OFF, PAST_END, COLUMNS, FP_KEY, FP_RANGE, NCASES };
    static const char *const names[] = {"row and launch spans swapped", "row spans swapped",
                                        "another row's hash", "launch span shifted",
                                        "a span past the end", "a column renamed",
                                        "a fingerprint's key", "a fingerprint index"};
    static const char *const want[] = {"x=16x256", "malformed",
                                       "does not match", "not one JSON value", "malformed",
                                       "other columns", "does not match its fields", "malformed"};
    for (int k = 0; k < NCASES; k++) {
        json_t *ix = json_deep_copy(ix0);
        json_t *ra = irow(ix, a), *rc_ = irow(ix, c);
        char *b = malloc(n);
        memcpy(b, orig, n);
        switch (k) {
        case SWAP_BOTH:
        case SWAP_ROW:
            for (size_t j = 1; j <= (k == SWAP_BOTH ? 2u : 1u); j++) {
                json_t *x = json_incref(json_array_get(ra, j));
                json_array_set(ra, j, json_array_get(rc_, j));
                json_array_set_new(rc_, j, x);
            }
            break;
        case HASH:
            json_array_set(ra, 9, json_array_get(rc_, 9));
            break;
        case LAUNCH_OFF: {
            json_t *l = json_array_get(ra, 2);
            json_array_set_new(l, 0, json_integer(json_integer_value(json_array_get(l, 0)) + 1));
            break;
        }
        case PAST_END:
            json_array_set_new(json_array_get(ra, 1), 1, json_integer((json_int_t)n));
            break;
        case COLUMNS:
            json_array_set_new(json_object_get(ix, "columns"), 5, json_string("problen"));
            break;
        case FP_KEY: {
            json_t *fp = json_array_get(json_object_get(ix, "fingerprints"), 0);
            char key[17];
            snprintf(key, sizeof key, "%s", json_string_value(json_object_get(fp, "key")));
            key[0] = key[0] == '0' ? '1' : '0';
            json_object_set_new(fp, "key", json_string(key));
            break;
        }
        case FP_RANGE:
            json_array_set_new(ra, 0, json_integer(7));
            break;
        }
        /* room for longer numbers: the times (not read before a load's checks) */
        for (size_t r = 0; r < json_array_size(json_object_get(ix, "rows")); r++)
            json_array_set_new(irow(ix, r), 11, json_null());
        put_index(b, ilen, ix);
        write_bytes(P("dmg.json"), b, n);
        ptxtune_options o = {.flags = ALL};
        ptxtune_runtime *rt;
        ptxtune_error e = {0};
        int rc = ptxtune_open(P("dmg.json"), &o, &rt, &e);
        if (k >= PAST_END || k == SWAP_ROW) { /* a row span must hold its launch span */
            one_line_refusal(rc, &e, want[k], names[k]);
        } else {
            cr_assert_eq(rc, PTXTUNE_OK, "%s: %s", names[k], e.msg);
            ptxtune_selection sel;
            int64_t dims[2] = {16, 256};
            rc = ptxtune_select(rt, softmax_class, dims, 2, &sel, &e);
            if (!rc)
                rc = ptxtune_load(rt, sel.entry, &e);
            one_line_refusal(rc, &e, want[k], names[k]);
            drv d;
            cr_assert_eq(drv_open(&d), 0);
            cr_expect_eq(run_gemm(rt, &d, gemm_class, 64, 64, 32), 0, "%s: the GEMM serves", names[k]);
            ptxtune_close(rt);
        }
        json_decref(ix);
        free(b);
    }
    json_decref(ix0);
    free(orig);
}

/* Fuzz input (seeded): bytes of the index, and anywhere in the file,
 * replaced. Whatever happens: no crash, a refusal is one line, and an entry
 * that loads is one of the table's own (its problem, config and entry). */
Test(runtime, a_mutated_json_table_never_serves_a_wrong_kernel, .timeout = 240)
{
    need_store();
    load_fake();
    size_t n, ilen;
    char *orig = read_bytes(P("t.json"), &n);
    json_t *ix0 = index_of(orig, n, &ilen);
    json_t *irows = json_object_get(ix0, "rows");
    static const char alphabet[] = "0123456789 ,:[]{}\"\\-.eatnrux";
    uint64_t st = 20261202;
    int opened = 0, loaded = 0, refused = 0;
    char *b = malloc(n);
    for (int it = 0; it < 240; it++) {
        memcpy(b, orig, n);
        int nb = 1 + (int)((st >> 33) % 3);
        for (int j = 0; j < nb; j++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            size_t span = it % 4 == 3 ? n : strlen(v2_prefix) + ilen + 4;
            size_t at = (size_t)(st >> 20) % span;
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            b[at] = alphabet[(st >> 40) % (sizeof alphabet - 1)];
        }
        write_bytes(P("fz.json"), b, n);
        ptxtune_options o = {.flags = ALL};
        ptxtune_runtime *rt;
        ptxtune_error e = {0};
        int rc = ptxtune_open(P("fz.json"), &o, &rt, &e);
        if (rc) {
            cr_expect(e.msg[0] && !strchr(e.msg, '\n'), "mutation %d: open: '%s'", it, e.msg);
            refused++;
            continue;
        }
        opened++;
        for (int i = 0; i < ptxtune_entry_count(rt); i++) {
            ptxtune_entry_info info;
            if (ptxtune_entry_info_get(ptxtune_entry_get(rt, i), &info))
                continue;
            ptxtune_selection sel;
            rc = ptxtune_select(rt, info.klass, info.tuned, info.ndims, &sel, &e);
            if (!rc)
                rc = ptxtune_load(rt, sel.entry, &e);
            if (rc) {
                cr_expect(e.msg[0] && !strchr(e.msg, '\n'), "mutation %d: '%s'", it, e.msg);
                continue;
            }
            ptxtune_entry_info got;
            cr_assert_eq(ptxtune_entry_info_get(sel.entry, &got), PTXTUNE_OK);
            bool own = false;
            for (size_t r = 0; r < json_array_size(irows) && !own; r++) {
                json_t *x = json_array_get(irows, r);
                own = strcmp(got.problem, json_string_value(json_array_get(x, 5))) == 0 &&
                      strcmp(got.config, json_string_value(json_array_get(x, 7))) == 0 &&
                      strcmp(got.entry, json_string_value(json_array_get(x, 8))) == 0;
            }
            cr_expect(own, "mutation %d: loaded %s / %s, not a row of the table", it, got.problem,
                      got.config);
            loaded++;
        }
        ptxtune_close(rt);
    }
    cr_log_info("mutated tables: %d opened (%d entries loaded), %d refused at open", opened,
                loaded, refused);
    cr_expect(opened > 0 && refused > 0, "the mutations reached both paths");
    free(b);
    json_decref(ix0);
    free(orig);
}

/* The driver's version is remembered across processes (tuner/driver.c,
 * PTXTUNE_CACHE_DIR/driver-v1): an emit without a driver does not search
 * for libcuda.so.1 again (issue 14 item 6: ~70 failing openat/stat calls a
 * start); a library appearing on the search path, or the one found
 * changing, is probed again. LD_DEBUG=libs names every library search. */
Test(runtime, emit_remembers_the_driver_probe)
{
    const char *bin = getenv("PTXTUNE_BIN"), *fake = getenv("PTXTUNE_FAKE_CUDA");
    cr_assert(bin);
    if (!fake)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    char d[] = "/tmp/ptxtune_rt_drv_XXXXXX", cmd[8192], out[65536];
    cr_assert(mkdtemp(d));
    snprintf(cmd, sizeof cmd, "mkdir '%s/lib' && cp '%s' '%s/lib/libcuda.so.1'", d, fake, d);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    /* emit with LD_DEBUG=libs: how many lines name libcuda, then the PTX's checksum */
    static const char emit[] =
        "export PTXTUNE_CACHE_DIR='%s/cache'; %s LD_DEBUG=libs '%s' emit elementwise "
        "'expr=y = relu(x)' shape=x=64x64 2>&1 >'%s/%s.ptx' | grep -c libcuda.so.1; "
        "cksum < '%s/%s.ptx'";
    char first[256], lp[600] = "", drv0[32] = "";
    for (int step = 0; step < 5; step++) {
        if (step == 2)
            snprintf(lp, sizeof lp, "export LD_LIBRARY_PATH='%s/lib';", d);
        if (step == 4) {
            snprintf(cmd, sizeof cmd, "touch -d '2001-01-01' '%s/lib/libcuda.so.1'", d);
            cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
        }
        char name[8];
        snprintf(name, sizeof name, "e%d", step);
        snprintf(cmd, sizeof cmd, emit, d, lp, bin, d, name, d, name);
        sh(cmd, out, sizeof out);
        int searched = atoi(out);
        const char *sum = strchr(out, '\n');
        cr_assert(sum, "%s", out);
        if (step == 0)
            snprintf(first, sizeof first, "%s", sum);
        cr_expect_str_eq(sum, first, "step %d: the PTX changed", step);
        bool probe = step == 0 || step == 2 || step == 4;
        cr_expect(probe ? searched > 0 : searched == 0,
                  "step %d: %d lines of LD_DEBUG name libcuda.so.1 (a probe expected: %d)", step,
                  searched, probe);
        snprintf(cmd, sizeof cmd, "cat '%s/cache/driver-v1'", d);
        sh(cmd, out, sizeof out);
        /* no driver here: 0; a machine with one: its version, the same at step 1 */
        const char *tab = strrchr(out, '\t');
        cr_assert(tab, "step %d: cache '%s'", step, out);
        if (step == 0)
            snprintf(drv0, sizeof drv0, "%s", tab);
        cr_expect_str_eq(tab, step < 2 ? drv0 : "\t13000\n", "step %d: cache '%s'", step, out);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    sh(cmd, out, sizeof out);
}

/* A version 2 table's index carries each cubin's identity (cubin_hash: of
 * its base64 text), checked at the row's first load: a cubin changed in
 * place (still base64, the file's size kept) is refused in one line, never
 * handed to the driver. The table: t.json with an ELF-headed cubin added to
 * the 16-row softmax (the fake driver refuses ELF images, so the intact
 * table loads through the PTX JIT), imported into a store and exported. */
Test(runtime, a_json_table_cubin_changed_in_place_is_refused_at_its_load)
{
    need_store();
    json_t *doc = json_load_file(P("t.json"), 0, NULL);
    cr_assert(doc);
    json_object_del(doc, "index");
    json_object_set_new(doc, "version", json_integer(1));
    json_t *rows = json_object_get(doc, "rows");
    int n16 = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (!strstr(json_string_value(json_object_get(json_object_get(r, "problem"), "key")),
                    "x=16x256"))
            continue;
        /* "\177ELF" and 44 bytes more, as base64 */
        json_object_set_new(r, "cubin",
                            json_pack("{s:s,s:s,s:s,s:n}", "arch", "sm_90", "compiler", "nvjitlink",
                                      "base64", "f0VMRgIBAQAAAAAAAAAAAAIAvgABAAAAAAAAAAAAAABAAAAAAAAAAA==",
                                      "resources"));
        n16++;
    }
    cr_assert_eq(n16, 1);
    cr_assert_eq(json_dump_file(doc, P("cub1.json"), 0), 0);
    json_decref(doc);
    char out[4096], err[4096];
    cr_assert_eq(test_run_ptxtune(dir, "import --db cub.db cub1.json", out, sizeof out, err, sizeof err),
                 0, "%s", err);
    cr_assert_eq(test_run_ptxtune(dir, "export --db cub.db --format json --out cub.json", out,
                                  sizeof out, err, sizeof err),
                 0, "%s", err);
    size_t n;
    char *b = read_bytes(P("cub.json"), &n);
    char *at = strstr(b, "\"base64\": \"f0VMRgIBAQ");
    cr_assert(at, "no cubin in the export");
    for (int f = 0; f < 2; f++) {
        if (f == 1) { /* one base64 digit changed: still base64, still ELF */
            at[30] = at[30] == 'A' ? 'B' : 'A';
            write_bytes(P("cub.json"), b, n);
        }
        ptxtune_runtime *rt = open_rt("cub.json", ALL);
        ptxtune_selection sel;
        ptxtune_error e;
        int64_t dims[2] = {16, 256};
        cr_assert_eq(ptxtune_select(rt, softmax_class, dims, 2, &sel, &e), PTXTUNE_OK, "%s", e.msg);
        int rc = ptxtune_load(rt, sel.entry, &e);
        if (f == 0)
            cr_expect_eq(rc, PTXTUNE_OK, "the intact cubin: %s", e.msg);
        else
            one_line_refusal(rc, &e, "its cubin (its hash) differs", "a changed cubin");
        ptxtune_close(rt);
    }
    free(b);
}

/* A persistent stream-K wgmma GEMM (persistent=1, streamk=1) tuned on a
 * device of 4 SMs, served (the fingerprint named) on one of 3 by the fake
 * driver (FAKE_CUDA_SMS): the contract's grid rule has the SM term
 * ({"const":units,"per_sm":1}, version 2), so the runtime launches 3 CTAs,
 * which cut the k iterations into 3 units; the output checks out against
 * the float64 reference, the workspace sized for any grid. */
Test(runtime, a_persistent_stream_k_gemm_launches_from_the_devices_sm_count, .timeout = 300)
{
    rx_prefer = "persistent=1,streamk=1,sched=0";
    rx_budget = 200;
    rx_fingerprint = "*";
    rx_grid_x = 3;
    setenv("FAKE_CUDA_SMS", "3", 1);
    run_exported_at(&gen_gemm_op, "gemm", "m=128 n=128 k=2048 dtype=bf16 layout=nt", "sm_90a", "pers", 1,
                    NULL, NULL, 0);
    unsetenv("FAKE_CUDA_SMS");
    rx_prefer = rx_fingerprint = NULL;
    rx_budget = 0;
    rx_grid_x = 0;
}

/* A contract of a version this library does not know (3) is refused in
 * one line naming it and the versions it reads; the others serve. */
Test(runtime, an_unknown_contract_version_is_refused_in_one_line)
{
    need_store();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", P("b.db"), P("v3.db"));
    cr_assert_eq(system(cmd), 0);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(P("v3.db"), &db), SQLITE_OK);
    static const char *const sql[] = {
        "UPDATE measurements SET launch = json_set(launch, '$.contract.v', 3) WHERE id IN (SELECT"
        " w.measurement_id FROM winners w JOIN problems p ON p.id = w.problem_id WHERE p.key LIKE '%x=16x256%')",
        "UPDATE rt_sizes SET v = 3 WHERE measurement_id IN (SELECT w.measurement_id FROM winners w JOIN"
        " problems p ON p.id = w.problem_id WHERE p.key LIKE '%x=16x256%')"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(sqlite3_exec(db, sql[i], NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
        cr_assert_eq(sqlite3_changes(db), 1, "%s", sql[i]);
    }
    sqlite3_close(db);
    load_fake();
    ptxtune_options o = {.flags = ALL};
    ptxtune_runtime *rt = NULL;
    ptxtune_error e;
    int rc = ptxtune_open(P("v3.db"), &o, &rt, &e);
    if (rc == PTXTUNE_OK) {
        ptxtune_selection sel;
        int64_t dims[2] = {16, 256};
        rc = ptxtune_select(rt, softmax_class, dims, 2, &sel, &e);
        drv d;
        cr_assert_eq(drv_open(&d), 0);
        cr_expect_eq(run_gemm(rt, &d, gemm_class, 16, 64, 32), 0, "the others serve");
        ptxtune_close(rt);
    }
    cr_expect_eq(rc, PTXTUNE_EINVAL);
    cr_expect(strstr(e.msg, "launch contract version 3: this library reads 1 and 2") != NULL, "%s", e.msg);
    cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
}
