/* GEMM kernels on the CPU emulator against the float64 reference
 * (tuner/emu_check.h: emit -> print -> parse -> emulate with random inputs,
 * poisoned outputs and every detector on -> compare).
 *
 * The acceptance matrix: every input dtype x every layout it serves x 8
 * configs (all four stage counts, tiles from 16x16 to 128x64, in-CTA
 * k-slices, parallel split-K on and off, raster groups) x 7 shapes with
 * ragged edges. Then epilogues, column-major D, batches, fp8 outputs,
 * dequantised int8, persistent grids, padded leading dimensions and a
 * long-K small-M case; then 200 random problems with random valid configs
 * from a fixed seed.
 *
 * Tolerance: the verifier's own error model and nothing else (tuner/verify.h:
 * the dtype's tolerance plus the accumulation bound 3 sqrt(K) 2^-24 *
 * sum_k |a_ik||b_kj| through the epilogue; int8 exact). Long-K cases with
 * signed and positive inputs check the bound on the generated kernels. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gemm_adv.h"
#include "gen/gemm.h"
#include "tuner/emu_check.h"
#include "test_util.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct tally {
    int ran, failed;
    double worst_f32; /* largest f32-output error seen (the verifier's metric) */
    char first[1700];
} tally;

/* Runs one (problem, config, arch) with inputs uniform in [lo, hi) (0, 0:
 * the verifier's [-2, 2)) and records the outcome. */
static void check_range(tally *t, const pt_problem *p, const char *arch, const char *config,
                        double lo, double hi)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), 0, "%s", e.msg);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    char what[512];
    snprintf(what, sizeof what, "%s %lldx%lldx%lld %s %s->%s [%s]%s%s", arch, (long long)p->m,
             (long long)p->n, (long long)p->k, p->layout, pt_dtype_get(p->dtype)->name,
             pt_dtype_get(p->out_dtype)->name, config, p->epilogue ? " epilogue " : "",
             p->epilogue ? p->epilogue : "");
    int rc = gen_gemm_op.prepare(a, p, &tg, &pp, &e);
    pt_config c;
    char cbuf[512];
    int sms; /* "sms=N": the emulator device's SM count (persistent grids) */
    const char *cfg = config_sms(config, &sms, cbuf, sizeof cbuf);
    if (!rc) {
        pt_space s;
        gen_gemm_op.space(pp, &tg, &s);
        gen_gemm_op.defaults(pp, &tg, &c);
        rc = pt_config_parse(&s, cfg, &c, &e);
    }
    pt_check_result r;
    memset(&r, 0, sizeof r);
    if (!rc) {
        pt_check_opts o = {.seed = (uint64_t)(p->m * 131 + p->n * 7 + p->k), .threads = 2, .lo = lo, .hi = hi,
                           .sm_count = sms};
        rc = pt_check_emu(&gen_gemm_op, pp, &tg, &c, &o, &r, &e);
        int nin, nout;
        pt_tensor in[8], out[1];
        gen_gemm_op.tensors(pp, &nin, &nout, in, out);
        if (out[0].dtype == PT_F32 && r.max_err > t->worst_f32)
            t->worst_f32 = r.max_err;
    }
    t->ran++;
    if (rc) {
        if (!t->failed)
            snprintf(t->first, sizeof t->first, "%s: %s", what, e.msg);
        t->failed++;
    }
    pt_arena_free(a);
}

static void check_one(tally *t, const pt_problem *p, const char *arch, const char *config)
{
    check_range(t, p, arch, config, 0, 0);
}

static const int64_t shapes[][3] = {
    {1, 1, 1}, {17, 33, 65}, {64, 64, 64}, {128, 96, 200}, {1, 256, 512}, {250, 130, 70}, {256, 256, 256},
};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

/* Tensor-core configs; bk in bytes of k (32, 64, 128), turned into
 * elements per dtype. splitk is capped by the k tiles of the shape. */
static const struct {
    int bm, bn, kbytes, wm, wn, stages, kslice, splitk, raster;
} tc_cfgs[] = {
    {16, 16, 32, 16, 16, 2, 1, 1, 1},   {32, 32, 64, 16, 16, 3, 1, 1, 1},
    {64, 32, 128, 32, 16, 4, 2, 1, 1},  {64, 64, 64, 32, 32, 5, 1, 1, 1},
    {128, 64, 64, 64, 32, 3, 1, 1, 2},  {32, 64, 64, 32, 32, 2, 1, 2, 1},
    {64, 128, 32, 32, 64, 4, 1, 3, 1},  {16, 64, 128, 16, 32, 3, 2, 4, 2},
};
static const struct {
    int bm, bn, bk, tm, tn, stages, splitk, raster;
} simt_cfgs[] = {
    {16, 32, 8, 4, 4, 2, 1, 1},  {32, 32, 16, 4, 4, 3, 1, 1},  {64, 32, 32, 8, 4, 4, 1, 1},
    {64, 64, 16, 8, 8, 5, 1, 1}, {128, 64, 8, 8, 8, 3, 1, 2},  {32, 64, 16, 4, 8, 2, 2, 1},
    {64, 128, 32, 8, 8, 4, 3, 1}, {32, 32, 32, 4, 4, 3, 4, 2},
};
enum { NCFG = 8 };

static void config_str(pt_dtype dt, int i, int64_t k, char *buf, size_t n)
{
    if (dt == PT_F32) {
        int sk = simt_cfgs[i].splitk;
        int64_t kt = (k + simt_cfgs[i].bk - 1) / simt_cfgs[i].bk;
        snprintf(buf, n, "bm=%d,bn=%d,bk=%d,tm=%d,tn=%d,stages=%d,splitk=%lld,raster=%d",
                 simt_cfgs[i].bm, simt_cfgs[i].bn, simt_cfgs[i].bk, simt_cfgs[i].tm, simt_cfgs[i].tn,
                 simt_cfgs[i].stages, (long long)(sk < kt ? sk : kt), simt_cfgs[i].raster);
        return;
    }
    int es = pt_dtype_get(dt)->bytes;
    int bk = tc_cfgs[i].kbytes / es;
    int64_t kt = (k + bk - 1) / bk;
    int sk = tc_cfgs[i].splitk;
    snprintf(buf, n, "bm=%d,bn=%d,bk=%d,wm=%d,wn=%d,stages=%d,kslice=%d,splitk=%lld,raster=%d",
             tc_cfgs[i].bm, tc_cfgs[i].bn, bk, tc_cfgs[i].wm, tc_cfgs[i].wn, tc_cfgs[i].stages,
             tc_cfgs[i].kslice, (long long)(sk < kt ? sk : kt), tc_cfgs[i].raster);
}

