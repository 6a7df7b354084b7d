/* kit layout: a value mapping coordinates to offsets.
 *
 * A layout has up to KIT_RANK modes; mode i has a shape (how many
 * coordinates) and a stride (what one step of the coordinate adds). The
 * codomain is an offset (dims 1) or a (row, col) pair (dims 2), so one type
 * describes a shared-memory tile ((row, byte) -> byte offset), a partition
 * of a tile among threads (thread -> (row, col) of its piece) and an MMA
 * atom's thread-value maps (lane -> (row, col), value -> (row, col)). A
 * linear index is split over the modes with mode 0 varying fastest (CuTe's
 * colexicographic order), so a lane layout of shape (4, 8) reads lane l as
 * (l % 4, l / 4).
 *
 * A 1-D layout may carry an XOR swizzle applied to the offset after the
 * strides: y = x ^ ((x >> shift) & (((1 << bits) - 1) << base)). This is
 * the one definition of the shared-memory swizzle: the loaders' cp.async
 * destinations, the ldmatrix lane addresses and the tests all evaluate it
 * through kit_swz / kit_eval / kit_emit.
 *
 * Evaluation happens at emit time (kit_eval: immediates) or as index code
 * (kit_emit: immediates fold, registers get the integer ops). */
#ifndef GEN_KIT_LAYOUT_H
#define GEN_KIT_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "ptx/ir.h"

enum { KIT_RANK = 8 };

typedef struct kit_swizzle {
    int bits;  /* XOR width; 0: none */
    int base;  /* lowest bit changed (4: 16-byte chunks move, bytes inside stay) */
    int shift; /* distance from the bits read to the bits changed */
} kit_swizzle;

typedef struct kit_layout {
    int rank, dims;
    int shape[KIT_RANK];
    int64_t stride[KIT_RANK][2]; /* [mode][codomain dim] */
    kit_swizzle swz;             /* dims 1 only */
    int64_t span;                /* bytes (or elements) allocated for it; 0: not a storage layout */
} kit_layout;

/* ---- construction ---- */
/* A 1-D layout of rank n: shape[i], stride[i]. */
kit_layout kit_layout1(int n, const int *shape, const int64_t *stride);
/* A 2-D layout of rank n: mode i adds (rs[i], cs[i]) to (row, col). */
kit_layout kit_layout2(int n, const int *shape, const int64_t *rs, const int64_t *cs);
/* A shared-memory tile of rows x row_bytes bytes, (row, byte) -> offset.
 * pad > 0: rows are row_bytes + pad apart, no swizzle; pad == 0: rows are
 * packed and the 16-byte chunk index is XORed with the row bits above it,
 * min(row_bytes / 16, 8) chunks wide, so that 8 consecutive rows at one
 * chunk (an ldmatrix 8x8 matrix, a warp's cp.async row) hit 8 different
 * bank groups. row_bytes must be a power of two >= 16 when swizzled. */
kit_layout kit_smem_tile(int rows, int row_bytes, int pad);
/* The tiler of a rows x cols block cut into tr x tc tiles, column of tiles
 * fastest when m_fast: tile index -> (row, col) of its origin. */
kit_layout kit_tiler(int rows, int cols, int tr, int tc, bool m_fast);

/* Tile-layout queries (kit_smem_tile layouts). */
static inline int kit_tile_rows(const kit_layout *l) { return l->shape[0]; }
static inline int kit_tile_row_bytes(const kit_layout *l) { return l->shape[1]; }
static inline int64_t kit_tile_pitch(const kit_layout *l) { return l->stride[0][0]; }

/* ---- evaluation ---- */
int64_t kit_swz(kit_swizzle s, int64_t x);
/* Number of coordinates (product of the shapes). */
int64_t kit_size(const kit_layout *l);
/* Codomain component dim at coordinates c[0..rank-1] (swizzled for dims 1). */
int64_t kit_eval(const kit_layout *l, const int64_t *c, int dim);
/* The same at a linear index (mode 0 fastest). */
int64_t kit_eval_idx(const kit_layout *l, int64_t idx, int dim);
/* Both components of a dims-2 layout (no swizzle) at a linear index, from
 * one decomposition of it: kit_eval_idx(l, idx, 0) and (l, idx, 1). */
void kit_eval_idx2(const kit_layout *l, int64_t idx, int64_t *r, int64_t *c);
/* Whether moving any in-range coordinate of a 2-mode 1-D layout (a tile)
 * by (drow, dcol), staying in range, moves its offset by the unswizzled
 * distance drow * pitch + dcol: the swizzle's read and written bits are
 * untouched. Accesses that pass share one address register plus an
 * immediate. */
bool kit_shift_ok(const kit_layout *l, int64_t drow, int64_t dcol);
/* Offset of (row, col) in a 2-mode 1-D layout (a tile). */
int64_t kit_at(const kit_layout *l, int64_t row, int64_t col);

/* ---- algebra ---- */
/* outer o inner: inner maps to (row, col), outer (a 2-mode 1-D affine
 * layout, e.g. a tile) maps (row, col) to an offset. The result maps
 * inner's coordinates to outer's offsets and keeps outer's swizzle and
 * span: e.g. tile o (lane -> (row, chunk)) = lane -> byte offset. */
kit_layout kit_compose(const kit_layout *outer, const kit_layout *inner);
/* Modes [first, first + n) of l as a layout of their own. */
kit_layout kit_modes(const kit_layout *l, int first, int n);
/* l with its modes followed by those of r (same dims). */
kit_layout kit_concat(const kit_layout *l, const kit_layout *r);

/* ---- emission ----
 * Integer ops on ptx_fn that fold immediates: two immediates give an
 * immediate and emit nothing. Registers are u32. op: add sub mul (lo)
 * shl shr and or xor min max (min/max signed). */
ptx_opd kit_iop(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b);
ptx_opd kit_imad(ptx_fn *f, ptx_opd a, ptx_opd b, ptx_opd c); /* a * b + c */
/* The operand in a register (an immediate is moved into a new one). */
ptx_reg kit_reg(ptx_fn *f, ptx_opd v);
/* The swizzle of an offset operand. */
ptx_opd kit_emit_swz(ptx_fn *f, kit_swizzle s, ptx_opd x);
/* Codomain component dim at coordinate operands c[0..rank-1]. */
ptx_opd kit_emit(ptx_fn *f, const kit_layout *l, const ptx_opd *c, int dim);
/* The same at a linear index operand; shapes must be powers of two when
 * idx is a register. */
ptx_opd kit_emit_idx(ptx_fn *f, const kit_layout *l, ptx_opd idx, int dim);

#endif
