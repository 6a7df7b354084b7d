/* The split-KV decode kernels' shared output stage and emission helpers
 * (gen/attention_combine.h): the direct store or the fused last-arriver
 * combine, moved here from gen/attention_decode.c unchanged (its PTX is
 * byte-identical) so the sm_90a kernel (gen/attention_fa3_decode.c) runs
 * the same code. */
#include <math.h>
#include <string.h>

#include "gen/attention_combine.h"
#include "gen/expr.h"
#include "gen/expr_ptx.h"

enum { COMB_CUNITS = 4 };

static ptx_reg r32(ptx_fn *f) { return ptx_reg_new(f, PTX_T_B32); }
static ptx_reg r64(ptx_fn *f) { return ptx_reg_new(f, PTX_T_B64); }
static ptx_reg rf(ptx_fn *f) { return ptx_reg_new(f, PTX_T_F32); }

bool attn_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int attn_ilog2(int64_t v)
{
    int r = 0;
    while ((INT64_C(1) << r) < v)
        r++;
    return r;
}

/* id / n and id % n (u32 registers): a shift and a mask for a power of
 * two, else a division (hd96: 12 or 24 pieces a row). */
void attn_idx_div(ptx_fn *f, ptx_reg id, int64_t n, ptx_reg *q, ptx_reg *r)
{
    if (attn_pow2(n)) {
        *q = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(id), ptx_imm(attn_ilog2(n))));
        *r = kit_reg(f, kit_iop(f, PTX_OP_AND, ptx_r(id), ptx_imm(n - 1)));
    } else {
        *q = kit_reg(f, kit_iop(f, PTX_OP_DIV, ptx_r(id), ptx_imm(n)));
        *r = kit_reg(f, kit_iop(f, PTX_OP_REM, ptx_r(id), ptx_imm(n)));
    }
}

ptx_reg attn_setp(ptx_fn *f, ptx_mod cmp, ptx_types ty, ptx_opd a, ptx_opd b)
{
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_SETP, M1(cmp), ty, ptx_r(p), a, b);
    return p;
}

ptx_reg attn_pand(ptx_fn *f, ptx_reg a, ptx_reg b)
{
    if (!a.id)
        return b;
    if (!b.id)
        return a;
    ptx_reg d = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_AND, NOM, PREDT, ptx_r(d), ptx_r(a), ptx_r(b));
    return d;
}

ptx_reg attn_fop2(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b)
{
    ptx_reg d = rf(f);
    ptx_emit(f, op, NOM, F32T, ptx_r(d), a, b);
    return d;
}

/* p64 + a * b bytes (a: u32 operand, b >= 0). */
ptx_reg attn_add64(ptx_fn *f, ptx_reg p64, ptx_opd a, int64_t b)
{
    if (b == 0)
        return p64;
    if (a.kind == PTX_O_IMM) {
        if (a.u.imm == 0 || b == 0)
            return p64;
        ptx_reg d = r64(f);
        ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(d), ptx_r(p64), ptx_imm(a.u.imm * b));
        return d;
    }
    ptx_reg off = r64(f);
    if (b <= 0xffffffffll) {
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_WIDE), U32T, ptx_r(off), a, ptx_imm(b));
    } else {
        ptx_reg w = r64(f);
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), a);
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U64T, ptx_r(off), ptx_r(w), ptx_imm(b));
    }
    ptx_reg d = r64(f);
    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(d), ptx_r(p64), ptx_r(off));
    return d;
}

void attn_bar(ptx_fn *f, int id, int threads)
{
    if (!threads)
        ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    else
        ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(id), ptx_imm(threads));
}

void attn_bra(ptx_fn *f, int label, ptx_reg p, bool neg)
{
    ptx_ins *in = ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(label));
    if (p.id)
        ptx_guard(in, p, neg);
}

/* 1 / l, or 0 when l is 0 (a row without a visible key: o = 0). */
ptx_reg attn_inv_or_zero(ptx_fn *f, ptx_reg l)
{
    ptx_reg r = rf(f);
    ptx_emit(f, PTX_OP_RCP, M1(PTX_M_RN), F32T, ptx_r(r), ptx_r(l));
    ptx_reg pos = attn_setp(f, PTX_M_GT, F32T, ptx_r(l), ptx_f32(0.0f));
    ptx_reg d = rf(f);
    ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(d), ptx_r(r), ptx_f32(0.0f), ptx_r(pos));
    return d;
}

/* Global address of element 0 of packed row rg (u32) of this CTA's KV head
 * in q or o (element strides s[3] = token, head, batch). */
ptx_reg attn_row_addr(const attn_out *x, ptx_reg base, const int64_t *s, int es, ptx_reg rg)
{
    ptx_fn *f = x->f;
    const pt_prepared *pp = x->pp;
    ptx_opd i = pp->group == 1 ? ptx_r(rg) : kit_iop(x->f, PTX_OP_DIV, ptx_r(rg), ptx_imm(pp->group));
    ptx_opd hr = pp->group == 1 ? ptx_imm(0) : kit_iop(x->f, PTX_OP_REM, ptx_r(rg), ptx_imm(pp->group));
    ptx_opd h = kit_imad(f, ptx_r(x->hk), ptx_imm(pp->group), hr);
    ptx_reg a = attn_add64(f, base, ptx_r(x->b), s[2] * es);
    a = attn_add64(f, a, ptx_r(kit_reg(f, i)), s[0] * es);
    return attn_add64(f, a, ptx_r(kit_reg(f, h)), s[1] * es);
}

