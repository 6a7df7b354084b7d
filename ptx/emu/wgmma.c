/* Hopper warp and warpgroup instructions: wgmma.fence / mma_async (SS and
 * RS) / commit_group / wait_group, stmatrix, elect.sync, setmaxnreg and
 * fence.proxy.async (micro-op EMU_H_WG). Facts: shared/ref/ptx-sm90.md
 * (sections cited as "ref N.M"); model: shared/design/attention_hopper.md
 * 3.7-3.9.
 *
 * wgmma. A warpgroup is warps 4q..4q+3. Each warp executes its own slice of
 * every wgmma: D rows 16w..16w+15 of the 64 (w = warp % 4), the same A rows
 * and all of B. Rows are independent, so the slices compute the exact
 * product with no rendezvous of the four warps (design 3.7). A slice is a
 * block operation: at issue the descriptors are decoded and checked, the
 * shared-memory footprint (one 16-byte chunk per core-matrix row) is
 * computed by the canonical layouts of ref 2.2 plus the absolute-address
 * swizzle of ref 2.3 and locked, RS A registers are captured, and the slice
 * is queued in the warp's open group. commit_group closes the open group;
 * wait_group N executes, in issue order, every slice of all but the newest
 * N committed groups (reading shared memory then: the lock guarantees it
 * did not change, or a write was reported) and unlocks their footprints. A
 * warp that exits executes what it still has queued.
 *
 * Numerics (as mma.sync, warp.c): products exact in f32 for 16-bit, tf32
 * and fp8 inputs, summed in f32 in k order onto D (scale-d false: onto 0),
 * f16 accumulators rounded to f16 after each instruction; integers exact
 * (s32 wraps, or clamps with .satfinite). tf32 inputs are truncated.
 *
 * Detectors: a register that is D or RS-A of a queued wgmma read or written
 * by another instruction (wgmma-hazard; the group is retired first, as
 * ptxas's injected wait does); a wgmma whose D/A registers were accessed
 * since the warp's last wgmma.fence (wgmma-hazard, C7519); a shared write
 * into a locked footprint (async-race); a footprint byte last written by
 * the generic proxy whose writer executed no fence.proxy.async since
 * (missing-proxy-fence, by async.c's marks) or that an async copy in flight
 * still writes (async-race); descriptors that differ across lanes or warps of
 * the warpgroup, reserved bits set, a CTA that is not whole warpgroups
 * (wgmma-misuse); a base offset or a start outside the first row of its
 * swizzle pattern (layout: refused, not guessed). The race detector sees
 * wgmma's operand reads (struct wg_rd): a write to a chunk must be ordered
 * before the warpgroup's first issue of the wgmma reading it and after
 * its last wait_group retiring it (shared-race otherwise).
 *
 * setmaxnreg: the CTA's pool holds entry x 32 registers per warp, entry
 * from .maxnreg or (.maxntid with .minnctapersm 1) 65536 / threads rounded
 * down to a multiple of 8 (ref 6.4); .dec returns (old - new) x 32 per
 * warp, .inc takes (new - old) x 32 and blocks until they are free; a wait
 * that can never be granted is a setmaxnreg report (never a hang). */
#include "ptx/emu/emu_int.h"

#include <stdio.h>
#include <stdlib.h>

typedef float wg_v4f __attribute__((vector_size(16)));

enum { WG_RING = 16, WG_MAXN = 256 };

typedef struct emu_wgk emu_wgk;
typedef struct emu_wgc emu_wgc;

struct emu_wgk {
    bool mma;            /* the kernel issues wgmma.mma_async */
    uint32_t entry_regs; /* registers per thread at entry, 0: unknown */
    uint32_t *toff;      /* per pc: first wgmma-register slot it touches, in tslot */
    uint16_t *tn;        /* per pc: how many */
    uint32_t *tslot;
};

typedef struct wg_slice {
    const emu_ins *in;
    uint32_t group;  /* the warp's group number (1-based) */
    uint32_t fp;     /* its chunks: fp[fp .. fp + nfp) of the warp, A's then B's */
    uint32_t nfp;
    bool scale_d;
    uint32_t a[4][EMU_LANES]; /* RS: the A registers at issue */
} wg_slice;

typedef struct wg_warp {
    wg_slice *q;
    size_t head, nq, capq; /* the queue is q[head .. nq) */
    uint32_t *fp;          /* footprint chunks, UINT32_MAX: none (out of bounds) */
    size_t nfp, capfp;
    uint32_t committed, retired; /* groups */
    uint32_t fence_gen;          /* wgmma.fence executions + 1 */
    bool fenced;                 /* some wgmma.fence executed */
    uint32_t *own;               /* per slot: newest group using it as D/A, 0 none */
    uint32_t *tgen;              /* per slot: fence_gen when another instruction touched it */
    uint64_t nmma;               /* wgmmas issued */
    uint32_t nreg, nset;         /* setmaxnreg: registers per thread, executions */
    uint32_t reg_lanes;          /* lanes blocked in setmaxnreg.inc */
    uint32_t reg_pc;
    uint32_t yield_lanes;        /* lanes yielding at a wait_group until the next round */
    uint32_t yielded_at;         /* pc + 1 of the wait_group that yielded, 0 none */
} wg_warp;

typedef struct wg_ring {
    uint64_t idx; /* the wgmma's number in its warp + 1; 0 empty */
    uint64_t da, db;
    uint32_t pc, warp;
    bool sd;
} wg_ring;

/* The race detector's record of wgmma reads (issue 12 item 3): per 16-byte
 * chunk, up to WG_RD readers (cluster-wide agent, its clock when the
 * wait_group retired the slice, the wgmma's pc); a clock below the CTA's
 * vector-clock base is an empty slot. A generic or async write must be
 * ordered after each read; with more unordered readers than slots the
 * oldest is dropped. */
enum { WG_RD = 8 };
typedef struct wg_rd {
    uint32_t clk, pc;
    uint32_t agent;
} wg_rd;

struct emu_wgc {
    wg_rd *rd;          /* nchunks x WG_RD (race detector on), NULL: none */
    uint8_t *wglock;    /* with rd: per warpgroup x chunk, its in-flight slices reading it (a
                           warpgroup's wgmma reads once: its first issuer checks the chunk,
                           its last retirer records the read) */
    wg_warp *w;
    uint32_t nwg;
    wg_ring *ring;      /* nwg x WG_RING */
    uint32_t *set_k, *set_v, *set_warp; /* per warpgroup: the newest setmaxnreg round seen */
    uint16_t *lock;     /* per 16-byte chunk: in-flight wgmma slices reading it */
    uint32_t nchunks;
    uint64_t pool, pool_free; /* setmaxnreg registers */
    float *A, *B, *D;   /* slice buffers: 16 x 32, 32 x 256, 16 x 256 */
    int64_t *Ai, *Bi, *Di;
};

static int tid_of(const emu_warp *w, uint32_t lane) { return (int)(w->index * 32 + lane); }

static const char *opname(const emu_ins *in) { return ptx_op_info((ptx_op)in->op).name; }

/* ---- kernel preparation ---- */

/* Slot of a register, as decode.c assigns them: the banks in order from
 * reg_base. */
static uint32_t slot_of(const emu_kernel *k, const uint32_t *bank_base, ptx_reg r, bool *ok)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= k->fn->nbanks || PTX_REG_IDX(r) >= k->fn->banks[b].count) {
        *ok = false;
        return 0;
    }
    *ok = true;
    return bank_base[b] + PTX_REG_IDX(r);
}

static void opd_slots(const emu_kernel *k, const uint32_t *bb, const ptx_opd *o, uint32_t *out, int *n, int max)
{
    bool ok;
    uint32_t s;
    switch ((ptx_opd_kind)o->kind) {
    case PTX_O_REG:
        s = slot_of(k, bb, o->u.reg, &ok);
        if (ok && *n < max)
            out[(*n)++] = s;
        break;
    case PTX_O_ADDR:
        if (!o->u.addr.sym && o->u.addr.base.id) {
            s = slot_of(k, bb, o->u.addr.base, &ok);
            if (ok && *n < max)
                out[(*n)++] = s;
        }
        break;
    case PTX_O_PAIR:
        if (o->u.pair.d.id) {
            s = slot_of(k, bb, o->u.pair.d, &ok);
            if (ok && *n < max)
                out[(*n)++] = s;
        }
        s = slot_of(k, bb, o->u.pair.p, &ok);
        if (ok && *n < max)
            out[(*n)++] = s;
        break;
    case PTX_O_VEC:
    case PTX_O_TENSOR:
        for (int i = 0; i < o->u.vec.n; i++)
            opd_slots(k, bb, &o->u.vec.e[i], out, n, max);
        break;
    default: break;
    }
}

