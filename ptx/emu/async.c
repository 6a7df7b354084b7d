/* Hopper's async proxy: the CTA's queue of in-flight TMA and bulk copies,
 * their completion points (emu_opts.schedule), bulk async-groups, the
 * in-flight marks on shared memory, the generic-proxy write marks that
 * fence.proxy.async clears, and tensor-map decoding for the TMA
 * instructions (ptx/emu/tmap.h). The model is described in emu_int.h.
 *
 * Loads (TMA, cp.async.bulk global -> shared) gather their bytes when they
 * are issued, so when they land does not change what they write; stores read
 * shared memory when they complete, so a kernel that overwrites a store's
 * source before cp.async.bulk.wait_group.read gets a wrong answer under the
 * lazy schedule (and an async-race report under any). */
#include "ptx/emu/emu_int.h"
#include "ptx/emu/tmap.h"

#include <stdio.h>
#include <stdlib.h>

enum { EMU_AS_CP_ARRIVE = 100 }; /* internal: cp.async.mbarrier.arrive */

struct emu_aop {
    uint8_t kind; /* EMU_AS_* */
    uint8_t redop; /* EMU_AOP_* (TMA_RED) */
    bool noinc;
    uint8_t lane;
    uint32_t cpseq;       /* CP_ARRIVE: the warp's cp_seq at issue (its lane's prior copies land) */
    uint32_t warp, pc, group;
    uint32_t smem, bytes; /* the marked shared range: destination (loads), source (stores) */
    int32_t mb;           /* barrier index, -1 none (the own CTA's; loads: dmb) */
    uint64_t phase;       /* its phase at issue */
    uint32_t dmask;       /* loads: the destination CTAs (ranks), each at smem */
    int32_t dmb[EMU_CLUSTER_MAX];   /* loads: the barrier index in each destination */
    uint64_t dph[EMU_CLUSTER_MAX];  /* and its phase at issue */
    uint64_t gaddr;       /* bulk: the global address */
    emu_tmap_desc map;
    int32_t coord[EMU_TMAP_MAX_RANK];
    uint8_t *data; /* loads: the bytes that land at smem */
    uint32_t *vc;  /* the issuer's vector clock at issue (vcm), and its own entry */
    uint32_t clk;
};

static int tid_of(const emu_warp *w, uint32_t lane) { return (int)(w->index * 32 + lane); }
static void complete_at(emu_cta *c, uint32_t i);

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* ---- CTA state ---- */

int emu__async_cta_init(emu_cta *c)
{
    if (!c->k->async)
        return PT_OK;
    emu_asc *a = calloc(1, sizeof *a);
    if (!a)
        return PT_ENOMEM;
    c->as = a;
    size_t sm = (size_t)c->smem_size + 16, nt = (size_t)c->nwarps * 32;
    a->mbix = calloc(sm / 8 + 1, sizeof *a->mbix);
    a->wait_mb = calloc(nt, sizeof *a->wait_mb);
    a->wait_arg = calloc(nt, sizeof *a->wait_arg);
    a->bgroup = calloc(nt, sizeof *a->bgroup);
    a->fcnt = calloc(nt, sizeof *a->fcnt);
    a->wfence = calloc(sm, sizeof *a->wfence);
    a->wft = calloc(sm, sizeof *a->wft);
    a->wland = c->o->detect_race ? calloc(sm, sizeof *a->wland) : NULL;
    a->cb_arr = calloc(nt, sizeof *a->cb_arr);
    a->cbw = calloc(c->nwarps, sizeof *a->cbw);
    a->me0 = 0;
    if (!a->mbix || !a->wait_mb || !a->wait_arg || !a->bgroup || !a->fcnt || !a->wfence || !a->wft ||
        !a->cb_arr || !a->cbw || (c->o->detect_race && !a->wland))
        return PT_ENOMEM;
    c->shadow_sh = c->shadow_sh || c->o->detect_async;
    if (c->o->detect_race) {
        /* each CTA of the cluster: its warps and its async proxy */
        uint32_t nw = c->rs->csize * (c->nwarps + 1);
        a->vcm = true;
        a->nw = nw;
        a->vc = calloc((size_t)c->nwarps * nw, sizeof *a->vc);
        a->barvc = calloc((size_t)EMU_NBAR * nw, sizeof *a->barvc);
        a->fvc = calloc((size_t)c->nwarps * nw, sizeof *a->fvc);
        if (!a->vc || !a->barvc || !a->fvc)
            return PT_ENOMEM;
    }
    return PT_OK;
}

static void aop_free(emu_aop *op)
{
    if (op) {
        free(op->vc);
        free(op->data);
        free(op);
    }
}

void emu__async_cta_free(emu_cta *c)
{
    emu_asc *a = c->as;
    if (!a)
        return;
    for (uint32_t i = 0; i < a->nq; i++)
        aop_free(a->q[i]);
    free(a->q);
    free(a->mb);
    free(a->mbix);
    free(a->wait_mb);
    free(a->wait_arg);
    free(a->bgroup);
    free(a->fcnt);
    free(a->wfence);
    free(a->wland);
    free(a->wft);
    free(a->vc);
    free(a->barvc);
    free(a->fvc);
    free(a->cb_arr);
    free(a->cbw);
    free(a->mbvc);
    free(a->rpool);
    free(a->rfree);
    free(a);
    c->as = NULL;
}

void emu__async_cta_start(emu_cta *c, uint64_t linear)
{
    emu_asc *a = c->as;
    if (!a)
        return;
    for (uint32_t i = 0; i < a->nmb; i++)
        a->mbix[a->mb[i].off >> 3] = 0;
    a->nmb = 0;
    for (uint32_t i = 0; i < a->nq; i++)
        aop_free(a->q[i]);
    a->nq = 0;
    a->marked = 0;
    a->spin_rounds = 0;
    size_t nt = (size_t)c->nwarps * 32;
    memset(a->bgroup, 0, nt * sizeof *a->bgroup);
    memset(a->fcnt, 0, nt * sizeof *a->fcnt);
    memset(a->wait_mb, 0, nt * sizeof *a->wait_mb);
    memset(a->wfence, 0, (size_t)c->smem_size * sizeof *a->wfence);
    a->pfc = 0;
    if (a->fvc)
        memset(a->fvc, 0, (size_t)c->nwarps * a->nw * sizeof *a->fvc);
    memset(a->cb_arr, 0, nt * sizeof *a->cb_arr);
    memset(a->cbw, 0, c->nwarps * sizeof *a->cbw);
    a->me0 = c->rank * (c->nwarps + 1);
    a->rng = (c->o->schedule_seed + 1) * 0x9e3779b97f4a7c15ull ^ (linear + 1) * 0xbf58476d1ce4e5b9ull;
    if (!a->rng)
        a->rng = 1;
    for (uint32_t i = 0; i < c->nwarps; i++) {
        c->warps[i].mb_wait = 0;
        c->warps[i].spin = false;
    }
}

int emu__cluster_init(emu_cluster *cl, uint32_t nw)
{
    cl->cbvc = calloc(nw, sizeof *cl->cbvc);
    cl->cbpub = calloc(nw, sizeof *cl->cbpub);
    if (!cl->cbvc || !cl->cbpub)
        return PT_ENOMEM;
    return PT_OK;
}

void emu__cluster_free(emu_cluster *cl)
{
    free(cl->cbvc);
    free(cl->cbpub);
    cl->cbvc = cl->cbpub = NULL;
}

