/* The sm_90a attention kernels where they used to fall back to mma.sync
 * (issue 16): paged K/V with pages under 64 keys and head dim 96.
 *
 *  - emulator grid: the prefill kernel (gen/attention_fa3.c, impl=2) with
 *    pages of 1, 2 and 4 keys (cp.async gather by the producer warpgroup,
 *    cp.async.mbarrier.arrive.noinc, fence.proxy.async before wgmma), 8, 16
 *    and 32 keys (a TMA box a page; pages past the sequence asked at
 *    num_pages), head dim 96 (two 64-column boxes, the second half past the
 *    row zero-filled; P V by wgmma N=96), with causal / window / softcap,
 *    GQA / MQA / packed GQA, varlen, seqused_k, bm 64..192, overlap and
 *    pingpong on and off; the decode kernel (gen/attention_fa3_decode.c,
 *    impl=3) at head dim 96 and with pages of 1, 2, 4 keys (its cp.async
 *    gather), splits, varlen + paged. Every detector on, the lazy / eager / random
 *    schedules rotating (the first cases under all three), the float64
 *    reference through tuner_verify, the shuffled block tables of the op
 *    (every entry checked in range by the verifier's input check);
 *  - adversarial inputs (NaN / inf in q, k, v) on a gathered and a hd96
 *    kernel;
 *  - the default-kernel grid: which config `--arch sm_90a` picks for hd 64
 *    / 96 / 128 / 256, masks, GQA / MQA, varlen, seqused_k, pages 1..256,
 *    bshd / bhsd, decode and prefill lengths; every problem must take fa3
 *    (impl=2 prefill, impl=3 decode) unless its fallback is in the
 *    documented list below (docs/attention.md);
 *  - ptxas sm_90a assembly of samples of the Llama-3-8B prefill space with
 *    pages of 16 keys, with pages of 1 key (gather) and at head dim 96, and
 *    of the Llama decode space with pages of 1 key: 0 spills, no local
 *    memory, no C75xx (every config with PTXTUNE_FULL_SPACE=1). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_emu_verify.h"
#include "gen/attention_combine.h"
#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/verify.h"
#include "test_util.h"
#include "attn_fa3_sweep.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct pcase {
    pt_dtype dt;
    int64_t B, Hq, Hkv, Sq, Sk, d;
    bool causal;
    int64_t wl, wr;
    double softcap;
    bool varlen, seqused, bhsd;
    int64_t page;
    const char *config;
} pcase;

static pt_problem problem_of(const pcase *c)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.dtype = c->dt;
    p.batch = c->B;
    p.heads_q = c->Hq;
    p.heads_kv = c->Hkv;
    p.seqlen_q = c->Sq;
    p.seqlen_k = c->Sk;
    p.head_dim = p.head_dim_v = c->d;
    p.causal = c->causal;
    p.window_left = c->wl;
    p.window_right = c->wr;
    p.window_left_given = p.window_right_given = true;
    p.softcap = c->softcap;
    p.varlen = c->varlen;
    p.seqused_k = c->seqused;
    p.return_lse = true;
    p.layout = c->bhsd ? "bhsd" : "bshd";
    p.page_size = c->page;
    return p;
}

static void describe(const pcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld d%lld%s wl%lld wr%lld softcap%g%s%s%s page%lld [%s]",
             pt_dtype_get(c->dt)->name, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Sk, (long long)c->d, c->causal ? " causal" : "", (long long)c->wl, (long long)c->wr,
             c->softcap, c->varlen ? " varlen" : "", c->seqused ? " seqused" : "", c->bhsd ? " bhsd" : "",
             (long long)c->page, c->config);
}

static const char *const sched_names[] = {"lazy", "eager", "random"};

/* The sm_90a default config of the problem with c->config over it; the
 * kernel must be fa3's (impl=2 prefill, impl=3 decode). */
static int config_of(const pt_op *op, const pt_prepared *pp, const pt_target *tg, const char *config, pt_config *cf,
                     pt_err *e)
{
    pt_space s;
    op->space(pp, tg, &s);
    op->defaults(pp, tg, cf);
    int rc = pt_config_parse(&s, config, cf, e);
    int64_t want = attn_decode_kind(pp) ? ATTN_FA3_SPLIT : ATTN_FA3, impl = pt_config_get(cf, "impl", -1);
    if (!rc && impl != want)
        rc = pt_errf(e, PT_EINVAL, "not the fa3 kernel (impl=%lld, want %lld)", (long long)impl, (long long)want);
    return rc;
}

