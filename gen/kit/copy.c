/* kit copy: views, global -> shared tile copies and ldmatrix addressing
 * (gen/kit/copy.h). */
#include <assert.h>
#include <string.h>

#include "gen/kit/copy.h"

static int ilog2(int64_t v)
{
    int r = 0;
    while ((INT64_C(1) << r) < v)
        r++;
    return r;
}

static ptx_reg pred_new(ptx_fn *f) { return ptx_reg_new(f, PTX_T_PRED); }

static ptx_reg setp_s(ptx_fn *f, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = pred_new(f);
    ptx_emit(f, PTX_OP_SETP, PTX_MODS(cmp), PTX_T1(PTX_T_S32), ptx_r(p), a, b);
    return p;
}

static ptx_reg pand(ptx_fn *f, ptx_reg a, ptx_reg b)
{
    if (!a.id)
        return b;
    if (!b.id)
        return a;
    ptx_reg d = pred_new(f);
    ptx_emit(f, PTX_OP_AND, PTX_NOMODS, PTX_T1(PTX_T_PRED), ptx_r(d), ptx_r(a), ptx_r(b));
    return d;
}

/* p64 + a * b bytes (a: u32 register or immediate). */
static ptx_reg addr64(ptx_fn *f, ptx_reg p64, ptx_opd a, int64_t b)
{
    if (a.kind == PTX_O_IMM) {
        if (a.u.imm == 0 || b == 0)
            return p64;
        ptx_reg d = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p64), ptx_imm(a.u.imm * b));
        return d;
    }
    ptx_reg off = ptx_reg_new(f, PTX_T_B64);
    if (b >= 0 && b <= 0xffffffffll) {
        ptx_emit(f, PTX_OP_MUL, PTX_MODS(PTX_M_WIDE), PTX_T1(PTX_T_U32), ptx_r(off), a, ptx_imm(b));
    } else {
        ptx_reg w = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_CVT, PTX_NOMODS, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), a);
        ptx_emit(f, PTX_OP_MUL, PTX_MODS(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(off), ptx_r(w), ptx_imm(b));
    }
    ptx_reg d = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p64), ptx_r(off));
    return d;
}

/* Bytes of a piece in bounds from the elements left (s32): clamp(left, 0,
 * cw / es) * es. */
static ptx_opd clamp_size(ptx_fn *f, ptx_opd left, int cw, int es)
{
    ptx_opd t = kit_iop(f, PTX_OP_MAX, left, ptx_imm(0));
    t = kit_iop(f, PTX_OP_MIN, t, ptx_imm(cw / es));
    return kit_iop(f, PTX_OP_SHL, t, ptx_imm(ilog2(es)));
}

/* ---- global -> shared ----
 * The tile is cut into pieces of cw bytes and piece i goes to thread
 * i % T: with np <= T pieces per row, thread t takes row t / np, piece
 * column t % np, and its later pieces lie T / np rows further; otherwise
 * row 0, piece column t, and so on along the row. Piece j of a thread is
 * at (row0 + rowimm[j], (pc0 + pcimm[j]) * cw), so its source is one
 * pointer plus an immediate. Pieces past the bounds are zero-filled
 * (cp.async src-size 0, or short at a ragged column edge), so the whole
 * tile is always written. */
