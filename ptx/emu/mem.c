/* Memory: address translation for every state space, the memory detectors
 * (out of bounds, uninitialised reads, shared races, cp.async reads before
 * their wait, misalignment), loads, stores, atomics and the cp.async
 * queues.
 *
 * Shared-memory race detection: each shared byte remembers its last writer
 * and reader (thread, barrier epoch). A plain access races when another
 * warp wrote (or, for a write, read) the same byte in the same epoch, i.e.
 * with no barrier completing in between. Threads of one warp are treated as
 * ordered: converged lanes execute each instruction together, and the
 * emulator runs a warp's lanes in program order. Atomics take part in
 * neither side (they write with the CTA's first epoch, which marks the byte
 * written but never racy).
 *
 * cp.async: a copy is queued per thread at issue and carried out when a
 * wait_group/wait_all of that thread covers its group (or when the thread
 * exits). Until then its destination bytes are "pending"; a read of a
 * pending byte is reported, since on hardware it may see old data. */
#include "ptx/emu/emu_int.h"

#include <stdio.h>
#include <stdlib.h>

emu_allocrec *emu__galloc(emu_ctx *ctx, uint64_t addr)
{
    uint64_t i = (addr >> EMU_GSHIFT) - 1;
    return i < ctx->nallocs ? ctx->allocs[i] : NULL;
}

static int tid_of(const emu_warp *w, uint32_t lane) { return (int)(w->index * 32 + lane); }

static void report_mem(emu_cta *c, emu_report_kind kind, const emu_ins *in, const emu_warp *w,
                       uint32_t lane, int space, uint64_t addr, uint32_t n, const char *what)
{
    if (emu__seen(c, kind, in))
        return;
    emu__report(c, kind, in, tid_of(w, lane), space, addr, n, "%s", what);
}

/* Is [off, off+n) inside one shared variable? */
static bool in_shvar_slow(emu_cta *c, uint64_t off, uint32_t n)
{
    const emu_kernel *k = c->k;
    for (uint32_t i = 0; i < k->nshvars; i++) {
        const emu_shvar *v = &k->shvars[i];
        uint64_t size = v->dyn ? c->rs->l.dyn_smem : v->size;
        if (off >= v->off && off + n <= v->off + size) {
            c->last_var = i;
            return true;
        }
    }
    return false;
}

/* The same, trying the variable of the last access first. */
static inline bool in_shvar(emu_cta *c, uint64_t off, uint32_t n)
{
    const emu_shvar *v = &c->k->shvars[c->last_var];
    uint64_t size = v->dyn ? c->rs->l.dyn_smem : v->size;
    if (c->k->nshvars && off >= v->off && off + n <= v->off + size)
        return true;
    return in_shvar_slow(c, off, n);
}

/* Why a shared access inside the window is out of bounds. */
static const char *shvar_miss(const emu_cta *c, uint64_t off)
{
    return off < c->k->smem_base
               ? "not inside one shared variable (in the reserved region below the first array)"
               : "not inside one shared variable";
}

/* Are all n shadow bytes at p set (written)? */
static inline bool all_written(const uint8_t *p, uint32_t n)
{
    uint64_t a, b;
    const uint64_t ones = 0x0101010101010101ull;
    switch (n) {
    case 16:
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        return (a & b) == ones && a == ones;
    case 8:
        memcpy(&a, p, 8);
        return a == ones;
    case 4: {
        uint32_t w;
        memcpy(&w, p, 4);
        return w == 0x01010101u;
    }
    default: return memchr(p, 0, n) == NULL;
    }
}

/* Any cp.async pending on [off, off+n)? */
static inline bool pending(const emu_cta *c, uint64_t off, uint32_t n)
{
    if (!c->npend)
        return false;
    const uint8_t *p = c->pend + off;
    const uint64_t cp = 0x0101010101010101ull * EMU_PEND_CP;
    uint64_t a = 0, b = 0;
    if (n == 16) {
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        return ((a | b) & cp) != 0;
    }
    if (n == 8) {
        memcpy(&a, p, 8);
        return (a & cp) != 0;
    }
    for (uint32_t i = 0; i < n; i++)
        if (p[i] & EMU_PEND_CP)
            return true;
    return false;
}

static void shadow_report(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                          int space, uint64_t off, uint32_t n, int acc, bool cp, bool un, bool race)
{
    const emu_opts *o = c->o;
    uint32_t E = c->epoch;
    uint16_t wp = (uint16_t)(tid_of(w, lane) >> 5);
    if (cp && o->detect_cp_async)
        report_mem(c, EMU_R_CP_ASYNC, in, w, lane, space, off, n,
                   "reads a cp.async destination before the wait that completes it");
    if (un && o->detect_uninit && !cp)
        report_mem(c, EMU_R_UNINIT, in, w, lane, space, off, n,
                   "reads shared memory no thread wrote");
    if (!race || !o->detect_race || emu__seen(c, EMU_R_RACE, in))
        return;
    /* find the first conflicting byte and its thread (the shadow of the
     * access itself is not updated yet) */
    const emu_shadow *sh = &c->sh;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t b = off + i;
        int other = -2;
        const char *kind = "";
        if (sh->wep[b] == E && (sh->wtid[b] >> 5) != wp) {
            other = sh->wtid[b];
            kind = (acc & EMU_ACC_WRITE) ? "write after a write" : "read after a write";
        } else if ((acc & EMU_ACC_WRITE) && sh->rep[b] == E &&
                   (sh->rtid[b] == EMU_MANY || (sh->rtid[b] >> 5) != wp)) {
            other = sh->rtid[b] == EMU_MANY ? -1 : sh->rtid[b];
            kind = "write after a read";
        }
        if (other == -2)
            continue;
        const unsigned *bd = c->rs->l.block;
        if (other >= 0)
            emu__report(c, EMU_R_RACE, in, tid_of(w, lane), EMU_SP_SHARED, off, n,
                        "%s by thread (%u,%u,%u) to byte +%u with no barrier between", kind,
                        (unsigned)other % bd[0], (unsigned)other / bd[0] % bd[1],
                        (unsigned)other / (bd[0] * bd[1]), i);
        else
            emu__report(c, EMU_R_RACE, in, tid_of(w, lane), EMU_SP_SHARED, off, n,
                        "%s by several warps to byte +%u with no barrier between", kind, i);
        return;
    }
}

