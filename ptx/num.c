/* Exact rounding into narrow float formats; see num.h for the approach.
 * References: IEEE 754 rounding; cuda_fp8.hpp __nv_cvt_double_to_fp8 for
 * the fp8 NaN/overflow conventions; shared/ref/ptx-sm80.md section 7.4. */
#include "ptx/num.h"

#include <fenv.h>
#include <math.h>

/* Format table. Columns: exponent bits, mantissa bits, largest finite
 * encoding (magnitude), whether all-ones exponents mean Inf/NaN (IEEE) or
 * are ordinary numbers (e4m3: only S.1111.111 is NaN). */
static const struct {
    int ebits, mbits;
    uint64_t maxfin;
    bool ieee;
} fmt_tab[] = {
    [EMU_FMT_F16] = {5, 10, 0x7bff, true},
    [EMU_FMT_BF16] = {8, 7, 0x7f7f, true},
    [EMU_FMT_TF32] = {8, 10, 0x3fbff, true},
    [EMU_FMT_F32] = {8, 23, 0x7f7fffff, true},
    [EMU_FMT_F64] = {11, 52, 0x7fefffffffffffffull, true},
    [EMU_FMT_E4M3] = {4, 3, 0x7e, false},
    [EMU_FMT_E5M2] = {5, 2, 0x7b, true},
};

int num_fmt_bits(emu_fmt f)
{
    return f == EMU_FMT_TF32 ? 32 : 1 + fmt_tab[f].ebits + fmt_tab[f].mbits;
}

static uint64_t inf_bits(emu_fmt f)
{
    return ((1ull << fmt_tab[f].ebits) - 1) << fmt_tab[f].mbits;
}

/* Result of an overflow, by mode: RN/RNA go to Inf, directed modes to Inf
 * or max finite depending on the side; satfinite always to max finite; a
 * format without Inf (e4m3) gives NaN. */
static uint64_t overflow(emu_fmt f, bool neg, int rnd, unsigned flags)
{
    uint64_t sign = (uint64_t)neg << (fmt_tab[f].ebits + fmt_tab[f].mbits);
    bool to_max = (flags & EMU_NF_SATFINITE) || rnd == EMU_RZ || (rnd == EMU_RP && neg) ||
                  (rnd == EMU_RM && !neg);
    if (to_max)
        return sign | fmt_tab[f].maxfin;
    if (!fmt_tab[f].ieee)
        return sign | 0x7f;
    return sign | inf_bits(f);
}

uint64_t num_encode(emu_fmt f, bool neg, uint64_t mant, int exp, bool sticky, int rnd,
                    unsigned flags)
{
    const int eb = fmt_tab[f].ebits, mb = fmt_tab[f].mbits;
    const int bias = (1 << (eb - 1)) - 1, emin = 1 - bias;
    uint64_t sign = (uint64_t)neg << (eb + mb);
    if (mant == 0 && !sticky)
        return sign;
    if (mant == 0) { /* a nonzero value far below 2^exp */
        mant = 1;
        exp -= 64;
    }
    int msb = 63 - __builtin_clzll(mant);
    int e = exp + msb; /* value in [2^e, 2^(e+1)) */
    if (e + bias > (1 << eb) - 1)
        return overflow(f, neg, rnd, flags);
    int lsb = (e < emin ? emin : e) - mb; /* weight of the result's last bit */
    int shift = lsb - exp;
    uint64_t q;
    bool rb, st;
    if (shift <= 0) {
        q = mant << -shift;
        rb = false;
        st = sticky;
    } else if (shift < 64) {
        q = mant >> shift;
        rb = (mant >> (shift - 1)) & 1;
        st = sticky || (mant & ((1ull << (shift - 1)) - 1)) != 0;
    } else if (shift == 64) {
        q = 0;
        rb = mant >> 63;
        st = sticky || (mant << 1) != 0;
    } else {
        q = 0;
        rb = false;
        st = true;
    }
    bool up;
    switch (rnd) {
    case EMU_RNA: up = rb; break;
    case EMU_RZ: up = false; break;
    case EMU_RP: up = (rb || st) && !neg; break;
    case EMU_RM: up = (rb || st) && neg; break;
    default: up = rb && (st || (q & 1)); break;
    }
    q += up;
    /* One formula covers normals, subnormals and the carries between them:
     * the biased exponent of the lsb, minus one, plus the significand. */
    uint64_t mag = ((uint64_t)(lsb + mb + bias - 1) << mb) + q;
    if (mag > fmt_tab[f].maxfin)
        return overflow(f, neg, rnd, flags);
    return sign | mag;
}

