/* The split-KV decode kernel (gen/attention_decode.c, impl=split) on the CPU
 * emulator against the float64 reference (tuner/emu_check.h: emit -> print
 * -> parse -> emulate with the op's structured inputs, poisoned outputs and
 * scratch, every detector on -> compare every element with the verifier's
 * tolerances; lse by its own bound).
 *
 * The grid (issue 11's acceptance for decode): head dims 64, 128, 256;
 * Sq = 1 and Sq = 4 (causal, bottom-right); GQA 1:1, 4:1, MQA; lengths 1, 7,
 * 77, 129, 1000; paged KV with shuffled block tables and ragged seqused_k
 * (lengths that leave splits empty); splits 1, 3 and more splits than key
 * blocks; softcap; sliding window; f16 and bf16; kv_warps 1, 2, 4 and every
 * tile width. Then determinism (two runs bit-identical) and the assembly of
 * every config of a Llama-3-8B decode space for sm_80/86/89/90 (0 spills, no
 * local memory; skipped without ptxas). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gen/attention.h"
#include "ptx/compile.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"
#include "test_util.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct dcase {
    int64_t B, Hq, Hkv, Sq, Sk, d;
    pt_dtype dt;
    bool causal;
    int64_t page, wl;
    bool seqused, lse;
    double softcap;
    const char *config;
    const char *arch;
    bool varlen; /* packed q/o (and k/v) with cu_seqlens; lengths from the op's inputs */
    int64_t dv;  /* head_dim_v; 0: head_dim */
} dcase;

static pt_problem problem_of(const dcase *c)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.batch = c->B;
    p.heads_q = c->Hq;
    p.heads_kv = c->Hkv;
    p.seqlen_q = c->Sq;
    p.seqlen_k = c->Sk;
    p.head_dim = c->d;
    p.dtype = c->dt;
    p.causal = c->causal;
    p.page_size = c->page;
    p.seqused_k = c->seqused;
    p.return_lse = c->lse;
    p.softcap = c->softcap;
    p.varlen = c->varlen;
    if (c->dv)
        p.head_dim_v = c->dv;
    if (c->wl >= 0) {
        p.window_left = c->wl;
        p.window_left_given = true;
    }
    return p;
}

static void describe(const dcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s %s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld d%lld%s%s page%lld%s%s softcap%g wl%lld [%s]",
             c->arch ? c->arch : "sm_80", pt_dtype_get(c->dt)->name, (long long)c->B, (long long)c->Hq,
             (long long)c->Hkv, (long long)c->Sq, (long long)c->Sk, (long long)c->d, c->causal ? " causal" : "",
             c->seqused ? " seqused" : "", (long long)c->page, c->lse ? " lse" : "", c->varlen ? " varlen" : "", c->softcap,
             (long long)c->wl, c->config);
}

typedef struct tally {
    int ran, failed;
    double worst[2]; /* f16, bf16 */
    char first[2048];
    uint64_t conflicts[EMU_NBANK], wavefronts[EMU_NBANK]; /* shared-memory bank model, summed */
    char worst_bank[EMU_NBANK][160];
    uint64_t worst_c[EMU_NBANK];
    /* cases with a 96-wide K or V row (192 bytes, padded to 208: 8
     * consecutive 16-byte pieces that cross a row span 9 bank groups),
     * counted apart */
    uint64_t conflicts96[EMU_NBANK], wavefronts96[EMU_NBANK];
} tally;

static int run_case(const dcase *c, uint64_t seed, pt_check_result *r, pt_err *e)
{
    pt_target tg;
    int rc = pt_target_parse(c->arch ? c->arch : "sm_80", &tg, e);
    if (rc)
        return rc;
    pt_problem p = problem_of(c);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    rc = gen_attention_op.prepare(a, &p, &tg, &pp, e);
    pt_config cf;
    if (!rc) {
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        gen_attention_op.defaults(pp, &tg, &cf);
        rc = pt_config_parse(&s, c->config, &cf, e);
    }
    if (!rc)
        rc = gen_attention_op.check(pp, &tg, &cf, e);
    memset(r, 0, sizeof *r);
    if (!rc) {
        pt_check_opts o = {.seed = seed, .threads = 2};
        rc = pt_check_emu(&gen_attention_op, pp, &tg, &cf, &o, r, e);
    }
    pt_arena_free(a);
    return rc;
}

