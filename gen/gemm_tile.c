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

/* ---- shared-memory layouts ---- */

static int ilog2(int v)
{
    int r = 0;
    while ((1 << r) < v)
        r++;
    return r;
}

gemm_smem gemm_smem_swizzled(int rows, int row_bytes)
{
    int nc = row_bytes / 16;
    int swz = nc < 8 ? nc : 8;
    return (gemm_smem){rows, row_bytes, row_bytes, swz, ilog2(8 / swz), rows * row_bytes};
}

gemm_smem gemm_smem_padded(int rows, int row_bytes, int pad)
{
    return (gemm_smem){rows, row_bytes, row_bytes + pad, 1, 0, rows * (row_bytes + pad)};
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

/* An integer op that folds immediates: two immediates give an immediate
 * and emit nothing (g may then be NULL), so the swizzle below is one
 * definition for the emitted address math and for compile-time offsets. */
static ptx_opd fold2(gemm_ctx *g, ptx_op op, ptx_opd a, ptx_opd b)
{
    if (a.kind == PTX_O_IMM && b.kind == PTX_O_IMM) {
        int64_t x = a.u.imm, y = b.u.imm;
        switch (op) {
        case PTX_OP_ADD: return ptx_imm(x + y);
        case PTX_OP_SHL: return ptx_imm(x << y);
        case PTX_OP_SHR: return ptx_imm(x >> y);
        case PTX_OP_AND: return ptx_imm(x & y);
        case PTX_OP_XOR: return ptx_imm(x ^ y);
        default: break;
        }
    }
    return ptx_r(gemm_op2(g, op, a, b));
}

/* The swizzle (the only definition): row * pitch + 16 * (chunk ^ ((row >>
 * shift) & (swz - 1))); padded tiles (swz 1) keep the chunk. */
ptx_opd gemm_swz_off(gemm_ctx *g, const gemm_smem *s, ptx_opd row, ptx_opd chunk)
{
    ptx_opd pc = chunk;
    if (s->swz > 1) {
        ptx_opd x = row;
        if (s->shift)
            x = fold2(g, PTX_OP_SHR, row, ptx_imm(s->shift));
        x = fold2(g, PTX_OP_AND, x, ptx_imm(s->swz - 1));
        pc = fold2(g, PTX_OP_XOR, chunk, x);
    }
    ptx_opd c16 = fold2(g, PTX_OP_SHL, pc, ptx_imm(4));
    if (row.kind == PTX_O_IMM)
        return fold2(g, PTX_OP_ADD, c16, ptx_imm(row.u.imm * s->pitch));
    return ptx_r(gemm_mad(g, row, ptx_imm(s->pitch), c16));
}

int64_t gemm_smem_at(const gemm_smem *s, int64_t row, int64_t byte)
{
    return gemm_swz_off(NULL, s, ptx_imm(row), ptx_imm(byte / 16)).u.imm + byte % 16;
}

/* The swizzled offset in a register (an immediate result is moved into one). */
static ptx_reg swz_reg(gemm_ctx *g, const gemm_smem *s, ptx_opd row, ptx_opd chunk)
{
    ptx_opd o = gemm_swz_off(g, s, row, chunk);
    if (o.kind == PTX_O_REG)
        return o.u.reg;
    ptx_reg r = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_MOV, NOM, U32T, ptx_r(r), o);
    return r;
}

void gemm_bar(gemm_ctx *g) { ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0)); }

/* ---- global -> shared loaders ----
 *
 * A stage holds an operand tile as R rows of P bytes, in the global
 * orientation: K-major operands (A 'n', B 't') have rows m / n and k along
 * the row; MN-major ones (A 't', B 'n') have rows k. The tile is cut into
 * pieces of cw bytes (16 when the global rows are 16-byte aligned, else 8,
 * 4, or 2/1 for plain loads) and piece i goes to thread i % T; piece i of
 * thread t is at (row0 + rowimm, pc0 + pcimm), so its source is one
 * per-thread pointer plus an immediate and advances by one constant per k
 * tile. Out-of-range pieces are zero-filled (cp.async src-size 0 or a
 * short src-size at a ragged edge), so the mma reads zeros past M, N, K and
 * the whole stage is always written. */

/* Bytes of a piece that are in range, from elements left (s32 register or
 * immediate): clamp(left, 0, cw/es) * es. */
static ptx_opd clamp_size(gemm_ctx *g, ptx_opd left, int cw, int es)
{
    ptx_reg t = gemm_op2(g, PTX_OP_MAX, left, ptx_imm(0));
    t = gemm_op2(g, PTX_OP_MIN, ptx_r(t), ptx_imm(cw / es));
    if (es > 1)
        t = gemm_op2(g, PTX_OP_SHL, ptx_r(t), ptx_imm(ilog2(es)));
    return ptx_r(t);
}

/* Tile offset of piece j of thread t (compile time), as the loader below
 * assigns pieces: np <= T pieces per row: thread t at row t / np, piece
 * column t % np; else row 0, piece column t. */
static int64_t piece_off(const gemm_loader *ld, int T, int t, int j)
{
    int np = ld->st->row_bytes / ld->cw;
    int64_t row = np <= T ? t / np : 0, pc = np <= T ? t % np : t;
    return gemm_smem_at(ld->st, row + ld->rowimm[j], (pc + ld->pcimm[j]) * ld->cw);
}

