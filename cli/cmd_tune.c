/* ptxtune tune: a tuning sweep into the store (tuner/tune.h), with a
 * progress line on a terminal and the top results at the end. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "db/db.h"
#include "search/problem.h"
#include "tuner/sweep.h"
#include "tuner/tune.h"

#ifndef PT_GIT_REV
#define PT_GIT_REV "unknown"
#endif

static const char tune_usage[] =
    "usage: ptxtune tune OP [KEY=VALUE ...] [problem options] [options]\n"
    "       ptxtune tune --problems FILE [options]\n"
    "Tunes one problem (or every problem of FILE) into a SQLite store: the strategy\n"
    "proposes configs of the op's space; each is emitted, compiled (on a thread pool,\n"
    "ahead of measuring), verified against the float64 reference and timed in an\n"
    "isolated worker process; every candidate is stored, failures with their class.\n"
    "With --backend emu nothing is timed: candidates are verified on the CPU emulator\n"
    "and ranked by the cost model (rows say source=model). Killed at any moment, the\n"
    "same command resumes the run where it stopped.\n\n"
    "problem: KEY=VALUE items as in a problem file (see results/problems/README.md),\n"
    "  e.g. ptxtune tune elementwise expr='y = softmax(x, -1)' shape=x=64x4096 dtype=bf16\n"
    "  or the op's flags (--KEY, '_' written '-', e.g. --m 16 --d-colmajor; listed below\n"
    "  and by 'ptxtune ops'), and --name LABEL\n\n"
    "options:\n"
    "  --strategy S     exhaustive | random | anneal | genetic | halving (default anneal)\n"
    "  --budget B       per problem: N candidates, Ns / Nm / Nh of time, or all (default 100)\n"
    "  --backend B      cuda | emu | mock (default: cuda when a GPU is found, else emu)\n"
    "  --db FILE        the store (default ptxtune.db; created when missing)\n"
    "  --problems FILE  a problem set, one problem per line\n"
    "  --arch sm_XX     target (default: the GPU's; sm_80 on the emulator)\n"
    "  --seed N         strategy and input seed (default 1)\n"
    "  --threads N      compile threads (default: CPUs, at most 8)\n"
    "  --prune F        drop configs the cost model puts above F x the best estimate\n"
    "  --top N          rows per problem in the final table (default 5)\n"
    "  --shard I/N      only slice I of N of the problems: ranked by the hash of their\n"
    "                   canonical key, every N-th from I (deterministic, balanced, the\n"
    "                   same whatever the order of the file; docs/slurm.md)\n"
    "  --any-host       the store is this task's own copy (a Slurm task's node-local\n"
    "                   store): resume an unfinished run whatever host started it\n"
    "  --new            a new run measuring every candidate: never resume an unfinished\n"
    "                   run, never take a candidate from a finished one (by default a\n"
    "                   kernel a finished run of this fingerprint measured for the problem\n"
    "                   is taken from it, not measured again)\n"
    "  --no-compile     emu/mock: skip the compile gate (no resource report)\n"
    "  --quiet          no progress line\n"
    "  --json           the summary and the top rows as JSON (docs/json.md)\n"
    "  --mock-noise X, --mock-slow F[:TEXT]  test knobs of the mock backend: timing noise;\n"
    "                   kernels whose config holds TEXT (all without it) F times slower\n"
    "exit: 0 done, 1 failed, 2 bad input, 4 no CUDA driver (--backend cuda), 130 interrupted;\n"
    "a store that fails its integrity check is bad input (nothing written); a full disk keeps\n"
    "the run (exit 1): the same command resumes it once there is room\n";

enum {
    O_STRATEGY = 256, O_BUDGET, O_BACKEND, O_DB, O_PROBLEMS, O_ARCH, O_SEED, O_THREADS, O_PRUNE,
    O_TOP, O_NEW, O_NOCOMPILE, O_QUIET, O_NAME, O_HELP, O_NOISE, O_SLOW, O_SHARD, O_ANYHOST,
    O_JSON,
};

static const struct option tune_opts[] = {
    {"strategy", required_argument, 0, O_STRATEGY}, {"budget", required_argument, 0, O_BUDGET},
    {"backend", required_argument, 0, O_BACKEND},   {"db", required_argument, 0, O_DB},
    {"problems", required_argument, 0, O_PROBLEMS}, {"arch", required_argument, 0, O_ARCH},
    {"seed", required_argument, 0, O_SEED},         {"threads", required_argument, 0, O_THREADS},
    {"prune", required_argument, 0, O_PRUNE},       {"top", required_argument, 0, O_TOP},
    {"new", no_argument, 0, O_NEW},                 {"no-compile", no_argument, 0, O_NOCOMPILE},
    {"quiet", no_argument, 0, O_QUIET},             {"name", required_argument, 0, O_NAME},
    {"mock-noise", required_argument, 0, O_NOISE},  {"help", no_argument, 0, O_HELP},
    {"mock-slow", required_argument, 0, O_SLOW},    {"shard", required_argument, 0, O_SHARD},
    {"any-host", no_argument, 0, O_ANYHOST},       {"json", no_argument, 0, O_JSON},
    {0, 0, 0, 0},
};

/* The signal flag: cli/ owns the process, so the one mutable global of the
 * sweep lives here and the library reads it through a pointer. */
