/* The sm_90a prefill kernel (gen/attention_fa3.c, impl=2: wgmma + TMA +
 * mbarrier rings, warp-specialised) on the CPU emulator against the
 * float64 reference, every detector on, under the lazy, eager and random
 * async schedules (emit -> print -> parse -> print back identically ->
 * emulate at sm_90a -> tuner_verify: the op's structured inputs,
 * poisoned outputs, every element against the verifier's tolerances, lse
 * by its own bound).
 *
 * Grid (issue 11's acceptance as far as this kernel goes): head dims 64,
 * 128, 256; causal / non-causal / sliding window / softcap; Sq < Sk, Sq =
 * Sk, Sq > Sk (rows with no visible key), Sq = 1; GQA 1:1, 4:1, MQA (a
 * group of 6), packed GQA (pack_gqa=1: 4:1, MQA 6 and 32, Sq 1 5 7 77);
 * paged K/V (pages 64, 128, 256, shuffled block tables); lengths 1, 7,
 * 77, 129; varlen (the op draws a length-1
 * sequence), seqused_k; bshd and bhsd; f16 and bf16; bm 64 / 128 / 192 (1
 * to 3 consumer warpgroups), bn 32..144, stages 2 and 3. Every case runs
 * under one schedule (rotating), the first four under all three. Prints
 * the case count and the worst error per dtype. Then the adversarial
 * inputs of the fa2 tests (gen_attention_adversarial_op: NaN, +-inf, 2^14
 * in q, k or v), the kernel's structure (wgmma per block, nounroll,
 * setmaxnreg, the mask behind a branch), check()'s one-line refusals
 * (pages under 64 keys and hd96: tests/test_attention_fa3_pages.c), and
 * ptxas sm_90a assembly of a sample of the Llama-3-8B prefill space (Sq =
 * Sk = 4096 causal, Hq 32, Hkv 8, d 128) and of its packed configs at Sq
 * = 77 (every config with PTXTUNE_FULL_SPACE=1): 0 spills, no local
 * memory, no C75xx. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/verify.h"
#include "test_util.h"
#include "attn_e4m3_adv.h"

#include "attn_fa3_case.h"

#define BF PT_BF16
#define F16 PT_F16
/* dt B Hq Hkv Sq Sk d causal wl wr softcap varlen seqused lse bhsd config */
static const fcase grid[] = {
    /* hd64: non-causal Sq < Sk; causal Sq = Sk (3 stages); Sq > Sk causal (rows without keys); Sq = 1 */
    {BF, 2, 4, 4, 77, 129, 64, false, -1, -1, 0, false, false, true, false, "bm=128,bn=128", 0},
    {F16, 1, 4, 1, 129, 129, 64, true, -1, -1, 0, false, false, true, false, "bm=64,bn=64,stages=3,pingpong=0", 0},
    {BF, 1, 8, 2, 129, 7, 64, true, -1, -1, 0, false, false, true, false, "bm=128,bn=48,overlap=0", 0},
    {F16, 3, 4, 1, 129, 129, 64, false, 20, -1, 0, true, true, true, false, "bm=192,bn=64", 0},
    {F16, 1, 2, 2, 1, 77, 64, true, -1, -1, 0, false, false, true, false, "bm=64,bn=32,pingpong=0", 0},
    {BF, 1, 6, 1, 7, 129, 64, false, 20, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0", 0},
    /* hd128: causal GQA, window both sides, softcap bhsd, seqused_k */
    {BF, 1, 8, 2, 77, 129, 128, true, -1, -1, 0, false, false, true, false, "bm=128,bn=128", 0},
    {F16, 2, 4, 4, 77, 77, 128, false, 16, 3, 0, false, false, true, false, "bm=64,bn=96,pingpong=0", 0},
    {F16, 1, 4, 1, 129, 129, 128, false, -1, -1, 30, false, false, true, true, "bm=128,bn=144,pingpong=0", 0},
    {BF, 3, 8, 2, 77, 129, 128, true, -1, -1, 0, false, true, true, false, "bm=128,bn=64,stages=3,overlap=0,pingpong=0", 0},
    /* hd256 */
    {BF, 1, 2, 1, 77, 129, 256, true, -1, -1, 0, false, false, true, false, "bm=128,bn=80", 0},
    {F16, 1, 4, 4, 129, 77, 256, false, -1, -1, 0, false, false, false, false, "bm=64,bn=64,pingpong=0", 0},
    /* varlen (a length-1 sequence among the op's lengths) */
    {BF, 3, 4, 1, 77, 129, 64, false, -1, -1, 0, true, false, true, false, "bm=64,bn=32,pingpong=0", 0},
    {F16, 4, 4, 4, 129, 77, 64, true, -1, -1, 0, true, false, true, false, "bm=128,bn=64,overlap=0", 0},
    /* softcap with causal and window; odd lengths Sk 1 */
    {BF, 1, 4, 1, 77, 129, 64, true, -1, -1, 50, false, false, true, false, "bm=64,bn=32,pingpong=0", 0},
    {F16, 1, 4, 2, 129, 129, 128, false, 20, 20, 15, false, false, true, false, "bm=128,bn=64", 0},
    {BF, 2, 4, 1, 7, 1, 64, true, -1, -1, 0, false, false, true, true, "bm=64,bn=16,pingpong=0", 0},
    /* pack_gqa: the query heads of a kv head share a tile (rows are (position, head) pairs, one
     * TMA box of the group's heads), Sq 1, 5, 7, 77, GQA 4:1, MQA (6, 32), masks per row's position */
    {BF, 2, 8, 2, 77, 129, 64, true, -1, -1, 0, false, false, true, false, "pack_gqa=1", 0},
    {BF, 1, 6, 1, 7, 129, 64, false, 20, 2, 0, false, false, true, false, "bm=192,bn=64,pack_gqa=1", 0},
    {F16, 2, 8, 2, 1, 77, 128, true, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0,pack_gqa=1", 0},
    {F16, 3, 8, 2, 77, 129, 128, false, 20, 3, 0, true, false, true, false, "bm=128,bn=64,overlap=0,pack_gqa=1", 0},
    {F16, 1, 32, 1, 5, 300, 64, true, -1, -1, 20, false, true, true, false, "bm=128,bn=64,pack_gqa=1", 0},
    /* paged K/V (the op's block tables: shuffled distinct pages), a block one box of one page:
     * pages of 64, 128, 256 keys (bn 64 and 128), seqused_k, varlen, packed, causal, window */
    {BF, 2, 8, 2, 77, 300, 64, true, -1, -1, 0, false, false, true, false, "bm=128,bn=64", 64},
    {F16, 3, 4, 1, 129, 129, 128, false, -1, -1, 0, false, true, true, false, "bm=128,bn=64,pack_gqa=1", 128},
    {BF, 3, 4, 4, 77, 300, 64, false, 30, 2, 0, true, false, true, false, "bm=64,bn=128,pingpong=0", 256},
};

Test(attention_fa3, grid_against_float64_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0, per[2] = {0, 0};
    double worst[2] = {0, 0};
    char first[2048] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++)
        for (int sch = 0; sch < 3; sch++) {
            if (i >= 4 && sch != (int)(i % 3))
                continue;
            const fcase *c = &grid[i];
            double err;
            pt_err e = {0};
            uint64_t seed = (uint64_t)(c->Sk * 131 + c->Hq * 7 + c->d + (int64_t)i);
            int rc = run_case(&gen_attention_op, c, (emu_sched)sch, seed, &err, &e);
            ran++;
            int k = c->dt == BF;
            per[k]++;
            if (!rc && err > worst[k])
                worst[k] = err;
            if (rc) {
                char what[512];
                describe(c, what, sizeof what);
                if (!failed)
                    snprintf(first, sizeof first, "%s (%s): %.1200s", what, sched_names[sch], e.msg);
                failed++;
                fprintf(stderr, "FAIL %s (%s): %s\n", what, sched_names[sch], e.msg);
            }
        }
    printf("attention prefill (impl=2, sm_90a wgmma/TMA): %d cases (%d f16, %d bf16; %zu shapes, 4 under all "
           "three schedules), %d failed; worst error f16 %.3g, bf16 %.3g (tolerance 1e-2 for o, 1e-4 for lse); "
           "%.1f s\n", ran, per[0], per[1], sizeof grid / sizeof *grid, failed, worst[0], worst[1], now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- adversarial inputs (the fa2 tests' kinds and semantics) ---- */
static const fcase adv_shapes[] = {
    {BF, 2, 4, 1, 77, 129, 64, true, -1, -1, 0, false, false, true, false, "bm=64,bn=32,pingpong=0", 0},
    {F16, 1, 8, 2, 33, 77, 128, false, 20, 5, 0, false, false, true, false, "bm=128,bn=64", 0},
    {BF, 3, 4, 2, 40, 77, 64, true, -1, -1, 0, true, true, true, false, "bm=64,bn=48,pingpong=0", 0},
    {F16, 2, 4, 4, 77, 77, 64, false, -1, -1, 30, false, false, true, true, "bm=128,bn=48", 0},
    {BF, 2, 8, 2, 7, 129, 64, true, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0,pack_gqa=1", 0},
    {F16, 2, 4, 1, 77, 300, 64, true, -1, -1, 0, false, true, true, false, "bm=128,bn=64", 64},
};

static const char *const adv_names[ATTN_ADV_N] = {
    "none", "q NaN", "q +inf", "q -inf", "q huge", "k NaN", "k +inf", "k -inf", "k huge (first block)",
    "k huge (last key)", "v NaN", "v +inf", "v -inf",
};

Test(attention_fa3, adversarial_inputs_match_the_reference, .timeout = 600)
{
    int ran = 0, failed = 0;
    char first[2048] = "";
    double t0 = now();
    int ns = (int)(sizeof adv_shapes / sizeof *adv_shapes);
    for (int kind = 1; kind < ATTN_ADV_N; kind++)
        for (int v = 0; v < (kind >= ATTN_ADV_V_NAN ? 2 : 1); v++) {
            const fcase *c = &adv_shapes[(kind + v) % ns];
            const pt_op *op = gen_attention_adversarial_op((attn_adv)kind);
            cr_assert(op);
            double err;
            pt_err e = {0};
            emu_sched sch = (emu_sched)((kind + v) % 3);
            int rc = run_case(op, c, sch, (uint64_t)(77 + 13 * kind + v), &err, &e);
            ran++;
            if (rc) {
                char d[512];
                describe(c, d, sizeof d);
                failed++;
                if (!first[0])
                    snprintf(first, sizeof first, "%s: %.500s: %.1000s", adv_names[kind], d, e.msg);
                printf("FAILED %s: %s (%s): %s\n", adv_names[kind], d, sched_names[sch], e.msg);
            }
        }
    printf("attention prefill (impl=2) adversarial inputs: %d cases, %d failed, %.1f s\n", ran, failed,
           now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- the kernel's structure, check(), defaults ---- */

static pt_problem llama(void)
{
    fcase c = {BF, 1, 32, 8, 4096, 4096, 128, true, -1, -1, 0, false, false, false, false, "", 0};
    return problem_of(&c);
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *s = strstr(text, what); s; s = strstr(s + 1, what))
        n++;
    return n;
}

Test(attention_fa3, structure_of_the_default_llama_kernel)
{
    pt_problem p = llama();
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), 0);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    pt_config c;
    gen_attention_op.defaults(pp, &tg, &c);
    char cs[256];
    pt_config_str(&c, cs, sizeof cs);
    cr_expect_str_eq(cs, "impl=2,bm=128,bn=128,stages=2,overlap=1,pingpong=1,pack_gqa=0");
    ptx_module *m;
    pt_launch l;
    cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &c, &m, &l, &e), 0, "%s", e.msg);
    char *text = ptx_print(m);
    ptx_module_free(m);
    /* intra-warpgroup overlap: QK^T (d/16 SS wgmmas of N bn) in the first
     * block and the loop, PV (bn/16 RS of N dv) in the loop and the tail;
     * the loop's two groups: wait_group 1 (S), then 0 (PV) */
    cr_expect_eq(count(text, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), 2 * 8 + 2 * 8);
    cr_expect_eq(count(text, "wgmma.commit_group"), 4);
    cr_expect_eq(count(text, "wgmma.wait_group.sync.aligned 1;"), 1);
    cr_expect_eq(count(text, "wgmma.wait_group.sync.aligned 0;"), 3);
    cr_expect_eq(count(text, "cvt.rn.bf16x2.f32"), 2 * 128 / 4 + 128 / 4, "P: bn/4 pairs twice, o: dv/4 pairs");
    cr_expect_eq(count(text, ".pragma \"nounroll\""), 2, "the producer's and the consumers' loops");
    cr_expect_eq(count(text, "setmaxnreg.dec.sync.aligned.u32 40"), 1);
    cr_expect_eq(count(text, "setmaxnreg.inc.sync.aligned.u32 232"), 1);
    cr_expect_eq(count(text, "cp.async.bulk.tensor.4d"), 2 + 2 + 2, "Q, K, V: two 64-column boxes each");
    cr_expect_eq(count(text, "ex2.approx.ftz.f32"), 2 * 64 + 2,
                 "one per score (2 rows x 32) in the first block and the loop, one alpha a row in the loop");
    cr_expect_eq(count(text, "ld.local") + count(text, "st.local"), 0);
    cr_expect_eq(count(text, ".param .u32"), 2, "seqlen_q and seqlen_k are run-time parameters");
    /* pingpong: each GEMM issue between a bar.sync of this warpgroup's
     * barrier and a bar.arrive of the next one's (3 issues; 1 start, 1 end) */
    cr_expect_eq(count(text, "bar.arrive "), 3 + 1);
    cr_expect_eq(count(text, "bar.sync %r"), 3);
    /* the mask: one selp to -inf per score of the thread, behind a branch */
    cr_expect_eq(count(text, ", 0fFF800000, %p"), 2 * 64);
    cr_expect_eq(l.grid[0], 32u);
    cr_expect_eq(l.grid[1], 32u);
    cr_expect_eq(l.block[0], 384u);
    cr_expect_eq(l.ntmaps, 3);
    cr_expect(l.smem_optin);
    free(text);
    pt_arena_free(a);
}

static int check_of(const fcase *c, const char *arch, const char *config, pt_err *e)
{
    pt_target tg;
    cr_assert_eq(pt_target_parse(arch, &tg, e), PT_OK);
    pt_problem p = problem_of(c);
    p.page_size = 0;
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    int rc = gen_attention_op.prepare(a, &p, &tg, &pp, e);
    if (!rc) {
        pt_config cf;
        rc = fa3_config(pp, &tg, config, &cf, e);
        if (!rc)
            rc = gen_attention_op.check(pp, &tg, &cf, e);
    }
    pt_arena_free(a);
    return rc;
}

Test(attention_fa3, check_refuses_in_one_line)
{
    fcase l = {BF, 1, 32, 8, 4096, 4096, 128, true, -1, -1, 0, false, false, false, false, "", 0};
    fcase hd96 = l, hd256 = l, mqa6 = l, bhsd = l, mha = l;
    hd96.d = 96;
    hd256.d = 256;
    mqa6.Hq = 6;
    mqa6.Hkv = 1;
    mqa6.Sq = 77;
    bhsd.bhsd = true;
    bhsd.Sq = 77;
    mha.Hkv = 32;
    static const struct {
        int which;
        const char *arch, *config, *want;
    } bad[] = {
        {0, "sm_90", "", "impl=2 (fa3) needs sm_90a; target is sm_90"},
        {1, "sm_90a", "bm=192,bn=176", "live values per consumer thread"},
        {0, "sm_90a", "bn=40", "bn=40: a multiple of 16"},
        {0, "sm_90a", "bm=192,bn=176", "live values per consumer thread"},
        {0, "sm_90a", "bm=128,bn=192", "would spill"},
        {2, "sm_90a", "bm=128,bn=128,stages=3", "shared memory"},
        {3, "sm_90a", "bm=128,pack_gqa=1", "bm=128 is not a multiple of the group 6"},
        {4, "sm_90a", "pack_gqa=1", "pack_gqa=1 with layout bhsd"},
        {5, "sm_90a", "pack_gqa=1", "no query heads to pack"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pt_err e = {0};
        const fcase *const all[] = {&l, &hd96, &hd256, &mqa6, &bhsd, &mha};
        const fcase *c = all[bad[i].which];
        int rc = check_of(c, bad[i].arch, bad[i].config, &e);
        cr_expect_neq(rc, PT_OK, "case %zu accepted", i);
        cr_expect(strstr(e.msg, bad[i].want) != NULL, "case %zu: '%s' does not say '%s'", i, e.msg, bad[i].want);
        cr_expect(strchr(e.msg, '\n') == NULL, "case %zu: more than one line: %s", i, e.msg);
    }
    /* a K/V block neither within one page nor whole pages: refused by impl=2 in one line */
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_problem p = llama();
    p.page_size = 32;
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_config cf;
    cr_assert_eq(fa3_config(pp, &tg, "bn=80", &cf, &e), PT_OK, "%s", e.msg);
    cr_expect_neq(gen_attention_op.check(pp, &tg, &cf, &e), PT_OK);
    cr_expect(strstr(e.msg, "page_size=32 with bn=80: a K/V block lies within one page or is whole pages"), "%s",
              e.msg);
    pt_arena_free(a);
}

static int64_t default_impl(pt_problem p, const char *arch)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_config cf;
    gen_attention_op.defaults(pp, &tg, &cf);
    cr_assert_eq(gen_attention_op.check(pp, &tg, &cf, &e), PT_OK, "%s: %s", arch, e.msg);
    int64_t impl = pt_config_get(&cf, "impl", -1);
    pt_arena_free(a);
    return impl;
}

Test(attention_fa3, the_sm_90a_prefill_default_is_fa3_where_it_applies)
{
    pt_problem p = llama();
    cr_expect_eq(default_impl(p, "sm_90a"), ATTN_FA3);
    cr_expect_eq(default_impl(p, "sm_90"), ATTN_FA2);
    cr_expect_eq(default_impl(p, "sm_80"), ATTN_FA2);
    pt_problem hd96 = p, paged = p, hd256 = p;
    hd96.head_dim = hd96.head_dim_v = 96;
    cr_expect_eq(default_impl(hd96, "sm_90a"), ATTN_FA3); /* tests/test_attention_fa3_pages.c: every problem */
    paged.page_size = 16;
    cr_expect_eq(default_impl(paged, "sm_90a"), ATTN_FA3);
    paged.page_size = 64;
    cr_expect_eq(default_impl(paged, "sm_90a"), ATTN_FA3);
    hd256.head_dim = hd256.head_dim_v = 256;
    cr_expect_eq(default_impl(hd256, "sm_90a"), ATTN_FA3);
    hd256.head_dim = hd256.head_dim_v = 64;
    cr_expect_eq(default_impl(hd256, "sm_90a"), ATTN_FA3);
}

/* ---- assembly: the Llama-3-8B prefill space on sm_90a ---- */

Test(attention_fa3, llama3_8b_prefill_space_assembles_for_sm_90a, .timeout = 1200)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    /* ptxas: nvJitLink drops setmaxnreg (C7504) */
    if (pt_compiler_set_backend(comp, PT_BACKEND_PTXAS, &e)) {
        pt_compiler_close(comp);
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but no ptxas: %s", e.msg);
        cr_skip_test("no ptxas: %s", e.msg);
    }
    bool full = getenv("PTXTUNE_FULL_SPACE") && atoi(getenv("PTXTUNE_FULL_SPACE"));
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    /* the Llama space (every 15th config), and its packed configs at Sq = 77 (every 25th) */
    for (int which = 0; which < 2; which++) {
        pt_problem p = llama();
        if (which)
            p.seqlen_q = 77;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        double t0 = now();
        int valid = 0, built = 0;
        for (int64_t i = 0; i < pt_space_size(&s); i++) {
            pt_config c;
            pt_space_config(&s, i, &c);
            pt_err ce = {0};
            if ((which && !pt_config_get(&c, "pack_gqa", 0)) || gen_attention_op.check(pp, &tg, &c, &ce))
                continue;
            if (valid++ % (full ? 1 : which ? 25 : 15))
                continue;
            char cfg[256];
            pt_config_str(&c, cfg, sizeof cfg);
            cr_expect_eq(pt_config_get(&c, "impl", 0), ATTN_FA3, "%s", cfg);
            ptx_module *m = NULL;
            pt_launch l;
            cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &c, &m, &l, &ce), PT_OK, "%s: %s", cfg, ce.msg);
            char *text = ptx_print(m);
            cr_expect(!strstr(text, "ld.local") && !strstr(text, "st.local"), "%s: local memory in the PTX", cfg);
            pt_resource r;
            memset(&r, 0, sizeof r);
            int rc = pt_compile(comp, text, &tg, NULL, NULL, &r, &ce);
            cr_expect_eq(rc, PT_OK, "%s: %s", cfg, ce.msg);
            for (int k = 0; k < r.ncodes; k++)
                cr_expect(strncmp(r.codes[k], "C75", 3) != 0, "%s: %s", cfg, r.codes[k]);
            cr_expect_eq(r.spill_stores + r.spill_loads, 0, "%s: spills", cfg);
            cr_expect_eq(r.stack_frame, 0, "%s: stack frame", cfg);
            printf("  %-62s regs %3d smem %6zu\n", cfg, r.registers, l.smem);
            free(text);
            ptx_module_free(m);
            built++;
        }
        printf("Llama-3-8B prefill (%s, Hq 32, Hkv 8, d 128, bf16) on sm_90a: %d of %d valid configs "
               "through %s in %.1f s\n", which ? "Sq=77 Sk=4096 causal, pack_gqa=1" : "Sq=Sk=4096 causal", built,
               valid, pt_compiler_describe(comp), now() - t0);
        cr_expect_gt(built, 2);
        pt_arena_free(a);
    }
    pt_compiler_close(comp);
}

