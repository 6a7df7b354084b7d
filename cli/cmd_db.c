/* Store commands: export, import, db (merge, check, runs, fingerprints,
 * lookup), regress. Bad input (a file that is not a store, a corrupt one,
 * a malformed table) is one line and exit 2; nothing is written then. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "db/db.h"
#include "search/problem.h"
#include "tuner/contract.h"

static int exit_code(int rc) { return rc == PT_EINVAL || rc == PT_EPARSE ? 2 : 1; }


static db_store *open_db(const char *path, bool write)
{
    if (!path)
        cli_die(2, "missing --db FILE");
    db_store *s;
    pt_err e = {0};
    /* a writer rekeys problems an older build stored under another spelling */
    db_open_opts o = {.readonly = !write, .must_exist = !write,
                      .rekey = write ? search_problem_rekey : NULL};
    if (db_open(path, &o, &s, &e))
        cli_die(exit_code(e.code), "%s", e.msg);
    return s;
}

/* ---- export ------------------------------------------------------------ */

static const char export_usage[] =
    "usage: ptxtune export --db FILE --format json|csv|c-header|bundle [--gpu FP]\n"
    "                      [--match REGEX] [--out FILE]\n"
    "                      [--max-kernels N] [--max-slowdown P] [--json]\n"
    "Writes the tuned table (the winner of every problem per fingerprint): problem,\n"
    "config, kernel hash, PTX, cubin where present, launch geometry and contract, time,\n"
    "provenance.\n"
    "  --gpu FP      a fingerprint key, a prefix naming one, a GPU name or its short\n"
    "                name (H200, h100, A100); one that names none is an error (exit 2)\n"
    "                listing the known fingerprints\n"
    "  --match RE    a PCRE2 pattern over the problem key and name\n"
    "  --out FILE    (stdout by default; required for bundle, which must not exist);\n"
    "                written to a temporary file and renamed into place, never the store\n"
    "  --max-kernels N   fewer kernels: at most N kernels per fingerprint serve every\n"
    "                problem of the table, with the least worst (then mean) slowdown\n"
    "                against the per-problem winners\n"
    "  --max-slowdown P  the fewest kernels that serve every problem within P of its\n"
    "                winner (3% or 0.03); with --max-kernels both bounds hold\n"
    "                (a kernel serves a problem where it was measured and verified on it;\n"
    "                exact search for up to 64 candidate kernels, else greedy; the table's\n"
    "                size, compile time and slowdowns go to stderr, or with --json to\n"
    "                stdout as docs/json.md's envelope, which then needs --out)\n"
    "json round-trips through 'ptxtune import'; the c-header compiles with -Wall -Werror\n"
    "(define PTXTUNE_TABLE_IMPLEMENTATION in one file); a bundle is a small store.\n";

enum { O_MAXK = CLI_OPT_OWN, O_MAXS, O_JSON };

static const struct option export_opts[] = {
    {"db", required_argument, 0, 'd'},    {"format", required_argument, 0, 'f'},
    {"gpu", required_argument, 0, 'g'},   {"match", required_argument, 0, 'm'},
    {"out", required_argument, 0, 'o'},   {"help", no_argument, 0, 'h'},
    {"max-kernels", required_argument, 0, O_MAXK},
    {"max-slowdown", required_argument, 0, O_MAXS},
    {"json", no_argument, 0, O_JSON},
    {0, 0, 0, 0},
};

/* Every exported row gets its launch contract: rows a sweep gave none (a
 * row of a --max-kernels table, a winner a merge brought in) have it
 * computed from their config (tuner/contract.h) and, when the store can be
 * written, stored so the next export reads it. A config this build cannot
 * build gets none (engines refuse the row, as before). */
static void fill_contracts(db_store *s, const char *dbp, db_export_sel *x)
{
    pt_err e = {0};
    int filled = 0;
    for (size_t i = 0; i < db_sel_count(x); i++) {
        const db_sel_row *r = db_sel_row_at(x, i);
        size_t n = strlen(r->launch);
        if (r->contract || n < 2 || r->launch[n - 1] != '}')
            continue;
        pt_buf c;
        pt_buf_init(&c);
        pt_err ce = {0};
        int rc = tuner_contract_row(r->op, r->problem_key, r->arch, r->ptx_version, r->config,
                                    &c, &ce);
        if (rc == PT_ENOMEM)
            cli_die(1, "out of memory (a launch contract)");
        if (!rc && c.len) {
            pt_buf l;
            pt_buf_init(&l);
            pt_buf_putn(&l, r->launch, n - 1);
            pt_buf_puts(&l, ",\"contract\":");
            pt_buf_putn(&l, c.s, c.len);
            pt_buf_putc(&l, '}');
            if (!l.s || db_sel_set_launch(x, i, l.s, &e))
                cli_die(1, "out of memory (a launch contract)");
            pt_buf_free(&l);
            filled++;
        }
        pt_buf_free(&c);
    }
    if (!filled)
        return;
    (void)s;
    db_store *w = NULL;
    db_open_opts o = {.must_exist = true};
    if (db_open(dbp, &o, &w, &e)) {
        fprintf(stderr, "ptxtune: note: %d launch contracts computed for this export, not "
                        "stored (%s)\n", filled, e.msg);
        return;
    }
    for (size_t i = 0; i < db_sel_count(x); i++) {
        const db_sel_row *r = db_sel_row_at(x, i);
        if (r->contract && db_launch_put(w, r->id, r->launch, &e)) {
            fprintf(stderr, "ptxtune: note: launch contracts not stored (%s)\n", e.msg);
            break;
        }
    }
    db_close(w);
}

