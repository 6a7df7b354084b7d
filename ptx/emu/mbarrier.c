/* mbarrier objects (sm90 ref 5.1): init / inval / arrive (with a count,
 * arrive_drop, arrive.expect_tx) / expect_tx / complete_tx / try_wait and
 * test_wait (parity and token forms) / pending_count, and
 * cp.async.mbarrier.arrive (queued on the async engine). See emu_int.h for
 * the model: a failing try_wait parks its lanes until a phase of the barrier
 * completes; nothing spins.
 *
 * A phase completes when its pending arrivals reach 0 and its tx count is
 * 0. The tx count may go negative while arrivals are missing (a TMA may land
 * before the arrive.expect_tx that announces it, as in DeepGEMM); with every
 * arrival in, a negative count is reported (more bytes completed than were
 * expected: expect-tx), and so is a phase that completes while bytes of
 * async copies issued in it are still in flight (expect_tx too small). Too
 * large an expect_tx leaves the phase incomplete: the deadlock report shows
 * the missing bytes.
 *
 * The race detector (mem.c) orders these kernels' accesses by vector clocks
 * (emu_int.h): an arrival, or an async copy landing, happens before the
 * waits that observe the phase it completes. */
#include "ptx/emu/emu_int.h"

#include <stdio.h>
#include <stdlib.h>

static int tid_of(const emu_warp *w, uint32_t lane) { return (int)(w->index * 32 + lane); }

static void fatal(emu_cta *c)
{
    c->dead = true;
    __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
}

emu_mbar *emu__mbar_at(emu_cta *c, uint32_t off)
{
    emu_asc *a = c->as;
    if (!a || off + 8 > c->smem_size)
        return NULL;
    uint16_t i = a->mbix[off >> 3];
    return i ? &a->mb[i - 1] : NULL;
}

static emu_mbar *mb_new(emu_cta *c, uint32_t off)
{
    emu_asc *a = c->as;
    if (a->nmb == a->cap_mb) {
        uint32_t nc = a->cap_mb ? a->cap_mb * 2 : 16;
        if (nc > 65535)
            return NULL;
        emu_mbar *q = realloc(a->mb, nc * sizeof *q);
        if (!q)
            abort(); /* allocation failure is an invariant violation (base.h) */
        a->mb = q;
        a->cap_mb = nc;
    }
    if (a->vcm) { /* the phase clocks: 3 x nw per barrier, grown with the table */
        uint32_t *q = realloc(a->mbvc, (size_t)a->cap_mb * 3 * a->nw * sizeof *q);
        if (!q)
            abort(); /* allocation failure is an invariant violation (base.h) */
        a->mbvc = q;
        memset(&a->mbvc[(size_t)a->nmb * 3 * a->nw], 0, 3 * a->nw * sizeof *q);
    }
    emu_mbar *b = &a->mb[a->nmb++];
    memset(b, 0, sizeof *b);
    b->off = off;
    a->mbix[off >> 3] = (uint16_t)a->nmb;
    return b;
}

/* The CTA (c, or a peer of its cluster for a shared::cluster address) and
 * window offset of lane l's barrier address; NULL (reported) when it is
 * not an 8-aligned barrier inside shared memory of a live CTA. */
static emu_cta *mb_addr(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l,
                        uint32_t *off)
{
    uint64_t a = EMU_RG(w->R, in->a)[l] + (uint64_t)in->off;
    int tid = tid_of(w, l);
    if (a - EMU_SHARED_BASE < EMU_WINDOW)
        a -= EMU_SHARED_BASE;
    else if (in->sub2 == EMU_SP_GENERIC) {
        emu__report(c, EMU_R_OOB, in, tid, EMU_SP_GENERIC, a, 8,
                    "mbarrier address is not in shared memory");
        fatal(c);
        return NULL;
    }
    emu_cta *p = c;
    if (a >> EMU_CL_SHIFT && a < (1ull << 32)) { /* a shared::cluster address (mapa) */
        uint64_t o;
        if (!(p = emu__cl_peer(c, in, tid, a, &o)))
            return NULL;
        a = o;
        if (p->exited) {
            emu__report(c, EMU_R_DSMEM_EXITED, in, tid, EMU_SP_CLUSTER,
                        (uint64_t)(p->rank + 1) << EMU_CL_SHIFT | a, 8,
                        "mbarrier of CTA rank %u of the cluster, which already exited (a CTA must "
                        "not exit while peers may still arrive on its barriers)",
                        p->rank);
            fatal(c);
            return NULL;
        }
    }
    if (a + 8 > c->smem_size) {
        emu__report(c, EMU_R_OOB, in, tid, EMU_SP_SHARED, a, 8,
                    "mbarrier outside the CTA's shared memory");
        fatal(c);
        return NULL;
    }
    if (a & 7) {
        emu__report(c, EMU_R_MISALIGNED, in, tid, EMU_SP_SHARED, a, 8,
                    "mbarrier address not 8-byte aligned");
        fatal(c);
        return NULL;
    }
    *off = (uint32_t)a;
    return p;
}

