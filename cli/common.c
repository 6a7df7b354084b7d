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

/* ---- problem options shared by emit / variants / run ---- */

/* Long-only options get codes above any character. */
enum {
    OPT_M = 256, OPT_N, OPT_K, OPT_BATCH, OPT_LAYOUT, OPT_DCOL, OPT_EPI, OPT_ALPHA, OPT_BETA,
    OPT_LDA, OPT_LDB, OPT_LDC, OPT_LDD, OPT_SCALE_A, OPT_SCALE_B, OPT_OUT_SCALE,
};

static const struct option problem_opts[] = {
    {"expr", required_argument, 0, 'e'},     {"shape", required_argument, 0, 's'},
    {"dtype", required_argument, 0, 'd'},    {"out-dtype", required_argument, 0, 'D'},
    {"arch", required_argument, 0, 'a'},     {"config", required_argument, 0, 'c'},
    {"json", no_argument, 0, 'j'},           {"backend", required_argument, 0, 'b'},
    {"limit", required_argument, 0, 'n'},    {"help", no_argument, 0, 'h'},
    {"m", required_argument, 0, OPT_M},      {"n", required_argument, 0, OPT_N},
    {"k", required_argument, 0, OPT_K},      {"batch", required_argument, 0, OPT_BATCH},
    {"layout", required_argument, 0, OPT_LAYOUT}, {"d-colmajor", no_argument, 0, OPT_DCOL},
    {"epilogue", required_argument, 0, OPT_EPI},  {"alpha", required_argument, 0, OPT_ALPHA},
    {"beta", required_argument, 0, OPT_BETA},     {"lda", required_argument, 0, OPT_LDA},
    {"ldb", required_argument, 0, OPT_LDB},       {"ldc", required_argument, 0, OPT_LDC},
    {"ldd", required_argument, 0, OPT_LDD},       {"scale-a", required_argument, 0, OPT_SCALE_A},
    {"scale-b", required_argument, 0, OPT_SCALE_B},
    {"out-scale", required_argument, 0, OPT_OUT_SCALE},
    {0, 0, 0, 0},
};

/* Printed after each command's own usage by --help. */
static const char problem_help[] =
    "\nproblem: KEY=VALUE items as in a problem file (results/problems/README.md), the\n"
    "flags below, or both (a key given twice is refused), e.g.\n"
    "  ptxtune run gemm m=16 n=4096 k=4096 dtype=bf16 layout=nt\n"
    "  ptxtune emit elementwise 'expr=y = softmax(x, -1)' shape=x=16x4096 --dtype bf16\n"
    "problem options (each op reads its own; 'ptxtune ops' lists the ops):\n"
    "  elementwise: --expr 'y = f(x, ...)' --shape x=RxC,w=C,...\n"
    "  gemm:        --m M --n N --k K [--batch B] [--layout nn|nt|tn|tt] [--d-colmajor]\n"
    "               [--alpha A] [--beta B] [--epilogue EXPR] [--lda/--ldb/--ldc/--ldd LD]\n"
    "               [--scale-a S] [--scale-b S]\n"
    "    D = epilogue(acc), acc = A*B (times scale-a*scale-b for fp8/int8 inputs);\n"
    "    default epilogue 'alpha * acc + beta * c' (C read only when beta != 0).\n"
    "    Layout letters name A then B as in D = A*B, stored row-major: n = as written\n"
    "    (A is M x K, B is K x N), t = stored transposed (A as K x M, B as N x K).\n"
    "    D (and C) is M x N row-major, or column-major with --d-colmajor. An epilogue\n"
    "    may use acc alpha beta c, name[n] (one value per column), name[m] (per row)\n"
    "    and other names (M x N tensors stored like D), e.g.\n"
    "    --epilogue 'gelu(acc * alpha + bias[n]) + r'. Inputs f32 (SIMT) tf32 f16 bf16\n"
    "    s8 u8 (layout nt, s32 out or f16/bf16/f32 dequantised) e4m3 e5m2 (sm_89, nt).\n"
    "  common:      --dtype D --out-dtype D --out-scale S --arch sm_XX --config k=v,...\n"
    "    --out-scale S: fp8 (e4m3/e5m2) outputs hold value * S (default 1).\n"
    "    .npy files hold bf16 as uint16 bits and fp8 as uint8 bits.\n";

