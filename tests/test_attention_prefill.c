/* The FA2-style attention prefill kernel (impl=fa2, gen/attention_prefill.c):
 *   - the emulator grid of issue 11's acceptance as far as prefill goes:
 *     every case through the verifier (tuner/emu_check.h: emit -> print ->
 *     parse -> emulate with every detector on, outputs poisoned) against the
 *     op's float64 reference: head dims 64, 128, 256; causal, non-causal,
 *     sliding window, softcap; Sq < Sk, Sq = Sk, Sq > Sk; GQA 1:1, 4:1, MQA;
 *     odd lengths 1, 7, 77, 129; varlen batches with a length-1 sequence,
 *     seqused_k; f16 and bf16; bshd and bhsd; LSE; more than 8 configs (every
 *     bm, several bn, 4 and 8 warps, Q in registers, 1 and 2 K/V stages, both
 *     rasters), on the verifier's default inputs (two more on positive ones).
 *     Prints the case count and the worst error per dtype.
 *   - the structure of the emitted kernel (mma per block, ldmatrix, mask
 *     only behind a branch, sequence lengths as parameters) and check();
 *   - a fixed sample of the space of a Llama-3-8B prefill (Sq = Sk = 4096,
 *     Hq 32, Hkv 8, d 128, causal, bf16) for sm_80/86/89/90, and of the same
 *     heads at Sq = 77 (packed GQA), assembles with 0 spills and no local
 *     memory (skipped without a toolkit; tests/test_attention_space.c
 *     assembles the whole spaces);
 *   - adversarial inputs: NaN, +-inf and huge values in q, k, v. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "test_space.h"
#include "test_util.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct acase {
    pt_dtype dt;
    int64_t b, hq, hkv, sq, sk, d;
    bool causal;
    int64_t wl, wr;
    double softcap, scale;
    bool varlen, seqused, lse, bhsd;
    const char *arch, *config;
    int64_t page; /* paged K/V: page_size (num_pages: the op's default) */
} acase;

static pt_problem problem(const acase *c)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.dtype = c->dt;
    p.batch = c->b;
    p.heads_q = c->hq;
    p.heads_kv = c->hkv;
    p.seqlen_q = c->sq;
    p.seqlen_k = c->sk;
    p.head_dim = c->d;
    p.head_dim_v = c->d;
    p.causal = c->causal;
    p.window_left = c->wl;
    p.window_right = c->wr;
    p.window_left_given = p.window_right_given = true;
    p.softcap = c->softcap;
    p.softmax_scale = c->scale;
    p.varlen = c->varlen;
    p.seqused_k = c->seqused;
    p.return_lse = c->lse;
    p.layout = c->bhsd ? "bhsd" : "bshd";
    p.page_size = c->page;
    return p;
}

/* prepare, the prefill space's defaults overridden by c->config */
static int prepare(pt_arena *a, const acase *ac, pt_target *tg, const pt_prepared **pp, pt_config *c, pt_err *e)
{
    if (pt_target_parse(ac->arch, tg, e))
        return PT_EINVAL;
    pt_problem p = problem(ac);
    pt_prepared *x;
    int rc = gen_attention_op.prepare(a, &p, tg, &x, e);
    if (rc)
        return rc;
    pt_space s;
    attn_prefill_space(x, tg, &s);
    attn_prefill_defaults(x, tg, c);
    *pp = x;
    return pt_config_parse(&s, ac->config, c, e);
}

static void describe(const acase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s %s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld d%lld%s wl%lld wr%lld softcap %g scale %g%s%s%s%s [%s]",
             c->page ? "paged " : "", c->arch, pt_dtype_get(c->dt)->name, (long long)c->b, (long long)c->hq, (long long)c->hkv,
             (long long)c->sq, (long long)c->sk, (long long)c->d, c->causal ? " causal" : "", (long long)c->wl,
             (long long)c->wr, c->softcap, c->scale, c->varlen ? " varlen" : "", c->seqused ? " seqused_k" : "",
             c->lse ? " lse" : "", c->bhsd ? " bhsd" : "", c->config);
}