static void check_case(tally *t, const dcase *c)
{
    pt_check_result r;
    pt_err e = {0};
    int rc = run_case(c, (uint64_t)(c->Sk * 131 + c->Hq * 7 + c->d), &r, &e);
    char what[512];
    describe(c, what, sizeof what);
    t->ran++;
    int k = c->dt == PT_BF16;
    if (!rc && r.max_err > t->worst[k])
        t->worst[k] = r.max_err;
    bool d96 = c->d == 96 || c->dv == 96;
    for (int b = 0; b < EMU_NBANK && !rc && d96; b++) {
        t->conflicts96[b] += r.bank[b].conflicts;
        t->wavefronts96[b] += r.bank[b].wavefronts;
    }
    for (int b = 0; b < EMU_NBANK && !rc && !d96; b++) {
        t->conflicts[b] += r.bank[b].conflicts;
        t->wavefronts[b] += r.bank[b].wavefronts;
        if (r.bank[b].worst_conflicts > t->worst_c[b]) {
            t->worst_c[b] = r.bank[b].worst_conflicts;
            snprintf(t->worst_bank[b], sizeof t->worst_bank[b], "line %d of %.120s", r.bank[b].worst_line, what);
        }
    }
    if (rc) {
        if (!t->failed)
            snprintf(t->first, sizeof t->first, "%s: %s", what, e.msg);
        t->failed++;
        fprintf(stderr, "FAIL %s: %s\n", what, e.msg);
    }
}

#define F16 PT_F16
#define BF16 PT_BF16

