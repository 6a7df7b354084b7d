/* The IR builder: tables generated from ptx/isa.def, module/entry
 * construction and the per-instruction checks. */
#include "ptx/ir.h"

#include <stdio.h>
#include <string.h>

#define TYB(x) (1u << PTX_T_##x)

/* ---- tables from isa.def ---- */

static const struct {
    const char *name;
    int bits;
    char cls;
} type_tab[PTX_NTYPES] = {
#define PTX_TYPE(id, text, bits, cls) {text, bits, cls},
#include "ptx/isa.def"
};

static const char *const mod_tab[PTX_NMODS] = {
#define PTX_MOD(id, text) text,
#include "ptx/isa.def"
};

static const struct {
    const char *name;
    int bits;
} sreg_tab[PTX_NSREGS] = {
#define PTX_SREG(id, text, bits) {text, bits},
#include "ptx/isa.def"
};

_Static_assert((int)PTX_NTYPES <= (int)PTX_TYPE_BITS, "type masks hold 32 types: widen ptx_opinfo.types");
_Static_assert((int)PTX_NMODS <= 64 * (int)PTX_MOD_WORDS,
               "modifier masks hold 64 * PTX_MOD_WORDS modifiers: raise PTX_MOD_WORDS (ir.h) "
               "and add an expansion per word below");

/* Modifier masks are PTX_MOD_WORDS words: the table is expanded once per
 * word, MB() keeping the bits that fall in that word. */
#define MBW(x, w) ((PTX_M_##x >> 6) == (w) ? 1ull << (PTX_M_##x & 63) : 0ull)
#define MB(x) MBW(x, 0)
static const uint64_t op_mods0[PTX_NOPS] = {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) mods,
#include "ptx/isa.def"
};
#undef MB
#define MB(x) MBW(x, 1)
static const uint64_t op_mods1[PTX_NOPS] = {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) mods,
#include "ptx/isa.def"
};
#undef MB
#define MB(x) MBW(x, 2)
static const uint64_t op_mods2[PTX_NOPS] = {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) mods,
#include "ptx/isa.def"
};
#undef MB
_Static_assert(PTX_MOD_WORDS == 3, "one op_mods expansion per modifier word");
static const uint64_t *const op_mods[PTX_MOD_WORDS] = {op_mods0, op_mods1, op_mods2};

enum { ARCH_G = 0, ARCH_A = 1 };
static const struct {
    const char *name, *opnds, *typing;
    uint32_t types;
    int sm, ver;
    bool arch;
} op_tab[PTX_NOPS] = {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) \
    {text, opnds, typing, types, sm, ver, ARCH_##arch},
#include "ptx/isa.def"
};

