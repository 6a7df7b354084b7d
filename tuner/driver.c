#include "tuner/driver.h"

#include <dlfcn.h>

#include "ptx/target.h"

#ifdef PT_HAVE_CUDA_HEADERS
#include <cuda.h>
#endif

int pt_driver_version(int *version, pt_err *e)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1)");
    typedef int (*get_version_fn)(int *);
    get_version_fn fn;
    *(void **)&fn = dlsym(h, "cuDriverGetVersion");
    int rc = PT_OK;
    if (!fn)
        rc = pt_errf(e, PT_ENODRIVER, "libcuda.so.1 has no cuDriverGetVersion");
    else if (fn(version) != 0)
        rc = pt_errf(e, PT_ENODRIVER, "cuDriverGetVersion failed");
    dlclose(h);
    return rc;
}

int pt_toolchain_max_ptx(int compiler_max)
{
    int v = compiler_max, dv;
    pt_err e = {0};
    if (pt_driver_version(&dv, &e) == PT_OK) {
        int d = pt_ptx_for_cuda(dv);
        if (d && (!v || d < v))
            v = d;
    }
    return v;
}

void pt_driver_close(void **lib)
{
    if (*lib)
        dlclose(*lib);
    *lib = NULL;
}

int pt_driver_open(void **lib, const char *const *names, void **const *slots, int n, int nreq,
                   pt_err *e)
{
    *lib = NULL;
    for (int i = 0; i < n; i++)
        *slots[i] = NULL;
#ifdef PT_HAVE_CUDA_HEADERS
    *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!*lib)
        return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1)");
    __typeof__(&cuGetProcAddress) gpa;
    *(void **)&gpa = dlsym(*lib, "cuGetProcAddress_v2");
    if (!gpa) {
        pt_driver_close(lib);
        return pt_errf(e, PT_ENODRIVER,
                       "libcuda.so.1 has no cuGetProcAddress_v2 (a CUDA 12 or newer driver is needed)");
    }
    for (int i = 0; i < n; i++) {
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = gpa(names[i], slots[i], CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st);
        if (r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && *slots[i])
            continue;
        *slots[i] = NULL;
        if (i >= nreq)
            continue;
        pt_driver_close(lib);
        return pt_errf(e, PT_ENODRIVER,
                       "libcuda.so.1 lacks %s for CUDA %d (cuGetProcAddress_v2: CUresult %d, "
                       "status %d); update the driver",
                       names[i], CUDA_VERSION, (int)r, (int)st);
    }
    return PT_OK;
#else
    (void)names;
    (void)nreq;
    return pt_errf(e, PT_ENODRIVER,
                   "no CUDA driver found (libcuda.so.1): built without CUDA headers");
#endif
}
