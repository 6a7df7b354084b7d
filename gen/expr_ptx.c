/* f32 lowering of expression nodes (see gen/expr_ptx.h). */
#include "gen/expr_ptx.h"

#define F32T PTX_T1(PTX_T_F32)
#define NOM PTX_NOMODS
#define M1(a) PTX_MODS(a)
#define M2(a, b) PTX_MODS(a, b)

static ptx_reg freg(ptx_fn *f) { return ptx_reg_new(f, PTX_T_F32); }

static ptx_reg op2(ptx_fn *f, ptx_op op, ptx_mods m, ptx_opd a, ptx_opd b)
{
    ptx_reg d = freg(f);
    ptx_emit(f, op, m, F32T, ptx_r(d), a, b);
    return d;
}

static ptx_reg op1(ptx_fn *f, ptx_op op, ptx_mods m, ptx_opd a)
{
    ptx_reg d = freg(f);
    ptx_emit(f, op, m, F32T, ptx_r(d), a);
    return d;
}

static ptx_reg fma_(ptx_fn *f, ptx_opd a, ptx_opd b, ptx_opd c)
{
    ptx_reg d = freg(f);
    ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(d), a, b, c);
    return d;
}

/* exp(x) = 2^(x*log2 e) */
ptx_reg ex_ptx_exp(ptx_fn *f, ptx_opd x)
{
    ptx_reg t = op2(f, PTX_OP_MUL, NOM, x, ptx_f32(1.44269504088896341f));
    return op1(f, PTX_OP_EX2, M2(PTX_M_APPROX, PTX_M_FTZ), ptx_r(t));
}

/* 1/(1+exp(-x)) */
static ptx_reg f_sigmoid(ptx_fn *f, ptx_opd x)
{
    ptx_reg t = op2(f, PTX_OP_MUL, NOM, x, ptx_f32(-1.44269504088896341f));
    ptx_reg e = op1(f, PTX_OP_EX2, M2(PTX_M_APPROX, PTX_M_FTZ), ptx_r(t));
    ptx_reg s = op2(f, PTX_OP_ADD, NOM, ptx_r(e), ptx_f32(1.0f));
    return op1(f, PTX_OP_RCP, M1(PTX_M_RN), ptx_r(s));
}

/* tanh without tanh.approx (its 2^-11 error is too coarse for f32):
 * |x| >= 0.5: sign(x) * (1 - 2/(exp(2|x|) + 1)); below, an odd Taylor
 * polynomial to x^11 (error < 2e-8 on |x| < 0.5). */
static ptx_reg f_tanh(ptx_fn *f, ptx_opd x)
{
    ptx_reg ax = op1(f, PTX_OP_ABS, NOM, x);
    ptx_reg t = op2(f, PTX_OP_MUL, NOM, ptx_r(ax), ptx_f32(2.0f * 1.44269504088896341f));
    ptx_reg e = op1(f, PTX_OP_EX2, M2(PTX_M_APPROX, PTX_M_FTZ), ptx_r(t));
    ptx_reg s = op2(f, PTX_OP_ADD, NOM, ptx_r(e), ptx_f32(1.0f));
    ptx_reg r = op1(f, PTX_OP_RCP, M1(PTX_M_RN), ptx_r(s));
    ptx_reg big = fma_(f, ptx_r(r), ptx_f32(-2.0f), ptx_f32(1.0f));
    big = op2(f, PTX_OP_COPYSIGN, NOM, x, ptx_r(big)); /* copysign d, a(sign), b */
    ptx_reg x2 = op2(f, PTX_OP_MUL, NOM, x, x);
    static const float c[] = {-0.33333333333f, 0.13333333333f, -0.05396825397f, 0.02186948854f,
                              -0.00886323552f};
    ptx_reg poly = fma_(f, ptx_r(x2), ptx_f32(c[4]), ptx_f32(c[3]));
    poly = fma_(f, ptx_r(x2), ptx_r(poly), ptx_f32(c[2]));
    poly = fma_(f, ptx_r(x2), ptx_r(poly), ptx_f32(c[1]));
    poly = fma_(f, ptx_r(x2), ptx_r(poly), ptx_f32(c[0]));
    ptx_reg x3 = op2(f, PTX_OP_MUL, NOM, ptx_r(x2), x);
    ptx_reg small = fma_(f, ptx_r(x3), ptx_r(poly), x);
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_LT), F32T, ptx_r(p), ptx_r(ax), ptx_f32(0.5f));
    ptx_reg d = freg(f);
    ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(d), ptx_r(small), ptx_r(big), ptx_r(p));
    return d;
}

