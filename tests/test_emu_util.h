/* Shared helpers of the emulator tests (tests/test_emu_*.c): build a kernel
 * with the IR builder, print it, assemble it with ptxas when the toolkit is
 * present (so every test kernel is known to be real PTX), load it into the
 * emulator and run it. Expected values are always computed in the test
 * itself from the ISA definition, never by calling emulator code. */
#ifndef TEST_EMU_UTIL_H
#define TEST_EMU_UTIL_H

#include "ptx/emu/emu.h"
#include "ptx/ir.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TU __attribute__((unused)) static

#define MD(x) PTX_M_##x
#define TY(x) PTX_T_##x
#define T1(x) PTX_T1(PTX_T_##x)
#define OP(x) PTX_OP_##x
/* Emits into tk t, failing the test on a builder error. */
#define E(op, mods, types, ...)                                                              \
    cr_assert(ptx_emit(t.f, OP(op), mods, types, __VA_ARGS__), "%s", ptx_module_errmsg(t.m))
#define E0(op, mods, types)                                                                  \
    cr_assert(ptx_emit0(t.f, OP(op), mods, types), "%s", ptx_module_errmsg(t.m))
#define NOM PTX_NOMODS
#define MODS(...) PTX_MODS(__VA_ARGS__)

typedef struct tk {
    ptx_module *m;
    ptx_fn *f;
    char *text;
    const char *sm;
    emu_ctx *emu;
    emu_kernel *k;
} tk;

/* A module for target sm ("sm_80", "sm_89") with one entry `name`. */
TU tk tk_new(const char *sm, const char *name)
{
    tk t = {0};
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse(sm, &tg, &e), PT_OK, "%s", e.msg);
    t.m = ptx_module_new(&tg, 90);
    t.f = ptx_fn_new(t.m, name);
    t.sm = sm;
    return t;
}

TU void tk_free(tk *t)
{
    emu_kernel_free(t->k);
    emu_free(t->emu);
    free(t->text);
    ptx_module_free(t->m);
}

TU ptx_reg R32(tk *t) { return ptx_reg_new(t->f, TY(B32)); }
TU ptx_reg R64(tk *t) { return ptx_reg_new(t->f, TY(B64)); }
TU ptx_reg R16(tk *t) { return ptx_reg_new(t->f, TY(B16)); }
TU ptx_reg RF(tk *t) { return ptx_reg_new(t->f, TY(F32)); }
TU ptx_reg RD(tk *t) { return ptx_reg_new(t->f, TY(F64)); }
TU ptx_reg RP(tk *t) { return ptx_reg_new(t->f, TY(PRED)); }

/* A .u64 pointer parameter loaded and converted to a global address. */
TU ptx_reg tk_ptr(tk *t, const char *name)
{
    const char *p = ptx_param_ptr(t->f, name, 0);
    ptx_reg r = R64(t), g = R64(t);
    ptx_emit(t->f, OP(LD), PTX_MODS(MD(PARAM)), T1(U64), ptx_r(r), ptx_saddr(p, 0));
    ptx_emit(t->f, OP(CVTA), PTX_MODS(MD(TO), MD(GLOBAL)), T1(U64), ptx_r(g), ptx_r(r));
    return g;
}

/* A .u32 scalar parameter. */
TU ptx_reg tk_u32(tk *t, const char *name)
{
    const char *p = ptx_param_add(t->f, name, TY(U32));
    ptx_reg r = R32(t);
    ptx_emit(t->f, OP(LD), PTX_MODS(MD(PARAM)), T1(U32), ptx_r(r), ptx_saddr(p, 0));
    return r;
}

TU ptx_reg tk_sreg(tk *t, ptx_sreg s)
{
    ptx_reg r = R32(t);
    ptx_emit(t->f, OP(MOV), PTX_NOMODS, T1(U32), ptx_r(r), ptx_sr(s));
    return r;
}

/* Global linear thread index: ctaid.x * ntid.x + tid.x. */
TU ptx_reg tk_gtid(tk *t)
{
    ptx_reg a = tk_sreg(t, PTX_S_CTAID_X), b = tk_sreg(t, PTX_S_NTID_X), c = tk_sreg(t, PTX_S_TID_X);
    ptx_reg r = R32(t);
    ptx_emit(t->f, OP(MAD), PTX_MODS(MD(LO)), T1(U32), ptx_r(r), ptx_r(a), ptx_r(b), ptx_r(c));
    return r;
}

/* base + idx * size (idx a u32 register). */
TU ptx_reg tk_addr(tk *t, ptx_reg base, ptx_reg idx, int size)
{
    ptx_reg off = R64(t), r = R64(t);
    ptx_emit(t->f, OP(MUL), PTX_MODS(MD(WIDE)), T1(U32), ptx_r(off), ptx_r(idx), ptx_imm(size));
    ptx_emit(t->f, OP(ADD), PTX_NOMODS, T1(S64), ptx_r(r), ptx_r(base), ptx_r(off));
    return r;
}

