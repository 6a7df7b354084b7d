/* ptxtune exec: a hand-written kernel runs from .npy inputs to .npy
 * outputs; a planted out-of-bounds access exits 1 with a report; bad
 * arguments exit 2 with one line. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptx/emu/tmap.h"
#include "tuner/exec.h"

static char dir[64];

static const char kernel[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n\n"
    ".visible .entry axpy(\n\t.param .u64 x,\n\t.param .u64 y,\n\t.param .f32 a,\n\t.param .u32 n\n)\n{\n"
    "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<4>;\n\t.reg .f32 %f<3>;\n\t.reg .pred %p<1>;\n\n"
    "\tld.param.u64 %rd0, [x];\n\tld.param.u64 %rd1, [y];\n\tld.param.f32 %f0, [a];\n"
    "\tld.param.u32 %r0, [n];\n\tmov.u32 %r1, %tid.x;\n\tsetp.ge.u32 %p0, %r1, %r0;\n"
    "\t@%p0 bra DONE;\n\tmul.wide.u32 %rd2, %r1, 4;\n\tadd.s64 %rd3, %rd0, %rd2;\n"
    "\tld.global.f32 %f1, [%rd3];\n\tmul.rn.f32 %f2, %f1, %f0;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tst.global.f32 [%rd3], %f2;\nDONE:\n\tret;\n}\n";

static void write_file(const char *name, const void *data, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite(data, 1, n, f);
    fclose(f);
}

/* A minimal version 1.0 .npy of n values of descr ('<f4', '<f2'). */
static void write_npy(const char *name, const char *descr, const void *v, int n, int size)
{
    char hdr[128];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }",
                       descr, n);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    static unsigned char buf[1 << 16];
    size_t off = (size_t)(10 + len + pad + 1);
    cr_assert_lt(off + (size_t)n * (size_t)size, sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(len + pad + 1);
    memcpy(buf + 8, &hl, 2);
    memcpy(buf + 10, hdr, (size_t)len);
    memset(buf + 10 + len, ' ', (size_t)pad);
    buf[10 + len + pad] = '\n';
    memcpy(buf + off, v, (size_t)n * (size_t)size);
    write_file(name, buf, off + (size_t)n * (size_t)size);
}

static void write_npy_f32(const char *name, const float *v, int n) { write_npy(name, "<f4", v, n, 4); }

/* Runs `pre ptxtune exec args` in dir; stderr into err. */
static int run_pre(const char *pre, const char *args, char *err, size_t n)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s exec %s 2>err.txt >/dev/null </dev/null", dir, pre,
             getenv("PTXTUNE_BIN"), args);
    int st = system(cmd);
    char path[128];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(err, 1, n - 1, f) : 0;
    err[len] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run(const char *args, char *err, size_t n) { return run_pre("", args, err, n); }

static void setup(void)
{
    cr_assert(getenv("PTXTUNE_BIN"), "PTXTUNE_BIN not set (meson sets it)");
    strcpy(dir, "/tmp/ptxtune_exec_XXXXXX");
    cr_assert(mkdtemp(dir));
    write_file("k.ptx", kernel, strlen(kernel));
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)i * 0.25f - 3.0f;
    write_npy_f32("x.npy", x, 64);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)!system(cmd);
}

TestSuite(exec, .init = setup, .fini = teardown);

Test(exec, runs_from_npy_to_npy)
{
    char err[4096];
    int rc = run("k.ptx --grid 1 --block 64 --arg x.npy --arg out:y.npy:f32:64 --arg f32:2.5 "
                 "--arg u32:64", err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(err, "0 reports"), "%s", err);
    char path[128];
    snprintf(path, sizeof path, "%s/y.npy", dir);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "no y.npy");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_gt(n, 256 + 10);
    uint16_t hl;
    memcpy(&hl, buf + 8, 2);
    cr_assert_eq(n, 10u + hl + 256u);
    cr_expect(memmem(buf, 10u + hl, "'<f4'", 5), "descr");
    for (int i = 0; i < 64; i++) {
        float y;
        memcpy(&y, buf + 10 + hl + 4 * i, 4);
        cr_expect_eq(y, ((float)i * 0.25f - 3.0f) * 2.5f, "y[%d] = %g", i, (double)y);
    }
}

Test(exec, out_of_bounds_is_reported)
{
    char err[8192];
    /* n = 65 with 64 elements: thread 64 reads past x and writes past y */
    int rc = run("k.ptx --grid 1 --block 96 --arg x.npy --arg out:y.npy:f32:64 --arg f32:2.5 "
                 "--arg u32:65", err, sizeof err);
    cr_expect_eq(rc, 1, "%s", err);
    cr_expect(strstr(err, "axpy"), "names the kernel: %s", err);
    cr_expect(strstr(err, "x.npy"), "names the allocation: %s", err);
    /* a clean run with one detector switched off stays clean */
    rc = run("k.ptx --grid 1 --block 64 --arg x.npy --arg out:y.npy:f32:64 --arg f32:1 "
             "--arg u32:64 --no-detect uninit", err, sizeof err);
    cr_expect_eq(rc, 0, "%s", err);
}