enum { FEAT_T, FEAT_M, FEAT_P };
static const struct {
    uint16_t op;
    uint8_t kind, value;
    int sm, ver;
    bool arch;
} feat_tab[] = {
#define PTX_FEAT(op, kind, value, sm, ver, arch) \
    {PTX_OP_##op, FEAT_##kind, FEAT_V_##kind(value), sm, ver, ARCH_##arch},
#define FEAT_V_T(v) PTX_T_##v
#define FEAT_V_M(v) PTX_M_##v
#define FEAT_V_P(v) v
#include "ptx/isa.def"
#undef FEAT_V_T
#undef FEAT_V_M
#undef FEAT_V_P
};

/* Opcodes that have feature rows at all, so most instructions skip the scan
 * (two words: one bit per opcode). */
#define FEAT_BIT(op, w) ((PTX_OP_##op >> 6) == (w) ? 1ull << (PTX_OP_##op & 63) : 0ull)
static const uint64_t feat_ops[2] = {
    0
#define PTX_FEAT(op, kind, value, sm, ver, arch) | FEAT_BIT(op, 0)
#include "ptx/isa.def"
    ,
    0
#define PTX_FEAT(op, kind, value, sm, ver, arch) | FEAT_BIT(op, 1)
#include "ptx/isa.def"
};
_Static_assert(PTX_NOPS <= 128, "feat_ops holds 128 opcodes");

static void count_opnds(const char *p, int *min, int *max)
{
    int n = 0, req = -1;
    for (; *p; p++) {
        if (*p == '?') {
            if (req < 0)
                req = n - 1;
        } else
            n++;
    }
    *max = n;
    *min = req < 0 ? n : req;
}

ptx_opinfo ptx_op_info(ptx_op op)
{
    ptx_opinfo info = {
        .name = op_tab[op].name,
        .opnds = op_tab[op].opnds,
        .typing = op_tab[op].typing,
        .types = op_tab[op].types,
        .sm = op_tab[op].sm,
        .ver = op_tab[op].ver,
        .arch_specific = op_tab[op].arch,
    };
    for (int w = 0; w < PTX_MOD_WORDS; w++)
        info.mods[w] = op_mods[w][op];
    count_opnds(info.opnds, &info.min_opnds, &info.max_opnds);
    return info;
}

const char *ptx_op_name(ptx_op op) { return op_tab[op].name; }
const char *ptx_type_name(ptx_type t) { return type_tab[t].name; }
int ptx_type_bits(ptx_type t) { return type_tab[t].bits; }
char ptx_type_class(ptx_type t) { return type_tab[t].cls; }
const char *ptx_mod_name(ptx_mod m) { return mod_tab[m]; }
const char *ptx_sreg_name(ptx_sreg s) { return sreg_tab[s].name; }
int ptx_sreg_bits(ptx_sreg s) { return sreg_tab[s].bits; }

bool ptx_op_allows_mod(ptx_op op, ptx_mod m)
{
    if ((unsigned)m >= PTX_NMODS)
        return false;
    return (op_mods[m >> 6][op] >> (m & 63)) & 1;
}

static bool name_eq(const char *tab, const char *s, size_t n)
{
    return strncmp(tab, s, n) == 0 && tab[n] == '\0';
}

int ptx_op_lookup(const char *name, size_t n)
{
    for (int i = 1; i < PTX_NOPS; i++) /* 0 is the label pseudo-op */
        if (name_eq(op_tab[i].name, name, n))
            return i;
    return -1;
}

int ptx_type_lookup(const char *name, size_t n)
{
    for (int i = 0; i < PTX_NTYPES; i++)
        if (name_eq(type_tab[i].name, name, n))
            return i;
    return -1;
}

int ptx_mod_lookup(const char *name, size_t n)
{
    for (int i = 0; i < PTX_NMODS; i++)
        if (name_eq(mod_tab[i], name, n))
            return i;
    return -1;
}

int ptx_sreg_lookup(const char *name, size_t n)
{
    for (int i = 0; i < PTX_NSREGS; i++)
        if (name_eq(sreg_tab[i].name, name, n))
            return i;
    return -1;
}

/* ---- module and entries ---- */

ptx_module *ptx_module_new(const pt_target *t, int max_ptx)
{
    pt_arena *a = pt_arena_new();
    ptx_module *m = pt_arena_alloc(a, sizeof *m);
    m->arena = a;
    m->target = *t;
    m->max_ptx = max_ptx;
    m->version = pt_target_min_ptx(t);
    return m;
}

void ptx_module_free(ptx_module *m)
{
    if (m)
        pt_arena_free(m->arena);
}

int ptx_module_error(const ptx_module *m) { return m->err.code; }
const char *ptx_module_errmsg(const ptx_module *m) { return m->err.msg; }

int ptx_module_finish(ptx_module *m)
{
    if (m->err.code)
        return m->err.code;
    int v = pt_target_min_ptx(&m->target);
    for (size_t i = 0; i < m->nfns; i++)
        if (m->fns[i]->need_ver > v)
            v = m->fns[i]->need_ver;
    if (m->max_ptx && v > m->max_ptx) {
        char a[8], b[8], tn[16];
        return pt_errf(&m->err, PT_EUNSUPPORTED,
                       "%s kernel needs PTX %s but the compiler/driver accepts at most PTX %s",
                       pt_target_name(&m->target, tn, sizeof tn),
                       pt_ptx_version_str(v, a, sizeof a),
                       pt_ptx_version_str(m->max_ptx, b, sizeof b));
    }
    m->version = v;
    return PT_OK;
}

void ptx_module_extern_shared(ptx_module *m, const char *name, int align)
{
    m->shared = pt_arena_grow(m->arena, m->shared, sizeof *m->shared, &m->cap_shared,
                              m->nshared + 1);
    m->shared[m->nshared++] =
        (ptx_shared){pt_arena_strdup(m->arena, name), align, 0, true};
}

ptx_fn *ptx_fn_new(ptx_module *m, const char *name)
{
    ptx_fn *f = pt_arena_alloc(m->arena, sizeof *f);
    f->mod = m;
    f->name = pt_arena_strdup(m->arena, name);
    for (int i = 0; i < PTX_NTYPES; i++)
        f->std_bank[i] = -1;
    /* room for a typical kernel up front: regrowing copies whole bodies */
    f->body = pt_arena_grow(m->arena, NULL, sizeof *f->body, &f->cap_body, 1024);
    m->fns = pt_arena_grow(m->arena, m->fns, sizeof *m->fns, &m->cap_fns, m->nfns + 1);
    m->fns[m->nfns++] = f;
    return f;
}

static ptx_param *param_push(ptx_fn *f, const char *name, ptx_type t)
{
    f->params = pt_arena_grow(f->mod->arena, f->params, sizeof *f->params, &f->cap_params,
                              f->nparams + 1);
    ptx_param *p = &f->params[f->nparams++];
    memset(p, 0, sizeof *p);
    p->name = pt_arena_strdup(f->mod->arena, name);
    p->type = t;
    return p;
}

const char *ptx_param_add(ptx_fn *f, const char *name, ptx_type t)
{
    return param_push(f, name, t)->name;
}

const char *ptx_param_ptr(ptx_fn *f, const char *name, int align)
{
    ptx_param *p = param_push(f, name, PTX_T_U64);
    p->ptr = true;
    p->ptr_align = align;
    return p->name;
}

const char *ptx_param_bytes(ptx_fn *f, const char *name, int align, int bytes)
{
    ptx_param *p = param_push(f, name, PTX_T_B8);
    p->align = align;
    p->array = bytes;
    return p->name;
}

const char *ptx_shared_add(ptx_fn *f, const char *name, int align, int64_t bytes)
{
    f->shared = pt_arena_grow(f->mod->arena, f->shared, sizeof *f->shared, &f->cap_shared,
                              f->nshared + 1);
    ptx_shared *s = &f->shared[f->nshared++];
    *s = (ptx_shared){pt_arena_strdup(f->mod->arena, name), align, bytes, false};
    return s->name;
}

int ptx_bank_add(ptx_fn *f, const char *prefix, ptx_type t, uint32_t count, bool scalar)
{
    if (strlen(prefix) > PTX_MAX_BANK_NAME) {
        pt_errf(&f->mod->err, PT_EINVAL, "register name '%.20s...' longer than %d bytes", prefix,
                PTX_MAX_BANK_NAME);
        prefix = "%invalid";
    }
    f->banks = pt_arena_grow(f->mod->arena, f->banks, sizeof *f->banks, &f->cap_banks,
                             f->nbanks + 1);
    f->banks[f->nbanks] = (ptx_bank){pt_arena_strdup(f->mod->arena, prefix), t, count, scalar};
    return (int)f->nbanks++;
}

static const char *std_prefix(ptx_type t)
{
    switch (t) {
    case PTX_T_PRED: return "%p";
    case PTX_T_B16: return "%rs";
    case PTX_T_B32: return "%r";
    case PTX_T_B64: return "%rd";
    case PTX_T_F32: return "%f";
    case PTX_T_F64: return "%fd";
    default: return NULL;
    }
}

ptx_reg ptx_reg_new(ptx_fn *f, ptx_type t)
{
    int b = f->std_bank[t];
    if (b < 0) {
        const char *p = std_prefix(t);
        if (!p) {
            pt_errf(&f->mod->err, PT_EINTERNAL, "no register family for .%s", ptx_type_name(t));
            return (ptx_reg){0};
        }
        b = f->std_bank[t] = ptx_bank_add(f, p, t, 0, false);
    }
    uint32_t idx = f->banks[b].count++;
    return (ptx_reg){((uint32_t)(b + 1) << 20) | idx};
}

ptx_type ptx_reg_type(const ptx_fn *f, ptx_reg r)
{
    return f->banks[PTX_REG_BANK(r)].type;
}

int ptx_label_named(ptx_fn *f, const char *name)
{
    f->labels = pt_arena_grow(f->mod->arena, f->labels, sizeof *f->labels, &f->cap_labels,
                              f->nlabels + 1);
    f->labels[f->nlabels] = pt_arena_strdup(f->mod->arena, name);
    return (int)f->nlabels++;
}

int ptx_label_new(ptx_fn *f)
{
    char name[32];
    snprintf(name, sizeof name, "$L__BB%zu", f->nlabels);
    return ptx_label_named(f, name);
}

void ptx_label_place(ptx_fn *f, int label)
{
    ptx_emit(f, PTX_OP_LABEL, PTX_NOMODS, PTX_NOTYPES, ptx_lbl(label));
}

ptx_opd ptx_vec(ptx_fn *f, int n, const ptx_opd *e)
{
    ptx_opd *c = pt_arena_alloc(f->mod->arena, (size_t)n * sizeof *c);
    memcpy(c, e, (size_t)n * sizeof *c);
    return (ptx_opd){.kind = PTX_O_VEC, .u.vec = {c, n}};
}

ptx_opd ptx_vecr(ptx_fn *f, int n, const ptx_reg *r)
{
    ptx_opd *c = pt_arena_alloc(f->mod->arena, (size_t)n * sizeof *c);
    for (int i = 0; i < n; i++)
        c[i] = ptx_r(r[i]);
    return (ptx_opd){.kind = PTX_O_VEC, .u.vec = {c, n}};
}

void ptx_guard(ptx_ins *i, ptx_reg p, bool neg)
{
    if (i) {
        i->guard = p;
        i->guard_neg = neg;
    }
}

/* ---- checks ---- */

void ptx_ins_opname(const ptx_ins *ins, pt_buf *out)
{
    pt_buf_puts(out, op_tab[ins->op].name);
    for (int i = 0; i < ins->nmods; i++) {
        pt_buf_putc(out, '.');
        pt_buf_puts(out, mod_tab[ins->mods[i]]);
    }
    for (int i = 0; i < ins->ntypes; i++) {
        pt_buf_putc(out, '.');
        pt_buf_puts(out, type_tab[ins->types[i]].name);
    }
}

static bool has_mod(const ptx_ins *ins, ptx_mod m)
{
    for (int i = 0; i < ins->nmods; i++)
        if (ins->mods[i] == m)
            return true;
    return false;
}

static int ins_err(const ptx_fn *f, const ptx_ins *ins, pt_err *e, int code, const char *what,
                   const char *detail)
{
    pt_buf b;
    pt_buf_init(&b);
    ptx_ins_opname(ins, &b);
    (void)f;
    pt_errf(e, code, "%s: %s%s", b.s, what, detail);
    pt_buf_free(&b);
    return code;
}

/* Size rule for one register operand. Float-typed registers (.f32/.f64)
 * may only serve float instructions (ptxas "Arguments mismatch"). */
static inline int type_bits_(int t) { return type_tab[t].bits; }
static inline char type_cls_(int t) { return type_tab[t].cls; }

static int check_reg(const ptx_fn *f, const ptx_ins *ins, ptx_reg r, char rule, pt_err *e,
                     int pos)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= f->nbanks || PTX_REG_IDX(r) >= f->banks[b].count)
        return ins_err(f, ins, e, PT_EINVAL, "undeclared register", "");
    ptx_type rt = f->banks[b].type;
    int rbits = type_bits_(rt);
    char buf[96];
    if (rule == 'P') {
        if (rt != PTX_T_PRED) {
            snprintf(buf, sizeof buf, " %d", pos + 1);
            return ins_err(f, ins, e, PT_EINVAL, "expects a predicate at operand", buf);
        }
        return PT_OK;
    }
    if (rule == '-' || ins->ntypes == 0)
        return PT_OK;
    ptx_type it = ins->types[0];
    int want = type_bits_(it);
    if (rule == 'U' && ins->ntypes > 1) {
        it = ins->types[1];
        want = type_bits_(it);
    } else if (rule == '3')
        want = 32;
    else if (rule == 'W' && has_mod(ins, PTX_M_WIDE))
        want *= 2;
    if (it == PTX_T_PRED || rt == PTX_T_PRED) {
        if ((it == PTX_T_PRED) != (rt == PTX_T_PRED) && rule != '3') {
            snprintf(buf, sizeof buf, " %d has register type .%s", pos + 1, ptx_type_name(rt));
            return ins_err(f, ins, e, PT_EINVAL, "operand", buf);
        }
        return PT_OK;
    }
    bool ok = rule == 'L' ? rbits >= want : rbits == want;
    if (ok && type_cls_(rt) == 'f' && type_cls_(it) != 'f' && type_cls_(it) != 'b' &&
        rule != '3')
        ok = false;
    if (!ok) {
        snprintf(buf, sizeof buf, " %d: register of type .%s where %d bits are needed", pos + 1,
                 ptx_type_name(rt), want);
        return ins_err(f, ins, e, PT_EINVAL, "type mismatch at operand", buf);
    }
    return PT_OK;
}

