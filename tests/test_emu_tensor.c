/* Emulator: ldmatrix and mma.sync. Expected values come from the lane and
 * fragment formulas of the PTX ISA (shared/ref/ptx-sm80.md sections 4-5),
 * ldmatrix against the per-lane element map restated here, each mma shape
 * against a naive matmul over fragments packed by the thread-value maps of
 * the kit's atom table (gen/kit/atom.h; tests/test_kit.c checks them
 * against the ISA figures), and a
 * cp.async + ldmatrix + mma GEMM kernel against a naive matmul. */
#include "gen/kit/atom.h"
#include "test_emu_util.h"

/* ---- f16 / bf16 / fp8 encodings for building inputs ---- */

static uint16_t f2h(float f) /* RNE f32 -> f16 for values well inside the range */
{
    uint32_t b = bitsof(f), s = (b >> 16) & 0x8000u;
    float a = fabsf(f);
    if (a == 0)
        return (uint16_t)s;
    int e;
    frexpf(a, &e);                                  /* a = m * 2^e, m in [0.5, 1) */
    int q = e - 11 < -24 ? -24 : e - 11;            /* lsb exponent */
    float m = ldexpf(a, -q), fl = floorf(m);
    float r = (m - fl > 0.5f || (m - fl == 0.5f && fmodf(fl, 2) != 0)) ? fl + 1 : fl;
    float v = ldexpf(r, q);
    frexpf(v, &e);
    if (e - 1 < -14)
        return (uint16_t)(s | (uint32_t)r);
    return (uint16_t)(s | (uint32_t)(e - 1 + 15) << 10 | ((uint32_t)ldexpf(v, 11 - e) & 1023));
}
static float h2f(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    return (h & 0x8000) ? -v : v;
}
static float bf2f(uint16_t h) { return f32of((uint32_t)h << 16); }
static float fp8f(uint8_t v, bool e5)
{
    int eb = e5 ? 5 : 4, mb = e5 ? 2 : 3, bias = e5 ? 15 : 7;
    int e = (v >> mb) & ((1 << eb) - 1), m = v & ((1 << mb) - 1);
    float r = e ? ldexpf((float)(m | (1 << mb)), e - bias - mb) : ldexpf((float)m, 1 - bias - mb);
    return (v & 0x80) ? -r : r;
}

/* ---- ldmatrix ---- */

/* Row r of matrix j lives at a scrambled shared offset; lane 8j + r passes
 * its address. x1 and x2 hand garbage addresses to the lanes that must not
 * supply rows: a read of them would be reported out of bounds. */
static void ldmatrix_case(int num, bool trans)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "tile", 16, 512);
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in"), pa = tk_ptr(&t, "addr");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID), base = R32(&t), a = R32(&t), x = R64(&t),
            r[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    ptx_reg v4[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    /* copy 512 bytes of input into the tile: 16 bytes per lane */
    E(MOV, NOM, T1(U32), ptx_r(base), ptx_sym(sm));
    E(LD, MODS(MD(GLOBAL), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v4), ptx_addr(tk_addr(&t, pi, lane, 16), 0));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(lane), ptx_imm(16), ptx_r(base));
    E(ST, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_addr(a, 0), ptx_vecr(t.f, 4, v4));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(a), ptx_addr(tk_addr(&t, pa, lane, 4), 0));
    E(ADD, NOM, T1(U32), ptx_r(a), ptx_r(a), ptx_r(base));
    ptx_mods mods = trans ? PTX_MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), num == 1 ? MD(X1) : num == 2 ? MD(X2) : MD(X4),
                                     MD(TRANS), MD(SHARED))
                          : PTX_MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), num == 1 ? MD(X1) : num == 2 ? MD(X2) : MD(X4),
                                     MD(SHARED));
    E(LDMATRIX, mods, T1(B16), ptx_vecr(t.f, num, r), ptx_addr(a, 0));
    (void)x;
    ptx_reg oa = tk_addr(&t, po, lane, 16);
    for (int j = 0; j < num; j++)
        E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(oa, 4 * j), ptx_r(r[j]));
    tk_ret(&t);
    tk_load(&t);
    uint16_t in[256];
    for (int i = 0; i < 256; i++)
        in[i] = (uint16_t)(i * 251 + 7);
    uint32_t addr[32], out[32 * 4];
    for (int l = 0; l < 32; l++)
        addr[l] = l < 8 * num ? (uint32_t)(((l * 7) % 32) * 16) : 0x40000000u; /* garbage if unused */
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dad = tk_buf(&t, addr, sizeof addr, "addr");
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout, &din, &dad};
    tk_run(&t, 1, 32, args);
    tk_get(&t, dout, out, sizeof out);
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < num; j++) {
            /* M_j[row][col] = the b16 at addr[8j + row] + 2 col */
#define M(row, col) in[(addr[8 * j + (row)] + 2 * (col)) / 2]
            uint16_t lo = trans ? M(2 * (l % 4), l / 4) : M(l / 4, 2 * (l % 4));
            uint16_t hi = trans ? M(2 * (l % 4) + 1, l / 4) : M(l / 4, 2 * (l % 4) + 1);
#undef M
            uint32_t want = lo | (uint32_t)hi << 16;
            cr_assert_eq(out[l * 4 + j], want, "ldmatrix.x%d%s lane %d reg %d: got %08x want %08x", num,
                         trans ? ".trans" : "", l, j, out[l * 4 + j], want);
        }
    tk_free(&t);
}

