/* Expression language: lexer, recursive-descent parser that lowers as it
 * goes into a hash-consed DAG, shape binding, and the float64 reference.
 * The node meanings live in gen/expr.h next to EX_KIND_MAP; eval_elem() below
 * is their one executable definition, shared by constant folding and by
 * ex_reference(), so the two cannot drift apart. */
#include "gen/expr.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ex_kind_info kind_table[EX_NKINDS] = {
#define X(id, nm, na, fl, fg) [EX_##id] = {nm, na, fl, fg},
    EX_KIND_MAP(X)
#undef X
};

const ex_kind_info *ex_kind_get(ex_kind k)
{
    assert((int)k >= 0 && k < EX_NKINDS);
    return &kind_table[k];
}

static bool is_red(ex_kind k) { return (kind_table[k].flags & EXK_RED) != 0; }

/* ---- elementwise semantics (see the table in expr.h) ---- */

static double ordered(bool holds, double a, double b)
{
    return (!isnan(a) && !isnan(b) && holds) ? 1.0 : 0.0;
}

static double eval_elem(ex_kind k, pt_dtype dt, double a, double b, double c)
{
    switch (k) {
    case EX_ADD: return a + b;
    case EX_SUB: return a - b;
    case EX_MUL: return a * b;
    case EX_DIV: return a / b;
    case EX_NEG: return -a;
    case EX_ABS: return fabs(a);
    case EX_MIN: return fmin(a, b);
    case EX_MAX: return fmax(a, b);
    case EX_LT: return ordered(a < b, a, b);
    case EX_LE: return ordered(a <= b, a, b);
    case EX_GT: return ordered(a > b, a, b);
    case EX_GE: return ordered(a >= b, a, b);
    case EX_EQ: return ordered(a == b, a, b);
    case EX_NE: return ordered(a != b, a, b);
    case EX_EXP: return exp(a);
    case EX_EXP2: return exp2(a);
    case EX_LOG: return log(a);
    case EX_SQRT: return sqrt(a);
    case EX_RSQRT: return 1.0 / sqrt(a);
    case EX_TANH: return tanh(a);
    case EX_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case EX_RELU: return a > 0.0 ? a : 0.0;
    case EX_GELU: {
        const double k0 = 0.7978845608028654; /* sqrt(2/pi) */
        return 0.5 * a * (1.0 + tanh(k0 * (a + 0.044715 * a * a * a)));
    }
    case EX_GELU_ERF: return 0.5 * a * (1.0 + erf(a * 0.7071067811865476));
    case EX_SILU: return a / (1.0 + exp(-a));
    case EX_CAST: return pt_dtype_round(dt, a);
    case EX_WHERE: return (a != 0.0 && !isnan(a)) ? b : c;
    default: break;
    }
    assert(0 && "eval_elem: not an elementwise kind");
    return 0.0;
}

/* ---- lexer ---- */

typedef enum tok_type {
    T_EOF, T_SEP, T_NUM, T_IDENT, T_LP, T_RP, T_COMMA, T_ASSIGN,
    T_PLUS, T_MINUS, T_STAR, T_SLASH, T_LT, T_LE, T_GT, T_GE, T_EQ, T_NE, T_BAD
} tok_type;

typedef struct tok {
    tok_type type;
    const char *s;
    size_t len;
    int line, col;
    double num;
    bool is_int;
    long ival;
} tok;

/* A parsed operand: the node, and whether it was written as an integer
 * literal (possibly negated), which the dim arguments and max() look at. */
typedef struct val {
    int node;
    bool is_int;
    long ival;
} val;

static const val VNONE = {-1, false, 0};

typedef struct parser {
    ex_prog *p;
    pt_err *e;
    pt_arena *a;
    const char *pos, *line_start;
    int line;
    bool multiline;
    bool indexed; /* ex_parse_indexed: NAME[IDX] inputs allowed */
    int paren, nest;
    bool have, failed;
    tok t;
    size_t node_cap, in_cap, out_cap, dim_cap;
    int *htab; /* open addressing: node index + 1, 0 empty */
    size_t hcap;
} parser;

static void lex(parser *ps, tok *t)
{
    const char *s = ps->pos;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (*s == '#') { /* comment to end of line */
            while (*s && *s != '\n')
                s++;
        }
        if (*s == '\n' && ps->paren > 0) {
            s++;
            ps->line++;
            ps->line_start = s;
            continue;
        }
        break;
    }
    memset(t, 0, sizeof *t);
    t->s = s;
    t->line = ps->line;
    t->col = (int)(s - ps->line_start) + 1;
    t->len = 1;
    char c = *s;
    if (c == '\0') {
        t->type = T_EOF;
        t->len = 0;
    } else if (c == '\n' || c == ';') {
        t->type = T_SEP;
    } else if ((c >= '0' && c <= '9') || (c == '.' && s[1] >= '0' && s[1] <= '9')) {
        const char *q = s;
        bool is_int = true;
        while (*q >= '0' && *q <= '9')
            q++;
        if (*q == '.') {
            is_int = false;
            q++;
            while (*q >= '0' && *q <= '9')
                q++;
        }
        if (*q == 'e' || *q == 'E') {
            const char *r = q + 1;
            if (*r == '+' || *r == '-')
                r++;
            if (*r >= '0' && *r <= '9') {
                is_int = false;
                q = r;
                while (*q >= '0' && *q <= '9')
                    q++;
            }
        }
        t->type = T_NUM;
        t->len = (size_t)(q - s);
        /* strtod on a copy: on the source it would also read hex and inf */
        char *copy = pt_arena_strndup(ps->a, s, t->len);
        t->num = strtod(copy, NULL);
        t->is_int = is_int && t->num <= 1e9;
        t->ival = t->is_int ? (long)t->num : 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        const char *q = s;
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '_' ||
               (*q >= '0' && *q <= '9'))
            q++;
        t->type = T_IDENT;
        t->len = (size_t)(q - s);
    } else {
        char d = s[1];
        switch (c) {
        case '(': t->type = T_LP; break;
        case ')': t->type = T_RP; break;
        case ',': t->type = T_COMMA; break;
        case '+': t->type = T_PLUS; break;
        case '-': t->type = T_MINUS; break;
        case '*': t->type = T_STAR; break;
        case '/': t->type = T_SLASH; break;
        case '<': t->type = d == '=' ? T_LE : T_LT; break;
        case '>': t->type = d == '=' ? T_GE : T_GT; break;
        case '=': t->type = d == '=' ? T_EQ : T_ASSIGN; break;
        case '!': t->type = d == '=' ? T_NE : T_BAD; break;
        default: t->type = T_BAD; break;
        }
        if (t->type == T_LE || t->type == T_GE || t->type == T_EQ || t->type == T_NE)
            t->len = 2;
        else if (t->type == T_BAD && (unsigned char)c >= 0x80) {
            /* one whole UTF-8 sequence, so the message shows a character */
            while ((unsigned char)s[t->len] >= 0x80 && (unsigned char)s[t->len] < 0xC0)
                t->len++;
        }
    }
    ps->pos = s + t->len;
    if (t->type == T_SEP && c == '\n') {
        ps->line++;
        ps->line_start = ps->pos;
    }
}

static tok *peek(parser *ps)
{
    if (!ps->have) {
        lex(ps, &ps->t);
        ps->have = true;
    }
    return &ps->t;
}

static tok next(parser *ps)
{
    tok t = *peek(ps);
    ps->have = false;
    if (t.type == T_LP)
        ps->paren++;
    else if (t.type == T_RP && ps->paren > 0)
        ps->paren--;
    return t;
}

