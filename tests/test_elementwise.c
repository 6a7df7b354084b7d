/* The elementwise family: every config of the space assembles without
 * spills on every claimed arch, structural properties of the emitted PTX,
 * golden files, and bad input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_space.h"
#include "test_util.h"
#include "gen/elementwise.h"
#include "gen/op.h"
#include "ptx/compile.h"
#include "ptx/ir.h"
#include "ptx/parse.h"


/* The six families the issue names, at small but real shapes. */
static const pt_problem cases[] = {
    PT_EW("y = softmax(x * 0.125, -1)", "x=64x1024", PT_BF16, PT_BF16),
    PT_EW("y = layernorm(x + r, -1) * g + b", "x=32x768,r=32x768,g=768,b=768", PT_F16, PT_F16),
    PT_EW("y = x * rsqrt(mean(x*x, -1) + 1e-6) * g", "x=16x4096,g=4096", PT_F32, PT_F32),
    PT_EW("y = gelu(x * w + b)", "x=128x512,w=512,b=512", PT_BF16, PT_BF16),
    PT_EW("h = x + r; y = rmsnorm(h, -1) * g", "x=8x2048,r=8x2048,g=2048", PT_BF16, PT_BF16),
    PT_EW("y = silu(x) * u + where(b > 0, b, 0.5 * b)", "x=4x8x96,u=4x8x96,b=8x1", PT_F32, PT_F32),
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* every target the op claims: ptx/target.h's "all" (runnable, not
 * arch-specific) */
#define ARCH_NAME(n) n,
static const char *const archs[] = {PT_TARGET_ALL_MAP(ARCH_NAME)};
enum { NARCHS = sizeof archs / sizeof archs[0] };

Test(elementwise, every_variant_assembles_without_spills, .timeout = 900)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    test_space_tally t = test_assemble_space(&gen_elementwise_op, cases, NCASES, archs, NARCHS, comp);
    /* local memory counts as a failure here */
    printf("elementwise: %d variants of %d expressions assembled for" PT_TARGET_ALL_NAMES
           " with %s: %d failures, %d with spills\n",
           t.variants, NCASES, pt_compiler_describe(comp), t.failures + t.local, t.spills);
    pt_compiler_close(comp);
    cr_assert(t.variants > 500, "only %d variants", t.variants);
    cr_assert(t.failures + t.local == 0 && t.spills == 0, "%d failures, %d spills; first: %s",
              t.failures + t.local, t.spills, t.first);
}

