/* Storage dtypes: the table generated from PT_DTYPE_MAP, and exact host
 * conversions between float64 and each storage format.
 *
 * Every narrow float format goes through one routine, fmt_round(), that
 * rounds a double straight to the format's bit pattern. Because it starts
 * from the double, pt_dtype_round(PT_F16, v) rounds once (no double rounding
 * through f32), and the f32 entry points are the same routine fed an exact
 * widening of their argument. */
#include "gen/dtype.h"

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

/* ---- one rounding routine for every narrow float format ---- */

/* A binary float format, as seen by fmt_round().
 * mbits: stored mantissa bits; emin: exponent of the smallest normal;
 * maxbits: magnitude bits of the largest finite value; infbits: magnitude
 * bits of +inf, or 0 when the format saturates (fp8 satfinite) instead;
 * ties_away: round half away from zero (tf32 cvt.rna) instead of to even. */
typedef struct fmt {
    int mbits, emin;
    uint32_t maxbits, infbits;
    bool ties_away;
} fmt;

static const fmt FMT_F16 = {10, -14, 0x7BFF, 0x7C00, false};
static const fmt FMT_BF16 = {7, -126, 0x7F7F, 0x7F80, false};
static const fmt FMT_E4M3 = {3, -6, 0x7E, 0, false};
static const fmt FMT_E5M2 = {2, -14, 0x7B, 0, false};
/* tf32 as a 19-bit pattern (sign, 8 exponent, 10 mantissa bits); the f32
 * it is stored in is that pattern shifted left by 13. */
static const fmt FMT_TF32 = {10, -126, (0xFEu << 10) | 0x3FFu, 0xFFu << 10, true};

/* Magnitude bits (no sign) of |v| rounded to format f; v is not NaN.
 * Below the smallest normal the quantum stays 2^(emin - mbits), which gives
 * subnormals (and signed zero for |v| <= half the smallest subnormal, ties to
 * even). The encoding ((E - emin) << mbits) + r carries a mantissa that
 * rounded up to 2^(mbits+1) into the exponent field for free. */
static uint32_t fmt_round(double v, const fmt *f)
{
    double a = fabs(v);
    if (a == 0.0)
        return 0;
    if (isinf(a))
        return f->infbits ? f->infbits : f->maxbits;
    int e;
    (void)frexp(a, &e);
    int E = e - 1; /* a = 1.m * 2^E */
    int qe = (E < f->emin ? f->emin : E) - f->mbits;
    double q = ldexp(a, -qe); /* exact: scaling by a power of two */
    double r = floor(q);
    double d = q - r; /* exact */
    if (d > 0.5 || (d == 0.5 && (f->ties_away || fmod(r, 2.0) != 0.0)))
        r += 1.0;
    uint64_t bits = (uint64_t)r;
    if (E >= f->emin)
        bits += (uint64_t)(E - f->emin) << f->mbits;
    if (bits > f->maxbits)
        return f->infbits ? f->infbits : f->maxbits;
    return (uint32_t)bits;
}

/* Value of magnitude bits m in format f (no NaN/inf handling). */
static double fmt_value(uint32_t m, const fmt *f)
{
    uint32_t ef = m >> f->mbits, mant = m & ((1u << f->mbits) - 1);
    if (ef == 0)
        return ldexp((double)mant, f->emin - f->mbits);
    return ldexp((double)(mant | (1u << f->mbits)), (int)ef - 1 + f->emin - f->mbits);
}

/* f16: NaN becomes the canonical 0x7FFF (what the GPU's cvt produces). */
static uint16_t d_to_f16(double x)
{
    if (isnan(x))
        return 0x7FFF;
    return (uint16_t)((signbit(x) ? 0x8000u : 0u) | fmt_round(x, &FMT_F16));
}

/* bf16: RNE on the dropped bits; any NaN becomes 0x7FFF. */
static uint16_t d_to_bf16(double x)
{
    if (isnan(x))
        return 0x7FFF;
    return (uint16_t)((signbit(x) ? 0x8000u : 0u) | fmt_round(x, &FMT_BF16));
}

/* fp8 satfinite: NaN keeps its sign (0x7F/0xFF); inf and overflow saturate. */
static uint8_t d_to_e4m3(double x)
{
    unsigned s = signbit(x) ? 0x80u : 0u;
    if (isnan(x))
        return (uint8_t)(s | 0x7Fu);
    return (uint8_t)(s | fmt_round(x, &FMT_E4M3));
}

static uint8_t d_to_e5m2(double x)
{
    unsigned s = signbit(x) ? 0x80u : 0u;
    if (isnan(x))
        return (uint8_t)(s | 0x7Fu);
    return (uint8_t)(s | fmt_round(x, &FMT_E5M2));
}

/* tf32 (cvt.rna.tf32.f32): 10 mantissa bits, ties away from zero; the f32
 * exponent range is kept, so overflow rounds to inf. NaN passes through. */
static double d_to_tf32(double x)
{
    if (isnan(x))
        return x;
    uint32_t m = fmt_round(x, &FMT_TF32);
    double v = m == FMT_TF32.infbits ? (double)INFINITY : fmt_value(m, &FMT_TF32);
    return signbit(x) ? -v : v;
}

uint16_t pt_f32_to_f16(float x) { return d_to_f16((double)x); }

float pt_f16_to_f32(uint16_t h)
{
    uint32_t m = h & 0x7FFFu;
    double v;
    if (m >= 0x7C00u)
        v = m == 0x7C00u ? (double)INFINITY : (double)NAN;
    else
        v = fmt_value(m, &FMT_F16);
    return (float)((h & 0x8000u) ? -v : v);
}

uint16_t pt_f32_to_bf16(float x) { return d_to_bf16((double)x); }

float pt_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint8_t pt_f32_to_e4m3(float x) { return d_to_e4m3((double)x); }

float pt_e4m3_to_f32(uint8_t v)
{
    uint32_t m = v & 0x7Fu;
    double d = m == 0x7Fu ? (double)NAN : fmt_value(m, &FMT_E4M3);
    return (float)((v & 0x80u) ? -d : d);
}

uint8_t pt_f32_to_e5m2(float x) { return d_to_e5m2((double)x); }

float pt_e5m2_to_f32(uint8_t v)
{
    uint32_t m = v & 0x7Fu;
    double d;
    if (m >= 0x7Cu)
        d = m == 0x7Cu ? (double)INFINITY : (double)NAN;
    else
        d = fmt_value(m, &FMT_E5M2);
    return (float)((v & 0x80u) ? -d : d);
}

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
