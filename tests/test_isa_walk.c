/* Issue 9 item 9: walks every legality row of ptx/isa.def through
 * build -> print -> compile (the project's compile gate, ptx/compile.h) ->
 * parse -> decode, and checks that ptxas's verdict matches the table's.
 *
 * Forms: for each FORM row (or, for an opcode without one, each type of its
 * PTX_OP row) and each type tuple it allows, a base form (the required
 * modifiers, the first of the required-one-of set, the operand count and
 * vector lengths the rows give), then the base with each allowed modifier
 * added (replacing one of its exclusive class). Illegal forms generated from
 * the same rows: a type not allowed, two modifiers of one class, a required
 * modifier left out, one operand too few or too many, a fragment one
 * register short or long, an immediate just outside its rows, and each
 * ORDER row broken (mad.sat.hi, cp.async.global.shared, ld.v2.global:
 * for these ptxas's warning counts as a refusal, ptxas only warns on ld/st),
 * and the PACK rows' packs and unpacks (legal sizes, twice the size, one
 * register, a type that does not pack, mixed register sizes).
 *
 * Verdicts: the table's is ptx_check_ins on each target; ptxas's comes from
 * compiling. Forms the table accepts are batched into a few modules per
 * (target, .version) (a failing batch names its first bad PTX line, that
 * form is set aside and the batch compiled again; a failure naming no line,
 * such as nvJitLink's "32-Bit ABI ... not supported", is bisected down to
 * the forms that fail alone, each named); forms it refuses are
 * compiled one per module at .version 9.0. Every batch text must parse back
 * to itself, every refused text must fail to parse with the table's message,
 * every accepted form must decode in the emulator (or be refused as "not
 * emulated"), every refused one must fail to decode with the same message.
 *
 * Skips without a toolkit, fails without one when PTXTUNE_REQUIRE_TOOLKIT=1
 * (tests/test_util.h). Prints the counts and names every disagreement. */
#include "test_util.h"

#include "ptx/compile.h"
#include "ptx/emu/emu.h"
#include "ptx/ir.h"
#include "ptx/parse.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Forms ptxas accepts that the table refuses on purpose (documented where
 * the rows are): matched as a prefix of the printed instruction. */
static const char *const deliberate[] = {
    /* sm_90 cvt forms not in the table yet (isa.def: a FEAT row cannot key
     * on a type pair): bf16 <-> f16/bf16/f64/integers, tf32 with .rn/.rz */
    "cvt.bf16.", "cvt.f16.bf16", "cvt.f64.bf16", "cvt.rn.bf16.f64", "cvt.rn.tf32.", "cvt.rz.tf32.",
    "cvt.rn.relu.tf32", "cvt.rz.relu.tf32",
    /* atom with a fourth operand (the L2 cache-policy form) is not in the
     * table: only atom.cas takes four */
    ", %r3, %r4", ", %rd3, %rd4", ", %f3, %f4", ", %fd3, %fd4", ", %rs3, %rs4",
    /* packed setp (one predicate per half, the emulator does not run it) */
    "setp.eq.f16x2", "setp.eq.bf16x2",
    /* one-register packs (isa.def PTX_PACK: ptxas 13.0 crashes on them
     * after an unpack) */
    "mov.b16 %rs2, {%rs0}", "mov.b16 {%rs0}, ", "mov.b32 %r2, {%r0}", "mov.b32 {%r0}, ",
    "mov.b64 %rd2, {%rd0}", "mov.b64 {%rd0}, ",
    /* the PTX ISA names .u32 only; ptxas 13.0 also takes .s32 (and .s32 /
     * .s64 for mapa and getctarank, where the ISA names .u32 / .u64) */
    "setmaxnreg.inc.sync.aligned.s32", "mapa.s32", "mapa.s64", "getctarank.s32", "getctarank.s64",
    NULL,
};

enum { MAXFORMS = 16384, POOL = 1 << 16, NTGT = 4 };
static const char *const tgt_names[NTGT] = {"sm_80", "sm_89", "sm_90", "sm_90a"};

/* Register banks of every module, in this order (index = bank). */
enum { B_P, B_RS, B_R, B_RD, B_F, B_FD, B_Q, NBANKS };
static const struct {
    const char *prefix;
    ptx_type t;
} banks[NBANKS] = {
    {"%p", PTX_T_PRED}, {"%rs", PTX_T_B16}, {"%r", PTX_T_B32}, {"%rd", PTX_T_B64},
    {"%f", PTX_T_F32},  {"%fd", PTX_T_F64}, {"%q", PTX_T_B128},
};
enum { REGS_PER_BANK = 130 }; /* wgmma m64n256 f32 accumulators: 128 */

typedef struct form {
    ptx_ins ins;
    bool variant;      /* one more N of a shape: checked only where the table accepts it */
    bool illegal_kind; /* generated as an illegal variant (for the counts only) */
    bool order_kind;   /* an illegal modifier order (ptxas may only warn: ld/st) */
    bool legal[NTGT];
    int ver[NTGT]; /* table's .version need when legal */
    char why[NTGT][256];
    bool ptxas_ok[NTGT], ptxas_done[NTGT];
    char ptxas_msg[NTGT][256];
} form;

typedef struct walk {
    form *forms;
    int n;
    ptx_opd *pool;
    int npool;
    pt_compiler *cc;
    pt_target tg[NTGT];
    int disagree;
    int compiles;
} walk;

static ptx_reg reg(int bank, int i) { return (ptx_reg){((uint32_t)(bank + 1) << 20) | (uint32_t)i}; }

static int bank_for(ptx_type t)
{
    if (t == PTX_T_PRED)
        return B_P;
    int b = ptx_type_bits(t);
    if (b <= 16)
        return B_RS;
    if (b == 32)
        return t == PTX_T_F32 ? B_F : B_R;
    if (b == 64)
        return t == PTX_T_F64 ? B_FD : B_RD;
    return B_Q;
}

static int bank_bits(int bank, int bits)
{
    (void)bank;
    return bits <= 16 ? B_RS : bits == 32 ? B_R : bits == 64 ? B_RD : B_Q;
}

static bool has_mod(const ptx_ins *in, int m)
{
    for (int i = 0; i < in->nmods; i++)
        if (in->mods[i] == m)
            return true;
    return false;
}

static int first_mod(const uint64_t *w)
{
    for (int m = 0; m < PTX_NMODS; m++)
        if (ptx_mask_has(w, m))
            return m;
    return -1;
}

/* The operand count the rows want for ins. */
static int want_nopd(const ptx_ins *in, int form_nopd)
{
    if (form_nopd)
        return form_nopd;
    for (int i = 0; i < ptx_isa_nrules(PTX_RULE_OPN); i++) {
        ptx_rule r = ptx_isa_rule(PTX_RULE_OPN, i);
        if (r.op == in->op && (r.mod < 0 || has_mod(in, r.mod)))
            return r.min;
    }
    char cls[24], typing[24];
    ptx_ins_opnds(in, cls, typing); /* with the PTX_OPADD operands */
    int n = 0;
    for (const char *c = cls; *c && *c != '?'; c++)
        n++;
    if (strchr(cls, '?')) /* the required ones */
        n--;
    return n;
}

/* Vector length of operand i from the rows (0: no row). */
static int want_vec(const ptx_ins *in, int opnd)
{
    for (int i = 0; i < ptx_isa_nrules(PTX_RULE_VEC); i++) {
        ptx_rule r = ptx_isa_rule(PTX_RULE_VEC, i);
        if (r.op == in->op && r.opnd == opnd && (r.mod < 0 || has_mod(in, r.mod)) &&
            (r.types[0] == 0xffffffffu ||
             (r.tyidx < in->ntypes && ((r.types[0] >> in->types[r.tyidx]) & 1))))
            return r.n < 0 ? (in->shape.m ? in->shape.n / -r.n : 1) : r.n;
    }
    return 0;
}

