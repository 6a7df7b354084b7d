/* The benchmark protocol (rules and their reasons in bench.h). */
#include "tuner/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_SETS = 64, WARMUP_MIN = 3, WARMUP_MAX = 100 };

static double mono_s(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of a sorted array. */
static double median_sorted(const double *s, int n)
{
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

void tuner_stats_compute(const double *x, int n, tuner_stats *st)
{
    memset(st, 0, sizeof *st);
    if (n < 1)
        return;
    double *s = malloc((size_t)n * sizeof *s);
    double *dev = malloc((size_t)n * sizeof *dev);
    if (!s || !dev) {
        free(s);
        free(dev);
        return;
    }
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    st->n = n;
    st->min = s[0];
    st->max = s[n - 1];
    st->median = median_sorted(s, n);
    /* distribution-free CI of the median: ranks n/2 -+ 0.98 sqrt(n) (1-based) */
    double h = 0.98 * sqrt((double)n);
    int lo = (int)floor(n / 2.0 - h) - 1, hi = (int)ceil(1 + n / 2.0 + h) - 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi > n - 1 ? n - 1 : hi;
    st->ci_lo = s[lo];
    st->ci_hi = s[hi];
    st->spread = st->median > 0 ? (st->ci_hi - st->ci_lo) / (2 * st->median) : 0;
    for (int i = 0; i < n; i++)
        dev[i] = fabs(s[i] - st->median);
    qsort(dev, (size_t)n, sizeof *dev, cmp_double);
    double mad = median_sorted(dev, n);
    double cut = st->median + fmax(5 * 1.4826 * mad, 0.01 * st->median);
    double sum = 0, sum2 = 0;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] > cut) {
            st->outliers++;
            continue;
        }
        sum += s[i];
        kept++;
    }
    st->mean = sum / kept;
    for (int i = 0; i < n; i++)
        if (s[i] <= cut)
            sum2 += (s[i] - st->mean) * (s[i] - st->mean);
    st->cv = kept > 1 && st->mean > 0 ? sqrt(sum2 / (kept - 1)) / st->mean : 0;
    free(s);
    free(dev);
}

int tuner_bench_adaptive(const tuner_bench_opts *o, tuner_sample_fn fn, void *ctx,
                         tuner_stats *st, bool *converged, pt_err *e)
{
    tuner_bench_opts def = {0};
    if (!o)
        o = &def;
    int min_reps = o->min_reps > 0 ? o->min_reps : 10;
    int max_reps = o->max_reps > 0 ? o->max_reps : 1000;
    if (max_reps < min_reps)
        max_reps = min_reps;
    double budget = (o->budget_ms > 0 ? o->budget_ms : 500) * 1e-3;
    double target = o->target_spread > 0 ? o->target_spread : 0.005;
    double (*clk)(void *) = o->clock ? o->clock : mono_s;
    double *x = malloc((size_t)max_reps * sizeof *x);
    if (!x)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    memset(st, 0, sizeof *st);
    *converged = false;
    double t0 = clk(o->clock_ctx);
    int n = 0, rc = PT_OK;
    while (n < max_reps) {
        rc = fn(ctx, &x[n], e);
        if (rc)
            break;
        n++;
        if (n < min_reps)
            continue;
        tuner_stats_compute(x, n, st);
        if (st->spread < target) {
            *converged = true;
            break;
        }
        if (clk(o->clock_ctx) - t0 >= budget)
            break;
    }
    if (n > 0)
        tuner_stats_compute(x, n, st);
    free(x);
    return rc;
}

/* ---- the protocol on a device ---- */

typedef struct sampler {
    tuner_dev *d;
    tuner_batch *b;
    tuner_ptr flush;
    size_t flush_bytes;
    int count;
    double device_ms; /* sum of measured times, for the warm-up rule */
} sampler;

static int draw(void *ctx, double *seconds, pt_err *e)
{
    sampler *s = ctx;
    double ms = 0;
    int rc = tuner_batch_time(s->d, s->b, s->flush, s->flush_bytes, &ms, e);
    s->device_ms += ms;
    *seconds = ms * 1e-3 / s->count;
    return rc;
}