Test(exec, bad_arguments_exit_2)
{
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"k.ptx --grid 1 --block 64 --arg x.npy", "has 4 parameters but 1 --arg given"},
        {"k.ptx --grid 1 --block 64 --arg x.npy --arg out:y.npy:f12:64 --arg f32:1 --arg u32:1", "unknown dtype 'f12'"},
        {"k.ptx --grid 1 --block 64 --arg x.npy --arg out:y.npy:f32:64 --arg f64:1 --arg u32:1", "is 8 bytes but parameter 3 'a' is .f32"},
        {"k.ptx --grid 1 --block 64 --arg x.npy --arg out:y.npy:f32:64 --arg f32:1 --arg u32:-1", "bad value '-1'"},
        {"k.ptx --grid 0 --block 64", "bad --grid '0'"},
        {"k.ptx --grid 1 --block 2048", "more than 1024 threads"},
        {"k.ptx --grid 1 --block 64 --arg f32:1 --arg out:y.npy:f32:64 --arg f32:1 --arg u32:1", "parameter 1 'x'"},
        {"missing.ptx --grid 1 --block 1", "cannot open 'missing.ptx'"},
        {"k.ptx --grid 1 --block 64 --entry nope --arg u32:1", "no entry 'nope'"},
        {"k.ptx --grid 1 --block 64 --no-detect frob", "unknown detector 'frob'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[4096];
        int rc = run(bad[i].args, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' exited %d: %s", bad[i].args, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': '%s' lacks '%s'", bad[i].args, err, bad[i].msg);
        int lines = 0;
        for (const char *p = err; *p; p++)
            lines += *p == '\n';
        cr_expect_eq(lines, 1, "'%s': one line: %s", bad[i].args, err);
    }
}

/* --backend cuda: without a driver the plain message and exit 4; with the
 * test suite's fake libcuda.so.1 (the driver API over the emulator) the
 * same kernel gives the same output. */
Test(exec, cuda_backend)
{
    char err[4096];
    int rc = run("k.ptx --grid 1 --block 64 --arg x.npy --arg out:y.npy:f32:64 --arg f32:2.5 "
                 "--arg u32:64 --backend cuda", err, sizeof err);
    if (rc == 4) {
        cr_expect(strstr(err, "no CUDA driver found (libcuda.so.1)"), "%s", err);
    } else {
        cr_expect_eq(rc, 0, "a real driver: %s", err);
    }
    const char *fake = getenv("PTXTUNE_FAKE_CUDA");
    if (!fake)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    char libdir[512];
    snprintf(libdir, sizeof libdir, "%s", fake);
    *strrchr(libdir, '/') = '\0';
    char args[1024];
    snprintf(args, sizeof args, "k.ptx --grid 1 --block 64 --arg x.npy --arg out:z.npy:f32:64 "
             "--arg f32:2.5 --arg u32:64 --backend cuda");
    setenv("LD_LIBRARY_PATH", libdir, 1);
    rc = run(args, err, sizeof err);
    unsetenv("LD_LIBRARY_PATH");
    cr_assert_eq(rc, 0, "%s", err);
    char path[128];
    snprintf(path, sizeof path, "%s/z.npy", dir);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "no z.npy");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint16_t hl;
    memcpy(&hl, buf + 8, 2);
    cr_assert_eq(n, 10u + hl + 256u);
    for (int i = 0; i < 64; i++) {
        float y;
        memcpy(&y, buf + 10 + hl + 4 * i, 4);
        cr_expect_eq(y, ((float)i * 0.25f - 3.0f) * 2.5f, "y[%d] = %g", i, (double)y);
    }
}

/* Issue 9 item 8: the GEMM main loop that assumed a zero shared base (its
 * cp.async and ldmatrix addresses omit gemm_smem's address). With the
 * hardware's sm_80 layout and no shift it runs clean, which is why the bug
 * was invisible; exec's default shift, and the sm_90 layout (first array at
 * 0x400), both report it. */
