/* Storage dtypes: one table row each. Templates read the row; they never
 * branch on a dtype name. Host-side conversions (float64 <-> storage bits)
 * back the CPU references, .npy I/O and tests. */
#ifndef PT_DTYPE_H
#define PT_DTYPE_H

#include "ptx/base.h"
#include "ptx/ir.h"

/* X(id, name, bytes, is_float, npy descr, min_sm, ptx, x2, ldst, reg, to_f32, from_f32)
 * npy descr: how the bits are stored in .npy (bf16 as uint16, fp8 as uint8).
 * The PTX columns (ptx_type / cvt modifier suffixes; gen/kit/io.h uses them):
 *   ptx   the element's PTX type (the cvt type);
 *   x2    the packed pair cvt converts two at a time (cvt.rn.f16x2.f32 d, hi, lo;
 *         cvt.rn.satfinite.e4m3x2.f32; cvt.rn.f16x2.e4m3x2), or ptx where there is none;
 *   ldst  the ld/st type of one element (16-bit floats as b16, fp8 as b8, ints
 *         narrower than 32 bits with their sign so a load extends them);
 *   reg   the register one element lives in (8-bit values in 16-bit registers);
 *   to_f32, from_f32  the modifiers of cvt.f32.<ptx> and cvt.<ptx>.f32 (PT_CVT_*
 *         below; NONE: the form takes none, e.g. the exact widening
 *         cvt.f32.f16). fp8 has no f32 form in either direction: to_f32 is the
 *         pair's cvt.rn.f16x2.e4m3x2 followed by the exact cvt.f32.f16, from_f32
 *         the x2 form's. tf32 is a compute type: stored as f32 bits, rounded by
 *         cvt.rna.tf32.f32. */
#define PT_DTYPE_MAP(X)                                                                 \
    X(F64, "f64", 8, 1, "<f8", 80, F64, F64, F64, F64, RN, NONE)                        \
    X(F32, "f32", 4, 1, "<f4", 80, F32, F32, F32, F32, NONE, NONE)                      \
    X(TF32, "tf32", 4, 1, "<f4", 80, TF32, TF32, F32, F32, NONE, RNA)                   \
    X(F16, "f16", 2, 1, "<f2", 80, F16, F16X2, B16, B16, NONE, RN)                      \
    X(BF16, "bf16", 2, 1, "<u2", 80, BF16, BF16X2, B16, B16, NONE, RN)                  \
    X(E4M3, "e4m3", 1, 1, "|u1", 89, E4M3, E4M3X2, B8, B16, RN, RN_SATFINITE)           \
    X(E5M2, "e5m2", 1, 1, "|u1", 89, E5M2, E5M2X2, B8, B16, RN, RN_SATFINITE)           \
    X(S8, "s8", 1, 0, "|i1", 80, S8, S8, S8, B16, RN, RNI_SAT)                          \
    X(U8, "u8", 1, 0, "|u1", 80, U8, U8, U8, B16, RN, RNI_SAT)                          \
    X(S16, "s16", 2, 0, "<i2", 80, S16, S16, S16, B16, RN, RNI_SAT)                     \
    X(U16, "u16", 2, 0, "<u2", 80, U16, U16, U16, B16, RN, RNI_SAT)                     \
    X(S32, "s32", 4, 0, "<i4", 80, S32, S32, B32, B32, RN, RNI)                         \
    X(U32, "u32", 4, 0, "<u4", 80, U32, U32, B32, B32, RN, RNI)                         \
    X(S64, "s64", 8, 0, "<i8", 80, S64, S64, B64, B64, RN, RNI)                         \
    X(U64, "u64", 8, 0, "<u8", 80, U64, U64, B64, B64, RN, RNI)

/* The cvt modifier lists the to_f32 / from_f32 columns name (initialisers
 * of a ptx_mods; the table in gen/dtype.c holds them). Float to
 * integer saturates in PTX whatever the modifiers; .sat is written for the
 * narrow types, where it is what the reader expects. */
#define PT_CVT_NONE {.n = 0}
#define PT_CVT_RN {.n = 1, .m = {PTX_M_RN}}
#define PT_CVT_RNA {.n = 1, .m = {PTX_M_RNA}}
#define PT_CVT_RNI {.n = 1, .m = {PTX_M_RNI}}
#define PT_CVT_RNI_SAT {.n = 2, .m = {PTX_M_RNI, PTX_M_SAT}}
#define PT_CVT_RN_SATFINITE {.n = 2, .m = {PTX_M_RN, PTX_M_SATFINITE}}

typedef enum pt_dtype {
#define X(id, name, bytes, isf, npy, sm, ...) PT_##id,
    PT_DTYPE_MAP(X)
#undef X
    PT_NDTYPES
} pt_dtype;

typedef struct pt_dtype_info {
    const char *name;
    int bytes;
    bool is_float;
    const char *npy;
    int min_sm;
    /* PTX columns (see PT_DTYPE_MAP) */
    ptx_type ptx, x2, ldst, reg;
    ptx_mods to_f32, from_f32;
    int pack; /* elements one cvt packs (2 where x2 is a pair type, else 1) */
} pt_dtype_info;

const pt_dtype_info *pt_dtype_get(pt_dtype t);
/* The storage dtype whose element type (column ptx) is t, e.g. an atom's
 * operand type PTX_T_BF16 -> PT_BF16, so its x2 / cvt columns can be read;
 * false when no row has it. */
bool pt_dtype_of_ptx(ptx_type t, pt_dtype *out);
/* "f32", "bf16", ... ; error "unknown dtype 'x' (supported: ...)" */
int pt_dtype_parse(const char *name, pt_dtype *out, pt_err *e);

/* Host conversions. Narrowing rounds to nearest even; fp8 saturates to
 * +-max-normal (satfinite), NaN stays NaN (e4m3 0x7F, e5m2 0x7F/0xFF style). */
uint16_t pt_f32_to_f16(float x);
float pt_f16_to_f32(uint16_t h);
uint16_t pt_f32_to_bf16(float x);
float pt_bf16_to_f32(uint16_t h);
uint8_t pt_f32_to_e4m3(float x);
float pt_e4m3_to_f32(uint8_t v);
uint8_t pt_f32_to_e5m2(float x);
float pt_e5m2_to_f32(uint8_t v);
/* Element i of a buffer of dtype t as a double, and the reverse (rounded). */
double pt_dtype_load(pt_dtype t, const void *buf, size_t i);
void pt_dtype_store(pt_dtype t, void *buf, size_t i, double v);
/* Rounds v through dtype t (f16/bf16/fp8/tf32 rounding), as a cast does. */
double pt_dtype_round(pt_dtype t, double v);

#endif
