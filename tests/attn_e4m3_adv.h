/* Adversarial e4m3 inputs for the fp8 attention kernels' tests
 * (tests/test_attention_fa3.c, tests/test_attention_fa3_decode.c).
 *
 * The verifier stores every input in e4m3 by the host conversion
 * (gen/dtype.c: cvt.rn.satfinite's rules, ptx/num.h) and the float64
 * reference reads the stored values back, so what a kernel and the
 * reference see is the stored byte:
 *   NaN       0x7f (+NaN) and 0xff (-NaN): e4m3 has no infinity, its only
 *             NaN encodings are S.1111.111 (the op's NaN kinds plant +NaN;
 *             the negated kinds here plant -NaN);
 *   +-inf     saturates to +-448 (0x7e / 0xfe), as does any |x| > 464
 *             (the op's +-inf and huge kinds give +-448 here);
 *   subnormal 2^-9 .. 7 2^-9 (0x01 .. 0x07) kept exactly;
 *   ties      a value halfway between two e4m3 numbers rounds to the even
 *             one (17 -> 16, 1.0625 -> 1, 1.5 2^-9 -> 2^-9 2).
 * Each kind is the attention op with its init_inputs replaced; e4m3_op
 * fills a caller's pt_op (the op is a value, no global state). */
#ifndef TESTS_ATTN_E4M3_ADV_H
#define TESTS_ATTN_E4M3_ADV_H

#include <math.h>

#include "gen/attention_int.h"

typedef enum e4m3_adv {
    E4M3_ADV_Q_NAN,    /* 0x7f in one q element of a row with visible keys */
    E4M3_ADV_Q_NEGNAN, /* 0xff there */
    E4M3_ADV_K_NAN,    /* 0x7f in one visible key's k */
    E4M3_ADV_K_NEGNAN,
    E4M3_ADV_V_NAN,    /* 0x7f in one visible key's v */
    E4M3_ADV_V_NEGNAN,
    E4M3_ADV_Q_SAT,    /* +inf planted in q: stored 448 */
    E4M3_ADV_K_NEGSAT, /* -inf planted in k: stored -448 */
    E4M3_ADV_V_SAT,    /* +inf planted in v: stored 448 */
    E4M3_ADV_EDGES,    /* every 5th element of q, k and v: +-448, subnormals, ties */
    E4M3_ADV_V_NAN_PAST, /* 0x7f in v at the keys just past a sequence's length (inside its tensor or page):
                          * no row sees them, o must not be NaN (0 P x NaN) */
    E4M3_ADV_N
} e4m3_adv;

static const char *const e4m3_adv_names[E4M3_ADV_N] = {
    "q NaN 0x7f", "q NaN 0xff", "k NaN 0x7f", "k NaN 0xff", "v NaN 0x7f", "v NaN 0xff",
    "q +inf (448)", "k -inf (-448)", "v +inf (448)", "+-448, subnormals and ties in q, k, v",
    "v NaN past the keys",
};

static inline void e4m3_negate_nans(pt_tensor *t)
{
    for (int64_t j = 0; j < t->numel; j++)
        if (isnan(t->data[j]))
            t->data[j] = -NAN;
}

static inline void e4m3_plant_neg(const pt_prepared *pp, uint64_t seed, pt_tensor *in, attn_adv kind, int t)
{
    attn_init_inputs(pp, seed, in);
    attn_plant(pp, kind, seed, in);
    e4m3_negate_nans(&in[t]);
}