TU void tk_ret(tk *t) { ptx_emit0(t->f, OP(RET), PTX_NOMODS, PTX_NOTYPES); }

/* Assembles text with ptxas for the module's target; skipped without a
 * toolkit. */
TU void tk_ptxas(const tk *t)
{
    const char *ptxas = "/usr/local/cuda/bin/ptxas";
    if (access(ptxas, X_OK) != 0)
        return;
    char path[] = "/tmp/ptxtune-emu-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    size_t n = strlen(t->text);
    cr_assert_eq(write(fd, t->text, n), (ssize_t)n);
    close(fd);
    char cmd[512], log[sizeof path + 8];
    snprintf(log, sizeof log, "%s.log", path);
    snprintf(cmd, sizeof cmd, "%s -arch=%s %s -o /dev/null >%s 2>&1", ptxas, t->sm, path, log);
    int rc = system(cmd);
    char msg[2048] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        size_t got = fread(msg, 1, sizeof msg - 1, f);
        msg[got] = 0;
        fclose(f);
    }
    unlink(path);
    unlink(log);
    cr_assert_eq(rc, 0, "ptxas rejected the test kernel:\n%s\n%s", msg, t->text);
}

/* Finishes, prints (setting PTX lines), assembles and loads the kernel. */
TU void tk_load_opts(tk *t, const emu_opts *o)
{
    cr_assert_eq(ptx_module_finish(t->m), PT_OK, "%s", ptx_module_errmsg(t->m));
    t->text = ptx_print(t->m);
    tk_ptxas(t);
    t->emu = emu_new(o);
    cr_assert(t->emu);
    pt_err e = {0};
    cr_assert_eq(emu_load(t->emu, t->m, NULL, &t->k, &e), PT_OK, "%s\n%s", e.msg, t->text);
}

TU void tk_load(tk *t)
{
    emu_opts o = emu_default_opts();
    tk_load_opts(t, &o);
}

TU uint64_t tk_buf(tk *t, const void *data, size_t n, const char *name)
{
    uint64_t p = emu_alloc(t->emu, n, name);
    cr_assert(p);
    pt_err e = {0};
    if (data)
        cr_assert_eq(emu_write(t->emu, p, data, n, &e), PT_OK, "%s", e.msg);
    return p;
}

TU void tk_get(tk *t, uint64_t p, void *dst, size_t n)
{
    pt_err e = {0};
    cr_assert_eq(emu_read(t->emu, p, dst, n, &e), PT_OK, "%s", e.msg);
}

/* Runs grid x block (1-D) with args; returns the status. */
TU int tk_run_dims(tk *t, unsigned grid, unsigned block, size_t dyn, const void *const *args,
                   pt_err *e, emu_stats *st)
{
    emu_launch l = {{grid, 1, 1}, {block, 1, 1}, dyn};
    return emu_run(t->emu, t->k, &l, args, st, e);
}

/* Runs and asserts a clean run (no detector report). */
TU void tk_run(tk *t, unsigned grid, unsigned block, const void *const *args)
{
    pt_err e = {0};
    int rc = tk_run_dims(t, grid, block, 0, args, &e, NULL);
    cr_assert_eq(rc, PT_OK, "%s\n%s", e.msg, t->text);
    cr_assert_eq(emu_nreports(t->emu), 0);
}

/* True when some report of `kind` was made; prints the reports. */
TU bool tk_reported(const tk *t, emu_report_kind kind)
{
    for (int i = 0; i < emu_nreports(t->emu); i++)
        if (emu_report_kind_of(t->emu, i) == kind)
            return true;
    return false;
}

TU void tk_dump_reports(const tk *t)
{
    for (int i = 0; i < emu_nreports(t->emu); i++)
        fprintf(stderr, "  report: %s\n", emu_report(t->emu, i));
}

