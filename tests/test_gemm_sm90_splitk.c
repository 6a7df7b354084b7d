/* The sm_90a wgmma GEMM's decompositions and tiles (issue 13 items 2 and
 * 5): split-K (splitk 2..4) and stream-K (streamk=1 over a persistent
 * grid) with the deterministic fixup (the last CTA to arrive sums the
 * partials in unit order; no CTA waits on another), and tile N any
 * multiple of 8 (or the int types' rule) up to 256 (bn 24, 40, 96, 144,
 * 160, 192 ...). Emulator cases against the float64 reference, every
 * detector on, the lazy, eager and random async schedules; two runs at
 * different random-schedule seeds give bit-identical outputs; check()'s
 * refusals; ptxas sm_90a on the new forms (0 spills, no C75xx).
 *
 * An emulated case is emit -> print -> parse (identical) -> the emu
 * backend -> tuner_verify (random inputs, poisoned outputs, the workspace
 * zero-filled once and checked zero after the launch by the contract). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/gemm.h"
#include "ptx/compile.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"
#include "gemm_adv.h"
#include "gemm_sm90_util.h"
#include "test_util.h"

typedef struct run_out {
    double max_err;
    int64_t checked; /* output elements the verifier compared */
    char config[256];
    pt_launch l;
    void *bits; /* output 0's bytes (determinism) */
    size_t nbits;
} run_out;

/* One problem on the emulator at schedule sched (seed for the random one),
 * config over the defaults; verify (or, with keep, only run and keep
 * output 0's bytes in o->bits). plant (NULL: none) writes over the random
 * inputs before the upload (tests/gemm_adv.h); post (NULL: none) sees the
 * outputs after a passing verification, its status the run's. */
static int run_emu_plant(const pt_problem *p, const char *config, emu_sched sched, uint64_t seed, bool keep,
                         void (*plant)(tuner_io *, void *), void *arg,
                         int (*post)(const tuner_io *, void *, pt_err *), run_out *o, pt_err *e)
{
    memset(o, 0, sizeof *o);
    int sms;
    char cbuf[512];
    config_sms(config, &sms, cbuf, sizeof cbuf); /* prepare_config drops the item */
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = NULL;
    pt_config c;
    ptx_module *built = NULL, *parsed = NULL;
    tuner_dev *d = NULL;
    tuner_kernel *k = NULL;
    tuner_io *io = NULL;
    char *text = NULL;
    int rc = prepare_config(a, p, &tg, config, &pp, &c, e);
    if (!rc && pt_config_get(&c, "impl", 0) != 1)
        rc = pt_errf(e, PT_EINVAL, "not the wgmma loop: %s", pt_config_str(&c, o->config, sizeof o->config));
    if (!rc) {
        pt_config_str(&c, o->config, sizeof o->config);
        rc = pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &built, &o->l, e);
    }
    if (!rc)
        rc = print_round_trip(built, &text, &parsed, e);
    if (!rc)
        rc = open_load_io_sms("emu", sched, seed, sms, text, o->l.entry, pp, p, plant, arg, &d, &k, &io, e);
    if (!rc && keep) {
        rc = tuner_io_upload(d, io, e);
        if (!rc)
            rc = tuner_io_run(d, k, &o->l, io, e);
        if (!rc)
            rc = tuner_io_download(d, io, e);
        if (!rc) {
            o->nbits = io->out_bytes[0];
            o->bits = malloc(o->nbits);
            memcpy(o->bits, io->out_bits[0], o->nbits);
        }
    } else if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result vr;
        rc = tuner_verify(d, k, &o->l, io, &vo, &vr, e);
        o->max_err = vr.max_err;
        o->checked = vr.checked;
        if (!rc && post)
            rc = post(io, arg, e);
    }
    run_release(d, k, io, text, parsed, built, a);
    return rc;
}

static int run_emu(const pt_problem *p, const char *config, emu_sched sched, uint64_t seed, bool keep, run_out *o,
                   pt_err *e)
{
    return run_emu_plant(p, config, sched, seed, keep, NULL, NULL, NULL, o, e);
}

