/* Reductions on f32 register values: thread-local, over aligned groups of
 * lanes (width 4 = the quad that holds one row of an mma accumulator
 * fragment, 32 = a warp), across the warps of a group through shared
 * memory, and the online-softmax (max, sum of exponentials) state with its
 * exact -inf rules. The row kernels (gen/elementwise.c) and the attention
 * softmax (on accumulator rows, docs/design.md "The kit") both use them.
 *
 * The -inf rules (one home): the max subtracted before exponentiating is
 * m, or 0 when m is -inf (kit_softmax_safe_max), so that a state that has
 * seen only -inf values is (-inf, 0) and stays exact when real values
 * arrive (exp(-inf - m') = 0), where -inf - -inf would give NaN. A row
 * that is -inf everywhere ends as (-inf, 0), which makes softmax's
 * exp(x - m) / s NaN (numpy's and torch's answer). NaN values: max.f32
 * drops them (PTX returns the other operand), exp(NaN - m) keeps them, so
 * a NaN makes the row's sum NaN. */
#ifndef GEN_KIT_REDUCE_H
#define GEN_KIT_REDUCE_H

#include "ptx/ir.h"

typedef enum kit_redop { KIT_RED_SUM, KIT_RED_MAX, KIT_RED_MIN } kit_redop;

/* op's identity as an f32 immediate (0, -inf, +inf). */
ptx_opd kit_red_identity(kit_redop op);
/* A fresh f32 register set to op's identity. */
ptx_reg kit_red_init(ptx_fn *f, kit_redop op);
/* acc = acc op v; guard (id 0: none) predicates the update. */
void kit_red_step(ptx_fn *f, kit_redop op, ptx_reg acc, ptx_opd v, ptx_reg guard);
/* The op-reduction of n >= 1 values of this thread, as a balanced tree
 * (depth log2 n, so the instructions overlap), in a fresh register. */
ptx_reg kit_red_vals(ptx_fn *f, kit_redop op, const ptx_opd *v, int n);

/* All-reduce over aligned groups of `width` lanes (1, 2, 4, 8, 16, 32):
 * acc[i] op= its value in the other lanes, by shfl.sync.bfly with offsets
 * width/2 down to 1 (full member mask: every lane of the warp executes it).
 * Every lane of a group ends with the same bits (a butterfly step computes
 * a op b and b op a, equal in IEEE arithmetic). ops[i] is acc[i]'s
 * operation. Width 1 emits nothing; another width sets the sticky error. */
void kit_red_lanes(ptx_fn *f, const kit_redop *ops, ptx_reg *acc, int n, int width);

/* Row reductions of a fragment: this thread holds v[r * ncols + c] of rows
 * r < nrows; out[r] (fresh registers) = op over the thread's values of row
 * r and those of the other lanes of its group of `width` lanes (an m16n8
 * C fragment: rows g and g + 8 of each atom, width 4). */
void kit_red_rows(ptx_fn *f, kit_redop op, const ptx_opd *v, int nrows, int ncols, int width,
                  ptx_reg *out);

/* Cross-warp combine for groups of `nwarps` consecutive warps (a row owned
 * by several warps), `ngroups` groups per block, at most `nvals` values at
 * once. Shared scratch `name` holds [nvals][ngroups][nwarps] f32 slots. */
typedef struct kit_warps {
    const char *smem;  /* the shared array's symbol */
    int ngroups, nwarps, nvals;
    ptx_reg rowbase;   /* u32 shared address of this thread's group's slot 0 */
    ptx_reg mine;      /* u32 shared address of this warp's slot */
    ptx_reg lane0;     /* lane 0 of its warp */
} kit_warps;

/* Declares the scratch and computes the slot addresses: group and
 * tid_in_group are u32 operands (the thread's group in the block, its
 * index in the group: warp = tid_in_group / 32). */
kit_warps kit_warps_new(ptx_fn *f, const char *name, int ngroups, int nwarps, int nvals,
                        ptx_opd group, ptx_opd tid_in_group);
/* Combines acc[0..n) (already reduced over each warp: every lane holds its
 * warp's value) across the warps of each group: lane 0 of each warp stores
 * its values, bar.sync 0, every thread folds the group's slots in warp
 * order (so all threads of a group get identical bits), bar.sync 0 (the
 * slots are free for the next call). Every thread of the block must call
 * it; n <= nvals. */
void kit_red_warps(ptx_fn *f, const kit_warps *g, const kit_redop *ops, ptx_reg *acc, int n);
/* A row all-reduce: kit_red_lanes over the warp (width 32), then, when g
 * is not NULL and has more than one warp per group, kit_red_warps. */
