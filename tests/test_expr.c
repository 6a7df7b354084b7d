/* Expression language: parsing, lowering (structure of the DAG), errors with
 * columns, shape binding, and the float64 reference against formulas written
 * out by hand here. */
#include "gen/expr.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_arena *arena;

static void setup(void) { arena = pt_arena_new(); }
static void teardown(void) { pt_arena_free(arena); }

TestSuite(expr, .init = setup, .fini = teardown);

static ex_prog *parse_ok(const char *src)
{
    pt_err e = {0};
    ex_prog *p = NULL;
    int rc = ex_parse(arena, src, &p, &e);
    cr_assert_eq(rc, PT_OK, "parse '%s': %s", src, e.msg);
    cr_assert_not_null(p);
    return p;
}

static ex_prog *bound(const char *src, const char *shapes)
{
    ex_prog *p = parse_ok(src);
    pt_err e = {0};
    cr_assert_eq(ex_bind_spec(p, shapes, &e), PT_OK, "bind '%s' to '%s': %s", src, shapes, e.msg);
    return p;
}

static void expect_parse_err(const char *src, const char *msg)
{
    pt_err e = {0};
    ex_prog *p = (ex_prog *)1;
    cr_assert_neq(ex_parse(arena, src, &p, &e), PT_OK, "'%s' parsed", src);
    cr_assert_null(p);
    cr_assert_str_eq(e.msg, msg, "source '%s'", src);
}

static void expect_bind_err(const char *src, const char *shapes, const char *msg)
{
    ex_prog *p = parse_ok(src);
    pt_err e = {0};
    cr_assert_neq(ex_bind_spec(p, shapes, &e), PT_OK, "'%s' bound to '%s'", src, shapes);
    cr_assert_str_eq(e.msg, msg, "source '%s', shapes '%s'", src, shapes);
    cr_assert(!p->bound);
}

static int count_kind(const ex_prog *p, ex_kind k)
{
    int n = 0;
    for (int i = 0; i < p->nnodes; i++)
        n += p->nodes[i].kind == k;
    return n;
}

static char *dump(const ex_prog *p)
{
    pt_buf b;
    pt_buf_init(&b);
    ex_dump(p, &b);
    char *s = pt_arena_strdup(arena, b.s ? b.s : "");
    pt_buf_free(&b);
    return s;
}

/* ---- inputs and outputs for the reference ---- */

static uint64_t rng = 12345;
static double urand(void) /* in [-2, 2) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * 0x1p-53 * 4.0 - 2.0;
}

typedef struct run {
    ex_prog *p;
    double **in, **out;
} run;

static run run_ref(const char *src, const char *shapes)
{
    run r;
    r.p = bound(src, shapes);
    r.in = pt_arena_alloc(arena, (size_t)r.p->ninputs * sizeof *r.in);
    r.out = pt_arena_alloc(arena, (size_t)r.p->noutputs * sizeof *r.out);
    for (int i = 0; i < r.p->ninputs; i++) {
        r.in[i] = pt_arena_alloc(arena, (size_t)r.p->inputs[i].numel * sizeof(double));
        for (int64_t j = 0; j < r.p->inputs[i].numel; j++)
            r.in[i][j] = urand();
    }
    for (int i = 0; i < r.p->noutputs; i++) {
        r.out[i] = pt_arena_alloc(arena, (size_t)r.p->outputs[i].numel * sizeof(double));
        for (int64_t j = 0; j < r.p->outputs[i].numel; j++)
            r.out[i][j] = NAN;
    }
    pt_err e = {0};
    cr_assert_eq(ex_reference(r.p, (const double *const *)r.in, r.out, &e), PT_OK, "%s", e.msg);
    return r;
}

static const double *in_named(const run *r, const char *name)
{
    int i = ex_find_input(r->p, name);
    cr_assert_geq(i, 0, "no input %s", name);
    return r->in[i];
}

static const double *out_named(const run *r, const char *name)
{
    int i = ex_find_output(r->p, name);
    cr_assert_geq(i, 0, "no output %s", name);
    return r->out[i];
}

static void close_to(double got, double want, const char *what, int i)
{
    double tol = 1e-12 * (1.0 + fabs(want));
    cr_assert(fabs(got - want) <= tol, "%s[%d]: got %.17g want %.17g", what, i, got, want);
}

enum { R = 3, C = 7 };

/* ---- the examples from the spec ---- */

Test(expr, gelu_affine)
{
    run r = run_ref("y = gelu(x * w + b)", "x=3x7,w=7,b=7");
    const double *x = in_named(&r, "x"), *w = in_named(&r, "w"), *b = in_named(&r, "b");
    const double *y = out_named(&r, "y");
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            double t = x[i * C + j] * w[j] + b[j];
            double want = 0.5 * t * (1.0 + tanh(sqrt(2.0 / M_PI) * (t + 0.044715 * t * t * t)));
            close_to(y[i * C + j], want, "y", i * C + j);
        }
    cr_assert_eq(r.p->ninputs, 3);
    cr_assert_str_eq(r.p->inputs[0].name, "x");
    cr_assert_str_eq(r.p->inputs[1].name, "w");
    cr_assert_str_eq(r.p->inputs[2].name, "b");
    cr_assert(!r.p->has_reduction);
    cr_assert_eq(r.p->nlevels, 0);
}

