/* gen/kit/frag: the accumulator fragment on the emulator, and the GEMM
 * epilogue built on it.
 *
 * The P*V step: one warp computes S = A * B with mma.sync m16n8k16,
 * applies an expression to the C fragment, repacks it into the A operand
 * (kit_frag_to_a) and computes O = P * V with a second mma.sync. The
 * float64 reference is round16(S') * V, S' the expression of S; inputs are
 * small multiples of powers of two (A integers, B 64ths, V 16ths) so every
 * f32 sum is exact and only the 16-bit rounding of P remains: the comparison is exact, and a wrong lane,
 * half, column block or rounding mode changes O.
 *
 * The epilogue: the emitted GEMMs' epilogue staging is free of
 * shared-memory bank conflicts (emu_stats.bank, every access class), an
 * epilogue with alpha = 1 multiplies nothing, and beta = 0 reads no C. */
#include "test_emu_util.h"

#include "gen/gemm.h"
#include "gen/kit/kit.h"
#include "tuner/emu_check.h"

static uint16_t to16(double v, bool bf) /* RNE double -> f16/bf16 (values well inside the range) */
{
    float x = (float)v; /* exact for the test's values */
    uint32_t b = bitsof(x);
    if (bf) {
        uint32_t r = b + 0x7fffu + ((b >> 16) & 1u);
        return (uint16_t)(r >> 16);
    }
    if (x == 0)
        return (uint16_t)((b >> 16) & 0x8000u);
    int e;
    double m = frexp(fabs(v), &e); /* v = m 2^e, m in [0.5, 1) */
    double q = ldexp(1.0, e - 11); /* f16 lsb (normal range) */
    double r = nearbyint(fabs(v) / q) * q;
    int re;
    frexp(r, &re);
    uint32_t s = v < 0 ? 0x8000u : 0;
    (void)m;
    return (uint16_t)(s | (uint32_t)(re - 1 + 15) << 10 | ((uint32_t)ldexp(r, 11 - re) & 1023));
}

static double from16(uint16_t h, bool bf)
{
    if (bf)
        return (double)f32of((uint32_t)h << 16);
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp((double)(m | 1024), e - 25) : ldexp((double)m, -24);
    return (h & 0x8000) ? -v : v;
}

/* 16-bit matrix element loads for the mma operands: a b32 pair of
 * consecutive elements at p + 2 * (row * ld + col). */
static ptx_reg pair_at(tk *t, ptx_reg p, ptx_reg base_off, int64_t imm)
{
    ptx_reg r = R32(t);
    ptx_reg a = tk_addr(t, p, base_off, 2);
    cr_assert(ptx_emit(t->f, OP(LD), MODS(MD(GLOBAL)), T1(B32), ptx_r(r), ptx_addr(a, imm * 2)));
    return r;
}

/* kit_frag_apply's function: the expression at one register. */
typedef struct expr_arg {
    ptx_fn *f;
    const ex_prog *p;
} expr_arg;

static ptx_reg apply_expr(void *arg, const kit_frag *fr, int i, ptx_reg v)
{
    const expr_arg *a = arg;
    (void)fr;
    (void)i;
    ptx_opd in[1] = {ptx_r(v)}, val[16];
    ptx_opd r = kit_expr_value(a->f, a->p, in, val);
    cr_assert_eq(r.kind, PTX_O_REG);
    return r.u.reg;
}

/* S = A (16x16) * B (16 x 16; given as Bt, n-major), S' = S * 2 - 1,
 * P = round16(S'), O = P * V (V 16 x 16, given as Vt): O (16 x 16 f32). */