/* First allowed immediate of operand i (has_row false: no row). */
static int64_t want_imm(const ptx_ins *in, int opnd, bool *has_row)
{
    *has_row = false;
    for (int i = 0; i < ptx_isa_nrules(PTX_RULE_IMM); i++) {
        ptx_rule r = ptx_isa_rule(PTX_RULE_IMM, i);
        if (r.op == in->op && r.opnd == opnd && (r.mod < 0 || has_mod(in, r.mod))) {
            *has_row = true;
            return r.lo;
        }
    }
    return 0;
}

static ptx_opd vec_of(walk *w, int bank, int n)
{
    cr_assert_lt(w->npool + n, POOL);
    ptx_opd *e = &w->pool[w->npool];
    for (int i = 0; i < n; i++)
        e[i] = ptx_r(reg(bank, i % REGS_PER_BANK));
    w->npool += n;
    return (ptx_opd){.kind = PTX_O_VEC, .u.vec = {e, n}};
}

/* Operands for ins from the op row's classes and typing letters. */
static void fill_opds(walk *w, ptx_ins *in, int nopd)
{
    char opnds[24], typing[24];
    ptx_ins_opnds(in, opnds, typing); /* the row's, with the PTX_OPADD operands */
    int t0 = in->ntypes ? in->types[0] : -1, t1 = in->ntypes > 1 ? in->types[1] : t0;
    in->nopd = (uint8_t)nopd;
    for (int i = 0, k = 0; i < nopd; i++, k++) {
        while (opnds[k] == '?')
            k++;
        char cls = opnds[k] ? opnds[k] : 's';
        char rule = (size_t)i < strlen(typing) ? typing[i] : '-';
        ptx_opd *o = &in->opd[i];
        int bank = B_R;
        if (rule == 'T' || rule == 'L')
            bank = t0 >= 0 ? bank_for((ptx_type)t0) : B_R;
        else if (rule == 'U')
            bank = t1 >= 0 ? bank_for((ptx_type)t1) : B_R;
        else if (rule == 'W')
            bank = t0 < 0 ? B_R
                   : has_mod(in, PTX_M_WIDE) ? bank_bits(0, 2 * ptx_type_bits((ptx_type)t0))
                                             : bank_for((ptx_type)t0);
        else if (rule == 'P')
            bank = B_P;
        else if (rule == '6' || rule == 'K')
            bank = B_RD;
        else if (rule == 'h')
            bank = B_RS;
        if (t0 >= 0 && (rule == 'T' || rule == 'U' || rule == 'L') &&
            ptx_type_bits((ptx_type)(rule == 'U' ? t1 : t0)) == 8)
            bank = B_RS;
        bool row;
        int64_t imm = want_imm(in, i, &row);
        switch (cls) {
        case 'a': *o = ptx_addr(reg(B_RD, 1), 0); break;
        case 'p':
        case 'q': *o = ptx_r(reg(B_P, 1 + i)); break;
        case 'e': *o = row ? ptx_imm(imm) : ptx_r(reg(B_P, 1 + i)); break;
        case 'r': *o = ptx_r(reg(bank, 1 + i)); break;
        case 'c': *o = ptx_pair(reg(B_R, 1 + i), reg(B_P, 1 + i)); break;
        case 't': {
            int n = want_vec(in, i);
            cr_assert_lt(w->npool + n + 1, POOL);
            ptx_opd *e = &w->pool[w->npool];
            e[0] = ptx_r(reg(B_RD, 2));
            for (int c = 1; c <= n; c++)
                e[c] = ptx_r(reg(B_R, 2 + c));
            w->npool += n + 1;
            *o = (ptx_opd){.kind = PTX_O_TENSOR, .u.vec = {e, n + 1}};
            break;
        }
        case 'l': *o = ptx_lbl(0); break;
        case 'i': *o = ptx_imm(row ? imm : in->op == PTX_OP_LOP3 ? 0xf0 : 0); break;
        case 'v': {
            int n = want_vec(in, i);
            int vt = i < in->ntypes ? in->types[i] : -1;
            /* wgmma D (Z) in .b32 registers too: the walk's registers are
             * never written first, so a batch keeps every one it reads live
             * from the entry, and 128 .f32 beside 128 .b32 exceed 255 (C7600) */
            int vb = vt == PTX_T_F32 && rule != 'A' && rule != 'V' && rule != 'Z' ? B_F : B_R;
            *o = vec_of(w, vb, n ? n : 1);
            break;
        }
        default: {
            int n = want_vec(in, i);
            if (rule == 'K' && has_mod(in, PTX_M_SHARED_CLUSTER))
                *o = ptx_sink();
            else if (row && cls == 's')
                *o = ptx_imm(imm);
            else if (n > 1)
                *o = vec_of(w, bank, n);
            else
                *o = ptx_r(reg(bank, 1 + i));
        }
        }
    }
}

static form *add_form(walk *w, const ptx_ins *in, bool illegal_kind)
{
    cr_assert_lt(w->n, MAXFORMS);
    /* no duplicates (same op, mods, types, operand count and lengths) */
    for (int i = w->n - 1; i >= 0 && i >= w->n - 64; i--) {
        const ptx_ins *o = &w->forms[i].ins;
        if (o->op == in->op && o->nmods == in->nmods && o->ntypes == in->ntypes &&
            o->nopd == in->nopd && !memcmp(o->mods, in->mods, in->nmods) &&
            o->shape.m == in->shape.m && o->shape.n == in->shape.n && o->shape.k == in->shape.k &&
            !memcmp(o->types, in->types, in->ntypes)) {
            bool same = true;
            for (int k = 0; k < in->nopd && same; k++)
                same = o->opd[k].kind == in->opd[k].kind &&
                       (o->opd[k].kind != PTX_O_VEC || o->opd[k].u.vec.n == in->opd[k].u.vec.n) &&
                       (o->opd[k].kind != PTX_O_IMM || o->opd[k].u.imm == in->opd[k].u.imm);
            if (same)
                return NULL;
        }
    }
    form *f = &w->forms[w->n++];
    memset(f, 0, sizeof *f);
    f->ins = *in;
    f->illegal_kind = illegal_kind;
    return f;
}

static void set_mods(ptx_ins *in, const int *mods, int n)
{
    in->nmods = (uint8_t)n;
    for (int i = 0; i < n; i++)
        in->mods[i] = (uint8_t)mods[i];
}

/* mclass index of m that is not required by the form, -1 none */
static int class_of(int m, const uint64_t *all, int skip)
{
    for (int c = 0; c < ptx_isa_nrules(PTX_RULE_MCLASS); c++) {
        if (c == skip)
            continue;
        ptx_rule r = ptx_isa_rule(PTX_RULE_MCLASS, c);
        if (ptx_mask_has(r.mods, m) && !ptx_mask_has(all, m))
            return c;
    }
    return -1;
}

/* Puts the modifiers v[0..n) in an order the ORDER rows allow: a modifier
 * that must come first moves in front of the first one it must precede
 * (cp.async.shared.global, cvta.to.global, setmaxnreg.inc.sync.aligned);
 * every other modifier keeps its place. */
static void order_fix(int op, int *v, int n)
{
    for (int r = 0; r < ptx_isa_nrules(PTX_RULE_ORDER); r++) {
        ptx_rule o = ptx_isa_rule(PTX_RULE_ORDER, r);
        if (o.op != op)
            continue;
        for (int i = 0; i < n; i++) {
            if (!ptx_mask_has(o.all, v[i]))
                continue;
            for (int j = i + 1; j < n; j++)
                if (ptx_mask_has(o.mods, v[j])) {
                    int m = v[j];
                    memmove(v + i + 1, v + i, sizeof(int) * (size_t)(j - i));
                    v[i++] = m;
                }
            break;
        }
    }
}

/* src with modifier m added, replacing the one of its exclusive class (or
 * of the form's required-one-of set); the count of out. */
static int with_mod(const int *src, int n, int m, const uint64_t *all, const uint64_t *one, int *out)
{
    int c = class_of(m, all, -1), no = 0;
    bool in_one = ptx_mask_has(one, m), present = false;
    for (int i = 0; i < n; i++)
        present |= src[i] == m;
    for (int i = 0; i < n; i++) {
        bool drop = !present && ((in_one && ptx_mask_has(one, src[i])) ||
                                 (c >= 0 && class_of(src[i], all, -1) == c));
        if (!drop)
            out[no++] = src[i];
    }
    if (!present && no < PTX_MAX_MODS)
        out[no++] = m;
    return no;
}

