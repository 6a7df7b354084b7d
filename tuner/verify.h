/* Verification on any backend (cuda, emu, mock): is this kernel right?
 *
 * A verify run: inputs random (or given; the op's structured inputs where
 * it has them, pt_op.init_inputs) and checked by the op (check_inputs)
 * before they are written, stored in their dtypes, and the reference sees
 * exactly the stored values; outputs poisoned (0xFF bytes:
 * a NaN in every float format) so an element the kernel never writes
 * cannot pass; a guard zone of the backend's size (4 KB on cuda, 1 KB on
 * the mock, none on the emulator, whose detector sees every out-of-bounds
 * access) before and after every buffer, filled with 0xA5. After the run:
 * guard zones unchanged, inputs unchanged, workspaces (PT_ARG_WORKSPACE)
 * back to zero (scratch buffers, PT_ARG_SCRATCH, are poisoned before each
 * launch and not checked), no output element left with the poison bits
 * (float outputs; the op's padding, pt_op.padding, aside: varlen rows no
 * kernel writes are neither required nor compared), then the values
 * against the op's float64
 * reference, on every element when all outputs together have at most
 * full_limit elements, else on a sample of at least 4096 elements per
 * output (runs of 64 consecutive elements, one at a random place in each
 * of samples/64 equal strata, plus the first and the last element), each
 * computed on the CPU in float64 by pt_op.reference_at. An op without
 * reference_at gets the full reference up to 16 x full_limit outputs and
 * PT_EUNSUPPORTED above (the harness cannot check it, the kernel is not
 * blamed: class launch_error with that message).
 *
 * Error model, per output element, got g and reference w:
 *   allowance a = gamma * mag, the accumulation bound: mag from the op
 *     (pt_op.magnitude: sum of |terms| of the rounded sums the element
 *     depends on, carried through the epilogue to first order, e.g.
 *     |alpha| sum_k |a_ik| |b_kj| for a GEMM, sum_j |x_j| for a row sum),
 *     gamma = TUNER_ACCUM_C * sqrt(len) * u (tuner_accum_gamma) for len
 *     terms summed in the op's accumulation dtype with unit roundoff u
 *     (f32 2^-24; integers exact: 0). 0 for an op without magnitude, for an
 *     integer output, and where mag is not finite.
 *   f32/f16/bf16/tf32: err = |g - w| / (max(|w|, 1e-2 * S) + a / tol), S =
 *     max |w| over the finite compared elements of that output (near-zero
 *     elements are judged against the tensor's scale, not themselves): the
 *     relative error where a is 0;
 *   e4m3/e5m2: w is clamped to the format's range (saturation is part of
 *     the format) and err = |g - w| / (spacing of the format at w + a / tol)
 *     (ulps where a is 0);
 *   integers: err = |g - w| / max(|w|, 1e-2 * S), no allowance;
 *   overflow (f16, bf16, f32/tf32 outputs): a finite w with |w| - tol |w|
 *     - a at or past the round-to-nearest overflow threshold of the dtype
 *     (f16 65520, bf16 2^128 - 2^119, f32 2^128 - 2^103: halfway past
 *     the largest finite value) is expected as +-inf (the store overflows
 *     in every summation order); where that band straddles the threshold
 *     the inf of w's sign matches too, besides a finite g within tolerance;
 *   NaN and inf, explicitly: g and w both NaN: 0; one of them NaN: failure;
 *     an inf matches only the same inf (sign included), anything else
 *     against an inf or an inf against a finite w fails; an err that comes
 *     out NaN fails. An output whose reference is NaN or inf at every
 *     compared element is refused (PT_EINVAL, class launch_error): nothing
 *     would be compared (a NaN or inf parameter or input).
 * Tolerances (tuner_tolerance): f32 1e-5, tf32 5e-4, f16/bf16 1e-2, fp8
 * 1 ulp, integers exact (an int8 GEMM accumulates in s32: exact too); an op
 * may set its own per output (pt_op.tolerance: the tolerance and the floor
 * fraction, e.g. attention's lse: 1e-4 against max |lse|). An
 * element fails when err > tol, i.e. when |g - w| > tol * max(|w|, floor) +
 * a: the tolerance covers the output rounding and the op's elementwise
 * arithmetic (approximate exp, epilogue), the allowance the accumulation.
 * TUNER_ACCUM_C: see docs/design.md (verification). */
