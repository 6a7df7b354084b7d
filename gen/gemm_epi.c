/* GEMM epilogue: accumulator fragments -> (k-slice sum) -> expression
 * epilogue -> shared-memory staging -> coalesced units -> vector stores.
 *
 * It reads the accumulator fragment (gen/kit/frag.h), the problem
 * (pt_prepared) and the epilogue description (epi_desc: the CTA tile, its
 * threads, the shared memory the pipeline leaves, k slices, split-K; built
 * from the kernel's config in one place, desc_of), never the main loop's
 * other fields.
 *
 * Two ways, chosen at emit time:
 * - direct (no split-K, no C, no M x N epilogue tensor, an expression of
 *   at most EPI_DIRECT_FLOPS per thread unrolled): the epilogue runs
 *   on the fragment in registers (per-row and per-column vectors loaded at
 *   the fragment's positions), the results are converted to D's dtype
 *   and staged as such (16-bit outputs stage half the bytes of f32), then
 *   units of up to 16 bytes are copied to D.
 * - staged (split-K, C, or a full epilogue tensor, which are read
 *   coalesced): the f32/s32 accumulators are staged, and the epilogue runs
 *   on units read back from the staging. A unit of 8 f32 (16-bit D) is two
 *   16-byte reads 32 bytes apart from lane to lane, 2-way bank conflicts
 *   that are kept rather than halving every global access of the unit.
 * The staging is D's orientation: "staging rows" are m for row-major D and
 * n for column-major D, so every unit is a run of E elements contiguous in
 * D. The row pitch is padded by the multiple of 16 bytes that makes the
 * fragment writes and the unit reads cheapest under the bank model
 * (kit_smem_wavefronts on the fragment's lane map; zero conflicts for the
 * mma fragments and rows of at least 128 bytes). When the tile does not
 * fit in the pipeline's shared memory it is staged in NB bands of BR
 * staging rows, each band holding whole warp (or thread) blocks, one pass
 * per band.
 *
 * K slices (kslice = S > 1 warps per tile position, each with a partial
 * sum): slices 1..S-1 write their fragments to shared memory in fragment
 * order (16 bytes a lane, conflict free), slice 0 adds them in slice order
 * into its registers (the same association as before: ((s0 + s1) + s2)),
 * in rounds that fit the shared memory (one round past the staging when
 * both fit: no barrier between the sums and the staging); slice 0 then
 * runs the epilogue.
 *
 * Units. Thread t handles units t, t+T, ... of the band, E elements each;
 * its pointers to D (and C, residuals, per-row and per-column vectors on
 * the staged way) advance by immediates from unit to unit.
 *
 * Parallel split-K (splitk = S > 1, grid.y = S): every split CTA writes its
 * f32/s32 partial tile to the workspace, fences, and counts itself in a
 * per-tile counter; the CTA that arrives last sums the S partials in split
 * order (deterministic whatever the arrival order), runs the epilogue, and
 * clears the partials it read and the counter. No CTA waits on another, so
 * it is also correct on a serial emulator. Workspace (PT_ARG_WORKSPACE):
 * S * tiles * batch partial tiles, then one u32 counter per (batch, tile);
 * zero before the first launch and zero again after every launch.
 * Stream-K (the wgmma loop) takes the same path with S the most units any
 * tile has and the tile's own count at run time (g->arrivals): the slots
 * past it are never written, so they add zeros, and are cleared anyway. */
#include <string.h>

#include "gen/expr_ptx.h"
#include "gen/gemm_int.h"
#include "ptx/emu/tmap.h"

/* EPI_DIRECT_FLOPS: the most expression flops per thread the direct way
 * unrolls (the default epilogue of 128 accumulators is 256). */
enum { EPI_MAX_IN = 4 + GEMM_MAX_AUX, EPI_MAX_ACC = 128, EPI_DIRECT_FLOPS = 1024 };

static int ilog2i(int v)
{
    int r = 0;
    while ((1 << r) < v)
        r++;
    return r;
}

static int dt_bytes(pt_dtype t) { return pt_dtype_get(t)->bytes; }

/* What the epilogue takes from the kernel's config. */
typedef struct epi_desc {
    int bm, bn, threads;
    int budget;             /* shared memory the pipeline leaves to reuse, bytes */
    int slices, splitk;
    int grp_rows, grp_cols; /* the fragment's group block (warp or SIMT thread tile) */
    int64_t tiles;          /* tiles per batch entry */
} epi_desc;

static epi_desc desc_of(const gemm_ctx *g)
{
    bool simt = g->pp->at->simt;
    epi_desc d = {g->bm, g->bn, g->threads, g->stages * g->stage_bytes, g->kslice, g->splitk,
                  simt ? g->tm : g->wm, simt ? g->tn : g->wn, g->tiles};
    return d;
}

/* The emit-time shape of the main loop's fragment (no registers): the
 * plan below depends on it alone, so gemm_epi_smem (before the main loop)
 * and gemm_epilogue agree. */
typedef struct frag_model {
    kit_frag fr;
    int row[EPI_MAX_ACC], col[EPI_MAX_ACC];
} frag_model;

static void model_of(const pt_prepared *pp, const epi_desc *d, frag_model *m)
{
    memset(m, 0, sizeof *m);
    const kit_atom *at = pp->at;
    if (at->simt)
        kit_frag_shape_blocks(&m->fr, d->grp_rows, d->grp_cols, d->bn, m->row, m->col);
    else
        kit_frag_shape_mma(&m->fr, at, d->grp_rows / at->m, d->grp_cols / at->n, m->row, m->col);
}

typedef struct epi_geom {
    bool direct;             /* the epilogue runs on the fragment */
    int ses;                 /* staged bytes per element */
    int srows, scols, pitch; /* staging rows, columns (elements), pitch (bytes) */
    int nb, br;              /* bands and staging rows per band */
    int E;                   /* elements per unit */
    int upr, nu;             /* units per staging row, units per thread per band */
    int64_t srows_lim, scols_lim;
    bool row_dyn;            /* dyn=m: the staging rows end at the run-time M */
    bool col_dyn;            /* dyn=m, column-major D: the staging columns end at M, and D's
                              * (C's, the M x N tensors') staging rows are M long when
                              * their ld follows M (unit_pass's *step) */
    int qround;              /* k slices: register quads per reduction round */
    int red_bytes;           /* k slices: bytes of one round */
    int red_off;             /* k slices: buffer offset (past the staging when both fit) */
    int threads, splitk;
    int64_t tiles;
} epi_geom;

/* Staging byte offset of fragment-relative element (r, c) from the lane's
 * base, in D's orientation. */
static int64_t soff(const epi_geom *e, bool dc, int64_t r, int64_t c)
{
    return dc ? c * e->pitch + r * e->ses : r * e->pitch + c * e->ses;
}

/* Wavefronts of one warp's staging writes (every store of the fragment)
 * plus its unit reads (every unit), for the pitch in e; *ideal: the least
 * any pitch could give. A store's lanes sit at a fixed pattern shifted by
 * the register's offset, and the bank model only sees addresses modulo
 * 128 bytes, so each distinct shift is evaluated once (emission speed). */
static int64_t staging_cost(const epi_geom *e, const kit_frag *fr, bool dc, int64_t *ideal)
{
    int64_t cost = 0, a[32], a0[32];
    int run = dc ? 1 : fr->vec, bytes = run * e->ses, per = bytes <= 4 ? 1 : bytes >= 16 ? 4 : 2;
    int memo[128];
    for (int k = 0; k < 128; k++)
        memo[k] = -1;
    for (int l = 0; l < 32; l++)
        a0[l] = soff(e, dc, fr->lrow[l], fr->lcol[l]);
    *ideal = 0;
    for (int i = 0; i < fr->n; i += run) {
        int64_t c = soff(e, dc, fr->row[i], fr->col[i]);
        int key = (int)(c % 128);
        if (memo[key] < 0) {
            for (int l = 0; l < 32; l++)
                a[l] = a0[l] + c;
            memo[key] = kit_smem_wavefronts(a, bytes);
        }
        cost += memo[key];
        *ideal += per;
    }
    int ub = e->E * e->ses;
    for (int l = 0; l < 32; l++) {
        int ur = e->upr <= e->threads ? l / e->upr : 0, uc = e->upr <= e->threads ? l % e->upr : l;
        a[l] = (int64_t)ur * e->pitch + (int64_t)uc * ub;
    }
    cost += (int64_t)e->nu * kit_smem_wavefronts(a, ub);
    *ideal += (int64_t)e->nu * (ub <= 4 ? 1 : ub >= 16 ? 4 : 2);
    return cost;
}