static void pv_case(bool bf)
{
    tk t = tk_new("sm_80", "pv");
    ptx_fn *f = t.f;
    ptx_type ab = bf ? TY(BF16) : TY(F16);
    ptx_reg po = tk_ptr(&t, "o"), pa = tk_ptr(&t, "a"), pb = tk_ptr(&t, "bt"), pv = tk_ptr(&t, "vt");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID);
    ptx_reg g = R32(&t), q = R32(&t), aoff = R32(&t), boff = R32(&t);
    E(SHR, NOM, T1(U32), ptx_r(g), ptx_r(lane), ptx_imm(2));
    E(AND, NOM, T1(B32), ptx_r(q), ptx_r(lane), ptx_imm(3));
    /* element (g, 2t) of a 16-wide row-major matrix: 16 g + 2 t */
    E(SHL, NOM, T1(B32), ptx_r(aoff), ptx_r(q), ptx_imm(1));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(aoff), ptx_r(g), ptx_imm(16), ptx_r(aoff));
    E(MOV, NOM, T1(U32), ptx_r(boff), ptx_r(aoff));
    /* A fragment: a_j = A[g + 8 (j%2)][2t + 8 (j/2) ..] */
    ptx_reg afr[4];
    for (int j = 0; j < 4; j++)
        afr[j] = pair_at(&t, pa, aoff, 16 * 8 * (j % 2) + 8 * (j / 2));
    /* B fragment of n-block b: b_j = Bt[8b + g][2t + 8j ..] */
    ptx_reg s[8];
    for (int i = 0; i < 8; i++) {
        s[i] = RF(&t);
        E(MOV, NOM, T1(F32), ptx_r(s[i]), ptx_f32(0.0f));
    }
    ptx_mods mm = MODS(MD(SYNC), MD(ALIGNED), MD(M16N8K16), MD(ROW), MD(COL));
    ptx_types mt = PTX_TYPES(TY(F32), ab, ab, TY(F32));
    for (int b = 0; b < 2; b++) {
        ptx_reg bfr[2] = {pair_at(&t, pb, boff, 16 * 8 * b), pair_at(&t, pb, boff, 16 * 8 * b + 8)};
        E(MMA, mm, mt, ptx_vecr(f, 4, &s[4 * b]), ptx_vecr(f, 4, afr), ptx_vecr(f, 2, bfr),
          ptx_vecr(f, 4, &s[4 * b]));
    }
    ptx_reg zero = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(zero), ptx_imm(0));
    const kit_atom *at = kit_atom_find(PTX_M_M16N8K16, ab, TY(F32));
    cr_assert(at);
    kit_frag fr = kit_frag_mma_c(f, at, 1, 2, s, zero, zero, lane);
    cr_assert_eq(fr.n, 8);
    /* S' = S * 2 - 1 through the expression path */
    pt_arena *ar = pt_arena_new();
    ex_prog *p;
    pt_err pe = {0};
    cr_assert_eq(ex_parse(ar, "y = acc * 2 - 1", &p, &pe), PT_OK, "%s", pe.msg);
    cr_assert(p->nnodes <= 16);
    expr_arg ea = {f, p};
    kit_frag_apply(f, &fr, apply_expr, &ea);
    ptx_reg pfr[4];
    kit_frag_to_a(f, &fr, at, 0, 0, pfr);
    cr_assert_eq(ptx_module_error(t.m), 0, "%s", ptx_module_errmsg(t.m));
    ptx_reg o[8];
    for (int i = 0; i < 8; i++) {
        o[i] = RF(&t);
        E(MOV, NOM, T1(F32), ptx_r(o[i]), ptx_f32(0.0f));
    }
    for (int b = 0; b < 2; b++) {
        ptx_reg vfr[2] = {pair_at(&t, pv, boff, 16 * 8 * b), pair_at(&t, pv, boff, 16 * 8 * b + 8)};
        E(MMA, mm, mt, ptx_vecr(f, 4, &o[4 * b]), ptx_vecr(f, 4, pfr), ptx_vecr(f, 2, vfr),
          ptx_vecr(f, 4, &o[4 * b]));
    }
    /* O through its own C fragment: register i at (row_base + row[i], col_base + col[i]) */
    kit_frag of = kit_frag_mma_c(f, at, 1, 2, o, zero, zero, lane);
    ptx_reg lin = R32(&t);
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(lin), ptx_r(of.row_base), ptx_imm(16), ptx_r(of.col_base));
    ptx_reg oa = tk_addr(&t, po, lin, 4);
    for (int i = 0; i < of.n; i++)
        E(ST, MODS(MD(GLOBAL)), T1(F32), ptx_addr(oa, 4 * (of.row[i] * 16 + of.col[i])), ptx_r(of.r[i]));
    tk_ret(&t);
    tk_load(&t);

    uint64_t seed = bf ? 11 : 12;
    uint16_t A[256], Bt[256], Vt[256];
    double a[16][16], b[16][16], v[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            a[i][j] = (double)((int)(rnd32(&seed) % 129) - 64); /* integers in [-64, 64] */
            b[j][i] = (double)((int)(rnd32(&seed) % 129) - 64) / 64.0; /* B[k][n] */
            v[j][i] = (double)((int)(rnd32(&seed) % 33) - 16) / 16.0;
            A[i * 16 + j] = to16(a[i][j], bf);
        }
    for (int n = 0; n < 16; n++)
        for (int k = 0; k < 16; k++) {
            Bt[n * 16 + k] = to16(b[k][n], bf);
            Vt[n * 16 + k] = to16(v[k][n], bf);
        }
    double P[16][16];
    int rounded = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            double sum = 0;
            for (int k = 0; k < 16; k++)
                sum += a[i][k] * b[k][j];
            double sp = sum * 2 - 1;
            P[i][j] = from16(to16(sp, bf), bf);
            rounded += P[i][j] != sp;
        }
    cr_assert_gt(rounded, 16, "the inputs must make the 16-bit rounding of P matter (%d)", rounded);
    uint64_t dO = tk_buf(&t, NULL, 256 * 4, "o"), dA = tk_buf(&t, A, sizeof A, "a"),
             dB = tk_buf(&t, Bt, sizeof Bt, "bt"), dV = tk_buf(&t, Vt, sizeof Vt, "vt");
    const void *args[] = {&dO, &dA, &dB, &dV};
    tk_run(&t, 1, 32, args);
    float O[256];
    tk_get(&t, dO, O, sizeof O);
    int bad = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            double want = 0;
            for (int k = 0; k < 16; k++)
                want += P[i][k] * v[k][j];
            if ((double)O[i * 16 + j] != want && bad++ < 4)
                cr_log_error("%s O[%d][%d] = %.9g, want %.9g", bf ? "bf16" : "f16", i, j,
                             (double)O[i * 16 + j], want);
        }
    cr_expect_eq(bad, 0, "%d of 256 elements of O differ", bad);
    pt_arena_free(ar);
    tk_free(&t);
}