typedef struct sets {
    int n;
    tuner_ptr in[MAX_SETS][TUNER_MAX_TENSORS], out[MAX_SETS][TUNER_MAX_TENSORS];
    tuner_args args[MAX_SETS];
    void *const *argv[MAX_SETS];
} sets;

/* Set 0 is io's own buffers; the others are fresh copies of the inputs. */
static int make_sets(tuner_dev *d, const pt_launch *l, tuner_io *io, int n, sets *s, pt_err *e)
{
    int rc = PT_OK;
    s->n = 0;
    for (int k = 0; k < n && !rc; k++) {
        for (int i = 0; i < io->nin && !rc; i++) {
            if (k == 0) {
                s->in[k][i] = io->in_dev[i];
                continue;
            }
            rc = tuner_alloc(d, io->in_bytes[i], &s->in[k][i], e);
            if (!rc)
                rc = tuner_write(d, s->in[k][i], io->in_bits[i], io->in_bytes[i], e);
            if (rc)
                s->in[k][i] = 0;
        }
        for (int i = 0; i < io->nout && !rc; i++) {
            if (k == 0) {
                s->out[k][i] = io->out_dev[i];
                continue;
            }
            rc = tuner_alloc(d, io->out_bytes[i], &s->out[k][i], e);
            if (rc)
                s->out[k][i] = 0;
        }
        s->n = k + 1;
        if (!rc)
            rc = k == 0 ? tuner_io_bind(d, io, l, &s->args[k], e)
                        : tuner_args_bind(d, &s->args[k], l, s->in[k], s->out[k], io->ws, e);
        s->argv[k] = s->args[k].p;
    }
    return rc;
}

static void free_sets(tuner_dev *d, const tuner_io *io, sets *s)
{
    for (int k = 1; k < s->n; k++) {
        for (int i = 0; i < io->nin; i++)
            tuner_free(d, s->in[k][i]);
        for (int i = 0; i < io->nout; i++)
            tuner_free(d, s->out[k][i]);
    }
    s->n = 0;
}