/* --max-slowdown: "3%" or a fraction ("0.03"), finite, >= 0. */
static double slowdown_arg(const char *v)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || isspace((unsigned char)*v) || (*end && strcmp(end, "%") != 0) ||
        errno == ERANGE || !isfinite(x) || !(x >= 0))
        cli_die(2, "bad --max-slowdown '%s' (a finite number >= 0: 3%% or 0.03)", v);
    return *end == '%' ? x / 100 : x;
}

static int kernels_arg(const char *v)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || isspace((unsigned char)*v) || errno == ERANGE || x < 1 ||
        x > 1000000)
        cli_die(2, "bad --max-kernels '%s' (an integer >= 1)", v);
    return (int)x;
}

static void cover_report(const db_export_sel *x, const db_cover_summary *sum, bool json)
{
    if (json) {
        json_t *env = cli_jenv("export");
        for (size_t i = 0; i < db_sel_count(x); i++) {
            const db_sel_row *r = db_sel_row_at(x, i);
            cli_jrow(env, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}",
                                    "fingerprint", r->fp_key, "problem", r->problem_key, "name",
                                    r->problem_name, "kernel", r->kernel_hash, "config",
                                    r->config, "time_s", cli_jnum(r->t_median), "winner_kernel",
                                    r->winner_kernel, "winner_s", cli_jnum(r->winner_s),
                                    "slowdown", cli_jnum(r->slowdown)));
        }
        json_t *sm = json_pack("{s:i, s:i, s:i, s:o, s:o, s:o, s:i, s:s}", "problems",
                               sum->problems, "kernels", sum->kernels, "winner_kernels",
                               sum->winner_kernels, "worst_slowdown", cli_jnum(sum->worst),
                               "mean_slowdown", cli_jnum(sum->mean), "compile_s",
                               cli_jnum(sum->compile_known ? sum->compile_s : NAN),
                               "compile_known", sum->compile_known, "search",
                               sum->exact ? "exact" : "greedy");
        if (!sm || json_object_set_new(env, "summary", sm))
            cli_die(1, "out of memory");
        cli_jprint(env);
        return;
    }
    char ct[96] = "no compile time stored";
    if (sum->compile_known)
        snprintf(ct, sizeof ct, "compile time %.3f s (stored for %d of %d kernels)",
                 sum->compile_s, sum->compile_known, sum->kernels);
    fprintf(stderr,
            "ptxtune: %d kernels serve %d problems (the winners: %d kernels); slowdown against "
            "the winners: worst %.2f%%, mean %.2f%%; %s; %s search\n",
            sum->kernels, sum->problems, sum->winner_kernels, sum->worst * 100, sum->mean * 100,
            ct, sum->exact ? "exact" : "greedy");
}

int cmd_export(int argc, char **argv)
{
    const char *dbp = NULL, *fmt = NULL, *gpu = NULL, *match = NULL, *out = NULL;
    db_cover_opts co = {.max_kernels = 0, .max_slowdown = -1};
    bool json = false;
    optind = 1;
    int c;
    opterr = 0; /* cli_opt_error: one line naming the option */
    while ((c = getopt_long(argc, argv, ":", export_opts, NULL)) != -1) {
        switch (c) {
        case 'd': dbp = optarg; break;
        case 'f': fmt = optarg; break;
        case 'g': gpu = optarg; break;
        case 'm': match = optarg; break;
        case 'o': out = optarg; break;
        case O_MAXK: co.max_kernels = kernels_arg(optarg); break;
        case O_MAXS: co.max_slowdown = slowdown_arg(optarg); break;
        case O_JSON: json = true; break;
        case 'h': fputs(export_usage, stdout); return 0;
        default: cli_opt_error(c, argv);
        }
    }
    if (optind < argc)
        cli_die(2, "unexpected argument '%s'", argv[optind]);
    if (!fmt)
        cli_die(2, "missing --format (json, csv, c-header, bundle)");
    db_format f;
    pt_err e = {0};
    if (db_format_parse(fmt, &f, &e))
        cli_die(2, "%s", e.msg);
    if (f == DB_FMT_BUNDLE && !out)
        cli_die(2, "a bundle needs --out FILE");
    bool cover = co.max_kernels > 0 || co.max_slowdown >= 0;
    if (json && !cover)
        cli_die(2, "--json reports a --max-kernels or --max-slowdown table");
    if (json && !out)
        cli_die(2, "--json prints the report on stdout: give the table --out FILE");
    db_store *s = open_db(dbp, false);
    db_export_sel *x = NULL;
    db_cover_summary sum;
    if (db_export_select(s, gpu, match, cover ? &co : NULL, &x, &sum, &e))
        cli_die(exit_code(e.code), "%s", e.msg);
    fill_contracts(s, dbp, x);
    int n = 0;
    if (out) {
        /* temporary file + rename: a failure leaves an old --out whole */
        if (db_export_sel_file(s, f, x, out, &n, &e))
            cli_die(exit_code(e.code), "%s", e.msg);
        db_close(s);
        if (cover)
            cover_report(x, &sum, json);
        db_export_sel_free(x);
        fprintf(stderr, "ptxtune: %d kernels into %s\n", n, out);
        return 0;
    }
    pt_buf b;
    pt_buf_init(&b);
    if (db_export_sel_text(s, f, x, &b, &n, &e))
        cli_die(exit_code(e.code), "%s", e.msg);
    db_close(s);
    if (b.len && fwrite(b.s, 1, b.len, stdout) != b.len)
        cli_die(1, "writing stdout failed");
    if (fflush(stdout) != 0)
        cli_die(1, "writing stdout failed");
    pt_buf_free(&b);
    if (cover)
        cover_report(x, &sum, false);
    db_export_sel_free(x);
    if (!n)
        fprintf(stderr, "ptxtune: 0 kernels (winners timed on the mock device are never "
                        "exported)\n");
    return 0;
}