#define BF PT_BF16
#define F16 PT_F16
/* dt b hq hkv sq sk d causal wl wr softcap scale varlen seqused lse bhsd arch config */
static const acase grid[] = {
    /* non-causal, hd64, every bm / warps, Sq < Sk, Sq = Sk, Sq > Sk */
    {BF, 2, 4, 4, 77, 129, 64, false, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "", 0},
    {F16, 1, 4, 1, 129, 129, 64, false, -1, -1, 0, 0, false, false, true, false, "sm_86", "bm=64,warps=4,bn=32", 0},
    {BF, 1, 8, 2, 129, 77, 64, false, -1, -1, 0, 1.0, false, false, false, false, "sm_89", "bm=128,bn=64,warps=8", 0},
    {F16, 2, 2, 2, 7, 129, 64, false, -1, -1, 0, 0, false, false, true, true, "sm_90", "bm=64,warps=4,bn=48,kv_stages=2", 0},
    /* causal (bottom-right), rows without a visible key when Sq > Sk */
    {BF, 1, 4, 1, 77, 129, 64, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "bm=64,warps=4,bn=64", 0},
    {F16, 2, 4, 4, 129, 129, 64, true, -1, -1, 0, 0, false, false, true, false, "sm_80", "bn=32,kv_stages=2,raster=1", 0},
    {BF, 1, 4, 1, 129, 7, 64, true, -1, -1, 0, 1.0, false, false, true, false, "sm_86", "bm=64,warps=4,bn=112", 0},
    {F16, 1, 8, 2, 1, 77, 64, true, -1, -1, 0, 0, false, false, true, false, "sm_89", "bm=64,warps=4,bn=96", 0},
    /* hd128 */
    {BF, 1, 4, 1, 129, 129, 128, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "bm=64,warps=4,bn=64,q_in_regs=1", 0},
    {F16, 1, 8, 2, 77, 129, 128, false, -1, -1, 0, 0, false, false, false, false, "sm_90", "bm=128,bn=32,warps=8,q_in_regs=1", 0},
    {BF, 2, 4, 4, 77, 77, 128, false, 16, 3, 0, 1.0, false, false, true, false, "sm_86", "bm=64,warps=4,bn=32,kv_stages=2", 0},
    {F16, 1, 4, 1, 129, 129, 128, false, -1, -1, 30, 0, false, false, true, true, "sm_89", "bm=64,warps=4,bn=64", 0},
    /* hd96 (192-byte rows: 12 16-byte pieces a row, not a power of two), with a
     * window and seqused_k = 1 (the case that read shared memory nobody wrote) */
    {BF, 2, 2, 1, 33, 77, 96, false, 7, 3, 0, 0, false, true, true, false, "sm_80", "", 0},
    {F16, 1, 4, 2, 77, 129, 96, true, -1, -1, 0, 1.0, false, false, true, false, "sm_86", "bm=128,bn=32,warps=8", 0},
    /* hd256 */
    {BF, 1, 2, 1, 77, 129, 256, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "bm=128,bn=32,warps=8", 0},
    {F16, 1, 4, 4, 129, 77, 256, false, -1, -1, 0, 0, false, false, false, false, "sm_90", "bm=64,bn=64,warps=4", 0},
    /* sliding windows: left only, both, with causal */
    {BF, 1, 4, 2, 129, 129, 64, false, 31, -1, 0, 1.0, false, false, true, false, "sm_80", "bm=64,warps=4,bn=32", 0},
    {F16, 1, 4, 1, 77, 129, 64, true, 40, -1, 0, 0, false, false, true, false, "sm_86", "bm=64,warps=4,bn=16", 0},
    {BF, 1, 4, 4, 129, 77, 64, false, 5, 9, 0, 1.0, false, false, true, false, "sm_89", "bm=128,bn=48", 0},
    /* softcap with causal and window */
    {BF, 1, 4, 1, 77, 129, 64, true, -1, -1, 50, 0, false, false, true, false, "sm_90", "bm=64,warps=4,bn=32", 0},
    {F16, 1, 4, 2, 129, 129, 128, false, 20, 20, 15, 1.0, false, false, true, false, "sm_80", "bm=64,warps=4,bn=32", 0},
    /* varlen (a length-1 sequence is among the lengths the op draws), seqused_k (the op packs GQA
     * for varlen by default: one case unpacked) */
    {BF, 3, 4, 1, 77, 129, 64, false, -1, -1, 0, 0, true, false, true, false, "sm_80", "bm=64,warps=4,bn=32", 0},
    {F16, 4, 4, 4, 129, 77, 64, true, -1, -1, 0, 1.0, true, false, true, false, "sm_86", "bm=64,warps=4,bn=64", 0},
    {BF, 3, 8, 2, 77, 129, 128, true, -1, -1, 0, 0, false, true, true, false, "sm_89", "bm=64,warps=4,bn=32", 0},
    {F16, 3, 4, 1, 129, 129, 64, false, 20, -1, 0, 1.0, true, true, true, false, "sm_90", "bm=128,bn=32,kv_stages=2,pack_gqa=0", 0},
    /* paged K/V (block tables: shuffled distinct pages), pages smaller than,
     * equal to and larger than a K/V tile, one-row pages, with varlen and
     * seqused_k (impl=fa2 named: paged problems default to the decode kernel) */
    {BF, 2, 4, 1, 77, 129, 64, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "impl=0,bm=64,warps=4,bn=64", 16},
    {F16, 3, 8, 2, 129, 77, 128, false, -1, -1, 0, 0, false, true, true, false, "sm_86", "impl=0,bm=64,warps=4,bn=32", 64},
    {BF, 3, 4, 4, 77, 129, 64, false, 30, 2, 0, 1.0, true, false, true, false, "sm_89", "impl=0,bm=128,warps=8,bn=32", 32},
    {F16, 2, 4, 2, 33, 40, 64, true, -1, -1, 0, 1.0, true, true, true, false, "sm_90", "impl=0,bm=64,warps=4,bn=16", 1},
    /* pack_gqa: the query heads of a kv head share a tile (rows are
     * (position, head) pairs), Sq = 1, 7, 77, GQA 4:1 and MQA (a group of 6:
     * not a power of two), causal and windows, varlen, paged, bhsd, hd96 and
     * hd128, softcap; every mask uses each row's own position */
    {BF, 2, 8, 2, 1, 77, 64, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "impl=0,pack_gqa=1,bm=64,warps=4,bn=32", 0},
    {F16, 1, 6, 1, 1, 129, 64, false, 20, -1, 0, 0, false, false, true, false, "sm_86", "impl=0,pack_gqa=1,bm=64,warps=4,bn=64", 0},
    {BF, 2, 8, 2, 7, 77, 128, true, -1, -1, 0, 1.0, false, false, true, false, "sm_89", "impl=0,pack_gqa=1,bm=128,warps=8,bn=32", 0},
    {F16, 1, 6, 1, 7, 40, 64, false, 5, 2, 0, 0, false, false, true, true, "sm_90", "impl=0,pack_gqa=1,bm=64,warps=4,bn=16,kv_stages=2", 0},
    {BF, 1, 8, 2, 77, 129, 64, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "pack_gqa=1,bm=128,warps=4,bn=64,raster=1", 0},
    {F16, 1, 6, 1, 77, 77, 128, false, 16, 3, 0, 0, false, false, true, false, "sm_86", "pack_gqa=1,bm=64,warps=4,bn=32,q_in_regs=1", 0},
    {BF, 1, 6, 1, 77, 129, 64, true, 30, -1, 0, 1.0, false, false, true, false, "sm_89", "pack_gqa=1,bm=128,warps=8,bn=48", 0},
    {F16, 3, 8, 2, 77, 129, 64, true, -1, -1, 0, 0, true, true, true, false, "sm_90", "pack_gqa=1,bm=64,warps=4,bn=32", 0},
    {BF, 2, 8, 2, 7, 129, 96, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "impl=0,pack_gqa=1,bm=128,warps=8,bn=32", 0},
    {F16, 2, 8, 2, 77, 77, 64, false, 10, 10, 20, 1.0, false, false, true, false, "sm_86", "pack_gqa=1,bm=64,warps=4,bn=32", 0},
    {BF, 3, 6, 1, 77, 129, 64, true, -1, -1, 0, 1.0, true, false, true, false, "sm_89", "impl=0,pack_gqa=1,bm=64,warps=4,bn=32", 16},
};

