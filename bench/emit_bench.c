/* Emission and compile speed per expression and per GEMM variant: median
 * microseconds to emit one kernel (IR build + print) and median
 * milliseconds to compile it; then the whole 4096^3 bf16 TN GEMM space.
 * Usage: emit_bench [--arch sm_80] [--reps N] [--case I] [--no-space] [--attention]
 *        emit_bench --attention-space: every config of the Llama-3-8B prefill space
 *        (Sq = Sk = 4096, Hq 32, Hkv 8, d 128, causal, bf16), emit median of 20 each.
 *        --cache (with any of them): every emission builds its module with one
 *        ptx_sigcache (ptx/ir.h), as a caller emitting many configs would;
 *        without it, pt_op_build as the CLI and the tuner call it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/attention.h"
#include "gen/gemm.h"
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

/* --cache: the signature cache every emission shares (NULL: pt_op_build). */
static ptx_sigcache *bench_cache;

/* pt_op_build, with bench_cache's verdicts under --cache */
static int build(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c, ptx_module **m,
                 pt_launch *l, pt_err *e)
{
    return pt_op_build_cached(op, pp, t, 90, bench_cache, c, m, l, e);
}

/* Median emit time (us) of one config over reps, and its text. */
static int emit_time(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c,
                     int reps, double *v, double *us, char **text)
{
    pt_err e = {0};
    *text = NULL;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        ptx_module *m;
        pt_launch l;
        if (build(op, pp, t, c, &m, &l, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        free(*text);
        *text = ptx_print(m);
        ptx_module_free(m);
        v[r] = (now() - t0) * 1e6;
    }
    *us = median(v, reps);
    return 0;
}

static double compile_ms(const pt_compiler *comp, const char *text, const pt_target *t, int creps)
{
    if (!comp)
        return 0;
    double cv[16];
    pt_err e = {0};
    for (int r = 0; r < creps && r < 16; r++) {
        pt_resource res;
        if (pt_compile(comp, text, t, NULL, NULL, &res, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return -1;
        }
        cv[r] = res.compile_ms;
    }
    return median(cv, creps < 16 ? creps : 16);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Representative GEMM variants: one row each. */
static int gemm_rows(const pt_target *t, const pt_compiler *comp, int reps, int creps)
{
    static const struct {
        pt_problem p;
        const char *epi, *config;
    } rows[] = {
        {PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16), NULL, ""},
        {PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16), NULL, "bm=256,bn=128,bk=32,wm=64,wn=64,stages=3"},
        {PT_GEMM(4096, 4096, 4096, "nt", PT_F16, PT_F16), NULL, "bm=128,bn=128,bk=64,wm=64,wn=32,stages=4"},
        {PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16), "gelu(acc * alpha + bias[n]) + r", ""},
        {PT_GEMM(4096, 4096, 4096, "nn", PT_TF32, PT_F32), NULL, ""},
        {PT_GEMM(4096, 4096, 4096, "nt", PT_S8, PT_S32), NULL, ""},
        {PT_GEMM(4096, 4096, 4096, "nn", PT_F32, PT_F32), NULL, ""},
        {PT_GEMM(250, 130, 4096, "nn", PT_BF16, PT_BF16), NULL, "bm=64,bn=64,bk=32,wm=32,wn=32,stages=4,splitk=4"},
        {PT_GEMM(17, 33, 65, "tt", PT_F16, PT_F16), NULL, ""},
    };
    printf("\n| GEMM problem | config | PTX lines | emit median (us) | compile median (ms) |\n");
    printf("|---|---|---|---|---|\n");
    double *v = malloc((size_t)reps * sizeof *v);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        pt_problem p = rows[i].p;
        p.epilogue = rows[i].epi;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        if (gen_gemm_op.prepare(a, &p, t, &pp, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        pt_space s;
        pt_config c;
        gen_gemm_op.space(pp, t, &s);
        gen_gemm_op.defaults(pp, t, &c);
        if (pt_config_parse(&s, rows[i].config, &c, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        double us;
        char *text;
        if (emit_time(&gen_gemm_op, pp, t, &c, reps, v, &us, &text))
            return 1;
        double ms = compile_ms(comp, text, t, creps);
        char cs[256];
        printf("| %lldx%lldx%lld %s %s%s%s%s | %s | %d | %.1f | %.2f |\n", (long long)p.m,
               (long long)p.n, (long long)p.k, p.layout, pt_dtype_get(p.dtype)->name,
               p.epilogue ? " `" : "", p.epilogue ? p.epilogue : "", p.epilogue ? "`" : "",
               pt_config_str(&c, cs, sizeof cs),
               count_lines(text), us, ms);
        free(text);
        pt_arena_free(a);
    }
    free(v);
    return 0;
}

/* Thread CPU time (seconds): what this thread ran, whatever else shares
 * the cores (the wall clock counts the other sessions' time slices too). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Median wall and thread-CPU microseconds to emit (build + checks + print)
 * one config over reps, and its text. */
static int emit_time2(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c, int reps,
                      double *v, double *w, double *us, double *cpu_us, char **text)
{
    pt_err e = {0};
    *text = NULL;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), c0 = cpu_now();
        ptx_module *m;
        pt_launch l;
        if (build(op, pp, t, c, &m, &l, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        free(*text);
        *text = ptx_print(m);
        ptx_module_free(m);
        w[r] = (cpu_now() - c0) * 1e6;
        v[r] = (now() - t0) * 1e6;
    }
    *us = median(v, reps);
    *cpu_us = median(w, reps);
    return 0;
}

/* The 1-minute load average (Linux /proc/loadavg; -1 elsewhere): wall
 * medians on a shared machine mean little without it. */
static double load1(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* Attention prefill (impl=fa2, gen/attention_prefill.c): the Llama-3-8B
 * shape (Hq 32, Hkv 8, d 128, causal, bf16) and head dims 64 / 256, packed
 * GQA at Sq = 77, the op's default config unless given; first the default
 * 4096^3 bf16 tn GEMM as the same run's calibration (its calm figure is
 * in results/cpu/emit.md). Wall and thread-CPU medians. */
static int attention_rows(const pt_target *t, const pt_compiler *comp, int reps, int creps)
{
    static const struct {
        int64_t sq, d;
        bool causal;
        const char *config;
    } rows[] = {
        {4096, 128, true, ""},
        {4096, 128, false, ""},
        {4096, 128, true, "bm=64,bn=128,warps=4,q_in_regs=1"},
        {4096, 64, true, ""},
        {4096, 256, true, ""},
        {77, 128, true, "pack_gqa=1"},
    };
    double *v = malloc((size_t)reps * sizeof *v), *w = malloc((size_t)reps * sizeof *w);
    double load0 = load1();
    {
        pt_problem p = PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        pt_config c;
        double us, cus;
        char *text;
        if (gen_gemm_op.prepare(a, &p, t, &pp, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        gen_gemm_op.defaults(pp, t, &c);
        if (emit_time2(&gen_gemm_op, pp, t, &c, reps, v, w, &us, &cus, &text))
            return 1;
        printf("\ncalibration: the default 4096x4096x4096 tn bf16 GEMM, %d PTX lines: emit median %.1f us wall, "
               "%.1f us thread CPU\n", count_lines(text), us, cus);
        free(text);
        pt_arena_free(a);
    }
    printf("\n| attention prefill problem | config | PTX lines | emit median (us) | emit CPU median (us) | compile "
           "median (ms) |\n");
    printf("|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        pt_problem p;
        pt_schema_defaults(&gen_attention_op, &p);
        p.op = "attention";
        p.dtype = PT_BF16;
        p.batch = 1;
        p.heads_q = 32;
        p.heads_kv = 8;
        p.seqlen_q = rows[i].sq;
        p.seqlen_k = 4096;
        p.head_dim = p.head_dim_v = rows[i].d;
        p.causal = rows[i].causal;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        if (gen_attention_op.prepare(a, &p, t, &pp, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        pt_space s;
        pt_config c;
        gen_attention_op.space(pp, t, &s);
        gen_attention_op.defaults(pp, t, &c);
        if (pt_config_parse(&s, rows[i].config, &c, &e)) {
            fprintf(stderr, "emit_bench: %s\n", e.msg);
            return 1;
        }
        double us, cus;
        char *text;
        if (emit_time2(&gen_attention_op, pp, t, &c, reps, v, w, &us, &cus, &text))
            return 1;
        double ms = compile_ms(comp, text, t, creps);
        char cs[256];
        printf("| Sq=%lld Sk=4096 Hq 32 Hkv 8 d %lld%s bf16 | %s | %d | %.1f | %.1f | %.2f |\n", (long long)rows[i].sq,
               (long long)rows[i].d, rows[i].causal ? " causal" : "", pt_config_str(&c, cs, sizeof cs),
               count_lines(text), us, cus, ms);
        free(text);
        pt_arena_free(a);
    }
    printf("\nload average (1 min): %.2f before the rows, %.2f after%s\n", load0, load1(),
           bench_cache ? "; emissions with one ptx_sigcache (--cache)" : "");
    free(v);
    free(w);
    return 0;
}

/* Every config of problem p's space that check accepts: emit (median of 20
 * reps each) and, with comp, compile once; prints one line: PTX lines, the
 * emit spread, how many are at most bound_us, the slowest config, the
 * compile spread, and the load average around the sweep. */
static int space_sweep(const pt_op *op, const pt_problem *p, const char *label, const pt_target *t,
                       const pt_compiler *comp, double bound_us)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    pt_err e = {0};
    if (op->prepare(a, p, t, &pp, &e)) {
        fprintf(stderr, "emit_bench: %s\n", e.msg);
        return 1;
    }
    double load0 = load1();
    pt_space s;
    op->space(pp, t, &s);
    int64_t n = pt_space_size(&s);
    double *eu = malloc((size_t)n * sizeof *eu), *cm = malloc((size_t)n * sizeof *cm), v[20], worst_us = -1;
    int k = 0, under = 0, lmin = 1 << 30, lmax = 0, worst_lines = 0;
    char worst[256] = "";
    for (int64_t i = 0; i < n; i++) {
        pt_config c;
        pt_space_config(&s, i, &c);
        pt_err ce = {0};
        if (op->check(pp, t, &c, &ce))
            continue;
        char *text;
        if (emit_time(op, pp, t, &c, 20, v, &eu[k], &text))
            return 1;
        cm[k] = comp ? compile_ms(comp, text, t, 1) : 0;
        int ln = count_lines(text);
        lmin = ln < lmin ? ln : lmin;
        lmax = ln > lmax ? ln : lmax;
        under += eu[k] <= bound_us;
        if (eu[k] > worst_us) {
            worst_us = eu[k];
            pt_config_str(&c, worst, sizeof worst);
            worst_lines = ln;
        }
        free(text);
        k++;
    }
    double load_end = load1();
    qsort(eu, (size_t)k, sizeof *eu, cmp_double);
    qsort(cm, (size_t)k, sizeof *cm, cmp_double);
    char tn[16], cs[160] = "";
    if (comp && k)
        snprintf(cs, sizeof cs, "; compile min %.1f / median %.1f / max %.1f ms", cm[0], cm[k / 2], cm[k - 1]);
    printf("%s space on %s%s: %d configs, PTX %d..%d lines; emit (median of 20 each) min %.1f / median %.1f / p90 "
           "%.1f / max %.1f us, %d of %d at most %.0f us; slowest: %s (%d lines)%s\nload average (1 min): %.2f "
           "before, %.2f after\n",
           label, pt_target_name(t, tn, sizeof tn), bench_cache ? " (--cache)" : "", k, k ? lmin : 0, lmax,
           k ? eu[0] : 0, k ? eu[k / 2] : 0, k ? eu[k * 9 / 10] : 0, k ? eu[k - 1] : 0, under, k, bound_us, worst,
           worst_lines, cs, load0, load_end);
    free(eu);
    free(cm);
    pt_arena_free(a);
    return 0;
}

/* The 4096^3 bf16 TN GEMM space, compiled too (bound: 200 us). */
static int gemm_space(const pt_target *t, const pt_compiler *comp)
{
    pt_problem p = PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16);
    printf("\n");
    return space_sweep(&gen_gemm_op, &p, "GEMM 4096^3 bf16 tn", t, comp, 200.0);
}

/* The Llama-3-8B prefill space (the attention issue's acceptance problem),
 * no compiles (bound: 300 us). */
static int attention_space(const pt_target *t)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.dtype = PT_BF16;
    p.batch = 1;
    p.heads_q = 32;
    p.heads_kv = 8;
    p.seqlen_q = p.seqlen_k = 4096;
    p.head_dim = p.head_dim_v = 128;
    p.causal = 1;
    return space_sweep(&gen_attention_op, &p, "attention prefill (Sq=Sk=4096 Hq 32 Hkv 8 d 128 causal bf16)", t, NULL,
                       300.0);
}

int main(int argc, char **argv)
{
    const char *arch = "sm_80";
    int reps = 200, creps = 5, only = -1;
    bool space = true, attn_only = false, attn_space = false;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--cache") == 0) {
            if (!bench_cache && !(bench_cache = ptx_sigcache_new()))
                return 1;
            memmove(&argv[i], &argv[i + 1], (size_t)(argc - i - 1) * sizeof *argv);
            argc--;
            i--;
        }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--no-space") == 0 || strcmp(argv[i], "--attention") == 0 ||
            strcmp(argv[i], "--attention-space") == 0) {
            if (argv[i][11] == '-')
                attn_space = true;
            else if (argv[i][2] == 'a')
                attn_only = true;
            else
                space = false;
            memmove(&argv[i], &argv[i + 1], (size_t)(argc - i - 1) * sizeof *argv);
            argc--;
            i--;
        }
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
    if (attn_space) {
        pt_compiler_close(comp);
        return attention_space(&t);
    }
    if (attn_only) { /* --attention: the attention rows alone */
        int rc = attention_rows(&t, comp, reps, creps);
        pt_compiler_close(comp);
        return rc;
    }
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
            if (build(&gen_elementwise_op, pp, &t, &c, &m, &l, &e)) {
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
    int rc = gemm_rows(&t, comp, reps, creps);
    if (!rc)
        rc = attention_rows(&t, comp, reps, creps);
    if (!rc && space)
        rc = gemm_space(&t, comp);
    pt_compiler_close(comp);
    ptx_sigcache_free(bench_cache);
    return rc;
}
