/* Running a PTX file as given (ptxtune exec) on any backend: buffers in,
 * buffers out, scalars, tensor maps, one launch. Outputs are poisoned (0xFF)
 * before the run and every buffer has the backend's guard zones, checked
 * after. */
#ifndef TUNER_EXEC_H
#define TUNER_EXEC_H

#include "tuner/backend.h"

typedef enum tuner_exec_kind {
    TUNER_EXEC_IN,     /* a device buffer holding data[0..bytes) */
    TUNER_EXEC_OUT,    /* a device buffer of bytes, poisoned; read back into result */
    TUNER_EXEC_INOUT,  /* written from data, read back into result */
    TUNER_EXEC_SCALAR, /* the parameter's value: bytes (1..16) of data */
    TUNER_EXEC_TMAP,   /* a tensor map, 128 bytes by value, encoded by the backend
                          (tuner_tmap_encode) over the buffer of argument `of`
                          (0-based; an IN, OUT or INOUT), or, with of < 0, over a
                          buffer of its own holding data[0..bytes) (not a
                          parameter); tmap.gaddr is the byte offset into it */
} tuner_exec_kind;

typedef struct tuner_exec_arg {
    tuner_exec_kind kind;
    const void *data;
    size_t bytes;
    void *result;      /* OUT/INOUT: the caller's room for bytes */
    int of;            /* TMAP: the argument whose buffer it maps; < 0 its own */
    emu_tmap_desc tmap; /* TMAP: the map, gaddr relative to the buffer */
} tuner_exec_arg;

/* Loads ptx (the driver JIT on cuda), binds args in parameter order,
 * launches l's grid x block (l->cluster: a cluster launch) with l->smem
 * bytes of dynamic shared memory, waits, reads outputs back and checks the
 * guard zones. PT_OK, or the backend's error (tuner_dev_failure says its
 * class), or PT_ERANGE naming a guard zone the kernel wrote. Only l's
 * geometry is read. */
int tuner_exec_launch(tuner_dev *d, const char *ptx, size_t len, const char *entry,
                      const pt_launch *l, int nargs, tuner_exec_arg *args, pt_err *e);
/* The same without a cluster. */
int tuner_exec(tuner_dev *d, const char *ptx, size_t len, const char *entry,
               const unsigned grid[3], const unsigned block[3], size_t smem, int nargs,
               tuner_exec_arg *args, pt_err *e);

#endif
