/* Fused elementwise and row-reduction kernels from gen/expr programs.
 *
 * Two kernel shapes:
 *  - flat (no reduction): each thread handles `unroll` chunks of `vec`
 *    consecutive elements of the full shape; chunks of one unroll step are
 *    tpb apart so a warp's accesses coalesce. A scalar tail covers the last
 *    partial chunk when the element count is not a multiple of vec.
 *  - row (reductions over the last dim): a group of wpr warps owns a row;
 *    thread l of the group handles chunks l, l+T, l+2T... (T = 32*wpr).
 *    Each reduction level is one pass over the row (kept in registers when
 *    cache=1 and the row fits), reduced with warp shuffles and, across warps,
 *    through shared memory (gen/kit/reduce). softmax's max and sum of
 *    exponentials share one pass with the online rescaling rule when
 *    online=1 and the row is not cached; a cached row takes its max first,
 *    keeps the sum's terms for the output and divides by one reciprocal.
 *    Each tensor gets one pointer per row (and thread): accesses are that
 *    pointer plus an immediate (cached) or plus the column (loop).
 * Values are computed in f32 whatever the storage dtype (f32, f16, bf16;
 * fp8 e4m3/e5m2 outputs multiply by a scale parameter first).
 *
 * A tensor element (row r, col c) lives at rowoff(r) + c*s, s in {0, 1}:
 * rowoff is a div/mod chain over the broadcast strides, emitted with the
 * shape as immediates, or from run-time rows/cols parameters for the simple
 * broadcasting patterns (full, [cols], [..., 1], scalar). */
#include "gen/elementwise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/expr.h"
#include "gen/expr_mag.h"
#include "gen/expr_ptx.h"
#include "gen/kit/kit.h"

enum { EW_MAX_TENSORS = 8 };
/* Most elements of the broadcast shape (a kernel's tensors then fit every
 * 64-bit index product, and 2^40 f32 values are 4 TB already). */
#define EW_MAX_NUMEL ((int64_t)1 << 40)
/* Most blocks in grid.x. */
#define EW_MAX_GRID ((int64_t)0x7fffffff)

/* How a tensor maps onto the rows x cols view. */
typedef enum ew_layout {
    EW_FULL,    /* own shape == full shape: offset = r*cols + c */
    EW_ROWVEC,  /* varies only along the last dim, shape [cols] */
    EW_COLVEC,  /* one value per row, shape full[:-1] + [1] */
    EW_SCALAR,  /* one element */
    EW_GENERAL, /* anything else: div/mod chain */
} ew_layout;

struct pt_prepared {
    pt_problem prob;
    pt_target target;
    ex_prog *prog;
    pt_dtype in_dt, out_dt;
    float out_scale;
    ew_layout in_layout[EW_MAX_TENSORS], out_layout[EW_MAX_TENSORS];
    bool idx64;
    bool has_sumexp; /* softmax-like pair present: online is a real choice */
};

static int dt_bytes(pt_dtype t) { return pt_dtype_get(t)->bytes; }

static ew_layout classify(const ex_prog *p, const ex_tensor *t)
{
    if (t->numel == 1)
        return EW_SCALAR;
    int nd = p->full.ndim;
    bool full = t->shape.ndim == nd;
    for (int d = 0; full && d < nd; d++)
        full = t->shape.dim[d] == p->full.dim[d];
    if (full)
        return EW_FULL;
    if (t->varies_col && !t->varies_row && t->numel == p->cols)
        return EW_ROWVEC;
    if (!t->varies_col && t->numel == p->rows) {
        /* [..., 1] with the leading dims equal to the full ones */
        bool ok = t->shape.ndim == nd;
        for (int d = 0; ok && d < nd - 1; d++)
            ok = t->shape.dim[d] == p->full.dim[d];
        if (ok)
            return EW_COLVEC;
    }
    return EW_GENERAL;
}

static int prepare(pt_arena *a, const pt_problem *pb, const pt_target *t, pt_prepared **out,
                   pt_err *e)
{
    pt_prepared *pp = pt_arena_alloc(a, sizeof *pp);
    pp->prob = *pb;
    pp->target = *t;
    pp->in_dt = pb->dtype;
    pp->out_dt = pb->out_dtype;
    pp->out_scale = 1.0f;
    if (!pb->expr || !*pb->expr)
        return pt_errf(e, PT_EINVAL, "empty expression");
    if (pp->in_dt != PT_F32 && pp->in_dt != PT_F16 && pp->in_dt != PT_BF16)
        return pt_errf(e, PT_EINVAL,
                       "dtype '%s' is not supported for elementwise inputs (f32, f16, bf16)",
                       pt_dtype_get(pp->in_dt)->name);
    if (pp->out_dt != PT_F32 && pp->out_dt != PT_F16 && pp->out_dt != PT_BF16 &&
        pp->out_dt != PT_E4M3 && pp->out_dt != PT_E5M2)
        return pt_errf(e, PT_EINVAL,
                       "dtype '%s' is not supported for elementwise outputs (f32, f16, bf16, e4m3, e5m2)",
                       pt_dtype_get(pp->out_dt)->name);
    if (pt_dtype_get(pp->out_dt)->min_sm > t->sm) {
        char tn[16];
        return pt_errf(e, PT_EUNSUPPORTED, "dtype %s needs sm_%d; target is %s",
                       pt_dtype_get(pp->out_dt)->name, pt_dtype_get(pp->out_dt)->min_sm,
                       pt_target_name(t, tn, sizeof tn));
    }
    if (pt_problem_out_scale(pb, pp->out_dt, &pp->out_scale, e))
        return e->code;
    int rc = ex_parse(a, pb->expr, &pp->prog, e);
    if (!rc)
        rc = ex_check_target(pp->prog, t, e);
    if (rc)
        return rc;
    if (!pb->shapes || !*pb->shapes)
        return pt_errf(e, PT_EINVAL, "no shapes given (e.g. --shape x=4096x8192,w=8192)");
    rc = ex_bind_spec(pp->prog, pb->shapes, e);
    if (rc)
        return rc;
    const ex_prog *p = pp->prog;
    if (p->ninputs > EW_MAX_TENSORS || p->noutputs > EW_MAX_TENSORS)
        return pt_errf(e, PT_EINVAL, "at most %d inputs and %d outputs", EW_MAX_TENSORS,
                       EW_MAX_TENSORS);
    if (p->ninputs == 0)
        return pt_errf(e, PT_EINVAL, "expression has no input tensor");
    for (int i = 0; i < p->ninputs; i++)
        pp->in_layout[i] = classify(p, &p->inputs[i]);
    for (int i = 0; i < p->noutputs; i++)
        pp->out_layout[i] = classify(p, &p->outputs[i]);
    /* ex_bind keeps rows*cols within 2^48; checked all the same */
    int64_t maxel;
    if (__builtin_mul_overflow(p->rows, p->cols, &maxel) || maxel > EW_MAX_NUMEL) {
        char sb[160];
        ex_shape_str(&p->full, sb, sizeof sb);
        return pt_errf(e, PT_ERANGE, "shape too large: %s has more than 2^40 elements", sb);
    }
    pp->idx64 = maxel >= ((int64_t)1 << 31);
    if (p->rows >= ((int64_t)1 << 31))
        return pt_errf(e, PT_ERANGE, "too many rows (%lld): the grid is limited to 2^31-1 blocks",
                       (long long)p->rows);
    for (int i = 0; i < p->nnodes; i++)
        if (p->nodes[i].kind == EX_RSUMEXP)
            pp->has_sumexp = true;
    *out = pp;
    return PT_OK;
}

static int space(const pt_prepared *pp, const pt_target *t, pt_space *s)
{
    (void)t;
    memset(s, 0, sizeof *s);
    int vmax = 16 / dt_bytes(pp->in_dt);
    if (16 / dt_bytes(pp->out_dt) < vmax)
        vmax = 16 / dt_bytes(pp->out_dt);
    pt_param_space tpb = {"tpb", "threads per block", 3, {128, 256, 512}};
    pt_param_space vec = {"vec", "elements per vector access (16 bytes at most)", 0, {0}};
    for (int v = 1; v <= vmax && v <= 8; v *= 2)
        vec.values[vec.nvalues++] = v;
    pt_param_space imm = {"shape_imm", "shapes as immediates (1) or run-time parameters (0)", 2,
                          {1, 0}};
    s->p[s->nparams++] = tpb;
    s->p[s->nparams++] = vec;
    if (!pp->prog->has_reduction) {
        pt_param_space unroll = {"unroll", "chunks per thread", 3, {1, 2, 4}};
        s->p[s->nparams++] = unroll;
    } else {
        pt_param_space wpr = {"wpr", "warps per row", 4, {1, 2, 4, 8}};
        pt_param_space cache = {"cache", "keep the row in registers between passes", 2, {1, 0}};
        s->p[s->nparams++] = wpr;
        s->p[s->nparams++] = cache;
        if (pp->has_sumexp) {
            pt_param_space online = {"online", "one-pass max and sum of exponentials", 2, {1, 0}};
            s->p[s->nparams++] = online;
        }
    }
    s->p[s->nparams++] = imm;
    return PT_OK;
}