/* Units per thread and band: upr <= T, T / upr whole staging rows per
 * pass (a row's units never split over passes; threads past
 * (T / upr) upr idle when upr does not divide T, e.g. bn 192); upr > T,
 * ceil(upr / T) passes per row. Powers of two: br upr / T either way. */
static int units_per_thread(const epi_geom *e)
{
    int T = e->threads;
    if (e->upr <= T) {
        int rp = T / e->upr;
        return (e->br + rp - 1) / rp;
    }
    return e->br * ((e->upr + T - 1) / T);
}

static epi_geom geom(const pt_prepared *pp, const epi_desc *d)
{
    epi_geom e;
    memset(&e, 0, sizeof e);
    bool dc = pp->d_col;
    bool full_aux = false;
    for (int j = 0; j < pp->naux; j++)
        full_aux |= pp->aux[j].kind == GEMM_AUX_FULL;
    /* flops of the expression per element: a heavy epilogue (gelu ...)
     * unrolled over every accumulator would bloat the kernel; the staged
     * way runs it in a loop over units (emit_all_units) */
    int cost = 1;
    for (int i = 0; pp->epi && i < pp->epi->nnodes; i++)
        cost += ex_kind_get(pp->epi->nodes[i].kind)->flops;
    int nacc = pp->at->simt ? d->grp_rows * d->grp_cols : d->grp_rows * d->grp_cols / 32;
    e.direct = d->splitk == 1 && !pp->has_c && !full_aux && cost * nacc <= EPI_DIRECT_FLOPS;
    e.ses = e.direct ? dt_bytes(pp->out_dt) : 4;
    e.threads = d->threads;
    e.splitk = d->splitk;
    e.tiles = d->tiles;
    e.srows = dc ? d->bn : d->bm;
    e.scols = dc ? d->bm : d->bn;
    e.srows_lim = dc ? pp->N : pp->M;
    e.row_dyn = pp->dyn_m && !dc;
    e.col_dyn = pp->dyn_m && dc;
    e.scols_lim = dc ? pp->M : pp->N;
    if (e.col_dyn) /* units along the run-time M: one element (prepare's vec_max) */
        e.E = 1;
    else if (e.direct) { /* only D's alignment matters */
        e.E = 16 / e.ses;
        while (e.E > 1 && (pp->ldd % e.E || e.scols_lim % e.E))
            e.E /= 2;
    } else /* the global accesses decide (16 bytes of D, C and the tensors) */
        e.E = pp->vec_max;
    while (e.E > e.scols)
        e.E /= 2;
    e.upr = e.scols / e.E;
    frag_model m;
    model_of(pp, d, &m);
    int grp = dc ? d->grp_cols : d->grp_rows;
    int row_bytes = e.scols * e.ses;
    /* the pitch first (bands only change how many rows), then the bands */
    int64_t best = -1;
    int best_pad = 0;
    for (int pad = 0; pad < 128; pad += 16) {
        e.pitch = row_bytes + pad;
        e.br = e.srows;
        e.nu = units_per_thread(&e);
        int64_t ideal, c = staging_cost(&e, &m.fr, dc, &ideal);
        if (best < 0 || c < best) {
            best = c;
            best_pad = pad;
        }
        if (c <= ideal) /* no pitch does better */
            break;
    }
    e.pitch = row_bytes + best_pad;
    e.nb = 1;
    while ((e.srows / e.nb) * e.pitch > d->budget && e.srows / (2 * e.nb) >= grp &&
           e.srows / (2 * e.nb) >= 8)
        e.nb *= 2;
    e.br = e.srows / e.nb;
    e.nu = units_per_thread(&e);
    if (d->slices > 1) {
        int nq = m.fr.n / 4, per = (d->slices - 1) * (d->threads / d->slices) * 16;
        e.qround = d->budget / per;
        e.qround = e.qround < 1 ? 1 : e.qround > nq ? nq : e.qround;
        e.red_bytes = e.qround * per;
        /* one round beside the staging: slice 0 may stage while others
         * still read their slots, so the round needs no closing barrier */
        if (e.qround == nq && e.nb == 1 && e.br * e.pitch + e.red_bytes <= d->budget)
            e.red_off = e.br * e.pitch;
    }
    return e;
}

int gemm_epi_smem(const gemm_ctx *g)
{
    epi_desc d = desc_of(g);
    epi_geom e = geom(g->pp, &d);
    int bytes = e.br * e.pitch;
    if (e.red_off + e.red_bytes > bytes)
        bytes = e.red_off + e.red_bytes;
    return bytes < 16 ? 16 : bytes;
}

/* ---- loads and stores of E elements ---- */


static ptx_mods vmods(ptx_mod space, int n, bool nc)
{
    if (nc)
        return n == 4 ? PTX_MODS(space, PTX_M_NC, PTX_M_V4)
             : n == 2 ? PTX_MODS(space, PTX_M_NC, PTX_M_V2) : PTX_MODS(space, PTX_M_NC);
    return n == 4 ? PTX_MODS(space, PTX_M_V4) : n == 2 ? PTX_MODS(space, PTX_M_V2) : PTX_MODS(space);
}

/* n elements of dt at [p + imm] as f32 values (raw: s32 bits kept), by the
 * kit's dtype I/O (gen/kit/io.h): read-only path, widest aligned vectors. */
static void load_vals(gemm_ctx *g, ptx_reg p, int64_t imm, pt_dtype dt, int n, ptx_reg *out,
                      ptx_reg guard, bool raw)
{
    kit_io io = {.nc = true, .raw = raw, .guard = guard};
    kit_load(g->f, &io, dt, p, imm, n, out);
}

/* Stores n values (f32, or s32 bits for PT_S32 when raw) as dt at
 * [p + imm] of global (shared: the staging) memory, by the kit's dtype I/O. */
static void store_vals_in(gemm_ctx *g, bool shared, ptx_reg p, int64_t imm, pt_dtype dt, int n,
                          const ptx_reg *v, ptx_reg guard, bool raw)
{
    ptx_opd o[16];
    for (int i = 0; i < n; i++)
        o[i] = ptx_r(v[i]);
    kit_io io = {.shared = shared, .raw = raw, .guard = guard};
    kit_store(g->f, &io, dt, p, imm, n, o);
}

static void store_vals(gemm_ctx *g, ptx_reg p, int64_t imm, pt_dtype dt, int n, const ptx_reg *v,
                       ptx_reg guard, bool raw)
{
    store_vals_in(g, false, p, imm, dt, n, v, guard, raw);
}

/* A unit's bytes moved unconverted (staging -> D): 32-bit words (type
 * wt), or under 4 bytes one b16 register with the bytes (subt b16 or b8). */
typedef struct packed {
    ptx_reg w[8];
    int nw;
    ptx_types wt;
    ptx_reg sub;
    ptx_type subt;
} packed;

/* Stores packed values at [p + imm] of a space (global or shared). */
static void put_packed(gemm_ctx *g, ptx_mod space, ptx_reg p, int64_t imm, const packed *k,
                       ptx_reg guard)
{
    ptx_fn *f = g->f;
    ptx_ins *in;
    if (k->sub.id) {
        in = ptx_emit(f, PTX_OP_ST, M1(space), PTX_T1(k->subt), ptx_addr(p, imm), ptx_r(k->sub));
        if (guard.id)
            ptx_guard(in, guard, false);
        return;
    }
    for (int i = 0; i < k->nw; i += 4) {
        int n = k->nw - i < 4 ? k->nw - i : 4;
        in = ptx_emit(f, PTX_OP_ST, vmods(space, n, false), k->wt, ptx_addr(p, imm + 4 * i),
                      n == 1 ? ptx_r(k->w[i]) : ptx_vecr(f, n, &k->w[i]));
        if (guard.id)
            ptx_guard(in, guard, false);
    }
}


