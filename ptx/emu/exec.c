/* Per-warp execution: the interpreter loop, divergence and reconvergence,
 * barriers, and the CTA scheduler with its deadlock and hang guards.
 *
 * Divergence uses per-lane pcs with "min-pc" scheduling: a warp always
 * runs the group of its runnable lanes that share the lowest pc. Lanes
 * that branch forward wait until the others catch up (they merge when the
 * pcs meet), and loops run their back-edge lanes first, which reconverges
 * structured code at its immediate post-dominator without a stack. The
 * running group is kept as (pc, mask); lane_pc[] holds the other lanes.
 * A converged warp (the common case) pays one compare per instruction.
 *
 * Barriers count arriving threads per id; a bar.sync/barrier.sync.aligned
 * warp counts as 32 once all its live lanes arrived (hardware counts warps).
 * Blocked lanes leave the runnable set; when no warp of a CTA can run and
 * some thread has not exited, the CTA is deadlocked and reported. */
#include "ptx/emu/emu_int.h"

#include <math.h>
#include <stdlib.h>

enum { EMU_SLICE = 2048 }; /* warp instructions before the scheduler switches warps */

/* Picks the lowest-pc group among the runnable lanes of w (the running
 * group's lanes are written back to lane_pc first). */
static void resched(emu_warp *w)
{
    EMU_FOR_LANES(w->group, l) w->lane_pc[l] = w->pc;
    uint32_t run = w->live & ~w->blocked, lo = UINT32_MAX, next = UINT32_MAX, g = 0;
    EMU_FOR_LANES(run, l) if (w->lane_pc[l] < lo) lo = w->lane_pc[l];
    EMU_FOR_LANES(run, l)
    {
        if (w->lane_pc[l] == lo)
            g |= 1u << l;
        else if (w->lane_pc[l] < next)
            next = w->lane_pc[l];
    }
    w->pc = lo;
    w->group = g;
    w->next_pc = next;
}

void emu__resched(emu_warp *w) { resched(w); }

/* ---- barriers ---- */

static void bar_release(emu_cta *c, uint32_t id)
{
    if (c->as) /* vector clocks: the waiters acquire every arrival */
        emu__vc_bar_release(c, id);
    for (uint32_t i = 0; i < c->nwarps; i++) {
        emu_warp *w = &c->warps[i];
        w->bar_arrived[id] = 0;
        uint32_t rel = w->bar_wait[id];
        if (rel) {
            w->bar_wait[id] = 0;
            w->blocked &= ~rel;
            resched(w);
        }
    }
    c->bar_thr[id] = c->bar_cnt[id] = c->bar_need[id] = 0;
    c->epoch++; /* a new barrier interval for the race detector */
}

static void bar_check(emu_cta *c, uint32_t id)
{
    bool done;
    if (c->bar_need[id])
        done = c->bar_cnt[id] >= c->bar_need[id];
    else
        done = c->bar_thr[id] > 0 && c->bar_thr[id] >= c->live_threads;
    if (done)
        bar_release(c, id);
}

static void bar_arrive(emu_cta *c, emu_warp *w, uint32_t id, uint32_t m, uint32_t count, bool wait)
{
    uint32_t before = w->bar_arrived[id] & w->live;
    w->bar_arrived[id] |= m;
    uint32_t n = (uint32_t)__builtin_popcount(m);
    c->bar_thr[id] += n;
    if (before != w->live && (w->bar_arrived[id] & w->live) == w->live)
        n += 32 - (uint32_t)__builtin_popcount(w->live);
    c->bar_cnt[id] += n;
    if (count)
        c->bar_need[id] = count;
    if (c->as)
        emu__vc_bar_arrive(c, w->index, id);
    if (wait) {
        w->blocked |= m;
        w->bar_wait[id] |= m;
    }
    bar_check(c, id);
}

/* bar.warp.sync: lanes wait until every live lane named by the masks of
 * the waiters has arrived. */
static void ws_check(emu_warp *w)
{
    if (!w->ws_wait)
        return;
    uint32_t need = w->ws_mask & w->live;
    if ((w->ws_wait & need) == need) {
        w->blocked &= ~w->ws_wait;
        w->ws_wait = w->ws_mask = 0;
        resched(w);
    }
}

static void all_bar_check(emu_cta *c)
{
    for (uint32_t id = 0; id < EMU_NBAR; id++)
        if (c->bar_thr[id])
            bar_check(c, id);
}

/* ---- integer helpers ---- */

__extension__ typedef __int128 emu_i128;
__extension__ typedef unsigned __int128 emu_u128;

static inline uint64_t mul_hi(uint64_t a, uint64_t b, int bits, bool sgn)
{
    if (sgn) {
        emu_i128 p = (emu_i128)emu_sx(a, bits) * emu_sx(b, bits);
        return (uint64_t)(p >> bits) & emu_mask(bits);
    }
    emu_u128 p = (emu_u128)a * b;
    return (uint64_t)(p >> bits) & emu_mask(bits);
}

static inline uint64_t mul_wide(uint64_t a, uint64_t b, int bits, bool sgn)
{
    if (sgn)
        return (uint64_t)(emu_sx(a, bits) * emu_sx(b, bits)) & emu_mask(2 * bits);
    return (a * b) & emu_mask(2 * bits);
}

static inline uint64_t idiv(uint64_t a, uint64_t b, int bits, bool sgn, bool rem)
{
    uint64_t m = emu_mask(bits);
    if (!sgn) {
        if (!b)
            return rem ? a : m;
        return rem ? a % b : a / b;
    }
    int64_t x = emu_sx(a, bits), y = emu_sx(b, bits);
    if (!y)
        return rem ? a : m;
    if (y == -1)
        return rem ? 0 : (0 - (uint64_t)x) & m;
    return (uint64_t)(rem ? x % y : x / y) & m;
}

static inline uint64_t lop3(uint64_t a, uint64_t b, uint64_t c, unsigned lut)
{
    uint64_t r = 0;
    for (unsigned i = 0; i < 8; i++)
        if ((lut >> i) & 1)
            r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
    return r;
}