int emu__wg_prepare(emu_kernel *k, const ptx_fn *f, pt_err *e)
{
    bool any = false, mma = false;
    for (uint32_t pc = 0; pc < k->ncode; pc++)
        if (k->code[pc].h == EMU_H_WG) {
            any = true;
            mma |= k->code[pc].sub == EMU_WG_MMA;
        }
    if (!any)
        return PT_OK;
    emu_wgk *g = calloc(1, sizeof *g);
    uint8_t *isreg = calloc(k->nslots + 1, 1);
    uint32_t *bb = calloc(f->nbanks + 1, sizeof *bb);
    g->toff = calloc(k->ncode, sizeof *g->toff);
    g->tn = calloc(k->ncode, sizeof *g->tn);
    size_t cap = 64, nt = 0;
    g->tslot = malloc(cap * sizeof *g->tslot);
    k->wg = g;
    if (!g || !isreg || !bb || !g->toff || !g->tn || !g->tslot) {
        free(isreg);
        free(bb);
        return pt_errf(e, PT_ENOMEM, "out of memory (decoding %s)", f->name);
    }
    g->mma = mma;
    /* wgmma reads through the async proxy: async.c's proxy marks (and its
     * in-flight copy marks) must be kept for this kernel */
    if (mma)
        k->async = true;
    /* setmaxnreg's entry count (ref 6.4) */
    uint32_t threads = (uint32_t)((f->maxntid[0] ? f->maxntid[0] : 1) * (f->maxntid[1] ? f->maxntid[1] : 1) *
                                  (f->maxntid[2] ? f->maxntid[2] : 1));
    if (f->reqntid[0])
        threads = (uint32_t)(f->reqntid[0] * (f->reqntid[1] ? f->reqntid[1] : 1) * (f->reqntid[2] ? f->reqntid[2] : 1));
    if (f->maxnreg > 0)
        g->entry_regs = (uint32_t)f->maxnreg;
    else if ((f->maxntid[0] || f->reqntid[0]) && f->minnctapersm == 1) {
        uint32_t r = 65536 / threads / 8 * 8;
        g->entry_regs = r > 255 ? 248 : r;
    }
    /* the slots any wgmma uses as D or RS A */
    uint32_t s = k->reg_base;
    for (size_t b = 0; b < f->nbanks; b++) {
        bb[b] = s;
        s += f->banks[b].count;
    }
    for (uint32_t pc = 0; pc < k->ncode; pc++) {
        const emu_ins *in = &k->code[pc];
        if (in->h != EMU_H_WG || in->sub != EMU_WG_MMA)
            continue;
        for (uint32_t i = 0; i < in->n; i++)
            isreg[k->vpool[in->d + i]] = 1;
        if (in->sub2 & EMU_WGMMA_RS)
            for (uint32_t i = 0; i < 4; i++)
                isreg[k->vpool[in->a + i]] = 1;
    }
    isreg[EMU_SLOT_ZERO] = isreg[EMU_SLOT_SINK] = 0;
    /* every other instruction naming one of them is marked */
    uint32_t pc = 0;
    for (size_t i = 0; i < f->nbody && pc < k->ncode; i++) {
        const ptx_ins *pi = &f->body[i];
        if (pi->op == PTX_OP_LABEL || pi->op == PTX_OP_PRAGMA)
            continue;
        emu_ins *in = &k->code[pc];
        g->toff[pc] = (uint32_t)nt;
        pc++;
        if (in->h == EMU_H_WG && in->sub == EMU_WG_MMA)
            continue;
        uint32_t sl[300];
        int n = 0;
        for (int j = 0; j < pi->nopd; j++)
            opd_slots(k, bb, &pi->opd[j], sl, &n, 300);
        int hit = 0;
        for (int j = 0; j < n; j++)
            if (isreg[sl[j]]) {
                if (nt == cap) {
                    cap *= 2;
                    uint32_t *q = realloc(g->tslot, cap * sizeof *q);
                    if (!q) {
                        free(isreg);
                        free(bb);
                        return pt_errf(e, PT_ENOMEM, "out of memory (decoding %s)", f->name);
                    }
                    g->tslot = q;
                }
                g->tslot[nt++] = sl[j];
                hit++;
            }
        if (hit) {
            in->wg = 1;
            g->tn[pc - 1] = (uint16_t)hit;
        }
    }
    free(isreg);
    free(bb);
    return PT_OK;
}

void emu__wg_kernel_free(emu_kernel *k)
{
    if (!k->wg)
        return;
    free(k->wg->toff);
    free(k->wg->tn);
    free(k->wg->tslot);
    free(k->wg);
    k->wg = NULL;
}

/* ---- CTA state ---- */

int emu__wg_cta_init(emu_cta *c)
{
    const emu_wgk *gk = c->k->wg;
    if (!gk)
        return PT_OK;
    emu_wgc *g = calloc(1, sizeof *g);
    if (!g)
        return PT_ENOMEM;
    c->wg = g;
    g->nwg = (c->nwarps + 3) / 4;
    g->nchunks = (c->smem_size + 15) / 16 + 1;
    g->w = calloc(c->nwarps, sizeof *g->w);
    g->ring = calloc((size_t)g->nwg * WG_RING, sizeof *g->ring);
    g->set_k = calloc(g->nwg, sizeof *g->set_k);
    g->set_v = calloc(g->nwg, sizeof *g->set_v);
    g->set_warp = calloc(g->nwg, sizeof *g->set_warp);
    g->lock = calloc(g->nchunks, sizeof *g->lock);
    g->A = malloc(16 * 32 * sizeof *g->A);
    g->B = malloc(32 * WG_MAXN * sizeof *g->B);
    g->D = malloc(16 * WG_MAXN * sizeof *g->D);
    g->Ai = malloc(16 * 32 * sizeof *g->Ai);
    g->Bi = malloc(32 * WG_MAXN * sizeof *g->Bi);
    g->Di = malloc(16 * WG_MAXN * sizeof *g->Di);
    if (!g->w || !g->ring || !g->set_k || !g->set_v || !g->set_warp || !g->lock || !g->A || !g->B || !g->D || !g->Ai || !g->Bi || !g->Di)
        return PT_ENOMEM;
    if (c->o->detect_race && gk->mma) {
        g->rd = calloc((size_t)g->nchunks * WG_RD, sizeof *g->rd);
        g->wglock = calloc((size_t)g->nwg * g->nchunks, 1);
        if (!g->rd || !g->wglock)
            return PT_ENOMEM;
    }
    for (uint32_t i = 0; i < c->nwarps; i++) {
        wg_warp *ww = &g->w[i];
        ww->own = calloc(c->k->nslots + 1, sizeof *ww->own);
        ww->tgen = calloc(c->k->nslots + 1, sizeof *ww->tgen);
        if (!ww->own || !ww->tgen)
            return PT_ENOMEM;
    }
    return PT_OK;
}

void emu__wg_cta_free(emu_cta *c)
{
    emu_wgc *g = c->wg;
    if (!g)
        return;
    if (g->w)
        for (uint32_t i = 0; i < c->nwarps; i++) {
            free(g->w[i].q);
            free(g->w[i].fp);
            free(g->w[i].own);
            free(g->w[i].tgen);
        }
    free(g->w);
    free(g->ring);
    free(g->set_k);
    free(g->set_v);
    free(g->set_warp);
    free(g->lock);
    free(g->rd);
    free(g->wglock);
    free(g->A);
    free(g->B);
    free(g->D);
    free(g->Ai);
    free(g->Bi);
    free(g->Di);
    free(g);
    c->wg = NULL;
}

