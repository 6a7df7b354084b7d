/* kit layout: construction, evaluation, composition and index code
 * (gen/kit/layout.h). */
#include <assert.h>
#include <string.h>

#include "gen/kit/layout.h"

static int ilog2(int64_t v)
{
    int r = 0;
    while ((INT64_C(1) << r) < v)
        r++;
    return r;
}

/* ---- construction ---- */

kit_layout kit_layout1(int n, const int *shape, const int64_t *stride)
{
    kit_layout l;
    memset(&l, 0, sizeof l);
    assert(n >= 0 && n <= KIT_RANK);
    l.rank = n;
    l.dims = 1;
    for (int i = 0; i < n; i++) {
        l.shape[i] = shape[i];
        l.stride[i][0] = stride[i];
    }
    return l;
}

kit_layout kit_layout2(int n, const int *shape, const int64_t *rs, const int64_t *cs)
{
    kit_layout l;
    memset(&l, 0, sizeof l);
    assert(n >= 0 && n <= KIT_RANK);
    l.rank = n;
    l.dims = 2;
    for (int i = 0; i < n; i++) {
        l.shape[i] = shape[i];
        l.stride[i][0] = rs[i];
        l.stride[i][1] = cs[i];
    }
    return l;
}

/* The swizzle reads the row bits just above the row's chunks: with pitch
 * 2^p and w = min(chunks, 8) chunks XORed, the bits read start at
 * p + log2(8 / w) (narrow rows use higher row bits, so that 8 consecutive
 * rows still give 8 distinct patterns over the w chunks of two or four
 * rows sharing a 128-byte line). */
kit_layout kit_smem_tile(int rows, int row_bytes, int pad)
{
    int pitch = row_bytes + pad;
    kit_layout l = kit_layout1(2, (int[]){rows, row_bytes}, (int64_t[]){pitch, 1});
    l.span = (int64_t)rows * pitch;
    if (pad == 0) {
        int nc = row_bytes / 16, w = nc < 8 ? nc : 8;
        assert(row_bytes >= 16 && (row_bytes & (row_bytes - 1)) == 0);
        if (w > 1)
            l.swz = (kit_swizzle){ilog2(w), 4, ilog2(pitch) + ilog2(8 / w) - 4};
    }
    return l;
}

kit_layout kit_tiler(int rows, int cols, int tr, int tc, bool m_fast)
{
    int nr = rows / tr, nc = cols / tc;
    if (m_fast)
        return kit_layout2(2, (int[]){nr, nc}, (int64_t[]){tr, 0}, (int64_t[]){0, tc});
    return kit_layout2(2, (int[]){nc, nr}, (int64_t[]){0, tr}, (int64_t[]){tc, 0});
}

/* ---- evaluation ---- */

int64_t kit_swz(kit_swizzle s, int64_t x)
{
    if (!s.bits)
        return x;
    return x ^ ((x >> s.shift) & (((INT64_C(1) << s.bits) - 1) << s.base));
}

int64_t kit_size(const kit_layout *l)
{
    int64_t n = 1;
    for (int i = 0; i < l->rank; i++)
        n *= l->shape[i];
    return n;
}

int64_t kit_eval(const kit_layout *l, const int64_t *c, int dim)
{
    int64_t v = 0;
    for (int i = 0; i < l->rank; i++)
        v += c[i] * l->stride[i][dim];
    return l->dims == 1 ? kit_swz(l->swz, v) : v;
}

int64_t kit_eval_idx(const kit_layout *l, int64_t idx, int dim)
{
    int64_t c[KIT_RANK];
    for (int i = 0; i < l->rank; i++) {
        int64_t s = l->shape[i];
        if (i == l->rank - 1)
            c[i] = idx;
        else if (idx >= 0 && s > 0 && (s & (s - 1)) == 0) { /* no 64-bit divide (tens of cycles) */
            c[i] = idx & (s - 1);
            idx >>= __builtin_ctzll((unsigned long long)s);
        } else {
            c[i] = idx % s;
            idx /= s;
        }
    }
    return kit_eval(l, c, dim);
}

void kit_eval_idx2(const kit_layout *l, int64_t idx, int64_t *r, int64_t *c)
{
    assert(l->dims == 2);
    int64_t vr = 0, vc = 0;
    for (int i = 0; i < l->rank; i++) {
        int64_t s = l->shape[i], x;
        if (i == l->rank - 1)
            x = idx;
        else if (idx >= 0 && s > 0 && (s & (s - 1)) == 0) { /* no 64-bit divide */
            x = idx & (s - 1);
            idx >>= __builtin_ctzll((unsigned long long)s);
        } else {
            x = idx % s;
            idx /= s;
        }
        vr += x * l->stride[i][0];
        vc += x * l->stride[i][1];
    }
    *r = vr;
    *c = vc;
}

