/* Run-time M end to end (issue 14 item 4): GEMMs with dyn=m tuned at two
 * power-of-two buckets (mock timings, in-process, under the fake device's
 * fingerprint), exported by `ptxtune export --format bundle`, opened with
 * the runtime API and launched through tests/fake_cuda.c (the fake driver
 * over the emulator) at M that were never tuned, results checked against
 * a CPU reference (examples/example.h's run_gemm): the caller's M is the
 * kernel's parameter m and the grid comes from the contract's rule (a
 * wrong m or grid writes past D's M rows: the emulator's bounds check).
 * The class `gemm dyn=m dtype=f32` holds entries at k = 32 (no split-K in
 * the space: each kernel serves every M) and at k = 512, where the timings
 * favour split-K (the workspace is laid out for the bucket: the entry
 * serves (bucket/2, bucket]); k is baked in, so a request's k picks one
 * set. Also: db lookup's configs pass check(), one kernel row per config. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "examples/example.h"
#include "gen/gemm.h"
#include "ptxtune/ptxtune.h"
#include "search/problem.h"
#include "test_util.h"
#include "tuner/tune.h"

static char dir[256];
static char plain_class[512]; /* the class, from the k=32 problems (no split-K in the space) */
static char split_class[512]; /* the same class, from the k=512 ones (split-K timed fastest) */
static char col_class[512];   /* column-major D and C (beta 0.5), k=32 */
static char col_split_class[512]; /* column-major D, k=512 (split-K) */

static const db_fingerprint fake_fp = {"Fake GPU (ptxtune emulator)", 90, 4, "13000",
                                       "none", 90, "ptxtune 0.1.0", "test-bench/1"};