/* ---- fp8 (issue 16 item 3): e4m3 q, k, v with per-tensor descales, o bf16 ----
 * The verifier stores the inputs in e4m3 (rounded by the host's
 * cvt.rn.satfinite rules) and the float64 reference reads the stored
 * values back: the reference of the e4m3-rounded inputs, true values =
 * stored x descale. The kernel: S by wgmma e4m3 (k32), P rounded to e4m3
 * in registers (exponent offset 8), V transposed to V^T in shared memory by
 * the producer's warps 1..3, O += P V^T by wgmma RS e4m3; o's allowance is
 * one e4m3 rounding of each P V term (gen/attention_ref.c pv_dtype). Head
 * dims 128, 256; causal / window / softcap, GQA / MQA / packed, varlen,
 * paged, seqused_k, bhsd, Sq 1 7 77 129, Sk 1 77 129 300; each shape under
 * one schedule (rotating), the first two under all three. */
/* dt B Hq Hkv Sq Sk d causal wl wr softcap varlen seqused lse bhsd config page; descales */
static const f8case fp8_grid[] = {
    {{E4, 1, 4, 1, 77, 129, 128, true, -1, -1, 0, false, false, true, false, "bm=128,bn=128", 0}, {0.5, 2, 1.5}},
    {{E4, 2, 2, 2, 129, 77, 128, false, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0", 0},
     {0.25, 0.125, 3}},
    {{E4, 1, 2, 1, 77, 129, 256, true, -1, -1, 0, false, false, true, false, "bm=128,bn=64", 0}, {1, 1, 1}},
    {{E4, 1, 4, 4, 129, 129, 128, false, 20, 3, 0, false, false, true, false, "bm=192,bn=64", 0}, {2, 0.5, 0.75}},
    {{E4, 1, 4, 2, 77, 77, 128, false, -1, -1, 30, false, false, true, false, "bm=128,bn=96,overlap=0", 0},
     {0, 0, 0}},
    {{E4, 3, 4, 1, 77, 129, 128, true, -1, -1, 0, true, false, true, false, "bm=64,bn=32,pingpong=0", 0},
     {1.5, 1, 0.5}},
    {{E4, 1, 8, 1, 7, 129, 128, false, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0,pack_gqa=1", 0},
     {1, 0.25, 2}},
    {{E4, 2, 4, 1, 77, 1, 128, true, -1, -1, 0, false, false, true, true, "bm=64,bn=32,pingpong=0", 0}, {1, 1, 1}},
    {{E4, 2, 8, 2, 77, 300, 128, true, -1, -1, 0, false, true, true, false, "bm=128,bn=128", 128}, {0.5, 0.5, 1}},
    {{E4, 2, 4, 2, 129, 129, 128, false, -1, -1, 0, false, true, true, false, "bm=128,bn=160", 0}, {1, 2, 1}},
    {{E4, 1, 2, 2, 1, 77, 256, true, -1, -1, 0, false, false, true, false, "bm=64,bn=32,pingpong=0", 0}, {2, 2, 2}},
};

Test(attention_fa3, fp8_e4m3_with_descales_against_the_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0;
    double worst = 0;
    char first[2048] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof fp8_grid / sizeof *fp8_grid; i++)
        for (int sch = 0; sch < 3; sch++) {
            if (i >= 2 && sch != (int)(i % 3))
                continue;
            const fcase *c = &fp8_grid[i].c;
            double err;
            pt_err e = {0};
            int rc = run_case_d(&gen_attention_op, c, fp8_grid[i].d3, (emu_sched)sch,
                                (uint64_t)(c->Sk * 17 + (int64_t)i), &err, &e);
            ran++;
            if (!rc && err > worst)
                worst = err;
            if (rc) {
                char what[512];
                describe(c, what, sizeof what);
                if (!failed)
                    snprintf(first, sizeof first, "%s (%s): %.1200s", what, sched_names[sch], e.msg);
                failed++;
                fprintf(stderr, "FAIL %s (%s): %s\n", what, sched_names[sch], e.msg);
            }
        }
    printf("attention prefill (impl=2) e4m3 q/k/v with descales, o bf16: %d cases (%zu shapes, 2 under all three "
           "schedules), %d failed; worst error %.3g; %.1f s\n",
           ran, sizeof fp8_grid / sizeof *fp8_grid, failed, worst, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* Adversarial e4m3 inputs (tests/attn_e4m3_adv.h: NaN 0x7f / 0xff, +-448,
 * subnormals, ties, NaN in v past the keys) through the fp8 kernel: NaN
 * semantics as the f16 kernels' (S by wgmma e4m3 keeps a NaN of q or k, P
 * = cvt.rn.satfinite.e4m3x2 of a NaN is 0x7f, 0 P x NaN v is NaN), the
 * rows of V^T of keys past the sequence written as 0 by the transposing
 * warps. */
static const f8case fp8_adv_shapes[] = {
    {{E4, 2, 4, 1, 77, 129, 128, true, -1, -1, 0, false, true, true, false, "bm=128,bn=64", 0}, {0.5, 2, 1.5}},
    {{E4, 3, 4, 2, 40, 77, 128, false, 20, 5, 0, true, false, true, false, "bm=64,bn=32,pingpong=0", 0}, {1, 1, 1}},
    {{E4, 2, 2, 1, 77, 300, 256, true, -1, -1, 20, false, true, true, false, "bm=128,bn=64", 64}, {2, 0.25, 1}},
};

Test(attention_fa3, adversarial_e4m3_inputs_match_the_reference, .timeout = 600)
{
    run_e4m3_adv("attention prefill (impl=2) adversarial e4m3 inputs",
                 fp8_adv_shapes, (int)(sizeof fp8_adv_shapes / sizeof *fp8_adv_shapes), 1, 41, 11);
}

static pt_problem llama_fp8(void)
{
    pt_problem p = llama();
    p.dtype = PT_E4M3;
    p.descale_q = 0.5;
    p.descale_k = 0.25;
    p.descale_v = 2;
    return p;
}

Test(attention_fa3, structure_of_the_default_llama_fp8_kernel)
{
    pt_problem p = llama_fp8();
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), 0);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    pt_config c;
    gen_attention_op.defaults(pp, &tg, &c);
    char cs[256];
    pt_config_str(&c, cs, sizeof cs);
    cr_expect_str_eq(cs, "impl=2,bm=128,bn=128,stages=2,overlap=1,pingpong=1,pack_gqa=0");
    ptx_module *m;
    pt_launch l;
    cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &c, &m, &l, &e), 0, "%s", e.msg);
    char *text = ptx_print(m);
    ptx_module_free(m);
    /* QK^T: d / 32 k32 steps, P V^T: bn / 32, each issued twice (overlap:
     * first block + loop, loop + tail); both m64n128k32 e4m3 */
    cr_expect_eq(count(text, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 2 * 4 + 2 * 4);
    cr_expect_eq(count(text, "wgmma.mma_async.sync.aligned.m64n128k16"), 0, "no 16-bit wgmma: P V at the e4m3 rate");
    cr_expect_eq(count(text, "cvt.rn.satfinite.e4m3x2.f32"), 2 * 128 / 4, "P: two bytes a cvt, twice");
    cr_expect_eq(count(text, "cvt.rn.bf16x2.f32"), 128 / 4, "o in bf16: dv/4 pairs");
    cr_expect_eq(count(text, "prmt.b32"), 16, "one transposing unit: 2 x 8 byte permutes");
    cr_expect_eq(count(text, "bar.sync 5, 96;"), 1, "the transposing warps' barrier");
    cr_expect_eq(count(text, ".pragma \"nounroll\""), 4, "producer, consumer, transposer and its unit loops");
    cr_expect_eq(count(text, "cp.async.bulk.tensor.4d"), 3, "Q, K, V: one 128-byte box each");
    cr_expect_eq(count(text, "ex2.approx.ftz.f32"), 2 * 64 + 2, "once per score, once per row rescale");
    cr_expect_eq(count(text, "ld.local") + count(text, "st.local"), 0);
    cr_expect_eq(l.ntmaps, 3);
    cr_expect_eq(l.block[0], 384u);
    /* Q 16 KB + 2 x (K 16 + V 16 + V^T 16 KB), 1 KB slack, 7 + 2 barriers */
    cr_expect_eq(l.smem, (size_t)(1024 + 16384 + 2 * 3 * 16384 + 16 * 7));
    free(text);
    pt_arena_free(a);
}