Test(kit_frag, repack_c_to_a_bf16_pv) { pv_case(true); }
Test(kit_frag, repack_c_to_a_f16_pv) { pv_case(false); }

/* A fragment without the requested A block is refused, not read past. */
Test(kit_frag, repack_outside_the_fragment_is_an_error)
{
    tk t = tk_new("sm_80", "bad");
    ptx_reg s[8], lane = tk_sreg(&t, PTX_S_LANEID), zero = R32(&t);
    for (int i = 0; i < 8; i++)
        s[i] = RF(&t);
    const kit_atom *at = kit_atom_get(PT_BF16);
    kit_frag fr = kit_frag_mma_c(t.f, at, 1, 2, s, zero, zero, lane);
    ptx_reg a[4];
    kit_frag_to_a(t.f, &fr, at, 0, 1, a); /* k columns 16..31: not held */
    cr_expect_neq(ptx_module_error(t.m), 0);
    cr_expect(strstr(ptx_module_errmsg(t.m), "no accumulator for A block (0, 1)"), "%s",
              ptx_module_errmsg(t.m));
    tk_free(&t);
}

/* The bank model agrees with the emulator's rules on simple patterns. */
Test(kit_frag, smem_wavefronts_model)
{
    int64_t a[32];
    for (int l = 0; l < 32; l++)
        a[l] = 4 * l;
    cr_expect_eq(kit_smem_wavefronts(a, 4), 1);
    for (int l = 0; l < 32; l++)
        a[l] = 128 * l;
    cr_expect_eq(kit_smem_wavefronts(a, 4), 32);
    for (int l = 0; l < 32; l++)
        a[l] = 16 * l;
    cr_expect_eq(kit_smem_wavefronts(a, 16), 4);
    for (int l = 0; l < 32; l++)
        a[l] = 32 * l; /* quarter warps over 256 bytes: 2-way */
    cr_expect_eq(kit_smem_wavefronts(a, 16), 8);
    for (int l = 0; l < 32; l++)
        a[l] = 0; /* broadcast */
    cr_expect_eq(kit_smem_wavefronts(a, 4), 1);
}