#ifndef TUNER_VERIFY_H
#define TUNER_VERIFY_H

#include "tuner/backend.h"

enum { TUNER_MAX_TENSORS = 16, TUNER_MAX_ARGS = 24, TUNER_MIN_SAMPLES = 4096 };
#define TUNER_ACCUM_C 3.0

/* Host and device copies of one problem's tensors. in[i].data: the float64
 * values of the stored inputs; out[i].data: the outputs as read back (NULL
 * before tuner_io_download). */
typedef struct tuner_io {
    const pt_op *op;
    const pt_prepared *pp;
    int nin, nout;
    pt_tensor in[TUNER_MAX_TENSORS], out[TUNER_MAX_TENSORS];
    void *in_bits[TUNER_MAX_TENSORS], *out_bits[TUNER_MAX_TENSORS];
    size_t in_bytes[TUNER_MAX_TENSORS], out_bytes[TUNER_MAX_TENSORS];
    size_t guard;           /* bytes each side of every device buffer */
    bool allocated;
    tuner_ptr in_base[TUNER_MAX_TENSORS], out_base[TUNER_MAX_TENSORS]; /* allocations */
    tuner_ptr in_dev[TUNER_MAX_TENSORS], out_dev[TUNER_MAX_TENSORS];   /* payloads */
    tuner_ptr ws[TUNER_MAX_ARGS];   /* PT_ARG_WORKSPACE and PT_ARG_SCRATCH buffers, by parameter index */
    size_t ws_bytes[TUNER_MAX_ARGS];
    bool ws_zero[TUNER_MAX_ARGS];   /* ws[i] holds zeros (a workspace's contract) */
} tuner_io;

/* Host side: tensor list and input storage (zeros). */
int tuner_io_new(const pt_op *op, const pt_prepared *pp, tuner_io **out, pt_err *e);
void tuner_io_free(tuner_dev *d, tuner_io *io); /* d may be NULL when nothing was allocated */
/* Random inputs, uniform in [lo, hi) (0,0: [-2, 2)), never exactly 0 (a zero
 * hides wrong indexing); deterministic in seed (0: 1). The op's structured
 * inputs (pt_op.init_inputs: lengths, offsets, page tables) replace the
 * noise where it has them. */
void tuner_io_random(tuner_io *io, uint64_t seed, double lo, double hi);
/* Input i from stored bits (in_bytes[i] bytes of its dtype). */
void tuner_io_set_input(tuner_io *io, int i, const void *bits);
/* The op's input check (pt_op.check_inputs: an index out of range, a length
 * over its maximum), one line naming the element; tuner_io_upload runs it
 * before writing anything. */
int tuner_io_check_inputs(const tuner_io *io, pt_err *e);
/* Device buffers with room for guard zones (guard bytes each side). */
int tuner_io_alloc(tuner_dev *d, tuner_io *io, size_t guard, pt_err *e);
/* Guard zones filled (0xA5), inputs written, outputs poisoned (0xFF). */
int tuner_io_upload(tuner_dev *d, tuner_io *io, pt_err *e);
/* Outputs read back into out_bits and out[].data. */
int tuner_io_download(tuner_dev *d, tuner_io *io, pt_err *e);

/* Kernel arguments as cuLaunchKernel wants them: p[i] points at v[i], or
 * for a tensor map (PT_ARG_TENSORMAP) at tmap[its launch index]: the
 * 128-byte value, 64-byte aligned as cuTensorMapEncodeTiled requires. */
typedef struct tuner_args {
    union {
        uint64_t u64;
        uint32_t u32;
        float f32;
    } v[TUNER_MAX_ARGS];
    _Alignas(64) uint8_t tmap[PT_MAX_TMAPS][EMU_TMAP_BYTES];
    void *p[TUNER_MAX_ARGS];
} tuner_args;
/* Binds l's parameters: tensors from in/out device pointers, workspaces
 * from ws (by parameter index), scalars from l; tensor maps encoded by d's
 * encoder (tuner_tmap_encode) over the tensor's device pointer, so a map
 * always bakes in the buffers this binding names. */
