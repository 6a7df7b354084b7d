/* PTX IR: modules, entries, typed virtual registers, instructions.
 * Templates build it through ptx_emit() (checked against ptx/isa.def), the
 * parser builds the same structures from text, the printer is the only code
 * that writes PTX text, and the emulator pre-decodes it.
 *
 * Errors while building are sticky: the first one is kept in the module's
 * pt_err and later calls become no-ops returning NULL, so a template checks
 * once, at ptx_module_finish(). */
#ifndef PTX_IR_H
#define PTX_IR_H

#include "ptx/base.h"
#include "ptx/target.h"

typedef enum ptx_type {
#define PTX_TYPE(id, text, bits, cls) PTX_T_##id,
#include "ptx/isa.def"
    PTX_NTYPES
} ptx_type;

typedef enum ptx_mod {
#define PTX_MOD(id, text) PTX_M_##id,
#include "ptx/isa.def"
    PTX_NMODS
} ptx_mod;

typedef enum ptx_sreg {
#define PTX_SREG(id, text, bits, sm, ver) PTX_S_##id,
#include "ptx/isa.def"
    PTX_NSREGS
} ptx_sreg;

typedef enum ptx_op {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) PTX_OP_##id,
#include "ptx/isa.def"
    PTX_NOPS
} ptx_op;

/* Mask widths: types are bits of a uint32_t, modifiers of PTX_MOD_WORDS
 * uint64_t words. ir.c has a _Static_assert on each: a table that outgrows
 * them does not compile (a modifier past the last word once aliased an
 * older one). */
enum { PTX_TYPE_BITS = 32, PTX_MOD_WORDS = 3 };

/* One row of the ISA table. */
typedef struct ptx_opinfo {
    const char *name;   /* "add", "cp.async.wait_group" */
    const char *opnds;  /* operand classes, see isa.def */
    const char *typing; /* operand typing rule letters */
    uint32_t types;     /* allowed type suffixes, bit per ptx_type */
    uint64_t mods[PTX_MOD_WORDS]; /* allowed modifiers, bit per ptx_mod */
    int sm, ver;        /* lowest target and .version */
    bool arch_specific; /* needs the 'a' target (sm_90a) */
    int min_opnds, max_opnds;
} ptx_opinfo;

ptx_opinfo ptx_op_info(ptx_op op);
const char *ptx_op_name(ptx_op op);
const char *ptx_type_name(ptx_type t);
int ptx_type_bits(ptx_type t);
char ptx_type_class(ptx_type t); /* 'b' 'u' 's' 'f' 'p' */
const char *ptx_mod_name(ptx_mod m);
const char *ptx_sreg_name(ptx_sreg s);
int ptx_sreg_bits(ptx_sreg s);
bool ptx_op_allows_mod(ptx_op op, ptx_mod m);
/* Lookups by text, for the parser; -1 when unknown. */
int ptx_op_lookup(const char *name, size_t n);
int ptx_type_lookup(const char *name, size_t n);
int ptx_mod_lookup(const char *name, size_t n);
int ptx_sreg_lookup(const char *name, size_t n);

/* A virtual register: a bank (a .reg declaration family such as %r<N>) and
 * an index in it. id 0 is "no register". */
typedef struct ptx_reg {
    uint32_t id; /* (bank + 1) << 20 | index */
} ptx_reg;
#define PTX_REG_BANK(r) ((int)((r).id >> 20) - 1)
#define PTX_REG_IDX(r) ((r).id & 0xfffffu)

enum { PTX_MAX_BANK_NAME = 64 }; /* longest register family name */

typedef struct ptx_bank {
    const char *prefix; /* "%r", or a full name when scalar */
    ptx_type type;      /* declared type: b16 b32 b64 f32 f64 pred ... */
    uint32_t count;     /* registers 0..count-1 */
    bool scalar;        /* declared as a plain name, printed without index */
} ptx_bank;

