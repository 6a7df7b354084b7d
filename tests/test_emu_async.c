/* Hopper's asynchronous part on the emulator: mbarrier semantics (sm90 ref
 * 5.1), blocking waits, the async engine's schedules (lazy, eager, random)
 * giving identical results, TMA loads (128B swizzle, zero fill) and stores,
 * bulk copies and groups, and the planted-bug kernels of
 * tests/ptx/sm90/emu/ (each fires its detector; their fixed twin runs clean
 * under every schedule). Expected values come from the formulas of the sm90
 * ref, computed here. */
#include "ptx/emu/emu.h"
#include "ptx/emu/tmap.h"
#include "ptx/parse.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct run {
    ptx_module *m;
    emu_ctx *c;
    emu_kernel *k;
} run;

static void load_text(run *r, const char *text, const emu_opts *o)
{
    pt_err e = {0};
    cr_assert_eq(ptx_parse(text, strlen(text), "k.ptx", 0, &r->m, &e), PT_OK, "%s", e.msg);
    r->c = emu_new(o);
    cr_assert(r->c);
    cr_assert_eq(emu_load(r->c, r->m, NULL, &r->k, &e), PT_OK, "%s", e.msg);
}

static char *read_file(const char *name)
{
    const char *dir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(dir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/ptx/sm90/emu/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static void run_free(run *r)
{
    emu_kernel_free(r->k);
    emu_free(r->c);
    ptx_module_free(r->m);
}

static emu_opts sched_opts(const char *sched)
{
    emu_opts o = emu_default_opts();
    pt_err e = {0};
    cr_assert_eq(emu_schedule_parse(sched, &o, &e), PT_OK, "%s", e.msg);
    return o;
}

static bool has_kind(const run *r, emu_report_kind k, const char *needle)
{
    for (int i = 0; i < emu_nreports(r->c); i++)
        if (emu_report_kind_of(r->c, i) == k && (!needle || strstr(emu_report(r->c, i), needle)))
            return true;
    return false;
}

static void dump(const run *r)
{
    for (int i = 0; i < emu_nreports(r->c); i++)
        fprintf(stderr, "  report: %s\n", emu_report(r->c, i));
}

static const char *const scheds[] = {"lazy", "eager", "random:1", "random:2", "random:3"};

Test(emu_async, schedule_option)
{
    emu_opts o = emu_default_opts();
    pt_err e = {0};
    char buf[32];
    cr_assert_eq(o.schedule, EMU_SCHED_LAZY);
    cr_assert_eq(emu_schedule_parse("eager", &o, &e), PT_OK);
    cr_assert_eq(o.schedule, EMU_SCHED_EAGER);
    cr_assert_eq(emu_schedule_parse("random:77", &o, &e), PT_OK);
    cr_assert_eq(o.schedule, EMU_SCHED_RANDOM);
    cr_assert_eq(o.schedule_seed, 77);
    cr_assert_str_eq(emu_schedule_str(&o, buf, sizeof buf), "random:77");
    cr_assert_eq(emu_schedule_parse("random:", &o, &e), PT_EINVAL);
    cr_assert(strstr(e.msg, "'random:'"), "%s", e.msg);
    cr_assert_eq(emu_schedule_parse("fast", &o, &e), PT_EINVAL);
    cr_assert_eq(emu_schedule_parse("random:1x", &o, &e), PT_EINVAL);
}

/* ---- mbarrier truth table (sm90 ref 5.1), one thread ---- */

static const char mbar_text[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 out)\n{\n"
    "\t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n"
    "\t.shared .align 8 .b64 bar;\n"
    "\tld.param.u64 %rd1, [out];\n"
    "\tmov.u32 %r1, bar;\n"
    "\tmbarrier.init.shared::cta.b64 [%r1], 2;\n"
    /* 0: parity 1 (the phase before the first) counts as complete */
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 1;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1], %r2;\n"
    /* 1: parity 0 is not */
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+4], %r2;\n"
    /* one of two arrivals: still pending; its token's pending count is 1 */
    "\tmbarrier.arrive.shared::cta.b64 %rd2, [%r1];\n"
    "\tmbarrier.pending_count.b64 %r3, %rd2;\n\tst.global.u32 [%rd1+8], %r3;\n"
    "\tmbarrier.test_wait.shared::cta.b64 %p1, [%r1], %rd2;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+12], %r2;\n"
    /* expect_tx 16: the second arrival leaves 16 bytes missing */
    "\tmbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r1], 16;\n"
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+16], %r2;\n"
    /* complete_tx 16: phase 0 completes; the first token now tests true */
    "\tmbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%r1], 16;\n"
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+20], %r2;\n"
    "\tmbarrier.try_wait.shared::cta.b64 %p1, [%r1], %rd2;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+24], %r2;\n"
    /* phase 1 (parity 1) is open: arrive_drop lowers the count to 1 */
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 1;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+28], %r2;\n"
    "\tmbarrier.arrive_drop.shared::cta.b64 _, [%r1];\n"
    "\tmbarrier.arrive.shared::cta.b64 _, [%r1];\n"
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 1;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+32], %r2;\n"
    /* phase 2 takes one arrival */
    "\tmbarrier.arrive.shared::cta.b64 _, [%r1];\n"
    "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
    "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1+36], %r2;\n"
    "\tmbarrier.inval.shared::cta.b64 [%r1];\n"
    "\tret;\n}\n";

Test(emu_async, mbarrier_truth_table)
{
    run r = {0};
    emu_opts o = emu_default_opts();
    load_text(&r, mbar_text, &o);
    pt_err e = {0};
    uint64_t d = emu_alloc(r.c, 40, "out");
    const void *args[] = {&d};
    emu_launch l = {{1, 1, 1}, {1, 1, 1}, 0};
    int rc = emu_run(r.c, r.k, &l, args, NULL, &e);
    if (rc)
        dump(&r);
    cr_assert_eq(rc, PT_OK, "%s", e.msg);
    uint32_t got[10];
    cr_assert_eq(emu_read(r.c, d, got, sizeof got, &e), PT_OK);
    const uint32_t want[10] = {1, 0, 1, 0, 0, 1, 1, 0, 1, 1};
    for (int i = 0; i < 10; i++)
        cr_expect_eq(got[i], want[i], "value %d: %u, expected %u", i, got[i], want[i]);
    run_free(&r);
}