int tuner_args_bind(tuner_dev *d, tuner_args *a, const pt_launch *l, const tuner_ptr *in,
                    const tuner_ptr *out, const tuner_ptr *ws, pt_err *e);
/* The same on io's buffers; workspaces are allocated (and zero-filled) here
 * when l needs more than io has; scratch buffers (PT_ARG_SCRATCH) likewise,
 * and filled with 0xFF before every launch. */
int tuner_io_bind(tuner_dev *d, tuner_io *io, const pt_launch *l, tuner_args *a, pt_err *e);

/* One run of k over io's device buffers (allocated and uploaded): bind the
 * arguments, launch, synchronise, download the outputs. */
int tuner_io_run(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io, pt_err *e);

typedef struct tuner_verify_opts {
    int64_t full_limit; /* 0: 1 << 20 output elements */
    int samples;        /* per output when sampling; below 4096 means 4096 */
    uint64_t seed;      /* of the sample indices (0: 1) */
    bool keep_inputs;   /* don't re-upload: inputs already on the device (rotations) */
} tuner_verify_opts;

typedef struct tuner_verify_result {
    tuner_outcome cls;  /* OK, WRONG_ANSWER, or the backend's class of a failure */
    char what[16];      /* wrong answers: "values" "guard" "input" "unwritten" "workspace" */
    int64_t checked;    /* output elements compared */
    int64_t bad;        /* over tolerance */
    bool sampled;
    double max_err;     /* worst error, metric above: of the element nearest its
                         * output's tolerance (the largest error when the
                         * outputs share one) */
    double tol;         /* the strictest output's tolerance */
    double worst_tol;   /* the tolerance of max_err's output */
    double worst_ratio; /* max_err / worst_tol */
    char worst[256];    /* "y[17] = 1.5, reference 1.25" */
    double seconds;     /* wall time of the whole verify */
} tuner_verify_result;

double tuner_tolerance(pt_dtype dt);
/* Unit roundoff of a dtype (2^-24 for f32, 2^-11 f16 and tf32, 2^-8 bf16,
 * 2^-53 f64); 0 for integers. */
double tuner_unit_roundoff(pt_dtype dt);
/* gamma of the error model: TUNER_ACCUM_C * sqrt(len) * u(dtype); 0 for
 * len 0 or an exact (integer) accumulation. */
double tuner_accum_gamma(const pt_accum *a);

/* Compares n elements of one output stored as dt: got[j] against ref[j], at
 * output indices idx[j] (NULL: j), with accumulation allowances allow[j]
 * (absolute, gamma * mag; NULL: none), accumulating into r (checked, bad,
 * max_err, worst; tol lowered to this output's). Returns how many of the
 * references were finite. */
int64_t tuner_compare_bound(const char *name, pt_dtype dt, const double *got, const double *ref,
                            const double *allow, const int64_t *idx, int64_t n,
                            tuner_verify_result *r);
/* The same with the op's comparison of this output (pt_op.tolerance; NULL:
 * by dtype): its tolerance and the floor of the relative metric. */
int64_t tuner_compare_tol(const char *name, pt_dtype dt, const pt_tol *tol, const double *got,
                          const double *ref, const double *allow, const int64_t *idx, int64_t n,
                          tuner_verify_result *r);
/* The same without allowances. */
void tuner_compare(const char *name, pt_dtype dt, const double *got, const double *ref,
                   const int64_t *idx, int64_t n, tuner_verify_result *r);

/* One verify run of kernel k with launch l on io's tensors (allocated and
 * inputs chosen by the caller, or zeros). PT_OK with r->cls = TUNER_OK when
 * the kernel is right; PT_ERANGE with r->cls = TUNER_WRONG_ANSWER and the
 * first finding in e; the backend's error and class when the run failed. */
int tuner_verify(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io,
                 const tuner_verify_opts *o, tuner_verify_result *r, pt_err *e);

#endif
