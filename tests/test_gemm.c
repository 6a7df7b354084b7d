/* The GEMM generator: every config of the 4096^3 bf16 TN space assembles on
 * every claimed arch without spills or ptxas warnings, the structure of the
 * emitted PTX (mma per k-step, ldmatrix, 16-byte cp.async.cg, no local
 * memory), bad input, golden files, determinism and the CLI. Numerical
 * checks on the emulator are in test_gemm_emu.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/expr.h"
#include "gen/gemm.h"
#include "gen/gemm_int.h"
#include "ptx/compile.h"
#include "ptx/ir.h"
#include "ptx/parse.h"
#include "search/problem.h"
#include "test_space.h"
#include "tuner/emu_check.h"
#include "test_util.h"

/* every target the op claims: ptx/target.h's "all" (runnable, not
 * arch-specific) */
#define ARCH_NAME(n) n,
static const char *const archs[] = {PT_TARGET_ALL_MAP(ARCH_NAME)};
enum { NARCHS = sizeof archs / sizeof archs[0] };

static const pt_problem big = PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16);

Test(gemm, every_variant_of_4096_bf16_tn_assembles, .timeout = 1800)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    test_space_tally t = test_assemble_space(&gen_gemm_op, &big, 1, archs, NARCHS, comp);
    printf("gemm: %d variants of the 4096^3 bf16 tn space assembled for" PT_TARGET_ALL_NAMES
           " with %s: %d failures, %d with spills, %d with C7xxx warnings, %d with local memory\n",
           t.variants, pt_compiler_describe(comp), t.failures, t.spills, t.warned, t.local);
    pt_compiler_close(comp);
    cr_assert(t.variants > 400, "only %d variants", t.variants);
    cr_assert(t.failures + t.spills + t.warned + t.local == 0, "first: %s", t.first);
}

/* ---- emission helpers ---- */

