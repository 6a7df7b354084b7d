/* The benchmark protocol: statistics and the adaptive stopping rule on
 * synthetic timing streams (a fake clock makes the time budget exact), and
 * the whole protocol on the mock device. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tuner/bench.h"

/* A synthetic stream: base time, multiplicative noise, periodic outliers,
 * or a bimodal alternation; every sample advances a fake clock. */
typedef struct stream {
    double base, noise;
    int outlier_every;  /* every k-th sample is outlier_factor x base */
    double outlier_factor;
    bool bimodal;       /* alternate base and 2 x base */
    int fail_at;        /* sample index that returns an error (0: never) */
    int n;
    uint64_t rng;
    double clock, step; /* fake seconds, advanced by step per sample */
} stream;

static double gauss(uint64_t *s)
{
    double u = 0;
    for (int i = 0; i < 12; i++) { /* Irwin-Hall: close enough to normal */
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        u += (double)(*s >> 11) / (double)(1ull << 53);
    }
    return u - 6.0;
}

static int draw(void *ctx, double *sec, pt_err *e)
{
    stream *s = ctx;
    s->n++;
    s->clock += s->step;
    if (s->fail_at && s->n == s->fail_at)
        return pt_errf(e, PT_EIO, "synthetic failure at sample %d", s->n);
    double v = s->base * (1.0 + s->noise * gauss(&s->rng));
    if (s->bimodal)
        v = s->n % 2 ? s->base : 2 * s->base;
    if (s->outlier_every && s->n % s->outlier_every == 0)
        v = s->base * s->outlier_factor;
    *sec = v;
    return PT_OK;
}

static double fake_clock(void *ctx) { return ((stream *)ctx)->clock; }

static tuner_bench_opts opts_for(stream *s)
{
    tuner_bench_opts o = {0};
    o.clock = fake_clock;
    o.clock_ctx = s;
    return o;
}

Test(tuner_stats, order_statistics_and_ci)
{
    double x[100];
    for (int i = 0; i < 100; i++)
        x[i] = 100 - i; /* 100..1, unsorted on purpose */
    tuner_stats st;
    tuner_stats_compute(x, 100, &st);
    cr_expect_eq(st.n, 100);
    cr_expect_float_eq(st.min, 1, 1e-12);
    cr_expect_float_eq(st.max, 100, 1e-12);
    cr_expect_float_eq(st.median, 50.5, 1e-12);
    /* ranks 50 -+ 0.98 * 10: 1-based 40 and 61 */
    cr_expect_float_eq(st.ci_lo, 40, 1e-12, "ci_lo %g", st.ci_lo);
    cr_expect_float_eq(st.ci_hi, 61, 1e-12, "ci_hi %g", st.ci_hi);
    cr_expect_float_eq(st.spread, 21.0 / (2 * 50.5), 1e-12);
    cr_expect_eq(st.outliers, 0);
    cr_expect_float_eq(st.mean, 50.5, 1e-12);
    cr_expect(fabs(st.cv - 29.011491975882016 / 50.5) < 1e-9, "cv %g", st.cv);
    tuner_stats_compute(x, 1, &st);
    cr_expect_eq(st.n, 1);
    cr_expect_float_eq(st.median, 100, 1e-12);
    cr_expect_float_eq(st.spread, 0, 1e-12);
    cr_expect_float_eq(st.cv, 0, 1e-12);
}

Test(tuner_stats, constant_stream_converges_at_min_reps)
{
    stream s = {.base = 10e-6, .step = 1e-3};
    tuner_bench_opts o = opts_for(&s);
    tuner_stats st;
    bool conv;
    pt_err e = {0};
    cr_assert_eq(tuner_bench_adaptive(&o, draw, &s, &st, &conv, &e), PT_OK, "%s", e.msg);
    cr_expect(conv);
    cr_expect_eq(st.n, 10);
    cr_expect_float_eq(st.median, 10e-6, 1e-15);
    cr_expect_float_eq(st.cv, 0, 1e-12);
}

Test(tuner_stats, noisy_stream_converges_near_the_truth)
{
    stream s = {.base = 20e-6, .noise = 0.01, .rng = 7, .step = 1e-4};
    tuner_bench_opts o = opts_for(&s);
    tuner_stats st;
    bool conv;
    pt_err e = {0};
    cr_assert_eq(tuner_bench_adaptive(&o, draw, &s, &st, &conv, &e), PT_OK, "%s", e.msg);
    cr_expect(conv, "1%% noise must reach a 0.5%% spread within the budget (n=%d spread %g)", st.n,
              st.spread);
    cr_expect(st.n > 10 && st.n < 1000, "n=%d", st.n);
    cr_expect(st.spread < 0.005, "spread %g", st.spread);
    cr_expect(fabs(st.median / 20e-6 - 1) < 0.005, "median %g", st.median);
    cr_expect(fabs(st.cv - 0.01) < 0.004, "cv %g", st.cv);
}

Test(tuner_stats, outliers_do_not_move_the_median)
{
    /* every 20th sample is 10x slower: preemption, a clock dip */
    stream s = {.base = 5e-6, .noise = 0.002, .outlier_every = 20, .outlier_factor = 10, .rng = 3,
                .step = 1e-4};
    tuner_bench_opts o = opts_for(&s);
    o.min_reps = 200;
    o.max_reps = 200;
    tuner_stats st;
    bool conv;
    pt_err e = {0};
    cr_assert_eq(tuner_bench_adaptive(&o, draw, &s, &st, &conv, &e), PT_OK);
    cr_expect_eq(st.n, 200);
    cr_expect_eq(st.outliers, 10, "outliers %d", st.outliers);
    cr_expect(fabs(st.median / 5e-6 - 1) < 0.002, "median %g", st.median);
    cr_expect(fabs(st.mean / 5e-6 - 1) < 0.002, "mean without outliers %g", st.mean);
    cr_expect(st.cv < 0.005, "cv without outliers %g", st.cv);
    cr_expect_float_eq(st.max, 50e-6, 1e-12);
}