/* Row kernel: vector chunks of the row each thread owns. */
static int64_t row_chunks(const pt_prepared *pp, int64_t wpr, int64_t vec)
{
    int64_t per = 32 * wpr * vec;
    return (pp->prog->cols + per - 1) / per;
}

static int elem_inputs(const pt_prepared *pp)
{
    int n = 0;
    for (int i = 0; i < pp->prog->ninputs; i++)
        n += pp->prog->inputs[i].varies_col;
    return n;
}

static int check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);

static void defaults(const pt_prepared *pp, const pt_target *t, pt_config *c)
{
    pt_space s;
    space(pp, t, &s);
    c->n = 0;
    for (int i = 0; i < s.nparams; i++)
        pt_config_set(c, s.p[i].name, s.p[i].values[0]);
    int64_t vec = s.p[1].values[s.p[1].nvalues - 1];
    while (vec > 1 && pp->prog->cols % vec)
        vec /= 2;
    pt_config_set(c, "vec", vec);
    if (!pp->prog->has_reduction) {
        /* a grid that fits grid.x: more chunks per thread, then per block */
        pt_err e = {0};
        for (int64_t u = 2; u <= 4 && check(pp, t, c, &e); u *= 2)
            pt_config_set(c, "unroll", u);
        for (int64_t b = 256; b <= 512 && check(pp, t, c, &e); b *= 2)
            pt_config_set(c, "tpb", b);
    }
    if (pp->prog->has_reduction) {
        /* enough warps that each thread holds at most 4 chunks */
        int64_t wpr = 1;
        while (wpr < 8 && row_chunks(pp, wpr, vec) > 4)
            wpr *= 2;
        pt_config_set(c, "wpr", wpr);
        pt_config_set(c, "tpb", 32 * wpr > 256 ? 32 * wpr : 256);
        pt_err e = {0};
        if (check(pp, t, c, &e))
            pt_config_set(c, "cache", 0);
    }
}

static bool simple_layouts(const pt_prepared *pp)
{
    for (int i = 0; i < pp->prog->ninputs; i++)
        if (pp->in_layout[i] == EW_GENERAL)
            return false;
    for (int i = 0; i < pp->prog->noutputs; i++)
        if (pp->out_layout[i] == EW_GENERAL)
            return false;
    return true;
}

static bool all_full_or_scalar(const pt_prepared *pp)
{
    for (int i = 0; i < pp->prog->ninputs; i++)
        if (pp->in_layout[i] != EW_FULL && pp->in_layout[i] != EW_SCALAR)
            return false;
    for (int i = 0; i < pp->prog->noutputs; i++)
        if (pp->out_layout[i] != EW_FULL)
            return false;
    return true;
}

static int check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    (void)t;
    const ex_prog *p = pp->prog;
    int64_t tpb = pt_config_get(c, "tpb", 256), vec = pt_config_get(c, "vec", 1);
    int64_t imm = pt_config_get(c, "shape_imm", 1);
    if (tpb < 32 || tpb > 1024 || tpb % 32)
        return pt_errf(e, PT_EINVAL, "tpb=%lld: must be a multiple of 32 in 32..1024",
                       (long long)tpb);
    if (vec < 1 || vec > 16 || (vec & (vec - 1)))
        return pt_errf(e, PT_EINVAL, "vec=%lld: must be a power of two", (long long)vec);
    if (vec * dt_bytes(pp->in_dt) > 16 || vec * dt_bytes(pp->out_dt) > 16)
        return pt_errf(e, PT_EINVAL, "vec=%lld: accesses wider than 16 bytes", (long long)vec);
    if (imm == 0 && !simple_layouts(pp))
        return pt_errf(e, PT_EINVAL,
                       "shape_imm=0: run-time shapes need simple broadcasting (full, [cols], [...,1], scalar)");
    if (!p->has_reduction) {
        int64_t unroll = pt_config_get(c, "unroll", 1);
        if (unroll < 1 || unroll > 8)
            return pt_errf(e, PT_EINVAL, "unroll=%lld: must be 1..8", (long long)unroll);
        int64_t per = tpb * vec * unroll, n = p->rows * p->cols; /* both small: no overflow */
        if ((n + per - 1) / per > EW_MAX_GRID)
            return pt_errf(e, PT_EINVAL,
                           "tpb*vec*unroll=%lld needs %lld blocks for %lld elements (at most 2^31-1): raise vec, unroll or tpb",
                           (long long)per, (long long)((n + per - 1) / per), (long long)n);
        if (vec > 1 && p->cols % vec && !all_full_or_scalar(pp))
            return pt_errf(e, PT_EINVAL,
                           "vec=%lld does not divide the last dim %lld of a broadcast operand",
                           (long long)vec, (long long)p->cols);
        return PT_OK;
    }
    int64_t wpr = pt_config_get(c, "wpr", 1), cache = pt_config_get(c, "cache", 0);
    if (wpr < 1 || wpr > 32 || (wpr & (wpr - 1)))
        return pt_errf(e, PT_EINVAL, "wpr=%lld: must be a power of two up to 32", (long long)wpr);
    if (tpb % (32 * wpr))
        return pt_errf(e, PT_EINVAL, "tpb=%lld is not a multiple of 32*wpr=%lld", (long long)tpb,
                       (long long)(32 * wpr));
    if (vec > 1 && p->cols % vec)
        return pt_errf(e, PT_EINVAL, "vec=%lld does not divide the row length %lld",
                       (long long)vec, (long long)p->cols);
    if (cache) {
        if (!imm)
            return pt_errf(e, PT_EINVAL, "cache=1 needs shape_imm=1 (the row length fixes the registers)");
        int64_t regs = row_chunks(pp, wpr, vec) * vec * (elem_inputs(pp) ? elem_inputs(pp) : 1);
        if (regs > 64)
            return pt_errf(e, PT_EINVAL,
                           "cache=1 would hold %lld values per thread (at most 64): raise wpr or set cache=0",
                           (long long)regs);
    }
    /* a group of warps that finds no element of its row wastes the block */
    if (32 * wpr * vec > 4 * p->cols && wpr > 1)
        return pt_errf(e, PT_EINVAL, "wpr=%lld is too many warps for rows of %lld",
                       (long long)wpr, (long long)p->cols);
    return PT_OK;
}

/* ---------------------------------------------------------------------- */
/* Emission context                                                        */

typedef struct ew {
    const pt_prepared *pp;
    const ex_prog *p;
    ptx_fn *f;
    int64_t tpb, vec, unroll, wpr, cache, online, imm;
    ptx_type it;                 /* index type: u32 or u64 */
    ptx_type ireg;               /* its register type: b32 or b64 */
    ptx_reg in_ptr[EW_MAX_TENSORS], out_ptr[EW_MAX_TENSORS];
    /* per thread (flat: FULL tensors at the first chunk; rows: the row's
     * first chunk of this thread, varies_col tensors) */
    ptx_reg tptr_in[EW_MAX_TENSORS], tptr_out[EW_MAX_TENSORS];
    /* rows: each tensor's row start, base + rowoff(r) * size */
    ptx_reg rptr_in[EW_MAX_TENSORS], rptr_out[EW_MAX_TENSORS];
    ptx_opd rows, cols;          /* immediates or registers (index type) */
    ptx_reg scale;               /* fp8 output scale */
    ptx_opd *val;                /* per node: value of the current element */
    ptx_opd *rowval;             /* per node: value of the current row/chunk */
    bool *avail;                 /* rowval valid */
    /* row kernels, cache=1: per RSUMEXP node, its terms exp(x - m) per
     * element of the thread's chunks (cur indexes them: chunk * vec + j,
     * -1 outside a cached chunk) */
    int cur;
    ptx_opd **memo;
    bool *memo_ok;
    ptx_reg *rcp;                /* per ROW node: its reciprocal (id 0: none) */
    ptx_reg *sumexp_ms;             /* per RSUMEXP after its max: safe(max) */
} ew;


