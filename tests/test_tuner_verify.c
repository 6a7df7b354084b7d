/* Verification on the mock and the emulator backends: the comparison
 * metric, the sampled reference, poison / guard / input / value findings,
 * failure classes (fault, resource limit), the exec hook, and .npy files. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gen/gemm.h"
#include "tuner/exec.h"
#include "tuner/npy.h"
#include "tuner/verify.h"

#include "test_util.h"

typedef struct fixture {
    pt_arena *a;
    pt_prepared *pp;
    tuner_dev *d;
    tuner_io *io;
    tuner_kernel *k;
} fixture;

static fixture fx_new(const char *backend, pt_problem pb)
{
    fixture f = {0};
    pt_target t = {80, false, false};
    pt_err e = {0};
    f.a = pt_arena_new();
    cr_assert_eq(gen_elementwise_op.prepare(f.a, &pb, &t, &f.pp, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_dev_open(backend, NULL, &f.d, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_io_new(&gen_elementwise_op, f.pp, &f.io, &e), PT_OK, "%s", e.msg);
    tuner_io_random(f.io, 1, 0, 0);
    return f;
}

static void fx_free(fixture *f)
{
    tuner_unload(f->d, f->k);
    tuner_io_free(f->d, f->io);
    tuner_dev_close(f->d);
    pt_arena_free(f->a);
}

static int fx_load(fixture *f, const char *ptx, pt_err *e)
{
    tuner_unload(f->d, f->k);
    f->k = NULL;
    tuner_image img = {ptx, strlen(ptx), NULL, 0, "k", &gen_elementwise_op, f->pp};
    return tuner_load(f->d, &img, &f->k, e);
}

/* y = x * 2 + 1 over out, in */
static const pt_launch ew_launch = {.grid = {1, 1, 1}, .block = {192, 1, 1}, .nargs = 2,
                                    .args = {{PT_ARG_OUTPUT, 0, 0, 0}, {PT_ARG_INPUT, 0, 0, 0}},
                                    .entry = "k"};

/* ---- metric ---- */

Test(tuner_verify, metric_and_tolerances)
{
    cr_expect_float_eq(tuner_tolerance(PT_F32), 1e-5, 0);
    cr_expect_float_eq(tuner_tolerance(PT_BF16), 1e-2, 0);
    cr_expect_float_eq(tuner_tolerance(PT_TF32), 5e-4, 0);
    cr_expect_float_eq(tuner_tolerance(PT_E4M3), 1.0, 0);
    tuner_verify_result r = {0};
    double ref[4] = {100, 1, 1e-9, -50}, got[4] = {100.0005, 1.0001, 2e-9, -50};
    tuner_compare("y", PT_F32, got, ref, NULL, 4, &r);
    cr_expect_eq(r.checked, 4);
    /* 100.0005: 5e-6 relative, fine; 1.0001: 1e-4 against max(1, 1e-2*100) = 1 -> bad;
     * 2e-9 vs 1e-9: 1e-9 / (1e-2 * 100) = 1e-9, fine (judged at the tensor's scale) */
    cr_expect_eq(r.bad, 1);
    cr_expect(strstr(r.worst, "y[1]"), "%s", r.worst);
    cr_expect(fabs(r.max_err - 1e-4) < 1e-9, "%g", r.max_err);
    memset(&r, 0, sizeof r);
    double rn[3] = {NAN, 1, 2}, gn[3] = {NAN, NAN, 2};
    tuner_compare("z", PT_F16, gn, rn, NULL, 3, &r);
    cr_expect_eq(r.bad, 1, "NaN against a number is wrong; NaN against NaN is not");
    cr_expect(isinf(r.max_err));
    memset(&r, 0, sizeof r);
    /* fp8: a saturated reference counts as the format's max; error in ulps */
    double rf[2] = {1000, 1.0}, gf[2] = {448, 1.125};
    tuner_compare("q", PT_E4M3, gf, rf, NULL, 2, &r);
    cr_expect_eq(r.bad, 0, "max err %g at %s", r.max_err, r.worst);
    cr_expect_float_eq(r.max_err, 1.0, 1e-12);
}

/* ---- the sampled reference equals the full one ---- */

Test(tuner_verify, reference_at_matches_reference)
{
    static const pt_problem cases[] = {
        PT_EW("y = softmax(x * 0.125, -1)", "x=16x64", PT_BF16, PT_BF16),
        PT_EW("y = layernorm(x + r, -1) * g + b", "x=8x48,r=8x48,g=48,b=48", PT_F16, PT_F16),
        PT_EW("y = silu(x) * u + where(b > 0, b, 0.5 * b)", "x=4x8x96,u=4x8x96,b=8x1", PT_F32, PT_F32),
        PT_EW("m = mean(x, -1); y = x - m", "x=12x40", PT_F32, PT_F32),
        PT_EW("y = gelu(x * w + b)", "x=32x64,w=64,b=64", PT_F32, PT_E4M3),
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        pt_target t = {90, false, false};
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        cr_assert_eq(gen_elementwise_op.prepare(a, &cases[ci], &t, &pp, &e), PT_OK, "%s", e.msg);
        tuner_io *io;
        cr_assert_eq(tuner_io_new(&gen_elementwise_op, pp, &io, &e), PT_OK);
        tuner_io_random(io, 11, 0, 0);
        pt_tensor ref[TUNER_MAX_TENSORS];
        for (int o = 0; o < io->nout; o++) {
            ref[o] = io->out[o];
            ref[o].data = calloc((size_t)ref[o].numel, sizeof(double));
        }
        cr_assert_eq(gen_elementwise_op.reference(pp, io->in, ref, &e), PT_OK, "%s", e.msg);
        for (int o = 0; o < io->nout; o++) {
            int64_t n = ref[o].numel;
            int64_t *idx = malloc((size_t)n * sizeof *idx);
            double *v = malloc((size_t)n * sizeof *v);
            for (int64_t j = 0; j < n; j++)
                idx[j] = j;
            cr_assert_eq(gen_elementwise_op.reference_at(pp, io->in, o, idx, (int)n, v, &e), PT_OK,
                         "%s", e.msg);
            for (int64_t j = 0; j < n; j++)
                cr_assert(v[j] == ref[o].data[j] || (isnan(v[j]) && isnan(ref[o].data[j])),
                          "%s output %d [%lld]: %.17g vs %.17g", cases[ci].expr, o, (long long)j,
                          v[j], ref[o].data[j]);
            int64_t bad = n;
            cr_expect_eq(gen_elementwise_op.reference_at(pp, io->in, o, &bad, 1, v, &e), PT_ERANGE);
            free(idx);
            free(v);
            free(ref[o].data);
        }
        tuner_io_free(NULL, io);
        pt_arena_free(a);
    }
}

