/* IR -> pre-decoded instructions. Runs once per kernel (emu_load): resolves
 * registers to slots, immediates and symbol addresses to constant slots,
 * labels to pcs, [symbol+offset] to offsets, and each (opcode, types,
 * modifiers) to a micro-op with its mode fields, so that execution does no
 * string work and no lookups.
 *
 * The dispatch table dec_tab[] is indexed by the ISA table's opcode enum;
 * an opcode without a row is "not emulated" (a load-time error, never a
 * silent wrong answer). Hopper rows: wgmma and its warp ops decode to
 * EMU_H_WG (wgmma.c), mbarriers to EMU_H_MBAR (mbarrier.c), TMA, bulk
 * copies, proxy fences and the cluster ops of a one-CTA cluster to
 * EMU_H_ASYNC (async.c; address operands as (base, offset) slot pairs in
 * vpool). A kernel with .reqnctapercluster over one CTA is refused. */
#include "ptx/emu/emu_int.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct dec {
    emu_kernel *k;
    ptx_module *m;
    ptx_fn *f;
    pt_err *e;
    const ptx_ins *cur;
    uint32_t *bank_base;
    uint64_t *consts;
    size_t nconst, cap_const;
    uint32_t *vpool;
    size_t nvpool, cap_vpool;
    uint32_t *label_pc;
} dec;

static int dec_err(dec *d, const char *what)
{
    pt_buf b;
    pt_buf_init(&b);
    if (d->cur)
        ptx_ins_opname(d->cur, &b);
    pt_errf(d->e, PT_EUNSUPPORTED, "emulator: %s%s%s (kernel %s, line %d)", what,
            d->cur ? ": " : "", b.s ? b.s : "", d->f->name, d->cur ? d->cur->line : 0);
    pt_buf_free(&b);
    return PT_EUNSUPPORTED;
}

static void *grow(void *p, size_t elem, size_t *cap, size_t need)
{
    if (need <= *cap)
        return p;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *q = realloc(p, nc * elem);
    if (!q)
        abort(); /* allocation failure is an invariant violation (base.h) */
    *cap = nc;
    return q;
}

static bool has(const ptx_ins *in, ptx_mod m)
{
    for (int i = 0; i < in->nmods; i++)
        if (in->mods[i] == m)
            return true;
    return false;
}

static int tybits(int t) { return t == PTX_T_PRED ? 1 : ptx_type_bits((ptx_type)t); }

/* A constant slot holding v in every lane (deduplicated). */
static uint32_t konst(dec *d, uint64_t v)
{
    for (size_t i = 0; i < d->nconst; i++)
        if (d->consts[i] == v)
            return d->k->const_base + (uint32_t)i;
    d->consts = grow(d->consts, sizeof *d->consts, &d->cap_const, d->nconst + 1);
    d->consts[d->nconst] = v;
    return d->k->const_base + (uint32_t)d->nconst++;
}

static int reg_slot(dec *d, ptx_reg r, uint32_t *slot)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= d->f->nbanks || PTX_REG_IDX(r) >= d->f->banks[b].count)
        return dec_err(d, "undeclared register");
    *slot = d->bank_base[b] + PTX_REG_IDX(r);
    return PT_OK;
}

static int reg_bits(dec *d, ptx_reg r)
{
    int b = PTX_REG_BANK(r);
    return tybits(d->f->banks[b].type);
}

static bool sreg_dynamic(ptx_sreg s)
{
    return s == PTX_S_CLOCK || s == PTX_S_CLOCK_HI || s == PTX_S_CLOCK64 ||
           s == PTX_S_GLOBALTIMER;
}

/* Address of a symbol: a parameter (param-space offset) or a shared
 * variable (window offset). */
static int sym_addr(dec *d, const char *name, int *space, uint64_t *addr)
{
    const emu_kernel *k = d->k;
    for (uint32_t i = 0; i < k->nparams; i++)
        if (strcmp(d->f->params[i].name, name) == 0) {
            *space = EMU_SP_PARAM;
            *addr = k->param_off[i];
            return PT_OK;
        }
    for (uint32_t i = 0; i < k->nshvars; i++)
        if (strcmp(k->shvars[i].name, name) == 0) {
            *space = EMU_SP_SHARED;
            *addr = k->shvars[i].off;
            return PT_OK;
        }
    return dec_err(d, "unknown symbol");
}

/* Bits of an immediate for an operand of type t: integers are truncated to
 * the type; float literals are converted to the operand's float format, or
 * kept as bit patterns for bit-size types (mov.b32 %r, 0f3F800000). */
static uint64_t imm_bits(const ptx_opd *o, int t)
{
    int bits = tybits(t);
    char cls = t == PTX_T_PRED ? 'p' : ptx_type_class((ptx_type)t);
    if (o->kind == PTX_O_IMM) {
        if (t == PTX_T_PRED)
            return o->u.imm != 0;
        if (t == PTX_T_F32)
            return num_f32_bits((float)o->u.imm);
        if (t == PTX_T_F64)
            return num_f64_bits((double)o->u.imm);
        return (uint64_t)o->u.imm & emu_mask(bits);
    }
    double v = o->kind == PTX_O_F32 ? (double)o->u.f32 : o->u.f64;
    if (t == PTX_T_F64)
        return num_f64_bits(v);
    if (t == PTX_T_F32)
        return num_f32_bits((float)v);
    if (t == PTX_T_BF16)
        return num_round(EMU_FMT_BF16, v, EMU_RN, 0);
    if (bits == 16)
        return num_round(EMU_FMT_F16, v, EMU_RN, 0);
    if (bits == 64)
        return o->kind == PTX_O_F64 ? num_f64_bits(v) : num_f32_bits(o->u.f32);
    if (cls == 'u' || cls == 's')
        return (uint64_t)(int64_t)v & emu_mask(bits);
    return num_f32_bits((float)v) & emu_mask(bits);
}

/* A scalar source operand of type t. */
static int src(dec *d, const ptx_opd *o, int t, uint32_t *slot)
{
    switch ((ptx_opd_kind)o->kind) {
    case PTX_O_REG: return reg_slot(d, o->u.reg, slot);
    case PTX_O_IMM:
    case PTX_O_F32:
    case PTX_O_F64: *slot = konst(d, imm_bits(o, t)); return PT_OK;
    case PTX_O_SREG:
        if (sreg_dynamic(o->u.sreg))
            return dec_err(d, "clock registers can only be read by mov");
        *slot = EMU_SLOT_SREG + (uint32_t)o->u.sreg;
        return PT_OK;
    case PTX_O_SYM: {
        int sp;
        uint64_t a;
        int rc = sym_addr(d, o->u.sym, &sp, &a);
        if (rc)
            return rc;
        *slot = konst(d, a);
        return PT_OK;
    }
    default: return dec_err(d, "unexpected operand kind");
    }
}

static int dst(dec *d, const ptx_opd *o, uint32_t *slot)
{
    if (o->kind == PTX_O_SINK) {
        *slot = EMU_SLOT_SINK;
        return PT_OK;
    }
    if (o->kind != PTX_O_REG)
        return dec_err(d, "destination must be a register");
    return reg_slot(d, o->u.reg, slot);
}

/* A {vector} operand (or a single register, as one element) into vpool;
 * sources may hold immediates of type t. Returns the pool index. */
static int vec(dec *d, const ptx_opd *o, bool is_dst, int t, uint32_t *idx)
{
    int n = o->kind == PTX_O_VEC ? o->u.vec.n : 1; /* the length: ptx_check_ins */
    d->vpool = grow(d->vpool, sizeof *d->vpool, &d->cap_vpool, d->nvpool + (size_t)n);
    *idx = (uint32_t)d->nvpool;
    for (int i = 0; i < n; i++) {
        const ptx_opd *el = o->kind == PTX_O_VEC ? &o->u.vec.e[i] : o;
        uint32_t s;
        int rc = is_dst ? dst(d, el, &s) : src(d, el, t, &s);
        if (rc)
            return rc;
        d->vpool[d->nvpool++] = s;
    }
    return PT_OK;
}

static int first_reg_bits(dec *d, const ptx_opd *o)
{
    if (o->kind == PTX_O_REG)
        return reg_bits(d, o->u.reg);
    if (o->kind == PTX_O_VEC)
        for (int i = 0; i < o->u.vec.n; i++)
            if (o->u.vec.e[i].kind == PTX_O_REG)
                return reg_bits(d, o->u.vec.e[i].u.reg);
    return 64;
}

