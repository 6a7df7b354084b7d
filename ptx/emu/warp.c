/* Warp collectives: shfl, vote, redux, and the tensor-core pair ldmatrix
 * and mma.sync. Each gathers the inputs of all 32 lanes before it writes
 * any destination (a destination may alias a source).
 *
 * Fragment layouts are the ones of shared/ref/ptx-sm80.md sections 4 and 5
 * (checked there against CuTe's TV layouts). mma numerics: products of the
 * inputs are exact in f32 (f16/bf16/tf32/fp8 have at most 11 significant
 * bits); they are accumulated in f32 in k order starting from C, then NaN
 * is made canonical. Hardware keeps more internal precision in an undocumented
 * order, so compare float mma results with a relative tolerance of about
 * 1e-3 (f16 accumulators: one f16 ulp). Integer mma is exact: s32 wraps, or
 * clamps with .satfinite. */
#include "ptx/emu/emu_int.h"

static int tid_of(const emu_warp *w, uint32_t lane) { return (int)(w->index * 32 + lane); }

/* Four floats in one SSE register (a GNU vector type: the f32 mma inner
 * loop is the emulator's hottest code). */
typedef float emu_v4f __attribute__((vector_size(16)));

/* A .sync collective's membermask must name only lanes executing it. */
static void check_members(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t mask)
{
    if (!c->o->detect_divergence || emu__seen(c, EMU_R_DIVERGENCE, in))
        return;
    uint32_t need = mask & w->exists;
    if (need & ~m)
        emu__report(c, EMU_R_DIVERGENCE, in, tid_of(w, (uint32_t)__builtin_ctz(m)), -1, 0, 0,
                    "%s.sync membermask 0x%08x names lanes not executing it (active 0x%08x)",
                    ptx_op_info((ptx_op)in->op).name, mask, m);
    else if (m & ~mask)
        emu__report(c, EMU_R_DIVERGENCE, in, tid_of(w, (uint32_t)__builtin_ctz(m & ~mask)), -1, 0,
                    0, "%s.sync executed by lanes 0x%08x outside its membermask 0x%08x",
                    ptx_op_info((ptx_op)in->op).name, m & ~mask, mask);
}

void emu__shfl(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R, *D = EMU_RG(R, in->d);
    const uint64_t *A = EMU_RG(R, in->a), *B = EMU_RG(R, in->b), *C = EMU_RG(R, in->c);
    const uint64_t *E = EMU_RG(R, in->e);
    check_members(c, w, in, m, (uint32_t)E[__builtin_ctz(m)]);
    uint32_t tmp[EMU_LANES];
    EMU_FOR_LANES(m, l)
    {
        int lane = (int)l, bval = (int)(B[l] & 31), cv = (int)(C[l] & 0xffff);
        int clamp = cv & 31, seg = (cv >> 8) & 31;
        int maxl = (lane & seg) | (clamp & ~seg), minl = lane & seg, j;
        bool ok;
        switch (in->sub) {
        case EMU_SHFL_UP:
            j = lane - bval;
            ok = j >= maxl;
            break;
        case EMU_SHFL_DOWN:
            j = lane + bval;
            ok = j <= maxl;
            break;
        case EMU_SHFL_BFLY:
            j = lane ^ bval;
            ok = j <= maxl;
            break;
        default:
            j = minl | (bval & ~seg);
            ok = j <= maxl;
            break;
        }
        if (!ok)
            j = lane;
        tmp[l] = (uint32_t)A[j];
    }
    EMU_FOR_LANES(m, l) D[l] = tmp[l];
}

void emu__vote(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R, *D = EMU_RG(R, in->d);
    const uint64_t *A = EMU_RG(R, in->a), *B = EMU_RG(R, in->b);
    check_members(c, w, in, m, (uint32_t)B[__builtin_ctz(m)]);
    uint32_t ballot = 0;
    EMU_FOR_LANES(m, l) ballot |= (uint32_t)((A[l] != 0) != (in->cneg != 0)) << l;
    uint64_t r;
    switch (in->sub) {
    case EMU_VOTE_BALLOT: r = ballot; break;
    case EMU_VOTE_ALL: r = ballot == m; break;
    case EMU_VOTE_ANY: r = ballot != 0; break;
    default: r = ballot == 0 || ballot == m; break;
    }
    EMU_FOR_LANES(m, l) D[l] = r;
}