void kit_g2s_init(ptx_fn *f, kit_g2s *c, const kit_layout *tile, const kit_view *v, int T, ptx_reg tid,
                  int cw, int64_t drow, int64_t dcol)
{
    pt_arena *ar = f->mod->arena;
    memset(c, 0, sizeof *c);
    c->f = f;
    c->tile = tile;
    c->v = *v;
    c->cw = cw;
    c->drow = drow;
    c->dcol = dcol;
    int R = kit_tile_rows(tile), P = kit_tile_row_bytes(tile), es = v->es;
    int np = P / cw, pt = R * np, epc = cw / es;
    /* np <= T and not a power of two (e.g. 192-byte rows of 16-byte pieces):
     * T / np rows a pass, threads t >= (T / np) np idle */
    bool npow2 = (np & (np - 1)) == 0, ragged = np <= T && !npow2;
    int n = c->n = ragged ? (R + T / np - 1) / (T / np) : (pt + T - 1) / T;
    c->rowimm = pt_arena_alloc(ar, (size_t)n * sizeof(int));
    c->pcimm = pt_arena_alloc(ar, (size_t)n * sizeof(int));
    c->soff = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    c->simm = pt_arena_alloc(ar, (size_t)n * sizeof(int));
    c->guard = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    c->rowok = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    c->csize = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    ptx_opd row0, pc0;
    if (np <= T) {
        if (ragged) {
            pc0 = kit_iop(f, PTX_OP_REM, ptx_r(tid), ptx_imm(np));
            row0 = kit_iop(f, PTX_OP_DIV, ptx_r(tid), ptx_imm(np));
        } else {
            pc0 = np == 1 ? ptx_imm(0) : kit_iop(f, PTX_OP_AND, ptx_r(tid), ptx_imm(np - 1));
            row0 = kit_iop(f, PTX_OP_SHR, ptx_r(tid), ptx_imm(ilog2(np)));
        }
        for (int j = 0; j < n; j++) {
            c->rowimm[j] = j * (T / np);
            c->pcimm[j] = 0;
            int rows = R - c->rowimm[j] < T / np ? R - c->rowimm[j] : T / np;
            if (rows < T / np || (ragged && T % np)) /* only part of the threads have this piece */
                c->guard[j] = setp_s(f, PTX_M_LT, row0, ptx_imm(rows));
        }
    } else {
        pc0 = ptx_r(tid);
        row0 = ptx_imm(0);
        for (int j = 0; j < n; j++) {
            c->rowimm[j] = (j * T) / np;
            c->pcimm[j] = (j * T) % np;
        }
    }
    /* shared offsets: piece j shares piece k's register when the swizzle
     * moves it by a constant (kit_shift_ok) */
    ptx_opd byte0 = kit_iop(f, PTX_OP_MUL, pc0, ptx_imm(cw));
    for (int j = 0; j < n; j++) {
        int rep = -1;
        for (int k = 0; k < j && rep < 0; k++)
            if (kit_shift_ok(tile, c->rowimm[j] - c->rowimm[k], (int64_t)(c->pcimm[j] - c->pcimm[k]) * cw))
                rep = k;
        if (rep >= 0) {
            c->soff[j] = c->soff[rep];
            c->simm[j] = c->simm[rep] + (int)((c->rowimm[j] - c->rowimm[rep]) * kit_tile_pitch(tile) +
                                              (c->pcimm[j] - c->pcimm[rep]) * cw);
            continue;
        }
        ptx_opd co[2] = {kit_iop(f, PTX_OP_ADD, row0, ptx_imm(c->rowimm[j])),
                         kit_iop(f, PTX_OP_ADD, byte0, ptx_imm((int64_t)c->pcimm[j] * cw))};
        c->soff[j] = kit_reg(f, kit_emit(f, tile, co, 0));
        c->simm[j] = 0;
    }
    /* source of piece 0 */
    ptx_reg gp = addr64(f, v->base, row0, v->ld_bytes);
    gp = addr64(f, gp, pc0, cw);
    c->gp = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B64), ptx_r(c->gp), ptx_r(gp));
    /* bounds from this thread's row 0 and column 0 */
    c->radv = v->row_edge && drow != 0;
    c->cadv = v->col_edge && dcol != 0;
    bool async = cw >= 4;
    if (v->row_edge) {
        ptx_opd left = kit_iop(f, PTX_OP_SUB, v->rows, row0);
        if (c->radv) {
            c->rrem = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(c->rrem), left);
        } else {
            for (int j = 0; j < n; j++)
                c->rowok[j] = setp_s(f, PTX_M_GT, ptx_r(kit_reg(f, left)), ptx_imm(c->rowimm[j]));
        }
    }
    if (v->col_edge) {
        ptx_opd left = kit_iop(f, PTX_OP_SUB, v->cols, kit_iop(f, PTX_OP_MUL, pc0, ptx_imm(epc)));
        if (c->cadv) {
            c->crem = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(c->crem), left);
        } else if (async) {
            for (int j = 0; j < n; j++) {
                int k;
                for (k = 0; k < j && c->pcimm[k] != c->pcimm[j]; k++)
                    ;
                c->csize[j] = k < j ? c->csize[k]
                                    : kit_reg(f, clamp_size(f, kit_iop(f, PTX_OP_SUB, left,
                                                                       ptx_imm((int64_t)c->pcimm[j] * epc)),
                                                            cw, es));
            }
        } else {
            c->crem = kit_reg(f, left);
        }
    }
}

