/* Per-lane float semantics that are too large for the interpreter loop:
 * cvt (every type pair), the approximate special functions, f16/bf16 and
 * directed-rounding arithmetic, min/max and float compares.
 *
 * Approximate functions (ex2, lg2, rcp.approx, rsqrt, sqrt.approx, sin,
 * cos, tanh) are computed with libm in f32 (or f64) and then flushed as
 * .ftz asks, so they are usually *more* accurate than the hardware. The
 * hardware's documented worst cases, which tests must allow for, are:
 * ex2.approx.f32 2 ulp; lg2.approx.f32 2^-22.6 absolute in [0.5, 2] else
 * 2 ulp; rcp.approx.f32 1 ulp; rsqrt.approx.f32 2^-22.9 relative;
 * sqrt.approx.f32 2^-23 relative; sin/cos.approx.f32 2^-20.9 absolute in
 * [-pi, pi]; tanh.approx.f32 2^-10.987 relative (about 5e-4); f16/bf16
 * ex2/tanh: 1 ulp of the 16-bit result after our correct rounding. Special
 * values follow PTX: ex2(-inf) = +0, rcp(+-0) = +-inf, lg2(0) = -inf. */
#include "ptx/emu/emu_int.h"

#include <math.h>

static emu_fmt fmt_of(int t)
{
    switch (t) {
    case PTX_T_F16:
    case PTX_T_F16X2: return EMU_FMT_F16;
    case PTX_T_BF16:
    case PTX_T_BF16X2: return EMU_FMT_BF16;
    case PTX_T_TF32: return EMU_FMT_TF32;
    case PTX_T_F64: return EMU_FMT_F64;
    case PTX_T_E4M3:
    case PTX_T_E4M3X2: return EMU_FMT_E4M3;
    case PTX_T_E5M2:
    case PTX_T_E5M2X2: return EMU_FMT_E5M2;
    default: return EMU_FMT_F32;
    }
}

static bool packed(int t) { return t == PTX_T_F16X2 || t == PTX_T_BF16X2; }

/* Value of a float operand of type t (f16, bf16, f32, f64; tf32 in f32
 * layout) as an exact double; .ftz flushes f32 subnormals. */
static double fval(int t, uint64_t bits, unsigned flags)
{
    if (t == PTX_T_F32 || t == PTX_T_TF32)
        return (double)num_f32((flags & EMU_IF_FTZ) ? num_ftz32((uint32_t)bits) : (uint32_t)bits);
    if (t == PTX_T_F64)
        return num_f64(bits);
    return num_decode(fmt_of(t), bits & 0xffff);
}

/* ---- cvt ---- */

/* float -> integer: round to integral as .rni/.rzi/.rmi/.rpi say, then
 * saturate to the destination range; NaN gives 0. */
static uint64_t f2i(double x, int rnd, int dt)
{
    if (isnan(x))
        return 0;
    double r;
    switch (rnd) {
    case EMU_RZ: r = trunc(x); break;
    case EMU_RM: r = floor(x); break;
    case EMU_RP: r = ceil(x); break;
    default: r = nearbyint(x); break; /* ties to even (the default environment) */
    }
    int bits = ptx_type_bits((ptx_type)dt);
    if (ptx_type_class((ptx_type)dt) == 's') {
        int64_t lo = bits == 64 ? INT64_MIN : -(1ll << (bits - 1));
        int64_t hi = bits == 64 ? INT64_MAX : (1ll << (bits - 1)) - 1;
        if (r <= (double)lo)
            return (uint64_t)lo & emu_mask(bits);
        if (r >= ldexp(1.0, bits - 1))
            return (uint64_t)hi;
        return (uint64_t)(int64_t)r & emu_mask(bits);
    }
    if (r <= 0)
        return 0;
    if (r >= ldexp(1.0, bits))
        return emu_mask(bits);
    return (uint64_t)r;
}

