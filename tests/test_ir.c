/* The IR builder's checks against the ISA table and the printer's text. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ptx/ir.h"

static ptx_module *module(const char *arch, int max_ptx)
{
    pt_target t;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(arch, &t, &e), PT_OK, "%s", e.msg);
    return ptx_module_new(&t, max_ptx);
}

Test(ir, refuses_instruction_above_target)
{
    ptx_module *m = module("sm_80", 90);
    ptx_fn *f = ptx_fn_new(m, "k");
    ptx_reg h = ptx_reg_new(f, PTX_T_B16), x = ptx_reg_new(f, PTX_T_F32);
    cr_expect_null(ptx_emit(f, PTX_OP_CVT, PTX_MODS(PTX_M_RN, PTX_M_SATFINITE),
                            PTX_TYPES(PTX_T_E4M3X2, PTX_T_F32), ptx_r(h), ptx_r(x), ptx_r(x)));
    cr_expect_str_eq(ptx_module_errmsg(m),
                     "cvt.rn.satfinite.e4m3x2.f32 needs sm_89 and PTX 8.1; target is sm_80");
    cr_expect_eq(ptx_module_finish(m), PT_EUNSUPPORTED);
    ptx_module_free(m);

    /* same instruction on sm_89 raises .version to 8.1 */
    m = module("sm_89", 90);
    f = ptx_fn_new(m, "k");
    h = ptx_reg_new(f, PTX_T_B16);
    x = ptx_reg_new(f, PTX_T_F32);
    cr_expect_not_null(ptx_emit(f, PTX_OP_CVT, PTX_MODS(PTX_M_RN, PTX_M_SATFINITE),
                                PTX_TYPES(PTX_T_E4M3X2, PTX_T_F32), ptx_r(h), ptx_r(x), ptx_r(x)));
    cr_expect_eq(ptx_module_finish(m), PT_OK);
    cr_expect_eq(m->version, 81);
    ptx_module_free(m);

    /* a compiler that only knows PTX 8.0 refuses it */
    m = module("sm_89", 80);
    f = ptx_fn_new(m, "k");
    h = ptx_reg_new(f, PTX_T_B16);
    x = ptx_reg_new(f, PTX_T_F32);
    cr_expect_null(ptx_emit(f, PTX_OP_CVT, PTX_MODS(PTX_M_RN, PTX_M_SATFINITE),
                            PTX_TYPES(PTX_T_E4M3X2, PTX_T_F32), ptx_r(h), ptx_r(x), ptx_r(x)));
    cr_expect(strstr(ptx_module_errmsg(m), "needs PTX 8.1; the toolchain accepts at most PTX 8.0"),
              "%s", ptx_module_errmsg(m));
    ptx_module_free(m);

    /* bf16x2 add is sm_90 only; xorsign sm_86 */
    m = module("sm_80", 90);
    f = ptx_fn_new(m, "k");
    ptx_reg r = ptx_reg_new(f, PTX_T_B32);
    cr_expect_null(ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_BF16X2), ptx_r(r), ptx_r(r), ptx_r(r)));
    cr_expect_str_eq(ptx_module_errmsg(m), "add.bf16x2 needs sm_90 and PTX 7.8; target is sm_80");
    ptx_module_free(m);
}

Test(ir, version_is_the_lowest_needed)
{
    const char *archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
    const int want[] = {70, 71, 78, 78, 80};
    for (int i = 0; i < 5; i++) {
        ptx_module *m = module(archs[i], 90);
        ptx_fn *f = ptx_fn_new(m, "k");
        ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
        cr_expect_eq(ptx_module_finish(m), PT_OK);
        cr_expect_eq(m->version, want[i], "%s", archs[i]);
        ptx_module_free(m);
    }
    /* cvt.f32.bf16 needs 7.1 on sm_80 */
    ptx_module *m = module("sm_80", 90);
    ptx_fn *f = ptx_fn_new(m, "k");
    ptx_reg h = ptx_reg_new(f, PTX_T_B16), x = ptx_reg_new(f, PTX_T_F32);
    ptx_emit(f, PTX_OP_CVT, PTX_NOMODS, PTX_TYPES(PTX_T_F32, PTX_T_BF16), ptx_r(x), ptx_r(h));
    cr_expect_eq(ptx_module_finish(m), PT_OK);
    cr_expect_eq(m->version, 71);
    ptx_module_free(m);
}

