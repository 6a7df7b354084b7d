/* Exports and the launch contract (issue 14): the contract an export
 * carries is the one the sweep computed at tune time, whichever side
 * computes it; and `export --max-kernels / --max-slowdown`, the smallest
 * table that serves every problem within a bound (a set cover over the
 * stored measurements), on planted timings. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db.h"
#include "search/problem.h"
#include "test_util.h"
#include "tuner/contract.h"
#include "tuner/tune.h"

static char tmpdir[64];

static void mk_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ptxtune_cov_XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static const char *tpath(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

TestSuite(cover, .init = mk_tmp, .fini = rm_tmp);

/* ---- the contract: tune time and export agree --------------------------- */

static const db_fingerprint fake_fp = {"Fake GPU (contract test)", 80, 8, "13000", "none", 80,
                                       "ptxtune 0.1.0", "test-bench/1"};

/* Deterministic times by config; the rows-at-run-time configs fastest. */
static int measure(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    (void)ctx;
    (void)e;
    uint64_t h = pt_hash64(c->config_str, strlen(c->config_str));
    double t = 1e-5 * (1 + (double)(h % 1000) / 1000.0);
    if (pt_config_get(c->config, "shape_imm", 1) == 0)
        t /= 10;
    snprintf(m->cls, sizeof m->cls, "ok");
    m->verified = m->timed = true;
    m->t_min = t * 0.99;
    m->t_median = t;
    m->t_max = t * 1.01;
    m->spread = 0.001;
    m->reps = 10;
    return PT_OK;
}

/* softmax at 16 and 64 rows, an f32 GEMM: 12 candidates each. */
static void tuned_store(const char *path)
{
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    search_problem p[3];
    static const char *const ops[] = {"elementwise", "elementwise", "gemm"};
    static const char *const items[] = {"expr=\"y = softmax(x, -1)\" shape=x=16x256",
                                        "expr=\"y = softmax(x, -1)\" shape=x=64x256",
                                        "m=16 n=64 k=32"};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(search_problem_parse(a, ops[i], items[i], &p[i], &e), PT_OK, "%s", e.msg);
    db_store *s;
    cr_assert_eq(db_open(path, NULL, &s, &e), PT_OK, "%s", e.msg);
    sweep_opts o = {.arch = "sm_80", .strategy = SEARCH_RANDOM, .budget = 12, .seed = 1,
                    .no_compile = true, .tool_version = "test", .git_rev = "test",
                    .measure = measure, .fingerprint = &fake_fp};
    sweep_summary sum;
    cr_assert_eq(sweep_run(s, p, 3, &o, &sum, &e), PT_OK, "sweep: %s", e.msg);
    db_close(s);
    pt_arena_free(a);
}

static char *export_str(db_store *s, db_format f)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_err e = {0};
    int n = 0;
    cr_assert_eq(db_export_text(s, f, NULL, NULL, &b, &n, &e), PT_OK, "%s", e.msg);
    return pt_buf_take(&b);
}

/* Every row's contract is the one the tune-time computation gives for its
 * problem and config (tuner_contract_json over the config as built), and
 * exporting again, or from the bundle, gives the same bytes. Written
 * before the contract moved out of the tuning loop: it held then and must
 * hold after. */
Test(cover, exports_carry_the_tune_time_contracts)
{
    const char *db = tpath("t.db");
    tuned_store(db);
    db_store *s;
    pt_err e = {0};
    db_open_opts ro = {.readonly = true, .must_exist = true};
    cr_assert_eq(db_open(db, &ro, &s, &e), PT_OK, "%s", e.msg);
    char *j1 = export_str(s, DB_FMT_JSON), *c1 = export_str(s, DB_FMT_CSV),
         *h1 = export_str(s, DB_FMT_CHEADER);
    json_error_t je;
    json_t *t = json_loads(j1, 0, &je);
    cr_assert(t, "%s", je.text);
    json_t *rows = json_object_get(t, "rows");
    cr_assert_eq(json_array_size(rows), 3);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        const char *key = json_string_value(json_object_get(json_object_get(r, "problem"), "key"));
        json_t *got = json_object_get(json_object_get(r, "launch"), "contract");
        cr_assert(json_is_object(got), "row %s has no contract", key);
        json_t *prov = json_object_get(json_object_get(r, "measurement"), "provenance");
        pt_buf want;
        pt_buf_init(&want);
        cr_assert_eq(tuner_contract_row(
                         json_string_value(json_object_get(json_object_get(r, "problem"), "op")),
                         key, json_string_value(json_object_get(prov, "arch")),
                         (int)json_integer_value(
                             json_object_get(json_object_get(r, "fingerprint"), "ptx_version")),
                         json_string_value(json_object_get(r, "config")), &want, &e),
                     PT_OK, "%s", e.msg);
        json_t *w = json_loads(want.s, 0, &je);
        cr_assert(w, "%s", je.text);
        char *gs = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS),
             *ws = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
        cr_expect(json_equal(got, w), "row %s:\nexported %s\ntune-time %s", key, gs, ws);
        free(gs);
        free(ws);
        json_decref(w);
        pt_buf_free(&want);
    }
    json_decref(t);
    /* again: the same bytes */
    char *j2 = export_str(s, DB_FMT_JSON), *c2 = export_str(s, DB_FMT_CSV),
         *h2 = export_str(s, DB_FMT_CHEADER);
    cr_expect_str_eq(j2, j1);
    cr_expect_str_eq(c2, c1);
    cr_expect_str_eq(h2, h1);
    /* the bundle holds the same rows: its JSON export is the store's */
    cr_assert_eq(db_export_file(s, DB_FMT_BUNDLE, NULL, NULL, tpath("b.db"), NULL, &e), PT_OK,
                 "%s", e.msg);
    db_store *b;
    cr_assert_eq(db_open(tpath("b.db"), &ro, &b, &e), PT_OK, "%s", e.msg);
    char *jb = export_str(b, DB_FMT_JSON);
    cr_expect_str_eq(jb, j1);
    db_close(b);
    db_close(s);
    free(j1);
    free(c1);
    free(h1);
    free(j2);
    free(c2);
    free(h2);
    free(jb);
}