/* Whether pieces j and k are the same distance apart for every thread. */
static bool piece_dist(const gemm_loader *ld, int T, int j, int k, int64_t *dist)
{
    *dist = piece_off(ld, T, 0, j) - piece_off(ld, T, 0, k);
    for (int t = 1; t < T; t++)
        if (piece_off(ld, T, t, j) - piece_off(ld, T, t, k) != *dist)
            return false;
    return true;
}

void gemm_loader_init(gemm_ctx *g, gemm_loader *ld, bool is_a)
{
    const pt_prepared *pp = g->pp;
    pt_arena *ar = g->f->mod->arena;
    memset(ld, 0, sizeof *ld);
    ld->st = is_a ? &g->sa : &g->sb;
    ld->kmajor = is_a ? pp->a_kmajor : pp->b_kmajor;
    ld->cw = is_a ? pp->cw_a : pp->cw_b;
    ld->es = g->at->es;
    ld->ld_bytes = (is_a ? pp->lda : pp->ldb) * ld->es;
    ld->mn_lim = is_a ? pp->M : pp->N;
    ld->tile_mn = is_a ? g->bm : g->bn;
    ld->stage_off = is_a ? 0 : g->sa.bytes;
    int R = ld->st->rows, P = ld->st->row_bytes, T = g->threads, cw = ld->cw, es = ld->es;
    int np = P / cw, pt = R * np;
    int n = ld->n = (pt + T - 1) / T;
    ld->rowimm = pt_arena_alloc(ar, (size_t)n * sizeof(int));
    ld->pcimm = pt_arena_alloc(ar, (size_t)n * sizeof(int));
    ld->soff = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    ld->simm = pt_arena_alloc(ar, (size_t)n * sizeof(int));
    ld->guard = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    ld->mnok = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    ld->mnsize = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
    ptx_opd row0, pc0;
    if (np <= T) {
        pc0 = np == 1 ? ptx_imm(0) : ptx_r(gemm_op2(g, PTX_OP_AND, ptx_r(g->tid), ptx_imm(np - 1)));
        row0 = np == 1 ? ptx_r(g->tid) : ptx_r(gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(ilog2(np))));
        for (int j = 0; j < n; j++) {
            ld->rowimm[j] = j * (T / np);
            ld->pcimm[j] = 0;
            if (ld->rowimm[j] + T / np > R) /* only part of the threads have this piece */
                ld->guard[j] = gemm_setp(g, PTX_M_LT, row0, ptx_imm(R - ld->rowimm[j]));
        }
    } else {
        pc0 = ptx_r(g->tid);
        row0 = ptx_imm(0);
        for (int j = 0; j < n; j++) {
            ld->rowimm[j] = (j * T) / np;
            ld->pcimm[j] = (j * T) % np;
        }
    }
    /* shared offsets: piece j shares piece k's register, plus an immediate,
     * when the swizzle puts them a constant distance apart for every thread
     * (candidates: rows 8 apart and chunks a swizzle width apart; the
     * distance is checked through gemm_smem_at, the swizzle itself) */
    int swz = ld->st->swz;
    for (int j = 0; j < n; j++) {
        int rep = -1;
        int64_t dist = 0;
        for (int k = 0; k < j && rep < 0; k++)
            if ((swz == 1 || (ld->rowimm[j] - ld->rowimm[k]) % 8 == 0) &&
                ((ld->pcimm[j] - ld->pcimm[k]) * cw) % (16 * swz) == 0 &&
                piece_dist(ld, T, j, k, &dist))
                rep = k;
        if (rep >= 0) {
            ld->soff[j] = ld->soff[rep];
            ld->simm[j] = ld->simm[rep] + (int)dist;
            continue;
        }
        ptx_opd row = row0.kind == PTX_O_IMM ? ptx_imm(row0.u.imm + ld->rowimm[j])
                      : ld->rowimm[j] ? ptx_r(gemm_op2(g, PTX_OP_ADD, row0, ptx_imm(ld->rowimm[j])))
                                      : row0;
        ptx_opd pc = pc0.kind == PTX_O_IMM ? ptx_imm(pc0.u.imm + ld->pcimm[j])
                     : ld->pcimm[j] ? ptx_r(gemm_op2(g, PTX_OP_ADD, pc0, ptx_imm(ld->pcimm[j])))
                                    : pc0;
        ptx_reg byte = gemm_mul(g, pc, ptx_imm(cw));
        ptx_reg chunk = gemm_op2(g, PTX_OP_SHR, ptx_r(byte), ptx_imm(4));
        ptx_reg off = swz_reg(g, ld->st, row, ptx_r(chunk));
        if (cw < 16) {
            ptx_reg within = gemm_op2(g, PTX_OP_AND, ptx_r(byte), ptx_imm(15));
            off = gemm_op2(g, PTX_OP_ADD, ptx_r(off), ptx_r(within));
        }
        ld->soff[j] = ld->stage_off ? gemm_op2(g, PTX_OP_ADD, ptx_r(off), ptx_imm(ld->stage_off)) : off;
        ld->simm[j] = 0;
    }
    /* source pointer of piece 0 for the CTA's first k tile */
    ptx_reg base = is_a ? g->pa : g->pb;
    ptx_reg mn0 = is_a ? g->m0 : g->n0;
    int64_t bk_el = g->bk;
    ptx_reg gp;
    if (ld->kmajor) {
        ptx_opd row = row0.kind == PTX_O_IMM && row0.u.imm == 0
                          ? ptx_r(mn0) : ptx_r(gemm_op2(g, PTX_OP_ADD, ptx_r(mn0), row0));
        gp = gemm_addr64(g, base, row, ld->ld_bytes);
        ld->step = bk_el * es;
    } else {
        ptx_opd row = row0;
        gp = gemm_addr64(g, base, ptx_r(mn0), es);
        if (g->splitk > 1) {
            ptx_reg kr = gemm_mad(g, ptx_r(g->kt_begin), ptx_imm(bk_el), row0);
            row = ptx_r(kr);
        }
        gp = gemm_addr64(g, gp, row, ld->ld_bytes);
        ld->step = bk_el * ld->ld_bytes;
    }
    gp = gemm_addr64(g, gp, pc0, cw);
    if (ld->kmajor && g->splitk > 1)
        gp = gemm_addr64(g, gp, ptx_r(g->kt_begin), bk_el * es);
    ld->gp = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_B64), ptx_r(ld->gp), ptx_r(gp));

    /* edges. K: only when K is not a multiple of BK (tiles past the end are
     * never loaded). M/N: when the tile can overhang. */
    const pt_prepared *p = pp;
    ld->kedge = p->K % g->bk != 0;
    ld->mnedge = ld->mn_lim % ld->tile_mn != 0;
    int epc = cw / es; /* elements per piece */
    if (ld->kmajor) {
        if (ld->mnedge) {
            ptx_reg r = gemm_op2(g, PTX_OP_ADD, ptx_r(mn0), row0);
            for (int j = 0; j < n; j++)
                ld->mnok[j] = gemm_setp_s(g, PTX_M_LT, ptx_r(r), ptx_imm(ld->mn_lim - ld->rowimm[j]));
        }
        if (ld->kedge) {
            /* elements of k left at piece column pc0 of the first tile */
            ptx_reg kb = gemm_mul(g, pc0, ptx_imm(epc));
            ld->krem = gemm_op2(g, PTX_OP_SUB, ptx_imm(p->K), ptx_r(kb));
            if (g->splitk > 1) {
                ptx_reg k0 = gemm_mul(g, ptx_r(g->kt_begin), ptx_imm(bk_el));
                ptx_emit(g->f, PTX_OP_SUB, NOM, S32T, ptx_r(ld->krem), ptx_r(ld->krem), ptx_r(k0));
            }
        }
    } else {
        if (ld->mnedge) {
            ptx_reg kb = gemm_mul(g, pc0, ptx_imm(epc));
            ptx_reg left0 = gemm_op2(g, PTX_OP_SUB, ptx_imm(ld->mn_lim), ptx_r(mn0));
            left0 = gemm_op2(g, PTX_OP_SUB, ptx_r(left0), ptx_r(kb));
            for (int j = 0; j < n; j++) {
                int k;
                for (k = 0; k < j && ld->pcimm[k] != ld->pcimm[j]; k++)
                    ;
                if (k < j) {
                    ld->mnsize[j] = ld->mnsize[k];
                    continue;
                }
                ptx_opd left = ptx_r(left0);
                if (ld->pcimm[j])
                    left = ptx_r(gemm_op2(g, PTX_OP_SUB, left, ptx_imm((int64_t)ld->pcimm[j] * epc)));
                ptx_opd sz = clamp_size(g, left, cw, es);
                ld->mnsize[j] = sz.u.reg;
            }
        }
        if (ld->kedge) {
            ld->krem = gemm_op2(g, PTX_OP_SUB, ptx_imm(p->K), row0);
            if (g->splitk > 1) {
                ptx_reg k0 = gemm_mul(g, ptx_r(g->kt_begin), ptx_imm(bk_el));
                ptx_emit(g->f, PTX_OP_SUB, NOM, S32T, ptx_r(ld->krem), ptx_r(ld->krem), ptx_r(k0));
            }
        }
    }
}

