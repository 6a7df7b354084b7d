/* GEMM main loop for sm_90a (issue 13): warp-specialised wgmma fed by TMA
 * through a full/empty mbarrier ring (design: shared/design/
 * attention_hopper.md section 2; facts: shared/ref/ptx-sm90.md).
 *
 * One CTA per BM x BN tile, 128 (1 + C) threads, C = BM / 64 consumer
 * warpgroups (cooperative: the consumers split the tile along M, 64 rows
 * each):
 *   warpgroup 0, the producer: setmaxnreg.dec 40; one elected thread of its
 *     first warp walks the k tiles: waits empty[s], arms full[s] with the
 *     stage's bytes (arrive.expect_tx), TMA-loads the A and B boxes of the
 *     k tile into stage s (zero-filled past M, N, K);
 *   warpgroups 1..C, the consumers: setmaxnreg.inc 232; per k tile: wait
 *     full[s], wgmma.fence, BK*es/32 wgmma.m64n{BN}k* (SS: both operands
 *     through shared-memory descriptors, 128B or 64B swizzle; MN-major
 *     16-bit operands through the transpose immediates), commit_group,
 *     one wait_group per stage: wg_wait=0 waits for this stage's group
 *     and releases stage s; wg_wait=1 keeps it in flight, so the wait
 *     retires the previous stage's group and releases that stage (the
 *     last one after the loop, after wait_group 0); lane 0 of each consumer
 *     warp arrives on empty (count 4 C): a stage is released only after
 *     the wgmmas reading it retired.
 * The k loops carry .pragma "nounroll". After the loop the consumers meet
 * on a named barrier (bar.sync 1, 128 C: the producer takes no part) and
 * hand their accumulators to the shared epilogue (gen/gemm_epi.c) as the
 * mma.sync fragment they are: warp w of consumer c holds rows 16 (4 c + w)
 * .. +16 and all BN columns, register i at row l/4 + 8 ((i >> 1) & 1),
 * column 8 (i >> 2) + 2 (l % 4) + (i & 1) (ref 1.3), i.e. m16n8 atoms
 * 1 x BN/8 of a 16 x BN warp tile. The epilogue (bias, activations,
 * residual, scales, fp8 out, staged through the ring, which nobody uses
 * any more) runs on the consumer threads only.
 *
 * Shared memory (dynamic, rounded up to 1024 at run time, 1 KB slack):
 * stage s at base + s (A + B bytes): A then B, every tile on its swizzle
 * pattern; the epilogue's staging reuses the ring; then full[S], empty[S].
 * Decompositions (gen/gemm_wgmma_sched.h): splitk = S (grid.y, each
 * split a k range of every tile) and streamk = 1 (the tiles' k iterations
 * cut into persistent-grid units, a unit's segments walked tile by tile):
 * both roles walk the same k range; a tile with several contributors goes
 * through the shared epilogue's split-K fixup (partial to the workspace
 * slot, fence, per-tile atomic counter, the last arriver sums the slots
 * in unit order and runs the expression epilogue, then zeroes the slots
 * and the counter: the PT_ARG_WORKSPACE contract of the mma.sync path,
 * zero-filled once, left zero by every launch; stream-K sends every tile
 * through it, a tile one unit covers with one arrival). No CTA waits on
 * another. Workspace: batch x tiles x S partial tiles (S the splits, or
 * the most units of any tile), then a u32 counter per (batch, tile).
 * Tile N is any wgmma N of the dtype (multiples of 8, the int types 8, 16,
 * 24 then multiples of 16; an MN-major B multiples of 64): the space adds
 * 3/4 of its largest power of two (192 beside 256) and N rounded to 16.
 * Consumer schedules and clusters (config sched, cluster; the walk
 * functions walk_head / sched_pingpong_head below):
 *   sched=1, pingpong (bm=64 or 128, two consumer warpgroups): each
 *     consumer owns whole BM x BN tiles (bm=128: two m64 wgmmas per k step
 *     into two accumulator sets, bn <= 128 so they fit setmaxnreg's 232,
 *     the epilogue run per 64-row half) and the CTA's tiles (units) alternate between
 *     them, cwg 0 the even ones; the producer fills the ring for every
 *     unit in order, so a consumer moves its ring ends past the other's
 *     KT stages after each tile (kit_pipe_skip; empty counts one
 *     consumer's 4 warps). Order: a consumer issues its k loop when it is
 *     its turn (bar.sync 2 + cwg, 256, but at the CTA's first unit) and
 *     hands the turn over once its wgmmas are issued (bar.arrive 3 - cwg,
 *     256, when the CTA has a next unit), so one consumer's epilogue
 *     (staged in a region of its own past the ring, on named barrier
 *     4 + cwg of its 128 threads) overlaps the other's MMAs. The order is
 *     for speed: the full/empty ring alone keeps the result right.
 *     Without persistent, each CTA takes two units (grid ceil(units/2)).
 *   cluster=21 (2x1: CTA pairs along M share B) / 12 (1x2: along N, A):
 *     launched with pt_launch.cluster {2,1,1} (.explicitcluster,
 *     .reqnctapercluster 2,1,1); a unit is the pair's 2 BM x BN (BM x 2 BN)
 *     tile, walked by cluster (%ctaid.x / 2; both CTAs walk the same units
 *     and k tiles), rank r = %cluster_ctarank taking its half. The shared
 *     operand is loaded once: each CTA loads half (K-major: half the rows,
 *     box rows / 2; MN-major: the 64-row boxes j with j % 2 == r) with
 *     .multicast::cluster (mask 0b11) into both CTAs' stage, completing on
 *     both full barriers (each still expects the whole stage). Empty counts
 *     both CTAs' consumer warps: a release arrives locally and on the
 *     peer's empty barrier (mapa + arrive.release.cluster), and the
 *     producer waits .acquire.cluster, so no stage is overwritten in
 *     either CTA before both released it. fence.mbarrier_init +
 *     barrier.cluster after the init (no multicast or remote arrive
 *     before the peer's barriers exist), barrier.cluster before exit (no
 *     CTA exits while its peer may still arrive on its barriers).
 *   Both take whole tiles only (no splitk or streamk); they combine.
 * dyn=m (docs/runtime.md): M is the u32 parameter m; the PTX is every m's
 * (split-K and stream-K: the bucket (m_cap/2, m_cap], their workspace and
 * plan at m_cap tiles); the plain grid is (ceil(m / bm), column tiles x
 * splitk, batch), tile = column tile x tile rows + %ctaid.x; persistent
 * loops, pingpong's and a cluster's walks (persistent only) count their
 * tiles / units from m; D's, C's and full tensors' batch strides are m
 * rows; the maps over A (and D, epi=1) are the launch's, at its m.
 * Tensor maps: K-major operand {K, rows[, batch]} with box {BK, rows}, the
 * k tile's row being one swizzle span (BK es = 128 or 64 bytes); MN-major
 * (A 't', B 'n') {MN, K[, batch]} with boxes {64, BK} (128 bytes of MN,
 * 128B swizzle) placed box-size apart (the descriptor's LBO). */
#include <stdio.h>
#include <string.h>

#include "gen/gemm_int.h"
#include "gen/gemm_wgmma_sched.h"
#include "ptx/emu/tmap.h"

enum { WG_PRODUCER_REGS = 40, WG_CONSUMER_REGS = 232, WG_ENTRY_REGS = 168, WG_REG_FILE = 65536,
       WG_PINGPONG_ACC = 128 };

static int dt_bytes(pt_dtype t) { return pt_dtype_get(t)->bytes; }

static int64_t pow2ceil(int64_t v)
{
    int64_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}

/* Everything derived from a config (and the epilogue's gemm_ctx view). */
typedef struct wg_geom {
    gemm_ctx g;
    kit_atom wa;     /* the wgmma atom m64n{bn}k* */
    int consumers;   /* consumer warpgroups */
    int wg_wait;     /* wgmma groups left in flight at each stage's wait */
    int kbytes;      /* bytes of k per tile row (K-major swizzle span) */
    int a_bytes, b_bytes;
    int stages, stage_bytes; /* the ring (g's pair is the epilogue's budget view) */
    int persistent;  /* CTAs per SM of a persistent grid sized at launch (0: one CTA per tile) */
    int splitk;      /* CTAs splitting K (grid.y; gen/gemm_wgmma_sched.h) */
    bool streamk;    /* stream-K units over the persistent grid (sk) */
    wg_sk sk;
    int fix_slots;   /* split-K/stream-K fixup slots per tile in the workspace (1: none) */
    int epi_off;     /* staging offset from base: 0 (the ring, reused) or past the ring */
    int epi;         /* epilogue: 0 direct, 1 TMA store (gemm_epilogue_tma) */
    int sched;       /* 0 cooperative, 1 pingpong (two consumers alternate whole tiles) */
    int halves;      /* m64 wgmmas a consumer issues per k step: 1, or bm / 64 with pingpong */
    int cluster;     /* config value: 1 none, 21 (2x1: a pair along M shares B), 12 (1x2: along N, A) */
    int csize;       /* CTAs per cluster (1, 2) */
    int shared_op;   /* csize 2: the operand the pair shares, multicast (0 A, 1 B) */
    int64_t units;   /* what the CTAs walk: tiles, or pairs of tiles (csize 2) */
    int64_t slots;   /* walkers: CTAs, or clusters (csize 2) */
    ptx_reg units_r; /* dyn=m, scheduled: u32 units at this m (id 0: the immediate) */
    ptx_reg tm2_r;   /* dyn=m, cluster 21: u32 rows of pair units, ceil(tile rows / 2) */
    int epi_bytes;   /* pingpong: one consumer's staging (each has its own) */
    int region;      /* ring and epilogue staging */
    int smem_bytes;  /* dynamic: slack + region + barriers */
} wg_geom;

bool gemm_wgmma_target(const pt_target *t) { return t->sm == 90 && t->arch_specific; }

/* Input dtypes this main loop serves: bf16 and f16 every layout; tf32
 * (f32 storage, its bits copied by TMA and read by wgmma .tf32) and the
 * 8-bit types K-major only (layout nt). */
