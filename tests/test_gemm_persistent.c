/* Persistent grids sized from the device's SM count at launch (issues 13
 * and 14): `persistent` = K (1 or 2 CTAs an SM) emits the natural grid
 * (one CTA per tile, unit or walker) with pt_launch.grid_per_sm = K, and
 * every launcher runs min(natural, K x SMs) CTAs (whole clusters,
 * pt_launch_grid_x); stream-K cuts its units from %nctaid.x at run time.
 *
 * On the emulator (every detector on, against the float64 reference):
 * mma.sync (sm_80) and wgmma (sm_90a: cooperative, the TMA store,
 * pingpong, clusters 21 / 12, stream-K) on devices of 1, 3, 7 and 132
 * SMs; every persistent form at explicit grids from 1 past its natural
 * extent; stream-K bit-identical across launches and schedules at a fixed
 * G. check()'s one-line refusal of other values; the emulator device's
 * SM count; the contract's SM term. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/contract.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"
#include "gemm_sm90_util.h"

typedef struct prun {
    unsigned grid;   /* the x extent that ran */
    unsigned natural;
    double max_err;
    void *bits;      /* keep: output 0's bytes of each launch */
    void *bits2;
    size_t nbits;
} prun;

/* config (over the defaults; "sms=N" the device's SMs) of p on arch, on
 * the emulator at schedule sched; gx > 0 launches that x extent instead of
 * the SM rule. verify against the reference; keep: launch twice on the same
 * buffers (the workspace left zero by the first) and keep both outputs. */
static int prun_one(const pt_problem *p, const char *arch, const char *config, emu_sched sched, uint64_t seed,
                    unsigned gx, bool keep, prun *o, pt_err *e)
{
    memset(o, 0, sizeof *o);
    char cbuf[512];
    int sms;
    config_sms(config, &sms, cbuf, sizeof cbuf);
    pt_target tg;
    cr_assert_eq(pt_target_parse(arch, &tg, e), PT_OK);
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
    if (!rc)
        rc = pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &built, &l, e);
    if (!rc)
        rc = print_round_trip(built, &text, &parsed, e);
    if (!rc)
        rc = open_load_io_arch("emu", tg.sm, sched, seed, sms, text, l.entry, pp, p, NULL, NULL, &d, &k, &io, e);
    if (!rc) {
        o->natural = l.grid[0];
        if (gx) {
            l.grid[0] = gx;
            l.grid_per_sm = 0;
        }
        o->grid = pt_launch_grid_x(&l, tuner_dev_info(d)->sm_count);
    }
    if (!rc && keep) {
        rc = tuner_io_upload(d, io, e);
        void **dst[2] = {&o->bits, &o->bits2};
        for (int r = 0; r < 2 && !rc; r++) {
            rc = tuner_io_run(d, k, &l, io, e);
            if (!rc) {
                o->nbits = io->out_bytes[0];
                *dst[r] = malloc(o->nbits);
                memcpy(*dst[r], io->out_bits[0], o->nbits);
            }
        }
    } else if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result vr;
        rc = tuner_verify(d, k, &l, io, &vo, &vr, e);
        o->max_err = vr.max_err;
    }
    run_release(d, k, io, text, parsed, built, a);
    return rc;
}

static const emu_sched scheds[3] = {EMU_SCHED_LAZY, EMU_SCHED_EAGER, EMU_SCHED_RANDOM};

typedef struct ptally {
    int ran, failed;
    char first[1200];
} ptally;

static void ptally_case(ptally *t, const pt_problem *p, const char *arch, const char *cfg, int sched,
                        uint64_t seed, unsigned gx, unsigned want_grid)
{
    pt_err e = {0};
    prun o;
    int rc = prun_one(p, arch, cfg, scheds[sched % 3], seed, gx, false, &o, &e);
    if (!rc && want_grid && o.grid != want_grid)
        rc = pt_errf(&e, PT_EINTERNAL, "grid x %u, want %u (natural %u)", o.grid, want_grid, o.natural);
    t->ran++;
    if (rc) {
        printf("  FAIL %s %lldx%lldx%lld %s [%s] grid %u sched %d: %s\n", arch, (long long)p->m, (long long)p->n,
               (long long)p->k, pt_dtype_get(p->dtype)->name, cfg, o.grid, sched % 3, e.msg);
        if (!t->failed++)
            snprintf(t->first, sizeof t->first, "%s [%s] grid %u: %s", arch, cfg, o.grid, e.msg);
    }
}

static void ptally_report(const ptally *t, const char *what, double t0)
{
    printf("%s: %d cases, %d failed, %.1f s\n", what, t->ran, t->failed, now() - t0);
    cr_expect_eq(t->failed, 0, "%d of %d failed; first: %s", t->failed, t->ran, t->first);
}