static ptx_reg freg(ew *w) { return ptx_reg_new(w->f, PTX_T_F32); }
static ptx_reg ireg(ew *w) { return ptx_reg_new(w->f, w->ireg); }
static ptx_reg preg(ew *w) { return ptx_reg_new(w->f, PTX_T_PRED); }

static ptx_opd iimm(int64_t v) { return ptx_imm(v); }

static ptx_reg f_op2(ew *w, ptx_op op, ptx_mods m, ptx_opd a, ptx_opd b)
{
    ptx_reg d = freg(w);
    ptx_emit(w->f, op, m, F32T, ptx_r(d), a, b);
    return d;
}

static ptx_reg i_op2(ew *w, ptx_op op, ptx_mods m, ptx_opd a, ptx_opd b)
{
    ptx_reg d = ireg(w);
    ptx_emit(w->f, op, m, PTX_T1(w->it), ptx_r(d), a, b);
    return d;
}

/* a / b and a % b (unsigned): a shift and a mask when b is an immediate
 * power of two (ptxas 13.0 emits a general division for div.u32 by an
 * immediate 128). */
static ptx_reg i_divrem(ew *w, ptx_op op, ptx_opd a, ptx_opd b)
{
    if (b.kind == PTX_O_IMM && b.u.imm > 0 && !(b.u.imm & (b.u.imm - 1))) {
        if (op == PTX_OP_REM) {
            ptx_reg d = ireg(w);
            ptx_emit(w->f, PTX_OP_AND, NOM, PTX_T1(w->ireg), ptx_r(d), a, iimm(b.u.imm - 1));
            return d;
        }
        int sh = 0;
        while (((int64_t)1 << sh) < b.u.imm)
            sh++;
        return i_op2(w, PTX_OP_SHR, NOM, a, iimm(sh));
    }
    return i_op2(w, op, NOM, a, b);
}

static ptx_reg i_mad(ew *w, ptx_opd a, ptx_opd b, ptx_opd c)
{
    ptx_reg d = ireg(w);
    ptx_emit(w->f, PTX_OP_MAD, PTX_MODS(PTX_M_LO), PTX_T1(w->it), ptx_r(d), a, b, c);
    return d;
}


/* ---------------------------------------------------------------------- */
/* Addresses, loads and stores                                             */

/* byte address = base + idx * size: one mul.wide + add (IMAD.WIDE) for a
 * 32-bit index. Row kernels use it once per tensor and row (and, in loops,
 * per access with the column as idx); fixed offsets go in the access's
 * immediate (kit_load / kit_store), so ptxas folds them. */
static ptx_reg addr_of(ew *w, ptx_reg base, ptx_opd idx, int size)
{
    ptx_fn *f = w->f;
    if (idx.kind == PTX_O_IMM && idx.u.imm == 0)
        return base;
    ptx_reg off = ptx_reg_new(f, PTX_T_B64), a = ptx_reg_new(f, PTX_T_B64);
    if (w->it == PTX_T_U32)
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_WIDE), U32T, ptx_r(off), idx, iimm(size));
    else
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U64T, ptx_r(off), idx, iimm(size));
    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(a), ptx_r(base), ptx_r(off));
    return a;
}

/* Loads n consecutive elements of dtype dt at [a + off] into f32 values
 * (read-only path). */
static void load_at(ew *w, ptx_reg a, int64_t off, pt_dtype dt, int n, ptx_opd *out,
                    ptx_reg guard)
{
    kit_io io = {.nc = true, .guard = guard};
    ptx_reg r[16];
    kit_load(w->f, &io, dt, a, off, n, r);
    for (int i = 0; i < n; i++)
        out[i] = ptx_r(r[i]);
}

/* Stores n f32 values as dtype dt at [a + off] (fp8: times the scale). */
static void store_at(ew *w, ptx_reg a, int64_t off, pt_dtype dt, int n, const ptx_opd *v,
                     ptx_reg guard)
{
    kit_io io = {.guard = guard};
    if (dt == PT_E4M3 || dt == PT_E5M2)
        io.scale = w->scale;
    kit_store(w->f, &io, dt, a, off, n, v);
}

static void load_elems(ew *w, ptx_reg base, ptx_opd idx, pt_dtype dt, int n, ptx_opd *out,
                       ptx_reg guard)
{
    load_at(w, addr_of(w, base, idx, dt_bytes(dt)), 0, dt, n, out, guard);
}

static void store_elems(ew *w, ptx_reg base, ptx_opd idx, pt_dtype dt, int n, const ptx_opd *v,
                        ptx_reg guard)
{
    store_at(w, addr_of(w, base, idx, dt_bytes(dt)), 0, dt, n, v, guard);
}

/* Row offset of tensor t for row r (index type). */
static ptx_opd row_offset(ew *w, const ex_tensor *t, ew_layout lay, ptx_opd r)
{
    const ex_prog *p = w->p;
    switch (lay) {
    case EW_SCALAR:
    case EW_ROWVEC: return iimm(0);
    case EW_COLVEC: return r;
    case EW_FULL: return ptx_r(i_op2(w, PTX_OP_MUL, M1(PTX_M_LO), r, w->cols));
    case EW_GENERAL: break;
    }
    /* general: r -> full-shape coordinates of dims 0..nd-2 (immediates) */
    int nd = p->full.ndim;
    ptx_opd acc = iimm(0);
    int64_t inner = 1;
    for (int d = nd - 2; d >= 0; d--) {
        int64_t dim = p->full.dim[d];
        if (t->stride[d] != 0 && dim > 1) {
            ptx_opd q = inner == 1 ? r : ptx_r(i_divrem(w, PTX_OP_DIV, r, iimm(inner)));
            ptx_reg c = i_divrem(w, PTX_OP_REM, q, iimm(dim));
            ptx_reg term = i_op2(w, PTX_OP_MUL, M1(PTX_M_LO), ptx_r(c), iimm(t->stride[d]));
            acc = acc.kind == PTX_O_IMM ? ptx_r(term)
                                        : ptx_r(i_op2(w, PTX_OP_ADD, NOM, acc, ptx_r(term)));
        }
        inner *= dim;
    }
    return acc;
}

static ptx_opd idx_add(ew *w, ptx_opd a, ptx_opd b)
{
    if (a.kind == PTX_O_IMM && a.u.imm == 0)
        return b;
    if (b.kind == PTX_O_IMM && b.u.imm == 0)
        return a;
    if (a.kind == PTX_O_IMM && b.kind == PTX_O_IMM)
        return iimm(a.u.imm + b.u.imm);
    return ptx_r(i_op2(w, PTX_OP_ADD, NOM, a, b));
}

/* ---------------------------------------------------------------------- */
/* Kernel prologue                                                         */

static ptx_opd sreg32(ew *w, ptx_sreg s)
{
    ptx_reg r = ptx_reg_new(w->f, PTX_T_B32);
    ptx_emit(w->f, PTX_OP_MOV, NOM, PTX_T1(PTX_T_U32), ptx_r(r), ptx_sr(s));
    if (w->it == PTX_T_U32)
        return ptx_r(r);
    ptx_reg d = ireg(w);
    ptx_emit(w->f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(d), ptx_r(r));
    return ptx_r(d);
}