static bool dtype_ok(pt_dtype dt)
{
    return dt == PT_BF16 || dt == PT_F16 || dt == PT_TF32 || dt == PT_E4M3 || dt == PT_E5M2 || dt == PT_S8 ||
           dt == PT_U8;
}

/* Whether TMA can describe the operands (strides multiples of 16 bytes). */
static const char *tma_problem(const pt_prepared *pp)
{
    int es = pp->at->es;
    if (pp->lda * es % 16)
        return "lda";
    if (pp->ldb * es % 16)
        return "ldb";
    if (pp->batch > 1 && (pp->sa * es % 16 || pp->sb * es % 16))
        return "the batch stride";
    return NULL;
}

/* Sizes read at run time (the problem's dyn key; NULL or "none": baked in). */
static bool dynamic(const pt_prepared *pp)
{
    return pp->prob.dyn && *pp->prob.dyn && strcmp(pp->prob.dyn, "none") != 0;
}

bool gemm_wgmma_applies(const pt_prepared *pp, const pt_target *t)
{
    /* tf32 and 8-bit operands are K-major in shared memory (no transpose) */
    bool kmaj = pp->at->es == 2 || (pp->a_kmajor && pp->b_kmajor);
    return gemm_wgmma_target(t) && dtype_ok(pp->at->dt) && kmaj && !tma_problem(pp) && !(pp->dyn_m && pp->d_col);
}

/* The M the tiles are counted at: M, or with dyn=m m_cap (the split-K
 * workspace's and stream-K's plan; the grid and the walks read m). */
static int64_t dyn_rows(const pt_prepared *pp) { return pp->dyn_m ? pp->m_cap : pp->M; }

/* ---- split-K and stream-K (issue 13 item 2; the scheduler is
 * gen/gemm_wgmma_sched.c) ---- */

/* splitk and streamk of a config: w's split count, stream-K plan and the
 * fixup's slots per tile (g->splitk, the epilogue's S); after the tiles
 * and k tiles are known. */
static int decomp_geometry(const pt_prepared *pp, const pt_config *c, wg_geom *w, pt_err *e)
{
    gemm_ctx *g = &w->g;
    int64_t sk = pt_config_get(c, "splitk", 1), st = pt_config_get(c, "streamk", 0);
    if (sk < 1 || sk > 16)
        return pt_errf(e, PT_EINVAL, "splitk=%lld: must be 1..16", (long long)sk);
    if (sk > g->kt_total)
        return pt_errf(e, PT_EINVAL, "splitk=%lld: more splits than k tiles (%lld)", (long long)sk,
                       (long long)g->kt_total);
    if (st != 0 && st != 1)
        return pt_errf(e, PT_EINVAL, "streamk=%lld: 0 (off) or 1 (stream-K units over the persistent grid)",
                       (long long)st);
    w->splitk = (int)sk;
    w->streamk = st == 1;
    w->fix_slots = w->splitk;
    if (w->streamk) {
        if (sk > 1)
            return pt_errf(e, PT_EINVAL, "streamk=1 with splitk=%lld: one or the other", (long long)sk);
        if (!w->persistent)
            return pt_errf(e, PT_EINVAL, "streamk=1 needs persistent=1 or 2 (the units spread over that grid)");
        int rc = wg_sk_plan(g->tiles, g->kt_total, GEMM_SK_MAX_SMS, &w->sk, e); /* K = 1 (geometry) */
        if (rc)
            return rc;
        w->fix_slots = w->sk.slots;
    }
    g->splitk = w->fix_slots;
    (void)pp; /* every box of the TMA-store epilogue is written (bn 48/80/96/208 too) */
    return PT_OK;
}

/* dyn=m (M the u32 parameter m): a row-major D only (a column-major one
 * is the mma.sync loop's); a plain grid is (ceil(m / bm), column
 * tiles x splitk, batch), so column tiles x splitk <= 65535; the TMA-store
 * epilogue's reads of C and of full or per-row epilogue tensors take M as
 * an immediate (gemm_epi.c's TMA section): not with dyn=m yet. */
static int dyn_geometry(const pt_prepared *pp, const wg_geom *w, int64_t tnn, pt_err *e)
{
    if (!pp->dyn_m)
        return PT_OK;
    if (pp->d_col)
        return pt_errf(e, PT_EUNSUPPORTED, "impl=1 (wgmma): dyn=m with a column-major D (d_colmajor=1) is the "
                       "mma.sync loop's (impl=0)");
    if (!w->persistent && tnn * w->splitk > 65535)
        return pt_errf(e, PT_ERANGE, "dyn=m: %lld column tiles x splitk=%d CTAs along grid y: at most 65535 (a "
                       "larger bn, or persistent)", (long long)tnn, w->splitk);
    bool rows = pp->has_c;
    for (int j = 0; j < pp->naux; j++)
        rows = rows || pp->aux[j].kind != GEMM_AUX_N;
    if (w->epi && rows)
        return pt_errf(e, PT_EINVAL, "epi=1 (TMA store) with dyn=m: the epilogue reads C or an M-row tensor, "
                       "which that path sizes at the tuned M (epi=0)");
    return PT_OK;
}

/* The epilogue's view of a pingpong tile of bm=128 (on) and back (off):
 * the consumer runs it per 64-row half (rows 64 h .. of its tile), as a
 * bm=64 consumer runs its tile, so the epilogue sees bm 64. */
static void epi_view(wg_geom *w, bool on)
{
    if (w->halves > 1)
        w->g.bm = on ? 64 : 64 * w->halves;
}

/* The consumer schedule and the cluster of a config (sched, cluster):
 * pingpong takes two consumer warpgroups, each owning a whole 64-row tile
 * (bm=64 is the tile of one); a cluster of 2 pairs CTAs along M (21: they
 * share B) or N (12: they share A). */
static int sched_geometry(const pt_prepared *pp, const pt_config *c, wg_geom *w, pt_err *e)
{
    int64_t sc = pt_config_get(c, "sched", 0), cl = pt_config_get(c, "cluster", 1);
    if (sc != 0 && sc != 1)
        return pt_errf(e, PT_EINVAL, "sched=%lld: 0 (cooperative) or 1 (pingpong)", (long long)sc);
    if (cl != 1 && cl != 21 && cl != 12)
        return pt_errf(e, PT_EINVAL, "cluster=%lld: 1 (none), 21 (2x1: a pair along M shares B) or 12 (1x2: a "
                       "pair along N shares A)", (long long)cl);
    w->sched = (int)sc;
    w->cluster = (int)cl;
    w->csize = cl == 1 ? 1 : 2;
    w->shared_op = cl == 21 ? 1 : 0;
    w->halves = 1;
    if (w->sched) {
        /* bm=128: a consumer's tile is two m64 halves, two wgmmas per k step
         * into two accumulator sets (registers: geometry) */
        if (w->g.bm != 64 && w->g.bm != 128)
            return pt_errf(e, PT_EINVAL, "sched=1 (pingpong): bm=%d, must be 64 or 128 (each of the two consumer "
                           "warpgroups owns a whole tile)", w->g.bm);
        w->consumers = 2;
        w->halves = w->g.bm / 64;
    }
    /* multicast: each CTA loads half of a K-major shared operand's rows into
     * both CTAs' stage, at rows / 2 rows (x the swizzle span) from the
     * tile's start: a TMA destination must sit on its swizzle pattern's
     * boundary (8 rows: 1024 bytes for 128B), so the half is whole 8-row
     * groups (an MN-major operand goes in whole 64-row boxes) */
    bool skm = w->shared_op == 1 ? pp->b_kmajor : pp->a_kmajor;
    int srows = w->shared_op == 1 ? w->g.bn : w->g.bm;
    if (w->csize == 2 && skm && srows % 16)
        return pt_errf(e, PT_EINVAL, "cluster=%lld with %s=%d: each CTA multicasts %d rows of %s, not whole 8-row "
                       "swizzle groups (a TMA destination starts on its swizzle pattern): %s a multiple of 16",
                       (long long)cl, w->shared_op == 1 ? "bn" : "bm", srows, srows / 2,
                       w->shared_op == 1 ? "B" : "A", w->shared_op == 1 ? "bn" : "bm");
    if ((w->sched || w->csize > 1) && pt_config_get(c, "splitk", 1) != 1)
        return pt_errf(e, PT_EINVAL, "splitk=%lld: not with sched=1 or a cluster (whole tiles only)",
                       (long long)pt_config_get(c, "splitk", 1));
    if ((w->sched || w->csize > 1) && pt_config_get(c, "streamk", 0) != 0)
        return pt_errf(e, PT_EINVAL, "streamk=%lld: not with sched=1 or a cluster (whole tiles only)",
                       (long long)pt_config_get(c, "streamk", 0));
    if ((w->sched || w->csize > 1) && dynamic(pp) && pt_config_get(c, "persistent", 0) == 0)
        return pt_errf(e, PT_EINVAL, "sched=%lld cluster=%lld: sched=1 or a cluster with dyn=m needs persistent > 0 "
                       "(the walkers' grid is a constant; the units are counted from m)", (long long)sc,
                       (long long)cl);
    return PT_OK;
}

/* What the CTAs (clusters) walk and how many walk it: units are tiles, or
 * the pair's 2 bm x bn (21) or bm x 2 bn (12) tiles; each walker takes
 * units from its index, stepping by the walkers (pingpong: its consumers
 * take them in turn); the plain grid has one walker per unit (pingpong:
 * one per two). */
static void sched_units(wg_geom *w)
{
    const gemm_ctx *g = &w->g;
    const pt_prepared *pp = g->pp;
    int64_t tm = (dyn_rows(pp) + g->bm - 1) / g->bm, tnn = (pp->N + g->bn - 1) / g->bn;
    if (w->csize == 2 && w->shared_op == 1)
        tm = (tm + 1) / 2;
    else if (w->csize == 2)
        tnn = (tnn + 1) / 2;
    w->units = tm * tnn;
    /* the natural walkers (persistent: capped at launch by K x SMs, a whole
     * number of clusters: pt_launch_grid_x) */
    w->slots = (w->units + w->sched) / (1 + w->sched);
}

/* Whether the config takes the scheduled walk (pingpong or a cluster)
 * rather than tile_head's. */