/* ---- import and merge ----------------------------------------------------- */

static bool is_sqlite(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        cli_die(2, "%s: is a directory, not a store, bundle or JSON table", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        cli_die(2, "cannot open '%s'", path);
    char h[16] = {0};
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    return n == 16 && memcmp(h, "SQLite format 3", 16) == 0;
}

static void print_stats(const char *src, const db_merge_stats *st)
{
    printf("%s: %lld measurements added (%lld already present), %lld runs, %lld kernels, "
           "%lld problems, %lld fingerprints\n",
           src, (long long)st->measurements, (long long)st->skipped, (long long)st->runs,
           (long long)st->kernels, (long long)st->problems, (long long)st->fingerprints);
}

/* Imports each source: a store or bundle (merged) or a JSON table. */
static int import_all(const char *dbp, int n, char **srcs)
{
    if (n == 0)
        cli_die(2, "nothing to import: give one or more files (stores, bundles or JSON tables)");
    for (int i = 0; i < n; i++) /* every source readable before anything is written */
        is_sqlite(srcs[i]);
    db_store *s = open_db(dbp, true);
    pt_err e = {0};
    for (int i = 0; i < n; i++) {
        db_merge_stats st;
        int rc;
        if (is_sqlite(srcs[i]))
            rc = db_merge(s, srcs[i], &st, &e);
        else {
            size_t len;
            char *text = cli_read_file(srcs[i], &len);
            rc = db_import_json(s, text, len, srcs[i], &st, &e);
            free(text);
        }
        if (rc) {
            db_close(s);
            cli_die(exit_code(rc), "%s", e.msg);
        }
        print_stats(srcs[i], &st);
    }
    /* a source of an older build brings its own spellings of problems */
    int64_t rekeyed = 0;
    if (db_rekey(s, search_problem_rekey, NULL, &rekeyed, &e)) {
        db_close(s);
        cli_die(exit_code(e.code), "%s", e.msg);
    }
    if (rekeyed)
        printf("%lld problem keys made canonical\n", (long long)rekeyed);
    db_close(s);
    return 0;
}

static const char import_usage[] =
    "usage: ptxtune import --db FILE SRC...\n"
    "Adds each SRC to the store: another store or a bundle (merged), or a JSON table\n"
    "from 'ptxtune export --format json'. Rows are matched by their natural keys;\n"
    "existing rows win; winners are recomputed per fingerprint. Every row is checked\n"
    "(fingerprint keys and kernel hashes recomputed, JSON fields type-checked, a winner\n"
    "needs a positive time); each SRC is one transaction: one refused row and nothing\n"
    "of that SRC is added (exit 2, the count and the first reason). A --db that fails\n"
    "its integrity check is never written to.\n";

int cmd_import(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *dbp = NULL;
    optind = 1;
    int c;
    opterr = 0; /* cli_opt_error: one line naming the option */
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == 'd')
            dbp = optarg;
        else if (c == 'h') {
            fputs(import_usage, stdout);
            return 0;
        } else
            cli_opt_error(c, argv);
    }
    if (!dbp)
        cli_die(2, "missing --db FILE");
    return import_all(dbp, argc - optind, argv + optind);
}

/* ---- db subcommands -------------------------------------------------------- */

static const char db_usage[] =
    "usage: ptxtune db merge --db DST SRC...      merge stores or bundles into DST\n"
    "       ptxtune db check --db FILE             integrity check, keys and hashes, row counts;\n"
    "              exit 0 intact, 2 not a store or damaged (the first problem named),\n"
    "              1 unreadable\n"
    "       ptxtune db runs --db FILE [--json]     runs: id, uuid, fingerprint, strategy, status\n"
    "       ptxtune db fingerprints --db FILE [--json]  fingerprints with every field\n"
    "       ptxtune db lookup --db FILE --gpu FP OP KEY=VALUE...\n"
    "              the winner for a problem under fingerprint FP (a key, a prefix naming\n"
    "              one, a GPU name or short name of one fingerprint; never a winner timed\n"
    "              on the mock device); an untuned problem gets\n"
    "              the config of the nearest tuned one of the same op and class (every\n"
    "              field but the dimensions equal), flagged 'nearest': distance = sum over\n"
    "              dimensions of |log2(a/b)|, ties to the larger problem. Re-emit that\n"
    "              config for the new problem.\n";