void emu__redux(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R, *D = EMU_RG(R, in->d);
    const uint64_t *A = EMU_RG(R, in->a), *B = EMU_RG(R, in->b);
    check_members(c, w, in, m, (uint32_t)B[__builtin_ctz(m)]);
    bool sgn = (in->flags & EMU_IF_SIGNED) != 0;
    uint32_t l0 = (uint32_t)__builtin_ctz(m);
    uint64_t r = A[l0] & 0xffffffffu;
    EMU_FOR_LANES(m & (m - 1), l)
    {
        uint64_t x = A[l] & 0xffffffffu;
        switch (in->sub2) {
        case EMU_AOP_ADD: r = (r + x) & 0xffffffffu; break;
        case EMU_AOP_MIN:
        case EMU_AOP_MAX: {
            bool lt = sgn ? emu_sx(x, 32) < emu_sx(r, 32) : x < r;
            if (lt == (in->sub2 == EMU_AOP_MIN) && x != r)
                r = x;
            break;
        }
        case EMU_AOP_AND: r &= x; break;
        case EMU_AOP_OR: r |= x; break;
        default: r ^= x; break;
        }
    }
    EMU_FOR_LANES(m, l) D[l] = r;
}

void emu__ldmatrix(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *A = EMU_RG(R, in->a);
    const uint32_t *dv = &c->k->vpool[in->d];
    uint16_t M[4][8][8];
    bool trans = (in->flags & EMU_IF_TRANS) != 0;
    /* row r of matrix j comes from the address in lane 8j + r; other lanes'
     * addresses are never read. Banks: one 8x16-byte phase per matrix. */
    uint32_t off[EMU_LANES];
    for (uint32_t sl = 0; sl < 8 * in->n; sl++) {
        uint64_t a = A[sl] + (uint64_t)in->off;
        off[sl] = (uint32_t)(a - EMU_SHARED_BASE < EMU_WINDOW ? a - EMU_SHARED_BASE : a);
    }
    emu__banks(c, in, EMU_BANK_LDMATRIX, off, (uint32_t)((1ull << (8 * in->n)) - 1), 16);
    for (uint32_t j = 0; j < in->n; j++)
        for (uint32_t r = 0; r < 8; r++) {
            uint32_t sl = 8 * j + r;
            const uint8_t *p = emu__mem(c, in, w, sl, in->sub, A[sl] + (uint64_t)in->off, 16,
                                        EMU_ACC_READ);
            if (p)
                memcpy(M[j][r], p, 16);
            else
                memset(M[j][r], 0, 16);
        }
    EMU_FOR_LANES(m, l)
    {
        uint32_t q = l / 4, s = 2 * (l % 4);
        for (uint32_t j = 0; j < in->n; j++) {
            uint32_t lo = trans ? M[j][s][q] : M[j][q][s];
            uint32_t hi = trans ? M[j][s + 1][q] : M[j][q][s + 1];
            EMU_RG(R, dv[j])[l] = lo | hi << 16;
        }
    }
}

/* ---- mma.sync ---- */

static inline float f16f(const emu_ctx *x, uint64_t v) { return x->h2f[v & 0xffff]; }
static inline float bf16f(uint64_t v) { return num_f32((uint32_t)(v & 0xffff) << 16); }

/* One input element as float. */
static inline float elem(const emu_ctx *x, int t, uint64_t v)
{
    switch (t) {
    case PTX_T_F16: return f16f(x, v);
    case PTX_T_BF16: return bf16f(v);
    case PTX_T_TF32: return num_f32((uint32_t)v & 0xffffe000u); /* tf32 truncates */
    case PTX_T_E4M3: return x->fp8f[0][v & 0xff];
    default: return x->fp8f[1][v & 0xff];
    }
}

/* Gathers A (16 x K) and B (K x 8) of the warp into row-major arrays, by the
 * fragment formulas of the ISA (g = lane / 4, t = lane % 4). */