/* ---- vector clocks (kernels with mbarriers or async copies; emu_int.h) ---- */

static uint32_t rv_alloc(emu_asc *a)
{
    uint32_t e;
    if (a->nfree)
        e = a->rfree[--a->nfree];
    else {
        if (a->nrp >= a->cap_rp) { /* nrp starts at 1 with no pool yet */
            uint32_t nc = a->cap_rp ? a->cap_rp * 2 : 256;
            uint32_t *q = realloc(a->rpool, (size_t)nc * a->nw * sizeof *q);
            uint32_t *f = realloc(a->rfree, (size_t)nc * sizeof *f);
            if (!q || !f)
                abort(); /* allocation failure is an invariant violation (base.h) */
            a->rpool = q;
            a->rfree = f;
            a->cap_rp = nc;
        }
        e = a->nrp++;
    }
    memset(&a->rpool[(size_t)e * a->nw], 0, a->nw * sizeof *a->rpool);
    return e;
}

static void vc_race(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane, int space,
                    uint64_t off, uint32_t n, uint32_t i, const char *kind, int other)
{
    if (emu__seen(c, EMU_R_RACE, in))
        return;
    const unsigned *bd = c->rs->l.block;
    /* other: a cluster-wide agent * 32 + lane (emu_int.h), -1 several */
    uint32_t per = c->nwarps + 1, ag = other >= 0 ? (uint32_t)other >> 5 : 0;
    uint32_t rank = ag / per, local = (ag % per) * 32 + ((uint32_t)other & 31);
    char peer[48] = "";
    if (other >= 0 && rank != c->rank)
        snprintf(peer, sizeof peer, " of CTA rank %u", rank);
    if (other >= 0 && ag % per == c->nwarps)
        emu__report(c, EMU_R_RACE, in, tid_of(w, lane), space, off, n,
                    "%s by the async proxy%s (a TMA or bulk copy) to byte +%u with no mbarrier "
                    "wait on its phase ordering them",
                    kind, peer, i);
    else if (other >= 0)
        emu__report(c, EMU_R_RACE, in, tid_of(w, lane), space, off, n,
                    "%s by thread (%u,%u,%u)%s to byte +%u with no barrier or mbarrier phase "
                    "ordering them",
                    kind, local % bd[0], local / bd[0] % bd[1], local / (bd[0] * bd[1]), peer, i);
    else
        emu__report(c, EMU_R_RACE, in, tid_of(w, lane), space, off, n,
                    "%s by several warps to byte +%u with no barrier or mbarrier phase ordering "
                    "them",
                    kind, i);
}

/* The vector-clock shadow of a shared access by warp w of c to shared
 * memory of CTA o (c itself, or a peer of its cluster: DSMEM) at o's window
 * offset off; reports name space and raddr (record false: check only, as
 * for an async copy's destination at issue). */