static int check_opd(const ptx_fn *f, const ptx_ins *ins, int pos, char cls, char rule,
                     pt_err *e)
{
    const ptx_opd *o = &ins->opd[pos];
    char buf[16] = " ?";
    if (pos < 9) /* the message's position, without printf on the hot path */
        buf[1] = (char)('1' + pos);
    bool ok;
    switch (cls) {
    case 'd': ok = o->kind == PTX_O_REG || o->kind == PTX_O_VEC || o->kind == PTX_O_SINK; break;
    case 's':
        ok = o->kind == PTX_O_REG || o->kind == PTX_O_IMM || o->kind == PTX_O_F32 ||
             o->kind == PTX_O_F64 || o->kind == PTX_O_VEC || o->kind == PTX_O_SREG ||
             o->kind == PTX_O_SYM;
        break;
    case 'a': ok = o->kind == PTX_O_ADDR; break;
    case 'p':
    case 'q': ok = o->kind == PTX_O_REG; break;
    case 'l': ok = o->kind == PTX_O_LABEL; break;
    case 'i': ok = o->kind == PTX_O_IMM; break;
    default: ok = false;
    }
    if (!ok)
        return ins_err(f, ins, e, PT_EINVAL, "wrong kind of operand at position", buf);
    if (o->neg && cls != 'q')
        return ins_err(f, ins, e, PT_EINVAL, "negation only allowed on a predicate source at",
                       buf);
    if (o->kind == PTX_O_LABEL && (o->u.label < 0 || (size_t)o->u.label >= f->nlabels))
        return ins_err(f, ins, e, PT_EINVAL, "unknown label at operand", buf);
    if (o->kind == PTX_O_REG)
        return check_reg(f, ins, o->u.reg, cls == 'p' || cls == 'q' ? 'P' : rule, e, pos);
    if (o->kind == PTX_O_VEC) {
        for (int i = 0; i < o->u.vec.n; i++) {
            const ptx_opd *v = &o->u.vec.e[i];
            if (v->kind == PTX_O_REG) {
                int rc = check_reg(f, ins, v->u.reg, '-', e, pos);
                if (rc)
                    return rc;
            }
        }
    }
    if (o->kind == PTX_O_ADDR && o->u.addr.sym == NULL) {
        int rc = check_reg(f, ins, o->u.addr.base, '-', e, pos);
        if (rc)
            return rc;
        int b = PTX_REG_BANK(o->u.addr.base);
        if (ptx_type_bits(f->banks[b].type) < 32)
            return ins_err(f, ins, e, PT_EINVAL, "address register too narrow at operand", buf);
    }
    return PT_OK;
}

