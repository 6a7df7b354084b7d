/* Accumulation magnitudes of an expression program (rules in expr_mag.h). */
#include "gen/expr_mag.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x * m, 0 when x is 0 whatever m is (exp(-inf) carries nothing). */
static double mul0(double x, double m) { return x == 0.0 ? 0.0 : fabs(x) * m; }

/* |f'(a)| of a unary node with value v = f(a). */
static double slope(ex_kind k, double a, double v)
{
    static const double k0 = 0.7978845608028654; /* sqrt(2/pi) */
    switch (k) {
    case EX_EXP: return fabs(v);
    case EX_EXP2: return fabs(v) * 0.6931471805599453;
    case EX_LOG: return 1.0 / fabs(a);
    case EX_SQRT: return 0.5 / fabs(v);
    case EX_RSQRT: return 0.5 * fabs(v / a);
    case EX_TANH: return fabs(1.0 - v * v);
    case EX_SIGMOID: return fabs(v * (1.0 - v));
    case EX_GELU: {
        double t = tanh(k0 * (a + 0.044715 * a * a * a));
        return fabs(0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * k0 * (1.0 + 3.0 * 0.044715 * a * a));
    }
    case EX_GELU_ERF:
        return fabs(0.5 * (1.0 + erf(a * 0.7071067811865476)) +
                    a * exp(-0.5 * a * a) * 0.3989422804014327);
    case EX_SILU: {
        double s = 1.0 / (1.0 + exp(-a));
        return fabs(s + a * s * (1.0 - s));
    }
    default: return 1.0; /* NEG ABS CAST */
    }
}

/* Magnitudes of node nd over one row: values va[] (steps sv[]) and
 * magnitudes ma[] (steps sm[]) of its args, its own values v. */
static void node_mag(const ex_node *nd, const double *const *va, const size_t *sv,
                     const double *const *ma, const size_t *sm, const double *v, int64_t cols,
                     double *o)
{
    ex_kind k = nd->kind;
    if (k == EX_RSUM || k == EX_RMEAN || k == EX_RMAX || k == EX_RSUMEXP) {
        int64_t n = sv[0] ? cols : 1;
        double acc = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double a = va[0][(size_t)j * sv[0]], m = ma[0][(size_t)j * sm[0]];
            if (k == EX_RMAX)
                acc = fmax(acc, m);
            else if (k == EX_RSUMEXP)
                acc += mul0(exp(a - va[1][0]), 1.0 + m + ma[1][0]);
            else
                acc += fabs(a) + m;
        }
        if (!sv[0] && k != EX_RMAX)
            acc *= (double)cols; /* a row value summed cols times */
        o[0] = k == EX_RMEAN ? acc / (double)cols : acc;
        return;
    }
    int64_t n = nd->varies_col ? cols : 1;
    for (int64_t j = 0; j < n; j++) {
        double a = va[0][(size_t)j * sv[0]], m0 = ma[0][(size_t)j * sm[0]];
        double b = nd->nargs > 1 ? va[1][(size_t)j * sv[1]] : 0.0;
        double m1 = nd->nargs > 1 ? ma[1][(size_t)j * sm[1]] : 0.0;
        double m2 = nd->nargs > 2 ? ma[2][(size_t)j * sm[2]] : 0.0;
        double r;
        switch (k) {
        case EX_ADD:
        case EX_SUB: r = m0 + m1; break;
        case EX_MUL: r = mul0(b, m0) + mul0(a, m1); break;
        case EX_DIV: r = (m0 + mul0(v[j], m1)) / fabs(b); break;
        case EX_MIN:
        case EX_MAX: r = fmax(m0, m1); break;
        case EX_LT:
        case EX_LE:
        case EX_GT:
        case EX_GE:
        case EX_EQ:
        case EX_NE: r = 0.0; break;
        case EX_WHERE: r = a != 0.0 ? m1 : m2; break;
        case EX_RELU: r = a > 0.0 ? m0 : 0.0; break;
        default: r = m0 == 0.0 ? 0.0 : slope(k, a, v[j]) * m0; break;
        }
        o[j] = r;
    }
}

int ex_magnitude(const ex_prog *p, const double *const *inputs, const double *const *in_mag,
                 double **out_mag, pt_err *e)
{
    if (!p->bound)
        return pt_errf(e, PT_EINVAL, "ex_magnitude: shapes not bound (call ex_bind first)");
    int nn = p->nnodes;
    int64_t cols = p->cols;
    static const double zero = 0.0;
    ex_tensor *every = calloc((size_t)nn, sizeof *every);
    double **val = calloc((size_t)nn, sizeof *val);
    double **mag = calloc((size_t)nn, sizeof *mag);
    const double **ins = calloc((size_t)p->ninputs + 1, sizeof *ins);
    int rc = PT_OK;
    if (!every || !val || !mag || !ins)
        rc = pt_errf(e, PT_ENOMEM, "ex_magnitude: out of memory");
    for (int i = 0; i < nn && !rc; i++) {
        size_t w = (size_t)(p->nodes[i].varies_col ? cols : 1);
        val[i] = malloc(w * sizeof **val);
        mag[i] = calloc(w, sizeof **mag);
        if (!val[i] || !mag[i])
            rc = pt_errf(e, PT_ENOMEM, "ex_magnitude: out of memory for %lld columns",
                         (long long)cols);
        /* every node an output of the one-row copy: ROW nodes one value */
        every[i].name = "";
        every[i].node = i;
        every[i].per_row = !p->nodes[i].varies_col;
    }
    ex_prog one = *p;
    one.rows = 1;
    one.outputs = every;
    one.noutputs = nn;
    for (int64_t r = 0; r < p->rows && !rc; r++) {
        for (int i = 0; i < p->ninputs; i++)
            ins[i] = inputs[i] + ex_row_offset(p, &p->inputs[i], r);
        rc = ex_reference(&one, ins, val, e);
        for (int i = 0; i < nn && !rc; i++) {
            const ex_node *nd = &p->nodes[i];
            size_t w = (size_t)(nd->varies_col ? cols : 1);
            if (nd->kind == EX_CONST)
                continue; /* stays 0 */
            if (nd->kind == EX_INPUT) {
                const double *src = in_mag ? in_mag[nd->input] : NULL;
                if (src)
                    memcpy(mag[i], src + ex_row_offset(p, &p->inputs[nd->input], r), w * sizeof **mag);
                continue;
            }
            const double *va[3] = {&zero, &zero, &zero}, *ma[3] = {&zero, &zero, &zero};
            size_t sv[3] = {0, 0, 0}, sm[3] = {0, 0, 0};
            for (int j = 0; j < nd->nargs; j++) {
                va[j] = val[nd->arg[j]];
                ma[j] = mag[nd->arg[j]];
                sv[j] = sm[j] = p->nodes[nd->arg[j]].varies_col ? 1 : 0;
            }
            node_mag(nd, va, sv, ma, sm, val[i], cols, mag[i]);
        }
        for (int k = 0; k < p->noutputs && !rc; k++) {
            const ex_tensor *t = &p->outputs[k];
            const double *m = mag[t->node];
            if (t->per_row)
                out_mag[k][r] = m[0];
            else if (p->nodes[t->node].varies_col)
                memcpy(out_mag[k] + r * cols, m, (size_t)cols * sizeof *m);
            else
                for (int64_t j = 0; j < cols; j++)
                    out_mag[k][r * cols + j] = m[0];
        }
    }
    for (int i = 0; i < nn && val && mag; i++) {
        free(val[i]);
        free(mag[i]);
    }
    free(every);
    free(val);
    free(mag);
    free(ins);
    return rc;
}