/* ---- the TMA round trip (tests/ptx/sm90/emu/tma_fixed.ptx) ---- */

enum { IN_W = 64, IN_H = 16, BOX_W = 32, BOX_H = 8, X0 = 16, Y0 = -4 };

static uint32_t sw128(uint32_t x) { return x ^ (((x >> 7) & 7) << 4); }

/* The input: in[y][x] = y * 100 + x + 0.5 (exact in f32). */
static float in_at(int x, int y) { return (float)(y * 100 + x) + 0.5f; }

/* Box element (b0, b1) as TMA loads it: zero outside the tensor. */
static float box_at(int b0, int b1)
{
    int x = X0 + b0, y = Y0 + b1;
    return x < 0 || x >= IN_W || y < 0 || y >= IN_H ? 0.0f : in_at(x, y);
}

typedef struct rt {
    run r;
    uint64_t din, dout, draw;
    uint8_t tin[128], tout[128];
    int rc;
    double seconds;
    float out[BOX_W * BOX_H], raw[BOX_W * BOX_H];
} rt;

/* With red, the store is a reduce-add into out filled with 1.5. */
static void rt_run_red(rt *t, const char *file, const char *sched, bool red);
static void rt_run(rt *t, const char *file, const char *sched) { rt_run_red(t, file, sched, false); }

static void rt_run_red(rt *t, const char *file, const char *sched, bool red)
{
    memset(t, 0, sizeof *t);
    char *text = read_file(file);
    if (red) {
        const char *st = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group";
        char *at = strstr(text, st);
        cr_assert(at);
        size_t n = strlen(text), pre = (size_t)(at - text);
        const char *rs = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group";
        char *t2 = malloc(n + strlen(rs) + 1);
        memcpy(t2, text, pre);
        strcpy(t2 + pre, rs);
        strcat(t2, at + strlen(st));
        free(text);
        text = t2;
    }
    emu_opts o = sched_opts(sched);
    load_text(&t->r, text, &o);
    free(text);
    emu_ctx *c = t->r.c;
    pt_err e = {0};
    float in[IN_W * IN_H];
    for (int y = 0; y < IN_H; y++)
        for (int x = 0; x < IN_W; x++)
            in[y * IN_W + x] = in_at(x, y);
    t->din = emu_alloc(c, sizeof in, "in");
    t->dout = emu_alloc(c, sizeof t->out, "out");
    t->draw = emu_alloc(c, sizeof t->raw, "raw");
    cr_assert_eq(emu_write(c, t->din, in, sizeof in, &e), PT_OK);
    if (red) {
        float one[BOX_W * BOX_H];
        for (int i = 0; i < BOX_W * BOX_H; i++)
            one[i] = 1.5f;
        cr_assert_eq(emu_write(c, t->dout, one, sizeof one, &e), PT_OK);
    }
    emu_tmap_desc a = {.dtype = EMU_TMAP_F32, .rank = 2, .gaddr = t->din,
                       .dims = {IN_W, IN_H}, .strides = {IN_W * 4}, .box = {BOX_W, BOX_H},
                       .estrides = {1, 1}, .swizzle = EMU_TMAP_SWIZZLE_128B};
    cr_assert_eq(emu_tmap_encode(&a, t->tin, &e), PT_OK, "%s", e.msg);
    emu_tmap_desc b = a;
    b.gaddr = t->dout;
    b.dims[0] = BOX_W;
    b.dims[1] = BOX_H;
    b.strides[0] = BOX_W * 4;
    cr_assert_eq(emu_tmap_encode(&b, t->tout, &e), PT_OK, "%s", e.msg);
    const void *args[] = {t->tin, t->tout, &t->draw};
    emu_launch l = {{1, 1, 1}, {64, 1, 1}, 0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    t->rc = emu_run(c, t->r.k, &l, args, NULL, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    t->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (t->rc == PT_OK) {
        cr_assert_eq(emu_read(c, t->dout, t->out, sizeof t->out, &e), PT_OK);
        cr_assert_eq(emu_read(c, t->draw, t->raw, sizeof t->raw, &e), PT_OK);
    }
}

Test(emu_async, tma_round_trip_every_schedule)
{
    float first[BOX_W * BOX_H], firstraw[BOX_W * BOX_H];
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        rt t;
        rt_run(&t, "tma_fixed.ptx", scheds[s]);
        if (t.rc)
            dump(&t.r);
        cr_assert_eq(t.rc, PT_OK, "schedule %s", scheds[s]);
        /* raw: shared word at byte p holds box element sw128(p) / 4 (the
         * tile is 1024-aligned, so the swizzle of its offsets is that of
         * the absolute addresses) */
        for (uint32_t p = 0; p < 1024; p += 4) {
            uint32_t li = sw128(p) / 4;
            float want = box_at((int)(li % BOX_W), (int)(li / BOX_W));
            cr_assert_eq(t.raw[p / 4], want, "%s: raw word %u: %g, expected %g", scheds[s], p / 4,
                         (double)t.raw[p / 4], (double)want);
        }
        /* out: the store un-swizzles: out[b1][b0] = 2 * box element */
        for (int i = 0; i < BOX_W * BOX_H; i++)
            cr_assert_eq(t.out[i], 2 * box_at(i % BOX_W, i / BOX_W), "%s: out %d", scheds[s], i);
        if (s == 0) {
            memcpy(first, t.out, sizeof first);
            memcpy(firstraw, t.raw, sizeof firstraw);
        } else {
            cr_assert(!memcmp(first, t.out, sizeof first), "%s differs from lazy", scheds[s]);
            cr_assert(!memcmp(firstraw, t.raw, sizeof firstraw), "%s differs from lazy", scheds[s]);
        }
        run_free(&t.r);
    }
}

/* Each planted bug fires its detector (under the lazy schedule, and under
 * eager where the bug does not depend on when the copy lands). */
static void planted(const char *file, emu_report_kind kind, const char *needle, bool eager_too)
{
    for (int s = 0; s < (eager_too ? 2 : 1); s++) {
        rt t;
        rt_run(&t, file, scheds[s]);
        cr_assert_eq(t.rc, PT_EEMU, "%s under %s ran clean", file, scheds[s]);
        if (!has_kind(&t.r, kind, needle))
            dump(&t.r);
        cr_assert(has_kind(&t.r, kind, needle), "%s under %s: no %s report with '%s'", file,
                  scheds[s], emu_report_kind_name(kind), needle ? needle : "");
        if (getenv("ASYNC_DUMP"))
            dump(&t.r);
        const char *line = emu_report(t.r.c, 0);
        cr_assert(strstr(line, "kernel k line "), "%s", line);
        cr_assert(t.seconds < 1.0, "%s took %g s", file, t.seconds);
        run_free(&t.r);
    }
}

Test(emu_async, planted_async_race_read_before_wait)
{
    planted("async_race_bug.ptx", EMU_R_ASYNC_RACE, "(ld)", false);
}
Test(emu_async, planted_missing_proxy_fence)
{
    planted("proxy_bug.ptx", EMU_R_PROXY_FENCE, "cp.async.bulk.tensor", true);
}
/* cp.async (non-bulk) lands in the generic proxy: a tile it filled, stored by
 * the async proxy (TMA store, bulk store) with no fence.proxy.async after the
 * wait, is reported; the fixed twins fence after the wait and run clean. */
Test(emu_async, planted_missing_proxy_fence_after_cp_async)
{
    planted("cpasync_tma_store_bug.ptx", EMU_R_PROXY_FENCE, "cp.async.bulk.tensor", true);
    planted("cpasync_bulk_store_bug.ptx", EMU_R_PROXY_FENCE, "cp.async.bulk", true);
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++)
        for (int f = 0; f < 2; f++) {
            rt t;
            const char *file = f ? "cpasync_bulk_store_fixed.ptx" : "cpasync_tma_store_fixed.ptx";
            rt_run(&t, file, scheds[s]);
            if (t.rc != PT_OK)
                dump(&t.r);
            cr_assert_eq(t.rc, PT_OK, "%s under %s: reported", file, scheds[s]);
            run_free(&t.r);
        }
}
Test(emu_async, planted_expect_tx_negative)
{
    planted("expect_tx_bug.ptx", EMU_R_EXPECT_TX, "went negative", true);
}
Test(emu_async, planted_deadlock_never_completes)
{
    planted("deadlock_bug.ptx", EMU_R_DEADLOCK, "mbarrier 'bar'+0 for parity 0", true);
}
Test(emu_async, planted_store_source_overwritten)
{
    planted("store_src_bug.ptx", EMU_R_ASYNC_RACE, "(st)", false);
}
/* A swizzled tile off its pattern boundary (128B swizzle at tile + 128): the
 * TMA load's destination is a layout error (hardware: silently other data). */