/* One form row (or implicit row) and one type tuple: base, variants, and
 * the illegal variants. */
static void gen_tuple(walk *w, int op, const int *types, int ntypes, const uint64_t *mods,
                      const uint64_t *all, const uint64_t *one, int nopd, uint32_t t0mask,
                      bool first_tuple)
{
    int base[PTX_MAX_MODS], nb = 0;
    for (int m = 0; m < PTX_NMODS && nb < PTX_MAX_MODS - 2; m++)
        if (ptx_mask_has(all, m))
            base[nb++] = m;
    int om = first_mod(one);
    if (om >= 0)
        base[nb++] = om;
    /* the order ptxas needs where it has one (ORDER rows); elsewhere the
     * table order, ptxas takes any */
    order_fix(op, base, nb);
    ptx_ins in;
    memset(&in, 0, sizeof in);
    in.op = (uint16_t)op;
    in.ntypes = (uint8_t)ntypes;
    for (int i = 0; i < ntypes; i++)
        in.types[i] = (uint8_t)types[i];
    set_mods(&in, base, nb);
    /* a shape (wgmma): the first N its rows allow for these types */
    int shape_lo = -1, shape_hi = -1; /* the SHAPE rows of the key */
    for (int r = 0; r < ptx_isa_nrules(PTX_RULE_SHAPE); r++) {
        ptx_rule sr = ptx_isa_rule(PTX_RULE_SHAPE, r);
        if (sr.op != op || sr.tyidx >= ntypes || !((sr.types[0] >> types[sr.tyidx]) & 1))
            continue;
        if (shape_lo < 0) {
            shape_lo = r;
            in.shape = ptx_mnk(sr.min, (int)sr.lo, sr.max);
        } else if (ptx_isa_rule(PTX_RULE_SHAPE, shape_lo).types[0] != sr.types[0])
            break;
        shape_hi = r;
    }
    ptx_ins b = in;
    fill_opds(w, &b, want_nopd(&b, nopd));
    add_form(w, &b, false);
    /* every other N of the shape rows (legal where the base is) */
    for (int r = shape_lo; r >= 0 && r <= shape_hi; r++) {
        ptx_rule sr = ptx_isa_rule(PTX_RULE_SHAPE, r);
        for (int64_t n = sr.lo; n <= sr.hi; n += sr.step) {
            if (n == in.shape.n)
                continue;
            ptx_ins x = in;
            x.shape.n = (uint16_t)n;
            fill_opds(w, &x, want_nopd(&x, nopd));
            form *fv = add_form(w, &x, false);
            if (fv)
                fv->variant = true;
        }
    }
    /* illegal shapes: N past the last row, N off the step, K and M wrong,
     * no shape at all */
    if (shape_lo >= 0 && first_tuple) {
        ptx_rule l = ptx_isa_rule(PTX_RULE_SHAPE, shape_hi);
        ptx_shape bad[] = {ptx_mnk(l.min, (int)(l.hi + l.step), l.max),
                           ptx_mnk(l.min, (int)l.hi - 1, l.max),
                           ptx_mnk(l.min, in.shape.n, l.max * 2),
                           ptx_mnk(l.min * 2, in.shape.n, l.max),
                           {0, 0, 0, 0}};
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            ptx_ins x = b;
            x.shape = bad[k];
            add_form(w, &x, true);
        }
    }

    /* each allowed modifier added (replacing one of its class) */
    for (int m = 0; m < PTX_NMODS; m++) {
        if (!ptx_mask_has(mods, m) || has_mod(&in, m))
            continue;
        int v[PTX_MAX_MODS], nv = 0;
        int c = class_of(m, all, -1);
        bool in_one = ptx_mask_has(one, m);
        for (int i = 0; i < nb; i++) {
            bool same_class = c >= 0 && class_of(base[i], all, -1) == c;
            if ((in_one && base[i] == om) || same_class)
                continue;
            v[nv++] = base[i];
        }
        v[nv++] = m;
        order_fix(op, v, nv);
        ptx_ins x = in;
        set_mods(&x, v, nv);
        fill_opds(w, &x, want_nopd(&x, nopd));
        add_form(w, &x, false);
    }
    if (!first_tuple)
        return;

    /* illegal: a type outside the row's first mask (every type once) */
    if (ntypes > 0) {
        for (int t = 0; t < PTX_NTYPES; t++) {
            if ((t0mask >> t) & 1)
                continue;
            ptx_ins x = in;
            x.types[0] = (uint8_t)t;
            fill_opds(w, &x, want_nopd(&x, nopd));
            add_form(w, &x, true);
        }
    }
    /* illegal: two modifiers of one class */
    for (int c = 0; c < ptx_isa_nrules(PTX_RULE_MCLASS); c++) {
        ptx_rule r = ptx_isa_rule(PTX_RULE_MCLASS, c);
        int a = -1, bm = -1;
        for (int m = 0; m < PTX_NMODS && bm < 0; m++)
            if (ptx_mask_has(r.mods, m) && ptx_mask_has(mods, m) && !ptx_mask_has(all, m)) {
                if (a < 0)
                    a = m;
                else
                    bm = m;
            }
        if (bm < 0)
            continue;
        int v[PTX_MAX_MODS], nv = 0;
        for (int i = 0; i < nb && nv < PTX_MAX_MODS - 2; i++)
            if (base[i] != a && base[i] != bm && class_of(base[i], all, -1) != c)
                v[nv++] = base[i];
        v[nv++] = a;
        v[nv++] = bm;
        ptx_ins x = in;
        set_mods(&x, v, nv);
        fill_opds(w, &x, want_nopd(&x, nopd));
        add_form(w, &x, true);
    }
    /* illegal: a required modifier left out */
    for (int i = 0; i < nb; i++) {
        int v[PTX_MAX_MODS], nv = 0;
        for (int k = 0; k < nb; k++)
            if (k != i)
                v[nv++] = base[k];
        ptx_ins x = in;
        set_mods(&x, v, nv);
        fill_opds(w, &x, want_nopd(&b, nopd));
        add_form(w, &x, true);
    }
    /* illegal: each ORDER row broken. From the base with one modifier of
     * each side added (a legal form, also walked), the first modifier
     * moved behind the last one it must precede: mad.sat.hi.s32,
     * cp.async.global.shared.ca, setmaxnreg.sync.aligned.inc */
    for (int r = 0; r < ptx_isa_nrules(PTX_RULE_ORDER); r++) {
        ptx_rule o = ptx_isa_rule(PTX_RULE_ORDER, r);
        if (o.op != op)
            continue;
        int bm = -1, am = -1;
        for (int k = 0; k < nb; k++) {
            if (bm < 0 && ptx_mask_has(o.mods, base[k]))
                bm = base[k];
            if (am < 0 && ptx_mask_has(o.all, base[k]))
                am = base[k];
        }
        for (int m = 0; m < PTX_NMODS && (bm < 0 || am < 0); m++) {
            if (bm < 0 && ptx_mask_has(o.mods, m) && ptx_mask_has(mods, m))
                bm = m;
            else if (am < 0 && ptx_mask_has(o.all, m) && ptx_mask_has(mods, m))
                am = m;
        }
        if (bm < 0 || am < 0)
            continue;
        int v1[PTX_MAX_MODS], v2[PTX_MAX_MODS], v[PTX_MAX_MODS];
        int n1 = with_mod(base, nb, bm, all, one, v1);
        int n2 = with_mod(v1, n1, am, all, one, v2);
        order_fix(op, v2, n2);
        ptx_ins x = in;
        set_mods(&x, v2, n2);
        fill_opds(w, &x, want_nopd(&x, nopd));
        add_form(w, &x, false);
        int last = -1, nv = 0;
        for (int k = 0; k < n2; k++)
            if (ptx_mask_has(o.all, v2[k]))
                last = k;
        for (int k = 0; k < n2; k++) {
            if (v2[k] != bm)
                v[nv++] = v2[k];
            if (k == last)
                v[nv++] = bm;
        }
        set_mods(&x, v, nv);
        form *fo = add_form(w, &x, true);
        if (fo)
            fo->order_kind = true;
    }
    /* illegal: one operand too few / too many */
    int n = b.nopd;
    if (n > 0) {
        ptx_ins x = b;
        x.nopd = (uint8_t)(n - 1);
        add_form(w, &x, true);
    }
    if (n < PTX_MAX_OPDS && n < ptx_op_info((ptx_op)op).max_opnds + 1) {
        ptx_ins x = b;
        fill_opds(w, &x, n + 1);
        if (n + 1 > ptx_op_info((ptx_op)op).max_opnds)
            x.opd[n] = ptx_r(reg(B_R, 2));
        add_form(w, &x, true);
    }
    /* illegal: a fragment one register short or long */
    for (int i = 0; i < b.nopd; i++) {
        int vl = want_vec(&b, i);
        if (!vl)
            continue;
        for (int d = -1; d <= 1; d += 2) {
            if (vl + d < 1 || b.opd[i].kind != PTX_O_VEC) {
                if (vl + d >= 2) { /* a scalar operand made a vector */
                    ptx_ins x = b;
                    x.opd[i] = vec_of(w, bank_for(ntypes ? (ptx_type)types[0] : PTX_T_B32), vl + d);
                    add_form(w, &x, true);
                }
                continue;
            }
            ptx_ins x = b;
            const ptx_opd *e = b.opd[i].u.vec.e;
            int bank = e[0].kind == PTX_O_REG ? PTX_REG_BANK(e[0].u.reg) : B_R;
            x.opd[i] = vec_of(w, bank, vl + d);
            add_form(w, &x, true);
        }
    }
    /* illegal: immediates just outside their rows */
    for (int r = 0; r < ptx_isa_nrules(PTX_RULE_IMM); r++) {
        ptx_rule ir = ptx_isa_rule(PTX_RULE_IMM, r);
        if (ir.op != op || ir.opnd >= b.nopd || (ir.mod >= 0 && !has_mod(&b, ir.mod)))
            continue;
        int64_t bad[] = {ir.lo - (ir.step > 1 ? ir.step : 1), ir.hi + (ir.step > 1 ? ir.step : 1),
                         ir.step > 1 ? ir.lo + 1 : ir.lo - 2};
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            ptx_ins x = b;
            x.opd[ir.opnd] = ptx_imm(bad[k]);
            add_form(w, &x, true);
        }
    }
}