static char *emit_text(const pt_problem *p, const char *arch, const char *config, pt_launch *lo,
                       pt_err *e)
{
    pt_target t;
    if (pt_target_parse(arch, &t, e))
        return NULL;
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    char *text = NULL;
    if (gen_gemm_op.prepare(a, p, &t, &pp, e) == 0) {
        pt_space s;
        pt_config c;
        gen_gemm_op.space(pp, &t, &s);
        gen_gemm_op.defaults(pp, &t, &c);
        ptx_module *m;
        pt_launch l;
        if (pt_config_parse(&s, config, &c, e) == 0 &&
            pt_op_build(&gen_gemm_op, pp, &t, 90, &c, &m, &l, e) == 0) {
            text = ptx_print(m);
            ptx_module_free(m);
            if (lo)
                *lo = l;
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

/* The main loop: from the label that the last back-edge before the
 * pipeline's drain (cp.async.wait_all) jumps to, up to the drain. */
static void mainloop_region(const char *text, const char **beg, const char **end)
{
    *end = strstr(text, "cp.async.wait_all");
    cr_assert(*end, "no pipeline drain");
    const char *b = *end;
    while (b > text && strncmp(b, "bra.uni $", 9) != 0)
        b--;
    cr_assert(b > text, "no back-edge before the drain");
    char lab[32];
    cr_assert_eq(sscanf(b + 8, "%31[^;]", lab), 1);
    char def[40];
    snprintf(def, sizeof def, "\n%s:", lab);
    *beg = strstr(text, def);
    cr_assert(*beg && *beg < b, "back-edge to %s: no label before it", lab);
}

static int count_in_mainloop(const char *text, const char *needle)
{
    const char *lab, *end;
    mainloop_region(text, &lab, &end);
    int n = 0;
    for (const char *p = lab; (p = strstr(p, needle)) && p < end; p++)
        n++;
    return n;
}

/* The main loop's schedule (issue 10 item 3): one barrier per k tile, the
 * first mma right after it (the last k-step's fragments are already in
 * registers; the copies of the next tile and the next tile's first
 * fragments come after), no branch before that mma, cp.async with the
 * .L2::128B prefetch hint. */
Test(gemm, main_loop_mma_follows_the_barrier)
{
    const struct {
        pt_problem p;
        const char *cfg;
    } cases[] = {
        {PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16), "bm=128,bn=128,bk=32,wm=64,wn=64,stages=3"},
        {PT_GEMM(4096, 4096, 4096, "nt", PT_F16, PT_F16), "bm=128,bn=128,bk=64,wm=64,wn=32,stages=4"},
        {PT_GEMM(250, 130, 72, "nn", PT_F16, PT_F16), "bm=64,bn=64,bk=32,wm=32,wn=32,stages=2"},
        {PT_GEMM(250, 130, 4096, "nn", PT_BF16, PT_BF16), "bm=64,bn=64,bk=32,wm=32,wn=32,stages=4,splitk=4"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pt_err e = {0};
        char *t = emit_text(&cases[c].p, "sm_80", cases[c].cfg, NULL, &e);
        cr_assert(t, "%s", e.msg);
        const char *beg, *end;
        mainloop_region(t, &beg, &end);
        const char *bar = strstr(beg, "bar.sync");
        cr_assert(bar && bar < end, "case %zu: no barrier in the main loop", c);
        const char *bar2 = strstr(bar + 1, "bar.sync");
        cr_expect(!bar2 || bar2 >= end, "case %zu: two barriers per k tile", c);
        const char *mma = strstr(bar, "mma.sync");
        cr_assert(mma && mma < end, "case %zu: no mma after the barrier", c);
        int lines = 0;
        for (const char *q = bar; q < mma; q++)
            lines += *q == '\n';
        cr_expect_leq(lines, 2, "case %zu: %d instructions between the barrier and the first mma", c, lines);
        int branches = 0, early = 0, cps = 0, hinted = 0;
        for (const char *q = beg; (q = strstr(q, "bra")) && q < end; q++) {
            branches++;
            early += q < mma;
        }
        for (const char *q = beg; (q = strstr(q, "cp.async.c")) && q < end; q++) {
            if (strncmp(q, "cp.async.commit", 15) == 0)
                continue;
            cps++;
            hinted += strncmp(q + 10, "g.shared.global.L2::128B", 24) == 0 ||
                      strncmp(q + 10, "a.shared.global.L2::128B", 24) == 0;
        }
        /* the back-edge, and a uniform branch around copies at edges */
        cr_expect_eq(early, 0, "case %zu: a branch before the first mma", c);
        cr_expect_leq(branches, 2, "case %zu: %d branches in the main loop", c, branches);
        cr_expect_gt(cps, 0, "case %zu", c);
        cr_expect_eq(hinted, cps, "case %zu: %d of %d cp.async with .L2::128B", c, hinted, cps);
        free(t);
    }
}

Test(gemm, bf16_tn_main_loop_structure)
{
    pt_problem p = big;
    pt_err e = {0};
    /* 128x128 tile of 2x2 warps of 64x64: per k-step 4 x 8 m16n8k16, bk=64: 4 k-steps */
    char *t = emit_text(&p, "sm_80", "bm=128,bn=128,bk=64,wm=64,wn=64,stages=3", NULL, &e);
    cr_assert(t, "%s", e.msg);
    int mma = count_in_mainloop(t, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
    cr_expect_eq(mma, 4 * 8 * 4, "main loop holds %d mma.sync, expected 32 per k-step x 4", mma);
    cr_expect_eq(count(t, "mma.sync"), mma, "no mma outside the main loop");
    /* tn: A is K x M and B is K x N in memory, both fed with ldmatrix.trans */
    cr_expect_eq(count_in_mainloop(t, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), 4 * (4 + 4));
    cr_expect_gt(count(t, "cp.async.cg.shared.global.L2::128B ["), 0);
    cr_expect(strstr(t, "], 16;\n"), "16-byte cp.async without src-size (no edges at 4096)");
    cr_expect_eq(count(t, "cp.async.ca"), 0);
    cr_expect_eq(count(t, "ld.local") + count(t, "st.local"), 0);
    cr_expect_gt(count(t, "st.global.v4.b32"), 0, "16-byte bf16 stores");
    cr_expect(strstr(t, "cp.async.wait_group 1;"), "3 stages wait for all but 1 group");
    free(t);

    /* nt: both operands K-contiguous, ldmatrix without .trans */
    p.layout = "nt";
    t = emit_text(&p, "sm_80", "bm=64,bn=64,bk=32,wm=32,wn=32,stages=4", NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(count_in_mainloop(t, "mma.sync"), 2 * 4 * 2);
    cr_expect_eq(count(t, ".trans"), 0);
    cr_expect_eq(count_in_mainloop(t, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 2 * (2 + 2));
    cr_expect(strstr(t, "cp.async.wait_group 2;"));
    free(t);
}

Test(gemm, edges_are_predicated_with_zero_fill)
{
    pt_problem p = PT_GEMM(250, 130, 72, "nn", PT_F16, PT_F16);
    pt_err e = {0};
    char *t = emit_text(&p, "sm_86", "bm=64,bn=64,bk=32,wm=32,wn=32,stages=3", NULL, &e);
    cr_assert(t, "%s", e.msg);
    /* k 72 % 32: src-size from the k left; rows 250 % 64: src-size 0 */
    cr_expect_gt(count(t, "cp.async.cg.shared.global"), 0);
    cr_expect_gt(count(t, "], 16, %r"), 0, "src-size operand on edge copies");
    cr_expect_gt(count(t, "min.s32"), 0);
    free(t);
    /* odd leading dimensions: no 16-byte alignment, element copies */
    p = (pt_problem)PT_GEMM(17, 33, 65, "nn", PT_BF16, PT_BF16);
    t = emit_text(&p, "sm_80", "bm=32,bn=32,bk=16,wm=16,wn=16,stages=2", NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(count(t, "cp.async"), count(t, "cp.async.commit_group") +
                                           count(t, "cp.async.wait_group") +
                                           count(t, "cp.async.wait_all"),
                 "2-byte aligned rows cannot use cp.async copies");
    cr_expect_gt(count(t, "ld.global.b16"), 0);
    cr_expect_gt(count(t, "st.shared.b16"), 0);
    free(t);
}

Test(gemm, dtype_rows_pick_their_atoms)
{
    static const struct {
        pt_problem p;
        const char *arch, *mma, *extra;
    } rows[] = {
        {PT_GEMM(128, 128, 128, "nt", PT_F16, PT_F16), "sm_80", "m16n8k16.row.col.f32.f16.f16.f32", "cvt.rn.f16x2.f32"},
        {PT_GEMM(128, 128, 128, "tt", PT_TF32, PT_F32), "sm_80", "m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32"},
        {PT_GEMM(128, 128, 128, "nt", PT_S8, PT_S32), "sm_80", "m16n8k32.row.col.s32.s8.s8.s32", "st.global.v4.b32"},
        {PT_GEMM(128, 128, 128, "nt", PT_U8, PT_BF16), "sm_86", "m16n8k32.row.col.s32.u8.u8.s32", "cvt.rn.f32.s32"},
        {PT_GEMM(128, 128, 128, "nt", PT_E4M3, PT_BF16), "sm_89", "m16n8k32.row.col.f32.e4m3.e4m3.f32", ".version 8.4"},
        {PT_GEMM(128, 128, 128, "nt", PT_E5M2, PT_E4M3), "sm_89", "m16n8k32.row.col.f32.e5m2.e5m2.f32", "cvt.rn.satfinite.e4m3x2.f32"},
        {PT_GEMM(128, 128, 128, "nn", PT_F32, PT_F32), "sm_80", "fma.rn.f32", "ld.shared.v4.f32"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        pt_err e = {0};
        char *t = emit_text(&rows[i].p, rows[i].arch, "", NULL, &e);
        cr_assert(t, "row %zu: %s", i, e.msg);
        cr_expect(strstr(t, rows[i].mma), "row %zu lacks %s", i, rows[i].mma);
        cr_expect(strstr(t, rows[i].extra), "row %zu lacks %s", i, rows[i].extra);
        free(t);
    }
}

Test(gemm, launch_description)
{
    pt_problem p = PT_GEMM(1000, 700, 4096, "tn", PT_BF16, PT_BF16);
    p.batch = 3;
    pt_err e = {0};
    pt_launch l;
    char *t = emit_text(&p, "sm_80", "bm=128,bn=128,bk=64,wm=64,wn=64,stages=4,splitk=2,raster=4", &l, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(l.grid[0], 8 * 6);
    cr_expect_eq(l.grid[1], 2, "split-K over grid.y");
    cr_expect_eq(l.grid[2], 3, "batch over grid.z");
    cr_expect_eq(l.block[0], 128);
    cr_expect_eq(l.smem, 4 * (128 + 128) * 128);
    cr_expect(l.smem_optin, "more than 48 KB of dynamic shared memory");
    cr_expect_eq(l.nargs, 5, "d a b ws alpha");
    cr_expect_eq(l.args[3].kind, PT_ARG_WORKSPACE);
    cr_expect_eq(l.args[3].u, 3ull * 48 * 2 * 128 * 128 * 4 + (3 * 48 * 4 + 15) / 16 * 16);
    cr_expect_eq(l.args[4].kind, PT_ARG_F32);
    cr_expect(strstr(t, "atom.global.add.u32"), "split-K arrival counter");
    cr_expect(strstr(t, "fence.acq_rel.gpu"));
    free(t);
    t = emit_text(&p, "sm_80", "bm=64,bn=64,bk=32,wm=32,wn=32,stages=2,splitk=1", &l, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect(!l.smem_optin && l.smem <= 48 * 1024);
    cr_expect(!strstr(t, "atom."));
    cr_expect(!strstr(t, "%nctaid.x"));
    free(t);
    /* persistent=1: one CTA an SM walks the 16 x 11 tiles, the grid sized
     * at launch: min(176, SMs) */
    t = emit_text(&p, "sm_80", "bm=64,bn=64,bk=32,wm=32,wn=32,stages=2,persistent=1", &l, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(l.grid[0], 16 * 11);
    cr_expect_eq(l.grid_per_sm, 1u);
    cr_expect_eq(pt_launch_grid_x(&l, 132), 132u);
    cr_expect_eq(pt_launch_grid_x(&l, 500), 176u);
    cr_expect(strstr(t, "%nctaid.x"));
    free(t);
    t = emit_text(&p, "sm_80", "bm=64,bn=64,bk=32,wm=32,wn=32,stages=2,persistent=2", &l, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(pt_launch_grid_x(&l, 80), 160u);
    free(t);
}

Test(gemm, epilogue_binds_vectors_and_tensors)
{
    pt_problem p = PT_GEMM(256, 512, 256, "tn", PT_BF16, PT_BF16);
    p.epilogue = "gelu(acc * alpha + bias[n]) + r";
    p.alpha = 0.5;
    pt_err e = {0};
    pt_launch l;
    char *t = emit_text(&p, "sm_80", "", &l, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_eq(l.nargs, 6, "d a b bias r alpha");
    cr_expect_eq(l.args[3].kind, PT_ARG_INPUT);
    cr_expect_eq(l.args[3].index, 2);
    cr_expect_eq(l.args[5].kind, PT_ARG_F32);
    cr_expect_float_eq(l.args[5].f, 0.5f, 0);
    cr_expect(strstr(t, "ex2.approx.ftz.f32"), "gelu's tanh");
    cr_expect(strstr(t, ".param .u64 .ptr .global .align 16 bias,\n"), "the parameter is named bias");
    cr_expect(strstr(t, ".param .u64 .ptr .global .align 16 r,\n"), "the parameter is named r");
    cr_expect(!strstr(t, "aux0"));
    cr_expect_gt(count(t, "ld.global.nc.v4.b32"), 0, "bias[n] and r by 16 bytes");
    free(t);
    /* tensors() names them in parameter order */
    pt_target tg;
    pt_target_parse("sm_80", &tg, &e);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, &p, &tg, &pp, &e), 0, "%s", e.msg);
    int nin, nout;
    pt_tensor in[8], out[2];
    gen_gemm_op.tensors(pp, &nin, &nout, in, out);
    cr_expect_eq(nin, 4);
    cr_expect_eq(nout, 1);
    cr_expect_str_eq(in[2].name, "bias", "the tensor keeps the expression's name");
    cr_expect_eq(in[2].numel, 512);
    cr_expect_str_eq(in[3].name, "r");
    cr_expect_eq(in[3].numel, 256 * 512);
    cr_expect_eq(out[0].dtype, PT_BF16);
    cr_expect_gt(gen_gemm_op.flops(pp), 2.0 * 256 * 512 * 256, "the product plus the epilogue");
    cr_expect_float_eq(gen_gemm_op.bytes(pp), (256.0 * 256 + 256.0 * 512 + 2.0 * 256 * 512) * 2 + 512 * 2, 1);
    pt_arena_free(a);
}

Test(gemm, addresses_are_64_bit)
{
    /* 2^34 elements of A: every global address is base + mul.wide */
    pt_problem p = PT_GEMM(131072, 256, 131072, "nn", PT_BF16, PT_BF16);
    pt_err e = {0};
    char *t = emit_text(&p, "sm_80", "bm=128,bn=128,bk=64,wm=64,wn=64,stages=3", NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_expect_gt(count(t, "mul.wide.u32"), 0);
    cr_expect_gt(count(t, "add.s64"), 0);
    cr_expect_eq(count(t, "mul.lo.u64"), 0, "every factor fits 32 bits");
    free(t);
}

Test(gemm, bad_input_is_one_exact_line)
{
    static const struct {
        pt_problem p;
        const char *arch, *config, *msg;
    } bad[] = {
        {PT_GEMM(0, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "",
         "M, N and K must be at least 1 (got m=0 n=64 k=64)"},
        {PT_GEMM(64, -3, 64, "nn", PT_BF16, PT_BF16), "sm_80", "",
         "M, N and K must be at least 1 (got m=64 n=-3 k=64)"},
        {PT_GEMM(64, 64, 0, "nn", PT_BF16, PT_BF16), "sm_80", "",
         "M, N and K must be at least 1 (got m=64 n=64 k=0)"},
        {PT_GEMM(64, 64, 3000000000ll, "nn", PT_BF16, PT_BF16), "sm_80", "",
         "m=64 n=64 k=3000000000: each must be at most 2^31-1"},
        {PT_GEMM(64, 64, 64, "nt", PT_E4M3, PT_BF16), "sm_80", "",
         "dtype e4m3 needs sm_89; target is sm_80"},
        {PT_GEMM(64, 64, 64, "nt", PT_E5M2, PT_BF16), "sm_86", "",
         "dtype e5m2 needs sm_89; target is sm_86"},
        {PT_GEMM(64, 64, 64, "tn", PT_S8, PT_S32), "sm_80", "",
         "s8 inputs need layout nt (A M x K and B N x K, both K-contiguous: ldmatrix cannot "
         "transpose 8-bit data); got tn"},
        {PT_GEMM(64, 64, 64, "nn", PT_E4M3, PT_BF16), "sm_89", "",
         "e4m3 inputs need layout nt (A M x K and B N x K, both K-contiguous: ldmatrix cannot "
         "transpose 8-bit data); got nn"},
        {PT_GEMM(64, 64, 64, "xn", PT_BF16, PT_BF16), "sm_80", "",
         "bad layout 'xn' (nn, nt, tn or tt: A then B; n as written, t stored transposed)"},
        {PT_GEMM(64, 64, 64, "nn", PT_F64, PT_F64), "sm_80", "",
         "dtype 'f64' is not supported for gemm inputs (f32 tf32 f16 bf16 s8 u8 e4m3 e5m2)"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_E4M3), "sm_80", "", "dtype e4m3 needs sm_89; target is sm_80"},
        {PT_GEMM(64, 64, 64, "nt", PT_S8, PT_E4M3), "sm_89", "",
         "output dtype 'e4m3' is not supported for s8 inputs (s32 f32 f16 bf16)"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_70", "", "unknown arch 'sm_70'"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "bm=48",
         "bm=48: must be a power of two in 16..256"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "bm=16,wm=32",
         "warp tile 32x32 is larger than the block tile 16x64"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "bk=24",
         "bk=24: k tile must be 32, 64 or 128 bytes (16..64 bf16 elements)"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "stages=6", "stages=6: must be 2..5"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "splitk=3",
         "splitk=3: more splits than k tiles (2)"},
        {PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16), "sm_86",
         "bm=256,bn=128,bk=64,wm=64,wn=64,stages=4",
         "196608 bytes of shared memory: sm_86 allows 101376 per block"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "frob=1", "unknown config key 'frob'"},
        {PT_GEMM(64, 64, 64, "nt", PT_E4M3, PT_BF16), "sm_90", "bm=64,bn=64,wm=64,wn=32",
         "warp tile 64x32: fp8 mma.sync on sm_90+ is emulated by ptxas; at most 32x32"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "persistent=-1",
         "persistent=-1: 0 (off), 1 or 2 (CTAs per SM of a persistent grid sized from the SM count at launch)"},
        {PT_GEMM(64, 64, 64, "nn", PT_BF16, PT_BF16), "sm_80", "persistent=132",
         "persistent=132: 0 (off), 1 or 2 (CTAs per SM"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_err e = {0};
        char *t = emit_text(&bad[i].p, bad[i].arch, bad[i].config, NULL, &e);
        cr_expect_null(t, "case %zu emitted", i);
        cr_expect(e.code != PT_OK, "case %zu", i);
        cr_expect(strncmp(e.msg, bad[i].msg, strlen(bad[i].msg)) == 0, "case %zu: '%s' is not '%s'",
                  i, e.msg, bad[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line");
        free(t);
    }
    /* an fp8 cast in the epilogue below sm_89 is refused when the problem is
     * prepared (bad input), like an fp8 output, not by the ISA check at emit */
    pt_problem ce = PT_GEMM(64, 64, 64, "tn", PT_F16, PT_F16);
    ce.epilogue = "cast(acc, e4m3)";
    pt_err cee = {0};
    char *ct = emit_text(&ce, "sm_80", "", NULL, &cee);
    cr_expect_null(ct);
    cr_expect_str_eq(cee.msg, "cast to e4m3 needs sm_89; target is sm_80");
    free(ct);
    /* s32 outputs are exact or refused */
    pt_problem q = PT_GEMM(64, 64, 64, "nt", PT_U8, PT_S32);
    q.alpha = 0.5;
    pt_err qe = {0};
    char *qt = emit_text(&q, "sm_80", "", NULL, &qe);
    cr_expect_null(qt);
    cr_expect_str_eq(qe.msg, "s32 output is the exact sum (alpha 1, beta 0 or 1, no epilogue or "
                             "scales); take --out-dtype f32, f16 or bf16 for a float epilogue");
    free(qt);
    /* leading dimensions and epilogues */
    static const struct {
        int64_t lda, ldb, ldc, ldd;
        double alpha, beta;
        const char *epi, *msg;
    } bad2[] = {
        {10, 0, 0, 0, 1, 0, NULL, "lda=10 is too small: A (layout n) is stored 64 x 65, so lda >= 65"},
        {0, 30, 0, 0, 1, 0, NULL, "ldb=30 is too small: B (layout t) is stored 48 x 65, so ldb >= 65"},
        {0, 0, 40, 0, 1, 0.5, NULL, "ldc=40 is too small: C is stored 64 x 48, so ldc >= 48"},
        {0, 0, 0, 47, 1, 0, NULL, "ldd=47 is too small: D is stored 64 x 48, so ldd >= 48"},
        {0, 0, 0, 0, 1, 0, "relu(acc", "epilogue: unexpected end of input at column 9"},
        {0, 0, 0, 0, 1, 0, "gelo(acc)", "epilogue: unknown function 'gelo' at column 1"},
        {0, 0, 0, 0, 1, 0, "acc + bias[k]",
         "epilogue input 'bias[k]': the index must be [m] (one value per row) or [n] (per column)"},
        {0, 0, 0, 0, 1, 0, "relu(x)", "epilogue does not use acc"},
        {0, 0, 0, 0, 2, 0, "relu(acc)", "alpha=2 is not used: write alpha into the epilogue"},
        {0, 0, 0, 0, 1, 0.5, "relu(acc)", "beta=0.5 is not used: write beta into the epilogue"},
        /* one rule for alpha and beta: a value other than the default must be used */
        {0, 0, 0, 0, 1, 0.5, "relu(acc) + c", "beta=0.5 is not used: write beta into the epilogue"},
        {0, 0, 0, 0, 0.5, 0, "relu(acc) + c", "alpha=0.5 is not used: write alpha into the epilogue"},
        {0, 0, 0, 0, 1, 0, "softmax(acc, -1)", "epilogue: reductions (sum, max, softmax, norms) are not supported"},
        {0, 0, 0, 0, 1, 0, "acc[n]", "epilogue: 'acc' cannot be indexed"},
        /* operand and parameter names are not epilogue tensors */
        {0, 0, 0, 0, 1, 0, "acc + a", "epilogue: 'a' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc * b[n]", "epilogue: 'b' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc - d[m]", "epilogue: 'd' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc + ws", "epilogue: 'ws' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc * scale_ab", "epilogue: 'scale_ab' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc * out_scale[n]", "epilogue: 'out_scale' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc + gemm_smem", "epilogue: 'gemm_smem' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc + c[n]", "epilogue: 'c' cannot be indexed"},
        {0, 0, 0, 0, 1, 0, "acc + WARP_SZ", "epilogue: 'WARP_SZ' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        {0, 0, 0, 0, 1, 0, "acc + _[n]", "epilogue: '_' is reserved (acc alpha beta c a b d ws scale_ab out_scale gemm_smem WARP_SZ _): rename the tensor"},
        /* a tensor is named by its base name: one name, one tensor */
        {0, 0, 0, 0, 1, 0, "acc * bias[n] + bias[m]", "epilogue: 'bias[n]' and 'bias[m]' are two tensors named 'bias': rename one"},
        {0, 0, 0, 0, 1, 0, "acc + r + r[m]", "epilogue: 'r' and 'r[m]' are two tensors named 'r': rename one"},
    };
    for (size_t i = 0; i < sizeof bad2 / sizeof bad2[0]; i++) {
        pt_problem p = PT_GEMM(64, 48, 65, "nt", PT_BF16, PT_BF16);
        p.lda = bad2[i].lda;
        p.ldb = bad2[i].ldb;
        p.ldc = bad2[i].ldc;
        p.ldd = bad2[i].ldd;
        p.alpha = bad2[i].alpha;
        p.beta = bad2[i].beta;
        p.epilogue = bad2[i].epi;
        pt_err e = {0};
        char *t = emit_text(&p, "sm_80", "", NULL, &e);
        cr_expect_null(t, "case %zu emitted", i);
        cr_expect_str_eq(e.msg, bad2[i].msg, "case %zu", i);
        free(t);
    }
}

Test(gemm, emission_is_deterministic)
{
    pt_problem ps[] = {big, PT_GEMM(250, 130, 70, "nn", PT_F16, PT_F32),
                       PT_GEMM(100, 100, 100, "nt", PT_S8, PT_S32)};
    ps[1].epilogue = "relu(acc * alpha + s[m])";
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        pt_err e = {0};
        char *a = emit_text(&ps[i], "sm_86", "", NULL, &e);
        char *b = emit_text(&ps[i], "sm_86", "", NULL, &e);
        cr_assert(a && b, "%s", e.msg);
        cr_expect_str_eq(a, b);
        free(a);
        free(b);
    }
}

/* Golden files: tests/golden/gemm_*.ptx. Regenerate with
 * PTXTUNE_REGEN_GOLDEN=1 meson test -C build test_gemm (see README). */
static pt_problem golden_problem(int i)
{
    pt_problem p;
    switch (i) {
    case 0: p = (pt_problem)PT_GEMM(256, 256, 256, "tn", PT_BF16, PT_BF16); break;
    case 1:
        p = (pt_problem)PT_GEMM(100, 72, 40, "nn", PT_F16, PT_F32);
        p.beta = 0.5;
        break;
    case 2: p = (pt_problem)PT_GEMM(128, 64, 96, "nt", PT_S8, PT_S32); break;
    case 3:
        p = (pt_problem)PT_GEMM(64, 64, 128, "nt", PT_E4M3, PT_BF16);
        p.epilogue = "gelu(acc * alpha + bias[n])";
        p.scale_a = 0.5;
        break;
    case 4: p = (pt_problem)PT_GEMM(96, 64, 64, "tt", PT_F32, PT_F32); break;
    default:
        p = (pt_problem)PT_GEMM(64, 64, 512, "tt", PT_TF32, PT_F32);
        p.d_colmajor = true;
        break;
    }
    return p;
}

static const struct {
    const char *name, *arch, *config;
} golden[] = {
    {"gemm_bf16_tn_sm80", "sm_80", "bm=128,bn=128,bk=32,wm=64,wn=64,stages=3,kslice=1,splitk=1,raster=1,persistent=0"},
    {"gemm_f16_nn_edges_beta_sm86", "sm_86", "bm=32,bn=32,bk=32,wm=16,wn=16,stages=2,kslice=1,splitk=1,raster=1"},
    {"gemm_s8_nt_sm80", "sm_80", "bm=64,bn=64,bk=64,wm=32,wn=32,stages=4,kslice=1,splitk=1,raster=1"},
    {"gemm_e4m3_nt_gelu_bias_sm89", "sm_89", "bm=64,bn=64,bk=64,wm=32,wn=32,stages=3,kslice=1,splitk=1,raster=1"},
    {"gemm_f32_simt_tt_sm80", "sm_80", "bm=32,bn=64,bk=16,tm=4,tn=8,stages=3,splitk=1,raster=1"},
    {"gemm_tf32_tt_splitk_kslice_sm80", "sm_80", "bm=64,bn=64,bk=16,wm=32,wn=32,stages=2,kslice=2,splitk=2,raster=1"},
};

Test(gemm, golden_files)
{
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        pt_err e = {0};
        pt_problem p = golden_problem((int)i);
        char *t = emit_text(&p, golden[i].arch, golden[i].config, NULL, &e);
        cr_assert(t, "%s: %s", golden[i].name, e.msg);
        test_golden(golden[i].name, t);
        free(t);
    }
}

/* ---- shared addresses derive from the gemm_smem symbol ----
 * On sm_90 the compiler places the dynamic array above a reserved 1 KB
 * (its address is 0x400), so an address computed from 0 lands outside it.
 * A register is "based" when every definition of it derives from the
 * symbol: mov r, gemm_smem; mov r, based; add with exactly one based
 * source; sub based - offset; mad a, b, based; selp of two based values
 * (greatest fixed point, so loop-carried stage registers qualify). Every
 * shared-space address (ld/st/atom.shared, ldmatrix, cp.async's
 * destination) must be the symbol itself or a based register. */
static bool def_based(const ptx_ins *in, const bool *based, const uint32_t *flat, const char *sym)
{
#define B(k) (in->opd[k].kind == PTX_O_REG && based[flat[PTX_REG_BANK(in->opd[k].u.reg)] + \
                                                     PTX_REG_IDX(in->opd[k].u.reg)])
    switch (in->op) {
    case PTX_OP_MOV:
        if (in->opd[1].kind == PTX_O_SYM)
            return strcmp(in->opd[1].u.sym, sym) == 0;
        return B(1);
    case PTX_OP_ADD: return B(1) != B(2);
    case PTX_OP_SUB: return B(1) && !B(2);
    case PTX_OP_MAD: return !B(1) && !B(2) && B(3);
    case PTX_OP_SELP: return B(1) && B(2);
    default: return false;
    }
#undef B
}

/* Shared accesses of f whose address does not derive from sym; *accesses:
 * how many shared accesses there are. first: the first offender's line. */
static int unbased_shared_accesses(const ptx_fn *f, const char *sym, int *accesses, int *first)
{
    uint32_t *flat = calloc(f->nbanks + 1, sizeof *flat);
    for (size_t b = 0; b < f->nbanks; b++)
        flat[b + 1] = flat[b] + f->banks[b].count;
    bool *based = calloc(flat[f->nbanks] + 1, 1);
    /* start from every defined register; drop those with a non-based definition */
    for (size_t i = 0; i < f->nbody; i++) {
        const ptx_ins *in = &f->body[i];
        const char *cls = ptx_op_info((ptx_op)in->op).opnds;
        if (in->nopd && (cls[0] == 'd' || cls[0] == 'p') && in->opd[0].kind == PTX_O_REG)
            based[flat[PTX_REG_BANK(in->opd[0].u.reg)] + PTX_REG_IDX(in->opd[0].u.reg)] = true;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < f->nbody; i++) {
            const ptx_ins *in = &f->body[i];
            const char *cls = ptx_op_info((ptx_op)in->op).opnds;
            if (!in->nopd || (cls[0] != 'd' && cls[0] != 'p') || in->opd[0].kind != PTX_O_REG)
                continue;
            uint32_t k = flat[PTX_REG_BANK(in->opd[0].u.reg)] + PTX_REG_IDX(in->opd[0].u.reg);
            if (based[k] && !def_based(in, based, flat, sym)) {
                based[k] = false;
                changed = true;
            }
        }
    }
    int bad = 0;
    *accesses = 0;
    *first = 0;
    for (size_t i = 0; i < f->nbody; i++) {
        const ptx_ins *in = &f->body[i];
        bool shared = false;
        for (int m = 0; m < in->nmods; m++)
            shared |= in->mods[m] == PTX_M_SHARED || in->mods[m] == PTX_M_SHARED_CTA;
        if (!shared)
            continue;
        const char *cls = ptx_op_info((ptx_op)in->op).opnds;
        for (int k = 0; k < in->nopd && cls[k]; k++) {
            if (cls[k] != 'a' || in->opd[k].kind != PTX_O_ADDR)
                continue;
            const ptx_opd *o = &in->opd[k];
            bool ok = o->u.addr.sym ? strcmp(o->u.addr.sym, sym) == 0
                                    : based[flat[PTX_REG_BANK(o->u.addr.base)] +
                                            PTX_REG_IDX(o->u.addr.base)];
            (*accesses)++;
            if (!ok && !bad++)
                *first = in->line;
            if (in->op == PTX_OP_CP_ASYNC)
                break; /* the second address is the global source */
        }
    }
    free(based);
    free(flat);
    return bad;
}

/* Parses text back and checks its one kernel. */
static int unbased_in_text(const char *text, int *accesses, int *first, pt_err *e)
{
    ptx_module *m = NULL;
    if (ptx_parse(text, strlen(text), "<gemm>", 0, &m, e))
        return -1;
    int bad = unbased_shared_accesses(m->fns[0], "gemm_smem", accesses, first);
    ptx_module_free(m);
    return bad;
}

Test(gemm, old_zero_base_main_loop_is_caught)
{
    const char *dir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(dir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[512];
    snprintf(path, sizeof path, "%s/ptx/gemm_old_zero_base.ptx", dir);
    FILE *fp = fopen(path, "rb");
    cr_assert(fp, "cannot open %s", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, fp);
    text[n] = '\0';
    fclose(fp);
    pt_err e = {0};
    int acc, first;
    int bad = unbased_in_text(text, &acc, &first, &e);
    cr_assert_geq(bad, 0, "%s", e.msg);
    cr_expect_gt(bad, 0, "the zero-base fixture has %d shared accesses, none flagged", acc);
}

Test(gemm, every_shared_address_derives_from_the_symbol, .timeout = 600)
{
    pt_problem ps[] = {
        PT_GEMM(64, 64, 64, "tn", PT_F16, PT_F16),     /* the fixture's problem */
        PT_GEMM(100, 72, 300, "nn", PT_BF16, PT_F32),  /* edges, split-K, k slices, beta */
        PT_GEMM(96, 64, 80, "tt", PT_F32, PT_F32),     /* SIMT ld.shared.v4 */
        PT_GEMM(64, 128, 256, "tt", PT_TF32, PT_F32),  /* scalar ld.shared of MN-major tf32 */
        PT_GEMM(128, 64, 96, "nt", PT_S8, PT_S32),
        PT_GEMM(17, 33, 65, "nn", PT_F16, PT_F16),     /* misaligned: ld.global + st.shared */
    };
    ps[1].beta = 0.5;
    ps[3].d_colmajor = true;
    ps[5].epilogue = "relu(acc) + bias[m]";
    int configs = 0, accesses = 0;
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        pt_target t;
        pt_err e = {0};
        pt_target_parse("sm_90", &t, &e);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &ps[i], &t, &pp, &e), 0, "%zu: %s", i, e.msg);
        pt_space s;
        gen_gemm_op.space(pp, &t, &s);
        int64_t n = pt_space_size(&s);
        for (int64_t k = 0; k < n; k++) {
            pt_config c;
            pt_space_config(&s, k, &c);
            pt_err ce = {0};
            if (gen_gemm_op.check(pp, &t, &c, &ce))
                continue;
            ptx_module *m;
            pt_launch l;
            cr_assert_eq(pt_op_build(&gen_gemm_op, pp, &t, 90, &c, &m, &l, &e), 0, "%s", e.msg);
            char *text = ptx_print(m);
            ptx_module_free(m);
            int acc, first;
            int bad = unbased_in_text(text, &acc, &first, &e);
            char cs[256];
            cr_assert_geq(bad, 0, "problem %zu [%s]: %s", i, pt_config_str(&c, cs, sizeof cs), e.msg);
            cr_expect_eq(bad, 0, "problem %zu [%s]: %d of %d shared accesses do not derive from "
                         "gemm_smem (first at line %d)", i, pt_config_str(&c, cs, sizeof cs), bad,
                         acc, first);
            free(text);
            configs++;
            accesses += acc;
            if (bad)
                break;
        }
        pt_arena_free(a);
    }
    printf("gemm: %d configs, %d shared accesses, each from gemm_smem\n", configs, accesses);
    cr_expect_gt(configs, 100);
}

/* Every main-loop and epilogue path on the emulator with sm_90's shared
 * layout (1 KB reserved, the array at 0x400) shifted a further 4 KB: a
 * kernel that assumed a zero base would touch bytes outside gemm_smem,
 * which the emulator reports. (test_gemm_emu's matrix runs with the
 * default shift on sm_80..89.) */
Test(gemm, runs_with_a_shifted_shared_base_on_sm90, .timeout = 600)
{
    static const struct {
        pt_problem p;
        const char *config;
    } cases[] = {
        {PT_GEMM(64, 64, 64, "tn", PT_F16, PT_F16), "bm=64,bn=64,bk=32,wm=32,wn=32,stages=3"},
        {PT_GEMM(70, 40, 96, "nn", PT_BF16, PT_F32), "bm=32,bn=32,bk=32,wm=16,wn=16,stages=2,kslice=2"},
        {PT_GEMM(64, 48, 300, "nt", PT_F16, PT_BF16), "bm=32,bn=16,bk=32,wm=16,wn=16,stages=4,splitk=3"},
        {PT_GEMM(48, 64, 40, "tt", PT_TF32, PT_F32), "bm=32,bn=32,bk=16,wm=16,wn=16,stages=3"},
        {PT_GEMM(96, 64, 80, "tt", PT_F32, PT_F32), "bm=32,bn=64,bk=16,tm=4,tn=8,stages=3"},
        {PT_GEMM(64, 64, 96, "nt", PT_S8, PT_S32), "bm=64,bn=64,bk=64,wm=32,wn=32,stages=2"},
        {PT_GEMM(17, 33, 65, "nn", PT_F16, PT_F16), "bm=32,bn=32,bk=16,wm=16,wn=16,stages=2"},
        {PT_GEMM(130, 70, 64, "tn", PT_BF16, PT_BF16), "bm=32,bn=32,bk=32,wm=16,wn=16,stages=2,persistent=1"},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_target t;
        pt_err e = {0};
        pt_target_parse("sm_90", &t, &e);
        pt_problem p = cases[i].p;
        if (i == 1)
            p.d_colmajor = true;
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &t, &pp, &e), 0, "%zu: %s", i, e.msg);
        pt_space s;
        pt_config c;
        gen_gemm_op.space(pp, &t, &s);
        gen_gemm_op.defaults(pp, &t, &c);
        cr_assert_eq(pt_config_parse(&s, cases[i].config, &c, &e), 0, "%zu: %s", i, e.msg);
        pt_check_opts o = {.seed = 7 + i, .smem_shift = 4096, .sm_count = 3}; /* persistent: 3 CTAs */
        pt_check_result r;
        int rc = pt_check_emu(&gen_gemm_op, pp, &t, &c, &o, &r, &e);
        cr_expect_eq(rc, PT_OK, "case %zu [%s]: %s", i, cases[i].config, e.msg);
        ran += rc == PT_OK;
        pt_arena_free(a);
    }
    cr_expect_eq(ran, (int)(sizeof cases / sizeof cases[0]));
}

/* Fills a problem's inputs with small values (fixed seed) and runs the
 * reference; returns the largest |d|. */
static double reference_max_abs(const pt_prepared *pp)
{
    int nin, nout;
    pt_tensor in[8], out[1];
    gen_gemm_op.tensors(pp, &nin, &nout, in, out);
    uint64_t seed = 99;
    for (int k = 0; k < nin; k++) {
        in[k].data = malloc((size_t)in[k].numel * sizeof(double));
        for (int64_t j = 0; j < in[k].numel; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            in[k].data[j] = pt_dtype_round(in[k].dtype, (double)(seed >> 11) * 0x1p-53 * 8.0 - 4.0);
        }
    }
    out[0].data = malloc((size_t)out[0].numel * sizeof(double));
    pt_err e = {0};
    cr_assert_eq(gen_gemm_op.reference(pp, in, out, &e), 0, "%s", e.msg);
    double mx = 0;
    for (int64_t j = 0; j < out[0].numel; j++)
        mx = fabs(out[0].data[j]) > mx ? fabs(out[0].data[j]) : mx;
    for (int k = 0; k < nin; k++)
        free(in[k].data);
    free(out[0].data);
    return mx;
}

/* A scale of 0 is honoured (acc = 0), as given on the command line or in a
 * problem file; a zeroed problem still means scales 1. */
Test(gemm, zero_scale_is_zero)
{
    pt_target t;
    pt_err e = {0};
    pt_target_parse("sm_89", &t, &e);
    static const struct {
        pt_dtype dt, odt;
        bool a;
    } rows[] = {{PT_S8, PT_F32, true}, {PT_U8, PT_BF16, false}, {PT_E4M3, PT_F32, true},
                {PT_E5M2, PT_BF16, false}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        pt_problem p = PT_GEMM(32, 32, 64, "nt", rows[i].dt, rows[i].odt);
        if (rows[i].a) {
            p.scale_a = 0;
            p.has_scale_a = true;
            p.scale_b = 3;
        } else {
            p.scale_b = 0;
            p.has_scale_b = true;
        }
        pt_launch l;
        char *text = emit_text(&p, "sm_89", "", &l, &e);
        cr_assert(text, "row %zu: %s", i, e.msg);
        free(text);
        int last = -1; /* d a b alpha scale_ab: scale_ab is the last f32 */
        for (int k = 0; k < l.nargs; k++)
            if (l.args[k].kind == PT_ARG_F32)
                last = k;
        cr_assert_eq(last, 4, "row %zu: no scale_ab parameter", i);
        cr_expect_float_eq(l.args[last].f, 0.0f, 0, "row %zu: scale_ab %g", i, (double)l.args[last].f);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &p, &t, &pp, &e), 0, "%s", e.msg);
        cr_expect_eq(reference_max_abs(pp), 0.0, "row %zu: the reference is not 0", i);
        pt_arena_free(a);
    }
    /* unset: 1; a zeroed problem too */
    pt_problem p = PT_GEMM(32, 32, 64, "nt", PT_S8, PT_F32);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, &p, &t, &pp, &e), 0, "%s", e.msg);
    cr_expect_gt(reference_max_abs(pp), 1.0);
    /* problem files: scale_a=0 is given (and kept in the key), scale_a=1 is the default */
    search_problem sp;
    cr_assert_eq(search_problem_parse(a, "gemm", "m=32 n=32 k=64 dtype=s8 layout=nt out_dtype=f32 scale_a=0",
                                      &sp, &e), 0, "%s", e.msg);
    cr_expect(sp.prob.has_scale_a && sp.prob.scale_a == 0.0);
    cr_expect(strstr(sp.key, "scale_a=0"), "key '%s' drops scale_a=0", sp.key);
    cr_assert_eq(gen_gemm_op.prepare(a, &sp.prob, &t, &pp, &e), 0, "%s", e.msg);
    cr_expect_eq(reference_max_abs(pp), 0.0, "scale_a=0 from a problem file");
    search_problem sq;
    cr_assert_eq(search_problem_parse(a, "gemm", "m=32 n=32 k=64 dtype=s8 layout=nt out_dtype=f32 scale_a=1",
                                      &sq, &e), 0, "%s", e.msg);
    cr_expect(!strstr(sq.key, "scale_a"), "key '%s': scale_a=1 is the default", sq.key);
    pt_arena_free(a);
    /* negative, NaN and infinite scales: one line */
    static const struct {
        double v;
        bool a;
        const char *msg;
    } bad[] = {{-1, true, "scale_a=-1: must be a finite number >= 0"},
               {NAN, true, "scale_a=nan: must be a finite number >= 0"},
               {INFINITY, false, "scale_b=inf: must be a finite number >= 0"},
               {-0.5, false, "scale_b=-0.5: must be a finite number >= 0"},
               {1e30, true, "scale_a*scale_b=1e+60 does not fit f32"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_problem q = PT_GEMM(32, 32, 64, "nt", PT_E4M3, PT_F32);
        if (bad[i].a) {
            q.scale_a = bad[i].v;
            q.has_scale_a = true;
            q.scale_b = bad[i].v;
        } else {
            q.scale_b = bad[i].v;
            q.has_scale_b = true;
        }
        pt_err qe = {0};
        char *text = emit_text(&q, "sm_89", "", NULL, &qe);
        cr_expect_null(text, "case %zu emitted", i);
        cr_expect_str_eq(qe.msg, bad[i].msg, "case %zu", i);
        free(text);
    }
}

/* The sampled reference gives the full reference's values, bit for bit. */
Test(gemm, reference_at_matches_reference)
{
    pt_problem ps[] = {
        PT_GEMM(37, 29, 45, "tn", PT_BF16, PT_BF16),
        PT_GEMM(20, 24, 33, "nt", PT_S8, PT_S32),
        PT_GEMM(20, 24, 33, "tt", PT_TF32, PT_F32),
        PT_GEMM(16, 40, 64, "nt", PT_E4M3, PT_E4M3),
        PT_GEMM(31, 17, 19, "nn", PT_F16, PT_F16),
    };
    ps[0].epilogue = "gelu(acc * alpha + bias[n]) + r * s[m]";
    ps[0].alpha = 0.75;
    ps[1].beta = 1;
    ps[2].d_colmajor = true;
    ps[2].batch = 2;
    ps[2].beta = -0.5;
    ps[3].alpha = 0.25;
    ps[4].ldd = 36;
    ps[4].d_colmajor = true;
    ps[4].batch = 3;
    ps[4].epilogue = "relu(acc) + c";
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        pt_target t;
        pt_err e = {0};
        pt_target_parse("sm_89", &t, &e);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_gemm_op.prepare(a, &ps[i], &t, &pp, &e), 0, "%zu: %s", i, e.msg);
        int nin, nout;
        pt_tensor in[8], out[1];
        gen_gemm_op.tensors(pp, &nin, &nout, in, out);
        uint64_t seed = 12345 + i;
        for (int k = 0; k < nin; k++) {
            in[k].data = malloc((size_t)in[k].numel * sizeof(double));
            for (int64_t j = 0; j < in[k].numel; j++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                double u = (double)(seed >> 11) * 0x1p-53 * 4.0 - 2.0;
                in[k].data[j] = pt_dtype_round(in[k].dtype, u);
            }
        }
        out[0].data = malloc((size_t)out[0].numel * sizeof(double));
        cr_assert_eq(gen_gemm_op.reference(pp, in, out, &e), 0, "%s", e.msg);
        int64_t n = out[0].numel;
        int64_t *idx = malloc((size_t)n * sizeof *idx);
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t j = 0; j < n; j++)
            idx[j] = j;
        cr_assert_eq(gen_gemm_op.reference_at(pp, in, 0, idx, (int)n, v, &e), 0, "%s", e.msg);
        int64_t diff = 0;
        for (int64_t j = 0; j < n; j++)
            diff += v[j] != out[0].data[j];
        cr_expect_eq(diff, 0, "problem %zu: %lld of %lld sampled values differ", i, (long long)diff,
                     (long long)n);
        free(idx);
        free(v);
        free(out[0].data);
        for (int k = 0; k < nin; k++)
            free(in[k].data);
        pt_arena_free(a);
    }
}