int tuner_bench(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io,
                const tuner_bench_opts *o, tuner_bench_result *r, pt_err *e)
{
    tuner_bench_opts def = {0};
    if (!o)
        o = &def;
    memset(r, 0, sizeof *r);
    strcpy(r->protocol, TUNER_BENCH_PROTOCOL);
    if (!tuner_dev_can_time(d))
        return pt_errf(e, PT_EUNSUPPORTED, "the %s backend does not time kernels",
                       tuner_dev_info(d)->backend);
    double (*clk)(void *) = o->clock ? o->clock : mono_s;
    double t_start = clk(o->clock_ctx);
    const tuner_devinfo *di = tuner_dev_info(d);
    tuner_dev_reset_failure(d);
    int rc = PT_OK;
    if (!io->allocated) {
        rc = tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), e);
        if (!rc)
            rc = tuner_io_upload(d, io, e);
        if (rc)
            return rc;
    }
    r->flops = io->op->flops(io->pp);
    r->bytes = io->op->bytes(io->pp);
    r->flushed = !o->warm_l2 && di->l2_bytes > 0;
    size_t flush_bytes = 0;
    tuner_ptr flush = 0;
    if (r->flushed) {
        flush_bytes = (size_t)di->l2_bytes * 2;
        if (flush_bytes < (4u << 20))
            flush_bytes = 4u << 20;
        rc = tuner_alloc(d, flush_bytes, &flush, e);
        if (rc)
            return rc;
    }
    sets *s = calloc(1, sizeof *s);
    tuner_batch *b = NULL;
    if (!s) {
        tuner_free(d, flush);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    rc = make_sets(d, l, io, 1, s, e);

    /* 1. warm-up: single launches */
    if (!rc)
        rc = tuner_batch_new(d, k, l, s->argv, 1, 1, false, &b, e);
    sampler sm = {d, b, flush, flush_bytes, 1, 0};
    double warm[WARMUP_MAX];
    int nwarm = 0;
    double warm_s = (o->warmup_ms > 0 ? o->warmup_ms : 20) * 1e-3, tw = clk(o->clock_ctx);
    while (!rc && nwarm < WARMUP_MAX) {
        rc = draw(&sm, &warm[nwarm], e);
        if (rc)
            break;
        nwarm++;
        if (nwarm >= WARMUP_MIN &&
            (sm.device_ms * 1e-3 >= warm_s || clk(o->clock_ctx) - tw >= warm_s))
            break;
    }
    if (!rc) {
        qsort(warm, (size_t)nwarm, sizeof *warm, cmp_double);
        r->t1_us = median_sorted(warm, nwarm) * 1e6;
    }

    /* 2-3. batching, rotation */
    r->batch = 1;
    r->nsets = 1;
    double graph_below = o->graph_below_us > 0 ? o->graph_below_us : 50;
    if (!rc && r->t1_us < graph_below) {
        double sample = o->sample_us > 0 ? o->sample_us : 1000;
        double bt = ceil(sample / fmax(r->t1_us, 0.1));
        r->batch = bt < 2 ? 2 : bt > 1000 ? 1000 : (int)bt;
        r->graph = !o->no_graph;
        if (r->flushed) {
            double ws = 0;
            for (int i = 0; i < io->nin; i++)
                ws += (double)io->in_bytes[i];
            for (int i = 0; i < io->nout; i++)
                ws += (double)io->out_bytes[i];
            double need = ceil(2.0 * (double)di->l2_bytes / fmax(ws, 1));
            int ns = need < 1 ? 1 : need > MAX_SETS ? MAX_SETS : (int)need;
            r->nsets = ns < r->batch ? ns : r->batch;
        }
        tuner_batch_free(d, b);
        b = NULL;
        rc = make_sets(d, l, io, r->nsets, s, e);
        if (!rc)
            rc = tuner_batch_new(d, k, l, s->argv, r->nsets, r->batch, r->graph, &b, e);
        if (rc && r->graph && !tuner_dev_sticky(d)) {
            /* a kernel the driver cannot capture: plain launches still batch */
            pt_err_clear(e);
            tuner_dev_reset_failure(d);
            r->graph = false;
            rc = tuner_batch_new(d, k, l, s->argv, r->nsets, r->batch, false, &b, e);
        }
        sm = (sampler){d, b, flush, flush_bytes, r->batch, 0};
        double dummy;
        for (int i = 0; i < 2 && !rc; i++) /* graph upload, first-touch of the copies */
            rc = draw(&sm, &dummy, e);
    }

    /* 4-6. samples between two clock readings */
    pt_err ce = {0};
    int mhz[2] = {0, 0}, temp[2] = {0, 0};
    if (!rc && tuner_clock(d, &mhz[0], &temp[0], &ce) == PT_OK) {
        r->sm_mhz_before = mhz[0];
        r->temp_before = temp[0];
    }
    if (!rc)
        rc = tuner_bench_adaptive(o, draw, &sm, &r->st, &r->converged, e);
    pt_err_clear(&ce);
    if (!rc && tuner_clock(d, &mhz[1], &temp[1], &ce) == PT_OK) {
        r->sm_mhz_after = mhz[1];
        r->temp_after = temp[1];
    }
    if (!rc && r->st.median > 0) {
        r->tflops = r->flops / r->st.median * 1e-12;
        r->gbs = r->bytes / r->st.median * 1e-9;
        double pf = tuner_peak_tflops(di, io->op->name, io->nin ? io->in[0].dtype : PT_F32) * 1e12;
        double pb = di->peak_gbs * 1e9;
        double ideal = fmax(pf > 0 ? r->flops / pf : 0, pb > 0 ? r->bytes / pb : 0);
        r->roofline = ideal / r->st.median;
    }
    tuner_batch_free(d, b);
    free_sets(d, io, s);
    free(s);
    tuner_free(d, flush);
    r->wall_ms = (clk(o->clock_ctx) - t_start) * 1e3;
    return rc;
}