void emu__async_cluster_start(emu_cluster *cl)
{
    cl->cb_phase = cl->cb_count = 0;
    emu_asc *a0 = cl->cta[0].as;
    if (!a0 || !a0->vcm)
        return;
    uint32_t nw = a0->nw;
    memset(cl->cbvc, 0, nw * sizeof *cl->cbvc);
    memset(cl->cbpub, 0, nw * sizeof *cl->cbpub);
    /* clocks go on from the last CTAs': older stamps are below vbase, one
     * base for the whole cluster (a peer's shadow is read with it) */
    uint32_t mx = 0;
    for (uint32_t r = 0; r < cl->n; r++) {
        const emu_cta *c = &cl->cta[r];
        const emu_asc *a = c->as;
        mx = a->xclk > mx ? a->xclk : mx;
        mx = a->vbase > mx ? a->vbase : mx;
        for (uint32_t w = 0; w < c->nwarps; w++)
            for (uint32_t q = 0; q < nw; q++)
                mx = a->vc[w * nw + q] > mx ? a->vc[w * nw + q] : mx;
    }
    bool wrap = mx > 0xf0000000u; /* about to wrap: start over with a clean shadow */
    for (uint32_t r = 0; r < cl->n; r++) {
        emu_cta *c = &cl->cta[r];
        emu_asc *a = c->as;
        if (wrap)
            memset(c->sh.wep, 0, ((size_t)c->smem_size + 16) * sizeof *c->sh.wep);
        a->vbase = wrap ? 1 : mx + 1;
        a->xclk = a->vbase;
        for (uint32_t w = 0; w < c->nwarps; w++)
            for (uint32_t q = 0; q < nw; q++)
                a->vc[w * nw + q] = a->vbase + (q == a->me0 + w);
        memset(a->barvc, 0, (size_t)EMU_NBAR * nw * sizeof *a->barvc);
        memset(c->sh.rep, 0, ((size_t)c->smem_size + 16) * sizeof *c->sh.rep);
        a->nrp = 1;
        a->nfree = 0;
        a->acc_vc = NULL;
    }
}

/* ---- vector clocks ---- */

static void vjoin(uint32_t *d, const uint32_t *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        d[i] = s[i] > d[i] ? s[i] : d[i];
}

void emu__vc_arrive(emu_cta *c, uint32_t warp, uint32_t *dst)
{
    emu_asc *a = c->as;
    if (!a || !a->vcm)
        return;
    uint32_t *v = &a->vc[warp * a->nw];
    vjoin(dst, v, a->nw);
    v[a->me0 + warp]++;
}

void emu__vc_acquire(emu_cta *c, uint32_t warp, const uint32_t *src)
{
    emu_asc *a = c->as;
    if (a && a->vcm)
        vjoin(&a->vc[warp * a->nw], src, a->nw);
}

void emu__vc_bar_arrive(emu_cta *c, uint32_t warp, uint32_t id)
{
    emu_asc *a = c->as;
    if (a && a->vcm)
        emu__vc_arrive(c, warp, &a->barvc[id * a->nw]);
}

void emu__vc_bar_release(emu_cta *c, uint32_t id)
{
    emu_asc *a = c->as;
    if (!a || !a->vcm)
        return;
    uint32_t *j = &a->barvc[id * a->nw];
    for (uint32_t i = 0; i < c->nwarps; i++)
        if (c->warps[i].bar_wait[id])
            vjoin(&a->vc[i * a->nw], j, a->nw);
    memset(j, 0, a->nw * sizeof *j);
}

/* An async operation takes its issuer's clock, which then ticks (the
 * operation is a release of everything the issuer did before it). What a
 * copy writes is stamped by the async proxy (agent me0 + nwarps, a clock of its
 * own per copy), so that even the issuing warp must wait for the phase
 * before it reads; cp.async copies landing for cp.async.mbarrier.arrive
 * are the issuer's own writes. */
static void op_clock(emu_cta *c, emu_aop *op, bool proxy)
{
    emu_asc *a = c->as;
    if (!a->vcm)
        return;
    op->vc = malloc(a->nw * sizeof *op->vc);
    if (!op->vc)
        abort(); /* allocation failure is an invariant violation (base.h) */
    uint32_t *v = &a->vc[op->warp * a->nw];
    memcpy(op->vc, v, a->nw * sizeof *v);
    op->clk = v[a->me0 + op->warp];
    v[a->me0 + op->warp]++;
    if (proxy)
        op->clk = op->vc[a->me0 + c->nwarps] = ++a->xclk;
}

void emu__wake(emu_warp *w, uint32_t lanes)
{
    w->blocked &= ~lanes;
    if (!w->group) {
        emu__resched(w);
        return;
    }
    EMU_FOR_LANES(lanes, l)
    if (w->lane_pc[l] < w->next_pc)
        w->next_pc = w->lane_pc[l];
}

/* ---- generic-proxy accesses and the proxy marks ---- */

static bool any_bits(const uint8_t *p, uint64_t n, uint8_t bits)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] & bits)
            return true;
    return false;
}

void emu__async_smem(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                     uint64_t off, uint32_t n, int acc)
{
    emu_asc *a = c->as;
    if (!c->o->detect_async)
        return;
    if (a->marked && !emu__seen(c, EMU_R_ASYNC_RACE, in)) {
        bool wr = (acc & EMU_ACC_WRITE) != 0;
        if (any_bits(c->pend + off, n, wr ? EMU_PEND_DST | EMU_PEND_SRC : EMU_PEND_DST))
            emu__report(c, EMU_R_ASYNC_RACE, in, tid_of(w, lane), EMU_SP_SHARED, off, n, "%s",
                        wr ? "writes shared memory an async copy in flight writes or reads (before "
                             "the mbarrier wait or cp.async.bulk.wait_group that completes it)"
                           : "reads shared memory an async copy in flight will write (before the "
                             "mbarrier wait that completes it)");
    }
    if ((acc & EMU_ACC_WRITE) && !(acc & EMU_ACC_ASYNC)) {
        uint32_t tid = (uint32_t)tid_of(w, lane), f = a->fcnt[tid] + 1;
        for (uint32_t i = 0; i < n; i++) {
            a->wfence[off + i] = f;
            a->wft[off + i] = (uint16_t)tid;
        }
    } else if (acc & EMU_ACC_WRITE)
        memset(a->wfence + off, 0, n * sizeof *a->wfence);
}

/* The proxy rule for a peer's write (PTX ISA, memory consistency model:
 * proxy-preserved base causality order relates accesses of one non-generic
 * proxy only within one thread block; Lustig et al., "Mixed-proxy extensions
 * for the NVIDIA PTX memory consistency model", ISCA 2022, 5.4: the proxy
 * fence goes in the CTA of the non-generic access). A fence.proxy.async in
 * the writer's CTA orders that CTA's proxies, not the reader's: the byte
 * counts as fenced when a thread of c executed fence.proxy.async after the
 * write became visible to it (the write happens before the fence) and that
 * fence happens before the async read, issued by warp rw. */
static bool peer_fenced(const emu_cta *c, const emu_warp *rw, uint32_t b)
{
    const emu_asc *a = c->as;
    uint32_t f = a->wfence[b];
    if (!a->vcm || !rw)
        return a->pfc + 1 != f;
    uint32_t rank = (a->wft[b] >> 10) & 0x1f, t = a->wft[b] & 0x3ff;
    uint32_t agent = rank * (c->nwarps + 1) + t / 32, nw = a->nw;
    const uint32_t *rv = &a->vc[rw->index * nw];
    for (uint32_t q = 0; q < c->nwarps; q++) {
        const uint32_t *fv = &a->fvc[q * nw];
        if (fv[agent] >= f && fv[a->me0 + q] <= rv[a->me0 + q])
            return true;
    }
    return false;
}