/* emit -> print -> parse -> print back identically -> emulate (sm_90a,
 * every detector) -> tuner_verify against the float64 reference. text:
 * the PTX kept when not NULL (the caller frees it). */
static int run_case(const pt_op *op, const pcase *c, emu_sched sched, uint64_t seed, double *max_err, char **keep,
                    pt_err *e)
{
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, e), PT_OK);
    pt_problem p = problem_of(c);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = NULL;
    pt_config cf;
    *max_err = 0;
    if (keep)
        *keep = NULL;
    int rc = op->prepare(a, &p, &tg, &pp, e);
    if (!rc)
        rc = config_of(op, pp, &tg, c->config, &cf, e);
    if (!rc)
        rc = attn_emu_verify(op, pp, &tg, &cf, sched, seed, 2, max_err, NULL, keep, e);
    pt_arena_free(a);
    return rc;
}

#define BF PT_BF16
#define F16 PT_F16
/* dt B Hq Hkv Sq Sk d causal wl wr softcap varlen seqused bhsd page config */
static const pcase grid[] = {
    /* gathered pages (1, 2, 4 keys): cp.async into the swizzled ring */
    {BF, 2, 4, 2, 77, 129, 64, true, -1, -1, 0, false, false, false, 1, "bm=128,bn=64"},
    {F16, 2, 4, 1, 40, 77, 128, false, -1, -1, 0, false, true, false, 2, "bm=64,bn=32,pingpong=0"},
    {BF, 3, 4, 4, 77, 129, 64, false, 20, 3, 0, true, false, false, 4, "bm=128,bn=128,stages=3"},
    {F16, 1, 8, 2, 33, 200, 128, true, -1, -1, 30, false, false, false, 1, "bm=64,bn=64,overlap=0,pingpong=0"},
    {BF, 1, 2, 1, 20, 77, 256, true, -1, -1, 0, false, false, false, 4, "bm=64,bn=48,pingpong=0"},
    {F16, 2, 8, 2, 33, 129, 64, false, -1, -1, 0, false, false, false, 2, "bm=128,bn=64,pack_gqa=1"},
    {BF, 1, 6, 1, 129, 129, 96, true, -1, -1, 0, false, false, false, 1, "bm=192,bn=64"},
    /* a TMA box a page (8, 16, 32 keys): bn / page boxes a sub-tile, pages past the keys at num_pages */
    {BF, 2, 4, 2, 77, 300, 64, true, -1, -1, 0, false, false, false, 16, "bm=128,bn=128"},
    {F16, 3, 4, 1, 77, 129, 128, false, -1, -1, 0, false, true, false, 8, "bm=128,bn=64,overlap=0"},
    {BF, 3, 4, 4, 77, 129, 64, false, 30, 2, 0, true, false, false, 32, "bm=64,bn=128,pingpong=0"},
    {F16, 1, 4, 1, 40, 129, 256, true, -1, -1, 0, false, false, false, 16, "bm=64,bn=80,pingpong=0"},
    {BF, 2, 8, 2, 17, 77, 128, true, -1, -1, 20, false, false, false, 16, "bm=64,bn=64,pingpong=0,pack_gqa=1"},
    {F16, 1, 4, 2, 129, 129, 96, false, 16, 16, 0, false, false, false, 32, "bm=128,bn=64"},
    /* head dim 96 (not paged): causal, window, softcap, GQA, varlen, seqused, bhsd, packed */
    {BF, 2, 4, 4, 77, 129, 96, false, -1, -1, 0, false, false, false, 0, "bm=128,bn=128"},
    {F16, 1, 8, 2, 129, 129, 96, true, -1, -1, 0, false, false, false, 0, "bm=64,bn=64,stages=3,pingpong=0"},
    {BF, 3, 4, 1, 77, 129, 96, false, 20, -1, 0, true, true, false, 0, "bm=128,bn=64,overlap=0"},
    {F16, 1, 4, 4, 129, 77, 96, false, -1, -1, 30, false, false, true, 0, "bm=192,bn=96"},
    {BF, 2, 8, 2, 19, 129, 96, true, -1, -1, 0, false, false, false, 0, "bm=64,bn=64,pingpong=0,pack_gqa=1"},
    {F16, 2, 4, 1, 77, 1, 96, true, -1, -1, 0, false, false, false, 0, "bm=128,bn=16"},
    /* the defaults (no config): Llama-like GQA paged 16, hd96, gathered page 1 */
    {BF, 1, 8, 2, 129, 300, 128, true, -1, -1, 0, false, false, false, 16, ""},
    {BF, 1, 8, 2, 129, 129, 96, true, -1, -1, 0, false, false, false, 0, ""},
    {F16, 1, 4, 1, 77, 129, 128, true, -1, -1, 0, false, false, false, 1, ""},
    /* decode (Sq <= 16, impl=3) at head dim 96: not paged, paged 16 with splits, bhsd window */
    {BF, 2, 8, 2, 1, 300, 96, false, -1, -1, 0, false, false, false, 0, ""},
    {F16, 1, 8, 1, 4, 129, 96, true, -1, -1, 0, false, true, false, 16, "splits=2"},
    {BF, 2, 4, 4, 1, 77, 96, false, 20, -1, 30, false, false, true, 0, "bn=128,stages=2"},
    /* decode with gathered pages (1, 2, 4 keys): GQA, splits, varlen + paged, hd 64 / 96 / 128 / 256 */
    {BF, 2, 8, 2, 1, 300, 128, false, -1, -1, 0, false, false, false, 1, ""},
    {F16, 1, 8, 1, 4, 129, 96, true, -1, -1, 0, false, true, false, 2, "splits=3"},
    {BF, 3, 4, 2, 2, 77, 64, false, 20, -1, 0, true, false, false, 4, "bn=128"},
    {F16, 1, 4, 4, 1, 129, 256, false, -1, -1, 30, false, false, false, 1, "bn=32,splits=2"},
    /* decode, varlen without pages (TMA over the packed rows: the next sequence's keys masked, V zeroed) */
    {BF, 3, 8, 2, 1, 129, 128, false, -1, -1, 0, true, false, false, 0, ""},
    {F16, 4, 4, 1, 4, 77, 64, true, -1, -1, 0, true, false, false, 0, "bn=32,splits=2"},
    {BF, 2, 8, 2, 2, 200, 96, false, 30, -1, 0, true, false, false, 0, "bn=64"},
};

