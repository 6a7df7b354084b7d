/* GEMM for sm_80..sm_89 (and anything newer that runs mma.sync):
 *
 *   D[b] = epilogue(acc),  acc = scale_a * scale_b * op(A[b]) * op(B[b])
 *
 * with the default epilogue `alpha * acc + beta * c` (C read only when
 * beta != 0) or any gen/expr expression over acc, alpha, beta, c, per-row
 * name[m] and per-column name[n] vectors and full M x N tensors.
 *
 * Layout letters name A then B as they appear in D = A * B, stored
 * row-major: 'n' as written (A is M x K, B is K x N), 't' stored transposed
 * (A as K x M, B as N x K). D (and C, and full epilogue tensors) are M x N
 * row-major, or column-major with d_colmajor. Batches are packed one after
 * another (stride = rows * ld).
 *
 * The kernel (one CTA per BM x BN tile; grid = tiles x splitk x batch):
 *   tile order  the linear CTA index walks groups of `raster` tile rows
 *               column by column (L2 reuse of B across a group); with
 *               `persistent` = K (1 or 2), min(tiles, K x SMs) CTAs, sized
 *               at launch (pt_launch.grid_per_sm), loop over the tiles
 *               (t += nctaid.x; any grid x from 1 is right)
 *   main loop   gemm_tile.c: cp.async into a `stages`-deep ring of
 *               shared-memory tiles, ldmatrix + mma.sync per warp tile
 *               (or FFMA per thread tile for f32)
 *   epilogue    gemm_epi.c: staging, k-slice and split-K reduction,
 *               expression, vector stores
 * Shapes, leading dimensions and strides are immediates: a kernel is
 * specialised to its problem, so predication exists only on the edges that
 * the shape has (M % BM, N % BN, K % BK) and copies are as wide as the
 * alignment of the leading dimensions allows (16-byte cp.async when every
 * row is 16-byte aligned; narrower, down to one element, otherwise).
 * Addresses are 64-bit (base + mul.wide), so no tensor size overflows the
 * index math; sizes are limited to M, N, K < 2^31 and batch <= 65535.
 *
 * dyn=m (docs/runtime.md): M is the u32 parameter m instead: A's rows past
 * M are zero-filled, D/C/epilogue rows predicated, M-row batch strides
 * computed; grid (ceil(M / bm), column tiles x splitk, batch) with the
 * linear tile column-tile * tile-rows + ctaid.x (persistent: the tiles at
 * m_cap capped by K x SMs at launch, tile count from M); the split-K workspace is laid out for m_cap =
 * pow2ceil(m), so the PTX is the same for every M (split-K: every M of
 * the bucket (m_cap/2, m_cap]). A column-major D's columns are M long: its
 * leading dimension (C's, the M x N tensors') follows M unless given
 * (pp->ldd_m, ldc_m), the epilogue's units along M are one element. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gemm_int.h"
#include "gen/expr_mag.h"

#define NOM PTX_NOMODS
#define M1(a) PTX_MODS(a)
#define M2(a, b) PTX_MODS(a, b)
#define U32T PTX_T1(PTX_T_U32)

static int dt_bytes(pt_dtype t) { return pt_dtype_get(t)->bytes; }

static int ilog2i(int64_t v)
{
    int r = 0;
    while (((int64_t)1 << r) < v)
        r++;
    return r;
}

static int64_t pow2ceil(int64_t v)
{
    int64_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}

/* Largest power of two <= 16 dividing every value given (bytes). */
static int align_of(int n, const int64_t *v)
{
    int a = 16;
    for (int i = 0; i < n; i++)
        while (a > 1 && v[i] % a)
            a /= 2;
    return a;
}

/* Dynamic shared memory one CTA may use (bytes, opt-in maximum): the
 * target table's (ptx/target.h PT_TARGET_ROWS, what the emulator enforces). */
static int smem_limit(const pt_target *t) { return (int)pt_target_smem_limit(t->sm); }

/* ---------------------------------------------------------------------- */
/* prepare                                                                 */

static const char *const reserved[] = {"acc", "alpha", "beta", "c"};
/* Names an epilogue tensor may not take: the operands and output (tensor
 * names in tensors() and 'run --in'), the kernel's other parameters, its
 * shared array, and what PTX itself means by WARP_SZ and _ (an epilogue
 * tensor's kernel parameter carries the tensor's name). */
static const char *const taken[] = {"a", "b", "d", "ws", "scale_ab", "out_scale", "gemm_smem",
                                    "WARP_SZ", "_"};

/* Parses the epilogue (wrapped as "d = ..." unless written as a statement)
 * and classifies its inputs. */
static int parse_epilogue(pt_arena *a, pt_prepared *pp, const char *text, bool user, pt_err *e)
{
    const char *s = text;
    while (*s == ' ' || *s == '\t')
        s++;
    const char *q = s;
    while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '_' ||
           (q > s && *q >= '0' && *q <= '9'))
        q++;
    const char *r = q;
    while (*r == ' ' || *r == '\t')
        r++;
    bool stmt = q > s && r[0] == '=' && r[1] != '=';
    const char *src = stmt ? text : pt_arena_printf(a, "d = %s", text);
    pt_err pe = {0};
    if (ex_parse_indexed(a, src, &pp->epi, &pe)) {
        /* columns of the wrapped text are 4 past the user's */
        const char *at = strstr(pe.msg, " at column ");
        if (!stmt && at) {
            int col = atoi(at + 11);
            char head[900];
            snprintf(head, sizeof head, "%.*s", (int)(at - pe.msg), pe.msg);
            return pt_errf(e, pe.code, "epilogue: %s at column %d", head, col > 4 ? col - 4 : 1);
        }
        return pt_errf(e, pe.code, "epilogue: %s", pe.msg);
    }
    ex_prog *p = pp->epi;
    if (p->noutputs != 1)
        return pt_errf(e, PT_EINVAL, "epilogue: one output expected, got %d", p->noutputs);
    if (p->has_reduction)
        return pt_errf(e, PT_EINVAL, "epilogue: reductions (sum, max, softmax, norms) are not supported");
    pp->in_acc = pp->in_alpha = pp->in_beta = pp->in_c = -1;
    pp->naux = 0;
    for (int i = 0; i < p->ninputs; i++) {
        const ex_tensor *t = &p->inputs[i];
        int *slot[] = {&pp->in_acc, &pp->in_alpha, &pp->in_beta, &pp->in_c};
        bool done = false;
        for (int k = 0; k < 4 && !done; k++)
            if (strcmp(t->name, reserved[k]) == 0) {
                *slot[k] = i;
                done = true;
            }
        if (done)
            continue;
        size_t blen = t->index ? strlen(t->name) - strlen(t->index) - 2 : strlen(t->name);
        gemm_aux x = {t->name, pt_arena_printf(a, "%.*s", (int)blen, t->name), GEMM_AUX_FULL, i};
        if (pp->dyn_m && strcmp(x.base, "m") == 0)
            return pt_errf(e, PT_EINVAL, "epilogue: 'm' is the kernel's run-time M with dyn=m: "
                           "rename the tensor");
        for (size_t k = 0; k < sizeof taken / sizeof taken[0]; k++)
            if (strcmp(x.base, taken[k]) == 0) {
                char all[160] = "";
                size_t len = 0;
                for (size_t w = 0; w < sizeof reserved / sizeof reserved[0]; w++)
                    len += (size_t)snprintf(all + len, sizeof all - len, "%s ", reserved[w]);
                for (size_t w = 0; w < sizeof taken / sizeof taken[0] && len < sizeof all; w++)
                    len += (size_t)snprintf(all + len, sizeof all - len, "%s%s", taken[w],
                                            w + 1 < sizeof taken / sizeof taken[0] ? " " : "");
                return pt_errf(e, PT_EINVAL, "epilogue: '%s' is reserved (%s): rename the tensor",
                               taken[k], all);
            }
        /* a tensor is named by its base name (--in bias=..., parameter bias) */
        for (int j = 0; j < pp->naux; j++)
            if (strcmp(pp->aux[j].base, x.base) == 0)
                return pt_errf(e, PT_EINVAL, "epilogue: '%s' and '%s' are two tensors named '%s': "
                               "rename one", pp->aux[j].name, x.name, x.base);
        if (t->index) {
            for (int k = 0; k < 4; k++)
                if (strcmp(x.base, reserved[k]) == 0)
                    return pt_errf(e, PT_EINVAL, "epilogue: '%s' cannot be indexed", reserved[k]);
            if (strcmp(t->index, "n") == 0)
                x.kind = GEMM_AUX_N;
            else if (strcmp(t->index, "m") == 0)
                x.kind = GEMM_AUX_M;
            else
                return pt_errf(e, PT_EINVAL,
                               "epilogue input '%s': the index must be [m] (one value per row) or [n] (per column)",
                               t->name);
        }
        if (pp->naux == GEMM_MAX_AUX)
            return pt_errf(e, PT_EINVAL, "epilogue: at most %d tensors besides acc and c", GEMM_MAX_AUX);
        pp->aux[pp->naux++] = x;
    }
    if (pp->in_acc < 0)
        return pt_errf(e, PT_EINVAL, "epilogue does not use acc");
    if (user && pp->prob.alpha != 1.0 && pp->in_alpha < 0)
        return pt_errf(e, PT_EINVAL, "alpha=%g is not used: write alpha into the epilogue",
                       pp->prob.alpha);
    /* one rule for both scalars: a value other than the default (alpha 1,
     * beta 0) must appear in a custom epilogue */
    if (user && pp->prob.beta != 0.0 && pp->in_beta < 0)
        return pt_errf(e, PT_EINVAL, "beta=%g is not used: write beta into the epilogue",
                       pp->prob.beta);
    /* bind: acc, c and full tensors [B,] M, N; name[n] N; name[m] M x 1; scalars 1 */
    int n = p->ninputs;
    const char **names = pt_arena_alloc(a, (size_t)n * sizeof *names);
    ex_shape *shapes = pt_arena_alloc(a, (size_t)n * sizeof *shapes);
    ex_shape full = {0};
    if (pp->batch > 1)
        full.dim[full.ndim++] = pp->batch;
    full.dim[full.ndim++] = pp->M;
    full.dim[full.ndim++] = pp->N;
    for (int i = 0; i < n; i++) {
        names[i] = p->inputs[i].name;
        shapes[i] = full;
        if (i == pp->in_alpha || i == pp->in_beta)
            shapes[i] = (ex_shape){1, {1}};
        for (int j = 0; j < pp->naux; j++)
            if (pp->aux[j].input == i && pp->aux[j].kind == GEMM_AUX_N)
                shapes[i] = (ex_shape){1, {pp->N}};
            else if (pp->aux[j].input == i && pp->aux[j].kind == GEMM_AUX_M)
                shapes[i] = (ex_shape){2, {pp->M, 1}};
    }
    return ex_bind(p, n, names, shapes, e);
}

