/* kit attn: flash-attention pieces on accumulator fragments (gen/kit/attn.h). */
#include "gen/kit/attn.h"

#include <math.h>

#include "gen/kit/build.h"
#include "gen/kit/layout.h"

static ptx_reg iop(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b) { return kit_reg(f, kit_iop(f, op, a, b)); }

static ptx_reg setp(ptx_fn *f, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_SETP, M1(cmp), S32T, ptx_r(p), a, b);
    return p;
}

kit_attn_blocks kit_attn_block_range(ptx_fn *f, ptx_reg p0, ptx_reg plast, ptx_reg sq, ptx_reg sk, int64_t wl,
                                     int64_t wr, int bn)
{
    kit_attn_blocks r = {{0}, {0}, {0}, {0}};
    r.off = iop(f, PTX_OP_SUB, ptx_r(sk), ptx_r(sq)); /* Sk_b - Sq_b */
    ptx_reg kend = sk;
    if (wr >= 0) {
        ptx_reg last = iop(f, PTX_OP_MIN, ptx_r(iop(f, PTX_OP_ADD, ptx_r(plast), ptx_imm(1))), ptx_r(sq));
        ptx_reg lim = iop(f, PTX_OP_ADD, ptx_r(iop(f, PTX_OP_ADD, ptx_r(last), ptx_r(r.off))), ptx_imm(wr));
        kend = iop(f, PTX_OP_MAX, ptx_r(iop(f, PTX_OP_MIN, ptx_r(kend), ptx_r(lim))), ptx_imm(0));
    }
    r.n_hi = iop(f, PTX_OP_DIV, ptx_r(iop(f, PTX_OP_ADD, ptx_r(kend), ptx_imm(bn - 1))), ptx_imm(bn));
    r.nblk = r.n_hi;
    if (wl >= 0) {
        ptx_reg first = iop(f, PTX_OP_SUB, ptx_r(iop(f, PTX_OP_ADD, ptx_r(p0), ptx_r(r.off))), ptx_imm(wl));
        first = iop(f, PTX_OP_MAX, ptx_r(first), ptx_imm(0));
        r.n_lo = iop(f, PTX_OP_DIV, ptx_r(first), ptx_imm(bn));
        r.nblk = iop(f, PTX_OP_SUB, ptx_r(r.n_hi), ptx_r(r.n_lo));
    }
    return r;
}

void kit_attn_softcap(ptx_fn *f, ptx_reg *s, int n, float mul)
{
    for (int i = 0; i < n; i++) {
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(s[i]), ptx_r(s[i]), ptx_f32(mul));
        ptx_emit(f, PTX_OP_TANH, M1(PTX_M_APPROX), F32T, ptx_r(s[i]), ptx_r(s[i]));
    }
}

static ptx_reg por(ptx_fn *f, ptx_reg a, ptx_reg b)
{
    ptx_reg o = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_OR, NOM, PREDT, ptx_r(o), ptx_r(a), ptx_r(b));
    return o;
}