/* erf by Abramowitz-Stegun 7.1.26 (absolute error < 1.5e-7). */
static ptx_reg f_erf(ptx_fn *f, ptx_opd x)
{
    ptx_reg ax = op1(f, PTX_OP_ABS, NOM, x);
    ptx_reg den = fma_(f, ptx_r(ax), ptx_f32(0.3275911f), ptx_f32(1.0f));
    ptx_reg t = op1(f, PTX_OP_RCP, M1(PTX_M_RN), ptx_r(den));
    ptx_reg poly = fma_(f, ptx_r(t), ptx_f32(1.061405429f), ptx_f32(-1.453152027f));
    poly = fma_(f, ptx_r(t), ptx_r(poly), ptx_f32(1.421413741f));
    poly = fma_(f, ptx_r(t), ptx_r(poly), ptx_f32(-0.284496736f));
    poly = fma_(f, ptx_r(t), ptx_r(poly), ptx_f32(0.254829592f));
    poly = op2(f, PTX_OP_MUL, NOM, ptx_r(poly), ptx_r(t));
    ptx_reg x2 = op2(f, PTX_OP_MUL, NOM, ptx_r(ax), ptx_r(ax));
    ptx_reg nx2 = op1(f, PTX_OP_NEG, NOM, ptx_r(x2));
    ptx_reg ex = ex_ptx_exp(f, ptx_r(nx2));
    ptx_reg y = fma_(f, ptx_r(poly), ptx_r(ex), ptx_f32(-1.0f)); /* -(1 - poly*e) */
    y = op1(f, PTX_OP_NEG, NOM, ptx_r(y));
    return op2(f, PTX_OP_COPYSIGN, NOM, x, ptx_r(y));
}