static int check_ld(const char *name, int64_t ld, int64_t rows, int64_t cols, const char *what,
                    int64_t *out, pt_err *e)
{
    if (ld == 0) {
        *out = cols;
        return PT_OK;
    }
    if (ld < cols)
        return pt_errf(e, PT_EINVAL, "%s=%lld is too small: %s is stored %lld x %lld, so %s >= %lld",
                       name, (long long)ld, what, (long long)rows, (long long)cols, name,
                       (long long)cols);
    if (ld > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "%s=%lld is too large (at most 2^31-1)", name, (long long)ld);
    *out = ld;
    return PT_OK;
}

/* The output dtype when the problem names none: s32 for int8 (exact), f32
 * for tf32, bf16 for fp8 inputs, else the input dtype. */
static pt_dtype default_out(const kit_atom *at)
{
    if (at->int_acc)
        return PT_S32;
    if (at->tf32)
        return PT_F32;
    if (at->dt == PT_E4M3 || at->dt == PT_E5M2)
        return PT_BF16;
    return at->dt;
}

static int prepare(pt_arena *a, const pt_problem *pb, const pt_target *t, pt_prepared **out,
                   pt_err *e)
{
    *out = NULL;
    pt_prepared *pp = pt_arena_alloc(a, sizeof *pp);
    pp->prob = *pb;
    pp->target = *t;
    char tn[16];
    const kit_atom *at = kit_atom_get(pb->dtype);
    if (!at)
        return pt_errf(e, PT_EINVAL,
                       "dtype '%s' is not supported for gemm inputs (f32 tf32 f16 bf16 s8 u8 e4m3 e5m2)",
                       pt_dtype_get(pb->dtype)->name);
    if (at->min_sm > t->sm)
        return pt_errf(e, PT_EUNSUPPORTED, "dtype %s needs sm_%d; target is %s",
                       pt_dtype_get(at->dt)->name, at->min_sm, pt_target_name(t, tn, sizeof tn));
    pp->at = at;
    if (pb->m < 1 || pb->n < 1 || pb->k < 1)
        return pt_errf(e, PT_EINVAL, "M, N and K must be at least 1 (got m=%lld n=%lld k=%lld)",
                       (long long)pb->m, (long long)pb->n, (long long)pb->k);
    if (pb->m > 0x7fffffffll || pb->n > 0x7fffffffll || pb->k > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "m=%lld n=%lld k=%lld: each must be at most 2^31-1",
                       (long long)pb->m, (long long)pb->n, (long long)pb->k);
    if (pb->batch < 0 || pb->batch > 65535)
        return pt_errf(e, PT_ERANGE, "batch=%lld: must be 1..65535 (grid z)", (long long)pb->batch);
    pp->M = pb->m;
    pp->N = pb->n;
    pp->K = pb->k;
    pp->batch = pb->batch ? pb->batch : 1;
    const char *lay = pb->layout && *pb->layout ? pb->layout : "nn";
    if (strlen(lay) != 2 || (lay[0] != 'n' && lay[0] != 't') || (lay[1] != 'n' && lay[1] != 't'))
        return pt_errf(e, PT_EINVAL,
                       "bad layout '%s' (nn, nt, tn or tt: A then B; n as written, t stored transposed)",
                       lay);
    pp->prob.layout = pt_arena_strdup(a, lay);
    pp->a_kmajor = lay[0] == 'n';
    pp->b_kmajor = lay[1] == 't';
    if (at->es == 1 && !(pp->a_kmajor && pp->b_kmajor))
        return pt_errf(e, PT_EUNSUPPORTED,
                       "%s inputs need layout nt (A M x K and B N x K, both K-contiguous: ldmatrix "
                       "cannot transpose 8-bit data); got %s",
                       pt_dtype_get(at->dt)->name, lay);
    pp->d_col = pb->d_colmajor;
    const char *dyn = pb->dyn && *pb->dyn ? pb->dyn : "none";
    if (strcmp(dyn, "none") != 0 && strcmp(dyn, "m") != 0)
        return pt_errf(e, PT_EINVAL, "bad dyn '%s' (none or m: the sizes the kernel reads at run time)",
                       dyn);
    pp->dyn_m = strcmp(dyn, "m") == 0;
    pp->m_cap = pow2ceil(pp->M);
    pp->prob.dyn = pp->dyn_m ? "m" : NULL;
    /* a column-major D's columns are M long: ldd (ldc) not given follows M
     * at run time. A stored K x M does not (below): its row starts would be
     * aligned only as M is, so every A copy of the main loop would be one
     * element wide (cw_a); the caller gives lda (padded as it likes) */
    pp->ldd_m = pp->dyn_m && pp->d_col && pb->ldd == 0;
    pp->ldc_m = pp->dyn_m && pp->d_col && pb->ldc == 0;
    if (pp->dyn_m && !pp->a_kmajor && pb->lda == 0)
        return pt_errf(e, PT_EINVAL,
                       "dyn=m with layout %s: A is stored K x M, its rows follow M: give lda (the kernel "
                       "then serves every M <= lda)", lay);

    /* output dtype: PT_F64 (a zeroed problem) or the input dtype itself
     * for int8/tf32 inputs mean the default */
    pt_dtype odt = pb->out_dtype;
    if (odt == PT_F64 || odt >= PT_NDTYPES || odt == PT_TF32 || (at->int_acc && odt == at->dt))
        odt = default_out(at);
    bool ok_out = at->int_acc ? (odt == PT_S32 || odt == PT_F32 || odt == PT_F16 || odt == PT_BF16)
                              : (odt == PT_F32 || odt == PT_F16 || odt == PT_BF16 ||
                                 odt == PT_E4M3 || odt == PT_E5M2);
    if (!ok_out)
        return pt_errf(e, PT_EINVAL, "output dtype '%s' is not supported for %s inputs (%s)",
                       pt_dtype_get(odt)->name, pt_dtype_get(at->dt)->name,
                       at->int_acc ? "s32 f32 f16 bf16" : "f32 f16 bf16 e4m3 e5m2");
    if (pt_dtype_get(odt)->min_sm > t->sm)
        return pt_errf(e, PT_EUNSUPPORTED, "dtype %s needs sm_%d; target is %s",
                       pt_dtype_get(odt)->name, pt_dtype_get(odt)->min_sm,
                       pt_target_name(t, tn, sizeof tn));
    pp->out_dt = odt;
    pp->c_dt = odt == PT_E4M3 || odt == PT_E5M2 ? PT_F32 : odt;
    pp->aux_dt = odt == PT_F32 || odt == PT_F16 || odt == PT_BF16 ? odt : PT_F32;

    /* leading dimensions and batch strides */
    int64_t M = pp->M, N = pp->N, K = pp->K;
    int64_t ar = pp->a_kmajor ? M : K, ac = pp->a_kmajor ? K : M;
    int64_t br = pp->b_kmajor ? N : K, bc = pp->b_kmajor ? K : N;
    int64_t dr = pp->d_col ? N : M, dcn = pp->d_col ? M : N;
    char what[64];
    snprintf(what, sizeof what, "A (layout %c)", lay[0]);
    int rc = check_ld("lda", pb->lda, ar, ac, what, &pp->lda, e);
    snprintf(what, sizeof what, "B (layout %c)", lay[1]);
    if (!rc)
        rc = check_ld("ldb", pb->ldb, br, bc, what, &pp->ldb, e);
    if (!rc)
        rc = check_ld("ldc", pb->ldc, dr, dcn, pp->d_col ? "C (column-major)" : "C", &pp->ldc, e);
    if (!rc)
        rc = check_ld("ldd", pb->ldd, dr, dcn, pp->d_col ? "D (column-major)" : "D", &pp->ldd, e);
    if (rc)
        return rc;
    pp->sa = ar * pp->lda;
    pp->sb = br * pp->ldb;
    pp->sc = dr * pp->ldc;
    pp->sd = dr * pp->ldd;
    pp->saux = M * N;
    if ((double)pp->batch * (double)(pp->sa > pp->sb ? pp->sa : pp->sb) > 0x1p40 ||
        (double)pp->batch * (double)pp->sd > 0x1p40)
        return pt_errf(e, PT_ERANGE, "tensors too large: more than 2^40 elements");

    /* scalars */
    pp->alpha = (float)pb->alpha;
    pp->beta = (float)pb->beta;
    double sa = pb->has_scale_a || pb->scale_a != 0.0 ? pb->scale_a : 1.0;
    double sb = pb->has_scale_b || pb->scale_b != 0.0 ? pb->scale_b : 1.0;
    if (!(sa >= 0.0) || isinf(sa) || !(sb >= 0.0) || isinf(sb))
        return pt_errf(e, PT_EINVAL, "%s=%g: must be a finite number >= 0",
                       !(sa >= 0.0) || isinf(sa) ? "scale_a" : "scale_b",
                       !(sa >= 0.0) || isinf(sa) ? sa : sb);
    double sab = sa * sb;
    if (isinf((float)sab))
        return pt_errf(e, PT_ERANGE, "scale_a*scale_b=%g does not fit f32", sab);
    pp->scale_ab = (float)sab;
    pp->prob.scale_a = sa;
    pp->prob.scale_b = sb;
    pp->out_scale = 1.0f;
    if (pt_problem_out_scale(pb, pp->out_dt, &pp->out_scale, e))
        return e->code;
    if (sab != 1.0 && at->dt != PT_E4M3 && at->dt != PT_E5M2 && !at->int_acc)
        return pt_errf(e, PT_EINVAL, "scale_a/scale_b apply to fp8 and int8 inputs only");

    /* epilogue. s32 outputs are exact integer sums (+ C): a float epilogue
     * rounding back to integers would differ from any reference by one at
     * half-way values, so it takes a float output */
    bool user = pb->epilogue && *pb->epilogue;
    pp->int_exact = odt == PT_S32;
    if (pp->int_exact && (user || pb->alpha != 1.0 || (pb->beta != 0.0 && pb->beta != 1.0) || sab != 1.0))
        return pt_errf(e, PT_EINVAL,
                       "s32 output is the exact sum (alpha 1, beta 0 or 1, no epilogue or scales); "
                       "take --out-dtype f32, f16 or bf16 for a float epilogue");
    pp->in_acc = pp->in_alpha = pp->in_beta = pp->in_c = -1;
    if (pp->int_exact) {
        pp->has_c = pb->beta == 1.0;
    } else {
        const char *text = user ? pb->epilogue : pb->beta != 0.0 ? "alpha * acc + beta * c" : "alpha * acc";
        rc = parse_epilogue(a, pp, text, user, e);
        if (!rc)
            rc = ex_check_target(pp->epi, t, e); /* cast(acc, e4m3) below sm_89 */
        if (rc)
            return rc;
        pp->has_c = pp->in_c >= 0;
    }

    /* copy widths: every row start (and batch start) of the operand aligned */
    int es = at->es;
    int64_t va[2] = {pp->lda * es, pp->batch > 1 ? pp->sa * es : 16};
    int64_t vb[2] = {pp->ldb * es, pp->batch > 1 ? pp->sb * es : 16};
    pp->cw_a = align_of(2, va);
    pp->cw_b = align_of(2, vb);
    /* below 4 bytes there is no cp.async: plain loads of one element each */
    if (pp->cw_a < 4)
        pp->cw_a = es;
    if (pp->cw_b < 4)
        pp->cw_b = es;
    /* epilogue units: E elements contiguous in D, all-or-nothing at the edge */
    int64_t cols = pp->d_col ? M : N;
    /* dyn=m, column-major D: the units run along M, whose edge (and, with
     * ldd following M, whose column alignment) is known only at run time:
     * one element each (coalesced across the warp) */
    int E = pp->dyn_m && pp->d_col ? 1 : 16;
    for (;;) {
        bool ok = E * dt_bytes(odt) <= 16 && pp->ldd % E == 0 && cols % E == 0;
        if (pp->has_c)
            ok &= E * dt_bytes(pp->c_dt) <= 16 && pp->ldc % E == 0;
        if (pp->naux)
            ok &= E * dt_bytes(pp->aux_dt) <= 16;
        if (ok || E == 1)
            break;
        E /= 2;
    }
    pp->vec_max = E;
    *out = pp;
    return PT_OK;
}