/* " at column C", or " at line L, column C" for multi-line programs. */
static void where_str(bool multiline, int line, int col, char *buf, size_t n)
{
    if (multiline)
        snprintf(buf, n, " at line %d, column %d", line, col);
    else
        snprintf(buf, n, " at column %d", col);
}

static void perr(parser *ps, int line, int col, const char *fmt, ...) PT_PRINTF(4, 5);
static void perr(parser *ps, int line, int col, const char *fmt, ...)
{
    char msg[768], at[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    where_str(ps->multiline, line, col, at, sizeof at);
    pt_errf(ps->e, PT_EPARSE, "%s%s", msg, at);
    ps->failed = true;
}

static void unexpected(parser *ps, const tok *t)
{
    if (t->type == T_EOF)
        perr(ps, t->line, t->col, "unexpected end of input");
    else if (t->type == T_SEP && *t->s == '\n')
        perr(ps, t->line, t->col, "unexpected end of line");
    else
        perr(ps, t->line, t->col, "unexpected '%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
}

/* ---- DAG construction: hash-consing and folding ---- */

static uint64_t node_hash(const ex_node *n)
{
    uint64_t key[6];
    memset(key, 0, sizeof key);
    key[0] = (uint64_t)n->kind | (uint64_t)n->dtype << 8 | (uint64_t)(uint32_t)n->input << 16;
    key[1] = (uint64_t)(uint32_t)n->arg[0];
    key[2] = (uint64_t)(uint32_t)n->arg[1];
    key[3] = (uint64_t)(uint32_t)n->arg[2];
    memcpy(&key[4], &n->value, sizeof n->value);
    return pt_hash64(key, sizeof key);
}

static bool node_same(const ex_node *x, const ex_node *y)
{
    return x->kind == y->kind && x->dtype == y->dtype && x->input == y->input &&
           x->arg[0] == y->arg[0] && x->arg[1] == y->arg[1] && x->arg[2] == y->arg[2] &&
           memcmp(&x->value, &y->value, sizeof x->value) == 0;
}

static void htab_put(parser *ps, int idx)
{
    size_t m = ps->hcap - 1, h = (size_t)node_hash(&ps->p->nodes[idx]) & m;
    while (ps->htab[h])
        h = (h + 1) & m;
    ps->htab[h] = idx + 1;
}

/* Returns the node equal to n, adding it if new. Args are earlier nodes. */
static int intern(parser *ps, ex_node n)
{
    ex_prog *p = ps->p;
    const ex_kind_info *ki = &kind_table[n.kind];
    n.nargs = ki->nargs;
    for (int i = n.nargs; i < 3; i++)
        n.arg[i] = -1;
    /* commutative: a constant goes second, otherwise the earlier node first */
    if ((ki->flags & EXK_COMM) &&
        (p->nodes[n.arg[0]].kind == EX_CONST ||
         (p->nodes[n.arg[1]].kind != EX_CONST && n.arg[0] > n.arg[1]))) {
        int t = n.arg[0];
        n.arg[0] = n.arg[1];
        n.arg[1] = t;
    }
    if (n.nargs > 0 && !(ki->flags & EXK_RED)) {
        bool all_const = true;
        double v[3] = {0, 0, 0};
        for (int i = 0; i < n.nargs; i++) {
            all_const &= p->nodes[n.arg[i]].kind == EX_CONST;
            v[i] = p->nodes[n.arg[i]].value;
        }
        if (all_const) {
            double r = eval_elem(n.kind, n.dtype, v[0], v[1], v[2]);
            memset(&n, 0, sizeof n);
            n.kind = EX_CONST;
            n.value = r;
            n.arg[0] = n.arg[1] = n.arg[2] = -1;
        }
    }
    size_t m = ps->hcap - 1, h = (size_t)node_hash(&n) & m;
    for (; ps->htab[h]; h = (h + 1) & m)
        if (node_same(&p->nodes[ps->htab[h] - 1], &n))
            return ps->htab[h] - 1;
    p->nodes = pt_arena_grow(ps->a, p->nodes, sizeof *p->nodes, &ps->node_cap, (size_t)p->nnodes + 1);
    int idx = p->nnodes++;
    p->nodes[idx] = n;
    if ((size_t)p->nnodes * 2 > ps->hcap) {
        ps->hcap *= 2;
        ps->htab = pt_arena_alloc(ps->a, ps->hcap * sizeof *ps->htab);
        for (int i = 0; i < p->nnodes; i++)
            htab_put(ps, i);
    } else {
        ps->htab[h] = idx + 1;
    }
    return idx;
}

static int mk(parser *ps, ex_kind k, int a, int b, int c)
{
    ex_node n;
    memset(&n, 0, sizeof n);
    n.kind = k;
    n.arg[0] = a;
    n.arg[1] = b;
    n.arg[2] = c;
    return intern(ps, n);
}

static int mk_const(parser *ps, double v)
{
    ex_node n;
    memset(&n, 0, sizeof n);
    n.kind = EX_CONST;
    n.value = v;
    n.arg[0] = n.arg[1] = n.arg[2] = -1;
    return intern(ps, n);
}

static int mk_cast(parser *ps, int a, pt_dtype dt)
{
    ex_node n;
    memset(&n, 0, sizeof n);
    n.kind = EX_CAST;
    n.dtype = dt;
    n.arg[0] = a;
    return intern(ps, n);
}

static int find_tensor(const ex_tensor *ts, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(ts[i].name) == len && memcmp(ts[i].name, s, len) == 0)
            return i;
    return -1;
}

/* A name in an expression: an earlier output, else an input (new on first use). */
static int name_ref(parser *ps, const tok *t)
{
    ex_prog *p = ps->p;
    int i = find_tensor(p->outputs, p->noutputs, t->s, t->len);
    if (i >= 0)
        return p->outputs[i].node;
    i = find_tensor(p->inputs, p->ninputs, t->s, t->len);
    if (i >= 0)
        return p->inputs[i].node;
    p->inputs = pt_arena_grow(ps->a, p->inputs, sizeof *p->inputs, &ps->in_cap, (size_t)p->ninputs + 1);
    ex_tensor *in = &p->inputs[p->ninputs];
    memset(in, 0, sizeof *in);
    in->name = pt_arena_strndup(ps->a, t->s, t->len);
    ex_node n;
    memset(&n, 0, sizeof n);
    n.kind = EX_INPUT;
    n.input = p->ninputs++;
    n.arg[0] = n.arg[1] = n.arg[2] = -1;
    in->node = intern(ps, n);
    return in->node;
}

/* ---- functions ---- */

typedef enum fn_lower {
    F_PRIM, F_MAX, F_CAST, F_SUM, F_MEAN, F_SOFTMAX, F_LOGSOFTMAX, F_LAYERNORM, F_RMSNORM
} fn_lower;

/* name, lowering, node kind (F_PRIM), min and max argument count */
static const struct fn_desc {
    const char *name;
    fn_lower lower;
    ex_kind kind;
    int amin, amax;
} fn_table[] = {
    {"neg", F_PRIM, EX_NEG, 1, 1},
    {"abs", F_PRIM, EX_ABS, 1, 1},
    {"min", F_PRIM, EX_MIN, 2, 2},
    {"max", F_MAX, EX_MAX, 2, 2},
    {"exp", F_PRIM, EX_EXP, 1, 1},
    {"exp2", F_PRIM, EX_EXP2, 1, 1},
    {"log", F_PRIM, EX_LOG, 1, 1},
    {"sqrt", F_PRIM, EX_SQRT, 1, 1},
    {"rsqrt", F_PRIM, EX_RSQRT, 1, 1},
    {"tanh", F_PRIM, EX_TANH, 1, 1},
    {"sigmoid", F_PRIM, EX_SIGMOID, 1, 1},
    {"relu", F_PRIM, EX_RELU, 1, 1},
    {"gelu", F_PRIM, EX_GELU, 1, 1},
    {"gelu_erf", F_PRIM, EX_GELU_ERF, 1, 1},
    {"silu", F_PRIM, EX_SILU, 1, 1},
    {"where", F_PRIM, EX_WHERE, 3, 3},
    {"cast", F_CAST, EX_CAST, 2, 2},
    {"sum", F_SUM, EX_RSUM, 2, 2},
    {"mean", F_MEAN, EX_RMEAN, 2, 2},
    {"softmax", F_SOFTMAX, EX_RMAX, 2, 2},
    {"log_softmax", F_LOGSOFTMAX, EX_RMAX, 2, 2},
    {"layernorm", F_LAYERNORM, EX_RMEAN, 2, 3},
    {"rmsnorm", F_RMSNORM, EX_RMEAN, 2, 3},
};

static const struct fn_desc *find_fn(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof fn_table / sizeof fn_table[0]; i++)
        if (strlen(fn_table[i].name) == len && memcmp(fn_table[i].name, s, len) == 0)
            return &fn_table[i];
    return NULL;
}

