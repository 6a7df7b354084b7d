/* GEMM epilogue: accumulators -> shared-memory staging -> coalesced units
 * -> expression epilogue -> vector stores.
 *
 * Staging. The CTA tile is written to shared memory as f32 (s32 for
 * integer accumulators) in D's storage orientation: "staging rows" are m
 * for row-major D and n for column-major D, so every unit below is a run
 * of E elements contiguous in D. Rows are padded (8 words for the paired
 * row-major writes of mma fragments, 4 for the scalar transposed ones) so
 * the writes are free of bank conflicts. When the tile does not fit in the
 * pipeline's shared memory it is staged in NB bands of BR staging rows,
 * each band holding whole warp (or thread) blocks, one pass per band.
 * With kslice > 1 the slices add into the band one after another.
 *
 * Units. Thread t handles units t, t+T, ... of the band, E elements each
 * (E: the widest access every tensor of the epilogue allows); its
 * pointers to D, C, residuals, per-row and per-column vectors advance by
 * immediates from unit to unit.
 *
 * Parallel split-K (splitk = S > 1, grid.y = S): every split CTA writes its
 * f32/s32 partial tile to the workspace, fences, and counts itself in a
 * per-tile counter; the CTA that arrives last sums the S partials in split
 * order (deterministic whatever the arrival order), runs the epilogue, and
 * clears the partials it read and the counter. No CTA waits on another, so
 * it is also correct on a serial emulator. Workspace (PT_ARG_WORKSPACE):
 * S * tiles * batch partial tiles, then one u32 counter per (batch, tile);
 * zero before the first launch and zero again after every launch. */
#include <string.h>

#include "gen/expr_ptx.h"
#include "gen/gemm_int.h"

#define NOM PTX_NOMODS
#define M1(a) PTX_MODS(a)
#define M2(a, b) PTX_MODS(a, b)
#define U32T PTX_T1(PTX_T_U32)
#define B32T PTX_T1(PTX_T_B32)
#define F32T PTX_T1(PTX_T_F32)

static int ilog2i(int v)
{
    int r = 0;
    while ((1 << r) < v)
        r++;
    return r;
}

typedef struct epi_geom {
    int srows, scols, pitch; /* staging rows/cols (elements), pitch (words) */
    int nb, br;              /* bands and staging rows per band */
    int E;                   /* elements per unit */
    int upr, nu;             /* units per staging row, units per thread per band */
    int64_t srows_lim, scols_lim;
} epi_geom;

static epi_geom geom(const gemm_ctx *g)
{
    const pt_prepared *pp = g->pp;
    epi_geom e;
    bool dc = pp->d_col;
    e.srows = dc ? g->bn : g->bm;
    e.scols = dc ? g->bm : g->bn;
    e.pitch = e.scols + (dc ? 4 : 8);
    e.srows_lim = dc ? pp->N : pp->M;
    e.scols_lim = dc ? pp->M : pp->N;
    int grp = g->at->simt ? (dc ? g->tn : g->tm) : (dc ? g->wn : g->wm);
    int budget = g->stages * g->stage_bytes;
    e.nb = 1;
    while ((e.srows / e.nb) * e.pitch * 4 > budget && e.srows / (2 * e.nb) >= grp &&
           e.srows / (2 * e.nb) >= 8)
        e.nb *= 2;
    e.br = e.srows / e.nb;
    e.E = pp->vec_max;
    while (e.E > e.scols)
        e.E /= 2;
    e.upr = e.scols / e.E;
    e.nu = (e.br * e.upr + g->threads - 1) / g->threads;
    return e;
}

int gemm_epi_smem(const gemm_ctx *g)
{
    epi_geom e = geom(g);
    int bytes = e.br * e.pitch * 4;
    return bytes < 16 ? 16 : bytes;
}

/* ---- loads and stores of E elements ---- */

static int dt_bytes(pt_dtype t) { return pt_dtype_get(t)->bytes; }

static ptx_mods vmods(ptx_mod space, int n, bool nc)
{
    if (nc)
        return n == 4 ? PTX_MODS(space, PTX_M_NC, PTX_M_V4)
             : n == 2 ? PTX_MODS(space, PTX_M_NC, PTX_M_V2) : PTX_MODS(space, PTX_M_NC);
    return n == 4 ? PTX_MODS(space, PTX_M_V4) : n == 2 ? PTX_MODS(space, PTX_M_V2) : PTX_MODS(space);
}