/* The live barrier at lane l's address (in *owner's table: c, or a peer
 * when remote is true, else a peer's is reported); NULL (reported)
 * otherwise. */
static emu_mbar *mb_live(emu_cta *c, const emu_warp *w, const emu_ins *in, uint32_t l,
                         bool remote, emu_cta **owner)
{
    uint32_t off;
    emu_cta *p = mb_addr(c, w, in, l, &off);
    if (!p)
        return NULL;
    if (p != c && !remote) {
        emu__report(c, EMU_R_CLUSTER, in, tid_of(w, l), -1, 0, 0,
                    "names an mbarrier of CTA rank %u of the cluster: only arrive, expect_tx and "
                    "complete_tx may name a peer's",
                    p->rank);
        fatal(c);
        return NULL;
    }
    if (owner)
        *owner = p;
    emu_mbar *b = emu__mbar_at(p, off);
    if (!b || b->state != EMU_MBS_LIVE) {
        emu__report(c, EMU_R_MBARRIER, in, tid_of(w, l), EMU_SP_SHARED, off, 8, "%s",
                    b ? "operation on an invalidated mbarrier"
                      : "operation on an mbarrier that was never initialised (mbarrier.init)");
        fatal(c);
        return NULL;
    }
    return b;
}

/* The barrier's phase clocks: k 0 the current phase, 1 + p the last
 * completed phase of parity p (NULL without vector clocks). */
static uint32_t *mb_vc(emu_cta *c, const emu_mbar *b, int k)
{
    emu_asc *a = c->as;
    if (!a->vcm)
        return NULL;
    return &a->mbvc[((size_t)(b - a->mb) * 3 + (size_t)k) * a->nw];
}

static void wake_waiters(emu_cta *c, uint32_t idx)
{
    emu_asc *a = c->as;
    for (uint32_t i = 0; i < c->nwarps; i++) {
        emu_warp *w = &c->warps[i];
        if (!w->mb_wait)
            continue;
        uint32_t lanes = 0;
        EMU_FOR_LANES(w->mb_wait, l)
        if ((uint32_t)a->wait_mb[w->index * 32 + l] == idx)
            lanes |= 1u << l;
        if (lanes) {
            w->mb_wait &= ~lanes;
            emu__wake(w, lanes);
        }
    }
}

static void phase_done(emu_cta *c, emu_mbar *b, const emu_ins *in, int tid)
{
    if (b->inflight && c->o->detect_async)
        emu__report(c, EMU_R_EXPECT_TX, in, tid, EMU_SP_SHARED, b->off, 8,
                    "phase %llu of the mbarrier completed with %llu bytes of async copies issued "
                    "in it still in flight: expect_tx too small",
                    (unsigned long long)b->phase, (unsigned long long)b->inflight);
    uint32_t *cur = mb_vc(c, b, 0);
    if (cur) { /* publish the phase's clock for its waiters */
        uint32_t *pub = mb_vc(c, b, 1 + (int)(b->phase & 1));
        memcpy(pub, cur, c->as->nw * sizeof *cur);
        memset(cur, 0, c->as->nw * sizeof *cur);
    } else
        c->epoch++; /* no vector clocks: nothing to order */
    b->phase++;
    b->pending = b->expected;
    b->tx = 0;
    b->inflight = 0;
    b->neg_reported = false;
    wake_waiters(c, (uint32_t)(b - c->as->mb) + 1);
}

