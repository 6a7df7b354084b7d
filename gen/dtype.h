/* Storage dtypes: one table row each. Templates read the row; they never
 * branch on a dtype name. Host-side conversions (float64 <-> storage bits)
 * back the CPU references, .npy I/O and tests. */
#ifndef PT_DTYPE_H
#define PT_DTYPE_H

#include "ptx/base.h"

/* X(id, name, bytes, is_float, npy descr, min_sm)
 * npy descr: how the bits are stored in .npy (bf16 as uint16, fp8 as uint8). */
#define PT_DTYPE_MAP(X)                 \
    X(F64, "f64", 8, 1, "<f8", 80)      \
    X(F32, "f32", 4, 1, "<f4", 80)      \
    X(TF32, "tf32", 4, 1, "<f4", 80)    \
    X(F16, "f16", 2, 1, "<f2", 80)      \
    X(BF16, "bf16", 2, 1, "<u2", 80)    \
    X(E4M3, "e4m3", 1, 1, "|u1", 89)    \
    X(E5M2, "e5m2", 1, 1, "|u1", 89)    \
    X(S8, "s8", 1, 0, "|i1", 80)        \
    X(U8, "u8", 1, 0, "|u1", 80)        \
    X(S16, "s16", 2, 0, "<i2", 80)      \
    X(U16, "u16", 2, 0, "<u2", 80)      \
    X(S32, "s32", 4, 0, "<i4", 80)      \
    X(U32, "u32", 4, 0, "<u4", 80)      \
    X(S64, "s64", 8, 0, "<i8", 80)      \
    X(U64, "u64", 8, 0, "<u8", 80)

typedef enum pt_dtype {
#define X(id, name, bytes, isf, npy, sm) PT_##id,
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
} pt_dtype_info;

const pt_dtype_info *pt_dtype_get(pt_dtype t);
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