Test(expr, rmsnorm_written_out)
{
    run r = run_ref("y = x * rsqrt(mean(x*x, -1) + 1e-6) * g", "x=3x7,g=7");
    const double *x = in_named(&r, "x"), *g = in_named(&r, "g"), *y = out_named(&r, "y");
    for (int i = 0; i < R; i++) {
        double ss = 0;
        for (int j = 0; j < C; j++)
            ss += x[i * C + j] * x[i * C + j];
        double inv = 1.0 / sqrt(ss / C + 1e-6);
        for (int j = 0; j < C; j++)
            close_to(y[i * C + j], x[i * C + j] * inv * g[j], "y", i * C + j);
    }
    cr_assert_eq(r.p->nlevels, 1);
}

Test(expr, softmax_scaled)
{
    run r = run_ref("y = softmax(x * 0.125, -1)", "x=3x7");
    const double *x = in_named(&r, "x"), *y = out_named(&r, "y");
    for (int i = 0; i < R; i++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < C; j++)
            m = fmax(m, x[i * C + j] * 0.125);
        for (int j = 0; j < C; j++)
            s += exp(x[i * C + j] * 0.125 - m);
        double tot = 0;
        for (int j = 0; j < C; j++) {
            close_to(y[i * C + j], exp(x[i * C + j] * 0.125 - m) / s, "y", i * C + j);
            tot += y[i * C + j];
        }
        close_to(tot, 1.0, "row sum", i);
    }
    /* exp(t - M) / S with M = rmax(t), S = rsumexp(t, M): one pass */
    const ex_prog *p = r.p;
    cr_assert_eq(count_kind(p, EX_RMAX), 1);
    cr_assert_eq(count_kind(p, EX_RSUMEXP), 1);
    cr_assert_eq(count_kind(p, EX_EXP), 1);
    cr_assert_eq(count_kind(p, EX_DIV), 1);
    cr_assert_eq(count_kind(p, EX_SUB), 1);
    cr_assert_eq(p->nlevels, 1);
    const ex_node *out = &p->nodes[p->outputs[0].node];
    cr_assert_eq(out->kind, EX_DIV);
    const ex_node *s = &p->nodes[out->arg[1]];
    cr_assert_eq(s->kind, EX_RSUMEXP);
    cr_assert_eq(p->nodes[s->arg[1]].kind, EX_RMAX);
    cr_assert_eq(p->nodes[s->arg[1]].arg[0], s->arg[0]);
    cr_assert_eq(s->level, 1);
}

Test(expr, layernorm_affine)
{
    run r = run_ref("y = layernorm(x + r, -1) * g + b", "x=3x7,r=3x7,g=7,b=7");
    const double *x = in_named(&r, "x"), *rr = in_named(&r, "r"), *g = in_named(&r, "g");
    const double *b = in_named(&r, "b"), *y = out_named(&r, "y");
    for (int i = 0; i < R; i++) {
        double t[C], mu = 0, var = 0;
        for (int j = 0; j < C; j++) {
            t[j] = x[i * C + j] + rr[i * C + j];
            mu += t[j];
        }
        mu /= C;
        for (int j = 0; j < C; j++)
            var += (t[j] - mu) * (t[j] - mu);
        var /= C;
        for (int j = 0; j < C; j++)
            close_to(y[i * C + j], (t[j] - mu) / sqrt(var + 1e-5) * g[j] + b[j], "y", i * C + j);
    }
    cr_assert_eq(count_kind(r.p, EX_RMEAN), 2);
    cr_assert_eq(r.p->nlevels, 2);
}

Test(expr, residual_then_rmsnorm)
{
    run r = run_ref("h = x + r; y = rmsnorm(h, -1) * g", "x=3x7,r=3x7,g=7");
    cr_assert_eq(r.p->noutputs, 2);
    cr_assert_eq(r.p->ninputs, 3);
    const double *x = in_named(&r, "x"), *rr = in_named(&r, "r"), *g = in_named(&r, "g");
    const double *h = out_named(&r, "h"), *y = out_named(&r, "y");
    for (int i = 0; i < R; i++) {
        double ss = 0;
        for (int j = 0; j < C; j++) {
            double t = x[i * C + j] + rr[i * C + j];
            close_to(h[i * C + j], t, "h", i * C + j);
            ss += t * t;
        }
        double inv = 1.0 / sqrt(ss / C + 1e-6);
        for (int j = 0; j < C; j++)
            close_to(y[i * C + j], (x[i * C + j] + rr[i * C + j]) * inv * g[j], "y", i * C + j);
    }
    /* y is built on h's node, not on a copy */
    const ex_node *y_node = &r.p->nodes[r.p->outputs[1].node];
    cr_assert_eq(y_node->kind, EX_MUL);
    int hn = r.p->outputs[0].node;
    cr_assert_eq(count_kind(r.p, EX_ADD), 2); /* x + r, and var + eps */
    const ex_node *xn = &r.p->nodes[y_node->arg[0]];
    cr_assert_eq(xn->kind, EX_MUL);
    cr_assert_eq(xn->arg[0], hn);
}

Test(expr, where_leaky)
{
    run r = run_ref("y = where(x > 0, x, 0.1 * x)", "x=3x7");
    const double *x = in_named(&r, "x"), *y = out_named(&r, "y");
    for (int i = 0; i < R * C; i++)
        cr_assert_eq(y[i], x[i] > 0 ? x[i] : 0.1 * x[i], "y[%d]", i);
    cr_assert_eq(count_kind(r.p, EX_GT), 1);
    cr_assert_eq(count_kind(r.p, EX_WHERE), 1);
}

