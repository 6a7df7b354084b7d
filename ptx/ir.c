/* The IR builder: tables generated from ptx/isa.def, module/entry
 * construction and the per-instruction checks. */
#include "ptx/ir.h"

#include <stdio.h>
#include <stdlib.h>
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
    int bits, sm, ver;
} sreg_tab[PTX_NSREGS] = {
#define PTX_SREG(id, text, bits, sm, ver) {text, bits, sm, ver},
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

enum { FEAT_T, FEAT_M, FEAT_P, FEAT_N, FEAT_X };
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
#define FEAT_V_N(v) v
#define FEAT_V_X(v) v
#include "ptx/isa.def"
#undef FEAT_V_T
#undef FEAT_V_M
#undef FEAT_V_P
#undef FEAT_V_N
#undef FEAT_V_X
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

/* ---- legality rule rows (isa.def, "legality rules") ---- */

typedef struct mmask {
    uint64_t w[PTX_MOD_WORDS];
} mmask;

static bool mm_has(const uint64_t *w, int m) { return (w[m >> 6] >> (m & 63)) & 1; }

/* the key "whatever modifiers" of PTX_OPN / PTX_VEC / PTX_IMM rows */
enum { KEY_ANY = PTX_NMODS };
#define RKEY(m) RKEY_##m
#define RKEY_ANY KEY_ANY

/* Expands the rows of one kind once per modifier word: ROWS_W(w) is the
 * initializer of word w (an #include of isa.def with MB keeping word w). */
static const char *const mclass_what[] = {
#define PTX_MCLASS(id, what, mods) what,
#include "ptx/isa.def"
};
enum { NMCLASS = sizeof mclass_what / sizeof mclass_what[0] };
static const uint64_t mclass_m[PTX_MOD_WORDS][NMCLASS] = {
    {
#define MB(x) MBW(x, 0)
#define PTX_MCLASS(id, what, mods) mods,
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 1)
#define PTX_MCLASS(id, what, mods) mods,
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 2)
#define PTX_MCLASS(id, what, mods) mods,
#include "ptx/isa.def"
#undef MB
    },
};

typedef struct form_row {
    uint16_t op;
    uint32_t t[PTX_MAX_TYPES];
    uint8_t nopd;
} form_row;
static const form_row form_tab[] = {
#define PTX_FORM(op, t0, t1, t2, t3, nopd, mods, all, one) {PTX_OP_##op, {t0, t1, t2, t3}, nopd},
#include "ptx/isa.def"
};
enum { NFORMS = sizeof form_tab / sizeof form_tab[0] };
/* [word][row][0 mods, 1 all, 2 one] */
static const uint64_t form_m[PTX_MOD_WORDS][NFORMS][3] = {
    {
#define MB(x) MBW(x, 0)
#define PTX_FORM(op, t0, t1, t2, t3, nopd, mods, all, one) {mods, all, one},
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 1)
#define PTX_FORM(op, t0, t1, t2, t3, nopd, mods, all, one) {mods, all, one},
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 2)
#define PTX_FORM(op, t0, t1, t2, t3, nopd, mods, all, one) {mods, all, one},
#include "ptx/isa.def"
#undef MB
    },
};

typedef struct req_row {
    uint16_t op;
    uint8_t mod;
    uint32_t types;
} req_row;
static const req_row req_tab[] = {
#define PTX_REQ(op, mod, types, needs) {PTX_OP_##op, PTX_M_##mod, types},
#include "ptx/isa.def"
};
enum { NREQS = sizeof req_tab / sizeof req_tab[0] };
static const uint64_t req_m[PTX_MOD_WORDS][NREQS] = {
    {
#define MB(x) MBW(x, 0)
#define PTX_REQ(op, mod, types, needs) needs,
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 1)
#define PTX_REQ(op, mod, types, needs) needs,
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 2)
#define PTX_REQ(op, mod, types, needs) needs,
#include "ptx/isa.def"
#undef MB
    },
};

typedef struct opn_row {
    uint16_t op;
    uint8_t mod, min, max;
} opn_row;
static const opn_row opn_tab[] = {
#define PTX_OPN(op, mod, min, max) {PTX_OP_##op, PTX_M_##mod, min, max},
#define PTX_M_ANY KEY_ANY
#include "ptx/isa.def"
#undef PTX_M_ANY
};

typedef struct vec_row {
    uint16_t op;
    uint8_t mod, opnd, tyidx;
    int8_t n; /* < 0: the shape's N / -n */
    uint32_t types;
} vec_row;
static const vec_row vec_tab[] = {
#define PTX_VEC(op, mod, opnd, tyidx, types, n) {PTX_OP_##op, PTX_M_##mod, opnd, tyidx, n, types},
#define PTX_M_ANY KEY_ANY
#include "ptx/isa.def"
#undef PTX_M_ANY
};

typedef struct imm_row {
    uint16_t op;
    uint8_t mod, opnd;
    int64_t lo, hi, step;
    const char *what;
} imm_row;
static const imm_row imm_tab[] = {
#define PTX_IMM(op, mod, opnd, lo, hi, step, what) {PTX_OP_##op, PTX_M_##mod, opnd, lo, hi, step, what},
#define PTX_M_ANY KEY_ANY
#include "ptx/isa.def"
#undef PTX_M_ANY
};

typedef struct order_row {
    uint16_t op;
    const char *why;
} order_row;
static const order_row order_tab[] = {
#define PTX_ORDER(op, before, after, why) {PTX_OP_##op, why},
#include "ptx/isa.def"
};
enum { NORDERS = sizeof order_tab / sizeof order_tab[0] };
/* [word][row][0 before, 1 after] */
static const uint64_t order_m[PTX_MOD_WORDS][NORDERS][2] = {
    {
#define MB(x) MBW(x, 0)
#define PTX_ORDER(op, before, after, why) {before, after},
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 1)
#define PTX_ORDER(op, before, after, why) {before, after},
#include "ptx/isa.def"
#undef MB
    },
    {
#define MB(x) MBW(x, 2)
#define PTX_ORDER(op, before, after, why) {before, after},
#include "ptx/isa.def"
#undef MB
    },
};

typedef struct pack_row {
    uint16_t op;
    uint32_t types;
} pack_row;
static const pack_row pack_tab[] = {
#define PTX_PACK(op, types) {PTX_OP_##op, types},
#include "ptx/isa.def"
};

typedef struct shape_row {
    uint16_t op;
    uint8_t tyidx, m;
    uint16_t k;
    uint32_t types;
    int lo, hi, step;
} shape_row;
static const shape_row shape_tab[] = {
#define PTX_SHAPE(op, tyidx, types, m, k, lo, hi, step) {PTX_OP_##op, tyidx, m, k, types, lo, hi, step},
#include "ptx/isa.def"
    {PTX_NOPS, 0, 0, 0, 0, 0, 0, 0}, /* sentinel: the table may have no rows */
};

typedef struct opadd_row {
    uint16_t op;
    uint8_t mod;
    char cls, typing;
} opadd_row;
static const opadd_row opadd_tab[] = {
#define PTX_OPADD(op, mod, cls, typing) {PTX_OP_##op, PTX_M_##mod, cls, typing},
#include "ptx/isa.def"
    {PTX_NOPS, 0, 0, 0},
};

#define NROWS(tab) (sizeof tab / sizeof tab[0])

/* Rows of one kind are sorted by opcode (test_ir checks it through
 * ptx_isa_check_table): [*lo, *hi) are op's rows. The op field comes first
 * in every row struct. */
static void op_rows(const void *tab, size_t n, size_t stride, unsigned op, size_t *lo, size_t *hi)
{
    const char *t = tab;
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = (a + b) / 2;
        if (*(const uint16_t *)(const void *)(t + mid * stride) < op)
            a = mid + 1;
        else
            b = mid;
    }
    *lo = a;
    b = a;
    while (b < n && *(const uint16_t *)(const void *)(t + b * stride) == op)
        b++;
    *hi = b;
}
#define OP_ROWS(tab, op, lo, hi) op_rows(tab, NROWS(tab), sizeof tab[0], op, lo, hi)

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
void ptx_sreg_need(ptx_sreg s, int *sm, int *ver)
{
    *sm = sreg_tab[s].sm;
    *ver = sreg_tab[s].ver;
}

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
    jmp_buf jb;
    if (setjmp(jb)) { /* the first block */
        pt_arena_free(a);
        return NULL;
    }
    pt_arena_catch(a, &jb);
    ptx_module *m = pt_arena_alloc(a, sizeof *m);
    pt_arena_catch(a, NULL);
    m->arena = a;
    m->target = *t;
    m->max_ptx = max_ptx;
    m->version = pt_target_min_ptx(t);
    return m;
}

static void sig_free(struct ptx_sigtab *t); /* the builder's signature table, below */
static struct ptx_sigtab *sig_new(void);

void ptx_module_free(ptx_module *m)
{
    if (m) {
        if (!m->sigs_shared)
            sig_free(m->sigs);
        pt_arena_free(m->arena);
    }
}

/* One table per target and ceiling (a signature's `plain` verdict reads
 * them; nothing else of check_sig does); past CACHE_KEYS of them, modules
 * go uncached. */
enum { CACHE_KEYS = 16 };
struct ptx_sigcache {
    int n;
    struct {
        pt_target t;
        int max_ptx;
        struct ptx_sigtab *tab;
    } e[CACHE_KEYS];
};

ptx_sigcache *ptx_sigcache_new(void)
{
    return calloc(1, sizeof(ptx_sigcache)); /* oom: caller checks (NULL, as ir.h says) */
}