void kit_attn_mask_block(ptx_fn *f, const kit_attn_mask *mk, const kit_frag *sf, ptx_reg *s, int nr, int ni,
                         ptx_reg n0)
{
    ptx_reg none = {0};
    ptx_reg p = setp(f, PTX_M_GT, ptx_r(n0), ptx_r(mk->skbn));
    if (mk->rlim.id)
        p = por(f, p, setp(f, PTX_M_GT, ptx_r(n0), ptx_r(mk->rlim)));
    if (mk->llim.id)
        p = por(f, p, setp(f, PTX_M_LT, ptx_r(n0), ptx_r(mk->llim)));
    int skip = ptx_label_new(f);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(skip)), p, true);
    ptx_reg diag = mk->per_row ? none : iop(f, PTX_OP_SUB, ptx_r(mk->rowdiag), ptx_r(n0));
    ptx_reg kl = iop(f, PTX_OP_SUB, ptx_r(mk->skc), ptx_r(n0)); /* keys in bounds from the lane's column 0 */
    for (int r = 0; r < nr; r++) {
        ptx_reg hi = kl, lo = none, dr = diag;
        int ro = mk->per_row ? 0 : kit_attn_row_off(r);
        if (mk->per_row && (mk->wr >= 0 || mk->wl >= 0))
            dr = iop(f, PTX_OP_SUB, ptx_r(mk->rdiag[r]), ptx_r(n0));
        if (mk->wr >= 0)
            hi = iop(f, PTX_OP_MIN, ptx_r(hi), ptx_r(iop(f, PTX_OP_ADD, ptx_r(dr), ptx_imm(ro + mk->wr + 1))));
        if (mk->wl >= 0)
            lo = iop(f, PTX_OP_ADD, ptx_r(dr), ptx_imm(ro - mk->wl));
        for (int b = 0; b < ni; b++)
            for (int q = 0; q < 2; q++) {
                int i = kit_attn_creg(ni, r, b, q);
                int col = sf->col[i];
                ptx_reg ok = setp(f, PTX_M_GT, ptx_r(hi), ptx_imm(col));
                if (lo.id) {
                    ptx_reg ok2 = setp(f, PTX_M_LE, ptx_r(lo), ptx_imm(col));
                    ptx_reg o2 = ptx_reg_new(f, PTX_T_PRED);
                    ptx_emit(f, PTX_OP_AND, NOM, PREDT, ptx_r(o2), ptx_r(ok), ptx_r(ok2));
                    ok = o2;
                }
                ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(s[i]), ptx_r(s[i]), ptx_f32(-INFINITY), ptx_r(ok));
            }
    }
    ptx_label_place(f, skip);
}

/* Row r's online-softmax update: p[creg] the exponentials; returns alpha. */
static ptx_opd softmax_row(ptx_fn *f, kit_softmax *st, int r, int ni, const ptx_reg *s, ptx_reg *p)
{
    ptx_opd v[64] = {{0}}, pv[64];
    if (ni < 1 || ni > 32)
        return ptx_imm(0);
    for (int b = 0; b < ni; b++)
        for (int q = 0; q < 2; q++)
            v[2 * b + q] = ptx_r(s[kit_attn_creg(ni, r, b, q)]);
    ptx_opd alpha = kit_softmax_update_fma(f, &st[r], v, 2 * ni, 4, pv);
    for (int b = 0; b < ni; b++)
        for (int q = 0; q < 2; q++)
            p[kit_attn_creg(ni, r, b, q)] = pv[2 * b + q].u.reg;
    return alpha;
}

static void rescale_row(ptx_fn *f, int r, int no, const ptx_reg *o, ptx_opd alpha)
{
    for (int b = 0; b < no; b++)
        for (int q = 0; q < 2; q++) {
            ptx_reg x = o[kit_attn_creg(no, r, b, q)];
            ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(x), ptx_r(x), alpha);
        }
}

static bool ni_ok(ptx_fn *f, int ni)
{
    if (ni >= 1 && ni <= 32)
        return true;
    pt_errf(&f->mod->err, PT_EINVAL, "attention softmax: %d n8 atoms a row (at most 32)", ni);
    return false;
}

void kit_attn_softmax(ptx_fn *f, kit_softmax *st, int nr, int ni, const ptx_reg *s, ptx_reg *p, int no,
                      const ptx_reg *o)
{
    if (!ni_ok(f, ni))
        return;
    for (int r = 0; r < nr; r++)
        rescale_row(f, r, no, o, softmax_row(f, st, r, ni, s, p));
}

void kit_attn_softmax_rows(ptx_fn *f, kit_softmax *st, int nr, int ni, const ptx_reg *s, ptx_reg *p, ptx_opd *alpha)
{
    if (!ni_ok(f, ni))
        return;
    for (int r = 0; r < nr; r++)
        alpha[r] = softmax_row(f, st, r, ni, s, p);
}

void kit_attn_rescale(ptx_fn *f, int nr, int no, const ptx_reg *o, const ptx_opd *alpha)
{
    for (int r = 0; r < nr; r++)
        rescale_row(f, r, no, o, alpha[r]);
}

