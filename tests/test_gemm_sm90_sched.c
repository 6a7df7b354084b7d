/* The sm_90a wgmma GEMM's consumer schedules and clusters (issue 13 item
 * 2, gen/gemm_wgmma.c): pingpong (sched=1: two consumer warpgroups
 * alternate whole 64-row tiles, ordered by named barriers) and clusters of
 * 2 (cluster=21: a pair along M shares B; 12: along N, A; the shared
 * operand multicast by TMA, half from each CTA; empty barriers released in
 * both CTAs; cluster barriers after the barriers' init and before exit).
 *
 * An emulated case is emit -> print -> parse (identical) -> the emu
 * backend (a cluster launch through pt_launch.cluster) at the lazy, eager
 * or random async schedule, every detector on -> tuner_verify against the
 * float64 reference. The new forms also go through ptxas (sm_90a: 0
 * spills, no local memory, no C75xx), and three planted bugs (a cluster
 * kernel without its exit barrier, one without the release to the peer,
 * a pingpong kernel whose consumers share one staging region) must be
 * reported. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/gemm.h"
#include "ptx/compile.h"
#include "ptx/parse.h"
#include "ptx/emu/emu.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"
#include "gemm_sm90_util.h"
#include "test_util.h"

/* A text edit of the emitted PTX before it runs (a planted bug); returns
 * false when the text has nothing to edit. */
typedef bool (*mutate_fn)(char *text);

typedef struct run_out {
    double max_err, seconds;
    char config[256];
    pt_launch l;
} run_out;

/* One problem with config (over the op's defaults) on the emulator at
 * schedule sched; the verifier's status, its message in e. */
static int run_on(const char *backend, const pt_problem *p, const char *config, emu_sched sched, uint64_t seed,
                  mutate_fn mut, run_out *o, pt_err *e)
{
    memset(o, 0, sizeof *o);
    char cbuf[512];
    int sms; /* the emulator device's SMs (a config item "sms=N"; prepare_config drops it) */
    config_sms(config, &sms, cbuf, sizeof cbuf);
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
    if (!rc) {
        pt_config_str(&c, o->config, sizeof o->config);
        rc = pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &built, &o->l, e);
    }
    if (!rc)
        rc = print_round_trip(built, &text, &parsed, e);
    if (!rc && mut && !mut(text))
        rc = pt_errf(e, PT_EINTERNAL, "the planted bug found nothing to edit");
    if (!rc)
        rc = open_load_io_sms(backend, sched, seed, sms, text, o->l.entry, pp, p, NULL, NULL, &d, &k, &io, e);
    if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result vr;
        rc = tuner_verify(d, k, &o->l, io, &vo, &vr, e);
        o->max_err = vr.max_err;
        emu_stats st;
        if (tuner_emu_last_run(d, &st) == PT_OK)
            o->seconds = st.seconds;
    }
    run_release(d, k, io, text, parsed, built, a);
    return rc;
}

static int run_emu(const pt_problem *p, const char *config, emu_sched sched, uint64_t seed, mutate_fn mut,
                   run_out *o, pt_err *e)
{
    return run_on("emu", p, config, sched, seed, mut, o, e);
}

enum { NDT = 3 };
static const pt_dtype dts[NDT] = {PT_BF16, PT_F16, PT_E4M3};
static const emu_sched scheds[3] = {EMU_SCHED_LAZY, EMU_SCHED_EAGER, EMU_SCHED_RANDOM};

_Static_assert((int)NDT <= (int)GRID_MAXDT, "the grid tallies NDT dtypes");
typedef sm90_grid grid;

static void grid_case(grid *g, const pt_problem *p, const char *config, emu_sched sched, uint64_t seed)
{
    pt_err e = {0};
    run_out o;
    grid_trace(p, config, sched);
    int rc = run_emu(p, config, sched, seed, NULL, &o, &e);
    int di = 0;
    while (di < NDT - 1 && dts[di] != p->dtype)
        di++;
    grid_tally(g, di, rc, o.max_err, o.seconds, p, o.config, sched, e.msg);
}

static void grid_report(const grid *g, const char *what, double t0)
{
    grid_report_dts(g, what, t0, dts, NDT, true);
}