enum { NDT = 5 };
static const pt_dtype dts[NDT] = {PT_BF16, PT_F16, PT_TF32, PT_E4M3, PT_S8};
static const emu_sched scheds[3] = {EMU_SCHED_LAZY, EMU_SCHED_EAGER, EMU_SCHED_RANDOM};

_Static_assert((int)NDT <= (int)GRID_MAXDT, "the grid tallies NDT dtypes");
typedef sm90_grid grid;

static int dt_index(pt_dtype dt)
{
    for (int i = 0; i < NDT; i++)
        if (dts[i] == dt)
            return i;
    return 0;
}

/* One verified case; *ws_seen: the launch takes a workspace. */
static void grid_case(grid *g, const pt_problem *p, const char *config, emu_sched sched, uint64_t seed,
                      bool *ws_seen)
{
    pt_err e = {0};
    run_out o;
    grid_trace(p, config, sched);
    int rc = run_emu(p, config, sched, seed, false, &o, &e);
    int di = dt_index(p->dtype);
    grid_tally(g, di, rc, o.max_err, 0, p, config ? config : o.config, sched, e.msg);
    for (int i = 0; !rc && ws_seen && i < o.l.nargs; i++)
        *ws_seen |= o.l.args[i].kind == PT_ARG_WORKSPACE;
}

static void grid_report(const grid *g, const char *what, double t0)
{
    grid_report_dts(g, what, t0, dts, NDT, false);
}

/* Split-K 2, 3, 4 over every dtype, odd M/N and K from 1 (one k tile: the
 * split count is capped at the k tiles) to 1000, tf32 and 8-bit K-major
 * (nt), 16-bit also MN-major; the three schedules in turn. */
Test(gemm_sm90_splitk, splitk_dtypes_odd_shapes, .timeout = 300)
{
    double t0 = now();
    grid g = {0};
    bool ws = false;
    static const int64_t ks[] = {1, 7, 65, 129, 257, 1000};
    static const int64_t mn[][2] = {{65, 33}, {7, 129}, {129, 65}, {1, 200}, {100, 7}, {33, 64}};
    int n = 0;
    for (int di = 0; di < NDT; di++)
        for (int ki = 0; ki < 6; ki++, n++) {
            int es = pt_dtype_get(dts[di])->bytes;
            const char *lay = es == 2 ? (ki % 3 == 1 ? "tt" : ki % 3 == 2 ? "tn" : "nt") : "nt";
            pt_problem p = prob(mn[ki][0], mn[ki][1], ks[ki], lay, dts[di], PT_F64);
            int64_t kt = (ks[ki] * es + 127) / 128;
            int sk = 2 + (n % 3);
            if (sk > kt)
                sk = (int)kt;
            char cfg[128];
            snprintf(cfg, sizeof cfg, "impl=1,bm=%d,bn=%d,stages=%d,splitk=%d", ki % 2 ? 64 : 128,
                     lay[1] == 'n' ? 64 : ki % 2 ? 32 : 64, 2 + ki % 3, sk);
            grid_case(&g, &p, cfg, scheds[n % 3], (uint64_t)n, &ws);
        }
    grid_report(&g, "wgmma split-K", t0);
    cr_expect(ws, "no split-K case took a workspace");
}

/* Stream-K: persistent grids of 2..7 CTAs over 2..12 tiles whose k
 * iterations do not divide evenly, so units start and end inside tiles
 * (2 or 3 units per tile; some tiles one unit covers, the plain
 * epilogue), every dtype, the three schedules. */
