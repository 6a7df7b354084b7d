/* The store: schema and ownership checks, winners per exact fingerprint,
 * idempotent records, export/import round trips, bundle, merge, the C
 * header, regressions, nearest-bucket lookup, concurrent writers. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db/db.h"
#include "search/problem.h"

static char tmpdir[64];

static void mk_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ptxtune_db_XXXXXX");
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

static db_store *open_ok(const char *path)
{
    db_store *s = NULL;
    pt_err e = {0};
    int rc = db_open(path, NULL, &s, &e);
    cr_assert_eq(rc, PT_OK, "open %s: %s", path, e.msg);
    return s;
}

static const char nasty[] = "it's \"q\"; DROP TABLE runs; -- ?\?/ \\n\xc3\xa9";

static db_fingerprint fp_a(void)
{
    return (db_fingerprint){"NVIDIA H200 \"SXM\"; DROP TABLE winners;--", 90, 132, "13000",
                            "nvJitLink 13.0", 90, "ptxtune 0.1.0", "cuda-median-1"};
}

typedef struct fixture {
    db_store *s;
    int64_t fp, prob, run;
} fixture;

static void setup_store(fixture *f, const char *path, const db_fingerprint *fp,
                        const char *pkey, const char *dims, const char *uuid)
{
    pt_err e = {0};
    f->s = open_ok(path);
    cr_assert_eq(db_fingerprint_put(f->s, fp, &f->fp, &e), PT_OK, "%s", e.msg);
    db_problem p = {"gemm", pkey, "gemm dtype=bf16 layout=tn", dims, nasty, 2e9, 3e7, false};
    cr_assert_eq(db_problem_put(f->s, &p, &f->prob, &e), PT_OK, "%s", e.msg);
    db_run r = {.uuid = uuid, .fingerprint_id = f->fp, .tool_version = "0.1.0",
                .git_rev = "abc'def", .strategy = "anneal", .budget = "300", .seed = 7,
                .backend = "mock", .arch = "sm_90", .args_key = "k1", .host = "h", .pid = 1};
    cr_assert_eq(db_run_begin(f->s, &r, &f->run, &e), PT_OK, "%s", e.msg);
}

/* One ok candidate with a synthetic kernel; t in seconds. */
static void put(fixture *f, int64_t run, int64_t prob, const char *cfg, double t, double spread,
                const char *status, bool final, bool *inserted)
{
    char ptx[256], hash[17];
    snprintf(ptx, sizeof ptx, "// ptxtune\n.version 8.0\n.kernel for %s\n", cfg);
    db_kernel_hash(ptx, strlen(ptx), hash);
    db_kernel k = {hash, "gemm", cfg, "kern", ptx};
    unsigned char bin[40];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (unsigned char)(i * 37 + strlen(cfg));
    db_cubin c = {"sm_90", "nvJitLink 13.0", bin, sizeof bin, "{\"registers\": 40}"};
    bool ok = strcmp(status, "ok") == 0;
    db_measurement m = {
        .run_id = run, .problem_id = prob, .config = cfg, .final = final, .status = status,
        .error = ok ? "" : "boom \"x\"", .source = "measured", .verified = ok,
        .t_min = ok ? t * 0.98 : NAN, .t_median = ok ? t : NAN, .t_max = ok ? t * 1.05 : NAN,
        .spread = ok ? spread : NAN, .reps = 20, .tflops = ok ? 2e9 / t / 1e12 : NAN,
        .gbps = NAN, .launch = "{\"grid\":[32,16,1],\"block\":[128,1,1],\"smem\":49152}"};
    pt_err e = {0};
    cr_assert_eq(db_record(f->s, &k, &c, &m, inserted, &e), PT_OK, "%s", e.msg);
}

static int count_cb(void *ctx, const db_winner *w)
{
    (void)w;
    (*(int *)ctx)++;
    return 0;
}

typedef struct got {
    char config[256], hash[17], gpu[256], name[256];
    double t, distance;
    bool nearest;
} got;

static int got_cb(void *ctx, const db_winner *w)
{
    got *g = ctx;
    snprintf(g->config, sizeof g->config, "%s", w->config);
    snprintf(g->hash, sizeof g->hash, "%s", w->kernel_hash);
    snprintf(g->gpu, sizeof g->gpu, "%s", w->gpu);
    snprintf(g->name, sizeof g->name, "%s", w->problem_name);
    g->t = w->t_median;
    g->nearest = w->nearest;
    g->distance = w->distance;
    return 0;
}

static unsigned long long file_sum(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s", path);
    unsigned long long h = 1469598103934665603ull;
    int c;
    while ((c = fgetc(f)) != EOF)
        h = (h ^ (unsigned)c) * 1099511628211ull;
    fclose(f);
    return h;
}

TestSuite(db, .init = mk_tmp, .fini = rm_tmp);

Test(db, schema_wal_and_reopen)
{
    db_store *s = open_ok(tpath("a.db"));
    cr_assert_eq(db_schema_version(s), DB_SCHEMA_VERSION);
    int64_t v;
    pt_err e = {0};
    cr_assert_eq(db_query_int(s, "PRAGMA application_id", &v, &e), PT_OK);
    cr_assert_eq((uint32_t)v, (uint32_t)DB_APPLICATION_ID);
    char msg[256];
    cr_assert_eq(db_integrity(s, msg, sizeof msg, &e), PT_OK, "%s", msg);
    db_close(s);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(tpath("a.db"), &h), SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_expect_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);
    s = open_ok(tpath("a.db"));
    db_close(s);
}