void kit_g2s_issue(kit_g2s *c, ptx_reg dst, int64_t dimm, ptx_reg pred)
{
    ptx_fn *f = c->f;
    int cw = c->cw, es = c->v.es, epc = cw / es;
    bool async = cw >= 4;
    ptx_reg dst_of[64] = {{0}}, dst_key[64] = {{0}};
    int ndst = 0;
    /* advancing column bound: sizes per distinct piece column */
    int pcs[64];
    ptx_opd pcsz[64];
    int npcs = 0;
    for (int j = 0; j < c->n; j++) {
        ptx_reg d = {0};
        for (int k = 0; k < ndst; k++)
            if (dst_key[k].id == c->soff[j].id)
                d = dst_of[k];
        if (!d.id) {
            d = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(dst), ptx_r(c->soff[j])));
            if (ndst < 64) {
                dst_key[ndst] = c->soff[j];
                dst_of[ndst++] = d;
            }
        }
        int64_t gimm = (int64_t)c->rowimm[j] * c->v.ld_bytes + (int64_t)c->pcimm[j] * cw;
        ptx_reg src = c->gp;
        if (gimm > 0x7fffffffll) {
            src = addr64(f, c->gp, ptx_imm(gimm), 1);
            gimm = 0;
        }
        /* in bounds: a size (cp.async) or a predicate (element loads) */
        ptx_opd size = ptx_imm(cw);
        ptx_reg ok = {0};
        if (c->v.col_edge) {
            if (c->cadv || !async) {
                int k;
                for (k = 0; k < npcs && pcs[k] != c->pcimm[j]; k++)
                    ;
                if (async) {
                    if (k == npcs && npcs < 64) {
                        pcs[npcs] = c->pcimm[j];
                        pcsz[npcs++] = clamp_size(
                            f, kit_iop(f, PTX_OP_SUB, ptx_r(c->crem), ptx_imm((int64_t)c->pcimm[j] * epc)), cw, es);
                    }
                    size = k < npcs ? pcsz[k]
                                    : clamp_size(f, kit_iop(f, PTX_OP_SUB, ptx_r(c->crem),
                                                            ptx_imm((int64_t)c->pcimm[j] * epc)),
                                                 cw, es);
                } else {
                    ok = setp_s(f, PTX_M_GT, ptx_r(c->crem), ptx_imm((int64_t)c->pcimm[j] * epc));
                }
            } else {
                size = ptx_r(c->csize[j]);
            }
        }
        if (c->v.row_edge) {
            ptx_reg rok = c->radv ? setp_s(f, PTX_M_GT, ptx_r(c->rrem), ptx_imm(c->rowimm[j])) : c->rowok[j];
            if (async) {
                ptx_reg d2 = ptx_reg_new(f, PTX_T_B32);
                ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(d2), size, ptx_imm(0), ptx_r(rok));
                size = ptx_r(d2);
            } else {
                ok = pand(f, ok, rok);
            }
        }
        ptx_reg g = pand(f, c->guard[j], pred);
        ptx_ins *in;
        if (async) {
            ptx_mods m = cw == 16 ? PTX_MODS(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL, PTX_M_L2_128B)
                                  : PTX_MODS(PTX_M_CA, PTX_M_SHARED, PTX_M_GLOBAL, PTX_M_L2_128B);
            if (!c->l2_128)
                m.n--;
            ptx_opd da = ptx_addr(d, c->simm[j] + dimm), sa = ptx_addr(src, gimm);
            if (size.kind == PTX_O_IMM)
                in = ptx_emit(f, PTX_OP_CP_ASYNC, m, PTX_NOTYPES, da, sa, ptx_imm(cw));
            else
                in = ptx_emit(f, PTX_OP_CP_ASYNC, m, PTX_NOTYPES, da, sa, ptx_imm(cw), size);
            if (g.id)
                ptx_guard(in, g, false);
        } else {
            /* rows only 1-2 byte aligned: one element per piece, through a register */
            ptx_type t = cw == 2 ? PTX_T_B16 : PTX_T_B8;
            ptx_reg val = ptx_reg_new(f, PTX_T_B16);
            ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B16), ptx_r(val), ptx_imm(0));
            ptx_reg lg = pand(f, ok, g);
            in = ptx_emit(f, PTX_OP_LD, PTX_MODS(PTX_M_GLOBAL), PTX_T1(t), ptx_r(val), ptx_addr(src, gimm));
            if (lg.id)
                ptx_guard(in, lg, false);
            in = ptx_emit(f, PTX_OP_ST, PTX_MODS(PTX_M_SHARED), PTX_T1(t), ptx_addr(d, c->simm[j] + dimm),
                          ptx_r(val));
            if (g.id)
                ptx_guard(in, g, false);
        }
    }
}

