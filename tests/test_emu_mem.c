/* Emulator: memory (ld/st in every space and width, vectors, cvta, shared
 * and dynamic shared memory, atomics, cp.async), special registers,
 * mov packing, and control flow (divergence, loops, exit, barriers). */
#include "test_emu_util.h"

/* ld/st widths and vectors: v4/v2 loads, a sink, an immediate in a stored
 * vector, sign/zero extension into wider registers, narrow stores. */
Test(emu_mem, ldst_vectors_and_widths)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg r[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    ptx_reg d[2] = {R64(&t), R64(&t)};
    ptx_reg s8 = R32(&t), u8 = R64(&t), h = R32(&t);
    /* in: 16 bytes of u32, 16 bytes of u64, then bytes */
    E(LD, MODS(MD(GLOBAL), MD(NC), MD(V4)), T1(U32), ptx_vecr(t.f, 4, r), ptx_addr(pi, 0));
    E(LD, MODS(MD(GLOBAL), MD(V2)), T1(U64), ptx_vec(t.f, 2, (ptx_opd[]){ptx_r(d[0]), ptx_sink()}),
      ptx_addr(pi, 16));
    E(LD, MODS(MD(GLOBAL)), T1(S8), ptx_r(s8), ptx_addr(pi, 32));
    E(LD, MODS(MD(GLOBAL)), T1(U8), ptx_r(u8), ptx_addr(pi, 33));
    E(LD, MODS(MD(GLOBAL), MD(CG)), T1(U32), ptx_r(h), ptx_addr(pi, 4));
    /* out: v4 {r3, 7, r1, r0}; then d0; then s8 (32 bits); u8 (64 bits); low half of h */
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(po, 0),
      ptx_vec(t.f, 4, (ptx_opd[]){ptx_r(r[3]), ptx_imm(7), ptx_r(r[1]), ptx_r(r[0])}));
    E(ST, MODS(MD(GLOBAL), MD(WB)), T1(U64), ptx_addr(po, 16), ptx_r(d[0]));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(po, 24), ptx_r(s8));
    E(ST, MODS(MD(GLOBAL)), T1(U64), ptx_addr(po, 32), ptx_r(u8));
    E(ST, MODS(MD(GLOBAL)), T1(U16), ptx_addr(po, 40), ptx_r(h));
    tk_ret(&t);
    tk_load(&t);
    uint8_t in[48] = {0};
    uint32_t w4[4] = {0x11111111, 0x22222222, 0x33334444, 0x44444444};
    uint64_t w8 = 0x0123456789abcdefull;
    memcpy(in, w4, 16);
    memcpy(in + 16, &w8, 8);
    in[32] = 0xf0;
    in[33] = 0xf1;
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, 48, "out");
    uint8_t zero[48] = {0};
    pt_err e = {0};
    emu_write(t.emu, dout, zero, 48, &e);
    const void *args[] = {&dout, &din};
    tk_run(&t, 1, 1, args);
    uint8_t out[48];
    tk_get(&t, dout, out, 48);
    uint32_t o4[4];
    memcpy(o4, out, 16);
    cr_assert_eq(o4[0], w4[3]);
    cr_assert_eq(o4[1], 7);
    cr_assert_eq(o4[2], w4[1]);
    cr_assert_eq(o4[3], w4[0]);
    uint64_t o8;
    memcpy(&o8, out + 16, 8);
    cr_assert_eq(o8, w8);
    uint32_t os;
    memcpy(&os, out + 24, 4);
    cr_assert_eq(os, 0xfffffff0u, "ld.s8 sign-extends into the 32-bit register");
    memcpy(&o8, out + 32, 8);
    cr_assert_eq(o8, 0xf1, "ld.u8 zero-extends into the 64-bit register");
    uint16_t oh;
    memcpy(&oh, out + 40, 2);
    cr_assert_eq(oh, 0x2222, "st.u16 writes the low bits");
    tk_free(&t);
}

/* Parameters: scalars of several types and a byte array read at an offset. */
Test(emu_mem, params)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out");
    const char *pf = ptx_param_add(t.f, "f", TY(F32));
    const char *pb = ptx_param_bytes(t.f, "blob", 8, 16);
    const char *ps = ptx_param_add(t.f, "s", TY(S32));
    ptx_reg a = R32(&t), b = R64(&t), c = R32(&t), v2[2] = {R32(&t), R32(&t)};
    E(LD, MODS(MD(PARAM)), T1(F32), ptx_r(a), ptx_saddr(pf, 0));
    E(LD, MODS(MD(PARAM)), T1(U64), ptx_r(b), ptx_saddr(pb, 8));
    E(LD, MODS(MD(PARAM), MD(V2)), T1(U32), ptx_vecr(t.f, 2, v2), ptx_saddr(pb, 0));
    E(LD, MODS(MD(PARAM)), T1(S32), ptx_r(c), ptx_saddr(ps, 0));
    E(ST, MODS(MD(GLOBAL)), T1(B32), ptx_addr(po, 0), ptx_r(a));
    E(ST, MODS(MD(GLOBAL)), T1(B64), ptx_addr(po, 8), ptx_r(b));
    E(ST, MODS(MD(GLOBAL), MD(V2)), T1(B32), ptx_addr(po, 16), ptx_vecr(t.f, 2, v2));
    E(ST, MODS(MD(GLOBAL)), T1(B32), ptx_addr(po, 24), ptx_r(c));
    tk_ret(&t);
    tk_load(&t);
    uint64_t dout = tk_buf(&t, NULL, 32, "out");
    float f = 1.5f;
    uint8_t blob[16];
    for (int i = 0; i < 16; i++)
        blob[i] = (uint8_t)(i * 17);
    int32_t s = -5;
    const void *args[] = {&dout, &f, blob, &s};
    tk_run(&t, 1, 1, args);
    uint8_t out[32];
    tk_get(&t, dout, out, 32);
    cr_assert_eq(memcmp(out, &f, 4), 0);
    cr_assert_eq(memcmp(out + 8, blob + 8, 8), 0);
    cr_assert_eq(memcmp(out + 16, blob, 8), 0);
    cr_assert_eq(memcmp(out + 24, &s, 4), 0);
    tk_free(&t);
}

