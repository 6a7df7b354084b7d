/* The split-KV decode kernels' shared output stage (private to the
 * attention family): the CTA's normalised O of its row block, staged in
 * shared memory, stored directly (one split) or published as a partial
 * with the fused last-arriver combine (gen/attention_decode.c's header
 * describes the protocol; design 1.9). Used by the mma.sync split kernel
 * (gen/attention_decode.c) and the sm_90a wgmma one
 * (gen/attention_fa3_decode.c), and the small emission helpers both use. */
#ifndef GEN_ATTENTION_COMBINE_H
#define GEN_ATTENTION_COMBINE_H

#include "gen/attention_int.h"

/* What the output stage needs of a kernel. Rows of the block: packed row
 * r of row block rb is query (rb bm + r) / group of head hk group +
 * (rb bm + r) % group. */
typedef struct attn_out {
    const pt_prepared *pp;
    ptx_fn *f;
    int bm, T, W;          /* rows of the block, threads of the stage (ids tid 0..T-1), O copies */
    int splits;            /* the config's split count (1: store directly) */
    int64_t nrb;           /* row blocks per KV head */
    int64_t part_bytes;    /* bytes of the O partials at `splits` */
    int64_t obuf_pitch;    /* floats between rows of a staged O copy */
    int64_t lse_off, flag_off; /* shared offsets (from smem): row lse2 [bm] f32, the arrival flag u32 */
    int bar_id, bar_threads;   /* the stage's barrier: bar.sync bar_id, bar_threads (0, 0: bar.sync 0) */
    ptx_reg tid, b, hk, rb, split, nsplit, sq, smem; /* u32; sq: this sequence's query rows (s32) */
    ptx_reg o, lse, scr, ws;   /* global: o, lse (pp->lse), partials and counters (splits > 1) */
} attn_out;

/* The output stage from staged O: W copies (copy w at ob + w bm
 * obuf_pitch 4 bytes, row r at + r obuf_pitch 4), each already scaled so
 * that their sum is the block's normalised O, and each row's log2-sum-exp
 * at smem + lse_off; the caller synchronised the threads after writing
 * them. Ends the kernel (ret) on every path. */
void attn_out_emit(const attn_out *a, ptx_reg ob);

/* Global address of element 0 of packed row rg (u32) of the block's KV
 * head in q or o (element strides s[3] = token, head, batch; es bytes an
 * element). */
ptx_reg attn_row_addr(const attn_out *a, ptx_reg base, const int64_t *s, int es, ptx_reg rg);

/* Emission helpers of the decode kernels. */
bool attn_pow2(int64_t v);
int attn_ilog2(int64_t v);
/* id / n and id % n (u32): a shift and a mask for a power of two, else a division. */
void attn_idx_div(ptx_fn *f, ptx_reg id, int64_t n, ptx_reg *q, ptx_reg *r);
ptx_reg attn_setp(ptx_fn *f, ptx_mod cmp, ptx_types ty, ptx_opd a, ptx_opd b);
/* a && b (either id 0: the other) */
ptx_reg attn_pand(ptx_fn *f, ptx_reg a, ptx_reg b);
ptx_reg attn_fop2(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b);
/* p64 + a * b bytes (a: u32 operand, b >= 0). */
ptx_reg attn_add64(ptx_fn *f, ptx_reg p64, ptx_opd a, int64_t b);
/* bar.sync id, threads (threads 0: bar.sync 0, the whole CTA). */
void attn_bar(ptx_fn *f, int id, int threads);
/* bra.uni label, under p (id 0: always; neg: under !p). */
void attn_bra(ptx_fn *f, int label, ptx_reg p, bool neg);
/* 1 / l, or 0 when l is 0 (a row without a visible key: o = 0). */
ptx_reg attn_inv_or_zero(ptx_fn *f, ptx_reg l);
/* The cp.async gather of small pages into a 128B-swizzled TMA-layout stage
 * by 128 producer threads, K's rows from kpool and, with vpool (id != 0),
 * V's from vpool v_off bytes past them in the same pass (attention_combine.c
 * has the layout). */
void attn_gather_rows(ptx_fn *f, int64_t es, int64_t page, int bn, ptx_reg dst, ptx_reg kpool, ptx_reg vpool,
                      int64_t v_off, const int64_t *st, int64_t ncol, ptx_reg key, ptx_reg len, ptx_reg hk,
                      ptx_reg tab, ptx_reg pt);