static bool scheduled(const wg_geom *w) { return w->sched || w->csize > 1; }

static int geometry(const pt_prepared *pp, const pt_target *t, const pt_config *c, wg_geom *w, pt_err *e)
{
    memset(w, 0, sizeof *w);
    char tn[16];
    if (!gemm_wgmma_target(t))
        return pt_errf(e, PT_EUNSUPPORTED, "impl=1 (wgmma) needs sm_90a; target is %s",
                       pt_target_name(t, tn, sizeof tn));
    const kit_atom *at = pp->at;
    if (!dtype_ok(at->dt))
        return pt_errf(e, PT_EUNSUPPORTED, "impl=1 (wgmma): %s inputs are not supported (bf16 f16 tf32 e4m3 e5m2 s8 u8)",
                       pt_dtype_get(at->dt)->name);
    const char *bad = tma_problem(pp);
    if (bad)
        return pt_errf(e, PT_EINVAL, "impl=1 (wgmma): %s is not a multiple of 16 bytes (TMA strides): pad it",
                       bad);
    gemm_ctx *g = &w->g;
    int es = at->es;
    g->pp = pp;
    g->at = at;
    g->bm = (int)pt_config_get(c, "bm", 128);
    g->bn = (int)pt_config_get(c, "bn", 128);
    g->bk = (int)pt_config_get(c, "bk", 128 / es);
    g->stages = (int)pt_config_get(c, "stages", 4);
    g->raster = (int)pt_config_get(c, "raster", 1);
    int64_t wgw = pt_config_get(c, "wg_wait", 0);
    if (g->bm != 64 && g->bm != 128)
        return pt_errf(e, PT_EINVAL, "bm=%d: 64 or 128 (64 rows per consumer warpgroup)", g->bm);
    w->consumers = g->bm / 64;
    int rc = sched_geometry(pp, c, w, e);
    if (rc)
        return rc;
    bool isint = at->int_acc;
    if (!kit_wgmma_atom(at->ab, isint ? PTX_T_S32 : PTX_T_F32, g->bn, &w->wa))
        return pt_errf(e, PT_EINVAL, "bn=%d: not a wgmma N for %s (%s)", g->bn, pt_dtype_get(at->dt)->name,
                       isint ? "8, 16, 24, then multiples of 16 up to 256" : "multiples of 8 up to 256");
    w->kbytes = g->bk * es;
    if (w->kbytes != 128 && w->kbytes != 64)
        return pt_errf(e, PT_EINVAL, "bk=%d: the k tile is one 128B or 64B swizzle span (%d or %d %s elements)",
                       g->bk, 128 / es, 64 / es, pt_dtype_get(at->dt)->name);
    if ((!pp->a_kmajor || !pp->b_kmajor) && es != 2)
        return pt_errf(e, PT_EINVAL, "impl=1 (wgmma): %s operands must be K-major (layout nt)",
                       pt_dtype_get(at->dt)->name);
    if (!pp->b_kmajor && g->bn % 64)
        return pt_errf(e, PT_EINVAL, "bn=%d: an MN-major B (layout ?n) is loaded in 64-column boxes: bn must be "
                       "a multiple of 64", g->bn);
    if (g->stages < 2 || g->stages > 8)
        return pt_errf(e, PT_EINVAL, "stages=%d: must be 2..8", g->stages);
    if (g->raster < 1 || g->raster > 64)
        return pt_errf(e, PT_EINVAL, "raster=%d: must be 1..64", g->raster);
    if (wgw != 0 && wgw != 1)
        return pt_errf(e, PT_EINVAL, "wg_wait=%lld: 0 or 1 (wgmma groups in flight at each stage's wait)",
                       (long long)wgw);
    w->wg_wait = (int)wgw;
    int64_t ep = pt_config_get(c, "epi", 0);
    if (ep != 0 && ep != 1)
        return pt_errf(e, PT_EINVAL, "epi=%lld: 0 (direct) or 1 (TMA store)", (long long)ep);
    w->epi = (int)ep;
    int64_t pers = pt_config_get(c, "persistent", 0);
    if (pers < 0 || pers > GEMM_PERSISTENT_MAX)
        return pt_errf(e, PT_EINVAL, GEMM_PERSISTENT_MSG, (long long)pers);
    w->persistent = (int)pers;
    /* registers: the setmaxnreg split must fit the register file, the
     * accumulators (bn / 2 per consumer thread) the consumers' share */
    int threads = 128 * (1 + w->consumers);
    int budget = 128 * WG_PRODUCER_REGS + 128 * w->consumers * WG_CONSUMER_REGS;
    if (budget > WG_REG_FILE || WG_ENTRY_REGS * threads > WG_REG_FILE)
        return pt_errf(e, PT_EINVAL, "%d consumer warpgroups: setmaxnreg %d/%d needs %d registers, %d exist",
                       w->consumers, WG_PRODUCER_REGS, WG_CONSUMER_REGS, budget, WG_REG_FILE);
    if (w->wa.c.regs + 64 > WG_CONSUMER_REGS)
        return pt_errf(e, PT_EINVAL, "bn=%d: %d accumulators per thread leave too few of %d registers",
                       g->bn, w->wa.c.regs, WG_CONSUMER_REGS);
    /* pingpong bm=128: at most the cooperative loop's widest set (bn 256:
     * 128 a thread); ptxas spilled bn=160's 160 with a bias + residual
     * epilogue in setmaxnreg's 232 */
    if (w->halves > 1 && w->wa.c.regs * w->halves > WG_PINGPONG_ACC)
        return pt_errf(e, PT_EINVAL, "sched=1 with bm=%d, bn=%d: %d accumulators per thread (a whole %d-row tile "
                       "per consumer) leave too few of setmaxnreg's %d registers (bn <= %d)", g->bm, g->bn,
                       w->wa.c.regs * w->halves, g->bm, WG_CONSUMER_REGS,
                       WG_PINGPONG_ACC / w->halves * g->bn / w->wa.c.regs);
    /* the epilogue's view: consumer threads, 16 x bn warp tiles stacked along M
     * (pingpong: one consumer's, on its own tile) */
    g->threads = 128 * (w->sched ? 1 : w->consumers);
    g->wm = 16;
    g->wn = g->bn;
    g->warps_m = (w->sched ? 64 : g->bm) / 16; /* pingpong: one consumer's 4 warps */
    g->warps_n = 1;
    g->kslice = 1;
    g->splitk = 1;
    g->ksteps = w->kbytes / 32;
    g->bar_threads = g->threads;
    w->a_bytes = g->bm * w->kbytes;
    w->b_bytes = g->bn * w->kbytes;
    g->stage_bytes = w->a_bytes + w->b_bytes;
    g->kt_total = (pp->K + g->bk - 1) / g->bk;
    /* dyn=m: tiles at m_cap (the workspace's and stream-K's plan) */
    int64_t tm = (dyn_rows(pp) + g->bm - 1) / g->bm, tnn = (pp->N + g->bn - 1) / g->bn;
    g->tiles = tm * tnn;
    if (g->tiles > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "%lld tiles: the grid is limited to 2^31-1", (long long)g->tiles);
    int drc = decomp_geometry(pp, c, w, e); /* splitk, streamk: g->splitk */
    if (drc)
        return drc;
    drc = dyn_geometry(pp, w, tnn, e);
    if (drc)
        return drc;
    int erc = w->epi ? gemm_epi_tma_check(g, e) : PT_OK;
    if (erc)
        return erc;
    w->stages = g->stages;
    w->stage_bytes = g->stage_bytes;
    int lim = (int)pt_target_smem_limit(t->sm);
    int pipe = w->stages * w->stage_bytes;
    if (w->sched) {
        /* pingpong: one consumer's epilogue overlaps the other's main loop
         * and the producer's next fills: each consumer stages in a region
         * of its own past the ring */
        int left = (lim - 1024 - pipe - 16 * w->stages) / 2 / 16 * 16;
        g->stages = 1;
        g->stage_bytes = left > 16 ? left : 16;
        epi_view(w, true); /* bm=128: the epilogue runs per 64-row half */
        w->epi_bytes = (gemm_epi_smem(g) + 15) / 16 * 16;
        epi_view(w, false);
        w->epi_off = pipe;
        w->region = pipe + 2 * w->epi_bytes;
    } else if (w->persistent) {
        /* the producer fills the ring with the next tile while the consumers
         * run this one's epilogue: the staging is a region of its own, as
         * large as what the ring leaves (the epilogue bands to fit it) */
        int left = (lim - 1024 - pipe - 16 * w->stages) / 16 * 16;
        g->stages = 1;
        g->stage_bytes = left > 16 ? left : 16;
        int epi = gemm_epi_smem(g);
        w->epi_off = pipe;
        w->region = pipe + (epi + 15) / 16 * 16;
    } else {
        int epi = gemm_epi_smem(g);
        w->region = (pipe > epi ? pipe : epi + 7) / 8 * 8;
    }
    if (w->epi) { /* the TMA store's staging (1024-byte boxes): past the ring when persistent,
                   * one per consumer with pingpong */
        epi_view(w, true);
        int st = gemm_epi_tma_smem(g);
        epi_view(w, false);
        if (w->sched) {
            w->epi_bytes = st;
            w->region = pipe + 2 * st;
        } else
            w->region = w->persistent ? pipe + st : pipe > st ? pipe : st;
    }
    w->smem_bytes = 1024 + w->region + 16 * w->stages;
    if (w->smem_bytes > lim)
        return pt_errf(e, PT_EINVAL, "%d bytes of shared memory (%d stages of %d, 1 KB alignment slack, "
                       "barriers): %s allows %d per block", w->smem_bytes, w->stages, w->stage_bytes,
                       pt_target_name(t, tn, sizeof tn), lim);
    /* a persistent CTA's epilogue staging takes what the ring leaves of
     * the block's limit, so two never share an SM: K = 1 */
    if (w->persistent == 2)
        return pt_errf(e, PT_EINVAL, "persistent=2: two CTAs an SM do not fit (a persistent wgmma CTA takes %d "
                       "bytes of shared memory, its staging what the ring leaves): 0 (off) or 1", w->smem_bytes);
    sched_units(w);
    return PT_OK;
}

