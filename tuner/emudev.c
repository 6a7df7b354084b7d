/* The emulator backend: ptx/emu behind the device interface, for
 * verification on a CPU. The PTX text is parsed (ptx_parse), so what runs is
 * exactly what would be compiled. Launches are synchronous; a detector
 * report becomes the launch's failure, classed by what it means on a GPU:
 * out-of-bounds, misaligned, trap -> fault; step cap, timeout, deadlock -> timeout;
 * races, uninitialised reads, divergent syncs -> wrong_answer (the values
 * may match by luck, the kernel is still wrong). No timing. Shared memory
 * has the layout of the module's arch (or emu_arch), shifted by
 * EMU_SMEM_SHIFT_DEFAULT unless emu_smem_shift says otherwise, so every
 * verification (and test grid) runs with a non-zero, non-256-aligned base. */
#include <stdlib.h>
#include <string.h>

#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend_int.h"
#include "tuner/emu_check.h"

struct tuner_kernel {
    ptx_module *m;
    emu_kernel *k;
};

typedef struct emu_dev {
    emu_ctx *c;
    emu_stats last; /* of the last launch */
} emu_dev;

static emu_ctx *C(tuner_dev *d) { return ((emu_dev *)d->impl)->c; }

int tuner_emu_last_stats(tuner_dev *d, uint64_t *lane_instructions, double *seconds)
{
    if (d->ops != &tuner_emu_ops)
        return PT_EINVAL;
    const emu_stats *st = &((emu_dev *)d->impl)->last;
    *lane_instructions = st->lane_instructions;
    *seconds = st->seconds;
    return PT_OK;
}

int tuner_emu_last_run(tuner_dev *d, emu_stats *st)
{
    if (d->ops != &tuner_emu_ops)
        return PT_EINVAL;
    *st = ((emu_dev *)d->impl)->last;
    return PT_OK;
}

int tuner_emu_sm_count(int arch)
{
    switch (arch) {
    case 80: return 108;
    case 86: return 84;
    case 87: return 16;
    case 89: return 142;
    default: return 132;
    }
}