static int json_run(void *ctx, const db_run_info *r)
{
    cli_jrow(ctx, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:I, s:I}",
                        "id", (json_int_t)r->id, "uuid", r->uuid, "fingerprint", r->fingerprint,
                        "gpu", r->gpu, "strategy", r->strategy, "budget", r->budget,
                        "backend", r->backend, "status", r->status, "git_rev", r->git_rev,
                        "seed", (json_int_t)r->seed, "started", cli_jnum(r->started), "ended",
                        cli_jnum(r->ended), "ok", (json_int_t)r->measured, "failed",
                        (json_int_t)r->failed));
    return 0;
}

static int json_fp(void *ctx, const char *key, const db_fingerprint *f)
{
    cli_jrow(ctx, json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:i, s:s, s:s}", "key", key, "gpu",
                        f->gpu, "cc", f->cc, "sm_count", f->sm_count, "driver", f->driver,
                        "compiler", f->compiler, "ptx_version", f->ptx_version, "generator",
                        f->generator, "protocol", f->protocol));
    return 0;
}

static int print_run(void *ctx, const db_run_info *r)
{
    (void)ctx;
    printf("%-4lld %.12s %s %-28.28s %-10s %-6s %-5s %-11s seed %-6llu %5lld ok %4lld failed  %s\n",
           (long long)r->id, r->uuid, r->fingerprint, r->gpu, r->strategy, r->budget, r->backend,
           r->status, (unsigned long long)r->seed, (long long)r->measured, (long long)r->failed,
           r->git_rev);
    return 0;
}

static int print_fp(void *ctx, const char *key, const db_fingerprint *f)
{
    (void)ctx;
    printf("%s  gpu=\"%s\" cc=%d sms=%d driver=%s compiler=\"%s\" ptx=%d.%d generator=\"%s\" "
           "protocol=%s\n",
           key, f->gpu, f->cc, f->sm_count, f->driver, f->compiler, f->ptx_version / 10,
           f->ptx_version % 10, f->generator, f->protocol);
    return 0;
}

typedef struct lookup_ctx {
    db_store *s;
    const db_problem *p;
    int nfp;
    bool found;
    pt_err *e;
    const pt_problem *prob; /* the asked problem: a nearest config must pass its check() */
    const db_fingerprint *fp;
} lookup_ctx;

/* Whether config applies to the asked problem on the fingerprint's arch:
 * it parses in the problem's space and the op's check() takes it. */
static bool config_applies(void *ctx, const char *config)
{
    const lookup_ctx *l = ctx;
    const pt_op *op = pt_op_find(l->prob->op);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d", l->fp->cc);
    pt_target t;
    pt_err e = {0};
    if (!op || pt_target_parse(arch, &t, &e))
        return true; /* nothing to check against: as before */
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = NULL;
    bool ok = false;
    if (a && op->prepare(a, l->prob, &t, &pp, &e) == PT_OK) {
        pt_space sp;
        pt_config c;
        op->space(pp, &t, &sp);
        op->defaults(pp, &t, &c);
        ok = pt_config_parse(&sp, config, &c, &e) == PT_OK && op->check(pp, &t, &c, &e) == PT_OK;
    }
    pt_arena_free(a);
    return ok;
}

static int print_winner(void *ctx, const db_winner *w)
{
    (void)ctx;
    printf("%s%s\n", w->nearest ? "nearest tuned problem: " : "tuned: ", w->problem_key);
    if (w->nearest)
        printf("distance %.3f (sum of |log2| dimension ratios): re-emit the config for the new "
               "problem\n", w->distance);
    printf("config %s\nkernel %s (%s)\ntime %.3f us (%s%s)\nrun %.12s, %s\n", w->config,
           w->kernel_hash, w->entry, w->t_median * 1e6, w->source,
           w->verified ? ", verified" : "", w->run_uuid, w->strategy);
    return 0;
}

static int lookup_fp(void *ctx, const char *key, const db_fingerprint *f)
{
    (void)key;
    lookup_ctx *l = ctx;
    l->nfp++;
    l->fp = f;
    return db_lookup_valid(l->s, f, l->p, config_applies, l, print_winner, NULL, &l->found, l->e);
}

/* The fingerprints a --gpu prefix names: how many, the first key, and the
 * candidates as "key (gpu)" for the ambiguity message. */
typedef struct match_ctx {
    int n;
    char key[17];
    pt_buf list;
} match_ctx;

static int match_fp(void *ctx, const char *key, const db_fingerprint *f)
{
    match_ctx *m = ctx;
    if (m->n++ == 0)
        snprintf(m->key, sizeof m->key, "%s", key);
    if (m->n <= 8)
        pt_buf_printf(&m->list, "%s%s (%s)", m->n > 1 ? ", " : "", key, f->gpu);
    else if (m->n == 9)
        pt_buf_puts(&m->list, ", ...");
    return 0;
}

