/* Emulator: warp collectives. shfl is checked against CUDA's documented
 * __shfl_*_sync(mask, v, x, width) semantics (a formulation independent of
 * the PTX pseudo-code the emulator follows), with c = ((32 - width) << 8)
 * | clamp as nvcc encodes it. */
#include "test_emu_util.h"

enum { UP, DOWN, BFLY, IDX };

static uint32_t cuda_shfl(const uint32_t *v, int lane, int mode, int x, int width)
{
    int seg = lane / width * width, pos = lane % width;
    switch (mode) {
    case UP: return pos >= x ? v[lane - x] : v[lane];
    case DOWN: return pos + x < width ? v[lane + x] : v[lane];
    case BFLY: {
        int src = lane ^ x;
        return src < seg + width ? v[src] : v[lane]; /* later groups: own value */
    }
    default: return v[seg + x % width];
    }
}

Test(emu_warp, shfl_all_modes_and_widths)
{
    static const ptx_mod mods[] = {MD(UP), MD(DOWN), MD(BFLY), MD(IDX)};
    for (int mode = UP; mode <= IDX; mode++) {
        tk t = tk_new("sm_80", "k");
        ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
        ptx_reg b = tk_u32(&t, "b"), c = tk_u32(&t, "c"), tid = tk_sreg(&t, PTX_S_TID_X);
        ptx_reg v = R32(&t), d = R32(&t);
        E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(v), ptx_addr(tk_addr(&t, pi, tid, 4), 0));
        E(SHFL, MODS(MD(SYNC), mods[mode]), T1(B32), ptx_r(d), ptx_r(v), ptx_r(b), ptx_r(c), ptx_imm(-1));
        E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, tid, 4), 0), ptx_r(d));
        tk_ret(&t);
        tk_load(&t);
        uint32_t in[64], out[64];
        for (int i = 0; i < 64; i++)
            in[i] = 1000u + (uint32_t)i * 7u;
        uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, sizeof out, "out");
        static const int widths[] = {32, 16, 8, 4, 2, 1};
        static const int xs[] = {0, 1, 2, 3, 5, 7, 16, 31};
        for (int wi = 0; wi < 6; wi++)
            for (int xi = 0; xi < 8; xi++) {
                int w = widths[wi], x = xs[xi];
                if (mode == BFLY && x >= 32)
                    continue;
                uint32_t bb = (uint32_t)x, cc = (uint32_t)((32 - w) << 8) | (mode == UP ? 0 : 0x1f);
                const void *args[] = {&dout, &din, &bb, &cc};
                tk_run(&t, 1, 64, args);
                tk_get(&t, dout, out, sizeof out);
                for (int l = 0; l < 64; l++) {
                    uint32_t want = cuda_shfl(in + (l / 32) * 32, l % 32, mode, x, w);
                    cr_assert_eq(out[l], want, "shfl.%s x=%d width=%d lane %d: got %u want %u",
                                 ptx_mod_name(mods[mode]), x, w, l, out[l], want);
                }
            }
        tk_free(&t);
    }
}

/* vote and activemask in a converged warp and inside a divergent region
 * (lanes < 20) whose membermask names exactly its lanes. */