Test(db, migration_from_v1)
{
    db_store *s = NULL;
    pt_err e = {0};
    db_open_opts o = {.max_version = 1};
    cr_assert_eq(db_open(tpath("old.db"), &o, &s, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(db_schema_version(s), 1);
    db_close(s);
    s = open_ok(tpath("old.db"));
    cr_assert_eq(db_schema_version(s), DB_SCHEMA_VERSION);
    int64_t n;
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'arch'",
                              &n, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(n, 1);
    db_close(s);
}

static void expect_refused(const char *path, const char *msg)
{
    unsigned long long before = file_sum(path);
    struct stat sb0;
    stat(path, &sb0);
    db_store *s = NULL;
    pt_err e = {0};
    int rc = db_open(path, NULL, &s, &e);
    cr_expect_neq(rc, PT_OK, "%s opened", path);
    cr_expect(strstr(e.msg, msg), "'%s' lacks '%s'", e.msg, msg);
    cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
    cr_expect_eq(file_sum(path), before, "%s changed", path);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", path);
    cr_expect(access(side, F_OK) != 0 || rc == PT_OK, "a -wal file appeared next to %s", path);
    db_close(s);
}

Test(db, foreign_newer_and_corrupt_files_are_refused_untouched)
{
    FILE *f = fopen(tpath("text.db"), "w");
    fputs("gemm m=1 n=2 k=3\nthis is a problem file, not a database\n", f);
    for (int i = 0; i < 200; i++)
        fputs("padding padding padding padding\n", f);
    fclose(f);
    expect_refused(tpath("text.db"), "not a ptxtune database");

    sqlite3 *h;
    cr_assert_eq(sqlite3_open(tpath("other.db"), &h), SQLITE_OK);
    sqlite3_exec(h, "CREATE TABLE t(x); INSERT INTO t VALUES(1)", NULL, NULL, NULL);
    sqlite3_close(h);
    expect_refused(tpath("other.db"), "not a ptxtune database");

    db_store *s = open_ok(tpath("newer.db"));
    db_close(s);
    cr_assert_eq(sqlite3_open(tpath("newer.db"), &h), SQLITE_OK);
    sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(h);
    expect_refused(tpath("newer.db"), "newer than this ptxtune");

    /* corrupt: a real store with its table pages overwritten */
    fixture fx;
    setup_store(&fx, tpath("bad.db"), &(db_fingerprint){"g", 80, 1, "d", "c", 80, "x", "p"},
                "gemm m=1", "1", NULL);
    for (int i = 0; i < 50; i++) {
        char cfg[32];
        snprintf(cfg, sizeof cfg, "bm=%d", i);
        put(&fx, fx.run, fx.prob, cfg, 1e-3 + i * 1e-6, 0.01, "ok", true, NULL);
    }
    pt_err e = {0};
    db_close(fx.s); /* the last close folds the WAL into the file */
    f = fopen(tpath("bad.db"), "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    cr_assert_gt(size, 8192);
    for (long off = 4096; off < size; off += 4096) { /* every b-tree page header */
        fseek(f, off, SEEK_SET);
        fwrite("\xde\xad\xbe\xef\xde\xad\xbe\xef\xff\xff\xff\xff", 1, 12, f);
    }
    fclose(f);
    unsigned long long before = file_sum(tpath("bad.db"));
    s = NULL;
    int rc = db_open(tpath("bad.db"), NULL, &s, &e);
    if (rc == PT_OK) {
        char msg[512];
        pt_err e2 = {0};
        rc = db_integrity(s, msg, sizeof msg, &e2);
        cr_expect_neq(rc, PT_OK, "integrity_check passed a corrupted file");
        cr_expect(!strchr(e2.msg, '\n'));
        db_close(s);
    } else {
        cr_expect(strstr(e.msg, "corrupt") || strstr(e.msg, "not a ptxtune"), "%s", e.msg);
    }
    cr_expect_eq(file_sum(tpath("bad.db")), before);

    /* a directory and a missing file when it must exist */
    s = NULL;
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_open(tmpdir, NULL, &s, &e), PT_OK);
    cr_expect(strstr(e.msg, "directory"), "%s", e.msg);
    memset(&e, 0, sizeof e);
    db_open_opts ro = {.readonly = true};
    cr_expect_neq(db_open(tpath("missing.db"), &ro, &s, &e), PT_OK);
    cr_expect(access(tpath("missing.db"), F_OK) != 0, "read-only open created the file");
}

Test(db, winner_served_only_under_exact_fingerprint)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("w.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", NULL);
    put(&f, f.run, f.prob, "bm=128,bn=128", 2e-3, 0.01, "ok", true, NULL);
    put(&f, f.run, f.prob, "bm=64,bn=128", 1e-3, 0.01, "ok", true, NULL);
    put(&f, f.run, f.prob, "bm=256,bn=128", 3e-3, 0.01, "ok", true, NULL);
    put(&f, f.run, f.prob, "bm=32,bn=32", NAN, 0, "fault", true, NULL);
    put(&f, f.run, f.prob, "bm=16,bn=16", 1e-4, 0.01, "ok", false, NULL); /* not final */
    pt_err e = {0};
    got g = {0};
    bool found;
    cr_assert_eq(db_winner_get(f.s, &a, "gemm m=16 n=4096 k=4096", got_cb, &g, &found, &e), PT_OK);
    cr_assert(found);
    cr_expect_str_eq(g.config, "bm=64,bn=128");
    cr_expect_str_eq(g.gpu, a.gpu);
    cr_expect_str_eq(g.name, nasty);
    /* every field that differs hides the winner */
    db_fingerprint others[8];
    for (int i = 0; i < 8; i++)
        others[i] = a;
    others[0].gpu = "NVIDIA H100";
    others[1].cc = 89;
    others[2].sm_count = 114;
    others[3].driver = "13010";
    others[4].compiler = "ptxas 13.0";
    others[5].ptx_version = 88;
    others[6].generator = "ptxtune 0.2.0";
    others[7].protocol = "cuda-median-2";
    for (int i = 0; i < 8; i++) {
        found = true;
        cr_assert_eq(db_winner_get(f.s, &others[i], "gemm m=16 n=4096 k=4096", got_cb, &g,
                                   &found, &e), PT_OK);
        cr_expect(!found, "winner served under fingerprint variant %d", i);
        db_problem p = {"gemm", "gemm m=32 n=4096 k=4096", "gemm dtype=bf16 layout=tn",
                        "32,4096,4096", "", 0, 0, false};
        found = true;
        cr_assert_eq(db_lookup(f.s, &others[i], &p, got_cb, &g, &found, &e), PT_OK);
        cr_expect(!found, "nearest bucket served under fingerprint variant %d", i);
    }
    /* a second fingerprint with a faster kernel does not change a's winner */
    int64_t fpb, runb;
    cr_assert_eq(db_fingerprint_put(f.s, &others[3], &fpb, &e), PT_OK);
    db_run r = {.fingerprint_id = fpb, .strategy = "random", .budget = "10", .backend = "mock",
                .arch = "sm_90", .args_key = "k2", .host = "h", .pid = 1};
    cr_assert_eq(db_run_begin(f.s, &r, &runb, &e), PT_OK);
    put(&f, runb, f.prob, "bm=128,bn=64", 1e-5, 0.01, "ok", true, NULL);
    cr_assert_eq(db_winner_get(f.s, &a, "gemm m=16 n=4096 k=4096", got_cb, &g, &found, &e), PT_OK);
    cr_expect_str_eq(g.config, "bm=64,bn=128");
    cr_assert_eq(db_winner_get(f.s, &others[3], "gemm m=16 n=4096 k=4096", got_cb, &g, &found,
                               &e), PT_OK);
    cr_expect_str_eq(g.config, "bm=128,bn=64");
    /* rebuilding gives the same winners */
    cr_assert_eq(db_winners_rebuild(f.s, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(db_winner_get(f.s, &a, "gemm m=16 n=4096 k=4096", got_cb, &g, &found, &e), PT_OK);
    cr_expect_str_eq(g.config, "bm=64,bn=128");
    db_close(f.s);
}

Test(db, records_are_idempotent)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("i.db"), &a, "p1", "1", NULL);
    bool ins = false;
    put(&f, f.run, f.prob, "x=1", 1e-3, 0.01, "ok", true, &ins);
    cr_expect(ins);
    put(&f, f.run, f.prob, "x=1", 0.5e-3, 0.01, "ok", true, &ins);
    cr_expect(!ins);
    int64_t n;
    pt_err e = {0};
    db_query_int(f.s, "SELECT count(*) FROM measurements", &n, &e);
    cr_expect_eq(n, 1);
    /* unknown class and a non-finite ok time are refused */
    db_measurement m = {.run_id = f.run, .problem_id = f.prob, .config = "x=2",
                        .status = "exploded", .source = "measured"};
    cr_expect_neq(db_record(f.s, NULL, NULL, &m, NULL, &e), PT_OK);
    m.status = "ok";
    m.t_median = NAN;
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_record(f.s, NULL, NULL, &m, NULL, &e), PT_OK);
    db_close(f.s);
}

static char *export_str(db_store *s, db_format fmt, const char *gpu, const char *match, int *n)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_err e = {0};
    cr_assert_eq(db_export_text(s, fmt, gpu, match, &b, n, &e), PT_OK, "%s", e.msg);
    return pt_buf_take(&b);
}

static void fill_two_problems(fixture *f)
{
    put(f, f->run, f->prob, "bm=64,bn=128", 1e-3, 0.01, "ok", true, NULL);
    put(f, f->run, f->prob, "bm=128,bn=128", 2e-3, 0.01, "ok", true, NULL);
    db_problem p2 = {"gemm", "gemm m=4096 'quoted' \"name\"", "gemm dtype=bf16 layout=tn",
                     "4096,4096,4096", "o'brien \"x\"", 1.4e11, 1e8, false};
    int64_t pid;
    pt_err e = {0};
    cr_assert_eq(db_problem_put(f->s, &p2, &pid, &e), PT_OK);
    put(f, f->run, pid, "bm=256,bn=128", 5e-3, 0.02, "ok", true, NULL);
}