Test(gemm_sm90_splitk, streamk_dtypes_odd_shapes, .timeout = 300)
{
    double t0 = now();
    grid g = {0};
    bool ws = false;
    struct {
        int64_t m, n, k;
        const char *lay, *cfg;
    } cs[] = {
        {129, 65, 1000, "nt", "sms=5,impl=1,bm=64,bn=32,stages=3,persistent=1,streamk=1"},
        {65, 129, 257, "tt", "sms=3,impl=1,bm=128,bn=64,stages=2,persistent=1,streamk=1"},
        {200, 33, 129, "nt", "sms=7,impl=1,bm=64,bn=16,stages=4,persistent=1,streamk=1,raster=2"},
        {7, 257, 65, "nt", "sms=3,impl=1,bm=64,bn=64,stages=2,persistent=1,streamk=1"},
        {100, 100, 257, "tn", "sms=2,impl=1,bm=64,bn=64,stages=3,persistent=1,streamk=1,wg_wait=0"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int di = 0; di < NDT; di++, n++) {
            bool sixteen = pt_dtype_get(dts[di])->bytes == 2;
            pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, sixteen ? cs[i].lay : "nt", dts[di], PT_F64);
            grid_case(&g, &p, cs[i].cfg, scheds[n % 3], (uint64_t)(50 + n), &ws);
        }
    /* off: the same grid walks whole tiles */
    pt_problem p = prob(129, 65, 1000, "nt", PT_BF16, PT_F64);
    grid_case(&g, &p, "sms=5,impl=1,bm=64,bn=32,stages=3,persistent=1,streamk=0", EMU_SCHED_RANDOM, 99, NULL);
    grid_report(&g, "wgmma stream-K", t0);
    cr_expect(ws, "no stream-K case took a workspace");
}

/* The expression epilogue after the fixup: bias + activation + residual,
 * beta C, fp8 output with a scale, s8 -> s32 exact, a batch, a
 * column-major D; split-K and stream-K. */
Test(gemm_sm90_splitk, fixup_epilogues, .timeout = 300)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi;
        double beta, osc;
        int64_t batch;
        bool dcol;
        const char *cfg;
    } cs[] = {
        {65, 129, 257, "nt", PT_BF16, PT_BF16, "relu(acc + bias[n]) + r", 0, 0, 1, false,
         "impl=1,bm=64,bn=64,stages=3,splitk=3"},
        {129, 64, 1000, "nn", PT_F16, PT_F32, "gelu(acc * alpha + bias[n]) + r", 0, 0, 1, false,
         "sms=3,impl=1,bm=128,bn=64,stages=2,persistent=1,streamk=1"},
        {100, 96, 300, "nt", PT_BF16, PT_E4M3, "silu(acc + bias[n])", 0, 0.5, 1, false,
         "impl=1,bm=64,bn=96,stages=2,splitk=2"},
        {70, 72, 512, "nt", PT_E4M3, PT_E4M3, "relu(acc) + r", 0, 2, 1, false,
         "sms=3,impl=1,bm=64,bn=32,stages=3,persistent=1,streamk=1"},
        {64, 80, 700, "nt", PT_S8, PT_S32, NULL, 0, 0, 1, false, "impl=1,bm=64,bn=16,stages=2,splitk=4"},
        {40, 72, 300, "nt", PT_TF32, PT_F32, NULL, 0.5, 0, 2, false, "impl=1,bm=64,bn=72,stages=2,splitk=2"},
        {70, 64, 260, "tn", PT_BF16, PT_F32, "tanh(acc) * 2", 0, 0, 1, true,
         "sms=2,impl=1,bm=64,bn=64,stages=2,persistent=1,streamk=1"},
        {70, 48, 400, "nt", PT_BF16, PT_BF16, "relu(acc)", 0, 0, 3, false,
         "sms=4,impl=1,bm=64,bn=48,stages=2,persistent=1,streamk=1"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int sc = 0; sc < 3; sc++, n++) {
            pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
            p.epilogue = cs[i].epi;
            p.beta = cs[i].beta;
            if (cs[i].osc != 0) {
                p.out_scale = cs[i].osc;
                p.has_out_scale = true;
            }
            if (cs[i].dt == PT_E4M3) {
                p.scale_a = 0.5;
                p.scale_b = 0.25;
            }
            p.batch = cs[i].batch;
            p.d_colmajor = cs[i].dcol;
            grid_case(&g, &p, cs[i].cfg, scheds[sc], (uint64_t)(300 + n), NULL);
        }
    grid_report(&g, "wgmma fixup epilogues", t0);
}

