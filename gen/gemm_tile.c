/* GEMM tiles: the mma atom table, shared-memory layouts, global->shared
 * loaders, the multistage pipeline and the two inner products (mma.sync
 * fed by ldmatrix, and f32 FFMA). See gen/gemm_int.h for the pieces and
 * shared/ref/ptx-sm80.md for the fragment formulas used below. */
#include <stdio.h>
#include <string.h>

#include "gen/gemm_int.h"

#define NOM PTX_NOMODS
#define M1(a) PTX_MODS(a)
#define M2(a, b) PTX_MODS(a, b)
#define U32T PTX_T1(PTX_T_U32)
#define S32T PTX_T1(PTX_T_S32)
#define B32T PTX_T1(PTX_T_B32)
#define F32T PTX_T1(PTX_T_F32)

static int ilog2(int v)
{
    int r = 0;
    while ((1 << r) < v)
        r++;
    return r;
}

/* ---- integer helpers ---- */

ptx_reg gemm_r32(gemm_ctx *g) { return ptx_reg_new(g->f, PTX_T_B32); }
ptx_reg gemm_r64(gemm_ctx *g) { return ptx_reg_new(g->f, PTX_T_B64); }
ptx_reg gemm_pred(gemm_ctx *g) { return ptx_reg_new(g->f, PTX_T_PRED); }

ptx_reg gemm_op2(gemm_ctx *g, ptx_op op, ptx_opd a, ptx_opd b)
{
    ptx_reg d = gemm_r32(g);
    ptx_types t = U32T;
    if (op == PTX_OP_AND || op == PTX_OP_OR || op == PTX_OP_XOR || op == PTX_OP_SHL)
        t = B32T;
    else if (op == PTX_OP_MIN || op == PTX_OP_MAX)
        t = S32T;
    ptx_emit(g->f, op, NOM, t, ptx_r(d), a, b);
    return d;
}

ptx_reg gemm_mul(gemm_ctx *g, ptx_opd a, ptx_opd b)
{
    ptx_reg d = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), U32T, ptx_r(d), a, b);
    return d;
}

ptx_reg gemm_mad(gemm_ctx *g, ptx_opd a, ptx_opd b, ptx_opd c)
{
    ptx_reg d = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_MAD, M1(PTX_M_LO), U32T, ptx_r(d), a, b, c);
    return d;
}

ptx_reg gemm_setp(gemm_ctx *g, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = gemm_pred(g);
    ptx_emit(g->f, PTX_OP_SETP, M1(cmp), U32T, ptx_r(p), a, b);
    return p;
}

ptx_reg gemm_setp_s(gemm_ctx *g, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = gemm_pred(g);
    ptx_emit(g->f, PTX_OP_SETP, M1(cmp), S32T, ptx_r(p), a, b);
    return p;
}

ptx_reg gemm_selp(gemm_ctx *g, ptx_opd a, ptx_opd b, ptx_reg p)
{
    ptx_reg d = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_SELP, NOM, B32T, ptx_r(d), a, b, ptx_r(p));
    return d;
}

ptx_reg gemm_pand(gemm_ctx *g, ptx_reg a, ptx_reg b)
{
    if (!a.id)
        return b;
    if (!b.id)
        return a;
    ptx_reg d = gemm_pred(g);
    ptx_emit(g->f, PTX_OP_AND, NOM, PTX_T1(PTX_T_PRED), ptx_r(d), ptx_r(a), ptx_r(b));
    return d;
}

ptx_reg gemm_add64(gemm_ctx *g, ptx_reg p64, int64_t imm)
{
    ptx_reg d = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p64), ptx_imm(imm));
    return d;
}

void gemm_inc64(gemm_ctx *g, ptx_reg p64, int64_t imm)
{
    if (imm)
        ptx_emit(g->f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(p64), ptx_r(p64), ptx_imm(imm));
}

void gemm_inc32(gemm_ctx *g, ptx_reg r, int64_t imm)
{
    if (imm)
        ptx_emit(g->f, PTX_OP_ADD, NOM, S32T, ptx_r(r), ptx_r(r), ptx_imm(imm));
}