/* ---------------------------------------------------------------------- */
/* parameter space                                                         */

/* Tile sizes worth trying for a dimension of n: powers of two from 16 to
 * 256, at most pow2ceil(n), at least a quarter of the largest. */
static void tile_values(pt_param_space *p, int64_t n, int lo, int hi)
{
    int64_t top = pow2ceil(n < lo ? lo : n);
    if (top > hi)
        top = hi;
    for (int v = lo; v <= hi; v *= 2)
        if (v <= top && v >= top / 4)
            p->values[p->nvalues++] = v;
}

static int space(const pt_prepared *pp, const pt_target *t, pt_space *s)
{
    if (gemm_wgmma_applies(pp, t)) /* sm_90a: the wgmma main loop (impl=1) */
        return gemm_wgmma_space(pp, t, s);
    memset(s, 0, sizeof *s);
    const kit_atom *at = pp->at;
    int es = at->es;
    bool simt = at->simt;
    pt_param_space bm = {"bm", "block tile rows (M)", 0, {0}};
    pt_param_space bn = {"bn", "block tile columns (N)", 0, {0}};
    tile_values(&bm, pp->M, 16, simt ? 128 : 256);
    tile_values(&bn, pp->N, simt ? 32 : 16, simt ? 128 : 256); /* SIMT: 32 threads at least */
    pt_param_space bk = {"bk", "k elements per pipeline stage", 0, {0}};
    /* k tile bytes 32, 64, 128: at most what K needs, at least half of that */
    int64_t kb = pow2ceil(pp->K * es), kcap = kb < 128 ? kb : 128;
    for (int b = 32; b <= 128; b *= 2) /* SIMT: short k tiles too (less unrolled FFMA) */
        if (b <= (kb > 32 ? kb : 32) && (b >= kcap / 2 || simt))
            bk.values[bk.nvalues++] = b / es;
    s->p[s->nparams++] = bm;
    s->p[s->nparams++] = bn;
    s->p[s->nparams++] = bk;
    if (simt) {
        pt_param_space tm = {"tm", "rows per thread", 2, {4, 8}};
        pt_param_space tnn = {"tn", "columns per thread", 2, {4, 8}};
        s->p[s->nparams++] = tm;
        s->p[s->nparams++] = tnn;
    } else {
        pt_param_space wm = {"wm", "warp tile rows", 0, {0}};
        pt_param_space wn = {"wn", "warp tile columns", 0, {0}};
        int mmax = (int)bm.values[bm.nvalues - 1], nmax = (int)bn.values[bn.nvalues - 1];
        for (int v = 16; v <= 64; v *= 2) {
            if (v <= mmax && v >= (mmax < 64 ? mmax : 64) / 2)
                wm.values[wm.nvalues++] = v;
            if (v <= nmax && v >= (nmax < 64 ? nmax : 64) / 2)
                wn.values[wn.nvalues++] = v;
        }
        s->p[s->nparams++] = wm;
        s->p[s->nparams++] = wn;
    }
    pt_param_space st = {"stages", "shared-memory pipeline depth", simt ? 3 : 4, {2, 3, 4, 5}};
    s->p[s->nparams++] = st;
    /* few output tiles: split K inside the CTA (kslice) or across CTAs (splitk) */
    bool few = (pp->M + 127) / 128 * ((pp->N + 127) / 128) * pp->batch < 64;
    if (!simt) {
        pt_param_space ks = {"kslice", "warps splitting each k tile (in-CTA split-K)", 1, {1}};
        if (few)
            ks = (pt_param_space){"kslice", "warps splitting each k tile (in-CTA split-K)", 2, {1, 2}};
        s->p[s->nparams++] = ks;
    }
    pt_param_space sk = {"splitk", "CTAs splitting K (parallel split-K, last CTA reduces)", 1, {1}};
    if (few && pp->K >= 256)
        sk = (pt_param_space){"splitk", "CTAs splitting K (parallel split-K, last CTA reduces)", 3,
                              {1, 2, 4}};
    s->p[s->nparams++] = sk;
    pt_param_space ra = {"raster", "tile rows per group in the CTA order (L2 reuse)", 1, {1}};
    if ((pp->M + 127) / 128 > 8)
        ra.values[0] = 8;
    s->p[s->nparams++] = ra;
    pt_param_space pe = {"persistent", "CTAs per SM of a persistent grid walking all tiles, sized at launch "
                         "(0: one CTA per tile)", 1, {0}};
    s->p[s->nparams++] = pe;
    return PT_OK;
}

/* Reads a config into g (config fields and everything derived from them)
 * and checks it; the one place that knows what a valid config is. */
