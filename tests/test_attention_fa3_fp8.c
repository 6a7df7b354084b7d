/* fp8 (e4m3) prefill on sm_90a (gen/attention_fa3.c, impl=2; issue 16
 * item 3) at the head dims and page sizes flash-attention 3 offers beside
 * 128 and 256 (tests/test_attention_fa3.c covers those):
 *   head dim 64: Q and K rows are one 64B swizzle span (TMA SWIZZLE_64B,
 *     wgmma descriptors in 64B mode, S by 2 k32 steps); V keeps 128-byte
 *     rows (the box's columns past 64 zero-filled), V^T as ever;
 *   head dim 96: 128-byte rows, the box past the row zero-filled, S by 3
 *     k32 steps of the 4, P V by wgmma N=96;
 *   pages of 1, 2, 4 keys: the producer warpgroup's 128 threads gather K
 *     and V rows by cp.async and warps 1..3 transpose V, the transpose
 *     stages - 1 blocks behind the gather in one loop (gather_transpose_loop).
 * On the emulator with every detector under the lazy, eager and random
 * schedules against the float64 reference of the e4m3-rounded inputs
 * (tolerances: the verifier's own), descales given; the adversarial e4m3
 * kinds (tests/attn_e4m3_adv.h); the kernels' structure; check()'s one-line
 * refusal of what stays refused; ptxas sm_90a of the defaults and a seeded
 * sample of configs of a grid of these problems (0 spills, no C75xx). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "test_util.h"
#include "attn_e4m3_adv.h"
#include "attn_fa3_case.h"
#include "attn_fa3_sweep.h"

/* dt B Hq Hkv Sq Sk d causal wl wr softcap varlen seqused lse bhsd config page; descales (0: not given) */
static const f8case grid[] = {
    /* hd64 */
    {{E4, 1, 4, 1, 77, 129, 64, true, -1, -1, 0, false, false, true, false, "bm=128,bn=128", 0}, {0.5, 2, 1.5}},
    {{E4, 2, 2, 2, 129, 77, 64, false, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0", 0},
     {0.25, 0.125, 3}},
    {{E4, 1, 4, 4, 129, 129, 64, false, 20, 3, 0, false, false, true, false, "bm=192,bn=64", 0}, {2, 0.5, 0.75}},
    {{E4, 1, 4, 2, 77, 77, 64, false, -1, -1, 30, false, false, true, false, "bm=128,bn=96,overlap=0", 0},
     {0, 0, 0}},
    {{E4, 3, 4, 1, 77, 129, 64, true, -1, -1, 0, true, false, true, false, "bm=64,bn=32,pingpong=0", 0},
     {1.5, 1, 0.5}},
    {{E4, 1, 8, 1, 7, 129, 64, false, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0,pack_gqa=1", 0},
     {1, 0.25, 2}},
    {{E4, 2, 4, 1, 77, 1, 64, true, -1, -1, 0, false, false, true, true, "bm=64,bn=32,pingpong=0", 0}, {1, 1, 1}},
    {{E4, 2, 8, 2, 77, 300, 64, true, -1, -1, 0, false, true, true, false, "bm=128,bn=64", 16}, {0.5, 0.5, 1}},
    {{E4, 1, 2, 2, 1, 77, 64, true, -1, -1, 0, false, false, true, false, "bm=64,bn=32,pingpong=0", 0}, {2, 2, 2}},
    {{E4, 2, 4, 2, 129, 129, 64, false, -1, -1, 0, false, true, true, false, "bm=128,bn=160,stages=3", 0},
     {1, 2, 1}},
    /* hd96 */
    {{E4, 1, 4, 1, 77, 129, 96, true, -1, -1, 0, false, false, true, false, "bm=128,bn=128", 0}, {0.5, 2, 1.5}},
    {{E4, 2, 4, 4, 129, 300, 96, false, 30, 2, 0, true, false, true, false, "bm=64,bn=64,pingpong=0", 0},
     {1, 0.5, 2}},
    {{E4, 1, 4, 2, 129, 77, 96, false, -1, -1, 20, false, false, true, false, "bm=192,bn=64", 0}, {0.25, 4, 1}},
    {{E4, 2, 8, 2, 77, 300, 96, true, -1, -1, 0, false, false, true, false, "bm=128,bn=64,pack_gqa=1", 16},
     {1, 1, 0.5}},
    {{E4, 1, 2, 1, 7, 129, 96, false, -1, -1, 0, false, false, true, false, "bm=64,bn=32,pingpong=0", 0}, {0, 0, 0}},
};

/* pages under 8 keys: the gather and the transpose share the producer's threads */
static const f8case pages[] = {
    {{E4, 2, 4, 1, 77, 129, 64, true, -1, -1, 0, false, false, true, false, "bm=128,bn=64", 1}, {0.5, 2, 1.5}},
    {{E4, 2, 4, 2, 129, 300, 128, false, 40, 5, 0, false, true, true, false, "bm=64,bn=32,pingpong=0", 2},
     {1, 0.5, 2}},
    {{E4, 3, 4, 1, 77, 129, 96, false, -1, -1, 0, true, false, true, false, "bm=128,bn=64,stages=3", 4}, {2, 1, 1}},
    {{E4, 1, 2, 1, 77, 129, 256, true, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0", 1},
     {1, 1, 1}},
    {{E4, 2, 8, 2, 7, 77, 64, false, -1, -1, 30, false, false, true, false,
      "bm=64,bn=96,overlap=0,pingpong=0,pack_gqa=1", 2}, {0.25, 2, 0.5}},
    {{E4, 2, 4, 4, 77, 1, 128, true, -1, -1, 0, false, false, true, false, "bm=128,bn=128", 4}, {1, 1, 1}},
    /* 3 consumers (the producer's 32 registers), pingpong, 3 stages (the transpose 2 blocks behind) */
    {{E4, 1, 4, 2, 129, 300, 64, false, -1, -1, 0, false, false, true, false, "bm=192,bn=64,stages=3", 1},
     {1, 0.5, 1}},
    {{E4, 2, 4, 1, 129, 129, 96, true, -1, -1, 0, false, true, true, false, "bm=192,bn=96,pingpong=0", 2},
     {0.5, 1, 2}},
};

/* every case of cs[0..n) under one schedule (rotating), the first `all` under all three */
static void run_grid_seeded(const char *what, const f8case *cs, int n, int all, int only, uint64_t seed0)
{
    int ran = 0, failed = 0;
    double worst = 0;
    char first[2048] = "";
    double t0 = now();
    for (int i = 0; i < n; i++)
        for (int sch = 0; sch < 3; sch++) {
            if ((i >= all && sch != i % 3) || (only >= 0 && sch != only))
                continue;
            const fcase *c = &cs[i].c;
            double err;
            pt_err e = {0};
            uint64_t seed = seed0 + (uint64_t)(c->Sk * 13 + i);
            int rc = run_case_d(&gen_attention_op, c, cs[i].d3, (emu_sched)sch, seed, &err, &e);
            ran++;
            if (!rc && err > worst)
                worst = err;
            if (rc) {
                char d[512];
                describe(c, d, sizeof d);
                if (!failed)
                    snprintf(first, sizeof first, "%s (%s): %.1200s", d, sched_names[sch], e.msg);
                failed++;
                fprintf(stderr, "FAIL %s (%s): %s\n", d, sched_names[sch], e.msg);
            }
        }
    printf("attention prefill (impl=2) e4m3 %s: %d cases (%d shapes, %d under all three schedules), %d failed; "
           "worst error %.3g; %.1f s\n", what, ran, n, all, failed, worst, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

static void run_grid(const char *what, const f8case *cs, int n, int all)
{
    run_grid_seeded(what, cs, n, all, -1, 0);
}

Test(attention_fa3_fp8, head_dims_64_96_against_the_reference_every_schedule, .timeout = 600)
{
    run_grid("head dims 64 and 96", grid, (int)(sizeof grid / sizeof *grid), (int)(sizeof grid / sizeof *grid));
}

Test(attention_fa3_fp8, pages_under_8_keys_against_the_reference_every_schedule, .timeout = 600)
{
    run_grid("pages of 1, 2, 4 keys", pages, (int)(sizeof pages / sizeof *pages), (int)(sizeof pages / sizeof *pages));
}

/* head_dim_v apart from head_dim: Q/K and V rows of two widths (TMA), and a
 * small-page gather of two widths (one pass each); every schedule. */
static const struct {
    f8case f;
    int64_t dv;
} mixed[] = {
    {{{E4, 1, 4, 1, 77, 129, 128, true, -1, -1, 0, false, false, true, false, "bm=128,bn=64", 0}, {0.5, 2, 1.5}}, 64},
    {{{E4, 2, 4, 2, 129, 77, 64, false, -1, -1, 0, false, true, true, false, "bm=128,bn=64", 0}, {1, 1, 1}}, 128},
    {{{E4, 2, 4, 1, 77, 129, 96, true, -1, -1, 0, false, false, true, false, "bm=128,bn=64", 16}, {1, 0.5, 2}}, 64},
    {{{E4, 1, 2, 1, 77, 129, 256, false, -1, -1, 0, false, false, true, false, "bm=64,bn=64,pingpong=0", 1},
      {2, 1, 1}},
     96},
};

Test(attention_fa3_fp8, mixed_head_dims_against_the_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0;
    double worst = 0, t0 = now();
    char first[2048] = "";
    for (size_t i = 0; i < sizeof mixed / sizeof *mixed; i++)
        for (int sch = 0; sch < 3; sch++) {
            const fcase *c = &mixed[i].f.c;
            double err;
            pt_err e = {0};
            int rc = run_case_dv(&gen_attention_op, c, mixed[i].dv, mixed[i].f.d3, (emu_sched)sch,
                                 (uint64_t)(c->Sk * 17 + 5 * (int64_t)i + sch), 2, &err, NULL, &e);
            ran++;
            if (!rc && err > worst)
                worst = err;
            if (rc) {
                char d[512];
                describe(c, d, sizeof d);
                if (!failed++)
                    snprintf(first, sizeof first, "%.500s dv %lld (%s): %.1200s", d, (long long)mixed[i].dv,
                             sched_names[sch], e.msg);
                printf("FAILED %s dv %lld (%s): %s\n", d, (long long)mixed[i].dv, sched_names[sch], e.msg);
            }
        }
    printf("attention prefill (impl=2) e4m3, head_dim_v apart from head_dim (128/64, 64/128, 96/64 page 16, "
           "256/96 page 1): %d cases, %d failed, worst error %.3g; %.1f s\n",
           ran, failed, worst, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* The gather + transpose loop's interleavings: the small-page shapes
 * under the random schedule with 3 more seeds each. */
Test(attention_fa3_fp8, pages_under_8_keys_random_schedule_more_seeds, .timeout = 600)
{
    for (uint64_t s = 1; s <= 3; s++)
        run_grid_seeded("pages of 1, 2, 4 keys (random schedule, another seed)", pages,
                        (int)(sizeof pages / sizeof *pages), (int)(sizeof pages / sizeof *pages), EMU_SCHED_RANDOM,
                        1000003u * s);
}

/* The adversarial e4m3 kinds over an hd64, an hd96 and a page-1 shape. */
static const f8case adv_shapes[] = {
    {{E4, 2, 4, 1, 77, 129, 64, true, -1, -1, 0, false, true, true, false, "bm=128,bn=64", 0}, {0.5, 2, 1.5}},
    {{E4, 3, 4, 2, 40, 77, 96, false, 20, 5, 0, true, false, true, false, "bm=64,bn=32,pingpong=0", 0}, {1, 1, 1}},
    {{E4, 2, 2, 1, 77, 129, 64, true, -1, -1, 20, false, true, true, false, "bm=128,bn=64", 1}, {2, 0.25, 1}},
};

Test(attention_fa3_fp8, adversarial_e4m3_inputs_match_the_reference, .timeout = 600)
{
    run_e4m3_adv("attention prefill (impl=2) adversarial e4m3 inputs at hd 64 / 96 / page 1",
                 adv_shapes, (int)(sizeof adv_shapes / sizeof *adv_shapes), 2, 53, 7);
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* The default kernel of a Llama-like e4m3 problem (Sq = Sk = 4096 causal,
 * Hq 32, Hkv 8) at head dim d and page_size page: its PTX and launch. */
static char *default_text(int64_t d, int64_t page, char *cfg, size_t ncfg, pt_launch *l)
{
    fcase c = {E4, 1, 32, 8, 4096, 4096, d, true, -1, -1, 0, false, false, true, false, "", page};
    pt_problem p = problem_of(&c);
    p.descale_q = 0.5;
    p.descale_k = 0.25;
    p.descale_v = 2;
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), 0);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    pt_config cf;
    gen_attention_op.defaults(pp, &tg, &cf);
    pt_config_str(&cf, cfg, ncfg);
    ptx_module *m;
    cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &cf, &m, l, &e), 0, "%s", e.msg);
    char *text = ptx_print(m);
    ptx_module_free(m);
    pt_arena_free(a);
    return text;
}

Test(attention_fa3_fp8, structure_of_the_default_kernels)
{
    char cfg[256];
    pt_launch l;
    /* hd64: Q and K 64B-swizzled (TMA swizzle 64B, descriptors in mode 2, SBO 512), S by d / 32 = 2
     * k32 steps, P V^T by bn / 32 = 4, each issued twice (overlap) */
    char *t = default_text(64, 0, cfg, sizeof cfg, &l);
    cr_expect_str_eq(cfg, "impl=2,bm=128,bn=128,stages=2,overlap=1,pingpong=1,pack_gqa=0");
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 2 * 2, "S: N = bn = 128");
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), 2 * 4, "P V^T: N = dv = 64");
    cr_expect_geq(count(t, "0x8000002000010000"), 2, "64B-swizzle K-major descriptors (SBO 512) for Q and K");
    cr_expect_eq(count(t, "cp.async.bulk.tensor.4d"), 3, "Q, K, V: one box each");
    cr_expect_eq(l.ntmaps, 3);
    int swz[3] = {0};
    for (int i = 0; i < l.ntmaps; i++)
        swz[i] = l.tmaps[i].swizzle;
    cr_expect_eq(swz[0], EMU_TMAP_SWIZZLE_64B, "Q's map");
    cr_expect_eq(swz[1], EMU_TMAP_SWIZZLE_64B, "K's map");
    cr_expect_eq(swz[2], EMU_TMAP_SWIZZLE_64B, "V's map (the transposer reads 64B-swizzled rows)");
    cr_expect_eq(l.tmaps[0].box[0], 64u);
    cr_expect_eq(l.tmaps[2].box[0], 64u);
    /* Q 8 KB + 2 x (K 8 + V 8 + V^T 8 KB), 1 KB slack, 1 + 3 x 2 barrier pairs */
    cr_expect_eq(l.smem, (size_t)(1024 + 8192 + 2 * (8192 + 8192 + 8192) + 16 * 7));
    cr_expect_eq(count(t, "ld.local") + count(t, "st.local"), 0);
    free(t);
    /* hd96: 128-byte rows, 3 k32 steps, P V^T N = 96 */
    t = default_text(96, 0, cfg, sizeof cfg, &l);
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 2 * 3);
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3"), 2 * 4);
    cr_expect_eq(count(t, "0x8000002000010000"), 0, "no 64B descriptors at hd96");
    cr_expect_eq(l.tmaps[0].swizzle, EMU_TMAP_SWIZZLE_128B);
    free(t);
    /* page 1: K and V by cp.async (128 threads, arrive.noinc on full barriers), V^T by warps 1..3
     * in the same loop: Q's box is the only TMA load */
    t = default_text(64, 1, cfg, sizeof cfg, &l);
    cr_expect_eq(count(t, "cp.async.bulk.tensor"), 1, "Q only");
    cr_expect_eq(count(t, "cp.async.mbarrier.arrive.noinc.shared::cta.b64"), 2, "K and V gathers");
    cr_expect_eq(count(t, "bar.sync 5, 96;"), 1, "the transposing warps' barrier");
    cr_expect_eq(count(t, "prmt.b32"), 16, "one transposing unit");
    cr_expect_eq(l.ntmaps, 1);
    cr_expect_eq(count(t, "ld.local") + count(t, "st.local"), 0);
    free(t);
}