void kit_g2s_advance(kit_g2s *c)
{
    ptx_fn *f = c->f;
    int64_t step = c->drow * c->v.ld_bytes + c->dcol * c->v.es;
    if (step)
        ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_S64), ptx_r(c->gp), ptx_r(c->gp), ptx_imm(step));
    if (c->radv)
        ptx_emit(f, PTX_OP_SUB, PTX_NOMODS, PTX_T1(PTX_T_S32), ptx_r(c->rrem), ptx_r(c->rrem), ptx_imm(c->drow));
    if (c->cadv)
        ptx_emit(f, PTX_OP_SUB, PTX_NOMODS, PTX_T1(PTX_T_S32), ptx_r(c->crem), ptx_r(c->crem), ptx_imm(c->dcol));
}

/* ---- shared -> registers (ldmatrix) ---- */

kit_layout kit_ldsm_lanes(int num, const int *jr, const int *jb)
{
    int shape[3] = {8, 2, 2};
    int64_t rs[3] = {1, 0, 0}, cs[3] = {0, 0, 0};
    int nb = num == 4 ? 2 : num == 2 ? 1 : 0;
    for (int k = 0; k < nb; k++) {
        rs[1 + k] = jr[k];
        cs[1 + k] = jb[k];
    }
    return kit_layout2(1 + nb, shape, rs, cs);
}

void kit_ldsm_init(ptx_fn *f, kit_ldsm *s, const kit_layout *tile, const kit_layout *lanes, ptx_reg lane,
                   ptx_opd row0, ptx_opd byte0, int n, const int *r, const int *b)
{
    pt_arena *ar = f->mod->arena;
    s->n = n;
    s->reg = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    s->imm = pt_arena_alloc(ar, (size_t)n * sizeof(int64_t));
    ptx_opd lr = {0}, lb = {0};
    bool have = false;
    for (int i = 0; i < n; i++) {
        int rep = -1;
        for (int k = 0; k < i && rep < 0; k++)
            if (kit_shift_ok(tile, r[i] - r[k], b[i] - b[k]))
                rep = k;
        if (rep >= 0) {
            s->reg[i] = s->reg[rep];
            s->imm[i] = s->imm[rep] + (r[i] - r[rep]) * kit_tile_pitch(tile) + (b[i] - b[rep]);
            continue;
        }
        if (!have) {
            lr = kit_iop(f, PTX_OP_ADD, row0, kit_emit_idx(f, lanes, ptx_r(lane), 0));
            lb = kit_iop(f, PTX_OP_ADD, byte0, kit_emit_idx(f, lanes, ptx_r(lane), 1));
            have = true;
        }
        ptx_opd co[2] = {kit_iop(f, PTX_OP_ADD, lr, ptx_imm(r[i])), kit_iop(f, PTX_OP_ADD, lb, ptx_imm(b[i]))};
        s->reg[i] = kit_reg(f, kit_emit(f, tile, co, 0));
        s->imm[i] = 0;
    }
}

