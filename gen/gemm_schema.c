/* The GEMM's problem keys (gen/op.h: pt_schema). The order is the canonical
 * key's: changing it, a default or a name changes stored problem keys. */
#include <stddef.h>

#include "gen/op.h"

/* The output dtype's default is the op's choice by input dtype (f32 for
 * tf32, s32 for s8/u8, bf16 for e4m3/e5m2, else the input dtype; gen/gemm.c
 * resolves it): the key leaves it out when unset or equal to the input
 * dtype, except for fp8 inputs, whose default output is not fp8. */
static bool out_dtype_default(const pt_problem *p)
{
    if (p->out_dtype == PT_F64)
        return true;
    return p->out_dtype == p->dtype && p->dtype != PT_E4M3 && p->dtype != PT_E5M2;
}

#define M(x) offsetof(pt_problem, x)
static const pt_key keys[] = {
    {"m", PT_KEY_INT, PT_KEY_REQUIRED | PT_KEY_SHAPE | PT_KEY_ROLE_M, M(m), 0, NULL, NULL, 1, NULL,
     "rows of D (and of A as written)"},
    {"n", PT_KEY_INT, PT_KEY_REQUIRED | PT_KEY_SHAPE | PT_KEY_ROLE_N, M(n), 0, NULL, NULL, 1, NULL,
     "columns of D (and of B as written)"},
    {"k", PT_KEY_INT, PT_KEY_REQUIRED | PT_KEY_SHAPE | PT_KEY_ROLE_K, M(k), 0, NULL, NULL, 1, NULL,
     "the reduction dimension"},
    {"batch", PT_KEY_INT, PT_KEY_SHAPE | PT_KEY_ROLE_BATCH, M(batch), 0, "1", NULL, 1, NULL,
     "problems packed one after another (grid z, at most 65535)"},
    {"dyn", PT_KEY_ENUM, 0, M(dyn), 0, "none", "none m", 0, NULL,
     "sizes read at run time: m (M is a u32 kernel parameter: rows predicated, grid x ceil(M/bm); "
     "docs/runtime.md)"},
    {"layout", PT_KEY_ENUM, 0, M(layout), 0, "nn", "nn nt tn tt", 0, NULL,
     "A then B, row-major: n as written (A MxK, B KxN), t stored transposed"},
    {"dtype", PT_KEY_DTYPE, PT_KEY_ALWAYS, M(dtype), 0, "f32", NULL, 0, NULL,
     "inputs: f32 (SIMT) tf32 f16 bf16 s8 u8 (nt) e4m3 e5m2 (sm_89, nt)"},
    {"out_dtype", PT_KEY_DTYPE, 0, M(out_dtype), 0, NULL, NULL, 0, out_dtype_default,
     "D: f32 f16 bf16 e4m3 e5m2 (int8: s32 f32 f16 bf16); default by dtype: tf32 f32, "
     "s8/u8 s32, fp8 bf16, else dtype"},
    {"epilogue", PT_KEY_EXPR, 0, M(epilogue), 0, NULL, NULL, 0, NULL,
     "D = f(acc, alpha, beta, c, name[n], name[m], tensors); default alpha * acc + beta * c"},
    {"alpha", PT_KEY_REAL, 0, M(alpha), 0, "1", NULL, 0, NULL, "run-time scale of acc"},
    {"beta", PT_KEY_REAL, 0, M(beta), 0, "0", NULL, 0, NULL,
     "run-time scale of C (C is read only when beta != 0)"},
    {"d_colmajor", PT_KEY_BOOL, 0, M(d_colmajor), 0, "0", NULL, 0, NULL,
     "D (and C) stored column-major"},
    {"lda", PT_KEY_INT, 0, M(lda), 0, NULL, NULL, 1, NULL, "leading dimension of A (default packed)"},
    {"ldb", PT_KEY_INT, 0, M(ldb), 0, NULL, NULL, 1, NULL, "leading dimension of B (default packed)"},
    {"ldc", PT_KEY_INT, 0, M(ldc), 0, NULL, NULL, 1, NULL, "leading dimension of C (default packed)"},
    {"ldd", PT_KEY_INT, 0, M(ldd), 0, NULL, NULL, 1, NULL, "leading dimension of D (default packed)"},
    {"scale_a", PT_KEY_REAL, PT_KEY_MIN, M(scale_a), M(has_scale_a), "1", NULL, 0, NULL,
     "fp8/int8 inputs: acc = scale_a * scale_b * A * B"},
    {"scale_b", PT_KEY_REAL, PT_KEY_MIN, M(scale_b), M(has_scale_b), "1", NULL, 0, NULL,
     "fp8/int8 inputs: see scale_a"},
    {"out_scale", PT_KEY_REAL, 0, M(out_scale), M(has_out_scale), "1", NULL, 0, NULL,
     "fp8 outputs hold value * out_scale"},
};
#undef M

const pt_schema gen_gemm_schema = {
    .nkeys = (int)(sizeof keys / sizeof keys[0]),
    .keys = keys,
    .flags = PT_OP_TENSOR,
};
