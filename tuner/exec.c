/* ptxtune exec on any backend (see exec.h). */
#include "tuner/exec.h"

#include <stdlib.h>
#include <string.h>

enum { EXEC_MAX_ARGS = 64, GUARD_BYTE = 0xA5 };

static int check_guard(tuner_dev *d, tuner_ptr p, size_t g, int arg, const char *side, pt_err *e)
{
    uint8_t *buf = malloc(g);
    if (!buf)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    int rc = tuner_read(d, p, buf, g, e);
    size_t n = 0;
    for (size_t i = 0; !rc && i < g; i++)
        n += buf[i] != GUARD_BYTE;
    free(buf);
    if (!rc && n)
        rc = pt_errf(e, PT_ERANGE, "kernel wrote %zu bytes in the guard zone %s buffer argument %d",
                     n, side, arg + 1);
    return rc;
}

static bool has_buffer(const tuner_exec_arg *a)
{
    return a->kind == TUNER_EXEC_IN || a->kind == TUNER_EXEC_OUT || a->kind == TUNER_EXEC_INOUT ||
           (a->kind == TUNER_EXEC_TMAP && a->of < 0);
}

/* A buffer with guard zones either side, filled from data or poisoned. */
static int upload(tuner_dev *d, const tuner_exec_arg *a, size_t g, tuner_ptr *base, pt_err *e)
{
    int rc = tuner_alloc(d, a->bytes + 2 * g, base, e);
    tuner_ptr p = *base + g;
    if (!rc && g)
        rc = tuner_fill(d, *base, GUARD_BYTE, g, e);
    if (!rc && g)
        rc = tuner_fill(d, p + a->bytes, GUARD_BYTE, g, e);
    if (!rc)
        rc = a->kind == TUNER_EXEC_OUT ? tuner_fill(d, p, 0xFF, a->bytes, e)
                                       : tuner_write(d, p, a->data, a->bytes, e);
    return rc;
}

int tuner_exec_launch(tuner_dev *d, const char *ptx, size_t len, const char *entry,
                      const pt_launch *geom, int nargs, tuner_exec_arg *args, pt_err *e)
{
    if (nargs > EXEC_MAX_ARGS)
        return pt_errf(e, PT_EINVAL, "%d arguments: at most %d", nargs, EXEC_MAX_ARGS);
    size_t g = tuner_dev_guard_bytes(d);
    tuner_ptr base[EXEC_MAX_ARGS] = {0};
    _Alignas(128) uint8_t vals[EXEC_MAX_ARGS][EMU_TMAP_BYTES];
    void *argp[EXEC_MAX_ARGS];
    tuner_kernel *k = NULL;
    tuner_image img = {ptx, len, NULL, 0, entry, NULL, NULL};
    int rc = tuner_load(d, &img, &k, e);
    for (int i = 0; i < nargs && !rc; i++) {
        tuner_exec_arg *a = &args[i];
        memset(vals[i], 0, sizeof vals[i]);
        argp[i] = vals[i];
        if (a->kind == TUNER_EXEC_SCALAR) {
            if (a->bytes < 1 || a->bytes > 16)
                rc = pt_errf(e, PT_EINVAL, "argument %d: scalar of %zu bytes", i + 1, a->bytes);
            else
                memcpy(vals[i], a->data, a->bytes);
            continue;
        }
        if (!has_buffer(a))
            continue;
        rc = upload(d, a, g, &base[i], e);
        tuner_ptr p = base[i] + g;
        if (a->kind != TUNER_EXEC_TMAP)
            memcpy(vals[i], &p, sizeof p);
    }
    /* maps once every buffer has its device address */
    for (int i = 0; i < nargs && !rc; i++) {
        tuner_exec_arg *a = &args[i];
        if (a->kind != TUNER_EXEC_TMAP)
            continue;
        int of = a->of < 0 ? i : a->of;
        if (of >= nargs || (a->of >= 0 && (!has_buffer(&args[of]) || args[of].kind == TUNER_EXEC_TMAP))) {
            rc = pt_errf(e, PT_EINVAL, "argument %d: a tensor map over argument %d, which is not a buffer",
                         i + 1, a->of + 1);
            break;
        }
        emu_tmap_desc m = a->tmap;
        m.gaddr = base[of] + g + a->tmap.gaddr;
        rc = tuner_tmap_encode(d, &m, vals[i], e);
    }
    pt_launch l;
    memset(&l, 0, sizeof l);
    memcpy(l.grid, geom->grid, sizeof l.grid);
    memcpy(l.block, geom->block, sizeof l.block);
    memcpy(l.cluster, geom->cluster, sizeof l.cluster);
    l.smem = geom->smem;
    l.entry = entry;
    if (!rc)
        rc = tuner_launch(d, k, &l, argp, e);
    if (!rc)
        rc = tuner_sync(d, e);
    for (int i = 0; i < nargs && !rc; i++) {
        tuner_exec_arg *a = &args[i];
        if (!has_buffer(a))
            continue;
        if (a->kind == TUNER_EXEC_OUT || a->kind == TUNER_EXEC_INOUT)
            rc = tuner_read(d, base[i] + g, a->result, a->bytes, e);
        if (!rc && g)
            rc = check_guard(d, base[i], g, i, "before", e);
        if (!rc && g)
            rc = check_guard(d, base[i] + g + a->bytes, g, i, "after", e);
    }
    for (int i = 0; i < nargs; i++)
        tuner_free(d, base[i]);
    if (k)
        tuner_unload(d, k);
    return rc;
}

int tuner_exec(tuner_dev *d, const char *ptx, size_t len, const char *entry,
               const unsigned grid[3], const unsigned block[3], size_t smem, int nargs,
               tuner_exec_arg *args, pt_err *e)
{
    pt_launch l;
    memset(&l, 0, sizeof l);
    memcpy(l.grid, grid, sizeof l.grid);
    memcpy(l.block, block, sizeof l.block);
    l.smem = smem;
    return tuner_exec_launch(d, ptx, len, entry, &l, nargs, args, e);
}