/* Split-K configs are the fastest; the rest by hash. */
static int measure(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    (void)ctx;
    (void)e;
    uint64_t h = pt_hash64(c->config_str, strlen(c->config_str));
    double t = 1e-5 * (1 + (double)(h % 1000) / 1000.0);
    if (pt_config_get(c->config, "splitk", 1) > 1)
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
    search_problem p[8];
    static const char *const items[] = {"m=64 n=64 k=32 dyn=m", "m=128 n=64 k=32 dyn=m",
                                        "m=64 n=64 k=512 dyn=m", "m=128 n=64 k=512 dyn=m",
                                        "m=64 n=64 k=32 dyn=m d_colmajor=1 beta=0.5",
                                        "m=128 n=64 k=32 dyn=m d_colmajor=1 beta=0.5",
                                        "m=64 n=64 k=512 dyn=m d_colmajor=1",
                                        "m=128 n=64 k=512 dyn=m d_colmajor=1"};
    for (int i = 0; i < 8; i++)
        if (search_problem_parse(a, "gemm", items[i], &p[i], &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
    snprintf(plain_class, sizeof plain_class, "%s", p[0].klass);
    snprintf(split_class, sizeof split_class, "%s", p[2].klass);
    snprintf(col_class, sizeof col_class, "%s", p[4].klass);
    snprintf(col_split_class, sizeof col_split_class, "%s", p[6].klass);
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
    int rc = sweep_run(s, p, 8, &o, &sum, &e);
    if (rc)
        fprintf(stderr, "sweep: %s\n", e.msg);
    db_close(s);
    pt_arena_free(a);
    char out[4096], err[4096];
    if (!rc)
        rc = test_run_ptxtune(dir, "export --db t.db --format bundle --out b.db", out, sizeof out,
                              err, sizeof err);
    if (rc)
        fprintf(stderr, "export: %s\n", err);
    return rc;
}

/* The table, built once per run under a lock (Criterion forks per test). */
static void need_store(void)
{
    if (!getenv("PTXTUNE_FAKE_CUDA"))
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    if (dir[0])
        return;
    char d[256], lock[300], done[300];
    snprintf(d, sizeof d, "/tmp/ptxtune_rtdyn_%ld", (long)getppid());
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
        fprintf(f, "%s\n%s\n%s\n%s\n", plain_class, split_class, col_class, col_split_class);
        fclose(f);
    } else {
        char buf[4096];
        test_slurp(done, buf, sizeof buf);
        char *classes[4] = {plain_class, split_class, col_class, col_split_class}, *at = buf;
        for (int i = 0; i < 4; i++) {
            char *nl = strchr(at, '\n');
            cr_assert(nl);
            *nl = '\0';
            snprintf(classes[i], sizeof plain_class, "%s", at);
            at = nl + 1;
        }
    }
    flock(fd, LOCK_UN);
    close(fd);
}

ReportHook(POST_ALL)(struct criterion_global_stats *st)
{
    (void)st;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '/tmp/ptxtune_rtdyn_%ld'", (long)getpid());
    if (system(cmd))
        fprintf(stderr, "cannot remove the table folder\n");
}

static ptxtune_runtime *open_rt(unsigned flags)
{
    need_store();
    cr_assert(dlopen(getenv("PTXTUNE_FAKE_CUDA"), RTLD_NOW | RTLD_GLOBAL), "%s", dlerror());
    ptxtune_options o = {.flags = flags};
    ptxtune_runtime *rt;
    ptxtune_error e;
    char path[512];
    snprintf(path, sizeof path, "%s/b.db", dir);
    cr_assert_eq(ptxtune_open(path, &o, &rt, &e), PTXTUNE_OK, "%s", e.msg);
    return rt;
}

/* The selection for m: its match, the tuned m of its entry, the caller's
 * sizes (never padded), the parameter m at the caller's M and the grid. */
static void expect_sel(ptxtune_runtime *rt, const char *klass, int64_t m, int64_t k,
                       ptxtune_match match, int64_t tuned_m)
{
    ptxtune_error e;
    int64_t dims[4] = {m, 64, k, 1};
    ptxtune_selection sel;
    cr_assert_eq(ptxtune_select(rt, klass, dims, 4, &sel, &e), PTXTUNE_OK, "m=%lld: %s",
                 (long long)m, e.msg);
    cr_expect_eq(sel.match, match, "m=%lld: match %d", (long long)m, (int)sel.match);
    cr_expect(!sel.padded, "m=%lld: padded", (long long)m);
    cr_expect_eq(sel.dims[0], m);
    ptxtune_entry_info info;
    ptxtune_entry_info_get(sel.entry, &info);
    cr_expect_eq(info.tuned[0], tuned_m, "m=%lld served by %s", (long long)m, info.problem);
    cr_expect(info.min[0] <= m && m <= info.max[0], "m=%lld outside [%lld, %lld]", (long long)m,
              (long long)info.min[0], (long long)info.max[0]);
    bool has_m = false;
    for (int i = 0; i < ptxtune_arg_count(&sel); i++) {
        ptxtune_arg_info ai;
        ptxtune_arg_get(&sel, i, &ai);
        if (strcmp(ai.name, "m") == 0 && strcmp(ai.kind, "u32") == 0)
            has_m = true;
    }
    cr_expect(has_m, "no parameter m in %s", info.problem);
}

Test(runtime_dyn, gemm_at_untuned_m_runs_in_its_bucket_kernel, .timeout = 600)
{
    ptxtune_runtime *rt = open_rt(PTXTUNE_ALLOW_PTX_JIT); /* no padding allowed */
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    expect_sel(rt, plain_class, 100, 32, PTXTUNE_MATCH_BUCKET, 128);
    expect_sel(rt, plain_class, 40, 32, PTXTUNE_MATCH_BUCKET, 64);
    expect_sel(rt, plain_class, 1, 32, PTXTUNE_MATCH_BUCKET, 64);
    expect_sel(rt, plain_class, 128, 32, PTXTUNE_MATCH_EXACT, 128);
    /* above every bucket: the largest serves it, flagged */
    expect_sel(rt, plain_class, 300, 32, PTXTUNE_MATCH_DEFAULT, 128);
    static const int64_t ms[] = {100, 40, 1, 65, 300};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        cr_expect_eq(run_gemm(rt, &d, plain_class, ms[i], 64, 32), 0, "m=%lld", (long long)ms[i]);
    ptxtune_close(rt);
}

Test(runtime_dyn, split_k_entries_serve_their_bucket, .timeout = 600)
{
    ptxtune_runtime *rt = open_rt(PTXTUNE_ALLOW_PTX_JIT);
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    ptxtune_error e;
    int64_t dims[4] = {100, 64, 512, 1};
    ptxtune_selection sel;
    cr_assert_eq(ptxtune_select(rt, split_class, dims, 4, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_gt(sel.workspace_bytes, 0u, "the timings favour split-K");
    expect_sel(rt, split_class, 100, 512, PTXTUNE_MATCH_BUCKET, 128);
    expect_sel(rt, split_class, 65, 512, PTXTUNE_MATCH_BUCKET, 128);
    expect_sel(rt, split_class, 33, 512, PTXTUNE_MATCH_BUCKET, 64);
    static const int64_t ms[] = {100, 65, 33, 64};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        cr_expect_eq(run_gemm(rt, &d, split_class, ms[i], 64, 512), 0, "m=%lld", (long long)ms[i]);
    /* past the largest bucket the workspace does not reach, and below the
     * smallest tuned bucket nothing serves either */
    dims[0] = 300;
    cr_expect_eq(ptxtune_select(rt, split_class, dims, 4, &sel, &e), PTXTUNE_ENOTFOUND);
    dims[0] = 7;
    cr_expect_eq(ptxtune_select(rt, split_class, dims, 4, &sel, &e), PTXTUNE_ENOTFOUND);
    ptxtune_close(rt);
}

/* `ptxtune db lookup` never answers with a config that the op's check()
 * rejects for the asked problem: a store whose nearest winners are split-K
 * GEMMs at k = 512 (the timings favour split-K) and one at k = 64 (no
 * split-K in its space), asked for k = 8 and 32 (one k tile: splitk must
 * be 1; the split winners are nearer) and two more; the printed config is
 * parsed in the asked problem's space and checked. */
static void lookup_config_in(const char *d, const char *db, const char *fp, const char *problem, char *cfg,
                             size_t n)
{
    char args[512], out[4096], err[4096];
    snprintf(args, sizeof args, "db lookup --db %s --gpu %s gemm %s", db, fp, problem);
    cr_assert_eq(test_run_ptxtune(d, args, out, sizeof out, err, sizeof err), 0, "%s: %s", args, err);
    const char *c = strstr(out, "\nconfig ");
    cr_assert(c, "%s", out);
    snprintf(cfg, n, "%.*s", (int)strcspn(c + 8, "\n"), c + 8);
}

static void lookup_config(const char *d, const char *fp, const char *problem, char *cfg, size_t n)
{
    lookup_config_in(d, "l.db", fp, problem, cfg, n);
}

static int check_config(const char *problem, const char *cfg, pt_err *e)
{
    pt_arena *a = pt_arena_new();
    search_problem sp;
    pt_target t;
    pt_target_parse("sm_90", &t, e);
    int rc = search_problem_parse(a, "gemm", problem, &sp, e);
    pt_prepared *pp = NULL;
    if (!rc)
        rc = gen_gemm_op.prepare(a, &sp.prob, &t, &pp, e);
    if (!rc) {
        pt_space s;
        pt_config c;
        gen_gemm_op.space(pp, &t, &s);
        gen_gemm_op.defaults(pp, &t, &c);
        rc = pt_config_parse(&s, cfg, &c, e);
        if (!rc)
            rc = gen_gemm_op.check(pp, &t, &c, e);
    }
    pt_arena_free(a);
    return rc;
}

Test(runtime_dyn, db_lookup_never_answers_an_invalid_config, .timeout = 600)
{
    need_store();
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    search_problem p[3];
    cr_assert_eq(search_problem_parse(a, "gemm", "m=16 n=64 k=512", &p[0], &e), 0, "%s", e.msg);
    cr_assert_eq(search_problem_parse(a, "gemm", "m=64 n=64 k=512", &p[1], &e), 0, "%s", e.msg);
    cr_assert_eq(search_problem_parse(a, "gemm", "m=256 n=64 k=64", &p[2], &e), 0, "%s", e.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/l.db", dir);
    unlink(path);
    db_store *s;
    cr_assert_eq(db_open(path, NULL, &s, &e), 0, "%s", e.msg);
    sweep_opts o = {.arch = "sm_90", .strategy = SEARCH_RANDOM, .budget = 12, .seed = 3,
                    .no_compile = true, .tool_version = "test", .git_rev = "test",
                    .measure = measure, .fingerprint = &fake_fp};
    sweep_summary sum;
    cr_assert_eq(sweep_run(s, p, 3, &o, &sum, &e), 0, "%s", e.msg);
    db_close(s);
    pt_arena_free(a);
    char fp[17], cfg[256];
    db_fingerprint_key(&fake_fp, fp);
    lookup_config(dir, fp, "m=16 n=64 k=512", cfg, sizeof cfg);
    cr_assert(strstr(cfg, "splitk=2") || strstr(cfg, "splitk=4"), "the winner is split: %s", cfg);
    static const char *const asked[] = {"m=16 n=64 k=8", "m=16 n=64 k=32", "m=100 n=64 k=16",
                                        "m=16 n=64 k=512"};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        lookup_config(dir, fp, asked[i], cfg, sizeof cfg);
        pt_err ce = {0};
        cr_expect_eq(check_config(asked[i], cfg, &ce), 0, "db lookup gemm %s answered %s: %s", asked[i],
                     cfg, ce.msg);
    }
    /* dyn=m with a column-major D (the tuned store: its k=512 winners are
     * split-K, which one k tile refuses) */
    static const char *const asked_col[] = {"m=16 n=64 k=16 dyn=m d_colmajor=1", "m=300 n=64 k=512 dyn=m d_colmajor=1",
                                            "m=100 n=64 k=8 dyn=m d_colmajor=1 beta=0.5",
                                            "m=7 n=64 k=32 dyn=m d_colmajor=1 beta=0.5"};
    for (size_t i = 0; i < sizeof asked_col / sizeof asked_col[0]; i++) {
        lookup_config_in(dir, "t.db", fp, asked_col[i], cfg, sizeof cfg);
        pt_err ce = {0};
        cr_expect_eq(check_config(asked_col[i], cfg, &ce), 0, "db lookup gemm %s answered %s: %s", asked_col[i],
                     cfg, ce.msg);
    }
}

/* One kernel row serves several problems: a dyn=m config measured at
 * m = 64 and m = 128 is one kernel in the store (identical PTX, one hash)
 * without split-K, with a row-major or a column-major D (whose ld follows
 * M); with split-K the two buckets are two kernels. */
#include <sqlite3.h>

Test(runtime_dyn, one_kernel_row_serves_both_buckets)
{
    need_store();
    char path[512];
    snprintf(path, sizeof path, "%s/t.db", dir);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(db,
                                    "SELECT instr(p.key, 'k=512') > 0, count(DISTINCT m.kernel_id) "
                                    "FROM measurements m JOIN problems p ON p.id = m.problem_id "
                                    "WHERE m.kernel_id IS NOT NULL "
                                    "GROUP BY instr(p.key, 'k=512') > 0, instr(p.key, 'd_colmajor=1') > 0, "
                                    "m.config "
                                    "HAVING count(DISTINCT m.problem_id) = 2",
                                    -1, &st, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(db));
    int shared = 0, split = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        bool big_k = sqlite3_column_int(st, 0) != 0;
        int kernels = sqlite3_column_int(st, 1);
        if (!big_k) {
            cr_expect_eq(kernels, 1, "a config at m=64 and m=128 without split-K: %d kernels", kernels);
            shared++;
        } else if (kernels == 2)
            split++;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    cr_expect_gt(shared, 0, "no config measured at both buckets");
    printf("dyn=m: %d configs share one kernel row across m=64 and m=128; %d split-K configs are two\n",
           shared, split);
}

/* ---- dyn=m with a column-major D (issue 14 item 4: cuBLAS-style
 * outputs) ----
 * D's columns are M long: its leading dimension follows M (ldd = m at run
 * time unless given), and so do C's (ldc) and the M x N epilogue tensors'
 * (stored like D); batch strides are N columns of that length; the split-K
 * workspace is laid out at m_cap. One kernel (PTX printed once at the base
 * M) runs at each M of the list on the emulator (every detector on:
 * out-of-bounds, uninitialised, races, misaligned vectors ...) with the
 * parameter m and the grid by the rule, against the float64 reference of
 * the problem at that M (outputs poisoned, every element compared, the
 * workspace back to zero); where the problem re-emitted at M is the same
 * kernel by the contract (no split-K, or M in (base/2, base]) its PTX must
 * equal the base's. */
#include <time.h>

#include "gemm_dyn.h"

typedef struct col_tally {
    int ran, failed;
    char first[1800];
} col_tally;

static void col_fail(col_tally *t, const char *what, const char *msg)
{
    if (!t->failed++)
        snprintf(t->first, sizeof t->first, "%s: %s", what, msg);
}

/* The problem at M, its kernel's text and launch (the entry's name copied
 * to the arena: the module is freed). */
static int col_build(pt_arena *a, pt_problem p, int64_t m, const pt_target *tg, const char *config,
                     pt_prepared **pp, pt_config *c, char **text, pt_launch *l, pt_err *e)
{
    p.m = m;
    int rc = gen_gemm_op.prepare(a, &p, tg, pp, e);
    pt_space s;
    if (!rc) {
        gen_gemm_op.space(*pp, tg, &s);
        gen_gemm_op.defaults(*pp, tg, c);
        rc = pt_config_parse(&s, config, c, e);
    }
    if (!rc)
        rc = gen_gemm_op.check(*pp, tg, c, e);
    ptx_module *mod = NULL;
    if (!rc)
        rc = pt_op_build(&gen_gemm_op, *pp, tg, 0, c, &mod, l, e);
    if (!rc) {
        *text = ptx_print(mod);
        l->entry = pt_arena_strdup(a, l->entry);
    }
    ptx_module_free(mod);
    return rc;
}

static void col_run(col_tally *t, pt_problem p, int64_t base, const int64_t *ms, int nm, const char *arch,
                    const char *config)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), 0, "%s", e.msg);
    p.dyn = "m";
    p.d_colmajor = true;
    pt_arena *a = pt_arena_new();
    pt_prepared *pb;
    pt_config c;
    char *text = NULL;
    pt_launch lb;
    cr_assert_eq(col_build(a, p, base, &tg, config, &pb, &c, &text, &lb, &e), 0, "%s m=%lld [%s]: %s", arch,
                 (long long)base, config, e.msg);
    int marg = -1;
    for (int i = 0; i < lb.nargs; i++)
        if (lb.args[i].kind == PT_ARG_U32)
            marg = i;
    cr_assert_geq(marg, 0, "no u32 parameter m in the dyn=m kernel");
    int64_t bm = pt_config_get(&c, "bm", 64), pers = pt_config_get(&c, "persistent", 0);
    int64_t splitk = pt_config_get(&c, "splitk", 1), bn = pt_config_get(&c, "bn", 64);
    tuner_dev_opts dopts = {.emu_threads = 2, .emu_arch = tg.sm, .emu_sm_count = 3};
    tuner_dev *d = NULL;
    cr_assert_eq(tuner_dev_open("emu", &dopts, &d, &e), 0, "%s", e.msg);
    for (int i = 0; i < nm; i++) {
        char what[700];
        snprintf(what, sizeof what, "dyn=m col-major D %s %lldx%lldx%lld (kernel of m=%lld) %s batch %lld ldd %lld "
                 "ldc %lld [%s]%s%s", arch, (long long)ms[i], (long long)p.n, (long long)p.k, (long long)base,
                 p.layout, (long long)p.batch, (long long)p.ldd, (long long)p.ldc, config,
                 p.epilogue ? " epilogue " : "", p.epilogue ? p.epilogue : "");
        pt_prepared *pq;
        pt_config cq;
        char *tq = NULL;
        pt_launch lr;
        int rc = col_build(a, p, ms[i], &tg, config, &pq, &cq, &tq, &lr, &e);
        pt_launch lq = lb;
        if (!rc) {
            bool same = strcmp(tq, text) == 0, want = splitk == 1 || ms[i] > base / 2;
            if (same != want)
                rc = pt_errf(&e, PT_EINTERNAL, "re-emitted at m=%lld: PTX %s the base's", (long long)ms[i],
                             same ? "equals" : "differs from");
            /* persistent: the tiles at this m (the device's SMs cap it at launch) */
            unsigned gx = (unsigned)((ms[i] + bm - 1) / bm * (pers ? (p.n + bn - 1) / bn : 1));
            if (!rc && lr.grid[0] != gx)
                rc = pt_errf(&e, PT_EINTERNAL, "grid x %u at m=%lld: not the rule", lr.grid[0], (long long)ms[i]);
            lq.grid[0] = gx;
            lq.args[marg].u = (uint64_t)ms[i];
        }
        free(tq);
        if (!rc)
            rc = gemm_dyn_verify(d, text, lb.entry, pq, &lq, (uint64_t)(ms[i] * 131 + p.n), &e);
        t->ran++;
        if (rc)
            col_fail(t, what, e.msg);
    }
    tuner_dev_close(d);
    free(text);
    pt_arena_free(a);
}