/* Integer value -> integer type with .sat clamping. */
static uint64_t i2i_sat(uint64_t v, bool vsigned, int sbits, int dt)
{
    int bits = ptx_type_bits((ptx_type)dt);
    bool dsigned = ptx_type_class((ptx_type)dt) == 's';
    if (vsigned) {
        int64_t x = emu_sx(v, sbits);
        int64_t lo = dsigned ? (bits == 64 ? INT64_MIN : -(1ll << (bits - 1))) : 0;
        if (x < lo)
            return (uint64_t)lo & emu_mask(bits);
        if (x >= 0) {
            uint64_t hi = dsigned ? emu_mask(bits - 1) : emu_mask(bits);
            return (uint64_t)x > hi ? hi : (uint64_t)x;
        }
        return (uint64_t)x & emu_mask(bits);
    }
    uint64_t x = v & emu_mask(sbits), hi = dsigned ? emu_mask(bits - 1) : emu_mask(bits);
    return x > hi ? hi : x;
}

/* One scalar float result of type dt from the exact value x. */
static uint64_t to_float(double x, int dt, int rnd, unsigned flags, bool int_round)
{
    if (int_round && !isnan(x)) { /* cvt.rni.f32.f32: round to an integral value */
        switch (rnd) {
        case EMU_RZ: x = trunc(x); break;
        case EMU_RM: x = floor(x); break;
        case EMU_RP: x = ceil(x); break;
        default: x = nearbyint(x); break;
        }
        rnd = EMU_RN;
    }
    unsigned nf = flags & (EMU_NF_SATFINITE | EMU_NF_RELU | EMU_NF_SAT);
    if (dt == PTX_T_F32 || dt == PTX_T_TF32)
        nf |= flags & EMU_NF_FTZ;
    return num_round(fmt_of(dt), x, rnd, nf);
}

uint64_t emu__cvt(const emu_ins *in, uint64_t a, uint64_t b)
{
    int dt = in->ty, st = in->ty2, rnd = in->rnd;
    unsigned fl = in->flags;
    char dc = ptx_type_class((ptx_type)dt), sc = ptx_type_class((ptx_type)st);
    /* packed destinations */
    if (dt == PTX_T_F16X2 || dt == PTX_T_BF16X2) {
        if (st == PTX_T_E4M3X2 || st == PTX_T_E5M2X2) {
            emu_fmt f8 = fmt_of(st);
            uint64_t lo = num_fp8_to_f16(f8, (unsigned)a & 0xff), hi = num_fp8_to_f16(f8, (unsigned)(a >> 8) & 0xff);
            if (fl & EMU_IF_RELU) {
                lo = (lo & 0x8000) ? ((lo & 0x7fff) > 0x7c00 ? EMU_H_QNAN : 0) : lo;
                hi = (hi & 0x8000) ? ((hi & 0x7fff) > 0x7c00 ? EMU_H_QNAN : 0) : hi;
            }
            return hi << 16 | lo;
        }
        uint64_t hi = to_float(fval(st, a, fl), dt, rnd, fl, false);
        uint64_t lo = to_float(fval(st, b, fl), dt, rnd, fl, false);
        return hi << 16 | lo;
    }
    if (dt == PTX_T_E4M3X2 || dt == PTX_T_E5M2X2) {
        emu_fmt f8 = fmt_of(dt);
        unsigned nf = EMU_NF_SATFINITE | (fl & EMU_NF_RELU);
        double x, y;
        if (st == PTX_T_F16X2) {
            x = num_decode(EMU_FMT_F16, (a >> 16) & 0xffff);
            y = num_decode(EMU_FMT_F16, a & 0xffff);
        } else {
            x = fval(st, a, fl);
            y = fval(st, b, fl);
        }
        return num_round(f8, x, EMU_RN, nf) << 8 | num_round(f8, y, EMU_RN, nf);
    }
    if (sc == 'f') {
        double x = fval(st, a, fl);
        if (dc != 'f')
            return f2i(x, rnd, dt);
        if (isnan(x) && (dt == PTX_T_F32 || dt == PTX_T_F64) && !(fl & EMU_IF_SAT))
            return dt == PTX_T_F32 ? EMU_F32_QNAN : EMU_F64_QNAN;
        if (dt == PTX_T_F64 && st != PTX_T_F64 && !in->sub2) { /* widening: exact */
            if (fl & EMU_IF_SAT)
                x = isnan(x) || x <= 0 ? 0.0 : x > 1 ? 1.0 : x;
            return num_f64_bits(x);
        }
        if (dt == PTX_T_F64) {
            if (in->sub2 && !isnan(x)) {
                switch (rnd) {
                case EMU_RZ: x = trunc(x); break;
                case EMU_RM: x = floor(x); break;
                case EMU_RP: x = ceil(x); break;
                default: x = nearbyint(x); break;
                }
            }
            if (fl & EMU_IF_SAT)
                x = isnan(x) || x <= 0 ? 0.0 : x > 1 ? 1.0 : x;
            return num_f64_bits(x);
        }
        return to_float(x, dt, rnd, fl, in->sub2 != 0);
    }
    /* integer source */
    int sb = ptx_type_bits((ptx_type)st);
    bool vs = sc == 's';
    if (dc == 'f') {
        unsigned nf = fl & (EMU_NF_SAT | EMU_NF_RELU | EMU_NF_SATFINITE);
        if (dt == PTX_T_F32)
            nf |= fl & EMU_NF_FTZ;
        if (vs)
            return num_from_s64(fmt_of(dt), emu_sx(a, sb), rnd, nf);
        return num_from_u64(fmt_of(dt), a & emu_mask(sb), rnd, nf);
    }
    if (fl & EMU_IF_SAT)
        return i2i_sat(a, vs, sb, dt);
    int db = ptx_type_bits((ptx_type)dt);
    return (vs ? (uint64_t)emu_sx(a, sb) : a & emu_mask(sb)) & emu_mask(db);
}

