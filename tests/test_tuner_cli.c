/* ptxtune devices / run: the plain message and exit code 4 without a CUDA
 * driver, runs on the emulator and the mock, .npy in and out, bad input. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "db/db.h"
#include "tuner/npy.h"

/* Runs ptxtune with args (a shell fragment): exit code, stdout, stderr. */
static int run(const char *args, char *out, size_t on, char *err, size_t en)
{
    return test_run_ptxtune(NULL, args, out, on, err, en);
}

static bool have_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h)
        dlclose(h);
    return h != NULL;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#define EW "elementwise --expr \"y = x * 2 + 1\" --shape x=16x64"

Test(tuner_cli, no_driver_exits_4_with_the_plain_message)
{
    if (have_driver())
        cr_skip_test("a CUDA driver is installed here");
    static const char *const cmds[] = {
        "devices",
        "devices --json",
        "run " EW " --backend cuda",
        "run " EW " --backend cuda --check --bench",
        "run " EW " --check",          /* cuda is the default backend */
        "run " EW " --backend cuda --sweep --limit 2",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char out[4096], err[4096];
        int rc = run(cmds[i], out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 4, "'%s' exited %d (%s)", cmds[i], rc, err);
        cr_expect_str_eq(err, "ptxtune: no CUDA driver found (libcuda.so.1)\n", "'%s'", cmds[i]);
        cr_expect_str_eq(out, "", "'%s' printed '%s'", cmds[i], out);
    }
}

Test(tuner_cli, run_on_the_emulator_and_the_mock)
{
    char out[65536], err[4096];
    int rc = run("run " EW " --backend emu --check", out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "%s%s", out, err);
    cr_expect(strstr(out, "result   ok"), "%s", out);
    cr_expect(strstr(out, "check    ok: 1024 elements"), "%s", out);
    rc = run("run " EW " --dtype bf16 --backend mock --check --bench --json", out, sizeof out, err,
             sizeof err);
    cr_expect_eq(rc, 0, "%s%s", out, err);
    cr_expect_eq(lines(out), 1, "%s", out);
    cr_expect(strstr(out, "\"class\":\"ok\""), "%s", out);
    cr_expect(strstr(out, "\"protocol\":\"ptxtune-bench/1\""), "%s", out);
    cr_expect(strstr(out, "\"device\":{\"backend\":\"mock\""), "%s", out);
    rc = run("run " EW " --backend mock --check --bench --sweep --limit 3", out, sizeof out, err,
             sizeof err);
    cr_expect_eq(rc, 0, "%s%s", out, err);
    cr_expect(strstr(out, "3 candidates on mock device (mock): 3 ok"), "%s", out);
    cr_expect(strstr(out, "best     "), "%s", out);
}

