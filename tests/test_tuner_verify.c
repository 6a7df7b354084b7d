/* Verification on the mock and the emulator backends: the comparison
 * metric, the sampled reference, poison / guard / input / value findings,
 * failure classes (fault, resource limit), the exec hook, and .npy files. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner/exec.h"
#include "tuner/npy.h"
#include "tuner/verify.h"

typedef struct fixture {
    pt_arena *a;
    pt_prepared *pp;
    tuner_dev *d;
    tuner_io *io;
    tuner_kernel *k;
} fixture;

static fixture fx_new(const char *backend, pt_problem pb)
{
    fixture f = {0};
    pt_target t = {80, false, false};
    pt_err e = {0};
    f.a = pt_arena_new();
    cr_assert_eq(gen_elementwise_op.prepare(f.a, &pb, &t, &f.pp, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_dev_open(backend, NULL, &f.d, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_io_new(&gen_elementwise_op, f.pp, &f.io, &e), PT_OK, "%s", e.msg);
    tuner_io_random(f.io, 1, 0, 0);
    return f;
}

static void fx_free(fixture *f)
{
    tuner_unload(f->d, f->k);
    tuner_io_free(f->d, f->io);
    tuner_dev_close(f->d);
    pt_arena_free(f->a);
}

static int fx_load(fixture *f, const char *ptx, pt_err *e)
{
    tuner_unload(f->d, f->k);
    f->k = NULL;
    tuner_image img = {ptx, strlen(ptx), NULL, 0, "k", &gen_elementwise_op, f->pp};
    return tuner_load(f->d, &img, &f->k, e);
}

/* y = x * 2 + 1 over out, in */
static const pt_launch ew_launch = {.grid = {1, 1, 1}, .block = {192, 1, 1}, .nargs = 2,
                                    .args = {{PT_ARG_OUTPUT, 0, 0, 0}, {PT_ARG_INPUT, 0, 0, 0}},
                                    .entry = "k"};

/* ---- metric ---- */

Test(tuner_verify, metric_and_tolerances)
{
    cr_expect_float_eq(tuner_tolerance(PT_F32), 1e-5, 0);
    cr_expect_float_eq(tuner_tolerance(PT_BF16), 1e-2, 0);
    cr_expect_float_eq(tuner_tolerance(PT_TF32), 5e-4, 0);
    cr_expect_float_eq(tuner_tolerance(PT_E4M3), 1.0, 0);
    tuner_verify_result r = {0};
    double ref[4] = {100, 1, 1e-9, -50}, got[4] = {100.0005, 1.0001, 2e-9, -50};
    tuner_compare("y", PT_F32, got, ref, NULL, 4, &r);
    cr_expect_eq(r.checked, 4);
    /* 100.0005: 5e-6 relative, fine; 1.0001: 1e-4 against max(1, 1e-2*100) = 1 -> bad;
     * 2e-9 vs 1e-9: 1e-9 / (1e-2 * 100) = 1e-9, fine (judged at the tensor's scale) */
    cr_expect_eq(r.bad, 1);
    cr_expect(strstr(r.worst, "y[1]"), "%s", r.worst);
    cr_expect(fabs(r.max_err - 1e-4) < 1e-9, "%g", r.max_err);
    memset(&r, 0, sizeof r);
    double rn[3] = {NAN, 1, 2}, gn[3] = {NAN, NAN, 2};
    tuner_compare("z", PT_F16, gn, rn, NULL, 3, &r);
    cr_expect_eq(r.bad, 1, "NaN against a number is wrong; NaN against NaN is not");
    cr_expect(isinf(r.max_err));
    memset(&r, 0, sizeof r);
    /* fp8: a saturated reference counts as the format's max; error in ulps */
    double rf[2] = {1000, 1.0}, gf[2] = {448, 1.125};
    tuner_compare("q", PT_E4M3, gf, rf, NULL, 2, &r);
    cr_expect_eq(r.bad, 0, "max err %g at %s", r.max_err, r.worst);
    cr_expect_float_eq(r.max_err, 1.0, 1e-12);
}

/* ---- the sampled reference equals the full one ---- */

