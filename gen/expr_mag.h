/* Accumulation magnitudes of an expression program, for the verifier's
 * error model (pt_op.magnitude, tuner/verify.h).
 *
 * Every node carries, next to its float64 value v, a magnitude m: the
 * first-order bound on how far the node moves when every rounded
 * accumulation below it (the row reductions, and the caller's accumulated
 * inputs such as a GEMM's acc) is off by u times the sum of the absolute
 * values of its terms. An error of u*m in a node's value is what f32 sums
 * with unit roundoff u produce at worst-case first order (the length factor
 * of the sums is the verifier's, not this file's). The rules:
 *   INPUT      in_mag of the input (NULL: 0, an exact input), CONST 0
 *   ADD SUB    ma + mb                  MUL   |b| ma + |a| mb
 *   DIV        (ma + |v| mb) / |b|      NEG ABS CAST   ma
 *   MIN MAX    max(ma, mb)              comparisons    0 (piecewise constant)
 *   WHERE      the chosen arm's m       RELU           a > 0 ? ma : 0
 *   EXP EXP2 LOG SQRT RSQRT TANH SIGMOID GELU GELU_ERF SILU   |f'(a)| ma
 *   RSUM       sum_j (|a_j| + ma_j): the sum's own rounding (its terms'
 *              absolute values) plus what its terms carry; RMEAN the same / cols
 *   RMAX       max_j ma_j (a max rounds nothing)
 *   RSUMEXP    sum_j e_j (1 + ma_j + mb), e_j = exp(a_j - b) > 0
 * A factor that is 0 wins over an infinite magnitude (a masked softmax
 * entry, exp(-inf) = 0, carries nothing). Non-finite values give
 * non-finite magnitudes, which the verifier ignores. */
#ifndef PT_EXPR_MAG_H
#define PT_EXPR_MAG_H

#include "gen/expr.h"

/* inputs, outputs as for ex_reference (contiguous in their own shapes);
 * in_mag[i]: input i's magnitudes in the same layout, or NULL (in_mag
 * itself may be NULL: every input exact); out_mag[k]: room for output k.
 * The values come from ex_reference itself (one row at a time), so the
 * magnitudes sit on exactly the reference's values. Needs ex_bind. */
int ex_magnitude(const ex_prog *p, const double *const *inputs, const double *const *in_mag,
                 double **out_mag, pt_err *e);

#endif