/* n elements of dt at [p + imm] as f32 values (raw: s32 bits kept). */
static void load_vals(gemm_ctx *g, ptx_reg p, int64_t imm, pt_dtype dt, int n, ptx_reg *out,
                      ptx_reg guard, bool raw)
{
    ptx_fn *f = g->f;
    if (imm > 0x7fff0000ll) { /* beyond a 32-bit address offset */
        p = gemm_add64(g, p, imm);
        imm = 0;
    }
    int bytes = n * dt_bytes(dt);
    ptx_ins *in;
    if (dt == PT_F32 || dt == PT_S32) {
        ptx_reg r[16];
        for (int i = 0; i < n; i++)
            r[i] = dt == PT_F32 ? ptx_reg_new(f, PTX_T_F32) : gemm_r32(g);
        for (int i = 0; i < n; i += 4) {
            int k = n - i < 4 ? n - i : 4;
            ptx_opd d = k == 1 ? ptx_r(r[i]) : ptx_vecr(f, k, &r[i]);
            in = ptx_emit(f, PTX_OP_LD, vmods(PTX_M_GLOBAL, k, true),
                          dt == PT_F32 ? F32T : B32T, d, ptx_addr(p, imm + 4 * i));
            if (guard.id)
                ptx_guard(in, guard, false);
        }
        for (int i = 0; i < n; i++) {
            if (dt == PT_S32 && !raw) {
                ptx_reg v = ptx_reg_new(f, PTX_T_F32);
                ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(PTX_T_F32, PTX_T_S32), ptx_r(v),
                         ptx_r(r[i]));
                out[i] = v;
            } else
                out[i] = r[i];
        }
        return;
    }
    /* 16-bit floats */
    ptx_type ct = dt == PT_F16 ? PTX_T_F16 : PTX_T_BF16;
    ptx_reg h[16];
    for (int i = 0; i < n; i++)
        h[i] = ptx_reg_new(f, PTX_T_B16);
    if (bytes == 2) {
        in = ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), PTX_T1(PTX_T_B16), ptx_r(h[0]),
                      ptx_addr(p, imm));
        if (guard.id)
            ptx_guard(in, guard, false);
    } else {
        int nw = bytes / 4;
        ptx_reg w[4];
        for (int i = 0; i < nw; i++)
            w[i] = gemm_r32(g);
        in = ptx_emit(f, PTX_OP_LD, vmods(PTX_M_GLOBAL, nw, true), B32T,
                      nw == 1 ? ptx_r(w[0]) : ptx_vecr(f, nw, w), ptx_addr(p, imm));
        if (guard.id)
            ptx_guard(in, guard, false);
        for (int i = 0; i < nw; i++) {
            ptx_opd parts[2] = {ptx_r(h[2 * i]), ptx_r(h[2 * i + 1])};
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_vec(f, 2, parts), ptx_r(w[i]));
        }
    }
    for (int i = 0; i < n; i++) {
        out[i] = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_F32, ct), ptx_r(out[i]), ptx_r(h[i]));
    }
}

/* Stores n values (f32, or s32 bits for PT_S32 when raw) as dt at [p + imm]. */
static void store_vals(gemm_ctx *g, ptx_reg p, int64_t imm, pt_dtype dt, int n, const ptx_reg *v,
                       ptx_reg guard, bool raw)
{
    ptx_fn *f = g->f;
    if (imm > 0x7fff0000ll) {
        p = gemm_add64(g, p, imm);
        imm = 0;
    }
    ptx_reg w[8];
    int nw = 0;
    ptx_type sub = PTX_T_B32; /* sub-word store type when the run is < 4 bytes */
    ptx_reg subr = {0};
    switch (dt) {
    case PT_F32:
    case PT_S32:
        for (int i = 0; i < n; i++) {
            if (dt == PT_S32 && !raw) {
                ptx_reg r = gemm_r32(g);
                ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RNI), PTX_TYPES(PTX_T_S32, PTX_T_F32), ptx_r(r),
                         ptx_r(v[i]));
                w[nw++] = r;
            } else
                w[nw++] = v[i];
        }
        break;
    case PT_F16:
    case PT_BF16: {
        ptx_type t1 = dt == PT_F16 ? PTX_T_F16 : PTX_T_BF16;
        ptx_type t2 = dt == PT_F16 ? PTX_T_F16X2 : PTX_T_BF16X2;
        if (n == 1) {
            subr = ptx_reg_new(f, PTX_T_B16);
            sub = PTX_T_B16;
            ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(t1, PTX_T_F32), ptx_r(subr), ptx_r(v[0]));
            break;
        }
        for (int i = 0; i < n; i += 2) {
            ptx_reg r = gemm_r32(g);
            /* cvt.rn.f16x2.f32 d, hi, lo */
            ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(t2, PTX_T_F32), ptx_r(r), ptx_r(v[i + 1]),
                     ptx_r(v[i]));
            w[nw++] = r;
        }
        break;
    }
    case PT_E4M3:
    case PT_E5M2: {
        ptx_type t = dt == PT_E4M3 ? PTX_T_E4M3X2 : PTX_T_E5M2X2;
        ptx_reg q[8] = {{0}};
        int nq = (n + 1) / 2;
        for (int i = 0; i < nq; i++) {
            q[i] = ptx_reg_new(f, PTX_T_B16);
            ptx_opd hi = 2 * i + 1 < n ? ptx_r(v[2 * i + 1]) : ptx_f32(0.0f);
            /* d[15:8] = fp8(hi), d[7:0] = fp8(lo) */
            ptx_emit(f, PTX_OP_CVT, M2(PTX_M_RN, PTX_M_SATFINITE), PTX_TYPES(t, PTX_T_F32),
                     ptx_r(q[i]), hi, ptx_r(v[2 * i]));
        }
        if (n <= 2) {
            subr = q[0];
            sub = n == 1 ? PTX_T_B8 : PTX_T_B16;
            break;
        }
        for (int i = 0; i < nq; i += 2) {
            ptx_reg r = gemm_r32(g);
            ptx_opd parts[2] = {ptx_r(q[i]), ptx_r(q[i + 1])};
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(r), ptx_vec(f, 2, parts));
            w[nw++] = r;
        }
        break;
    }
    default: pt_errf(&f->mod->err, PT_EINTERNAL, "gemm: no store for dtype %s", pt_dtype_get(dt)->name); return;
    }
    ptx_ins *in;
    if (subr.id) {
        in = ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), PTX_T1(sub), ptx_addr(p, imm), ptx_r(subr));
        if (guard.id)
            ptx_guard(in, guard, false);
        return;
    }
    ptx_types ty = dt == PT_F32 ? F32T : B32T;
    for (int i = 0; i < nw; i += 4) {
        int k = nw - i < 4 ? nw - i : 4;
        in = ptx_emit(f, PTX_OP_ST, vmods(PTX_M_GLOBAL, k, false), ty, ptx_addr(p, imm + 4 * i),
                      k == 1 ? ptx_r(w[i]) : ptx_vecr(f, k, &w[i]));
        if (guard.id)
            ptx_guard(in, guard, false);
    }
}