static void shadow_vc(emu_cta *o, emu_cta *c, const emu_ins *in, const emu_warp *w,
                      uint32_t lane, uint64_t off, uint32_t n, int acc, bool record, int space,
                      uint64_t raddr)
{
    emu_asc *a = c->as, *oa = o->as;
    const uint32_t nw = a->nw, me = a->me0 + w->index, base = a->vbase;
    const uint32_t *V = a->acc_vc ? a->acc_vc : &a->vc[w->index * nw];
    const uint32_t clk = a->acc_vc ? a->acc_clk : V[me];
    const uint16_t tid = (uint16_t)(me * 32 + lane);
    uint32_t *wep = o->sh.wep + off, *rep = o->sh.rep + off;
    uint16_t *wtid = o->sh.wtid + off, *rtid = o->sh.rtid + off;
    if (o != c && c->xvc) { /* the exit check of the peer (async.c) */
        o->xvc[me] = clk;
        o->xpc[me] = (uint32_t)(in - c->k->code);
    }
    const bool race_on = c->o->detect_race && !emu__seen(c, EMU_R_RACE, in);
    if (acc & EMU_ACC_ATOMIC) { /* written, never racy */
        bool un = false;
        for (uint32_t i = 0; i < n; i++) {
            un |= wep[i] < base;
            if (wep[i] < base) {
                wep[i] = base;
                wtid[i] = tid;
            }
        }
        if (un && (acc & EMU_ACC_READ))
            shadow_report(c, in, w, lane, space, raddr, n, acc, false, true, false);
        return;
    }
    if (acc & EMU_ACC_READ) {
        bool cp = pending(o, off, n), un = false;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t wc = wep[i], wr = (uint32_t)wtid[i] >> 5;
            un |= wc < base;
            if (race_on && wc >= base && wr != me && wc > V[wr]) {
                vc_race(c, in, w, lane, space, raddr, n, i, "read after a write", wtid[i]);
                break;
            }
        }
        if (cp || un)
            shadow_report(c, in, w, lane, space, raddr, n, acc, cp, un, false);
        if (!record)
            return;
        for (uint32_t i = 0; i < n; i++) {
            if (!rep[i] || (rtid[i] != EMU_MANY && ((uint32_t)rtid[i] >> 5) == me)) {
                rep[i] = clk;
                rtid[i] = tid;
            } else if (rtid[i] != EMU_MANY) {
                uint32_t q = (uint32_t)rtid[i] >> 5;
                if (rep[i] <= V[q]) { /* the earlier read happens before this one */
                    rep[i] = clk;
                    rtid[i] = tid;
                } else {
                    uint32_t e = rv_alloc(oa);
                    oa->rpool[(size_t)e * nw + q] = rep[i];
                    oa->rpool[(size_t)e * nw + me] = clk;
                    rep[i] = e;
                    rtid[i] = EMU_MANY;
                }
            } else
                oa->rpool[(size_t)rep[i] * nw + me] = clk;
        }
        return;
    }
    bool raced = !race_on;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t wc = wep[i], wr = (uint32_t)wtid[i] >> 5;
        if (!raced && wc >= base && wr != me && wc > V[wr]) {
            vc_race(c, in, w, lane, space, raddr, n, i, "write after a write", wtid[i]);
            raced = true;
        }
        if (rep[i] && rtid[i] != EMU_MANY) {
            uint32_t q = (uint32_t)rtid[i] >> 5;
            if (!raced && q != me && rep[i] > V[q]) {
                vc_race(c, in, w, lane, space, raddr, n, i, "write after a read", rtid[i]);
                raced = true;
            }
        } else if (rep[i]) {
            const uint32_t *E = &oa->rpool[(size_t)rep[i] * nw];
            for (uint32_t q = 0; q < nw && !raced; q++)
                if (q != me && E[q] > V[q]) {
                    vc_race(c, in, w, lane, space, raddr, n, i, "write after a read", -1);
                    raced = true;
                }
        }
        if (!record)
            continue;
        if (rep[i] && rtid[i] == EMU_MANY)
            oa->rfree[oa->nfree++] = rep[i];
        rep[i] = 0;
        wep[i] = clk;
        wtid[i] = tid;
    }
}

/* The shadow of a shared access: checks (cp.async pending, unwritten,
 * race with another warp in this barrier interval), then records it.
 * Inlined with a constant n for the usual sizes so the loops vectorise. */
__attribute__((always_inline)) static inline void shadow_n(emu_cta *c, const emu_ins *in,
                                                           const emu_warp *w, uint32_t lane,
                                                           uint64_t off, const uint32_t n, int acc)
{
    const uint32_t E = c->epoch, E0 = c->epoch0;
    const uint16_t tid = (uint16_t)tid_of(w, lane), wp = (uint16_t)(tid >> 5);
    uint32_t *wep = c->sh.wep + off, *rep = c->sh.rep + off;
    uint16_t *wtid = c->sh.wtid + off, *rtid = c->sh.rtid + off;
    if (acc & EMU_ACC_ATOMIC) { /* atomics: written, never racy */
        bool un = false;
        for (uint32_t i = 0; i < n; i++) {
            un |= wep[i] < E0;
            wep[i] = wep[i] < E0 ? E0 : wep[i];
        }
        if (un && (acc & EMU_ACC_READ))
            shadow_report(c, in, w, lane, EMU_SP_SHARED, off, n, acc, false, true, false);
        return;
    }
    if (acc & EMU_ACC_READ) {
        bool cp = pending(c, off, n);
        int un = 0, race = 0;
        for (uint32_t i = 0; i < n; i++) {
            un |= wep[i] < E0;
            race |= (wep[i] == E) & ((wtid[i] >> 5) != wp);
        }
        if (cp || un || race)
            shadow_report(c, in, w, lane, EMU_SP_SHARED, off, n, acc, cp, un, race);
        for (uint32_t i = 0; i < n; i++) {
            uint16_t r = rtid[i];
            uint16_t keep = (r == EMU_MANY || (r >> 5) == wp) ? r : (uint16_t)EMU_MANY;
            rtid[i] = rep[i] == E ? keep : tid;
            rep[i] = E;
        }
        return;
    }
    int race = 0;
    for (uint32_t i = 0; i < n; i++)
        race |= ((wep[i] == E) & ((wtid[i] >> 5) != wp)) |
                ((rep[i] == E) & ((rtid[i] == EMU_MANY) | ((rtid[i] >> 5) != wp)));
    if (race)
        shadow_report(c, in, w, lane, EMU_SP_SHARED, off, n, acc, false, false, true);
    for (uint32_t i = 0; i < n; i++) {
        wep[i] = E;
        wtid[i] = tid;
    }
}

/* A cp.async may land any time between issue and wait: at issue, its
 * destination must not be in use by another warp in this barrier interval
 * (the write itself is recorded when the copy completes). */
static void cp_issue_probe(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                           uint64_t off, uint32_t n)
{
    const uint32_t E = c->epoch;
    const uint16_t wp = (uint16_t)(tid_of(w, lane) >> 5);
    const emu_shadow *sh = &c->sh;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t b = off + i;
        if ((sh->wep[b] == E && (sh->wtid[b] >> 5) != wp) ||
            (sh->rep[b] == E && (sh->rtid[b] == EMU_MANY || (sh->rtid[b] >> 5) != wp))) {
            shadow_report(c, in, w, lane, EMU_SP_SHARED, off, n, EMU_ACC_WRITE, false, false, true);
            return;
        }
    }
}