void gemm_loader_tile(gemm_ctx *g, gemm_loader *ld, ptx_reg stage)
{
    ptx_fn *f = g->f;
    int cw = ld->cw, es = ld->es, epc = cw / es;
    bool async = cw >= 4;
    ptx_reg dst_of[64] = {{0}};
    ptx_reg dst_key[64] = {{0}};
    int ndst = 0;
    /* K-major: in-range bytes of a piece from the k left at its column */
    ptx_opd ksize_pc0 = ptx_imm(cw);
    if (ld->kmajor && ld->kedge && async)
        ksize_pc0 = clamp_size(g, ptx_r(ld->krem), cw, es);
    for (int j = 0; j < ld->n; j++) {
        /* destination register, shared by pieces with one offset register */
        ptx_reg dst = {0};
        for (int k = 0; k < ndst; k++)
            if (dst_key[k].id == ld->soff[j].id)
                dst = dst_of[k];
        if (!dst.id) {
            dst = gemm_op2(g, PTX_OP_ADD, ptx_r(stage), ptx_r(ld->soff[j]));
            if (ndst < 64) {
                dst_key[ndst] = ld->soff[j];
                dst_of[ndst++] = dst;
            }
        }
        int64_t gimm = (int64_t)ld->rowimm[j] * ld->ld_bytes + (int64_t)ld->pcimm[j] * cw;
        ptx_reg src = ld->gp;
        if (gimm > 0x7fffffffll) {
            src = gemm_add64(g, ld->gp, gimm);
            gimm = 0;
        }
        /* what is in range: a size (async) or a predicate (plain loads) */
        ptx_opd size = ptx_imm(cw);
        ptx_reg ok = {0};
        if (ld->kmajor) {
            if (ld->kedge) {
                if (async) {
                    size = ksize_pc0;
                    if (ld->pcimm[j])
                        size = clamp_size(g, ptx_r(gemm_op2(g, PTX_OP_SUB, ptx_r(ld->krem),
                                                            ptx_imm((int64_t)ld->pcimm[j] * epc))),
                                          cw, es);
                } else {
                    ok = gemm_setp_s(g, PTX_M_GT, ptx_r(ld->krem), ptx_imm((int64_t)ld->pcimm[j] * epc));
                }
            }
            if (ld->mnedge) {
                if (async)
                    size = ptx_r(gemm_selp(g, size, ptx_imm(0), ld->mnok[j]));
                else
                    ok = gemm_pand(g, ok, ld->mnok[j]);
            }
        } else {
            if (ld->mnedge) {
                if (async)
                    size = ptx_r(ld->mnsize[j]);
                else
                    ok = gemm_setp_s(g, PTX_M_GT, ptx_r(ld->mnsize[j]), ptx_imm(0));
            }
            if (ld->kedge) {
                ptx_reg kok = gemm_setp_s(g, PTX_M_GT, ptx_r(ld->krem), ptx_imm(ld->rowimm[j]));
                if (async)
                    size = ptx_r(gemm_selp(g, size, ptx_imm(0), kok));
                else
                    ok = gemm_pand(g, ok, kok);
            }
        }
        ptx_ins *in;
        if (async) {
            ptx_mods m = cw == 16 ? PTX_MODS(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL)
                                  : PTX_MODS(PTX_M_CA, PTX_M_SHARED, PTX_M_GLOBAL);
            if (size.kind == PTX_O_IMM)
                in = ptx_emit(f, PTX_OP_CP_ASYNC, m, PTX_NOTYPES, ptx_addr(dst, ld->simm[j]),
                              ptx_addr(src, gimm), ptx_imm(cw));
            else
                in = ptx_emit(f, PTX_OP_CP_ASYNC, m, PTX_NOTYPES, ptx_addr(dst, ld->simm[j]),
                              ptx_addr(src, gimm), ptx_imm(cw), size);
            if (ld->guard[j].id)
                ptx_guard(in, ld->guard[j], false);
        } else {
            /* misaligned rows: one element per piece, through a register */
            ptx_type t = cw == 2 ? PTX_T_B16 : PTX_T_B8;
            ptx_reg v = ptx_reg_new(f, PTX_T_B16);
            ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_B16), ptx_r(v), ptx_imm(0));
            ptx_reg lg = gemm_pand(g, ok, ld->guard[j]);
            in = ptx_emit(f, PTX_OP_LD, M1(PTX_M_GLOBAL), PTX_T1(t), ptx_r(v), ptx_addr(src, gimm));
            if (lg.id)
                ptx_guard(in, lg, false);
            in = ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), PTX_T1(t), ptx_addr(dst, ld->simm[j]),
                          ptx_r(v));
            if (ld->guard[j].id)
                ptx_guard(in, ld->guard[j], false);
        }
    }
    gemm_inc64(g, ld->gp, ld->step);
    if (ld->kedge)
        gemm_inc32(g, ld->krem, -(int64_t)g->bk);
}