Test(emu_tensor, ldmatrix_x1) { ldmatrix_case(1, false); }
Test(emu_tensor, ldmatrix_x2) { ldmatrix_case(2, false); }
Test(emu_tensor, ldmatrix_x4) { ldmatrix_case(4, false); }
Test(emu_tensor, ldmatrix_x1_trans) { ldmatrix_case(1, true); }
Test(emu_tensor, ldmatrix_x2_trans) { ldmatrix_case(2, true); }
Test(emu_tensor, ldmatrix_x4_trans) { ldmatrix_case(4, true); }

/* ---- mma from fragments packed by the formulas ---- */

typedef struct mmacase {
    const char *sm;
    ptx_mod shape;
    ptx_type dt, at, bt, ct;
    int K, na, nb, ncd;
    bool satfinite;
} mmacase;

/* Kernel: each lane loads its A, B, C registers (lane-major u32 arrays),
 * runs the mma and stores D. */
static void mma_kernel(const mmacase *mc, const uint32_t *fa, const uint32_t *fb, const uint32_t *fc,
                       uint32_t *fd)
{
    tk t = tk_new(mc->sm, "k");
    ptx_reg po = tk_ptr(&t, "d"), pa = tk_ptr(&t, "a"), pb = tk_ptr(&t, "b"), pc = tk_ptr(&t, "c");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID);
    ptx_reg a[4], b[2], c[4], d[4];
    ptx_reg aa = tk_addr(&t, pa, lane, 4 * mc->na), ba = tk_addr(&t, pb, lane, 4 * mc->nb),
            ca = tk_addr(&t, pc, lane, 4 * mc->ncd), da = tk_addr(&t, po, lane, 4 * mc->ncd);
    for (int i = 0; i < mc->na; i++) {
        a[i] = R32(&t);
        E(LD, MODS(MD(GLOBAL)), T1(B32), ptx_r(a[i]), ptx_addr(aa, 4 * i));
    }
    for (int i = 0; i < mc->nb; i++) {
        b[i] = R32(&t);
        E(LD, MODS(MD(GLOBAL)), T1(B32), ptx_r(b[i]), ptx_addr(ba, 4 * i));
    }
    for (int i = 0; i < mc->ncd; i++) {
        c[i] = mc->ct == TY(F32) ? RF(&t) : R32(&t);
        d[i] = mc->ct == TY(F32) ? RF(&t) : R32(&t);
        E(LD, MODS(MD(GLOBAL)), mc->ct == TY(F32) ? T1(F32) : T1(B32), ptx_r(c[i]), ptx_addr(ca, 4 * i));
    }
    ptx_mods mods = mc->satfinite ? PTX_MODS(MD(SYNC), MD(ALIGNED), mc->shape, MD(ROW), MD(COL), MD(SATFINITE))
                                  : PTX_MODS(MD(SYNC), MD(ALIGNED), mc->shape, MD(ROW), MD(COL));
    E(MMA, mods, PTX_TYPES(mc->dt, mc->at, mc->bt, mc->ct), ptx_vecr(t.f, mc->ncd, d),
      ptx_vecr(t.f, mc->na, a), ptx_vecr(t.f, mc->nb, b), ptx_vecr(t.f, mc->ncd, c));
    for (int i = 0; i < mc->ncd; i++)
        E(ST, MODS(MD(GLOBAL)), mc->ct == TY(F32) ? T1(F32) : T1(B32), ptx_addr(da, 4 * i), ptx_r(d[i]));
    tk_ret(&t);
    tk_load(&t);
    uint64_t dd = tk_buf(&t, NULL, 32 * 4 * 4, "d"), dA = tk_buf(&t, fa, 32 * 4 * (size_t)mc->na, "a");
    uint64_t dB = tk_buf(&t, fb, 32 * 4 * (size_t)mc->nb, "b"), dC = tk_buf(&t, fc, 32 * 4 * (size_t)mc->ncd, "c");
    const void *args[] = {&dd, &dA, &dB, &dC};
    tk_run(&t, 1, 32, args);
    tk_get(&t, dd, fd, 32 * 4 * (size_t)mc->ncd);
    tk_free(&t);
}

