/* The launch contract (tuner/contract.h): the tuned launch plus what probes
 * of the same config at other sizes prove about run-time dimensions. */
#include "tuner/contract.h"

#include "ptx/target.h"
#include "search/problem.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_MAX_DIMS = 32, C_MAX_TENSORS = 32, C_MAX_PTS = 24 };

typedef struct cdim {
    char name[48];
    int64_t tuned, lo, hi;
    const pt_key *k;
    int pos;   /* SHAPES: index of the size in the key's string */
    int group; /* dims of one group change together */
} cdim;

/* One emission: its PTX, launch and tensor sizes. */
typedef struct emission {
    bool ok;
    pt_buf ptx;
    pt_launch l;
    int nin, nout;
    int64_t in[C_MAX_TENSORS], out[C_MAX_TENSORS];
    pt_dtype in_dt[C_MAX_TENSORS], out_dt[C_MAX_TENSORS];
    char names[24][48]; /* parameter names, in order */
    int nnames;
} emission;

typedef struct cctx {
    const pt_op *op;
    const pt_target *t;
    int max_ptx;
    const pt_config *c;
    cdim d[C_MAX_DIMS];
    int nd;
} cctx;

static bool is_size_key(const pt_key *k)
{
    return (k->flags & PT_KEY_SHAPE) && (k->type == PT_KEY_INT || k->type == PT_KEY_SHAPES);
}

/* Calls fn(ctx, pos, value) for every size of a shape list ("x=16x4096,w=4096"). */
static int shape_sizes(const char *s, int64_t *v, int max)
{
    int n = 0;
    bool in = false;
    while (s && *s) {
        if (*s == '=') {
            in = true;
            s++;
        } else if (*s == ',') {
            in = false;
            s++;
        } else if (in && isdigit((unsigned char)*s)) {
            char *end;
            long long x = strtoll(s, &end, 10);
            if (n < max)
                v[n] = x;
            n++;
            s = end;
        } else
            s++;
    }
    return n;
}

/* The shape list with every size i where set[i] replaced by val. */
static char *shape_with(pt_arena *a, const char *s, const bool *set, int64_t val)
{
    pt_buf b;
    pt_buf_init(&b);
    int n = 0;
    bool in = false;
    while (*s) {
        if (*s == '=' || *s == ',') {
            in = *s == '=';
            pt_buf_putc(&b, *s++);
        } else if (in && isdigit((unsigned char)*s)) {
            const char *e = s;
            while (isdigit((unsigned char)*e))
                e++;
            if (n < C_MAX_DIMS && set[n])
                pt_buf_printf(&b, "%lld", (long long)val);
            else
                pt_buf_putn(&b, s, (size_t)(e - s));
            n++;
            s = e;
        } else
            pt_buf_putc(&b, *s++);
    }
    char *r = pt_arena_strdup(a, b.s ? b.s : "");
    pt_buf_free(&b);
    return r;
}

static void dims_of(cctx *x, const pt_problem *p)
{
    const pt_schema *s = x->op->schema;
    x->nd = 0;
    int group = 0;
    for (int i = 0; s && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        if (!is_size_key(k))
            continue;
        if (k->type == PT_KEY_INT) {
            if (x->nd == C_MAX_DIMS)
                return;
            cdim *d = &x->d[x->nd++];
            snprintf(d->name, sizeof d->name, "%s", k->name);
            d->tuned = d->lo = d->hi = pt_key_int(k, p);
            d->k = k;
            d->pos = -1;
            d->group = group++;
            continue;
        }
        const char *text = *(const char *const *)((const char *)p + k->off);
        int64_t v[C_MAX_DIMS];
        int n = shape_sizes(text, v, C_MAX_DIMS);
        int first = x->nd;
        /* names: tensor[axis] */
        const char *t = text;
        int pos = 0;
        while (t && *t && pos < n && x->nd < C_MAX_DIMS) {
            const char *eq = strchr(t, '=');
            if (!eq)
                break;
            char tname[24];
            snprintf(tname, sizeof tname, "%.*s", (int)(eq - t) < 23 ? (int)(eq - t) : 23, t);
            const char *q = eq + 1;
            int axis = 0;
            while (*q && *q != ',') {
                if (isdigit((unsigned char)*q)) {
                    while (isdigit((unsigned char)*q))
                        q++;
                    cdim *d = &x->d[x->nd++];
                    snprintf(d->name, sizeof d->name, "%s[%d]", tname, axis++);
                    d->tuned = d->lo = d->hi = v[pos];
                    d->k = k;
                    d->pos = pos++;
                    d->group = -1;
                } else
                    q++;
            }
            t = *q ? q + 1 : q;
        }
        /* sizes of one list with the same value change together */
        for (int a = first; a < x->nd; a++) {
            if (x->d[a].group >= 0)
                continue;
            x->d[a].group = group;
            for (int b = a + 1; b < x->nd; b++)
                if (x->d[b].tuned == x->d[a].tuned)
                    x->d[b].group = group;
            group++;
        }
    }
}

