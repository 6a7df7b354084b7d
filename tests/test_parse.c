/* The PTX parser: round trips (builder -> print -> parse -> print, byte for
 * byte, and the same IR), the hand-written fixtures under tests/ptx/ (parse,
 * print, re-parse, assemble with ptxas when present), the structure of what
 * was parsed, and malformed inputs, each of which must fail with
 * "file:line:col: message" and never crash. Every text is handed over in a
 * buffer of exactly its length (no NUL) so ASan sees any over-read. */
#include "ptx/parse.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PTXAS "/usr/local/cuda/bin/ptxas"

/* ---- helpers ---- */

/* A copy of n bytes with no terminator, for the parser. */
static char *exact(const char *s, size_t n)
{
    char *b = malloc(n ? n : 1);
    cr_assert_not_null(b);
    memcpy(b, s, n);
    return b;
}

static int parse_n(const char *s, size_t n, const char *file, int max_ptx, ptx_module **m,
                   pt_err *e)
{
    char *b = exact(s, n);
    pt_err_clear(e);
    int rc = ptx_parse(b, n, file, max_ptx, m, e);
    free(b);
    return rc;
}

static ptx_module *parse_ok(const char *s, const char *file)
{
    ptx_module *m = NULL;
    pt_err e;
    int rc = parse_n(s, strlen(s), file, 90, &m, &e);
    cr_assert_eq(rc, PT_OK, "%s", e.msg);
    cr_assert_not_null(m);
    return m;
}

/* The message must start "file:line:col: " with line, col >= 1. */
static void assert_located(const char *msg, const char *file)
{
    size_t fl = strlen(file);
    cr_assert(strncmp(msg, file, fl) == 0, "no file name in '%s'", msg);
    regex_t re;
    cr_assert_eq(regcomp(&re, "^:[1-9][0-9]*:[1-9][0-9]*: [^ ]", REG_EXTENDED), 0);
    int hit = regexec(&re, msg + fl, 0, NULL, 0);
    regfree(&re);
    cr_assert_eq(hit, 0, "no line:col in '%s'", msg);
}

static void expect_err(const char *s, size_t n, const char *want)
{
    ptx_module *m = (ptx_module *)1;
    pt_err e;
    int rc = parse_n(s, n, "k.ptx", 90, &m, &e);
    cr_assert_neq(rc, PT_OK, "parsed: %.*s", (int)n, s);
    cr_assert_null(m);
    cr_assert_eq(e.code, rc);
    assert_located(e.msg, "k.ptx");
    if (want)
        cr_assert(strstr(e.msg, want), "'%s' not in '%s'", want, e.msg);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    rewind(fp);
    char *b = malloc((size_t)len + 1);
    cr_assert_eq(fread(b, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    b[len] = '\0';
    *n = (size_t)len;
    return b;
}

/* tests/ptx: from the environment meson sets, else next to this file. */
static void fixture_path(const char *name, char *buf, size_t n)
{
    const char *dir = getenv("PTXTUNE_TESTS_DIR");
    if (dir) {
        snprintf(buf, n, "%s/ptx/%s", dir, name);
        return;
    }
    const char *file = __FILE__, *slash = strrchr(file, '/');
    int dl = slash ? (int)(slash - file) : 1;
    snprintf(buf, n, "%.*s/ptx/%s", dl, slash ? file : ".", name);
}

static char *fixture(const char *name, size_t *n)
{
    char path[1024];
    fixture_path(name, path, sizeof path);
    return slurp(path, n);
}

static const char *const fixtures[] = {"saxpy.ptx", "reduce.ptx", "gemm_warp.ptx",
                                       "softmax_row.ptx"};
enum { NFIX = sizeof fixtures / sizeof fixtures[0] };

/* Assembles text with ptxas for the module's target; skipped without one. */
static void assemble(const char *text, const ptx_module *m)
{
    if (access(PTXAS, X_OK) != 0)
        return;
    char path[] = "/tmp/pt_parse_XXXXXX.ptx", tn[16], cmd[512];
    int fd = mkstemps(path, 4);
    cr_assert_geq(fd, 0);
    size_t len = strlen(text);
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    snprintf(cmd, sizeof cmd, PTXAS " -arch=%s %s -o /dev/null",
             pt_target_name(&m->target, tn, sizeof tn), path);
    int rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "ptxas rejected:\n%s", text);
}

/* ---- IR equality (labels by name: indices follow first appearance) ---- */

static bool same_opd(const ptx_fn *fa, const ptx_opd *a, const ptx_fn *fb, const ptx_opd *b)
{
    if (a->kind != b->kind || a->neg != b->neg)
        return false;
    switch ((ptx_opd_kind)a->kind) {
    case PTX_O_NONE:
    case PTX_O_SINK: return true;
    case PTX_O_REG: return a->u.reg.id == b->u.reg.id;
    case PTX_O_IMM: return a->u.imm == b->u.imm && a->hex == b->hex;
    case PTX_O_F32: return memcmp(&a->u.f32, &b->u.f32, 4) == 0;
    case PTX_O_F64: return memcmp(&a->u.f64, &b->u.f64, 8) == 0;
    case PTX_O_SREG: return a->u.sreg == b->u.sreg;
    case PTX_O_SYM: return strcmp(a->u.sym, b->u.sym) == 0;
    case PTX_O_LABEL: return strcmp(fa->labels[a->u.label], fb->labels[b->u.label]) == 0;
    case PTX_O_ADDR:
        if (a->u.addr.off != b->u.addr.off || !a->u.addr.sym != !b->u.addr.sym)
            return false;
        return a->u.addr.sym ? strcmp(a->u.addr.sym, b->u.addr.sym) == 0
                             : a->u.addr.base.id == b->u.addr.base.id;
    case PTX_O_PAIR: return a->u.pair.d.id == b->u.pair.d.id && a->u.pair.p.id == b->u.pair.p.id;
    case PTX_O_TENSOR:
    case PTX_O_VEC:
        if (a->u.vec.n != b->u.vec.n)
            return false;
        for (int i = 0; i < a->u.vec.n; i++)
            if (!same_opd(fa, &a->u.vec.e[i], fb, &b->u.vec.e[i]))
                return false;
        return true;
    }
    return false;
}

static void assert_same_ir(const ptx_module *a, const ptx_module *b)
{
    cr_assert_eq(a->version, b->version);
    cr_assert_eq(a->target.sm, b->target.sm);
    cr_assert_eq(a->target.arch_specific, b->target.arch_specific);
    cr_assert_eq(a->nshared, b->nshared);
    for (size_t i = 0; i < a->nshared; i++) {
        cr_assert_str_eq(a->shared[i].name, b->shared[i].name);
        cr_assert_eq(a->shared[i].align, b->shared[i].align);
        cr_assert_eq(a->shared[i].is_extern, b->shared[i].is_extern);
    }
    cr_assert_eq(a->nfns, b->nfns);
    for (size_t k = 0; k < a->nfns; k++) {
        const ptx_fn *fa = a->fns[k], *fb = b->fns[k];
        cr_assert_str_eq(fa->name, fb->name);
        cr_assert_eq(fa->nparams, fb->nparams);
        for (size_t i = 0; i < fa->nparams; i++) {
            const ptx_param *pa = &fa->params[i], *pb = &fb->params[i];
            cr_assert_str_eq(pa->name, pb->name);
            cr_assert(pa->type == pb->type && pa->align == pb->align && pa->array == pb->array &&
                          pa->ptr == pb->ptr && pa->ptr_align == pb->ptr_align,
                      "param %s differs", pa->name);
        }
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(fa->maxntid[i] ? fa->maxntid[i] : (fa->maxntid[0] ? 1 : 0),
                         fb->maxntid[i]);
            cr_assert_eq(fa->reqntid[i] ? fa->reqntid[i] : (fa->reqntid[0] ? 1 : 0),
                         fb->reqntid[i]);
        }
        cr_assert_eq(fa->minnctapersm, fb->minnctapersm);
        cr_assert_eq(fa->maxnreg, fb->maxnreg);
        cr_assert_eq(fa->nbanks, fb->nbanks);
        for (size_t i = 0; i < fa->nbanks; i++) {
            const ptx_bank *ba = &fa->banks[i], *bb = &fb->banks[i];
            cr_assert_str_eq(ba->prefix, bb->prefix);
            cr_assert(ba->type == bb->type && ba->count == bb->count && ba->scalar == bb->scalar,
                      "bank %s differs", ba->prefix);
        }
        cr_assert_eq(fa->nshared, fb->nshared);
        for (size_t i = 0; i < fa->nshared; i++) {
            cr_assert_str_eq(fa->shared[i].name, fb->shared[i].name);
            cr_assert_eq(fa->shared[i].bytes, fb->shared[i].bytes);
            cr_assert_eq(fa->shared[i].align, fb->shared[i].align);
        }
        cr_assert_eq(fa->nbody, fb->nbody);
        for (size_t i = 0; i < fa->nbody; i++) {
            const ptx_ins *x = &fa->body[i], *y = &fb->body[i];
            cr_assert(x->op == y->op && x->nmods == y->nmods && x->ntypes == y->ntypes &&
                          x->nopd == y->nopd && x->guard.id == y->guard.id &&
                          x->guard_neg == y->guard_neg && x->line == y->line,
                      "%s: instruction %zu differs", fa->name, i);
            cr_assert(memcmp(x->mods, y->mods, x->nmods) == 0);
            cr_assert(memcmp(x->types, y->types, x->ntypes) == 0);
            for (int j = 0; j < x->nopd; j++)
                cr_assert(same_opd(fa, &x->opd[j], fb, &y->opd[j]),
                          "%s: instruction %zu operand %d differs", fa->name, i, j);
        }
        cr_assert_eq(fa->need_ver, fb->need_ver);
        cr_assert_eq(fa->need_sm, fb->need_sm);
    }
}

/* print -> parse -> print must give the same bytes and the same IR. */
static void round_trip(ptx_module *m)
{
    char *t1 = ptx_print(m); /* also sets every instruction's line */
    ptx_module *m2 = parse_ok(t1, "rt.ptx");
    char *t2 = ptx_print(m2);
    cr_assert_str_eq(t1, t2);
    assert_same_ir(m, m2);
    assemble(t1, m);
    free(t1);
    free(t2);
    ptx_module_free(m2);
}

