/* Emulator detectors: each gets a planted bug it must report (one line
 * naming kind, kernel, PTX line, CTA, thread, address and allocation) and a
 * clean twin it must stay silent on; switching the detector off silences
 * it. */
#include "test_emu_util.h"

/* Runs with `o`; returns the status and keeps the reports in t. */
static int run_with(tk *t, unsigned grid, unsigned block, const void *const *args)
{
    pt_err e = {0};
    return tk_run_dims(t, grid, block, 0, args, &e, NULL);
}

static void expect_report(tk *t, emu_report_kind kind, int rc, const char *needle)
{
    cr_assert_eq(rc, PT_EEMU, "expected a %s report", emu_report_kind_name(kind));
    bool found = false;
    for (int i = 0; i < emu_nreports(t->emu); i++)
        if (emu_report_kind_of(t->emu, i) == kind) {
            const char *line = emu_report(t->emu, i);
            cr_assert(strstr(line, emu_report_kind_name(kind)) == line, "%s", line);
            cr_assert(strstr(line, "kernel k"), "%s", line);
            cr_assert(strstr(line, " line "), "%s", line);
            cr_assert(strstr(line, "cta ("), "%s", line);
            found |= !needle || strstr(line, needle) != NULL;
        }
    if (!found)
        tk_dump_reports(t);
    cr_assert(found, "no %s report containing '%s'", emu_report_kind_name(kind), needle ? needle : "");
}

/* out[tid] = in[tid + off] with n threads; off = 1 reads past the end. */
static void oob_global(int off, bool detect, bool expect)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), j = R32(&t), v = R32(&t);
    E(ADD, NOM, T1(U32), ptx_r(j), ptx_r(tid), ptx_imm(off));
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(v), ptx_addr(tk_addr(&t, pi, j, 4), 0));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, tid, 4), 0), ptx_r(v));
    tk_ret(&t);
    emu_opts o = emu_default_opts();
    o.detect_oob = detect;
    tk_load_opts(&t, &o);
    uint32_t in[64] = {0};
    uint64_t din = tk_buf(&t, in, sizeof in, "input"), dout = tk_buf(&t, NULL, sizeof in, "output");
    const void *args[] = {&dout, &din};
    int rc = run_with(&t, 1, 64, args);
    if (expect)
        expect_report(&t, EMU_R_OOB, rc, "'input' (base 0x");
    else
        cr_assert_eq(rc, PT_OK, "%s", emu_nreports(t.emu) ? emu_report(t.emu, 0) : "");
    if (expect)
        cr_assert(strstr(emu_report(t.emu, 0), "offset +256"), "%s", emu_report(t.emu, 0));
    tk_free(&t);
}

Test(emu_detect, oob_global) { oob_global(1, true, true); }
Test(emu_detect, oob_global_clean) { oob_global(0, true, false); }
Test(emu_detect, oob_global_off) { oob_global(1, false, false); }

/* A write one element past a shared array. */
static void oob_shared(int n)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "tile", 4, 128);
    ptx_shared_add(t.f, "other", 4, 64);
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), a = R32(&t), b = R32(&t), p = RP(&t);
    E(MOV, NOM, T1(U32), ptx_r(b), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(tid), ptx_imm(4), ptx_r(b));
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(n));
    ptx_guard(ptx_emit(t.f, OP(ST), MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(tid)), p, false);
    tk_ret(&t);
    tk_load(&t);
    int rc = run_with(&t, 1, 64, NULL);
    if (n > 32)
        expect_report(&t, EMU_R_OOB, rc, "'tile'");
    else
        cr_assert_eq(rc, PT_OK);
    tk_free(&t);
}

Test(emu_detect, oob_shared) { oob_shared(33); }
Test(emu_detect, oob_shared_clean) { oob_shared(32); }

/* Reading poisoned (never written) global memory; shared memory read
 * before any write. */