void ptx_sigcache_free(ptx_sigcache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        sig_free(c->e[i].tab);
    free(c);
}

ptx_module *ptx_module_new_cached(const pt_target *t, int max_ptx, ptx_sigcache *c)
{
    ptx_module *m = ptx_module_new(t, max_ptx);
    if (!m || !c)
        return m;
    int i = 0;
    while (i < c->n && !(c->e[i].t.sm == t->sm && c->e[i].t.arch_specific == t->arch_specific &&
                         c->e[i].t.assemble_only == t->assemble_only && c->e[i].max_ptx == max_ptx))
        i++;
    if (i == c->n) {
        if (c->n == CACHE_KEYS)
            return m;
        struct ptx_sigtab *tab = sig_new();
        if (!tab) /* no memory: uncached */
            return m;
        c->e[i].t = *t;
        c->e[i].max_ptx = max_ptx;
        c->e[i].tab = tab;
        c->n++;
    }
    m->sigs = c->e[i].tab;
    m->sigs_shared = true;
    return m;
}

int ptx_module_error(const ptx_module *m) { return m->err.code; }
const char *ptx_module_errmsg(const ptx_module *m) { return m->err.msg; }

int ptx_fn_check_directives(ptx_fn *f, pt_err *e)
{
    const char *d = f->explicitcluster ? ".explicitcluster"
                    : f->reqnctapercluster[0] ? ".reqnctapercluster"
                    : f->maxclusterrank ? ".maxclusterrank"
                                        : NULL;
    if (!d)
        return PT_OK;
    const pt_target *t = &f->mod->target;
    if (t->sm < 90) {
        char tn[16];
        return pt_errf(e, PT_EUNSUPPORTED, "%s needs sm_90 and PTX 7.8; target is %s", d,
                       pt_target_name(t, tn, sizeof tn));
    }
    if (f->need_ver < 78)
        f->need_ver = 78;
    if (f->need_sm < 90)
        f->need_sm = 90;
    return PT_OK;
}

int ptx_module_finish(ptx_module *m)
{
    if (m->err.code)
        return m->err.code;
    int v = pt_target_min_ptx(&m->target);
    for (size_t i = 0; i < m->nfns; i++) {
        int rc = ptx_fn_check_directives(m->fns[i], &m->err);
        if (rc)
            return rc;
        if (m->fns[i]->need_ver > v)
            v = m->fns[i]->need_ver;
    }
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
    char name[32] = "$L__BB"; /* "$L__BB%zu", without printf */
    *pt_u64s(name + 6, f->nlabels) = '\0';
    return ptx_label_named(f, name);
}

void ptx_label_place(ptx_fn *f, int label)
{
    ptx_emit(f, PTX_OP_LABEL, PTX_NOMODS, PTX_NOTYPES, ptx_lbl(label));
}

ptx_opd ptx_vec(ptx_fn *f, int n, const ptx_opd *e)
{
    ptx_opd *c = pt_arena_alloc_raw(f->mod->arena, (size_t)n * sizeof *c);
    memcpy(c, e, (size_t)n * sizeof *c);
    return (ptx_opd){.kind = PTX_O_VEC, .u.vec = {c, n}};
}

ptx_opd ptx_vecr(ptx_fn *f, int n, const ptx_reg *r)
{
    ptx_opd *c = pt_arena_alloc_raw(f->mod->arena, (size_t)n * sizeof *c);
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
    for (int i = 0; i <= ins->nmods; i++) {
        if (ins->shape.m && (ins->shape.at == i || (i == ins->nmods && ins->shape.at > i)))
            pt_buf_printf(out, ".m%dn%dk%d", ins->shape.m, ins->shape.n, ins->shape.k);
        if (i == ins->nmods)
            break;
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

/* Whether a register of type rt may be an operand under rule (an operand
 * typing letter, isa.def): RF_OK, or why not (check_reg words it; *want:
 * the bits needed). A pure function of the instruction's types and
 * modifiers, rule and rt, so the builder's fast path (opds_fast) keeps its
 * verdicts per signature. */
enum { RF_OK, RF_PRED, RF_FIXED, RF_PREDMIX, RF_SIZE };
static int reg_fail(const ptx_ins *ins, ptx_type rt, char rule, int *want)
{
    int rbits = type_bits_(rt);
    if (rule == 'P')
        return rt != PTX_T_PRED ? RF_PRED : RF_OK;
    if (rule == '6' || rule == 'h' || rule == 'K' || rule == 'V' || rule == 'Z' || rule == 'A') {
        /* fixed sizes: 64-bit integer (descriptors, cache policies, mbarrier
         * states), 16-bit (multicast masks), 32-bit vector elements */
        *want = rule == '6' || rule == 'K' ? 64 : rule == 'h' ? 16 : 32;
        bool fl = type_cls_(rt) == 'f';
        bool ok = rbits == *want && rt != PTX_T_PRED;
        if (rule == '6' || rule == 'K' || rule == 'A')
            ok = ok && !fl;
        if (rule == 'Z')
            ok = ok && (!fl || (ins->ntypes && ins->types[0] == PTX_T_F32));
        return ok ? RF_OK : RF_FIXED;
    }
    if (rule == '-' || ins->ntypes == 0)
        return RF_OK;
    ptx_type it = ins->types[0];
    *want = type_bits_(it);
    if (rule == 'U' && ins->ntypes > 1) {
        it = ins->types[1];
        *want = type_bits_(it);
    } else if (rule == '3')
        *want = 32;
    else if (rule == 'W' && has_mod(ins, PTX_M_WIDE))
        *want *= 2;
    if (it == PTX_T_PRED || rt == PTX_T_PRED)
        return (it == PTX_T_PRED) != (rt == PTX_T_PRED) && rule != '3' ? RF_PREDMIX : RF_OK;
    bool ok = rule == 'L' ? rbits >= *want : rbits == *want;
    if (*want == 8 && rbits == 16 && rule != '3') /* no 8-bit registers: .u8/.s8 live in 16 bits */
        ok = true;
    if (ok && type_cls_(rt) == 'f' && type_cls_(it) != 'f' && type_cls_(it) != 'b' &&
        rule != '3')
        ok = false;
    return ok ? RF_OK : RF_SIZE;
}

static int check_reg(const ptx_fn *f, const ptx_ins *ins, ptx_reg r, char rule, pt_err *e,
                     int pos)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= f->nbanks || PTX_REG_IDX(r) >= f->banks[b].count)
        return ins_err(f, ins, e, PT_EINVAL, "undeclared register", "");
    ptx_type rt = f->banks[b].type;
    int want = 0;
    char buf[96];
    switch (reg_fail(ins, rt, rule, &want)) {
    case RF_OK: return PT_OK;
    case RF_PRED:
        snprintf(buf, sizeof buf, " %d", pos + 1);
        return ins_err(f, ins, e, PT_EINVAL, "expects a predicate at operand", buf);
    case RF_FIXED: {
        bool fl = type_cls_(rt) == 'f';
        snprintf(buf, sizeof buf, " %d: register of type .%s where %d %sbits are needed", pos + 1,
                 ptx_type_name(rt), want, fl && type_bits_(rt) == want ? "non-float " : "");
        return ins_err(f, ins, e, PT_EINVAL, "type mismatch at operand", buf);
    }
    case RF_PREDMIX:
        snprintf(buf, sizeof buf, " %d has register type .%s", pos + 1, ptx_type_name(rt));
        return ins_err(f, ins, e, PT_EINVAL, "operand", buf);
    default:
        snprintf(buf, sizeof buf, " %d: register of type .%s where %d bits are needed", pos + 1,
                 ptx_type_name(rt), want);
        return ins_err(f, ins, e, PT_EINVAL, "type mismatch at operand", buf);
    }
}

/* The kinds operand class cls (isa.def) takes, one bit per ptx_opd_kind. */
#define KB(k) (1u << PTX_O_##k)
static uint16_t cls_kinds(char cls)
{
    switch (cls) {
    case 'd': return KB(REG) | KB(VEC) | KB(SINK);
    case 's': return KB(REG) | KB(IMM) | KB(F32) | KB(F64) | KB(VEC) | KB(SREG) | KB(SYM);
    case 'a': return KB(ADDR);
    case 'v': return KB(VEC);
    case 'p':
    case 'q':
    case 'r': return KB(REG);
    case 'e': return KB(REG) | KB(IMM);
    case 'c': return KB(PAIR);
    case 't': return KB(TENSOR);
    case 'l': return KB(LABEL);
    case 'i': return KB(IMM);
    default: return 0;
    }
}
#undef KB

/* Whether operand class cls takes an operand of kind k. */
static bool cls_takes(char cls, int k) { return k >= 0 && k < 16 && ((cls_kinds(cls) >> k) & 1); }