int cmd_db(int argc, char **argv)
{
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"gpu", required_argument, 0, 'g'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    bool json = false;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(db_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1], *dbp = NULL, *gpu = NULL;
    optind = 2;
    int c;
    opterr = 0; /* cli_opt_error: one line naming the option */
    while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
        if (c == 'd')
            dbp = optarg;
        else if (c == 'g')
            gpu = optarg;
        else if (c == 'j')
            json = true;
        else if (c == 'h') {
            fputs(db_usage, stdout);
            return 0;
        } else
            cli_opt_error(c, argv);
    }
    pt_err e = {0};
    if (strcmp(sub, "merge") == 0) {
        if (!dbp)
            cli_die(2, "missing --db DST");
        for (int i = optind; i < argc; i++)
            if (!is_sqlite(argv[i]))
                cli_die(2, "%s: not a ptxtune store or bundle (use 'ptxtune import' for JSON)",
                        argv[i]);
        return import_all(dbp, argc - optind, argv + optind);
    }
    if (strcmp(sub, "lookup") != 0 && optind < argc)
        cli_die(2, "unexpected argument '%s'", argv[optind]);
    if (strcmp(sub, "check") == 0) {
        /* exit 0 intact; 2 not a store, damaged, or a key or hash that does not
         * match its row (the first problem named); 1 unreadable (I/O) */
        db_store *s = open_db(dbp, false);
        char msg[1024];
        if (db_integrity(s, msg, sizeof msg, &e) || db_verify(s, &e))
            cli_die(exit_code(e.code), "%s", e.msg);
        db_counts n;
        if (db_count(s, &n, &e))
            cli_die(exit_code(e.code), "%s", e.msg);
        printf("%s: integrity ok, keys and hashes ok, schema version %d; %lld fingerprints, "
               "%lld problems, %lld kernels (%lld cubins), %lld runs, %lld measurements, "
               "%lld winners\n",
               dbp, db_schema_version(s), (long long)n.fingerprints, (long long)n.problems,
               (long long)n.kernels, (long long)n.cubins, (long long)n.runs,
               (long long)n.measurements, (long long)n.winners);
        db_close(s);
        return 0;
    }
    if (strcmp(sub, "runs") == 0 || strcmp(sub, "fingerprints") == 0) {
        db_store *s = open_db(dbp, false);
        json_t *env = json ? cli_jenv(sub[0] == 'r' ? "runs" : "fingerprints") : NULL;
        int rc = sub[0] == 'r' ? db_runs(s, json ? json_run : print_run, env, &e)
                               : db_fingerprints(s, gpu, json ? json_fp : print_fp, env, &e);
        if (rc)
            cli_die(exit_code(rc), "%s", e.msg);
        db_close(s);
        if (env)
            cli_jprint(env);
        return 0;
    }
    if (strcmp(sub, "lookup") == 0) {
        if (!gpu)
            cli_die(2, "missing --gpu FP (a fingerprint key or prefix: 'ptxtune db fingerprints')");
        if (!*gpu)
            cli_die(2, "empty --gpu: give a fingerprint key or a prefix of it (see 'ptxtune db "
                       "fingerprints')");
        if (optind >= argc)
            cli_die(2, "missing problem: OP KEY=VALUE...");
        const char *op = argv[optind++];
        pt_buf items;
        pt_buf_init(&items);
        for (; optind < argc; optind++) {
            /* one argument is one item: the shell already split them */
            const char *eq = strchr(argv[optind], '=');
            if (!eq || eq == argv[optind])
                cli_die(2, "expected KEY=VALUE, got '%s'", argv[optind]);
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(eq - argv[optind]), argv[optind]);
            cli_put_item(&items, key, eq + 1);
        }
        pt_arena *a = pt_arena_new();
        search_problem sp;
        if (search_problem_parse(a, op, items.s ? items.s : "", &sp, &e))
            cli_die(2, "%s", e.msg);
        pt_buf_free(&items);
        db_store *s = open_db(dbp, false);
        db_problem p = {sp.prob.op, sp.key, sp.klass, sp.dims, sp.name, 0, 0, true};
        /* resolve --gpu (key, unique prefix, GPU name, short name) to one
         * fingerprint before printing anything */
        match_ctx m = {0};
        pt_buf_init(&m.list);
        if (db_gpu_resolve(s, gpu, match_fp, &m, &e))
            cli_die(exit_code(e.code), "%s", e.msg);
        if (m.n > 1)
            cli_die(2, "--gpu '%s' is ambiguous: %d fingerprints: %s (give a key)", gpu, m.n,
                    m.list.s);
        pt_buf_free(&m.list);
        lookup_ctx l = {s, &p, 0, false, &e, &sp.prob, NULL};
        if (db_fingerprints(s, m.key, lookup_fp, &l, &e))
            cli_die(exit_code(e.code), "%s", e.msg);
        db_close(s);
        pt_arena_free(a);
        if (!l.found) {
            fprintf(stderr, "ptxtune: no tuned problem of this op and class under %s has a config "
                            "this problem takes\n", gpu);
            return 1;
        }
        return 0;
    }
    cli_die(2, "unknown db command '%s' (merge, check, runs, fingerprints, lookup)", sub);
}

/* ---- regress ------------------------------------------------------------------- */