static void uninit(bool bug)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "s", 4, 256);
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), v = R32(&t), a = R32(&t), b = R32(&t);
    E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(v), ptx_addr(tk_addr(&t, pi, tid, 4), 0));
    E(MOV, NOM, T1(U32), ptx_r(b), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(tid), ptx_imm(4), ptx_r(b));
    if (!bug)
        E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(v));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(b), ptx_addr(a, 0));
    E(ADD, NOM, T1(U32), ptx_r(v), ptx_r(v), ptx_r(b));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, tid, 4), 0), ptx_r(v));
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[64] = {0};
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, sizeof in, "out");
    pt_err e = {0};
    if (bug) /* half the input was never written */
        cr_assert_eq(emu_poison(t.emu, din + 128, 128, &e), PT_OK);
    const void *args[] = {&dout, &din};
    int rc = run_with(&t, 2, 64, args);
    if (bug) {
        expect_report(&t, EMU_R_UNINIT, rc, "'in'");
        expect_report(&t, EMU_R_UNINIT, rc, "shared");
    } else
        cr_assert_eq(rc, PT_OK);
    tk_free(&t);
}

Test(emu_detect, uninit) { uninit(true); }
Test(emu_detect, uninit_clean) { uninit(false); }

/* Warp 1 reads what warp 0 wrote: without a bar.sync between, a race
 * (and, in the second kernel, a write-after-read race). */
static void race(bool barrier, bool war, bool detect)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "buf", 4, 128);
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), lane = tk_sreg(&t, PTX_S_LANEID), a = R32(&t), b = R32(&t),
            v = R32(&t), p = RP(&t);
    int l1 = ptx_label_new(t.f), l2 = ptx_label_new(t.f);
    E(MOV, NOM, T1(U32), ptx_r(b), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(lane), ptx_imm(4), ptx_r(b));
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(32));
    /* warp 0 initialises, then everyone meets */
    ptx_guard(ptx_emit(t.f, OP(ST), MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_imm(0)), p, true);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l1)), p, false);
    if (war) /* warp 0 reads */
        E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(a, 0));
    else /* warp 0 writes */
        E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(tid));
    ptx_label_place(t.f, l1);
    if (barrier)
        E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(l2)), p, true);
    if (war) /* warp 1 writes */
        E(ST, MODS(MD(SHARED)), T1(U32), ptx_addr(a, 0), ptx_r(tid));
    else /* warp 1 reads */
        E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(a, 0));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, lane, 4), 0), ptx_r(v));
    ptx_label_place(t.f, l2);
    tk_ret(&t);
    emu_opts o = emu_default_opts();
    o.detect_race = detect;
    tk_load_opts(&t, &o);
    uint64_t dout = tk_buf(&t, NULL, 128, "out");
    const void *args[] = {&dout};
    int rc = run_with(&t, 1, 64, args);
    if (!barrier && detect)
        /* warp order decides which side is seen second: either is the race */
        expect_report(&t, EMU_R_RACE, rc, "with no barrier between");
    else
        cr_assert_eq(rc, PT_OK, "%s", emu_nreports(t.emu) ? emu_report(t.emu, 0) : "");
    tk_free(&t);
}

Test(emu_detect, race_raw) { race(false, false, true); }
Test(emu_detect, race_war) { race(false, true, true); }
Test(emu_detect, race_clean) { race(true, false, true); }
Test(emu_detect, race_war_clean) { race(true, true, true); }
Test(emu_detect, race_off) { race(false, false, false); }

