/* Accumulator fragments: the registers an MMA main loop (or a SIMT one)
 * leaves in each thread, with the (row, col) every register holds, as a
 * value the epilogue, the attention softmax and the P*V step share.
 *
 * A fragment is written down in two parts. Per register (emit time):
 * r[i] holds tile element (row_base + row[i], col_base + col[i]); runs of
 * `vec` consecutive registers share a row and have consecutive columns.
 * Per lane (emit time, `lanes` set): lane l's (row_base, col_base) is lane
 * 0's plus (lrow[l], lcol[l]); that is the atom's C map (gen/kit/atom.h;
 * m16n8: lanes 4g + t sit at (g, 2t)), which lets a consumer work out at emit time what
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
#include "gen/kit/atom.h"
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

/* The C (accumulator) fragment of mi x ni atoms `at` (mma.sync m16n8k*)
 * of a warp whose tile origin is (wrow, wcol): register
 * e (a * ni + b) + v (e elements per thread) holds element v of the atom
 * at (wrow + m a, wcol + n b), where the atom's C map puts it. regs: the
 * accumulator registers in that order (kept, not copied); lane: u32
 * %laneid. Emits the lane's base row and column. */
kit_frag kit_frag_mma_c(ptx_fn *f, const kit_atom *at, int mi, int ni, ptx_reg *regs, ptx_reg wrow,
                        ptx_reg wcol, ptx_reg lane);

/* The emit-time part of those fragments (no registers, nothing emitted):
 * n, vec, row/col (into the caller's arrays of n ints), group size and
 * lane map; for planning shared memory before the main loop exists.
 * _blocks: SIMT thread blocks of rows x cols, threads laid row-major over
 * a tile of tile_cols columns (kit_frag_lanes_blocks). */
void kit_frag_shape_mma(kit_frag *fr, const kit_atom *at, int mi, int ni, int *row, int *col);
void kit_frag_shape_blocks(kit_frag *fr, int rows, int cols, int tile_cols, int *row, int *col);

/* Fills the lane map from the atom's C map (lane l's thread offset minus
 * lane 0's). */
void kit_frag_lanes(kit_frag *fr, const kit_atom *at);
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
 * the next mma `at` (16-bit A: m16n8k16 f16 or bf16) for rows
 * [m mi, m mi + m) and k columns [k kb, k kb + k) of the C fragment's
 * tile, rounded to nearest even: register j packs A elements 2j (low
 * half) and 2j + 1 (high half) by one cvt.rn.{f16x2,bf16x2}.f32. No
 * shuffles: the m16n8 C and A maps put each lane at the same (g, 2t), so
 * every A element is one of the lane's own accumulators. a: room for the
 * atom's A registers (4), fresh b32 registers. A fragment without those
 * positions, or with other lanes, sets the module's sticky error. */
void kit_frag_to_a(ptx_fn *f, const kit_frag *fr, const kit_atom *at, int mi, int kb, ptx_reg *a);

/* Shared-memory wavefronts of one warp-wide access of `bytes` bytes per
 * lane at the given byte addresses (lanes with addr < 0 do not take
 * part): 32 banks of 4 bytes, lanes reading the same word share it, one
 * 128-byte phase per 32 / (bytes / 4) lanes (the whole warp up to 4
 * bytes, half-warps for 8, quarter warps for 16): the emulator's
 * emu_stats.bank model, evaluated at emit time to choose layouts. */
int kit_smem_wavefronts(const int64_t addr[32], int bytes);

#endif