static const char regress_usage[] =
    "usage: ptxtune regress --db FILE --baseline RUN --candidate RUN [--threshold 3%]\n"
    "                       [--winners | --kernels] [--csv | --json | --markdown [--plots DIR]]\n"
    "Compares two runs on every problem: --winners (the default) each problem's best\n"
    "time in each run, --kernels kernel by kernel (a kernel is its PTX body: builds\n"
    "that differ only in version print the same kernels). Measured rows, or the mock\n"
    "device's against its own; cost-model rows are estimates, never regressions. The\n"
    "runs may come from builds, drivers or compilers of other versions (the fields\n"
    "that differ are named); another GPU or benchmark protocol is refused. RUN is a\n"
    "run id or 6+ uuid digits ('ptxtune db runs'). A change is a regression (SLOWER)\n"
    "when it exceeds both the threshold and the noise, 2 x sqrt(spread_base^2 +\n"
    "spread_cand^2) from the stored relative spreads of the two medians. Rows in one\n"
    "run only (new, gone) and rows both runs share one timing of (shared: reused, not\n"
    "measured again) are counted, never judged. Exits 1 when anything is SLOWER.\n"
    "--markdown prints the verdict and the table as Markdown (a CI artifact); with\n"
    "--plots DIR each problem's row links DIR/<name>.png and the report DIR/regress.png,\n"
    "the plots 'scripts/plot_history.py --regress FILE.csv --out DIR/regress.png\n"
    "--per-problem DIR' writes from the --kernels --csv table.\n";

/* A row kept for --markdown (printed after the summary). */
typedef struct md_row {
    char *problem, *name, *config, *kernel, *base_config;
    double base_s, cand_s, change, noise;
    db_verdict verdict;
} md_row;

typedef struct regress_ctx {
    bool csv, winners;
    int n;
    json_t *env; /* --json */
    md_row *md;  /* --markdown */
    size_t nmd, capmd;
} regress_ctx;

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        cli_die(1, "out of memory");
    return d;
}

static int keep_regress(void *ctx, const db_regress_row *r)
{
    regress_ctx *x = ctx;
    if (x->nmd == x->capmd) {
        size_t cap = x->capmd ? 2 * x->capmd : 64;
        md_row *v = realloc(x->md, cap * sizeof *v);
        if (!v)
            cli_die(1, "out of memory");
        x->md = v;
        x->capmd = cap;
    }
    x->md[x->nmd++] = (md_row){xstrdup(r->problem_key), xstrdup(r->problem_name),
                               xstrdup(r->config),      xstrdup(r->kernel_hash),
                               xstrdup(r->base_config), r->base_s, r->cand_s, r->change,
                               r->noise, r->verdict};
    return 0;
}

/* A table cell: '|' escaped, line breaks as blanks. */
static void md_cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", stdout);
        else
            putchar(*s == '\n' || *s == '\r' ? ' ' : *s);
    }
}

/* plot_history.py --per-problem's file name: the name with every run of
 * characters outside [A-Za-z0-9_.-] one '_'. */
static void md_plot_name(const char *name, char *out, size_t n)
{
    size_t o = 0;
    bool run = false;
    for (const char *c = name; *c && o + 1 < n; c++) {
        bool ok = isalnum((unsigned char)*c) && !(*c & 0x80);
        ok = ok || *c == '_' || *c == '.' || *c == '-';
        if (ok)
            out[o++] = *c;
        else if (!run)
            out[o++] = '_';
        run = !ok;
    }
    out[o] = 0;
}

static int md_key_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The report: verdict, summary, fingerprints, the table (SLOWER first), and
 * the plots' links when given plots. */