Test(tuner_cli, npy_in_and_out)
{
    char dir[] = "/tmp/ptxtune_npy_XXXXXX";
    cr_assert(mkdtemp(dir));
    char args[1024], out[65536], err[4096];
    snprintf(args, sizeof args, "run " EW " --backend emu --seed 7 --out y=%s/y.npy", dir);
    int rc = run(args, out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "%s%s", out, err);
    /* feed the output back as the input: z = 2 * (2x + 1) + 1 */
    snprintf(args, sizeof args, "run " EW " --backend emu --check --in x=%s/y.npy --out y=%s/z.npy",
             dir, dir);
    rc = run(args, out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "%s%s", out, err);
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s/y.npy", dir);
    snprintf(p2, sizeof p2, "%s/z.npy", dir);
    tuner_npy y, z;
    pt_err e = {0};
    cr_assert_eq(tuner_npy_read(p1, &y, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_npy_read(p2, &z, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(y.descr, "<f4");
    cr_expect_eq(y.ndim, 2);
    cr_expect_eq(y.shape[0], 16);
    cr_expect_eq(y.shape[1], 64);
    for (int64_t i = 0; i < y.numel; i++) {
        float a = ((float *)y.data)[i], b = ((float *)z.data)[i];
        cr_assert_float_eq(b, a * 2 + 1, 1e-5f * (1 + (a < 0 ? -a : a)), "[%lld]", (long long)i);
    }
    tuner_npy_free(&y);
    tuner_npy_free(&z);
    remove(p1);
    remove(p2);
    rmdir(dir);
}

Test(tuner_cli, bad_input_exits_2)
{
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"run " EW " --backend gpu", "unknown backend 'gpu' (cuda, emu, mock)"},
        {"run " EW " --backend emu --bench", "the emu backend does not time kernels"},
        {"run " EW " --backend emu --in z=/tmp/none.npy", "no input named 'z'"},
        {"run " EW " --backend emu --in x", "bad --in 'x' (expected NAME=FILE.npy)"},
        {"run " EW " --backend emu --in x=/nonexistent.npy", "cannot open '/nonexistent.npy'"},
        {"run " EW " --backend emu --seed", "ptxtune: option '--seed' needs a value"},
        {"run " EW " --backend emu --compiler nvcc", "unknown compiler 'nvcc'"},
        {"devices --frob", "ptxtune: unknown option '--frob'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[4096], err[4096];
        int rc = run(bad[i].args, out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' exited %d (%s)", bad[i].args, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': '%s' lacks '%s'", bad[i].args, err, bad[i].msg);
        cr_expect_eq(lines(err), 1, "'%s': %s", bad[i].args, err);
    }
}

/* A .npy file of 2x3 float32 written by hand: fortran_order fo (a literal
 * header value), data as given. */
static void write_npy(const char *path, const char *fo, const float *v, int n)
{
    char h[128];
    int len = snprintf(h, sizeof h, "{'descr': '<f4', 'fortran_order': %s, 'shape': (2, 3), }", fo);
    while ((10 + len + 1) % 64)
        h[len++] = ' ';
    h[len++] = '\n';
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)len, 0};
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, (size_t)len, f);
    fwrite(v, sizeof *v, (size_t)n, f);
    fclose(f);
}

/* fortran_order: True is data in column order: read it transposed into C
 * order (issue 9 item 18), and refuse a value that is not a bool. */
Test(tuner_cli, npy_fortran_order_is_transposed)
{
    char dir[] = "/tmp/ptxtune_npyf_XXXXXX";
    cr_assert(mkdtemp(dir));
    char in[256], bad[256], outp[256], args[1024], out[65536], err[4096];
    snprintf(in, sizeof in, "%s/f.npy", dir);
    snprintf(bad, sizeof bad, "%s/b.npy", dir);
    snprintf(outp, sizeof outp, "%s/y.npy", dir);
    /* C-order x = [[0, 1, 2], [3, 4, 5]] stored column by column */
    const float fdata[6] = {0, 3, 1, 4, 2, 5};
    write_npy(in, "True", fdata, 6);
    write_npy(bad, "1", fdata, 6);
    tuner_npy n;
    pt_err e = {0};
    cr_assert_eq(tuner_npy_read(in, &n, &e), PT_OK, "%s", e.msg);
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(((float *)n.data)[i], (float)i, 0, "[%d]", i);
    tuner_npy_free(&n);
    snprintf(args, sizeof args,
             "run elementwise --expr 'y = x * 2 + 1' --shape x=2x3 --backend emu --in x=%s --out y=%s",
             in, outp);
    cr_assert_eq(run(args, out, sizeof out, err, sizeof err), 0, "%s%s", out, err);
    cr_assert_eq(tuner_npy_read(outp, &n, &e), PT_OK, "%s", e.msg);
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(((float *)n.data)[i], (float)(2 * i + 1), 1e-6, "y[%d]", i);
    tuner_npy_free(&n);
    snprintf(args, sizeof args,
             "run elementwise --expr 'y = x * 2 + 1' --shape x=2x3 --backend emu --in x=%s", bad);
    cr_expect_eq(run(args, out, sizeof out, err, sizeof err), 2, "%s", err);
    cr_expect(strstr(err, "bad fortran_order"), "%s", err);
    cr_expect_eq(lines(err), 1, "%s", err);
    remove(in);
    remove(bad);
    remove(outp);
    rmdir(dir);
}

/* An --out that is an --in (or another --out) is refused before anything
 * runs, and the input survives; a directory says so (issue 9 item 18). */