int ptx_check_ins(ptx_fn *f, const ptx_ins *ins, pt_err *e)
{
    if (ins->op >= PTX_NOPS)
        return pt_errf(e, PT_EINVAL, "unknown opcode %u", ins->op);
    const char *opnds = op_tab[ins->op].opnds, *typing = op_tab[ins->op].typing;
    int min, max;
    count_opnds(opnds, &min, &max);
    char buf[96];
    for (int i = 0; i < ins->nmods; i++)
        if (!ptx_op_allows_mod(ins->op, ins->mods[i])) {
            snprintf(buf, sizeof buf, " '.%s'", mod_tab[ins->mods[i]]);
            return ins_err(f, ins, e, PT_EINVAL, "modifier not allowed:", buf);
        }
    for (int i = 0; i < ins->ntypes; i++)
        if (!((op_tab[ins->op].types >> ins->types[i]) & 1)) {
            snprintf(buf, sizeof buf, " '.%s'", type_tab[ins->types[i]].name);
            return ins_err(f, ins, e, PT_EINVAL, "type not allowed:", buf);
        }
    if (op_tab[ins->op].types && ins->ntypes == 0)
        return ins_err(f, ins, e, PT_EINVAL, "missing type suffix", "");
    if (ins->nopd < min || ins->nopd > max) {
        if (min == max)
            snprintf(buf, sizeof buf, " %d operands, expected %d", ins->nopd, min);
        else
            snprintf(buf, sizeof buf, " %d operands, expected %d..%d", ins->nopd, min, max);
        return ins_err(f, ins, e, PT_EINVAL, "wrong operand count:", buf);
    }
    for (int i = 0, k = 0; i < ins->nopd; i++, k++) {
        while (opnds[k] == '?')
            k++;
        char rule = typing[i] ? typing[i] : '-';
        int rc = check_opd(f, ins, i, opnds[k], rule, e);
        if (rc)
            return rc;
    }
    if (ins->guard.id) {
        int rc = check_reg(f, ins, ins->guard, 'P', e, -1);
        if (rc)
            return rc;
    }
    /* vector width must match .v2/.v4 */
    if (ins->op == PTX_OP_LD || ins->op == PTX_OP_ST) {
        int want = has_mod(ins, PTX_M_V4) ? 4 : has_mod(ins, PTX_M_V2) ? 2 : 1;
        const ptx_opd *v = &ins->opd[ins->op == PTX_OP_LD ? 0 : 1];
        int got = v->kind == PTX_O_VEC ? v->u.vec.n : 1;
        if (want != got) {
            snprintf(buf, sizeof buf, " %d elements for a .v%d access", got, want);
            return ins_err(f, ins, e, PT_EINVAL, "vector size mismatch:", buf);
        }
    }
    /* target requirements: the opcode row, raised by matching feature rows */
    int sm = op_tab[ins->op].sm, ver = op_tab[ins->op].ver;
    bool arch = op_tab[ins->op].arch;
    bool has_feat = (feat_ops[ins->op >> 6] >> (ins->op & 63)) & 1;
    for (size_t i = 0; has_feat && i < sizeof feat_tab / sizeof feat_tab[0]; i++) {
        if (feat_tab[i].op != ins->op)
            continue;
        bool hit = false;
        if (feat_tab[i].kind == FEAT_T) {
            for (int k = 0; k < ins->ntypes; k++)
                hit |= ins->types[k] == feat_tab[i].value;
        } else if (feat_tab[i].kind == FEAT_M) {
            hit = has_mod(ins, feat_tab[i].value);
        } else { /* P: operand `value` is a predicate register */
            const ptx_opd *o = &ins->opd[feat_tab[i].value];
            hit = feat_tab[i].value < ins->nopd && o->kind == PTX_O_REG &&
                  f->banks[PTX_REG_BANK(o->u.reg)].type == PTX_T_PRED;
        }
        if (hit) {
            if (feat_tab[i].sm > sm)
                sm = feat_tab[i].sm;
            if (feat_tab[i].ver > ver)
                ver = feat_tab[i].ver;
            arch |= feat_tab[i].arch;
        }
    }
    const pt_target *t = &f->mod->target;
    bool arch_miss = arch && !t->arch_specific;
    if (sm > t->sm || arch_miss || (f->mod->max_ptx && ver > f->mod->max_ptx)) {
        char tn[16], vs[8], need[96];
        const char *a = arch ? "a" : "";
        if (sm > t->sm)
            snprintf(need, sizeof need, " needs sm_%d%s and PTX %s; target is %s", sm, a,
                     pt_ptx_version_str(ver, vs, sizeof vs), pt_target_name(t, tn, sizeof tn));
        else if (arch_miss) /* e.g. setmaxnreg on plain sm_90 */
            snprintf(need, sizeof need, " needs sm_%d%s; target is %s", sm, a,
                     pt_target_name(t, tn, sizeof tn));
        else {
            char mx[8];
            snprintf(need, sizeof need, " needs PTX %s; the toolchain accepts at most PTX %s",
                     pt_ptx_version_str(ver, vs, sizeof vs),
                     pt_ptx_version_str(f->mod->max_ptx, mx, sizeof mx));
        }
        pt_buf b;
        pt_buf_init(&b);
        ptx_ins_opname(ins, &b);
        pt_errf(e, PT_EUNSUPPORTED, "%s%s", b.s, need);
        pt_buf_free(&b);
        return PT_EUNSUPPORTED;
    }
    if (sm > f->need_sm)
        f->need_sm = sm;
    if (ver > f->need_ver)
        f->need_ver = ver;
    return PT_OK;
}

ptx_ins *ptx_emit_n(ptx_fn *f, ptx_op op, ptx_mods mods, ptx_types types, int n,
                    const ptx_opd *opd)
{
    if (f->mod->err.code)
        return NULL;
    if (n > PTX_MAX_OPDS) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "%s: too many operands", op_tab[op].name);
        return NULL;
    }
    /* build in place: the body slot is checked, then kept or dropped */
    f->body = pt_arena_grow(f->mod->arena, f->body, sizeof *f->body, &f->cap_body, f->nbody + 1);
    ptx_ins *ins = &f->body[f->nbody];
    ins->op = (uint16_t)op;
    ins->nmods = mods.n;
    ins->ntypes = types.n;
    ins->nopd = (uint8_t)n;
    ins->guard_neg = false;
    ins->guard = (ptx_reg){0};
    ins->line = 0;
    memcpy(ins->mods, mods.m, sizeof ins->mods);
    memcpy(ins->types, types.t, sizeof ins->types);
    if (n)
        memcpy(ins->opd, opd, (size_t)n * sizeof *opd);
    if (ptx_check_ins(f, ins, &f->mod->err))
        return NULL;
    return &f->body[f->nbody++];
}