ptx_reg gemm_addr64(gemm_ctx *g, ptx_reg p64, ptx_opd a, int64_t b)
{
    if (a.kind == PTX_O_IMM)
        return a.u.imm != 0 && b != 0 ? gemm_add64(g, p64, a.u.imm * b) : p64;
    ptx_reg off = gemm_r64(g);
    if (b >= 0 && b <= 0xffffffffll) {
        ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_WIDE), U32T, ptx_r(off), a, ptx_imm(b));
    } else {
        ptx_reg w = gemm_r64(g);
        ptx_emit(g->f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), a);
        ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(off), ptx_r(w),
                 ptx_imm(b));
    }
    ptx_reg d = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p64), ptx_r(off));
    return d;
}

void gemm_bar(gemm_ctx *g)
{
    if (g->bar_threads) /* named barrier of the wgmma loop's consumers */
        ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, g->bar_id.id ? ptx_r(g->bar_id) : ptx_imm(1),
                 ptx_imm(g->bar_threads));
    else
        ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
}

ptx_opd gemm_m(const gemm_ctx *g) { return g->pp->dyn_m ? ptx_r(g->mreg) : ptx_imm(g->pp->M); }


/* ---- operands ----
 * An operand is a view of its global panel and a shared tile, in the
 * global orientation: K-major operands (A 'n', B 't') have tile rows m|n
 * and k along the row, advancing along k; MN-major ones (A 't', B 'n')
 * have tile rows k, advancing by rows. Both operands go through the same
 * code: only the view and the tile differ. */
typedef struct operand {
    const kit_layout *tile;
    int stage_off; /* byte offset of the tile inside a stage */
    bool kmajor;
    kit_g2s cp;
} operand;

/* The operand of the tile_mn x K panel at mn0 of a matrix at p with ld
 * elements per row and mn_lim rows (K-major) or columns (MN-major);
 * mn_dyn: mn_lim is M, read at run time (an edge wherever the tile is). */
static void operand_init(gemm_ctx *g, operand *o, const kit_layout *tile, int stage_off, ptx_reg p, int64_t ld,
                         bool kmajor, ptx_reg mn0, int64_t mn_lim, bool mn_dyn, int tile_mn, int cw)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    int es = g->at->es;
    o->tile = tile;
    o->stage_off = stage_off;
    o->kmajor = kmajor;
    bool kedge = pp->K % g->bk != 0, mnedge = mn_dyn || mn_lim % tile_mn != 0;
    ptx_opd k0 = g->splitk > 1 ? kit_iop(f, PTX_OP_MUL, ptx_r(g->kt_begin), ptx_imm(g->bk)) : ptx_imm(0);
    ptx_opd kleft = kedge ? kit_iop(f, PTX_OP_SUB, ptx_imm(pp->K), k0) : ptx_imm(0);
    ptx_opd mnleft = mnedge ? kit_iop(f, PTX_OP_SUB, mn_dyn ? gemm_m(g) : ptx_imm(mn_lim), ptx_r(mn0))
                            : ptx_imm(0);
    kit_view v;
    memset(&v, 0, sizeof v);
    v.ld_bytes = ld * es;
    v.es = es;
    v.rows = kmajor ? mnleft : kleft;
    v.cols = kmajor ? kleft : mnleft;
    v.row_edge = kmajor ? mnedge : kedge;
    v.col_edge = kmajor ? kedge : mnedge;
    v.base = gemm_addr64(g, p, kmajor ? ptx_r(mn0) : k0, v.ld_bytes);
    v.base = gemm_addr64(g, v.base, kmajor ? k0 : ptx_r(mn0), es);
    kit_g2s_init(f, &o->cp, tile, &v, g->threads, g->tid, cw, kmajor ? 0 : g->bk, kmajor ? g->bk : 0);
    o->cp.l2_128 = true;
}

