/* The compile gate against the real toolkit: both backends, every target.
 * Tests that need a toolkit skip without one, or fail when
 * PTXTUNE_REQUIRE_TOOLKIT=1 (the CI job with CUDA sets it). */
#include "test_util.h"
#include "ptx/compile.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const pt_backend backends[] = {PT_BACKEND_NVJITLINK, PT_BACKEND_PTXAS};
enum { NBACKENDS = sizeof backends / sizeof backends[0] };


static pt_compiler *open_or_skip(void)
{
    pt_err e = {0};
    pt_compiler *c = NULL;
    if (pt_compiler_open(&c, &e) != PT_OK) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_assert_eq(e.code, PT_ENOTOOLKIT, "%s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    return c;
}

/* Switches to backend b; false (with a note) when this machine lacks it, so a
 * test covers whichever backends exist and skips only when none does. */
static bool use_backend(pt_compiler *c, pt_backend b)
{
    pt_err e = {0};
    if (pt_compiler_set_backend(c, b, &e) == PT_OK)
        return true;
    cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
    cr_log_warn("%s", e.msg);
    return false;
}

static void skip_if_none(pt_compiler *c, int tested)
{
    if (tested == 0) {
        pt_compiler_close(c);
        cr_skip_test("neither backend available");
    }
}

/* The PTX header for t at the lowest .version it accepts, so every target
 * compiles with one toolkit. */
static void ptx_for(char *buf, size_t n, const pt_target *t, const char *body)
{
    char name[16], ver[8];
    snprintf(buf, n, ".version %s\n.target %s\n.address_size 64\n\n%s",
             pt_ptx_version_str(pt_target_min_ptx(t), ver, sizeof ver),
             pt_target_name(t, name, sizeof name), body);
}

/* 1 KB of static .shared, one bar.sync. */
static const char k_ok[] =
    ".visible .entry k(.param .u64 p_out, .param .u64 p_in)\n"
    "{\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<8>;\n"
    "    .reg .f32 %f<4>;\n"
    "    .shared .align 4 .b8 smem[1024];\n"
    "    ld.param.u64 %rd1, [p_out];\n"
    "    ld.param.u64 %rd2, [p_in];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    cvta.to.global.u64 %rd2, %rd2;\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    mul.wide.u32 %rd3, %r1, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    ld.global.f32 %f1, [%rd4];\n"
    "    mov.u32 %r2, smem;\n"
    "    shl.b32 %r3, %r1, 2;\n"
    "    add.s32 %r4, %r2, %r3;\n"
    "    st.shared.f32 [%r4], %f1;\n"
    "    bar.sync 0;\n"
    "    xor.b32 %r5, %r3, 4;\n"
    "    add.s32 %r6, %r2, %r5;\n"
    "    ld.shared.f32 %f2, [%r6];\n"
    "    add.s64 %rd5, %rd1, %rd3;\n"
    "    st.global.f32 [%rd5], %f2;\n"
    "    ret;\n"
    "}\n";

/* A 256-byte local array indexed by %tid: a stack frame without spills. */
static const char k_local[] =
    ".visible .entry k(.param .u64 p_out)\n"
    "{\n"
    "    .local .align 4 .b8 arr[256];\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<8>;\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    and.b32 %r2, %r1, 63;\n"
    "    shl.b32 %r3, %r2, 2;\n"
    "    mov.u64 %rd1, arr;\n"
    "    cvt.u64.u32 %rd2, %r3;\n"
    "    add.s64 %rd3, %rd1, %rd2;\n"
    "    st.local.u32 [%rd3], %r1;\n"
    "    xor.b32 %r4, %r3, 4;\n"
    "    cvt.u64.u32 %rd4, %r4;\n"
    "    add.s64 %rd5, %rd1, %rd4;\n"
    "    ld.local.u32 %r5, [%rd5];\n"
    "    ld.param.u64 %rd6, [p_out];\n"
    "    st.global.u32 [%rd6], %r5;\n"
    "    ret;\n"
    "}\n";

/* 48 volatile loads all live before 48 volatile stores, under .maxnreg 24
 * (ptxas's lower bound; 16 would be raised to 24 with a warning). */
static void spill_body(char *buf, size_t n)
{
    enum { NV = 48 };
    size_t at = (size_t)snprintf(buf, n,
                                 ".visible .entry k(.param .u64 p_out, .param .u64 p_in) "
                                 ".maxnreg 24\n{\n    .reg .b64 %%rd<4>;\n"
                                 "    .reg .f32 %%f<%d>;\n"
                                 "    ld.param.u64 %%rd1, [p_out];\n"
                                 "    ld.param.u64 %%rd2, [p_in];\n",
                                 NV);
    for (int i = 0; i < NV; i++)
        at += (size_t)snprintf(buf + at, n - at,
                               "    ld.volatile.global.f32 %%f%d, [%%rd2+%d];\n", i, 4 * i);
    for (int i = 0; i < NV; i++)
        at += (size_t)snprintf(buf + at, n - at,
                               "    st.volatile.global.f32 [%%rd1+%d], %%f%d;\n", 4 * i,
                               NV - 1 - i);
    snprintf(buf + at, n - at, "    ret;\n}\n");
}

static bool has_code(const pt_resource *r, const char *code)
{
    for (int i = 0; i < r->ncodes; i++)
        if (strcmp(r->codes[i], code) == 0)
            return true;
    return false;
}

Test(compile, valid_kernel_every_target_both_backends)
{
    pt_compiler *c = open_or_skip();
    const pt_target *ts;
    int nt = pt_target_list(&ts);
    int tested = 0;
    for (int b = 0; b < NBACKENDS; b++) {
        if (!use_backend(c, backends[b]))
            continue;
        tested++;
        for (int i = 0; i < nt; i++) {
            char ptx[4096], name[16];
            ptx_for(ptx, sizeof ptx, &ts[i], k_ok);
            pt_target_name(&ts[i], name, sizeof name);
            const char *who = pt_compiler_describe(c);
            void *cubin = NULL;
            size_t size = 0;
            pt_resource r;
            pt_err e = {0};
            int rc = pt_compile(c, ptx, &ts[i], &cubin, &size, &r, &e);
            cr_assert_eq(rc, PT_OK, "%s %s: %s", who, name, e.msg);
            cr_assert(cubin && size > 64 && memcmp(cubin, "\177ELF", 4) == 0, "%s %s: no ELF",
                      who, name);
            cr_expect_gt(r.registers, 0, "%s %s", who, name);
            cr_expect_eq(r.spill_stores, 0, "%s %s", who, name);
            cr_expect_eq(r.spill_loads, 0, "%s %s", who, name);
            cr_expect_eq(r.stack_frame, 0, "%s %s", who, name);
            cr_expect_eq(r.shared_bytes, 1024, "%s %s: smem %d", who, name, r.shared_bytes);
            cr_expect_eq(r.barriers, 1, "%s %s", who, name);
            cr_expect_gt(r.const_bytes, 0, "%s %s: cmem[0] %d", who, name, r.const_bytes);
            cr_expect_eq(r.nwarnings, 0, "%s %s", who, name);
            cr_expect_eq(r.ncodes, 0, "%s %s", who, name);
            cr_expect_gt(r.compile_ms, 0.0, "%s %s", who, name);
            cr_expect_str_eq(r.backend, backends[b] == PT_BACKEND_PTXAS ? "ptxas" : "nvJitLink");
            free(cubin);
        }
    }
    skip_if_none(c, tested);
    pt_compiler_close(c);
}

Test(compile, spills_and_local_memory_reported)
{
    pt_compiler *c = open_or_skip();
    const pt_target *ts;
    int nt = pt_target_list(&ts);
    char body[8192];
    spill_body(body, sizeof body);
    int tested = 0;
    for (int b = 0; b < NBACKENDS; b++) {
        if (!use_backend(c, backends[b]))
            continue;
        tested++;
        for (int i = 0; i < nt; i++) {
            char ptx[10240], name[16];
            const char *who = pt_compiler_describe(c);
            pt_target_name(&ts[i], name, sizeof name);
            pt_resource r;
            pt_err e = {0};

            ptx_for(ptx, sizeof ptx, &ts[i], body);
            cr_assert_eq(pt_compile(c, ptx, &ts[i], NULL, NULL, &r, &e), PT_OK, "%s %s: %s",
                         who, name, e.msg);
            cr_expect_gt(r.spill_stores, 0, "%s %s: spill stores", who, name);
            cr_expect_gt(r.spill_loads, 0, "%s %s: spill loads", who, name);
            cr_expect_geq(r.stack_frame, r.spill_stores, "%s %s", who, name);
            cr_expect_leq(r.registers, 24, "%s %s: %d registers", who, name, r.registers);
            cr_expect_eq(r.nwarnings, 0, "%s %s", who, name);

            ptx_for(ptx, sizeof ptx, &ts[i], k_local);
            cr_assert_eq(pt_compile(c, ptx, &ts[i], NULL, NULL, &r, &e), PT_OK, "%s %s: %s",
                         who, name, e.msg);
            cr_expect_geq(r.stack_frame, 256, "%s %s: stack %d", who, name, r.stack_frame);
            cr_expect_eq(r.spill_stores, 0, "%s %s", who, name);
            cr_expect_eq(r.barriers, 0, "%s %s", who, name);
            cr_expect_eq(r.shared_bytes, 0, "%s %s", who, name);
        }
    }
    skip_if_none(c, tested);
    pt_compiler_close(c);
}

Test(compile, error_names_the_ptx_line)
{
    static const char bad[] = ".visible .entry k(.param .u64 p_out)\n" /* line 5 */
                              "{\n"
                              "    .reg .b32 %r<8>;\n"
                              "    mov.u32 %r1, %tid.x;\n"
                              "    add.s32 %r2, %r99, 1;\n" /* line 9 */
                              "    ret;\n"
                              "}\n";
    pt_compiler *c = open_or_skip();
    pt_target t;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_80", &t, &e), PT_OK);
    char ptx[2048];
    ptx_for(ptx, sizeof ptx, &t, bad);
    int tested = 0;
    for (int b = 0; b < NBACKENDS; b++) {
        if (!use_backend(c, backends[b]))
            continue;
        tested++;
        void *cubin = (void *)1;
        pt_resource r;
        pt_err_clear(&e);
        cr_assert_eq(pt_compile(c, ptx, &t, &cubin, NULL, &r, &e), PT_ECOMPILE, "%s: %s",
                     pt_compiler_describe(c), e.msg);
        cr_expect_null(cubin);
        cr_expect(strncmp(e.msg, "compile error at PTX line 9: ", 29) == 0, "%s", e.msg);
        cr_expect(strstr(e.msg, "'%r99'") || strstr(e.msg, "'add'"), "%s", e.msg);
        cr_expect(strstr(e.msg, " | add.s32 %r2, %r99, 1;") != NULL, "%s", e.msg);
        cr_expect(strchr(e.msg, '\n') == NULL);
    }
    skip_if_none(c, tested);
    pt_compiler_close(c);
}

Test(compile, error_without_line_and_bad_version)
{
    static const char ext[] = ".extern .func foo();\n"
                              ".visible .entry k()\n"
                              "{\n"
                              "    call foo;\n"
                              "    ret;\n"
                              "}\n";
    pt_compiler *c = open_or_skip();
    pt_target t;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_80", &t, &e), PT_OK);
    char ptx[2048];
    ptx_for(ptx, sizeof ptx, &t, ext);
    int tested = 0;
    for (int b = 0; b < NBACKENDS; b++) {
        if (!use_backend(c, backends[b]))
            continue;
        tested++;
        pt_err_clear(&e);
        cr_assert_eq(pt_compile(c, ptx, &t, NULL, NULL, NULL, &e), PT_ECOMPILE, "%s: %s",
                     pt_compiler_describe(c), e.msg);
        cr_expect(strstr(e.msg, "'foo'") != NULL, "%s: %s", pt_compiler_describe(c), e.msg);

        /* one past what the compiler accepts: a fatal on line 1 */
        char ver[8], hdr[64];
        int too_new = pt_compiler_max_ptx(c) + 1;
        snprintf(hdr, sizeof hdr, ".version %s\n", pt_ptx_version_str(too_new, ver, sizeof ver));
        snprintf(ptx, sizeof ptx, "%s.target sm_80\n.address_size 64\n\n%s", hdr, k_ok);
        pt_err_clear(&e);
        cr_assert_eq(pt_compile(c, ptx, &t, NULL, NULL, NULL, &e), PT_ECOMPILE, "%s",
                     pt_compiler_describe(c));
        cr_expect(strstr(e.msg, "PTX line 1:") && strstr(e.msg, "| .version"), "%s", e.msg);
        ptx_for(ptx, sizeof ptx, &t, ext);
    }
    skip_if_none(c, tested);
    pt_compiler_close(c);
}

Test(compile, warnings_and_codes)
{
    /* .minnctapersm without .maxntid: "ptxas x.ptx, line 10; warning : ..." (no code) */
    static const char minncta[] = ".visible .entry k(.param .u64 p_out) .minnctapersm 4\n"
                                  "{\n"
                                  "    .reg .b32 %r<8>;\n"
                                  "    mov.u32 %r1, %tid.x;\n"
                                  "    ret;\n"
                                  "}\n";
    /* .maxnreg below the floor: "ptxas warning : For entry k adjusting ..." */
    static const char maxnreg[] = ".visible .entry k(.param .u64 p_out) .maxnreg 16\n"
                                  "{\n"
                                  "    .reg .b32 %r<8>;\n"
                                  "    mov.u32 %r1, %tid.x;\n"
                                  "    ret;\n"
                                  "}\n";
    /* setmaxnreg with no known count at entry: "ptxas info : (C75xx) Potential
     * Performance Loss: 'setmaxnreg' ignored ..." */
    static const char setmaxnreg[] = ".visible .entry k(.param .u64 p_out)\n"
                                     "{\n"
                                     "    .reg .b32 %r<8>;\n"
                                     "    mov.u32 %r1, %tid.x;\n"
                                     "    setmaxnreg.inc.sync.aligned.u32 240;\n"
                                     "    ret;\n"
                                     "}\n";
    static const char setmaxnreg_ok[] = ".visible .entry k(.param .u64 p_out) "
                                        ".maxntid 256, 1, 1 .maxnreg 128\n"
                                        "{\n"
                                        "    .reg .b32 %r<8>;\n"
                                        "    mov.u32 %r1, %tid.x;\n"
                                        "    setmaxnreg.inc.sync.aligned.u32 160;\n"
                                        "    ret;\n"
                                        "}\n";
    pt_compiler *c = open_or_skip();
    pt_compiler_allow_codes(c, true); /* reported, not a failure (see perf_codes_fail) */
    pt_target t80, t90a;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_80", &t80, &e), PT_OK);
    cr_assert_eq(pt_target_parse("sm_90a", &t90a, &e), PT_OK);
    int tested = 0;
    for (int b = 0; b < NBACKENDS; b++) {
        if (!use_backend(c, backends[b]))
            continue;
        tested++;
        const char *who = pt_compiler_describe(c);
        char ptx[2048];
        pt_resource r;

        ptx_for(ptx, sizeof ptx, &t80, minncta);
        cr_assert_eq(pt_compile(c, ptx, &t80, NULL, NULL, &r, &e), PT_OK, "%s", e.msg);
        cr_expect_eq(r.nwarnings, 1, "%s: .minnctapersm warnings %d", who, r.nwarnings);

        ptx_for(ptx, sizeof ptx, &t80, maxnreg);
        cr_assert_eq(pt_compile(c, ptx, &t80, NULL, NULL, &r, &e), PT_OK, "%s", e.msg);
        cr_expect_eq(r.nwarnings, 1, "%s: .maxnreg warnings %d", who, r.nwarnings);

        ptx_for(ptx, sizeof ptx, &t90a, setmaxnreg);
        cr_assert_eq(pt_compile(c, ptx, &t90a, NULL, NULL, &r, &e), PT_OK, "%s", e.msg);
        /* ptxas says C7508 (no count at entry); nvJitLink compiles for linking
         * and says C7504 (compatibility across compilation units) */
        const char *want = backends[b] == PT_BACKEND_PTXAS ? "C7508" : "C7504";
        cr_expect(has_code(&r, want), "%s: want %s, got %d codes (%s)", who, want, r.ncodes,
                  r.ncodes ? r.codes[0] : "-");
        cr_expect_eq(r.ncodes, 1, "%s", who);
        cr_expect_eq(r.nwarnings, 0, "%s: an info line is no warning", who);

        pt_buf j;
        pt_buf_init(&j);
        pt_resource_json(&r, &j);
        char quoted[16];
        snprintf(quoted, sizeof quoted, "[\"%s\"]", want);
        cr_expect(strstr(j.s, quoted) != NULL, "%s", j.s);
        pt_buf_free(&j);

        /* with .maxnreg ptxas honours setmaxnreg (the count is the one asked
         * for); nvJitLink compiles relocatable code (ptxas -c) and still
         * ignores it: a thing the tuner must know about warp-specialized code */
        ptx_for(ptx, sizeof ptx, &t90a, setmaxnreg_ok);
        cr_assert_eq(pt_compile(c, ptx, &t90a, NULL, NULL, &r, &e), PT_OK, "%s", e.msg);
        if (backends[b] == PT_BACKEND_PTXAS) {
            cr_expect_eq(r.ncodes, 0, "%s: %s", who, r.ncodes ? r.codes[0] : "-");
            cr_expect_eq(r.registers, 128, "%s", who);
        } else {
            cr_expect(has_code(&r, "C7504"), "%s", who);
        }
    }
    skip_if_none(c, tested);
    pt_compiler_close(c);
}

Test(compile, max_ptx_and_describe)
{
    pt_compiler *c = open_or_skip();
    int tested = 0;
    for (int b = 0; b < NBACKENDS; b++) {
        if (!use_backend(c, backends[b]))
            continue;
        tested++;
        const char *d = pt_compiler_describe(c);
        const char *prefix = backends[b] == PT_BACKEND_PTXAS ? "ptxas " : "nvJitLink ";
        cr_expect(strncmp(d, prefix, strlen(prefix)) == 0, "%s", d);
        cr_expect_eq(pt_compiler_backend(c), backends[b]);
        int major = 0, minor = 0;
        cr_assert_eq(sscanf(d + strlen(prefix), "%d.%d", &major, &minor), 2, "%s", d);
        if (major == 13 && minor == 0)
            cr_expect_eq(pt_compiler_max_ptx(c), 90, "%s", d);
        else
            cr_expect_eq(pt_compiler_max_ptx(c), pt_ptx_for_cuda(major * 1000 + minor * 10),
                         "%s", d);
    }
    skip_if_none(c, tested);
    pt_err e = {0};
    cr_assert_eq(pt_compiler_set_backend(c, PT_BACKEND_AUTO, &e), PT_OK, "%s", e.msg);
    cr_expect_neq(pt_compiler_backend(c), PT_BACKEND_AUTO);
    pt_compiler_close(c);
}

/* The ptxas backend leaves nothing in TMPDIR, on success or failure. */
Test(compile, ptxas_cleans_temp_files)
{
    pt_compiler *c = open_or_skip();
    skip_if_none(c, use_backend(c, PT_BACKEND_PTXAS));
    char dir[] = "/tmp/test_compile-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    setenv("TMPDIR", dir, 1);
    pt_target t;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_86", &t, &e), PT_OK);
    char ptx[4096];
    ptx_for(ptx, sizeof ptx, &t, k_ok);
    cr_expect_eq(pt_compile(c, ptx, &t, NULL, NULL, NULL, &e), PT_OK, "%s", e.msg);
    ptx_for(ptx, sizeof ptx, &t, "garbage\n");
    pt_err_clear(&e);
    cr_expect_eq(pt_compile(c, ptx, &t, NULL, NULL, NULL, &e), PT_ECOMPILE);
    int left = 0;
    DIR *d = opendir(dir);
    cr_assert(d != NULL);
    for (struct dirent *de; (de = readdir(d));)
        left += de->d_name[0] != '.';
    closedir(d);
    rmdir(dir);
    cr_expect_eq(left, 0, "%d entries left in %s", left, dir);
    pt_compiler_close(c);
}

/* Needs no toolkit. */
Test(compile, resource_json_shape)
{
    pt_resource r = {.registers = 26, .spill_stores = 8, .spill_loads = 4, .stack_frame = 16,
                     .shared_bytes = 768, .const_bytes = 380, .barriers = 1, .compile_ms = 12.5,
                     .ncodes = 2, .codes = {"C7508", "C7515"}, .nwarnings = 1,
                     .backend = "ptxas"};
    pt_buf b;
    pt_buf_init(&b);
    cr_assert_eq(pt_resource_json(&r, &b), PT_OK);
    cr_expect_str_eq(b.s, "{\"backend\":\"ptxas\",\"registers\":26,\"spill_stores\":8,"
                          "\"spill_loads\":4,\"stack_frame\":16,\"shared_bytes\":768,"
                          "\"const_bytes\":380,\"barriers\":1,\"compile_ms\":12.500,"
                          "\"nwarnings\":1,\"codes\":[\"C7508\",\"C7515\"]}");
    pt_buf_free(&b);
    r.const_bytes = -1;
    r.ncodes = 0;
    pt_resource_json(&r, &b);
    cr_expect(strstr(b.s, "\"const_bytes\":null,") != NULL, "%s", b.s);
    cr_expect(strstr(b.s, "\"codes\":[]}") != NULL, "%s", b.s);
    pt_buf_free(&b);
}

/* Needs no toolkit. */
Test(compile, null_arguments_are_einval)
{
    pt_target t = {80, false, false};
    pt_err e = {0};
    void *cubin = (void *)1;
    cr_expect_eq(pt_compile(NULL, ".version 9.0\n", &t, &cubin, NULL, NULL, &e), PT_EINVAL);
    cr_expect_null(cubin);
    cr_expect_eq(e.code, PT_EINVAL);
}

/* ---- issue 12 item 1: C75xx codes are compile failures; sm_90a goes to ptxas ---- */

/* The FA3 intra-warpgroup overlap loop of the design's probes
 * (attention_hopper_probes.sh section 2): S = Q K^T (SS) and O += P V (RS)
 * in flight together. Without a pragma ptxas unrolls it and serialises the
 * wgmmas (C7511); with `.pragma "nounroll";` at the loop head it does not.
 * Reading S before its group retires gives C7517 instead. */
static void overlap_loop(char *buf, size_t n, const char *pragma, const char *wait1)
{
    char S[512], O[512];
    size_t a = 0, b = 0;
    for (int i = 0; i < 32; i++) {
        a += (size_t)snprintf(S + a, sizeof S - a, "%s%%s%d", i ? "," : "{", i);
        b += (size_t)snprintf(O + b, sizeof O - b, "%s%%o%d", i ? "," : "{", i);
    }
    snprintf(S + a, sizeof S - a, "}");
    snprintf(O + b, sizeof O - b, "}");
    snprintf(buf, n,
             ".version 8.0\n.target sm_90a\n.address_size 64\n"
             ".visible .entry k(.param .u64 p) .maxntid 128,1,1 {\n"
             "  .reg .f32 %%s<32>; .reg .f32 %%o<32>; .reg .b32 %%a<4>; .reg .b64 %%rd<6>;\n"
             "  .reg .pred %%p<2>; .reg .f32 %%t<4>; .reg .b32 %%i;\n"
             "  ld.param.u64 %%rd1, [p];\n"
             "  mov.b64 %%rd2, 0x4000004000010000; mov.b64 %%rd3, 0x4000004000010040;\n"
             "  mov.b64 %%rd4, 0x4000004000010080;\n"
             "  ld.global.v4.b32 {%%a0,%%a1,%%a2,%%a3}, [%%rd1];\n"
             "  mov.u32 %%i, 0;\n"
             "  wgmma.fence.sync.aligned;\n"
             "  wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 %s, {%%a0,%%a1,%%a2,%%a3}, %%rd4, 0, 1, 1, 1;\n"
             "  wgmma.commit_group.sync.aligned;\n"
             "LOOP:\n  %s\n"
             "  wgmma.fence.sync.aligned;\n"
             "  wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 %s, %%rd2, %%rd3, 0, 1, 1, 0, 0;\n"
             "  wgmma.commit_group.sync.aligned;\n"
             "  wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 %s, {%%a0,%%a1,%%a2,%%a3}, %%rd4, 1, 1, 1, 1;\n"
             "  wgmma.commit_group.sync.aligned;\n"
             "  %s\n"
             "  max.f32 %%t0, %%s0, %%s1; max.f32 %%t1, %%s2, %%s31; max.f32 %%t0, %%t0, %%t1;\n"
             "  wgmma.wait_group.sync.aligned 0;\n"
             "  cvt.rn.bf16x2.f32 %%a0, %%s1, %%s0; cvt.rn.bf16x2.f32 %%a1, %%s3, %%s2;\n"
             "  mul.f32 %%o0, %%o0, %%t0;\n"
             "  add.u32 %%i, %%i, 1; setp.lt.u32 %%p1, %%i, 8; @%%p1 bra LOOP;\n"
             "  st.global.f32 [%%rd1], %%o0; st.global.f32 [%%rd1+4], %%o31; st.global.f32 [%%rd1+8], %%t0;\n"
             "  ret;\n}\n",
             O, pragma, S, O, wait1);
}

/* The gate's verdict on text for sm_90a with the default backend choice:
 * PT_OK, or the message in e. */
static int gate(pt_compiler *c, const char *text, pt_resource *r, pt_err *e)
{
    pt_target t;
    cr_assert_eq(pt_target_parse("sm_90a", &t, e), PT_OK);
    pt_err_clear(e);
    return pt_compile(c, text, &t, NULL, NULL, r, e);
}

Test(compile, perf_codes_fail, .timeout = 120)
{
    pt_compiler *c = open_or_skip();
    pt_err e = {0};
    if (pt_compiler_set_backend(c, PT_BACKEND_PTXAS, &e) != PT_OK) {
        pt_compiler_close(c);
        cr_skip_test("no ptxas: %s", e.msg);
    }
    pt_compiler_set_backend(c, PT_BACKEND_AUTO, &e);
    char text[8192];
    pt_resource r;
    /* C7511: serialised for lack of registers (the unrolled overlap loop) */
    overlap_loop(text, sizeof text, "", "wgmma.wait_group.sync.aligned 1;");
    cr_expect_eq(gate(c, text, &r, &e), PT_ECOMPILE, "C7511 kernel passed the gate");
    cr_expect(strstr(e.msg, "C7511") && strstr(e.msg, "serialized"), "%s", e.msg);
    cr_expect(strstr(e.msg, "compile failure"), "%s", e.msg);
    cr_expect_str_eq(r.backend, "ptxas", "sm_90a goes to ptxas");
    /* the same loop with .pragma "nounroll"; at its head: clean */
    overlap_loop(text, sizeof text, ".pragma \"nounroll\";", "wgmma.wait_group.sync.aligned 1;");
    cr_expect_eq(gate(c, text, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.ncodes, 0, "%s", r.ncodes ? r.codes[0] : "");
    /* C7517: S read before the group that writes it retires */
    overlap_loop(text, sizeof text, ".pragma \"nounroll\";", "");
    cr_expect_eq(gate(c, text, &r, &e), PT_ECOMPILE);
    cr_expect(strstr(e.msg, "C7517") && strstr(e.msg, "warpgroup.wait is injected"), "%s", e.msg);
    /* C7508: setmaxnreg with no register count at entry */
    static const char smr[] = ".version 8.0\n.target sm_90a\n.address_size 64\n"
                              ".visible .entry k(.param .u64 p_out)\n{\n"
                              "    setmaxnreg.inc.sync.aligned.u32 240;\n    ret;\n}\n";
    cr_expect_eq(gate(c, smr, &r, &e), PT_ECOMPILE);
    cr_expect(strstr(e.msg, "C7508") && strstr(e.msg, "'setmaxnreg' ignored"), "%s", e.msg);
    cr_expect(has_code(&r, "C7508"), "the report still lists the code");
    /* allowed: the same kernels pass and report their codes */
    pt_compiler_allow_codes(c, true);
    cr_expect_eq(gate(c, smr, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(has_code(&r, "C7508"));
    overlap_loop(text, sizeof text, "", "wgmma.wait_group.sync.aligned 1;");
    cr_expect_eq(gate(c, text, &r, &e), PT_OK, "%s", e.msg);
    cr_expect(has_code(&r, "C7511"));
    pt_compiler_close(c);
}

/* A backend asked for by name is kept for sm_90a (nvJitLink: C7504, which
 * the gate also fails on). */
Test(compile, chosen_backend_is_kept_for_sm90a)
{
    pt_compiler *c = open_or_skip();
    pt_err e = {0};
    if (pt_compiler_set_backend(c, PT_BACKEND_NVJITLINK, &e) != PT_OK) {
        pt_compiler_close(c);
        cr_skip_test("no nvJitLink: %s", e.msg);
    }
    static const char smr[] = ".version 8.0\n.target sm_90a\n.address_size 64\n"
                              ".visible .entry k(.param .u64 p_out) .maxntid 256, 1, 1 .maxnreg 128\n{\n"
                              "    setmaxnreg.inc.sync.aligned.u32 160;\n    ret;\n}\n";
    pt_resource r;
    cr_expect_eq(gate(c, smr, &r, &e), PT_ECOMPILE);
    cr_expect(strstr(e.msg, "C7504"), "%s", e.msg);
    cr_expect_str_eq(r.backend, "nvJitLink");
    pt_compiler_set_backend(c, PT_BACKEND_AUTO, &e);
    cr_expect_eq(gate(c, smr, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(r.backend, "ptxas");
    pt_compiler_close(c);
}