static void report(const char *what, const tally *t, double secs)
{
    printf("gemm emu %s: %d cases ran, %d failed, %.1f s; f32 outputs: worst error %.3g "
           "(tolerance 1e-5, accumulation bound included)\n",
           what, t->ran, t->failed, secs, t->worst_f32);
    fflush(stdout);
}

static void matrix(pt_dtype dt, const char *arch, const char *const *layouts, int nlay, pt_dtype odt)
{
    tally t = {0};
    double t0 = now();
    for (int li = 0; li < nlay; li++)
        for (int ci = 0; ci < NCFG; ci++)
            for (int si = 0; si < NSHAPES; si++) {
                pt_problem p = PT_GEMM(shapes[si][0], shapes[si][1], shapes[si][2], layouts[li], dt, odt);
                char cfg[256];
                config_str(dt, ci, shapes[si][2], cfg, sizeof cfg);
                check_one(&t, &p, arch, cfg);
            }
    char what[64];
    snprintf(what, sizeof what, "matrix %s on %s", pt_dtype_get(dt)->name, arch);
    report(what, &t, now() - t0);
    cr_expect_eq(t.ran, nlay * NCFG * NSHAPES);
    cr_expect_eq(t.failed, 0, "first failure: %s", t.first);
}

static const char *const all_layouts[] = {"nn", "nt", "tn", "tt"};
static const char *const nt_only[] = {"nt"};

Test(gemm_emu, matrix_f32_simt, .timeout = 1800) { matrix(PT_F32, "sm_80", all_layouts, 4, PT_F32); }
Test(gemm_emu, matrix_tf32, .timeout = 1800) { matrix(PT_TF32, "sm_80", all_layouts, 4, PT_F32); }
Test(gemm_emu, matrix_f16, .timeout = 1800) { matrix(PT_F16, "sm_86", all_layouts, 4, PT_F16); }
Test(gemm_emu, matrix_bf16, .timeout = 1800) { matrix(PT_BF16, "sm_80", all_layouts, 4, PT_BF16); }
Test(gemm_emu, matrix_s8, .timeout = 1800) { matrix(PT_S8, "sm_80", nt_only, 1, PT_S32); }
Test(gemm_emu, matrix_u8, .timeout = 1800) { matrix(PT_U8, "sm_86", nt_only, 1, PT_S32); }
Test(gemm_emu, matrix_e4m3, .timeout = 1800) { matrix(PT_E4M3, "sm_89", nt_only, 1, PT_BF16); }
Test(gemm_emu, matrix_e5m2, .timeout = 1800) { matrix(PT_E5M2, "sm_89", nt_only, 1, PT_F32); }