static int emud_open(tuner_dev *d, const tuner_dev_opts *o, pt_err *e)
{
    emu_opts eo = emu_default_opts();
    eo.threads = o->emu_threads;
    eo.max_steps = o->emu_max_steps;
    /* shared memory: the arch's layout, shifted so no kernel can rely on
     * where its arrays start */
    eo.arch = o->emu_arch;
    if (o->emu_schedule < (int)EMU_SCHED_LAZY || o->emu_schedule > (int)EMU_SCHED_RANDOM)
        return pt_errf(e, PT_EINVAL, "emulator: bad schedule %d", o->emu_schedule);
    eo.schedule = (emu_sched)o->emu_schedule;
    eo.schedule_seed = o->emu_schedule_seed;
    if (o->emu_smem_shift < -1 || o->emu_smem_shift > (int)EMU_SMEM_SHIFT_MAX ||
        (o->emu_smem_shift > 0 && o->emu_smem_shift % 16))
        return pt_errf(e, PT_EINVAL, "emulator: bad shared-memory shift %d (a multiple of 16, 0..%u)",
                       o->emu_smem_shift, EMU_SMEM_SHIFT_MAX);
    eo.smem_shift = o->emu_smem_shift == 0    ? EMU_SMEM_SHIFT_DEFAULT
                    : o->emu_smem_shift == -1 ? 0
                                              : (uint32_t)o->emu_smem_shift;
    if (o->emu_sm_count < 0 || o->emu_sm_count > 4096)
        return pt_errf(e, PT_EINVAL, "emulator: bad SM count %d (1..4096, 0: the arch's)", o->emu_sm_count);
    emu_dev *ed = calloc(1, sizeof *ed);
    if (!ed || !(ed->c = emu_new(&eo))) {
        free(ed);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    d->impl = ed;
    tuner_devinfo *di = &d->info;
    strcpy(di->name, "ptxtune emulator");
    di->cc_major = 9;
    di->cc_minor = 0;
    di->sm_count = o->emu_sm_count ? o->emu_sm_count : tuner_emu_sm_count(o->emu_arch);
    di->smem_optin = 227 << 10;
    di->smem_per_sm = 228 << 10;
    di->regs_per_sm = 65536;
    di->max_threads_per_block = 1024;
    return PT_OK;
}

static void emud_close(tuner_dev *d)
{
    emu_free(C(d));
    free(d->impl);
}

static int emud_alloc(tuner_dev *d, size_t bytes, tuner_ptr *p, pt_err *e)
{
    *p = emu_alloc(C(d), bytes, "buffer");
    if (!*p)
        return tuner_dev_fail(d, pt_errf(e, PT_ENOMEM, "emulator: cannot allocate %zu bytes", bytes),
                              TUNER_LAUNCH_ERROR, false);
    return PT_OK;
}

/* The emulator keeps allocations until the context goes; a verify run
 * allocates a bounded set, so nothing is reclaimed early. */
static void emud_free(tuner_dev *d, tuner_ptr p)
{
    (void)d;
    (void)p;
}

static int emud_write(tuner_dev *d, tuner_ptr dst, const void *src, size_t n, pt_err *e)
{
    return emu_write(C(d), dst, src, n, e);
}

static int emud_read(tuner_dev *d, tuner_ptr src, void *dst, size_t n, pt_err *e)
{
    return emu_read(C(d), src, dst, n, e);
}

/* 0xFF fills are poison (marked unwritten, so a read of an output the
 * kernel never wrote is reported); other bytes are data. */
static int emud_fill(tuner_dev *d, tuner_ptr dst, uint8_t byte, size_t n, pt_err *e)
{
    if (byte == 0xFF)
        return emu_poison(C(d), dst, n, e);
    uint8_t buf[4096];
    memset(buf, byte, sizeof buf);
    for (size_t off = 0; off < n; off += sizeof buf) {
        size_t k = n - off < sizeof buf ? n - off : sizeof buf;
        int rc = emu_write(C(d), dst + off, buf, k, e);
        if (rc)
            return rc;
    }
    return PT_OK;
}

static int emud_load(tuner_dev *d, const tuner_image *img, tuner_kernel **out, pt_err *e)
{
    if (!img->ptx)
        return tuner_dev_fail(d, pt_errf(e, PT_EINVAL, "emulator: the image has no PTX text"),
                              TUNER_COMPILE_ERROR, false);
    tuner_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    int rc = ptx_parse(img->ptx, img->ptx_len, "kernel.ptx", 0, &k->m, e);
    if (!rc)
        rc = emu_load(C(d), k->m, img->entry, &k->k, e);
    if (rc) {
        ptx_module_free(k->m);
        free(k);
        return tuner_dev_fail(d, rc, TUNER_COMPILE_ERROR, false);
    }
    *out = k;
    return PT_OK;
}

static void emud_unload(tuner_dev *d, tuner_kernel *k)
{
    (void)d;
    emu_kernel_free(k->k);
    ptx_module_free(k->m);
    free(k);
}

static tuner_outcome report_class(emu_report_kind k)
{
    switch (k) {
    case EMU_R_STEP_CAP:
    case EMU_R_TIMEOUT:
    case EMU_R_DEADLOCK: return TUNER_TIMEOUT;
    case EMU_R_UNINIT:
    case EMU_R_RACE:
    case EMU_R_DIVERGENCE:
    case EMU_R_CP_ASYNC: return TUNER_WRONG_ANSWER;
    default: return TUNER_FAULT;
    }
}

static int emud_launch(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e)
{
    emu_launch el;
    memset(&el, 0, sizeof el);
    memcpy(el.grid, l->grid, sizeof el.grid);
    memcpy(el.block, l->block, sizeof el.block);
    el.dyn_smem = l->smem;
    emu_stats *st = &((emu_dev *)d->impl)->last;
    /* a cluster launch runs its CTAs together (emu_run_cluster) */
    int rc = emu_run_cluster(C(d), k->k, &el, l->cluster, false, (const void *const *)args, st, e);
    if (rc == PT_EEMU && emu_nreports(C(d)) > 0)
        return tuner_dev_fail(d, rc, report_class(emu_report_kind_of(C(d), 0)), false);
    if (rc)
        return tuner_dev_fail(d, rc, TUNER_LAUNCH_ERROR, false);
    return PT_OK;
}

static int emud_sync(tuner_dev *d, pt_err *e)
{
    (void)d;
    (void)e;
    return PT_OK;
}

const tuner_backend_ops tuner_emu_ops = {
    .name = "emu",
    .can_time = false,
    .guard_bytes = 0,
    .open = emud_open,
    .close = emud_close,
    .alloc = emud_alloc,
    .free = emud_free,
    .write = emud_write,
    .read = emud_read,
    .fill = emud_fill,
    .load = emud_load,
    .unload = emud_unload,
    .launch = emud_launch,
    .sync = emud_sync,
};
