/* dtype I/O: n consecutive elements of a storage dtype loaded into f32
 * registers, or f32 values stored as a storage dtype, in the widest
 * accesses the alignment allows (v2/v4, up to 16 bytes each), predicated,
 * with packed conversions (cvt.rn.f16x2.f32 d, hi, lo; the fp8 x2 forms).
 * Everything dtype-specific comes from the dtype table's PTX columns
 * (gen/dtype.h PT_DTYPE_MAP): a template never branches on a dtype.
 *
 * Dtypes: f64 f32 f16 bf16 e4m3 e5m2 s8 u8 s16 u16 s32 u32 s64 u64 (tf32 is
 * a compute type: store f32 and round with kit_cvt_from_f32). fp8 needs
 * sm_89 (the module's target decides; the builder names the instruction).
 *
 * Conversions: to f32 exact where the format allows (f16, bf16, fp8, 8/16-bit
 * integers), otherwise round to nearest even (cvt.rn.f32.s32, .f64); from
 * f32 round to nearest even, fp8 saturating to the largest finite value
 * (NaN stays NaN), integers rounding to nearest even and saturating (NaN
 * gives 0). gen/dtype.h's host conversions compute the same values. */
#ifndef GEN_KIT_IO_H
#define GEN_KIT_IO_H

#include "gen/dtype.h"
#include "ptx/ir.h"

/* How an access is made. A zeroed kit_io is a plain .global access of
 * naturally aligned elements, unguarded. */
typedef struct kit_io {
    bool shared;    /* .shared instead of .global */
    bool nc;        /* loads: the read-only path (ld.global.nc); ignored for .shared */
    bool raw;       /* no conversion: loads return, stores take, the elements as they
                       are stored, in the dtype's register type (table column reg;
                       s32 bits in b32, f16 bits in b16; for fp8 one b16 per pair,
                       low byte the lower element, so n > 1 needs align >= 2; a
                       lone fp8 sits in the low byte) */
    int align;      /* bytes the address (base + off) is known to be aligned to;
                       0: the whole run's size. Accesses never exceed 16 bytes or
                       this alignment; below one element's size is an error. */
    ptx_reg guard;  /* the accesses run where this predicate holds (id 0: always) */
    bool guard_neg; /* ... where it does not hold */
    ptx_reg scale;  /* stores: an f32 register every value is multiplied by before
                       it is converted (the fp8 output scale; id 0: none) */
} kit_io;

/* Loads elements [0, n) of dtype dt at [base + off] (base: a 64-bit
 * address register; n a power of two up to 64) into out[0..n): fresh f32
 * registers, or with io->raw the stored bits (fp8: n/2 pair registers,
 * rounded up). Emission order: the registers, the loads, the unpacking
 * movs, then one conversion per element (per pair for fp8). An offset
 * beyond a 32-bit immediate is added to the base first. Returns PT_OK, or
 * an error code that is also the module's sticky error (ptx_module_errmsg). */
int kit_load(ptx_fn *f, const kit_io *io, pt_dtype dt, ptx_reg base, int64_t off, int n,
             ptx_reg *out);

/* Stores v[0..n) (f32 registers or immediates; with io->raw, registers of
 * the dtype's register type, fp8 as pairs as kit_load returns them) as
 * dtype dt at [base + off]. Same rules and result as kit_load. */
int kit_store(ptx_fn *f, const kit_io *io, pt_dtype dt, ptx_reg base, int64_t off, int n,
              const ptx_opd *v);

/* One element: x (in dt's register type, an fp8 in the low byte) to a fresh
 * f32 register, and an f32 value x to a fresh register of dt's register
 * type (tf32: a b32 register with the cvt.rna.tf32.f32 bits). Same rounding
 * as kit_load / kit_store; an unsupported dtype sets the sticky error and
 * returns a fresh, unset register. */
ptx_reg kit_cvt_to_f32(ptx_fn *f, pt_dtype dt, ptx_opd x);
ptx_reg kit_cvt_from_f32(ptx_fn *f, pt_dtype dt, ptx_opd x);

#endif