/* Epilogues, D orientation, batches, output dtypes, scales. */
Test(gemm_emu, epilogues_layouts_and_outputs, .timeout = 1800)
{
    static const struct {
        int64_t m, n, k, batch;
        const char *layout;
        pt_dtype dt, odt;
        bool dcol;
        double alpha, beta, sa, sb;
        const char *epi, *arch, *config;
    } cases[] = {
        {250, 130, 70, 1, "tn", PT_BF16, PT_BF16, false, 1, 0, 0, 0, "gelu(acc * alpha + bias[n]) + r", "sm_80", ""},
        {250, 130, 70, 1, "tn", PT_BF16, PT_BF16, false, 0.5, 0, 0, 0, "gelu(acc * alpha + bias[n]) + r", "sm_80", "splitk=2"},
        {128, 96, 200, 1, "nn", PT_F16, PT_F32, false, 1.5, 0.25, 0, 0, NULL, "sm_86", "bm=64,bn=32,wm=32,wn=16,kslice=2,bk=64"},
        {128, 96, 200, 1, "nn", PT_F16, PT_F32, true, 1.5, 0.25, 0, 0, NULL, "sm_86", ""},
        {17, 33, 65, 1, "tt", PT_BF16, PT_F16, true, 1, 1, 0, 0, "silu(acc + s[m]) * t[n] + beta * c", "sm_80", ""},
        {64, 64, 64, 3, "nt", PT_BF16, PT_BF16, false, 1, 0.5, 0, 0, NULL, "sm_80", "bm=32,bn=32,wm=16,wn=16"},
        {33, 47, 65, 3, "tt", PT_F16, PT_F16, true, 2, 0, 0, 0, "relu(alpha * acc - b2[m]) + r", "sm_86", "bm=32,bn=32,wm=16,wn=16,splitk=2"},
        {100, 72, 40, 2, "nn", PT_TF32, PT_F32, true, 1, 0.5, 0, 0, NULL, "sm_80", ""},
        {100, 72, 40, 2, "tn", PT_F32, PT_F32, false, 1, 0, 0, 0, "where(acc > 0, acc, 0.1 * acc) + bias[n]", "sm_80", ""},
        {250, 130, 70, 1, "nt", PT_S8, PT_S32, false, 1, 1, 0, 0, NULL, "sm_80", ""},
        {250, 130, 70, 1, "nt", PT_S8, PT_BF16, false, 1, 0, 0.02, 0.5, NULL, "sm_80", ""},
        {250, 130, 70, 2, "nt", PT_U8, PT_F16, true, 0.25, 0, 0, 0, "acc * alpha * sa[m] * sb[n]", "sm_86", "splitk=2"},
        {128, 96, 200, 1, "nt", PT_S8, PT_S32, true, 1, 1, 0, 0, NULL, "sm_80", "splitk=3"},
        {128, 96, 200, 1, "nt", PT_E4M3, PT_F32, false, 1, 0, 0.5, 2, "acc + bias[n]", "sm_89", ""},
        {128, 96, 200, 1, "nt", PT_E4M3, PT_E4M3, false, 0.25, 0, 0, 0, NULL, "sm_89", ""},
        {250, 130, 70, 1, "nt", PT_E5M2, PT_E5M2, true, 1, 0, 0, 0, "tanh(acc)", "sm_89", ""},
        {128, 96, 200, 1, "tn", PT_BF16, PT_E4M3, false, 0.125, 0, 0, 0, NULL, "sm_89", ""},
        {250, 130, 70, 1, "tn", PT_F16, PT_F16, false, 1, 0, 0, 0, NULL, "sm_90", ""},
        {260, 520, 64, 1, "tn", PT_BF16, PT_BF16, false, 1, 0, 0, 0, NULL, "sm_80", "bm=16,bn=16,wm=16,wn=16,raster=3"},
        /* persistent grids: fewer CTAs than tiles, each walking several */
        {250, 130, 70, 2, "tn", PT_BF16, PT_BF16, false, 0.5, 0, 0, 0, "acc * alpha + bias[n]", "sm_80", "bm=64,bn=32,wm=32,wn=16,sms=5,persistent=1,splitk=2"},
        {250, 130, 70, 1, "nn", PT_F32, PT_F32, true, 1, 0.5, 0, 0, NULL, "sm_80", "bm=32,bn=64,tm=4,tn=8,sms=3,persistent=1"},
        {128, 96, 200, 1, "nt", PT_S8, PT_S32, false, 1, 0, 0, 0, NULL, "sm_80", "bm=32,bn=32,wm=16,wn=16,kslice=2,sms=4,persistent=1,raster=2"},
        /* 8 warps on a 16-row tile: half the threads have no epilogue unit (fuzz find) */
        {33, 16, 39, 1, "nt", PT_U8, PT_F16, false, 1, 0, 0, 0, "acc * s[m] + r", "sm_80", "bm=16,bn=64,bk=64,wm=16,wn=16,stages=4,kslice=2,sms=3,persistent=1"},
        /* long K, small M: 8193 k tiles through the ring, 64-bit pointer walks */
        {2, 24, 262147, 1, "tn", PT_BF16, PT_BF16, false, 1, 0, 0, 0, NULL, "sm_80", "bm=16,bn=32,bk=32,wm=16,wn=32,stages=4"},
    };
    tally t = {0};
    double t0 = now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_problem p = PT_GEMM(cases[i].m, cases[i].n, cases[i].k, cases[i].layout, cases[i].dt, cases[i].odt);
        p.batch = cases[i].batch;
        p.d_colmajor = cases[i].dcol;
        p.alpha = cases[i].alpha;
        p.beta = cases[i].beta;
        p.scale_a = cases[i].sa;
        p.scale_b = cases[i].sb;
        p.epilogue = cases[i].epi;
        check_one(&t, &p, cases[i].arch, cases[i].config);
    }
    /* padded leading dimensions: row starts aligned to 2, 4 or 8 bytes only */
    static const struct {
        int64_t m, n, k, batch, lda, ldb, ldc;
        const char *layout;
        pt_dtype dt, odt;
        const char *arch, *config;
    } padded[] = {
        {107, 14, 171, 2, 174, 174, 0, "nt", PT_U8, PT_BF16, "sm_86", "bm=32,bn=32,bk=64,wm=16,wn=16,stages=5,sms=4,persistent=1"},
        {64, 48, 65, 1, 66, 70, 52, "tn", PT_F16, PT_F16, "sm_80", "bm=32,bn=32,wm=16,wn=16"},
        {50, 70, 33, 3, 36, 72, 0, "nn", PT_BF16, PT_F32, "sm_80", "splitk=2"},
        {40, 30, 45, 1, 44, 46, 31, "tt", PT_TF32, PT_F32, "sm_80", ""},
        {40, 30, 45, 2, 50, 48, 0, "nt", PT_E4M3, PT_BF16, "sm_89", ""},
        {40, 30, 45, 1, 47, 45, 33, "nt", PT_F32, PT_F32, "sm_80", ""},
    };
    for (size_t i = 0; i < sizeof padded / sizeof padded[0]; i++) {
        pt_problem p = PT_GEMM(padded[i].m, padded[i].n, padded[i].k, padded[i].layout, padded[i].dt,
                               padded[i].odt);
        p.batch = padded[i].batch;
        p.lda = padded[i].lda;
        p.ldb = padded[i].ldb;
        p.ldc = padded[i].ldc;
        p.beta = padded[i].ldc ? 0.5 : 0;
        check_one(&t, &p, padded[i].arch, padded[i].config);
    }
    report("epilogues/layouts/outputs/leading dimensions", &t, now() - t0);
    cr_expect_eq(t.failed, 0, "first failure: %s", t.first);
}

/* Long K on the generated kernels, with the verifier's own bound: the
 * issue's f32 65x63x129 tn (1.07e-5 against 1e-5 before the model), f32,
 * tf32, f16 and bf16 with K up to 8192, split-K, signed and positive
 * inputs (no cancellation to hide the accumulated error). */
Test(gemm_emu, long_k_within_the_accumulation_bound, .timeout = 1800)
{
    static const struct {
        int64_t m, n, k;
        const char *layout;
        pt_dtype dt, odt;
        double lo, hi;
        const char *config;
    } cases[] = {
        {65, 63, 129, "tn", PT_F32, PT_F32, 0, 0, ""},
        {65, 63, 129, "tn", PT_F32, PT_F32, 0, 0, "bm=32,bn=32,bk=16,tm=4,tn=4,stages=3"},
        {65, 63, 129, "tn", PT_F32, PT_F32, 0, 1, "bm=64,bn=64,bk=8,tm=8,tn=8,splitk=3"},
        {16, 24, 4096, "nn", PT_F32, PT_F32, 0, 0, "bm=16,bn=32,bk=32,tm=4,tn=4,stages=4"},
        {16, 24, 4096, "nt", PT_F32, PT_F32, 0, 1, "bm=16,bn=32,bk=32,tm=4,tn=4,stages=4"},
        {16, 16, 8192, "tn", PT_TF32, PT_F32, 0, 1, "bm=16,bn=16,wm=16,wn=16,bk=32,stages=4"},
        {16, 16, 8192, "nt", PT_F16, PT_F32, 0, 1, "bm=16,bn=16,wm=16,wn=16,bk=64,stages=4"},
        {16, 16, 8192, "tt", PT_BF16, PT_F32, 0, 0, "bm=16,bn=16,wm=16,wn=16,bk=64,splitk=2"},
        {32, 16, 4096, "nt", PT_BF16, PT_BF16, 0, 1, "bm=32,bn=16,wm=16,wn=16,bk=64,kslice=2"},
        {32, 16, 4096, "tn", PT_F16, PT_F16, 0, 0, ""},
    };
    tally t = {0};
    double t0 = now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_problem p = PT_GEMM(cases[i].m, cases[i].n, cases[i].k, cases[i].layout, cases[i].dt, cases[i].odt);
        check_range(&t, &p, "sm_80", cases[i].config, cases[i].lo, cases[i].hi);
    }
    report("long K", &t, now() - t0);
    cr_expect_eq(t.failed, 0, "first failure: %s", t.first);
}