/* Every type tuple of the masks (product), calling gen_tuple. */
static void gen_row(walk *w, int op, const uint32_t *tm, const uint64_t *mods, const uint64_t *all,
                    const uint64_t *one, int nopd)
{
    int nt = 0;
    while (nt < PTX_MAX_TYPES && tm[nt])
        nt++;
    int idx[PTX_MAX_TYPES] = {0};
    bool first = true;
    for (;;) {
        int types[PTX_MAX_TYPES] = {0};
        bool ok = true;
        for (int i = 0; i < nt; i++) {
            while (idx[i] < PTX_NTYPES && !((tm[i] >> idx[i]) & 1))
                idx[i]++;
            if (idx[i] >= PTX_NTYPES)
                ok = false;
            types[i] = idx[i];
        }
        if (!ok)
            break;
        gen_tuple(w, op, types, nt, mods, all, one, nopd, nt ? tm[0] : 0, first);
        first = false;
        /* next tuple: odometer over positions, last fastest */
        int p = nt - 1;
        while (p >= 0) {
            idx[p]++;
            while (idx[p] < PTX_NTYPES && !((tm[p] >> idx[p]) & 1))
                idx[p]++;
            if (idx[p] < PTX_NTYPES)
                break;
            idx[p] = 0;
            p--;
        }
        if (p < 0)
            break;
    }
}

static void generate(walk *w)
{
    for (int op = 1; op < PTX_NOPS; op++) { /* 0 is the label pseudo-op */
        if (op == PTX_OP_PRAGMA) /* a directive: tests/test_parse.c */
            continue;
        bool any = false;
        for (int i = 0; i < ptx_isa_nrules(PTX_RULE_FORM); i++) {
            ptx_rule r = ptx_isa_rule(PTX_RULE_FORM, i);
            if (r.op != op)
                continue;
            any = true;
            gen_row(w, op, r.types, r.mods, r.all, r.one, r.nopd);
        }
        if (any)
            continue;
        ptx_opinfo info = ptx_op_info((ptx_op)op);
        uint64_t none[PTX_MOD_WORDS] = {0};
        if (!info.types) {
            uint32_t tm[PTX_MAX_TYPES] = {0};
            gen_row(w, op, tm, info.mods, none, none, 0);
            continue;
        }
        for (int t = 0; t < PTX_NTYPES; t++)
            if ((info.types >> t) & 1) {
                uint32_t tm[PTX_MAX_TYPES] = {1u << t};
                gen_row(w, op, tm, info.mods, none, none, 0);
            }
    }
}

/* PACK rows: a {vector} destination (unpack) or source (pack) of every
 * register size whose count makes the type's size (legal), twice the size
 * (illegal), the same on a type that does not pack, and mixed sizes. */
static void gen_packs(walk *w)
{
    static const int vb[] = {B_RS, B_R, B_F, B_RD, B_FD};
    static const int vbits[] = {16, 32, 32, 64, 64};
    for (int r = 0; r < ptx_isa_nrules(PTX_RULE_PACK); r++) {
        ptx_rule pr = ptx_isa_rule(PTX_RULE_PACK, r);
        ptx_opinfo info = ptx_op_info((ptx_op)pr.op);
        for (int t = 0; t < PTX_NTYPES; t++) {
            if (!((info.types >> t) & 1) || t == PTX_T_PRED)
                continue;
            bool packs = (pr.types[0] >> t) & 1;
            int bits = ptx_type_bits((ptx_type)t);
            bool twice = false, other = false;
            for (size_t b = 0; b < sizeof vb / sizeof vb[0]; b++)
                for (int n = 1; n <= 4; n *= 2) {
                    bool legal = packs && vbits[b] * n == bits && n > 1;
                    bool bad2 = packs && vbits[b] * n == 2 * bits && !twice;
                    bool one = packs && vbits[b] * n == bits && n == 1;
                    bool bad_t = !packs && vbits[b] * n == bits && !other;
                    if (!legal && !bad2 && !bad_t && !one)
                        continue;
                    twice |= bad2;
                    other |= bad_t;
                    for (int dir = 0; dir < (legal || one ? 2 : 1); dir++) {
                        ptx_ins in;
                        memset(&in, 0, sizeof in);
                        in.op = (uint16_t)pr.op;
                        in.ntypes = 1;
                        in.types[0] = (uint8_t)t;
                        in.nopd = 2;
                        ptx_opd sc = ptx_r(reg(bank_for((ptx_type)t), 1 + dir));
                        in.opd[dir] = vec_of(w, vb[b], n);
                        in.opd[1 - dir] = sc;
                        add_form(w, &in, !legal);
                    }
                }
            if (packs && bits == 64) { /* {%r, %rs, %rs}: 64 bits, two sizes */
                ptx_ins in;
                memset(&in, 0, sizeof in);
                in.op = (uint16_t)pr.op;
                in.ntypes = 1;
                in.types[0] = (uint8_t)t;
                in.nopd = 2;
                in.opd[0] = ptx_r(reg(B_RD, 1));
                in.opd[1] = vec_of(w, B_RS, 3);
                in.opd[1].u.vec.e[0] = ptx_r(reg(B_R, 0));
                add_form(w, &in, true);
            }
        }
    }
}

/* A module for target ti with the banks declared; returns the entry. */
static ptx_fn *new_fn_q(ptx_module **m, const pt_target *t, int max_ptx, bool q)
{
    *m = ptx_module_new(t, max_ptx);
    ptx_fn *f = ptx_fn_new(*m, "walk");
    for (int b = 0; b < (q ? NBANKS : B_Q); b++)
        ptx_bank_add(f, banks[b].prefix, banks[b].t, REGS_PER_BANK, false);
    ptx_label_named(f, "L_end");
    return f;
}

