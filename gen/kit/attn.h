/* kit attn: the pieces of a flash-attention main loop that work on an
 * accumulator fragment, shared by the mma.sync prefill kernel
 * (gen/attention_prefill.c), the sm_90a wgmma prefill kernel
 * (gen/attention_fa3.c) and the sm_90a decode kernel
 * (gen/attention_fa3_decode.c). Design: ../shared/design/attention_hopper.md
 * 1.7 and 1.8.
 *
 * Fragment contract. S (scores) and O (output) are m16n8 C fragments
 * (kit_frag_mma_c of the m16n8k16 atom): a thread holds `nr` = 2 mi rows
 * (per-thread row r = 2 a + h is atom a's row l/4 + 8 h, at row_off(r) =
 * 16 (r / 2) + 8 (r % 2) from the fragment's row_base) and per n8 atom b
 * of its row two consecutive columns; register creg(ni, r, b, j) =
 * ((r / 2) ni + b) 4 + (r % 2) 2 + j. The wgmma D fragment of one warp of
 * a warpgroup is exactly such a fragment with mi = 1 and ni = N / 8
 * (shared/ref/ptx-sm90.md 1.3: register i at row 16 w + l/4 + 8 ((i >> 1)
 * & 1), column 8 (i >> 2) + 2 (l % 4) + (i & 1)), so every function below
 * serves both; the RS A fragment of k block kb of the next wgmma is
 * kit_frag_to_a(.., mi 0, kb) of the m16n8k16 atom (ref 1.4).
 *
 *   kit_attn_block_range  visible key blocks [n_lo, n_hi) of a tile's rows
 *   kit_attn_softcap      s <- tanh(s scale / c) (the exponent scale is c)
 *   kit_attn_mask_block   -inf outside the mask, behind a uniform branch
 *                         taken only by blocks at the end of the keys or
 *                         meeting a diagonal / window edge
 *   kit_attn_softmax      online softmax of each row (kit_softmax_update_fma:
 *                         quad max, one fma + ex2 per score, the -inf
 *                         rules), P into preg, O *= alpha
 *   kit_attn_finalize     l quad-summed, 1 / l (0 when l = 0)
 *   kit_attn_lse          lse = k m + ln l (-inf for l = 0)
 *   kit_attn_wg_qk        S = Q K^T by wgmma SS (one warpgroup's 64 rows)
 *   kit_attn_wg_pv        O += P V by wgmma RS (P from the S fragment)
 *   kit_wgmma_rs          one wgmma.mma_async with A in registers
 *   kit_attn_zero_rows    zero a stage's rows past the keys (TMA tiles)
 *
 * Shared-memory layout the wgmma steps read (every tile on a 1024-byte
 * boundary, 128B swizzle, as TMA with CU_TENSOR_MAP_SWIZZLE_128B writes
 * boxes of 64 16-bit columns): Q and K K-major in d/64 sub-tiles of rows x
 * 128 bytes (`sub_bytes` apart); V MN-major (dv contiguous) in dv/64 boxes
 * of bn rows x 128 bytes (`box_bytes` = bn 128 apart). The wgmma steps
 * emit wgmma.fence first and wgmma.commit_group last; the caller waits
 * (wgmma.wait_group) before it reads S or rewrites P / O. */
#ifndef GEN_KIT_ATTN_H
#define GEN_KIT_ATTN_H

#include "gen/kit/atom.h"
#include "gen/kit/frag.h"
#include "gen/kit/reduce.h"

/* Per-thread rows and registers of the fragment contract above. */
static inline int kit_attn_row_off(int r) { return 16 * (r / 2) + 8 * (r % 2); }
static inline int kit_attn_creg(int nat, int r, int b, int j) { return ((r / 2) * nat + b) * 4 + (r % 2) * 2 + j; }

/* The key blocks a tile's rows can see: p0, plast the query positions of
 * its first and last rows, sq, sk this sequence's lengths (s32 registers);
 * off = sk - sq; n_hi = ceil(min(sk, plast + 1 + off + wr) / bn) (wr >= 0),
 * n_lo = max(0, p0 + off - wl) / bn (wl >= 0; id 0 otherwise), nblk =
 * n_hi - n_lo (n_hi when n_lo is 0). A tile with nblk <= 0 sees no key. */
typedef struct kit_attn_blocks {
    ptx_reg off, n_hi, n_lo, nblk;
} kit_attn_blocks;
kit_attn_blocks kit_attn_block_range(ptx_fn *f, ptx_reg p0, ptx_reg plast, ptx_reg sq, ptx_reg sk, int64_t wl,
                                     int64_t wr, int bn);

/* s[i] = tanh.approx(s[i] * mul) for i < n (mul = scale / softcap). */
void kit_attn_softcap(ptx_fn *f, ptx_reg *s, int n, float mul);

