/* Reductions and the online-softmax state (gen/kit/reduce.h). */
#include <math.h>

#include "gen/kit/build.h"
#include "gen/kit/reduce.h"

static ptx_reg freg(ptx_fn *f) { return ptx_reg_new(f, PTX_T_F32); }

static ptx_reg op2(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b)
{
    ptx_reg d = freg(f);
    ptx_emit(f, op, NOM, F32T, ptx_r(d), a, b);
    return d;
}

static ptx_op red_ptx(kit_redop op)
{
    return op == KIT_RED_SUM ? PTX_OP_ADD : op == KIT_RED_MAX ? PTX_OP_MAX : PTX_OP_MIN;
}

ptx_opd kit_red_identity(kit_redop op)
{
    return ptx_f32(op == KIT_RED_SUM ? 0.0f : op == KIT_RED_MAX ? -INFINITY : INFINITY);
}

ptx_reg kit_red_init(ptx_fn *f, kit_redop op)
{
    ptx_reg r = freg(f);
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(r), kit_red_identity(op));
    return r;
}

void kit_red_step(ptx_fn *f, kit_redop op, ptx_reg acc, ptx_opd v, ptx_reg guard)
{
    ptx_ins *in = ptx_emit(f, red_ptx(op), NOM, F32T, ptx_r(acc), ptx_r(acc), v);
    if (in && guard.id)
        ptx_guard(in, guard, false);
}

ptx_reg kit_red_vals(ptx_fn *f, kit_redop op, const ptx_opd *v, int n)
{
    if (n == 1) {
        ptx_reg r = freg(f);
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(r), v[0]);
        return r;
    }
    if (n == 2)
        return op2(f, red_ptx(op), v[0], v[1]);
    int h = n / 2;
    ptx_reg a = kit_red_vals(f, op, v, h), b = kit_red_vals(f, op, v + h, n - h);
    return op2(f, red_ptx(op), ptx_r(a), ptx_r(b));
}

void kit_red_lanes(ptx_fn *f, const kit_redop *ops, ptx_reg *acc, int n, int width)
{
    if (width < 1 || width > 32 || (width & (width - 1))) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "kit_red_lanes: lane group width %d", width);
        return;
    }
    for (int off = width / 2; off >= 1; off /= 2)
        for (int i = 0; i < n; i++) {
            ptx_reg o = freg(f);
            ptx_emit(f, PTX_OP_SHFL, M2(PTX_M_SYNC, PTX_M_BFLY), B32T, ptx_r(o), ptx_r(acc[i]),
                     ptx_imm(off), ptx_imm(31), ptx_hex(0xffffffff));
            kit_red_step(f, ops[i], acc[i], ptx_r(o), (ptx_reg){0});
        }
}

void kit_red_rows(ptx_fn *f, kit_redop op, const ptx_opd *v, int nrows, int ncols, int width,
                  ptx_reg *out)
{
    kit_redop ops[64];
    for (int r = 0; r < nrows; r++) {
        out[r] = kit_red_vals(f, op, v + (size_t)r * (size_t)ncols, ncols);
        if (r < 64)
            ops[r] = op;
    }
    for (int r0 = 0; r0 < nrows; r0 += 64)
        kit_red_lanes(f, ops, out + r0, nrows - r0 < 64 ? nrows - r0 : 64, width);
}

kit_warps kit_warps_new(ptx_fn *f, const char *name, int ngroups, int nwarps, int nvals,
                        ptx_opd group, ptx_opd tid_in_group)
{
    kit_warps g = {0};
    g.ngroups = ngroups;
    g.nwarps = nwarps;
    g.nvals = nvals;
    g.smem = ptx_shared_add(f, name, 16, (int64_t)nvals * ngroups * nwarps * 4);
    ptx_reg base = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(base), ptx_sym(g.smem));
    ptx_reg warp = ptx_reg_new(f, PTX_T_B32), lane = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_SHR, NOM, U32T, ptx_r(warp), tid_in_group, ptx_imm(5));
    ptx_emit(f, PTX_OP_AND, NOM, B32T, ptx_r(lane), tid_in_group, ptx_imm(31));
    g.rowbase = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MAD, M1(PTX_M_LO), U32T, ptx_r(g.rowbase), group, ptx_imm(nwarps * 4),
             ptx_r(base));
    g.mine = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MAD, M1(PTX_M_LO), U32T, ptx_r(g.mine), ptx_r(warp), ptx_imm(4),
             ptx_r(g.rowbase));
    g.lane0 = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_EQ), U32T, ptx_r(g.lane0), ptx_r(lane), ptx_imm(0));
    return g;
}

