/* Op registry, configurations, parameter spaces and the problem schema
 * engine (values of one key, generic over ops; the tables are gen/<op>_schema.c). */
#include "gen/op.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const pt_op gen_gemm_op;      /* gen/gemm.c */
extern const pt_op gen_attention_op; /* gen/attention.c */
static const pt_op *const all_ops[] = {&gen_elementwise_op, &gen_gemm_op, &gen_attention_op};

int pt_op_list(const pt_op *const **out)
{
    *out = all_ops;
    return (int)(sizeof all_ops / sizeof all_ops[0]);
}

const pt_op *pt_op_find(const char *name)
{
    for (size_t i = 0; i < sizeof all_ops / sizeof all_ops[0]; i++)
        if (strcmp(all_ops[i]->name, name) == 0)
            return all_ops[i];
    return NULL;
}

unsigned pt_launch_grid_x(const pt_launch *l, int sms)
{
    return (unsigned)pt_grid_cap(l->grid[0], l->grid_per_sm, sms, l->cluster[0]);
}

int64_t pt_config_get(const pt_config *c, const char *name, int64_t def)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->name[i], name) == 0)
            return c->value[i];
    return def;
}

void pt_config_set(pt_config *c, const char *name, int64_t v)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->name[i], name) == 0) {
            c->value[i] = v;
            return;
        }
    if (c->n < PT_MAX_PARAMS) {
        c->name[c->n] = name;
        c->value[c->n++] = v;
    }
}

const char *pt_config_str(const pt_config *c, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s=%" PRId64, i ? "," : "", c->name[i],
                                c->value[i]);
    return buf;
}

int pt_config_parse(const pt_space *s, const char *spec, pt_config *c, pt_err *e)
{
    const char *p = spec;
    uint32_t seen = 0;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (!eq || eq > end)
            return pt_errf(e, PT_EINVAL, "bad config item '%.*s' (expected key=value)",
                           (int)(end - p), p);
        size_t klen = (size_t)(eq - p);
        int k = -1;
        for (int i = 0; i < s->nparams; i++)
            if (strlen(s->p[i].name) == klen && strncmp(s->p[i].name, p, klen) == 0)
                k = i;
        if (k < 0) {
            char names[256] = "";
            size_t len = 0;
            for (int i = 0; i < s->nparams && len < sizeof names; i++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? " " : "",
                                        s->p[i].name);
            return pt_errf(e, PT_EINVAL, "unknown config key '%.*s' (parameters: %s)", (int)klen,
                           p, names);
        }
        if (seen & 1u << k)
            return pt_errf(e, PT_EINVAL, "config key '%s' given twice", s->p[k].name);
        seen |= 1u << k;
        char *vend;
        errno = 0;
        long long v = strtoll(eq + 1, &vend, 0);
        if (vend != end || eq + 1 == end || errno)
            return pt_errf(e, PT_EINVAL, "bad value '%.*s' for config key '%s'",
                           (int)(end - eq - 1), eq + 1, s->p[k].name);
        /* a parameter whose values are {0, 1} is a flag: another value
         * (online=2) would make a kernel that duplicates the one for 1.
         * Other parameters may take values beyond the search space (a GEMM
         * tile the space leaves out); the op's check judges those. */
        const pt_param_space *ps = &s->p[k];
        bool has0 = false, has1 = false, flag = ps->nvalues == 2;
        for (int i = 0; i < ps->nvalues; i++) {
            has0 |= ps->values[i] == 0;
            has1 |= ps->values[i] == 1;
        }
        if (flag && has0 && has1 && v != 0 && v != 1)
            return pt_errf(e, PT_EINVAL, "config %s=%lld: %s is a flag (0 or 1)", ps->name, v,
                           ps->name);
        pt_config_set(c, ps->name, v);
        p = end;
    }
    return PT_OK;
}

void pt_space_default(const pt_space *s,
                      int (*check)(const pt_prepared *, const pt_target *, const pt_config *, pt_err *),
                      const pt_prepared *pp, const pt_target *t, pt_config *c)
{
    pt_err e = {0};
    if (check(pp, t, c, &e) == PT_OK)
        return;
    for (int64_t i = 0; i < pt_space_size(s); i++) {
        pt_config k;
        pt_space_config(s, i, &k);
        pt_err ke = {0};
        if (check(pp, t, &k, &ke) == PT_OK) {
            *c = k;
            return;
        }
    }
}