/* Shared memory through every addressing form: [symbol+off], the window
 * offset from mov, a generic address from cvta.shared, and back with
 * cvta.to.shared; 256 threads reverse an array across warps with bar.sync. */
Test(emu_mem, shared_reverse_and_cvta)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "tile", 16, 1024);
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X);
    ptx_reg x = R32(&t), base = R32(&t), off = R32(&t), sa = R32(&t), base64 = R64(&t),
            gen = R64(&t), g2 = R64(&t), back = R64(&t), y = R32(&t), z = R32(&t), rev = R32(&t);
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(x), ptx_addr(tk_addr(&t, pi, tid, 4), 0));
    E(MOV, NOM, T1(U32), ptx_r(base), ptx_sym(sm));
    E(SHL, NOM, T1(B32), ptx_r(off), ptx_r(tid), ptx_imm(2));
    E(ADD, NOM, T1(U32), ptx_r(sa), ptx_r(base), ptx_r(off));
    /* generic store: cvta.shared of the 64-bit window offset */
    E(CVT, NOM, PTX_TYPES(TY(U64), TY(U32)), ptx_r(base64), ptx_r(sa));
    E(CVTA, MODS(MD(SHARED)), T1(U64), ptx_r(gen), ptx_r(base64));
    E(ST, NOM, T1(U32), ptx_addr(gen, 0), ptx_r(x));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    /* read the mirrored element: tile[255 - tid] via [tile + 1020 - 4 tid] */
    E(SUB, NOM, T1(U32), ptx_r(rev), ptx_imm(1020), ptx_r(off));
    E(ADD, NOM, T1(U32), ptx_r(rev), ptx_r(rev), ptx_r(base));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(y), ptx_addr(rev, 0));
    /* and our own element through cvta.to.shared of the generic address */
    E(CVTA, MODS(MD(TO), MD(SHARED)), T1(U64), ptx_r(back), ptx_r(gen));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(z), ptx_addr(back, 0));
    E(CVTA, MODS(MD(SHARED)), T1(U64), ptx_r(g2), ptx_r(back));
    E(ADD, NOM, T1(U32), ptx_r(z), ptx_r(z), ptx_r(y));
    ptx_reg oa = tk_addr(&t, po, tid, 8);
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(oa, 0), ptx_r(y));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(oa, 4), ptx_r(z));
    /* a [symbol] access: thread 0 reads tile[1] */
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[256], out[512];
    for (int i = 0; i < 256; i++)
        in[i] = (uint32_t)(i * 3 + 1);
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout, &din};
    tk_run(&t, 2, 256, args);
    tk_get(&t, dout, out, sizeof out);
    for (int i = 0; i < 256; i++) {
        cr_assert_eq(out[2 * i], in[255 - i]);
        cr_assert_eq(out[2 * i + 1], in[255 - i] + in[i]);
    }
    tk_free(&t);
}

/* Dynamic shared memory: the .extern array sits after the static ones;
 * %dynamic_smem_size reports the launch's size. */
Test(emu_mem, dynamic_shared)
{
    tk t = tk_new("sm_80", "k");
    ptx_module_extern_shared(t.m, "dyn", 16);
    const char *st = ptx_shared_add(t.f, "fixed", 4, 12);
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), a = R32(&t), b = R32(&t), sz = R32(&t), v = R32(&t),
            x = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(a), ptx_sym("dyn"));
    E(MOV, NOM, T1(U32), ptx_r(b), ptx_sym(st));
    E(MOV, NOM, T1(U32), ptx_r(sz), ptx_sr(PTX_S_DYNAMIC_SMEM_SIZE));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(v), ptx_r(tid), ptx_imm(4), ptx_r(a));
    E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(v, 0), ptx_r(tid));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(XOR, NOM, T1(B32), ptx_r(x), ptx_r(tid), ptx_imm(1));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(v), ptx_r(x), ptx_imm(4), ptx_r(a));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(x), ptx_addr(v, 0));
    ptx_reg oa = tk_addr(&t, po, tid, 16);
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 0),
      ptx_vec(t.f, 4, (ptx_opd[]){ptx_r(a), ptx_r(b), ptx_r(sz), ptx_r(x)}));
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[64 * 4];
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout};
    pt_err e = {0};
    cr_assert_eq(tk_run_dims(&t, 1, 64, 256, args, &e, NULL), PT_OK, "%s", e.msg);
    tk_get(&t, dout, out, sizeof out);
    for (uint32_t i = 0; i < 64; i++) {
        cr_assert(out[4 * i + 0] >= 12 && out[4 * i + 0] % 16 == 0, "dynamic array after the static bytes, 16-aligned");
        cr_assert_eq(out[4 * i + 1], 0);
        cr_assert_eq(out[4 * i + 2], 256);
        cr_assert_eq(out[4 * i + 3], i ^ 1);
    }
    tk_free(&t);
}