static int space_of(const ptx_ins *in)
{
    if (has(in, PTX_M_GLOBAL))
        return EMU_SP_GLOBAL;
    if (has(in, PTX_M_SHARED) || has(in, PTX_M_SHARED_CTA))
        return EMU_SP_SHARED;
    if (has(in, PTX_M_SHARED_CLUSTER)) /* ld/st/atom/red: distributed shared memory */
        return EMU_SP_CLUSTER;
    if (has(in, PTX_M_LOCAL))
        return EMU_SP_LOCAL;
    if (has(in, PTX_M_PARAM))
        return EMU_SP_PARAM;
    if (has(in, PTX_M_CONST))
        return EMU_SP_CONST;
    return EMU_SP_GENERIC;
}

static int rnd_of(const ptx_ins *in, int dflt)
{
    for (int i = 0; i < in->nmods; i++)
        switch (in->mods[i]) {
        case PTX_M_RN:
        case PTX_M_RNI: return EMU_RN;
        case PTX_M_RZ:
        case PTX_M_RZI: return EMU_RZ;
        case PTX_M_RM:
        case PTX_M_RMI: return EMU_RM;
        case PTX_M_RP:
        case PTX_M_RPI: return EMU_RP;
        case PTX_M_RNA: return EMU_RNA;
        default: break;
        }
    return dflt;
}

static bool int_rnd(const ptx_ins *in)
{
    return has(in, PTX_M_RNI) || has(in, PTX_M_RZI) || has(in, PTX_M_RMI) || has(in, PTX_M_RPI);
}

static uint16_t num_flags(const ptx_ins *in)
{
    uint16_t f = 0;
    if (has(in, PTX_M_FTZ))
        f |= EMU_IF_FTZ;
    if (has(in, PTX_M_SAT))
        f |= EMU_IF_SAT;
    if (has(in, PTX_M_SATFINITE))
        f |= EMU_IF_SATFINITE;
    if (has(in, PTX_M_RELU))
        f |= EMU_IF_RELU;
    return f;
}

/* An address operand: base slot (zero slot for [symbol]) and offset. A
 * shared symbol used by a generic access becomes a generic address. */
static int addr(dec *d, const ptx_opd *o, int space, uint32_t *base, int64_t *off)
{
    if (o->kind != PTX_O_ADDR)
        return dec_err(d, "expected an address");
    *off = o->u.addr.off;
    if (!o->u.addr.sym)
        return reg_slot(d, o->u.addr.base, base);
    *base = EMU_SLOT_ZERO;
    int sp;
    uint64_t a;
    int rc = sym_addr(d, o->u.addr.sym, &sp, &a);
    if (rc)
        return rc;
    if (sp == EMU_SP_SHARED && space == EMU_SP_GENERIC)
        a += EMU_SHARED_BASE;
    else if (sp != space && !(sp == EMU_SP_PARAM && space == EMU_SP_GENERIC) &&
             !(sp == EMU_SP_SHARED && space == EMU_SP_CLUSTER))
        return dec_err(d, "symbol used in the wrong state space");
    *off += (int64_t)a;
    return PT_OK;
}

static void set_type(emu_ins *o, const ptx_ins *in)
{
    if (in->ntypes) {
        o->ty = in->types[0];
        o->bits = (uint8_t)tybits(in->types[0]);
        char cls = in->types[0] == PTX_T_PRED ? 'p' : ptx_type_class((ptx_type)in->types[0]);
        if (cls == 's')
            o->flags |= EMU_IF_SIGNED;
    }
    if (in->ntypes > 1)
        o->ty2 = in->types[1];
}

static bool is_float(int t) { return t != PTX_T_PRED && ptx_type_class((ptx_type)t) == 'f'; }

typedef int (*dec_fn)(dec *d, const ptx_ins *in, emu_ins *o);

/* ---- data movement ---- */

static int dec_mov(dec *d, const ptx_ins *in, emu_ins *o)
{
    const ptx_opd *a = &in->opd[1], *r = &in->opd[0];
    int rc;
    /* the vector's registers add up to the type's size: ptx_check_ins */
    if (a->kind == PTX_O_VEC) { /* pack: mov.b32 %r, {%h0, %h1} */
        o->h = EMU_H_PACK;
        o->n = (uint8_t)a->u.vec.n;
        int et = o->bits / o->n == 16 ? PTX_T_B16 : o->bits / o->n == 32 ? PTX_T_B32 : PTX_T_B8;
        if ((rc = vec(d, a, false, et, &o->a)))
            return rc;
        return dst(d, r, &o->d);
    }
    if (r->kind == PTX_O_VEC) { /* unpack: mov.b32 {%h0, %h1}, %r */
        o->h = EMU_H_UNPACK;
        o->n = (uint8_t)r->u.vec.n;
        if ((rc = vec(d, r, true, 0, &o->d)))
            return rc;
        return src(d, a, o->ty, &o->a);
    }
    if (a->kind == PTX_O_SREG && sreg_dynamic(a->u.sreg)) {
        o->h = EMU_H_SREG_DYN;
        o->sub = (uint8_t)a->u.sreg;
        return dst(d, r, &o->d);
    }
    o->h = EMU_H_MOV;
    if ((rc = dst(d, r, &o->d)))
        return rc;
    return src(d, a, o->ty, &o->a);
}

static int dec_ldst(dec *d, const ptx_ins *in, emu_ins *o)
{
    bool ld = in->op == PTX_OP_LD;
    if (o->ty == PTX_T_B128)
        return dec_err(d, ".b128 registers are not emulated");
    o->h = ld ? EMU_H_LD : EMU_H_ST;
    o->sub = (uint8_t)space_of(in);
    if (o->sub == EMU_SP_CLUSTER) /* DSMEM: the cluster's vector clocks (async.c) */
        d->k->async = true;
    o->n = has(in, PTX_M_V4) ? 4 : has(in, PTX_M_V2) ? 2 : 1;
    o->sz = (uint8_t)(o->bits / 8);
    const ptx_opd *val = &in->opd[ld ? 0 : 1], *ad = &in->opd[ld ? 1 : 0];
    o->dbits = (uint8_t)first_reg_bits(d, val);
    int rc = addr(d, ad, o->sub, &o->a, &o->off);
    if (rc)
        return rc;
    if (ld) /* o->n registers: ptx_check_ins */
        return vec(d, val, true, 0, &o->d);
    return vec(d, val, false, o->ty, &o->b);
}

static int dec_cvta(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_CVTA;
    int sp = space_of(in);
    if (sp == EMU_SP_SHARED || sp == EMU_SP_LOCAL || sp == EMU_SP_PARAM) {
        o->sub = has(in, PTX_M_TO) ? EMU_CVTA_FROM_GENERIC : EMU_CVTA_TO_GENERIC;
        o->sub2 = (uint8_t)sp;
    } else
        o->sub = EMU_CVTA_ID;
    int rc = dst(d, &in->opd[0], &o->d);
    return rc ? rc : src(d, &in->opd[1], o->ty, &o->a);
}

static int dec_cvt(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_CVT; /* two types and the packed forms' two sources: ptx_check_ins */
    o->flags = (uint16_t)(o->flags | num_flags(in));
    int dt = in->types[0], st = in->types[1];
    o->rnd = (uint8_t)rnd_of(in, EMU_RN);
    if (int_rnd(in))
        o->sub2 = 1; /* round to an integral value */
    char dc = ptx_type_class((ptx_type)dt), sc = ptx_type_class((ptx_type)st);
    if (dc != 'f' && sc != 'f' && !(o->flags & EMU_IF_SAT))
        o->sub = 1; /* plain integer resize: the fast path */
    if (sc == 's')
        o->flags |= EMU_IF_SIGNED;
    else
        o->flags = (uint16_t)(o->flags & ~EMU_IF_SIGNED);
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc)
        return rc;
    if ((rc = src(d, &in->opd[1], st, &o->a)))
        return rc;
    if (in->nopd == 3) {
        o->flags |= EMU_IF_PAIR;
        return src(d, &in->opd[2], st, &o->b);
    }
    o->b = EMU_SLOT_ZERO;
    return PT_OK;
}

/* ---- arithmetic ---- */