/* .b128 registers need PTX 8.3: declared where the module is at least that */
static ptx_fn *new_fn(ptx_module **m, const pt_target *t, int max_ptx)
{
    return new_fn_q(m, t, max_ptx, true);
}

/* new_fn in a module of the signature cache c */
static ptx_fn *new_fn_cached(ptx_module **m, const pt_target *t, int max_ptx, ptx_sigcache *c)
{
    *m = ptx_module_new_cached(t, max_ptx, c);
    ptx_fn *f = ptx_fn_new(*m, "walk");
    for (int b = 0; b < NBANKS; b++)
        ptx_bank_add(f, banks[b].prefix, banks[b].t, REGS_PER_BANK, false);
    ptx_label_named(f, "L_end");
    return f;
}

static void push_raw(ptx_fn *f, const ptx_ins *in)
{
    f->body = pt_arena_grow(f->mod->arena, f->body, sizeof *f->body, &f->cap_body, f->nbody + 1);
    f->body[f->nbody++] = *in;
}

static void close_fn(ptx_fn *f)
{
    ptx_ins lab;
    memset(&lab, 0, sizeof lab);
    lab.op = PTX_OP_LABEL;
    lab.nopd = 1;
    lab.opd[0] = ptx_lbl(0);
    push_raw(f, &lab);
    ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
}

static void ins_text(const form *fm, char *buf, size_t n)
{
    ptx_module *m;
    pt_target t = {90, true, false};
    ptx_fn *f = new_fn(&m, &t, 90);
    pt_buf b;
    pt_buf_init(&b);
    ptx_print_ins(f, &fm->ins, &b);
    size_t len = b.len;
    while (len && (b.s[len - 1] == '\n' || b.s[len - 1] == ';'))
        len--;
    const char *s = b.s;
    while (*s == '\t' || *s == ' ')
        s++, len--;
    snprintf(buf, n, "%.*s", (int)len, s);
    pt_buf_free(&b);
    ptx_module_free(m);
}

static bool is_deliberate(const char *text)
{
    for (size_t i = 0; deliberate[i]; i++) {
        bool atom4 = deliberate[i][0] == ',';
        if (atom4 ? strncmp(text, "atom.", 5) == 0 && strstr(text, deliberate[i])
                  : strncmp(text, deliberate[i], strlen(deliberate[i])) == 0)
            return true;
    }
    return false;
}

static void disagree(walk *w, form *fm, int ti, const char *what)
{
    char text[256];
    ins_text(fm, text, sizeof text);
    if (is_deliberate(text))
        return;
    w->disagree++;
    if (w->disagree <= 300)
        fprintf(stderr, "isa walk: %s on %s: %s | table: %s | ptxas: %s\n", text,
                tgt_names[ti], what, fm->legal[ti] ? "legal" : fm->why[ti],
                fm->ptxas_ok[ti] ? "legal" : fm->ptxas_msg[ti]);
}

/* Table verdicts on every target. */
static void table_verdicts(walk *w)
{
    for (int i = 0; i < w->n; i++) {
        form *fm = &w->forms[i];
        for (int ti = 0; ti < NTGT; ti++) {
            ptx_module *m;
            ptx_fn *f = new_fn(&m, &w->tg[ti], 90);
            pt_err e;
            pt_err_clear(&e);
            fm->legal[ti] = ptx_check_ins(f, &fm->ins, &e) == PT_OK;
            fm->ver[ti] = f->need_ver > pt_target_min_ptx(&w->tg[ti]) ? f->need_ver
                                                                      : pt_target_min_ptx(&w->tg[ti]);
            snprintf(fm->why[ti], sizeof fm->why[ti], "%.250s", e.msg);
            ptx_module_free(m);
        }
    }
}

/* Compiles text for target ti: PT_OK, or the first bad PTX line in *line
 * (0: none named); *warnings (may be NULL): ptxas's warning lines. */
static int compile_w(walk *w, const char *text, int ti, int *line, char *msg, size_t mn,
                     int *warnings)
{
    pt_err e;
    pt_err_clear(&e);
    w->compiles++;
    if (getenv("WALK_DEBUG")) {
        FILE *df = fopen("/tmp/walk_last.ptx", "w");
        if (df) {
            fputs(text, df);
            fclose(df);
        }
    }
    pt_resource res;
    memset(&res, 0, sizeof res);
    int rc = pt_compile(w->cc, text, &w->tg[ti], NULL, NULL, &res, &e);
    if (warnings)
        *warnings = rc ? 0 : res.nwarnings;
    *line = 0;
    if (rc) {
        const char *p = strstr(e.msg, "PTX line ");
        if (p)
            *line = atoi(p + 9);
        snprintf(msg, mn, "%.250s", e.msg);
    }
    return rc;
}

static int compile(walk *w, const char *text, int ti, int *line, char *msg, size_t mn)
{
    return compile_w(w, text, ti, line, msg, mn, NULL);
}

/* Round trip: the parser reads the text back to the same text. */
static void check_parse_ok(const char *text, int ti)
{
    ptx_module *m = NULL;
    pt_err e;
    pt_err_clear(&e);
    int rc = ptx_parse(text, strlen(text), "walk.ptx", 90, &m, &e);
    cr_expect_eq(rc, PT_OK, "%s: a batch the table accepts does not parse: %s", tgt_names[ti], e.msg);
    if (rc == PT_OK) {
        char *again = ptx_print(m);
        cr_expect_str_eq(again, text, "%s: parse(print) round trip", tgt_names[ti]);
        free(again);
    }
    ptx_module_free(m);
}

/* Decoding one legal form: loads, or is refused as not emulated. */
static int decode_legal(walk *w, emu_ctx *ec, form *fm, int ti)
{
    ptx_module *m;
    ptx_fn *f = new_fn(&m, &w->tg[ti], 90);
    push_raw(f, &fm->ins);
    close_fn(f);
    emu_kernel *k = NULL;
    pt_err e;
    pt_err_clear(&e);
    if (getenv("WALK_DEBUG")) {
        char t[256];
        ins_text(fm, t, sizeof t);
        fprintf(stderr, "STAGE decode %s\n", t);
    }
    int rc = emu_load(ec, m, NULL, &k, &e);
    int bad = 0;
    if (rc && !strstr(e.msg, "not emulated")) {
        snprintf(fm->ptxas_msg[ti], sizeof fm->ptxas_msg[ti], "decoder: %.240s", e.msg);
        bad = 1;
    }
    emu_kernel_free(k);
    ptx_module_free(m);
    return bad;
}

/* Builds the forms idx[0..cnt) of one batch into a module for target ti
 * (through the builder: every form the table accepts must build), prints it
 * and compiles it. PT_OK; else *line is the first bad PTX line (0: none
 * named) and *hit the batch position of the form on it (-1: none). */
static int compile_set(walk *w, int ti, int ver, const int *idx, int cnt, int *hit, char *msg,
                       size_t mn, char **text_out)
{
    ptx_module *m;
    ptx_fn *f = new_fn_q(&m, &w->tg[ti], 90, ver >= 83);
    int *lines = malloc(sizeof(int) * (size_t)(cnt ? cnt : 1));
    for (int k = 0; k < cnt; k++) {
        const ptx_ins *in = &w->forms[idx[k]].ins;
        ptx_mods mods = {.n = in->nmods};
        memcpy(mods.m, in->mods, sizeof mods.m);
        ptx_types types = {.n = in->ntypes};
        memcpy(types.t, in->types, sizeof types.t);
        ptx_ins *got = ptx_emit_shape_n(f, (ptx_op)in->op, mods, in->shape, types, in->nopd, in->opd);
        cr_assert_not_null(got, "builder refuses what ptx_check_ins accepted: %s",
                           ptx_module_errmsg(m));
        lines[k] = (int)(f->nbody - 1);
        if (in->shape.m) /* retire each wgmma: hundreds in flight exhaust the registers (C7600) */
            ptx_emit(f, PTX_OP_WGMMA_WAIT, PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES, ptx_imm(0));
    }
    close_fn(f);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    char *text = ptx_print(m);
    int line;
    int rc = compile(w, text, ti, &line, msg, mn);
    *hit = -1;
    if (rc)
        for (int k = 0; k < cnt; k++)
            if (line && f->body[lines[k]].line == line)
                *hit = k;
    free(lines);
    ptx_module_free(m);
    if (text_out)
        *text_out = text;
    else
        free(text);
    return rc;
}