/* Special registers in a 3-D block and grid. */
Test(emu_mem, special_registers)
{
    static const ptx_sreg regs[] = {PTX_S_TID_X,       PTX_S_TID_Y,       PTX_S_TID_Z,
                                    PTX_S_NTID_X,      PTX_S_NTID_Y,      PTX_S_NTID_Z,
                                    PTX_S_CTAID_X,     PTX_S_CTAID_Y,     PTX_S_CTAID_Z,
                                    PTX_S_NCTAID_X,    PTX_S_NCTAID_Y,    PTX_S_NCTAID_Z,
                                    PTX_S_LANEID,      PTX_S_WARPID,      PTX_S_LANEMASK_EQ,
                                    PTX_S_LANEMASK_LT, PTX_S_LANEMASK_LE, PTX_S_LANEMASK_GT,
                                    PTX_S_LANEMASK_GE, PTX_S_NWARPID};
    enum { NR = sizeof regs / sizeof regs[0] };
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out");
    /* linear index of this thread in the grid */
    ptx_reg tx = tk_sreg(&t, PTX_S_TID_X), ty = tk_sreg(&t, PTX_S_TID_Y), tz = tk_sreg(&t, PTX_S_TID_Z);
    ptx_reg cx = tk_sreg(&t, PTX_S_CTAID_X), cy = tk_sreg(&t, PTX_S_CTAID_Y);
    ptx_reg lin = R32(&t);
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(lin), ptx_r(tz), ptx_imm(4), ptx_r(ty)); /* block 8x4x2 */
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(lin), ptx_r(lin), ptx_imm(8), ptx_r(tx));
    ptx_reg cta = R32(&t);
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(cta), ptx_r(cy), ptx_imm(3), ptx_r(cx)); /* grid 3x2 */
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(lin), ptx_r(cta), ptx_imm(64), ptx_r(lin));
    ptx_reg base = tk_addr(&t, po, lin, 4 * (NR + 1));
    for (int i = 0; i < NR; i++) {
        ptx_reg v = tk_sreg(&t, regs[i]);
        E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(base, 4 * i), ptx_r(v));
    }
    ptx_reg c1 = R64(&t), c2 = R64(&t), dc = R64(&t);
    E(MOV, NOM, T1(U64), ptx_r(c1), ptx_sr(PTX_S_CLOCK64));
    E(MOV, NOM, T1(U64), ptx_r(c2), ptx_sr(PTX_S_GLOBALTIMER));
    E(MOV, NOM, T1(U64), ptx_r(dc), ptx_sr(PTX_S_CLOCK64));
    E(SUB, NOM, T1(S64), ptx_r(dc), ptx_r(dc), ptx_r(c1));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(base, 4 * NR), ptx_r(dc));
    tk_ret(&t);
    tk_load(&t);
    enum { NT = 64 * 6 };
    uint32_t out[NT * (NR + 1)];
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout};
    emu_launch l = {{3, 2, 1}, {8, 4, 2}, 0};
    pt_err e = {0};
    cr_assert_eq(emu_run(t.emu, t.k, &l, args, NULL, &e), PT_OK, "%s", e.msg);
    tk_get(&t, dout, out, sizeof out);
    for (uint32_t c = 0; c < 6; c++)
        for (uint32_t i = 0; i < 64; i++) {
            const uint32_t *o = &out[(c * 64 + i) * (NR + 1)];
            uint32_t lane = i % 32;
            uint32_t want[NR] = {i % 8, i / 8 % 4, i / 32, 8, 4, 2, c % 3, c / 3, 0, 3, 2, 1,
                                 lane, i / 32, 1u << lane, (1u << lane) - 1,
                                 (uint32_t)((2ull << lane) - 1), (uint32_t)~((2ull << lane) - 1),
                                 ~((1u << lane) - 1), 2};
            for (int k = 0; k < NR; k++)
                cr_assert_eq(o[k], want[k], "cta %u thread %u: %s = %u, want %u", c, i,
                             ptx_sreg_name(regs[k]), o[k], want[k]);
            cr_assert_gt(o[NR], 0, "%%clock64 is monotonic");
        }
    tk_free(&t);
}

/* mov packing: {lo16, hi16} -> b32 puts the first element low; unpack;
 * mov.b64 {lo, hi}. */
Test(emu_mem, mov_pack_unpack)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg x = R32(&t), y = R32(&t), h0 = R16(&t), h1 = R16(&t), sw = R32(&t), d = R64(&t),
            lo = R32(&t), hi = R32(&t);
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(x), ptx_addr(pi, 0));
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(y), ptx_addr(pi, 4));
    E(MOV, NOM, T1(B32), ptx_vecr(t.f, 2, (ptx_reg[]){h0, h1}), ptx_r(x));
    E(MOV, NOM, T1(B32), ptx_r(sw), ptx_vecr(t.f, 2, (ptx_reg[]){h1, h0}));
    E(MOV, NOM, T1(B64), ptx_r(d), ptx_vecr(t.f, 2, (ptx_reg[]){x, y}));
    E(MOV, NOM, T1(B64), ptx_vecr(t.f, 2, (ptx_reg[]){lo, hi}), ptx_r(d));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(po, 0), ptx_r(sw));
    E(ST, MODS(MD(GLOBAL)), T1(U64), ptx_addr(po, 8), ptx_r(d));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(po, 16), ptx_r(hi));
    E(ST, MODS(MD(GLOBAL)), T1(U16), ptx_addr(po, 20), ptx_r(h1));
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[2] = {0xaaaa5555u, 0x12345678u};
    uint64_t din = tk_buf(&t, in, 8, "in"), dout = tk_buf(&t, NULL, 24, "out");
    const void *args[] = {&dout, &din};
    tk_run(&t, 1, 32, args);
    uint8_t out[24];
    tk_get(&t, dout, out, 22);
    uint32_t sw32, hi32;
    uint64_t d64;
    uint16_t h16;
    memcpy(&sw32, out, 4);
    memcpy(&d64, out + 8, 8);
    memcpy(&hi32, out + 16, 4);
    memcpy(&h16, out + 20, 2);
    cr_assert_eq(sw32, 0x5555aaaau);
    cr_assert_eq(d64, 0x12345678aaaa5555ull);
    cr_assert_eq(hi32, 0x12345678u);
    cr_assert_eq(h16, 0xaaaa);
    tk_free(&t);
}

