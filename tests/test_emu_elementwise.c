/* Every elementwise variant, run on the CPU emulator against the float64
 * reference: random inputs (never zeros), outputs poisoned first, every
 * detector on, within the dtype tolerance (tuner/emu_check.h). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <math.h>
#include <stdlib.h>

#include "gen/elementwise.h"
#include "ptx/ir.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"

/* Small shapes that still exercise tails: rows not a multiple of the rows
 * per block, rows longer than one warp's chunk, broadcast operands. */
static const pt_problem cases[] = {
    PT_EW("y = softmax(x * 0.125, -1)", "x=5x256", PT_BF16, PT_BF16),
    PT_EW("y = log_softmax(x, -1)", "x=3x96", PT_F32, PT_F32),
    PT_EW("y = layernorm(x + r, -1) * g + b", "x=3x192,r=3x192,g=192,b=192", PT_F16, PT_F16),
    PT_EW("y = x * rsqrt(mean(x*x, -1) + 1e-6) * g", "x=4x128,g=128", PT_F32, PT_F32),
    PT_EW("y = gelu(x * w + b)", "x=7x40,w=40,b=40", PT_BF16, PT_BF16),
    PT_EW("h = x + r; y = rmsnorm(h, -1) * g", "x=3x64,r=3x64,g=64", PT_BF16, PT_BF16),
    PT_EW("y = silu(x) * u + where(b > 0, b, 0.5 * b)", "x=2x3x24,u=2x3x24,b=3x1", PT_F32, PT_F32),
    PT_EW("y = exp(x) * s", "x=3x5x7,s=1", PT_F32, PT_F32),
    PT_EW("m = max(x, -1); s = sum(x, -1); y = gelu_erf(x) - m", "x=5x80", PT_F32, PT_F32),
    PT_EW("y = tanh(x) + sigmoid(x) + relu(x) + abs(x) + sqrt(abs(x)) + log(abs(x)) + exp2(x)",
          "x=300", PT_F32, PT_F32),
    PT_EW("y = cast(x * 3, bf16) + min(x, 0.5) / max(x, -0.5) + (x >= 0.25)", "x=9x33", PT_F32, PT_F32),
};
enum { NCASES = sizeof cases / sizeof cases[0] };

typedef struct job {
    int first, step;
    int ran, failed;
    double worst;
    char msg[1400];
} job;

static void run_case(job *j, const pt_problem *p, const char *arch, int *k)
{
    pt_target t;
    pt_err e = {0};
    pt_target_parse(arch, &t, &e);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    if (gen_elementwise_op.prepare(a, p, &t, &pp, &e)) {
        if (!j->failed++)
            snprintf(j->msg, sizeof j->msg, "%s: %s", p->expr, e.msg);
        pt_arena_free(a);
        return;
    }
    pt_space s;
    gen_elementwise_op.space(pp, &t, &s);
    for (int64_t i = 0; i < pt_space_size(&s); i++) {
        pt_config c;
        pt_space_config(&s, i, &c);
        pt_err ce = {0};
        if (gen_elementwise_op.check(pp, &t, &c, &ce))
            continue;
        if ((*k)++ % j->step != j->first)
            continue;
        pt_check_opts o = {.seed = 0x5eed + (uint64_t)i};
        pt_check_result r;
        int rc = pt_check_emu(&gen_elementwise_op, pp, &t, &c, &o, &r, &ce);
        j->ran++;
        if (r.max_err > j->worst)
            j->worst = r.max_err;
        if (rc && !j->failed++) {
            char cs[256];
            snprintf(j->msg, sizeof j->msg, "%s %s [%s]: %s", p->expr, arch,
                     pt_config_str(&c, cs, sizeof cs), ce.msg);
        }
    }
    pt_arena_free(a);
}