Test(tuner_cli, npy_output_that_is_an_input_is_refused)
{
    char dir[] = "/tmp/ptxtune_npyo_XXXXXX";
    cr_assert(mkdtemp(dir));
    char in[256], link[256], args[1024], out[65536], err[4096];
    snprintf(in, sizeof in, "%s/x.npy", dir);
    snprintf(link, sizeof link, "%s/l.npy", dir);
    const float v[6] = {1, 2, 3, 4, 5, 6};
    write_npy(in, "False", v, 6);
    cr_assert_eq(symlink(in, link), 0);
    const char *outs[] = {in, link};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "run elementwise --expr 'y = x * 2' --shape x=2x3 --backend emu --in x=%s --out y=%s",
                 in, outs[i]);
        cr_expect_eq(run(args, out, sizeof out, err, sizeof err), 2, "%s: %s", args, err);
        cr_expect(strstr(err, "is also an input"), "%s", err);
        cr_expect_eq(lines(err), 1, "%s", err);
    }
    tuner_npy n;
    pt_err e = {0};
    cr_assert_eq(tuner_npy_read(in, &n, &e), PT_OK, "%s", e.msg);
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(((float *)n.data)[i], v[i], 0, "the input changed at [%d]", i);
    tuner_npy_free(&n);
    snprintf(args, sizeof args,
             "run elementwise --expr 'y = x * 2' --shape x=2x3 --backend emu --in x=%s", dir);
    cr_expect_eq(run(args, out, sizeof out, err, sizeof err), 2, "%s", err);
    cr_expect(strstr(err, "is a directory"), "%s", err);
    cr_expect_eq(lines(err), 1, "%s", err);
    snprintf(args, sizeof args,
             "run elementwise --expr 'y = x * 2' --shape x=2x3 --backend emu --out y=%s", dir);
    cr_expect_eq(run(args, out, sizeof out, err, sizeof err), 2, "%s", err);
    cr_expect(strstr(err, "is a directory"), "%s", err);
    cr_expect_eq(lines(err), 1, "%s", err);
    remove(link);
    remove(in);
    rmdir(dir);
}

/* A problem whose sizes overflow is bad input for tune, on the command line
 * or in a problem file: one line, exit 2, nothing stored (issue 9 items 15
 * and 17). */
Test(tuner_cli, tune_refuses_overflowing_problems)
{
    char dir[] = "/tmp/ptxtune_tovf_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/p.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("gemm m=64 n=64 k=64\ngemm m=4294967296 n=4294967296 k=1099511627776\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/q.txt", dir);
    f = fopen(path, "w");
    cr_assert(f);
    fputs("elementwise expr='y = x + w' shape=x=1099511627776x1,w=1099511627776\n", f);
    fclose(f);
    static const char *const cmds[] = {
        "tune gemm m=4294967296 n=4294967296 k=1099511627776 --backend emu --budget 2 --quiet --db t.db",
        "tune gemm m=65536 n=65536 k=65536 batch=4294967296 --backend emu --budget 2 --quiet --db t.db",
        "tune elementwise 'expr=y = x + w' shape=x=1099511627776x1,w=1099511627776 --backend emu "
        "--budget 2 --quiet --db t.db",
        "tune --problems p.txt --backend emu --budget 2 --quiet --db t.db",
        "tune --problems q.txt --backend emu --budget 2 --quiet --db t.db",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char out[65536], err[4096];
        int rc = test_run_ptxtune(dir, cmds[i], out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' exited %d (%s)", cmds[i], rc, err);
        cr_expect_eq(lines(err), 1, "'%s': %s", cmds[i], err);
        char db[300];
        snprintf(db, sizeof db, "%s/t.db", dir);
        if (access(db, F_OK) == 0) {
            db_store *s;
            pt_err e = {0};
            int64_t n = -1;
            cr_assert_eq(db_open(db, NULL, &s, &e), PT_OK, "%s", e.msg);
            cr_expect_eq(db_query_int(s, "SELECT count(*) FROM problems", &n, &e), PT_OK, "%s", e.msg);
            cr_expect_eq(n, 0, "'%s' stored %lld problems", cmds[i], (long long)n);
            db_close(s);
        }
    }
    char rm[512];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    cr_expect_eq(system(rm), 0);
}

/* --out-scale S (out_scale=S) multiplies fp8 outputs before rounding, in the
 * kernel and in the reference --check compares with (issue 9 consistency). */
Test(tuner_cli, fp8_output_scale_is_settable)
{
    char dir[] = "/tmp/ptxtune_oscale_XXXXXX";
    cr_assert(mkdtemp(dir));
    char in[256], outp[256], args[1024], out[65536], err[4096];
    snprintf(in, sizeof in, "%s/x.npy", dir);
    snprintf(outp, sizeof outp, "%s/y.npy", dir);
    const float v[6] = {0.25f, -0.5f, 1.0f, 2.0f, -4.0f, 0.125f};
    write_npy(in, "False", v, 6);
    const char *forms[] = {"--out-scale 4", "out_scale=4"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 "run elementwise --expr 'y = x' --shape x=2x3 --out-dtype e4m3 --arch sm_89 "
                 "--backend emu --check --in x=%s --out y=%s %s", in, outp, forms[k]);
        cr_assert_eq(run(args, out, sizeof out, err, sizeof err), 0, "%s: %s%s", args, out, err);
        cr_expect(strstr(out, "check    ok"), "%s", out);
        tuner_npy n;
        pt_err e = {0};
        cr_assert_eq(tuner_npy_read(outp, &n, &e), PT_OK, "%s", e.msg);
        cr_assert_eq(n.numel, 6);
        for (int i = 0; i < 6; i++)
            cr_expect_float_eq(pt_dtype_load(PT_E4M3, n.data, (size_t)i), 4.0 * v[i], 0,
                               "%s: y[%d]", forms[k], i);
        tuner_npy_free(&n);
        remove(outp);
    }
    remove(in);
    rmdir(dir);
}