int64_t pt_space_size(const pt_space *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->nparams; i++)
        n *= s->p[i].nvalues;
    return n;
}

void pt_space_config(const pt_space *s, int64_t idx, pt_config *c)
{
    c->n = 0;
    int64_t rest = idx;
    int64_t vals[PT_MAX_PARAMS];
    for (int i = s->nparams - 1; i >= 0; i--) {
        vals[i] = s->p[i].values[rest % s->p[i].nvalues];
        rest /= s->p[i].nvalues;
    }
    for (int i = 0; i < s->nparams; i++)
        pt_config_set(c, s->p[i].name, vals[i]);
}

/* The emission proper, with the module arena's recovery point here (see
 * pt_arena_catch): only the parameters are read after a jump. */
static int emit_guarded(const pt_op *op, const pt_prepared *pp, const pt_config *c, ptx_module *m,
                        pt_launch *l, pt_err *e)
{
    jmp_buf jb;
    if (setjmp(jb)) {
        pt_arena_catch(m->arena, NULL);
        return pt_errf(e, PT_ENOMEM, "%s: out of memory while emitting (%zu bytes held)", op->name,
                       pt_arena_size(m->arena));
    }
    pt_arena_catch(m->arena, &jb);
    int rc = op->emit(pp, c, m, l, e);
    if (!rc)
        rc = ptx_module_finish(m);
    pt_arena_catch(m->arena, NULL);
    return rc;
}

int pt_op_emit(const pt_op *op, const pt_prepared *pp, const pt_config *c, ptx_module *m,
               pt_launch *l, pt_err *e)
{
    memset(l, 0, sizeof *l);
    return emit_guarded(op, pp, c, m, l, e);
}

int pt_op_build(const pt_op *op, const pt_prepared *pp, const pt_target *t, int max_ptx,
                const pt_config *c, ptx_module **mout, pt_launch *l, pt_err *e)
{
    return pt_op_build_cached(op, pp, t, max_ptx, NULL, c, mout, l, e);
}

int pt_op_build_cached(const pt_op *op, const pt_prepared *pp, const pt_target *t, int max_ptx, ptx_sigcache *cache,
                       const pt_config *c, ptx_module **mout, pt_launch *l, pt_err *e)
{
    *mout = NULL;
    int rc = op->check(pp, t, c, e);
    if (rc)
        return rc;
    ptx_module *m = ptx_module_new_cached(t, max_ptx, cache);
    if (!m)
        return pt_errf(e, PT_ENOMEM, "%s: out of memory", op->name);
    rc = pt_op_emit(op, pp, c, m, l, e);
    if (rc) {
        if (m->err.code)
            pt_errf(e, m->err.code, "%s", m->err.msg);
        ptx_module_free(m);
        return rc;
    }
    *mout = m;
    return PT_OK;
}

int pt_problem_out_scale(const pt_problem *pb, pt_dtype out_dt, float *scale, pt_err *e)
{
    if (!pb->has_out_scale)
        return PT_OK; /* *scale keeps the op's default, 1 */
    if (!isfinite(pb->out_scale) || isinf((float)pb->out_scale))
        return pt_errf(e, PT_EINVAL, "out_scale=%g: must be a finite f32 number", pb->out_scale);
    if (out_dt != PT_E4M3 && out_dt != PT_E5M2)
        return pt_errf(e, PT_EINVAL, "out_scale applies to fp8 outputs (e4m3, e5m2) only");
    *scale = (float)pb->out_scale;
    return PT_OK;
}

/* ---- the problem schema (gen/op.h) ---- */

const char *pt_key_type_name(pt_key_type t)
{
    static const char *const names[PT_KEY_NTYPES] = {"int",   "real",  "bool", "enum",
                                                     "dtype", "expr", "shapes"};
    return t < PT_KEY_NTYPES ? names[t] : "?";
}