/* The mask of one key block whose first key is n0 (s32 register). All
 * registers s32, "the lane's column" is the fragment's col_base:
 *   skbn    sk - bn: the block needs the key-end mask when n0 > skbn;
 *   rlim    (wr >= 0) p0 + off + wr + 1 - bn: a right edge when n0 > rlim;
 *   llim    (wl >= 0) plast + off - wl: a left edge when n0 < llim;
 *   skc     sk - col_base;
 *   rowdiag (rows at row_off) m0 + row_base - col_base + off, row 0's
 *           diagonal relative to the lane's column;
 *   rdiag   (per_row, windows) each per-thread row's own (position - col_base
 *           + off), for packed rows whose positions are not row_off apart.
 * Key j (column c of the block, c = col_base + col) of row i is kept iff
 * j < sk, j <= i + off + wr (wr >= 0), j >= i + off - wl (wl >= 0). */
typedef struct kit_attn_mask {
    int64_t wl, wr;
    ptx_reg skbn, rlim, llim, skc, rowdiag;
    const ptx_reg *rdiag;
    bool per_row;
} kit_attn_mask;
void kit_attn_mask_block(ptx_fn *f, const kit_attn_mask *mk, const kit_frag *sf, ptx_reg *s, int nr, int ni,
                         ptx_reg n0);

/* Online softmax of nr rows of S (ni n8 atoms a row, ni <= 32): st[r]
 * updated (clear st[r].fresh first in a loop body), p[creg] the
 * exponentials, O (no n8 atoms a row) rescaled by each row's alpha. */
void kit_attn_softmax(ptx_fn *f, kit_softmax *st, int nr, int ni, const ptx_reg *s, ptx_reg *p, int no,
                      const ptx_reg *o);

/* The same split for a loop that rescales O later (O += P V of the
 * previous block in flight): alpha[r] each row's factor, applied by
 * kit_attn_rescale once that wgmma retired. */
void kit_attn_softmax_rows(ptx_fn *f, kit_softmax *st, int nr, int ni, const ptx_reg *s, ptx_reg *p, ptx_opd *alpha);
void kit_attn_rescale(ptx_fn *f, int nr, int no, const ptx_reg *o, const ptx_opd *alpha);

/* After the loop: lrow[r] = st[r].s summed over the row's quad, inv[r] =
 * 1 / lrow (0 when lrow is 0: a row without a visible key gives o = 0). */
void kit_attn_finalize(ptx_fn *f, const kit_softmax *st, int nr, ptx_reg *lrow, ptx_reg *inv);

/* lse = k m + ln l of a finished row (natural log; -inf when l = 0), a
 * fresh f32 register. */
ptx_reg kit_attn_lse(ptx_fn *f, const kit_softmax *st, ptx_reg l, float k);

/* Zeroes rows [from, rows) of a tile of `boxes` boxes of rows x 128
 * bytes (box_bytes apart) at the u32 shared address base: 16-byte stores
 * spread over nthreads threads (tid u32 in [0, nthreads)), each row's 128
 * bytes whole (the 128B swizzle permutes chunks within a row). from: s32
 * register (<= 0: every row). For a K/V stage whose last rows are past
 * the sequence (TMA over a packed or padded tensor loads the next
 * sequence's keys): a masked key's P is 0, but 0 times a NaN or an inf
 * there is NaN. The caller then orders the stores before the wgmma
 * (fence.proxy.async.shared::cta, a barrier of the threads). */
void kit_attn_zero_rows(ptx_fn *f, ptx_reg base, int boxes, int64_t box_bytes, int rows, ptx_reg from, ptx_reg tid,
                        int nthreads);

/* wgmma.mma_async m64n{at->n}k16 with A in registers (RS; 16-bit types;
 * 8-bit ones m64n{at->n}k32 with trans_b false, B K-major): d the accumulator vector, a the four A registers, desc_b B's
 * descriptor, scale_d as kit_wgmma_ss, trans_b: B MN-major. */
void kit_wgmma_rs(ptx_fn *f, const kit_atom *at, ptx_opd d, const ptx_reg *a, ptx_reg desc_b, ptx_opd scale_d,
                  bool trans_b);

/* S = Q K^T of one warpgroup (ws: m64n{bn}k16, f32; s its bn / 2
 * registers): q_addr the warpgroup's 64 rows in Q's first sub-tile (u32
 * shared address), k_addr the K stage's first sub-tile, K-major tiles
 * whose rows are one swizzle span (q_span, k_span: 128 or 64 bytes, SBO
 * 8 x span; an e4m3 head dim 64 is one 64B span), the next span's bytes of
 * a row q_sub / k_sub on; row_bytes of K a row (d es): row_bytes / 32 k
 * steps of 32 bytes (the first from zero). wgmma.fence, the wgmmas,
 * commit_group. */