Test(attention_fa3_pages, grid_against_float64_reference_every_schedule, .timeout = 600)
{
    int ran = 0, failed = 0, per[2] = {0, 0};
    double worst[2] = {0, 0};
    char first[2048] = "";
    double t0 = now();
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++)
        for (int sch = 0; sch < 3; sch++) {
            if (i != 0 && i != 7 && i != 13 && i != 25 && sch != (int)(i % 3))
                continue;
            const pcase *c = &grid[i];
            double err;
            pt_err e = {0};
            uint64_t seed = (uint64_t)(c->Sk * 131 + c->Hq * 7 + c->d + (int64_t)i);
            int rc = run_case(&gen_attention_op, c, (emu_sched)sch, seed, &err, NULL, &e);
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
    printf("attention prefill (impl=2) small pages / hd96: %d cases (%d f16, %d bf16; %zu shapes, 4 under all "
           "three schedules), %d failed; worst error f16 %.3g, bf16 %.3g; %.1f s\n", ran, per[0], per[1],
           sizeof grid / sizeof *grid, failed, worst[0], worst[1], now() - t0);
    fflush(stdout);
    cr_assert_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- adversarial inputs (NaN, +-inf, 2^14 in q, k or v) ---- */
static const pcase adv_shapes[] = {
    {BF, 2, 4, 1, 77, 129, 64, true, -1, -1, 0, false, false, false, 2, "bm=64,bn=32,pingpong=0"},
    {F16, 1, 8, 2, 33, 77, 96, false, 20, 5, 0, false, false, false, 0, "bm=128,bn=64"},
    {BF, 3, 4, 2, 40, 77, 64, true, -1, -1, 0, true, true, false, 16, "bm=64,bn=64,pingpong=0"},
    {F16, 2, 4, 1, 77, 300, 96, true, -1, -1, 0, false, true, false, 1, "bm=128,bn=64"},
};

Test(attention_fa3_pages, adversarial_inputs_match_the_reference, .timeout = 600)
{
    int ran = 0, failed = 0;
    char first[2048] = "";
    double t0 = now();
    int ns = (int)(sizeof adv_shapes / sizeof *adv_shapes);
    for (int kind = 1; kind < ATTN_ADV_N; kind++) {
        const pcase *c = &adv_shapes[kind % ns];
        const pt_op *op = gen_attention_adversarial_op((attn_adv)kind);
        cr_assert(op);
        double err;
        pt_err e = {0};
        emu_sched sch = (emu_sched)(kind % 3);
        int rc = run_case(op, c, sch, (uint64_t)(91 + 13 * kind), &err, NULL, &e);
        ran++;
        if (rc) {
            char d[512];
            describe(c, d, sizeof d);
            failed++;
            if (!first[0])
                snprintf(first, sizeof first, "kind %d: %.500s: %.1000s", kind, d, e.msg);
            printf("FAILED kind %d: %s (%s): %s\n", kind, d, sched_names[sch], e.msg);
        }
    }
    /* NaN / inf in k and v of the decode kernel's varlen rows (a box reads the next sequence's) */
    static const pcase dv = {BF, 3, 8, 2, 1, 129, 128, false, -1, -1, 0, true, false, false, 0, ""};
    static const int dkinds[] = {ATTN_ADV_K_NAN, ATTN_ADV_V_NAN, ATTN_ADV_V_POSINF};
    for (size_t i = 0; i < sizeof dkinds / sizeof *dkinds; i++) {
        double err;
        pt_err e = {0};
        int rc = run_case(gen_attention_adversarial_op((attn_adv)dkinds[i]), &dv, (emu_sched)(i % 3),
                          (uint64_t)(7 + i), &err, NULL, &e);
        ran++;
        if (rc) {
            failed++;
            if (!first[0])
                snprintf(first, sizeof first, "decode varlen kind %d: %.1000s", dkinds[i], e.msg);
            printf("FAILED decode varlen kind %d: %s\n", dkinds[i], e.msg);
        }
    }
    printf("attention fa3 small pages / hd96 adversarial inputs: %d cases, %d failed, %.1f s\n", ran, failed,
           now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- structure: the gather and page-box kernels ---- */

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *s = strstr(text, what); s; s = strstr(s + 1, what))
        n++;
    return n;
}

static char *emit_text(const pcase *c, pt_launch *l)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_problem p = problem_of(c);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_config cf;
    cr_assert_eq(config_of(&gen_attention_op, pp, &tg, c->config, &cf, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(gen_attention_op.check(pp, &tg, &cf, &e), PT_OK, "%s", e.msg);
    ptx_module *m;
    cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &cf, &m, l, &e), PT_OK, "%s", e.msg);
    char *text = ptx_print(m);
    ptx_module_free(m);
    pt_arena_free(a);
    return text;
}