/* The tuning loop computes no contract for a candidate that is not served:
 * after the sweep only each problem's winner has one (36 ok rows, 3
 * winners). Before the move every ok row had one. */
Test(cover, the_sweep_gives_only_winners_a_contract)
{
    const char *db = tpath("w.db");
    tuned_store(db);
    db_store *s;
    pt_err e = {0};
    db_open_opts ro = {.readonly = true, .must_exist = true};
    cr_assert_eq(db_open(db, &ro, &s, &e), PT_OK, "%s", e.msg);
    int64_t ok = 0, with = 0, winners = 0, served = 0;
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements WHERE status = 'ok'", &ok, &e),
                 PT_OK);
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements WHERE launch LIKE"
                                 " '%\"contract\"%'", &with, &e), PT_OK);
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM winners", &winners, &e), PT_OK);
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM winners w JOIN measurements m ON m.id ="
                                 " w.measurement_id WHERE m.launch LIKE '%\"contract\"%'",
                              &served, &e), PT_OK);
    cr_expect_eq(winners, 3);
    cr_expect_gt(ok, 3);
    cr_expect_eq(served, winners, "%lld of %lld winners have a contract", (long long)served,
                 (long long)winners);
    cr_expect_eq(with, winners, "%lld rows have a contract, %lld winners", (long long)with,
                 (long long)winners);
    db_close(s);
}

/* ---- fewer kernels: the cover on planted timings ------------------------- */

static const db_fingerprint dev_fp = {"NVIDIA Test GPU", 90, 132, "13000", "nvJitLink 13.0", 90,
                                      "ptxtune 0.1.0", "ptxtune-bench/1"};

typedef struct planted {
    db_store *s;
    int64_t run, prob[96];
} planted;

static void plant_open(planted *pl, const char *path, int nprob)
{
    pt_err e = {0};
    cr_assert_eq(db_open(path, NULL, &pl->s, &e), PT_OK, "%s", e.msg);
    int64_t fp;
    cr_assert_eq(db_fingerprint_put(pl->s, &dev_fp, &fp, &e), PT_OK, "%s", e.msg);
    for (int i = 0; i < nprob; i++) {
        char key[128], dims[64];
        int rows = i < 8 ? 16 << i : 4096 + i; /* beyond 8: many problems */
        snprintf(key, sizeof key, "elementwise expr=\"y = softmax(x, -1)\" shape=x=%dx256",
                 rows);
        snprintf(dims, sizeof dims, "%d,256", rows);
        db_problem p = {"elementwise", key, "elementwise expr=\"y = softmax(x, -1)\" shape=x=#x#",
                        dims, "", 1e6, 1e6, true};
        cr_assert_eq(db_problem_put(pl->s, &p, &pl->prob[i], &e), PT_OK, "%s", e.msg);
    }
    db_run r = {.fingerprint_id = fp, .tool_version = "0.1.0", .git_rev = "x",
                .strategy = "random", .budget = "10", .seed = 1, .backend = "cuda",
                .arch = "sm_90", .args_key = "k", .host = "h", .pid = 1};
    cr_assert_eq(db_run_begin(pl->s, &r, &pl->run, &e), PT_OK, "%s", e.msg);
}