static void refused_by_ptxas(walk *w, form *fm, int ti, const char *msg)
{
    fm->ptxas_done[ti] = true;
    fm->ptxas_ok[ti] = false;
    snprintf(fm->ptxas_msg[ti], sizeof fm->ptxas_msg[ti], "%s", msg);
    disagree(w, fm, ti, "the table accepts what ptxas refuses");
}

/* Compiles a set of forms the table accepts until what is left compiles:
 * a form on a named bad line is set aside and the rest compiled again; a
 * failure that names no line (a whole-module complaint such as "32-Bit
 * ABI ... not supported") splits the set in halves, down to the single
 * forms that fail alone, so every refused form is named. Forms left in
 * idx[0..*cnt) on return compiled together. */
static void settle(walk *w, int ti, int ver, int *idx, int *cnt, int depth)
{
    char msg[256];
    for (;;) {
        if (*cnt == 0)
            return;
        int hit;
        char *text = NULL;
        int rc = compile_set(w, ti, ver, idx, *cnt, &hit, msg, sizeof msg, depth ? NULL : &text);
        if (rc == PT_OK) {
            if (text)
                check_parse_ok(text, ti);
            free(text);
            return;
        }
        free(text);
        if (hit >= 0) {
            refused_by_ptxas(w, &w->forms[idx[hit]], ti, msg);
            idx[hit] = idx[--*cnt];
            continue;
        }
        if (*cnt == 1) {
            refused_by_ptxas(w, &w->forms[idx[0]], ti, msg);
            *cnt = 0;
            return;
        }
        /* no line: bisect; what each half keeps compiled alone */
        int h = *cnt / 2, na = h, nb = *cnt - h;
        settle(w, ti, ver, idx, &na, depth + 1);
        settle(w, ti, ver, idx + h, &nb, depth + 1);
        bool removed = na < h || nb < *cnt - h;
        memmove(idx + na, idx + h, sizeof(int) * (size_t)nb);
        *cnt = na + nb;
        if (!removed) {
            /* each half compiles, the whole does not: no single form is
             * to blame (the forms interact); named as one disagreement */
            cr_log_error("%s: %d forms fail together but each half compiles: %s",
                         tgt_names[ti], *cnt, msg);
            w->disagree++;
            return;
        }
    }
}

static void run_batches(walk *w, emu_ctx *ec, int ti, int *nlegal, int *ndecoded)
{
    enum { BATCH = 400 };
    int *idx = malloc(sizeof(int) * (size_t)w->n);
    for (int ver = 60; ver <= 90; ver++) {
        int ni = 0;
        for (int i = 0; i < w->n; i++)
            if (w->forms[i].legal[ti] && w->forms[i].ver[ti] == ver)
                idx[ni++] = i;
        for (int at = 0, cnt; at < ni; at += cnt) {
            /* a shaped form (wgmma, up to 128 accumulators) weighs 16:
             * batches of 75 and more of them exhaust ptxas's 255
             * registers (C7600) even with each one retired */
            int weight = 0;
            for (cnt = 0; at + cnt < ni && weight < BATCH; cnt++)
                weight += w->forms[idx[at + cnt]].ins.shape.m ? 16 : 1;
            int keep = cnt;
            settle(w, ti, ver, idx + at, &keep, 0);
            /* settle leaves the forms that compiled in front; the ones set
             * aside (refused) are behind them, done already */
            int done_cnt = cnt;
            cnt = keep;
            for (int k = 0; k < cnt; k++) {
                form *fm = &w->forms[idx[at + k]];
                fm->ptxas_ok[ti] = fm->ptxas_done[ti] = true;
                (*nlegal)++;
                if (decode_legal(w, ec, fm, ti)) {
                    (*ndecoded)++;
                    disagree(w, fm, ti, "the decoder refuses a legal form");
                }
            }
            cnt = done_cnt;
        }
    }
    free(idx);
}