/* ---- units ---- */

/* Where a pass's units come from: the staged f32/s32 tile (SRC_SMEM, the
 * epilogue runs on the unit), the staged output values (SRC_STAGED: the
 * epilogue already ran on the fragment, the unit is copied), or for
 * split-K: staged partials to the workspace (SRC_WS_WRITE), the sum of
 * the workspace partials (SRC_WS_SUM). */
typedef enum unit_src { SRC_SMEM, SRC_STAGED, SRC_WS_WRITE, SRC_WS_SUM } unit_src;

typedef struct unit_map {
    ptx_reg ur0, uc0;      /* thread's first unit: band row, unit column */
    int *urimm, *ucimm;    /* per unit i */
    ptx_reg *guard;        /* per unit: thread has it (id 0: always) */
    ptx_reg idle;          /* the thread has units at all (id 0: always; upr not dividing T) */
    ptx_reg sbuf;          /* staging byte address of the first unit */
} unit_map;

static void unit_map_init(gemm_ctx *g, const epi_geom *e, unit_map *u)
{
    pt_arena *ar = g->f->mod->arena;
    int T = e->threads;
    u->urimm = pt_arena_alloc(ar, (size_t)e->nu * sizeof(int));
    u->ucimm = pt_arena_alloc(ar, (size_t)e->nu * sizeof(int));
    u->guard = pt_arena_alloc(ar, (size_t)e->nu * sizeof(ptx_reg));
    u->idle = (ptx_reg){0};
    if (e->upr <= T) {
        int rp = T / e->upr; /* staging rows per pass (units_per_thread) */
        if (!(e->upr & (e->upr - 1))) {
            u->uc0 = gemm_op2(g, PTX_OP_AND, ptx_r(g->tid), ptx_imm(e->upr - 1));
            u->ur0 = gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(ilog2i(e->upr)));
        } else {
            u->uc0 = gemm_op2(g, PTX_OP_REM, ptx_r(g->tid), ptx_imm(e->upr));
            u->ur0 = gemm_op2(g, PTX_OP_DIV, ptx_r(g->tid), ptx_imm(e->upr));
        }
        if (rp * e->upr < T) /* the threads past rp whole rows have no unit */
            u->idle = gemm_setp(g, PTX_M_LT, ptx_r(g->tid), ptx_imm(rp * e->upr));
        for (int i = 0; i < e->nu; i++) {
            u->urimm[i] = i * rp;
            u->ucimm[i] = 0;
            u->guard[i] = u->idle;
            if (u->urimm[i] + rp > e->br)
                u->guard[i] = gemm_pand(g, u->idle,
                                        gemm_setp(g, PTX_M_LT, ptx_r(u->ur0), ptx_imm(e->br - u->urimm[i])));
        }
    } else {
        int cpr = (e->upr + T - 1) / T; /* passes per staging row */
        u->uc0 = g->tid;
        u->ur0 = gemm_r32(g);
        ptx_emit(g->f, PTX_OP_MOV, NOM, U32T, ptx_r(u->ur0), ptx_imm(0));
        for (int i = 0; i < e->nu; i++) {
            u->urimm[i] = i / cpr;
            u->ucimm[i] = (i % cpr) * T;
            u->guard[i] = (ptx_reg){0};
            if (u->ucimm[i] + T > e->upr) /* the row's last pass: some threads */
                u->guard[i] = gemm_setp(g, PTX_M_LT, ptx_r(g->tid), ptx_imm(e->upr - u->ucimm[i]));
        }
    }
    /* ur0 * pitch + uc0 * E * ses */
    ptx_reg c = gemm_mul(g, ptx_r(u->uc0), ptx_imm(e->E * e->ses));
    ptx_reg o = gemm_mad(g, ptx_r(u->ur0), ptx_imm(e->pitch), ptx_r(c));
    u->sbuf = gemm_op2(g, PTX_OP_ADD, ptx_r(o), ptx_r(g->smem));
}

/* Per-pass pointers and checks. */
typedef struct unit_pass {
    ptx_reg srow0, scol0;      /* global staging row / col of the first unit */
    ptx_reg d, c, aux[GEMM_MAX_AUX], ws;
    ptx_reg zero;              /* b32 0, to clear consumed partials */
    ptx_reg colok;             /* scol0 in range (id 0: always) */
    ptx_reg rowleft;           /* row_dyn: s32 M - srow0 (staging rows left in D) */
    ptx_reg colleft;           /* col_dyn: s32 M - scol0 (staging columns left in D) */
    /* col_dyn: u64 bytes from one staging row of D, C, the M x N tensors to
     * the next when that leading dimension is the run-time M (id 0: the
     * immediate ld) */
    ptx_reg dstep, cstep, xstep[GEMM_MAX_AUX];
} unit_pass;

static ptx_reg ptr2d(gemm_ctx *g, ptx_reg base, ptx_reg row, int64_t ld, ptx_reg col, int es)
{
    ptx_reg p = gemm_addr64(g, base, ptx_r(row), ld * es);
    return gemm_addr64(g, p, ptx_r(col), es);
}

/* u64 M * es: the bytes of a column of M elements (a leading dimension
 * that follows the run-time M). */
static ptx_reg m_bytes(gemm_ctx *g, int es)
{
    ptx_reg w = gemm_r64(g), s = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), ptx_r(g->mreg));
    ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(s), ptx_r(w), ptx_imm(es));
    return s;
}

/* step * n (u64 register times an immediate). */
static ptx_reg mul64(gemm_ctx *g, ptx_reg step, int64_t n)
{
    ptx_reg t = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(t), ptx_r(step), ptx_imm(n));
    return t;
}

/* p + rows * step (step: u64 register), 64-bit; rows 0: p. */
static ptx_reg add_rows(gemm_ctx *g, ptx_reg p, int64_t rows, ptx_reg step)
{
    if (!rows)
        return p;
    ptx_reg t = rows == 1 ? step : mul64(g, step, rows), d = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p), ptx_r(t));
    return d;
}

/* base + row * step + col * es (row, col u32; step u64 bytes per row). */
static ptx_reg ptr2d_dyn(gemm_ctx *g, ptx_reg base, ptx_reg row, ptx_reg step, ptx_reg col, int es)
{
    ptx_reg w = gemm_r64(g), t = gemm_r64(g), p = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), ptx_r(row));
    ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(t), ptx_r(w), ptx_r(step));
    ptx_emit(g->f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(p), ptx_r(base), ptx_r(t));
    return gemm_addr64(g, p, ptx_r(col), es);
}

/* Evaluates the epilogue of one element; a: raw accumulator value, cval:
 * C's (id 0: none), auxv: the epilogue tensors'. Scalars are specialised
 * at emit time: alpha, beta, scale_ab and out_scale of 1 are immediates, so
 * their multiplies fold away (x * 1 is x exactly; the kernel's name hashes
 * the values). */
static ptx_reg epi_value(gemm_ctx *g, ptx_reg a, ptx_reg cval, const ptx_reg *auxv, ptx_opd *val)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    if (pp->int_exact) {
        if (!cval.id)
            return a;
        ptx_reg s = gemm_r32(g);
        ptx_emit(f, PTX_OP_ADD, NOM, S32T, ptx_r(s), ptx_r(a), ptx_r(cval));
        return s;
    }
    ptx_reg af = a;
    if (pp->at->int_acc) {
        af = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(PTX_T_F32, PTX_T_S32), ptx_r(af), ptx_r(a));
    }
    if (g->scale_ab.id && pp->scale_ab != 1.0f) {
        ptx_reg s = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(s), ptx_r(af), ptx_r(g->scale_ab));
        af = s;
    }
    const ex_prog *p = pp->epi;
    ptx_opd in[EPI_MAX_IN];
    for (int k = 0; k < p->ninputs && k < EPI_MAX_IN; k++) {
        if (k == pp->in_acc)
            in[k] = ptx_r(af);
        else if (k == pp->in_alpha)
            in[k] = pp->alpha == 1.0f ? ptx_f32(1.0f) : ptx_r(g->alpha);
        else if (k == pp->in_beta)
            in[k] = pp->beta == 1.0f ? ptx_f32(1.0f) : ptx_r(g->beta);
        else if (k == pp->in_c)
            in[k] = ptx_r(cval);
        else
            for (int j = 0; j < pp->naux; j++)
                if (pp->aux[j].input == k)
                    in[k] = ptx_r(auxv[j]);
    }
    ptx_opd r = kit_expr_value(f, p, in, val);
    bool fp8 = pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2;
    bool scale = fp8 && pp->out_scale != 1.0f;
    if (r.kind == PTX_O_REG && !scale && ptx_reg_type(f, r.u.reg) == PTX_T_F32)
        return r.u.reg;
    ptx_reg out = ptx_reg_new(f, PTX_T_F32);
    if (scale)
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(out), r, ptx_r(g->out_scale));
    else
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(out), r);
    return out;
}