Test(attention_fa3, fp8_check_refuses_in_one_line)
{
    static const struct {
        int64_t d;
        const char *config, *want;
    } bad[] = {
        {128, "bn=48", "bn=48 with dtype e4m3: a multiple of 32"},
        {128, "bm=192,bn=128", "would spill"},
    };
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pt_problem p = llama_fp8();
        p.head_dim = p.head_dim_v = bad[i].d;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_config cf;
        gen_attention_op.defaults(pp, &tg, &cf);
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        if (bad[i].config[0])
            cr_assert_eq(pt_config_parse(&s, bad[i].config, &cf, &e), PT_OK, "%s", e.msg);
        e = (pt_err){0};
        cr_expect_neq(gen_attention_op.check(pp, &tg, &cf, &e), PT_OK, "case %zu accepted", i);
        cr_expect(strstr(e.msg, bad[i].want) != NULL, "case %zu: '%s' does not say '%s'", i, e.msg, bad[i].want);
        cr_expect(strchr(e.msg, '\n') == NULL, "case %zu: more than one line: %s", i, e.msg);
        pt_arena_free(a);
    }
    /* e4m3 below sm_90a: prepare refuses */
    pt_problem p = llama_fp8();
    cr_assert_eq(pt_target_parse("sm_90", &tg, &e), PT_OK);
    e = (pt_err){0};
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_expect_neq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK);
    cr_expect(strstr(e.msg, "dtype e4m3: fp8 attention runs on sm_90a") != NULL, "%s", e.msg);
    pt_arena_free(a);
}