Test(ir, checks_operands)
{
    static const char *const want[] = {
        "wrong operand count", "type mismatch", "modifier not allowed", "type not allowed",
        "vector size mismatch", "expects a predicate", "missing type suffix",
    };
    for (int c = 0; c < 7; c++) {
        ptx_module *m = module("sm_80", 90);
        ptx_fn *f = ptx_fn_new(m, "k");
        ptx_reg r = ptx_reg_new(f, PTX_T_B32), fl = ptx_reg_new(f, PTX_T_F32);
        ptx_reg d = ptx_reg_new(f, PTX_T_B64);
        ptx_ins *i = NULL;
        switch (c) {
        case 0: i = ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r), ptx_r(r)); break;
        case 1: i = ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(fl), ptx_r(fl), ptx_r(fl)); break;
        case 2: i = ptx_emit(f, PTX_OP_ADD, PTX_MODS(PTX_M_TRANS), PTX_T1(PTX_T_U32), ptx_r(r), ptx_r(r), ptx_r(r)); break;
        case 3: i = ptx_emit(f, PTX_OP_LOP3, PTX_NOMODS, PTX_T1(PTX_T_F32), ptx_r(r), ptx_r(r), ptx_r(r), ptx_r(r), ptx_imm(1)); break;
        case 4: i = ptx_emit(f, PTX_OP_LD, PTX_MODS(PTX_M_GLOBAL, PTX_M_V4), PTX_T1(PTX_T_B32),
                             ptx_vecr(f, 2, (ptx_reg[]){r, r}), ptx_addr(d, 0)); break;
        case 5: i = ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(r), ptx_r(r), ptx_r(r), ptx_r(r)); break;
        case 6: i = ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_NOTYPES, ptx_r(r), ptx_r(r), ptx_r(r)); break;
        }
        cr_expect_null(i, "case %d accepted", c);
        cr_expect(strstr(ptx_module_errmsg(m), want[c]), "case %d: %s", c, ptx_module_errmsg(m));
        ptx_module_free(m);
    }
}

Test(ir, prints_declarations_and_operands)
{
    ptx_module *m = module("sm_80", 90);
    ptx_module_extern_shared(m, "dsmem", 16);
    ptx_fn *f = ptx_fn_new(m, "k");
    f->maxntid[0] = 128;
    f->minnctapersm = 2;
    const char *pa = ptx_param_ptr(f, "a", 16);
    ptx_param_add(f, "n", PTX_T_U32);
    ptx_param_bytes(f, "blob", 8, 16);
    const char *tile = ptx_shared_add(f, "tile", 16, 4096);
    ptx_reg rd = ptx_reg_new(f, PTX_T_B64), r = ptx_reg_new(f, PTX_T_B32), p = ptx_reg_new(f, PTX_T_PRED);
    ptx_reg x = ptx_reg_new(f, PTX_T_F32), y = ptx_reg_new(f, PTX_T_F32);
    ptx_emit(f, PTX_OP_LD, PTX_MODS(PTX_M_PARAM), PTX_T1(PTX_T_U64), ptx_r(rd), ptx_saddr(pa, 0));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r), ptx_sym(tile));
    ptx_emit(f, PTX_OP_SETP, PTX_MODS(PTX_M_LT), PTX_T1(PTX_T_S32), ptx_r(p), ptx_r(r), ptx_imm(-4));
    int l = ptx_label_new(f);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, PTX_NOMODS, PTX_NOTYPES, ptx_lbl(l)), p, true);
    ptx_emit(f, PTX_OP_LD, PTX_MODS(PTX_M_GLOBAL, PTX_M_V2), PTX_T1(PTX_T_F32),
             ptx_vecr(f, 2, (ptx_reg[]){x, y}), ptx_addr(rd, 16));
    ptx_emit(f, PTX_OP_SHFL, PTX_MODS(PTX_M_SYNC, PTX_M_BFLY), PTX_T1(PTX_T_B32), ptx_r(x),
             ptx_r(y), ptx_imm(1), ptx_imm(31), ptx_hex(0xffffffff));
    ptx_emit(f, PTX_OP_FMA, PTX_MODS(PTX_M_RN), PTX_T1(PTX_T_F32), ptx_r(x), ptx_r(x), ptx_f32(1.5f), ptx_r(y));
    ptx_label_place(f, l);
    ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    char *t = ptx_print(m);
    const char *want[] = {
        ".version 7.0\n.target sm_80\n.address_size 64\n",
        ".extern .shared .align 16 .b8 dsmem[];\n",
        ".visible .entry k(\n\t.param .u64 .ptr .global .align 16 a,\n\t.param .u32 n,\n\t.param .align 8 .b8 blob[16]\n)\n",
        ".maxntid 128, 1, 1\n.minnctapersm 2\n{\n",
        "\t.reg .b64 %rd<1>;\n\t.reg .b32 %r<1>;\n\t.reg .pred %p<1>;\n\t.reg .f32 %f<2>;\n",
        "\t.shared .align 16 .b8 tile[4096];\n",
        "\tld.param.u64 %rd0, [a];\n\tmov.u32 %r0, tile;\n\tsetp.lt.s32 %p0, %r0, -4;\n",
        "\t@!%p0 bra $L__BB0;\n\tld.global.v2.f32 {%f0, %f1}, [%rd0+16];\n",
        "\tshfl.sync.bfly.b32 %f0, %f1, 1, 31, 0xffffffff;\n",
        "\tfma.rn.f32 %f0, %f0, 0f3FC00000, %f1;\n$L__BB0:\n\tret;\n}\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(t, want[i]), "missing:\n%s\nin:\n%s", want[i], t);
    free(t);
    ptx_module_free(m);
}