/* ---- special functions ---- */

static double fn_eval(int fn, double x, bool f32)
{
    switch (fn) {
    case EMU_FN_RCP: return 1.0 / x;
    case EMU_FN_SQRT: return sqrt(x);
    case EMU_FN_RSQRT: return 1.0 / sqrt(x);
    case EMU_FN_EX2: return f32 ? (double)exp2f((float)x) : exp2(x);
    case EMU_FN_LG2: return f32 ? (double)log2f((float)x) : log2(x);
    case EMU_FN_SIN: return f32 ? (double)sinf((float)x) : sin(x);
    case EMU_FN_COS: return f32 ? (double)cosf((float)x) : cos(x);
    default: return f32 ? (double)tanhf((float)x) : tanh(x);
    }
}

uint64_t emu__funary(const emu_ins *in, uint64_t a)
{
    int t = in->ty, fn = in->sub;
    unsigned fl = in->flags;
    bool approx = (fl & EMU_IF_APPROX) != 0;
    if (t == PTX_T_F32) {
        if (!approx && (fn == EMU_FN_RCP || fn == EMU_FN_SQRT)) /* .rn/.rz/.rm/.rp: exact */
            return num_fop(EMU_FMT_F32, fn == EMU_FN_RCP ? EMU_FOP_RCP : EMU_FOP_SQRT, a, 0, 0,
                           in->rnd, fl & EMU_NF_FTZ);
        float x = num_f32((fl & EMU_IF_FTZ) ? num_ftz32((uint32_t)a) : (uint32_t)a);
        float r;
        switch (fn) {
        case EMU_FN_RCP: r = 1.0f / x; break;
        case EMU_FN_SQRT: r = sqrtf(x); break;
        case EMU_FN_RSQRT: r = (float)(1.0 / sqrt((double)x)); break;
        case EMU_FN_EX2: r = exp2f(x); break;
        case EMU_FN_LG2: r = log2f(x); break;
        case EMU_FN_SIN: r = sinf(x); break;
        case EMU_FN_COS: r = cosf(x); break;
        default: r = tanhf(x); break;
        }
        uint32_t b = (uint32_t)num_f32_bits(r);
        if (isnan(r))
            return EMU_F32_QNAN;
        return (fl & EMU_IF_FTZ) ? num_ftz32(b) : b;
    }
    if (t == PTX_T_F64) {
        double x = num_f64((fl & EMU_IF_FTZ) ? num_ftz64(a) : a);
        double r;
        if (!approx && fn == EMU_FN_RCP)
            r = num_f64_op(EMU_FOP_RCP, x, 0, 0, in->rnd);
        else if (!approx && fn == EMU_FN_SQRT)
            r = num_f64_op(EMU_FOP_SQRT, x, 0, 0, in->rnd);
        else
            r = fn_eval(fn, x, false);
        uint64_t b = num_f64_bits(r);
        return (fl & EMU_IF_FTZ) ? num_ftz64(b) : b;
    }
    /* f16 / bf16 (x2): evaluate in f32, round once to the 16-bit format */
    emu_fmt f = fmt_of(t);
    uint64_t r = 0;
    for (int h = 0; h < (packed(t) ? 2 : 1); h++) {
        double x = num_decode(f, (a >> (16 * h)) & 0xffff);
        if ((fl & EMU_IF_FTZ) && fabs(x) < (f == EMU_FMT_F16 ? 0x1p-14 : 0x1p-126))
            x = copysign(0.0, x);
        double y = fn_eval(fn, x, true);
        r |= num_round(f, y, EMU_RN, fl & EMU_NF_FTZ) << (16 * h);
    }
    return r;
}