const pt_key *pt_schema_find(const pt_schema *s, const char *name, size_t len)
{
    for (int i = 0; s && i < s->nkeys; i++)
        if (strlen(s->keys[i].name) == len && strncmp(s->keys[i].name, name, len) == 0)
            return &s->keys[i];
    return NULL;
}

const char *pt_schema_names(const pt_schema *s, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; s && i < s->nkeys && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? " " : "", s->keys[i].name);
    return buf;
}

static void *member(pt_problem *p, const pt_key *k) { return (char *)p + k->off; }
static const void *cmember(const pt_problem *p, const pt_key *k)
{
    return (const char *)p + k->off;
}
static bool given(const pt_key *k, const pt_problem *p)
{
    return k->given && *(const bool *)((const char *)p + k->given);
}

/* Whether v is one of the blank-separated words of list. */
static bool in_list(const char *list, const char *v)
{
    size_t n = strlen(v);
    for (const char *s = list; *s;) {
        size_t w = strcspn(s, " ");
        if (w == n && n && strncmp(s, v, n) == 0)
            return true;
        s += w;
        s += strspn(s, " ");
    }
    return false;
}

/* "nn nt tn tt" -> "nn, nt, tn or tt" */
static void list_words(const char *list, char *buf, size_t n)
{
    size_t len = 0, words = 0, total = 0;
    for (const char *s = list; *s; s += strspn(s, " ")) {
        s += strcspn(s, " ");
        total++;
    }
    buf[0] = '\0';
    for (const char *s = list; *s && len < n;) {
        size_t w = strcspn(s, " ");
        words++;
        len += (size_t)snprintf(buf + len, n - len, "%s%.*s",
                                words == 1 ? "" : words == total ? " or " : ", ", (int)w, s);
        s += w;
        s += strspn(s, " ");
    }
}

int pt_key_set(pt_arena *a, const pt_key *k, pt_problem *p, const char *v, bool zero_ok,
               pt_err *e)
{
    void *dst = member(p, k);
    char *end;
    switch (k->type) {
    case PT_KEY_EXPR:
    case PT_KEY_SHAPES:
        *(const char **)dst = pt_arena_strdup(a, v);
        break;
    case PT_KEY_ENUM:
        if (!in_list(k->values, v)) {
            char vals[256];
            list_words(k->values, vals, sizeof vals);
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (%s)", v, k->name, vals);
        }
        *(const char **)dst = pt_arena_strdup(a, v);
        break;
    case PT_KEY_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        bool bad = *end || end == v || errno || isspace((unsigned char)*v);
        if (!bad && !(zero_ok && x == 0) && (double)x < k->min) {
            if (k->min == 1)
                bad = true; /* the common case keeps its words */
            else
                return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (an integer >= %lld)", v,
                               k->name, (long long)k->min);
        }
        if (bad) {
            if (k->min == 1)
                return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (a positive integer)", v,
                               k->name);
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (an integer >= %lld)", v,
                           k->name, (long long)k->min);
        }
        *(int64_t *)dst = x;
        break;
    }
    case PT_KEY_DTYPE: {
        int rc = pt_dtype_parse(v, (pt_dtype *)dst, e);
        if (rc)
            return rc;
        break;
    }
    case PT_KEY_BOOL:
        if (strcmp(v, "0") && strcmp(v, "1"))
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (0 or 1)", v, k->name);
        *(bool *)dst = v[0] == '1';
        break;
    case PT_KEY_REAL: {
        errno = 0;
        double x = strtod(v, &end);
        bool low = (k->flags & PT_KEY_MIN) && x < k->min;
        bool junk = *end || end == v || isspace((unsigned char)*v);
        if (!junk && (errno || !isfinite(x) || low)) { /* 1e400, nan, inf */
            if (k->flags & PT_KEY_MIN)
                return pt_errf(e, PT_EINVAL, "%s=%s: must be a finite number >= %g", k->name, v,
                               k->min);
            return pt_errf(e, PT_EINVAL, "%s=%s: must be a finite number", k->name, v);
        }
        if (junk)
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (a number)", v, k->name);
        *(double *)dst = x;
        break;
    }
    case PT_KEY_NTYPES:
        return pt_errf(e, PT_EINVAL, "key %s has no type", k->name);
    }
    if (k->given)
        *(bool *)((char *)p + k->given) = true;
    return PT_OK;
}

