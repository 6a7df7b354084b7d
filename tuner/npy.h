/* .npy files (NumPy format 1.0, 2.0 and 3.0): little-endian, one array,
 * read in C order (Fortran-order data is transposed), written in C order
 * through pt_wfile (a temporary file renamed into place). Our dtypes map to
 * descrs by the dtype table's npy column: f32 '<f4', f16 '<f2', bf16 as its
 * bits '<u2', e4m3/e5m2 as their bits '|u1'.
 * Malformed files give an error naming what is wrong; nothing is read past
 * the buffer. */
#ifndef TUNER_NPY_H
#define TUNER_NPY_H

#include "gen/dtype.h"

enum { TUNER_NPY_MAX_DIMS = 8 };

typedef struct tuner_npy {
    char descr[8];   /* "<f4", "|u1" */
    int ndim;
    int64_t shape[TUNER_NPY_MAX_DIMS];
    int64_t numel;
    size_t itemsize;
    void *data;      /* numel * itemsize bytes (malloc'd) */
} tuner_npy;

/* Parses a whole file held in memory; name is used in messages. */
int tuner_npy_parse(const void *buf, size_t len, const char *name, tuner_npy *out, pt_err *e);
int tuner_npy_read(const char *path, tuner_npy *out, pt_err *e);
void tuner_npy_free(tuner_npy *n);
/* Writes data (numel of shape, items of descr's size) as a version 1.0 file. */
int tuner_npy_write(const char *path, const char *descr, int ndim, const int64_t *shape,
                    const void *data, pt_err *e);
/* The array as storage bits of dtype dt (numel items of dt's size): exact
 * when the descr is dt's own; rounded from a float file ('<f2' '<f4' '<f8')
 * otherwise; any other descr is an error naming both. */
int tuner_npy_to_dtype(const tuner_npy *n, pt_dtype dt, void *bits, pt_err *e);

#endif