void emu__shadow_probe(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                       uint64_t off, uint32_t n)
{
    if (!c->o->detect_race || !c->shadow_sh)
        return;
    if (c->as && c->as->vcm)
        shadow_vc(c, c, in, w, lane, off, n, EMU_ACC_WRITE, false, EMU_SP_SHARED, off);
    else
        cp_issue_probe(c, in, w, lane, off, n);
}

void emu__shadow_probe_at(emu_cta *o, emu_cta *c, const emu_ins *in, const emu_warp *w,
                          uint32_t lane, uint64_t off, uint32_t n)
{
    if (o == c)
        emu__shadow_probe(c, in, w, lane, off, n);
    else if (c->o->detect_race && o->shadow_sh && c->as && c->as->vcm)
        shadow_vc(o, c, in, w, lane, off, n, EMU_ACC_WRITE, false, EMU_SP_CLUSTER,
                  (uint64_t)(o->rank + 1) << EMU_CL_SHIFT | off);
}

void emu__shadow_async_write(emu_cta *c, uint32_t off, uint32_t n, int tid, uint32_t clk)
{
    if (!c->shadow_sh)
        return;
    emu_asc *a = c->as;
    bool vc = a && a->vcm;
    const uint32_t E = vc ? clk : c->epoch;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = off + i;
        if (vc) {
            if (c->sh.rep[b] && c->sh.rtid[b] == EMU_MANY)
                a->rfree[a->nfree++] = c->sh.rep[b];
            c->sh.rep[b] = 0;
        }
        c->sh.wep[b] = E;
        c->sh.wtid[b] = (uint16_t)tid;
    }
}

static void shared_shadow(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                          uint64_t off, uint32_t n, int acc)
{
    if (c->as && c->as->vcm) {
        shadow_vc(c, c, in, w, lane, off, n, acc, true, EMU_SP_SHARED, off);
        return;
    }
    switch (n) {
    case 16: shadow_n(c, in, w, lane, off, 16, acc); break;
    case 8: shadow_n(c, in, w, lane, off, 8, acc); break;
    case 4: shadow_n(c, in, w, lane, off, 4, acc); break;
    default: shadow_n(c, in, w, lane, off, n, acc); break;
    }
}

/* Distributed shared memory: an access of c to shared::cluster address
 * addr (a peer's window, or its own). The peer's shadow is checked with
 * c's vector clocks (the race detector), the peer's in-flight async copies,
 * and whether the peer already exited. */
static uint8_t *dsmem(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                      uint64_t addr, uint32_t n, int acc)
{
    const emu_opts *o = c->o;
    int tid = tid_of(w, lane);
    uint64_t off;
    emu_cta *p = emu__cl_peer(c, in, tid, addr, &off);
    if (!p)
        return NULL;
    if (p == c)
        return emu__mem(c, in, w, lane, EMU_SP_SHARED, off, n, acc);
    if (p->exited) {
        if (!emu__seen(c, EMU_R_DSMEM_EXITED, in))
            emu__report(c, EMU_R_DSMEM_EXITED, in, tid, EMU_SP_CLUSTER, addr, n,
                        "CTA rank %u (cta %u,%u,%u) already exited: its shared memory is gone (a "
                        "CTA must not exit while peers may access it; end with barrier.cluster)",
                        p->rank, p->ctaid[0], p->ctaid[1], p->ctaid[2]);
        return NULL;
    }
    if (off + n > p->smem_size || (o->detect_oob && !in_shvar(p, off, n))) {
        if (o->detect_oob && !emu__seen(c, EMU_R_OOB, in))
            emu__report(c, EMU_R_OOB, in, tid, EMU_SP_CLUSTER, addr, n,
                        "%s of CTA rank %u", off + n > p->smem_size
                                                 ? "outside the shared memory window"
                                                 : "not inside one shared variable",
                        p->rank);
        if (off + n > p->smem_size)
            return NULL;
    }
    if (p->shadow_sh) {
        if (c->as && c->as->vcm && p->as)
            shadow_vc(p, c, in, w, lane, off, n, acc, true, EMU_SP_CLUSTER, addr);
        else { /* epochs are per CTA: only "written" carries over */
            bool un = false;
            for (uint32_t i = 0; i < n; i++) {
                un |= p->sh.wep[off + i] < p->epoch0;
                if ((acc & EMU_ACC_WRITE) && p->sh.wep[off + i] < p->epoch0)
                    p->sh.wep[off + i] = p->epoch0;
            }
            if (un && (acc & EMU_ACC_READ) && o->detect_uninit)
                report_mem(c, EMU_R_UNINIT, in, w, lane, EMU_SP_CLUSTER, addr, n,
                           "reads shared memory of a peer CTA no thread wrote");
        }
    }
    if (p->as && o->detect_async && p->as->marked && !emu__seen(c, EMU_R_ASYNC_RACE, in)) {
        uint8_t bits = (acc & EMU_ACC_WRITE) ? EMU_PEND_DST | EMU_PEND_SRC : EMU_PEND_DST;
        for (uint32_t i = 0; i < n; i++)
            if (p->pend[off + i] & bits) {
                emu__report(c, EMU_R_ASYNC_RACE, in, tid, EMU_SP_CLUSTER, addr, n,
                            "accesses a peer CTA's shared memory an async copy in flight writes "
                            "or reads");
                break;
            }
    }
    if (p->wg && (acc & EMU_ACC_WRITE)) /* the peer's in-flight wgmma footprints */
        emu__wg_peer_write(p, c, in, tid, off, n, addr);
    if (p->as && (acc & EMU_ACC_WRITE) && !(acc & EMU_ACC_ASYNC)) { /* the proxy rule's marks */
        const emu_asc *a = c->as;
        uint32_t clk = a && a->vcm ? a->vc[w->index * a->nw + a->me0 + w->index] : 0;
        emu__async_peer_write(p, (uint32_t)off, n, c->rank, tid, clk);
    }
    return p->smem + off;
}