static void emission_free(emission *m) { pt_buf_free(&m->ptx); }

/* Prepares, checks and emits the config for problem q. */
static int emit_at(const cctx *x, const pt_problem *q, emission *out, pt_err *e)
{
    memset(out, 0, sizeof *out);
    pt_buf_init(&out->ptx);
    pt_arena *a = pt_arena_new();
    if (!a)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    pt_prepared *pp = NULL;
    pt_err pe = {0};
    ptx_module *m = NULL;
    if (x->op->prepare(a, q, x->t, &pp, &pe) == PT_OK &&
        pt_op_build(x->op, pp, x->t, x->max_ptx, x->c, &m, &out->l, &pe) == PT_OK) {
        ptx_print_buf(m, &out->ptx);
        for (size_t i = 0; i < m->nfns; i++) {
            const ptx_fn *f = m->fns[i];
            if (!out->l.entry || strcmp(f->name, out->l.entry) != 0)
                continue;
            for (size_t j = 0; j < f->nparams && j < 24; j++)
                snprintf(out->names[out->nnames++], sizeof out->names[0], "%s",
                         f->params[j].name ? f->params[j].name : "");
        }
        out->l.entry = NULL; /* lived in the module */
        pt_tensor in[C_MAX_TENSORS], o[C_MAX_TENSORS];
        memset(in, 0, sizeof in);
        memset(o, 0, sizeof o);
        if (x->op->tensors && x->op->tensors(pp, &out->nin, &out->nout, in, o) == PT_OK &&
            out->nin <= C_MAX_TENSORS && out->nout <= C_MAX_TENSORS) {
            for (int i = 0; i < out->nin; i++) {
                out->in[i] = in[i].numel;
                out->in_dt[i] = in[i].dtype;
            }
            for (int i = 0; i < out->nout; i++) {
                out->out[i] = o[i].numel;
                out->out_dt[i] = o[i].dtype;
            }
            out->ok = true;
        }
        ptx_module_free(m);
    } else if (pe.code == PT_ENOMEM) {
        pt_arena_free(a);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    pt_arena_free(a);
    return PT_OK;
}

/* The problem with every dim of group g set to v. */
static pt_problem with_group(const cctx *x, pt_arena *a, const pt_problem *p, int g, int64_t v)
{
    pt_problem q = *p;
    for (int i = 0; i < x->nd; i++) {
        const cdim *d = &x->d[i];
        if (d->group != g)
            continue;
        if (d->pos < 0) {
            *(int64_t *)((char *)&q + d->k->off) = v;
            continue;
        }
        bool set[C_MAX_DIMS] = {0};
        for (int j = 0; j < x->nd; j++)
            if (x->d[j].group == g && x->d[j].k == d->k && x->d[j].pos >= 0)
                set[x->d[j].pos] = true;
        const char **slot = (const char **)((char *)&q + d->k->off);
        *slot = shape_with(a, *slot, set, v);
    }
    return q;
}

/* v0 at T is v1 at P: equal, or proportional to the size. */
static bool follows(uint64_t v0, uint64_t v1, int64_t T, int64_t P)
{
    return v1 == v0 || (v0 % (uint64_t)T == 0 && v1 == v0 / (uint64_t)T * (uint64_t)P);
}

/* The same maps, but for dims and strides proportional to the size (a map
 * over a tensor whose rows are the run-time size: the runtime encodes it at
 * the launch's sizes, the contract's dims_scale / strides_scale). */
static bool same_tmaps(const pt_launch *l, const pt_launch *q, int64_t T, int64_t P)
{
    if (l->ntmaps != q->ntmaps)
        return false;
    for (int i = 0; i < l->ntmaps; i++) {
        const pt_tmap *a = &l->tmaps[i], *b = &q->tmaps[i];
        if (a->of != b->of || a->index != b->index || a->offset != b->offset ||
            a->dtype != b->dtype || a->rank != b->rank || a->swizzle != b->swizzle ||
            a->oobfill != b->oobfill || a->l2promo != b->l2promo ||
            memcmp(a->box, b->box, sizeof a->box))
            return false;
        for (int r = 0; r < a->rank && r < 5; r++)
            if (!follows(a->dims[r], b->dims[r], T, P) ||
                (r + 1 < a->rank && !follows(a->strides[r], b->strides[r], T, P)))
                return false;
    }
    return true;
}

/* Whether probe pr (group at P, tuned T) runs the same kernel: same PTX,
 * block, smem, workspace, argument kinds; scalars equal or following the
 * dim; tensor sizes equal or proportional. */
static bool same_kernel(const emission *b, const emission *pr, int64_t T, int64_t P)
{
    if (!pr->ok || pr->ptx.len != b->ptx.len || memcmp(pr->ptx.s, b->ptx.s, b->ptx.len) != 0)
        return false;
    const pt_launch *l = &b->l, *q = &pr->l;
    if (memcmp(l->block, q->block, sizeof l->block) || l->smem != q->smem ||
        l->smem_optin != q->smem_optin || l->align != q->align || l->nargs != q->nargs ||
        l->grid_per_sm != q->grid_per_sm)
        return false;
    for (int i = 0; i < l->nargs; i++) {
        const pt_arg *u = &l->args[i], *v = &q->args[i];
        if (u->kind != v->kind || u->index != v->index)
            return false;
        if (u->kind == PT_ARG_F32 && u->f != v->f)
            return false;
        if ((u->kind == PT_ARG_WORKSPACE || u->kind == PT_ARG_SCRATCH ||
             u->kind == PT_ARG_TENSORMAP) && u->u != v->u)
            return false;
        if ((u->kind == PT_ARG_U32 || u->kind == PT_ARG_U64) && u->u != v->u &&
            !(u->u == (uint64_t)T && v->u == (uint64_t)P))
            return false;
    }
    if (!same_tmaps(l, q, T, P) || memcmp(l->cluster, q->cluster, sizeof l->cluster))
        return false;
    if (b->nin != pr->nin || b->nout != pr->nout)
        return false;
    for (int i = 0; i < b->nin + b->nout; i++) {
        int64_t n0 = i < b->nin ? b->in[i] : b->out[i - b->nin];
        int64_t n1 = i < b->nin ? pr->in[i] : pr->out[i - b->nin];
        if (n1 != n0 && (n0 % T != 0 || n1 != n0 / T * P))
            return false;
    }
    return true;
}

typedef struct gfit {
    bool varies;
    int64_t mul, div, times; /* times x ceil(P mul / div) */
} gfit;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* grid = ceil(P * mul / div) at every point, for some mul in cands. */
static bool fit1(const int64_t *P, const int64_t *G, int n, const int64_t *cands, int nc, gfit *f)
{
    int big = 0;
    for (int i = 1; i < n; i++)
        if (P[i] > P[big])
            big = i;
    for (int c = 0; c < nc; c++) {
        int64_t mul = cands[c];
        if (mul <= 0 || G[big] <= 0 || P[big] > INT64_MAX / mul)
            continue;
        int64_t w = P[big] * mul, lo = cdiv(w, G[big]);
        int64_t hi = G[big] > 1 ? cdiv(w, G[big] - 1) - 1 : lo + 4096;
        for (int64_t dv = lo; dv <= hi && dv <= lo + 4096; dv++) {
            bool ok = true;
            for (int i = 0; i < n && ok; i++)
                ok = P[i] <= INT64_MAX / mul && cdiv(P[i] * mul, dv) == G[i];
            if (ok) {
                f->mul = mul;
                f->div = dv;
                return true;
            }
        }
    }
    return false;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* grid = ceil(P * mul / div), or times x that (a persistent GEMM's tiles
 * at run-time M: ceil(m / bm) x column tiles, times the common factor of
 * every point's grid). */
static bool fit(const int64_t *P, const int64_t *G, int n, const int64_t *cands, int nc, gfit *f)
{
    f->varies = false;
    f->times = 1;
    for (int i = 1; i < n; i++)
        if (G[i] != G[0])
            f->varies = true;
    if (!f->varies)
        return true;
    if (fit1(P, G, n, cands, nc, f))
        return true;
    int64_t t = 0, H[C_MAX_PTS];
    for (int i = 0; i < n; i++)
        t = gcd64(t, G[i]);
    if (t <= 1 || n > C_MAX_PTS)
        return false;
    for (int i = 0; i < n; i++)
        H[i] = G[i] / t;
    f->times = t;
    return fit1(P, H, n, cands, nc, f);
}

static const char *kind_name(pt_arg_kind k)
{
    switch (k) {
    case PT_ARG_INPUT: return "input";
    case PT_ARG_OUTPUT: return "output";
    case PT_ARG_U32: return "u32";
    case PT_ARG_U64: return "u64";
    case PT_ARG_F32: return "f32";
    case PT_ARG_WORKSPACE: return "workspace";
    case PT_ARG_SCRATCH: return "scratch";
    case PT_ARG_TENSORMAP: return "tensormap";
    }
    return "?";
}

static void json_str(pt_buf *b, const char *s)
{
    pt_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            pt_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            pt_buf_printf(b, "\\u%04x", *p);
        else
            pt_buf_putc(b, (char)*p);
    }
    pt_buf_putc(b, '"');
}

/* Emits p with group g's dims at v and compares it with base (tuned at T):
 * *same when it is the same kernel; kept (then point *n, appended to P, G
 * and pr, owns the emission) while there is room for it. */
static int probe_at(const cctx *x, pt_arena *a, const pt_problem *p, int g, const emission *base,
                    int64_t T, int64_t v, int64_t *P, int64_t (*G)[C_MAX_PTS], emission *pr,
                    int *n, bool *same, bool *kept, pt_err *e)
{
    *same = *kept = false;
    pt_problem q = with_group(x, a, p, g, v);
    emission m;
    int rc = emit_at(x, &q, &m, e);
    if (rc)
        return rc;
    *same = same_kernel(base, &m, T, v);
    *kept = *same && *n < C_MAX_PTS;
    if (*kept) {
        P[*n] = v;
        for (int j = 0; j < 3; j++)
            G[j][*n] = m.l.grid[j];
        pr[(*n)++] = m;
    } else
        emission_free(&m);
    return PT_OK;
}

int tuner_contract_json(const pt_op *op, const pt_problem *p, const pt_target *t, int max_ptx,
                        const pt_config *c, const pt_launch *l, pt_buf *out, pt_err *e)
{
    cctx x = {.op = op, .t = t, .max_ptx = max_ptx, .c = c};
    dims_of(&x, p);
    emission base;
    int rc = emit_at(&x, p, &base, e);
    if (rc)
        return rc;
    bool have = base.ok;
    gfit grid[3] = {{0}};
    int grid_group[3] = {-1, -1, -1};
    int arg_dim[24];
    for (int i = 0; i < 24; i++)
        arg_dim[i] = -1;
    uint64_t tensor_scales[2 * C_MAX_TENSORS] = {0}; /* bit g: scales with group g */
    int tmap_dim[8][5], tmap_stride[8][4]; /* the dim a map's dim / stride follows; -1 */
    for (int i = 0; i < 8; i++)
        for (int r = 0; r < 5; r++) {
            tmap_dim[i][r] = -1;
            if (r < 4)
                tmap_stride[i][r] = -1;
        }
    pt_arena *a = pt_arena_new();
    if (!a) {
        emission_free(&base);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    int ngroups = 0;
    for (int i = 0; i < x.nd; i++)
        if (x.d[i].group + 1 > ngroups)
            ngroups = x.d[i].group + 1;
    for (int g = 0; have && g < ngroups && g < 64 && !rc; g++) {
        int first = -1;
        for (int i = 0; i < x.nd; i++)
            if (x.d[i].group == g && first < 0)
                first = i;
        if (first < 0)
            continue;
        int64_t T = x.d[first].tuned;
        int64_t P[C_MAX_PTS], G[3][C_MAX_PTS];
        emission pr[C_MAX_PTS];
        int n = 0;
        P[n] = T;
        for (int k = 0; k < 3; k++)
            G[k][n] = base.l.grid[k];
        n++;
        int64_t lo = T, hi = T;
        /* down: T - 1, the first size of T's power-of-two bucket (B/2, B]
         * (the runtime's default buckets: a kernel laid out for its bucket,
         * e.g. a dyn=m split-K GEMM's workspace, serves it whole), T / 2, 1 */
        int64_t B = 1;
        while (B < T)
            B *= 2;
        int64_t down[4] = {T - 1, B / 2 + 1, T / 2, 1};
        for (int k = 0; k < 4 && !rc; k++) {
            int64_t v = down[k];
            if (v < 1 || v >= lo)
                continue;
            bool same, kept;
            if ((rc = probe_at(&x, a, p, g, &base, T, v, P, G, pr, &n, &same, &kept, e)))
                break;
            if (kept)
                lo = v;
            if (!same)
                break;
        }
        for (int64_t v = T + 1, step = 0; !rc && step < 8 && v <= INT32_MAX; step++) {
            bool same, kept;
            if ((rc = probe_at(&x, a, p, g, &base, T, v, P, G, pr, &n, &same, &kept, e)))
                break;
            if (kept)
                hi = v;
            if (!same)
                break;
            v = step == 0 ? 2 * T : v * (step < 3 ? 2 : 16);
        }
        if (rc) {
            for (int k = 1; k < n; k++)
                emission_free(&pr[k]);
            break;
        }
        /* the grid rule: mul among 1 and the other tuned sizes */
        int64_t cands[C_MAX_DIMS + 2];
        int nc = 0;
        cands[nc++] = 1;
        int64_t prod = 1;
        for (int i = 0; i < x.nd; i++)
            if (x.d[i].group != g && nc < C_MAX_DIMS + 1) {
                cands[nc++] = x.d[i].tuned;
                if (prod <= INT32_MAX)
                    prod *= x.d[i].tuned;
            }
        cands[nc++] = prod;
        gfit f[3];
        bool ok = n > 1;
        for (int k = 0; k < 3 && ok; k++) {
            ok = fit(P, G[k], n, cands, nc, &f[k]);
            if (ok && f[k].varies && grid_group[k] >= 0)
                ok = false; /* one dim per grid component */
        }
        if (ok) {
            for (int k = 0; k < 3; k++)
                if (f[k].varies) {
                    grid[k] = f[k];
                    grid_group[k] = first;
                }
            for (int i = 0; i < x.nd; i++)
                if (x.d[i].group == g) {
                    x.d[i].lo = lo;
                    x.d[i].hi = hi;
                }
            /* scalars that follow the dim, tensors that scale with it */
            for (int i = 0; i < base.l.nargs && i < 24; i++) {
                const pt_arg *u = &base.l.args[i];
                if ((u->kind == PT_ARG_U32 || u->kind == PT_ARG_U64) && u->u == (uint64_t)T &&
                    n > 1 && pr[1].l.args[i].u == (uint64_t)P[1])
                    arg_dim[i] = first;
            }
            for (int i = 0; i < base.nin + base.nout; i++) {
                int64_t n0 = i < base.nin ? base.in[i] : base.out[i - base.nin];
                int64_t n1 = i < base.nin ? pr[1].in[i] : pr[1].out[i - base.nin];
                if (n1 != n0)
                    tensor_scales[i] |= 1ull << g;
            }
            for (int i = 0; i < base.l.ntmaps && i < 8; i++)
                for (int r = 0; r < base.l.tmaps[i].rank && r < 5; r++) {
                    if (base.l.tmaps[i].dims[r] != pr[1].l.tmaps[i].dims[r])
                        tmap_dim[i][r] = first;
                    if (r < 4 && base.l.tmaps[i].strides[r] != pr[1].l.tmaps[i].strides[r])
                        tmap_stride[i][r] = first;
                }
        }
        for (int k = 1; k < n; k++)
            emission_free(&pr[k]);
    }
    pt_arena_free(a);
    if (rc) {
        emission_free(&base);
        return rc;
    }
    /* the JSON */
    /* version 2: a grid rule with an SM term or a factor (tuner/contract.h) */
    bool v2 = l->grid_per_sm != 0;
    for (int k = 0; k < 3; k++)
        v2 = v2 || (grid[k].varies && grid[k].times != 1);
    pt_buf_printf(out, "{\"v\":%d,\"entry\":", v2 ? 2 : 1);
    json_str(out, l->entry ? l->entry : "");
    bool cl = l->cluster[0] || l->cluster[1] || l->cluster[2];
    pt_buf_printf(out,
                  ",\"block\":[%u,%u,%u],\"smem\":%zu,\"smem_optin\":%s,\"cluster\":[%u,%u,%u]",
                  l->block[0], l->block[1], l->block[2], l->smem,
                  l->smem_optin || l->smem > (48u << 10) ? "true" : "false",
                  cl && l->cluster[0] ? l->cluster[0] : 1, cl && l->cluster[1] ? l->cluster[1] : 1,
                  cl && l->cluster[2] ? l->cluster[2] : 1);
    uint64_t ws = 0, scratch = 0;
    for (int i = 0; i < l->nargs; i++) {
        if (l->args[i].kind == PT_ARG_WORKSPACE)
            ws += l->args[i].u;
        if (l->args[i].kind == PT_ARG_SCRATCH)
            scratch += l->args[i].u;
    }
    pt_buf_printf(out,
                  ",\"align\":%d,\"workspace\":{\"bytes\":%llu,\"zero_fill\":\"once\","
                  "\"scratch_bytes\":%llu}",
                  l->align > 0 ? l->align : 16, (unsigned long long)ws,
                  (unsigned long long)scratch);
    pt_buf_puts(out, ",\"dims\":[");
    for (int i = 0; i < x.nd; i++) {
        pt_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        json_str(out, x.d[i].name);
        pt_buf_printf(out, ",\"tuned\":%lld,\"min\":%lld,\"max\":%lld,\"group\":%d}",
                      (long long)x.d[i].tuned, (long long)x.d[i].lo, (long long)x.d[i].hi,
                      x.d[i].group);
    }
    pt_buf_puts(out, "],\"grid\":[");
    for (int k = 0; k < 3; k++) {
        if (k)
            pt_buf_putc(out, ',');
        if (grid[k].varies)
            pt_buf_printf(out, "{\"dim\":%d,\"mul\":%lld,\"div\":%lld", grid_group[k],
                          (long long)grid[k].mul, (long long)grid[k].div);
        else
            pt_buf_printf(out, "{\"const\":%u", l->grid[k]);
        if (grid[k].varies && grid[k].times != 1)
            pt_buf_printf(out, ",\"times\":%lld", (long long)grid[k].times);
        if (k == 0 && l->grid_per_sm)
            pt_buf_printf(out, ",\"per_sm\":%u", l->grid_per_sm);
        pt_buf_putc(out, '}');
    }
    pt_buf_puts(out, "],\"args\":[");
    for (int i = 0; i < l->nargs; i++) {
        const pt_arg *u = &l->args[i];
        pt_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        json_str(out, have && i < base.nnames ? base.names[i] : "");
        pt_buf_printf(out, ",\"kind\":\"%s\"", kind_name(u->kind));
        if (u->kind == PT_ARG_INPUT || u->kind == PT_ARG_OUTPUT) {
            bool in = u->kind == PT_ARG_INPUT;
            int ti = u->index, slot = in ? ti : base.nin + ti;
            bool known = have && ti >= 0 && ti < (in ? base.nin : base.nout);
            pt_buf_printf(out, ",\"tensor\":%d", ti);
            if (known) {
                pt_buf_printf(out, ",\"dtype\":\"%s\",\"elements\":%lld,\"scales\":[",
                              pt_dtype_get(in ? base.in_dt[ti] : base.out_dt[ti])->name,
                              (long long)(in ? base.in[ti] : base.out[ti]));
                bool firstg = true;
                for (int d = 0; d < x.nd; d++) {
                    bool lead = true;
                    for (int d2 = 0; d2 < d; d2++)
                        if (x.d[d2].group == x.d[d].group)
                            lead = false;
                    if (lead && x.d[d].group < 64 && (tensor_scales[slot] >> x.d[d].group & 1)) {
                        pt_buf_printf(out, "%s%d", firstg ? "" : ",", d);
                        firstg = false;
                    }
                }
                pt_buf_putc(out, ']');
            }
        } else if (u->kind == PT_ARG_U32 || u->kind == PT_ARG_U64) {
            if (arg_dim[i] >= 0 && i < 24)
                pt_buf_printf(out, ",\"dim\":%d", arg_dim[i]);
            else
                pt_buf_printf(out, ",\"value\":%llu", (unsigned long long)u->u);
        } else if (u->kind == PT_ARG_F32 && isfinite(u->f))
            pt_buf_printf(out, ",\"value\":%.9g", (double)u->f);
        else if (u->kind == PT_ARG_F32)
            pt_buf_puts(out, ",\"value\":null");
        else if (u->kind == PT_ARG_WORKSPACE || u->kind == PT_ARG_SCRATCH)
            pt_buf_printf(out, ",\"bytes\":%llu", (unsigned long long)u->u);
        else if (u->kind == PT_ARG_TENSORMAP && u->index >= 0 && u->index < l->ntmaps) {
            /* the encode parameters; the pointer is the tensor's at launch */
            const pt_tmap *m = &l->tmaps[u->index];
            pt_buf_printf(out,
                          ",\"tmap\":{\"of\":\"%s\",\"tensor\":%d,\"offset\":%llu,\"dtype\":%d,"
                          "\"rank\":%d,\"dims\":[",
                          kind_name(m->of), m->index, (unsigned long long)m->offset, m->dtype,
                          m->rank);
            for (int r = 0; r < m->rank && r < 5; r++)
                pt_buf_printf(out, "%s%llu", r ? "," : "", (unsigned long long)m->dims[r]);
            pt_buf_puts(out, "],\"strides\":[");
            for (int r = 0; r + 1 < m->rank && r < 4; r++)
                pt_buf_printf(out, "%s%llu", r ? "," : "", (unsigned long long)m->strides[r]);
            /* the sizes dims and strides follow, when any does */
            bool scaled = false;
            for (int r = 0; u->index < 8 && r < m->rank && r < 5; r++)
                scaled = scaled || tmap_dim[u->index][r] >= 0 ||
                         (r < 4 && tmap_stride[u->index][r] >= 0);
            if (scaled) {
                pt_buf_puts(out, "],\"dims_scale\":[");
                for (int r = 0; r < m->rank && r < 5; r++)
                    pt_buf_printf(out, "%s%d", r ? "," : "", tmap_dim[u->index][r]);
                pt_buf_puts(out, "],\"strides_scale\":[");
                for (int r = 0; r + 1 < m->rank && r < 4; r++)
                    pt_buf_printf(out, "%s%d", r ? "," : "", tmap_stride[u->index][r]);
            }
            pt_buf_puts(out, "],\"box\":[");
            for (int r = 0; r < m->rank && r < 5; r++)
                pt_buf_printf(out, "%s%u", r ? "," : "", m->box[r]);
            pt_buf_printf(out, "],\"swizzle\":%d,\"oobfill\":%d,\"l2promo\":%d}", m->swizzle,
                          m->oobfill, m->l2promo);
        }
        pt_buf_putc(out, '}');
    }
    pt_buf_puts(out, "]}");
    emission_free(&base);
    return PT_OK;
}

int tuner_contract_cfg(const pt_op *op, const pt_prepared *pp, const pt_problem *p,
                       const pt_target *t, int max_ptx, const char *cfg, pt_buf *out, pt_err *e)
{
    pt_space sp;
    memset(&sp, 0, sizeof sp);
    op->space(pp, t, &sp);
    pt_config c;
    memset(&c, 0, sizeof c);
    int rc = pt_config_parse(&sp, cfg, &c, e);
    if (rc)
        return rc;
    ptx_module *m = NULL;
    pt_launch l;
    memset(&l, 0, sizeof l);
    rc = pt_op_build(op, pp, t, max_ptx, &c, &m, &l, e);
    if (!rc)
        rc = tuner_contract_json(op, p, t, max_ptx, &c, &l, out, e);
    ptx_module_free(m); /* l.entry lived in it */
    return rc;
}

int tuner_contract_row(const char *op, const char *problem_key, const char *arch, int max_ptx,
                       const char *cfg, pt_buf *out, pt_err *e)
{
    const pt_op *o = op ? pt_op_find(op) : NULL;
    if (!o)
        return pt_errf(e, PT_EINVAL, "unknown op '%s'", op ? op : "");
    pt_target t;
    int rc = pt_target_parse(arch, &t, e);
    if (rc)
        return rc;
    size_t n = strlen(op);
    if (strncmp(problem_key, op, n) != 0 || (problem_key[n] && problem_key[n] != ' '))
        return pt_errf(e, PT_EINVAL, "problem '%s' is not of op %s", problem_key, op);
    pt_arena *a = pt_arena_new();
    if (!a)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    search_problem sp;
    pt_prepared *pp = NULL;
    rc = search_problem_parse(a, op, problem_key + n, &sp, e);
    if (!rc)
        rc = o->prepare(a, &sp.prob, &t, &pp, e);
    if (!rc)
        rc = tuner_contract_cfg(o, pp, &sp.prob, &t, max_ptx, cfg, out, e);
    pt_arena_free(a);
    return rc;
}
