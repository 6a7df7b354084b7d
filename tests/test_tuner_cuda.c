/* The cuda backend against a fake driver (tests/fake_cuda.c: the driver API
 * over the emulator, built as libcuda.so.1): entry points through
 * cuGetProcAddress_v2, device queries, cubin refused -> PTX JIT with its
 * log, verification and the benchmark protocol with and without graphs,
 * sticky faults, resource limits, hangs killed by the supervisor, and the
 * CLI. On a machine with a real GPU these tests still load the fake. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptx/compile.h"
#include "tuner/sweep.h"

/* Loads the fake by path; the backend's dlopen("libcuda.so.1") then finds
 * it by its soname. */
static void load_fake(void)
{
    const char *p = getenv("PTXTUNE_FAKE_CUDA");
    if (!p)
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    cr_assert(dlopen(p, RTLD_NOW | RTLD_GLOBAL), "%s", dlerror());
}

/* y[i] = x[i] * 2 + 1 for i < N, then EXTRA. */
static char *kernel_text(const char *n, const char *extra)
{
    char *s = malloc(4096);
    snprintf(s, 4096,
             ".version 7.0\n.target sm_80\n.address_size 64\n\n"
             ".visible .entry k(\n\t.param .u64 py,\n\t.param .u64 px\n)\n{\n"
             "\t.reg .pred %%p<2>;\n\t.reg .b32 %%r<4>;\n\t.reg .f32 %%f<3>;\n\t.reg .b64 %%rd<6>;\n"
             "\tld.param.u64 %%rd0, [py];\n\tld.param.u64 %%rd1, [px];\n"
             "\tcvta.to.global.u64 %%rd0, %%rd0;\n\tcvta.to.global.u64 %%rd1, %%rd1;\n"
             "\tmov.u32 %%r0, %%tid.x;\n\tmov.u32 %%r1, %%ctaid.x;\n\tmov.u32 %%r2, %%ntid.x;\n"
             "\tmad.lo.u32 %%r3, %%r1, %%r2, %%r0;\n%s\tsetp.ge.u32 %%p0, %%r3, %s;\n"
             "\t@%%p0 bra DONE;\n\tmul.wide.u32 %%rd2, %%r3, 4;\n\tadd.s64 %%rd3, %%rd1, %%rd2;\n"
             "\tld.global.f32 %%f0, [%%rd3];\n\tfma.rn.f32 %%f1, %%f0, 0f40000000, 0f3F800000;\n"
             "\tadd.s64 %%rd4, %%rd0, %%rd2;\n\tst.global.f32 [%%rd4], %%f1;\n"
             "DONE:\n\tret;\n}\n",
             extra, n);
    return s;
}

/* The same kernel storing 512 GB past its output: an illegal address. */
static char *wild_kernel(void)
{
    char *s = kernel_text("160", "");
    const char *at = "\tadd.s64 %rd4, %rd0, %rd2;\n";
    char *p = strstr(s, at);
    char *out = malloc(strlen(s) + 64);
    sprintf(out, "%.*s%s\tadd.s64 %%rd4, %%rd4, 549755813888;\n%s", (int)(p - s), s, at, p + strlen(at));
    free(s);
    return out;
}

static const pt_launch k_launch = {.grid = {1, 1, 1}, .block = {192, 1, 1}, .nargs = 2,
                                   .args = {{PT_ARG_OUTPUT, 0, 0, 0}, {PT_ARG_INPUT, 0, 0, 0}},
                                   .entry = "k"};

typedef struct fx {
    pt_arena *a;
    pt_prepared *pp;
    tuner_dev *d;
    tuner_io *io;
} fx;