/* ---- arithmetic slow path: f16/bf16 (x2), directed rounding, relu ---- */

uint64_t emu__farith(const emu_ins *in, uint64_t a, uint64_t b, uint64_t c)
{
    int t = in->ty, op = in->sub;
    unsigned nf = in->flags & (EMU_NF_SAT | EMU_NF_RELU | EMU_NF_FTZ | EMU_NF_SATFINITE);
    if (t == PTX_T_F64) {
        double r = num_f64_op(op, num_f64(a), num_f64(b), num_f64(c), in->rnd);
        if (in->flags & EMU_IF_SAT)
            r = isnan(r) || r <= 0 ? 0.0 : r > 1 ? 1.0 : r;
        return num_f64_bits(r);
    }
    emu_fmt f = fmt_of(t);
    if (t == PTX_T_F32)
        return num_fop(f, op, a, b, c, in->rnd, nf);
    uint64_t r = 0;
    for (int h = 0; h < (packed(t) ? 2 : 1); h++) {
        int s = 16 * h;
        r |= num_fop(f, op, (a >> s) & 0xffff, (b >> s) & 0xffff, (c >> s) & 0xffff, in->rnd, nf) << s;
    }
    return r;
}

uint64_t emu__fminmax(const emu_ins *in, uint64_t a, uint64_t b)
{
    int t = in->ty;
    unsigned fl = in->flags;
    bool mx = in->sub != 0, nan = (fl & EMU_IF_NAN) != 0, xs = (fl & EMU_IF_XORSIGN) != 0;
    bool isn;
    if (t == PTX_T_F32 || t == PTX_T_F64) {
        double r = num_minmax(fval(t, a, fl), fval(t, b, fl), mx, nan, xs, &isn);
        if (isn)
            return t == PTX_T_F32 ? EMU_F32_QNAN : EMU_F64_QNAN;
        if (t == PTX_T_F64)
            return num_f64_bits(r);
        uint32_t bits = (uint32_t)num_f32_bits((float)r);
        return (fl & EMU_IF_FTZ) ? num_ftz32(bits) : bits;
    }
    emu_fmt f = fmt_of(t);
    uint64_t r = 0;
    for (int h = 0; h < (packed(t) ? 2 : 1); h++) {
        int s = 16 * h;
        double x = num_decode(f, (a >> s) & 0xffff), y = num_decode(f, (b >> s) & 0xffff);
        double v = num_minmax(x, y, mx, nan, xs, &isn);
        r |= (isn ? EMU_H_QNAN : num_round(f, v, EMU_RN, fl & EMU_NF_FTZ)) << s;
    }
    return r;
}

bool emu__setp_f(const emu_ins *in, uint64_t a, uint64_t b)
{
    double x = fval(in->ty, a, in->flags), y = fval(in->ty, b, in->flags);
    bool un = isnan(x) || isnan(y);
    switch (in->sub) {
    case EMU_CMP_EQ: return !un && x == y;
    case EMU_CMP_NE: return !un && x != y;
    case EMU_CMP_LT: return !un && x < y;
    case EMU_CMP_LE: return !un && x <= y;
    case EMU_CMP_GT: return !un && x > y;
    case EMU_CMP_GE: return !un && x >= y;
    case EMU_CMP_EQU: return un || x == y;
    case EMU_CMP_NEU: return un || x != y;
    case EMU_CMP_LTU: return un || x < y;
    case EMU_CMP_LEU: return un || x <= y;
    case EMU_CMP_GTU: return un || x > y;
    case EMU_CMP_GEU: return un || x >= y;
    case EMU_CMP_NUM: return !un;
    default: return un;
    }
}