/* ---- staging ---- */

/* Writes (q == 0) or adds (q > 0) the accumulators into the band whose
 * first staging row is pb; sbase: the thread's staging byte address of
 * (row_base, col_base) relative to band row 0. */
static void stage_accs(gemm_ctx *g, const epi_geom *e, const gemm_accs *acc, ptx_reg sbase, bool add)
{
    ptx_fn *f = g->f;
    bool dc = g->pp->d_col;
    bool intacc = g->at->acc != PTX_T_F32 && !g->at->simt;
    ptx_types ty = intacc ? PTX_T1(PTX_T_S32) : F32T;
    ptx_types ldt = intacc ? B32T : F32T;
    int vec = dc ? 1 : acc->vec;
    for (int i = 0; i < acc->n; i += vec) {
        int off = dc ? (acc->col[i] * e->pitch + acc->row[i]) * 4
                     : (acc->row[i] * e->pitch + acc->col[i]) * 4;
        ptx_reg src[4];
        for (int k = 0; k < vec; k++)
            src[k] = acc->r[i + k];
        if (add) {
            ptx_reg old[4];
            for (int k = 0; k < vec; k++)
                old[k] = intacc ? gemm_r32(g) : ptx_reg_new(f, PTX_T_F32);
            ptx_emit(f, PTX_OP_LD, vmods(PTX_M_SHARED, vec, false), ldt,
                     vec == 1 ? ptx_r(old[0]) : ptx_vecr(f, vec, old), ptx_addr(sbase, off));
            for (int k = 0; k < vec; k++) {
                ptx_reg s = intacc ? gemm_r32(g) : ptx_reg_new(f, PTX_T_F32);
                ptx_emit(f, PTX_OP_ADD, NOM, ty, ptx_r(s), ptx_r(old[k]), ptx_r(src[k]));
                src[k] = s;
            }
        }
        ptx_emit(f, PTX_OP_ST, vmods(PTX_M_SHARED, vec, false), ldt, ptx_addr(sbase, off),
                 vec == 1 ? ptx_r(src[0]) : ptx_vecr(f, vec, src));
    }
}

/* ---- units ---- */

typedef enum unit_src { SRC_SMEM, SRC_WS_WRITE, SRC_WS_SUM } unit_src;

typedef struct unit_map {
    ptx_reg ur0, uc0;      /* thread's first unit: band row, unit column */
    int *urimm, *ucimm;    /* per unit i */
    ptx_reg *guard;        /* per unit: thread has it (id 0: always) */
    ptx_reg sbuf;          /* staging byte address of the first unit */
} unit_map;