/* Checks a reduction's dim argument: an integer literal; -1 is always the
 * last dim, other negatives never are, and a non-negative one is checked
 * against the rank by ex_bind. */
static bool check_dim(parser *ps, const struct fn_desc *f, val v, const tok *at)
{
    if (!v.is_int) {
        perr(ps, at->line, at->col, "%s: the dim must be an integer literal (-1 for the last dim)", f->name);
        return false;
    }
    if (v.ival < -1) {
        perr(ps, at->line, at->col, "%s: cannot reduce over dim %ld, only the last dim (-1)", f->name, v.ival);
        return false;
    }
    if (v.ival >= 0) {
        ex_prog *p = ps->p;
        p->dims = pt_arena_grow(ps->a, p->dims, sizeof *p->dims, &ps->dim_cap, (size_t)p->ndims + 1);
        p->dims[p->ndims++] = (ex_dimref){f->name, v.ival, at->line, at->col};
    }
    return true;
}

static int lower_softmax(parser *ps, int t, bool logf)
{
    int m = mk(ps, EX_RMAX, t, -1, -1);
    int s = mk(ps, EX_RSUMEXP, t, m, -1);
    int d = mk(ps, EX_SUB, t, m, -1);
    if (logf)
        return mk(ps, EX_SUB, d, mk(ps, EX_LOG, s, -1, -1), -1);
    return mk(ps, EX_DIV, mk(ps, EX_EXP, d, -1, -1), s, -1);
}

static int lower_layernorm(parser *ps, int t, int eps)
{
    int mu = mk(ps, EX_RMEAN, t, -1, -1);
    int d = mk(ps, EX_SUB, t, mu, -1);
    int var = mk(ps, EX_RMEAN, mk(ps, EX_MUL, d, d, -1), -1, -1);
    return mk(ps, EX_MUL, d, mk(ps, EX_RSQRT, mk(ps, EX_ADD, var, eps, -1), -1, -1), -1);
}

static int lower_rmsnorm(parser *ps, int t, int eps)
{
    int ms = mk(ps, EX_RMEAN, mk(ps, EX_MUL, t, t, -1), -1, -1);
    return mk(ps, EX_MUL, t, mk(ps, EX_RSQRT, mk(ps, EX_ADD, ms, eps, -1), -1, -1), -1);
}

static val parse_cmp(parser *ps);

static val node_val(int node)
{
    val v = {node, false, 0};
    return v;
}

/* One more level of nesting at token t (a '(' or a unary sign); false with
 * the error past EX_MAX_NEST. The caller decrements ps->nest on success. */
static bool enter(parser *ps, const tok *t)
{
    if (++ps->nest > EX_MAX_NEST) {
        perr(ps, t->line, t->col, "expression nested too deeply (more than %d levels)", EX_MAX_NEST);
        return false;
    }
    return true;
}

static val call_args(parser *ps, const struct fn_desc *f, const tok *name);

/* name '(' args ')': the name is consumed, the '(' is next. */
static val parse_call(parser *ps, const tok *name)
{
    const struct fn_desc *f = find_fn(name->s, name->len);
    if (!f) {
        perr(ps, name->line, name->col, "unknown function '%.*s'", (int)name->len, name->s);
        return VNONE;
    }
    tok lp = next(ps); /* '(' */
    if (!enter(ps, &lp))
        return VNONE;
    val r = call_args(ps, f, name);
    ps->nest--;
    return r;
}

/* The arguments of call f (the '(' consumed) up to its ')', then the lowering. */
static val call_args(parser *ps, const struct fn_desc *f, const tok *name)
{
    val args[3];
    tok at[3];
    int nargs = 0;
    pt_dtype dt = PT_F32;
    for (;;) {
        tok *t = peek(ps);
        tok start = *t;
        val v = VNONE;
        if (f->lower == F_CAST && nargs == 1) {
            if (t->type != T_IDENT) {
                if (t->type == T_RP || t->type == T_COMMA || t->type == T_EOF)
                    unexpected(ps, t);
                else
                    perr(ps, t->line, t->col, "cast: expected a dtype name, got '%.*s'", (int)t->len, t->s);
                return VNONE;
            }
            char *nm = pt_arena_strndup(ps->a, t->s, t->len);
            pt_err de = {0};
            if (pt_dtype_parse(nm, &dt, &de) != PT_OK) {
                perr(ps, t->line, t->col, "%s", de.msg);
                return VNONE;
            }
            next(ps);
            v = node_val(0);
        } else {
            v = parse_cmp(ps);
            if (v.node < 0)
                return VNONE;
        }
        if (nargs < 3) {
            args[nargs] = v;
            at[nargs] = start;
        }
        nargs++;
        t = peek(ps);
        if (t->type == T_RP) {
            next(ps);
            break;
        }
        if (t->type != T_COMMA) {
            unexpected(ps, t);
            return VNONE;
        }
        next(ps);
    }
    if (nargs < f->amin || nargs > f->amax) {
        if (f->amin == f->amax)
            perr(ps, name->line, name->col, "%s takes %d argument%s, got %d", f->name, f->amin,
                 f->amin == 1 ? "" : "s", nargs);
        else
            perr(ps, name->line, name->col, "%s takes %d or %d arguments, got %d", f->name, f->amin,
                 f->amax, nargs);
        return VNONE;
    }
    int a0 = args[0].node, a1 = nargs > 1 ? args[1].node : -1, a2 = nargs > 2 ? args[2].node : -1;
    switch (f->lower) {
    case F_PRIM:
        return node_val(mk(ps, f->kind, a0, a1, a2));
    case F_MAX:
        if (args[1].is_int && args[1].ival == -1)
            return node_val(mk(ps, EX_RMAX, a0, -1, -1));
        return node_val(mk(ps, EX_MAX, a0, a1, -1));
    case F_CAST:
        return node_val(mk_cast(ps, a0, dt));
    default:
        break;
    }
    if (!check_dim(ps, f, args[1], &at[1]))
        return VNONE;
    switch (f->lower) {
    case F_SUM: return node_val(mk(ps, EX_RSUM, a0, -1, -1));
    case F_MEAN: return node_val(mk(ps, EX_RMEAN, a0, -1, -1));
    case F_SOFTMAX: return node_val(lower_softmax(ps, a0, false));
    case F_LOGSOFTMAX: return node_val(lower_softmax(ps, a0, true));
    case F_LAYERNORM: return node_val(lower_layernorm(ps, a0, a2 >= 0 ? a2 : mk_const(ps, 1e-5)));
    case F_RMSNORM: return node_val(lower_rmsnorm(ps, a0, a2 >= 0 ? a2 : mk_const(ps, 1e-6)));
    default: break;
    }
    assert(0 && "unhandled lowering");
    return VNONE;
}