Test(attention_fa3_pages, structure_of_the_gather_and_page_box_kernels)
{
    pt_launch l;
    /* page 1, hd128, bn 128: 16 chunks a row, 8 rows a pass, 16 passes for K and for V */
    pcase g1 = {BF, 1, 32, 8, 4096, 4096, 128, true, -1, -1, 0, false, false, false, 1, "bn=128"};
    char *t = emit_text(&g1, &l);
    cr_expect_eq(count(t, "cp.async.cg.shared.global"), 2, "K and V: one copy a pass of a loop (bn / 8 passes)");
    cr_expect_eq(count(t, "cp.async.mbarrier.arrive.noinc.shared::cta.b64"), 2);
    cr_expect_eq(count(t, "cp.async.bulk.tensor"), 2, "Q only by TMA (two 64-column boxes)");
    cr_expect_geq(count(t, "fence.proxy.async.shared::cta"), 3, "after each K and V wait (and the V zeroing)");
    int full128 = 0;
    for (const char *s = strstr(t, "mbarrier.init"); s; s = strstr(s + 1, "mbarrier.init")) {
        const char *eol = strchr(s, ';');
        full128 += eol && eol - s > 5 && strncmp(eol - 5, ", 128", 5) == 0;
    }
    cr_expect_eq(full128, 2 * 2, "K's and V's full barriers (2 stages) count the 128 producer threads");
    cr_expect_eq(l.ntmaps, 1, "the Q map; K and V by pointer");
    free(t);
    /* page 16, bn 128: a loop over the block's 8 pages, a box per 64-column sub-tile (K and V, hd128:
     * 2 x 2) + Q's 2 */
    pcase p16 = g1;
    p16.page = 16;
    t = emit_text(&p16, &l);
    cr_expect_eq(count(t, "cp.async.bulk.tensor.4d"), 2 + 2 * 2);
    cr_expect(strstr(t, "setp.lt.s32 %p") != NULL);
    cr_expect_eq(count(t, "cp.async.cg"), 0);
    cr_expect_eq(l.ntmaps, 3);
    free(t);
    /* hd96: Q, K, V two boxes each, S by 6 k16 steps, P V by wgmma N=96 */
    pcase h96 = g1;
    h96.page = 0;
    h96.d = 96;
    t = emit_text(&h96, &l);
    cr_expect_eq(count(t, "cp.async.bulk.tensor.4d"), 2 + 2 + 2);
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), 2 * 6, "first block + loop");
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16"), 2 * 8, "loop + tail, bn / 16 each");
    free(t);
}

