/* Adversarial GEMM inputs (issue 13 acceptance): NaN, +-inf, values near
 * the dtype's maximum, subnormals, integer extremes and rounding ties,
 * written over a case's random inputs (tuner_io_random) before the upload.
 * The kernel is then compared with the float64 reference under the
 * verifier's own rules (tuner/verify.h: a non-finite expected value matches
 * only its own class, an overflow of the output format is +-inf, finite ones
 * within the arithmetic tolerance); the semantics are docs/gemm.md's
 * "Non-finite and extreme inputs". Shared by tests/test_gemm_emu.c (mma.sync)
 * and tests/test_gemm_sm90.c (wgmma). */
#ifndef PT_TEST_GEMM_ADV_H
#define PT_TEST_GEMM_ADV_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/dtype.h"
#include "gen/op.h"
#include "tuner/verify.h"

/* One planted element: tensor 'a' at (row i, k), 'b' at (k, col j), 'c' at
 * (i, j) or an epilogue vector by name ("bias": its element j). Negative
 * coordinates count from the end (-1: the last); one past the end along a
 * leading dimension (k = K of a row-major A with lda > K) is the row's
 * padding, which no kernel may read. */
typedef struct adv_pt {
    const char *t;
    int64_t r, c;
    double v;
} adv_pt;

/* Whole-tensor fills, before the points. */
typedef enum {
    ADV_NONE,
    ADV_HUGE,     /* A and B: +-(0.5 .. 1) x the dtype's maximum (f16 65504, e4m3 448,
                     e5m2 57344; bf16, tf32, f32 2^60, so that no product or sum leaves the
                     f32 accumulator's range) */
    ADV_HUGE_ROW, /* A row 1: +-(0.5 .. 1) x the dtype's maximum, the rest as made */
    ADV_TINY_A,   /* A: subnormals of its dtype (f16 k 2^-24, bf16 k 2^-133, f32/tf32
                     k 2^-149 .. 2^-130, fp8 its subnormals), random signs */
    ADV_INT_EXT,  /* s8: A, B from {-128, 127, -1, 1}, A row 0 and B column 0 all -128;
                     u8: {255, 254, 1, 0}, A row 0 and B column 0 all 255 */
    ADV_TIES,     /* A = 1, B(0, j) = 1, B(1, j) = (2 (j mod 8) + 1) 2^-11, the rest 0:
                     every D(i, j) = 1 + odd 2^-11 + ..., a tie of f16 (and nearly of bf16) */
} adv_fill;

typedef struct adv_spec {
    const char *name;
    adv_fill fill;
    int npts;
    adv_pt pts[6];
    int64_t min_nonfinite; /* the reference must hold at least this many NaN/inf outputs */
} adv_spec;

/* dyn=m: the plants sit in the last row (negative rows count from the run's
 * M), so they exist at every M, 1 included; A's padding plant is k = 64:
 * A row-major with K = 64 and lda > 64 */
static const adv_spec adv_dyn_a = {"inf in A's last row's padding (k = K), NaN in B's last column", ADV_NONE, 2,
                                  {{"a", -1, 64, INFINITY}, {"b", -1, -1, NAN}}, 1};
static const adv_spec adv_dyn_b = {"+-inf in B's last k", ADV_NONE, 2,
                                  {{"b", -1, 0, INFINITY}, {"b", -1, -1, -INFINITY}}, 2};
static const adv_spec adv_dyn_nan = {"NaN in B's last k (e4m3 has no inf)", ADV_NONE, 2,
                                    {{"b", -1, 0, NAN}, {"b", -1, -1, NAN}}, 2};
static const adv_spec adv_dyn_c = {"NaN and -inf in C's last row", ADV_NONE, 2,
                                  {{"c", -1, 0, NAN}, {"c", -1, -1, -INFINITY}}, 2};

