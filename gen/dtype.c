/* Storage dtypes: the table generated from PT_DTYPE_MAP, and exact host
 * conversions between float64 and each storage format.
 *
 * Every narrow float format goes through the rounding engine the emulator
 * uses (ptx/num.h), which rounds a double straight to the format's bit
 * pattern. Because it starts from the double, pt_dtype_round(PT_F16, v)
 * rounds once (no double rounding through f32), and the f32 entry points
 * are the same routine fed an exact widening of their argument. */
#include "gen/dtype.h"

#include "ptx/num.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const pt_dtype_info dtype_table[PT_NDTYPES] = {
#define X(id, nm, by, isf, np, sm, pt, x2, ls, rg, to, from)                                  \
    [PT_##id] = {nm, by, isf, np, sm, PTX_T_##pt, PTX_T_##x2, PTX_T_##ls, PTX_T_##rg, PT_CVT_##to, \
                 PT_CVT_##from, PTX_T_##x2 == PTX_T_##pt ? 1 : 2},
    PT_DTYPE_MAP(X)
#undef X
};

const pt_dtype_info *pt_dtype_get(pt_dtype t)
{
    assert((int)t >= 0 && t < PT_NDTYPES);
    return &dtype_table[t];
}

bool pt_dtype_of_ptx(ptx_type t, pt_dtype *out)
{
    for (int i = 0; i < PT_NDTYPES; i++) {
        if (dtype_table[i].ptx == t) {
            *out = (pt_dtype)i;
            return true;
        }
    }
    return false;
}

int pt_dtype_parse(const char *name, pt_dtype *out, pt_err *e)
{
    for (int i = 0; i < PT_NDTYPES; i++) {
        if (strcmp(name, dtype_table[i].name) == 0) {
            *out = (pt_dtype)i;
            return PT_OK;
        }
    }
    char list[256];
    size_t n = 0;
    list[0] = '\0';
    for (int i = 0; i < PT_NDTYPES; i++) {
        int k = snprintf(list + n, sizeof list - n, "%s%s", i ? " " : "", dtype_table[i].name);
        if (k < 0 || (size_t)k >= sizeof list - n)
            break;
        n += (size_t)k;
    }
    return pt_errf(e, PT_EINVAL, "unknown dtype '%s' (supported: %s)", name, list);
}

/* ---- narrow floats: the one rounding engine (ptx/num.h) ----
 * Host conversions are the emulator's: num_round rounds a double straight
 * into the format (once, so no double rounding through f32), with the same
 * NaN, overflow and satfinite rules as the emulated cvt. */

/* f16 / bf16: round to nearest even; overflow to inf; any NaN becomes the
 * canonical 0x7FFF (what the GPU's cvt produces). */
static uint16_t d_to_f16(double x) { return (uint16_t)num_round(EMU_FMT_F16, x, EMU_RN, 0); }
static uint16_t d_to_bf16(double x) { return (uint16_t)num_round(EMU_FMT_BF16, x, EMU_RN, 0); }

/* fp8 satfinite (cvt.rn.satfinite.e4m3x2.f32): inf and overflow saturate to
 * the largest finite value; NaN becomes 0x7F with its sign. */
static uint8_t d_to_e4m3(double x)
{
    return (uint8_t)num_round(EMU_FMT_E4M3, x, EMU_RN, EMU_NF_SATFINITE);
}

static uint8_t d_to_e5m2(double x)
{
    return (uint8_t)num_round(EMU_FMT_E5M2, x, EMU_RN, EMU_NF_SATFINITE);
}

/* tf32 (cvt.rna.tf32.f32): 10 mantissa bits, ties away from zero; the f32
 * exponent range is kept, so overflow rounds to inf. */
static double d_to_tf32(double x)
{
    if (isnan(x))
        return x;
    return num_decode(EMU_FMT_TF32, num_round(EMU_FMT_TF32, x, EMU_RNA, 0));
}

uint16_t pt_f32_to_f16(float x) { return d_to_f16((double)x); }
float pt_f16_to_f32(uint16_t h) { return (float)num_decode(EMU_FMT_F16, h); }
uint16_t pt_f32_to_bf16(float x) { return d_to_bf16((double)x); }
float pt_bf16_to_f32(uint16_t h) { return num_bf16_to_f32(h); } /* exact: the high half */
uint8_t pt_f32_to_e4m3(float x) { return d_to_e4m3((double)x); }
float pt_e4m3_to_f32(uint8_t v) { return (float)num_decode(EMU_FMT_E4M3, v); }
uint8_t pt_f32_to_e5m2(float x) { return d_to_e5m2((double)x); }
float pt_e5m2_to_f32(uint8_t v) { return (float)num_decode(EMU_FMT_E5M2, v); }

/* ---- integers: round to nearest even, saturate, NaN -> 0 (cvt.rni.sat) ---- */

static double int_round(double v, double lo, double hi)
{
    if (isnan(v))
        return 0.0;
    if (v <= lo)
        return lo;
    if (v >= hi)
        return hi;
    double r = floor(v), d = v - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0))
        r += 1.0;
    return r;
}

/* 2^63 and 2^64 are exact doubles; the largest s64/u64 are not, so the
 * saturation bound for those is the largest double below 2^63 / 2^64. */