static int check_opd(const ptx_fn *f, const ptx_ins *ins, int pos, char cls, char rule,
                     pt_err *e)
{
    const ptx_opd *o = &ins->opd[pos];
    char buf[16] = " ?";
    if (pos < 9) /* the message's position, without printf on the hot path */
        buf[1] = (char)('1' + pos);
    bool ok = cls_takes(cls, o->kind);
    if (!ok)
        return ins_err(f, ins, e, PT_EINVAL, "wrong kind of operand at position", buf);
    if (rule == 'K' && has_mod(ins, PTX_M_SHARED_CLUSTER) && o->kind != PTX_O_SINK)
        return ins_err(f, ins, e, PT_EINVAL, "the destination must be the sink '_' with .shared::cluster at",
                       buf);
    if (o->kind == PTX_O_SREG) {
        ptx_sreg sr = o->u.sreg;
        bool pred = sreg_tab[sr].bits == 1;
        if (pred != (ins->ntypes && ins->types[0] == PTX_T_PRED) && ins->ntypes) {
            char m[96];
            snprintf(m, sizeof m, " %d: %s is %s", pos + 1, sreg_tab[sr].name,
                     pred ? "a predicate (mov.pred)" : "not a predicate");
            return ins_err(f, ins, e, PT_EINVAL, "type mismatch at operand", m);
        }
    }
    if (o->kind == PTX_O_PAIR) {
        if (o->u.pair.d.id) {
            int rc = check_reg(f, ins, o->u.pair.d, '3', e, pos);
            if (rc)
                return rc;
        }
        return check_reg(f, ins, o->u.pair.p, 'P', e, pos);
    }
    if (o->kind == PTX_O_TENSOR) {
        const ptx_opd *v = o->u.vec.e;
        if (o->u.vec.n < 1 || v[0].kind != PTX_O_REG)
            return ins_err(f, ins, e, PT_EINVAL, "the tensor map must be a 64-bit register at", buf);
        int rc = check_reg(f, ins, v[0].u.reg, '6', e, pos);
        for (int i = 1; !rc && i < o->u.vec.n; i++) {
            if (v[i].kind == PTX_O_IMM)
                continue;
            if (v[i].kind != PTX_O_REG)
                return ins_err(f, ins, e, PT_EINVAL, "a tensor coordinate must be a register or an integer at", buf);
            rc = check_reg(f, ins, v[i].u.reg, 'A', e, pos);
        }
        return rc;
    }
    if (o->neg && cls != 'q' && cls != 'e')
        return ins_err(f, ins, e, PT_EINVAL, "negation only allowed on a predicate source at",
                       buf);
    if (o->kind == PTX_O_LABEL && (o->u.label < 0 || (size_t)o->u.label >= f->nlabels))
        return ins_err(f, ins, e, PT_EINVAL, "unknown label at operand", buf);
    if (o->kind == PTX_O_REG)
        return check_reg(f, ins, o->u.reg, cls == 'p' || cls == 'q' || cls == 'e' ? 'P' : rule, e, pos);
    if (o->kind == PTX_O_VEC) {
        bool el = rule == 'V' || rule == 'Z' || rule == 'A';
        for (int i = 0; i < o->u.vec.n; i++) {
            const ptx_opd *v = &o->u.vec.e[i];
            if (el && v->kind != PTX_O_REG)
                return ins_err(f, ins, e, PT_EINVAL, "a {vector} of registers expected at", buf);
            if (v->kind == PTX_O_REG) {
                int rc = check_reg(f, ins, v->u.reg, el ? rule : '-', e, pos);
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
        if (rule == 'G' && ptx_type_bits(f->banks[b].type) != 64 && !has_mod(ins, PTX_M_SHARED) &&
            !has_mod(ins, PTX_M_SHARED_CTA) && !has_mod(ins, PTX_M_SHARED_CLUSTER))
            return ins_err(f, ins, e, PT_EINVAL, "a generic address needs a 64-bit register at operand",
                           buf);
    }
    return PT_OK;
}

/* " .a .b or .c" from a modifier mask, into buf. */
static void mods_list(const uint64_t *w, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int m = 0; m < PTX_NMODS && at + 2 < n; m++)
        if (mm_has(w, m))
            at += (size_t)snprintf(buf + at, n - at, " .%s", mod_tab[m]);
}

static void word_mask(const uint64_t (*tab)[NFORMS][3], size_t row, int which, uint64_t *out)
{
    for (int w = 0; w < PTX_MOD_WORDS; w++)
        out[w] = tab[w][row][which];
}

/* The FORM row the instruction's types select; -1 when the opcode has no
 * FORM rows, -2 when none matches. */
static long find_form(const ptx_ins *ins)
{
    size_t lo, hi;
    OP_ROWS(form_tab, ins->op, &lo, &hi);
    if (lo == hi)
        return -1;
    for (size_t r = lo; r < hi; r++) {
        bool ok = true;
        for (int i = 0; i < PTX_MAX_TYPES && ok; i++) {
            uint32_t want = form_tab[r].t[i];
            if (i >= ins->ntypes)
                ok = want == 0;
            else
                ok = (want >> ins->types[i]) & 1;
        }
        if (ok)
            return (long)r;
    }
    return -2;
}

static bool key_hit(const ptx_ins *ins, int key) { return key == KEY_ANY || has_mod(ins, key); }

/* Immediate and vector rules: the first matching row of an operand decides
 * it. Claims operand opnd in *done; false if an earlier row already has. */
static bool claim_opnd(uint32_t *done, int opnd)
{
    if ((*done >> opnd) & 1)
        return false;
    *done |= 1u << opnd;
    return true;
}

/* Immediate rules: the first key (modifier or ANY) that matches decides the
 * operand; its consecutive rows are the alternatives. */
/* The rows that decide an instruction's operands (which rows apply is a
 * matter of the signature; check_sig keeps the selection, check_opds
 * applies it): the operand, and its alternatives imm_tab[r, end) or its
 * vector length. At most one per operand. */
typedef struct imm_sel {
    uint8_t opnd;
    uint16_t r, end;
} imm_sel;
typedef struct vec_sel {
    uint8_t opnd;
    int16_t want;
} vec_sel;

static int sel_imms(const ptx_ins *ins, imm_sel out[PTX_MAX_OPDS])
{
    size_t lo, hi;
    OP_ROWS(imm_tab, ins->op, &lo, &hi);
    uint32_t done = 0;
    int n = 0;
    for (size_t r = lo; r < hi; r++) {
        const imm_row *row = &imm_tab[r];
        if (!key_hit(ins, row->mod) || !claim_opnd(&done, row->opnd))
            continue;
        size_t end = r;
        while (end < hi && imm_tab[end].mod == row->mod && imm_tab[end].opnd == row->opnd)
            end++;
        if (row->opnd < ins->nopd && n < PTX_MAX_OPDS)
            out[n++] = (imm_sel){(uint8_t)row->opnd, (uint16_t)r, (uint16_t)end};
    }
    return n;
}

static int check_imms(const ptx_fn *f, const ptx_ins *ins, const imm_sel *sel, int nsel, pt_err *e)
{
    for (int i = 0; i < nsel; i++) {
        size_t r = sel[i].r, end = sel[i].end;
        const imm_row *row = &imm_tab[r];
        if (ins->opd[row->opnd].kind != PTX_O_IMM)
            continue;
        int64_t v = ins->opd[row->opnd].u.imm;
        bool ok = false;
        for (size_t k = r; k < end && !ok; k++) {
            int64_t st = imm_tab[k].step > 0 ? imm_tab[k].step : 1, x = v - imm_tab[k].lo;
            /* x >= 0 once in range: a power-of-two step by its mask (no 64-bit divide) */
            ok = v >= imm_tab[k].lo && v <= imm_tab[k].hi &&
                 ((st & (st - 1)) == 0 ? (x & (st - 1)) == 0 : x % st == 0);
        }
        if (ok)
            continue;
        char alts[160];
        size_t at = 0;
        alts[0] = '\0';
        for (size_t k = r; k < end && at + 40 < sizeof alts; k++) {
            const char *sep = k == r ? "" : k + 1 == end ? " or " : ", ";
            const imm_row *a = &imm_tab[k];
            if (a->lo == a->hi)
                at += (size_t)snprintf(alts + at, sizeof alts - at, "%s%lld", sep, (long long)a->lo);
            else
                at += (size_t)snprintf(alts + at, sizeof alts - at, "%s%lld..%lld%s", sep,
                                       (long long)a->lo, (long long)a->hi,
                                       a->step > 1 ? " in steps of " : "");
            if (a->lo != a->hi && a->step > 1)
                at += (size_t)snprintf(alts + at, sizeof alts - at, "%lld", (long long)a->step);
        }
        (void)f;
        return pt_errf(e, PT_EINVAL, "%s%s%s needs %s %s, got %lld", op_tab[ins->op].name,
                       row->mod == KEY_ANY ? "" : ".", row->mod == KEY_ANY ? "" : mod_tab[row->mod],
                       row->what, alts, (long long)v);
    }
    return PT_OK;
}

/* Vector rules: the first matching row of each operand gives its length. */
static int sel_vecs(const ptx_ins *ins, vec_sel out[PTX_MAX_OPDS])
{
    size_t lo, hi;
    OP_ROWS(vec_tab, ins->op, &lo, &hi);
    uint32_t done = 0;
    int n = 0;
    for (size_t r = lo; r < hi; r++) {
        const vec_row *row = &vec_tab[r];
        bool any_type = row->types == TY_ALL;
        if (!key_hit(ins, row->mod) ||
            (!any_type && (row->tyidx >= ins->ntypes || !((row->types >> ins->types[row->tyidx]) & 1))) ||
            !claim_opnd(&done, row->opnd))
            continue;
        if (row->opnd >= ins->nopd)
            continue;
        int want = row->n;
        if (want < 0) { /* a share of the shape's N */
            if (!ins->shape.m)
                continue;
            want = ins->shape.n / -want;
        }
        if (n < PTX_MAX_OPDS)
            out[n++] = (vec_sel){(uint8_t)row->opnd, (int16_t)want};
    }
    return n;
}

static int check_vecs(const ptx_fn *f, const ptx_ins *ins, const vec_sel *sel, int nsel, pt_err *e)
{
    for (int i = 0; i < nsel; i++) {
        const ptx_opd *o = &ins->opd[sel[i].opnd];
        int want = sel[i].want;
        bool tensor = o->kind == PTX_O_TENSOR;
        int got = o->kind == PTX_O_VEC ? o->u.vec.n : tensor ? o->u.vec.n - 1 : 1;
        if (got != want) {
            char buf[112];
            snprintf(buf, sizeof buf, " operand %d has %d %s%s where %d %s needed", sel[i].opnd + 1,
                     got, tensor ? "coordinate" : "register", got == 1 ? "" : "s", want,
                     want == 1 ? "is" : "are");
            return ins_err(f, ins, e, PT_EINVAL, "vector size mismatch:", buf);
        }
    }
    return PT_OK;
}

/* Pack rules: each {vector} operand of a PACK opcode holds registers of one
 * size that add up to the type's size, and the type is a packing one. */
static int check_packs(const ptx_fn *f, const ptx_ins *ins, size_t lo, size_t hi, pt_err *e)
{
    if (lo == hi || ins->ntypes == 0)
        return PT_OK;
    char buf[128];
    for (int i = 0; i < ins->nopd; i++) {
        const ptx_opd *o = &ins->opd[i];
        if (o->kind != PTX_O_VEC)
            continue;
        if (!((pack_tab[lo].types >> ins->types[0]) & 1)) {
            snprintf(buf, sizeof buf, " operand %d is a {vector} and .%s does not pack", i + 1,
                     type_tab[ins->types[0]].name);
            return ins_err(f, ins, e, PT_EINVAL, "vector size mismatch:", buf);
        }
        if (o->u.vec.n < 2) {
            snprintf(buf, sizeof buf, " operand %d is a {vector} of one register", i + 1);
            return ins_err(f, ins, e, PT_EINVAL, "vector size mismatch:", buf);
        }
        int es = 0;
        for (int k = 0; k < o->u.vec.n; k++) {
            const ptx_opd *v = &o->u.vec.e[k];
            if (v->kind != PTX_O_REG)
                continue;
            int b = type_bits_(f->banks[PTX_REG_BANK(v->u.reg)].type);
            if (es && b != es) {
                snprintf(buf, sizeof buf, " operand %d mixes %d- and %d-bit registers", i + 1, es, b);
                return ins_err(f, ins, e, PT_EINVAL, "vector size mismatch:", buf);
            }
            es = b;
        }
        int want = type_bits_(ins->types[0]);
        if (es && es * o->u.vec.n != want) {
            snprintf(buf, sizeof buf, " operand %d holds %d x %d bits where .%s needs %d", i + 1,
                     o->u.vec.n, es, type_tab[ins->types[0]].name, want);
            return ins_err(f, ins, e, PT_EINVAL, "vector size mismatch:", buf);
        }
    }
    return PT_OK;
}

/* Shape rules: an opcode with SHAPE rows needs a shape its types allow
 * (the first key that matches; its consecutive rows are the alternatives);
 * any other opcode takes none. */
static int check_shape(const ptx_fn *f, const ptx_ins *ins, pt_err *e)
{
    size_t lo, hi;
    OP_ROWS(shape_tab, ins->op, &lo, &hi);
    char buf[200];
    if (lo == hi) {
        if (ins->shape.m)
            return ins_err(f, ins, e, PT_EINVAL, "takes no shape", "");
        return PT_OK;
    }
    for (size_t r = lo; r < hi; r++) {
        const shape_row *row = &shape_tab[r];
        if (row->tyidx >= ins->ntypes || !((row->types >> ins->types[row->tyidx]) & 1))
            continue;
        size_t end = r;
        while (end < hi && shape_tab[end].tyidx == row->tyidx && shape_tab[end].types == row->types)
            end++;
        const ptx_shape *sh = &ins->shape;
        bool ok = false;
        for (size_t k = r; k < end && !ok; k++)
            ok = sh->m == shape_tab[k].m && sh->k == shape_tab[k].k && sh->n >= shape_tab[k].lo &&
                 sh->n <= shape_tab[k].hi && (sh->n - shape_tab[k].lo) % shape_tab[k].step == 0;
        if (ok)
            return PT_OK;
        size_t at = (size_t)snprintf(buf, sizeof buf, " .m%dn{", row->m);
        for (size_t k = r; k < end && at + 40 < sizeof buf; k++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%d..%d step %d", k == r ? "" : ", ",
                                   shape_tab[k].lo, shape_tab[k].hi, shape_tab[k].step);
        snprintf(buf + at, sizeof buf - at, "}k%d for .%s", row->k, type_tab[ins->types[row->tyidx]].name);
        return ins_err(f, ins, e, PT_EINVAL, sh->m ? "shape not allowed: expected" : "needs a shape",
                       buf);
    }
    return PT_OK; /* no row for the types: the FORM rows refuse them */
}

/* Copies the string s into dst[24] (truncated); returns its length. One
 * call per checked instruction: a plain copy, not snprintf (17% of a GEMM's
 * emission went to formatting these two strings). */
static size_t copy24(char dst[24], const char *s)
{
    size_t n = strnlen(s, 23);
    memcpy(dst, s, n);
    dst[n] = '\0';
    return n;
}

void ptx_ins_opnds(const ptx_ins *ins, char cls[24], char typing[24])
{
    size_t nc = copy24(cls, op_tab[ins->op].opnds), nt = copy24(typing, op_tab[ins->op].typing);
    size_t lo, hi;
    OP_ROWS(opadd_tab, ins->op, &lo, &hi);
    for (size_t r = lo; r < hi && nc < 23; r++) {
        if (!has_mod(ins, opadd_tab[r].mod))
            continue;
        while (nt < nc) /* typing letters line up with the classes */
            typing[nt++] = '-';
        cls[nc++] = opadd_tab[r].cls;
        typing[nt++] = opadd_tab[r].typing;
        cls[nc] = typing[nt] = '\0';
    }
}

/* Modifiers and types against the opcode row, the FORM rows, the exclusive
 * classes and the requirements; sets *form (-1: none) and the operand
 * count range. */
static int check_mods_types(const ptx_fn *f, const ptx_ins *ins, pt_err *e, int *min, int *max)
{
    char buf[160];
    const ptx_op op = (ptx_op)ins->op;
    for (int i = 0; i < ins->nmods; i++) {
        if (!ptx_op_allows_mod(op, ins->mods[i])) {
            snprintf(buf, sizeof buf, " '.%s'", ins->mods[i] < PTX_NMODS ? mod_tab[ins->mods[i]] : "?");
            return ins_err(f, ins, e, PT_EINVAL, "modifier not allowed:", buf);
        }
        for (int j = 0; j < i; j++)
            if (ins->mods[j] == ins->mods[i]) {
                snprintf(buf, sizeof buf, " '.%s'", mod_tab[ins->mods[i]]);
                return ins_err(f, ins, e, PT_EINVAL, "modifier given twice:", buf);
            }
    }
    for (int i = 0; i < ins->ntypes; i++)
        if (ins->types[i] >= PTX_NTYPES || !((op_tab[op].types >> ins->types[i]) & 1)) {
            snprintf(buf, sizeof buf, " '.%s'",
                     ins->types[i] < PTX_NTYPES ? type_tab[ins->types[i]].name : "?");
            return ins_err(f, ins, e, PT_EINVAL, "type not allowed:", buf);
        }
    if (op_tab[op].types && ins->ntypes == 0)
        return ins_err(f, ins, e, PT_EINVAL, "missing type suffix", "");
    long form = find_form(ins);
    uint64_t all[PTX_MOD_WORDS] = {0};
    if (form == -2) {
        buf[0] = '\0';
        for (int i = 0, at = 0; i < ins->ntypes; i++)
            at += snprintf(buf + at, sizeof buf - (size_t)at, ".%s", type_tab[ins->types[i]].name);
        char msg[200];
        snprintf(msg, sizeof msg, " %s is not a form of %s", buf, op_tab[op].name);
        return ins_err(f, ins, e, PT_EINVAL, "types", msg);
    }
    if (form == -1 && ins->ntypes > 1) {
        snprintf(buf, sizeof buf, " %d given", ins->ntypes);
        return ins_err(f, ins, e, PT_EINVAL, "one type suffix expected,", buf);
    }
    if (form >= 0) {
        uint64_t mods[PTX_MOD_WORDS], one[PTX_MOD_WORDS];
        word_mask(form_m, (size_t)form, 0, mods);
        word_mask(form_m, (size_t)form, 1, all);
        word_mask(form_m, (size_t)form, 2, one);
        const char *tn = ins->ntypes ? type_tab[ins->types[0]].name : "";
        for (int i = 0; i < ins->nmods; i++)
            if (!mm_has(mods, ins->mods[i])) {
                snprintf(buf, sizeof buf, " '.%s'%s%s", mod_tab[ins->mods[i]],
                         ins->ntypes ? " with ." : "", tn);
                return ins_err(f, ins, e, PT_EINVAL, "modifier not allowed:", buf);
            }
        bool need_one = false, got_one = false;
        for (int w = 0; w < PTX_MOD_WORDS; w++)
            need_one |= one[w] != 0;
        for (int i = 0; i < ins->nmods; i++)
            got_one |= mm_has(one, ins->mods[i]);
        for (int w = 0; w < PTX_MOD_WORDS; w++) /* the set bits of `all` only */
            for (uint64_t bits = all[w]; bits; bits &= bits - 1) {
                int m = w * 64 + __builtin_ctzll(bits);
                if (!has_mod(ins, (ptx_mod)m)) {
                    snprintf(buf, sizeof buf, " .%s", mod_tab[m]);
                    return ins_err(f, ins, e, PT_EINVAL, "needs", buf);
                }
            }
        if (need_one && !got_one) {
            mods_list(one, buf, sizeof buf);
            return ins_err(f, ins, e, PT_EINVAL, "needs one of", buf);
        }
        if (form_tab[form].nopd)
            *min = *max = form_tab[form].nopd;
    }
    int src = check_shape(f, ins, e);
    if (src)
        return src;
    /* exclusive classes; the form's required modifiers do not count */
    for (int c = 0; c < NMCLASS; c++) {
        int first = -1;
        for (int i = 0; i < ins->nmods; i++) {
            int m = ins->mods[i];
            if (!((mclass_m[m >> 6][c] >> (m & 63)) & 1) || mm_has(all, m))
                continue;
            if (first < 0) {
                first = m;
                continue;
            }
            char msg[160];
            snprintf(msg, sizeof msg, " %s, .%s and .%s", mclass_what[c], mod_tab[first], mod_tab[m]);
            return ins_err(f, ins, e, PT_EINVAL, "two", msg);
        }
    }
    /* a modifier that needs another */
    size_t lo, hi;
    OP_ROWS(req_tab, op, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        if (!has_mod(ins, req_tab[r].mod) ||
            (req_tab[r].types != TY_ALL &&
             (ins->ntypes == 0 || !((req_tab[r].types >> ins->types[0]) & 1))))
            continue;
        uint64_t needs[PTX_MOD_WORDS];
        bool ok = false;
        for (int w = 0; w < PTX_MOD_WORDS; w++)
            needs[w] = req_m[w][r];
        for (int i = 0; i < ins->nmods; i++)
            ok |= mm_has(needs, ins->mods[i]);
        if (!ok) {
            char l[120];
            mods_list(needs, l, sizeof l);
            snprintf(buf, sizeof buf, " .%s needs%s", mod_tab[req_tab[r].mod], l);
            return ins_err(f, ins, e, PT_EINVAL, "modifier", buf);
        }
    }
    /* modifier order, where ptxas gives it meaning */
    OP_ROWS(order_tab, op, &lo, &hi);
    for (size_t r = lo; r < hi; r++)
        for (int i = 0; i < ins->nmods; i++) {
            int a = ins->mods[i];
            if (!((order_m[a >> 6][r][1] >> (a & 63)) & 1))
                continue;
            for (int j = i + 1; j < ins->nmods; j++) {
                int b = ins->mods[j];
                if (!((order_m[b >> 6][r][0] >> (b & 63)) & 1))
                    continue;
                snprintf(buf, sizeof buf, " .%s before .%s (%s)", mod_tab[b], mod_tab[a],
                         order_tab[r].why);
                return ins_err(f, ins, e, PT_EINVAL, "modifier order:", buf);
            }
        }
    /* operand count by modifier */
    OP_ROWS(opn_tab, op, &lo, &hi);
    for (size_t r = lo; r < hi; r++)
        if (key_hit(ins, opn_tab[r].mod)) {
            *min = opn_tab[r].min;
            *max = opn_tab[r].max;
            break;
        }
    return PT_OK;
}

/* What the table decides from an instruction's signature alone: the
 * opcode, its modifiers in order, its types, its shape and its operand
 * count. check_sig computes it (check_mods_types, the operand count, the
 * operand classes and typing letters, the requirement of the feature rows
 * that key on types, modifiers or the count, and the rule rows the operand
 * checks walk); check_opds applies what depends on the operands
 * themselves. ptx_check_ins is the two in a row; the builder keeps the
 * signatures that passed per module (struct ptx_sigtab below), so it runs
 * check_sig once per distinct signature and check_opds every time. */
enum { SIG_PROWS = 4 };
/* per operand position: the class takes a negated operand; a .shared::cluster
 * destination must be the sink; an address needs a 64-bit register; a
 * {vector}'s elements are registers of the rule's size */
enum { PF_NEGOK = 1, PF_KSINK = 2, PF_G64 = 4, PF_EL = 8 };
_Static_assert(NROWS(vec_tab) < 65536 && NROWS(imm_tab) < 65536 && NROWS(pack_tab) < 65536 &&
                   NROWS(feat_tab) < 65536,
               "struct sig keeps rule row indices in 16 bits");
typedef struct sig {
    char opnds[24], typing[24];
    int sm, ver;
    bool arch;
    int8_t nprows;                 /* FEAT P rows of the opcode; -1: more than SIG_PROWS */
    uint16_t prow[SIG_PROWS];      /* their feat_tab indices */
    uint16_t plo, phi;             /* the opcode's PACK rows */
    int8_t nvsel, nisel;           /* its VEC and IMM rows that apply */
    vec_sel vsel[PTX_MAX_OPDS];
    imm_sel isel[PTX_MAX_OPDS];
    /* operand i: its class, its register rule (a predicate class's 'P'),
     * its typing letter, the kinds the class takes, PF_* flags; and the
     * register types seen there and those reg_fail passed (filled as they
     * come: rseen/rok for a register operand, eseen/eok for {vector}
     * elements; gseen/gok for the guard) */
    char cls[PTX_MAX_OPDS], rrule[PTX_MAX_OPDS], rule[PTX_MAX_OPDS];
    uint16_t kinds[PTX_MAX_OPDS];
    /* bit kind + 16 * neg: the class takes the operand's kind, negated or
     * not, and a .shared::cluster destination is the sink (opds_fast's
     * first test, from kinds and pflags) */
    uint32_t okind[PTX_MAX_OPDS];
    uint8_t pflags[PTX_MAX_OPDS];
    uint32_t rseen[PTX_MAX_OPDS], rok[PTX_MAX_OPDS], eseen[PTX_MAX_OPDS], eok[PTX_MAX_OPDS];
    uint32_t gseen, gok;
    /* no IMM, PACK or FEAT P rows apply and the target takes sm/ver/arch:
     * once opds_fast passes (no special register then), only the VEC rows'
     * lengths (check_vecs) can fail */
    bool plain;
} sig;
_Static_assert(PTX_O_TENSOR < 16, "sig.kinds holds 16 operand kinds");

static int check_sig(const ptx_fn *f, const ptx_ins *ins, sig *s, pt_err *e)
{
    if (ins->op >= PTX_NOPS)
        return pt_errf(e, PT_EINVAL, "unknown opcode %u", ins->op);
    ptx_ins_opnds(ins, s->opnds, s->typing);
    int min, max;
    count_opnds(s->opnds, &min, &max);
    char buf[96];
    int rc = check_mods_types(f, ins, e, &min, &max);
    if (rc)
        return rc;
    if (ins->nopd < min || ins->nopd > max) {
        if (min == max)
            snprintf(buf, sizeof buf, " %d operands, expected %d", ins->nopd, min);
        else
            snprintf(buf, sizeof buf, " %d operands, expected %d..%d", ins->nopd, min, max);
        return ins_err(f, ins, e, PT_EINVAL, "wrong operand count:", buf);
    }
    bool g64 = !has_mod(ins, PTX_M_SHARED) && !has_mod(ins, PTX_M_SHARED_CTA) &&
               !has_mod(ins, PTX_M_SHARED_CLUSTER);
    bool ksink = has_mod(ins, PTX_M_SHARED_CLUSTER);
    for (int i = 0, k = 0; i < ins->nopd; i++, k++) {
        while (s->opnds[k] == '?')
            k++;
        char c = s->opnds[k], r = s->typing[i] ? s->typing[i] : '-';
        s->cls[i] = c;
        s->rule[i] = r;
        s->rrule[i] = c == 'p' || c == 'q' || c == 'e' ? 'P' : r;
        s->kinds[i] = cls_kinds(c);
        s->pflags[i] = (uint8_t)((c == 'q' || c == 'e' ? PF_NEGOK : 0) | (r == 'K' && ksink ? PF_KSINK : 0) |
                                 (r == 'G' && g64 ? PF_G64 : 0) |
                                 (r == 'V' || r == 'Z' || r == 'A' ? PF_EL : 0));
        s->rseen[i] = s->rok[i] = s->eseen[i] = s->eok[i] = 0;
        uint32_t ok = s->kinds[i];
        if (s->pflags[i] & PF_KSINK)
            ok &= 1u << PTX_O_SINK;
        s->okind[i] = ok | (s->pflags[i] & PF_NEGOK ? ok << 16 : 0);
    }
    s->gseen = s->gok = 0;
    s->nvsel = (int8_t)sel_vecs(ins, s->vsel);
    s->nisel = (int8_t)sel_imms(ins, s->isel);
    size_t lo, hi;
    OP_ROWS(pack_tab, ins->op, &lo, &hi);
    s->plo = (uint16_t)lo, s->phi = (uint16_t)hi;
    /* target requirements: the opcode row, raised by matching feature rows
     * (the P rows look at an operand: check_opds) */
    int sm = op_tab[ins->op].sm, ver = op_tab[ins->op].ver;
    bool arch = op_tab[ins->op].arch;
    bool has_feat = (feat_ops[ins->op >> 6] >> (ins->op & 63)) & 1;
    s->nprows = 0;
    for (size_t i = 0; has_feat && i < sizeof feat_tab / sizeof feat_tab[0]; i++) {
        if (feat_tab[i].op != ins->op)
            continue;
        bool hit = false;
        if (feat_tab[i].kind == FEAT_T) {
            for (int k = 0; k < ins->ntypes; k++)
                hit |= ins->types[k] == feat_tab[i].value;
        } else if (feat_tab[i].kind == FEAT_M) {
            hit = has_mod(ins, feat_tab[i].value);
        } else if (feat_tab[i].kind == FEAT_N) {
            hit = ins->nopd > feat_tab[i].value;
        } else if (feat_tab[i].kind == FEAT_X) { /* types of different classes */
            int a = feat_tab[i].value / 10, b = feat_tab[i].value % 10;
            hit = a < ins->ntypes && b < ins->ntypes &&
                  type_tab[ins->types[a]].cls != type_tab[ins->types[b]].cls;
        } else { /* P: operand `value` is a predicate register */
            if (s->nprows >= 0 && s->nprows < SIG_PROWS)
                s->prow[s->nprows++] = (uint16_t)i;
            else
                s->nprows = -1;
        }
        if (hit) {
            if (feat_tab[i].sm > sm)
                sm = feat_tab[i].sm;
            if (feat_tab[i].ver > ver)
                ver = feat_tab[i].ver;
            arch |= feat_tab[i].arch;
        }
    }
    s->sm = sm;
    s->ver = ver;
    s->arch = arch;
    const pt_target *t = &f->mod->target;
    s->plain = s->nisel == 0 && lo == hi && s->nprows == 0 && sm <= t->sm &&
               !(arch && !t->arch_specific) && !(f->mod->max_ptx && ver > f->mod->max_ptx);
    return PT_OK;
}

/* A FEAT P row: operand `value` is a predicate register. */
static bool feat_p_hit(const ptx_fn *f, const ptx_ins *ins, size_t i)
{
    const ptx_opd *o = &ins->opd[feat_tab[i].value];
    return feat_tab[i].value < ins->nopd && o->kind == PTX_O_REG &&
           f->banks[PTX_REG_BANK(o->u.reg)].type == PTX_T_PRED;
}

/* reg_fail's verdict on register r under rule, kept per type in *seen /
 * *ok; false for an undeclared register. */
static inline bool reg_ok(const ptx_fn *f, const ptx_ins *ins, ptx_reg r, char rule, uint32_t *seen,
                   uint32_t *ok)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= f->nbanks || PTX_REG_IDX(r) >= f->banks[b].count)
        return false;
    unsigned rt = f->banks[b].type;
    if (rt >= 32)
        return false;
    if ((*ok >> rt) & 1)
        return true;
    if (!((*seen >> rt) & 1)) {
        int want;
        *seen |= 1u << rt;
        if (reg_fail(ins, (ptx_type)rt, rule, &want) == RF_OK)
            *ok |= 1u << rt;
    }
    return (*ok >> rt) & 1;
}