/* Divergence and reconvergence: an if/else by lane parity, a loop whose
 * trip count differs per lane (tid % 7), and a guarded exit; full-warp
 * collectives after each must see a converged warp (no report). */
Test(emu_mem, divergence_loops_and_exit)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), p = RP(&t), q = RP(&t), v = R32(&t), n = R32(&t),
            i = R32(&t), acc = R32(&t), bal = R32(&t), sh = R32(&t);
    int l_else = ptx_label_new(t.f), l_join = ptx_label_new(t.f), l_loop = ptx_label_new(t.f),
        l_done = ptx_label_new(t.f);
    E(AND, NOM, T1(B32), ptx_r(v), ptx_r(tid), ptx_imm(1));
    E(SETP, MODS(MD(EQ)), T1(U32), ptx_r(p), ptx_r(v), ptx_imm(0));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_else)), p, true);
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(v), ptx_r(tid), ptx_imm(10)); /* even lanes */
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l_join));
    ptx_label_place(t.f, l_else);
    E(ADD, NOM, T1(U32), ptx_r(v), ptx_r(tid), ptx_imm(1000)); /* odd lanes */
    ptx_label_place(t.f, l_join);
    E(VOTE, MODS(MD(SYNC), MD(BALLOT)), T1(B32), ptx_r(bal), ptx_r(p), ptx_imm(-1));
    /* loop tid % 7 times: acc += i */
    E(REM, NOM, T1(U32), ptx_r(n), ptx_r(tid), ptx_imm(7));
    E(MOV, NOM, T1(U32), ptx_r(i), ptx_imm(0));
    E(MOV, NOM, T1(U32), ptx_r(acc), ptx_imm(0));
    ptx_label_place(t.f, l_loop);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(q), ptx_r(i), ptx_r(n));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_done)), q, false);
    E(ADD, NOM, T1(U32), ptx_r(acc), ptx_r(acc), ptx_r(i));
    E(ADD, NOM, T1(U32), ptx_r(i), ptx_r(i), ptx_imm(1));
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l_loop));
    ptx_label_place(t.f, l_done);
    E(SHFL, MODS(MD(SYNC), MD(BFLY)), T1(B32), ptx_r(sh), ptx_r(acc), ptx_imm(1), ptx_imm(31), ptx_imm(-1));
    ptx_reg oa = tk_addr(&t, po, tid, 16);
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 0),
      ptx_vec(t.f, 4, (ptx_opd[]){ptx_r(v), ptx_r(bal), ptx_r(acc), ptx_r(sh)}));
    /* threads >= 40 exit; the rest meet at a CTA barrier and write again */
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(q), ptx_r(tid), ptx_imm(40));
    ptx_guard(ptx_emit0(t.f, OP(EXIT), NOM, PTX_NOTYPES), q, false);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(oa, 12), ptx_imm(77));
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[64 * 4];
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout};
    tk_run(&t, 1, 64, args);
    tk_get(&t, dout, out, sizeof out);
    for (uint32_t k = 0; k < 64; k++) {
        uint32_t n7 = k % 7, acc_k = n7 * (n7 - (n7 ? 1 : 0)) / 2, partner = k ^ 1;
        uint32_t np = partner % 7;
        cr_assert_eq(out[4 * k], (k & 1) ? k + 1000 : k * 10);
        cr_assert_eq(out[4 * k + 1], 0x55555555u, "ballot of even lanes");
        cr_assert_eq(out[4 * k + 2], acc_k);
        cr_assert_eq(out[4 * k + 3], k < 40 ? 77 : np * (np - (np ? 1 : 0)) / 2);
    }
    tk_free(&t);
}

/* Named barriers: warp 0 produces and arrives (bar.arrive 1, 64), warp 1
 * waits (bar.sync 1, 64) and consumes; then roles swap through barrier 2. */
Test(emu_mem, named_barrier_producer_consumer)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "buf", 4, 128);
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), lane = R32(&t), p = RP(&t), a = R32(&t), v = R32(&t),
            base = R32(&t);
    int l_cons = ptx_label_new(t.f), l_end = ptx_label_new(t.f);
    E(AND, NOM, T1(B32), ptx_r(lane), ptx_r(tid), ptx_imm(31));
    E(MOV, NOM, T1(U32), ptx_r(base), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(lane), ptx_imm(4), ptx_r(base));
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(32));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_cons)), p, false);
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(v), ptx_r(lane), ptx_imm(3));
    E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(v));
    E(BAR, MODS(MD(ARRIVE)), PTX_NOTYPES, ptx_imm(1), ptx_imm(64));
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l_end));
    ptx_label_place(t.f, l_cons);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(1), ptx_imm(64));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(a, 0));
    E(ADD, NOM, T1(U32), ptx_r(v), ptx_r(v), ptx_imm(1));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, lane, 4), 0), ptx_r(v));
    ptx_label_place(t.f, l_end);
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[32];
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout};
    tk_run(&t, 3, 64, args);
    tk_get(&t, dout, out, sizeof out);
    for (uint32_t k = 0; k < 32; k++)
        cr_assert_eq(out[k], 3 * k + 1);
    tk_free(&t);
}

/* Atomics: contended counters across CTAs and worker threads, every
 * operation, shared and global, f32 and f16x2 adds. */