static int srcs(dec *d, const ptx_ins *in, emu_ins *o, int from, int t)
{
    uint32_t *slots[] = {&o->a, &o->b, &o->c, &o->e};
    for (int i = from; i < in->nopd; i++) {
        int rc = src(d, &in->opd[i], t, slots[i - from]);
        if (rc)
            return rc;
    }
    return PT_OK;
}

static int dec_arith(dec *d, const ptx_ins *in, emu_ins *o)
{
    int t = o->ty, rc;
    bool wide = has(in, PTX_M_WIDE), hi = has(in, PTX_M_HI);
    o->dbits = (uint8_t)(wide ? 2 * o->bits : o->bits);
    if ((rc = dst(d, &in->opd[0], &o->d)))
        return rc;
    if (in->op == PTX_OP_MAD && wide) { /* c is twice as wide */
        if ((rc = src(d, &in->opd[1], t, &o->a)) || (rc = src(d, &in->opd[2], t, &o->b)))
            return rc;
        int wt = t == PTX_T_U16 ? PTX_T_U32 : t == PTX_T_S16 ? PTX_T_S32 : t == PTX_T_U32 ? PTX_T_U64 : PTX_T_S64;
        if ((rc = src(d, &in->opd[3], wt, &o->c)))
            return rc;
    } else if ((rc = srcs(d, in, o, 1, t)))
        return rc;
    if (!is_float(t)) {
        bool sat = has(in, PTX_M_SAT);
        switch (in->op) {
        case PTX_OP_ADD: o->h = sat ? EMU_H_IADD_SAT : EMU_H_IADD; break;
        case PTX_OP_SUB: o->h = sat ? EMU_H_ISUB_SAT : EMU_H_ISUB; break;
        case PTX_OP_MUL: o->h = wide ? EMU_H_IMUL_WIDE : hi ? EMU_H_IMUL_HI : EMU_H_IMUL_LO; break;
        case PTX_OP_MAD: o->h = wide ? EMU_H_IMAD_WIDE : hi ? EMU_H_IMAD_HI : EMU_H_IMAD_LO; break;
        case PTX_OP_DIV: o->h = EMU_H_IDIV; break;
        case PTX_OP_REM: o->h = EMU_H_IREM; break;
        case PTX_OP_MIN: o->h = EMU_H_IMIN; break;
        case PTX_OP_MAX: o->h = EMU_H_IMAX; break;
        case PTX_OP_ABS: o->h = EMU_H_IABS; break;
        case PTX_OP_NEG: o->h = EMU_H_INEG; break;
        default: return dec_err(d, "not an integer operation");
        }
        return PT_OK;
    }
    o->flags = (uint16_t)(o->flags | num_flags(in));
    if (has(in, PTX_M_APPROX) || has(in, PTX_M_FULL))
        o->flags |= EMU_IF_APPROX;
    o->rnd = (uint8_t)rnd_of(in, EMU_RN);
    bool fast = o->rnd == EMU_RN && !(o->flags & (EMU_IF_RELU | EMU_IF_SATFINITE));
    int fop = -1;
    switch (in->op) {
    case PTX_OP_ADD: fop = EMU_FOP_ADD; break;
    case PTX_OP_SUB: fop = EMU_FOP_SUB; break;
    case PTX_OP_MUL: fop = EMU_FOP_MUL; break;
    case PTX_OP_MAD:
    case PTX_OP_FMA: fop = EMU_FOP_FMA; break;
    case PTX_OP_DIV: fop = EMU_FOP_DIV; break;
    case PTX_OP_MIN:
    case PTX_OP_MAX:
        o->h = EMU_H_FMINMAX;
        o->sub = in->op == PTX_OP_MAX;
        if (has(in, PTX_M_NAN))
            o->flags |= EMU_IF_NAN;
        if (has(in, PTX_M_XORSIGN))
            o->flags |= EMU_IF_XORSIGN;
        return PT_OK;
    case PTX_OP_ABS: o->h = EMU_H_FABS; return PT_OK;
    case PTX_OP_NEG: o->h = EMU_H_FNEG; return PT_OK;
    case PTX_OP_COPYSIGN: o->h = EMU_H_COPYSIGN; return PT_OK;
    default: return dec_err(d, "not a float operation");
    }
    o->sub = (uint8_t)fop;
    o->h = EMU_H_FARITH;
    if (fast && t == PTX_T_F32) {
        static const uint16_t f32h[] = {[EMU_FOP_ADD] = EMU_H_F32_ADD, [EMU_FOP_SUB] = EMU_H_F32_SUB,
                                        [EMU_FOP_MUL] = EMU_H_F32_MUL, [EMU_FOP_FMA] = EMU_H_F32_FMA,
                                        [EMU_FOP_DIV] = EMU_H_F32_DIV};
        o->h = f32h[fop];
    } else if (fast && t == PTX_T_F64 && !(o->flags & EMU_IF_SAT)) {
        static const uint16_t f64h[] = {[EMU_FOP_ADD] = EMU_H_F64_ADD, [EMU_FOP_SUB] = EMU_H_F64_SUB,
                                        [EMU_FOP_MUL] = EMU_H_F64_MUL, [EMU_FOP_FMA] = EMU_H_F64_FMA,
                                        [EMU_FOP_DIV] = EMU_H_F64_DIV};
        o->h = f64h[fop];
    }
    return PT_OK;
}

static int dec_funary(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_FUNARY;
    o->flags = (uint16_t)(o->flags | num_flags(in));
    o->rnd = (uint8_t)rnd_of(in, EMU_RN);
    if (has(in, PTX_M_APPROX) || !(has(in, PTX_M_RN) || has(in, PTX_M_RZ) || has(in, PTX_M_RM) ||
                                   has(in, PTX_M_RP)))
        o->flags |= EMU_IF_APPROX;
    switch (in->op) {
    case PTX_OP_RCP: o->sub = EMU_FN_RCP; break;
    case PTX_OP_SQRT: o->sub = EMU_FN_SQRT; break;
    case PTX_OP_RSQRT: o->sub = EMU_FN_RSQRT; break;
    case PTX_OP_EX2: o->sub = EMU_FN_EX2; break;
    case PTX_OP_LG2: o->sub = EMU_FN_LG2; break;
    case PTX_OP_SIN: o->sub = EMU_FN_SIN; break;
    case PTX_OP_COS: o->sub = EMU_FN_COS; break;
    default: o->sub = EMU_FN_TANH; break;
    }
    int rc = dst(d, &in->opd[0], &o->d);
    return rc ? rc : src(d, &in->opd[1], o->ty, &o->a);
}

/* ---- bit manipulation ---- */

static int dec_bits(dec *d, const ptx_ins *in, emu_ins *o)
{
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc)
        return rc;
    int t = o->ty;
    switch (in->op) {
    case PTX_OP_AND: o->h = EMU_H_AND; break;
    case PTX_OP_OR: o->h = EMU_H_OR; break;
    case PTX_OP_XOR: o->h = EMU_H_XOR; break;
    case PTX_OP_NOT: o->h = EMU_H_NOT; break;
    case PTX_OP_SHL: o->h = EMU_H_SHL; break;
    case PTX_OP_SHR: o->h = EMU_H_SHR; break;
    case PTX_OP_LOP3:
        o->h = EMU_H_LOP3;
        o->aux = (uint64_t)in->opd[4].u.imm & 0xff;
        if ((rc = src(d, &in->opd[1], t, &o->a)) || (rc = src(d, &in->opd[2], t, &o->b)))
            return rc;
        return src(d, &in->opd[3], t, &o->c);
    case PTX_OP_PRMT: o->h = EMU_H_PRMT; break;
    case PTX_OP_BFE:
        o->h = EMU_H_BFE;
        if ((rc = src(d, &in->opd[1], t, &o->a)))
            return rc;
        if ((rc = src(d, &in->opd[2], PTX_T_U32, &o->b)))
            return rc;
        return src(d, &in->opd[3], PTX_T_U32, &o->c);
    case PTX_OP_BFI:
        o->h = EMU_H_BFI;
        if ((rc = src(d, &in->opd[1], t, &o->a)) || (rc = src(d, &in->opd[2], t, &o->b)))
            return rc;
        if ((rc = src(d, &in->opd[3], PTX_T_U32, &o->c)))
            return rc;
        return src(d, &in->opd[4], PTX_T_U32, &o->e);
    case PTX_OP_POPC: o->h = EMU_H_POPC; break;
    case PTX_OP_CLZ: o->h = EMU_H_CLZ; break;
    case PTX_OP_BREV: o->h = EMU_H_BREV; break;
    default: return dec_err(d, "not a bit operation");
    }
    if ((rc = src(d, &in->opd[1], t, &o->a)))
        return rc;
    if (in->nopd > 2 &&
        (rc = src(d, &in->opd[2], in->op == PTX_OP_SHL || in->op == PTX_OP_SHR ? PTX_T_U32 : t, &o->b)))
        return rc;
    if (in->nopd > 3)
        return src(d, &in->opd[3], t, &o->c);
    return PT_OK;
}

