/* Accumulator fragments: the registers an MMA main loop (or a SIMT one)
 * leaves in each thread, with the (row, col) every register holds, as a
 * value the epilogue, the attention softmax and the P*V step share.
 *
 * A fragment is written down in two parts. Per register (emit time):
 * r[i] holds tile element (row_base + row[i], col_base + col[i]); runs of
 * `vec` consecutive registers share a row and have consecutive columns.
 * Per lane (emit time, `lanes` set): lane l's (row_base, col_base) is lane
 * 0's plus (lrow[l], lcol[l]); that is the atom's C map (m16n8: lanes
 * 4g + t sit at (g, 2t)), which lets a consumer work out at emit time what
 * a warp-wide access touches (bank conflicts, see kit_smem_wavefronts).
 * Every position lies in the group block [grp_row, +grp_rows) x
 * [grp_col, +grp_cols): the warp's (or, SIMT, the thread's) block, aligned
 * to its size. With slices > 1 (in-CTA split-K) the warps of every slice
 * hold partial sums of the same positions; `slice` is the warp's slice.
 *
 * The same quad structure serves the wgmma D fragment (rows g and g+8 of
 * each 16-row group, column pairs 2t, 2t+1), so the ops below do too. */
#ifndef GEN_KIT_FRAG_H
#define GEN_KIT_FRAG_H

#include "gen/expr.h"
#include "ptx/ir.h"

typedef struct kit_frag {
    int n, vec;
    ptx_reg *r;
    int *row, *col;
    ptx_reg row_base, col_base;
    ptx_reg grp_row, grp_col;
    int grp_rows, grp_cols;
    bool lanes;              /* lrow/lcol filled */
    int lrow[32], lcol[32];
    int slices;              /* 0 or 1: one; else warps per tile splitting k */
    ptx_reg slice;           /* u32 warp's slice (slices > 1) */
} kit_frag;

/* The C (accumulator) fragment of mi x ni m16n8 mma.sync atoms (every
 * m16n8k* shape, f32 or s32 accumulators) of a warp whose tile origin is
 * (wrow, wcol): register 4 (a * ni + b) + i holds element
 * (wrow + 16a + lane/4 + 8(i/2), wcol + 8b + 2(lane%4) + i%2). regs: the
 * 4 mi ni accumulator registers in that order (kept, not copied); lane:
 * u32 %laneid. Emits the two base additions. */
kit_frag kit_frag_mma_c(ptx_fn *f, int mi, int ni, ptx_reg *regs, ptx_reg wrow, ptx_reg wcol,
                        ptx_reg lane);

/* Fills the lane map of an m16n8 C fragment (lanes 4g + t at (g, 2t)). */
void kit_frag_lanes_mma(kit_frag *fr);
/* Fills the lane map of SIMT thread blocks: thread t owns the block at
 * block row t / per_row, block column t % per_row (per_row = tile columns
 * / grp_cols), blocks grp_rows x grp_cols; warps are 32 consecutive
 * threads. */
void kit_frag_lanes_blocks(kit_frag *fr, int tile_cols);

/* Index of the register holding (row, col) relative to (row_base,
 * col_base), or -1. */
int kit_frag_find(const kit_frag *fr, int row, int col);

/* Elementwise application: r[i] = fn(arg, fr, i, r[i]) for every register
 * (fn emits the code and returns the new value's register). */
typedef ptx_reg (*kit_frag_fn)(void *arg, const kit_frag *fr, int i, ptx_reg v);
void kit_frag_apply(ptx_fn *f, kit_frag *fr, kit_frag_fn fn, void *arg);

/* One element of an expression program (gen/expr, no reductions):
 * in[k] is input k's value (an f32 register or immediate); val: scratch of
 * p->nnodes operands. Returns output 0's value. Multiplications by an
 * immediate 1 are folded away (x * 1 is x exactly, NaN and -0 included),
 * so an epilogue specialised for alpha = 1 emits no multiply. */
ptx_opd kit_expr_value(ptx_fn *f, const ex_prog *p, const ptx_opd *in, ptx_opd *val);

/* Accumulator -> A operand (the P*V step of attention): the A fragment of
 * an m16n8k16 mma (f16 or bf16, ab = PTX_T_F16 / PTX_T_BF16) for rows
 * [16 mi, 16 mi + 16) and k columns [16 kb, 16 kb + 16) of an m16n8 C
 * fragment (mi, kb in atoms of the C fragment's own tile), rounded to
 * nearest even: a[j] packs (row g + 8 (j%2), cols 2t + 8 (j/2) .. +1), low
 * half the lower column, by one cvt.rn.{f16x2,bf16x2}.f32 each. No
 * shuffles: the C and A maps put the same lane at the same (g, 2t).
 * a: 4 fresh b32 registers. A fragment without those positions sets the
 * module's sticky error. */
void kit_frag_to_a(ptx_fn *f, const kit_frag *fr, int mi, int kb, ptx_type ab, ptx_reg a[4]);

/* Shared-memory wavefronts of one warp-wide access of `bytes` bytes per
 * lane at the given byte addresses (lanes with addr < 0 do not take
 * part): 32 banks of 4 bytes, lanes reading the same word share it, one
 * 128-byte phase per 32 / (bytes / 4) lanes (the whole warp up to 4
 * bytes, half-warps for 8, quarter warps for 16): the emulator's
 * emu_stats.bank model, evaluated at emit time to choose layouts. */
int kit_smem_wavefronts(const int64_t addr[32], int bytes);

#endif