/* NAME '[' IDX ']' (ex_parse_indexed only): the name is consumed, the '['
 * is next. The input is called "NAME[IDX]" and remembers IDX; the caller
 * gives such inputs their meaning (a GEMM epilogue: bias[n] per column). */
static val parse_indexed(parser *ps, const tok *name)
{
    next(ps); /* '[' */
    tok idx = next(ps);
    if (idx.type != T_IDENT) {
        unexpected(ps, &idx);
        return VNONE;
    }
    tok *rb = peek(ps);
    if (rb->type != T_BAD || *rb->s != ']') {
        unexpected(ps, rb);
        return VNONE;
    }
    next(ps);
    tok full = *name;
    full.s = pt_arena_printf(ps->a, "%.*s[%.*s]", (int)name->len, name->s, (int)idx.len, idx.s);
    full.len = strlen(full.s);
    int node = name_ref(ps, &full);
    ex_tensor *in = &ps->p->inputs[ps->p->nodes[node].input];
    if (!in->index)
        in->index = pt_arena_strndup(ps->a, idx.s, idx.len);
    return node_val(node);
}

static val parse_prim(parser *ps)
{
    tok t = *peek(ps);
    switch (t.type) {
    case T_NUM: {
        next(ps);
        double m = fabs(t.num);
        if (m > FLT_MAX && (float)m > FLT_MAX) { /* a literal that rounds to FLT_MAX is fine */
            perr(ps, t.line, t.col, "number '%.*s' is out of range for f32 (magnitude at most %.9g)",
                 (int)(t.len > 60 ? 60 : t.len), t.s, (double)FLT_MAX);
            return VNONE;
        }
        if (m != 0 && m < FLT_MIN) {
            perr(ps, t.line, t.col, "number '%.*s' is below f32's smallest normal %.9g",
                 (int)(t.len > 60 ? 60 : t.len), t.s, (double)FLT_MIN);
            return VNONE;
        }
        val v = {mk_const(ps, t.num), t.is_int, t.ival};
        return v;
    }
    case T_IDENT:
        next(ps);
        if (peek(ps)->type == T_LP)
            return parse_call(ps, &t);
        if (ps->indexed && peek(ps)->type == T_BAD && *peek(ps)->s == '[')
            return parse_indexed(ps, &t);
        return node_val(name_ref(ps, &t));
    case T_LP: {
        next(ps);
        if (!enter(ps, &t))
            return VNONE;
        val v = parse_cmp(ps);
        ps->nest--;
        if (v.node < 0)
            return VNONE;
        tok *r = peek(ps);
        if (r->type != T_RP) {
            unexpected(ps, r);
            return VNONE;
        }
        next(ps);
        return node_val(v.node);
    }
    default:
        unexpected(ps, &t);
        return VNONE;
    }
}

static val parse_unary(parser *ps)
{
    tok *t = peek(ps);
    if (t->type != T_MINUS && t->type != T_PLUS)
        return parse_prim(ps);
    tok op = next(ps);
    if (!enter(ps, &op))
        return VNONE;
    val v = parse_unary(ps);
    ps->nest--;
    if (v.node < 0 || op.type == T_PLUS)
        return v;
    val r = {mk(ps, EX_NEG, v.node, -1, -1), v.is_int, -v.ival};
    return r;
}

static val parse_mul(parser *ps)
{
    val l = parse_unary(ps);
    while (l.node >= 0) {
        tok_type ty = peek(ps)->type;
        if (ty != T_STAR && ty != T_SLASH)
            break;
        next(ps);
        val r = parse_unary(ps);
        if (r.node < 0)
            return VNONE;
        l = node_val(mk(ps, ty == T_STAR ? EX_MUL : EX_DIV, l.node, r.node, -1));
    }
    return l;
}

static val parse_add(parser *ps)
{
    val l = parse_mul(ps);
    while (l.node >= 0) {
        tok_type ty = peek(ps)->type;
        if (ty != T_PLUS && ty != T_MINUS)
            break;
        next(ps);
        val r = parse_mul(ps);
        if (r.node < 0)
            return VNONE;
        l = node_val(mk(ps, ty == T_PLUS ? EX_ADD : EX_SUB, l.node, r.node, -1));
    }
    return l;
}

static val parse_cmp(parser *ps)
{
    val l = parse_add(ps);
    while (l.node >= 0) {
        ex_kind k;
        switch (peek(ps)->type) {
        case T_LT: k = EX_LT; break;
        case T_LE: k = EX_LE; break;
        case T_GT: k = EX_GT; break;
        case T_GE: k = EX_GE; break;
        case T_EQ: k = EX_EQ; break;
        case T_NE: k = EX_NE; break;
        default: goto done;
        }
        next(ps);
        val r = parse_add(ps);
        if (r.node < 0)
            return VNONE;
        l = node_val(mk(ps, k, l.node, r.node, -1));
    }
done:
    return l;
}

/* stmt := IDENT '=' cmp, ended by ';', a newline or the end. */
static bool parse_stmt(parser *ps)
{
    ex_prog *p = ps->p;
    tok name = next(ps);
    if (name.type != T_IDENT) {
        perr(ps, name.line, name.col, "expected 'name = expression', got '%.*s'",
             (int)(name.len > 40 ? 40 : name.len), name.s);
        return false;
    }
    tok *t = peek(ps);
    if (t->type != T_ASSIGN) {
        if (t->type == T_EOF || t->type == T_SEP)
            perr(ps, t->line, t->col, "expected '=' after '%.*s'", (int)name.len, name.s);
        else
            unexpected(ps, t);
        return false;
    }
    next(ps);
    val v = parse_cmp(ps);
    if (v.node < 0)
        return false;
    t = peek(ps);
    if (t->type != T_SEP && t->type != T_EOF) {
        unexpected(ps, t);
        return false;
    }
    if (find_tensor(p->outputs, p->noutputs, name.s, name.len) >= 0) {
        perr(ps, name.line, name.col, "'%.*s' is assigned twice", (int)name.len, name.s);
        return false;
    }
    if (find_tensor(p->inputs, p->ninputs, name.s, name.len) >= 0) {
        perr(ps, name.line, name.col, "'%.*s' is used before it is assigned", (int)name.len, name.s);
        return false;
    }
    p->outputs = pt_arena_grow(ps->a, p->outputs, sizeof *p->outputs, &ps->out_cap, (size_t)p->noutputs + 1);
    ex_tensor *o = &p->outputs[p->noutputs++];
    memset(o, 0, sizeof *o);
    o->name = pt_arena_strndup(ps->a, name.s, name.len);
    o->node = v.node;
    return true;
}

/* Keeps the nodes some output reaches, renumbered in depth-first post-order
 * from the outputs (args in order): a canonical order, so equal programs
 * dump equally whatever order the parser made their nodes in. Then fills in
 * levels and has_red. */