void pt_schema_defaults(const pt_op *op, pt_problem *p)
{
    memset(p, 0, sizeof *p);
    p->op = op->name;
    const pt_schema *s = op->schema;
    for (int i = 0; s && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        if (!k->def || k->def[0] == '=')
            continue;
        pt_err e = {0};
        /* constants of the table: the literals need no arena (a default
         * string is the table's own) */
        if (k->type == PT_KEY_EXPR || k->type == PT_KEY_SHAPES || k->type == PT_KEY_ENUM)
            *(const char **)member(p, k) = k->def;
        else
            pt_key_set(NULL, k, p, k->def, false, &e);
        if (k->given)
            *(bool *)((char *)p + k->given) = false;
    }
}

/* "a", "a and b", "a, b and c" */
static void required_list(const pt_schema *s, char *buf, size_t n)
{
    int total = 0, seen = 0;
    for (int i = 0; i < s->nkeys; i++)
        total += (s->keys[i].flags & PT_KEY_REQUIRED) != 0;
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->nkeys && len < n; i++)
        if (s->keys[i].flags & PT_KEY_REQUIRED) {
            seen++;
            len += (size_t)snprintf(buf + len, n - len, "%s%s",
                                    seen == 1 ? "" : seen == total ? " and " : ", ",
                                    s->keys[i].name);
        }
}

int pt_schema_finish(const pt_op *op, pt_problem *p, const bool *gv, bool partial, pt_err *e)
{
    const pt_schema *s = op->schema;
    for (int i = 0; s && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        if (gv[i] || !k->def || k->def[0] != '=')
            continue;
        const pt_key *src = pt_schema_find(s, k->def + 1, strlen(k->def + 1));
        if (src && src->type == k->type)
            memcpy(member(p, k), cmember(p, src),
                   k->type == PT_KEY_DTYPE ? sizeof(pt_dtype) : sizeof(void *));
    }
    for (int i = 0; s && !partial && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        /* an empty string value (`shape=`) is as missing as an absent one */
        bool text = k->type == PT_KEY_EXPR || k->type == PT_KEY_SHAPES || k->type == PT_KEY_ENUM;
        if ((k->flags & PT_KEY_REQUIRED) && (!gv[i] || text) && pt_key_unset(k, p)) {
            char req[256];
            required_list(s, req, sizeof req);
            return pt_errf(e, PT_EINVAL, "missing %s=... (%s needs %s)", k->name, op->name, req);
        }
    }
    return PT_OK;
}

bool pt_key_unset(const pt_key *k, const pt_problem *p)
{
    const void *v = cmember(p, k);
    if (given(k, p))
        return false;
    switch (k->type) {
    case PT_KEY_EXPR:
    case PT_KEY_SHAPES:
    case PT_KEY_ENUM:
        return !*(const char *const *)v || !**(const char *const *)v;
    case PT_KEY_DTYPE:
        return *(const pt_dtype *)v == PT_F64;
    case PT_KEY_BOOL:
        return !*(const bool *)v;
    case PT_KEY_INT:
        return *(const int64_t *)v == 0 && (k->min > 0 || k->given);
    case PT_KEY_REAL:
        return *(const double *)v == 0.0 && k->given;
    case PT_KEY_NTYPES:
        break;
    }
    return true;
}

/* k's value in p equals k2's in p2 (k and k2 of one type). */
static bool same_value(const pt_key *k, const pt_problem *p, const pt_key *k2, const pt_problem *p2)
{
    const void *v = cmember(p, k), *w = cmember(p2, k2);
    switch (k->type) {
    case PT_KEY_EXPR:
    case PT_KEY_SHAPES:
    case PT_KEY_ENUM: {
        const char *a = *(const char *const *)v, *b = *(const char *const *)w;
        return strcmp(a ? a : "", b ? b : "") == 0;
    }
    case PT_KEY_DTYPE:
        return *(const pt_dtype *)v == *(const pt_dtype *)w;
    case PT_KEY_BOOL:
        return *(const bool *)v == *(const bool *)w;
    case PT_KEY_INT:
        return *(const int64_t *)v == *(const int64_t *)w;
    case PT_KEY_REAL:
        return *(const double *)v == *(const double *)w;
    case PT_KEY_NTYPES:
        break;
    }
    return false;
}