void kit_ldsm_at(ptx_fn *f, const kit_ldsm *s, ptx_reg stage, ptx_reg *out)
{
    for (int i = 0; i < s->n; i++) {
        int k;
        for (k = 0; k < i && s->reg[k].id != s->reg[i].id; k++)
            ;
        if (k < i) {
            out[i] = out[k];
        } else if (out[i].id) {
            ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(out[i]), ptx_r(stage), ptx_r(s->reg[i]));
        } else {
            out[i] = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(stage), ptx_r(s->reg[i])));
        }
    }
}

void kit_ldsm_emit(ptx_fn *f, const kit_ldsm *s, int i, int num, bool trans, ptx_opd dst, const ptx_reg *at,
                   int64_t simm, ptx_reg pred)
{
    ptx_mod x = num == 4 ? PTX_M_X4 : num == 2 ? PTX_M_X2 : PTX_M_X1;
    ptx_mods m = trans ? PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, x, PTX_M_TRANS, PTX_M_SHARED)
                       : PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, x, PTX_M_SHARED);
    ptx_ins *in = ptx_emit(f, PTX_OP_LDMATRIX, m, PTX_T1(PTX_T_B16), dst, ptx_addr(at[i], s->imm[i] + simm));
    if (pred.id)
        ptx_guard(in, pred, false);
}

void kit_atom_to_tile(kit_operand w, bool kmajor, int es, int64_t r, int64_t c, int64_t *tr, int64_t *tb)
{
    int64_t mn = w == KIT_A ? r : c, k = w == KIT_A ? c : r;
    *tr = kmajor ? mn : k;
    *tb = (kmajor ? k : mn) * es;
}

kit_layout kit_tv_to_tile(const kit_layout *l, kit_operand w, bool kmajor, int es)
{
    kit_layout o = *l;
    for (int i = 0; i < l->rank; i++)
        kit_atom_to_tile(w, kmajor, es, l->stride[i][0], l->stride[i][1], &o.stride[i][0], &o.stride[i][1]);
    return o;
}

kit_layout kit_ldsm_atom_lanes(const kit_atom *at, kit_operand w, bool kmajor)
{
    const kit_tv *tv = kit_atom_tv(at, w);
    int regs = tv->regs, epr = 32 / kit_atom_elem_bits(at, w), am = w == KIT_A ? at->m : at->n;
    int jr[2], jb[2];
    for (int bit = 0; bit < 2; bit++) {
        int j = 1 << bit, q = j / regs, v = (j % regs) * epr;
        int64_t vr = kit_eval_idx(&tv->val, v, 0), vc = kit_eval_idx(&tv->val, v, 1), tr, tb;
        if (w == KIT_A)
            vr += q * am;
        else
            vc += q * am;
        kit_atom_to_tile(w, kmajor, at->es, vr, vc, &tr, &tb);
        jr[bit] = (int)tr;
        jb[bit] = (int)tb;
    }
    return kit_ldsm_lanes(4, jr, jb);
}

/* ---- paged rows (gather) ----
 * Thread t's piece j sits at tile row trow + rowimm[j] (trow = t / np,
 * rowimm[j] = j * (T / np)) of a tile whose row 0 is view row `row`, a
 * multiple of the tile's rows TR. With page P (both powers of two):
 *   P >= TR: every row of the tile is on page row / P, at row
 *            row % P + trow + rowimm[j];
 *   P <  TR: row is a multiple of P; row trow + rowimm[j] of the tile is on
 *            entry row / P + erow + rowimm[j] / P at row prow + rowimm[j] % P,
 *            erow = trow / P, prow = trow % P: when P <= T / np, rowimm is a
 *            multiple of P; otherwise trow < T / np < P and rowimm[j] % P <=
 *            P - T / np, so the row stays on the page.
 * So one u32 entry offset, one in-page row and immediates per piece. */
