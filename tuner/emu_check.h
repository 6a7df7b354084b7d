/* Proving a generated kernel on the CPU: emit -> print -> parse (the text is
 * what runs) -> emulate with random inputs and poisoned outputs, every
 * detector on -> compare with the op's float64 reference.
 *
 * Error metric, per output element: |got - ref| / max(|ref|, floor), with
 * floor = 1e-2 * max|ref| over that output: f32 arithmetic errors scale
 * with the operands, so an element that cancels to near zero is judged
 * against the tensor's magnitude. Tolerances by the output's storage dtype:
 * f32 1e-5, tf32 5e-4, f16/bf16 1e-2. fp8 outputs are judged in units of
 * the format's spacing at the reference value (after saturation): within
 * one step (the f32 math may land on either side of a rounding boundary).
 */
#ifndef PT_EMU_CHECK_H
#define PT_EMU_CHECK_H

#include "gen/op.h"

typedef struct pt_check_opts {
    uint64_t seed;   /* input values; fixed seeds make failures repeatable */
    int threads;     /* emulator threads across CTAs (0: serial) */
    double lo, hi;   /* input range; 0,0: [-2, 2] */
} pt_check_opts;

typedef struct pt_check_result {
    int64_t checked;         /* output elements compared */
    int64_t bad;             /* over tolerance */
    double max_err;          /* worst error (metric above) */
    double tol;              /* tolerance applied (the strictest output's) */
    char worst[256];         /* where the worst error is: output, index, got, want */
    uint64_t lane_instructions;
    double emu_seconds;
} pt_check_result;

/* Tolerance for an output stored as dt. */
double pt_check_tolerance(pt_dtype dt);

/* Runs one config of a prepared problem on the emulator and compares.
 * Returns PT_OK when the kernel ran cleanly (no detector report) and every
 * element is within tolerance; PT_EEMU with the first detector report, or
 * PT_ERANGE naming the worst element, otherwise. */
int pt_check_emu(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c,
                 const pt_check_opts *o, pt_check_result *r, pt_err *e);

#endif