void emu__wg_cta_start(emu_cta *c)
{
    emu_wgc *g = c->wg;
    const emu_wgk *gk = c->k->wg;
    size_t ns = (size_t)c->k->nslots + 1;
    for (uint32_t i = 0; i < c->nwarps; i++) {
        wg_warp *ww = &g->w[i];
        ww->head = ww->nq = ww->nfp = 0;
        ww->committed = ww->retired = 0;
        ww->fence_gen = 1;
        ww->fenced = false;
        ww->nmma = 0;
        ww->nreg = gk->entry_regs;
        ww->nset = 0;
        ww->reg_lanes = 0;
        ww->yield_lanes = ww->yielded_at = 0;
        memset(ww->own, 0, ns * sizeof *ww->own);
        memset(ww->tgen, 0, ns * sizeof *ww->tgen);
    }
    memset(g->ring, 0, (size_t)g->nwg * WG_RING * sizeof *g->ring);
    memset(g->set_k, 0, g->nwg * sizeof *g->set_k);
    memset(g->lock, 0, g->nchunks * sizeof *g->lock);
    if (g->wglock)
        memset(g->wglock, 0, (size_t)g->nwg * g->nchunks);
    g->pool = (uint64_t)gk->entry_regs * 32 * c->nwarps;
    g->pool_free = 0;
}

/* ---- reports ---- */

static void diverged(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    if (!c->o->detect_divergence || emu__seen(c, EMU_R_DIVERGENCE, in))
        return;
    uint32_t missing = w->live & ~m;
    emu__report(c, EMU_R_DIVERGENCE, in, tid_of(w, (uint32_t)__builtin_ctz(m)), -1, 0, 0,
                "%s reached by a non-converged warp %u: active lanes 0x%08x of live 0x%08x (lane %d "
                "missing)",
                opname(in), w->index, m, w->live, missing ? __builtin_ctz(missing) : -1);
}

/* ---- descriptors (ref 2.1) and the canonical layouts (ref 2.2, 2.3) ---- */

typedef struct wg_desc {
    uint32_t start, lbo, sbo, W; /* bytes; W the swizzle span, 0: none */
} wg_desc;

/* Decodes and checks a descriptor; false (after a report) when it cannot
 * be read as documented. */
static bool desc_decode(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t lane, uint64_t v, char which,
                        wg_desc *d)
{
    static const uint32_t span[4] = {0, 128, 64, 32};
    d->start = (uint32_t)(v & 0x3fff) << 4;
    d->lbo = (uint32_t)((v >> 16) & 0x3fff) << 4;
    d->sbo = (uint32_t)((v >> 32) & 0x3fff) << 4;
    d->W = span[v >> 62];
    uint64_t reserved = v & (3ull << 14 | 3ull << 30 | 7ull << 46 | 0x3ffull << 52);
    unsigned base = (unsigned)(v >> 49) & 7;
    if (reserved) {
        emu__report(c, EMU_R_WGMMA_MISUSE, in, tid_of(w, lane), -1, 0, 0,
                    "descriptor %c 0x%016llx sets reserved bits 0x%016llx%s", which, (unsigned long long)v,
                    (unsigned long long)reserved,
                    (reserved >> 46) & 7 ? " (bits 46-48 are 0 on Hopper; a Blackwell descriptor?)" : "");
        return false;
    }
    if (base) {
        emu__report(c, EMU_R_LAYOUT, in, tid_of(w, lane), -1, 0, 0,
                    "descriptor %c 0x%016llx has base offset %u: not modelled (put swizzled tiles on "
                    "their pattern boundary, base offset 0)",
                    which, (unsigned long long)v, base);
        return false;
    }
    if (d->W && d->start % (8 * d->W) >= d->W) {
        emu__report(c, EMU_R_LAYOUT, in, tid_of(w, lane), -1, 0, 0,
                    "descriptor %c start 0x%x is in row %u of its %u-byte swizzle pattern (only starts in "
                    "the first %u-byte row are modelled)",
                    which, d->start, d->start % (8 * d->W) / d->W, 8 * d->W, d->W);
        return false;
    }
    return true;
}

static inline uint32_t swz(uint32_t x, uint32_t W)
{
    switch (W) {
    case 128: return x ^ (((x >> 7) & 7) << 4);
    case 64: return x ^ (((x >> 7) & 3) << 4);
    case 32: return x ^ (((x >> 7) & 1) << 4);
    default: return x;
    }
}

/* Window offset of 16-byte unit (i, j) of an operand (ref 2.2 then 2.3):
 * K-major: row (M or N index) i, bytes 16j .. 16j + 15 of its 32 bytes of K;
 * MN-major: elements 8i .. 8i + 7 of M/N (16-bit) at k = j. */
static inline uint32_t unit_addr(const wg_desc *d, bool mn_major, uint32_t i, uint32_t j)
{
    uint32_t off;
    if (!mn_major)
        off = d->W ? (i % 8) * d->W + (i / 8) * d->sbo + 16 * j : (i % 8) * 16 + (i / 8) * d->sbo + j * d->lbo;
    else if (!d->W)
        off = i * d->sbo + (j % 8) * 16 + (j / 8) * d->lbo;
    else
        off = (16 * i) % d->W + (16 * i) / d->W * d->lbo + (j % 8) * d->W + (j / 8) * d->sbo;
    return swz(d->start + off, d->W);
}

/* ---- issue ---- */

static bool in_shvar(const emu_cta *c, uint64_t off, uint32_t n)
{
    const emu_kernel *k = c->k;
    for (uint32_t i = 0; i < k->nshvars; i++) {
        const emu_shvar *v = &k->shvars[i];
        uint64_t size = v->dyn ? c->rs->l.dyn_smem : v->size;
        if (off >= v->off && off + n <= v->off + size)
            return true;
    }
    return false;
}

static void *grow(void *p, size_t elem, size_t *cap, size_t need)
{
    if (need <= *cap)
        return p;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(p, nc * elem);
    if (!q)
        abort(); /* allocation failure is an invariant violation (base.h) */
    *cap = nc;
    return q;
}

/* "thread (x,y,z)" or "the async proxy" (and the CTA rank of a peer) for
 * a cluster-wide agent and lane. */
static void agent_name(const emu_cta *c, uint32_t agent, uint32_t lane, char *buf, size_t n)
{
    uint32_t per = c->nwarps + 1, rank = agent / per, t = (agent % per) * 32 + lane;
    const unsigned *bd = c->rs->l.block;
    int k = agent % per == c->nwarps
                ? snprintf(buf, n, "the async proxy (a TMA or bulk copy)")
                : snprintf(buf, n, "thread (%u,%u,%u)", t % bd[0], t / bd[0] % bd[1], t / (bd[0] * bd[1]));
    if (rank != c->rank && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " of CTA rank %u", rank);
}

/* The race detector at issue: a write to the chunk that nothing orders
 * before the wgmma's issue is a race (the read may happen at any point
 * until the wait_group). A chunk one write filled (a TMA box, a 16-byte
 * store) has one writer: one check; otherwise byte by byte. */
static void rd_raw(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t lane, uint32_t addr)
{
    emu_asc *a = c->as;
    const uint32_t nw = a->nw, me = a->me0 + w->index, base = a->vbase;
    const uint32_t *V = &a->vc[w->index * nw];
    const uint32_t *wep = c->sh.wep + addr;
    const uint16_t *wtid = c->sh.wtid + addr;
    uint64_t w8[8], t4[4];
    memcpy(w8, wep, sizeof w8);
    memcpy(t4, wtid, sizeof t4);
    uint64_t w0 = (uint64_t)wep[0] * 0x100000001ull, t0 = (uint64_t)wtid[0] * 0x0001000100010001ull;
    bool one = ((w8[0] ^ w0) | (w8[1] ^ w0) | (w8[2] ^ w0) | (w8[3] ^ w0) | (w8[4] ^ w0) |
                (w8[5] ^ w0) | (w8[6] ^ w0) | (w8[7] ^ w0) | (t4[0] ^ t0) | (t4[1] ^ t0) |
                (t4[2] ^ t0) | (t4[3] ^ t0)) == 0;
    for (uint32_t b = 0; b < (one ? 1u : 16u); b++) {
        uint32_t wc = wep[b], wr = (uint32_t)wtid[b] >> 5;
        if (wc >= base && wr != me && wr < nw && wc > V[wr]) {
            char who[96];
            agent_name(c, wr, wtid[b] & 31u, who, sizeof who);
            emu__report(c, EMU_R_RACE, in, tid_of(w, lane), EMU_SP_SHARED, addr, 16,
                        "the wgmma's read (any time from its issue to the wgmma.wait_group that "
                        "retires it) after a write by %s to byte +%u with no barrier or mbarrier "
                        "phase ordering them",
                        who, b);
            return;
        }
    }
}