static void unit_map_init(gemm_ctx *g, const epi_geom *e, unit_map *u)
{
    pt_arena *ar = g->f->mod->arena;
    int T = g->threads;
    u->urimm = pt_arena_alloc(ar, (size_t)e->nu * sizeof(int));
    u->ucimm = pt_arena_alloc(ar, (size_t)e->nu * sizeof(int));
    u->guard = pt_arena_alloc(ar, (size_t)e->nu * sizeof(ptx_reg));
    if (e->upr <= T) {
        u->uc0 = gemm_op2(g, PTX_OP_AND, ptx_r(g->tid), ptx_imm(e->upr - 1));
        u->ur0 = gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(ilog2i(e->upr)));
        for (int i = 0; i < e->nu; i++) {
            u->urimm[i] = i * (T / e->upr);
            u->ucimm[i] = 0;
            if (u->urimm[i] + T / e->upr > e->br)
                u->guard[i] = gemm_setp(g, PTX_M_LT, ptx_r(u->ur0), ptx_imm(e->br - u->urimm[i]));
        }
    } else {
        u->uc0 = g->tid;
        u->ur0 = gemm_r32(g);
        ptx_emit(g->f, PTX_OP_MOV, NOM, U32T, ptx_r(u->ur0), ptx_imm(0));
        for (int i = 0; i < e->nu; i++) {
            u->urimm[i] = (i * T) / e->upr;
            u->ucimm[i] = (i * T) % e->upr;
        }
    }
    /* (ur0 * pitch + uc0 * E) * 4 */
    ptx_reg c = gemm_mul(g, ptx_r(u->uc0), ptx_imm(e->E * 4));
    ptx_reg o = gemm_mad(g, ptx_r(u->ur0), ptx_imm(e->pitch * 4), ptx_r(c));
    u->sbuf = gemm_op2(g, PTX_OP_ADD, ptx_r(o), ptx_r(g->smem));
}

/* Per-pass pointers and checks. */
typedef struct unit_pass {
    ptx_reg srow0, scol0;      /* global staging row / col of the first unit */
    ptx_reg d, c, aux[GEMM_MAX_AUX], ws;
    ptx_reg zero;              /* b32 0, to clear consumed partials */
    ptx_reg colok;             /* scol0 in range (id 0: always) */
} unit_pass;

static ptx_reg ptr2d(gemm_ctx *g, ptx_reg base, ptx_reg row, int64_t ld, ptx_reg col, int es)
{
    ptx_reg p = gemm_addr64(g, base, ptx_r(row), ld * es);
    return gemm_addr64(g, p, ptx_r(col), es);
}

/* Evaluates the epilogue of one element; a: raw accumulator value. */
static ptx_reg epi_value(gemm_ctx *g, ptx_reg a, ptx_reg cval, const ptx_reg *auxv, ptx_opd *val)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    if (pp->int_exact) {
        if (!cval.id)
            return a;
        ptx_reg s = gemm_r32(g);
        ptx_emit(f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S32), ptx_r(s), ptx_r(a), ptx_r(cval));
        return s;
    }
    ptx_reg af = a;
    if (g->at->int_acc) {
        af = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(PTX_T_F32, PTX_T_S32), ptx_r(af), ptx_r(a));
    }
    if (g->scale_ab.id) {
        ptx_reg s = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(s), ptx_r(af), ptx_r(g->scale_ab));
        af = s;
    }
    const ex_prog *p = pp->epi;
    for (int i = 0; i < p->nnodes; i++) {
        const ex_node *n = &p->nodes[i];
        if (n->kind == EX_INPUT) {
            int k = n->input;
            if (k == pp->in_acc)
                val[i] = ptx_r(af);
            else if (k == pp->in_alpha)
                val[i] = ptx_r(g->alpha);
            else if (k == pp->in_beta)
                val[i] = ptx_r(g->beta);
            else if (k == pp->in_c)
                val[i] = ptx_r(cval);
            else
                for (int j = 0; j < pp->naux; j++)
                    if (pp->aux[j].input == k)
                        val[i] = ptx_r(auxv[j]);
            continue;
        }
        ptx_opd args[3];
        for (int k = 0; k < n->nargs; k++)
            args[k] = val[n->arg[k]];
        val[i] = ex_ptx_node(f, n, args);
    }
    ptx_opd r = val[p->outputs[0].node];
    bool fp8 = pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2;
    if (r.kind == PTX_O_REG && !fp8 && ptx_reg_type(f, r.u.reg) == PTX_T_F32)
        return r.u.reg;
    ptx_reg out = ptx_reg_new(f, PTX_T_F32);
    if (fp8)
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(out), r, ptx_r(g->out_scale));
    else
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(out), r);
    return out;
}