/* ---- the GEMM epilogue ---- */

static const char *emit_gemm(pt_arena *a, const pt_problem *p, const char *arch, const char *cfg)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), PT_OK, "%s", e.msg);
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_config c;
    pt_space s;
    gen_gemm_op.space(pp, &tg, &s);
    gen_gemm_op.defaults(pp, &tg, &c);
    if (cfg)
        cr_assert_eq(pt_config_parse(&s, cfg, &c, &e), PT_OK, "%s", e.msg);
    ptx_module *m = ptx_module_new(&tg, 90);
    pt_launch l;
    memset(&l, 0, sizeof l);
    cr_assert_eq(gen_gemm_op.emit(pp, &c, m, &l, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    char *text = ptx_print(m);
    const char *r = pt_arena_printf(a, "%s", text);
    free(text);
    ptx_module_free(m);
    return r;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *s = strstr(text, needle); s; s = strstr(s + 1, needle))
        n++;
    return n;
}

/* alpha = 1 (the default epilogue, and a user epilogue naming alpha) emits
 * no multiply by alpha; alpha = 2 does, once per accumulator. */
Test(kit_frag, alpha_one_multiplies_nothing)
{
    pt_arena *a = pt_arena_new();
    pt_problem p = PT_GEMM(128, 128, 64, "tn", PT_BF16, PT_BF16);
    const char *cfg = "bm=64,bn=64,bk=32,wm=32,wn=32,stages=2,kslice=1,splitk=1";
    const char *t1 = emit_gemm(a, &p, "sm_80", cfg);
    cr_expect_eq(count(t1, "mul.f32"), 0, "alpha = 1: %d mul.f32", count(t1, "mul.f32"));
    p.epilogue = "relu(alpha * acc)";
    const char *t3 = emit_gemm(a, &p, "sm_80", cfg);
    cr_expect_eq(count(t3, "mul.f32"), 0, "relu(alpha * acc), alpha = 1: %d mul.f32",
                 count(t3, "mul.f32"));
    p.epilogue = NULL;
    p.alpha = 2;
    const char *t2 = emit_gemm(a, &p, "sm_80", cfg);
    cr_expect_gt(count(t2, "mul.f32"), 0, "alpha = 2 multiplies");
    pt_arena_free(a);
}

/* beta = 0: no C parameter and no C load; beta = 0.5 reads C. */
Test(kit_frag, beta_zero_reads_no_c)
{
    pt_arena *a = pt_arena_new();
    pt_problem p = PT_GEMM(128, 128, 64, "tn", PT_F16, PT_F16);
    const char *t0 = emit_gemm(a, &p, "sm_80", NULL);
    cr_expect_eq(count(t0, "ld.global"), 0, "beta = 0: %d ld.global", count(t0, "ld.global"));
    cr_expect(!strstr(t0, "_c,") && !strstr(t0, "_c)"), "beta = 0: a C parameter");
    p.beta = 0.5;
    const char *t1 = emit_gemm(a, &p, "sm_80", NULL);
    cr_expect_gt(count(t1, "ld.global"), 0, "beta = 0.5 reads C");
    pt_arena_free(a);
}