void kit_red_group(ptx_fn *f, const kit_warps *g, const kit_redop *ops, ptx_reg *acc, int n);

/* ---- online softmax ---------------------------------------------------- */

/* m, or 0 when m is -inf (the -inf rule above), in a fresh register. */
ptx_reg kit_softmax_safe_max(ptx_fn *f, ptx_opd m);
/* exp(k (x - ms)) as ex2.approx.ftz((x - ms) * k log2 e): the difference
 * first, exact when x is near ms, so large inputs lose nothing to the
 * scale's rounding (relative error ~2^-22 plus |k (x - ms)| 2^-24). */
ptx_reg kit_softmax_exp(ptx_fn *f, ptx_opd x, ptx_opd ms, float k);

/* A running softmax state of one row in one thread: s = sum of
 * exp(k (x - safe(m))) over the values seen, m their max (-inf: none
 * unmasked yet). fresh: nothing seen yet (emit time), so the first update
 * needs no rescale. */
typedef struct kit_softmax {
    ptx_reg m, s;
    float k;
    bool fresh;
    /* log2 offset of the exponentials (0: none): kit_softmax_update_fma's
     * p_j and s are 2^off times the above (alpha is not), so s and an
     * accumulation of p stay in ratio; kit_attn_lse takes it off. fp8
     * attention rounds p to e4m3 with off = 8 (flash-attention 3's
     * max_offset), p in [0, 256]: normal e4m3 down to p = 2^-14 */
    float off;
} kit_softmax;

/* (-inf, 0) with exponent scale k (1 for softmax; attention's
 * softmax_scale). */
kit_softmax kit_softmax_new(ptx_fn *f, float k);
/* Online update with n values of the row: m' = max(m, the values; over the
 * thread's group of `width` lanes when width > 1, so all lanes of a row
 * subtract one max, as P*V needs), ms = safe(m'), p_j = exp(k (v_j - ms))
 * into p (when not NULL; v_j = -inf gives 0), s = s * alpha + sum p_j with
 * alpha = exp(k (m - ms)) (0 when m was -inf). guard (NULL: all valid):
 * guard[j] (id 0: valid) says whether v_j takes part (p_j is computed
 * either way). Returns alpha, the factor that rescales what was
 * accumulated against the old max (attention's O); an immediate 0 for a
 * fresh state, whose update skips the rescale. The sum stays thread-local:
 * kit_softmax_reduce (or kit_red_* on s) finishes it. `fresh` is an emit-time
 * fact: an update emitted in a loop body runs many times, so clear
 * st.fresh before emitting one there. */
ptx_opd kit_softmax_update(ptx_fn *f, kit_softmax *st, const ptx_opd *v, const ptx_reg *guard,
                           int n, int width, ptx_opd *p);
/* kit_softmax_update without guards, each exponential one FMA and one
 * ex2 as flash-attention computes it: p_j = ex2.approx.ftz(v_j k log2 e -
 * ms k log2 e) (the products are not formed apart, so the exponent carries
 * an absolute error of about |ms k log2 e| 2^-24 on top of
 * kit_softmax_exp's; fine for attention scores, which are bounded). Same
 * state, -inf rules (v_j = -inf gives 0; ms = safe(m') is finite) and
 * result (alpha) as kit_softmax_update. */
ptx_opd kit_softmax_update_fma(ptx_fn *f, kit_softmax *st, const ptx_opd *v, int n, int width,
                               ptx_opd *p);
/* Merges another state (bm, bs) (same k) into st: m = max(m, bm),
 * s = s exp(k (m_a - ms)) + bs exp(k (bm - ms)), ms = safe(m); (-inf, 0)
 * pairs stay (-inf, 0). */
void kit_softmax_merge(ptx_fn *f, kit_softmax *st, ptx_opd bm, ptx_opd bs);
/* The rescale step of a reduction over threads, once the all-reduced max
 * mall is known: alpha = exp(k (m - safe(mall))), s = s * alpha, m = mall.
 * Returns alpha (what this thread's values kept relative to its own max,
 * such as cached p_j, are multiplied by). The caller then sums s. */
ptx_reg kit_softmax_rescale(ptx_fn *f, kit_softmax *st, ptx_opd mall);
/* The whole reduction of the states of a row over its group of `width`
 * lanes (and, g not NULL, the warps of g; width must be 32 then): max
 * all-reduce, kit_softmax_rescale, sum all-reduce. Every thread of the row
 * ends with the row's (m, s). Returns alpha as kit_softmax_rescale. */
ptx_reg kit_softmax_reduce(ptx_fn *f, kit_softmax *st, int width, const kit_warps *g);

#endif