static double int_lo(pt_dtype t)
{
    switch (t) {
    case PT_S8: return -128.0;
    case PT_S16: return -32768.0;
    case PT_S32: return -2147483648.0;
    case PT_S64: return -9223372036854775808.0;
    default: return 0.0;
    }
}

static double int_hi(pt_dtype t)
{
    switch (t) {
    case PT_S8: return 127.0;
    case PT_U8: return 255.0;
    case PT_S16: return 32767.0;
    case PT_U16: return 65535.0;
    case PT_S32: return 2147483647.0;
    case PT_U32: return 4294967295.0;
    case PT_S64: return nextafter(9223372036854775808.0, 0.0);
    case PT_U64: return nextafter(18446744073709551616.0, 0.0);
    default: return 0.0;
    }
}

double pt_dtype_round(pt_dtype t, double v)
{
    switch (t) {
    case PT_F64: return v;
    case PT_F32: return (double)(float)v;
    case PT_TF32: return d_to_tf32(v);
    case PT_F16: return (double)pt_f16_to_f32(d_to_f16(v));
    case PT_BF16: return (double)pt_bf16_to_f32(d_to_bf16(v));
    case PT_E4M3: return (double)pt_e4m3_to_f32(d_to_e4m3(v));
    case PT_E5M2: return (double)pt_e5m2_to_f32(d_to_e5m2(v));
    case PT_S8: case PT_U8: case PT_S16: case PT_U16:
    case PT_S32: case PT_U32: case PT_S64: case PT_U64:
        return int_round(v, int_lo(t), int_hi(t));
    case PT_NDTYPES: break;
    }
    assert(0 && "bad dtype");
    return v;
}

/* Typed element access through memcpy: buffers need not be aligned. */
#define LOAD(T, buf, i) \
    do { T x_; memcpy(&x_, (const unsigned char *)(buf) + (i) * sizeof x_, sizeof x_); return (double)x_; } while (0)
#define STORE(T, buf, i, val) \
    do { T x_ = (T)(val); memcpy((unsigned char *)(buf) + (i) * sizeof x_, &x_, sizeof x_); return; } while (0)

double pt_dtype_load(pt_dtype t, const void *buf, size_t i)
{
    switch (t) {
    case PT_F64: LOAD(double, buf, i);
    case PT_F32: case PT_TF32: LOAD(float, buf, i);
    case PT_F16: {
        uint16_t h;
        memcpy(&h, (const unsigned char *)buf + 2 * i, 2);
        return (double)pt_f16_to_f32(h);
    }
    case PT_BF16: {
        uint16_t h;
        memcpy(&h, (const unsigned char *)buf + 2 * i, 2);
        return (double)pt_bf16_to_f32(h);
    }
    case PT_E4M3: return (double)pt_e4m3_to_f32(((const uint8_t *)buf)[i]);
    case PT_E5M2: return (double)pt_e5m2_to_f32(((const uint8_t *)buf)[i]);
    case PT_S8: LOAD(int8_t, buf, i);
    case PT_U8: LOAD(uint8_t, buf, i);
    case PT_S16: LOAD(int16_t, buf, i);
    case PT_U16: LOAD(uint16_t, buf, i);
    case PT_S32: LOAD(int32_t, buf, i);
    case PT_U32: LOAD(uint32_t, buf, i);
    case PT_S64: LOAD(int64_t, buf, i);
    case PT_U64: LOAD(uint64_t, buf, i);
    case PT_NDTYPES: break;
    }
    assert(0 && "bad dtype");
    return 0.0;
}

/* Stores v rounded to t: floats round to nearest even once, straight from
 * the double; integers round to nearest even and saturate (NaN -> 0). */
void pt_dtype_store(pt_dtype t, void *buf, size_t i, double v)
{
    switch (t) {
    case PT_F64: STORE(double, buf, i, v);
    case PT_F32: STORE(float, buf, i, v);
    case PT_TF32: STORE(float, buf, i, d_to_tf32(v));
    case PT_F16: STORE(uint16_t, buf, i, d_to_f16(v));
    case PT_BF16: STORE(uint16_t, buf, i, d_to_bf16(v));
    case PT_E4M3: ((uint8_t *)buf)[i] = d_to_e4m3(v); return;
    case PT_E5M2: ((uint8_t *)buf)[i] = d_to_e5m2(v); return;
    case PT_S8: STORE(int8_t, buf, i, pt_dtype_round(t, v));
    case PT_U8: STORE(uint8_t, buf, i, pt_dtype_round(t, v));
    case PT_S16: STORE(int16_t, buf, i, pt_dtype_round(t, v));
    case PT_U16: STORE(uint16_t, buf, i, pt_dtype_round(t, v));
    case PT_S32: STORE(int32_t, buf, i, pt_dtype_round(t, v));
    case PT_U32: STORE(uint32_t, buf, i, pt_dtype_round(t, v));
    case PT_S64: STORE(int64_t, buf, i, pt_dtype_round(t, v));
    case PT_U64: STORE(uint64_t, buf, i, pt_dtype_round(t, v));
    case PT_NDTYPES: break;
    }
    assert(0 && "bad dtype");
}