uint8_t *emu__mem(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane, int space,
                  uint64_t addr, uint32_t n, int acc)
{
    const emu_opts *o = c->o;
    bool gen = false;
    if (space == EMU_SP_GENERIC) {
        if (addr - EMU_SHARED_BASE < EMU_WINDOW) {
            space = EMU_SP_SHARED;
            gen = true;
            addr -= EMU_SHARED_BASE;
        } else if (addr - EMU_LOCAL_BASE < EMU_WINDOW) {
            space = EMU_SP_LOCAL;
            addr -= EMU_LOCAL_BASE;
        } else if (addr - EMU_PARAM_BASE < EMU_WINDOW) {
            space = EMU_SP_PARAM;
            addr -= EMU_PARAM_BASE;
        } else
            space = EMU_SP_GLOBAL;
    }
    if ((addr & (n - 1)) && o->detect_misaligned && !(acc & EMU_ACC_NOALIGN) && !emu__seen(c, EMU_R_MISALIGNED, in)) {
        char msg[64];
        snprintf(msg, sizeof msg, "%u-byte access not aligned to %u", n, n);
        report_mem(c, EMU_R_MISALIGNED, in, w, lane, space, addr, n, msg);
    }
    switch (space) {
    case EMU_SP_CLUSTER:
        if (addr >> EMU_CL_SHIFT)
            return dsmem(c, in, w, lane, addr, n, acc);
        __attribute__((fallthrough));
    case EMU_SP_SHARED:
        if (addr + n > c->smem_size || addr + n < addr) {
            if (gen && addr >> EMU_CL_SHIFT) /* a generic address of a peer's window */
                return dsmem(c, in, w, lane, addr, n, acc);
            if (o->detect_oob)
                report_mem(c, EMU_R_OOB, in, w, lane, space, addr, n,
                           "outside the CTA's shared memory");
            return NULL;
        }
        if (o->detect_oob && !in_shvar(c, addr, n))
            report_mem(c, EMU_R_OOB, in, w, lane, space, addr, n, shvar_miss(c, addr));
        if (c->shadow_sh)
            shared_shadow(c, in, w, lane, addr, n, acc);
        if (c->as) /* in-flight async copies, proxy marks */
            emu__async_smem(c, in, w, lane, addr, n, acc);
        if (c->wg && (acc & EMU_ACC_WRITE)) /* wgmma footprints, proxy marks */
            emu__wg_smem_write(c, in, w, lane, addr, n);
        return c->smem + addr;
    case EMU_SP_PARAM:
        if (addr + n > c->rs->k->param_bytes || addr + n < addr || (acc & EMU_ACC_WRITE)) {
            if (o->detect_oob)
                report_mem(c, EMU_R_OOB, in, w, lane, space, addr, n,
                           (acc & EMU_ACC_WRITE) ? "writes kernel parameters" : "outside the parameters");
            return NULL;
        }
        return c->rs->params + addr;
    case EMU_SP_LOCAL: {
        uint32_t lb = c->k->local_bytes;
        if (addr + n > lb || addr + n < addr) {
            if (o->detect_oob)
                report_mem(c, EMU_R_OOB, in, w, lane, space, addr, n, "outside the thread's local memory");
            return NULL;
        }
        size_t base = (size_t)tid_of(w, lane) * lb + addr;
        if ((acc & EMU_ACC_READ) && o->detect_uninit && !all_written(c->local_w + base, n))
            report_mem(c, EMU_R_UNINIT, in, w, lane, space, addr, n, "reads local memory never written");
        if (acc & EMU_ACC_WRITE)
            memset(c->local_w + base, 1, n);
        return c->local + base;
    }
    default: {
        emu_allocrec *a = emu__galloc(c->ctx, addr);
        if (!a || addr - a->base + n > a->size) {
            if (o->detect_oob)
                report_mem(c, EMU_R_OOB, in, w, lane, EMU_SP_GLOBAL, addr, n,
                           "outside every global allocation");
            return NULL;
        }
        uint64_t off = addr - a->base;
        if ((acc & EMU_ACC_READ) && o->detect_uninit && !emu_bits_all(a->shadow, off, n))
            report_mem(c, EMU_R_UNINIT, in, w, lane, EMU_SP_GLOBAL, addr, n,
                       "reads global memory nothing wrote");
        if (acc & EMU_ACC_WRITE)
            emu_bits_set(a->shadow, off, n, true);
        return a->data + off;
    }
    }
}

/* ---- bank conflicts ---- */

/* Wavefronts of one phase: the lanes of m (within one phase) access units
 * unit[l] of `ub` bytes (4, 8 or 16, aligned), which cover ub / 4
 * consecutive banks: units u and v use the same banks iff u and v agree
 * modulo ngroups = 128 / ub. Same units are shared (broadcast); each bank
 * group serves one distinct unit per wavefront. */