/* Random problems (shapes, layouts, dtypes, padded leading dimensions,
 * batches, D orientation, epilogues) with random valid configs, from a
 * fixed seed: the combinations the tables above do not name. */
static uint64_t rng = 0x5eed;
static int pick(int n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int)(rng % (uint64_t)n);
}

Test(gemm_emu, random_problems_and_configs, .timeout = 1800)
{
    static const pt_dtype dts[] = {PT_F32, PT_TF32, PT_F16, PT_BF16, PT_S8, PT_U8, PT_E4M3, PT_E5M2};
    static const char *const lays[] = {"nn", "nt", "tn", "tt"};
    static const char *const epis[] = {NULL, NULL, "relu(acc * alpha) + bias[n]", "acc * s[m] + r",
                                       "gelu(acc) * alpha + beta * c", "where(acc > 0, acc, 0.1 * acc)"};
    static const pt_dtype fouts[] = {PT_F32, PT_F16, PT_BF16};
    tally t = {0};
    double t0 = now();
    int tried = 0;
    while (t.ran < 200 && tried++ < 1000) {
        pt_dtype dt = dts[pick(8)];
        bool k_only = dt == PT_S8 || dt == PT_U8 || dt == PT_E4M3 || dt == PT_E5M2;
        const char *lay = k_only ? "nt" : lays[pick(4)];
        int64_t m = 1 + pick(pick(2) ? 40 : 300), n = 1 + pick(pick(2) ? 40 : 300);
        int64_t k = 1 + pick(pick(2) ? 50 : 600);
        pt_problem p = PT_GEMM(m, n, k, lay, dt, PT_F64);
        bool int_out = (dt == PT_S8 || dt == PT_U8) && pick(2);
        p.out_dtype = int_out ? PT_S32 : pick(2) && !(dt == PT_S8 || dt == PT_U8) ? PT_F64 : fouts[pick(3)];
        p.epilogue = int_out ? NULL : epis[pick(6)];
        p.alpha = p.epilogue && !strstr(p.epilogue, "alpha") ? 1.0 : int_out || pick(2) ? 1.0 : 0.75;
        p.beta = p.epilogue ? (strstr(p.epilogue, "beta") ? 0.5 : 0.0)
               : pick(3) == 0 ? (int_out || pick(2) ? 1.0 : -0.5) : 0.0;
        p.d_colmajor = pick(3) == 0;
        p.batch = pick(4) == 0 ? 1 + pick(3) : 0;
        if (pick(3) == 0)
            p.lda = (lay[0] == 'n' ? k : m) + pick(9);
        if (pick(3) == 0)
            p.ldb = (lay[1] == 't' ? k : n) + pick(9);
        if (pick(3) == 0)
            p.ldc = (p.d_colmajor ? m : n) + pick(9);
        const char *arch = k_only && dt != PT_S8 && dt != PT_U8 ? "sm_89" : pick(2) ? "sm_80" : "sm_86";
        pt_target tg;
        pt_err e = {0};
        pt_target_parse(arch, &tg, &e);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
        /* a random config the check accepts */
        char cfg[300] = "";
        for (int tries = 0; tries < 200 && !cfg[0]; tries++) {
            static const int bms[] = {16, 32, 64, 128}, ws[] = {16, 32, 64}, kb[] = {32, 64, 128};
            int es = pt_dtype_get(dt)->bytes;
            char c[256];
            int pers; /* a persistent grid of 1..6 CTAs: a device of that many SMs, one CTA each */
            if (dt == PT_F32)
                snprintf(c, sizeof c, "bm=%d,bn=%d,bk=%d,tm=%d,tn=%d,stages=%d,splitk=%d,raster=%d,persistent=%d",
                         bms[pick(4)], bms[pick(4)], kb[pick(3)] / es / (pick(2) ? 2 : 1),
                         pick(2) ? 4 : 8, pick(2) ? 4 : 8, 2 + pick(4), pick(2) ? 1 : 1 + pick(5),
                         1 + pick(4), pers = pick(3) ? 0 : 1 + pick(6));
            else
                snprintf(c, sizeof c,
                         "bm=%d,bn=%d,bk=%d,wm=%d,wn=%d,kslice=%d,stages=%d,splitk=%d,raster=%d,persistent=%d",
                         bms[pick(4)], bms[pick(4)], kb[pick(3)] / es, ws[pick(3)], ws[pick(3)],
                         pick(3) ? 1 : 2, 2 + pick(4), pick(2) ? 1 : 1 + pick(5), 1 + pick(4),
                         pers = pick(3) ? 0 : 1 + pick(6));
            pt_space s;
            pt_config cc;
            gen_gemm_op.space(pp, &tg, &s);
            gen_gemm_op.defaults(pp, &tg, &cc);
            pt_err ce = {0};
            if (pers) {
                char *q = strstr(c, "persistent=");
                snprintf(q, sizeof c - (size_t)(q - c), "persistent=1");
            }
            if (pt_config_parse(&s, c, &cc, &ce) == 0 && gen_gemm_op.check(pp, &tg, &cc, &ce) == 0) {
                if (pers)
                    snprintf(cfg, sizeof cfg, "%s,sms=%d", c, pers);
                else
                    snprintf(cfg, sizeof cfg, "%s", c);
            }
        }
        pt_arena_free(a);
        if (cfg[0])
            check_one(&t, &p, arch, cfg);
    }
    report("random problems and configs", &t, now() - t0);
    cr_expect_eq(t.ran, 200);
    cr_expect_eq(t.failed, 0, "first failure: %s", t.first);
}