static int geometry(const pt_prepared *pp, const pt_target *t, const pt_config *c, gemm_ctx *g,
                    pt_err *e)
{
    memset(g, 0, sizeof *g);
    const kit_atom *at = pp->at;
    int es = at->es;
    g->pp = pp;
    g->at = at;
    g->bm = (int)pt_config_get(c, "bm", 64);
    g->bn = (int)pt_config_get(c, "bn", 64);
    g->bk = (int)pt_config_get(c, "bk", 32 / es);
    g->stages = (int)pt_config_get(c, "stages", 3);
    g->splitk = (int)pt_config_get(c, "splitk", 1);
    g->raster = (int)pt_config_get(c, "raster", 1);
    g->kslice = at->simt ? 1 : (int)pt_config_get(c, "kslice", 1);
    const struct {
        const char *name;
        int v, lo, hi;
    } pow2s[] = {{"bm", g->bm, 16, 256}, {"bn", g->bn, 16, 256}, {"kslice", g->kslice, 1, 4}};
    for (size_t i = 0; i < sizeof pow2s / sizeof pow2s[0]; i++) {
        int v = pow2s[i].v;
        if (v < pow2s[i].lo || v > pow2s[i].hi || (v & (v - 1)))
            return pt_errf(e, PT_EINVAL, "%s=%d: must be a power of two in %d..%d", pow2s[i].name, v,
                           pow2s[i].lo, pow2s[i].hi);
    }
    int kbytes = g->bk * es;
    if (g->bk < 1 || (kbytes != 16 && kbytes != 32 && kbytes != 64 && kbytes != 128) ||
        (!at->simt && kbytes < 32))
        return pt_errf(e, PT_EINVAL, "bk=%d: k tile must be %s bytes (%d..%d %s elements)", g->bk,
                       at->simt ? "16, 32, 64 or 128" : "32, 64 or 128", (at->simt ? 16 : 32) / es,
                       128 / es, pt_dtype_get(at->dt)->name);
    if (g->splitk < 1 || g->splitk > 16)
        return pt_errf(e, PT_EINVAL, "splitk=%d: must be 1..16", g->splitk);
    if (g->stages < 2 || g->stages > 5)
        return pt_errf(e, PT_EINVAL, "stages=%d: must be 2..5", g->stages);
    if (g->raster < 1 || g->raster > 64)
        return pt_errf(e, PT_EINVAL, "raster=%d: must be 1..64", g->raster);
    int64_t pers = pt_config_get(c, "persistent", 0);
    if (pers < 0 || pers > GEMM_PERSISTENT_MAX)
        return pt_errf(e, PT_EINVAL, GEMM_PERSISTENT_MSG, (long long)pers);
    g->persistent = (int)pers;
    g->kt_total = (pp->K + g->bk - 1) / g->bk;
    if (g->splitk > g->kt_total)
        return pt_errf(e, PT_EINVAL, "splitk=%d: more splits than k tiles (%lld)", g->splitk,
                       (long long)g->kt_total);
    if (at->simt) {
        g->tm = (int)pt_config_get(c, "tm", 4);
        g->tn = (int)pt_config_get(c, "tn", 4);
        if ((g->tm != 4 && g->tm != 8) || (g->tn != 4 && g->tn != 8))
            return pt_errf(e, PT_EINVAL, "tm=%d tn=%d: each must be 4 or 8", g->tm, g->tn);
        if (g->tm > g->bm || g->tn > g->bn)
            return pt_errf(e, PT_EINVAL, "tm=%d tn=%d: larger than the block tile %dx%d", g->tm,
                           g->tn, g->bm, g->bn);
        if (g->bm > 128 || g->bn > 128)
            return pt_errf(e, PT_EINVAL, "bm=%d bn=%d: the f32 SIMT tile is at most 128x128", g->bm,
                           g->bn);
        g->threads = (g->bm / g->tm) * (g->bn / g->tn);
        if (g->threads < 32 || g->threads > 256)
            return pt_errf(e, PT_EINVAL, "%d threads (bm/tm * bn/tn): must be 32..256", g->threads);
        g->sa = pp->a_kmajor ? kit_smem_tile(g->bm, kbytes, 16) : kit_smem_tile(g->bk, g->bm * 4, 16);
        g->sb = pp->b_kmajor ? kit_smem_tile(g->bn, kbytes, 16) : kit_smem_tile(g->bk, g->bn * 4, 16);
    } else {
        g->wm = (int)pt_config_get(c, "wm", 32);
        g->wn = (int)pt_config_get(c, "wn", 32);
        if ((g->wm != 16 && g->wm != 32 && g->wm != 64) || (g->wn != 16 && g->wn != 32 && g->wn != 64))
            return pt_errf(e, PT_EINVAL, "wm=%d wn=%d: each must be 16, 32 or 64", g->wm, g->wn);
        if (g->wm > g->bm || g->wn > g->bn)
            return pt_errf(e, PT_EINVAL, "warp tile %dx%d is larger than the block tile %dx%d",
                           g->wm, g->wn, g->bm, g->bn);
        g->warps_m = g->bm / g->wm;
        g->warps_n = g->bn / g->wn;
        int warps = g->warps_m * g->warps_n * g->kslice;
        if (warps > 8)
            return pt_errf(e, PT_EINVAL, "%d warps (bm/wm * bn/wn * kslice): at most 8", warps);
        g->threads = warps * 32;
        g->ksteps = kbytes / 32;
        if (g->ksteps % g->kslice)
            return pt_errf(e, PT_EINVAL, "kslice=%d does not divide the %d mma k-steps of bk=%d",
                           g->kslice, g->ksteps, g->bk);
        bool pad_a = at->tf32 && !pp->a_kmajor, pad_b = at->tf32 && !pp->b_kmajor;
        g->sa = pp->a_kmajor ? kit_smem_tile(g->bm, kbytes, 0)
              : pad_a        ? kit_smem_tile(g->bk, g->bm * es, 32)
                             : kit_smem_tile(g->bk, g->bm * es, 0);
        g->sb = pp->b_kmajor ? kit_smem_tile(g->bn, kbytes, 0)
              : pad_b        ? kit_smem_tile(g->bk, g->bn * es, 32)
                             : kit_smem_tile(g->bk, g->bn * es, 0);
    }
    /* registers: accumulators plus double-buffered fragments */
    int accs = at->simt ? g->tm * g->tn : g->wm * g->wn / 32;
    if (accs > 128)
        return pt_errf(e, PT_EINVAL, "%d accumulators per thread: at most 128", accs);
    /* sm_90+ has no native fp8 mma.sync (wgmma is its fp8 path): ptxas
     * expands it with enough extra registers that warp tiles above 32x32
     * spill */
    if ((at->dt == PT_E4M3 || at->dt == PT_E5M2) && t->sm >= 90 && accs > 32)
        return pt_errf(e, PT_EINVAL,
                       "warp tile %dx%d: fp8 mma.sync on sm_90+ is emulated by ptxas; at most 32x32",
                       g->wm, g->wn);
    /* copies per thread per operand and stage (code size for narrow copies) */
    int la = (kit_tile_rows(&g->sa) * kit_tile_row_bytes(&g->sa) / pp->cw_a + g->threads - 1) / g->threads;
    int lb = (kit_tile_rows(&g->sb) * kit_tile_row_bytes(&g->sb) / pp->cw_b + g->threads - 1) / g->threads;
    if (la > 64 || lb > 64)
        return pt_errf(e, PT_EINVAL,
                       "%d copies per thread and stage (rows of %s are only %d-byte aligned): use a smaller tile",
                       la > lb ? la : lb, la > lb ? "A" : "B", la > lb ? pp->cw_a : pp->cw_b);
    g->stage_bytes = (int)(g->sa.span + g->sb.span);
    int pipe = g->stages * g->stage_bytes;
    int epi = gemm_epi_smem(g);
    g->smem_bytes = pipe > epi ? pipe : epi;
    if (g->smem_bytes > smem_limit(t)) {
        char tn[16];
        return pt_errf(e, PT_EINVAL, "%d bytes of shared memory: %s allows %d per block",
                       g->smem_bytes, pt_target_name(t, tn, sizeof tn), smem_limit(t));
    }
    /* dyn=m: tiles at m_cap (the split-K workspace's layout); the grid is
     * (ceil(M / bm), column tiles x splitk, batch) */
    int64_t mt = pp->dyn_m ? pp->m_cap : pp->M;
    int64_t tm = (mt + g->bm - 1) / g->bm, tnn = (pp->N + g->bn - 1) / g->bn;
    g->tiles = tm * tnn;
    if (g->tiles > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "%lld tiles: the grid is limited to 2^31-1", (long long)g->tiles);
    if (pp->dyn_m && !g->persistent && tnn * g->splitk > 65535)
        return pt_errf(e, PT_ERANGE,
                       "dyn=m: %lld column tiles x splitk=%d CTAs along grid y: at most 65535 (a larger "
                       "bn, or persistent)", (long long)tnn, g->splitk);
    return PT_OK;
}

static int check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    int64_t impl = pt_config_get(c, "impl", 0);
    if (impl == 1)
        return gemm_wgmma_check(pp, t, c, e);
    if (impl != 0)
        return pt_errf(e, PT_EINVAL, "impl=%lld: 0 (mma.sync) or 1 (wgmma, sm_90a)", (long long)impl);
    gemm_ctx g;
    return geometry(pp, t, c, &g, e);
}

/* A good first config: 128x128 (or the problem's size) tiles of 2x2 warps
 * (64x64 warp tiles at most), 64-byte k tiles, 3 stages, raster 8; then the
 * first valid config of the space if that one does not fit. */