/* ---- modules built with the builder ---- */

static ptx_module *new_module(const char *arch)
{
    pt_target t;
    pt_err e;
    pt_err_clear(&e);
    cr_assert_eq(pt_target_parse(arch, &t, &e), PT_OK);
    return ptx_module_new(&t, 90);
}

static ptx_reg breg(int bank, uint32_t i) { return (ptx_reg){((uint32_t)(bank + 1) << 20) | i}; }

#define M(...) PTX_MODS(__VA_ARGS__)
#define T(ty) PTX_T1(PTX_T_##ty)
#define R(x) ptx_r(x)

/* Params of every kind, all register families, a scalar register, function
 * and module shared memory, labels both ways, guards, vectors with sinks,
 * every immediate form, symbols as values and in addresses. */
static ptx_module *build_params(void)
{
    ptx_module *m = new_module("sm_80");
    ptx_module_extern_shared(m, "dsm", 16);
    ptx_fn *f = ptx_fn_new(m, "k_params");
    const char *pa = ptx_param_ptr(f, "pa", 16);
    const char *pn = ptx_param_add(f, "n", PTX_T_U32);
    const char *pb = ptx_param_bytes(f, "blob", 8, 16);
    ptx_param_add(f, "alpha", PTX_T_F32);
    ptx_param_ptr(f, "pq", 0);
    f->maxntid[0] = 128;
    f->minnctapersm = 2;
    const char *tile = ptx_shared_add(f, "tile", 16, 4096);
    ptx_reg p0 = ptx_reg_new(f, PTX_T_PRED), p1 = ptx_reg_new(f, PTX_T_PRED);
    ptx_reg rs0 = ptx_reg_new(f, PTX_T_B16), rs1 = ptx_reg_new(f, PTX_T_B16);
    ptx_reg r[8], fr[4];
    for (int i = 0; i < 8; i++)
        r[i] = ptx_reg_new(f, PTX_T_B32);
    ptx_reg rd0 = ptx_reg_new(f, PTX_T_B64);
    for (int i = 0; i < 4; i++)
        fr[i] = ptx_reg_new(f, PTX_T_F32);
    ptx_reg fd0 = ptx_reg_new(f, PTX_T_F64);
    ptx_reg acc = breg(ptx_bank_add(f, "acc", PTX_T_F32, 1, true), 0);
    int l0 = ptx_label_new(f), l1 = ptx_label_new(f);

    ptx_emit(f, PTX_OP_LD, M(PTX_M_PARAM), T(U64), R(rd0), ptx_saddr(pa, 0));
    ptx_emit(f, PTX_OP_LD, M(PTX_M_PARAM), T(U32), R(r[0]), ptx_saddr(pn, 0));
    ptx_emit(f, PTX_OP_LD, M(PTX_M_PARAM), T(U32), R(r[1]), ptx_saddr(pb, 8));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U32), R(r[2]), ptx_sr(PTX_S_TID_X));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U32), R(r[3]), ptx_sym(tile));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U32), R(r[4]), ptx_sym("dsm"));
    ptx_emit(f, PTX_OP_SETP, M(PTX_M_LT), T(U32), R(p0), R(r[2]), R(r[0]));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, PTX_NOMODS, PTX_NOTYPES, ptx_lbl(l1)), p0, true);
    ptx_label_place(f, l0);
    ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, T(S32), R(r[5]), R(r[5]), ptx_imm(-5));
    ptx_emit(f, PTX_OP_AND, PTX_NOMODS, T(B32), R(r[6]), R(r[2]), ptx_hex(0xff));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U64), R(rd0), ptx_imm(INT64_MIN));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U64), R(rd0), ptx_hex(-1));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(F32), R(fr[0]), ptx_f32(1.5f));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(F32), R(fr[0]), ptx_f32(-0.0f));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(F64), R(fd0), ptx_f64(0.25));
    ptx_emit(f, PTX_OP_ST, M(PTX_M_SHARED), T(F32), ptx_addr(r[3], 16), R(fr[0]));
    ptx_emit(f, PTX_OP_LD, M(PTX_M_SHARED), T(F32), R(fr[1]), ptx_saddr(tile, 4));
    ptx_emit(f, PTX_OP_LD, M(PTX_M_SHARED), T(F32), R(fr[1]), ptx_addr(r[3], -4));
    ptx_emit(f, PTX_OP_ST, M(PTX_M_SHARED), T(U32), ptx_saddr("dsm", 8), R(r[2]));
    ptx_opd ve[4] = {R(fr[2]), ptx_sink(), R(fr[3]), ptx_sink()};
    ptx_emit(f, PTX_OP_LD, M(PTX_M_GLOBAL, PTX_M_NC, PTX_M_V4), T(F32), ptx_vec(f, 4, ve),
             ptx_addr(rd0, 16));
    ptx_reg hv[2] = {rs0, rs1};
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(B32), R(r[7]), ptx_vecr(f, 2, hv));
    ptx_opd iv[2] = {ptx_f32(2.0f), R(fr[1])};
    ptx_emit(f, PTX_OP_ST, M(PTX_M_GLOBAL, PTX_M_V2), T(F32), ptx_addr(rd0, 0), ptx_vec(f, 2, iv));
    ptx_emit(f, PTX_OP_SETP, M(PTX_M_EQ, PTX_M_AND), T(U32), R(p1), R(r[0]), ptx_imm(0),
             ptx_notp(p0));
    ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, T(F32), R(acc), R(fr[0]), R(fr[1]), R(p1));
    ptx_emit(f, PTX_OP_FMA, M(PTX_M_RN), T(F32), R(fr[2]), R(acc), R(fr[3]), R(fr[2]));
    ptx_emit(f, PTX_OP_CVT, M(PTX_M_RZI), PTX_TYPES(PTX_T_S32, PTX_T_F32), R(r[5]), R(fr[2]));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, M(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(l0)), p1, false);
    ptx_label_place(f, l1);
    ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    return m;
}

/* The sm_80 warp GEMM vocabulary: cp.async with a guard, groups, barriers,
 * ldmatrix (register and symbol addresses), mma with register and immediate
 * vectors, shuffles, the softmax math and packing. */
