/* Verification: poisoned outputs, guard zones, input integrity, and the
 * comparison with the float64 reference (metric and tolerances in verify.h). */
#include "tuner/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { GUARD_BYTE = 0xA5, POISON_BYTE = 0xFF };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

static size_t tensor_bytes(const pt_tensor *t)
{
    return (size_t)t->numel * (size_t)pt_dtype_get(t->dtype)->bytes;
}

int tuner_io_new(const pt_op *op, const pt_prepared *pp, tuner_io **out, pt_err *e)
{
    *out = NULL;
    tuner_io *io = calloc(1, sizeof *io);
    if (!io)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    io->op = op;
    io->pp = pp;
    op->tensors(pp, &io->nin, &io->nout, NULL, NULL);
    if (io->nin > TUNER_MAX_TENSORS || io->nout > TUNER_MAX_TENSORS) {
        int nin = io->nin, nout = io->nout;
        free(io);
        return pt_errf(e, PT_EINVAL, "%d inputs and %d outputs: at most %d each", nin, nout,
                       TUNER_MAX_TENSORS);
    }
    op->tensors(pp, &io->nin, &io->nout, io->in, io->out);
    for (int i = 0; i < io->nin; i++) {
        io->in_bytes[i] = tensor_bytes(&io->in[i]);
        io->in_bits[i] = calloc(io->in_bytes[i] ? io->in_bytes[i] : 1, 1);
        io->in[i].data = calloc((size_t)io->in[i].numel ? (size_t)io->in[i].numel : 1, sizeof(double));
        if (!io->in_bits[i] || !io->in[i].data) {
            pt_errf(e, PT_ENOMEM, "out of memory for input '%s' (%lld elements)", io->in[i].name,
                    (long long)io->in[i].numel);
            io->nout = 0;
            tuner_io_free(NULL, io);
            return PT_ENOMEM;
        }
    }
    for (int i = 0; i < io->nout; i++) {
        io->out_bytes[i] = tensor_bytes(&io->out[i]);
        io->out[i].data = NULL;
    }
    *out = io;
    return PT_OK;
}

void tuner_io_free(tuner_dev *d, tuner_io *io)
{
    if (!io)
        return;
    for (int i = 0; i < io->nin; i++) {
        free(io->in_bits[i]);
        free(io->in[i].data);
        if (d && io->allocated)
            tuner_free(d, io->in_base[i]);
    }
    for (int i = 0; i < io->nout; i++) {
        free(io->out_bits[i]);
        free(io->out[i].data);
        if (d && io->allocated)
            tuner_free(d, io->out_base[i]);
    }
    for (int i = 0; d && i < TUNER_MAX_ARGS; i++)
        tuner_free(d, io->ws[i]);
    free(io);
}

void tuner_io_random(tuner_io *io, uint64_t seed, double lo, double hi)
{
    uint64_t s = seed ? seed : 1;
    if (lo == 0 && hi == 0) {
        lo = -2.0;
        hi = 2.0;
    }
    for (int i = 0; i < io->nin; i++) {
        pt_tensor *t = &io->in[i];
        for (int64_t j = 0; j < t->numel; j++) {
            pt_dtype_store(t->dtype, io->in_bits[i], (size_t)j, uniform(&s, lo, hi));
            /* the reference sees exactly the stored (rounded) value */
            t->data[j] = pt_dtype_load(t->dtype, io->in_bits[i], (size_t)j);
        }
    }
    if (!io->op->init_inputs)
        return;
    /* the op's structured inputs (lengths, offsets, page tables) over the
     * noise, stored in their dtypes; the reference sees the stored values */
    io->op->init_inputs(io->pp, seed ? seed : 1, io->in);
    for (int i = 0; i < io->nin; i++) {
        pt_tensor *t = &io->in[i];
        for (int64_t j = 0; j < t->numel; j++) {
            pt_dtype_store(t->dtype, io->in_bits[i], (size_t)j, t->data[j]);
            t->data[j] = pt_dtype_load(t->dtype, io->in_bits[i], (size_t)j);
        }
    }
}

void tuner_io_set_input(tuner_io *io, int i, const void *bits)
{
    memcpy(io->in_bits[i], bits, io->in_bytes[i]);
    for (int64_t j = 0; j < io->in[i].numel; j++)
        io->in[i].data[j] = pt_dtype_load(io->in[i].dtype, io->in_bits[i], (size_t)j);
}