Test(db, json_round_trip_and_names)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("j.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", NULL);
    fill_two_problems(&f);
    int n1, n2;
    char *j1 = export_str(f.s, DB_FMT_JSON, NULL, NULL, &n1);
    cr_assert_eq(n1, 2);
    db_store *b = open_ok(tpath("j2.db"));
    db_merge_stats st;
    pt_err e = {0};
    cr_assert_eq(db_import_json(b, j1, strlen(j1), "j1.json", &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.measurements, 2);
    char *j2 = export_str(b, DB_FMT_JSON, NULL, NULL, &n2);
    cr_expect_eq(n2, 2);
    cr_expect_str_eq(j2, j1);
    /* importing again adds nothing */
    cr_assert_eq(db_import_json(b, j1, strlen(j1), "j1.json", &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.measurements, 0);
    cr_expect_eq(st.skipped, 2);
    got g = {0};
    bool found;
    cr_assert_eq(db_winner_get(b, &a, "gemm m=4096 'quoted' \"name\"", got_cb, &g, &found, &e),
                 PT_OK);
    cr_assert(found);
    cr_expect_str_eq(g.gpu, a.gpu);
    cr_expect_str_eq(g.name, "o'brien \"x\"");
    /* --match and --gpu filters */
    int n;
    free(export_str(f.s, DB_FMT_JSON, NULL, "quoted", &n));
    cr_expect_eq(n, 1);
    {
        /* an unknown --gpu is an error listing the known fingerprints (issue 15) */
        pt_buf tb;
        pt_buf_init(&tb);
        pt_err e2 = {0};
        cr_expect_eq(db_export_text(f.s, DB_FMT_JSON, "no such gpu", NULL, &tb, &n, &e2),
                     PT_EINVAL);
        cr_expect(strstr(e2.msg, "no fingerprint 'no such gpu'") && strstr(e2.msg, "known: "),
                  "%s", e2.msg);
        pt_buf_free(&tb);
    }
    char key[17];
    db_fingerprint_key(&a, key);
    key[8] = '\0';
    free(export_str(f.s, DB_FMT_JSON, key, NULL, &n));
    cr_expect_eq(n, 2);
    pt_buf tmp;
    pt_buf_init(&tmp);
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_export_text(f.s, DB_FMT_JSON, NULL, "(unclosed", &tmp, &n, &e), PT_OK);
    cr_expect(strstr(e.msg, "bad --match pattern"), "%s", e.msg);
    pt_buf_free(&tmp);
    /* bad tables: nothing imported */
    static const char *const bad[] = {
        "not json at all",
        "{\"format\": \"something-else\", \"rows\": []}",
        "{\"format\": \"ptxtune-table\", \"version\": 7, \"rows\": []}",
        "{\"format\": \"ptxtune-table\", \"version\": 1, \"rows\": [{\"config\": \"x\"}]}",
    };
    db_counts c0, c1;
    db_count(b, &c0, &e);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        cr_expect_neq(db_import_json(b, bad[i], strlen(bad[i]), "bad.json", &st, &e), PT_OK,
                      "imported '%s'", bad[i]);
        cr_expect(strstr(e.msg, "bad.json"), "%s", e.msg);
    }
    /* a tampered PTX (hash mismatch) in the last row rolls back every row */
    char *t = strdup(j1);
    char *ptx = strstr(t, ".kernel for bm=256");
    cr_assert(ptx);
    ptx[1] = 'K';
    db_store *c = open_ok(tpath("j3.db"));
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_import_json(c, t, strlen(t), "t.json", &st, &e), PT_OK);
    cr_expect(strstr(e.msg, "does not match its PTX"), "%s", e.msg);
    db_count(c, &c1, &e);
    cr_expect_eq(c1.measurements, 0);
    cr_expect_eq(c1.runs, 0);
    db_count(b, &c1, &e);
    cr_expect_eq(c1.measurements, c0.measurements);
    free(t);
    free(j1);
    free(j2);
    db_close(c);
    db_close(b);
    db_close(f.s);
}

Test(db, bundle_and_merge)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("m1.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", "aaaa1111");
    fill_two_problems(&f);
    int n;
    pt_err e = {0};
    cr_assert_eq(db_export_bundle(f.s, NULL, "quoted", tpath("b.db"), &n, &e), PT_OK, "%s",
                 e.msg);
    cr_expect_eq(n, 1);
    struct stat sb;
    cr_assert_eq(stat(tpath("b.db"), &sb), 0);
    cr_expect(access(tpath("b.db-wal"), F_OK) != 0, "bundle left a -wal file");
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_export_bundle(f.s, NULL, NULL, tpath("b.db"), &n, &e), PT_OK);
    cr_expect(strstr(e.msg, "already exists"), "%s", e.msg);
    db_store *b = open_ok(tpath("b.db"));
    db_counts c;
    db_count(b, &c, &e);
    cr_expect_eq(c.winners, 1);
    cr_expect_eq(c.measurements, 1);
    cr_expect_eq(c.kernels, 1);
    cr_expect_eq(c.cubins, 1);
    char *jb = export_str(b, DB_FMT_JSON, NULL, NULL, &n);
    char *ja = export_str(f.s, DB_FMT_JSON, NULL, "quoted", &n);
    cr_expect_str_eq(jb, ja);
    free(ja);
    free(jb);
    db_close(b);

    /* a second store with its own run, merged twice */
    fixture g;
    setup_store(&g, tpath("m2.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", "bbbb2222");
    put(&g, g.run, g.prob, "bm=32,bn=128", 0.5e-3, 0.01, "ok", true, NULL);
    put(&g, g.run, g.prob, "bm=64,bn=128", 1.5e-3, 0.01, "ok", true, NULL);
    db_close(g.s);
    db_merge_stats st;
    cr_assert_eq(db_merge(f.s, tpath("m2.db"), &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.measurements, 2);
    cr_expect_eq(st.runs, 1);
    cr_expect_eq(st.kernels, 1); /* bm=64,bn=128 is the same PTX */
    cr_assert_eq(db_merge(f.s, tpath("m2.db"), &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.measurements, 0);
    cr_expect_eq(st.skipped, 2);
    got w = {0};
    bool found;
    cr_assert_eq(db_winner_get(f.s, &a, "gemm m=16 n=4096 k=4096", got_cb, &w, &found, &e), PT_OK);
    cr_expect_str_eq(w.config, "bm=32,bn=128");
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_merge(f.s, tpath("m1.db"), &st, &e), PT_OK);
    cr_expect(strstr(e.msg, "into itself"), "%s", e.msg);
    /* an old-schema source is migrated on a copy, never in place */
    db_store *old = NULL;
    db_open_opts o1 = {.max_version = 1};
    cr_assert_eq(db_open(tpath("v1.db"), &o1, &old, &e), PT_OK);
    db_close(old);
    unsigned long long before = file_sum(tpath("v1.db"));
    cr_assert_eq(db_merge(f.s, tpath("v1.db"), &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(file_sum(tpath("v1.db")), before);
    db_close(f.s);
}

Test(db, c_header_compiles_and_names_round_trip)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("h.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", NULL);
    fill_two_problems(&f);
    int n;
    char *h = export_str(f.s, DB_FMT_CHEADER, NULL, NULL, &n);
    cr_assert_eq(n, 2);
    FILE *o = fopen(tpath("table.h"), "w");
    fputs(h, o);
    fclose(o);
    free(h);
    o = fopen(tpath("main.c"), "w");
    fprintf(o, "#define PTXTUNE_TABLE_IMPLEMENTATION\n#include \"table.h\"\n#include <stdio.h>\n"
               "int main(void) {\n"
               "  for (size_t i = 0; i < ptxtune_table_size; i++)\n"
               "    printf(\"%%s|%%s|%%zu|%%u\\n\", ptxtune_table[i].gpu, ptxtune_table[i].name,\n"
               "           ptxtune_table[i].cubin_size, ptxtune_table[i].block[0]);\n"
               "  return 0;\n}\n");
    fclose(o);
    /* also a file that only includes it (declarations, no definitions) */
    o = fopen(tpath("user.c"), "w");
    fprintf(o, "#include \"table.h\"\nsize_t count(void);\nsize_t count(void) { return ptxtune_table_size; }\n");
    fclose(o);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd %s && cc -std=c11 -Wall -Wextra -Werror -o t main.c user.c 2>err.txt && ./t >out.txt",
             tmpdir);
    int rc = system(cmd);
    char err[4096] = "", out[4096] = "";
    FILE *ef = fopen(tpath("err.txt"), "r");
    if (ef) {
        err[fread(err, 1, sizeof err - 1, ef)] = '\0';
        fclose(ef);
    }
    cr_assert_eq(rc, 0, "header did not compile: %s", err);
    FILE *of = fopen(tpath("out.txt"), "r");
    out[fread(out, 1, sizeof out - 1, of)] = '\0';
    fclose(of);
    char want[1024];
    snprintf(want, sizeof want, "%s|%s|40|128\n", a.gpu, nasty);
    cr_expect(strstr(out, want), "got '%s' want '%s'", out, want);
    /* an empty table compiles too */
    db_store *empty = open_ok(tpath("e.db"));
    h = export_str(empty, DB_FMT_CHEADER, NULL, NULL, &n);
    cr_expect_eq(n, 0);
    o = fopen(tpath("table.h"), "w");
    fputs(h, o);
    fclose(o);
    free(h);
    cr_expect_eq(system(cmd), 0, "empty header did not compile");
    db_close(empty);
    /* CSV: one header line, one row each, quotes doubled */
    char *csv = export_str(f.s, DB_FMT_CSV, NULL, NULL, &n);
    cr_expect(strstr(csv, "\"o'brien \"\"x\"\"\""), "%s", csv);
    cr_expect(strncmp(csv, "fingerprint,gpu,problem", 23) == 0);
    free(csv);
    db_close(f.s);
}

typedef struct rg {
    int slower, faster, same;
    char slow_cfg[64];
} rg;

static int rg_cb(void *ctx, const db_regress_row *r)
{
    rg *x = ctx;
    if (r->verdict == DB_SLOWER) {
        x->slower++;
        snprintf(x->slow_cfg, sizeof x->slow_cfg, "%s", r->config);
    }
    x->faster += r->verdict == DB_FASTER;
    x->same += r->verdict == DB_SAME;
    return 0;
}

Test(db, regress_is_noise_aware)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("r.db"), &a, "p", "1", "baseline0000");
    int64_t cand;
    pt_err e = {0};
    db_run r = {.uuid = "candidate111", .fingerprint_id = f.fp, .strategy = "exhaustive",
                .budget = "all", .backend = "mock", .arch = "sm_90", .args_key = "k",
                .host = "h", .pid = 1};
    cr_assert_eq(db_run_begin(f.s, &r, &cand, &e), PT_OK);
    /* quiet +10%: slower; quiet +1%: same; noisy +10% (8% spreads): same;
     * quiet -20%: faster */
    put(&f, f.run, f.prob, "a=1", 1.00e-3, 0.005, "ok", true, NULL);
    put(&f, cand, f.prob, "a=1", 1.10e-3, 0.005, "ok", true, NULL);
    put(&f, f.run, f.prob, "a=2", 1.00e-3, 0.005, "ok", true, NULL);
    put(&f, cand, f.prob, "a=2", 1.01e-3, 0.005, "ok", true, NULL);
    put(&f, f.run, f.prob, "a=3", 1.00e-3, 0.08, "ok", true, NULL);
    put(&f, cand, f.prob, "a=3", 1.10e-3, 0.08, "ok", true, NULL);
    put(&f, f.run, f.prob, "a=4", 1.00e-3, 0.005, "ok", true, NULL);
    put(&f, cand, f.prob, "a=4", 0.80e-3, 0.005, "ok", true, NULL);
    rg x = {0};
    db_regress_summary sum;
    cr_assert_eq(db_regress(f.s, "baseline", "candid", 0.03, rg_cb, &x, &sum, &e), PT_OK, "%s",
                 e.msg);
    cr_expect_eq(x.slower, 1);
    cr_expect_str_eq(x.slow_cfg, "a=1");
    cr_expect_eq(x.same, 2);
    cr_expect_eq(x.faster, 1);
    cr_expect(sum.same_fingerprint);
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_regress(f.s, "nosuchrun", "candid", 0.03, rg_cb, &x, &sum, &e), PT_OK);
    cr_expect(strstr(e.msg, "no run 'nosuchrun'"), "%s", e.msg);
    db_close(f.s);
}