/* mma (and bar.sync) inside a branch only half the warp takes. */
static void divergent(bool bug, bool use_bar)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID), p = RP(&t);
    ptx_reg a[4], b[2], c[4];
    for (int i = 0; i < 4; i++) {
        a[i] = R32(&t);
        c[i] = RF(&t);
        E(MOV, NOM, T1(B32), ptx_r(a[i]), ptx_hex(0x3c003c00));
        E(MOV, NOM, T1(F32), ptx_r(c[i]), ptx_f32(0.0f));
    }
    for (int i = 0; i < 2; i++) {
        b[i] = R32(&t);
        E(MOV, NOM, T1(B32), ptx_r(b[i]), ptx_hex(0x3c003c00));
    }
    int skip = ptx_label_new(t.f);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(lane), ptx_imm(bug ? 16 : 32));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(skip)), p, false);
    if (use_bar)
        E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    else
        E(MMA, MODS(MD(SYNC), MD(ALIGNED), MD(M16N8K16), MD(ROW), MD(COL)),
          PTX_TYPES(TY(F32), TY(F16), TY(F16), TY(F32)), ptx_vecr(t.f, 4, c), ptx_vecr(t.f, 4, a),
          ptx_vecr(t.f, 2, b), ptx_vecr(t.f, 4, c));
    ptx_label_place(t.f, skip);
    E(ST, MODS(MD(GLOBAL)), T1(F32), ptx_addr(tk_addr(&t, po, lane, 4), 0), ptx_r(c[0]));
    tk_ret(&t);
    tk_load(&t);
    uint64_t dout = tk_buf(&t, NULL, 128, "out");
    const void *args[] = {&dout};
    int rc = run_with(&t, 1, 32, args);
    if (bug)
        expect_report(&t, EMU_R_DIVERGENCE, rc, use_bar ? "bar" : "mma");
    else {
        cr_assert_eq(rc, PT_OK, "%s", emu_nreports(t.emu) ? emu_report(t.emu, 0) : "");
        float out[32];
        tk_get(&t, dout, out, sizeof out);
        if (!use_bar)
            cr_assert_eq(out[0], 16.0f, "16 products of 1 x 1");
    }
    tk_free(&t);
}

Test(emu_detect, divergent_mma) { divergent(true, false); }
Test(emu_detect, divergent_mma_clean) { divergent(false, false); }
Test(emu_detect, divergent_bar_sync) { divergent(true, true); }

/* A shfl.sync whose membermask names lanes that took another path. */
Test(emu_detect, shfl_membermask)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID), p = RP(&t), d = R32(&t);
    int skip = ptx_label_new(t.f);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(lane), ptx_imm(8));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(skip)), p, false);
    E(SHFL, MODS(MD(SYNC), MD(IDX)), T1(B32), ptx_r(d), ptx_r(lane), ptx_imm(0), ptx_imm(31), ptx_imm(-1));
    ptx_label_place(t.f, skip);
    tk_ret(&t);
    tk_load(&t);
    expect_report(&t, EMU_R_DIVERGENCE, run_with(&t, 1, 32, NULL), "membermask 0xffffffff");
    tk_free(&t);
}

/* cp.async, then a read of its destination before (bug) or after the
 * wait_group that completes it. */
static void cp_async_read(bool bug)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "stage", 16, 512);
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID), a = R32(&t), b = R32(&t), v = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(b), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(lane), ptx_imm(16), ptx_r(b));
    E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(a, 0),
      ptx_addr(tk_addr(&t, pi, lane, 16), 0), ptx_imm(16));
    E0(CP_ASYNC_COMMIT, NOM, PTX_NOTYPES);
    if (!bug)
        E(CP_ASYNC_WAIT, NOM, PTX_NOTYPES, ptx_imm(0));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(a, 4));
    if (bug)
        E(CP_ASYNC_WAIT, NOM, PTX_NOTYPES, ptx_imm(0));
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, lane, 4), 0), ptx_r(v));
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[128];
    for (int i = 0; i < 128; i++)
        in[i] = (uint32_t)i;
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, 128, "out");
    const void *args[] = {&dout, &din};
    int rc = run_with(&t, 1, 32, args);
    if (bug)
        expect_report(&t, EMU_R_CP_ASYNC, rc, "'stage'");
    else {
        cr_assert_eq(rc, PT_OK, "%s", emu_nreports(t.emu) ? emu_report(t.emu, 0) : "");
        uint32_t out[32];
        tk_get(&t, dout, out, sizeof out);
        for (int l = 0; l < 32; l++)
            cr_assert_eq(out[l], in[4 * l + 1]);
    }
    tk_free(&t);
}

