/* Helpers shared by the ptxtune commands: errors, timing, files, and the
 * problem options (--expr --shape --dtype ...) every op command takes. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "ptx/compile.h"
#include "search/problem.h"
#include "tuner/driver.h"
void cli_die(int code, const char *fmt, ...)
{
    /* one line, whatever the message holds (a driver's log, a compiler's) */
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ';';
    fprintf(stderr, "ptxtune: %s\n", msg);
    exit(code);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        cli_die(2, "cannot open '%s': %s", path, strerror(errno));
    pt_buf b;
    pt_buf_init(&b);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        pt_buf_putn(&b, tmp, n);
    if (ferror(f)) /* a directory opens, then fails to read with EISDIR */
        cli_die(2, "cannot read '%s': %s", path, errno == EISDIR ? "is a directory" : strerror(errno));
    if (f != stdin)
        fclose(f);
    /* every file read here is text that would end at the first NUL */
    const char *nul = b.len ? memchr(b.s, '\0', b.len) : NULL;
    if (nul)
        cli_die(2, "%s: NUL byte at offset %zu (not a text file)", path, (size_t)(nul - b.s));
    if (b.failed)
        cli_die(1, "out of memory reading '%s'", path);
    if (len)
        *len = b.len;
    return pt_buf_take(&b);
}

/* ---- checked option values ---- */

int64_t cli_opt_int(const char *opt, const char *v, int64_t lo, int64_t hi)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || isspace((unsigned char)*v))
        cli_die(2, "bad value '%s' for %s (expected an integer)", v, opt);
    if (errno == ERANGE || x < lo || x > hi) {
        if (hi == INT64_MAX)
            cli_die(2, "bad value '%s' for %s (at least %lld)", v, opt, (long long)lo);
        cli_die(2, "bad value '%s' for %s (%lld..%lld)", v, opt, (long long)lo, (long long)hi);
    }
    return x;
}

double cli_opt_real(const char *opt, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || isspace((unsigned char)*v))
        cli_die(2, "bad value '%s' for %s (expected a number)", v, opt);
    /* 1e400 reads as inf with ERANGE, 1e-400 as 0 with ERANGE: neither is
     * the number written */
    if (errno == ERANGE || !isfinite(x))
        cli_die(2, "bad value '%s' for %s (expected a finite number)", v, opt);
    if (x < lo || x > hi) {
        if (hi == INFINITY)
            cli_die(2, "bad value '%s' for %s (at least %g)", v, opt, lo);
        if (lo == -INFINITY)
            cli_die(2, "bad value '%s' for %s (at most %g)", v, opt, hi);
        cli_die(2, "bad value '%s' for %s (%g..%g)", v, opt, lo, hi);
    }
    return x;
}

void cli_opt_error(int c, char **argv)
{
    /* optstring ":" makes getopt_long return ':' for a missing value and
     * '?' for an unknown option, silently (opterr = 0) */
    const char *arg = argv[optind - 1];
    if (c == ':')
        cli_die(2, "option '%s' needs a value", arg);
    if (optopt && optopt < 256 && (arg[0] != '-' || arg[1] != '-'))
        cli_die(2, "unknown option '-%c'", optopt);
    size_t n = strcspn(arg, "=");
    cli_die(2, "unknown option '%.*s'", (int)n, arg);
}

/* ---- problem options shared by emit / variants / run / tune ---- */

/* The i-th distinct key name over every op's schema (registry order, then
 * table order): flag i of cli_problem_opts. NULL past the last. */
static const pt_key *flag_key(int i)
{
    const pt_op *const *ops;
    int nops = pt_op_list(&ops), seen = 0;
    for (int o = 0; o < nops; o++)
        for (int k = 0; ops[o]->schema && k < ops[o]->schema->nkeys; k++) {
            const pt_key *key = &ops[o]->schema->keys[k];
            bool dup = false;
            for (int p = 0; p < o && !dup; p++)
                dup = pt_schema_find(ops[p]->schema, key->name, strlen(key->name)) != NULL;
            if (!dup && seen++ == i)
                return key;
        }
    return NULL;
}