/* Inputs: the verifier's default, zero-mean uniform [-2, 2] (lo = hi = 0),
 * since the op's o allowance counts one rounding of each P V term in the
 * dtype (bbd0cb8; before it, bf16 failed here at 0.06-0.09 in the
 * verifier's metric). A window one key too wide on the left still fails 7 of
 * the grid's window cases by 8 to 75 times the tolerance (mutation checked).
 * The positive-input grid below keeps peaked cases (softmax_scale 1, inputs
 * in [2^-10, 1), o cannot cancel) where a wrong key, row, head or sequence
 * is far outside the tolerance. */

static void run_grid(const acase *cases, int n, double lo, double hi)
{
    int ran = 0, failed = 0, per[2] = {0};
    double worst[2] = {0}, t0 = now();
    char first[1700] = "";
    for (int i = 0; i < n; i++) {
        const acase *c = &cases[i];
        char what[512];
        describe(c, what, sizeof what);
        pt_arena *a = pt_arena_new();
        pt_target tg;
        const pt_prepared *pp = NULL;
        pt_config cfg;
        pt_err e = {0};
        int rc = prepare(a, c, &tg, &pp, &cfg, &e);
        pt_check_result r;
        memset(&r, 0, sizeof r);
        if (!rc) {
            pt_check_opts o = {.seed = (uint64_t)(1000 + i), .threads = 2, .lo = lo, .hi = hi};
            rc = pt_check_emu(&gen_attention_op, pp, &tg, &cfg, &o, &r, &e);
        }
        int k = c->dt == PT_BF16;
        per[k]++;
        /* shared loads and stores are O's staging alone: conflict free */
        uint64_t bc = r.bank[EMU_BANK_LD].conflicts + r.bank[EMU_BANK_ST].conflicts;
        if (!rc && bc) {
            rc = PT_ERANGE;
            snprintf(e.msg, sizeof e.msg, "%llu shared-memory bank conflicts in O's staging (ld %llu, st %llu; %llu and %llu accesses)",
                     (unsigned long long)bc, (unsigned long long)r.bank[EMU_BANK_LD].conflicts,
                     (unsigned long long)r.bank[EMU_BANK_ST].conflicts, (unsigned long long)r.bank[EMU_BANK_LD].accesses,
                     (unsigned long long)r.bank[EMU_BANK_ST].accesses);
        }
        if (!rc && (r.bank[EMU_BANK_LD].accesses == 0 || r.bank[EMU_BANK_ST].accesses == 0)) {
            rc = PT_ERANGE;
            snprintf(e.msg, sizeof e.msg, "no shared loads or stores: O is not staged");
        }
        if (r.max_err > worst[k])
            worst[k] = r.max_err;
        ran++;
        if (rc) {
            failed++;
            if (!first[0])
                snprintf(first, sizeof first, "%s: %s", what, e.msg);
            printf("FAILED %s: %s\n", what, e.msg);
        }
        pt_arena_free(a);
    }
    printf("attention prefill emu: %d cases (%d f16, %d bf16), %d failed, %.1f s; worst error f16 %.3g, bf16 %.3g "
           "(the verifier's metric; o tolerance 1e-2, lse %g; inputs uniform in [%g, %g))\n",
           ran, per[0], per[1], failed, now() - t0, worst[0], worst[1], ATTN_LSE_TOL, lo == hi ? -2.0 : lo, lo == hi ? 2.0 : hi);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

Test(attention_prefill, emulator_grid, .timeout = 600)
{
    run_grid(grid, (int)(sizeof grid / sizeof grid[0]), 0, 0);
}

/* positive inputs, peaked rows (softmax_scale 1) */
static const acase grid_positive[] = {
    {BF, 1, 4, 1, 77, 129, 64, true, -1, -1, 0, 1.0, false, false, true, false, "sm_80", "bm=64,warps=4,bn=64", 0},
    {F16, 3, 4, 1, 129, 129, 64, false, 20, -1, 0, 1.0, true, true, true, false, "sm_90", "bm=128,bn=32,kv_stages=2", 0},
};

Test(attention_prefill, emulator_grid_positive_inputs)
{
    run_grid(grid_positive, (int)(sizeof grid_positive / sizeof grid_positive[0]), 0x1p-10, 1.0);
}

/* ---- assembly, structure, check() ---- */

static const char *const prefill_archs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};