/* Emits one variant's text (config over the defaults); NULL + e on error. */
static char *emit_text(const pt_problem *p, const char *arch, const char *config, pt_err *e)
{
    pt_target t;
    if (pt_target_parse(arch, &t, e))
        return NULL;
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    char *text = NULL;
    if (gen_elementwise_op.prepare(a, p, &t, &pp, e) == 0) {
        pt_space s;
        pt_config c;
        gen_elementwise_op.space(pp, &t, &s);
        gen_elementwise_op.defaults(pp, &t, &c);
        ptx_module *m;
        pt_launch l;
        if (pt_config_parse(&s, config, &c, e) == 0 &&
            pt_op_build(&gen_elementwise_op, pp, &t, 90, &c, &m, &l, e) == 0) {
            text = ptx_print(m);
            ptx_module_free(m);
        }
    }
    pt_arena_free(a);
    return text;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(elementwise, bf16_vec8_uses_16_byte_accesses)
{
    pt_problem p = cases[3];
    pt_err e = {0};
    char *t = emit_text(&p, "sm_80", "vec=8,unroll=1", &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(count(t, "ld.global.nc.v4.b32"), 3, "x, w, b each one 16-byte load:\n%s", t);
    cr_expect_eq(count(t, "st.global.v4.b32"), 1);
    cr_expect_eq(count(t, "ld.local") + count(t, "st.local"), 0);
    free(t);
    /* vec=1: no vector access at all */
    t = emit_text(&p, "sm_80", "vec=1", &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(count(t, ".v4.") + count(t, ".v2."), 0);
    free(t);
    /* a reduction with vec=8 too */
    p = cases[0];
    t = emit_text(&p, "sm_80", "vec=8,wpr=4,cache=1", &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_gt(count(t, "ld.global.nc.v4.b32"), 0);
    cr_expect_gt(count(t, "st.global.v4.b32"), 0);
    cr_expect_gt(count(t, "shfl.sync.bfly.b32"), 0);
    cr_expect_gt(count(t, "bar.sync 0"), 0, "wpr=4 reduces through shared memory");
    free(t);
}

Test(elementwise, online_softmax_is_one_pass)
{
    pt_problem p = cases[0];
    pt_err e = {0};
    /* cache=0: each pass re-reads the row, so loads count the passes */
    char *one = emit_text(&p, "sm_80", "vec=8,wpr=1,cache=0,online=1", &e);
    char *two = emit_text(&p, "sm_80", "vec=8,wpr=1,cache=0,online=0", &e);
    cr_assert(one && two, "%s", e.msg);
    cr_expect_eq(count(one, "ld.global.nc.v4.b32"), 2, "online: stats pass + output pass");
    cr_expect_eq(count(two, "ld.global.nc.v4.b32"), 3, "max pass + sum pass + output pass");
    free(one);
    free(two);
}

Test(elementwise, index_width_follows_the_shape)
{
    pt_problem small = PT_EW("y = x * 2", "x=1024x1024", PT_F16, PT_F16);
    pt_problem big = PT_EW("y = x * 2", "x=65536x65536", PT_F16, PT_F16);
    pt_err e = {0};
    char *a = emit_text(&small, "sm_80", "vec=8", &e);
    char *b = emit_text(&big, "sm_80", "vec=8", &e);
    cr_assert(a && b, "%s", e.msg);
    cr_expect(strstr(a, "mul.wide.u32"), "32-bit indices widen once per address");
    cr_expect(!strstr(a, "mul.lo.u64"));
    cr_expect(strstr(b, "mul.lo.u64"), "2^32 elements need 64-bit indices");
    free(a);
    free(b);
}

Test(elementwise, fp8_output_needs_sm89)
{
    pt_problem p = PT_EW("y = x * 2", "x=64x64", PT_F16, PT_E4M3);
    pt_err e = {0};
    char *t = emit_text(&p, "sm_80", "", &e);
    cr_assert_null(t);
    cr_expect_str_eq(e.msg, "dtype e4m3 needs sm_89; target is sm_80");
    pt_err_clear(&e);
    t = emit_text(&p, "sm_89", "vec=8", &e);
    cr_assert(t, "%s", e.msg);
    cr_expect(strstr(t, "cvt.rn.satfinite.e4m3x2.f32"));
    cr_expect(strstr(t, ".version 8.1"), "fp8 cvt needs PTX 8.1");
    free(t);
}

Test(elementwise, bad_input_names_the_value)
{
    static const struct {
        pt_problem p;
        const char *arch, *config, *msg;
    } bad[] = {
        {PT_EW("", "x=4", PT_F32, PT_F32), "sm_80", "", "empty expression"},
        {PT_EW("y = gelo(x)", "x=4", PT_F32, PT_F32), "sm_80", "",
         "unknown function 'gelo' at column 5"},
        {PT_EW("y = x + w", "x=4x8,w=7", PT_F32, PT_F32), "sm_80", "", "cannot broadcast"},
        {PT_EW("y = x", "x=0x8", PT_F32, PT_F32), "sm_80", "", "bad dimension '0'"},
        {PT_EW("y = x", "x=-3x8", PT_F32, PT_F32), "sm_80", "", "-3"},
        {PT_EW("y = x", "x=4x8", PT_F32, PT_F32), "sm_70", "", "unknown arch 'sm_70'"},
        {PT_EW("y = x", "x=4x8", PT_F32, PT_F32), "sm_99", "", "unknown arch 'sm_99'"},
        {PT_EW("y = x", "x=4x8", PT_S32, PT_S32), "sm_80", "", "dtype 's32'"},
        {PT_EW("y = x", "x=4x8", PT_F32, PT_E5M2), "sm_80", "", "e5m2 needs sm_89"},
        {PT_EW("y = x", "x=4x8", PT_F32, PT_F32), "sm_80", "vec=3", "vec=3"},
        {PT_EW("y = x", "x=4x8", PT_F32, PT_F32), "sm_80", "tpb=100", "tpb=100"},
        {PT_EW("y = x", "x=4x8", PT_F32, PT_F32), "sm_80", "frob=1", "unknown config key 'frob'"},
        {PT_EW("y = softmax(x, -1)", "x=4x6", PT_F32, PT_F32), "sm_80", "vec=4",
         "vec=4 does not divide the row length 6"},
        /* like --out-dtype e4m3 on sm_80 (issue 9, consistency) */
        {PT_EW("y = cast(x, e4m3)", "x=4x8", PT_F32, PT_F32), "sm_80", "",
         "cast to e4m3 needs sm_89; target is sm_80"},
        {PT_EW("y = softmax(x, -1) + cast(x * 2, e5m2)", "x=4x8", PT_BF16, PT_BF16), "sm_86", "",
         "cast to e5m2 needs sm_89; target is sm_86"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_err e = {0};
        char *t = emit_text(&bad[i].p, bad[i].arch, bad[i].config, &e);
        cr_expect_null(t, "case %zu emitted", i);
        cr_expect(e.code != PT_OK, "case %zu", i);
        cr_expect(strstr(e.msg, bad[i].msg), "case %zu: '%s' lacks '%s'", i, e.msg, bad[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line");
        free(t);
    }
}

Test(elementwise, emission_is_deterministic)
{
    pt_err e = {0};
    for (int i = 0; i < NCASES; i++) {
        char *a = emit_text(&cases[i], "sm_90", "", &e);
        char *b = emit_text(&cases[i], "sm_90", "", &e);
        cr_assert(a && b, "%s", e.msg);
        cr_expect_str_eq(a, b);
        free(a);
        free(b);
    }
}

/* Golden files: tests/golden/<name>.ptx. Regenerate with
 * PTXTUNE_REGEN_GOLDEN=1 meson test -C build test_elementwise (see README). */
static const struct {
    const char *name;
    pt_problem p;
    const char *arch, *config;
} golden[] = {
    {"softmax_bf16_sm80", PT_EW("y = softmax(x * 0.125, -1)", "x=8x256", PT_BF16, PT_BF16),
     "sm_80", "tpb=128,vec=8,wpr=1,cache=1,online=1,shape_imm=1"},
    {"layernorm_f16_sm90", PT_EW("y = layernorm(x + r, -1) * g + b", "x=4x512,r=4x512,g=512,b=512", PT_F16, PT_F16),
     "sm_90", "tpb=128,vec=4,wpr=2,cache=1,shape_imm=1"},
    {"rmsnorm_f32_runtime_sm86", PT_EW("h = x + r; y = rmsnorm(h, -1) * g", "x=16x1000,r=16x1000,g=1000", PT_F32, PT_F32),
     "sm_86", "tpb=256,vec=4,wpr=4,cache=0,shape_imm=0"},
    {"gelu_bf16_sm80", PT_EW("y = gelu(x * w + b)", "x=64x128,w=128,b=128", PT_BF16, PT_BF16),
     "sm_80", "tpb=128,vec=8,unroll=2,shape_imm=1"},
    {"broadcast_tail_f32_sm80", PT_EW("y = exp(x) * s", "x=3x5x7,s=1", PT_F32, PT_F32),
     "sm_80", "tpb=128,vec=4,unroll=1,shape_imm=1"},
    {"fp8_out_sm89", PT_EW("y = silu(x)", "x=32x64", PT_BF16, PT_E4M3),
     "sm_89", "tpb=128,vec=8,unroll=1,shape_imm=1"},
};

Test(elementwise, golden_files)
{
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        pt_err e = {0};
        char *t = emit_text(&golden[i].p, golden[i].arch, golden[i].config, &e);
        cr_assert(t, "%s: %s", golden[i].name, e.msg);
        test_golden(golden[i].name, t);
        free(t);
    }
}

/* sm_90a, and the assemble-only targets sm_100a / sm_120: each family's
 * default variant assembles. */
Test(elementwise, defaults_assemble_on_newer_targets, .timeout = 300)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    const char *newer[] = {"sm_90a", "sm_100a", "sm_120"};
    int n = 0;
    for (int ai = 0; ai < 3; ai++)
        for (int ci = 0; ci < NCASES; ci++) {
            char *t = emit_text(&cases[ci], newer[ai], "", &e);
            cr_assert(t, "%s %s: %s", cases[ci].expr, newer[ai], e.msg);
            pt_target tg;
            pt_target_parse(newer[ai], &tg, &e);
            pt_resource r;
            cr_expect_eq(pt_compile(comp, t, &tg, NULL, NULL, &r, &e), PT_OK, "%s %s: %s",
                         cases[ci].expr, newer[ai], e.msg);
            cr_expect_eq(r.spill_stores + r.spill_loads, 0);
            free(t);
            n++;
        }
    printf("elementwise: %d default variants assembled for sm_90a sm_100a sm_120\n", n);
    pt_compiler_close(comp);
}

/* Issue 9 item 15: sizes at the limits (2^31, 2^32, 2^40, 2^48 elements;
 * 2^31 rows; broadcast products that overflow 64 bits). A problem is
 * refused in one line at prepare, or every config of its space is either
 * refused by check (one line) or builds a launch whose grid covers the
 * problem within 1..2^31-1 blocks; 32-bit index code has no immediate
 * past 32 bits; the default config is always valid. */
static bool big_immediate(const char *text)
{
    for (const char *q = text; *q; q++) {
        if (*q < '0' || *q > '9' || (q > text && (q[-1] == '%' || q[-1] == 'f' || q[-1] == 'x' ||
                                                   q[-1] == '_' || (q[-1] >= '0' && q[-1] <= '9') ||
                                                   (q[-1] >= 'a' && q[-1] <= 'z'))))
            continue;
        if (strtoull(q, NULL, 10) > 0xffffffffull)
            return true;
    }
    return false;
}

Test(elementwise, size_limits_are_checked, .timeout = 300)
{
    static const struct {
        pt_problem p;
        const char *refused; /* NULL: prepares */
    } big[] = {
        {PT_EW("y = x * w", "x=1099511627776x1,w=1099511627776", PT_F32, PT_F32),
         "broadcast shape 1099511627776x1099511627776 has more than 2^48 elements"},
        {PT_EW("y = x * w", "x=4294967296x1,w=4294967296", PT_F16, PT_F16),
         "broadcast shape 4294967296x4294967296 has more than 2^48 elements"},
        {PT_EW("y = x", "x=281474976710656", PT_F32, PT_F32), "shape too large"},
        {PT_EW("y = x * w", "x=16777216x1,w=16777216", PT_F32, PT_F32), "shape too large"},
        {PT_EW("y = softmax(x, -1)", "x=2147483648x2", PT_F16, PT_F16), "too many rows"},
        {PT_EW("y = x * 2", "x=1099511627776", PT_F32, PT_F32), NULL},
        {PT_EW("y = x * 2", "x=1099511627776", PT_F16, PT_F16), NULL},
        {PT_EW("y = x * 2 + b", "x=1048576x1048576,b=1048576x1", PT_F32, PT_F32), NULL},
        {PT_EW("y = x * 2", "x=4294967296", PT_F32, PT_F32), NULL},
        {PT_EW("y = x * 2", "x=2147483648", PT_BF16, PT_BF16), NULL},
        {PT_EW("y = x * 2", "x=2147483647", PT_F32, PT_F32), NULL},
        {PT_EW("y = exp(x) * s", "x=2147483647,s=1", PT_F32, PT_F32), NULL},
        {PT_EW("y = softmax(x, -1)", "x=2147483647x1", PT_F16, PT_F16), NULL},
        {PT_EW("y = softmax(x, -1)", "x=1073741824x4", PT_F32, PT_F32), NULL},
        {PT_EW("y = rmsnorm(x, -1) * g", "x=4x1073741824,g=1073741824", PT_F16, PT_F16), NULL},
        {PT_EW("y = layernorm(x, -1)", "x=1x2147483648", PT_F32, PT_F32), NULL},
    };
    pt_target t = {80, false, false};
    int built = 0, refused = 0;
    for (size_t ci = 0; ci < sizeof big / sizeof big[0]; ci++) {
        const pt_problem *p = &big[ci].p;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        pt_err e = {0};
        int rc = gen_elementwise_op.prepare(a, p, &t, &pp, &e);
        if (big[ci].refused) {
            cr_expect_neq(rc, PT_OK, "%s [%s] prepared", p->expr, p->shapes);
            cr_expect(strstr(e.msg, big[ci].refused), "%s [%s]: '%s'", p->expr, p->shapes, e.msg);
            cr_expect(!strchr(e.msg, '\n'));
            pt_arena_free(a);
            continue;
        }
        cr_assert_eq(rc, PT_OK, "%s [%s]: %s", p->expr, p->shapes, e.msg);
        const ex_prog *prog = gen_elementwise_prog(pp);
        int64_t numel = prog->rows * prog->cols;
        pt_config c;
        gen_elementwise_op.defaults(pp, &t, &c);
        char cs[256];
        cr_expect_eq(gen_elementwise_op.check(pp, &t, &c, &e), PT_OK, "%s [%s] default [%s]: %s",
                     p->expr, p->shapes, pt_config_str(&c, cs, sizeof cs), e.msg);
        pt_space s;
        gen_elementwise_op.space(pp, &t, &s);
        for (int64_t i = 0; i < pt_space_size(&s); i++) {
            pt_space_config(&s, i, &c);
            pt_config_str(&c, cs, sizeof cs);
            pt_err_clear(&e);
            if (gen_elementwise_op.check(pp, &t, &c, &e)) {
                cr_expect(!strchr(e.msg, '\n') && e.msg[0]);
                refused++;
                continue;
            }
            ptx_module *m;
            pt_launch l;
            cr_assert_eq(pt_op_build(&gen_elementwise_op, pp, &t, 90, &c, &m, &l, &e), PT_OK,
                         "%s [%s] [%s]: %s", p->expr, p->shapes, cs, e.msg);
            built++;
            cr_expect(l.grid[0] >= 1 && l.grid[0] <= 0x7fffffffu, "%s [%s] [%s]: grid %u", p->expr,
                      p->shapes, cs, l.grid[0]);
            int64_t covered = prog->has_reduction
                ? (int64_t)l.grid[0] * (l.block[0] / (32 * pt_config_get(&c, "wpr", 1)))
                : (int64_t)l.grid[0] * l.block[0] * pt_config_get(&c, "vec", 1) *
                      pt_config_get(&c, "unroll", 1);
            cr_expect_geq(covered, prog->has_reduction ? prog->rows : numel,
                          "%s [%s] [%s]: grid %u covers %lld", p->expr, p->shapes, cs, l.grid[0],
                          (long long)covered);
            char *text = ptx_print(m);
            bool wide = strstr(text, ".u64 %rd") && strstr(text, "mul.lo.u64");
            cr_expect(wide == (numel >= ((int64_t)1 << 31)), "%s [%s] [%s]: 64-bit indices %d",
                      p->expr, p->shapes, cs, wide);
            if (!wide)
                cr_expect(!big_immediate(text), "%s [%s] [%s]: an immediate past 32 bits", p->expr,
                          p->shapes, cs);
            free(text);
            ptx_module_free(m);
        }
        pt_arena_free(a);
    }
    printf("elementwise: %d configs at the size limits built, %d refused by check\n", built, refused);
    cr_expect_gt(built, 100);
}

/* Issue 9 item 3: the integer casts (cvt.rni.sat, min/max, cvt back) are
 * PTX that ptxas takes, flat and in a row kernel, on sm_80 and sm_90. */
Test(elementwise, integer_casts_assemble, .timeout = 300)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    static const char *const types[] = {"s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"};
    static const char *const on[] = {"sm_80", "sm_90"};
    int n = 0;
    for (int ti = 0; ti < 16; ti++)
        for (int ai = 0; ai < 2; ai++) {
            char expr[96];
            if (ti < 8) /* a row kernel: one cast per element, one under the row max */
                snprintf(expr, sizeof expr, "y = cast(x * 3, %s) + max(cast(x, %s), -1)", types[ti],
                         types[ti]);
            else /* flat */
                snprintf(expr, sizeof expr, "y = cast(x * 3, %s)", types[ti - 8]);
            pt_problem p = PT_EW(expr, "x=8x256", PT_F16, PT_F16);
            char *t = emit_text(&p, on[ai], "", &e);
            cr_assert(t, "%s %s: %s", expr, on[ai], e.msg);
            cr_expect(strstr(t, "cvt.rni.sat."), "%s", expr);
            pt_target tg;
            pt_target_parse(on[ai], &tg, &e);
            pt_resource r;
            cr_expect_eq(pt_compile(comp, t, &tg, NULL, NULL, &r, &e), PT_OK, "%s %s: %s", expr,
                         on[ai], e.msg);
            free(t);
            n++;
        }
    pt_compiler_close(comp);
    cr_expect_eq(n, 32);
}

/* Distinct address registers of the 16-byte global accesses in t, and how
 * many accesses there are. */
static int v4_bases(const char *t, int *naccess)
{
    char seen[64][16];
    int n = 0;
    *naccess = 0;
    for (const char *l = t; (l = strstr(l, ".global")); l++) {
        const char *eol = strchr(l, '\n');
        const char *v4 = strstr(l, ".v4.");
        const char *br = strchr(l, '[');
        if (!eol || !v4 || v4 > eol || !br || br > eol)
            continue;
        char r[16] = {0};
        for (int i = 0; i < 15 && br[1 + i] != ']' && br[1 + i] != '+'; i++)
            r[i] = br[1 + i];
        (*naccess)++;
        int k = 0;
        while (k < n && strcmp(seen[k], r))
            k++;
        if (k == n && n < 64)
            strcpy(seen[n++], r);
    }
    return n;
}

/* Issue 10 item 3: a softmax with the row cached computes exp once per
 * element (the sum's terms are kept for the output) and divides through
 * one reciprocal per row (no div.rn per element: MUFU.RCP + FCHK + a CALL
 * each in SASS). 4096 columns over 4 warps, vec 8: 32 elements a thread;
 * online=1 adds one rescale per thread. Before: 2 exps and a div.rn per
 * element. */
Test(elementwise, softmax_one_exp_per_element_and_one_reciprocal_per_row)
{
    pt_problem p = PT_EW("y = softmax(x, -1)", "x=16x4096", PT_BF16, PT_BF16);
    const char *cfg[] = {"tpb=128,vec=8,wpr=4,cache=1,online=1",
                         "tpb=128,vec=8,wpr=4,cache=1,online=0",
                         "tpb=128,vec=8,wpr=4,cache=0,online=1"};
    for (int i = 0; i < 3; i++) {
        pt_err e = {0};
        char *t = emit_text(&p, "sm_80", cfg[i], &e);
        cr_assert(t, "%s", e.msg);
        int ex2 = count(t, "ex2.approx");
        if (i < 2)
            cr_expect_leq(ex2, 32 + 1, "%s: %d exps for 32 elements", cfg[i], ex2);
        cr_expect_eq(count(t, "div.rn"), 0, "%s", cfg[i]);
        cr_expect_eq(count(t, "rcp."), 1, "%s: one reciprocal per row", cfg[i]);
        free(t);
    }
}

/* Issue 10 item 3: row kernels compute one pointer per tensor and row;
 * every 16-byte access of a cached row is that pointer plus an immediate
 * (ptxas folds it: no address arithmetic per access), and no general
 * division by the power-of-two group size. rmsnorm over 4096 bf16
 * columns: x and y 4 chunks each, the weight 4: 12 accesses, 3 bases.
 * The flat kernel too: 4 unrolled chunks of x and y, 2 bases. Before:
 * one mul.wide + add per access. */
Test(elementwise, accesses_are_a_pointer_plus_an_immediate)
{
    pt_problem p = PT_EW("y = rmsnorm(x, -1) * w", "x=16x4096,w=4096", PT_BF16, PT_BF16);
    pt_err e = {0};
    char *t = emit_text(&p, "sm_80", "tpb=256,vec=8,wpr=4,cache=1,shape_imm=1", &e);
    cr_assert(t, "%s", e.msg);
    int nacc, nb = v4_bases(t, &nacc);
    cr_expect_eq(nacc, 12, "%d 16-byte accesses", nacc);
    cr_expect_eq(nb, 3, "%d address registers for 12 accesses:\n%s", nb, t);
    cr_expect_eq(count(t, "div.u32") + count(t, "rem.u32"), 0);
    free(t);
    pt_problem g = PT_EW("y = gelu(x)", "x=128x512", PT_BF16, PT_BF16);
    t = emit_text(&g, "sm_80", "tpb=128,vec=8,unroll=4,shape_imm=1", &e);
    cr_assert(t, "%s", e.msg);
    nb = v4_bases(t, &nacc);
    cr_expect_eq(nacc, 8, "%d 16-byte accesses", nacc);
    cr_expect_eq(nb, 2, "%d address registers for 8 accesses", nb);
    free(t);
}
