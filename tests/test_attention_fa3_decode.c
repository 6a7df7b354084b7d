/* The sm_90a split-KV decode kernel (gen/attention_fa3_decode.c, impl=3:
 * wgmma + TMA + mbarrier ring, warp-specialised) on the CPU emulator
 * against the float64 reference, every detector on, under the lazy, eager
 * and random async schedules (emit -> print -> parse -> print back
 * identically -> emulate at sm_90a -> tuner_verify: the op's structured
 * inputs (shuffled block tables, ragged seqused_k), poisoned outputs and
 * scratch, every element against the verifier's tolerances, lse by its
 * own bound).
 *
 * Grid: Sq 1 and 4 (causal bottom-right), GQA 1:1, 4:1, 8:1 and MQA (two
 * row blocks), head dims 64, 128, 256, causal / window / softcap, Sk 1, 7,
 * 77, 129, 1000, pages 16, 64, 256 (smaller, equal to and larger than the
 * tile) and not paged (bshd, bhsd), varlen over pages, splits 1 to more
 * than the key blocks (empty splits), f16 and bf16, both register splits
 * (ctas 1, 2), ring depths 2..8; fp8: e4m3 q, k, v with descales (o
 * bf16) against the reference of the e4m3-rounded inputs, 5 shapes x 3
 * schedules. Then the adversarial inputs of the split
 * kernel's test (gen_attention_adversarial_op: NaN, +-inf, 2^14 in q, k or
 * v), check()'s one-line refusals, the sm_90a default, and ptxas sm_90a
 * assembly of a sample of the Llama-3-8B decode space (every config with
 * PTXTUNE_FULL_SPACE=1): 0 spills, no local memory, no C75xx. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/attention.h"
#include "gen/attention_combine.h"
#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"
#include "test_util.h"
#include "attn_e4m3_adv.h"
#include "attn_fa3_sweep.h"
#include "attn_fa3_decode_case.h"

static int dtk(pt_dtype dt) { return dt == PT_BF16 ? 1 : dt == PT_E4M3 ? 2 : 0; }

#define F16 PT_F16
#define BF16 PT_BF16
/* B Hq Hkv Sq Sk d dt causal page wl seqused lse softcap config varlen bhsd */
static const fcase grid[] = {
    /* paged decode, Llama-like GQA 4:1, shuffled tables, ragged lengths */
    {3, 8, 2, 1, 77, 128, BF16, false, 16, -1, true, true, 0, "bn=64,stages=4,splits=3", false, false, 0, 0, 0},
    {2, 16, 2, 1, 1000, 128, F16, false, 16, -1, true, true, 0, "bn=64,stages=6,splits=8", false, false, 0, 0, 0},
    {2, 4, 4, 1, 129, 64, BF16, false, 64, -1, false, true, 0, "bn=128,stages=2,ctas=2,splits=2", false, false, 0, 0, 0},
    {2, 8, 1, 1, 1000, 256, BF16, false, 256, -1, true, true, 0, "bn=32,stages=3,splits=4", false, false, 0, 0, 0},
    /* pages of 8 (the least a box takes): 8 pages a tile, their table
     * entries read in the tile's own iteration (more than 4 are not read
     * ahead) */
    {2, 8, 2, 1, 300, 64, BF16, false, 8, -1, true, true, 0, "bn=64,stages=3,splits=3", false, false, 0, 0, 0},
    /* Sq = 4 causal (packed rows = positions x heads), MQA in two row blocks */
    {2, 8, 2, 4, 129, 64, F16, true, 16, -1, true, true, 0, "bn=64,stages=2,splits=3", false, false, 0, 0, 0},
    {1, 32, 1, 4, 77, 128, BF16, true, 64, -1, false, true, 0, "bn=64,stages=3,splits=2", false, false, 0, 0, 0},
    {1, 4, 4, 4, 1, 64, BF16, true, 16, -1, false, true, 0, "bn=64,stages=2,splits=3", false, false, 0, 0, 0},
    /* window, softcap */
    {2, 8, 2, 1, 1000, 64, F16, false, 16, 40, false, true, 0, "bn=64,stages=4,splits=5", false, false, 0, 0, 0},
    {1, 8, 2, 4, 129, 128, BF16, true, 0, 20, false, true, 30, "bn=32,stages=2,splits=2", false, false, 0, 0, 0},
    {2, 8, 1, 1, 77, 256, F16, false, 64, -1, true, true, 20, "bn=32,stages=2,ctas=1,splits=1", false, false, 0, 0, 0},
    /* not paged (bshd, bhsd: TMA zero past seqlen_k), Sk 1 and 7 */
    {2, 8, 2, 1, 7, 128, F16, false, 0, -1, false, true, 0, "bn=64,stages=2,splits=1", false, false, 0, 0, 0},
    {3, 4, 1, 1, 1, 64, BF16, false, 0, -1, false, true, 0, "bn=64,stages=2,splits=2", false, true, 0, 0, 0},
    {1, 8, 8, 1, 129, 256, BF16, false, 0, -1, true, true, 0, "bn=32,stages=4,splits=16", false, true, 0, 0, 0},
    /* varlen over pages (a length-1 sequence), splits over the blocks */
    {3, 8, 2, 2, 129, 64, BF16, true, 16, -1, false, true, 0, "bn=64,stages=2,splits=4", true, false, 0, 0, 0},
    {3, 4, 1, 1, 77, 128, F16, false, 64, -1, true, false, 0, "bn=128,stages=2,splits=2", true, false, 0, 0, 0},
};

