/* The emulator check, built on the device interface and the verifier
 * (tuner/verify.h): one comparison, poison and input generator for every
 * backend. This file only adds the parse round trip and the emulator's
 * counts. */
#include "tuner/emu_check.h"

#include <stdlib.h>
#include <string.h>

#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/verify.h"

double pt_check_tolerance(pt_dtype dt) { return tuner_tolerance(dt); }

int pt_check_emu(const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c,
                 const pt_check_opts *o, pt_check_result *r, pt_err *e)
{
    memset(r, 0, sizeof *r);
    ptx_module *built = NULL, *parsed = NULL;
    tuner_dev *d = NULL;
    tuner_kernel *k = NULL;
    tuner_io *io = NULL;
    pt_launch l;
    int rc = pt_op_build(op, pp, t, 0, c, &built, &l, e);
    if (rc)
        return rc;
    /* the text is what gets compiled, hashed and stored: it must parse back
     * to itself, and it is what the emulator runs */
    char *text = ptx_print(built);
    rc = text ? ptx_parse(text, strlen(text), "<emitted>", 0, &parsed, e)
              : pt_errf(e, PT_ENOMEM, "out of memory printing the kernel");
    if (!rc) {
        char *again = ptx_print(parsed);
        if (!again)
            rc = pt_errf(e, PT_ENOMEM, "out of memory printing the kernel");
        else if (strcmp(again, text) != 0)
            rc = pt_errf(e, PT_EINTERNAL, "parse(print(kernel)) does not print back identically");
        free(again);
    }
    tuner_dev_opts dopts = {.emu_threads = o ? o->threads : 0, .emu_arch = t->sm,
                            .emu_smem_shift = o ? o->smem_shift : 0, .emu_sm_count = o ? o->sm_count : 0};
    if (!rc)
        rc = tuner_dev_open("emu", &dopts, &d, e);
    tuner_image img = {text, text ? strlen(text) : 0, NULL, 0, l.entry, op, pp};
    if (!rc)
        rc = tuner_load(d, &img, &k, e);
    if (!rc)
        rc = tuner_io_new(op, pp, &io, e);
    if (!rc) {
        tuner_io_random(io, o ? o->seed : 0, o ? o->lo : 0, o ? o->hi : 0);
        if (o && o->plant)
            o->plant(io, o->plant_arg);
        rc = tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), e);
    }
    if (!rc) {
        tuner_verify_opts vo = {.full_limit = INT64_MAX};
        tuner_verify_result vr;
        rc = tuner_verify(d, k, &l, io, &vo, &vr, e);
        if (!rc && o && o->post)
            rc = o->post(io, o->plant_arg, e);
        r->checked = vr.checked;
        r->bad = vr.bad;
        r->max_err = vr.max_err;
        r->tol = vr.tol;
        memcpy(r->worst, vr.worst, sizeof r->worst);
        emu_stats st;
        if (tuner_emu_last_run(d, &st) == PT_OK) {
            r->lane_instructions = st.lane_instructions;
            r->emu_seconds = st.seconds;
            memcpy(r->bank, st.bank, sizeof r->bank);
        }
    }
    if (io)
        tuner_io_free(d, io);
    if (k)
        tuner_unload(d, k);
    tuner_dev_close(d);
    free(text);
    ptx_module_free(parsed);
    ptx_module_free(built);
    return rc;
}