/* Checks and locks the 16-byte chunk of one unit; returns its chunk index
 * (UINT32_MAX: outside shared memory, reads as zeros). */
static uint32_t unit_take(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t lane, uint32_t addr)
{
    emu_wgc *g = c->wg;
    if ((uint64_t)addr + 16 > c->smem_size || (c->o->detect_oob && !in_shvar(c, addr, 16))) {
        if (c->o->detect_oob && !emu__seen(c, EMU_R_OOB, in))
            emu__report(c, EMU_R_OOB, in, tid_of(w, lane), EMU_SP_SHARED, addr, 16,
                        "a wgmma operand row outside every shared variable (descriptor start, LBO or SBO?)");
        if ((uint64_t)addr + 16 > c->smem_size)
            return UINT32_MAX;
    }
    uint32_t ch = addr >> 4;
    if (c->as && c->o->detect_async) { /* the async proxy's marks (async.c) */
        int wt = -1, wr = -1;
        int64_t at;
        if (!emu__seen(c, EMU_R_PROXY_FENCE, in) &&
            (at = emu__proxy_unfenced(c, w, addr, 16, &wt, &wr)) >= 0) {
            const unsigned *bd = c->rs->l.block;
            unsigned t = (unsigned)wt;
            if (wr >= 0)
                emu__report(c, EMU_R_PROXY_FENCE, in, tid_of(w, lane), EMU_SP_SHARED, (uint64_t)at, 1,
                            "wgmma (the async proxy) reads a byte thread (%u,%u,%u) of CTA rank %d wrote "
                            "through the generic proxy (.shared::cluster) with no fence.proxy.async in "
                            "this CTA after the barrier that orders that write before it",
                            t % bd[0], t / bd[0] % bd[1], t / (bd[0] * bd[1]), wr);
            else if (wr == -2)
                emu__report(c, EMU_R_PROXY_FENCE, in, tid_of(w, lane), EMU_SP_SHARED, (uint64_t)at, 1,
                            "wgmma (the async proxy) reads a byte a cp.async of thread (%u,%u,%u) wrote "
                            "(the generic proxy) with no fence.proxy.async after the copy landed (by that "
                            "thread after its wait, or by a thread that waited on it)",
                            t % bd[0], t / bd[0] % bd[1], t / (bd[0] * bd[1]));
            else
                emu__report(c, EMU_R_PROXY_FENCE, in, tid_of(w, lane), EMU_SP_SHARED, (uint64_t)at, 1,
                            "wgmma (the async proxy) reads a byte thread (%u,%u,%u) wrote through the generic "
                            "proxy with no fence.proxy.async by that thread since",
                            t % bd[0], t / bd[0] % bd[1], t / (bd[0] * bd[1]));
        }
        if (!emu__seen(c, EMU_R_ASYNC_RACE, in) && emu__async_busy(c, addr, 16, false))
            emu__report(c, EMU_R_ASYNC_RACE, in, tid_of(w, lane), EMU_SP_SHARED, addr, 16,
                        "wgmma reads shared memory an async copy in flight still writes (before the "
                        "mbarrier wait that completes it)");
    }
    if (g->rd && c->as->vcm && !g->wglock[(size_t)(w->index / 4) * g->nchunks + ch]++ &&
        !emu__seen(c, EMU_R_RACE, in))
        rd_raw(c, w, in, lane, addr);
    if (c->o->detect_uninit && !emu__seen(c, EMU_R_UNINIT, in)) {
        /* "written in this CTA": stamps at or past its epoch, or with vector
         * clocks (whose stamps the writes carry) its clocks' base */
        const uint32_t e0 = c->as && c->as->vcm ? c->as->vbase : c->epoch0;
        uint32_t un = 0;
        for (uint32_t b = 0; b < 16; b++)
            un |= c->sh.wep[addr + b] < e0;
        if (un)
            emu__report(c, EMU_R_UNINIT, in, tid_of(w, lane), EMU_SP_SHARED, addr, 16,
                        "wgmma reads shared memory no thread wrote");
    }
    g->lock[ch]++;
    return ch;
}

static int esize_of(int t)
{
    switch (t) {
    case PTX_T_F16:
    case PTX_T_BF16: return 2;
    case PTX_T_TF32: return 4;
    default: return 1;
    }
}

static void wg_mma(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    emu_wgc *g = c->wg;
    wg_warp *ww = &g->w[w->index];
    const uint64_t *R = w->R;
    const uint32_t *vp = c->k->vpool;
    bool rs = (in->sub2 & EMU_WGMMA_RS) != 0;
    uint32_t l0 = (uint32_t)__builtin_ctz(m), N = (uint32_t)in->off;
    if (m != w->live)
        diverged(c, w, in, m);
    if (c->nthreads % 128 && !emu__seen(c, EMU_R_WGMMA_MISUSE, in))
        emu__report(c, EMU_R_WGMMA_MISUSE, in, tid_of(w, l0), -1, 0, 0,
                    "wgmma in a CTA of %u threads (not whole warpgroups of 128)", c->nthreads);
    const uint64_t *DA = EMU_RG(R, in->a), *DB = EMU_RG(R, in->b), *SD = EMU_RG(R, in->c);
    uint64_t da = rs ? 0 : DA[l0], db = DB[l0];
    bool sd = (SD[l0] != 0) != (in->cneg != 0);
    EMU_FOR_LANES(m, l)
    {
        bool sdl = (SD[l] != 0) != (in->cneg != 0);
        if ((!rs && DA[l] != da) || DB[l] != db || sdl != sd) {
            if (!emu__seen(c, EMU_R_WGMMA_MISUSE, in))
                emu__report(c, EMU_R_WGMMA_MISUSE, in, tid_of(w, l), -1, 0, 0,
                            "%s differs across the warp's lanes (lane %u and lane %u)",
                            (!rs && DA[l] != da) ? "descriptor A" : DB[l] != db ? "descriptor B" : "scale-d",
                            l0, l);
            break;
        }
    }
    /* wgmma.fence before the first wgmma and after other accesses of its
     * registers (ref 3.1-3.2; ptxas injects one: C7519) */
    if (!emu__seen(c, EMU_R_WGMMA_HAZARD, in)) {
        int bad = -1;
        if (!ww->fenced)
            bad = 0;
        for (uint32_t i = 0; i < in->n && bad < 0; i++)
            if (ww->tgen[vp[in->d + i]] == ww->fence_gen)
                bad = 1;
        for (uint32_t i = 0; rs && i < 4 && bad < 0; i++)
            if (ww->tgen[vp[in->a + i]] == ww->fence_gen)
                bad = 2;
        if (bad >= 0)
            emu__report(c, EMU_R_WGMMA_HAZARD, in, tid_of(w, l0), -1, 0, 0,
                        bad == 0 ? "no wgmma.fence before the warp's first wgmma (ptxas injects one: C7519)"
                                 : "missing wgmma.fence: its %s registers were accessed by other instructions "
                                   "since the last wgmma.fence (ptxas injects one: C7519)",
                        bad == 2 ? "A" : "D");
    }
    /* the four warps of the warpgroup pass the same operands to their k-th wgmma */
    uint32_t wgi = w->index / 4;
    wg_ring *r = &g->ring[(size_t)wgi * WG_RING + ww->nmma % WG_RING];
    if (r->idx == ww->nmma + 1 && r->warp != w->index) {
        if ((r->pc != pc || r->da != da || r->db != db || r->sd != sd) && !emu__seen(c, EMU_R_WGMMA_MISUSE, in))
            emu__report(c, EMU_R_WGMMA_MISUSE, in, tid_of(w, l0), -1, 0, 0,
                        "warp %u's wgmma #%llu (line %d, descriptors 0x%llx 0x%llx, scale-d %d) differs from "
                        "warp %u's (line %d, 0x%llx 0x%llx, scale-d %d): the warpgroup must issue the same "
                        "wgmma",
                        w->index, (unsigned long long)ww->nmma, in->line, (unsigned long long)da,
                        (unsigned long long)db, sd, r->warp, c->k->code[r->pc].line, (unsigned long long)r->da,
                        (unsigned long long)r->db, r->sd);
    } else if (r->idx < ww->nmma + 1)
        *r = (wg_ring){ww->nmma + 1, da, db, pc, w->index, sd};
    ww->nmma++;
    /* descriptors and the footprint */
    wg_desc A = {0}, B;
    if ((!rs && !desc_decode(c, w, in, l0, da, 'A', &A)) || !desc_decode(c, w, in, l0, db, 'B', &B))
        return; /* refused: D stays as it is, the run fails on the report */
    bool ta = (in->sub2 & EMU_WGMMA_TRANS_A) != 0, tb = (in->sub2 & EMU_WGMMA_TRANS_B) != 0;
    uint32_t nfp = (rs ? 0 : 32) + 2 * N, base = (uint32_t)ww->nfp;
    ww->fp = grow(ww->fp, sizeof *ww->fp, &ww->capfp, ww->nfp + nfp);
    uint32_t *fp = ww->fp + base, wr = 16 * (w->index % 4);
    if (!rs) {
        for (uint32_t u = 0; u < 32; u++) { /* rows wr .. wr + 15 */
            uint32_t a = ta ? unit_addr(&A, true, wr / 8 + u % 2, u / 2) : unit_addr(&A, false, wr + u / 2, u % 2);
            fp[u] = unit_take(c, w, in, l0, a);
        }
        fp += 32;
    }
    for (uint32_t u = 0; u < 2 * N; u++) {
        uint32_t a = tb ? unit_addr(&B, true, u % (N / 8), u / (N / 8)) : unit_addr(&B, false, u / 2, u % 2);
        fp[u] = unit_take(c, w, in, l0, a);
    }
    ww->nfp += nfp;
    /* registers: owned by the open group */
    uint32_t grp = ww->committed + 1;
    for (uint32_t i = 0; i < in->n; i++)
        ww->own[vp[in->d + i]] = grp;
    ww->q = grow(ww->q, sizeof *ww->q, &ww->capq, ww->nq + 1);
    wg_slice *s = &ww->q[ww->nq++];
    s->in = in;
    s->group = grp;
    s->fp = base;
    s->nfp = nfp;
    s->scale_d = sd;
    if (rs)
        for (uint32_t q = 0; q < 4; q++) {
            uint32_t sl = vp[in->a + q];
            ww->own[sl] = grp;
            const uint64_t *ar = EMU_RG(R, sl);
            for (uint32_t l = 0; l < EMU_LANES; l++)
                s->a[q][l] = (uint32_t)ar[l];
        }
}