static void prologue(ew *w, pt_launch *l)
{
    ptx_fn *f = w->f;
    const ex_prog *p = w->p;
    char name[64];
    l->nargs = 0;
    for (int i = 0; i < p->noutputs; i++) {
        snprintf(name, sizeof name, "out_%s", p->outputs[i].name);
        const char *pn = ptx_param_ptr(f, name, 16);
        l->args[l->nargs++] = (pt_arg){PT_ARG_OUTPUT, i, 0, 0};
        ptx_reg r = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_LD, M1(PTX_M_PARAM), PTX_T1(PTX_T_U64), ptx_r(r), ptx_saddr(pn, 0));
        w->out_ptr[i] = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_CVTA, M2(PTX_M_TO, PTX_M_GLOBAL), PTX_T1(PTX_T_U64), ptx_r(w->out_ptr[i]),
                 ptx_r(r));
    }
    for (int i = 0; i < p->ninputs; i++) {
        snprintf(name, sizeof name, "in_%s", p->inputs[i].name);
        const char *pn = ptx_param_ptr(f, name, 16);
        l->args[l->nargs++] = (pt_arg){PT_ARG_INPUT, i, 0, 0};
        ptx_reg r = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_LD, M1(PTX_M_PARAM), PTX_T1(PTX_T_U64), ptx_r(r), ptx_saddr(pn, 0));
        w->in_ptr[i] = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_CVTA, M2(PTX_M_TO, PTX_M_GLOBAL), PTX_T1(PTX_T_U64), ptx_r(w->in_ptr[i]),
                 ptx_r(r));
    }
    if (w->imm) {
        w->rows = iimm(p->rows);
        w->cols = iimm(p->cols);
    } else {
        const char *names[2] = {"rows", "cols"};
        int64_t vals[2] = {p->rows, p->cols};
        ptx_opd *dst[2] = {&w->rows, &w->cols};
        for (int i = 0; i < 2; i++) {
            const char *pn = ptx_param_add(f, names[i], w->it);
            l->args[l->nargs++] =
                (pt_arg){w->it == PTX_T_U32 ? PT_ARG_U32 : PT_ARG_U64, 0, (uint64_t)vals[i], 0};
            ptx_reg r = ireg(w);
            ptx_emit(f, PTX_OP_LD, M1(PTX_M_PARAM), PTX_T1(w->it), ptx_r(r), ptx_saddr(pn, 0));
            *dst[i] = ptx_r(r);
        }
    }
    if (w->pp->out_dt == PT_E4M3 || w->pp->out_dt == PT_E5M2) {
        const char *pn = ptx_param_add(f, "out_scale", PTX_T_F32);
        l->args[l->nargs++] = (pt_arg){PT_ARG_F32, 0, 0, w->pp->out_scale};
        w->scale = freg(w);
        ptx_emit(f, PTX_OP_LD, M1(PTX_M_PARAM), F32T, ptx_r(w->scale), ptx_saddr(pn, 0));
    }
}

/* Loads the per-row (or per-chunk) inputs: those constant along the row. */
static void load_row_inputs(ew *w, ptx_opd r)
{
    const ex_prog *p = w->p;
    for (int i = 0; i < p->ninputs; i++) {
        const ex_tensor *t = &p->inputs[i];
        if (t->varies_col)
            continue;
        ptx_opd off = row_offset(w, t, w->pp->in_layout[i], r);
        ptx_opd v;
        load_elems(w, w->in_ptr[i], off, w->pp->in_dt, 1, &v, (ptx_reg){0});
        w->rowval[t->node] = v;
        w->avail[t->node] = true;
    }
}

/* Computes every ROW-class node whose operands are available. */
static void eval_row_nodes(ew *w)
{
    const ex_prog *p = w->p;
    for (int i = 0; i < p->nnodes; i++) {
        const ex_node *n = &p->nodes[i];
        if (w->avail[i] || ex_node_class(p, i) != EX_ROW || n->kind == EX_INPUT ||
            (ex_kind_get(n->kind)->flags & EXK_RED))
            continue;
        ptx_opd a[3];
        bool ok = true;
        for (int k = 0; k < n->nargs; k++) {
            ok &= w->avail[n->arg[k]];
            a[k] = w->rowval[n->arg[k]];
        }
        if (!ok)
            continue;
        w->rowval[i] = ex_ptx_node(w->f, n, a);
        w->avail[i] = true;
    }
}

/* The RSUMEXP node whose terms exp(a - b) the SUB node g computes the
 * difference of, when the row kernel kept those terms (memo), else -1. */
static int kept_sum(const ew *w, int g)
{
    const ex_prog *p = w->p;
    if (p->nodes[g].kind != EX_SUB)
        return -1;
    for (int r = 0; r < p->nnodes; r++)
        if (p->nodes[r].kind == EX_RSUMEXP && w->memo_ok[r] &&
            p->nodes[r].arg[0] == p->nodes[g].arg[0] && p->nodes[r].arg[1] == p->nodes[g].arg[1])
            return r;
    return -1;
}

static int memo_of(const ew *w, int g) { return w->cur < 0 ? -1 : kept_sum(w, g); }

/* Evaluates the ELEM nodes in need[] for one element whose ELEM inputs are
 * in w->val (ROW values in w->rowval). Two rewrites of the row kernel:
 * exp(x - m) of a softmax is the term its sum of exponentials already
 * computed for this element (row cached in registers: w->memo), and a
 * division by a sum of exponentials multiplies by the row's reciprocal
 * (w->rcp). That sum is 0, NaN or in [1, cols] (its largest term is
 * exp(0)), where rcp.approx.ftz is within 1 ulp (no subnormal, no slow
 * path: one MUFU.RCP, no CALL) and a * rcp(s) within 2 ulp of a / s, 0/0
 * giving NaN as before; a general divisor keeps div.rn. */
static void eval_elem(ew *w, const bool *need)
{
    const ex_prog *p = w->p;
    for (int i = 0; i < p->nnodes; i++) {
        const ex_node *n = &p->nodes[i];
        if (!need[i] || n->kind == EX_INPUT || ex_node_class(p, i) != EX_ELEM)
            continue;
        ptx_opd a[3];
        for (int k = 0; k < n->nargs; k++) {
            int g = n->arg[k];
            a[k] = ex_node_class(p, g) == EX_ROW ? w->rowval[g] : w->val[g];
        }
        int r = n->kind == EX_EXP ? memo_of(w, n->arg[0]) : -1;
        if (r >= 0) {
            w->val[i] = w->memo[r][w->cur];
        } else if (n->kind == EX_DIV && w->rcp[n->arg[1]].id)
            w->val[i] = ptx_r(f_op2(w, PTX_OP_MUL, NOM, a[0], ptx_r(w->rcp[n->arg[1]])));
        else
            w->val[i] = ex_ptx_node(w->f, n, a);
    }
}

static ptx_opd node_value(ew *w, int i)
{
    return ex_node_class(w->p, i) == EX_ROW ? w->rowval[i] : w->val[i];
}

/* Marks the ELEM nodes needed to compute roots (transitively). */
static void mark_needed(const ex_prog *p, bool *need, const int *roots, int nroots)
{
    for (int i = 0; i < nroots; i++)
        need[roots[i]] = true;
    for (int i = p->nnodes - 1; i >= 0; i--) {
        if (!need[i] || (ex_kind_get(p->nodes[i].kind)->flags & EXK_RED))
            continue;
        for (int k = 0; k < p->nodes[i].nargs; k++)
            need[p->nodes[i].arg[k]] = true;
    }
}

/* mark_needed for a row kernel: an exp(x - m) whose terms the row kept
 * (cache=1) needs nothing below it. */
static void mark_needed_rows(const ew *w, bool *need, const int *roots, int nroots)
{
    const ex_prog *p = w->p;
    for (int i = 0; i < nroots; i++)
        need[roots[i]] = true;
    for (int i = p->nnodes - 1; i >= 0; i--) {
        const ex_node *n = &p->nodes[i];
        if (!need[i] || (ex_kind_get(n->kind)->flags & EXK_RED) ||
            (w->cache && n->kind == EX_EXP && kept_sum(w, n->arg[0]) >= 0))
            continue;
        for (int k = 0; k < n->nargs; k++)
            need[n->arg[k]] = true;
    }
}

/* ---------------------------------------------------------------------- */
/* Flat kernel                                                             */

/* One chunk of n elements at flat index e, eoff elements past the thread's
 * first (FULL tensors: their thread pointer plus an immediate offset). */
static void flat_chunk(ew *w, ptx_opd e, int64_t eoff, int n, ptx_reg guard, const bool *need)
{
    const ex_prog *p = w->p;
    const pt_prepared *pp = w->pp;
    ptx_opd r = iimm(0), c = e;
    bool need_rc = false;
    for (int i = 0; i < p->ninputs; i++)
        need_rc |= pp->in_layout[i] != EW_FULL && pp->in_layout[i] != EW_SCALAR;
    for (int i = 0; i < p->noutputs; i++)
        need_rc |= pp->out_layout[i] != EW_FULL;
    if (need_rc) {
        r = ptx_r(i_divrem(w, PTX_OP_DIV, e, w->cols));
        c = ptx_r(i_divrem(w, PTX_OP_REM, e, w->cols));
    }
    memset(w->avail, 0, (size_t)p->nnodes * sizeof *w->avail);
    load_row_inputs(w, r);
    eval_row_nodes(w);
    ptx_opd vals[EW_MAX_TENSORS][8];
    for (int i = 0; i < p->ninputs; i++) {
        const ex_tensor *t = &p->inputs[i];
        if (!t->varies_col)
            continue;
        if (pp->in_layout[i] == EW_FULL)
            load_at(w, w->tptr_in[i], eoff * dt_bytes(pp->in_dt), pp->in_dt, n, vals[i], guard);
        else
            load_elems(w, w->in_ptr[i], idx_add(w, row_offset(w, t, pp->in_layout[i], r), c),
                       pp->in_dt, n, vals[i], guard);
    }
    ptx_opd outv[EW_MAX_TENSORS][8];
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < p->ninputs; i++)
            if (p->inputs[i].varies_col)
                w->val[p->inputs[i].node] = vals[i][j];
        eval_elem(w, need);
        for (int o = 0; o < p->noutputs; o++)
            outv[o][j] = node_value(w, p->outputs[o].node);
    }
    for (int o = 0; o < p->noutputs; o++) {
        const ex_tensor *t = &p->outputs[o];
        if (pp->out_layout[o] == EW_FULL)
            store_at(w, w->tptr_out[o], eoff * dt_bytes(pp->out_dt), pp->out_dt, n, outv[o], guard);
        else
            store_elems(w, w->out_ptr[o], idx_add(w, row_offset(w, t, pp->out_layout[o], r), c),
                        pp->out_dt, n, outv[o], guard);
    }
}

