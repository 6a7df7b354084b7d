/* The GEMM family (op "gemm"): D[b] = epilogue(A[b] * B[b]) on sm_80..sm_89
 * tensor cores (mma.sync) or f32 SIMT, see gen/gemm.c for the kernel. */
#ifndef GEN_GEMM_H
#define GEN_GEMM_H

#include "gen/op.h"

extern const pt_op gen_gemm_op;

/* A GEMM problem for tables of cases: alpha 1, beta 0, packed leading
 * dimensions, row-major D, no epilogue; dt inputs, odt output (PT_F64: the
 * dtype's default output, see gen/gemm.c). */
#define PT_GEMM(M, N, K, lay, dt, odt)                                                    \
    {.op = "gemm", .m = (M), .n = (N), .k = (K), .layout = (lay), .dtype = (dt),          \
     .out_dtype = (odt), .alpha = 1.0}

#endif