static int alloc_guarded(tuner_dev *d, size_t bytes, size_t guard, tuner_ptr *base, tuner_ptr *dev,
                         pt_err *e)
{
    int rc = tuner_alloc(d, bytes + 2 * guard, base, e);
    *dev = rc ? 0 : *base + guard;
    return rc;
}

int tuner_io_alloc(tuner_dev *d, tuner_io *io, size_t guard, pt_err *e)
{
    if (io->allocated)
        return PT_OK;
    io->guard = guard;
    io->allocated = true; /* from here on tuner_io_free releases what exists */
    int rc = PT_OK;
    for (int i = 0; i < io->nin && !rc; i++)
        rc = alloc_guarded(d, io->in_bytes[i], guard, &io->in_base[i], &io->in_dev[i], e);
    for (int i = 0; i < io->nout && !rc; i++)
        rc = alloc_guarded(d, io->out_bytes[i], guard, &io->out_base[i], &io->out_dev[i], e);
    return rc;
}

static int poison_outputs(tuner_dev *d, tuner_io *io, pt_err *e)
{
    int rc = PT_OK;
    for (int i = 0; i < io->nout && !rc; i++)
        rc = tuner_fill(d, io->out_dev[i], POISON_BYTE, io->out_bytes[i], e);
    return rc;
}

/* Guard zones back to their pattern: a kernel that scribbled on them is
 * caught once, not blamed again on the next candidate using these buffers. */
static int refill_guards(tuner_dev *d, tuner_io *io, pt_err *e)
{
    int rc = PT_OK;
    for (int i = 0; i < io->nin + io->nout && !rc && io->guard; i++) {
        bool in = i < io->nin;
        int j = in ? i : i - io->nin;
        tuner_ptr dev = in ? io->in_dev[j] : io->out_dev[j];
        size_t bytes = in ? io->in_bytes[j] : io->out_bytes[j];
        rc = tuner_fill(d, dev - io->guard, GUARD_BYTE, io->guard, e);
        if (!rc)
            rc = tuner_fill(d, dev + bytes, GUARD_BYTE, io->guard, e);
    }
    return rc;
}

int tuner_io_check_inputs(const tuner_io *io, pt_err *e)
{
    if (!io->op->check_inputs)
        return PT_OK;
    return io->op->check_inputs(io->pp, io->in, e);
}

int tuner_io_upload(tuner_dev *d, tuner_io *io, pt_err *e)
{
    /* no kernel runs on inputs it may not see (an index outside a pool) */
    int rc = tuner_io_check_inputs(io, e);
    if (!rc)
        rc = refill_guards(d, io, e);
    for (int i = 0; i < io->nin && !rc; i++)
        rc = tuner_write(d, io->in_dev[i], io->in_bits[i], io->in_bytes[i], e);
    return rc ? rc : poison_outputs(d, io, e);
}

int tuner_io_download(tuner_dev *d, tuner_io *io, pt_err *e)
{
    for (int i = 0; i < io->nout; i++) {
        pt_tensor *t = &io->out[i];
        if (!io->out_bits[i])
            io->out_bits[i] = malloc(io->out_bytes[i] ? io->out_bytes[i] : 1);
        if (!t->data)
            t->data = malloc(((size_t)t->numel ? (size_t)t->numel : 1) * sizeof(double));
        if (!io->out_bits[i] || !t->data)
            return pt_errf(e, PT_ENOMEM, "out of memory for output '%s'", t->name);
        int rc = tuner_read(d, io->out_dev[i], io->out_bits[i], io->out_bytes[i], e);
        if (rc)
            return rc;
        for (int64_t j = 0; j < t->numel; j++)
            t->data[j] = pt_dtype_load(t->dtype, io->out_bits[i], (size_t)j);
    }
    return PT_OK;
}