/* The schedules under test, each with persistent off and on (a device
 * of 3 SMs: 3 CTAs walking the units; 4 SMs: 2 pairs). */
static const char *const forms[][2] = {
    {"impl=1,bm=64,sched=1", "impl=1,bm=64,sched=1,sms=3,persistent=1"},
    {"impl=1,cluster=21", "impl=1,cluster=21,sms=4,persistent=1"},
    {"impl=1,cluster=12", "impl=1,cluster=12,sms=4,persistent=1"},
    {"impl=1,bm=64,sched=1,cluster=21", "impl=1,bm=64,sched=1,cluster=12,sms=4,persistent=1"},
};
enum { NFORMS = sizeof forms / sizeof forms[0] };

/* Every form x bf16 / f16 / e4m3 x odd M, N, K (1 7 65 129 257) x
 * persistent off and on, with a bias + activation + residual epilogue on
 * half the cases, each under one of the three schedules (rotating), a
 * ring of 2..4 stages, both wg_wait. */
Test(gemm_sm90_sched, pingpong_and_clusters_on_the_emulator, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    static const int64_t shapes[][3] = {{129, 65, 7},  {65, 257, 65}, {257, 7, 129},
                                        {7, 129, 257}, {1, 65, 65},   {130, 129, 1}};
    static const char *const lays[NDT] = {"nt", "tn", "nt"};
    static const char *const bns[] = {"bn=64", "bn=32", "bn=128"};
    int n = 0;
    for (int fi = 0; fi < NFORMS; fi++)
        for (int di = 0; di < NDT; di++)
            for (int si = 0; si < 6; si++, n++) {
                const int64_t *s = shapes[si];
                bool epi = (n % 2) == 0;
                pt_problem p = prob(s[0], s[1], s[2], lays[(di + si) % NDT][0] == 't' && dts[di] != PT_E4M3
                                                          ? lays[1] : "nt",
                                    dts[di], epi ? PT_F32 : PT_F64);
                if (dts[di] == PT_BF16 && si % 3 == 1)
                    p = prob(s[0], s[1], s[2], "tt", dts[di], epi ? PT_F32 : PT_F64);
                if (epi)
                    p.epilogue = "relu(acc + bias[n]) + r";
                char cfg[192];
                bool bn_mn = p.layout[1] == 'n';
                snprintf(cfg, sizeof cfg, "%s,%s,stages=%d,wg_wait=%d", forms[fi][si % 2],
                         bn_mn ? "bn=64" : bns[si % 3], 2 + si % 3, n % 3 == 0 ? 0 : 1);
                grid_case(&g, &p, cfg, scheds[n % 3], (uint64_t)n);
            }
    grid_report(&g, "pingpong / clusters", t0);
}

/* Batches (grid z) under both forms; an MN-major shared B of two 64-row
 * boxes (one per rank) and of one (rank 0 alone); fp8 output with a scale;
 * raster groups over pair tiles; beta C. */
Test(gemm_sm90_sched, batches_boxes_and_rasters, .timeout = 300)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t m, n, k, batch;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi, *cfg;
        double beta;
    } cs[] = {
        {129, 100, 72, 2, "nt", PT_BF16, PT_BF16, "gelu(acc)", "impl=1,bm=64,bn=32,sched=1,sms=2,persistent=1", 0},
        {200, 65, 64, 3, "nt", PT_F16, PT_F32, NULL, "impl=1,bm=64,bn=64,cluster=21,stages=3", 0.5},
        {257, 256, 64, 1, "tn", PT_BF16, PT_F32, "acc + bias[n]", "impl=1,bm=64,bn=128,cluster=21", 0},
        {130, 129, 96, 1, "nn", PT_BF16, PT_F32, NULL, "impl=1,bm=64,bn=64,sched=1,cluster=21,sms=4,persistent=1", 0},
        {300, 520, 64, 1, "nt", PT_BF16, PT_F32, NULL, "impl=1,bm=64,bn=32,cluster=12,raster=2,sms=6,persistent=1", 0},
        {96, 257, 128, 1, "nt", PT_E4M3, PT_E4M3, "relu(acc)", "impl=1,bm=64,bn=64,sched=1,cluster=12", 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
        p.epilogue = cs[i].epi;
        p.batch = cs[i].batch;
        p.beta = cs[i].beta;
        grid_case(&g, &p, cs[i].cfg, scheds[i % 3], (uint64_t)(300 + i));
    }
    grid_report(&g, "batches / boxes / rasters", t0);
}