static const int sm_counts[4] = {1, 3, 7, 132};

static unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

/* mma.sync (sm_80): persistent=1 and 2 over 20..30 tiles (split-K, SIMT
 * f32, k slices, int8, a batch) on 1, 3, 7 and 132 SMs: the grid is
 * min(tiles, K x SMs) and every tile is right. */
Test(gemm_persistent, mma_sync_on_1_3_7_132_sms, .timeout = 300)
{
    double t0 = now();
    ptally t = {0};
    struct {
        int64_t m, n, k, batch;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi, *cfg;
        unsigned tiles;
    } cs[] = {
        {250, 130, 70, 1, "tn", PT_BF16, PT_BF16, "acc + bias[n]", "bm=64,bn=32,wm=32,wn=16,persistent=1", 20},
        {250, 130, 70, 1, "nn", PT_F32, PT_F32, NULL, "bm=32,bn=64,tm=4,tn=8,persistent=2", 24},
        {128, 96, 200, 1, "nt", PT_S8, PT_S32, NULL, "bm=32,bn=32,wm=16,wn=16,kslice=2,persistent=1,splitk=2", 12},
        {130, 70, 64, 2, "tn", PT_F16, PT_F32, NULL, "bm=32,bn=32,wm=16,wn=16,stages=2,persistent=2,raster=2", 15},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int s = 0; s < 4; s++, n++) {
            pt_problem p = PT_GEMM(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
            p.batch = cs[i].batch;
            p.epilogue = cs[i].epi;
            char cfg[256];
            snprintf(cfg, sizeof cfg, "%s,sms=%d", cs[i].cfg, sm_counts[s]);
            unsigned k = (unsigned)(strstr(cs[i].cfg, "persistent=2") ? 2 : 1);
            ptally_case(&t, &p, "sm_80", cfg, n, (uint64_t)n, 0, umin(cs[i].tiles, k * (unsigned)sm_counts[s]));
        }
    ptally_report(&t, "mma.sync persistent, 1/3/7/132 SMs", t0);
}

/* wgmma (sm_90a): every persistent form on 1, 3, 7 and 132 SMs: the
 * cooperative loop, the TMA-store epilogue, pingpong (64- and
 * 128-row tiles), cluster pairs along M and N (an odd SM count rounds down
 * to whole pairs, at least one), stream-K (units cut from the launch's G). */
Test(gemm_persistent, wgmma_forms_on_1_3_7_132_sms, .timeout = 600)
{
    double t0 = now();
    ptally t = {0};
    struct {
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt, odt;
        const char *epi, *cfg;
    } cs[] = {
        {257, 130, 72, "nt", PT_BF16, PT_BF16, "relu(acc + bias[n])", "impl=1,bm=64,bn=64,stages=2,persistent=1"},
        {200, 129, 64, "tt", PT_F16, PT_F32, NULL, "impl=1,bm=128,bn=32,stages=2,persistent=1,wg_wait=0"},
        {129, 130, 64, "nt", PT_BF16, PT_BF16, NULL, "impl=1,bm=64,bn=64,stages=2,epi=1,persistent=1"},
        {129, 100, 72, "nt", PT_BF16, PT_BF16, "gelu(acc)", "impl=1,bm=64,bn=32,sched=1,persistent=1"},
        {257, 96, 64, "nt", PT_E4M3, PT_BF16, NULL, "impl=1,bm=128,bn=48,stages=2,sched=1,persistent=1"},
        {300, 129, 64, "nt", PT_BF16, PT_F32, NULL, "impl=1,bm=64,bn=64,stages=2,cluster=21,persistent=1"},
        {130, 257, 64, "nt", PT_BF16, PT_F32, NULL, "impl=1,bm=64,bn=64,stages=2,cluster=12,persistent=1"},
        {129, 65, 1000, "nt", PT_BF16, PT_F32, NULL, "impl=1,bm=64,bn=32,stages=3,persistent=1,streamk=1"},
        {65, 129, 257, "tt", PT_F16, PT_F32, "acc + r", "impl=1,bm=128,bn=64,stages=2,persistent=1,streamk=1"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int s = 0; s < 4; s++, n++) {
            pt_problem p = prob_ldd(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, cs[i].odt);
            p.epilogue = cs[i].epi;
            char cfg[256];
            snprintf(cfg, sizeof cfg, "%s,sms=%d", cs[i].cfg, sm_counts[s]);
            ptally_case(&t, &p, "sm_90a", cfg, n, (uint64_t)(100 + n), 0, 0);
        }
    ptally_report(&t, "wgmma persistent forms, 1/3/7/132 SMs", t0);
}

/* Any grid x from 1 up: each persistent kernel launched at explicit x
 * extents (the SM rule off) from 1 to past its natural extent: the CTAs
 * walk what is there and those past the work leave (stream-K: a grid past
 * its units runs as that many units; clusters: whole pairs). */
Test(gemm_persistent, any_grid_from_one_up, .timeout = 600)
{
    double t0 = now();
    ptally t = {0};
    struct {
        const char *arch;
        int64_t m, n, k;
        const char *lay;
        pt_dtype dt;
        const char *cfg;
        int step; /* grids are multiples of it (a pair) */
    } cs[] = {
        {"sm_80", 130, 70, 64, "tn", PT_BF16, "bm=32,bn=32,wm=16,wn=16,stages=2,persistent=1,splitk=2", 1},
        {"sm_90a", 129, 130, 72, "nt", PT_BF16, "impl=1,bm=64,bn=64,stages=2,persistent=1", 1},
        {"sm_90a", 129, 100, 72, "nt", PT_BF16, "impl=1,bm=64,bn=32,sched=1,persistent=1", 1},
        {"sm_90a", 300, 129, 64, "nt", PT_BF16, "impl=1,bm=64,bn=64,stages=2,cluster=21,persistent=1", 2},
        {"sm_90a", 129, 65, 700, "nt", PT_F16, "impl=1,bm=64,bn=32,stages=2,persistent=1,streamk=1", 1},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_problem p = prob(cs[i].m, cs[i].n, cs[i].k, cs[i].lay, cs[i].dt, PT_F32);
        pt_err e = {0};
        prun o;
        /* the natural extent first (the SM rule of a 132-SM device) */
        cr_assert_eq(prun_one(&p, cs[i].arch, cs[i].cfg, EMU_SCHED_LAZY, 1, 0, false, &o, &e), PT_OK, "%s: %s",
                     cs[i].cfg, e.msg);
        unsigned nat = o.natural, st = (unsigned)cs[i].step;
        unsigned gs[6] = {st, 2 * st, 3 * st, nat > 2 * st ? nat - st : nat, nat, nat + 2 * st};
        for (int g = 0; g < 6; g++, n++)
            ptally_case(&t, &p, cs[i].arch, cs[i].cfg, n, (uint64_t)(200 + n), gs[g], gs[g]);
    }
    ptally_report(&t, "persistent kernels at grids 1..natural+2", t0);
}

/* Stream-K at a fixed G is deterministic: two launches on the same buffers
 * (the workspace left zero by the first) give the same bits, and so does
 * another device of the same SM count under another schedule. */
Test(gemm_persistent, streamk_bit_identical_at_a_fixed_grid, .timeout = 300)
{
    pt_problem p = prob(129, 65, 700, "nt", PT_BF16, PT_F32);
    const char *cfgs[2] = {"impl=1,bm=64,bn=32,stages=2,persistent=1,streamk=1,sms=5",
                           "impl=1,bm=64,bn=32,stages=2,persistent=1,streamk=1,sms=3"};
    for (int c = 0; c < 2; c++) {
        pt_err e = {0};
        prun a, b;
        cr_assert_eq(prun_one(&p, "sm_90a", cfgs[c], EMU_SCHED_RANDOM, 3, 0, true, &a, &e), PT_OK, "%s", e.msg);
        cr_assert_eq(prun_one(&p, "sm_90a", cfgs[c], EMU_SCHED_RANDOM, 4242, 0, true, &b, &e), PT_OK, "%s",
                     e.msg);
        cr_expect_eq(a.grid, c ? 3u : 5u);
        cr_assert_eq(a.nbits, b.nbits);
        cr_expect(memcmp(a.bits, a.bits2, a.nbits) == 0, "%s: two launches differ", cfgs[c]);
        cr_expect(memcmp(a.bits, b.bits, a.nbits) == 0, "%s: two schedules differ", cfgs[c]);
        free(a.bits);
        free(a.bits2);
        free(b.bits);
        free(b.bits2);
    }
}

/* persistent takes 0, 1 or 2 (CTAs an SM; the wgmma loop 0 or 1), both
 * main loops, in one line. */
Test(gemm_persistent, other_values_are_refused_in_one_line)
{
    struct {
        const char *arch, *cfg, *msg;
    } cs[] = {
        {"sm_80", "bm=64,bn=64,persistent=3", "persistent=3: 0 (off), 1 or 2 (CTAs per SM"},
        {"sm_80", "bm=64,bn=64,persistent=132", "persistent=132: 0 (off), 1 or 2"},
        {"sm_90a", "impl=1,persistent=132", "persistent=132: 0 (off), 1 or 2 (CTAs per SM of a persistent grid sized "
                                            "from the SM count at launch)"},
        {"sm_90a", "impl=1,cluster=21,persistent=-2", "persistent=-2: 0 (off), 1 or 2"},
        {"sm_90a", "impl=1,streamk=1", "streamk=1 needs persistent=1 or 2"},
        {"sm_90a", "impl=1,bm=128,bn=128,persistent=2", "persistent=2: two CTAs an SM do not fit (a persistent wgmma "
                                                         "CTA takes"},
    };
    pt_problem p = prob(512, 512, 512, "nt", PT_BF16, PT_F64);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_target tg;
        pt_err e = {0};
        cr_assert_eq(pt_target_parse(cs[i].arch, &tg, &e), PT_OK);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), PT_OK, "%s", e.msg);
        pt_config c;
        gen_gemm_op.defaults(pp, &tg, &c);
        pt_space s;
        gen_gemm_op.space(pp, &tg, &s);
        cr_assert_eq(pt_config_parse(&s, cs[i].cfg, &c, &e), PT_OK, "%s", e.msg);
        int rc = gen_gemm_op.check(pp, &tg, &c, &e);
        cr_expect_eq(rc, PT_EINVAL, "%s %s accepted", cs[i].arch, cs[i].cfg);
        cr_expect(strstr(e.msg, cs[i].msg) != NULL, "%s: '%s', want '%s'", cs[i].cfg, e.msg, cs[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
        pt_arena_free(a);
    }
}

/* The emulator device reports a realistic SM count for its arch (what a
 * persistent grid is sized from), or the one a test asks for. */
Test(gemm_persistent, emulator_device_sm_count)
{
    struct {
        int arch, ask, want;
    } cs[] = {{90, 0, 132}, {80, 0, 108}, {89, 0, 142}, {0, 0, 132}, {90, 7, 7}, {80, 1, 1}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tuner_dev_opts o = {.emu_arch = cs[i].arch, .emu_sm_count = cs[i].ask};
        tuner_dev *d = NULL;
        pt_err e = {0};
        cr_assert_eq(tuner_dev_open("emu", &o, &d, &e), PT_OK, "%s", e.msg);
        cr_expect_eq(tuner_dev_info(d)->sm_count, cs[i].want, "arch %d ask %d", cs[i].arch, cs[i].ask);
        tuner_dev_close(d);
    }
    tuner_dev_opts bad = {.emu_sm_count = 5000};
    tuner_dev *d = NULL;
    pt_err e = {0};
    cr_expect_eq(tuner_dev_open("emu", &bad, &d, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "bad SM count 5000") != NULL, "%s", e.msg);
}

/* The contract of a persistent config carries the SM term (version 2):
 * the wgmma stream-K kernel's grid {"const":units,"per_sm":1}, a dyn=m
 * persistent mma.sync kernel's tiles at run-time M ("times": the column
 * tiles) with "per_sm":2; a plain config stays version 1 without it. */
Test(gemm_persistent, the_contract_has_the_sm_term)
{
    struct {
        const char *key, *arch, *cfg;
        const char *want[3]; /* substrings; a leading '!' must be absent */
    } cs[] = {
        {"gemm m=129 n=65 k=700 dtype=bf16 layout=nt lda=704 ldb=704", "sm_90a",
         "impl=1,bm=64,bn=32,bk=64,stages=2,raster=1,wg_wait=1,persistent=1,epi=0,splitk=1,streamk=1,sched=0,cluster=1",
         {"\"v\":2", "\"grid\":[{\"const\":99,\"per_sm\":1}", "\"workspace\":{\"bytes\":"}},
        {"gemm m=100 n=96 k=64 dtype=bf16 layout=nt dyn=m", "sm_80",
         "bm=32,bn=32,bk=32,wm=16,wn=16,stages=2,kslice=1,splitk=1,raster=1,persistent=2",
         {"\"v\":2", "\"mul\":1,\"div\":32,\"times\":3,\"per_sm\":2}", "\"name\":\"m\",\"tuned\":100,\"min\":1"}},
        {"gemm m=100 n=96 k=64 dtype=bf16 layout=nt", "sm_80",
         "bm=32,bn=32,bk=32,wm=16,wn=16,stages=2,kslice=1,splitk=1,raster=1,persistent=0",
         {"\"v\":1", "!per_sm", "!times"}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pt_buf b;
        pt_buf_init(&b);
        pt_err e = {0};
        cr_assert_eq(tuner_contract_row("gemm", cs[i].key, cs[i].arch, 0, cs[i].cfg, &b, &e), PT_OK, "%s: %s",
                     cs[i].key, e.msg);
        for (int j = 0; j < 3 && cs[i].want[j]; j++) {
            const char *w = cs[i].want[j];
            if (w[0] == '!')
                cr_expect(!strstr(b.s, w + 1), "%s: '%s' in %s", cs[i].key, w + 1, b.s);
            else
                cr_expect(strstr(b.s, w) != NULL, "%s: no '%s' in %s", cs[i].key, w, b.s);
        }
        pt_buf_free(&b);
    }
}