static void print_markdown(regress_ctx *x, const db_regress_summary *sum, const char *base,
                           const char *cand, double thr, const char *plots)
{
    const char *level = sum->level == DB_REGRESS_WINNERS ? "winners" : "kernels";
    printf("## ptxtune regress: run %s vs run %s (%s)\n\n", base, cand, level);
    printf("**%s**: %d %s compared: %d slower, %d faster, %d same within noise; %d only in the "
           "baseline, %d only in the candidate, %d sampled once (not judged); threshold "
           "%.1f%%.\n\n",
           sum->slower ? "REGRESSION" : "no regression", sum->rows, level, sum->slower,
           sum->faster, sum->same, sum->only_base, sum->only_cand, sum->shared, thr * 100);
    if (sum->same_fingerprint)
        printf("Fingerprint `%s`.\n\n", sum->cand_fp);
    else
        printf("Fingerprints `%s` (baseline) and `%s` (candidate) differ in %s.\n\n",
               sum->base_fp, sum->cand_fp, sum->fields);
    if (plots)
        printf("![changes](%s/regress.png)\n\n", plots);
    /* the problems plot_history.py plots, in its order: those with a change */
    char **keys = calloc(x->nmd + 1, sizeof *keys);
    if (!keys)
        cli_die(1, "out of memory");
    size_t nk = 0;
    for (size_t i = 0; i < x->nmd; i++)
        if (isfinite(x->md[i].change))
            keys[nk++] = x->md[i].problem;
    qsort(keys, nk, sizeof *keys, md_key_cmp);
    size_t u = 0;
    for (size_t i = 0; i < nk; i++)
        if (!u || strcmp(keys[u - 1], keys[i]) != 0)
            keys[u++] = keys[i];
    printf("| verdict | problem | config | kernel | baseline (us) | candidate (us) | change | "
           "noise |%s\n",
           plots ? " plot |" : "");
    printf("|---|---|---|---|---:|---:|---:|---:|%s\n", plots ? "---|" : "");
    static const db_verdict order[] = {DB_SLOWER, DB_FASTER, DB_SAME,
                                       DB_NEW,    DB_GONE,   DB_SHARED};
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
        for (size_t i = 0; i < x->nmd; i++) {
            const md_row *r = &x->md[i];
            if (r->verdict != order[o])
                continue;
            const char *v = db_verdict_name(r->verdict);
            printf(r->verdict == DB_SLOWER ? "| **%s** | " : "| %s | ", v);
            if (r->name[0]) {
                md_cell(r->name);
                fputs(": ", stdout);
            }
            md_cell(r->problem);
            fputs(" | `", stdout);
            md_cell(r->config);
            if (x->winners && r->base_config[0] && strcmp(r->base_config, r->config) != 0) {
                fputs("` (baseline: `", stdout);
                md_cell(r->base_config);
                fputs("`)", stdout);
            } else {
                putchar('`');
            }
            printf(" | `%s` | ", r->kernel);
            if (isfinite(r->base_s))
                printf("%.3f", r->base_s * 1e6);
            fputs(" | ", stdout);
            if (isfinite(r->cand_s))
                printf("%.3f", r->cand_s * 1e6);
            fputs(" | ", stdout);
            if (isfinite(r->change))
                printf("%+.2f%%", r->change * 100);
            fputs(" | ", stdout);
            if (isfinite(r->noise))
                printf("%.2f%%", r->noise * 100);
            fputs(" |", stdout);
            if (plots) {
                char **k = isfinite(r->change)
                               ? bsearch(&r->problem, keys, u, sizeof *keys, md_key_cmp)
                               : NULL;
                if (k) {
                    char file[300], label[64];
                    snprintf(label, sizeof label, "problem-%zu", (size_t)(k - keys));
                    md_plot_name(r->name[0] ? r->name : label, file, sizeof file);
                    printf(" [png](%s/%s.png) |", plots, file);
                } else {
                    fputs(" |", stdout);
                }
            }
            putchar('\n');
        }
    free(keys);
    for (size_t i = 0; i < x->nmd; i++) {
        free(x->md[i].problem);
        free(x->md[i].name);
        free(x->md[i].config);
        free(x->md[i].kernel);
        free(x->md[i].base_config);
    }
    free(x->md);
    if (fflush(stdout) != 0 || ferror(stdout))
        cli_die(1, "writing stdout failed");
}

static int json_regress(void *ctx, const db_regress_row *r)
{
    regress_ctx *x = ctx;
    cli_jrow(x->env,
         json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?, s:o, s:o, s:o, s:o, s:o, s:o, s:s}",
                   "problem", r->problem_key, "name", r->problem_name, "config", r->config,
                   "kernel", r->kernel_hash, "base_config", r->base_config, "base_kernel",
                   r->base_kernel, "base_s", cli_jnum(r->base_s), "cand_s", cli_jnum(r->cand_s),
                   "base_spread", cli_jnum(r->base_spread), "cand_spread", cli_jnum(r->cand_spread),
                   "change", cli_jnum(r->change), "noise", cli_jnum(r->noise), "verdict",
                   db_verdict_name(r->verdict)));
    return 0;
}

static void csv_cell(const char *s, char end)
{
    if (strpbrk(s, ",\"\n")) {
        putchar('"');
        for (; *s; s++) {
            if (*s == '"')
                putchar('"');
            putchar(*s);
        }
        putchar('"');
    } else
        fputs(s, stdout);
    putchar(end);
}

static int print_regress(void *ctx, const db_regress_row *r)
{
    regress_ctx *x = ctx;
    const char *bcfg = r->base_config ? r->base_config : "";
    if (x->csv) {
        if (!x->n++)
            puts("problem,name,config,kernel,base_us,cand_us,change,noise,verdict,base_config,"
                 "base_kernel");
        csv_cell(r->problem_key, ',');
        csv_cell(r->problem_name, ',');
        csv_cell(r->config, ',');
        csv_cell(r->kernel_hash, ',');
        printf("%.4f,%.4f,%.5f,%.5f,%s,", r->base_s * 1e6, r->cand_s * 1e6, r->change, r->noise,
               db_verdict_name(r->verdict));
        csv_cell(bcfg, ',');
        csv_cell(r->base_kernel ? r->base_kernel : "", '\n');
        return 0;
    }
    if (!x->n++)
        printf("%-8s %12s %12s %8s %7s  %-16s %s\n", "verdict", "base", "candidate", "change",
               "noise", "kernel", x->winners ? "problem / best config (baseline's if other)"
                                              : "problem / config");
    char b[32] = "-", cnd[32] = "-", ch[16] = "-", nz[16] = "-";
    if (isfinite(r->base_s))
        snprintf(b, sizeof b, "%.3f us", r->base_s * 1e6);
    if (isfinite(r->cand_s))
        snprintf(cnd, sizeof cnd, "%.3f us", r->cand_s * 1e6);
    if (isfinite(r->change))
        snprintf(ch, sizeof ch, "%+.2f%%", r->change * 100);
    if (isfinite(r->noise))
        snprintf(nz, sizeof nz, "%.2f%%", r->noise * 100);
    bool other = x->winners && r->base_config && strcmp(r->base_config, r->config) != 0;
    printf("%-8s %12s %12s %8s %7s  %-16s %s%s%s / %s%s%s%s\n", db_verdict_name(r->verdict), b,
           cnd, ch, nz, r->kernel_hash, r->problem_name, r->problem_name[0] ? ": " : "",
           r->problem_key, r->config, other ? " (baseline: " : "", other ? bcfg : "",
           other ? ")" : "");
    return 0;
}