/* Deterministic pseudo-random numbers (xorshift64*). */
TU uint64_t rnd64(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
TU uint32_t rnd32(uint64_t *s) { return (uint32_t)(rnd64(s) >> 32); }

TU float f32of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}
TU uint32_t bitsof(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* ---- one-instruction kernels: out[i] = op(s0[i], s1[i], s2[i], s3[i]) ---- */

typedef struct opcase {
    ptx_op op;
    ptx_mods mods;
    ptx_types types;
    int nsrc;             /* register sources */
    ptx_type sty[4];      /* their types (PRED: stored as a u32 0/1, may be negated) */
    ptx_type dty;         /* result type (PRED: stored as u32 0/1) */
    bool has_imm;         /* a trailing immediate operand (lop3) */
    int64_t imm;
    bool neg[4];          /* negate predicate source i */
} opcase;

TU ptx_reg reg_for(tk *t, ptx_type ty)
{
    if (ty == TY(PRED))
        return RP(t);
    int bits = ptx_type_bits(ty);
    return bits <= 16 ? R16(t) : bits <= 32 ? R32(t) : R64(t);
}

TU ptx_type bty(ptx_type ty)
{
    int bits = ptx_type_bits(ty);
    return bits <= 8 ? TY(B8) : bits <= 16 ? TY(B16) : bits <= 32 ? TY(B32) : TY(B64);
}

/* Builds the kernel for oc on target sm, runs n threads and returns each
 * result zero-extended in out[]. Sources are arrays of n uint64_t. */
TU void run_op(const opcase *oc, const char *sm, int n, const uint64_t *const src[4], uint64_t *out)
{
    tk t = tk_new(sm, "op");
    ptx_reg po = tk_ptr(&t, "out"), ps[4];
    char name[16];
    for (int i = 0; i < oc->nsrc; i++) {
        snprintf(name, sizeof name, "s%d", i);
        ps[i] = tk_ptr(&t, name);
    }
    ptx_reg nn = tk_u32(&t, "n"), i = tk_gtid(&t), p = RP(&t);
    int done = ptx_label_new(t.f);
    ptx_emit(t.f, OP(SETP), PTX_MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(i), ptx_r(nn));
    ptx_guard(ptx_emit(t.f, OP(BRA), PTX_NOMODS, PTX_NOTYPES, ptx_lbl(done)), p, false);
    ptx_opd ops[6];
    ptx_reg d = reg_for(&t, oc->dty);
    ops[0] = ptx_r(d);
    for (int k = 0; k < oc->nsrc; k++) {
        ptx_reg a = tk_addr(&t, ps[k], i, 8);
        if (oc->sty[k] == TY(PRED)) {
            ptx_reg v = R32(&t), q = RP(&t);
            ptx_emit(t.f, OP(LD), PTX_MODS(MD(GLOBAL)), T1(B32), ptx_r(v), ptx_addr(a, 0));
            ptx_emit(t.f, OP(SETP), PTX_MODS(MD(NE)), T1(B32), ptx_r(q), ptx_r(v), ptx_imm(0));
            ops[1 + k] = oc->neg[k] ? ptx_notp(q) : ptx_r(q);
        } else {
            ptx_reg v = reg_for(&t, oc->sty[k]);
            ptx_emit(t.f, OP(LD), PTX_MODS(MD(GLOBAL)), PTX_T1(bty(oc->sty[k])), ptx_r(v), ptx_addr(a, 0));
            ops[1 + k] = ptx_r(v);
        }
    }
    int nops = 1 + oc->nsrc;
    if (oc->has_imm)
        ops[nops++] = ptx_imm(oc->imm);
    cr_assert(ptx_emit_n(t.f, oc->op, oc->mods, oc->types, nops, ops), "%s", ptx_module_errmsg(t.m));
    ptx_reg ad = tk_addr(&t, po, i, 8);
    if (oc->dty == TY(PRED)) {
        ptx_reg v = R32(&t);
        ptx_emit(t.f, OP(SELP), PTX_NOMODS, T1(U32), ptx_r(v), ptx_imm(1), ptx_imm(0), ptx_r(d));
        ptx_emit(t.f, OP(ST), PTX_MODS(MD(GLOBAL)), T1(U32), ptx_addr(ad, 0), ptx_r(v));
    } else
        ptx_emit(t.f, OP(ST), PTX_MODS(MD(GLOBAL)), PTX_T1(bty(oc->dty)), ptx_addr(ad, 0), ptx_r(d));
    ptx_label_place(t.f, done);
    tk_ret(&t);
    tk_load(&t);
    size_t bytes = (size_t)n * 8;
    uint64_t dsrc[4], dout = tk_buf(&t, NULL, bytes, "out");
    uint64_t *zero = calloc((size_t)n, 8);
    pt_err e = {0};
    cr_assert_eq(emu_write(t.emu, dout, zero, bytes, &e), PT_OK);
    free(zero);
    const void *args[6] = {&dout};
    for (int k = 0; k < oc->nsrc; k++) {
        dsrc[k] = tk_buf(&t, src[k], bytes, "src");
        args[1 + k] = &dsrc[k];
    }
    uint32_t un = (uint32_t)n;
    args[1 + oc->nsrc] = &un;
    tk_run(&t, (unsigned)(n + 127) / 128, 128, args);
    tk_get(&t, dout, out, bytes);
    uint64_t m = oc->dty == TY(PRED) ? 0xffffffffu
                 : ptx_type_bits(oc->dty) >= 64 ? ~0ull : (1ull << ptx_type_bits(oc->dty)) - 1;
    for (int k = 0; k < n; k++)
        out[k] &= m;
    tk_free(&t);
}

#endif
