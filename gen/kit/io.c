/* dtype I/O (see io.h): one emitter for every storage dtype, driven by the
 * dtype table's PTX columns. It unifies what gen/elementwise.c and
 * gen/gemm_epi.c each wrote for themselves, and emits what they emitted
 * for the dtypes they had (same instructions, same register order).
 *
 * Three shapes of access, decided by the element size and the access
 * width W (bytes, a power of two, <= 16 and <= the known alignment):
 *   elements  every element has its own register (f32, s32, f64, and the
 *             narrow integers, which ld.s8/ld.u8 extend and st.s8 narrows);
 *             one access moves up to four of them (v2/v4);
 *   halves    16-bit units (an f16/bf16 element, or an fp8 pair) moved one
 *             at a time when W is 2 (1 for a lone fp8);
 *   words     W >= 4 of packed floats: b32 words, unpacked into halves by
 *             mov.b32 {lo, hi}, w (packed by the reverse).
 * Conversions go through the pair forms where the table has them: two f32
 * become one f16x2/bf16x2 word or one fp8 pair per cvt; an fp8 pair
 * becomes f16x2 (cvt.rn.f16x2.e4m3x2), then two exact cvt.f32.f16. */
#include "gen/kit/io.h"

#include "gen/kit/build.h"

enum { SHAPE_ELEMS, SHAPE_HALVES, SHAPE_WORDS };

/* Largest immediate address offset we emit (ptxas takes 32-bit offsets). */
#define IO_MAX_IMM 0x7fff0000ll

static bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

static ptx_mods access_mods(const kit_io *io, int k, bool load)
{
    ptx_mods m = {.n = 0};
    m.m[m.n++] = (uint8_t)(io->shared ? PTX_M_SHARED : PTX_M_GLOBAL);
    if (load && io->nc && !io->shared)
        m.m[m.n++] = PTX_M_NC;
    if (k == 2 || k == 4)
        m.m[m.n++] = k == 4 ? PTX_M_V4 : PTX_M_V2;
    return m;
}

static void guard(const kit_io *io, ptx_ins *in)
{
    if (io->guard.id)
        ptx_guard(in, io->guard, io->guard_neg);
}

/* One ld (load) or st of k registers of type t at [base + off]. */
static void access(ptx_fn *f, const kit_io *io, bool load, ptx_type t, ptx_reg base, int64_t off,
                   int k, const ptx_reg *r)
{
    ptx_opd v = k == 1 ? ptx_r(r[0]) : ptx_vecr(f, k, r);
    ptx_ins *in = load ? ptx_emit(f, PTX_OP_LD, access_mods(io, k, true), PTX_T1(t), v,
                                  ptx_addr(base, off))
                       : ptx_emit(f, PTX_OP_ST, access_mods(io, k, false), PTX_T1(t),
                                  ptx_addr(base, off), v);
    guard(io, in);
}

/* Checks the request and works out the access width and shape. */
static int plan(ptx_fn *f, const kit_io *io, pt_dtype dt, int n, const char *what, int *width,
                int *shape)
{
    pt_err *e = &f->mod->err;
    if ((int)dt < 0 || dt >= PT_NDTYPES)
        return pt_errf(e, PT_EINTERNAL, "kit_%s: bad dtype %d", what, (int)dt);
    const pt_dtype_info *di = pt_dtype_get(dt);
    if (dt == PT_TF32)
        return pt_errf(e, PT_EINTERNAL, "kit_%s: tf32 is not a storage dtype (store f32)", what);
    if (!is_pow2(n) || n > 64)
        return pt_errf(e, PT_EINTERNAL, "kit_%s: %d elements (a power of two up to 64)", what, n);
    int es = di->bytes, total = n * es;
    if (io->align && (!is_pow2(io->align) || io->align < es))
        return pt_errf(e, PT_EINTERNAL, "kit_%s: alignment %d for %s elements", what, io->align,
                       di->name);
    int w = io->align && io->align < total ? io->align : total;
    if (w > 16)
        w = 16;
    if (di->pack == 2) {
        *shape = w >= 4 ? SHAPE_WORDS : SHAPE_HALVES;
        if (io->raw && es == 1 && n > 1 && w < 2)
            return pt_errf(e, PT_EINTERNAL, "kit_%s: raw fp8 moves pairs (alignment 2 or more)",
                           what);
    }
    else {
        *shape = SHAPE_ELEMS;
        if (w > 4 * es) /* v4 of elements at most */
            w = 4 * es;
    }
    *width = w;
    return PT_OK;
}