/* ---- the multistage pipeline ----
 * Prologue: tiles 0..S-2 into stages 0..S-2, one commit group each. Loop
 * over this CTA's k tiles: wait until tile i has landed (at most S-2 newer
 * groups pending), barrier (tile i visible; every warp is done with the
 * stage of tile i-1), issue tile i+S-1 into that freed stage, commit (an
 * empty group past the end keeps the count uniform), compute tile i.
 *
 * The stage registers hold shared addresses (gemm_smem + stage offset),
 * never offsets from 0: the array's address is not 0 on every arch (sm_90
 * places it above a reserved 1 KB), and every shared access of the main
 * loop is stage + a per-thread offset. */
typedef void (*compute_fn)(gemm_ctx *g, void *arg, ptx_reg stage);

static void stage_advance(gemm_ctx *g, ptx_reg st, ptx_reg end)
{
    ptx_emit(g->f, PTX_OP_ADD, NOM, U32T, ptx_r(st), ptx_r(st), ptx_imm(g->stage_bytes));
    ptx_reg p = gemm_setp(g, PTX_M_GE, ptx_r(st), ptx_r(end));
    ptx_emit(g->f, PTX_OP_SELP, NOM, B32T, ptx_r(st), ptx_r(g->smem), ptx_r(st), ptx_r(p));
}

