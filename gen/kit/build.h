/* Builder shorthand for templates: modifier lists and one-type lists as
 * short names, so an emit line reads like the PTX it builds
 * (`ptx_emit(f, PTX_OP_ADD, NOM, U32T, d, a, b)` is `add.u32 d, a, b`).
 * Only spelling: every macro expands to the ptx/ir.h form it names, so the
 * builder still checks each instruction against the ISA table. One home for
 * what five generator files defined each for itself. */
#ifndef GEN_KIT_BUILD_H
#define GEN_KIT_BUILD_H

#include "ptx/ir.h"

/* Modifier lists: none, one, two, three (in written order). */
#define NOM PTX_NOMODS
#define M1(a) PTX_MODS(a)
#define M2(a, b) PTX_MODS(a, b)
#define M3(a, b, c) PTX_MODS(a, b, c)

/* One-type lists (`.u32`, `.f32`, ...); two-type forms such as cvt's
 * destination/source pair are PTX_TYPES(d, s). */
#define PREDT PTX_T1(PTX_T_PRED)
#define B16T PTX_T1(PTX_T_B16)
#define B32T PTX_T1(PTX_T_B32)
#define B64T PTX_T1(PTX_T_B64)
#define U16T PTX_T1(PTX_T_U16)
#define U32T PTX_T1(PTX_T_U32)
#define U64T PTX_T1(PTX_T_U64)
#define S32T PTX_T1(PTX_T_S32)
#define S64T PTX_T1(PTX_T_S64)
#define F32T PTX_T1(PTX_T_F32)
#define F64T PTX_T1(PTX_T_F64)

#endif