/* The default of k as a problem whose k member holds it. */
static void default_of(const pt_key *k, pt_problem *d)
{
    memset(d, 0, sizeof *d);
    if (k->type == PT_KEY_EXPR || k->type == PT_KEY_SHAPES || k->type == PT_KEY_ENUM)
        *(const char **)member(d, k) = k->def;
    else {
        pt_err e = {0};
        pt_key_set(NULL, k, d, k->def, false, &e);
    }
}

bool pt_key_is_default(const pt_key *k, const pt_problem *p)
{
    if (pt_key_unset(k, p))
        return true;
    if (k->is_default)
        return k->is_default(p);
    if (!k->def)
        return false;
    if (k->def[0] == '=') { /* the value of another key of the op */
        const pt_op *op = p->op ? pt_op_find(p->op) : NULL;
        const pt_key *src =
            op ? pt_schema_find(op->schema, k->def + 1, strlen(k->def + 1)) : NULL;
        return src && src->type == k->type && same_value(k, p, src, p);
    }
    pt_problem d;
    default_of(k, &d);
    return same_value(k, p, k, &d);
}

void pt_key_value(const pt_key *k, const pt_problem *p, pt_buf *b)
{
    const void *v = cmember(p, k);
    switch (k->type) {
    case PT_KEY_EXPR:
    case PT_KEY_SHAPES:
    case PT_KEY_ENUM: {
        const char *s = *(const char *const *)v;
        pt_buf_puts(b, s ? s : "");
        break;
    }
    case PT_KEY_DTYPE:
        pt_buf_puts(b, pt_dtype_get(*(const pt_dtype *)v)->name);
        break;
    case PT_KEY_BOOL:
        pt_buf_puts(b, *(const bool *)v ? "1" : "0");
        break;
    case PT_KEY_INT:
        pt_buf_printf(b, "%lld", (long long)*(const int64_t *)v);
        break;
    case PT_KEY_REAL:
        pt_buf_printf(b, "%.17g", *(const double *)v);
        break;
    case PT_KEY_NTYPES:
        break;
    }
}

int64_t pt_key_int(const pt_key *k, const pt_problem *p)
{
    if (k->type != PT_KEY_INT)
        return 0;
    if (pt_key_unset(k, p)) {
        if (!k->def || k->def[0] == '=')
            return 0;
        pt_problem d;
        default_of(k, &d);
        return *(const int64_t *)cmember(&d, k);
    }
    return *(const int64_t *)cmember(p, k);
}

bool pt_problem_mnk(const pt_problem *p, double mnk[3])
{
    mnk[0] = mnk[1] = mnk[2] = 0;
    const pt_op *op = p->op ? pt_op_find(p->op) : NULL;
    const pt_schema *s = op ? op->schema : NULL;
    double batch = 1;
    unsigned roles = 0;
    for (int i = 0; s && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        double v = (double)pt_key_int(k, p);
        if (k->flags & PT_KEY_ROLE_M)
            mnk[0] = v;
        if (k->flags & PT_KEY_ROLE_N)
            mnk[1] = v;
        if (k->flags & PT_KEY_ROLE_K)
            mnk[2] = v;
        if ((k->flags & PT_KEY_ROLE_BATCH) && v > 1)
            batch = v;
        roles |= k->flags & (PT_KEY_ROLE_M | PT_KEY_ROLE_N | PT_KEY_ROLE_K);
    }
    if (roles != (PT_KEY_ROLE_M | PT_KEY_ROLE_N | PT_KEY_ROLE_K)) {
        mnk[0] = mnk[1] = mnk[2] = 0;
        return false;
    }
    mnk[2] *= batch;
    return true;
}

bool pt_problem_tensor_math(const pt_problem *p)
{
    const pt_op *op = p->op ? pt_op_find(p->op) : NULL;
    return op && op->schema && (op->schema->flags & PT_OP_TENSOR) && p->dtype != PT_F32;
}