/* lse element (b, h, i) of packed row rg: f32 [B, Hq, Sq]. */
static ptx_reg lse_addr(const attn_out *x, ptx_reg rg)
{
    ptx_fn *f = x->f;
    const pt_prepared *pp = x->pp;
    ptx_opd i = pp->group == 1 ? ptx_r(rg) : kit_iop(f, PTX_OP_DIV, ptx_r(rg), ptx_imm(pp->group));
    ptx_opd hr = pp->group == 1 ? ptx_imm(0) : kit_iop(f, PTX_OP_REM, ptx_r(rg), ptx_imm(pp->group));
    ptx_opd h = kit_imad(f, ptx_r(x->hk), ptx_imm(pp->group), hr);
    ptx_opd bh = kit_imad(f, ptx_r(x->b), ptx_imm(pp->Hq), h);
    ptx_opd idx = kit_imad(f, bh, ptx_imm(pp->Sq), i);
    return attn_add64(f, x->lse, ptx_r(kit_reg(f, idx)), 4);
}

/* ---- the kernel -------------------------------------------------------- */

/* Per-thread output units of the epilogue: 16 rows x dv/4 chunks of 4. */
typedef struct unit {
    ptx_reg r;      /* u32 row in the block */
    ptx_reg c4;     /* u32 chunk */
    ptx_reg rg;     /* u32 packed row */
    ptx_reg ok;     /* the unit exists and its row is a real one */
    ptx_reg first;  /* ok and chunk 0 (writes the row's lse) */
} unit;

static void units_init(const attn_out *x, unit *u, int nu)
{
    ptx_fn *f = x->f;
    const attn_out *g = x;
    int64_t nc = x->pp->dv / 4, total = g->bm * nc;
    ptx_reg rows = kit_reg(f, kit_iop(f, PTX_OP_MUL, ptx_r(x->sq), ptx_imm(x->pp->group)));
    for (int k = 0; k < nu; k++) {
        ptx_reg id = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->tid), ptx_imm((int64_t)k * g->T)));
        attn_idx_div(f, id, nc, &u[k].r, &u[k].c4);
        u[k].rg = kit_reg(f, kit_imad(f, ptx_r(x->rb), ptx_imm(g->bm), ptx_r(u[k].r)));
        ptx_reg ok = attn_setp(f, PTX_M_LT, S32T, ptx_r(u[k].rg), ptx_r(rows));
        if ((int64_t)(k + 1) * g->T > total)
            ok = attn_pand(f, ok, attn_setp(f, PTX_M_LT, U32T, ptx_r(id), ptx_imm(total)));
        u[k].ok = ok;
        u[k].first = attn_pand(f, ok, attn_setp(f, PTX_M_EQ, U32T, ptx_r(u[k].c4), ptx_imm(0)));
    }
}

/* Stores a unit's 4 normalised values as o's dtype and, first unit of a
 * row, lse2 * ln 2 as lse. */
static void store_out(const attn_out *x, const unit *u, const ptx_opd *v, ptx_reg lse2)
{
    ptx_fn *f = x->f;
    const pt_prepared *pp = x->pp;
    ptx_reg a = attn_row_addr(x, x->o, pp->so, pp->oes, u->rg);
    a = attn_add64(f, a, ptx_r(u->c4), 4 * pp->oes);
    kit_io io = {.guard = u->ok};
    kit_store(f, &io, pp->odt, a, 0, 4, v);
    if (pp->lse) {
        ptx_reg la = lse_addr(x, u->rg);
        ptx_reg l = attn_fop2(f, PTX_OP_MUL, ptx_r(lse2), ptx_f32((float)M_LN2));
        ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), F32T, ptx_addr(la, 0), ptx_r(l)), u->first, false);
    }
}


ptx_reg attn_s32op(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b)
{
    ptx_reg d = r32(f);
    ptx_emit(f, op, NOM, S32T, ptx_r(d), a, b);
    return d;
}