#ifdef __FLT16_MAX__
/* the compiler's own half type: __extension__ keeps -Wpedantic quiet */
__extension__ typedef _Float16 half;

Test(expr, cast_f16)
{
    run r = run_ref("y = cast(x * 2, f16)", "x=3x7");
    const double *x = in_named(&r, "x"), *y = out_named(&r, "y");
    for (int i = 0; i < R * C; i++)
        cr_assert_eq(y[i], (double)(half)(x[i] * 2), "y[%d]", i);
    cr_assert_eq(count_kind(r.p, EX_CAST), 1);
    cr_assert_eq(r.p->ninputs, 1); /* f16 is a dtype, not an input */
    for (int i = 0; i < r.p->nnodes; i++)
        if (r.p->nodes[i].kind == EX_CAST)
            cr_assert_eq(r.p->nodes[i].dtype, PT_F16);
}
#endif

Test(expr, log_softmax_and_reductions)
{
    run r = run_ref("ls = log_softmax(x, -1); s = sum(x, -1); m = max(x, -1); a = mean(x, 1)",
                    "x=3x7");
    const double *x = in_named(&r, "x");
    const double *ls = out_named(&r, "ls"), *s = out_named(&r, "s");
    const double *m = out_named(&r, "m"), *a = out_named(&r, "a");
    for (int i = 0; i < R; i++) {
        double mx = -INFINITY, sum = 0, se = 0;
        for (int j = 0; j < C; j++) {
            mx = fmax(mx, x[i * C + j]);
            sum += x[i * C + j];
        }
        for (int j = 0; j < C; j++)
            se += exp(x[i * C + j] - mx);
        for (int j = 0; j < C; j++)
            close_to(ls[i * C + j], x[i * C + j] - mx - log(se), "ls", i * C + j);
        close_to(s[i], sum, "s", i);
        cr_assert_eq(m[i], mx);
        close_to(a[i], sum / C, "a", i);
    }
    /* per-row outputs have shape [..., 1] */
    int k = ex_find_output(r.p, "s");
    cr_assert(r.p->outputs[k].per_row);
    cr_assert_eq(r.p->outputs[k].shape.ndim, 2);
    cr_assert_eq(r.p->outputs[k].shape.dim[0], 3);
    cr_assert_eq(r.p->outputs[k].shape.dim[1], 1);
    cr_assert_eq(r.p->outputs[k].numel, 3);
    cr_assert(!r.p->outputs[ex_find_output(r.p, "ls")].per_row);
    /* the max and sum-exp of log_softmax are shared with max(x, -1) */
    cr_assert_eq(count_kind(r.p, EX_RMAX), 1);
}

Test(expr, elementwise_functions)
{
    run r = run_ref("a = neg(x) + abs(x) - min(x, w) * max(x, w); b = exp(x) + exp2(x) + log(abs(x) + 1);"
                    "c = sqrt(abs(x)) + rsqrt(abs(x) + 1) + tanh(x); d = sigmoid(x) + relu(x) + silu(x);"
                    "e = gelu_erf(x); f = (x < w) + 2 * (x <= w) + 4 * (x >= w) + 8 * (x == x) + 16 * (x != w)"
                    " + 32 * (x > w); g = -x / w - -1",
                    "x=3x7,w=3x7");
    const double *x = in_named(&r, "x"), *w = in_named(&r, "w");
    for (int i = 0; i < R * C; i++) {
        double v = x[i], u = w[i];
        close_to(out_named(&r, "a")[i], -v + fabs(v) - fmin(v, u) * fmax(v, u), "a", i);
        close_to(out_named(&r, "b")[i], exp(v) + exp2(v) + log(fabs(v) + 1), "b", i);
        close_to(out_named(&r, "c")[i], sqrt(fabs(v)) + 1 / sqrt(fabs(v) + 1) + tanh(v), "c", i);
        close_to(out_named(&r, "d")[i], 1 / (1 + exp(-v)) + (v > 0 ? v : 0) + v / (1 + exp(-v)), "d", i);
        close_to(out_named(&r, "e")[i], 0.5 * v * (1 + erf(v / sqrt(2.0))), "e", i);
        double f = (v < u) + 2 * (v <= u) + 4 * (v >= u) + 8 + 16 * (v != u) + 32 * (v > u);
        cr_assert_eq(out_named(&r, "f")[i], f);
        close_to(out_named(&r, "g")[i], -v / u + 1, "g", i);
    }
}

/* NaN behaviour the code generator must match: ordered comparisons (NE
 * too), where() on a NaN condition takes the else branch, relu/min/max and
 * the row max drop NaNs. */
Test(expr, nan_semantics)
{
    ex_prog *p = bound("a = x != w; b = x == w; c = where(x, 1, 2); d = relu(x); e = max(x, w);"
                       "f = min(x, w); m = max(x, -1); l = x < w",
                       "x=1x4,w=1x4");
    double x[4] = {NAN, 1, -1, 0}, w[4] = {1, NAN, NAN, 0};
    double o[8][4];
    const double *ins[2] = {x, w};
    double *outs[8];
    for (int i = 0; i < 8; i++)
        outs[i] = o[i];
    pt_err e = {0};
    cr_assert_eq(ex_reference(p, ins, outs, &e), PT_OK, "%s", e.msg);
    double want_a[4] = {0, 0, 0, 0}, want_b[4] = {0, 0, 0, 1}, want_c[4] = {2, 1, 1, 2};
    double want_d[4] = {0, 1, 0, 0}, want_e[4] = {1, 1, -1, 0}, want_f[4] = {1, 1, -1, 0};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(o[0][i], want_a[i], "ne[%d]", i);
        cr_assert_eq(o[1][i], want_b[i], "eq[%d]", i);
        cr_assert_eq(o[2][i], want_c[i], "where[%d]", i);
        cr_assert_eq(o[3][i], want_d[i], "relu[%d]", i);
        cr_assert_eq(o[4][i], want_e[i], "max[%d]", i);
        cr_assert_eq(o[5][i], want_f[i], "min[%d]", i);
        cr_assert_eq(o[7][i], 0.0, "lt[%d]", i);
    }
    cr_assert_eq(o[6][0], 1.0); /* row max ignores the NaN */
}

