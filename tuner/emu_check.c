#include "tuner/emu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/emu/emu.h"
#include "ptx/parse.h"

enum { MAX_T = 16 };

double pt_check_tolerance(pt_dtype dt)
{
    switch (dt) {
    case PT_F64:
    case PT_F32: return 1e-5;
    case PT_TF32: return 5e-4;
    case PT_F16:
    case PT_BF16: return 1e-2;
    case PT_E4M3: return 0.07;
    case PT_E5M2: return 0.13;
    default: return 0; /* integers: exact */
    }
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi), never exactly 0 (a zero hides wrong indexing). */
static double uniform(uint64_t *s, double lo, double hi)
{
    for (;;) {
        double u = (double)(splitmix(s) >> 11) * 0x1.0p-53;
        double v = lo + (hi - lo) * u;
        if (v != 0.0)
            return v;
    }
}

typedef struct bufs {
    int nin, nout;
    pt_tensor in[MAX_T], out[MAX_T], ref[MAX_T];
    void *host_in[MAX_T];
    uint64_t dev_in[MAX_T], dev_out[MAX_T];
} bufs;

static void free_bufs(bufs *b)
{
    for (int i = 0; i < b->nin; i++) {
        free(b->in[i].data);
        free(b->host_in[i]);
    }
    for (int i = 0; i < b->nout; i++) {
        free(b->out[i].data);
        free(b->ref[i].data);
    }
}

/* Spacing of fp8 values around |w| (subnormal spacing below min normal). */
static double fp8_ulp(pt_dtype dt, double w)
{
    int mant = dt == PT_E4M3 ? 3 : 2, emin = dt == PT_E4M3 ? -6 : -14;
    int ex = w != 0 ? (int)floor(log2(fabs(w))) : emin;
    if (ex < emin)
        ex = emin;
    return ldexp(1.0, ex - mant);
}

static int compare(bufs *b, pt_check_result *r, pt_err *e)
{
    r->tol = 1.0;
    for (int o = 0; o < b->nout; o++) {
        const pt_tensor *got = &b->out[o], *want = &b->ref[o];
        bool fp8 = got->dtype == PT_E4M3 || got->dtype == PT_E5M2;
        double tol = fp8 ? 1.0 : pt_check_tolerance(got->dtype), scale = 0;
        if (tol < r->tol)
            r->tol = tol;
        for (int64_t i = 0; i < want->numel; i++)
            if (fabs(want->data[i]) > scale)
                scale = fabs(want->data[i]);
        double floor_ = scale > 0 ? 1e-2 * scale : 1e-30;
        for (int64_t i = 0; i < want->numel; i++) {
            double w = want->data[i], g = got->data[i];
            if (fp8) /* saturation is part of the format */
                w = fmax(fmin(w, got->dtype == PT_E4M3 ? 448.0 : 57344.0),
                         got->dtype == PT_E4M3 ? -448.0 : -57344.0);
            double err = fp8 ? fabs(g - w) / fp8_ulp(got->dtype, w)
                             : fabs(g - w) / fmax(fabs(w), floor_);
            if (isnan(w) && isnan(g))
                err = 0;
            else if (isnan(g) || isnan(w) || isnan(err))
                err = INFINITY;
            r->checked++;
            if (err > tol)
                r->bad++;
            if (err > r->max_err || (isinf(err) && !isinf(r->max_err))) {
                r->max_err = err;
                snprintf(r->worst, sizeof r->worst, "%s[%lld] = %.9g, reference %.9g", got->name,
                         (long long)i, g, want->data[i]);
            }
        }
    }
    if (r->bad)
        return pt_errf(e, PT_ERANGE, "%lld of %lld elements over tolerance %g; worst %s (error %.3g)",
                       (long long)r->bad, (long long)r->checked, r->tol, r->worst, r->max_err);
    return PT_OK;
}