static void pipeline(gemm_ctx *g, gemm_loader *la, gemm_loader *lb, compute_fn compute, void *arg)
{
    ptx_fn *f = g->f;
    int S = g->stages;
    bool nkt_imm = g->splitk == 1;
    ptx_reg wst = gemm_r32(g);
    ptx_reg end = gemm_op2(g, PTX_OP_ADD, ptx_r(g->smem), ptx_imm((int64_t)S * g->stage_bytes));
    for (int s = 0; s < S - 1; s++) {
        if (s == 0)
            ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(wst), ptx_r(g->smem));
        else
            ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(wst), ptx_r(g->smem),
                     ptx_imm((int64_t)s * g->stage_bytes));
        if (nkt_imm && s >= g->kt_total) {
            ptx_emit0(f, PTX_OP_CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
            continue;
        }
        int skip = -1;
        if (!nkt_imm) {
            skip = ptx_label_new(f);
            ptx_reg p = gemm_setp(g, PTX_M_LE, ptx_r(g->nkt), ptx_imm(s));
            ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(skip)), p, false);
        }
        gemm_loader_tile(g, la, wst);
        gemm_loader_tile(g, lb, wst);
        if (skip >= 0)
            ptx_label_place(f, skip);
        ptx_emit0(f, PTX_OP_CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
    }
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(wst), ptx_r(g->smem),
             ptx_imm((int64_t)(S - 1) * g->stage_bytes));
    ptx_reg rst = gemm_r32(g), i = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(rst), ptx_r(g->smem));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(i), ptx_imm(0));
    ptx_opd nkt = nkt_imm ? ptx_imm(g->kt_total) : ptx_r(g->nkt);
    int top = ptx_label_new(f), noload = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_emit(f, PTX_OP_CP_ASYNC_WAIT, NOM, PTX_NOTYPES, ptx_imm(S - 2));
    gemm_bar(g);
    ptx_reg t = gemm_op2(g, PTX_OP_ADD, ptx_r(i), ptx_imm(S - 1));
    ptx_reg p = gemm_setp(g, PTX_M_GE, ptx_r(t), nkt);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(noload)), p, false);
    gemm_loader_tile(g, la, wst);
    gemm_loader_tile(g, lb, wst);
    ptx_label_place(f, noload);
    ptx_emit0(f, PTX_OP_CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
    stage_advance(g, wst, end);
    compute(g, arg, rst);
    stage_advance(g, rst, end);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(i), ptx_r(i), ptx_imm(1));
    ptx_reg more = gemm_setp(g, PTX_M_LT, ptx_r(i), nkt);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top)), more, false);
    /* the epilogue reuses the stages: drain the (empty) groups, then sync */
    ptx_emit0(f, PTX_OP_CP_ASYNC_WAIT_ALL, NOM, PTX_NOTYPES);
    gemm_bar(g);
}

/* ---- tensor-core main loop ----
 * Warp tile WM x WN of m16n8 atoms (MI x NI); per k-step a warp loads MI A
 * fragments (ldmatrix.x4) and NI/2 B fragment pairs (ldmatrix.x4, two n8
 * tiles each), then issues MI*NI mma.sync. The fragments of k-step s+1 are
 * loaded before the mma of k-step s (two register sets). With kslice > 1
 * the warps of slice q take k-steps [q*KSP, (q+1)*KSP) of every tile.
 *
 * ldmatrix lane addresses (16-byte rows, chunk = 16 bytes of k or of m/n):
 *   A K-major   lane l: row m = l%16,           chunk 2s + l/16
 *   B K-major   lane l: row n = (l/16)*8 + l%8, chunk 2s + (l/8)%2
 *   A MN-major  .trans, lane l, j = l/8: row k = l%8 + 8*(j/2), m chunk j%2
 *   B MN-major  .trans, lane l: row k = l%16,   n chunk l/16
 * Every 8-lane group reads 8 consecutive rows at one logical chunk, which
 * the swizzle spreads over 8 bank groups. tf32 MN-major operands cannot use
 * ldmatrix (it transposes 16-bit elements): scalar ld.shared from a padded
 * tile, a_i at (k = t + 4(i/2), m = g + 8(i%2)), b_i at (k = t + 4i, n = g). */
typedef struct tc_state {
    int MI, NI, KSP;
    int nbase_a, nbase_b;
    ptx_reg base_a[8], base_b[8]; /* per-lane offsets inside a stage */
    ptx_reg afr[2][4][4], bfr[2][8][2];
    ptx_reg *acc;                 /* [MI][NI][4] */
    /* vector operands, built once: fragments, B pairs for ldmatrix, accumulators */
    ptx_opd av[2][4], bv[2][8], bpair[2][4], *accv;
} tc_state;