ptx_reg ex_ptx_cast(ptx_fn *f, ptx_opd x, pt_dtype dt)
{
    ptx_reg d = freg(f);
    switch (dt) {
    case PT_F16:
    case PT_BF16: {
        ptx_type t = dt == PT_F16 ? PTX_T_F16 : PTX_T_BF16;
        ptx_reg h = ptx_reg_new(f, PTX_T_B16);
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(t, PTX_T_F32), ptx_r(h), x);
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_F32, t), ptx_r(d), ptx_r(h));
        return d;
    }
    case PT_TF32: {
        ptx_reg b = ptx_reg_new(f, PTX_T_B32);
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RNA), PTX_TYPES(PTX_T_TF32, PTX_T_F32), ptx_r(b), x);
        ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_B32), ptx_r(d), ptx_r(b));
        return d;
    }
    case PT_E4M3:
    case PT_E5M2: {
        ptx_type t = dt == PT_E4M3 ? PTX_T_E4M3X2 : PTX_T_E5M2X2;
        ptx_reg q = ptx_reg_new(f, PTX_T_B16), h2 = ptx_reg_new(f, PTX_T_B32);
        ptx_reg lo = ptx_reg_new(f, PTX_T_B16), hi = ptx_reg_new(f, PTX_T_B16);
        ptx_emit(f, PTX_OP_CVT, M2(PTX_M_RN, PTX_M_SATFINITE), PTX_TYPES(t, PTX_T_F32), ptx_r(q),
                 ptx_f32(0.0f), x);
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(PTX_T_F16X2, t), ptx_r(h2), ptx_r(q));
        ptx_opd parts[2] = {ptx_r(lo), ptx_r(hi)};
        ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_B32), ptx_vec(f, 2, parts), ptx_r(h2));
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_F32, PTX_T_F16), ptx_r(d), ptx_r(lo));
        return d;
    }
    case PT_S8: case PT_U8: case PT_S16: case PT_U16:
    case PT_S32: case PT_U32: case PT_S64: case PT_U64: {
        /* cvt.rni.sat to 32 (or 64) bits: nearest even, saturated, NaN -> 0;
         * 8- and 16-bit types then clamp (min/max) in 32 bits, so the
         * result is cvt.rni.sat.s8.f32's; back to f32 at the end (nearest:
         * integers past 2^24 round) */
        static const struct { pt_dtype dt; ptx_type t, reg; int64_t lo, hi; } it[] = {
            {PT_S8, PTX_T_S32, PTX_T_B32, -128, 127},
            {PT_U8, PTX_T_U32, PTX_T_B32, 0, 255},
            {PT_S16, PTX_T_S32, PTX_T_B32, -32768, 32767},
            {PT_U16, PTX_T_U32, PTX_T_B32, 0, 65535},
            {PT_S32, PTX_T_S32, PTX_T_B32, 0, 0},
            {PT_U32, PTX_T_U32, PTX_T_B32, 0, 0},
            {PT_S64, PTX_T_S64, PTX_T_B64, 0, 0},
            {PT_U64, PTX_T_U64, PTX_T_B64, 0, 0},
        };
        size_t k = 0;
        while (it[k].dt != dt)
            k++;
        ptx_reg q = ptx_reg_new(f, it[k].reg);
        ptx_emit(f, PTX_OP_CVT, M2(PTX_M_RNI, PTX_M_SAT), PTX_TYPES(it[k].t, PTX_T_F32), ptx_r(q), x);
        if (it[k].lo < 0)
            ptx_emit(f, PTX_OP_MAX, NOM, PTX_T1(it[k].t), ptx_r(q), ptx_r(q), ptx_imm(it[k].lo));
        if (it[k].hi > 0)
            ptx_emit(f, PTX_OP_MIN, NOM, PTX_T1(it[k].t), ptx_r(q), ptx_r(q), ptx_imm(it[k].hi));
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(PTX_T_F32, it[k].t), ptx_r(d), ptx_r(q));
        return d;
    }
    case PT_F32:
    case PT_F64:
    case PT_NDTYPES: break;
    }
    /* f32 and f64: the value as computed (f32) */
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(d), x);
    return d;
}

static ptx_reg f_cmp(ptx_fn *f, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED), d = freg(f);
    ptx_emit(f, PTX_OP_SETP, M1(cmp), F32T, ptx_r(p), a, b);
    ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(d), ptx_f32(1.0f), ptx_f32(0.0f), ptx_r(p));
    return d;
}