/* One refused form: compile alone at .version 9.0, parse, decode. */
static void run_illegal(walk *w, emu_ctx *ec, form *fm, int ti)
{
    ptx_module *m;
    ptx_fn *f = new_fn(&m, &w->tg[ti], 90);
    push_raw(f, &fm->ins);
    close_fn(f);
    m->version = 90;
    char *text = ptx_print(m);
    int line, warnings;
    char msg[256];
    int rc = compile_w(w, text, ti, &line, msg, sizeof msg, &warnings);
    if (rc == PT_OK && warnings) {
        /* ld.v4.global: ptxas warns "Vector Type not specified properly",
         * multicast on sm_90 draws an advisory: the table refuses what the
         * compile gate warns about */
        rc = PT_ECOMPILE;
        snprintf(msg, sizeof msg, "a warning");
    }
    fm->ptxas_done[ti] = true;
    fm->ptxas_ok[ti] = rc == PT_OK;
    snprintf(fm->ptxas_msg[ti], sizeof fm->ptxas_msg[ti], "%.250s", rc ? msg : "");
    if (rc == PT_OK)
        disagree(w, fm, ti, "the table refuses what ptxas accepts");
    /* parse: refused with the table's message */
    ptx_module *pm = NULL;
    pt_err e;
    pt_err_clear(&e);
    int prc = ptx_parse(text, strlen(text), "walk.ptx", 90, &pm, &e);
    bool count = strstr(e.msg, "wrong operand count") && strstr(fm->why[ti], "wrong operand count");
    if (prc == PT_OK || !(strstr(e.msg, fm->why[ti]) || count)) {
        snprintf(fm->ptxas_msg[ti], sizeof fm->ptxas_msg[ti], "parser: %.240s", prc ? e.msg : "accepted");
        disagree(w, fm, ti, "the parser and the table differ");
    }
    ptx_module_free(pm);
    /* decode: refused with the table's message */
    emu_kernel *k = NULL;
    pt_err_clear(&e);
    int drc = emu_load(ec, m, NULL, &k, &e);
    if (drc == PT_OK || !strstr(e.msg, fm->why[ti])) {
        snprintf(fm->ptxas_msg[ti], sizeof fm->ptxas_msg[ti], "decoder: %.240s", drc ? e.msg : "accepted");
        disagree(w, fm, ti, "the decoder and the table differ");
    }
    emu_kernel_free(k);
    free(text);
    ptx_module_free(m);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

Test(isa_walk, table_matches_ptxas, .timeout = 600)
{
    pt_err e;
    pt_err_clear(&e);
    cr_assert_eq(ptx_isa_check_table(&e), PT_OK, "%.250s", e.msg);
    walk w;
    memset(&w, 0, sizeof w);
    if (pt_compiler_open(&w.cc, &e) != PT_OK) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_assert_eq(e.code, PT_ENOTOOLKIT, "%.250s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    /* single forms draw C75xx codes (wgmma with injected waits, setmaxnreg
     * with no count at entry): legal forms, so reported, not failures */
    pt_compiler_allow_codes(w.cc, true);
    /* in-process nvJitLink where it is there (the gate would send sm_90a to
     * a ptxas child process per compile) */
    pt_err be;
    pt_err_clear(&be);
    pt_compiler_set_backend(w.cc, PT_BACKEND_NVJITLINK, &be);
    double t0 = now();
    for (int ti = 0; ti < NTGT; ti++)
        cr_assert_eq(pt_target_parse(tgt_names[ti], &w.tg[ti], &e), PT_OK, "%.250s", e.msg);
    w.forms = calloc(MAXFORMS, sizeof *w.forms);
    w.pool = calloc(POOL, sizeof *w.pool);
    bool dbg = getenv("WALK_DEBUG") != NULL;
    generate(&w);
    gen_packs(&w);
    if (dbg)
        fprintf(stderr, "STAGE generated %d\n", w.n);
    table_verdicts(&w);
    if (dbg)
        fprintf(stderr, "STAGE verdicts\n");
    emu_ctx *ec = emu_new(NULL);
    int nlegal = 0, nillegal = 0, ndec = 0, nforms_legal = 0, nforms_illegal = 0;
    for (int ti = 0; ti < NTGT; ti++) {
        run_batches(&w, ec, ti, &nlegal, &ndec);
        if (dbg)
            fprintf(stderr, "STAGE batches %d\n", ti);
    }
    /* refused forms: once on the last target that refuses them for a
     * reason other than the target, and once on each target whose
     * requirement is what refuses them */
    for (int i = 0; i < w.n; i++) {
        form *fm = &w.forms[i];
        bool any_legal = false;
        for (int ti = 0; ti < NTGT; ti++)
            any_legal |= fm->legal[ti];
        any_legal ? nforms_legal++ : nforms_illegal++;
        for (int ti = 0; ti < NTGT; ti++) {
            if (fm->legal[ti] || (fm->variant && any_legal))
                continue;
            bool target = strstr(fm->why[ti], "; target is ") || strstr(fm->why[ti], "needs PTX");
            if (!target && ti != NTGT - 1)
                continue;
            if (dbg) {
                char t[256];
                ins_text(fm, t, sizeof t);
                fprintf(stderr, "STAGE illegal %s\n", t);
            }
            run_illegal(&w, ec, fm, ti);
            nillegal++;
        }
    }
    emu_free(ec);
    double dt = now() - t0;
    int nshaped = 0;
    for (int i = 0; i < w.n; i++)
        nshaped += w.forms[i].ins.shape.m != 0;
    fprintf(stderr, "isa walk: %d of the forms have a shape (wgmma)\n", nshaped);
    fprintf(stderr,
            "isa walk: %d forms (%d legal on some target, %d illegal on every target), %d legal "
            "and %d illegal checks against %s on %d targets, %d compiles, %d disagreements, "
            "%.1f s\n",
            w.n, nforms_legal, nforms_illegal, nlegal, nillegal, pt_compiler_describe(w.cc), NTGT,
            w.compiles, w.disagree, dt);
    cr_expect_eq(w.disagree, 0, "%d forms where the table and ptxas (or the parser, or the "
                                "decoder) disagree; listed above",
                 w.disagree);
    (void)ndec;
    free(w.forms);
    free(w.pool);
    pt_compiler_close(w.cc);
}

/* Issue 12 item 1: until the emulator implements them, the Hopper rows are
 * refused at load (PT_EUNSUPPORTED naming the instruction), cluster special
 * registers too; .pragma "nounroll" is no code and loads. */
static int load_one(const char *arch, void (*body)(ptx_fn *), pt_err *e)
{
    pt_target t;
    cr_assert_eq(pt_target_parse(arch, &t, e), PT_OK);
    ptx_module *m = ptx_module_new(&t, 90);
    ptx_fn *f = ptx_fn_new(m, "k");
    body(f);
    ptx_emit0(f, PTX_OP_RET, PTX_NOMODS, PTX_NOTYPES);
    cr_assert_eq(ptx_module_finish(m), PT_OK, "%s", ptx_module_errmsg(m));
    emu_ctx *ec = emu_new(NULL);
    emu_kernel *k = NULL;
    pt_err_clear(e);
    int rc = emu_load(ec, m, NULL, &k, e);
    emu_kernel_free(k);
    emu_free(ec);
    ptx_module_free(m);
    return rc;
}
static void b_fence(ptx_fn *f) { ptx_emit0(f, PTX_OP_WGMMA_FENCE, PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES); }
static void b_mbar(ptx_fn *f)
{
    ptx_reg a = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MBAR_INIT, PTX_MODS(PTX_M_SHARED_CTA), PTX_T1(PTX_T_B64), ptx_addr(a, 0), ptx_imm(1));
}
static void b_sreg(ptx_fn *f)
{
    ptx_reg r = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r), ptx_sr(PTX_S_CLUSTER_CTARANK));
}
static void b_pragma(ptx_fn *f) { ptx_pragma_nounroll(f); }
static void b_wgmma_b1(ptx_fn *f)
{
    ptx_reg d[4], a = ptx_reg_new(f, PTX_T_B64);
    for (int i = 0; i < 4; i++)
        d[i] = ptx_reg_new(f, PTX_T_B32);
    ptx_opd ops[] = {ptx_vecr(f, 4, d), ptx_r(a), ptx_r(a), ptx_imm(1)};
    ptx_emit_shape_n(f, PTX_OP_WGMMA_SS, PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, PTX_M_AND, PTX_M_POPC),
                     ptx_mnk(64, 8, 256), PTX_TYPES(PTX_T_S32, PTX_T_B1, PTX_T_B1), 4, ops);
}