static const int64_t col_ms[] = {1, 7, 64, 65, 100, 128};

Test(runtime_dyn, col_major_d_one_kernel_many_m, .timeout = 600)
{
    static const struct {
        const char *layout;
        pt_dtype dt, odt;
        int64_t n, k, batch, lda, ldc, ldd;
        double alpha, beta;
        const char *epi, *arch, *config;
    } cases[] = {
        /* the direct way (fragment -> staging -> D), 16-bit D */
        {"nt", PT_BF16, PT_BF16, 72, 96, 1, 0, 0, 0, 1, 0, NULL, "sm_80", "bm=64,bn=32,wm=32,wn=16,bk=32"},
        /* C column-major too (ldc follows M), split-K: the workspace at m_cap */
        {"nn", PT_F16, PT_F32, 40, 70, 1, 0, 0, 0, 1.5, 0.25, NULL, "sm_86", "bm=32,bn=32,wm=16,wn=16,splitk=2"},
        /* batched, per-row / per-column vectors and an M x N residual stored like D */
        {"tn", PT_BF16, PT_F16, 48, 64, 2, 136, 0, 0, 1, 0, "gelu(acc + bias[n]) * s[m] + r", "sm_80",
         "bm=64,bn=16,wm=32,wn=16,raster=2"},
        /* D's and C's leading dimensions given: fixed, the kernel serves M <= ld */
        {"nt", PT_F16, PT_F16, 24, 40, 2, 0, 132, 136, 0.5, 0.5, NULL, "sm_90", "bm=16,bn=32,wm=16,wn=16,kslice=2"},
        /* int8 exact with C, a persistent grid (3 CTAs: the device's 3 SMs) */
        {"nt", PT_S8, PT_S32, 40, 64, 1, 0, 0, 0, 1, 1, NULL, "sm_80", "bm=32,bn=32,wm=16,wn=16,persistent=1"},
        /* f32 SIMT, batched split-K */
        {"nn", PT_F32, PT_F32, 40, 33, 2, 0, 0, 0, 1, 0, "relu(acc) + bias[n]", "sm_89",
         "bm=32,bn=32,tm=4,tn=4,splitk=2"},
    };
    col_tally t = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_problem p = PT_GEMM(128, cases[i].n, cases[i].k, cases[i].layout, cases[i].dt, cases[i].odt);
        p.batch = cases[i].batch;
        p.lda = cases[i].lda;
        p.ldc = cases[i].ldc;
        p.ldd = cases[i].ldd;
        p.alpha = cases[i].alpha;
        p.beta = cases[i].beta;
        p.epilogue = cases[i].epi;
        col_run(&t, p, 128, col_ms, 6, cases[i].arch, cases[i].config);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("dyn=m col-major D: one kernel, m = 1 7 64 65 100 128: %d runs, %d failed, %.1f s\n", t.ran, t.failed,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    cr_expect_eq(t.ran, 6 * (int)(sizeof cases / sizeof cases[0]));
    cr_expect_eq(t.failed, 0, "%d failed; first failure: %s", t.failed, t.first);
}

/* An exported dyn=m GEMM with a column-major D (and C) launched through
 * the runtime at M that were never tuned: f32, layout nn, A M x K and B
 * K x N row-major, C and D N columns of M (ld = the caller's M, packed),
 * D = A B + beta C against a float64 reference; a wrong leading dimension
 * or batch stride writes past the N x M elements of D (the emulator's
 * bounds check) or misplaces them. */
static int run_gemm_col(ptxtune_runtime *rt, const drv *d, const char *klass, int64_t m, int64_t n, int64_t k,
                        double beta)
{
    ptxtune_error e;
    int64_t dims[4] = {m, n, k, 1};
    ptxtune_selection sel;
    if (ptxtune_select(rt, klass, dims, 4, &sel, &e)) {
        fprintf(stderr, "select: %s\n", e.msg);
        return 1;
    }
    if (sel.padded || sel.dims[0] != m) {
        fprintf(stderr, "m=%lld: padded selection\n", (long long)m);
        return 1;
    }
    size_t na = (size_t)(m * k), nb = (size_t)(k * n), nd = (size_t)(m * n);
    float *a = calloc(na, sizeof(float)), *b = calloc(nb, sizeof(float)), *c = calloc(nd, sizeof(float));
    float *dd = calloc(nd, sizeof(float));
    double *ref = calloc(nd, sizeof(double));
    cr_assert(a && b && c && dd && ref);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++)
            a[i * k + j] = (float)((i * 3 + j * 5) % 11 - 5) / 4.0f;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++)
            b[i * n + j] = (float)((i * 7 + j * 2) % 13 - 6) / 8.0f;
    for (size_t i = 0; i < nd; i++)
        c[i] = (float)((int)(i * 5 % 9) - 4) / 2.0f;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++)
                s += (double)a[i * k + l] * b[l * n + j];
            ref[j * m + i] = s + beta * c[j * m + i]; /* column j, row i */
        }
    uint64_t da = upload(d, a, na), db = upload(d, b, nb), dc = upload(d, c, nd), dD = upload(d, dd, nd), ws = 0;
    int rc = !da || !db || !dc || !dD;
    if (!rc && sel.workspace_bytes) {
        char *z = calloc(1, sel.workspace_bytes);
        rc = !z || d->alloc(&ws, sel.workspace_bytes) || d->h2d(ws, z, sel.workspace_bytes);
        free(z);
    }
    uint64_t ptrs[8];
    int nt = 0;
    for (int i = 0; !rc && i < ptxtune_arg_count(&sel); i++) {
        ptxtune_arg_info ai;
        ptxtune_arg_get(&sel, i, &ai);
        if (ai.tensor < 0)
            continue;
        int64_t want = strcmp(ai.name, "a") == 0 ? (int64_t)na : strcmp(ai.name, "b") == 0 ? (int64_t)nb
                                                                                          : (int64_t)nd;
        if (ai.elements != want) {
            fprintf(stderr, "m=%lld: tensor %s of %lld elements, %lld expected\n", (long long)m, ai.name,
                    (long long)ai.elements, (long long)want);
            rc = 1;
        }
        ptrs[nt++] = strcmp(ai.name, "a") == 0 ? da : strcmp(ai.name, "b") == 0 ? db
                   : strcmp(ai.name, "c") == 0 ? dc : dD;
    }
    ptxtune_launch_args la;
    memset(&la, 0, sizeof la);
    la.tensors = ptrs;
    la.ntensors = nt;
    la.workspace = ws;
    if (!rc && (rc = ptxtune_launch(rt, &sel, &la, &e)) != 0)
        fprintf(stderr, "launch: %s\n", e.msg);
    if (!rc)
        rc = d->sync() || d->d2h(dd, dD, nd * sizeof(float));
    if (!rc)
        rc = check("gemm col-major D", dd, ref, nd, 1e-4);
    free(a);
    free(b);
    free(c);
    free(dd);
    free(ref);
    return rc;
}