static void mb_check(emu_cta *c, emu_mbar *b, const emu_ins *in, int tid)
{
    if (b->pending)
        return;
    if (b->tx == 0) {
        phase_done(c, b, in, tid);
        return;
    }
    if (b->tx < 0 && !b->neg_reported && c->o->detect_async) {
        b->neg_reported = true;
        emu__report(c, EMU_R_EXPECT_TX, in, tid, EMU_SP_SHARED, b->off, 8,
                    "tx count of phase %llu went negative (%lld) with every arrival in: %lld "
                    "bytes more completed than expect_tx announced",
                    (unsigned long long)b->phase, (long long)b->tx, (long long)-b->tx);
    }
}

void emu__mbar_complete_tx(emu_cta *c, emu_mbar *b, uint64_t bytes, uint64_t phase,
                           const emu_ins *in, int tid, const uint32_t *vc)
{
    if (b->state != EMU_MBS_LIVE) {
        emu__report(c, EMU_R_MBARRIER, in, tid, EMU_SP_SHARED, b->off, 8,
                    "an async copy completed on an mbarrier invalidated while it was in flight");
        return;
    }
    if (phase == b->phase && b->inflight >= bytes)
        b->inflight -= bytes;
    uint32_t *cur = mb_vc(c, b, 0);
    if (cur && vc) /* the copy's issue happens before the phase's completion */
        for (uint32_t i = 0; i < c->as->nw; i++)
            cur[i] = vc[i] > cur[i] ? vc[i] : cur[i];
    b->tx -= (int64_t)bytes;
    mb_check(c, b, in, tid);
}

/* One arrival of `cnt` (and, with tx, expect_tx of `bytes` first) by
 * thread tid of CTA who on barrier b of CTA c (who is c, or a peer: a
 * remote arrive). */
static uint64_t arrive(emu_cta *c, emu_cta *who, emu_mbar *b, const emu_ins *in, int tid,
                       uint64_t cnt, bool drop, bool tx, uint64_t bytes)
{
    if (tx) {
        b->tx += (int64_t)bytes;
        b->tx_pc = (uint32_t)(in - c->k->code);
        b->tx_tid = tid;
    }
    if (cnt > b->pending) {
        if (c->o->detect_async)
            emu__report(c, EMU_R_MBARRIER, in, tid, EMU_SP_SHARED, b->off, 8,
                        "%llu arrivals on an mbarrier phase expecting %u more (of %u): arrivals "
                        "beyond the expected count",
                        (unsigned long long)cnt, b->pending, b->expected);
        cnt = b->pending;
    }
    uint64_t token = b->phase << 32;
    uint32_t *cur = mb_vc(c, b, 0);
    if (cur && who != c && c->xvc) { /* the owner's exit check (async.c) */
        uint32_t wi = (uint32_t)tid >> 5, me = who->as->me0 + wi;
        c->xvc[me] = who->as->vc[wi * who->as->nw + me];
        c->xpc[me] = (uint32_t)(in - c->k->code);
    }
    if (cur)
        emu__vc_arrive(who, (uint32_t)tid >> 5, cur);
    b->pending -= (uint32_t)cnt;
    if (drop)
        b->expected -= (uint32_t)cnt < b->expected ? (uint32_t)cnt : b->expected;
    token |= b->pending;
    b->last_line = in->line;
    b->last_tid = tid;
    mb_check(c, b, in, tid);
    return token;
}

static bool wait_ok(const emu_mbar *b, const emu_ins *in, uint64_t arg)
{
    if (in->aux & EMU_MBF_PARITY)
        return (b->phase & 1) != (arg & 1);
    return b->phase > (arg >> 32);
}

