#include "tuner/driver.h"

#include <dlfcn.h>

#include "ptx/target.h"

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