/* this split's key range (attn_kv_range_emit): the block's real rows see
 * keys [lmax, hmin) all of them, some of them a key of [lmin, hmax); the
 * split takes nblk blocks of bn keys from key key0 (key blocks outside
 * [lmin, hmax) are never loaded) */
typedef struct attn_kv_range {
    ptx_reg off, rowsr;   /* s32: len - Sq, and the real rows Sq * group */
    ptx_reg hmin, lmax;   /* lmax id 0: no left window */
    ptx_reg nblk, key0;
} attn_kv_range;
/* For row block rb (u32) of bm rows, sq (s32) query rows and len keys, and
 * split `split` of nsplit: [s NB / S, (s + 1) NB / S) of the NB blocks of
 * bn keys (a power of two) the rows can see. */
void attn_kv_range_emit(ptx_fn *f, const pt_prepared *pp, int bm, int bn, ptx_reg rb, ptx_reg sq, ptx_reg len,
                        ptx_reg split, ptx_reg nsplit, attn_kv_range *out);
/* The visible keys [lo, hi) of a thread's two fragment rows (row_base and
 * row_base + 8 of the block); hi 0 for a row past the real ones; lo id 0
 * without a left window. */
typedef struct attn_rows_mask {
    ptx_reg hi[2], lo[2];
} attn_rows_mask;
void attn_rows_mask_emit(ptx_fn *f, const pt_prepared *pp, int bm, ptx_reg rb, ptx_reg row_base, ptx_reg sq,
                         ptx_reg len, const attn_kv_range *kr, attn_rows_mask *out);
/* Whether keys [key, key + n) need the mask (some real row cannot see them all). */
ptx_reg attn_mask_needed(ptx_fn *f, const attn_kv_range *kr, ptx_reg key, int n);
/* The mask on a fragment's scores v[0..n) (in place: -inf where not
 * visible); kcol the key of the thread's column 0. */
void attn_mask_scores(ptx_fn *f, const kit_frag *fr, const attn_rows_mask *rm, ptx_reg kcol, ptx_reg *v, int n);
/* The score the softmax sees: s, or softcap tanh(s scale / softcap) (a fresh register). */
/* Kernel parameters: a global pointer (a .u64 param, cvta.to.global) or a
 * u32 value, each appended to the launch's arguments as arg / v. */
ptx_reg attn_param_ptr(ptx_fn *f, pt_launch *l, const char *name, pt_arg arg);
ptx_reg attn_param_u32(ptx_fn *f, pt_launch *l, const char *name, uint64_t v);
ptx_reg attn_score(ptx_fn *f, const pt_prepared *pp, ptx_reg s);
/* The online-softmax update of row half h (rows >= 8 of the m16 fragment
 * fr, or below) over the n scores s: st[h] moves on, p gets the half's
 * probabilities at their fragment positions; returns the rescale alpha. */
ptx_opd attn_softmax_half(ptx_fn *f, kit_softmax *st, const kit_frag *fr, const ptx_reg *s, int n, int h,
                          ptx_reg *p);
/* P as two 16-bit parts for P V (docs/attention.md): hi = P rounded toward
 * zero, lo = P - hi, at least the dtype's tiniest positive value for P > 0. */
void attn_p_split(ptx_fn *f, pt_dtype dt, const ptx_reg *p, ptx_reg *hi, ptx_reg *lo, int n);
/* FA's wave-efficiency split rule (hopper/heuristics.h num_splits_heuristic)
 * for ctas CTAs, nblocks key blocks and sms CTA slots. */
enum { ATTN_MAX_SPLITS = 128 };
int attn_split_heuristic(int64_t ctas, int64_t nblocks, int sms);
/* The split counts a decode space offers (attn_decode_splits, ascending),
 * with the default h inserted in order when it is not one of them. */
void attn_splits_param(pt_param_space *p, int h);
ptx_reg attn_s32op(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b);

/* impl=3 (gen/attention_fa3_decode.c): split-KV decode on the sm_90a
 * wgmma / TMA main loop; applies: an sm_90a target and a decode problem
 * its default config takes (then it is the decode space and default). */
enum { ATTN_FA3_SPLIT = 3 };
bool attn_fa3_decode_target(const pt_target *t);
bool attn_fa3_decode_applies(const pt_prepared *pp, const pt_target *t);
int attn_fa3_decode_space(const pt_prepared *pp, const pt_target *t, pt_space *out);
void attn_fa3_decode_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out);
int attn_fa3_decode_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);
int attn_fa3_decode_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e);

#endif