static ptx_module *build_gemm(void)
{
    ptx_module *m = new_module("sm_80");
    ptx_fn *f = ptx_fn_new(m, "k_gemm");
    const char *pa = ptx_param_ptr(f, "A", 16);
    const char *pc = ptx_param_ptr(f, "C", 16);
    f->reqntid[0] = 32;
    f->reqntid[1] = 1;
    f->reqntid[2] = 1;
    f->maxnreg = 128;
    const char *sa = ptx_shared_add(f, "sA", 128, 512);
    ptx_reg p = ptx_reg_new(f, PTX_T_PRED), r[12], rd[3], c[4], x[3];
    for (int i = 0; i < 12; i++)
        r[i] = ptx_reg_new(f, PTX_T_B32);
    for (int i = 0; i < 3; i++)
        rd[i] = ptx_reg_new(f, PTX_T_B64);
    for (int i = 0; i < 4; i++)
        c[i] = ptx_reg_new(f, PTX_T_F32);
    for (int i = 0; i < 3; i++)
        x[i] = ptx_reg_new(f, PTX_T_F32);
    ptx_emit(f, PTX_OP_LD, M(PTX_M_PARAM), T(U64), R(rd[0]), ptx_saddr(pa, 0));
    ptx_emit(f, PTX_OP_LD, M(PTX_M_PARAM), T(U64), R(rd[1]), ptx_saddr(pc, 0));
    ptx_emit(f, PTX_OP_CVTA, M(PTX_M_TO, PTX_M_GLOBAL), T(U64), R(rd[0]), R(rd[0]));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U32), R(r[0]), ptx_sr(PTX_S_LANEID));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(U32), R(r[1]), ptx_sym(sa));
    ptx_emit(f, PTX_OP_MAD, M(PTX_M_LO), T(U32), R(r[2]), R(r[0]), ptx_imm(16), R(r[1]));
    ptx_emit(f, PTX_OP_MUL, M(PTX_M_WIDE), T(U32), R(rd[2]), R(r[0]), ptx_imm(16));
    ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, T(S64), R(rd[2]), R(rd[0]), R(rd[2]));
    ptx_emit(f, PTX_OP_SETP, M(PTX_M_LT), T(U32), R(p), R(r[0]), ptx_imm(16));
    ptx_guard(ptx_emit(f, PTX_OP_CP_ASYNC, M(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL), PTX_NOTYPES,
                       ptx_addr(r[2], 0), ptx_addr(rd[2], 0), ptx_imm(16)),
              p, false);
    ptx_emit0(f, PTX_OP_CP_ASYNC_COMMIT, PTX_NOMODS, PTX_NOTYPES);
    ptx_emit(f, PTX_OP_CP_ASYNC_WAIT, PTX_NOMODS, PTX_NOTYPES, ptx_imm(0));
    ptx_emit(f, PTX_OP_BAR, M(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    ptx_emit(f, PTX_OP_LDMATRIX, M(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, PTX_M_X4, PTX_M_SHARED),
             T(B16), ptx_vecr(f, 4, &r[4]), ptx_addr(r[2], 0));
    ptx_emit(f, PTX_OP_LDMATRIX,
             M(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M8N8, PTX_M_X2, PTX_M_TRANS, PTX_M_SHARED), T(B16),
             ptx_vecr(f, 2, &r[8]), ptx_saddr(sa, 256));
    ptx_opd zero[4] = {ptx_f32(0), ptx_f32(0), ptx_f32(0), ptx_f32(0)};
    ptx_types mt = PTX_TYPES(PTX_T_F32, PTX_T_F16, PTX_T_F16, PTX_T_F32);
    ptx_mods mm = M(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_M16N8K16, PTX_M_ROW, PTX_M_COL);
    ptx_emit(f, PTX_OP_MMA, mm, mt, ptx_vecr(f, 4, c), ptx_vecr(f, 4, &r[4]),
             ptx_vecr(f, 2, &r[8]), ptx_vec(f, 4, zero));
    ptx_emit(f, PTX_OP_MMA, mm, mt, ptx_vecr(f, 4, c), ptx_vecr(f, 4, &r[4]),
             ptx_vecr(f, 2, &r[8]), ptx_vecr(f, 4, c));
    ptx_emit(f, PTX_OP_SHFL, M(PTX_M_SYNC, PTX_M_BFLY), T(B32), R(x[0]), R(c[0]), ptx_imm(16),
             ptx_imm(31), ptx_imm(-1));
    ptx_emit(f, PTX_OP_MAX, PTX_NOMODS, T(F32), R(x[0]), R(x[0]), R(c[0]));
    ptx_emit(f, PTX_OP_FMA, M(PTX_M_RN), T(F32), R(x[1]), R(c[1]), ptx_f32(1.44269504f), R(x[0]));
    ptx_emit(f, PTX_OP_EX2, M(PTX_M_APPROX, PTX_M_FTZ), T(F32), R(x[1]), R(x[1]));
    ptx_emit(f, PTX_OP_RCP, M(PTX_M_APPROX, PTX_M_FTZ), T(F32), R(x[2]), R(x[1]));
    ptx_emit(f, PTX_OP_CVT, M(PTX_M_RN), PTX_TYPES(PTX_T_F16X2, PTX_T_F32), R(r[11]), R(x[2]),
             R(x[1]));
    ptx_emit(f, PTX_OP_ST, M(PTX_M_GLOBAL, PTX_M_V2), T(F32), ptx_addr(rd[1], 256),
             ptx_vecr(f, 2, c));
    ptx_emit(f, PTX_OP_ST, M(PTX_M_GLOBAL), T(B32), ptx_addr(rd[1], 0), R(r[11]));
    ptx_emit0(f, PTX_OP_CP_ASYNC_WAIT_ALL, PTX_NOMODS, PTX_NOTYPES);
    ptx_emit0(f, PTX_OP_EXIT, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    return m;
}

/* sm_89 with an fp8 conversion (.version rises to 8.1), two entries, one
 * without parameters, custom register families and scalar predicates, named
 * labels, collectives and atomics. */
static ptx_module *build_multi(void)
{
    ptx_module *m = new_module("sm_89");
    ptx_module_extern_shared(m, "dyn", 8);
    ptx_fn *f = ptx_fn_new(m, "k_fp8");
    const char *po = ptx_param_ptr(f, "out", 0);
    ptx_reg rs = ptx_reg_new(f, PTX_T_B16), a = ptx_reg_new(f, PTX_T_F32),
            b = ptx_reg_new(f, PTX_T_F32), rd = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_LD, M(PTX_M_PARAM), T(U64), R(rd), ptx_saddr(po, 0));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(F32), R(a), ptx_f32(448.0f));
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, T(F32), R(b), ptx_f32(-3.25e-3f));
    ptx_emit(f, PTX_OP_CVT, M(PTX_M_RN, PTX_M_SATFINITE), PTX_TYPES(PTX_T_E4M3X2, PTX_T_F32),
             R(rs), R(a), R(b));
    ptx_emit(f, PTX_OP_ST, M(PTX_M_GLOBAL), T(B16), ptx_addr(rd, 2), R(rs));
    ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);

    ptx_fn *g = ptx_fn_new(m, "k_named");
    int acc = ptx_bank_add(g, "%acc", PTX_T_F32, 4, false);
    int done = ptx_bank_add(g, "%done", PTX_T_PRED, 1, true);
    int idx = ptx_bank_add(g, "%idx", PTX_T_B32, 3, false);
    int ptr = ptx_bank_add(g, "%ptr", PTX_T_B64, 1, false);
    ptx_reg d = breg(done, 0);
    int top = ptx_label_named(g, "loop_top"), out = ptx_label_named(g, "$exit_all");
    ptx_emit(g, PTX_OP_MOV, PTX_NOMODS, T(U32), R(breg(idx, 0)), ptx_imm(0));
    ptx_emit(g, PTX_OP_MOV, PTX_NOMODS, T(U32), R(breg(idx, 2)), ptx_sym("dyn"));
    ptx_emit(g, PTX_OP_MOV, PTX_NOMODS, T(U64), R(breg(ptr, 0)), ptx_sr(PTX_S_CLOCK64));
    ptx_label_place(g, top);
    ptx_emit(g, PTX_OP_ADD, PTX_NOMODS, T(F32), R(breg(acc, 3)), R(breg(acc, 0)),
             ptx_f32(0.5f));
    ptx_emit(g, PTX_OP_ADD, PTX_NOMODS, T(U32), R(breg(idx, 0)), R(breg(idx, 0)), ptx_imm(1));
    ptx_emit(g, PTX_OP_SETP, M(PTX_M_GE), T(U32), R(d), R(breg(idx, 0)), ptx_hex(0x10));
    ptx_guard(ptx_emit(g, PTX_OP_BRA, PTX_NOMODS, PTX_NOTYPES, ptx_lbl(out)), d, false);
    ptx_emit(g, PTX_OP_BRA, PTX_NOMODS, PTX_NOTYPES, ptx_lbl(top));
    ptx_label_place(g, out);
    ptx_emit(g, PTX_OP_BAR_WARP, PTX_NOMODS, PTX_NOTYPES, ptx_imm(-1));
    ptx_emit(g, PTX_OP_VOTE, M(PTX_M_SYNC, PTX_M_BALLOT), T(B32), R(breg(idx, 1)), ptx_notp(d),
             ptx_hex(0xffffffff));
    ptx_emit(g, PTX_OP_REDUX, M(PTX_M_SYNC, PTX_M_ADD), T(U32), R(breg(idx, 1)),
             R(breg(idx, 1)), ptx_imm(-1));
    ptx_emit(g, PTX_OP_ATOM, M(PTX_M_SHARED, PTX_M_ADD), T(U32), R(breg(idx, 1)),
             ptx_saddr("dyn", 4), ptx_imm(1));
    ptx_emit(g, PTX_OP_RED, M(PTX_M_SHARED, PTX_M_ADD), T(F32), ptx_addr(breg(idx, 2), 0),
             R(breg(acc, 3)));
    ptx_emit0(g, PTX_OP_MEMBAR, M(PTX_M_GL), PTX_NOTYPES);
    ptx_emit0(g, PTX_OP_FENCE, M(PTX_M_ACQ_REL, PTX_M_GPU), PTX_NOTYPES);
    ptx_guard(ptx_emit0(g, PTX_OP_TRAP, PTX_NOMODS, PTX_NOTYPES), d, true);
    ptx_emit0(g, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    cr_assert_eq(m->version, 81);
    return m;
}

Test(parse_roundtrip, builder_params)
{
    ptx_module *m = build_params();
    round_trip(m);
    ptx_module_free(m);
}

Test(parse_roundtrip, builder_gemm)
{
    ptx_module *m = build_gemm();
    round_trip(m);
    ptx_module_free(m);
}

Test(parse_roundtrip, builder_multi)
{
    ptx_module *m = build_multi();
    round_trip(m);
    ptx_module_free(m);
}

Test(parse_roundtrip, empty_module_and_entry)
{
    ptx_module *m = new_module("sm_90a");
    ptx_fn *f = ptx_fn_new(m, "nothing");
    ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK);
    round_trip(m);
    ptx_module_free(m);
    m = new_module("sm_86");
    round_trip(m);
    ptx_module_free(m);
}

/* ---- fixtures ---- */

static void fixture_round_trip(const char *name)
{
    size_t n;
    char *src = fixture(name, &n);
    ptx_module *m = NULL;
    pt_err e;
    cr_assert_eq(parse_n(src, n, name, 90, &m, &e), PT_OK, "%s", e.msg);
    assemble(src, m);
    char *t1 = ptx_print(m);
    ptx_module *m2 = parse_ok(t1, name);
    char *t2 = ptx_print(m2);
    cr_assert_str_eq(t1, t2);
    assert_same_ir(m, m2);
    assemble(t1, m2);
    /* and the printed text is a fixed point */
    ptx_module *m3 = parse_ok(t2, name);
    char *t3 = ptx_print(m3);
    cr_assert_str_eq(t2, t3);
    free(t1);
    free(t2);
    free(t3);
    ptx_module_free(m);
    ptx_module_free(m2);
    ptx_module_free(m3);
    free(src);
}

Test(parse_fixture, saxpy) { fixture_round_trip("saxpy.ptx"); }
Test(parse_fixture, reduce) { fixture_round_trip("reduce.ptx"); }
Test(parse_fixture, gemm_warp) { fixture_round_trip("gemm_warp.ptx"); }
Test(parse_fixture, softmax_row) { fixture_round_trip("softmax_row.ptx"); }

static size_t count_op(const ptx_fn *f, ptx_op op)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nbody; i++)
        n += f->body[i].op == op;
    return n;
}

/* The source line of the first line containing needle (1-based). */
static int line_of(const char *src, const char *needle)
{
    const char *hit = strstr(src, needle);
    cr_assert_not_null(hit, "'%s' not in the fixture", needle);
    int line = 1;
    for (const char *s = src; s < hit; s++)
        line += *s == '\n';
    return line;
}