static void atomics_run(int threads)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "scnt", 4, 4);
    ptx_reg pc = tk_ptr(&t, "cnt");
    ptx_reg gid = tk_gtid(&t), tid = tk_sreg(&t, PTX_S_TID_X), old = R32(&t), r = R32(&t),
            one = R32(&t), o64 = R64(&t), f = R32(&t), h2 = R32(&t), p = RP(&t);
    E(MOV, NOM, T1(U32), ptx_r(one), ptx_imm(1));
    E(ATOM, MODS(MD(GLOBAL), MD(ADD)), T1(U32), ptx_r(old), ptx_addr(pc, 0), ptx_r(one));
    E(ATOM, MODS(MD(GLOBAL), MD(MAX)), T1(S32), ptx_r(r), ptx_addr(pc, 4), ptx_r(gid));
    E(ATOM, MODS(MD(GLOBAL), MD(MIN)), T1(U32), ptx_r(r), ptx_addr(pc, 8), ptx_r(gid));
    E(ATOM, MODS(MD(GLOBAL), MD(INC)), T1(U32), ptx_r(r), ptx_addr(pc, 12), ptx_imm(99));
    E(ATOM, MODS(MD(GLOBAL), MD(DEC)), T1(U32), ptx_r(r), ptx_addr(pc, 16), ptx_imm(99));
    E(ATOM, MODS(MD(GLOBAL), MD(XOR)), T1(B32), ptx_r(r), ptx_addr(pc, 20), ptx_r(gid));
    E(ATOM, MODS(MD(GLOBAL), MD(OR)), T1(B32), ptx_r(r), ptx_addr(pc, 24), ptx_r(gid));
    E(RED, MODS(MD(GLOBAL), MD(ADD)), T1(U64), ptx_addr(pc, 32), ptx_imm(3));
    E(MOV, NOM, T1(B32), ptx_r(f), ptx_f32(0.5f));
    E(ATOM, MODS(MD(GLOBAL), MD(ADD)), T1(F32), ptx_r(r), ptx_addr(pc, 40), ptx_r(f));
    E(MOV, NOM, T1(B32), ptx_r(h2), ptx_hex(0x3c003800)); /* {0.5, 1.0} */
    E(ATOM, MODS(MD(GLOBAL), MD(ADD), MD(NOFTZ)), T1(F16X2), ptx_r(r), ptx_addr(pc, 44), ptx_r(h2));
    /* CAS increments: retry until our swap wins */
    int l_retry = ptx_label_new(t.f);
    ptx_reg cur = R32(&t), nxt = R32(&t);
    ptx_label_place(t.f, l_retry);
    E(LD, MODS(MD(GLOBAL), MD(VOLATILE)), T1(U32), ptx_r(cur), ptx_addr(pc, 48));
    E(ADD, NOM, T1(U32), ptx_r(nxt), ptx_r(cur), ptx_imm(1));
    E(ATOM, MODS(MD(GLOBAL), MD(CAS)), T1(B32), ptx_r(r), ptx_addr(pc, 48), ptx_r(cur), ptx_r(nxt));
    E(SETP, MODS(MD(NE)), T1(U32), ptx_r(p), ptx_r(r), ptx_r(cur));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_retry)), p, false);
    E(ATOM, MODS(MD(GLOBAL), MD(EXCH)), T1(B32), ptx_r(r), ptx_addr(pc, 52), ptx_r(gid));
    /* shared counter, summed into global by thread 0 */
    E(SETP, MODS(MD(EQ)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(0));
    ptx_guard(ptx_emit(t.f, OP(ST), MODS(MD(SHARED)), T1(U32), ptx_saddr(sm, 0), ptx_imm(0)), p, false);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(ATOM, MODS(MD(SHARED), MD(ADD)), T1(U32), ptx_r(r), ptx_saddr(sm, 0), ptx_imm(2));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(r), ptx_saddr(sm, 0));
    ptx_guard(ptx_emit(t.f, OP(RED), MODS(MD(GLOBAL), MD(ADD)), T1(U32), ptx_addr(pc, 56), ptx_r(r)), p, false);
    E(CVT, NOM, PTX_TYPES(TY(U64), TY(U32)), ptx_r(o64), ptx_r(old));
    tk_ret(&t);
    emu_opts o = emu_default_opts();
    o.threads = threads;
    tk_load_opts(&t, &o);
    uint32_t init[16] = {0, 0x80000000u, 0xffffffffu, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t dc = tk_buf(&t, init, sizeof init, "counters");
    const void *args[] = {&dc};
    enum { CTAS = 40, BLK = 96, NT = CTAS * BLK };
    tk_run(&t, CTAS, BLK, args);
    uint32_t c[16];
    tk_get(&t, dc, c, sizeof c);
    cr_assert_eq(c[0], NT);
    cr_assert_eq(c[1], NT - 1);
    cr_assert_eq(c[2], 0);
    cr_assert_eq(c[3], NT % 100, "inc wraps at 99 + 1");
    uint32_t dec = 0; /* dec: (old == 0 || old > 99) ? 99 : old - 1, applied NT times */
    for (int k = 0; k < NT; k++)
        dec = (dec == 0 || dec > 99) ? 99 : dec - 1;
    cr_assert_eq(c[4], dec);
    uint32_t x = 0, orv = 0;
    for (uint32_t k = 0; k < NT; k++)
        x ^= k, orv |= k;
    cr_assert_eq(c[5], x);
    cr_assert_eq(c[6], orv);
    uint64_t red64;
    memcpy(&red64, &c[8], 8);
    cr_assert_eq(red64, 3ull * NT);
    cr_assert_eq(f32of(c[10]), 0.5f * NT);
    /* f16x2: lo += 0.5, hi += 1.0, each sum rounded to f16 (RNE). Sums are
     * exact until the spacing of f16 reaches twice the addend: 1024 + 0.5
     * and 2048 + 1 are ties that round back to the even 1024 and 2048, so
     * after NT >= 2048 additions the halves stick at 1024.0 and 2048.0. */
    uint32_t lo = 0x6400, hi = 0x6800;
    cr_assert_eq(c[11] & 0xffff, lo, "f16x2 lo: %04x want %04x", c[11] & 0xffff, lo);
    cr_assert_eq(c[11] >> 16, hi, "f16x2 hi: %04x want %04x", c[11] >> 16, hi);
    cr_assert_eq(c[12], NT, "CAS loop counts every thread");
    cr_assert_lt(c[13], NT);
    cr_assert_eq(c[14], 2 * NT, "shared atomics summed per CTA");
    tk_free(&t);
}