/* Runs one GEMM on the emulator (verified against the float64 reference)
 * and requires zero bank conflicts on st.shared and ld.shared: the
 * epilogue's staging (the main loop uses cp.async and ldmatrix, which
 * tests/test_emu_warp.c checks). */
static void banks_case(pt_problem p, const char *arch, const char *cfg, const char *what)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_config c;
    pt_space s;
    gen_gemm_op.space(pp, &tg, &s);
    gen_gemm_op.defaults(pp, &tg, &c);
    if (cfg)
        cr_assert_eq(pt_config_parse(&s, cfg, &c, &e), PT_OK, "%s", e.msg);
    pt_check_opts o = {.seed = 5, .threads = 2};
    pt_check_result r;
    int rc = pt_check_emu(&gen_gemm_op, pp, &tg, &c, &o, &r, &e);
    cr_expect_eq(rc, PT_OK, "%s: %s", what, e.msg);
    for (int b = EMU_BANK_LD; b <= EMU_BANK_ST; b++) {
        const emu_bank_stat *bs = &r.bank[b];
        cr_expect_eq(bs->conflicts, 0, "%s: %s: %llu extra wavefronts of %llu (worst: line %d)", what,
                     emu_bank_class_name((emu_bank_class)b), (unsigned long long)bs->conflicts,
                     (unsigned long long)bs->wavefronts, bs->worst_line);
    }
    printf("%s: st.shared %llu accesses %llu wavefronts, ld.shared %llu accesses %llu wavefronts\n",
           what, (unsigned long long)r.bank[EMU_BANK_ST].accesses,
           (unsigned long long)r.bank[EMU_BANK_ST].wavefronts,
           (unsigned long long)r.bank[EMU_BANK_LD].accesses,
           (unsigned long long)r.bank[EMU_BANK_LD].wavefronts);
    pt_arena_free(a);
}

Test(kit_frag, epilogue_staging_has_no_bank_conflicts, .timeout = 900)
{
    static const pt_dtype dts[] = {PT_BF16, PT_F16, PT_TF32};
    for (int i = 0; i < 3; i++) {
        pt_dtype dt = dts[i];
        pt_dtype out = dt == PT_TF32 ? PT_F32 : dt;
        char what[96];
        snprintf(what, sizeof what, "%s tn default", pt_dtype_get(dt)->name);
        banks_case((pt_problem)PT_GEMM(256, 256, 64, "tn", dt, out), "sm_80", NULL, what);
        snprintf(what, sizeof what, "%s nt 64x64 warps 32x32", pt_dtype_get(dt)->name);
        banks_case((pt_problem)PT_GEMM(128, 128, 64, "nt", dt, out), "sm_80",
                   dt == PT_TF32 ? "bm=64,bn=64,bk=16,wm=32,wn=32,stages=2"
                                 : "bm=64,bn=64,bk=32,wm=32,wn=32,stages=2",
                   what);
    }
    banks_case((pt_problem)PT_GEMM(256, 256, 64, "tn", PT_BF16, PT_F32), "sm_80", NULL, "bf16 -> f32 tn default");
    {
        pt_problem q = PT_GEMM(256, 256, 64, "tn", PT_BF16, PT_BF16);
        q.d_colmajor = true;
        banks_case(q, "sm_80", NULL, "bf16 tn column-major D");
    }
    /* k slices summed in fragment order beside the staging (and in rounds) */
    banks_case((pt_problem)PT_GEMM(192, 160, 256, "tn", PT_BF16, PT_BF16), "sm_80",
               "bm=64,bn=64,bk=32,wm=32,wn=32,stages=3,kslice=2", "bf16 kslice=2 beside the staging");
    banks_case((pt_problem)PT_GEMM(192, 160, 256, "tn", PT_F16, PT_F32), "sm_80",
               "bm=64,bn=64,bk=32,wm=32,wn=64,stages=2,kslice=2", "f16 -> f32 kslice=2 in rounds");
}