Test(emu_async, planted_swizzled_tile_off_its_pattern_boundary)
{
    planted("tma_swizzle_misaligned_bug.ptx", EMU_R_LAYOUT, "1024-byte", true);
}

/* ---- bulk copies, bulk groups, cp.async.mbarrier.arrive ---- */

static int run_text(run *r, const char *text, const char *sched, unsigned threads,
                    const void *const *args)
{
    emu_opts o = sched_opts(sched);
    load_text(r, text, &o);
    pt_err e = {0};
    emu_launch l = {{1, 1, 1}, {threads, 1, 1}, 0};
    return emu_run(r->c, r->k, &l, args, NULL, &e);
}

#define HDR ".version 8.0\n.target sm_90\n.address_size 64\n"
#define REGS "\t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<8>;\n"
#define REGSF "\t.reg .pred %%p<4>;\n\t.reg .b32 %%r<16>;\n\t.reg .b64 %%rd<8>;\n\t.reg .f32 %%f<8>;\n"

/* in (256 bytes) -> shared by a bulk copy on an mbarrier, +1 per word by
 * 64 threads, fence, shared -> out by a bulk store in a bulk group. BYTES
 * is what arrive.expect_tx announces; COPIES the number of 128-byte halves
 * copied (2: the whole buffer). */
static char *bulk_text(int bytes, bool two_calls)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             HDR ".visible .entry k(.param .u64 in, .param .u64 out)\n{\n" REGSF
             "\t.shared .align 128 .b8 buf[256];\n\t.shared .align 8 .b64 bar;\n"
             "\tld.param.u64 %%rd1, [in];\n\tld.param.u64 %%rd2, [out];\n"
             "\tmov.u32 %%r1, %%tid.x;\n\tmov.u32 %%r2, buf;\n\tmov.u32 %%r3, bar;\n"
             "\tsetp.eq.u32 %%p1, %%r1, 0;\n"
             "\t@%%p1 mbarrier.init.shared::cta.b64 [%%r3], 1;\n\tbar.sync 0;\n"
             "\t@%%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%%r3], %d;\n"
             "%s"
             "$W:\n\tmbarrier.try_wait.parity.shared::cta.b64 %%p2, [%%r3], 0;\n\t@!%%p2 bra $W;\n"
             "\tshl.b32 %%r4, %%r1, 2;\n\tadd.u32 %%r5, %%r2, %%r4;\n"
             "\tld.shared.f32 %%f1, [%%r5];\n\tadd.f32 %%f1, %%f1, 0f3F800000;\n"
             "\tst.shared.f32 [%%r5], %%f1;\n\tfence.proxy.async.shared::cta;\n\tbar.sync 0;\n"
             "\t@%%p1 cp.async.bulk.global.shared::cta.bulk_group [%%rd2], [%%r2], 256;\n"
             "\t@%%p1 cp.async.bulk.commit_group;\n\t@%%p1 cp.async.bulk.wait_group 0;\n"
             "\tret;\n}\n",
             bytes,
             two_calls
                 ? "\t@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd1], 128, [%r3];\n"
                   "\tadd.u32 %r6, %r2, 128;\n\tadd.s64 %rd3, %rd1, 128;\n"
                   "\t@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd3], 128, [%r3];\n"
                 : "\t@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd1], 256, [%r3];\n");
    return buf;
}

static int bulk_run(run *r, const char *text, const char *sched, float *out)
{
    emu_opts o = sched_opts(sched);
    load_text(r, text, &o);
    pt_err e = {0};
    float in[64];
    for (int i = 0; i < 64; i++)
        in[i] = (float)i * 0.25f;
    uint64_t din = emu_alloc(r->c, sizeof in, "in"), dout = emu_alloc(r->c, sizeof in, "out");
    cr_assert_eq(emu_write(r->c, din, in, sizeof in, &e), PT_OK);
    const void *args[] = {&din, &dout};
    emu_launch l = {{1, 1, 1}, {64, 1, 1}, 0};
    int rc = emu_run(r->c, r->k, &l, args, NULL, &e);
    if (rc == PT_OK)
        cr_assert_eq(emu_read(r->c, dout, out, 64 * sizeof *out, &e), PT_OK);
    return rc;
}