static int emit_flat(ew *w, pt_launch *l)
{
    ptx_fn *f = w->f;
    const ex_prog *p = w->p;
    int64_t n = p->rows * p->cols;
    int64_t per_block = w->tpb * w->vec * w->unroll;
    if ((n + per_block - 1) / per_block > EW_MAX_GRID) /* check() refuses these */
        return pt_errf(&f->mod->err, PT_ERANGE, "grid too large");
    l->grid[0] = (unsigned)((n + per_block - 1) / per_block);
    bool *need = pt_arena_alloc(f->mod->arena, (size_t)p->nnodes);
    int roots[EW_MAX_TENSORS];
    for (int o = 0; o < p->noutputs; o++)
        roots[o] = p->outputs[o].node;
    mark_needed(p, need, roots, p->noutputs);

    ptx_opd tid = sreg32(w, PTX_S_TID_X), cta = sreg32(w, PTX_S_CTAID_X);
    ptx_opd total = w->imm ? iimm(n) : ptx_r(i_op2(w, PTX_OP_MUL, M1(PTX_M_LO), w->rows, w->cols));
    /* first chunk of this thread: (cta*unroll)*tpb + tid */
    ptx_reg base = i_mad(w, cta, iimm(w->unroll * w->tpb), tid);
    /* FULL tensors: one pointer per thread, chunks at immediate offsets */
    ptx_reg e0 = i_op2(w, PTX_OP_MUL, M1(PTX_M_LO), ptx_r(base), iimm(w->vec));
    for (int i = 0; i < p->ninputs; i++)
        if (w->pp->in_layout[i] == EW_FULL)
            w->tptr_in[i] = addr_of(w, w->in_ptr[i], ptx_r(e0), dt_bytes(w->pp->in_dt));
    for (int o = 0; o < p->noutputs; o++)
        if (w->pp->out_layout[o] == EW_FULL)
            w->tptr_out[o] = addr_of(w, w->out_ptr[o], ptx_r(e0), dt_bytes(w->pp->out_dt));
    bool tail = w->imm ? n % w->vec != 0 : w->vec > 1;
    for (int u = 0; u < w->unroll; u++) {
        int skip = ptx_label_new(f);
        int64_t eu = u * w->tpb * w->vec;
        ptx_opd e = idx_add(w, ptx_r(e0), iimm(eu));
        ptx_reg p_out = preg(w);
        ptx_emit(f, PTX_OP_SETP, M1(PTX_M_GE), PTX_T1(w->it), ptx_r(p_out), e, total);
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(skip)), p_out, false);
        int scalar = -1;
        if (tail) {
            /* a partial last chunk goes to the scalar path */
            scalar = ptx_label_new(f);
            ptx_reg end = i_op2(w, PTX_OP_ADD, NOM, e, iimm(w->vec));
            ptx_reg p_part = preg(w);
            ptx_emit(f, PTX_OP_SETP, M1(PTX_M_GT), PTX_T1(w->it), ptx_r(p_part), ptx_r(end), total);
            ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(scalar)), p_part, false);
        }
        flat_chunk(w, e, eu, (int)w->vec, (ptx_reg){0}, need);
        if (tail) {
            ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(skip));
            ptx_label_place(f, scalar);
            for (int j = 0; j < w->vec - 1; j++) {
                ptx_opd ej = idx_add(w, e, iimm(j));
                ptx_reg pj = preg(w);
                ptx_emit(f, PTX_OP_SETP, M1(PTX_M_LT), PTX_T1(w->it), ptx_r(pj), ej, total);
                flat_chunk(w, ej, eu + j, 1, pj, need);
            }
        }
        ptx_label_place(f, skip);
    }
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);
    return PT_OK;
}

/* ---------------------------------------------------------------------- */
/* Row kernel                                                              */

typedef enum red_op { RED_SUM, RED_MAX, RED_PAIR } red_op;

/* One reduction of a pass: a sum, a max, or a softmax (max, sum of
 * exponentials) pair computed online (gen/kit/reduce.h, which holds the
 * -inf rules). */
typedef struct red_slot {
    int node;        /* the reduction node (for a pair: the RSUMEXP) */
    int max_node;    /* pair: the RMAX node, else -1 */
    red_op op;
    ptx_reg acc;     /* RED_SUM, RED_MAX */
    kit_softmax st;  /* RED_PAIR */
} red_slot;

/* The rows of a block and this thread's place in its row. */
typedef struct row_ctx {
    ptx_opd row, lane_in_row, row_in_block;
    ptx_reg store_ok;
    ptx_reg c0;                      /* first column: lane_in_row * vec */
    int64_t nchunks;                 /* cache mode: chunks per thread */
    ptx_opd (*cached)[EW_MAX_TENSORS][8]; /* cache mode: [chunk][input][j] */
    bool *loaded;                    /* cache mode: chunk loaded */
    ptx_reg valid[64];               /* cache mode: chunk in range (0: always) */
} row_ctx;

/* Byte offset of cached chunk k from the thread's pointers. */
static int64_t chunk_off(const ew *w, int64_t k, pt_dtype dt)
{
    return k * 32 * w->wpr * w->vec * dt_bytes(dt);
}

/* Loads chunk k (cache mode; -1: the loop's chunk at column c) of every
 * ELEM input into vals. */
static void row_load(ew *w, int64_t k, ptx_opd c, ptx_opd vals[EW_MAX_TENSORS][8], ptx_reg guard)
{
    const ex_prog *p = w->p;
    pt_dtype dt = w->pp->in_dt;
    for (int i = 0; i < p->ninputs; i++) {
        if (!p->inputs[i].varies_col)
            continue;
        if (k >= 0)
            load_at(w, w->tptr_in[i], chunk_off(w, k, dt), dt, (int)w->vec, vals[i], guard);
        else
            load_at(w, addr_of(w, w->rptr_in[i], c, dt_bytes(dt)), 0, dt, (int)w->vec, vals[i],
                    guard);
    }
}

static void set_elem_inputs(ew *w, ptx_opd vals[EW_MAX_TENSORS][8], int j)
{
    for (int i = 0; i < w->p->ninputs; i++)
        if (w->p->inputs[i].varies_col)
            w->val[w->p->inputs[i].node] = vals[i][j];
}

/* Accumulates element values into the sum and max slots (pairs: per
 * chunk, in pass_body). A sum of exponentials after its max (online=0)
 * adds exp(x - safe(m)), kept for the output pass when the row is cached. */
static void accumulate(ew *w, red_slot *s, int ns, ptx_reg guard)
{
    for (int i = 0; i < ns; i++) {
        const ex_node *n = &w->p->nodes[s[i].node];
        ptx_opd v = node_value(w, n->arg[0]);
        if (s[i].op == RED_PAIR)
            continue;
        if (n->kind == EX_RSUMEXP) {
            v = ptx_r(kit_softmax_exp(w->f, v, ptx_r(w->sumexp_ms[s[i].node]), 1.0f));
            if (w->cur >= 0)
                w->memo[s[i].node][w->cur] = v;
        }
        kit_red_step(w->f, s[i].op == RED_MAX ? KIT_RED_MAX : KIT_RED_SUM, s[i].acc, v, guard);
    }
}

/* Runs body over this thread's chunks of the row: unrolled over cached
 * chunks (k = 0, 1, ...), or a loop (k = -1, the column in c). */
typedef void (*chunk_fn)(ew *w, row_ctx *rc, void *arg, ptx_opd vals[EW_MAX_TENSORS][8],
                         ptx_opd c, int64_t k, ptx_reg guard);