/* ---- lowering structure ---- */

Test(expr, rmsnorm_composite_equals_written_out)
{
    ex_prog *a = bound("y = x * rsqrt(mean(x*x, -1) + 1e-6) * g", "x=4x8,g=8");
    ex_prog *b = bound("y = rmsnorm(x, -1) * g", "x=4x8,g=8");
    cr_assert_str_eq(dump(a), dump(b));
    ex_prog *c = bound("y = g * rmsnorm(x, -1)", "x=4x8,g=8");
    cr_assert_eq(c->nnodes, b->nnodes);
}

Test(expr, cse_and_folding)
{
    ex_prog *p = parse_ok("y = exp(x) + exp(x) * (2 * 3) - sqrt(4) + x * w + w * x");
    cr_assert_eq(count_kind(p, EX_EXP), 1);
    cr_assert_eq(count_kind(p, EX_SQRT), 0); /* folded */
    int consts = 0;
    for (int i = 0; i < p->nnodes; i++)
        if (p->nodes[i].kind == EX_CONST) {
            consts++;
            cr_assert(p->nodes[i].value == 6.0 || p->nodes[i].value == 2.0);
        }
    cr_assert_eq(consts, 2); /* 2 and 3 are dead once folded */
    cr_assert_eq(count_kind(p, EX_MUL), 2); /* x*w and w*x shared */
    /* nodes in topological order */
    for (int i = 0; i < p->nnodes; i++)
        for (int j = 0; j < p->nodes[i].nargs; j++)
            cr_assert_lt(p->nodes[i].arg[j], i);
    ex_prog *q = parse_ok("y = -1e-6 + x");
    cr_assert_eq(count_kind(q, EX_NEG), 0);
    cr_assert_eq(q->nnodes, 3);
}

Test(expr, max_rule)
{
    ex_prog *p = parse_ok("y = max(x, -1)");
    cr_assert_eq(count_kind(p, EX_RMAX), 1);
    cr_assert_eq(count_kind(p, EX_MAX), 0);
    p = parse_ok("y = max(x, -1.0)");
    cr_assert_eq(count_kind(p, EX_RMAX), 0);
    cr_assert_eq(count_kind(p, EX_MAX), 1);
    p = parse_ok("y = max(x, 1)");
    cr_assert_eq(count_kind(p, EX_MAX), 1);
    p = parse_ok("y = max(x, w)");
    cr_assert_eq(count_kind(p, EX_MAX), 1);
    cr_assert_eq(p->ninputs, 2);
}

Test(expr, dump_format)
{
    ex_prog *p = parse_ok("y = softmax(x, -1)");
    cr_assert_str_eq(dump(p),
                     "%0 = input x                 ; level 0\n"
                     "%1 = rmax %0                 ; level 1\n"
                     "%2 = sub %0 %1               ; level 1\n"
                     "%3 = exp %2                  ; level 1\n"
                     "%4 = rsumexp %0 %1           ; level 1\n"
                     "%5 = div %3 %4               ; level 1\n"
                     "y = %5\n");
    pt_err e = {0};
    cr_assert_eq(ex_bind_spec(p, "x=2x4", &e), PT_OK);
    cr_assert_str_eq(dump(p),
                     "%0 = input x 2x4             ; elem, level 0\n"
                     "%1 = rmax %0                 ; row, level 1\n"
                     "%2 = sub %0 %1               ; elem, level 1\n"
                     "%3 = exp %2                  ; elem, level 1\n"
                     "%4 = rsumexp %0 %1           ; row, level 1\n"
                     "%5 = div %3 %4               ; elem, level 1\n"
                     "y = %5 2x4\n");
    ex_prog *q = bound("m = mean(x * w, -1) * 0.5; c = cast(w, bf16)", "x=2x4,w=4");
    cr_assert_str_eq(dump(q),
                     "%0 = input x 2x4             ; elem, level 0\n"
                     "%1 = input w 4               ; elem, same every row, level 0\n"
                     "%2 = mul %0 %1               ; elem, level 0\n"
                     "%3 = rmean %2                ; row, level 1\n"
                     "%4 = const 0.5               ; row, same every row, level 0\n"
                     "%5 = mul %3 %4               ; row, level 1\n"
                     "%6 = cast.bf16 %1            ; elem, same every row, level 0\n"
                     "m = %5 2x1 per-row\n"
                     "c = %6 2x4\n");
}

/* ---- errors ---- */