void attn_kv_range_emit(ptx_fn *f, const pt_prepared *pp, int bm, int bn, ptx_reg rb, ptx_reg sq, ptx_reg len,
                        ptx_reg split, ptx_reg nsplit, attn_kv_range *out)
{
    ptx_reg none = {0};
    /* the CTA's real rows' visible keys (queries i_first..i_last; lo and hi
     * grow with i): every real row sees [lmax, hmin), some row sees a key
     * of [lmin, hmax). Key blocks outside [lmin, hmax) are never loaded;
     * a warp's keys inside [lmax, hmin) skip the mask. */
    ptx_reg off = attn_s32op(f, PTX_OP_SUB, ptx_r(len), ptx_r(sq));
    ptx_reg rowsr = kit_reg(f, kit_iop(f, PTX_OP_MUL, ptx_r(sq), ptx_imm(pp->group)));
    ptx_reg hmin = len, hmax = len, lmax = none, lmin = none;
    {
        ptx_reg r0 = kit_reg(f, kit_iop(f, PTX_OP_MUL, ptx_r(rb), ptx_imm(bm)));
        ptx_reg r1 = attn_s32op(f, PTX_OP_MIN, kit_iop(f, PTX_OP_ADD, ptx_r(r0), ptx_imm(bm)), ptx_r(rowsr));
        r1 = attn_s32op(f, PTX_OP_SUB, ptx_r(r1), ptx_imm(1));
        ptx_reg i0 = pp->group == 1 ? r0 : attn_s32op(f, PTX_OP_DIV, ptx_r(r0), ptx_imm(pp->group));
        ptx_reg i1 = pp->group == 1 ? r1 : attn_s32op(f, PTX_OP_DIV, ptx_r(r1), ptx_imm(pp->group));
        ptx_reg io0 = attn_s32op(f, PTX_OP_ADD, ptx_r(i0), ptx_r(off)), io1 = attn_s32op(f, PTX_OP_ADD, ptx_r(i1), ptx_r(off));
        if (pp->wr >= 0) {
            hmin = attn_s32op(f, PTX_OP_MIN, kit_iop(f, PTX_OP_ADD, ptx_r(io0), ptx_imm(pp->wr + 1)), ptx_r(len));
            hmax = attn_s32op(f, PTX_OP_MIN, kit_iop(f, PTX_OP_ADD, ptx_r(io1), ptx_imm(pp->wr + 1)), ptx_r(len));
        }
        if (pp->wl >= 0) {
            lmax = attn_s32op(f, PTX_OP_SUB, ptx_r(io1), ptx_imm(pp->wl));
            lmin = attn_s32op(f, PTX_OP_MAX, kit_iop(f, PTX_OP_SUB, ptx_r(io0), ptx_imm(pp->wl)), ptx_imm(0));
        }
    }
    /* this split's key blocks [kb0, kb1) of the blocks [bf, bf + nb) */
    ptx_reg bf = lmin.id ? kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(lmin), ptx_imm(attn_ilog2(bn)))) : none;
    ptx_reg hm0 = pp->wr >= 0 ? attn_s32op(f, PTX_OP_MAX, ptx_r(hmax), ptx_imm(0)) : len;
    ptx_reg nb = kit_reg(f, kit_iop(f, PTX_OP_SHR, kit_iop(f, PTX_OP_ADD, ptx_r(hm0), ptx_imm(bn - 1)),
                                    ptx_imm(attn_ilog2(bn))));
    if (bf.id)
        nb = attn_s32op(f, PTX_OP_MAX, kit_iop(f, PTX_OP_SUB, ptx_r(nb), ptx_r(bf)), ptx_imm(0));
    ptx_reg kb0 = r32(f), kb1 = r32(f);
    ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U32T, ptx_r(kb0), ptx_r(nb), ptx_r(split));
    ptx_emit(f, PTX_OP_DIV, NOM, U32T, ptx_r(kb0), ptx_r(kb0), ptx_r(nsplit));
    ptx_reg s1 = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(split), ptx_imm(1)));
    ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U32T, ptx_r(kb1), ptx_r(nb), ptx_r(s1));
    ptx_emit(f, PTX_OP_DIV, NOM, U32T, ptx_r(kb1), ptx_r(kb1), ptx_r(nsplit));
    if (bf.id) {
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(kb0), ptx_r(kb0), ptx_r(bf));
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(kb1), ptx_r(kb1), ptx_r(bf));
    }
    ptx_reg nblk = attn_s32op(f, PTX_OP_SUB, ptx_r(kb1), ptx_r(kb0));
    ptx_reg key0 = kit_reg(f, kit_iop(f, PTX_OP_SHL, ptx_r(kb0), ptx_imm(attn_ilog2(bn)))); /* first key */

    *out = (attn_kv_range){.off = off, .rowsr = rowsr, .hmin = hmin, .lmax = lmax, .nblk = nblk, .key0 = key0};
}

void attn_rows_mask_emit(ptx_fn *f, const pt_prepared *pp, int bm, ptx_reg rb, ptx_reg row_base, ptx_reg sq,
                         ptx_reg len, const attn_kv_range *kr, attn_rows_mask *out)
{
    (void)sq;
    ptx_reg off = kr->off, rowsr = kr->rowsr;
    /* the thread's two rows (g and g + 8): visible keys [lo, hi) */
    ptx_reg hi[2], lo[2] = {{0}, {0}};
    for (int h = 0; h < 2; h++) {
        ptx_reg rg = kit_reg(f, kit_imad(f, ptx_r(rb), ptx_imm(bm),
                                         kit_iop(f, PTX_OP_ADD, ptx_r(row_base), ptx_imm(8 * h))));
        ptx_reg i = pp->group == 1 ? rg : kit_reg(f, kit_iop(f, PTX_OP_DIV, ptx_r(rg), ptx_imm(pp->group)));
        ptx_reg io = attn_s32op(f, PTX_OP_ADD, ptx_r(i), ptx_r(off));
        ptx_reg hv = len;
        if (pp->wr >= 0) {
            ptx_reg t = attn_s32op(f, PTX_OP_ADD, ptx_r(io), ptx_imm(pp->wr + 1));
            hv = attn_s32op(f, PTX_OP_MIN, ptx_r(t), ptx_r(len));
        }
        ptx_reg real = attn_setp(f, PTX_M_LT, S32T, ptx_r(rg), ptx_r(rowsr));
        hi[h] = r32(f);
        ptx_emit(f, PTX_OP_SELP, NOM, S32T, ptx_r(hi[h]), ptx_r(hv), ptx_imm(0), ptx_r(real));
        if (pp->wl >= 0)
            lo[h] = attn_s32op(f, PTX_OP_SUB, ptx_r(io), ptx_imm(pp->wl));
    }

    *out = (attn_rows_mask){{hi[0], hi[1]}, {lo[0], lo[1]}};
}