/* ---- the default kernel of every attention problem on sm_90a ---- */

/* Fallbacks named in docs/attention.md ("sm_90a defaults"): a problem the
 * fa3 kernels do not take yet, with the reason; NULL: it must be fa3. */
static const char *documented_fallback(const pt_problem *p, bool decode)
{
    (void)p;
    (void)decode;
    return NULL;
}

Test(attention_fa3_pages, every_sm_90a_default_is_fa3_or_a_documented_fallback, .timeout = 120)
{
    static const int64_t hds[] = {64, 96, 128, 256}, pages[] = {0, 1, 16, 32, 64, 128, 256};
    static const int64_t sqs[] = {1, 8, 77, 4096};
    static const int64_t heads[][2] = {{8, 8}, {32, 8}, {8, 1}};
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    int total = 0, fa3 = 0, documented = 0, bad = 0, invalid = 0;
    char first[1024] = "";
    typedef struct seen_why {
        const char *why;
        int n;
    } seen_why;
    seen_why seen[8];
    int nseen = 0;
    double t0 = now();
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
        for (int mask = 0; mask < 4; mask++)
            for (size_t gi = 0; gi < sizeof heads / sizeof *heads; gi++)
                for (int kv = 0; kv < 2 + (int)(sizeof pages / sizeof *pages); kv++)
                    for (int bhsd = 0; bhsd < 2; bhsd++)
                        for (size_t si = 0; si < sizeof sqs / sizeof *sqs; si++) {
                            /* kv: 0 plain, 1 varlen, 2 seqused_k, 3.. pages[kv - 2] (page 0 skipped) */
                            int64_t page = kv >= 3 ? pages[kv - 2] : 0;
                            pcase c = {BF, 2, heads[gi][0], heads[gi][1], sqs[si], sqs[si] > 77 ? 4096 : 300,
                                       hds[hi], mask == 1, mask == 2 ? 64 : -1, mask == 2 ? 0 : -1,
                                       mask == 3 ? 30.0 : 0.0, kv == 1, kv == 2, bhsd != 0, page, ""};
                            pt_problem p = problem_of(&c);
                            pt_arena *a = pt_arena_new();
                            pt_prepared *pp;
                            pt_err pe = {0};
                            if (gen_attention_op.prepare(a, &p, &tg, &pp, &pe)) { /* e.g. paged bhsd */
                                invalid++;
                                pt_arena_free(a);
                                continue;
                            }
                            total++;
                            pt_config cf;
                            gen_attention_op.defaults(pp, &tg, &cf);
                            bool decode = attn_decode_kind(pp);
                            int64_t want = decode ? ATTN_FA3_SPLIT : ATTN_FA3, impl = pt_config_get(&cf, "impl", -1);
                            int crc = gen_attention_op.check(pp, &tg, &cf, &pe);
                            const char *why = documented_fallback(&p, decode);
                            char d[512];
                            describe(&c, d, sizeof d);
                            if (crc) {
                                bad++;
                                if (!first[0])
                                    snprintf(first, sizeof first, "%s: default refused: %.400s", d, pe.msg);
                            } else if (impl == want) {
                                fa3++;
                                if (why) {
                                    bad++; /* a documented fallback that no longer is one: update the list */
                                    if (!first[0])
                                        snprintf(first, sizeof first, "%s: takes impl=%lld, listed as '%s'", d,
                                                 (long long)impl, why);
                                }
                            } else if (why) {
                                documented++;
                                int k = 0;
                                while (k < nseen && strcmp(seen[k].why, why))
                                    k++;
                                if (k == nseen && nseen < 8)
                                    seen[nseen++] = (seen_why){why, 0};
                                if (k < nseen)
                                    seen[k].n++;
                            } else {
                                bad++;
                                fprintf(stderr, "NOT FA3 %s: impl=%lld\n", d, (long long)impl);
                                if (!first[0])
                                    snprintf(first, sizeof first, "%s: impl=%lld, want %lld", d, (long long)impl,
                                             (long long)want);
                            }
                            pt_arena_free(a);
                        }
    printf("sm_90a defaults: %d problems (%d invalid combinations skipped): %d fa3 (impl=2 prefill, impl=3 decode), "
           "%d documented fallbacks, %d wrong; %.2f s\n", total, invalid, fa3, documented, bad, now() - t0);
    for (int k = 0; k < nseen; k++)
        printf("  %4d x %s\n", seen[k].n, seen[k].why);
    fflush(stdout);
    cr_expect_eq(bad, 0, "%d problems; first: %s", bad, first);
}