Test(emu_async, bulk_copy_round_trip_every_schedule)
{
    for (int two = 0; two < 2; two++)
        for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
            run r = {0};
            float out[64];
            int rc = bulk_run(&r, bulk_text(256, two), scheds[s], out);
            if (rc)
                dump(&r);
            cr_assert_eq(rc, PT_OK, "%s", scheds[s]);
            for (int i = 0; i < 64; i++)
                cr_assert_eq(out[i], (float)i * 0.25f + 1.0f, "%s: out[%d] = %g", scheds[s], i,
                             (double)out[i]);
            run_free(&r);
        }
}

/* expect_tx announces 128 of the 256 bytes of two copies: under the lazy
 * schedule phase 0 completes while the second copy is in flight. */
Test(emu_async, expect_tx_too_small_phase_completes_in_flight)
{
    run r = {0};
    float out[64];
    cr_assert_eq(bulk_run(&r, bulk_text(128, true), "lazy", out), PT_EEMU);
    if (!has_kind(&r, EMU_R_EXPECT_TX, "still in flight"))
        dump(&r);
    cr_assert(has_kind(&r, EMU_R_EXPECT_TX, "still in flight: expect_tx too small"));
    run_free(&r);
}

/* 32 threads cp.async 16 bytes each, then cp.async.mbarrier.arrive (.noinc:
 * the arrival counts; without it the thread arrives as well); each reads
 * its neighbour's bytes after the wait. */
static void cp_arrive(bool noinc, const char *sched)
{
    char text[4096];
    snprintf(text, sizeof text,
             HDR ".visible .entry k(.param .u64 in, .param .u64 out)\n{\n" REGSF
             "\t.shared .align 128 .b8 buf[512];\n\t.shared .align 8 .b64 bar;\n"
             "\tld.param.u64 %%rd1, [in];\n\tld.param.u64 %%rd2, [out];\n"
             "\tmov.u32 %%r1, %%tid.x;\n\tmov.u32 %%r2, buf;\n\tmov.u32 %%r3, bar;\n"
             "\tsetp.eq.u32 %%p1, %%r1, 0;\n"
             "\t@%%p1 mbarrier.init.shared::cta.b64 [%%r3], 32;\n\tbar.sync 0;\n"
             "\tshl.b32 %%r4, %%r1, 4;\n\tadd.u32 %%r5, %%r2, %%r4;\n"
             "\tcvt.u64.u32 %%rd3, %%r4;\n\tadd.s64 %%rd4, %%rd1, %%rd3;\n"
             "\tcp.async.cg.shared.global [%%r5], [%%rd4], 16;\n"
             "\tcp.async.mbarrier.arrive%s.shared.b64 [%%r3];\n%s"
             "$W:\n\tmbarrier.try_wait.parity.shared::cta.b64 %%p2, [%%r3], 0;\n\t@!%%p2 bra $W;\n"
             "\txor.b32 %%r6, %%r4, 16;\n\tadd.u32 %%r7, %%r2, %%r6;\n"
             "\tld.shared.f32 %%f1, [%%r7];\n"
             "\tmul.wide.u32 %%rd5, %%r1, 4;\n\tadd.s64 %%rd6, %%rd2, %%rd5;\n"
             "\tst.global.f32 [%%rd6], %%f1;\n\tret;\n}\n",
             noinc ? ".noinc" : "", noinc ? "" : "\tmbarrier.arrive.shared::cta.b64 _, [%r3];\n");
    run r = {0};
    emu_opts o = sched_opts(sched);
    load_text(&r, text, &o);
    pt_err e = {0};
    float in[128], out[32];
    for (int i = 0; i < 128; i++)
        in[i] = (float)i;
    uint64_t din = emu_alloc(r.c, sizeof in, "in"), dout = emu_alloc(r.c, sizeof out, "out");
    cr_assert_eq(emu_write(r.c, din, in, sizeof in, &e), PT_OK);
    const void *args[] = {&din, &dout};
    emu_launch l = {{1, 1, 1}, {32, 1, 1}, 0};
    int rc = emu_run(r.c, r.k, &l, args, NULL, &e);
    if (rc)
        dump(&r);
    cr_assert_eq(rc, PT_OK, "%s %s", noinc ? "noinc" : "inc", sched);
    cr_assert_eq(emu_read(r.c, dout, out, sizeof out, &e), PT_OK);
    for (int t = 0; t < 32; t++)
        cr_assert_eq(out[t], (float)((t ^ 1) * 4), "thread %d: %g", t, (double)out[t]);
    run_free(&r);
}

Test(emu_async, cp_async_mbarrier_arrive)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        cp_arrive(true, scheds[s]);
        cp_arrive(false, scheds[s]);
    }
}

/* A test_wait poll loop that nothing completes: the spinning warp is a
 * deadlock report, at once, not a hang. */
Test(emu_async, test_wait_spin_deadlock)
{
    static const char text[] =
        HDR ".visible .entry k()\n{\n" REGS "\t.shared .align 8 .b64 bar;\n"
        "\tmov.u32 %r3, bar;\n\tmbarrier.init.shared::cta.b64 [%r3], 2;\n"
        "\tmbarrier.arrive.shared::cta.b64 _, [%r3];\n"
        "$W:\n\tmbarrier.test_wait.parity.shared::cta.b64 %p2, [%r3], 0;\n\t@!%p2 bra $W;\n"
        "\tret;\n}\n";
    run r = {0};
    cr_assert_eq(run_text(&r, text, "lazy", 1, NULL), PT_EEMU);
    if (!has_kind(&r, EMU_R_DEADLOCK, "needs 1 more of 2 arrivals"))
        dump(&r);
    cr_assert(has_kind(&r, EMU_R_DEADLOCK, "needs 1 more of 2 arrivals"));
    run_free(&r);
}