static inline uint64_t prmt(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t src = (b & 0xffffffffu) << 32 | (a & 0xffffffffu), r = 0;
    for (int k = 0; k < 4; k++) {
        unsigned sel = (unsigned)(c >> (4 * k)) & 0xf;
        uint64_t byte = (src >> (8 * (sel & 7))) & 0xff;
        if (sel & 8)
            byte = (byte & 0x80) ? 0xff : 0;
        r |= byte << (8 * k);
    }
    return r;
}

static inline uint64_t bfe(uint64_t a, uint64_t b, uint64_t c, int bits, bool sgn)
{
    unsigned pos = (unsigned)b & 0xff, len = (unsigned)c & 0xff, msb = (unsigned)bits - 1;
    unsigned sb = pos + len - 1 < msb ? pos + len - 1 : msb;
    uint64_t sbit = (sgn && len) ? (a >> sb) & 1 : 0, d = 0;
    for (unsigned i = 0; i <= msb; i++) {
        uint64_t v = (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
        d |= v << i;
    }
    return d;
}

static inline uint64_t bfi(uint64_t a, uint64_t b, uint64_t c, uint64_t e, int bits)
{
    unsigned pos = (unsigned)c & 0xff, len = (unsigned)e & 0xff, msb = (unsigned)bits - 1;
    uint64_t f = b;
    for (unsigned i = 0; i < len && pos + i <= msb; i++)
        f = (f & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
    return f;
}

static inline uint64_t brev(uint64_t a, int bits)
{
    uint64_t r = 0;
    for (int i = 0; i < bits; i++)
        r |= ((a >> i) & 1) << (bits - 1 - i);
    return r;
}

static inline bool icmp(uint64_t a, uint64_t b, int cmp, int bits, bool sgn)
{
    if (sgn) {
        int64_t x = emu_sx(a, bits), y = emu_sx(b, bits);
        switch (cmp) {
        case EMU_CMP_EQ: return x == y;
        case EMU_CMP_NE: return x != y;
        case EMU_CMP_LT: return x < y;
        case EMU_CMP_LE: return x <= y;
        case EMU_CMP_GT: return x > y;
        default: return x >= y;
        }
    }
    switch (cmp) {
    case EMU_CMP_EQ: return a == b;
    case EMU_CMP_NE: return a != b;
    case EMU_CMP_LT: return a < b;
    case EMU_CMP_LE: return a <= b;
    case EMU_CMP_GT: return a > b;
    default: return a >= b;
    }
}

/* ---- f32 fast paths (RN) ---- */

static inline float f32_in(uint64_t bits, unsigned flags)
{
    uint32_t b = (uint32_t)bits;
    if (flags & EMU_IF_FTZ)
        b = num_ftz32(b);
    return num_f32(b);
}

static inline uint64_t f32_out(float r, unsigned flags)
{
    uint32_t b = (uint32_t)num_f32_bits(r);
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (flags & EMU_IF_SAT) ? 0 : EMU_F32_QNAN;
    if (flags & EMU_IF_FTZ)
        b = num_ftz32(b);
    if (flags & EMU_IF_SAT) {
        float f = num_f32(b);
        if (!(f > 0.0f))
            b = 0;
        else if (f > 1.0f)
            b = 0x3f800000u;
    }
    return b;
}

/* fma in f32, correctly rounded without hardware FMA: the product is exact
 * in f64; TwoSum gives the exact sum as s + e; forcing s to the odd
 * neighbour when inexact ("round to odd") makes the final f64 -> f32
 * rounding exact (53 >= 24 + 2). */
static inline float fma32(float a, float b, float c)
{
    double p = (double)a * (double)b, e;
    double s = num_two_sum(p, (double)c, &e);
    if (e != 0 && isfinite(s)) {
        uint64_t bits = num_f64_bits(s);
        if (!(bits & 1))
            bits += ((e > 0) == (s > 0)) ? 1 : (uint64_t)-1;
        s = num_f64(bits);
    }
    return (float)s;
}

/* ---- the interpreter loop ---- */

/* Lanes of m whose guard predicate holds. */
static inline uint32_t guard_mask(const uint64_t *g, uint32_t m, bool neg)
{
    uint32_t r = 0;
    EMU_FOR_LANES(m, l) r |= (uint32_t)((g[l] != 0) != neg) << l;
    return r;
}

static void diverged_sync(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    if (!c->o->detect_divergence || emu__seen(c, EMU_R_DIVERGENCE, in))
        return;
    uint32_t missing = w->live & ~m;
    emu__report(c, EMU_R_DIVERGENCE, in, (int)(w->index * 32 + (uint32_t)__builtin_ctz(m)), -1, 0,
                0, "%s reached by a non-converged warp %u: active lanes 0x%08x of live 0x%08x "
                   "(lane %d missing)",
                ptx_op_info((ptx_op)in->op).name, w->index, m, w->live,
                missing ? __builtin_ctz(missing) : -1);
}

static void warp_run(emu_cta *c, emu_warp *w, uint32_t budget)
{
    const emu_kernel *k = c->k;
    const emu_ins *code = k->code;
    uint64_t *R = w->R;
    while (budget-- && w->group && !c->dead) {
        uint32_t pc = w->pc;
        const emu_ins *in = &code[pc];
        uint32_t m = w->group;
        c->steps++;
        c->lanes += (uint32_t)__builtin_popcount(m);
        if (in->guard)
            m = guard_mask(EMU_RG(R, in->guard), m, in->gneg);
        uint64_t *D = EMU_RG(R, in->d);
        const uint64_t *A = EMU_RG(R, in->a), *B = EMU_RG(R, in->b), *C = EMU_RG(R, in->c);
        const uint64_t M = emu_mask(in->bits);
        const int bits = in->bits;
        const bool sgn = (in->flags & EMU_IF_SIGNED) != 0;
        const unsigned fl = in->flags;
        if (!m && in->h != EMU_H_BRA)
            goto next;
        if (in->wg) /* an operand is a wgmma D/A register: retire its group first */
            emu__wg_touch(c, w, in, pc);
        switch ((enum emu_h)in->h) {
        case EMU_H_NOP: break;
        case EMU_H_MOV: EMU_FOR_LANES(m, l) D[l] = A[l] & M; break;
        case EMU_H_PACK: {
            const uint32_t *v = &k->vpool[in->a];
            int eb = bits / in->n;
            uint64_t em = emu_mask(eb);
            EMU_FOR_LANES(m, l)
            {
                uint64_t r = 0;
                for (int i = 0; i < in->n; i++)
                    r |= (EMU_RG(R, v[i])[l] & em) << (i * eb);
                D[l] = r;
            }
            break;
        }
        case EMU_H_UNPACK: {
            const uint32_t *v = &k->vpool[in->d];
            int eb = bits / in->n;
            uint64_t em = emu_mask(eb);
            EMU_FOR_LANES(m, l)
            {
                uint64_t x = A[l];
                for (int i = 0; i < in->n; i++)
                    EMU_RG(R, v[i])[l] = (x >> (i * eb)) & em;
            }
            break;
        }
        case EMU_H_SREG_DYN: {
            uint64_t t = c->clock + c->steps * 4;
            uint64_t v = in->sub == PTX_S_CLOCK      ? t & 0xffffffffu
                         : in->sub == PTX_S_CLOCK_HI ? t >> 32
                         : in->sub == PTX_S_CLOCK64  ? t
                                                     : t * 2; /* %globaltimer, ns */
            EMU_FOR_LANES(m, l) D[l] = v & emu_mask(in->dbits);
            break;
        }
        case EMU_H_LD: emu__ld(c, w, in, m); break;
        case EMU_H_ST: emu__st(c, w, in, m); break;
        case EMU_H_CVTA: {
            uint64_t base = in->sub2 == EMU_SP_SHARED ? EMU_SHARED_BASE
                            : in->sub2 == EMU_SP_PARAM ? EMU_PARAM_BASE : EMU_LOCAL_BASE;
            if (in->sub == EMU_CVTA_ID)
                base = 0;
            else if (in->sub == EMU_CVTA_FROM_GENERIC)
                base = 0 - base;
            EMU_FOR_LANES(m, l) D[l] = (A[l] + base) & M;
            break;
        }
        case EMU_H_CVT:
            if (in->sub == 1) { /* integer resize */
                int sb = ptx_type_bits((ptx_type)in->ty2);
                EMU_FOR_LANES(m, l) D[l] = (sgn ? (uint64_t)emu_sx(A[l], sb) : A[l] & emu_mask(sb)) & M;
            } else
                EMU_FOR_LANES(m, l) D[l] = emu__cvt(in, A[l], B[l]);
            break;
        case EMU_H_IADD: EMU_FOR_LANES(m, l) D[l] = (A[l] + B[l]) & M; break;
        case EMU_H_ISUB: EMU_FOR_LANES(m, l) D[l] = (A[l] - B[l]) & M; break;
        case EMU_H_IADD_SAT:
        case EMU_H_ISUB_SAT:
            EMU_FOR_LANES(m, l)
            {
                int64_t x = emu_sx(A[l], 32), y = emu_sx(B[l], 32);
                int64_t r = in->h == EMU_H_IADD_SAT ? x + y : x - y;
                r = r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : r;
                D[l] = (uint64_t)r & M;
            }
            break;
        case EMU_H_IMUL_LO: EMU_FOR_LANES(m, l) D[l] = (A[l] * B[l]) & M; break;
        case EMU_H_IMUL_HI: EMU_FOR_LANES(m, l) D[l] = mul_hi(A[l], B[l], bits, sgn); break;
        case EMU_H_IMUL_WIDE: EMU_FOR_LANES(m, l) D[l] = mul_wide(A[l], B[l], bits, sgn); break;
        case EMU_H_IMAD_LO: EMU_FOR_LANES(m, l) D[l] = (A[l] * B[l] + C[l]) & M; break;
        case EMU_H_IMAD_HI: EMU_FOR_LANES(m, l) D[l] = (mul_hi(A[l], B[l], bits, sgn) + C[l]) & M; break;
        case EMU_H_IMAD_WIDE:
            EMU_FOR_LANES(m, l) D[l] = (mul_wide(A[l], B[l], bits, sgn) + C[l]) & emu_mask(2 * bits);
            break;
        case EMU_H_IDIV: EMU_FOR_LANES(m, l) D[l] = idiv(A[l], B[l], bits, sgn, false); break;
        case EMU_H_IREM: EMU_FOR_LANES(m, l) D[l] = idiv(A[l], B[l], bits, sgn, true); break;
        case EMU_H_IMIN:
        case EMU_H_IMAX: {
            bool mx = in->h == EMU_H_IMAX;
            EMU_FOR_LANES(m, l)
            {
                bool lt = sgn ? emu_sx(A[l], bits) < emu_sx(B[l], bits) : A[l] < B[l];
                D[l] = (lt != mx) ? A[l] : B[l];
            }
            break;
        }
        case EMU_H_IABS:
            EMU_FOR_LANES(m, l)
            {
                int64_t x = emu_sx(A[l], bits);
                D[l] = (x < 0 ? 0 - (uint64_t)x : (uint64_t)x) & M;
            }
            break;
        case EMU_H_INEG: EMU_FOR_LANES(m, l) D[l] = (0 - A[l]) & M; break;
        case EMU_H_F32_ADD:
            EMU_FOR_LANES(m, l) D[l] = f32_out(f32_in(A[l], fl) + f32_in(B[l], fl), fl);
            break;
        case EMU_H_F32_SUB:
            EMU_FOR_LANES(m, l) D[l] = f32_out(f32_in(A[l], fl) - f32_in(B[l], fl), fl);
            break;
        case EMU_H_F32_MUL:
            EMU_FOR_LANES(m, l) D[l] = f32_out(f32_in(A[l], fl) * f32_in(B[l], fl), fl);
            break;
        case EMU_H_F32_FMA:
            EMU_FOR_LANES(m, l)
            D[l] = f32_out(fma32(f32_in(A[l], fl), f32_in(B[l], fl), f32_in(C[l], fl)), fl);
            break;
        case EMU_H_F32_DIV:
            EMU_FOR_LANES(m, l) D[l] = f32_out(f32_in(A[l], fl) / f32_in(B[l], fl), fl);
            break;
        case EMU_H_F64_ADD: EMU_FOR_LANES(m, l) D[l] = num_f64_bits(num_f64(A[l]) + num_f64(B[l])); break;
        case EMU_H_F64_SUB: EMU_FOR_LANES(m, l) D[l] = num_f64_bits(num_f64(A[l]) - num_f64(B[l])); break;
        case EMU_H_F64_MUL: EMU_FOR_LANES(m, l) D[l] = num_f64_bits(num_f64(A[l]) * num_f64(B[l])); break;
        case EMU_H_F64_FMA:
            EMU_FOR_LANES(m, l) D[l] = num_f64_bits(fma(num_f64(A[l]), num_f64(B[l]), num_f64(C[l])));
            break;
        case EMU_H_F64_DIV: EMU_FOR_LANES(m, l) D[l] = num_f64_bits(num_f64(A[l]) / num_f64(B[l])); break;
        case EMU_H_FARITH: EMU_FOR_LANES(m, l) D[l] = emu__farith(in, A[l], B[l], C[l]); break;
        case EMU_H_FMINMAX: EMU_FOR_LANES(m, l) D[l] = emu__fminmax(in, A[l], B[l]); break;
        case EMU_H_FABS:
        case EMU_H_FNEG: {
            uint64_t sm = in->ty == PTX_T_F64 ? 1ull << 63
                          : in->ty == PTX_T_F32 ? 1ull << 31
                          : (in->ty == PTX_T_F16X2 || in->ty == PTX_T_BF16X2) ? 0x80008000ull
                                                                               : 0x8000ull;
            EMU_FOR_LANES(m, l)
            {
                uint64_t x = A[l];
                if ((fl & EMU_IF_FTZ) && in->ty == PTX_T_F32)
                    x = num_ftz32((uint32_t)x);
                D[l] = in->h == EMU_H_FABS ? x & ~sm : x ^ sm;
            }
            break;
        }
        case EMU_H_COPYSIGN: {
            uint64_t sm = in->ty == PTX_T_F64 ? 1ull << 63 : 1ull << 31;
            EMU_FOR_LANES(m, l) D[l] = (B[l] & ~sm) | (A[l] & sm);
            break;
        }
        case EMU_H_FUNARY: EMU_FOR_LANES(m, l) D[l] = emu__funary(in, A[l]); break;
        case EMU_H_AND: EMU_FOR_LANES(m, l) D[l] = A[l] & B[l]; break;
        case EMU_H_OR: EMU_FOR_LANES(m, l) D[l] = A[l] | B[l]; break;
        case EMU_H_XOR: EMU_FOR_LANES(m, l) D[l] = A[l] ^ B[l]; break;
        case EMU_H_NOT: EMU_FOR_LANES(m, l) D[l] = ~A[l] & M; break;
        case EMU_H_SHL:
            EMU_FOR_LANES(m, l)
            {
                uint64_t s = B[l] & 0xffffffffu;
                D[l] = s >= (uint64_t)bits ? 0 : (A[l] << s) & M;
            }
            break;
        case EMU_H_SHR:
            EMU_FOR_LANES(m, l)
            {
                uint64_t s = B[l] & 0xffffffffu;
                if (sgn)
                    D[l] = (uint64_t)(emu_sx(A[l], bits) >> (s >= (uint64_t)bits ? bits - 1 : (int)s)) & M;
                else
                    D[l] = s >= (uint64_t)bits ? 0 : A[l] >> s;
            }
            break;
        case EMU_H_LOP3: EMU_FOR_LANES(m, l) D[l] = lop3(A[l], B[l], C[l], (unsigned)in->aux) & M; break;
        case EMU_H_PRMT: EMU_FOR_LANES(m, l) D[l] = prmt(A[l], B[l], C[l]); break;
        case EMU_H_BFE: EMU_FOR_LANES(m, l) D[l] = bfe(A[l], B[l], C[l], bits, sgn) & M; break;
        case EMU_H_BFI: {
            const uint64_t *E = EMU_RG(R, in->e);
            EMU_FOR_LANES(m, l) D[l] = bfi(A[l], B[l], C[l], E[l], bits) & M;
            break;
        }
        case EMU_H_POPC: EMU_FOR_LANES(m, l) D[l] = (uint64_t)__builtin_popcountll(A[l] & M); break;
        case EMU_H_CLZ:
            EMU_FOR_LANES(m, l)
            {
                uint64_t x = A[l] & M;
                D[l] = x ? (uint64_t)(__builtin_clzll(x) - (64 - bits)) : (uint64_t)bits;
            }
            break;
        case EMU_H_BREV: EMU_FOR_LANES(m, l) D[l] = brev(A[l], bits); break;
        case EMU_H_SETP: {
            bool fcmp = (fl & EMU_IF_APPROX) != 0;
            EMU_FOR_LANES(m, l)
            {
                bool r = fcmp ? emu__setp_f(in, A[l], B[l]) : icmp(A[l], B[l], in->sub, bits, sgn);
                if (fl & EMU_IF_HAS_C) {
                    bool p = (C[l] != 0) != (in->cneg != 0);
                    r = in->sub2 == EMU_BOOL_AND ? (r && p) : in->sub2 == EMU_BOOL_OR ? (r || p) : (r != p);
                }
                D[l] = r;
            }
            break;
        }
        case EMU_H_SELP:
            EMU_FOR_LANES(m, l) D[l] = ((C[l] != 0) != (in->cneg != 0)) ? A[l] : B[l];
            break;
        case EMU_H_BRA: {
            uint32_t nt = w->group & ~m;
            if (!nt) {
                w->pc = in->target;
                if (w->pc >= w->next_pc)
                    resched(w);
                continue;
            }
            if (m) { /* divergence */
                EMU_FOR_LANES(m, l) w->lane_pc[l] = in->target;
                EMU_FOR_LANES(nt, l) w->lane_pc[l] = pc + 1;
                w->group = 0;
                resched(w);
                continue;
            }
            goto next;
        }
        case EMU_H_EXIT: {
            if (c->wg)
                emu__wg_exit(c, w, m);
            emu__cp_exit(c, w, m);
            w->live &= ~m;
            c->live_threads -= (uint32_t)__builtin_popcount(m);
            w->group &= ~m;
            w->pc = pc + 1;
            resched(w);
            ws_check(w);
            all_bar_check(c);
            if (c->as)
                emu__async_exit(c);
            continue;
        }
        case EMU_H_TRAP:
            emu__report(c, EMU_R_TRAP, in, (int)(w->index * 32 + (uint32_t)__builtin_ctz(m)), -1, 0, 0,
                        "trap executed");
            c->dead = true;
            __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
            return;
        case EMU_H_BAR: {
            uint32_t l0 = (uint32_t)__builtin_ctz(m);
            uint64_t id = A[l0], count = (fl & EMU_IF_HAS_C) ? B[l0] : 0;
            if ((fl & EMU_IF_ALIGNED) && m != w->live)
                diverged_sync(c, w, in, m);
            if (id >= EMU_NBAR || (count & 31) || count > c->nthreads + 31) {
                emu__report(c, EMU_R_INVALID, in, (int)(w->index * 32 + l0), -1, 0, 0,
                            "barrier %llu with thread count %llu", (unsigned long long)id,
                            (unsigned long long)count);
                id &= EMU_NBAR - 1;
            }
            EMU_FOR_LANES(w->group, l) w->lane_pc[l] = pc + 1;
            w->group = 0;
            bar_arrive(c, w, (uint32_t)id, m, (uint32_t)count, !(fl & EMU_IF_ARRIVE));
            resched(w);
            continue;
        }
        case EMU_H_BAR_WARP: {
            uint32_t mask = (uint32_t)A[__builtin_ctz(m)];
            uint32_t need = mask & w->live;
            if (!w->ws_wait && (m & need) == need)
                break; /* everyone named is here: a no-op */
            EMU_FOR_LANES(w->group, l) w->lane_pc[l] = pc + 1;
            w->group = 0;
            w->ws_wait |= m;
            w->ws_mask |= mask;
            w->blocked |= m;
            resched(w);
            ws_check(w);
            continue;
        }
        case EMU_H_SHFL: emu__shfl(c, w, in, m); break;
        case EMU_H_VOTE: emu__vote(c, w, in, m); break;
        case EMU_H_ACTIVEMASK: EMU_FOR_LANES(m, l) D[l] = w->group; break;
        case EMU_H_REDUX: emu__redux(c, w, in, m); break;
        case EMU_H_ATOM: emu__atom(c, w, in, m); break;
        case EMU_H_CP_ASYNC: emu__cp_async(c, w, in, m, pc); break;
        case EMU_H_CP_COMMIT: EMU_FOR_LANES(m, l) w->cp_group[l]++; break;
        case EMU_H_CP_WAIT:
            if (in->sub) { /* wait_all = commit_group; wait_group 0 */
                EMU_FOR_LANES(m, l) w->cp_group[l]++;
                emu__cp_wait(c, w, m, 0);
            } else
                emu__cp_wait(c, w, m, (int)in->aux);
            break;
        case EMU_H_LDMATRIX:
            if (m != w->live)
                diverged_sync(c, w, in, m);
            emu__ldmatrix(c, w, in, m);
            break;
        case EMU_H_MMA:
            if (m != w->live)
                diverged_sync(c, w, in, m);
            emu__mma(c, w, in, m);
            break;
        case EMU_H_MBAR:
            if (emu__mbar(c, w, in, m, pc)) {
                if (w->spin || c->dead)
                    return; /* a failed test_wait ends the slice */
                continue;   /* lanes parked at a try_wait */
            }
            break;
        case EMU_H_ASYNC:
            if (emu__async(c, w, in, m, pc))
                return;
            break;
        case EMU_H_WG:
            if (emu__wg_exec(c, w, in, m, pc))
                continue; /* the lanes blocked (setmaxnreg.inc) */
            break;
        case EMU_NH: break;
        }
    next:
        w->pc = pc + 1;
        if (w->pc >= w->next_pc)
            resched(w);
    }
}

/* ---- CTA setup and scheduling ---- */

static void warp_setup(emu_cta *c, emu_warp *w, uint32_t wi)
{
    const emu_kernel *k = c->k;
    const emu_runst *rs = c->rs;
    uint64_t *R = w->R;
    memset(R, 0, (size_t)k->const_base * EMU_LANES * sizeof *R);
    for (uint32_t j = 0; j < k->nconst; j++) {
        uint64_t v = k->consts[j], *r = EMU_RG(R, k->const_base + j);
        for (int l = 0; l < EMU_LANES; l++)
            r[l] = v;
    }
    unsigned bx = rs->l.block[0], by = rs->l.block[1];
    uint32_t exists = 0;
    for (uint32_t l = 0; l < EMU_LANES; l++) {
        uint32_t tid = wi * 32 + l;
        if (tid < c->nthreads)
            exists |= 1u << l;
        uint64_t sv[PTX_NSREGS] = {0};
        sv[PTX_S_TID_X] = tid % bx;
        sv[PTX_S_TID_Y] = (tid / bx) % by;
        sv[PTX_S_TID_Z] = tid / (bx * by);
        sv[PTX_S_NTID_X] = bx;
        sv[PTX_S_NTID_Y] = by;
        sv[PTX_S_NTID_Z] = rs->l.block[2];
        for (int i = 0; i < 3; i++) {
            sv[PTX_S_CTAID_X + i] = c->ctaid[i];
            sv[PTX_S_NCTAID_X + i] = rs->l.grid[i];
        }
        sv[PTX_S_LANEID] = l;
        sv[PTX_S_WARPID] = wi;
        sv[PTX_S_NWARPID] = c->nwarps;
        sv[PTX_S_SMID] = 0;
        sv[PTX_S_NSMID] = 1;
        sv[PTX_S_LANEMASK_EQ] = 1u << l;
        sv[PTX_S_LANEMASK_LT] = (1u << l) - 1;
        sv[PTX_S_LANEMASK_LE] = (uint32_t)((2ull << l) - 1);
        sv[PTX_S_LANEMASK_GT] = (uint32_t)~((2ull << l) - 1);
        sv[PTX_S_LANEMASK_GE] = ~((1u << l) - 1);
        sv[PTX_S_DYNAMIC_SMEM_SIZE] = rs->l.dyn_smem;
        sv[PTX_S_TOTAL_SMEM_SIZE] = c->smem_size;
        sv[PTX_S_GRIDID] = 1;
        /* the cluster (without a cluster launch the CTA is its own) */
        for (int i = 0; i < 3; i++) {
            sv[PTX_S_CLUSTERID_X + i] = c->ctaid[i] / rs->cdim[i];
            sv[PTX_S_NCLUSTERID_X + i] = rs->l.grid[i] / rs->cdim[i];
            sv[PTX_S_CLUSTER_CTAID_X + i] = c->ctaid[i] % rs->cdim[i];
            sv[PTX_S_CLUSTER_NCTAID_X + i] = rs->cdim[i];
        }
        sv[PTX_S_CLUSTER_CTARANK] = c->rank;
        sv[PTX_S_CLUSTER_NCTARANK] = rs->csize;
        sv[PTX_S_IS_EXPLICIT_CLUSTER] = k->fn->explicitcluster;
        for (int s = 0; s < PTX_NSREGS; s++)
            EMU_RG(R, EMU_SLOT_SREG + (uint32_t)s)[l] = sv[s];
    }
    w->index = wi;
    w->pc = 0;
    w->exists = w->live = w->group = exists;
    w->blocked = 0;
    w->next_pc = UINT32_MAX;
    memset(w->bar_wait, 0, sizeof w->bar_wait);
    memset(w->bar_arrived, 0, sizeof w->bar_arrived);
    w->ws_wait = w->ws_mask = 0;
    memset(w->cp_group, 0, sizeof w->cp_group);
    memset(w->cp_arr, 0, sizeof w->cp_arr);
    w->cp_seq = 0;
    w->ncp = 0;
}

int emu__cta_init(emu_cta *c, emu_runst *rs)
{
    memset(c, 0, sizeof *c);
    c->rs = rs;
    c->ctx = rs->ctx;
    c->k = rs->k;
    c->o = &rs->ctx->o;
    c->nthreads = rs->nthreads;
    c->nwarps = rs->nwarps;
    c->smem_size = rs->smem_size;
    c->warps = calloc(c->nwarps, sizeof *c->warps);
    c->regs = malloc((size_t)c->nwarps * c->k->nslots * EMU_LANES * sizeof *c->regs);
    c->smem = malloc((size_t)c->smem_size + 16);
    size_t shn = (size_t)c->smem_size + 16;
    c->sh.wep = calloc(shn, sizeof *c->sh.wep);
    c->sh.rep = calloc(shn, sizeof *c->sh.rep);
    c->sh.wtid = calloc(shn, sizeof *c->sh.wtid);
    c->sh.rtid = calloc(shn, sizeof *c->sh.rtid);
    c->pend = calloc((size_t)c->smem_size + 16, 1);
    size_t lb = (size_t)c->k->local_bytes * c->nthreads;
    c->local = malloc(lb + 16);
    c->local_w = calloc(lb + 16, 1);
    size_t nbits = (size_t)EMU_NREPORT_KINDS * (c->k->ncode + 1);
    c->seen = calloc(nbits / 64 + 1, sizeof *c->seen);
    c->bank_pc = calloc(c->k->ncode, sizeof *c->bank_pc);
    c->shadow_sh = c->o->detect_race || c->o->detect_uninit || c->o->detect_cp_async;
    if (!c->warps || !c->regs || !c->smem || !c->sh.wep || !c->sh.rep || !c->sh.wtid ||
        !c->sh.rtid || !c->pend || !c->local || !c->local_w || !c->seen || !c->bank_pc ||
        emu__wg_cta_init(c) || emu__async_cta_init(c))
        return PT_ENOMEM;
    if (rs->clustered) {
        size_t na = (size_t)rs->csize * (c->nwarps + 1);
        c->xvc = calloc(na, sizeof *c->xvc);
        c->xpc = calloc(na, sizeof *c->xpc);
        if (!c->xvc || !c->xpc)
            return PT_ENOMEM;
    }
    for (uint32_t i = 0; i < c->nwarps; i++)
        c->warps[i].R = c->regs + (size_t)i * c->k->nslots * EMU_LANES;
    return PT_OK;
}

void emu__cta_free(emu_cta *c)
{
    if (c->warps)
        for (uint32_t i = 0; i < c->nwarps; i++)
            free(c->warps[i].cp);
    free(c->warps);
    free(c->regs);
    free(c->smem);
    free(c->sh.wep);
    free(c->sh.rep);
    free(c->sh.wtid);
    free(c->sh.rtid);
    free(c->pend);
    free(c->local);
    free(c->local_w);
    free(c->seen);
    free(c->bank_pc);
    free(c->xvc);
    free(c->xpc);
    emu__wg_cta_free(c);
    emu__async_cta_free(c);
}

/* No warp can run and some thread has not exited. With the detector off
 * the CTA still stops (it could only hang), without a report line. */
static void deadlock(emu_cta *c)
{
    if (!c->o->detect_deadlock) {
        c->dead = true;
        __atomic_store_n(&c->rs->abort, 3, __ATOMIC_RELAXED);
        return;
    }
    if (c->wg && emu__wg_deadlock(c)) { /* a setmaxnreg.inc that can never be granted */
        c->dead = true;
        __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
        return;
    }
    if (c->as && (emu__mbar_deadlock(c) || emu__cluster_deadlock(c))) {
        c->dead = true;
        __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
        return;
    }
    uint32_t waiting = 0, id = 0, at = 0, exited = 0, wsync = 0;
    const emu_ins *in = NULL;
    int tid = -1;
    for (uint32_t i = 0; i < c->nwarps; i++) {
        emu_warp *w = &c->warps[i];
        exited += (uint32_t)__builtin_popcount(w->exists & ~w->live);
        waiting += (uint32_t)__builtin_popcount(w->blocked);
        wsync |= w->ws_wait;
        for (uint32_t b = 0; b < EMU_NBAR; b++)
            if (w->bar_wait[b] && !in) {
                uint32_t l = (uint32_t)__builtin_ctz(w->bar_wait[b]);
                id = b;
                at = w->lane_pc[l] - 1;
                in = &c->k->code[at];
                tid = (int)(i * 32 + l);
            }
        if (!in && w->ws_wait) {
            uint32_t l = (uint32_t)__builtin_ctz(w->ws_wait);
            in = &c->k->code[w->lane_pc[l] - 1];
            tid = (int)(i * 32 + l);
        }
    }
    if (in && in->h == EMU_H_BAR)
        emu__report(c, EMU_R_DEADLOCK, in, tid, -1, 0, 0,
                    "barrier %u can never complete: %u of %u threads wait (%u arrivals%s%u), %u "
                    "exited",
                    id, waiting, c->nthreads, c->bar_thr[id], c->bar_need[id] ? " of " : ", need ",
                    c->bar_need[id] ? c->bar_need[id] : c->live_threads, exited);
    else
        emu__report(c, EMU_R_DEADLOCK, in, tid, -1, 0, 0,
                    "bar.warp.sync can never complete: %u threads wait, %u exited", waiting, exited);
    (void)wsync;
    c->dead = true;
    __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
}

/* Adds this CTA's steps and CTA costs to the run totals; trips the hang
 * guard (work) and the timeout (wall clock). Called every 64 Ki steps of a
 * CTA and when it retires. */
static void flush_steps(emu_cta *c, const emu_ins *at, int tid)
{
    emu_runst *rs = c->rs;
    uint64_t d = c->steps - c->steps_flushed, ch = c->charge;
    c->steps_flushed = c->steps;
    c->charge = 0;
    __atomic_add_fetch(&rs->steps, d, __ATOMIC_RELAXED);
    uint64_t tot = __atomic_add_fetch(&rs->cost, d + ch, __ATOMIC_RELAXED);
    if (c->dead)
        return;
    if (tot > rs->max_steps) {
        emu__report(c, EMU_R_STEP_CAP, at, tid, -1, 0, 0,
                    "step cap of %llu warp instructions reached, CTA launches counted (a hang, "
                    "or a grid too large for the emulator?)",
                    (unsigned long long)rs->max_steps);
        c->dead = true;
        __atomic_store_n(&rs->abort, 1, __ATOMIC_RELAXED);
    } else if (rs->deadline > 0 && emu__now() > rs->deadline &&
               !__atomic_load_n(&rs->abort, __ATOMIC_RELAXED)) {
        emu__report(c, EMU_R_TIMEOUT, at, tid, -1, 0, 0,
                    "wall-clock limit of %g s reached with %llu of %u CTAs done (a hang, or a "
                    "grid too large for the emulator?)",
                    c->o->timeout, (unsigned long long)__atomic_load_n(&rs->ctas, __ATOMIC_RELAXED),
                    rs->nctas);
        c->dead = true;
        __atomic_store_n(&rs->abort, 1, __ATOMIC_RELAXED);
    }
}

/* The CTA's coordinates, fresh state, its warps: ready for rounds. */
static void cta_begin(emu_cta *c, uint64_t linear)
{
    const emu_runst *rs = c->rs;
    c->ctaid[0] = (unsigned)(linear % rs->l.grid[0]);
    c->ctaid[1] = (unsigned)(linear / rs->l.grid[0] % rs->l.grid[1]);
    c->ctaid[2] = (unsigned)(linear / ((uint64_t)rs->l.grid[0] * rs->l.grid[1]));
    if (c->epoch > 0xf0000000u) { /* epochs about to wrap: start over */
        size_t shn = (size_t)c->smem_size + 16;
        memset(c->sh.wep, 0, shn * sizeof *c->sh.wep);
        memset(c->sh.rep, 0, shn * sizeof *c->sh.rep);
        c->epoch = 0;
    }
    c->epoch0 = ++c->epoch; /* "written in this CTA"; atomics write with it */
    ++c->epoch;             /* the first barrier interval */
    c->live_threads = c->nthreads;
    memset(c->bar_thr, 0, sizeof c->bar_thr);
    memset(c->bar_cnt, 0, sizeof c->bar_cnt);
    memset(c->bar_need, 0, sizeof c->bar_need);
    memset(c->smem, EMU_POISON, c->smem_size);
    memset(c->pend, 0, c->smem_size);
    c->npend = 0;
    if (c->k->local_bytes) {
        memset(c->local, EMU_POISON, (size_t)c->k->local_bytes * c->nthreads);
        memset(c->local_w, 0, (size_t)c->k->local_bytes * c->nthreads);
    }
    c->dead = false;
    c->exited = false;
    if (c->xvc) {
        size_t na = (size_t)rs->csize * (c->nwarps + 1);
        memset(c->xvc, 0, na * sizeof *c->xvc);
    }
    c->charge += rs->cta_cost; /* launch and retirement count for the guard */
    for (uint32_t i = 0; i < c->nwarps; i++)
        warp_setup(c, &c->warps[i], i);
    if (c->wg)
        emu__wg_cta_start(c);
    if (c->as)
        emu__async_cta_start(c, linear);
}

enum { RND_RAN, RND_SPUN, RND_STUCK, RND_DONE };

/* One scheduling round: every runnable warp runs a slice. RND_DONE: every
 * thread exited, or the CTA (or run) aborted. */
static int cta_round(emu_cta *c)
{
    emu_asc *as = c->as;
    bool rnd = as && c->o->schedule == EMU_SCHED_RANDOM;
    bool ran = false, alive = false, spun = false;
    if (c->wg) /* warps that yielded at a wgmma.wait_group run again (wgmma.c) */
        emu__wg_round(c);
    for (uint32_t i = 0; i < c->nwarps && !c->dead; i++) {
        emu_warp *w = &c->warps[i];
        if (w->group) {
            uint32_t budget = EMU_SLICE;
            if (as) {
                w->spin = false;
                if (rnd) /* slices of random length, completions between them */
                    budget = 1 + (uint32_t)((as->rng = as->rng * 6364136223846793005ull +
                                                       1442695040888963407ull) >>
                                            59) * 64;
            }
            warp_run(c, w, budget);
            if (as && w->spin)
                spun = true; /* ended on a failed test_wait: no progress */
            else
                ran = true;
            if (rnd)
                emu__async_step(c, false);
        }
    }
    if (c->steps - c->steps_flushed > 65536)
        flush_steps(c, &c->k->code[c->warps[0].pc], 0);
    if (c->dead || __atomic_load_n(&c->rs->abort, __ATOMIC_RELAXED))
        return RND_DONE;
    for (uint32_t i = 0; i < c->nwarps; i++)
        alive |= c->warps[i].live != 0;
    if (!alive)
        return RND_DONE;
    return ran ? RND_RAN : spun ? RND_SPUN : RND_STUCK;
}

static void cta_end(emu_cta *c)
{
    if (c->as && !c->dead) {
        emu__async_drain(c); /* copies still in flight land before the CTA retires */
        emu__mbar_end(c);
    }
    flush_steps(c, NULL, -1);
    c->clock += c->steps;
}

void emu__cta_run(emu_cta *c, uint64_t linear)
{
    c->rank = 0;
    cta_begin(c, linear);
    emu_asc *as = c->as;
    if (as)
        emu__async_cluster_start(c->cl);
    for (;;) {
        int r = cta_round(c);
        if (r == RND_DONE)
            break;
        if (r == RND_RAN) {
            if (as)
                as->spin_rounds = 0;
            continue;
        }
        /* no warp can run: async completions are due (lazy) */
        if (as && emu__async_step(c, true)) {
            as->spin_rounds = 0;
            continue;
        }
        if (r == RND_SPUN && ++as->spin_rounds < 256)
            continue;
        deadlock(c);
        break;
    }
    cta_end(c);
}

/* A deadlock of the whole cluster: the barrier.cluster report when a CTA
 * waits there, else the first live CTA's own report. */
static void cluster_deadlock(emu_cluster *cl)
{
    emu_cta *first = NULL;
    for (uint32_t r = 0; r < cl->n; r++) {
        emu_cta *c = &cl->cta[r];
        if (c->exited)
            continue;
        if (!first)
            first = c;
        if (c->o->detect_deadlock && c->as && emu__cluster_deadlock(c)) {
            c->dead = true;
            __atomic_store_n(&c->rs->abort, 1, __ATOMIC_RELAXED);
            first = NULL;
            break;
        }
    }
    if (first)
        deadlock(first);
    for (uint32_t r = 0; r < cl->n; r++)
        cl->cta[r].dead = cl->cta[r].dead || !cl->cta[r].exited;
}

void emu__cluster_run(emu_cluster *cl, uint64_t index)
{
    const emu_runst *rs = cl->cta[0].rs;
    const unsigned *g = rs->l.grid, *d = rs->cdim;
    unsigned nc[3] = {g[0] / d[0], g[1] / d[1], g[2] / d[2]};
    cl->id[0] = (unsigned)(index % nc[0]);
    cl->id[1] = (unsigned)(index / nc[0] % nc[1]);
    cl->id[2] = (unsigned)(index / ((uint64_t)nc[0] * nc[1]));
    for (uint32_t r = 0; r < cl->n; r++) {
        unsigned x = cl->id[0] * d[0] + r % d[0], y = cl->id[1] * d[1] + r / d[0] % d[1],
                 z = cl->id[2] * d[2] + r / (d[0] * d[1]);
        cl->cta[r].rank = r;
        cta_begin(&cl->cta[r], x + (uint64_t)g[0] * (y + (uint64_t)g[1] * z));
    }
    if (cl->cta[0].as)
        emu__async_cluster_start(cl);
    cl->spin_rounds = 0;
    for (;;) {
        bool ran = false, spun = false, live = false, stop = false;
        for (uint32_t r = 0; r < cl->n && !stop; r++) {
            emu_cta *c = &cl->cta[r];
            if (c->exited)
                continue;
            int st = cta_round(c);
            if (st == RND_DONE) {
                if (c->dead || __atomic_load_n(&c->rs->abort, __ATOMIC_RELAXED)) {
                    stop = true;
                    break;
                }
                c->exited = true; /* its peers go on; its memory is theirs no more */
                if (c->as)
                    emu__async_cta_exited(c);
                ran = true;
                continue;
            }
            live = true;
            ran |= st == RND_RAN;
            spun |= st == RND_SPUN;
        }
        if (stop) {
            for (uint32_t r = 0; r < cl->n; r++)
                cl->cta[r].dead = cl->cta[r].dead || !cl->cta[r].exited;
            break;
        }
        if (!live && !ran)
            break;
        if (ran) {
            cl->spin_rounds = 0;
            continue;
        }
        bool stepped = false; /* the whole cluster is stuck: async completions are due */
        for (uint32_t r = 0; r < cl->n && !stepped; r++)
            if (!cl->cta[r].exited && cl->cta[r].as)
                stepped = emu__async_step(&cl->cta[r], true);
        if (stepped) {
            cl->spin_rounds = 0;
            continue;
        }
        if (spun && ++cl->spin_rounds < 256)
            continue;
        cluster_deadlock(cl);
        break;
    }
    for (uint32_t r = 0; r < cl->n; r++)
        cta_end(&cl->cta[r]);
}