bool emu__mbar(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc)
{
    uint64_t *R = w->R, *D = EMU_RG(R, in->d);
    const uint64_t *B = EMU_RG(R, in->b), *C = EMU_RG(R, in->c);
    emu_asc *a = c->as;
    uint32_t park = 0, spin = 0;
    EMU_FOR_LANES(m, l)
    {
        if (c->dead)
            return true;
        int tid = tid_of(w, l);
        switch (in->sub) {
        case EMU_MB_INIT: {
            uint32_t off;
            emu_cta *p = mb_addr(c, w, in, l, &off);
            if (!p)
                return true;
            if (p != c) {
                emu__report(c, EMU_R_CLUSTER, in, tid, -1, 0, 0,
                            "mbarrier.init of a peer CTA's mbarrier (rank %u): each CTA "
                            "initialises its own",
                            p->rank);
                fatal(c);
                return true;
            }
            emu_mbar *b = emu__mbar_at(c, off);
            uint64_t n = B[l] & 0xffffffffu;
            if (b && b->state == EMU_MBS_LIVE &&
                !(b->init_line == in->line && b->phase == 0 && b->pending == b->expected &&
                  b->tx == 0 && b->expected == n) &&
                c->o->detect_async)
                emu__report(c, EMU_R_MBARRIER, in, tid, EMU_SP_SHARED, off, 8,
                            "init of a live mbarrier (initialised at line %d; mbarrier.inval it "
                            "first)",
                            b->init_line);
            if (n < 1 || n > (1u << 20) - 1) {
                emu__report(c, EMU_R_MBARRIER, in, tid, EMU_SP_SHARED, off, 8,
                            "mbarrier.init count %llu outside 1..2^20-1", (unsigned long long)n);
                fatal(c);
                return true;
            }
            if (!b && !(b = mb_new(c, off))) {
                emu__report(c, EMU_R_INVALID, in, tid, -1, 0, 0, "more than 65535 mbarriers");
                fatal(c);
                return true;
            }
            if (a->vcm)
                memset(mb_vc(c, b, 0), 0, 3 * a->nw * sizeof(uint32_t));
            b->state = EMU_MBS_LIVE;
            b->expected = b->pending = (uint32_t)n;
            b->tx = 0;
            b->phase = 0;
            b->inflight = 0;
            b->neg_reported = false;
            b->init_line = in->line;
            break;
        }
        case EMU_MB_INVAL: {
            emu_mbar *b = mb_live(c, w, in, l, false, NULL);
            if (!b)
                return true;
            b->state = EMU_MBS_INVAL;
            break;
        }
        case EMU_MB_ARRIVE: {
            emu_cta *o;
            emu_mbar *b = mb_live(c, w, in, l, true, &o);
            if (!b)
                return true;
            uint64_t cnt = (in->aux & EMU_MBF_COUNT) ? C[l] & 0xffffffffu : 1;
            uint64_t tok = arrive(o, c, b, in, tid, cnt, (in->aux & EMU_MBF_DROP) != 0,
                                  (in->aux & EMU_MBF_TX) != 0, B[l] & 0xffffffffu);
            D[l] = tok;
            break;
        }
        case EMU_MB_EXPECT_TX:
        case EMU_MB_COMPLETE_TX: {
            emu_cta *o;
            emu_mbar *b = mb_live(c, w, in, l, true, &o);
            if (!b)
                return true;
            int64_t v = (int64_t)(B[l] & 0xffffffffu);
            b->tx += in->sub == EMU_MB_EXPECT_TX ? v : -v;
            if (in->sub == EMU_MB_EXPECT_TX) {
                b->tx_pc = (uint32_t)(in - c->k->code);
                b->tx_tid = tid;
            }
            mb_check(o, b, in, tid);
            break;
        }
        case EMU_MB_TRY_WAIT:
        case EMU_MB_TEST_WAIT: {
            emu_mbar *b = mb_live(c, w, in, l, false, NULL);
            if (!b)
                return true;
            bool ok = wait_ok(b, in, B[l]);
            if (ok || in->sub == EMU_MB_TEST_WAIT)
                D[l] = ok;
            if (ok && a->vcm) /* the waiter acquires the last completed phase */
                emu__vc_acquire(c, w->index, mb_vc(c, b, 1 + (int)((b->phase - 1) & 1)));
            if (!ok) {
                a->wait_mb[tid] = (int16_t)(b - a->mb + 1);
                a->wait_arg[tid] = B[l];
                if (in->sub == EMU_MB_TRY_WAIT)
                    park |= 1u << l;
                else
                    spin |= 1u << l;
            }
            break;
        }
        case EMU_MB_PENDING: D[l] = B[l] & 0xfffffu; break;
        case EMU_MB_CP_ARRIVE: {
            emu_mbar *b = mb_live(c, w, in, l, false, NULL);
            if (!b)
                return true;
            emu__async_cp_arrive(c, w, in, l, pc, b);
            break;
        }
        default: break;
        }
    }
    if (!park && !spin)
        return false;
    /* parked lanes stay at the wait (they re-execute it when woken); the
     * others go on */
    EMU_FOR_LANES(w->group, l) w->lane_pc[l] = (park >> l) & 1 ? pc : pc + 1;
    w->group = 0;
    w->blocked |= park;
    w->mb_wait |= park;
    if (spin)
        w->spin = true; /* test_wait failed: end the slice */
    emu__resched(w);
    return true;
}