/* Misuse: waiting on a barrier nobody initialised; arrivals beyond the count. */
Test(emu_async, mbarrier_misuse)
{
    static const char uninit[] =
        HDR ".visible .entry k()\n{\n" REGS "\t.shared .align 8 .b64 bar;\n"
        "\tmov.u32 %r3, bar;\n"
        "\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;\n\tret;\n}\n";
    run r = {0};
    cr_assert_eq(run_text(&r, uninit, "lazy", 32, NULL), PT_EEMU);
    cr_assert(has_kind(&r, EMU_R_MBARRIER, "never initialised"));
    run_free(&r);
    static const char extra[] =
        HDR ".visible .entry k()\n{\n" REGS "\t.shared .align 8 .b64 bar;\n"
        "\tmov.u32 %r3, bar;\n\tmov.u32 %r1, %tid.x;\n\tsetp.eq.u32 %p1, %r1, 0;\n"
        "\t@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;\n\tbar.sync 0;\n"
        "\tmbarrier.arrive.shared::cta.b64 _, [%r3], 2;\n\tret;\n}\n";
    cr_assert_eq(run_text(&r, extra, "lazy", 1, NULL), PT_EEMU);
    cr_assert(has_kind(&r, EMU_R_MBARRIER, "beyond the expected count"));
    run_free(&r);
}

/* ---- the race detector understands mbarrier phases ---- */

/* Warp 0 writes x; warp 1 reads it with no order between them, although
 * an unrelated mbarrier phase (warp 1's own) completes in between: a race. */
Test(emu_async, race_not_hidden_by_an_unrelated_phase)
{
    static const char text[] =
        HDR ".visible .entry k()\n{\n" REGS
        "\t.shared .align 8 .b64 bar;\n\t.shared .align 4 .b32 x;\n"
        "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, x;\n\tmov.u32 %r3, bar;\n"
        "\tsetp.eq.u32 %p1, %r1, 0;\n\tsetp.eq.u32 %p2, %r1, 32;\n"
        "\t@%p1 st.shared.u32 [%r2], 7;\n"
        "\t@%p2 mbarrier.init.shared::cta.b64 [%r3], 1;\n"
        "\t@%p2 mbarrier.arrive.shared::cta.b64 _, [%r3];\n"
        "\t@%p2 ld.shared.u32 %r4, [%r2];\n\tret;\n}\n";
    run r = {0};
    cr_assert_eq(run_text(&r, text, "lazy", 64, NULL), PT_EEMU);
    if (!has_kind(&r, EMU_R_RACE, "read after a write"))
        dump(&r);
    cr_assert(has_kind(&r, EMU_R_RACE, "read after a write"));
    run_free(&r);
}

/* Orders through mbarrier phases and named barriers are transitive: warp 0
 * writes x and arrives on b1; warp 1 waits on b1 and arrives on b2; warp 2
 * waits on b2 and reads x, then warps 2 and 3 meet at bar.sync 1, 64 and
 * warp 3 overwrites x: no race. */
static const char chain_text[] =
    HDR ".visible .entry k(.param .u64 out)\n{\n" REGS
    "\t.shared .align 8 .b64 b1;\n\t.shared .align 8 .b64 b2;\n\t.shared .align 4 .b32 x;\n"
    "\tld.param.u64 %rd1, [out];\n"
    "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, x;\n\tmov.u32 %r3, b1;\n\tmov.u32 %r4, b2;\n"
    "\tshr.u32 %r5, %r1, 5;\n\tand.b32 %r6, %r1, 31;\n\tsetp.eq.u32 %p3, %r6, 0;\n"
    "\tsetp.eq.u32 %p1, %r1, 0;\n"
    "\t@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;\n"
    "\t@%p1 mbarrier.init.shared::cta.b64 [%r4], 1;\n\tbar.sync 0;\n"
    "\tsetp.eq.u32 %p2, %r5, 0;\n\t@%p2 bra $W0;\n"
    "\tsetp.eq.u32 %p2, %r5, 1;\n\t@%p2 bra $W1;\n"
    "\tsetp.eq.u32 %p2, %r5, 2;\n\t@%p2 bra $W2;\n"
    "\tbra $W3;\n"
    "$W0:\n\t@%p3 st.shared.u32 [%r2], 7;\n"
    "\t@%p3 mbarrier.arrive.shared::cta.b64 _, [%r3];\n\tret;\n"
    "$W1:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;\n\t@!%p2 bra $W1;\n"
    "\t@%p3 mbarrier.arrive.shared::cta.b64 _, [%r4];\n\tret;\n"
    "$W2:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;\n\t@!%p2 bra $W2;\n"
    "\tld.shared.u32 %r7, [%r2];\n\tst.global.u32 [%rd1], %r7;\n"
    "\tbar.sync 1, 64;\n\tret;\n"
    "$W3:\n\tbar.sync 1, 64;\n\t@%p3 st.shared.u32 [%r2], 9;\n\tret;\n}\n";

Test(emu_async, transitive_order_through_phases_is_no_race)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        run r = {0};
        pt_err e = {0};
        emu_opts o = sched_opts(scheds[s]);
        load_text(&r, chain_text, &o);
        uint64_t d = emu_alloc(r.c, 4, "out");
        const void *args[] = {&d};
        emu_launch l = {{1, 1, 1}, {128, 1, 1}, 0};
        int rc = emu_run(r.c, r.k, &l, args, NULL, &e);
        if (rc)
            dump(&r);
        cr_assert_eq(rc, PT_OK, "%s: %s", scheds[s], e.msg);
        uint32_t v;
        cr_assert_eq(emu_read(r.c, d, &v, 4, &e), PT_OK);
        cr_assert_eq(v, 7);
        run_free(&r);
    }
}

/* Reading TMA data without the wait is a race even when the copy already
 * landed (eager): the data is ordered only by the phase's completion. */
Test(emu_async, read_before_wait_is_a_race_under_eager)
{
    rt t;
    rt_run(&t, "async_race_bug.ptx", "eager");
    cr_assert_eq(t.rc, PT_EEMU);
    if (!has_kind(&t.r, EMU_R_RACE, "read after a write"))
        dump(&t.r);
    cr_assert(has_kind(&t.r, EMU_R_RACE, "read after a write"));
    run_free(&t.r);
}

/* barrier.cluster.arrive / wait in a cluster of one CTA: a CTA-wide
 * split barrier (every non-exited thread arrives before any wait returns),
 * which orders the shared accesses around it. */