Test(emu_warp, vote_activemask)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), lane = tk_sreg(&t, PTX_S_LANEID), v = R32(&t),
            p = RP(&t), q = RP(&t), r[8];
    for (int i = 0; i < 8; i++)
        r[i] = R32(&t);
    ptx_reg pa = RP(&t), pn = RP(&t), pu = RP(&t);
    int l_skip = ptx_label_new(t.f);
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(v), ptx_addr(tk_addr(&t, pi, tid, 4), 0));
    E(SETP, MODS(MD(NE)), T1(U32), ptx_r(p), ptx_r(v), ptx_imm(0));
    E(VOTE, MODS(MD(SYNC), MD(BALLOT)), T1(B32), ptx_r(r[0]), ptx_r(p), ptx_imm(-1));
    E(VOTE, MODS(MD(SYNC), MD(BALLOT)), T1(B32), ptx_r(r[1]), ptx_notp(p), ptx_imm(-1));
    E(VOTE, MODS(MD(SYNC), MD(ALL)), T1(PRED), ptx_r(pa), ptx_r(p), ptx_imm(-1));
    E(VOTE, MODS(MD(SYNC), MD(ANY)), T1(PRED), ptx_r(pn), ptx_r(p), ptx_imm(-1));
    E(VOTE, MODS(MD(SYNC), MD(UNI)), T1(PRED), ptx_r(pu), ptx_r(p), ptx_imm(-1));
    E(SELP, NOM, T1(U32), ptx_r(r[2]), ptx_imm(1), ptx_imm(0), ptx_r(pa));
    E(SELP, NOM, T1(U32), ptx_r(r[3]), ptx_imm(1), ptx_imm(0), ptx_r(pn));
    E(SELP, NOM, T1(U32), ptx_r(r[4]), ptx_imm(1), ptx_imm(0), ptx_r(pu));
    E(MOV, NOM, T1(U32), ptx_r(r[5]), ptx_imm(0));
    E(MOV, NOM, T1(U32), ptx_r(r[6]), ptx_imm(0));
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(q), ptx_r(lane), ptx_imm(20));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_skip)), q, false);
    E(ACTIVEMASK, NOM, T1(B32), ptx_r(r[5]));
    E(VOTE, MODS(MD(SYNC), MD(BALLOT)), T1(B32), ptx_r(r[6]), ptx_r(p), ptx_imm(0xfffff));
    ptx_label_place(t.f, l_skip);
    E(ACTIVEMASK, NOM, T1(B32), ptx_r(r[7]));
    ptx_reg oa = tk_addr(&t, po, tid, 32);
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 0), ptx_vecr(t.f, 4, r));
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(B32), ptx_addr(oa, 16), ptx_vecr(t.f, 4, r + 4));
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[64], out[64 * 8];
    uint64_t s = 3;
    for (int i = 0; i < 64; i++)
        in[i] = i < 32 ? rnd32(&s) & 1 : 1; /* warp 1: all true */
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout, &din};
    tk_run(&t, 1, 64, args);
    tk_get(&t, dout, out, sizeof out);
    for (int w = 0; w < 2; w++) {
        uint32_t bal = 0;
        for (int l = 0; l < 32; l++)
            bal |= (uint32_t)(in[w * 32 + l] != 0) << l;
        for (int l = 0; l < 32; l++) {
            const uint32_t *o = &out[(w * 32 + l) * 8];
            cr_assert_eq(o[0], bal);
            cr_assert_eq(o[1], ~bal);
            cr_assert_eq(o[2], bal == 0xffffffffu);
            cr_assert_eq(o[3], bal != 0);
            cr_assert_eq(o[4], bal == 0 || bal == 0xffffffffu);
            cr_assert_eq(o[5], l < 20 ? 0xfffffu : 0);
            cr_assert_eq(o[6], l < 20 ? bal & 0xfffffu : 0);
            cr_assert_eq(o[7], 0xffffffffu, "reconverged");
        }
    }
    tk_free(&t);
}