/* B Hq Hkv Sq Sk d dt causal page wl seqused lse softcap config [arch] */
static const dcase grid[] = {
    /* head dims, GQA ratios, odd lengths, tile widths, warps, splits */
    {2, 2, 2, 1, 1, 64, BF16, false, 0, -1, false, true, 0, "bn=32,kv_warps=1,splits=1", NULL, false, 0},
    {1, 8, 2, 1, 7, 64, F16, false, 0, -1, false, true, 0, "bn=64,kv_warps=2,splits=3", NULL, false, 0},
    {1, 8, 2, 1, 77, 128, BF16, false, 0, -1, false, false, 0, "bn=64,kv_warps=4,splits=1,stages=3", NULL, false, 0},
    {2, 4, 1, 1, 129, 128, F16, false, 0, -1, false, true, 0, "bn=32,kv_warps=2,splits=3", NULL, false, 0},
    {1, 4, 1, 1, 1000, 256, BF16, false, 0, -1, false, true, 0, "bn=64,kv_warps=2,splits=16", NULL, false, 0},
    {1, 2, 2, 1, 1000, 64, F16, false, 0, -1, false, false, 0, "bn=256,kv_warps=4,splits=3", NULL, false, 0},
    {1, 2, 1, 1, 129, 256, F16, false, 0, -1, false, true, 0, "bn=32,kv_warps=1,splits=8,stages=3", NULL, false, 0},
    /* Sq = 4, causal bottom-right; Sq > Sk (rows with no visible key) */
    {1, 8, 2, 4, 129, 128, F16, true, 0, -1, false, true, 0, "bn=128,kv_warps=4,splits=1", NULL, false, 0},
    {1, 8, 2, 4, 77, 64, BF16, true, 0, -1, false, true, 0, "bn=32,kv_warps=2,splits=3", NULL, false, 0},
    {1, 4, 4, 4, 1, 64, BF16, true, 0, -1, false, true, 0, "bn=32,kv_warps=1,splits=3", NULL, false, 0},
    /* MQA with more packed rows than one block (32 heads: two row blocks) */
    {1, 32, 1, 1, 77, 64, F16, false, 0, -1, false, true, 0, "bn=64,kv_warps=4,splits=2", NULL, false, 0},
    {1, 8, 1, 4, 129, 64, BF16, true, 0, -1, false, true, 0, "bn=64,kv_warps=2,splits=3", NULL, false, 0},
    /* paged KV: shuffled block tables, ragged seqused_k (empty splits),
     * pages smaller than, equal to and larger than a tile */
    {3, 8, 2, 1, 77, 128, BF16, false, 16, -1, true, true, 0, "bn=64,kv_warps=4,splits=3", NULL, false, 0},
    {3, 4, 1, 4, 129, 64, F16, true, 4, -1, true, true, 0, "bn=32,kv_warps=1,splits=8", NULL, false, 0},
    {2, 8, 2, 1, 129, 128, F16, false, 64, -1, true, true, 0, "bn=32,kv_warps=2,splits=3", NULL, false, 0},
    {2, 4, 1, 1, 1000, 256, BF16, false, 16, -1, true, true, 0, "bn=64,kv_warps=4,splits=4", NULL, false, 0},
    {2, 2, 2, 1, 129, 64, BF16, false, 32, -1, false, true, 0, "bn=32,kv_warps=1,splits=64", NULL, false, 0},
    /* softcap, sliding window */
    {1, 8, 2, 1, 129, 128, BF16, false, 0, -1, false, true, 30, "bn=32,kv_warps=2,splits=3", NULL, false, 0},
    {2, 4, 1, 4, 77, 64, F16, true, 16, -1, true, true, 20, "bn=64,kv_warps=4,splits=2", NULL, false, 0},
    {1, 4, 1, 1, 129, 64, BF16, false, 0, 40, false, true, 0, "bn=32,kv_warps=2,splits=3", NULL, false, 0},
    /* varlen (packed q/o and k/v, lengths from cu_seqlens, one of length 1),
     * with seqused_k and with paged KV */
    {4, 8, 2, 4, 129, 64, BF16, true, 0, -1, false, true, 0, "bn=32,kv_warps=2,splits=3", NULL, true, 0},
    {3, 4, 1, 1, 77, 128, F16, false, 0, -1, true, true, 0, "bn=64,kv_warps=4,splits=2", NULL, true, 0},
    {3, 8, 2, 2, 129, 64, BF16, true, 16, -1, false, true, 0, "bn=64,kv_warps=2,splits=4", NULL, true, 0},
    /* other archs (sm_86's 99 KB, sm_90's reserved shared window) */
    {1, 8, 2, 1, 129, 128, BF16, false, 16, -1, true, true, 0, "bn=64,kv_warps=4,splits=3", "sm_86", false, 0},
    {1, 8, 2, 1, 77, 128, F16, false, 0, -1, false, true, 0, "bn=128,kv_warps=4,splits=2,stages=3", "sm_90", false, 0},
    {2, 4, 1, 1, 129, 64, BF16, false, 16, -1, true, true, 0, "bn=64,kv_warps=2,splits=3", "sm_89", false, 0},
    /* head_dim 96 (192-byte rows: 12 16-byte pieces, not a power of two):
     * contiguous and paged (pages smaller than, equal to and larger than a
     * tile), GQA 4:1 and MQA, causal Sq = 4, varlen, d 96 with dv 128 */
    {2, 8, 2, 1, 129, 96, F16, false, 0, -1, false, true, 0, "bn=64,kv_warps=2,splits=3", NULL, false, 0},
    {3, 8, 2, 1, 77, 96, BF16, false, 16, -1, true, true, 0, "bn=64,kv_warps=4,splits=3", NULL, false, 0},
    {2, 4, 1, 4, 129, 96, F16, true, 64, -1, true, true, 0, "bn=32,kv_warps=1,splits=2", NULL, false, 0},
    {2, 8, 8, 1, 200, 96, BF16, false, 32, -1, false, true, 0, "bn=128,kv_warps=4,splits=2,stages=3", NULL, false,
     0},
    {3, 8, 2, 2, 129, 96, F16, true, 16, -1, false, true, 0, "bn=64,kv_warps=2,splits=4", NULL, true, 0},
    {1, 16, 1, 1, 77, 96, BF16, false, 0, 30, false, true, 0, "bn=32,kv_warps=2,splits=1", "sm_90", false, 128},
    {2, 8, 2, 1, 129, 128, F16, false, 8, -1, true, true, 0, "bn=64,kv_warps=4,splits=3", NULL, false, 96},
};