static bool reg_declared(const ptx_fn *f, ptx_reg r)
{
    int b = PTX_REG_BANK(r);
    return b >= 0 && (size_t)b < f->nbanks && PTX_REG_IDX(r) < f->banks[b].count;
}

/* True when check_opd would pass every operand and check_reg the guard,
 * decided from the signature's per-operand facts; false when it cannot
 * tell (or they would fail): check_opds then runs check_opd itself. Covers
 * the kinds templates emit all the time; special registers, d|p pairs and
 * tensors always go to check_opd. */
static inline __attribute__((always_inline)) bool opds_fast(const ptx_fn *f, const ptx_ins *ins, sig *s)
{
    for (int i = 0; i < ins->nopd; i++) {
        const ptx_opd *o = &ins->opd[i];
        unsigned fl = s->pflags[i], kn = o->kind + (o->neg ? 16u : 0u);
        if (o->kind > PTX_O_TENSOR || !((s->okind[i] >> kn) & 1))
            return false;
        switch (o->kind) {
        case PTX_O_REG:
            if (!reg_ok(f, ins, o->u.reg, s->rrule[i], &s->rseen[i], &s->rok[i]))
                return false;
            break;
        case PTX_O_IMM:
        case PTX_O_F32:
        case PTX_O_F64:
        case PTX_O_SYM:
        case PTX_O_SINK: break;
        case PTX_O_LABEL:
            if (o->u.label < 0 || (size_t)o->u.label >= f->nlabels)
                return false;
            break;
        case PTX_O_ADDR:
            if (!o->u.addr.sym) {
                if (!reg_declared(f, o->u.addr.base))
                    return false;
                int bits = type_bits_(f->banks[PTX_REG_BANK(o->u.addr.base)].type);
                if (bits < 32 || ((fl & PF_G64) && bits != 64))
                    return false;
            }
            break;
        case PTX_O_VEC:
            for (int k = 0; k < o->u.vec.n; k++) {
                const ptx_opd *v = &o->u.vec.e[k];
                if (fl & PF_EL) {
                    if (v->kind != PTX_O_REG || !reg_ok(f, ins, v->u.reg, s->rule[i], &s->eseen[i], &s->eok[i]))
                        return false;
                } else if (v->kind == PTX_O_REG && !reg_declared(f, v->u.reg))
                    return false;
            }
            break;
        default: return false;
        }
    }
    return !ins->guard.id || reg_ok(f, ins, ins->guard, 'P', &s->gseen, &s->gok);
}