/* The expression language's indexed inputs (ex_parse_indexed) and that
 * plain ex_parse still refuses them. */
Test(gemm, indexed_epilogue_inputs)
{
    pt_arena *a = pt_arena_new();
    ex_prog *p;
    pt_err e = {0};
    cr_assert_eq(ex_parse_indexed(a, "d = acc + bias[n] * s[m] + bias[m] + r", &p, &e), 0, "%s", e.msg);
    cr_expect_eq(p->ninputs, 5);
    int k = ex_find_input(p, "bias[n]");
    cr_assert_geq(k, 0);
    cr_expect_str_eq(p->inputs[k].index, "n");
    cr_expect(ex_find_input(p, "bias[m]") >= 0 && ex_find_input(p, "bias[m]") != k);
    cr_expect_null(p->inputs[ex_find_input(p, "r")].index);
    pt_err_clear(&e);
    cr_expect_neq(ex_parse_indexed(a, "d = bias[1]", &p, &e), 0);
    cr_expect_str_eq(e.msg, "unexpected '1' at column 10");
    pt_err_clear(&e);
    cr_expect_neq(ex_parse_indexed(a, "d = bias[n", &p, &e), 0);
    cr_expect_str_eq(e.msg, "unexpected end of input at column 11");
    pt_err_clear(&e);
    cr_expect_neq(ex_parse(a, "y = x[n]", &p, &e), 0);
    cr_expect_str_eq(e.msg, "unexpected '[' at column 6");
    pt_arena_free(a);
}