int cmd_regress(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},        {"baseline", required_argument, 0, 'b'},
        {"candidate", required_argument, 0, 'c'}, {"threshold", required_argument, 0, 't'},
        {"csv", no_argument, 0, 'v'},             {"winners", no_argument, 0, 'w'},
        {"kernels", no_argument, 0, 'k'},         {"help", no_argument, 0, 'h'},
        {"json", no_argument, 0, 'j'},            {"markdown", no_argument, 0, 'm'},
        {"plots", required_argument, 0, 'p'},     {0, 0, 0, 0}};
    bool json = false, md = false;
    const char *plots = NULL;
    const char *dbp = NULL, *base = NULL, *cand = NULL;
    double thr = 0.03;
    bool csv = false;
    db_regress_level level = DB_REGRESS_WINNERS;
    optind = 1;
    int c;
    char *end;
    opterr = 0; /* cli_opt_error: one line naming the option */
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dbp = optarg; break;
        case 'b': base = optarg; break;
        case 'c': cand = optarg; break;
        case 't':
            errno = 0; /* 1e400 reads as inf with ERANGE: not the number written */
            thr = strtod(optarg, &end);
            if (end == optarg || isspace((unsigned char)*optarg) || (*end && strcmp(end, "%") != 0) ||
                errno == ERANGE || !isfinite(thr) || !(thr >= 0))
                cli_die(2, "bad --threshold '%s' (a finite number >= 0, e.g. 3%% or 0.03)", optarg);
            if (*end == '%')
                thr /= 100;
            break;
        case 'v': csv = true; break;
        case 'w': level = DB_REGRESS_WINNERS; break;
        case 'k': level = DB_REGRESS_KERNELS; break;
        case 'j': json = true; break;
        case 'm': md = true; break;
        case 'p':
            if (!*optarg)
                cli_die(2, "bad --plots '' (a directory)");
            plots = optarg;
            break;
        case 'h': fputs(regress_usage, stdout); return 0;
        default: cli_opt_error(c, argv);
        }
    }
    if (optind < argc)
        cli_die(2, "unexpected argument '%s'", argv[optind]);
    if (!base || !cand)
        cli_die(2, "missing --baseline RUN or --candidate RUN (see 'ptxtune db runs')");
    if (json + csv + md > 1)
        cli_die(2, "give one of --json, --csv and --markdown");
    if (plots && !md)
        cli_die(2, "--plots DIR goes with --markdown");
    db_store *s = open_db(dbp, false);
    regress_ctx x = {csv, level == DB_REGRESS_WINNERS, 0, json ? cli_jenv("regress") : NULL,
                     NULL, 0, 0};
    db_regress_summary sum;
    pt_err e = {0};
    if (db_regress_at(s, base, cand, thr, level,
                      json ? json_regress : md ? keep_regress : print_regress, &x, &sum, &e))
        cli_die(exit_code(e.code), "%s", e.msg);
    db_close(s);
    if (md) {
        sum.level = level;
        print_markdown(&x, &sum, base, cand, thr, plots);
        return sum.slower ? 1 : 0;
    }
    if (json) {
        json_t *sm = json_pack("{s:s, s:s, s:s, s:f, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, "
                               "s:i}",
                               "level", level == DB_REGRESS_WINNERS ? "winners" : "kernels",
                               "baseline", base, "candidate", cand, "threshold", thr,
                               "baseline_fingerprint", sum.base_fp, "candidate_fingerprint",
                               sum.cand_fp, "fields_differ", sum.fields, "compared", sum.rows,
                               "slower", sum.slower, "faster", sum.faster, "same", sum.same,
                               "only_baseline", sum.only_base, "only_candidate", sum.only_cand,
                               "shared", sum.shared);
        if (!sm || json_object_set_new(x.env, "summary", sm))
            cli_die(1, "out of memory");
        cli_jprint(x.env);
        return sum.slower ? 1 : 0;
    }
    FILE *f = csv ? stderr : stdout;
    fprintf(f, "%s%d %s compared: %d slower, %d faster, %d same within noise; %d only in the "
               "baseline, %d only in the candidate, %d sampled once (shared by both runs, not "
               "judged) (threshold %.1f%%)\n",
            csv ? "" : "\n", sum.rows, level == DB_REGRESS_WINNERS ? "winners" : "kernels",
            sum.slower, sum.faster, sum.same, sum.only_base, sum.only_cand, sum.shared,
            thr * 100);
    if (!sum.same_fingerprint)
        fprintf(f, "note: fingerprints %s and %s differ in %s\n", sum.base_fp, sum.cand_fp,
                sum.fields);
    if (sum.rows == 0)
        fprintf(f, "note: no timed row in common (emulator runs hold model estimates)\n");
    return sum.slower ? 1 : 0;
}