static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* "300", "60s", "2m", "1.5h", "all", or "300,60s". */
static void parse_budget(const char *v, int64_t *n, double *secs)
{
    *n = 0;
    *secs = 0;
    if (strcmp(v, "all") == 0)
        return;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        errno = 0;
        double x = strtod(tok, &end);
        if (end == tok || errno || !isfinite(x))
            cli_die(2, "bad budget '%s' (N candidates, Ns, Nm or Nh of time, or all)", v);
        if (!*end) {
            if (x != floor(x) || x < 0)
                cli_die(2, "bad budget '%s': a candidate count is a whole number", v);
            if (x == 0)
                cli_die(2, "budget 0: nothing to tune (N candidates, Ns of time, or all)");
            *n = (int64_t)x;
        } else if (!end[1] && strchr("smh", *end)) {
            if (x <= 0)
                cli_die(2, "budget %s: a time budget must be positive", v);
            *secs = x * (*end == 's' ? 1 : *end == 'm' ? 60 : 3600);
        } else
            cli_die(2, "bad budget '%s' (N candidates, Ns, Nm or Nh of time, or all)", v);
    }
}

typedef struct progress_ctx {
    bool tty;
    int width;
} progress_ctx;

static void fmt_time(double s, char *buf, size_t n)
{
    if (!isfinite(s))
        snprintf(buf, n, "-");
    else if (s >= 1e-3)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else
        snprintf(buf, n, "%.2f us", s * 1e6);
}

static void on_progress(void *ctx, const sweep_progress *p)
{
    progress_ctx *pc = ctx;
    if (!pc->tty)
        return;
    char best[32], eta[32] = "?";
    fmt_time(p->best_s, best, sizeof best);
    if (p->eta_s >= 0)
        snprintf(eta, sizeof eta, "%d:%02d", (int)(p->eta_s / 60), (int)fmod(p->eta_s, 60));
    fprintf(stderr, "\r\033[K[%d/%d %.24s] %lld/%lld best %s failures %lld%s ETA %s",
            p->problem + 1, p->nproblems, p->problem_name, (long long)p->done,
            (long long)p->total, best, (long long)p->failed,
            p->reused ? " (resumed)" : "", eta);
    fflush(stderr);
}

typedef struct top_ctx {
    const char *last;
    char lastkey[1024];
} top_ctx;

static int print_top(void *ctx, const db_top_row *r)
{
    top_ctx *t = ctx;
    if (!t->last || strcmp(t->lastkey, r->problem_key) != 0) {
        printf("\n%s%s%s\n", r->problem_name[0] ? r->problem_name : "", r->problem_name[0] ? ": " : "",
               r->problem_key);
        printf("  %-4s %-12s %-8s %9s %9s  %-8s %-8s %-16s %s\n", "rank", "time", "spread",
               "TFLOP/s", "GB/s", "source", "verified", "kernel", "config");
        snprintf(t->lastkey, sizeof t->lastkey, "%s", r->problem_key);
        t->last = t->lastkey;
    }
    char tm[32], sp[16];
    fmt_time(r->t_median, tm, sizeof tm);
    if (strcmp(r->source, "model") != 0 && isfinite(r->spread))
        snprintf(sp, sizeof sp, "%.2f%%", r->spread * 100);
    else
        snprintf(sp, sizeof sp, "-");
    printf("  %-4d %-12s %-8s %9.3f %9.1f  %-8s %-8s %-16s %s\n", r->rank, tm, sp,
           isfinite(r->tflops) ? r->tflops : 0.0, isfinite(r->gbps) ? r->gbps : 0.0, r->source,
           r->verified ? "yes" : "no", r->kernel_hash, r->config);
    return 0;
}

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* --json: the summary and the top rows as one object (docs/json.md) */
static int json_top(void *ctx, const db_top_row *r)
{
    json_t *row = json_pack("{s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:s, s:b, s:s, s:s}", "problem",
                            r->problem_key, "name", r->problem_name, "rank", r->rank, "time_s",
                            jnum(r->t_median), "spread", jnum(r->spread), "tflops",
                            jnum(r->tflops), "gbps", jnum(r->gbps), "source", r->source,
                            "verified", r->verified != 0, "kernel", r->kernel_hash, "config",
                            r->config);
    if (!row || json_array_append_new(json_object_get(ctx, "rows"), row))
        cli_die(1, "out of memory");
    return 0;
}