/* Deterministic whatever the arrival order: the random schedule at two
 * seeds (different CTA orders, so different last arrivers) gives the same
 * output bytes, for split-K and stream-K. */
Test(gemm_sm90_splitk, fixup_is_deterministic, .timeout = 300)
{
    struct {
        int64_t m, n, k;
        pt_dtype dt;
        const char *cfg;
    } cs[] = {
        {65, 64, 1000, PT_BF16, "impl=1,bm=64,bn=64,stages=3,splitk=4"},
        {129, 65, 700, PT_F16, "sms=5,impl=1,bm=64,bn=32,stages=2,persistent=1,streamk=1"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, "nt", cs[i].dt, PT_F32);
        run_out a, b;
        pt_err e = {0};
        cr_assert_eq(run_emu(&p, cs[i].cfg, EMU_SCHED_RANDOM, 11, true, &a, &e), PT_OK, "%s", e.msg);
        cr_assert_eq(run_emu(&p, cs[i].cfg, EMU_SCHED_RANDOM, 12345, true, &b, &e), PT_OK, "%s", e.msg);
        cr_assert_eq(a.nbits, b.nbits);
        cr_expect(memcmp(a.bits, b.bits, a.nbits) == 0, "%s: outputs differ between schedule seeds", cs[i].cfg);
        free(a.bits);
        free(b.bits);
    }
}

/* Tile N not a power of two: the wgmma N of every dtype's rule (16-bit,
 * tf32, fp8: multiples of 8; s8: 8, 16, 24, then multiples of 16), one
 * and two consumers, staging rows whose units do not divide the threads
 * (bn 192 of bf16: 24 units of 8 per row for 256 threads) or span more
 * than the threads (an odd N: one-element units, 192 per row for 128). */
Test(gemm_sm90_splitk, non_power_of_two_tile_n, .timeout = 300)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi, *cfg;
    } cs[] = {
        {129, 385, 64, "nt", PT_BF16, PT_BF16, NULL, "impl=1,bm=128,bn=192,stages=2"},
        {65, 191, 72, "nt", PT_BF16, PT_F32, "relu(acc + bias[n])", "impl=1,bm=64,bn=192,stages=2"},
        {100, 200, 64, "tn", PT_F16, PT_F16, NULL, "impl=1,bm=64,bn=192,stages=3"},
        {65, 150, 96, "nt", PT_F16, PT_F32, "acc + r", "impl=1,bm=128,bn=160,stages=2"},
        {33, 97, 40, "nt", PT_TF32, PT_F32, NULL, "impl=1,bm=64,bn=96,stages=2"},
        {65, 129, 128, "nt", PT_E4M3, PT_BF16, NULL, "impl=1,bm=64,bn=144,stages=2"},
        {40, 70, 64, "nt", PT_S8, PT_S32, NULL, "impl=1,bm=64,bn=24,stages=2"},
        {40, 100, 64, "nt", PT_S8, PT_S32, NULL, "impl=1,bm=128,bn=48,stages=3"},
        {65, 120, 64, "nt", PT_BF16, PT_BF16, NULL, "impl=1,bm=64,bn=40,stages=2"},
        {130, 300, 64, "nt", PT_BF16, PT_F32, NULL, "sms=3,impl=1,bm=64,bn=96,stages=2,persistent=1"},
        {65, 190, 300, "nt", PT_BF16, PT_F32, NULL, "impl=1,bm=64,bn=192,stages=2,splitk=2"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++, n++) {
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
        p.epilogue = cs[i].epi;
        grid_case(&g, &p, cs[i].cfg, scheds[n % 3], (uint64_t)(400 + n), NULL);
    }
    /* column-major D: the staging rows are n, bn = 192 of them */
    pt_problem p = prob(64, 192, 64, "nt", PT_BF16, PT_F32);
    p.d_colmajor = true;
    grid_case(&g, &p, "impl=1,bm=64,bn=192,stages=2", EMU_SCHED_RANDOM, 499, NULL);
    grid_report(&g, "wgmma non-power-of-two bn", t0);
}

