/* The one rounding engine: float formats narrower than f64 (f16, bf16,
 * tf32, f32, e4m3, e5m2) encoded from exact values with every PTX rounding
 * mode, saturation and relu, and the packed/x2 arithmetic that f16/bf16
 * instructions need. The emulator computes every conversion and narrow
 * arithmetic result with it, and the host conversions of gen/dtype.c (the
 * CPU references, .npy I/O) call it too, so a kernel and its reference
 * round the same way by construction. Nothing here depends on gen/ or on
 * the emulator; the names keep the emulator's EMU_ / num_ prefixes.
 *
 * The central idea: every result is first known exactly, as a double s
 * plus an error term e (s + e is the exact value, |e| <= ulp(s)/2, from
 * TwoSum / exact products), then rounded once into the target format by
 * num_encode(). That gives correctly rounded results in every mode without
 * touching the host's floating-point environment. */
#ifndef PTX_NUM_H
#define PTX_NUM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Rounding modes: PTX .rn .rna .rz .rm .rp (and .rni/.rzi/.rmi/.rpi for
 * rounding to an integer, which map onto the same four). */
enum { EMU_RN, EMU_RNA, EMU_RZ, EMU_RM, EMU_RP };

/* Target formats of num_encode. F64 is included for int -> f64 rounding. */
typedef enum emu_fmt {
    EMU_FMT_F16,
    EMU_FMT_BF16,
    EMU_FMT_TF32, /* e8m10; num_encode returns it in the low 19 bits */
    EMU_FMT_F32,
    EMU_FMT_F64,
    EMU_FMT_E4M3,
    EMU_FMT_E5M2,
} emu_fmt;

/* Result flags of conversions and arithmetic. */
enum {
    EMU_NF_SATFINITE = 1, /* clamp to +-max finite; NaN stays NaN */
    EMU_NF_RELU = 2,      /* negative results become +0; NaN becomes canonical NaN */
    EMU_NF_FTZ = 4,       /* subnormal inputs and results flush to signed zero */
    EMU_NF_SAT = 8,       /* clamp to [0, 1]; NaN becomes +0 */
};

static inline float num_f32(uint64_t bits)
{
    uint32_t b = (uint32_t)bits;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static inline uint64_t num_f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static inline double num_f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, 8);
    return d;
}
static inline uint64_t num_f64_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}
/* Flushes an f32 subnormal to a signed zero. */
static inline uint32_t num_ftz32(uint32_t b)
{
    return (b & 0x7f800000u) ? b : (b & 0x80000000u);
}
static inline uint64_t num_ftz64(uint64_t b)
{
    return (b & 0x7ff0000000000000ull) ? b : (b & 0x8000000000000000ull);
}

#define EMU_F32_QNAN 0x7fffffffu          /* canonical f32 NaN of NVIDIA GPUs */
#define EMU_F64_QNAN 0x7fffffffffffffffull
#define EMU_H_QNAN 0x7fffu                /* canonical f16 / bf16 NaN */

/* Bit width of a format's encoding (tf32: 19). */
int num_fmt_bits(emu_fmt f);
/* Rounds neg * (mant * 2^exp + tiny) into format f, where `sticky` says the
 * exact magnitude is strictly above mant * 2^exp by less than 2^exp.
 * Handles subnormals, carries and overflow (inf, max finite or NaN as the
 * mode, the format and EMU_NF_SATFINITE dictate). Zero stays signed. */
uint64_t num_encode(emu_fmt f, bool neg, uint64_t mant, int exp, bool sticky, int rnd,
                    unsigned flags);
/* Rounds the exact value s + e (|e| <= ulp(s)/2, e.g. from TwoSum) into f.
 * NaN/Inf in s are handled; flags as above (FTZ applies to f32 results). */
uint64_t num_round_dd(emu_fmt f, double s, double e, int rnd, unsigned flags);
static inline uint64_t num_round(emu_fmt f, double x, int rnd, unsigned flags)
{
    return num_round_dd(f, x, 0.0, rnd, flags);
}
/* Exact value of an encoding (tf32 given in f32 layout). */
double num_decode(emu_fmt f, uint64_t bits);
uint32_t num_f16_to_f32(uint16_t h); /* exact; NaN -> canonical f32 NaN */
static inline float num_bf16_to_f32(uint16_t h) { return num_f32((uint32_t)h << 16); }
/* fp8 (low byte of v) -> f16 bits, as cvt.rn.f16x2.e4m3x2 does per half. */
uint16_t num_fp8_to_f16(emu_fmt f, unsigned v);

/* Error-free transforms: s + e == a + b exactly (RN host arithmetic). */
static inline double num_two_sum(double a, double b, double *e)
{
    double s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

/* Integer -> float in any mode (exact rounding). */
uint64_t num_from_u64(emu_fmt f, uint64_t v, int rnd, unsigned flags);
uint64_t num_from_s64(emu_fmt f, int64_t v, int rnd, unsigned flags);

/* Float arithmetic on one f16/bf16/f32 lane (bits in, bits out), correctly
 * rounded in mode rnd: op is one of the EMU_FOP_* below. f64 operations in
 * a directed mode go through num_f64_op. */
enum { EMU_FOP_ADD, EMU_FOP_SUB, EMU_FOP_MUL, EMU_FOP_FMA, EMU_FOP_DIV, EMU_FOP_SQRT, EMU_FOP_RCP };
uint64_t num_fop(emu_fmt f, int op, uint64_t a, uint64_t b, uint64_t c, int rnd, unsigned flags);
double num_f64_op(int op, double a, double b, double c, int rnd);

/* f32 min/max with the PTX NaN rules: without .NaN a NaN input yields the
 * other input (both NaN: canonical NaN); with .NaN any NaN gives canonical
 * NaN; -0 < +0. xorsign_abs compares magnitudes and sets sign(a)^sign(b). */
double num_minmax(double a, double b, bool is_max, bool nan, bool xorsign_abs, bool *is_nan);

#endif
