/* Emulator throughput: lane-instructions per second on warp-level tensor
 * core GEMM kernels (cp.async -> bar.sync -> ldmatrix -> mma.sync), with
 * the detectors on and off, serial and on worker threads.
 *
 *   emu_bench [M N K] [threads] [only]     only: e.g. "tile32x32:on" runs one case
 *
 * Kernels: "tile16x8" (the digest's gemm_warp: one m16n8k16 per k-step) and
 * "tile32x32" (a 32x32 warp tile: 8 mma and 4 ldmatrix.x4 per k-step);
 * "wgmma" (only: "wgmma"): a bf16 sm_90a GEMM, one warpgroup per 64x256
 * tile, 64-wide K tiles copied into 128B-swizzled K-major shared memory with
 * ld.global/st.shared, fence.proxy.async, then 4 wgmma.m64n256k16 per tile
 * (lane-instructions and wgmma flops per second, every detector on);
 * "wgmma-ws" (only: "wgmma-ws"): the issue 12 acceptance kernel
 * tests/ptx/sm90/gemm_ws_bf16.ptx (read from $PTXTUNE_TESTS_DIR, default
 * ./tests: run from the repository root), a warp-specialised bf16 GEMM (TMA
 * producer warpgroup, two wgmma m64n256k16 consumer warpgroups, a 4-stage
 * mbarrier ring), M % 128 == N % 256 == K % 64 == 0. */
#include "ptx/emu/emu.h"
#include "ptx/ir.h"

#include <math.h>
#include <stdio.h>

#include "gen/gemm.h"
#include "gen/kit/atom.h"
#include "ptx/emu/tmap.h"
#include "ptx/parse.h"
#include "tuner/emu_check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Process CPU seconds: a throughput per CPU-second is stable on a busy
 * machine, where wall-clock numbers are not. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define MD(x) PTX_M_##x
#define TY(x) PTX_T_##x
#define OP(x) PTX_OP_##x
#define E(op, mods, types, ...) ptx_emit(f, OP(op), mods, types, __VA_ARGS__)
#define T1(x) PTX_T1(PTX_T_##x)
#define MODS PTX_MODS
#define NOM PTX_NOMODS

static ptx_reg r32(ptx_fn *f) { return ptx_reg_new(f, TY(B32)); }
static ptx_reg r64(ptx_fn *f) { return ptx_reg_new(f, TY(B64)); }

static ptx_reg ptr_param(ptx_fn *f, const char *name)
{
    const char *p = ptx_param_ptr(f, name, 0);
    ptx_reg r = r64(f), g = r64(f);
    E(LD, MODS(MD(PARAM)), T1(U64), ptx_r(r), ptx_saddr(p, 0));
    E(CVTA, MODS(MD(TO), MD(GLOBAL)), T1(U64), ptx_r(g), ptx_r(r));
    return g;
}

static ptx_reg u32_param(ptx_fn *f, const char *name)
{
    const char *p = ptx_param_add(f, name, TY(U32));
    ptx_reg r = r32(f);
    E(LD, MODS(MD(PARAM)), T1(U32), ptx_r(r), ptx_saddr(p, 0));
    return r;
}

static ptx_reg sreg(ptx_fn *f, ptx_sreg s)
{
    ptx_reg r = r32(f);
    E(MOV, NOM, T1(U32), ptx_r(r), ptx_sr(s));
    return r;
}

/* g + 2 * (row * ld + col) as a 64-bit address */
static ptx_reg elem_addr(ptx_fn *f, ptx_reg base, ptx_reg row, ptx_reg ld, ptx_reg col, int esz)
{
    ptx_reg i = r32(f), o = r64(f), a = r64(f);
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(i), ptx_r(row), ptx_r(ld), ptx_r(col));
    E(MUL, MODS(MD(WIDE)), T1(U32), ptx_r(o), ptx_r(i), ptx_imm(esz));
    E(ADD, NOM, T1(S64), ptx_r(a), ptx_r(base), ptx_r(o));
    return a;
}

/* C (MxN f32) = A (MxK f16, row-major) * B (KxN f16, row-major). Each warp
 * owns a WM x WN tile (WM = 16 * mt, WN = 8 * nt); 4 warps per CTA. Per
 * k-step of 16 the warp copies its A rows (WM x 32 B) and B rows (16 x WN*2 B)
 * with cp.async into its shared slice, waits, bar.syncs, loads fragments
 * with ldmatrix.x4 (A) and ldmatrix.x2/.x4.trans (B) and issues mt * nt mma. */
