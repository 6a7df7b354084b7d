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
        {"small.ptx --grid 1 --block 32 --smem 1000000", "exceed the 166912 a CTA may use on sm_80"},
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