typedef struct adv_arg {
    const adv_spec *s;
    const char *layout; /* the problem's, "nt" ... */
    int64_t m, n, k;
    int64_t lda, ldb;   /* 0: packed */
    int64_t nonfinite;  /* NaN/inf elements of the reference (counted at the plant) */
    int64_t planted;    /* points written */
    int rc;             /* the reference's status at the plant */
} adv_arg;

static uint64_t adv_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Element j of input ti set to v, stored in its dtype (fp8 NaN and e5m2
 * infinities by their bit patterns: the host conversion saturates, as
 * cvt.rn.satfinite does); the reference sees the stored value. */
static void adv_set(tuner_io *io, int ti, int64_t j, double v)
{
    pt_dtype dt = io->in[ti].dtype;
    uint8_t *b8 = io->in_bits[ti];
    if ((dt == PT_E4M3 || dt == PT_E5M2) && isnan(v))
        b8[j] = 0x7f;
    else if (dt == PT_E5M2 && isinf(v))
        b8[j] = v > 0 ? 0x7c : 0xfc;
    else
        pt_dtype_store(dt, io->in_bits[ti], (size_t)j, v);
    io->in[ti].data[j] = pt_dtype_load(dt, io->in_bits[ti], (size_t)j);
}

static int adv_tensor(const tuner_io *io, const char *name)
{
    for (int i = 0; i < io->nin; i++)
        if (!strcmp(io->in[i].name, name))
            return i;
    return -1;
}

static int64_t adv_at(int64_t v, int64_t n) { return v < 0 ? n + v : v; }

/* Storage index of A(i, k) / B(k, j) (packed, batch 0). */
static int64_t adv_a(const adv_arg *g, int64_t i, int64_t k)
{
    int64_t ld = g->lda ? g->lda : g->layout[0] == 'n' ? g->k : g->m;
    return g->layout[0] == 'n' ? i * ld + k : k * ld + i;
}
static int64_t adv_b(const adv_arg *g, int64_t k, int64_t j)
{
    int64_t ld = g->ldb ? g->ldb : g->layout[1] == 'n' ? g->n : g->k;
    return g->layout[1] == 'n' ? k * ld + j : j * ld + k;
}

static double adv_max(pt_dtype dt)
{
    switch (dt) {
    case PT_F16: return 65504.0;
    case PT_E4M3: return 448.0;
    case PT_E5M2: return 57344.0;
    case PT_S8: return 127.0;
    case PT_U8: return 255.0;
    default: return 0x1p60;
    }
}

static double adv_subnormal(pt_dtype dt, uint64_t *s)
{
    double k = (double)(adv_rand(s) % 1023 + 1);
    switch (dt) {
    case PT_F16: return k * 0x1p-24;
    case PT_BF16: return (double)(adv_rand(s) % 127 + 1) * 0x1p-133;
    case PT_E4M3: return (double)(adv_rand(s) % 7 + 1) * 0x1p-9;
    case PT_E5M2: return (double)(adv_rand(s) % 3 + 1) * 0x1p-16;
    default: return k * 0x1p-140; /* f32 / tf32 subnormals (below 2^-126) */
    }
}