static void *run_job(void *arg)
{
    job *j = arg;
    int k = 0;
    for (int ci = 0; ci < NCASES; ci++)
        run_case(j, &cases[ci], "sm_80", &k);
    /* fp8 outputs (sm_89) */
    static const pt_problem fp8[] = {
        PT_EW("y = silu(x)", "x=4x64", PT_BF16, PT_E4M3),
        PT_EW("y = softmax(x, -1) * 8", "x=3x64", PT_F16, PT_E5M2),
    };
    for (int ci = 0; ci < 2; ci++)
        run_case(j, &fp8[ci], "sm_89", &k);
    return NULL;
}

Test(emu_elementwise, every_variant_matches_the_reference, .timeout = 900)
{
    enum { NTHREADS = 2 };
    job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].first = i;
        jobs[i].step = NTHREADS;
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    int ran = 0, failed = 0;
    double worst = 0;
    const char *msg = "";
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        ran += jobs[i].ran;
        failed += jobs[i].failed;
        if (jobs[i].worst > worst)
            worst = jobs[i].worst;
        if (jobs[i].msg[0] && !msg[0])
            msg = jobs[i].msg;
    }
    printf("emu_elementwise: %d variants of %d problems ran on the emulator against the float64 "
           "reference: %d failed, worst relative error %.3g\n",
           ran, NCASES + 2, failed, worst);
    cr_assert(ran > 1000, "only %d variants", ran);
    cr_assert(failed == 0, "%d failed; first: %s", failed, msg);
}

/* The checker itself must be able to fail: a kernel emitted for
 * y = x * 2.0001 checked against the reference of y = x * 2 (relative error
 * 5e-5 > 1e-5) is caught, and the right kernel passes. */
static const pt_prepared *other_pp; /* test-local: the kernel actually emitted */

static int wrong_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l,
                      pt_err *e)
{
    (void)pp;
    return gen_elementwise_op.emit(other_pp, c, m, l, e);
}