static ptx_module *build(int mt, int nt)
{
    pt_target tg;
    pt_err e = {0};
    pt_target_parse("sm_80", &tg, &e);
    ptx_module *m = ptx_module_new(&tg, 90);
    ptx_fn *f = ptx_fn_new(m, "gemm");
    int WM = 16 * mt, WN = 8 * nt, abytes = WM * 32, bbytes = 16 * WN * 2, slice = abytes + bbytes;
    const char *sm = ptx_shared_add(f, "smem", 128, 4 * slice);
    ptx_reg pc = ptr_param(f, "C"), pa = ptr_param(f, "A"), pb = ptr_param(f, "B");
    ptx_reg N = u32_param(f, "N"), K = u32_param(f, "K");
    ptx_reg lane = sreg(f, PTX_S_LANEID), tid = sreg(f, PTX_S_TID_X), cta = sreg(f, PTX_S_CTAID_X);
    ptx_reg warp = r32(f), tile = r32(f), ntn = r32(f), tm = r32(f), tn = r32(f), sbase = r32(f);
    E(SHR, NOM, T1(U32), ptx_r(warp), ptx_r(tid), ptx_imm(5));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(tile), ptx_r(cta), ptx_imm(4), ptx_r(warp));
    E(DIV, NOM, T1(U32), ptx_r(ntn), ptx_r(N), ptx_imm(WN));
    E(DIV, NOM, T1(U32), ptx_r(tm), ptx_r(tile), ptx_r(ntn));
    E(REM, NOM, T1(U32), ptx_r(tn), ptx_r(tile), ptx_r(ntn));
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(tm), ptx_r(tm), ptx_imm(WM));
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(tn), ptx_r(tn), ptx_imm(WN));
    E(MOV, NOM, T1(U32), ptx_r(sbase), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sbase), ptx_r(warp), ptx_imm(slice), ptx_r(sbase));
    ptx_reg acc[8][4][4];
    for (int i = 0; i < mt; i++)
        for (int j = 0; j < nt; j++)
            for (int k = 0; k < 4; k++) {
                acc[i][j][k] = ptx_reg_new(f, TY(F32));
                E(MOV, NOM, T1(F32), ptx_r(acc[i][j][k]), ptx_f32(0.0f));
            }
    /* cp.async plan: A tile rows WM x 2 chunks of 16 B; lane copies chunks
     * lane, lane + 32, ...; B rows 16 x (WN / 8) chunks */
    int achunks = WM * 2, bchunks = 16 * WN / 8;
    ptx_reg ga[8], da[8], gb[8], db[8];
    for (int c = 0; c < achunks / 32; c++) {
        ptx_reg ch = r32(f), row = r32(f), col = r32(f);
        E(ADD, NOM, T1(U32), ptx_r(ch), ptx_r(lane), ptx_imm(32 * c));
        E(SHR, NOM, T1(U32), ptx_r(row), ptx_r(ch), ptx_imm(1));
        E(AND, NOM, T1(B32), ptx_r(col), ptx_r(ch), ptx_imm(1));
        E(MUL, MODS(MD(LO)), T1(U32), ptx_r(col), ptx_r(col), ptx_imm(8));
        ptx_reg grow = r32(f);
        E(ADD, NOM, T1(U32), ptx_r(grow), ptx_r(row), ptx_r(tm));
        ga[c] = elem_addr(f, pa, grow, K, col, 2);
        da[c] = r32(f);
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(da[c]), ptx_r(ch), ptx_imm(16), ptx_r(sbase));
    }
    int bpl = bchunks < 32 ? bchunks : 32;
    for (int c = 0; c < (bchunks + 31) / 32; c++) {
        ptx_reg ch = r32(f), row = r32(f), col = r32(f);
        E(ADD, NOM, T1(U32), ptx_r(ch), ptx_r(lane), ptx_imm(32 * c));
        E(DIV, NOM, T1(U32), ptx_r(row), ptx_r(ch), ptx_imm(WN / 8));
        E(REM, NOM, T1(U32), ptx_r(col), ptx_r(ch), ptx_imm(WN / 8));
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(col), ptx_r(col), ptx_imm(8), ptx_r(tn));
        gb[c] = elem_addr(f, pb, row, N, col, 2);
        db[c] = r32(f);
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(db[c]), ptx_r(ch), ptx_imm(16), ptx_r(sbase));
        E(ADD, NOM, T1(U32), ptx_r(db[c]), ptx_r(db[c]), ptx_imm(abytes));
    }
    ptx_reg pl = ptx_reg_new(f, TY(PRED));
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(pl), ptx_r(lane), ptx_imm(bpl));
    /* ldmatrix addresses: A sub-tile i: &As[16 i + l % 16][(l / 16) * 8];
     * B (k-major, .trans) n8 pair j: &Bs[l % 16][16 j + (l / 16) * 8] */
    ptx_reg q = r32(f), h = r32(f), lda[8], ldb[8];
    E(AND, NOM, T1(B32), ptx_r(q), ptx_r(lane), ptx_imm(15));
    E(SHR, NOM, T1(U32), ptx_r(h), ptx_r(lane), ptx_imm(4));
    for (int i = 0; i < mt; i++) {
        lda[i] = r32(f);
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(lda[i]), ptx_r(q), ptx_imm(32), ptx_r(sbase));
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(lda[i]), ptx_r(h), ptx_imm(16), ptx_r(lda[i]));
        E(ADD, NOM, T1(U32), ptx_r(lda[i]), ptx_r(lda[i]), ptx_imm(i * 16 * 32));
    }
    for (int j = 0; j < (nt + 1) / 2; j++) {
        ldb[j] = r32(f);
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(ldb[j]), ptx_r(q), ptx_imm(WN * 2), ptx_r(sbase));
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(ldb[j]), ptx_r(h), ptx_imm(16), ptx_r(ldb[j]));
        E(ADD, NOM, T1(U32), ptx_r(ldb[j]), ptx_r(ldb[j]), ptx_imm(abytes + j * 32));
    }
    ptx_reg kk = r32(f), p = ptx_reg_new(f, TY(PRED)), bstep = r32(f);
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(bstep), ptx_r(N), ptx_imm(32));
    ptx_reg bstep64 = r64(f);
    E(CVT, NOM, PTX_TYPES(TY(U64), TY(U32)), ptx_r(bstep64), ptx_r(bstep));
    E(MOV, NOM, T1(U32), ptx_r(kk), ptx_imm(0));
    int loop = ptx_label_new(f);
    ptx_label_place(f, loop);
    for (int c = 0; c < achunks / 32; c++)
        E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(da[c], 0), ptx_addr(ga[c], 0),
          ptx_imm(16));
    for (int c = 0; c < (bchunks + 31) / 32; c++) {
        ptx_ins *in = E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(db[c], 0),
                        ptx_addr(gb[c], 0), ptx_imm(16));
        if (bchunks < 32)
            ptx_guard(in, pl, false);
    }
    ptx_emit0(f, OP(CP_ASYNC_COMMIT), NOM, PTX_NOTYPES);
    E(CP_ASYNC_WAIT, NOM, PTX_NOTYPES, ptx_imm(0));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    ptx_reg fa[8][4], fb[8][2];
    for (int i = 0; i < mt; i++) {
        for (int k = 0; k < 4; k++)
            fa[i][k] = r32(f);
        E(LDMATRIX, MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), MD(X4), MD(SHARED)), T1(B16), ptx_vecr(f, 4, fa[i]),
          ptx_addr(lda[i], 0));
    }
    for (int j = 0; j < (nt + 1) / 2; j++) {
        ptx_reg v[4] = {r32(f), r32(f), r32(f), r32(f)};
        if (2 * j + 1 < nt) {
            E(LDMATRIX, MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), MD(X4), MD(TRANS), MD(SHARED)), T1(B16),
              ptx_vecr(f, 4, v), ptx_addr(ldb[j], 0));
            fb[2 * j + 1][0] = v[2], fb[2 * j + 1][1] = v[3];
        } else /* a last, odd n8 tile: rows from lanes 0..15 only */
            E(LDMATRIX, MODS(MD(SYNC), MD(ALIGNED), MD(M8N8), MD(X2), MD(TRANS), MD(SHARED)), T1(B16),
              ptx_vecr(f, 2, v), ptx_addr(ldb[j], 0));
        fb[2 * j][0] = v[0], fb[2 * j][1] = v[1];
    }
    for (int i = 0; i < mt; i++)
        for (int j = 0; j < nt; j++)
            E(MMA, MODS(MD(SYNC), MD(ALIGNED), MD(M16N8K16), MD(ROW), MD(COL)),
              PTX_TYPES(TY(F32), TY(F16), TY(F16), TY(F32)), ptx_vecr(f, 4, acc[i][j]), ptx_vecr(f, 4, fa[i]),
              ptx_vecr(f, 2, fb[j]), ptx_vecr(f, 4, acc[i][j]));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    for (int c = 0; c < achunks / 32; c++)
        E(ADD, NOM, T1(S64), ptx_r(ga[c]), ptx_r(ga[c]), ptx_imm(32));
    for (int c = 0; c < (bchunks + 31) / 32; c++)
        E(ADD, NOM, T1(S64), ptx_r(gb[c]), ptx_r(gb[c]), ptx_r(bstep64));
    E(ADD, NOM, T1(U32), ptx_r(kk), ptx_r(kk), ptx_imm(16));
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(p), ptx_r(kk), ptx_r(K));
    ptx_guard(E(BRA, NOM, PTX_NOTYPES, ptx_lbl(loop)), p, false);
    ptx_reg g = r32(f), t = r32(f);
    E(SHR, NOM, T1(U32), ptx_r(g), ptx_r(lane), ptx_imm(2));
    E(AND, NOM, T1(B32), ptx_r(t), ptx_r(lane), ptx_imm(3));
    E(SHL, NOM, T1(B32), ptx_r(t), ptx_r(t), ptx_imm(1));
    for (int i = 0; i < mt; i++)
        for (int j = 0; j < nt; j++) {
            ptx_reg row = r32(f), col = r32(f);
            E(ADD, NOM, T1(U32), ptx_r(row), ptx_r(tm), ptx_r(g));
            E(ADD, NOM, T1(U32), ptx_r(row), ptx_r(row), ptx_imm(16 * i));
            E(ADD, NOM, T1(U32), ptx_r(col), ptx_r(tn), ptx_r(t));
            E(ADD, NOM, T1(U32), ptx_r(col), ptx_r(col), ptx_imm(8 * j));
            ptx_reg a = elem_addr(f, pc, row, N, col, 4);
            E(ST, MODS(MD(GLOBAL), MD(V2)), T1(F32), ptx_addr(a, 0), ptx_vecr(f, 2, acc[i][j]));
            ptx_reg row8 = r32(f);
            E(ADD, NOM, T1(U32), ptx_r(row8), ptx_r(row), ptx_imm(8));
            a = elem_addr(f, pc, row8, N, col, 4);
            E(ST, MODS(MD(GLOBAL), MD(V2)), T1(F32), ptx_addr(a, 0), ptx_vecr(f, 2, acc[i][j] + 2));
        }
    ptx_emit0(f, OP(RET), NOM, PTX_NOTYPES);
    if (ptx_module_finish(m)) {
        fprintf(stderr, "build: %s\n", ptx_module_errmsg(m));
        exit(1);
    }
    free(ptx_print(m)); /* sets PTX line numbers for reports */
    return m;
}