/* The proxy rule for a cp.async's landing (PTX ISA, memory consistency
 * model: a non-bulk cp.async writes through the generic proxy): the issuing
 * warp's fence counts once executed after the landing (its own clock above
 * wland); another warp's once the landing's release (clock wfence of the
 * issuer) happens before its fence, which happens before the read by rw. */
static bool cp_fenced(const emu_cta *c, const emu_warp *rw, uint32_t b)
{
    const emu_asc *a = c->as;
    uint32_t f = a->wfence[b];
    if (!a->vcm || !rw)
        return a->pfc + 1 != f;
    uint32_t tw = (a->wft[b] & 0x3ff) / 32, agent = a->me0 + tw, nw = a->nw;
    const uint32_t *rv = &a->vc[rw->index * nw];
    for (uint32_t q = 0; q < c->nwarps; q++) {
        const uint32_t *fv = &a->fvc[q * nw];
        if ((q == tw ? fv[agent] > a->wland[b] : fv[agent] >= f) && fv[a->me0 + q] <= rv[a->me0 + q])
            return true;
    }
    return false;
}

void emu__async_cp_landed(emu_cta *c, emu_warp *w, uint32_t lane, uint32_t off, uint32_t n)
{
    emu_asc *a = c->as;
    if (!a || !c->o->detect_async || off + (uint64_t)n > c->smem_size)
        return;
    uint32_t f = a->pfc + 1, land = 0;
    if (a->vcm) {
        uint32_t *own = &a->vc[w->index * a->nw + a->me0 + w->index];
        f = a->acc_vc ? a->acc_clk : *own;
        land = (*own)++; /* the warp's later fences are after the landing */
    }
    uint16_t t = (uint16_t)(EMU_WFT_CPA | (uint32_t)tid_of(w, lane));
    for (uint32_t i = 0; i < n; i++) {
        a->wfence[off + i] = f;
        a->wft[off + i] = t;
        if (a->wland)
            a->wland[off + i] = land;
    }
}

int64_t emu__proxy_unfenced(const emu_cta *c, const emu_warp *rw, uint32_t off, uint32_t n,
                            int *tid, int *rank)
{
    const emu_asc *a = c->as;
    if (!a || !c->o->detect_async || off + (uint64_t)n > c->smem_size)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = a->wfence[off + i];
        uint16_t t = a->wft[off + i];
        if (!f)
            continue;
        bool unf = (t & EMU_WFT_PEER)  ? !peer_fenced(c, rw, off + i)
                   : (t & EMU_WFT_CPA) ? !cp_fenced(c, rw, off + i)
                                       : a->fcnt[t] + 1 == f;
        if (unf) {
            if (tid)
                *tid = t & 0x3ff;
            if (rank)
                *rank = (t & EMU_WFT_PEER) ? (t >> 10) & 0x1f : (t & EMU_WFT_CPA) ? -2 : -1;
            return (int64_t)(off + i);
        }
    }
    return -1;
}

void emu__async_peer_write(emu_cta *c, uint32_t off, uint32_t n, uint32_t rank, int tid,
                           uint32_t clk)
{
    emu_asc *a = c->as;
    if (!a || !c->o->detect_async || off + (uint64_t)n > c->smem_size)
        return;
    uint32_t f = a->vcm ? clk : a->pfc + 1;
    uint16_t t = (uint16_t)(EMU_WFT_PEER | rank << 10 | ((uint32_t)tid & 0x3ff));
    for (uint32_t i = 0; i < n; i++) {
        a->wfence[off + i] = f;
        a->wft[off + i] = t;
    }
}

bool emu__async_busy(const emu_cta *c, uint32_t off, uint32_t n, bool write)
{
    const emu_asc *a = c->as;
    if (!a || !a->marked || off + (uint64_t)n > c->smem_size)
        return false;
    return any_bits(c->pend + off, n, write ? EMU_PEND_DST | EMU_PEND_SRC : EMU_PEND_DST);
}

/* ---- helpers of the copy instructions ---- */

static void fatal(emu_cta *c)
{
    c->dead = true;
    __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
}

/* Is [off, off+n) inside one shared variable? */
static bool in_var(const emu_cta *c, uint64_t off, uint64_t n)
{
    for (uint32_t i = 0; i < c->k->nshvars; i++) {
        const emu_shvar *v = &c->k->shvars[i];
        uint64_t size = v->dyn ? c->rs->l.dyn_smem : v->size;
        if (off >= v->off && off + n <= v->off + size)
            return true;
    }
    return false;
}

/* Slot pair (base, offset) p of the instruction's vpool block, lane l. */
static uint64_t vaddr(const emu_cta *c, const emu_warp *w, const emu_ins *in, int p, uint32_t l)
{
    const uint32_t *v = &c->k->vpool[in->d];
    return EMU_RG(w->R, v[2 * p])[l] + EMU_RG(w->R, v[2 * p + 1])[l];
}
static uint64_t vslot(const emu_cta *c, const emu_warp *w, const emu_ins *in, int i, uint32_t l)
{
    return EMU_RG(w->R, c->k->vpool[in->d + (uint32_t)i])[l];
}
enum { V_SIZE = 6, V_MASK = 7, V_MAP = 8, V_COORD = 9 };

/* A shared address (window offset, a generic shared address, or a
 * shared::cluster address) of n bytes at `align`: its window offset in
 * *off and its CTA's rank in *rank (rank NULL: it must be this CTA's);
 * false (reported) otherwise. */
static bool smem_range(emu_cta *c, const emu_ins *in, int tid, uint64_t a, uint64_t n,
                       uint32_t align, const char *what, uint32_t *off, uint32_t *rank)
{
    if (a - EMU_SHARED_BASE < EMU_WINDOW)
        a -= EMU_SHARED_BASE;
    uint32_t r = c->rank;
    if (a >> EMU_CL_SHIFT && a < (1ull << 32)) {
        uint64_t q = (a >> EMU_CL_SHIFT) - 1;
        if (q >= c->cl->n || (!rank && q != c->rank)) {
            emu__report(c, EMU_R_CLUSTER, in, tid, EMU_SP_CLUSTER, a, (uint32_t)n,
                        q >= c->cl->n ? "%s in CTA rank %llu of a cluster of %u CTAs"
                                      : "%s in CTA rank %llu (of %u): it must be this CTA's",
                        what, (unsigned long long)q, c->cl->n);
            fatal(c);
            return false;
        }
        r = (uint32_t)q;
        a &= EMU_CL_OFF;
    }
    if (a + n > c->smem_size || a + n < a) {
        emu__report(c, EMU_R_OOB, in, tid, EMU_SP_SHARED, a, (uint32_t)n,
                    "%s outside the CTA's shared memory", what);
        fatal(c);
        return false;
    }
    if (c->o->detect_oob && !in_var(c, a, n)) {
        emu__report(c, EMU_R_OOB, in, tid, EMU_SP_SHARED, a, (uint32_t)n,
                    "%s of %llu bytes not inside one shared variable", what, (unsigned long long)n);
        fatal(c);
        return false;
    }
    if (a & (align - 1)) {
        emu__report(c, EMU_R_LAYOUT, in, tid, EMU_SP_SHARED, a, (uint32_t)n,
                    "%s not %u-byte aligned", what, align);
        fatal(c);
        return false;
    }
    *off = (uint32_t)a;
    if (rank)
        *rank = r;
    return true;
}