Test(runtime_dyn, col_major_d_at_untuned_m_runs_from_the_export, .timeout = 600)
{
    ptxtune_runtime *rt = open_rt(PTXTUNE_ALLOW_PTX_JIT); /* no padding allowed */
    drv d;
    cr_assert_eq(drv_open(&d), 0);
    cr_assert(strstr(col_class, "d_colmajor=1"), "%s", col_class);
    expect_sel(rt, col_class, 100, 32, PTXTUNE_MATCH_BUCKET, 128);
    expect_sel(rt, col_class, 40, 32, PTXTUNE_MATCH_BUCKET, 64);
    expect_sel(rt, col_class, 128, 32, PTXTUNE_MATCH_EXACT, 128);
    static const int64_t ms[] = {100, 40, 1, 65, 300};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        cr_expect_eq(run_gemm_col(rt, &d, col_class, ms[i], 64, 32, 0.5), 0, "m=%lld", (long long)ms[i]);
    /* split-K: the workspace is the bucket's */
    ptxtune_error e;
    int64_t dims[4] = {100, 64, 512, 1};
    ptxtune_selection sel;
    cr_assert_eq(ptxtune_select(rt, col_split_class, dims, 4, &sel, &e), PTXTUNE_OK, "%s", e.msg);
    cr_expect_gt(sel.workspace_bytes, 0u, "the timings favour split-K");
    expect_sel(rt, col_split_class, 65, 512, PTXTUNE_MATCH_BUCKET, 128);
    expect_sel(rt, col_split_class, 33, 512, PTXTUNE_MATCH_BUCKET, 64);
    static const int64_t mk[] = {100, 65, 33};
    for (size_t i = 0; i < sizeof mk / sizeof mk[0]; i++)
        cr_expect_eq(run_gemm_col(rt, &d, col_split_class, mk[i], 64, 512, 0), 0, "m=%lld", (long long)mk[i]);
    ptxtune_close(rt);
}