Test(expr, parse_errors)
{
    expect_parse_err("y = gelo(x)", "unknown function 'gelo' at column 5");
    expect_parse_err("y = exp()", "unexpected ')' at column 9");
    expect_parse_err("", "empty expression");
    expect_parse_err("  ; \n ;", "empty expression");
    expect_parse_err("x = a; x = b", "'x' is assigned twice at column 8");
    expect_parse_err("y = softmax(x)", "softmax takes 2 arguments, got 1 at column 5");
    expect_parse_err("y = layernorm(x)", "layernorm takes 2 or 3 arguments, got 1 at column 5");
    expect_parse_err("y = rmsnorm(x, -1, 1e-5, 3)", "rmsnorm takes 2 or 3 arguments, got 4 at column 5");
    expect_parse_err("y = exp(x, x)", "exp takes 1 argument, got 2 at column 5");
    expect_parse_err("y = where(x, x)", "where takes 3 arguments, got 2 at column 5");
    expect_parse_err("y = 1 + cast(x, f12)",
                     "unknown dtype 'f12' (supported: f64 f32 tf32 f16 bf16 e4m3 e5m2 s8 u8 s16 u16 s32 "
                     "u32 s64 u64) at column 17");
    expect_parse_err("y = cast(x, 3)", "cast: expected a dtype name, got '3' at column 13");
    expect_parse_err("y = cast(x)", "cast takes 2 arguments, got 1 at column 5");
    expect_parse_err("y = (x + 1", "unexpected end of input at column 11");
    expect_parse_err("y = x +", "unexpected end of input at column 8");
    expect_parse_err("y = x $ 2", "unexpected '$' at column 7");
    expect_parse_err("y = x x", "unexpected 'x' at column 7");
    expect_parse_err("y = x)", "unexpected ')' at column 6");
    expect_parse_err("y = 2x", "unexpected 'x' at column 6");
    expect_parse_err("y x", "unexpected 'x' at column 3");
    expect_parse_err("y", "expected '=' after 'y' at column 2");
    expect_parse_err("1 = x", "expected 'name = expression', got '1' at column 1");
    expect_parse_err("y = y + 1", "'y' is used before it is assigned at column 1");
    expect_parse_err("y = sum(x, 0.5)", "sum: the dim must be an integer literal (-1 for the last dim) at column 12");
    expect_parse_err("y = sum(x, w)", "sum: the dim must be an integer literal (-1 for the last dim) at column 12");
    expect_parse_err("y = mean(x, -2)", "mean: cannot reduce over dim -2, only the last dim (-1) at column 13");
    expect_parse_err("y = softmax(x, 0.0 - 1)",
                     "softmax: the dim must be an integer literal (-1 for the last dim) at column 16");
    expect_parse_err("y = x\nz = gelo(x)", "unknown function 'gelo' at line 2, column 5");
    expect_parse_err("y = (x +\n  )", "unexpected ')' at line 2, column 3");
    expect_parse_err("y = x\n+ 1", "expected 'name = expression', got '+' at line 2, column 1");
}

Test(expr, newlines_and_comments)
{
    ex_prog *p = parse_ok("# residual\nh = x + r   # add\n\ny = layernorm(h,\n  -1) * g\n");
    cr_assert_eq(p->noutputs, 2);
    cr_assert_eq(p->ninputs, 3);
}

Test(expr, nesting_limit_no_crash)
{
    size_t n = 5000;
    char *s = pt_arena_alloc(arena, 2 * n + 16);
    strcpy(s, "y = ");
    memset(s + 4, '(', n);
    strcpy(s + 4 + n, "x");
    memset(s + 5 + n, ')', n);
    pt_err e = {0};
    ex_prog *p;
    cr_assert_neq(ex_parse(arena, s, &p, &e), PT_OK);
    cr_assert(strstr(e.msg, "expression nested too deeply (more than 200 levels) at column") != NULL,
              "%s", e.msg);
    memset(s + 4, '-', n);
    pt_err_clear(&e);
    cr_assert_neq(ex_parse(arena, s, &p, &e), PT_OK);
    cr_assert(strstr(e.msg, "nested too deeply") != NULL, "%s", e.msg);
    /* a long flat chain is fine: it is a loop, not recursion */
    char *t = pt_arena_alloc(arena, 4 * n + 16);
    strcpy(t, "y = x");
    for (size_t i = 0; i < n; i++)
        strcat(t, "+x*1");
    pt_err_clear(&e);
    cr_assert_eq(ex_parse(arena, t, &p, &e), PT_OK, "%s", e.msg);
}

/* Random bytes from a small alphabet must give OK or an error, never a crash
 * (run under ASan/UBSan in CI). */
Test(expr, fuzz_no_crash)
{
    static const char alpha[] = "xyw=+-*/()<>=!,;\n 0123.e_-1sumaxgelusoftmxcast(f16)#";
    char buf[48];
    for (int it = 0; it < 20000; it++) {
        size_t n = (size_t)(urand() * 5 + 12);
        for (size_t i = 0; i < n; i++) {
            double u = (urand() + 2) / 4;
            buf[i] = alpha[(size_t)(u * (sizeof alpha - 1))];
        }
        buf[n] = '\0';
        pt_err e = {0};
        ex_prog *p = NULL;
        if (ex_parse(arena, buf, &p, &e) == PT_OK) {
            cr_assert_not_null(p);
            pt_err_clear(&e);
            const char *names[4] = {"x", "y", "w", "e"};
            ex_shape sh[4] = {{2, {2, 3}}, {1, {3}}, {1, {1}}, {0, {0}}};
            (void)ex_bind(p, 4, names, sh, &e);
        } else {
            cr_assert_neq(e.msg[0], '\0');
        }
    }
}

/* ---- shapes ---- */