void kit_attn_finalize(ptx_fn *f, const kit_softmax *st, int nr, ptx_reg *lrow, ptx_reg *inv)
{
    kit_redop sum = KIT_RED_SUM;
    for (int r = 0; r < nr; r++) {
        lrow[r] = st[r].s;
        kit_red_lanes(f, &sum, &lrow[r], 1, 4);
        /* 1 / l, 0 when l = 0 (no visible key) */
        ptx_reg rc = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_RCP, M1(PTX_M_RN), F32T, ptx_r(rc), ptx_r(lrow[r]));
        ptx_reg z = ptx_reg_new(f, PTX_T_PRED);
        ptx_emit(f, PTX_OP_SETP, M1(PTX_M_GT), F32T, ptx_r(z), ptx_r(lrow[r]), ptx_f32(0.0f));
        inv[r] = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_SELP, NOM, F32T, ptx_r(inv[r]), ptx_r(rc), ptx_f32(0.0f), ptx_r(z));
    }
}

ptx_reg kit_attn_lse(ptx_fn *f, const kit_softmax *st, ptx_reg l, float k)
{
    ptx_reg lg = ptx_reg_new(f, PTX_T_F32), v = ptx_reg_new(f, PTX_T_F32);
    ptx_emit(f, PTX_OP_LG2, M1(PTX_M_APPROX), F32T, ptx_r(lg), ptx_r(l));
    if (st->off != 0) /* l is 2^off times the row sum */
        ptx_emit(f, PTX_OP_SUB, NOM, F32T, ptx_r(lg), ptx_r(lg), ptx_f32(st->off));
    ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(lg), ptx_r(lg), ptx_f32(0.693147180559945309f));
    ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(v), ptx_r(st->m), ptx_f32(k), ptx_r(lg));
    return v;
}

void kit_wgmma_rs(ptx_fn *f, const kit_atom *at, ptx_opd d, const ptx_reg *a, ptx_reg desc_b, ptx_opd scale_d,
                  bool trans_b)
{
    if (at->es == 1 && !trans_b) { /* 8-bit: no transpose operand (B K-major only) */
        ptx_opd o[6] = {d, ptx_vecr(f, 4, a), ptx_r(desc_b), scale_d, ptx_imm(1), ptx_imm(1)};
        ptx_emit_shape_n(f, PTX_OP_WGMMA_RS, M2(PTX_M_SYNC, PTX_M_ALIGNED), ptx_mnk(64, at->n, at->k),
                         PTX_TYPES(at->acc, at->ab, at->ab), 6, o);
        return;
    }
    if (at->es != 2) {
        pt_errf(&f->mod->err, PT_EINVAL, "%s: the RS form here takes 16-bit A, or 8-bit A with B K-major", at->name);
        return;
    }
    ptx_opd o[7] = {d, ptx_vecr(f, 4, a), ptx_r(desc_b), scale_d, ptx_imm(1), ptx_imm(1), ptx_imm(trans_b ? 1 : 0)};
    ptx_emit_shape_n(f, PTX_OP_WGMMA_RS, M2(PTX_M_SYNC, PTX_M_ALIGNED), ptx_mnk(64, at->n, at->k),
                     PTX_TYPES(at->acc, at->ab, at->ab), 7, o);
}

/* desc + units (16-byte units of the start address field), a fresh b64. */
static ptx_reg desc_plus(ptx_fn *f, ptx_reg desc, int64_t units)
{
    if (!units)
        return desc;
    ptx_reg r = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(r), ptx_r(desc), ptx_imm(units));
    return r;
}