Test(db, nearest_bucket_lookup)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("n.db"), &a, "gemm m=1", "1,4096,4096", NULL);
    put(&f, f.run, f.prob, "bm=16", 1e-5, 0.01, "ok", true, NULL);
    pt_err e = {0};
    int64_t p128, pother;
    db_problem q128 = {"gemm", "gemm m=128", "gemm dtype=bf16 layout=tn", "128,4096,4096", "",
                       0, 0, false};
    db_problem other = {"gemm", "gemm m=16 f16", "gemm dtype=f16 layout=tn", "16,4096,4096", "",
                        0, 0, false};
    cr_assert_eq(db_problem_put(f.s, &q128, &p128, &e), PT_OK);
    cr_assert_eq(db_problem_put(f.s, &other, &pother, &e), PT_OK);
    put(&f, f.run, p128, "bm=128", 1e-4, 0.01, "ok", true, NULL);
    put(&f, f.run, pother, "bm=999", 1e-6, 0.01, "ok", true, NULL);
    db_problem want = {"gemm", "gemm m=16", "gemm dtype=bf16 layout=tn", "16,4096,4096", "", 0,
                       0, false};
    got g = {0};
    bool found;
    cr_assert_eq(db_lookup(f.s, &a, &want, got_cb, &g, &found, &e), PT_OK, "%s", e.msg);
    cr_assert(found);
    cr_expect(g.nearest);
    cr_expect_str_eq(g.config, "bm=128"); /* |log2 16/128| = 3 < |log2 16/1| = 4 */
    cr_expect_float_eq(g.distance, 3.0, 1e-9);
    /* an exact tuned problem is not flagged */
    cr_assert_eq(db_lookup(f.s, &a, &q128, got_cb, &g, &found, &e), PT_OK);
    cr_expect(!g.nearest);
    /* a tie (m=11.3 is 3.5 from both 1 and 128) goes to the larger problem */
    db_problem tie = {"gemm", "gemm m=tie", "gemm dtype=bf16 layout=tn", "11.313708498984761,4096,4096",
                      "", 0, 0, false};
    cr_assert_eq(db_lookup(f.s, &a, &tie, got_cb, &g, &found, &e), PT_OK);
    cr_expect_str_eq(g.config, "bm=128");
    db_close(f.s);
}

/* issue 14: a problem with a 0 size (an elementwise shape x=0x4096 is a
 * valid key) still gets the nearest tuned config: a 0 counts as 1, the
 * smallest bucket; a stored problem with a 0 is a candidate too. */
Test(db, nearest_bucket_lookup_with_a_zero_size)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("z.db"), &a, "gemm m=1", "1,4096,4096", NULL);
    pt_err e = {0};
    const char *klass = "elementwise expr=\"y = x * 2\" shape=x=#x#";
    db_problem r16 = {"elementwise", "elementwise expr=\"y = x * 2\" shape=x=16x4096", klass,
                      "16,4096", "", 0, 0, false};
    db_problem r0 = {"elementwise", "elementwise expr=\"y = x * 2\" shape=x=0x64", klass, "0,64",
                     "", 0, 0, false};
    int64_t p16, p0;
    cr_assert_eq(db_problem_put(f.s, &r16, &p16, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(db_problem_put(f.s, &r0, &p0, &e), PT_OK, "%s", e.msg);
    put(&f, f.run, p16, "tpb=256", 1e-5, 0.01, "ok", true, NULL);
    put(&f, f.run, p0, "tpb=128", 1e-6, 0.01, "ok", true, NULL);
    got g = {0};
    bool found = false;
    /* 0 rows of 4096: |log2 1/16| = 4 from x=16x4096, 4 + 6 = 10 from x=0x64 */
    db_problem want = {"elementwise", "elementwise expr=\"y = x * 2\" shape=x=0x4096", klass,
                       "0,4096", "", 0, 0, false};
    cr_assert_eq(db_lookup(f.s, &a, &want, got_cb, &g, &found, &e), PT_OK, "%s", e.msg);
    cr_assert(found, "a problem with a 0 size got no nearest config");
    cr_expect(g.nearest);
    cr_expect_str_eq(g.config, "tpb=256");
    cr_expect_float_eq(g.distance, 4.0, 1e-9);
    /* 0 rows of 64: the stored 0-row problem is at distance 0 */
    db_problem want0 = {"elementwise", "elementwise expr=\"y = x * 2\" shape=x=0x65", klass,
                        "0,64", "", 0, 0, false};
    cr_assert_eq(db_lookup(f.s, &a, &want0, got_cb, &g, &found, &e), PT_OK, "%s", e.msg);
    cr_assert(found);
    cr_expect_str_eq(g.config, "tpb=128");
    cr_expect_float_eq(g.distance, 0.0, 1e-9);
    /* a negative size is still malformed: no nearest */
    db_problem bad = {"elementwise", "elementwise bad", klass, "-1,64", "", 0, 0, false};
    found = true;
    cr_assert_eq(db_lookup(f.s, &a, &bad, got_cb, &g, &found, &e), PT_OK, "%s", e.msg);
    cr_expect(!found);
    db_close(f.s);
}

Test(db, concurrent_writers)
{
    const char *path = tpath("c.db");
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, path, &a, "p", "1", NULL);
    int64_t run = f.run, prob = f.prob;
    db_close(f.s);
    enum { NPROC = 4, NREC = 150 };
    pid_t kids[NPROC];
    for (int p = 0; p < NPROC; p++) {
        kids[p] = fork();
        if (kids[p] == 0) {
            fixture c = {.s = NULL};
            pt_err e = {0};
            if (db_open(path, NULL, &c.s, &e))
                _exit(10);
            for (int i = 0; i < NREC; i++) {
                char cfg[64], ptx[128], hash[17];
                snprintf(cfg, sizeof cfg, "p=%d,i=%d", p, i);
                snprintf(ptx, sizeof ptx, ".k %s\n", cfg);
                db_kernel_hash(ptx, strlen(ptx), hash);
                db_kernel k = {hash, "gemm", cfg, "k", ptx};
                db_measurement m = {.run_id = run, .problem_id = prob, .config = cfg,
                                    .final = true, .status = "ok", .source = "measured",
                                    .t_median = 1e-3 + (double)(p * NREC + i) * 1e-7,
                                    .t_min = NAN, .t_max = NAN, .spread = 0.01, .tflops = NAN,
                                    .gbps = NAN};
                if (db_record(c.s, &k, NULL, &m, NULL, &e)) {
                    fprintf(stderr, "child %d: %s\n", p, e.msg);
                    _exit(11);
                }
            }
            db_close(c.s);
            _exit(0);
        }
    }
    for (int p = 0; p < NPROC; p++) {
        int st;
        waitpid(kids[p], &st, 0);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed (%d)", p,
                  WEXITSTATUS(st));
    }
    db_store *s = open_ok(path);
    int64_t n;
    pt_err e = {0};
    db_query_int(s, "SELECT count(*) FROM measurements", &n, &e);
    cr_expect_eq(n, NPROC * NREC);
    got g = {0};
    bool found;
    db_winner_get(s, &a, "p", got_cb, &g, &found, &e);
    cr_expect_str_eq(g.config, "p=0,i=0");
    int cnt = 0;
    db_winners(s, NULL, NULL, count_cb, &cnt, &e);
    cr_expect_eq(cnt, 1);
    db_close(s);
}