int gemm_wgmma_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    wg_geom w;
    return geometry(pp, t, c, &w, e);
}

/* Tile N need not be a power of two (issue 13 item 5; any wgmma N the
 * dtype allows, check() says which): the space adds 3/4 of its largest
 * value (192 beside 256, 96 beside 128) and, when one tile spans N, N
 * rounded up to 16 (an MN-major B: 64), e.g. 144 for N = 129. */
static void bn_extra(const pt_prepared *pp, int64_t top, int lo, pt_param_space *bn)
{
    int step = pp->b_kmajor ? 16 : 64;
    int64_t cand[2] = {top * 3 / 4, (pp->N + step - 1) / step * step};
    for (int i = 0; i < 2; i++) {
        int64_t v = cand[i];
        bool have = false;
        for (int j = 0; j < bn->nvalues; j++)
            have |= bn->values[j] == v;
        if (have || v < lo || v > 256 || v % step || (i == 1 && pp->N > 256) || bn->nvalues == PT_MAX_VALUES)
            continue;
        bn->values[bn->nvalues++] = v;
    }
}

/* splitk {1, 2, 4} when the tiles are few and K is deep (as the mma.sync
 * space offers it); streamk {0, 1} where a persistent grid of an H100's
 * 132 SMs leaves a partial wave (fewer than 4 waves of 128 x 256 tiles,
 * not a whole number of them) or the tiles are few and K is deep (stream-K
 * then spreads K over the grid; persistent gains 1 for it). */
static void decomp_space(const pt_prepared *pp, pt_space *s)
{
    int es = pp->at->es;
    int64_t t128 = (pp->M + 127) / 128 * ((pp->N + 127) / 128) * pp->batch;
    int64_t t256 = (pp->M + 127) / 128 * ((pp->N + 255) / 256) * pp->batch;
    bool few = t128 < 64;
    pt_param_space sk = {"splitk", "CTAs splitting K (split-K: the last to arrive reduces in split order)", 1, {1}};
    if (few && pp->K * es >= 512) {
        sk.values[sk.nvalues++] = 2;
        sk.values[sk.nvalues++] = 4;
    }
    pt_param_space st = {"streamk", "stream-K: k iterations spread over the persistent grid (1), or tiles (0)",
                         1, {0}};
    bool tail = t256 > 132 && t256 < 4 * 132 && t256 % 132;
    bool deep = few && pp->K * es >= 4096;
    if (tail || deep)
        st.values[st.nvalues++] = 1;
    pt_param_space *pe = NULL;
    for (int i = 0; i < s->nparams; i++)
        if (strcmp(s->p[i].name, "persistent") == 0)
            pe = &s->p[i];
    if (deep && pe && pe->nvalues == 1)
        pe->values[pe->nvalues++] = 1;
    if (s->nparams + 2 <= PT_MAX_PARAMS) {
        s->p[s->nparams++] = sk;
        s->p[s->nparams++] = st;
    }
}

/* The consumer schedule in the space: pingpong where a CTA has two 64-row
 * tiles to alternate. The cluster: 21 (a pair along M) where the largest
 * tile (128 rows) leaves two tile rows, 12 (along N) where the widest (256
 * columns) leaves two tile columns, so the pair's second CTA has a tile of
 * its own (check() keeps the grid even and the multicast halves on their
 * swizzle pattern). The per-commit assembly test samples the space (every
 * value of every parameter); the whole of it is scripts/check_spaces.sh's. */
static void sched_space(const pt_prepared *pp, pt_space *s)
{
    pt_param_space sc = {"sched", "consumers: 0 cooperative (split the tile), 1 pingpong (alternate 64-row tiles)",
                         1, {0}};
    if ((pp->M + 63) / 64 * ((pp->N + 255) / 256) * pp->batch >= 2)
        sc.values[sc.nvalues++] = 1;
    pt_param_space cl = {"cluster", "CTA pairs sharing an operand by TMA multicast: 1 none, 21 (2x1, along M: B), "
                         "12 (1x2, along N: A)", 1, {1}};
    if ((pp->M + 127) / 128 >= 2)
        cl.values[cl.nvalues++] = 21;
    if ((pp->N + 255) / 256 >= 2)
        cl.values[cl.nvalues++] = 12;
    s->p[s->nparams++] = sc;
    s->p[s->nparams++] = cl;
}

int gemm_wgmma_space(const pt_prepared *pp, const pt_target *t, pt_space *s)
{
    (void)t;
    memset(s, 0, sizeof *s);
    int es = pp->at->es;
    pt_param_space impl = {"impl", "main loop: 0 mma.sync, 1 wgmma (sm_90a: TMA + mbarrier ring, warp-specialised)",
                           1, {1}};
    pt_param_space bm = {"bm", "block tile rows (M): 64 per consumer warpgroup", 0, {0}};
    if (pp->M > 64) {
        bm.values[bm.nvalues++] = 128;
        bm.values[bm.nvalues++] = 64;
    } else {
        bm.values[bm.nvalues++] = 64;
        bm.values[bm.nvalues++] = 128;
    }
    pt_param_space bn = {"bn", "block tile columns (N): the wgmma N", 0, {0}};
    /* an MN-major B comes in 64-column boxes */
    int lo = pp->b_kmajor ? 16 : 64;
    int64_t top = pow2ceil(pp->N < lo ? lo : pp->N);
    if (top > 256)
        top = 256;
    for (int v = 256; v >= lo; v /= 2)
        if (v <= top && v >= top / 4)
            bn.values[bn.nvalues++] = v;
    bn_extra(pp, top, lo, &bn);
    pt_param_space bk = {"bk", "k elements per stage (one 128B or 64B swizzle span)", 1, {128 / es}};
    if (pp->K * es <= 64)
        bk.values[bk.nvalues++] = 64 / es;
    pt_param_space st = {"stages", "mbarrier ring depth", 4, {4, 3, 5, 6}};
    pt_param_space ra = {"raster", "tile rows per group in the CTA order (L2 reuse)", 1, {1}};
    if ((pp->M + 127) / 128 > 8)
        ra.values[0] = 8;
    pt_param_space ww = {"wg_wait", "wgmma groups in flight at each stage's wait (1: release the stage before)",
                         2, {1, 0}};
    s->p[s->nparams++] = impl;
    s->p[s->nparams++] = bm;
    s->p[s->nparams++] = bn;
    s->p[s->nparams++] = bk;
    s->p[s->nparams++] = st;
    s->p[s->nparams++] = ra;
    s->p[s->nparams++] = ww;
    /* persistent: one CTA per SM, sized at launch, when the tiles are more
     * than an H100/H200's 132 SMs (two would not fit the ring's shared memory) */
    pt_param_space pe = {"persistent", "CTAs per SM of a persistent grid walking all tiles, sized at launch "
                         "(0: one CTA per tile)", 1, {0}};
    if ((pp->M + 127) / 128 * ((pp->N + 255) / 256) * pp->batch > 132) {
        pe.values[pe.nvalues++] = 1;
    }
    s->p[s->nparams++] = pe;
    pt_param_space ep = {"epi", "epilogue: 0 direct (registers -> global), 1 TMA store (stmatrix into a "
                         "swizzled tile, cp.async.bulk.tensor)", 2, {0, 1}};
    s->p[s->nparams++] = ep;
    decomp_space(pp, s);
    sched_space(pp, s);
    return PT_OK;
}

/* 128 x 256 (or the problem's size) tiles, 128-byte k tiles, 4 stages;
 * then the first valid config of the space. */
void gemm_wgmma_defaults(const pt_prepared *pp, const pt_target *t, pt_config *c)
{
    pt_space s;
    gemm_wgmma_space(pp, t, &s);
    c->n = 0;
    for (int i = 0; i < s.nparams; i++)
        pt_config_set(c, s.p[i].name, s.p[i].values[0]);
    int lo = pp->b_kmajor ? 16 : 64;
    int64_t bn = pow2ceil(pp->N < lo ? lo : pp->N);
    pt_config_set(c, "bm", pp->M > 64 ? 128 : 64);
    pt_config_set(c, "bn", bn > 256 ? 256 : bn);
    pt_config_set(c, "stages", 4);
    pt_space_default(&s, gemm_wgmma_check, pp, t, c);
}

/* ---------------------------------------------------------------------- */
/* emission                                                                */

/* The tile loop of a role (producer or consumers): the tile from
 * %ctaid.x; persistent: a loop that leaves to `out` past the last tile and
 * steps by %nctaid.x (tile_tail). */
static int tile_head(wg_geom *w, int out)
{
    gemm_ctx *g = &w->g;
    ptx_fn *f = g->f;
    const pt_prepared *pp = g->pp;
    g->tile = gemm_sreg(g, PTX_S_CTAID_X);
    int top = -1;
    if (pp->dyn_m && !w->persistent) {
        /* dyn=m: the grid (ceil(m / bm), column tiles x splitk): tile =
         * column tile x tile rows + %ctaid.x (split-K: %ctaid.y = split x
         * column tiles + column tile); a CTA past the rows (a grid for a
         * larger m) leaves */
        ptx_reg past = gemm_setp(g, PTX_M_GE, ptx_r(g->tile), ptx_r(g->tm_r));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(out)), past, false);
        int64_t tnn = (pp->N + g->bn - 1) / g->bn;
        ptx_reg y = gemm_sreg(g, PTX_S_CTAID_Y), tj = y;
        if (w->splitk > 1 && tnn > 1) {
            g->split = gemm_op2(g, PTX_OP_DIV, ptx_r(y), ptx_imm(tnn));
            tj = gemm_op2(g, PTX_OP_REM, ptx_r(y), ptx_imm(tnn));
        } else if (w->splitk > 1) {
            g->split = y;
            tj = gemm_r32(g);
            ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(tj), ptx_imm(0));
        }
        g->tile = gemm_mad(g, ptx_r(tj), ptx_r(g->tm_r), ptx_r(g->tile));
    }
    if (w->persistent) {
        top = ptx_label_new(f);
        ptx_label_place(f, top);
        ptx_opd lim = pp->dyn_m ? ptx_r(g->tiles_r) : ptx_imm(g->tiles);
        ptx_reg fin = gemm_setp(g, PTX_M_GE, ptx_r(g->tile), lim);
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(out)), fin, false);
    }
    gemm_tile_coords(g);
    return top;
}