/* What the selector and db lookup stand on: for dyn=m problems with a
 * column-major D the defaults and every config of the space that check()
 * passes assemble into a kernel (no config check() accepts fails to emit),
 * on sm_80, sm_90 and sm_90a; and the refusal that stays (layouts tn/tt
 * without lda) names the value. */
Test(runtime_dyn, col_major_d_dyn_m_space_defaults_check)
{
    static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
    static const char *const probs[] = {"m=128 n=256 k=256 dtype=bf16 layout=nt dyn=m d_colmajor=1",
                                        "m=16 n=64 k=512 dtype=f16 out_dtype=f32 beta=1 dyn=m d_colmajor=1 ldd=40",
                                        "m=64 n=64 k=64 dtype=f32 dyn=m d_colmajor=1 epilogue=acc+r"};
    for (size_t ai = 0; ai < sizeof archs / sizeof archs[0]; ai++)
        for (size_t pi = 0; pi < sizeof probs / sizeof probs[0]; pi++) {
            pt_arena *a = pt_arena_new();
            pt_err e = {0};
            pt_target t;
            cr_assert_eq(pt_target_parse(archs[ai], &t, &e), 0);
            search_problem sp;
            cr_assert_eq(search_problem_parse(a, "gemm", probs[pi], &sp, &e), 0, "%s: %s", probs[pi], e.msg);
            pt_prepared *pp = NULL;
            cr_assert_eq(gen_gemm_op.prepare(a, &sp.prob, &t, &pp, &e), 0, "%s %s: %s", archs[ai], probs[pi],
                         e.msg);
            pt_config c;
            gen_gemm_op.defaults(pp, &t, &c);
            cr_expect_eq(gen_gemm_op.check(pp, &t, &c, &e), 0, "%s %s: the defaults: %s", archs[ai], probs[pi],
                         e.msg);
            pt_space s;
            gen_gemm_op.space(pp, &t, &s);
            int64_t total = 1;
            for (int i = 0; i < s.nparams; i++)
                total *= s.p[i].nvalues;
            int valid = 0;
            for (int64_t x = 0; x < total && valid < 6; x += total / 24 + 1) { /* a spread sample */
                pt_config cc = c;
                int64_t r = x;
                for (int i = 0; i < s.nparams; i++) {
                    pt_config_set(&cc, s.p[i].name, s.p[i].values[r % s.p[i].nvalues]);
                    r /= s.p[i].nvalues;
                }
                pt_err ce = {0};
                if (gen_gemm_op.check(pp, &t, &cc, &ce))
                    continue;
                valid++;
                ptx_module *m = NULL;
                pt_launch l;
                cr_expect_eq(pt_op_build(&gen_gemm_op, pp, &t, 0, &cc, &m, &l, &ce), 0, "%s %s: %s", archs[ai],
                             probs[pi], ce.msg);
                ptx_module_free(m);
            }
            cr_expect_gt(valid, 0, "%s %s: no valid config sampled", archs[ai], probs[pi]);
            pt_arena_free(a);
        }
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    pt_target t;
    pt_target_parse("sm_80", &t, &e);
    search_problem sp;
    cr_assert_eq(search_problem_parse(a, "gemm", "m=64 n=64 k=64 layout=tn dyn=m d_colmajor=1", &sp, &e), 0);
    pt_prepared *pp = NULL;
    cr_expect_neq(gen_gemm_op.prepare(a, &sp.prob, &t, &pp, &e), 0);
    cr_expect(strstr(e.msg, "give lda"), "%s", e.msg);
    pt_arena_free(a);
}