Test(emu_elementwise, a_wrong_kernel_is_caught)
{
    pt_target t = {80, false, false};
    pt_arena *a = pt_arena_new();
    pt_prepared *good, *other;
    pt_err e = {0};
    pt_problem p1 = PT_EW("y = x * 2", "x=4x32", PT_F32, PT_F32);
    pt_problem p2 = PT_EW("y = x * 2.0001", "x=4x32", PT_F32, PT_F32);
    cr_assert_eq(gen_elementwise_op.prepare(a, &p1, &t, &good, &e), 0, "%s", e.msg);
    cr_assert_eq(gen_elementwise_op.prepare(a, &p2, &t, &other, &e), 0, "%s", e.msg);
    pt_config c;
    gen_elementwise_op.defaults(good, &t, &c);
    pt_check_opts o = {.seed = 7};
    pt_check_result r;
    cr_assert_eq(pt_check_emu(&gen_elementwise_op, good, &t, &c, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.checked, 128);
    cr_expect_lt(r.max_err, 1e-6);
    other_pp = other;
    pt_op wrong = gen_elementwise_op;
    wrong.emit = wrong_emit;
    cr_expect_eq(pt_check_emu(&wrong, good, &t, &c, &o, &r, &e), PT_ERANGE);
    cr_expect(strstr(e.msg, "over tolerance"), "%s", e.msg);
    cr_expect_gt(r.max_err, 4e-5);
    pt_arena_free(a);
}

/* ---------------------------------------------------------------------- */
/* Runs on given inputs                                                    */

/* Deterministic pseudo-random numbers (xorshift64*). */
static uint64_t rnd64(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static double rnd_unit(uint64_t *s) { return (double)(rnd64(s) >> 11) / 9007199254740992.0; }

typedef struct given_run {
    int64_t checked, bad;
    char first[512];
} given_run;

/* Runs config c of pp on the emulator (every detector on) on the inputs
 * vals[i] (float64, stored through the input dtype; the reference sees the
 * stored values) and compares every output element with the float64
 * reference: a NaN only matches a NaN, an infinity only the same infinity,
 * finite values within the dtype tolerance relative to max(|w|, 1e-2 * max
 * |w| of the output) (the verifier's metric). An element the kernel never
 * wrote (still the 0xFF poison) is bad even where NaN is expected. */
/* How run_given_opts runs: the shared base shift (tuner_dev_opts; 0 the
 * default shift) and an optional rewrite of the emitted text. */
typedef struct given_opts {
    int smem_shift;
    char *(*mutate)(const char *text); /* a new malloc'd text */
} given_opts;

static int run_given_opts(const pt_prepared *pp, const pt_target *t, const pt_config *c,
                          double *const *vals, const given_opts *go, given_run *g, double *got0,
                          pt_err *e);

static int run_given(const pt_prepared *pp, const pt_target *t, const pt_config *c,
                     double *const *vals, given_run *g, double *got0, pt_err *e)
{
    return run_given_opts(pp, t, c, vals, NULL, g, got0, e);
}

static int run_given_opts(const pt_prepared *pp, const pt_target *t, const pt_config *c,
                          double *const *vals, const given_opts *go, given_run *g, double *got0,
                          pt_err *e)
{
    const pt_op *op = &gen_elementwise_op;
    memset(g, 0, sizeof *g);
    ptx_module *m = NULL;
    pt_launch l;
    tuner_dev *d = NULL;
    tuner_kernel *k = NULL;
    tuner_io *io = NULL;
    pt_tensor ref[TUNER_MAX_TENSORS];
    memset(ref, 0, sizeof ref);
    char *text = NULL;
    int rc = pt_op_build(op, pp, t, 0, c, &m, &l, e);
    if (!rc) {
        text = ptx_print(m);
        if (go && go->mutate) {
            char *t2 = go->mutate(text);
            free(text);
            text = t2;
        }
        tuner_dev_opts dopts = {.emu_smem_shift = go ? go->smem_shift : 0};
        rc = tuner_dev_open("emu", &dopts, &d, e);
    }
    tuner_image img = {text, text ? strlen(text) : 0, NULL, 0, l.entry, op, pp};
    if (!rc)
        rc = tuner_load(d, &img, &k, e);
    if (!rc)
        rc = tuner_io_new(op, pp, &io, e);
    for (int i = 0; !rc && i < io->nin; i++) {
        void *bits = malloc(io->in_bytes[i]);
        for (int64_t j = 0; j < io->in[i].numel; j++)
            pt_dtype_store(io->in[i].dtype, bits, (size_t)j, vals[i][j]);
        tuner_io_set_input(io, i, bits);
        free(bits);
    }
    tuner_args a;
    if (!rc)
        rc = tuner_io_alloc(d, io, 0, e);
    if (!rc)
        rc = tuner_io_upload(d, io, e);
    if (!rc)
        rc = tuner_io_bind(d, io, &l, &a, e);
    if (!rc)
        rc = tuner_launch(d, k, &l, a.p, e);
    if (!rc)
        rc = tuner_sync(d, e);
    if (!rc)
        rc = tuner_io_download(d, io, e);
    if (!rc && got0)
        memcpy(got0, io->out[0].data, (size_t)io->out[0].numel * sizeof *got0);
    for (int i = 0; !rc && i < io->nout; i++) {
        ref[i] = io->out[i];
        ref[i].data = malloc((size_t)ref[i].numel * sizeof *ref[i].data);
    }
    if (!rc)
        rc = op->reference(pp, io->in, ref, e);
    for (int i = 0; !rc && i < io->nout; i++) {
        const pt_tensor *o = &io->out[i];
        int bytes = pt_dtype_get(o->dtype)->bytes;
        double tol = pt_check_tolerance(o->dtype), scale = 0;
        for (int64_t j = 0; j < o->numel; j++)
            if (isfinite(ref[i].data[j]) && fabs(ref[i].data[j]) > scale)
                scale = fabs(ref[i].data[j]);
        for (int64_t j = 0; j < o->numel; j++) {
            double w = ref[i].data[j], got = o->data[j];
            const unsigned char *b = (const unsigned char *)io->out_bits[i] + (size_t)j * (size_t)bytes;
            bool poison = true;
            for (int q = 0; q < bytes; q++)
                poison &= b[q] == 0xFF;
            bool ok;
            if (poison)
                ok = false;
            else if (isnan(w) || isnan(got))
                ok = isnan(w) && isnan(got);
            else if (isinf(w) || isinf(got))
                ok = w == got;
            else
                ok = fabs(got - w) / fmax(fabs(w), 1e-2 * scale) <= tol;
            g->checked++;
            if (!ok && !g->bad++)
                snprintf(g->first, sizeof g->first, "%s[%lld] = %.9g%s, reference %.9g", o->name,
                         (long long)j, got, poison ? " (never written)" : "", w);
        }
    }
    for (int i = 0; i < TUNER_MAX_TENSORS; i++)
        free(ref[i].data);
    if (io)
        tuner_io_free(d, io);
    if (k)
        tuner_unload(d, k);
    tuner_dev_close(d);
    free(text);
    ptx_module_free(m);
    return rc;
}

/* Runs every config of p's space that check() accepts on the given inputs
 * (generated by fill for each input); returns the number of configs run and
 * fails the test on the first wrong one. fill(i, x, n, seed) fills input i. */
typedef void (*fill_fn)(int input, double *x, int64_t rows, int64_t cols, uint64_t seed);

static int every_config_given(const pt_problem *p, const char *arch, fill_fn fill, uint64_t seed,
                              int64_t *nan_expected)
{
    pt_target t;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &t, &e), PT_OK, "%s", e.msg);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_elementwise_op.prepare(a, p, &t, &pp, &e), PT_OK, "%s: %s", p->expr, e.msg);
    const ex_prog *prog = gen_elementwise_prog(pp);
    double *vals[8];
    for (int i = 0; i < prog->ninputs; i++) {
        vals[i] = malloc((size_t)prog->inputs[i].numel * sizeof **vals);
        fill(i, vals[i], prog->inputs[i].numel / prog->cols, prog->cols, seed + (uint64_t)i);
    }
    pt_space s;
    gen_elementwise_op.space(pp, &t, &s);
    int ran = 0;
    for (int64_t i = 0; i < pt_space_size(&s); i++) {
        pt_config c;
        pt_space_config(&s, i, &c);
        pt_err ce = {0};
        if (gen_elementwise_op.check(pp, &t, &c, &ce))
            continue;
        given_run g;
        char cs[256];
        int rc = run_given(pp, &t, &c, vals, &g, NULL, &ce);
        cr_assert_eq(rc, PT_OK, "%s [%s]: %s", p->expr, pt_config_str(&c, cs, sizeof cs), ce.msg);
        cr_assert_eq(g.bad, 0, "%s %s [%s]: %lld of %lld wrong; first %s", p->expr, arch,
                     pt_config_str(&c, cs, sizeof cs), (long long)g.bad, (long long)g.checked,
                     g.first);
        ran++;
    }
    if (nan_expected) {
        /* how many reference elements are NaN (fully masked rows) */
        pt_tensor in[8], out[8];
        int nin, nout;
        gen_elementwise_op.tensors(pp, &nin, &nout, in, out);
        *nan_expected = 0;
        for (int i = 0; i < nin; i++) {
            in[i].data = malloc((size_t)in[i].numel * sizeof(double));
            for (int64_t j = 0; j < in[i].numel; j++)
                in[i].data[j] = pt_dtype_round(in[i].dtype, vals[i][j]);
        }
        for (int i = 0; i < nout; i++)
            out[i].data = malloc((size_t)out[i].numel * sizeof(double));
        cr_assert_eq(gen_elementwise_op.reference(pp, in, out, &e), PT_OK, "%s", e.msg);
        for (int i = 0; i < nout; i++)
            for (int64_t j = 0; j < out[i].numel; j++)
                *nan_expected += isnan(out[i].data[j]);
        for (int i = 0; i < nin; i++)
            free(in[i].data);
        for (int i = 0; i < nout; i++)
            free(out[i].data);
    }
    for (int i = 0; i < prog->ninputs; i++)
        free(vals[i]);
    pt_arena_free(a);
    return ran;
}