void kit_attn_wg_qk(ptx_fn *f, const kit_atom *ws, ptx_reg *s, ptx_reg q_addr, int64_t q_sub, int q_span,
                    ptx_reg k_addr, int64_t k_sub, int k_span, int row_bytes);

/* O += P V of one warpgroup (wo: m64n{dv}k16, f32; o its dv / 2
 * registers): P the S fragment pf (registers: the exponentials, f32) as
 * bn / 16 RS A fragments (mma: the m16n8k16 atom of the dtype, cvt.rn
 * pairs, converted before the fence), v_addr the V stage (dv / 64 boxes
 * box_bytes apart). wgmma.fence, the wgmmas, commit_group. */
void kit_attn_wg_pv(ptx_fn *f, const kit_atom *wo, ptx_reg *o, const kit_frag *pf, const kit_atom *mma,
                    ptx_reg v_addr, int64_t box_bytes, int bn);
/* Its two halves, for P converted ahead of the issue (a loop carrying
 * P): a[kb] (fresh registers) the RS A fragment of k block kb < bn / 16;
 * the issue (fence, bn / 16 RS wgmmas, commit) from given A registers. */
void kit_attn_p_to_a(ptx_fn *f, const kit_frag *pf, const kit_atom *mma, int bn, ptx_reg (*a)[4]);
void kit_attn_wg_pv_issue(ptx_fn *f, const kit_atom *wo, ptx_reg *o, ptx_reg (*a)[4], ptx_reg v_addr,
                          int64_t box_bytes, int bn);

/* fp8 (e4m3) P V at the e4m3 rate (flash-attention 3's fp8 design): wgmma
 * takes 8-bit B K-major only, so V is transposed in shared memory (V^T:
 * dv rows of keys, K-major 128B swizzle, sub-tiles of 128 keys = dv x 128
 * bytes `sub_bytes` apart), and P stays in registers as e4m3. The S
 * fragment's lane holds keys 8 a + 2 t + {0, 1} of each n8 atom a, the
 * 8-bit RS A fragment wants k = 16 (q >> 1) + 4 t + {0..3} (ref 1.4), so
 * within every 32 keys the k index is permuted: position k' = 16 h + 4 t +
 * b holds key 16 h + 8 (b / 2) + 2 t + b % 2 (kit_attn_v8_key). P needs no
 * data movement between lanes; V^T is written in that order.
 *   kit_attn_p_to_a8   P (the S fragment's exponentials, f32) -> bn / 32
 *                      A fragments a[kb][0..3] (cvt.rn.satfinite.e4m3x2;
 *                      fresh registers, before the fence)
 *   kit_attn_wg_pv8_issue  wgmma.fence, bn / 32 RS m64n{dv}k32 e4m3, commit
 *   kit_attn_v8_transpose  a V stage as TMA lands it (dv / 128 boxes of bn
 *                      rows x 128 bytes, 128B swizzle, `box_bytes` apart)
 *                      -> V^T at vt, keys >= lim (s32 register) written as
 *                      0 (past the keys: another sequence's, NaN); units of
 *                      4 keys x 8 columns (4 ld.shared.v2, 16 prmt, 8
 *                      st.shared.b32) over nthreads threads (tid u32 in
 *                      [0, nthreads)), a run-time loop; a thread keeps its
 *                      key quad when nthreads is a multiple of bn / 4 (its
 *                      guards and V^T rows once a stage). The caller orders
 *                      the stores before the wgmma (fence.proxy.async, a
 *                      barrier, an arrive). */
static inline int kit_attn_v8_key(int k)
{
    return (k & ~31) + 16 * ((k >> 4) & 1) + 8 * ((k >> 1) & 1) + 2 * ((k >> 2) & 3) + (k & 1);
}
void kit_attn_p_to_a8(ptx_fn *f, const kit_frag *pf, int bn, ptx_reg (*a)[4]);
void kit_attn_wg_pv8_issue(ptx_fn *f, const kit_atom *wo, ptx_reg *o, ptx_reg (*a)[4], ptx_reg vt_addr,
                           int64_t sub_bytes, int bn);
void kit_attn_v8_transpose(ptx_fn *f, ptx_reg raw, int64_t box_bytes, ptx_reg vt, int64_t sub_bytes, int bn, int dv,
                           ptx_reg lim, ptx_reg tid, int nthreads);
/* The same from a V stage of rows of `span` bytes: 128 as above, or 64
 * (dv 64: one box of bn rows x 64 bytes, 64B swizzle as TMA's
 * CU_TENSOR_MAP_SWIZZLE_64B lands it). */
void kit_attn_v8_transpose_span(ptx_fn *f, ptx_reg raw, int span, int64_t box_bytes, ptx_reg vt, int64_t sub_bytes,
                                int bn, int dv, ptx_reg lim, ptx_reg tid, int nthreads);

#endif