static int cmp_of(const ptx_ins *in, bool *uns)
{
    static const struct {
        uint8_t mod, cmp;
        bool uns;
    } tab[] = {
        {PTX_M_EQ, EMU_CMP_EQ, 0},   {PTX_M_NE, EMU_CMP_NE, 0},   {PTX_M_LT, EMU_CMP_LT, 0},
        {PTX_M_LE, EMU_CMP_LE, 0},   {PTX_M_GT, EMU_CMP_GT, 0},   {PTX_M_GE, EMU_CMP_GE, 0},
        {PTX_M_LO, EMU_CMP_LT, 1},   {PTX_M_LS, EMU_CMP_LE, 1},   {PTX_M_HI, EMU_CMP_GT, 1},
        {PTX_M_HS, EMU_CMP_GE, 1},   {PTX_M_EQU, EMU_CMP_EQU, 0}, {PTX_M_NEU, EMU_CMP_NEU, 0},
        {PTX_M_LTU, EMU_CMP_LTU, 0}, {PTX_M_LEU, EMU_CMP_LEU, 0}, {PTX_M_GTU, EMU_CMP_GTU, 0},
        {PTX_M_GEU, EMU_CMP_GEU, 0}, {PTX_M_NUM, EMU_CMP_NUM, 0}, {PTX_M_NANCMP, EMU_CMP_NAN, 0},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (has(in, tab[i].mod)) {
            *uns = tab[i].uns;
            return tab[i].cmp;
        }
    return -1;
}

static int dec_setp(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_SETP;
    bool uns = false;
    int cmp = cmp_of(in, &uns); /* exactly one, of the type's kind: ptx_check_ins */
    o->sub = (uint8_t)cmp;
    if (uns)
        o->flags = (uint16_t)(o->flags & ~EMU_IF_SIGNED);
    if (has(in, PTX_M_FTZ))
        o->flags |= EMU_IF_FTZ;
    if (is_float(o->ty)) {
        o->flags |= EMU_IF_APPROX; /* marks a float compare */
        if (o->ty == PTX_T_F16X2 || o->ty == PTX_T_BF16X2)
            return dec_err(d, "packed setp is not emulated");
    }
    o->sub2 = has(in, PTX_M_AND) ? EMU_BOOL_AND : has(in, PTX_M_OR) ? EMU_BOOL_OR
              : has(in, PTX_M_XOR) ? EMU_BOOL_XOR : EMU_BOOL_NONE;
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc || (rc = src(d, &in->opd[1], o->ty, &o->a)) || (rc = src(d, &in->opd[2], o->ty, &o->b)))
        return rc;
    if (in->nopd == 4) {
        o->flags |= EMU_IF_HAS_C;
        o->cneg = in->opd[3].neg;
        return src(d, &in->opd[3], PTX_T_PRED, &o->c);
    }
    return PT_OK;
}

static int dec_selp(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_SELP;
    o->cneg = in->opd[3].neg;
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc || (rc = srcs(d, in, o, 1, o->ty)))
        return rc;
    return src(d, &in->opd[3], PTX_T_PRED, &o->c);
}

/* ---- control and synchronisation ---- */

static int dec_bra(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_BRA;
    int l = in->opd[0].u.label;
    if (l < 0 || (size_t)l >= d->f->nlabels || d->label_pc[l] == UINT32_MAX)
        return dec_err(d, "branch to a label that is never placed");
    o->target = d->label_pc[l];
    return PT_OK;
}

static int dec_exit(dec *d, const ptx_ins *in, emu_ins *o)
{
    (void)d;
    o->h = in->op == PTX_OP_TRAP ? EMU_H_TRAP : EMU_H_EXIT;
    return PT_OK;
}

static int dec_bar(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_BAR;
    if (in->op == PTX_OP_BAR || has(in, PTX_M_ALIGNED))
        o->flags |= EMU_IF_ALIGNED;
    if (has(in, PTX_M_ARRIVE))
        o->flags |= EMU_IF_ARRIVE;
    int rc = src(d, &in->opd[0], PTX_T_U32, &o->a);
    if (rc)
        return rc;
    if (in->nopd > 1) {
        o->flags |= EMU_IF_HAS_C;
        return src(d, &in->opd[1], PTX_T_U32, &o->b);
    }
    return PT_OK; /* bar.arrive has its thread count: ptx_check_ins */
}

static int dec_bar_warp(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_BAR_WARP;
    return src(d, &in->opd[0], PTX_T_U32, &o->a);
}

static int dec_nop(dec *d, const ptx_ins *in, emu_ins *o)
{
    (void)d;
    (void)in;
    o->h = EMU_H_NOP;
    return PT_OK;
}

/* ---- warp collectives ---- */

static int dec_shfl(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_SHFL;
    o->sub = has(in, PTX_M_UP) ? EMU_SHFL_UP : has(in, PTX_M_DOWN) ? EMU_SHFL_DOWN
             : has(in, PTX_M_BFLY) ? EMU_SHFL_BFLY : EMU_SHFL_IDX;
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc || (rc = src(d, &in->opd[1], PTX_T_B32, &o->a)))
        return rc;
    if ((rc = src(d, &in->opd[2], PTX_T_U32, &o->b)) || (rc = src(d, &in->opd[3], PTX_T_U32, &o->c)))
        return rc;
    return src(d, &in->opd[4], PTX_T_U32, &o->e);
}

static int dec_vote(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_VOTE;
    o->sub = has(in, PTX_M_BALLOT) ? EMU_VOTE_BALLOT : has(in, PTX_M_ALL) ? EMU_VOTE_ALL
             : has(in, PTX_M_ANY) ? EMU_VOTE_ANY : EMU_VOTE_UNI;
    o->cneg = in->opd[1].neg;
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc || (rc = src(d, &in->opd[1], PTX_T_PRED, &o->a)))
        return rc;
    return src(d, &in->opd[2], PTX_T_U32, &o->b);
}

static int dec_activemask(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_ACTIVEMASK;
    return dst(d, &in->opd[0], &o->d);
}