Test(attention_fa3_decode, grid_against_float64_reference_every_schedule, .timeout = 900)
{
    int ran = 0, failed = 0;
    double worst[3] = {0, 0, 0};
    char first[2048] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++)
        for (int sch = 0; sch < 3; sch++) {
            const fcase *c = &grid[i];
            double err;
            pt_err e = {0};
            uint64_t seed = (uint64_t)(c->Sk * 131 + c->Hq * 7 + c->d + (int64_t)i);
            int rc = run_case(&gen_attention_op, c, (emu_sched)sch, seed, &err, &e);
            ran++;
            int k = dtk(c->dt);
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
    printf("attention decode (impl=3, sm_90a wgmma/TMA): %d cases (%zu shapes x 3 schedules), %d failed; worst "
           "error f16 %.3g, bf16 %.3g (tolerance 1e-2 for o, 1e-4 for lse); %.1f s\n",
           ran, sizeof grid / sizeof *grid, failed, worst[0], worst[1], now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- fp8: e4m3 q, k, v with per-tensor descales, o bf16 ----------------------
 * The verifier stores the inputs in e4m3 (rounded) and the float64
 * reference reads them back: the reference of rounded inputs, true values
 * = stored x descale. S by wgmma e4m3 (k32), V converted to f16 in shared
 * memory by warps 1..3 of warpgroup 0, P V in f16. */
#define E4M3 PT_E4M3
static const fcase fp8_grid[] = {
    {3, 8, 2, 1, 77, 128, E4M3, false, 16, -1, true, true, 0, "bn=64,stages=4,splits=3", false, false, 0.5, 2, 1.5},
    {2, 16, 2, 1, 1000, 128, E4M3, false, 64, -1, true, true, 0, "bn=64,stages=4,splits=8", false, false, 0.25, 0.125,
     3},
    {2, 8, 1, 4, 129, 256, E4M3, true, 256, -1, false, true, 0, "bn=32,stages=3,splits=2", false, false, 1, 1, 1},
    {1, 8, 2, 1, 129, 128, E4M3, false, 0, 40, false, true, 30, "bn=32,stages=2,ctas=2,splits=2", false, false, 2, 0.5,
     0.75},
    {2, 4, 4, 1, 7, 256, E4M3, false, 16, -1, false, true, 0, "bn=64,stages=2,splits=1", false, false, 0, 0, 0},
};

Test(attention_fa3_decode, fp8_e4m3_with_descales_against_the_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0;
    double worst = 0;
    char first[2048] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof fp8_grid / sizeof *fp8_grid; i++)
        for (int sch = 0; sch < 3; sch++) {
            const fcase *c = &fp8_grid[i];
            double err;
            pt_err e = {0};
            int rc = run_case(&gen_attention_op, c, (emu_sched)sch, (uint64_t)(c->Sk * 17 + (int64_t)i), &err, &e);
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
    printf("attention decode (impl=3) e4m3 q/k/v with descales, o bf16: %d cases (%zu shapes x 3 schedules), %d "
           "failed; worst error e4m3 %.3g; %.1f s\n",
           ran, sizeof fp8_grid / sizeof *fp8_grid, failed, worst, now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}


/* ---- issue cost: warp instructions per KB of K and V ----------------------
 * The Llama-3-8B decode shape (Hq 32, Hkv 8, d 128, page 16, one sequence
 * of 1024 keys, one split: every CTA streams its KV head's keys) on the
 * emulator: warp instructions of the whole launch over the K/V bytes read.
 * An H200 issues ~132 SMs x 4 x 1.98 GHz warp instructions a second against
 * ~4.8 TB/s: ~0.22 warp instructions per byte, 223 per KB, at full issue
 * (measured here: bf16 51.6, 23% of it; e4m3 156, whose KB holds twice
 * the keys and V's conversion; before the warps of padding rows skipped
 * the softmax, 80 and 214). Pages of 1, 2, 4 keys (the producer's 128
 * threads gather K and V with cp.async in one pass, e4m3: warps 1..3
 * also convert V): bf16 69.6 / 72.6 / 72.6, e4m3 178 / 181 / 181 (92 /
 * 94 / 94 and 203 / 205 / 205 while K and V were gathered apart, each
 * reading the page's table entry). The bounds (1.25 x those; the gathered e4m3 at the full
 * issue rate) catch a regression in the instructions a block costs. */
Test(attention_fa3_decode, warp_instructions_per_kv_kilobyte, .timeout = 300)
{
    static const struct {
        pt_dtype dt;
        int64_t page;
        double bound;
    } dts[] = {{BF16, 16, 64}, {E4M3, 16, 195}, {BF16, 1, 91}, {BF16, 2, 91}, {BF16, 4, 91},
               {E4M3, 1, 223}, {E4M3, 2, 223}, {E4M3, 4, 223}};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        fcase c = {1, 32, 8, 1, 1024, 128, dts[i].dt, false, dts[i].page, -1, false, false, 0,
                   "bn=64,stages=4,splits=1", false, false, 0, 0, 0};
        double err;
        emu_stats st;
        pt_err e = {0};
        memset(&st, 0, sizeof st);
        cr_assert_eq(run_case_st(&gen_attention_op, &c, EMU_SCHED_LAZY, 5, &err, &st, &e), PT_OK, "%s", e.msg);
        double kb = (double)(c.Sk * c.Hkv * 2 * c.d * pt_dtype_get(c.dt)->bytes) / 1024.0;
        double per = (double)st.warp_instructions / kb;
        printf("attention decode (impl=3) %s, Llama-3-8B heads, 1024 keys, page %lld%s: %llu warp instructions, %.1f "
               "per K/V KB (full H200 issue at 4.8 TB/s: ~223)\n",
               pt_dtype_get(c.dt)->name, (long long)c.page, c.page < 8 ? " (cp.async gather)" : " (TMA)",
               (unsigned long long)st.warp_instructions, per);
        cr_expect(per <= dts[i].bound, "%s page %lld: %.1f warp instructions per K/V KB, bound %.0f",
                  pt_dtype_get(c.dt)->name, (long long)c.page, per, dts[i].bound);
    }
}

/* ---- adversarial inputs (the split kernel's test's kinds and semantics) ---- */
static const fcase adv_shapes[] = {
    {3, 8, 2, 1, 77, 128, BF16, false, 16, -1, true, true, 0, "bn=64,stages=2,splits=3", false, false, 0, 0, 0},
    {2, 4, 1, 4, 129, 64, F16, true, 64, -1, false, true, 0, "bn=64,stages=2,splits=2", false, false, 0, 0, 0},
    {2, 4, 1, 1, 129, 64, BF16, false, 16, 40, false, true, 0, "bn=64,stages=2,splits=2", false, false, 0, 0, 0},
    {1, 8, 2, 1, 129, 128, F16, false, 0, -1, false, true, 30, "bn=64,stages=2,splits=1", false, false, 0, 0, 0},
};

static const char *const adv_names[ATTN_ADV_N] = {
    "none", "q NaN", "q +inf", "q -inf", "q huge", "k NaN", "k +inf", "k -inf", "k huge (first block)",
    "k huge (last key)", "v NaN", "v +inf", "v -inf",
};

Test(attention_fa3_decode, adversarial_inputs_match_the_reference, .timeout = 600)
{
    int ran = 0, failed = 0;
    char first[2048] = "";
    double t0 = now();
    int ns = (int)(sizeof adv_shapes / sizeof *adv_shapes);
    for (int kind = 1; kind < ATTN_ADV_N; kind++)
        for (int v = 0; v < 2; v++) {
            const fcase *c = &adv_shapes[(kind + v) % ns];
            const pt_op *op = gen_attention_adversarial_op((attn_adv)kind);
            cr_assert(op);
            double err;
            pt_err e = {0};
            emu_sched sch = (emu_sched)((kind + v) % 3);
            int rc = run_case(op, c, sch, (uint64_t)(92 + 13 * kind + v), &err, &e);
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
    printf("attention decode (impl=3) adversarial inputs: %d cases, %d failed, %.1f s\n", ran, failed, now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- adversarial e4m3 inputs (tests/attn_e4m3_adv.h: NaN 0x7f / 0xff, +-448,
 * subnormals, ties) through the fp8 path (S by wgmma e4m3, V converted to f16
 * by cvt.rn.f16x2.e4m3x2, which keeps NaN): the same semantics as the f16
 * kernels' NaN (a NaN in q: its row; in k: the rows that see the key; in v:
 * the column of the rows whose P of that key is not 0, the masked ones
 * either way: 0 x NaN), judged by the verifier as there. ---- */
static const fcase e4m3_adv_shapes[] = {
    {2, 8, 2, 1, 77, 128, E4M3, false, 16, -1, true, true, 0, "bn=64,stages=2,splits=3", false, false, 0.5, 2, 1.5},
    {1, 8, 1, 4, 129, 256, E4M3, true, 64, -1, false, true, 0, "bn=32,stages=2,splits=2", false, false, 1, 1, 1},
    {2, 4, 4, 1, 129, 128, E4M3, false, 0, -1, false, true, 20, "bn=64,stages=2,splits=1", false, false, 2, 0.25, 1},
};

Test(attention_fa3_decode, adversarial_e4m3_inputs_match_the_reference, .timeout = 600)
{
    cr_expect_eq(pt_f32_to_e4m3(NAN), 0x7f);
    cr_expect_eq(pt_f32_to_e4m3(-NAN), 0xff);
    cr_expect_eq(pt_f32_to_e4m3(INFINITY), 0x7e, "+inf saturates to 448");
    cr_expect_eq(pt_f32_to_e4m3(17.0f), pt_f32_to_e4m3(16.0f), "ties to even");
    int ran = 0;
    char first[2048] = "";
    double t0 = now();
    int failed = run_e4m3_adv(e4m3_adv_shapes, (int)(sizeof e4m3_adv_shapes / sizeof *e4m3_adv_shapes), 1, 31, 7,
                              &ran, first, sizeof first);
    /* the same keys past the sequence in bf16 (V read straight from the stage) */
    {
        fcase c = e4m3_adv_shapes[1];
        c.dt = BF16;
        c.dq = c.dk = c.dv = 0;
        pt_op op;
        e4m3_op(E4M3_ADV_V_NAN_PAST, &op);
        double err;
        pt_err e = {0};
        int rc = run_case(&op, &c, EMU_SCHED_RANDOM, 5, &err, &e);
        ran++;
        if (rc) {
            failed++;
            if (!first[0])
                snprintf(first, sizeof first, "bf16 v NaN past the keys: %.1000s", e.msg);
            printf("FAILED bf16 v NaN past the keys: %s\n", e.msg);
        }
    }
    printf("attention decode (impl=3) adversarial e4m3 inputs: %d cases, %d failed, %.1f s\n", ran, failed,
           now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- check(), defaults ---------------------------------------------------- */

Test(attention_fa3_decode, check_refuses_in_one_line)
{
    static const struct {
        fcase c;
        const char *arch, *config, *want;
    } bad[] = {
        {{2, 8, 2, 1, 77, 128, BF16, false, 0, -1, false, false, 0, "", true, false, 0, 0, 0}, "sm_90a", "bn=48",
         "bn=48: 32, 64, 128 or 256"},
        {{1, 8, 2, 1, 77, 256, BF16, false, 2, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90a",
         "bn=128,ctas=2", "live registers per consumer thread"},
        /* ptxas checks the m64n256 P V wgmma (158 registers) against the entry count 128 */
        {{1, 8, 2, 1, 77, 256, BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90a",
         "bn=32,ctas=2", "the m64n256 wgmma needs 158 registers"},
        {{1, 8, 1, 1, 77, 256, E4M3, false, 256, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90a",
         "bn=32,ctas=2", "the m64n256 wgmma needs 158 registers"},
        {{1, 8, 2, 1, 77, 128, BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90", "",
         "needs sm_90a; target is sm_90"},
        {{1, 8, 2, 1, 77, 128, BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90a", "bm=16",
         "bm=16: impl=3's row block is the wgmma M"},
        {{1, 8, 2, 1, 77, 256, BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90a",
         "bn=128,ctas=2", "live registers per consumer thread"},
        {{1, 8, 2, 1, 77, 256, BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90a",
         "bn=32,stages=8", "bytes of shared memory"},
        {{1, 8, 2, 1, 77, 128, E4M3, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0}, "sm_90", "",
         "dtype e4m3: fp8 attention runs on sm_90a"},
        {{1, 8, 2, 1, 77, 128, BF16, false, 16, -1, false, false, 0, "", false, false, 2, 0, 0}, "sm_90a", "",
         "descale_q=2: descales are for dtype e4m3"},
        {{1, 8, 2, 1, 77, 128, E4M3, false, 16, -1, false, false, 0, "", false, false, 0, -1, 0}, "sm_90a", "",
         "descale_k=-1: must be a finite number > 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pt_err e = {0};
        int rc = check_of(&bad[i].c, bad[i].arch, bad[i].config, &e);
        cr_expect_neq(rc, PT_OK, "case %zu accepted", i);
        cr_expect(strstr(e.msg, bad[i].want) != NULL, "case %zu: '%s' does not say '%s'", i, e.msg, bad[i].want);
        cr_expect(strchr(e.msg, '\n') == NULL, "case %zu: more than one line: %s", i, e.msg);
    }
}

/* impl of the op's default config for a problem on an arch */
static int64_t default_impl(const fcase *c, const char *arch)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), PT_OK);
    pt_problem p = problem_of(c);
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

Test(attention_fa3_decode, the_sm_90a_default_is_the_wgmma_kernel_where_it_applies)
{
    fcase llama = {16, 32, 8, 1, 8192, 128, BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0};
    cr_expect_eq(default_impl(&llama, "sm_90a"), ATTN_FA3_SPLIT);
    cr_expect_eq(default_impl(&llama, "sm_90"), ATTN_SPLIT);
    cr_expect_eq(default_impl(&llama, "sm_80"), ATTN_SPLIT);
    fcase small_pages = llama;
    small_pages.page = 4; /* impl=3's cp.async gather (tests/test_attention_fa3_pages.c) */
    cr_expect_eq(default_impl(&small_pages, "sm_90a"), ATTN_FA3_SPLIT);
    fcase hd96 = llama; /* two 64-column boxes a row (tests/test_attention_fa3_pages.c) */
    hd96.d = 96;
    cr_expect_eq(default_impl(&hd96, "sm_90a"), ATTN_FA3_SPLIT);
}

/* ---- assembly: the Llama-3-8B decode space on sm_90a ----------------------- */

Test(attention_fa3_decode, llama3_8b_decode_space_assembles_for_sm_90a, .timeout = 1200)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    /* ptxas: nvJitLink drops setmaxnreg (C7504) and hides what ptxas says
     * of a warp-specialised kernel */
    if (pt_compiler_set_backend(comp, PT_BACKEND_PTXAS, &e)) {
        pt_compiler_close(comp);
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but no ptxas: %s", e.msg);
        cr_skip_test("no ptxas: %s", e.msg);
    }
    bool full = getenv("PTXTUNE_FULL_SPACE") && atoi(getenv("PTXTUNE_FULL_SPACE"));
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    /* bf16, then e4m3 (every eighth valid config: its converter warps
     * are the difference) */
    for (int di = 0; di < 2; di++) {
        fcase llama = {16, 32, 8, 1, 8192, 128, di ? E4M3 : BF16, false, 16, -1, false, false, 0, "", false, false, 0, 0, 0};
        int every = full ? 1 : di ? 8 : 4;
        pt_problem p = problem_of(&llama);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        double t0 = now();
        int valid = 0, built = 0;
        /* the kernel's text is one for every split count above 1: compile
         * splits 1 and 2 only; a sample of every fourth (all with the
         * environment variable) */
        for (int64_t i = 0; i < pt_space_size(&s); i++) {
            pt_config c;
            pt_space_config(&s, i, &c);
            pt_err ce = {0};
            int64_t sp = pt_config_get(&c, "splits", 1);
            if ((sp != 1 && sp != 2) || gen_attention_op.check(pp, &tg, &c, &ce))
                continue;
            if (valid++ % every)
                continue;
            char cfg[256];
            pt_config_str(&c, cfg, sizeof cfg);
            cr_expect_eq(pt_config_get(&c, "impl", 0), ATTN_FA3_SPLIT, "%s", cfg);
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
            if (built < 3)
                printf("  %-48s regs %3d smem %6zu\n", cfg, r.registers, l.smem);
            free(text);
            ptx_module_free(m);
            built++;
        }
        printf("Llama-3-8B decode (B16 Sk 8192 page 16 Hq 32 Hkv 8 d 128 %s) on sm_90a: %d of %d valid configs "
               "(splits 1 and 2: the text of every split count) through %s in %.1f s\n",
               di ? "e4m3" : "bf16", built, valid, pt_compiler_describe(comp), now() - t0);
        cr_expect_gt(built, 0);
        pt_arena_free(a);
    }
    pt_compiler_close(comp);
}

/* ---- assembly: head dims x pages x GQA x dtypes on sm_90a ------------------ */

/* ptxas sm_90a of the default and a seeded sample of the impl=3 configs of
 * every problem of the grid: head_dim 64, 96, 128, 256 x page_size 1, 16,
 * 64, 256 x heads_kv 8, 2, 1 of heads_q 8 (GQA 1, 4, 8 = MQA) x bf16,
 * e4m3 (Sq 1, Sk 1000, ragged seqused_k). Found: every head_dim 256
 * kernel (the default included) failed with C7602 "Insufficient
 * registers (152)" at its m64n256 P V wgmma: ptxas checks it against
 * .maxnreg, not setmaxnreg. Per commit every PTXTUNE_FA3_GRID_STRIDE-th
 * (default 5) problem some kernel takes (all 96 since e4m3 takes head
 * dims 64 / 96 and pages under 8 keys), its default and PTXTUNE_FA3_GRID_SAMPLE
 * (default 1) sampled configs (PTXTUNE_FULL_SPACE=1: every problem, every
 * valid config of splits 1 and 2). */
Test(attention_fa3_decode, head_dim_page_gqa_grid_assembles_for_sm_90a, .timeout = 1200)
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
    static const int64_t hds[] = {64, 96, 128, 256}, pages[] = {1, 16, 64, 256}, hkv[] = {8, 2, 1};
    static const pt_dtype dts[] = {BF16, E4M3};
    pt_problem probs[4 * 4 * 3 * 2];
    int n = 0;
    for (int h = 0; h < 4; h++)
        for (int pg = 0; pg < 4; pg++)
            for (int g = 0; g < 3; g++)
                for (int di = 0; di < 2; di++) {
                    fcase c = {2, 8, hkv[g], 1, 1000, hds[h], dts[di], false, pages[pg], -1, true, false, 0, "",
                               false, false, 0, 0, 0};
                    probs[n++] = problem_of(&c);
                }
    double t0 = now();
    const char *es = getenv("PTXTUNE_FA3_GRID_STRIDE"), *en = getenv("PTXTUNE_FA3_GRID_SAMPLE");
    int stride = es && atoi(es) > 0 ? atoi(es) : 5, sample = en && atoi(en) >= 0 ? atoi(en) : 1;
    fa3_sweep r = fa3_sweep_run(probs, n, stride, ATTN_FA3_SPLIT, sample, 0x5eed, comp);
    printf("fa3 decode grid (hd 64/96/128/256 x pages 1/16/64/256 x GQA 1/4/8 x bf16/e4m3) on sm_90a: %d problems "
           "(%d no kernel takes), %d configs, %d distinct texts through %s in %.1f s: %d failures, %d spills, "
           "%d C75xx/C76xx, %d local\n", r.problems, r.unsupported, r.candidates, r.texts, pt_compiler_describe(comp),
           now() - t0, r.failures, r.spills, r.codes, r.local);
    cr_expect_gt(r.compiled, 0);
    cr_expect_eq(r.failures + r.spills + r.codes + r.local, 0, "%d failures, %d spills, %d codes, %d local; first: %s",
                 r.failures, r.spills, r.codes, r.local, r.first);
    pt_compiler_close(comp);
}