/* ---- k slices ---- */

/* Sums the slices' partial fragments into slice 0's registers (in place),
 * in slice order, through shared memory in fragment order: slot
 * (warp of the slice, lane) holds 16 bytes (one register quad) per block
 * of T/S slots. Rounds of qround quads when the whole does not fit. */
static void reduce_slices(gemm_ctx *g, const epi_geom *e, const epi_desc *d, kit_frag *fr)
{
    ptx_fn *f = g->f;
    bool intacc = g->pp->at->int_acc;
    int S = fr->slices, Ts = d->threads / S, nq = fr->n / 4;
    ptx_reg wr = gemm_op2(g, PTX_OP_SHR, ptx_r(fr->grp_row), ptx_imm(ilog2i(fr->grp_rows)));
    ptx_reg wc = gemm_op2(g, PTX_OP_SHR, ptx_r(fr->grp_col), ptx_imm(ilog2i(fr->grp_cols)));
    ptx_reg w = gemm_mad(g, ptx_r(wr), ptx_imm(d->bn / fr->grp_cols), ptx_r(wc));
    ptx_reg slot = gemm_mad(g, ptx_r(w), ptx_imm(32), ptx_r(g->lane));
    ptx_reg base = gemm_mad(g, ptx_r(slot), ptx_imm(16), ptx_r(g->smem));
    if (e->red_off)
        gemm_inc32(g, base, e->red_off);
    ptx_reg sm1 = gemm_op2(g, PTX_OP_SUB, ptx_r(fr->slice), ptx_imm(1));
    ptx_reg wbase = gemm_mad(g, ptx_r(sm1), ptx_imm((int64_t)e->qround * Ts * 16), ptx_r(base));
    ptx_reg is0 = gemm_setp(g, PTX_M_EQ, ptx_r(fr->slice), ptx_imm(0));
    ptx_types ty = intacc ? B32T : F32T;
    for (int q0 = 0; q0 < nq; q0 += e->qround) {
        int q1 = q0 + e->qround < nq ? q0 + e->qround : nq;
        int skipw = ptx_label_new(f), skipr = ptx_label_new(f);
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skipw)), is0, false);
        for (int q = q0; q < q1; q++)
            ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V4), ty,
                     ptx_addr(wbase, (int64_t)(q - q0) * Ts * 16), ptx_vecr(f, 4, &fr->r[4 * q]));
        ptx_label_place(f, skipw);
        gemm_bar(g);
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skipr)), is0, true);
        for (int s = 1; s < S; s++)
            for (int q = q0; q < q1; q++) {
                ptx_reg t[4];
                for (int k = 0; k < 4; k++)
                    t[k] = intacc ? gemm_r32(g) : ptx_reg_new(f, PTX_T_F32);
                int64_t off = ((int64_t)(s - 1) * e->qround + (q - q0)) * Ts * 16;
                ptx_emit(f, PTX_OP_LD, M2(PTX_M_SHARED, PTX_M_V4), ty, ptx_vecr(f, 4, t),
                         ptx_addr(base, off));
                for (int k = 0; k < 4; k++)
                    ptx_emit(f, PTX_OP_ADD, NOM, intacc ? S32T : F32T, ptx_r(fr->r[4 * q + k]),
                             ptx_r(fr->r[4 * q + k]), ptx_r(t[k]));
            }
        ptx_label_place(f, skipr);
        if (!e->red_off) /* the staging overwrites the slots */
            gemm_bar(g);
    }
}

/* ---- staging ---- */

/* The staged way: the f32/s32 accumulators into the band; sbase: the
 * thread's staging byte address of (row_base, col_base) for band row 0. */
static void stage_accs(gemm_ctx *g, const epi_geom *e, const kit_frag *fr, ptx_reg sbase)
{
    ptx_fn *f = g->f;
    bool dc = g->pp->d_col;
    ptx_types ty = g->pp->at->int_acc ? B32T : F32T;
    int vec = dc ? 1 : fr->vec;
    for (int i = 0; i < fr->n; i += vec)
        ptx_emit(f, PTX_OP_ST, vmods(PTX_M_SHARED, vec, false), ty,
                 ptx_addr(sbase, soff(e, dc, fr->row[i], fr->col[i])),
                 vec == 1 ? ptx_r(fr->r[i]) : ptx_vecr(f, vec, &fr->r[i]));
}

/* One epilogue vector per register: name[n] at the register's column,
 * name[m] at its row, loaded once per distinct column / row; with edge
 * (the problem's N, or M, is not a multiple of the tile's), lanes past it
 * load nothing (their values are never stored). */
static void frag_aux(gemm_ctx *g, const kit_frag *fr, const gemm_aux *x, ptx_reg pa, bool edge,
                     ptx_reg *v)
{
    const pt_prepared *pp = g->pp;
    bool byn = x->kind == GEMM_AUX_N;
    const int *pos = byn ? fr->col : fr->row;
    ptx_reg base = byn ? fr->col_base : fr->row_base;
    ptx_reg org = byn ? g->n0 : g->m0;
    int64_t lim = byn ? pp->N : pp->M;
    ptx_reg at = gemm_op2(g, PTX_OP_ADD, ptx_r(org), ptx_r(base));
    ptx_reg left = {0}; /* dyn=m rows: M - at */
    if (edge && !byn && pp->dyn_m)
        left = gemm_op2(g, PTX_OP_SUB, gemm_m(g), ptx_r(at));
    int es = dt_bytes(pp->aux_dt);
    ptx_reg p = gemm_addr64(g, pa, ptx_r(at), es);
    for (int i = 0; i < fr->n; i++) {
        int k = 0;
        while (k < i && pos[k] != pos[i])
            k++;
        if (k < i) {
            v[i] = v[k];
            continue;
        }
        ptx_reg ok = {0};
        if (edge && left.id)
            ok = gemm_setp_s(g, PTX_M_GT, ptx_r(left), ptx_imm(pos[i]));
        else if (edge)
            ok = gemm_setp_s(g, PTX_M_LT, ptx_r(at), ptx_imm(lim - pos[i]));
        load_vals(g, p, (int64_t)pos[i] * es, pp->aux_dt, 1, &v[i], ok, false);
    }
}

/* The direct way: epilogue on the fragment, converted to D's dtype, into
 * the band (sbase as for stage_accs). */
static void stage_direct(gemm_ctx *g, const epi_geom *e, const kit_frag *fr, ptx_reg sbase)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    bool dc = pp->d_col;
    ptx_reg *auxv = pt_arena_alloc(ar, (size_t)(pp->naux > 0 ? pp->naux : 1) * (size_t)fr->n * sizeof(ptx_reg));
    int64_t tm = dc ? e->scols : e->srows, tn = dc ? e->srows : e->scols;
    for (int j = 0; j < pp->naux; j++) {
        bool byn = pp->aux[j].kind == GEMM_AUX_N;
        bool edge = byn ? pp->N % tn != 0 : pp->dyn_m || pp->M % tm != 0;
        frag_aux(g, fr, &pp->aux[j], g->paux[j], edge, &auxv[j * fr->n]);
    }
    ptx_opd *val = pp->epi ? pt_arena_alloc(ar, (size_t)pp->epi->nnodes * sizeof(ptx_opd)) : NULL;
    ptx_reg out[EPI_MAX_ACC];
    for (int i = 0; i < fr->n; i++) {
        ptx_reg ax[GEMM_MAX_AUX];
        for (int j = 0; j < pp->naux; j++)
            ax[j] = auxv[j * fr->n + i];
        out[i] = epi_value(g, fr->r[i], (ptx_reg){0}, ax, val);
    }
    int run = dc ? 1 : fr->vec;
    for (int i = 0; i < fr->n; i += run) {
        store_vals_in(g, true, sbase, soff(e, dc, fr->row[i], fr->col[i]), pp->out_dt, run, &out[i],
                      (ptx_reg){0}, pp->int_exact);
    }
}