Test(emu_detect, cp_async_before_wait) { cp_async_read(true); }
Test(emu_detect, cp_async_after_wait) { cp_async_read(false); }

/* Warp 0 waits at barrier 0 (all threads), warp 1 at barrier 1 (64
 * threads): neither can complete. */
static void deadlock(bool bug)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), p = RP(&t);
    int other = ptx_label_new(t.f), end = ptx_label_new(t.f);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(32));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(other)), p, false);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(end));
    ptx_label_place(t.f, other);
    if (bug)
        E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(1), ptx_imm(64));
    else
        E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    ptx_label_place(t.f, end);
    tk_ret(&t);
    tk_load(&t);
    int rc = run_with(&t, 2, 64, NULL);
    if (bug)
        expect_report(&t, EMU_R_DEADLOCK, rc, "can never complete");
    else
        cr_assert_eq(rc, PT_OK, "%s", emu_nreports(t.emu) ? emu_report(t.emu, 0) : "");
    tk_free(&t);
}

Test(emu_detect, deadlock) { deadlock(true); }
Test(emu_detect, deadlock_clean) { deadlock(false); }

/* A .v4 load at a 4-byte (not 16-byte) aligned address. */
static void misaligned(int off)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg v[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    E(LD, MODS(MD(GLOBAL), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v), ptx_addr(pi, off));
    E(ST, MODS(MD(GLOBAL), MD(V4)), T1(U32), ptx_addr(po, 0), ptx_vecr(t.f, 4, v));
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[8] = {0};
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, 16, "out");
    const void *args[] = {&dout, &din};
    int rc = run_with(&t, 1, 1, args);
    if (off % 16)
        expect_report(&t, EMU_R_MISALIGNED, rc, "16-byte access not aligned to 16");
    else
        cr_assert_eq(rc, PT_OK);
    tk_free(&t);
}

Test(emu_detect, misaligned) { misaligned(4); }
Test(emu_detect, misaligned_clean) { misaligned(16); }

/* An endless loop trips the step cap instead of hanging. */
Test(emu_detect, step_cap)
{
    tk t = tk_new("sm_80", "k");
    int l = ptx_label_new(t.f);
    ptx_label_place(t.f, l);
    E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l));
    tk_ret(&t);
    emu_opts o = emu_default_opts();
    o.max_steps = 100000;
    tk_load_opts(&t, &o);
    expect_report(&t, EMU_R_STEP_CAP, run_with(&t, 4, 64, NULL), "step cap");
    tk_free(&t);
}

/* Issue 9 item 17: the guard counts each CTA's launch and retirement, not
 * just instructions. A grid of near-empty CTAs costs EMU_CTA_COST +
 * EMU_WARP_COST per warp each: over the cap before it runs (refused up
 * front, nothing executed), or over it as the CTAs retire. */
static tk short_kernel(void)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg a = R32(&t);
    for (int i = 0; i < 8; i++)
        E(MOV, NOM, T1(U32), ptx_r(a), ptx_imm(i));
    tk_ret(&t);
    return t;
}