/* ---- execution at retire ---- */

static inline float elem_f(const emu_ctx *x, int t, uint32_t v)
{
    switch (t) {
    case PTX_T_F16: return x->h2f[v & 0xffff];
    case PTX_T_BF16: return num_f32((v & 0xffff) << 16);
    case PTX_T_TF32: return num_f32(v & 0xffffe000u); /* tf32 truncates (as mma.sync) */
    case PTX_T_E4M3: return x->fp8f[0][v & 0xff];
    default: return x->fp8f[1][v & 0xff];
    }
}

static inline uint32_t elem_raw(const uint8_t *p, int es)
{
    uint32_t v = 0;
    memcpy(&v, p, (size_t)es);
    return v;
}

/* Operand values of one 16-byte unit into row-major X (rows x K, K =
 * 32 / es), as float or integer. */
static void unit_load(const emu_cta *c, const uint8_t *p, int t, bool isint, bool mn_major, uint32_t i, uint32_t j,
                      float *X, int64_t *Xi, uint32_t K, bool neg)
{
    const emu_ctx *x = c->ctx;
    int es = esize_of(t);
    uint32_t per = 16 / (uint32_t)es;
    for (uint32_t e = 0; e < per; e++) {
        uint32_t v = p ? elem_raw(p + e * (uint32_t)es, es) : 0;
        uint32_t row = mn_major ? 8 * i + e : i, k = mn_major ? j : j * per + e;
        if (isint)
            Xi[row * K + k] = t == PTX_T_S8 ? (int8_t)v : (int64_t)v;
        else {
            float f = p ? elem_f(x, t, v) : 0.0f;
            X[row * K + k] = neg ? -f : f;
        }
    }
}

/* D (16 x N floats) += A (16 x K) * B^T (B: N x K, stored [k][n]) */
static void mac_f(float *D, const float *A, const float *B, uint32_t N, uint32_t K)
{
    for (uint32_t r = 0; r < 16; r += 4)
        for (uint32_t nb = 0; nb < N; nb += 8) {
            wg_v4f c0l, c0h, c1l, c1h, c2l, c2h, c3l, c3h;
            float *d0 = D + r * N + nb, *d1 = d0 + N, *d2 = d1 + N, *d3 = d2 + N;
            memcpy(&c0l, d0, 16), memcpy(&c0h, d0 + 4, 16);
            memcpy(&c1l, d1, 16), memcpy(&c1h, d1 + 4, 16);
            memcpy(&c2l, d2, 16), memcpy(&c2h, d2 + 4, 16);
            memcpy(&c3l, d3, 16), memcpy(&c3h, d3 + 4, 16);
            for (uint32_t k = 0; k < K; k++) {
                wg_v4f bl, bh;
                memcpy(&bl, B + k * WG_MAXN + nb, 16);
                memcpy(&bh, B + k * WG_MAXN + nb + 4, 16);
                float x0 = A[r * 32 + k], x1 = A[(r + 1) * 32 + k], x2 = A[(r + 2) * 32 + k],
                      x3 = A[(r + 3) * 32 + k];
                wg_v4f a0 = {x0, x0, x0, x0}, a1 = {x1, x1, x1, x1};
                wg_v4f a2 = {x2, x2, x2, x2}, a3 = {x3, x3, x3, x3};
                c0l += a0 * bl, c0h += a0 * bh;
                c1l += a1 * bl, c1h += a1 * bh;
                c2l += a2 * bl, c2h += a2 * bh;
                c3l += a3 * bl, c3h += a3 * bh;
            }
            memcpy(d0, &c0l, 16), memcpy(d0 + 4, &c0h, 16);
            memcpy(d1, &c1l, 16), memcpy(d1 + 4, &c1h, 16);
            memcpy(d2, &c2l, 16), memcpy(d2 + 4, &c2h, 16);
            memcpy(d3, &c3l, 16), memcpy(d3 + 4, &c3h, 16);
        }
}

/* Row and column of D register i (f32/s32; f16: element i) of lane l in
 * the warp's 16 x N slice (ref 1.3). */
static inline void d_pos(uint32_t l, uint32_t i, uint32_t *row, uint32_t *col)
{
    *row = l / 4 + 8 * ((i >> 1) & 1);
    *col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
}

static void d_load(emu_cta *c, const emu_warp *w, const emu_ins *in, float *D, int64_t *Di)
{
    const uint32_t *dv = c->k->vpool + in->d;
    uint32_t N = (uint32_t)in->off;
    bool h = in->ty == PTX_T_F16, isint = in->ty == PTX_T_S32;
    uint32_t ne = h ? 2u * in->n : in->n;
    for (uint32_t i = 0; i < ne; i++) {
        const uint64_t *dr = EMU_RG(w->R, dv[h ? i / 2 : i]);
        uint32_t sh = h ? 16 * (i & 1) : 0;
        for (uint32_t l = 0; l < EMU_LANES; l++) {
            uint32_t row, col;
            d_pos(l, i, &row, &col);
            uint32_t v = (uint32_t)(dr[l] >> sh);
            if (isint)
                Di[row * N + col] = (int32_t)v;
            else
                D[row * N + col] = h ? c->ctx->h2f[v & 0xffff] : num_f32(v);
        }
    }
}

static void d_store(emu_cta *c, emu_warp *w, const emu_ins *in, const float *D, const int64_t *Di)
{
    const uint32_t *dv = c->k->vpool + in->d;
    uint32_t N = (uint32_t)in->off;
    bool h = in->ty == PTX_T_F16, isint = in->ty == PTX_T_S32;
    for (uint32_t i = 0; i < in->n; i++) {
        uint64_t *dr = EMU_RG(w->R, dv[i]);
        for (uint32_t l = 0; l < EMU_LANES; l++) {
            uint32_t row, col;
            if (h) {
                d_pos(l, 2 * i, &row, &col);
                dr[l] = num_round(EMU_FMT_F16, (double)D[row * N + col], EMU_RN, 0) |
                        num_round(EMU_FMT_F16, (double)D[row * N + col + 1], EMU_RN, 0) << 16;
                continue;
            }
            d_pos(l, i, &row, &col);
            if (isint)
                dr[l] = (uint32_t)Di[row * N + col];
            else {
                uint32_t b = (uint32_t)num_f32_bits(D[row * N + col]);
                dr[l] = (b & 0x7fffffffu) > 0x7f800000u ? EMU_F32_QNAN : b;
            }
        }
    }
}