Test(exec, zero_shared_base_is_out_of_bounds)
{
    const char *tests = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tests, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    uint16_t h[4096];
    for (int i = 0; i < 4096; i++)
        h[i] = (uint16_t)(0x3000 + (i * 37 % 512)); /* f16 values in [0.125, 0.25) */
    write_npy("a.npy", "<f2", h, 4096, 2);
    write_npy("b.npy", "<f2", h, 4096, 2);
    char args[1024], err[16384];
    const char *base = "--grid 1 --block 128 --smem 24576 --arg out:d.npy:f16:4096 --arg a.npy "
                       "--arg b.npy --arg f32:1";
    snprintf(args, sizeof args, "%s/ptx/gemm_old_zero_base.ptx %s --smem-shift 0", tests, base);
    int rc = run(args, err, sizeof err);
    cr_expect_eq(rc, 0, "sm_80 layout, no shift: the old loop looks clean: %s", err);
    const char *shifted[] = {"", "--smem-shift 0 --arch sm_90", "--arch sm_90", "--smem-shift 4096"};
    for (size_t i = 0; i < sizeof shifted / sizeof shifted[0]; i++) {
        snprintf(args, sizeof args, "%s/ptx/gemm_old_zero_base.ptx %s %s", tests, base, shifted[i]);
        rc = run(args, err, sizeof err);
        cr_expect_eq(rc, 1, "'%s': %s", shifted[i], err);
        cr_expect(strstr(err, "out-of-bounds") && strstr(err, "not inside one shared variable"),
                  "'%s': %s", shifted[i], err);
    }
    /* bad values of the new options */
    static const struct {
        const char *opt, *msg;
    } bad[] = {
        {"--smem-shift 8", "bad --smem-shift '8'"},
        {"--smem-shift -16", "bad --smem-shift '-16'"},
        {"--smem-shift x", "bad --smem-shift 'x'"},
        {"--arch sm_70", "unknown arch 'sm_70'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s/ptx/gemm_old_zero_base.ptx %s %s", tests, base, bad[i].opt);
        rc = run(args, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s': %s", bad[i].opt, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': %s", bad[i].opt, err);
    }
}

/* Issue 9 item 17: bounded work. An empty kernel on a 16M x 1024 grid ran
 * 278 s under the instruction-only guard; with each CTA's launch counted it
 * ends at once (step-cap, exit 1). A kernel that spins ends at --timeout with
 * one line and exit 5. */
static const char spin_kernel[] = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
                                  ".visible .entry spin()\n{\nL:\n\tbra L;\n\tret;\n}\n";
static const char empty_kernel[] = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
                                   ".visible .entry empty()\n{\n\tret;\n}\n";

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(exec, huge_empty_grid_hits_the_guard)
{
    write_file("empty.ptx", empty_kernel, strlen(empty_kernel));
    char err[4096];
    double t0 = wall();
    /* timeout(1) bounds the test itself should the guard not work */
    int rc = run_pre("timeout 60", "empty.ptx --grid 16777216 --block 1024", err, sizeof err);
    double dt = wall() - t0;
    cr_expect_eq(rc, 1, "%s", err);
    cr_expect(strstr(err, "step-cap: kernel empty: a grid of 16777216 CTAs"), "%s", err);
    cr_expect_lt(dt, 10.0, "took %.1f s", dt);
}

Test(exec, timeout)
{
    write_file("spin.ptx", spin_kernel, strlen(spin_kernel));
    char err[4096];
    double t0 = wall();
    int rc = run("spin.ptx --grid 64 --block 256 --timeout 0.2 --threads 2", err, sizeof err);
    double dt = wall() - t0;
    cr_expect_eq(rc, 5, "%s", err);
    cr_expect(strstr(err, "timeout: kernel spin") == err, "%s", err);
    cr_expect(strstr(err, "wall-clock limit of 0.2 s"), "%s", err);
    cr_expect_eq(count_lines(err), 1, "one line: %s", err);
    cr_expect_lt(dt, 10.0, "took %.1f s", dt);
    /* a timed-out run saves no output */
    rc = run("k.ptx --grid 1 --block 64 --arg x.npy --arg out:t.npy:f32:64 --arg f32:1 --arg u32:64 "
             "--timeout 0", err, sizeof err);
    cr_expect_eq(rc, 0, "--timeout 0 is no limit: %s", err);
    static const char *const bad[] = {"abc", "-1", "nan", "1e9", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[256], want[64];
        snprintf(args, sizeof args, "spin.ptx --grid 1 --block 1 --timeout '%s'", bad[i]);
        snprintf(want, sizeof want, "bad --timeout '%s'", bad[i]);
        rc = run(args, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s': %s", bad[i], err);
        cr_expect(strstr(err, want), "'%s': %s", bad[i], err);
        cr_expect_eq(count_lines(err), 1, "'%s': %s", bad[i], err);
    }
}

/* Issue 9 item 18: --threads is checked (exit 2 naming the value), and a
 * launch the emulator refuses (block over .maxntid, too much shared
 * memory) is bad input: one line, exit 2, no summary after it. */
static const char maxntid_kernel[] = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
                                     ".visible .entry small()\n.maxntid 32, 1, 1\n{\n\tret;\n}\n";

Test(exec, threads_and_launch_errors)
{
    write_file("small.ptx", maxntid_kernel, strlen(maxntid_kernel));
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"small.ptx --grid 1 --block 32 --threads abc", "bad --threads 'abc'"},
        {"small.ptx --grid 1 --block 32 --threads 0", "bad --threads '0'"},
        {"small.ptx --grid 1 --block 32 --threads -3", "bad --threads '-3'"},
        {"small.ptx --grid 1 --block 32 --threads 100000", "bad --threads '100000'"},
        {"small.ptx --grid 1 --block 32 --threads 2x", "bad --threads '2x'"},
        {"small.ptx --grid 1 --block 64", "exceeds .maxntid"},
        {"small.ptx --grid 1 --block 32 --smem 1000000", "bad --smem '1000000': more than the 166912 bytes a CTA may use on sm_80"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[4096];
        int rc = run(bad[i].args, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' exited %d: %s", bad[i].args, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': '%s' lacks '%s'", bad[i].args, err, bad[i].msg);
        cr_expect_eq(count_lines(err), 1, "'%s': one line: %s", bad[i].args, err);
    }
    char err[4096];
    int rc = run("small.ptx --grid 4 --block 32 --threads 2", err, sizeof err);
    cr_expect_eq(rc, 0, "%s", err);
}

/* Issue 9 item 11: the summary line carries the shared-memory bank
 * conflicts of the run (the unswizzled fixture: 28 extra wavefronts of 32
 * for its ldmatrix and its cp.async; the swizzled twin none). */
Test(exec, bank_conflicts_in_the_summary)
{
    const char *tests = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tests, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    uint16_t h[2048];
    for (int i = 0; i < 2048; i++)
        h[i] = (uint16_t)(0x3c00 + i % 64);
    write_npy("t.npy", "<f2", h, 2048, 2);
    char args[1024], err[4096];
    snprintf(args, sizeof args, "%s/ptx/bank_ldmatrix.ptx --entry unswizzled --grid 1 --block 32 "
             "--arg out:o.npy:u32:128 --arg t.npy", tests);
    cr_assert_eq(run(args, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(err, "ldmatrix 28 of 32 (most at line 34), cp.async 28 of 32 (most at line 31)"),
              "%s", err);
    snprintf(args, sizeof args, "%s/ptx/bank_ldmatrix.ptx --entry swizzled --grid 1 --block 32 "
             "--arg out:o.npy:u32:128 --arg t.npy", tests);
    cr_assert_eq(run(args, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(err, "ldmatrix 0 of 4, cp.async 0 of 4"), "%s", err);
}

/* ---- issue 12 item 5: Hopper launches (tensor maps, clusters, --smem up to
 * the arch's limit, --arch sm_90a, --schedule) ---- */

/* A .npy of nbytes raw bytes with the given shape text ("20, 72"). */
static void write_npy_shape(const char *name, const char *descr, const char *shape,
                            const void *v, size_t nbytes)
{
    char hdr[160];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       descr, shape);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    static unsigned char buf[1 << 17];
    size_t off = (size_t)(10 + len + pad + 1);
    cr_assert_lt(off + nbytes, sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(len + pad + 1);
    memcpy(buf + 8, &hl, 2);
    memcpy(buf + 10, hdr, (size_t)len);
    memset(buf + 10 + len, ' ', (size_t)pad);
    buf[10 + len + pad] = '\n';
    memcpy(buf + off, v, nbytes);
    write_file(name, buf, off + nbytes);
}

/* The payload of a .npy the run wrote (n bytes expected). */
static void read_npy_payload(const char *name, void *out, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "no %s", name);
    static unsigned char buf[1 << 18];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint16_t hl;
    memcpy(&hl, buf + 8, 2);
    cr_assert_eq(got, 10u + hl + n, "%s: %zu bytes", name, got);
    memcpy(out, buf + 10 + hl, n);
}

static void tma_setup(void)
{
    setup();
    const char *tests = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tests, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp %s/ptx/sm90/tma_load_sm90.ptx %s/tma.ptx", tests, dir);
    cr_assert_eq(system(cmd), 0);
    static uint16_t a[20 * 72];
    for (int i = 0; i < 20 * 72; i++)
        a[i] = (uint16_t)(i + 1); /* never 0: a zero in the output is a fill */
    write_npy_shape("a.npy", "<u2", "20, 72", a, sizeof a);
}

TestSuite(exec_hopper, .init = tma_setup, .fini = teardown);

static int run_fake(const char *args, char *err, size_t n)
{
    const char *fake = getenv("PTXTUNE_FAKE_CUDA");
    if (!fake)
        return -2;
    char libdir[512];
    snprintf(libdir, sizeof libdir, "%s", fake);
    *strrchr(libdir, '/') = '\0';
    setenv("LD_LIBRARY_PATH", libdir, 1);
    int rc = run(args, err, n);
    unsetenv("LD_LIBRARY_PATH");
    return rc;
}

Test(exec_hopper, bad_specs_exit_2)
{
    static const struct {
        const char *map, *extra, *msg;
    } bad[] = {
        {"tmap:a.npy:bf16:20x72", "", "bad --arg 'tmap:a.npy:bf16:20x72' (tmap:SOURCE:DTYPE:SHAPE:BOX"},
        {"tmap:a.npy:bf16:20x72:8x64:128:zero:x", "", "(tmap:SOURCE:DTYPE:SHAPE:BOX[:SWIZZLE[:OOB]])"},
        {"tmap:a.npy:bf17:20x72:8x64", "", "unknown dtype 'bf17'"},
        {"tmap:a.npy:bf16:20x0x72:8x8x64", "", "bad tmap shape '20x0x72'"},
        {"tmap:a.npy:bf16:1x1x1x1x20x72:1x1x1x1x8x64", "", "bad tmap shape '1x1x1x1x20x72'"},
        {"tmap:a.npy:bf16:20,72:8x64", "", "bad tmap shape '20,72'"},
        {"tmap:a.npy:bf16:20x72:8x300", "", "bad tmap box '8x300'"},
        {"tmap:a.npy:bf16:20x72:64", "", "tmap box '64' has 1 sizes but shape '20x72' has 2"},
        {"tmap:a.npy:bf16:20x72:8x64:96", "", "bad tmap swizzle '96'"},
        {"tmap:a.npy:bf16:20x72:8x64:128:inf", "", "bad tmap OOB fill 'inf'"},
        {"tmap:a.npy:bf16:20x72:8x72:128", "", "boxDim[0]*elementSize = 144 bytes exceeds the 128B swizzle span"},
        {"tmap:a.npy:bf16:20x72:8x4", "", "boxDim[0]*elementSize = 8 bytes (4 x 2) is not a multiple of 16"},
        {"tmap:@1:bf16:20x71:8x8", "", "globalStrides[0] = 142 bytes is not a multiple of 16"},
        {"tmap:@1:u8:16x64:8x64:none:nan", "", "oobFill NAN_REQUEST_ZERO_FMA needs a float tensorDataType, not u8"},
        {"tmap:@7:bf16:20x72:8x64", "", "bad tmap source '@7'"},
        {"tmap:@0:bf16:20x72:8x64", "", "bad tmap source '@0'"},
        {"tmap:a.bin:bf16:20x72:8x64", "", "bad tmap source 'a.bin' in --arg 'tmap:a.bin:bf16:20x72:8x64' (a .npy file or @N)"},
        {"tmap:@2:bf16:20x72:8x64", "", "argument 2 is not a buffer"},
        {"tmap:@1:bf16:64x64:8x64", "", "the map covers 8192 bytes but argument 1 has 4096"},
        {"tmap:a.npy:bf16:20x64:8x64", "", "tmap shape '20x64' has 1280 elements but a.npy has 1440"},
        {"tmap:nope.npy:bf16:20x72:8x64", "", "nope.npy"},
        {"tmap:@1:u8:4294967296x4294967296x64:1x1x64", "", "tmap shape '4294967296x4294967296x64' in --arg"},
        {"tmap:a.npy:bf16:20x72:8x64", "--cluster 0", "bad --cluster '0'"},
        {"tmap:a.npy:bf16:20x72:8x64", "--grid 4 --cluster 3", "grid 4,1,1 is not a multiple of --cluster '3'"},
        {"tmap:a.npy:bf16:20x72:8x64", "--grid 16 --cluster 16", "bad --cluster '16' (at most 8 CTAs"},
        {"tmap:a.npy:bf16:20x72:8x64", "--schedule bogus", "bad schedule 'bogus'"},
        {"tmap:a.npy:bf16:20x72:8x64", "--schedule random:x", "bad schedule 'random:x'"},
        {"tmap:a.npy:bf16:20x72:8x64", "--schedule lazy --backend cuda", "--schedule 'lazy' is an emulator option: not with --backend cuda"},
        {"tmap:a.npy:bf16:20x72:8x64", "--smem 232449", "bad --smem '232449': more than the 232448 bytes a CTA may use on sm_90"},
        {"tmap:a.npy:bf16:20x72:8x64", "--smem 200000 --arch sm_86", "bad --smem '200000': more than the 101376 bytes a CTA may use on sm_86"},
        {"tmap:a.npy:bf16:20x72:8x64", "--smem 12k", "bad --smem '12k'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[1024], err[4096];
        snprintf(args, sizeof args, "tma.ptx --grid 1 --block 128 --smem 4096 --arg '%s' "
                 "--arg out:o.npy:u8:4096 --arg s32:0 --arg s32:0 --arg u32:1024 %s",
                 bad[i].map, bad[i].extra);
        int rc = run(args, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s %s' exited %d: %s", bad[i].map, bad[i].extra, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s %s': '%s' lacks '%s'", bad[i].map, bad[i].extra,
                  err, bad[i].msg);
        cr_expect_eq(count_lines(err), 1, "'%s %s': one line: %s", bad[i].map, bad[i].extra, err);
    }
    /* a tensor map for a parameter that is not one, and a non-map for a map */
    char err[4096];
    int rc = run("tma.ptx --grid 1 --block 128 --arg tmap:a.npy:bf16:20x72:8x64 "
                 "--arg tmap:a.npy:bf16:20x72:8x64 --arg s32:0 --arg s32:0 --arg u32:1024",
                 err, sizeof err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "parameter 2 'out' is not a tensor map (.param .align 64 .b8 out[128])"),
              "%s", err);
    rc = run("tma.ptx --grid 1 --block 128 --arg u64:0 --arg out:o.npy:u8:4096 --arg s32:0 "
             "--arg s32:0 --arg u32:1024", err, sizeof err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "parameter 1 'tmap' is a 128-byte array: scalars cannot fill it"), "%s", err);
}

/* A kernel that copies its tensor-map parameter's 128 bytes to out, so the
 * map each backend encodes can be read back and decoded. */
static void write_mapbytes_kernel(void)
{
    char k[4096];
    int n = snprintf(k, sizeof k, ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                     ".visible .entry mapbytes(\n\t.param .align 64 .b8 tm[128],\n\t.param .u64 out\n)\n"
                     "{\n\t.reg .b64 %%rd<4>;\n\tld.param.u64 %%rd0, [out];\n");
    for (int i = 0; i < 16; i++)
        n += snprintf(k + n, sizeof k - (size_t)n,
                      "\tld.param.u64 %%rd1, [tm+%d];\n\tst.global.u64 [%%rd0+%d], %%rd1;\n", 8 * i, 8 * i);
    snprintf(k + n, sizeof k - (size_t)n, "\tret;\n}\n");
    write_file("mapbytes.ptx", k, strlen(k));
}

/* The emu backend encodes with ptx/emu/tmap.c; --backend cuda with the
 * driver's cuTensorMapEncodeTiled, which the fake libcuda implements with the
 * same encoder: both give a map that decodes to the spec (dims innermost
 * first, packed strides), over a 16-byte aligned device address. */
Test(exec_hopper, tensor_maps_reach_the_kernel_on_both_backends)
{
    write_mapbytes_kernel();
    const char *specs[] = {"tmap:a.npy:bf16:20x72:8x64:128:nan", "tmap:@1:u8:4x16x64:2x8x64:64"};
    for (int s = 0; s < 2; s++)
        for (int b = 0; b < 2; b++) {
            char args[512], err[4096];
            snprintf(args, sizeof args, "mapbytes.ptx --grid 1 --block 1 --arg %s "
                     "--arg out:m.npy:u8:4096 %s", specs[s], b ? "--backend cuda" : "");
            int rc = b ? run_fake(args, err, sizeof err) : run(args, err, sizeof err);
            if (rc == -2)
                continue; /* no fake driver (built without CUDA headers) */
            cr_assert_eq(rc, 0, "'%s': %s", args, err);
            uint8_t m[4096];
            read_npy_payload("m.npy", m, sizeof m);
            emu_tmap_desc d;
            pt_err e = {0};
            cr_assert_eq(emu_tmap_decode(m, &d, &e), PT_OK, "'%s': %s", args, e.msg);
            cr_expect_eq(d.gaddr % 16, 0u);
            if (s == 0) {
                cr_expect_eq(d.dtype, EMU_TMAP_BF16);
                cr_expect_eq(d.rank, 2);
                cr_expect(d.dims[0] == 72 && d.dims[1] == 20 && d.strides[0] == 144, "'%s'", args);
                cr_expect(d.box[0] == 64 && d.box[1] == 8, "'%s'", args);
                cr_expect_eq(d.swizzle, EMU_TMAP_SWIZZLE_128B);
                cr_expect_eq(d.oobfill, EMU_TMAP_OOB_NAN);
            } else {
                cr_expect_eq(d.dtype, EMU_TMAP_U8);
                cr_expect_eq(d.rank, 3);
                cr_expect(d.dims[0] == 64 && d.dims[1] == 16 && d.dims[2] == 4, "'%s'", args);
                cr_expect(d.strides[0] == 64 && d.strides[1] == 1024, "'%s'", args);
                cr_expect(d.box[0] == 64 && d.box[1] == 8 && d.box[2] == 2, "'%s'", args);
                cr_expect_eq(d.swizzle, EMU_TMAP_SWIZZLE_64B);
                cr_expect_eq(d.oobfill, EMU_TMAP_OOB_ZERO);
            }
        }
}

/* Clusters (issue 12 item 1): exec runs the DSMEM probe
 * (tests/ptx/sm90/cluster_dsmem_sm90.ptx) as a real cluster launch on the
 * emulator, under every schedule, and through the fake driver
 * (cuLaunchKernelEx with the cluster attribute); each thread sees its next
 * rank's value. 16 CTAs need --cluster-nonportable. */
static void check_dsmem(const char *npy, unsigned nct, unsigned n)
{
    static uint32_t o[16 * 144];
    read_npy_payload(npy, o, (size_t)nct * 144 * 4);
    for (unsigned c = 0; c < nct; c++)
        for (unsigned t = 0; t < 64; t++) {
            unsigned rank = c % n, next = (rank + 1) % n;
            cr_assert_eq(o[c * 144 + 2 * t], (c - rank + next) * 1000 + t, "%s cta %u thread %u: %u",
                         npy, c, t, o[c * 144 + 2 * t]);
        }
}

Test(exec_hopper, cluster_launches)
{
    const char *tests = getenv("PTXTUNE_TESTS_DIR");
    char cmd[512], err[4096];
    snprintf(cmd, sizeof cmd, "cp %s/ptx/sm90/cluster_dsmem_sm90.ptx %s/cl.ptx", tests, dir);
    cr_assert_eq(system(cmd), 0);
    static const char *const sch[] = {"lazy", "eager", "random:7"};
    for (int i = 0; i < 3; i++) {
        char a[256];
        snprintf(a, sizeof a, "cl.ptx --grid 4 --block 64 --cluster 2 --schedule %s "
                              "--arg out:o.npy:u32:576", sch[i]);
        int rc = run(a, err, sizeof err);
        cr_assert_eq(rc, 0, "%s: %s", sch[i], err);
        check_dsmem("o.npy", 4, 2);
    }
    int rc = run("cl.ptx --grid 16 --block 64 --cluster 16 --arg out:o.npy:u32:2304", err, sizeof err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "bad --cluster '16' (at most 8 CTAs"), "%s", err);
    cr_expect_eq(count_lines(err), 1, "%s", err);
    rc = run("cl.ptx --grid 16 --block 64 --cluster 16 --cluster-nonportable "
             "--arg out:o.npy:u32:2304", err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    check_dsmem("o.npy", 16, 16);
    rc = run("cl.ptx --grid 4 --block 64 --cluster-nonportable --arg out:o.npy:u32:576", err,
             sizeof err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "--cluster-nonportable needs --cluster"), "%s", err);
    rc = run_fake("cl.ptx --grid 4 --block 64 --cluster 2 --arg out:f.npy:u32:576 --backend cuda",
                  err, sizeof err);
    if (rc == -2)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    cr_assert_eq(rc, 0, "%s", err);
    check_dsmem("f.npy", 4, 2);
}

/* sm90 ref 2.3 as its table states it: the 16-byte chunk index within the
 * span XORed with the 128-byte line modulo the span's chunks. */
static uint32_t sw_ref(int span, uint32_t x)
{
    uint32_t chunks = (uint32_t)span / 16, line = x / 128, chunk = (x / 16) % 8;
    if (chunks < 2)
        return x;
    return (x & ~0x7fu) | ((chunk / chunks * chunks + ((chunk % chunks) ^ (line % chunks))) << 4) |
           (x & 15u);
}

/* The TMA-load probe (tests/ptx/sm90/tma_load_sm90.ptx, also run on the H200
 * by scripts/gpu/hopper.sh) through exec: a bf16 box with each swizzle and
 * both fills, OOB on the left and below, under every schedule, on the
 * emulator and through the fake driver: the same bytes, those of sm90 ref
 * 4.4's model (the NaN pattern is the emulator's canonical 0x7fff
 * [unverified]; the GPU run decides). */
Test(exec_hopper, tma_load_probe_runs_under_every_schedule)
{
    static const int spans[] = {0, 32, 64, 128};
    static const char *const sched[] = {"", "--schedule eager", "--schedule random:1",
                                        "--schedule random:99", "--backend cuda"};
    for (int s = 0; s < 4; s++)
        for (int oob = 0; oob < 2; oob++) {
            int inner = spans[s] ? spans[s] / 2 : 32; /* elements per box row */
            uint32_t nbytes = (uint32_t)inner * 2 * 8;
            const int c0 = -8, c1 = 15;
            static uint16_t want[512];
            for (int r = 0; r < 8; r++)
                for (int c = 0; c < inner; c++) {
                    int gr = c1 + r, gc = c0 + c;
                    uint16_t v = gr < 20 && gc >= 0 ? (uint16_t)(gr * 72 + gc + 1)
                                                    : (uint16_t)(oob ? 0x7fff : 0);
                    want[sw_ref(spans[s], (uint32_t)(r * inner + c) * 2) / 2] = v;
                }
            for (size_t k = 0; k < sizeof sched / sizeof sched[0]; k++) {
                char args[1024], err[8192];
                snprintf(args, sizeof args, "tma.ptx --grid 1 --block 128 --smem 4096 --arch sm_90a "
                         "--arg tmap:a.npy:bf16:20x72:8x%d:%s:%s --arg out:o.npy:u8:%u "
                         "--arg s32:%d --arg s32:%d --arg u32:%u %s",
                         inner, spans[s] ? (spans[s] == 32 ? "32" : spans[s] == 64 ? "64" : "128")
                                         : "none",
                         oob ? "nan" : "zero", nbytes, c0, c1, nbytes, sched[k]);
                int rc = k == 4 ? run_fake(args, err, sizeof err) : run(args, err, sizeof err);
                if (rc == -2)
                    continue;
                cr_assert_eq(rc, 0, "'%s': %s", args, err);
                static uint16_t got[512];
                read_npy_payload("o.npy", got, nbytes);
                for (uint32_t i = 0; i < nbytes / 2; i++)
                    cr_assert_eq(got[i], want[i], "'%s': element %u is 0x%04x, not 0x%04x", args, i,
                                 got[i], want[i]);
            }
        }
}

/* Issue 12's acceptance kernel (tests/ptx/sm90/gemm_ws_bf16.ptx: TMA
 * producer warpgroup with setmaxnreg.dec, two wgmma m64n256k16 consumer
 * warpgroups, a 4-stage full/empty mbarrier ring) driven by hand through
 * exec with two tensor maps and 193 KB of dynamic shared memory, under every
 * schedule and through the fake driver: C = A B^T exactly (small integers). */
Test(exec_hopper, warp_specialised_gemm_through_exec)
{
    enum { M = 128, N = 256, K = 128 };
    static uint16_t a[M * K], b[N * K];
    static float want[M * N], got[M * N];
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            float v = (float)((i * 3 + k * 5) % 5 - 2);
            uint32_t u;
            memcpy(&u, &v, 4);
            a[i * K + k] = (uint16_t)(u >> 16); /* exact in bf16 */
        }
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++) {
            float v = (float)((j * 7 + k * 3) % 5 - 2);
            uint32_t u;
            memcpy(&u, &v, 4);
            b[j * K + k] = (uint16_t)(u >> 16);
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int s = 0;
            for (int k = 0; k < K; k++)
                s += ((i * 3 + k * 5) % 5 - 2) * ((j * 7 + k * 3) % 5 - 2);
            want[i * N + j] = (float)s;
        }
    write_npy_shape("A.npy", "<u2", "128, 128", a, sizeof a);
    write_npy_shape("B.npy", "<u2", "256, 128", b, sizeof b);
    const char *tests = getenv("PTXTUNE_TESTS_DIR");
    static const char *const sched[] = {"", "--schedule eager", "--schedule random:3", "--backend cuda"};
    for (size_t s = 0; s < sizeof sched / sizeof sched[0]; s++) {
        char args[1024], err[8192];
        snprintf(args, sizeof args, "%s/ptx/sm90/gemm_ws_bf16.ptx --grid 1 --block 384 --smem 197696 "
                 "--arch sm_90a --arg tmap:A.npy:bf16:128x128:128x64:128 "
                 "--arg tmap:B.npy:bf16:256x128:256x64:128 --arg out:C.npy:f32:32768 "
                 "--arg u32:256 --arg u32:128 %s", tests, sched[s]);
        int rc = s == 3 ? run_fake(args, err, sizeof err) : run(args, err, sizeof err);
        if (rc == -2)
            continue;
        cr_assert_eq(rc, 0, "'%s': %s", sched[s], err);
        read_npy_payload("C.npy", got, sizeof got);
        for (int i = 0; i < M * N; i++)
            cr_assert_eq(got[i], want[i], "'%s': C[%d][%d] = %g, want %g", sched[s], i / N, i % N,
                         (double)got[i], (double)want[i]);
    }
}