/* Element positions from the kit's atom table (gen/kit/atom.h), the one
 * home of the fragment maps; tests/test_kit.c checks those against the
 * ISA figures (ptx-sm80.md section 5). The atom of an operand is the row
 * of the shape with that operand's type. */
static const kit_atom *atom_of(const mmacase *mc, ptx_type t)
{
    const kit_atom *at = kit_atom_find(mc->shape, t, mc->ct);
    cr_assert(at, "no atom row for %s %s", ptx_type_name(t), ptx_type_name(mc->ct));
    return at;
}
static void pos_a(const mmacase *mc, int l, int i, int *row, int *col, int *reg, int *sh)
{
    kit_tv_at(atom_of(mc, mc->at), KIT_A, l, i, row, col, reg, sh);
}
static void pos_b(const mmacase *mc, int l, int i, int *k, int *n, int *reg, int *sh)
{
    kit_tv_at(atom_of(mc, mc->bt), KIT_B, l, i, k, n, reg, sh);
}
static void pos_c(const mmacase *mc, int l, int i, int *row, int *col)
{
    int reg, sh;
    kit_tv_at(atom_of(mc, mc->at), KIT_C, l, i, row, col, &reg, &sh);
}

static int elems_a(const mmacase *mc) { return mc->at == TY(TF32) ? 4 : mc->na * 32 / ptx_type_bits(mc->at); }
static int elems_b(const mmacase *mc) { return mc->bt == TY(TF32) ? 2 : mc->nb * 32 / ptx_type_bits(mc->bt); }

static double val(ptx_type t, uint32_t bits)
{
    switch (t) {
    case TY(F16): return h2f((uint16_t)bits);
    case TY(BF16): return bf2f((uint16_t)bits);
    case TY(TF32): return f32of(bits & 0xffffe000u);
    case TY(E4M3): return fp8f((uint8_t)bits, false);
    case TY(E5M2): return fp8f((uint8_t)bits, true);
    case TY(S8): return (int8_t)bits;
    default: return (uint8_t)bits;
    }
}

static uint32_t rand_elem(ptx_type t, uint64_t *s)
{
    uint32_t r = rnd32(s);
    switch (t) {
    case TY(F16): return f2h((float)((int)(r % 2001) - 1000) / 500.0f);
    case TY(BF16): return bitsof((float)((int)(r % 2001) - 1000) / 256.0f) >> 16;
    case TY(TF32): return bitsof((float)((int)(r % 20001) - 10000) / 3000.0f) | (r & 0x1fffu);
    case TY(E4M3): return (r & 0x7f) == 0x7f ? 0x3c : r & 0xff;
    case TY(E5M2): return (r & 0x7c) == 0x7c ? 0x38 : r & 0xff;
    default: return r & 0xff;
    }
}

