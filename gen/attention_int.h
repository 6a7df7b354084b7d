/* Attention building blocks shared by gen/attention*.c (private to the family).
 *
 *   attention.c         the op: problem checks (prepare), tensors, dispatch of
 *                       space / check / emit by kernel kind, flop and byte
 *                       counts, registration
 *   attention_schema.c  the problem's keys (gen/op.h pt_schema)
 *   attention_ref.c     float64 reference, sampled reference_at, magnitudes,
 *                       structured inputs (lengths, block tables), tolerances
 *   attention_prefill.c the FA2-style prefill kernel on the kit (mma.sync)
 *   attention_decode.c  the split-KV decode kernel with the fused
 *                       last-arriver combine (paged KV, GQA packing)
 *
 * Semantics (issue 11, ../shared/design/attention_hopper.md section 1.2):
 * for sequence b, query head h, row i < Sq_b and key j < Sk_b, kv head
 * hk = h / group; s = scale * q.k (softcap: c * tanh(s / c)); with
 * off = Sk_b - Sq_b, key j is visible iff j < Sk_b, j >= i + off - wl
 * (wl >= 0) and j <= i + off + wr (wr >= 0; causal means wr = 0); a row
 * with no visible key gives o = 0 and lse = -inf. */
#ifndef GEN_ATTENTION_INT_H
#define GEN_ATTENTION_INT_H

#include "gen/attention.h"
#include "gen/kit/kit.h"

/* Kernel kinds (config parameter `impl`). */
typedef enum attn_impl {
    ATTN_FA2 = 0,   /* prefill, mma.sync (attention_prefill.c) */
    ATTN_SPLIT = 1, /* decode, split-KV (attention_decode.c) */
    ATTN_FA3 = 2,   /* prefill, sm_90a wgmma + TMA (attention_fa3.c) */
} attn_impl;

/* Tensor indices of tensors(): inputs in this order, the optional ones only
 * when the problem has them (-1 otherwise). */
typedef struct attn_tensors {
    int q, k, v, block_table, cu_seqlens_q, cu_seqlens_k, seqused_k; /* inputs */
    int o, lse;                                                      /* outputs */
    int nin, nout;
} attn_tensors;

struct pt_prepared {
    pt_problem prob;
    pt_target target;
    pt_dtype dt;          /* q, k, v storage (f16 / bf16 / e4m3) */
    int es;               /* bytes per element of dt */
    pt_dtype odt;         /* o storage: dt, bf16 for e4m3 */
    int oes;              /* bytes per element of odt */
    float vscale;         /* e4m3: descale_v (o = vscale sum p v); else 1. descale_q
                           * descale_k are folded into scale */
    int64_t B, Hq, Hkv, group; /* group = Hq / Hkv */
    int64_t Sq, Sk;       /* maxima (the exact lengths unless varlen / seqused_k) */
    int64_t d, dv;
    bool causal;
    int64_t wl, wr;       /* -1 unbounded; causal sets wr = 0 (wr = min(wr, 0)) */
    float scale;          /* softmax_scale, 1/sqrt(d) when 0 */
    float softcap;        /* 0: off */
    bool bhsd;            /* layout bhsd (else bshd) */
    bool varlen, seqused, lse;
    int64_t page;         /* page size, 0: not paged */
    int64_t npages, pages_per_seq; /* pool pages, ceil(Sk / page) */
    /* element strides of (token, head, batch) of q, k, v, o (packed for the
     * layout; for paged k/v the batch stride is the page's, token < page;
     * for varlen the batch stride is 0: rows come from cu_seqlens) */
    int64_t sq[3], sk[3], sv[3], so[3];
    attn_tensors t;
};

/* Kernel kinds' own space, check and emit (attention.c dispatches by impl;
 * each kind's space lists `impl` first with its one value). */
int attn_prefill_space(const pt_prepared *pp, const pt_target *t, pt_space *out);
void attn_prefill_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out);
int attn_prefill_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);
int attn_prefill_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l,
                      pt_err *e);

/* impl=fa3 (attention_fa3.c): sm_90a wgmma + TMA prefill; applies: the
 * target is sm_90a and the problem a prefill one it takes (head dims 64
 * 128 256; not paged, or pages of >= 64 keys), where it is the space and
 * the default. */
bool attn_fa3_applies(const pt_prepared *pp, const pt_target *t);
int attn_fa3_space(const pt_prepared *pp, const pt_target *t, pt_space *out);
void attn_fa3_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out);
int attn_fa3_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);
int attn_fa3_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e);