static void tc_frag_offsets(gemm_ctx *g, tc_state *s, ptx_reg warp_m0, ptx_reg warp_n0)
{
    const pt_prepared *pp = g->pp;
    ptx_reg lane = g->lane;
    ptx_opd ksl = g->kslice > 1 ? ptx_r(g->kslice_idx) : ptx_imm(0);
    bool scalar_a = g->at->tf32 && !pp->a_kmajor, scalar_b = g->at->tf32 && !pp->b_kmajor;
    ptx_reg gq = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(2));
    ptx_reg tq = gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(3));
    for (int op = 0; op < 2; op++) {
        bool is_a = op == 0;
        const gemm_smem *st = is_a ? &g->sa : &g->sb;
        bool kmaj = is_a ? pp->a_kmajor : pp->b_kmajor;
        bool scalar = is_a ? scalar_a : scalar_b;
        ptx_reg w0 = is_a ? warp_m0 : warp_n0;
        int stage_off = is_a ? 0 : g->sa.bytes;
        ptx_reg *out = is_a ? s->base_a : s->base_b;
        int nout = 0;
        if (scalar) {
            /* row k = kbase + t (+4i...), col m|n = w0 + g */
            ptx_reg krow = tq;
            if (g->kslice > 1)
                krow = gemm_mad(g, ksl, ptx_imm((int64_t)s->KSP * 8), ptx_r(tq));
            ptx_reg col = gemm_op2(g, PTX_OP_ADD, ptx_r(w0), ptx_r(gq));
            ptx_reg o = gemm_op2(g, PTX_OP_SHL, ptx_r(col), ptx_imm(2));
            o = gemm_mad(g, ptx_r(krow), ptx_imm(st->pitch), ptx_r(o));
            out[nout++] = gemm_op2(g, PTX_OP_ADD, ptx_r(o), ptx_imm(stage_off));
        } else if (kmaj) {
            /* per k-step: row fixed per lane, chunk = 2*(ksl*KSP + s) + h */
            ptx_reg rowl, h;
            if (is_a) {
                rowl = gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(15));
                h = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(4));
            } else {
                ptx_reg hi = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(4));
                ptx_reg lo = gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(7));
                rowl = gemm_mad(g, ptx_r(hi), ptx_imm(8), ptx_r(lo));
                ptx_reg l8 = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(3));
                h = gemm_op2(g, PTX_OP_AND, ptx_r(l8), ptx_imm(1));
            }
            ptx_reg row = gemm_op2(g, PTX_OP_ADD, ptx_r(w0), ptx_r(rowl));
            ptx_reg c0 = h;
            if (g->kslice > 1)
                c0 = gemm_mad(g, ksl, ptx_imm((int64_t)s->KSP * 2), ptx_r(h));
            for (int ks = 0; ks < s->KSP; ks++) {
                ptx_reg c = ks ? gemm_op2(g, PTX_OP_ADD, ptx_r(c0), ptx_imm(2 * ks)) : c0;
                ptx_reg o = swz_reg(g, st, ptx_r(row), ptx_r(c));
                out[nout++] = stage_off ? gemm_op2(g, PTX_OP_ADD, ptx_r(o), ptx_imm(stage_off)) : o;
            }
        } else {
            /* per 16-wide m|n group i: row = k (lane part), chunk = w0/8 + 2i + lane part */
            ptx_reg rowl, h;
            if (is_a) {
                ptx_reg j = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(3));
                ptx_reg r = gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(7));
                ptx_reg j2 = gemm_op2(g, PTX_OP_SHR, ptx_r(j), ptx_imm(1));
                rowl = gemm_mad(g, ptx_r(j2), ptx_imm(8), ptx_r(r));
                h = gemm_op2(g, PTX_OP_AND, ptx_r(j), ptx_imm(1));
            } else {
                rowl = gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(15));
                h = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(4));
            }
            ptx_reg row = rowl;
            if (g->kslice > 1)
                row = gemm_mad(g, ksl, ptx_imm((int64_t)s->KSP * 16), ptx_r(rowl));
            ptx_reg wc = gemm_op2(g, PTX_OP_SHR, ptx_r(w0), ptx_imm(3));
            ptx_reg c0 = gemm_op2(g, PTX_OP_ADD, ptx_r(wc), ptx_r(h));
            int ngroups = is_a ? s->MI : s->NI / 2;
            for (int i = 0; i < ngroups; i++) {
                ptx_reg c = i ? gemm_op2(g, PTX_OP_ADD, ptx_r(c0), ptx_imm(2 * i)) : c0;
                ptx_reg o = swz_reg(g, st, ptx_r(row), ptx_r(c));
                out[nout++] = stage_off ? gemm_op2(g, PTX_OP_ADD, ptx_r(o), ptx_imm(stage_off)) : o;
            }
        }
        if (is_a)
            s->nbase_a = nout;
        else
            s->nbase_b = nout;
    }
}

static void tf32_round(gemm_ctx *g, ptx_reg r)
{
    ptx_emit(g->f, PTX_OP_CVT, M1(PTX_M_RNA), PTX_TYPES(PTX_T_TF32, PTX_T_F32), ptx_r(r), ptx_r(r));
}