static void emit_units(gemm_ctx *g, const epi_geom *e, const unit_map *u, const unit_pass *up,
                       unit_src src)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    bool intacc = g->at->int_acc;
    int E = e->E;
    int64_t tile_words = (int64_t)e->srows * e->scols;
    bool dc = pp->d_col;
    ptx_opd *val = pp->epi ? pt_arena_alloc(ar, (size_t)pp->epi->nnodes * sizeof(ptx_opd)) : NULL;
    for (int i = 0; i < e->nu; i++) {
        ptx_reg guard = u->guard[i];
        int64_t wimm = ((int64_t)u->urimm[i] * e->scols + (int64_t)u->ucimm[i] * E) * 4;
        ptx_reg acc[16];
        if (src == SRC_WS_SUM) {
            for (int s = 0; s < g->splitk; s++) {
                ptx_reg part[16];
                int64_t imm = wimm + (int64_t)s * tile_words * 4;
                for (int k = 0; k < E; k += 4) {
                    int n = E - k < 4 ? E - k : 4;
                    for (int q = 0; q < n; q++)
                        part[k + q] = intacc ? gemm_r32(g) : ptx_reg_new(f, PTX_T_F32);
                    ptx_mods m = n == 4 ? PTX_MODS(PTX_M_GLOBAL, PTX_M_CG, PTX_M_V4)
                               : n == 2 ? PTX_MODS(PTX_M_GLOBAL, PTX_M_CG, PTX_M_V2)
                                        : PTX_MODS(PTX_M_GLOBAL, PTX_M_CG);
                    ptx_ins *in = ptx_emit(f, PTX_OP_LD, m, intacc ? B32T : F32T,
                                           n == 1 ? ptx_r(part[k]) : ptx_vecr(f, n, &part[k]),
                                           ptx_addr(up->ws, imm + 4 * k));
                    if (guard.id)
                        ptx_guard(in, guard, false);
                    /* consumed: back to zero for the next launch */
                    ptx_reg z[4] = {up->zero, up->zero, up->zero, up->zero};
                    in = ptx_emit(f, PTX_OP_ST, vmods(PTX_M_GLOBAL, n, false), B32T,
                                  ptx_addr(up->ws, imm + 4 * k),
                                  n == 1 ? ptx_r(z[0]) : ptx_vecr(f, n, z));
                    if (guard.id)
                        ptx_guard(in, guard, false);
                }
                for (int k = 0; k < E; k++) {
                    if (s == 0) {
                        acc[k] = part[k];
                        continue;
                    }
                    ptx_reg sum = intacc ? gemm_r32(g) : ptx_reg_new(f, PTX_T_F32);
                    ptx_emit(f, PTX_OP_ADD, NOM, intacc ? PTX_T1(PTX_T_S32) : F32T, ptx_r(sum),
                             ptx_r(acc[k]), ptx_r(part[k]));
                    acc[k] = sum;
                }
            }
        } else {
            int64_t simm = ((int64_t)u->urimm[i] * e->pitch + (int64_t)u->ucimm[i] * E) * 4;
            for (int k = 0; k < E; k += 4) {
                int n = E - k < 4 ? E - k : 4;
                for (int q = 0; q < n; q++)
                    acc[k + q] = intacc ? gemm_r32(g) : ptx_reg_new(f, PTX_T_F32);
                ptx_ins *in = ptx_emit(f, PTX_OP_LD, vmods(PTX_M_SHARED, n, false),
                                       intacc ? B32T : F32T,
                                       n == 1 ? ptx_r(acc[k]) : ptx_vecr(f, n, &acc[k]),
                                       ptx_addr(u->sbuf, simm + 4 * k));
                if (guard.id) /* past the band: this thread has no such unit */
                    ptx_guard(in, guard, false);
            }
        }
        if (src == SRC_WS_WRITE) {
            int64_t imm = wimm;
            for (int k = 0; k < E; k += 4) {
                int n = E - k < 4 ? E - k : 4;
                ptx_ins *in = ptx_emit(f, PTX_OP_ST, vmods(PTX_M_GLOBAL, n, false),
                                       intacc ? B32T : F32T, ptx_addr(up->ws, imm + 4 * k),
                                       n == 1 ? ptx_r(acc[k]) : ptx_vecr(f, n, &acc[k]));
                if (guard.id)
                    ptx_guard(in, guard, false);
            }
            continue;
        }
        /* in range: staging row and the unit's columns */
        ptx_reg ok = guard;
        if (e->srows_lim % e->srows)
            ok = gemm_pand(g, ok, gemm_setp_s(g, PTX_M_LT, ptx_r(up->srow0),
                                              ptx_imm(e->srows_lim - u->urimm[i])));
        if (e->scols_lim % e->scols) {
            ptx_reg cok = u->ucimm[i] ? gemm_setp_s(g, PTX_M_LT, ptx_r(up->scol0),
                                                    ptx_imm(e->scols_lim - (int64_t)u->ucimm[i] * E))
                                      : up->colok;
            ok = gemm_pand(g, ok, cok);
        }
        int64_t rimm = u->urimm[i], cimm = (int64_t)u->ucimm[i] * E;
        ptx_reg cv[16] = {{0}};
        if (pp->has_c)
            load_vals(g, up->c, (rimm * pp->ldc + cimm) * dt_bytes(pp->c_dt), pp->c_dt, E, cv, ok,
                      pp->int_exact);
        ptx_reg av[GEMM_MAX_AUX][16];
        for (int j = 0; j < pp->naux; j++) {
            const gemm_aux *x = &pp->aux[j];
            int es = dt_bytes(pp->aux_dt);
            if (x->kind == GEMM_AUX_FULL) {
                load_vals(g, up->aux[j], (rimm * e->scols_lim + cimm) * es, pp->aux_dt, E, av[j], ok,
                          false);
            } else if ((x->kind == GEMM_AUX_N) == !dc) {
                load_vals(g, up->aux[j], cimm * es, pp->aux_dt, E, av[j], ok, false); /* along the unit */
            } else {
                load_vals(g, up->aux[j], rimm * es, pp->aux_dt, 1, av[j], ok, false); /* one per row */
                for (int k = 1; k < E; k++)
                    av[j][k] = av[j][0];
            }
        }
        ptx_reg out[16];
        for (int k = 0; k < E; k++) {
            ptx_reg ax[GEMM_MAX_AUX];
            for (int j = 0; j < pp->naux; j++)
                ax[j] = av[j][k];
            out[k] = epi_value(g, acc[k], cv[k], ax, val);
        }
        store_vals(g, up->d, (rimm * pp->ldd + cimm) * dt_bytes(pp->out_dt), pp->out_dt, E, out, ok,
                   pp->int_exact);
    }
}

