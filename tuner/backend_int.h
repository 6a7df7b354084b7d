/* The backend vtable and the device struct shared by tuner/backend.c and
 * the three implementations (cuda.c, emudev.c, mock.c). Private to tuner/. */
#ifndef TUNER_BACKEND_INT_H
#define TUNER_BACKEND_INT_H

#include "tuner/backend.h"

typedef struct tuner_backend_ops {
    const char *name;
    bool can_time;
    size_t guard_bytes;
    int (*open)(tuner_dev *d, const tuner_dev_opts *o, pt_err *e);
    void (*close)(tuner_dev *d);
    int (*alloc)(tuner_dev *d, size_t bytes, tuner_ptr *p, pt_err *e);
    void (*free)(tuner_dev *d, tuner_ptr p);
    int (*write)(tuner_dev *d, tuner_ptr dst, const void *src, size_t n, pt_err *e);
    int (*read)(tuner_dev *d, tuner_ptr src, void *dst, size_t n, pt_err *e);
    int (*fill)(tuner_dev *d, tuner_ptr dst, uint8_t byte, size_t n, pt_err *e);
    int (*load)(tuner_dev *d, const tuner_image *img, tuner_kernel **k, pt_err *e);
    void (*unload)(tuner_dev *d, tuner_kernel *k);
    int (*launch)(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e);
    int (*sync)(tuner_dev *d, pt_err *e);
    int (*batch_new)(tuner_dev *d, tuner_kernel *k, const pt_launch *l,
                     void *const *const *argsets, int nsets, int count, bool graph,
                     tuner_batch **out, pt_err *e);
    int (*batch_time)(tuner_dev *d, tuner_batch *b, tuner_ptr flush, size_t flush_bytes,
                      double *ms, pt_err *e);
    void (*batch_free)(tuner_dev *d, tuner_batch *b);
    int (*clock)(tuner_dev *d, int *sm_mhz, int *temp_c, pt_err *e);
    /* NULL: ptx/emu/tmap.h's encoding (emu, mock) */
    int (*tmap_encode)(tuner_dev *d, const emu_tmap_desc *m, uint8_t *out, pt_err *e);
} tuner_backend_ops;

struct tuner_dev {
    const tuner_backend_ops *ops;
    void *impl;
    tuner_devinfo info;
    tuner_outcome fail; /* class of the last failed call */
    bool sticky;        /* context lost: every later call fails */
};

/* Records the class of a failure (and stickiness); returns rc. */
int tuner_dev_fail(tuner_dev *d, int rc, tuner_outcome cls, bool sticky);

extern const tuner_backend_ops tuner_cuda_ops, tuner_emu_ops, tuner_mock_ops;

/* Fills the peak figures of di from its clocks and compute capability. */
void tuner_devinfo_peaks(tuner_devinfo *di);

#endif