void kit_g2s_paged_init(kit_g2s *c, kit_paged *pg, ptx_reg tid)
{
    ptx_fn *f = c->f;
    int TR = kit_tile_rows(c->tile), np = kit_tile_row_bytes(c->tile) / c->cw, P = pg->page;
    int rp = c->n > 1 ? c->rowimm[1] : 1; /* rows a pass */
    if ((rp & (rp - 1)) || (P & (P - 1)) || (TR & (TR - 1)) || P < 1 || c->v.col_edge ||
        (c->n > 1 && c->pcimm[1] != 0)) {
        pt_errf(&f->mod->err, PT_EINTERNAL,
                "kit_g2s_paged_init: needs power-of-two page (%d), tile rows (%d) and rows a pass (%d; pieces "
                "per row %d), no column bound, pieces per row <= threads",
                P, TR, rp, np);
        return;
    }
    /* np not a power of two (192-byte rows: 12 pieces): kit_g2s_init's
     * ragged cut, tid / np and tid % np; the caller chose T so that T / np
     * is a power of two and keeps threads past (T / np) np from issuing */
    bool npow2 = (np & (np - 1)) == 0;
    ptx_opd trow = npow2 ? kit_iop(f, PTX_OP_SHR, ptx_r(tid), ptx_imm(ilog2(np)))
                         : kit_iop(f, PTX_OP_DIV, ptx_r(tid), ptx_imm(np));
    ptx_opd pc0 = np == 1  ? ptx_imm(0)
                  : npow2 ? kit_iop(f, PTX_OP_AND, ptx_r(tid), ptx_imm(np - 1))
                          : kit_iop(f, PTX_OP_REM, ptx_r(tid), ptx_imm(np));
    if (P < TR) {
        pg->erow = kit_reg(f, kit_iop(f, PTX_OP_SHR, trow, ptx_imm(ilog2(P))));
        pg->prow = kit_reg(f, kit_iop(f, PTX_OP_AND, trow, ptx_imm(P - 1)));
    } else {
        pg->erow = kit_reg(f, ptx_imm(0));
        pg->prow = kit_reg(f, trow);
    }
    pg->cbyte = kit_reg(f, kit_iop(f, PTX_OP_MUL, pc0, ptx_imm(c->cw)));
}

static void issue_paged(kit_g2s *c, const kit_paged *pg, ptx_reg dst, int64_t dimm, ptx_reg pred, ptx_reg *pages,
                        int npages);

void kit_g2s_issue_paged(kit_g2s *c, const kit_paged *pg, ptx_reg dst, int64_t dimm, ptx_reg pred)
{
    issue_paged(c, pg, dst, dimm, pred, NULL, 0);
}

void kit_g2s_issue_paged_shared(kit_g2s *c, const kit_paged *pg, ptx_reg dst, int64_t dimm, ptx_reg pred,
                                ptx_reg *pages, int npages)
{
    issue_paged(c, pg, dst, dimm, pred, pages, npages);
}