int tuner_args_bind(tuner_dev *d, tuner_args *a, const pt_launch *l, const tuner_ptr *in,
                    const tuner_ptr *out, const tuner_ptr *ws, pt_err *e)
{
    if (l->nargs > TUNER_MAX_ARGS)
        return pt_errf(e, PT_EINVAL, "%d kernel parameters: at most %d", l->nargs, TUNER_MAX_ARGS);
    for (int i = 0; i < l->nargs; i++) {
        const pt_arg *g = &l->args[i];
        a->p[i] = &a->v[i];
        switch (g->kind) {
        case PT_ARG_INPUT: a->v[i].u64 = in[g->index]; break;
        case PT_ARG_OUTPUT: a->v[i].u64 = out[g->index]; break;
        case PT_ARG_U32: a->v[i].u32 = (uint32_t)g->u; break;
        case PT_ARG_U64: a->v[i].u64 = g->u; break;
        case PT_ARG_F32: a->v[i].f32 = g->f; break;
        case PT_ARG_WORKSPACE:
        case PT_ARG_SCRATCH: a->v[i].u64 = ws ? ws[i] : 0; break;
        case PT_ARG_TENSORMAP: { /* 128 bytes by value, encoded by the backend */
            if (g->index < 0 || g->index >= l->ntmaps || l->ntmaps > PT_MAX_TMAPS)
                return pt_errf(e, PT_EINVAL, "parameter %d: tensor map %d of %d", i + 1, g->index,
                               l->ntmaps);
            const pt_tmap *t = &l->tmaps[g->index];
            bool isin = t->of == PT_ARG_INPUT;
            if ((!isin && t->of != PT_ARG_OUTPUT) || t->index < 0 || t->index >= TUNER_MAX_TENSORS)
                return pt_errf(e, PT_EINVAL, "parameter %d: a tensor map over no tensor", i + 1);
            emu_tmap_desc m;
            tuner_tmap_desc(t, isin ? in[t->index] : out[t->index], &m);
            int rc = tuner_tmap_encode(d, &m, a->tmap[g->index], e);
            if (rc)
                return rc;
            a->p[i] = a->tmap[g->index];
            break;
        }
        }
    }
    return PT_OK;
}

int tuner_io_bind(tuner_dev *d, tuner_io *io, const pt_launch *l, tuner_args *a, pt_err *e)
{
    if (l->nargs > TUNER_MAX_ARGS)
        return pt_errf(e, PT_EINVAL, "%d kernel parameters: at most %d", l->nargs, TUNER_MAX_ARGS);
    for (int i = 0; i < l->nargs; i++) {
        pt_arg_kind kind = l->args[i].kind;
        bool scratch = kind == PT_ARG_SCRATCH;
        if (kind != PT_ARG_WORKSPACE && !scratch)
            continue;
        size_t bytes = (size_t)l->args[i].u;
        if (io->ws_bytes[i] < bytes) {
            tuner_free(d, io->ws[i]);
            io->ws[i] = 0;
            io->ws_bytes[i] = 0;
            int rc = tuner_alloc(d, bytes ? bytes : 1, &io->ws[i], e);
            if (!rc && !scratch)
                rc = tuner_fill(d, io->ws[i], 0, bytes, e);
            if (rc)
                return rc;
            io->ws_bytes[i] = bytes;
            io->ws_zero[i] = !scratch;
        } else if (!scratch && !io->ws_zero[i]) {
            /* a scratch buffer of a previous launch serves as a workspace:
             * the zero contract starts here */
            int rc = tuner_fill(d, io->ws[i], 0, io->ws_bytes[i], e);
            if (rc)
                return rc;
            io->ws_zero[i] = true;
        }
        if (scratch) { /* poisoned before every launch: no partial survives */
            int rc = tuner_fill(d, io->ws[i], 0xFF, io->ws_bytes[i], e);
            if (rc)
                return rc;
            io->ws_zero[i] = false;
        }
    }
    return tuner_args_bind(d, a, l, io->in_dev, io->out_dev, io->ws, e);
}

/* ---- comparison ---- */

double tuner_tolerance(pt_dtype dt)
{
    switch (dt) {
    case PT_F64:
    case PT_F32: return 1e-5;
    case PT_TF32: return 5e-4;
    case PT_F16:
    case PT_BF16: return 1e-2;
    case PT_E4M3:
    case PT_E5M2: return 1.0; /* ulps */
    default: return 0;        /* integers: exact */
    }
}