static void for_chunks(ew *w, row_ctx *rc, chunk_fn body, void *arg)
{
    ptx_fn *f = w->f;
    int64_t T = 32 * w->wpr;
    if (w->cache) {
        for (int64_t k = 0; k < rc->nchunks; k++) {
            ptx_opd c = idx_add(w, ptx_r(rc->c0), iimm(k * T * w->vec));
            if (!rc->loaded[k]) {
                if ((k + 1) * T * w->vec > w->p->cols) {
                    rc->valid[k] = preg(w);
                    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_LT), PTX_T1(w->it), ptx_r(rc->valid[k]), c,
                             w->cols);
                }
                row_load(w, k, c, rc->cached[k], rc->valid[k]);
                rc->loaded[k] = true;
            }
            body(w, rc, arg, rc->cached[k], c, k, rc->valid[k]);
        }
        return;
    }
    /* loop: for (c = c0; c < cols; c += T*vec) */
    int top = ptx_label_new(f), done = ptx_label_new(f);
    ptx_reg c = ireg(w);
    ptx_emit(f, PTX_OP_MOV, NOM, PTX_T1(w->it), ptx_r(c), ptx_r(rc->c0));
    ptx_label_place(f, top);
    ptx_reg p = preg(w);
    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_GE), PTX_T1(w->it), ptx_r(p), ptx_r(c), w->cols);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(done)), p, false);
    ptx_opd vals[EW_MAX_TENSORS][8];
    row_load(w, -1, ptx_r(c), vals, (ptx_reg){0});
    body(w, rc, arg, vals, ptx_r(c), -1, (ptx_reg){0});
    ptx_emit(f, PTX_OP_ADD, NOM, PTX_T1(w->it), ptx_r(c), ptx_r(c), iimm(T * w->vec));
    ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top));
    ptx_label_place(f, done);
}

typedef struct pass_arg {
    red_slot *s;
    int ns;
    bool *need;
} pass_arg;

static void pass_body(ew *w, row_ctx *rc, void *arg, ptx_opd vals[EW_MAX_TENSORS][8], ptx_opd c,
                      int64_t k, ptx_reg guard)
{
    (void)rc;
    (void)c;
    pass_arg *pa = arg;
    /* pv[i * vec + j]: element j of the chunk for pair slot i */
    ptx_opd *pv = pt_arena_alloc(w->f->mod->arena, (size_t)(pa->ns * w->vec) * sizeof *pv);
    for (int j = 0; j < w->vec; j++) {
        w->cur = k >= 0 ? (int)(k * w->vec + j) : -1;
        set_elem_inputs(w, vals, j);
        eval_elem(w, pa->need);
        accumulate(w, pa->s, pa->ns, guard);
        for (int i = 0; i < pa->ns; i++)
            if (pa->s[i].op == RED_PAIR)
                pv[i * w->vec + j] = node_value(w, w->p->nodes[pa->s[i].node].arg[0]);
    }
    w->cur = -1;
    for (int i = 0; i < pa->ns; i++) {
        red_slot *s = &pa->s[i];
        if (s->op != RED_PAIR)
            continue;
        /* one online update per chunk (pairs exist in loops only) */
        kit_softmax_update(w->f, &s->st, &pv[i * w->vec], NULL, (int)w->vec, 1, NULL);
    }
}

/* Reduces the pass's slots over the row's threads: sums, maxima and the
 * pairs' maxima in one all-reduce, then each pair's sum rescaled to the
 * row max (kit_softmax_rescale; the factor also rescales the terms the
 * pass kept) and summed in a second. */
static void reduce_slots(ew *w, red_slot *s, int ns, const kit_warps *g)
{
    ptx_fn *f = w->f;
    pt_arena *a = f->mod->arena;
    kit_redop *ops = pt_arena_alloc(a, (size_t)ns * sizeof *ops);
    ptx_reg *acc = pt_arena_alloc(a, (size_t)ns * sizeof *acc);
    for (int i = 0; i < ns; i++) {
        ops[i] = s[i].op == RED_SUM ? KIT_RED_SUM : KIT_RED_MAX;
        if (s[i].op == RED_PAIR) {
            acc[i] = freg(w);
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(acc[i]), ptx_r(s[i].st.m));
        } else
            acc[i] = s[i].acc;
    }
    kit_red_group(f, g, ops, acc, ns);
    int np = 0;
    for (int i = 0; i < ns; i++) {
        if (s[i].op != RED_PAIR)
            continue;
        kit_softmax_rescale(f, &s[i].st, ptx_r(acc[i]));
        ops[np] = KIT_RED_SUM;
        acc[np++] = s[i].st.s;
    }
    if (np)
        kit_red_group(f, g, ops, acc, np);
}

static void out_body(ew *w, row_ctx *rc, void *arg, ptx_opd vals[EW_MAX_TENSORS][8], ptx_opd c,
                     int64_t k, ptx_reg guard)
{
    const ex_prog *p = w->p;
    bool *need = arg;
    ptx_opd outv[EW_MAX_TENSORS][8];
    for (int j = 0; j < w->vec; j++) {
        w->cur = k >= 0 ? (int)(k * w->vec + j) : -1;
        set_elem_inputs(w, vals, j);
        eval_elem(w, need);
        for (int o = 0; o < p->noutputs; o++)
            outv[o][j] = node_value(w, p->outputs[o].node);
    }
    w->cur = -1;
    ptx_reg g = rc->store_ok;
    if (guard.id) {
        g = preg(w);
        ptx_emit(w->f, PTX_OP_AND, NOM, PREDT, ptx_r(g), ptx_r(guard), ptx_r(rc->store_ok));
    }
    pt_dtype dt = w->pp->out_dt;
    for (int o = 0; o < p->noutputs; o++) {
        if (p->outputs[o].per_row)
            continue;
        if (k >= 0)
            store_at(w, w->tptr_out[o], chunk_off(w, k, dt), dt, (int)w->vec, outv[o], g);
        else
            store_at(w, addr_of(w, w->rptr_out[o], c, dt_bytes(dt)), 0, dt, (int)w->vec, outv[o],
                     g);
    }
}

/* The pointers of the thread's row: each column tensor's row start
 * (base + rowoff(r) * size, the div/mod chain of a general layout once per
 * row) and, cached, its first chunk (plus c0 * size): every access is
 * then a pointer plus an immediate (cache=1) or one mul.wide-add from the
 * column (loop). */
static void row_pointers(ew *w, row_ctx *rc)
{
    const ex_prog *p = w->p;
    for (int i = 0; i < p->ninputs; i++) {
        if (!p->inputs[i].varies_col)
            continue;
        int sz = dt_bytes(w->pp->in_dt);
        w->rptr_in[i] = addr_of(w, w->in_ptr[i],
                                row_offset(w, &p->inputs[i], w->pp->in_layout[i], rc->row), sz);
        if (w->cache)
            w->tptr_in[i] = addr_of(w, w->rptr_in[i], ptx_r(rc->c0), sz);
    }
    for (int o = 0; o < p->noutputs; o++) {
        if (p->outputs[o].per_row)
            continue;
        int sz = dt_bytes(w->pp->out_dt);
        w->rptr_out[o] = addr_of(w, w->out_ptr[o],
                                 row_offset(w, &p->outputs[o], w->pp->out_layout[o], rc->row), sz);
        if (w->cache)
            w->tptr_out[o] = addr_of(w, w->rptr_out[o], ptx_r(rc->c0), sz);
    }
}

/* After a pass: the reductions' row values, and the reciprocal of each sum
 * of exponentials that an element divides by (eval_elem). */
static void finish_slots(ew *w, red_slot *s, int ns)
{
    const ex_prog *p = w->p;
    for (int i = 0; i < ns; i++) {
        const ex_node *n = &p->nodes[s[i].node];
        ptx_opd v = ptx_r(s[i].op == RED_PAIR ? s[i].st.s : s[i].acc);
        if (n->kind == EX_RMEAN)
            v = ptx_r(f_op2(w, PTX_OP_MUL, NOM, v, ptx_f32((float)(1.0 / (double)p->cols))));
        w->rowval[s[i].node] = v;
        w->avail[s[i].node] = true;
        if (s[i].op == RED_PAIR) {
            w->rowval[s[i].max_node] = ptx_r(s[i].st.m);
            w->avail[s[i].max_node] = true;
        }
        if (w->memo[s[i].node])
            w->memo_ok[s[i].node] = true;
        if (n->kind != EX_RSUMEXP)
            continue;
        for (int d = 0; d < p->nnodes; d++)
            if (p->nodes[d].kind == EX_DIV && p->nodes[d].arg[1] == s[i].node &&
                ex_node_class(p, d) == EX_ELEM && !w->rcp[s[i].node].id) {
                w->rcp[s[i].node] = freg(w);
                ptx_emit(w->f, PTX_OP_RCP, M2(PTX_M_APPROX, PTX_M_FTZ), F32T,
                         ptx_r(w->rcp[s[i].node]), v);
            }
    }
}