/* ---- the multistage pipeline ----
 * Prologue: tiles 0..S-1 into all S stages, one commit group each; wait
 * for tile 0, then `next` loads its first fragments. Loop over this CTA's
 * k tiles i:
 *   head   every k-step of tile i but the last one's inner product (the
 *          fragments of k-step s+1 load before the mma of k-step s)
 *   release stage i; wait for tile i+1 (S-2 newer groups may stay in
 *          flight) and bar.sync: tile i+1 is visible and every warp is
 *          done reading stage i
 *   tail   the last k-step's mma (its fragments are in registers), so
 *          the first mma comes right after the barrier
 *   next   (mma.sync: nothing; k-step 0 loads at the top, in head)
 *   copies of tile i+S into stage i (predicated off past the end), commit
 * The stage registers hold shared addresses (the array's address is not 0
 * on every arch: sm_90 places it above a reserved 1 KB). */
typedef struct mainloop {
    void (*head)(gemm_ctx *g, void *arg, ptx_reg stage);
    void (*tail)(gemm_ctx *g, void *arg);
    void (*next)(gemm_ctx *g, void *arg, ptx_reg stage, ptx_reg more);
    void *arg;
} mainloop;

static void issue(operand *ops, ptx_reg stage, ptx_reg pred)
{
    for (int o = 0; o < 2; o++) {
        kit_g2s_issue(&ops[o].cp, stage, ops[o].stage_off, pred);
        kit_g2s_advance(&ops[o].cp);
    }
}

static void pipeline(gemm_ctx *g, operand *ops, const mainloop *ml)
{
    ptx_fn *f = g->f;
    int S = g->stages;
    bool nkt_imm = g->splitk == 1;
    ptx_opd nkt = nkt_imm ? ptx_imm(g->kt_total) : ptx_r(g->nkt);
    kit_pipe p;
    kit_pipe_init(f, &p, KIT_PIPE_CP_ASYNC, S, g->stage_bytes, g->smem, false);
    for (int s = 0; s < S; s++) {
        ptx_reg st = kit_pipe_acquire(&p);
        if (!nkt_imm || s < g->kt_total)
            issue(ops, st, nkt_imm ? (ptx_reg){0} : gemm_setp(g, PTX_M_GT, nkt, ptx_imm(s)));
        kit_pipe_commit(&p);
    }
    ptx_reg rst = kit_pipe_wait(&p, S - 1);
    ml->next(g, ml->arg, rst, (ptx_reg){0});
    ptx_reg i = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(i), ptx_imm(0));
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    ml->head(g, ml->arg, rst);
    kit_pipe_release(&p);
    ptx_reg i1 = gemm_op2(g, PTX_OP_ADD, ptx_r(i), ptx_imm(1));
    ptx_reg more = gemm_setp(g, PTX_M_LT, ptx_r(i1), nkt);
    ptx_reg load = nkt_imm && g->kt_total <= S ? (ptx_reg){0}
                                               : gemm_setp(g, PTX_M_LT, ptx_r(gemm_op2(g, PTX_OP_ADD, ptx_r(i),
                                                                                      ptx_imm(S))),
                                                           nkt);
    kit_pipe_wait(&p, -1);
    ml->tail(g, ml->arg);
    ml->next(g, ml->arg, rst, more);
    /* copies with run-time sizes or row checks at an edge: a uniform branch
     * around them (ptxas keeps their loop-invariant parts out of the loop;
     * predicated, it recomputes them per copy: 129 against 36 integer ops
     * per k tile for 250x130x4096 nn bf16 splitk=4 on sm_80); plain
     * copies: predicated */
    bool edges = false;
    for (int o = 0; o < 2; o++)
        edges |= ops[o].cp.v.row_edge || ops[o].cp.v.col_edge;
    if (load.id && edges) {
        int skip = ptx_label_new(f);
        ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(skip)), load, true);
        issue(ops, kit_pipe_acquire(&p), (ptx_reg){0});
        ptx_label_place(f, skip);
    } else if (load.id || !nkt_imm) {
        issue(ops, kit_pipe_acquire(&p), load);
    }
    kit_pipe_commit(&p);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(i), ptx_r(i1));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top)), more, false);
    /* the epilogue reuses the stages: drain the (empty) groups, then sync */
    kit_pipe_drain(&p);
}

