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