void kit_red_warps(ptx_fn *f, const kit_warps *g, const kit_redop *ops, ptx_reg *acc, int n)
{
    if (n > g->nvals) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "kit_red_warps: %d values, scratch for %d", n,
                g->nvals);
        return;
    }
    int64_t stride = (int64_t)g->ngroups * g->nwarps * 4;
    for (int v = 0; v < n; v++) {
        ptx_ins *in = ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), F32T, ptx_addr(g->mine, v * stride),
                               ptx_r(acc[v]));
        if (in)
            ptx_guard(in, g->lane0, false);
    }
    ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    for (int v = 0; v < n; v++) {
        ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), F32T, ptx_r(acc[v]), ptx_addr(g->rowbase, v * stride));
        for (int w = 1; w < g->nwarps; w++) {
            ptx_reg o = freg(f);
            ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), F32T, ptx_r(o),
                     ptx_addr(g->rowbase, v * stride + w * 4));
            kit_red_step(f, ops[v], acc[v], ptx_r(o), (ptx_reg){0});
        }
    }
    ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
}

void kit_red_group(ptx_fn *f, const kit_warps *g, const kit_redop *ops, ptx_reg *acc, int n)
{
    kit_red_lanes(f, ops, acc, n, 32);
    if (g && g->nwarps > 1)
        kit_red_warps(f, g, ops, acc, n);
}

/* ---- online softmax ---------------------------------------------------- */

ptx_reg kit_softmax_safe_max(ptx_fn *f, ptx_opd m)
{
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED), ms = freg(f);
    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_EQ), F32T, ptx_r(p), m, ptx_f32(-INFINITY));
    ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(ms), ptx_f32(0.0f), m, ptx_r(p));
    return ms;
}

ptx_reg kit_softmax_exp(ptx_fn *f, ptx_opd x, ptx_opd ms, float k)
{
    ptx_reg d = op2(f, PTX_OP_SUB, x, ms);
    ptx_reg t = op2(f, PTX_OP_MUL, ptx_r(d), ptx_f32((float)(k * 1.44269504088896341)));
    ptx_reg e = freg(f);
    ptx_emit(f, PTX_OP_EX2, M2(PTX_M_APPROX, PTX_M_FTZ), F32T, ptx_r(e), ptx_r(t));
    return e;
}

kit_softmax kit_softmax_new(ptx_fn *f, float k)
{
    kit_softmax st = {kit_red_init(f, KIT_RED_MAX), kit_red_init(f, KIT_RED_SUM), k, true, 0.0f};
    return st;
}

static bool valid_all(const ptx_reg *guard, int n)
{
    for (int j = 0; guard && j < n; j++)
        if (guard[j].id)
            return false;
    return true;
}

ptx_opd kit_softmax_update(ptx_fn *f, kit_softmax *st, const ptx_opd *v, const ptx_reg *guard,
                           int n, int width, ptx_opd *p)
{
    /* the new max: the values' tree max where all are valid, else a
     * guarded chain (invalid values may be garbage) */
    ptx_reg m = freg(f);
    if (valid_all(guard, n)) {
        ptx_reg vm = kit_red_vals(f, KIT_RED_MAX, v, n);
        ptx_emit(f, PTX_OP_MAX, NOM, F32T, ptx_r(m), ptx_r(st->m), ptx_r(vm));
    } else {
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(m), ptx_r(st->m));
        for (int j = 0; j < n; j++)
            kit_red_step(f, KIT_RED_MAX, m, v[j], guard[j]);
    }
    kit_redop mx = KIT_RED_MAX;
    kit_red_lanes(f, &mx, &m, 1, width);
    ptx_reg ms = kit_softmax_safe_max(f, ptx_r(m));
    ptx_opd alpha = ptx_f32(0.0f);
    ptx_reg s = freg(f);
    if (st->fresh)
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(s), ptx_f32(0.0f));
    else {
        alpha = ptx_r(kit_softmax_exp(f, ptx_r(st->m), ptx_r(ms), st->k));
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(s), ptx_r(st->s), alpha);
    }
    for (int j = 0; j < n; j++) {
        ptx_reg e = kit_softmax_exp(f, v[j], ptx_r(ms), st->k);
        if (p)
            p[j] = ptx_r(e);
        kit_red_step(f, KIT_RED_SUM, s, ptx_r(e), guard ? guard[j] : (ptx_reg){0});
    }
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(st->s), ptx_r(s));
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(st->m), ptx_r(m));
    st->fresh = false;
    return alpha;
}