static int json_class(void *ctx, const char *status, int64_t n)
{
    if (json_object_set_new(ctx, status, json_integer((json_int_t)n)))
        cli_die(1, "out of memory");
    return 0;
}

static int print_class(void *ctx, const char *status, int64_t n)
{
    int *first = ctx;
    printf("%s%s %lld", *first ? "" : ", ", status, (long long)n);
    *first = 0;
    return 0;
}

/* A problem file read one line at a time (search_problem_reader), opened
 * again for each reading; stdin, which reads once, is held as text. */
typedef struct file_src {
    const char *path;
    char *text; /* stdin's; NULL for a file */
    size_t len;
    search_problem_reader *r;
} file_src;

static int file_open(void *ctx, pt_err *e)
{
    file_src *f = ctx;
    search_problem_reader_close(f->r);
    f->r = NULL;
    return f->text ? search_problem_reader_mem(f->text, f->len, f->path, &f->r, e)
                   : search_problem_reader_open(f->path, &f->r, e);
}

static int file_next(void *ctx, search_problem *out, bool *got, pt_err *e)
{
    return search_problem_next(((file_src *)ctx)->r, out, got, e);
}

static int exit_code(int rc)
{
    return rc == PT_EINVAL || rc == PT_EPARSE || rc == PT_EUNSUPPORTED || rc == PT_ERANGE ? 2
           : rc == PT_ENODRIVER                                          ? CLI_EXIT_NODRIVER
                                                                         : 1;
}