/* ---- item 12: outputs written whole or not at all ------------------------ */

static void counts_of(db_store *s, db_counts *c)
{
    pt_err e = {0};
    cr_assert_eq(db_count(s, c, &e), PT_OK, "%s", e.msg);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "create %s", path);
    fputs(text, f);
    fclose(f);
}

/* Names in dir starting with prefix (temporaries left behind). */
static int leftovers(const char *prefix)
{
    char cmd[512], out[64] = "";
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '^%s' || true", tmpdir, prefix);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    if (!fgets(out, sizeof out, p))
        out[0] = '\0';
    pclose(p);
    return atoi(out);
}

Test(db, export_never_destroys_an_input_or_an_old_output)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("x.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", NULL);
    fill_two_problems(&f);
    db_counts c0, c1;
    counts_of(f.s, &c0);
    unsigned long long sum0 = file_sum(tpath("x.db"));
    static const db_format fmts[] = {DB_FMT_JSON, DB_FMT_CSV, DB_FMT_CHEADER, DB_FMT_BUNDLE};
    const char *same[] = {tpath("x.db"), tpath("x.db-wal"), tpath("x.db-shm")};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++) {
            pt_err e = {0};
            int n = -1;
            cr_expect_eq(db_export_file(f.s, fmts[i], NULL, NULL, same[j], &n, &e), PT_EINVAL,
                         "format %zu over %s", i, same[j]);
            cr_expect(strstr(e.msg, "is the store"), "%s", e.msg);
            cr_expect(!strchr(e.msg, '\n'));
        }
    char msg[256];
    pt_err e = {0};
    cr_expect_eq(db_integrity(f.s, msg, sizeof msg, &e), PT_OK, "%s", msg);
    counts_of(f.s, &c1);
    cr_expect_eq(memcmp(&c0, &c1, sizeof c0), 0, "row counts changed");
    cr_expect_eq(file_sum(tpath("x.db")), sum0, "the store file changed");

    /* a good export, then failures that must leave it whole */
    int n = 0;
    cr_assert_eq(db_export_file(f.s, DB_FMT_JSON, NULL, NULL, tpath("t.json"), &n, &e), PT_OK,
                 "%s", e.msg);
    cr_expect_eq(n, 2);
    write_text(tpath("old.json"), "the old table\n");
    unsigned long long old = file_sum(tpath("old.json"));
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_export_file(f.s, DB_FMT_JSON, NULL, NULL, tpath("nodir/t.json"), &n, &e),
                  PT_OK);
    cr_expect(strstr(e.msg, "No such file or directory"), "%s", e.msg);
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_export_file(f.s, DB_FMT_CSV, NULL, NULL, tmpdir, &n, &e), PT_OK);
    cr_expect(strstr(e.msg, "directory"), "%s", e.msg);
    memset(&e, 0, sizeof e);
    cr_expect_neq(db_export_file(f.s, DB_FMT_BUNDLE, NULL, NULL, tmpdir, &n, &e), PT_OK);
    /* a full disk: a file-size limit in a child makes every write past 1 KB fail */
    pid_t kid = fork();
    if (kid == 0) {
        /* its own connection, opened before the limit (the -shm exists) */
        db_store *r = NULL;
        pt_err ce = {0};
        db_open_opts ro = {.readonly = true};
        if (db_open(tpath("x.db"), &ro, &r, &ce))
            _exit(2);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1024, 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        int cn;
        int r1 = db_export_file(r, DB_FMT_JSON, NULL, NULL, tpath("old.json"), &cn, &ce);
        bool named = strstr(ce.msg, "File too large") != NULL;
        fprintf(stderr, "under a 1 KB limit: %s\n", ce.msg);
        memset(&ce, 0, sizeof ce);
        int r2 = db_export_file(r, DB_FMT_BUNDLE, NULL, NULL, tpath("nb.db"), &cn, &ce);
        fprintf(stderr, "under a 1 KB limit: %s\n", ce.msg);
        db_close(r);
        _exit(r1 == PT_EIO && r2 != PT_OK && named ? 0 : 1);
    }
    int st;
    waitpid(kid, &st, 0);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the exports under a 1 KB limit did not fail "
                                                     "with the cause named");
    cr_expect_eq(file_sum(tpath("old.json")), old, "a failed export changed the old file");
    cr_expect(access(tpath("nb.db"), F_OK) != 0, "a failed bundle left its file");
    cr_expect_eq(leftovers("old.json."), 0, "temporaries left behind");
    cr_expect_eq(leftovers("nb.db"), 0, "bundle temporaries left behind");
    /* a bundle is renamed into place whole: one file, no journal beside it */
    memset(&e, 0, sizeof e);
    cr_assert_eq(db_export_file(f.s, DB_FMT_BUNDLE, NULL, NULL, tpath("nb.db"), &n, &e), PT_OK,
                 "%s", e.msg);
    cr_expect_eq(leftovers("nb.db"), 1);
    db_store *b = open_ok(tpath("nb.db"));
    counts_of(b, &c1);
    cr_expect_eq(c1.winners, 2);
    db_close(b);
    counts_of(f.s, &c1);
    cr_expect_eq(memcmp(&c0, &c1, sizeof c0), 0, "row counts changed");
    db_close(f.s);
}

/* ---- item 13: every import path recomputes keys and hashes --------------- */

static void sql_on(const char *path, const char *sql)
{
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    char *err = NULL;
    cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, &err), SQLITE_OK, "%s: %s", sql,
                 err ? err : "");
    sqlite3_close(h);
}

static db_fingerprint fp_emu_a100(void)
{
    return (db_fingerprint){"emulator (cost model of NVIDIA A100-SXM4-80GB)", 80, 108, "none",
                            "none", 90, "ptxtune 0.1.0", "cost-model/1"};
}

static db_fingerprint fp_h100(void)
{
    return (db_fingerprint){"NVIDIA H100 80GB HBM3", 90, 132, "13000", "nvJitLink 13.0", 90,
                            "ptxtune 0.1.0", "ptxtune-bench/1"};
}

/* A store at path: fingerprint fp, one problem, one winner of time t. */
static void one_winner_store(const char *path, const db_fingerprint *fp, const char *uuid,
                             const char *cfg, double t)
{
    fixture f;
    setup_store(&f, path, fp, "gemm m=16 n=4096 k=4096", "16,4096,4096", uuid);
    put(&f, f.run, f.prob, cfg, t, 0.01, "ok", true, NULL);
    db_close(f.s);
}

/* Merging src into dst is refused with a message holding want; dst keeps
 * its rows and its winner. */
static void expect_merge_refused(const char *dst, const char *src, const char *want)
{
    db_store *d = open_ok(dst);
    db_counts c0, c1;
    counts_of(d, &c0);
    db_merge_stats st;
    pt_err e = {0};
    int rc = db_merge(d, src, &st, &e);
    cr_expect_eq(rc, PT_EINVAL, "merge of a tampered %s: rc %d (%s)", src, rc, e.msg);
    cr_expect(strstr(e.msg, want), "'%s' lacks '%s'", e.msg, want);
    cr_expect(!strchr(e.msg, '\n'), "%s", e.msg);
    counts_of(d, &c1);
    cr_expect_eq(memcmp(&c0, &c1, sizeof c0), 0, "the merge of %s changed the store", src);
    db_fingerprint a = fp_emu_a100();
    got g = {0};
    bool found = false;
    cr_assert_eq(db_winner_get(d, &a, "gemm m=16 n=4096 k=4096", got_cb, &g, &found, &e), PT_OK);
    cr_expect(found && strcmp(g.config, "bm=64") == 0, "the A100 winner is now '%s'", g.config);
    db_close(d);
}