int64_t kit_at(const kit_layout *l, int64_t row, int64_t col)
{
    assert(l->rank == 2 && l->dims == 1);
    return kit_swz(l->swz, row * l->stride[0][0] + col * l->stride[1][0]); /* kit_eval of rank 2, dims 1 */
}

bool kit_shift_ok(const kit_layout *l, int64_t drow, int64_t dcol)
{
    assert(l->rank == 2 && l->dims == 1);
    if (!l->swz.bits)
        return true;
    int64_t rd = INT64_C(1) << (l->swz.shift + l->swz.base + l->swz.bits);
    int64_t wr = INT64_C(1) << (l->swz.base + l->swz.bits);
    /* the row part must leave the read bits alone, the column part the
     * written ones (a column move stays inside its row) */
    return ((drow * l->stride[0][0]) & (rd - 1)) == 0 && ((dcol * l->stride[1][0]) & (wr - 1)) == 0; /* % rd, wr: powers of two */
}

/* ---- algebra ---- */

kit_layout kit_compose(const kit_layout *outer, const kit_layout *inner)
{
    assert(outer->dims == 1 && outer->rank == 2 && inner->dims == 2);
    kit_layout r;
    memset(&r, 0, sizeof r);
    r.rank = inner->rank;
    r.dims = 1;
    for (int i = 0; i < inner->rank; i++) {
        r.shape[i] = inner->shape[i];
        r.stride[i][0] = inner->stride[i][0] * outer->stride[0][0] + inner->stride[i][1] * outer->stride[1][0];
    }
    r.swz = outer->swz;
    r.span = outer->span;
    return r;
}

kit_layout kit_modes(const kit_layout *l, int first, int n)
{
    kit_layout r = *l;
    assert(first >= 0 && n >= 0 && first + n <= l->rank);
    r.rank = n;
    for (int i = 0; i < n; i++) {
        r.shape[i] = l->shape[first + i];
        r.stride[i][0] = l->stride[first + i][0];
        r.stride[i][1] = l->stride[first + i][1];
    }
    for (int i = n; i < KIT_RANK; i++) {
        r.shape[i] = 0;
        r.stride[i][0] = r.stride[i][1] = 0;
    }
    return r;
}

kit_layout kit_concat(const kit_layout *l, const kit_layout *r)
{
    assert(l->dims == r->dims && l->rank + r->rank <= KIT_RANK);
    kit_layout o = *l;
    for (int i = 0; i < r->rank; i++) {
        o.shape[l->rank + i] = r->shape[i];
        o.stride[l->rank + i][0] = r->stride[i][0];
        o.stride[l->rank + i][1] = r->stride[i][1];
    }
    o.rank = l->rank + r->rank;
    return o;
}

/* ---- emission ---- */

ptx_opd kit_iop(ptx_fn *f, ptx_op op, ptx_opd a, ptx_opd b)
{
    if (a.kind == PTX_O_IMM && b.kind == PTX_O_IMM) {
        int64_t x = a.u.imm, y = b.u.imm;
        switch (op) {
        case PTX_OP_ADD: return ptx_imm(x + y);
        case PTX_OP_SUB: return ptx_imm(x - y);
        case PTX_OP_MUL: return ptx_imm(x * y);
        case PTX_OP_SHL: return ptx_imm(x << y);
        case PTX_OP_SHR: return ptx_imm(x >> y);
        case PTX_OP_AND: return ptx_imm(x & y);
        case PTX_OP_OR: return ptx_imm(x | y);
        case PTX_OP_XOR: return ptx_imm(x ^ y);
        case PTX_OP_MIN: return ptx_imm(x < y ? x : y);
        case PTX_OP_MAX: return ptx_imm(x > y ? x : y);
        default: break;
        }
    }
    /* identities that need no instruction */
    if (b.kind == PTX_O_IMM && b.u.imm == 0 &&
        (op == PTX_OP_ADD || op == PTX_OP_SUB || op == PTX_OP_SHL || op == PTX_OP_SHR ||
         op == PTX_OP_OR || op == PTX_OP_XOR))
        return a;
    if (b.kind == PTX_O_IMM && b.u.imm == 1 && op == PTX_OP_MUL)
        return a;
    if (a.kind == PTX_O_IMM && a.u.imm == 0 && (op == PTX_OP_ADD || op == PTX_OP_OR || op == PTX_OP_XOR))
        return b;
    ptx_reg d = ptx_reg_new(f, PTX_T_B32);
    ptx_types t = PTX_T1(PTX_T_U32);
    ptx_mods m = PTX_NOMODS;
    if (op == PTX_OP_AND || op == PTX_OP_OR || op == PTX_OP_XOR || op == PTX_OP_SHL)
        t = PTX_T1(PTX_T_B32);
    else if (op == PTX_OP_MIN || op == PTX_OP_MAX)
        t = PTX_T1(PTX_T_S32);
    else if (op == PTX_OP_MUL)
        m = PTX_MODS(PTX_M_LO);
    ptx_emit(f, op, m, t, ptx_r(d), a, b);
    return ptx_r(d);
}

