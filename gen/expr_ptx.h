/* f32 PTX for the elementwise nodes of a gen/expr program: one lowering per
 * node kind, shared by every generator that evaluates expressions (the GEMM
 * epilogue and the elementwise family).
 *
 * Math is f32 with accurate forms where `.approx` is too coarse for f32
 * tolerances: tanh by exp + polynomial, erf by Abramowitz-Stegun 7.1.26,
 * rsqrt as rcp.rn(sqrt.rn), division div.rn. The meaning of each node is
 * the one gen/expr.h documents for ex_reference(). */
#ifndef PT_EXPR_PTX_H
#define PT_EXPR_PTX_H

#include "gen/expr.h"
#include "ptx/ir.h"

/* Emits node n (not INPUT, not a reduction) from its argument values (f32
 * registers or f32 immediates) and returns its value. An unsupported kind
 * sets the module's sticky error. */
ptx_opd ex_ptx_node(ptx_fn *f, const ex_node *n, const ptx_opd *args);

/* e^x as 2^(x * log2 e): mul + ex2.approx.ftz (relative error ~2^-22). */
ptx_reg ex_ptx_exp(ptx_fn *f, ptx_opd x);

/* x rounded through storage dtype dt, as cast() does: f16, bf16, tf32,
 * e4m3, e5m2 (sm_89: ex_check_target) by their cvt; the integer types by
 * cvt.rni.sat (nearest even, saturated to the type's range, NaN -> 0) and
 * back to f32; f32 and f64 return x unchanged. */
ptx_reg ex_ptx_cast(ptx_fn *f, ptx_opd x, pt_dtype dt);

#endif