Test(emu_mem, atomics_serial) { atomics_run(1); }
Test(emu_mem, atomics_threads) { atomics_run(4); }

/* cp.async of 4, 8 and 16 bytes, the zero-fill src-size form, and groups
 * completed by wait_group N / wait_all. */
Test(emu_mem, cp_async)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "stage", 16, 4096);
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), sa = R32(&t), base = R32(&t), ga = R64(&t),
            zero = R32(&t), v[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    /* each thread: 16 B at stage[32 tid], 8 B at +16, 4 B at +24, then a
     * zero-filled 16 B (src-size 0) at stage[2048 + 16 tid] */
    E(MOV, NOM, T1(U32), ptx_r(base), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(sa), ptx_r(tid), ptx_imm(32), ptx_r(base));
    ga = tk_addr(&t, pi, tid, 32);
    E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(sa, 0), ptx_addr(ga, 0), ptx_imm(16));
    E0(CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
    E(CP_ASYNC, MODS(MD(CA), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(sa, 16), ptx_addr(ga, 16), ptx_imm(8));
    E(CP_ASYNC, MODS(MD(CA), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(sa, 24), ptx_addr(ga, 24), ptx_imm(4),
      ptx_imm(4));
    E0(CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
    E(MOV, NOM, T1(U32), ptx_r(zero), ptx_imm(0));
    ptx_reg za = R32(&t);
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(za), ptx_r(tid), ptx_imm(16), ptx_r(base));
    E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(za, 2048), ptx_addr(pi, 1 << 20),
      ptx_imm(16), ptx_r(zero));
    /* the ignore-src form: a true predicate also zero-fills (and reads nothing) */
    ptx_reg ign = RP(&t);
    E(SETP, MODS(MD(EQ)), T1(U32), ptx_r(ign), ptx_r(zero), ptx_imm(0));
    E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(za, 3072), ptx_addr(pi, 1 << 20),
      ptx_imm(16), ptx_r(ign));
    cr_expect_eq(t.f->need_ver, 75, "ignore-src needs PTX 7.5 (isa.def row)");
    E(CP_ASYNC_WAIT, NOM, PTX_NOTYPES, ptx_imm(1)); /* the first group is done */
    E(LD, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v), ptx_addr(sa, 0));
    ptx_reg oa = tk_addr(&t, po, tid, 48);
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 0), ptx_vecr(t.f, 4, v));
    E0(CP_ASYNC_WAIT_ALL, NOM, PTX_NOTYPES);
    E(LD, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v), ptx_addr(sa, 16));
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 16), ptx_vecr(t.f, 4, v));
    E(LD, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v), ptx_addr(za, 2048));
    ptx_reg w4[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    E(LD, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_vecr(t.f, 4, w4), ptx_addr(za, 3072));
    for (int i = 0; i < 4; i++)
        E(OR, NOM, T1(B32), ptx_r(v[i]), ptx_r(v[i]), ptx_r(w4[i]));
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 32), ptx_vecr(t.f, 4, v));
    tk_ret(&t);
    tk_load(&t);
    enum { NT = 64 };
    uint32_t in[NT * 8], out[NT * 12];
    for (int i = 0; i < NT * 8; i++)
        in[i] = (uint32_t)i * 2654435761u;
    for (int i = 0; i < NT; i++) /* bytes 28..31 of each row are never copied */
        in[i * 8 + 7] = 0;
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout, &din};
    pt_err e = {0};
    int rc = tk_run_dims(&t, 1, NT, 0, args, &e, NULL);
    /* stage bytes 28..31 are read by the v4 load at +16 but never written */
    cr_assert_eq(rc, PT_EEMU);
    cr_assert(tk_reported(&t, EMU_R_UNINIT));
    cr_assert_eq(emu_nreports(t.emu), 1, "only the expected report");
    tk_get(&t, dout, out, sizeof out);
    for (int i = 0; i < NT; i++) {
        for (int k = 0; k < 4; k++)
            cr_assert_eq(out[12 * i + k], in[8 * i + k]);
        for (int k = 4; k < 7; k++)
            cr_assert_eq(out[12 * i + k], in[8 * i + k]);
        for (int k = 8; k < 12; k++)
            cr_assert_eq(out[12 * i + k], 0, "zero fill");
    }
    tk_free(&t);
}

/* The same grid gives the same result serially and on 4 worker threads. */
Test(emu_mem, threads_match_serial)
{
    for (int th = 1; th <= 4; th += 3) {
        tk t = tk_new("sm_80", "k");
        ptx_reg po = tk_ptr(&t, "out");
        ptx_reg g = tk_gtid(&t), v = R32(&t);
        E(MUL, MODS(MD(LO)), T1(U32), ptx_r(v), ptx_r(g), ptx_r(g));
        E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, g, 4), 0), ptx_r(v));
        tk_ret(&t);
        emu_opts o = emu_default_opts();
        o.threads = th;
        tk_load_opts(&t, &o);
        enum { NT = 100 * 128 };
        static uint32_t out[NT];
        uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
        const void *args[] = {&dout};
        emu_stats st;
        pt_err e = {0};
        cr_assert_eq(tk_run_dims(&t, 100, 128, 0, args, &e, &st), PT_OK, "%s", e.msg);
        cr_assert_eq(st.ctas, 100);
        cr_assert_eq(st.lane_instructions, st.warp_instructions * 32);
        tk_get(&t, dout, out, sizeof out);
        for (uint32_t i = 0; i < NT; i++)
            cr_assert_eq(out[i], i * i);
        tk_free(&t);
    }
}