/* ---- tensor-core main loop ----
 * Warp tile WM x WN of atoms (MI x NI, m16n8); per k-step a warp loads MI
 * A fragments (ldmatrix.x4) and NI/2 B fragment pairs (ldmatrix.x4, two n8
 * atoms each), then issues MI*NI mma.sync. Fragments are double-buffered
 * (k-step s uses set s % 2). With kslice > 1 the warps of slice q take
 * k-steps [q*KSP, (q+1)*KSP) of every tile.
 *
 * The ldmatrix lane addresses come from the atom's thread-value maps: the
 * 8x8 matrix j of an .x4 is register j of the fragment (for B: register
 * j % 2 of n8 atom j / 2), whose first element lane 0 holds at the origin
 * of that matrix; lane l supplies row l % 8 of matrix l / 8. Operands
 * stored MN-major read .trans. tf32 MN-major operands cannot use ldmatrix
 * (it transposes 16-bit elements): each element is an ld.shared.b32 at
 * the atom's map, from a padded tile. */
typedef struct frag_op {
    kit_operand which;
    bool kmajor, scalar;
    int per_ks;         /* accesses per k-step */
    kit_ldsm ld;        /* accesses [ks][per_ks] (scalar: [ks][per_ks][elem]) */
    ptx_reg at[64];     /* their addresses in the stage being read */
    int stage_off;
} frag_op;

typedef struct tc_state {
    int MI, NI, KSP;
    frag_op fa, fb;
    ptx_reg afr[2][4][4], bfr[2][8][2];
    ptx_reg *acc; /* [MI][NI][4] */
    ptx_opd av[2][4], bv[2][8], bpair[2][4], *accv;
} tc_state;

/* The accesses of one operand: origin (mn0 register, k0) of the warp's
 * slice; atoms per k-step: MI (A) or NI (B). */
static void frag_init(gemm_ctx *g, frag_op *fo, kit_operand w, bool kmajor, const kit_layout *tile, int stage_off,
                      ptx_reg mn0, ptx_opd k0, int atoms, int KSP)
{
    ptx_fn *f = g->f;
    const kit_atom *at = g->at;
    const kit_tv *tv = kit_atom_tv(at, w);
    int es = at->es;
    memset(fo, 0, sizeof *fo);
    fo->which = w;
    fo->kmajor = kmajor;
    fo->stage_off = stage_off;
    fo->scalar = at->tf32 && !kmajor;
    int am = w == KIT_A ? at->m : at->n; /* atom extent along m|n */
    int r[256], b[256], n = 0;
    kit_layout lanes;
    if (fo->scalar) {
        int ne = kit_tv_elems(tv);
        fo->per_ks = atoms * ne;
        lanes = kit_tv_to_tile(&tv->thr, w, kmajor, es);
        for (int ks = 0; ks < KSP; ks++)
            for (int a = 0; a < atoms; a++)
                for (int v = 0; v < ne; v++) {
                    int64_t vr = kit_eval_idx(&tv->val, v, 0), vc = kit_eval_idx(&tv->val, v, 1), tr, tb;
                    if (w == KIT_A)
                        kit_atom_to_tile(w, kmajor, es, a * am + vr, ks * at->k + vc, &tr, &tb);
                    else
                        kit_atom_to_tile(w, kmajor, es, ks * at->k + vr, a * am + vc, &tr, &tb);
                    r[n] = (int)tr;
                    b[n++] = (int)tb;
                }
    } else {
        int regs = tv->regs;
        lanes = kit_ldsm_atom_lanes(at, w, kmajor);
        int per = 4 / regs; /* atoms per .x4 */
        fo->per_ks = atoms / per;
        for (int ks = 0; ks < KSP; ks++)
            for (int a = 0; a < atoms; a += per) {
                int64_t tr, tb;
                if (w == KIT_A)
                    kit_atom_to_tile(w, kmajor, es, a * am, ks * at->k, &tr, &tb);
                else
                    kit_atom_to_tile(w, kmajor, es, ks * at->k, a * am, &tr, &tb);
                r[n] = (int)tr;
                b[n++] = (int)tb;
            }
    }
    /* the warp's origin in tile coordinates */
    ptx_opd mnb = kit_iop(f, PTX_OP_MUL, ptx_r(mn0), ptx_imm(es)), kb = kit_iop(f, PTX_OP_MUL, k0, ptx_imm(es));
    ptx_opd row0 = kmajor ? ptx_r(mn0) : k0, byte0 = kmajor ? kb : mnb;
    kit_ldsm_init(f, &fo->ld, tile, &lanes, g->lane, row0, byte0, n, r, b);
}