/* fast: try opds_fast first (the builder); ptx_check_ins (the parser, the
 * decoder, tests/test_isa_walk.c's reference) runs check_opd on every
 * operand. */
static int check_opds(ptx_fn *f, const ptx_ins *ins, sig *s, bool fast, pt_err *e)
{
    int rc;
    if (fast && opds_fast(f, ins, s)) {
        if (s->plain && !s->nvsel) {
            if (s->sm > f->need_sm)
                f->need_sm = s->sm;
            if (s->ver > f->need_ver)
                f->need_ver = s->ver;
            return PT_OK;
        }
    } else {
        for (int i = 0; i < ins->nopd; i++)
            if ((rc = check_opd(f, ins, i, s->cls[i], s->rule[i], e)))
                return rc;
        if (ins->guard.id && (rc = check_reg(f, ins, ins->guard, 'P', e, -1)))
            return rc;
    }
    if ((rc = check_vecs(f, ins, s->vsel, s->nvsel, e)) || (rc = check_imms(f, ins, s->isel, s->nisel, e)) ||
        (rc = check_packs(f, ins, s->plo, s->phi, e)))
        return rc;
    int sm = s->sm, ver = s->ver;
    bool arch = s->arch;
    for (int k = 0; k < s->nprows; k++) {
        size_t i = s->prow[k];
        if (feat_p_hit(f, ins, i)) {
            if (feat_tab[i].sm > sm)
                sm = feat_tab[i].sm;
            if (feat_tab[i].ver > ver)
                ver = feat_tab[i].ver;
            arch |= feat_tab[i].arch;
        }
    }
    for (size_t i = 0; s->nprows < 0 && i < sizeof feat_tab / sizeof feat_tab[0]; i++)
        if (feat_tab[i].op == ins->op && feat_tab[i].kind == FEAT_P && feat_p_hit(f, ins, i)) {
            if (feat_tab[i].sm > sm)
                sm = feat_tab[i].sm;
            if (feat_tab[i].ver > ver)
                ver = feat_tab[i].ver;
            arch |= feat_tab[i].arch;
        }
    for (int i = 0; i < ins->nopd; i++) /* cluster special registers: sm_90 */
        if (ins->opd[i].kind == PTX_O_SREG) {
            const int sr = ins->opd[i].u.sreg;
            if (sreg_tab[sr].sm > sm)
                sm = sreg_tab[sr].sm;
            if (sreg_tab[sr].ver > ver)
                ver = sreg_tab[sr].ver;
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

int ptx_check_ins(ptx_fn *f, const ptx_ins *ins, pt_err *e)
{
    sig s;
    int rc = check_sig(f, ins, &s, e);
    return rc ? rc : check_opds(f, ins, &s, false, e);
}

/* The builder's signature table: open addressing over the signatures of
 * one module that passed check_sig (a refused one is checked again each
 * time, so its message is always the table's). The key packs every field
 * check_sig reads; a module's kernels repeat a few dozen signatures over
 * thousands of instructions. Without memory the builder checks uncached. */
typedef struct sig_slot_t {
    uint64_t key[4]; /* key[0] 0: empty */
    size_t idx;      /* the entry in v */
} sig_slot_t;
struct ptx_sigtab {
    size_t cap, n;    /* slots (a power of two) and entries, n < cap / 2 */
    sig_slot_t *slot; /* cap slots */
    sig *v;           /* cap / 2 entries, n of them used */
    /* the key of the last instruction looked up and its entry: templates
     * emit runs of one signature */
    uint64_t last[4];
    size_t last_idx; /* n: none */
};

static struct ptx_sigtab *sig_new(void)
{
    return calloc(1, sizeof(struct ptx_sigtab)); /* oom: caller checks (uncached module) */
}

static void sig_free(struct ptx_sigtab *t)
{
    if (t) {
        free(t->slot);
        free(t->v);
        free(t);
    }
}

/* nm leading 0xff bytes, then zeros: ones + 8 - nm, read as a word, masks
 * the first nm bytes of a word read from memory (either byte order) */
static const uint8_t ones[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static bool sig_key(const ptx_ins *ins, uint64_t key[4])
{
    unsigned nm = ins->nmods, nt = ins->ntypes;
    if (nm > PTX_MAX_MODS || nt > PTX_MAX_TYPES)
        return false;
    _Static_assert(PTX_MAX_MODS == 10 && PTX_MAX_TYPES == 4, "sig_key packs 10 modifiers and 4 types");
    /* only the written ones (the rest may be anything) */
    uint64_t m0, k0;
    uint16_t m1, k1;
    uint32_t ty, kt;
    memcpy(&m0, ins->mods, 8);
    memcpy(&m1, ins->mods + 8, 2);
    memcpy(&ty, ins->types, 4);
    memcpy(&k0, ones + 8 - (nm < 8 ? nm : 8), 8);
    memcpy(&k1, ones + 8 - (nm > 8 ? nm - 8 : 0), 2);
    memcpy(&kt, ones + 8 - nt, 4);
    key[0] = ins->op | (uint64_t)nm << 16 | (uint64_t)nt << 24 | (uint64_t)ins->nopd << 32 |
             (uint64_t)ins->shape.m << 40 | (uint64_t)ins->shape.at << 48 | 1ull << 56; /* 1: used */
    key[1] = m0 & k0;
    key[2] = (uint64_t)(uint16_t)(m1 & k1) | (uint64_t)(ty & kt) << 16 | (uint64_t)ins->shape.k << 48;
    key[3] = ins->shape.n;
    return true;
}

static inline size_t sig_hash(const uint64_t k[4])
{
    uint64_t h = (k[0] ^ k[1] * 0xc2b2ae3d27d4eb4full ^ k[2] * 0x165667b19e3779f9ull ^ k[3]) *
                 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32 ^ h);
}

static bool sig_eq(const uint64_t a[4], const uint64_t b[4])
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* The slot of key in t: its own, or the empty slot where it goes. */
static inline sig_slot_t *sig_slot(sig_slot_t *slot, size_t cap, const uint64_t key[4])
{
    for (size_t i = sig_hash(key) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!slot[i].key[0] || sig_eq(slot[i].key, key))
            return &slot[i];
}

/* Room for one more entry (twice the slots and entries once half full);
 * false when out of memory (the table stays as it was). */
static bool sig_room(ptx_module *m)
{
    struct ptx_sigtab *t = m->sigs;
    if (t && 2 * (t->n + 1) < t->cap)
        return true;
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t)
            return false;
        m->sigs = t;
    }
    size_t cap = t->cap ? 2 * t->cap : 128;
    sig_slot_t *slot = calloc(cap, sizeof *slot);
    sig *v = malloc(cap / 2 * sizeof *v);
    if (!slot || !v) {
        free(slot);
        free(v);
        return false;
    }
    for (size_t i = 0; i < t->cap; i++)
        if (t->slot[i].key[0])
            *sig_slot(slot, cap, t->slot[i].key) = t->slot[i];
    if (t->n)
        memcpy(v, t->v, t->n * sizeof *v);
    free(t->slot);
    free(t->v);
    t->slot = slot;
    t->v = v;
    t->cap = cap;
    return true;
}

