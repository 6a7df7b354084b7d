/* Running a PTX file as given (ptxtune exec) on any backend: buffers in,
 * buffers out, scalars, one launch. Outputs are poisoned (0xFF) before the
 * run and every buffer has the backend's guard zones, checked after. */
#ifndef TUNER_EXEC_H
#define TUNER_EXEC_H

#include "tuner/backend.h"

typedef enum tuner_exec_kind {
    TUNER_EXEC_IN,     /* a device buffer holding data[0..bytes) */
    TUNER_EXEC_OUT,    /* a device buffer of bytes, poisoned; read back into result */
    TUNER_EXEC_INOUT,  /* written from data, read back into result */
    TUNER_EXEC_SCALAR, /* the parameter's value: bytes (1..16) of data */
} tuner_exec_kind;

typedef struct tuner_exec_arg {
    tuner_exec_kind kind;
    const void *data;
    size_t bytes;
    void *result;      /* OUT/INOUT: the caller's room for bytes */
} tuner_exec_arg;

/* Loads ptx (the driver JIT on cuda), binds args in parameter order,
 * launches grid x block with smem bytes of dynamic shared memory, waits,
 * reads outputs back and checks the guard zones. PT_OK, or the backend's
 * error (tuner_dev_failure says its class), or PT_ERANGE naming a guard
 * zone the kernel wrote. */
int tuner_exec(tuner_dev *d, const char *ptx, size_t len, const char *entry,
               const unsigned grid[3], const unsigned block[3], size_t smem, int nargs,
               tuner_exec_arg *args, pt_err *e);

#endif