static int check_of(const fcase *c, const char *config, pt_err *e)
{
    pt_problem p = problem_of(c);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    int rc = gen_attention_op.prepare(a, &p, &tg, &pp, e);
    pt_config cf;
    if (!rc)
        rc = fa3_config(pp, &tg, config, &cf, e);
    if (!rc)
        rc = gen_attention_op.check(pp, &tg, &cf, e);
    pt_arena_free(a);
    return rc;
}

Test(attention_fa3_fp8, check_takes_the_new_problems_and_refuses_the_rest_in_one_line)
{
    /* the defaults of hd 64 / 96 and of pages 1, 2, 4 are taken (before: refused) */
    static const int64_t ds[] = {64, 96, 128, 256}, pgs[] = {0, 1, 2, 4, 16};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 5; k++) {
            fcase c = {E4, 2, 8, 2, 300, 1000, ds[i], true, -1, -1, 0, false, false, true, false, "", pgs[k]};
            pt_err e = {0};
            cr_expect_eq(check_of(&c, "", &e), PT_OK, "hd%lld page %lld: %s", (long long)ds[i], (long long)pgs[k],
                         e.msg);
        }
    static const struct {
        int64_t d, page;
        const char *config, *want;
    } bad[] = {
        {256, 4, "bm=192,bn=32,pingpong=0", "bm=192 bn=32: 148 live values per consumer thread"},
        {64, 0, "bn=48", "bn=48 with dtype e4m3: a multiple of 32"},
        {96, 2, "bn=80", "bn=80 with dtype e4m3: a multiple of 32"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fcase c = {E4, 2, 8, 2, 300, 1000, bad[i].d, true, -1, -1, 0, false, false, true, false, "", bad[i].page};
        pt_err e = {0};
        cr_expect_neq(check_of(&c, bad[i].config, &e), PT_OK, "case %zu accepted", i);
        cr_expect(strstr(e.msg, bad[i].want) != NULL, "case %zu: '%s' does not say '%s'", i, e.msg, bad[i].want);
        cr_expect(strchr(e.msg, '\n') == NULL, "case %zu: more than one line: %s", i, e.msg);
    }
}