/* The cuda backend over the fake driver (tests/fake_cuda.c: its
 * cuLaunchKernelEx takes the cluster attribute and runs the launch on the
 * emulator): pt_launch.cluster reaches the driver as
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION. */
Test(gemm_sm90_sched, cuda_backend_launches_clusters_through_the_fake_driver, .timeout = 120)
{
    LOAD_FAKE_CUDA_OR_SKIP();
    static const char *const cfgs[] = {"impl=1,bm=128,bn=64,cluster=21,sms=2,persistent=1",
                                       "impl=1,bm=64,bn=64,sched=1,cluster=12"};
    for (int i = 0; i < 2; i++) {
        pt_problem p = prob(257, 129, 72, "nt", PT_BF16, PT_F64);
        pt_err e = {0};
        run_out o;
        int rc = run_on("cuda", &p, cfgs[i], EMU_SCHED_LAZY, 0, NULL, &o, &e);
        cr_expect_eq(rc, PT_OK, "[%s]: %s", o.config, e.msg);
        cr_expect_eq(o.l.cluster[0], 2u);
    }
}

/* check() refuses what the schedules cannot do, in one line each. */
Test(gemm_sm90_sched, check_refuses_illegal_combinations)
{
    pt_problem p = PT_GEMM(4096, 4096, 4096, "nt", PT_BF16, PT_F64);
    pt_err e;
    struct {
        const char *cfg, *msg;
    } bad[] = {
        {"impl=1,bm=256,sched=1", "bm=256: 64 or 128"},
        {"impl=1,bm=128,bn=256,sched=1", "sched=1 with bm=128, bn=256: 256 accumulators per thread"},
        {"impl=1,bm=128,bn=144,sched=1", "144 accumulators per thread (a whole 128-row tile per consumer) leave "
                                         "too few of setmaxnreg's 232 registers (bn <= 128)"},
        {"impl=1,sched=2", "sched=2: 0 (cooperative) or 1 (pingpong)"},
        {"impl=1,cluster=2", "cluster=2: 1 (none), 21 (2x1"},
        {"impl=1,cluster=22", "cluster=22: 1 (none)"},
        {"impl=1,cluster=21,persistent=3", "persistent=3: 0 (off), 1 or 2 (CTAs per SM"},
        {"impl=1,cluster=12,splitk=2", "splitk=2: not with sched=1 or a cluster"},
        {"impl=1,bm=64,sched=1,splitk=2", "splitk=2: not with sched=1 or a cluster"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(check_cfg(&p, bad[i].cfg, &e), PT_EINVAL, "%s accepted", bad[i].cfg);
        cr_expect(strstr(e.msg, bad[i].msg) != NULL, "%s: '%s'", bad[i].cfg, e.msg);
        cr_expect(strchr(e.msg, '\n') == NULL, "one line: %s", e.msg);
    }
    cr_expect_eq(check_cfg(&p, "impl=1,bm=64,sched=1,cluster=21,persistent=1", &e), PT_OK, "%s", e.msg);
    cr_expect_eq(check_cfg(&p, "impl=1,bm=128,cluster=12", &e), PT_OK, "%s", e.msg);
}

/* The cluster in the search space (issue 13 item 5): 21 where the
 * problem has two tile rows of the largest tile (128), 12 where it has two
 * tile columns (256); check() keeps what a cluster launch and its multicast
 * need (a persistent grid is a whole number of pairs at launch:
 * pt_launch_grid_x),
 * each CTA's half of a K-major shared operand a whole 8-row swizzle group
 * (its TMA destination on the pattern's 1024-byte boundary). */
static void cluster_values(const pt_problem *p, int64_t *v, int *n)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_space s;
    gen_gemm_op.space(pp, &tg, &s);
    *n = 0;
    for (int i = 0; i < s.nparams; i++)
        if (strcmp(s.p[i].name, "cluster") == 0)
            for (int j = 0; j < s.p[i].nvalues; j++)
                v[(*n)++] = s.p[i].values[j];
    pt_arena_free(a);
}