/* ---- the command line ---- */

/* ptxtune ARGS: exit code, stdout, stderr */
static int run(const char *args, char *err, size_t n, char *out, size_t on)
{
    return test_run_ptxtune(NULL, args, out, on, err, n);
}

/* A 1-D little-endian f32 .npy file. */
static void write_npy_f32(const char *path, const float *v, int n)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", n);
    int total = (10 + len + 1 + 63) / 64 * 64;
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot write %s", path);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    unsigned hl = (unsigned)(total - 10);
    fputc((int)(hl & 0xff), f);
    fputc((int)(hl >> 8), f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 10 + len; i < total - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(v, sizeof *v, (size_t)n, f);
    fclose(f);
}

/* The f32 values of a .npy file written by run --out (n of them). */
static int read_npy_f32(const char *path, float *v, int n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char h[10];
    int got = -1;
    if (fread(h, 1, 10, f) == 10 && fseek(f, 10 + (long)(h[8] | h[9] << 8), SEEK_SET) == 0)
        got = (int)fread(v, sizeof *v, (size_t)n, f);
    fclose(f);
    return got;
}

/* Epilogue tensors keep the expression's names: --in bias=FILE feeds
 * bias[n] (A and B zero, so D is bias in every row). */
Test(gemm, cli_run_names_epilogue_tensors_as_written)
{
    char dir[] = "/tmp/ptxtune_gemm_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[600];
    static float zero[16 * 32], bias[16];
    for (int i = 0; i < 16; i++)
        bias[i] = (float)i - 4.5f;
    snprintf(path, sizeof path, "%s/z.npy", dir);
    write_npy_f32(path, zero, 16 * 32);
    snprintf(path, sizeof path, "%s/bias.npy", dir);
    write_npy_f32(path, bias, 16);
    char err[4096], out[4096];
    int rc = test_run_ptxtune(dir,
                              "run gemm --m 16 --n 16 --k 32 --dtype f16 --out-dtype f32 "
                              "--epilogue 'acc + bias[n]' --in a=z.npy --in b=z.npy --in bias=bias.npy "
                              "--out d=d.npy --backend emu --check",
                              out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err);
    float d[16 * 16];
    snprintf(path, sizeof path, "%s/d.npy", dir);
    cr_assert_eq(read_npy_f32(path, d, 16 * 16), 16 * 16, "no d.npy: %s", err);
    int wrong = 0;
    for (int i = 0; i < 16 * 16; i++)
        wrong += d[i] != bias[i % 16];
    cr_expect_eq(wrong, 0, "%d elements of D are not bias[n]", wrong);
    /* D is written in its own shape, M x N (not flat) */
    char hdr[256] = {0};
    FILE *fd = fopen(path, "rb");
    cr_assert(fd);
    cr_assert(fread(hdr, 1, sizeof hdr - 1, fd) > 0);
    fclose(fd);
    cr_expect(strstr(hdr + 10, "'shape': (16, 16)"), "d.npy header: %s", hdr + 10);
    /* the old name is gone */
    rc = test_run_ptxtune(dir,
                          "run gemm --m 16 --n 16 --k 32 --dtype f16 --out-dtype f32 "
                          "--epilogue 'acc + bias[n]' --in 'bias[n]=bias.npy' --backend emu",
                          out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "no input named 'bias[n]'"), "%s", err);
    for (const char *f = "z.npy\0bias.npy\0d.npy\0"; *f; f += strlen(f) + 1) {
        snprintf(path, sizeof path, "%s/%s", dir, f);
        remove(path);
    }
    rmdir(dir);
}

