/* The tile schedulers of the sm_90a wgmma GEMM (gen/gemm_wgmma.c) beyond
 * one tile per CTA: split-K k ranges and stream-K units (issue 13 item 2).
 * Private to the GEMM family.
 *
 * Split-K (splitk = S > 1): grid.y = S; split s = %ctaid.y takes k tiles
 * [s KT / S, (s + 1) KT / S) of every tile it visits (each >= 1 tile).
 *
 * Stream-K (streamk = 1, persistent = K): the tiles' k iterations, I =
 * tiles KT of them per batch entry, in order (tile-major), are cut at run
 * time into G = min(%nctaid.x, units) units (the launch's grid is
 * min(units, K x SMs), units = min(I, K x GEMM_SK_MAX_SMS); CTAs of a wider
 * grid past G leave at once), unit w taking
 * [floor(w I / G), floor((w + 1) I / G)) (every unit at least
 * floor(I / G) >= 1 iterations, neighbours at most one apart); CTA w of
 * the grid (G, 1, batch) runs unit w as segments, one per tile it
 * touches: tile t = it / KT, its k tiles from it % KT to the tile's end or
 * the unit's. Tile t's units are first(t) .. last(t),
 *   first(t) = floor(((t KT + 1) G - 1) / I), last(t) = floor(((t + 1) KT G - 1) / I)
 * (the largest w whose start is at or before the tile's first and last
 * iteration), computed in the kernel from G. Unit w writes its partial to
 * slot w - first(t) of the tile, and the one of the last(t) - first(t) + 1
 * arrivals that comes last sums the slots in order (gemm_epi.c's split-K
 * fixup with S = sk.slots, the most units any tile has at any G <= units:
 * the slots past the tile's count stay zero; a tile one unit covers
 * arrives once and sums its slot). No CTA waits on another; the sum's
 * order is the unit order, so a fixed G gives the same bits every launch.
 * The workspace (S slots a tile) is a constant of the kernel, whatever G.
 * dyn=m: both are laid out for m_cap (the tiles of m_cap rows: workspace,
 * stream-K plan), so one PTX serves every m of the bucket (m_cap/2,
 * m_cap]; a split comes from %ctaid.y / column tiles on the plain grid
 * (g->split set before wg_splitk_range), and a stream-K unit leaves at its
 * first tile past the run-time tile count g->tiles_r (tiles are walked in
 * order, so the rest are past it too; every contributor of a tile below it
 * still arrives, so the fixup's counts hold). */
#ifndef GEN_GEMM_WGMMA_SCHED_H
#define GEN_GEMM_WGMMA_SCHED_H

#include "gen/gemm_int.h"

typedef struct wg_sk {
    int64_t iters;   /* I: k iterations of all tiles of one batch entry */
    int64_t units;   /* the most CTAs (units) of a launch: min(I, K x GEMM_SK_MAX_SMS) */
    int64_t kt;      /* KT: k tiles per tile */
    int slots;       /* the most units any tile has (the fixup's S) */
    /* registers of one role */
    ptx_reg unit, grid, cur, end, nk; /* grid: %nctaid.x, the launch's G */
    int top;
} wg_sk;

/* The stream-K plan of a problem (host side): *sk from tiles, k tiles and
 * the widest grid gmax it may be launched with (the slots bound every G up
 * to it). Fails (message in e) when the u32 index math would overflow. */
int wg_sk_plan(int64_t tiles, int64_t kt, int64_t gmax, wg_sk *sk, pt_err *e);

/* Workspace bytes of S slots per tile (split-K and stream-K): batch x
 * tiles x S f32/s32 partial tiles, then one u32 counter per (batch, tile),
 * rounded up to 16 bytes (gemm.c's layout, so the contract is the same). */
int64_t wg_ws_bytes(const gemm_ctx *g, int slots);

/* Split-K: g->split = %ctaid.y, g->kt_begin and g->nkt of the split. */
void wg_splitk_range(gemm_ctx *g);

/* Stream-K, per role: head at the top of the role (its unit's range; a
 * label; leaves to `out` when the unit is done; sets g->tile, g->m0/n0
 * (gemm_tile_coords), g->kt_begin, g->nkt); fixup after the segment's k
 * loop (g->split: the unit's slot, g->arrivals: the tile's unit count);
 * tail at the end of the segment (next segment). */
void wg_sk_head(gemm_ctx *g, wg_sk *sk, int out);
void wg_sk_fixup(gemm_ctx *g, wg_sk *sk);
void wg_sk_tail(gemm_ctx *g, wg_sk *sk);

#endif