ptx_opd ex_ptx_node(ptx_fn *f, const ex_node *n, const ptx_opd *a)
{
    ptx_mods AF = M2(PTX_M_APPROX, PTX_M_FTZ);
    switch (n->kind) {
    case EX_CONST: return ptx_f32((float)n->value);
    case EX_ADD: return ptx_r(op2(f, PTX_OP_ADD, NOM, a[0], a[1]));
    case EX_SUB: return ptx_r(op2(f, PTX_OP_SUB, NOM, a[0], a[1]));
    case EX_MUL: return ptx_r(op2(f, PTX_OP_MUL, NOM, a[0], a[1]));
    case EX_DIV: return ptx_r(op2(f, PTX_OP_DIV, M1(PTX_M_RN), a[0], a[1]));
    case EX_NEG: return ptx_r(op1(f, PTX_OP_NEG, NOM, a[0]));
    case EX_ABS: return ptx_r(op1(f, PTX_OP_ABS, NOM, a[0]));
    case EX_MIN: return ptx_r(op2(f, PTX_OP_MIN, NOM, a[0], a[1]));
    case EX_MAX: return ptx_r(op2(f, PTX_OP_MAX, NOM, a[0], a[1]));
    case EX_LT: return ptx_r(f_cmp(f, PTX_M_LT, a[0], a[1]));
    case EX_LE: return ptx_r(f_cmp(f, PTX_M_LE, a[0], a[1]));
    case EX_GT: return ptx_r(f_cmp(f, PTX_M_GT, a[0], a[1]));
    case EX_GE: return ptx_r(f_cmp(f, PTX_M_GE, a[0], a[1]));
    case EX_EQ: return ptx_r(f_cmp(f, PTX_M_EQ, a[0], a[1]));
    case EX_NE: return ptx_r(f_cmp(f, PTX_M_NE, a[0], a[1]));
    case EX_EXP: return ptx_r(ex_ptx_exp(f, a[0]));
    case EX_EXP2: return ptx_r(op1(f, PTX_OP_EX2, AF, a[0]));
    case EX_LOG: {
        ptx_reg l = op1(f, PTX_OP_LG2, AF, a[0]);
        return ptx_r(op2(f, PTX_OP_MUL, NOM, ptx_r(l), ptx_f32(0.693147180559945309f)));
    }
    case EX_SQRT: return ptx_r(op1(f, PTX_OP_SQRT, M1(PTX_M_RN), a[0]));
    case EX_RSQRT: {
        ptx_reg s = op1(f, PTX_OP_SQRT, M1(PTX_M_RN), a[0]);
        return ptx_r(op1(f, PTX_OP_RCP, M1(PTX_M_RN), ptx_r(s)));
    }
    case EX_TANH: return ptx_r(f_tanh(f, a[0]));
    case EX_SIGMOID: return ptx_r(f_sigmoid(f, a[0]));
    case EX_RELU: return ptx_r(op2(f, PTX_OP_MAX, NOM, a[0], ptx_f32(0.0f)));
    case EX_SILU: {
        ptx_reg s = f_sigmoid(f, a[0]);
        return ptx_r(op2(f, PTX_OP_MUL, NOM, a[0], ptx_r(s)));
    }
    case EX_GELU: {
        /* 0.5*x*(1+tanh(k*(x+0.044715x^3))) */
        ptx_reg x2 = op2(f, PTX_OP_MUL, NOM, a[0], a[0]);
        ptx_reg in = fma_(f, ptx_r(x2), ptx_f32(0.044715f), ptx_f32(1.0f));
        in = op2(f, PTX_OP_MUL, NOM, ptx_r(in), a[0]);
        in = op2(f, PTX_OP_MUL, NOM, ptx_r(in), ptx_f32(0.797884560802865356f));
        ptx_reg t = f_tanh(f, ptx_r(in));
        ptx_reg h = op2(f, PTX_OP_MUL, NOM, a[0], ptx_f32(0.5f));
        return ptx_r(fma_(f, ptx_r(h), ptx_r(t), ptx_r(h)));
    }
    case EX_GELU_ERF: {
        ptx_reg s = op2(f, PTX_OP_MUL, NOM, a[0], ptx_f32(0.707106781186547524f));
        ptx_reg t = f_erf(f, ptx_r(s));
        ptx_reg h = op2(f, PTX_OP_MUL, NOM, a[0], ptx_f32(0.5f));
        return ptx_r(fma_(f, ptx_r(h), ptx_r(t), ptx_r(h)));
    }
    case EX_CAST: return ptx_r(ex_ptx_cast(f, a[0], n->dtype));
    case EX_WHERE: {
        ptx_reg p = ptx_reg_new(f, PTX_T_PRED), d = freg(f);
        ptx_emit(f, PTX_OP_SETP, M1(PTX_M_NE), F32T, ptx_r(p), a[0], ptx_f32(0.0f));
        ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(d), a[1], a[2], ptx_r(p));
        return ptx_r(d);
    }
    default: break;
    }
    pt_errf(&f->mod->err, PT_EINTERNAL, "expression node kind %s has no f32 lowering",
            ex_kind_get(n->kind)->name);
    return ptx_f32(0.0f);
}