int cmd_tune(int argc, char **argv)
{
    const char *strategy = "anneal", *budget = "100", *backend = NULL, *dbpath = "ptxtune.db";
    const char *problems = NULL, *arch = NULL, *name = NULL;
    uint64_t seed = 1;
    int threads = 0, top = 5;
    double prune = 0, noise = 0, slow = 0;
    const char *slow_match = "";
    bool fresh = false, no_compile = false, quiet = false, any_host = false, json = false;
    int shard_i = 0, shard_n = 0;
    pt_buf items;
    pt_buf_init(&items);
    optind = 1;
    int c;
    char *end;
    opterr = 0; /* cli_opt_error: one line naming the option */
    /* tune's own options, then a flag per problem key (cli_problem_opts) */
    struct option opts[PT_MAX_KEYS * 2 + 64];
    size_t nopts = 0;
    for (; tune_opts[nopts].name; nopts++)
        opts[nopts] = tune_opts[nopts];
    void *flag_names;
    cli_problem_opts(opts, sizeof opts / sizeof opts[0], nopts, &flag_names);
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case O_STRATEGY: strategy = optarg; break;
        case O_BUDGET: budget = optarg; break;
        case O_BACKEND: backend = optarg; break;
        case O_DB: dbpath = optarg; break;
        case O_PROBLEMS: problems = optarg; break;
        case O_ARCH: arch = optarg; break;
        case O_SEED:
            errno = 0;
            seed = strtoull(optarg, &end, 0);
            /* strtoull takes "-1" as 2^64-1: a seed is written unsigned */
            if (!*optarg || *end || errno || strchr(optarg, '-'))
                cli_die(2, "bad value '%s' for --seed (an unsigned integer)", optarg);
            break;
        case O_THREADS: threads = (int)cli_opt_int("--threads", optarg, 1, 64); break;
        case O_PRUNE: prune = cli_opt_real("--prune", optarg, 1, INFINITY); break;
        case O_TOP: top = (int)cli_opt_int("--top", optarg, 0, 1000000); break;
        case O_NOISE: noise = cli_opt_real("--mock-noise", optarg, 0, INFINITY); break;
        case O_SLOW: {
            /* tests: FACTOR[:SUBSTRING], kernels whose config holds SUBSTRING
             * (every one without it) are FACTOR times slower on the mock */
            char fac[64];
            const char *colon = strchr(optarg, ':');
            snprintf(fac, sizeof fac, "%.*s", colon ? (int)(colon - optarg) : (int)strlen(optarg),
                     optarg);
            slow = cli_opt_real("--mock-slow", fac, 0.01, 100);
            slow_match = colon ? colon + 1 : "";
            break;
        }
        case O_NEW: fresh = true; break;
        case O_ANYHOST: any_host = true; break;
        case O_JSON: json = true; break;
        case O_SHARD: {
            long long si = 0, sn = 0;
            char tail = 0;
            if (sscanf(optarg, "%lld/%lld%c", &si, &sn, &tail) != 2 || sn < 1 || sn > 100000 ||
                si < 1 || si > sn)
                cli_die(2, "bad --shard '%s' (I/N with 1 <= I <= N, e.g. 2/4)", optarg);
            shard_i = (int)si;
            shard_n = (int)sn;
            break;
        }
        case O_NOCOMPILE: no_compile = true; break;
        case O_QUIET: quiet = true; break;
        case O_NAME: name = optarg; break;
        case O_HELP:
            fputs(tune_usage, stdout);
            cli_problem_usage(stdout);
            free(flag_names);
            return 0;
        default:
            if (!cli_problem_flag(c, optarg, &items))
                cli_opt_error(c, argv);
        }
    }
    free(flag_names);
    search_kind kind;
    pt_err e = {0};
    if (search_kind_parse(strategy, &kind, &e))
        cli_die(2, "%s", e.msg);
    int64_t nbudget;
    double sbudget;
    parse_budget(budget, &nbudget, &sbudget);
    if (backend && strcmp(backend, "cuda") && strcmp(backend, "emu") && strcmp(backend, "mock"))
        cli_die(2, "unknown backend '%s' (cuda, emu, mock)", backend);

    /* the problems: a file, or OP with items and flags */
    search_problem_set set = {0};
    search_problem one;
    file_src fsrc = {.path = problems};
    sweep_source src = {file_open, file_next, &fsrc};
    if (problems) {
        if (optind < argc)
            cli_die(2, "give either --problems FILE or OP KEY=VALUE..., not both");
        if (strcmp(problems, "-") == 0)
            fsrc.text = cli_read_file(problems, &fsrc.len);
        /* every line parsed before the store is opened (a bad line creates
         * no store), one line in memory at a time: the sweep reads the file
         * again, one problem at a time */
        int prc = file_open(&fsrc, &e);
        for (bool got = true; !prc && got;)
            prc = file_next(&fsrc, &one, &got, &e);
        if (prc)
            cli_die(prc == PT_ENOMEM ? 1 : 2, "%s", e.msg);
    } else {
        if (optind >= argc)
            cli_die(2, "missing problem: OP KEY=VALUE... or --problems FILE (see --help)");
        const char *op = argv[optind++];
        for (; optind < argc; optind++) {
            /* one argument is one item: the shell already split them */
            const char *eq = strchr(argv[optind], '=');
            if (!eq || eq == argv[optind])
                cli_die(2, "expected KEY=VALUE, got '%s'", argv[optind]);
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(eq - argv[optind]), argv[optind]);
            cli_put_item(&items, key, eq + 1);
        }
        if (name)
            cli_put_item(&items, "name", name);
        set.arena = pt_arena_new();
        if (search_problem_parse(set.arena, op, items.s ? items.s : "", &one, &e))
            cli_die(2, "%s", e.msg);
    }
    pt_buf_free(&items);

    /* no backend asked: a GPU when there is one */
    if (!backend) {
        tuner_devinfo di;
        int n = 0;
        pt_err de = {0};
        if (tuner_cuda_list_isolated(&di, 1, &n, &de) == PT_OK && n > 0)
            backend = "cuda";
        else {
            backend = "emu";
            if (!quiet)
                fprintf(stderr, "ptxtune: no GPU found: emulator backend (candidates verified on "
                                "the CPU, ranked by the cost model, nothing timed)\n");
        }
    }

    /* an explicit cuda backend without a driver stops before the store is
     * created, so a failed start leaves no empty file behind */
    if (strcmp(backend, "cuda") == 0) {
        tuner_devinfo di;
        int n = 0;
        pt_err de = {0};
        int drc = tuner_cuda_list_isolated(&di, 1, &n, &de);
        if (drc == PT_ENODRIVER)
            cli_die(CLI_EXIT_NODRIVER, "%s", de.msg);
    }

    db_store *db;
    db_open_opts dbo = {.rekey = search_problem_rekey};
    if (db_open(dbpath, &dbo, &db, &e))
        cli_die(exit_code(e.code), "%s", e.msg);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    progress_ctx pc = {.tty = !quiet && isatty(2)};
    /* TEST ONLY: PTXTUNE_TEST_VERSION stands in for this build's version (the
     * fingerprint's generator and the run's tool version), so a test can be
     * "two builds" tuning one store (tests/test_regress.c). Not for users:
     * a store then claims a build that did not exist. */
    const char *tool_version = getenv("PTXTUNE_TEST_VERSION");
    if (!tool_version || !*tool_version)
        tool_version = PT_VERSION;
    sweep_opts o = {
        .backend = backend, .arch = arch, .strategy = kind, .budget = nbudget,
        .budget_s = sbudget, .seed = seed, .threads = threads, .prune = prune,
        .no_compile = no_compile, .fresh = fresh, .tool_version = tool_version,
        .git_rev = PT_GIT_REV, .mock_noise = noise, .mock_slow = slow,
        .mock_slow_match = slow_match, .shard_index = shard_i, .shard_count = shard_n,
        .any_host = any_host, .progress = on_progress,
        .progress_ctx = &pc, .stop = &stop_flag,
    };
    sweep_summary sum;
    int rc = problems ? sweep_run_source(db, &src, &o, &sum, &e)
                      : sweep_run(db, &one, 1, &o, &sum, &e);
    search_problem_reader_close(fsrc.r);
    fsrc.r = NULL;
    free(fsrc.text);
    if (pc.tty)
        fputs("\r\033[K", stderr);
    if (rc) {
        db_close(db);
        search_problems_free(&set);
        if (sum.resumable) /* a full disk: once there is room, the run goes on */
            cli_die(1, "%s; run %lld is kept: the same command resumes it", e.msg,
                    (long long)sum.run_id);
        cli_die(exit_code(rc), "%s", e.msg);
    }
    if (sum.empty_shard) {
        printf("shard %d/%d: no problem of the set falls in this slice; nothing to do\n",
               shard_i, shard_n);
        db_close(db);
        search_problems_free(&set);
        return 0;
    }
    if (json) {
        json_t *classes = json_object();
        if (!classes || db_run_classes(db, sum.run_id, json_class, classes, &e))
            cli_die(1, "%s", classes ? e.msg : "out of memory");
        json_t *env = json_pack(
            "{s:s, s:i, s:[], s:{s:I, s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:f, s:o, "
            "s:b}}",
            "format", "ptxtune-tune", "version", 1, "rows", "summary", "run",
            (json_int_t)sum.run_id, "uuid", sum.run_uuid, "device", sum.device, "protocol",
            sum.protocol, "fingerprint", sum.fingerprint, "resumed", sum.resumed, "measured",
            (json_int_t)sum.measured, "replayed", (json_int_t)sum.reused, "carried",
            (json_int_t)sum.carried, "duplicates", (json_int_t)sum.duplicates, "unverified",
            (json_int_t)sum.unverified, "wall_s", sum.wall_s, "classes", classes, "stopped",
            sum.stopped);
        if (!env)
            cli_die(1, "out of memory");
        if (top > 0)
            db_run_top(db, sum.run_id, top, json_top, env, &e);
        char *t = json_dumps(env, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!t || puts(t) == EOF || fflush(stdout) != 0)
            cli_die(1, "writing stdout failed");
        free(t);
        json_decref(env);
        db_close(db);
        search_problems_free(&set);
        return sum.stopped ? 130 : 0;
    }
    printf("run %lld (%.12s) on %s [%s], fingerprint %s%s\n", (long long)sum.run_id,
           sum.run_uuid, sum.device, sum.protocol, sum.fingerprint,
           sum.resumed ? ", resumed" : "");
    printf("%lld measured, %lld replayed from the store, %lld taken from finished runs, %lld "
           "duplicates; classes: ",
           (long long)sum.measured, (long long)sum.reused, (long long)sum.carried,
           (long long)sum.duplicates);
    int first = 1;
    db_run_classes(db, sum.run_id, print_class, &first, &e);
    printf("; %.1f s\n", sum.wall_s);
    if (sum.unverified)
        printf("note: %lld candidates not verified (too large for the emulator; use --backend "
               "cuda)\n", (long long)sum.unverified);
    if (strcmp(backend, "emu") == 0)
        printf("note: emulator backend: times are cost-model estimates (source=model), not "
               "measurements\n");
    if (top > 0) {
        top_ctx t = {0};
        db_run_top(db, sum.run_id, top, print_top, &t, &e);
    }
    db_close(db);
    search_problems_free(&set);
    if (sum.stopped) {
        fprintf(stderr, "ptxtune: interrupted; the same command resumes run %lld\n",
                (long long)sum.run_id);
        return 130;
    }
    return 0;
}