/* ---- dyn=m: one kernel, M at run time (issue 14 item 4) ----
 * The kernel of the problem at M = base (the bucket) is built once; each
 * M of the list runs that PTX text on the emulator with the parameter m
 * set to M and the grid by the rule (x: ceil(M / bm); persistent: the
 * tiles at M, capped by the device's SMs at launch), against the float64 reference of the problem at M (the
 * verifier: outputs poisoned, every element compared, workspace back to
 * zero). Where the problem re-emitted at M is the same kernel (no split-K,
 * or M in the bucket (base/2, base]) its PTX must equal the base's. */
#include "gemm_dyn.h"

static void dyn_run_adv(tally *t, pt_problem p, int64_t base, const int64_t *ms, int nm, const char *arch,
                        const char *config, const adv_spec *adv)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &tg, &e), 0, "%s", e.msg);
    p.dyn = "m";
    p.m = base;
    pt_arena *a = pt_arena_new();
    pt_prepared *pb;
    cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pb, &e), 0, "%s", e.msg);
    pt_space s;
    pt_config c;
    gen_gemm_op.space(pb, &tg, &s);
    gen_gemm_op.defaults(pb, &tg, &c);
    char cbuf[512];
    int sms; /* "sms=N": the emulator device's SM count (persistent grids) */
    cr_assert_eq(pt_config_parse(&s, config_sms(config, &sms, cbuf, sizeof cbuf), &c, &e), 0, "%s", e.msg);
    ptx_module *m = NULL;
    pt_launch lb;
    cr_assert_eq(pt_op_build(&gen_gemm_op, pb, &tg, 0, &c, &m, &lb, &e), 0, "%s [%s]: %s", arch, config, e.msg);
    char *text = ptx_print(m);
    char entry[128];
    snprintf(entry, sizeof entry, "%s", lb.entry);
    ptx_module_free(m);
    int marg = -1;
    for (int i = 0; i < lb.nargs; i++)
        if (lb.args[i].kind == PT_ARG_U32)
            marg = i;
    cr_assert_geq(marg, 0, "no u32 parameter m in the dyn=m kernel");
    cr_assert_eq(lb.args[marg].u, (uint64_t)base);
    int64_t bm = pt_config_get(&c, "bm", 64), pers = pt_config_get(&c, "persistent", 0);
    int64_t splitk = pt_config_get(&c, "splitk", 1), bn = pt_config_get(&c, "bn", 64);
    tuner_dev_opts dopts = {.emu_threads = 2, .emu_arch = tg.sm, .emu_sm_count = sms};
    tuner_dev *d = NULL;
    cr_assert_eq(tuner_dev_open("emu", &dopts, &d, &e), 0, "%s", e.msg);
    for (int i = 0; i < nm; i++) {
        char what[600];
        snprintf(what, sizeof what, "dyn=m %s %lldx%lldx%lld (kernel of m=%lld) %s batch %lld [%s]%s%s", arch,
                 (long long)ms[i], (long long)p.n, (long long)p.k, (long long)base, p.layout,
                 (long long)p.batch, config, p.epilogue ? " epilogue " : "", p.epilogue ? p.epilogue : "");
        pt_problem q = p;
        q.m = ms[i];
        pt_prepared *pq;
        int rc = gen_gemm_op.prepare(a, &q, &tg, &pq, &e);
        pt_launch lq = lb;
        if (!rc) {
            /* the same kernel where the contract would say so */
            ptx_module *mq = NULL;
            pt_launch lr;
            rc = pt_op_build(&gen_gemm_op, pq, &tg, 0, &c, &mq, &lr, &e);
            if (!rc) {
                char *tq = ptx_print(mq);
                bool same = strcmp(tq, text) == 0;
                bool want = splitk == 1 || ms[i] > base / 2;
                if (same != want)
                    rc = pt_errf(&e, PT_EINTERNAL, "re-emitted at m=%lld: PTX %s the base's", (long long)ms[i],
                                 same ? "equals" : "differs from");
                /* persistent: the tiles at this m (capped by the device's SMs at launch) */
                unsigned gx = (unsigned)((ms[i] + bm - 1) / bm * (pers ? (p.n + bn - 1) / bn : 1));
                if (!rc && (lr.grid[0] != gx || lr.grid_per_sm != (unsigned)pers))
                    rc = pt_errf(&e, PT_EINTERNAL, "grid x %u (per SM %u) at m=%lld: not the rule", lr.grid[0],
                                 lr.grid_per_sm, (long long)ms[i]);
                free(tq);
            }
            ptx_module_free(mq);
            lq.grid[0] = (unsigned)((ms[i] + bm - 1) / bm * (pers ? (p.n + bn - 1) / bn : 1));
            lq.args[marg].u = (uint64_t)ms[i];
        }
        adv_arg ga = {.s = adv, .layout = q.layout, .m = q.m, .n = q.n, .k = q.k, .lda = q.lda, .ldb = q.ldb};
        tuner_verify_result vr = {0};
        if (!rc)
            rc = gemm_dyn_verify_plant(d, text, entry, pq, &lq, (uint64_t)(ms[i] * 131 + p.n), adv ? adv_plant : NULL,
                                       &ga, &vr, &e);
        if (!rc && adv && ga.rc)
            rc = pt_errf(&e, ga.rc, "the reference failed at the plant");
        int64_t all = (q.batch ? q.batch : 1) * q.m * q.n;
        if (!rc && adv && vr.checked != all)
            rc = pt_errf(&e, PT_EINVAL, "the verifier compared %lld of %lld elements", (long long)vr.checked,
                         (long long)all);
        if (!rc && adv && ga.nonfinite < adv->min_nonfinite)
            rc = pt_errf(&e, PT_EINVAL, "vacuous: %lld non-finite reference outputs, want >= %lld",
                         (long long)ga.nonfinite, (long long)adv->min_nonfinite);
        if (rc && adv)
            printf("  FAIL %s, %s: %s\n", what, adv->name, e.msg);
        t->ran++;
        if (rc) {
            if (!t->failed)
                snprintf(t->first, sizeof t->first, "%s: %s", what, e.msg);
            t->failed++;
        }
    }
    tuner_dev_close(d);
    free(text);
    pt_arena_free(a);
}