/* The repro: x[:, 32:] = -inf, values in [-2, 2) before. */
static void fill_tail_masked(int input, double *x, int64_t rows, int64_t cols, uint64_t seed)
{
    (void)input;
    uint64_t s = seed | 1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * cols + c] = c >= 32 ? -INFINITY : 4 * rnd_unit(&s) - 2;
}

/* Random masks, row by row: row 0 every other chunk of 8 masked, row 1
 * only the last element finite, row 2 only the first, then random masks
 * of density 1/8 .. 7/8; never a fully masked row. */
static void fill_random_masks(int input, double *x, int64_t rows, int64_t cols, uint64_t seed)
{
    (void)input;
    uint64_t s = seed | 1;
    for (int64_t r = 0; r < rows; r++) {
        double dens = (double)(r % 7 + 1) / 8;
        for (int64_t c = 0; c < cols; c++) {
            double v = 8 * rnd_unit(&s) - 4;
            bool masked = r == 0   ? (c / 8) % 2 == 0
                        : r == 1 ? c != cols - 1
                        : r == 2 ? c != 0
                                 : rnd_unit(&s) < dens;
            x[r * cols + c] = masked ? -INFINITY : v;
        }
    }
}

/* Random masks plus fully masked rows (rows 1 and 4 and the last) and one
 * +inf in row 3 (which makes that row NaN too). */