/* Sign, significand and exponent of a finite double: |x| = mant * 2^exp. */
static void split(double x, uint64_t *mant, int *exp)
{
    uint64_t b = num_f64_bits(x);
    int ef = (int)((b >> 52) & 0x7ff);
    uint64_t frac = b & ((1ull << 52) - 1);
    if (ef == 0) {
        *mant = frac;
        *exp = -1074;
    } else {
        *mant = frac | (1ull << 52);
        *exp = ef - 1075;
    }
}

/* The NaN a conversion into f produces: the canonical NaN of the GPU for
 * f16/bf16/f32/f64; fp8 keeps only the sign (e4m3 S.1111.111, e5m2 the
 * quiet S.11111.11, as cuda_fp8.hpp's float path gives after making the
 * NaN canonical; the host conversions of gen/dtype.c rely on it). */
static uint64_t nan_of(emu_fmt f, double x)
{
    uint64_t b = num_f64_bits(x);
    switch (f) {
    case EMU_FMT_F16:
    case EMU_FMT_BF16: return EMU_H_QNAN;
    case EMU_FMT_TF32:
    case EMU_FMT_F32: return EMU_F32_QNAN;
    case EMU_FMT_F64: return EMU_F64_QNAN;
    case EMU_FMT_E4M3: return 0x7f | ((b >> 63) << 7);
    case EMU_FMT_E5M2: return 0x7f | ((b >> 63) << 7);
    }
    return 0;
}

static bool enc_subnormal(emu_fmt f, uint64_t bits)
{
    int mb = fmt_tab[f].mbits, eb = fmt_tab[f].ebits;
    uint64_t ef = (bits >> mb) & ((1ull << eb) - 1), fr = bits & ((1ull << mb) - 1);
    return ef == 0 && fr != 0;
}

uint64_t num_round_dd(emu_fmt f, double s, double e, int rnd, unsigned flags)
{
    int tb = f == EMU_FMT_TF32 ? 13 : 0; /* tf32 lives in the f32 layout */
    if (isnan(s))
        return nan_of(f, s);
    bool neg = signbit(s) != 0;
    if (flags & EMU_NF_SAT) { /* clamp to [0, 1] before rounding */
        if (neg || s == 0) {
            s = 0.0;
            e = 0.0;
            neg = false;
        } else if (s > 1.0 || (s == 1.0 && e > 0)) {
            s = 1.0;
            e = 0.0;
        }
    }
    if (neg && (flags & EMU_NF_RELU))
        return 0;
    uint64_t r;
    if (isinf(s)) {
        if ((flags & EMU_NF_SATFINITE) || !fmt_tab[f].ieee)
            r = overflow(f, neg, rnd, flags);
        else
            r = ((uint64_t)neg << (fmt_tab[f].ebits + fmt_tab[f].mbits)) | inf_bits(f);
        return r << tb;
    }
    if (s == 0)
        return ((uint64_t)neg << (fmt_tab[f].ebits + fmt_tab[f].mbits)) << tb;
    uint64_t mant;
    int x;
    split(s, &mant, &x);
    bool sticky = false;
    if (e != 0 && isfinite(e)) {
        mant <<= 10;
        x -= 10;
        uint64_t me;
        int xe;
        split(e, &me, &xe);
        uint64_t add;
        bool st = false;
        if (xe >= x)
            add = me << (xe - x);
        else if (x - xe >= 64) {
            add = 0;
            st = true;
        } else {
            int sh = x - xe;
            add = me >> sh;
            st = (me & ((1ull << sh) - 1)) != 0;
        }
        if ((signbit(e) != 0) == neg) {
            mant += add;
            sticky = st;
        } else {
            mant -= add + (st ? 1 : 0);
            sticky = st;
        }
    }
    r = num_encode(f, neg, mant, x, sticky, rnd, flags);
    if ((flags & EMU_NF_FTZ) && enc_subnormal(f, r))
        r &= 1ull << (fmt_tab[f].ebits + fmt_tab[f].mbits);
    return r << tb;
}

