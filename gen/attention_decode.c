/* The attention decode kernel (see gen/attention_int.h). Not written yet:
 * every entry point refuses, so the op can be registered meanwhile. */
#include "gen/attention_int.h"

int attn_decode_space(const pt_prepared *pp, const pt_target *t, pt_space *out)
{
    (void)pp;
    (void)t;
    *out = (pt_space){0};
    return PT_OK;
}

void attn_decode_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out)
{
    (void)pp;
    (void)t;
    *out = (pt_config){0};
}

int attn_decode_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    (void)pp;
    (void)t;
    (void)c;
    return pt_errf(e, PT_EUNSUPPORTED, "attention decode kernel: not implemented yet");
}

int attn_decode_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l,
                      pt_err *e)
{
    (void)pp;
    (void)c;
    (void)m;
    (void)l;
    return pt_errf(e, PT_EUNSUPPORTED, "attention decode kernel: not implemented yet");
}