/* ---- adversarial inputs through the fixup (tests/gemm_adv.h; docs/gemm.md
 * "Non-finite and extreme inputs"): NaN, +-inf, inf - inf and inf * 0 whose
 * two halves land in different stream-K units of one tile, values near the
 * maximum and f16 overflow of the summed partials, subnormals, rounding
 * ties (exact: the partials' unit-order sum must round to even once),
 * integer extremes past 2^24 (s32 partials must stay exact), fp8 specials,
 * non-finite bias and C after the fixup; stream-K (units inside tiles, and
 * the one-unit-per-tile plan with the TMA store), split-K, and a persistent
 * grid without either. ---- */

static const adv_spec xa_a_nan = {"NaN in A", ADV_NONE, 1, {{"a", 3, -1, NAN}}, 1};
/* +inf at k = 0 and -inf at k = K - 1 of one column: the first and the last
 * unit of its tile each carry one (the reference: NaN) */
static const adv_spec xa_inf_minus_inf = {"+inf and -inf of one column at both K ends", ADV_NONE, 2,
                                          {{"b", 0, 1, INFINITY}, {"b", -1, 1, -INFINITY}}, 1};
static const adv_spec xa_b_inf = {"+-inf in B at both K ends", ADV_NONE, 2,
                                  {{"b", 0, 1, -INFINITY}, {"b", -1, 0, INFINITY}}, 2};
static const adv_spec xa_inf_zero = {"inf * 0 at the last k", ADV_NONE, 2,
                                     {{"a", 2, -1, INFINITY}, {"b", -1, 3, 0.0}}, 2};
static const adv_spec xa_row_max = {"A row at the maximum, f16 out overflows", ADV_HUGE_ROW, 0, {{0}}, 8};
static const adv_spec xa_huge = {"values near the maximum", ADV_HUGE, 0, {{0}}, 0};
static const adv_spec xa_tiny = {"subnormal A", ADV_TINY_A, 0, {{0}}, 0};
static const adv_spec xa_int = {"integer extremes", ADV_INT_EXT, 0, {{0}}, 0};
static const adv_spec xa_ties = {"rounding ties", ADV_TIES, 0, {{0}}, 0};
static const adv_spec xa_e5m2 = {"e5m2 +-inf and NaN", ADV_NONE, 3,
                                 {{"a", 0, 0, INFINITY}, {"b", -1, 1, -INFINITY}, {"a", 3, -1, NAN}}, 3};
static const adv_spec xa_bias = {"bias +-inf and NaN", ADV_NONE, 3,
                                 {{"bias", 0, 1, INFINITY}, {"bias", 0, -1, -INFINITY}, {"bias", 0, 5, NAN}}, 3};
static const adv_spec xa_act = {"-inf, +inf and NaN in A (activations)", ADV_NONE, 3,
                                {{"a", 0, 0, -INFINITY}, {"a", 1, -1, INFINITY}, {"a", 2, 2, NAN}}, 0};
static const adv_spec xa_c = {"NaN and inf in C", ADV_NONE, 2, {{"c", 1, 1, NAN}, {"c", -1, -1, -INFINITY}}, 2};

static int ties_post(const tuner_io *io, void *arg, pt_err *e)
{
    const adv_arg *g = arg;
    char msg[256];
    if (g->s->fill != ADV_TIES || (io->out[0].dtype != PT_F16 && io->out[0].dtype != PT_BF16))
        return PT_OK;
    int64_t bad = adv_ties_exact(io, g, msg, sizeof msg);
    return bad ? pt_errf(e, PT_ERANGE, "%lld ties not rounded to even; first %s", (long long)bad, msg) : PT_OK;
}

