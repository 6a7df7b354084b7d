/* Helpers shared by the ptxtune commands: errors, timing, files, and the
 * problem options (--expr --shape --dtype ...) every op command takes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "ptx/compile.h"
#include "tuner/driver.h"
void cli_die(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("ptxtune: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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

/* ---- problem options shared by emit / variants / run ---- */

/* Long-only options get codes above any character. */
enum {
    OPT_M = 256, OPT_N, OPT_K, OPT_BATCH, OPT_LAYOUT, OPT_DCOL, OPT_EPI, OPT_ALPHA, OPT_BETA,
    OPT_LDA, OPT_LDB, OPT_LDC, OPT_LDD, OPT_SCALE_A, OPT_SCALE_B,
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
    {0, 0, 0, 0},
};

/* Printed after each command's own usage by --help. */
static const char problem_help[] =
    "\nproblem options (each op reads its own; 'ptxtune ops' lists the ops):\n"
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
    "  common:      --dtype D --out-dtype D --arch sm_XX --config k=v,...\n"
    "    .npy files hold bf16 as uint16 bits and fp8 as uint8 bits.\n";

static void print_usage(const char *usage)
{
    fputs(usage, stdout);
    fputs(problem_help, stdout);
}

/* Integer option value; dies naming the option on junk. */
static int64_t opt_int(const char *name, const char *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno)
        cli_die(2, "bad value '%s' for --%s (expected an integer)", v, name);
    return x;
}

static double opt_double(const char *name, const char *v)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno)
        cli_die(2, "bad value '%s' for --%s (expected a number)", v, name);
    return x;
}

void cli_parse_problem(int argc, char **argv, cli_problem *cp, const char *usage)
{
    memset(cp, 0, sizeof *cp);
    cp->prob.dtype = PT_F32;
    cp->prob.out_dtype = PT_NDTYPES;
    cp->prob.alpha = 1.0;
    cp->arch = "sm_80";
    pt_err e = {0};
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
            print_usage(usage);
            exit(0);
        }
        cli_die(2, "missing op name (see 'ptxtune ops')");
    }
    cp->op = pt_op_find(argv[1]);
    if (!cp->op)
        cli_die(2, "unknown op '%s' (see 'ptxtune ops')", argv[1]);
    cp->prob.op = cp->op->name;
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", problem_opts, NULL)) != -1) {
        switch (c) {
        case 'e': cp->prob.expr = optarg; break;
        case 's': cp->prob.shapes = optarg; break;
        case 'd':
            if (pt_dtype_parse(optarg, &cp->prob.dtype, &e))
                cli_die(2, "%s", e.msg);
            break;
        case 'D':
            if (pt_dtype_parse(optarg, &cp->prob.out_dtype, &e))
                cli_die(2, "%s", e.msg);
            break;
        case 'a': cp->arch = optarg; break;
        case 'c': cp->config = optarg; break;
        case 'j': cp->json = true; break;
        case 'b': cp->backend = optarg; break;
        case 'n': cp->limit = strtol(optarg, NULL, 10); break;
        case OPT_M: cp->prob.m = opt_int("m", optarg); break;
        case OPT_N: cp->prob.n = opt_int("n", optarg); break;
        case OPT_K: cp->prob.k = opt_int("k", optarg); break;
        case OPT_BATCH: /* the problem's 0 means "not batched"; a given 0 is bad input */
            cp->prob.batch = opt_int("batch", optarg);
            if (cp->prob.batch < 1)
                cli_die(2, "bad value '%s' for --batch (at least 1)", optarg);
            break;
        case OPT_LAYOUT: cp->prob.layout = optarg; break;
        case OPT_DCOL: cp->prob.d_colmajor = true; break;
        case OPT_EPI: cp->prob.epilogue = optarg; break;
        case OPT_ALPHA: cp->prob.alpha = opt_double("alpha", optarg); break;
        case OPT_BETA: cp->prob.beta = opt_double("beta", optarg); break;
        case OPT_LDA: cp->prob.lda = opt_int("lda", optarg); break;
        case OPT_LDB: cp->prob.ldb = opt_int("ldb", optarg); break;
        case OPT_LDC: cp->prob.ldc = opt_int("ldc", optarg); break;
        case OPT_LDD: cp->prob.ldd = opt_int("ldd", optarg); break;
        case OPT_SCALE_A:
            cp->prob.scale_a = opt_double("scale-a", optarg);
            cp->prob.has_scale_a = true;
            break;
        case OPT_SCALE_B:
            cp->prob.scale_b = opt_double("scale-b", optarg);
            cp->prob.has_scale_b = true;
            break;
        case 'h': print_usage(usage); exit(0);
        default: cli_die(2, "bad option (see --help)");
        }
    }
    if (optind < argc)
        cli_die(2, "unexpected argument '%s'", argv[optind]);
    if (cp->prob.out_dtype == PT_NDTYPES)
        cp->prob.out_dtype = cp->prob.dtype;
    /* which options an op needs is the op's business (its prepare) */
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
}

