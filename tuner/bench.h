/* The benchmark protocol, "ptxtune-bench/1". Every figure it produces
 * carries that name (tuner_bench_result.protocol); a change to any rule
 * below bumps the version, so stored figures never mix protocols.
 *
 *  1. Warm-up: single launches until 20 ms of kernel time or of wall time
 *     have passed (at least 3, at most 100 launches); their median is the
 *     kernel's rough time t1.
 *  2. Batching: a kernel with t1 under 50 us is timed in batches of
 *     b = ceil(1 ms / t1) launches (2..1000) recorded once as a CUDA graph,
 *     so launch overhead and event resolution do not count; one sample is
 *     the batch's time / b (plain launches when the capture fails, then
 *     graph = false says so). Longer kernels: one launch per sample.
 *  3. Cold L2: before every sample a buffer of max(2 x L2, 4 MB) is
 *     rewritten (cuMemsetD32Async with a new value), outside the timed span.
 *     Inside a batch, launches rotate over k copies of all tensors, k =
 *     ceil(2 x L2 / working set) capped at the batch size and at 64, so a
 *     launch finds its data evicted by the ones before it (unless 64 copies
 *     cannot cover 2 x L2: nsets says how many were used).
 *  4. Adaptive repetitions: at least 10 samples, then until the median's
 *     relative spread (half the width of its distribution-free 95%
 *     confidence interval, order statistics at n/2 -+ 0.98 sqrt(n), over the
 *     median) is under 0.5 %, or 1000 samples, or 500 ms of wall time.
 *  5. Statistics: min, median, max over all samples; mean and coefficient
 *     of variation without the outliers, samples above median + max(5 x
 *     1.4826 x MAD, 1 % of the median) (preemption, clock dips), which are
 *     counted. TFLOP/s and GB/s from the op's flop and byte counts at the
 *     median; roofline = max(flops / peak flops, bytes / peak bandwidth) /
 *     median (peaks: tuner_peak_tflops and tuner_devinfo.peak_gbs).
 *  6. SM clock and temperature (NVML) just before and after the samples.
 */
#ifndef TUNER_BENCH_H
#define TUNER_BENCH_H

#include "tuner/backend.h"
#include "tuner/verify.h"

#define TUNER_BENCH_PROTOCOL "ptxtune-bench/1"

typedef struct tuner_stats {
    int n;                /* samples */
    double min, median, max;
    double mean, cv;      /* without outliers; cv = stddev / mean */
    double ci_lo, ci_hi;  /* 95% confidence interval of the median */
    double spread;        /* (ci_hi - ci_lo) / (2 median) */
    int outliers;
} tuner_stats;

/* Statistics of n samples (n >= 1; x is not modified). */
void tuner_stats_compute(const double *x, int n, tuner_stats *st);

typedef struct tuner_bench_opts {
    double warmup_ms;      /* 0: 20 */
    int min_reps;          /* 0: 10 */
    int max_reps;          /* 0: 1000 */
    double budget_ms;      /* wall time of the measured samples; 0: 500 */
    double target_spread;  /* 0: 0.005 */
    double graph_below_us; /* 0: 50 */
    double sample_us;      /* a batch lasts about this; 0: 1000 */
    bool warm_l2;          /* no flush, no rotation: measure with a warm L2 */
    bool no_graph;         /* batches as plain launches, not graphs */
    /* Wall clock in seconds (tests pass a fake one); NULL: CLOCK_MONOTONIC. */
    double (*clock)(void *ctx);
    void *clock_ctx;
} tuner_bench_opts;

/* A source of timing samples (seconds per launch). */
typedef int (*tuner_sample_fn)(void *ctx, double *seconds, pt_err *e);

/* Steps 4 and 5 over any sample source: draws samples until the stopping
 * rule holds. *converged: the spread target was met (not the budget or the
 * cap). On error the statistics of the samples so far are kept. */
int tuner_bench_adaptive(const tuner_bench_opts *o, tuner_sample_fn fn, void *ctx,
                         tuner_stats *st, bool *converged, pt_err *e);

typedef struct tuner_bench_result {
    char protocol[24];
    tuner_stats st;         /* seconds per launch */
    bool converged;
    int batch;              /* launches per sample */
    bool graph;
    bool flushed;           /* L2 rewritten before every sample */
    int nsets;              /* rotating tensor sets */
    double t1_us;           /* warm-up estimate */
    double wall_ms;
    double flops, bytes;    /* per launch, from the op */
    double tflops, gbs, roofline;
    int sm_mhz_before, sm_mhz_after, temp_before, temp_after; /* 0: unknown */
} tuner_bench_result;

/* The whole protocol for kernel k launched as l on io's tensors (allocated
 * and uploaded here when they are not yet). */
int tuner_bench(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io,
                const tuner_bench_opts *o, tuner_bench_result *r, pt_err *e);

#endif