typedef enum ptx_opd_kind {
    PTX_O_NONE,
    PTX_O_REG,   /* a register; neg for "!%p" */
    PTX_O_IMM,   /* integer immediate; hex prints it in hex */
    PTX_O_F32,   /* f32 immediate, printed 0fXXXXXXXX */
    PTX_O_F64,   /* f64 immediate, printed 0dXXXXXXXXXXXXXXXX */
    PTX_O_ADDR,  /* [reg+off] or [sym+off] */
    PTX_O_VEC,   /* {a, b, ...} */
    PTX_O_SREG,  /* special register */
    PTX_O_SYM,   /* a symbol as a value: mov.u32 %r, smem; */
    PTX_O_LABEL, /* a label, by index into the entry's label table */
    PTX_O_SINK,  /* '_' inside a vector */
    PTX_O_PAIR,  /* d|p: elect.sync's two destinations (u.pair; d id 0 is the sink '_') */
    PTX_O_TENSOR, /* [tmap, {c0, c1, ...}]: u.vec, e[0] the tensor map, then coordinates */
} ptx_opd_kind;

typedef struct ptx_opd {
    uint8_t kind;
    bool neg;
    bool hex;
    union {
        ptx_reg reg;
        int64_t imm;
        float f32;
        double f64;
        ptx_sreg sreg;
        int label;
        const char *sym;
        struct {
            ptx_reg base;    /* id 0 when the address is a symbol */
            const char *sym; /* NULL when based on a register */
            int64_t off;
        } addr;
        struct {
            struct ptx_opd *e;
            int n;
        } vec;
        struct {
            ptx_reg d, p; /* d id 0: '_' */
        } pair;
    } u;
} ptx_opd;

enum { PTX_MAX_MODS = 10, PTX_MAX_TYPES = 4, PTX_MAX_OPDS = 8 };

/* A matrix shape written as one component, .m64n128k16 (wgmma): only the
 * opcodes with PTX_SHAPE rows carry one (m 0: none). It is printed after the
 * first `at` modifiers (0xff: after all of them), where it was written. */
typedef struct ptx_shape {
    uint8_t m;
    uint16_t k; /* 256 for .b1 */
    uint8_t at;
    uint16_t n;
} ptx_shape;
#define PTX_SHAPE_END 0xff

typedef struct ptx_ins {
    uint16_t op;
    uint8_t nmods, ntypes, nopd;
    bool guard_neg;
    /* the builder's signature entry + 1 (ptx_module_nsigs), 0: none (parsed
     * or hand-built): the printer writes the opcode part once per entry */
    uint16_t sig;
    ptx_reg guard; /* id 0: unguarded */
    ptx_shape shape;
    uint8_t mods[PTX_MAX_MODS];
    uint8_t types[PTX_MAX_TYPES];
    ptx_opd opd[PTX_MAX_OPDS];
    int line; /* source line in the PTX text (parser or printer sets it) */
} ptx_ins;

typedef struct ptx_param {
    const char *name;
    ptx_type type;  /* u32, u64, f32, b8 (for byte arrays) ... */
    int align;      /* .align N, 0 when none */
    int array;      /* element count of a byte array, 0 for a scalar */
    bool ptr;       /* .ptr .global .align N attribute on a u64 */
    int ptr_align;
} ptx_param;

typedef struct ptx_shared {
    const char *name;
    int align;
    int64_t bytes;   /* static size; 0 for an extern (dynamic) array */
    bool is_extern;
} ptx_shared;

typedef struct ptx_module ptx_module;

typedef struct ptx_fn {
    ptx_module *mod;
    const char *name;
    ptx_param *params;
    size_t nparams, cap_params;
    int maxntid[3], reqntid[3]; /* 0: not given */
    int minnctapersm, maxnreg;
    /* cluster directives (sm_90): .explicitcluster, .reqnctapercluster X, Y, Z
     * (0: not given), .maxclusterrank N (0: not given) */
    bool explicitcluster;
    int reqnctapercluster[3], maxclusterrank;
    ptx_bank *banks;
    size_t nbanks, cap_banks;
    int std_bank[PTX_NTYPES]; /* builder's bank per declared type, -1 none */
    ptx_shared *shared;       /* function-scope static .shared */
    size_t nshared, cap_shared;
    ptx_ins *body;
    size_t nbody, cap_body;
    const char **labels;      /* label names; a label's index is its id */
    size_t nlabels, cap_labels;
    int need_sm, need_ver;    /* highest requirement of the instructions */
} ptx_fn;