/* ---- units ---- */

/* Unit i of the pass is the thread's and inside the problem. */
static ptx_reg unit_ok(gemm_ctx *g, const epi_geom *e, const unit_map *u, const unit_pass *up, int i)
{
    ptx_reg ok = u->guard[i];
    if (e->row_dyn)
        ok = gemm_pand(g, ok, gemm_setp_s(g, PTX_M_GT, ptx_r(up->rowleft), ptx_imm(u->urimm[i])));
    else if (e->srows_lim % e->srows)
        ok = gemm_pand(g, ok, gemm_setp_s(g, PTX_M_LT, ptx_r(up->srow0),
                                          ptx_imm(e->srows_lim - u->urimm[i])));
    if (e->col_dyn)
        ok = gemm_pand(g, ok, gemm_setp_s(g, PTX_M_GT, ptx_r(up->colleft),
                                          ptx_imm((int64_t)u->ucimm[i] * e->E)));
    else if (e->scols_lim % e->scols) {
        ptx_reg cok = u->ucimm[i] ? gemm_setp_s(g, PTX_M_LT, ptx_r(up->scol0),
                                                ptx_imm(e->scols_lim - (int64_t)u->ucimm[i] * e->E))
                                  : up->colok;
        ok = gemm_pand(g, ok, cok);
    }
    return ok;
}

/* The direct way's unit: E staged output elements copied to D. */
static void copy_unit(gemm_ctx *g, const epi_geom *e, const unit_map *u, const unit_pass *up, int i)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    int bytes = e->E * e->ses;
    int64_t simm = (int64_t)u->urimm[i] * e->pitch + (int64_t)u->ucimm[i] * bytes;
    packed k;
    memset(&k, 0, sizeof k);
    ptx_ins *in;
    if (bytes >= 4) {
        k.nw = bytes / 4;
        k.wt = B32T;
        for (int w = 0; w < k.nw; w++)
            k.w[w] = gemm_r32(g);
        in = ptx_emit(f, PTX_OP_LD, vmods(PTX_M_SHARED, k.nw, false), B32T,
                      k.nw == 1 ? ptx_r(k.w[0]) : ptx_vecr(f, k.nw, k.w), ptx_addr(u->sbuf, simm));
    } else {
        k.sub = ptx_reg_new(f, PTX_T_B16);
        k.subt = bytes == 2 ? PTX_T_B16 : PTX_T_B8;
        in = ptx_emit(f, PTX_OP_LD, M1(PTX_M_SHARED), PTX_T1(k.subt), ptx_r(k.sub),
                      ptx_addr(u->sbuf, simm));
    }
    if (u->guard[i].id) /* past the band: this thread has no such unit */
        ptx_guard(in, u->guard[i], false);
    ptx_reg ok = unit_ok(g, e, u, up, i);
    int64_t imm = ((int64_t)u->urimm[i] * pp->ldd + (int64_t)u->ucimm[i] * e->E) * dt_bytes(pp->out_dt);
    ptx_reg p = up->d;
    if (up->dstep.id) { /* D's ld is the run-time M */
        p = add_rows(g, p, u->urimm[i], up->dstep);
        imm = (int64_t)u->ucimm[i] * e->E * dt_bytes(pp->out_dt);
    }
    if (imm > 0x7fff0000ll) {
        p = gemm_add64(g, p, imm);
        imm = 0;
    }
    put_packed(g, PTX_M_GLOBAL, p, imm, &k, ok);
}