/* Kernel NAME timed t (seconds) on problem i; compile_ms stored with it. */
static void plant(planted *pl, const char *name, int i, double t, int verified)
{
    char ptx[128], hash[17], cfg[64], res[96];
    snprintf(ptx, sizeof ptx, ".version 8.0\n.entry %s\n", name);
    db_kernel_hash(ptx, strlen(ptx), hash);
    snprintf(cfg, sizeof cfg, "k=%s", name);
    snprintf(res, sizeof res, "{\"registers\":32,\"compile_ms\":%d}", 100 + (int)strlen(name));
    db_kernel k = {hash, "elementwise", cfg, name, ptx};
    db_cubin c = {"sm_90", "nvJitLink 13.0", "\x7f" "ELF", 4, res};
    db_measurement m = {.run_id = pl->run, .problem_id = pl->prob[i], .config = cfg,
                        .final = true, .status = "ok", .error = "", .source = "measured",
                        .verified = verified, .t_min = t, .t_median = t, .t_max = t,
                        .spread = 0.001, .reps = 10, .tflops = NAN, .gbps = NAN,
                        .launch = "{\"grid\":[1,1,1],\"block\":[128,1,1],\"smem\":0}"};
    pt_err e = {0};
    cr_assert_eq(db_record(pl->s, &k, &c, &m, NULL, &e), PT_OK, "%s", e.msg);
}

/* Five problems whose winners are five distinct kernels w0..w4 (1 us each);
 * g1 serves p0..p2 within 3% (+2, +1, +3 %) and p3 at +10%; g2 serves p3,
 * p4 within 3% (+2.5, +0.5 %) and p0 at +8%; g3 serves all five at +4..8 %. */
static void five_problems(const char *path)
{
    planted pl;
    plant_open(&pl, path, 5);
    const double us = 1e-6;
    for (int i = 0; i < 5; i++) {
        char w[8];
        snprintf(w, sizeof w, "w%d", i);
        plant(&pl, w, i, us, 1);
        plant(&pl, "g3", i, us * (1.04 + 0.01 * i), 1);
    }
    plant(&pl, "g1", 0, us * 1.02, 1);
    plant(&pl, "g1", 1, us * 1.01, 1);
    plant(&pl, "g1", 2, us * 1.03, 1);
    plant(&pl, "g1", 3, us * 1.10, 1);
    plant(&pl, "g2", 3, us * 1.025, 1);
    plant(&pl, "g2", 4, us * 1.005, 1);
    plant(&pl, "g2", 0, us * 1.08, 1);
    /* faster than g2 on p4 but not verified: serves nothing */
    plant(&pl, "u", 4, us * 1.001, 0);
    db_close(pl.s);
}

static const char *hash_of(const char *name)
{
    static char h[4][17];
    static int k;
    k = (k + 1) % 4;
    char ptx[128];
    snprintf(ptx, sizeof ptx, ".version 8.0\n.entry %s\n", name);
    db_kernel_hash(ptx, strlen(ptx), h[k]);
    return h[k];
}

static db_export_sel *cover_of(const char *path, int maxk, double maxs, db_cover_summary *sum,
                               int want_rc, pt_err *e)
{
    db_store *s;
    db_open_opts ro = {.readonly = true, .must_exist = true};
    cr_assert_eq(db_open(path, &ro, &s, e), PT_OK, "%s", e->msg);
    db_cover_opts o = {maxk, maxs};
    db_export_sel *x = NULL;
    int rc = db_export_select(s, NULL, NULL, &o, &x, sum, e);
    db_close(s);
    cr_assert_eq(rc, want_rc, "rc %d: %s", rc, e->msg);
    return x;
}

/* the kernel serving problem i (rows are in problem key order: 128, 16,
 * 256, 32, 64 rows sort as text) */
static const char *served_by(const db_export_sel *x, int i)
{
    char want[128];
    snprintf(want, sizeof want, "elementwise expr=\"y = softmax(x, -1)\" shape=x=%dx256", 16 << i);
    for (size_t r = 0; r < db_sel_count(x); r++)
        if (strcmp(db_sel_row_at(x, r)->problem_key, want) == 0)
            return db_sel_row_at(x, r)->kernel_hash;
    return "";
}