static void tf32_round(gemm_ctx *g, ptx_reg r)
{
    ptx_emit(g->f, PTX_OP_CVT, M1(PTX_M_RNA), PTX_TYPES(PTX_T_TF32, PTX_T_F32), ptx_r(r), ptx_r(r));
}

/* Loads the fragments of k-step ks into register set buf (pred: uniform
 * guard, id 0 none). */
static void frag_load(gemm_ctx *g, tc_state *s, const frag_op *fo, int ks, int buf, ptx_reg pred)
{
    ptx_fn *f = g->f;
    int atoms = fo->which == KIT_A ? s->MI : s->NI;
    if (fo->scalar) {
        const kit_tv *tv = kit_atom_tv(g->at, fo->which);
        int ne = kit_tv_elems(tv);
        for (int a = 0; a < atoms; a++)
            for (int v = 0; v < ne; v++) {
                int i = ks * fo->per_ks + a * ne + v, row, col, reg, bit;
                kit_tv_at(g->at, fo->which, 0, v, &row, &col, &reg, &bit);
                ptx_reg d = fo->which == KIT_A ? s->afr[buf][a][reg] : s->bfr[buf][a][reg];
                ptx_ins *in = ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), B32T, ptx_r(d),
                                       ptx_addr(fo->at[i], fo->ld.imm[i] + fo->stage_off));
                if (pred.id)
                    ptx_guard(in, pred, false);
            }
    } else {
        for (int q = 0; q < fo->per_ks; q++)
            kit_ldsm_emit(f, &fo->ld, ks * fo->per_ks + q, 4, !fo->kmajor,
                          fo->which == KIT_A ? s->av[buf][q] : s->bpair[buf][q], fo->at, fo->stage_off, pred);
    }
    if (g->at->tf32)
        for (int a = 0; a < atoms; a++)
            for (int k = 0; k < (fo->which == KIT_A ? 4 : 2); k++)
                tf32_round(g, fo->which == KIT_A ? s->afr[buf][a][k] : s->bfr[buf][a][k]);
}

static void tc_mma(gemm_ctx *g, tc_state *s, int buf)
{
    const kit_atom *at = g->at;
    ptx_types mt = PTX_TYPES(at->acc, at->ab, at->ab, at->acc);
    ptx_mods mm = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, at->shape, PTX_M_ROW, PTX_M_COL);
    for (int mi = 0; mi < s->MI; mi++)
        for (int ni = 0; ni < s->NI; ni++) {
            /* serpentine over n keeps one B fragment hot between rows */
            int n = (mi & 1) ? s->NI - 1 - ni : ni;
            ptx_opd cv = s->accv[mi * s->NI + n];
            ptx_emit(g->f, PTX_OP_MMA, mm, mt, cv, s->av[buf][mi], s->bv[buf][n], cv);
        }
}

/* Each use computes its addresses from the stage register afresh (one add
 * per distinct register): ptxas folds a warp-uniform stage into the
 * ldmatrix address ([R+UR+imm]), which it cannot do for an address
 * carried around the loop. */
static void frag_at(gemm_ctx *g, tc_state *s, ptx_reg stage)
{
    memset(s->fa.at, 0, sizeof s->fa.at);
    memset(s->fb.at, 0, sizeof s->fb.at);
    kit_ldsm_at(g->f, &s->fa.ld, stage, s->fa.at);
    kit_ldsm_at(g->f, &s->fb.ld, stage, s->fb.at);
}

