/* The printer: the only code that writes PTX text. Output is a pure
 * function of the module, so the text (and its hash) identifies a kernel. */
#include "ptx/ir.h"

#include <inttypes.h>
#include <stdio.h>
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

/* Hand-rolled number formatting: the printer is on the emission hot path
 * and printf dominated its profile. */
static void put_u64(pt_buf *out, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char rev[24];
    for (int i = 0; i < n; i++)
        rev[i] = tmp[n - 1 - i];
    pt_buf_putn(out, rev, (size_t)n);
}

static void put_i64(pt_buf *out, int64_t v)
{
    if (v < 0) {
        pt_buf_putc(out, '-');
        put_u64(out, (uint64_t)0 - (uint64_t)v);
    } else
        put_u64(out, (uint64_t)v);
}

static void put_hex(pt_buf *out, uint64_t v, int digits, bool upper)
{
    const char *d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char tmp[16];
    int n = 0;
    if (digits == 0) {
        do {
            tmp[n++] = d[v & 15];
            v >>= 4;
        } while (v);
    } else
        for (; n < digits; n++, v >>= 4)
            tmp[n] = d[v & 15];
    char rev[16];
    for (int i = 0; i < n; i++)
        rev[i] = tmp[n - 1 - i];
    pt_buf_putn(out, rev, (size_t)n);
}

static void put_reg(const ptx_fn *f, ptx_reg r, pt_buf *out)
{
    int b = PTX_REG_BANK(r);
    if (b < 0 || (size_t)b >= f->nbanks) {
        char buf[32];
        pt_buf_puts(out, ptx_reg_name(f, r, buf, sizeof buf));
        return;
    }
    pt_buf_puts(out, f->banks[b].prefix);
    if (!f->banks[b].scalar)
        put_u64(out, PTX_REG_IDX(r));
}

static void print_opd(const ptx_fn *f, const ptx_opd *o, pt_buf *out)
{
    switch ((ptx_opd_kind)o->kind) {
    case PTX_O_NONE: break;
    case PTX_O_REG:
        if (o->neg)
            pt_buf_putc(out, '!');
        put_reg(f, o->u.reg, out);
        break;
    case PTX_O_IMM:
        if (o->hex) {
            pt_buf_puts(out, "0x");
            put_hex(out, (uint64_t)o->u.imm, 0, false);
        } else
            put_i64(out, o->u.imm);
        break;
    case PTX_O_F32: {
        uint32_t bits;
        memcpy(&bits, &o->u.f32, 4);
        pt_buf_puts(out, "0f");
        put_hex(out, bits, 8, true);
        break;
    }
    case PTX_O_F64: {
        uint64_t bits;
        memcpy(&bits, &o->u.f64, 8);
        pt_buf_puts(out, "0d");
        put_hex(out, bits, 16, true);
        break;
    }
    case PTX_O_ADDR:
        pt_buf_putc(out, '[');
        if (o->u.addr.sym)
            pt_buf_puts(out, o->u.addr.sym);
        else
            put_reg(f, o->u.addr.base, out);
        if (o->u.addr.off) {
            pt_buf_putc(out, '+');
            put_i64(out, o->u.addr.off);
        }
        pt_buf_putc(out, ']');
        break;
    case PTX_O_VEC:
        pt_buf_putc(out, '{');
        for (int i = 0; i < o->u.vec.n; i++) {
            if (i)
                pt_buf_puts(out, ", ");
            print_opd(f, &o->u.vec.e[i], out);
        }
        pt_buf_putc(out, '}');
        break;
    case PTX_O_SREG: pt_buf_puts(out, ptx_sreg_name(o->u.sreg)); break;
    case PTX_O_SYM: pt_buf_puts(out, o->u.sym); break;
    case PTX_O_LABEL: pt_buf_puts(out, f->labels[o->u.label]); break;
    case PTX_O_SINK: pt_buf_putc(out, '_'); break;
    }
}

void ptx_print_ins(const ptx_fn *f, const ptx_ins *ins, pt_buf *out)
{
    if (ins->op == PTX_OP_LABEL) {
        pt_buf_puts(out, f->labels[ins->opd[0].u.label]);
        pt_buf_puts(out, ":\n");
        return;
    }
    pt_buf_putc(out, '\t');
    if (ins->guard.id) {
        pt_buf_puts(out, ins->guard_neg ? "@!" : "@");
        put_reg(f, ins->guard, out);
        pt_buf_putc(out, ' ');
    }
    ptx_ins_opname(ins, out);
    for (int i = 0; i < ins->nopd; i++) {
        pt_buf_puts(out, i ? ", " : " ");
        print_opd(f, &ins->opd[i], out);
    }
    pt_buf_puts(out, ";\n");
}

static int count_lines(const pt_buf *b)
{
    int n = 1;
    for (size_t i = 0; i < b->len; i++)
        n += b->s[i] == '\n';
    return n;
}

static void print_fn(ptx_fn *f, pt_buf *out)
{
    pt_buf_printf(out, ".visible .entry %s(", f->name);
    for (size_t i = 0; i < f->nparams; i++) {
        const ptx_param *p = &f->params[i];
        pt_buf_puts(out, i ? ",\n\t.param " : "\n\t.param ");
        if (p->array) {
            if (p->align)
                pt_buf_printf(out, ".align %d ", p->align);
            pt_buf_printf(out, ".%s %s[%d]", ptx_type_name(p->type), p->name, p->array);
            continue;
        }
        pt_buf_printf(out, ".%s ", ptx_type_name(p->type));
        if (p->ptr) {
            pt_buf_puts(out, ".ptr .global ");
            if (p->ptr_align)
                pt_buf_printf(out, ".align %d ", p->ptr_align);
        } else if (p->align)
            pt_buf_printf(out, ".align %d ", p->align);
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
    pt_buf_puts(out, "{\n");
    for (size_t i = 0; i < f->nbanks; i++) {
        const ptx_bank *b = &f->banks[i];
        if (b->scalar)
            pt_buf_printf(out, "\t.reg .%s %s;\n", ptx_type_name(b->type), b->prefix);
        else if (b->count)
            pt_buf_printf(out, "\t.reg .%s %s<%u>;\n", ptx_type_name(b->type), b->prefix, b->count);
    }
    for (size_t i = 0; i < f->nshared; i++) {
        const ptx_shared *s = &f->shared[i];
        pt_buf_printf(out, "\t.shared .align %d .b8 %s[%" PRId64 "];\n", s->align, s->name,
                      s->bytes);
    }
    if (f->nbanks || f->nshared)
        pt_buf_putc(out, '\n');
    int line = count_lines(out);
    for (size_t i = 0; i < f->nbody; i++) {
        f->body[i].line = line++;
        ptx_print_ins(f, &f->body[i], out);
    }
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