static int emit_rows(ew *w, pt_launch *l)
{
    ptx_fn *f = w->f;
    const ex_prog *p = w->p;
    pt_arena *a = f->mod->arena;
    int64_t T = 32 * w->wpr, rpb = w->tpb / T;
    l->grid[0] = (unsigned)((p->rows + rpb - 1) / rpb);
    row_ctx rc = {0};
    ptx_opd tid = sreg32(w, PTX_S_TID_X), cta = sreg32(w, PTX_S_CTAID_X);
    rc.row_in_block = rpb == 1 ? iimm(0) : ptx_r(i_divrem(w, PTX_OP_DIV, tid, iimm(T)));
    rc.lane_in_row = rpb == 1 ? tid : ptx_r(i_divrem(w, PTX_OP_REM, tid, iimm(T)));
    ptx_reg row = i_mad(w, cta, iimm(rpb), rc.row_in_block);
    /* rows past the end recompute the last row (barriers stay uniform) and
     * store nothing */
    rc.store_ok = preg(w);
    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_LT), PTX_T1(w->it), ptx_r(rc.store_ok), ptx_r(row), w->rows);
    ptx_reg last = i_op2(w, PTX_OP_SUB, NOM, w->rows, iimm(1));
    rc.row = ptx_r(i_op2(w, PTX_OP_MIN, NOM, ptx_r(row), ptx_r(last)));
    rc.c0 = i_op2(w, PTX_OP_MUL, M1(PTX_M_LO), rc.lane_in_row, iimm(w->vec));
    rc.nchunks = row_chunks(w->pp, w->wpr, w->vec);
    if (w->cache) {
        rc.cached = pt_arena_alloc(a, (size_t)rc.nchunks * sizeof *rc.cached);
        rc.loaded = pt_arena_alloc(a, (size_t)rc.nchunks);
    }
    memset(w->avail, 0, (size_t)p->nnodes * sizeof *w->avail);
    load_row_inputs(w, rc.row);
    eval_row_nodes(w);
    row_pointers(w, &rc);

    /* shared scratch for cross-warp reductions: [values][rpb][wpr] f32,
     * one value per reduction of a level at most */
    int maxvals = 0;
    for (int lv = 1; lv <= p->nlevels; lv++) {
        int nv = 0;
        for (int i = 0; i < p->nnodes; i++)
            nv += p->nodes[i].level == lv && (ex_kind_get(p->nodes[i].kind)->flags & EXK_RED);
        if (nv > maxvals)
            maxvals = nv;
    }
    kit_warps warps, *g = NULL;
    if (w->wpr > 1) {
        ptx_opd grp = rc.row_in_block, in_grp = rc.lane_in_row;
        if (w->it != PTX_T_U32) {
            ptx_reg g32 = ptx_reg_new(f, PTX_T_B32), l32 = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U32, PTX_T_U64), ptx_r(g32), grp);
            ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U32, PTX_T_U64), ptx_r(l32), in_grp);
            grp = ptx_r(g32);
            in_grp = ptx_r(l32);
        }
        warps = kit_warps_new(f, "red", (int)rpb, (int)w->wpr, maxvals, grp, in_grp);
        g = &warps;
    }

    for (int lv = 1; lv <= p->nlevels; lv++) {
        /* sub-pass 0: everything of this level (pairs when online);
         * sub-pass 1 (online=0): sums of exponentials after their max */
        for (int sub = 0; sub < 2; sub++) {
            red_slot *s = pt_arena_alloc(a, (size_t)p->nnodes * sizeof *s);
            int ns = 0;
            for (int i = 0; i < p->nnodes; i++) {
                const ex_node *n = &p->nodes[i];
                if (n->level != lv || !(ex_kind_get(n->kind)->flags & EXK_RED) || w->avail[i])
                    continue;
                bool pair_max = false; /* RMAX folded into a pair */
                int pair = -1;
                if (n->kind == EX_RSUMEXP && p->nodes[n->arg[1]].kind == EX_RMAX &&
                    p->nodes[n->arg[1]].arg[0] == n->arg[0] && p->nodes[n->arg[1]].level == lv)
                    pair = n->arg[1];
                if (n->kind == EX_RMAX && w->online)
                    for (int k = 0; k < p->nnodes; k++)
                        if (p->nodes[k].kind == EX_RSUMEXP && p->nodes[k].arg[1] == i &&
                            p->nodes[k].arg[0] == n->arg[0])
                            pair_max = true;
                if (pair_max)
                    continue;
                if (pair >= 0 && !w->online && sub == 0)
                    continue; /* needs its max first */
                if (sub == 1 && !(pair >= 0 && !w->online))
                    continue;
                red_slot *r = &s[ns++];
                r->node = i;
                r->max_node = pair >= 0 && w->online ? pair : -1;
                r->op = r->max_node >= 0 ? RED_PAIR : n->kind == EX_RMAX ? RED_MAX : RED_SUM;
                if (r->op == RED_PAIR) {
                    r->st = kit_softmax_new(f, 1.0f);
                    r->st.fresh = false; /* a loop body updates it many times */
                }
                else
                    r->acc = kit_red_init(f, r->op == RED_MAX ? KIT_RED_MAX : KIT_RED_SUM);
                if (n->kind == EX_RSUMEXP && w->cache)
                    w->memo[i] = pt_arena_alloc(a, (size_t)(rc.nchunks * w->vec) * sizeof **w->memo);
                if (n->kind == EX_RSUMEXP && r->op == RED_SUM) /* its max is known */
                    w->sumexp_ms[i] = kit_softmax_safe_max(f, node_value(w, n->arg[1]));
            }
            if (!ns)
                continue;
            bool *need = pt_arena_alloc(a, (size_t)p->nnodes);
            int *roots = pt_arena_alloc(a, (size_t)(2 * ns) * sizeof *roots);
            int nr = 0;
            for (int i = 0; i < ns; i++)
                roots[nr++] = p->nodes[s[i].node].arg[0];
            mark_needed_rows(w, need, roots, nr);
            pass_arg pa = {s, ns, need};
            for_chunks(w, &rc, pass_body, &pa);
            reduce_slots(w, s, ns, g);
            finish_slots(w, s, ns);
            eval_row_nodes(w);
        }
    }
    /* per-row outputs: lane 0 of the group */
    ptx_reg lane0 = preg(w);
    ptx_emit(f, PTX_OP_SETP, M1(PTX_M_EQ), PTX_T1(w->it), ptx_r(lane0), rc.lane_in_row, iimm(0));
    ptx_reg g0 = preg(w);
    ptx_emit(f, PTX_OP_AND, NOM, PREDT, ptx_r(g0), ptx_r(lane0), ptx_r(rc.store_ok));
    int nelem_out = 0;
    int roots[EW_MAX_TENSORS];
    for (int o = 0; o < p->noutputs; o++) {
        const ex_tensor *t = &p->outputs[o];
        if (t->per_row) {
            ptx_opd v = w->rowval[t->node];
            store_elems(w, w->out_ptr[o], rc.row, w->pp->out_dt, 1, &v, g0);
        } else
            roots[nelem_out++] = t->node;
    }
    if (nelem_out) {
        bool *need = pt_arena_alloc(a, (size_t)p->nnodes);
        mark_needed_rows(w, need, roots, nelem_out);
        for_chunks(w, &rc, out_body, need);
    }
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);
    return PT_OK;
}