/* ex2(x kl - nmk) with nmk = ms kl precomputed: one fma, one ex2. */
static ptx_reg exp_fma(ptx_fn *f, ptx_opd x, float kl, ptx_reg nmk)
{
    ptx_reg t = freg(f), e = freg(f);
    ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(t), x, ptx_f32(kl), ptx_r(nmk));
    ptx_emit(f, PTX_OP_EX2, M2(PTX_M_APPROX, PTX_M_FTZ), F32T, ptx_r(e), ptx_r(t));
    return e;
}

ptx_opd kit_softmax_update_fma(ptx_fn *f, kit_softmax *st, const ptx_opd *v, int n, int width,
                               ptx_opd *p)
{
    ptx_reg m = freg(f);
    ptx_reg vm = kit_red_vals(f, KIT_RED_MAX, v, n);
    ptx_emit(f, PTX_OP_MAX, NOM, F32T, ptx_r(m), ptx_r(st->m), ptx_r(vm));
    kit_redop mx = KIT_RED_MAX;
    kit_red_lanes(f, &mx, &m, 1, width);
    ptx_reg ms = kit_softmax_safe_max(f, ptx_r(m));
    float kl = (float)(st->k * 1.44269504088896341);
    ptx_reg nmk = op2(f, PTX_OP_MUL, ptx_r(ms), ptx_f32(-kl)); /* -ms k log2 e */
    ptx_opd alpha = ptx_f32(0.0f);
    ptx_reg s = freg(f);
    if (st->fresh)
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(s), ptx_f32(0.0f));
    else {
        alpha = ptx_r(exp_fma(f, ptx_r(st->m), kl, nmk)); /* old m = -inf: 0 */
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(s), ptx_r(st->s), alpha);
    }
    ptx_reg nmp = st->off != 0 ? op2(f, PTX_OP_ADD, ptx_r(nmk), ptx_f32(st->off)) : nmk; /* p: 2^off scaled */
    for (int j = 0; j < n; j++) {
        ptx_reg e = exp_fma(f, v[j], kl, nmp);
        if (p)
            p[j] = ptx_r(e);
        kit_red_step(f, KIT_RED_SUM, s, ptx_r(e), (ptx_reg){0});
    }
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(st->s), ptx_r(s));
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(st->m), ptx_r(m));
    st->fresh = false;
    return alpha;
}

void kit_softmax_merge(ptx_fn *f, kit_softmax *st, ptx_opd bm, ptx_opd bs)
{
    ptx_reg m = op2(f, PTX_OP_MAX, ptx_r(st->m), bm);
    ptx_reg ms = kit_softmax_safe_max(f, ptx_r(m));
    ptx_reg e1 = kit_softmax_exp(f, ptx_r(st->m), ptx_r(ms), st->k);
    ptx_reg e2 = kit_softmax_exp(f, bm, ptx_r(ms), st->k);
    ptx_reg s = op2(f, PTX_OP_MUL, ptx_r(st->s), ptx_r(e1));
    ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(st->s), bs, ptx_r(e2), ptx_r(s));
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(st->m), ptx_r(m));
    st->fresh = false;
}

ptx_reg kit_softmax_rescale(ptx_fn *f, kit_softmax *st, ptx_opd mall)
{
    ptx_reg ms = kit_softmax_safe_max(f, mall);
    ptx_reg alpha = kit_softmax_exp(f, ptx_r(st->m), ptx_r(ms), st->k);
    ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(st->s), ptx_r(st->s), ptx_r(alpha));
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(st->m), mall);
    return alpha;
}

ptx_reg kit_softmax_reduce(ptx_fn *f, kit_softmax *st, int width, const kit_warps *g)
{
    kit_redop mx = KIT_RED_MAX, sm = KIT_RED_SUM;
    ptx_reg m = freg(f);
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(m), ptx_r(st->m));
    if (g)
        kit_red_group(f, g, &mx, &m, 1);
    else
        kit_red_lanes(f, &mx, &m, 1, width);
    ptx_reg alpha = kit_softmax_rescale(f, st, ptx_r(m));
    if (g)
        kit_red_group(f, g, &sm, &st->s, 1);
    else
        kit_red_lanes(f, &sm, &st->s, 1, width);
    return alpha;
}
