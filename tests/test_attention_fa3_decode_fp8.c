/* fp8 (e4m3 q, k, v) on the sm_90a split-KV decode kernel
 * (gen/attention_fa3_decode.c, impl=3) at the shapes that came last
 * (issue 16 items 2-3): head dim 64 (Q and K in 64-byte rows, 64B
 * swizzle, S by wgmma e4m3 k32 in two steps), head dim 96 (one 128-byte
 * span a row, the 32 bytes past it zero-filled and unread: 3 of 4 k32
 * steps; P V N=96) and pages under 8 keys (1, 2, 4), whose K and V rows
 * the producer warpgroup's 128 threads gather with cp.async while its
 * warps 1..3 also convert V to f16 (the gather runs stages - 1 blocks
 * ahead of the conversion).
 *
 * On the emulator with every detector, under the lazy, eager and random
 * schedules, against the float64 reference of the e4m3-rounded inputs
 * with the verifier's own tolerances (tests/attn_fa3_decode_case.h): GQA
 * 4:1 and MQA, Sq 1 and small Sq > 1 (causal), window, softcap, ragged
 * seqused_k, shuffled block tables, varlen, bshd / bhsd, splits 1 and > 1
 * (the fused last-arriver combine), descales; the adversarial e4m3 kinds
 * (tests/attn_e4m3_adv.h); check() and the default taking them; ptxas
 * sm_90a assembly of their configs (0 spills, no C75xx/C76xx). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/attention.h"
#include "gen/attention_combine.h"
#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "test_util.h"
#include "attn_e4m3_adv.h"
#include "attn_fa3_sweep.h"
#include "attn_fa3_decode_case.h"

#define E4M3 PT_E4M3
/* B Hq Hkv Sq Sk d dt causal page wl seqused lse softcap config varlen bhsd dq dk dv */
static const fcase grid[] = {
    /* head dim 64: 64B swizzle by TMA (pages of 16 / 8 / 64, not paged) */
    {3, 8, 2, 1, 77, 64, E4M3, false, 16, -1, true, true, 0, "bn=128,stages=4,splits=1", false, false, 0.5, 2, 1.5},
    {2, 16, 2, 1, 1000, 64, E4M3, false, 64, -1, true, true, 0, "bn=64,stages=6,splits=8", false, false, 0.25, 0.125,
     3},
    {1, 8, 1, 4, 129, 64, E4M3, true, 0, -1, false, true, 0, "bn=32,stages=2,ctas=2,splits=2", false, false, 1, 1, 1},
    {2, 8, 2, 1, 300, 64, E4M3, false, 8, 40, false, true, 20, "bn=64,stages=3,splits=3", false, false, 2, 0.5, 0.75},
    {3, 8, 2, 2, 129, 64, E4M3, true, 16, -1, false, true, 0, "bn=64,stages=2,splits=4", true, false, 0, 0, 0},
    {3, 4, 1, 1, 7, 64, E4M3, false, 0, -1, false, true, 0, "bn=64,stages=2,splits=2", false, true, 0, 0, 0},
    /* head dim 96: one 128-byte span a row, 3 k32 steps, P V N=96 */
    {3, 8, 2, 1, 77, 96, E4M3, false, 16, -1, true, true, 0, "bn=64,stages=4,splits=3", false, false, 0.5, 2, 1.5},
    {1, 32, 1, 4, 129, 96, E4M3, true, 64, -1, false, true, 30, "bn=64,stages=2,splits=2", false, false, 1, 1, 1},
    {2, 8, 2, 1, 1000, 96, E4M3, false, 0, 40, false, true, 0, "bn=128,stages=2,splits=4", false, true, 0.5, 1, 2},
    /* pages under 8 keys: the 128 producer threads gather, warps 1..3 also convert V */
    {3, 8, 2, 1, 77, 128, E4M3, false, 1, -1, true, true, 0, "bn=64,stages=4,splits=3", false, false, 0.5, 2, 1.5},
    {2, 8, 1, 4, 129, 64, E4M3, true, 2, -1, true, true, 0, "bn=128,stages=2,splits=2", false, false, 1, 0.5, 1},
    {2, 16, 2, 1, 300, 96, E4M3, false, 4, 40, false, true, 20, "bn=32,stages=3,splits=4", false, false, 2, 1, 0.5},
    {1, 8, 2, 1, 129, 256, E4M3, false, 4, -1, true, true, 0, "bn=32,stages=6,splits=1", false, false, 1, 1, 1},
    {3, 4, 1, 2, 129, 128, E4M3, true, 1, -1, false, true, 0, "bn=64,stages=2,splits=2", true, false, 0, 0, 0},
    {1, 8, 1, 1, 1000, 64, E4M3, false, 2, -1, true, true, 0, "bn=64,stages=8,splits=5", false, false, 0.25, 4, 1},
};