Test(attention_decode, grid_against_float64_reference, .timeout = 600)
{
    tally t = {0};
    double t0 = now();
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++)
        check_case(&t, &grid[i]);
    printf("attention decode (impl=split): %d cases on the emulator, %d failed; worst error f16 %.3g, bf16 %.3g "
           "(tolerance 1e-2 for o, 1e-4 for lse); %.1f s\n",
           t.ran, t.failed, t.worst[0], t.worst[1], now() - t0);
    static const char *const cls[] = {"ld.shared", "st.shared", "ldmatrix", "cp.async"};
    for (int b = 0; b < EMU_NBANK; b++)
        printf("  bank conflicts %s: %llu of %llu wavefronts%s%s\n", cls[b], (unsigned long long)t.conflicts[b],
               (unsigned long long)t.wavefronts[b], t.worst_c[b] ? "; worst " : "", t.worst_bank[b]);
    for (int b = 0; b < EMU_NBANK; b++)
        printf("  head dim 96 cases, bank conflicts %s: %llu of %llu wavefronts\n", cls[b],
               (unsigned long long)t.conflicts96[b], (unsigned long long)t.wavefronts96[b]);
    cr_assert_eq(t.failed, 0, "%d of %d failed; first: %s", t.failed, t.ran, t.first);
    for (int b = 0; b < EMU_NBANK; b++) /* swizzled K/V/Q tiles, padded O buffer */
        cr_assert_eq(t.conflicts[b], 0, "%s: %llu bank conflicts, worst at %s", cls[b],
                     (unsigned long long)t.conflicts[b], t.worst_bank[b]);
    /* hd96: ldmatrix and the O buffer conflict-free (the 208-byte pitch is
     * 13 16-byte units, odd); cp.async: 8 threads' consecutive pieces that
     * cross a row cover 9 units, two in one bank group (one extra
     * wavefront for such a group; a swizzled 192-byte pitch would clear it
     * but kit_shift_ok's column rule assumes a power-of-two pitch), so at
     * most 3 in 10 wavefronts are extra (23% here) */
    for (int b = 0; b < EMU_NBANK; b++)
        cr_assert(b == EMU_BANK_CP_ASYNC ? 10 * t.conflicts96[b] <= 3 * t.wavefronts96[b] : t.conflicts96[b] == 0,
                  "head dim 96, %s: %llu bank conflicts of %llu wavefronts", cls[b],
                  (unsigned long long)t.conflicts96[b], (unsigned long long)t.wavefronts96[b]);
}

/* ---- determinism ---------------------------------------------------------- */

/* Runs one case on the emulator (threads: 0 serial, CTAs in order; 2: CTAs
 * on two threads, arrivals in any order) and returns the outputs' bits. */
static void run_bits(const dcase *c, int threads, unsigned char **bits, size_t *nbytes, int *nout)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(c->arch ? c->arch : "sm_80", &tg, &e), 0, "%s", e.msg);
    pt_problem p = problem_of(c);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    pt_space s;
    pt_config cf;
    gen_attention_op.space(pp, &tg, &s);
    gen_attention_op.defaults(pp, &tg, &cf);
    cr_assert_eq(pt_config_parse(&s, c->config, &cf, &e), 0, "%s", e.msg);
    ptx_module *m;
    pt_launch l;
    cr_assert_eq(pt_op_build(&gen_attention_op, pp, &tg, 0, &cf, &m, &l, &e), 0, "%s", e.msg);
    char *text = ptx_print(m);
    tuner_dev_opts dopts = {.emu_threads = threads, .emu_arch = tg.sm};
    tuner_dev *d;
    cr_assert_eq(tuner_dev_open("emu", &dopts, &d, &e), 0, "%s", e.msg);
    tuner_image img = {text, strlen(text), NULL, 0, l.entry, &gen_attention_op, pp};
    tuner_kernel *k;
    cr_assert_eq(tuner_load(d, &img, &k, &e), 0, "%s", e.msg);
    tuner_io *io;
    cr_assert_eq(tuner_io_new(&gen_attention_op, pp, &io, &e), 0, "%s", e.msg);
    tuner_io_random(io, 7, 0, 0);
    cr_assert_eq(tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), &e), 0, "%s", e.msg);
    cr_assert_eq(tuner_io_upload(d, io, &e), 0, "%s", e.msg);
    cr_assert_eq(tuner_io_run(d, k, &l, io, &e), 0, "%s", e.msg);
    size_t total = 0;
    for (int i = 0; i < io->nout; i++)
        total += io->out_bytes[i];
    *bits = malloc(total);
    cr_assert(*bits);
    size_t at = 0;
    for (int i = 0; i < io->nout; i++) {
        memcpy(*bits + at, io->out_bits[i], io->out_bytes[i]);
        at += io->out_bytes[i];
    }
    *nbytes = total;
    *nout = io->nout;
    tuner_io_free(d, io);
    tuner_unload(d, k);
    tuner_dev_close(d);
    free(text);
    ptx_module_free(m);
    pt_arena_free(a);
}

/* The combine sums the partials in split order whatever the arrival order:
 * serial (split S-1 arrives last) and two-thread runs give the same bits. */