static inline void e4m3_init_q_nan(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    attn_plant(pp, ATTN_ADV_Q_NAN, s, in);
}
static inline void e4m3_init_q_negnan(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    e4m3_plant_neg(pp, s, in, ATTN_ADV_Q_NAN, pp->t.q);
}
static inline void e4m3_init_k_nan(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    attn_plant(pp, ATTN_ADV_K_NAN, s, in);
}
static inline void e4m3_init_k_negnan(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    e4m3_plant_neg(pp, s, in, ATTN_ADV_K_NAN, pp->t.k);
}
static inline void e4m3_init_v_nan(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    attn_plant(pp, ATTN_ADV_V_NAN, s, in);
}
static inline void e4m3_init_v_negnan(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    e4m3_plant_neg(pp, s, in, ATTN_ADV_V_NAN, pp->t.v);
}
static inline void e4m3_init_q_sat(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    attn_plant(pp, ATTN_ADV_Q_POSINF, s, in);
}
static inline void e4m3_init_k_negsat(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    attn_plant(pp, ATTN_ADV_K_NEGINF, s, in);
}
static inline void e4m3_init_v_sat(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    attn_plant(pp, ATTN_ADV_V_POSINF, s, in);
}
/* The edges, spread (every 5th element from an offset by the seed) over
 * q, k and v: q and k scaled down by 1/8 where large, so that one score is
 * not every row's whole softmax. */
static inline void e4m3_init_edges(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    static const double edge[] = {448, -448, 0x1p-9, -0x1p-9, 7 * 0x1p-9, 1.5 * 0x1p-9, 17, -1.0625,
                                  0x1.1p-6, -240, 464, 0.0};
    const int ne = (int)(sizeof edge / sizeof *edge);
    attn_init_inputs(pp, s, in);
    const int ts[3] = {pp->t.q, pp->t.k, pp->t.v};
    for (int w = 0; w < 3; w++) {
        pt_tensor *t = &in[ts[w]];
        for (int64_t j = (int64_t)(s % 5); j < t->numel; j += 5) {
            double v = edge[(j / 5 + w) % ne];
            t->data[j] = w < 2 && fabs(v) > 16 ? v / 8 : v;
        }
    }
}

/* NaN in every head and column of v at keys sk_b .. sk_b + 8 of the first
 * sequence whose keys stop inside its rows of v (seqused_k, a page's
 * tail, varlen: the next sequence's rows). */
static inline void e4m3_init_v_nan_past(const pt_prepared *pp, uint64_t s, pt_tensor *in)
{
    attn_init_inputs(pp, s, in);
    pt_tensor *V = &in[pp->t.v];
    for (int64_t b = 0; b < pp->B; b++) {
        attn_seq q = attn_seq_of(pp, in, b);
        int64_t cap = pp->page ? pp->pages_per_seq * pp->page : pp->varlen ? pp->B * pp->Sk - q.k0 : pp->Sk;
        if (q.sk >= cap || q.sq == 0)
            continue;
        for (int64_t j = q.sk; j < cap && j < q.sk + 9; j++)
            for (int64_t hk = 0; hk < pp->Hkv; hk++)
                for (int64_t c = 0; c < pp->dv; c++) {
                    int64_t at;
                    if (pp->page) {
                        int64_t pg = (int64_t)in[pp->t.block_table].data[b * pp->pages_per_seq + j / pp->page];
                        at = pg * pp->sv[2] + (j % pp->page) * pp->sv[0];
                    } else
                        at = b * pp->sv[2] + (q.k0 + j) * pp->sv[0];
                    at += hk * pp->sv[1] + c;
                    if (at >= 0 && at < V->numel)
                        V->data[at] = NAN;
                }
        return;
    }
}

static inline void e4m3_op(e4m3_adv kind, pt_op *op)
{
    static void (*const init[E4M3_ADV_N])(const pt_prepared *, uint64_t, pt_tensor *) = {
        e4m3_init_q_nan, e4m3_init_q_negnan, e4m3_init_k_nan, e4m3_init_k_negnan, e4m3_init_v_nan,
        e4m3_init_v_negnan, e4m3_init_q_sat, e4m3_init_k_negsat, e4m3_init_v_sat, e4m3_init_edges,
        e4m3_init_v_nan_past,
    };
    *op = gen_attention_op;
    op->init_inputs = init[kind];
}

#endif
