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

/* Highest PTX .version that both the compiler (compiler_max, 0 = unknown)
 * and the driver, when one is installed, accept. 0 when neither is known. */
int pt_toolchain_max_ptx(int compiler_max);

#endif