static uint32_t phase_wavefronts(const uint32_t *unit, uint32_t m, uint32_t ngroups)
{
    uint32_t cnt[32], list[32][32], worst = 0, used = 0;
    EMU_FOR_LANES(m, l)
    {
        uint32_t u = unit[l], g = u & (ngroups - 1), i = 0;
        if (!((used >> g) & 1)) { /* the first unit of this group */
            used |= 1u << g;
            cnt[g] = 1;
            list[g][0] = u;
            worst = worst ? worst : 1;
            continue;
        }
        while (i < cnt[g] && list[g][i] != u)
            i++;
        if (i < cnt[g])
            continue; /* shared with another lane */
        list[g][cnt[g]++] = u;
        if (cnt[g] > worst)
            worst = cnt[g];
    }
    return worst;
}

void emu__banks(emu_cta *c, const emu_ins *in, emu_bank_class cls, const uint32_t *off,
                uint32_t m, uint32_t bytes)
{
    if (!m)
        return;
    /* units of the access size when every lane is aligned to it; words
     * (one per lane: its first) otherwise */
    uint32_t ub = bytes >= 16 ? 16 : bytes >= 8 ? 8 : 4, any = 0;
    EMU_FOR_LANES(m, l) any |= off[l];
    if (ub > 4 && (any & (ub - 1)))
        ub = 4;
    uint32_t sh = ub == 16 ? 4 : ub == 8 ? 3 : 2, unit[EMU_LANES];
    EMU_FOR_LANES(m, l) unit[l] = off[l] >> sh;
    /* phases of 128 bytes: the whole warp up to 4 bytes a lane, half-warps
     * for 8, quarter warps for 16 */
    uint32_t per = bytes <= 4 ? 32 : bytes >= 16 ? 8 : 16;
    uint32_t pm = per == 32 ? EMU_FULL : (1u << per) - 1;
    uint64_t wf = 0, ideal = 0;
    for (uint32_t p = 0; p < 32; p += per) {
        uint32_t sub = m & (pm << p);
        if (!sub)
            continue;
        wf += phase_wavefronts(unit, sub, 128 / ub);
        ideal++;
    }
    c->bank[cls][0]++;
    c->bank[cls][1] += wf;
    c->bank[cls][2] += ideal;
    if (wf > ideal)
        c->bank_pc[in - c->k->code] += wf - ideal;
}

/* Window offsets of the lanes of m whose address is in shared memory
 * (shared space, or a generic address in the window); returns those lanes. */
static uint32_t shared_offsets(const emu_ins *in, const uint64_t *A, uint32_t m, uint32_t *off)
{
    uint32_t sm = 0;
    EMU_FOR_LANES(m, l)
    {
        uint64_t a = A[l] + (uint64_t)in->off;
        if (in->sub == EMU_SP_GENERIC) {
            if (a - EMU_SHARED_BASE >= EMU_WINDOW)
                continue;
            a -= EMU_SHARED_BASE;
        }
        off[l] = (uint32_t)a;
        sm |= 1u << l;
    }
    return sm;
}

void emu__ld(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *A = EMU_RG(R, in->a);
    const uint32_t *dv = &c->k->vpool[in->d];
    uint32_t sz = in->sz, total = sz * in->n;
    bool sgn = (in->flags & EMU_IF_SIGNED) != 0;
    uint64_t dm = emu_mask(in->dbits);
    if (in->sub == EMU_SP_SHARED || in->sub == EMU_SP_GENERIC) {
        uint32_t off[EMU_LANES] = {0};
        emu__banks(c, in, EMU_BANK_LD, off, shared_offsets(in, A, m, off), total);
    }
    EMU_FOR_LANES(m, l)
    {
        const uint8_t *p = emu__mem(c, in, w, l, in->sub, A[l] + (uint64_t)in->off, total, EMU_ACC_READ);
        for (uint32_t i = 0; i < in->n; i++) {
            uint64_t v = 0;
            if (p)
                memcpy(&v, p + i * sz, sz);
            if (sgn)
                v = (uint64_t)emu_sx(v, (int)sz * 8);
            EMU_RG(R, dv[i])[l] = v & dm;
        }
    }
}

void emu__st(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *A = EMU_RG(R, in->a);
    const uint32_t *sv = &c->k->vpool[in->b];
    uint32_t sz = in->sz, total = sz * in->n;
    if (in->sub == EMU_SP_SHARED || in->sub == EMU_SP_GENERIC) {
        uint32_t off[EMU_LANES] = {0};
        emu__banks(c, in, EMU_BANK_ST, off, shared_offsets(in, A, m, off), total);
    }
    EMU_FOR_LANES(m, l)
    {
        uint8_t *p = emu__mem(c, in, w, l, in->sub, A[l] + (uint64_t)in->off, total, EMU_ACC_WRITE);
        if (!p)
            continue;
        for (uint32_t i = 0; i < in->n; i++) {
            uint64_t v = EMU_RG(R, sv[i])[l];
            memcpy(p + i * sz, &v, sz);
        }
    }
}

/* ---- atomics ---- */