Test(expr, shape_errors)
{
    expect_bind_err("y = gelu(x * w + b)", "x=4096x8192,w=8000,b=8192",
                    "cannot broadcast w=8000 with x=4096x8192 at dim -1");
    expect_bind_err("y = x + r", "x=4x8,r=3x8", "cannot broadcast r=3x8 with x=4x8 at dim -2");
    expect_bind_err("y = x + 1", "x=0x8", "bad dimension '0' in shape 'x=0x8'");
    expect_bind_err("y = x + 1", "x=4x-8", "bad dimension '-8' in shape 'x=4x-8'");
    expect_bind_err("y = x + 1", "x=4x", "bad dimension '' in shape 'x=4x'");
    expect_bind_err("y = x + 1", "x=4xa", "bad dimension 'a' in shape 'x=4xa'");
    expect_bind_err("y = x + 1", "x", "bad shape 'x' (expected name=DIMxDIM..., e.g. x=4096x8192)");
    expect_bind_err("y = x + 1", "x=1x2x3x4x5x6x7", "shape 'x=1x2x3x4x5x6x7' has more than 6 dims");
    expect_bind_err("y = x * g", "x=4x8", "no shape given for input 'g'");
    expect_bind_err("y = x * 2", "x=4x8,q=8", "shape given for 'q', which is not an input");
    expect_bind_err("y = x * 2", "x=4x8,y=8", "shape given for 'y', which is an output, not an input");
    expect_bind_err("y = x * 2", "x=4x8,x=8", "shape for 'x' given twice");
    expect_bind_err("y = sum(x, 0)", "x=4x8",
                    "sum: cannot reduce over dim 0 of a rank-2 shape, only the last dim (-1 or 1) at column 12");
    expect_bind_err("y = x + 1\nm = max(x, 1) + mean(x, 1)", "x=2x4x8",
                    "mean: cannot reduce over dim 1 of a rank-3 shape, only the last dim (-1 or 2) at line 2, column 25");
    /* the API path gives the same text */
    ex_prog *p = parse_ok("y = x + 1");
    const char *names[1] = {"x"};
    ex_shape s = {2, {0, 8}};
    pt_err e = {0};
    cr_assert_neq(ex_bind(p, 1, names, &s, &e), PT_OK);
    cr_assert_str_eq(e.msg, "bad dimension '0' in shape 'x=0x8'");
}

Test(expr, broadcast_strides_and_classes)
{
    /* full 2x3x4: w along the row only, r one value per (i, j), s a scalar */
    run r = run_ref("y = x * w + r + s; m = sum(x, 2) + r", "x=2x3x4,w=4,r=3x1,s=1");
    const ex_prog *p = r.p;
    cr_assert_eq(p->full.ndim, 3);
    cr_assert_eq(p->rows, 6);
    cr_assert_eq(p->cols, 4);
    const ex_tensor *x = &p->inputs[0], *w = &p->inputs[1], *rr = &p->inputs[2], *s = &p->inputs[3];
    cr_assert(x->stride[0] == 12 && x->stride[1] == 4 && x->stride[2] == 1);
    cr_assert(w->stride[0] == 0 && w->stride[1] == 0 && w->stride[2] == 1);
    cr_assert(rr->stride[0] == 0 && rr->stride[1] == 1 && rr->stride[2] == 0);
    cr_assert(s->stride[0] == 0 && s->stride[1] == 0 && s->stride[2] == 0);
    cr_assert(x->varies_col && x->varies_row);
    cr_assert(w->varies_col && !w->varies_row);
    cr_assert(!rr->varies_col && rr->varies_row);
    cr_assert(!s->varies_col && !s->varies_row);
    cr_assert_eq(ex_node_class(p, w->node), EX_ELEM);
    cr_assert_eq(ex_node_class(p, rr->node), EX_ROW);
    cr_assert_eq(ex_row_offset(p, rr, 4), 1); /* row 4 = (1, 1) */
    cr_assert_eq(ex_row_offset(p, x, 4), 16);
    const ex_tensor *m = &p->outputs[1];
    cr_assert(m->per_row);
    cr_assert(m->shape.ndim == 3 && m->shape.dim[2] == 1 && m->numel == 6);
    cr_assert(m->stride[0] == 3 && m->stride[1] == 1 && m->stride[2] == 0);
    cr_assert(!m->varies_col && m->varies_row);
    const double *X = r.in[0], *W = r.in[1], *RR = r.in[2], *S = r.in[3];
    const double *Y = r.out[0], *M = r.out[1];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double sum = 0;
            for (int k = 0; k < 4; k++) {
                int at = (i * 3 + j) * 4 + k;
                close_to(Y[at], X[at] * W[k] + RR[j] + S[0], "y", at);
                sum += X[at];
            }
            close_to(M[i * 3 + j], sum + RR[j], "m", i * 3 + j);
        }
}

Test(expr, unused_shape_is_an_error)
{
    expect_bind_err("y = a * 2", "a=3x1,x=3x5", "shape given for 'x', which is not an input");
    /* an output with no reduction keeps the full shape even where it does
     * not vary along the row; a reduction of a row value acts on cols copies */
    run r = run_ref("y = a * 2 + 0 * x; s = sum(a, -1); t = max(a, -1); u = softmax(a, -1)", "a=3x1,x=3x5");
    const double *a = in_named(&r, "a");
    cr_assert_eq(r.p->outputs[0].numel, 15);
    cr_assert(!r.p->outputs[0].per_row);
    /* softmax of a row value: one value per row, so a per-row output */
    cr_assert(r.p->outputs[ex_find_output(r.p, "u")].per_row);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 5; j++) {
            close_to(out_named(&r, "y")[i * 5 + j], a[i] * 2, "y", i * 5 + j);
        }
        close_to(out_named(&r, "u")[i], 0.2, "u", i);
        close_to(out_named(&r, "s")[i], 5 * a[i], "s", i);
        cr_assert_eq(out_named(&r, "t")[i], a[i]);
    }
}