double num_decode(emu_fmt f, uint64_t bits)
{
    if (f == EMU_FMT_F64)
        return num_f64(bits);
    if (f == EMU_FMT_F32 || f == EMU_FMT_TF32)
        return (double)num_f32(bits);
    const int eb = fmt_tab[f].ebits, mb = fmt_tab[f].mbits;
    const int bias = (1 << (eb - 1)) - 1;
    bool neg = (bits >> (eb + mb)) & 1;
    int ef = (int)((bits >> mb) & ((1u << eb) - 1));
    uint64_t fr = bits & ((1ull << mb) - 1);
    double v;
    if (!fmt_tab[f].ieee && ef == (1 << eb) - 1 && fr == (1ull << mb) - 1)
        v = NAN;
    else if (fmt_tab[f].ieee && ef == (1 << eb) - 1)
        v = fr ? NAN : INFINITY;
    else if (ef == 0)
        v = ldexp((double)fr, 1 - bias - mb);
    else
        v = ldexp((double)(fr | (1ull << mb)), ef - bias - mb);
    return neg ? -v : v;
}

uint32_t num_f16_to_f32(uint16_t h)
{
    double d = num_decode(EMU_FMT_F16, h);
    if (isnan(d))
        return EMU_F32_QNAN;
    return (uint32_t)num_f32_bits((float)d);
}

uint16_t num_fp8_to_f16(emu_fmt f, unsigned v)
{
    double d = num_decode(f, v & 0xff);
    if (isnan(d))
        return EMU_H_QNAN;
    return (uint16_t)num_round(EMU_FMT_F16, d, EMU_RN, 0);
}

uint64_t num_from_u64(emu_fmt f, uint64_t v, int rnd, unsigned flags)
{
    if (flags & EMU_NF_SAT) {
        double d = v == 0 ? 0.0 : 1.0;
        return num_round(f, d, rnd, flags);
    }
    uint64_t r = num_encode(f, false, v, 0, false, rnd, flags);
    return f == EMU_FMT_TF32 ? r << 13 : r;
}

uint64_t num_from_s64(emu_fmt f, int64_t v, int rnd, unsigned flags)
{
    if (v >= 0)
        return num_from_u64(f, (uint64_t)v, rnd, flags);
    if (flags & (EMU_NF_SAT | EMU_NF_RELU))
        return 0;
    uint64_t r = num_encode(f, true, 0 - (uint64_t)v, 0, false, rnd, flags);
    return f == EMU_FMT_TF32 ? r << 13 : r;
}

/* An exact zero sum x + y is +0 in every mode but RM, where it is -0,
 * unless both addends are zeros of the same sign (IEEE 754 6.3). */
static double zero_sum_rm(double x, double y)
{
    if (x == 0 && y == 0 && signbit(x) == signbit(y))
        return x;
    return -0.0;
}

/* Exact value of one operand, with FTZ applied to subnormal inputs. */
static double operand(emu_fmt f, uint64_t bits, unsigned flags)
{
    if (flags & EMU_NF_FTZ) {
        if (f == EMU_FMT_F32)
            bits = num_ftz32((uint32_t)bits);
        else if (f == EMU_FMT_F64)
            bits = num_ftz64(bits);
        else if (enc_subnormal(f, bits))
            bits &= 1ull << (fmt_tab[f].ebits + fmt_tab[f].mbits);
    }
    return num_decode(f, bits);
}

uint64_t num_fop(emu_fmt f, int op, uint64_t ab, uint64_t bb, uint64_t cb, int rnd,
                 unsigned flags)
{
    double a = operand(f, ab, flags), b = operand(f, bb, flags), c = operand(f, cb, flags);
    double s, e = 0.0;
    switch (op) {
    case EMU_FOP_ADD: s = num_two_sum(a, b, &e); break;
    case EMU_FOP_SUB: s = num_two_sum(a, -b, &e); break;
    case EMU_FOP_MUL: s = a * b; break; /* exact: at most 2 x 24 significant bits */
    case EMU_FOP_FMA: s = num_two_sum(a * b, c, &e); break;
    case EMU_FOP_RCP:
        a = 1.0;
        b = operand(f, ab, flags);
        /* fall through */
    case EMU_FOP_DIV:
        s = a / b;
        if (isfinite(s) && s != 0)
            e = fma(-s, b, a) / b; /* the remainder is exact; only its sign and
                                      rough size matter at the target width */
        break;
    case EMU_FOP_SQRT:
        s = sqrt(a);
        if (isfinite(s) && s > 0)
            e = fma(-s, s, a) / (2 * s);
        break;
    default: s = NAN;
    }
    if (!isfinite(s) || !isfinite(e))
        e = 0.0;
    if (s == 0 && e == 0 && rnd == EMU_RM && op <= EMU_FOP_FMA && op != EMU_FOP_MUL)
        s = zero_sum_rm(op == EMU_FOP_FMA ? a * b : a, op == EMU_FOP_SUB ? -b : op == EMU_FOP_FMA ? c : b);
    return num_round_dd(f, s, e, rnd, flags);
}