Test(db, merge_and_bundle_import_refuse_tampered_keys_and_hashes)
{
    db_fingerprint a = fp_emu_a100(), h = fp_h100();
    char akey[17], sql[512];
    db_fingerprint_key(&a, akey);
    one_winner_store(tpath("dst.db"), &a, "aaaa0000", "bm=64", 2e-3);

    /* H100 fields under the A100 emulator key, with a faster kernel */
    one_winner_store(tpath("h.db"), &h, "hhhh0000", "bm=128", 1e-4);
    snprintf(sql, sizeof sql, "UPDATE fingerprints SET key = '%s'", akey);
    sql_on(tpath("h.db"), sql);
    expect_merge_refused(tpath("dst.db"), tpath("h.db"), "does not match its fields");

    /* the A100 fields under a wrong key: rows would all be "already present" */
    one_winner_store(tpath("k.db"), &a, "kkkk0000", "bm=32", 1e-3);
    sql_on(tpath("k.db"), "UPDATE fingerprints SET key = 'deadbeefdeadbeef'");
    expect_merge_refused(tpath("dst.db"), tpath("k.db"), "fingerprint 1");

    /* a kernel whose PTX is not what its hash says */
    one_winner_store(tpath("p.db"), &a, "pppp0000", "bm=16", 1e-3);
    sql_on(tpath("p.db"), "UPDATE kernels SET ptx = '.version 8.0\n// arbitrary code\n'");
    expect_merge_refused(tpath("dst.db"), tpath("p.db"), "does not match its PTX");

    /* a bundle: exported whole, tampered, then imported */
    one_winner_store(tpath("s.db"), &a, "ssss0000", "bm=8", 1e-3);
    db_store *s = open_ok(tpath("s.db"));
    pt_err e = {0};
    int n;
    cr_assert_eq(db_export_bundle(s, NULL, NULL, tpath("b.db"), &n, &e), PT_OK, "%s", e.msg);
    db_close(s);
    sql_on(tpath("b.db"), "UPDATE kernels SET ptx = ptx || 'trap;'");
    expect_merge_refused(tpath("dst.db"), tpath("b.db"), "kernel 1");

    /* a run the store holds under the A100 fingerprint, claimed by an H100 source */
    one_winner_store(tpath("r.db"), &h, "aaaa0000", "bm=4", 1e-5);
    expect_merge_refused(tpath("dst.db"), tpath("r.db"), "(aaaa0000) is in the store under another fingerprint");

    /* a winner row that breaks the rules: a negative time, an unknown status */
    one_winner_store(tpath("t.db"), &a, "tttt0000", "bm=2", 1e-3);
    sql_on(tpath("t.db"), "UPDATE measurements SET t_median = -1");
    expect_merge_refused(tpath("dst.db"), tpath("t.db"), "positive");

    /* a problem key the store holds under another op */
    one_winner_store(tpath("o.db"), &a, "oooo1111", "bm=1", 1e-3);
    sql_on(tpath("o.db"), "UPDATE problems SET op = 'softmax'");
    expect_merge_refused(tpath("dst.db"), tpath("o.db"), "is in the store with op 'gemm'");

    /* the tampered bundle cannot be exported either (no arbitrary PTX in a header) */
    db_open_opts ro = {.readonly = true};
    cr_assert_eq(db_open(tpath("b.db"), &ro, &s, &e), PT_OK, "%s", e.msg);
    static const db_format fmts[] = {DB_FMT_JSON, DB_FMT_CSV, DB_FMT_CHEADER};
    for (size_t i = 0; i < 3; i++) {
        pt_buf b;
        pt_buf_init(&b);
        memset(&e, 0, sizeof e);
        cr_expect_eq(db_export_text(s, fmts[i], NULL, NULL, &b, &n, &e), PT_EINVAL,
                     "format %zu exported a tampered kernel", i);
        cr_expect(strstr(e.msg, "does not match its PTX"), "%s", e.msg);
        pt_buf_free(&b);
    }
    db_close(s);

    /* an untampered source still merges */
    one_winner_store(tpath("ok.db"), &h, "oooo0000", "bm=256", 1e-4);
    db_store *d = open_ok(tpath("dst.db"));
    db_merge_stats st;
    cr_assert_eq(db_merge(d, tpath("ok.db"), &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.measurements, 1);
    db_close(d);
}

/* ---- item 14: JSON import validates every field -------------------------- */

/* root with the value at path ("rows/1/time_s/median") set to the JSON text
 * v, or removed when v is NULL; returns the table as text. */
static char *mutate(const char *table, const char *path, const char *v)
{
    json_error_t je;
    json_t *root = json_loads(table, 0, &je);
    cr_assert(root, "%s", je.text);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *at = root;
    char *save = NULL, *tok = strtok_r(buf, "/", &save);
    while (tok) {
        char *next = strtok_r(NULL, "/", &save);
        bool idx = json_is_array(at);
        if (!next) {
            if (!v)
                cr_assert_eq(json_object_del(at, tok), 0, "%s", path);
            else {
                json_t *nv = json_loads(v, JSON_DECODE_ANY, &je);
                cr_assert(nv, "%s: %s", v, je.text);
                if (idx)
                    json_array_set_new(at, (size_t)atoi(tok), nv);
                else
                    json_object_set_new(at, tok, nv);
            }
        } else
            at = idx ? json_array_get(at, (size_t)atoi(tok)) : json_object_get(at, tok);
        cr_assert(at, "%s: no '%s'", path, tok);
        tok = next;
    }
    char *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    return out;
}

Test(db, json_import_validates_every_field_and_refuses_the_file)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("v.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", NULL);
    fill_two_problems(&f);
    int n;
    char *j1 = export_str(f.s, DB_FMT_JSON, NULL, NULL, &n);
    cr_assert_eq(n, 2);
    db_close(f.s);
    static const struct {
        const char *path, *value, *want;
    } cases[] = {
        /* a CHECK constraint: was dropped as "already present" */
        {"rows/1/measurement/detail/status", "\"exploded\"", "measurement.detail.status"},
        {"rows/1/source", "\"guessed\"", "source"},
        /* a winner must have a positive time */
        {"rows/1/time_s/median", "-0.001", "time_s.median"},
        {"rows/1/time_s/median", "0", "time_s.median"},
        {"rows/1/time_s/median", "null", "time_s.median"},
        {"rows/1/time_s/median", "\"fast\"", "time_s.median"},
        {"rows/1/time_s/min", "-1", "time_s.min"},
        {"rows/1/time_s/reps", "2.5", "time_s.reps"},
        /* mistyped fingerprint fields: were cc=0, an empty driver */
        {"rows/1/fingerprint/cc", "\"90\"", "fingerprint.cc"},
        {"rows/1/fingerprint/sm_count", "132.0", "fingerprint.sm_count"},
        {"rows/1/fingerprint/driver", "13000", "fingerprint.driver"},
        {"rows/1/fingerprint/cc", "4294967386", "fingerprint.cc"},
        {"rows/1/fingerprint/key", NULL, "fingerprint.key"},
        {"rows/1/fingerprint/key", "\"0000000000000000\"", "does not match its fields"},
        /* "final": 1 was read as not final */
        {"rows/1/measurement/detail/final", "1", "measurement.detail.final"},
        {"rows/1/verified", "1", "verified"},
        {"rows/1/measurement/detail/rung", "-1", "measurement.detail.rung"},
        {"rows/1/measurement/detail/rung", "\"0\"", "measurement.detail.rung"},
        {"rows/1/measurement/provenance/seed", "\"7\"", "measurement.provenance.seed"},
        {"rows/1/measurement/provenance/status", "\"exploded\"", "measurement.provenance.status"},
        {"rows/1/measurement/provenance/run", "\"\"", "measurement.provenance.run"},
        {"rows/1/problem/key", "7", "problem.key"},
        {"rows/1/problem/flops", "-5", "problem.flops"},
        {"rows/1/config", NULL, "config"},
        {"rows/1/kernel/ptx", "\"tampered\"", "does not match its PTX"},
        {"rows/1/kernel/op", "\"softmax\"", "kernel.op"},
        {"rows/1/cubin/base64", "\"!!!!\"", "base64"},
        {"rows/1/tflops", "\"many\"", "tflops"},
        {"rows/1", "[]", "not an object"},
        {"version", "1.0", "version"},
    };
    db_store *d = open_ok(tpath("dst.db"));
    db_counts c0, c1;
    counts_of(d, &c0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = mutate(j1, cases[i].path, cases[i].value);
        db_merge_stats st;
        pt_err e = {0};
        int rc = db_import_json(d, t, strlen(t), "t.json", &st, &e);
        cr_expect_eq(rc, PT_EINVAL, "%s = %s: rc %d, %lld added, %lld skipped (%s)",
                     cases[i].path, cases[i].value ? cases[i].value : "(removed)", rc,
                     (long long)st.measurements, (long long)st.skipped, e.msg);
        cr_expect(strstr(e.msg, cases[i].want), "%s: '%s' lacks '%s'", cases[i].path, e.msg,
                  cases[i].want);
        cr_expect(strstr(e.msg, "t.json"), "%s", e.msg);
        if (strncmp(cases[i].path, "rows/", 5) == 0) {
            cr_expect(strstr(e.msg, "row 2"), "%s: '%s' does not name row 2", cases[i].path,
                      e.msg);
            cr_expect(strstr(e.msg, "1 of 2 rows refused"), "%s", e.msg);
            cr_expect_eq(st.refused, 1, "%s", cases[i].path);
            cr_expect_eq(st.measurements, 0);
        }
        cr_expect(!strchr(e.msg, '\n'), "%s", e.msg);
        counts_of(d, &c1);
        cr_expect_eq(memcmp(&c0, &c1, sizeof c0), 0, "%s: row 1 was imported", cases[i].path);
        free(t);
    }
    /* two bad rows: both counted, the first reason given */
    char *t1 = mutate(j1, "rows/0/time_s/median", "-1");
    char *t2 = mutate(t1, "rows/1/fingerprint/cc", "\"x\"");
    db_merge_stats st;
    pt_err e = {0};
    cr_expect_eq(db_import_json(d, t2, strlen(t2), "t.json", &st, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "2 of 2 rows refused") && strstr(e.msg, "row 1"), "%s", e.msg);
    cr_expect_eq(st.refused, 2);
    free(t1);
    free(t2);
    /* the untouched table imports, and again as "already present" */
    memset(&e, 0, sizeof e);
    cr_assert_eq(db_import_json(d, j1, strlen(j1), "j1.json", &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.measurements, 2);
    cr_expect_eq(st.refused, 0);
    cr_assert_eq(db_import_json(d, j1, strlen(j1), "j1.json", &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(st.skipped, 2);
    /* a run of this store claimed by a row of another fingerprint */
    char *t3 = mutate(j1, "rows/1/fingerprint/driver", "\"99999\"");
    json_t *r3 = json_loads(t3, 0, NULL);
    json_t *fp3 = json_object_get(json_array_get(json_object_get(r3, "rows"), 1), "fingerprint");
    db_fingerprint b = a;
    b.driver = "99999";
    char key[17];
    db_fingerprint_key(&b, key);
    json_object_set_new(fp3, "key", json_string(key));
    char *t4 = json_dumps(r3, JSON_COMPACT | JSON_PRESERVE_ORDER);
    memset(&e, 0, sizeof e);
    cr_expect_eq(db_import_json(d, t4, strlen(t4), "t.json", &st, &e), PT_EINVAL, "%s", e.msg);
    cr_expect(strstr(e.msg, "another fingerprint"), "%s", e.msg);
    json_decref(r3);
    free(t3);
    free(t4);
    db_close(d);
    free(j1);
}

/* ---- issue 15 item 1: identities, and a store of the old schema ------------ */

static void old_hash(const char *ptx, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)pt_hash64(ptx, strlen(ptx)));
}

/* The kernel identity leaves out comments (the tool version line, mock
 * directives) and blank lines; the body counts. */
Test(db, kernel_hash_is_the_body_without_comments)
{
    const char *a = "//\n// Generated by ptxtune 0.1.0\n//\n\n.version 8.0\n.entry k(\n)\n{\n\tret;\n}\n";
    const char *b = "//\n// Generated by ptxtune 0.1.1\n//\n.version 8.0\n// mock: time_us=3\n"
                    ".entry k(   \n)\n{\n\tret; /* done */\n}\n";
    const char *c = "//\n// Generated by ptxtune 0.1.0\n//\n\n.version 8.0\n.entry k2(\n)\n{\n\tret;\n}\n";
    char ha[17], hb[17], hc[17];
    db_kernel_hash(a, strlen(a), ha);
    db_kernel_hash(b, strlen(b), hb);
    db_kernel_hash(c, strlen(c), hc);
    cr_expect_str_eq(ha, hb);
    cr_expect_str_neq(ha, hc);
}

/* A store written by the schema-2 build, made by SQL: two builds' PTX of
 * one kernel (only the version comment differs), two spellings of one
 * problem, a mock run whose rows said 'measured'. Opened by this build it
 * is version 3: one kernel, one problem, mock rows say mock, every identity
 * checks, the winner is kept and a mock row is never served. */
Test(db, a_schema_2_store_is_carried_forward)
{
    const char *path = tpath("v2.db");
    db_store *s = NULL;
    pt_err e = {0};
    db_open_opts o2 = {.max_version = 2};
    cr_assert_eq(db_open(path, &o2, &s, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(db_schema_version(s), 2);
    db_close(s);
    db_fingerprint fp = fp_h100();
    char fk[17], h1[17], h2[17], h3[17];
    db_fingerprint_key(&fp, fk);
    const char *p1 = "//\n// Generated by ptxtune 0.1.0\n//\n\n.version 8.0\n.entry k1()\n{ ret; }\n";
    const char *p2 = "//\n// Generated by ptxtune 0.1.1\n//\n\n.version 8.0\n.entry k1()\n{ ret; }\n";
    const char *p3 = "//\n// Generated by ptxtune 0.1.0\n//\n\n.version 8.0\n.entry k3()\n{ ret; }\n";
    old_hash(p1, h1);
    old_hash(p2, h2);
    old_hash(p3, h3);
    char sql[8192];
    snprintf(sql, sizeof sql,
             "INSERT INTO fingerprints VALUES(1, '%s', '%s', %d, %d, '%s', '%s', %d, '%s', '%s');"
             "INSERT INTO problems VALUES(1, 'elementwise expr=\"y=silu(g)*u\" shape=u=64x256,g=64x256',"
             " 'elementwise', 'elementwise expr=\"y=silu(g)*u\" shape=u=#x#,g=#x#', '64,256,64,256',"
             " 'gate', 1, 1);"
             "INSERT INTO problems VALUES(2, 'elementwise expr=\"y = (silu(g)) * u\" shape=g=64x256,u=64x256',"
             " 'elementwise', 'x', '64,256,64,256', 'gate2', 1, 1);"
             "INSERT INTO kernels VALUES(1, '%s', 'elementwise', 'a=1', 'k1', '%s');"
             "INSERT INTO kernels VALUES(2, '%s', 'elementwise', 'a=2', 'k1', '%s');"
             "INSERT INTO kernels VALUES(3, '%s', 'elementwise', 'a=3', 'k3', '%s');"
             "INSERT INTO cubins VALUES(2, 'sm_90', 'nvJitLink', x'00', '{}');"
             "INSERT INTO runs VALUES(1, 'run1uuid0000', 1, '0.1.0', 'g', 'exhaustive', 'all', 1,"
             " 'cuda', 'k', 'h', 1, 1.0, 2.0, 'done', 'sm_90');"
             "INSERT INTO runs VALUES(2, 'run2uuid0000', 1, '0.1.1', 'g', 'exhaustive', 'all', 1,"
             " 'mock', 'k', 'h', 1, 3.0, 4.0, 'done', 'sm_90');"
             "INSERT INTO measurements VALUES(1, 1, 1, 1, 'a=1', 0, 1, 'ok', '', 'measured', 1,"
             " 1e-3, 1e-3, 1e-3, 0.01, 10, 1, 1, '{}', 1.5);"
             "INSERT INTO measurements VALUES(2, 1, 2, 2, 'a=2', 0, 1, 'ok', '', 'measured', 1,"
             " 1.1e-3, 1.1e-3, 1.1e-3, 0.01, 10, 1, 1, '{}', 1.5);"
             "INSERT INTO measurements VALUES(3, 1, 1, 2, 'a=3', 0, 1, 'ok', '', 'measured', 1,"
             " 1.2e-3, 1.2e-3, 1.2e-3, 0.01, 10, 1, 1, '{}', 1.5);"
             "INSERT INTO measurements VALUES(4, 2, 1, 3, 'a=4', 0, 1, 'ok', '', 'measured', 1,"
             " 0.5e-3, 0.5e-3, 0.5e-3, 0.01, 10, 1, 1, '{}', 3.5);"
             "INSERT INTO winners VALUES(1, 1, 4); INSERT INTO winners VALUES(1, 2, 2);",
             fk, fp.gpu, fp.cc, fp.sm_count, fp.driver, fp.compiler, fp.ptx_version, fp.generator,
             fp.protocol, h1, p1, h2, p2, h3, p3);
    sql_on(path, sql);
    db_open_opts o = {.rekey = search_problem_rekey};
    cr_assert_eq(db_open(path, &o, &s, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(db_schema_version(s), 3);
    cr_expect_eq(db_verify(s, &e), PT_OK, "%s", e.msg);
    int64_t n;
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM kernels", &n, &e), PT_OK);
    cr_expect_eq(n, 2, "kernels that differ only in the version comment are one");
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM problems", &n, &e), PT_OK);
    cr_expect_eq(n, 1, "two spellings of one problem are one");
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements", &n, &e), PT_OK);
    cr_expect_eq(n, 3, "one row lost: run 1 measured kernel k1 for both spellings (kept once)");
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements WHERE status = 'duplicate'",
                              &n, &e), PT_OK);
    cr_expect_eq(n, 1, "a=2 and a=3 are one kernel in one run: the second is a duplicate");
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements WHERE source = 'mock'", &n,
                              &e), PT_OK);
    cr_expect_eq(n, 1, "the mock run's row says mock");
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM cubins", &n, &e), PT_OK);
    cr_expect_eq(n, 1);
    pt_arena *a = pt_arena_new();
    search_problem sp;
    cr_assert_eq(search_problem_parse(a, "elementwise", "expr='y = silu(g) * u' "
                                      "shape=g=64x256,u=64x256", &sp, &e), PT_OK, "%s", e.msg);
    got g = {0};
    bool found = false;
    cr_assert_eq(db_winner_get(s, &fp, sp.key, got_cb, &g, &found, &e), PT_OK, "%s", e.msg);
    cr_expect(found, "the canonical key finds the old store's winner");
    cr_expect_str_eq(g.config, "a=1", "the measured winner, not the faster mock row");
    cr_expect_eq(g.t, 1e-3);
    pt_arena_free(a);
    db_close(s);
    /* a writer of this version opens it again: nothing changes */
    cr_assert_eq(db_open(path, &o, &s, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(db_query_int(s, "SELECT count(*) FROM measurements", &n, &e), PT_OK);
    cr_expect_eq(n, 3);
    db_close(s);
}

/* ---- issue 15 item 3: provenance and naming a GPU -------------------------- */

static int fp_count(void *ctx, const char *key, const db_fingerprint *f)
{
    (void)key;
    (void)f;
    (*(int *)ctx)++;
    return 0;
}

/* A mock row is stored and kept as the winner of its (mock) fingerprint,
 * but no reader serves it: lookup, winner lists, every export. --gpu takes
 * a key, a unique prefix, a GPU name or its short name; nothing else. */
Test(db, mock_rows_are_never_served_and_gpu_names_resolve)
{
    fixture f;
    db_fingerprint h = fp_h100();
    setup_store(&f, tpath("m.db"), &h, "gemm m=16 n=4096 k=4096", "16,4096,4096", "mockrun00000");
    pt_err e = {0};
    db_kernel k = {"00000000000000aa", "gemm", "bm=1", "kern", ".k bm=1\n"};
    char hash[17];
    db_kernel_hash(k.ptx, strlen(k.ptx), hash);
    k.hash = hash;
    db_measurement m = {.run_id = f.run, .problem_id = f.prob, .config = "bm=1", .final = true,
                        .status = "ok", .source = "mock", .verified = 1, .t_min = 1e-3,
                        .t_median = 1e-3, .t_max = 1e-3, .spread = 0.01, .reps = 5,
                        .tflops = NAN, .gbps = NAN};
    bool ins;
    cr_assert_eq(db_record(f.s, &k, NULL, &m, &ins, &e), PT_OK, "%s", e.msg);
    int64_t n;
    cr_assert_eq(db_query_int(f.s, "SELECT count(*) FROM winners", &n, &e), PT_OK);
    cr_expect_eq(n, 1, "the winner is kept (its fingerprint's best)");
    bool found = true;
    cr_expect_eq(db_winner_get(f.s, &h, "gemm m=16 n=4096 k=4096", NULL, NULL, &found, &e), PT_OK);
    cr_expect(!found, "a mock winner was served");
    db_problem p = {"gemm", "gemm m=16 n=4096 k=4096", "gemm dtype=bf16 layout=tn",
                    "16,4096,4096", "", 0, 0, false};
    found = true;
    cr_expect_eq(db_lookup(f.s, &h, &p, NULL, NULL, &found, &e), PT_OK);
    cr_expect(!found, "a mock winner was looked up");
    int cnt = 0;
    cr_expect_eq(db_winners(f.s, NULL, NULL, count_cb, &cnt, &e), PT_OK);
    cr_expect_eq(cnt, 0, "a mock winner was listed");
    int rows = -1;
    free(export_str(f.s, DB_FMT_JSON, NULL, NULL, &rows));
    cr_expect_eq(rows, 0, "a mock winner was exported");
    /* the same row measured: served */
    m.source = "measured";
    m.config = "bm=2";
    k.ptx = ".k bm=2\n";
    db_kernel_hash(k.ptx, strlen(k.ptx), hash);
    cr_assert_eq(db_record(f.s, &k, NULL, &m, &ins, &e), PT_OK, "%s", e.msg);
    cr_expect(ins);
    found = false;
    cr_expect_eq(db_winner_get(f.s, &h, "gemm m=16 n=4096 k=4096", NULL, NULL, &found, &e), PT_OK);
    cr_expect(found);
    /* --gpu: key, unique prefix, GPU name, short names; unknown and ambiguous refused */
    db_fingerprint h2 = h;
    h2.driver = "13010";
    int64_t fp2;
    cr_assert_eq(db_fingerprint_put(f.s, &h2, &fp2, &e), PT_OK);
    char key[17];
    db_fingerprint_key(&h, key);
    static const struct {
        const char *gpu;
        int want; /* fingerprints named; -1 refused */
    } cases[] = {
        {"NVIDIA H100 80GB HBM3", 2}, {"H100", 2}, {"h100", 2}, {"H100 80GB HBM3", 2},
        {"H200", -1}, {"NVIDIA", -1}, {"zzzz", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int c = 0;
        memset(&e, 0, sizeof e);
        int rc = db_gpu_resolve(f.s, cases[i].gpu, fp_count, &c, &e);
        if (cases[i].want < 0) {
            cr_expect_eq(rc, PT_EINVAL, "%s", cases[i].gpu);
            cr_expect(strstr(e.msg, "known: ") && strstr(e.msg, key), "%s", e.msg);
        } else {
            cr_expect_eq(rc, PT_OK, "%s: %s", cases[i].gpu, e.msg);
            cr_expect_eq(c, cases[i].want, "%s", cases[i].gpu);
        }
    }
    int c = 0;
    cr_expect_eq(db_gpu_resolve(f.s, key, fp_count, &c, &e), PT_OK);
    cr_expect_eq(c, 1);
    char pre[8];
    snprintf(pre, sizeof pre, "%.6s", key);
    c = 0;
    cr_expect_eq(db_gpu_resolve(f.s, pre, fp_count, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(c, 1);
    c = 0;
    cr_expect_eq(db_gpu_resolve(f.s, "", fp_count, &c, &e), PT_EINVAL);
    db_close(f.s);
}

/* db merge keeps where a timing came from: a row an incremental sweep reused
 * names the run that took it (sample), in the merged store too, and a second
 * merge adds nothing. */
Test(db, merge_keeps_the_sample_of_reused_rows)
{
    fixture f;
    db_fingerprint a = fp_a();
    setup_store(&f, tpath("s.db"), &a, "gemm m=16 n=4096 k=4096", "16,4096,4096", "cccc3333");
    pt_err e = {0};
    db_kernel k = {NULL, "gemm", "bm=1", "kern", ".k bm=1\n"};
    char hash[17];
    db_kernel_hash(k.ptx, strlen(k.ptx), hash);
    k.hash = hash;
    db_measurement m = {.run_id = f.run, .problem_id = f.prob, .config = "bm=1", .final = true,
                        .status = "ok", .source = "measured", .sample = "eeee5555",
                        .verified = 1, .t_min = 1e-3, .t_median = 1e-3, .t_max = 1e-3,
                        .spread = 0.01, .reps = 5, .tflops = NAN, .gbps = NAN};
    bool ins;
    cr_assert_eq(db_record(f.s, &k, NULL, &m, &ins, &e), PT_OK, "%s", e.msg);
    m.config = "bm=2";
    m.sample = NULL; /* measured by this run */
    k.ptx = ".k bm=2\n";
    db_kernel_hash(k.ptx, strlen(k.ptx), hash);
    cr_assert_eq(db_record(f.s, &k, NULL, &m, &ins, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(db_run_end(f.s, f.run, "done", &e), PT_OK, "%s", e.msg);
    db_close(f.s);

    db_store *d = open_ok(tpath("d.db"));
    db_merge_stats st;
    for (int pass = 0; pass < 2; pass++) {
        cr_assert_eq(db_merge(d, tpath("s.db"), &st, &e), PT_OK, "%s", e.msg);
        cr_expect_eq(st.measurements, pass ? 0 : 2, "pass %d", pass);
        int64_t n;
        cr_assert_eq(db_query_int(d, "SELECT count(*) FROM measurements", &n, &e), PT_OK);
        cr_expect_eq(n, 2, "pass %d", pass);
        cr_assert_eq(db_query_int(d, "SELECT count(*) FROM measurements WHERE config = 'bm=1'"
                                     " AND sample = 'eeee5555'", &n, &e), PT_OK);
        cr_expect_eq(n, 1, "pass %d: the reused row lost its sample", pass);
        cr_assert_eq(db_query_int(d, "SELECT count(*) FROM measurements WHERE config = 'bm=2'"
                                     " AND sample IS NULL", &n, &e), PT_OK);
        cr_expect_eq(n, 1, "pass %d: a row of its own run gained a sample", pass);
    }
    db_close(d);
}