Test(parse_fixture, gemm_structure)
{
    size_t n;
    char *src = fixture("gemm_warp.ptx", &n);
    ptx_module *m = parse_ok(src, "gemm_warp.ptx");
    cr_assert_eq(m->version, 70);
    cr_assert_eq(m->target.sm, 80);
    cr_assert_eq(m->nfns, 1);
    ptx_fn *f = m->fns[0];
    cr_assert_str_eq(f->name, "gemm_warp");
    cr_assert_eq(f->nparams, 4);
    cr_assert(f->params[0].ptr && f->params[0].ptr_align == 16);
    cr_assert_eq(f->params[3].type, PTX_T_U32);
    cr_assert_eq(f->reqntid[0], 32);
    cr_assert_eq(f->nshared, 2);
    cr_assert_eq(f->shared[0].bytes, 512);
    cr_assert_eq(f->shared[1].align, 128);
    cr_assert_eq(count_op(f, PTX_OP_MMA), 1);
    cr_assert_eq(count_op(f, PTX_OP_LDMATRIX), 2);
    cr_assert_eq(count_op(f, PTX_OP_CP_ASYNC), 2);
    cr_assert_eq(count_op(f, PTX_OP_CP_ASYNC_COMMIT), 1);
    cr_assert_eq(count_op(f, PTX_OP_CP_ASYNC_WAIT), 1);
    cr_assert_eq(count_op(f, PTX_OP_CP_ASYNC_WAIT_ALL), 1);
    cr_assert_eq(count_op(f, PTX_OP_BAR), 2);
    cr_assert_eq(count_op(f, PTX_OP_LABEL), 2);
    cr_assert_eq(f->need_sm, 80);
    cr_assert_eq(f->need_ver, 70);
    for (size_t i = 0; i < f->nbody; i++) {
        const ptx_ins *in = &f->body[i];
        if (in->op == PTX_OP_MMA) {
            cr_assert_eq(in->line, line_of(src, "\tmma.sync"));
            cr_assert_eq(in->nmods, 5);
            cr_assert_eq(in->ntypes, 4);
            cr_assert_eq(in->types[1], PTX_T_F16);
            for (int j = 0; j < 4; j++)
                cr_assert_eq(in->opd[j].kind, PTX_O_VEC);
            cr_assert_eq(in->opd[1].u.vec.n, 4);
            cr_assert_eq(in->opd[2].u.vec.n, 2);
        }
        if (in->op == PTX_OP_CP_ASYNC && in->guard.id) {
            cr_assert_eq(in->line, line_of(src, "@%p1 cp.async"));
            cr_assert_eq(in->mods[0], PTX_M_CG);
            cr_assert_eq(in->opd[2].u.imm, 16);
        }
        if (in->op == PTX_OP_MOV && in->opd[1].kind == PTX_O_SYM)
            cr_assert(strcmp(in->opd[1].u.sym, "sA") == 0 || strcmp(in->opd[1].u.sym, "sB") == 0);
    }
    ptx_module_free(m);
    free(src);
}

Test(parse_fixture, saxpy_structure)
{
    size_t n;
    char *src = fixture("saxpy.ptx", &n);
    ptx_module *m = parse_ok(src, "saxpy.ptx");
    cr_assert_eq(m->nfns, 2);
    ptx_fn *f = m->fns[0], *g = m->fns[1];
    cr_assert_eq(f->nparams, 4);
    cr_assert_eq(f->params[1].type, PTX_T_F32);
    cr_assert_eq(f->nbanks, 4);
    cr_assert_str_eq(f->banks[2].prefix, "%f");
    cr_assert_eq(f->banks[2].count, 5);
    cr_assert_eq(f->nlabels, 1);
    cr_assert_str_eq(f->labels[0], "$L__BB0_2");
    /* a forward branch: bra refers to the label placed later */
    const ptx_ins *bra = NULL;
    for (size_t i = 0; i < f->nbody; i++)
        if (f->body[i].op == PTX_OP_BRA)
            bra = &f->body[i];
    cr_assert_not_null(bra);
    cr_assert_eq(bra->opd[0].kind, PTX_O_LABEL);
    cr_assert_eq(bra->opd[0].u.label, 0);
    cr_assert(bra->guard.id && !bra->guard_neg);
    cr_assert_eq(g->maxntid[0], 256);
    cr_assert_eq(g->minnctapersm, 2);
    cr_assert_eq(count_op(g, PTX_OP_LABEL), 2);
    bool neg_guard = false;
    for (size_t i = 0; i < g->nbody; i++)
        neg_guard |= g->body[i].guard_neg;
    cr_assert(neg_guard);
    /* the builder can extend a parsed entry: %r<6> becomes %r<7> */
    ptx_reg r = ptx_reg_new(f, PTX_T_B32);
    cr_assert_eq(PTX_REG_IDX(r), 6);
    cr_assert_eq(PTX_REG_BANK(r), 1);
    char *t = ptx_print(m);
    cr_assert(strstr(t, ".reg .b32 %r<7>;"));
    cr_assert_eq(strstr(t, ".reg .b32 %r<7>;"), strstr(t, ".reg .b32 %r<"));
    free(t);
    ptx_module_free(m);
    free(src);
}

Test(parse_fixture, reduce_and_softmax_operands)
{
    size_t n;
    char *src = fixture("reduce.ptx", &n);
    ptx_module *m = parse_ok(src, "reduce.ptx");
    cr_assert_eq(m->nshared, 1);
    cr_assert(m->shared[0].is_extern);
    cr_assert_str_eq(m->shared[0].name, "red_smem");
    ptx_fn *f = m->fns[0];
    int hex = 0, oct = 0, neg = 0;
    for (size_t i = 0; i < f->nbody; i++) {
        const ptx_ins *in = &f->body[i];
        if (in->op != PTX_OP_SHFL)
            continue;
        hex += in->opd[4].hex && in->opd[4].u.imm == 0xffffffff;
        hex += in->opd[3].hex && in->opd[3].u.imm == 31;
        oct += !in->opd[3].hex && in->opd[3].u.imm == 31;
        neg += in->opd[4].u.imm == -1 && !in->opd[4].hex;
    }
    cr_assert_eq(hex, 2);
    cr_assert_eq(oct, 4); /* 31, 31, 037, 31U */
    cr_assert_eq(neg, 4);
    cr_assert_eq(count_op(f, PTX_OP_TRAP), 1);
    ptx_module_free(m);
    free(src);

    src = fixture("softmax_row.ptx", &n);
    m = parse_ok(src, "softmax_row.ptx");
    f = m->fns[0];
    cr_assert_eq(f->params[2].array, 16);
    cr_assert_eq(f->params[2].align, 8);
    cr_assert_eq(f->maxntid[0], 128);
    cr_assert_eq(f->maxntid[1], 1);
    cr_assert_eq(f->maxnreg, 64);
    int f32imm = 0, f64imm = 0, scalars = 0;
    for (size_t i = 0; i < f->nbanks; i++)
        scalars += f->banks[i].scalar;
    cr_assert_eq(scalars, 3);
    for (size_t i = 0; i < f->nbody; i++)
        for (int j = 0; j < f->body[i].nopd; j++) {
            const ptx_opd *o = &f->body[i].opd[j];
            if (o->kind == PTX_O_F32 && o->u.f32 == 1.4426950408889634f)
                f32imm++;
            if (o->kind == PTX_O_F32 && isinf(o->u.f32) && o->u.f32 < 0)
                f32imm++;
            f64imm += o->kind == PTX_O_F64;
        }
    cr_assert_eq(f32imm, 2);
    cr_assert_eq(f64imm, 1);
    ptx_module_free(m);
    free(src);
}

Test(parse_fixture, ptxas_sees_the_fixtures)
{
    for (int i = 0; i < NFIX; i++) {
        size_t n;
        char *src = fixture(fixtures[i], &n);
        ptx_module *m = parse_ok(src, fixtures[i]);
        char *t = ptx_print(m);
        cr_assert(strstr(t, "// Generated by ptxtune"));
        assemble(t, m);
        free(t);
        ptx_module_free(m);
        free(src);
    }
}

/* ---- accepted forms ---- */

#define HDR ".version 7.0\n.target sm_80\n.address_size 64\n"
/* the body starts on line 12 */
#define KERNEL(body)                                                                          \
    HDR ".visible .entry k(\n\t.param .u64 p\n)\n{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n" \
        "\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<8>;\n" body "}\n"

static const ptx_ins *first_ins(const ptx_module *m) { return &m->fns[0]->body[0]; }