Test(attention_decode, combine_is_deterministic)
{
    static const dcase cases[] = {
        {3, 8, 2, 1, 1000, 128, BF16, false, 16, -1, true, true, 0, "bn=64,kv_warps=2,splits=8", NULL, false, 0},
        {2, 4, 1, 4, 129, 64, F16, true, 0, -1, false, true, 0, "bn=64,kv_warps=4,splits=5", NULL, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char *x, *y, *z;
        size_t nx, ny, nz;
        int ox, oy, oz;
        run_bits(&cases[i], 0, &x, &nx, &ox);
        run_bits(&cases[i], 2, &y, &ny, &oy);
        run_bits(&cases[i], 2, &z, &nz, &oz);
        cr_assert_eq(nx, ny);
        cr_assert_eq(nx, nz);
        cr_assert_eq(ox, 2, "o and lse");
        cr_assert(memcmp(x, y, nx) == 0 && memcmp(x, z, nx) == 0, "case %zu: runs differ", i);
        free(x);
        free(y);
        free(z);
    }
}

/* ---- assembly --------------------------------------------------------------- */

typedef struct asm_job {
    const pt_compiler *comp;
    char *text[512];
    char what[512][96];
    pt_target tg[512];
    int n, first, step;
    int bad, maxreg;
    double worst_s;
    char msg[1024];
} asm_job;

static void *asm_run(void *arg)
{
    asm_job *j = arg;
    for (int i = j->first; i < j->n; i += j->step) {
        pt_resource r = {0};
        pt_err ce = {0};
        double tc = now();
        int rc = pt_compile(j->comp, j->text[i], &j->tg[i], NULL, NULL, &r, &ce);
        double dt = now() - tc;
        if (dt > j->worst_s)
            j->worst_s = dt;
        if (getenv("DEC_VERBOSE"))
            fprintf(stderr, "%s %.2f s regs %d spills %d/%d\n", j->what[i], dt, r.registers, r.spill_stores,
                    r.spill_loads);
        if (rc || r.spill_stores || r.spill_loads || r.stack_frame) {
            if (!j->bad)
                snprintf(j->msg, sizeof j->msg, "%s: %.600s spills %d/%d stack %d", j->what[i], rc ? ce.msg : "",
                         r.spill_stores, r.spill_loads, r.stack_frame);
            j->bad++;
        }
        if (r.registers > j->maxreg)
            j->maxreg = r.registers;
    }
    return NULL;
}

/* Every config of the Llama-3-8B decode space (Sq 1, Sk 8192, page 16, Hq 32,
 * Hkv 8, d 128, bf16, batch 16) that check() accepts, for sm_80/86/89/90:
 * assembled with 0 spills and no local memory. Split counts above 1 give
 * the same text (S is %nctaid.x), so each distinct text is compiled once,
 * on two threads. */
static void assemble_space(int64_t d, const char *const *archs, size_t narch, int min_configs)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    dcase lc = {16, 32, 8, 1, 8192, d, BF16, false, 16, -1, false, false, 0, "", NULL, false, 0};
    pt_problem p = problem_of(&lc);
    int configs = 0, refused = 0, bad = 0;
    char first[1024] = "";
    static asm_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    asm_job *all = &jobs[0];
    all->comp = comp;
    double t0 = now();
    uint64_t seen[512];
    for (size_t ai = 0; ai < narch; ai++) {
        pt_target tg;
        cr_assert_eq(pt_target_parse(archs[ai], &tg, &e), 0, "%s", e.msg);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        cr_assert_str_eq(s.p[0].name, "impl");
        for (int64_t i = 0; i < pt_space_size(&s); i++) {
            pt_config c;
            pt_space_config(&s, i, &c);
            pt_err ce = {0};
            if (gen_attention_op.check(pp, &tg, &c, &ce)) {
                refused++;
                continue;
            }
            configs++;
            ptx_module *m;
            pt_launch l;
            char cs[256];
            pt_config_str(&c, cs, sizeof cs);
            if (pt_op_build(&gen_attention_op, pp, &tg, pt_compiler_max_ptx(comp), &c, &m, &l, &ce)) {
                bad++;
                if (!first[0])
                    snprintf(first, sizeof first, "%s [%s]: %.600s", archs[ai], cs, ce.msg);
                continue;
            }
            char *text = ptx_print(m);
            ptx_module_free(m);
            if (strstr(text, "ld.local") || strstr(text, "st.local")) {
                bad++;
                if (!first[0])
                    snprintf(first, sizeof first, "%s [%s]: local memory in the PTX", archs[ai], cs);
            }
            uint64_t h = pt_hash64(text, strlen(text)) ^ (uint64_t)tg.sm;
            bool dup = false;
            for (int k = 0; k < all->n; k++)
                dup = dup || seen[k] == h;
            if (dup || all->n == 512) {
                free(text);
                cr_assert(dup, "more than 512 distinct kernels");
                continue;
            }
            seen[all->n] = h;
            all->text[all->n] = text;
            all->tg[all->n] = tg;
            snprintf(all->what[all->n], sizeof all->what[0], "%s [%.80s]", archs[ai], cs);
            all->n++;
        }
        pt_arena_free(a);
    }
    double t_emit = now() - t0;
    jobs[1] = *all;
    jobs[0].first = 0;
    jobs[1].first = 1;
    jobs[0].step = jobs[1].step = 2;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, asm_run, &jobs[i]);
    int maxreg = 0;
    double worst = 0;
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        bad += jobs[i].bad;
        if (jobs[i].bad && !first[0])
            memcpy(first, jobs[i].msg, sizeof first);
        if (jobs[i].maxreg > maxreg)
            maxreg = jobs[i].maxreg;
        if (jobs[i].worst_s > worst)
            worst = jobs[i].worst_s;
    }
    printf("attention decode: Llama-3-8B decode space (head_dim %lld), %s..%s: %d configs accepted (%d refused by "
           "check), %d distinct kernels assembled with %s on two threads, %d failures; at most %d registers; "
           "emission %.2f s, total %.1f s, slowest compile %.1f s\n",
           (long long)d, archs[0], archs[narch - 1], configs, refused, all->n, pt_compiler_describe(comp), bad, maxreg,
           t_emit, now() - t0, worst);
    for (int k = 0; k < all->n; k++)
        free(all->text[k]);
    pt_compiler_close(comp);
    cr_assert(configs >= min_configs, "only %d configs", configs);
    cr_assert_eq(bad, 0, "%d failures; first: %s", bad, first);
}