static void tc_head(gemm_ctx *g, void *arg, ptx_reg stage)
{
    tc_state *s = arg;
    frag_at(g, s, stage);
    frag_load(g, s, &s->fa, 0, 0, (ptx_reg){0});
    frag_load(g, s, &s->fb, 0, 0, (ptx_reg){0});
    for (int ks = 0; ks + 1 < s->KSP; ks++) {
        frag_load(g, s, &s->fa, ks + 1, (ks + 1) & 1, (ptx_reg){0});
        frag_load(g, s, &s->fb, ks + 1, (ks + 1) & 1, (ptx_reg){0});
        tc_mma(g, s, ks & 1);
    }
}

static void tc_tail(gemm_ctx *g, void *arg)
{
    tc_state *s = arg;
    tc_mma(g, s, (s->KSP - 1) & 1);
}

/* Nothing: the head loads k-step 0's fragments at the loop's top. Loaded
 * here after the tail (predicated off after the last tile) they were
 * carried around the loop: ptxas 13.0 then took ~4x the time (0.10 ->
 * 0.42 s user, 4096^3 bf16 tn default on sm_80) and 230 registers instead
 * of 203; with an f64 epilogue (dyn=m nt 128x128x64) 248 instead of 214. */
static void tc_next(gemm_ctx *g, void *arg, ptx_reg stage, ptx_reg more)
{
    (void)g;
    (void)arg;
    (void)stage;
    (void)more;
}

/* Warp coordinates: warp w -> slice w / (wm*wn), then m fastest (the
 * tiler of the block tile among the warps). */
static void warp_coords(gemm_ctx *g, ptx_reg *wm0, ptx_reg *wn0)
{
    int wmn = g->warps_m * g->warps_n;
    ptx_reg wr = g->warp;
    if (g->kslice > 1) {
        g->kslice_idx = gemm_op2(g, PTX_OP_SHR, ptx_r(g->warp), ptx_imm(ilog2(wmn)));
        wr = gemm_op2(g, PTX_OP_AND, ptx_r(g->warp), ptx_imm(wmn - 1));
    }
    kit_layout w = kit_tiler(g->bm, g->bn, g->wm, g->wn, true);
    *wm0 = kit_reg(g->f, kit_emit_idx(g->f, &w, ptx_r(wr), 0));
    *wn0 = kit_reg(g->f, kit_emit_idx(g->f, &w, ptx_r(wr), 1));
}

static void operands(gemm_ctx *g, operand *ops)
{
    const pt_prepared *pp = g->pp;
    operand_init(g, &ops[0], &g->sa, 0, g->pa, pp->lda, pp->a_kmajor, g->m0, pp->M, pp->dyn_m, g->bm, pp->cw_a);
    operand_init(g, &ops[1], &g->sb, (int)g->sa.span, g->pb, pp->ldb, pp->b_kmajor, g->n0, pp->N, false, g->bn,
                 pp->cw_b);
}