size_t ptx_module_nsigs(const ptx_module *m) { return m->sigs ? m->sigs->n : 0; }

/* check_opds(f, ins, s, true, e) with its commonest outcome inline: a
 * plain signature whose operands pass the fast path */
static inline int check_hit(ptx_fn *f, const ptx_ins *ins, sig *s, pt_err *e)
{
    if (s->plain && opds_fast(f, ins, s)) {
        int rc = s->nvsel ? check_vecs(f, ins, s->vsel, s->nvsel, e) : PT_OK;
        if (rc)
            return rc;
        if (s->sm > f->need_sm)
            f->need_sm = s->sm;
        if (s->ver > f->need_ver)
            f->need_ver = s->ver;
        return PT_OK;
    }
    return check_opds(f, ins, s, true, e);
}

/* ptx_ins.sig of entry i: i + 1, 0 past 16 bits */
static uint16_t sig_ref(size_t i) { return i < 0xffff ? (uint16_t)(i + 1) : 0; }

/* ptx_check_ins for the builder: check_sig once per signature; sets
 * ins->sig to the signature's entry. */
static int check_ins_cached(ptx_fn *f, ptx_ins *ins, pt_err *e)
{
    uint64_t key[4];
    struct ptx_sigtab *t = f->mod->sigs;
    if (!sig_key(ins, key))
        return ptx_check_ins(f, ins, e);
    if (t && t->last_idx < t->n && sig_eq(t->last, key)) {
        ins->sig = sig_ref(t->last_idx);
        return check_hit(f, ins, &t->v[t->last_idx], e);
    }
    if (t && t->cap) {
        const sig_slot_t *sl = sig_slot(t->slot, t->cap, key);
        if (sl->key[0]) {
            memcpy(t->last, key, sizeof t->last);
            t->last_idx = sl->idx;
            ins->sig = sig_ref(sl->idx);
            return check_hit(f, ins, &t->v[sl->idx], e);
        }
    }
    sig s;
    int rc = check_sig(f, ins, &s, e);
    if (rc)
        return rc;
    if (!sig_room(f->mod))
        return check_opds(f, ins, &s, true, e);
    t = f->mod->sigs;
    sig_slot_t *sl = sig_slot(t->slot, t->cap, key);
    memcpy(sl->key, key, sizeof sl->key);
    sl->idx = t->n;
    t->v[t->n] = s;
    memcpy(t->last, key, sizeof t->last);
    t->last_idx = t->n;
    ins->sig = sig_ref(t->n);
    return check_opds(f, ins, &t->v[t->n++], true, e);
}