Test(gemm_sm90_splitk, adversarial_inputs_through_the_fixup, .timeout = 300)
{
    double t0 = now();
    /* SK: 2 tiles of 64 x 64 whose 8..16 k tiles split over 3 CTAs (units
     * start and end inside tiles) */
#define SK "sms=3,impl=1,bm=64,bn=64,stages=2,persistent=1,streamk=1"
    static const struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi;
        double beta;
        const char *cfg;
        const adv_spec *s;
    } cs[] = {
        {65, 64, 1000, "nt", PT_BF16, PT_BF16, NULL, 0, SK, &xa_a_nan},
        {65, 64, 1000, "tt", PT_F16, PT_F32, NULL, 0, SK, &xa_inf_minus_inf},
        {65, 64, 520, "nn", PT_BF16, PT_F32, NULL, 0, SK, &xa_b_inf},
        {65, 64, 1000, "nt", PT_BF16, PT_BF16, NULL, 0, SK, &xa_inf_zero},
        {65, 64, 1000, "nt", PT_F16, PT_F16, NULL, 0, SK, &xa_row_max},
        {65, 64, 1000, "nt", PT_F16, PT_F32, NULL, 0, SK, &xa_huge},
        {65, 64, 1000, "nt", PT_BF16, PT_F32, NULL, 0, SK, &xa_tiny},
        {65, 64, 1000, "nt", PT_F16, PT_F16, NULL, 0, SK, &xa_ties},
        {65, 64, 1000, "tt", PT_BF16, PT_BF16, NULL, 0, SK, &xa_ties},
        {65, 64, 2048, "nt", PT_S8, PT_S32, NULL, 0, SK, &xa_int},
        {65, 64, 2048, "nt", PT_U8, PT_S32, NULL, 0, SK, &xa_int},
        {65, 64, 1024, "nt", PT_E5M2, PT_F32, NULL, 0, SK, &xa_e5m2},
        {65, 64, 1000, "nt", PT_BF16, PT_BF16, "acc + bias[n]", 0, SK, &xa_bias},
        {65, 64, 1000, "nt", PT_F16, PT_F32, "relu(acc) + gelu(acc)", 0, SK, &xa_act},
        {65, 64, 1000, "nt", PT_BF16, PT_F32, NULL, 0.5, SK, &xa_c},
        /* whole tiles in every unit at any grid (4 tiles of one k tile, 2 CTAs): the TMA store */
        {128, 128, 64, "nt", PT_BF16, PT_BF16, NULL, 0, "sms=2,impl=1,bm=64,bn=64,stages=2,persistent=1,streamk=1,epi=1",
         &xa_a_nan},
        /* split-K */
        {65, 64, 2048, "nt", PT_S8, PT_S32, NULL, 0, "impl=1,bm=64,bn=64,stages=2,splitk=4", &xa_int},
        {65, 64, 1000, "nt", PT_F16, PT_F16, NULL, 0, "impl=1,bm=64,bn=64,stages=2,splitk=3", &xa_ties},
        /* a persistent grid, whole tiles */
        {129, 128, 72, "nt", PT_BF16, PT_BF16, NULL, 0, "sms=3,impl=1,bm=64,bn=64,stages=2,persistent=1,epi=1", &xa_b_inf},
    };
#undef SK
    int ran = 0, failed = 0;
    char first[1400] = "";
    for (size_t ci = 0; ci < 3 * sizeof cs / sizeof cs[0]; ci++) {
        size_t i = ci / 3;
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
        p.epilogue = cs[i].epi;
        p.beta = cs[i].beta;
        adv_arg g = {.s = cs[i].s, .layout = cs[i].lay, .m = p.m, .n = p.n, .k = p.k, .lda = p.lda, .ldb = p.ldb};
        pt_err e = {0};
        run_out o;
        emu_sched sc = scheds[ci % 3];
        int rc = run_emu_plant(&p, cs[i].cfg, sc, (uint64_t)(600 + ci), false, adv_plant, &g, ties_post, &o, &e);
        if (!rc && g.rc)
            rc = pt_errf(&e, g.rc, "the reference failed at the plant");
        if (!rc && o.checked != p.m * p.n)
            rc = pt_errf(&e, PT_EINVAL, "the verifier compared %lld of %lld elements", (long long)o.checked,
                         (long long)(p.m * p.n));
        if (!rc && g.nonfinite < cs[i].s->min_nonfinite)
            rc = pt_errf(&e, PT_EINVAL, "vacuous: %lld non-finite reference outputs, want >= %lld",
                         (long long)g.nonfinite, (long long)cs[i].s->min_nonfinite);
        ran++;
        if (rc) {
            printf("  FAIL %lldx%lldx%lld %s %s->%s [%s] sched %d %s: %s\n", (long long)p.m, (long long)p.n,
                   (long long)p.k, cs[i].lay, pt_dtype_get(cs[i].dt)->name, pt_dtype_get(cs[i].odt)->name,
                   cs[i].cfg, (int)sc, cs[i].s->name, e.msg);
            if (!failed++)
                snprintf(first, sizeof first, "%s %s: %s", pt_dtype_get(cs[i].dt)->name, cs[i].s->name, e.msg);
        }
    }
    printf("stream-K/split-K adversarial inputs: %d cases, %d failed, %.1f s\n", ran, failed, now() - t0);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* ---- check() ---- */