void gemm_mainloop_tc(gemm_ctx *g, gemm_accs *acc)
{
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    const pt_prepared *pp = g->pp;
    tc_state s;
    memset(&s, 0, sizeof s);
    s.MI = g->wm / 16;
    s.NI = g->wn / 8;
    s.KSP = g->ksteps / g->kslice;
    ptx_reg wm0, wn0;
    warp_coords(g, &wm0, &wn0);
    operand ops[2];
    operands(g, ops);
    ptx_opd k0 = g->kslice > 1 ? kit_iop(f, PTX_OP_MUL, ptx_r(g->kslice_idx), ptx_imm((int64_t)s.KSP * g->at->k))
                               : ptx_imm(0);
    frag_init(g, &s.fa, KIT_A, pp->a_kmajor, &g->sa, 0, wm0, k0, s.MI, s.KSP);
    frag_init(g, &s.fb, KIT_B, pp->b_kmajor, &g->sb, (int)g->sa.span, wn0, k0, s.NI, s.KSP);
    ptx_type at = g->at->acc == PTX_T_F32 ? PTX_T_F32 : PTX_T_B32;
    int nacc = s.MI * s.NI * 4;
    s.acc = pt_arena_alloc(ar, (size_t)nacc * sizeof(ptx_reg));
    for (int i = 0; i < nacc; i++) {
        s.acc[i] = ptx_reg_new(f, at);
        if (at == PTX_T_F32)
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(s.acc[i]), ptx_f32(0.0f));
        else
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(s.acc[i]), ptx_imm(0));
    }
    for (int b = 0; b < 2; b++) {
        for (int mi = 0; mi < s.MI; mi++) {
            for (int i = 0; i < 4; i++)
                s.afr[b][mi][i] = gemm_r32(g);
            s.av[b][mi] = ptx_vecr(f, 4, s.afr[b][mi]);
        }
        for (int ni = 0; ni < s.NI; ni++) {
            for (int i = 0; i < 2; i++)
                s.bfr[b][ni][i] = gemm_r32(g);
            s.bv[b][ni] = ptx_vecr(f, 2, s.bfr[b][ni]);
        }
        for (int np = 0; np < s.NI / 2; np++) {
            ptx_reg r4[4] = {s.bfr[b][2 * np][0], s.bfr[b][2 * np][1], s.bfr[b][2 * np + 1][0],
                             s.bfr[b][2 * np + 1][1]};
            s.bpair[b][np] = ptx_vecr(f, 4, r4);
        }
    }
    s.accv = pt_arena_alloc(ar, (size_t)(s.MI * s.NI) * sizeof(ptx_opd));
    for (int i = 0; i < s.MI * s.NI; i++)
        s.accv[i] = ptx_vecr(f, 4, &s.acc[4 * i]);
    mainloop ml = {tc_head, tc_tail, tc_next, &s};
    pipeline(g, ops, &ml);
    /* the accumulators as the kit's C fragment (positions from the atom's C map) */
    *acc = kit_frag_mma_c(f, g->at, s.MI, s.NI, s.acc, wm0, wn0, g->lane);
}

/* ---- SIMT main loop (f32 FFMA) ----
 * Thread (ty, tx) owns rows ty*TM.. and columns tx*TN.. of the tile. For
 * each group of 4 k it loads TM x 4 values of A and TN x 4 of B with 16-byte
 * ld.shared (along k from K-major tiles, along m/n from MN-major ones) and
 * issues TM*TN*4 fma.rn.f32. Tiles are padded by 16 bytes per row. */
typedef struct simt_state {
    ptx_reg abase, bbase;
    const kit_layout *ta, *tb;
    bool akmaj, bkmaj;
    ptx_reg *acc; /* [TM][TN] */
} simt_state;

/* Loads x[i][q] (i < n rows of the thread, q < 4 k) for k group kq. */
static void simt_load(gemm_ctx *g, ptx_reg base, const kit_layout *st, bool kmaj, int n, int kq, ptx_reg (*x)[4])
{
    ptx_fn *f = g->f;
    ptx_mods m = M2(PTX_M_SHARED, PTX_M_V4);
    int64_t pitch = kit_tile_pitch(st);
    if (kmaj) {
        for (int i = 0; i < n; i++)
            ptx_emit(f, PTX_OP_LD, m, F32T, ptx_vecr(f, 4, x[i]), ptx_addr(base, i * pitch + kq * 16));
    } else {
        for (int q = 0; q < 4; q++)
            for (int c = 0; c < n / 4; c++) {
                ptx_reg v[4] = {x[4 * c][q], x[4 * c + 1][q], x[4 * c + 2][q], x[4 * c + 3][q]};
                ptx_emit(f, PTX_OP_LD, m, F32T, ptx_vecr(f, 4, v), ptx_addr(base, (kq * 4 + q) * pitch + c * 16));
            }
    }
}