static void emit_units(gemm_ctx *g, const epi_geom *e, const unit_map *u, const unit_pass *up,
                       unit_src src)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    bool intacc = pp->at->int_acc;
    int E = e->E;
    int64_t tile_words = (int64_t)e->srows * e->scols;
    bool dc = pp->d_col;
    ptx_opd *val = pp->epi ? pt_arena_alloc(ar, (size_t)pp->epi->nnodes * sizeof(ptx_opd)) : NULL;
    for (int i = 0; i < e->nu; i++) {
        ptx_reg guard = u->guard[i];
        int64_t wimm = ((int64_t)u->urimm[i] * e->scols + (int64_t)u->ucimm[i] * E) * 4;
        ptx_reg acc[16];
        if (src == SRC_STAGED) {
            copy_unit(g, e, u, up, i);
            continue;
        }
        if (src == SRC_WS_SUM) {
            for (int s = 0; s < e->splitk; s++) {
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
            int64_t simm = (int64_t)u->urimm[i] * e->pitch + (int64_t)u->ucimm[i] * E * 4;
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
        ptx_reg ok = unit_ok(g, e, u, up, i);
        int64_t rimm = u->urimm[i], cimm = (int64_t)u->ucimm[i] * E;
        ptx_reg cv[16] = {{0}};
        if (pp->has_c && up->cstep.id)
            load_vals(g, add_rows(g, up->c, rimm, up->cstep), cimm * dt_bytes(pp->c_dt), pp->c_dt, E, cv, ok,
                      pp->int_exact);
        else if (pp->has_c)
            load_vals(g, up->c, (rimm * pp->ldc + cimm) * dt_bytes(pp->c_dt), pp->c_dt, E, cv, ok,
                      pp->int_exact);
        ptx_reg av[GEMM_MAX_AUX][16];
        for (int j = 0; j < pp->naux; j++) {
            const gemm_aux *x = &pp->aux[j];
            int es = dt_bytes(pp->aux_dt);
            if (x->kind == GEMM_AUX_FULL && up->xstep[j].id) {
                load_vals(g, add_rows(g, up->aux[j], rimm, up->xstep[j]), cimm * es, pp->aux_dt, E, av[j], ok,
                          false);
            } else if (x->kind == GEMM_AUX_FULL) {
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
        if (up->dstep.id)
            store_vals(g, add_rows(g, up->d, rimm, up->dstep), cimm * dt_bytes(pp->out_dt), pp->out_dt, E, out,
                       ok, pp->int_exact);
        else
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
    if (pp->epi && src != SRC_WS_WRITE && src != SRC_STAGED)
        for (int i = 0; i < pp->epi->nnodes; i++)
            cost += ex_kind_get(pp->epi->nodes[i].kind)->flops;
    if (src == SRC_WS_SUM)
        cost += e->splitk;
    int T = e->threads;
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
    ptx_reg *adv32[3] = {&u1.sbuf, &up1.srow0, &up1.rowleft};
    int64_t step32[3] = {(int64_t)rs * e->pitch, rs, -(int64_t)rs};
    int n32 = e->row_dyn && src != SRC_WS_WRITE ? 3 : 2;
    for (int k = 0; k < n32; k++) {
        ptx_reg r = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_r(*adv32[k]));
        *adv32[k] = r;
    }
    ptx_reg *adv64[4 + GEMM_MAX_AUX];
    int64_t step64[4 + GEMM_MAX_AUX];
    ptx_reg stepr[4 + GEMM_MAX_AUX]; /* u64 register steps (id 0: step64's immediate) */
    memset(stepr, 0, sizeof stepr);
    int n64 = 0;
    bool dc = pp->d_col;
    if (src == SRC_WS_WRITE || src == SRC_WS_SUM) {
        adv64[n64] = &up1.ws;
        step64[n64++] = (int64_t)rs * e->scols * 4;
    }
    if (src != SRC_WS_WRITE) {
        if (up->dstep.id)
            stepr[n64] = mul64(g, up->dstep, rs);
        adv64[n64] = &up1.d;
        step64[n64++] = (int64_t)rs * pp->ldd * dt_bytes(pp->out_dt);
        if (pp->has_c && src != SRC_STAGED) {
            if (up->cstep.id)
                stepr[n64] = mul64(g, up->cstep, rs);
            adv64[n64] = &up1.c;
            step64[n64++] = (int64_t)rs * pp->ldc * dt_bytes(pp->c_dt);
        }
        for (int j = 0; j < pp->naux && src != SRC_STAGED; j++) {
            const gemm_aux *x = &pp->aux[j];
            int64_t es = dt_bytes(pp->aux_dt);
            if (x->kind == GEMM_AUX_FULL && up->xstep[j].id)
                stepr[n64] = mul64(g, up->xstep[j], rs);
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
    guard1 = u->idle;
    if (ur.id)
        guard1 = gemm_pand(g, u->idle, gemm_setp(g, PTX_M_LT, ptx_r(ur), ptx_imm(e->br)));
    emit_units(g, &e1, &u1, &up1, src);
    for (int k = 0; k < n32; k++)
        gemm_inc32(g, *adv32[k], step32[k]);
    for (int k = 0; k < n64; k++)
        if (stepr[k].id)
            ptx_emit(f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(*adv64[k]), ptx_r(*adv64[k]), ptx_r(stepr[k]));
        else
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
    up->rowleft = (ptx_reg){0};
    up->colleft = (ptx_reg){0};
    up->dstep = up->cstep = (ptx_reg){0};
    memset(up->xstep, 0, sizeof up->xstep);
    if (e->row_dyn && need_out)
        up->rowleft = gemm_op2(g, PTX_OP_SUB, gemm_m(g), ptx_r(r));
    if (e->col_dyn) { /* the workspace's partials need no column check */
        if (need_out)
            up->colleft = gemm_op2(g, PTX_OP_SUB, gemm_m(g), ptx_r(up->scol0));
    } else if (e->scols_lim % e->scols)
        up->colok = gemm_setp_s(g, PTX_M_LT, ptx_r(up->scol0), ptx_imm(e->scols_lim));
    if (need_ws) {
        /* ws + ((bidx*tiles + tile)*S + split)*tile_words*4 + (pb + ur0)*scols*4 + uc0*E*4 */
        ptx_reg bt = gemm_mad(g, ptx_r(g->bidx), ptx_imm(e->tiles), ptx_r(g->tile));
        ptx_reg ws = gemm_addr64(g, g->pws, ptx_r(bt),
                                 (int64_t)e->splitk * e->srows * e->scols * 4);
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
    int ob = dt_bytes(pp->out_dt), cb = dt_bytes(pp->c_dt), es = dt_bytes(pp->aux_dt);
    if (pp->ldd_m) {
        up->dstep = m_bytes(g, ob);
        up->d = ptr2d_dyn(g, g->pd, up->srow0, up->dstep, up->scol0, ob);
    } else
        up->d = ptr2d(g, g->pd, up->srow0, pp->ldd, up->scol0, ob);
    if (e->direct) /* C and the epilogue tensors were read at the fragment */
        return;
    if (pp->has_c && pp->ldc_m) {
        up->cstep = m_bytes(g, cb);
        up->c = ptr2d_dyn(g, g->pc, up->srow0, up->cstep, up->scol0, cb);
    } else if (pp->has_c)
        up->c = ptr2d(g, g->pc, up->srow0, pp->ldc, up->scol0, cb);
    for (int j = 0; j < pp->naux; j++) {
        const gemm_aux *x = &pp->aux[j];
        if (x->kind == GEMM_AUX_FULL && e->col_dyn) { /* stored like D, packed: M long */
            up->xstep[j] = m_bytes(g, es);
            up->aux[j] = ptr2d_dyn(g, g->paux[j], up->srow0, up->xstep[j], up->scol0, es);
        } else if (x->kind == GEMM_AUX_FULL)
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
    epi_desc d = desc_of(g);
    epi_geom e = geom(pp, &d);
    bool dc = pp->d_col;
    kit_frag fr = *acc;
    if (!fr.lanes) { /* the main loop left the lane map to us */
        if (pp->at->simt)
            kit_frag_lanes_blocks(&fr, d.bn);
        else
            kit_frag_lanes(&fr, pp->at);
    }
    if (fr.slices == 0) {
        fr.slices = d.slices;
        fr.slice = g->kslice_idx;
    }
    frag_model m;
    model_of(pp, &d, &m);
    if (fr.n != m.fr.n || fr.vec != m.fr.vec || fr.slices != d.slices ||
        memcmp(fr.lrow, m.fr.lrow, sizeof fr.lrow) || memcmp(fr.lcol, m.fr.lcol, sizeof fr.lcol)) {
        pt_errf(&f->mod->err, PT_EINTERNAL,
                "gemm epilogue: the main loop's fragment (%d registers) is not the planned one (%d)",
                fr.n, m.fr.n);
        return;
    }
    if (fr.slices > 1)
        reduce_slices(g, &e, &d, &fr);
    unit_map u;
    unit_map_init(g, &e, &u);
    /* staging address of (row_base, col_base) for band row 0 */
    ptx_reg sr = dc ? fr.col_base : fr.row_base, sc = dc ? fr.row_base : fr.col_base;
    ptx_reg sc_b = gemm_mul(g, ptx_r(sc), ptx_imm(e.ses));
    ptx_reg sb = gemm_mad(g, ptx_r(sr), ptx_imm(e.pitch), ptx_r(sc_b));
    sb = gemm_op2(g, PTX_OP_ADD, ptx_r(sb), ptx_r(g->smem));
    ptx_reg grp0 = dc ? fr.grp_col : fr.grp_row;
    bool splitk = e.splitk > 1;

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
    ptx_reg cond = {0};
    if (e.nb > 1) {
        ptx_reg back = gemm_mul(g, pb, ptx_imm(e.pitch));
        sbp = gemm_op2(g, PTX_OP_SUB, ptx_r(sb), ptx_r(back));
        ptx_reg dd = gemm_op2(g, PTX_OP_SUB, ptx_r(grp0), pb);
        cond = gemm_setp(g, PTX_M_LT, ptx_r(dd), ptx_imm(e.br));
    }
    if (fr.slices > 1) /* slice 0 holds the sums */
        cond = gemm_pand(g, cond, gemm_setp(g, PTX_M_EQ, ptx_r(fr.slice), ptx_imm(0)));
    int skip = -1;
    if (cond.id) {
        skip = ptx_label_new(f);
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skip)), cond, true);
    }
    if (e.direct)
        stage_direct(g, &e, &fr, sbp);
    else
        stage_accs(g, &e, &fr, sbp);
    if (skip >= 0)
        ptx_label_place(f, skip);
    gemm_bar(g);
    unit_pass up;
    pass_pointers(g, &e, &u, pb, &up, !splitk, splitk);
    if (splitk) /* this split's own partial tile */
        up.ws = gemm_addr64(g, up.ws, ptx_r(g->split), (int64_t)e.srows * e.scols * 4);
    emit_all_units(g, &e, &u, &up, splitk ? SRC_WS_WRITE : e.direct ? SRC_STAGED : SRC_SMEM);
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
    int64_t part_bytes = (int64_t)pp->batch * e.tiles * e.splitk * e.srows * e.scols * 4;
    ptx_reg bt = gemm_mad(g, ptx_r(g->bidx), ptx_imm(e.tiles), ptx_r(g->tile));
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
    ptx_reg notlast = g->arrivals.id
                          ? gemm_setp(g, PTX_M_NE, ptx_r(seen), ptx_r(gemm_op2(g, PTX_OP_SUB, ptx_r(g->arrivals), ptx_imm(1))))
                          : gemm_setp(g, PTX_M_NE, ptx_r(seen), ptx_imm(e.splitk - 1));
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

/* ---- the TMA-store epilogue (the wgmma loop's epi=1) ----
 *
 * The expression epilogue runs on the fragment in registers as on the
 * direct way (per-row and per-column vectors, C and the M x N epilogue
 * tensors read with ld.global at the fragment's positions, predicated at
 * the problem's edges), the values are converted to D's dtype and written
 * into a staging tile laid out as the store tensor map's boxes expect:
 * nbox column boxes of W bytes a row (W the widest of 128, 64, 32, 16
 * dividing bn es: one swizzle span, 128B, 64B or 32B swizzle, or 16
 * unswizzled bytes) and bm rows,
 * each W bm bytes on a 1024-byte boundary (the swizzle pattern's), byte
 * (r, c) of a box at r W + (c ^ (((r W) >> 7) & mask) << 4) (ref 2.3).
 * 16-bit outputs go in with stmatrix.x4 (two m16n8 atoms: their four
 * 8 x 8 halves, one cvt.rn.{bf16x2,f16x2}.f32 pair each), f32 pairs with
 * st.shared.v2, fp8 pairs with st.shared.b16. Then every writer fences
 * (fence.proxy.async.shared::cta: the TMA engine reads through the async
 * proxy), the consumers meet on their named barrier and consumer thread 0
 * issues one cp.async.bulk.tensor store per box and commits the bulk
 * group. TMA clips at the map's bounds, so nothing is predicated at odd
 * M or N. The staging is reused (persistent: the next tile) only after
 * cp.async.bulk.wait_group.read 0 (gemm_epi_tma_reuse, before the
 * barrier that precedes the next tile's epilogue), and the CTA waits the
 * same way before it exits (gemm_epi_tma_drain). */

typedef struct tma_tile {
    int es, W, boxw, nbox, box_bytes, mask, swizzle;
} tma_tile;

static tma_tile tma_tile_of(const gemm_ctx *g)
{
    tma_tile t;
    t.es = dt_bytes(g->pp->out_dt);
    int row = g->bn * t.es;
    t.W = 128; /* the widest span that tiles the row (bn 96 bf16: 64) */
    while (t.W > 16 && row % t.W)
        t.W /= 2;
    t.boxw = t.W / t.es;
    t.nbox = row / t.W;
    t.box_bytes = g->bm * t.W;
    t.mask = t.W == 128 ? 7 : t.W == 64 ? 3 : t.W == 32 ? 1 : 0;
    t.swizzle = t.W == 128 ? EMU_TMAP_SWIZZLE_128B
              : t.W == 64  ? EMU_TMAP_SWIZZLE_64B
              : t.W == 32  ? EMU_TMAP_SWIZZLE_32B
                           : EMU_TMAP_SWIZZLE_NONE;
    return t;
}

int gemm_epi_tma_check(const gemm_ctx *g, pt_err *e)
{
    const pt_prepared *pp = g->pp;
    int es = dt_bytes(pp->out_dt);
    if (pp->d_col)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store): a column-major D is not supported (epi=0 writes it)");
    if (pp->out_dt == PT_S32 || kit_tma_dtype(pp->out_dt) < 0)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store): %s output is not supported (f32 f16 bf16 e4m3 e5m2; "
                       "epi=0 writes it)", pt_dtype_get(pp->out_dt)->name);
    if (pp->ldd * es % 16)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store): ldd=%lld is not a multiple of 16 bytes of %s (TMA "
                       "strides): pad it", (long long)pp->ldd, pt_dtype_get(pp->out_dt)->name);
    if (pp->batch > 1 && pp->sd * es % 16)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store): the batch stride of D is not a multiple of 16 bytes");
    if (g->splitk > 1)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store): not with split-K or stream-K (the fixup writes D)");
    if (g->bn * es < 16 || g->bn % 16 || g->bm > 256)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store): bm=%d bn=%d: the store boxes need bn a multiple of 16 "
                       "and bm at most 256", g->bm, g->bn);
    return PT_OK;
}