static void defaults(const pt_prepared *pp, const pt_target *t, pt_config *c)
{
    if (gemm_wgmma_applies(pp, t)) {
        gemm_wgmma_defaults(pp, t, c);
        return;
    }
    pt_space s;
    space(pp, t, &s);
    c->n = 0;
    for (int i = 0; i < s.nparams; i++)
        pt_config_set(c, s.p[i].name, s.p[i].values[0]);
    const kit_atom *at = pp->at;
    int64_t nmin = at->simt ? 32 : 16;
    int64_t bm = pow2ceil(pp->M < 16 ? 16 : pp->M), bn = pow2ceil(pp->N < nmin ? nmin : pp->N);
    int top = 128;
    bm = bm > top ? top : bm;
    bn = bn > top ? top : bn;
    pt_config_set(c, "bm", bm);
    pt_config_set(c, "bn", bn);
    int64_t kb = pow2ceil(pp->K * at->es);
    pt_config_set(c, "bk", (kb < 64 || at->simt ? 32 : 64) / at->es);
    if (at->simt) {
        pt_config_set(c, "tm", bm >= 64 ? 8 : 4);
        pt_config_set(c, "tn", bn >= 64 ? 8 : 4);
    } else {
        /* 2 x 2 warps up to 64 x 64 warp tiles */
        pt_config_set(c, "wm", bm >= 128 ? 64 : bm >= 32 ? bm / 2 : 16);
        pt_config_set(c, "wn", bn >= 128 ? 64 : bn >= 32 ? bn / 2 : 16);
    }
    pt_config_set(c, "stages", 3);
    pt_config_set(c, "raster", (pp->M + bm - 1) / bm > 8 ? 8 : 1);
    pt_space_default(&s, check, pp, t, c);
}

/* ---------------------------------------------------------------------- */
/* emission                                                                */

ptx_reg gemm_sreg(gemm_ctx *g, ptx_sreg s)
{
    ptx_reg r = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_sr(s));
    return r;
}

ptx_reg gemm_param_ptr(gemm_ctx *g, pt_launch *l, const char *name, pt_arg arg)
{
    const char *pn = ptx_param_ptr(g->f, name, 16);
    l->args[l->nargs++] = arg;
    ptx_reg r = gemm_r64(g), d = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_LD, M1(PTX_M_PARAM), PTX_T1(PTX_T_U64), ptx_r(r), ptx_saddr(pn, 0));
    ptx_emit(g->f, PTX_OP_CVTA, M2(PTX_M_TO, PTX_M_GLOBAL), PTX_T1(PTX_T_U64), ptx_r(d), ptx_r(r));
    return d;
}

ptx_reg gemm_param_f32(gemm_ctx *g, pt_launch *l, const char *name, float v)
{
    const char *pn = ptx_param_add(g->f, name, PTX_T_F32);
    l->args[l->nargs++] = (pt_arg){PT_ARG_F32, 0, 0, v};
    ptx_reg r = ptx_reg_new(g->f, PTX_T_F32);
    ptx_emit(g->f, PTX_OP_LD, M1(PTX_M_PARAM), PTX_T1(PTX_T_F32), ptx_r(r), ptx_saddr(pn, 0));
    return r;
}

static ptx_reg param_u32(gemm_ctx *g, pt_launch *l, const char *name, int64_t v)
{
    const char *pn = ptx_param_add(g->f, name, PTX_T_U32);
    l->args[l->nargs++] = (pt_arg){PT_ARG_U32, 0, (uint64_t)v, 0};
    ptx_reg r = gemm_r32(g);
    ptx_emit(g->f, PTX_OP_LD, M1(PTX_M_PARAM), U32T, ptx_r(r), ptx_saddr(pn, 0));
    return r;
}

/* p + idx * M * per (bytes; dyn=m: a batch stride that follows M), 64-bit. */
static ptx_reg addr_m(gemm_ctx *g, ptx_reg p, ptx_reg idx, int64_t per)
{
    ptx_reg s = gemm_r64(g), w = gemm_r64(g), off = gemm_r64(g), d = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), ptx_r(g->mreg));
    ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(s), ptx_r(w), ptx_imm(per));
    ptx_reg w2 = gemm_r64(g);
    ptx_emit(g->f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w2), ptx_r(idx));
    ptx_emit(g->f, PTX_OP_MUL, M1(PTX_M_LO), PTX_T1(PTX_T_U64), ptx_r(off), ptx_r(w2), ptx_r(s));
    ptx_emit(g->f, PTX_OP_ADD, NOM, PTX_T1(PTX_T_S64), ptx_r(d), ptx_r(p), ptx_r(off));
    return d;
}

/* Workspace bytes of parallel split-K: partial tiles, then counters. */
static int64_t ws_bytes(const gemm_ctx *g)
{
    int64_t parts = g->pp->batch * g->tiles * g->splitk * (int64_t)g->bm * g->bn * 4;
    return parts + (g->pp->batch * g->tiles * 4 + 15) / 16 * 16;
}

/* Linear CTA index -> tile (row, col); groups of `raster` tile rows are
 * walked column by column so that a wave of CTAs shares B columns. */
void gemm_tile_coords(gemm_ctx *g)
{
    const pt_prepared *pp = g->pp;
    int64_t tm = (pp->M + g->bm - 1) / g->bm, tn = (pp->N + g->bn - 1) / g->bn;
    ptx_opd tmo = pp->dyn_m ? ptx_r(g->tm_r) : ptx_imm(tm);
    ptx_reg t = g->tile;
    ptx_reg ti, tj;
    if (g->raster <= 1 || (!pp->dyn_m && tm <= 1)) {
        ti = gemm_op2(g, PTX_OP_DIV, ptx_r(t), ptx_imm(tn));
        tj = gemm_op2(g, PTX_OP_REM, ptx_r(t), ptx_imm(tn));
    } else {
        int64_t per = (int64_t)g->raster * tn;
        ptx_reg grp = gemm_op2(g, PTX_OP_DIV, ptx_r(t), ptx_imm(per));
        ptx_reg first = gemm_mul(g, ptx_r(grp), ptx_imm(g->raster));
        ptx_reg left = gemm_op2(g, PTX_OP_SUB, tmo, ptx_r(first));
        ptx_reg gs = gemm_op2(g, PTX_OP_MIN, ptx_r(left), ptx_imm(g->raster));
        ptx_reg r = gemm_op2(g, PTX_OP_REM, ptx_r(t), ptx_imm(per));
        ptx_reg rm = gemm_op2(g, PTX_OP_REM, ptx_r(r), ptx_r(gs));
        ti = gemm_op2(g, PTX_OP_ADD, ptx_r(first), ptx_r(rm));
        tj = gemm_op2(g, PTX_OP_DIV, ptx_r(r), ptx_r(gs));
    }
    g->m0 = gemm_mul(g, ptx_r(ti), ptx_imm(g->bm));
    g->n0 = gemm_mul(g, ptx_r(tj), ptx_imm(g->bn));
}