static void compact(parser *ps)
{
    ex_prog *p = ps->p;
    int n = p->nnodes;
    int *newidx = pt_arena_alloc(ps->a, (size_t)n * sizeof *newidx);
    int *stack = pt_arena_alloc(ps->a, (size_t)n * sizeof *stack);
    int *argi = pt_arena_alloc(ps->a, (size_t)n * sizeof *argi);
    ex_node *out = pt_arena_alloc(ps->a, (size_t)n * sizeof *out);
    int m = 0;
    for (int i = 0; i < n; i++)
        newidx[i] = -1;
    for (int k = 0; k < p->noutputs + p->ninputs; k++) {
        int root = k < p->noutputs ? p->outputs[k].node : p->inputs[k - p->noutputs].node;
        if (newidx[root] >= 0)
            continue;
        int sp = 0;
        stack[sp] = root;
        argi[sp++] = 0;
        while (sp > 0) {
            int v = stack[sp - 1];
            const ex_node *nd = &p->nodes[v];
            if (argi[sp - 1] < nd->nargs) {
                int c = nd->arg[argi[sp - 1]++];
                if (newidx[c] < 0) {
                    stack[sp] = c;
                    argi[sp++] = 0;
                }
                continue;
            }
            sp--;
            if (newidx[v] >= 0) /* reached twice through a diamond */
                continue;
            ex_node cp = *nd;
            for (int i = 0; i < cp.nargs; i++)
                cp.arg[i] = newidx[cp.arg[i]];
            newidx[v] = m;
            out[m++] = cp;
        }
    }
    p->nodes = out;
    p->nnodes = m;
    for (int i = 0; i < p->noutputs; i++)
        p->outputs[i].node = newidx[p->outputs[i].node];
    for (int i = 0; i < p->ninputs; i++)
        p->inputs[i].node = newidx[p->inputs[i].node];
    p->has_reduction = false;
    p->nlevels = 0;
    for (int i = 0; i < m; i++) {
        ex_node *nd = &out[i];
        int lv = 0;
        bool hr = is_red(nd->kind);
        for (int j = 0; j < nd->nargs; j++) {
            const ex_node *a = &out[nd->arg[j]];
            lv = a->level > lv ? a->level : lv;
            hr |= a->has_red;
        }
        if (nd->kind == EX_RSUMEXP && out[nd->arg[1]].kind == EX_RMAX &&
            out[nd->arg[1]].arg[0] == nd->arg[0])
            lv = out[nd->arg[1]].level; /* online softmax: one pass with its max */
        else if (is_red(nd->kind))
            lv++;
        nd->level = lv;
        nd->has_red = hr;
        if (is_red(nd->kind))
            p->has_reduction = true;
        p->nlevels = lv > p->nlevels ? lv : p->nlevels;
    }
}

static int parse_prog(pt_arena *a, const char *src, bool indexed, ex_prog **out, pt_err *e);

int ex_parse(pt_arena *a, const char *src, ex_prog **out, pt_err *e)
{
    return parse_prog(a, src, false, out, e);
}

int ex_parse_indexed(pt_arena *a, const char *src, ex_prog **out, pt_err *e)
{
    return parse_prog(a, src, true, out, e);
}

static int parse_prog(pt_arena *a, const char *src, bool indexed, ex_prog **out, pt_err *e)
{
    *out = NULL;
    ex_prog *p = pt_arena_alloc(a, sizeof *p);
    p->arena = a;
    p->src = pt_arena_strdup(a, src);
    parser ps;
    memset(&ps, 0, sizeof ps);
    ps.p = p;
    ps.e = e;
    ps.a = a;
    ps.pos = ps.line_start = p->src;
    ps.line = 1;
    ps.multiline = strchr(p->src, '\n') != NULL;
    ps.indexed = indexed;
    ps.hcap = 64;
    ps.htab = pt_arena_alloc(a, ps.hcap * sizeof *ps.htab);
    for (;;) {
        tok *t = peek(&ps);
        if (t->type == T_SEP) {
            next(&ps);
            continue;
        }
        if (t->type == T_EOF)
            break;
        if (!parse_stmt(&ps))
            return PT_EPARSE;
    }
    if (p->noutputs == 0)
        return pt_errf(e, PT_EPARSE, "empty expression");
    compact(&ps);
    *out = p;
    return PT_OK;
}

/* ---- shapes ---- */

void ex_shape_str(const ex_shape *s, char *buf, size_t n)
{
    if (n == 0)
        return;
    buf[0] = '\0';
    if (s->ndim == 0) {
        snprintf(buf, n, "scalar");
        return;
    }
    size_t len = 0;
    for (int i = 0; i < s->ndim && len < n; i++) {
        int k = snprintf(buf + len, n - len, "%s%lld", i ? "x" : "", (long long)s->dim[i]);
        if (k < 0)
            break;
        len += (size_t)k;
    }
}

int ex_check_target(const ex_prog *p, const pt_target *t, pt_err *e)
{
    for (int i = 0; i < p->nnodes; i++) {
        const pt_dtype_info *di = pt_dtype_get(p->nodes[i].dtype);
        if (p->nodes[i].kind == EX_CAST && di->min_sm > t->sm) {
            char tn[16];
            return pt_errf(e, PT_EUNSUPPORTED, "cast to %s needs sm_%d; target is %s", di->name,
                           di->min_sm, pt_target_name(t, tn, sizeof tn));
        }
    }
    return PT_OK;
}

int ex_find_input(const ex_prog *p, const char *name)
{
    return find_tensor(p->inputs, p->ninputs, name, strlen(name));
}

int ex_find_output(const ex_prog *p, const char *name)
{
    return find_tensor(p->outputs, p->noutputs, name, strlen(name));
}