Test(emu_async, cluster_barrier_of_one_cta)
{
    static const char text[] =
        HDR ".visible .entry k(.param .u64 out)\n{\n" REGS
        "\t.shared .align 4 .b8 x[256];\n"
        "\tld.param.u64 %rd1, [out];\n"
        "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, x;\n\tshl.b32 %r3, %r1, 2;\n"
        "\tadd.u32 %r4, %r2, %r3;\n\tst.shared.u32 [%r4], %r1;\n"
        "\tbarrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n"
        "\txor.b32 %r5, %r3, 128;\n\tadd.u32 %r6, %r2, %r5;\n\tld.shared.u32 %r7, [%r6];\n"
        "\tmov.u32 %r8, %cluster_ctarank;\n\tadd.u32 %r7, %r7, %r8;\n"
        "\tmov.u32 %r8, %cluster_nctarank;\n\tmad.lo.u32 %r7, %r8, 1000, %r7;\n"
        "\tmul.wide.u32 %rd2, %r1, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n\tst.global.u32 [%rd3], %r7;\n"
        "\tret;\n}\n";
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        run r = {0};
        pt_err e = {0};
        emu_opts o = sched_opts(scheds[s]);
        load_text(&r, text, &o);
        uint64_t d = emu_alloc(r.c, 256, "out");
        const void *args[] = {&d};
        emu_launch l = {{2, 1, 1}, {64, 1, 1}, 0};
        int rc = emu_run(r.c, r.k, &l, args, NULL, &e);
        if (rc)
            dump(&r);
        cr_assert_eq(rc, PT_OK, "%s: %s", scheds[s], e.msg);
        uint32_t v[64];
        cr_assert_eq(emu_read(r.c, d, v, sizeof v, &e), PT_OK);
        for (uint32_t t = 0; t < 64; t++)
            cr_assert_eq(v[t], 1000 + (t ^ 32), "thread %u: %u", t, v[t]);
        run_free(&r);
    }
}

/* cp.reduce.async.bulk.tensor .add: out (1.5 everywhere) += 2 * box. */
Test(emu_async, tma_reduce_add_every_schedule)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        rt t;
        rt_run_red(&t, "tma_fixed.ptx", scheds[s], true);
        if (t.rc)
            dump(&t.r);
        cr_assert_eq(t.rc, PT_OK, "schedule %s", scheds[s]);
        for (int i = 0; i < BOX_W * BOX_H; i++)
            cr_assert_eq(t.out[i], 1.5f + 2 * box_at(i % BOX_W, i / BOX_W), "%s: out %d", scheds[s], i);
        run_free(&t.r);
    }
}

/* ---- clusters of more than one CTA (issue 12 item 1) ---- */