static int emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    if (pt_config_get(c, "impl", 0) == 1)
        return gemm_wgmma_emit(pp, c, m, l, e);
    gemm_ctx g;
    int rc = geometry(pp, &pp->target, c, &g, e);
    if (rc)
        return rc;
    char cfg[256], name[96];
    pt_config_str(c, cfg, sizeof cfg);
    uint64_t h = pt_hash64(cfg, strlen(cfg));
    char sig[512];
    snprintf(sig, sizeof sig, "%lld %lld %lld %lld %lld %lld %lld %lld %d %d %s %g %g %g %g|%s",
             (long long)(pp->dyn_m ? (g.splitk > 1 ? -pp->m_cap : -1) : pp->M), (long long)pp->N, (long long)pp->K, (long long)pp->batch,
             (long long)pp->lda, (long long)pp->ldb, (long long)(pp->ldc_m ? -1 : pp->ldc),
             (long long)(pp->ldd_m ? -1 : pp->ldd),
             pp->d_col, (int)pp->out_dt, pp->prob.layout, pp->prob.alpha, pp->prob.beta,
             pp->prob.scale_a, pp->prob.scale_b, pp->prob.epilogue ? pp->prob.epilogue : "");
    h ^= pt_hash64(sig, strlen(sig)) * 31;
    snprintf(name, sizeof name, "gemm_%s_%s_%016llx", pt_dtype_get(pp->at->dt)->name,
             pp->prob.layout, (unsigned long long)h);
    g.f = ptx_fn_new(m, name);
    ptx_fn *f = g.f;
    f->maxntid[0] = g.threads;
    f->maxntid[1] = f->maxntid[2] = 1;
    ptx_module_extern_shared(m, "gemm_smem", 128);

    /* parameters, in pt_launch order */
    l->nargs = 0;
    ptx_reg d = gemm_param_ptr(&g, l, "d", (pt_arg){PT_ARG_OUTPUT, 0, 0, 0});
    ptx_reg a = gemm_param_ptr(&g, l, "a", (pt_arg){PT_ARG_INPUT, 0, 0, 0});
    ptx_reg b = gemm_param_ptr(&g, l, "b", (pt_arg){PT_ARG_INPUT, 1, 0, 0});
    int next_in = 2;
    ptx_reg cp = {0};
    if (pp->has_c)
        cp = gemm_param_ptr(&g, l, "c", (pt_arg){PT_ARG_INPUT, next_in++, 0, 0});
    ptx_reg aux[GEMM_MAX_AUX];
    for (int j = 0; j < pp->naux; j++)
        aux[j] = gemm_param_ptr(&g, l, pp->aux[j].base, (pt_arg){PT_ARG_INPUT, next_in++, 0, 0});
    ptx_reg ws = {0};
    if (g.splitk > 1)
        ws = gemm_param_ptr(&g, l, "ws", (pt_arg){PT_ARG_WORKSPACE, 0, (uint64_t)ws_bytes(&g), 0});
    if (pp->dyn_m)
        g.mreg = param_u32(&g, l, "m", pp->M);
    if (pp->in_alpha >= 0)
        g.alpha = gemm_param_f32(&g, l, "alpha", pp->alpha);
    if (pp->in_beta >= 0)
        g.beta = gemm_param_f32(&g, l, "beta", pp->beta);
    if (!pp->int_exact && (pp->at->int_acc || pp->at->dt == PT_E4M3 || pp->at->dt == PT_E5M2))
        g.scale_ab = gemm_param_f32(&g, l, "scale_ab", pp->scale_ab);
    if (pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2)
        g.out_scale = gemm_param_f32(&g, l, "out_scale", pp->out_scale);

    /* thread, tile, batch, split */
    g.tid = gemm_sreg(&g, PTX_S_TID_X);
    g.lane = gemm_op2(&g, PTX_OP_AND, ptx_r(g.tid), ptx_imm(31));
    g.warp = gemm_op2(&g, PTX_OP_SHR, ptx_r(g.tid), ptx_imm(5));
    g.smem = gemm_r32(&g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(g.smem), ptx_sym("gemm_smem"));
    g.tile = gemm_sreg(&g, PTX_S_CTAID_X);
    int es = pp->at->es;
    if (pp->batch > 1) {
        g.bidx = gemm_sreg(&g, PTX_S_CTAID_Z);
        /* dyn=m: the strides of A (layout n), D, C and the full tensors
         * are M rows: M * (row bytes) at run time; a column-major D (C) is
         * N columns of ldd (ldc), M when it follows M */
        bool dm = pp->dyn_m, dc = pp->d_col;
        g.pa = dm && pp->a_kmajor ? addr_m(&g, a, g.bidx, pp->lda * es)
                                  : gemm_addr64(&g, a, ptx_r(g.bidx), pp->sa * es);
        g.pb = gemm_addr64(&g, b, ptx_r(g.bidx), pp->sb * es);
        int db = dt_bytes(pp->out_dt), cb = dt_bytes(pp->c_dt);
        g.pd = dm && !dc      ? addr_m(&g, d, g.bidx, pp->ldd * db)
             : pp->ldd_m      ? addr_m(&g, d, g.bidx, pp->N * db)
                              : gemm_addr64(&g, d, ptx_r(g.bidx), pp->sd * db);
        if (pp->has_c)
            g.pc = dm && !dc  ? addr_m(&g, cp, g.bidx, pp->ldc * cb)
                 : pp->ldc_m  ? addr_m(&g, cp, g.bidx, pp->N * cb)
                              : gemm_addr64(&g, cp, ptx_r(g.bidx), pp->sc * cb);
        for (int j = 0; j < pp->naux; j++)
            g.paux[j] = pp->aux[j].kind != GEMM_AUX_FULL ? aux[j]
                      : dm ? addr_m(&g, aux[j], g.bidx, pp->N * dt_bytes(pp->aux_dt))
                           : gemm_addr64(&g, aux[j], ptx_r(g.bidx), pp->saux * dt_bytes(pp->aux_dt));
    } else {
        g.bidx = gemm_r32(&g);
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(g.bidx), ptx_imm(0));
        g.pa = a;
        g.pb = b;
        g.pd = d;
        g.pc = cp;
        for (int j = 0; j < pp->naux; j++)
            g.paux[j] = aux[j];
    }
    g.pws = ws;
    /* dyn=m: tile rows from M; one CTA per tile: grid (tile rows, column
     * tiles x splitk), the linear tile t = column-tile * rows + ctaid.x (the
     * launch order, as ctaid.x is for baked M); CTAs past the tiles (a
     * persistent grid larger than them, or a grid for a larger M) leave */
    int64_t tn_imm = (pp->N + g.bn - 1) / g.bn;
    int past_end = -1;
    if (pp->dyn_m) {
        g.tm_r = gemm_op2(&g, PTX_OP_ADD, ptx_r(g.mreg), ptx_imm(g.bm - 1));
        g.tm_r = gemm_op2(&g, PTX_OP_SHR, ptx_r(g.tm_r), ptx_imm(ilog2i(g.bm)));
        g.tiles_r = gemm_mul(&g, ptx_r(g.tm_r), ptx_imm(tn_imm));
        past_end = ptx_label_new(f);
        if (!g.persistent) {
            ptx_reg y = gemm_sreg(&g, PTX_S_CTAID_Y), tj = y;
            if (g.splitk > 1 && tn_imm > 1) {
                g.split = gemm_op2(&g, PTX_OP_DIV, ptx_r(y), ptx_imm(tn_imm));
                tj = gemm_op2(&g, PTX_OP_REM, ptx_r(y), ptx_imm(tn_imm));
            } else if (g.splitk > 1) {
                g.split = y;
                tj = gemm_r32(&g);
                ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(tj), ptx_imm(0));
            }
            ptx_reg past = gemm_setp(&g, PTX_M_GE, ptx_r(g.tile), ptx_r(g.tm_r));
            ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(past_end)), past, false);
            g.tile = gemm_mad(&g, ptx_r(tj), ptx_r(g.tm_r), ptx_r(g.tile));
        } else {
            ptx_reg past = gemm_setp(&g, PTX_M_GE, ptx_r(g.tile), ptx_r(g.tiles_r));
            ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(past_end)), past, false);
        }
    }
    if (g.splitk > 1) {
        /* split s takes k tiles [s*KT/S, (s+1)*KT/S): every split >= 1 tile */
        if (!g.split.id)
            g.split = gemm_sreg(&g, PTX_S_CTAID_Y);
        ptx_reg lo = gemm_mul(&g, ptx_r(g.split), ptx_imm(g.kt_total));
        g.kt_begin = gemm_op2(&g, PTX_OP_DIV, ptx_r(lo), ptx_imm(g.splitk));
        ptx_reg hi = gemm_op2(&g, PTX_OP_ADD, ptx_r(lo), ptx_imm(g.kt_total));
        ptx_reg end = gemm_op2(&g, PTX_OP_DIV, ptx_r(hi), ptx_imm(g.splitk));
        g.nkt = gemm_op2(&g, PTX_OP_SUB, ptx_r(end), ptx_r(g.kt_begin));
    }

    /* persistent: each CTA walks tiles ctaid.x, ctaid.x + nctaid.x, ...; a
     * CTA past the tiles (a grid wider than them) leaves at once */
    int top = -1;
    if (g.persistent) {
        if (!pp->dyn_m) {
            past_end = ptx_label_new(f);
            ptx_reg past = gemm_setp(&g, PTX_M_GE, ptx_r(g.tile), ptx_imm(g.tiles));
            ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(past_end)), past, false);
        }
        top = ptx_label_new(f);
        ptx_label_place(f, top);
    }
    gemm_tile_coords(&g);
    gemm_accs acc;
    memset(&acc, 0, sizeof acc);
    if (pp->at->simt)
        gemm_mainloop_simt(&g, &acc);
    else
        gemm_mainloop_tc(&g, &acc);
    gemm_epilogue(&g, &acc);
    if (g.persistent) {
        gemm_bar(&g); /* the next tile's prologue overwrites the staging */
        ptx_reg nc = gemm_sreg(&g, PTX_S_NCTAID_X);
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(g.tile), ptx_r(g.tile), ptx_r(nc));
        ptx_reg more = gemm_setp(&g, PTX_M_LT, ptx_r(g.tile),
                                 pp->dyn_m ? ptx_r(g.tiles_r) : ptx_imm(g.tiles));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(top)), more, false);
    }
    if (past_end >= 0)
        ptx_label_place(f, past_end);
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);

    /* persistent: the tiles (dyn=m: ceil(M / bm) x column tiles at this
     * M), capped at launch by K x SMs (grid_per_sm); else one CTA a tile,
     * dyn=m: (ceil(M / bm), column tiles x splitk) */
    l->grid[0] = (unsigned)g.tiles;
    l->grid[1] = (unsigned)g.splitk;
    l->grid_per_sm = (unsigned)g.persistent;
    if (pp->dyn_m) {
        l->grid[0] = (unsigned)((pp->M + g.bm - 1) / g.bm * (g.persistent ? tn_imm : 1));
        l->grid[1] = (unsigned)(g.persistent ? g.splitk : tn_imm * g.splitk);
    }
    l->grid[2] = (unsigned)pp->batch;
    l->block[0] = (unsigned)g.threads;
    l->block[1] = l->block[2] = 1;
    l->smem = (size_t)g.smem_bytes;
    l->smem_optin = g.smem_bytes > 48 * 1024;
    l->align = 16;
    l->entry = f->name;
    if (m->err.code) {
        pt_errf(e, m->err.code, "%s", m->err.msg);
        return m->err.code;
    }
    return PT_OK;
}

/* ---------------------------------------------------------------------- */
/* tensors, reference, counts                                              */

/* A [batch,] rows x ld tensor (batch only when batched; a vector when rows
 * is 1 and not batched). */