int pt_check_emu(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c,
                 const pt_check_opts *o, pt_check_result *r, pt_err *e)
{
    memset(r, 0, sizeof *r);
    ptx_module *built = NULL, *m = NULL;
    emu_ctx *ctx = NULL;
    emu_kernel *k = NULL;
    char *text = NULL;
    bufs b;
    memset(&b, 0, sizeof b);
    pt_launch l;
    int rc = pt_op_build(op, pp, t, 0, c, &built, &l, e);
    if (rc)
        return rc;
    /* the text is what gets compiled, hashed and stored: emulate exactly it */
    text = ptx_print(built);
    rc = ptx_parse(text, strlen(text), "<emitted>", 0, &m, e);
    if (rc)
        goto out;
    char *again = ptx_print(m);
    if (strcmp(again, text) != 0)
        rc = pt_errf(e, PT_EINTERNAL, "parse(print(kernel)) does not print back identically");
    free(again);
    if (rc)
        goto out;

    op->tensors(pp, &b.nin, &b.nout, NULL, NULL);
    if (b.nin > MAX_T || b.nout > MAX_T) {
        rc = pt_errf(e, PT_EINVAL, "too many tensors for the checker");
        goto out;
    }
    op->tensors(pp, &b.nin, &b.nout, b.in, b.out);
    uint64_t seed = o && o->seed ? o->seed : 1;
    double lo = o && (o->lo || o->hi) ? o->lo : -2.0, hi = o && (o->lo || o->hi) ? o->hi : 2.0;
    for (int i = 0; i < b.nin; i++) {
        pt_tensor *tn = &b.in[i];
        size_t bytes = (size_t)tn->numel * (size_t)pt_dtype_get(tn->dtype)->bytes;
        tn->data = malloc((size_t)tn->numel * sizeof(double));
        b.host_in[i] = malloc(bytes ? bytes : 1);
        if (!tn->data || !b.host_in[i]) {
            rc = pt_errf(e, PT_ENOMEM, "out of memory for input %s", tn->name);
            goto out;
        }
        for (int64_t j = 0; j < tn->numel; j++) {
            pt_dtype_store(tn->dtype, b.host_in[i], (size_t)j, uniform(&seed, lo, hi));
            /* the reference sees exactly the stored (rounded) value */
            tn->data[j] = pt_dtype_load(tn->dtype, b.host_in[i], (size_t)j);
        }
    }
    for (int i = 0; i < b.nout; i++) {
        b.ref[i] = b.out[i];
        b.out[i].data = malloc((size_t)b.out[i].numel * sizeof(double));
        b.ref[i].data = malloc((size_t)b.out[i].numel * sizeof(double));
        if (!b.out[i].data || !b.ref[i].data) {
            rc = pt_errf(e, PT_ENOMEM, "out of memory for output %s", b.out[i].name);
            goto out;
        }
    }
    rc = op->reference(pp, b.in, b.ref, e);
    if (rc)
        goto out;

    emu_opts eo = emu_default_opts();
    eo.threads = o ? o->threads : 0;
    ctx = emu_new(&eo);
    for (int i = 0; i < b.nin; i++) {
        size_t bytes = (size_t)b.in[i].numel * (size_t)pt_dtype_get(b.in[i].dtype)->bytes;
        b.dev_in[i] = emu_alloc(ctx, bytes, b.in[i].name);
        if ((rc = emu_write(ctx, b.dev_in[i], b.host_in[i], bytes, e)))
            goto out;
    }
    for (int i = 0; i < b.nout; i++) {
        size_t bytes = (size_t)b.out[i].numel * (size_t)pt_dtype_get(b.out[i].dtype)->bytes;
        b.dev_out[i] = emu_alloc(ctx, bytes, b.out[i].name);
        if ((rc = emu_poison(ctx, b.dev_out[i], bytes, e)))
            goto out;
    }
    union {
        uint64_t u64;
        uint32_t u32;
        float f32;
    } vals[32];
    const void *args[32];
    if (l.nargs > 32) {
        rc = pt_errf(e, PT_EINVAL, "too many kernel parameters for the checker");
        goto out;
    }
    for (int i = 0; i < l.nargs; i++) {
        const pt_arg *a = &l.args[i];
        switch (a->kind) {
        case PT_ARG_INPUT: vals[i].u64 = b.dev_in[a->index]; break;
        case PT_ARG_OUTPUT: vals[i].u64 = b.dev_out[a->index]; break;
        case PT_ARG_U32: vals[i].u32 = (uint32_t)a->u; break;
        case PT_ARG_U64: vals[i].u64 = a->u; break;
        case PT_ARG_F32: vals[i].f32 = a->f; break;
        case PT_ARG_WORKSPACE: {
            /* zero-filled scratch the kernel leaves zero again */
            size_t bytes = a->u ? (size_t)a->u : 1;
            void *zero = calloc(1, bytes);
            vals[i].u64 = emu_alloc(ctx, bytes, "workspace");
            rc = zero ? emu_write(ctx, vals[i].u64, zero, bytes, e)
                      : pt_errf(e, PT_ENOMEM, "out of memory for a workspace");
            free(zero);
            if (rc)
                goto out;
            break;
        }
        }
        args[i] = &vals[i];
    }
    if ((rc = emu_load(ctx, m, l.entry, &k, e)))
        goto out;
    emu_launch el = {{l.grid[0], l.grid[1], l.grid[2]}, {l.block[0], l.block[1], l.block[2]}, l.smem};
    emu_stats st;
    memset(&st, 0, sizeof st);
    rc = emu_run(ctx, k, &el, args, &st, e);
    r->lane_instructions = st.lane_instructions;
    r->emu_seconds = st.seconds;
    if (rc)
        goto out;
    for (int i = 0; i < b.nout; i++) {
        size_t bytes = (size_t)b.out[i].numel * (size_t)pt_dtype_get(b.out[i].dtype)->bytes;
        void *host = malloc(bytes ? bytes : 1);
        if (!host) {
            rc = pt_errf(e, PT_ENOMEM, "out of memory reading %s", b.out[i].name);
            goto out;
        }
        rc = emu_read(ctx, b.dev_out[i], host, bytes, e);
        for (int64_t j = 0; !rc && j < b.out[i].numel; j++)
            b.out[i].data[j] = pt_dtype_load(b.out[i].dtype, host, (size_t)j);
        free(host);
        if (rc)
            goto out;
    }
    rc = compare(&b, r, e);
out:
    emu_kernel_free(k);
    emu_free(ctx);
    free_bufs(&b);
    free(text);
    ptx_module_free(m);
    ptx_module_free(built);
    return rc;
}