static ptx_reg far_base(ptx_fn *f, ptx_reg base, int64_t *off, int64_t total)
{
    if (*off + total <= IO_MAX_IMM && *off >= -IO_MAX_IMM)
        return base;
    ptx_reg d = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(d), ptx_r(base), ptx_imm(*off));
    *off = 0;
    return d;
}

/* ---- conversions of one element or pair ---- */

static ptx_reg cvt_to_f32(ptx_fn *f, const pt_dtype_info *di, ptx_opd x)
{
    ptx_reg d = ptx_reg_new(f, PTX_T_F32);
    if (di->ptx == PTX_T_F32)
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(d), x);
    else if (di->ptx == PTX_T_TF32) /* the bits are an f32 already */
        ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(d), x);
    else
        ptx_emit(f, PTX_OP_CVT, di->to_f32, PTX_TYPES(PTX_T_F32, di->ptx), ptx_r(d), x);
    return d;
}

/* An fp8 pair (b16, low byte the lower element) to k <= 2 f32 registers. */
static void fp8_pair_to_f32(ptx_fn *f, const pt_dtype_info *di, ptx_reg q, int k, ptx_reg *out)
{
    ptx_reg x = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_CVT, di->to_f32, PTX_TYPES(PTX_T_F16X2, di->x2), ptx_r(x), ptx_r(q));
    ptx_reg h[2] = {ptx_reg_new(f, PTX_T_B16), ptx_reg_new(f, PTX_T_B16)};
    ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_vecr(f, 2, h), ptx_r(x));
    for (int i = 0; i < k; i++) {
        out[i] = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_F32, PTX_T_F16), ptx_r(out[i]), ptx_r(h[i]));
    }
}

/* f32 value to one element in the dtype's register type. */
static ptx_reg cvt_from_f32(ptx_fn *f, const pt_dtype_info *di, ptx_opd x)
{
    if (di->pack == 2 && di->x2 != PTX_T_F16X2 && di->x2 != PTX_T_BF16X2) { /* fp8: a lone pair */
        ptx_reg q = ptx_reg_new(f, PTX_T_B16);
        ptx_emit(f, PTX_OP_CVT, di->from_f32, PTX_TYPES(di->x2, PTX_T_F32), ptx_r(q), ptx_f32(0.0f),
                 x);
        return q;
    }
    ptx_reg d = ptx_reg_new(f, di->ptx == PTX_T_TF32 ? PTX_T_B32 : di->reg);
    if (di->ptx == PTX_T_F32)
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(d), x);
    else
        ptx_emit(f, PTX_OP_CVT, di->from_f32, PTX_TYPES(di->ptx, PTX_T_F32), ptx_r(d), x);
    return d;
}

ptx_reg kit_cvt_to_f32(ptx_fn *f, pt_dtype dt, ptx_opd x)
{
    if ((int)dt < 0 || dt >= PT_NDTYPES) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "kit_cvt_to_f32: bad dtype %d", (int)dt);
        return ptx_reg_new(f, PTX_T_F32);
    }
    const pt_dtype_info *di = pt_dtype_get(dt);
    if (di->pack == 2 && di->x2 != PTX_T_F16X2 && di->x2 != PTX_T_BF16X2) {
        ptx_reg q = x.kind == PTX_O_REG ? x.u.reg : ptx_reg_new(f, PTX_T_B16), out;
        if (x.kind != PTX_O_REG)
            ptx_emit(f, PTX_OP_MOV, NOM, B16T, ptx_r(q), x);
        fp8_pair_to_f32(f, di, q, 1, &out);
        return out;
    }
    return cvt_to_f32(f, di, x);
}

