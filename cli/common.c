/* Helpers shared by the ptxtune commands: errors, timing, files, and the
 * problem options (--expr --shape --dtype ...) every op command takes. */
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
        cli_die(2, "cannot open '%s'", path);
    pt_buf b;
    pt_buf_init(&b);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        pt_buf_putn(&b, tmp, n);
    if (f != stdin)
        fclose(f);
    if (len)
        *len = b.len;
    return pt_buf_take(&b);
}

/* ---- problem options shared by emit / variants / run ---- */

static const struct option problem_opts[] = {
    {"expr", required_argument, 0, 'e'},     {"shape", required_argument, 0, 's'},
    {"dtype", required_argument, 0, 'd'},    {"out-dtype", required_argument, 0, 'D'},
    {"arch", required_argument, 0, 'a'},     {"config", required_argument, 0, 'c'},
    {"json", no_argument, 0, 'j'},           {"backend", required_argument, 0, 'b'},
    {"limit", required_argument, 0, 'n'},    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

void cli_parse_problem(int argc, char **argv, cli_problem *cp, const char *usage)
{
    memset(cp, 0, sizeof *cp);
    cp->prob.dtype = PT_F32;
    cp->prob.out_dtype = PT_NDTYPES;
    cp->arch = "sm_80";
    pt_err e = {0};
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
            fputs(usage, stdout);
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
        case 'h': fputs(usage, stdout); exit(0);
        default: cli_die(2, "bad option (see --help)");
        }
    }
    if (optind < argc)
        cli_die(2, "unexpected argument '%s'", argv[optind]);
    if (cp->prob.out_dtype == PT_NDTYPES)
        cp->prob.out_dtype = cp->prob.dtype;
    if (!cp->prob.expr)
        cli_die(2, "missing --expr");
    if (!*cp->prob.expr)
        cli_die(2, "empty expression");
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