/* The units of a pass: unrolled (immediate offsets, the default), or a
 * run-time loop over one unit at a time when the epilogue is heavy enough
 * that unrolling would only bloat the kernel (and the units advance by a
 * constant stride: a staging row has at most T units). */
static void emit_all_units(gemm_ctx *g, const epi_geom *e, const unit_map *u, const unit_pass *up,
                           unit_src src)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    int cost = 1;
    if (pp->epi && src != SRC_WS_WRITE)
        for (int i = 0; i < pp->epi->nnodes; i++)
            cost += ex_kind_get(pp->epi->nodes[i].kind)->flops;
    if (src == SRC_WS_SUM)
        cost += g->splitk;
    int T = g->threads;
    if (e->nu < 4 || e->upr > T || cost * e->E * e->nu <= 256) {
        emit_units(g, e, u, up, src);
        return;
    }
    int rs = T / e->upr; /* staging rows from one unit of a thread to its next */
    epi_geom e1 = *e;
    e1.nu = 1;
    int zero = 0;
    ptx_reg guard1 = {0};
    unit_map u1 = *u;
    u1.urimm = &zero;
    u1.ucimm = &zero;
    u1.guard = &guard1;
    unit_pass up1 = *up;
    /* loop copies of everything that advances */
    ptx_reg *adv32[2] = {&u1.sbuf, &up1.srow0};
    int64_t step32[2] = {(int64_t)rs * e->pitch * 4, rs};
    for (int k = 0; k < 2; k++) {
        ptx_reg r = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_r(*adv32[k]));
        *adv32[k] = r;
    }
    ptx_reg *adv64[4 + GEMM_MAX_AUX];
    int64_t step64[4 + GEMM_MAX_AUX];
    int n64 = 0;
    bool dc = pp->d_col;
    if (src == SRC_WS_WRITE || src == SRC_WS_SUM) {
        adv64[n64] = &up1.ws;
        step64[n64++] = (int64_t)rs * e->scols * 4;
    }
    if (src != SRC_WS_WRITE) {
        adv64[n64] = &up1.d;
        step64[n64++] = (int64_t)rs * pp->ldd * dt_bytes(pp->out_dt);
        if (pp->has_c) {
            adv64[n64] = &up1.c;
            step64[n64++] = (int64_t)rs * pp->ldc * dt_bytes(pp->c_dt);
        }
        for (int j = 0; j < pp->naux; j++) {
            const gemm_aux *x = &pp->aux[j];
            int64_t es = dt_bytes(pp->aux_dt);
            adv64[n64] = &up1.aux[j];
            step64[n64++] = x->kind == GEMM_AUX_FULL ? rs * e->scols_lim * es
                          : (x->kind == GEMM_AUX_N) == !dc ? 0 : rs * es;
        }
    }
    for (int k = 0; k < n64; k++) {
        ptx_reg r = gemm_r64(g);
        ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_B64), ptx_r(r), ptx_r(*adv64[k]));
        *adv64[k] = r;
    }
    ptx_reg ur = {0};
    if (e->nu * rs > e->br) { /* the last unit is only some threads' */
        ur = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(ur), ptx_r(u->ur0));
    }
    ptx_reg i = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(i), ptx_imm(0));
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    if (ur.id)
        guard1 = gemm_setp(g, PTX_M_LT, ptx_r(ur), ptx_imm(e->br));
    emit_units(g, &e1, &u1, &up1, src);
    for (int k = 0; k < 2; k++)
        gemm_inc32(g, *adv32[k], step32[k]);
    for (int k = 0; k < n64; k++)
        gemm_inc64(g, *adv64[k], step64[k]);
    if (ur.id)
        gemm_inc32(g, ur, rs);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(i), ptx_r(i), ptx_imm(1));
    ptx_reg more = gemm_setp(g, PTX_M_LT, ptx_r(i), ptx_imm(e->nu));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top)), more, false);
}