/* "out_dtype" -> "out-dtype" */
static void flag_name(const pt_key *k, char *buf, size_t n)
{
    snprintf(buf, n, "%s", k->name);
    for (char *c = buf; *c; c++)
        if (*c == '_')
            *c = '-';
}

/* Flag names live as long as the process: one table, built once per
 * parse into the caller's storage. */
typedef struct flag_names {
    char name[PT_MAX_KEYS * 2][32];
} flag_names;

static size_t problem_flags(struct option *opts, size_t cap, size_t n, int base, flag_names *fn)
{
    for (int i = 0; n + 1 < cap && i < PT_MAX_KEYS * 2; i++) {
        const pt_key *k = flag_key(i);
        if (!k)
            break;
        flag_name(k, fn->name[i], sizeof fn->name[i]);
        opts[n++] = (struct option){fn->name[i],
                                    k->type == PT_KEY_BOOL ? optional_argument : required_argument,
                                    0, base + i};
    }
    opts[n] = (struct option){0, 0, 0, 0};
    return n;
}

/* A problem flag's value as an item. Numbers are checked here, naming the
 * flag, where the key's range is the type's whole range (a size that is
 * required may be 0 here: the op's prepare names it); a real with its own
 * bound or a given-flag (scales) is checked by the problem parser, which
 * names the key and the bound. */
static bool problem_flag(int id, int base, const char *arg, pt_buf *items)
{
    const pt_key *k = id >= base ? flag_key(id - base) : NULL;
    if (!k)
        return false;
    char flag[40] = "--";
    flag_name(k, flag + 2, sizeof flag - 2);
    if (k->type == PT_KEY_INT)
        cli_opt_int(flag, arg, k->flags & PT_KEY_REQUIRED ? 0 : (int64_t)k->min, INT64_MAX);
    else if (k->type == PT_KEY_REAL && !k->given && !(k->flags & PT_KEY_MIN))
        cli_opt_real(flag, arg, -INFINITY, INFINITY);
    cli_put_item(items, k->name, k->type == PT_KEY_BOOL && !arg ? "1" : arg);
    return true;
}

/* The base id of the problem flags in a command's table (above every
 * command's own, CLI_OPT_OWN + 1024). */
enum { OPT_PROBLEM = CLI_OPT_OWN + 1024 };