static void tile_tail(wg_geom *w, int top)
{
    gemm_ctx *g = &w->g;
    if (top < 0)
        return;
    ptx_reg nc = gemm_sreg(g, PTX_S_NCTAID_X);
    ptx_emit(g->f, PTX_OP_ADD, NOM, U32T, ptx_r(g->tile), ptx_r(g->tile), ptx_r(nc));
    ptx_emit(g->f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(top));
}

/* The walk of a role over the units of a scheduled config (pingpong or a
 * cluster): walker = %ctaid.x (a cluster of 2: %ctaid.x / 2, the cluster's
 * index, so both CTAs walk the same units in the same order), walkers =
 * %nctaid.x (/ 2); unit u from the walker's index, stepping by the
 * walkers; a pingpong consumer cwg starts cwg walkers on and steps twice
 * as far (the CTA's units alternate between its two consumers). The tile
 * of this CTA in unit u: the pair's 2 bm x bn (21) or bm x 2 bn (12) unit
 * tile through gemm_tile_coords (raster groups of unit rows), then this
 * rank's half. */
typedef struct sched_walk {
    ptx_reg walker, walkers; /* u32 */
    ptx_reg u, step;         /* u32: the unit, the step */
    int top;
} sched_walk;

/* The units of a scheduled walk: the immediate, or with dyn=m the count at
 * this m. */
static ptx_opd units_opd(const wg_geom *w) { return w->units_r.id ? ptx_r(w->units_r) : ptx_imm(w->units); }

static void walk_head(wg_geom *w, sched_walk *sw, ptx_reg cwg, ptx_reg crank, int out)
{
    gemm_ctx *g = &w->g;
    ptx_fn *f = g->f;
    sw->walker = gemm_sreg(g, PTX_S_CTAID_X);
    sw->walkers = gemm_sreg(g, PTX_S_NCTAID_X);
    if (w->csize == 2) {
        sw->walker = gemm_op2(g, PTX_OP_SHR, ptx_r(sw->walker), ptx_imm(1));
        sw->walkers = gemm_op2(g, PTX_OP_SHR, ptx_r(sw->walkers), ptx_imm(1));
    }
    sw->step = sw->walkers;
    if (cwg.id) {
        sw->u = gemm_mad(g, ptx_r(cwg), ptx_r(sw->walkers), ptx_r(sw->walker));
        sw->step = gemm_op2(g, PTX_OP_SHL, ptx_r(sw->walkers), ptx_imm(1));
    } else {
        sw->u = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(sw->u), ptx_r(sw->walker));
    }
    sw->top = ptx_label_new(f);
    ptx_label_place(f, sw->top);
    ptx_reg fin = gemm_setp(g, PTX_M_GE, ptx_r(sw->u), units_opd(w));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(out)), fin, false);
    g->tile = sw->u;
    if (w->csize == 1) {
        gemm_tile_coords(g);
        return;
    }
    int bm = g->bm, bn = g->bn;
    ptx_reg tm_r = g->tm_r;
    if (w->shared_op == 1) {
        g->bm = 2 * bm;
        g->tm_r = w->tm2_r; /* dyn=m: the pair units' rows */
    } else
        g->bn = 2 * bn;
    gemm_tile_coords(g);
    g->bm = bm;
    g->bn = bn;
    g->tm_r = tm_r;
    if (w->shared_op == 1)
        g->m0 = gemm_mad(g, ptx_r(crank), ptx_imm(bm), ptx_r(g->m0));
    else
        g->n0 = gemm_mad(g, ptx_r(crank), ptx_imm(bn), ptx_r(g->n0));
}

static void walk_tail(wg_geom *w, const sched_walk *sw)
{
    ptx_emit(w->g.f, PTX_OP_ADD, NOM, U32T, ptx_r(sw->u), ptx_r(sw->u), ptx_r(sw->step));
    ptx_emit(w->g.f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(sw->top));
}

/* A role's walk with split-K and stream-K (gen/gemm_wgmma_sched.h):
 * stream-K's unit segments, or the tile loop (split-K: the split's k
 * range of every tile); -1 or the loop's label for role_tail. */
static int role_head(wg_geom *w, int out)
{
    gemm_ctx *g = &w->g;
    g->kt_begin = g->nkt = (ptx_reg){0};
    g->split = (ptx_reg){0}; /* each role its own (tile_head may set it) */
    if (w->streamk) {
        wg_sk_head(g, &w->sk, out);
        return w->sk.top;
    }
    int top = tile_head(w, out);
    if (w->splitk > 1)
        wg_splitk_range(g);
    return top;
}

static void role_tail(wg_geom *w, int top)
{
    if (w->streamk)
        wg_sk_tail(&w->g, &w->sk);
    else
        tile_tail(w, top);
}

/* The k loop's trip count and first k element (the whole K, or the
 * split's / segment's range). */
static ptx_opd kloop_count(const gemm_ctx *g) { return g->nkt.id ? ptx_r(g->nkt) : ptx_imm(g->kt_total); }

static ptx_opd kloop_k0(gemm_ctx *g)
{
    return g->kt_begin.id ? ptx_r(gemm_mul(g, ptx_r(g->kt_begin), ptx_imm(g->bk))) : ptx_imm(0);
}

/* The epilogue of a tile: plain, or split-K's / stream-K's fixup (the
 * tile's unit slot and run-time count). Stream-K sends the tiles one unit
 * covers through the fixup too (one arrival, the sum of its own slot and
 * zeros): emitting the plain epilogue beside it, behind a branch, made
 * ptxas spill (bn 96 and 192: up to 600 bytes), the fixup alone does not. */
static void decomp_epilogue(wg_geom *w, const gemm_accs *fr)
{
    gemm_ctx *g = &w->g;
    if (w->streamk && w->fix_slots > 1)
        wg_sk_fixup(g, &w->sk);
    gemm_epilogue(g, fr);
}

/* The map of operand A (which 0) or B (1): K-major {K, rows[, batch]} with
 * box {bk, tile rows}; MN-major {MN, K[, batch]} with box {64, bk}. */
static pt_tmap operand_map(const wg_geom *w, int which)
{
    const gemm_ctx *g = &w->g;
    const pt_prepared *pp = g->pp;
    int es = pp->at->es;
    bool kmaj = which == 0 ? pp->a_kmajor : pp->b_kmajor;
    int64_t mn = which == 0 ? pp->M : pp->N, ld = which == 0 ? pp->lda : pp->ldb;
    int64_t bs = which == 0 ? pp->sa : pp->sb;
    int rows = which == 0 ? g->bm : g->bn;
    pt_tmap m = {.of = PT_ARG_INPUT, .index = which, .dtype = kit_tma_dtype(pp->at->dt),
                 .rank = pp->batch > 1 ? 3 : 2, .l2promo = EMU_TMAP_L2_256B, .oobfill = EMU_TMAP_OOB_ZERO};
    m.dims[0] = (uint64_t)(kmaj ? pp->K : mn);
    m.dims[1] = (uint64_t)(kmaj ? mn : pp->K);
    m.dims[2] = (uint64_t)pp->batch;
    m.strides[0] = (uint64_t)(ld * es);
    m.strides[1] = (uint64_t)(bs * es);
    m.box[0] = (uint32_t)(kmaj ? g->bk : 64);
    m.box[1] = (uint32_t)(kmaj ? rows : g->bk);
    if (kmaj && w->csize == 2 && which == w->shared_op)
        m.box[1] = (uint32_t)(rows / 2); /* each CTA of the pair loads half and multicasts it */
    m.box[2] = 1;
    int span = kmaj ? w->kbytes : 128;
    m.swizzle = span == 128 ? EMU_TMAP_SWIZZLE_128B : span == 64 ? EMU_TMAP_SWIZZLE_64B : EMU_TMAP_SWIZZLE_32B;
    return m;
}

/* One stage of operand A or B (rows from origin, `rows` of them) by TMA
 * into dst: K-major, one box; MN-major, one box per 64 rows, each a
 * 128-byte swizzle span of bk rows apart. */
static void operand_load(gemm_ctx *g, ptx_reg dst, ptx_reg map, bool kmajor, ptx_reg origin, int rows,
                         ptx_reg k0, int rank, ptx_opd bz, ptx_reg full)
{
    if (kmajor) {
        ptx_opd c[3] = {ptx_r(k0), ptx_r(origin), bz};
        kit_tma_load(g->f, dst, map, rank, c, full);
        return;
    }
    for (int j = 0; j < rows / 64; j++) {
        ptx_reg d = gemm_op2(g, PTX_OP_ADD, ptx_r(dst), ptx_imm((int64_t)j * g->bk * 128));
        ptx_reg o = gemm_op2(g, PTX_OP_ADD, ptx_r(origin), ptx_imm(64 * j));
        ptx_opd c[3] = {ptx_r(o), ptx_r(k0), bz};
        kit_tma_load(g->f, d, map, rank, c, full);
    }
}

/* The operand the pair of a cluster shares, multicast into both CTAs'
 * stage (mask 0b11, completing on both full barriers): K-major, rank r
 * loads the r-th half of the rows (box rows / 2); MN-major, the 64-row
 * boxes j with j % 2 == r (rank 0 alone when there is one). */