static uint64_t aop(const emu_ins *in, uint64_t old, uint64_t b, uint64_t cv, bool global)
{
    int t = in->ty, bits = in->bits;
    uint64_t m = emu_mask(bits);
    bool sgn = (in->flags & EMU_IF_SIGNED) != 0;
    switch (in->sub2) {
    case EMU_AOP_ADD:
        switch (t) {
        case PTX_T_F32: {
            /* global f32 atomic add flushes subnormals; shared keeps them */
            unsigned nf = global ? EMU_NF_FTZ : 0;
            return num_fop(EMU_FMT_F32, EMU_FOP_ADD, old, b, 0, EMU_RN, nf);
        }
        case PTX_T_F64: return num_f64_bits(num_f64(old) + num_f64(b));
        case PTX_T_F16: return num_fop(EMU_FMT_F16, EMU_FOP_ADD, old, b, 0, EMU_RN, 0);
        case PTX_T_BF16: return num_fop(EMU_FMT_BF16, EMU_FOP_ADD, old, b, 0, EMU_RN, 0);
        case PTX_T_F16X2:
        case PTX_T_BF16X2: {
            emu_fmt f = t == PTX_T_F16X2 ? EMU_FMT_F16 : EMU_FMT_BF16;
            uint64_t lo = num_fop(f, EMU_FOP_ADD, old & 0xffff, b & 0xffff, 0, EMU_RN, 0);
            uint64_t hi = num_fop(f, EMU_FOP_ADD, (old >> 16) & 0xffff, (b >> 16) & 0xffff, 0, EMU_RN, 0);
            return hi << 16 | lo;
        }
        default: return (old + b) & m;
        }
    case EMU_AOP_MIN:
    case EMU_AOP_MAX: {
        bool mx = in->sub2 == EMU_AOP_MAX;
        if (t == PTX_T_F16 || t == PTX_T_BF16 || t == PTX_T_F16X2 || t == PTX_T_BF16X2 ||
            t == PTX_T_F32 || t == PTX_T_F64) {
            emu_ins mm = *in;
            mm.sub = mx;
            mm.flags = 0;
            return emu__fminmax(&mm, old, b);
        }
        bool lt = sgn ? emu_sx(old, bits) < emu_sx(b, bits) : old < b;
        return (lt != mx) ? old : b;
    }
    case EMU_AOP_AND: return old & b;
    case EMU_AOP_OR: return old | b;
    case EMU_AOP_XOR: return old ^ b;
    case EMU_AOP_CAS: return old == b ? cv : old;
    case EMU_AOP_EXCH: return b;
    case EMU_AOP_INC: return old >= b ? 0 : (old + 1) & m;
    default: return (old == 0 || old > b) ? b : (old - 1) & m; /* DEC */
    }
}

/* Read-modify-write of 2/4/8 bytes at p; a compare-exchange loop keeps it
 * atomic across the worker threads that share global memory. */