static bool is_ident(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' ||
              (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

int ex_parse_shapes(pt_arena *a, const char *spec, int *n, const char ***names, ex_shape **shapes,
                    pt_err *e)
{
    *n = 0;
    *names = NULL;
    *shapes = NULL;
    size_t cap_n = 0, cap_s = 0;
    const char *s = spec;
    while (*s == ' ')
        s++;
    if (*s == '\0')
        return PT_OK;
    for (;;) {
        const char *end = strchr(s, ',');
        if (!end)
            end = s + strlen(s);
        const char *b = s, *q = end;
        while (b < q && *b == ' ')
            b++;
        while (q > b && q[-1] == ' ')
            q--;
        char *item = pt_arena_strndup(a, b, (size_t)(q - b));
        char *eq = strchr(item, '=');
        if (!eq || !is_ident(item, (size_t)(eq - item)))
            return pt_errf(e, PT_EPARSE, "bad shape '%s' (expected name=DIMxDIM..., e.g. x=4096x8192)", item);
        ex_shape sh;
        memset(&sh, 0, sizeof sh);
        const char *d = eq + 1;
        for (;;) {
            const char *x = strchr(d, 'x');
            size_t len = x ? (size_t)(x - d) : strlen(d);
            char *dtext = pt_arena_strndup(a, d, len);
            char *stop;
            errno = 0;
            long long v = strtoll(dtext, &stop, 10);
            if (len == 0 || *stop != '\0' || errno != 0 || v <= 0 || dtext[0] == '+' || dtext[0] == ' ')
                return pt_errf(e, PT_EINVAL, "bad dimension '%s' in shape '%s'", dtext, item);
            if (sh.ndim == EX_MAX_RANK)
                return pt_errf(e, PT_EINVAL, "shape '%s' has more than %d dims", item, EX_MAX_RANK);
            sh.dim[sh.ndim++] = v;
            if (!x)
                break;
            d = x + 1;
        }
        *names = pt_arena_grow(a, *names, sizeof **names, &cap_n, (size_t)*n + 1);
        *shapes = pt_arena_grow(a, *shapes, sizeof **shapes, &cap_s, (size_t)*n + 1);
        (*names)[*n] = pt_arena_strndup(a, item, (size_t)(eq - item));
        (*shapes)[*n] = sh;
        ++*n;
        if (*end == '\0')
            break;
        s = end + 1;
    }
    return PT_OK;
}

int ex_bind_spec(ex_prog *p, const char *spec, pt_err *e)
{
    int n;
    const char **names;
    ex_shape *shapes;
    int rc = ex_parse_shapes(p->arena, spec, &n, &names, &shapes, e);
    if (rc != PT_OK)
        return rc;
    return ex_bind(p, n, names, shapes, e);
}

/* Strides of a tensor contiguous in shape own, broadcast into full; false
 * when a product passes EX_MAX_NUMEL (ex_bind has refused such shapes). */
static bool bcast_strides(const ex_shape *own, const ex_shape *full, int64_t *stride)
{
    int64_t s = 1;
    for (int d = full->ndim - 1; d >= 0; d--) {
        int od = d - (full->ndim - own->ndim);
        if (od < 0 || own->dim[od] == 1) {
            stride[d] = 0;
        } else {
            stride[d] = s;
            if (__builtin_mul_overflow(s, own->dim[od], &s) || s > EX_MAX_NUMEL)
                return false;
        }
    }
    return true;
}

static void tensor_flags(ex_tensor *t, const ex_shape *full)
{
    int R = full->ndim;
    t->varies_col = R > 0 && t->stride[R - 1] != 0;
    t->varies_row = false;
    for (int d = 0; d + 1 < R; d++)
        t->varies_row |= t->stride[d] != 0;
}

/* Element count of s, or -1 past EX_MAX_NUMEL (checked products). */
static int64_t numel_of(const ex_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        if (__builtin_mul_overflow(n, s->dim[i], &n) || n > EX_MAX_NUMEL)
            return -1;
    return n;
}

int ex_bind(ex_prog *p, int n, const char *const *names, const ex_shape *shapes, pt_err *e)
{
    p->bound = false;
    char sb[160], sb2[160];
    int *given = pt_arena_alloc(p->arena, (size_t)(p->ninputs + 1) * sizeof *given);
    for (int i = 0; i < p->ninputs; i++)
        given[i] = -1;
    for (int k = 0; k < n; k++) {
        const ex_shape *s = &shapes[k];
        if (s->ndim < 0 || s->ndim > EX_MAX_RANK)
            return pt_errf(e, PT_EINVAL, "shape of '%s' has %d dims (0 to %d allowed)", names[k], s->ndim,
                           EX_MAX_RANK);
        ex_shape_str(s, sb, sizeof sb);
        int64_t total = 1;
        for (int d = 0; d < s->ndim; d++) {
            if (s->dim[d] <= 0)
                return pt_errf(e, PT_EINVAL, "bad dimension '%lld' in shape '%s=%s'", (long long)s->dim[d],
                               names[k], sb);
            if (__builtin_mul_overflow(total, s->dim[d], &total) || total > EX_MAX_NUMEL)
                return pt_errf(e, PT_EINVAL, "shape '%s=%s' has too many elements", names[k], sb);
        }
        int i = ex_find_input(p, names[k]);
        if (i < 0) {
            if (ex_find_output(p, names[k]) >= 0)
                return pt_errf(e, PT_EINVAL, "shape given for '%s', which is an output, not an input", names[k]);
            return pt_errf(e, PT_EINVAL, "shape given for '%s', which is not an input", names[k]);
        }
        if (given[i] >= 0)
            return pt_errf(e, PT_EINVAL, "shape for '%s' given twice", names[k]);
        given[i] = k;
    }
    ex_shape full;
    memset(&full, 0, sizeof full);
    for (int i = 0; i < p->ninputs; i++) {
        if (given[i] < 0)
            return pt_errf(e, PT_EINVAL, "no shape given for input '%s'", p->inputs[i].name);
        p->inputs[i].shape = shapes[given[i]];
        if (p->inputs[i].shape.ndim > full.ndim)
            full.ndim = p->inputs[i].shape.ndim;
    }
    /* numpy broadcasting from the right; the first input with a non-1 size
     * owns each dim, so the message names both sides of a clash */
    for (int k = 1; k <= full.ndim; k++) {
        int64_t size = 1;
        int owner = -1;
        for (int i = 0; i < p->ninputs; i++) {
            const ex_shape *s = &p->inputs[i].shape;
            if (s->ndim < k || s->dim[s->ndim - k] == 1)
                continue;
            int64_t d = s->dim[s->ndim - k];
            if (owner < 0) {
                size = d;
                owner = i;
            } else if (d != size) {
                ex_shape_str(s, sb, sizeof sb);
                ex_shape_str(&p->inputs[owner].shape, sb2, sizeof sb2);
                return pt_errf(e, PT_EINVAL, "cannot broadcast %s=%s with %s=%s at dim -%d", p->inputs[i].name, sb,
                               p->inputs[owner].name, sb2, k);
            }
        }
        full.dim[full.ndim - k] = size;
    }
    int rank = full.ndim > 0 ? full.ndim : 1;
    bool multiline = strchr(p->src, '\n') != NULL;
    for (int i = 0; i < p->ndims; i++) {
        const ex_dimref *d = &p->dims[i];
        if (d->dim != rank - 1) {
            char at[64];
            where_str(multiline, d->line, d->col, at, sizeof at);
            return pt_errf(e, PT_EINVAL, "%s: cannot reduce over dim %ld of a rank-%d shape, only the last dim (-1 or %d)%s",
                           d->fn, d->dim, rank, rank - 1, at);
        }
    }
    int64_t numel = numel_of(&full);
    if (numel < 0) {
        ex_shape_str(&full, sb, sizeof sb);
        return pt_errf(e, PT_EINVAL, "broadcast shape %s has more than 2^48 elements", sb);
    }
    p->full = full;
    p->cols = full.ndim > 0 ? full.dim[full.ndim - 1] : 1;
    p->rows = numel / p->cols;
    for (int i = 0; i < p->ninputs; i++) {
        ex_tensor *t = &p->inputs[i];
        /* own shapes were checked above: these products fit */
        bool fits = bcast_strides(&t->shape, &full, t->stride);
        t->numel = numel_of(&t->shape);
        assert(fits && t->numel > 0);
        (void)fits;
        tensor_flags(t, &full);
    }
    for (int i = 0; i < p->nnodes; i++) {
        ex_node *nd = &p->nodes[i];
        if (nd->kind == EX_INPUT) {
            nd->varies_col = p->inputs[nd->input].varies_col;
            nd->varies_row = p->inputs[nd->input].varies_row;
            continue;
        }
        nd->varies_col = nd->varies_row = false;
        for (int j = 0; j < nd->nargs; j++) {
            nd->varies_col |= p->nodes[nd->arg[j]].varies_col;
            nd->varies_row |= p->nodes[nd->arg[j]].varies_row;
        }
        if (is_red(nd->kind))
            nd->varies_col = false;
    }
    for (int i = 0; i < p->noutputs; i++) {
        ex_tensor *t = &p->outputs[i];
        const ex_node *nd = &p->nodes[t->node];
        t->per_row = nd->has_red && !nd->varies_col;
        t->shape = full;
        if (t->per_row && full.ndim > 0)
            t->shape.dim[full.ndim - 1] = 1;
        /* at most the broadcast shape, checked above */
        bool fits = bcast_strides(&t->shape, &full, t->stride);
        t->numel = numel_of(&t->shape);
        assert(fits && t->numel > 0);
        (void)fits;
        tensor_flags(t, &full);
    }
    p->bound = true;
    return PT_OK;
}

int64_t ex_row_offset(const ex_prog *p, const ex_tensor *t, int64_t r)
{
    int64_t off = 0;
    for (int d = p->full.ndim - 2; d >= 0; d--) {
        off += (r % p->full.dim[d]) * t->stride[d];
        r /= p->full.dim[d];
    }
    return off;
}

ex_class ex_node_class(const ex_prog *p, int i)
{
    return p->nodes[i].varies_col ? EX_ELEM : EX_ROW;
}

/* ---- float64 reference ---- */

/* Row reduction of node nd whose operands are a (step sa: 1 along the row,
 * 0 for a row value) and, for RSUMEXP, the row value b. */
static double reduce_row(ex_kind k, const double *a, size_t sa, double b, int64_t cols)
{
    double acc;
    switch (k) {
    case EX_RSUM:
    case EX_RMEAN:
        if (sa == 0) {
            acc = (double)cols * a[0];
        } else {
            acc = 0.0;
            for (int64_t j = 0; j < cols; j++)
                acc += a[j];
        }
        return k == EX_RMEAN ? acc / (double)cols : acc;
    case EX_RMAX:
        if (sa == 0)
            return fmax(-(double)INFINITY, a[0]);
        acc = -(double)INFINITY;
        for (int64_t j = 0; j < cols; j++)
            acc = fmax(acc, a[j]);
        return acc;
    case EX_RSUMEXP:
        if (sa == 0)
            return (double)cols * exp(a[0] - b);
        acc = 0.0;
        for (int64_t j = 0; j < cols; j++)
            acc += exp(a[j] - b);
        return acc;
    default:
        break;
    }
    assert(0 && "reduce_row: not a reduction");
    return 0.0;
}

int ex_reference(const ex_prog *p, const double *const *inputs, double **outputs, pt_err *e)
{
    if (!p->bound)
        return pt_errf(e, PT_EINVAL, "ex_reference: shapes not bound (call ex_bind first)");
    int64_t rows = p->rows, cols = p->cols;
    int nn = p->nnodes;
    /* cur[i]: node i's values for the current row (cols of them for ELEM
     * nodes, one otherwise); INPUT nodes point into the caller's input. */
    const double **cur = calloc((size_t)nn, sizeof *cur);
    double **own = calloc((size_t)nn, sizeof *own);
    static const double zero = 0.0;
    int rc = PT_OK;
    if (!cur || !own) {
        rc = pt_errf(e, PT_ENOMEM, "ex_reference: out of memory");
        goto out;
    }
    for (int i = 0; i < nn; i++) {
        const ex_node *nd = &p->nodes[i];
        if (nd->kind == EX_INPUT)
            continue;
        own[i] = malloc((size_t)(nd->varies_col ? cols : 1) * sizeof **own);
        if (!own[i]) {
            rc = pt_errf(e, PT_ENOMEM, "ex_reference: out of memory for %lld columns", (long long)cols);
            goto out;
        }
        if (nd->kind == EX_CONST)
            own[i][0] = nd->value;
        cur[i] = own[i];
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int i = 0; i < nn; i++) {
            const ex_node *nd = &p->nodes[i];
            if (nd->kind == EX_CONST || (r > 0 && !nd->varies_row))
                continue;
            if (nd->kind == EX_INPUT) {
                const ex_tensor *t = &p->inputs[nd->input];
                cur[i] = inputs[nd->input] + ex_row_offset(p, t, r);
                continue;
            }
            const double *a[3] = {&zero, &zero, &zero};
            size_t sa[3] = {0, 0, 0};
            for (int j = 0; j < nd->nargs; j++) {
                a[j] = cur[nd->arg[j]];
                sa[j] = p->nodes[nd->arg[j]].varies_col ? 1 : 0;
            }
            double *o = own[i];
            if (is_red(nd->kind)) {
                o[0] = reduce_row(nd->kind, a[0], sa[0], a[1][0], cols);
                continue;
            }
            int64_t n = nd->varies_col ? cols : 1;
            switch (nd->kind) {
            case EX_ADD:
                for (int64_t j = 0; j < n; j++)
                    o[j] = a[0][(size_t)j * sa[0]] + a[1][(size_t)j * sa[1]];
                break;
            case EX_SUB:
                for (int64_t j = 0; j < n; j++)
                    o[j] = a[0][(size_t)j * sa[0]] - a[1][(size_t)j * sa[1]];
                break;
            case EX_MUL:
                for (int64_t j = 0; j < n; j++)
                    o[j] = a[0][(size_t)j * sa[0]] * a[1][(size_t)j * sa[1]];
                break;
            default:
                for (int64_t j = 0; j < n; j++)
                    o[j] = eval_elem(nd->kind, nd->dtype, a[0][(size_t)j * sa[0]], a[1][(size_t)j * sa[1]],
                                     a[2][(size_t)j * sa[2]]);
                break;
            }
        }
        for (int k = 0; k < p->noutputs; k++) {
            const ex_tensor *t = &p->outputs[k];
            const double *v = cur[t->node];
            if (t->per_row) {
                outputs[k][r] = v[0];
            } else if (p->nodes[t->node].varies_col) {
                memcpy(outputs[k] + r * cols, v, (size_t)cols * sizeof *v);
            } else {
                for (int64_t j = 0; j < cols; j++)
                    outputs[k][r * cols + j] = v[0];
            }
        }
    }
out:
    if (own)
        for (int i = 0; i < nn; i++)
            free(own[i]);
    free(own);
    free(cur);
    return rc;
}

/* ---- cost model ---- */

double ex_flops(const ex_prog *p)
{
    if (!p->bound)
        return 0.0;
    double total = 0.0, elems = (double)p->rows * (double)p->cols;
    for (int i = 0; i < p->nnodes; i++) {
        const ex_node *nd = &p->nodes[i];
        double f = kind_table[nd->kind].flops;
        if (f == 0.0)
            continue;
        total += f * ((is_red(nd->kind) || nd->varies_col) ? elems : (double)p->rows);
    }
    return total;
}

int64_t ex_bytes(const ex_prog *p, const pt_dtype *in_dt, const pt_dtype *out_dt)
{
    if (!p->bound)
        return 0;
    int64_t total = 0;
    for (int i = 0; i < p->ninputs; i++)
        total += p->inputs[i].numel * pt_dtype_get(in_dt ? in_dt[i] : PT_F32)->bytes;
    for (int i = 0; i < p->noutputs; i++)
        total += p->outputs[i].numel * pt_dtype_get(out_dt ? out_dt[i] : PT_F32)->bytes;
    return total;
}

/* ---- printer ---- */

/* Shortest %g form that reads back as the same double. */
static void put_double(pt_buf *b, double v)
{
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v || isnan(v))
            break;
    }
    pt_buf_puts(b, tmp);
}