/* Loads the A and B fragments of k-step ks into register set buf. */
static void tc_load_frags(gemm_ctx *g, tc_state *s, const ptx_reg *ba, const ptx_reg *bb, int ks,
                          int buf)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    bool scalar_a = g->at->tf32 && !pp->a_kmajor, scalar_b = g->at->tf32 && !pp->b_kmajor;
    ptx_mods ldm = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, PTX_M_X4, PTX_M_SHARED);
    ptx_mods ldmt = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, PTX_M_X4, PTX_M_TRANS, PTX_M_SHARED);
    for (int mi = 0; mi < s->MI; mi++) {
        ptx_reg *a = s->afr[buf][mi];
        if (scalar_a) {
            for (int i = 0; i < 4; i++) {
                int imm = (ks * 8 + 4 * (i >> 1)) * g->sa.pitch + (mi * 16 + 8 * (i & 1)) * 4;
                ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), B32T, ptx_r(a[i]), ptx_addr(ba[0], imm));
            }
        } else if (pp->a_kmajor) {
            ptx_emit(f, PTX_OP_LDMATRIX, ldm, PTX_T1(PTX_T_B16), s->av[buf][mi],
                     ptx_addr(ba[ks], mi * 16 * g->sa.pitch));
        } else {
            ptx_emit(f, PTX_OP_LDMATRIX, ldmt, PTX_T1(PTX_T_B16), s->av[buf][mi],
                     ptx_addr(ba[mi], ks * 16 * g->sa.pitch));
        }
        if (g->at->tf32)
            for (int i = 0; i < 4; i++)
                tf32_round(g, a[i]);
    }
    for (int np = 0; np < s->NI / 2; np++) {
        ptx_reg *b0 = s->bfr[buf][2 * np], *b1 = s->bfr[buf][2 * np + 1];
        if (scalar_b) {
            for (int q = 0; q < 2; q++)
                for (int i = 0; i < 2; i++) {
                    int imm = (ks * 8 + 4 * i) * g->sb.pitch + ((2 * np + q) * 8) * 4;
                    ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), B32T, ptx_r(q ? b1[i] : b0[i]),
                             ptx_addr(bb[0], imm));
                }
        } else {
            if (pp->b_kmajor)
                ptx_emit(f, PTX_OP_LDMATRIX, ldm, PTX_T1(PTX_T_B16), s->bpair[buf][np],
                         ptx_addr(bb[ks], np * 16 * g->sb.pitch));
            else
                ptx_emit(f, PTX_OP_LDMATRIX, ldmt, PTX_T1(PTX_T_B16), s->bpair[buf][np],
                         ptx_addr(bb[np], ks * 16 * g->sb.pitch));
        }
        if (g->at->tf32)
            for (int i = 0; i < 2; i++) {
                tf32_round(g, b0[i]);
                tf32_round(g, b1[i]);
            }
    }
}

static void tc_compute(gemm_ctx *g, void *arg, ptx_reg stage)
{
    tc_state *s = arg;
    ptx_fn *f = g->f;
    ptx_reg ba[8], bb[8];
    for (int i = 0; i < s->nbase_a; i++)
        ba[i] = gemm_op2(g, PTX_OP_ADD, ptx_r(stage), ptx_r(s->base_a[i]));
    for (int i = 0; i < s->nbase_b; i++)
        bb[i] = gemm_op2(g, PTX_OP_ADD, ptx_r(stage), ptx_r(s->base_b[i]));
    const kit_atom *at = g->at;
    ptx_types mt = PTX_TYPES(at->acc, at->ab, at->ab, at->acc);
    ptx_mods mm = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, at->shape, PTX_M_ROW, PTX_M_COL);
    tc_load_frags(g, s, ba, bb, 0, 0);
    for (int ks = 0; ks < s->KSP; ks++) {
        int buf = ks & 1;
        if (ks + 1 < s->KSP)
            tc_load_frags(g, s, ba, bb, ks + 1, buf ^ 1);
        for (int mi = 0; mi < s->MI; mi++)
            for (int ni = 0; ni < s->NI; ni++) {
                /* serpentine over n keeps one B fragment hot between rows */
                int n = (mi & 1) ? s->NI - 1 - ni : ni;
                ptx_opd cv = s->accv[mi * s->NI + n];
                ptx_emit(f, PTX_OP_MMA, mm, mt, cv, s->av[buf][mi], s->bv[buf][n], cv);
            }
    }
}

/* Warp coordinates: warp w -> slice w / (wm*wn), then m fastest. */
static void warp_coords(gemm_ctx *g, ptx_reg *wm0, ptx_reg *wn0)
{
    int wmn = g->warps_m * g->warps_n;
    ptx_reg wr = g->warp;
    if (g->kslice > 1) {
        g->kslice_idx = gemm_op2(g, PTX_OP_SHR, ptx_r(g->warp), ptx_imm(ilog2(wmn)));
        wr = gemm_op2(g, PTX_OP_AND, ptx_r(g->warp), ptx_imm(wmn - 1));
    }
    ptx_reg im = gemm_op2(g, PTX_OP_AND, ptx_r(wr), ptx_imm(g->warps_m - 1));
    ptx_reg in = gemm_op2(g, PTX_OP_SHR, ptx_r(wr), ptx_imm(ilog2(g->warps_m)));
    *wm0 = gemm_mul(g, ptx_r(im), ptx_imm(g->wm));
    *wn0 = gemm_mul(g, ptx_r(in), ptx_imm(g->wn));
}