emu_cta *emu__cl_peer(emu_cta *c, const emu_ins *in, int tid, uint64_t a, uint64_t *off)
{
    if (!(a >> EMU_CL_SHIFT)) {
        *off = a;
        return c;
    }
    uint64_t q = (a >> EMU_CL_SHIFT) - 1;
    if (a >= (1ull << 32) || q >= c->cl->n) {
        emu__report(c, EMU_R_CLUSTER, in, tid, EMU_SP_CLUSTER, a, 0,
                    "shared::cluster address names CTA rank %llu of a cluster of %u CTAs",
                    (unsigned long long)q, c->cl->n);
        fatal(c);
        return NULL;
    }
    *off = a & EMU_CL_OFF;
    return &c->cl->cta[q];
}

/* n global bytes at g for reading (write false) or writing; NULL (reported)
 * when outside every allocation. */
static uint8_t *gmem(emu_cta *c, const emu_ins *in, int tid, uint64_t g, uint64_t n, bool write)
{
    emu_allocrec *r = emu__galloc(c->ctx, g);
    if (!r || g - r->base + n > r->size) {
        if (c->o->detect_oob)
            emu__report(c, EMU_R_OOB, in, tid, EMU_SP_GLOBAL, g, (uint32_t)n,
                        "async copy outside every global allocation");
        return NULL;
    }
    uint64_t o = g - r->base;
    if (!write && c->o->detect_uninit && !emu_bits_all(r->shadow, o, n))
        emu__report(c, EMU_R_UNINIT, in, tid, EMU_SP_GLOBAL, g, (uint32_t)n,
                    "async copy reads global memory nothing wrote");
    if (write)
        emu_bits_set(r->shadow, o, n, true);
    return r->data + o;
}

/* Reads and decodes the tensor map at generic address ga. */
static bool read_map(emu_cta *c, const emu_ins *in, int tid, uint64_t ga, emu_tmap_desc *d)
{
    uint8_t blob[EMU_TMAP_BYTES];
    if (ga - EMU_PARAM_BASE < EMU_WINDOW) {
        uint64_t o = ga - EMU_PARAM_BASE;
        if (o + EMU_TMAP_BYTES > c->k->param_bytes) {
            emu__report(c, EMU_R_BAD_TENSORMAP, in, tid, EMU_SP_PARAM, o, EMU_TMAP_BYTES,
                        "tensor map outside the kernel parameters");
            fatal(c);
            return false;
        }
        memcpy(blob, c->rs->params + o, EMU_TMAP_BYTES);
    } else if (ga - EMU_SHARED_BASE < EMU_WINDOW || ga - EMU_LOCAL_BASE < EMU_WINDOW) {
        emu__report(c, EMU_R_BAD_TENSORMAP, in, tid, -1, 0, 0,
                    "tensor map address 0x%llx is not in parameter or global memory",
                    (unsigned long long)ga);
        fatal(c);
        return false;
    } else {
        const uint8_t *p = gmem(c, in, tid, ga, EMU_TMAP_BYTES, false);
        if (!p) {
            fatal(c);
            return false;
        }
        memcpy(blob, p, EMU_TMAP_BYTES);
    }
    pt_err e;
    pt_err_clear(&e);
    if (emu_tmap_decode(blob, d, &e)) {
        emu__report(c, EMU_R_BAD_TENSORMAP, in, tid, -1, 0, 0, "%s", e.msg);
        fatal(c);
        return false;
    }
    return true;
}

/* The map and coordinates of a TMA instruction, checked. */
static bool tma_map(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l, emu_aop *op)
{
    int tid = tid_of(w, l);
    if (!read_map(c, in, tid, vslot(c, w, in, V_MAP, l), &op->map))
        return false;
    if (op->map.rank != in->n) {
        emu__report(c, EMU_R_BAD_TENSORMAP, in, tid, -1, 0, 0,
                    "a %ud TMA with a tensor map of rank %d", in->n, op->map.rank);
        fatal(c);
        return false;
    }
    pt_err e;
    pt_err_clear(&e);
    if (emu_tmap_emulable(&op->map, &e)) {
        emu__report(c, EMU_R_LAYOUT, in, tid, -1, 0, 0, "%s", e.msg);
        fatal(c);
        return false;
    }
    for (int i = 0; i < op->map.rank; i++)
        op->coord[i] = (int32_t)(uint32_t)vslot(c, w, in, V_COORD + i, l);
    return true;
}

static void mark(emu_cta *c, uint32_t off, uint32_t n, uint8_t bit, bool set)
{
    uint8_t *p = c->pend + off;
    if (set)
        for (uint32_t i = 0; i < n; i++)
            p[i] |= bit;
    else
        for (uint32_t i = 0; i < n; i++)
            p[i] &= (uint8_t)~bit;
}

static void enqueue(emu_cta *c, emu_aop *op)
{
    emu_asc *a = c->as;
    if (a->nq == a->cap_q) {
        uint32_t nc = a->cap_q ? a->cap_q * 2 : 16;
        emu_aop **q = realloc(a->q, nc * sizeof *q);
        if (!q)
            abort(); /* allocation failure is an invariant violation (base.h) */
        a->q = q;
        a->cap_q = nc;
    }
    a->q[a->nq++] = op;
}

/* ---- completion ---- */

static uint64_t ld_le(const uint8_t *p, uint32_t n)
{
    uint64_t v = 0;
    memcpy(&v, p, n);
    return v;
}