/* ---- the mock: every planted failure is found and classed ---- */

Test(tuner_verify, mock_findings)
{
    fixture f = fx_new("mock", (pt_problem)PT_EW("y = x * 2 + 1", "x=4x40", PT_F32, PT_F32));
    static const struct {
        const char *ptx;
        int rc;
        tuner_outcome cls;
        const char *what, *msg;
    } cases[] = {
        {"// mock:\n", PT_OK, TUNER_OK, "", ""},
        {"// mock: wrong\n", PT_ERANGE, TUNER_WRONG_ANSWER, "values", "1 of 160 elements over tolerance"},
        {"// mock: past\n", PT_ERANGE, TUNER_WRONG_ANSWER, "guard", "guard zone after output 'y'"},
        {"// mock: oor\n", PT_ERANGE, TUNER_RESOURCE_LIMIT, "", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
        {"// mock: launch_error\n", PT_EIO, TUNER_LAUNCH_ERROR, "", "cuLaunchKernelEx"},
        {"// mock:\n", PT_OK, TUNER_OK, "", ""}, /* nothing lingers from the failures */
        {"// mock: fault\n", PT_EIO, TUNER_FAULT, "", "CUDA_ERROR_ILLEGAL_ADDRESS"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_err e = {0};
        cr_assert_eq(fx_load(&f, cases[i].ptx, &e), PT_OK, "%s", e.msg);
        tuner_verify_result r;
        int rc = tuner_verify(f.d, f.k, &ew_launch, f.io, NULL, &r, &e);
        cr_expect_eq(rc, cases[i].rc, "%s: rc %d (%s)", cases[i].ptx, rc, e.msg);
        cr_expect_eq(r.cls, cases[i].cls, "%s: class %s", cases[i].ptx, tuner_outcome_name(r.cls));
        cr_expect_str_eq(r.what, cases[i].what, "%s", cases[i].ptx);
        cr_expect(strstr(e.msg, cases[i].msg), "%s: '%s' lacks '%s'", cases[i].ptx, e.msg,
                  cases[i].msg);
        if (rc == PT_OK)
            cr_expect_eq(r.checked, 160);
    }
    /* the fault is sticky: the device refuses everything after it */
    cr_expect(tuner_dev_sticky(f.d));
    tuner_ptr p;
    pt_err e = {0};
    cr_expect_eq(tuner_alloc(f.d, 16, &p, &e), PT_EIO);
    cr_expect(strstr(e.msg, "unusable after an earlier fault"), "%s", e.msg);
    cr_expect_eq(tuner_dev_failure(f.d), TUNER_FAULT);
    fx_free(&f);
}

Test(tuner_verify, large_problems_are_sampled)
{
    /* 2^21 outputs: over the 2^20 full-compare limit */
    fixture f = fx_new("mock", (pt_problem)PT_EW("y = softmax(x, -1)", "x=2048x1024", PT_F16, PT_F16));
    pt_err e = {0};
    cr_assert_eq(fx_load(&f, "// mock:\n", &e), PT_OK);
    pt_launch l = ew_launch;
    tuner_verify_result r;
    cr_assert_eq(tuner_verify(f.d, f.k, &l, f.io, NULL, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(r.sampled);
    cr_expect(r.checked >= 4096 && r.checked <= 4098, "checked %lld", (long long)r.checked);
    tuner_verify_opts o = {.samples = 10000, .seed = 3};
    cr_assert_eq(tuner_verify(f.d, f.k, &l, f.io, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(r.checked >= 10000, "checked %lld", (long long)r.checked);
    o = (tuner_verify_opts){.full_limit = (int64_t)1 << 22};
    cr_assert_eq(tuner_verify(f.d, f.k, &l, f.io, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(!r.sampled);
    cr_expect_eq(r.checked, (int64_t)1 << 21);
    fx_free(&f);
}

/* ---- the emulator: hand-written kernels with real bugs ---- */

/* y[i] = x[i] * 2 + C for i < N; EXTRA is one more instruction. */
static char *kernel_text(const char *n, const char *c, const char *extra)
{
    char *s = malloc(4096);
    snprintf(s, 4096,
             ".version 7.0\n.target sm_80\n.address_size 64\n\n"
             ".visible .entry k(\n\t.param .u64 py,\n\t.param .u64 px\n)\n{\n"
             "\t.reg .pred %%p<2>;\n\t.reg .b32 %%r<4>;\n\t.reg .f32 %%f<3>;\n\t.reg .b64 %%rd<6>;\n"
             "\tld.param.u64 %%rd0, [py];\n\tld.param.u64 %%rd1, [px];\n"
             "\tcvta.to.global.u64 %%rd0, %%rd0;\n\tcvta.to.global.u64 %%rd1, %%rd1;\n"
             "\tmov.u32 %%r0, %%tid.x;\n\tmov.u32 %%r1, %%ctaid.x;\n\tmov.u32 %%r2, %%ntid.x;\n"
             "\tmad.lo.u32 %%r3, %%r1, %%r2, %%r0;\n\tsetp.ge.u32 %%p0, %%r3, %s;\n"
             "\t@%%p0 bra DONE;\n\tmul.wide.u32 %%rd2, %%r3, 4;\n\tadd.s64 %%rd3, %%rd1, %%rd2;\n"
             "\tld.global.f32 %%f0, [%%rd3];\n\tfma.rn.f32 %%f1, %%f0, 0f40000000, %s;\n"
             "\tadd.s64 %%rd4, %%rd0, %%rd2;\n\tst.global.f32 [%%rd4], %%f1;\n%s"
             "DONE:\n\tret;\n}\n",
             n, c, extra);
    return s;
}

Test(tuner_verify, emulator_findings)
{
    fixture f = fx_new("emu", (pt_problem)PT_EW("y = x * 2 + 1", "x=4x40", PT_F32, PT_F32));
    static const struct {
        const char *n, *c, *extra;
        int rc;
        tuner_outcome cls;
        const char *what, *msg;
    } cases[] = {
        {"160", "0f3F800000", "", PT_OK, TUNER_OK, "", ""},
        {"159", "0f3F800000", "", PT_ERANGE, TUNER_WRONG_ANSWER, "unwritten", "1 elements of output 'y' never written (first: 159)"},
        {"160", "0f3F810000", "", PT_ERANGE, TUNER_WRONG_ANSWER, "values", "over tolerance 1e-05"},
        {"160", "0f3F800000", "\tst.global.f32 [%rd3], %f1;\n", PT_ERANGE, TUNER_WRONG_ANSWER, "input", "modified input 'x'"},
        {"161", "0f3F800000", "", PT_EEMU, TUNER_FAULT, "", "out-of-bounds"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = kernel_text(cases[i].n, cases[i].c, cases[i].extra);
        pt_err e = {0};
        cr_assert_eq(fx_load(&f, text, &e), PT_OK, "%s\n%s", e.msg, text);
        tuner_verify_result r;
        int rc = tuner_verify(f.d, f.k, &ew_launch, f.io, NULL, &r, &e);
        cr_expect_eq(rc, cases[i].rc, "case %zu: rc %d (%s)", i, rc, e.msg);
        cr_expect_eq(r.cls, cases[i].cls, "case %zu: class %s", i, tuner_outcome_name(r.cls));
        cr_expect_str_eq(r.what, cases[i].what, "case %zu", i);
        cr_expect(strstr(e.msg, cases[i].msg), "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].msg);
        free(text);
    }
    pt_err e = {0};
    cr_expect_eq(fx_load(&f, ".version 7.0\n.target sm_80\nnonsense\n", &e), PT_EPARSE);
    cr_expect_eq(tuner_dev_failure(f.d), TUNER_COMPILE_ERROR);
    fx_free(&f);
}

/* The generator's own kernel verified on the emulator (the text is parsed). */
Test(tuner_verify, emitted_kernel_on_the_emulator)
{
    fixture f = fx_new("emu", (pt_problem)PT_EW("y = layernorm(x, -1) * g", "x=8x128,g=128", PT_BF16, PT_BF16));
    pt_target t = {80, false, false};
    pt_config c;
    gen_elementwise_op.defaults(f.pp, &t, &c);
    ptx_module *m;
    pt_launch l;
    pt_err e = {0};
    cr_assert_eq(pt_op_build(&gen_elementwise_op, f.pp, &t, 0, &c, &m, &l, &e), PT_OK, "%s", e.msg);
    char *text = ptx_print(m);
    tuner_image img = {text, strlen(text), NULL, 0, l.entry, NULL, NULL};
    cr_assert_eq(tuner_load(f.d, &img, &f.k, &e), PT_OK, "%s", e.msg);
    tuner_verify_result r;
    cr_expect_eq(tuner_verify(f.d, f.k, &l, f.io, NULL, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.checked, 8 * 128);
    cr_expect(r.max_err < 1e-2, "%g", r.max_err);
    uint64_t lanes = 0;
    double secs = -1;
    cr_expect_eq(tuner_emu_last_stats(f.d, &lanes, &secs), PT_OK);
    cr_expect(lanes > 8 * 128 && secs >= 0, "%llu lane instructions", (unsigned long long)lanes);
    free(text);
    ptx_module_free(m);
    fx_free(&f);
}

Test(tuner_verify, exec_hook_on_the_emulator)
{
    tuner_dev *d;
    pt_err e = {0};
    cr_assert_eq(tuner_dev_open("emu", NULL, &d, &e), PT_OK);
    char *text = kernel_text("100", "0f3F800000", "");
    float x[100], y[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)i * 0.5f;
    tuner_exec_arg args[] = {{.kind = TUNER_EXEC_OUT, .bytes = sizeof y, .result = y},
                             {.kind = TUNER_EXEC_IN, .data = x, .bytes = sizeof x}};
    unsigned g[3] = {1, 1, 1}, b[3] = {128, 1, 1};
    cr_assert_eq(tuner_exec(d, text, strlen(text), "k", g, b, 0, 2, args, &e), PT_OK, "%s", e.msg);
    for (int i = 0; i < 100; i++)
        cr_assert_float_eq(y[i], x[i] * 2 + 1, 0);
    free(text);
    text = kernel_text("101", "0f3F800000", "");
    cr_expect_eq(tuner_exec(d, text, strlen(text), "k", g, b, 0, 2, args, &e), PT_EEMU);
    cr_expect(strstr(e.msg, "out-of-bounds"), "%s", e.msg);
    free(text);
    tuner_dev_close(d);
}

/* ---- the error model: accumulation bounds (issue 9 item 7) ---- */

/* Mock "kernels" for a packed nt GEMM (A M x K row-major, B N x K, D M x N
 * row-major, alpha 1, no C): the float64 reference, then one planted
 * behaviour. The mock backend runs tuner_image.op's reference as the
 * kernel; the verifier compares with the real op's. */
typedef enum fk_mode {
    FK_EXACT,       /* the float64 reference */
    FK_F32_SEQ,     /* a right kernel: f32 fma over k in order, rounded to D's dtype */
    FK_AT,          /* d[at] = reference + delta */
    FK_DROP_ONE,    /* d[at] lacks its largest product */
    FK_DROP_TAIL,   /* every element lacks its last product */
    FK_SWAP_ROWS,   /* rows 0 and 1 of D swapped */
} fk_mode;
typedef struct fk_state {
    fk_mode mode;
    int64_t m, n, k, at;
    double delta;
} fk_state;
static fk_state fk;

static int fake_gemm(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    int rc = gen_gemm_op.reference(pp, in, out, e);
    if (rc)
        return rc;
    const double *A = in[0].data, *B = in[1].data;
    double *D = out[0].data;
    int64_t M = fk.m, N = fk.n, K = fk.k;
    switch (fk.mode) {
    case FK_EXACT: break;
    case FK_F32_SEQ:
        for (int64_t i = 0; i < M * N; i++) {
            float s = 0;
            for (int64_t k = 0; k < K; k++)
                s = fmaf((float)A[i / N * K + k], (float)B[i % N * K + k], s);
            D[i] = pt_dtype_round(out[0].dtype, (double)s);
        }
        break;
    case FK_AT: D[fk.at] += fk.delta; break;
    case FK_DROP_ONE: {
        int64_t kk = 0;
        for (int64_t k = 1; k < K; k++)
            if (fabs(A[fk.at / N * K + k] * B[fk.at % N * K + k]) >
                fabs(A[fk.at / N * K + kk] * B[fk.at % N * K + kk]))
                kk = k;
        D[fk.at] -= A[fk.at / N * K + kk] * B[fk.at % N * K + kk];
        break;
    }
    case FK_DROP_TAIL:
        for (int64_t i = 0; i < M * N; i++)
            D[i] -= A[i / N * K + K - 1] * B[i % N * K + K - 1];
        break;
    case FK_SWAP_ROWS:
        for (int64_t j = 0; j < N; j++) {
            double t = D[j];
            D[j] = D[N + j];
            D[N + j] = t;
        }
        break;
    }
    return PT_OK;
}

typedef struct gfix {
    pt_arena *a;
    pt_prepared *pp;
    tuner_dev *d;
    tuner_io *io;
    tuner_kernel *k;
    pt_op fake;
    pt_launch l;
} gfix;

/* An nt GEMM on the mock, inputs uniform in [lo, hi) from seed 5. */
static void gfix_new(gfix *g, int64_t m, int64_t n, int64_t k, pt_dtype dt, pt_dtype odt, double lo,
                     double hi)
{
    memset(g, 0, sizeof *g);
    pt_target t = {80, false, false};
    pt_err e = {0};
    pt_problem p = PT_GEMM(m, n, k, "nt", dt, odt);
    g->a = pt_arena_new();
    cr_assert_eq(gen_gemm_op.prepare(g->a, &p, &t, &g->pp, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_dev_open("mock", NULL, &g->d, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_io_new(&gen_gemm_op, g->pp, &g->io, &e), PT_OK, "%s", e.msg);
    tuner_io_random(g->io, 5, lo, hi);
    g->fake = gen_gemm_op;
    g->fake.reference = fake_gemm;
    tuner_image img = {"// mock:\n", 9, NULL, 0, "k", &g->fake, g->pp};
    cr_assert_eq(tuner_load(g->d, &img, &g->k, &e), PT_OK, "%s", e.msg);
    g->l = (pt_launch){.grid = {1, 1, 1}, .block = {32, 1, 1}, .nargs = 3,
                       .args = {{PT_ARG_OUTPUT, 0, 0, 0}, {PT_ARG_INPUT, 0, 0, 0}, {PT_ARG_INPUT, 1, 0, 0}},
                       .entry = "k"};
    fk = (fk_state){FK_EXACT, m, n, k, 0, 0};
}

static void gfix_free(gfix *g)
{
    tuner_unload(g->d, g->k);
    tuner_io_free(g->d, g->io);
    tuner_dev_close(g->d);
    pt_arena_free(g->a);
}

static int gfix_verify(gfix *g, fk_mode mode, tuner_verify_result *r, pt_err *e)
{
    fk.mode = mode;
    return tuner_verify(g->d, g->k, &g->l, g->io, NULL, r, e);
}

/* The verifier's bound at every element, from the documented model:
 * tol * max(|w|, 1e-2 * max|w|) + TUNER_ACCUM_C * sqrt(len) * u * mag. */
static void gfix_bounds(gfix *g, double *w, double *bound)
{
    pt_err e = {0};
    pt_tensor ref = g->io->out[0];
    int64_t n = ref.numel;
    ref.data = w;
    cr_assert_eq(gen_gemm_op.reference(g->pp, g->io->in, &ref, &e), PT_OK, "%s", e.msg);
    double *mag = malloc((size_t)n * sizeof *mag);
    pt_accum acc;
    cr_assert_eq(gen_gemm_op.magnitude(g->pp, g->io->in, 0, NULL, n, mag, &acc, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(acc.len, fk.k);
    double s = 0, gamma = tuner_accum_gamma(&acc), tol = tuner_tolerance(ref.dtype);
    cr_expect_float_eq(gamma, TUNER_ACCUM_C * sqrt((double)fk.k) * tuner_unit_roundoff(acc.dtype), 1e-30);
    for (int64_t i = 0; i < n; i++)
        s = fmax(s, fabs(w[i]));
    for (int64_t i = 0; i < n; i++)
        bound[i] = tol * fmax(fabs(w[i]), 1e-2 * s) + gamma * mag[i];
    free(mag);
}

/* The ops' magnitudes follow the documented rules (gen/expr_mag.h, gemm):
 * a row sum's is sum |x|, a mean's mean |x| (passed on to x - mean), a
 * softmax's is the value itself, a GEMM's sum |a||b| through the
 * epilogue's slope; sampled indices give the full pass's values. */
Test(tuner_verify, magnitudes_follow_the_rules)
{
    pt_target t = {80, false, false};
    pt_err e = {0};
    pt_arena *a = pt_arena_new();
    static const char *const exprs[] = {"y = sum(x, -1)", "m = mean(x, -1); y = x - m",
                                        "y = softmax(x, -1)", "y = x * 2"};
    for (size_t c = 0; c < sizeof exprs / sizeof exprs[0]; c++) {
        pt_problem p = PT_EW(exprs[c], "x=3x50", PT_F32, PT_F32);
        pt_prepared *pp;
        cr_assert_eq(gen_elementwise_op.prepare(a, &p, &t, &pp, &e), PT_OK, "%s", e.msg);
        tuner_io *io;
        cr_assert_eq(tuner_io_new(&gen_elementwise_op, pp, &io, &e), PT_OK);
        tuner_io_random(io, 3, 0, 0);
        const double *x = io->in[0].data;
        for (int o = 0; o < io->nout; o++) {
            int64_t n = io->out[o].numel;
            double *mag = calloc((size_t)n, sizeof *mag), *ref = calloc((size_t)n, sizeof *ref);
            pt_tensor rt[TUNER_MAX_TENSORS];
            for (int q = 0; q < io->nout; q++) {
                rt[q] = io->out[q];
                rt[q].data = q == o ? ref : calloc((size_t)rt[q].numel, sizeof(double));
            }
            cr_assert_eq(gen_elementwise_op.reference(pp, io->in, rt, &e), PT_OK, "%s", e.msg);
            pt_accum acc;
            cr_assert_eq(gen_elementwise_op.magnitude(pp, io->in, o, NULL, n, mag, &acc, &e), PT_OK, "%s", e.msg);
            cr_expect_eq(acc.len, c == 3 ? 0 : (50 + 31) / 32 + 10, "%s: len %lld", exprs[c], (long long)acc.len);
            for (int64_t j = 0; j < n; j++) {
                int64_t r = n == 3 ? j : j / 50;
                double sa = 0;
                for (int k = 0; k < 50; k++)
                    sa += fabs(x[r * 50 + k]);
                double want = c == 0 ? sa : c == 1 ? sa / 50 : c == 2 ? ref[j] : 0;
                cr_expect(fabs(mag[j] - want) <= 1e-12 * fabs(want), "%s output %d [%lld]: %.17g, want %.17g",
                          exprs[c], o, (long long)j, mag[j], want);
            }
            int64_t idx[2] = {1, n - 1};
            double m2[2];
            cr_assert_eq(gen_elementwise_op.magnitude(pp, io->in, o, idx, 2, m2, &acc, &e), PT_OK);
            cr_expect(m2[0] == mag[1] && m2[1] == mag[n - 1], "%s: sampled magnitudes differ", exprs[c]);
            for (int q = 0; q < io->nout; q++)
                if (q != o)
                    free(rt[q].data);
            free(mag);
            free(ref);
        }
        tuner_io_free(NULL, io);
    }
    /* a negative fp8 output scale scales the magnitude by its absolute value */
    pt_target t89 = {89, false, false};
    pt_problem q = PT_EW("y = sum(x, -1)", "x=3x50", PT_F32, PT_E4M3);
    q.out_scale = -2.0;
    q.has_out_scale = true;
    pt_prepared *qp;
    cr_assert_eq(gen_elementwise_op.prepare(a, &q, &t89, &qp, &e), PT_OK, "%s", e.msg);
    tuner_io *qio;
    cr_assert_eq(tuner_io_new(&gen_elementwise_op, qp, &qio, &e), PT_OK);
    tuner_io_random(qio, 3, 0, 0);
    double qm[3];
    pt_accum qa;
    cr_assert_eq(gen_elementwise_op.magnitude(qp, qio->in, 0, NULL, 3, qm, &qa, &e), PT_OK, "%s", e.msg);
    for (int j = 0; j < 3; j++) {
        double sa = 0;
        for (int k = 0; k < 50; k++)
            sa += fabs(qio->in[0].data[j * 50 + k]);
        cr_expect(fabs(qm[j] - 2 * sa) <= 1e-12 * sa, "out_scale -2 [%d]: %.17g, want %.17g", j, qm[j], 2 * sa);
    }
    tuner_io_free(NULL, qio);
    /* GEMM: relu(acc) * 2 has slope 2 where acc > 0, 0 elsewhere */
    pt_problem g = PT_GEMM(5, 7, 33, "nt", PT_F32, PT_F32);
    g.epilogue = "relu(acc) * 2";
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, &g, &t, &pp, &e), PT_OK, "%s", e.msg);
    tuner_io *io;
    cr_assert_eq(tuner_io_new(&gen_gemm_op, pp, &io, &e), PT_OK);
    tuner_io_random(io, 3, 0, 0);
    double mag[35], ref[35];
    pt_tensor rt = io->out[0];
    rt.data = ref;
    cr_assert_eq(gen_gemm_op.reference(pp, io->in, &rt, &e), PT_OK, "%s", e.msg);
    pt_accum acc;
    cr_assert_eq(gen_gemm_op.magnitude(pp, io->in, 0, NULL, 35, mag, &acc, &e), PT_OK, "%s", e.msg);
    cr_expect(acc.dtype == PT_F32 && acc.len == 33);
    int pos = 0;
    for (int j = 0; j < 35; j++) {
        double sa = 0;
        for (int k = 0; k < 33; k++)
            sa += fabs(io->in[0].data[j / 7 * 33 + k] * io->in[1].data[j % 7 * 33 + k]);
        double want = ref[j] > 0 ? 2 * sa : 0;
        pos += ref[j] > 0;
        cr_expect(fabs(mag[j] - want) <= 1e-12 * want, "gemm [%d]: %.17g, want %.17g", j, mag[j], want);
    }
    cr_expect(pos > 5 && pos < 30, "%d positive", pos);
    tuner_io_free(NULL, io);
    pt_arena_free(a);
}

/* Right kernels with long K pass: f32 accumulation in order (the worst
 * order) on positive inputs (no cancellation to hide the error) and on
 * signed ones. The old per-dtype tolerance alone rejected these. */
Test(tuner_verify, long_k_gemms_within_the_accumulation_bound)
{
    static const struct {
        int64_t m, n, k;
        pt_dtype dt, odt;
        double lo, hi;
    } cases[] = {
        {8, 8, 65536, PT_F32, PT_F32, 0, 1},    {8, 8, 65536, PT_F32, PT_F32, -2, 2},
        {65, 63, 129, PT_F32, PT_F32, 0, 1},    {16, 8, 16384, PT_F16, PT_F32, 0, 1},
        {16, 8, 16384, PT_BF16, PT_F32, 0, 1},  {8, 8, 32768, PT_BF16, PT_BF16, 0, 1},
        {8, 8, 32768, PT_F16, PT_F16, -2, 2},   {8, 8, 16384, PT_TF32, PT_F32, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gfix g;
        gfix_new(&g, cases[i].m, cases[i].n, cases[i].k, cases[i].dt, cases[i].odt, cases[i].lo,
                 cases[i].hi);
        tuner_verify_result r;
        pt_err e = {0};
        int rc = gfix_verify(&g, FK_F32_SEQ, &r, &e);
        cr_expect_eq(rc, PT_OK, "case %zu (%s K=%lld): %s", i, pt_dtype_get(cases[i].dt)->name,
                     (long long)cases[i].k, e.msg);
        cr_expect_eq(r.checked, cases[i].m * cases[i].n);
        gfix_free(&g);
    }
    /* sampled (big outputs): the op's magnitudes at the sampled indices */
    gfix g;
    gfix_new(&g, 128, 96, 2048, PT_F32, PT_F32, 0, 1);
    tuner_verify_opts o = {.full_limit = 1000, .seed = 2};
    tuner_verify_result r;
    pt_err e = {0};
    fk.mode = FK_F32_SEQ;
    cr_expect_eq(tuner_verify(g.d, g.k, &g.l, g.io, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(r.sampled && r.checked < 128 * 96, "checked %lld", (long long)r.checked);
    fk.mode = FK_DROP_TAIL;
    cr_expect_eq(tuner_verify(g.d, g.k, &g.l, g.io, &o, &r, &e), PT_ERANGE, "sampled: a missing "
                 "last product passed");
    gfix_free(&g);
}

/* The bound does not let wrong kernels through: one element a few ulps
 * beyond its bound (just inside passes), one element missing one product,
 * every element missing its last product, two rows swapped; int8 exact. */
Test(tuner_verify, accumulation_bound_still_rejects_wrong_gemms)
{
    static const struct {
        int64_t m, n, k;
        pt_dtype dt, odt;
        double lo, hi;
    } cases[] = {
        {65, 63, 129, PT_F32, PT_F32, -2, 2}, {16, 16, 4096, PT_F32, PT_F32, -2, 2},
        {16, 16, 4096, PT_F32, PT_F32, 0, 1}, {24, 16, 2048, PT_BF16, PT_F32, -2, 2},
        {24, 16, 1024, PT_F16, PT_F16, -2, 2}, {24, 16, 1024, PT_BF16, PT_BF16, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gfix g;
        gfix_new(&g, cases[i].m, cases[i].n, cases[i].k, cases[i].dt, cases[i].odt, cases[i].lo,
                 cases[i].hi);
        int64_t n = cases[i].m * cases[i].n;
        double *w = malloc((size_t)n * sizeof *w), *bound = malloc((size_t)n * sizeof *bound);
        gfix_bounds(&g, w, bound);
        bool f32out = cases[i].odt == PT_F32;
        /* the smallest and the largest reference: the floor and the allowance */
        int64_t lo = 0, hi = 0;
        for (int64_t j = 0; j < n; j++) {
            if (fabs(w[j]) < fabs(w[lo]))
                lo = j;
            if (fabs(w[j]) > fabs(w[hi]))
                hi = j;
        }
        int64_t ats[2] = {lo, hi};
        tuner_verify_result r;
        pt_err e = {0};
        for (int s = 0; s < 2; s++) {
            fk.at = ats[s];
            double w0 = w[fk.at];
            /* D's storage rounds the planted value: plant where it lands */
            double ulp = f32out ? fabs(w0) * 0x1p-23 + 0x1p-140 : 0;
            fk.delta = f32out ? bound[fk.at] + 4 * ulp : 0;
            if (f32out) {
                cr_expect_eq(gfix_verify(&g, FK_AT, &r, &e), PT_ERANGE,
                             "case %zu, d[%lld] = ref + bound + 4 ulps passed (bound %g)", i,
                             (long long)fk.at, bound[fk.at]);
                fk.delta = -(bound[fk.at] + 4 * ulp);
                cr_expect_eq(gfix_verify(&g, FK_AT, &r, &e), PT_ERANGE, "case %zu: minus side", i);
                fk.delta = 0.98 * bound[fk.at];
                cr_expect_eq(gfix_verify(&g, FK_AT, &r, &e), PT_OK,
                             "case %zu, d[%lld] = ref + 0.98 bound rejected: %s", i,
                             (long long)fk.at, e.msg);
            } else { /* 16-bit D: three of its ulps beyond the bound */
                double u = ldexp(1.0, (int)floor(log2(fabs(w0) + bound[fk.at])) -
                                          (cases[i].odt == PT_BF16 ? 7 : 10));
                fk.delta = bound[fk.at] + 3 * u;
                cr_expect_eq(gfix_verify(&g, FK_AT, &r, &e), PT_ERANGE,
                             "case %zu, d[%lld] 3 ulps beyond the bound passed", i, (long long)fk.at);
            }
        }
        fk.at = hi;
        if (cases[i].odt != PT_F16 && cases[i].odt != PT_BF16) { /* below 16-bit resolution */
            cr_expect_eq(gfix_verify(&g, FK_DROP_ONE, &r, &e), PT_ERANGE, "case %zu: one product "
                         "missing in one element passed", i);
            cr_expect_eq(gfix_verify(&g, FK_DROP_TAIL, &r, &e), PT_ERANGE, "case %zu: last "
                         "product missing everywhere passed", i);
        }
        cr_expect_eq(gfix_verify(&g, FK_SWAP_ROWS, &r, &e), PT_ERANGE, "case %zu: swapped rows", i);
        cr_expect_eq(r.cls, TUNER_WRONG_ANSWER);
        cr_expect_eq(gfix_verify(&g, FK_EXACT, &r, &e), PT_OK, "case %zu: %s", i, e.msg);
        free(w);
        free(bound);
        gfix_free(&g);
    }
    /* int8: s32 accumulation is exact, so is the check, at any K */
    gfix g;
    gfix_new(&g, 16, 16, 8192, PT_S8, PT_S32, -100, 100);
    tuner_verify_result r;
    pt_err e = {0};
    cr_expect_eq(gfix_verify(&g, FK_EXACT, &r, &e), PT_OK, "%s", e.msg);
    fk.at = 37;
    fk.delta = 1;
    cr_expect_eq(gfix_verify(&g, FK_AT, &r, &e), PT_ERANGE, "int8 off by one passed");
    cr_expect_eq(r.bad, 1);
    pt_accum acc;
    double mag[1];
    int64_t at = 5;
    cr_assert_eq(gen_gemm_op.magnitude(g.pp, g.io->in, 0, &at, 1, mag, &acc, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(tuner_accum_gamma(&acc), 0.0, "s32 accumulation is exact");
    gfix_free(&g);
}

/* Long-row reductions of the generator's own kernels on the emulator: the
 * mean of an offset row cancels (y = x - mean), so the f32 sum's error
 * shows far beyond 1e-5 of the small results; the model allows it, and a
 * kernel of a slightly different reduction is still caught. */
Test(tuner_verify, long_row_reductions_within_the_accumulation_bound)
{
    static const struct {
        const char *expr, *shape, *wrong;
        pt_dtype dt;
    } cases[] = {
        {"y = (x + 100) - mean(x + 100, -1)", "x=4x16384", "y = (x + 100) - mean(x + 100, -1) * 1.0001", PT_F32},
        {"y = layernorm(x + 100, -1)", "x=4x16384", "y = layernorm(x + 100, -1) * 1.003", PT_F32},
        {"y = sum(x, -1) - sum(x * 0.999, -1)", "x=4x65536", "y = sum(x, -1) - sum(x * 0.99, -1)", PT_F32},
        {"y = softmax(x * 4, -1)", "x=4x32768", "y = softmax(x * 4.001, -1)", PT_F32},
        {"y = rmsnorm(x + 10, -1) * g", "x=4x16384,g=16384", "y = rmsnorm(x + 10, -1) * g * 1.03", PT_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_problem pb = PT_EW(cases[i].expr, cases[i].shape, cases[i].dt, cases[i].dt);
        fixture f = fx_new("emu", pb);
        pt_target t = {80, false, false};
        pt_config c;
        gen_elementwise_op.defaults(f.pp, &t, &c);
        pt_err e = {0};
        for (int bad = 0; bad < 2; bad++) {
            pt_problem wp = PT_EW(cases[i].wrong, cases[i].shape, cases[i].dt, cases[i].dt);
            pt_prepared *wpp = f.pp;
            if (bad)
                cr_assert_eq(gen_elementwise_op.prepare(f.a, &wp, &t, &wpp, &e), PT_OK, "%s", e.msg);
            ptx_module *m;
            pt_launch l;
            cr_assert_eq(pt_op_build(&gen_elementwise_op, wpp, &t, 0, &c, &m, &l, &e), PT_OK, "%s", e.msg);
            char *text = ptx_print(m);
            tuner_image img = {text, strlen(text), NULL, 0, l.entry, NULL, NULL};
            tuner_unload(f.d, f.k);
            cr_assert_eq(tuner_load(f.d, &img, &f.k, &e), PT_OK, "%s", e.msg);
            tuner_verify_result r;
            int rc = tuner_verify(f.d, f.k, &l, f.io, NULL, &r, &e);
            if (bad)
                cr_expect_eq(rc, PT_ERANGE, "%s: the kernel of '%s' passed (max err %g)", cases[i].expr,
                             cases[i].wrong, r.max_err);
            else
                cr_expect_eq(rc, PT_OK, "%s: %s", cases[i].expr, e.msg);
            free(text);
            ptx_module_free(m);
        }
        f.k = NULL;
        fx_free(&f);
    }
}

/* Acceptance of issue 9 item 7: tuning the f32 GEMM the old tolerance
 * rejected config after config stores verified winners. */
Test(tuner_verify, tune_f32_gemm_stores_verified_winners, .timeout = 300)
{
    char dir[] = "/tmp/ptxtune_verify_XXXXXX";
    cr_assert(mkdtemp(dir));
    static char out[65536], err[8192];
    int rc = test_run_ptxtune(dir, "tune gemm m=65 n=63 k=129 dtype=f32 layout=tn --backend emu "
                              "--db t.db --budget 8 --quiet", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "tune: %s%s", out, err);
    cr_expect(strstr(out, "classes: ok 8"), "not every candidate verified:\n%s", out);
    cr_expect(!strstr(out, "wrong_answer"), "%s", out);
    rc = test_run_ptxtune(dir, "export --db t.db --format csv", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "export: %s", err);
    /* one winner for the problem, verified (the column after source=model) */
    cr_expect(strstr(out, "gemm m=65 n=63 k=129 layout=tn dtype=f32"), "%s", out);
    cr_expect(strstr(out, ",model,1,"), "no verified winner stored:\n%s", out);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* ---- NaN and inf (issue 9 item 18) ---- */

Test(tuner_verify, nan_and_inf_are_compared_explicitly)
{
    tuner_verify_result r = {0};
    /* NaN only matches NaN; an inf only the same inf */
    double ref[6] = {1, NAN, INFINITY, -INFINITY, 2, 3}, got[6] = {NAN, NAN, INFINITY, INFINITY, 2, INFINITY};
    tuner_compare("y", PT_F32, got, ref, NULL, 6, &r);
    cr_expect_eq(r.bad, 3, "NaN for 1, +inf for -inf, inf for 3: %lld bad", (long long)r.bad);
    cr_expect(isinf(r.max_err));
    /* one inf in the reference must not make every other element pass (the
     * tensor's scale comes from its finite elements) */
    memset(&r, 0, sizeof r);
    double ri[3] = {INFINITY, 1, 2}, gi[3] = {INFINITY, 1.5, 2};
    tuner_compare("y", PT_F32, gi, ri, NULL, 3, &r);
    cr_expect_eq(r.bad, 1, "1.5 for 1 passed next to an inf reference");
    cr_expect(strstr(r.worst, "y[1]"), "%s", r.worst);
    /* fp8: a NaN reference is not clamped into the format's range */
    memset(&r, 0, sizeof r);
    double rf[2] = {NAN, 1}, gf[2] = {448, 1};
    tuner_compare("q", PT_E4M3, gf, rf, NULL, 2, &r);
    cr_expect_eq(r.bad, 1, "448 for a NaN reference passed");
    /* a NaN or infinite allowance allows nothing */
    memset(&r, 0, sizeof r);
    double ra[2] = {1, 2}, ga[2] = {1.5, 2}, aa[2] = {NAN, INFINITY};
    tuner_compare_bound("y", PT_F32, ga, ra, aa, NULL, 2, &r);
    cr_expect_eq(r.bad, 1);

    /* the whole run: a NaN everywhere in the reference compares nothing */
    gfix g;
    gfix_new(&g, 8, 8, 16, PT_F32, PT_F32, -2, 2);
    pt_err e = {0};
    cr_expect_eq(gfix_verify(&g, FK_EXACT, &r, &e), PT_OK, "%s", e.msg);
    float nanbits[8 * 16];
    for (int i = 0; i < 8 * 16; i++)
        nanbits[i] = NAN;
    tuner_io_set_input(g.io, 0, nanbits);
    int rc = gfix_verify(&g, FK_EXACT, &r, &e);
    cr_expect_eq(rc, PT_EINVAL, "an all-NaN reference passed with error %g", r.max_err);
    cr_expect(strstr(e.msg, "nothing to compare"), "%s", e.msg);
    cr_expect_neq(r.cls, TUNER_OK);
    /* one NaN in A: its row of D is NaN on both sides, the rest is checked */
    tuner_io_random(g.io, 5, -2, 2);
    float a[8 * 16];
    for (int i = 0; i < 8 * 16; i++)
        a[i] = (float)g.io->in[0].data[i];
    a[3] = NAN;
    tuner_io_set_input(g.io, 0, a);
    cr_expect_eq(gfix_verify(&g, FK_EXACT, &r, &e), PT_OK, "%s", e.msg);
    fk.at = 40; /* row 5 */
    fk.delta = 1e-3;
    cr_expect_eq(gfix_verify(&g, FK_AT, &r, &e), PT_ERANGE, "a wrong element next to a NaN row passed");
    gfix_free(&g);
    /* a NaN or inf scalar parameter (alpha): the reference is NaN or inf
     * everywhere, and so is the kernel's output */
    static const double alphas[] = {NAN, INFINITY, -INFINITY};
    for (int ai = 0; ai < 3; ai++) {
        pt_problem p = PT_GEMM(8, 8, 16, "nt", PT_F32, PT_F32);
        p.alpha = alphas[ai];
        pt_arena *ar = pt_arena_new();
        pt_prepared *pp;
        pt_target t = {80, false, false};
        if (gen_gemm_op.prepare(ar, &p, &t, &pp, &e) == PT_OK) { /* else refused up front: fine */
            tuner_dev *d;
            tuner_io *io;
            tuner_kernel *k;
            cr_assert_eq(tuner_dev_open("mock", NULL, &d, &e), PT_OK);
            cr_assert_eq(tuner_io_new(&gen_gemm_op, pp, &io, &e), PT_OK);
            tuner_io_random(io, 5, 0, 0);
            tuner_image img = {"// mock:\n", 9, NULL, 0, "k", &gen_gemm_op, pp};
            cr_assert_eq(tuner_load(d, &img, &k, &e), PT_OK);
            pt_launch l = {.grid = {1, 1, 1}, .block = {32, 1, 1}, .nargs = 3,
                           .args = {{PT_ARG_OUTPUT, 0, 0, 0}, {PT_ARG_INPUT, 0, 0, 0}, {PT_ARG_INPUT, 1, 0, 0}},
                           .entry = "k"};
            cr_expect_eq(tuner_verify(d, k, &l, io, NULL, &r, &e), PT_EINVAL,
                         "alpha = %g passed --check (max err %g)", alphas[ai], r.max_err);
            tuner_unload(d, k);
            tuner_io_free(d, io);
            tuner_dev_close(d);
        }
        pt_arena_free(ar);
    }
}

/* ---- .npy ---- */

Test(tuner_npy, roundtrip_and_dtypes)
{
    char path[] = "/tmp/ptxtune-npy-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    float v[6] = {1, -2, 3.5f, 0.25f, -0.125f, 1e10f};
    int64_t shape[2] = {2, 3};
    pt_err e = {0};
    cr_assert_eq(tuner_npy_write(path, "<f4", 2, shape, v, &e), PT_OK, "%s", e.msg);
    tuner_npy n;
    cr_assert_eq(tuner_npy_read(path, &n, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(n.descr, "<f4");
    cr_expect_eq(n.ndim, 2);
    cr_expect_eq(n.shape[0], 2);
    cr_expect_eq(n.shape[1], 3);
    cr_expect_eq(n.numel, 6);
    cr_expect(memcmp(n.data, v, sizeof v) == 0);
    /* the header is what numpy writes: 64-byte aligned, ends in a newline */
    FILE *fp = fopen(path, "rb");
    unsigned char hdr[128];
    size_t got = fread(hdr, 1, sizeof hdr, fp);
    fclose(fp);
    cr_assert(got >= 64);
    size_t hl = (size_t)hdr[8] | (size_t)hdr[9] << 8;
    cr_expect_eq((10 + hl) % 64, 0);
    cr_expect_eq(hdr[10 + hl - 1], '\n');
    cr_expect(memmem(hdr, got, "'shape': (2, 3), }", 18), "%.*s", (int)hl, hdr + 10);
    /* floats into f16 and bf16 storage */
    uint16_t h[6], bf[6];
    cr_assert_eq(tuner_npy_to_dtype(&n, PT_F16, h, &e), PT_OK);
    cr_expect_eq(h[0], pt_f32_to_f16(1.0f));
    cr_expect_eq(h[5], pt_f32_to_f16(1e10f)); /* inf in f16 */
    cr_assert_eq(tuner_npy_to_dtype(&n, PT_BF16, bf, &e), PT_OK);
    cr_expect_eq(bf[2], pt_f32_to_bf16(3.5f));
    tuner_npy_free(&n);
    /* bf16 as uint16 bits, one dim: read back bit for bit */
    int64_t six = 6;
    cr_assert_eq(tuner_npy_write(path, pt_dtype_get(PT_BF16)->npy, 1, &six, bf, &e), PT_OK);
    cr_assert_eq(tuner_npy_read(path, &n, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(n.descr, "<u2");
    cr_expect_eq(n.ndim, 1);
    uint16_t bf2[6];
    cr_assert_eq(tuner_npy_to_dtype(&n, PT_BF16, bf2, &e), PT_OK);
    cr_expect(memcmp(bf, bf2, sizeof bf) == 0);
    uint8_t q[6];
    cr_expect_eq(tuner_npy_to_dtype(&n, PT_E4M3, q, &e), PT_EINVAL, "u2 bits are not e4m3");
    cr_expect(strstr(e.msg, "<u2") && strstr(e.msg, "e4m3"), "%s", e.msg);
    tuner_npy_free(&n);
    unlink(path);
}

Test(tuner_npy, malformed_files_are_errors)
{
    static const char good[] = "\x93NUMPY\x01\x00\x3d\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }   \n";
    char buf[256];
    memcpy(buf, good, sizeof good - 1);
    float two[2] = {1, 2};
    memcpy(buf + sizeof good - 1, two, 8);
    size_t len = sizeof good - 1 + 8;
    tuner_npy n;
    pt_err e = {0};
    cr_assert_eq(tuner_npy_parse(buf, len, "ok.npy", &n, &e), PT_OK, "%s", e.msg);
    tuner_npy_free(&n);
    /* every truncation fails cleanly */
    for (size_t cut = 0; cut < len; cut++) {
        pt_err_clear(&e);
        cr_expect_neq(tuner_npy_parse(buf, cut, "cut.npy", &n, &e), PT_OK, "cut at %zu", cut);
    }
    static const struct {
        const char *from, *to, *msg;
    } bad[] = {
        {"NUMPY", "NUMPX", "not a .npy file"},
        {"False", "Fals1", "bad fortran_order"}, /* True is read (transposed) since 941808d */
        {"'<f4'", "'>f4'", "big-endian"},
        {"'<f4'", "'|O8'", "not supported"},
        {"(2,)", "(2x)", "bad shape"},
        {"'shape'", "'shapx'", "lacks"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char b2[256];
        memcpy(b2, buf, len);
        char *p = memmem(b2, len, bad[i].from, strlen(bad[i].from));
        cr_assert(p);
        memcpy(p, bad[i].to, strlen(bad[i].to));
        pt_err_clear(&e);
        cr_expect_neq(tuner_npy_parse(b2, len, "bad.npy", &n, &e), PT_OK, "%s", bad[i].to);
        cr_expect(strstr(e.msg, bad[i].msg), "'%s' lacks '%s'", e.msg, bad[i].msg);
    }
    pt_err_clear(&e);
    cr_expect_eq(tuner_npy_read("/nonexistent/x.npy", &n, &e), PT_EIO);
}