Test(gemm_sm90_splitk, check_enforces_decompositions_and_wgmma_n)
{
    pt_err e = {0};
    pt_problem p = prob(256, 256, 1024, "nt", PT_BF16, PT_F64);
    pt_problem q = prob(256, 256, 1024, "nt", PT_S8, PT_F64);
    struct {
        const pt_problem *p;
        const char *cfg, *msg; /* msg NULL: accepted */
    } cs[] = {
        {&p, "impl=1,bm=128,bn=128,splitk=4", NULL},
        {&p, "impl=1,bm=128,bn=128,splitk=3", NULL},
        {&p, "impl=1,bm=128,bn=128,persistent=1,streamk=1", NULL},
        {&p, "impl=1,bm=128,bn=192", NULL},
        {&p, "impl=1,bm=128,bn=200", NULL},
        {&p, "impl=1,bm=64,bn=8", NULL},
        {&q, "impl=1,bm=64,bn=24", NULL},
        {&q, "impl=1,bm=64,bn=208", NULL},
        {&p, "impl=1,bm=128,bn=128,splitk=17", "splitk=17: must be 1..16"},
        {&p, "impl=1,bm=128,bn=128,splitk=0", "splitk=0: must be 1..16"},
        {&p, "impl=1,bm=128,bn=128,bk=64,splitk=16,persistent=0", NULL},
        {&p, "impl=1,bm=128,bn=128,streamk=1", "streamk=1 needs persistent=1 or 2"},
        {&p, "impl=1,bm=128,bn=128,streamk=2", "streamk=2: 0 (off) or 1"},
        {&p, "impl=1,bm=128,bn=128,persistent=1,streamk=1,splitk=2", "one or the other"},
        {&p, "impl=1,bm=128,bn=20", "bn=20: not a wgmma N for bf16"},
        {&p, "impl=1,bm=128,bn=264", "bn=264: not a wgmma N for bf16"},
        {&q, "impl=1,bm=64,bn=40", "bn=40: not a wgmma N for s8"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int rc = check_cfg(cs[i].p, cs[i].cfg, &e);
        if (!cs[i].msg) {
            cr_expect_eq(rc, PT_OK, "%s: %s", cs[i].cfg, e.msg);
            continue;
        }
        cr_expect_neq(rc, PT_OK, "%s accepted", cs[i].cfg);
        cr_expect(strstr(e.msg, cs[i].msg) != NULL, "%s: '%s', want '%s'", cs[i].cfg, e.msg, cs[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
    }
    /* more splits than k tiles (K = 100 bf16: 2 k tiles of 64) */
    pt_problem s = prob(64, 64, 100, "nt", PT_BF16, PT_F64);
    cr_expect_neq(check_cfg(&s, "impl=1,bm=64,bn=64,splitk=3", &e), PT_OK);
    cr_expect(strstr(e.msg, "splitk=3: more splits than k tiles (2)") != NULL, "%s", e.msg);
}

/* The space: non-power-of-two N values where they help, split-K and
 * stream-K where the tiles are few or leave a partial wave; the 8192^3
 * bf16 space takes 192 beside 256 and no decomposition. */
Test(gemm_sm90_splitk, space_offers_the_new_values)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    struct {
        int64_t m, n, k;
        const char *want; /* name=value that must be in the space */
    } cs[] = {
        {8192, 8192, 8192, "bn=192"}, {64, 129, 4096, "bn=144"}, {64, 129, 4096, "splitk=4"},
        {64, 129, 4096, "streamk=1"}, {2048, 4096, 512, "streamk=1"}, {64, 100, 256, "bn=96"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = PT_GEMM(cs[i].m, cs[i].n, cs[i].k, "nt", PT_BF16, PT_F64);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_gemm_op.space(pp, &tg, &s);
        char name[32];
        long long v = 0;
        cr_assert_eq(sscanf(cs[i].want, "%31[^=]=%lld", name, &v), 2);
        bool found = false;
        for (int j = 0; j < s.nparams; j++)
            if (strcmp(s.p[j].name, name) == 0)
                for (int k = 0; k < s.p[j].nvalues; k++)
                    found |= s.p[j].values[k] == v;
        cr_expect(found, "%lldx%lldx%lld: %s not in the space", (long long)cs[i].m, (long long)cs[i].n,
                  (long long)cs[i].k, cs[i].want);
        if (cs[i].m == 8192) {
            for (int j = 0; j < s.nparams; j++)
                if (!strcmp(s.p[j].name, "splitk") || !strcmp(s.p[j].name, "streamk"))
                    cr_expect_eq(s.p[j].nvalues, 1, "8192^3: %s has %d values", s.p[j].name, s.p[j].nvalues);
        }
        pt_arena_free(a);
    }
}

/* ---- ptxas sm_90a on the new forms ---- */

Test(gemm_sm90_splitk, new_forms_assemble, .timeout = 300)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    OPEN_PTXAS_OR_SKIP(comp, e);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    struct {
        int64_t m, n, k;
        pt_dtype dt, odt;
        const char *epi, *cfg;
    } cs[] = {
        {256, 512, 4096, PT_BF16, PT_BF16, NULL, "impl=1,bm=128,bn=256,stages=4,splitk=3"},
        {2048, 4096, 512, PT_BF16, PT_BF16, NULL, "impl=1,bm=128,bn=256,stages=4,persistent=1,streamk=1"},
        {2048, 4096, 512, PT_BF16, PT_F32, "relu(acc + bias[n]) + r",
         "impl=1,bm=128,bn=128,stages=4,persistent=1,streamk=1"},
        {8192, 8192, 8192, PT_BF16, PT_BF16, NULL, "impl=1,bm=128,bn=192,stages=4"},
        {8192, 8192, 8192, PT_BF16, PT_BF16, NULL, "impl=1,bm=128,bn=192,stages=4,persistent=1"},
        {4096, 4096, 4096, PT_E4M3, PT_E4M3, NULL, "impl=1,bm=128,bn=160,stages=4,splitk=2"},
        {1024, 1024, 4096, PT_S8, PT_S32, NULL, "impl=1,bm=64,bn=96,stages=4,persistent=1,streamk=1"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = PT_GEMM(cs[i].m, cs[i].n, cs[i].k, "nt", cs[i].dt, cs[i].odt);
        p.epilogue = cs[i].epi;
        if (cs[i].odt == PT_E4M3) {
            p.out_scale = 0.5;
            p.has_out_scale = true;
        }
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        pt_config c;
        gen_gemm_op.space(pp, &tg, &s);
        gen_gemm_op.defaults(pp, &tg, &c);
        cr_assert_eq(pt_config_parse(&s, cs[i].cfg, &c, &e), PT_OK, "%s: %s", cs[i].cfg, e.msg);
        ptx_module *m = NULL;
        pt_launch l;
        cr_assert_eq(pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &m, &l, &e), PT_OK, "%s: %s", cs[i].cfg, e.msg);
        char *text = ptx_print(m);
        pt_resource r;
        expect_assembles_clean(comp, text, &tg, cs[i].cfg, &r);
        printf("  %-60s regs %3d smem %6zu grid %u x %u\n", cs[i].cfg, r.registers, l.smem, l.grid[0], l.grid[1]);
        free(text);
        ptx_module_free(m);
        pt_arena_free(a);
    }
    pt_compiler_close(comp);
}