Test(parse_accept, immediates)
{
    static const struct {
        const char *src;
        int kind;
        int64_t imm;
        bool hex;
    } cases[] = {
        {KERNEL("\tmov.u32 %r1, 017;\n"), PTX_O_IMM, 15, false},
        {KERNEL("\tmov.u32 %r1, 1U;\n"), PTX_O_IMM, 1, false},
        {KERNEL("\tmov.u32 %r1, -1;\n"), PTX_O_IMM, -1, false},
        {KERNEL("\tmov.u32 %r1, 0x10;\n"), PTX_O_IMM, 16, true},
        {KERNEL("\tmov.u32 %r1, 0XFFFFFFFFU;\n"), PTX_O_IMM, 0xffffffff, true},
        {KERNEL("\tmov.u32 %r1, -0x10;\n"), PTX_O_IMM, -16, false},
        {KERNEL("\tmov.u32 %r1, 0b101;\n"), PTX_O_IMM, 5, false},
        {KERNEL("\tmov.u32 %r1, 0;\n"), PTX_O_IMM, 0, false},
        {KERNEL("\tmov.b64 %rd1, 18446744073709551615;\n"), PTX_O_IMM, -1, false},
        {KERNEL("\tmov.b64 %rd1, -9223372036854775808;\n"), PTX_O_IMM, INT64_MIN, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ptx_module *m = parse_ok(cases[i].src, "k.ptx");
        const ptx_opd *o = &first_ins(m)->opd[1];
        cr_assert_eq(o->kind, cases[i].kind, "case %zu", i);
        cr_assert_eq(o->u.imm, cases[i].imm, "case %zu", i);
        cr_assert_eq(o->hex, cases[i].hex, "case %zu", i);
        ptx_module_free(m);
    }
}

Test(parse_accept, float_immediates_follow_the_type)
{
    ptx_module *m = parse_ok(KERNEL("\t.reg .f64 %fd<2>;\n\tmov.f64 %fd1, 1.5;\n"
                                    "\tmov.f32 %f1, 1.5;\n\tmov.f32 %f1, -2.5e-1;\n"
                                    "\tmov.f32 %f1, 0f3F800000;\n\tmov.f64 %fd1, 0d3FF0000000000000;\n"
                                    "\tmov.b32 %r1, 0f7FC00001;\n\tadd.f32 %f1, %f1, 1E2;\n"),
                             "k.ptx");
    const ptx_fn *f = m->fns[0];
    cr_assert_eq(f->body[0].opd[1].kind, PTX_O_F64);
    cr_assert_eq(f->body[0].opd[1].u.f64, 1.5);
    cr_assert_eq(f->body[1].opd[1].kind, PTX_O_F32);
    cr_assert_eq(f->body[1].opd[1].u.f32, 1.5f);
    cr_assert_eq(f->body[2].opd[1].u.f32, -0.25f);
    cr_assert_eq(f->body[3].opd[1].u.f32, 1.0f);
    cr_assert_eq(f->body[4].opd[1].u.f64, 1.0);
    uint32_t bits;
    memcpy(&bits, &f->body[5].opd[1].u.f32, 4);
    cr_assert_eq(bits, 0x7FC00001u); /* a NaN payload survives */
    cr_assert_eq(f->body[6].opd[2].u.f32, 100.0f);
    char *t = ptx_print(m);
    cr_assert(strstr(t, "mov.f64 %fd1, 0d3FF8000000000000;"));
    cr_assert(strstr(t, "mov.f32 %f1, 0fBE800000;"));
    cr_assert(strstr(t, "mov.b32 %r1, 0f7FC00001;"));
    free(t);
    ptx_module_free(m);
}

Test(parse_accept, addresses)
{
    ptx_module *m = parse_ok(KERNEL("\t.shared .align 16 .b8 buf[64];\n"
                                    "\tld.global.f32 %f1, [%rd1+16];\n"
                                    "\tld.global.f32 %f1, [%rd1+-4];\n"
                                    "\tld.global.f32 %f1, [%rd1-4];\n"
                                    "\tld.global.f32 %f1, [%rd1+0x10];\n"
                                    "\tld.shared.f32 %f1, [buf+8];\n"
                                    "\tld.param.u64 %rd2, [p];\n"
                                    "\tld.global.f32 %f1, [%rd1+0];\n"),
                             "k.ptx");
    const ptx_fn *f = m->fns[0];
    cr_assert_eq(f->body[0].opd[1].u.addr.off, 16);
    cr_assert_eq(f->body[1].opd[1].u.addr.off, -4);
    cr_assert_eq(f->body[2].opd[1].u.addr.off, -4);
    cr_assert_eq(f->body[3].opd[1].u.addr.off, 16);
    cr_assert_str_eq(f->body[4].opd[1].u.addr.sym, "buf");
    cr_assert_eq(f->body[4].opd[1].u.addr.off, 8);
    cr_assert_str_eq(f->body[5].opd[1].u.addr.sym, "p");
    char *t = ptx_print(m);
    cr_assert(strstr(t, "[%rd1+-4]"));
    cr_assert(strstr(t, "ld.global.f32 %f1, [%rd1];"));
    free(t);
    ptx_module_free(m);
}

Test(parse_accept, declarations_and_scopes)
{
    const char *src = "// header comment\n/* block\n comment */ .version 7.8 .target sm_90\n"
                      ".shared .align 4 .b8 gtab[64];\n"
                      ".extern .shared .align 16 .f32 dyn[];\n"
                      ".entry plain\n{\n"
                      "\t.reg .b32 a, b, c;\n\t.reg .b32 x<2>, y;\n"
                      "\t.shared .f32 words[8];\n\t.shared .u16 one;\n"
                      "\tmov.u32 a, gtab;\n\tmov.u32 b, dyn;\n\tmov.u32 c, words;\n"
                      "\tld.shared.u16 y, [one];\n\tadd.u32 x1, x0, y;\n"
                      "\t{ add.u32 a, a, 1; }\n"
                      "\tret;\n}\n"
                      ".visible .entry second() .reqntid 64 { exit; }\n";
    ptx_module *m = parse_ok(src, "k.ptx");
    cr_assert_eq(m->version, 78);
    cr_assert_eq(m->target.sm, 90);
    cr_assert_eq(m->nshared, 2);
    cr_assert(!m->shared[0].is_extern);
    cr_assert_eq(m->shared[0].bytes, 64);
    cr_assert(m->shared[1].is_extern);
    cr_assert_eq(m->shared[1].align, 16);
    const ptx_fn *f = m->fns[0];
    cr_assert_eq(f->nparams, 0);
    cr_assert_eq(f->nbanks, 5);
    cr_assert(f->banks[0].scalar && f->banks[2].scalar && !f->banks[3].scalar);
    cr_assert_eq(f->shared[0].bytes, 32);
    cr_assert_eq(f->shared[0].align, 4);
    cr_assert_eq(f->shared[1].bytes, 2);
    cr_assert_eq(f->nbody, 7);
    cr_assert_eq(m->fns[1]->reqntid[0], 64);
    cr_assert_eq(m->fns[1]->reqntid[2], 1);
    ptx_module_free(m);
}

Test(parse_accept, not_nul_terminated_and_unnamed)
{
    const char *src = KERNEL("\tret;\n") "this trailing text is outside the length";
    size_t n = strlen(KERNEL("\tret;\n"));
    ptx_module *m = NULL;
    pt_err e;
    cr_assert_eq(parse_n(src, n, NULL, 90, &m, &e), PT_OK, "%s", e.msg);
    ptx_module_free(m);
    cr_assert_neq(parse_n(src, n + 5, NULL, 90, &m, &e), PT_OK);
    assert_located(e.msg, "<input>");
}

Test(parse_accept, register_limits)
{
    ptx_module *m = parse_ok(KERNEL("\t.reg .b32 %big<1048576>;\n\tmov.u32 %big1048575, 1;\n"),
                             "k.ptx");
    cr_assert_eq(m->fns[0]->banks[4].count, 1u << 20);
    ptx_module_free(m);
    /* many scalar names and many uses stay fast (hashed names) */
    pt_buf b;
    pt_buf_init(&b);
    pt_buf_puts(&b, HDR ".entry k\n{\n");
    for (int i = 0; i < PTX_PARSE_MAX_BANKS; i++)
        pt_buf_printf(&b, "\t.reg .b32 v%d;\n", i);
    for (int i = 0; i < 20000; i++)
        pt_buf_printf(&b, "\tadd.u32 v%d, v%d, v%d;\n", i % 4000, (i * 7) % 4000, (i * 13) % 4000);
    pt_buf_puts(&b, "}\n");
    m = parse_ok(b.s, "k.ptx");
    cr_assert_eq(m->fns[0]->nbody, 20000);
    ptx_module_free(m);
    pt_buf_free(&b);
}

/* ---- errors with exact positions ---- */

static void expect_exact(const char *src, int max_ptx, const char *msg)
{
    ptx_module *m = NULL;
    pt_err e;
    cr_assert_neq(parse_n(src, strlen(src), "k.ptx", max_ptx, &m, &e), PT_OK);
    cr_assert_str_eq(e.msg, msg);
}

Test(parse_errors, exact_messages)
{
    /* issue 9 item 10: an arch-specific instruction in a plain sm_90 file */
    expect_exact(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
                 "\tsetmaxnreg.dec.sync.aligned.u32 40;\n\tret;\n}\n",
                 90, "k.ptx:6:2: setmaxnreg.dec.sync.aligned.u32 needs sm_90a; target is sm_90");
    expect_exact(KERNEL("\tad.u32 %r1, %r2, %r3;\n"), 90, "k.ptx:12:2: unknown opcode 'ad'");
    expect_exact(KERNEL("\tadd.u32 %r1, %r2, %r99;\n"), 90,
                 "k.ptx:12:20: undeclared register '%r99'");
    expect_exact(HDR ".entry k\n{\n\tret;\n", 90, "k.ptx:7:1: unexpected end of file in entry 'k'");
    expect_exact(KERNEL("\tadd.u32 %f1, %f2, %f3;\n"), 90,
                 "k.ptx:12:2: add.u32: type mismatch at operand 1: register of type .f32 where 32 "
                 "bits are needed");
    expect_err(KERNEL("\tadd.u32 %r1, %r2;\n"), strlen(KERNEL("\tadd.u32 %r1, %r2;\n")),
               "k.ptx:12:2: add.u32: wrong operand count: 2 operands, expected 3");
    expect_exact(KERNEL("\tadd.qq.u32 %r1, %r2, %r3;\n"), 90,
                 "k.ptx:12:6: unknown modifier 'qq' in 'add.qq.u32'");
    expect_exact(KERNEL("\tbra L9;\n\tret;\n"), 90, "k.ptx:12:6: undefined label 'L9' in entry 'k'");
    expect_exact(KERNEL("L1:\nL1:\n"), 90, "k.ptx:13:1: duplicate label 'L1' (first defined at 12:1)");
    expect_exact(KERNEL("\tcp.async.cg.shared.global.L2::128B [%r1], [%rd1], 16;\n"), 90,
                 "k.ptx:12:2: cp.async.cg.shared.global.L2::128B needs PTX 7.4 but the file "
                 "declares .version 7.0");
    expect_exact(".version 8.1\n.target sm_80\n", 80,
                 "k.ptx:1:10: .version 8.1 is above what the toolchain accepts (PTX 8.0)");
    expect_exact("/* open\n\n", 90, "k.ptx:1:1: unterminated /* comment");
}

/* Issue 9 item 9: the modifier orders ptxas 13.0 refuses (probed on sm_80
 * and sm_90) are refused by the parser with the table's message, and the
 * orders it takes are taken. */
Test(parse_errors, modifier_order)
{
    expect_exact(KERNEL("\tcp.async.ca.global.shared [%r1], [%rd1], 16;\n"), 90,
                 "k.ptx:12:2: cp.async.ca.global.shared: modifier order: .shared before .global "
                 "(the destination space first)");
    expect_exact(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
                 "\tsetmaxnreg.sync.aligned.dec.u32 40;\n\tret;\n}\n",
                 90, "k.ptx:6:2: setmaxnreg.sync.aligned.dec.u32: modifier order: .dec before "
                     ".sync (the action first)");
    expect_exact(KERNEL("\tld.v4.global.f32 {%f1, %f2, %f3, %f4}, [%rd1];\n"), 90,
                 "k.ptx:12:2: ld.v4.global.f32: modifier order: .global before .v4 (the vector "
                 "width last)");
    expect_exact(KERNEL("\tst.global.v2.cs.f32 [%rd1], {%f1, %f2};\n"), 90,
                 "k.ptx:12:2: st.global.v2.cs.f32: modifier order: .cs before .v2 (the vector "
                 "width last)");
    expect_exact(KERNEL("\tcvta.global.to.u64 %rd1, %rd2;\n"), 90,
                 "k.ptx:12:2: cvta.global.to.u64: modifier order: .to before .global (cvta.to.space)");
    expect_exact(KERNEL("\tmad.sat.hi.s32 %r1, %r2, %r3, %r4;\n"), 90,
                 "k.ptx:12:2: mad.sat.hi.s32: modifier order: .hi before .sat (mad.hi.sat)");
    expect_exact(KERNEL("\tdiv.ftz.full.f32 %f1, %f2, %f3;\n"), 90,
                 "k.ptx:12:2: div.ftz.full.f32: modifier order: .full before .ftz (div.full.ftz)");
    expect_exact(KERNEL("\tbarrier.aligned.arrive 1, 64;\n"), 90,
                 "k.ptx:12:2: barrier.aligned.arrive: modifier order: .arrive before .aligned "
                 "(barrier.arrive.aligned)");
    expect_exact(KERNEL("\tmma.sync.aligned.m16n8k8.col.row.f32.tf32.tf32.f32 {%f1, %f2, %f3, %f4}, "
                        "{%r1, %r2, %r3, %r4}, {%r1, %r2}, {%f1, %f2, %f3, %f4};\n"),
                 90, "k.ptx:12:2: mma.sync.aligned.m16n8k8.col.row.f32.tf32.tf32.f32: modifier "
                     "order: .row before .col (the layouts of A then B)");
    /* modifiers come before the types (stricter than ptxas, see parse.c) */
    expect_exact(KERNEL("\tadd.f32.rn %f1, %f2, %f3;\n"), 90,
                 "k.ptx:12:10: modifier 'rn' after the type in 'add.f32.rn'");
    /* orders ptxas takes */
    static const char *const ok[] = {
        "\tcp.async.shared.global.ca [%r1], [%rd1], 16;\n",
        "\tcp.async.shared.ca.global [%r1], [%rd1], 16;\n",
        "\tcvt.sat.rni.s32.f32 %r1, %f1;\n",
        "\tcvt.sat.rn.f32.s32 %f1, %r1;\n",
        "\tatom.add.global.u32 %r1, [%rd1], %r2;\n",
        "\tld.nc.global.v2.f32 {%f1, %f2}, [%rd1];\n",
        "\tmma.aligned.sync.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1, %f2, %f3, %f4}, "
        "{%r1, %r2, %r3, %r4}, {%r1, %r2}, {%f1, %f2, %f3, %f4};\n",
        "\tsetp.ftz.lt.f32 %p1, %f1, %f2;\n",
        "\tdiv.ftz.approx.f32 %f1, %f2, %f3;\n",
        "\tbarrier.aligned.sync 0;\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        static const char pre[] = KERNEL("");
        char src[1024];
        int n = snprintf(src, sizeof src, "%.*s%s}\n", (int)(sizeof pre - 3), pre, ok[i]);
        cr_assert(n > 0 && (size_t)n < sizeof src);
        ptx_module *m = NULL;
        pt_err e;
        cr_expect_eq(parse_n(src, (size_t)n, "k.ptx", 90, &m, &e), PT_OK, "%s: %s", ok[i], e.msg);
        ptx_module_free(m);
    }
}

/* ---- malformed inputs ---- */

typedef struct bad {
    const char *src;
    const char *want;
} bad;

static const bad bad_cases[] = {
    /* header */
    {"", "expected '.version'"},
    {"   \n\n", "unexpected end of file"},
    {".version 7", "bad .version"},
    {".version 7.", "bad .version"},
    {".version x.y\n", "expected a version"},
    {".version 6.5\n.target sm_80\n", "below the minimum"},
    {".version 9.1\n.target sm_80\n", "above what the toolchain accepts"},
    {".version 7.0\n.target sm_70\n", "unknown arch 'sm_70'"},
    {".version 7.0\n.target compute_80\n", "unknown arch"},
    {".version 7.0\n.target sm_80\n.address_size 32\n", "32-bit"},
    {".version 7.0\n.target sm_80\n.address_size 48\n", "expected .address_size 64"},
    {".version 7.0\n.target sm_80, debug\n", "options are not supported"},
    {".version 7.0\n.version 7.0\n", "expected '.target'"},
    {".version 7.0\n.target\n", "expected a target"},
    {".version 7.0\n.target sm_80000000000000000000000000000000000000\n", "unknown arch"},
    /* module scope */
    {HDR ".global .u32 g;\n", "unsupported module-scope directive '.global'"},
    {HDR ".visible .func f()\n", "unsupported directive '.func' after .visible"},
    {HDR ".visible k\n", "expected '.entry' after '.visible'"},
    {HDR ".extern .shared .align 16 .b8 d[16];\n", "an .extern .shared array has no size"},
    {HDR ".extern .shared .align 16 .b8 d;\n", "'[]'"},
    {HDR ".extern .global .b8 d[];\n", "expected '.shared' after '.extern'"},
    {HDR ".shared .align 3 .b8 x[4];\n", "not a power of two"},
    {HDR ".shared .align 0 .b8 x[4];\n", "out of range"},
    {HDR ".shared .align 16 .pred x[4];\n", "cannot have type .pred"},
    {HDR ".shared .align 16 .b8 x[99999999999];\n", "out of range"},
    {HDR ".shared .align 16 .b64 x[16777216];\n", "too large"},
    {HDR ".shared .b8 x[4];\n.shared .b8 x[4];\n", "duplicate module-scope name 'x'"},
    {HDR ".entry k { ret; }\n.entry k { ret; }\n", "duplicate module-scope name 'k'"},
    {HDR "foo\n", "expected '.entry'"},
    {HDR ".entry %k { ret; }\n", "expected an entry name"},
    {HDR ".entry k { ret; }\n}\n", "expected '.entry'"},
    /* entry header */
    {HDR ".entry k(.param .u64 p { ret; }\n", "expected ',' or ')' after a parameter"},
    {HDR ".entry k(.param .u99 p) { ret; }\n", "unknown type '.u99'"},
    {HDR ".entry k(.param .u32 .ptr .global p) { ret; }\n", "needs a plain .u64"},
    {HDR ".entry k(.param .u64 .ptr .shared p) { ret; }\n", "'.global' after '.ptr'"},
    {HDR ".entry k(.param .u64 .ptr .global p[4]) { ret; }\n", "cannot be an array"},
    {HDR ".entry k(.param .b8 p[0]) { ret; }\n", "out of range"},
    {HDR ".entry k(.param .b8 p[70000]) { ret; }\n", "out of range"},
    {HDR ".entry k(.param .u32 p, .param .u32 p) { ret; }\n", "duplicate definition of 'p'"},
    {HDR ".entry k(.reg .b32 p) { ret; }\n", "expected '.param'"},
    {HDR ".entry k(.param .u32) { ret; }\n", "expected a parameter name"},
    {HDR ".entry k(.param .u32 p,) { ret; }\n", "expected '.param'"},
    {HDR ".entry k .maxntid 0 { ret; }\n", "out of range"},
    {HDR ".entry k .maxntid 99999999999 { ret; }\n", "out of range"},
    {HDR ".entry k .maxntid 128 .reqntid 128 { ret; }\n", "cannot both be given"},
    {HDR ".entry k .maxntid 1, 2, 3, 4 { ret; }\n", "expected '{'"},
    {HDR ".entry k .maxnreg 32 .maxnreg 32 { ret; }\n", "duplicate '.maxnreg'"},
    {HDR ".entry k .minnctapersm -1 { ret; }\n", "'.minnctapersm'"},
    {HDR ".entry k .noreturn { ret; }\n", "unsupported directive '.noreturn' for entry"},
    {HDR ".entry k ret; }\n", "expected '{' to open the body"},
    {HDR ".entry k {", "unexpected end of file in entry 'k'"},
    {HDR ".entry", "expected an entry name"},
    /* declarations */
    {KERNEL("\t.reg .b32 %q<999999999>;\n"), "register count"},
    {KERNEL("\t.reg .b32 %q<1048577>;\n"), "out of range"},
    {KERNEL("\t.reg .pred %q<0>;\n"), "register count '0' out of range"},
    {KERNEL("\t.reg .b32 %q<-1>;\n"), "expected register count"},
    {KERNEL("\t.reg .b32 %q<4;\n"), "expected '>'"},
    {KERNEL("\t.reg .b32 %r<4>;\n"), "duplicate definition"},
    {KERNEL("\t.reg .b32 %r1;\n"), "duplicate definition of '%r1'"},
    {KERNEL("\t.reg .b32 %x1<4>;\n"), "must not end in a digit"},
    {KERNEL("\t.reg .b32 %s3;\n\t.reg .b32 %s<4>;\n"), "repeats a name"},
    {KERNEL("\t.reg .b32 %laneid;\n"), "duplicate definition of '%laneid'"},
    {KERNEL("\t.reg .b32 %clock<100>;\n"), "repeats a name"},
    {HDR ".entry k(.param .u32 x3)\n{\n\t.reg .b32 x<4>;\n}\n", "repeats a name"},
    {KERNEL("\t.shared .b8 s7[4];\n\t.reg .b32 s<8>;\n"), "repeats a name"},
    {KERNEL("\t.reg .v4 .f32 %v<2>;\n"), "vector registers"},
    {KERNEL("\t.reg .b32 a b;\n"), "expected ',' or ';' in .reg"},
    {KERNEL("\t.reg .b32 <4>;\n"), "expected a register name"},
    {KERNEL("\t.reg .zz %z;\n"), "unknown type '.zz'"},
    {KERNEL("\t.reg %z;\n"), "expected a type"},
    {KERNEL("\t.reg .b32 %a123456789012345678901234567890123456789012345678901234567890;\n"),
     "longer than 48 bytes"},
    {KERNEL("\t.shared .align 16 .b8 s[16]\n\tret;\n"), "expected ';'"},
    {KERNEL("\t.shared .align 16 .b8 p[16];\n"), "duplicate definition of 'p'"},
    {KERNEL("\t.shared .align 16 .b8 s[];\n"), "expected .shared array size"},
    {KERNEL("\t.local .b8 buf[16];\n"), "unsupported directive '.local'"},
    {KERNEL("\t.pragma \"unroll\";\n"), "unsupported pragma 'unroll' (only \"nounroll\")"},
    {KERNEL("\t.pragma \" nounroll\";\n"), "unsupported pragma (only \"nounroll\")"},
    {KERNEL("\t.pragma nounroll;\n"), "expected a quoted pragma"},
    {KERNEL("\t.pragma \"nounroll\"\n\tret;\n"), "expected ';' after the pragma"},
    {KERNEL("\t.extern .shared .b8 d[];\n"), "unsupported directive '.extern'"},
    {KERNEL("\t{\n\t.reg .b32 %t;\n\t}\n"), "declarations inside nested"},
    {KERNEL("\t{\n\tret;\n"), "unexpected end of file in entry 'k'"},
    /* opcodes and modifiers */
    {KERNEL("\tad.u32 %r1, %r2, %r3;\n"), "unknown opcode 'ad'"},
    {KERNEL("\t%r1.u32 %r1, %r2, %r3;\n"), "unknown opcode '%r1'"},
    {KERNEL("\tadd.zz.u32 %r1, %r2, %r3;\n"), "unknown modifier 'zz'"},
    {KERNEL("\tadd..u32 %r1, %r2, %r3;\n"), "empty modifier"},
    {KERNEL("\tadd.u32. %r1, %r2, %r3;\n"), "empty modifier"},
    {KERNEL("\tadd.rn.rn.rn.rn.rn.rn.rn.rn.rn.rn.rn.f32 %f1, %f2, %f3;\n"), "more than 10 modifiers"},
    {KERNEL("\tadd.u32.u32.u32.u32.u32 %r1, %r2, %r3;\n"), "more than 4 types"},
    {KERNEL("\tadd.wide.u32 %r1, %r2, %r3;\n"), "modifier not allowed"},
    {KERNEL("\tadd.b32 %r1, %r2, %r3;\n"), "type not allowed"},
    {KERNEL("\tadd %r1, %r2, %r3;\n"), "missing type suffix"},
    {KERNEL("\tshfl.sync.bfly.b64 %rd1, %rd2, 1, 31, -1;\n"), "type not allowed"},
    {KERNEL("\tcp.async.cg.shared.global.L2::128B [%r1], [%rd1], 16;\n"), "needs PTX 7.4"},
    {KERNEL("\t.reg .b16 %h<2>;\n\tcvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2;\n"), "needs sm_89"},
    {KERNEL("\tmma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f0, %f1, %f2, %f3}, "
            "{%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f0, %f1, %f2, %f3};\n"),
     "needs sm_89"},
    /* operand counts and kinds */
    {KERNEL("\tadd.u32 %r1, %r2;\n"), "wrong operand count"},
    {KERNEL("\tadd.u32 %r1, %r2, %r3, %r4;\n"), "wrong operand count"},
    {KERNEL("\tret %r1;\n"), "wrong operand count"},
    {KERNEL("\tbra L1, L2;\nL1:\nL2:\n"), "wrong operand count"},
    {KERNEL("\tld.global.f32 %f1, %rd1;\n"), "wrong kind of operand"},
    {KERNEL("\tcp.async.wait_group %r1;\n"), "wrong kind of operand"},
    {KERNEL("\tmov.u32 %r1, !%r2;\n"), "negation only allowed"},
    {KERNEL("\tsetp.lt.u32 %p1|%p2, %r1, %r2;\n"), "second destination"},
    {KERNEL("\tadd.u32 %f1, %f2, %f3;\n"), "type mismatch"},
    {KERNEL("\tld.global.u32 %f1, [%rd1];\n"), "type mismatch"},
    {KERNEL("\tadd.u64 %rd1, %rd2, %r3;\n"), "type mismatch"},
    {KERNEL("\tsetp.lt.u32 %r1, %r2, %r3;\n"), "expects a predicate"},
    {KERNEL("\tld.global.v2.f32 {%f1, %f2, %f3, %f4}, [%rd1];\n"), "vector size mismatch"},
    {KERNEL("\t.reg .b16 %h<2>;\n\tld.global.f32 %f1, [%h1];\n"), "address register too narrow"},
    /* registers and names */
    {KERNEL("\tadd.u32 %r1, %r2, %r99;\n"), "undeclared register '%r99'"},
    {KERNEL("\tadd.u32 %r1, %r2, %r8;\n"), "undeclared register '%r8'"},
    {KERNEL("\tadd.u32 %r1, %r2, %r01;\n"), "undeclared register '%r01'"},
    {KERNEL("\tadd.u32 %r1, %r2, %r99999999999999999999;\n"), "undeclared register"},
    {KERNEL("\tmov.u32 %r1, nosuch;\n"), "undeclared identifier 'nosuch'"},
    {KERNEL("\tmov.u32 %r1, %tid.w;\n"), "undeclared register '%tid.w'"},
    {KERNEL("\tmov.u32 %r1, .foo;\n"), "expected an operand"},
    {KERNEL("\tmov.u32 %r1, ;\n"), "expected an operand"},
    {KERNEL("\tld.global.f32 %f1, [%rd9];\n"), "undeclared register '%rd9'"},
    {KERNEL("\tld.global.f32 %f1, [nosuch];\n"), "undeclared symbol 'nosuch'"},
    {KERNEL("\tld.global.f32 %f1, [0];\n"), "immediate addresses"},
    {KERNEL("\tld.global.f32 %f1, [%rd1+];\n"), "expected an address offset"},
    {KERNEL("\tld.global.f32 %f1, [%rd1+%r1];\n"), "expected an address offset"},
    {KERNEL("\tld.global.f32 %f1, [%rd1+0x8000000000000000];\n"), "bad address offset"},
    {KERNEL("\tld.global.f32 %f1, [%rd1*2];\n"), "expected ']'"},
    {KERNEL("\tld.global.f32 %f1, [%rd1;\n"), "expected ']'"},
    {KERNEL("\tld.global.f32 %f1, [%rd1"), "expected ']' or '+offset' in the address, found '}'"},
    {HDR ".entry k {\n\t.reg .b64 %rd<2>;\n\tld.global.u64 %rd0, [%rd1",
     "unexpected end of file in entry 'k'"},
    /* immediates */
    {KERNEL("\tadd.u32 %r1, %r2, 0x;\n"), "bad integer immediate"},
    {KERNEL("\tadd.u32 %r1, %r2, 99999999999999999999;\n"), "bad integer immediate"},
    {KERNEL("\tadd.u32 %r1, %r2, 1.5;\n"), "floating-point immediate '1.5' where an integer"},
    {KERNEL("\tadd.s32 %r1, %r2, 0f3F800000;\n"), "where an integer"},
    {KERNEL("\tbar.sync 1.5;\n"), "where an integer"},
    {KERNEL("\tcp.async.cg.shared.global [%r1], [%rd1], 1.5;\n"), "where an integer"},
    {KERNEL("\tmov.f32 %f1, 0f3F80;\n"), "bad f32 immediate"},
    {KERNEL("\tmov.f32 %f1, 0fZZZZZZZZ;\n"), "bad f32 immediate"},
    {KERNEL("\tmov.b64 %rd1, 0d3FF0;\n"), "bad f64 immediate"},
    {KERNEL("\tmov.f32 %f1, 1.5.5;\n"), "bad floating-point immediate"},
    {KERNEL("\tmov.f32 %f1, 1e999;\n"), "bad floating-point immediate"},
    {KERNEL("\tmov.f32 %f1, 1.5e;\n"), "bad floating-point immediate"},
    {KERNEL("\tmov.f32 %f1, 1.5f;\n"), "bad floating-point immediate"},
    {KERNEL("\tmov.u32 %r1, 09;\n"), "bad integer immediate"},
    {KERNEL("\tmov.u32 %r1, 12abc;\n"), "bad integer immediate"},
    {KERNEL("\tmov.u32 %r1, -;\n"), "a number after '-'"},
    {KERNEL("\tmov.u32 %r1, -%r2;\n"), "a number after '-'"},
    {KERNEL("\tmov.f32 %f1, -0f3F800000;\n"), "'-' before a bit-pattern"},
    {KERNEL("\tmov.b64 %rd1, -18446744073709551615;\n"), "out of range"},
    /* vectors */
    {KERNEL("\tld.global.v4.f32 {%f1, %f2, %f3, %f4, [%rd1];\n"), "in the vector"},
    {KERNEL("\tld.global.v4.f32 {%f1, %f2, %f3, %f4 [%rd1];\n"), "expected ',' or '}'"},
    {KERNEL("\tld.global.v4.f32 {}, [%rd1];\n"), "in the vector"},
    {KERNEL("\tmov.b32 %r1, {%r2, {%r3}};\n"), "in the vector"},
    {KERNEL("\tmov.b32 {%f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1, %f1}, %rd1;\n"),
     "more than 128 elements"},
    {KERNEL("\tmov.b32 {%r1, %r9}, %rd1;\n"), "undeclared register '%r9'"},
    {KERNEL("\tmov.b32 {%r1, %tid.x}, %rd1;\n"), "undeclared register '%tid.x'"},
    {KERNEL("\tmov.b64 %rd1, {%r1, %r2"), "unexpected end of file in entry 'k'"},
    /* statements, guards, labels */
    {KERNEL("\tadd.u32 %r1, %r2, %r3\n\tret;\n"), "expected ',' or ';' after an operand, found 'ret'"},
    {KERNEL("\tmov.u32 %r1 %r2;\n"), "found '%r2'"},
    {KERNEL("\t@%p9 bra L;\nL:\n"), "undeclared register '%p9'"},
    {KERNEL("\t@%r1 ret;\n"), "expects a predicate"},
    {KERNEL("\t@ ret;\n"), "undeclared register 'ret'"},
    {KERNEL("\t@!;\n"), "a predicate register after '@'"},
    {KERNEL("\t@%p1 ;\n"), "an instruction after the guard"},
    {KERNEL("\t@%p1 L1:\n"), "a label cannot be guarded"},
    {KERNEL("L1:\nL1:\n"), "duplicate label 'L1'"},
    {KERNEL("\tbra NOWHERE;\n"), "undefined label 'NOWHERE'"},
    {KERNEL("\tbra %r1;\n"), "expected a label"},
    {KERNEL("%r1:\n"), "bad label name"},
    {KERNEL("\t5;\n"), "expected an instruction, label or directive"},
    {KERNEL("\t;\n"), "expected an instruction, label or directive"},
    /* bytes that are not PTX */
    {KERNEL("\tadd.u32 %r1, \x01%r2, %r3;\n"), "found '\\x01'"},
    {KERNEL("\tadd.u32 %r1, %r2, %r3;\xff\n"), "found '\\xff'"},
    {KERNEL("\tret;\n\"str\"\n"), "found '\"'"},
    {"/* never closed", "unterminated /* comment"},
    {KERNEL("\tret; /* open"), "unterminated /* comment"},
};

enum { NBAD = sizeof bad_cases / sizeof bad_cases[0] };

/* Criterion may run each case in a fresh process image, so the parameter is
 * an index into the table, not a pointer. */
ParameterizedTestParameters(parse_malformed, cases)
{
    static int idx[NBAD];
    for (int i = 0; i < NBAD; i++)
        idx[i] = i;
    return cr_make_param_array(int, idx, NBAD);
}

ParameterizedTest(int *i, parse_malformed, cases)
{
    const bad *b = &bad_cases[*i];
    expect_err(b->src, strlen(b->src), b->want);
}

Test(parse_malformed, nul_byte)
{
    static const char src[] = KERNEL("\tadd.u32 %r1, %r2,\0 %r3;\n");
    expect_err(src, sizeof src - 1, "found '\\x00'");
}

Test(parse_malformed, too_many_banks)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_buf_puts(&b, HDR ".entry k\n{\n");
    for (int i = 0; i <= PTX_PARSE_MAX_BANKS; i++)
        pt_buf_printf(&b, "\t.reg .b32 v%d;\n", i);
    pt_buf_puts(&b, "}\n");
    expect_err(b.s, b.len, "too many .reg declarations");
    pt_buf_free(&b);
}