static void simt_compute(gemm_ctx *g, void *arg, ptx_reg stage)
{
    simt_state *s = arg;
    ptx_fn *f = g->f;
    ptx_reg ab = gemm_op2(g, PTX_OP_ADD, ptx_r(stage), ptx_r(s->abase));
    ptx_reg bb = gemm_op2(g, PTX_OP_ADD, ptx_r(stage), ptx_r(s->bbase));
    ptx_reg a[8][4], b[8][4];
    for (int kq = 0; kq < g->bk / 4; kq++) {
        for (int i = 0; i < g->tm; i++)
            for (int q = 0; q < 4; q++)
                a[i][q] = ptx_reg_new(f, PTX_T_F32);
        for (int j = 0; j < g->tn; j++)
            for (int q = 0; q < 4; q++)
                b[j][q] = ptx_reg_new(f, PTX_T_F32);
        simt_load(g, ab, s->ta, s->akmaj, g->tm, kq, a);
        simt_load(g, bb, s->tb, s->bkmaj, g->tn, kq, b);
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < g->tm; i++)
                for (int j = 0; j < g->tn; j++) {
                    ptx_reg c = s->acc[i * g->tn + j];
                    ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(c), ptx_r(a[i][q]), ptx_r(b[j][q]),
                             ptx_r(c));
                }
    }
}

static void simt_tail(gemm_ctx *g, void *arg) { (void)g, (void)arg; }
static void simt_next(gemm_ctx *g, void *arg, ptx_reg stage, ptx_reg more) { (void)g, (void)arg, (void)stage, (void)more; }

/* The thread's first element in a tile: K-major rows are m|n (offset
 * row * pitch), MN-major rows are k (offset mn * 4). */
static ptx_reg simt_base(gemm_ctx *g, const kit_layout *t, bool kmaj, ptx_reg mn0, int stage_off)
{
    ptx_opd c[2] = {kmaj ? ptx_r(mn0) : ptx_imm(0), kmaj ? ptx_imm(0) : kit_iop(g->f, PTX_OP_SHL, ptx_r(mn0), ptx_imm(2))};
    return kit_reg(g->f, kit_iop(g->f, PTX_OP_ADD, kit_emit(g->f, t, c, 0), ptx_imm(stage_off)));
}

void gemm_mainloop_simt(gemm_ctx *g, gemm_accs *acc)
{
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    const pt_prepared *pp = g->pp;
    int tx_n = g->bn / g->tn;
    ptx_reg tx = gemm_op2(g, PTX_OP_AND, ptx_r(g->tid), ptx_imm(tx_n - 1));
    ptx_reg ty = gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(ilog2(tx_n)));
    ptx_reg row0 = gemm_mul(g, ptx_r(ty), ptx_imm(g->tm));
    ptx_reg col0 = gemm_mul(g, ptx_r(tx), ptx_imm(g->tn));
    operand ops[2];
    operands(g, ops);
    simt_state s;
    s.ta = &g->sa;
    s.tb = &g->sb;
    s.akmaj = pp->a_kmajor;
    s.bkmaj = pp->b_kmajor;
    s.abase = simt_base(g, &g->sa, pp->a_kmajor, row0, 0);
    s.bbase = simt_base(g, &g->sb, pp->b_kmajor, col0, (int)g->sa.span);
    int nacc = g->tm * g->tn;
    s.acc = pt_arena_alloc(ar, (size_t)nacc * sizeof(ptx_reg));
    for (int i = 0; i < nacc; i++) {
        s.acc[i] = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(s.acc[i]), ptx_f32(0.0f));
    }
    mainloop ml = {simt_compute, simt_tail, simt_next, &s};
    pipeline(g, ops, &ml);
    acc->n = nacc;
    acc->vec = g->tn < 4 ? g->tn : 4;
    acc->r = s.acc;
    acc->row = pt_arena_alloc(ar, (size_t)nacc * sizeof(int));
    acc->col = pt_arena_alloc(ar, (size_t)nacc * sizeof(int));
    for (int i = 0; i < g->tm; i++)
        for (int j = 0; j < g->tn; j++) {
            acc->row[i * g->tn + j] = i;
            acc->col[i * g->tn + j] = j;
        }
    acc->row_base = row0;
    acc->col_base = col0;
    acc->grp_row = row0;
    acc->grp_col = col0;
    acc->grp_rows = g->tm;
    acc->grp_cols = g->tn;
}