void ex_dump(const ex_prog *p, pt_buf *b)
{
    char sb[160];
    for (int i = 0; i < p->nnodes; i++) {
        const ex_node *nd = &p->nodes[i];
        size_t start = b->len;
        pt_buf_printf(b, "%%%d = %s", i, kind_table[nd->kind].name);
        if (nd->kind == EX_CAST)
            pt_buf_printf(b, ".%s", pt_dtype_get(nd->dtype)->name);
        if (nd->kind == EX_INPUT) {
            pt_buf_printf(b, " %s", p->inputs[nd->input].name);
            if (p->bound) {
                ex_shape_str(&p->inputs[nd->input].shape, sb, sizeof sb);
                pt_buf_printf(b, " %s", sb);
            }
        } else if (nd->kind == EX_CONST) {
            pt_buf_putc(b, ' ');
            put_double(b, nd->value);
        }
        for (int j = 0; j < nd->nargs; j++)
            pt_buf_printf(b, " %%%d", nd->arg[j]);
        while (b->len - start < 28)
            pt_buf_putc(b, ' ');
        pt_buf_puts(b, " ;");
        if (p->bound)
            pt_buf_printf(b, " %s,%s", nd->varies_col ? "elem" : "row",
                          nd->varies_row ? "" : " same every row,");
        pt_buf_printf(b, " level %d\n", nd->level);
    }
    for (int i = 0; i < p->noutputs; i++) {
        const ex_tensor *t = &p->outputs[i];
        pt_buf_printf(b, "%s = %%%d", t->name, t->node);
        if (p->bound) {
            ex_shape_str(&t->shape, sb, sizeof sb);
            pt_buf_printf(b, " %s%s", sb, t->per_row ? " per-row" : "");
        }
        pt_buf_putc(b, '\n');
    }
}