static void issue_paged(kit_g2s *c, const kit_paged *pg, ptx_reg dst, int64_t dimm, ptx_reg pred, ptx_reg *pages,
                        int npages)
{
    ptx_fn *f = c->f;
    int cw = c->cw, TR = kit_tile_rows(c->tile), P = pg->page, lp = ilog2(P);
    int64_t ld = c->v.ld_bytes;
    /* the tile's first entry (+ this thread's) and row in the page */
    ptx_opd et = kit_iop(f, PTX_OP_ADD, kit_iop(f, PTX_OP_SHR, ptx_r(pg->row), ptx_imm(lp)), ptx_r(pg->erow));
    ptx_opd rt = ptx_r(pg->prow);
    if (P >= TR)
        rt = kit_iop(f, PTX_OP_ADD, kit_iop(f, PTX_OP_AND, ptx_r(pg->row), ptx_imm(P - 1)), rt);
    ptx_reg eptr = addr64(f, pg->table, et, 4);
    /* in-page offset of this thread's piece 0: rt * ld + cbyte */
    ptx_reg toff;
    if ((int64_t)P * ld + kit_tile_row_bytes(c->tile) <= 0xffffffffll) {
        ptx_reg t32 = kit_reg(f, kit_imad(f, rt, ptx_imm(ld), ptx_r(pg->cbyte)));
        toff = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_CVT, PTX_NOMODS, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(toff), ptx_r(t32));
    } else {
        ptx_reg z = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B64), ptx_r(z), ptx_imm(0));
        toff = addr64(f, addr64(f, z, rt, ld), ptx_r(pg->cbyte), 1);
    }
    ptx_reg dst_of[64] = {{0}}, dst_key[64] = {{0}};
    int ndst = 0;
    int cur_e = -1, grp = -1;
    ptx_reg pbase = {0};
    for (int j = 0; j < c->n; j++) {
        int ej = P >= TR ? 0 : c->rowimm[j] / P, rj = P >= TR ? c->rowimm[j] : c->rowimm[j] % P;
        ptx_reg rok = {0};
        if (c->v.row_edge)
            rok = c->radv ? setp_s(f, PTX_M_GT, ptx_r(c->rrem), ptx_imm(c->rowimm[j])) : c->rowok[j];
        ptx_reg g = pand(f, c->guard[j], pred);
        if (ej != cur_e) { /* a new page: look its entry up (or take the shared one) */
            cur_e = ej;
            grp++;
            ptx_reg page = grp < npages ? pages[grp] : (ptx_reg){0};
            if (!page.id) {
                ptx_reg lg = pand(f, rok, g);
                page = ptx_reg_new(f, PTX_T_B32);
                ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(page), ptx_imm(0));
                ptx_ins *in = ptx_emit(f, PTX_OP_LD, PTX_MODS(PTX_M_GLOBAL, PTX_M_NC), PTX_T1(PTX_T_U32),
                                       ptx_r(page), ptx_addr(eptr, (int64_t)ej * 4));
                if (lg.id)
                    ptx_guard(in, lg, false);
                if (grp < npages)
                    pages[grp] = page;
            }
            pbase = addr64(f, pg->pool, ptx_r(page), pg->page_bytes);
            ptx_reg pb2 = ptx_reg_new(f, PTX_T_B64);
            ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_S64), ptx_r(pb2), ptx_r(pbase), ptx_r(toff));
            pbase = pb2;
        }
        ptx_reg d = {0};
        for (int k = 0; k < ndst; k++)
            if (dst_key[k].id == c->soff[j].id)
                d = dst_of[k];
        if (!d.id) {
            d = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(dst), ptx_r(c->soff[j])));
            if (ndst < 64) {
                dst_key[ndst] = c->soff[j];
                dst_of[ndst++] = d;
            }
        }
        ptx_reg src = pbase;
        int64_t gimm = (int64_t)rj * ld + (int64_t)c->pcimm[j] * cw;
        if (gimm > 0x7fffffffll) {
            src = addr64(f, pbase, ptx_imm(gimm), 1);
            gimm = 0;
        }
        ptx_opd size = ptx_imm(cw);
        if (rok.id) {
            ptx_reg d2 = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(d2), size, ptx_imm(0), ptx_r(rok));
            size = ptx_r(d2);
        }
        ptx_mods m = cw == 16 ? PTX_MODS(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL, PTX_M_L2_128B)
                              : PTX_MODS(PTX_M_CA, PTX_M_SHARED, PTX_M_GLOBAL, PTX_M_L2_128B);
        if (!c->l2_128)
            m.n--;
        ptx_opd da = ptx_addr(d, c->simm[j] + dimm), sa = ptx_addr(src, gimm);
        ptx_ins *in = size.kind == PTX_O_IMM
                          ? ptx_emit(f, PTX_OP_CP_ASYNC, m, PTX_NOTYPES, da, sa, ptx_imm(cw))
                          : ptx_emit(f, PTX_OP_CP_ASYNC, m, PTX_NOTYPES, da, sa, ptx_imm(cw), size);
        if (g.id)
            ptx_guard(in, g, false);
    }
}

void kit_g2s_paged_advance(kit_g2s *c, kit_paged *pg)
{
    ptx_fn *f = c->f;
    if (c->radv)
        ptx_emit(f, PTX_OP_SUB, PTX_NOMODS, PTX_T1(PTX_T_S32), ptx_r(c->rrem), ptx_r(c->rrem), ptx_imm(c->drow));
    ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(pg->row), ptx_r(pg->row), ptx_imm(c->drow));
}