/* "'bar' +8" or "+0x410": the barrier's place for a report. */
static void mb_name(const emu_cta *c, uint32_t off, char *buf, size_t n)
{
    for (uint32_t i = 0; i < c->k->nshvars; i++) {
        const emu_shvar *v = &c->k->shvars[i];
        uint64_t size = v->dyn ? c->rs->l.dyn_smem : v->size;
        if (off >= v->off && off < v->off + size) {
            snprintf(buf, n, "'%s'+%u", v->name, off - v->off);
            return;
        }
    }
    snprintf(buf, n, "+0x%x", off);
}

void emu__mbar_end(emu_cta *c)
{
    emu_asc *a = c->as;
    if (!a || !c->o->detect_async || c->dead)
        return;
    for (uint32_t i = 0; i < a->nmb; i++) {
        const emu_mbar *b = &a->mb[i];
        if (b->state != EMU_MBS_LIVE || b->pending || b->tx <= 0 || b->tx_pc >= c->k->ncode)
            continue;
        char where[96];
        mb_name(c, b->off, where, sizeof where);
        emu__report(c, EMU_R_EXPECT_TX, &c->k->code[b->tx_pc], b->tx_tid, EMU_SP_SHARED, b->off, 8,
                    "the CTA ends with phase %llu of mbarrier %s holding every arrival and a tx "
                    "count of %lld: expect_tx announced %lld bytes more than the copies "
                    "completed, so the phase can never complete",
                    (unsigned long long)b->phase, where, (long long)b->tx, (long long)b->tx);
        return;
    }
}

bool emu__mbar_deadlock(emu_cta *c)
{
    emu_asc *a = c->as;
    if (!a)
        return false;
    uint32_t parked = 0, spinning = 0, exited = 0, atbar = 0;
    const emu_warp *fw = NULL;
    uint32_t fl = 0;
    for (uint32_t i = 0; i < c->nwarps; i++) {
        const emu_warp *w = &c->warps[i];
        parked += (uint32_t)__builtin_popcount(w->mb_wait);
        exited += (uint32_t)__builtin_popcount(w->exists & ~w->live);
        atbar += (uint32_t)__builtin_popcount(w->blocked & ~w->mb_wait);
        if (w->spin)
            spinning++;
        if (!fw && (w->mb_wait || w->spin)) {
            fw = w;
            fl = w->mb_wait ? (uint32_t)__builtin_ctz(w->mb_wait)
                            : (uint32_t)__builtin_ctz(w->live & ~w->blocked);
        }
    }
    if (!fw)
        return false;
    int tid = tid_of(fw, fl);
    int16_t bi = a->wait_mb[tid];
    uint32_t pc = fw->mb_wait ? fw->lane_pc[fl] : fw->lane_pc[fl] - 1;
    if (pc >= c->k->ncode)
        pc = c->k->ncode - 1;
    const emu_ins *in = &c->k->code[pc];
    if (bi <= 0 || (uint32_t)bi > a->nmb)
        return false;
    const emu_mbar *b = &a->mb[bi - 1];
    uint64_t arg = a->wait_arg[tid];
    char where[96], waits[64], last[48] = "no arrival yet";
    if (b->last_line)
        snprintf(last, sizeof last, "last arrival at line %d", b->last_line);
    mb_name(c, b->off, where, sizeof where);
    if (in->aux & EMU_MBF_PARITY)
        snprintf(waits, sizeof waits, "parity %u", (unsigned)(arg & 1));
    else
        snprintf(waits, sizeof waits, "the phase after %llu (token)", (unsigned long long)(arg >> 32));
    emu__report(c, EMU_R_DEADLOCK, in, tid, -1, 0, 0,
                "waits on mbarrier %s for %s, which can never complete: its current phase %llu "
                "(parity %u) needs %u more of %u arrivals and has tx count %lld (%s); no async "
                "copy is in flight; %u threads parked on mbarriers, %u "
                "warps spinning on test_wait, %u threads at barriers, %u exited",
                where, waits, (unsigned long long)b->phase, (unsigned)(b->phase & 1), b->pending,
                b->expected, (long long)b->tx, last, parked, spinning, atbar, exited);
    return true;
}