static void dyn_run(tally *t, pt_problem p, int64_t base, const int64_t *ms, int nm, const char *arch,
                    const char *config)
{
    dyn_run_adv(t, p, base, ms, nm, arch, config, NULL);
}

static const int64_t dyn_ms[] = {1, 7, 64, 65, 100, 128};

Test(gemm_emu, dyn_m_one_kernel_many_m, .timeout = 1800)
{
    static const struct {
        const char *layout;
        pt_dtype dt, odt;
        int64_t n, k, batch, lda;
        double alpha, beta;
        const char *epi, *arch, *config;
    } cases[] = {
        {"nt", PT_BF16, PT_BF16, 72, 96, 1, 0, 1, 0, NULL, "sm_80", "bm=64,bn=32,wm=32,wn=16,bk=32"},
        {"nn", PT_F16, PT_F32, 40, 70, 1, 0, 1.5, 0.25, NULL, "sm_86", "bm=32,bn=32,wm=16,wn=16,splitk=2"},
        {"tn", PT_BF16, PT_F16, 48, 64, 2, 136, 1, 0, "gelu(acc + bias[n]) * s[m]", "sm_80", "bm=64,bn=16,wm=32,wn=16,raster=2"},
        {"tt", PT_F16, PT_F16, 24, 40, 1, 130, 0.5, 0.5, "alpha * acc + beta * c + r", "sm_86", "bm=16,bn=32,wm=16,wn=16,kslice=2"},
        {"nt", PT_BF16, PT_BF16, 64, 160, 3, 0, 1, 0.5, NULL, "sm_80", "bm=32,bn=32,wm=16,wn=16,splitk=3,raster=3"},
        {"nt", PT_S8, PT_S32, 40, 64, 1, 0, 1, 0, NULL, "sm_80", "bm=32,bn=32,wm=16,wn=16,sms=3,persistent=1"},
        {"nn", PT_F32, PT_F32, 40, 33, 2, 0, 1, 0, "relu(acc) + bias[n]", "sm_80", "bm=32,bn=32,tm=4,tn=4,sms=2,persistent=1,splitk=2"},
    };
    tally t = {0};
    double t0 = now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_problem p = PT_GEMM(128, cases[i].n, cases[i].k, cases[i].layout, cases[i].dt, cases[i].odt);
        p.batch = cases[i].batch;
        p.lda = cases[i].lda;
        p.alpha = cases[i].alpha;
        p.beta = cases[i].beta;
        p.epilogue = cases[i].epi;
        dyn_run(&t, p, 128, dyn_ms, 6, cases[i].arch, cases[i].config);
    }
    report("dyn=m: one kernel, m = 1 7 64 65 100 128", &t, now() - t0);
    cr_expect_eq(t.ran, 6 * (int)(sizeof cases / sizeof cases[0]));
    cr_expect_eq(t.failed, 0, "first failure: %s", t.first);
}

/* One dyn=m mma.sync kernel (emitted at m = 128) run at M = 1, 65, 100 with
 * NaN / inf planted in the run's last rows, K ends and A's padding: plain,
 * column-major D, split-K and persistent (3 SMs) grids, against the
 * reference under the verifier's rules (every element compared, at least
 * the spec's non-finite outputs). */
Test(gemm_emu, dyn_m_adversarial_inputs, .timeout = 600)
{
    static const int64_t ms[] = {1, 65, 100};
    static const struct {
        const char *layout;
        pt_dtype dt, odt;
        int64_t n, k, lda;
        bool dcol;
        const char *arch, *config;
        const adv_spec *s;
    } cases[] = {
        {"nt", PT_BF16, PT_BF16, 72, 64, 72, false, "sm_80", "bm=64,bn=32,wm=32,wn=16,bk=32", &adv_dyn_a},
        {"nn", PT_F16, PT_F32, 40, 64, 80, true, "sm_86", "bm=32,bn=32,wm=16,wn=16", &adv_dyn_a},
        {"tn", PT_BF16, PT_F16, 48, 96, 136, true, "sm_89", "bm=64,bn=16,wm=32,wn=16,raster=2", &adv_dyn_b},
        {"nt", PT_BF16, PT_F32, 64, 160, 0, false, "sm_80", "bm=32,bn=32,wm=16,wn=16,splitk=3", &adv_dyn_b},
        {"nt", PT_F16, PT_F16, 40, 64, 0, false, "sm_80", "bm=32,bn=32,wm=16,wn=16,sms=3,persistent=1", &adv_dyn_b},
    };
    tally t = {0};
    double t0 = now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_problem p = PT_GEMM(128, cases[i].n, cases[i].k, cases[i].layout, cases[i].dt, cases[i].odt);
        p.lda = cases[i].lda;
        p.d_colmajor = cases[i].dcol;
        dyn_run_adv(&t, p, 128, ms, 3, cases[i].arch, cases[i].config, cases[i].s);
    }
    report("dyn=m adversarial: one kernel, m = 1 65 100", &t, now() - t0);
    cr_expect_eq(t.ran, 3 * (int)(sizeof cases / sizeof cases[0]));
    cr_expect_eq(t.failed, 0, "first failure: %s", t.first);
}

/* ---- adversarial inputs (tests/gemm_adv.h; docs/gemm.md "Non-finite and
 * extreme inputs") ---- */

#define NAN_ NAN
#define INF_ INFINITY
static const adv_spec adv_a_nan = {"NaN in A", ADV_NONE, 1, {{"a", 3, -1, NAN_}}, 1};
static const adv_spec adv_b_nan = {"NaN in B", ADV_NONE, 1, {{"b", 0, 2, NAN_}}, 1};
/* +inf at A(i, 0) and -inf at A(i + 1, K - 1): a kernel that reads A or B
 * past the K edge into the next row multiplies an infinity by a zero fill */
static const adv_spec adv_a_inf = {"+-inf in A at both K ends", ADV_NONE, 2,
                                   {{"a", 1, 0, INF_}, {"a", 2, -1, -INF_}}, 2};