Test(isa_walk, hopper_rows_are_refused_by_the_emulator)
{
    pt_err e;
    pt_err_clear(&e);
    /* issue 12 item 2 emulates wgmma (ptx/emu/wgmma.c) but the single-bit form */
    cr_expect_eq(load_one("sm_90a", b_fence, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(load_one("sm_90a", b_wgmma_b1, &e), PT_EUNSUPPORTED);
    cr_expect(strstr(e.msg, "single-bit wgmma (.and.popc) is not emulated: wgmma.mma_async"), "%s", e.msg);
    /* and mbarriers and the cluster registers (5efedda, ptx/emu/mbarrier.c, async.c) */
    cr_expect_eq(load_one("sm_90", b_mbar, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(load_one("sm_90", b_sreg, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(load_one("sm_80", b_pragma, &e), PT_OK, "%s", e.msg);
}

/* Issue 12 item 1: the distributed-shared-memory rows (ld / st / atom / red
 * .shared::cluster, FEAT sm_90 PTX 7.8), named one by one: each prints back
 * byte-identically, ptxas assembles it on sm_90 (the walk above covers every
 * type), the table refuses it on sm_80 as ptxas does, and the emulator
 * decodes it. */
Test(isa_walk, dsmem_forms_against_ptxas)
{
    static const char *const forms[] = {
        "ld.shared::cluster.u32 %r1, [%r2];",
        "ld.shared::cluster.v2.f32 {%f1, %f2}, [%r2+8];",
        "ld.shared::cluster.u64 %rd1, [%r2];",
        "st.shared::cluster.u32 [%r2], %r1;",
        "st.shared::cluster.v4.b32 [%r2], {%r1, %r1, %r1, %r1};",
        "atom.shared::cluster.add.u32 %r1, [%r2], 1;",
        "atom.shared::cluster.cas.b32 %r1, [%r2], %r3, %r4;",
        "red.shared::cluster.add.u32 [%r2], 2;",
        "red.shared::cluster.max.s32 [%r2], %r1;",
    };
    pt_err e;
    pt_err_clear(&e);
    pt_compiler *cc = NULL;
    bool tk = pt_compiler_open(&cc, &e) == PT_OK;
    if (!tk)
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        for (int sm80 = 0; sm80 < 2; sm80++) {
            char text[1024];
            snprintf(text, sizeof text,
                     ".version 8.0\n.target %s\n.address_size 64\n\n.visible .entry k()\n{\n"
                     "\t.reg .b32 %%r<5>;\n\t.reg .b64 %%rd<2>;\n\t.reg .f32 %%f<3>;\n\n"
                     "\tmov.u32 %%r2, 0;\n\tmov.u32 %%r1, 0;\n\tmov.u32 %%r3, 0;\n\tmov.u32 %%r4, 0;\n"
                     "\t%s\n\tret;\n}\n",
                     sm80 ? "sm_80" : "sm_90", forms[i]);
            ptx_module *m = NULL;
            pt_err_clear(&e);
            int rc = ptx_parse(text, strlen(text), "k.ptx", 90, &m, &e);
            pt_target t;
            pt_err te;
            pt_err_clear(&te);
            cr_assert_eq(pt_target_parse(sm80 ? "sm_80" : "sm_90", &t, &te), PT_OK);
            int crc = tk ? pt_compile(cc, text, &t, NULL, NULL, NULL, &te) : -1;
            if (sm80) {
                cr_expect_neq(rc, PT_OK, "the table takes %s on sm_80", forms[i]);
                cr_expect(strstr(e.msg, "sm_90"), "%s: %s", forms[i], e.msg);
                if (tk)
                    cr_expect_neq(crc, PT_OK, "ptxas takes %s on sm_80", forms[i]);
                ptx_module_free(m);
                continue;
            }
            cr_assert_eq(rc, PT_OK, "%s: %s", forms[i], e.msg);
            char *again = ptx_print(m);
            cr_assert(again);
            cr_expect(strstr(again, forms[i]), "%s printed as:\n%s", forms[i], again);
            ptx_module *m2 = NULL; /* the printed text parses back to itself */
            cr_assert_eq(ptx_parse(again, strlen(again), "again.ptx", 90, &m2, &e), PT_OK, "%s", e.msg);
            char *third = ptx_print(m2);
            cr_expect(third && strcmp(third, again) == 0, "%s does not print back identically", forms[i]);
            free(third);
            ptx_module_free(m2);
            if (tk)
                cr_expect_eq(crc, PT_OK, "ptxas refuses %s: %s", forms[i], te.msg);
            emu_ctx *ec = emu_new(NULL);
            emu_kernel *k = NULL;
            cr_expect_eq(emu_load(ec, m, NULL, &k, &e), PT_OK, "%s: %s", forms[i], e.msg);
            emu_kernel_free(k);
            emu_free(ec);
            free(again);
            ptx_module_free(m);
        }
    pt_compiler_close(cc);
}

/* The builder keeps, per module, the signatures (opcode, modifiers, types,
 * shape, operand count) that passed the table, and checks each
 * instruction's operands through a fast path that decides from the
 * signature's per-operand facts (ptx/ir.c: check_sig once per signature,
 * opds_fast, else check_opd as ptx_check_ins runs it). Every form of the
 * walk, legal and illegal, and variants of it with one operand changed (a
 * register of each bank at each register, {vector} element or address
 * base, an immediate for a register and a register for anything else), is
 * built one after the other into one module per
 * target, forward then backward, so later forms meet a warm table and the
 * variants meet the signatures of legal forms with other operands: each
 * must get the verdict and the message ptx_check_ins gives it. */
static int n_variants(const ptx_ins *in)
{
    int n = 1; /* itself */
    for (int i = 0; i < in->nopd; i++)
        n += in->opd[i].kind == PTX_O_VEC ? 2 * NBANKS : NBANKS + 1;
    return n;
}

/* Variant v of in (0: in itself) into out; el: room for a {vector}'s copy. */
static void variant(const ptx_ins *in, int v, ptx_ins *out, ptx_opd *el)
{
    *out = *in;
    if (v-- == 0)
        return;
    for (int i = 0; i < in->nopd; i++) {
        ptx_opd *o = &out->opd[i];
        int nv = o->kind == PTX_O_VEC ? 2 * NBANKS : NBANKS + 1;
        if (v >= nv) {
            v -= nv;
            continue;
        }
        if (o->kind == PTX_O_VEC) { /* its first or its last element */
            int n = o->u.vec.n;
            memcpy(el, o->u.vec.e, (size_t)n * sizeof *el);
            el[v < NBANKS ? 0 : n - 1] = ptx_r(reg(v % NBANKS, 2));
            o->u.vec.e = el;
        } else if (v == NBANKS) /* a register for anything else, an immediate for a register */
            *o = o->kind == PTX_O_REG ? ptx_imm(16) : ptx_r(reg(B_R, 3));
        else if (o->kind == PTX_O_ADDR && !o->u.addr.sym)
            o->u.addr.base = reg(v, 4);
        else
            *o = ptx_r(reg(v, 5));
        return;
    }
}

/* cached: the modules come from one ptx_sigcache (ptx/ir.h) shared by every
 * target, a fresh module for each pass, and the targets walked twice, so
 * the second pass and the second round meet tables that earlier modules
 * (of this target, next to other targets' tables) left warm; the first
 * round from the widest target down, so a table taken for the wrong target
 * accepts what sm_80 refuses. */
static void warm_walk(bool cached)
{
    walk w;
    memset(&w, 0, sizeof w);
    pt_err e;
    pt_err_clear(&e);
    for (int ti = 0; ti < NTGT; ti++)
        cr_assert_eq(pt_target_parse(tgt_names[ti], &w.tg[ti], &e), PT_OK, "%.250s", e.msg);
    w.forms = calloc(MAXFORMS, sizeof *w.forms);
    w.pool = calloc(POOL, sizeof *w.pool);
    ptx_opd *el = calloc(REGS_PER_BANK, sizeof *el);
    cr_assert(w.forms && w.pool && el);
    generate(&w);
    gen_packs(&w);
    long built = 0, refused = 0, hits = 0;
    ptx_sigcache *sc = cached ? ptx_sigcache_new() : NULL;
    cr_assert(sc || !cached);
    for (int round = 0; round < (cached ? 2 : 1); round++)
    for (int tj = 0; tj < NTGT; tj++) {
        int ti = cached && !round ? NTGT - 1 - tj : tj; /* cached: sm_90a's table first, then sm_80's */
        ptx_module *m, *rm;
        ptx_fn *f = cached ? new_fn_cached(&m, &w.tg[ti], 90, sc) : new_fn(&m, &w.tg[ti], 90),
               *rf = new_fn(&rm, &w.tg[ti], 90);
        for (int pass = 0; pass < 2; pass++) {
            if (cached && pass) { /* the second pass in a new module of the same cache */
                ptx_module_free(m);
                f = new_fn_cached(&m, &w.tg[ti], 90, sc);
            }
            for (int k = 0; k < w.n; k++) {
                const ptx_ins *base = &w.forms[pass ? w.n - 1 - k : k].ins;
                for (int v = 0; v < (pass ? 1 : n_variants(base)); v++) {
                    ptx_ins in;
                    variant(base, v, &in, el);
                    pt_err re;
                    pt_err_clear(&re);
                    bool legal = ptx_check_ins(rf, &in, &re) == PT_OK;
                    ptx_mods mods = {.n = in.nmods};
                    memcpy(mods.m, in.mods, sizeof mods.m);
                    ptx_types types = {.n = in.ntypes};
                    memcpy(types.t, in.types, sizeof types.t);
                    ptx_ins *got = ptx_emit_shape_n(f, (ptx_op)in.op, mods, in.shape, types, in.nopd, in.opd);
                    if ((got != NULL) != legal) {
                        pt_buf b;
                        pt_buf_init(&b);
                        ptx_print_ins(f, &in, &b);
                        cr_assert_fail("%s on %s: the builder %s, ptx_check_ins %s (%s)", b.s ? b.s : "?", tgt_names[ti],
                                       got ? "accepts" : "refuses", legal ? "accepts" : "refuses",
                                       got ? re.msg : ptx_module_errmsg(m));
                    }
                    if (!got) {
                        pt_buf b;
                        pt_buf_init(&b);
                        ptx_print_ins(f, &in, &b);
                        cr_assert_str_eq(ptx_module_errmsg(m), re.msg, "%s on %s", b.s ? b.s : "?", tgt_names[ti]);
                        pt_buf_free(&b);
                        pt_err_clear(&m->err);
                        refused++;
                    } else
                        hits += pass || round; /* the second pass meets every signature the first built */
                    built++;
                }
            }
        }
        ptx_module_free(m);
        ptx_module_free(rm);
    }
    ptx_sigcache_free(sc);
    fprintf(stderr, "isa walk (builder, warm%s): %ld instructions built on %d targets, %ld refused as "
            "the table refuses them, %ld accepted from a warm table\n", cached ? ", cached modules" : "",
            built, NTGT, refused, hits);
    cr_expect_gt(refused, 10000);
    cr_expect_gt(hits, 4000);
    free(el);
    free(w.forms);
    free(w.pool);
}

Test(isa_walk, the_builder_agrees_with_the_table_on_a_warm_module)
{
    warm_walk(false);
}

/* The same across modules that share a ptx_sigcache (emit_bench --cache, a
 * caller emitting a space's configs one after another). */
Test(isa_walk, the_builder_agrees_with_the_table_across_cached_modules)
{
    warm_walk(true);
}