ptx_opd kit_imad(ptx_fn *f, ptx_opd a, ptx_opd b, ptx_opd c)
{
    if (a.kind == PTX_O_IMM || b.kind == PTX_O_IMM) {
        ptx_opd k = a.kind == PTX_O_IMM ? a : b, x = a.kind == PTX_O_IMM ? b : a;
        if (k.u.imm == 0)
            return c;
        if (x.kind == PTX_O_IMM)
            return kit_iop(f, PTX_OP_ADD, ptx_imm(k.u.imm * x.u.imm), c);
        if (k.u.imm == 1)
            return kit_iop(f, PTX_OP_ADD, x, c);
        if (c.kind == PTX_O_IMM && c.u.imm == 0)
            return kit_iop(f, PTX_OP_MUL, x, k);
    }
    ptx_reg d = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MAD, PTX_MODS(PTX_M_LO), PTX_T1(PTX_T_U32), ptx_r(d), a, b, c);
    return ptx_r(d);
}

ptx_reg kit_reg(ptx_fn *f, ptx_opd v)
{
    if (v.kind == PTX_O_REG)
        return v.u.reg;
    ptx_reg r = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(r), v);
    return r;
}

ptx_opd kit_emit_swz(ptx_fn *f, kit_swizzle s, ptx_opd x)
{
    if (!s.bits)
        return x;
    if (x.kind == PTX_O_IMM)
        return ptx_imm(kit_swz(s, x.u.imm));
    ptx_opd t = kit_iop(f, PTX_OP_SHR, x, ptx_imm(s.shift));
    t = kit_iop(f, PTX_OP_AND, t, ptx_imm(((INT64_C(1) << s.bits) - 1) << s.base));
    return kit_iop(f, PTX_OP_XOR, x, t);
}

ptx_opd kit_emit(ptx_fn *f, const kit_layout *l, const ptx_opd *c, int dim)
{
    /* immediates first into one constant, registers by mad */
    int64_t k = 0;
    for (int i = 0; i < l->rank; i++)
        if (c[i].kind == PTX_O_IMM)
            k += c[i].u.imm * l->stride[i][dim];
    ptx_opd v = ptx_imm(k);
    for (int i = 0; i < l->rank; i++) {
        if (c[i].kind == PTX_O_IMM || l->stride[i][dim] == 0)
            continue;
        int64_t s = l->stride[i][dim];
        if (v.kind == PTX_O_IMM && v.u.imm == 0 && s > 0 && (s & (s - 1)) == 0)
            v = kit_iop(f, PTX_OP_SHL, c[i], ptx_imm(ilog2(s)));
        else
            v = kit_imad(f, c[i], ptx_imm(s), v);
    }
    return l->dims == 1 ? kit_emit_swz(f, l->swz, v) : v;
}

ptx_opd kit_emit_idx(ptx_fn *f, const kit_layout *l, ptx_opd idx, int dim)
{
    ptx_opd c[KIT_RANK];
    if (idx.kind == PTX_O_IMM)
        return ptx_imm(kit_eval_idx(l, idx.u.imm, dim));
    int sh = 0;
    for (int i = 0; i < l->rank; i++) {
        int s = l->shape[i];
        assert(s > 0 && (s & (s - 1)) == 0);
        if (s == 1 || l->stride[i][dim] == 0) {
            c[i] = ptx_imm(0);
        } else {
            ptx_opd x = kit_iop(f, PTX_OP_SHR, idx, ptx_imm(sh));
            c[i] = i == l->rank - 1 ? x : kit_iop(f, PTX_OP_AND, x, ptx_imm(s - 1));
        }
        sh += ilog2(s);
    }
    return kit_emit(f, l, c, dim);
}