/* The column-major dyn=m kernels assemble without spills, C7xxx warnings
 * or local memory (ptxas through the toolkit): the direct way with a large
 * tile (one-element units, unrolled), the staged way with C and split-K, a
 * residual in the unit loop, a given ldd with a batch, on sm_80 and sm_90. */
#include "ptx/compile.h"

Test(runtime_dyn, col_major_d_kernels_assemble_clean, .timeout = 600)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    static const char *const archs[] = {"sm_80", "sm_90"};
    static const struct {
        const char *problem, *config;
    } cases[] = {
        {"m=128 n=4096 k=4096 dtype=bf16 layout=nt", "bm=128,bn=128,bk=64,wm=64,wn=64,stages=3"},
        {"m=64 n=4096 k=4096 dtype=bf16 layout=nt beta=1", "bm=64,bn=128,bk=64,wm=32,wn=64,stages=4,splitk=4"},
        {"m=256 n=1024 k=512 dtype=f16 batch=4 epilogue='gelu(acc) + r'", "bm=64,bn=64,bk=32,wm=32,wn=32,raster=4"},
        {"m=128 n=1024 k=1024 dtype=f16 layout=tt lda=1024 ldd=1032 batch=2", "bm=128,bn=64,bk=32,wm=64,wn=32,persistent=1"},
    };
    int variants = 0, bad = 0;
    char first[2200] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t ai = 0; ai < sizeof archs / sizeof archs[0]; ai++) {
            pt_arena *a = pt_arena_new();
            pt_err ce = {0};
            pt_target tg;
            cr_assert_eq(pt_target_parse(archs[ai], &tg, &ce), 0);
            char prob[512];
            snprintf(prob, sizeof prob, "%s dyn=m d_colmajor=1", cases[i].problem);
            search_problem sp;
            cr_assert_eq(search_problem_parse(a, "gemm", prob, &sp, &ce), 0, "%s: %s", prob, ce.msg);
            pt_prepared *pp = NULL;
            pt_config c;
            pt_space s;
            char *text = NULL;
            ptx_module *m = NULL;
            pt_launch l;
            int rc = gen_gemm_op.prepare(a, &sp.prob, &tg, &pp, &ce);
            if (!rc) {
                gen_gemm_op.space(pp, &tg, &s);
                gen_gemm_op.defaults(pp, &tg, &c);
                rc = pt_config_parse(&s, cases[i].config, &c, &ce);
            }
            if (!rc)
                rc = pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &m, &l, &ce);
            if (!rc)
                text = ptx_print(m);
            ptx_module_free(m);
            pt_resource r = {0};
            if (!rc && (strstr(text, "ld.local") || strstr(text, "st.local")))
                rc = pt_errf(&ce, PT_EINTERNAL, "local memory in the PTX");
            if (!rc)
                rc = pt_compile(comp, text, &tg, NULL, NULL, &r, &ce);
            if (!rc && (r.spill_stores || r.spill_loads || r.stack_frame))
                rc = pt_errf(&ce, PT_EINTERNAL, "spills %d/%d stack %d", r.spill_stores, r.spill_loads,
                             r.stack_frame);
            for (int q = 0; !rc && q < r.ncodes; q++)
                if (r.codes[q][0] == 'C' && r.codes[q][1] == '7')
                    rc = pt_errf(&ce, PT_EINTERNAL, "ptxas warning %s", r.codes[q]);
            free(text);
            variants++;
            if (rc && !bad++)
                snprintf(first, sizeof first, "%s %s [%s]: %s", archs[ai], prob, cases[i].config, ce.msg);
            pt_arena_free(a);
        }
    printf("dyn=m col-major D: %d variants assembled with %s, %d failed\n", variants, pt_compiler_describe(comp),
           bad);
    pt_compiler_close(comp);
    cr_expect_eq(bad, 0, "first: %s", first);
}