/* A kernel written as PTX text goes through the parser into the same IR;
 * its results match and a report names the text's own line. */
#include "ptx/parse.h"

static const char text_kernel[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry swap(.param .u64 p_out, .param .u64 p_in, .param .u32 n)\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<8>;\n"
    "    .reg .f32 %f<4>;\n"
    "    .shared .align 4 .b8 smem[1024];\n"
    "    ld.param.u64 %rd1, [p_out];\n"
    "    ld.param.u64 %rd2, [p_in];\n"
    "    ld.param.u32 %r7, [n];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    cvta.to.global.u64 %rd2, %rd2;\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    mul.wide.u32 %rd3, %r1, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    setp.lt.u32 %p1, %r1, %r7;\n"
    "    @%p1 ld.global.f32 %f1, [%rd4];\n" /* line 21 */
    "    @!%p1 ld.global.f32 %f1, [%rd4+4096];\n" /* line 22: out of bounds */
    "    mov.u32 %r2, smem;\n"
    "    shl.b32 %r3, %r1, 2;\n"
    "    add.s32 %r4, %r2, %r3;\n"
    "    st.shared.f32 [%r4], %f1;\n"
    "    bar.sync 0;\n"
    "    xor.b32 %r5, %r3, 4;\n"
    "    add.s32 %r6, %r2, %r5;\n"
    "    ld.shared.f32 %f2, [%r6];\n"
    "    add.s64 %rd5, %rd1, %rd3;\n"
    "    st.global.f32 [%rd5], %f2;\n"
    "$L__BB0_1:\n"
    "    ret;\n"
    "}\n";

Test(emu_mem, parsed_text_kernel)
{
    ptx_module *m = NULL;
    pt_err e = {0};
    cr_assert_eq(ptx_parse(text_kernel, sizeof text_kernel - 1, "swap.ptx", 90, &m, &e), PT_OK, "%s", e.msg);
    emu_ctx *c = emu_new(NULL);
    emu_kernel *k = NULL;
    cr_assert_eq(emu_load(c, m, "swap", &k, &e), PT_OK, "%s", e.msg);
    float in[256], out[256];
    for (int i = 0; i < 256; i++)
        in[i] = (float)i * 0.5f;
    uint64_t din = emu_alloc(c, sizeof in, "in"), dout = emu_alloc(c, sizeof out, "out");
    cr_assert_eq(emu_write(c, din, in, sizeof in, &e), PT_OK);
    emu_launch l = {{1, 1, 1}, {256, 1, 1}, 0};
    uint32_t n = 256;
    const void *args[] = {&dout, &din, &n};
    cr_assert_eq(emu_run(c, k, &l, args, NULL, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(emu_read(c, dout, out, sizeof out, &e), PT_OK);
    for (int i = 0; i < 256; i++)
        cr_assert_eq(out[i], in[i ^ 1]);
    n = 250; /* threads 250.. take the out-of-bounds path on line 22 */
    cr_assert_eq(emu_run(c, k, &l, args, NULL, &e), PT_EEMU);
    cr_assert_eq(emu_report_kind_of(c, 0), EMU_R_OOB);
    cr_assert(strstr(emu_report(c, 0), "kernel swap line 22 (ld)"), "%s", emu_report(c, 0));
    cr_assert(strstr(emu_report(c, 0), "thread (250,0,0)"), "%s", emu_report(c, 0));
    emu_kernel_free(k);
    emu_free(c);
    ptx_module_free(m);
}

/* Issue 9 item 8: the shared window has the hardware's layout per arch (a
 * reserved 1 KB first on sm_90: ptxas puts the first array at 0x400; none on
 * sm_80/86/89), static arrays aligned as declared, then the dynamic array;
 * opts.smem_shift moves everything up on any arch. An access below the
 * first array (the reserved region) is out of bounds, as is one past the
 * dynamic array's launch size. */
static const char layout_kernel[] =
    ".version 8.0\n"
    ".target %s\n"
    ".address_size 64\n"
    ".extern .shared .align 128 .b8 dyn[];\n"
    ".visible .entry lay(.param .u64 p_out, .param .u32 off)\n"
    "{\n"
    "    .reg .b32 %%r<8>;\n"
    "    .reg .b64 %%rd<4>;\n"
    "    .shared .align 4 .b8 small[12];\n"
    "    .shared .align 64 .b8 big[256];\n"
    "    ld.param.u64 %%rd1, [p_out];\n"
    "    ld.param.u32 %%r6, [off];\n"
    "    mov.u32 %%r1, small;\n"
    "    mov.u32 %%r2, big;\n"
    "    mov.u32 %%r3, dyn;\n"
    "    st.global.v4.u32 [%%rd1], {%%r1, %%r2, %%r3, %%r3};\n"
    "    st.shared.u32 [%%r6], %%r1;\n" /* line 17: the probe */
    "    ret;\n"
    "}\n";

static int layout_run(const char *sm, int arch, uint32_t shift, uint32_t probe, size_t dyn,
                      uint32_t got[3], char *report, size_t rn)
{
    char text[2048];
    snprintf(text, sizeof text, layout_kernel, sm);
    ptx_module *m = NULL;
    pt_err e = {0};
    cr_assert_eq(ptx_parse(text, strlen(text), "lay.ptx", 90, &m, &e), PT_OK, "%s", e.msg);
    emu_opts o = emu_default_opts();
    o.arch = arch;
    o.smem_shift = shift;
    emu_ctx *c = emu_new(&o);
    cr_assert(c);
    emu_kernel *k = NULL;
    cr_assert_eq(emu_load(c, m, NULL, &k, &e), PT_OK, "%s", e.msg);
    uint32_t out[4] = {0};
    uint64_t dout = emu_alloc(c, sizeof out, "out");
    emu_launch l = {{1, 1, 1}, {1, 1, 1}, dyn};
    const void *args[] = {&dout, &probe};
    int rc = emu_run(c, k, &l, args, NULL, &e);
    snprintf(report, rn, "%s", emu_nreports(c) ? emu_report(c, 0) : "");
    if (rc == PT_OK || rc == PT_EEMU)
        cr_assert_eq(emu_read(c, dout, out, sizeof out, &e), PT_OK);
    memcpy(got, out, 3 * sizeof *got);
    emu_kernel_free(k);
    emu_free(c);
    ptx_module_free(m);
    return rc;
}

Test(emu_mem, shared_layout_per_arch)
{
    static const struct {
        const char *sm;
        int arch;
        uint32_t shift, small, big, dyn;
    } cases[] = {
        /* small [b, b+12), redzone 32, big aligned 64, 256 bytes + 32, dyn aligned 128 */
        {"sm_80", 0, 0, 0, 64, 384},
        {"sm_86", 0, 0, 0, 64, 384},
        {"sm_89", 0, 0, 0, 64, 384},
        {"sm_90", 0, 0, 0x400, 0x440, 0x580},
        {"sm_90a", 0, 0, 0x400, 0x440, 0x580},
        {"sm_80", 90, 0, 0x400, 0x440, 0x580}, /* opts.arch overrides .target */
        {"sm_90", 80, 0, 0, 64, 384},
        {"sm_80", 0, 128, 128, 192, 512},
        {"sm_90", 0, 128, 0x480, 0x4c0, 0x600},
        {"sm_80", 0, 16, 16, 64, 384},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got[3];
        char rep[1024];
        /* probe inside `small`: clean */
        int rc = layout_run(cases[i].sm, cases[i].arch, cases[i].shift, cases[i].small + 4, 256,
                            got, rep, sizeof rep);
        cr_assert_eq(rc, PT_OK, "case %zu: %s", i, rep);
        cr_expect_eq(got[0], cases[i].small, "case %zu small at 0x%x", i, got[0]);
        cr_expect_eq(got[1], cases[i].big, "case %zu big at 0x%x", i, got[1]);
        cr_expect_eq(got[2], cases[i].dyn, "case %zu dyn at 0x%x", i, got[2]);
        /* the last word of the dynamic array is inside; one past it is not */
        rc = layout_run(cases[i].sm, cases[i].arch, cases[i].shift, cases[i].dyn + 252, 256, got,
                        rep, sizeof rep);
        cr_expect_eq(rc, PT_OK, "case %zu: %s", i, rep);
        rc = layout_run(cases[i].sm, cases[i].arch, cases[i].shift, cases[i].dyn + 256, 512, got,
                        rep, sizeof rep);
        cr_expect_eq(rc, PT_OK, "case %zu (a 512-byte dynamic array): %s", i, rep);
        rc = layout_run(cases[i].sm, cases[i].arch, cases[i].shift, cases[i].dyn + 256, 256, got,
                        rep, sizeof rep);
        cr_expect_eq(rc, PT_EEMU, "case %zu: past the dynamic array", i);
        cr_expect(strstr(rep, "out-of-bounds") && strstr(rep, "line 17"), "case %zu: %s", i, rep);
        /* below the first array: the reserved region (and the shift) */
        if (cases[i].small) {
            rc = layout_run(cases[i].sm, cases[i].arch, cases[i].shift, 0, 256, got, rep, sizeof rep);
            cr_expect_eq(rc, PT_EEMU, "case %zu: address 0", i);
            cr_expect(strstr(rep, "out-of-bounds") && strstr(rep, "reserved region"), "case %zu: %s",
                      i, rep);
        }
    }
    /* the most shared memory a CTA may use, per arch (static + dynamic; the
     * reserved region, the shift and the emulator's redzones not counted):
     * the static arrays here take 268 bytes */
    static const struct {
        const char *sm;
        uint32_t limit;
    } lim[] = {{"sm_80", 163 << 10}, {"sm_86", 99 << 10}, {"sm_89", 99 << 10}, {"sm_90", 227 << 10}};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        for (uint32_t shift = 0; shift <= 128; shift += 128) {
            uint32_t got[3];
            char rep[1024];
            uint32_t small = (strcmp(lim[i].sm, "sm_90") == 0 ? 0x400 : 0) + shift;
            int rc = layout_run(lim[i].sm, 0, shift, small, lim[i].limit - 268, got, rep, sizeof rep);
            cr_expect_eq(rc, PT_OK, "%s: %u bytes in all: %s", lim[i].sm, lim[i].limit, rep);
            rc = layout_run(lim[i].sm, 0, shift, small, lim[i].limit - 268 + 16, got, rep, sizeof rep);
            cr_expect_eq(rc, PT_EINVAL, "%s: 16 bytes over its limit", lim[i].sm);
        }
    /* a shift that is not a multiple of 16 is refused */
    emu_opts o = emu_default_opts();
    o.smem_shift = 8;
    cr_expect_null(emu_new(&o));
}