static pt_problem llama(bool causal)
{
    acase c = {BF, 1, 32, 8, 4096, 4096, 128, causal, -1, -1, 0, 0, false, false, false, false, "sm_80", "", 0};
    return problem(&c);
}

/* A fixed sample of the configs tests/test_attention_space.c assembles in
 * full (minutes of nvJitLink): every SAMPLE_STEP-th config the check
 * accepts from a seeded offset, of the Llama-3-8B space on the four archs
 * and of the same heads at Sq = 77 (where the space packs GQA) on sm_80. */
enum { SAMPLE_STEP = 15, SAMPLE_SEED = 11 }; /* odd: pack_gqa, the fastest parameter, alternates */

Test(attention_prefill, a_sample_of_the_llama3_8b_spaces_assembles, .timeout = 900)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    pt_problem p[2] = {llama(true), llama(true)};
    p[1].seqlen_q = 77;
    static const char *const sm80[] = {"sm_80"};
    double t0 = now();
    test_space_job jobs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) { /* thread i: the whole space of problem i, sampled */
        jobs[i] = (test_space_job){&gen_attention_op, &p[i], 1, i ? sm80 : prefill_archs, i ? 1 : 4, comp,
                                   pt_compiler_max_ptx(comp), SAMPLE_SEED % SAMPLE_STEP, SAMPLE_STEP, {0}};
        pthread_create(&th[i], NULL, test_space_run, &jobs[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pt_compiler_close(comp);
    for (int i = 0; i < 2; i++) {
        test_space_tally t = jobs[i].t;
        printf("attention prefill: a sample of %d configs of the Llama-3-8B %s space assembled in %.0f s: %d failures, "
               "%d with spills, %d with C7xxx warnings, %d with local memory\n",
               t.variants, i ? "Sq=77 (packed GQA in it) sm_80" : "Sq=Sk=4096 sm_80/86/89/90", now() - t0, t.failures,
               t.spills, t.warned, t.local);
        cr_expect(t.variants >= (i ? 5 : 15), "only %d configs", t.variants);
        cr_expect(t.failures + t.spills + t.warned + t.local == 0, "first: %s", t.first);
    }
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *s = strstr(text, what); s; s = strstr(s + 1, what))
        n++;
    return n;
}

/* The default Llama kernel: what the loop is made of. */
Test(attention_prefill, structure_of_the_default_kernel)
{
    pt_problem p = llama(true);
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_80", &tg, &e), 0);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    pt_config c;
    gen_attention_op.defaults(pp, &tg, &c);
    char cs[256];
    pt_config_str(&c, cs, sizeof cs);
    cr_expect_str_eq(cs, "impl=0,bm=128,bn=64,warps=8,q_in_regs=0,kv_stages=1,raster=0,pack_gqa=0");
    ptx_module *m;
    pt_launch l;
    cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 90, &c, &m, &l, &e), 0, "%s", e.msg);
    char *text = ptx_print(m);
    ptx_module_free(m);
    /* one block: QK^T d/16 x n8 atoms, PV bn/16 x dv/8, one m atom per warp */
    cr_expect_eq(count(text, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 8 * 8 + 4 * 16);
    cr_expect_eq(count(text, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), 4 * 8, "V: bn/16 x dv/16");
    cr_expect_eq(count(text, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 8 + 8 * 4, "Q and K");
    cr_expect_eq(count(text, "cvt.rn.bf16x2.f32"), 16 + 64 / 2, "P (bn/2 per row pair) and o");
    cr_expect_eq(count(text, "ld.local") + count(text, "st.local"), 0);
    /* o staged through shared memory, stored 16 bytes a lane: a warp's 16
     * rows x 256 bytes are 8 v4 stores a lane, and nothing narrower */
    cr_expect_eq(count(text, "st.global.v4.b32"), 8);
    cr_expect_eq(count(text, "st.global."), 8);
    cr_expect_eq(count(text, "ld.shared.v4.b32"), 8);
    cr_expect_eq(count(text, "bar.warp.sync"), 1);
    /* emission time goes with the kernel's length (results/cpu/emit.md): 1154 lines with O's staging
     * addresses one xor per chunk (1237 when each computed the whole swizzle) */
    cr_expect_leq(count(text, "\n"), 1200, "the default kernel is %d lines", count(text, "\n"));
    cr_expect_eq(count(text, ".param .u32"), 2, "seqlen_q and seqlen_k are run-time parameters");
    /* the mask: one selp to -inf per S value of the thread (2 rows x 16),
     * once, behind the block's uniform branch */
    cr_expect_eq(count(text, ", 0fFF800000, %p"), 32);
    const char *sel = strstr(text, ", 0fFF800000, %p");
    cr_assert(sel);
    const char *br = NULL, *last = sel;
    for (const char *q = strstr(text, "bra.uni "); q && q < sel; q = strstr(q + 1, "bra.uni "))
        br = q;
    for (const char *q = sel; q; q = strstr(q + 1, ", 0fFF800000, %p"))
        last = q;
    cr_assert(br, "a branch before the mask");
    char lbl[64];
    size_t n = strcspn(br + 8, ";");
    cr_assert(n < sizeof lbl - 3);
    snprintf(lbl, sizeof lbl, "\n%.*s:", (int)n, br + 8);
    const char *at = strstr(text, lbl);
    cr_expect(at && at > last, "the branch before the mask (to %s) jumps over all of it", lbl + 1);
    cr_expect_eq(l.grid[0], 32u);
    cr_expect_eq(l.grid[1], 32u);
    cr_expect_eq(l.block[0], 256u);
    cr_expect(l.smem_optin);
    free(text);
    pt_arena_free(a);
}

static void expect_check(const char *arch, pt_problem p, const char *config, bool ok, const char *msg)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), 0);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    pt_space s;
    pt_config c;
    attn_prefill_space(pp, &tg, &s);
    attn_prefill_defaults(pp, &tg, &c);
    cr_assert_eq(pt_config_parse(&s, config, &c, &e), 0, "%s", e.msg);
    pt_err ce = {0};
    int rc = gen_attention_op.check(pp, &tg, &c, &ce);
    cr_expect_eq(rc == 0, ok, "%s [%s]: %s", arch, config, ce.msg);
    if (!ok && msg)
        cr_expect(strstr(ce.msg, msg), "%s [%s]: '%s' lacks '%s'", arch, config, ce.msg, msg);
    pt_arena_free(a);
}

