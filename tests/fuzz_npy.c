/* libFuzzer entry point for the .npy reader (tuner/npy.c), built by
 * scripts/fuzz.sh. The buffer has exactly size bytes (ASan catches a read
 * past it). Properties: a rejected file gives an error code and a message
 * naming it; an accepted one has numel = the product of its shape, its
 * data fully present, and converts to f32 (or says why not). */
#include "tuner/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tuner_npy n;
    pt_err e = {0};
    if (tuner_npy_parse(data, size, "f.npy", &n, &e) != PT_OK) {
        if (e.code == PT_OK || strncmp(e.msg, "f.npy", 5) != 0 || strchr(e.msg, '\n')) {
            fprintf(stderr, "bad failure: code %d msg '%s'\n", e.code, e.msg);
            abort();
        }
        return 0;
    }
    int64_t numel = 1;
    for (int i = 0; i < n.ndim; i++)
        numel *= n.shape[i];
    if (numel != n.numel || n.numel < 0 || n.ndim < 0 || n.ndim > TUNER_NPY_MAX_DIMS ||
        (size_t)n.numel * n.itemsize > size) {
        fprintf(stderr, "inconsistent array: ndim %d numel %lld itemsize %zu in %zu bytes\n",
                n.ndim, (long long)n.numel, n.itemsize, size);
        abort();
    }
    float *f = malloc((size_t)n.numel * sizeof *f + 1);
    if (f) {
        pt_err ce = {0};
        if (tuner_npy_to_dtype(&n, PT_F32, f, &ce) != PT_OK && (ce.code == PT_OK || !ce.msg[0]))
            abort();
        free(f);
    }
    tuner_npy_free(&n);
    return 0;
}