static void fill_full_rows(int input, double *x, int64_t rows, int64_t cols, uint64_t seed)
{
    fill_random_masks(input, x, rows, cols, seed);
    for (int64_t r = 0; r < rows; r++)
        if (r == 1 || r == 4 || r == rows - 1)
            for (int64_t c = 0; c < cols; c++)
                x[r * cols + c] = -INFINITY;
    x[3 * cols + 5] = INFINITY;
}

/* Issue 9 item 1: masked (-inf) entries give the exact softmax and
 * log_softmax in every config (online=1 computed -inf - -inf in the
 * update and returned NaN for every element). */
Test(emu_elementwise, masked_softmax_every_config, .timeout = 600)
{
    static const pt_problem repro[] = {
        PT_EW("y = softmax(x, -1)", "x=8x256", PT_F32, PT_F32),
        PT_EW("y = log_softmax(x, -1)", "x=8x256", PT_F32, PT_F32),
        PT_EW("y = softmax(x, -1)", "x=8x256", PT_F16, PT_F16),
        PT_EW("y = log_softmax(x, -1)", "x=8x256", PT_F16, PT_F32),
    };
    int ran = 0;
    for (int i = 0; i < 4; i++)
        ran += every_config_given(&repro[i], "sm_80", fill_tail_masked, 11, NULL);
    static const pt_problem rnd[] = {
        PT_EW("y = softmax(x, -1)", "x=9x96", PT_F32, PT_F32),
        PT_EW("y = log_softmax(x * 0.5, -1); m = max(x, -1)", "x=9x96", PT_BF16, PT_F32),
        PT_EW("y = softmax(x, -1) + log_softmax(x, -1)", "x=7x200", PT_F16, PT_F16),
    };
    for (int i = 0; i < 3; i++)
        ran += every_config_given(&rnd[i], "sm_80", fill_random_masks, 23, NULL);
    printf("emu_elementwise: %d masked softmax variants match the reference\n", ran);
    cr_expect_gt(ran, 300);
}

/* A fully masked row (or one with +inf): softmax and log_softmax give NaN
 * for every element of that row (numpy's and torch's answer; see
 * gen/expr.h), in the kernel and in the reference; the other rows stay
 * exact. */
Test(emu_elementwise, fully_masked_rows_give_nan, .timeout = 600)
{
    static const pt_problem ps[] = {
        PT_EW("y = softmax(x, -1)", "x=6x64", PT_F32, PT_F32),
        PT_EW("y = log_softmax(x, -1)", "x=6x64", PT_F16, PT_F16),
        PT_EW("y = softmax(x, -1)", "x=6x128", PT_BF16, PT_BF16),
    };
    int ran = 0;
    for (int i = 0; i < 3; i++) {
        int64_t nans = -1;
        ran += every_config_given(&ps[i], "sm_80", fill_full_rows, 5, &nans);
        int64_t cols = i == 2 ? 128 : 64;
        cr_expect_eq(nans, 4 * cols, "%s: the reference gives NaN exactly on the 3 masked rows "
                     "and the row with +inf, "
                     "got %lld NaNs", ps[i].expr, (long long)nans);
    }
    cr_expect_gt(ran, 100);
}