static const struct option problem_opts[] = {
    {"arch", required_argument, 0, 'a'},     {"config", required_argument, 0, 'c'},
    {"json", no_argument, 0, 'j'},           {"backend", required_argument, 0, 'b'},
    {"limit", required_argument, 0, 'n'},    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* One key as a usage line: "  --layout nn|nt|tn|tt  doc [default nn]". */
static void usage_key(FILE *f, const pt_key *k)
{
    char flag[40], arg[128];
    flag_name(k, flag, sizeof flag);
    switch (k->type) {
    case PT_KEY_ENUM:
        snprintf(arg, sizeof arg, " %s", k->values);
        for (char *c = arg + 1; *c; c++)
            if (*c == ' ')
                *c = '|';
        break;
    case PT_KEY_BOOL: snprintf(arg, sizeof arg, "[=0|1]"); break;
    case PT_KEY_DTYPE: snprintf(arg, sizeof arg, " D"); break;
    case PT_KEY_EXPR: snprintf(arg, sizeof arg, " EXPR"); break;
    case PT_KEY_SHAPES: snprintf(arg, sizeof arg, " x=RxC,..."); break;
    case PT_KEY_INT: snprintf(arg, sizeof arg, " N"); break;
    default: snprintf(arg, sizeof arg, " X"); break;
    }
    char head[192];
    snprintf(head, sizeof head, "--%s%s", flag, arg);
    fprintf(f, "    %-24s %s", head, k->doc);
    if (k->flags & PT_KEY_REQUIRED)
        fputs(" [required]", f);
    else if (k->def)
        fprintf(f, " [default %s]", k->def[0] == '=' ? k->def + 1 : k->def);
    fputc('\n', f);
}

/* The problem flags of op (every op when NULL), from the schemas. */
static void usage_problem(FILE *f, const pt_op *only)
{
    fputs("\nproblem: KEY=VALUE items as in a problem file (results/problems/README.md), the\n"
          "flags below (--KEY, '_' written '-'), or both (a key given twice is refused), e.g.\n"
          "  ptxtune run gemm m=16 n=4096 k=4096 dtype=bf16 layout=nt\n"
          "  ptxtune emit elementwise 'expr=y = softmax(x, -1)' shape=x=16x4096 --dtype bf16\n"
          "'ptxtune ops' lists every op's keys, types, defaults and parameters.\n",
          f);
    const pt_op *const *ops;
    int nops = pt_op_list(&ops);
    for (int o = 0; o < nops; o++) {
        if ((only && ops[o] != only) || !ops[o]->schema)
            continue;
        fprintf(f, "  %s: %s\n", ops[o]->name, ops[o]->summary);
        for (int k = 0; k < ops[o]->schema->nkeys; k++)
            usage_key(f, &ops[o]->schema->keys[k]);
    }
    fputs("  common: --arch sm_XX --config k=v,...\n"
          "    .npy files hold bf16 as uint16 bits and fp8 as uint8 bits.\n",
          f);
}

static void print_usage(const char *usage, const pt_op *op)
{
    fputs(usage, stdout);
    usage_problem(stdout, op);
}

size_t cli_problem_opts(struct option *opts, size_t cap, size_t n, void **names)
{
    flag_names *fn = calloc(1, sizeof *fn);
    if (!fn)
        cli_die(1, "out of memory");
    *names = fn;
    return problem_flags(opts, cap, n, OPT_PROBLEM, fn);
}

bool cli_problem_flag(int id, const char *arg, pt_buf *items)
{
    return problem_flag(id, OPT_PROBLEM, arg, items);
}

void cli_problem_usage(FILE *f)
{
    usage_problem(f, NULL);
}

/* Appends ` key="value"` in the problem syntax. */
void cli_put_item(pt_buf *b, const char *key, const char *v)
{
    pt_buf_printf(b, " %s=\"", key);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            pt_buf_putc(b, '\\');
        pt_buf_putc(b, *v);
    }
    pt_buf_putc(b, '"');
}