/* ---- the rule rows, for tests ---- */

int ptx_isa_nrules(ptx_rule_kind k)
{
    switch (k) {
    case PTX_RULE_MCLASS: return NMCLASS;
    case PTX_RULE_FORM: return NFORMS;
    case PTX_RULE_REQ: return NREQS;
    case PTX_RULE_OPN: return (int)NROWS(opn_tab);
    case PTX_RULE_VEC: return (int)NROWS(vec_tab);
    case PTX_RULE_IMM: return (int)NROWS(imm_tab);
    case PTX_RULE_ORDER: return NORDERS;
    case PTX_RULE_PACK: return (int)NROWS(pack_tab);
    case PTX_RULE_SHAPE: return (int)NROWS(shape_tab) - 1;
    case PTX_RULE_OPADD: return (int)NROWS(opadd_tab) - 1;
    default: return 0;
    }
}

static int key_out(int m) { return m == KEY_ANY ? -1 : m; }

ptx_rule ptx_isa_rule(ptx_rule_kind k, int i)
{
    ptx_rule r;
    memset(&r, 0, sizeof r);
    r.op = -1;
    r.mod = -1;
    size_t u = (size_t)i;
    switch (k) {
    case PTX_RULE_MCLASS:
        r.what = mclass_what[u];
        for (int w = 0; w < PTX_MOD_WORDS; w++)
            r.mods[w] = mclass_m[w][u];
        break;
    case PTX_RULE_FORM:
        r.op = form_tab[u].op;
        memcpy(r.types, form_tab[u].t, sizeof r.types);
        r.nopd = form_tab[u].nopd;
        word_mask(form_m, u, 0, r.mods);
        word_mask(form_m, u, 1, r.all);
        word_mask(form_m, u, 2, r.one);
        break;
    case PTX_RULE_REQ:
        r.op = req_tab[u].op;
        r.mod = req_tab[u].mod;
        r.types[0] = req_tab[u].types;
        for (int w = 0; w < PTX_MOD_WORDS; w++)
            r.mods[w] = req_m[w][u];
        break;
    case PTX_RULE_OPN:
        r.op = opn_tab[u].op;
        r.mod = key_out(opn_tab[u].mod);
        r.min = opn_tab[u].min;
        r.max = opn_tab[u].max;
        break;
    case PTX_RULE_VEC:
        r.op = vec_tab[u].op;
        r.mod = key_out(vec_tab[u].mod);
        r.opnd = vec_tab[u].opnd;
        r.tyidx = vec_tab[u].tyidx;
        r.types[0] = vec_tab[u].types;
        r.n = vec_tab[u].n;
        break;
    case PTX_RULE_IMM:
        r.op = imm_tab[u].op;
        r.mod = key_out(imm_tab[u].mod);
        r.opnd = imm_tab[u].opnd;
        r.lo = imm_tab[u].lo;
        r.hi = imm_tab[u].hi;
        r.step = imm_tab[u].step;
        r.what = imm_tab[u].what;
        break;
    case PTX_RULE_ORDER:
        r.op = order_tab[u].op;
        r.what = order_tab[u].why;
        for (int w = 0; w < PTX_MOD_WORDS; w++) {
            r.mods[w] = order_m[w][u][0];
            r.all[w] = order_m[w][u][1];
        }
        break;
    case PTX_RULE_PACK:
        r.op = pack_tab[u].op;
        r.types[0] = pack_tab[u].types;
        break;
    case PTX_RULE_SHAPE:
        r.op = shape_tab[u].op;
        r.tyidx = shape_tab[u].tyidx;
        r.types[0] = shape_tab[u].types;
        r.min = shape_tab[u].m;
        r.max = shape_tab[u].k;
        r.lo = shape_tab[u].lo;
        r.hi = shape_tab[u].hi;
        r.step = shape_tab[u].step;
        break;
    case PTX_RULE_OPADD:
        r.op = opadd_tab[u].op;
        r.mod = opadd_tab[u].mod;
        r.cls = opadd_tab[u].cls;
        r.typing = opadd_tab[u].typing;
        break;
    default: break;
    }
    return r;
}