static int aop_of(const ptx_ins *in)
{
    static const uint8_t tab[][2] = {
        {PTX_M_ADD, EMU_AOP_ADD}, {PTX_M_MIN, EMU_AOP_MIN},   {PTX_M_MAX, EMU_AOP_MAX},
        {PTX_M_AND, EMU_AOP_AND}, {PTX_M_OR, EMU_AOP_OR},     {PTX_M_XOR, EMU_AOP_XOR},
        {PTX_M_CAS, EMU_AOP_CAS}, {PTX_M_EXCH, EMU_AOP_EXCH}, {PTX_M_INC, EMU_AOP_INC},
        {PTX_M_DEC, EMU_AOP_DEC},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (has(in, tab[i][0]))
            return tab[i][1];
    return -1;
}

static int dec_redux(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_REDUX;
    int op = aop_of(in); /* one of add/min/max/and/or/xor: ptx_check_ins */
    o->sub2 = (uint8_t)op;
    int rc = dst(d, &in->opd[0], &o->d);
    if (rc || (rc = src(d, &in->opd[1], o->ty, &o->a)))
        return rc;
    return src(d, &in->opd[2], PTX_T_U32, &o->b);
}

static int dec_atom(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_ATOM;
    o->sub = (uint8_t)space_of(in);
    if (o->sub == EMU_SP_CLUSTER)
        d->k->async = true;
    int op = aop_of(in); /* exactly one operation: ptx_check_ins */
    o->sub2 = (uint8_t)op;
    o->sz = (uint8_t)(o->bits / 8);
    o->n = 1;
    if (has(in, PTX_M_NOFTZ))
        o->flags |= EMU_IF_NOFTZ;
    int i = 0, rc;
    if (in->op == PTX_OP_ATOM) {
        if ((rc = dst(d, &in->opd[0], &o->d)))
            return rc;
        i = 1;
    } else
        o->d = EMU_SLOT_SINK;
    if ((rc = addr(d, &in->opd[i], o->sub, &o->a, &o->off)))
        return rc;
    if ((rc = src(d, &in->opd[i + 1], o->ty, &o->b)))
        return rc;
    if (op == EMU_AOP_CAS) /* with its second value: ptx_check_ins */
        return src(d, &in->opd[i + 2], o->ty, &o->c);
    return PT_OK;
}

/* ---- asynchronous copies and tensor cores ---- */

static int dec_cp_async(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_CP_ASYNC;
    int64_t soff;
    int rc = addr(d, &in->opd[0], EMU_SP_SHARED, &o->a, &o->off);
    if (rc || (rc = addr(d, &in->opd[1], EMU_SP_GLOBAL, &o->b, &soff)))
        return rc;
    o->aux = (uint64_t)soff;
    o->sz = (uint8_t)in->opd[2].u.imm; /* 4, 8 or 16 (.cg: 16): ptx_check_ins */
    o->n = 1;
    if (in->nopd > 3) {
        const ptx_opd *x = &in->opd[3];
        o->flags |= EMU_IF_HAS_C;
        if (x->kind == PTX_O_REG && d->f->banks[PTX_REG_BANK(x->u.reg)].type == PTX_T_PRED) {
            o->flags |= EMU_IF_IGNSRC; /* cp.async ... 16, %p: ignore-src */
            o->cneg = x->neg;
            return reg_slot(d, x->u.reg, &o->c);
        }
        return src(d, x, PTX_T_U32, &o->c);
    }
    return PT_OK;
}

static int dec_cp_commit(dec *d, const ptx_ins *in, emu_ins *o)
{
    (void)d;
    (void)in;
    o->h = EMU_H_CP_COMMIT;
    return PT_OK;
}

static int dec_cp_wait(dec *d, const ptx_ins *in, emu_ins *o)
{
    (void)d;
    o->h = EMU_H_CP_WAIT;
    if (in->op == PTX_OP_CP_ASYNC_WAIT_ALL)
        o->sub = 1;
    else
        o->aux = (uint64_t)in->opd[0].u.imm;
    return PT_OK;
}

static int dec_ldmatrix(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_LDMATRIX;
    o->flags |= EMU_IF_ALIGNED;
    o->n = has(in, PTX_M_X4) ? 4 : has(in, PTX_M_X2) ? 2 : 1;
    if (has(in, PTX_M_TRANS))
        o->flags |= EMU_IF_TRANS;
    o->sub = (uint8_t)space_of(in);
    o->sz = 16;
    int rc = addr(d, &in->opd[1], o->sub, &o->a, &o->off);
    return rc ? rc : vec(d, &in->opd[0], true, 0, &o->d); /* o->n registers: ptx_check_ins */
}

/* mma: the type tuple, shape, .row.col and fragment sizes are the ISA
 * table's (ptx_check_ins); what is left here is what the emulator runs. */
static int dec_mma(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_MMA;
    o->flags |= EMU_IF_ALIGNED;
    int dt = in->types[0], bt = in->types[2], ct = in->types[3];
    o->sub2 = has(in, PTX_M_M16N8K8) ? EMU_MMA_K8 : has(in, PTX_M_M16N8K16) ? EMU_MMA_K16
                                                                         : EMU_MMA_K32;
    if (has(in, PTX_M_SATFINITE))
        o->flags |= EMU_IF_SATFINITE;
    o->aux = (uint64_t)bt | (uint64_t)ct << 8;
    if (dt != ct)
        return dec_err(d, "mma with different accumulator types (.f32 and .f16) is not emulated");
    int rc = vec(d, &in->opd[0], true, 0, &o->d);
    if (rc || (rc = vec(d, &in->opd[1], false, PTX_T_B32, &o->a)))
        return rc;
    if ((rc = vec(d, &in->opd[2], false, PTX_T_B32, &o->b)))
        return rc;
    return vec(d, &in->opd[3], false, ct == PTX_T_F16 ? PTX_T_B32 : ct, &o->c);
}

/* ---- Hopper warp and warpgroup ops: EMU_H_WG, executed by wgmma.c ---- */

static int dec_wg_sync(dec *d, const ptx_ins *in, emu_ins *o)
{
    (void)d;
    o->h = EMU_H_WG;
    o->flags |= EMU_IF_ALIGNED;
    o->sub = in->op == PTX_OP_WGMMA_FENCE ? EMU_WG_FENCE : in->op == PTX_OP_WGMMA_COMMIT ? EMU_WG_COMMIT
                                                                                      : EMU_WG_WAIT;
    if (o->sub == EMU_WG_WAIT)
        o->aux = (uint64_t)in->opd[0].u.imm;
    return PT_OK;
}

/* wgmma.mma_async (shape, types and immediates: ptx_check_ins). d: the D
 * registers (n of them), a: descA's slot (SS) or the 4 A registers (RS), b:
 * descB's slot, c: scale-d (cneg: !%p); off: N, sz: K, aux: the B type;
 * sub2: EMU_WGMMA_* bits. */
static int dec_wgmma(dec *d, const ptx_ins *in, emu_ins *o)
{
    if (in->types[1] == PTX_T_B1)
        return dec_err(d, "single-bit wgmma (.and.popc) is not emulated");
    bool rs = in->op == PTX_OP_WGMMA_RS;
    o->h = EMU_H_WG;
    o->sub = EMU_WG_MMA;
    o->flags |= EMU_IF_ALIGNED;
    if (has(in, PTX_M_SATFINITE))
        o->flags |= EMU_IF_SATFINITE;
    o->aux = (uint64_t)in->types[2];
    o->off = (int64_t)in->shape.n;
    o->sz = (uint8_t)in->shape.k;
    uint8_t s2 = rs ? EMU_WGMMA_RS : 0;
    int n = in->nopd;
    if (n > 4 && in->opd[4].u.imm < 0)
        s2 |= EMU_WGMMA_NEG_A;
    if (n > 5 && in->opd[5].u.imm < 0)
        s2 |= EMU_WGMMA_NEG_B;
    if (!rs && n > 6 && in->opd[6].u.imm)
        s2 |= EMU_WGMMA_TRANS_A;
    if (n > (rs ? 6 : 7) && in->opd[rs ? 6 : 7].u.imm)
        s2 |= EMU_WGMMA_TRANS_B;
    o->sub2 = s2;
    o->n = (uint8_t)in->opd[0].u.vec.n; /* N/2 or N/4 registers: ptx_check_ins */
    int rc = vec(d, &in->opd[0], true, 0, &o->d);
    if (rc || (rc = rs ? vec(d, &in->opd[1], false, PTX_T_B32, &o->a) : src(d, &in->opd[1], PTX_T_B64, &o->a)))
        return rc;
    if ((rc = src(d, &in->opd[2], PTX_T_B64, &o->b)))
        return rc;
    o->cneg = in->opd[3].neg;
    return src(d, &in->opd[3], PTX_T_PRED, &o->c);
}

static int dec_stmatrix(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_WG;
    o->sub = EMU_WG_STMATRIX;
    o->flags |= EMU_IF_ALIGNED;
    o->n = has(in, PTX_M_X4) ? 4 : has(in, PTX_M_X2) ? 2 : 1;
    if (has(in, PTX_M_TRANS))
        o->flags |= EMU_IF_TRANS;
    o->sub2 = (uint8_t)space_of(in);
    o->sz = 16;
    int rc = addr(d, &in->opd[0], o->sub2, &o->a, &o->off);
    return rc ? rc : vec(d, &in->opd[1], false, PTX_T_B32, &o->b); /* o->n registers: ptx_check_ins */
}

/* elect.sync d|p, membermask: d (or the sink) in d, p in c, the mask in a */
static int dec_elect(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_WG;
    o->sub = EMU_WG_ELECT;
    const ptx_opd *pr = &in->opd[0];
    int rc = PT_OK;
    o->d = EMU_SLOT_SINK;
    if (pr->u.pair.d.id && (rc = reg_slot(d, pr->u.pair.d, &o->d)))
        return rc;
    if ((rc = reg_slot(d, pr->u.pair.p, &o->c)))
        return rc;
    return src(d, &in->opd[1], PTX_T_U32, &o->a);
}

static int dec_setmaxnreg(dec *d, const ptx_ins *in, emu_ins *o)
{
    (void)d;
    o->h = EMU_H_WG;
    o->sub = EMU_WG_SETMAXNREG;
    o->flags |= EMU_IF_ALIGNED;
    o->sub2 = has(in, PTX_M_INC) ? 1 : 0;
    o->aux = (uint64_t)in->opd[0].u.imm; /* a multiple of 8 in [24, 256]: ptx_check_ins */
    return PT_OK;
}

/* ---- Hopper's asynchronous part (mbarrier.c, async.c) ---- */

/* The state space an mbarrier or async-copy address names: shared (window
 * offsets; .shared, .shared::cta, .shared::cluster) or generic. */
static int mb_space(const ptx_ins *in)
{
    return has(in, PTX_M_SHARED) || has(in, PTX_M_SHARED_CTA) || has(in, PTX_M_SHARED_CLUSTER)
               ? EMU_SP_SHARED
               : EMU_SP_GENERIC;
}

static int dec_mbar(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_MBAR;
    d->k->async = true;
    o->sub2 = (uint8_t)mb_space(in);
    o->d = o->b = o->c = EMU_SLOT_ZERO;
    int rc, ai = 0; /* index of the address operand */
    switch (in->op) {
    case PTX_OP_MBAR_INIT: o->sub = EMU_MB_INIT; break;
    case PTX_OP_MBAR_INVAL: o->sub = EMU_MB_INVAL; break;
    case PTX_OP_MBAR_ARRIVE:
    case PTX_OP_MBAR_ARRIVE_TX:
    case PTX_OP_MBAR_DROP:
    case PTX_OP_MBAR_DROP_TX:
        o->sub = EMU_MB_ARRIVE;
        ai = 1;
        if (in->op == PTX_OP_MBAR_DROP || in->op == PTX_OP_MBAR_DROP_TX)
            o->aux |= EMU_MBF_DROP;
        if (in->op == PTX_OP_MBAR_ARRIVE_TX || in->op == PTX_OP_MBAR_DROP_TX) {
            o->aux |= EMU_MBF_TX;
            if ((rc = src(d, &in->opd[2], PTX_T_U32, &o->b)))
                return rc;
        } else if (in->nopd > 2) {
            o->aux |= EMU_MBF_COUNT;
            if ((rc = src(d, &in->opd[2], PTX_T_U32, &o->c)))
                return rc;
        }
        if ((rc = dst(d, &in->opd[0], &o->d)))
            return rc;
        break;
    case PTX_OP_MBAR_EXPECT_TX: o->sub = EMU_MB_EXPECT_TX; break;
    case PTX_OP_MBAR_COMPLETE_TX: o->sub = EMU_MB_COMPLETE_TX; break;
    case PTX_OP_MBAR_TRY_WAIT:
    case PTX_OP_MBAR_TRY_WAIT_P:
    case PTX_OP_MBAR_TEST_WAIT:
    case PTX_OP_MBAR_TEST_WAIT_P: {
        bool par = in->op == PTX_OP_MBAR_TRY_WAIT_P || in->op == PTX_OP_MBAR_TEST_WAIT_P;
        o->sub = in->op == PTX_OP_MBAR_TRY_WAIT || in->op == PTX_OP_MBAR_TRY_WAIT_P
                     ? EMU_MB_TRY_WAIT
                     : EMU_MB_TEST_WAIT;
        if (par)
            o->aux |= EMU_MBF_PARITY;
        ai = 1;
        if ((rc = dst(d, &in->opd[0], &o->d)) ||
            (rc = src(d, &in->opd[2], par ? PTX_T_U32 : PTX_T_U64, &o->b)))
            return rc;
        break; /* a suspend-time hint (operand 3) changes nothing */
    }
    case PTX_OP_MBAR_PENDING:
        o->sub = EMU_MB_PENDING;
        o->a = EMU_SLOT_ZERO;
        if ((rc = dst(d, &in->opd[0], &o->d)))
            return rc;
        return src(d, &in->opd[1], PTX_T_U64, &o->b);
    case PTX_OP_CP_ASYNC_MBAR:
        o->sub = EMU_MB_CP_ARRIVE;
        if (has(in, PTX_M_NOINC))
            o->aux |= EMU_MBF_NOINC;
        break;
    default: return dec_err(d, "not an mbarrier operation");
    }
    if ((in->op == PTX_OP_MBAR_INIT || in->op == PTX_OP_MBAR_EXPECT_TX ||
         in->op == PTX_OP_MBAR_COMPLETE_TX) &&
        (rc = src(d, &in->opd[1], PTX_T_U32, &o->b)))
        return rc;
    return addr(d, &in->opd[ai], o->sub2, &o->a, &o->off);
}

/* The async operand block in vpool (async.c's V_*): three (base, offset)
 * address pairs, size, multicast mask, tensor map, then the coordinates. */
static uint32_t ablock(dec *d, emu_ins *o, int ncoord)
{
    size_t n = 9 + (size_t)ncoord;
    d->vpool = grow(d->vpool, sizeof *d->vpool, &d->cap_vpool, d->nvpool + n);
    o->d = (uint32_t)d->nvpool;
    for (size_t i = 0; i < n; i++)
        d->vpool[d->nvpool++] = EMU_SLOT_ZERO;
    return o->d;
}

static int aaddr(dec *d, uint32_t blk, int pair, const ptx_opd *op, int space)
{
    uint32_t base;
    int64_t off;
    int rc = addr(d, op, space, &base, &off);
    if (rc)
        return rc;
    if (op->u.addr.sym && space == EMU_SP_PARAM)
        off += (int64_t)EMU_PARAM_BASE;
    uint32_t ks = konst(d, (uint64_t)off);
    d->vpool[blk + 2 * (uint32_t)pair] = base;
    d->vpool[blk + 2 * (uint32_t)pair + 1] = ks;
    return PT_OK;
}

static int aslot(dec *d, uint32_t blk, int i, const ptx_opd *op, int t)
{
    uint32_t s;
    int rc = src(d, op, t, &s);
    if (!rc)
        d->vpool[blk + (uint32_t)i] = s;
    return rc;
}

/* [tmap, {c0, ...}]: the map into V_MAP (8), coordinates from V_COORD (9) */
static int atensor(dec *d, emu_ins *o, const ptx_opd *t, uint32_t *blk)
{
    if (t->kind != PTX_O_TENSOR || t->u.vec.n < 2)
        return dec_err(d, "expected a tensor operand");
    int nc = t->u.vec.n - 1;
    o->n = (uint8_t)nc;
    *blk = ablock(d, o, nc);
    int rc = aslot(d, *blk, 8, &t->u.vec.e[0], PTX_T_U64);
    for (int i = 0; i < nc && !rc; i++)
        rc = aslot(d, *blk, 9 + i, &t->u.vec.e[1 + i], PTX_T_S32);
    return rc;
}

static int dec_async(dec *d, const ptx_ins *in, emu_ins *o)
{
    o->h = EMU_H_ASYNC;
    d->k->async = true;
    uint32_t blk;
    int rc;
    switch (in->op) {
    case PTX_OP_TMA_LD:
        o->sub = EMU_AS_TMA_LD;
        if ((rc = atensor(d, o, &in->opd[1], &blk)) ||
            (rc = aaddr(d, blk, 0, &in->opd[0], EMU_SP_SHARED)) ||
            (rc = aaddr(d, blk, 2, &in->opd[2], EMU_SP_SHARED)))
            return rc;
        if (has(in, PTX_M_MULTICAST)) { /* the mask is the first added operand */
            o->flags |= EMU_IF_HAS_C;
            return aslot(d, blk, 7, &in->opd[3], PTX_T_U16);
        }
        return PT_OK;
    case PTX_OP_TMA_ST:
    case PTX_OP_TMA_RED:
        o->sub = in->op == PTX_OP_TMA_ST ? EMU_AS_TMA_ST : EMU_AS_TMA_RED;
        if (in->op == PTX_OP_TMA_RED) {
            int op = aop_of(in);
            if (op < 0)
                return dec_err(d, "reduce store without an operation");
            o->ty2 = (uint8_t)op;
        }
        if ((rc = atensor(d, o, &in->opd[0], &blk)))
            return rc;
        return aaddr(d, blk, 1, &in->opd[1], EMU_SP_SHARED);
    case PTX_OP_BULK_G2S: {
        bool s2s = !has(in, PTX_M_GLOBAL);
        o->sub = s2s ? EMU_AS_BULK_S2S : EMU_AS_BULK_G2S;
        blk = ablock(d, o, 0);
        if ((rc = aaddr(d, blk, 0, &in->opd[0], EMU_SP_SHARED)) ||
            (rc = aaddr(d, blk, 1, &in->opd[1], s2s ? EMU_SP_SHARED : EMU_SP_GLOBAL)) ||
            (rc = aslot(d, blk, 6, &in->opd[2], PTX_T_U32)) ||
            (rc = aaddr(d, blk, 2, &in->opd[3], EMU_SP_SHARED)))
            return rc;
        if (has(in, PTX_M_MULTICAST)) {
            o->flags |= EMU_IF_HAS_C;
            return aslot(d, blk, 7, &in->opd[4], PTX_T_U16);
        }
        return PT_OK;
    }
    case PTX_OP_BULK_S2G:
        o->sub = EMU_AS_BULK_S2G;
        blk = ablock(d, o, 0);
        if ((rc = aaddr(d, blk, 0, &in->opd[0], EMU_SP_GLOBAL)) ||
            (rc = aaddr(d, blk, 1, &in->opd[1], EMU_SP_SHARED)))
            return rc;
        return aslot(d, blk, 6, &in->opd[2], PTX_T_U32);
    case PTX_OP_BULK_COMMIT: o->sub = EMU_AS_COMMIT; return PT_OK;
    case PTX_OP_BULK_WAIT:
        o->sub = EMU_AS_WAIT;
        o->aux = (uint64_t)in->opd[0].u.imm;
        return PT_OK;
    case PTX_OP_PREFETCH: {
        o->sub = EMU_AS_PREFETCH_TMAP;
        blk = ablock(d, o, 0);
        const ptx_opd *a = &in->opd[0];
        int sp = has(in, PTX_M_PARAM) ? EMU_SP_PARAM : EMU_SP_GENERIC;
        if (sp == EMU_SP_GENERIC && a->kind == PTX_O_ADDR && a->u.addr.sym) {
            int ssp;
            uint64_t sa;
            if ((rc = sym_addr(d, a->u.addr.sym, &ssp, &sa)))
                return rc;
            if (ssp == EMU_SP_PARAM)
                sp = EMU_SP_PARAM;
        }
        return aaddr(d, blk, 0, a, sp);
    }
    case PTX_OP_FENCE_PROXY_ASYNC: o->sub = EMU_AS_FENCE_PROXY; return PT_OK;
    case PTX_OP_FENCE_MBAR_INIT:
    case PTX_OP_TMA_PREFETCH:
    case PTX_OP_BULK_PREFETCH: o->sub = EMU_AS_NOP; return PT_OK;
    case PTX_OP_BAR_CLUSTER_ARRIVE:
    case PTX_OP_BAR_CLUSTER_WAIT:
        o->sub = EMU_AS_BAR_CLUSTER;
        o->aux = (in->op == PTX_OP_BAR_CLUSTER_WAIT ? 1u : 0u) | (has(in, PTX_M_RELAXED) ? 2u : 0u);
        return PT_OK;
    case PTX_OP_MAPA:
        o->sub = EMU_AS_MAPA;
        if ((rc = dst(d, &in->opd[0], &o->d)) || (rc = src(d, &in->opd[1], o->ty, &o->a)))
            return rc;
        return src(d, &in->opd[2], PTX_T_U32, &o->b);
    case PTX_OP_GETCTARANK:
        o->sub = EMU_AS_GETCTARANK;
        if ((rc = dst(d, &in->opd[0], &o->d)))
            return rc;
        return src(d, &in->opd[1], o->ty, &o->a);
    default: return dec_err(d, "not an async operation");
    }
}

/* The dispatch table: one row per emulated opcode of isa.def. */
static const dec_fn dec_tab[PTX_NOPS] = {
    [PTX_OP_MOV] = dec_mov,
    [PTX_OP_LD] = dec_ldst,
    [PTX_OP_ST] = dec_ldst,
    [PTX_OP_CVTA] = dec_cvta,
    [PTX_OP_CVT] = dec_cvt,
    [PTX_OP_ADD] = dec_arith,
    [PTX_OP_SUB] = dec_arith,
    [PTX_OP_MUL] = dec_arith,
    [PTX_OP_MAD] = dec_arith,
    [PTX_OP_FMA] = dec_arith,
    [PTX_OP_DIV] = dec_arith,
    [PTX_OP_REM] = dec_arith,
    [PTX_OP_MIN] = dec_arith,
    [PTX_OP_MAX] = dec_arith,
    [PTX_OP_ABS] = dec_arith,
    [PTX_OP_NEG] = dec_arith,
    [PTX_OP_COPYSIGN] = dec_arith,
    [PTX_OP_RCP] = dec_funary,
    [PTX_OP_SQRT] = dec_funary,
    [PTX_OP_RSQRT] = dec_funary,
    [PTX_OP_EX2] = dec_funary,
    [PTX_OP_LG2] = dec_funary,
    [PTX_OP_SIN] = dec_funary,
    [PTX_OP_COS] = dec_funary,
    [PTX_OP_TANH] = dec_funary,
    [PTX_OP_AND] = dec_bits,
    [PTX_OP_OR] = dec_bits,
    [PTX_OP_XOR] = dec_bits,
    [PTX_OP_NOT] = dec_bits,
    [PTX_OP_SHL] = dec_bits,
    [PTX_OP_SHR] = dec_bits,
    [PTX_OP_LOP3] = dec_bits,
    [PTX_OP_PRMT] = dec_bits,
    [PTX_OP_BFE] = dec_bits,
    [PTX_OP_BFI] = dec_bits,
    [PTX_OP_POPC] = dec_bits,
    [PTX_OP_CLZ] = dec_bits,
    [PTX_OP_BREV] = dec_bits,
    [PTX_OP_SETP] = dec_setp,
    [PTX_OP_SELP] = dec_selp,
    [PTX_OP_BRA] = dec_bra,
    [PTX_OP_RET] = dec_exit,
    [PTX_OP_EXIT] = dec_exit,
    [PTX_OP_TRAP] = dec_exit,
    [PTX_OP_BAR] = dec_bar,
    [PTX_OP_BARRIER] = dec_bar,
    [PTX_OP_BAR_WARP] = dec_bar_warp,
    [PTX_OP_MEMBAR] = dec_nop,
    [PTX_OP_FENCE] = dec_nop,
    [PTX_OP_SHFL] = dec_shfl,
    [PTX_OP_VOTE] = dec_vote,
    [PTX_OP_ACTIVEMASK] = dec_activemask,
    [PTX_OP_REDUX] = dec_redux,
    [PTX_OP_ATOM] = dec_atom,
    [PTX_OP_RED] = dec_atom,
    [PTX_OP_CP_ASYNC] = dec_cp_async,
    [PTX_OP_CP_ASYNC_COMMIT] = dec_cp_commit,
    [PTX_OP_CP_ASYNC_WAIT] = dec_cp_wait,
    [PTX_OP_CP_ASYNC_WAIT_ALL] = dec_cp_wait,
    [PTX_OP_LDMATRIX] = dec_ldmatrix,
    [PTX_OP_MMA] = dec_mma,
    [PTX_OP_MBAR_INIT] = dec_mbar,
    [PTX_OP_MBAR_INVAL] = dec_mbar,
    [PTX_OP_MBAR_ARRIVE] = dec_mbar,
    [PTX_OP_MBAR_ARRIVE_TX] = dec_mbar,
    [PTX_OP_MBAR_DROP] = dec_mbar,
    [PTX_OP_MBAR_DROP_TX] = dec_mbar,
    [PTX_OP_MBAR_EXPECT_TX] = dec_mbar,
    [PTX_OP_MBAR_COMPLETE_TX] = dec_mbar,
    [PTX_OP_MBAR_TRY_WAIT] = dec_mbar,
    [PTX_OP_MBAR_TRY_WAIT_P] = dec_mbar,
    [PTX_OP_MBAR_TEST_WAIT] = dec_mbar,
    [PTX_OP_MBAR_TEST_WAIT_P] = dec_mbar,
    [PTX_OP_MBAR_PENDING] = dec_mbar,
    [PTX_OP_CP_ASYNC_MBAR] = dec_mbar,
    [PTX_OP_TMA_LD] = dec_async,
    [PTX_OP_TMA_ST] = dec_async,
    [PTX_OP_TMA_RED] = dec_async,
    [PTX_OP_TMA_PREFETCH] = dec_async,
    [PTX_OP_BULK_G2S] = dec_async,
    [PTX_OP_BULK_S2G] = dec_async,
    [PTX_OP_BULK_PREFETCH] = dec_async,
    [PTX_OP_BULK_COMMIT] = dec_async,
    [PTX_OP_BULK_WAIT] = dec_async,
    [PTX_OP_PREFETCH] = dec_async,
    [PTX_OP_FENCE_PROXY_ASYNC] = dec_async,
    [PTX_OP_FENCE_MBAR_INIT] = dec_async,
    [PTX_OP_MAPA] = dec_async,
    [PTX_OP_GETCTARANK] = dec_async,
    [PTX_OP_BAR_CLUSTER_ARRIVE] = dec_async,
    [PTX_OP_BAR_CLUSTER_WAIT] = dec_async,
    [PTX_OP_WGMMA_FENCE] = dec_wg_sync,
    [PTX_OP_WGMMA_COMMIT] = dec_wg_sync,
    [PTX_OP_WGMMA_WAIT] = dec_wg_sync,
    [PTX_OP_WGMMA_SS] = dec_wgmma,
    [PTX_OP_WGMMA_RS] = dec_wgmma,
    [PTX_OP_STMATRIX] = dec_stmatrix,
    [PTX_OP_ELECT] = dec_elect,
    [PTX_OP_SETMAXNREG] = dec_setmaxnreg,
};

static uint32_t align_up(uint32_t v, uint32_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

/* PT_ENOMEM when out of memory (the kernel's arrays are freed with it). */
static int layout(dec *d)
{
    emu_kernel *k = d->k;
    ptx_fn *f = d->f;
    /* parameters, in order, naturally aligned (or as .align says) */
    k->nparams = (uint32_t)f->nparams;
    k->param_off = calloc(f->nparams + 1, sizeof *k->param_off);
    k->param_size = calloc(f->nparams + 1, sizeof *k->param_size);
    if (!k->param_off || !k->param_size)
        return PT_ENOMEM;
    uint32_t off = 0;
    for (size_t i = 0; i < f->nparams; i++) {
        const ptx_param *p = &f->params[i];
        uint32_t sz = p->array ? (uint32_t)p->array : (uint32_t)(ptx_type_bits(p->type) / 8);
        uint32_t al = p->align ? (uint32_t)p->align : p->array ? 1 : sz;
        off = align_up(off, al);
        k->param_off[i] = off;
        k->param_size[i] = sz;
        off += sz;
    }
    k->param_bytes = off;
    /* shared: static variables in declaration order, then the dynamic array */
    size_t nsh = f->nshared + f->mod->nshared;
    k->shvars = calloc(nsh + 1, sizeof *k->shvars);
    if (!k->shvars)
        return PT_ENOMEM;
    off = k->smem_base = emu__smem_base(k->ctx, d->m); /* the arch's reserved region + shift */
    uint32_t dyn_align = 16;
    /* a redzone after each variable makes an overflow into its neighbour an
     * out-of-bounds access (ptxas packs them; no kernel may rely on that) */
    for (size_t i = 0; i < f->nshared; i++) {
        const ptx_shared *s = &f->shared[i];
        off = align_up(off, s->align > 0 ? (uint32_t)s->align : 1);
        k->shvars[k->nshvars++] = (emu_shvar){s->name, off, (uint32_t)s->bytes, false};
        off += (uint32_t)s->bytes + EMU_SHARED_REDZONE;
    }
    k->smem_static = off;
    for (size_t i = 0; i < f->mod->nshared; i++)
        if ((uint32_t)f->mod->shared[i].align > dyn_align)
            dyn_align = (uint32_t)f->mod->shared[i].align;
    k->dyn_align = dyn_align;
    k->dyn_off = align_up(off, dyn_align);
    for (size_t i = 0; i < f->mod->nshared; i++)
        k->shvars[k->nshvars++] = (emu_shvar){f->mod->shared[i].name, k->dyn_off, 0, true};
    return PT_OK;
}

int emu__decode(emu_kernel *k, ptx_module *m, ptx_fn *f, pt_err *e)
{
    dec d = {.k = k, .m = m, .f = f, .e = e};
    k->fn = f;
    k->name = f->name;
    memcpy(k->maxntid, f->maxntid, sizeof k->maxntid);
    memcpy(k->reqntid, f->reqntid, sizeof k->reqntid);
    if (layout(&d))
        return pt_errf(e, PT_ENOMEM, "out of memory (decoding %s)", f->name);
    d.bank_base = calloc(f->nbanks + 1, sizeof *d.bank_base);
    d.label_pc = malloc((f->nlabels + 1) * sizeof *d.label_pc);
    if (!d.bank_base || !d.label_pc) {
        free(d.bank_base);
        free(d.label_pc);
        return pt_errf(e, PT_ENOMEM, "out of memory (decoding %s)", f->name);
    }
    uint32_t slot = EMU_SLOT_SREG + PTX_NSREGS;
    k->reg_base = slot;
    for (size_t b = 0; b < f->nbanks; b++) {
        d.bank_base[b] = slot;
        slot += f->banks[b].count;
    }
    k->const_base = slot;
    for (size_t i = 0; i <= f->nlabels; i++)
        d.label_pc[i] = UINT32_MAX;
    uint32_t pc = 0;
    for (size_t i = 0; i < f->nbody; i++) {
        if (f->body[i].op == PTX_OP_LABEL) {
            int l = f->body[i].opd[0].u.label;
            if (l >= 0 && (size_t)l < f->nlabels)
                d.label_pc[l] = pc;
        } else if (f->body[i].op != PTX_OP_PRAGMA) /* .pragma "nounroll": no code */
            pc++;
    }
    k->ncode = pc + 1; /* + the implicit exit at the end */
    k->code = calloc(k->ncode, sizeof *k->code);
    if (!k->code) {
        free(d.bank_base);
        free(d.label_pc);
        return pt_errf(e, PT_ENOMEM, "out of memory (decoding %s)", f->name);
    }
    int rc = PT_OK;
    pc = 0;
    for (size_t i = 0; i < f->nbody && !rc; i++) {
        const ptx_ins *in = &f->body[i];
        if (in->op == PTX_OP_LABEL || in->op == PTX_OP_PRAGMA)
            continue;
        d.cur = in;
        emu_ins *o = &k->code[pc++];
        o->op = in->op;
        o->line = in->line;
        set_type(o, in);
        o->dbits = o->bits;
        /* the ISA table decides what is legal (the builder and parser ask
         * the same question); the decoders only refuse what is not emulated */
        pt_err ce;
        pt_err_clear(&ce);
        if (ptx_check_ins(f, in, &ce)) {
            rc = pt_errf(e, ce.code, "emulator: %s (kernel %s, line %d)", ce.msg, f->name, in->line);
            break;
        }
        dec_fn fn = in->op < PTX_NOPS ? dec_tab[in->op] : NULL;
        if (!fn) {
            rc = dec_err(&d, "instruction not emulated");
            break;
        }
        if (in->guard.id) {
            if ((rc = reg_slot(&d, in->guard, &o->guard)))
                break;
            o->gneg = in->guard_neg;
        }
        rc = fn(&d, in, o);
    }
    k->code[k->ncode - 1] = (emu_ins){.h = EMU_H_EXIT, .op = PTX_OP_EXIT,
                                      .line = f->nbody ? f->body[f->nbody - 1].line : 0};
    k->consts = d.consts;
    k->nconst = (uint32_t)d.nconst;
    k->nslots = k->const_base + k->nconst;
    k->vpool = d.vpool;
    k->nvpool = (uint32_t)d.nvpool;
    free(d.bank_base);
    free(d.label_pc);
    if (!rc) /* wgmma.c: register marks and warpgroup bookkeeping */
        rc = emu__wg_prepare(k, f, e);
    return rc;
}
