/* Tuning sweeps end to end: the driver with an in-process fake device
 * (resume by replay, duplicates, failures, fingerprints), and the ptxtune
 * command: kill -9 at 20 random moments of a 300-candidate emulator sweep,
 * four concurrent sweeps on one store, export/import round trips, the C
 * header, the mock backend through the isolated worker, bad input. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "db/db.h"
#include "tuner/tune.h"

static char dir[64];

static void mk(void)
{
    snprintf(dir, sizeof dir, "/tmp/ptxtune_tune_XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void rm(void)
{
    if (getenv("PTXTUNE_KEEP_TMP")) {
        fprintf(stderr, "kept %s\n", dir);
        return;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

static const char *P(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs "ptxtune ARGS" in dir; exit code, stdout and stderr. */
static int cli(const char *args, char *out, size_t on, char *err, size_t en)
{
    return test_run_ptxtune(dir, args, out, on, err, en);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
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

/* ---- winners as text: problem key -> config and kernel ------------------ */

/* Problem, config and time of every winner. The kernel hash is left out:
 * gen/elementwise.c names its entry from a hash whose strlen() may run
 * before the config string is written (argument order), so one config can
 * print different entry names in two processes (reported; not ours). */
static int winner_line(void *ctx, const db_winner *w)
{
    pt_buf *b = ctx;
    pt_buf_printf(b, "%s | %s | %.17g\n", w->problem_key, w->config, w->t_median);
    return 0;
}

static char *winners_of(const char *path)
{
    db_store *s;
    pt_err e = {0};
    db_open_opts o = {.readonly = true};
    cr_assert_eq(db_open(path, &o, &s, &e), PT_OK, "%s", e.msg);
    pt_buf b;
    pt_buf_init(&b);
    cr_assert_eq(db_winners(s, NULL, NULL, winner_line, &b, &e), PT_OK, "%s", e.msg);
    db_close(s);
    return b.s ? pt_buf_take(&b) : strdup("");
}

/* -1 when the store cannot be read (yet): for polling a running sweep. */
static int64_t try_query(const char *path, const char *sql)
{
    db_store *s;
    pt_err e = {0};
    db_open_opts o = {.readonly = true};
    if (db_open(path, &o, &s, &e))
        return -1;
    int64_t v = -1;
    if (db_query_int(s, sql, &v, &e))
        v = -1;
    db_close(s);
    return v;
}

static int64_t query(const char *path, const char *sql)
{
    db_store *s;
    pt_err e = {0};
    db_open_opts o = {.readonly = true};
    cr_assert_eq(db_open(path, &o, &s, &e), PT_OK, "%s", e.msg);
    int64_t v = -1;
    cr_assert_eq(db_query_int(s, sql, &v, &e), PT_OK, "%s", e.msg);
    db_close(s);
    return v;
}

TestSuite(tune, .init = mk, .fini = rm);

/* ---- the driver with a fake device ------------------------------------------ */

typedef struct fake {
    int calls, stop_after;
    volatile sig_atomic_t stop;
    int fail_every;
} fake;

/* Time from the config (deterministic), a fault for every fail_every-th
 * config by hash. */
static int fake_measure(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    (void)e;
    fake *f = ctx;
    f->calls++;
    if (f->stop_after && f->calls >= f->stop_after)
        f->stop = 1;
    uint64_t h = pt_hash64(c->config_str, strlen(c->config_str));
    if (f->fail_every && h % (uint64_t)f->fail_every == 0) {
        snprintf(m->cls, sizeof m->cls, "fault");
        snprintf(m->msg, sizeof m->msg, "planted fault");
        return PT_OK;
    }
    double t = 1e-5 * (1 + (double)(h % 1000) / 1000.0);
    snprintf(m->cls, sizeof m->cls, "ok");
    m->verified = true;
    m->timed = true;
    m->t_min = t * 0.99;
    m->t_median = t;
    m->t_max = t * 1.02;
    m->spread = 0.004;
    m->reps = 30;
    return PT_OK;
}

static search_problem *problems(pt_arena *a, int *n)
{
    static const char *const items[] = {
        "expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 name=one",
        "expr='y = x * rsqrt(mean(x*x, -1) + 1e-6) * g' shape=x=8x512,g=512 dtype=bf16 name=two",
    };
    search_problem *p = pt_arena_alloc(a, 2 * sizeof *p);
    pt_err e = {0};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(search_problem_parse(a, "elementwise", items[i], &p[i], &e), PT_OK, "%s", e.msg);
    *n = 2;
    return p;
}

static const db_fingerprint fake_fp = {"fake GPU", 80, 108, "13000", "none", 90, "ptxtune test",
                                       "fake/1"};

static void fake_sweep(const char *db, search_kind k, fake *f, const db_fingerprint *fp,
                       sweep_summary *sum)
{
    pt_arena *a = pt_arena_new();
    int n;
    search_problem *p = problems(a, &n);
    db_store *s;
    pt_err e = {0};
    cr_assert_eq(db_open(db, NULL, &s, &e), PT_OK, "%s", e.msg);
    sweep_opts o = {.strategy = k, .budget = 40, .seed = 3, .threads = 2, .no_compile = true,
                    .tool_version = "test", .git_rev = "test", .measure = fake_measure,
                    .measure_ctx = f, .fingerprint = fp, .stop = &f->stop};
    cr_assert_eq(sweep_run(s, p, n, &o, sum, &e), PT_OK, "%s", e.msg);
    db_close(s);
    pt_arena_free(a);
}

Test(tune, fake_device_resume_replays_and_matches)
{
    for (int k = 0; k < SEARCH_NKINDS; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "a%d.db", k);
        snprintf(b, sizeof b, "b%d.db", k);
        fake fa = {.fail_every = 7};
        sweep_summary sa, sb;
        fake_sweep(P(a), (search_kind)k, &fa, &fake_fp, &sa);
        cr_expect(!sa.stopped);
        /* interrupted three times, then finished */
        int total_calls = 0, rounds = 0;
        for (;;) {
            fake fb = {.fail_every = 7, .stop_after = 13};
            fake_sweep(P(b), (search_kind)k, &fb, &fake_fp, &sb);
            total_calls += fb.calls;
            rounds++;
            if (!sb.stopped)
                break;
            cr_assert_lt(rounds, 50);
        }
        char *wa = winners_of(P(a)), *wb = winners_of(P(b));
        cr_expect_str_eq(wa, wb, "%s: winners differ", search_kind_name((search_kind)k));
        cr_expect_gt(strlen(wa), 0);
        free(wa);
        free(wb);
        cr_expect_eq(query(P(b), "SELECT count(*) FROM runs"), 1);
        cr_expect_eq(query(P(a), "SELECT count(*) FROM measurements"),
                     query(P(b), "SELECT count(*) FROM measurements"));
        /* the device saw each candidate once (the one interrupted in flight
         * is measured again: at most one per interruption) */
        cr_expect_leq(total_calls, fa.calls + rounds - 1, "%s: %d calls vs %d",
                      search_kind_name((search_kind)k), total_calls, fa.calls);
        cr_expect_gt(query(P(a), "SELECT count(*) FROM measurements WHERE status = 'fault'"), 0);
        cr_expect_eq(query(P(a), "SELECT count(*) FROM measurements WHERE status = 'ok' AND source <> 'measured'"), 0);
    }
}