static fx fx_new(pt_problem pb, int sm)
{
    fx f = {0};
    pt_target t = {sm, false, false};
    pt_err e = {0};
    f.a = pt_arena_new();
    cr_assert_eq(gen_elementwise_op.prepare(f.a, &pb, &t, &f.pp, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_dev_open("cuda", NULL, &f.d, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_io_new(&gen_elementwise_op, f.pp, &f.io, &e), PT_OK);
    tuner_io_random(f.io, 1, 0, 0);
    return f;
}

static void fx_free(fx *f)
{
    tuner_io_free(f->d, f->io);
    tuner_dev_close(f->d);
    pt_arena_free(f->a);
}

Test(tuner_cuda, device_queries)
{
    load_fake();
    tuner_devinfo d[4];
    int n;
    pt_err e = {0};
    cr_assert_eq(tuner_cuda_list(d, 4, &n, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(d[0].name, "Fake GPU (ptxtune emulator)");
    cr_expect_str_eq(d[0].backend, "cuda");
    cr_expect_eq(d[0].cc_major, 9);
    cr_expect_eq(d[0].cc_minor, 0);
    cr_expect_eq(d[0].sm_count, 4);
    cr_expect_eq(d[0].l2_bytes, 1 << 20);
    cr_expect_eq(d[0].smem_optin, 232448);
    cr_expect_eq(d[0].driver_version, 13000);
    cr_expect_str_eq(d[0].uuid, "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
    /* 2619 MHz x 5120 bits x 2 / 8 = 3352 GB/s; 4 SMs x 1.98 GHz x 4096 */
    cr_expect(d[0].peak_gbs > 3352 && d[0].peak_gbs < 3353, "%g", d[0].peak_gbs);
    cr_expect(d[0].peak_tensor_tflops > 32.4 && d[0].peak_tensor_tflops < 32.5, "%g",
              d[0].peak_tensor_tflops);
    tuner_dev *dev;
    cr_assert_eq(tuner_dev_open("cuda", NULL, &dev, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(tuner_dev_info(dev)->name, d[0].name);
    cr_expect(tuner_dev_can_time(dev));
    tuner_dev_close(dev);
    tuner_dev_opts o = {.ordinal = 3};
    cr_expect_eq(tuner_dev_open("cuda", &o, &dev, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "no CUDA device 3 (1 found)"), "%s", e.msg);
}

/* The whole candidate pipeline on the (fake) GPU: emit, compile to a cubin
 * (refused by the fake: JIT fallback), verify, bench with graphs. */
Test(tuner_cuda, pipeline_verify_and_bench)
{
    load_fake();
    fx f = fx_new((pt_problem)PT_EW("y = softmax(x, -1)", "x=32x256", PT_F16, PT_F16), 90);
    pt_config c;
    pt_target t = {90, false, false};
    gen_elementwise_op.defaults(f.pp, &t, &c);
    tuner_eval_opts eo = {.target = t, .check = true, .bench = true,
                          .bench_opts = {.graph_below_us = 1e9, .budget_ms = 100}};
    tuner_evaluator *ev;
    pt_err e = {0};
    cr_assert_eq(tuner_evaluator_new(f.d, &eo, &ev, &e), PT_OK);
    tuner_candidate cand = {&gen_elementwise_op, f.pp, c, NULL, NULL};
    tuner_result r;
    tuner_eval(ev, &cand, &r, NULL, NULL);
    cr_assert_eq(r.cls, TUNER_OK, "%s in %s: %s", tuner_outcome_name(r.cls), r.phase, r.msg);
    cr_expect(r.verified && r.verify.checked == 32 * 256);
    cr_expect(r.benched && r.bench.graph, "graph batches forced");
    cr_expect(r.bench.batch >= 2);
    cr_expect(r.bench.st.n >= 10 && r.bench.st.median > 0);
    cr_expect(r.bench.flushed);
    cr_expect_eq(r.bench.sm_mhz_before, 0, "no NVML with the fake");
    cr_expect(r.ptx_hash != 0);
    /* without graphs */
    tuner_evaluator_free(ev);
    eo.bench_opts = (tuner_bench_opts){.no_graph = true, .budget_ms = 50, .graph_below_us = 1e9};
    cr_assert_eq(tuner_evaluator_new(f.d, &eo, &ev, &e), PT_OK);
    tuner_eval(ev, &cand, &r, NULL, NULL);
    cr_assert_eq(r.cls, TUNER_OK, "%s: %s", r.phase, r.msg);
    cr_expect(!r.bench.graph && r.bench.batch >= 2);
    tuner_evaluator_free(ev);
    fx_free(&f);
}

Test(tuner_cuda, jit_errors_faults_and_limits)
{
    load_fake();
    fx f = fx_new((pt_problem)PT_EW("y = x * 2 + 1", "x=4x40", PT_F32, PT_F32), 80);
    pt_err e = {0};
    /* a PTX error: the JIT's log is the message */
    const char *bad = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tfrob;\n}\n";
    tuner_image img = {bad, strlen(bad), NULL, 0, "k", NULL, NULL};
    tuner_kernel *k = NULL;
    cr_expect_eq(tuner_load(f.d, &img, &k, &e), PT_ECOMPILE);
    cr_expect_eq(tuner_dev_failure(f.d), TUNER_COMPILE_ERROR);
    cr_expect(strstr(e.msg, "cuModuleLoadDataEx (PTX JIT): CUDA_ERROR_INVALID_PTX") &&
                  strstr(e.msg, "jit.ptx:6"),
              "%s", e.msg);
    /* a good kernel, then > 48 KB of dynamic shared memory: opted in */
    char *text = kernel_text("160", "");
    img = (tuner_image){text, strlen(text), NULL, 0, "k", NULL, NULL};
    pt_err_clear(&e);
    cr_assert_eq(tuner_load(f.d, &img, &k, &e), PT_OK, "%s", e.msg);
    pt_launch l = k_launch;
    l.smem = 100 << 10;
    tuner_verify_result r;
    cr_expect_eq(tuner_verify(f.d, k, &l, f.io, NULL, &r, &e), PT_OK, "%s", e.msg);
    l.smem = 300 << 10;
    cr_expect_eq(tuner_verify(f.d, k, &l, f.io, NULL, &r, &e), PT_ERANGE);
    cr_expect_eq(r.cls, TUNER_RESOURCE_LIMIT);
    cr_expect(strstr(e.msg, "shared memory exceed the device's 232448 per block"), "%s", e.msg);
    tuner_unload(f.d, k);
    free(text);
    /* a kernel that can run fewer threads than the block has */
    setenv("FAKE_CUDA_MAX_THREADS", "128", 1);
    text = kernel_text("160", "");
    img.ptx = text;
    img.ptx_len = strlen(text);
    pt_err_clear(&e);
    cr_assert_eq(tuner_load(f.d, &img, &k, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(tuner_verify(f.d, k, &k_launch, f.io, NULL, &r, &e), PT_ERANGE);
    cr_expect_eq(r.cls, TUNER_RESOURCE_LIMIT);
    cr_expect(strstr(e.msg, "block of 192 threads exceeds the 128 kernel 'k' can run"), "%s", e.msg);
    unsetenv("FAKE_CUDA_MAX_THREADS");
    tuner_unload(f.d, k);
    free(text);
    /* a store just past the output lands in the guard zone: wrong, not a fault */
    text = kernel_text("200", "");
    img.ptx = text;
    img.ptx_len = strlen(text);
    pt_err_clear(&e);
    cr_assert_eq(tuner_load(f.d, &img, &k, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(tuner_verify(f.d, k, &k_launch, f.io, NULL, &r, &e), PT_ERANGE);
    cr_expect_eq(r.cls, TUNER_WRONG_ANSWER);
    cr_expect(strstr(e.msg, "guard zone after output 'y'"), "%s", e.msg);
    tuner_unload(f.d, k);
    free(text);
    /* a store far away: a sticky illegal address at the sync */
    text = wild_kernel();
    img.ptx = text;
    img.ptx_len = strlen(text);
    pt_err_clear(&e);
    cr_assert_eq(tuner_load(f.d, &img, &k, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(tuner_verify(f.d, k, &k_launch, f.io, NULL, &r, &e), PT_EIO);
    cr_expect_eq(r.cls, TUNER_FAULT);
    cr_expect(strstr(e.msg, "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"),
              "%s", e.msg);
    cr_expect(tuner_dev_sticky(f.d));
    tuner_ptr p;
    pt_err_clear(&e);
    cr_expect_eq(tuner_alloc(f.d, 64, &p, &e), PT_EIO);
    tuner_unload(f.d, k);
    free(text);
    fx_free(&f);
}

/* The supervisor with the cuda backend: a fault and a hang each cost one
 * candidate and one worker; the candidates after them pass. */
Test(tuner_cuda, isolation_with_the_driver, .timeout = 60)
{
    load_fake();
    setenv("FAKE_CUDA_MAX_STEPS", "200000", 1);
    pt_problem pb = PT_EW("y = x * 2 + 1", "x=4x40", PT_F32, PT_F32);
    pt_target t = {80, false, false};
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    pt_err e = {0};
    cr_assert_eq(gen_elementwise_op.prepare(a, &pb, &t, &pp, &e), PT_OK);
    char *good = kernel_text("160", ""), *oob = wild_kernel();
    char *hang = kernel_text("160", "SPIN:\n\tbra SPIN;\n");
    const char *texts[] = {good, oob, good, hang, good};
    tuner_candidate c[5];
    for (int i = 0; i < 5; i++)
        c[i] = (tuner_candidate){&gen_elementwise_op, pp, {0}, texts[i], &k_launch};
    tuner_sweep_opts o = {.backend = "cuda", .eval = {.target = t, .check = true, .bench = true},
                          .pool = {.deadline_s = 1.0, .start_deadline_s = 30}};
    o.eval.bench_opts.budget_ms = 20;
    tuner_result r[5];
    tuner_sweep_stats st;
    cr_assert_eq(tuner_sweep(c, 5, &o, r, &st, &e), PT_OK, "%s", e.msg);
    static const tuner_outcome want[] = {TUNER_OK, TUNER_FAULT, TUNER_OK, TUNER_TIMEOUT, TUNER_OK};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(r[i].cls, want[i], "candidate %d: %s in %s: %s", i,
                     tuner_outcome_name(r[i].cls), r[i].phase, r[i].msg);
    cr_expect(strstr(r[1].msg, "ILLEGAL_ADDRESS"), "%s", r[1].msg);
    cr_expect_str_eq(r[3].phase, "verify");
    cr_expect(st.max_kill_s < 2.0, "%g", st.max_kill_s);
    cr_expect_eq(st.workers, 3);
    cr_expect_str_eq(st.dev.name, "Fake GPU (ptxtune emulator)");
    free(good);
    free(oob);
    free(hang);
    pt_arena_free(a);
}

static int run_cli(const char *args, char *out, size_t on)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin);
    char lib[1024];
    snprintf(lib, sizeof lib, "%s", getenv("PTXTUNE_FAKE_CUDA"));
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "LD_LIBRARY_PATH=%s %s %s 2>&1", dirname(lib), bin, args);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, on - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(tuner_cuda, cli_with_the_driver)
{
    if (!getenv("PTXTUNE_FAKE_CUDA"))
        cr_skip_test("no fake driver");
    char out[65536];
    int rc = run_cli("devices", out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "Fake GPU (ptxtune emulator)") && strstr(out, "9.0"), "%s", out);
    rc = run_cli("devices --json", out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "[{\"backend\":\"cuda\",\"ordinal\":0,\"name\":\"Fake GPU"), "%s", out);
    rc = run_cli("run elementwise --expr 'y = gelu(x * w + b)' --shape x=16x128,w=128,b=128 "
                 "--dtype bf16 --backend cuda --check --bench --budget-ms 50",
                 out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "(sm_90)") && strstr(out, "result   ok") && strstr(out, "bench    median"),
              "%s", out);
    rc = run_cli("run elementwise --expr 'y = x * 2 + 1' --shape x=8x64 --backend cuda --check "
                 "--sweep --sample 3 --json",
                 out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "\"summary\":true,\"candidates\":3,\"ok\":3"), "%s", out);
}