Test(tuner_verify, reference_at_matches_reference)
{
    static const pt_problem cases[] = {
        PT_EW("y = softmax(x * 0.125, -1)", "x=16x64", PT_BF16, PT_BF16),
        PT_EW("y = layernorm(x + r, -1) * g + b", "x=8x48,r=8x48,g=48,b=48", PT_F16, PT_F16),
        PT_EW("y = silu(x) * u + where(b > 0, b, 0.5 * b)", "x=4x8x96,u=4x8x96,b=8x1", PT_F32, PT_F32),
        PT_EW("m = mean(x, -1); y = x - m", "x=12x40", PT_F32, PT_F32),
        PT_EW("y = gelu(x * w + b)", "x=32x64,w=64,b=64", PT_F32, PT_E4M3),
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        pt_target t = {90, false, false};
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        cr_assert_eq(gen_elementwise_op.prepare(a, &cases[ci], &t, &pp, &e), PT_OK, "%s", e.msg);
        tuner_io *io;
        cr_assert_eq(tuner_io_new(&gen_elementwise_op, pp, &io, &e), PT_OK);
        tuner_io_random(io, 11, 0, 0);
        pt_tensor ref[TUNER_MAX_TENSORS];
        for (int o = 0; o < io->nout; o++) {
            ref[o] = io->out[o];
            ref[o].data = calloc((size_t)ref[o].numel, sizeof(double));
        }
        cr_assert_eq(gen_elementwise_op.reference(pp, io->in, ref, &e), PT_OK, "%s", e.msg);
        for (int o = 0; o < io->nout; o++) {
            int64_t n = ref[o].numel;
            int64_t *idx = malloc((size_t)n * sizeof *idx);
            double *v = malloc((size_t)n * sizeof *v);
            for (int64_t j = 0; j < n; j++)
                idx[j] = j;
            cr_assert_eq(gen_elementwise_op.reference_at(pp, io->in, o, idx, (int)n, v, &e), PT_OK,
                         "%s", e.msg);
            for (int64_t j = 0; j < n; j++)
                cr_assert(v[j] == ref[o].data[j] || (isnan(v[j]) && isnan(ref[o].data[j])),
                          "%s output %d [%lld]: %.17g vs %.17g", cases[ci].expr, o, (long long)j,
                          v[j], ref[o].data[j]);
            int64_t bad = n;
            cr_expect_eq(gen_elementwise_op.reference_at(pp, io->in, o, &bad, 1, v, &e), PT_ERANGE);
            free(idx);
            free(v);
            free(ref[o].data);
        }
        tuner_io_free(NULL, io);
        pt_arena_free(a);
    }
}

/* ---- the mock: every planted failure is found and classed ---- */