ptx_reg attn_mask_needed(ptx_fn *f, const attn_kv_range *kr, ptx_reg key, int n)
{
    ptx_reg need = attn_setp(f, PTX_M_GT, S32T, kit_iop(f, PTX_OP_ADD, ptx_r(key), ptx_imm(n)), ptx_r(kr->hmin));
    if (kr->lmax.id) {
        ptx_reg p2 = attn_setp(f, PTX_M_LT, S32T, ptx_r(key), ptx_r(kr->lmax));
        ptx_reg o2 = ptx_reg_new(f, PTX_T_PRED);
        ptx_emit(f, PTX_OP_OR, NOM, PREDT, ptx_r(o2), ptx_r(need), ptx_r(p2));
        need = o2;
    }
    return need;
}

void attn_mask_scores(ptx_fn *f, const kit_frag *fr, const attn_rows_mask *rm, ptx_reg kcol, ptx_reg *v, int n)
{
    const ptx_reg *hi = rm->hi, *lo = rm->lo;
    ptx_reg dh[2], dl[2] = {{0}, {0}};
    for (int h = 0; h < 2; h++) {
        dh[h] = attn_s32op(f, PTX_OP_SUB, ptx_r(hi[h]), ptx_r(kcol));
        if (lo[h].id)
            dl[h] = attn_s32op(f, PTX_OP_SUB, ptx_r(lo[h]), ptx_r(kcol));
    }
    for (int i = 0; i < n; i++) {
        int h = fr->row[i] >= 8;
        ptx_reg vis = attn_setp(f, PTX_M_GT, S32T, ptx_r(dh[h]), ptx_imm(fr->col[i]));
        if (dl[h].id)
            vis = attn_pand(f, vis, attn_setp(f, PTX_M_LE, S32T, ptx_r(dl[h]), ptx_imm(fr->col[i])));
        ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(v[i]), ptx_r(v[i]), ptx_f32(-INFINITY), ptx_r(vis));
    }
}

ptx_opd attn_softmax_half(ptx_fn *f, kit_softmax *st, const kit_frag *fr, const ptx_reg *s, int n, int h,
                          ptx_reg *p)
{
    ptx_opd vals[128] = {0}, p2[128];
    int nv = 0, idx[128];
    for (int i = 0; i < n; i++)
        if ((fr->row[i] >= 8) == h) {
            idx[nv] = i;
            vals[nv++] = ptx_r(s[i]);
        }
    ptx_opd alpha = kit_softmax_update(f, &st[h], vals, NULL, nv, 4, p2);
    for (int j = 0; j < nv; j++)
        p[idx[j]] = p2[j].u.reg;
    return alpha;
}

ptx_reg attn_param_ptr(ptx_fn *f, pt_launch *l, const char *name, pt_arg arg)
{
    const char *pn = ptx_param_ptr(f, name, 16);
    l->args[l->nargs++] = arg;
    ptx_reg r = ptx_reg_new(f, PTX_T_B64), d = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_LD, M1(PTX_M_PARAM), U64T, ptx_r(r), ptx_saddr(pn, 0));
    ptx_emit(f, PTX_OP_CVTA, M2(PTX_M_TO, PTX_M_GLOBAL), U64T, ptx_r(d), ptx_r(r));
    return d;
}

ptx_reg attn_param_u32(ptx_fn *f, pt_launch *l, const char *name, uint64_t v)
{
    const char *pn = ptx_param_add(f, name, PTX_T_U32);
    l->args[l->nargs++] = (pt_arg){PT_ARG_U32, 0, v, 0};
    ptx_reg r = r32(f);
    ptx_emit(f, PTX_OP_LD, M1(PTX_M_PARAM), U32T, ptx_r(r), ptx_saddr(pn, 0));
    return r;
}

ptx_reg attn_score(ptx_fn *f, const pt_prepared *pp, ptx_reg s)
{
    if (!(pp->softcap > 0.0f))
        return s;
    ptx_reg t = attn_fop2(f, PTX_OP_MUL, ptx_r(s), ptx_f32(pp->scale / pp->softcap));
    ex_node nd = {.kind = EX_TANH, .nargs = 1};
    ptx_opd a = ptx_r(t);
    ptx_opd sv = ex_ptx_node(f, &nd, &a);
    if (sv.kind == PTX_O_REG)
        return sv.u.reg;
    ptx_reg r = rf(f);
    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(r), sv);
    return r;
}