/* Issue 9 item 2: more than 8 (max, sum) pairs in one pass. The ninth
 * softmax of a sum of nine was never updated (a fixed [8] array), so the
 * sum came out inf. Twelve pairs, every config, random inputs. */
Test(emu_elementwise, twelve_softmaxes_in_one_pass, .timeout = 600)
{
    static const pt_problem ps[] = {
        PT_EW("y = softmax(x, -1) + softmax(x * 2, -1) + softmax(x * 3, -1) + softmax(x * 4, -1) + "
              "softmax(x * 5, -1) + softmax(x * 6, -1) + softmax(x * 7, -1) + softmax(x * 8, -1) + "
              "softmax(x * 9, -1)",
              "x=5x64", PT_F32, PT_F32),
        PT_EW("y = log_softmax(x, -1) + log_softmax(x * 2, -1) + log_softmax(x * 3, -1) + "
              "log_softmax(x * 4, -1) + log_softmax(x * 5, -1) + log_softmax(x * 6, -1) + "
              "log_softmax(x * 7, -1) + log_softmax(x * 8, -1) + log_softmax(x * 9, -1) + "
              "log_softmax(x * 10, -1) + log_softmax(x * 11, -1) + log_softmax(x * 12, -1); "
              "m = max(x * 12, -1)",
              "x=3x96", PT_F16, PT_F32),
    };
    pt_target t = {80, false, false};
    int ran = 0;
    for (int pi = 0; pi < 2; pi++) {
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        cr_assert_eq(gen_elementwise_op.prepare(a, &ps[pi], &t, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_elementwise_op.space(pp, &t, &s);
        for (int64_t i = 0; i < pt_space_size(&s); i++) {
            pt_config c;
            pt_space_config(&s, i, &c);
            if (gen_elementwise_op.check(pp, &t, &c, &e))
                continue;
            pt_check_opts o = {.seed = 3 + (uint64_t)i};
            pt_check_result r;
            char cs[256];
            cr_assert_eq(pt_check_emu(&gen_elementwise_op, pp, &t, &c, &o, &r, &e), PT_OK,
                         "pair %d [%s]: %s", pi, pt_config_str(&c, cs, sizeof cs), e.msg);
            ran++;
        }
        pt_arena_free(a);
    }
    cr_expect_gt(ran, 100, "%d configs", ran);
}

/* Adversarial inputs for integer casts: ties, range edges, huge, NaN, inf. */
static const double cast_in[] = {
    0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 127.5, 126.5, 128, -128.5, -129, 255.5, 254.5,
    256, -1, 32767.5, 32768, -32769, 65535.5, 65536, 2147483520.0, 2147483648.0, -2147483904.0,
    4294967296.0, 1e10, -1e10, 3e38, -3e38, NAN, INFINITY, -INFINITY};
enum { NCAST = sizeof cast_in / sizeof cast_in[0] };

static void fill_cast(int input, double *x, int64_t rows, int64_t cols, uint64_t seed)
{
    (void)input;
    (void)seed;
    for (int64_t j = 0; j < rows * cols; j++)
        x[j] = cast_in[j % NCAST];
}

/* Issue 9 item 3: cast(x, s8|u8|s16|u16|s32|u32|s64|u64) rounds to nearest
 * even and saturates to the type's range, NaN giving 0 (cvt.rni.sat); it
 * was a plain mov. Every config, every integer type, adversarial inputs,
 * against the reference; s8 and u8 also against values written here. */
Test(emu_elementwise, integer_casts_round_and_saturate, .timeout = 300)
{
    static const char *const types[] = {"s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"};
    static const double want_s8[NCAST] = {
        0, 2, 2, 0, -2, -2, 0, 127, 126, 127, -128, -128, 127, 127, 127, -1, 127, 127, -128,
        127, 127, 127, 127, -128, 127, 127, -128, 127, -128, 0, 127, -128};
    static const double want_u8[NCAST] = {
        0, 2, 2, 0, 0, 0, 0, 128, 126, 128, 0, 0, 255, 254, 255, 0, 255, 255, 0,
        255, 255, 255, 255, 0, 255, 255, 0, 255, 0, 0, 255, 0};
    int ran = 0;
    char expr[64];
    for (int ti = 0; ti < 8; ti++) {
        snprintf(expr, sizeof expr, "y = cast(x, %s)", types[ti]);
        pt_problem p = PT_EW(expr, "x=2x32", PT_F32, PT_F32);
        ran += every_config_given(&p, "sm_80", fill_cast, 1, NULL);
        snprintf(expr, sizeof expr, "y = softmax(x, -1) + cast(x * 1, %s)", types[ti]);
        pt_problem q = PT_EW(expr, "x=2x32", PT_F32, PT_F32);
        ran += every_config_given(&q, "sm_80", fill_cast, 1, NULL);
    }
    for (int ti = 0; ti < 2; ti++) {
        snprintf(expr, sizeof expr, "y = cast(x, %s)", types[ti]);
        pt_problem p = PT_EW(expr, "x=32", PT_F32, PT_F32);
        pt_target t = {80, false, false};
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        cr_assert_eq(gen_elementwise_op.prepare(a, &p, &t, &pp, &e), PT_OK, "%s", e.msg);
        pt_config c;
        gen_elementwise_op.defaults(pp, &t, &c);
        double x[NCAST], got[NCAST];
        double *vals[1] = {x};
        memcpy(x, cast_in, sizeof x);
        given_run g;
        cr_assert_eq(run_given(pp, &t, &c, vals, &g, got, &e), PT_OK, "%s", e.msg);
        cr_expect_eq(g.bad, 0, "%s: %s", expr, g.first);
        const double *want = ti == 0 ? want_s8 : want_u8;
        for (int j = 0; j < NCAST; j++)
            cr_expect_eq(got[j], want[j], "%s of %.9g: got %.9g, want %.9g", types[ti], cast_in[j],
                         got[j], want[j]);
        pt_arena_free(a);
    }
    cr_expect_gt(ran, 200, "%d configs", ran);
}

/* Issue 9 item 8 (elementwise): the cross-warp reduction addresses shared
 * memory from the symbol (mov.u32 %r, red), never from 0. Every wpr > 1
 * config of a softmax, a layernorm and an online/offline log_softmax runs
 * on sm_80 and sm_90 (1 KB reserved) with no shift, a 4 KB shift and the
 * default one; then the same kernel with the symbol replaced by 0 must be
 * caught (an access outside the shared array), so the test can fail. */
static char *zero_base(const char *text)
{
    /* "mov.u32 %rN, red;" -> "mov.u32 %rN, 0;" */
    char *out = malloc(strlen(text) + 1), *o = out;
    for (const char *q = text; *q;) {
        const char *m = strstr(q, "mov.u32 ");
        if (!m) {
            strcpy(o, q);
            o += strlen(q);
            break;
        }
        const char *comma = strchr(m, ',');
        const char *semi = strchr(m, ';');
        size_t upto = (size_t)(m - q);
        memcpy(o, q, upto);
        o += upto;
        if (comma && semi && comma < semi && strncmp(comma, ", red;", 6) == 0) {
            size_t head = (size_t)(comma - m);
            memcpy(o, m, head);
            o += head;
            memcpy(o, ", 0;", 4);
            o += 4;
            q = semi + 1;
        } else {
            memcpy(o, m, 8);
            o += 8;
            q = m + 8;
        }
    }
    *o = '\0';
    return out;
}

static void fill_uniform(int input, double *x, int64_t rows, int64_t cols, uint64_t seed)
{
    uint64_t s = (seed + (uint64_t)input) | 1;
    for (int64_t j = 0; j < rows * cols; j++)
        x[j] = 4 * rnd_unit(&s) - 2;
}

Test(emu_elementwise, shared_base_is_the_symbol, .timeout = 600)
{
    static const pt_problem ps[] = {
        PT_EW("y = softmax(x, -1)", "x=5x256", PT_BF16, PT_BF16),
        PT_EW("y = layernorm(x, -1) * g", "x=3x192,g=192", PT_F16, PT_F16),
        PT_EW("y = log_softmax(x, -1); m = mean(x, -1)", "x=4x512", PT_F32, PT_F32),
    };
    static const char *const archs[] = {"sm_80", "sm_90"};
    static const int shifts[] = {-1, 4096, 0};
    int ran = 0, caught = 0;
    for (int pi = 0; pi < 3; pi++)
        for (int ai = 0; ai < 2; ai++) {
            pt_target t;
            pt_err e = {0};
            pt_target_parse(archs[ai], &t, &e);
            pt_arena *a = pt_arena_new();
            pt_prepared *pp;
            cr_assert_eq(gen_elementwise_op.prepare(a, &ps[pi], &t, &pp, &e), PT_OK, "%s", e.msg);
            const ex_prog *prog = gen_elementwise_prog(pp);
            double *vals[2];
            for (int i = 0; i < prog->ninputs; i++) {
                vals[i] = malloc((size_t)prog->inputs[i].numel * sizeof **vals);
                fill_uniform(i, vals[i], 1, prog->inputs[i].numel, 77);
            }
            pt_space s;
            gen_elementwise_op.space(pp, &t, &s);
            for (int64_t i = 0; i < pt_space_size(&s); i++) {
                pt_config c;
                pt_space_config(&s, i, &c);
                if (pt_config_get(&c, "wpr", 1) == 1 || gen_elementwise_op.check(pp, &t, &c, &e))
                    continue;
                char cs[256];
                pt_config_str(&c, cs, sizeof cs);
                for (int si = 0; si < 3; si++) {
                    given_opts go = {shifts[si], NULL};
                    given_run g;
                    cr_assert_eq(run_given_opts(pp, &t, &c, vals, &go, &g, NULL, &e), PT_OK,
                                 "%s %s [%s] shift %d: %s", ps[pi].expr, archs[ai], cs, shifts[si],
                                 e.msg);
                    cr_assert_eq(g.bad, 0, "%s %s [%s] shift %d: %s", ps[pi].expr, archs[ai], cs,
                                 shifts[si], g.first);
                    ran++;
                }
                /* the emitted text takes the array's address from the symbol */
                ptx_module *m;
                pt_launch l;
                cr_assert_eq(pt_op_build(&gen_elementwise_op, pp, &t, 0, &c, &m, &l, &e), PT_OK);
                char *text = ptx_print(m);
                ptx_module_free(m);
                cr_expect(strstr(text, ", red;"), "%s [%s]: no mov of the symbol", ps[pi].expr, cs);
                free(text);
                /* and a kernel that assumes base 0 is caught on sm_90 (the
                 * reserved 1 KB) and with a shift on sm_80 */
                given_opts bad = {ai == 1 ? -1 : 4096, zero_base};
                given_run g;
                pt_err be = {0};
                int rc = run_given_opts(pp, &t, &c, vals, &bad, &g, NULL, &be);
                cr_expect_neq(rc, PT_OK, "%s %s [%s]: a zero-based kernel ran clean", ps[pi].expr,
                              archs[ai], cs);
                cr_expect(strstr(be.msg, "out-of-bounds") || strstr(be.msg, "out of bounds"),
                          "%s", be.msg);
                caught += rc != PT_OK;
            }
            for (int i = 0; i < prog->ninputs; i++)
                free(vals[i]);
            pt_arena_free(a);
        }
    printf("emu_elementwise: %d runs of wpr>1 configs with shared bases shifted; %d zero-based "
           "mutants caught\n", ran, caught);
    cr_expect_gt(ran, 100);
}