Test(expr, rank0_and_rank6)
{
    ex_prog *p = parse_ok("y = a + 1; z = sum(a, -1)");
    const char *names[1] = {"a"};
    ex_shape s0 = {0, {0}};
    pt_err e = {0};
    cr_assert_eq(ex_bind(p, 1, names, &s0, &e), PT_OK, "%s", e.msg);
    cr_assert(p->rows == 1 && p->cols == 1);
    double in = 3, o1 = 0, o2 = 0;
    const double *ins[1] = {&in};
    double *outs[2] = {&o1, &o2};
    cr_assert_eq(ex_reference(p, ins, outs, &e), PT_OK);
    cr_assert(o1 == 4 && o2 == 3);
    run r = run_ref("y = softmax(x, 5) + b", "x=2x1x3x1x2x4,b=3x1x1x4");
    cr_assert(r.p->rows == 12 && r.p->cols == 4);
}

Test(expr, flops_and_bytes)
{
    ex_prog *p = bound("y = x * w", "x=4x8,w=8");
    cr_assert_eq(ex_flops(p), 32.0);
    cr_assert_eq(ex_bytes(p, NULL, NULL), (32 + 8 + 32) * 4);
    pt_dtype in[2] = {PT_BF16, PT_F32}, out[1] = {PT_E4M3};
    cr_assert_eq(ex_bytes(p, in, out), 32 * 2 + 8 * 4 + 32);
    ex_prog *q = bound("m = mean(x, -1); y = softmax(x, -1)", "x=4x8");
    /* rmean 32, rmax 32, rsumexp 3*32, sub 32, exp 32, div 32 */
    cr_assert_eq(ex_flops(q), 32.0 * 8);
    cr_assert_eq(ex_bytes(q, NULL, NULL), (32 + 4 + 32) * 4);
    cr_assert_eq(ex_flops(parse_ok("y = x")), 0.0); /* unbound */
}

Test(expr, reference_needs_bind)
{
    ex_prog *p = parse_ok("y = x");
    pt_err e = {0};
    double *o[1] = {NULL};
    cr_assert_neq(ex_reference(p, NULL, o, &e), PT_OK);
    cr_assert_str_eq(e.msg, "ex_reference: shapes not bound (call ex_bind first)");
}

Test(expr, rebind_other_shapes)
{
    ex_prog *p = bound("y = softmax(x, 1) * w", "x=4x8,w=8");
    pt_err e = {0};
    cr_assert_eq(ex_bind_spec(p, "x=2x16,w=1", &e), PT_OK, "%s", e.msg);
    cr_assert(p->rows == 2 && p->cols == 16);
    cr_assert(!p->inputs[1].varies_col);
    cr_assert_neq(ex_bind_spec(p, "x=2x3x16,w=16", &e), PT_OK); /* dim 1 is no longer last */
}

/* The reference is meant for big shapes: 1024x8192 layernorm (a quarter of
 * 4096x8192) must finish quickly even in a debug build. */
Test(expr, reference_big, .timeout = 60)
{
    ex_prog *p = bound("y = layernorm(x + r, -1) * g + b", "x=1024x8192,r=1024x8192,g=8192,b=8192");
    size_t n = 1024 * 8192;
    double *x = malloc(n * sizeof *x), *rr = malloc(n * sizeof *rr), *y = malloc(n * sizeof *y);
    double *g = malloc(8192 * sizeof *g), *b = malloc(8192 * sizeof *b);
    cr_assert(x && rr && y && g && b);
    for (size_t i = 0; i < n; i++) {
        x[i] = urand();
        rr[i] = urand();
    }
    for (size_t i = 0; i < 8192; i++) {
        g[i] = urand();
        b[i] = urand();
    }
    const double *ins[4] = {x, rr, g, b};
    double *outs[1] = {y};
    pt_err e = {0};
    cr_assert_eq(ex_reference(p, ins, outs, &e), PT_OK);
    for (size_t row = 0; row < 1024; row += 255) {
        double mu = 0, var = 0;
        for (size_t j = 0; j < 8192; j++)
            mu += x[row * 8192 + j] + rr[row * 8192 + j];
        mu /= 8192;
        for (size_t j = 0; j < 8192; j++) {
            double d = x[row * 8192 + j] + rr[row * 8192 + j] - mu;
            var += d * d;
        }
        var /= 8192;
        for (size_t j = 0; j < 8192; j += 97) {
            double d = x[row * 8192 + j] + rr[row * 8192 + j] - mu;
            close_to(y[row * 8192 + j], d / sqrt(var + 1e-5) * g[j] + b[j], "y", (int)j);
        }
    }
    free(x);
    free(rr);
    free(y);
    free(g);
    free(b);
}

/* Issue 9 item 18 (expression part): a literal outside f32's normal range
 * (the kernel computes in f32) is refused, naming the literal and column;
 * 1e400 silently became inf. */