Test(attention_decode, llama3_8b_decode_space_assembles, .timeout = 900)
{
    static const char *const archs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
    assemble_space(128, archs, 4, 100);
}

/* head_dim 96 (the gather's 96-thread cut, 12 pieces a row, division in the
 * epilogue's units): the same space on sm_90 (H200's; sm_80 too passed
 * when tried: 58 kernels for both, 0 spills, at most 165 registers, but
 * that doubles the test's time) */
Test(attention_decode, hd96_decode_space_assembles, .timeout = 900)
{
    static const char *const archs[] = {"sm_90"};
    assemble_space(96, archs, 1, 20);
}

/* The defaults (FA's tile widths, halved until two CTAs fit an SM's shared
 * memory; FA's wave-efficiency split count) pass check() on every arch for
 * Llama-3-8B decode shapes, and the split heuristic splits a lone sequence
 * and leaves a full grid alone. */
Test(attention_decode, defaults_fit_every_arch)
{
    static const char *const archs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
    static const int64_t batches[] = {1, 16, 64};
    static const int64_t dims[] = {64, 128, 256};
    for (size_t ai = 0; ai < 4; ai++)
        for (size_t bi = 0; bi < 3; bi++)
            for (size_t di = 0; di < 3; di++) {
                dcase lc = {batches[bi], 32, 8, 1, 8192, dims[di], BF16, false, 16, -1, false, false, 0, "", NULL,
                            false, 0};
                pt_problem p = problem_of(&lc);
                pt_target tg;
                pt_err e = {0};
                cr_assert_eq(pt_target_parse(archs[ai], &tg, &e), 0, "%s", e.msg);
                pt_arena *a = pt_arena_new();
                pt_prepared *pp;
                cr_assert_eq(gen_attention_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
                pt_config c;
                gen_attention_op.defaults(pp, &tg, &c);
                char cs[256];
                pt_config_str(&c, cs, sizeof cs);
                cr_assert_eq(gen_attention_op.check(pp, &tg, &c, &e), 0, "%s B%lld d%lld [%s]: %s", archs[ai],
                             (long long)batches[bi], (long long)dims[di], cs, e.msg);
                int64_t splits = pt_config_get(&c, "splits", 0);
                if (batches[bi] == 1)
                    cr_assert_gt(splits, 4, "%s B1 [%s]: 8 CTAs should split", archs[ai], cs);
                if (batches[bi] == 64)
                    cr_assert_eq(splits, 1, "%s B64 [%s]: 512 CTAs fill the GPU", archs[ai], cs);
                if (di == 1 && bi == 0)
                    printf("attention decode defaults %s B1 d128: %s\n", archs[ai], cs);
                pt_arena_free(a);
            }
}