int ptx_isa_check_table(pt_err *e)
{
    for (int a = 1; a < PTX_NOPS; a++) /* rows sharing a name are adjacent */
        for (int b = a + 2; b < PTX_NOPS; b++)
            if (strcmp(op_tab[a].name, op_tab[b].name) == 0 &&
                strcmp(op_tab[b - 1].name, op_tab[b].name) != 0)
                return pt_errf(e, PT_EINTERNAL, "PTX_OP rows named %s are not adjacent", op_tab[a].name);
    static const char *const kind[] = {"PTX_MCLASS", "PTX_FORM", "PTX_REQ", "PTX_OPN", "PTX_VEC",
                                       "PTX_IMM", "PTX_ORDER", "PTX_PACK", "PTX_SHAPE",
                                       "PTX_OPADD"};
    for (int k = PTX_RULE_FORM; k < PTX_NRULE_KINDS; k++) {
        int prev = -1;
        for (int i = 0; i < ptx_isa_nrules((ptx_rule_kind)k); i++) {
            ptx_rule r = ptx_isa_rule((ptx_rule_kind)k, i);
            const char *on = op_tab[r.op].name;
            if (r.op < prev)
                return pt_errf(e, PT_EINTERNAL, "%s row %d (%s) is out of opcode order", kind[k], i, on);
            prev = r.op;
            int min, max;
            count_opnds(op_tab[r.op].opnds, &min, &max);
            if (r.mod >= 0 && !ptx_op_allows_mod((ptx_op)r.op, (ptx_mod)r.mod))
                return pt_errf(e, PT_EINTERNAL, "%s row %d: %s does not allow .%s", kind[k], i, on,
                               mod_tab[r.mod]);
            if (k == PTX_RULE_FORM) {
                for (int t = 0; t < PTX_MAX_TYPES; t++)
                    if (r.types[t] & ~op_tab[r.op].types)
                        return pt_errf(e, PT_EINTERNAL, "PTX_FORM row %d: a type %s does not allow", i, on);
                for (int m = 0; m < PTX_NMODS; m++) {
                    bool in = ptx_mask_has(r.mods, m);
                    if (in && !ptx_op_allows_mod((ptx_op)r.op, (ptx_mod)m))
                        return pt_errf(e, PT_EINTERNAL, "PTX_FORM row %d: %s does not allow .%s", i, on, mod_tab[m]);
                    if ((ptx_mask_has(r.all, m) || ptx_mask_has(r.one, m)) && !in)
                        return pt_errf(e, PT_EINTERNAL, "PTX_FORM row %d (%s): required .%s not among its modifiers", i, on, mod_tab[m]);
                }
                if (r.nopd && (r.nopd < min || r.nopd > max))
                    return pt_errf(e, PT_EINTERNAL, "PTX_FORM row %d (%s): %d operands", i, on, r.nopd);
            }
            if (k == PTX_RULE_OPN && (r.min < min || r.max > max || r.min > r.max))
                return pt_errf(e, PT_EINTERNAL, "PTX_OPN row %d (%s): %d..%d operands", i, on, r.min, r.max);
            if ((k == PTX_RULE_VEC || k == PTX_RULE_IMM) && (r.opnd >= max || r.opnd >= 32))
                return pt_errf(e, PT_EINTERNAL, "%s row %d (%s): no operand %d", kind[k], i, on, r.opnd);
            for (int m = 0; k == PTX_RULE_ORDER && m < PTX_NMODS; m++)
                if ((ptx_mask_has(r.mods, m) || ptx_mask_has(r.all, m)) &&
                    !ptx_op_allows_mod((ptx_op)r.op, (ptx_mod)m))
                    return pt_errf(e, PT_EINTERNAL, "PTX_ORDER row %d: %s does not allow .%s", i, on,
                                   mod_tab[m]);
            if (k == PTX_RULE_OPADD && strchr(op_tab[r.op].opnds, '?'))
                return pt_errf(e, PT_EINTERNAL, "PTX_OPADD row %d: %s has optional operands", i, on);
            if (k == PTX_RULE_SHAPE && (r.step <= 0 || r.lo > r.hi || r.hi > 0xffff))
                return pt_errf(e, PT_EINTERNAL, "PTX_SHAPE row %d (%s): bad N range", i, on);
            if (k == PTX_RULE_VEC && r.tyidx >= PTX_MAX_TYPES)
                return pt_errf(e, PT_EINTERNAL, "PTX_VEC row %d (%s): no type %d", i, on, r.tyidx);
        }
    }
    return PT_OK;
}

/* How well the operands fit row op's classes: 4 when every operand's kind
 * is one its class takes, 2 when the row allows every modifier, 1 when the
 * count is in the row's range. */
static int fit(const ptx_ins *ins, int op)
{
    ptx_ins t = *ins;
    t.op = (uint16_t)op;
    char cls[24], typing[24];
    ptx_ins_opnds(&t, cls, typing);
    int min, max;
    count_opnds(cls, &min, &max);
    size_t lo, hi;
    OP_ROWS(form_tab, op, &lo, &hi);
    long form = find_form(&t);
    if (form >= 0 && form_tab[form].nopd)
        min = max = form_tab[form].nopd;
    bool kinds = true;
    for (int i = 0, k = 0; i < ins->nopd && kinds; i++, k++) {
        while (cls[k] == '?')
            k++;
        if (!cls[k])
            break;
        int kd = ins->opd[i].kind;
        switch (cls[k]) {
        case 'a': kinds = kd == PTX_O_ADDR; break;
        case 't': kinds = kd == PTX_O_TENSOR; break;
        case 'v': kinds = kd == PTX_O_VEC; break;
        case 'r': kinds = kd == PTX_O_REG; break;
        case 's': kinds = kd != PTX_O_ADDR && kd != PTX_O_TENSOR && kd != PTX_O_LABEL; break;
        default: break;
        }
    }
    bool mods = true;
    for (int i = 0; i < ins->nmods; i++)
        mods = mods && ptx_op_allows_mod((ptx_op)op, (ptx_mod)ins->mods[i]);
    return (kinds ? 4 : 0) + (mods ? 2 : 0) + (ins->nopd >= min && ins->nopd <= max ? 1 : 0);
}

ptx_op ptx_resolve_op(const ptx_fn *f, const ptx_ins *ins)
{
    (void)f;
    if (ins->op + 1 >= PTX_NOPS || strcmp(op_tab[ins->op + 1].name, op_tab[ins->op].name) != 0)
        return (ptx_op)ins->op; /* the name has one row (nearly every opcode) */
    int best = ins->op, score = -1;
    for (int op = ins->op; op < PTX_NOPS && strcmp(op_tab[op].name, op_tab[ins->op].name) == 0; op++) {
        int sc = fit(ins, op);
        if (sc > score) {
            score = sc;
            best = op;
        }
    }
    return (ptx_op)best;
}

ptx_opd ptx_tensor(ptx_fn *f, ptx_opd tmap, int n, const ptx_opd *coords)
{
    ptx_opd *c = pt_arena_alloc(f->mod->arena, (size_t)(n + 1) * sizeof *c);
    c[0] = tmap;
    if (n)
        memcpy(c + 1, coords, (size_t)n * sizeof *c);
    return (ptx_opd){.kind = PTX_O_TENSOR, .u.vec = {c, n + 1}};
}

void ptx_pragma_nounroll(ptx_fn *f)
{
    ptx_emit0(f, PTX_OP_PRAGMA, PTX_MODS(PTX_M_NOUNROLL), PTX_NOTYPES);
}

/* ptx_emit_n and ptx_emit_shape_n (one body, inlined into each: the first
 * is on every instruction's path) */
static inline __attribute__((always_inline)) ptx_ins *emit_in(ptx_fn *f, ptx_op op, const ptx_mods *mods,
                                                             ptx_shape shape, const ptx_types *types, int n,
                                                             const ptx_opd *opd);

ptx_ins *ptx_emit_n(ptx_fn *f, ptx_op op, ptx_mods mods, ptx_types types, int n,
                    const ptx_opd *opd)
{
    return emit_in(f, op, &mods, (ptx_shape){0, 0, 0, 0}, &types, n, opd);
}

ptx_ins *ptx_emit_shape_n(ptx_fn *f, ptx_op op, ptx_mods mods, ptx_shape shape, ptx_types types,
                          int n, const ptx_opd *opd)
{
    return emit_in(f, op, &mods, shape, &types, n, opd);
}

static inline __attribute__((always_inline)) ptx_ins *emit_in(ptx_fn *f, ptx_op op, const ptx_mods *mods,
                                                             ptx_shape shape, const ptx_types *types, int n,
                                                             const ptx_opd *opd)
{
    if (f->mod->err.code)
        return NULL;
    if (n > PTX_MAX_OPDS) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "%s: too many operands", op_tab[op].name);
        return NULL;
    }
    /* build in place: the body slot is checked, then kept or dropped */
    if (f->nbody + 1 > f->cap_body)
        f->body = pt_arena_grow(f->mod->arena, f->body, sizeof *f->body, &f->cap_body, f->nbody + 1);
    ptx_ins *ins = &f->body[f->nbody];
    ins->op = (uint16_t)op;
    ins->nmods = mods->n;
    ins->ntypes = types->n;
    ins->nopd = (uint8_t)n;
    ins->guard_neg = false;
    ins->sig = 0;
    ins->guard = (ptx_reg){0};
    ins->shape = shape;
    ins->line = 0;
    memcpy(ins->mods, mods->m, sizeof ins->mods);
    memcpy(ins->types, types->t, sizeof ins->types);
    for (int i = 0; i < n; i++) /* n <= 8: no memcpy call */
        ins->opd[i] = opd[i];
    if (check_ins_cached(f, ins, &f->mod->err))
        return NULL;
    return &f->body[f->nbody++];
}