void gemm_mainloop_tc(gemm_ctx *g, gemm_accs *acc)
{
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    tc_state s;
    memset(&s, 0, sizeof s);
    s.MI = g->wm / 16;
    s.NI = g->wn / 8;
    s.KSP = g->ksteps / g->kslice;
    ptx_reg wm0, wn0;
    warp_coords(g, &wm0, &wn0);
    gemm_loader la, lb;
    gemm_loader_init(g, &la, true);
    gemm_loader_init(g, &lb, false);
    tc_frag_offsets(g, &s, wm0, wn0);
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
    pipeline(g, &la, &lb, tc_compute, &s);
    /* c_i of atom (mi, ni) is at (g + 8(i/2) + 16 mi, 2t + i%2 + 8 ni) */
    ptx_reg gq = gemm_op2(g, PTX_OP_SHR, ptx_r(g->lane), ptx_imm(2));
    ptx_reg tq = gemm_op2(g, PTX_OP_AND, ptx_r(g->lane), ptx_imm(3));
    acc->n = nacc;
    acc->vec = 2;
    acc->r = s.acc;
    acc->row = pt_arena_alloc(ar, (size_t)nacc * sizeof(int));
    acc->col = pt_arena_alloc(ar, (size_t)nacc * sizeof(int));
    for (int mi = 0; mi < s.MI; mi++)
        for (int ni = 0; ni < s.NI; ni++)
            for (int i = 0; i < 4; i++) {
                int k = (mi * s.NI + ni) * 4 + i;
                acc->row[k] = mi * 16 + 8 * (i >> 1);
                acc->col[k] = ni * 8 + (i & 1);
            }
    acc->row_base = gemm_op2(g, PTX_OP_ADD, ptx_r(wm0), ptx_r(gq));
    ptx_reg t2 = gemm_op2(g, PTX_OP_SHL, ptx_r(tq), ptx_imm(1));
    acc->col_base = gemm_op2(g, PTX_OP_ADD, ptx_r(wn0), ptx_r(t2));
    acc->grp_row = wm0;
    acc->grp_col = wn0;
    acc->grp_rows = g->wm;
    acc->grp_cols = g->wn;
}

/* ---- SIMT main loop (f32 FFMA) ----
 * Thread (ty, tx) owns rows ty*TM.. and columns tx*TN.. of the tile. For
 * each group of 4 k it loads TM x 4 values of A and TN x 4 of B with 16-byte
 * ld.shared (along k from K-major tiles, along m/n from MN-major ones) and
 * issues TM*TN*4 fma.rn.f32. Tiles are padded by 16 bytes per row. */
typedef struct simt_state {
    ptx_reg abase, bbase;
    ptx_reg *acc; /* [TM][TN] */
} simt_state;

/* Loads x[i][q] (i < n rows of the thread, q < 4 k) for k group kq. */
static void simt_load(gemm_ctx *g, ptx_reg base, const gemm_smem *st, bool kmaj, int n, int kq,
                      ptx_reg (*x)[4])
{
    ptx_fn *f = g->f;
    ptx_mods m = M2(PTX_M_SHARED, PTX_M_V4);
    if (kmaj) {
        for (int i = 0; i < n; i++)
            ptx_emit(f, PTX_OP_LD, m, F32T, ptx_vecr(f, 4, x[i]), ptx_addr(base, i * st->pitch + kq * 16));
    } else {
        for (int q = 0; q < 4; q++)
            for (int c = 0; c < n / 4; c++) {
                ptx_reg v[4] = {x[4 * c][q], x[4 * c + 1][q], x[4 * c + 2][q], x[4 * c + 3][q]};
                ptx_emit(f, PTX_OP_LD, m, F32T, ptx_vecr(f, 4, v),
                         ptx_addr(base, (kq * 4 + q) * st->pitch + c * 16));
            }
    }
}

static void simt_compute(gemm_ctx *g, void *arg, ptx_reg stage)
{
    simt_state *s = arg;
    ptx_fn *f = g->f;
    const pt_prepared *pp = g->pp;
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
        simt_load(g, ab, &g->sa, pp->a_kmajor, g->tm, kq, a);
        simt_load(g, bb, &g->sb, pp->b_kmajor, g->tn, kq, b);
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < g->tm; i++)
                for (int j = 0; j < g->tn; j++) {
                    ptx_reg c = s->acc[i * g->tn + j];
                    ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(c), ptx_r(a[i][q]),
                             ptx_r(b[j][q]), ptx_r(c));
                }
    }
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
    gemm_loader la, lb;
    gemm_loader_init(g, &la, true);
    gemm_loader_init(g, &lb, false);
    simt_state s;
    /* A K-major: row (m) row0, chunk kq; MN-major: row k, byte row0*4 */
    s.abase = pp->a_kmajor ? gemm_mul(g, ptx_r(row0), ptx_imm(g->sa.pitch))
                           : gemm_op2(g, PTX_OP_SHL, ptx_r(row0), ptx_imm(2));
    ptx_reg bo = pp->b_kmajor ? gemm_mul(g, ptx_r(col0), ptx_imm(g->sb.pitch))
                              : gemm_op2(g, PTX_OP_SHL, ptx_r(col0), ptx_imm(2));
    s.bbase = gemm_op2(g, PTX_OP_ADD, ptx_r(bo), ptx_imm(g->sa.bytes));
    int nacc = g->tm * g->tn;
    s.acc = pt_arena_alloc(ar, (size_t)nacc * sizeof(ptx_reg));
    for (int i = 0; i < nacc; i++) {
        s.acc[i] = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(s.acc[i]), ptx_f32(0.0f));
    }
    pipeline(g, &la, &lb, simt_compute, &s);
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