Test(tuner_stats, budget_stops_a_stream_that_never_settles)
{
    /* two modes: the median's CI spans both forever */
    stream s = {.base = 1e-6, .bimodal = true, .step = 1e-3};
    tuner_bench_opts o = opts_for(&s);
    o.budget_ms = 50; /* 50 fake samples */
    tuner_stats st;
    bool conv;
    pt_err e = {0};
    cr_assert_eq(tuner_bench_adaptive(&o, draw, &s, &st, &conv, &e), PT_OK);
    cr_expect(!conv);
    cr_expect_eq(st.n, 50, "n=%d", st.n);
    cr_expect(st.spread > 0.1);
}

Test(tuner_stats, max_reps_caps_and_errors_propagate)
{
    stream s = {.base = 1e-6, .bimodal = true, .step = 1e-9};
    tuner_bench_opts o = opts_for(&s);
    o.max_reps = 37;
    tuner_stats st;
    bool conv;
    pt_err e = {0};
    cr_assert_eq(tuner_bench_adaptive(&o, draw, &s, &st, &conv, &e), PT_OK);
    cr_expect_eq(st.n, 37);
    cr_expect(!conv);
    stream f = {.base = 1e-6, .noise = 0.5, .fail_at = 15, .step = 1e-9};
    o = opts_for(&f);
    cr_expect_eq(tuner_bench_adaptive(&o, draw, &f, &st, &conv, &e), PT_EIO);
    cr_expect(strstr(e.msg, "sample 15"), "%s", e.msg);
    cr_expect_eq(st.n, 14, "the samples before the error are kept (n=%d)", st.n);
}

/* The whole protocol on the mock device: a short kernel goes to graph
 * batches with rotating sets, figures come from the op's counts. */
Test(tuner_bench, protocol_on_the_mock)
{
    pt_problem pb = PT_EW("y = x * 2 + 1", "x=256x256", PT_F32, PT_F32);
    pt_target t = {80, false, false};
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    pt_err e = {0};
    cr_assert_eq(gen_elementwise_op.prepare(a, &pb, &t, &pp, &e), PT_OK, "%s", e.msg);
    tuner_dev *d;
    tuner_dev_opts dopt = {.mock_seed = 5};
    cr_assert_eq(tuner_dev_open("mock", &dopt, &d, &e), PT_OK, "%s", e.msg);
    tuner_io *io;
    cr_assert_eq(tuner_io_new(&gen_elementwise_op, pp, &io, &e), PT_OK);
    tuner_io_random(io, 1, 0, 0);
    pt_launch l = {.grid = {64, 1, 1}, .block = {256, 1, 1}, .nargs = 2,
                   .args = {{PT_ARG_OUTPUT, 0, 0, 0}, {PT_ARG_INPUT, 0, 0, 0}}, .entry = "k"};
    const char *ptx = "// mock: time_us=4\n";
    tuner_image img = {ptx, strlen(ptx), NULL, 0, "k", &gen_elementwise_op, pp};
    tuner_kernel *k;
    cr_assert_eq(tuner_load(d, &img, &k, &e), PT_OK);
    tuner_bench_result r;
    cr_assert_eq(tuner_bench(d, k, &l, io, NULL, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(r.protocol, TUNER_BENCH_PROTOCOL);
    cr_expect(r.graph, "a 4 us kernel is timed in graphs");
    cr_expect_eq(r.batch, 200, "batch %d (warm-up launches take 4 + 1 us)", r.batch);
    /* working set 512 KB, L2 4 MB: 16 copies cover 2 x L2 */
    cr_expect_eq(r.nsets, 16, "nsets %d", r.nsets);
    cr_expect(r.flushed);
    cr_expect(r.st.n >= 10);
    cr_expect(fabs(r.st.median / 4e-6 - 1) < 0.01, "median %g", r.st.median);
    cr_expect(fabs(r.gbs - r.bytes / r.st.median * 1e-9) < 1e-6);
    cr_expect_float_eq(r.bytes, 256.0 * 256 * 8, 1e-9);
    cr_expect(r.roofline > 0 && r.roofline < 1, "roofline %g", r.roofline);
    cr_expect_eq(r.sm_mhz_before, 1980);
    /* a long kernel: one launch per sample, no graph */
    tuner_unload(d, k);
    ptx = "// mock: time_us=500\n";
    img.ptx = ptx;
    img.ptx_len = strlen(ptx);
    cr_assert_eq(tuner_load(d, &img, &k, &e), PT_OK);
    tuner_bench_opts o = {.warm_l2 = true};
    cr_assert_eq(tuner_bench(d, k, &l, io, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(!r.graph);
    cr_expect_eq(r.batch, 1);
    cr_expect_eq(r.nsets, 1);
    cr_expect(!r.flushed);
    tuner_unload(d, k);
    tuner_io_free(d, io);
    tuner_dev_close(d);
    pt_arena_free(a);
}

Test(tuner_bench, emulator_does_not_time)
{
    tuner_dev *d;
    pt_err e = {0};
    cr_assert_eq(tuner_dev_open("emu", NULL, &d, &e), PT_OK, "%s", e.msg);
    cr_expect(!tuner_dev_can_time(d));
    tuner_batch *b;
    cr_expect_eq(tuner_batch_new(d, NULL, NULL, NULL, 1, 1, false, &b, &e), PT_EUNSUPPORTED);
    cr_expect(strstr(e.msg, "does not time"), "%s", e.msg);
    tuner_dev_close(d);
}