Test(tune, fingerprints_keep_winners_apart)
{
    fake f1 = {0}, f2 = {0};
    sweep_summary s1, s2;
    fake_sweep(P("fp.db"), SEARCH_RANDOM, &f1, &fake_fp, &s1);
    db_fingerprint other = fake_fp;
    other.driver = "13010";
    fake_sweep(P("fp.db"), SEARCH_RANDOM, &f2, &other, &s2);
    cr_expect_neq(s1.run_id, s2.run_id);
    cr_expect_str_neq(s1.fingerprint, s2.fingerprint);
    cr_expect_eq(query(P("fp.db"), "SELECT count(*) FROM winners"), 4);
    cr_expect_eq(query(P("fp.db"), "SELECT count(DISTINCT fingerprint_id) FROM winners"), 2);
}

static int slow_measure(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e)
{
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    return fake_measure(ctx, c, m, e);
}

Test(tune, time_budget_ends_each_problem)
{
    pt_arena *a = pt_arena_new();
    int n;
    search_problem *p = problems(a, &n);
    db_store *s;
    pt_err e = {0};
    cr_assert_eq(db_open(P("t.db"), NULL, &s, &e), PT_OK, "%s", e.msg);
    fake f = {0};
    sweep_opts o = {.strategy = SEARCH_RANDOM, .budget_s = 0.2, .seed = 1, .no_compile = true,
                    .tool_version = "test", .measure = slow_measure, .measure_ctx = &f,
                    .fingerprint = &fake_fp};
    sweep_summary sum;
    cr_assert_eq(sweep_run(s, p, n, &o, &sum, &e), PT_OK, "%s", e.msg);
    cr_expect(!sum.stopped);
    cr_expect_gt(sum.measured, 2 * 3, "both problems got some time");
    cr_expect_lt(sum.measured, 2 * 20, "the time budget did not stop anything: %lld",
                 (long long)sum.measured);
    int64_t done = -1;
    db_query_int(s, "SELECT count(*) FROM runs WHERE status = 'done' AND budget = '0.2s'", &done, &e);
    cr_expect_eq(done, 1);
    db_close(s);
    pt_arena_free(a);
}

/* ---- the command ---------------------------------------------------------- */

/* 4 problems x 75 candidates: 300 */
static const char kill_problems[] =
    "# the kill -9 test's sweep: 4 x 75 candidates on the emulator\n"
    "elementwise expr=\"y = softmax(x, -1)\" shape=x=32x256 dtype=f16 name=softmax-a\n"
    "elementwise expr=\"y = softmax(x * 0.5, -1)\" shape=x=16x512 dtype=f32 name=softmax-b\n"
    "elementwise expr=\"y = x * rsqrt(mean(x*x, -1) + 1e-6) * g\" shape=x=32x256,g=256 dtype=bf16 name=rmsnorm\n"
    "elementwise expr=\"y = softmax(x, -1) * s\" shape=x=16x256,s=256 dtype=bf16 name=\"it's \\\"q\\\"; --\"\n";

static pid_t spawn_tune(const char *db, const char *extra)
{
    const char *bin = getenv("PTXTUNE_BIN");
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(99);
        FILE *o = freopen("/dev/null", "w", stdout);
        FILE *er = freopen(".kill.err", "a", stderr);
        (void)o;
        (void)er;
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "exec %s tune --problems p.txt --strategy anneal --budget 75 --backend emu "
                 "--seed 11 --db %s --quiet %s",
                 bin, db, extra);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(98);
    }
    return pid;
}

static int integrity(const char *path)
{
    db_store *s;
    pt_err e = {0};
    if (db_open(path, NULL, &s, &e))
        return -1;
    char msg[256];
    int rc = db_integrity(s, msg, sizeof msg, &e);
    db_close(s);
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Kill moments are spread over the whole sweep: 20 random targets in
 * [0, 300) stored candidates; each (re)started sweep is polled and killed a
 * random 0-30 ms after it reaches its target (target 0: during start-up and
 * replay). PTXTUNE_TEST_COMPILE=1 runs the compile gate too (slower). */
Test(tune, kill9_at_20_random_moments_resumes_to_the_same_winners, .timeout = 900)
{
    write_file(P("p.txt"), kill_problems);
    const char *extra = getenv("PTXTUNE_TEST_COMPILE") ? "" : "--no-compile";
    double t0 = now();
    pid_t pid = spawn_tune("a.db", extra);
    int st;
    waitpid(pid, &st, 0);
    double full = now() - t0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uninterrupted sweep failed");
    int64_t na = query(P("a.db"), "SELECT count(*) FROM measurements");
    cr_assert_eq(na, 300, "uninterrupted sweep stored %lld candidates", (long long)na);

    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    int targets[20];
    for (int i = 0; i < 20; i++)
        targets[i] = rand() % 280; /* the last kill must come before the sweep ends */
    qsort(targets, 20, sizeof targets[0], cmp_int);
    int kills = 0, early = 0;
    char log[4096] = "";
    size_t ll = 0;
    t0 = now();
    for (int i = 0; i < 20; i++) {
        pid = spawn_tune("b.db", extra);
        int64_t n = 0;
        bool exited = false;
        for (;;) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
            if (waitpid(pid, &st, WNOHANG) == pid) {
                exited = true;
                break;
            }
            n = try_query(P("b.db"), "SELECT count(*) FROM measurements");
            if (n >= targets[i])
                break;
        }
        if (!exited && try_query(P("b.db"), "SELECT count(*) FROM runs WHERE status = 'done'") > 0) {
            /* it finished between two polls: a later command would start a new sweep */
            waitpid(pid, &st, 0);
            exited = true;
        }
        if (exited) {
            early++;
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sweep failed before its kill");
            break;
        }
        struct timespec jitter = {0, (long)(rand() % 30) * 1000000};
        nanosleep(&jitter, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        kills++;
        cr_assert_eq(integrity(P("b.db")), PT_OK, "integrity_check failed after kill %d", kills);
        int64_t after = query(P("b.db"), "SELECT count(*) FROM measurements");
        ll += (size_t)snprintf(log + ll, sizeof log - ll, "%s%d/%lld", kills > 1 ? " " : "",
                               targets[i], (long long)after);
    }
    if (!early) {
        pid = spawn_tune("b.db", extra);
        waitpid(pid, &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the resumed sweep failed");
    }
    double killed = now() - t0;
    cr_expect_eq(integrity(P("b.db")), PT_OK);
    cr_expect_eq(query(P("b.db"), "SELECT count(*) FROM runs"), 1, "resume started a new run");
    cr_expect_eq(query(P("b.db"), "SELECT count(*) FROM runs WHERE status = 'done'"), 1);
    cr_expect_eq(query(P("b.db"), "SELECT count(*) FROM measurements"), 300);
    cr_expect_eq(query(P("b.db"), "SELECT count(*) FROM (SELECT 1 FROM measurements WHERE kernel_id"
                                  " IS NOT NULL AND status <> 'duplicate' GROUP BY run_id, problem_id,"
                                  " kernel_id, rung HAVING count(*) > 1)"), 0);
    char *wa = winners_of(P("a.db")), *wb = winners_of(P("b.db"));
    cr_expect_str_eq(wa, wb);
    cr_expect_eq(lines(wa), 4);
    free(wa);
    free(wb);
    fprintf(stderr,
            "kill -9 test (%s, seed %u): uninterrupted 300-candidate emu sweep %.1f s; %d kills, "
            "then resumed to the end: %.1f s in all; target/stored after each kill: %s\n",
            *extra ? "no compile" : "with compile", seed, full, kills, killed, log);
    cr_expect_eq(kills, 20, "only %d kills before the sweep finished", kills);
}

Test(tune, four_concurrent_sweeps_on_one_store, .timeout = 300)
{
    write_file(P("p.txt"), kill_problems);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            if (chdir(dir) != 0)
                _exit(99);
            char cmd[1024], errf[64];
            snprintf(errf, sizeof errf, "c%d.err", i);
            FILE *o = freopen("/dev/null", "w", stdout);
            FILE *er = freopen(errf, "w", stderr);
            (void)o;
            (void)er;
            snprintf(cmd, sizeof cmd,
                     "exec %s tune --problems p.txt --strategy random --budget 12 --backend emu "
                     "--seed %d --db c.db --quiet --no-compile --threads 1",
                     getenv("PTXTUNE_BIN"), 100 + i);
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(98);
        }
    }
    for (int i = 0; i < 4; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        char err[4096], name[16];
        snprintf(name, sizeof name, "c%d.err", i);
        test_slurp(P(name), err, sizeof err);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d: exit %d: %s", i,
                  WEXITSTATUS(st), err);
        cr_expect(!strstr(err, "lock") && !strstr(err, "busy") && !strstr(err, "BUSY"),
                  "process %d: %s", i, err);
    }
    cr_expect_eq(query(P("c.db"), "SELECT count(*) FROM runs WHERE status = 'done'"), 4);
    cr_expect_eq(query(P("c.db"), "SELECT count(*) FROM measurements"), 4 * 4 * 12);
    cr_expect_eq(query(P("c.db"), "SELECT count(*) FROM fingerprints"), 1);
    cr_expect_eq(query(P("c.db"), "SELECT count(*) FROM problems"), 4);
    cr_expect_eq(query(P("c.db"), "SELECT count(*) FROM winners"), 4);
    cr_expect_eq(integrity(P("c.db")), PT_OK);
}

