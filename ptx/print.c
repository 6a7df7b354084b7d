/* The printer: the only code that writes PTX text. Output is a pure
 * function of the module, so the text (and its hash) identifies a kernel. */
#include "ptx/ir.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ptx_reg_name(const ptx_fn *f, ptx_reg r, char *buf, size_t n)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= f->nbanks) {
        snprintf(buf, n, "%%?%u", r.id);
        return buf;
    }
    const ptx_bank *bk = &f->banks[b];
    if (bk->scalar)
        snprintf(buf, n, "%s", bk->prefix);
    else
        snprintf(buf, n, "%s%u", bk->prefix, PTX_REG_IDX(r));
    return buf;
}

/* The instruction printer writes through a cursor into space reserved
 * once per instruction (printf and per-token appends dominated emission
 * profiles). Names from the ISA table are copied from padded rows with one
 * fixed-size copy and the cursor advanced by their length; register
 * prefixes likewise from a per-entry table (print_ctx). So a write may
 * store up to PAD bytes past its end: the reservation has that slack
 * (PT_SLACK), and later writes or the final NUL cover the bytes. opd_room
 * bounds what an operand can print. */
enum { PAD = 32, PT_SLACK = PAD, BPAD = 16 };

#define PADCHK(text) (1 / (int)(sizeof(text) <= PAD)) /* 1 / 0: a name too long for its row */
static const char op_pad[PTX_NOPS][PAD] = {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) text,
#include "ptx/isa.def"
};
static const uint8_t op_len[PTX_NOPS] = {
#define PTX_OP(id, text, opnds, typing, types, mods, sm, ver, arch) (uint8_t)(PADCHK(text) * (sizeof(text) - 1)),
#include "ptx/isa.def"
};
static const char mod_pad[PTX_NMODS][PAD] = {
#define PTX_MOD(id, text) text,
#include "ptx/isa.def"
};
static const uint8_t mod_len[PTX_NMODS] = {
#define PTX_MOD(id, text) (uint8_t)(PADCHK(text) * (sizeof(text) - 1)),
#include "ptx/isa.def"
};
static const char type_pad[PTX_NTYPES][PAD] = {
#define PTX_TYPE(id, text, bits, cls) text,
#include "ptx/isa.def"
};
static const uint8_t type_len[PTX_NTYPES] = {
#define PTX_TYPE(id, text, bits, cls) (uint8_t)(PADCHK(text) * (sizeof(text) - 1)),
#include "ptx/isa.def"
};
static const char sreg_pad[PTX_NSREGS][PAD] = {
#define PTX_SREG(id, text, bits, sm, ver) text,
#include "ptx/isa.def"
};
static const uint8_t sreg_len[PTX_NSREGS] = {
#define PTX_SREG(id, text, bits, sm, ver) (uint8_t)(PADCHK(text) * (sizeof(text) - 1)),
#include "ptx/isa.def"
};
#undef PADCHK

/* Register banks of the entry being printed: prefixes shorter than BPAD
 * padded (len < BPAD), else copied as strings. */
enum { PRINT_BANKS = 32 };
typedef struct print_bank {
    char pad[BPAD];
    uint8_t len;
    bool fast; /* padded (len < BPAD) and indexed (not scalar) */
} print_bank;
/* With ctx_names, every register name of a padded bank written out once
 * (an entry's registers are printed four times each on average): NAME
 * bytes, the name padded, its length in the last byte. */
enum { NAME = 16, PRE = 64 };
typedef struct print_ctx {
    const ptx_fn *f;
    size_t nb; /* banks in b (the first PRINT_BANKS of f) */
    print_bank b[PRINT_BANKS];
    char (*names[PRINT_BANKS])[NAME]; /* bank b's names, ncount[b] of them; NULL: none */
    uint32_t ncount[PRINT_BANKS];
    char (*store)[NAME];              /* malloc'd, for all banks */
    /* the opcode part (opcode, modifiers, shape, types) of each builder
     * signature (ptx_ins.sig - 1) once written: PRE bytes, the text padded,
     * its length in the last byte (0: not yet); npre 0: none */
    char (*pre)[PRE];
    size_t npre;
} print_ctx;

