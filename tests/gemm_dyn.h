/* One dyn=m GEMM kernel (its PTX text, printed once at the tuned M) run
 * at the sizes of another M on the emulator backend: loaded, seeded random
 * inputs, outputs poisoned and every element compared with the op's
 * float64 reference at that M (tuner/verify.h; the emulator device has
 * every detector on), the workspace back to zero; gemm_dyn_verify_plant
 * writes plant's values over the random inputs first (tests/gemm_adv.h)
 * and gives the verifier's result. pp: the problem
 * prepared at the run's M; l: the launch with the parameter m and the
 * grid at that M. Shared by test_gemm_emu.c and test_runtime_dyn.c. */
#ifndef PT_TEST_GEMM_DYN_H
#define PT_TEST_GEMM_DYN_H

#include <stdint.h>
#include <string.h>

#include "gen/gemm.h"
#include "tuner/backend.h"
#include "tuner/verify.h"

static inline int gemm_dyn_verify_plant(tuner_dev *d, const char *text, const char *entry, const pt_prepared *pp,
                                        const pt_launch *l, uint64_t seed, void (*plant)(tuner_io *, void *),
                                        void *plant_arg, tuner_verify_result *vr, pt_err *e)
{
    tuner_kernel *k = NULL;
    tuner_io *io = NULL;
    tuner_image img = {text, strlen(text), NULL, 0, entry, &gen_gemm_op, pp};
    int rc = tuner_load(d, &img, &k, e);
    if (!rc)
        rc = tuner_io_new(&gen_gemm_op, pp, &io, e);
    if (!rc) {
        tuner_io_random(io, seed, 0, 0);
        if (plant)
            plant(io, plant_arg);
        rc = tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), e);
    }
    if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result r;
        rc = tuner_verify(d, k, l, io, &vo, vr ? vr : &r, e);
    }
    if (io)
        tuner_io_free(d, io);
    if (k)
        tuner_unload(d, k);
    return rc;
}

static inline int gemm_dyn_verify(tuner_dev *d, const char *text, const char *entry, const pt_prepared *pp,
                                  const pt_launch *l, uint64_t seed, pt_err *e)
{
    return gemm_dyn_verify_plant(d, text, entry, pp, l, seed, NULL, NULL, NULL, e);
}

#endif