Test(cover, two_kernels_serve_five_problems_within_3_percent)
{
    const char *db = tpath("c.db");
    five_problems(db);
    pt_err e = {0};
    db_cover_summary sum;
    db_export_sel *x = cover_of(db, 0, 0.03, &sum, PT_OK, &e);
    cr_assert_eq(db_sel_count(x), 5);
    cr_expect_eq(sum.winner_kernels, 5);
    cr_expect_eq(sum.kernels, 2);
    cr_expect(sum.exact);
    const char *g1 = hash_of("g1"), *g2 = hash_of("g2");
    for (int i = 0; i < 3; i++)
        cr_expect_str_eq(served_by(x, i), g1, "problem %d", i);
    for (int i = 3; i < 5; i++)
        cr_expect_str_eq(served_by(x, i), g2, "problem %d", i);
    /* the bound holds row by row; the figures are the planted ratios */
    for (size_t r = 0; r < db_sel_count(x); r++)
        cr_expect_leq(db_sel_row_at(x, r)->slowdown, 0.03 + 1e-12);
    cr_expect_float_eq(sum.worst, 0.03, 1e-9);
    cr_expect_float_eq(sum.mean, (0.02 + 0.01 + 0.03 + 0.025 + 0.005) / 5, 1e-9);
    /* compile time: the stored compile_ms of g1 and g2 (102 ms each) */
    cr_expect_eq(sum.compile_known, 2);
    cr_expect_float_eq(sum.compile_s, 0.204, 1e-9);
    db_export_sel_free(x);

    /* 2%: g1 keeps p0 and p1; p2 and p3 need their winners; p4 its winner
     * (0% beats g2's 0.5% at the same count and worst): 4 kernels */
    x = cover_of(db, 0, 0.02, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 4);
    cr_expect_float_eq(sum.worst, 0.02, 1e-9);
    cr_expect_float_eq(sum.mean, (0.02 + 0.01) / 5, 1e-9);
    cr_expect_str_eq(served_by(x, 4), hash_of("w4"));
    db_export_sel_free(x);

    /* 0%: the winners themselves */
    x = cover_of(db, 0, 0, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 5);
    cr_expect_float_eq(sum.worst, 0, 1e-12);
    db_export_sel_free(x);

    /* two kernels, no slowdown bound: the least worst slowdown is g1 + g2 */
    x = cover_of(db, 2, -1, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 2);
    cr_expect_float_eq(sum.worst, 0.03, 1e-9);
    db_export_sel_free(x);
}

Test(cover, one_kernel_reports_the_unavoidable_slowdown)
{
    const char *db = tpath("c1.db");
    five_problems(db);
    pt_err e = {0};
    db_cover_summary sum;
    db_export_sel *x = cover_of(db, 1, -1, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 1);
    for (int i = 0; i < 5; i++)
        cr_expect_str_eq(served_by(x, i), hash_of("g3"), "problem %d", i);
    cr_expect_float_eq(sum.worst, 0.08, 1e-9);
    cr_expect_float_eq(sum.mean, 0.06, 1e-9);
    db_export_sel_free(x);
    /* one kernel within 3%: none; the message names a problem left out */
    e = (pt_err){0};
    x = cover_of(db, 1, 0.03, &sum, PT_EINVAL, &e);
    cr_expect_null(x);
    cr_expect(strstr(e.msg, "no 1 kernels serve every problem") && strstr(e.msg, "shape=x="),
              "%s", e.msg);
    /* 0%: only the five winners meet it; four kernels cannot */
    e = (pt_err){0};
    x = cover_of(db, 4, 0, &sum, PT_EINVAL, &e);
    cr_expect_null(x);
    cr_expect(strstr(e.msg, "--max-kernels 4"), "%s", e.msg);
}

/* A problem with no verified row cannot be served; the CLI's bad values are
 * one line and exit 2; every format carries the cover's rows. */