Test(tune, export_import_header_and_regress_through_the_command, .timeout = 300)
{
    char out[1 << 16], err[4096];
    /* the emulator's rows (source=model) are served; the mock device's are
     * not (issue 15 item 3), so the table comes from emulator runs */
    int rc = cli("tune elementwise expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 "
                 "name=\"o'brien \\\"x\\\"; DROP TABLE runs;--\" --backend emu --strategy "
                 "exhaustive --budget 24 --db m.db --quiet",
                 out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "tune: %s %s", err, out);
    cr_expect(strstr(out, "source") && strstr(out, "model"), "%s", out);
    cr_expect(strstr(out, "DROP TABLE runs;--"), "%s", out);
    /* a second exhaustive run on the same kernels: no regression */
    rc = cli("tune elementwise expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 --backend emu "
             "--strategy exhaustive --budget 24 --db m.db --quiet --new",
             out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    rc = cli("regress --db m.db --baseline 1 --candidate 2", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "regress: %s %s", out, err);
    cr_expect(strstr(out, " 0 slower"), "%s", out);
    /* json out and back in: the same table */
    cr_assert_eq(cli("export --db m.db --format json --out a.json", NULL, 0, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(cli("import --db n.db a.json", out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cli("export --db n.db --format json --out b.json", NULL, 0, err, sizeof err), 0);
    cr_expect_eq(file_sum(P("a.json")), file_sum(P("b.json")), "json round trip differs");
    char *w1 = winners_of(P("m.db")), *w2 = winners_of(P("n.db"));
    cr_expect_str_eq(w1, w2);
    free(w1);
    free(w2);
    /* the C header compiles into an engine */
    cr_assert_eq(cli("export --db m.db --format c-header --out t.h", NULL, 0, err, sizeof err), 0);
    write_file(P("eng.c"), "#define PTXTUNE_TABLE_IMPLEMENTATION\n#include \"t.h\"\n#include <stdio.h>\n"
                           "int main(void) { printf(\"%s\\n\", ptxtune_table[0].name);\n"
                           "  return ptxtune_table_size == 1 && ptxtune_table[0].ptx[0] ? 0 : 1; }\n");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd %s && cc -std=c11 -Wall -Wextra -Werror eng.c -o eng && ./eng > eng.out", dir);
    cr_expect_eq(system(cmd), 0, "the exported header did not compile or run");
    test_slurp(P("eng.out"), out, sizeof out);
    cr_expect_str_eq(out, "o'brien \"x\"; DROP TABLE runs;--\n");
    /* csv and bundle, merged back */
    cr_expect_eq(cli("export --db m.db --format csv --out t.csv", NULL, 0, err, sizeof err), 0);
    cr_expect_eq(cli("export --db m.db --format bundle --out b.db", NULL, 0, err, sizeof err), 0);
    cr_expect_eq(cli("db merge --db n.db b.db", out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(out, "0 measurements added"), "%s", out);
    cr_expect_eq(cli("db check --db b.db", out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(out, "integrity ok"), "%s", out);
}

/* --backend cuda without a driver: the plain message, exit 4, and no store
 * file created. */
Test(tune, cuda_backend_without_a_driver)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        cr_skip_test("a CUDA driver is installed");
    }
    char out[4096], err[4096];
    int rc = cli("tune elementwise expr='y = x * 2' shape=x=8x64 --backend cuda --db nd.db",
                 out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 4, "%s", err);
    cr_expect(strstr(err, "no CUDA driver found (libcuda.so.1)"), "%s", err);
    cr_expect_neq(access(P("nd.db"), F_OK), 0, "a store file was created");
}

/* The cuda backend end to end over tests/fake_cuda.c (a libcuda.so.1 over
 * the emulator): device found without --backend, arch and fingerprint from
 * the device, the benchmark protocol in the isolated worker. */
Test(tune, cuda_backend_over_the_fake_driver, .timeout = 300)
{
    const char *lib = getenv("PTXTUNE_FAKE_CUDA");
    if (!lib)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    char libdir[512], out[1 << 15], err[4096];
    snprintf(libdir, sizeof libdir, "%s", lib);
    char *slash = strrchr(libdir, '/');
    cr_assert(slash);
    *slash = '\0';
    setenv("LD_LIBRARY_PATH", libdir, 1);
    int rc = cli("tune elementwise expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 --budget 3 "
                 "--db g.db --quiet",
                 out, sizeof out, err, sizeof err);
    unsetenv("LD_LIBRARY_PATH");
    cr_assert_eq(rc, 0, "%s %s", out, err);
    cr_expect(strstr(out, "ptxtune-bench/1"), "%s", out);
    cr_expect_eq(query(P("g.db"), "SELECT count(*) FROM measurements WHERE status = 'ok' AND "
                                  "source = 'measured' AND verified = 1 AND reps >= 10"), 3);
    cr_expect_eq(query(P("g.db"), "SELECT count(*) FROM runs WHERE backend = 'cuda' AND arch = 'sm_90'"), 1);
}

Test(tune, bad_input_is_one_line_and_changes_nothing)
{
    write_file(P("good.txt"), "elementwise expr='y = x' shape=x=64\n");
    write_file(P("bad.txt"), "elementwise expr='y = x' shape=x=64\nelementwise expr='y = x shape=x=64\n");
    write_file(P("notours.db"), "this is a text file, not a store\n");
    write_file(P("other.json"), "{\"format\": \"something else\", \"rows\": []}\n");
    char out[8192], err[4096];
    /* a real store, then its pages overwritten */
    cr_assert_eq(cli("tune --problems good.txt --backend emu --budget 3 --db corrupt.db --quiet --no-compile",
                     out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cli("tune --problems good.txt --backend emu --budget 3 --db ok.db --quiet --no-compile",
                     out, sizeof out, err, sizeof err), 0, "%s", err);
    FILE *f = fopen(P("corrupt.db"), "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    for (long off = 4096; off < size; off += 4096) { /* every b-tree page header */
        fseek(f, off, SEEK_SET);
        fwrite("\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef", 1, 12, f);
    }
    fclose(f);
    /* a table with one row that breaks a rule (an unknown outcome class) */
    cr_assert_eq(cli("export --db ok.db --format json --out ok.json", NULL, 0, err, sizeof err), 0,
                 "%s", err);
    static char table[1 << 18];
    test_slurp(P("ok.json"), table, sizeof table);
    cr_assert_lt(strlen(table), sizeof table - 1, "ok.json is larger than the buffer");
    char *okst = strstr(table, "\"status\": \"ok\"");
    cr_assert(okst, "%s", table);
    memcpy(okst + 11, "KO", 2);
    write_file(P("badrow.json"), table);
    static const struct {
        const char *args, *msg, *file;
    } bad[] = {
        {"import --db ok.db badrow.json", "1 of 1 rows refused, nothing imported; first: row 1: "
                                          "'measurement.detail.status' is 'KO'", "ok.db"},
        {"tune --problems good.txt --backend emu --db notours.db", "not a ptxtune database", "notours.db"},
        {"tune --problems good.txt --backend emu --db corrupt.db", "corrupt", "corrupt.db"},
        {"tune --problems bad.txt --backend emu --db ok.db", "bad.txt:2: unterminated", "ok.db"},
        {"tune --problems good.txt --backend emu --strategy simulated --db ok.db", "unknown strategy 'simulated'", "ok.db"},
        {"tune --problems good.txt --backend emu --budget 0 --db ok.db", "budget 0", "ok.db"},
        {"tune --problems good.txt --backend emu --budget -5 --db ok.db", "budget", "ok.db"},
        {"tune --problems good.txt --backend tpu --db ok.db", "unknown backend 'tpu'", "ok.db"},
        {"tune --problems good.txt --backend emu --seed -1 --db ok.db", "bad value '-1' for --seed", "ok.db"},
        {"tune --problems good.txt --backend emu --top '' --db ok.db", "bad value '' for --top", "ok.db"},
        {"tune --problems good.txt --backend emu --threads 99999999999 --db ok.db", "for --threads", "ok.db"},
        {"tune --problems good.txt --backend emu --prune inf --db ok.db", "for --prune", "ok.db"},
        {"tune --problems good.txt --backend mock --mock-noise abc --db ok.db", "for --mock-noise", "ok.db"},
        {"tune --problems good.txt --backend mock --mock-noise nan --db ok.db", "for --mock-noise", "ok.db"},
        {"tune --problems missing.txt --backend emu --db ok.db", "cannot open 'missing.txt'", "ok.db"},
        {"tune elementwise expr='y = frob(x)' shape=x=64 --backend emu --db ok.db", "unknown function 'frob'", "ok.db"},
        {"tune gemmx m=1 --backend emu --db ok.db", "unknown op 'gemmx'", "ok.db"},
        {"tune elementwise expr='y = x' shape=x=64 --backend emu --arch sm_70 --db ok.db", "unknown arch 'sm_70'", "ok.db"},
        {"export --db notours.db --format json", "not a ptxtune database", "notours.db"},
        {"export --db ok.db --format yaml", "unknown format 'yaml'", "ok.db"},
        {"export --db ok.db --format json --out ok.db", "is the store", "ok.db"},
        {"export --db ok.db --format c-header --out ./ok.db", "is the store", "ok.db"},
        {"export --db ok.db --format bundle --out ok.db", "is the store", "ok.db"},
        {"export --db ok.db --format json --out .", "cannot write '.': is a directory", "ok.db"},
        {"export --db ok.db --format bundle --out nodir/b.db", "nodir: No such file", "ok.db"},
        {"import --db new.db .", ".: is a directory", "ok.db"},
        {"db merge --db new.db .", ".: is a directory", "ok.db"},
        {"export --db ok.db --format json --match '(oops'", "bad --match pattern", "ok.db"},
        {"import --db ok.db other.json", "not a ptxtune table", "ok.db"},
        {"import --db ok.db good.txt", "not valid JSON", "ok.db"},
        {"db merge --db ok.db notours.db", "not a ptxtune store", "ok.db"},
        {"regress --db ok.db --baseline 1 --candidate 99", "no run '99'", "ok.db"},
        {"regress --db ok.db --baseline 1 --candidate 1 --threshold abc", "bad --threshold", "ok.db"},
        {"regress --db ok.db --baseline 1 --candidate 1 --threshold 1e400", "bad --threshold '1e400'", "ok.db"},
        {"regress --db ok.db --baseline 1 --candidate 1 --threshold inf%", "bad --threshold 'inf%'", "ok.db"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned long long before = file_sum(P(bad[i].file));
        int rc = cli(bad[i].args, out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' exited %d (stderr: %s)", bad[i].args, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': stderr '%s' lacks '%s'", bad[i].args, err,
                  bad[i].msg);
        cr_expect_eq(lines(err), 1, "'%s': one line, got '%s'", bad[i].args, err);
        cr_expect_eq(file_sum(P(bad[i].file)), before, "'%s' changed %s", bad[i].args, bad[i].file);
    }
    cr_expect_eq(integrity(P("ok.db")), PT_OK);
    cr_expect_gt(query(P("ok.db"), "SELECT count(*) FROM measurements"), 0);
    cr_expect_neq(access(P("new.db"), F_OK), 0, "a refused import created its store");
}

/* ---- item 16: lookup prefixes, corrupt stores, full disks ----------------- */

Test(tune, lookup_with_an_ambiguous_prefix_prints_only_the_error)
{
    /* a second fingerprint whose key shares its first two digits with the first */
    char k1[17], k2[17], drv[32];
    db_fingerprint_key(&fake_fp, k1);
    db_fingerprint other = fake_fp;
    for (int i = 0; i < 100000; i++) {
        snprintf(drv, sizeof drv, "%d", 13001 + i);
        other.driver = drv;
        db_fingerprint_key(&other, k2);
        if (k1[0] == k2[0] && k1[1] == k2[1])
            break;
    }
    cr_assert(k1[0] == k2[0] && k1[1] == k2[1]);
    fake f1 = {0}, f2 = {0};
    sweep_summary s1, s2;
    fake_sweep(P("fp.db"), SEARCH_RANDOM, &f1, &fake_fp, &s1);
    fake_sweep(P("fp.db"), SEARCH_RANDOM, &f2, &other, &s2);
    static const char prob[] = "elementwise expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16";
    char args[1024], out[8192], err[4096];
    char prefixes[2][8] = {"''", ""};
    snprintf(prefixes[1], sizeof prefixes[1], "%.2s", k1);
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "db lookup --db fp.db --gpu %s %s", prefixes[i], prob);
        int rc = cli(args, out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "%s: exit %d", args, rc);
        cr_expect_str_eq(out, "", "%s printed winners: %s", args, out);
        cr_expect_eq(lines(err), 1, "%s: %s", args, err);
        if (i == 1)
            cr_expect(strstr(err, "ambiguous") && strstr(err, k1) && strstr(err, k2),
                      "the candidates are not listed: %s", err);
        else
            cr_expect(strstr(err, "--gpu"), "%s", err);
    }
    /* the full key: one winner */
    snprintf(args, sizeof args, "db lookup --db fp.db --gpu %s %s", k2, prob);
    int rc = cli(args, out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "%s: %s", args, err);
    cr_expect(strstr(out, "tuned: "), "%s", out);
    cr_expect_eq(lines(out), 5, "one winner: %s", out);
}

/* A store that opens but fails PRAGMA integrity_check (an index whose entries
 * no longer match its definition: quick_check passes, integrity_check fails). */
static void break_an_index(const char *path)
{
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(h,
                              "PRAGMA writable_schema = ON;"
                              " UPDATE sqlite_master SET sql = 'CREATE INDEX measurements_problem"
                              " ON measurements(status, problem_id)'"
                              " WHERE name = 'measurements_problem';",
                              NULL, NULL, &msg),
                 SQLITE_OK, "%s", msg ? msg : "");
    sqlite3_close(h);
}

Test(tune, writers_refuse_a_store_that_fails_the_integrity_check, .timeout = 300)
{
    char out[8192], err[4096];
    const char *tune = "tune elementwise expr='y = x * 2' shape=x=8x64 --backend mock --budget 3 "
                       "--quiet --no-compile";
    char args[1024];
    snprintf(args, sizeof args, "%s --db bad.db", tune);
    cr_assert_eq(cli(args, out, sizeof out, err, sizeof err), 0, "%s", err);
    snprintf(args, sizeof args, "%s --db other.db --seed 5", tune);
    cr_assert_eq(cli(args, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cli("export --db other.db --format json --out t.json", NULL, 0, err, sizeof err),
                 0, "%s", err);
    break_an_index(P("bad.db"));
    cr_assert_neq(integrity(P("bad.db")), PT_OK, "the index damage is not seen");
    snprintf(args, sizeof args, "%s --db bad.db --seed 9", tune);
    const char *cmds[] = {args, "import --db bad.db t.json", "db merge --db bad.db other.db",
                          "import --db bad.db other.db", "db merge --db other.db bad.db",
                          "export --db bad.db --format json", "export --db bad.db --format "
                          "bundle --out bb.db"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        unsigned long long before = file_sum(P("bad.db"));
        int rc = cli(cmds[i], out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' wrote into a damaged store: exit %d (%s)", cmds[i], rc, err);
        cr_expect(strstr(err, "corrupt") && strstr(err, "integrity"), "'%s': %s", cmds[i], err);
        cr_expect_eq(lines(err), 1, "%s", err);
        cr_expect_eq(file_sum(P("bad.db")), before, "'%s' changed the store", cmds[i]);
    }
    cr_expect_neq(access(P("bb.db"), F_OK), 0, "a bundle of the damaged store was written");
    /* db check: exit 2 (docs/db.md), the first problem named */
    int rc = cli("db check --db bad.db", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 2, "db check exit %d: %s", rc, err);
    cr_expect(strstr(err, "missing from index"), "%s", err);
    cr_expect_eq(lines(err), 1, "%s", err);
    rc = cli("db check --db other.db", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "integrity ok"), "%s", out);
    /* a kernel edited in place: the pages are sound, the identity is not */
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(P("other.db"), &h), SQLITE_OK);
    /* (code: a comment is no part of a kernel's identity) */
    cr_assert_eq(sqlite3_exec(h, "UPDATE kernels SET ptx = ptx || 'trap; // edited'", NULL, NULL,
                              NULL),
                 SQLITE_OK);
    sqlite3_close(h);
    rc = cli("db check --db other.db", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 2, "db check exit %d: %s", rc, err);
    cr_expect(strstr(err, "does not match its PTX"), "%s", err);
    cr_expect_eq(lines(err), 1, "%s", err);
}

/* A sweep that hits a full disk (SQLITE_FULL: PRAGMA max_page_count on its
 * connection) fails with the cause named and leaves its run resumable: the
 * same sweep on the store resumes it and ends with the candidates and
 * winners of a sweep that never failed. */
Test(tune, a_sweep_that_hit_a_full_disk_is_resumed, .timeout = 300)
{
    fake fa = {0};
    sweep_summary sa;
    fake_sweep(P("whole.db"), SEARCH_ANNEAL, &fa, &fake_fp, &sa);
    pt_arena *a = pt_arena_new();
    int n;
    search_problem *p = problems(a, &n);
    db_store *s;
    pt_err e = {0};
    cr_assert_eq(db_open(P("full.db"), NULL, &s, &e), PT_OK, "%s", e.msg);
    int64_t pages = 0, max = 0;
    cr_assert_eq(db_query_int(s, "PRAGMA page_count", &pages, &e), PT_OK, "%s", e.msg);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA max_page_count = %lld", (long long)pages + 12);
    cr_assert_eq(db_query_int(s, pragma, &max, &e), PT_OK, "%s", e.msg);
    fake f = {0};
    sweep_opts o = {.strategy = SEARCH_ANNEAL, .budget = 40, .seed = 3, .threads = 2,
                    .no_compile = true, .tool_version = "test", .git_rev = "test",
                    .measure = fake_measure, .measure_ctx = &f, .fingerprint = &fake_fp,
                    .stop = &f.stop};
    sweep_summary sum;
    int rc = sweep_run(s, p, n, &o, &sum, &e);
    db_close(s);
    cr_assert_neq(rc, PT_OK, "the sweep fit in %lld pages", (long long)max);
    cr_expect_eq(rc, PT_EIO);
    cr_expect(strstr(e.msg, "disk full"), "%s", e.msg);
    cr_expect(sum.resumable, "the failed run is not marked resumable");
    int64_t stored = query(P("full.db"), "SELECT count(*) FROM measurements");
    cr_expect_gt(stored, 0, "nothing stored before the disk filled");
    cr_expect_lt(stored, query(P("whole.db"), "SELECT count(*) FROM measurements"));
    cr_expect_eq(query(P("full.db"), "SELECT count(*) FROM runs WHERE status = 'failed'"), 0,
                 "the run was ended 'failed': not resumable");
    /* space again: the same sweep resumes the run and finishes it */
    fake f2 = {0};
    sweep_summary s2;
    fake_sweep(P("full.db"), SEARCH_ANNEAL, &f2, &fake_fp, &s2);
    cr_expect(s2.resumed, "the same sweep started a new run");
    cr_expect_eq(s2.run_id, sum.run_id);
    cr_expect_eq(query(P("full.db"), "SELECT count(*) FROM runs"), 1);
    cr_expect_eq(query(P("full.db"), "SELECT count(*) FROM runs WHERE status = 'done'"), 1);
    cr_expect_eq(query(P("full.db"), "SELECT count(*) FROM measurements"),
                 query(P("whole.db"), "SELECT count(*) FROM measurements"));
    char *w1 = winners_of(P("whole.db")), *w2 = winners_of(P("full.db"));
    cr_expect_str_eq(w1, w2);
    free(w1);
    free(w2);
    cr_expect_eq(integrity(P("full.db")), PT_OK);
    pt_arena_free(a);
}

/* The same through the command, on a real write failure: a file-size limit
 * (the shell's ulimit -f, SIGXFSZ ignored) stops the WAL from growing, so the
 * sweep fails midway; the message says the run is kept, and the same command
 * without the limit resumes it to the full candidate count. */
Test(tune, a_tune_stopped_by_a_file_size_limit_resumes_through_the_command, .timeout = 300)
{
    const char *args = "tune elementwise expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 "
                       "--backend mock --strategy exhaustive --budget 40 --quiet --no-compile "
                       "--db fs.db";
    char cmd[2048], err[4096], out[8192];
    snprintf(cmd, sizeof cmd, "cd %s && sh -c \"trap '' XFSZ; ulimit -f 400; exec %s %s\" "
             ">/dev/null 2>fs.err </dev/null", dir, getenv("PTXTUNE_BIN"), args);
    int st = system(cmd);
    test_slurp(P("fs.err"), err, sizeof err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit %d: %s", WEXITSTATUS(st), err);
    cr_expect(strstr(err, "run 1 is kept: the same command resumes it"), "%s", err);
    cr_expect_eq(lines(err), 1, "%s", err);
    int64_t stored = query(P("fs.db"), "SELECT count(*) FROM measurements");
    cr_expect_lt(stored, 40, "the limit did not stop the sweep");
    cr_assert_eq(cli(args, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(out, ", resumed"), "%s", out);
    cr_expect_eq(query(P("fs.db"), "SELECT count(*) FROM runs"), 1);
    cr_expect_eq(query(P("fs.db"), "SELECT count(*) FROM runs WHERE status = 'done'"), 1);
    cr_expect_eq(query(P("fs.db"), "SELECT count(*) FROM measurements"), 40);
    cr_expect_eq(integrity(P("fs.db")), PT_OK);
}

/* ---- item 17: a problem file is streamed ---------------------------------- */

/* 200,000 lines: distinct small elementwise and GEMM problems (and a few
 * comments), then `tail` as the last line. */
static void write_big_problems(const char *path, const char *tail)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    static const char *const exprs[] = {"y = x * 2", "y = relu(x) + 1", "y = x * x"};
    int n = 0;
    for (int i = 0; n < 199999; i++) {
        if (i % 1000 == 0)
            fprintf(f, "# block %d\n", i / 1000);
        else if (i % 2)
            fprintf(f, "elementwise expr='%s' shape=x=%dx%d name=ew%d\n", exprs[i % 3],
                    1 + i % 7, 16 + i / 2, i);
        else
            fprintf(f, "gemm m=%d n=%d k=16 layout=%s\n", 16 + i / 8, 16 + 8 * (i % 4),
                    i % 8 < 4 ? "nn" : "tn");
        n++;
    }
    fprintf(f, "%s\n", tail);
    fclose(f);
}

typedef struct tune_child {
    int status;
    long maxrss_kb;
    double wall_s;
} tune_child;

/* Runs "ptxtune tune ARGS" in dir under a 2 GiB address-space limit (so a
 * sweep that holds every problem fails here instead of filling the shared
 * machine); with stop_after > 0, SIGINT once the store holds that many
 * measurements of run 1 beyond `base`. Peak RSS from wait4. */
static tune_child run_limited(const char *args, const char *db, int64_t base, int64_t stop_after)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin);
    double t0 = now();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct rlimit rl = {2ul << 30, 2ul << 30};
        if (chdir(dir) != 0 || setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(99);
        FILE *o = freopen(".big.out", "w", stdout);
        FILE *er = freopen(".big.err", "w", stderr);
        (void)o;
        (void)er;
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "exec %s tune %s", bin, args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(98);
    }
    tune_child c = {0};
    struct rusage ru;
    bool sent = false;
    for (;;) {
        pid_t w = wait4(pid, &c.status, WNOHANG, &ru);
        cr_assert_geq(w, 0);
        if (w == pid)
            break;
        if (stop_after > 0 && !sent) {
            int64_t n = try_query(db, "SELECT count(*) FROM measurements WHERE run_id = 1");
            if (n >= base + stop_after || now() - t0 > 90) {
                kill(pid, SIGINT);
                sent = true;
            }
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    c.maxrss_kb = ru.ru_maxrss;
    c.wall_s = now() - t0;
    return c;
}

Test(tune, a_200k_line_problem_file_is_streamed_in_bounded_memory, .timeout = 240)
{
    write_big_problems(P("big.txt"), "gemm m=7 n=9 k=11 name=last");
    char out[1 << 16], err[4096];
    const char *args = "--problems big.txt --backend mock --budget 1 --threads 1 --no-compile "
                       "--quiet --top 0 --db big.db";
    tune_child c = run_limited(args, P("big.db"), 0, 40);
    test_slurp(P(".big.err"), err, sizeof err);
    test_slurp(P(".big.out"), out, sizeof out);
    cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 130,
              "status %d (rss %ld KB): %s", c.status, c.maxrss_kb, err);
    cr_expect(strstr(err, "the same command resumes run 1"), "%s", err);
    cr_expect_lt(c.maxrss_kb, 200 * 1024, "peak RSS %ld KB for 200k problems", c.maxrss_kb);
    fprintf(stderr, "200k-line problem file: peak RSS %ld KB, %.1f s to the interrupt\n",
            c.maxrss_kb, c.wall_s);
    int64_t measured = query(P("big.db"), "SELECT count(*) FROM measurements");
    cr_assert_geq(measured, 40);
    /* one winner per problem swept, problems stored as the sweep reaches them */
    int64_t swept = query(P("big.db"), "SELECT count(DISTINCT problem_id) FROM measurements");
    cr_expect_eq(query(P("big.db"), "SELECT count(*) FROM winners"), swept);
    cr_expect_leq(query(P("big.db"), "SELECT count(*) FROM problems"), swept + 1);
    cr_expect_eq(query(P("big.db"), "SELECT count(*) FROM problems WHERE name = 'ew1' AND "
                                    "op = 'elementwise' AND dims = '2,16'"), 1);

    /* the same command resumes the same run: nothing measured twice */
    c = run_limited(args, P("big.db"), measured, 20);
    test_slurp(P(".big.err"), err, sizeof err);
    test_slurp(P(".big.out"), out, sizeof out);
    cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 130, "status %d: %s", c.status, err);
    cr_expect(strstr(out, ", resumed"), "%s", out);
    cr_expect_lt(c.maxrss_kb, 200 * 1024, "peak RSS %ld KB on resume", c.maxrss_kb);
    cr_expect_eq(query(P("big.db"), "SELECT count(*) FROM runs"), 1);
    cr_expect_eq(query(P("big.db"), "SELECT count(*) FROM (SELECT problem_id FROM measurements "
                                    "GROUP BY problem_id HAVING count(*) > 1)"), 0);
    cr_expect_gt(query(P("big.db"), "SELECT count(*) FROM measurements"), measured);

    /* a bad last line (syntax, then one the op refuses) is named with its line
     * number, exit 2, before anything is stored */
    unsigned long long before = file_sum(P("big.db"));
    static const struct {
        const char *tail, *msg;
    } bad[] = {
        {"gemm m=7 n=9 k=eleven", "bad.txt:200000: bad value 'eleven' for k"},
        {"elementwise expr='y = frob(x)' shape=x=64", "line 200000: unknown function 'frob'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_big_problems(P("bad.txt"), bad[i].tail);
        c = run_limited("--problems bad.txt --backend mock --budget 1 --quiet --db big.db",
                        P("big.db"), 0, 0);
        test_slurp(P(".big.err"), err, sizeof err);
        cr_expect(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 2, "'%s': status %d: %s",
                  bad[i].tail, c.status, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': stderr '%s' lacks '%s'", bad[i].tail, err,
                  bad[i].msg);
        cr_expect_eq(lines(err), 1, "%s", err);
        cr_expect_lt(c.maxrss_kb, 200 * 1024, "'%s': peak RSS %ld KB", bad[i].tail, c.maxrss_kb);
        cr_expect_eq(file_sum(P("big.db")), before, "'%s' changed the store", bad[i].tail);
    }
}

/* ---- issue 15 item 1: one problem key per problem, whatever the spelling -- */

/* 20 spellings of one elementwise problem (blanks, redundant parentheses,
 * a unary plus, a comment, a trailing ';', the shape order) and 2 of a
 * GEMM epilogue: one key, one class, one expression text (so one kernel),
 * and the key parses back to itself. Different programs keep apart. */
Test(tune, spelling_variants_share_one_problem_key)
{
    static const char *const exprs[] = {
        "y = silu(g) * u",       "y=silu(g)*u",           "y = (silu(g)) * u",
        "y = ((silu(g) * u))",   "y=silu( g )*u",         "  y = silu(g)*u  ",
        "y = silu((g)) * (u)",   "y = +silu(g) * u",      "y=silu(g)*u;",
        "y = silu(g) * u # gated", "\ty\t=\tsilu(g)\t*\tu", "y = (silu(g)) * (u)",
        "; y = (((silu(g))))*u", "y = silu(+g) * +u",     "y =silu (g)* u",
        "y = (silu(g) * (u))",   "y = silu(g)*(u);;",     "y=(+silu(g))*u",
        "y = silu(g) *u",        "y= silu(g) * ((u))",
    };
    static const char *const shapes[] = {"g=64x256,u=64x256", "u=64x256,g=64x256",
                                         "u=64x256, g = 64x256"};
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    const char *key0 = NULL, *klass0 = NULL, *expr0 = NULL;
    for (int i = 0; i < 20; i++) {
        char items[256];
        snprintf(items, sizeof items, "expr=\"%s\" shape=\"%s\" dtype=bf16", exprs[i],
                 shapes[i % 3]);
        search_problem p;
        cr_assert_eq(search_problem_parse(a, "elementwise", items, &p, &e), PT_OK, "%s: %s",
                     items, e.msg);
        if (!key0) {
            key0 = p.key;
            klass0 = p.klass;
            expr0 = p.prob.expr;
        }
        cr_expect_str_eq(p.key, key0, "variant %d (%s)", i, items);
        cr_expect_str_eq(p.klass, klass0, "variant %d", i);
        cr_expect_str_eq(p.prob.expr, expr0, "variant %d: the kernel would differ", i);
    }
    /* the canonical key is a fixed point */
    pt_buf k, c, d;
    pt_buf_init(&k);
    pt_buf_init(&c);
    pt_buf_init(&d);
    cr_assert_eq(search_problem_rekey(NULL, key0, &k, &c, &d), PT_OK);
    cr_expect_str_eq(k.s, key0);
    cr_expect_str_eq(d.s, "64,256,64,256");
    pt_buf_free(&k);
    pt_buf_free(&c);
    pt_buf_free(&d);
    /* other programs stay other problems: operand order, grouping */
    static const char *const others[] = {"y = u * silu(g)", "y = silu(g * u)",
                                         "y = silu(g) * u + 1", "y = silu(g) * (u + 1)"};
    for (int i = 0; i < 4; i++) {
        char items[256];
        snprintf(items, sizeof items, "expr=\"%s\" shape=g=64x256,u=64x256 dtype=bf16",
                 others[i]);
        search_problem p;
        cr_assert_eq(search_problem_parse(a, "elementwise", items, &p, &e), PT_OK, "%s", e.msg);
        cr_expect_str_neq(p.key, key0, "%s", others[i]);
        for (int j = 0; j < i; j++) {
            char o2[256];
            snprintf(o2, sizeof o2, "expr=\"%s\" shape=g=64x256,u=64x256 dtype=bf16", others[j]);
            search_problem q;
            cr_assert_eq(search_problem_parse(a, "elementwise", o2, &q, &e), PT_OK);
            cr_expect_str_neq(p.key, q.key);
        }
    }
    /* generic over ops: a GEMM epilogue, bare or as a statement */
    search_problem g1, g2;
    cr_assert_eq(search_problem_parse(a, "gemm", "m=64 n=64 k=64 epilogue='gelu(acc)+bias[n]'",
                                      &g1, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(search_problem_parse(a, "gemm", "m=64 n=64 k=64 epilogue=' gelu( (acc) ) + bias[n]'",
                                      &g2, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(g1.key, g2.key);
    /* a bad expression keeps the user's text, so its error columns are theirs */
    search_problem bad;
    cr_expect_eq(search_problem_parse(a, "elementwise", "expr='y = silu(g' shape=g=4", &bad, &e),
                 PT_OK);
    cr_expect_str_eq(bad.prob.expr, "y = silu(g");
    pt_arena_free(a);
}

/* ---- issue 15 item 4: incremental sweeps, seeds per problem key ------------ */

static void sweep_items(const char *db, const char *const *items, int n, search_kind k, fake *f,
                        bool fresh, sweep_summary *sum)
{
    pt_arena *a = pt_arena_new();
    search_problem *p = pt_arena_alloc(a, (size_t)n * sizeof *p);
    pt_err e = {0};
    for (int i = 0; i < n; i++)
        cr_assert_eq(search_problem_parse(a, "elementwise", items[i], &p[i], &e), PT_OK, "%s",
                     e.msg);
    db_store *s;
    cr_assert_eq(db_open(db, NULL, &s, &e), PT_OK, "%s", e.msg);
    sweep_opts o = {.strategy = k, .budget = 12, .seed = 3, .threads = 2, .no_compile = true,
                    .fresh = fresh, .tool_version = "test", .git_rev = "test",
                    .measure = fake_measure, .measure_ctx = f, .fingerprint = &fake_fp,
                    .stop = &f->stop};
    cr_assert_eq(sweep_run(s, p, n, &o, sum, &e), PT_OK, "%s", e.msg);
    db_close(s);
    pt_arena_free(a);
}

/* Adding a problem to a set measures only the new one (the others' rows
 * are taken from the finished run, with its sample); --new measures all;
 * a reordered set proposes the same candidates for each problem. */
Test(tune, incremental_sweeps_reuse_finished_runs_and_seeds_follow_the_key)
{
    static const char *const one = "expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 name=one";
    static const char *const two = "expr='y = x * rsqrt(mean(x*x, -1) + 1e-6) * g' "
                                   "shape=x=8x512,g=512 dtype=bf16 name=two";
    static const char *const three = "expr='y = silu(g) * u' shape=g=8x256,u=8x256 name=three";
    const char *set1[] = {one, two}, *set2[] = {one, two, three}, *set3[] = {three},
               *set4[] = {two, one};
    fake f1 = {0}, f2 = {0}, f3 = {0}, f4 = {0}, f5 = {0};
    sweep_summary s1, s2, s3, s4, s5;
    sweep_items(P("inc.db"), set1, 2, SEARCH_RANDOM, &f1, false, &s1);
    sweep_items(P("three.db"), set3, 1, SEARCH_RANDOM, &f3, false, &s3);
    cr_assert_gt(f1.calls, 0);
    cr_assert_gt(f3.calls, 0);
    /* run 2: one problem more; only its candidates are measured */
    sweep_items(P("inc.db"), set2, 3, SEARCH_RANDOM, &f2, false, &s2);
    cr_expect_eq(f2.calls, f3.calls, "measured %d, the new problem alone needs %d", f2.calls,
                 f3.calls);
    cr_expect_eq(s2.carried, f1.calls);
    cr_expect_eq(query(P("inc.db"), "SELECT count(*) FROM measurements m JOIN runs r ON r.id ="
                                    " m.run_id WHERE r.id = 2 AND m.sample = (SELECT uuid FROM"
                                    " runs WHERE id = 1)"),
                 query(P("inc.db"), "SELECT count(*) FROM measurements WHERE run_id = 1"),
                 "every reused row names the run that measured it");
    char *w = winners_of(P("inc.db"));
    cr_expect(strstr(w, "silu"), "%s", w);
    free(w);
    /* run 3: the set reordered, measured afresh (--new): the same candidates */
    sweep_items(P("inc.db"), set4, 2, SEARCH_RANDOM, &f4, true, &s4);
    cr_expect_eq(f4.calls, f1.calls, "--new measures everything");
    cr_expect_eq(s4.carried, 0);
    cr_expect_eq(query(P("inc.db"), "SELECT count(*) FROM measurements a WHERE a.run_id = 3 AND"
                                    " NOT EXISTS (SELECT 1 FROM measurements b WHERE b.run_id = 1"
                                    " AND b.problem_id = a.problem_id AND b.config = a.config)"),
                 0, "a reordered set proposed other candidates");
    /* a shard (one problem alone) proposes its candidates of the whole set */
    sweep_items(P("shard.db"), set1 + 1, 1, SEARCH_RANDOM, &f5, false, &s5);
    cr_expect_eq(f5.calls, (int)query(P("inc.db"), "SELECT count(*) FROM measurements m JOIN"
                                                   " problems p ON p.id = m.problem_id WHERE"
                                                   " m.run_id = 1 AND p.name = 'two'"));
}

/* ---- issue 15 item 5: --shard I/N ---------------------------------------- */

/* Three shards of five problems: disjoint, together the set, and the same
 * slices for the set reordered. */
Test(tune, shards_partition_a_set_by_key_whatever_its_order)
{
    static const char *const items[] = {
        "expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 name=p0",
        "expr='y = relu(x)' shape=x=8x256 name=p1",
        "expr='y = x * 2' shape=x=8x256 name=p2",
        "expr='y = exp(x)' shape=x=8x256 name=p3",
        "expr='y = tanh(x)' shape=x=8x256 name=p4",
    };
    const char *fwd[5], *rev[5];
    for (int i = 0; i < 5; i++) {
        fwd[i] = items[i];
        rev[i] = items[4 - i];
    }
    int64_t total = 0;
    for (int order = 0; order < 2; order++)
        for (int sh = 1; sh <= 3; sh++) {
            pt_arena *a = pt_arena_new();
            search_problem p[5];
            pt_err e = {0};
            for (int i = 0; i < 5; i++)
                cr_assert_eq(search_problem_parse(a, "elementwise", (order ? rev : fwd)[i], &p[i],
                                                  &e), PT_OK);
            db_store *s;
            cr_assert_eq(db_open(P(order ? "rev.db" : "fwd.db"), NULL, &s, &e), PT_OK, "%s", e.msg);
            fake f = {0};
            sweep_opts o = {.strategy = SEARCH_RANDOM, .budget = 2, .seed = 3, .threads = 1,
                            .no_compile = true, .tool_version = "test", .git_rev = "test",
                            .measure = fake_measure, .measure_ctx = &f, .fingerprint = &fake_fp,
                            .stop = &f.stop, .shard_index = sh, .shard_count = 3};
            sweep_summary sum;
            cr_assert_eq(sweep_run(s, p, 5, &o, &sum, &e), PT_OK, "%s", e.msg);
            cr_expect(!sum.empty_shard);
            db_close(s);
            pt_arena_free(a);
            if (!order)
                total += f.calls;
        }
    /* every problem once over the shards, and each shard the same problems */
    cr_expect_eq(query(P("fwd.db"), "SELECT count(*) FROM problems"), 5);
    cr_expect_eq(query(P("fwd.db"), "SELECT count(DISTINCT run_id || ':' || problem_id) FROM"
                                    " measurements"), 5, "a problem in two shards");
    cr_expect_eq(query(P("fwd.db"), "SELECT max(n) - min(n) FROM (SELECT run_id, count(DISTINCT"
                                    " problem_id) AS n FROM measurements GROUP BY run_id)"),
                 1, "shards of 5 into 3: 2, 2, 1");
    cr_expect_eq(total, 10);
    for (int r = 1; r <= 3; r++) {
        /* the shard's problems as one number: p0..p4 -> bits */
        char q[512];
        snprintf(q, sizeof q,
                 "SELECT sum(1 << CAST(substr(p.name, 2) AS INTEGER)) FROM (SELECT DISTINCT"
                 " problem_id FROM measurements WHERE run_id = %d) x JOIN problems p ON p.id ="
                 " x.problem_id", r);
        cr_expect_eq(query(P("fwd.db"), q), query(P("rev.db"), q), "shard %d differs when the set"
                     " is reversed", r);
    }
}