Test(attention_prefill, check_by_arch)
{
    pt_problem p = llama(false);
    /* shared memory: Q 32 KB + 2 x (K 32 KB + V 32 KB) = 160 KB */
    expect_check("sm_80", p, "bm=128,bn=128,warps=8,kv_stages=2", true, NULL);
    expect_check("sm_90", p, "bm=128,bn=128,warps=8,kv_stages=2", true, NULL);
    expect_check("sm_86", p, "bm=128,bn=128,warps=8,kv_stages=2", false, "over sm_86's");
    expect_check("sm_89", p, "bm=128,bn=128,warps=8,kv_stages=2", false, "shared memory");
    /* registers: two m atoms of S 64 + O 128 */
    expect_check("sm_80", p, "bm=128,bn=64,warps=4", false, "spill");
    expect_check("sm_80", p, "bm=64,bn=128,warps=4,q_in_regs=1", true, NULL);
    expect_check("sm_80", p, "bm=64,bn=64,warps=8", false, "8 rows per warp");
    expect_check("sm_80", p, "impl=1", false, NULL);
    /* pack_gqa: only with query heads to pack */
    expect_check("sm_80", p, "bm=128,bn=64,warps=8,pack_gqa=1", true, NULL);
    acase mha = {BF, 1, 8, 8, 77, 77, 128, true, -1, -1, 0, 0, false, false, false, false, "sm_80", "", 0};
    expect_check("sm_80", problem(&mha), "bm=128,bn=64,warps=8,pack_gqa=1", false, "no query heads to pack");
    /* head dim 256: one m atom, bn <= 64 */
    acase c = {BF, 1, 8, 8, 4096, 4096, 256, true, -1, -1, 0, 0, false, false, false, false, "sm_80", "", 0};
    expect_check("sm_80", problem(&c), "bm=128,bn=64,warps=8", true, NULL);
    expect_check("sm_80", problem(&c), "bm=128,bn=96,warps=8", false, "spill");
    /* paged K/V: bn a power of two (tiles start on page-aligned rows) */
    pt_problem pg = llama(true);
    pg.page_size = 16;
    expect_check("sm_80", pg, "impl=0,bm=128,bn=64,warps=8", true, NULL);
    expect_check("sm_80", pg, "impl=0,bm=128,bn=48,warps=8", false, "power of two");
    /* paged hd96: 12 pieces a row, which the paged gather does not cut (one line, not an emit error) */
    pg.head_dim = pg.head_dim_v = 96;
    expect_check("sm_80", pg, "impl=0,bm=128,bn=64,warps=8", false, "head_dim=96");
}