Test(emu_warp, redux)
{
    static const struct {
        ptx_mod mod;
        ptx_type ty;
    } ops[] = {{MD(ADD), TY(U32)}, {MD(MIN), TY(U32)}, {MD(MAX), TY(U32)}, {MD(MIN), TY(S32)},
               {MD(MAX), TY(S32)}, {MD(AND), TY(B32)}, {MD(OR), TY(B32)},  {MD(XOR), TY(B32)}};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        tk t = tk_new("sm_80", "k");
        ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
        ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), v = R32(&t), d = R32(&t);
        E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(v), ptx_addr(tk_addr(&t, pi, tid, 4), 0));
        E(REDUX, MODS(MD(SYNC), ops[k].mod), PTX_T1(ops[k].ty), ptx_r(d), ptx_r(v), ptx_imm(-1));
        E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, tid, 4), 0), ptx_r(d));
        tk_ret(&t);
        tk_load(&t);
        uint32_t in[96], out[96];
        uint64_t s = 77 + k;
        for (int i = 0; i < 96; i++)
            in[i] = rnd32(&s) >> (i % 3 ? 0 : 20);
        uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, sizeof out, "out");
        const void *args[] = {&dout, &din};
        tk_run(&t, 1, 96, args);
        tk_get(&t, dout, out, sizeof out);
        for (int w = 0; w < 3; w++) {
            const uint32_t *x = in + 32 * w;
            uint32_t r = x[0];
            for (int l = 1; l < 32; l++) {
                switch (k) {
                case 0: r += x[l]; break;
                case 1: r = x[l] < r ? x[l] : r; break;
                case 2: r = x[l] > r ? x[l] : r; break;
                case 3: r = (int32_t)x[l] < (int32_t)r ? x[l] : r; break;
                case 4: r = (int32_t)x[l] > (int32_t)r ? x[l] : r; break;
                case 5: r &= x[l]; break;
                case 6: r |= x[l]; break;
                default: r ^= x[l]; break;
                }
            }
            for (int l = 0; l < 32; l++)
                cr_assert_eq(out[32 * w + l], r, "redux.%s.%s", ptx_mod_name(ops[k].mod),
                             ptx_type_name(ops[k].ty));
        }
        tk_free(&t);
    }
}

/* bar.warp.sync across divergent paths: the two halves of the warp each
 * write shared memory on their own path, sync, and read the other half's
 * values. The sync must make each wait for the other. */
Test(emu_warp, bar_warp_sync_exchange)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "x", 4, 128);
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID), base = R32(&t), a = R32(&t), b = R32(&t), v = R32(&t),
            p = RP(&t), o = R32(&t);
    int l_hi = ptx_label_new(t.f), l_end = ptx_label_new(t.f);
    E(MOV, NOM, T1(U32), ptx_r(base), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(lane), ptx_imm(4), ptx_r(base));
    E(XOR, NOM, T1(B32), ptx_r(o), ptx_r(lane), ptx_imm(16));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(b), ptx_r(o), ptx_imm(4), ptx_r(base));
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(lane), ptx_imm(16));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_hi)), p, false);
    E(MUL, MODS(MD(LO)), T1(U32), ptx_r(v), ptx_r(lane), ptx_imm(10));
    E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(v));
    E(BAR_WARP, NOM, PTX_NOTYPES, ptx_imm(-1));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(b, 0));
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l_end));
    ptx_label_place(t.f, l_hi);
    E(ADD, NOM, T1(U32), ptx_r(v), ptx_r(lane), ptx_imm(500));
    E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(v));
    E(BAR_WARP, NOM, PTX_NOTYPES, ptx_imm(-1));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(b, 0));
    ptx_label_place(t.f, l_end);
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, lane, 4), 0), ptx_r(v));
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[32];
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout};
    tk_run(&t, 1, 32, args);
    tk_get(&t, dout, out, sizeof out);
    for (uint32_t l = 0; l < 32; l++) {
        uint32_t src = l ^ 16;
        cr_assert_eq(out[l], src < 16 ? src * 10 : src + 500, "lane %u", l);
    }
    tk_free(&t);
}

/* Non-.aligned barrier.sync reached from two divergent paths of one warp
 * (independent thread scheduling): every thread arrives on its own, the
 * barrier completes, and nothing is reported. membar/fence are accepted. */
Test(emu_warp, barrier_sync_divergent_paths)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "x", 4, 256);
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), lane = tk_sreg(&t, PTX_S_LANEID), base = R32(&t), a = R32(&t),
            b = R32(&t), v = R32(&t), p = RP(&t);
    int l_b = ptx_label_new(t.f), l_end = ptx_label_new(t.f);
    E(MOV, NOM, T1(U32), ptx_r(base), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(tid), ptx_imm(4), ptx_r(base));
    E(XOR, NOM, T1(B32), ptx_r(b), ptx_r(tid), ptx_imm(63));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(b), ptx_r(b), ptx_imm(4), ptx_r(base));
    E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(tid));
    E0(MEMBAR, MODS(MD(CTA)), PTX_NOTYPES);
    E0(FENCE, MODS(MD(ACQ_REL), MD(GPU)), PTX_NOTYPES);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(lane), ptx_imm(16));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l_b)), p, false);
    E(BARRIER, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(b, 0));
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l_end));
    ptx_label_place(t.f, l_b);
    E(BARRIER, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(b, 0));
    E(ADD, NOM, T1(U32), ptx_r(v), ptx_r(v), ptx_imm(1000));
    ptx_label_place(t.f, l_end);
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, tid, 4), 0), ptx_r(v));
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[64];
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    const void *args[] = {&dout};
    tk_run(&t, 1, 64, args);
    tk_get(&t, dout, out, sizeof out);
    for (uint32_t i = 0; i < 64; i++)
        cr_assert_eq(out[i], (i ^ 63) + ((i % 32) >= 16 ? 1000 : 0), "thread %u", i);
    tk_free(&t);
}