static uint64_t rmw(const emu_ins *in, uint8_t *p, uint64_t b, uint64_t cv, bool global)
{
    uint32_t sz = in->sz;
    bool aligned = ((uintptr_t)p & (sz - 1)) == 0;
    if (!aligned || !global) {
        uint64_t old = 0;
        memcpy(&old, p, sz);
        uint64_t nv = aop(in, old, b, cv, global);
        memcpy(p, &nv, sz);
        return old;
    }
    if (sz == 2) {
        uint16_t *q = (uint16_t *)(void *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nv;
        do
            nv = (uint16_t)aop(in, old, b, cv, global);
        while (!__atomic_compare_exchange_n(q, &old, nv, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        return old;
    }
    if (sz == 4) {
        uint32_t *q = (uint32_t *)(void *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nv;
        do
            nv = (uint32_t)aop(in, old, b, cv, global);
        while (!__atomic_compare_exchange_n(q, &old, nv, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        return old;
    }
    uint64_t *q = (uint64_t *)(void *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nv;
    do
        nv = aop(in, old, b, cv, global);
    while (!__atomic_compare_exchange_n(q, &old, nv, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

void emu__atom(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R, *D = EMU_RG(R, in->d);
    const uint64_t *A = EMU_RG(R, in->a), *B = EMU_RG(R, in->b), *C = EMU_RG(R, in->c);
    EMU_FOR_LANES(m, l)
    {
        uint64_t addr = A[l] + (uint64_t)in->off;
        int sp = in->sub;
        if (sp == EMU_SP_GENERIC)
            sp = addr - EMU_SHARED_BASE < EMU_WINDOW ? EMU_SP_SHARED : EMU_SP_GLOBAL;
        uint8_t *p = emu__mem(c, in, w, l, in->sub, addr, in->sz,
                              EMU_ACC_READ | EMU_ACC_WRITE | EMU_ACC_ATOMIC);
        D[l] = p ? rmw(in, p, B[l], C[l], sp != EMU_SP_SHARED && sp != EMU_SP_CLUSTER) : 0;
    }
}

/* ---- cp.async ---- */

/* Copies n (4, 8 or 16) bytes with fixed-size moves: a variable-length
 * memcpy here compiles to a slow rep movs. */
static inline void copy_small(uint8_t *d, const uint8_t *s, uint32_t n)
{
    if (n == 16)
        memcpy(d, s, 16);
    else if (n == 8)
        memcpy(d, s, 8);
    else if (n == 4)
        memcpy(d, s, 4);
    else
        for (uint32_t i = 0; i < n; i++)
            d[i] = s[i];
}

/* Sets n (4, 8 or 16) pending flags: a pending flag per byte, set at issue
 * and cleared at completion (two copies pending on one byte at once are a
 * bug of their own; the first completion clears it). */
static inline void fill_small(uint8_t *d, uint8_t v, uint32_t n)
{
    if (n == 16)
        memset(d, v, 16);
    else if (n == 8)
        memset(d, v, 8);
    else
        memset(d, v, 4);
}

void emu__cp_async(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    uint64_t *R = w->R;
    const uint64_t *A = EMU_RG(R, in->a), *B = EMU_RG(R, in->b), *C = EMU_RG(R, in->c);
    uint32_t boff[EMU_LANES] = {0};
    EMU_FOR_LANES(m, l)
    {
        uint64_t dst = A[l] + (uint64_t)in->off;
        boff[l] = (uint32_t)(dst - EMU_SHARED_BASE < EMU_WINDOW ? dst - EMU_SHARED_BASE : dst);
    }
    emu__banks(c, in, EMU_BANK_CP_ASYNC, boff, m, in->sz);
    EMU_FOR_LANES(m, l)
    {
        uint64_t dst = A[l] + (uint64_t)in->off, src = B[l] + in->aux;
        if (dst - EMU_SHARED_BASE < EMU_WINDOW) /* a generic shared address */
            dst -= EMU_SHARED_BASE;
        uint32_t srcsize = in->sz;
        if (in->flags & EMU_IF_IGNSRC)
            srcsize = ((C[l] != 0) != (in->cneg != 0)) ? 0 : in->sz;
        else if (in->flags & EMU_IF_HAS_C) {
            uint64_t s = C[l] & 0xffffffffu;
            if (s > in->sz) {
                if (!emu__seen(c, EMU_R_INVALID, in))
                    emu__report(c, EMU_R_INVALID, in, tid_of(w, l), -1, 0, 0,
                                "cp.async src-size %llu exceeds cp-size %u", (unsigned long long)s,
                                in->sz);
                s = in->sz;
            }
            srcsize = (uint32_t)s;
        }
        if (c->o->detect_misaligned && ((dst | (srcsize ? src : 0)) & (in->sz - 1)) &&
            !emu__seen(c, EMU_R_MISALIGNED, in))
            report_mem(c, EMU_R_MISALIGNED, in, w, l, (dst & (in->sz - 1)) ? EMU_SP_SHARED : EMU_SP_GLOBAL,
                       (dst & (in->sz - 1)) ? dst : src, in->sz, "cp.async address not aligned to its size");
        if (dst + in->sz > c->smem_size || (c->o->detect_oob && !in_shvar(c, dst, in->sz))) {
            if (c->o->detect_oob)
                report_mem(c, EMU_R_OOB, in, w, l, EMU_SP_SHARED, dst, in->sz,
                           dst + in->sz > c->smem_size
                               ? "cp.async destination outside the CTA's shared memory"
                               : dst < c->k->smem_base
                                     ? "cp.async destination not inside one shared variable "
                                       "(in the reserved region below the first array)"
                                     : "cp.async destination not inside one shared variable");
            if (dst + in->sz > c->smem_size)
                continue;
        }
        if (w->ncp == w->cap_cp) {
            size_t nc = w->cap_cp ? w->cap_cp * 2 : 64;
            emu_cp *q = realloc(w->cp, nc * sizeof *q);
            if (!q)
                abort();
            w->cp = q;
            w->cap_cp = nc;
        }
        w->cp[w->ncp++] = (emu_cp){src, (uint32_t)dst, w->cp_group[l], pc, w->cp_seq++, (uint8_t)l, in->sz,
                                   (uint8_t)srcsize};
        if (c->o->detect_cp_async)
            fill_small(c->pend + dst, 1, in->sz);
        if (c->o->detect_race)
            emu__shadow_probe(c, in, w, l, dst, in->sz);
        c->npend++;
    }
}

static void cp_complete(emu_cta *c, emu_warp *w, const emu_cp *e)
{
    const emu_ins *ci = &c->k->code[e->pc];
    uint8_t buf[16] = {0};
    if (c->o->detect_cp_async)
        fill_small(c->pend + e->dst, 0, e->size);
    c->npend--;
    if (e->srcsize) {
        /* alignment was checked at issue */
        const uint8_t *p = emu__mem(c, ci, w, e->lane, EMU_SP_GENERIC, e->src, e->srcsize,
                                    EMU_ACC_READ | EMU_ACC_NOALIGN);
        if (p)
            copy_small(buf, p, e->srcsize);
    }
    uint8_t *q = emu__mem(c, ci, w, e->lane, EMU_SP_SHARED, e->dst, e->size,
                          EMU_ACC_WRITE | EMU_ACC_NOALIGN | EMU_ACC_ASYNC);
    if (q)
        copy_small(q, buf, e->size);
    if (q && c->as) /* landed in the generic proxy: the proxy rule's mark */
        emu__async_cp_landed(c, w, e->lane, e->dst, e->size);
}

void emu__cp_wait_before(emu_cta *c, emu_warp *w, uint32_t m, uint32_t seq)
{
    size_t j = 0;
    for (size_t i = 0; i < w->ncp; i++) {
        emu_cp e = w->cp[i];
        if (((m >> e.lane) & 1) && (int32_t)(e.seq - seq) < 0)
            cp_complete(c, w, &e);
        else
            w->cp[j++] = e;
    }
    w->ncp = j;
}

void emu__cp_exit(emu_cta *c, emu_warp *w, uint32_t m)
{
    size_t j = 0;
    for (size_t i = 0; i < w->ncp; i++) {
        emu_cp e = w->cp[i];
        if (((m >> e.lane) & 1) && (int32_t)(e.seq - w->cp_arr[e.lane]) >= 0)
            cp_complete(c, w, &e);
        else
            w->cp[j++] = e;
    }
    w->ncp = j;
}

void emu__cp_wait(emu_cta *c, emu_warp *w, uint32_t m, int keep)
{
    size_t j = 0;
    for (size_t i = 0; i < w->ncp; i++) {
        emu_cp e = w->cp[i];
        bool mine = (m >> e.lane) & 1;
        if (mine && (keep < 0 || (uint64_t)e.group + (uint64_t)keep < w->cp_group[e.lane]))
            cp_complete(c, w, &e);
        else
            w->cp[j++] = e;
    }
    w->ncp = j;
}
