/* The CUDA driver, loaded at run time (never linked): libcuda.so.1 through
 * dlopen. This is the first piece of the device backend; it answers what the
 * compile side needs to know (the driver's CUDA version caps the PTX
 * .version a module may use). */
#ifndef PT_DRIVER_H
#define PT_DRIVER_H

#include "ptx/base.h"

/* CUDA version of the installed driver (e.g. 13000), or PT_ENODRIVER with
 * "no CUDA driver found (libcuda.so.1)". */
int pt_driver_version(int *version, pt_err *e);

/* pt_driver_version, remembered across processes (tuner/driver.c: a cache
 * file keyed by the library search's inputs; a libcuda.so.1 already in the
 * process is asked directly). */
int pt_driver_version_cached(int *version, pt_err *e);

/* Highest PTX .version that both the compiler (compiler_max, 0 = unknown)
 * and the driver, when one is installed, accept (the driver's version from
 * pt_driver_version_cached). 0 when neither is known. */
int pt_toolchain_max_ptx(int compiler_max);

/* The driver loader, the one place libcuda.so.1 is opened for its API (the
 * cuda backend, tuner/cuda.c, and the engine runtime, runtime/runtime.c):
 * dlopen("libcuda.so.1"), then cuGetProcAddress_v2 of every names[i] (base
 * names, "cuMemAlloc") at the CUDA_VERSION of our cuda.h, so the driver
 * hands out the ABI our header declares; the pointer goes to *slots[i].
 * The first nreq names are required (a missing one is PT_ENODRIVER naming
 * it); the rest may be absent (their slot stays NULL). cuInit is the
 * caller's. *lib is the handle for pt_driver_close. PT_ENODRIVER with "no
 * CUDA driver found (libcuda.so.1)" without a driver or when built without
 * the CUDA headers. */
int pt_driver_open(void **lib, const char *const *names, void **const *slots, int n, int nreq,
                   pt_err *e);
void pt_driver_close(void **lib);

#endif