/* ---- adversarial inputs (gen_attention_adversarial_op, attn_plant) ----
 * One element of q, k or v NaN, +inf, -inf or huge (2^14: a score near
 * 4096, in the block taken last, where every earlier block is rescaled by
 * exp(-huge), or the first); kernel against the float64 reference under
 * the verifier's rules (NaN matches only NaN, an inf only the same inf),
 * each kind on shapes of every mask, GQA packed and not, varlen, paged,
 * softcap. The reference must really carry the planted value (NaN or inf
 * in o or lse for the non-finite kinds), or the case would be vacuous. */
static const acase adv_shapes[] = {
    {BF, 2, 4, 1, 77, 129, 64, true, -1, -1, 0, 0, false, false, true, false, "sm_80", "bm=64,warps=4,bn=32", 0},
    {F16, 1, 8, 2, 33, 77, 128, false, 20, 5, 0, 0, false, false, true, false, "sm_86", "pack_gqa=1,bm=64,warps=4,bn=64", 0},
    {BF, 3, 4, 2, 40, 77, 64, true, -1, -1, 0, 0, true, true, true, false, "sm_89", "bm=64,warps=4,bn=32,kv_stages=2", 0},
    {F16, 2, 4, 4, 77, 77, 64, false, -1, -1, 30, 0, false, false, true, true, "sm_90", "bm=128,warps=8,bn=48", 0},
    {BF, 2, 6, 1, 7, 129, 64, true, -1, -1, 0, 0, false, false, true, false, "sm_80", "impl=0,pack_gqa=1,bm=64,warps=4,bn=32", 16},
};

static const char *const adv_names[ATTN_ADV_N] = {
    "none", "q NaN", "q +inf", "q -inf", "q huge", "k NaN", "k +inf", "k -inf", "k huge (first block)",
    "k huge (last key)", "v NaN", "v +inf", "v -inf",
};

/* NaN and inf elements of the reference's o and lse for these inputs. */
static int64_t reference_nonfinite(const pt_op *op, const pt_prepared *pp, uint64_t seed, pt_err *e)
{
    tuner_io *io = NULL;
    if (tuner_io_new(op, pp, &io, e))
        return -1;
    tuner_io_random(io, seed, 0, 0);
    pt_tensor out[2];
    int64_t bad = 0;
    for (int i = 0; i < io->nout; i++) {
        out[i] = io->out[i];
        out[i].data = calloc((size_t)out[i].numel, sizeof(double));
    }
    if (attn_reference(pp, io->in, out, e) == 0)
        for (int i = 0; i < io->nout; i++)
            for (int64_t k = 0; k < out[i].numel; k++)
                bad += !isfinite(out[i].data[k]) && !(i == pp->t.lse && out[i].data[k] == -INFINITY);
    for (int i = 0; i < io->nout; i++)
        free(out[i].data);
    tuner_io_free(NULL, io);
    return bad;
}