double tuner_unit_roundoff(pt_dtype dt)
{
    switch (dt) {
    case PT_F64: return 0x1p-53;
    case PT_F32: return 0x1p-24;
    case PT_TF32:
    case PT_F16: return 0x1p-11;
    case PT_BF16: return 0x1p-8;
    case PT_E4M3: return 0x1p-4;
    case PT_E5M2: return 0x1p-3;
    default: return 0; /* integers: exact */
    }
}

double tuner_accum_gamma(const pt_accum *a)
{
    if (!a || a->len <= 0)
        return 0;
    return TUNER_ACCUM_C * sqrt((double)a->len) * tuner_unit_roundoff(a->dtype);
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

/* The magnitude from which round-to-nearest stores +-inf in dt (halfway
 * between its largest finite value and the next power of two); inf for
 * f64, fp8 (saturated by the kernels' cvt.rn.satfinite) and integers. */
static double overflow_at(pt_dtype dt)
{
    switch (dt) {
    case PT_F16: return 65520.0;
    case PT_BF16: return 0x1.ffp127;
    case PT_F32:
    case PT_TF32: return 0x1.ffffffp127;
    default: return INFINITY;
    }
}

int64_t tuner_compare_bound(const char *name, pt_dtype dt, const double *got, const double *ref,
                            const double *allow, const int64_t *idx, int64_t n,
                            tuner_verify_result *r)
{
    return tuner_compare_tol(name, dt, NULL, got, ref, allow, idx, n, r);
}

int64_t tuner_compare_tol(const char *name, pt_dtype dt, const pt_tol *ot, const double *got,
                          const double *ref, const double *allow, const int64_t *idx, int64_t n,
                          tuner_verify_result *r)
{
    bool fp8 = dt == PT_E4M3 || dt == PT_E5M2;
    bool exact = !pt_dtype_get(dt)->is_float;
    double tol = ot && ot->tol > 0 ? ot->tol : tuner_tolerance(dt), scale = 0;
    double floor_frac = ot && ot->floor > 0 ? ot->floor : 1e-2;
    if (r->checked == 0 || tol < r->tol)
        r->tol = tol;
    /* the tensor's scale from its finite elements: one inf in the reference
     * must not lift the floor of every other element to inf */
    for (int64_t j = 0; j < n; j++)
        if (isfinite(ref[j]) && fabs(ref[j]) > scale)
            scale = fabs(ref[j]);
    double floor_ = scale > 0 ? floor_frac * scale : 1e-30;
    double fmax_ = dt == PT_E4M3 ? 448.0 : 57344.0, ovf = overflow_at(dt);
    int64_t finite = 0;
    for (int64_t j = 0; j < n; j++) {
        double w = ref[j], g = got[j];
        if (fp8 && !isnan(w)) /* saturation is part of the format */
            w = fmax(fmin(w, fmax_), -fmax_);
        /* a non-finite or negative allowance allows nothing */
        double a = !exact && allow && isfinite(allow[j]) && allow[j] > 0 ? allow[j] : 0;
        /* overflow is part of the format too: a value whose whole error
         * band lies past the rounding threshold is +-inf, one whose band
         * straddles it may be either (docs/gemm.md) */
        bool either = false;
        if (isfinite(w) && fabs(w) + tol * fabs(w) + a >= ovf) {
            if (fabs(w) - tol * fabs(w) - a >= ovf)
                w = copysign(INFINITY, w);
            else
                either = true;
        }
        double err;
        finite += isfinite(w) != 0;
        if (isnan(w) || isnan(g)) {
            err = isnan(w) && isnan(g) ? 0 : INFINITY;
        } else if (isinf(w) || isinf(g)) {
            /* an infinity matches only itself, sign included */
            err = g == w || (either && g == copysign(INFINITY, w)) ? 0 : INFINITY;
        } else {
            /* tol * |g - w| / (tol * scale + a): the relative error where
             * a is 0, and err <= tol exactly when |g - w| <= tol * scale + a */
            double sc = fp8 ? fp8_ulp(dt, w) : fmax(fabs(w), floor_);
            err = fabs(g - w) / (tol > 0 ? sc + a / tol : sc);
            if (isnan(err))
                err = INFINITY;
        }
        r->checked++;
        if (!(err <= tol))
            r->bad++;
        /* the worst element is the one nearest its own output's tolerance
         * (outputs may differ: attention's o and lse); with one tolerance
         * that is the largest error */
        double ratio = tol > 0 ? err / tol : err;
        if (ratio > r->worst_ratio || (isinf(ratio) && !isinf(r->worst_ratio)) ||
            (r->checked == 1 && err > 0)) {
            r->worst_ratio = ratio;
            r->worst_tol = tol;
            r->max_err = err;
            int len = snprintf(r->worst, sizeof r->worst, "%s[%lld] = %.9g, reference %.9g", name,
                               (long long)(idx ? idx[j] : j), g, ref[j]);
            if (a > 0 && len > 0 && (size_t)len < sizeof r->worst)
                snprintf(r->worst + len, sizeof r->worst - (size_t)len,
                         ", accumulation bound %.3g", a);
        }
    }
    return finite;
}

void tuner_compare(const char *name, pt_dtype dt, const double *got, const double *ref,
                   const int64_t *idx, int64_t n, tuner_verify_result *r)
{
    tuner_compare_bound(name, dt, got, ref, NULL, idx, n, r);
}

/* allow[j] = gamma * mag[j] for element idx[j] (NULL: j) of output i, from
 * the op's magnitude; all zero when the op accumulates nothing. */
static int allowances(tuner_io *io, int i, const int64_t *idx, int64_t n, double *allow, pt_err *e)
{
    for (int64_t j = 0; j < n; j++)
        allow[j] = 0;
    if (!io->op->magnitude)
        return PT_OK;
    pt_accum acc = {PT_F32, 0};
    int rc = io->op->magnitude(io->pp, io->in, i, idx, n, allow, &acc, e);
    if (rc)
        return rc;
    double gamma = tuner_accum_gamma(&acc);
    for (int64_t j = 0; j < n; j++)
        allow[j] *= gamma;
    return PT_OK;
}

/* Compares output i and refuses a vacuous comparison: a reference that is
 * NaN or inf at every compared element (a NaN or inf parameter or input)
 * leaves nothing to check. */
static int compare_output(tuner_io *io, int i, const double *got, const double *want,
                          const int64_t *idx, int64_t n, tuner_verify_result *r, pt_err *e)
{
    double *allow = malloc(((size_t)n ? (size_t)n : 1) * sizeof *allow);
    if (!allow)
        return pt_errf(e, PT_ENOMEM, "out of memory for the bounds of '%s'", io->out[i].name);
    int rc = allowances(io, i, idx, n, allow, e);
    int64_t finite = 0;
    pt_tol tol = {0, 0};
    if (io->op->tolerance)
        io->op->tolerance(io->pp, i, &tol);
    if (!rc)
        finite = tuner_compare_tol(io->out[i].name, io->out[i].dtype, &tol, got, want, allow, idx,
                                   n, r);
    free(allow);
    if (!rc && n > 0 && finite == 0)
        rc = pt_errf(e, PT_EINVAL,
                     "the reference of output '%s' is NaN or inf at all %lld %selements (a NaN or "
                     "inf parameter or input?): nothing to compare",
                     io->out[i].name, (long long)n, r->sampled ? "sampled " : "");
    return rc;
}

/* n sample indices of [0, numel): runs of SAMPLE_RUN consecutive elements,
 * one run at a random place in each of n / SAMPLE_RUN equal strata, plus
 * the first and the last element. Sorted and distinct; spread over the
 * whole tensor, while a per-row reference evaluates few rows (a run spans
 * at most two), and each run also sees neighbouring lanes and vector tails. */
enum { SAMPLE_RUN = 64 };
static int64_t sample_indices(int64_t numel, int n, uint64_t *s, int64_t *idx)
{
    int64_t k = 0;
    if (numel <= (int64_t)n + 2) {
        for (int64_t i = 0; i < numel; i++)
            idx[k++] = i;
        return k;
    }
    int runs = (n + SAMPLE_RUN - 1) / SAMPLE_RUN;
    idx[k++] = 0;
    for (int r = 0; r < runs; r++) {
        int64_t lo = (int64_t)((double)numel * r / runs);
        int64_t hi = (int64_t)((double)numel * (r + 1) / runs); /* hi - lo > SAMPLE_RUN */
        int64_t span = hi - lo - SAMPLE_RUN;
        int64_t start = lo + (span > 0 ? (int64_t)(splitmix(s) % (uint64_t)span) : 0);
        for (int64_t j = start; j < start + SAMPLE_RUN && j < numel; j++)
            if (j > idx[k - 1])
                idx[k++] = j;
    }
    if (idx[k - 1] != numel - 1)
        idx[k++] = numel - 1;
    return k;
}

/* Reads each guard zone back; the first changed byte is the finding. */
static int check_guards(tuner_dev *d, tuner_io *io, tuner_verify_result *r, pt_err *e)
{
    size_t g = io->guard;
    if (!g)
        return PT_OK;
    uint8_t *buf = malloc(g);
    if (!buf)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    int rc = PT_OK;
    for (int t = 0; t < io->nin + io->nout && !rc && r->cls == TUNER_OK; t++) {
        bool in = t < io->nin;
        int i = in ? t : t - io->nin;
        tuner_ptr dev = in ? io->in_dev[i] : io->out_dev[i];
        size_t bytes = in ? io->in_bytes[i] : io->out_bytes[i];
        const char *name = in ? io->in[i].name : io->out[i].name;
        for (int side = 0; side < 2 && !rc && r->cls == TUNER_OK; side++) {
            rc = tuner_read(d, side ? dev + bytes : dev - g, buf, g, e);
            size_t first = g, count = 0;
            for (size_t b = 0; !rc && b < g; b++)
                if (buf[b] != GUARD_BYTE) {
                    if (first == g)
                        first = b;
                    count++;
                }
            if (!rc && count) {
                r->cls = TUNER_WRONG_ANSWER;
                strcpy(r->what, "guard");
                rc = pt_errf(e, PT_ERANGE,
                             "kernel wrote %zu bytes in the guard zone %s %s '%s' (first at %s%zu)",
                             count, side ? "after" : "before", in ? "input" : "output", name,
                             side ? "+" : "-", side ? first : g - first);
            }
        }
    }
    free(buf);
    return rc;
}

static int check_inputs(tuner_dev *d, tuner_io *io, tuner_verify_result *r, pt_err *e)
{
    int rc = PT_OK;
    for (int i = 0; i < io->nin && !rc; i++) {
        uint8_t *buf = malloc(io->in_bytes[i] ? io->in_bytes[i] : 1);
        if (!buf)
            return pt_errf(e, PT_ENOMEM, "out of memory");
        rc = tuner_read(d, io->in_dev[i], buf, io->in_bytes[i], e);
        if (!rc && memcmp(buf, io->in_bits[i], io->in_bytes[i]) != 0) {
            size_t b = 0;
            while (buf[b] == ((const uint8_t *)io->in_bits[i])[b])
                b++;
            r->cls = TUNER_WRONG_ANSWER;
            strcpy(r->what, "input");
            rc = pt_errf(e, PT_ERANGE, "kernel modified input '%s' (first changed byte at offset %zu)",
                         io->in[i].name, b);
        }
        free(buf);
    }
    return rc;
}

/* A workspace must be zero again after the run: the next launch relies on it. */
static int check_workspaces(tuner_dev *d, tuner_io *io, const pt_launch *l, tuner_verify_result *r,
                            pt_err *e)
{
    int rc = PT_OK;
    for (int i = 0; i < l->nargs && !rc; i++) {
        if (l->args[i].kind != PT_ARG_WORKSPACE || !io->ws[i])
            continue;
        size_t n = (size_t)l->args[i].u;
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
            return pt_errf(e, PT_ENOMEM, "out of memory");
        rc = tuner_read(d, io->ws[i], buf, n, e);
        size_t first = n;
        for (size_t b = 0; !rc && b < n && first == n; b++)
            if (buf[b])
                first = b;
        free(buf);
        if (!rc && first < n) {
            r->cls = TUNER_WRONG_ANSWER;
            strcpy(r->what, "workspace");
            rc = pt_errf(e, PT_ERANGE, "kernel left its workspace (parameter %d) nonzero at byte %zu",
                         i + 1, first);
            tuner_fill(d, io->ws[i], 0, n, e); /* for the next candidate */
        }
    }
    return rc;
}

/* The op's padding of every output (pt_op.padding): pad[i][j] = 1 where
 * no kernel writes element j of output i; pad[i] NULL: none. */
static int padding_masks(tuner_io *io, uint8_t **pad, pt_err *e)
{
    for (int i = 0; i < io->nout; i++)
        pad[i] = NULL;
    if (!io->op->padding)
        return PT_OK;
    for (int i = 0; i < io->nout; i++) {
        size_t n = (size_t)io->out[i].numel;
        /* zeroed: an op's hook marks only its padding (gemm's returns at
         * once when D has none), and what it leaves is compared */
        pad[i] = calloc(n ? n : 1, 1);
        if (!pad[i])
            return pt_errf(e, PT_ENOMEM, "out of memory for the padding of '%s'", io->out[i].name);
        int rc = io->op->padding(io->pp, io->in, i, pad[i], e);
        if (rc)
            return rc;
        bool any = false;
        for (size_t j = 0; j < n && !any; j++)
            any = pad[i][j] != 0;
        if (!any) {
            free(pad[i]);
            pad[i] = NULL;
        }
    }
    return PT_OK;
}

/* Float outputs still holding the poison bits were never written (padding
 * aside). */
static int check_unwritten(tuner_io *io, uint8_t *const *pad, tuner_verify_result *r, pt_err *e)
{
    for (int i = 0; i < io->nout; i++) {
        const pt_dtype_info *di = pt_dtype_get(io->out[i].dtype);
        if (!di->is_float)
            continue;
        const uint8_t *b = io->out_bits[i];
        int64_t count = 0, first = -1;
        for (int64_t j = 0; j < io->out[i].numel; j++) {
            if (pad[i] && pad[i][j])
                continue;
            bool all = true;
            for (int k = 0; k < di->bytes && all; k++)
                all = b[(size_t)j * (size_t)di->bytes + (size_t)k] == POISON_BYTE;
            if (all && !count++)
                first = j;
        }
        if (count) {
            r->cls = TUNER_WRONG_ANSWER;
            strcpy(r->what, "unwritten");
            return pt_errf(e, PT_ERANGE, "%lld elements of output '%s' never written (first: %lld)",
                           (long long)count, io->out[i].name, (long long)first);
        }
    }
    return PT_OK;
}

/* Keeps the elements of idx[0..n) (NULL: 0..n-1) that are not padding,
 * with their got and want values; returns how many. */
static int64_t drop_padding(const uint8_t *pad, int64_t *idx, double *got, double *want, int64_t n)
{
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t at = idx[j];
        if (pad[at])
            continue;
        idx[k] = at;
        if (got)
            got[k] = got[j];
        if (want)
            want[k] = want[j];
        k++;
    }
    return k;
}