/* Pointers of a pass whose band starts at staging row pb (register). */
static void pass_pointers(gemm_ctx *g, const epi_geom *e, const unit_map *u, ptx_opd pb,
                          unit_pass *up, bool need_out, bool need_ws)
{
    const pt_prepared *pp = g->pp;
    bool dc = pp->d_col;
    ptx_reg st0 = dc ? g->n0 : g->m0, sc0 = dc ? g->m0 : g->n0;
    ptx_reg r = gemm_op2(g, PTX_OP_ADD, ptx_r(st0), ptx_r(u->ur0));
    if (pb.kind != PTX_O_IMM || pb.u.imm)
        r = gemm_op2(g, PTX_OP_ADD, ptx_r(r), pb);
    up->srow0 = r;
    up->scol0 = gemm_mad(g, ptx_r(u->uc0), ptx_imm(e->E), ptx_r(sc0));
    up->colok = (ptx_reg){0};
    if (e->scols_lim % e->scols)
        up->colok = gemm_setp_s(g, PTX_M_LT, ptx_r(up->scol0), ptx_imm(e->scols_lim));
    if (need_ws) {
        /* ws + ((bidx*tiles + tile)*S + split)*tile_words*4 + (pb + ur0)*scols*4 + uc0*E*4 */
        ptx_reg bt = gemm_mad(g, ptx_r(g->bidx), ptx_imm(g->tiles), ptx_r(g->tile));
        ptx_reg ws = gemm_addr64(g, g->pws, ptx_r(bt),
                                 (int64_t)g->splitk * e->srows * e->scols * 4);
        ptx_reg lr = u->ur0;
        if (pb.kind != PTX_O_IMM || pb.u.imm)
            lr = gemm_op2(g, PTX_OP_ADD, ptx_r(u->ur0), pb);
        ptx_reg lo = gemm_mul(g, ptx_r(u->uc0), ptx_imm(e->E));
        lo = gemm_mad(g, ptx_r(lr), ptx_imm(e->scols), ptx_r(lo));
        up->ws = gemm_addr64(g, ws, ptx_r(lo), 4);
        up->zero = gemm_r32(g);
        ptx_emit(g->f, PTX_OP_MOV, NOM, B32T, ptx_r(up->zero), ptx_imm(0));
    }
    if (!need_out)
        return;
    up->d = ptr2d(g, g->pd, up->srow0, pp->ldd, up->scol0, dt_bytes(pp->out_dt));
    if (pp->has_c)
        up->c = ptr2d(g, g->pc, up->srow0, pp->ldc, up->scol0, dt_bytes(pp->c_dt));
    int es = dt_bytes(pp->aux_dt);
    for (int j = 0; j < pp->naux; j++) {
        const gemm_aux *x = &pp->aux[j];
        if (x->kind == GEMM_AUX_FULL)
            up->aux[j] = ptr2d(g, g->paux[j], up->srow0, e->scols_lim, up->scol0, es);
        else if ((x->kind == GEMM_AUX_N) == !dc)
            up->aux[j] = gemm_addr64(g, g->paux[j], ptx_r(up->scol0), es);
        else
            up->aux[j] = gemm_addr64(g, g->paux[j], ptx_r(up->srow0), es);
    }
}