/* ptxas sm_90a: hd 64 / 96 x pages 0 / 1 / 2 / 4 / 16 and hd 128 / 256 x
 * pages 1 / 2 / 4 (B2 Hq8 Hkv2 Sq300 Sk1000, causal and not), each
 * problem's default and `sample` seeded configs (PTXTUNE_FA3_FP8_SAMPLE,
 * default 2; every config with PTXTUNE_FULL_SPACE=1): 0 failures, spills,
 * C75xx/C76xx, local memory. */
Test(attention_fa3_fp8, new_fp8_configs_assemble_for_sm_90a, .timeout = 1200)
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
    pt_problem probs[64];
    int n = 0;
    static const int64_t ds[] = {64, 96, 128, 256}, pgs[] = {0, 1, 2, 4, 16};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 5; k++)
            for (int causal = 0; causal < 2; causal++) {
                if (ds[i] >= 128 && (pgs[k] == 0 || pgs[k] == 16)) /* test_attention_fa3.c's */
                    continue;
                fcase c = {E4, 2, 8, 2, 300, 1000, ds[i], causal, -1, -1, 0, false, false, true, false, "", pgs[k]};
                probs[n++] = problem_of(&c);
            }
    const char *en = getenv("PTXTUNE_FA3_FP8_SAMPLE");
    int sample = en && atoi(en) >= 0 ? atoi(en) : 2;
    double t0 = now();
    fa3_sweep r = fa3_sweep_run(probs, n, 1, ATTN_FA3, sample, 0xf8, comp);
    printf("fa3 prefill e4m3 (hd 64/96 x pages 0/1/2/4/16, hd 128/256 x pages 1/2/4, causal and not) on sm_90a: "
           "%d problems (%d no kernel takes), %d configs, %d distinct texts through %s in %.1f s: %d failures, "
           "%d spills, %d C75xx/C76xx, %d local\n", r.problems, r.unsupported, r.candidates, r.texts,
           pt_compiler_describe(comp), now() - t0, r.failures, r.spills, r.codes, r.local);
    cr_expect_eq(r.unsupported, 0, "every problem has a kernel");
    cr_expect_gt(r.compiled, 0);
    cr_expect_eq(r.failures + r.spills + r.codes + r.local, 0, "%d failures, %d spills, %d codes, %d local; first: %s",
                 r.failures, r.spills, r.codes, r.local, r.first);
    pt_compiler_close(comp);
}