static pt_tensor mat(const char *name, pt_dtype dt, int64_t B, int64_t rows, int64_t ld)
{
    pt_tensor t = {.name = name, .dtype = dt, .numel = B * rows * ld};
    int64_t dims[3] = {B, rows, ld};
    int first = B > 1 ? 0 : rows > 1 ? 1 : 2;
    t.ndim = 3 - first;
    for (int d = first; d < 3; d++)
        t.shape[d - first] = dims[d];
    return t;
}

static int tensors(const pt_prepared *pp, int *nin, int *nout, pt_tensor *in, pt_tensor *out)
{
    int64_t B = pp->batch;
    int64_t ar = pp->a_kmajor ? pp->M : pp->K, br = pp->b_kmajor ? pp->N : pp->K;
    int64_t dr = pp->d_col ? pp->N : pp->M;
    /* a tf32 GEMM's D is f32 storage with tf32-product accuracy */
    pt_dtype ddt = pp->at->dt == PT_TF32 && pp->out_dt == PT_F32 ? PT_TF32 : pp->out_dt;
    int n = 2;
    if (in) {
        in[0] = mat("a", pp->at->dt, B, ar, pp->lda);
        in[1] = mat("b", pp->at->dt, B, br, pp->ldb);
    }
    if (pp->has_c) {
        if (in)
            in[n] = mat("c", pp->c_dt, B, dr, pp->ldc);
        n++;
    }
    for (int j = 0; j < pp->naux; j++, n++) {
        if (!in)
            continue;
        const gemm_aux *x = &pp->aux[j];
        if (x->kind == GEMM_AUX_FULL)
            in[n] = mat(x->base, pp->aux_dt, B, pp->d_col ? pp->N : pp->M, pp->d_col ? pp->M : pp->N);
        else
            in[n] = mat(x->base, pp->aux_dt, 1, 1, x->kind == GEMM_AUX_N ? pp->N : pp->M);
    }
    *nin = n;
    *nout = 1;
    if (out)
        out[0] = mat("d", ddt, B, dr, pp->ldd);
    return PT_OK;
}

/* D's padding: with a leading dimension past the row (ldd > N, or M for
 * a column-major D) the elements between rows are no kernel's to write
 * (a TMA store of odd N needs 16-byte row pitches). */
static int padding(const pt_prepared *pp, const pt_tensor *in, int out, uint8_t *mask, pt_err *e)
{
    (void)in;
    (void)e;
    int64_t cols = pp->d_col ? pp->M : pp->N;
    if (out != 0)
        return PT_OK;
    for (int64_t j = 0; j < pp->batch * pp->sd; j++) /* every byte: 0 where D is written */
        mask[j] = (uint8_t)(pp->ldd > cols && j % pp->sd % pp->ldd >= cols);
    return PT_OK;
}

/* Element (b, m, n) of a tensor stored like D (orientation of D, leading
 * dimension ld, batch stride s). */
static int64_t dpos(const pt_prepared *pp, int64_t b, int64_t m, int64_t n, int64_t ld, int64_t s)
{
    return b * s + (pp->d_col ? n * ld + m : m * ld + n);
}

/* The accumulator is f32 (floating inputs): a dot product past its range
 * holds +-inf in every kernel (the last rounding overflows, or a partial
 * sum did and an infinity stays), so the reference's does too; int8 sums
 * (s32, exact) never get there. docs/gemm.md, non-finite inputs. */
static double acc_f32(double s) { return fabs(s) >= 0x1.ffffffp127 ? copysign(INFINITY, s) : s; }

static int reference(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    int64_t B = pp->batch, M = pp->M, N = pp->N, K = pp->K;
    const double *A = in[0].data, *Bm = in[1].data;
    const double *C = pp->has_c ? in[2].data : NULL;
    double *D = out[0].data;
    int64_t MN = M * N;
    double *acc = malloc((size_t)(B * MN) * sizeof *acc);
    double *av = malloc((size_t)K * sizeof *av);
    bool tf32 = pp->at->tf32;
    double *bround = tf32 ? malloc((size_t)in[1].numel * sizeof *bround) : NULL;
    if (!acc || !av || (tf32 && !bround)) {
        free(acc);
        free(av);
        free(bround);
        return pt_errf(e, PT_ENOMEM, "gemm reference: out of memory");
    }
    if (tf32) { /* B rounded once, not once per row of A */
        for (int64_t i = 0; i < in[1].numel; i++)
            bround[i] = pt_dtype_round(PT_TF32, Bm[i]);
        Bm = bround;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t m = 0; m < M; m++) {
            for (int64_t k = 0; k < K; k++) {
                double v = A[b * pp->sa + (pp->a_kmajor ? m * pp->lda + k : k * pp->lda + m)];
                av[k] = tf32 ? pt_dtype_round(PT_TF32, v) : v;
            }
            for (int64_t n = 0; n < N; n++) {
                double s = 0.0;
                const double *bb = Bm + b * pp->sb;
                if (pp->b_kmajor) {
                    const double *col = bb + n * pp->ldb;
                    for (int64_t k = 0; k < K; k++)
                        s += av[k] * col[k];
                } else {
                    for (int64_t k = 0; k < K; k++)
                        s += av[k] * bb[k * pp->ldb + n];
                }
                acc[b * MN + m * N + n] = acc_f32(s);
            }
        }
    free(av);
    free(bround);
    for (int64_t i = 0; i < B * pp->sd; i++)
        D[i] = 0.0;
    if (pp->int_exact) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double v = acc[b * MN + m * N + n];
                    if (C)
                        v += C[dpos(pp, b, m, n, pp->ldc, pp->sc)];
                    D[dpos(pp, b, m, n, pp->ldd, pp->sd)] = v;
                }
        free(acc);
        return PT_OK;
    }
    /* the epilogue program on logical [B,] M, N inputs */
    const ex_prog *p = pp->epi;
    const double **ins = calloc((size_t)p->ninputs, sizeof *ins);
    double **owned = calloc((size_t)p->ninputs, sizeof *owned);
    double *res = malloc((size_t)(B * MN) * sizeof *res);
    double alpha = pp->alpha, beta = pp->beta;
    int rc = PT_OK;
    if (!ins || !owned || !res) {
        rc = pt_errf(e, PT_ENOMEM, "gemm reference: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < B * MN; i++)
        acc[i] *= (double)pp->scale_ab;
    for (int i = 0; i < p->ninputs; i++) {
        if (i == pp->in_acc) {
            ins[i] = acc;
        } else if (i == pp->in_alpha) {
            ins[i] = &alpha;
        } else if (i == pp->in_beta) {
            ins[i] = &beta;
        } else {
            /* c or an aux tensor */
            const double *src = NULL;
            int64_t ld = N, s = MN;
            bool full = true;
            if (i == pp->in_c) {
                src = C;
                ld = pp->ldc;
                s = pp->sc;
            } else {
                for (int j = 0; j < pp->naux; j++)
                    if (pp->aux[j].input == i) {
                        src = in[2 + (pp->has_c ? 1 : 0) + j].data;
                        full = pp->aux[j].kind == GEMM_AUX_FULL;
                        ld = pp->d_col ? M : N;
                    }
            }
            if (!full) {
                ins[i] = src;
                continue;
            }
            owned[i] = malloc((size_t)(B * MN) * sizeof(double));
            if (!owned[i]) {
                rc = pt_errf(e, PT_ENOMEM, "gemm reference: out of memory");
                goto done;
            }
            for (int64_t b = 0; b < B; b++)
                for (int64_t m = 0; m < M; m++)
                    for (int64_t n = 0; n < N; n++)
                        owned[i][b * MN + m * N + n] = src[dpos(pp, b, m, n, ld, s)];
            ins[i] = owned[i];
        }
    }
    rc = ex_reference(p, ins, &res, e);
    if (rc)
        goto done;
    bool fp8 = pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double v = res[b * MN + m * N + n];
                if (fp8)
                    v *= pp->out_scale;
                if (pp->out_dt == PT_S32)
                    v = nearbyint(v);
                D[dpos(pp, b, m, n, pp->ldd, pp->sd)] = v;
            }
done:
    if (owned)
        for (int i = 0; i < p->ninputs; i++)
            free(owned[i]);
    free(owned);
    free(ins);
    free(res);
    free(acc);
    return rc;
}

/* acc at (b, m, n): the dot product of row m of op(A) and column n of
 * op(B), tf32 operands rounded as the kernel does, times scale_a*scale_b. */
static double acc_at(const pt_prepared *pp, const double *A, const double *B, int64_t b, int64_t m,
                     int64_t n)
{
    bool tf32 = pp->at->tf32;
    const double *a = A + b * pp->sa, *bb = B + b * pp->sb;
    int64_t as = pp->a_kmajor ? 1 : pp->lda, bs = pp->b_kmajor ? 1 : pp->ldb;
    a += pp->a_kmajor ? m * pp->lda : m;
    bb += pp->b_kmajor ? n * pp->ldb : n;
    double s = 0.0;
    for (int64_t k = 0; k < pp->K; k++) {
        double x = a[k * as], y = bb[k * bs];
        if (tf32) {
            x = pt_dtype_round(PT_TF32, x);
            y = pt_dtype_round(PT_TF32, y);
        }
        s += x * y;
    }
    return s;
}

/* The epilogue's input values at one element of D (batch b, row m, column
 * n): the scaled accumulator, alpha, beta, c and every aux tensor, in the
 * program's input order. reference_at and magnitude evaluate the 1x1
 * program on them. */