void kit_attn_wg_qk(ptx_fn *f, const kit_atom *ws, ptx_reg *s, ptx_reg q_addr, int64_t q_sub, int q_span,
                    ptx_reg k_addr, int64_t k_sub, int k_span, int row_bytes)
{
    /* K-major, rows of one swizzle span W (128 or 64 bytes), 8-row groups
     * 8 W apart, +32 bytes a k step; the next W bytes of the row a sub-tile on */
    ptx_reg dq = kit_wgmma_desc_emit(f, q_addr, 16, (uint32_t)(8 * q_span), q_span);
    ptx_reg dk = kit_wgmma_desc_emit(f, k_addr, 16, (uint32_t)(8 * k_span), k_span);
    ptx_opd sv = ptx_vecr(f, ws->c.regs, s);
    ptx_emit0(f, PTX_OP_WGMMA_FENCE, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
    for (int ks = 0; ks < row_bytes / 32; ks++) {
        int qs = q_span / 32, kq = k_span / 32;
        ptx_reg a = desc_plus(f, dq, (ks / qs) * q_sub / 16 + 2 * (ks % qs));
        ptx_reg b = desc_plus(f, dk, (ks / kq) * k_sub / 16 + 2 * (ks % kq));
        kit_wgmma_ss(f, ws, sv, a, b, ptx_imm(ks ? 1 : 0), false, false);
    }
    ptx_emit0(f, PTX_OP_WGMMA_COMMIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
}

void kit_attn_p_to_a(ptx_fn *f, const kit_frag *pf, const kit_atom *mma, int bn, ptx_reg (*a)[4])
{
    for (int kb = 0; kb < bn / 16; kb++)
        kit_frag_to_a(f, pf, mma, 0, kb, a[kb]);
}

void kit_attn_wg_pv_issue(ptx_fn *f, const kit_atom *wo, ptx_reg *o, ptx_reg (*a)[4], ptx_reg v_addr,
                          int64_t box_bytes, int bn)
{
    /* MN-major 128B: 64-column boxes box_bytes apart (LBO), 8-k-row groups
     * 1024 apart (SBO), +2048 bytes (16 rows of 128) a k16 step */
    ptx_reg dv = kit_wgmma_desc_emit(f, v_addr, (uint32_t)box_bytes, 1024, 128);
    ptx_opd ov = ptx_vecr(f, wo->c.regs, o);
    ptx_emit0(f, PTX_OP_WGMMA_FENCE, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
    for (int kb = 0; kb < bn / 16; kb++)
        kit_wgmma_rs(f, wo, ov, a[kb], desc_plus(f, dv, 128 * kb), ptx_imm(1), true);
    ptx_emit0(f, PTX_OP_WGMMA_COMMIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
}

void kit_attn_wg_pv(ptx_fn *f, const kit_atom *wo, ptx_reg *o, const kit_frag *pf, const kit_atom *mma,
                    ptx_reg v_addr, int64_t box_bytes, int bn)
{
    ptx_reg a[64][4];
    if (bn / 16 > 64) {
        pt_errf(&f->mod->err, PT_EINVAL, "attention P V: bn=%d (at most 1024)", bn);
        return;
    }
    kit_attn_p_to_a(f, pf, mma, bn, a);
    kit_attn_wg_pv_issue(f, wo, o, a, v_addr, box_bytes, bn);
}

void kit_attn_zero_rows(ptx_fn *f, ptx_reg base, int boxes, int64_t box_bytes, int rows, ptx_reg from, ptx_reg tid,
                        int nthreads)
{
    int64_t total = (int64_t)boxes * rows * 8; /* 16-byte chunks */
    ptx_reg z[4];
    for (int q = 0; q < 4; q++)
        z[q] = kit_reg(f, ptx_imm(0));
    for (int64_t k = 0; k * nthreads < total; k++) {
        ptx_reg L = iop(f, PTX_OP_ADD, ptx_r(tid), ptx_imm(k * nthreads));
        ptx_reg box = iop(f, PTX_OP_DIV, ptx_r(L), ptx_imm((int64_t)rows * 8));
        ptx_reg rem = iop(f, PTX_OP_REM, ptx_r(L), ptx_imm((int64_t)rows * 8));
        ptx_reg row = iop(f, PTX_OP_SHR, ptx_r(rem), ptx_imm(3));
        ptx_reg ok = setp(f, PTX_M_GE, ptx_r(row), ptx_r(from));
        if ((k + 1) * nthreads > total) {
            ptx_reg in = setp(f, PTX_M_LT, ptx_r(L), ptx_imm(total));
            ptx_reg both = ptx_reg_new(f, PTX_T_PRED);
            ptx_emit(f, PTX_OP_AND, NOM, PREDT, ptx_r(both), ptx_r(ok), ptx_r(in));
            ok = both;
        }
        ptx_reg a = iop(f, PTX_OP_ADD, ptx_r(base), ptx_r(iop(f, PTX_OP_MUL, ptx_r(box), ptx_imm(box_bytes))));
        a = iop(f, PTX_OP_ADD, ptx_r(a), ptx_r(iop(f, PTX_OP_SHL, ptx_r(rem), ptx_imm(4))));
        ptx_guard(ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V4), B32T, ptx_addr(a, 0), ptx_vecr(f, 4, z)), ok,
                  false);
    }
}

void kit_attn_p_to_a8(ptx_fn *f, const kit_frag *pf, int bn, ptx_reg (*a)[4])
{
    int ni = bn / 8;
    for (int kb = 0; kb < bn / 32; kb++)
        for (int q = 0; q < 4; q++) {
            /* register q: row q & 1, atoms 4 kb + 2 (q >> 1) and the next,
             * each a cvt pair (the first source is the high byte) */
            int r = q & 1, at = 4 * kb + 2 * (q >> 1);
            ptx_reg h[2];
            for (int x = 0; x < 2; x++) {
                h[x] = ptx_reg_new(f, PTX_T_B16);
                ptx_emit(f, PTX_OP_CVT, M2(PTX_M_RN, PTX_M_SATFINITE), PTX_TYPES(PTX_T_E4M3X2, PTX_T_F32), ptx_r(h[x]),
                         ptx_r(pf->r[kit_attn_creg(ni, r, at + x, 1)]), ptx_r(pf->r[kit_attn_creg(ni, r, at + x, 0)]));
            }
            a[kb][q] = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(a[kb][q]), ptx_vecr(f, 2, h));
        }
}

void kit_attn_wg_pv8_issue(ptx_fn *f, const kit_atom *wo, ptx_reg *o, ptx_reg (*a)[4], ptx_reg vt_addr,
                           int64_t sub_bytes, int bn)
{
    /* K-major 128B: rows of 128 keys, 8-row groups 1024 apart, +32 bytes a
     * k32 step, the next 128 keys sub_bytes on */
    ptx_reg dv = kit_wgmma_desc_emit(f, vt_addr, 16, 1024, 128);
    ptx_opd ov = ptx_vecr(f, wo->c.regs, o);
    ptx_emit0(f, PTX_OP_WGMMA_FENCE, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
    for (int kb = 0; kb < bn / 32; kb++)
        kit_wgmma_rs(f, wo, ov, a[kb], desc_plus(f, dv, (kb / 4) * sub_bytes / 16 + 2 * (kb % 4)), ptx_imm(1), false);
    ptx_emit0(f, PTX_OP_WGMMA_COMMIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
}

/* 4 x 4 bytes: out[b] byte r = w[r] byte b (prmt.b32, 8 of them). */
static void transpose4(ptx_fn *f, const ptx_reg w[4], ptx_reg out[4])
{
    ptx_reg t[4];
    static const int64_t lo = 0x5140, hi = 0x7362;
    for (int x = 0; x < 4; x++) {
        t[x] = ptx_reg_new(f, PTX_T_B32);
        ptx_emit(f, PTX_OP_PRMT, NOM, B32T, ptx_r(t[x]), ptx_r(w[(x / 2) * 2]), ptx_r(w[(x / 2) * 2 + 1]),
                 ptx_imm(x % 2 ? hi : lo));
    }
    /* t0 = w0.b0 w1.b0 w0.b1 w1.b1, t1 = the same of bytes 2, 3; t2, t3 of w2, w3 */
    for (int b = 0; b < 4; b++) {
        out[b] = ptx_reg_new(f, PTX_T_B32);
        ptx_emit(f, PTX_OP_PRMT, NOM, B32T, ptx_r(out[b]), ptx_r(t[b / 2]), ptx_r(t[2 + b / 2]),
                 ptx_imm(b % 2 ? 0x7632 : 0x5410));
    }
}

/* One unit's loads (rows key0, +1, +8, +9 of the raw stage at rb, the
 * swizzled chunk offset sw0 of row key0), transposes and stores (V^T row
 * base st[i] + soff for column i of the unit's 8). Raw rows of span bytes:
 * 128 (128B swizzle: row key0 + 1's chunk is key0's ^ 1, rows 8 on the
 * same) or 64 (64B swizzle, chunk ^ (row / 2) % 4: all four rows share
 * key0's chunk, rows 64 and 512 bytes apart). */
static void v8_unit(ptx_fn *f, ptx_reg rb, ptx_reg sw0, const ptx_reg in[4], const ptx_reg st[8], ptx_reg soff,
                    int span)
{
    ptx_reg a0 = iop(f, PTX_OP_ADD, ptx_r(rb), ptx_r(sw0));
    ptx_reg a1 = span == 128 ? iop(f, PTX_OP_ADD, ptx_r(rb), ptx_r(iop(f, PTX_OP_XOR, ptx_r(sw0), ptx_imm(16)))) : a0;
    ptx_reg w[4][2];
    for (int r = 0; r < 4; r++) {
        /* keys at or past lim read as 0 (past the sequence: another's, or a NaN) */
        for (int x = 0; x < 2; x++) {
            w[r][x] = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(w[r][x]), ptx_imm(0));
        }
        ptx_guard(ptx_emit(f, PTX_OP_LD, M2(PTX_M_SHARED, PTX_M_V2), B32T, ptx_vecr(f, 2, w[r]),
                           ptx_addr(r % 2 ? a1 : a0, (r >= 2 ? 8 * span : 0) + (r % 2 ? span : 0))),
                  in[r], false);
    }
    ptx_reg out[8];
    for (int x = 0; x < 2; x++) {
        ptx_reg col[4] = {w[0][x], w[1][x], w[2][x], w[3][x]};
        transpose4(f, col, out + 4 * x);
    }
    for (int i = 0; i < 8; i++) {
        ptx_reg a = soff.id ? iop(f, PTX_OP_ADD, ptx_r(st[i]), ptx_r(soff)) : st[i];
        ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), B32T, ptx_addr(a, 128 * i), ptx_r(out[i]));
    }
}