static void adv_plant(tuner_io *io, void *arg)
{
    adv_arg *g = arg;
    const adv_spec *s = g->s;
    int ta = adv_tensor(io, "a"), tb = adv_tensor(io, "b");
    pt_dtype dt = io->in[ta].dtype;
    uint64_t r = 0x9e3779b97f4a7c15ull ^ (uint64_t)(g->m * 1000003 + g->n * 1009 + g->k);
    int64_t M = g->m, N = g->n, K = g->k;
    switch (s->fill) {
    case ADV_NONE: break;
    case ADV_HUGE:
        for (int t = 0; t < 2; t++) {
            int ti = t ? tb : ta;
            for (int64_t j = 0; j < io->in[ti].numel; j++) {
                double f = 0.5 + 0.5 * (double)(adv_rand(&r) % 1024) / 1024.0;
                double v = adv_max(dt) * f;
                adv_set(io, ti, j, adv_rand(&r) & 1 ? v : -v);
            }
        }
        break;
    case ADV_HUGE_ROW:
        for (int64_t k = 0; k < K; k++) {
            double f = 0.5 + 0.5 * (double)(adv_rand(&r) % 1024) / 1024.0, v = adv_max(dt) * f;
            adv_set(io, ta, adv_a(g, 1, k), adv_rand(&r) & 1 ? v : -v);
        }
        break;
    case ADV_TINY_A:
        for (int64_t j = 0; j < io->in[ta].numel; j++) {
            double v = adv_subnormal(dt, &r);
            adv_set(io, ta, j, adv_rand(&r) & 1 ? v : -v);
        }
        break;
    case ADV_INT_EXT: {
        static const double s8v[4] = {-128, 127, -1, 1}, u8v[4] = {255, 254, 1, 0};
        const double *vals = dt == PT_S8 ? s8v : u8v;
        for (int t = 0; t < 2; t++) {
            int ti = t ? tb : ta;
            for (int64_t j = 0; j < io->in[ti].numel; j++)
                adv_set(io, ti, j, vals[adv_rand(&r) % 4]);
        }
        for (int64_t k = 0; k < K; k++) {
            adv_set(io, ta, adv_a(g, 0, k), vals[0]);
            adv_set(io, tb, adv_b(g, k, 0), vals[0]);
        }
        break;
    }
    case ADV_TIES:
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                adv_set(io, ta, adv_a(g, i, k), 1.0);
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++)
                adv_set(io, tb, adv_b(g, k, j),
                        k == 0 ? 1.0 : k == 1 ? (double)(2 * (j % 8) + 1) * 0x1p-11 : 0.0);
        break;
    }
    for (int p = 0; p < s->npts; p++) {
        const adv_pt *q = &s->pts[p];
        int ti = adv_tensor(io, q->t);
        if (ti < 0)
            continue;
        int64_t j;
        if (!strcmp(q->t, "a"))
            j = adv_a(g, adv_at(q->r, M), adv_at(q->c, K));
        else if (!strcmp(q->t, "b"))
            j = adv_b(g, adv_at(q->r, K), adv_at(q->c, N));
        else if (!strcmp(q->t, "c"))
            j = adv_at(q->r, M) * N + adv_at(q->c, N);
        else
            j = adv_at(q->c, io->in[ti].numel);
        adv_set(io, ti, j, q->v);
        g->planted++;
    }
    /* the reference's non-finite outputs, so a case cannot pass vacuously */
    pt_tensor o = io->out[0];
    o.data = malloc((size_t)o.numel * sizeof *o.data);
    pt_err e = {0};
    g->nonfinite = 0;
    g->rc = o.data ? io->op->reference(io->pp, io->in, &o, &e) : PT_ENOMEM;
    bool fl = pt_dtype_get(o.dtype)->is_float && o.dtype != PT_F64;
    for (int64_t j = 0; o.data && !g->rc && j < o.numel; j++) /* as stored: f16 overflow */
        g->nonfinite += !isfinite(fl && isfinite(o.data[j]) ? pt_dtype_round(o.dtype, o.data[j]) : o.data[j]);

    free(o.data);
}

/* ADV_TIES: D(i, j) = 1 + (2 (j mod 8) + 1) 2^-11 exactly, a tie of f16 and
 * of bf16 neighbours; the store must round it to even (cvt.rn), which the
 * verifier's tolerance cannot see. The kernel's D (io->out[0].data after
 * tuner_verify, row-major, packed) against that; returns the mismatches. */
static int64_t adv_ties_exact(const tuner_io *io, const adv_arg *g, char *msg, size_t n)
{
    int64_t bad = 0;
    pt_dtype dt = io->out[0].dtype;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            double want = pt_dtype_round(dt, 1.0 + (double)(2 * (j % 8) + 1) * 0x1p-11);
            double got = io->out[0].data[i * g->n + j];
            if (got != want && !bad++)
                snprintf(msg, n, "D(%lld, %lld) = %.9g, round-to-nearest-even gives %.9g",
                         (long long)i, (long long)j, got, want);
        }
    return bad;
}

#endif
