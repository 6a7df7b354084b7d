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
    search_problem p[4];
    static const char *const items[] = {"m=64 n=64 k=32 dyn=m", "m=128 n=64 k=32 dyn=m",
                                        "m=64 n=64 k=512 dyn=m", "m=128 n=64 k=512 dyn=m"};
    for (int i = 0; i < 4; i++)
        if (search_problem_parse(a, "gemm", items[i], &p[i], &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
    snprintf(plain_class, sizeof plain_class, "%s", p[0].klass);
    snprintf(split_class, sizeof split_class, "%s", p[2].klass);
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
        fprintf(f, "%s\n%s\n", plain_class, split_class);
        fclose(f);
    } else {
        char buf[2048];
        test_slurp(done, buf, sizeof buf);
        char *nl = strchr(buf, '\n');
        cr_assert(nl);
        *nl = '\0';
        snprintf(plain_class, sizeof plain_class, "%s", buf);
        char *nl2 = strchr(nl + 1, '\n');
        if (nl2)
            *nl2 = '\0';
        snprintf(split_class, sizeof split_class, "%s", nl + 1);
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
static void lookup_config(const char *d, const char *fp, const char *problem, char *cfg, size_t n)
{
    char args[512], out[4096], err[4096];
    snprintf(args, sizeof args, "db lookup --db l.db --gpu %s gemm %s", fp, problem);
    cr_assert_eq(test_run_ptxtune(d, args, out, sizeof out, err, sizeof err), 0, "%s: %s", args, err);
    const char *c = strstr(out, "\nconfig ");
    cr_assert(c, "%s", out);
    snprintf(cfg, n, "%.*s", (int)strcspn(c + 8, "\n"), c + 8);
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
}

/* One kernel row serves several problems: a dyn=m config measured at
 * m = 64 and m = 128 is one kernel in the store (identical PTX, one hash)
 * without split-K; with split-K the two buckets are two kernels. */
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
                                    "GROUP BY instr(p.key, 'k=512') > 0, m.config "
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