static void operand_load_mc(gemm_ctx *g, ptx_reg dst, ptx_reg map, bool kmajor, ptx_reg origin, int rows,
                            ptx_reg k0, int rank, ptx_opd bz, ptx_reg full, ptx_reg crank, ptx_reg mask, int W)
{
    ptx_fn *f = g->f;
    if (kmajor) {
        ptx_reg d = gemm_mad(g, ptx_r(crank), ptx_imm((int64_t)rows / 2 * W), ptx_r(dst));
        ptx_reg o = gemm_mad(g, ptx_r(crank), ptx_imm(rows / 2), ptx_r(origin));
        ptx_opd c[3] = {ptx_r(k0), ptx_r(o), bz};
        kit_tma_load_mc(f, d, map, rank, c, full, mask);
        return;
    }
    int nb = rows / 64;
    for (int j = 0; j < nb; j++) {
        int skip = ptx_label_new(f);
        ptx_reg mine = gemm_setp(g, PTX_M_EQ, ptx_r(crank), ptx_imm(j % 2));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skip)), mine, true);
        ptx_reg d = gemm_op2(g, PTX_OP_ADD, ptx_r(dst), ptx_imm((int64_t)j * g->bk * 128));
        ptx_reg o = gemm_op2(g, PTX_OP_ADD, ptx_r(origin), ptx_imm(64 * j));
        ptx_opd c[3] = {ptx_r(o), ptx_r(k0), bz};
        kit_tma_load_mc(f, d, map, rank, c, full, mask);
        ptx_label_place(f, skip);
    }
}

/* The producer: one elected thread of warp 0 fills the ring. */
static void producer(wg_geom *w, kit_pipe *p, ptx_reg tma, ptx_reg tmb, ptx_reg crank, int done)
{
    gemm_ctx *g = &w->g;
    ptx_fn *f = g->f;
    const pt_prepared *pp = g->pp;
    ptx_emit(f, PTX_OP_SETMAXNREG, M3(PTX_M_DEC, PTX_M_SYNC, PTX_M_ALIGNED), U32T, ptx_imm(WG_PRODUCER_REGS));
    ptx_reg w0 = gemm_setp(g, PTX_M_NE, ptx_r(g->warp), ptx_imm(0));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(done)), w0, false);
    ptx_reg lead = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_ELECT, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_pair((ptx_reg){0}, lead), ptx_hex(0xffffffff));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(done)), lead, true);
    kit_tma_prefetch(f, tma);
    kit_tma_prefetch(f, tmb);
    sched_walk sw;
    ptx_reg mask = {0};
    if (w->csize == 2) {
        mask = ptx_reg_new(f, PTX_T_B16);
        ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_B16), ptx_r(mask), ptx_imm(3));
    }
    int ttop = -1;
    if (scheduled(w))
        walk_head(w, &sw, (ptx_reg){0}, crank, done);
    else
        ttop = role_head(w, done);
    int kend = ptx_label_new(f);
    ptx_reg kt = gemm_r32(g), k0 = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(kt), ptx_imm(0));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(k0), kloop_k0(g));
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    ptx_reg fin = gemm_setp(g, PTX_M_GE, ptx_r(kt), kloop_count(g));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(kend)), fin, false);
    ptx_reg st = kit_pipe_acquire(p);
    kit_pipe_arrive_tx(p, w->stage_bytes);
    ptx_reg full = kit_pipe_full(p);
    int rank = pp->batch > 1 ? 3 : 2;
    ptx_opd bz = ptx_r(g->bidx);
    if (w->csize == 2 && w->shared_op == 0)
        operand_load_mc(g, st, tma, pp->a_kmajor, g->m0, g->bm, k0, rank, bz, full, crank, mask, w->kbytes);
    else
        operand_load(g, st, tma, pp->a_kmajor, g->m0, g->bm, k0, rank, bz, full);
    ptx_reg sb = gemm_op2(g, PTX_OP_ADD, ptx_r(st), ptx_imm(w->a_bytes));
    if (w->csize == 2 && w->shared_op == 1)
        operand_load_mc(g, sb, tmb, pp->b_kmajor, g->n0, g->bn, k0, rank, bz, full, crank, mask, w->kbytes);
    else
        operand_load(g, sb, tmb, pp->b_kmajor, g->n0, g->bn, k0, rank, bz, full);
    kit_pipe_commit(p);
    gemm_inc32(g, kt, 1);
    gemm_inc32(g, k0, g->bk);
    ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(top));
    ptx_label_place(f, kend);
    if (scheduled(w))
        walk_tail(w, &sw);
    else
        role_tail(w, ttop);
    ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(done));
}

/* Pingpong's order (CUTLASS's and FA3's named-barrier sequence): the
 * consumer whose turn it is issues its whole k loop, then hands the turn
 * to the other (bar.arrive on the other's barrier, counted 256 with the
 * other's bar.sync), when the CTA has a next unit. */
typedef struct sched_order {
    ptx_reg next;  /* pred: the CTA's sequence has a unit after this one */
    ptx_reg other; /* u32: the other consumer's barrier id */
} sched_order;

/* A consumer warpgroup's k loop; returns its accumulators (bn / 2). cwg:
 * its 64-row part of a cooperative tile (id 0: the whole tile); o:
 * pingpong's hand-over after the loop (NULL: none). */
static ptx_reg *consumer(wg_geom *w, kit_pipe *p, ptx_reg cwg, const sched_order *o)
{
    gemm_ctx *g = &w->g;
    ptx_fn *f = g->f;
    const pt_prepared *pp = g->pp;
    const kit_atom *wa = &w->wa;
    int n = wa->c.regs, nh = w->halves;
    ptx_type at = wa->acc == PTX_T_F32 ? PTX_T_F32 : PTX_T_B32;
    ptx_reg *acc = pt_arena_alloc(f->mod->arena, (size_t)(n * nh) * sizeof *acc);
    for (int i = 0; i < n * nh; i++) {
        acc[i] = ptx_reg_new(f, at);
        if (at == PTX_T_F32)
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(acc[i]), ptx_f32(0.0f));
        else
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(acc[i]), ptx_imm(0));
    }
    ptx_opd dv[2];
    for (int h = 0; h < nh; h++)
        dv[h] = ptx_vecr(f, n, acc + h * n);
    /* descriptors: K-major, one swizzle span per row, 8-row groups 8 W
     * apart, +32 bytes per k step; MN-major (128B), 8-k-row groups 1024
     * apart, 64-wide MN blocks one box apart, +2048 bytes per k16 step */
    int W = w->kbytes;
    uint32_t box = (uint32_t)g->bk * 128;
    int64_t a_off = pp->a_kmajor ? 64 * W : (int64_t)box;
    uint32_t a_lbo = pp->a_kmajor ? 16 : box, a_sbo = pp->a_kmajor ? (uint32_t)(8 * W) : 1024;
    uint32_t b_lbo = pp->b_kmajor ? 16 : box, b_sbo = pp->b_kmajor ? (uint32_t)(8 * W) : 1024;
    int a_sw = pp->a_kmajor ? W : 128, b_sw = pp->b_kmajor ? W : 128;
    int64_t a_step = pp->a_kmajor ? 2 : 128, b_step = pp->b_kmajor ? 2 : 128; /* descriptor units (16 B) */
    ptx_reg aoff = cwg.id ? gemm_mul(g, ptx_r(cwg), ptx_imm(a_off)) : (ptx_reg){0};
    ptx_reg kt = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(kt), ptx_imm(0));
    int top = ptx_label_new(f), end = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    ptx_reg fin = gemm_setp(g, PTX_M_GE, ptx_r(kt), kloop_count(g));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(end)), fin, false);
    ptx_reg st = kit_pipe_wait(p, 0);
    ptx_reg sa = aoff.id ? gemm_op2(g, PTX_OP_ADD, ptx_r(st), ptx_r(aoff)) : st;
    ptx_reg sb = gemm_op2(g, PTX_OP_ADD, ptx_r(st), ptx_imm(w->a_bytes));
    ptx_reg da[2];
    da[0] = kit_wgmma_desc_emit(f, sa, a_lbo, a_sbo, a_sw);
    if (nh > 1) /* pingpong's 128-row tile: its second 64 rows */
        da[1] = kit_wgmma_desc_emit(f, gemm_op2(g, PTX_OP_ADD, ptx_r(sa), ptx_imm(a_off)), a_lbo, a_sbo, a_sw);
    ptx_reg db = kit_wgmma_desc_emit(f, sb, b_lbo, b_sbo, b_sw);
    ptx_emit0(f, PTX_OP_WGMMA_FENCE, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
    for (int ks = 0; ks < g->ksteps; ks++) {
        ptx_reg a[2] = {da[0], nh > 1 ? da[1] : da[0]}, b = db;
        if (ks) {
            for (int h = 0; h < nh; h++)
                a[h] = gemm_r64(g);
            b = gemm_r64(g);
            for (int h = 0; h < nh; h++)
                ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(a[h]), ptx_r(da[h]), ptx_imm(a_step * ks));
            ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(b), ptx_r(db), ptx_imm(b_step * ks));
        }
        for (int h = 0; h < nh; h++)
            kit_wgmma_ss(f, wa, dv[h], a[h], b, ptx_imm(1), !pp->a_kmajor, !pp->b_kmajor);
    }
    ptx_emit0(f, PTX_OP_WGMMA_COMMIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
    ptx_emit(f, PTX_OP_WGMMA_WAIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES, ptx_imm(w->wg_wait));
    if (w->wg_wait) {
        /* the group before this one retired: release its stage (none before
         * the first) */
        int skip = ptx_label_new(f);
        ptx_reg first = gemm_setp(g, PTX_M_EQ, ptx_r(kt), ptx_imm(0));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skip)), first, false);
        kit_pipe_release(p);
        ptx_label_place(f, skip);
    } else
        kit_pipe_release(p);
    gemm_inc32(g, kt, 1);
    ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(top));
    ptx_label_place(f, end);
    if (o) /* every wgmma of this tile issued: the other consumer's turn */
        ptx_guard(ptx_emit(f, PTX_OP_BAR, M1(PTX_M_ARRIVE), PTX_NOTYPES, ptx_r(o->other), ptx_imm(256)), o->next,
                  false);
    if (w->wg_wait) { /* the last group, and its stage */
        ptx_emit(f, PTX_OP_WGMMA_WAIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES, ptx_imm(0));
        kit_pipe_release(p);
    }
    return acc;
}

/* Arrivals that free a stage: lane 0 of every warp of the consumers that
 * read it (cooperative: all of them; pingpong: the one owning the unit), in
 * both CTAs of a cluster (each releases the stage in its peer's ring too:
 * the peer multicasts into it). */
static int sched_empty_count(const wg_geom *w) { return 4 * (w->sched ? 1 : w->consumers) * w->csize; }