Test(gemm_sm90_sched, cluster_is_in_the_space_and_check_keeps_it_legal)
{
    struct {
        int64_t m, n;
        int nv;
        int64_t v[3];
    } cs[] = {
        {8192, 8192, 3, {1, 21, 12}},
        {129, 257, 3, {1, 21, 12}},
        {128, 4096, 2, {1, 12}},
        {4096, 256, 2, {1, 21}},
        {64, 64, 1, {1}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob(cs[i].m, cs[i].n, 512, "nt", PT_BF16, PT_F64);
        int64_t v[PT_MAX_VALUES];
        int n;
        cluster_values(&p, v, &n);
        cr_expect_eq(n, cs[i].nv, "%lldx%lld: %d cluster values", (long long)cs[i].m, (long long)cs[i].n, n);
        for (int j = 0; j < n && j < cs[i].nv; j++)
            cr_expect_eq(v[j], cs[i].v[j], "%lldx%lld: value %d", (long long)cs[i].m, (long long)cs[i].n, j);
    }
    pt_problem p = PT_GEMM(4096, 4096, 4096, "nt", PT_BF16, PT_F64);
    pt_err e;
    struct {
        const char *cfg, *msg;
    } bad[] = {
        {"impl=1,cluster=12,persistent=131", "persistent=131: 0 (off), 1 or 2"},
        {"impl=1,bm=64,bn=40,cluster=21", "cluster=21 with bn=40: each CTA multicasts 20 rows of B"},
        {"impl=1,bm=64,bn=24,cluster=21", "cluster=21 with bn=24: each CTA multicasts 12 rows of B"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(check_cfg(&p, bad[i].cfg, &e), PT_EINVAL, "%s accepted", bad[i].cfg);
        cr_expect(strstr(e.msg, bad[i].msg) != NULL, "%s: '%s'", bad[i].cfg, e.msg);
        cr_expect(strchr(e.msg, '\n') == NULL, "one line: %s", e.msg);
    }
    /* legal: halves of 8-row groups (bn 48: 24 rows), A's halves (bm 64,
     * 128), an MN-major B's 64-column boxes, even grids */
    static const char *const good[] = {"impl=1,bm=64,bn=48,cluster=21", "impl=1,bm=64,bn=40,cluster=12",
                                       "impl=1,bm=128,bn=256,cluster=21,persistent=1"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_expect_eq(check_cfg(&p, good[i], &e), PT_OK, "%s: %s", good[i], e.msg);
    pt_problem q = PT_GEMM(4096, 4096, 4096, "nn", PT_BF16, PT_F64);
    cr_expect_eq(check_cfg(&q, "impl=1,bm=64,bn=64,cluster=21", &e), PT_OK, "nn: %s", e.msg);
}

/* Pingpong with 128-row consumer tiles (issue 13 item 2): each consumer
 * warpgroup owns a whole bm=128 tile, two m64 wgmmas per k step into two
 * accumulator sets, its epilogue per 64-row half; with persistent grids,
 * a cluster, the TMA-store epilogue, bf16/f16/e4m3, MN-major operands,
 * odd M/N/K, an epilogue with bias and residual, the three schedules. */
Test(gemm_sm90_sched, pingpong_with_128_row_tiles_on_the_emulator, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi, *cfg;
    } cs[] = {
        {257, 129, 65, "nt", PT_BF16, PT_F64, NULL, "bm=128,bn=64,stages=2"},
        {129, 200, 129, "tt", PT_BF16, PT_F32, "relu(acc + bias[n]) + r", "bm=128,bn=128,stages=3,sms=3,persistent=1"},
        {300, 64, 257, "tn", PT_F16, PT_F64, NULL, "bm=128,bn=64,stages=4,wg_wait=0"},
        {1, 65, 7, "nt", PT_BF16, PT_F64, NULL, "bm=128,bn=32,stages=2"},
        {257, 96, 128, "nt", PT_E4M3, PT_BF16, "gelu(acc)", "bm=128,bn=48,stages=3,sms=2,persistent=1"},
        {200, 160, 96, "nt", PT_F16, PT_F16, NULL, "bm=128,bn=128,stages=2"},
        {260, 130, 64, "nt", PT_BF16, PT_BF16, NULL, "bm=128,bn=64,stages=2,epi=1,sms=3,persistent=1"},
        {300, 129, 64, "nt", PT_BF16, PT_F32, NULL, "bm=128,bn=64,stages=2,cluster=21,sms=4,persistent=1"},
        {130, 257, 128, "nt", PT_E4M3, PT_F32, NULL, "bm=128,bn=64,stages=2,cluster=12"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int sc = 0; sc < 3; sc++, n++) {
            pt_problem p = prob_ldd(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
            p.epilogue = cs[i].epi;
            char cfg[192];
            snprintf(cfg, sizeof cfg, "impl=1,sched=1,%s", cs[i].cfg);
            grid_case(&g, &p, cfg, scheds[sc], (uint64_t)(700 + n));
        }
    grid_report(&g, "pingpong, 128-row consumer tiles", t0);
    cr_expect_eq(g.cases, 3 * (int)(sizeof cs / sizeof cs[0]));
    /* the consumer's k loop: two m64 wgmmas per k16 step (4 steps of bk 64) */
    pt_problem p = PT_GEMM(8192, 8192, 8192, "nt", PT_BF16, PT_F64);
    pt_launch l;
    char *t = emit_text(&p, "impl=1,bm=128,bn=128,sched=1,persistent=1", &l);
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), 8, "2 x 4 per k tile");
    cr_expect_eq(count(t, "wgmma.commit_group.sync.aligned;"), 1);
    cr_expect_eq(l.block[0], 384u);
    cr_expect(strstr(t, "], 4;") != NULL, "empty counts the 4 warps of the unit's consumer");
    free(t);
}

/* Lines holding both a and b, a first. */
static int count_lines(const char *t, const char *a, const char *b)
{
    int n = 0;
    for (const char *q = strstr(t, a); q; q = strstr(q + 1, a)) {
        const char *eol = strchr(q, '\n'), *hit = strstr(q, b);
        n += hit && (!eol || hit < eol);
    }
    return n;
}

/* The launch of a cluster form: grid a multiple of the cluster (2, 1, 1),
 * the entry's .explicitcluster / .reqnctapercluster, and the PTX's
 * multicast loads, remote releases and cluster barriers; pingpong's named
 * barriers. */
Test(gemm_sm90_sched, launch_and_structure)
{
    pt_problem p = PT_GEMM(8192, 8192, 8192, "nt", PT_BF16, PT_F64);
    pt_launch l;
    char *t = emit_text(&p, "impl=1,bm=128,bn=256,cluster=21,persistent=1", &l);
    cr_expect_eq(l.cluster[0], 2u);
    cr_expect_eq(l.cluster[1], 1u);
    /* persistent: the natural grid (a pair per 256 x 256 unit), K = 1 CTA
     * an SM at launch, whole pairs, at least one */
    cr_expect_eq(l.grid[0], 2u * 32 * 32);
    cr_expect_eq(l.grid_per_sm, 1u);
    cr_expect_eq(pt_launch_grid_x(&l, 132), 132u);
    cr_expect_eq(pt_launch_grid_x(&l, 7), 6u);
    cr_expect_eq(pt_launch_grid_x(&l, 1), 2u);
    cr_expect(strstr(t, ".explicitcluster\n") && strstr(t, ".reqnctapercluster 2, 1, 1\n"), "%.600s", t);
    cr_expect_eq(count(t, ".multicast::cluster"), 1, "B: one half-box multicast per CTA");
    cr_expect_eq(l.tmaps[1].box[1], 128u, "B's box is half the tile");
    cr_expect_eq(count(t, "mbarrier.arrive.release.cluster.shared::cluster.b64 _, ["), 2,
                 "the release to the peer, in the loop and after it");
    cr_expect_eq(count(t, "fence.mbarrier_init.release.cluster;"), 1);
    cr_expect_eq(count(t, "barrier.cluster.arrive;"), 2, "after the init, before exit");
    cr_expect_eq(count(t, "barrier.cluster.wait;"), 2);
    cr_expect(strstr(t, "], 16;") != NULL, "empty counts 8 warps in each of 2 CTAs");
    free(t);
    t = emit_text(&p, "impl=1,bm=128,bn=256,cluster=12", &l);
    cr_expect_eq(l.grid[0], 2u * 64 * 16, "one pair per 128 x 512 unit");
    cr_expect_eq(l.tmaps[0].box[1], 64u, "A's box is half the tile");
    free(t);
    t = emit_text(&p, "impl=1,bm=64,bn=256,sched=1", &l);
    cr_expect_eq(l.cluster[0], 0u);
    cr_expect_eq(l.grid[0], 128u * 32 / 2, "two units per CTA");
    cr_expect_eq(l.block[0], 384u);
    cr_expect_eq(count_lines(t, "bar.sync %", ", 256;"), 1, "the turn's wait");
    cr_expect_eq(count_lines(t, "bar.arrive %", ", 256;"), 1, "the hand-over");
    cr_expect_gt(count_lines(t, "bar.sync %", ", 128;"), 0, "the epilogue's own barrier");
    cr_expect(strstr(t, "], 4;") != NULL, "empty counts the 4 warps of the unit's consumer");
    free(t);
}

/* Every new form for the 8192^3 bf16 problems assembles with ptxas
 * sm_90a: 0 spills, no local memory, no C75xx. */
Test(gemm_sm90_sched, new_forms_assemble, .timeout = 300)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    OPEN_PTXAS_OR_SKIP(comp, e);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    struct {
        const char *lay;
        pt_dtype dt;
        const char *cfg;
    } cs[] = {
        {"nt", PT_BF16, "impl=1,bm=64,bn=256,sched=1,persistent=1"},
        {"nt", PT_BF16, "impl=1,bm=64,bn=128,sched=1"},
        {"nt", PT_BF16, "impl=1,bm=128,bn=256,cluster=21,persistent=1"},
        {"nt", PT_BF16, "impl=1,bm=128,bn=256,cluster=12"},
        {"nt", PT_BF16, "impl=1,bm=64,bn=256,sched=1,cluster=21,persistent=1"},
        {"tt", PT_F16, "impl=1,bm=128,bn=128,cluster=12,persistent=1"},
        {"nn", PT_BF16, "impl=1,bm=64,bn=256,sched=1,cluster=21"},
        {"nt", PT_E4M3, "impl=1,bm=64,bn=256,sched=1,cluster=12,persistent=1"},
        {"nt", PT_BF16, "impl=1,bm=128,bn=128,sched=1,persistent=1"},
        {"tt", PT_F16, "impl=1,bm=128,bn=128,sched=1"},
        {"nt", PT_E4M3, "impl=1,bm=128,bn=128,sched=1,cluster=21,persistent=1,epi=1"},
    };
    double t0 = now();
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = PT_GEMM(8192, 8192, 8192, cs[i].lay, cs[i].dt, PT_F64);
        if (i % 2)
            p.epilogue = "relu(acc + bias[n]) + r";
        pt_launch l;
        char *text = emit_text(&p, cs[i].cfg, &l);
        char what[128];
        snprintf(what, sizeof what, "%s %s", cs[i].lay, cs[i].cfg);
        pt_resource r;
        expect_assembles_clean(comp, text, &tg, what, &r);
        printf("  %s %-52s regs %3d smem %6zu grid %u cluster %u\n", cs[i].lay, cs[i].cfg, r.registers, l.smem,
               l.grid[0], l.cluster[0]);
        free(text);
    }
    printf("new forms: %zu through ptxas in %.1f s\n", sizeof cs / sizeof cs[0], now() - t0);
    pt_compiler_close(comp);
}