static int check_values(tuner_io *io, uint8_t *const *pad, const tuner_verify_opts *o,
                        tuner_verify_result *r, pt_err *e)
{
    int64_t total = 0;
    for (int i = 0; i < io->nout; i++)
        total += io->out[i].numel;
    int64_t limit = o && o->full_limit > 0 ? o->full_limit : (int64_t)1 << 20;
    int samples = o && o->samples > TUNER_MIN_SAMPLES ? o->samples : TUNER_MIN_SAMPLES;
    r->sampled = total > limit && io->op->reference_at;
    if (total / 16 > limit && !io->op->reference_at) /* no overflow at INT64_MAX */
        return pt_errf(e, PT_EUNSUPPORTED,
                       "op '%s' has no sampled reference (pt_op.reference_at) and %lld output "
                       "elements are too many to compute whole on the CPU",
                       io->op->name, (long long)total);
    int rc = PT_OK;
    if (!r->sampled) {
        pt_tensor ref[TUNER_MAX_TENSORS];
        for (int i = 0; i < io->nout; i++) {
            ref[i] = io->out[i];
            ref[i].data = calloc((size_t)ref[i].numel ? (size_t)ref[i].numel : 1, sizeof(double));
            if (!ref[i].data)
                rc = pt_errf(e, PT_ENOMEM, "out of memory for the reference of '%s'", ref[i].name);
        }
        if (!rc)
            rc = io->op->reference(io->pp, io->in, ref, e);
        for (int i = 0; i < io->nout && !rc; i++) {
            if (!pad[i]) {
                rc = compare_output(io, i, io->out[i].data, ref[i].data, NULL, io->out[i].numel, r,
                                    e);
                continue;
            }
            /* only the elements a kernel writes */
            size_t cnt = (size_t)io->out[i].numel ? (size_t)io->out[i].numel : 1;
            int64_t *idx = malloc(cnt * sizeof *idx);
            double *got = malloc(cnt * sizeof *got);
            if (!idx || !got) {
                free(idx);
                free(got);
                rc = pt_errf(e, PT_ENOMEM, "out of memory");
                break;
            }
            for (int64_t j = 0; j < io->out[i].numel; j++) {
                idx[j] = j;
                got[j] = io->out[i].data[j];
            }
            int64_t n = drop_padding(pad[i], idx, got, ref[i].data, io->out[i].numel);
            rc = compare_output(io, i, got, ref[i].data, idx, n, r, e);
            free(idx);
            free(got);
        }
        for (int i = 0; i < io->nout; i++)
            free(ref[i].data);
    } else {
        uint64_t s = o && o->seed ? o->seed : 1;
        size_t cap = (size_t)samples + SAMPLE_RUN + 2;
        int64_t *idx = malloc(cap * sizeof *idx);
        double *got = malloc(cap * sizeof *got);
        double *want = malloc(cap * sizeof *want);
        if (!idx || !got || !want)
            rc = pt_errf(e, PT_ENOMEM, "out of memory");
        for (int i = 0; i < io->nout && !rc; i++) {
            int64_t n = sample_indices(io->out[i].numel, samples, &s, idx);
            if (pad[i])
                n = drop_padding(pad[i], idx, NULL, NULL, n);
            rc = io->op->reference_at(io->pp, io->in, i, idx, (int)n, want, e);
            for (int64_t j = 0; j < n; j++)
                got[j] = io->out[i].data[idx[j]];
            if (!rc)
                rc = compare_output(io, i, got, want, idx, n, r, e);
        }
        free(idx);
        free(got);
        free(want);
    }
    if (!rc && r->bad) {
        r->cls = TUNER_WRONG_ANSWER;
        strcpy(r->what, "values");
        rc = pt_errf(e, PT_ERANGE, "%lld of %lld %selements over tolerance %g; worst %s (error %.3g)",
                     (long long)r->bad, (long long)r->checked, r->sampled ? "sampled " : "",
                     r->worst_tol > 0 ? r->worst_tol : r->tol, r->worst, r->max_err);
    }
    return rc;
}