struct ptx_module {
    pt_arena *arena;
    pt_target target;
    int version;  /* .version written; set by ptx_module_finish or the parser */
    int max_ptx;  /* ceiling: what the compiler (and driver) accept */
    ptx_shared *shared; /* module scope: .extern .shared dynamic arrays */
    size_t nshared, cap_shared;
    ptx_fn **fns;
    size_t nfns, cap_fns;
    pt_err err; /* first building error, sticky */
    /* the builder's verdicts on instruction signatures (opcode, modifiers,
     * types, shape, operand count) that passed the table (ir.c); malloc'd,
     * freed by ptx_module_free (a ptx_sigcache's: freed with the cache);
     * NULL until the first ptx_emit */
    struct ptx_sigtab *sigs;
    bool sigs_shared; /* sigs belongs to a ptx_sigcache */
};

/* Module lifetime. max_ptx is the highest .version the toolchain accepts
 * (90 for CUDA 13.0); 0 means no ceiling known. NULL when out of memory;
 * the builders allocate in m->arena (see pt_arena_catch, ptx/base.h). */
ptx_module *ptx_module_new(const pt_target *t, int max_ptx);
void ptx_module_free(ptx_module *m);
/* The builder's signature verdicts kept across modules: a caller that
 * builds many modules one after another (a space's configs) passes one
 * cache to each, so the table is checked once per signature, target and
 * ceiling, not once per module. Nothing global: the caller owns it. One
 * thread at a time (each thread its own cache); it must outlive the modules
 * built with it. The verdicts, and so every instruction the builder accepts
 * or refuses and every message, are those of an uncached module. */
typedef struct ptx_sigcache ptx_sigcache;
ptx_sigcache *ptx_sigcache_new(void); /* NULL when out of memory */
void ptx_sigcache_free(ptx_sigcache *c);
/* ptx_module_new with c's table for (t, max_ptx); c NULL, or no memory for
 * the table: an uncached module, as ptx_module_new. */
ptx_module *ptx_module_new_cached(const pt_target *t, int max_ptx, ptx_sigcache *c);
/* Sets .version to the lowest the target and every instruction need, and
 * checks it against the ceiling. Returns the sticky error, if any. */
int ptx_module_finish(ptx_module *m);
/* The entry's cluster directives against its target (sm_90; they raise
 * .version to 7.8). ptx_module_finish and the parser call it. */
int ptx_fn_check_directives(ptx_fn *f, pt_err *e);
int ptx_module_error(const ptx_module *m);
/* Entries of the builder's signature table (ptx_ins.sig is at most this). */
size_t ptx_module_nsigs(const ptx_module *m);
const char *ptx_module_errmsg(const ptx_module *m);
/* Module-scope dynamic shared memory: .extern .shared .align A .b8 name[]; */
void ptx_module_extern_shared(ptx_module *m, const char *name, int align);

ptx_fn *ptx_fn_new(ptx_module *m, const char *name);
/* Parameters; returns the name for use in [name] addresses. */
const char *ptx_param_add(ptx_fn *f, const char *name, ptx_type t);
const char *ptx_param_ptr(ptx_fn *f, const char *name, int align); /* .u64 .ptr .global .align */
const char *ptx_param_bytes(ptx_fn *f, const char *name, int align, int bytes);
/* Static shared array; returns its name. */
const char *ptx_shared_add(ptx_fn *f, const char *name, int align, int64_t bytes);
int ptx_bank_add(ptx_fn *f, const char *prefix, ptx_type t, uint32_t count, bool scalar);

/* A fresh register of a declared type: pred, b16, b32, b64, f32, f64 get
 * the families %p %rs %r %rd %f %fd. */
ptx_reg ptx_reg_new(ptx_fn *f, ptx_type t);
ptx_type ptx_reg_type(const ptx_fn *f, ptx_reg r);
int ptx_label_new(ptx_fn *f);
int ptx_label_named(ptx_fn *f, const char *name);
void ptx_label_place(ptx_fn *f, int label);