static void mma_check(const mmacase *mc, uint64_t seed)
{
    double A[16][32] = {{0}}, B[32][8] = {{0}}, Cm[16][8];
    uint32_t fa[32 * 4] = {0}, fb[32 * 2] = {0}, fc[32 * 4] = {0}, fd[32 * 4];
    uint64_t s = seed;
    bool ints = mc->at == TY(S8) || mc->at == TY(U8);
    uint32_t esz = mc->at == TY(TF32) ? 0xffffffffu : ptx_type_bits(mc->at) == 16 ? 0xffffu : 0xffu;
    /* A and B: random elements scattered into the lanes' registers */
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < mc->K; k++)
            A[r][k] = NAN;
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < elems_a(mc); i++) {
            int row, col, reg, sh;
            pos_a(mc, l, i, &row, &col, &reg, &sh);
            uint32_t e = rand_elem(mc->at, &s) & esz;
            fa[l * mc->na + reg] |= e << sh;
            cr_assert(isnan(A[row][col]), "A(%d,%d) covered twice", row, col);
            A[row][col] = val(mc->at, e);
        }
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < mc->K; k++)
            cr_assert(!isnan(A[r][k]), "A(%d,%d) not covered", r, k);
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < elems_b(mc); i++) {
            int k, n, reg, sh;
            pos_b(mc, l, i, &k, &n, &reg, &sh);
            uint32_t e = rand_elem(mc->bt, &s) & (mc->bt == TY(TF32) ? 0xffffffffu : ptx_type_bits(mc->bt) == 16 ? 0xffffu : 0xffu);
            fb[l * mc->nb + reg] |= e << sh;
            B[k][n] = val(mc->bt, e);
        }
    /* C: c_i of lane l at pos_c */
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            int row, col;
            pos_c(mc, l, i, &row, &col);
            uint32_t bits;
            if (ints) {
                int32_t v = (int32_t)(rnd32(&s) % 20001) - 10000;
                if (mc->satfinite && i == 0)
                    v = (l & 1) ? INT32_MAX - 5 : INT32_MIN + 5;
                bits = (uint32_t)v;
                Cm[row][col] = v;
            } else if (mc->ct == TY(F16)) {
                bits = f2h((float)((int)(rnd32(&s) % 201) - 100) / 50.0f);
                Cm[row][col] = h2f((uint16_t)bits);
            } else {
                float v = (float)((int)(rnd32(&s) % 2001) - 1000) / 100.0f;
                bits = bitsof(v);
                Cm[row][col] = v;
            }
            if (mc->ct == TY(F16))
                fc[l * 2 + (i >> 1)] |= bits << (16 * (i & 1));
            else
                fc[l * 4 + i] = bits;
        }
    mma_kernel(mc, fa, fb, fc, fd);
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            int row, col;
            pos_c(mc, l, i, &row, &col);
            double want = Cm[row][col], mag = fabs(Cm[row][col]);
            for (int k = 0; k < mc->K; k++) {
                want += A[row][k] * B[k][col];
                mag += fabs(A[row][k] * B[k][col]);
            }
            if (ints) {
                int64_t w = (int64_t)want;
                if (mc->satfinite)
                    w = w > INT32_MAX ? INT32_MAX : w < INT32_MIN ? INT32_MIN : w;
                else
                    w = (int32_t)(uint32_t)(uint64_t)w;
                cr_assert_eq((int32_t)fd[l * 4 + i], (int32_t)w, "int mma lane %d d%d", l, i);
            } else if (mc->ct == TY(F16)) {
                double got = h2f((uint16_t)(fd[l * 2 + (i >> 1)] >> (16 * (i & 1))));
                cr_assert(fabs(got - want) <= 1e-3 * mag + fabs(want) * 1e-3 + 1e-3, "f16 mma lane %d d%d: %g vs %g", l,
                          i, got, want);
            } else {
                double got = f32of(fd[l * 4 + i]);
                cr_assert(fabs(got - want) <= 1e-6 * mag + 1e-6, "mma %s lane %d d%d: got %.9g want %.9g",
                          ptx_type_name(mc->at), l, i, got, want);
            }
        }
}