/* ---- assembly: Llama-3-8B-shaped prefill spaces on sm_90a ---- */

Test(attention_fa3_pages, llama3_8b_paged_and_hd96_spaces_assemble_for_sm_90a, .timeout = 1200)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    if (pt_compiler_set_backend(comp, PT_BACKEND_PTXAS, &e)) { /* nvJitLink drops setmaxnreg (C7504) */
        pt_compiler_close(comp);
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but no ptxas: %s", e.msg);
        cr_skip_test("no ptxas: %s", e.msg);
    }
    bool full = getenv("PTXTUNE_FULL_SPACE") && atoi(getenv("PTXTUNE_FULL_SPACE"));
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    /* Sq = Sk = 4096 causal, Hq 32, Hkv 8, bf16: d 128 pages of 16 (TMA box a page), d 128 pages of 1
     * (cp.async gather), d 96 not paged; the default and every k-th valid config */
    static const struct {
        int64_t d, page, sq;
        int every;
        bool varlen;
    } sp[] = {{128, 16, 4096, 37, false}, {128, 1, 4096, 37, false}, {96, 0, 4096, 51, false},
              {128, 1, 1, 153, false}, {128, 0, 1, 153, true}};
    /* PTXTUNE_FA3_PAGES_ONLY=0,2: only those spaces (a full run of some) */
    const char *only = getenv("PTXTUNE_FA3_PAGES_ONLY");
    for (size_t w = 0; w < sizeof sp / sizeof *sp; w++) {
        char key[8];
        snprintf(key, sizeof key, "%zu", w);
        if (only && !strstr(only, key))
            continue;
        /* the last two: the Llama decode problem (B 16, Sq 1, Sk 8192) with pages of 1 key (impl=3's
         * gather) and varlen without pages (boxes over the packed rows) */
        bool dec = sp[w].sq == 1;
        pcase c = {BF, dec ? 16 : 1, 32, 8, sp[w].sq, dec ? 8192 : 4096, sp[w].d, !dec, -1, -1, 0, sp[w].varlen,
                   false, false, sp[w].page, ""};
        pt_problem p = problem_of(&c);
        p.return_lse = false;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        pt_config dc;
        gen_attention_op.defaults(pp, &tg, &dc);
        double t0 = now();
        int valid = 0, built = 0;
        for (int64_t i = -1; i < pt_space_size(&s); i++) {
            pt_config cf = dc;
            pt_err ce = {0};
            if (i >= 0) {
                pt_space_config(&s, i, &cf);
                if (gen_attention_op.check(pp, &tg, &cf, &ce))
                    continue;
                if (valid++ % (full ? 1 : sp[w].every))
                    continue;
            }
            char cfg[256];
            pt_config_str(&cf, cfg, sizeof cfg);
            cr_expect_eq(pt_config_get(&cf, "impl", 0), dec ? ATTN_FA3_SPLIT : ATTN_FA3, "%s", cfg);
            ptx_module *m = NULL;
            pt_launch l;
            cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &cf, &m, &l, &ce), PT_OK, "%s: %s", cfg, ce.msg);
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
            printf("  d%-3lld page %-3lld %-58s regs %3d smem %6zu spills %d/%d\n", (long long)sp[w].d,
                   (long long)sp[w].page, cfg, r.registers, l.smem, r.spill_stores, r.spill_loads);
            free(text);
            ptx_module_free(m);
            built++;
        }
        printf("Llama-3-8B %s d %lld page_size %lld (%s, Hq 32, Hkv 8, bf16) on sm_90a: the default + %d of %d "
               "valid configs through %s in %.1f s\n", dec ? "decode" : "prefill", (long long)sp[w].d,
               (long long)sp[w].page, !dec ? "Sq=Sk=4096 causal" : sp[w].varlen ? "B 16, Sq 1, Sk 8192, varlen"
               : "B 16, Sq 1, Sk 8192", built - 1, valid,
               pt_compiler_describe(comp), now() - t0);
        cr_expect_geq(built, 2);
        pt_arena_free(a);
    }
    pt_compiler_close(comp);
}