/* The value D holds after one instruction: f16 rounding, s32 wrap or
 * clamp (so a chain of slices may stay in the buffers). */
static void d_settle(const emu_ins *in, float *D, int64_t *Di, uint32_t N)
{
    if (in->ty == PTX_T_F16)
        for (uint32_t i = 0; i < 16 * N; i++)
            D[i] = num_f32((uint32_t)num_f16_to_f32((uint16_t)num_round(EMU_FMT_F16, (double)D[i], EMU_RN, 0)));
    else if (in->ty == PTX_T_S32) {
        bool sat = (in->flags & EMU_IF_SATFINITE) != 0;
        for (uint32_t i = 0; i < 16 * N; i++) {
            int64_t v = Di[i];
            Di[i] = sat ? (v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v) : (int32_t)(uint32_t)v;
        }
    }
}

static void slice_exec(emu_cta *c, emu_warp *w, const wg_slice *s, bool load_d)
{
    emu_wgc *g = c->wg;
    const emu_ins *in = s->in;
    uint32_t N = (uint32_t)in->off, K = in->sz;
    int at = in->ty2, bt = (int)(in->aux & 0xff);
    bool isint = in->ty == PTX_T_S32, rs = (in->sub2 & EMU_WGMMA_RS) != 0;
    bool na = (in->sub2 & EMU_WGMMA_NEG_A) != 0, nb = (in->sub2 & EMU_WGMMA_NEG_B) != 0;
    bool ta = (in->sub2 & EMU_WGMMA_TRANS_A) != 0, tb = (in->sub2 & EMU_WGMMA_TRANS_B) != 0;
    const uint32_t *fp = c->wg->w[w->index].fp + s->fp;
    float *A = g->A, *B = g->B, *D = g->D;
    int64_t *Ai = g->Ai, *Bi = g->Bi, *Di = g->Di;
    /* A: 16 x K, row-major with a row pitch of 32 */
    if (!rs) {
        for (uint32_t u = 0; u < 32; u++) {
            const uint8_t *p = fp[u] == UINT32_MAX ? NULL : c->smem + ((size_t)fp[u] << 4);
            if (ta)
                unit_load(c, p, at, isint, true, u % 2, u / 2, A, Ai, 32, na);
            else
                unit_load(c, p, at, isint, false, u / 2, u % 2, A, Ai, 32, na);
        }
        fp += 32;
    } else { /* ref 1.4 */
        int es = esize_of(at);
        for (uint32_t q = 0; q < 4; q++)
            for (uint32_t l = 0; l < EMU_LANES; l++) {
                uint32_t v = s->a[q][l], row = l / 4 + 8 * (q & 1), t = l % 4;
                for (uint32_t e = 0; e < 4u / (uint32_t)es; e++) {
                    uint32_t k = es == 2 ? 8 * (q >> 1) + 2 * t + e : es == 4 ? t + 4 * (q >> 1) : 16 * (q >> 1) + 4 * t + e;
                    uint32_t x = es == 4 ? v : (v >> (8 * (uint32_t)es * e)) & (es == 2 ? 0xffffu : 0xffu);
                    if (isint)
                        Ai[row * 32 + k] = at == PTX_T_S8 ? (int8_t)x : (int64_t)x;
                    else {
                        float f = elem_f(c->ctx, at, x);
                        A[row * 32 + k] = na ? -f : f;
                    }
                }
            }
    }
    /* B: N x K, stored [k][n] with a pitch of WG_MAXN */
    {
        const emu_ctx *x = c->ctx;
        int es = esize_of(bt);
        uint32_t per = 16 / (uint32_t)es, g8 = N / 8;
        for (uint32_t u = 0; u < 2 * N; u++) {
            const uint8_t *p = fp[u] == UINT32_MAX ? NULL : c->smem + ((size_t)fp[u] << 4);
            uint32_t i = tb ? u % g8 : u / 2, j = tb ? u / g8 : u % 2;
            for (uint32_t e = 0; e < per; e++) {
                uint32_t v = p ? elem_raw(p + e * (uint32_t)es, es) : 0;
                uint32_t n = tb ? 8 * i + e : i, k = tb ? j : j * per + e;
                if (isint)
                    Bi[k * WG_MAXN + n] = bt == PTX_T_S8 ? (int8_t)v : (int64_t)v;
                else {
                    float f = p ? elem_f(x, bt, v) : 0.0f;
                    B[k * WG_MAXN + n] = nb ? -f : f;
                }
            }
        }
    }
    if (load_d) {
        if (s->scale_d)
            d_load(c, w, in, D, Di);
        else if (isint)
            memset(Di, 0, 16 * N * sizeof *Di);
        else
            memset(D, 0, 16 * N * sizeof *D);
    } else if (!s->scale_d) { /* a chain: D = A B from here */
        if (isint)
            memset(Di, 0, 16 * N * sizeof *Di);
        else
            memset(D, 0, 16 * N * sizeof *D);
    }
    if (isint) {
        for (uint32_t r = 0; r < 16; r++)
            for (uint32_t k = 0; k < K; k++) {
                int64_t a = Ai[r * 32 + k];
                for (uint32_t n = 0; n < N; n++)
                    Di[r * N + n] += a * Bi[k * WG_MAXN + n];
            }
    } else
        mac_f(D, A, B, N, K);
    d_settle(in, D, Di, N);
}

static bool same_d(const emu_kernel *k, const emu_ins *a, const emu_ins *b)
{
    return a->ty == b->ty && a->n == b->n && a->off == b->off &&
           (a->d == b->d || memcmp(k->vpool + a->d, k->vpool + b->d, a->n * sizeof *k->vpool) == 0);
}

/* The race detector at retire: the read is recorded (the wait_group is the
 * latest point it may happen). The slot: this agent's, else the first
 * empty one (slots fill from 0 and a whole-chunk write empties them all),
 * else the oldest. */
static void rd_record(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t ch)
{
    emu_wgc *g = c->wg;
    emu_asc *a = c->as;
    const uint32_t me = a->me0 + w->index, base = a->vbase;
    wg_rd *e = &g->rd[(size_t)ch * WG_RD];
    uint32_t slot = WG_RD, old = 0;
    for (uint32_t i = 0; i < WG_RD; i++) {
        if (e[i].clk < base || e[i].agent == me) {
            slot = i;
            break;
        }
        if (e[i].clk < e[old].clk)
            old = i;
    }
    e[slot == WG_RD ? old : slot] =
        (wg_rd){a->vc[w->index * a->nw + me], (uint32_t)(in - c->k->code), me};
}

/* A write of [off, off+n) by agent `me` with vector clock V: a wgmma read
 * of it nothing orders before the write is a race; a chunk written whole
 * forgets its readers. */
static void rd_check(emu_cta *c, const emu_ins *in, int tid, uint64_t off, uint64_t n,
                     const uint32_t *V, uint32_t me)
{
    emu_wgc *g = c->wg;
    const uint32_t base = c->as->vbase;
    for (uint64_t ch = off >> 4; ch <= (off + n - 1) >> 4 && ch < g->nchunks; ch++) {
        wg_rd *e = &g->rd[ch * WG_RD];
        for (uint32_t i = 0; i < WG_RD; i++)
            if (e[i].clk >= base && e[i].agent != me && e[i].clk > V[e[i].agent] &&
                !emu__seen(c, EMU_R_RACE, in)) {
                char who[96];
                agent_name(c, e[i].agent, 0, who, sizeof who);
                emu__report(c, EMU_R_RACE, in, tid, EMU_SP_SHARED, off, (uint32_t)n,
                            "write after a read by the wgmma at line %d of %s (it reads until the "
                            "wgmma.wait_group that retires it) with no barrier or mbarrier phase "
                            "ordering them",
                            c->k->code[e[i].pc].line, who);
            }
        if (ch * 16 >= off && ch * 16 + 16 <= off + n)
            for (uint32_t i = 0; i < WG_RD; i++)
                e[i].clk = 0;
    }
}