int tuner_io_run(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io, pt_err *e)
{
    tuner_args a;
    int rc = tuner_io_bind(d, io, l, &a, e);
    if (!rc)
        rc = tuner_launch(d, k, l, a.p, e);
    if (!rc)
        rc = tuner_sync(d, e);
    if (!rc)
        rc = tuner_io_download(d, io, e);
    return rc;
}

int tuner_verify(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io,
                 const tuner_verify_opts *o, tuner_verify_result *r, pt_err *e)
{
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    r->cls = TUNER_OK;
    tuner_dev_reset_failure(d);
    int rc = tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), e);
    if (!rc)
        rc = o && o->keep_inputs ? refill_guards(d, io, e) : tuner_io_upload(d, io, e);
    if (!rc && o && o->keep_inputs)
        rc = poison_outputs(d, io, e);
    if (!rc)
        rc = tuner_io_run(d, k, l, io, e);
    if (rc) { /* the run itself failed: the backend says how */
        r->cls = tuner_dev_failure(d) != TUNER_OK ? tuner_dev_failure(d) : TUNER_LAUNCH_ERROR;
        r->seconds = now_s() - t0;
        return rc;
    }
    uint8_t *pad[TUNER_MAX_TENSORS];
    rc = padding_masks(io, pad, e);
    if (!rc)
        rc = check_guards(d, io, r, e);
    if (!rc)
        rc = check_inputs(d, io, r, e);
    if (!rc)
        rc = check_workspaces(d, io, l, r, e);
    if (!rc)
        rc = check_unwritten(io, pad, r, e);
    if (!rc)
        rc = check_values(io, pad, o, r, e);
    for (int i = 0; i < io->nout; i++)
        free(pad[i]);
    if (rc && r->cls == TUNER_OK) /* a read after the run, or the reference, failed */
        r->cls = tuner_dev_failure(d) != TUNER_OK ? tuner_dev_failure(d) : TUNER_LAUNCH_ERROR;
    r->seconds = now_s() - t0;
    return rc;
}
