/* The elementwise op's problem keys (gen/op.h: pt_schema). The order is the
 * canonical key's: changing it, a default or a name changes stored keys. */
#include <stddef.h>

#include "gen/op.h"

#define M(x) offsetof(pt_problem, x)
static const pt_key keys[] = {
    {"expr", PT_KEY_EXPR, PT_KEY_REQUIRED, M(expr), 0, NULL, NULL, 0, NULL,
     "statements 'y = f(x, ...)'; every assigned name an output (gen/expr.h)"},
    {"shape", PT_KEY_SHAPES, PT_KEY_REQUIRED | PT_KEY_SHAPE, M(shapes), 0, NULL, NULL, 0, NULL,
     "input shapes x=RxC,w=C,... (numpy broadcasting; the last dim is the row)"},
    {"dtype", PT_KEY_DTYPE, PT_KEY_ALWAYS, M(dtype), 0, "f32", NULL, 0, NULL,
     "storage of inputs and outputs: f32 f16 bf16 (math in f32)"},
    {"out_dtype", PT_KEY_DTYPE, 0, M(out_dtype), 0, "=dtype", NULL, 0, NULL,
     "outputs: f32 f16 bf16, or e4m3 e5m2 (sm_89) times out_scale"},
    {"out_scale", PT_KEY_REAL, 0, M(out_scale), M(has_out_scale), "1", NULL, 0, NULL,
     "fp8 outputs hold value * out_scale"},
};
#undef M

const pt_schema gen_elementwise_schema = {
    .nkeys = (int)(sizeof keys / sizeof keys[0]),
    .keys = keys,
    .flags = 0,
};