int gemm_epi_tma_smem(const gemm_ctx *g)
{
    tma_tile t = tma_tile_of(g);
    return t.nbox * t.box_bytes;
}

pt_tmap gemm_epi_tma_map(const gemm_ctx *g)
{
    const pt_prepared *pp = g->pp;
    tma_tile t = tma_tile_of(g);
    pt_tmap m = {.of = PT_ARG_OUTPUT, .index = 0, .dtype = kit_tma_dtype(pp->out_dt),
                 .rank = pp->batch > 1 ? 3 : 2, .l2promo = EMU_TMAP_L2_256B, .oobfill = EMU_TMAP_OOB_ZERO};
    m.dims[0] = (uint64_t)pp->N;
    m.dims[1] = (uint64_t)pp->M;
    m.dims[2] = (uint64_t)pp->batch;
    m.strides[0] = (uint64_t)(pp->ldd * t.es);
    m.strides[1] = (uint64_t)(pp->sd * t.es);
    m.box[0] = (uint32_t)t.boxw;
    m.box[1] = (uint32_t)g->bm;
    m.box[2] = 1;
    m.swizzle = t.swizzle;
    return m;
}

void gemm_epi_tma_reuse(gemm_ctx *g)
{
    ptx_emit(g->f, PTX_OP_BULK_WAIT, M1(PTX_M_READ), PTX_NOTYPES, ptx_imm(0));
}

void gemm_epi_tma_drain(gemm_ctx *g) { gemm_epi_tma_reuse(g); }

/* An M x N tensor (C, a residual) at the fragment's positions: base is its
 * (batch's) pointer, ld its row pitch in elements; pairs when the pitch and
 * N keep them aligned; lanes past M or N load nothing (their values are
 * clipped by the store). */
static void frag_full(gemm_ctx *g, const kit_frag *fr, ptx_reg base, int64_t ld, pt_dtype dt, ptx_reg *v)
{
    const pt_prepared *pp = g->pp;
    int es = dt_bytes(dt);
    ptx_reg rg = gemm_op2(g, PTX_OP_ADD, ptx_r(g->m0), ptx_r(fr->row_base));
    ptx_reg cg = gemm_op2(g, PTX_OP_ADD, ptx_r(g->n0), ptx_r(fr->col_base));
    ptx_reg p = ptr2d(g, base, rg, ld, cg, es);
    bool em = pp->M % g->bm != 0, en = pp->N % g->bn != 0;
    int run = fr->vec == 2 && ld % 2 == 0 && pp->N % 2 == 0 ? 2 : 1;
    ptx_reg rok[16];
    memset(rok, 0, sizeof rok);
    for (int i = 0; i < fr->n; i += run) {
        ptx_reg ok = {0};
        if (em) {
            int h = fr->row[i] & 15;
            if (!rok[h].id)
                rok[h] = gemm_setp_s(g, PTX_M_LT, ptx_r(rg), ptx_imm(pp->M - fr->row[i]));
            ok = rok[h];
        }
        if (en)
            ok = gemm_pand(g, ok, gemm_setp_s(g, PTX_M_LT, ptx_r(cg), ptx_imm(pp->N - fr->col[i])));
        load_vals(g, p, ((int64_t)fr->row[i] * ld + fr->col[i]) * es, dt, run, &v[i], ok, false);
    }
}

/* Address registers of the staging writes: per 16-byte chunk q of a box
 * row, rowaddr + (((q | hi) ^ rx) << 4), hi the lane's chunk bit (0 or 1,
 * a register; id 0: none), rx the swizzle of the lane's row. */
static ptx_reg chunk_addr(gemm_ctx *g, ptx_reg *cache, int q, ptx_reg rowaddr, ptx_reg hi, ptx_reg rx)
{
    if (cache[q].id)
        return cache[q];
    ptx_opd c = ptx_imm(q);
    if (hi.id)
        c = q ? ptx_r(gemm_op2(g, PTX_OP_OR, ptx_r(hi), c)) : ptx_r(hi);
    if (rx.id)
        c = ptx_r(gemm_op2(g, PTX_OP_XOR, c, ptx_r(rx)));
    if (c.kind == PTX_O_IMM)
        cache[q] = gemm_op2(g, PTX_OP_ADD, ptx_r(rowaddr), ptx_imm(16 * q));
    else
        cache[q] = gemm_op2(g, PTX_OP_ADD, ptx_r(rowaddr), ptx_r(gemm_op2(g, PTX_OP_SHL, c, ptx_imm(4))));
    return cache[q];
}

