/* Emission and compile speed per expression: median microseconds to emit
 * one kernel (IR build + print) and median milliseconds to compile it.
 * Usage: emit_bench [--arch sm_80] [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/op.h"
#include "ptx/compile.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    const char *arch = "sm_80";
    int reps = 200, creps = 5, only = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--arch") == 0)
            arch = argv[i + 1];
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--case") == 0)
            only = atoi(argv[i + 1]);
    }
    static const pt_problem cases[] = {
        PT_EW("y = softmax(x * 0.125, -1)", "x=4096x8192", PT_BF16, PT_BF16),
        PT_EW("y = layernorm(x + r, -1) * g + b", "x=4096x4096,r=4096x4096,g=4096,b=4096", PT_BF16, PT_BF16),
        PT_EW("y = x * rsqrt(mean(x*x, -1) + 1e-6) * g", "x=4096x4096,g=4096", PT_BF16, PT_BF16),
        PT_EW("y = gelu(x * w + b)", "x=4096x8192,w=8192,b=8192", PT_BF16, PT_BF16),
        PT_EW("h = x + r; y = rmsnorm(h, -1) * g", "x=4096x4096,r=4096x4096,g=4096", PT_BF16, PT_BF16),
        PT_EW("y = silu(x) * u", "x=4096x14336,u=4096x14336", PT_BF16, PT_BF16),
    };
    pt_target t;
    pt_err e = {0};
    if (pt_target_parse(arch, &t, &e)) {
        fprintf(stderr, "emit_bench: %s\n", e.msg);
        return 2;
    }
    pt_compiler *comp = NULL;
    if (pt_compiler_open(&comp, &e))
        fprintf(stderr, "emit_bench: %s (compile column skipped)\n", e.msg);
    printf("| expression | dtype | config | PTX lines | emit median (us) | compile median (ms) |\n");
    printf("|---|---|---|---|---|---|\n");
    double *v = malloc((size_t)reps * sizeof *v);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        if (only >= 0 && (size_t)only != ci)
            continue;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        if (gen_elementwise_op.prepare(a, &cases[ci], &t, &pp, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        pt_config c;
        gen_elementwise_op.defaults(pp, &t, &c);
        char *text = NULL;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            ptx_module *m;
            pt_launch l;
            if (pt_op_build(&gen_elementwise_op, pp, &t, 90, &c, &m, &l, &e)) {
                fprintf(stderr, "emit_bench: %s\n", e.msg);
                return 1;
            }
            free(text);
            text = ptx_print(m);
            ptx_module_free(m);
            v[r] = (now() - t0) * 1e6;
        }
        double emit_us = median(v, reps);
        double comp_ms = 0;
        if (comp) {
            double cv[16];
            for (int r = 0; r < creps; r++) {
                pt_resource res;
                if (pt_compile(comp, text, &t, NULL, NULL, &res, &e)) {
                    fprintf(stderr, "emit_bench: %s\n", e.msg);
                    return 1;
                }
                cv[r] = res.compile_ms;
            }
            comp_ms = median(cv, creps);
        }
        int lines = 0;
        for (const char *p = text; *p; p++)
            lines += *p == '\n';
        char cs[256];
        printf("| `%s` | %s | %s | %d | %.1f | %.2f |\n", cases[ci].expr,
               pt_dtype_get(cases[ci].dtype)->name, pt_config_str(&c, cs, sizeof cs), lines,
               emit_us, comp_ms);
        free(text);
        pt_arena_free(a);
    }
    free(v);
    if (comp)
        printf("\narch %s, compiler %s, %d emit reps, %d compile reps\n", arch,
               pt_compiler_describe(comp), reps, creps);
    pt_compiler_close(comp);
    return 0;
}