/* After the barriers' init: a CTA of its own syncs its threads (bar.sync
 * 0); a cluster publishes every CTA's inits cluster-wide (fence +
 * barrier.cluster) before any peer multicasts into this CTA or arrives on
 * its barriers, and returns %cluster_ctarank (the pipe releases to the
 * peer, rank ^ 1, and its producer waits cluster-wide). */
static ptx_reg sched_start(wg_geom *w, kit_pipe *p, ptx_reg t0)
{
    gemm_ctx *g = &w->g;
    ptx_fn *f = g->f;
    if (w->csize == 1) {
        ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
        return (ptx_reg){0};
    }
    ptx_guard(ptx_emit0(f, PTX_OP_FENCE_MBAR_INIT, M2(PTX_M_RELEASE, PTX_M_CLUSTER), PTX_NOTYPES), t0, false);
    ptx_emit0(f, PTX_OP_BAR_CLUSTER_ARRIVE, NOM, PTX_NOTYPES);
    ptx_emit0(f, PTX_OP_BAR_CLUSTER_WAIT, NOM, PTX_NOTYPES);
    ptx_reg crank = gemm_sreg(g, PTX_S_CLUSTER_CTARANK);
    p->peer = gemm_op2(g, PTX_OP_XOR, ptx_r(crank), ptx_imm(1));
    p->cluster = true;
    return crank;
}

/* A pingpong consumer (cwg 0 or 1) before its k loop: its own thread
 * numbering, staging and epilogue barrier (id 4 + cwg, 128 threads); the
 * walk over its units (every other one of the CTA's); the ring ends moved
 * past the other consumer's first unit (cwg 1); then, at each unit, its
 * turn: bar.sync 2 + cwg, 256 unless the unit is the CTA's first, and the
 * order the loop hands the turn on with (bar.arrive 3 - cwg when the CTA
 * has a next unit). */
static void sched_pingpong_head(wg_geom *w, kit_pipe *p, sched_walk *sw, sched_order *o, ptx_reg cwg,
                                ptx_reg crank, int done)
{
    gemm_ctx *g = &w->g;
    ptx_fn *f = g->f;
    g->tid = gemm_op2(g, PTX_OP_AND, ptx_r(g->tid), ptx_imm(127));
    g->warp = gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(5));
    g->smem = gemm_mad(g, ptx_r(cwg), ptx_imm(w->epi_bytes), ptx_r(g->smem));
    g->bar_id = gemm_op2(g, PTX_OP_ADD, ptx_r(cwg), ptx_imm(4));
    ptx_reg mine = gemm_op2(g, PTX_OP_ADD, ptx_r(cwg), ptx_imm(2));
    o->other = gemm_op2(g, PTX_OP_XOR, ptx_r(cwg), ptx_imm(3)); /* 3 - cwg */
    int first = ptx_label_new(f);
    ptx_reg c0 = gemm_setp(g, PTX_M_EQ, ptx_r(cwg), ptx_imm(0));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(first)), c0, false);
    kit_pipe_skip(p, &p->cons, g->kt_total);
    kit_pipe_skip(p, &p->rel, g->kt_total);
    ptx_label_place(f, first);
    walk_head(w, sw, cwg, crank, done);
    ptx_reg nx = gemm_op2(g, PTX_OP_ADD, ptx_r(sw->u), ptx_r(sw->walkers));
    o->next = gemm_setp(g, PTX_M_LT, ptx_r(nx), units_opd(w));
    ptx_reg later = gemm_setp(g, PTX_M_NE, ptx_r(sw->u), ptx_r(sw->walker));
    ptx_guard(ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_r(mine), ptx_imm(256)), later, false);
}

/* dyn=m: the u32 parameter m (recorded at the emitted M). */
static ptx_reg param_m(gemm_ctx *g, pt_launch *l)
{
    const char *pn = ptx_param_add(g->f, "m", PTX_T_U32);
    l->args[l->nargs++] = (pt_arg){PT_ARG_U32, 0, (uint64_t)g->pp->M, 0};
    ptx_reg r = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_LD, M1(PTX_M_PARAM), U32T, ptx_r(r), ptx_saddr(pn, 0));
    return r;
}

/* dyn=m, before the roles part: tile rows and tiles at this m (g->tm_r,
 * g->tiles_r), and a scheduled walk's units (w->units_r; pairs along M:
 * their rows w->tm2_r). */
static void dyn_counts(wg_geom *w)
{
    gemm_ctx *g = &w->g;
    int64_t tnn = (g->pp->N + g->bn - 1) / g->bn;
    ptx_reg up = gemm_op2(g, PTX_OP_ADD, ptx_r(g->mreg), ptx_imm(g->bm - 1));
    g->tm_r = gemm_op2(g, PTX_OP_SHR, ptx_r(up), ptx_imm(g->bm == 128 ? 7 : 6));
    g->tiles_r = gemm_mul(g, ptx_r(g->tm_r), ptx_imm(tnn));
    if (!scheduled(w))
        return;
    if (w->csize == 1)
        w->units_r = g->tiles_r;
    else if (w->shared_op == 1) {
        ptx_reg t1 = gemm_op2(g, PTX_OP_ADD, ptx_r(g->tm_r), ptx_imm(1));
        w->tm2_r = gemm_op2(g, PTX_OP_SHR, ptx_r(t1), ptx_imm(1));
        w->units_r = gemm_mul(g, ptx_r(w->tm2_r), ptx_imm(tnn));
    } else
        w->units_r = gemm_mul(g, ptx_r(g->tm_r), ptx_imm((tnn + 1) / 2));
}

/* The batch's pointer of a tensor: p + %ctaid.z x stride elements of dt;
 * with dyn=m the stride is m rows of ld elements (a u64 product at run
 * time). */
static ptx_reg batch_ptr(gemm_ctx *g, ptx_reg p, int64_t stride, int64_t ld, pt_dtype dt)
{
    if (!g->pp->dyn_m)
        return gemm_addr64(g, p, ptx_r(g->bidx), stride * dt_bytes(dt));
    ptx_fn *f = g->f;
    ptx_reg m64 = gemm_r64(g), b64 = gemm_r64(g), rows = gemm_r64(g), off = gemm_r64(g), d = gemm_r64(g);
    ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(m64), ptx_r(g->mreg));
    ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(b64), ptx_r(g->bidx));
    ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(rows), ptx_r(m64), ptx_r(b64));
    ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(off), ptx_r(rows), ptx_imm(ld * dt_bytes(dt)));
    ptx_emit(f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p), ptx_r(off));
    return d;
}

