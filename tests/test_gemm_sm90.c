/* The Hopper GEMM (issue 13): the wgmma main loop of the gemm op
 * (gen/gemm_wgmma.c) on the emulator against the float64 reference, every
 * detector on, under the lazy, eager and random async schedules; the
 * tensor-map binding of the verifier; and the compile gate over the
 * sm_90a space.
 *
 * An emulated case is emit -> print -> parse (identical) -> the emu
 * backend at the chosen schedule -> tuner_verify (random inputs, poisoned
 * outputs, the verifier's error model). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include "gemm_adv.h"
#include "gen/gemm.h"
#include "ptx/compile.h"
#include "ptx/emu/tmap.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"
#include "test_space.h"
#include "gemm_sm90_util.h"
#include "test_util.h"

/* ---- item 4: the verifier binds tensor maps ---- */

/* A launch whose parameter 1 is a map over input 0 at byte offset 256:
 * tuner_args_bind encodes it over the input's device pointer (the value
 * the emulator's TMA decodes), 64-byte aligned; before issue 13 the
 * binder refused every tensor map. */
Test(gemm_sm90, args_bind_encodes_tensor_maps)
{
    pt_err e = {0};
    tuner_dev *d = NULL;
    tuner_dev_opts o = {0};
    cr_assert_eq(tuner_dev_open("emu", &o, &d, &e), PT_OK, "%s", e.msg);
    tuner_ptr in[2] = {0}, out[1] = {0};
    cr_assert_eq(tuner_alloc(d, 64 * 128 * 2 + 256, &in[0], &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_alloc(d, 1024, &out[0], &e), PT_OK, "%s", e.msg);
    pt_launch l;
    memset(&l, 0, sizeof l);
    l.nargs = 3;
    l.args[0] = (pt_arg){PT_ARG_OUTPUT, 0, 0, 0};
    l.args[1] = (pt_arg){PT_ARG_TENSORMAP, 0, 0, 0};
    l.args[2] = (pt_arg){PT_ARG_U32, 0, 7, 0};
    l.ntmaps = 1;
    l.tmaps[0] = (pt_tmap){.of = PT_ARG_INPUT, .index = 0, .offset = 256, .dtype = EMU_TMAP_BF16,
                           .rank = 2, .dims = {128, 64}, .strides = {256}, .box = {64, 64},
                           .swizzle = EMU_TMAP_SWIZZLE_128B, .l2promo = EMU_TMAP_L2_256B};
    tuner_args a;
    cr_assert_eq(tuner_args_bind(d, &a, &l, in, out, NULL, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(*(uint64_t *)a.p[0], out[0]);
    cr_expect_eq(*(uint32_t *)a.p[2], 7u);
    cr_expect_eq((uintptr_t)a.p[1] % 64, 0u, "the map is 64-byte aligned");
    emu_tmap_desc m;
    cr_assert_eq(emu_tmap_decode(a.p[1], &m, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(m.gaddr, in[0] + 256, "the map bakes in the input's pointer plus its offset");
    cr_expect_eq(m.dims[0], 128u);
    cr_expect_eq(m.dims[1], 64u);
    cr_expect_eq(m.box[0], 64u);
    cr_expect_eq(m.swizzle, EMU_TMAP_SWIZZLE_128B);
    /* a map the encoder refuses (box row past the swizzle span) is an error */
    l.tmaps[0].box[0] = 128;
    cr_expect_neq(tuner_args_bind(d, &a, &l, in, out, NULL, &e), PT_OK);
    cr_expect(strstr(e.msg, "swizzle") != NULL, "%s", e.msg);
    /* an index past the launch's maps */
    l.tmaps[0].box[0] = 64;
    l.args[1].index = 3;
    cr_expect_eq(tuner_args_bind(d, &a, &l, in, out, NULL, &e), PT_EINVAL);
    tuner_free(d, in[0]);
    tuner_free(d, out[0]);
    tuner_dev_close(d);
}

/* ---- items 1-3 and 5: the wgmma GEMM on the emulator ---- */

typedef struct run_out {
    double max_err, seconds;
    uint64_t lanes;
    int64_t checked; /* output elements the verifier compared */
    char config[256];
} run_out;

/* One problem on the emulator at schedule sched (seed for the random one):
 * config over the op's defaults (NULL: the defaults), which must be the
 * wgmma loop's (impl=1). Returns the verifier's status; the message in e. */
/* post (NULL: none): called with the kernel's outputs in io->out[i].data
 * after a passing verification; its status is the run's. */
static int (*run_post)(const tuner_io *io, void *arg, pt_err *e);

static int run_on_plant(const char *backend, const pt_problem *p, const char *config, emu_sched sched,
                        uint64_t seed, void (*plant)(tuner_io *, void *), void *plant_arg, run_out *o,
                        pt_err *e)
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
    pt_launch l;
    int rc = prepare_config(a, p, &tg, config, &pp, &c, e);
    if (!rc && pt_config_get(&c, "impl", 0) != 1)
        rc = pt_errf(e, PT_EINVAL, "not the wgmma loop: %s", pt_config_str(&c, o->config, sizeof o->config));
    if (!rc) {
        pt_config_str(&c, o->config, sizeof o->config);
        rc = pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &built, &l, e);
    }
    if (!rc)
        rc = print_round_trip(built, &text, &parsed, e);
    if (!rc)
        rc = open_load_io_sms(backend, sched, seed, sms, text, l.entry, pp, p, plant, plant_arg, &d, &k, &io, e);
    if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result vr;
        rc = tuner_verify(d, k, &l, io, &vo, &vr, e);
        o->max_err = vr.max_err;
        o->checked = vr.checked;
        if (!rc && run_post)
            rc = run_post(io, plant_arg, e);
        emu_stats st;
        if (tuner_emu_last_run(d, &st) == PT_OK) {
            o->lanes = st.lane_instructions;
            o->seconds = st.seconds;
        }
    }
    run_release(d, k, io, text, parsed, built, a);
    return rc;
}

static int run_on(const char *backend, const pt_problem *p, const char *config, emu_sched sched, uint64_t seed,
                  run_out *o, pt_err *e)
{
    return run_on_plant(backend, p, config, sched, seed, NULL, NULL, o, e);
}

static int run_emu(const pt_problem *p, const char *config, emu_sched sched, uint64_t seed, run_out *o, pt_err *e)
{
    return run_on("emu", p, config, sched, seed, o, e);
}

enum { NDT = 7 };
static const pt_dtype dts[NDT] = {PT_BF16, PT_F16, PT_TF32, PT_E4M3, PT_E5M2, PT_S8, PT_U8};

_Static_assert((int)NDT <= (int)GRID_MAXDT, "the grid tallies NDT dtypes");
typedef sm90_grid grid;

static void grid_case(grid *g, const pt_problem *p, const char *config, emu_sched sched, uint64_t seed)
{
    pt_err e = {0};
    run_out o;
    grid_trace(p, config, sched);
    int rc = run_emu(p, config, sched, seed, &o, &e);
    int di = 0;
    while (di < NDT - 1 && dts[di] != p->dtype)
        di++;
    grid_tally(g, di, rc, o.max_err, o.seconds, p, config ? config : o.config, sched, e.msg);
}

static void grid_report(const grid *g, const char *what, double t0)
{
    grid_report_dts(g, what, t0, dts, NDT, true);
}

static const emu_sched scheds[3] = {EMU_SCHED_LAZY, EMU_SCHED_EAGER, EMU_SCHED_RANDOM};

/* Every dtype and layout it allows, odd M/N/K, both consumer counts and
 * several tiles and ring depths, wg_wait 0 and 1 (the default), each case
 * under the three schedules (random: seed = case number). */
Test(gemm_sm90, emulator_grid_dtypes_layouts_odd_shapes, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    static const int64_t shapes[][3] = {{1, 7, 65}, {65, 129, 7}, {129, 65, 257}, {7, 1, 129}, {257, 33, 96}};
    static const char *const cfg16[] = {"bm=64,bn=16,stages=2,wg_wait=0", "bm=128,bn=64,stages=3,wg_wait=0", "bm=128,bn=128,stages=4",
                                        "bm=64,bn=256,stages=2", "bm=128,bn=32,stages=5"};
    static const char *const cfg16mn[] = {"bm=64,bn=64,stages=2", "bm=128,bn=64,stages=3,wg_wait=0", "bm=128,bn=128,stages=4",
                                          "bm=64,bn=256,stages=2", "bm=128,bn=128,stages=5"};
    static const char *const cfg8[] = {"bm=64,bn=16,stages=2,wg_wait=0", "bm=128,bn=64,stages=3,wg_wait=0", "bm=128,bn=128,stages=4",
                                       "bm=64,bn=256,stages=2", "bm=128,bn=32,stages=5"};
    static const char *const lays[] = {"nt", "nn", "tn", "tt"};
    int n = 0;
    for (int di = 0; di < NDT; di++)
        for (int li = 0; li < 4; li++) {
            bool sixteen = pt_dtype_get(dts[di])->bytes == 2;
            if (!sixteen && li > 0)
                continue; /* tf32 and 8-bit: K-major only */
            if (dts[di] == PT_F16 && (li == 1 || li == 2))
                continue; /* f16 shares bf16's paths: nt and tt */
            for (int si = 0; si < 5; si++, n++) {
                const int64_t *s = shapes[si];
                pt_problem p = prob(s[0], s[1], s[2], lays[li], dts[di], PT_F64);
                bool bmn = lays[li][1] == 'n';
                char cfg[128];
                snprintf(cfg, sizeof cfg, "impl=1,%s,bk=%d", sixteen ? (bmn ? cfg16mn : cfg16)[si] : cfg8[si],
                         si == 3 ? 64 / pt_dtype_get(dts[di])->bytes : 128 / pt_dtype_get(dts[di])->bytes);
                for (int sc = 0; sc < 3; sc++)
                    grid_case(&g, &p, si == 3 && s[2] * pt_dtype_get(dts[di])->bytes > 64 ? NULL : cfg, scheds[sc],
                              (uint64_t)n);
            }
        }
    grid_report(&g, "wgmma grid", t0);
}

/* Epilogues through the wgmma accumulators: bias and activations (direct),
 * a residual and beta C (staged), f32 / bf16 / fp8 outputs, scales of fp8
 * inputs, batches, column-major D; every schedule. */
Test(gemm_sm90, emulator_grid_epilogues, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi;
        double beta, sa;
        int64_t batch;
        bool dcol;
    } cs[] = {
        {65, 129, 64, "nt", PT_BF16, PT_BF16, "relu(acc + bias[n])", 0, 0, 1, false},
        {129, 64, 72, "nn", PT_BF16, PT_F32, "gelu(acc * alpha + bias[n])", 0, 0, 1, false},
        {64, 65, 40, "tt", PT_F16, PT_F16, "silu(acc) + r", 0, 0, 1, false},
        {100, 128, 64, "nt", PT_BF16, PT_F32, NULL, 0.5, 0, 1, false},
        {7, 257, 128, "nt", PT_E4M3, PT_BF16, "acc * s[m] + bias[n]", 0, 0.5, 1, false},
        {65, 64, 96, "nt", PT_E5M2, PT_E4M3, "relu(acc)", 0, 2, 1, false},
        {33, 48, 80, "nt", PT_S8, PT_F32, "acc + bias[n]", 0, 0.25, 1, false},
        {40, 72, 64, "nt", PT_BF16, PT_BF16, NULL, 0, 0, 3, false},
        {70, 64, 48, "tn", PT_BF16, PT_F32, "tanh(acc) * 2", 0, 0, 2, true},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int sc = 0; sc < 3; sc++, n++) {
            pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
            p.epilogue = cs[i].epi;
            p.beta = cs[i].beta;
            if (cs[i].sa != 0) {
                p.scale_a = cs[i].sa;
                p.scale_b = 0.5;
            }
            p.batch = cs[i].batch;
            p.d_colmajor = cs[i].dcol;
            grid_case(&g, &p, sc == 2 ? "impl=1,bm=64" : NULL, scheds[sc], (uint64_t)(100 + n));
        }
    grid_report(&g, "wgmma epilogues", t0);
}

/* ---- item 2: the default on sm_90a, and check()'s refusals ---- */

static int check_cfg_on(const char *arch, const pt_problem *p, const char *config, pt_config *out, pt_err *e)
{
    memset(e, 0, sizeof *e);
    pt_target tg;
    cr_assert_eq(pt_target_parse(arch, &tg, e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    int rc = gen_gemm_op.prepare(a, p, &tg, &pp, e);
    cr_assert_eq(rc, PT_OK, "%s", e->msg);
    pt_space s;
    gen_gemm_op.space(pp, &tg, &s);
    gen_gemm_op.defaults(pp, &tg, out);
    if (config) {
        /* the keys of either loop are accepted here: parse over the space's
         * names by setting them directly */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", config);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            char *eq = strchr(tok, '=');
            cr_assert(eq);
            *eq = 0;
            pt_config_set(out, pt_arena_strdup(a, tok), atoll(eq + 1));
        }
    }
    rc = gen_gemm_op.check(pp, &tg, out, e);
    pt_arena_free(a);
    return rc;
}

Test(gemm_sm90, sm90a_defaults_to_wgmma_and_check_refuses)
{
    pt_err e = {0};
    pt_config c;
    pt_problem p = PT_GEMM(8192, 8192, 8192, "nt", PT_BF16, PT_F64);
    cr_assert_eq(check_cfg_on("sm_90a", &p, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 1, "sm_90a: the wgmma loop by default");
    cr_expect_eq(pt_config_get(&c, "bm", 0), 128);
    cr_expect_eq(pt_config_get(&c, "bn", 0), 256);
    cr_expect_eq(pt_config_get(&c, "stages", 0), 4);
    cr_assert_eq(check_cfg_on("sm_90", &p, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 0, "sm_90 keeps mma.sync");
    struct {
        const char *arch, *cfg, *msg;
    } bad[] = {
        {"sm_90", "impl=1,bm=128,bn=128,bk=64,stages=4", "impl=1 (wgmma) needs sm_90a; target is sm_90"},
        {"sm_80", "impl=1,bm=128,bn=128,bk=64,stages=4", "impl=1 (wgmma) needs sm_90a; target is sm_80"},
        {"sm_90a", "impl=2", "impl=2: 0 (mma.sync) or 1 (wgmma, sm_90a)"},
        {"sm_90a", "impl=1,bm=128,bn=256,stages=5", "bytes of shared memory"},
        {"sm_90a", "impl=1,bn=264", "bn=264: not a wgmma N for bf16"},
        {"sm_90a", "impl=1,bn=20", "bn=20: not a wgmma N for bf16"},
        {"sm_90a", "impl=1,bm=256", "bm=256: 64 or 128"},
        {"sm_90a", "impl=1,bk=16", "bk=16: the k tile is one 128B or 64B swizzle span"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = check_cfg_on(bad[i].arch, &p, bad[i].cfg, &c, &e);
        cr_expect_neq(rc, PT_OK, "%s %s accepted", bad[i].arch, bad[i].cfg);
        cr_expect(strstr(e.msg, bad[i].msg) != NULL, "%s %s: '%s', want '%s'", bad[i].arch, bad[i].cfg, e.msg,
                  bad[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
    }
    /* an MN-major B takes 64-column boxes: small N still gets a valid default */
    pt_problem q = prob(7, 1, 129, "nn", PT_BF16, PT_F64);
    cr_assert_eq(check_cfg_on("sm_90a", &q, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 1);
    cr_expect_eq(pt_config_get(&c, "bn", 0), 64);
    cr_expect_eq(check_cfg_on("sm_90a", &q, "bn=16", &c, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "64-column boxes") != NULL, "%s", e.msg);
    /* tf32 takes the wgmma loop K-major only; other layouts keep mma.sync */
    pt_problem tf = PT_GEMM(128, 128, 128, "nt", PT_TF32, PT_F64);
    cr_assert_eq(check_cfg_on("sm_90a", &tf, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 1);
    tf.layout = "tn";
    cr_assert_eq(check_cfg_on("sm_90a", &tf, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 0, "tf32 tn: mma.sync");
    cr_expect_eq(check_cfg_on("sm_90a", &tf, "impl=1,bm=128,bn=128,bk=32,stages=4", &c, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "tf32 operands must be K-major (layout nt)") != NULL, "%s", e.msg);
    /* 8-bit int: N 8, 16, 24, then multiples of 16 */
    pt_problem r = PT_GEMM(128, 128, 128, "nt", PT_S8, PT_F64);
    cr_expect_eq(check_cfg_on("sm_90a", &r, "bn=8", &c, &e), PT_OK, "%s", e.msg);
    /* strides TMA cannot describe: the mma.sync space */
    pt_problem u = PT_GEMM(64, 64, 7, "nt", PT_BF16, PT_F64);
    cr_assert_eq(check_cfg_on("sm_90a", &u, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 0, "K=7 packed: 14-byte rows, not TMA-able");
    cr_expect_eq(check_cfg_on("sm_90a", &u, "impl=1,bm=64,bn=64,bk=64,stages=4,raster=1", &c, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "lda is not a multiple of 16 bytes") != NULL, "%s", e.msg);
}

/* ---- emulator (minimal fix, ptx/emu/mem.c): the race detector's pool of
 * reader vector clocks ---- */

/* A kernel with an mbarrier (so the detector keeps vector clocks) where
 * every warp reads the same shared word thread 0 wrote: the second reader
 * of a byte takes a pooled clock. The pool's counter starts at 1 before
 * anything is allocated, so the first pooled clock wrote through a NULL
 * pool (a crash: found through a wgmma GEMM whose epilogue units overlap,
 * bn = 192). */
Test(gemm_sm90, emu_second_reader_of_a_shared_byte_under_vector_clocks)
{
    static const char text[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry k(.param .u64 out)\n{\n"
                               "\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\t.reg .pred %p<2>;\n"
                               "\t.shared .align 8 .b8 bar[8];\n\t.shared .align 4 .b8 w[4];\n"
                               "\tmov.u32 %r0, %tid.x;\n\tmov.u32 %r1, bar;\n\tmov.u32 %r2, w;\n"
                               "\tsetp.eq.u32 %p0, %r0, 0;\n"
                               "\t@%p0 mbarrier.init.shared::cta.b64 [%r1], 1;\n"
                               "\t@%p0 st.shared.u32 [%r2], 7;\n"
                               "\tbar.sync 0;\n"
                               "\tld.shared.u32 %r3, [%r2];\n"
                               "\tld.param.u64 %rd0, [out];\n\tcvta.to.global.u64 %rd1, %rd0;\n"
                               "\tmul.wide.u32 %rd2, %r0, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
                               "\tst.global.u32 [%rd3], %r3;\n\tret;\n}\n";
    ptx_module *m = NULL;
    pt_err e = {0};
    cr_assert_eq(ptx_parse(text, strlen(text), "reader.ptx", 90, &m, &e), PT_OK, "%s", e.msg);
    emu_opts o = emu_default_opts();
    emu_ctx *c = emu_new(&o);
    emu_kernel *k;
    cr_assert_eq(emu_load(c, m, NULL, &k, &e), PT_OK, "%s", e.msg);
    uint64_t d = emu_alloc(c, 64 * 4, "out");
    const void *args[] = {&d};
    emu_launch l = {{1, 1, 1}, {64, 1, 1}, 0};
    int rc = emu_run(c, k, &l, args, NULL, &e);
    cr_expect_eq(rc, PT_OK, "%s", e.msg);
    uint32_t got[64];
    cr_assert_eq(emu_read(c, d, got, sizeof got, &e), PT_OK);
    for (int i = 0; i < 64; i++)
        cr_expect_eq(got[i], 7u, "thread %d read %u", i, got[i]);
    emu_kernel_free(k);
    emu_free(c);
    ptx_module_free(m);
}

/* A seeded random sample: problems (dtype, layout, odd sizes, epilogue)
 * with a random valid config of the wgmma space, a random schedule. */
Test(gemm_sm90, emulator_random_configs, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    static const int64_t sizes[] = {1, 7, 33, 65, 96, 129, 200, 257};
    static const char *const lays[] = {"nt", "nn", "tn", "tt"};
    static const char *const epis[] = {NULL, "relu(acc + bias[n])", "acc * s[m]", "gelu(acc)", NULL};
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    for (int i = 0; i < 40; i++) {
#define PICK(n) ((int)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (n))
        pt_dtype dt = dts[PICK(NDT)];
        bool sixteen = pt_dtype_get(dt)->bytes == 2;
        const char *lay = sixteen ? lays[PICK(4)] : "nt";
        int64_t m = sizes[PICK(8)], n = sizes[PICK(8)], k = sizes[PICK(8)];
        if (m * n * k > 2000000)
            k = 64;
        pt_problem p = prob(m, n, k, lay, dt, PT_F64);
        p.epilogue = dt == PT_S8 || dt == PT_U8 ? NULL : epis[PICK(5)];
        if (p.epilogue)
            p.out_dtype = PT_F32;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_gemm_op.space(pp, &tg, &s);
        int64_t size = pt_space_size(&s), start = PICK((int)size);
        char cfg[256] = "";
        for (int64_t j = 0; j < size; j++) {
            pt_config c;
            pt_space_config(&s, (start + j) % size, &c);
            pt_err ce = {0};
            if (gen_gemm_op.check(pp, &tg, &c, &ce) == PT_OK) {
                pt_config_str(&c, cfg, sizeof cfg);
                break;
            }
        }
        pt_arena_free(a);
        cr_assert(cfg[0], "no valid config for case %d", i);
        grid_case(&g, &p, cfg, scheds[PICK(3)], (uint64_t)i);
#undef PICK
    }
    grid_report(&g, "wgmma random configs", t0);
}

/* ---- item 5: the compile gate over the space ---- */

/* The spill risk of a wgmma config: its accumulator (bn/2 f32 a consumer
 * thread; 64 rows each), then its tile rows and ring depth. */
static int64_t gemm_risk(const pt_config *c)
{
    return pt_config_get(c, "bn", 0) * 1000000 + pt_config_get(c, "bm", 0) * 100 + pt_config_get(c, "stages", 0);
}

/* The 8192^3 bf16 nt and tt (MN-major operands) spaces on sm_90a assemble
 * with ptxas: no C75xx code (the gate refuses them: a serialised wgmma, an
 * ignored setmaxnreg), no spills, no local memory (stack frame 0). Per
 * commit a seeded sample of each layout's valid configs
 * (test_space_sample: the 4 biggest tiles, every value of every
 * parameter, then random ones up to 16 for nt, 12 for tt); every config
 * with PTXTUNE_FULL_SPACE=1 (scripts/check_spaces.sh): the whole spaces
 * are 1980 configs since the cluster is searched (660 before), many
 * minutes of ptxas on this 2-core machine (48 took 46 s at load 13).
 * Prints the first configs' resources. */
Test(gemm_sm90, every_config_of_the_8192_bf16_space_assembles, .timeout = 3600)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    OPEN_PTXAS_OR_SKIP(comp, e);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    static const char *const lays[] = {"nt", "tt"};
    int total = 0, total_valid = 0;
    double t0 = now();
    for (int li = 0; li < 2; li++) {
        pt_problem p = PT_GEMM(8192, 8192, 8192, lays[li], PT_BF16, PT_F64);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_space s;
        gen_gemm_op.space(pp, &tg, &s);
        int64_t size = pt_space_size(&s);
        pt_config *valid = malloc((size_t)size * sizeof *valid);
        int64_t *risk = malloc((size_t)size * sizeof *risk);
        bool *keep = malloc((size_t)size * sizeof *keep);
        cr_assert(valid && risk && keep);
        int nvalid = 0;
        for (int64_t i = 0; i < size; i++) {
            pt_err ce = {0};
            pt_space_config(&s, i, &valid[nvalid]);
            if (gen_gemm_op.check(pp, &tg, &valid[nvalid], &ce))
                continue;
            risk[nvalid] = gemm_risk(&valid[nvalid]);
            nvalid++;
        }
        /* tt: fewer (its difference is the operands' major-ness) */
        int nkeep = test_space_sample(valid, nvalid, risk, 4, li ? 12 : 16, 13 + (uint64_t)li, keep);
        int n = 0, bad = 0;
        double tl = now();
        for (int vi = 0; vi < nvalid; vi++) {
            if (!keep[vi])
                continue;
            pt_config c = valid[vi];
            pt_err ce = {0};
            char cfg[256];
            pt_config_str(&c, cfg, sizeof cfg);
            cr_expect_eq(pt_config_get(&c, "impl", 0), 1, "%s", cfg);
            ptx_module *m = NULL;
            pt_launch l;
            cr_assert_eq(pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &m, &l, &ce), PT_OK, "%s: %s", cfg, ce.msg);
            char *text = ptx_print(m);
            cr_expect(strstr(text, ".pragma \"nounroll\"") != NULL, "%s: no nounroll pragma", cfg);
            cr_expect(!strstr(text, "ld.local") && !strstr(text, "st.local"), "%s: local memory in the PTX", cfg);
            pt_resource r;
            memset(&r, 0, sizeof r);
            int rc = pt_compile(comp, text, &tg, NULL, NULL, &r, &ce);
            cr_expect_eq(rc, PT_OK, "%s %s: %s", lays[li], cfg, ce.msg);
            for (int k = 0; k < r.ncodes; k++)
                cr_expect(strncmp(r.codes[k], "C75", 3) != 0, "%s %s: %s", lays[li], cfg, r.codes[k]);
            cr_expect_eq(r.spill_stores + r.spill_loads, 0, "%s %s: spills", lays[li], cfg);
            cr_expect_eq(r.stack_frame, 0, "%s %s: local memory", lays[li], cfg);
            bool ok = rc == PT_OK && !r.spill_stores && !r.spill_loads && !r.stack_frame &&
                      !strstr(text, "ld.local") && !strstr(text, "st.local");
            for (int k = 0; k < r.ncodes; k++)
                ok = ok && strncmp(r.codes[k], "C75", 3) != 0;
            bad += !ok;
            if (n < 4)
                printf("  %s %-44s regs %3d smem %6zu threads %u\n", lays[li], cfg, r.registers, l.smem,
                       l.block[0]);
            free(text);
            ptx_module_free(m);
            n++;
        }
        cr_expect_gt(n, 0);
        cr_expect_eq(n, nkeep);
        if (!test_full_space())
            printf("%s: sampled %d of %d configs (PTXTUNE_FULL_SPACE=1 for all)\n", lays[li], n, nvalid);
        /* the line scripts/check_spaces.sh reads */
        printf("space: gemm 8192^3 bf16 %s | sm_90a | %d | %d | %d | %.1f\n", lays[li], nvalid, n, bad, now() - tl);
        total += n;
        total_valid += nvalid;
        free(valid);
        free(risk);
        free(keep);
        pt_arena_free(a);
    }
    printf("8192^3 bf16 sm_90a: %d of %d valid configs through ptxas in %.1f s\n", total, total_valid, now() - t0);
    pt_compiler_close(comp);
}

/* Persistent grids (P CTAs walk the tiles, t += P): the producer fills the
 * ring with a CTA's next tile while its consumers run this tile's
 * epilogue, whose staging is then a region of its own. Several tiles per
 * CTA, direct and staged epilogues, both consumer counts, every schedule. */
Test(gemm_sm90, emulator_persistent_grids, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi, *cfg;
    } cs[] = {
        {257, 200, 136, "nt", PT_BF16, PT_BF16, NULL, "impl=1,bm=64,bn=64,stages=2,sms=3,persistent=1"},
        {200, 129, 72, "tt", PT_F16, PT_F32, "acc + r", "impl=1,bm=128,bn=32,stages=3,sms=2,persistent=1,wg_wait=0"},
        {130, 256, 64, "nn", PT_BF16, PT_F32, "relu(acc + bias[n])", "impl=1,bm=64,bn=64,stages=4,sms=5,persistent=1"},
        {129, 96, 256, "nt", PT_E4M3, PT_BF16, "gelu(acc)", "impl=1,bm=128,bn=16,stages=2,sms=1,persistent=1"},
        {65, 130, 64, "nt", PT_S8, PT_S32, NULL, "impl=1,bm=64,bn=32,stages=3,sms=4,persistent=1"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int sc = 0; sc < 3; sc++, n++) {
            pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
            p.epilogue = cs[i].epi;
            grid_case(&g, &p, cs[i].cfg, scheds[sc], (uint64_t)(200 + n));
        }
    grid_report(&g, "wgmma persistent", t0);
}

/* ---- dyn=m: M at run time (issue 13 item 4, issue 14 item 4) ---- */

/* Whether map b (emitted at M = P) is map a (at M = T) with its dims and
 * strides equal or scaled by P / T: what the runtime's re-encoding from the
 * contract's dims_scale / strides_scale gives. */
static bool map_follows(const pt_tmap *a, const pt_tmap *b, int64_t T, int64_t P)
{
    if (a->of != b->of || a->index != b->index || a->dtype != b->dtype || a->rank != b->rank ||
        a->swizzle != b->swizzle || memcmp(a->box, b->box, sizeof a->box))
        return false;
    for (int r = 0; r < a->rank; r++) {
        bool same = a->dims[r] == b->dims[r];
        bool scaled = a->dims[r] % (uint64_t)T == 0 && b->dims[r] == a->dims[r] / (uint64_t)T * (uint64_t)P;
        if (!same && !scaled)
            return false;
        if (r + 1 < a->rank) {
            same = a->strides[r] == b->strides[r];
            scaled = a->strides[r] % (uint64_t)T == 0 &&
                     b->strides[r] == a->strides[r] / (uint64_t)T * (uint64_t)P;
            if (!same && !scaled)
                return false;
        }
    }
    return true;
}

/* One dyn=m kernel emitted at M = base, run at each M of ms under the three
 * schedules: re-emitted at that M it must give the same PTX (split-K and
 * stream-K: within the base's power-of-two bucket, the workspace's m_cap),
 * the grid rule (x = ceil(M / bm), or the persistent P), the same
 * parameters but m, and maps that follow M; then the base's PTX runs with
 * the launch at M (the re-emitted launch's maps: the runtime's) against the
 * float64 reference. */
static void dyn_grid_adv(grid *g, pt_problem p, int64_t base, const int64_t *ms, int nm, const char *config,
                         uint64_t seed, const adv_spec *adv)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    p.dyn = "m";
    p.m = base;
    pt_arena *a = pt_arena_new();
    pt_prepared *pb;
    pt_config c;
    cr_assert_eq(prepare_config(a, &p, &tg, config, &pb, &c, &e), PT_OK, "[%s] %s", config, e.msg);
    cr_assert_eq(pt_config_get(&c, "impl", 0), 1, "dyn=m on sm_90a: the wgmma loop [%s]", config);
    ptx_module *m = NULL;
    pt_launch lb;
    cr_assert_eq(pt_op_build(&gen_gemm_op, pb, &tg, 0, &c, &m, &lb, &e), PT_OK, "[%s] %s", config, e.msg);
    char *text = ptx_print(m);
    char entry[128];
    snprintf(entry, sizeof entry, "%s", lb.entry); /* the name lives in the module */
    ptx_module_free(m);
    int marg = -1;
    for (int i = 0; i < lb.nargs; i++)
        if (lb.args[i].kind == PT_ARG_U32)
            marg = i;
    cr_assert_geq(marg, 0, "no u32 parameter m in the dyn=m kernel [%s]", config);
    cr_assert_eq(lb.args[marg].u, (uint64_t)base);
    int64_t bm = pt_config_get(&c, "bm", 64), pers = pt_config_get(&c, "persistent", 0);
    char cbuf[512];
    int sms;
    config_sms(config, &sms, cbuf, sizeof cbuf);
    bool streamk = pt_config_get(&c, "streamk", 0) == 1;
    bool bucket = pt_config_get(&c, "splitk", 1) > 1 || streamk;
    int64_t cap = 1;
    while (cap < base)
        cap *= 2;
    for (int i = 0; i < nm; i++)
        for (int sc = 0; sc < 3; sc++) {
            pt_problem q = p;
            q.m = ms[i];
            pt_prepared *pq = NULL;
            pt_launch lq = lb;
            lq.entry = entry;
            int rc = gen_gemm_op.prepare(a, &q, &tg, &pq, &e);
            if (!rc) {
                ptx_module *mq = NULL;
                pt_launch lr;
                rc = pt_op_build(&gen_gemm_op, pq, &tg, 0, &c, &mq, &lr, &e);
                if (!rc) {
                    char *tq = ptx_print(mq);
                    bool same = strcmp(tq, text) == 0, want = !bucket || ms[i] > cap / 2;
                    free(tq);
                    /* stream-K: its plan's units (m_cap's, the base's); persistent: the
                     * re-emitted natural grid (the contract's rule checks its form) */
                    unsigned gx = (unsigned)(streamk ? lb.grid[0] : pers ? lr.grid[0] : (ms[i] + bm - 1) / bm);
                    if (same != want)
                        rc = pt_errf(&e, PT_EINTERNAL, "re-emitted at m=%lld: PTX %s the base's", (long long)ms[i],
                                     same ? "equals" : "differs from");
                    else if (!want)
                        ; /* another bucket's kernel: its own grid and workspace */
                    else if (lr.grid[0] != gx || lr.grid[1] != lb.grid[1] || lr.grid[2] != lb.grid[2])
                        rc = pt_errf(&e, PT_EINTERNAL, "grid %u,%u,%u at m=%lld: not the rule (x %u)", lr.grid[0],
                                     lr.grid[1], lr.grid[2], (long long)ms[i], gx);
                    else if (lr.nargs != lb.nargs || lr.ntmaps != lb.ntmaps || lr.smem != lb.smem)
                        rc = pt_errf(&e, PT_EINTERNAL, "parameters or shared memory differ at m=%lld",
                                     (long long)ms[i]);
                    for (int j = 0; !rc && want && j < lr.ntmaps; j++)
                        if (!map_follows(&lb.tmaps[j], &lr.tmaps[j], base, ms[i]))
                            rc = pt_errf(&e, PT_EINTERNAL, "map %d at m=%lld does not follow M", j, (long long)ms[i]);
                    lq.grid[0] = gx;
                    lq.args[marg].u = (uint64_t)ms[i];
                    memcpy(lq.tmaps, lr.tmaps, sizeof lq.tmaps);
                }
                ptx_module_free(mq);
            }
            tuner_dev *d = NULL;
            tuner_kernel *k = NULL;
            tuner_io *io = NULL;
            double err = 0, secs = 0;
            adv_arg ga = {.s = adv, .layout = q.layout, .m = q.m, .n = q.n, .k = q.k, .lda = q.lda, .ldb = q.ldb};
            if (!rc)
                rc = open_load_io_sms("emu", scheds[sc], seed + (uint64_t)(3 * i + sc), sms, text, entry, pq, &q,
                                      adv ? adv_plant : NULL, &ga, &d, &k, &io, &e);
            if (!rc && adv && ga.rc)
                rc = pt_errf(&e, ga.rc, "the reference failed at the plant");
            if (!rc) {
                tuner_verify_opts vo = {.full_limit = INT64_MAX};
                tuner_verify_result vr;
                rc = tuner_verify(d, k, &lq, io, &vo, &vr, &e);
                err = vr.max_err;
                int64_t all = (q.batch ? q.batch : 1) * q.m * q.n;
                if (!rc && adv && vr.checked != all)
                    rc = pt_errf(&e, PT_EINVAL, "the verifier compared %lld of %lld elements", (long long)vr.checked,
                                 (long long)all);
                if (!rc && adv && ga.nonfinite < adv->min_nonfinite)
                    rc = pt_errf(&e, PT_EINVAL, "vacuous: %lld non-finite reference outputs, want >= %lld",
                                 (long long)ga.nonfinite, (long long)adv->min_nonfinite);
                emu_stats st;
                if (tuner_emu_last_run(d, &st) == PT_OK)
                    secs = st.seconds;
            }
            run_release(d, k, io, NULL, NULL, NULL, NULL);
            char shown[300];
            snprintf(shown, sizeof shown, "dyn=m kernel of m=%lld, %s%s%s", (long long)base, config, adv ? ", " : "",
                     adv ? adv->name : "");
            int di = 0;
            while (di < NDT - 1 && dts[di] != p.dtype)
                di++;
            grid_trace(&q, shown, scheds[sc]);
            if (rc && adv)
                printf("  FAIL m=%lld %s sched %d: %s\n", (long long)q.m, shown, (int)scheds[sc], e.msg);
            grid_tally(g, di, rc, err, secs, &q, shown, scheds[sc], e.msg);
        }
    free(text);
    pt_arena_free(a);
}

static void dyn_grid(grid *g, pt_problem p, int64_t base, const int64_t *ms, int nm, const char *config,
                     uint64_t seed)
{
    dyn_grid_adv(g, p, base, ms, nm, config, seed, NULL);
}

static const int64_t dyn_ms[] = {1, 7, 64, 65, 129, 257};

/* One kernel per config (emitted at m = 300, m_cap 512) at M = 1, 7, 64,
 * 65, 129, 257 under lazy, eager and random: plain and persistent grids,
 * raster, split-K and stream-K at m_cap, MN-major A (layout t, lda given),
 * batches (M-row strides from the parameter), C and bias/scale epilogues,
 * the TMA-store epilogue (D's map follows M), pingpong and both clusters
 * (persistent: the walks count their units from m). */
Test(gemm_sm90, dyn_m_one_kernel_many_m, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    struct {
        int64_t n, k, batch;
        const char *lay;
        pt_dtype dt, odt;
        double beta;
        const char *epi, *cfg;
    } cs[] = {
        {96, 80, 1, "nt", PT_BF16, PT_BF16, 0, NULL, "bm=128,bn=64,stages=3"},
        {72, 64, 2, "tt", PT_F16, PT_F32, 0, "relu(acc + bias[n]) * s[m]", "bm=64,bn=32,stages=2,raster=2"},
        {64, 256, 2, "nt", PT_BF16, PT_F32, 0.5, NULL, "bm=64,bn=64,stages=2,splitk=3,raster=2"},
        {48, 96, 1, "tn", PT_BF16, PT_BF16, 0, "acc + r", "bm=128,bn=64,stages=2,sms=3,persistent=1,wg_wait=0"},
        {40, 192, 1, "nt", PT_E4M3, PT_BF16, 0, NULL, "bm=64,bn=40,stages=3,sms=4,persistent=1,streamk=1"},
        {64, 64, 2, "nt", PT_BF16, PT_BF16, 0, NULL, "bm=64,bn=64,stages=2,epi=1"},
        {64, 64, 1, "nt", PT_BF16, PT_BF16, 0, "acc + bias[n]", "bm=64,bn=64,stages=2,sched=1,sms=2,persistent=1"},
        {96, 64, 1, "nt", PT_BF16, PT_F32, 0, NULL, "bm=64,bn=32,stages=2,cluster=21,sms=4,persistent=1,raster=2"},
        {128, 64, 1, "tt", PT_F16, PT_F16, 0, NULL, "bm=64,bn=64,stages=2,cluster=12,sms=4,persistent=1"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob_ldd(300, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
        p.batch = cs[i].batch;
        p.beta = cs[i].beta;
        p.epilogue = cs[i].epi;
        dyn_grid(&g, p, 300, dyn_ms, 6, cs[i].cfg, 900 + 40 * (uint64_t)i);
    }
    grid_report(&g, "wgmma dyn=m: one kernel, m = 1 7 64 65 129 257", t0);
    cr_expect_eq(g.cases, 6 * 3 * (int)(sizeof cs / sizeof cs[0]));
}

/* dyn=m kernels of the 8192^3 bf16 problem assemble with ptxas sm_90a: 0
 * spills, no local memory, no C75xx (the default, persistent stream-K,
 * pingpong 128-row tiles and a cluster walking units counted from m). */
Test(gemm_sm90, dyn_m_kernels_assemble, .timeout = 300)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    OPEN_PTXAS_OR_SKIP(comp, e);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    static const char *const cfgs[] = {"impl=1", "impl=1,bm=128,bn=256,persistent=1,streamk=1",
                                       "impl=1,bm=128,bn=128,sched=1,persistent=1",
                                       "impl=1,bm=128,bn=128,cluster=21,persistent=1,epi=1",
                                       "impl=1,bm=128,bn=256,splitk=2,raster=8"};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        pt_problem p = PT_GEMM(8192, 8192, 8192, i % 2 ? "tt" : "nt", PT_BF16, PT_F64);
        p.dyn = "m";
        p.lda = 8192;
        pt_launch l;
        char *text = emit_text(&p, cfgs[i], &l);
        cr_expect(strstr(text, ".param .u32 ") != NULL, "%s: no parameter m", cfgs[i]);
        char what[160];
        snprintf(what, sizeof what, "dyn=m %s %s", p.layout, cfgs[i]);
        pt_resource r;
        expect_assembles_clean(comp, text, &tg, what, &r);
        printf("  %-60s regs %3d\n", what, r.registers);
        free(text);
    }
    pt_compiler_close(comp);
}

/* dyn=m on sm_90a: the default is the wgmma loop; what it refuses, in one
 * line each. */
Test(gemm_sm90, dyn_m_defaults_to_wgmma_and_check_refuses)
{
    pt_err e = {0};
    pt_config c;
    pt_problem p = prob(128, 4096, 4096, "nt", PT_BF16, PT_F64);
    p.dyn = "m";
    cr_assert_eq(check_cfg_on("sm_90a", &p, NULL, &c, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(pt_config_get(&c, "impl", 0), 1, "dyn=m on sm_90a: the wgmma loop by default");
    cr_expect_eq(check_cfg_on("sm_90a", &p, "impl=1,bm=128,bn=128,persistent=1,streamk=1", &c, &e), PT_OK, "%s",
                 e.msg);
    cr_expect_eq(check_cfg_on("sm_90a", &p, "impl=1,bm=128,bn=128,splitk=4", &c, &e), PT_OK, "%s", e.msg);
    pt_problem col = p; /* a column-major D: the mma.sync loop's (where the op takes it) */
    col.d_colmajor = true;
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_arena *ca = pt_arena_new();
    pt_prepared *cp;
    bool col_ok = gen_gemm_op.prepare(ca, &col, &tg, &cp, &e) == PT_OK;
    pt_arena_free(ca);
    if (col_ok) {
        cr_assert_eq(check_cfg_on("sm_90a", &col, NULL, &c, &e), PT_OK, "%s", e.msg);
        cr_expect(pt_config_get(&c, "impl", 0) == 0 && pt_config_get(&c, "wm", 0) > 0, "dyn=m, column-major D: mma.sync");
    }
    pt_problem r = p;
    r.beta = 1;
    struct {
        const pt_problem *p;
        const char *cfg, *msg;
    } bad[] = {
        {&p, "impl=1,bm=64,sched=1", "sched=1 or a cluster with dyn=m needs persistent"},
        {&p, "impl=1,cluster=21", "sched=1 or a cluster with dyn=m needs persistent"},
        {&r, "impl=1,bm=128,bn=128,epi=1", "epi=1 (TMA store) with dyn=m"},
        {&col, "impl=1,bm=128,bn=128", "dyn=m with a column-major D (d_colmajor=1) is the mma.sync loop's"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i].p == &col && !col_ok)
            continue;
        int rc = check_cfg_on("sm_90a", bad[i].p, bad[i].cfg, &c, &e);
        cr_expect_neq(rc, PT_OK, "%s accepted", bad[i].cfg);
        cr_expect(strstr(e.msg, bad[i].msg) != NULL, "%s: '%s', want '%s'", bad[i].cfg, e.msg, bad[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
    }
}

/* ---- item 4: the cuda backend over the fake driver (tests/fake_cuda.c:
 * its cuTensorMapEncodeTiled encodes the emulator's maps and its JIT runs
 * the PTX on the emulator), and the CLI's run and tune on the emu backend ---- */

Test(gemm_sm90, cuda_backend_binds_tensor_maps_through_the_fake_driver, .timeout = 120)
{
    LOAD_FAKE_CUDA_OR_SKIP();
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt;
        const char *cfg;
    } cs[] = {
        {65, 129, 72, "nt", PT_BF16, NULL},
        {64, 128, 64, "tt", PT_F16, "impl=1,bm=64,bn=64"},
        {100, 64, 128, "nt", PT_E4M3, "impl=1,bm=128,bn=64,sms=1,persistent=1"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, PT_F64);
        pt_err e = {0};
        run_out o;
        int rc = run_on("cuda", &p, cs[i].cfg, EMU_SCHED_LAZY, 0, &o, &e);
        cr_expect_eq(rc, PT_OK, "%s %s [%s]: %s", cs[i].lay, pt_dtype_get(cs[i].dt)->name, o.config, e.msg);
    }
}

/* The command line: run --check and tune on the emulator for sm_90a take
 * the wgmma loop and verify it. */
Test(gemm_sm90, cli_run_check_and_tune_on_the_emulator, .timeout = 300)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin, "PTXTUNE_BIN not set (meson sets it)");
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd,
             "%s run gemm m=65 n=128 k=96 dtype=bf16 layout=nt --arch sm_90a --backend emu --check 2>&1", bin);
    FILE *fp = popen(cmd, "r");
    cr_assert(fp);
    size_t n = fread(out, 1, sizeof out - 1, fp);
    out[n] = 0;
    int st = pclose(fp);
    cr_expect_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "config impl=1,") != NULL, "%s", out);
    cr_expect(strstr(out, "check    ok:") != NULL, "%s", out);
    char db[] = "/tmp/ptxtune_gemm_sm90_XXXXXX";
    int fd = mkstemp(db);
    cr_assert(fd >= 0);
    close(fd);
    remove(db);
    snprintf(cmd, sizeof cmd,
             "%s tune gemm m=128 n=64 k=64 dtype=bf16 layout=nt --arch sm_90a --backend emu --db %s "
             "--budget 3 --strategy exhaustive 2>&1",
             bin, db);
    fp = popen(cmd, "r");
    cr_assert(fp);
    n = fread(out, 1, sizeof out - 1, fp);
    out[n] = 0;
    st = pclose(fp);
    cr_expect_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "classes: ok 3") != NULL, "%s", out);
    cr_expect(strstr(out, "yes      ") != NULL, "no verified winner:\n%s", out);
    cr_expect(strstr(out, "impl=1,") != NULL, "%s", out);
    remove(db);
    /* dyn=m: M at run time, the wgmma loop (issue 13 item 4) */
    snprintf(cmd, sizeof cmd,
             "%s tune gemm m=128 n=64 k=64 dtype=bf16 layout=nt dyn=m --arch sm_90a --backend emu --db %s "
             "--budget 2 2>&1",
             bin, db);
    fp = popen(cmd, "r");
    cr_assert(fp);
    n = fread(out, 1, sizeof out - 1, fp);
    out[n] = 0;
    st = pclose(fp);
    cr_expect_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "classes: ok 2") != NULL, "%s", out);
    cr_expect(strstr(out, "yes      ") != NULL, "no verified winner:\n%s", out);
    cr_expect(strstr(out, "impl=1,") != NULL, "dyn=m on sm_90a: the wgmma loop\n%s", out);
    remove(db);
}

/* The main loop's structure in the emitted PTX (the loop bodies appear
 * once): per k tile the producer waits once (empty) and arms once
 * (arrive.expect_tx) with two TMA loads; each consumer waits once (full),
 * fences once, issues bk*es/32 wgmma, commits once and waits once
 * (wait_group 1, plus the tail's wait_group 0) and arrives once (plus the
 * tail's release); both loops carry the pragma; setmaxnreg 40 / 232. */
Test(gemm_sm90, main_loop_structure)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_problem p = PT_GEMM(8192, 8192, 8192, "nt", PT_BF16, PT_F64);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_config c;
    gen_gemm_op.defaults(pp, &tg, &c);
    ptx_module *m = NULL;
    pt_launch l;
    cr_assert_eq(pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &m, &l, &e), PT_OK, "%s", e.msg);
    char *t = ptx_print(m);
    cr_expect_eq(count(t, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"), 4, "bk 64: 4 k16 steps");
    cr_expect_eq(count(t, "wgmma.fence.sync.aligned;"), 1);
    cr_expect_eq(count(t, "wgmma.commit_group.sync.aligned;"), 1);
    cr_expect_eq(count(t, "wgmma.wait_group.sync.aligned 1;"), 1);
    cr_expect_eq(count(t, "wgmma.wait_group.sync.aligned 0;"), 1);
    cr_expect_eq(count(t, "mbarrier.try_wait.parity.shared::cta.b64"), 2, "one wait per k tile and role");
    cr_expect_eq(count(t, "mbarrier.arrive.expect_tx.shared::cta.b64 _, ["), 1);
    cr_expect(strstr(t, "], 49152;") != NULL, "full armed with 128x64 + 256x64 bf16 bytes");
    cr_expect_eq(count(t, "mbarrier.arrive.shared::cta.b64 _, ["), 2, "release in the loop and after it");
    cr_expect_eq(count(t, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"), 2);
    cr_expect_eq(count(t, ".pragma \"nounroll\";"), 2);
    cr_expect_eq(count(t, "setmaxnreg.dec.sync.aligned.u32 40;"), 1);
    cr_expect_eq(count(t, "setmaxnreg.inc.sync.aligned.u32 232;"), 1);
    cr_expect_eq(count(t, "mbarrier.init.shared::cta.b64"), 8, "4 stages x full/empty");
    cr_expect(strstr(t, "], 8;") != NULL, "empty counts the 8 consumer warps");
    cr_expect(strstr(t, ".maxntid 384, 1, 1\n.minnctapersm 1\n") != NULL, "%.400s", t);
    cr_expect_eq(l.block[0], 384u);
    cr_expect_eq(l.ntmaps, 2);
    cr_expect_eq(l.tmaps[0].box[0], 64u);
    cr_expect_eq(l.tmaps[0].box[1], 128u);
    cr_expect_eq(l.tmaps[1].box[1], 256u);
    free(t);
    ptx_module_free(m);
    pt_arena_free(a);
}

/* ---- adversarial inputs through the wgmma loop (tests/gemm_adv.h;
 * docs/gemm.md "Non-finite and extreme inputs") ---- */

static const adv_spec sa_a_nan = {"NaN in A", ADV_NONE, 1, {{"a", 3, -1, NAN}}, 1};
static const adv_spec sa_b_nan = {"NaN in B", ADV_NONE, 1, {{"b", 0, 2, NAN}}, 1};
/* +inf at A(1, 0), -inf at A(2, K - 1), and +inf in row 3's padding (k = K:
 * lda > K), which no kernel may read (TMA stops at the tensor's K) */
static const adv_spec sa_a_inf = {"+-inf in A at both K ends, inf in its padding", ADV_NONE, 3,
                                  {{"a", 1, 0, INFINITY}, {"a", 2, -1, -INFINITY}, {"a", 3, 65, INFINITY}}, 2};
static const adv_spec sa_b_inf = {"+-inf in B at both K ends", ADV_NONE, 2,
                                  {{"b", 0, 1, -INFINITY}, {"b", -1, 0, INFINITY}}, 2};
static const adv_spec sa_ab_inf = {"inf in A and B", ADV_NONE, 4,
                                   {{"a", 0, 1, INFINITY}, {"b", 1, 0, -INFINITY}, {"a", 70, 2, INFINITY},
                                    {"b", 3, 1, INFINITY}}, 2};
static const adv_spec sa_inf_zero = {"inf * 0", ADV_NONE, 2, {{"a", 2, 0, INFINITY}, {"b", 0, 3, 0.0}}, 2};
static const adv_spec sa_max_bf16 = {"one bf16 maximum", ADV_NONE, 1, {{"a", 1, 3, 0x1.fep127}}, 1};
static const adv_spec sa_max_f32 = {"one f32 near its maximum", ADV_NONE, 1, {{"a", 1, 3, 0x1.fffffep127}}, 1};
static const adv_spec sa_row_max = {"A row at the maximum, f16 out overflows", ADV_HUGE_ROW, 0, {{0}}, 8};
static const adv_spec sa_huge = {"values near the maximum", ADV_HUGE, 0, {{0}}, 0};
static const adv_spec sa_tiny = {"subnormal A", ADV_TINY_A, 0, {{0}}, 0};
static const adv_spec sa_int = {"integer extremes", ADV_INT_EXT, 0, {{0}}, 0};
static const adv_spec sa_int_ovf = {"integer extremes, f16 out overflows", ADV_INT_EXT, 0, {{0}}, 1};
static const adv_spec sa_ties = {"rounding ties", ADV_TIES, 0, {{0}}, 0};
static const adv_spec sa_e5m2 = {"e5m2 +-inf and NaN", ADV_NONE, 3,
                                 {{"a", 0, 0, INFINITY}, {"b", 2, 1, -INFINITY}, {"a", 3, -1, NAN}}, 3};
static const adv_spec sa_bias = {"bias +-inf and NaN", ADV_NONE, 3,
                                 {{"bias", 0, 1, INFINITY}, {"bias", 0, -1, -INFINITY}, {"bias", 0, 5, NAN}}, 3};
static const adv_spec sa_act = {"-inf, +inf and NaN in A (activations)", ADV_NONE, 3,
                                {{"a", 0, 0, -INFINITY}, {"a", 1, 1, INFINITY}, {"a", 2, 2, NAN}}, 0};
static const adv_spec sa_c = {"NaN and inf in C", ADV_NONE, 2, {{"c", 1, 1, NAN}, {"c", -1, -1, -INFINITY}}, 2};

static int ties_post(const tuner_io *io, void *arg, pt_err *e)
{
    const adv_arg *g = arg;
    char msg[256];
    if (g->s->fill != ADV_TIES || (io->out[0].dtype != PT_F16 && io->out[0].dtype != PT_BF16))
        return PT_OK;
    int64_t bad = adv_ties_exact(io, g, msg, sizeof msg);
    return bad ? pt_errf(e, PT_ERANGE, "%lld ties not rounded to even; first %s", (long long)bad, msg) : PT_OK;
}

Test(gemm_sm90, adversarial_inputs_every_schedule, .timeout = 600)
{
    double t0 = now();
    static const struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi;
        double beta;
        const char *cfg;
        const adv_spec *s;
    } cs[] = {
        {65, 64, 72, "nt", PT_BF16, PT_BF16, NULL, 0, "impl=1,bm=64,bn=64,stages=2", &sa_a_nan},
        {129, 64, 65, "nn", PT_BF16, PT_F32, NULL, 0, "impl=1,bm=64,bn=64,sched=1", &sa_a_inf},
        {65, 128, 40, "tt", PT_F16, PT_F16, NULL, 0, "impl=1,bm=64,bn=128,epi=1", &sa_b_inf},
        {129, 64, 72, "nt", PT_BF16, PT_BF16, NULL, 0, "impl=1,bm=64,bn=64,cluster=21", &sa_ab_inf},
        {65, 64, 256, "nt", PT_BF16, PT_F32, NULL, 0, "impl=1,bm=64,bn=64,splitk=2", &sa_b_nan},
        {65, 64, 72, "tn", PT_BF16, PT_BF16, NULL, 0, "impl=1,bm=64,bn=64", &sa_max_bf16},
        {65, 64, 72, "nt", PT_F16, PT_F16, NULL, 0, "impl=1,bm=64,bn=64,epi=1", &sa_row_max},
        {65, 64, 72, "nt", PT_F16, PT_F32, NULL, 0, "impl=1,bm=64,bn=64", &sa_huge},
        {65, 64, 72, "nt", PT_BF16, PT_F32, NULL, 0, "impl=1,bm=64,bn=64", &sa_tiny},
        {65, 64, 72, "nt", PT_F16, PT_F16, NULL, 0, "impl=1,bm=64,bn=64", &sa_ties},
        {65, 64, 72, "tt", PT_BF16, PT_BF16, NULL, 0, "impl=1,bm=64,bn=64,epi=1", &sa_ties},
        {65, 64, 40, "nt", PT_TF32, PT_F32, NULL, 0, "impl=1,bm=64,bn=64", &sa_inf_zero},
        {65, 64, 40, "nt", PT_TF32, PT_F32, NULL, 0, "impl=1,bm=64,bn=64", &sa_max_f32},
        {65, 64, 64, "nt", PT_E4M3, PT_BF16, NULL, 0, "impl=1,bm=64,bn=64", &sa_a_nan},
        {65, 64, 64, "nt", PT_E4M3, PT_E4M3, NULL, 0, "impl=1,bm=64,bn=64", &sa_huge},
        {65, 64, 64, "nt", PT_E5M2, PT_F32, NULL, 0, "impl=1,bm=64,bn=64", &sa_e5m2},
        {65, 64, 128, "nt", PT_S8, PT_S32, NULL, 0, "impl=1,bm=64,bn=64", &sa_int},
        {65, 64, 128, "nt", PT_U8, PT_S32, NULL, 0, "impl=1,bm=64,bn=64", &sa_int},
        {65, 64, 200, "nt", PT_S8, PT_F16, NULL, 0, "impl=1,bm=64,bn=64", &sa_int_ovf},
        {65, 64, 72, "nt", PT_BF16, PT_BF16, "acc + bias[n]", 0, "impl=1,bm=64,bn=64,epi=1", &sa_bias},
        {65, 64, 72, "nt", PT_F16, PT_F32, "relu(acc) + gelu(acc)", 0, "impl=1,bm=64,bn=64", &sa_act},
        {65, 64, 72, "nt", PT_BF16, PT_BF16, "silu(acc) + tanh(acc)", 0, "impl=1,bm=64,bn=64,epi=1", &sa_act},
        {65, 64, 72, "nt", PT_BF16, PT_F32, NULL, 0.5, "impl=1,bm=64,bn=64", &sa_c},
    };
    int ran = 0, failed = 0;
    char first[1400] = "";
    run_post = ties_post;
    for (size_t ci = 0; ci < 3 * sizeof cs / sizeof cs[0]; ci++) {
        size_t i = ci / 3;
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
        p.epilogue = cs[i].epi;
        p.beta = cs[i].beta;
        adv_arg g = {.s = cs[i].s, .layout = cs[i].lay, .m = p.m, .n = p.n, .k = p.k, .lda = p.lda, .ldb = p.ldb};
        pt_err e = {0};
        run_out o;
        emu_sched sc = scheds[ci % 3];
        int rc = run_on_plant("emu", &p, cs[i].cfg, sc, (uint64_t)(300 + ci), adv_plant, &g, &o, &e);
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
    run_post = NULL;
    printf("wgmma adversarial inputs: %d cases, %d failed, %.1f s\n", ran, failed, now() - t0);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

/* One dyn=m kernel (emitted at m = 300) run at M = 1, 65, 257 under lazy,
 * eager and random with NaN / inf planted in the run's last rows, K ends,
 * A's padding and C: the plain, persistent (3 SMs), split-K, stream-K and
 * TMA-store grids, against the reference under the verifier's rules (a
 * non-finite expected value matches only its own class; every element
 * compared; at least the spec's non-finite outputs, so no case is vacuous). */
Test(gemm_sm90, dyn_m_adversarial_inputs, .timeout = 600)
{
    double t0 = now();
    grid g = {0};
    static const int64_t ms[] = {1, 65, 257};
    struct {
        int64_t n, k, lda;
        const char *lay;
        pt_dtype dt, odt;
        double beta;
        const char *epi, *cfg;
        const adv_spec *s;
    } cs[] = {
        {96, 64, 72, "nt", PT_BF16, PT_BF16, 0, NULL, "bm=128,bn=64,stages=3", &adv_dyn_a},
        {128, 64, 72, "nn", PT_F16, PT_F32, 0, NULL, "bm=64,bn=64,stages=2,sms=3,persistent=1", &adv_dyn_a},
        {64, 256, 0, "nt", PT_BF16, PT_F32, 0, NULL, "bm=64,bn=64,stages=2,splitk=3", &adv_dyn_b},
        {40, 192, 0, "nt", PT_E4M3, PT_BF16, 0, NULL, "bm=64,bn=40,stages=3,sms=4,persistent=1,streamk=1", &adv_dyn_nan},
        {64, 64, 0, "nt", PT_BF16, PT_BF16, 0, NULL, "bm=64,bn=64,stages=2,epi=1", &adv_dyn_b},
        {64, 64, 0, "nt", PT_F16, PT_F16, 1, "alpha * acc + beta * c", "bm=64,bn=64,stages=2,sched=1,sms=2,persistent=1",
         &adv_dyn_c},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob_ldd(300, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
        if (cs[i].lda)
            p.lda = cs[i].lda;
        p.beta = cs[i].beta;
        p.epilogue = cs[i].epi;
        dyn_grid_adv(&g, p, 300, ms, 3, cs[i].cfg, 1700 + 40 * (uint64_t)i, cs[i].s);
    }
    grid_report(&g, "wgmma dyn=m adversarial: one kernel, m = 1 65 257", t0);
    cr_expect_eq(g.cases, 3 * 3 * (int)(sizeof cs / sizeof cs[0]));
}