Test(parse_malformed, deep_nesting_is_not_recursion)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_buf_puts(&b, HDR ".entry k\n{\n");
    for (int i = 0; i < 200000; i++)
        pt_buf_putc(&b, '{');
    expect_err(b.s, b.len, "unexpected end of file in entry 'k'");
    for (int i = 0; i < 200000; i++)
        pt_buf_putc(&b, '}');
    pt_buf_puts(&b, "ret; }\n");
    ptx_module *m = parse_ok(b.s, "k.ptx");
    ptx_module_free(m);
    pt_buf_free(&b);
}

/* Whether a prefix of cut bytes stops inside an entry: past ".entry" and
 * the first byte of its name, before the "\n}" that closes it. */
static bool inside_entry(const char *src, size_t cut)
{
    const char *s = src;
    for (;;) {
        const char *b = strstr(s, ".entry"), *e;
        if (!b || (size_t)(b - src) >= cut)
            return false;
        e = strstr(b, "\n}");
        cr_assert_not_null(e);
        if ((size_t)(b + 8 - src) > cut)
            return false;
        if ((size_t)(e + 1 - src) >= cut)
            return true;
        s = e + 2;
    }
}

/* Every prefix of a fixture (every third byte) that stops inside an entry
 * is an error with a position; the others (between entries, in the header)
 * are an error with a position or a module that prints stably. */