void cli_parse_problem(int argc, char **argv, cli_problem *cp, const char *usage,
                       const cli_extra *x)
{
    memset(cp, 0, sizeof *cp);
    cp->arch = "sm_80";
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
            print_usage(x && x->usage ? x->usage : usage, NULL);
            exit(0);
        }
        cli_die(2, "missing op name (see 'ptxtune ops')");
    }
    cp->op = pt_op_find(argv[1]);
    if (!cp->op)
        cli_die(2, "unknown op '%s' (see 'ptxtune ops')", argv[1]);
    /* one table: the command's own options, the common ones, then a flag
     * per problem key of every op (the parser names a key this op lacks) */
    struct option opts[PT_MAX_KEYS * 2 + 64];
    size_t n = 0;
    for (size_t i = 0; x && x->opts && x->opts[i].name; i++) {
        if (n + 1 >= sizeof opts / sizeof opts[0])
            abort();
        opts[n++] = x->opts[i];
    }
    for (size_t i = 0; problem_opts[i].name; i++)
        opts[n++] = problem_opts[i];
    void *names;
    n = cli_problem_opts(opts, sizeof opts / sizeof opts[0], n, &names);
    /* every flag becomes a problem item, validated where it is named; the
     * problem-file parser then reads all of them (a key twice is refused) */
    pt_buf items;
    pt_buf_init(&items);
    pt_buf_putc(&items, '\0');
    items.len = 0;
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'a': cp->arch = optarg; cp->has_arch = true; break;
        case 'c': cp->config = optarg; break;
        case 'j': cp->json = true; break;
        case 'b': cp->backend = optarg; break;
        case 'n': cp->limit = cli_opt_int("--limit", optarg, 1, INT32_MAX); break;
        case 'h': print_usage(x && x->usage ? x->usage : usage, cp->op); exit(0);
        case ':': case '?': cli_opt_error(c, argv);
        default:
            if (cli_problem_flag(c, optarg, &items))
                break;
            if (x && x->fn) {
                x->fn(x->ctx, c, optarg);
                break;
            }
            cli_opt_error('?', argv);
        }
    }
    free(names);
    /* what is left: KEY=VALUE items, one argument each (the shell split them) */
    for (; optind < argc; optind++) {
        const char *eq = strchr(argv[optind], '=');
        size_t klen = eq ? (size_t)(eq - argv[optind]) : 0;
        if (!eq || !klen || klen >= 64 || strspn(argv[optind], "abcdefghijklmnopqrstuvwxyz"
                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != klen)
            cli_die(2, "unexpected argument '%s' (problem items are KEY=VALUE)", argv[optind]);
        char key[64];
        memcpy(key, argv[optind], klen);
        key[klen] = '\0';
        cli_put_item(&items, key, eq + 1);
    }
    cp->arena = pt_arena_new();
    search_problem sp;
    pt_err e = {0};
    if (search_problem_parse_partial(cp->arena, cp->op->name, items.s, &sp, &e))
        cli_die(2, "%s", e.msg);
    pt_buf_free(&items);
    cp->prob = sp.prob;
    /* which keys an op needs is the op's business (its prepare) */
}

void cli_problem_free(cli_problem *cp)
{
    pt_arena_free(cp->arena);
    cp->arena = NULL;
}

pt_compiler *cli_open_compiler(const char *backend, bool required)
{
    pt_compiler *c = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&c, &e)) {
        if (required)
            cli_die(3, "%s", e.msg);
        return NULL;
    }
    if (backend) {
        pt_backend b;
        if (strcmp(backend, "nvjitlink") == 0)
            b = PT_BACKEND_NVJITLINK;
        else if (strcmp(backend, "ptxas") == 0)
            b = PT_BACKEND_PTXAS;
        else
            cli_die(2, "unknown compiler '%s' (nvjitlink, ptxas)", backend);
        if (pt_compiler_set_backend(c, b, &e))
            cli_die(3, "%s", e.msg);
    }
    return c;
}

void cli_make_config(const cli_problem *cp, const pt_prepared *pp, const pt_target *t,
                        pt_config *cfg)
{
    pt_space s;
    pt_err e = {0};
    cp->op->space(pp, t, &s);
    cp->op->defaults(pp, t, cfg);
    if (cp->config && pt_config_parse(&s, cp->config, cfg, &e))
        cli_die(2, "%s", e.msg);
    if (cp->op->check(pp, t, cfg, &e)) /* vec=4 on 127 columns, splitk=8 with K=64 */
        cli_die(2, "%s", e.msg);
}

/* ---- --json: the one envelope of docs/json.md ---- */

json_t *cli_jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *cli_jenv(const char *what)
{
    char fmt[64];
    snprintf(fmt, sizeof fmt, "ptxtune-%s", what);
    json_t *o = json_pack("{s:s, s:i, s:[]}", "format", fmt, "version", 1, "rows");
    if (!o)
        cli_die(1, "out of memory");
    return o;
}

void cli_jrow(json_t *env, json_t *row)
{
    if (!row || json_array_append_new(json_object_get(env, "rows"), row))
        cli_die(1, "out of memory");
}

void cli_jprint(json_t *env)
{
    char *t = json_dumps(env, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!t)
        cli_die(1, "out of memory");
    if (fputs(t, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
        cli_die(1, "writing stdout failed");
    free(t);
    json_decref(env);
}