/* ---- the wgmma GEMM (sm_90a) ---- */

/* C (M x N f32) = A (M x K bf16, K contiguous) B^T (B: N x K bf16, K
 * contiguous), M % 64 == N % 256 == K % 64 == 0. */
static ptx_module *build_wgmma(void)
{
    pt_target tg;
    pt_err e = {0};
    pt_target_parse("sm_90a", &tg, &e);
    ptx_module *m = ptx_module_new(&tg, 90);
    ptx_fn *f = ptx_fn_new(m, "gemm_wgmma");
    const char *sa = ptx_shared_add(f, "sA", 1024, 64 * 128), *sb = ptx_shared_add(f, "sB", 1024, 256 * 128);
    ptx_reg pc = ptr_param(f, "C"), pa = ptr_param(f, "A"), pb = ptr_param(f, "B");
    ptx_reg N = u32_param(f, "N"), K = u32_param(f, "K");
    ptx_reg tid = sreg(f, PTX_S_TID_X), cta = sreg(f, PTX_S_CTAID_X), ntn = r32(f), tm = r32(f), tn = r32(f);
    E(SHR, NOM, T1(U32), ptx_r(ntn), ptx_r(N), ptx_imm(8));
    E(DIV, NOM, T1(U32), ptx_r(tm), ptx_r(cta), ptx_r(ntn));
    E(REM, NOM, T1(U32), ptx_r(tn), ptx_r(cta), ptx_r(ntn));
    E(SHL, NOM, T1(B32), ptx_r(tm), ptx_r(tm), ptx_imm(6));
    E(SHL, NOM, T1(B32), ptx_r(tn), ptx_r(tn), ptx_imm(8));
    /* chunk c = tid + 128 j: row c / 8, 16-byte chunk c % 8 = tid % 8, stored
     * at chunk ^ (row % 8) = (tid % 8) ^ (tid / 8 % 8) (128B swizzle) */
    ptx_reg ch = r32(f), r8 = r32(f), sw = r32(f), row0 = r32(f), col = r32(f);
    E(AND, NOM, T1(B32), ptx_r(ch), ptx_r(tid), ptx_imm(7));
    E(SHR, NOM, T1(U32), ptx_r(row0), ptx_r(tid), ptx_imm(3));
    E(AND, NOM, T1(B32), ptx_r(r8), ptx_r(row0), ptx_imm(7));
    E(XOR, NOM, T1(B32), ptx_r(sw), ptx_r(ch), ptx_r(r8));
    E(SHL, NOM, T1(B32), ptx_r(sw), ptx_r(sw), ptx_imm(4));
    E(SHL, NOM, T1(B32), ptx_r(col), ptx_r(ch), ptx_imm(3));
    ptx_reg ga[20], so[20];
    for (int j = 0; j < 20; j++) {
        bool isa = j < 4;
        int jj = isa ? j : j - 4;
        ptx_reg row = r32(f), grow = r32(f), s = r32(f);
        E(ADD, NOM, T1(U32), ptx_r(row), ptx_r(row0), ptx_imm(16 * jj));
        E(ADD, NOM, T1(U32), ptx_r(grow), ptx_r(row), ptx_r(isa ? tm : tn));
        ga[j] = elem_addr(f, isa ? pa : pb, grow, K, col, 2);
        E(MOV, NOM, T1(U32), ptx_r(s), ptx_sym(isa ? sa : sb));
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(s), ptx_r(row), ptx_imm(128), ptx_r(s));
        E(ADD, NOM, T1(U32), ptx_r(s), ptx_r(s), ptx_r(sw));
        so[j] = s;
    }
    ptx_reg desc[2];
    for (int i = 0; i < 2; i++) {
        ptx_reg a = r32(f), d = r64(f);
        E(MOV, NOM, T1(U32), ptx_r(a), ptx_sym(i ? sb : sa));
        E(CVT, NOM, PTX_TYPES(TY(U64), TY(U32)), ptx_r(d), ptx_r(a));
        E(SHR, NOM, T1(B64), ptx_r(d), ptx_r(d), ptx_imm(4));
        E(AND, NOM, T1(B64), ptx_r(d), ptx_r(d), ptx_imm(0x3fff));
        E(OR, NOM, T1(B64), ptx_r(d), ptx_r(d), ptx_hex((int64_t)kit_wgmma_desc(0, 16, 1024, 128)));
        desc[i] = d;
    }
    ptx_reg acc[128];
    for (int i = 0; i < 128; i++) {
        acc[i] = ptx_reg_new(f, TY(F32));
        E(MOV, NOM, T1(F32), ptx_r(acc[i]), ptx_f32(0.0f));
    }
    ptx_reg kk = r32(f), p = ptx_reg_new(f, TY(PRED));
    E(MOV, NOM, T1(U32), ptx_r(kk), ptx_imm(0));
    int loop = ptx_label_new(f);
    ptx_label_place(f, loop);
    for (int j = 0; j < 20; j++) {
        ptx_reg v[4] = {r32(f), r32(f), r32(f), r32(f)};
        E(LD, MODS(MD(GLOBAL), MD(V4)), T1(U32), ptx_vecr(f, 4, v), ptx_addr(ga[j], 0));
        E(ST, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_addr(so[j], 0), ptx_vecr(f, 4, v));
        E(ADD, NOM, T1(S64), ptx_r(ga[j]), ptx_r(ga[j]), ptx_imm(128));
    }
    ptx_emit0(f, OP(FENCE_PROXY_ASYNC), MODS(MD(SHARED_CTA)), PTX_NOTYPES);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    ptx_emit0(f, OP(WGMMA_FENCE), MODS(MD(SYNC), MD(ALIGNED)), PTX_NOTYPES);
    for (int s = 0; s < 4; s++) { /* k16 steps: start + 32 bytes */
        ptx_reg da = desc[0], db = desc[1];
        if (s) {
            da = r64(f), db = r64(f);
            E(ADD, NOM, T1(S64), ptx_r(da), ptx_r(desc[0]), ptx_imm(2 * s));
            E(ADD, NOM, T1(S64), ptx_r(db), ptx_r(desc[1]), ptx_imm(2 * s));
        }
        ptx_opd ops[] = {ptx_vecr(f, 128, acc), ptx_r(da), ptx_r(db), ptx_imm(1), ptx_imm(1), ptx_imm(1),
                         ptx_imm(0), ptx_imm(0)};
        ptx_emit_shape_n(f, OP(WGMMA_SS), MODS(MD(SYNC), MD(ALIGNED)), ptx_mnk(64, 256, 16),
                         PTX_TYPES(TY(F32), TY(BF16), TY(BF16)), 8, ops);
    }
    ptx_emit0(f, OP(WGMMA_COMMIT), MODS(MD(SYNC), MD(ALIGNED)), PTX_NOTYPES);
    E(WGMMA_WAIT, MODS(MD(SYNC), MD(ALIGNED)), PTX_NOTYPES, ptx_imm(0));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(ADD, NOM, T1(U32), ptx_r(kk), ptx_r(kk), ptx_imm(64));
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(p), ptx_r(kk), ptx_r(K));
    ptx_guard(E(BRA, NOM, PTX_NOTYPES, ptx_lbl(loop)), p, false);
    /* D register i of thread t: row 16 w + l / 4 + 8 ((i >> 1) & 1), col
     * 8 (i >> 2) + 2 (l % 4) + (i & 1) (shared/ref/ptx-sm90.md 1.3) */
    ptx_reg w = r32(f), l = r32(f), rb = r32(f), cb = r32(f), t4 = r32(f);
    E(SHR, NOM, T1(U32), ptx_r(w), ptx_r(tid), ptx_imm(5));
    E(AND, NOM, T1(B32), ptx_r(l), ptx_r(tid), ptx_imm(31));
    E(SHR, NOM, T1(U32), ptx_r(rb), ptx_r(l), ptx_imm(2));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(rb), ptx_r(w), ptx_imm(16), ptx_r(rb));
    E(ADD, NOM, T1(U32), ptx_r(rb), ptx_r(rb), ptx_r(tm));
    E(AND, NOM, T1(B32), ptx_r(t4), ptx_r(l), ptx_imm(3));
    E(SHL, NOM, T1(B32), ptx_r(cb), ptx_r(t4), ptx_imm(1));
    E(ADD, NOM, T1(U32), ptx_r(cb), ptx_r(cb), ptx_r(tn));
    for (int i = 0; i < 128; i += 2) {
        ptx_reg row = r32(f), c2 = r32(f);
        E(ADD, NOM, T1(U32), ptx_r(row), ptx_r(rb), ptx_imm(8 * ((i >> 1) & 1)));
        E(ADD, NOM, T1(U32), ptx_r(c2), ptx_r(cb), ptx_imm(8 * (i >> 2)));
        ptx_reg a = elem_addr(f, pc, row, N, c2, 4);
        E(ST, MODS(MD(GLOBAL), MD(V2)), T1(F32), ptx_addr(a, 0), ptx_vecr(f, 2, acc + i));
    }
    ptx_emit0(f, OP(RET), NOM, PTX_NOTYPES);
    if (ptx_module_finish(m)) {
        fprintf(stderr, "build: %s\n", ptx_module_errmsg(m));
        exit(1);
    }
    free(ptx_print(m));
    return m;
}