void attn_p_split(ptx_fn *f, pt_dtype dt, const ptx_reg *p, ptx_reg *hi, ptx_reg *lo, int n)
{
    float tiny = dt == PT_BF16 ? 0x1p-126f : 0x1p-24f;
    for (int i = 0; i < n; i++) {
        if (dt == PT_BF16) { /* bf16 RZ: the f32's high half */
            hi[i] = rf(f);
            ptx_emit(f, PTX_OP_AND, NOM, PTX_T1(PTX_T_B32), ptx_r(hi[i]), ptx_r(p[i]), ptx_imm(0xffff0000ll));
        } else {
            ptx_reg hb = ptx_reg_new(f, PTX_T_B16);
            ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RZ), PTX_TYPES(PTX_T_F16, PTX_T_F32), ptx_r(hb), ptx_r(p[i]));
            hi[i] = kit_cvt_to_f32(f, dt, ptx_r(hb));
        }
        ptx_reg l0 = attn_fop2(f, PTX_OP_SUB, ptx_r(p[i]), ptx_r(hi[i]));
        ptx_reg lt = attn_fop2(f, PTX_OP_MAX, ptx_r(l0), ptx_f32(tiny));
        ptx_reg pos = attn_setp(f, PTX_M_GT, F32T, ptx_r(p[i]), ptx_f32(0.0f));
        lo[i] = rf(f);
        ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(lo[i]), ptx_r(lt), ptx_r(l0), ptx_r(pos));
    }
}

/* FA's wave-efficiency rule (hopper/heuristics.h num_splits_heuristic):
 * no split when the CTAs already fill 80% of the SMs or there are few key
 * blocks; otherwise the fewest splits within 85% of the best efficiency
 * n_waves / ceil(n_waves), both over the counts that change the blocks per
 * split. */
static const int attn_decode_splits[] = {1, 2, 3, 4, 8, 16, 32, 64, 128};

void attn_splits_param(pt_param_space *p, int h)
{
    bool have = false;
    for (size_t i = 0; i < sizeof attn_decode_splits / sizeof *attn_decode_splits; i++) {
        if (!have && h < attn_decode_splits[i]) {
            p->values[p->nvalues++] = h;
            have = true;
        }
        if (attn_decode_splits[i] == h)
            have = true;
        p->values[p->nvalues++] = attn_decode_splits[i];
    }
}

int attn_split_heuristic(int64_t ctas, int64_t nblocks, int sms)
{
    if (ctas >= (int64_t)(0.8 * sms) || nblocks <= 4)
        return 1;
    int64_t max_s = nblocks < sms ? nblocks : sms;
    if (max_s > ATTN_MAX_SPLITS)
        max_s = ATTN_MAX_SPLITS;
    double eff[ATTN_MAX_SPLITS + 1] = {0}, best = 0;
    for (int64_t s = 1; s <= max_s; s++) { /* eligible counts only, as FA */
        bool eligible = s == 1 || (nblocks + s - 1) / s != (nblocks + s - 2) / (s - 1);
        double w = (double)(ctas * s) / sms;
        eff[s] = eligible ? w / ceil(w) : 0;
        if (eff[s] > best)
            best = eff[s];
    }
    for (int64_t s = 1; s <= max_s; s++)
        if (eff[s] > 0 && eff[s] >= 0.85 * best)
            return (int)s;
    return 1;
}