static void ctx_init(print_ctx *c, const ptx_fn *f)
{
    c->f = f;
    c->store = NULL;
    c->pre = NULL;
    c->npre = 0;
    memset(c->names, 0, sizeof c->names);
    memset(c->ncount, 0, sizeof c->ncount);
    c->nb = f->nbanks < PRINT_BANKS ? f->nbanks : PRINT_BANKS;
    for (size_t i = 0; i < c->nb; i++) {
        size_t n = strlen(f->banks[i].prefix);
        memset(c->b[i].pad, 0, BPAD);
        if (n < BPAD)
            memcpy(c->b[i].pad, f->banks[i].prefix, n);
        c->b[i].len = (uint8_t)(n < BPAD ? n : BPAD);
        c->b[i].fast = n < BPAD && !f->banks[i].scalar;
    }
}

enum { SIMPLE = 40 + PTX_MAX_BANK_NAME }; /* a register, number, special register or [reg+off] */
/* Operands whose room is SIMPLE (opd_room's answer, without the call). */
static bool opd_simple(const ptx_opd *o)
{
    return o->kind <= PTX_O_F64 || o->kind == PTX_O_SREG || o->kind == PTX_O_SINK ||
           (o->kind == PTX_O_ADDR && !o->u.addr.sym);
}

static size_t opd_room(const ptx_fn *f, const ptx_opd *o)
{
    size_t n = SIMPLE;
    switch ((ptx_opd_kind)o->kind) {
    case PTX_O_VEC:
    case PTX_O_TENSOR:
        for (int i = 0; i < o->u.vec.n; i++) {
            const ptx_opd *v = &o->u.vec.e[i];
            n += (opd_simple(v) ? SIMPLE : opd_room(f, v)) + 2;
        }
        break;
    case PTX_O_PAIR: n += PTX_MAX_BANK_NAME + 16; break;
    case PTX_O_ADDR:
        if (o->u.addr.sym)
            n += strlen(o->u.addr.sym);
        break;
    case PTX_O_SYM: n += strlen(o->u.sym); break;
    case PTX_O_LABEL: n += strlen(f->labels[o->u.label]); break;
    default: break;
    }
    return n;
}

static char *cp(char *d, const char *s)
{
    while (*s)
        *d++ = *s++;
    return d;
}