Test(cover, the_cli_exports_the_cover_in_every_format_and_refuses_bad_bounds)
{
    five_problems(tpath("c.db"));
    char out[1 << 16], err[4096];
    static const char *const bad[][2] = {
        {"--max-kernels 0", "bad --max-kernels '0'"},
        {"--max-kernels -2", "bad --max-kernels '-2'"},
        {"--max-kernels x3", "bad --max-kernels 'x3'"},
        {"--max-slowdown -1%", "bad --max-slowdown '-1%'"},
        {"--max-slowdown abc", "bad --max-slowdown 'abc'"},
        {"--max-slowdown nan", "bad --max-slowdown 'nan'"},
        {"--max-slowdown 3%%", "bad --max-slowdown '3%%'"},
        {"--max-kernels 1 --max-slowdown 3%", "no 1 kernels serve every problem"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "export --db c.db --format json --out t.json %s", bad[i][0]);
        int rc = test_run_ptxtune(tmpdir, cmd, out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "%s: rc %d", bad[i][0], rc);
        cr_expect(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
        cr_expect(strchr(err, '\n') == strrchr(err, '\n'), "%s: not one line: %s", bad[i][0], err);
    }
    cr_expect_neq(access(tpath("t.json"), F_OK), 0, "a refused export wrote its --out");
    /* every format: five rows of two kernels */
    cr_assert_eq(test_run_ptxtune(tmpdir, "export --db c.db --format json --out t.json "
                                          "--max-slowdown 3%", out, sizeof out, err, sizeof err),
                 0, "%s", err);
    cr_expect(strstr(err, "2 kernels serve 5 problems (the winners: 5 kernels)"), "%s", err);
    cr_expect(strstr(err, "worst 3.00%, mean 1.80%"), "%s", err);
    char text[1 << 16];
    test_slurp(tpath("t.json"), text, sizeof text);
    json_t *t = json_loads(text, 0, NULL);
    cr_assert(t);
    json_t *rows = json_object_get(t, "rows");
    cr_expect_eq(json_array_size(rows), 5);
    int g1 = 0, g2 = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const char *h = json_string_value(
            json_object_get(json_object_get(json_array_get(rows, i), "kernel"), "hash"));
        g1 += strcmp(h, hash_of("g1")) == 0;
        g2 += strcmp(h, hash_of("g2")) == 0;
    }
    cr_expect_eq(g1, 3);
    cr_expect_eq(g2, 2);
    json_decref(t);
    cr_assert_eq(test_run_ptxtune(tmpdir, "export --db c.db --format csv --out t.csv "
                                          "--max-slowdown 3%", out, sizeof out, err, sizeof err),
                 0, "%s", err);
    test_slurp(tpath("t.csv"), text, sizeof text);
    int lines = 0, n1 = 0;
    for (char *p = text; (p = strchr(p, '\n')); p++)
        lines++;
    for (char *p = text; (p = strstr(p, hash_of("g1"))); p++)
        n1++;
    cr_expect_eq(lines, 6, "%s", text);
    cr_expect_eq(n1, 3);
    cr_assert_eq(test_run_ptxtune(tmpdir, "export --db c.db --format c-header --out t.h "
                                          "--max-kernels 1", out, sizeof out, err, sizeof err),
                 0, "%s", err);
    cr_expect(strstr(err, "1 kernels serve 5 problems") && strstr(err, "worst 8.00%, mean 6.00%"),
              "%s", err);
    test_slurp(tpath("t.h"), text, sizeof text);
    cr_expect(strstr(text, "ptxtune_table_size = 5;"), "%.300s", text);
    cr_assert_eq(test_run_ptxtune(tmpdir, "export --db c.db --format bundle --out b.db "
                                          "--max-slowdown 3% --json", out, sizeof out, err,
                                  sizeof err),
                 0, "%s", err);
    json_t *rep = json_loads(out, 0, NULL);
    cr_assert(rep, "%s", out);
    cr_expect_str_eq(json_string_value(json_object_get(rep, "format")), "ptxtune-export");
    json_t *sm = json_object_get(rep, "summary");
    cr_expect_eq(json_integer_value(json_object_get(sm, "kernels")), 2);
    cr_expect_eq(json_integer_value(json_object_get(sm, "winner_kernels")), 5);
    cr_expect_float_eq(json_real_value(json_object_get(sm, "worst_slowdown")), 0.03, 1e-9);
    cr_expect_eq(json_array_size(json_object_get(rep, "rows")), 5);
    json_decref(rep);
    db_store *b;
    pt_err e = {0};
    db_open_opts ro = {.readonly = true, .must_exist = true};
    cr_assert_eq(db_open(tpath("b.db"), &ro, &b, &e), PT_OK, "%s", e.msg);
    int64_t nk = 0, nw = 0;
    cr_assert_eq(db_query_int(b, "SELECT count(*) FROM kernels", &nk, &e), PT_OK);
    cr_assert_eq(db_query_int(b, "SELECT count(*) FROM winners", &nw, &e), PT_OK);
    cr_expect_eq(nk, 2);
    cr_expect_eq(nw, 5);
    db_close(b);
    /* a problem with only an unverified row: named */
    planted pl;
    plant_open(&pl, tpath("u.db"), 2);
    plant(&pl, "w0", 0, 1e-6, 1);
    plant(&pl, "w1", 1, 1e-6, 0);
    db_close(pl.s);
    int rc = test_run_ptxtune(tmpdir, "export --db u.db --format json --max-kernels 3", out,
                              sizeof out, err, sizeof err);
    cr_expect_eq(rc, 2);
    cr_expect(strstr(err, "no kernel serves 'elementwise expr=\"y = softmax(x, -1)\" shape=x=32x256'"),
              "%s", err);
}

/* Where greedy set cover is not optimal the exact search is: a covers
 * p0..p3, b covers p0, p1, p4 and c covers p2, p3, p5 (all +1%); greedy
 * takes a first and needs three kernels, {b, c} is two. */
Test(cover, the_exact_search_beats_greedy_on_a_small_table)
{
    planted pl;
    plant_open(&pl, tpath("g.db"), 6);
    for (int i = 0; i < 6; i++) {
        char w[8];
        snprintf(w, sizeof w, "w%d", i);
        plant(&pl, w, i, 1e-6, 1);
    }
    static const int a[] = {0, 1, 2, 3}, b[] = {0, 1, 4}, c[] = {2, 3, 5};
    for (int i = 0; i < 4; i++)
        plant(&pl, "a", a[i], 1.01e-6, 1);
    for (int i = 0; i < 3; i++) {
        plant(&pl, "b", b[i], 1.01e-6, 1);
        plant(&pl, "c", c[i], 1.01e-6, 1);
    }
    db_close(pl.s);
    pt_err e = {0};
    db_cover_summary sum;
    db_export_sel *x = cover_of(tpath("g.db"), 0, 0.03, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 2);
    cr_expect(sum.exact);
    for (int i = 0; i < 6; i++)
        cr_expect_str_eq(served_by(x, i), hash_of(i == 0 || i == 1 || i == 4 ? "b" : "c"),
                         "problem %d", i);
    db_export_sel_free(x);
}