Test(emu_detect, step_cap_counts_ctas)
{
    enum { NCTA = 1000, PER = 10 }; /* 8 movs, ret, and the implicit exit: at most 10 */
    tk t = short_kernel();
    emu_opts o = emu_default_opts();
    uint64_t cta = EMU_CTA_COST + EMU_WARP_COST;
    /* the grid alone is over the cap: refused before any instruction */
    o.max_steps = NCTA * (cta + 1) - 1;
    tk_load_opts(&t, &o);
    emu_stats st;
    pt_err e = {0};
    int rc = tk_run_dims(&t, NCTA, 32, 0, NULL, &e, &st);
    cr_assert_eq(rc, PT_EEMU, "a grid of %d CTAs under a cap of %llu", NCTA,
                 (unsigned long long)o.max_steps);
    cr_assert_eq(emu_report_kind_of(t.emu, 0), EMU_R_STEP_CAP);
    cr_expect(strstr(emu_report(t.emu, 0), "a grid of 1000 CTAs of 1 warps costs at least"), "%s",
              emu_report(t.emu, 0));
    cr_expect_eq(st.warp_instructions, 0, "nothing ran");
    tk_free(&t);
    /* with room for everything: clean, and the cost is what the guard counted */
    t = short_kernel();
    o.max_steps = NCTA * (cta + PER);
    tk_load_opts(&t, &o);
    rc = tk_run_dims(&t, NCTA, 32, 0, NULL, &e, &st);
    cr_assert_eq(rc, PT_OK, "%s", e.msg);
    cr_expect_eq(st.cost, st.warp_instructions + NCTA * cta);
    cr_assert_lt(st.warp_instructions, NCTA * (PER - 1) + 1);
    uint64_t cost = st.cost;
    tk_free(&t);
    /* a cap the instructions alone fit, but not with the launch costs: the
     * run passes the up-front check and trips as its CTAs retire */
    t = short_kernel();
    o.max_steps = cost - 1;
    tk_load_opts(&t, &o);
    rc = tk_run_dims(&t, NCTA, 32, 0, NULL, &e, &st);
    cr_assert_eq(rc, PT_EEMU, "instructions %llu, cap %llu", (unsigned long long)st.warp_instructions,
                 (unsigned long long)o.max_steps);
    cr_assert_eq(emu_report_kind_of(t.emu, 0), EMU_R_STEP_CAP, "%s", emu_report(t.emu, 0));
    cr_expect(strstr(emu_report(t.emu, 0), "CTA launches counted"), "%s", emu_report(t.emu, 0));
    tk_free(&t);
}

/* An endless loop under a wall-clock limit ends with a timeout report
 * soon after the limit, whatever the step cap. */
Test(emu_detect, timeout)
{
    for (int threads = 1; threads <= 2; threads++) {
        tk t = tk_new("sm_80", "k");
        int l = ptx_label_new(t.f);
        ptx_label_place(t.f, l);
        E(BRA, NOM, PTX_NOTYPES, ptx_lbl(l));
        tk_ret(&t);
        emu_opts o = emu_default_opts();
        o.timeout = 0.05;
        o.threads = threads;
        o.max_steps = 1ull << 40;
        tk_load_opts(&t, &o);
        emu_stats st;
        pt_err e = {0};
        int rc = tk_run_dims(&t, 4, 64, 0, NULL, &e, &st);
        cr_assert_eq(rc, PT_EEMU);
        cr_assert_eq(emu_report_kind_of(t.emu, 0), EMU_R_TIMEOUT, "%s", emu_report(t.emu, 0));
        cr_expect(strstr(emu_report(t.emu, 0), "timeout: kernel k"), "%s", emu_report(t.emu, 0));
        cr_expect(strstr(emu_report(t.emu, 0), "wall-clock limit of 0.05 s"), "%s",
                  emu_report(t.emu, 0));
        cr_expect_lt(st.seconds, 5.0, "stopped %.2f s after a 0.05 s limit", st.seconds);
        cr_expect_eq(emu_nreports(t.emu), 1, "one report");
        tk_free(&t);
    }
}

Test(emu_detect, trap)
{
    tk t = tk_new("sm_80", "k");
    E0(TRAP, NOM, PTX_NOTYPES);
    tk_ret(&t);
    tk_load(&t);
    expect_report(&t, EMU_R_TRAP, run_with(&t, 1, 32, NULL), NULL);
    tk_free(&t);
}

/* A bad kernel keeps reporting once per instruction and kind, however many
 * threads hit it, and max_reports bounds the list. */