static char *read_sm90(const char *name)
{
    const char *dir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(dir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/ptx/sm90/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Runs text (or a tests/ptx/sm90 file when text starts with '@', one under
 * emu/ with "@emu/") as a cluster launch with one output buffer of `words`
 * u32; returns emu_run's code, the output in out (NULL: not read). */
static int run_cl(run *r, const char *text, const char *sched, const unsigned grid[3],
                  unsigned block, const unsigned cl[3], size_t words, uint32_t *out)
{
    char *t = text[0] == '@' ? read_sm90(text + 1) : NULL;
    emu_opts o = sched_opts(sched);
    load_text(r, t ? t : text, &o);
    free(t);
    pt_err e = {0};
    uint64_t d = emu_alloc(r->c, words * 4, "out");
    const void *args[] = {&d};
    emu_launch l = {{grid[0], grid[1], grid[2]}, {block, 1, 1}, 0};
    int rc = emu_run_cluster(r->c, r->k, &l, cl, false, args, NULL, &e);
    if (rc == PT_OK && out)
        cr_assert_eq(emu_read(r->c, d, out, words * 4, &e), PT_OK);
    return rc;
}

/* The DSMEM probe (tests/ptx/sm90/cluster_dsmem_sm90.ptx) in clusters of 2
 * along x and of 2 x 2, two clusters each, under every schedule: each
 * thread sees its next rank's value, getctarank names that rank, the
 * cluster registers have their values and rank 0's counters got every
 * atom and red of the cluster. */
Test(emu_async, cluster_dsmem_exchange_every_schedule)
{
    static const unsigned shapes[][2][3] = {{{4, 1, 1}, {2, 1, 1}}, {{2, 4, 1}, {2, 2, 1}},
                                            {{8, 1, 1}, {8, 1, 1}}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
            const unsigned *g = shapes[sh][0], *d = shapes[sh][1];
            unsigned nct = g[0] * g[1], n = d[0] * d[1];
            uint32_t *out = calloc((size_t)nct * 144, 4);
            run r = {0};
            int rc = run_cl(&r, "@cluster_dsmem_sm90.ptx", scheds[s], g, 64, d, (size_t)nct * 144, out);
            if (rc)
                dump(&r);
            cr_assert_eq(rc, PT_OK, "cluster %u,%u %s", d[0], d[1], scheds[s]);
            for (unsigned y = 0; y < g[1]; y++)
                for (unsigned x = 0; x < g[0]; x++) {
                    unsigned L = x + g[0] * y, cx = x % d[0], cy = y % d[1];
                    unsigned rank = cx + d[0] * cy, next = (rank + 1) % n;
                    unsigned px = x - cx + next % d[0], py = y - cy + next / d[0];
                    const uint32_t *o = out + (size_t)L * 144;
                    for (unsigned t = 0; t < 64; t++) {
                        cr_assert_eq(o[2 * t], (px + g[0] * py) * 1000 + t,
                                     "cta %u,%u thread %u: %u (%s)", x, y, t, o[2 * t], scheds[s]);
                        cr_assert_eq(o[2 * t + 1], next);
                    }
                    const uint32_t want[10] = {x / d[0], y / d[1], cx, cy, d[0], d[1], rank, n,
                                               rank ? 0 : 64 * n, rank ? 0 : 128 * n};
                    for (int i = 0; i < 10; i++)
                        cr_assert_eq(o[128 + i], want[i], "cta %u,%u word %d: %u, expected %u (%s)",
                                     x, y, 128 + i, o[128 + i], want[i], scheds[s]);
                }
            free(out);
            run_free(&r);
        }
}

/* A launch names a cluster the grid is not a multiple of, too large a
 * cluster, or one that differs from .reqnctapercluster: one line each. */
Test(emu_async, cluster_launch_checks)
{
    run r = {0};
    emu_opts o = emu_default_opts();
    char *t = read_sm90("cluster_dsmem_sm90.ptx");
    load_text(&r, t, &o);
    pt_err e = {0};
    uint64_t d = emu_alloc(r.c, 18 * 144 * 4, "out");
    const void *args[] = {&d};
    emu_launch l = {{6, 1, 1}, {64, 1, 1}, 0};
    unsigned c4[3] = {4, 1, 1}, c16[3] = {16, 1, 1}, c9[3] = {9, 1, 1};
    cr_assert_eq(emu_run_cluster(r.c, r.k, &l, c4, false, args, NULL, &e), PT_EINVAL);
    cr_assert(strstr(e.msg, "bad cluster 4,1,1 for grid 6,1,1"), "%s", e.msg);
    l.grid[0] = 16;
    pt_err_clear(&e);
    cr_assert_eq(emu_run_cluster(r.c, r.k, &l, c16, false, args, NULL, &e), PT_EINVAL);
    cr_assert(strstr(e.msg, "at most 8 CTAs"), "%s", e.msg);
    l.grid[0] = 18;
    cr_assert_eq(emu_run_cluster(r.c, r.k, &l, c9, true, args, NULL, &e), PT_OK, "%s", e.msg);
    l.grid[0] = 16;
    cr_assert_eq(emu_run_cluster(r.c, r.k, &l, c16, true, args, NULL, &e), PT_OK, "%s", e.msg);
    run_free(&r);
    /* .reqnctapercluster 2: a launch without a cluster gets it, another one is refused */
    char *q = strstr(t, ".visible .entry k(");
    cr_assert(q);
    char *t2 = malloc(strlen(t) + 64);
    char *brace = strstr(q, ")\n{");
    size_t pre = (size_t)(brace - t) + 1;
    memcpy(t2, t, pre);
    strcpy(t2 + pre, " .reqnctapercluster 2, 1, 1");
    strcat(t2, brace + 1);
    load_text(&r, t2, &o);
    d = emu_alloc(r.c, 4 * 144 * 4, "out");
    l.grid[0] = 4;
    cr_assert_eq(emu_run_cluster(r.c, r.k, &l, NULL, false, args, NULL, &e), PT_OK, "%s", e.msg);
    uint32_t w;
    cr_assert_eq(emu_read(r.c, d + 135 * 4, &w, 4, &e), PT_OK);
    cr_assert_eq(w, 2, "cluster_nctarank %u", w);
    pt_err_clear(&e);
    cr_assert_eq(emu_run_cluster(r.c, r.k, &l, c4, false, args, NULL, &e), PT_EINVAL);
    cr_assert(strstr(e.msg, "reqnctapercluster"), "%s", e.msg);
    run_free(&r);
    free(t2);
    free(t);
}

/* The multicast probe (tests/ptx/sm90/cluster_multicast_sm90a.ptx): in
 * clusters of 2 and 4 (two clusters each), every rank multicasts its slice
 * of the tile; every CTA gets the whole tile (each complete_tx hits each
 * destination's own mbarrier), and rank 0's `done` barrier gets one remote
 * arrival per CTA; every schedule. */
Test(emu_async, cluster_multicast_every_schedule)
{
    static const unsigned ns[] = {1, 2, 4};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
            unsigned n = ns[ni], nct = 2 * n;
            run r = {0};
            char *text = read_sm90("cluster_multicast_sm90a.ptx");
            emu_opts o = sched_opts(scheds[s]);
            load_text(&r, text, &o);
            free(text);
            pt_err e = {0};
            float in[IN_W * IN_H];
            for (int y = 0; y < IN_H; y++)
                for (int x = 0; x < IN_W; x++)
                    in[y * IN_W + x] = in_at(x, y);
            uint64_t din = emu_alloc(r.c, sizeof in, "in");
            cr_assert_eq(emu_write(r.c, din, in, sizeof in, &e), PT_OK);
            size_t words = (size_t)nct * 256 + 2;
            uint64_t dout = emu_alloc(r.c, words * 4, "out");
            uint8_t tmap[128];
            emu_tmap_desc a = {.dtype = EMU_TMAP_F32, .rank = 2, .gaddr = din,
                               .dims = {IN_W, IN_H}, .strides = {IN_W * 4},
                               .box = {32, 8 / n}, .estrides = {1, 1}};
            cr_assert_eq(emu_tmap_encode(&a, tmap, &e), PT_OK, "%s", e.msg);
            const void *args[] = {tmap, &dout};
            emu_launch l = {{nct, 1, 1}, {64, 1, 1}, 0};
            unsigned cl[3] = {n, 1, 1};
            int rc = emu_run_cluster(r.c, r.k, &l, cl, false, args, NULL, &e);
            if (rc)
                dump(&r);
            cr_assert_eq(rc, PT_OK, "n %u %s: %s", n, scheds[s], e.msg);
            uint32_t *out = malloc(words * 4);
            cr_assert_eq(emu_read(r.c, dout, out, words * 4, &e), PT_OK);
            for (unsigned c = 0; c < nct; c++)
                for (unsigned i = 0; i < 256; i++) {
                    float f;
                    memcpy(&f, &out[c * 256 + i], 4);
                    cr_assert_eq(f, in_at(16 + (int)(i % 32), 2 + (int)(i / 32)),
                                 "n %u %s cta %u element %u: %g", n, scheds[s], c, i, (double)f);
                }
            for (unsigned k = 0; k < 2; k++)
                cr_assert_eq(out[nct * 256 + k], 1000 + n, "n %u %s cluster %u: %u", n, scheds[s],
                             k, out[nct * 256 + k]);
            free(out);
            run_free(&r);
        }
}

/* ---- cluster detectors (issue 12 item 2): planted bugs of
 * tests/ptx/sm90/emu/cluster_*_bug.ptx fire their kind, naming the
 * instruction, and return (the deadlock within seconds); the fixed twins
 * run clean and right under every schedule ---- */

static void cl_planted(const char *bug, const char *sched, emu_report_kind kind,
                       const char *needle)
{
    char file[128];
    snprintf(file, sizeof file, "@emu/%s", bug);
    run r = {0};
    const unsigned g[3] = {2, 1, 1}, cl[3] = {2, 1, 1};
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    int rc = run_cl(&r, file, sched, g, 64, cl, 128, NULL);
    double dt = (double)clock() / CLOCKS_PER_SEC - t0;
    cr_assert_eq(rc, PT_EEMU, "%s under %s ran clean", bug, sched);
    if (!has_kind(&r, kind, needle))
        dump(&r);
    cr_assert(has_kind(&r, kind, needle), "%s under %s: no %s report with '%s'", bug, sched,
              emu_report_kind_name(kind), needle);
    cr_assert_lt(dt, 5.0, "%s took %.1f s", bug, dt);
    run_free(&r);
}

static void cl_fixed(const char *fixed, uint32_t (*want)(unsigned i))
{
    char file[128];
    snprintf(file, sizeof file, "@emu/%s", fixed);
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        run r = {0};
        uint32_t out[128];
        const unsigned g[3] = {2, 1, 1}, cl[3] = {2, 1, 1};
        int rc = run_cl(&r, file, scheds[s], g, 64, cl, 128, out);
        if (rc)
            dump(&r);
        cr_assert_eq(rc, PT_OK, "%s under %s", fixed, scheds[s]);
        for (unsigned i = 0; want && i < 128; i++)
            cr_assert_eq(out[i], want(i), "%s %s word %u: %u, expected %u", fixed, scheds[s], i,
                         out[i], want(i));
        run_free(&r);
    }
}