/* The key quad kq's part of a unit: the guards of its rows key0, +1, +8,
 * +9 (< lim), rk = raw + key0 128, t2 = 2 t, and the V^T row bases st[i]
 * (sub-tile kq / 32, chunk ((kq / 4) % 8) ^ i, byte 4 t; c8's rows too
 * when c8 is given). */
static void v8_quad(ptx_fn *f, ptx_reg kq, ptx_reg c8, ptx_reg raw, ptx_reg vt, int64_t sub_bytes, ptx_reg lim,
                    ptx_reg in[4], ptx_reg st[8], ptx_reg *rk, ptx_reg *t2, int span)
{
    ptx_reg q4 = iop(f, PTX_OP_SHR, ptx_r(kq), ptx_imm(2)), t = iop(f, PTX_OP_AND, ptx_r(kq), ptx_imm(3));
    *t2 = iop(f, PTX_OP_SHL, ptx_r(t), ptx_imm(1));
    ptx_reg key0 = iop(f, PTX_OP_ADD, ptx_r(iop(f, PTX_OP_SHL, ptx_r(q4), ptx_imm(4))), ptx_r(*t2));
    static const int dk[4] = {0, 1, 8, 9};
    for (int r = 0; r < 4; r++)
        in[r] = setp(f, PTX_M_LT, ptx_r(iop(f, PTX_OP_ADD, ptx_r(key0), ptx_imm(dk[r]))), ptx_r(lim));
    *rk = iop(f, PTX_OP_ADD, ptx_r(raw), ptx_r(iop(f, PTX_OP_SHL, ptx_r(key0), ptx_imm(span == 128 ? 7 : 6))));
    ptx_reg sub = iop(f, PTX_OP_MUL, ptx_r(iop(f, PTX_OP_SHR, ptx_r(kq), ptx_imm(5))), ptx_imm(sub_bytes));
    ptx_reg sb = iop(f, PTX_OP_ADD, ptx_r(vt), ptx_r(sub));
    if (c8.id)
        sb = iop(f, PTX_OP_ADD, ptx_r(sb), ptx_r(iop(f, PTX_OP_SHL, ptx_r(c8), ptx_imm(10))));
    sb = iop(f, PTX_OP_ADD, ptx_r(sb), ptx_r(iop(f, PTX_OP_SHL, ptx_r(t), ptx_imm(2))));
    ptx_reg chx = iop(f, PTX_OP_SHL, ptx_r(iop(f, PTX_OP_AND, ptx_r(q4), ptx_imm(7))), ptx_imm(4));
    for (int i = 0; i < 8; i++)
        st[i] = iop(f, PTX_OP_ADD, ptx_r(sb), ptx_r(i ? iop(f, PTX_OP_XOR, ptx_r(chx), ptx_imm(16 * i)) : chx));
}