void attn_out_emit(const attn_out *out, ptx_reg ob)
{
    const attn_out *x = out, *g = out;
    ptx_fn *f = out->f;
    ptx_module *m = f->mod;
    const pt_prepared *pp = out->pp;
    int64_t dv = pp->dv;
    bool split = out->splits > 1;
    /* ---- the CTA's normalised O: sum of the warps, in warp order ---- */
    int64_t total = g->bm * dv / 4;
    int nu = (int)((total + g->T - 1) / g->T);
    unit *u = pt_arena_alloc(m->arena, (size_t)nu * sizeof(unit));
    units_init(x, u, nu);
    ptx_reg (*val)[4] = pt_arena_alloc(m->arena, (size_t)nu * sizeof *val);
    ptx_reg *ul = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
    for (int k = 0; k < nu; k++) {
        ptx_reg a = kit_reg(f, kit_imad(f, ptx_r(u[k].r), ptx_imm(g->obuf_pitch * 4),
                                        kit_iop(f, PTX_OP_SHL, ptx_r(u[k].c4), ptx_imm(4))));
        a = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(a), ptx_r(ob)));
        for (int w = 0; w < g->W; w++) {
            ptx_reg t4[4] = {rf(f), rf(f), rf(f), rf(f)};
            ptx_ins *in = ptx_emit(f, PTX_OP_LD, M2(PTX_M_SHARED, PTX_M_V4), F32T, ptx_vecr(f, 4, t4),
                                   ptx_addr(a, (int64_t)w * g->bm * g->obuf_pitch * 4));
            (void)in;
            for (int j = 0; j < 4; j++)
                val[k][j] = w == 0 ? t4[j] : attn_fop2(f, PTX_OP_ADD, ptx_r(val[k][j]), ptx_r(t4[j]));
        }
        ptx_reg la2 = kit_reg(f, kit_imad(f, ptx_r(u[k].r), ptx_imm(4), ptx_imm(g->lse_off)));
        la2 = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(la2), ptx_r(x->smem)));
        ul[k] = rf(f);
        ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), F32T, ptx_r(ul[k]), ptx_addr(la2, 0));
    }
    if (!split) {
        for (int k = 0; k < nu; k++) {
            ptx_opd v4[4] = {ptx_r(val[k][0]), ptx_r(val[k][1]), ptx_r(val[k][2]), ptx_r(val[k][3])};
            store_out(x, &u[k], v4, ul[k]);
        }
        ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);
        return;
    }

    /* ---- split: publish the partial, count, the last arriver combines ---- */
    {
        /* block (b, hk, rb) of the grid's row blocks; partial (blk * S + s) */
        ptx_opd blk = kit_imad(f, kit_imad(f, ptx_r(x->b), ptx_imm(pp->Hkv), ptx_r(x->hk)), ptx_imm(g->nrb),
                               ptx_r(x->rb));
        ptx_reg blkr = kit_reg(f, blk);
        ptx_reg bs = r32(f);
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U32T, ptx_r(bs), ptx_r(blkr), ptx_r(x->nsplit)); /* blk * S */
        ptx_reg ps0 = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(bs), ptx_r(x->split)));
        /* the lse partials follow the S O partials: an offset in S, so the
         * text does not depend on the split count */
        ptx_reg lse_base = attn_add64(f, x->scr, ptx_r(x->nsplit), g->part_bytes / g->splits);
        for (int k = 0; k < nu; k++) {
            ptx_reg pr = kit_reg(f, kit_imad(f, ptx_r(ps0), ptx_imm(g->bm), ptx_r(u[k].r)));
            ptx_reg a = attn_add64(f, x->scr, ptx_r(pr), dv * 4);
            a = attn_add64(f, a, ptx_r(u[k].c4), 16);
            kit_io io = {.guard = u[k].ok};
            ptx_opd v4[4] = {ptx_r(val[k][0]), ptx_r(val[k][1]), ptx_r(val[k][2]), ptx_r(val[k][3])};
            kit_store(f, &io, PT_F32, a, 0, 4, v4);
            ptx_reg la2 = attn_add64(f, lse_base, ptx_r(pr), 4);
            ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), F32T, ptx_addr(la2, 0), ptx_r(ul[k])), u[k].first,
                      false);
        }
        int done = ptx_label_new(f);
        ptx_emit0(f, PTX_OP_FENCE, M2(PTX_M_ACQ_REL, PTX_M_GPU), PTX_NOTYPES);
        attn_bar(f, x->bar_id, x->bar_threads);
        ptx_reg cnt = attn_add64(f, x->ws, ptx_r(blkr), 4);
        ptx_reg tz = attn_setp(f, PTX_M_EQ, U32T, ptx_r(x->tid), ptx_imm(0));
        ptx_reg old = r32(f);
        ptx_reg flag = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->smem), ptx_imm(g->flag_off)));
        ptx_guard(ptx_emit(f, PTX_OP_ATOM, M2(PTX_M_GLOBAL, PTX_M_ADD), U32T, ptx_r(old), ptx_addr(cnt, 0),
                           ptx_imm(1)),
                  tz, false);
        ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), U32T, ptx_addr(flag, 0), ptx_r(old)), tz, false);
        attn_bar(f, x->bar_id, x->bar_threads);
        ptx_reg seen = r32(f);
        ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), U32T, ptx_r(seen), ptx_addr(flag, 0));
        ptx_reg last = kit_reg(f, kit_iop(f, PTX_OP_SUB, ptx_r(x->nsplit), ptx_imm(1)));
        attn_bra(f, done, attn_setp(f, PTX_M_NE, U32T, ptx_r(seen), ptx_r(last)), false);
        ptx_reg zero = kit_reg(f, ptx_imm(0));
        ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), U32T, ptx_addr(cnt, 0), ptx_r(zero)), tz, false);
        ptx_emit0(f, PTX_OP_FENCE, M2(PTX_M_ACQ_REL, PTX_M_GPU), PTX_NOTYPES);

        /* combine splits 0..S-1 in order: pass 1 the max, pass 2 the sums;
         * COMB_CUNITS units at a time (a one-warp CTA has 16 and would keep
         * them all live) */
        for (int k0 = 0; k0 < nu; k0 += COMB_CUNITS) {
            int k1 = k0 + COMB_CUNITS < nu ? k0 + COMB_CUNITS : nu;
            ptx_reg *pp0 = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
            ptx_reg *lp0 = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
            ptx_reg *Mx = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
            ptx_reg *Ls = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
            ptx_reg (*acc)[4] = pt_arena_alloc(m->arena, (size_t)nu * sizeof *acc);
            for (int k = k0; k < k1; k++) {
                ptx_reg pr = kit_reg(f, kit_imad(f, ptx_r(bs), ptx_imm(g->bm), ptx_r(u[k].r)));
                pp0[k] = attn_add64(f, attn_add64(f, x->scr, ptx_r(pr), dv * 4), ptx_r(u[k].c4), 16);
                lp0[k] = attn_add64(f, lse_base, ptx_r(pr), 4);
                Mx[k] = kit_red_init(f, KIT_RED_MAX);
                Ls[k] = kit_red_init(f, KIT_RED_SUM);
                for (int j = 0; j < 4; j++) {
                    acc[k][j] = rf(f);
                    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(acc[k][j]), ptx_f32(0.0f));
                }
            }
            for (int pass = 0; pass < 2; pass++) {
                ptx_reg sidx = kit_reg(f, ptx_imm(0));
                ptx_reg *pcur = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
                ptx_reg *lcur = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
                ptx_reg *msafe = pt_arena_alloc(m->arena, (size_t)nu * sizeof(ptx_reg));
                for (int k = k0; k < k1; k++) {
                    pcur[k] = r64(f);
                    lcur[k] = r64(f);
                    ptx_emit(f, PTX_OP_MOV, NOM, B64T, ptx_r(pcur[k]), ptx_r(pp0[k]));
                    ptx_emit(f, PTX_OP_MOV, NOM, B64T, ptx_r(lcur[k]), ptx_r(lp0[k]));
                    if (pass == 1)
                        msafe[k] = kit_softmax_safe_max(f, ptx_r(Mx[k]));
                }
                int lt = ptx_label_new(f);
                ptx_label_place(f, lt);
                for (int k = k0; k < k1; k++) {
                    ptx_reg ls = rf(f);
                    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(ls), ptx_f32(-INFINITY));
                    ptx_guard(ptx_emit(f, PTX_OP_LD, M1(PTX_M_GLOBAL), F32T, ptx_r(ls), ptx_addr(lcur[k], 0)), u[k].ok,
                              false);
                    if (pass == 0) {
                        ptx_emit(f, PTX_OP_MAX, NOM, F32T, ptx_r(Mx[k]), ptx_r(Mx[k]), ptx_r(ls));
                    } else {
                        ptx_reg dd = attn_fop2(f, PTX_OP_SUB, ptx_r(ls), ptx_r(msafe[k]));
                        ptx_reg w = rf(f);
                        ptx_emit(f, PTX_OP_EX2, M2(PTX_M_APPROX, PTX_M_FTZ), F32T, ptx_r(w), ptx_r(dd));
                        ptx_emit(f, PTX_OP_ADD, NOM, F32T, ptx_r(Ls[k]), ptx_r(Ls[k]), ptx_r(w));
                        ptx_reg t4[4] = {rf(f), rf(f), rf(f), rf(f)};
                        for (int j = 0; j < 4; j++)
                            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(t4[j]), ptx_f32(0.0f));
                        ptx_guard(ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_V4), F32T, ptx_vecr(f, 4, t4),
                                           ptx_addr(pcur[k], 0)),
                                  u[k].ok, false);
                        for (int j = 0; j < 4; j++)
                            ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(acc[k][j]), ptx_r(w), ptx_r(t4[j]),
                                     ptx_r(acc[k][j]));
                    }
                    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(lcur[k]), ptx_r(lcur[k]), ptx_imm(g->bm * 4));
                    if (pass == 1)
                        ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(pcur[k]), ptx_r(pcur[k]), ptx_imm(g->bm * dv * 4));
                }
                ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(sidx), ptx_r(sidx), ptx_imm(1));
                attn_bra(f, lt, attn_setp(f, PTX_M_LT, U32T, ptx_r(sidx), ptx_r(x->nsplit)), false);
            }
            for (int k = k0; k < k1; k++) {
                ptx_reg inv = attn_inv_or_zero(f, Ls[k]);
                ptx_opd v4[4];
                for (int j = 0; j < 4; j++)
                    v4[j] = ptx_r(attn_fop2(f, PTX_OP_MUL, ptx_r(acc[k][j]), ptx_r(inv)));
                ptx_reg lg = rf(f);
                ptx_emit(f, PTX_OP_LG2, M1(PTX_M_APPROX), F32T, ptx_r(lg), ptx_r(Ls[k]));
                ptx_reg l2 = attn_fop2(f, PTX_OP_ADD, ptx_r(Mx[k]), ptx_r(lg));
                store_out(x, &u[k], v4, l2);
            }
        }
        ptx_label_place(f, done);
        ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);
    }

}