int attn_decode_space(const pt_prepared *pp, const pt_target *t, pt_space *out);
void attn_decode_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out);
int attn_decode_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);
int attn_decode_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l,
                     pt_err *e);

/* Whether key j of a row is visible, from the prepared mask (for the
 * reference and tests): i, j row and key, sq, sk this sequence's lengths. */
bool attn_visible(const pt_prepared *pp, int64_t i, int64_t j, int64_t sq, int64_t sk);

/* The kernel kind of a problem (space and defaults; check and emit follow
 * the config's impl): decode (impl split) when seqlen_q <= ATTN_DECODE_MAX_SQ,
 * else prefill (impl fa2), paged or not (both kernels read paged KV). */
enum { ATTN_DECODE_MAX_SQ = 16 };
bool attn_decode_kind(const pt_prepared *pp);
/* Visible (row, key) pairs of one (sequence, head) with lengths sq, sk
 * (exact, closed form); flops = 2 (d + dv) pairs B Hq at the maxima. */
double attn_visible_pairs(const pt_prepared *pp, int64_t sq, int64_t sk);
/* The flash-attention convention: 2 (d + dv) B Hq Sq Sk, halved when causal
 * (what FA / ThunderKittens tables quote; the benchmark prints both). */
double attn_flops_fa(const pt_prepared *pp);

/* attention_ref.c: the pt_op hooks of the reference side (gen/op.h). */
int attn_reference(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e);
int attn_reference_at(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                      int n, double *vals, pt_err *e);
int attn_magnitude(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                   int64_t n, double *mag, pt_accum *acc, pt_err *e);
void attn_init_inputs(const pt_prepared *pp, uint64_t seed, pt_tensor *in);
int attn_check_inputs(const pt_prepared *pp, const pt_tensor *in, pt_err *e);
void attn_tolerance(const pt_prepared *pp, int out, pt_tol *tol);
int attn_padding(const pt_prepared *pp, const pt_tensor *in, int out, uint8_t *mask, pt_err *e);
/* LSE's tolerance (relative to the output's max |lse|; design 1.4). */
#define ATTN_LSE_TOL 1e-4

/* Adversarial inputs (docs/attention.md "Non-finite and huge inputs"):
 * one element of q, k or v of one visible row / key (a sequence with rows
 * and keys, at random from the seed) set to NaN, +inf, -inf or ATTN_HUGE
 * (K_HUGE_FIRST: a key among the first 16, in the key block the kernels
 * take last, so the row max jumps there and every earlier block is
 * rescaled by exp(-huge); K_HUGE_LAST: the last key, the first block
 * taken). attn_plant writes it over the op's inputs (after
 * attn_init_inputs); gen_attention_adversarial_op(kind) is the attention op
 * with init_inputs doing both, for the verifier (pt_check_emu), which
 * stores the inputs in their dtype. The reference gives such inputs the
 * semantics of torch / flash-attention, and attn_padding leaves out what
 * is unspecified. */
typedef enum attn_adv {
    ATTN_ADV_NONE,
    ATTN_ADV_Q_NAN,
    ATTN_ADV_Q_POSINF,
    ATTN_ADV_Q_NEGINF,
    ATTN_ADV_Q_HUGE,
    ATTN_ADV_K_NAN,
    ATTN_ADV_K_POSINF,
    ATTN_ADV_K_NEGINF,
    ATTN_ADV_K_HUGE_FIRST,
    ATTN_ADV_K_HUGE_LAST,
    ATTN_ADV_V_NAN,
    ATTN_ADV_V_POSINF,
    ATTN_ADV_V_NEGINF,
    ATTN_ADV_N
} attn_adv;
/* 2^14: exact in f16 and bf16; with q, k in [-2, 2] and scale 1/sqrt(d)
 * the scores reach about 4096 (|s k log2 e| stays below 2^13, where the
 * kernels' fma-folded exponent keeps ~1e-3 relative error in p). */
#define ATTN_HUGE 16384.0
void attn_plant(const pt_prepared *pp, attn_adv kind, uint64_t seed, pt_tensor *in);
const pt_op *gen_attention_adversarial_op(attn_adv kind); /* NULL for a kind out of range */

/* One sequence's rows and keys, from the inputs (varlen offsets, used
 * lengths): q/o rows start at token q0 (varlen) with sq rows; keys number
 * sk, starting at token k0 (varlen, not paged). */
typedef struct attn_seq {
    int64_t sq, sk, q0, k0;
} attn_seq;
/* Sequence b's lengths from the inputs (in: the op's input tensors, float64). */
attn_seq attn_seq_of(const pt_prepared *pp, const pt_tensor *in, int64_t b);

#endif