Test(gemm, cli_emit)
{
    static char out[1 << 20];
    char err[4096];
    int rc = run("emit gemm --m 4096 --n 4096 --k 4096 --dtype bf16 --layout tn --arch sm_80",
                 err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, ".visible .entry gemm_bf16_tn_"));
    cr_expect(strstr(err, "grid 1024,1,1 block 128,1,1"), "%s", err);
    rc = run("emit gemm --m 256 --n 128 --k 64 --dtype f16 --out-dtype f32 --layout nt --arch sm_86 "
             "--epilogue 'gelu(acc * alpha + bias[n]) + r' --alpha 0.5 --config bm=64,bn=64,stages=2",
             err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect(strstr(err, "bm=64,bn=64,") && strstr(err, "stages=2"), "%s", err);
    rc = run("emit gemm --help", err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0);
    cr_expect(strstr(out, "--layout nn|nt|tn|tt") && strstr(out, "uint16 bits"), "%s", out);
    /* the elementwise options still work and --expr is its business */
    rc = run("emit elementwise --expr 'y = x * 2' --shape x=8x32 --dtype f16", err, sizeof err, out,
             sizeof out);
    cr_expect_eq(rc, 0, "%s", err);
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"emit gemm --m 0 --n 4 --k 4", "M, N and K must be at least 1 (got m=0 n=4 k=4)"},
        {"emit gemm --n 4 --k 4", "M, N and K must be at least 1 (got m=0 n=4 k=4)"},
        {"emit gemm --m x4 --n 4 --k 4", "bad value 'x4' for --m (expected an integer)"},
        {"emit gemm --m 4 --n 4 --k 4 --alpha two", "bad value 'two' for --alpha (expected a number)"},
        {"emit gemm --m 64 --n 64 --k 64 --dtype e4m3 --layout nt --arch sm_80",
         "dtype e4m3 needs sm_89; target is sm_80"},
        {"emit gemm --m 64 --n 64 --k 64 --dtype s8 --layout nn", "s8 inputs need layout nt"},
        {"emit gemm --m 64 --n 64 --k 64 --lda 3", "lda=3 is too small"},
        {"emit gemm --m 64 --n 64 --k 64 --dtype bf16 --epilogue 'relu(acc'",
         "epilogue: unexpected end of input at column 9"},
        {"emit elementwise --shape x=4", "empty expression"},
        {"emit gemm --m 64 --n 64 --k 64 --dtype bf16 --epilogue 'acc + a[n]'", "epilogue: 'a' is reserved"},
        {"emit gemm --m 64 --n 64 --k 64 --batch 0", "bad value '0' for --batch (at least 1)"},
        {"emit gemm --m 64 --n 64 --k 64 --batch -3", "bad value '-3' for --batch (at least 1)"},
        {"emit gemm --m 64 --n 64 --k 64 --dtype f16 --config splitk=8", "splitk=8: more splits than k tiles (2)"},
        {"emit gemm --m 32 --n 32 --k 64 --dtype s8 --layout nt --out-dtype f32 --scale-a -1",
         "scale_a=-1: must be a finite number >= 0"},
        {"emit gemm --m 32 --n 32 --k 64 --dtype s8 --layout nt --out-dtype f32 --scale-b nan",
         "scale_b=nan: must be a finite number >= 0"},
        {"emit gemm --m 32 --n 32 --k 64 --dtype e4m3 --layout nt --arch sm_89 --scale-a inf",
         "scale_a=inf: must be a finite number >= 0"},
        {"emit gemm --m 32 --n 32 --k 64 --dtype bf16 --layout nt --scale-a 0",
         "scale_a/scale_b apply to fp8 and int8 inputs only"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = run(bad[i].args, err, sizeof err, out, sizeof out);
        cr_expect_eq(rc, 2, "'%s' exited %d (%s)", bad[i].args, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': '%s' lacks '%s'", bad[i].args, err, bad[i].msg);
        int lines = 0;
        for (const char *s = err; *s; s++)
            lines += *s == '\n';
        cr_expect_eq(lines, 1, "'%s': one line: %s", bad[i].args, err);
    }
}