int gemm_wgmma_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    wg_geom w;
    int rc = geometry(pp, &pp->target, c, &w, e);
    if (rc)
        return rc;
    gemm_ctx *g = &w.g;
    char cfg[256], name[96], sig[512];
    pt_config hc = {0}; /* epi=0 is named as before the key existed */
    for (int i = 0; i < c->n; i++)
        if ((strcmp(c->name[i], "epi") != 0 || c->value[i] != 0) &&
            (strcmp(c->name[i], "sched") != 0 || c->value[i] != 0) &&
            (strcmp(c->name[i], "cluster") != 0 || c->value[i] != 1))
            pt_config_set(&hc, c->name[i], c->value[i]);
    pt_config_str(&hc, cfg, sizeof cfg);
    uint64_t h = pt_hash64(cfg, strlen(cfg));
    /* dyn=m: the PTX is every m's (split-K and stream-K: every m of m_cap's bucket) */
    int64_t msig = pp->dyn_m ? (w.fix_slots > 1 || w.streamk ? -pp->m_cap : -1) : pp->M;
    snprintf(sig, sizeof sig, "%lld %lld %lld %lld %lld %lld %lld %lld %d %d %s %g %g %g %g|%s",
             (long long)msig, (long long)pp->N, (long long)pp->K, (long long)pp->batch,
             (long long)pp->lda, (long long)pp->ldb, (long long)pp->ldc, (long long)pp->ldd,
             pp->d_col, (int)pp->out_dt, pp->prob.layout, pp->prob.alpha, pp->prob.beta,
             pp->prob.scale_a, pp->prob.scale_b, pp->prob.epilogue ? pp->prob.epilogue : "");
    h ^= pt_hash64(sig, strlen(sig)) * 31;
    snprintf(name, sizeof name, "gemm_wgmma_%s_%s_%016llx", pt_dtype_get(pp->at->dt)->name, pp->prob.layout,
             (unsigned long long)h);
    g->f = ptx_fn_new(m, name);
    ptx_fn *f = g->f;
    int threads = 128 * (1 + w.consumers);
    f->maxntid[0] = threads;
    f->maxntid[1] = f->maxntid[2] = 1;
    /* setmaxnreg needs the entry register count fixed (ref 6.4) */
    if (threads == 384)
        f->minnctapersm = 1; /* 65536 / 384 -> 168 */
    else
        f->maxnreg = WG_ENTRY_REGS;
    if (w.csize == 2) { /* launched with the cluster shape too (l->cluster) */
        f->explicitcluster = true;
        f->reqnctapercluster[0] = 2;
        f->reqnctapercluster[1] = f->reqnctapercluster[2] = 1;
    }
    ptx_module_extern_shared(m, "gemm_smem", 128);

    /* parameters, in pt_launch order */
    l->nargs = 0;
    l->ntmaps = 0;
    ptx_reg d = gemm_param_ptr(g, l, "d", (pt_arg){PT_ARG_OUTPUT, 0, 0, 0});
    pt_tmap ma = operand_map(&w, 0), mb = operand_map(&w, 1);
    ptx_reg tma = kit_tma_param(f, l, "tma", &ma);
    ptx_reg tmb = kit_tma_param(f, l, "tmb", &mb);
    ptx_reg tmd = {0}; /* epi=1: the store map over D */
    if (w.epi) {
        epi_view(&w, true); /* pingpong bm=128: 64-row store boxes, one per half */
        pt_tmap md = gemm_epi_tma_map(g);
        epi_view(&w, false);
        tmd = kit_tma_param(f, l, "tmd", &md);
    }
    int next_in = 2;
    ptx_reg cp = {0};
    if (pp->has_c)
        cp = gemm_param_ptr(g, l, "c", (pt_arg){PT_ARG_INPUT, next_in++, 0, 0});
    ptx_reg aux[GEMM_MAX_AUX];
    for (int j = 0; j < pp->naux; j++)
        aux[j] = gemm_param_ptr(g, l, pp->aux[j].base, (pt_arg){PT_ARG_INPUT, next_in++, 0, 0});
    ptx_reg ws = {0}; /* split-K / stream-K partials and counters (gen/gemm_wgmma_sched.h) */
    if (w.fix_slots > 1)
        ws = gemm_param_ptr(g, l, "ws", (pt_arg){PT_ARG_WORKSPACE, 0, (uint64_t)wg_ws_bytes(g, w.fix_slots), 0});
    if (pp->dyn_m) /* M, after the pointers and the workspace (docs/runtime.md) */
        g->mreg = param_m(g, l);
    if (pp->in_alpha >= 0)
        g->alpha = gemm_param_f32(g, l, "alpha", pp->alpha);
    if (pp->in_beta >= 0)
        g->beta = gemm_param_f32(g, l, "beta", pp->beta);
    if (!pp->int_exact && (pp->at->int_acc || pp->at->dt == PT_E4M3 || pp->at->dt == PT_E5M2))
        g->scale_ab = gemm_param_f32(g, l, "scale_ab", pp->scale_ab);
    if (pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2)
        g->out_scale = gemm_param_f32(g, l, "out_scale", pp->out_scale);

    /* threads, shared memory, barriers */
    ptx_reg tid = gemm_sreg(g, PTX_S_TID_X);
    g->lane = gemm_op2(g, PTX_OP_AND, ptx_r(tid), ptx_imm(31));
    g->warp = gemm_op2(g, PTX_OP_SHR, ptx_r(tid), ptx_imm(5));
    ptx_reg raw = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(raw), ptx_sym("gemm_smem"));
    ptx_reg up = gemm_op2(g, PTX_OP_ADD, ptx_r(raw), ptx_imm(1023));
    g->smem = gemm_op2(g, PTX_OP_AND, ptx_r(up), ptx_imm(-1024));
    ptx_reg bars = gemm_op2(g, PTX_OP_ADD, ptx_r(g->smem), ptx_imm(w.region));
    kit_pipe pipe;
    if (kit_pipe_init_mbar(f, &pipe, w.stages, w.stage_bytes, g->smem, bars, sched_empty_count(&w)))
        return pt_errf(e, PT_EINTERNAL, "gemm wgmma: bad mbarrier ring");
    ptx_reg t0 = gemm_setp(g, PTX_M_EQ, ptx_r(tid), ptx_imm(0));
    kit_pipe_mbar_setup(&pipe, t0);
    ptx_reg crank = sched_start(&w, &pipe, t0);

    if (pp->dyn_m)
        dyn_counts(&w);

    /* batch (dyn=m: the strides of D, C and the full tensors are m rows) */
    if (pp->batch > 1) {
        g->bidx = gemm_sreg(g, PTX_S_CTAID_Z);
        g->pd = batch_ptr(g, d, pp->sd, pp->ldd, pp->out_dt);
        if (pp->has_c)
            g->pc = batch_ptr(g, cp, pp->sc, pp->ldc, pp->c_dt);
        for (int j = 0; j < pp->naux; j++)
            g->paux[j] = pp->aux[j].kind == GEMM_AUX_FULL ? batch_ptr(g, aux[j], pp->saux, pp->N, pp->aux_dt)
                                                          : aux[j];
    } else {
        g->bidx = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(g->bidx), ptx_imm(0));
        g->pd = d;
        g->pc = cp;
        for (int j = 0; j < pp->naux; j++)
            g->paux[j] = aux[j];
    }

    g->pws = ws;

    /* warpgroup 0 produces, the others consume */
    int cons = ptx_label_new(f), done = ptx_label_new(f);
    ptx_reg wg = gemm_op2(g, PTX_OP_SHR, ptx_r(tid), ptx_imm(7));
    ptx_reg isc = gemm_setp(g, PTX_M_NE, ptx_r(wg), ptx_imm(0));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(cons)), isc, false);
    producer(&w, &pipe, tma, tmb, crank, done);

    ptx_label_place(f, cons);
    ptx_emit(f, PTX_OP_SETMAXNREG, M3(PTX_M_INC, PTX_M_SYNC, PTX_M_ALIGNED), U32T, ptx_imm(WG_CONSUMER_REGS));
    g->tid = gemm_op2(g, PTX_OP_SUB, ptx_r(tid), ptx_imm(128));
    g->warp = gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(5));
    ptx_reg cwg = gemm_op2(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(7));
    pipe.arrive_pred = gemm_setp(g, PTX_M_EQ, ptx_r(g->lane), ptx_imm(0));
    ptx_reg ring = g->smem;
    g->smem = gemm_op2(g, PTX_OP_ADD, ptx_r(ring), ptx_imm(w.epi_off)); /* the staging */
    sched_walk sw;
    sched_order ord;
    int ttop = -1;
    if (w.sched) {
        sched_pingpong_head(&w, &pipe, &sw, &ord, cwg, crank, done);
        cwg = (ptx_reg){0}; /* each consumer's tile is whole */
    } else if (scheduled(&w))
        walk_head(&w, &sw, (ptx_reg){0}, crank, done);
    else
        ttop = role_head(&w, done);
    ptx_reg *acc = consumer(&w, &pipe, cwg, w.sched ? &ord : NULL);
    /* pingpong bm=128: the epilogue per 64-row half (rows 64 h ..), each
     * half's accumulators the fragment of a bm=64 consumer */
    ptx_reg m0 = g->m0;
    epi_view(&w, true);
    for (int hf = 0; hf < w.halves; hf++) {
        if (hf)
            g->m0 = gemm_op2(g, PTX_OP_ADD, ptx_r(m0), ptx_imm(64 * hf));
        /* every consumer's wgmmas retired before the ring is reused as staging */
        if (w.epi) /* and the previous tile's (half's) TMA stores read it */
            gemm_epi_tma_reuse(g);
        gemm_bar(g);
        ptx_reg wrow = gemm_mul(g, ptx_r(g->warp), ptx_imm(16));
        ptx_reg wcol = gemm_r32(g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(wcol), ptx_imm(0));
        gemm_accs fr = kit_frag_mma_c(f, pp->at, 1, g->bn / 8, acc + hf * w.wa.c.regs, wrow, wcol, g->lane);
        if (w.epi)
            gemm_epilogue_tma(g, &fr, tmd);
        else
            decomp_epilogue(&w, &fr);
    }
    g->m0 = m0;
    epi_view(&w, false);
    if (w.sched) { /* the other consumer's unit: its k tiles */
        kit_pipe_skip(&pipe, &pipe.cons, g->kt_total);
        kit_pipe_skip(&pipe, &pipe.rel, g->kt_total);
    }
    if (scheduled(&w))
        walk_tail(&w, &sw);
    else
        role_tail(&w, ttop);
    ptx_label_place(f, done);
    if (w.epi) /* no CTA exits while its TMA stores read its staging */
        gemm_epi_tma_drain(g);
    if (w.csize == 2) { /* no CTA exits while its peer may still arrive on its barriers */
        ptx_emit0(f, PTX_OP_BAR_CLUSTER_ARRIVE, NOM, PTX_NOTYPES);
        ptx_emit0(f, PTX_OP_BAR_CLUSTER_WAIT, NOM, PTX_NOTYPES);
    }
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);

    /* the natural x extent, one CTA per tile, unit or walker (persistent:
     * capped at launch by K x SMs, grid_per_sm): tiles, stream-K's units,
     * a scheduled walk's walkers x cluster size */
    int64_t tnn = (pp->N + g->bn - 1) / g->bn;
    l->grid[0] = (unsigned)g->tiles;
    l->grid[1] = 1;
    l->grid_per_sm = (unsigned)w.persistent;
    if (w.splitk > 1)
        l->grid[1] = (unsigned)w.splitk;
    if (pp->dyn_m && !w.persistent) { /* (ceil(m / bm), column tiles x splitk) */
        l->grid[0] = (unsigned)((pp->M + g->bm - 1) / g->bm);
        l->grid[1] = (unsigned)(tnn * w.splitk);
    } else if (pp->dyn_m && !w.streamk) {
        /* at this m, in the form ceil(m / D) x T the contract's grid rule
         * takes: D = bm x (2: pairs along M) x (2: pingpong's two units a
         * walker), T = column units x cluster size (at least the walkers
         * the units need; the rest leave at once) */
        int64_t dv = (int64_t)g->bm * (w.csize == 2 && w.shared_op == 1 ? 2 : 1) * (w.sched ? 2 : 1);
        int64_t cu = w.csize == 2 && w.shared_op == 0 ? (tnn + 1) / 2 : tnn;
        l->grid[0] = (unsigned)((pp->M + dv - 1) / dv * cu * (scheduled(&w) ? w.csize : 1));
    }
    if (w.streamk)
        l->grid[0] = (unsigned)w.sk.units;
    if (scheduled(&w)) {
        if (!pp->dyn_m)
            l->grid[0] = (unsigned)(w.slots * w.csize);
        if (w.csize == 2) {
            l->cluster[0] = 2;
            l->cluster[1] = l->cluster[2] = 1;
        }
    }
    l->grid[2] = (unsigned)pp->batch;
    l->block[0] = (unsigned)threads;
    l->block[1] = l->block[2] = 1;
    l->smem = (size_t)w.smem_bytes;
    l->smem_optin = w.smem_bytes > 48 * 1024;
    l->align = 16;
    l->entry = f->name;
    if (m->err.code) {
        pt_errf(e, m->err.code, "%s", m->err.msg);
        return m->err.code;
    }
    return PT_OK;
}

/* Static resources of a config (for reports): dynamic shared memory and
 * threads. */
int gemm_wgmma_resources(const pt_prepared *pp, const pt_config *c, int *smem, int *threads, pt_err *e)
{
    wg_geom w;
    int rc = geometry(pp, &pp->target, c, &w, e);
    if (rc)
        return rc;
    *smem = w.smem_bytes;
    *threads = 128 * (1 + w.consumers);
    return PT_OK;
}