/* ---- shared-memory bank conflicts (issue 9 item 11) ---- */

#include "gen/gemm.h"
#include "ptx/parse.h"
#include "tuner/emu_check.h"

static int kernel_from_text(const char *text, const char *entry, emu_ctx **c, ptx_module **m,
                            emu_kernel **k)
{
    pt_err e = {0};
    cr_assert_eq(ptx_parse(text, strlen(text), "bank.ptx", 90, m, &e), PT_OK, "%s\n%s", e.msg, text);
    *c = emu_new(NULL);
    cr_assert(*c);
    return emu_load(*c, *m, entry, k, &e);
}

/* The model on plain ld/st.shared: one warp stores then loads `ty` (with
 * vector `vec`) at tid * stride bytes. Expected wavefronts from the bank
 * rules (32 banks x 4 bytes, same word shared, phases of 128 bytes). */
Test(emu_warp, bank_conflicts_of_ld_st_shared)
{
    static const struct {
        const char *vec, *ty;
        int stride, threads;
        uint64_t wf, ideal;
    } cases[] = {
        {"", "u32", 4, 32, 1, 1},      /* consecutive words */
        {"", "u32", 8, 32, 2, 1},      /* every other word: 2-way */
        {"", "u32", 128, 32, 32, 1},   /* one bank: 32-way */
        {"", "u32", 0, 32, 1, 1},      /* one word: broadcast */
        {"", "u32", 132, 32, 1, 1},    /* padded rows: conflict-free */
        {"", "u32", 8, 16, 1, 1},      /* 16 threads every other word: 16 banks */
        {".v2", "u32", 8, 32, 2, 2},   /* 8 bytes: two half-warp phases */
        {".v2", "u32", 16, 32, 4, 2},  /* half-warp lanes l and l+8 share banks */
        {".v4", "u32", 16, 32, 4, 4},  /* 16 bytes: four quarter-warp phases */
        {".v4", "u32", 32, 32, 8, 4},  /* 2-way in every quarter warp */
        {".v4", "u32", 0, 32, 4, 4},   /* broadcast in every phase */
        {"", "u8", 1, 32, 1, 1},       /* 32 bytes in 8 words */
        {"", "u16", 2, 32, 1, 1},
        {"", "u16", 64, 32, 16, 1},    /* banks 0 and 16, 16 words each */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = cases[i].vec[0] ? cases[i].vec[2] - '0' : 1;
        char src[64] = "", dst[64] = "", text[2048];
        if (n == 1) {
            strcpy(src, "%r5");
            strcpy(dst, "%r6");
        } else {
            snprintf(src, sizeof src, n == 2 ? "{%%r5, %%r5}" : "{%%r5, %%r5, %%r5, %%r5}");
            snprintf(dst, sizeof dst, n == 2 ? "{%%r6, %%r7}" : "{%%r6, %%r7, %%r8, %%r9}");
        }
        snprintf(text, sizeof text,
                 ".version 7.0\n.target sm_80\n.address_size 64\n\n"
                 ".visible .entry k()\n{\n"
                 "\t.reg .b32 %%r<10>;\n"
                 "\t.shared .align 16 .b8 buf[4240];\n"
                 "\tmov.u32 %%r1, %%tid.x;\n"
                 "\tmul.lo.u32 %%r2, %%r1, %d;\n"
                 "\tmov.u32 %%r3, buf;\n"
                 "\tadd.u32 %%r4, %%r3, %%r2;\n"
                 "\tmov.u32 %%r5, 7;\n"
                 "\tst.shared%s.%s [%%r4], %s;\n"
                 "\tld.shared%s.%s %s, [%%r4];\n"
                 "\tret;\n}\n",
                 cases[i].stride, cases[i].vec, cases[i].ty, src, cases[i].vec, cases[i].ty, dst);
        emu_ctx *c;
        ptx_module *m;
        emu_kernel *k;
        cr_assert_eq(kernel_from_text(text, NULL, &c, &m, &k), PT_OK, "%s", text);
        emu_launch l = {{1, 1, 1}, {(unsigned)cases[i].threads, 1, 1}, 0};
        emu_stats st;
        pt_err e = {0};
        cr_assert_eq(emu_run(c, k, &l, NULL, &st, &e), PT_OK, "%s\n%s", e.msg, text);
        for (int b = EMU_BANK_LD; b <= EMU_BANK_ST; b++) {
            const emu_bank_stat *s = &st.bank[b];
            cr_expect_eq(s->accesses, 1, "case %zu %s", i, emu_bank_class_name((emu_bank_class)b));
            cr_expect(s->wavefronts == cases[i].wf && s->ideal == cases[i].ideal,
                      "case %zu (%s%s stride %d) %s: %llu wavefronts (ideal %llu), want %llu (%llu)",
                      i, cases[i].vec, cases[i].ty, cases[i].stride,
                      emu_bank_class_name((emu_bank_class)b), (unsigned long long)s->wavefronts,
                      (unsigned long long)s->ideal, (unsigned long long)cases[i].wf,
                      (unsigned long long)cases[i].ideal);
            cr_expect_eq(s->conflicts, cases[i].wf - cases[i].ideal, "case %zu", i);
            if (s->conflicts)
                cr_expect_eq(s->worst_line, b == EMU_BANK_ST ? 14 : 15, "case %zu: line %d", i,
                             s->worst_line);
        }
        emu_kernel_free(k);
        emu_free(c);
        ptx_module_free(m);
    }
}