/* Operand constructors. */
static inline ptx_opd ptx_r(ptx_reg r) { return (ptx_opd){.kind = PTX_O_REG, .u.reg = r}; }
static inline ptx_opd ptx_notp(ptx_reg r) { return (ptx_opd){.kind = PTX_O_REG, .neg = true, .u.reg = r}; }
static inline ptx_opd ptx_imm(int64_t v) { return (ptx_opd){.kind = PTX_O_IMM, .u.imm = v}; }
static inline ptx_opd ptx_hex(int64_t v) { return (ptx_opd){.kind = PTX_O_IMM, .hex = true, .u.imm = v}; }
static inline ptx_opd ptx_f32(float v) { return (ptx_opd){.kind = PTX_O_F32, .u.f32 = v}; }
static inline ptx_opd ptx_f64(double v) { return (ptx_opd){.kind = PTX_O_F64, .u.f64 = v}; }
static inline ptx_opd ptx_sr(ptx_sreg s) { return (ptx_opd){.kind = PTX_O_SREG, .u.sreg = s}; }
static inline ptx_opd ptx_sym(const char *s) { return (ptx_opd){.kind = PTX_O_SYM, .u.sym = s}; }
static inline ptx_opd ptx_lbl(int l) { return (ptx_opd){.kind = PTX_O_LABEL, .u.label = l}; }
static inline ptx_opd ptx_sink(void) { return (ptx_opd){.kind = PTX_O_SINK}; }
/* d|p (elect.sync); d id 0 prints the sink '_' */
static inline ptx_opd ptx_pair(ptx_reg d, ptx_reg p)
{
    return (ptx_opd){.kind = PTX_O_PAIR, .u.pair = {d, p}};
}
static inline ptx_opd ptx_addr(ptx_reg base, int64_t off)
{
    return (ptx_opd){.kind = PTX_O_ADDR, .u.addr = {base, NULL, off}};
}
static inline ptx_opd ptx_saddr(const char *sym, int64_t off)
{
    return (ptx_opd){.kind = PTX_O_ADDR, .u.addr = {{0}, sym, off}};
}
/* A vector operand; elements copied into the module's arena. */
ptx_opd ptx_vec(ptx_fn *f, int n, const ptx_opd *e);
ptx_opd ptx_vecr(ptx_fn *f, int n, const ptx_reg *r);
/* [tmap, {c0, ...}]: a tensor map (a 64-bit register or a symbol) and n
 * coordinates (registers or immediates), copied into the arena. */
ptx_opd ptx_tensor(ptx_fn *f, ptx_opd tmap, int n, const ptx_opd *coords);

/* Modifier and type lists, kept in written order. */
typedef struct ptx_mods {
    uint8_t n;
    uint8_t m[PTX_MAX_MODS];
} ptx_mods;
typedef struct ptx_types {
    uint8_t n;
    uint8_t t[PTX_MAX_TYPES];
} ptx_types;
#define PTX_NARGS_(...) (sizeof((const uint8_t[]){__VA_ARGS__}) / sizeof(uint8_t))
#define PTX_MODS(...) ((ptx_mods){.n = (uint8_t)PTX_NARGS_(__VA_ARGS__), .m = {__VA_ARGS__}})
#define PTX_NOMODS ((ptx_mods){.n = 0})
#define PTX_TYPES(...) ((ptx_types){.n = (uint8_t)PTX_NARGS_(__VA_ARGS__), .t = {__VA_ARGS__}})
#define PTX_T1(ty) ((ptx_types){.n = 1, .t = {(ty)}})
#define PTX_NOTYPES ((ptx_types){.n = 0})

/* Appends an instruction after checking it against the ISA table: opcode,
 * modifiers, types, operand count and classes, register sizes, and the
 * target (an instruction above it fails with e.g.
 * "cvt.rn.satfinite.e4m3x2.f32 needs sm_89 and PTX 8.1; target is sm_80").
 * Returns the instruction (to set a guard) or NULL after an error. */
ptx_ins *ptx_emit_n(ptx_fn *f, ptx_op op, ptx_mods mods, ptx_types types, int n,
                    const ptx_opd *opd);
#define ptx_emit(f, op, mods, types, ...)                                             \
    ptx_emit_n((f), (op), (mods), (types),                                            \
               (int)(sizeof((ptx_opd[]){__VA_ARGS__}) / sizeof(ptx_opd)),             \
               (ptx_opd[]){__VA_ARGS__})
#define ptx_emit0(f, op, mods, types) ptx_emit_n((f), (op), (mods), (types), 0, NULL)
/* The same for opcodes with a shape (wgmma): .m{m}n{n}k{k}, printed after
 * the modifiers. */
ptx_ins *ptx_emit_shape_n(ptx_fn *f, ptx_op op, ptx_mods mods, ptx_shape shape, ptx_types types,
                          int n, const ptx_opd *opd);