static const adv_spec adv_b_inf = {"+-inf in B at both K ends", ADV_NONE, 2,
                                   {{"b", 0, 1, -INF_}, {"b", -1, 0, INF_}}, 2};
/* inf in A row i and B column j: +inf, -inf or NaN by the product signs */
static const adv_spec adv_ab_inf = {"inf in A and B", ADV_NONE, 4,
                                    {{"a", 0, 1, INF_}, {"b", 1, 0, -INF_}, {"a", 1, 2, INF_},
                                     {"b", 3, 1, INF_}}, 2};
/* +inf * 0: B(0, 3) = 0 under A(2, 0) = +inf -> D(2, 3) NaN, the rest of row 2 +-inf */
static const adv_spec adv_inf_zero = {"inf * 0", ADV_NONE, 2, {{"a", 2, 0, INF_}, {"b", 0, 3, 0.0}}, 2};
static const adv_spec adv_huge = {"values near the maximum", ADV_HUGE, 0, {{0}}, 0};
static const adv_spec adv_huge_f16out = {"A row at the maximum, f16 out overflows", ADV_HUGE_ROW, 0, {{0}}, 8};
/* one element near the format's maximum (bf16 2^127 x 1.99: its products
 * pass the f32 range for |b| > 1.004, so the accumulator overflows) */
static const adv_spec adv_one_max_bf16 = {"one bf16 maximum", ADV_NONE, 1, {{"a", 1, 3, 0x1.fep127}}, 1};
static const adv_spec adv_one_max_f32 = {"one f32 near its maximum", ADV_NONE, 1, {{"a", 1, 3, 0x1.fffffep127}}, 1};
static const adv_spec adv_tiny = {"subnormal A", ADV_TINY_A, 0, {{0}}, 0};
static const adv_spec adv_int = {"integer extremes", ADV_INT_EXT, 0, {{0}}, 0};
static const adv_spec adv_int_ovf = {"integer extremes, f16 out overflows", ADV_INT_EXT, 0, {{0}}, 1};
static const adv_spec adv_ties = {"rounding ties", ADV_TIES, 0, {{0}}, 0};
static const adv_spec adv_bias_inf = {"bias +-inf", ADV_NONE, 2, {{"bias", 0, 1, INF_}, {"bias", 0, -1, -INF_}}, 2};
static const adv_spec adv_bias_nan = {"bias NaN", ADV_NONE, 1, {{"bias", 0, 2, NAN_}}, 1};
static const adv_spec adv_c_nan = {"NaN and inf in C", ADV_NONE, 2, {{"c", 1, 1, NAN_}, {"c", -1, -1, -INF_}}, 2};
static const adv_spec adv_a_neginf_row = {"-inf and +inf in A (activations)", ADV_NONE, 3,
                                          {{"a", 0, 0, -INF_}, {"a", 1, 1, INF_}, {"a", 2, 2, NAN_}}, 0};
static const adv_spec adv_e5m2_inf = {"e5m2 +-inf and NaN", ADV_NONE, 3,
                                      {{"a", 0, 0, INF_}, {"b", 2, 1, -INF_}, {"a", 3, -1, NAN_}}, 3};

typedef struct adv_case {
    int64_t m, n, k;
    const char *layout;
    pt_dtype dt, odt;
    double alpha, beta;
    const char *epi, *arch, *config;
    const adv_spec *s;
} adv_case;

/* The exact tie check of ADV_TIES (f16/bf16 outputs: round to even). */
static int ties_post(const tuner_io *io, void *arg, pt_err *e)
{
    const adv_arg *g = arg;
    char msg[256];
    if (g->s->fill != ADV_TIES || (io->out[0].dtype != PT_F16 && io->out[0].dtype != PT_BF16))
        return PT_OK;
    int64_t bad = adv_ties_exact(io, g, msg, sizeof msg);
    return bad ? pt_errf(e, PT_ERANGE, "%lld ties not rounded to even; first %s", (long long)bad, msg) : PT_OK;
}

/* Runs one case; returns 0 when it passed. */
static int adv_run(tally *t, const adv_case *ac)
{
    pt_problem p = PT_GEMM(ac->m, ac->n, ac->k, ac->layout, ac->dt, ac->odt);
    p.alpha = ac->alpha;
    p.beta = ac->beta;
    p.epilogue = ac->epi;
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(ac->arch, &tg, &e), 0, "%s", e.msg);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    int rc = gen_gemm_op.prepare(a, &p, &tg, &pp, &e);
    pt_config c;
    if (!rc) {
        pt_space s;
        gen_gemm_op.space(pp, &tg, &s);
        gen_gemm_op.defaults(pp, &tg, &c);
        rc = pt_config_parse(&s, ac->config, &c, &e);
    }
    adv_arg g = {.s = ac->s, .layout = ac->layout, .m = ac->m, .n = ac->n, .k = ac->k};
    pt_check_result r;
    memset(&r, 0, sizeof r);
    if (!rc) {
        pt_check_opts o = {.seed = (uint64_t)(ac->m * 131 + ac->n * 7 + ac->k), .threads = 2,
                           .plant = adv_plant, .plant_arg = &g, .post = ties_post};
        rc = pt_check_emu(&gen_gemm_op, pp, &tg, &c, &o, &r, &e);
    }
    if (!rc && g.rc)
        rc = pt_errf(&e, g.rc, "the reference failed at the plant");
    /* every element of D compared (packed D: no padding) */
    if (!rc && r.checked != ac->m * ac->n)
        rc = pt_errf(&e, PT_EINVAL, "the verifier compared %lld of %lld elements", (long long)r.checked,
                     (long long)(ac->m * ac->n));
    if (!rc && g.nonfinite < ac->s->min_nonfinite)
        rc = pt_errf(&e, PT_EINVAL, "vacuous: the reference has %lld non-finite outputs, want >= %lld",
                     (long long)g.nonfinite, (long long)ac->s->min_nonfinite);
    t->ran++;
    if (rc) {
        printf("  FAIL %s %lldx%lldx%lld %s %s->%s [%s] %s: %s\n", ac->arch, (long long)ac->m,
               (long long)ac->n, (long long)ac->k, ac->layout, pt_dtype_get(ac->dt)->name,
               pt_dtype_get(ac->odt)->name, ac->config, ac->s->name, e.msg);
        if (!t->failed)
            snprintf(t->first, sizeof t->first, "%s %s: %s", pt_dtype_get(ac->dt)->name, ac->s->name, e.msg);
        t->failed++;
    }
    pt_arena_free(a);
    return rc;
}