Test(emu_tensor, mma_m16n8k16_f16_f32)
{
    mmacase mc = {"sm_80", MD(M16N8K16), TY(F32), TY(F16), TY(F16), TY(F32), 16, 4, 2, 4, false};
    mma_check(&mc, 1);
}
Test(emu_tensor, mma_m16n8k16_bf16_f32)
{
    mmacase mc = {"sm_80", MD(M16N8K16), TY(F32), TY(BF16), TY(BF16), TY(F32), 16, 4, 2, 4, false};
    mma_check(&mc, 2);
}
Test(emu_tensor, mma_m16n8k16_f16_f16)
{
    mmacase mc = {"sm_80", MD(M16N8K16), TY(F16), TY(F16), TY(F16), TY(F16), 16, 4, 2, 2, false};
    mma_check(&mc, 3);
}
Test(emu_tensor, mma_m16n8k8_f16_f32)
{
    mmacase mc = {"sm_80", MD(M16N8K8), TY(F32), TY(F16), TY(F16), TY(F32), 8, 2, 1, 4, false};
    mma_check(&mc, 4);
}
Test(emu_tensor, mma_m16n8k8_tf32)
{
    mmacase mc = {"sm_80", MD(M16N8K8), TY(F32), TY(TF32), TY(TF32), TY(F32), 8, 4, 2, 4, false};
    mma_check(&mc, 5);
}
Test(emu_tensor, mma_m16n8k32_int8)
{
    static const ptx_type ty[] = {TY(S8), TY(U8)};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int sat = 0; sat < 2; sat++) {
                mmacase mc = {"sm_80", MD(M16N8K32), TY(S32), ty[a], ty[b], TY(S32), 32, 4, 2, 4, sat};
                mma_check(&mc, (uint64_t)(10 + a * 4 + b * 2 + sat));
            }
}
Test(emu_tensor, mma_m16n8k16_int8)
{
    mmacase mc = {"sm_80", MD(M16N8K16), TY(S32), TY(S8), TY(U8), TY(S32), 16, 2, 1, 4, false};
    mma_check(&mc, 20);
}
Test(emu_tensor, mma_m16n8k32_fp8)
{
    static const ptx_type ty[] = {TY(E4M3), TY(E5M2)};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            mmacase mc = {"sm_89", MD(M16N8K32), TY(F32), ty[a], ty[b], TY(F32), 32, 4, 2, 4, false};
            mma_check(&mc, (uint64_t)(30 + a * 2 + b));
        }
}

/* ---- the warp GEMM of ptx-sm80.md section 10 ---- */

/* One warp per 16x8 tile of C = A (MxK, row-major) * B, B given n-major as
 * Bt (NxK). Per k-step of 16: cp.async A (32 x 16 B) and Bt (16 x 16 B)
 * into shared, commit, wait_group 0, bar.sync, ldmatrix.x4 A, ldmatrix.x2
 * B (or .x2.trans from a k-major copy), mma, bar.sync. */