Test(tuner_verify, mock_findings)
{
    fixture f = fx_new("mock", (pt_problem)PT_EW("y = x * 2 + 1", "x=4x40", PT_F32, PT_F32));
    static const struct {
        const char *ptx;
        int rc;
        tuner_outcome cls;
        const char *what, *msg;
    } cases[] = {
        {"// mock:\n", PT_OK, TUNER_OK, "", ""},
        {"// mock: wrong\n", PT_ERANGE, TUNER_WRONG_ANSWER, "values", "1 of 160 elements over tolerance"},
        {"// mock: past\n", PT_ERANGE, TUNER_WRONG_ANSWER, "guard", "guard zone after output 'y'"},
        {"// mock: oor\n", PT_ERANGE, TUNER_RESOURCE_LIMIT, "", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
        {"// mock: launch_error\n", PT_EIO, TUNER_LAUNCH_ERROR, "", "cuLaunchKernelEx"},
        {"// mock:\n", PT_OK, TUNER_OK, "", ""}, /* nothing lingers from the failures */
        {"// mock: fault\n", PT_EIO, TUNER_FAULT, "", "CUDA_ERROR_ILLEGAL_ADDRESS"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_err e = {0};
        cr_assert_eq(fx_load(&f, cases[i].ptx, &e), PT_OK, "%s", e.msg);
        tuner_verify_result r;
        int rc = tuner_verify(f.d, f.k, &ew_launch, f.io, NULL, &r, &e);
        cr_expect_eq(rc, cases[i].rc, "%s: rc %d (%s)", cases[i].ptx, rc, e.msg);
        cr_expect_eq(r.cls, cases[i].cls, "%s: class %s", cases[i].ptx, tuner_outcome_name(r.cls));
        cr_expect_str_eq(r.what, cases[i].what, "%s", cases[i].ptx);
        cr_expect(strstr(e.msg, cases[i].msg), "%s: '%s' lacks '%s'", cases[i].ptx, e.msg,
                  cases[i].msg);
        if (rc == PT_OK)
            cr_expect_eq(r.checked, 160);
    }
    /* the fault is sticky: the device refuses everything after it */
    cr_expect(tuner_dev_sticky(f.d));
    tuner_ptr p;
    pt_err e = {0};
    cr_expect_eq(tuner_alloc(f.d, 16, &p, &e), PT_EIO);
    cr_expect(strstr(e.msg, "unusable after an earlier fault"), "%s", e.msg);
    cr_expect_eq(tuner_dev_failure(f.d), TUNER_FAULT);
    fx_free(&f);
}

Test(tuner_verify, large_problems_are_sampled)
{
    /* 2^21 outputs: over the 2^20 full-compare limit */
    fixture f = fx_new("mock", (pt_problem)PT_EW("y = softmax(x, -1)", "x=2048x1024", PT_F16, PT_F16));
    pt_err e = {0};
    cr_assert_eq(fx_load(&f, "// mock:\n", &e), PT_OK);
    pt_launch l = ew_launch;
    tuner_verify_result r;
    cr_assert_eq(tuner_verify(f.d, f.k, &l, f.io, NULL, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(r.sampled);
    cr_expect(r.checked >= 4096 && r.checked <= 4098, "checked %lld", (long long)r.checked);
    tuner_verify_opts o = {.samples = 10000, .seed = 3};
    cr_assert_eq(tuner_verify(f.d, f.k, &l, f.io, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(r.checked >= 10000, "checked %lld", (long long)r.checked);
    o = (tuner_verify_opts){.full_limit = (int64_t)1 << 22};
    cr_assert_eq(tuner_verify(f.d, f.k, &l, f.io, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(!r.sampled);
    cr_expect_eq(r.checked, (int64_t)1 << 21);
    fx_free(&f);
}

/* ---- the emulator: hand-written kernels with real bugs ---- */

/* y[i] = x[i] * 2 + C for i < N; EXTRA is one more instruction. */
static char *kernel_text(const char *n, const char *c, const char *extra)
{
    char *s = malloc(4096);
    snprintf(s, 4096,
             ".version 7.0\n.target sm_80\n.address_size 64\n\n"
             ".visible .entry k(\n\t.param .u64 py,\n\t.param .u64 px\n)\n{\n"
             "\t.reg .pred %%p<2>;\n\t.reg .b32 %%r<4>;\n\t.reg .f32 %%f<3>;\n\t.reg .b64 %%rd<6>;\n"
             "\tld.param.u64 %%rd0, [py];\n\tld.param.u64 %%rd1, [px];\n"
             "\tcvta.to.global.u64 %%rd0, %%rd0;\n\tcvta.to.global.u64 %%rd1, %%rd1;\n"
             "\tmov.u32 %%r0, %%tid.x;\n\tmov.u32 %%r1, %%ctaid.x;\n\tmov.u32 %%r2, %%ntid.x;\n"
             "\tmad.lo.u32 %%r3, %%r1, %%r2, %%r0;\n\tsetp.ge.u32 %%p0, %%r3, %s;\n"
             "\t@%%p0 bra DONE;\n\tmul.wide.u32 %%rd2, %%r3, 4;\n\tadd.s64 %%rd3, %%rd1, %%rd2;\n"
             "\tld.global.f32 %%f0, [%%rd3];\n\tfma.rn.f32 %%f1, %%f0, 0f40000000, %s;\n"
             "\tadd.s64 %%rd4, %%rd0, %%rd2;\n\tst.global.f32 [%%rd4], %%f1;\n%s"
             "DONE:\n\tret;\n}\n",
             n, c, extra);
    return s;
}

Test(tuner_verify, emulator_findings)
{
    fixture f = fx_new("emu", (pt_problem)PT_EW("y = x * 2 + 1", "x=4x40", PT_F32, PT_F32));
    static const struct {
        const char *n, *c, *extra;
        int rc;
        tuner_outcome cls;
        const char *what, *msg;
    } cases[] = {
        {"160", "0f3F800000", "", PT_OK, TUNER_OK, "", ""},
        {"159", "0f3F800000", "", PT_ERANGE, TUNER_WRONG_ANSWER, "unwritten", "1 elements of output 'y' never written (first: 159)"},
        {"160", "0f3F810000", "", PT_ERANGE, TUNER_WRONG_ANSWER, "values", "over tolerance 1e-05"},
        {"160", "0f3F800000", "\tst.global.f32 [%rd3], %f1;\n", PT_ERANGE, TUNER_WRONG_ANSWER, "input", "modified input 'x'"},
        {"161", "0f3F800000", "", PT_EEMU, TUNER_FAULT, "", "out-of-bounds"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = kernel_text(cases[i].n, cases[i].c, cases[i].extra);
        pt_err e = {0};
        cr_assert_eq(fx_load(&f, text, &e), PT_OK, "%s\n%s", e.msg, text);
        tuner_verify_result r;
        int rc = tuner_verify(f.d, f.k, &ew_launch, f.io, NULL, &r, &e);
        cr_expect_eq(rc, cases[i].rc, "case %zu: rc %d (%s)", i, rc, e.msg);
        cr_expect_eq(r.cls, cases[i].cls, "case %zu: class %s", i, tuner_outcome_name(r.cls));
        cr_expect_str_eq(r.what, cases[i].what, "case %zu", i);
        cr_expect(strstr(e.msg, cases[i].msg), "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].msg);
        free(text);
    }
    pt_err e = {0};
    cr_expect_eq(fx_load(&f, ".version 7.0\n.target sm_80\nnonsense\n", &e), PT_EPARSE);
    cr_expect_eq(tuner_dev_failure(f.d), TUNER_COMPILE_ERROR);
    fx_free(&f);
}

/* The generator's own kernel verified on the emulator (the text is parsed). */
Test(tuner_verify, emitted_kernel_on_the_emulator)
{
    fixture f = fx_new("emu", (pt_problem)PT_EW("y = layernorm(x, -1) * g", "x=8x128,g=128", PT_BF16, PT_BF16));
    pt_target t = {80, false, false};
    pt_config c;
    gen_elementwise_op.defaults(f.pp, &t, &c);
    ptx_module *m;
    pt_launch l;
    pt_err e = {0};
    cr_assert_eq(pt_op_build(&gen_elementwise_op, f.pp, &t, 0, &c, &m, &l, &e), PT_OK, "%s", e.msg);
    char *text = ptx_print(m);
    tuner_image img = {text, strlen(text), NULL, 0, l.entry, NULL, NULL};
    cr_assert_eq(tuner_load(f.d, &img, &f.k, &e), PT_OK, "%s", e.msg);
    tuner_verify_result r;
    cr_expect_eq(tuner_verify(f.d, f.k, &l, f.io, NULL, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.checked, 8 * 128);
    cr_expect(r.max_err < 1e-2, "%g", r.max_err);
    uint64_t lanes = 0;
    double secs = -1;
    cr_expect_eq(tuner_emu_last_stats(f.d, &lanes, &secs), PT_OK);
    cr_expect(lanes > 8 * 128 && secs >= 0, "%llu lane instructions", (unsigned long long)lanes);
    free(text);
    ptx_module_free(m);
    fx_free(&f);
}

Test(tuner_verify, exec_hook_on_the_emulator)
{
    tuner_dev *d;
    pt_err e = {0};
    cr_assert_eq(tuner_dev_open("emu", NULL, &d, &e), PT_OK);
    char *text = kernel_text("100", "0f3F800000", "");
    float x[100], y[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)i * 0.5f;
    tuner_exec_arg args[] = {{TUNER_EXEC_OUT, NULL, sizeof y, y}, {TUNER_EXEC_IN, x, sizeof x, NULL}};
    unsigned g[3] = {1, 1, 1}, b[3] = {128, 1, 1};
    cr_assert_eq(tuner_exec(d, text, strlen(text), "k", g, b, 0, 2, args, &e), PT_OK, "%s", e.msg);
    for (int i = 0; i < 100; i++)
        cr_assert_float_eq(y[i], x[i] * 2 + 1, 0);
    free(text);
    text = kernel_text("101", "0f3F800000", "");
    cr_expect_eq(tuner_exec(d, text, strlen(text), "k", g, b, 0, 2, args, &e), PT_EEMU);
    cr_expect(strstr(e.msg, "out-of-bounds"), "%s", e.msg);
    free(text);
    tuner_dev_close(d);
}

/* ---- .npy ---- */

Test(tuner_npy, roundtrip_and_dtypes)
{
    char path[] = "/tmp/ptxtune-npy-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    float v[6] = {1, -2, 3.5f, 0.25f, -0.125f, 1e10f};
    int64_t shape[2] = {2, 3};
    pt_err e = {0};
    cr_assert_eq(tuner_npy_write(path, "<f4", 2, shape, v, &e), PT_OK, "%s", e.msg);
    tuner_npy n;
    cr_assert_eq(tuner_npy_read(path, &n, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(n.descr, "<f4");
    cr_expect_eq(n.ndim, 2);
    cr_expect_eq(n.shape[0], 2);
    cr_expect_eq(n.shape[1], 3);
    cr_expect_eq(n.numel, 6);
    cr_expect(memcmp(n.data, v, sizeof v) == 0);
    /* the header is what numpy writes: 64-byte aligned, ends in a newline */
    FILE *fp = fopen(path, "rb");
    unsigned char hdr[128];
    size_t got = fread(hdr, 1, sizeof hdr, fp);
    fclose(fp);
    cr_assert(got >= 64);
    size_t hl = (size_t)hdr[8] | (size_t)hdr[9] << 8;
    cr_expect_eq((10 + hl) % 64, 0);
    cr_expect_eq(hdr[10 + hl - 1], '\n');
    cr_expect(memmem(hdr, got, "'shape': (2, 3), }", 18), "%.*s", (int)hl, hdr + 10);
    /* floats into f16 and bf16 storage */
    uint16_t h[6], bf[6];
    cr_assert_eq(tuner_npy_to_dtype(&n, PT_F16, h, &e), PT_OK);
    cr_expect_eq(h[0], pt_f32_to_f16(1.0f));
    cr_expect_eq(h[5], pt_f32_to_f16(1e10f)); /* inf in f16 */
    cr_assert_eq(tuner_npy_to_dtype(&n, PT_BF16, bf, &e), PT_OK);
    cr_expect_eq(bf[2], pt_f32_to_bf16(3.5f));
    tuner_npy_free(&n);
    /* bf16 as uint16 bits, one dim: read back bit for bit */
    int64_t six = 6;
    cr_assert_eq(tuner_npy_write(path, pt_dtype_get(PT_BF16)->npy, 1, &six, bf, &e), PT_OK);
    cr_assert_eq(tuner_npy_read(path, &n, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(n.descr, "<u2");
    cr_expect_eq(n.ndim, 1);
    uint16_t bf2[6];
    cr_assert_eq(tuner_npy_to_dtype(&n, PT_BF16, bf2, &e), PT_OK);
    cr_expect(memcmp(bf, bf2, sizeof bf) == 0);
    uint8_t q[6];
    cr_expect_eq(tuner_npy_to_dtype(&n, PT_E4M3, q, &e), PT_EINVAL, "u2 bits are not e4m3");
    cr_expect(strstr(e.msg, "<u2") && strstr(e.msg, "e4m3"), "%s", e.msg);
    tuner_npy_free(&n);
    unlink(path);
}

Test(tuner_npy, malformed_files_are_errors)
{
    static const char good[] = "\x93NUMPY\x01\x00\x3d\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }   \n";
    char buf[256];
    memcpy(buf, good, sizeof good - 1);
    float two[2] = {1, 2};
    memcpy(buf + sizeof good - 1, two, 8);
    size_t len = sizeof good - 1 + 8;
    tuner_npy n;
    pt_err e = {0};
    cr_assert_eq(tuner_npy_parse(buf, len, "ok.npy", &n, &e), PT_OK, "%s", e.msg);
    tuner_npy_free(&n);
    /* every truncation fails cleanly */
    for (size_t cut = 0; cut < len; cut++) {
        pt_err_clear(&e);
        cr_expect_neq(tuner_npy_parse(buf, cut, "cut.npy", &n, &e), PT_OK, "cut at %zu", cut);
    }
    static const struct {
        const char *from, *to, *msg;
    } bad[] = {
        {"NUMPY", "NUMPX", "not a .npy file"},
        {"False", "True ", "Fortran-order"},
        {"'<f4'", "'>f4'", "big-endian"},
        {"'<f4'", "'|O8'", "not supported"},
        {"(2,)", "(2x)", "bad shape"},
        {"'shape'", "'shapx'", "lacks"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char b2[256];
        memcpy(b2, buf, len);
        char *p = memmem(b2, len, bad[i].from, strlen(bad[i].from));
        cr_assert(p);
        memcpy(p, bad[i].to, strlen(bad[i].to));
        pt_err_clear(&e);
        cr_expect_neq(tuner_npy_parse(b2, len, "bad.npy", &n, &e), PT_OK, "%s", bad[i].to);
        cr_expect(strstr(e.msg, bad[i].msg), "'%s' lacks '%s'", e.msg, bad[i].msg);
    }
    pt_err_clear(&e);
    cr_expect_eq(tuner_npy_read("/nonexistent/x.npy", &n, &e), PT_EIO);
}
