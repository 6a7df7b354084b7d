/* One sm_90a attention kernel from its prepared problem and config to a
 * verdict: check, build, print, parse back (the text must print back
 * identically), load on the emulator (sm_90a, every detector) under a
 * schedule, seeded random inputs, tuner_verify against the float64
 * reference. Shared by the fa3 prefill, decode and paged tests
 * (tests/attn_fa3_case.h, tests/attn_fa3_decode_case.h,
 * tests/test_attention_fa3_pages.c). */
#ifndef PT_TEST_ATTN_EMU_VERIFY_H
#define PT_TEST_ATTN_EMU_VERIFY_H

#include <stdlib.h>
#include <string.h>

#include "gen/op.h"
#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"

/* max_err: the verifier's worst error; st (not NULL): the emulator's
 * counters of the verified launch; keep (not NULL): the PTX text (the
 * caller frees it). */
static inline int attn_emu_verify(const pt_op *op, const pt_prepared *pp, const pt_target *tg, const pt_config *cf,
                                  emu_sched sched, uint64_t seed, int nthreads, double *max_err, emu_stats *st,
                                  char **keep, pt_err *e)
{
    ptx_module *built = NULL, *parsed = NULL;
    tuner_dev *d = NULL;
    tuner_kernel *k = NULL;
    tuner_io *io = NULL;
    char *text = NULL;
    pt_launch l;
    *max_err = 0;
    int rc = op->check(pp, tg, cf, e);
    if (!rc)
        rc = pt_op_build(op, pp, tg, 0, cf, &built, &l, e);
    if (!rc) {
        text = ptx_print(built);
        rc = ptx_parse(text, strlen(text), "<emitted>", 0, &parsed, e);
    }
    if (!rc) {
        char *again = ptx_print(parsed);
        if (strcmp(again, text) != 0)
            rc = pt_errf(e, PT_EINTERNAL, "parse(print(kernel)) does not print back identically");
        free(again);
    }
    tuner_dev_opts dopts = {.emu_threads = nthreads, .emu_arch = 90, .emu_schedule = (int)sched,
                            .emu_schedule_seed = seed};
    if (!rc)
        rc = tuner_dev_open("emu", &dopts, &d, e);
    tuner_image img = {text, text ? strlen(text) : 0, NULL, 0, rc ? NULL : l.entry, op, pp};
    if (!rc)
        rc = tuner_load(d, &img, &k, e);
    if (!rc)
        rc = tuner_io_new(op, pp, &io, e);
    if (!rc) {
        tuner_io_random(io, seed, 0, 0);
        rc = tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), e);
    }
    if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result vr;
        rc = tuner_verify(d, k, &l, io, &vo, &vr, e);
        *max_err = vr.max_err;
        if (!rc && st)
            rc = tuner_emu_last_run(d, st);
    }
    if (io)
        tuner_io_free(d, io);
    if (k)
        tuner_unload(d, k);
    if (d)
        tuner_dev_close(d);
    if (keep)
        *keep = text;
    else
        free(text);
    ptx_module_free(parsed);
    ptx_module_free(built);
    return rc;
}

#endif