/* The swizzle of rows r (r % 8 = r7): ((r7 W) >> 7) & mask (id 0: none). */
static ptx_reg row_swizzle(gemm_ctx *g, const tma_tile *t, ptx_reg r7)
{
    if (!t->mask)
        return (ptx_reg){0};
    ptx_reg x = r7;
    if (t->W != 128)
        x = gemm_op2(g, PTX_OP_SHR, ptx_r(gemm_mul(g, ptx_r(r7), ptx_imm(t->W))), ptx_imm(7));
    return t->mask == 7 && t->W == 128 ? x : gemm_op2(g, PTX_OP_AND, ptx_r(x), ptx_imm(t->mask));
}

void gemm_epilogue_tma(gemm_ctx *g, const gemm_accs *acc, ptx_reg map)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    pt_arena *ar = f->mod->arena;
    kit_frag fr = *acc;
    tma_tile t = tma_tile_of(g);
    int n = fr.n;
    /* the wgmma D fragment: m16n8 atoms 1 x bn/8, register 4 j + v at row
     * 8 ((v >> 1) & 1), column 8 j + (v & 1) of the lane's base */
    bool shape = n == g->bn / 2 && fr.vec == 2 && n <= EPI_MAX_ACC && !pp->int_exact;
    for (int i = 0; shape && i < n; i++)
        shape = fr.row[i] == 8 * ((i >> 1) & 1) && fr.col[i] == 8 * (i >> 2) + (i & 1);
    if (!shape) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "gemm TMA-store epilogue: the fragment (%d registers) is not the "
                "wgmma D layout of a 16 x %d warp tile", n, g->bn);
        return;
    }
    /* the expression per element, in registers */
    ptx_reg *auxv = pt_arena_alloc(ar, (size_t)(pp->naux > 0 ? pp->naux : 1) * (size_t)n * sizeof(ptx_reg));
    for (int j = 0; j < pp->naux; j++) {
        const gemm_aux *x = &pp->aux[j];
        if (x->kind == GEMM_AUX_FULL)
            frag_full(g, &fr, g->paux[j], pp->N, pp->aux_dt, &auxv[j * n]);
        else
            frag_aux(g, &fr, x, g->paux[j], x->kind == GEMM_AUX_N ? pp->N % g->bn != 0 : pp->M % g->bm != 0,
                     &auxv[j * n]);
    }
    ptx_reg *cv = NULL;
    if (pp->has_c) {
        cv = pt_arena_alloc(ar, (size_t)n * sizeof(ptx_reg));
        frag_full(g, &fr, g->pc, pp->ldc, pp->c_dt, cv);
    }
    ptx_opd *val = pt_arena_alloc(ar, (size_t)pp->epi->nnodes * sizeof(ptx_opd));
    ptx_reg out[EPI_MAX_ACC];
    for (int i = 0; i < n; i++) {
        ptx_reg ax[GEMM_MAX_AUX];
        for (int j = 0; j < pp->naux; j++)
            ax[j] = auxv[j * n + i];
        out[i] = epi_value(g, fr.r[i], cv ? cv[i] : (ptx_reg){0}, ax, val);
    }
    /* into the staging tile */
    ptx_reg cache[8];
    memset(cache, 0, sizeof cache);
    ptx_reg lane = g->lane;
    if (t.es == 2) {
        /* stmatrix.x4 of atoms 2p, 2p+1: matrix k (lanes 8k..8k+7 give its
         * rows) is atom 2p + (k >> 1), rows 8 (k & 1) .. +8 */
        const pt_dtype_info *di = pt_dtype_get(pp->out_dt);
        ptx_reg r7 = gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(7));
        ptx_reg k1 = gemm_op2(g, PTX_OP_AND, ptx_r(gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(3))), ptx_imm(1));
        ptx_reg hi = gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(4));
        ptx_reg row = gemm_op2(g, PTX_OP_ADD, ptx_r(gemm_mad(g, ptx_r(k1), ptx_imm(8), ptx_r(r7))),
                               ptx_r(fr.grp_row));
        ptx_reg rowaddr = gemm_mad(g, ptx_r(row), ptx_imm(t.W), ptx_r(g->smem));
        ptx_reg rx = row_swizzle(g, &t, r7);
        for (int p = 0; p < g->bn / 16; p++) {
            int c0 = 32 * p, b = c0 / t.W, q0 = c0 % t.W / 16;
            ptx_reg a = chunk_addr(g, cache, q0, rowaddr, hi, rx);
            ptx_reg x[4];
            for (int k = 0; k < 4; k++) {
                int i = 4 * (2 * p + (k >> 1)) + 2 * (k & 1);
                x[k] = ptx_reg_new(f, PTX_T_B32);
                ptx_emit(f, PTX_OP_CVT, di->from_f32, PTX_TYPES(di->x2, PTX_T_F32), ptx_r(x[k]), ptx_r(out[i + 1]),
                         ptx_r(out[i]));
            }
            ptx_emit(f, PTX_OP_STMATRIX, PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, PTX_M_X4, PTX_M_SHARED),
                     PTX_T1(PTX_T_B16), ptx_addr(a, (int64_t)b * t.box_bytes), ptx_vecr(f, 4, x));
        }
    } else {
        /* f32 or fp8 pairs at the fragment's own positions: lane l's row
         * l / 4 (+ 8), bytes 2 (l % 4) es (+ 8 j es) */
        ptx_reg r7 = gemm_op2(g, PTX_OP_AND, ptx_r(gemm_op2(g, PTX_OP_SHR, ptx_r(lane), ptx_imm(2))), ptx_imm(7));
        ptx_reg lcb = gemm_mul(g, ptx_r(gemm_op2(g, PTX_OP_AND, ptx_r(lane), ptx_imm(3))), ptx_imm(2 * t.es));
        ptx_reg hi = {0};
        ptx_reg rowaddr = gemm_mad(g, ptx_r(fr.row_base), ptx_imm(t.W), ptx_r(g->smem));
        if (t.es == 4) { /* 8 (l % 4) bytes: chunk bit (l % 4) >> 1, 8 (l & 1) within it */
            hi = gemm_op2(g, PTX_OP_SHR, ptx_r(lcb), ptx_imm(4));
            rowaddr = gemm_op2(g, PTX_OP_ADD, ptx_r(rowaddr),
                               ptx_r(gemm_op2(g, PTX_OP_AND, ptx_r(lcb), ptx_imm(15))));
        } else /* fp8: 2 (l % 4) bytes, inside the chunk */
            rowaddr = gemm_op2(g, PTX_OP_ADD, ptx_r(rowaddr), ptx_r(lcb));
        ptx_reg rx = row_swizzle(g, &t, r7);
        for (int j = 0; j < g->bn / 8; j++) {
            int cb = 8 * j * t.es, b = cb / t.W, q = cb % t.W / 16, cl = cb % 16;
            ptx_reg a = chunk_addr(g, cache, q, rowaddr, hi, rx);
            for (int h = 0; h < 2; h++)
                store_vals_in(g, true, a, (int64_t)b * t.box_bytes + 8 * h * t.W + cl, pp->out_dt, 2,
                              &out[4 * j + 2 * h], (ptx_reg){0}, false);
        }
    }
    /* the async proxy reads what the generic proxy wrote */
    ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
    gemm_bar(g);
    ptx_reg t0 = gemm_setp(g, PTX_M_EQ, ptx_r(g->tid), ptx_imm(0));
    static const ptx_mod dims[] = {PTX_M_T2D, PTX_M_T3D};
    int rank = pp->batch > 1 ? 3 : 2;
    for (int b = 0; b < t.nbox; b++) {
        ptx_opd c[3] = {ptx_r(g->n0), ptx_r(g->m0), ptx_r(g->bidx)};
        if (b)
            c[0] = ptx_r(gemm_op2(g, PTX_OP_ADD, ptx_r(g->n0), ptx_imm((int64_t)b * t.boxw)));
        ptx_guard(ptx_emit(f, PTX_OP_TMA_ST, PTX_MODS(dims[rank - 2], PTX_M_GLOBAL, PTX_M_SHARED_CTA, PTX_M_BULK_GROUP),
                           PTX_NOTYPES, ptx_tensor(f, ptx_r(map), rank, c),
                           ptx_addr(g->smem, (int64_t)b * t.box_bytes)),
                  t0, false);
    }
    ptx_guard(ptx_emit0(f, PTX_OP_BULK_COMMIT, NOM, PTX_NOTYPES), t0, false);
}