/* The Llama-3-8B fp8 prefill space (e4m3, Sq = Sk = 4096 causal, Hq 32,
 * Hkv 8, d 128) on sm_90a: every 6th valid config per commit, every one
 * with PTXTUNE_FULL_SPACE=1: 0 spills, no local memory, no C75xx. */
Test(attention_fa3, llama3_8b_fp8_prefill_space_assembles_for_sm_90a, .timeout = 1200)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    if (pt_compiler_set_backend(comp, PT_BACKEND_PTXAS, &e)) {
        pt_compiler_close(comp);
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but no ptxas: %s", e.msg);
        cr_skip_test("no ptxas: %s", e.msg);
    }
    bool full = getenv("PTXTUNE_FULL_SPACE") && atoi(getenv("PTXTUNE_FULL_SPACE"));
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_problem p = llama_fp8();
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_space s;
    gen_attention_op.space(pp, &tg, &s);
    double t0 = now();
    int valid = 0, built = 0;
    for (int64_t i = 0; i < pt_space_size(&s); i++) {
        pt_config c;
        pt_space_config(&s, i, &c);
        pt_err ce = {0};
        if (gen_attention_op.check(pp, &tg, &c, &ce))
            continue;
        if (valid++ % (full ? 1 : 6))
            continue;
        char cfg[256];
        pt_config_str(&c, cfg, sizeof cfg);
        ptx_module *m = NULL;
        pt_launch l;
        cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &c, &m, &l, &ce), PT_OK, "%s: %s", cfg, ce.msg);
        char *text = ptx_print(m);
        cr_expect(!strstr(text, "ld.local") && !strstr(text, "st.local"), "%s: local memory in the PTX", cfg);
        pt_resource r;
        memset(&r, 0, sizeof r);
        int rc = pt_compile(comp, text, &tg, NULL, NULL, &r, &ce);
        cr_expect_eq(rc, PT_OK, "%s: %s", cfg, ce.msg);
        for (int k = 0; k < r.ncodes; k++)
            cr_expect(strncmp(r.codes[k], "C75", 3) != 0, "%s: %s", cfg, r.codes[k]);
        cr_expect_eq(r.spill_stores + r.spill_loads, 0, "%s: spills", cfg);
        cr_expect_eq(r.stack_frame, 0, "%s: stack frame", cfg);
        printf("  %-62s regs %3d smem %6zu\n", cfg, r.registers, l.smem);
        free(text);
        ptx_module_free(m);
        built++;
    }
    printf("Llama-3-8B prefill (e4m3, Sq=Sk=4096 causal, Hq 32, Hkv 8, d 128, fp8) on sm_90a: %d of %d valid configs "
           "through %s in %.1f s\n", built, valid, pt_compiler_describe(comp), now() - t0);
    cr_expect_gt(built, 2);
    pt_arena_free(a);
    pt_compiler_close(comp);
}

/* One emulator worker runs the CTAs one after another on one context, so
 * the barrier epochs of the earlier CTAs run ahead of the async proxy's
 * vector clocks: the wgmma's uninitialised-read check compared a TMA
 * write's clock stamp with the epoch (ptx/emu/wgmma.c), and the third CTA
 * of this fp8 kernel (3 consumer warpgroups, pingpong, the transposing
 * warps' barriers) read its TMA-landed Q as "no thread wrote" (the CLI's
 * `run --check` with --emu-threads 1 found it). */
Test(attention_fa3, fp8_three_consumers_on_one_emulator_thread)
{
    fcase c = {E4, 1, 3, 3, 129, 129, 128, false, -1, -1, 0, false, false, true, false, "bm=192,bn=64", 0};
    double err;
    pt_err e = {0};
    int rc = run_case_t(&gen_attention_op, &c, NULL, EMU_SCHED_LAZY, 7, 1, &err, &e);
    cr_expect_eq(rc, PT_OK, "%s", e.msg);
}