/* Executes, in issue order, every queued slice of groups <= upto. */
static void retire(emu_cta *c, emu_warp *w, uint32_t upto)
{
    emu_wgc *g = c->wg;
    wg_warp *ww = &g->w[w->index];
    size_t i = ww->head;
    const emu_ins *open = NULL; /* the instruction whose D is in the buffers */
    for (; i < ww->nq && ww->q[i].group <= upto; i++) {
        const wg_slice *s = &ww->q[i];
        bool chain = open && same_d(c->k, open, s->in);
        if (open && !chain)
            d_store(c, w, open, g->D, g->Di);
        slice_exec(c, w, s, !chain);
        open = s->in;
        const uint32_t *fp = ww->fp + s->fp;
        /* the race detector sees the reads here, the latest point they may
         * happen: a write by another warp must be ordered after this wait */
        uint8_t *wl = g->rd && c->as && c->as->vcm ? g->wglock + (size_t)(w->index / 4) * g->nchunks : NULL;
        for (uint32_t u = 0; u < s->nfp; u++)
            if (fp[u] != UINT32_MAX) {
                g->lock[fp[u]]--;
                if (wl && !--wl[fp[u]])
                    rd_record(c, w, s->in, fp[u]);
            }
    }
    if (open)
        d_store(c, w, open, g->D, g->Di);
    ww->head = i;
    if (upto > ww->retired)
        ww->retired = upto;
    if (ww->head == ww->nq) {
        ww->head = ww->nq = ww->nfp = 0;
    } else if (ww->head >= 32) { /* compact the queue and the footprint pool */
        uint32_t f0 = ww->q[ww->head].fp;
        memmove(ww->fp, ww->fp + f0, (ww->nfp - f0) * sizeof *ww->fp);
        ww->nfp -= f0;
        memmove(ww->q, ww->q + ww->head, (ww->nq - ww->head) * sizeof *ww->q);
        ww->nq -= ww->head;
        ww->head = 0;
        for (size_t j = 0; j < ww->nq; j++)
            ww->q[j].fp -= f0;
    }
}

void emu__wg_touch(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t pc)
{
    emu_wgc *g = c->wg;
    const emu_wgk *gk = c->k->wg;
    if (!g)
        return;
    wg_warp *ww = &g->w[w->index];
    const uint32_t *sl = gk->tslot + gk->toff[pc];
    uint32_t need = 0, slot = 0;
    for (uint32_t i = 0; i < gk->tn[pc]; i++) {
        uint32_t o = ww->own[sl[i]];
        if (o > ww->retired && o > need)
            need = o, slot = sl[i];
        ww->tgen[sl[i]] = ww->fence_gen;
    }
    if (!need)
        return;
    if (!emu__seen(c, EMU_R_WGMMA_HAZARD, in)) {
        int line = 0;
        for (size_t i = ww->head; i < ww->nq; i++)
            if (ww->q[i].group == ww->own[slot]) {
                const emu_ins *wi = ww->q[i].in;
                for (uint32_t j = 0; j < wi->n && !line; j++)
                    if (c->k->vpool[wi->d + j] == slot)
                        line = wi->line;
                for (uint32_t j = 0; (wi->sub2 & EMU_WGMMA_RS) && j < 4 && !line; j++)
                    if (c->k->vpool[wi->a + j] == slot)
                        line = wi->line;
            }
        emu__report(c, EMU_R_WGMMA_HAZARD, in, tid_of(w, (uint32_t)__builtin_ctz(w->group)), -1, 0, 0,
                    "accesses a register of the wgmma at line %d before wgmma.wait_group retired its "
                    "group (ptxas serialises: C7517)",
                    line);
    }
    retire(c, w, need);
}

void emu__wg_exit(emu_cta *c, emu_warp *w, uint32_t m)
{
    emu_wgc *g = c->wg;
    wg_warp *ww = &g->w[w->index];
    if ((w->live & ~m) == 0 && ww->nq > ww->head)
        retire(c, w, UINT32_MAX);
    if ((w->live & ~m) == 0) { /* the last lanes: did the warpgroup agree on setmaxnreg? */
        uint32_t q = w->index / 4 * 4, done = 0, n0 = UINT32_MAX, odd = UINT32_MAX;
        for (uint32_t i = q; i < q + 4 && i < c->nwarps; i++) {
            if (c->warps[i].live && i != w->index)
                return;
            done++;
            if (n0 == UINT32_MAX)
                n0 = g->w[i].nset;
            else if (g->w[i].nset != n0 && odd == UINT32_MAX)
                odd = i;
        }
        if (odd != UINT32_MAX && !emu__seen(c, EMU_R_SETMAXNREG, NULL))
            emu__report(c, EMU_R_SETMAXNREG, NULL, tid_of(w, 0), -1, 0, 0,
                        "warp %u executed setmaxnreg %u times, warp %u %u times: all four warps of "
                        "warpgroup %u must execute each setmaxnreg",
                        q, g->w[q].nset, odd, g->w[odd].nset, q / 4);
        (void)done;
    }
}

/* ---- stmatrix, elect.sync, setmaxnreg ---- */

static void wg_stmatrix(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    const uint64_t *R = w->R, *A = EMU_RG(R, in->a);
    const uint32_t *sv = c->k->vpool + in->b;
    bool trans = (in->flags & EMU_IF_TRANS) != 0;
    if (m != w->live)
        diverged(c, w, in, m);
    uint32_t off[EMU_LANES];
    for (uint32_t sl = 0; sl < 8u * in->n; sl++) {
        uint64_t a = A[sl] + (uint64_t)in->off;
        off[sl] = (uint32_t)(a - EMU_SHARED_BASE < EMU_WINDOW ? a - EMU_SHARED_BASE : a);
    }
    emu__banks(c, in, EMU_BANK_ST, off, (uint32_t)((1ull << (8 * in->n)) - 1), 16);
    /* register j of lane l holds row l / 4, columns 2 (l % 4) + {0, 1} of
     * matrix j (ref 6.5); .trans stores the transpose */
    for (uint32_t j = 0; j < in->n; j++) {
        const uint64_t *rj = EMU_RG(R, sv[j]);
        for (uint32_t r = 0; r < 8; r++) {
            uint16_t row[8];
            for (uint32_t col = 0; col < 8; col++) {
                uint32_t lane = trans ? 4 * col + r / 2 : 4 * r + col / 2, half = trans ? r % 2 : col % 2;
                row[col] = (uint16_t)(rj[lane] >> (16 * half));
            }
            uint32_t sl = 8 * j + r;
            uint8_t *p = emu__mem(c, in, w, sl, in->sub2, A[sl] + (uint64_t)in->off, 16, EMU_ACC_WRITE);
            if (p)
                memcpy(p, row, 16);
        }
    }
}

static void wg_elect(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R, *D = EMU_RG(R, in->d), *P = EMU_RG(R, in->c);
    const uint64_t *A = EMU_RG(R, in->a);
    uint32_t mask = (uint32_t)A[__builtin_ctz(m)];
    if (c->o->detect_divergence && !emu__seen(c, EMU_R_DIVERGENCE, in)) {
        uint32_t need = mask & w->live;
        if (need & ~m)
            emu__report(c, EMU_R_DIVERGENCE, in, tid_of(w, (uint32_t)__builtin_ctz(m)), -1, 0, 0,
                        "elect.sync membermask 0x%08x names lanes not executing it (active 0x%08x)", mask, m);
        else if (m & ~mask)
            emu__report(c, EMU_R_DIVERGENCE, in, tid_of(w, (uint32_t)__builtin_ctz(m & ~mask)), -1, 0, 0,
                        "elect.sync executed by lanes 0x%08x outside its membermask 0x%08x", m & ~mask, mask);
    }
    uint32_t part = m & mask; /* the lowest active lane is the leader (ref 6.5, an assumption) */
    uint32_t leader = part ? (uint32_t)__builtin_ctz(part) : 32;
    EMU_FOR_LANES(m, l)
    {
        D[l] = leader;
        P[l] = l == leader;
    }
}

static void wake_reg_waiters(emu_cta *c)
{
    emu_wgc *g = c->wg;
    for (uint32_t i = 0; i < c->nwarps; i++)
        if (g->w[i].reg_lanes) {
            emu_warp *x = &c->warps[i];
            x->blocked &= ~g->w[i].reg_lanes;
            g->w[i].reg_lanes = 0;
            emu__resched(x);
        }
}