/* tune takes the fp8 output scale as --out-scale and out_scale=, and it is
 * part of the problem's identity; an unknown option is named (issue 9
 * consistency). */
Test(tuner_cli, tune_takes_the_output_scale)
{
    char dir[] = "/tmp/ptxtune_tos_XXXXXX";
    cr_assert(mkdtemp(dir));
    char out[65536], err[4096];
    const char *cmds[] = {
        "tune elementwise 'expr=y = x' shape=x=4x64 out_dtype=e4m3 --arch sm_89 --out-scale 2 "
        "--backend emu --budget 1 --quiet --top 1 --db t.db",
        "tune elementwise 'expr=y = x' shape=x=4x64 out_dtype=e4m3 --arch sm_89 out_scale=2 "
        "--backend emu --budget 1 --quiet --top 1 --db t.db",
    };
    for (int i = 0; i < 2; i++) {
        int rc = test_run_ptxtune(dir, cmds[i], out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 0, "'%s': %s%s", cmds[i], out, err);
        cr_expect(strstr(out, "out_dtype=e4m3 out_scale=2\n"), "%s", out);
    }
    int rc = test_run_ptxtune(dir, "tune elementwise 'expr=y = x' shape=x=4 --frob --db t.db", out,
                              sizeof out, err, sizeof err);
    cr_expect_eq(rc, 2);
    cr_expect_str_eq(err, "ptxtune: unknown option '--frob'\n");
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    cr_expect_eq(system(rm), 0);
}

/* A candidate that fails before anything is compared (a launch the driver
 * refuses) is one line: the result, no empty check line (issue 9 item 18). */
Test(tuner_cli, launch_failure_is_one_line)
{
    const char *fake = getenv("PTXTUNE_FAKE_CUDA");
    if (!fake)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    char lib[1024];
    snprintf(lib, sizeof lib, "%s", fake);
    char *slash = strrchr(lib, '/');
    cr_assert(slash);
    *slash = '\0';
    setenv("LD_LIBRARY_PATH", lib, 1);
    setenv("FAKE_CUDA_MAX_THREADS", "128", 1);
    char out[65536], err[4096];
    int rc = run("run " EW " --backend cuda --check --config tpb=256", out, sizeof out, err,
                 sizeof err);
    unsetenv("FAKE_CUDA_MAX_THREADS");
    unsetenv("LD_LIBRARY_PATH");
    cr_expect_eq(rc, 1, "%s%s", out, err);
    int failures = 0;
    for (const char *s = out; (s = strstr(s, "resource_limit")); s++)
        failures++;
    cr_expect_eq(failures, 1, "the failure is printed %d times: %s", failures, out);
    cr_expect(strstr(out, "result   resource_limit: "), "%s", out);
    cr_expect(!strstr(out, "check    "), "%s", out);
}