ptx_reg kit_cvt_from_f32(ptx_fn *f, pt_dtype dt, ptx_opd x)
{
    if ((int)dt < 0 || dt >= PT_NDTYPES) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "kit_cvt_from_f32: bad dtype %d", (int)dt);
        return ptx_reg_new(f, PTX_T_B32);
    }
    return cvt_from_f32(f, pt_dtype_get(dt), x);
}

/* ---- loads ---- */

int kit_load(ptx_fn *f, const kit_io *io, pt_dtype dt, ptx_reg base, int64_t off, int n,
             ptx_reg *out)
{
    int w, shape;
    int rc = plan(f, io, dt, n, "load", &w, &shape);
    if (rc)
        return rc;
    const pt_dtype_info *di = pt_dtype_get(dt);
    int es = di->bytes, total = n * es;
    base = far_base(f, base, &off, total);
    bool fp8 = di->pack == 2 && es == 1;
    if (shape == SHAPE_ELEMS) {
        ptx_reg r[64];
        for (int i = 0; i < n; i++)
            r[i] = ptx_reg_new(f, di->reg);
        int k = w / es;
        for (int i = 0; i < n; i += k)
            access(f, io, true, di->ldst, base, off + (int64_t)i * es, k, &r[i]);
        for (int i = 0; i < n; i++)
            out[i] = io->raw || di->ptx == PTX_T_F32 ? r[i] : cvt_to_f32(f, di, ptx_r(r[i]));
        return ptx_module_error(f->mod);
    }
    /* halves: an f16/bf16 element or an fp8 pair each (a lone fp8 in the
     * low byte when n is 1 or the alignment is 1) */
    int per = fp8 && w >= 2 ? 2 : 1; /* elements per half */
    int nh = n / per;
    ptx_reg h[64];
    for (int i = 0; i < nh; i++)
        h[i] = ptx_reg_new(f, PTX_T_B16);
    if (shape == SHAPE_HALVES) {
        ptx_type t = w == es ? di->ldst : PTX_T_B16;
        for (int i = 0; i < nh; i++)
            access(f, io, true, t, base, off + (int64_t)i * w, 1, &h[i]);
    } else {
        int nw = total / 4, k = w / 4;
        ptx_reg wd[32]; /* 64 16-bit elements at most */
        for (int i = 0; i < nw; i++)
            wd[i] = ptx_reg_new(f, PTX_T_B32);
        for (int i = 0; i < nw; i += k)
            access(f, io, true, PTX_T_B32, base, off + (int64_t)i * 4, k, &wd[i]);
        for (int i = 0; i < nw; i++)
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_vecr(f, 2, &h[2 * i]), ptx_r(wd[i]));
    }
    if (io->raw) {
        for (int i = 0; i < nh; i++)
            out[i] = h[i];
    } else if (fp8) {
        for (int i = 0; i < nh; i++)
            fp8_pair_to_f32(f, di, h[i], per, &out[i * per]);
    } else {
        for (int i = 0; i < n; i++)
            out[i] = cvt_to_f32(f, di, ptx_r(h[i]));
    }
    return ptx_module_error(f->mod);
}

/* ---- stores ---- */

/* v materialised in a register (st takes no immediates). */
static ptx_reg in_reg(ptx_fn *f, ptx_opd v, ptx_type t)
{
    if (v.kind == PTX_O_REG)
        return v.u.reg;
    ptx_reg r = ptx_reg_new(f, t);
    ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(t), ptx_r(r), v);
    return r;
}