Test(emu_detect, reports_deduplicated)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg pi = tk_ptr(&t, "in"), v = R32(&t);
    for (int i = 0; i < 5; i++)
        E(LD, MODS(MD(GLOBAL)), T1(U32), ptx_r(v), ptx_addr(pi, 4096 + 4 * i));
    tk_ret(&t);
    emu_opts o = emu_default_opts();
    o.max_reports = 3;
    o.threads = 2;
    tk_load_opts(&t, &o);
    uint64_t din = tk_buf(&t, NULL, 64, "in");
    const void *args[] = {&din};
    pt_err e = {0};
    emu_stats st;
    cr_assert_eq(tk_run_dims(&t, 8, 128, 0, args, &e, &st), PT_EEMU);
    cr_assert_eq(emu_nreports(t.emu), 3);
    cr_assert_geq(st.reports, 5);
    tk_free(&t);
}

/* With the deadlock detector off the run still stops, without a report. */
Test(emu_detect, deadlock_off)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), p = RP(&t);
    int other = ptx_label_new(t.f);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(32));
    ptx_guard(ptx_emit(t.f, OP(BRA), NOM, PTX_NOTYPES, ptx_lbl(other)), p, false);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    ptx_label_place(t.f, other);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(1), ptx_imm(64));
    tk_ret(&t);
    emu_opts o = emu_default_opts();
    o.detect_deadlock = false;
    tk_load_opts(&t, &o);
    cr_assert_eq(run_with(&t, 1, 64, NULL), PT_EEMU);
    cr_assert_eq(emu_nreports(t.emu), 0);
    tk_free(&t);
}

/* A pipeline that refills a stage other warps still read, with no barrier
 * between their reads and the cp.async (the copy may land at once). */
static void cp_async_reuse(bool barrier)
{
    tk t = tk_new("sm_80", "k");
    const char *sm = ptx_shared_add(t.f, "stage", 16, 512);
    ptx_reg po = tk_ptr(&t, "out"), pi = tk_ptr(&t, "in");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), lane = tk_sreg(&t, PTX_S_LANEID), a = R32(&t), b = R32(&t),
            x = R32(&t), v = R32(&t);
    ptx_reg src = tk_addr(&t, pi, lane, 16);
    E(MOV, NOM, T1(U32), ptx_r(b), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(a), ptx_r(lane), ptx_imm(16), ptx_r(b));
    E(XOR, NOM, T1(B32), ptx_r(x), ptx_r(a), ptx_imm(16)); /* a neighbour's chunk */
    ptx_reg p = RP(&t);
    E(SETP, MODS(MD(LT)), T1(U32), ptx_r(p), ptx_r(tid), ptx_imm(32));
    /* warp 0 fills the stage, everyone waits and reads it */
    ptx_guard(ptx_emit(t.f, OP(CP_ASYNC), MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(a, 0),
                       ptx_addr(src, 0), ptx_imm(16)), p, false);
    E0(CP_ASYNC_WAIT_ALL, NOM, PTX_NOTYPES);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(v), ptx_addr(x, 0));
    if (barrier)
        E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    /* warp 0 refills it for the next step */
    ptx_guard(ptx_emit(t.f, OP(CP_ASYNC), MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(a, 0),
                       ptx_addr(src, 0), ptx_imm(16)), p, false);
    E0(CP_ASYNC_WAIT_ALL, NOM, PTX_NOTYPES);
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(tk_addr(&t, po, tid, 4), 0), ptx_r(v));
    tk_ret(&t);
    tk_load(&t);
    uint32_t in[128] = {0};
    uint64_t din = tk_buf(&t, in, sizeof in, "in"), dout = tk_buf(&t, NULL, 256, "out");
    const void *args[] = {&dout, &din};
    int rc = run_with(&t, 1, 64, args);
    if (!barrier)
        expect_report(&t, EMU_R_RACE, rc, "cp.async");
    else
        cr_assert_eq(rc, PT_OK, "%s", emu_nreports(t.emu) ? emu_report(t.emu, 0) : "");
    tk_free(&t);
}

Test(emu_detect, cp_async_overwrites_stage_in_use) { cp_async_reuse(false); }
Test(emu_detect, cp_async_overwrites_stage_clean) { cp_async_reuse(true); }