/* ---- canonical text (ex_canon) ---- */

/* A printed operand: its text and the precedence of its outermost operator
 * (CP_CMP lowest .. CP_PRIM a name, number, call or group). */
enum { CP_CMP = 1, CP_ADD, CP_MUL, CP_UNARY, CP_PRIM };
typedef struct ctext {
    char *s; /* NULL: a syntax error (ex_parse has already named it) */
    int prec;
} ctext;

static ctext canon_cmp(parser *ps);

static ctext canon_group(parser *ps, ctext v)
{
    ctext r = {pt_arena_printf(ps->a, "(%s)", v.s), CP_PRIM};
    return r;
}

/* l OP r at precedence prec, left-associative: the left operand keeps its
 * parentheses only when it binds looser, the right one when it binds no
 * tighter. */
static ctext canon_bin(parser *ps, ctext l, const char *op, ctext r, int prec)
{
    if (l.prec < prec)
        l = canon_group(ps, l);
    if (r.prec <= prec)
        r = canon_group(ps, r);
    ctext o = {pt_arena_printf(ps->a, "%s %s %s", l.s, op, r.s), prec};
    return o;
}

static ctext canon_prim(parser *ps)
{
    ctext bad = {NULL, 0};
    tok t = next(ps);
    if (t.type == T_NUM) {
        ctext v = {pt_arena_strndup(ps->a, t.s, t.len), CP_PRIM};
        return v;
    }
    if (t.type == T_LP) {
        ctext v = canon_cmp(ps);
        if (!v.s || next(ps).type != T_RP)
            return bad;
        return v; /* the group's own precedence: callers add what is needed */
    }
    if (t.type != T_IDENT)
        return bad;
    tok *n = peek(ps);
    if (n->type == T_BAD && *n->s == '[') { /* NAME[IDX] */
        next(ps);
        tok idx = next(ps);
        tok rb = next(ps);
        if (idx.type != T_IDENT || rb.type != T_BAD || *rb.s != ']')
            return bad;
        ctext v = {pt_arena_printf(ps->a, "%.*s[%.*s]", (int)t.len, t.s, (int)idx.len, idx.s),
                   CP_PRIM};
        return v;
    }
    if (n->type != T_LP) {
        ctext v = {pt_arena_strndup(ps->a, t.s, t.len), CP_PRIM};
        return v;
    }
    next(ps);
    char *s = pt_arena_printf(ps->a, "%.*s(", (int)t.len, t.s);
    for (int i = 0;; i++) {
        ctext a = canon_cmp(ps);
        if (!a.s)
            return bad;
        s = pt_arena_printf(ps->a, "%s%s%s", s, i ? ", " : "", a.s);
        tok sep = next(ps);
        if (sep.type == T_RP)
            break;
        if (sep.type != T_COMMA)
            return bad;
    }
    ctext v = {pt_arena_printf(ps->a, "%s)", s), CP_PRIM};
    return v;
}

static ctext canon_unary(parser *ps)
{
    tok_type ty = peek(ps)->type;
    if (ty != T_MINUS && ty != T_PLUS)
        return canon_prim(ps);
    next(ps);
    ctext v = canon_unary(ps);
    if (!v.s || ty == T_PLUS) /* a unary plus changes nothing */
        return v;
    if (v.prec < CP_UNARY)
        v = canon_group(ps, v);
    ctext r = {pt_arena_printf(ps->a, "-%s", v.s), CP_UNARY};
    return r;
}

static ctext canon_mul(parser *ps)
{
    ctext l = canon_unary(ps);
    while (l.s && (peek(ps)->type == T_STAR || peek(ps)->type == T_SLASH)) {
        const char *op = next(ps).type == T_STAR ? "*" : "/";
        ctext r = canon_unary(ps);
        if (!r.s)
            return r;
        l = canon_bin(ps, l, op, r, CP_MUL);
    }
    return l;
}

static ctext canon_add(parser *ps)
{
    ctext l = canon_mul(ps);
    while (l.s && (peek(ps)->type == T_PLUS || peek(ps)->type == T_MINUS)) {
        const char *op = next(ps).type == T_PLUS ? "+" : "-";
        ctext r = canon_mul(ps);
        if (!r.s)
            return r;
        l = canon_bin(ps, l, op, r, CP_ADD);
    }
    return l;
}

static ctext canon_cmp(parser *ps)
{
    ctext l = canon_add(ps);
    for (;;) {
        static const char *const ops[] = {[T_LT] = "<", [T_LE] = "<=", [T_GT] = ">",
                                          [T_GE] = ">=", [T_EQ] = "==", [T_NE] = "!="};
        tok_type ty = peek(ps)->type;
        if (!l.s || ty < T_LT || ty > T_NE)
            return l;
        next(ps);
        ctext r = canon_add(ps);
        if (!r.s)
            return r;
        l = canon_bin(ps, l, ops[ty], r, CP_CMP);
    }
}

int ex_canon(pt_arena *a, const char *src, const char **out, pt_err *e)
{
    *out = NULL;
    ex_prog *p;
    pt_err pe = {0};
    bool bare = false;
    int rc = ex_parse_indexed(a, src, &p, &pe); /* every error named on the text as written */
    if (rc) {
        /* a bare expression (a GEMM epilogue "gelu(acc)"): canonical as one */
        pt_err be = {0};
        if (ex_parse_indexed(a, pt_arena_printf(a, "_ = %s", src), &p, &be) != PT_OK) {
            *e = pe;
            return rc;
        }
        bare = true;
    }
    parser ps;
    memset(&ps, 0, sizeof ps);
    ps.a = a;
    ps.pos = ps.line_start = p->src;
    ps.line = 1;
    char *s = "";
    for (;;) {
        tok t = next(&ps);
        if (t.type == T_SEP)
            continue;
        if (t.type == T_EOF)
            break;
        tok eq = next(&ps);
        ctext v = t.type == T_IDENT && eq.type == T_ASSIGN ? canon_cmp(&ps) : (ctext){NULL, 0};
        tok end = v.s ? next(&ps) : eq;
        if (!v.s || (end.type != T_SEP && end.type != T_EOF))
            return pt_errf(e, PT_EINTERNAL, "expression '%s' parsed but could not be printed", src);
        s = pt_arena_printf(a, "%s%s%.*s = %s", s, *s ? "; " : "", (int)t.len, t.s, v.s);
        if (end.type == T_EOF)
            break;
    }
    *out = bare ? s + 4 : s; /* without the "_ = " */
    return PT_OK;
}