Test(expr, literal_out_of_f32_range)
{
    expect_parse_err("y = x * 1e400",
                     "number '1e400' is out of range for f32 (magnitude at most 3.40282347e+38) at column 9");
    expect_parse_err("y = x * 1e39",
                     "number '1e39' is out of range for f32 (magnitude at most 3.40282347e+38) at column 9");
    expect_parse_err("y = -1e400 + x",
                     "number '1e400' is out of range for f32 (magnitude at most 3.40282347e+38) at column 6");
    expect_parse_err("y = x + 1e-50",
                     "number '1e-50' is below f32's smallest normal 1.17549435e-38 at column 9");
    expect_parse_err("y = x\nz = 2 * 99999999999999999999999999999999999999999 * x",
                     "number '99999999999999999999999999999999999999999' is out of range for f32 "
                     "(magnitude at most 3.40282347e+38) at line 2, column 9");
    ex_prog *p = parse_ok("y = x * 3.4e38 + 1.2e-38 + 0.0 + 0e7 + where(x > -3e38, x, 0)");
    cr_assert_eq(p->noutputs, 1);
}

/* Issue 9 item 15: nesting deeper than EX_MAX_NEST (parentheses, calls,
 * unary signs) is refused before it can exhaust the C stack; exactly
 * EX_MAX_NEST levels parse. 10k levels of each kind. */
static char *nested(const char *open, const char *close, int n)
{
    size_t lo = strlen(open), lc = strlen(close);
    char *s = pt_arena_alloc(arena, (size_t)n * (lo + lc) + 16);
    strcpy(s, "y = ");
    char *q = s + 4;
    for (int i = 0; i < n; i++, q += lo)
        memcpy(q, open, lo);
    *q++ = 'x';
    for (int i = 0; i < n; i++, q += lc)
        memcpy(q, close, lc);
    *q = '\0';
    return s;
}

Test(expr, nesting_depth_limit)
{
    static const struct { const char *open, *close; } kinds[] = {
        {"(", ")"}, {"exp(", ")"}, {"-", ""}, {"-(", ")"}, {"softmax(", ", -1)"}, {"max(1, ", ")"}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        pt_err e = {0};
        ex_prog *p;
        char *s = nested(kinds[k].open, kinds[k].close, 10000);
        cr_assert_neq(ex_parse(arena, s, &p, &e), PT_OK, "10k of '%s'", kinds[k].open);
        cr_assert(strstr(e.msg, "expression nested too deeply (more than 200 levels) at column"),
                  "%s", e.msg);
        /* "-(" opens two levels; the "-1" of the innermost softmax one more */
        int ok_depth = strcmp(kinds[k].open, "-(") == 0        ? EX_MAX_NEST / 2
                     : strcmp(kinds[k].open, "softmax(") == 0 ? EX_MAX_NEST - 1
                                                              : EX_MAX_NEST;
        s = nested(kinds[k].open, kinds[k].close, ok_depth);
        pt_err_clear(&e);
        cr_assert_eq(ex_parse(arena, s, &p, &e), PT_OK, "%d of '%s': %s", ok_depth, kinds[k].open, e.msg);
        s = nested(kinds[k].open, kinds[k].close, ok_depth + 1);
        cr_assert_neq(ex_parse(arena, s, &p, &e), PT_OK, "%d of '%s'", ok_depth + 1, kinds[k].open);
    }
    expect_parse_err(nested("(", ")", 201),
                     "expression nested too deeply (more than 200 levels) at column 205");
}

/* Issue 9 item 15: element counts of broadcast shapes are checked products;
 * x=2^40x1 with w=2^40 wrapped to 0 elements (UBSan: signed overflow in
 * numel and the broadcast strides) and emitted a grid of 0. */
Test(expr, broadcast_size_overflow)
{
    expect_bind_err("y = x * w", "x=1099511627776x1,w=1099511627776",
                    "broadcast shape 1099511627776x1099511627776 has more than 2^48 elements");
    expect_bind_err("y = x * w", "x=4294967296x1,w=4294967296",
                    "broadcast shape 4294967296x4294967296 has more than 2^48 elements");
    expect_bind_err("y = x * w", "x=2147483648x1,w=2147483648",
                    "broadcast shape 2147483648x2147483648 has more than 2^48 elements");
    expect_bind_err("y = x * w + b", "x=65536x65536x1,w=65537,b=1",
                    "broadcast shape 65536x65536x65537 has more than 2^48 elements");
    expect_bind_err("y = x * w", "x=256x256x256x256x256x1,w=512",
                    "broadcast shape 256x256x256x256x256x512 has more than 2^48 elements");
    expect_bind_err("y = x", "x=281474976710656x2", "shape 'x=281474976710656x2' has too many elements");
    expect_bind_err("y = x", "x=9223372036854775807x2", "shape 'x=9223372036854775807x2' has too many elements");
    /* right at the limit: bound, with exact counts and strides */
    ex_prog *p = bound("y = x * w", "x=16777216x1,w=16777216");
    cr_assert_eq(p->rows, 16777216);
    cr_assert_eq(p->cols, 16777216);
    cr_assert_eq(p->outputs[0].numel, (int64_t)1 << 48);
    cr_assert_eq(p->outputs[0].stride[0], 16777216);
    p = bound("y = x * w", "x=256x256x256x256x256x1,w=256");
    cr_assert_eq(p->outputs[0].numel, (int64_t)1 << 48);
    cr_assert_eq(p->outputs[0].stride[0], (int64_t)1 << 40);
    p = bound("y = x + 1", "x=281474976710656");
    cr_assert_eq(p->inputs[0].numel, (int64_t)1 << 48);
    p = bound("y = x + 1", "x=2147483648x2");
    cr_assert_eq(p->rows, (int64_t)1 << 31);
}