static void gather(const emu_ctx *x, const uint64_t *R, const emu_ins *in, const uint32_t *av,
                   const uint32_t *bv, float A[16][32], float B[32][8], int32_t Ai[16][32],
                   int32_t Bi[32][8])
{
    int at = in->ty2, bt = (int)(in->aux & 0xff), shape = in->sub2;
    bool i8 = at == PTX_T_S8 || at == PTX_T_U8;
    for (uint32_t l = 0; l < EMU_LANES; l++) {
        uint32_t g = l >> 2, t = l & 3;
        if (at == PTX_T_F16 || at == PTX_T_BF16) {
            int na = shape == EMU_MMA_K16 ? 8 : 4, nb = shape == EMU_MMA_K16 ? 4 : 2;
            for (int i = 0; i < na; i++) {
                uint32_t row = shape == EMU_MMA_K16 ? g + 8 * ((i >> 1) & 1) : g + 8 * (uint32_t)(i >> 1);
                uint32_t col = 2 * t + (uint32_t)(i & 1) + (shape == EMU_MMA_K16 ? 8 * (uint32_t)(i >> 2) : 0);
                uint64_t v = EMU_RG(R, av[i >> 1])[l] >> (16 * (i & 1));
                A[row][col] = elem(x, at, v);
            }
            for (int i = 0; i < nb; i++) {
                uint32_t k = shape == EMU_MMA_K16 ? 2 * t + (uint32_t)(i & 1) + 8 * (uint32_t)(i >> 1)
                                                  : 2 * t + (uint32_t)i;
                uint64_t v = EMU_RG(R, bv[i >> 1])[l] >> (16 * (i & 1));
                B[k][g] = elem(x, bt, v);
            }
        } else if (at == PTX_T_TF32) {
            for (uint32_t i = 0; i < 4; i++)
                A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = elem(x, at, EMU_RG(R, av[i])[l]);
            for (uint32_t i = 0; i < 2; i++)
                B[t + 4 * i][g] = elem(x, bt, EMU_RG(R, bv[i])[l]);
        } else { /* 8-bit: s8, u8, e4m3, e5m2 */
            bool k32 = shape == EMU_MMA_K32;
            for (uint32_t i = 0; i < (k32 ? 16u : 8u); i++) {
                uint32_t row = k32 ? g + 8 * ((i >> 2) & 1) : g + 8 * (i >> 2);
                uint32_t col = 4 * t + (i & 3) + (k32 ? 16 * (i >> 3) : 0);
                uint64_t v = (EMU_RG(R, av[i >> 2])[l] >> (8 * (i & 3))) & 0xff;
                if (i8)
                    Ai[row][col] = at == PTX_T_S8 ? (int8_t)v : (int32_t)v;
                else
                    A[row][col] = elem(x, at, v);
            }
            for (uint32_t i = 0; i < (k32 ? 8u : 4u); i++) {
                uint32_t k = k32 ? 4 * t + (i & 3) + 16 * (i >> 2) : 4 * t + i;
                uint64_t v = (EMU_RG(R, bv[i >> 2])[l] >> (8 * (i & 3))) & 0xff;
                if (i8)
                    Bi[k][g] = bt == PTX_T_S8 ? (int8_t)v : (int32_t)v;
                else
                    B[k][g] = elem(x, bt, v);
            }
        }
    }
}

/* The common case, f16/bf16 m16n8k16, gathered by the explicit register
 * map (a0: row g, cols 2t..2t+1; a1: row g+8; a2: cols +8; a3: both;
 * b0: k 2t..2t+1; b1: k +8). always_inline lets the compiler specialise it
 * for each input type. */
__attribute__((always_inline)) static inline void gather_h16_k16(const emu_ctx *x, const uint64_t *R,
                                                                  const uint32_t *av, const uint32_t *bv,
                                                                  float A[16][32], float B[32][8], bool bf)
{
    const uint64_t *a0 = EMU_RG(R, av[0]), *a1 = EMU_RG(R, av[1]), *a2 = EMU_RG(R, av[2]),
                   *a3 = EMU_RG(R, av[3]), *b0 = EMU_RG(R, bv[0]), *b1 = EMU_RG(R, bv[1]);
#define CV(v) (bf ? num_f32((uint32_t)(v) << 16) : x->h2f[(v)])
    for (uint32_t l = 0; l < EMU_LANES; l++) {
        uint32_t g = l >> 2, t2 = 2 * (l & 3);
        uint32_t r0 = (uint32_t)a0[l], r1 = (uint32_t)a1[l], r2 = (uint32_t)a2[l], r3 = (uint32_t)a3[l];
        A[g][t2] = CV(r0 & 0xffff);
        A[g][t2 + 1] = CV(r0 >> 16);
        A[g + 8][t2] = CV(r1 & 0xffff);
        A[g + 8][t2 + 1] = CV(r1 >> 16);
        A[g][t2 + 8] = CV(r2 & 0xffff);
        A[g][t2 + 9] = CV(r2 >> 16);
        A[g + 8][t2 + 8] = CV(r3 & 0xffff);
        A[g + 8][t2 + 9] = CV(r3 >> 16);
        uint32_t q0 = (uint32_t)b0[l], q1 = (uint32_t)b1[l];
        B[t2][g] = CV(q0 & 0xffff);
        B[t2 + 1][g] = CV(q0 >> 16);
        B[t2 + 8][g] = CV(q1 & 0xffff);
        B[t2 + 9][g] = CV(q1 >> 16);
    }
#undef CV
}