/* Times by config and problem: each problem's winner is another kernel. */
static int measure2(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    (void)ctx;
    (void)e;
    uint64_t h = pt_hash64(c->config_str, strlen(c->config_str)) ^
                 pt_hash64(c->sp->key, strlen(c->sp->key));
    double t = 1e-5 * (1 + (double)(h % 1000) / 1000.0);
    snprintf(m->cls, sizeof m->cls, "ok");
    m->verified = m->timed = true;
    m->t_min = m->t_median = m->t_max = t;
    m->spread = 0.001;
    m->reps = 10;
    return PT_OK;
}

/* A --max-kernels table's rows are mostly not winners: the sweep gave them
 * no contract, the export computes each (the tune-time text), stores it
 * back, and the next export reads it (the same bytes). One kernel with the
 * rows at run time serves both row counts. */
Test(cover, cover_rows_get_their_contract_at_export)
{
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    search_problem p[2];
    cr_assert_eq(search_problem_parse(a, "elementwise", "expr=\"y = x * 2 + 1\" shape=x=16x256",
                                      &p[0], &e), PT_OK, "%s", e.msg);
    cr_assert_eq(search_problem_parse(a, "elementwise", "expr=\"y = x * 2 + 1\" shape=x=64x256",
                                      &p[1], &e), PT_OK, "%s", e.msg);
    db_store *s;
    cr_assert_eq(db_open(tpath("f.db"), NULL, &s, &e), PT_OK, "%s", e.msg);
    sweep_opts o = {.arch = "sm_80", .strategy = SEARCH_EXHAUSTIVE, .budget = 0, .seed = 1,
                    .no_compile = true, .tool_version = "test", .git_rev = "test",
                    .measure = measure2, .fingerprint = &fake_fp};
    sweep_summary sum;
    cr_assert_eq(sweep_run(s, p, 2, &o, &sum, &e), PT_OK, "sweep: %s", e.msg);
    int64_t before = 0;
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements WHERE launch LIKE"
                                 " '%\"contract\"%'", &before, &e), PT_OK);
    cr_expect_eq(before, 2);
    db_close(s);
    pt_arena_free(a);
    char out[1 << 14], err[4096];
    cr_assert_eq(test_run_ptxtune(tmpdir, "export --db f.db --format json --out c1.json "
                                          "--max-kernels 1", out, sizeof out, err, sizeof err),
                 0, "%s", err);
    cr_expect(strstr(err, "1 kernels serve 2 problems (the winners: 2 kernels)"), "%s", err);
    static char t1[1 << 20], t2[1 << 20];
    test_slurp(tpath("c1.json"), t1, sizeof t1);
    json_t *t = json_loads(t1, 0, NULL);
    cr_assert(t);
    json_t *rows = json_object_get(t, "rows");
    cr_assert_eq(json_array_size(rows), 2);
    const char *h0 = json_string_value(
        json_object_get(json_object_get(json_array_get(rows, 0), "kernel"), "hash"));
    const char *h1 = json_string_value(
        json_object_get(json_object_get(json_array_get(rows, 1), "kernel"), "hash"));
    cr_expect_str_eq(h0, h1);
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(rows, i);
        json_t *got = json_object_get(json_object_get(r, "launch"), "contract");
        cr_assert(json_is_object(got), "row %zu has no contract", i);
        pt_buf want;
        pt_buf_init(&want);
        cr_assert_eq(tuner_contract_row("elementwise",
                                        json_string_value(json_object_get(
                                            json_object_get(r, "problem"), "key")),
                                        "sm_80", fake_fp.ptx_version,
                                        json_string_value(json_object_get(r, "config")), &want,
                                        &e),
                     PT_OK, "%s", e.msg);
        json_t *w = json_loads(want.s, 0, NULL);
        cr_expect(json_equal(got, w), "row %zu: the export's contract is not the tune-time one", i);
        /* the rows at run time: 16 and 64 rows, one kernel */
        json_t *d0 = json_array_get(json_object_get(got, "dims"), 0);
        cr_expect_eq(json_integer_value(json_object_get(d0, "min")), 1);
        cr_expect_geq(json_integer_value(json_object_get(d0, "max")), 64);
        json_decref(w);
        pt_buf_free(&want);
    }
    json_decref(t);
    /* stored back: the rows of the table that were no winner have one now */
    db_open_opts ro = {.readonly = true, .must_exist = true};
    cr_assert_eq(db_open(tpath("f.db"), &ro, &s, &e), PT_OK, "%s", e.msg);
    int64_t after = 0;
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements WHERE launch LIKE"
                                 " '%\"contract\"%'", &after, &e), PT_OK);
    db_close(s);
    cr_expect_gt(after, before, "the computed contracts were not stored");
    cr_expect_leq(after, before + 2);
    cr_assert_eq(test_run_ptxtune(tmpdir, "export --db f.db --format json --out c2.json "
                                          "--max-kernels 1", out, sizeof out, err, sizeof err),
                 0, "%s", err);
    test_slurp(tpath("c2.json"), t2, sizeof t2);
    cr_expect_str_eq(t2, t1);
}