/* Directed f64 rounding: the result is the RN result or its neighbour on
 * the side of the exact error term. */
static double adjust(double s, double e, int rnd)
{
    if (e == 0 || !isfinite(s))
        return s;
    switch (rnd) {
    case EMU_RZ: return (e < 0) != (s < 0) ? nextafter(s, 0.0) : s;
    case EMU_RM: return e < 0 ? nextafter(s, -INFINITY) : s;
    case EMU_RP: return e > 0 ? nextafter(s, INFINITY) : s;
    default: return s;
    }
}

static int host_mode(int rnd)
{
    switch (rnd) {
    case EMU_RZ: return FE_TOWARDZERO;
    case EMU_RM: return FE_DOWNWARD;
    case EMU_RP: return FE_UPWARD;
    default: return FE_TONEAREST;
    }
}

/* fma/div/sqrt in a directed mode have no cheap exact error term in f64,
 * so they run under the host rounding mode; volatile keeps the compiler
 * from moving the arithmetic across fesetround. */
static double under_mode(int op, double a, double b, double c, int rnd)
{
    volatile double va = a, vb = b, vc = c, r;
    int old = fegetround();
    fesetround(host_mode(rnd));
    switch (op) {
    case EMU_FOP_FMA: r = fma(va, vb, vc); break;
    case EMU_FOP_DIV: r = va / vb; break;
    case EMU_FOP_RCP: r = 1.0 / va; break;
    default: r = sqrt(va); break;
    }
    fesetround(old);
    return r;
}

double num_f64_op(int op, double a, double b, double c, int rnd)
{
    double s, e = 0;
    if (rnd == EMU_RN || rnd == EMU_RNA) {
        switch (op) {
        case EMU_FOP_ADD: return a + b;
        case EMU_FOP_SUB: return a - b;
        case EMU_FOP_MUL: return a * b;
        case EMU_FOP_FMA: return fma(a, b, c);
        case EMU_FOP_DIV: return a / b;
        case EMU_FOP_RCP: return 1.0 / a;
        default: return sqrt(a);
        }
    }
    switch (op) {
    case EMU_FOP_ADD: s = num_two_sum(a, b, &e); break;
    case EMU_FOP_SUB: s = num_two_sum(a, -b, &e); break;
    case EMU_FOP_MUL:
        s = a * b;
        e = fma(a, b, -s);
        break;
    default: return under_mode(op, a, b, c, rnd);
    }
    if (s == 0 && e == 0 && rnd == EMU_RM && op != EMU_FOP_MUL)
        return zero_sum_rm(a, op == EMU_FOP_SUB ? -b : b);
    return isfinite(e) ? adjust(s, e, rnd) : s;
}

double num_minmax(double a, double b, bool is_max, bool nan, bool xorsign_abs, bool *is_nan)
{
    *is_nan = false;
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) {
        if (nan || (na && nb)) {
            *is_nan = true;
            return NAN;
        }
        if (!xorsign_abs)
            return na ? b : a;
    }
    if (xorsign_abs) {
        bool s = (signbit(a) != 0) != (signbit(b) != 0);
        double x = fabs(a), y = fabs(b), r;
        if (na || nb)
            r = na ? y : x;
        else
            r = is_max ? (x > y ? x : y) : (x < y ? x : y);
        return s ? -r : r;
    }
    if (a == b && a == 0) { /* -0 < +0 */
        bool sa = signbit(a) != 0;
        return (is_max ? sa : !sa) ? b : a;
    }
    return is_max ? (a > b ? a : b) : (a < b ? a : b);
}