/* ---- dyn=m (issue 14 item 4) ---- */

/* Run-time M: the kernel takes M as the u32 parameter m, its PTX is the
 * same for every M (split-K: every M of its power-of-two bucket), the grid
 * is (ceil(M / bm), column tiles x splitk, batch); without dyn the kernel
 * is the exact-M one (no parameter, no row checks when bm divides M).
 * Bad combinations are one line each. */
Test(gemm, dyn_m_kernel_takes_m_at_run_time)
{
    pt_err e = {0};
    pt_problem p = PT_GEMM(128, 96, 64, "nt", PT_BF16, PT_BF16);
    pt_launch l;
    char *exact = emit_text(&p, "sm_80", "bm=64,bn=32,wm=32,wn=16", &l, &e);
    cr_assert(exact, "%s", e.msg);
    cr_expect_eq(count(exact, ".param .u32 m"), 0);
    cr_expect_eq(l.grid[0], 6u);
    p.dyn = "m";
    char *t128 = emit_text(&p, "sm_80", "bm=64,bn=32,wm=32,wn=16", &l, &e);
    cr_assert(t128, "%s", e.msg);
    cr_expect_eq(count(t128, ".param .u32 m"), 1);
    cr_expect_gt(count(t128, "], 16, %r"), 0, "rows past M zero-filled (src-size)");
    cr_expect_eq(l.grid[0], 2u);
    cr_expect_eq(l.grid[1], 3u);
    int u32s = 0;
    for (int i = 0; i < l.nargs; i++)
        if (l.args[i].kind == PT_ARG_U32) {
            u32s++;
            cr_expect_eq(l.args[i].u, 128u);
        }
    cr_expect_eq(u32s, 1);
    cr_expect_gt(strlen(t128), strlen(exact), "the exact-M kernel has no row checks");
    p.m = 1;
    char *t1 = emit_text(&p, "sm_80", "bm=64,bn=32,wm=32,wn=16", &l, &e);
    cr_assert(t1, "%s", e.msg);
    cr_expect_str_eq(t1, t128, "dyn=m without split-K: one kernel for every M");
    cr_expect_eq(l.grid[0], 1u);
    /* split-K: the workspace is laid out for pow2ceil(m): same kernel in (64, 128] */
    p.m = 128;
    char *s128 = emit_text(&p, "sm_80", "bm=64,bn=32,wm=32,wn=16,splitk=2", &l, &e);
    cr_assert(s128, "%s", e.msg);
    cr_expect_eq(l.grid[1], 6u, "column tiles x splitk along y");
    p.m = 65;
    char *s65 = emit_text(&p, "sm_80", "bm=64,bn=32,wm=32,wn=16,splitk=2", NULL, &e);
    p.m = 64;
    char *s64 = emit_text(&p, "sm_80", "bm=64,bn=32,wm=32,wn=16,splitk=2", NULL, &e);
    cr_assert(s65 && s64, "%s", e.msg);
    cr_expect_str_eq(s65, s128);
    cr_expect_str_neq(s64, s128);
    free(exact), free(t128), free(t1), free(s128), free(s65), free(s64);

    static const struct {
        const char *layout;
        bool dcol;
        int64_t lda;
        const char *epi, *config, *want;
    } bad[] = {
        {"tt", true, 0, NULL, "", /* a column-major D follows M (test_runtime_dyn); A stored K x M does not */
         "dyn=m with layout tt: A is stored K x M, its rows follow M: give lda (the kernel then serves every M <= lda)"},
        {"tn", false, 0, NULL, "",
         "dyn=m with layout tn: A is stored K x M, its rows follow M: give lda (the kernel then serves every M <= lda)"},
        {"nt", false, 0, "acc * m[n]", "", "epilogue: 'm' is the kernel's run-time M with dyn=m: rename the tensor"},
        {"nt", false, 0, NULL, "bm=16,bn=16,wm=16,wn=16,splitk=2,persistent=0",
         "dyn=m: 40960 column tiles x splitk=2 CTAs along grid y: at most 65535 (a larger bn, or persistent)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_problem q = PT_GEMM(128, i == 3 ? 655360 : 96, 64, bad[i].layout, PT_BF16, PT_BF16);
        q.dyn = "m";
        q.d_colmajor = bad[i].dcol;
        q.epilogue = bad[i].epi;
        pt_err qe = {0};
        char *t = emit_text(&q, "sm_80", bad[i].config, NULL, &qe);
        cr_expect_null(t);
        cr_expect_str_eq(qe.msg, bad[i].want);
        free(t);
    }
    pt_problem q = PT_GEMM(128, 96, 64, "nt", PT_BF16, PT_BF16);
    q.dyn = "mn";
    pt_err qe = {0};
    cr_expect_null(emit_text(&q, "sm_80", "", NULL, &qe));
    cr_expect_str_eq(qe.msg, "bad dyn 'mn' (none or m: the sizes the kernel reads at run time)");
}

/* The run-time-M variants assemble on every claimed arch without spills,
 * warnings or local memory: the corners of the dyn space (split-K,
 * k slices, persistent, raster, batches, epilogue vectors, SIMT f32). */
Test(gemm, dyn_m_variants_assemble_without_spills, .timeout = 600)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    static const struct {
        int64_t m, n, k, batch, lda;
        const char *layout;
        pt_dtype dt;
        const char *epi, *config;
    } cases[] = {
        {128, 4096, 4096, 1, 0, "nt", PT_BF16, NULL, "bm=128,bn=128,bk=64,wm=64,wn=64,stages=3"},
        {64, 4096, 4096, 1, 0, "nt", PT_BF16, NULL, "bm=64,bn=128,bk=64,wm=32,wn=64,stages=4,splitk=4"},
        {16, 4096, 4096, 1, 0, "nn", PT_F16, "gelu(acc + bias[n])", "bm=16,bn=64,bk=64,wm=16,wn=32,kslice=2,stages=4"},
        {256, 1024, 512, 4, 0, "nt", PT_BF16, "acc * s[m] + r", "bm=64,bn=64,bk=32,wm=32,wn=32,raster=4"},
        {512, 1024, 1024, 1, 1024, "tt", PT_F16, NULL, "bm=128,bn=64,bk=32,wm=64,wn=32,persistent=1,raster=8"},
        {128, 4096, 4096, 1, 0, "nt", PT_S8, NULL, "bm=64,bn=128,bk=128,wm=32,wn=64,splitk=2"},
        {128, 1024, 1024, 2, 0, "nn", PT_F32, NULL, "bm=64,bn=64,bk=16,tm=8,tn=8,stages=3,splitk=2"},
    };
    test_space_tally t = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int ai = 0; ai < NARCHS; ai++) {
            pt_problem p = PT_GEMM(cases[i].m, cases[i].n, cases[i].k, cases[i].layout, cases[i].dt, PT_F64);
            p.batch = cases[i].batch;
            p.lda = cases[i].lda;
            p.epilogue = cases[i].epi;
            p.dyn = "m";
            pt_target tg;
            pt_err ce = {0};
            cr_assert_eq(pt_target_parse(archs[ai], &tg, &ce), 0);
            char *text = emit_text(&p, archs[ai], cases[i].config, NULL, &ce);
            t.variants++;
            if (!text) {
                t.failures++;
                test_space_fail(&t, &p, archs[ai], NULL, ce.msg);
                continue;
            }
            if (strstr(text, "ld.local") || strstr(text, "st.local")) {
                t.local++;
                test_space_fail(&t, &p, archs[ai], NULL, "local memory in the PTX");
            }
            pt_resource r = {0};
            int rc = pt_compile(comp, text, &tg, NULL, NULL, &r, &ce);
            free(text);
            if (rc) {
                t.failures++;
                test_space_fail(&t, &p, archs[ai], NULL, ce.msg);
                continue;
            }
            if (r.spill_stores || r.spill_loads || r.stack_frame) {
                t.spills++;
                char w[160];
                snprintf(w, sizeof w, "case %zu: spills %d/%d stack %d", i, r.spill_stores, r.spill_loads,
                         r.stack_frame);
                test_space_fail(&t, &p, archs[ai], NULL, w);
            }
            for (int q = 0; q < r.ncodes; q++)
                if (r.codes[q][0] == 'C' && r.codes[q][1] == '7') {
                    t.warned++;
                    test_space_fail(&t, &p, archs[ai], NULL, r.codes[q]);
                    break;
                }
        }
    printf("gemm dyn=m: %d variants assembled for" PT_TARGET_ALL_NAMES " with %s: %d failures, %d with spills, "
           "%d with C7xxx warnings, %d with local memory\n",
           t.variants, pt_compiler_describe(comp), t.failures, t.spills, t.warned, t.local);
    pt_compiler_close(comp);
    cr_assert_eq(t.variants, (int)(sizeof cases / sizeof cases[0]) * NARCHS);
    cr_assert(t.failures + t.spills + t.warned + t.local == 0, "first: %s", t.first);
}

/* The default 4096^3 bf16 tn kernel loads k-step 0's fragments at the main
 * loop's top (gen/gemm_tile.c tc_head), not after the tail predicated off
 * after the last tile: carried around the loop they made ptxas 13.0 take
 * 230 registers and ~4x the time (0.10 -> 0.42 s user on sm_80); 203 now. */
Test(gemm, default_bf16_tn_kernel_stays_off_the_slow_register_path)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    pt_problem p = PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_80", &tg, &e), 0);
    char *text = emit_text(&p, "sm_80", "bm=128,bn=128,bk=32,wm=64,wn=64,stages=3", NULL, &e);
    cr_assert(text, "%s", e.msg);
    pt_resource r = {0};
    int rc = pt_compile(comp, text, &tg, NULL, NULL, &r, &e);
    free(text);
    pt_compiler_close(comp);
    cr_assert_eq(rc, 0, "%s", e.msg);
    cr_expect_eq(r.spill_stores + r.spill_loads + r.stack_frame, 0);
    cr_expect_leq(r.registers, 216, "%d registers (230 with all of k-step 0 carried around the loop)", r.registers);
}