/* The printer writes an entry's register names out once per entry (print.c,
 * ctx_names): a second entry with other banks at the same indices (a
 * custom prefix, a scalar, more registers) must print its own names, never
 * the first entry's. */
Test(ir, printer_names_are_per_entry)
{
    ptx_module *m = module("sm_80", 90);
    ptx_fn *a = ptx_fn_new(m, "a");
    ptx_reg ra[3];
    for (int i = 0; i < 3; i++)
        ra[i] = ptx_reg_new(a, PTX_T_B32);
    ptx_emit(a, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(ra[2]), ptx_r(ra[0]));
    ptx_emit0(a, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    ptx_fn *b = ptx_fn_new(m, "b");
    int q = ptx_bank_add(b, "%q", PTX_T_B32, 1200, false); /* bank 0, as a's %r */
    int acc = ptx_bank_add(b, "%acc", PTX_T_B32, 1, true);
    ptx_reg q0 = {(uint32_t)(q + 1) << 20}, q1199 = {(uint32_t)(q + 1) << 20 | 1199u};
    ptx_reg racc = {(uint32_t)(acc + 1) << 20}, r = {0};
    for (int i = 0; i < 1500; i++)
        r = ptx_reg_new(b, PTX_T_B32);
    ptx_emit(b, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(q1199), ptx_r(q0));
    ptx_emit(b, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(r), ptx_r(racc));
    ptx_emit(b, PTX_OP_ST, PTX_MODS(PTX_M_GLOBAL, PTX_M_V2), PTX_T1(PTX_T_B32), ptx_addr(ptx_reg_new(b, PTX_T_B64), 8),
             ptx_vecr(b, 2, (ptx_reg[]){q0, r}));
    ptx_emit0(b, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    char *t = ptx_print(m);
    const char *want[] = {
        "\tmov.b32 %r2, %r0;\n\tret;\n}\n",
        "\tmov.b32 %q1199, %q0;\n\tmov.b32 %r1499, %acc;\n\tst.global.v2.b32 [%rd0+8], {%q0, %r1499};\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(t, want[i]), "missing:\n%s\nin:\n%s", want[i], t);
    free(t);
    ptx_module_free(m);
}

/* Files are written whole or not at all (pt_wfile): the target keeps its old
 * content until commit, abort leaves it untouched and no temporary behind. */
Test(base, wfile_replaces_whole_or_not_at_all)
{
    char dir[] = "/tmp/ptxtune-wfile-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256], buf[64];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);

    pt_err e = {0};
    pt_wfile w;
    cr_assert_eq(pt_wfile_open(&w, path, &e), PT_OK, "%s", e.msg);
    fputs("new content", (FILE *)w.f);
    f = fopen(path, "r"); /* still the old file while pending */
    cr_assert_str_eq(fgets(buf, sizeof buf, f), "old");
    fclose(f);
    pt_wfile_abort(&w);
    f = fopen(path, "r");
    cr_assert_str_eq(fgets(buf, sizeof buf, f), "old");
    fclose(f);

    cr_assert_eq(pt_wfile_open(&w, path, &e), PT_OK, "%s", e.msg);
    fputs("new", (FILE *)w.f);
    cr_assert_eq(pt_wfile_commit(&w, &e), PT_OK, "%s", e.msg);
    f = fopen(path, "r");
    cr_assert_str_eq(fgets(buf, sizeof buf, f), "new");
    fclose(f);
    cr_assert(pt_same_file(path, path));

    char cmd[300]; /* exactly one file left: no temporaries */
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
    cr_assert_eq(system(cmd), 0);

    cr_assert_neq(pt_wfile_open(&w, dir, &e), PT_OK);
    cr_assert(strstr(e.msg, "is a directory"), "%s", e.msg);
    pt_err_clear(&e);
    snprintf(path, sizeof path, "%s/no/such/dir/x", dir);
    cr_assert_neq(pt_wfile_open(&w, path, &e), PT_OK);
    cr_assert(strstr(e.msg, path) && strstr(e.msg, "No such file"), "%s", e.msg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Issue 9 item 10: a scratch copy of the ISA table with `extra` more
 * modifier rows (zz0, zz1, ...), built from the library's own ir.c with a
 * small main that lists every opcode accepting one of the new modifiers
 * (none uses them, so any hit is an alias of an older bit). Returns the
 * build-and-run status; log gets the compiler's and the program's output. */
static int scratch_table(int extra, char *log, size_t logn)
{
    const char *tests = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tests, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char src[512], dir[] = "/tmp/ptxtune-isa-XXXXXX", path[600], cmd[4096];
    snprintf(src, sizeof src, "%s/..", tests);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ptx", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    static char def[1 << 18];
    snprintf(path, sizeof path, "%s/ptx/isa.def", src);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    size_t n = fread(def, 1, sizeof def - 1, f);
    def[n] = '\0';
    fclose(f);
    char *at = strstr(def, "/* PTX_SREG(id"); /* right after the last modifier row */
    cr_assert(at);
    snprintf(path, sizeof path, "%s/ptx/isa.def", dir);
    f = fopen(path, "w");
    fwrite(def, 1, (size_t)(at - def), f);
    for (int i = 0; i < extra; i++)
        fprintf(f, "PTX_MOD(ZZ%d, \"zz%d\")\n", i, i);
    fputs(at, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/main.c", dir);
    f = fopen(path, "w");
    fputs("#include \"ptx/ir.h\"\n#include <stdio.h>\nint main(void)\n{\n"
          "    int first = ptx_mod_lookup(\"zz0\", 3), bad = 0;\n"
          "    for (int op = 0; op < PTX_NOPS; op++)\n"
          "        for (int m = first; m < PTX_NMODS; m++)\n"
          "            if (ptx_op_allows_mod((ptx_op)op, (ptx_mod)m)) {\n"
          "                printf(\"%s accepts .%s\\n\", ptx_op_name((ptx_op)op), ptx_mod_name((ptx_mod)m));\n"
          "                bad++;\n"
          "            }\n"
          "    return bad != 0;\n}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cd %s && cc -std=c17 -D_GNU_SOURCE -I. -I%s %s/ptx/ir.c %s/ptx/base.c %s/ptx/target.c "
             "main.c -o scratch >log 2>&1 && ./scratch >>log 2>&1",
             dir, src, src, src, src);
    int st = system(cmd);
    snprintf(path, sizeof path, "%s/log", dir);
    f = fopen(path, "r");
    size_t ln = f ? fread(log, 1, logn - 1, f) : 0;
    log[ln] = '\0';
    if (f)
        fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 32 more modifiers once made setp accept one that aliased .geu; now the
 * masks hold them, and a table that outgrows the masks does not compile. */
Test(ir, modifier_masks_cannot_alias)
{
    static char log[1 << 16];
    int rc = scratch_table(32, log, sizeof log);
    cr_expect_eq(rc, 0, "32 more modifiers: %s", log);
    rc = scratch_table(200, log, sizeof log);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(log, "modifier masks hold"), "200 more modifiers must not compile:\n%.2000s", log);
}

/* Issue 9 item 10: arch-specific rows. setmaxnreg exists only for sm_90a
 * (the 'a' target); plain sm_90 and sm_80 refuse it in one line. */
Test(ir, arch_specific_rows_need_the_a_target)
{
    static const struct {
        const char *arch;
        const char *err; /* NULL: accepted */
    } cases[] = {
        {"sm_90a", NULL},
        {"sm_90", "setmaxnreg.inc.sync.aligned.u32 needs sm_90a; target is sm_90"},
        {"sm_80", "setmaxnreg.inc.sync.aligned.u32 needs sm_90a and PTX 8.0; target is sm_80"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ptx_module *m = module(cases[c].arch, 90);
        ptx_fn *f = ptx_fn_new(m, "k");
        ptx_ins *i = ptx_emit(f, PTX_OP_SETMAXNREG, PTX_MODS(PTX_M_INC, PTX_M_SYNC, PTX_M_ALIGNED),
                              PTX_T1(PTX_T_U32), ptx_imm(232));
        if (cases[c].err) {
            cr_expect_null(i, "%s accepted setmaxnreg", cases[c].arch);
            cr_expect_str_eq(ptx_module_errmsg(m), cases[c].err);
        } else {
            cr_expect_not_null(i, "%s: %s", cases[c].arch, ptx_module_errmsg(m));
            cr_expect_eq(ptx_module_finish(m), PT_OK);
            cr_expect_eq(m->version, 80);
            char *t = ptx_print(m);
            cr_expect(strstr(t, "\tsetmaxnreg.inc.sync.aligned.u32 232;\n"), "%s", t);
            free(t);
        }
        ptx_module_free(m);
    }
}

/* Issue 9 item 9: forms ptxas refuses used to pass ptx_module_finish (the
 * copy-size and fragment rules lived only in the emulator's decoder). Each
 * now fails at ptx_emit with one line from the ISA table's rules. */
Test(ir, refuses_what_ptxas_refuses)
{
    static const char *const want[] = {
        "cp.async.cg needs a copy size of 16, got 8",
        "add.rn.rz.f32: two rounding modes, .rn and .rz",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: vector size mismatch: operand 2 has 1 "
        "register where 4 are needed",
        "mma.sync.aligned.m16n8k16.row.col.f16.s8.tf32.f32: types .f16.s8.tf32.f32 is not a form "
        "of mma",
        "cp.async.ca needs a copy size of 4, 8 or 16, got 12",
        "mul.u32: needs one of .lo .hi .wide",
        "setp.lo.s32: modifier not allowed: '.lo' with .s32",
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16: vector size mismatch: operand 1 has 4 registers "
        "where 2 are needed",
        /* 32-bit addressing: ptxas refuses it on every target with
         * .address_size 64 (nvJitLink on sm_80 only warns) */
        "cvta.to.global.u32: type not allowed: '.u32'",
        /* the printer writes the order given: the builder refuses the
         * orders ptxas refuses */
        "cp.async.ca.global.shared: modifier order: .shared before .global (the destination "
        "space first)",
        "ld.v4.global.f32: modifier order: .global before .v4 (the vector width last)",
        /* the pack rule (was the decoder's 'bad vector pack', which took 2 x 32 bits) */
        "mov.b32: vector size mismatch: operand 2 holds 2 x 32 bits where .b32 needs 32",
    };
    for (int c = 0; c < (int)(sizeof want / sizeof want[0]); c++) {
        ptx_module *m = module("sm_80", 90);
        ptx_fn *f = ptx_fn_new(m, "k");
        ptx_reg r = ptx_reg_new(f, PTX_T_B32), x = ptx_reg_new(f, PTX_T_F32);
        ptx_reg d = ptx_reg_new(f, PTX_T_B64), p = ptx_reg_new(f, PTX_T_PRED);
        ptx_opd acc = ptx_vecr(f, 4, (ptx_reg[]){x, x, x, x});
        ptx_opd one = ptx_vecr(f, 1, (ptx_reg[]){r}), four = ptx_vecr(f, 4, (ptx_reg[]){r, r, r, r});
        ptx_mods mma = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M16N8K16, PTX_M_ROW, PTX_M_COL);
        ptx_ins *i = NULL;
        switch (c) {
        case 0:
            i = ptx_emit(f, PTX_OP_CP_ASYNC, PTX_MODS(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL),
                         PTX_NOTYPES, ptx_addr(r, 0), ptx_addr(d, 0), ptx_imm(8));
            break;
        case 1:
            i = ptx_emit(f, PTX_OP_ADD, PTX_MODS(PTX_M_RN, PTX_M_RZ), PTX_T1(PTX_T_F32), ptx_r(x),
                         ptx_r(x), ptx_r(x));
            break;
        case 2:
            i = ptx_emit(f, PTX_OP_MMA, mma, PTX_TYPES(PTX_T_F32, PTX_T_F16, PTX_T_F16, PTX_T_F32),
                         acc, one, one, acc);
            break;
        case 3:
            i = ptx_emit(f, PTX_OP_MMA, mma, PTX_TYPES(PTX_T_F16, PTX_T_S8, PTX_T_TF32, PTX_T_F32),
                         ptx_vecr(f, 2, (ptx_reg[]){r, r}), four, one, acc);
            break;
        case 4:
            i = ptx_emit(f, PTX_OP_CP_ASYNC, PTX_MODS(PTX_M_CA, PTX_M_SHARED, PTX_M_GLOBAL),
                         PTX_NOTYPES, ptx_addr(r, 0), ptx_addr(d, 0), ptx_imm(12));
            break;
        case 5:
            i = ptx_emit(f, PTX_OP_MUL, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r), ptx_r(r), ptx_r(r));
            break;
        case 6:
            i = ptx_emit(f, PTX_OP_SETP, PTX_MODS(PTX_M_LO), PTX_T1(PTX_T_S32), ptx_r(p), ptx_r(r),
                         ptx_r(r));
            break;
        case 7:
            i = ptx_emit(f, PTX_OP_LDMATRIX,
                         PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, PTX_M_X2, PTX_M_SHARED),
                         PTX_T1(PTX_T_B16), four, ptx_addr(r, 0));
            break;
        case 8:
            i = ptx_emit(f, PTX_OP_CVTA, PTX_MODS(PTX_M_TO, PTX_M_GLOBAL), PTX_T1(PTX_T_U32), ptx_r(r),
                         ptx_r(r));
            break;
        case 9:
            i = ptx_emit(f, PTX_OP_CP_ASYNC, PTX_MODS(PTX_M_CA, PTX_M_GLOBAL, PTX_M_SHARED),
                         PTX_NOTYPES, ptx_addr(r, 0), ptx_addr(d, 0), ptx_imm(16));
            break;
        case 10:
            i = ptx_emit(f, PTX_OP_LD, PTX_MODS(PTX_M_V4, PTX_M_GLOBAL), PTX_T1(PTX_T_F32),
                         ptx_vecr(f, 4, (ptx_reg[]){x, x, x, x}), ptx_addr(d, 0));
            break;
        case 11:
            i = ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(r),
                         ptx_vecr(f, 2, (ptx_reg[]){r, r}));
            break;
        }
        cr_expect_null(i, "case %d accepted", c);
        cr_expect_neq(ptx_module_finish(m), PT_OK, "case %d: module finished", c);
        cr_expect_str_eq(ptx_module_errmsg(m), want[c], "case %d: %s", c, ptx_module_errmsg(m));
        ptx_module_free(m);
    }
}

/* The rule rows stay grouped by opcode (the lookup is a binary search) and
 * within their opcode rows. */
Test(ir, isa_table_is_consistent)
{
    pt_err e = {0};
    cr_expect_eq(ptx_isa_check_table(&e), PT_OK, "%s", e.msg);
    cr_expect_gt(ptx_isa_nrules(PTX_RULE_FORM), 50);
}

/* ---- issue 12 item 1: the Hopper rows through the builder ---- */

static ptx_opd vreg(ptx_fn *f, ptx_type t, int n)
{
    ptx_reg r[256];
    cr_assert_leq(n, 256);
    for (int i = 0; i < n; i++)
        r[i] = ptx_reg_new(f, t);
    return ptx_vecr(f, n, r);
}

/* A wgmma through ptx_emit_shape_n: the shape field prints as .m64n{N}k{K},
 * is checked against the PTX_SHAPE rows, sizes the accumulator vector, and
 * plain sm_90 gets the one-line arch-specific message. */
Test(ir, wgmma_shape_and_arch)
{
    ptx_module *m = module("sm_90a", 90);
    ptx_fn *f = ptx_fn_new(m, "k");
    ptx_reg da = ptx_reg_new(f, PTX_T_B64), db = ptx_reg_new(f, PTX_T_B64);
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED);
    ptx_opd d = vreg(f, PTX_T_F32, 64);
    ptx_mods sa = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED);
    ptx_types bf = PTX_TYPES(PTX_T_F32, PTX_T_BF16, PTX_T_BF16);
    ptx_opd ss[] = {d, ptx_r(da), ptx_r(db), ptx_r(p), ptx_imm(1), ptx_imm(-1), ptx_imm(0), ptx_imm(1)};
    cr_assert_not_null(ptx_emit_shape_n(f, PTX_OP_WGMMA_SS, sa, ptx_mnk(64, 128, 16), bf, 8, ss),
                       "%s", ptx_module_errmsg(m));
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    cr_expect_eq(m->version, 80);
    char *t = ptx_print(m);
    cr_expect(strstr(t, "\twgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f0, %f1, ") != NULL,
              "%s", t);
    cr_expect(strstr(t, "%f63}, %rd0, %rd1, %p0, 1, -1, 0, 1;\n") != NULL, "%s", t);
    free(t);
    ptx_module_free(m);

    struct {
        const char *arch;
        ptx_shape sh;
        int nd;
        const char *msg;
    } bad[] = {
        {"sm_90", {64, 16, PTX_SHAPE_END, 8}, 4,
         "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 needs sm_90a; target is sm_90"},
        {"sm_90a", {64, 16, PTX_SHAPE_END, 264}, 132,
         "wgmma.mma_async.sync.aligned.m64n264k16.f32.bf16.bf16: shape not allowed: expected "
         ".m64n{8..256 step 8}k16 for .bf16"},
        {"sm_90a", {64, 32, PTX_SHAPE_END, 8}, 4, "shape not allowed"},
        {"sm_90a", {0, 0, 0, 0}, 4,
         "wgmma.mma_async.sync.aligned.f32.bf16.bf16: needs a shape .m64n{8..256 step 8}k16 for .bf16"},
        {"sm_90a", {64, 16, PTX_SHAPE_END, 16}, 4,
         "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16: vector size mismatch: operand 1 "
         "has 4 registers where 8 are needed"},
        {"sm_80", {64, 16, PTX_SHAPE_END, 8}, 4,
         "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 needs sm_90a and PTX 8.0; target is sm_80"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = module(bad[i].arch, 90);
        f = ptx_fn_new(m, "k");
        da = ptx_reg_new(f, PTX_T_B64);
        db = ptx_reg_new(f, PTX_T_B64);
        ptx_opd o[] = {vreg(f, PTX_T_F32, bad[i].nd), ptx_r(da), ptx_r(db), ptx_imm(0),
                       ptx_imm(1), ptx_imm(1), ptx_imm(0), ptx_imm(0)};
        cr_expect_null(ptx_emit_shape_n(f, PTX_OP_WGMMA_SS, sa, bad[i].sh, bf, 8, o));
        cr_expect(strstr(ptx_module_errmsg(m), bad[i].msg) != NULL, "%zu: got '%s', want '%s'", i,
                  ptx_module_errmsg(m), bad[i].msg);
        ptx_module_free(m);
    }
    /* integer N: 8, 16, 24, then multiples of 16 */
    m = module("sm_90a", 90);
    f = ptx_fn_new(m, "k");
    da = ptx_reg_new(f, PTX_T_B64);
    db = ptx_reg_new(f, PTX_T_B64);
    ptx_types s8 = PTX_TYPES(PTX_T_S32, PTX_T_S8, PTX_T_S8);
    ptx_opd i40[] = {vreg(f, PTX_T_B32, 20), ptx_r(da), ptx_r(db), ptx_imm(1)};
    cr_expect_null(ptx_emit_shape_n(f, PTX_OP_WGMMA_SS, sa, ptx_mnk(64, 40, 32), s8, 4, i40));
    cr_expect(strstr(ptx_module_errmsg(m), "m64n{8..24 step 8, 32..256 step 16}k32"), "%s",
              ptx_module_errmsg(m));
    ptx_module_free(m);
}

/* elect.sync d|p, a tensor operand, the pragma and the cluster directives
 * print as PTX writes them; cluster directives and special registers need
 * sm_90. */
Test(ir, hopper_operands_and_directives)
{
    ptx_module *m = module("sm_90", 90);
    ptx_fn *f = ptx_fn_new(m, "k");
    f->explicitcluster = true;
    f->reqnctapercluster[0] = 2;
    ptx_reg r = ptx_reg_new(f, PTX_T_B32), p = ptx_reg_new(f, PTX_T_PRED);
    ptx_reg tm = ptx_reg_new(f, PTX_T_B64), bar = ptx_reg_new(f, PTX_T_B32);
    cr_assert_not_null(ptx_emit(f, PTX_OP_ELECT, PTX_MODS(PTX_M_SYNC), PTX_NOTYPES,
                                ptx_pair(r, p), ptx_hex(0xffffffff)));
    cr_assert_not_null(ptx_emit(f, PTX_OP_ELECT, PTX_MODS(PTX_M_SYNC), PTX_NOTYPES,
                                ptx_pair((ptx_reg){0}, p), ptx_r(r)));
    ptx_opd c[] = {ptx_r(r), ptx_imm(0)};
    cr_assert_not_null(ptx_emit(f, PTX_OP_TMA_LD,
                                PTX_MODS(PTX_M_T2D, PTX_M_SHARED_CLUSTER, PTX_M_GLOBAL, PTX_M_MBAR_TX),
                                PTX_NOTYPES, ptx_addr(bar, 0), ptx_tensor(f, ptx_r(tm), 2, c),
                                ptx_addr(bar, 8)),
                       "%s", ptx_module_errmsg(m));
    cr_assert_not_null(ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r),
                                ptx_sr(PTX_S_CLUSTER_CTARANK)));
    ptx_pragma_nounroll(f);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    cr_expect_eq(m->version, 80);
    char *t = ptx_print(m);
    const char *want[] = {
        ".explicitcluster\n.reqnctapercluster 2, 1, 1\n{\n",
        "\telect.sync %r0|%p0, 0xffffffff;\n",
        "\telect.sync _|%p0, %r0;\n",
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], "
        "[%rd0, {%r0, 0}], [%r1+8];\n",
        "\tmov.u32 %r0, %cluster_ctarank;\n",
        "\t.pragma \"nounroll\";\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(t, want[i]) != NULL, "missing %s in\n%s", want[i], t);
    free(t);
    ptx_module_free(m);

    /* on sm_80: the directive and the special register are refused */
    m = module("sm_80", 90);
    f = ptx_fn_new(m, "k");
    f->maxclusterrank = 4;
    cr_expect_eq(ptx_module_finish(m), PT_EUNSUPPORTED);
    cr_expect_str_eq(ptx_module_errmsg(m), ".maxclusterrank needs sm_90 and PTX 7.8; target is sm_80");
    ptx_module_free(m);
    m = module("sm_80", 90);
    f = ptx_fn_new(m, "k");
    r = ptx_reg_new(f, PTX_T_B32);
    cr_expect_null(ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r),
                            ptx_sr(PTX_S_CLUSTERID_X)));
    cr_expect_str_eq(ptx_module_errmsg(m), "mov.u32 needs sm_90 and PTX 7.8; target is sm_80");
    ptx_module_free(m);
    /* %is_explicit_cluster is a predicate */
    m = module("sm_90", 90);
    f = ptx_fn_new(m, "k");
    r = ptx_reg_new(f, PTX_T_B32);
    cr_expect_null(ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r),
                            ptx_sr(PTX_S_IS_EXPLICIT_CLUSTER)));
    cr_expect(strstr(ptx_module_errmsg(m), "%is_explicit_cluster is a predicate"), "%s",
              ptx_module_errmsg(m));
    ptx_module_free(m);
    /* a remote arrive's destination is the sink */
    m = module("sm_90", 90);
    f = ptx_fn_new(m, "k");
    ptx_reg st = ptx_reg_new(f, PTX_T_B64);
    bar = ptx_reg_new(f, PTX_T_B32);
    cr_expect_null(ptx_emit(f, PTX_OP_MBAR_ARRIVE, PTX_MODS(PTX_M_SHARED_CLUSTER), PTX_T1(PTX_T_B64),
                            ptx_r(st), ptx_addr(bar, 0)));
    cr_expect(strstr(ptx_module_errmsg(m), "must be the sink '_' with .shared::cluster"), "%s",
              ptx_module_errmsg(m));
    ptx_module_free(m);
}