/* Pages under the TMA page minimum (a TMA box of one page would start inside
 * a 128B swizzle atom): the producer warpgroup's 128 threads (pt) gather
 * the ncol columns of key rows [key, key + bn) from their pages by
 * cp.async into the stage at dst, in the layout TMA writes (64-column
 * sub-tiles of bn rows x 128 bytes, chunk c of row r at (c ^ r % 8) 16):
 * thread pt owns chunk pt % cpad of rows pt / cpad + k 128 / cpad (the
 * lanes of a row read it contiguously), a not-unrolled loop (the
 * producer's 40 registers). Keys at or past len read neither the table
 * nor the pools (src-size 0: zero rows). st: the pool's strides (row, head,
 * page, elements); hk the KV head, tab the sequence's block table. With
 * vpool (id != 0: V of the same width and strides, as a paged KV cache
 * is) V's rows are gathered in the same pass, landing v_off bytes past
 * K's: a row's table entry is read once and its pool offset (mul.wide +
 * mad.wide) added to each pool, ~10 instructions a 16-byte copy against
 * ~19 for two passes. The caller arrives with
 * cp.async.mbarrier.arrive.noinc (its full barriers count the 128
 * arrivals) and the consumers fence.proxy.async after their wait
 * (cp.async writes through the generic proxy). Both fa3 kernels. */
