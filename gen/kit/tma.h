/* kit tma: tensor maps as kernel parameters and TMA tensor loads (sm_90;
 * facts: shared/ref/ptx-sm90.md section 4).
 *
 * A map is a launch's pt_tmap (gen/op.h: what cuTensorMapEncodeTiled takes
 * but the pointer, relative to one of the launch's tensors); the kernel
 * takes it by value as `.param .align 64 .b8 name[128]` (PT_ARG_TENSORMAP,
 * encoded by the binder once the tensor's device pointer is known) and
 * addresses it generically (mov.b64 + cvta.param, ref 4.2). A load copies
 * one box into shared memory and counts its bytes (the whole box, filled
 * elements included) on an mbarrier's transaction count (ref 4.4). */
#ifndef GEN_KIT_TMA_H
#define GEN_KIT_TMA_H

#include "gen/op.h"
#include "ptx/ir.h"

/* CUtensorMapDataType of a storage dtype (8-bit types as UINT8, tf32 as
 * FLOAT32: its bits are copied, not rounded); -1: none. */
int kit_tma_dtype(pt_dtype dt);
/* Adds map `map` to the launch (l->tmaps, and a PT_ARG_TENSORMAP argument
 * in parameter order) and the kernel parameter `name`; returns the map's
 * generic address (u64). Too many maps or arguments set the module's
 * sticky error. */
ptx_reg kit_tma_param(ptx_fn *f, pt_launch *l, const char *name, const pt_tmap *map);
/* prefetch.tensormap of a map's generic address. */
void kit_tma_prefetch(ptx_fn *f, ptx_reg map);
/* cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes
 * [dst], [map, {coords}], [mbar]: dst and mbar u32 shared addresses (dst
 * aligned to the map's swizzle pattern), coords 32-bit, innermost first. */
void kit_tma_load(ptx_fn *f, ptx_reg dst, ptx_reg map, int rank, const ptx_opd *coords, ptx_reg mbar);
/* The same with .multicast::cluster: the box lands at dst in every CTA of
 * the cluster whose bit is set in mask (a .b16 register; bit i = rank i)
 * and completes on the mbarrier at the same offset in each. */
void kit_tma_load_mc(ptx_fn *f, ptx_reg dst, ptx_reg map, int rank, const ptx_opd *coords, ptx_reg mbar,
                     ptx_reg mask);
/* Bytes one box of the map moves (what the load adds to complete_tx). */
int64_t kit_tma_box_bytes(const pt_tmap *map);

#endif