/* The mean decides between sets of the same size and worst slowdown, and
 * the exact search weighs sets whole: p2's winner is unverified, so only a
 * (+3% on p0, p1, p2) serves it; with 3 kernels greedy adds x (+1% on p0
 * and p1) then w0 (mean 1.33%), the best set is a, w0, w1 (mean 1%). */
Test(cover, the_mean_decides_among_equal_tables)
{
    planted pl;
    plant_open(&pl, tpath("m.db"), 3);
    plant(&pl, "w0", 0, 1e-6, 1);
    plant(&pl, "w1", 1, 1e-6, 1);
    plant(&pl, "u2", 2, 1e-6, 0);
    for (int i = 0; i < 3; i++)
        plant(&pl, "a", i, 1.03e-6, 1);
    plant(&pl, "x", 0, 1.01e-6, 1);
    plant(&pl, "x", 1, 1.01e-6, 1);
    db_close(pl.s);
    pt_err e = {0};
    db_cover_summary sum;
    db_export_sel *x = cover_of(tpath("m.db"), 3, -1, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 3);
    cr_expect_str_eq(served_by(x, 0), hash_of("w0"));
    cr_expect_str_eq(served_by(x, 1), hash_of("w1"));
    cr_expect_str_eq(served_by(x, 2), hash_of("a"));
    cr_expect_float_eq(sum.worst, 0.03, 1e-9);
    cr_expect_float_eq(sum.mean, 0.01, 1e-9);
    db_export_sel_free(x);
    /* one kernel: only a serves p2 */
    x = cover_of(tpath("m.db"), 1, -1, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 1);
    cr_expect_float_eq(sum.mean, 0.03, 1e-9);
    db_export_sel_free(x);
}

/* Beyond 64 candidate kernels the cover is greedy (and says so): 70
 * problems on a ring, kernel g_i serving problems i and i+1 at +1%; the
 * bound still holds, the table is smaller than the winners' 70 kernels and
 * no smaller than the optimum 35; 10 kernels cannot serve 70 problems. */
Test(cover, beyond_64_kernels_the_greedy_cover_keeps_the_bound)
{
    planted pl;
    enum { N = 70 };
    plant_open(&pl, tpath("r.db"), N);
    for (int i = 0; i < N; i++) {
        char w[16];
        snprintf(w, sizeof w, "w%d", i);
        plant(&pl, w, i, 1e-6, 1);
        snprintf(w, sizeof w, "g%d", i);
        plant(&pl, w, i, 1.01e-6, 1);
        plant(&pl, w, (i + 1) % N, 1.01e-6, 1);
    }
    db_close(pl.s);
    pt_err e = {0};
    db_cover_summary sum;
    db_export_sel *x = cover_of(tpath("r.db"), 0, 0.03, &sum, PT_OK, &e);
    cr_expect(!sum.exact);
    cr_expect_eq(sum.winner_kernels, N);
    cr_expect_eq(db_sel_count(x), N);
    cr_expect_geq(sum.kernels, N / 2);
    cr_expect_lt(sum.kernels, N);
    cr_expect_leq(sum.worst, 0.01 + 1e-9);
    for (size_t r = 0; r < db_sel_count(x); r++)
        cr_expect_leq(db_sel_row_at(x, r)->slowdown, 0.03);
    db_export_sel_free(x);
    x = cover_of(tpath("r.db"), 40, -1, &sum, PT_OK, &e);
    cr_expect_leq(sum.kernels, 40);
    cr_expect_leq(sum.worst, 0.01 + 1e-9);
    db_export_sel_free(x);
    e = (pt_err){0};
    x = cover_of(tpath("r.db"), 10, -1, &sum, PT_EINVAL, &e);
    cr_expect_null(x);
    cr_expect(strstr(e.msg, "--max-kernels 10: no 10 kernels serve every problem"), "%s", e.msg);
}