/* One reduce-store element: global g (es bytes) op= smem value v. */
static void red_elem(const emu_aop *op, uint8_t *g, uint64_t v, uint32_t es)
{
    int dt = op->map.dtype;
    uint64_t old = ld_le(g, es), nv;
    bool flt = dt == EMU_TMAP_F32 || dt == EMU_TMAP_F32_FTZ || dt == EMU_TMAP_F16 ||
               dt == EMU_TMAP_BF16 || dt == EMU_TMAP_F64;
    bool sgn = dt == EMU_TMAP_S32 || dt == EMU_TMAP_S64;
    int bits = (int)es * 8;
    for (;;) {
        if (flt) {
            emu_fmt f = dt == EMU_TMAP_F16 ? EMU_FMT_F16 : dt == EMU_TMAP_BF16 ? EMU_FMT_BF16
                        : dt == EMU_TMAP_F64 ? EMU_FMT_F64 : EMU_FMT_F32;
            if (op->redop == EMU_AOP_ADD)
                nv = num_fop(f, EMU_FOP_ADD, old, v, 0, EMU_RN, 0);
            else {
                double x = num_decode(f, old), y = num_decode(f, v);
                bool take = op->redop == EMU_AOP_MAX ? y > x : y < x;
                nv = take ? v : old;
            }
        } else {
            uint64_t m = emu_mask(bits);
            switch (op->redop) {
            case EMU_AOP_ADD: nv = (old + v) & m; break;
            case EMU_AOP_MIN:
            case EMU_AOP_MAX: {
                bool lt = sgn ? emu_sx(v, bits) < emu_sx(old, bits) : v < old;
                nv = (lt == (op->redop == EMU_AOP_MIN)) ? v : old;
                break;
            }
            case EMU_AOP_AND: nv = old & v; break;
            case EMU_AOP_OR: nv = old | v; break;
            case EMU_AOP_XOR: nv = old ^ v; break;
            case EMU_AOP_INC: nv = old >= v ? 0 : (old + 1) & m; break;
            default: nv = (old == 0 || old > v) ? v : (old - 1) & m; break;
            }
        }
        if (es == 4 && !((uintptr_t)g & 3)) {
            uint32_t o32 = (uint32_t)old;
            if (__atomic_compare_exchange_n((uint32_t *)(void *)g, &o32, (uint32_t)nv, false,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                return;
            old = o32;
        } else if (es == 8 && !((uintptr_t)g & 7)) {
            if (__atomic_compare_exchange_n((uint64_t *)(void *)g, &old, nv, false,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                return;
        } else if (es == 2 && !((uintptr_t)g & 1)) {
            uint16_t o16 = (uint16_t)old;
            if (__atomic_compare_exchange_n((uint16_t *)(void *)g, &o16, (uint16_t)nv, false,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                return;
            old = o16;
        } else {
            memcpy(g, &nv, es);
            return;
        }
    }
}

static void complete(emu_cta *c, emu_aop *op)
{
    emu_asc *a = c->as;
    const emu_ins *in = &c->k->code[op->pc];
    int tid = (int)(op->warp * 32 + op->lane);
    switch (op->kind) {
    case EMU_AS_TMA_LD:
    case EMU_AS_BULK_G2S:
    case EMU_AS_BULK_S2S: {
        /* the async proxy's write, stamped with its agent's clock */
        int ptid = a->vcm ? (int)((a->me0 + c->nwarps) * 32) : tid;
        EMU_FOR_LANES(op->dmask, r)
        {
            emu_cta *d = &c->cl->cta[r];
            emu_asc *da = d->as;
            mark(d, op->smem, op->bytes, EMU_PEND_DST, false);
            da->marked--;
            if (d->exited) {
                emu__report(c, EMU_R_DSMEM_EXITED, in, tid, -1, 0, 0,
                            "an async copy landed in CTA rank %u of the cluster after it exited (a "
                            "CTA must not exit while copies into it are in flight)",
                            r);
                continue;
            }
            memcpy(d->smem + op->smem, op->data, op->bytes);
            emu__shadow_async_write(d, op->smem, op->bytes, ptid, op->clk);
            memset(da->wfence + op->smem, 0, op->bytes * sizeof *da->wfence);
            if ((uint32_t)op->dmb[r] < da->nmb)
                emu__mbar_complete_tx(d, &da->mb[op->dmb[r]], op->bytes, op->dph[r], in, tid,
                                      op->vc);
        }
        break;
    }
    case EMU_AS_TMA_ST:
    case EMU_AS_TMA_RED: {
        mark(c, op->smem, op->bytes, EMU_PEND_SRC, false);
        a->marked--;
        uint32_t es = (uint32_t)emu_tmap_elem_bytes(op->map.dtype);
        uint64_t n = emu_tmap_box_elems(&op->map);
        for (uint64_t i = 0; i < n && !c->dead; i++) {
            uint32_t s;
            uint64_t g;
            if (!emu_tmap_box_elem(&op->map, op->coord, op->smem, i, &s, &g))
                continue; /* out of bounds: a store skips it */
            uint8_t *p = gmem(c, in, tid, g, es, true);
            if (!p)
                continue;
            if (op->kind == EMU_AS_TMA_ST)
                memcpy(p, c->smem + s, es);
            else
                red_elem(op, p, ld_le(c->smem + s, es), es);
        }
        break;
    }
    case EMU_AS_BULK_S2G: {
        mark(c, op->smem, op->bytes, EMU_PEND_SRC, false);
        a->marked--;
        uint8_t *p = gmem(c, in, tid, op->gaddr, op->bytes, true);
        if (p)
            memcpy(p, c->smem + op->smem, op->bytes);
        break;
    }
    case EMU_AS_CP_ARRIVE: {
        emu_warp *w = &c->warps[op->warp];
        /* the lane's earlier arrives trigger first (their copies land as of their own issue),
         * those after the same copies too (cpseq equal, issued before: each arrive waits for
         * every prior copy, so the first one's waiters see them as well) */
        for (bool again = true; again;) {
            again = false;
            for (uint32_t i = 0; i < a->nq; i++) {
                const emu_aop *o = a->q[i];
                if (o->kind == EMU_AS_CP_ARRIVE && o->warp == op->warp && o->lane == op->lane &&
                    ((int32_t)(o->cpseq - op->cpseq) < 0 ||
                     (o->cpseq == op->cpseq && (int32_t)(o->clk - op->clk) < 0))) {
                    complete_at(c, i);
                    again = true;
                    break;
                }
            }
        }
        a->acc_vc = op->vc; /* the copies land as of the arrive's issue */
        a->acc_clk = op->clk;
        /* the thread's cp.async issued before the arrive land first (not later ones: they are
         * stamped with the arrive's clock, which precedes whatever the thread waited on since) */
        emu__cp_wait_before(c, w, 1u << op->lane, op->cpseq);
        a->acc_vc = NULL;
        if (op->mb >= 0 && (uint32_t)op->mb < a->nmb) {
            emu_mbar *b = &a->mb[op->mb];
            if (b->pending)
                b->pending--;
            b->last_line = in->line;
            b->last_tid = tid;
            emu__mbar_complete_tx(c, b, 0, op->phase, in, tid, op->vc); /* the phase check */
        }
        break;
    }
    default: break;
    }
}

/* Completes and removes queue entry i. */
static void complete_at(emu_cta *c, uint32_t i)
{
    emu_asc *a = c->as;
    emu_aop *op = a->q[i];
    memmove(&a->q[i], &a->q[i + 1], (a->nq - i - 1) * sizeof *a->q);
    a->nq--;
    complete(c, op);
    aop_free(op);
}

bool emu__async_step(emu_cta *c, bool stuck)
{
    emu_asc *a = c->as;
    if (!a || !a->nq)
        return false;
    if (stuck) {
        complete_at(c, 0);
        return true;
    }
    if (c->o->schedule != EMU_SCHED_RANDOM)
        return false;
    bool any = false;
    for (uint32_t i = 0; i < a->nq && !c->dead;) {
        if ((rng_next(&a->rng) >> 62) == 0) { /* probability 1/4 */
            complete_at(c, i);
            any = true;
        } else
            i++;
    }
    return any;
}

void emu__async_drain(emu_cta *c)
{
    emu_asc *a = c->as;
    while (a && a->nq && !c->dead)
        complete_at(c, 0);
}

/* Issues op (filled in) from lane l: enqueued, or completed now (eager). */
static void issue(emu_cta *c, emu_aop *op)
{
    enqueue(c, op);
    if (c->o->schedule == EMU_SCHED_EAGER)
        complete_at(c, c->as->nq - 1);
}

/* The barrier of a load: at the address's window offset in every
 * destination CTA (op->dmask; a multicast names the same offset in each,
 * a single destination must be the barrier's CTA), live; each one's index
 * and phase go in op. */
static bool load_mbar(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l, emu_aop *op)
{
    uint32_t off, mr;
    int tid = tid_of(w, l);
    if (!smem_range(c, in, tid, vaddr(c, w, in, 2, l), 8, 8, "mbarrier", &off, &mr))
        return false;
    if (!(in->flags & EMU_IF_HAS_C) && op->dmask != 1u << mr) {
        emu__report(c, EMU_R_CLUSTER, in, tid, -1, 0, 0,
                    "the mbarrier is in CTA rank %u, the destination in CTA rank %u: an async "
                    "copy completes on the destination CTA's mbarrier",
                    mr, (uint32_t)__builtin_ctz(op->dmask));
        fatal(c);
        return false;
    }
    EMU_FOR_LANES(op->dmask, r)
    {
        emu_cta *d = &c->cl->cta[r];
        if (d->exited) {
            emu__report(c, EMU_R_DSMEM_EXITED, in, tid, -1, 0, 0,
                        "async copy to CTA rank %u of the cluster, which already exited", r);
            fatal(c);
            return false;
        }
        emu_mbar *b = emu__mbar_at(d, off);
        if (!b || b->state != EMU_MBS_LIVE) {
            emu__report(c, EMU_R_MBARRIER, in, tid, EMU_SP_SHARED, off, 8, "%s%s",
                        b ? "async copy completing on an invalidated mbarrier"
                          : "async copy completing on an mbarrier that was never initialised",
                        d == c ? "" : " (in a peer CTA of the cluster: initialise it and "
                                      "publish it with barrier.cluster before the copy)");
            fatal(c);
            return false;
        }
        op->dmb[r] = (int32_t)(b - d->as->mb);
        op->dph[r] = b->phase;
    }
    return true;
}

/* The destination CTAs (rank mask) of a load whose destination address is
 * a (shared::cluster) address: a multicast's mask, or the address's CTA.
 * 0: nothing to do (an empty mask) or reported. */
static uint32_t load_dests(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l,
                           uint64_t dst, uint64_t bytes, uint32_t align, const char *what,
                           emu_aop *op)
{
    int tid = tid_of(w, l);
    uint32_t dr;
    if (!smem_range(c, in, tid, dst, bytes, align, what, &op->smem, &dr))
        return 0;
    if (!(in->flags & EMU_IF_HAS_C))
        return 1u << dr;
    uint64_t mask = vslot(c, w, in, V_MASK, l) & 0xffff;
    if (mask >> c->cl->n) {
        emu__report(c, EMU_R_CLUSTER, in, tid, -1, 0, 0,
                    "multicast mask 0x%llx names CTAs outside the cluster of %u", (unsigned long long)mask,
                    c->cl->n);
        fatal(c);
        return 0;
    }
    return (uint32_t)mask;
}

/* Checks the destination of a load at issue, in every destination CTA, and
 * marks it in flight there. */
static void load_dst(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l, emu_aop *op)
{
    int tid = tid_of(w, l);
    EMU_FOR_LANES(op->dmask, r)
    {
        emu_cta *d = &c->cl->cta[r];
        if (c->o->detect_async && d->as->marked &&
            any_bits(d->pend + op->smem, op->bytes, EMU_PEND_DST | EMU_PEND_SRC))
            emu__report(c, EMU_R_ASYNC_RACE, in, tid, EMU_SP_SHARED, op->smem, op->bytes,
                        "async copy destination overlaps shared memory another async copy in "
                        "flight writes or reads");
        emu__shadow_probe_at(d, c, in, w, l, op->smem, op->bytes);
    }
    emu_asc *a = c->as;
    const uint32_t *wv = a->vcm ? &a->vc[w->index * a->nw] : NULL; /* as of the issue */
    EMU_FOR_LANES(op->dmask, r)
    {
        emu_cta *d = &c->cl->cta[r];
        if (d->wg)
            emu__wg_async_write(d, in, tid, op->smem, op->bytes, wv, a->me0 + w->index);
    }
    op_clock(c, op, true);
    EMU_FOR_LANES(op->dmask, r)
    {
        emu_cta *d = &c->cl->cta[r];
        mark(d, op->smem, op->bytes, EMU_PEND_DST, true);
        d->as->marked++;
        d->as->mb[op->dmb[r]].inflight += op->bytes;
    }
}

/* Checks the source of a store at issue (proxy fence, in-flight loads) and
 * marks it being read. */
static void store_src(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l, emu_aop *op)
{
    emu_asc *a = c->as;
    int tid = tid_of(w, l), wt = -1;
    if (c->o->detect_async) {
        if (a->marked && any_bits(c->pend + op->smem, op->bytes, EMU_PEND_DST))
            emu__report(c, EMU_R_ASYNC_RACE, in, tid, EMU_SP_SHARED, op->smem, op->bytes,
                        "async store reads shared memory an async copy in flight will write");
        int wr = -1;
        int64_t at = emu__proxy_unfenced(c, w, op->smem, op->bytes, &wt, &wr);
        if (at >= 0) {
            const unsigned *bd = c->rs->l.block;
            if (wr >= 0)
                emu__report(c, EMU_R_PROXY_FENCE, in, tid, EMU_SP_SHARED, (uint64_t)at, 1,
                            "the async proxy reads a byte thread (%u,%u,%u) of CTA rank %d wrote "
                            "through the generic proxy (.shared::cluster) with no fence.proxy.async "
                            "in this CTA after the barrier that orders that write before it",
                            (unsigned)wt % bd[0], (unsigned)wt / bd[0] % bd[1],
                            (unsigned)wt / (bd[0] * bd[1]), wr);
            else if (wr == -2)
                emu__report(c, EMU_R_PROXY_FENCE, in, tid, EMU_SP_SHARED, (uint64_t)at, 1,
                            "the async proxy reads a byte a cp.async of thread (%u,%u,%u) wrote "
                            "(the generic proxy) with no fence.proxy.async after the copy landed (by "
                            "that thread after its wait, or by a thread that waited on it)",
                            (unsigned)wt % bd[0], (unsigned)wt / bd[0] % bd[1],
                            (unsigned)wt / (bd[0] * bd[1]));
            else
                emu__report(c, EMU_R_PROXY_FENCE, in, tid, EMU_SP_SHARED, (uint64_t)at, 1,
                            "the async proxy reads a byte thread (%u,%u,%u) wrote through the generic "
                            "proxy with no fence.proxy.async by that thread since",
                            (unsigned)wt % bd[0], (unsigned)wt / bd[0] % bd[1],
                            (unsigned)wt / (bd[0] * bd[1]));
        }
    }
    /* the async proxy's read, checked and recorded as the issuer's */
    emu__mem(c, in, w, l, EMU_SP_SHARED, op->smem, op->bytes, EMU_ACC_READ | EMU_ACC_NOALIGN);
    op_clock(c, op, false);
    mark(c, op->smem, op->bytes, EMU_PEND_SRC, true);
    a->marked++;
}

static emu_aop *aop_new(const emu_warp *w, uint32_t l, uint32_t pc, uint8_t kind)
{
    emu_aop *op = calloc(1, sizeof *op);
    if (!op)
        abort(); /* allocation failure is an invariant violation (base.h) */
    op->kind = kind;
    op->warp = w->index;
    op->lane = (uint8_t)l;
    op->pc = pc;
    op->mb = -1;
    return op;
}

/* A TMA's shared tile: 128-byte aligned, and a swizzled one on its pattern's
 * boundary (8 rows of the span: 1024 B for 128B, 512 for 64B, 256 for 32B;
 * CUDA Programming Guide's TMA alignment table). Off it, hardware swizzles
 * other bytes than the kernel's layout assumes (silently wrong data). */
static uint32_t tma_smem_align(const emu_tmap_desc *m)
{
    uint32_t span = emu_tmap_swizzle_span(m->swizzle);
    return span ? 8 * span : 128;
}

static void tma_load(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t l, uint32_t pc)
{
    int tid = tid_of(w, l);
    emu_aop *op = aop_new(w, l, pc, EMU_AS_TMA_LD);
    if (!tma_map(c, w, in, l, op)) {
        aop_free(op);
        return;
    }
    uint64_t bytes = emu_tmap_box_bytes(&op->map);
    op->dmask = load_dests(c, w, in, l, vaddr(c, w, in, 0, l), bytes, tma_smem_align(&op->map),
                           "TMA destination", op);
    if (!op->dmask || c->dead || !load_mbar(c, w, in, l, op)) {
        aop_free(op);
        return;
    }
    op->bytes = (uint32_t)bytes;
    op->data = malloc(bytes ? bytes : 1);
    if (!op->data)
        abort(); /* allocation failure is an invariant violation (base.h) */
    uint32_t es = (uint32_t)emu_tmap_elem_bytes(op->map.dtype);
    uint8_t fill[8];
    emu_tmap_fill_bytes(&op->map, fill);
    uint64_t n = emu_tmap_box_elems(&op->map);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t s;
        uint64_t g;
        uint8_t *dst;
        if (emu_tmap_box_elem(&op->map, op->coord, op->smem, i, &s, &g)) {
            const uint8_t *p = gmem(c, in, tid, g, es, false);
            dst = op->data + (s - op->smem);
            if (p)
                memcpy(dst, p, es);
            else
                memset(dst, 0, es);
        } else
            memcpy(op->data + (s - op->smem), fill, es);
    }
    load_dst(c, w, in, l, op);
    issue(c, op);
}

static void tma_store(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t l, uint32_t pc,
                      uint8_t kind)
{
    int tid = tid_of(w, l);
    emu_aop *op = aop_new(w, l, pc, kind);
    op->redop = in->ty2;
    if (!tma_map(c, w, in, l, op)) {
        aop_free(op);
        return;
    }
    uint64_t bytes = emu_tmap_box_bytes(&op->map);
    if (!smem_range(c, in, tid, vaddr(c, w, in, 1, l), bytes, tma_smem_align(&op->map), "TMA source", &op->smem,
                    NULL)) {
        aop_free(op);
        return;
    }
    op->bytes = (uint32_t)bytes;
    op->group = c->as->bgroup[tid];
    store_src(c, w, in, l, op);
    issue(c, op);
}

static void bulk(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t l, uint32_t pc)
{
    int tid = tid_of(w, l);
    uint64_t size = vslot(c, w, in, V_SIZE, l) & 0xffffffffu;
    if (size % 16 || !size) {
        emu__report(c, EMU_R_INVALID, in, tid, -1, 0, 0,
                    "bulk copy size %llu is not a positive multiple of 16", (unsigned long long)size);
        fatal(c);
        return;
    }
    if (in->sub == EMU_AS_BULK_S2G) {
        emu_aop *op = aop_new(w, l, pc, EMU_AS_BULK_S2G);
        op->gaddr = vaddr(c, w, in, 0, l);
        if ((op->gaddr & 15) && c->o->detect_misaligned)
            emu__report(c, EMU_R_MISALIGNED, in, tid, EMU_SP_GLOBAL, op->gaddr, (uint32_t)size,
                        "bulk copy global address not 16-byte aligned");
        if (!smem_range(c, in, tid, vaddr(c, w, in, 1, l), size, 16, "bulk copy source", &op->smem,
                        NULL)) {
            aop_free(op);
            return;
        }
        op->bytes = (uint32_t)size;
        op->group = c->as->bgroup[tid];
        store_src(c, w, in, l, op);
        issue(c, op);
        return;
    }
    emu_aop *op = aop_new(w, l, pc, in->sub);
    op->dmask = load_dests(c, w, in, l, vaddr(c, w, in, 0, l), size, 16, "bulk copy destination", op);
    if (!op->dmask || c->dead || !load_mbar(c, w, in, l, op)) {
        aop_free(op);
        return;
    }
    op->bytes = (uint32_t)size;
    op->data = malloc(size);
    if (!op->data)
        abort(); /* allocation failure is an invariant violation (base.h) */
    uint64_t src = vaddr(c, w, in, 1, l);
    if (in->sub == EMU_AS_BULK_S2S) {
        uint32_t so;
        if (!smem_range(c, in, tid, src, size, 16, "bulk copy source", &so, NULL)) {
            aop_free(op);
            return;
        }
        memcpy(op->data, c->smem + so, size);
    } else {
        if ((src & 15) && c->o->detect_misaligned)
            emu__report(c, EMU_R_MISALIGNED, in, tid, EMU_SP_GLOBAL, src, (uint32_t)size,
                        "bulk copy global address not 16-byte aligned");
        const uint8_t *p = gmem(c, in, tid, src, size, false);
        if (p)
            memcpy(op->data, p, size);
        else
            memset(op->data, 0, size);
    }
    load_dst(c, w, in, l, op);
    issue(c, op);
}

/* cp.async.bulk.wait_group N: the thread's bulk groups but the newest N
 * complete (the .read form completes them too: legal, and simpler). */
static void bulk_wait(emu_cta *c, const emu_warp *w, uint32_t m, uint64_t keep)
{
    emu_asc *a = c->as;
    for (uint32_t i = 0; i < a->nq && !c->dead;) {
        emu_aop *op = a->q[i];
        bool store = op->kind == EMU_AS_TMA_ST || op->kind == EMU_AS_TMA_RED ||
                     op->kind == EMU_AS_BULK_S2G;
        uint32_t tid = op->warp * 32 + op->lane;
        if (store && op->warp == w->index && ((m >> op->lane) & 1) &&
            (uint64_t)op->group + keep < a->bgroup[tid])
            complete_at(c, i);
        else
            i++;
    }
}

/* ---- barrier.cluster: every non-exited thread of the cluster arrives ---- */

static void cluster_check(emu_cluster *cl)
{
    uint32_t need = 0;
    for (uint32_t r = 0; r < cl->n; r++)
        need += cl->cta[r].exited ? 0 : cl->cta[r].live_threads;
    if (!cl->cb_count || cl->cb_count < need)
        return;
    cl->cb_phase++;
    cl->cb_count = 0;
    emu_asc *a0 = cl->cta[0].as;
    if (a0->vcm) {
        memcpy(cl->cbpub, cl->cbvc, a0->nw * sizeof *cl->cbvc);
        memset(cl->cbvc, 0, a0->nw * sizeof *cl->cbvc);
    }
    for (uint32_t r = 0; r < cl->n; r++) {
        emu_cta *c = &cl->cta[r];
        for (uint32_t i = 0; i < c->nwarps; i++)
            if (c->as->cbw[i]) {
                uint32_t lanes = c->as->cbw[i];
                c->as->cbw[i] = 0;
                emu__wake(&c->warps[i], lanes);
            }
    }
}

void emu__async_exit(emu_cta *c) { cluster_check(c->cl); }

static bool cluster_bar(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    emu_asc *a = c->as;
    emu_cluster *cl = c->cl;
    if (!(in->aux & 1)) { /* arrive */
        EMU_FOR_LANES(m, l)
        {
            int tid = tid_of(w, l);
            if (a->cb_arr[tid] == cl->cb_phase + 1) {
                emu__report(c, EMU_R_INVALID, in, tid, -1, 0, 0,
                            "barrier.cluster.arrive twice in one phase (no wait between)");
                fatal(c);
                return true;
            }
            a->cb_arr[tid] = cl->cb_phase + 1;
            cl->cb_count++;
        }
        if (a->vcm && !(in->aux & 2)) /* .relaxed orders nothing */
            emu__vc_arrive(c, w->index, cl->cbvc);
        cluster_check(cl);
        return false;
    }
    uint32_t park = 0;
    EMU_FOR_LANES(m, l)
    {
        int tid = tid_of(w, l);
        uint32_t g = a->cb_arr[tid];
        if (!g) {
            emu__report(c, EMU_R_INVALID, in, tid, -1, 0, 0,
                        "barrier.cluster.wait without a barrier.cluster.arrive before it");
            fatal(c);
            return true;
        }
        if (g <= cl->cb_phase) { /* its phase completed */
            a->cb_arr[tid] = 0;
            if (a->vcm)
                emu__vc_acquire(c, w->index, cl->cbpub);
        } else
            park |= 1u << l;
    }
    if (!park)
        return false;
    EMU_FOR_LANES(w->group, l) w->lane_pc[l] = (park >> l) & 1 ? pc : pc + 1;
    w->group = 0;
    w->blocked |= park;
    a->cbw[w->index] |= park;
    emu__resched(w);
    return true;
}

/* Threads of CTA c that arrived in the current barrier.cluster phase. */
static uint32_t cb_arrived(const emu_cta *c)
{
    uint32_t n = 0;
    for (uint32_t t = 0; t < c->nthreads; t++)
        n += c->as->cb_arr[t] == c->cl->cb_phase + 1;
    return n;
}

bool emu__cluster_deadlock(emu_cta *c)
{
    emu_asc *a = c->as;
    if (!a)
        return false;
    emu_cluster *cl = c->cl;
    for (uint32_t i = 0; i < c->nwarps; i++)
        if (a->cbw[i]) {
            const emu_warp *w = &c->warps[i];
            uint32_t l = (uint32_t)__builtin_ctz(a->cbw[i]), need = 0;
            char who[160] = "";
            for (uint32_t r = 0; r < cl->n; r++) {
                const emu_cta *p = &cl->cta[r];
                uint32_t live = p->exited ? 0 : p->live_threads, got = p->exited ? 0 : cb_arrived(p);
                need += live;
                if (!who[0] && got < live && cl->n > 1)
                    snprintf(who, sizeof who,
                             "; CTA rank %u (cta %u,%u,%u) never arrives: %u of its %u live "
                             "threads did",
                             r, p->ctaid[0], p->ctaid[1], p->ctaid[2], got, live);
            }
            emu__report(c, EMU_R_DEADLOCK, &c->k->code[w->lane_pc[l]], tid_of(w, l), -1, 0, 0,
                        "barrier.cluster.wait can never complete: %u of %u live threads of the "
                        "cluster arrived%s",
                        cl->cb_count, need, who);
            return true;
        }
    return false;
}

/* ---- CTAs that exit before their peers ---- */

void emu__async_cta_exited(emu_cta *c)
{
    emu__async_drain(c);
    cluster_check(c->cl); /* its threads no longer count */
    emu_asc *a = c->as;
    if (!a->vcm || !c->xvc || !c->o->detect_race)
        return;
    /* the exit happens after every warp's last step: their clocks joined */
    uint32_t nw = a->nw, per = c->nwarps + 1;
    for (uint32_t q = 0; q < nw; q++) {
        if (q / per == c->rank || !c->xvc[q])
            continue;
        uint32_t seen = 0;
        for (uint32_t i = 0; i < c->nwarps; i++)
            seen = a->vc[i * nw + q] > seen ? a->vc[i * nw + q] : seen;
        if (c->xvc[q] <= seen)
            continue;
        emu_cta *p = &c->cl->cta[q / per];
        const emu_ins *in = &c->k->code[c->xpc[q]];
        uint32_t t = (q % per) * 32;
        emu__report(p, EMU_R_DSMEM_EXITED, in, (int)t, -1, 0, 0,
                    "accesses the shared memory of CTA rank %u (cta %u,%u,%u), which exits with "
                    "nothing ordering this access before its exit (end both with barrier.cluster)",
                    c->rank, c->ctaid[0], c->ctaid[1], c->ctaid[2]);
        return;
    }
}

bool emu__async(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    emu_asc *a = c->as;
    if (in->sub == EMU_AS_BAR_CLUSTER)
        return cluster_bar(c, w, in, m, pc);
    EMU_FOR_LANES(m, l)
    {
        if (c->dead)
            return true;
        int tid = tid_of(w, l);
        switch (in->sub) {
        case EMU_AS_TMA_LD: tma_load(c, w, in, l, pc); break;
        case EMU_AS_TMA_ST: tma_store(c, w, in, l, pc, EMU_AS_TMA_ST); break;
        case EMU_AS_TMA_RED: tma_store(c, w, in, l, pc, EMU_AS_TMA_RED); break;
        case EMU_AS_BULK_G2S:
        case EMU_AS_BULK_S2G:
        case EMU_AS_BULK_S2S: bulk(c, w, in, l, pc); break;
        case EMU_AS_COMMIT: a->bgroup[tid]++; break;
        case EMU_AS_WAIT: break;
        case EMU_AS_FENCE_PROXY:
            a->fcnt[tid]++;
            a->pfc++;
            if (a->fvc) /* its clock now: the proxy rule for peers' writes */
                memcpy(&a->fvc[w->index * a->nw], &a->vc[w->index * a->nw], a->nw * sizeof *a->fvc);
            break;
        case EMU_AS_PREFETCH_TMAP: {
            emu_tmap_desc d;
            uint64_t ga = vaddr(c, w, in, 0, l);
            read_map(c, in, tid, ga, &d);
            break;
        }
        case EMU_AS_MAPA: { /* the same offset in CTA `rank`: (rank + 1) << EMU_CL_SHIFT | off */
            uint64_t rank = EMU_RG(w->R, in->b)[l] & 0xffffffffu, x = EMU_RG(w->R, in->a)[l];
            bool gen = x - EMU_SHARED_BASE < EMU_WINDOW;
            if (rank >= c->cl->n) {
                emu__report(c, EMU_R_CLUSTER, in, tid, -1, 0, 0,
                            "mapa to CTA rank %llu of a cluster of %u CTAs", (unsigned long long)rank,
                            c->cl->n);
                fatal(c);
                return true;
            }
            uint64_t off = (gen ? x - EMU_SHARED_BASE : x) & EMU_CL_OFF;
            uint64_t v = (rank + 1) << EMU_CL_SHIFT | off;
            EMU_RG(w->R, in->d)[l] = (gen ? v + EMU_SHARED_BASE : v) & emu_mask(in->bits);
            break;
        }
        case EMU_AS_GETCTARANK: {
            uint64_t x = EMU_RG(w->R, in->a)[l];
            if (x - EMU_SHARED_BASE < EMU_WINDOW)
                x -= EMU_SHARED_BASE;
            x &= 0xffffffffu;
            EMU_RG(w->R, in->d)[l] = x >> EMU_CL_SHIFT ? (x >> EMU_CL_SHIFT) - 1 : c->rank;
            break;
        }
        default: break;
        }
    }
    if (in->sub == EMU_AS_WAIT)
        bulk_wait(c, w, m, in->aux);
    return c->dead;
}

/* cp.async.mbarrier.arrive of lane l on barrier b (mbarrier.c decodes it
 * and calls here through emu__async_cp_arrive). */
void emu__async_cp_arrive(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t l, uint32_t pc,
                          emu_mbar *b)
{
    emu_aop *op = aop_new(w, l, pc, EMU_AS_CP_ARRIVE);
    op->mb = (int32_t)(b - c->as->mb);
    op->phase = b->phase;
    op->noinc = (in->aux & EMU_MBF_NOINC) != 0;
    op->cpseq = w->cp_seq;
    w->cp_arr[l] = w->cp_seq;
    op_clock(c, op, false);
    if (!op->noinc)
        b->pending++; /* without .noinc the pending count is raised first */
    issue(c, op);
}