/* A planted pingpong bug, a text edit of a correct kernel's PTX: both
 * consumers stage their epilogue in the same region (the per-consumer
 * offset, mad.lo.u32 of cwg by the region's bytes after the consumer's
 * thread renumbering, made 0). The epilogues of two units overlap (what
 * pingpong is for), so the staged epilogue (a residual) races: reported
 * under every schedule; the unedited kernel passes. (A kernel without the
 * order barriers is not a bug: the ring alone keeps the result right.) */
static bool share_staging(char *t)
{
    char *q = strstr(t, ", 127;\n");
    q = q ? strstr(q, "\tmad.lo.u32 ") : NULL;
    if (!q)
        return false;
    char *c1 = strchr(q, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL, *c3 = c2 ? strchr(c2 + 1, ',') : NULL;
    if (!c3 || c3 - c2 < 3)
        return false;
    memset(c2 + 1, ' ', (size_t)(c3 - c2 - 1));
    c3[-1] = '0';
    return true;
}

Test(gemm_sm90_sched, planted_pingpong_bug_is_reported, .timeout = 300)
{
    pt_problem p = prob(130, 64, 64, "nt", PT_BF16, PT_F32);
    p.epilogue = "acc + r";
    const char *cfg = "impl=1,bm=64,bn=64,stages=2,sched=1";
    pt_err e = {0};
    run_out o;
    cr_expect_eq(run_emu(&p, cfg, EMU_SCHED_LAZY, 1, NULL, &o, &e), PT_OK, "the fixed twin: %s", e.msg);
    for (int sc = 0; sc < 3; sc++) {
        memset(&e, 0, sizeof e);
        int rc = run_emu(&p, cfg, scheds[sc], (uint64_t)(11 + sc), share_staging, &o, &e);
        cr_expect_neq(rc, PT_OK, "one staging region, schedule %d: not reported", sc);
        printf("  one staging region, schedule %d: %s\n", sc, e.msg);
    }
}

/* Planted bugs, text edits of a correct cluster kernel's PTX: (1) the exit
 * barrier gone: a CTA may exit while its peer still arrives on its empty
 * barriers (remote arrive into an exited CTA); (2) the releases to the
 * peer gone and the empty count halved to match: a producer overwrites
 * (multicasts into) a stage its peer's wgmmas may still read. Each must
 * be reported under every schedule; the unedited kernel passes. */
static bool drop_exit_barrier(char *t)
{
    char *last = NULL;
    for (char *q = strstr(t, "\tbarrier.cluster.arrive;\n"); q; q = strstr(q + 1, "\tbarrier.cluster.arrive;\n"))
        last = q;
    if (!last)
        return false;
    /* "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n" before ret */
    char *w = strstr(last, "\tbarrier.cluster.wait;\n");
    if (!w)
        return false;
    memset(last, ' ', (size_t)(w + strlen("\tbarrier.cluster.wait;\n") - last) - 1);
    return true;
}

static bool drop_peer_release(char *t)
{
    int n = 0;
    for (char *q = strstr(t, "mbarrier.arrive.release.cluster.shared::cluster.b64"); q;
         q = strstr(q + 1, "mbarrier.arrive.release.cluster.shared::cluster.b64")) {
        char *eol = strchr(q, ';');
        /* the guard "@%p1 " before it stays: a guarded no-op is not PTX, so
         * blank the whole line */
        char *bol = q;
        while (bol > t && bol[-1] != '\n')
            bol--;
        memset(bol, ' ', (size_t)(eol - bol + 1));
        n++;
    }
    int m = 0;
    for (char *q = strstr(t, "], 16;"); q; q = strstr(q + 1, "], 16;")) {
        memcpy(q, "],  8;", 6);
        m++;
    }
    return n > 0 && m > 0;
}

Test(gemm_sm90_sched, planted_cluster_bugs_are_reported, .timeout = 300)
{
    pt_problem p = prob(257, 129, 129, "nt", PT_BF16, PT_F64);
    const char *cfg = "impl=1,bm=128,bn=64,stages=2,cluster=21,sms=2,persistent=1";
    pt_err e = {0};
    run_out o;
    cr_expect_eq(run_emu(&p, cfg, EMU_SCHED_LAZY, 1, NULL, &o, &e), PT_OK, "the fixed twin: %s", e.msg);
    struct {
        mutate_fn f;
        const char *what;
    } bugs[] = {{drop_exit_barrier, "no exit barrier"}, {drop_peer_release, "no release to the peer"}};
    for (size_t b = 0; b < 2; b++)
        for (int sc = 0; sc < 3; sc++) {
            memset(&e, 0, sizeof e);
            int rc = run_emu(&p, cfg, scheds[sc], (uint64_t)(7 + sc), bugs[b].f, &o, &e);
            cr_expect_neq(rc, PT_OK, "%s, schedule %d: not reported", bugs[b].what, sc);
            printf("  %s, schedule %d: %s\n", bugs[b].what, sc, e.msg);
        }
}