static void print_usage(const char *usage)
{
    fputs(usage, stdout);
    fputs(problem_help, stdout);
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
            print_usage(x && x->usage ? x->usage : usage);
            exit(0);
        }
        cli_die(2, "missing op name (see 'ptxtune ops')");
    }
    cp->op = pt_op_find(argv[1]);
    if (!cp->op)
        cli_die(2, "unknown op '%s' (see 'ptxtune ops')", argv[1]);
    /* one table: the problem's options and the command's own */
    struct option opts[96];
    size_t n = 0;
    for (; problem_opts[n].name; n++)
        opts[n] = problem_opts[n];
    for (size_t i = 0; x && x->opts && x->opts[i].name; i++) {
        if (n + 1 >= sizeof opts / sizeof opts[0])
            abort();
        opts[n++] = x->opts[i];
    }
    opts[n] = (struct option){0, 0, 0, 0};
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
        case 'e': cli_put_item(&items, "expr", optarg); break;
        case 's': cli_put_item(&items, "shape", optarg); break;
        case 'd': cli_put_item(&items, "dtype", optarg); break;
        case 'D': cli_put_item(&items, "out_dtype", optarg); break;
        case 'a': cp->arch = optarg; cp->has_arch = true; break;
        case 'c': cp->config = optarg; break;
        case 'j': cp->json = true; break;
        case 'b': cp->backend = optarg; break;
        case 'n': cp->limit = cli_opt_int("--limit", optarg, 1, INT32_MAX); break;
        case OPT_M: case OPT_N: case OPT_K: {
            const char *key = c == OPT_M ? "m" : c == OPT_N ? "n" : "k";
            char opt[8];
            snprintf(opt, sizeof opt, "--%s", key);
            cli_opt_int(opt, optarg, 0, INT64_MAX); /* 0: the op names it */
            cli_put_item(&items, key, optarg);
            break;
        }
        case OPT_BATCH: cli_opt_int("--batch", optarg, 1, INT64_MAX); cli_put_item(&items, "batch", optarg); break;
        case OPT_LAYOUT: cli_put_item(&items, "layout", optarg); break;
        case OPT_DCOL: cli_put_item(&items, "d_colmajor", "1"); break;
        case OPT_EPI: cli_put_item(&items, "epilogue", optarg); break;
        case OPT_ALPHA: cli_opt_real("--alpha", optarg, -INFINITY, INFINITY); cli_put_item(&items, "alpha", optarg); break;
        case OPT_BETA: cli_opt_real("--beta", optarg, -INFINITY, INFINITY); cli_put_item(&items, "beta", optarg); break;
        case OPT_LDA: cli_opt_int("--lda", optarg, 1, INT64_MAX); cli_put_item(&items, "lda", optarg); break;
        case OPT_LDB: cli_opt_int("--ldb", optarg, 1, INT64_MAX); cli_put_item(&items, "ldb", optarg); break;
        case OPT_LDC: cli_opt_int("--ldc", optarg, 1, INT64_MAX); cli_put_item(&items, "ldc", optarg); break;
        case OPT_LDD: cli_opt_int("--ldd", optarg, 1, INT64_MAX); cli_put_item(&items, "ldd", optarg); break;
        /* scales: the problem parser names a non-finite or negative one */
        case OPT_SCALE_A: cli_put_item(&items, "scale_a", optarg); break;
        case OPT_SCALE_B: cli_put_item(&items, "scale_b", optarg); break;
        case OPT_OUT_SCALE: cli_put_item(&items, "out_scale", optarg); break;
        case 'h': print_usage(x && x->usage ? x->usage : usage); exit(0);
        case ':': case '?': cli_opt_error(c, argv);
        default:
            if (x && x->fn) {
                x->fn(x->ctx, c, optarg);
                break;
            }
            cli_opt_error('?', argv);
        }
    }
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
            cli_die(2, "unknown compile backend '%s' (nvjitlink, ptxas)", backend);
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