static int ndigits(uint64_t v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* The names of c's padded banks (print_bank.fast) whose longest name fits
 * NAME - 1 bytes; without memory none (regs then writes them itself). */
static void ctx_names(print_ctx *c)
{
    const ptx_fn *f = c->f;
    size_t total = 0;
    for (size_t b = 0; b < c->nb; b++)
        if (c->b[b].fast && f->banks[b].count &&
            c->b[b].len + ndigits(f->banks[b].count - 1) < NAME)
            total += f->banks[b].count;
    if (!total || total > (1u << 22))
        return;
    c->store = malloc(total * NAME + 8); /* + 8: ctx_names's digit copies */
    if (!c->store)
        return; /* no memory: regs writes the names itself */
    size_t at = 0;
    for (size_t b = 0; b < c->nb; b++) {
        uint32_t n = f->banks[b].count;
        if (!c->b[b].fast || !n || c->b[b].len + ndigits(n - 1) >= NAME)
            continue;
        c->names[b] = c->store + at;
        c->ncount[b] = n;
        /* the index as decimal digits, counted up from 0 (no divides) */
        char dig[NAME] = "0"; /* zeros past the digits */
        int nd = 1;
        size_t len = c->b[b].len;
        for (uint32_t i = 0; i < n; i++) {
            char *slot = c->store[at + i];
            memcpy(slot, c->b[b].pad, BPAD);
            memcpy(slot + len, dig, 8); /* nd < 8; past the slot: the next one's, or the store's slack */
            slot[NAME - 1] = (char)(len + (size_t)nd);
            int k = nd - 1;
            while (k >= 0 && dig[k] == '9')
                dig[k--] = '0';
            if (k >= 0)
                dig[k]++;
            else { /* 9..9 + 1: one digit more */
                memmove(dig + 1, dig, (size_t)nd);
                dig[0] = '1';
                nd++;
            }
        }
        at += n;
    }
}

static char *i64s(char *d, int64_t v)
{
    if (v < 0) {
        *d++ = '-';
        return pt_u64s(d, (uint64_t)0 - (uint64_t)v);
    }
    return pt_u64s(d, (uint64_t)v);
}

static char *hexs(char *d, uint64_t v, int digits, bool upper)
{
    if (digits == 8 && upper) { /* f32 immediates: two digits a step */
        static const char hx[] = "0123456789ABCDEF";
        for (int i = 3; i >= 0; i--) {
            unsigned b = (unsigned)(v >> (8 * i)) & 0xff;
            *d++ = hx[b >> 4];
            *d++ = hx[b & 15];
        }
        return d;
    }
    const char *x = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char tmp[16];
    int n = 0;
    if (digits == 0) {
        do {
            tmp[n++] = x[v & 15];
            v >>= 4;
        } while (v);
    } else
        for (; n < digits; n++, v >>= 4)
            tmp[n] = x[v & 15];
    while (n)
        *d++ = tmp[--n];
    return d;
}

static char *regs_slow(const print_ctx *c, ptx_reg r, char *d)
{
    const ptx_fn *f = c->f;
    int b = PTX_REG_BANK(r);
    if (b >= 0 && (size_t)b < c->nb && c->b[b].fast) { /* b < nb <= f->nbanks */
        memcpy(d, c->b[b].pad, BPAD);
        return pt_u64s(d + c->b[b].len, PTX_REG_IDX(r));
    }
    if (b < 0 || (size_t)b >= f->nbanks) {
        char buf[32];
        return cp(d, ptx_reg_name(f, r, buf, sizeof buf));
    }
    if ((size_t)b < c->nb && c->b[b].len < BPAD) {
        memcpy(d, c->b[b].pad, BPAD);
        d += c->b[b].len;
    } else
        d = cp(d, f->banks[b].prefix);
    return f->banks[b].scalar ? d : pt_u64s(d, PTX_REG_IDX(r));
}

/* A register from its written-out name (ncount 0: none), else regs_slow. */
static inline __attribute__((always_inline)) char *regs(const print_ctx *c, ptx_reg r, char *d)
{
    uint32_t b = (r.id >> 20) - 1u, i = PTX_REG_IDX(r); /* bank 0xffffffff: no register */
    if (b < PRINT_BANKS && i < c->ncount[b]) {
        const char *slot = c->names[b][i];
        memcpy(d, slot, NAME);
        return d + slot[NAME - 1];
    }
    return regs_slow(c, r, d);
}

static char *opds(const print_ctx *c, const ptx_opd *o, char *d)
{
    switch ((ptx_opd_kind)o->kind) {
    case PTX_O_NONE: break;
    case PTX_O_REG:
        if (o->neg)
            *d++ = '!';
        d = regs(c, o->u.reg, d);
        break;
    case PTX_O_IMM:
        if (o->hex) {
            d = cp(d, "0x");
            d = hexs(d, (uint64_t)o->u.imm, 0, false);
        } else
            d = i64s(d, o->u.imm);
        break;
    case PTX_O_F32: {
        uint32_t bits;
        memcpy(&bits, &o->u.f32, 4);
        d = hexs(cp(d, "0f"), bits, 8, true);
        break;
    }
    case PTX_O_F64: {
        uint64_t bits;
        memcpy(&bits, &o->u.f64, 8);
        d = hexs(cp(d, "0d"), bits, 16, true);
        break;
    }
    case PTX_O_ADDR:
        *d++ = '[';
        d = o->u.addr.sym ? cp(d, o->u.addr.sym) : regs(c, o->u.addr.base, d);
        if (o->u.addr.off) {
            *d++ = '+';
            d = i64s(d, o->u.addr.off);
        }
        *d++ = ']';
        break;
    case PTX_O_VEC:
        *d++ = '{';
        for (int i = 0; i < o->u.vec.n; i++) {
            if (i) {
                *d++ = ',';
                *d++ = ' ';
            }
            const ptx_opd *v = &o->u.vec.e[i];
            d = v->kind == PTX_O_REG && !v->neg ? regs(c, v->u.reg, d) : opds(c, v, d);
        }
        *d++ = '}';
        break;
    case PTX_O_SREG:
        memcpy(d, sreg_pad[o->u.sreg], PAD);
        d += sreg_len[o->u.sreg];
        break;
    case PTX_O_SYM: d = cp(d, o->u.sym); break;
    case PTX_O_LABEL: d = cp(d, c->f->labels[o->u.label]); break;
    case PTX_O_SINK: *d++ = '_'; break;
    case PTX_O_PAIR:
        if (o->u.pair.d.id)
            d = regs(c, o->u.pair.d, d);
        else
            *d++ = '_';
        *d++ = '|';
        d = regs(c, o->u.pair.p, d);
        break;
    case PTX_O_TENSOR:
        *d++ = '[';
        d = opds(c, &o->u.vec.e[0], d);
        d = cp(d, ", {");
        for (int i = 1; i < o->u.vec.n; i++) {
            if (i > 1)
                d = cp(d, ", ");
            d = opds(c, &o->u.vec.e[i], d);
        }
        d = cp(d, "}]");
        break;
    }
    return d;
}

/* Room for need more bytes past d (with the padded copies' overshoot, the
 * separators and the instruction's ";\n" and NUL): d itself, or d in the
 * regrown text; NULL when out of memory (out failed). */
enum { TAIL = 8 + PT_SLACK };
static __attribute__((noinline)) char *grow(pt_buf *out, char *d, size_t need)
{
    out->len = (size_t)(d - out->s);
    if (!pt_buf_room(out, need + TAIL))
        return NULL;
    return out->s + out->len;
}
#define ROOM(need)                                                                                   \
    do {                                                                                             \
        if ((size_t)(out->s + out->cap - d) < (size_t)(need) + TAIL + 1 && !(d = grow(out, d, (need)))) \
            return NULL;                                                                             \
    } while (0)

/* A {vector} operand, room made element by element. */
static char *vec_out(const print_ctx *c, const ptx_opd *o, char *d, pt_buf *out)
{
    ROOM(SIMPLE);
    *d++ = '{';
    for (int i = 0; i < o->u.vec.n; i++) {
        const ptx_opd *v = &o->u.vec.e[i];
        if (v->kind == PTX_O_REG && !v->neg) {
            ROOM(SIMPLE);
            if (i) {
                *d++ = ',';
                *d++ = ' ';
            }
            d = regs(c, v->u.reg, d);
        } else {
            ROOM(opd_simple(v) ? SIMPLE : opd_room(c->f, v));
            if (i) {
                *d++ = ',';
                *d++ = ' ';
            }
            d = opds(c, v, d);
        }
    }
    *d++ = '}';
    return d;
}

/* The operands of ins after its opcode part; NULL when out of memory. */
static char *opds_out(const print_ctx *c, const ptx_ins *ins, char *d, pt_buf *out)
{
    for (int i = 0; i < ins->nopd; i++) {
        const ptx_opd *o = &ins->opd[i];
        if (o->kind == PTX_O_REG && !o->neg) {
            ROOM(SIMPLE);
            if (i)
                *d++ = ',';
            *d++ = ' ';
            d = regs(c, o->u.reg, d);
        } else if (o->kind == PTX_O_VEC) {
            if (i)
                *d++ = ',';
            *d++ = ' ';
            if (!(d = vec_out(c, o, d, out)))
                return NULL;
        } else {
            ROOM(opd_simple(o) ? SIMPLE : opd_room(c->f, o));
            if (i)
                *d++ = ',';
            *d++ = ' ';
            d = opds(c, o, d);
        }
    }
    return d;
}
#undef ROOM

/* One instruction: room for the opcode part first, then for each operand as
 * it comes (no walk over the operands to size them). */
static void print_ins(const print_ctx *c, const ptx_ins *ins, pt_buf *out)
{
    const ptx_fn *f = c->f;
    /* mbarrier::complete_tx::bytes; PT_SLACK: the padded copies' overshoot */
    size_t room = 96 + PT_SLACK + SIMPLE + (size_t)(ins->nmods + ins->ntypes) * 32;
    if (ins->op == PTX_OP_LABEL)
        room += strlen(f->labels[ins->opd[0].u.label]);
    if ((out->failed || out->len + room + 1 > out->cap) && !pt_buf_room(out, room))
        return;
    char *d = out->s + out->len;
    if (ins->op == PTX_OP_LABEL) {
        d = cp(d, f->labels[ins->opd[0].u.label]);
        d = cp(d, ":\n");
    } else if (ins->op == PTX_OP_PRAGMA) {
        /* .pragma "nounroll"; the modifiers are the pragma's words */
        d = cp(d, "\t.pragma \"");
        for (int i = 0; i < ins->nmods; i++) {
            if (i)
                *d++ = ' ';
            d = cp(d, ptx_mod_name(ins->mods[i]));
        }
        d = cp(d, "\";\n");
    } else {
        *d++ = '\t';
        if (ins->guard.id) {
            d = cp(d, ins->guard_neg ? "@!" : "@");
            d = regs(c, ins->guard, d);
            *d++ = ' ';
        }
        char *slot = NULL, *p0 = d;
        if (ins->sig && ins->sig <= c->npre) {
            slot = c->pre[ins->sig - 1];
            if (slot[PRE - 1]) { /* the room above holds PRE bytes past d */
                memcpy(d, slot, PRE);
                d += (uint8_t)slot[PRE - 1];
                goto operands;
            }
        }
        memcpy(d, op_pad[ins->op], PAD);
        d += op_len[ins->op];
        if (!ins->shape.m) {
            for (int i = 0; i < ins->nmods; i++) {
                *d++ = '.';
                memcpy(d, mod_pad[ins->mods[i]], PAD);
                d += mod_len[ins->mods[i]];
            }
        } else {
            for (int i = 0; i <= ins->nmods; i++) {
                if (ins->shape.at == i || (i == ins->nmods && ins->shape.at > i)) {
                    d = pt_u64s(cp(d, ".m"), ins->shape.m);
                    d = pt_u64s(cp(d, "n"), ins->shape.n);
                    d = pt_u64s(cp(d, "k"), ins->shape.k);
                }
                if (i == ins->nmods)
                    break;
                *d++ = '.';
                memcpy(d, mod_pad[ins->mods[i]], PAD);
                d += mod_len[ins->mods[i]];
            }
        }
        for (int i = 0; i < ins->ntypes; i++) {
            *d++ = '.';
            memcpy(d, type_pad[ins->types[i]], PAD);
            d += type_len[ins->types[i]];
        }
        if (slot && d - p0 < PRE - 1) {
            memcpy(slot, p0, (size_t)(d - p0));
            slot[PRE - 1] = (char)(d - p0);
        }
    operands:
        d = opds_out(c, ins, d, out);
        if (!d)
            return;
        *d++ = ';';
        *d++ = '\n';
    }
    *d = '\0';
    out->len = (size_t)(d - out->s);
}

void ptx_print_ins(const ptx_fn *f, const ptx_ins *ins, pt_buf *out)
{
    print_ctx c;
    ctx_init(&c, f);
    print_ins(&c, ins, out);
}

static int count_lines(const pt_buf *b)
{
    int n = 1;
    for (size_t i = 0; i < b->len; i++)
        n += b->s[i] == '\n';
    return n;
}

/* pt_buf_printf's "%d" / "%u" for the header's numbers, without printf */
static void put_int(pt_buf *out, int64_t v)
{
    char tmp[24];
    pt_buf_putn(out, tmp, (size_t)(i64s(tmp, v) - tmp));
}

static void put_dot_type(pt_buf *out, ptx_type t)
{
    pt_buf_putc(out, '.');
    pt_buf_puts(out, ptx_type_name(t));
}

static void put_align(pt_buf *out, int a)
{
    pt_buf_puts(out, ".align ");
    put_int(out, a);
    pt_buf_putc(out, ' ');
}

static void print_fn(ptx_fn *f, pt_buf *out)
{
    pt_buf_printf(out, ".visible .entry %s(", f->name);
    for (size_t i = 0; i < f->nparams; i++) {
        const ptx_param *p = &f->params[i];
        pt_buf_puts(out, i ? ",\n\t.param " : "\n\t.param ");
        if (p->array) {
            if (p->align)
                put_align(out, p->align);
            put_dot_type(out, p->type);
            pt_buf_putc(out, ' ');
            pt_buf_puts(out, p->name);
            pt_buf_putc(out, '[');
            put_int(out, p->array);
            pt_buf_putc(out, ']');
            continue;
        }
        put_dot_type(out, p->type);
        pt_buf_putc(out, ' ');
        if (p->ptr) {
            pt_buf_puts(out, ".ptr .global ");
            if (p->ptr_align)
                put_align(out, p->ptr_align);
        } else if (p->align)
            put_align(out, p->align);
        pt_buf_puts(out, p->name);
    }
    pt_buf_puts(out, f->nparams ? "\n)\n" : ")\n");
    if (f->maxntid[0])
        pt_buf_printf(out, ".maxntid %d, %d, %d\n", f->maxntid[0], f->maxntid[1] ? f->maxntid[1] : 1,
                      f->maxntid[2] ? f->maxntid[2] : 1);
    if (f->reqntid[0])
        pt_buf_printf(out, ".reqntid %d, %d, %d\n", f->reqntid[0], f->reqntid[1] ? f->reqntid[1] : 1,
                      f->reqntid[2] ? f->reqntid[2] : 1);
    if (f->minnctapersm)
        pt_buf_printf(out, ".minnctapersm %d\n", f->minnctapersm);
    if (f->maxnreg)
        pt_buf_printf(out, ".maxnreg %d\n", f->maxnreg);
    if (f->explicitcluster)
        pt_buf_puts(out, ".explicitcluster\n");
    if (f->reqnctapercluster[0])
        pt_buf_printf(out, ".reqnctapercluster %d, %d, %d\n", f->reqnctapercluster[0],
                      f->reqnctapercluster[1] ? f->reqnctapercluster[1] : 1,
                      f->reqnctapercluster[2] ? f->reqnctapercluster[2] : 1);
    if (f->maxclusterrank)
        pt_buf_printf(out, ".maxclusterrank %d\n", f->maxclusterrank);
    pt_buf_puts(out, "{\n");
    for (size_t i = 0; i < f->nbanks; i++) {
        const ptx_bank *b = &f->banks[i];
        if (!b->scalar && !b->count)
            continue;
        pt_buf_puts(out, "\t.reg ");
        put_dot_type(out, b->type);
        pt_buf_putc(out, ' ');
        pt_buf_puts(out, b->prefix);
        if (!b->scalar) {
            pt_buf_putc(out, '<');
            put_int(out, b->count);
            pt_buf_putc(out, '>');
        }
        pt_buf_puts(out, ";\n");
    }
    for (size_t i = 0; i < f->nshared; i++) {
        const ptx_shared *s = &f->shared[i];
        pt_buf_printf(out, "\t.shared .align %d .b8 %s[%" PRId64 "];\n", s->align, s->name,
                      s->bytes);
    }
    if (f->nbanks || f->nshared)
        pt_buf_putc(out, '\n');
    int line = count_lines(out);
    print_ctx c;
    ctx_init(&c, f);
    ctx_names(&c);
    size_t nsigs = ptx_module_nsigs(f->mod);
    if (nsigs && nsigs < (1u << 16))
        c.pre = calloc(nsigs, PRE);
    if (c.pre)
        c.npre = nsigs; /* no memory: every opcode part written out */
    /* the body's text at once (about 50 bytes an instruction): regrowing
     * copies it; print_ins still makes sure of each instruction's room */
    if (f->nbody < SIZE_MAX / 128 && pt_buf_room(out, f->nbody * 64 + 4096))
        for (size_t i = 0; i < f->nbody; i++) {
            f->body[i].line = line++;
            print_ins(&c, &f->body[i], out);
        }
    free(c.store);
    free(c.pre);
    pt_buf_puts(out, "}\n");
}

void ptx_print_buf(ptx_module *m, pt_buf *out)
{
    char tn[16], vs[8];
    pt_buf_printf(out, "//\n// Generated by ptxtune %s\n//\n\n", PT_VERSION);
    pt_buf_printf(out, ".version %s\n.target %s\n.address_size 64\n\n",
                  pt_ptx_version_str(m->version, vs, sizeof vs),
                  pt_target_name(&m->target, tn, sizeof tn));
    for (size_t i = 0; i < m->nshared; i++) {
        const ptx_shared *s = &m->shared[i];
        if (s->is_extern)
            pt_buf_printf(out, ".extern .shared .align %d .b8 %s[];\n", s->align, s->name);
        else
            pt_buf_printf(out, ".shared .align %d .b8 %s[%" PRId64 "];\n", s->align, s->name,
                          s->bytes);
    }
    if (m->nshared)
        pt_buf_putc(out, '\n');
    for (size_t i = 0; i < m->nfns; i++) {
        if (i)
            pt_buf_putc(out, '\n');
        print_fn(m->fns[i], out);
    }
}

char *ptx_print(ptx_module *m)
{
    pt_buf b;
    pt_buf_init(&b);
    ptx_print_buf(m, &b);
    return pt_buf_take(&b);
}