void gemm_epilogue(gemm_ctx *g, const gemm_accs *acc)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    epi_geom e = geom(g);
    bool dc = pp->d_col;
    unit_map u;
    unit_map_init(g, &e, &u);
    /* staging address of (row_base, col_base) for band row 0 */
    ptx_reg sr = dc ? acc->col_base : acc->row_base, sc = dc ? acc->row_base : acc->col_base;
    ptx_reg sb = gemm_mad(g, ptx_r(sr), ptx_imm(e.pitch), ptx_r(sc));
    sb = gemm_op2(g, PTX_OP_SHL, ptx_r(sb), ptx_imm(2));
    sb = gemm_op2(g, PTX_OP_ADD, ptx_r(sb), ptx_r(g->smem));
    ptx_reg grp0 = dc ? acc->grp_col : acc->grp_row;
    bool splitk = g->splitk > 1;

    /* pass loop over bands (a run-time loop when NB > 1) */
    ptx_reg pbr = {0};
    int top = -1;
    ptx_opd pb = ptx_imm(0);
    if (e.nb > 1) {
        pbr = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(pbr), ptx_imm(0));
        top = ptx_label_new(f);
        ptx_label_place(f, top);
        pb = ptx_r(pbr);
    }
    ptx_reg sbp = sb;
    ptx_reg inband = {0};
    if (e.nb > 1) {
        ptx_reg back = gemm_mul(g, pb, ptx_imm(e.pitch * 4));
        sbp = gemm_op2(g, PTX_OP_SUB, ptx_r(sb), ptx_r(back));
        ptx_reg d = gemm_op2(g, PTX_OP_SUB, ptx_r(grp0), pb);
        inband = gemm_setp(g, PTX_M_LT, ptx_r(d), ptx_imm(e.br));
    }
    for (int q = 0; q < g->kslice; q++) {
        ptx_reg cond = inband;
        if (g->kslice > 1)
            cond = gemm_pand(g, cond, gemm_setp(g, PTX_M_EQ, ptx_r(g->kslice_idx), ptx_imm(q)));
        int skip = -1;
        if (cond.id) {
            skip = ptx_label_new(f);
            ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skip)), cond, true);
        }
        stage_accs(g, &e, acc, sbp, q > 0);
        if (skip >= 0)
            ptx_label_place(f, skip);
        gemm_bar(g);
    }
    unit_pass up;
    pass_pointers(g, &e, &u, pb, &up, !splitk, splitk);
    if (splitk) /* this split's own partial tile */
        up.ws = gemm_addr64(g, up.ws, ptx_r(g->split), (int64_t)e.srows * e.scols * 4);
    emit_all_units(g, &e, &u, &up, splitk ? SRC_WS_WRITE : SRC_SMEM);
    if (e.nb > 1) {
        gemm_bar(g);
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(pbr), ptx_r(pbr), ptx_imm(e.br));
        ptx_reg more = gemm_setp(g, PTX_M_LT, ptx_r(pbr), ptx_imm(e.srows));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top)), more, false);
    }
    if (!splitk)
        return;

    /* split-K: count this CTA; the last one sums the partials */
    int done = ptx_label_new(f);
    ptx_emit0(f, PTX_OP_FENCE, M2(PTX_M_ACQ_REL, PTX_M_GPU), PTX_NOTYPES);
    gemm_bar(g);
    int64_t part_bytes = (int64_t)pp->batch * g->tiles * g->splitk * e.srows * e.scols * 4;
    ptx_reg bt = gemm_mad(g, ptx_r(g->bidx), ptx_imm(g->tiles), ptx_r(g->tile));
    ptx_reg cnt = gemm_addr64(g, g->pws, ptx_r(bt), 4);
    cnt = gemm_add64(g, cnt, part_bytes);
    ptx_reg t0 = gemm_setp(g, PTX_M_EQ, ptx_r(g->tid), ptx_imm(0));
    ptx_reg old = gemm_r32(g);
    ptx_guard(ptx_emit(f, PTX_OP_ATOM, M2(PTX_M_GLOBAL, PTX_M_ADD), U32T, ptx_r(old),
                       ptx_addr(cnt, 0), ptx_imm(1)),
              t0, false);
    ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), U32T, ptx_addr(g->smem, 0), ptx_r(old)), t0,
              false);
    gemm_bar(g);
    ptx_reg seen = gemm_r32(g);
    ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), U32T, ptx_r(seen), ptx_addr(g->smem, 0));
    ptx_reg notlast = gemm_setp(g, PTX_M_NE, ptx_r(seen), ptx_imm(g->splitk - 1));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(done)), notlast, false);
    ptx_reg zero = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(zero), ptx_imm(0));
    ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), U32T, ptx_addr(cnt, 0), ptx_r(zero)), t0,
              false);
    ptx_emit0(f, PTX_OP_FENCE, M2(PTX_M_ACQ_REL, PTX_M_GPU), PTX_NOTYPES);
    /* sum the partials of splits 0..S-1 in order */
    ptx_reg pb2 = {0};
    int top2 = -1;
    ptx_opd pbo = ptx_imm(0);
    if (e.nb > 1) {
        pb2 = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(pb2), ptx_imm(0));
        top2 = ptx_label_new(f);
        ptx_label_place(f, top2);
        pbo = ptx_r(pb2);
    }
    unit_pass up2;
    pass_pointers(g, &e, &u, pbo, &up2, true, true);
    emit_all_units(g, &e, &u, &up2, SRC_WS_SUM);
    if (e.nb > 1) {
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(pb2), ptx_r(pb2), ptx_imm(e.br));
        ptx_reg more = gemm_setp(g, PTX_M_LT, ptx_r(pb2), ptx_imm(e.srows));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top2)), more, false);
    }
    ptx_label_place(f, done);
}