static inline ptx_shape ptx_mnk(int m, int n, int k)
{
    return (ptx_shape){(uint8_t)m, (uint16_t)k, PTX_SHAPE_END, (uint16_t)n};
}
/* A pseudo-instruction: .pragma "nounroll"; (the loop it heads is not
 * unrolled; ptxas serialises wgmma pipelines it unrolls, C7511). */
void ptx_pragma_nounroll(ptx_fn *f);
/* Guards an emitted instruction: @%p or @!%p. NULL-safe. */
void ptx_guard(ptx_ins *i, ptx_reg p, bool neg);

/* The ISA table's legality rows (isa.def "legality rules"), for tests that
 * walk the table. MCLASS rows: what, mods. FORM: op, types, nopd, mods,
 * all, one. REQ: op, mod, types[0], mods (the needed ones). OPN: op, mod,
 * min, max. VEC: op, mod, opnd, tyidx, types[0], n. IMM: op, mod, opnd, lo,
 * hi, step, what. ORDER: op, mods (before), all (after), what (why). PACK:
 * op, types[0]. mod is -1 for the key ANY. */
typedef enum ptx_rule_kind {
    PTX_RULE_MCLASS, PTX_RULE_FORM, PTX_RULE_REQ, PTX_RULE_OPN, PTX_RULE_VEC, PTX_RULE_IMM,
    PTX_RULE_ORDER, PTX_RULE_PACK, PTX_RULE_SHAPE, PTX_RULE_OPADD, PTX_NRULE_KINDS
} ptx_rule_kind;
typedef struct ptx_rule {
    int op, mod;
    uint32_t types[PTX_MAX_TYPES];
    int nopd, opnd, tyidx, n, min, max;
    int64_t lo, hi, step;
    uint64_t mods[PTX_MOD_WORDS], all[PTX_MOD_WORDS], one[PTX_MOD_WORDS];
    const char *what;
    char cls, typing; /* OPADD: the added operand's class and typing letter */
} ptx_rule;
/* SHAPE rows: op, tyidx, types[0], m (min), k (max), lo, hi, step (n).
 * OPADD rows: op, mod, cls, typing. */
int ptx_isa_nrules(ptx_rule_kind k);
ptx_rule ptx_isa_rule(ptx_rule_kind k, int i);
static inline bool ptx_mask_has(const uint64_t *mods, int m)
{
    return m >= 0 && m < PTX_NMODS && ((mods[m >> 6] >> (m & 63)) & 1);
}
/* The table's own consistency: rule rows grouped by opcode in PTX_OP order,
 * FORM types and modifiers within the opcode row's, required modifiers
 * among the allowed ones, operand rules within the operand count. */
int ptx_isa_check_table(pt_err *e);

/* Checks one instruction against the table and target without appending
 * (the parser uses it); raises f->need_sm/need_ver. */
int ptx_check_ins(ptx_fn *f, const ptx_ins *ins, pt_err *e);
/* Opcodes that share a name (wgmma.mma_async SS and RS, the TMA load and
 * store, the bulk copies) are one row per form; the parser names the first
 * and this picks the row whose operand classes fit the operands best
 * (kinds, then count). Returns the opcode. */
ptx_op ptx_resolve_op(const ptx_fn *f, const ptx_ins *ins);
/* The operand classes and typing letters of ins: the opcode row's, with
 * the PTX_OPADD operands of its modifiers appended. NUL-terminated. */
void ptx_ins_opnds(const ptx_ins *ins, char cls[24], char typing[24]);
/* The sm and .version a special register needs. */
void ptx_sreg_need(ptx_sreg s, int *sm, int *ver);
/* "cvt.rn.satfinite.e4m3x2.f32": opcode with modifiers and types. */
void ptx_ins_opname(const ptx_ins *ins, pt_buf *out);

/* Printer: the only writer of PTX text. Sets each instruction's line. */
char *ptx_print(ptx_module *m); /* malloc'd text; NULL when out of memory */
void ptx_print_buf(ptx_module *m, pt_buf *out);
void ptx_print_ins(const ptx_fn *f, const ptx_ins *ins, pt_buf *out);
const char *ptx_reg_name(const ptx_fn *f, ptx_reg r, char *buf, size_t n);

#endif