Test(attention_fa3_decode_fp8, hd64_hd96_small_pages_against_the_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0;
    double worst = 0;
    char first[2048] = "", wname[640] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++)
        for (int sch = 0; sch < 3; sch++) {
            const fcase *c = &grid[i];
            double err;
            pt_err e = {0};
            uint64_t seed = (uint64_t)(c->Sk * 29 + c->d + 3 * (int64_t)i + sch);
            int rc = run_case(&gen_attention_op, c, (emu_sched)sch, seed, &err, &e);
            ran++;
            char what[512];
            describe(c, what, sizeof what);
            if (!rc && err > worst) {
                worst = err;
                snprintf(wname, sizeof wname, "%s (%s)", what, sched_names[sch]);
            }
            if (rc) {
                if (!failed)
                    snprintf(first, sizeof first, "%s (%s): %.1200s", what, sched_names[sch], e.msg);
                failed++;
                fprintf(stderr, "FAIL %s (%s): %s\n", what, sched_names[sch], e.msg);
            }
        }
    printf("attention decode (impl=3) e4m3 hd64 / hd96 / pages 1, 2, 4: %d cases (%zu shapes x 3 schedules), %d "
           "failed; worst error %.3g at %s (tolerance 1e-2 for o, 1e-4 for lse); %.1f s\n",
           ran, sizeof grid / sizeof *grid, failed, worst, wname, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* head_dim_v apart from head_dim: K and V rows of two widths by TMA, and a
 * small-page gather of two widths (one pass each); every schedule. */
static const struct {
    fcase c;
    int64_t dv;
} mixed[] = {
    {{2, 8, 2, 1, 300, 128, E4M3, false, 16, -1, true, true, 0, "splits=2", false, false, 0.5, 1, 2}, 64},
    {{2, 8, 2, 2, 129, 64, E4M3, true, 2, -1, false, true, 0, "splits=2", false, false, 1, 1, 1}, 128},
    {{1, 8, 1, 1, 129, 256, E4M3, false, 1, -1, true, true, 0, "splits=1", false, false, 1, 2, 0.5}, 96},
};

Test(attention_fa3_decode_fp8, mixed_head_dims_against_the_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0;
    double worst = 0, t0 = now();
    char first[2048] = "";
    for (size_t i = 0; i < sizeof mixed / sizeof *mixed; i++)
        for (int sch = 0; sch < 3; sch++) {
            const fcase *c = &mixed[i].c;
            double err;
            pt_err e = {0};
            int rc = run_case_dv(&gen_attention_op, c, mixed[i].dv, (emu_sched)sch,
                                 (uint64_t)(c->Sk * 31 + 7 * (int64_t)i + sch), &err, NULL, &e);
            ran++;
            if (!rc && err > worst)
                worst = err;
            if (rc) {
                char d[512];
                describe(c, d, sizeof d);
                if (!failed++)
                    snprintf(first, sizeof first, "%.500s dv %lld (%s): %.1200s", d, (long long)mixed[i].dv,
                             sched_names[sch], e.msg);
                fprintf(stderr, "FAIL %s dv %lld (%s): %s\n", d, (long long)mixed[i].dv, sched_names[sch], e.msg);
            }
        }
    printf("attention decode (impl=3) e4m3, head_dim_v apart from head_dim (128/64 page 16, 64/128 page 2, 256/96 "
           "page 1): %d cases, %d failed, worst error %.3g; %.1f s\n",
           ran, failed, worst, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* the gather with the conversion in one warpgroup, where a wrong lag would
 * deadlock: the tightest rings (stages 2: the conversion one block behind
 * the gather; 3) and a deep one (8), each split's blocks twice the ring
 * or more (ragged seqused_k: some fewer), under the random schedule at 6
 * seeds each (a deadlock is the emulator's report: with the lag mutated
 * to stages the emulator reports the consumer's mbarrier wait deadlocked,
 * and before the shapes had twice the ring's blocks it did not) */
static const fcase lag_shapes[] = {
    {2, 8, 2, 1, 1000, 128, E4M3, false, 1, -1, true, true, 0, "bn=64,stages=2,splits=2", false, false, 1, 1, 1},
    {2, 8, 1, 2, 300, 64, E4M3, true, 4, -1, true, true, 0, "bn=32,stages=3,splits=1", false, false, 0.5, 2, 1},
    {1, 8, 2, 1, 1000, 96, E4M3, false, 2, -1, false, true, 0, "bn=32,stages=8,splits=2", false, false, 1, 1, 2},
};

Test(attention_fa3_decode_fp8, gather_and_conversion_never_deadlock_under_random_schedules, .timeout = 600)
{
    int ran = 0, failed = 0;
    char first[2048] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof lag_shapes / sizeof *lag_shapes; i++)
        for (uint64_t seed = 1; seed <= 6; seed++) {
            const fcase *c = &lag_shapes[i];
            double err;
            pt_err e = {0};
            int rc = run_case(&gen_attention_op, c, EMU_SCHED_RANDOM, 1000 * seed + i, &err, &e);
            ran++;
            if (rc) {
                char what[512];
                describe(c, what, sizeof what);
                if (!failed)
                    snprintf(first, sizeof first, "%s (seed %llu): %.1200s", what, (unsigned long long)seed, e.msg);
                failed++;
                fprintf(stderr, "FAIL %s (random seed %llu): %s\n", what, (unsigned long long)seed, e.msg);
            }
        }
    printf("attention decode (impl=3) e4m3 gather + conversion, random schedule: %d cases, %d failed, %.1f s\n", ran,
           failed, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* the adversarial e4m3 kinds (NaN 0x7f / 0xff, +-448, subnormals, ties, a
 * NaN in v past the keys) on a hd64, a hd96 and a page-2 gather shape */
static const fcase adv_shapes[] = {
    {2, 8, 2, 1, 77, 64, E4M3, false, 16, -1, true, true, 0, "bn=64,stages=2,splits=3", false, false, 0.5, 2, 1.5},
    {2, 8, 2, 4, 129, 96, E4M3, true, 64, -1, false, true, 0, "bn=64,stages=2,splits=2", false, false, 1, 1, 1},
    {2, 4, 4, 1, 129, 64, E4M3, false, 2, -1, true, true, 20, "bn=64,stages=3,splits=2", false, false, 2, 0.25, 1},
};

Test(attention_fa3_decode_fp8, adversarial_e4m3_inputs_match_the_reference, .timeout = 600)
{
    int ran = 0;
    char first[2048] = "";
    double t0 = now();
    int failed = run_e4m3_adv(adv_shapes, (int)(sizeof adv_shapes / sizeof *adv_shapes), 2, 57, 7, &ran, first,
                              sizeof first);
    printf("attention decode (impl=3) adversarial e4m3 inputs at hd64 / hd96 / page 2: %d cases, %d failed, %.1f s\n",
           ran, failed, now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* check() takes what it refused before (e4m3 at head dims 64 / 96, pages
 * of 1, 2, 4 keys) and the sm_90a default is impl=3 there */
Test(attention_fa3_decode_fp8, check_and_the_default_take_hd64_hd96_and_small_pages)
{
    static const int64_t hds[] = {64, 96, 128, 256}, pages[] = {1, 2, 4, 16, 0};
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    for (int h = 0; h < 4; h++)
        for (int pg = 0; pg < 5; pg++) {
            fcase c = {16, 32, 8, 1, 8192, hds[h], E4M3, false, pages[pg], -1, false, false, 0, "", false, false,
                       0, 0, 0};
            pt_err ce = {0};
            cr_expect_eq(check_of(&c, "sm_90a", "", &ce), PT_OK, "hd%lld page %lld: %s", (long long)hds[h],
                         (long long)pages[pg], ce.msg);
            pt_problem p = problem_of(&c);
            pt_arena *a = pt_arena_new();
            pt_prepared *pp;
            cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
            pt_config cf;
            gen_attention_op.defaults(pp, &tg, &cf);
            cr_expect_eq(pt_config_get(&cf, "impl", -1), ATTN_FA3_SPLIT, "hd%lld page %lld", (long long)hds[h],
                         (long long)pages[pg]);
            pt_arena_free(a);
        }
}

/* ptxas sm_90a: the default and a seeded sample of the impl=3 configs of
 * e4m3 problems at hd 64 / 96 (pages 0, 16 by TMA) and at hd 64 / 96 / 128
 * / 256 over pages 1, 2, 4 (the gather with the conversion), GQA 4 and MQA
 * (B2 Hq8 Sq1 Sk1000, ragged seqused_k). Every PTXTUNE_FA3_GRID_STRIDE-th
 * problem (default 2), PTXTUNE_FA3_GRID_SAMPLE sampled configs (default 1). */
Test(attention_fa3_decode_fp8, fp8_decode_configs_assemble_for_sm_90a, .timeout = 1200)
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
    static const int64_t hkv[] = {2, 1};
    pt_problem probs[64];
    int n = 0;
    for (int g = 0; g < 2; g++) {
        static const int64_t tma_hd[] = {64, 96}, tma_pg[] = {0, 16};
        for (int h = 0; h < 2; h++)
            for (int pg = 0; pg < 2; pg++) {
                fcase c = {2, 8, hkv[g], 1, 1000, tma_hd[h], E4M3, false, tma_pg[pg], -1, true, false, 0, "", false,
                           false, 0, 0, 0};
                probs[n++] = problem_of(&c);
            }
        static const int64_t ghd[] = {64, 96, 128, 256}, gpg[] = {1, 2, 4};
        for (int h = 0; h < 4; h++)
            for (int pg = 0; pg < 3; pg++) {
                fcase c = {2, 8, hkv[g], 1, 1000, ghd[h], E4M3, false, gpg[pg], -1, true, false, 0, "", false, false,
                           0, 0, 0};
                probs[n++] = problem_of(&c);
            }
    }
    double t0 = now();
    const char *es = getenv("PTXTUNE_FA3_GRID_STRIDE"), *en = getenv("PTXTUNE_FA3_GRID_SAMPLE");
    int stride = es && atoi(es) > 0 ? atoi(es) : 2, sample = en && atoi(en) >= 0 ? atoi(en) : 1;
    fa3_sweep r = fa3_sweep_run(probs, n, stride, ATTN_FA3_SPLIT, sample, 0xf8d, comp);
    printf("fa3 decode e4m3 (hd 64/96 by TMA, hd 64/96/128/256 x pages 1/2/4 gathered, GQA 4 and MQA) on sm_90a: %d "
           "problems (%d no kernel takes), %d configs, %d distinct texts through %s in %.1f s: %d failures, %d "
           "spills, %d C75xx/C76xx, %d local\n", r.problems, r.unsupported, r.candidates, r.texts,
           pt_compiler_describe(comp), now() - t0, r.failures, r.spills, r.codes, r.local);
    cr_expect_gt(r.compiled, 0);
    cr_expect_eq(r.unsupported, 0);
    cr_expect_eq(r.failures + r.spills + r.codes + r.local, 0, "%d failures, %d spills, %d codes, %d local; first: %s",
                 r.failures, r.spills, r.codes, r.local, r.first);
    pt_compiler_close(comp);
}
