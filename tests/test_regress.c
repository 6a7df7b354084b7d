/* Regression tracking across builds (issue 15 item 2): two builds with
 * different version strings (PTXTUNE_TEST_VERSION, the test-only stand-in
 * of cli/cmd_tune.c) tune one problem set on the mock device into one
 * store; regress compares every common kernel and every winner across the
 * two fingerprints, names the field that differs, finds a planted 10%
 * slowdown (--mock-slow, a per-kernel delay) and nothing in noise within
 * the stored spreads. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "db/db.h"

static char dir[64];

static void mk(void)
{
    snprintf(dir, sizeof dir, "/tmp/ptxtune_regress_XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void rm(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

static int cli(const char *args, char *out, size_t on, char *err, size_t en)
{
    return test_run_ptxtune(dir, args, out, on, err, en);
}

static int64_t query(const char *sql)
{
    char path[128];
    snprintf(path, sizeof path, "%s/r.db", dir);
    db_store *s;
    pt_err e = {0};
    db_open_opts o = {.readonly = true};
    cr_assert_eq(db_open(path, &o, &s, &e), PT_OK, "%s", e.msg);
    int64_t v = -1;
    cr_assert_eq(db_query_int(s, sql, &v, &e), PT_OK, "%s", e.msg);
    db_close(s);
    return v;
}

/* "N winners compared: S slower" -> N and S */
static void counts(const char *out, const char *what, int *n, int *slower, int *same)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s compared: ", what);
    const char *p = strstr(out, pat);
    cr_assert(p, "no summary in: %s", out);
    while (p > out && p[-1] != '\n')
        p--;
    cr_assert_eq(sscanf(p, "%d", n), 1);
    p = strstr(p, "compared: ");
    cr_assert_eq(sscanf(p, "compared: %d slower, %*d faster, %d same", slower, same), 2, "%s", p);
}

static void tune(const char *version, const char *extra)
{
    setenv("PTXTUNE_TEST_VERSION", version, 1);
    char args[512], out[1 << 14], err[4096];
    snprintf(args, sizeof args,
             "tune --problems set.txt --backend mock --strategy exhaustive --budget 16 "
             "--mock-noise 0.02 --db r.db --quiet --no-compile --top 0 %s", extra);
    int rc = cli(args, out, sizeof out, err, sizeof err);
    unsetenv("PTXTUNE_TEST_VERSION");
    cr_assert_eq(rc, 0, "%s: %s %s", args, out, err);
}

TestSuite(regress, .init = mk, .fini = rm);

Test(regress, two_builds_one_store_planted_slowdown_found_noise_not, .timeout = 120)
{
    char path[128];
    snprintf(path, sizeof path, "%s/set.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("elementwise expr='y = silu(g) * u' shape=g=64x256,u=64x256 dtype=bf16 name=gate\n"
          "elementwise expr='y = softmax(x, -1)' shape=x=16x512 dtype=f16 name=softmax\n", f);
    fclose(f);
    tune("0.1.0", "--seed 1");                    /* run 1: the old build */
    tune("0.1.1", "--seed 2");                    /* run 2: the new build, other noise */
    /* run 3: every kernel 10% slower; run 4: the vec=4 kernels only (--new:
     * measured again, not taken from run 2 of the same fingerprint) */
    tune("0.1.1", "--seed 3 --mock-slow 1.1 --new");
    tune("0.1.1", "--seed 4 --mock-slow 1.1:vec=4 --new");
    cr_expect_eq(query("SELECT count(DISTINCT fingerprint_id) FROM runs"), 2);
    int64_t kernels = query("SELECT count(*) FROM measurements WHERE run_id = 1 AND status = 'ok'");
    int64_t slowed = query("SELECT count(*) FROM measurements WHERE run_id = 1 AND status = 'ok'"
                           " AND config LIKE '%vec=4%'");
    cr_assert_gt(kernels, 8);
    cr_assert_gt(slowed, 0);
    cr_assert_lt(slowed, kernels);
    cr_expect_eq(query("SELECT count(*) FROM measurements WHERE source <> 'mock'"), 0,
                 "the mock device's rows say mock");

    char out[1 << 16], err[4096];
    int n, slower, same;
    /* run 5: the new build again without --new: every row taken from the
     * latest finished run of its fingerprint (run 4: one timing), so nothing
     * to judge against run 4 */
    tune("0.1.1", "--seed 5");
    cr_expect_eq(query("SELECT count(*) FROM measurements WHERE run_id = 5 AND sample IS NULL"), 0,
                 "run 5 measured again what run 2 measured");
    int rc0 = cli("regress --db r.db --baseline 4 --candidate 5 --kernels", out, sizeof out, err,
                  sizeof err);
    cr_expect_eq(rc0, 0, "%s %s", out, err);
    char want[64];
    snprintf(want, sizeof want, "%lld sampled once", (long long)kernels);
    cr_expect(strstr(out, "\n0 kernels compared") && strstr(out, want), "%s", out);
    /* noise only: nothing, even with no threshold (the spreads alone) */
    int rc = cli("regress --db r.db --baseline 1 --candidate 2 --threshold 0", out, sizeof out,
                 err, sizeof err);
    cr_expect_eq(rc, 0, "%s %s", out, err);
    counts(out, "winners", &n, &slower, &same);
    cr_expect_eq(n, 2, "every winner compared: %s", out);
    cr_expect_eq(slower, 0, "%s", out);
    cr_expect(strstr(out, "differ in generator"), "the differing field is named: %s", out);
    rc = cli("regress --db r.db --baseline 1 --candidate 2 --threshold 0 --kernels", out,
             sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "%s %s", out, err);
    counts(out, "kernels", &n, &slower, &same);
    cr_expect_eq(n, kernels, "every common kernel compared across the builds: %s", out);
    cr_expect_eq(slower, 0, "%s", out);
    /* --json: the same table in the one schema (docs/json.md) */
    rc = cli("regress --db r.db --baseline 1 --candidate 2 --kernels --json", out, sizeof out,
             err, sizeof err);
    cr_expect_eq(rc, 0, "%s", err);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert(j, "not JSON: %s", je.text);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ptxtune-regress");
    cr_expect_eq(json_integer_value(json_object_get(j, "version")), 1);
    json_t *sm = json_object_get(j, "summary");
    cr_expect_eq(json_integer_value(json_object_get(sm, "compared")), kernels);
    cr_expect_eq(json_array_size(json_object_get(j, "rows")), (size_t)kernels);
    cr_expect_str_eq(json_string_value(json_object_get(sm, "fields_differ")), "generator");
    json_decref(j);
    /* the planted 10%: every winner, every kernel */
    rc = cli("regress --db r.db --baseline 1 --candidate 3", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 1, "%s %s", out, err);
    counts(out, "winners", &n, &slower, &same);
    cr_expect_eq(n, 2);
    cr_expect_eq(slower, 2, "%s", out);
    rc = cli("regress --db r.db --baseline 1 --candidate 3 --kernels", out, sizeof out, err,
             sizeof err);
    counts(out, "kernels", &n, &slower, &same);
    cr_expect_eq(slower, kernels, "%s", out);
    /* per kernel: exactly the slowed ones */
    rc = cli("regress --db r.db --baseline 1 --candidate 4 --kernels --threshold 0", out,
             sizeof out, err, sizeof err);
    cr_expect_eq(rc, 1, "%s %s", out, err);
    counts(out, "kernels", &n, &slower, &same);
    cr_expect_eq(n, kernels);
    cr_expect_eq(slower, slowed, "%s", out);
    cr_expect_eq(same, kernels - slowed, "%s", out);
    /* another GPU is not comparable: refused, naming the field */
    char sql[256];
    snprintf(sql, sizeof sql, "%s/r.db", dir);
    db_store *s;
    pt_err e = {0};
    cr_assert_eq(db_open(sql, NULL, &s, &e), PT_OK, "%s", e.msg);
    db_fingerprint other = {"other GPU", 90, 132, "1", "c", 90, "ptxtune 0.1.1", "ptxtune-bench/1"};
    int64_t fp;
    cr_assert_eq(db_fingerprint_put(s, &other, &fp, &e), PT_OK);
    db_run r = {.uuid = "otherrun0000", .fingerprint_id = fp, .strategy = "x", .budget = "1",
                .backend = "cuda", .arch = "sm_90", .args_key = "k", .host = "h", .pid = 1};
    int64_t run;
    cr_assert_eq(db_run_begin(s, &r, &run, &e), PT_OK);
    db_close(s);
    rc = cli("regress --db r.db --baseline 1 --candidate otherrun", out, sizeof out, err,
             sizeof err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "not comparable") && strstr(err, "gpu"), "%s", err);
}