static bool wg_setmaxnreg(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    emu_wgc *g = c->wg;
    wg_warp *ww = &g->w[w->index];
    uint32_t v = (uint32_t)in->aux, l0 = (uint32_t)__builtin_ctz(m);
    bool inc = in->sub2 != 0;
    if (m != w->live)
        diverged(c, w, in, m);
    if (!c->k->wg->entry_regs) {
        if (!emu__seen(c, EMU_R_SETMAXNREG, in))
            emu__report(c, EMU_R_SETMAXNREG, in, tid_of(w, l0), -1, 0, 0,
                        "the register count at entry is unknown (needs .maxnreg, or .maxntid with "
                        ".minnctapersm 1): ptxas ignores setmaxnreg (C7508)");
        return false;
    }
    { /* (a retry after a wait repeats these checks, which are idempotent) */
        uint32_t q = w->index / 4, k = ww->nset + 1;
        if (g->set_k[q] == k && g->set_v[q] != v && !emu__seen(c, EMU_R_SETMAXNREG, in))
            emu__report(c, EMU_R_SETMAXNREG, in, tid_of(w, l0), -1, 0, 0,
                        "warp %u asks for %u registers, warp %u of its warpgroup for %u: setmaxnreg must be "
                        "warpgroup-uniform",
                        w->index, v, g->set_warp[q], g->set_v[q]);
        else if (g->set_k[q] < k)
            g->set_k[q] = k, g->set_v[q] = v, g->set_warp[q] = w->index;
        if (inc ? v < ww->nreg : v > ww->nreg) {
            if (!emu__seen(c, EMU_R_SETMAXNREG, in))
                emu__report(c, EMU_R_SETMAXNREG, in, tid_of(w, l0), -1, 0, 0,
                            "setmaxnreg.%s %u from %u registers: .dec must not raise, .inc not lower the count",
                            inc ? "inc" : "dec", v, ww->nreg);
            ww->nset++;
            return false;
        }
    }
    if (!inc) {
        g->pool_free += (uint64_t)(ww->nreg - v) * 32;
        ww->nreg = v;
        ww->nset++;
        wake_reg_waiters(c);
        return false;
    }
    uint64_t need = (uint64_t)(v - ww->nreg) * 32;
    if (need > g->pool_free) { /* blocks until a .dec frees enough (its SASS retries) */
        EMU_FOR_LANES(w->group, l) w->lane_pc[l] = (m >> l) & 1 ? pc : pc + 1;
        w->group = 0;
        w->blocked |= m;
        ww->reg_lanes = m;
        ww->reg_pc = pc;
        emu__resched(w);
        return true;
    }
    g->pool_free -= need;
    ww->nreg = v;
    ww->nset++;
    return false;
}

void emu__wg_round(emu_cta *c)
{
    emu_wgc *g = c->wg;
    for (uint32_t i = 0; i < c->nwarps; i++)
        if (g->w[i].yield_lanes) {
            c->warps[i].blocked &= ~g->w[i].yield_lanes;
            g->w[i].yield_lanes = 0;
            emu__resched(&c->warps[i]);
        }
}

bool emu__wg_deadlock(emu_cta *c)
{
    emu_wgc *g = c->wg;
    for (uint32_t i = 0; i < c->nwarps; i++)
        if (g->w[i].reg_lanes) {
            wg_warp *ww = &g->w[i];
            const emu_ins *in = &c->k->code[ww->reg_pc];
            uint64_t used = 0;
            for (uint32_t j = 0; j < c->nwarps; j++)
                used += (uint64_t)g->w[j].nreg * 32;
            emu__report(c, EMU_R_SETMAXNREG, in, (int)(i * 32 + (uint32_t)__builtin_ctz(ww->reg_lanes)), -1, 0, 0,
                        "setmaxnreg.inc %u by warp %u can never be granted: the pool holds %llu registers "
                        "(%u at entry x %u threads), %llu in use, %llu free, it needs %llu more",
                        (unsigned)in->aux, i, (unsigned long long)g->pool, c->k->wg->entry_regs, c->nwarps * 32,
                        (unsigned long long)used, (unsigned long long)g->pool_free,
                        (unsigned long long)(((uint64_t)in->aux - ww->nreg) * 32));
            return true;
        }
    return false;
}

/* ---- shared-memory writes ---- */

void emu__wg_smem_write(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane, uint64_t off,
                        uint32_t n)
{
    emu_wgc *g = c->wg;
    emu_asc *a = c->as;
    if (g->rd && a && a->vcm) /* a cp.async landing writes as of its issue (acc_vc) */
        rd_check(c, in, tid_of(w, lane), off, n, a->acc_vc ? a->acc_vc : &a->vc[w->index * a->nw],
                 a->me0 + w->index);
    for (uint64_t ch = off >> 4; ch <= (off + n - 1) >> 4; ch++)
        if (g->lock[ch] && c->o->detect_async && !emu__seen(c, EMU_R_ASYNC_RACE, in)) {
            emu__report(c, EMU_R_ASYNC_RACE, in, tid_of(w, lane), EMU_SP_SHARED, off, n,
                        "writes shared memory an in-flight wgmma reads (before the wgmma.wait_group that "
                        "retires it)");
            break;
        }
}

void emu__wg_async_write(emu_cta *c, const emu_ins *in, int tid, uint64_t off, uint64_t n,
                         const uint32_t *wv, uint32_t wagent)
{
    emu_wgc *g = c->wg;
    if (!g || !n)
        return;
    if (g->rd && wv && c->as && c->as->vcm)
        rd_check(c, in, tid, off, n, wv, wagent);
    for (uint64_t ch = off >> 4; ch <= (off + n - 1) >> 4 && ch < g->nchunks; ch++)
        if (g->lock[ch] && c->o->detect_async && !emu__seen(c, EMU_R_ASYNC_RACE, in)) {
            emu__report(c, EMU_R_ASYNC_RACE, in, tid, EMU_SP_SHARED, ch << 4, 16,
                        "an async copy writes shared memory an in-flight wgmma reads (the stage released "
                        "before the wgmma.wait_group that retires it?)");
            break;
        }
}

void emu__wg_peer_write(emu_cta *p, emu_cta *c, const emu_ins *in, int tid, uint64_t off, uint32_t n,
                        uint64_t addr)
{
    const emu_wgc *g = p->wg;
    if (!n || !c->o->detect_async || emu__seen(c, EMU_R_ASYNC_RACE, in))
        return;
    for (uint64_t ch = off >> 4; ch <= (off + n - 1) >> 4 && ch < g->nchunks; ch++)
        if (g->lock[ch]) {
            emu__report(c, EMU_R_ASYNC_RACE, in, tid, EMU_SP_CLUSTER, addr, n,
                        "writes shared memory of CTA rank %u that an in-flight wgmma of that CTA reads "
                        "(before its wgmma.wait_group)",
                        p->rank);
            break;
        }
}

/* ---- dispatch ---- */

bool emu__wg_exec(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    emu_wgc *g = c->wg;
    wg_warp *ww = &g->w[w->index];
    switch (in->sub) {
    case EMU_WG_FENCE:
        if (m != w->live)
            diverged(c, w, in, m);
        ww->fenced = true;
        ww->fence_gen++;
        return false;
    case EMU_WG_COMMIT:
        if (m != w->live)
            diverged(c, w, in, m);
        ww->committed++;
        return false;
    case EMU_WG_WAIT: {
        if (m != w->live)
            diverged(c, w, in, m);
        if ((uint64_t)ww->committed <= in->aux)
            return false;
        uint32_t upto = ww->committed - (uint32_t)in->aux;
        if (ww->head < ww->nq && ww->q[ww->head].group <= upto && ww->yielded_at != pc + 1 &&
            c->nwarps > 1) {
            /* the latest legal point: every other warp runs first (a stage
             * released before this wait is refilled while the wgmma still
             * reads it: the async copy's issue reports it) */
            ww->yielded_at = pc + 1;
            EMU_FOR_LANES(w->group, l) w->lane_pc[l] = (m >> l) & 1 ? pc : pc + 1;
            w->group = 0;
            w->blocked |= m;
            ww->yield_lanes = m;
            emu__resched(w);
            return true;
        }
        ww->yielded_at = 0;
        retire(c, w, upto);
        return false;
    }
    case EMU_WG_MMA: wg_mma(c, w, in, m, pc); return false;
    case EMU_WG_STMATRIX: wg_stmatrix(c, w, in, m); return false;
    case EMU_WG_ELECT: wg_elect(c, w, in, m); return false;
    case EMU_WG_SETMAXNREG: return wg_setmaxnreg(c, w, in, m, pc);
    default: return false;
    }
}