static void truncations(const char *name)
{
    size_t n;
    char *src = fixture(name, &n);
    int tried = 0;
    for (size_t cut = 0; cut < n; cut += 3) {
        if (inside_entry(src, cut)) {
            /* at a token boundary "unexpected end of file in entry 'k'";
             * inside a token, whatever the partial token breaks */
            expect_err(src, cut, NULL);
            tried++;
            continue;
        }
        ptx_module *m = NULL;
        pt_err e;
        if (parse_n(src, cut, "k.ptx", 90, &m, &e) != PT_OK) {
            assert_located(e.msg, "k.ptx");
            continue;
        }
        char *t = ptx_print(m);
        ptx_module *m2 = parse_ok(t, "k.ptx");
        char *t2 = ptx_print(m2);
        cr_assert_str_eq(t, t2);
        free(t);
        free(t2);
        ptx_module_free(m);
        ptx_module_free(m2);
    }
    cr_assert_gt(tried, 100);
    free(src);
}

Test(parse_malformed, truncated_saxpy) { truncations("saxpy.ptx"); }
Test(parse_malformed, truncated_reduce) { truncations("reduce.ptx"); }
Test(parse_malformed, truncated_gemm) { truncations("gemm_warp.ptx"); }
Test(parse_malformed, truncated_softmax) { truncations("softmax_row.ptx"); }