/* regress --markdown (issue 15 item 6): the verdict, the table's header and
 * a planted regression's row, and with --plots DIR the links to the PNGs
 * plot_history.py --per-problem writes (DIR/<name>.png, DIR/regress.png). */
Test(regress, markdown_report_names_the_planted_regression, .timeout = 120)
{
    char path[128];
    snprintf(path, sizeof path, "%s/set.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("elementwise expr='y = silu(g) * u' shape=g=64x256,u=64x256 dtype=bf16 name=gate|x\n",
          f);
    fclose(f);
    tune("0.1.0", "--seed 1");
    tune("0.1.0", "--seed 3 --mock-slow 1.1 --new");
    char out[1 << 16], err[4096];
    int rc = cli("regress --db r.db --baseline 1 --candidate 2 --markdown --plots plots", out,
                 sizeof out, err, sizeof err);
    cr_expect_eq(rc, 1, "a regression exits 1: %s %s", out, err);
    cr_expect(strstr(out, "## ptxtune regress: run 1 vs run 2 (winners)\n"), "%s", out);
    cr_expect(strstr(out, "**REGRESSION**: 1 winners compared: 1 slower"), "%s", out);
    cr_expect(strstr(out, "\n| verdict | problem | config | kernel | baseline (us) | "
                          "candidate (us) | change | noise | plot |\n|---|"), "%s", out);
    cr_expect(strstr(out, "![changes](plots/regress.png)"), "%s", out);
    const char *row = strstr(out, "\n| **SLOWER** | gate\\|x: elementwise ");
    cr_assert(row, "no SLOWER row for gate|x: %s", out);
    const char *eol = strchr(row + 1, '\n');
    cr_assert(eol);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(eol - row), row);
    cr_expect(strstr(line, " | +") && strstr(line, "% | [png](plots/gate_x.png) |"), "%s", line);
    cr_expect(!strstr(line, "(baseline: ") || strstr(line, "`) | `"), "unclosed: %s", line);
    /* without --plots: no plot column; noise alone: no regression */
    tune("0.1.0", "--seed 4 --new");
    rc = cli("regress --db r.db --baseline 1 --candidate 3 --markdown", out, sizeof out, err,
             sizeof err);
    cr_expect_eq(rc, 0, "%s %s", out, err);
    cr_expect(strstr(out, "**no regression**: 1 winners compared: 0 slower"), "%s", out);
    cr_expect(strstr(out, "| noise |\n|---|") && !strstr(out, "png"), "%s", out);
    cr_expect_eq(cli("regress --db r.db --baseline 1 --candidate 3 --plots p", out, sizeof out,
                     err, sizeof err), 2);
    cr_expect(strstr(err, "--plots DIR goes with --markdown"), "%s", err);
}
