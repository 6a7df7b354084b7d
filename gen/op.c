/* Op registry, configurations and parameter spaces. */
#include "gen/op.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const pt_op gen_gemm_op; /* gen/gemm.c */
static const pt_op *const all_ops[] = {&gen_elementwise_op, &gen_gemm_op};

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

int pt_op_build(const pt_op *op, const pt_prepared *pp, const pt_target *t, int max_ptx,
                const pt_config *c, ptx_module **mout, pt_launch *l, pt_err *e)
{
    *mout = NULL;
    int rc = op->check(pp, t, c, e);
    if (rc)
        return rc;
    ptx_module *m = ptx_module_new(t, max_ptx);
    memset(l, 0, sizeof *l);
    rc = op->emit(pp, c, m, l, e);
    if (!rc)
        rc = ptx_module_finish(m);
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