static uint16_t bf16_small(int v) /* v / 64 as bf16 for |v| < 128 (exact) */
{
    float x = (float)v / 64.0f;
    uint32_t b;
    memcpy(&b, &x, 4);
    return (uint16_t)(b >> 16);
}

static int run_wgmma(unsigned M, unsigned N, unsigned K)
{
    if (M % 64 || N % 256 || K % 64) {
        printf("wgmma: M %% 64, N %% 256 and K %% 64 must be 0\n");
        return 1;
    }
    ptx_module *m = build_wgmma();
    emu_opts o = emu_default_opts();
    emu_ctx *c = emu_new(&o);
    emu_kernel *k;
    pt_err e = {0};
    if (emu_load(c, m, NULL, &k, &e)) {
        fprintf(stderr, "load: %s\n", e.msg);
        return 1;
    }
    uint16_t *A = malloc((size_t)M * K * 2), *B = malloc((size_t)N * K * 2);
    float *C = malloc((size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = bf16_small((int)(i * 7 % 61) - 30);
    for (size_t i = 0; i < (size_t)K * N; i++)
        B[i] = bf16_small((int)(i * 5 % 53) - 26);
    uint64_t dA = emu_alloc(c, (size_t)M * K * 2, "A"), dB = emu_alloc(c, (size_t)K * N * 2, "B"),
             dC = emu_alloc(c, (size_t)M * N * 4, "C");
    emu_write(c, dA, A, (size_t)M * K * 2, &e);
    emu_write(c, dB, B, (size_t)K * N * 2, &e);
    const void *args[] = {&dC, &dA, &dB, &N, &K};
    emu_launch l = {{(M / 64) * (N / 256), 1, 1}, {128, 1, 1}, 0};
    emu_stats st;
    double c0 = cpu_now();
    int rc = emu_run(c, k, &l, args, &st, &e);
    double cpu = cpu_now() - c0;
    if (rc) {
        fprintf(stderr, "run: %s\n", e.msg);
        return 1;
    }
    emu_read(c, dC, C, (size_t)M * N * 4, &e);
    double maxerr = 0;
    for (unsigned s = 0; s < 64; s++) {
        unsigned i = (s * 37) % M, j = (s * 91) % N;
        double want = 0;
        for (unsigned kk = 0; kk < K; kk++)
            want += ((int)((i * K + kk) * 7 % 61) - 30) / 64.0 * (((int)((j * K + kk) * 5 % 53) - 26) / 64.0);
        double err = fabs(C[(size_t)i * N + j] - want);
        maxerr = err > maxerr ? err : maxerr;
    }
    double flops = 2.0 * M * N * K;
    printf("wgmma bf16 %4ux%4ux%4u threads 1 detectors on  %7.3f s %11llu lane-ins %7.1f M/s wall %7.1f M/s per "
           "cpu-second, %6.2f Gflop/s wgmma per cpu-second (max err %.2g)\n",
           M, N, K, st.seconds, (unsigned long long)st.lane_instructions,
           (double)st.lane_instructions / st.seconds / 1e6, (double)st.lane_instructions / cpu / 1e6,
           flops / cpu / 1e9, maxerr);
    free(A);
    free(B);
    free(C);
    emu_kernel_free(k);
    emu_free(c);
    ptx_module_free(m);
    return maxerr > 1e-3;
}

static int run_wgmma_ws(unsigned M, unsigned N, unsigned K)
{
    if (M % 128 || N % 256 || K % 64) {
        printf("wgmma-ws: M %% 128, N %% 256 and K %% 64 must be 0\n");
        return 1;
    }
    const char *dir = getenv("PTXTUNE_TESTS_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/ptx/sm90/gemm_ws_bf16.ptx", dir ? dir : "tests");
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        printf("wgmma-ws: cannot open %s (run from the repository root or set PTXTUNE_TESTS_DIR)\n", path);
        return 1;
    }
    static char text[1 << 16];
    size_t tn = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[tn] = 0;
    ptx_module *m = NULL;
    pt_err e = {0};
    if (ptx_parse(text, tn, path, 90, &m, &e)) {
        fprintf(stderr, "parse: %s\n", e.msg);
        return 1;
    }
    emu_opts o = emu_default_opts();
    emu_ctx *c = emu_new(&o);
    emu_kernel *k;
    if (emu_load(c, m, NULL, &k, &e)) {
        fprintf(stderr, "load: %s\n", e.msg);
        return 1;
    }
    uint16_t *A = malloc((size_t)M * K * 2), *B = malloc((size_t)N * K * 2);
    float *C = malloc((size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = bf16_small((int)(i * 7 % 61) - 30);
    for (size_t i = 0; i < (size_t)K * N; i++)
        B[i] = bf16_small((int)(i * 5 % 53) - 26);
    uint64_t dA = emu_alloc(c, (size_t)M * K * 2, "A"), dB = emu_alloc(c, (size_t)K * N * 2, "B"),
             dC = emu_alloc(c, (size_t)M * N * 4, "C");
    emu_write(c, dA, A, (size_t)M * K * 2, &e);
    emu_write(c, dB, B, (size_t)K * N * 2, &e);
    uint8_t ta[EMU_TMAP_BYTES], tb[EMU_TMAP_BYTES];
    emu_tmap_desc d = {.dtype = EMU_TMAP_BF16, .rank = 2, .gaddr = dA, .dims = {K, M}, .strides = {2ull * K},
                       .box = {64, 128}, .estrides = {1, 1}, .swizzle = EMU_TMAP_SWIZZLE_128B,
                       .l2promo = EMU_TMAP_L2_256B};
    int rc = emu_tmap_encode(&d, ta, &e);
    d.gaddr = dB, d.dims[1] = N, d.box[1] = 256;
    rc = rc ? rc : emu_tmap_encode(&d, tb, &e);
    if (rc) {
        fprintf(stderr, "tensor map: %s\n", e.msg);
        return 1;
    }
    const void *args[] = {ta, tb, &dC, &N, &K};
    emu_launch l = {{N / 256, M / 128, 1}, {384, 1, 1}, 197696};
    emu_stats st;
    double c0 = cpu_now();
    rc = emu_run(c, k, &l, args, &st, &e);
    double cpu = cpu_now() - c0;
    if (rc) {
        fprintf(stderr, "run: %s\n", e.msg);
        return 1;
    }
    emu_read(c, dC, C, (size_t)M * N * 4, &e);
    double maxerr = 0;
    for (unsigned s = 0; s < 64; s++) {
        unsigned i = (s * 37) % M, j = (s * 91) % N;
        double want = 0;
        for (unsigned kk = 0; kk < K; kk++)
            want += ((int)((i * K + kk) * 7 % 61) - 30) / 64.0 * (((int)((j * K + kk) * 5 % 53) - 26) / 64.0);
        double err = fabs(C[(size_t)i * N + j] - want);
        maxerr = err > maxerr ? err : maxerr;
    }
    double flops = 2.0 * M * N * K;
    printf("wgmma-ws   %4ux%4ux%4u threads 1 detectors on  %7.3f s %11llu lane-ins %7.1f M/s wall %7.1f M/s per "
           "cpu-second, %6.2f Gflop/s wgmma per cpu-second (max err %.2g)\n",
           M, N, K, st.seconds, (unsigned long long)st.lane_instructions,
           (double)st.lane_instructions / st.seconds / 1e6, (double)st.lane_instructions / cpu / 1e6,
           flops / cpu / 1e9, maxerr);
    free(A);
    free(B);
    free(C);
    emu_kernel_free(k);
    emu_free(c);
    ptx_module_free(m);
    return maxerr > 1e-3;
}

static uint16_t f2h_small(int v) /* v / 64 for |v| < 1024 as f16 (exact) */
{
    if (v == 0)
        return 0;
    unsigned s = v < 0 ? 0x8000u : 0, a = (unsigned)(v < 0 ? -v : v);
    int e = 31 - __builtin_clz(a); /* a = 1.x * 2^e */
    unsigned mant = (a << (10 - e)) & 1023;
    return (uint16_t)(s | (unsigned)(e - 6 + 15) << 10 | mant);
}

static int run(const char *name, int mt, int nt, unsigned M, unsigned N, unsigned K, int threads, bool detect)
{
    ptx_module *m = build(mt, nt);
    emu_opts o = emu_default_opts();
    o.threads = threads;
    if (!detect)
        o.detect_oob = o.detect_uninit = o.detect_race = o.detect_divergence = o.detect_cp_async =
            o.detect_misaligned = o.detect_deadlock = false;
    emu_ctx *c = emu_new(&o);
    emu_kernel *k;
    pt_err e = {0};
    if (emu_load(c, m, NULL, &k, &e)) {
        fprintf(stderr, "load: %s\n", e.msg);
        return 1;
    }
    uint16_t *A = malloc((size_t)M * K * 2), *B = malloc((size_t)K * N * 2);
    float *C = malloc((size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = f2h_small((int)(i * 7 % 61) - 30);
    for (size_t i = 0; i < (size_t)K * N; i++)
        B[i] = f2h_small((int)(i * 5 % 53) - 26);
    uint64_t dA = emu_alloc(c, (size_t)M * K * 2, "A"), dB = emu_alloc(c, (size_t)K * N * 2, "B"),
             dC = emu_alloc(c, (size_t)M * N * 4, "C");
    emu_write(c, dA, A, (size_t)M * K * 2, &e);
    emu_write(c, dB, B, (size_t)K * N * 2, &e);
    const void *args[] = {&dC, &dA, &dB, &N, &K};
    unsigned tiles = (M / (16u * (unsigned)mt)) * (N / (8u * (unsigned)nt));
    emu_launch l = {{tiles / 4, 1, 1}, {128, 1, 1}, 0};
    emu_stats st;
    double c0 = cpu_now();
    int rc = emu_run(c, k, &l, args, &st, &e);
    double cpu = cpu_now() - c0;
    if (rc) {
        fprintf(stderr, "run: %s\n", e.msg);
        return 1;
    }
    emu_read(c, dC, C, (size_t)M * N * 4, &e);
    /* spot-check a few outputs against a naive product */
    double maxerr = 0;
    for (unsigned s = 0; s < 64; s++) {
        unsigned i = (s * 37) % M, j = (s * 91) % N;
        double want = 0;
        for (unsigned kk = 0; kk < K; kk++)
            want += ((int)((i * K + kk) * 7 % 61) - 30) / 64.0 * (((int)((kk * N + j) * 5 % 53) - 26) / 64.0);
        double err = fabs(C[(size_t)i * N + j] - want);
        maxerr = err > maxerr ? err : maxerr;
    }
    printf("%-10s %4ux%4ux%4u threads %d detectors %-3s %7.3f s %11llu lane-ins %7.1f M/s wall "
           "%7.1f M/s per cpu-second (max err %.2g)\n",
           name, M, N, K, threads, detect ? "on" : "off", st.seconds,
           (unsigned long long)st.lane_instructions, (double)st.lane_instructions / st.seconds / 1e6,
           (double)st.lane_instructions / cpu / 1e6, maxerr);
    free(A);
    free(B);
    free(C);
    emu_kernel_free(k);
    emu_free(c);
    ptx_module_free(m);
    return maxerr > 1e-3;
}

/* The generated softmax kernel (default config) on a rows x cols f32 input,
 * verified against the float64 reference; the time is emulation only. */
static int run_softmax(int rows, int cols, int threads)
{
    char shape[64];
    snprintf(shape, sizeof shape, "x=%dx%d", rows, cols);
    pt_problem p = PT_EW("y = softmax(x, -1)", shape, PT_F32, PT_F32);
    pt_target t = {80, false, false};
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    pt_err e = {0};
    int bad = 1;
    if (gen_elementwise_op.prepare(a, &p, &t, &pp, &e) == 0) {
        pt_config c;
        gen_elementwise_op.defaults(pp, &t, &c);
        for (int th = 1; th <= threads; th = th == 1 && threads > 1 ? threads : threads + 1) {
            pt_check_opts o = {.seed = 1, .threads = th};
            pt_check_result r;
            pt_err_clear(&e);
            int rc = pt_check_emu(&gen_elementwise_op, pp, &t, &c, &o, &r, &e);
            char cs[128];
            printf("softmax     %5dx%5d      threads %d detectors on  %7.3f s %12llu lane-ins %6.1f M/s "
                   "(%s, max err %.2g)%s%s\n",
                   rows, cols, th, r.emu_seconds, (unsigned long long)r.lane_instructions,
                   r.emu_seconds > 0 ? (double)r.lane_instructions / r.emu_seconds * 1e-6 : 0.0,
                   pt_config_str(&c, cs, sizeof cs), r.max_err, rc ? " FAILED: " : "", rc ? e.msg : "");
            /* shared-memory bank conflicts of the run (extra wavefronts of all) */
            printf("  bank conflicts:");
            for (int b = 0; b < EMU_NBANK; b++)
                printf(" %s %llu of %llu", emu_bank_class_name((emu_bank_class)b),
                       (unsigned long long)r.bank[b].conflicts,
                       (unsigned long long)r.bank[b].wavefronts);
            printf("\n");
            bad = rc != 0;
        }
    }
    pt_arena_free(a);
    return bad;
}

/* The generated GEMM (gen/gemm.c, f16 TN, default config: cp.async
 * pipeline, ldmatrix, mma.sync m16n8k16) through the checker. */
static int run_gemm(int m, int n, int k, int threads)
{
    pt_problem p = PT_GEMM(m, n, k, "tn", PT_F16, PT_F16);
    pt_target t = {80, false, false};
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    pt_err e = {0};
    int bad = 1;
    if (gen_gemm_op.prepare(a, &p, &t, &pp, &e) == 0) {
        pt_config c;
        gen_gemm_op.defaults(pp, &t, &c);
        for (int th = 1; th <= threads; th = th == 1 && threads > 1 ? threads : threads + 1) {
            pt_check_opts o = {.seed = 1, .threads = th};
            pt_check_result r;
            pt_err_clear(&e);
            int rc = pt_check_emu(&gen_gemm_op, pp, &t, &c, &o, &r, &e);
            char cs[160];
            printf("gemm f16 tn %4dx%4dx%4d threads %d detectors on  %7.3f s %12llu lane-ins %6.1f M/s "
                   "(%s, max err %.2g)%s%s\n",
                   m, n, k, th, r.emu_seconds, (unsigned long long)r.lane_instructions,
                   r.emu_seconds > 0 ? (double)r.lane_instructions / r.emu_seconds * 1e-6 : 0.0,
                   pt_config_str(&c, cs, sizeof cs), r.max_err, rc ? " FAILED: " : "", rc ? e.msg : "");
            /* shared-memory bank conflicts of the run (extra wavefronts of all) */
            printf("  bank conflicts:");
            for (int b = 0; b < EMU_NBANK; b++)
                printf(" %s %llu of %llu", emu_bank_class_name((emu_bank_class)b),
                       (unsigned long long)r.bank[b].conflicts,
                       (unsigned long long)r.bank[b].wavefronts);
            printf("\n");
            bad = rc != 0;
        }
    } else
        printf("gemm: %s\n", e.msg);
    pt_arena_free(a);
    return bad;
}

int main(int argc, char **argv)
{
    unsigned M = 512, N = 512, K = 512;
    int threads = 4;
    if (argc >= 4) {
        M = (unsigned)atoi(argv[1]);
        N = (unsigned)atoi(argv[2]);
        K = (unsigned)atoi(argv[3]);
    }
    if (argc >= 5)
        threads = atoi(argv[4]);
    const char *only = argc >= 6 ? argv[5] : NULL;
    static const struct {
        const char *name;
        int mt, nt;
    } kern[] = {{"tile16x8", 1, 1}, {"tile32x32", 2, 4}};
    int bad = 0;
    if (only && strcmp(only, "wgmma") == 0)
        return run_wgmma(M, N, K);
    if (only && strcmp(only, "wgmma-ws") == 0)
        return run_wgmma_ws(M, N, K);
    for (int th = 1; th <= (threads > 1 ? 2 : 1); th++)
        for (int d = 1; d >= (th == 1 ? 0 : 1); d--)
            for (int i = 0; i < 2; i++) {
                char tag[64];
                snprintf(tag, sizeof tag, "%s:%s", kern[i].name, d ? "on" : "off");
                if (only && strcmp(only, tag) != 0)
                    continue;
                bad |= run(kern[i].name, kern[i].mt, kern[i].nt, M, N, K, th == 1 ? 1 : threads, d);
            }
    if (!only || strcmp(only, "softmax") == 0)
        bad |= run_softmax(4096, 4096, threads);
    if (!only || strcmp(only, "gemm") == 0)
        bad |= run_gemm((int)M, (int)N, (int)K, threads);
    if (!only && M % 64 == 0 && N % 256 == 0 && K % 64 == 0)
        bad |= run_wgmma(M, N, K);
    if (!only && M % 128 == 0 && N % 256 == 0 && K % 64 == 0)
        bad |= run_wgmma_ws(M, N, K);
    return bad;
}