static uint32_t exch_want(unsigned i) { return (i / 64 ^ 1) * 1000 + i % 64; }
static uint32_t race_want(unsigned i) { return i < 64 ? i * 3 : 0xffffffffu; }

Test(emu_async, cluster_exit_before_peers_read)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++)
        cl_planted("cluster_exit_bug.ptx", scheds[s], EMU_R_DSMEM_EXITED, "(ld)");
    cl_fixed("cluster_exit_fixed.ptx", exch_want);
}

Test(emu_async, cluster_dsmem_race)
{
    cl_planted("cluster_race_bug.ptx", "lazy", EMU_R_RACE, "of CTA rank 0");
    cl_planted("cluster_race_bug.ptx", "eager", EMU_R_RACE, "of CTA rank 0");
    cl_fixed("cluster_race_fixed.ptx", race_want);
}

Test(emu_async, cluster_dsmem_outside_the_peer_window)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++)
        cl_planted("cluster_window_bug.ptx", scheds[s], EMU_R_OOB,
                   "outside the shared memory window of CTA rank");
    cl_fixed("cluster_window_fixed.ptx", exch_want);
}

Test(emu_async, cluster_barrier_deadlock)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++)
        cl_planted("cluster_deadlock_bug.ptx", scheds[s], EMU_R_DEADLOCK,
                   "CTA rank 0 (cta 0,0,0) never arrives");
    cl_fixed("cluster_deadlock_fixed.ptx", NULL);
}

/* barrier.cluster.arrive.relaxed orders nothing: the race fixture's fixed
 * twin with a relaxed arrive is a race again (the emulator's .release /
 * .acquire model of the split barrier, the default forms). */
Test(emu_async, cluster_barrier_relaxed_orders_nothing)
{
    char *t = read_sm90("emu/cluster_race_fixed.ptx");
    const char *rel = "barrier.cluster.arrive.release.aligned;";
    char *at = strstr(t, rel);
    cr_assert(at);
    size_t pre = (size_t)(at - t);
    char *t2 = malloc(strlen(t) + 16);
    memcpy(t2, t, pre);
    strcpy(t2 + pre, "barrier.cluster.arrive.relaxed.aligned;");
    strcat(t2, at + strlen(rel));
    run r = {0};
    const unsigned g[3] = {2, 1, 1}, cl[3] = {2, 1, 1};
    int rc = run_cl(&r, t2, "lazy", g, 64, cl, 128, NULL);
    cr_assert_eq(rc, PT_EEMU);
    cr_assert(has_kind(&r, EMU_R_RACE, "of CTA rank 0"));
    run_free(&r);
    /* the default forms (no qualifier) are .release / .acquire */
    memcpy(t2, t, pre);
    strcpy(t2 + pre, "barrier.cluster.arrive;");
    strcat(t2, at + strlen(rel));
    rc = run_cl(&r, t2, "lazy", g, 64, cl, 128, NULL);
    if (rc)
        dump(&r);
    cr_assert_eq(rc, PT_OK);
    run_free(&r);
    free(t2);
    free(t);
}

/* A multicast before the cluster barrier that publishes the peers'
 * mbarrier.init: reported (mbarrier, naming the TMA) under every schedule;
 * the fixed twin is the multicast probe (cluster_multicast_every_schedule). */
Test(emu_async, cluster_multicast_before_peer_init)
{
    for (size_t s = 0; s < sizeof scheds / sizeof scheds[0]; s++) {
        run r = {0};
        char *text = read_file("cluster_multicast_noinit_bug.ptx");
        emu_opts o = sched_opts(scheds[s]);
        load_text(&r, text, &o);
        free(text);
        pt_err e = {0};
        float in[IN_W * IN_H] = {0};
        uint64_t din = emu_alloc(r.c, sizeof in, "in");
        cr_assert_eq(emu_write(r.c, din, in, sizeof in, &e), PT_OK);
        uint64_t dout = emu_alloc(r.c, (4 * 256 + 2) * 4, "out");
        uint8_t tmap[128];
        emu_tmap_desc a = {.dtype = EMU_TMAP_F32, .rank = 2, .gaddr = din, .dims = {IN_W, IN_H},
                           .strides = {IN_W * 4}, .box = {32, 4}, .estrides = {1, 1}};
        cr_assert_eq(emu_tmap_encode(&a, tmap, &e), PT_OK, "%s", e.msg);
        const void *args[] = {tmap, &dout};
        emu_launch l = {{4, 1, 1}, {64, 1, 1}, 0};
        unsigned cl[3] = {2, 1, 1};
        int rc = emu_run_cluster(r.c, r.k, &l, cl, false, args, NULL, &e);
        cr_assert_eq(rc, PT_EEMU, "%s", scheds[s]);
        if (!has_kind(&r, EMU_R_MBARRIER, "in a peer CTA"))
            dump(&r);
        cr_assert(has_kind(&r, EMU_R_MBARRIER, "(cp.async.bulk.tensor)"), "%s", scheds[s]);
        cr_assert(has_kind(&r, EMU_R_MBARRIER, "in a peer CTA"), "%s", scheds[s]);
        run_free(&r);
    }
}