Test(gemm_emu, adversarial_inputs_match_the_reference, .timeout = 600)
{
    static const adv_case cases[] = {
        /* f16 (sm_86), every layout, ragged K (65: a partial last k tile), split-K and k-slices */
        {33, 40, 65, "nn", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "", &adv_a_nan},
        {33, 40, 65, "nt", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "splitk=2", &adv_b_nan},
        {33, 40, 65, "tn", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "bm=32,bn=32,wm=16,wn=16", &adv_a_inf},
        {33, 40, 65, "tt", PT_F16, PT_F32, 1, 0, NULL, "sm_86", "splitk=3", &adv_b_inf},
        {33, 40, 65, "nn", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "bm=64,bn=32,wm=32,wn=16,kslice=2,bk=64", &adv_ab_inf},
        {33, 40, 65, "nt", PT_F16, PT_F32, 1, 0, NULL, "sm_86", "", &adv_inf_zero},
        {33, 40, 65, "tn", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "", &adv_huge_f16out},
        {33, 40, 65, "tn", PT_F16, PT_F32, 1, 0, NULL, "sm_86", "splitk=2", &adv_huge},
        {33, 40, 65, "nn", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "", &adv_tiny},
        {33, 40, 65, "nt", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "", &adv_ties},
        {33, 40, 65, "tn", PT_F16, PT_F16, 1, 0, NULL, "sm_86", "splitk=2", &adv_ties},
        {17, 24, 40, "nn", PT_BF16, PT_BF16, 1, 0, NULL, "sm_80", "", &adv_ties},
        /* bf16 (sm_80) */
        {17, 24, 40, "tn", PT_BF16, PT_BF16, 1, 0, NULL, "sm_80", "", &adv_a_inf},
        {17, 24, 40, "nt", PT_BF16, PT_F32, 1, 0, NULL, "sm_80", "splitk=2", &adv_ab_inf},
        {17, 24, 40, "nn", PT_BF16, PT_BF16, 1, 0, NULL, "sm_80", "", &adv_one_max_bf16},
        {17, 24, 40, "tt", PT_BF16, PT_F32, 1, 0, NULL, "sm_80", "", &adv_huge},
        {17, 24, 40, "nn", PT_BF16, PT_F32, 1, 0, NULL, "sm_80", "", &adv_tiny},
        /* tf32 and f32 (SIMT) */
        {17, 24, 40, "tt", PT_TF32, PT_F32, 1, 0, NULL, "sm_80", "", &adv_a_nan},
        {17, 24, 40, "nn", PT_TF32, PT_F32, 1, 0, NULL, "sm_80", "", &adv_inf_zero},
        {17, 24, 40, "tn", PT_TF32, PT_F32, 1, 0, NULL, "sm_80", "", &adv_one_max_f32},
        {17, 24, 40, "nt", PT_F32, PT_F32, 1, 0, NULL, "sm_80", "", &adv_ab_inf},
        {17, 24, 40, "tn", PT_F32, PT_F32, 1, 0, NULL, "sm_80", "splitk=2", &adv_b_inf},
        {17, 24, 40, "nn", PT_F32, PT_F32, 1, 0, NULL, "sm_80", "", &adv_one_max_f32},
        {17, 24, 40, "tt", PT_F32, PT_F32, 1, 0, NULL, "sm_80", "", &adv_tiny},
        /* int8: exact s32 at the extremes; an f16 output that overflows */
        {33, 40, 200, "nt", PT_S8, PT_S32, 1, 0, NULL, "sm_80", "splitk=2", &adv_int},
        {33, 40, 200, "nt", PT_U8, PT_S32, 1, 0, NULL, "sm_86", "", &adv_int},
        {33, 40, 200, "nt", PT_S8, PT_F16, 1, 0, NULL, "sm_80", "", &adv_int_ovf},
        /* fp8 (sm_89): NaN, e5m2 infinities, saturating e4m3 outputs */
        {33, 40, 64, "nt", PT_E4M3, PT_BF16, 1, 0, NULL, "sm_89", "", &adv_a_nan},
        {33, 40, 64, "nt", PT_E4M3, PT_E4M3, 1, 0, NULL, "sm_89", "", &adv_huge},
        {33, 40, 64, "nt", PT_E5M2, PT_F32, 1, 0, NULL, "sm_89", "", &adv_e5m2_inf},
        {33, 40, 64, "nt", PT_E5M2, PT_E4M3, 1, 0, NULL, "sm_89", "", &adv_e5m2_inf},
        /* epilogues: bias with +-inf and NaN, activations of +-inf and NaN, beta * C */
        {33, 40, 65, "tn", PT_BF16, PT_BF16, 1, 0, "acc + bias[n]", "sm_80", "", &adv_bias_inf},
        {33, 40, 65, "tn", PT_F16, PT_F16, 1, 0, "gelu(acc + bias[n])", "sm_86", "splitk=2", &adv_bias_nan},
        {33, 40, 65, "nn", PT_F16, PT_F32, 1, 0, "relu(acc)", "sm_86", "", &adv_a_neginf_row},
        {33, 40, 65, "nn", PT_BF16, PT_F32, 1, 0, "gelu(acc)", "sm_80", "", &adv_a_neginf_row},
        {33, 40, 65, "nn", PT_BF16, PT_BF16, 1, 0, "silu(acc) + tanh(acc)", "sm_80", "", &adv_a_neginf_row},
        {33, 40, 65, "tt", PT_F16, PT_F16, 0.5, 0.5, NULL, "sm_86", "", &adv_c_nan},
    };
    tally t = {0};
    double t0 = now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        adv_run(&t, &cases[i]);
    report("adversarial inputs", &t, now() - t0);
    cr_expect_eq(t.failed, 0, "%d of %d failed; first: %s", t.failed, t.ran, t.first);
}