void kit_attn_v8_transpose(ptx_fn *f, ptx_reg raw, int64_t box_bytes, ptx_reg vt, int64_t sub_bytes, int bn, int dv,
                           ptx_reg lim, ptx_reg tid, int nthreads)
{
    kit_attn_v8_transpose_span(f, raw, 128, box_bytes, vt, sub_bytes, bn, dv, lim, tid, nthreads);
}

void kit_attn_v8_transpose_span(ptx_fn *f, ptx_reg raw, int span, int64_t box_bytes, ptx_reg vt, int64_t sub_bytes,
                                int bn, int dv, ptx_reg lim, ptx_reg tid, int nthreads)
{
    /* unit (kq, c8): key quad kq (fastest: a warp's stores fill distinct
     * banks), 8 columns c8; kq = key0 / 16 * 4 + t, key0 = 16 (kq / 4) + 2 t.
     * When nthreads is a multiple of the quads (every bn but 160 at 96
     * threads), a thread keeps its quad: its rows, their guards and the
     * V^T row bases are computed once, the loop steps c8 */
    int64_t nkq = bn / 4, ncol = dv / 8;
    bool fixed = nthreads % nkq == 0;
    ptx_reg u = ptx_reg_new(f, PTX_T_B32);
    ptx_reg kq = {0}, c8 = {0};
    if (fixed) {
        kq = iop(f, PTX_OP_REM, ptx_r(tid), ptx_imm(nkq));
        ptx_emit(f, PTX_OP_DIV, NOM, U32T, ptx_r(u), ptx_r(tid), ptx_imm(nkq)); /* c8 */
    } else
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(u), ptx_r(tid));
    ptx_reg in[4], st[8], rk = {0}, t2 = {0};
    if (fixed) /* the quad's part, once */
        v8_quad(f, kq, (ptx_reg){0}, raw, vt, sub_bytes, lim, in, st, &rk, &t2, span);
    int top = ptx_label_new(f), end = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(end)),
              setp(f, PTX_M_GE, ptx_r(u), ptx_imm(fixed ? ncol : nkq * ncol)), false);
    if (fixed) {
        c8 = u;
    } else { /* the unit's quad and columns, every unit */
        kq = iop(f, PTX_OP_REM, ptx_r(u), ptx_imm(nkq));
        c8 = iop(f, PTX_OP_DIV, ptx_r(u), ptx_imm(nkq));
        v8_quad(f, kq, c8, raw, vt, sub_bytes, lim, in, st, &rk, &t2, span);
    }
    /* the raw rows: box c8 / 16, chunk (c8 / 2) % 8 ^ row % 8, half c8 % 2 (64-byte rows: box
     * c8 / 8, chunk (c8 / 2) % 4 ^ (row / 2) % 4, key0 / 2 % 4 = t) */
    ptx_reg box = iop(f, PTX_OP_SHR, ptx_r(c8), ptx_imm(span == 128 ? 4 : 3));
    ptx_reg ch16 = iop(f, PTX_OP_AND, ptx_r(iop(f, PTX_OP_SHR, ptx_r(c8), ptx_imm(1))), ptx_imm(span / 16 - 1));
    ptx_reg rb = iop(f, PTX_OP_ADD, ptx_r(rk), ptx_r(iop(f, PTX_OP_MUL, ptx_r(box), ptx_imm(box_bytes))));
    rb = iop(f, PTX_OP_ADD, ptx_r(rb), ptx_r(iop(f, PTX_OP_SHL, ptx_r(iop(f, PTX_OP_AND, ptx_r(c8), ptx_imm(1))),
                                                   ptx_imm(3))));
    ptx_reg rx = span == 128 ? t2 : iop(f, PTX_OP_SHR, ptx_r(t2), ptx_imm(1));
    ptx_reg sw0 = iop(f, PTX_OP_SHL, ptx_r(iop(f, PTX_OP_XOR, ptx_r(ch16), ptx_r(rx))), ptx_imm(4));
    /* V^T row n = 8 c8 + i of sub-tile kq / 32, chunk ((kq / 4) % 8) ^ i, byte 4 t */
    v8_unit(f, rb, sw0, in, st, fixed ? iop(f, PTX_OP_SHL, ptx_r(c8), ptx_imm(10)) : (ptx_reg){0}, span);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(u), ptx_r(u), ptx_imm(fixed ? nthreads / nkq : nthreads));
    ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(top));
    ptx_label_place(f, end);
}