/* Kernel NAME timed t on problem i with launch text launch. */
static void plant_l(planted *pl, const char *name, int i, double t, const char *launch)
{
    char ptx[128], hash[17], cfg[64];
    snprintf(ptx, sizeof ptx, ".version 8.0\n.entry %s\n", name);
    db_kernel_hash(ptx, strlen(ptx), hash);
    snprintf(cfg, sizeof cfg, "k=%s", name);
    db_kernel k = {hash, "elementwise", cfg, name, ptx};
    db_cubin c = {"sm_90", "nvJitLink 13.0", "\x7f" "ELF", 4, "{\"registers\":32}"};
    db_measurement m = {.run_id = pl->run, .problem_id = pl->prob[i], .config = cfg,
                        .final = true, .status = "ok", .error = "", .source = "measured",
                        .verified = 1, .t_min = t, .t_median = t, .t_max = t,
                        .spread = 0.001, .reps = 10, .tflops = NAN, .gbps = NAN,
                        .launch = launch};
    pt_err e = {0};
    cr_assert_eq(db_record(pl->s, &k, &c, &m, NULL, &e), PT_OK, "%s", e.msg);
}

/* The cover serves a problem only with a kernel measured on it (issue 14
 * item 7), whatever its contract claims: "dyn" takes the rows at run time
 * (its contract: x[0] from 1 to 524288, so it could launch at every row
 * count of the table) and is the winner at 16 and 32 rows, but was never
 * timed at 64 rows; "g" was timed everywhere at +5%. One kernel: g (dyn
 * would leave 64 rows unmeasured); two: dyn and 64's winner; every row of
 * the table is a measurement of its kernel on that row's own problem. */
Test(cover, a_run_time_shape_kernel_serves_only_the_problems_it_was_timed_on)
{
    planted pl;
    plant_open(&pl, tpath("d.db"), 3); /* 16, 32 and 64 rows */
    char dyn_launch[512];
    snprintf(dyn_launch, sizeof dyn_launch,
             "{\"grid\":[1,1,1],\"block\":[128,1,1],\"smem\":0,\"contract\":{\"v\":1,"
             "\"dims\":[{\"name\":\"x[0]\",\"tuned\":16,\"min\":1,\"max\":524288,\"group\":0},"
             "{\"name\":\"x[1]\",\"tuned\":256,\"min\":256,\"max\":256,\"group\":1}]}}");
    const char *fixed = "{\"grid\":[1,1,1],\"block\":[128,1,1],\"smem\":0}";
    plant_l(&pl, "dyn", 0, 1e-6, dyn_launch);
    plant_l(&pl, "dyn", 1, 1e-6, dyn_launch);
    plant_l(&pl, "w2", 2, 1e-6, fixed);
    for (int i = 0; i < 3; i++)
        plant_l(&pl, "g", i, 1.05e-6, fixed);
    db_close(pl.s);
    pt_err e = {0};
    db_cover_summary sum;
    db_export_sel *x = cover_of(tpath("d.db"), 1, -1, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 1);
    for (int i = 0; i < 3; i++)
        cr_expect_str_eq(served_by(x, i), hash_of("g"), "problem %d", i);
    cr_expect_float_eq(sum.worst, 0.05, 1e-9);
    db_export_sel_free(x);
    x = cover_of(tpath("d.db"), 2, -1, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 2);
    cr_expect_str_eq(served_by(x, 0), hash_of("dyn"));
    cr_expect_str_eq(served_by(x, 1), hash_of("dyn"));
    cr_expect_str_eq(served_by(x, 2), hash_of("w2"));
    cr_expect_float_eq(sum.worst, 0, 1e-12);
    db_export_sel_free(x);
    /* 1% with one kernel: none serves 64 rows within it but w2 */
    e = (pt_err){0};
    x = cover_of(tpath("d.db"), 1, 0.01, &sum, PT_EINVAL, &e);
    cr_expect_null(x);
    cr_expect(strstr(e.msg, "no 1 kernels serve every problem"), "%s", e.msg);
    /* every row is its kernel's own measurement on the row's problem */
    x = cover_of(tpath("d.db"), 0, 0.0, &sum, PT_OK, &e);
    cr_expect_eq(sum.kernels, 2);
    db_store *s;
    db_open_opts ro = {.readonly = true, .must_exist = true};
    cr_assert_eq(db_open(tpath("d.db"), &ro, &s, &e), PT_OK, "%s", e.msg);
    for (size_t r = 0; r < db_sel_count(x); r++) {
        const db_sel_row *w = db_sel_row_at(x, r);
        char q[512];
        int64_t n = 0;
        snprintf(q, sizeof q,
                 "SELECT count(*) FROM measurements m JOIN problems p ON p.id = m.problem_id"
                 " JOIN kernels k ON k.id = m.kernel_id WHERE m.id = %lld AND p.key = '%s'"
                 " AND k.hash = '%s'",
                 (long long)w->id, w->problem_key, w->kernel_hash);
        cr_assert_eq(db_query_int(s, q, &n, &e), PT_OK, "%s", e.msg);
        cr_expect_eq(n, 1, "row %zu (%s) is no measurement of its kernel on its problem", r,
                     w->problem_key);
    }
    db_close(s);
    db_export_sel_free(x);
}