/* The CLI (PTXTUNE_BIN, set by meson): emit of an e4m3 hd64 prefill for
 * sm_90a gives the fa3 kernel's PTX, and run --check on the emulator
 * verifies hd64, hd96 and a page-1 problem (before: check refused them). */
static int cli(const char *args, char *out, size_t n)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin, "PTXTUNE_BIN not set (meson sets it)");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen %s", cmd);
    size_t k = fread(out, 1, n - 1, p);
    out[k] = 0;
    return pclose(p);
}

Test(attention_fa3_fp8, cli_emits_and_checks_the_new_problems, .timeout = 300)
{
    static char out[1 << 20];
    const char *pr = "attention batch=1 heads_q=4 heads_kv=1 seqlen_q=77 seqlen_k=129 causal=1 dtype=e4m3 "
                     "descale_q=0.5 descale_k=2 descale_v=1.5";
    char args[512];
    snprintf(args, sizeof args, "emit %s head_dim=64 --arch sm_90a", pr);
    cr_expect_eq(cli(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, ".visible .entry attn_fa3_e4m3_d64_") != NULL, "%.300s", out);
    cr_expect(strstr(out, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3") != NULL);
    static const char *const extra[] = {"head_dim=64", "head_dim=96", "head_dim=64 page_size=1",
                                        "head_dim=128 page_size=2 return_lse=1",
                                        "head_dim=64 head_dim_v=128", "head_dim=96 head_dim_v=64 page_size=4"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        snprintf(args, sizeof args, "run %s %s --arch sm_90a --backend emu --check", pr, extra[i]);
        int rc = cli(args, out, sizeof out);
        cr_expect_eq(rc, 0, "%s: %s", extra[i], out);
        cr_expect(strstr(out, "impl=2,") != NULL && strstr(out, "check    ok") != NULL, "%s: %s", extra[i], out);
    }
}

/* Issue cost of the small-page loop on the emulator: warp instructions of
 * the whole launch per key block (one CTA: Sq 128 of one head, 1024 keys,
 * hd128 e4m3, bm 128, bn 128, 8 blocks) with pages of 16 keys (TMA: one
 * thread, V^T by warps 1..3) and of 1, 2, 4 keys (the 128 threads gather
 * by cp.async, warps 1..3 transpose in the same loop); the difference is
 * the gather's (measured: 5710 with TMA; 7033 / 7097 / 7097 at pages 1 /
 * 2 / 4, +23-24%: 8 K + 8 V passes of 4 warps a block). Bound: 1.5 x
 * those (a regression in what a block costs). */
Test(attention_fa3_fp8, warp_instructions_per_key_block, .timeout = 300)
{
    static const struct {
        int64_t page;
        double bound;
    } cs[] = {{16, 8565}, {1, 10646}, {2, 10646}, {4, 10646}};
    double base = 0;
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        fcase c = {E4, 1, 1, 1, 128, 1024, 128, false, -1, -1, 0, false, false, false, false,
                   "bm=128,bn=128,stages=2,pingpong=0", cs[i].page};
        double err;
        emu_stats st;
        memset(&st, 0, sizeof st);
        pt_err e = {0};
        cr_assert_eq(run_case_st(&gen_attention_op, &c, NULL, EMU_SCHED_LAZY, 5, 2, &err, &st, &e), PT_OK, "%s",
                     e.msg);
        double per = (double)st.warp_instructions / 8;
        if (i == 0)
            base = per;
        printf("attention prefill (impl=2) e4m3 hd128 bn128, page %lld%s: %.0f warp instructions a key block (%+.0f "
               "against TMA pages)\n", (long long)c.page, c.page < 8 ? " (cp.async gather + transpose)" : " (TMA)",
               per, per - base);
        cr_expect(per <= cs[i].bound, "page %lld: %.0f warp instructions a block, bound %.0f", (long long)c.page, per,
                  cs[i].bound);
    }
}