Test(attention_prefill, adversarial_inputs_match_the_reference, .timeout = 600)
{
    int ran = 0, failed = 0;
    char first[1700] = "";
    double t0 = now();
    int nshapes = (int)(sizeof adv_shapes / sizeof adv_shapes[0]);
    for (int kind = 1; kind < ATTN_ADV_N; kind++) /* v's kinds on every shape (what is unspecified depends on it) */
        for (int v = 0; v < (kind >= ATTN_ADV_V_NAN ? nshapes : 2); v++) {
            const acase *c = &adv_shapes[(kind + v * (kind >= ATTN_ADV_V_NAN ? 1 : 2)) % nshapes];
            const pt_op *op = gen_attention_adversarial_op((attn_adv)kind);
            cr_assert(op);
            char what[600], d[512];
            describe(c, d, sizeof d);
            snprintf(what, sizeof what, "%s: %s", adv_names[kind], d);
            pt_arena *a = pt_arena_new();
            pt_target tg;
            const pt_prepared *pp = NULL;
            pt_config cfg;
            pt_err e = {0};
            uint64_t seed = (uint64_t)(77 + 13 * kind + v);
            int rc = prepare(a, c, &tg, &pp, &cfg, &e);
            pt_check_result r;
            memset(&r, 0, sizeof r);
            if (!rc) {
                /* (a softcap maps an infinite score to +-softcap: finite) */
                bool nonfinite = kind != ATTN_ADV_Q_HUGE && kind != ATTN_ADV_K_HUGE_FIRST &&
                                 kind != ATTN_ADV_K_HUGE_LAST && (c->softcap == 0 || kind >= ATTN_ADV_V_NAN ||
                                                                   kind == ATTN_ADV_Q_NAN || kind == ATTN_ADV_K_NAN);
                int64_t nf = reference_nonfinite(op, pp, seed, &e);
                if (nf < 0)
                    rc = PT_EINVAL;
                else if (nonfinite && nf == 0) {
                    rc = PT_EINVAL;
                    snprintf(e.msg, sizeof e.msg, "the planted value reaches no output of the reference (vacuous)");
                }
            }
            if (!rc) {
                pt_check_opts o = {.seed = seed, .threads = 2};
                rc = pt_check_emu(op, pp, &tg, &cfg, &o, &r, &e);
            }
            ran++;
            if (rc) {
                failed++;
                if (!first[0])
                    snprintf(first, sizeof first, "%s: %s", what, e.msg);
                printf("FAILED %s: %s\n", what, e.msg);
            }
            pt_arena_free(a);
        }
    printf("attention prefill adversarial inputs: %d cases, %d failed, %.1f s\n", ran, failed, now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- K/V slots no key uses: NaN and +-inf (the op's inputs) ----
 * A serving engine's unused KV slots hold garbage (uninitialised or freed
 * pages, NaN / inf bit patterns): a page's tail past seqused_k / the
 * sequence's keys, pool pages no block-table entry of a key names, rows past
 * seqused_k, rows past the last packed sequence. The op's inputs
 * (attn_init_inputs, used by the verifier, `run --check` and `tune`) put
 * NaN, +inf and -inf there; the float64 reference ignores them. */
static const acase slack_shapes[] = {
    {BF, 3, 8, 2, 33, 77, 64, true, -1, -1, 0, 0, false, true, true, false, "sm_80", "", 16},
    {F16, 2, 4, 1, 40, 129, 128, false, 20, -1, 0, 0, false, true, true, false, "sm_90", "bm=64,warps=4,bn=64", 64},
    {BF, 3, 4, 1, 77, 129, 64, true, -1, -1, 0, 0, true, true, true, false, "sm_86", "bm=64,warps=4,bn=32", 0},
    {F16, 2, 4, 2, 7, 77, 96, false, -1, -1, 0, 0, false, true, true, true, "sm_89", "", 0},
    {BF, 3, 8, 2, 7, 129, 64, true, -1, -1, 0, 0, true, false, true, false, "sm_80", "pack_gqa=1,bm=64,warps=4,bn=32", 16},
    {F16, 3, 4, 1, 77, 129, 64, false, -1, -1, 0, 0, true, true, true, false, "sm_90", "bm=128,warps=8,bn=48", 0},
};

/* used[i] = 1 where element i of k (t = 0) or v (t = 1) is a key of some
 * sequence (the test's own walk of the lengths and block table); every
 * such element is finite unless allow_bad. */
static uint8_t *used_walk(const pt_prepared *pp, const tuner_io *io, int t, bool allow_bad, const char *what)
{
    const pt_tensor *kv = &io->in[t ? pp->t.v : pp->t.k];
    const int64_t *st = t ? pp->sv : pp->sk;
    int64_t w = t ? pp->dv : pp->d;
    uint8_t *u = calloc((size_t)kv->numel, 1);
    cr_assert(u);
    for (int64_t b = 0; b < pp->B; b++) {
        attn_seq s = attn_seq_of(pp, io->in, b);
        for (int64_t j = 0; j < s.sk; j++)
            for (int64_t hk = 0; hk < pp->Hkv; hk++) {
                int64_t o = b * st[2] + (s.k0 + j) * st[0] + hk * st[1];
                if (pp->page) {
                    int64_t pg = (int64_t)io->in[pp->t.block_table].data[b * pp->pages_per_seq + j / pp->page];
                    o = pg * st[2] + (j % pp->page) * st[0] + hk * st[1];
                }
                for (int64_t k = 0; k < w; k++) {
                    cr_assert(allow_bad || isfinite(kv->data[o + k]), "%s: %s[%lld] (key %lld of sequence %lld) = %g",
                              what, kv->name, (long long)(o + k), (long long)j, (long long)b, kv->data[o + k]);
                    u[o + k] = 1;
                }
            }
    }
    return u;
}

Test(attention_prefill, unused_kv_slots_hold_nan_and_inf)
{
    for (size_t i = 0; i < sizeof slack_shapes / sizeof *slack_shapes; i++) {
        const acase *c = &slack_shapes[i];
        char what[512];
        describe(c, what, sizeof what);
        pt_arena *a = pt_arena_new();
        pt_target tg;
        const pt_prepared *pp = NULL;
        pt_config cfg;
        pt_err e = {0};
        cr_assert_eq(prepare(a, c, &tg, &pp, &cfg, &e), 0, "%s: %s", what, e.msg);
        tuner_io *io;
        cr_assert_eq(tuner_io_new(&gen_attention_op, pp, &io, &e), 0, "%s", e.msg);
        tuner_io_random(io, 11, 0, 0);
        for (int t = 0; t < 2; t++) {
            const pt_tensor *kv = &io->in[t ? pp->t.v : pp->t.k];
            int64_t used = 0, kinds[3] = {0};
            uint8_t *u = used_walk(pp, io, t, false, what);
            for (int64_t k = 0; k < kv->numel; k++) {
                double x = kv->data[k];
                used += u[k];
                if (u[k])
                    continue;
                cr_assert(!isfinite(x), "%s: %s[%lld] no key uses holds %g, not NaN / inf", what, kv->name,
                          (long long)k, x);
                kinds[isnan(x) ? 0 : x > 0 ? 1 : 2]++;
            }
            /* every shape here leaves slack (seqused_k, page tails, varlen's tail) */
            cr_assert(used < kv->numel, "%s: %s has no unused slot", what, kv->name);
            cr_assert(kinds[0] && kinds[1] && kinds[2], "%s: %s slack NaN %lld +inf %lld -inf %lld", what, kv->name,
                      (long long)kinds[0], (long long)kinds[1], (long long)kinds[2]);
            free(u);
        }
        tuner_io_free(NULL, io);
        pt_arena_free(a);
    }
}

/* The kernel on those inputs (the grids above run on them too): every K/V
 * element loaded past a sequence's keys (a page's tail, a last partial
 * block, the next packed sequence's rows or the tensor's tail) is either
 * zero-filled by the copy (src-size 0 past the rows in bounds) or masked;
 * a V row read past the end reaches P V as 0 x NaN = NaN (mutation checked:
 * V's copy bounded by seqlen_k instead of the sequence's keys fails 10 of
 * the emulator grid's 40 cases with o = NaN, and passes without the
 * poisoned slack). */
Test(attention_prefill, poisoned_kv_slack_never_reaches_o, .timeout = 300)
{
    run_grid(slack_shapes, (int)(sizeof slack_shapes / sizeof slack_shapes[0]), 0, 0);
}


/* Past 16 inf elements in the used v, the rows that see them are left out
 * of the comparison (attn_padding), whatever their sign: failed before the
 * count used isinf's value (glibc: -1 for -inf), so 17 -inf counted -17 and
 * were judged row by row. */
Test(attention_prefill, many_neg_inf_v_elements_are_unspecified)
{
    const acase c = {F16, 2, 4, 2, 7, 77, 64, false, -1, -1, 0, 0, false, false, true, false, "sm_80", "", 0};
    pt_arena *a = pt_arena_new();
    pt_target tg;
    const pt_prepared *pp = NULL;
    pt_config cfg;
    pt_err e = {0};
    cr_assert_eq(prepare(a, &c, &tg, &pp, &cfg, &e), 0, "%s", e.msg);
    tuner_io *io;
    cr_assert_eq(tuner_io_new(&gen_attention_op, pp, &io, &e), 0, "%s", e.msg);
    tuner_io_random(io, 3, 0, 0);
    for (int k = 0; k < 17; k++) /* key 0 of sequence 0, kv head 0, columns 0..16 */
        io->in[pp->t.v].data[k] = -INFINITY;
    size_t n = (size_t)io->out[pp->t.o].numel;
    uint8_t *m = calloc(n, 1);
    cr_assert(m);
    cr_assert_eq(gen_attention_op.padding(pp, io->in, pp->t.o, m, &e), 0, "%s", e.msg);
    for (int64_t h = 0; h < pp->group; h++)
        for (int64_t i = 0; i < pp->Sq; i++)
            for (int64_t col = 0; col < 17; col++)
                cr_assert(m[i * pp->so[0] + h * pp->so[1] + col], "o[0, %lld, %lld, %lld] judged", (long long)i,
                          (long long)h, (long long)col);
    free(m);
    tuner_io_free(NULL, io);
    pt_arena_free(a);
}