static void epi_inputs(const pt_prepared *pp, const pt_tensor *in, int64_t b, int64_t m,
                       int64_t n, double acc, double cv, double *v)
{
    int64_t cols = pp->d_col ? pp->M : pp->N;
    for (int i = 0; i < pp->epi->ninputs; i++) {
        if (i == pp->in_acc)
            v[i] = acc;
        else if (i == pp->in_alpha)
            v[i] = pp->alpha;
        else if (i == pp->in_beta)
            v[i] = pp->beta;
        else if (i == pp->in_c)
            v[i] = cv;
        else
            for (int q = 0; q < pp->naux; q++) {
                if (pp->aux[q].input != i)
                    continue;
                const double *x = in[2 + (pp->has_c ? 1 : 0) + q].data;
                v[i] = pp->aux[q].kind == GEMM_AUX_N ? x[n]
                     : pp->aux[q].kind == GEMM_AUX_M ? x[m]
                                                     : x[dpos(pp, b, m, n, cols, pp->saux)];
            }
    }
}

/* Sampled reference: each sampled element of D on its own. A shallow copy
 * of the bound epilogue program with one row of one column evaluates
 * exactly ex_reference's arithmetic on one element, fed with the element's
 * input values. */
static int reference_at(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                        int n, double *vals, pt_err *e)
{
    if (out != 0)
        return pt_errf(e, PT_EINVAL, "reference_at: no output %d", out);
    const double *A = in[0].data, *Bm = in[1].data;
    const double *C = pp->has_c ? in[2].data : NULL;
    int64_t rows = pp->d_col ? pp->N : pp->M, cols = pp->d_col ? pp->M : pp->N;
    int64_t total = pp->batch * pp->sd;
    ex_prog one;
    const double *ptrs[32];
    double v[32];
    double res = 0, *resp = &res;
    if (pp->epi) {
        if (pp->epi->ninputs > 32)
            return pt_errf(e, PT_EINVAL, "reference_at: too many epilogue inputs");
        one = *pp->epi;
        one.rows = 1;
        one.cols = 1;
        for (int i = 0; i < pp->epi->ninputs; i++)
            ptrs[i] = &v[i];
    }
    for (int j = 0; j < n; j++) {
        if (idx[j] < 0 || idx[j] >= total)
            return pt_errf(e, PT_ERANGE, "reference_at: index %lld outside d (%lld elements)",
                           (long long)idx[j], (long long)total);
        int64_t b = idx[j] / pp->sd, r = idx[j] % pp->sd;
        int64_t row = r / pp->ldd, col = r % pp->ldd;
        if (row >= rows || col >= cols) { /* padding between rows: never written */
            vals[j] = 0.0;
            continue;
        }
        int64_t m = pp->d_col ? col : row, nn = pp->d_col ? row : col;
        double acc = acc_f32(acc_at(pp, A, Bm, b, m, nn));
        double cv = C ? C[dpos(pp, b, m, nn, pp->ldc, pp->sc)] : 0.0;
        if (pp->int_exact) {
            vals[j] = acc + cv;
            continue;
        }
        epi_inputs(pp, in, b, m, nn, acc * (double)pp->scale_ab, cv, v);
        int rc = ex_reference(&one, ptrs, &resp, e);
        if (rc)
            return rc;
        double w = res;
        if (pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2)
            w *= pp->out_scale;
        if (pp->out_dt == PT_S32)
            w = nearbyint(w);
        vals[j] = w;
    }
    return PT_OK;
}

/* acc_at's sum (same terms, same order: the same value) and, in *sabs,
 * the sum of the terms' absolute values, in one pass. */
static double acc_abs_at(const pt_prepared *pp, const double *A, const double *B, int64_t b,
                         int64_t m, int64_t n, double *sabs)
{
    bool tf32 = pp->at->tf32;
    const double *a = A + b * pp->sa, *bb = B + b * pp->sb;
    int64_t as = pp->a_kmajor ? 1 : pp->lda, bs = pp->b_kmajor ? 1 : pp->ldb;
    a += pp->a_kmajor ? m * pp->lda : m;
    bb += pp->b_kmajor ? n * pp->ldb : n;
    double s = 0.0, sa = 0.0;
    for (int64_t k = 0; k < pp->K; k++) {
        double x = a[k * as], y = bb[k * bs];
        if (tf32) {
            x = pt_dtype_round(PT_TF32, x);
            y = pt_dtype_round(PT_TF32, y);
        }
        s += x * y;
        sa += fabs(x * y);
    }
    *sabs = sa;
    return s;
}

/* Accumulation magnitude (pt_op.magnitude, for the verifier's error
 * model): per element of D, |scale_a*scale_b| * sum_k |a_mk| |b_kn| (tf32
 * operands rounded as the reference rounds them), carried through the
 * epilogue to first order by ex_magnitude on the element's own input values
 * (the 1x1 program reference_at evaluates), times the fp8 output scale.
 * The accumulation: K terms in f32, or in s32 (exact) for 8-bit integers. */
static int magnitude(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                     int64_t n, double *mag, pt_accum *acc, pt_err *e)
{
    if (out != 0)
        return pt_errf(e, PT_EINVAL, "magnitude: no output %d", out);
    acc->dtype = pp->at->int_acc ? PT_S32 : PT_F32;
    acc->len = pp->K;
    const double *A = in[0].data, *Bm = in[1].data;
    const double *C = pp->has_c ? in[2].data : NULL;
    int64_t rows = pp->d_col ? pp->N : pp->M, cols = pp->d_col ? pp->M : pp->N;
    int64_t total = pp->batch * pp->sd;
    const ex_prog *p = pp->epi;
    ex_prog one;
    const double *ptrs[32], *mptrs[32];
    double v[32], mv[32];
    double res = 0, *resp = &res;
    if (p) {
        if (p->ninputs > 32)
            return pt_errf(e, PT_EINVAL, "magnitude: too many epilogue inputs");
        one = *p;
        one.rows = 1;
        one.cols = 1;
        for (int i = 0; i < p->ninputs; i++) {
            ptrs[i] = &v[i];
            mptrs[i] = &mv[i];
            mv[i] = 0.0;
        }
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t at = idx ? idx[j] : j;
        mag[j] = 0.0;
        if (at < 0 || at >= total)
            return pt_errf(e, PT_ERANGE, "magnitude: index %lld outside d (%lld elements)",
                           (long long)at, (long long)total);
        int64_t b = at / pp->sd, r = at % pp->sd;
        int64_t row = r / pp->ldd, col = r % pp->ldd;
        if (pp->at->int_acc || row >= rows || col >= cols)
            continue; /* exact sums, or padding between rows */
        int64_t m = pp->d_col ? col : row, nn = pp->d_col ? row : col;
        double sabs, dot = acc_abs_at(pp, A, Bm, b, m, nn, &sabs);
        double g = fabs((double)pp->scale_ab) * sabs;
        if (!p) {
            mag[j] = g;
            continue;
        }
        double cv = C ? C[dpos(pp, b, m, nn, pp->ldc, pp->sc)] : 0.0;
        epi_inputs(pp, in, b, m, nn, dot * (double)pp->scale_ab, cv, v);
        if (pp->in_acc >= 0)
            mv[pp->in_acc] = g;
        int rc = ex_magnitude(&one, ptrs, mptrs, &resp, e);
        if (rc)
            return rc;
        mag[j] = res;
        if (pp->out_dt == PT_E4M3 || pp->out_dt == PT_E5M2)
            mag[j] *= fabs((double)pp->out_scale);
    }
    return PT_OK;
}

static double flops(const pt_prepared *pp)
{
    double f = 2.0 * (double)pp->M * (double)pp->N * (double)pp->K * (double)pp->batch;
    if (pp->epi)
        f += ex_flops(pp->epi);
    return f;
}

static double bytes(const pt_prepared *pp)
{
    double B = (double)pp->batch, M = (double)pp->M, N = (double)pp->N, K = (double)pp->K;
    double es = pp->at->es;
    double b = B * (M * K + K * N) * es + B * M * N * dt_bytes(pp->out_dt);
    if (pp->has_c)
        b += B * M * N * dt_bytes(pp->c_dt);
    for (int j = 0; j < pp->naux; j++)
        b += (pp->aux[j].kind == GEMM_AUX_N ? N : pp->aux[j].kind == GEMM_AUX_M ? M : B * M * N) *
             dt_bytes(pp->aux_dt);
    return b;
}

static const pt_problem examples[] = {
    PT_GEMM(4096, 4096, 4096, "tn", PT_BF16, PT_BF16),
    PT_GEMM(1024, 1024, 1024, "nn", PT_F32, PT_F32),
};

const pt_op gen_gemm_op = {
    .name = "gemm",
    .summary = "D = epilogue(A*B) on tensor cores (mma.sync: tf32 f16 bf16 s8 u8 e4m3 e5m2) or f32 SIMT",
    .schema = &gen_gemm_schema,
    .prepare = prepare,
    .space = space,
    .defaults = defaults,
    .check = check,
    .emit = emit,
    .tensors = tensors,
    .reference = reference,
    .reference_at = reference_at,
    .magnitude = magnitude,
    .padding = padding,
    .flops = flops,
    .bytes = bytes,
    .examples = examples,
    .nexamples = 2,
};