static ptx_opd scaled(ptx_fn *f, const kit_io *io, ptx_opd v)
{
    if (!io->scale.id || io->raw)
        return v;
    ptx_reg d = ptx_reg_new(f, PTX_T_F32);
    ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(d), v, ptx_r(io->scale));
    return ptx_r(d);
}

int kit_store(ptx_fn *f, const kit_io *io, pt_dtype dt, ptx_reg base, int64_t off, int n,
              const ptx_opd *v)
{
    int w, shape;
    int rc = plan(f, io, dt, n, "store", &w, &shape);
    if (rc)
        return rc;
    const pt_dtype_info *di = pt_dtype_get(dt);
    int es = di->bytes, total = n * es;
    base = far_base(f, base, &off, total);
    bool fp8 = di->pack == 2 && es == 1;
    if (shape == SHAPE_ELEMS) {
        ptx_reg r[64];
        for (int i = 0; i < n; i++) {
            if (io->raw)
                r[i] = in_reg(f, v[i], di->reg);
            else if (di->ptx == PTX_T_F32)
                r[i] = in_reg(f, scaled(f, io, v[i]), PTX_T_F32);
            else
                r[i] = cvt_from_f32(f, di, scaled(f, io, v[i]));
        }
        int k = w / es;
        for (int i = 0; i < n; i += k)
            access(f, io, false, di->ldst, base, off + (int64_t)i * es, k, &r[i]);
        return ptx_module_error(f->mod);
    }
    if (shape == SHAPE_WORDS && !io->raw && !fp8) { /* one cvt.rn.f16x2.f32 d, hi, lo a word */
        int nw = n / 2, k = w / 4;
        ptx_reg wd[32];
        for (int i = 0; i < nw; i++) {
            ptx_opd lo = scaled(f, io, v[2 * i]), hi = scaled(f, io, v[2 * i + 1]);
            wd[i] = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_CVT, di->from_f32, PTX_TYPES(di->x2, PTX_T_F32), ptx_r(wd[i]), hi,
                     lo);
        }
        for (int i = 0; i < nw; i += k)
            access(f, io, false, PTX_T_B32, base, off + (int64_t)i * 4, k, &wd[i]);
        return ptx_module_error(f->mod);
    }
    /* halves: f16/bf16 elements, or fp8 pairs (fp8 singles when w is 1) */
    int per = fp8 && w >= 2 ? 2 : 1;
    int nh = n / per;
    ptx_reg h[64];
    for (int i = 0; i < nh; i++) {
        if (io->raw)
            h[i] = in_reg(f, v[i], PTX_T_B16);
        else if (fp8 && per == 2) { /* d[15:8] = fp8(hi), d[7:0] = fp8(lo) */
            ptx_opd lo = scaled(f, io, v[2 * i]), hi = scaled(f, io, v[2 * i + 1]);
            h[i] = ptx_reg_new(f, PTX_T_B16);
            ptx_emit(f, PTX_OP_CVT, di->from_f32, PTX_TYPES(di->x2, PTX_T_F32), ptx_r(h[i]), hi, lo);
        } else
            h[i] = cvt_from_f32(f, di, scaled(f, io, v[i]));
    }
    if (shape == SHAPE_WORDS) {
        int nw = nh / 2, k = w / 4;
        ptx_reg wd[32];
        for (int i = 0; i < nw; i++) {
            wd[i] = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(wd[i]), ptx_vecr(f, 2, &h[2 * i]));
        }
        for (int i = 0; i < nw; i += k)
            access(f, io, false, PTX_T_B32, base, off + (int64_t)i * 4, k, &wd[i]);
        return ptx_module_error(f->mod);
    }
    ptx_type t = w == es ? di->ldst : PTX_T_B16;
    for (int i = 0; i < nh; i++)
        access(f, io, false, t, base, off + (int64_t)i * w, 1, &h[i]);
    return ptx_module_error(f->mod);
}