/* The library side of the same contract: tuner_launch checks a cluster
 * against the grid, tuner_tmap_encode validates on every backend (the
 * emulator's messages) before encoding, and tuner_exec_launch refuses a map
 * over an argument that is not a buffer. */
Test(exec_hopper, library_launch_checks)
{
    static const char *const backends[] = {"emu", "mock"};
    for (size_t b = 0; b < 2; b++) {
        tuner_dev *d;
        pt_err e = {0};
        cr_assert_eq(tuner_dev_open(backends[b], NULL, &d, &e), PT_OK, "%s", e.msg);
        emu_tmap_desc m = {.dtype = EMU_TMAP_BF16, .rank = 2, .gaddr = 1ull << 40,
                           .dims = {72, 20}, .strides = {144}, .box = {72, 8}, .estrides = {1, 1},
                           .swizzle = EMU_TMAP_SWIZZLE_128B};
        uint8_t blob[EMU_TMAP_BYTES];
        cr_expect_eq(tuner_tmap_encode(d, &m, blob, &e), PT_EINVAL, "%s", backends[b]);
        cr_expect(strstr(e.msg, "boxDim[0]*elementSize = 144 bytes exceeds the 128B swizzle span"),
                  "%s: %s", backends[b], e.msg);
        m.box[0] = 64;
        pt_err_clear(&e);
        cr_expect_eq(tuner_tmap_encode(d, &m, blob, &e), PT_OK, "%s: %s", backends[b], e.msg);
        emu_tmap_desc back;
        cr_expect_eq(emu_tmap_decode(blob, &back, &e), PT_OK, "%s: %s", backends[b], e.msg);
        tuner_dev_close(d);
    }
    tuner_dev *d;
    pt_err e = {0};
    cr_assert_eq(tuner_dev_open("emu", NULL, &d, &e), PT_OK, "%s", e.msg);
    write_mapbytes_kernel();
    char path[128];
    snprintf(path, sizeof path, "%s/mapbytes.ptx", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char text[8192];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    uint8_t out[4096];
    uint32_t v = 7;
    tuner_exec_arg args[2] = {
        {.kind = TUNER_EXEC_TMAP, .of = 1,
         .tmap = {.dtype = EMU_TMAP_U8, .rank = 1, .dims = {64}, .box = {16}, .estrides = {1}}},
        {.kind = TUNER_EXEC_SCALAR, .data = &v, .bytes = 8},
    };
    pt_launch l = {.grid = {3, 1, 1}, .block = {1, 1, 1}, .cluster = {2, 1, 1}};
    cr_expect_eq(tuner_exec_launch(d, text, len, "mapbytes", &l, 2, args, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "a tensor map over argument 2, which is not a buffer"), "%s", e.msg);
    args[1] = (tuner_exec_arg){.kind = TUNER_EXEC_OUT, .bytes = sizeof out, .result = out};
    pt_err_clear(&e);
    cr_expect_eq(tuner_exec_launch(d, text, len, "mapbytes", &l, 2, args, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "grid 3,1,1 is not a multiple of cluster 2,1,1"), "%s", e.msg);
    memset(l.cluster, 0, sizeof l.cluster); /* all zero: no cluster */
    pt_err_clear(&e);
    cr_expect_eq(tuner_exec_launch(d, text, len, "mapbytes", &l, 2, args, &e), PT_OK, "%s", e.msg);
    emu_tmap_desc back;
    cr_expect_eq(emu_tmap_decode(out, &back, &e), PT_OK, "%s", e.msg);
    cr_expect(back.gaddr != 0 && back.dims[0] == 64 && back.box[0] == 16);
    tuner_dev_close(d);
}