/* ---- assembly: the prefill kernel over head dims x dtypes x pages ---- */

/* ptxas sm_90a of the default and a seeded sample of the impl=2 configs of
 * every problem of the grid: head_dim 64, 96, 128, 256 x bf16, f16, e4m3
 * x page_size 0 (not paged), 1 (gather), 16, 64, 256 (B 2, Hq 8, Hkv 2,
 * Sq 300, Sk 1000, causal). Per commit every PTXTUNE_FA3_GRID_STRIDE-th
 * (default 5) problem some kernel takes, its default and
 * PTXTUNE_FA3_GRID_SAMPLE (default 1) sampled configs (PTXTUNE_FULL_SPACE=1:
 * every problem, every valid config). */
Test(attention_fa3_pages, prefill_head_dim_dtype_page_grid_assembles_for_sm_90a, .timeout = 1200)
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
    static const int64_t hds[] = {64, 96, 128, 256}, pages[] = {0, 1, 16, 64, 256};
    static const pt_dtype dts[] = {PT_BF16, PT_F16, PT_E4M3};
    pt_problem probs[4 * 3 * 5];
    int n = 0;
    for (int h = 0; h < 4; h++)
        for (int di = 0; di < 3; di++)
            for (int pg = 0; pg < 5; pg++) {
                pcase c = {dts[di], 2, 8, 2, 300, 1000, hds[h], true, -1, -1, 0, false, false, false, pages[pg], ""};
                probs[n++] = problem_of(&c);
            }
    const char *es = getenv("PTXTUNE_FA3_GRID_STRIDE"), *en = getenv("PTXTUNE_FA3_GRID_SAMPLE");
    int stride = es && atoi(es) > 0 ? atoi(es) : 5, sample = en && atoi(en) >= 0 ? atoi(en) : 1;
    double t0 = now();
    fa3_sweep r = fa3_sweep_run(probs, n, stride, ATTN_FA3, sample, 0xfa3, comp);
    printf("fa3 prefill grid (hd 64/96/128/256 x bf16/f16/e4m3 x pages 0/1/16/64/256) on sm_90a: %d problems "
           "(%d no kernel takes), %d configs, %d distinct texts through %s in %.1f s: %d failures, %d spills, "
           "%d C75xx/C76xx, %d local\n", r.problems, r.unsupported, r.candidates, r.texts, pt_compiler_describe(comp),
           now() - t0, r.failures, r.spills, r.codes, r.local);
    cr_expect_gt(r.compiled, 0);
    cr_expect_eq(r.failures + r.spills + r.codes + r.local, 0, "%d failures, %d spills, %d codes, %d local; first: %s",
                 r.failures, r.spills, r.codes, r.local, r.first);
    pt_compiler_close(comp);
}