/* Flipping bytes may or may not leave valid PTX; either way no crash, a
 * located message on failure and a stable print on success. */
Test(parse_malformed, mutated_fixtures)
{
    static const char junk[] = {'\0', '{', '}', '[', ']', ';', ',', '%', '.', '9', '@', ':', '-', '/'};
    for (int f = 0; f < NFIX; f++) {
        size_t n;
        char *src = fixture(fixtures[f], &n);
        for (size_t at = 0; at < n; at += 5) {
            char *b = exact(src, n);
            b[at] = junk[at % sizeof junk];
            ptx_module *m = NULL;
            pt_err e;
            pt_err_clear(&e);
            if (ptx_parse(b, n, "k.ptx", 90, &m, &e) == PT_OK) {
                char *t = ptx_print(m);
                ptx_module *m2 = parse_ok(t, "k.ptx");
                char *t2 = ptx_print(m2);
                cr_assert_str_eq(t, t2);
                free(t);
                free(t2);
                ptx_module_free(m2);
                ptx_module_free(m);
            } else {
                cr_assert_null(m);
                assert_located(e.msg, "k.ptx");
            }
            free(b);
        }
        free(src);
    }
}

/* ---- issue 12 item 1: the Hopper forms (tests/ptx/sm90/) ---- */

/* Every instruction and directive line of the fixture comes back verbatim
 * from the printer (the fixtures are written in the printer's spelling),
 * and the whole round trip holds (fixture_round_trip: parse, ptxas, print,
 * parse again, same IR, fixed point). */
static void sm90_fixture(const char *name)
{
    fixture_round_trip(name);
    size_t n;
    char *src = fixture(name, &n);
    ptx_module *m = parse_ok(src, name);
    char *t = ptx_print(m);
    int lines = 0;
    for (char *l = src; *l;) {
        char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        if (len && l[0] == '\t' && l[1] != '.') {
            char line[4096];
            cr_assert_lt(len, sizeof line);
            memcpy(line, l, len);
            line[len] = '\0';
            cr_expect(strstr(t, line) != NULL, "%s: not printed back: %s", name, line);
            lines++;
        }
        l = nl ? nl + 1 : l + len;
    }
    cr_expect_gt(lines, 3);
    free(t);
    ptx_module_free(m);
    free(src);
}

Test(parse_sm90, wgmma_forms) { sm90_fixture("sm90/wgmma_sm90a.ptx"); }
Test(parse_sm90, tma_mbarrier_cluster_forms) { sm90_fixture("sm90/hopper_sm90.ptx"); }
Test(parse_sm90, multicast_forms) { sm90_fixture("sm90/multicast_sm90a.ptx"); }
Test(parse_sm90, mbarrier_sm80_forms) { sm90_fixture("sm90/mbarrier_sm80.ptx"); }

/* sm90 ref's listed rejections (tests/ptx/sm90/rejected.txt): the parser
 * refuses each with the table's message, and ptxas refuses each too. */
Test(parse_sm90, listed_rejections)
{
    size_t n;
    char *src = fixture("sm90/rejected.txt", &n);
    int count = 0;
    for (char *l = src; *l;) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        char tgt[16], ver[8];
        char *bar1 = strchr(l, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
        if (*l != '#' && bar2 && sscanf(l, "%15s %7s", tgt, ver) == 2) {
            *bar1 = *bar2 = '\0';
            char *ins = bar1 + 2, *want = bar2 + 2;
            bar2[-1] = '\0'; /* the blank before '|' */
            char text[4096];
            snprintf(text, sizeof text,
                     ".version %s\n.target %s\n.address_size 64\n\n.visible .entry k(\n"
                     "\t.param .align 64 .b8 tm[128]\n)\n{\n\t.reg .pred %%p<4>;\n"
                     "\t.reg .b16 %%rs<4>;\n\t.reg .b32 %%r<140>;\n\t.reg .b64 %%rd<8>;\n"
                     "\t.reg .f32 %%f<140>;\n\n\t%s\n\tret;\n}\n",
                     ver, tgt, ins);
            ptx_module *m = NULL;
            pt_err e;
            pt_err_clear(&e);
            int rc = ptx_parse(text, strlen(text), "r.ptx", 90, &m, &e);
            cr_expect_neq(rc, PT_OK, "the table accepts a listed rejection: %s", ins);
            cr_expect(rc == PT_OK || strstr(e.msg, want) != NULL, "%s\n  got:  %s\n  want: %s", ins,
                      e.msg, want);
            ptx_module_free(m);
            if (access(PTXAS, X_OK) == 0) {
                char path[] = "/tmp/pt_rej_XXXXXX.ptx", cmd[512];
                int fd = mkstemps(path, 4);
                cr_assert_geq(fd, 0);
                cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
                close(fd);
                snprintf(cmd, sizeof cmd, PTXAS " -arch=%s %s -o /dev/null 2>/dev/null", tgt, path);
                cr_expect_neq(system(cmd), 0, "ptxas accepts a listed rejection: %s", ins);
                unlink(path);
            }
            count++;
        }
        l = nl ? nl + 1 : l + strlen(l);
    }
    cr_expect_geq(count, 30);
    free(src);
}