static int emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    const ex_prog *p = pp->prog;
    ew w = {0};
    w.pp = pp;
    w.p = p;
    w.tpb = pt_config_get(c, "tpb", 256);
    w.vec = pt_config_get(c, "vec", 1);
    w.unroll = pt_config_get(c, "unroll", 1);
    w.wpr = pt_config_get(c, "wpr", 1);
    w.cache = pt_config_get(c, "cache", 0);
    /* a cached row takes its max first whatever `online` says: the sum's
     * terms exp(x - m) are then the output's, one exp per element, where
     * thread-local online statistics would add a rescale exp per thread
     * (18 MUFU for 16 f32 elements against 17); online matters for cache=0,
     * where it saves a pass over memory */
    w.online = pt_config_get(c, "online", 1) && !w.cache;
    w.imm = pt_config_get(c, "shape_imm", 1);
    w.it = pp->idx64 ? PTX_T_U64 : PTX_T_U32;
    w.ireg = pp->idx64 ? PTX_T_B64 : PTX_T_B32;
    char cfg[256];
    pt_config_str(c, cfg, sizeof cfg); /* before strlen: argument order is unspecified */
    uint64_t h = pt_hash64(cfg, strlen(cfg));
    char name[64];
    snprintf(name, sizeof name, "ew_%s_%016llx", p->has_reduction ? "row" : "flat",
             (unsigned long long)(h ^ pt_hash64(pp->prob.expr, strlen(pp->prob.expr))));
    w.f = ptx_fn_new(m, name);
    w.f->maxntid[0] = (int)w.tpb;
    w.val = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.val);
    w.rowval = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.rowval);
    w.avail = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.avail);
    w.memo = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.memo);
    w.memo_ok = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.memo_ok);
    w.rcp = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.rcp);
    w.sumexp_ms = pt_arena_alloc(m->arena, (size_t)p->nnodes * sizeof *w.sumexp_ms);
    w.cur = -1;
    for (int i = 0; i < p->nnodes; i++)
        if (p->nodes[i].kind == EX_CONST) {
            w.val[i] = w.rowval[i] = ptx_f32((float)p->nodes[i].value);
        }
    prologue(&w, l);
    l->block[0] = (unsigned)w.tpb;
    l->block[1] = l->block[2] = 1;
    l->grid[1] = l->grid[2] = 1;
    l->smem = 0;
    l->align = (int)(w.vec * dt_bytes(pp->in_dt) > w.vec * dt_bytes(pp->out_dt)
                         ? w.vec * dt_bytes(pp->in_dt)
                         : w.vec * dt_bytes(pp->out_dt));
    l->entry = w.f->name;
    int rc = p->has_reduction ? emit_rows(&w, l) : emit_flat(&w, l);
    if (!rc && m->err.code)
        rc = m->err.code;
    if (rc && m->err.code)
        pt_errf(e, m->err.code, "%s", m->err.msg);
    return rc;
}

/* ---------------------------------------------------------------------- */

static pt_tensor ew_tensor(const ex_tensor *x, pt_dtype dt)
{
    pt_tensor t = {.name = x->name, .dtype = dt, .numel = x->numel, .ndim = x->shape.ndim};
    for (int d = 0; d < x->shape.ndim && d < PT_TENSOR_MAX_DIMS; d++)
        t.shape[d] = x->shape.dim[d];
    return t;
}

static int tensors(const pt_prepared *pp, int *nin, int *nout, pt_tensor *in, pt_tensor *out)
{
    const ex_prog *p = pp->prog;
    *nin = p->ninputs;
    *nout = p->noutputs;
    for (int i = 0; in && i < p->ninputs; i++)
        in[i] = ew_tensor(&p->inputs[i], pp->in_dt);
    for (int i = 0; out && i < p->noutputs; i++)
        out[i] = ew_tensor(&p->outputs[i], pp->out_dt);
    return PT_OK;
}

static int reference(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    const ex_prog *p = pp->prog;
    const double *ins[EW_MAX_TENSORS];
    double *outs[EW_MAX_TENSORS];
    for (int i = 0; i < p->ninputs; i++)
        ins[i] = in[i].data;
    for (int i = 0; i < p->noutputs; i++)
        outs[i] = out[i].data;
    int rc = ex_reference(p, ins, outs, e);
    if (rc)
        return rc;
    /* fp8 outputs hold value*scale */
    if (pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2)
        for (int i = 0; i < p->noutputs; i++)
            for (int64_t k = 0; k < out[i].numel; k++)
                outs[i][k] *= pp->out_scale;
    return PT_OK;
}

/* The sampled rows' walk shared by reference_at and magnitude: element
 * idx[j] of output `out` (idx NULL: element j) into vals[j], times the fp8
 * output scale. A shallow copy of the bound program with rows = 1, its
 * inputs offset to row r, is exactly ex_reference's (ex_magnitude's) row
 * loop at r (row 0 of the copy), so the values are the full program's, at
 * the cost of one row per distinct row. `who` names the caller in errors. */
static int walk_rows(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                     int64_t n, bool mag, const char *who, double *vals, pt_err *e)
{
    const ex_prog *p = pp->prog;
    if (out < 0 || out >= p->noutputs)
        return pt_errf(e, PT_EINVAL, "%s: no output %d", who, out);
    const ex_tensor *ot = &p->outputs[out];
    ex_prog one = *p;
    one.rows = 1;
    double *scratch = malloc((size_t)p->noutputs * (size_t)p->cols * sizeof *scratch);
    if (!scratch)
        return pt_errf(e, PT_ENOMEM, "%s: out of memory for %lld columns", who,
                       (long long)p->cols);
    const double *ins[EW_MAX_TENSORS];
    double *outs[EW_MAX_TENSORS];
    for (int i = 0; i < p->noutputs; i++)
        outs[i] = scratch + (size_t)i * (size_t)p->cols;
    int rc = PT_OK;
    int64_t have = -1;
    for (int64_t j = 0; j < n && !rc; j++) {
        int64_t at = idx ? idx[j] : j;
        if (at < 0 || at >= ot->numel) {
            rc = pt_errf(e, PT_ERANGE, "%s: index %lld outside output '%s' (%lld elements)", who,
                         (long long)at, ot->name, (long long)ot->numel);
            break;
        }
        int64_t r = ot->per_row ? at : at / p->cols;
        if (r != have) {
            for (int i = 0; i < p->ninputs; i++)
                ins[i] = in[i].data + ex_row_offset(p, &p->inputs[i], r);
            rc = mag ? ex_magnitude(&one, ins, NULL, outs, e) : ex_reference(&one, ins, outs, e);
            have = r;
        }
        vals[j] = ot->per_row ? outs[out][0] : outs[out][at % p->cols];
        if (pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2) /* a magnitude stays >= 0 */
            vals[j] *= mag ? fabsf(pp->out_scale) : pp->out_scale;
    }
    free(scratch);
    return rc;
}

/* Sampled reference: the program evaluated on the sampled rows only. */
static int reference_at(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                        int n, double *vals, pt_err *e)
{
    return walk_rows(pp, in, out, idx, n, false, "reference_at", vals, e);
}

/* Accumulation magnitude (pt_op.magnitude, for the verifier's error
 * model): ex_magnitude of the program (inputs exact) on the rows the
 * indices touch, one row at a time as reference_at evaluates them, times
 * the fp8 output scale. The accumulation: f32 row sums; every config
 * spreads a row over at least one warp, so the longest chain of dependent
 * additions is a lane's ceil(cols/32) terms, then at most 10 combining
 * steps (5 shuffle levels, 5 across warps); none without a reduction. */
static int magnitude(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                     int64_t n, double *mag, pt_accum *acc, pt_err *e)
{
    const ex_prog *p = pp->prog;
    if (out < 0 || out >= p->noutputs)
        return pt_errf(e, PT_EINVAL, "magnitude: no output %d", out);
    acc->dtype = PT_F32;
    acc->len = p->has_reduction ? (p->cols + 31) / 32 + 10 : 0; /* >= a warp per row */
    for (int64_t j = 0; j < n; j++)
        mag[j] = 0.0;
    if (!p->has_reduction)
        return PT_OK;
    return walk_rows(pp, in, out, idx, n, true, "magnitude", mag, e);
}

static double flops(const pt_prepared *pp) { return ex_flops(pp->prog); }

static double bytes(const pt_prepared *pp)
{
    pt_dtype in[EW_MAX_TENSORS], out[EW_MAX_TENSORS];
    for (int i = 0; i < EW_MAX_TENSORS; i++) {
        in[i] = pp->in_dt;
        out[i] = pp->out_dt;
    }
    return (double)ex_bytes(pp->prog, in, out);
}

const ex_prog *gen_elementwise_prog(const pt_prepared *pp) { return pp->prog; }

static const pt_problem examples[] = {
    PT_EW("y = gelu(x * w + b)", "x=1024x1024,w=1024,b=1024", PT_F16, PT_F16),
    PT_EW("y = softmax(x, -1)", "x=1024x1024", PT_F16, PT_F16),
};

const pt_op gen_elementwise_op = {
    .name = "elementwise",
    .summary = "fused elementwise and last-dim row-reduction chains (softmax, norms, activations)",
    .schema = &gen_elementwise_schema,
    .prepare = prepare,
    .space = space,
    .defaults = defaults,
    .check = check,
    .emit = emit,
    .tensors = tensors,
    .reference = reference,
    .reference_at = reference_at,
    .magnitude = magnitude,
    .flops = flops,
    .bytes = bytes,
    .examples = examples,
    .nexamples = 2,
};