void emu__mma(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m)
{
    const emu_ctx *x = c->ctx;
    uint64_t *R = w->R;
    const uint32_t *vp = c->k->vpool;
    const uint32_t *dv = vp + in->d, *av = vp + in->a, *bv = vp + in->b, *cv = vp + in->c;
    int at = in->ty2, ct = (int)((in->aux >> 8) & 0xff);
    int K = in->sub2 == EMU_MMA_K8 ? 8 : in->sub2 == EMU_MMA_K16 ? 16 : 32;
    bool i8 = at == PTX_T_S8 || at == PTX_T_U8, h = ct == PTX_T_F16;
    float A[16][32], B[32][8], D[16][8];
    int32_t Ai[16][32], Bi[32][8];
    int64_t Di[16][8];
    if (in->sub2 == EMU_MMA_K16 && at == PTX_T_F16)
        gather_h16_k16(x, R, av, bv, A, B, false);
    else if (in->sub2 == EMU_MMA_K16 && at == PTX_T_BF16)
        gather_h16_k16(x, R, av, bv, A, B, true);
    else
        gather(x, R, in, av, bv, A, B, Ai, Bi);
    /* C: c_i at row g + 8 (i >> 1), col 2t + (i & 1); register by register */
    for (uint32_t i = 0; i < 4; i++) {
        const uint64_t *cr = EMU_RG(R, h ? cv[i >> 1] : cv[i]);
        uint32_t sh = h ? 16 * (i & 1) : 0, ro = 8 * (i >> 1), co = i & 1;
        for (uint32_t l = 0; l < EMU_LANES; l++) {
            uint32_t row = (l >> 2) + ro, col = 2 * (l & 3) + co;
            uint64_t v = cr[l] >> sh;
            if (i8)
                Di[row][col] = (int32_t)(uint32_t)v;
            else
                D[row][col] = h ? f16f(x, v) : num_f32((uint32_t)v);
        }
    }
    if (i8) {
        for (int r = 0; r < 16; r++)
            for (int k = 0; k < K; k++) {
                int64_t a = Ai[r][k];
                for (int n = 0; n < 8; n++)
                    Di[r][n] += a * Bi[k][n];
            }
    } else {
        /* four rows at a time, their 8 sums each in vector registers: eight
         * independent accumulation chains hide the add latency (unrolled by
         * hand: -O2 keeps an array of vectors in memory) */
        for (int r = 0; r < 16; r += 4) {
            emu_v4f c0l, c0h, c1l, c1h, c2l, c2h, c3l, c3h;
            memcpy(&c0l, &D[r][0], 16), memcpy(&c0h, &D[r][4], 16);
            memcpy(&c1l, &D[r + 1][0], 16), memcpy(&c1h, &D[r + 1][4], 16);
            memcpy(&c2l, &D[r + 2][0], 16), memcpy(&c2h, &D[r + 2][4], 16);
            memcpy(&c3l, &D[r + 3][0], 16), memcpy(&c3h, &D[r + 3][4], 16);
            for (int k = 0; k < K; k++) {
                emu_v4f bl, bh;
                memcpy(&bl, &B[k][0], 16);
                memcpy(&bh, &B[k][4], 16);
                float x0 = A[r][k], x1 = A[r + 1][k], x2 = A[r + 2][k], x3 = A[r + 3][k];
                emu_v4f a0 = {x0, x0, x0, x0}, a1 = {x1, x1, x1, x1};
                emu_v4f a2 = {x2, x2, x2, x2}, a3 = {x3, x3, x3, x3};
                c0l += a0 * bl, c0h += a0 * bh;
                c1l += a1 * bl, c1h += a1 * bh;
                c2l += a2 * bl, c2h += a2 * bh;
                c3l += a3 * bl, c3h += a3 * bh;
            }
            memcpy(&D[r][0], &c0l, 16), memcpy(&D[r][4], &c0h, 16);
            memcpy(&D[r + 1][0], &c1l, 16), memcpy(&D[r + 1][4], &c1h, 16);
            memcpy(&D[r + 2][0], &c2l, 16), memcpy(&D[r + 2][4], &c2h, 16);
            memcpy(&D[r + 3][0], &c3l, 16), memcpy(&D[r + 3][4], &c3h, 16);
        }
    }
    /* scatter D to the lanes that executed, register by register */
    bool sat = (in->flags & EMU_IF_SATFINITE) != 0;
    for (uint32_t i = 0; i < (h ? 2u : 4u); i++) {
        uint64_t *dr = EMU_RG(R, dv[i]);
        uint32_t ro = 8 * (h ? i : i >> 1), co = h ? 0 : i & 1;
        EMU_FOR_LANES(m, l)
        {
            uint32_t row = (l >> 2) + ro, col = 2 * (l & 3) + co;
            if (h) { /* d_{2i}, d_{2i+1} packed: cols 2t and 2t + 1 */
                dr[l] = num_round(EMU_FMT_F16, (double)D[row][col], EMU_RN, 0) |
                        num_round(EMU_FMT_F16, (double)D[row][col + 1], EMU_RN, 0) << 16;
            } else if (i8) {
                int64_t v = Di[row][col];
                if (sat)
                    v = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v;
                dr[l] = (uint32_t)v;
            } else {
                uint32_t b = (uint32_t)num_f32_bits(D[row][col]);
                dr[l] = (b & 0x7fffffffu) > 0x7f800000u ? EMU_F32_QNAN : b;
            }
        }
    }
}