/* The unswizzled fixture must show its conflicts (8 wavefronts where 1 would
 * do, in each of 4 phases, for the cp.async destinations and the ldmatrix
 * rows); its swizzled twin none, with the same fragments loaded. */
Test(emu_warp, bank_conflicts_fixture)
{
    const char *dir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(dir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[512];
    snprintf(path, sizeof path, "%s/ptx/bank_ldmatrix.ptx", dir);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    uint16_t in[32 * 64];
    for (int i = 0; i < 32 * 64; i++)
        in[i] = (uint16_t)(i * 7 + 1);
    uint32_t out[2][32 * 4];
    static const char *const entries[] = {"unswizzled", "swizzled"};
    for (int s = 0; s < 2; s++) {
        emu_ctx *c;
        ptx_module *m;
        emu_kernel *k;
        cr_assert_eq(kernel_from_text(text, entries[s], &c, &m, &k), PT_OK);
        uint64_t din = emu_alloc(c, sizeof in, "in"), dout = emu_alloc(c, sizeof out[s], "out");
        pt_err e = {0};
        cr_assert_eq(emu_write(c, din, in, sizeof in, &e), PT_OK);
        const void *args[] = {&dout, &din};
        emu_launch l = {{1, 1, 1}, {32, 1, 1}, 0};
        emu_stats st;
        cr_assert_eq(emu_run(c, k, &l, args, &st, &e), PT_OK, "%s", e.msg);
        cr_assert_eq(emu_read(c, dout, out[s], sizeof out[s], &e), PT_OK);
        for (int b = EMU_BANK_LDMATRIX; b <= EMU_BANK_CP_ASYNC; b++) {
            const emu_bank_stat *bs = &st.bank[b];
            const char *name = emu_bank_class_name((emu_bank_class)b);
            cr_expect_eq(bs->accesses, 1, "%s %s", entries[s], name);
            cr_expect_eq(bs->ideal, 4, "%s %s", entries[s], name);
            cr_expect_eq(bs->wavefronts, s ? 4u : 32u, "%s %s: %llu wavefronts", entries[s], name,
                         (unsigned long long)bs->wavefronts);
            cr_expect_eq(bs->conflicts, s ? 0u : 28u, "%s %s", entries[s], name);
            cr_expect_eq(bs->worst_line, s ? 0 : b == EMU_BANK_LDMATRIX ? 34 : 31, "%s %s: line %d",
                         entries[s], name, bs->worst_line);
        }
        emu_kernel_free(k);
        emu_free(c);
        ptx_module_free(m);
    }
    cr_expect(memcmp(out[0], out[1], sizeof out[0]) == 0, "both layouts load the same fragments");
    /* fragment 0 of lane 0: row 0, halves 0 and 1 */
    cr_expect_eq(out[0][0], (uint32_t)in[0] | (uint32_t)in[1] << 16);
}

/* What the GEMM generator emits (gen/ -> print -> parse -> emulate, as
 * tuner/emu_check does, with the shifted shared base): the default configs
 * of f16 and bf16, tn and nt, on sm_80 and sm_90, stage and read their tiles
 * without a single bank conflict on the cp.async destinations and the
 * ldmatrix rows. */
Test(emu_warp, bank_conflicts_of_emitted_gemm)
{
    static const pt_dtype dts[] = {PT_F16, PT_BF16};
    static const char *const lays[] = {"tn", "nt"}, *const archs[] = {"sm_80", "sm_90"};
    for (int di = 0; di < 2; di++)
        for (int li = 0; li < 2; li++)
            for (int ai = 0; ai < 2; ai++) {
                pt_target tg;
                pt_err e = {0};
                cr_assert_eq(pt_target_parse(archs[ai], &tg, &e), PT_OK);
                pt_problem p = PT_GEMM(256, 256, 128, lays[li], dts[di], dts[di]);
                pt_arena *a = pt_arena_new();
                pt_prepared *pp;
                cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
                pt_config cfg;
                gen_gemm_op.defaults(pp, &tg, &cfg);
                pt_check_opts o = {.seed = 7, .threads = 2};
                pt_check_result r;
                int rc = pt_check_emu(&gen_gemm_op, pp, &tg, &cfg, &o, &r, &e);
                char what[128];
                snprintf(what, sizeof what, "%s %s %s default config", archs[ai],
                         pt_dtype_get(dts[di])->name, lays[li]);
                cr_expect_eq(rc, PT_OK, "%s: %s", what, e.msg);
                for (int b = EMU_BANK_LDMATRIX; b <= EMU_BANK_CP_ASYNC; b++) {
                    const emu_bank_stat *bs = &r.bank[b];
                    const char *name = emu_bank_class_name((emu_bank_class)b);
                    cr_expect_gt(bs->accesses, 0, "%s: no %s ran", what, name);
                    cr_expect_eq(bs->conflicts, 0,
                                 "%s: %s: %llu extra wavefronts of %llu (worst: line %d, %llu)", what,
                                 name, (unsigned long long)bs->conflicts,
                                 (unsigned long long)bs->wavefronts, bs->worst_line,
                                 (unsigned long long)bs->worst_conflicts);
                }
                printf("%s: ldmatrix %llu accesses %llu wavefronts, cp.async %llu accesses %llu "
                       "wavefronts, st.shared %llu extra of %llu, ld.shared %llu extra of %llu\n",
                       what, (unsigned long long)r.bank[EMU_BANK_LDMATRIX].accesses,
                       (unsigned long long)r.bank[EMU_BANK_LDMATRIX].wavefronts,
                       (unsigned long long)r.bank[EMU_BANK_CP_ASYNC].accesses,
                       (unsigned long long)r.bank[EMU_BANK_CP_ASYNC].wavefronts,
                       (unsigned long long)r.bank[EMU_BANK_ST].conflicts,
                       (unsigned long long)r.bank[EMU_BANK_ST].wavefronts,
                       (unsigned long long)r.bank[EMU_BANK_LD].conflicts,
                       (unsigned long long)r.bank[EMU_BANK_LD].wavefronts);
                pt_arena_free(a);
            }
}