static void gemm_case(bool btrans)
{
    enum { M = 32, N = 16, K = 64 };
    tk t = tk_new("sm_80", "gemm");
    const char *sm = ptx_shared_add(t.f, "smem", 128, 4 * 768);
    ptx_reg pc = tk_ptr(&t, "C"), pa = tk_ptr(&t, "A"), pb = tk_ptr(&t, "B");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID), tid = tk_sreg(&t, PTX_S_TID_X), warp = R32(&t),
            tm = R32(&t), tn = R32(&t), sbase = R32(&t), sa = R32(&t), sb = R32(&t), r = R32(&t),
            cl = R32(&t), kk = R32(&t), p = RP(&t), pl = RP(&t);
    ptx_reg acc[4] = {RF(&t), RF(&t), RF(&t), RF(&t)};
    ptx_reg fa[4] = {R32(&t), R32(&t), R32(&t), R32(&t)}, fb[2] = {R32(&t), R32(&t)};
    /* warp w handles tile (tm, tn) = (w / 2, w % 2); smem region 768 B each */
    E(SHR, NOM, T1(U32), ptx_r(warp), ptx_r(tid), ptx_imm(5));
    E(SHR, NOM, T1(U32), ptx_r(tm), ptx_r(warp), ptx_imm(1));
    E(AND, NOM, T1(B32), ptx_r(tn), ptx_r(warp), ptx_imm(1));
    E(MOV, NOM, T1(U32), ptx_r(sbase), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sbase), ptx_r(warp), ptx_imm(768), ptx_r(sbase));
    for (int i = 0; i < 4; i++)
        E(MOV, NOM, T1(F32), ptx_r(acc[i]), ptx_f32(0.0f));
    /* cp.async sources: A row = 16 tm + lane / 2, k half = lane & 1;
     * Bt row = 8 tn + lane / 2 (lanes < 16) */
    ptx_reg ar = R32(&t), ga = R64(&t), gb = R64(&t), dA = R32(&t), dB = R32(&t), t1 = R32(&t);
    E(SHR, NOM, T1(U32), ptx_r(ar), ptx_r(lane), ptx_imm(1));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(t1), ptx_r(tm), ptx_imm(16), ptx_r(ar));     /* A row */
    E(AND, NOM, T1(B32), ptx_r(cl), ptx_r(lane), ptx_imm(1));
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(cl), ptx_r(cl), ptx_imm(8));                  /* k offset */
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(t1), ptx_r(t1), ptx_imm(K), ptx_r(cl));
    ga = tk_addr(&t, pa, t1, 2);
    if (!btrans) {
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(t1), ptx_r(tn), ptx_imm(8), ptx_r(ar));   /* Bt row */
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(t1), ptx_r(t1), ptx_imm(K), ptx_r(cl));
    } else { /* k-major B[k][n]: lane supplies row k = lane (of 16), 8 halves of n */
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(t1), ptx_r(lane), ptx_imm(N), ptx_imm(0));
        ptx_reg nt = R32(&t);
        E(MUL, MODS(MD(LO)), T1(U32), ptx_r(nt), ptx_r(tn), ptx_imm(8));
        E(ADD, NOM, T1(U32), ptx_r(t1), ptx_r(t1), ptx_r(nt));
    }
    gb = tk_addr(&t, pb, t1, 2);
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(dA), ptx_r(lane), ptx_imm(16), ptx_r(sbase)); /* A tile: row-major 16x16 */
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(dB), ptx_r(lane), ptx_imm(16), ptx_r(sbase));
    E(ADD, NOM, T1(U32), ptx_r(dB), ptx_r(dB), ptx_imm(512));
    /* ldmatrix addresses: A &As[l % 16][(l / 16) * 8]; Bt &Bs[l % 8][((l / 8) & 1) * 8];
     * B k-major: &Bs[l % 16][0] */
    ptx_reg q = R32(&t), w2 = R32(&t);
    E(AND, NOM, T1(B32), ptx_r(q), ptx_r(lane), ptx_imm(15));
    E(SHR, NOM, T1(U32), ptx_r(w2), ptx_r(lane), ptx_imm(4));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sa), ptx_r(q), ptx_imm(32), ptx_r(sbase));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sa), ptx_r(w2), ptx_imm(16), ptx_r(sa));
    if (!btrans) {
        E(AND, NOM, T1(B32), ptx_r(q), ptx_r(lane), ptx_imm(7));
        E(SHR, NOM, T1(U32), ptx_r(w2), ptx_r(lane), ptx_imm(3));
        E(AND, NOM, T1(B32), ptx_r(w2), ptx_r(w2), ptx_imm(1));
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sb), ptx_r(q), ptx_imm(32), ptx_r(sbase));
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sb), ptx_r(w2), ptx_imm(16), ptx_r(sb));
    } else
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sb), ptx_r(q), ptx_imm(16), ptx_r(sbase));
    E(ADD, NOM, T1(U32), ptx_r(sb), ptx_r(sb), ptx_imm(512));
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(pl), ptx_r(lane), ptx_imm(16));
    E(MOV, NOM, T1(U32), ptx_r(kk), ptx_imm(0));
    int loop = ptx_label_new(t.f);
    ptx_label_place(t.f, loop);
    E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(dA, 0), ptx_addr(ga, 0), ptx_imm(16));
    ptx_guard(ptx_emit(t.f, OP(CP_ASYNC), MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(dB, 0),
                       ptx_addr(gb, 0), ptx_imm(16)), pl, false);
    E0(CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
    E(CP_ASYNC_WAIT, NOM, PTX_NOTYPES, ptx_imm(0));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(LDMATRIX, MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), MD(X4), MD(SHARED)), T1(B16), ptx_vecr(t.f, 4, fa),
      ptx_addr(sa, 0));
    if (!btrans)
        E(LDMATRIX, MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), MD(X2), MD(SHARED)), T1(B16), ptx_vecr(t.f, 2, fb),
          ptx_addr(sb, 0));
    else
        E(LDMATRIX, MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), MD(X2), MD(TRANS), MD(SHARED)), T1(B16),
          ptx_vecr(t.f, 2, fb), ptx_addr(sb, 0));
    E(MMA, MODS(MD(SYNC), MD(ALIGNED), MD(M16N8K16), MD(ROW), MD(COL)), PTX_TYPES(TY(F32), TY(F16), TY(F16), TY(F32)),
      ptx_vecr(t.f, 4, acc), ptx_vecr(t.f, 4, fa), ptx_vecr(t.f, 2, fb), ptx_vecr(t.f, 4, acc));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(ADD, NOM, T1(S64), ptx_r(ga), ptx_r(ga), ptx_imm(32));
    E(ADD, NOM, T1(S64), ptx_r(gb), ptx_r(gb), ptx_imm(btrans ? 16 * N * 2 : 32));
    E(ADD, NOM, T1(U32), ptx_r(kk), ptx_r(kk), ptx_imm(16));
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(p), ptx_r(kk), ptx_imm(K));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(loop)), p, false);
    /* C rows g and g + 8, cols 2t, 2t+1 of the tile */
    ptx_reg g = R32(&t), tt = R32(&t), row = R32(&t), col = R32(&t), idx = R32(&t);
    E(SHR, NOM, T1(U32), ptx_r(g), ptx_r(lane), ptx_imm(2));
    E(AND, NOM, T1(B32), ptx_r(tt), ptx_r(lane), ptx_imm(3));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(row), ptx_r(tm), ptx_imm(16), ptx_r(g));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(col), ptx_r(tn), ptx_imm(8), ptx_imm(0));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(col), ptx_r(tt), ptx_imm(2), ptx_r(col));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(idx), ptx_r(row), ptx_imm(N), ptx_r(col));
    ptx_reg oa = tk_addr(&t, pc, idx, 4);
    E(ST, MODS(MD(GLOBAL), MD(V2)), T1(F32), ptx_addr(oa, 0), ptx_vecr(t.f, 2, acc));
    E(ST, MODS(MD(GLOBAL), MD(V2)), T1(F32), ptx_addr(oa, 8 * N * 4), ptx_vecr(t.f, 2, acc + 2));
    (void)r;
    tk_ret(&t);
    tk_load(&t);
    uint16_t A[M * K], B[K * N], Bt[N * K];
    float C[M * N];
    uint64_t s = 99;
    for (int i = 0; i < M * K; i++)
        A[i] = f2h((float)((int)(rnd32(&s) % 2001) - 1000) / 512.0f);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            B[k * N + n] = f2h((float)((int)(rnd32(&s) % 2001) - 1000) / 512.0f);
            Bt[n * K + k] = B[k * N + n];
        }
    uint64_t bufA = tk_buf(&t, A, sizeof A, "A"), bufB = tk_buf(&t, btrans ? (void *)B : (void *)Bt, sizeof B, "B");
    uint64_t bufC = tk_buf(&t, NULL, sizeof C, "C");
    const void *args[] = {&bufC, &bufA, &bufB};
    tk_run(&t, 1, 32 * (M / 16) * (N / 8), args);
    tk_get(&t, bufC, C, sizeof C);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                want += (double)h2f(A[m * K + k]) * h2f(B[k * N + n]);
                mag += fabs((double)h2f(A[m * K + k]) * h2f(B[k * N + n]));
            }
            cr_assert(fabs(C[m * N + n] - want) <= 1e-6 * mag + 1e-6, "C[%d][%d] = %g, want %g", m, n,
                      (double)C[m * N + n], want);
        }
    tk_free(&t);
}

Test(emu_tensor, gemm_cp_async_ldmatrix_mma) { gemm_case(false); }
Test(emu_tensor, gemm_ldmatrix_trans_b) { gemm_case(true); }
