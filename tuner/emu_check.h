/* Proving a generated kernel on the CPU: emit -> print -> parse (the text is
 * what runs; it must print back identically) -> the emulator backend with
 * every detector on and the target's shared layout, shifted (see
 * pt_check_opts.smem_shift) -> tuner_verify (random inputs, never zero; outputs
 * poisoned; every output element compared with the op's float64 reference;
 * metric and tolerances in tuner/verify.h). */
#ifndef PT_EMU_CHECK_H
#define PT_EMU_CHECK_H

#include "gen/op.h"
#include "ptx/emu/emu.h"
#include "tuner/backend.h"

struct tuner_io; /* tuner/verify.h */

typedef struct pt_check_opts {
    uint64_t seed;   /* input values; fixed seeds make failures repeatable */
    int threads;     /* emulator threads across CTAs (0: serial) */
    double lo, hi;   /* input range; 0,0: [-2, 2] */
    int smem_shift;  /* bytes before the first shared array beyond the target's reserved
                        region (0: EMU_SMEM_SHIFT_DEFAULT; -1: none, the hardware layout) */
    int sm_count;    /* SMs of the emulator device, which size persistent grids
                        (0: tuner_emu_sm_count of the target) */
    /* called after the random inputs are made, before the upload (NULL:
     * none): a test's adversarial values (NaN, inf, extremes) written over
     * them, in io->in[i].data and io->in_bits[i] alike */
    void (*plant)(struct tuner_io *io, void *arg);
    void *plant_arg;
    /* called after a passing comparison with the kernel's outputs in
     * io->out[i].data (NULL: none): a test's exact check; its status and
     * message are the run's */
    int (*post)(const struct tuner_io *io, void *arg, pt_err *e);
} pt_check_opts;

typedef struct pt_check_result {
    int64_t checked;         /* output elements compared */
    int64_t bad;             /* over tolerance */
    double max_err;          /* worst error (metric above) */
    double tol;              /* tolerance applied (the strictest output's) */
    char worst[256];         /* where the worst error is: output, index, got, want */
    uint64_t lane_instructions;
    double emu_seconds;
    emu_bank_stat bank[EMU_NBANK]; /* shared-memory bank conflicts of the run (emu.h) */
} pt_check_result;

/* Every count of the emulator backend's last launch (tuner/emudev.c;
 * PT_EINVAL on other backends). */
int tuner_emu_last_run(tuner_dev *d, emu_stats *st);

/* Tolerance for an output stored as dt. */
double pt_check_tolerance(pt_dtype dt);

/* Runs one config of a prepared problem on the emulator and compares.
 * Returns PT_OK when the kernel ran cleanly (no detector report) and every
 * element is within tolerance; PT_EEMU with the first detector report, or
 * PT_ERANGE naming the worst element, otherwise. */
int pt_check_emu(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c,
                 const pt_check_opts *o, pt_check_result *r, pt_err *e);

#endif