void attn_gather_rows(ptx_fn *f, int64_t es, int64_t page, int bn, ptx_reg dst, ptx_reg kpool, ptx_reg vpool,
                      int64_t v_off, const int64_t *st, int64_t ncol, ptx_reg key, ptx_reg len, ptx_reg hk,
                      ptx_reg tab, ptx_reg pt)
{
    int64_t cpr = ncol * es / 16, cpad = 8;
    while (cpad < cpr)
        cpad *= 2;
    int64_t rpp = 128 / cpad, sub = (int64_t)bn * 128;
    int pools = vpool.id ? 2 : 1;
    ptx_reg c = kit_reg(f, kit_iop(f, PTX_OP_AND, ptx_r(pt), ptx_imm(cpad - 1)));
    ptx_reg r0 = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(pt), ptx_imm(attn_ilog2(cpad))));
    ptx_opd x = kit_iop(f, PTX_OP_XOR, kit_iop(f, PTX_OP_AND, ptx_r(c), ptx_imm(7)),
                        kit_iop(f, PTX_OP_AND, ptx_r(r0), ptx_imm(7)));
    ptx_opd doff = kit_iop(f, PTX_OP_ADD, kit_iop(f, PTX_OP_SHL, ptx_r(r0), ptx_imm(7)),
                           kit_iop(f, PTX_OP_SHL, x, ptx_imm(4)));
    doff = kit_iop(f, PTX_OP_ADD, doff, kit_iop(f, PTX_OP_MUL, kit_iop(f, PTX_OP_SHR, ptx_r(c), ptx_imm(3)),
                                                ptx_imm(sub)));
    ptx_reg lane_ok = cpr < cpad ? attn_setp(f, PTX_M_LT, U32T, ptx_r(c), ptx_imm(cpr)) : (ptx_reg){0};
    /* the thread's chunk of head hk in each pool */
    ptx_reg hc = kit_reg(f, kit_imad(f, ptx_r(hk), ptx_imm(st[1] * es), kit_iop(f, PTX_OP_SHL, ptx_r(c), ptx_imm(4))));
    ptx_reg base[2] = {attn_add64(f, kpool, ptx_r(hc), 1), pools > 1 ? attn_add64(f, vpool, ptx_r(hc), 1) : kpool};
    ptx_reg d0 = r32(f), d1 = r32(f), row = r32(f), it = r32(f);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(d0), ptx_r(dst), doff);
    /* rpp 4: rows r0 + 4 k of odd k take the other half of the XOR pattern (r0 < 4) */
    if (rpp == 4)
        ptx_emit(f, PTX_OP_XOR, NOM, B32T, ptx_r(d1), ptx_r(d0), ptx_imm(64));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(row), ptx_r(key), ptx_r(r0));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(it), ptx_imm(0));
    int step = rpp == 4 ? 2 : 1, top = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    for (int k = 0; k < step; k++) {
        ptx_reg j = k ? kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(row), ptx_imm(k * rpp))) : row;
        ptx_reg in = attn_setp(f, PTX_M_LT, S32T, ptx_r(j), ptx_r(len));
        ptx_reg pg = r32(f), size = r32(f);
        ptx_emit(f, PTX_OP_MOV, NOM, S32T, ptx_r(pg), ptx_imm(0));
        ptx_reg pi = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(j), ptx_imm(attn_ilog2(page))));
        ptx_guard(ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(pg),
                           ptx_addr(attn_add64(f, tab, ptx_r(pi), 4), 0)),
                  in, false);
        ptx_reg o = r64(f), o2 = o;
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_WIDE), U32T, ptx_r(o), ptx_r(pg), ptx_imm(st[2] * es));
        if (page > 1) {
            o2 = r64(f);
            ptx_opd prow = kit_iop(f, PTX_OP_AND, ptx_r(j), ptx_imm(page - 1));
            ptx_emit(f, PTX_OP_MAD, M1(PTX_M_WIDE), U32T, ptx_r(o2), prow, ptx_imm(st[0] * es), ptx_r(o));
        }
        ptx_emit(f, PTX_OP_SELP, NOM, B32T, ptx_r(size), ptx_imm(16), ptx_imm(0), ptx_r(in));
        for (int w = 0; w < pools; w++) {
            ptx_reg src = r64(f);
            ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(src), ptx_r(base[w]), ptx_r(o2));
            ptx_ins *cp = ptx_emit(f, PTX_OP_CP_ASYNC, M3(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL), PTX_NOTYPES,
                                   ptx_addr(k % 2 ? d1 : d0, (int64_t)k * rpp * 128 + (w ? v_off : 0)),
                                   ptx_addr(src, 0), ptx_imm(16), ptx_r(size));
            if (lane_ok.id)
                ptx_guard(cp, lane_ok, false);
        }
    }
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(row), ptx_r(row), ptx_imm(step * rpp));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(d0), ptx_r(d0), ptx_imm(step * rpp * 128));
    if (rpp == 4)
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(d1), ptx_r(d1), ptx_imm(step * rpp * 128));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
    attn_bra(f, top, attn_setp(f, PTX_M_LT, U32T, ptx_r(it), ptx_imm(bn / rpp / step)), false);
}
