/* The CUDA backend: the driver API through dlopen("libcuda.so.1"), never
 * linked, so ptxtune starts on machines without a GPU.
 *
 * Entry points are resolved with cuGetProcAddress_v2 by their base names
 * ("cuMemAlloc") at the header's CUDA_VERSION, so the driver hands out the
 * ABI version our cuda.h declares (cuMemAlloc_v2, cuEventElapsedTime_v2 ...);
 * each pointer's type is __typeof__ of the header's declaration, so a
 * mismatch is a compile error, not a crash. Every call goes through CU(),
 * which turns a CUresult into our error naming the call, and classes it:
 * illegal address & co are sticky faults (the context is dead until the
 * process exits), out-of-resources a resource limit, bad images compile
 * errors, the rest launch errors.
 *
 * One device, its primary context, one non-blocking stream, two events.
 * NVML (libnvidia-ml.so.1, also dlopen'd) gives the SM clock and the
 * temperature when it is there. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/backend_int.h"
#include "tuner/driver.h"

#ifdef PT_HAVE_CUDA_HEADERS
#include <cuda.h>

/* The driver entry points we use: base names, as cuGetProcAddress wants. */
#define CU_FNS(X)                                                                          \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                 \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)         \
    X(cuDeviceTotalMem) X(cuDeviceGetUuid) X(cuDevicePrimaryCtxRetain)                    \
    X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuStreamCreate) \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD)  \
    X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemsetD32Async) X(cuModuleLoadDataEx)               \
    X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute)  \
    X(cuLaunchKernelEx) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)               \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamBeginCapture)                   \
    X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch)                 \
    X(cuGraphExecDestroy) X(cuGraphDestroy)
/* Entry points a driver may lack (before compute capability 9 support):
 * their slots stay NULL and the feature is refused when used. */
#define CU_OPT_FNS(X) X(cuTensorMapEncodeTiled)

_Static_assert(sizeof(CUtensorMap) == EMU_TMAP_BYTES, "a tensor map is 128 bytes");

typedef struct cu_api {
    void *lib;
#define X(f) __typeof__(&f) f;
    CU_FNS(X)
    CU_OPT_FNS(X)
#undef X
} cu_api;

/* NVML, declared here (no nvml.h in the toolkit): the few calls we make. */
typedef struct nvml_dev_st *nvml_dev;
typedef struct nvml_api {
    void *lib;
    int (*init)(void);
    int (*shutdown)(void);
    int (*by_uuid)(const char *uuid, nvml_dev *d);
    int (*clock)(nvml_dev d, int type, unsigned *mhz);
    int (*temp)(nvml_dev d, int sensor, unsigned *c);
    nvml_dev dev;
} nvml_api;
enum { NVML_CLOCK_SM = 1, NVML_TEMPERATURE_GPU = 0 };

typedef struct cuda_dev {
    cu_api api;
    nvml_api nvml;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUevent ev0, ev1;
    uint32_t flush_seq;
} cuda_dev;

struct tuner_kernel {
    CUmodule mod;
    CUfunction fn;
    int max_threads, regs, static_smem;
    size_t smem_opted; /* dynamic smem opted in so far */
    char entry[128];
};

struct tuner_batch {
    tuner_kernel *k;
    pt_launch l;
    void *const *const *argsets;
    int nsets, count;
    CUgraph graph;
    CUgraphExec exec;
};

/* Outcome class of a failed call, and whether the context is gone. */
static tuner_outcome classify(CUresult r, bool *sticky)
{
    *sticky = false;
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
        *sticky = true;
        return TUNER_FAULT;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
        return TUNER_RESOURCE_LIMIT;
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_INVALID_SOURCE:
        return TUNER_COMPILE_ERROR;
    default:
        return TUNER_LAUNCH_ERROR;
    }
}

static int status_of(tuner_outcome cls, CUresult r)
{
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return PT_ENOMEM;
    switch (cls) {
    case TUNER_RESOURCE_LIMIT: return PT_ERANGE;
    case TUNER_COMPILE_ERROR: return PT_ECOMPILE;
    default: return PT_EIO;
    }
}

/* "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
static int cu_fail(const cu_api *api, tuner_dev *d, pt_err *e, CUresult r, const char *call,
                   const char *detail)
{
    const char *name = NULL, *text = NULL;
    if (!api->cuGetErrorName || api->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (!api->cuGetErrorString || api->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    bool sticky;
    tuner_outcome cls = classify(r, &sticky);
    int rc = status_of(cls, r);
    char num[32];
    snprintf(num, sizeof num, "CUresult %d", (int)r);
    pt_errf(e, rc, "%s: %s (%s)%s%s", call, name ? name : num, text ? text : "no description",
            detail && *detail ? ": " : "", detail ? detail : "");
    if (d)
        tuner_dev_fail(d, rc, cls, sticky);
    return rc;
}

/* Every driver call: CU(d, e, cuFn, args...) -> PT_OK or our error. */
#define CU(d, e, fn, ...)                                                                   \
    cu_check((d), (e), ((cuda_dev *)(d)->impl)->api.fn(__VA_ARGS__), #fn)
static int cu_check(tuner_dev *d, pt_err *e, CUresult r, const char *call)
{
    return r == CUDA_SUCCESS ? PT_OK : cu_fail(&((cuda_dev *)d->impl)->api, d, e, r, call, NULL);
}
/* The same for code without a device yet (the listing, opening). */
#define CUA(api, e, fn, ...) cua_check((api), (e), (api)->fn(__VA_ARGS__), #fn)
static int cua_check(const cu_api *api, pt_err *e, CUresult r, const char *call)
{
    return r == CUDA_SUCCESS ? PT_OK : cu_fail(api, NULL, e, r, call, NULL);
}

static void api_close(cu_api *api)
{
    pt_driver_close(&api->lib);
    memset(api, 0, sizeof *api);
}

/* The shared loader (tuner/driver.c) for every entry point, then cuInit. */
static int api_open(cu_api *api, pt_err *e)
{
    memset(api, 0, sizeof *api);
#define NAME(f) #f,
#define SLOT(f) (void **)&api->f,
    static const char *const names[] = {CU_FNS(NAME) CU_OPT_FNS(NAME)};
    void **const slots[] = {CU_FNS(SLOT) CU_OPT_FNS(SLOT)};
    static const char *const req[] = {CU_FNS(NAME)};
#undef NAME
#undef SLOT
    int n = (int)(sizeof names / sizeof names[0]);
    int rc = pt_driver_open(&api->lib, names, slots, n, (int)(sizeof req / sizeof req[0]), e);
    if (!rc)
        rc = CUA(api, e, cuInit, 0);
    if (rc)
        api_close(api);
    return rc;
}

/* Everything cuDeviceGetAttribute & co say about one device; no context. */
static int query(const cu_api *api, CUdevice dev, int ordinal, tuner_devinfo *di, pt_err *e)
{
    memset(di, 0, sizeof *di);
    strcpy(di->backend, "cuda");
    di->ordinal = ordinal;
    int rc = CUA(api, e, cuDeviceGetName, di->name, (int)sizeof di->name, dev);
    static const struct {
        CUdevice_attribute a;
        size_t off;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(tuner_devinfo, cc_major)},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(tuner_devinfo, cc_minor)},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(tuner_devinfo, sm_count)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(tuner_devinfo, smem_optin)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, offsetof(tuner_devinfo, smem_per_sm)},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, offsetof(tuner_devinfo, regs_per_sm)},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(tuner_devinfo, max_threads_per_block)},
        {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, offsetof(tuner_devinfo, clock_khz)},
        {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, offsetof(tuner_devinfo, mem_clock_khz)},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, offsetof(tuner_devinfo, mem_bus_bits)},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0] && !rc; i++)
        rc = CUA(api, e, cuDeviceGetAttribute, (int *)((char *)di + attrs[i].off), attrs[i].a, dev);
    int l2 = 0;
    if (!rc)
        rc = CUA(api, e, cuDeviceGetAttribute, &l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    di->l2_bytes = l2;
    size_t total = 0;
    if (!rc)
        rc = CUA(api, e, cuDeviceTotalMem, &total, dev);
    di->total_mem = (int64_t)total;
    CUuuid u;
    if (!rc)
        rc = CUA(api, e, cuDeviceGetUuid, &u, dev);
    if (!rc) {
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(di->uuid, sizeof di->uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
    }
    if (!rc)
        rc = CUA(api, e, cuDriverGetVersion, &di->driver_version);
    tuner_devinfo_peaks(di);
    return rc;
}

int tuner_cuda_list(tuner_devinfo *out, int max, int *n, pt_err *e)
{
    *n = 0;
    cu_api api;
    int rc = api_open(&api, e);
    if (rc)
        return rc;
    int count = 0;
    rc = CUA(&api, e, cuDeviceGetCount, &count);
    for (int i = 0; i < count && i < max && !rc; i++) {
        CUdevice dev;
        rc = CUA(&api, e, cuDeviceGet, &dev, i);
        if (!rc)
            rc = query(&api, dev, i, &out[i], e);
    }
    if (!rc)
        *n = count;
    api_close(&api);
    return rc;
}

static void nvml_open(nvml_api *n, const char *uuid)
{
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib)
        return;
    *(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
    *(void **)&n->by_uuid = dlsym(n->lib, "nvmlDeviceGetHandleByUUID");
    *(void **)&n->clock = dlsym(n->lib, "nvmlDeviceGetClockInfo");
    *(void **)&n->temp = dlsym(n->lib, "nvmlDeviceGetTemperature");
    if (!n->init || !n->shutdown || !n->by_uuid || !n->clock || n->init() != 0) {
        dlclose(n->lib);
        memset(n, 0, sizeof *n);
        return;
    }
    if (n->by_uuid(uuid, &n->dev) != 0)
        n->dev = NULL;
}

static void nvml_close(nvml_api *n)
{
    if (!n->lib)
        return;
    n->shutdown();
    dlclose(n->lib);
    memset(n, 0, sizeof *n);
}

static cuda_dev *G(tuner_dev *d) { return d->impl; }

static int cuda_open(tuner_dev *d, const tuner_dev_opts *o, pt_err *e)
{
    cuda_dev *c = calloc(1, sizeof *c);
    if (!c)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    int rc = api_open(&c->api, e);
    if (rc) {
        free(c);
        return rc;
    }
    d->impl = c;
    int count = 0;
    rc = CU(d, e, cuDeviceGetCount, &count);
    if (!rc && (o->ordinal < 0 || o->ordinal >= count))
        rc = pt_errf(e, PT_EINVAL, "no CUDA device %d (%d found)", o->ordinal, count);
    if (!rc)
        rc = CU(d, e, cuDeviceGet, &c->dev, o->ordinal);
    if (!rc)
        rc = query(&c->api, c->dev, o->ordinal, &d->info, e);
    if (!rc)
        rc = CU(d, e, cuDevicePrimaryCtxRetain, &c->ctx, c->dev);
    if (!rc)
        rc = CU(d, e, cuCtxSetCurrent, c->ctx);
    if (!rc)
        rc = CU(d, e, cuStreamCreate, &c->stream, CU_STREAM_NON_BLOCKING);
    if (!rc)
        rc = CU(d, e, cuEventCreate, &c->ev0, CU_EVENT_DEFAULT);
    if (!rc)
        rc = CU(d, e, cuEventCreate, &c->ev1, CU_EVENT_DEFAULT);
    if (rc) {
        d->ops->close(d);
        return rc;
    }
    nvml_open(&c->nvml, d->info.uuid);
    return PT_OK;
}

/* Teardown ignores errors: after a fault nothing here can succeed, and the
 * process is about to exit anyway. */
static void cuda_close(tuner_dev *d)
{
    cuda_dev *c = G(d);
    if (!c)
        return;
    if (c->ev0)
        c->api.cuEventDestroy(c->ev0);
    if (c->ev1)
        c->api.cuEventDestroy(c->ev1);
    if (c->stream)
        c->api.cuStreamDestroy(c->stream);
    if (c->ctx)
        c->api.cuDevicePrimaryCtxRelease(c->dev);
    nvml_close(&c->nvml);
    api_close(&c->api);
    free(c);
    d->impl = NULL;
}

static int cuda_alloc(tuner_dev *d, size_t bytes, tuner_ptr *p, pt_err *e)
{
    CUdeviceptr dp = 0;
    int rc = CU(d, e, cuMemAlloc, &dp, bytes ? bytes : 1);
    *p = rc ? 0 : (tuner_ptr)dp;
    return rc;
}

static void cuda_free(tuner_dev *d, tuner_ptr p)
{
    pt_err e = {0};
    CU(d, &e, cuMemFree, (CUdeviceptr)p);
}

/* Copies are synchronous (cuMemcpy waits for earlier work on the legacy
 * stream; we sync our stream first so a kernel's fault is reported here
 * under the stream's name rather than lost). */
static int cuda_write(tuner_dev *d, tuner_ptr dst, const void *src, size_t n, pt_err *e)
{
    int rc = CU(d, e, cuStreamSynchronize, G(d)->stream);
    return rc ? rc : CU(d, e, cuMemcpyHtoD, (CUdeviceptr)dst, src, n);
}

static int cuda_read(tuner_dev *d, tuner_ptr src, void *dst, size_t n, pt_err *e)
{
    int rc = CU(d, e, cuStreamSynchronize, G(d)->stream);
    return rc ? rc : CU(d, e, cuMemcpyDtoH, dst, (CUdeviceptr)src, n);
}

static int cuda_fill(tuner_dev *d, tuner_ptr dst, uint8_t byte, size_t n, pt_err *e)
{
    int rc = CU(d, e, cuStreamSynchronize, G(d)->stream);
    return rc ? rc : CU(d, e, cuMemsetD8, (CUdeviceptr)dst, byte, n);
}

/* The first ".entry NAME" of the PTX text, for images without an entry. */
static bool first_entry(const char *ptx, size_t len, char *out, size_t n)
{
    const char *tag = ".entry";
    for (size_t i = 0; ptx && i + 6 < len; i++) {
        if (memcmp(ptx + i, tag, 6) != 0 || (ptx[i + 6] != ' ' && ptx[i + 6] != '\t'))
            continue;
        size_t j = i + 6;
        while (j < len && (ptx[j] == ' ' || ptx[j] == '\t'))
            j++;
        size_t k = 0;
        while (j < len && k + 1 < n && ptx[j] != '(' && ptx[j] != ' ' && ptx[j] != '\n')
            out[k++] = ptx[j++];
        out[k] = '\0';
        return k > 0;
    }
    return false;
}

/* NN of an arch-specific ".target sm_NNa" in the PTX text (0: none): the
 * JIT is then told CU_TARGET_COMPUTE_NNA explicitly, since its default
 * target (the context's compute_NN) need not accept sm_90a-only code (sm90
 * ref 7.1). */
static int arch_specific_target(const char *ptx, size_t len)
{
    for (size_t i = 0; ptx && i + 11 < len; i++) {
        if (memcmp(ptx + i, ".target", 7) != 0)
            continue;
        size_t j = i + 7;
        while (j < len && (ptx[j] == ' ' || ptx[j] == '\t'))
            j++;
        if (j + 3 >= len || memcmp(ptx + j, "sm_", 3) != 0)
            return 0;
        int nn = 0;
        for (j += 3; j < len && ptx[j] >= '0' && ptx[j] <= '9'; j++)
            nn = nn * 10 + (ptx[j] - '0');
        return j < len && ptx[j] == 'a' && nn < 1000 ? nn : 0;
    }
    return 0;
}

/* The cubin when there is one (compiled by the compile gate for this very
 * device); the PTX through the driver JIT otherwise, or when the cubin is
 * for another architecture. The JIT's error log becomes the message. */
static int cuda_load(tuner_dev *d, const tuner_image *img, tuner_kernel **out, pt_err *e)
{
    cuda_dev *c = G(d);
    tuner_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    if (img->entry)
        snprintf(k->entry, sizeof k->entry, "%s", img->entry);
    else if (!first_entry(img->ptx, img->ptx_len, k->entry, sizeof k->entry)) {
        free(k);
        return tuner_dev_fail(d, pt_errf(e, PT_EINVAL, "no entry name and no .entry in the PTX"),
                              TUNER_LAUNCH_ERROR, false);
    }
    CUresult r = CUDA_ERROR_INVALID_IMAGE;
    const char *call = "cuModuleLoadDataEx";
    char info[4096] = "", errlog[4096] = "";
    if (img->cubin)
        r = c->api.cuModuleLoadDataEx(&k->mod, img->cubin, 0, NULL, NULL);
    bool try_ptx = img->ptx && (!img->cubin || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
                                r == CUDA_ERROR_INVALID_IMAGE);
    if (try_ptx) {
        char *text = malloc(img->ptx_len + 1);
        if (!text) {
            free(k);
            return pt_errf(e, PT_ENOMEM, "out of memory");
        }
        memcpy(text, img->ptx, img->ptx_len);
        text[img->ptx_len] = '\0';
        int nn = arch_specific_target(img->ptx, img->ptx_len);
        CUjit_option opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_LOG_VERBOSE, CU_JIT_TARGET};
        void *val[] = {info, (void *)(uintptr_t)sizeof info, errlog,
                       (void *)(uintptr_t)sizeof errlog, (void *)(uintptr_t)1,
                       (void *)(uintptr_t)(CU_COMPUTE_ACCELERATED_TARGET_BASE + nn)};
        r = c->api.cuModuleLoadDataEx(&k->mod, text, nn ? 6u : 5u, opt, val);
        call = "cuModuleLoadDataEx (PTX JIT)";
        free(text);
    }
    if (r != CUDA_SUCCESS) {
        for (char *p = errlog; *p; p++)
            if (*p == '\n')
                *p = ' ';
        int rc = cu_fail(&c->api, d, e, r, call, errlog);
        free(k);
        return rc;
    }
    int rc = CU(d, e, cuModuleGetFunction, &k->fn, k->mod, k->entry);
    if (!rc)
        rc = CU(d, e, cuFuncGetAttribute, &k->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn);
    if (!rc)
        rc = CU(d, e, cuFuncGetAttribute, &k->regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->fn);
    if (!rc)
        rc = CU(d, e, cuFuncGetAttribute, &k->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn);
    if (rc) {
        c->api.cuModuleUnload(k->mod);
        free(k);
        return rc;
    }
    k->smem_opted = 48 << 10;
    *out = k;
    return PT_OK;
}

/* Teardown calls go out even on a dead context (they fail harmlessly
 * there), so the driver can release what it holds. */
static void cuda_unload(tuner_dev *d, tuner_kernel *k)
{
    G(d)->api.cuModuleUnload(k->mod);
    free(k);
}

/* Checks a block against what the kernel and the device can run, and opts
 * in to more than 48 KB of dynamic shared memory. */
static int prepare_launch(tuner_dev *d, tuner_kernel *k, const pt_launch *l, pt_err *e)
{
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (threads > (uint64_t)k->max_threads)
        return tuner_dev_fail(d, pt_errf(e, PT_ERANGE,
                                         "block of %llu threads exceeds the %d kernel '%s' can run (%d registers per thread)",
                                         (unsigned long long)threads, k->max_threads, k->entry, k->regs),
                              TUNER_RESOURCE_LIMIT, false);
    if (l->smem + (size_t)k->static_smem > (size_t)d->info.smem_optin)
        return tuner_dev_fail(d, pt_errf(e, PT_ERANGE,
                                         "%zu bytes of dynamic + %d static shared memory exceed the device's %d per block",
                                         l->smem, k->static_smem, d->info.smem_optin),
                              TUNER_RESOURCE_LIMIT, false);
    if (l->smem > k->smem_opted) {
        int rc = CU(d, e, cuFuncSetAttribute, k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    (int)l->smem);
        if (rc)
            return rc;
        k->smem_opted = l->smem;
    }
    return PT_OK;
}

/* A cluster launch passes its shape as CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
 * (sm90 ref 7.3: the safe path whether or not the PTX has
 * .reqnctapercluster). */
static int launch1(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e)
{
    CUlaunchAttribute at[1];
    memset(at, 0, sizeof at);
    bool cluster = l->cluster[0] || l->cluster[1] || l->cluster[2];
    if (cluster) {
        at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at[0].value.clusterDim.x = l->cluster[0];
        at[0].value.clusterDim.y = l->cluster[1];
        at[0].value.clusterDim.z = l->cluster[2];
    }
    CUlaunchConfig cfg = {
        .gridDimX = l->grid[0], .gridDimY = l->grid[1], .gridDimZ = l->grid[2],
        .blockDimX = l->block[0], .blockDimY = l->block[1], .blockDimZ = l->block[2],
        .sharedMemBytes = (unsigned)l->smem, .hStream = G(d)->stream,
        .attrs = cluster ? at : NULL, .numAttrs = cluster ? 1u : 0u,
    };
    return CU(d, e, cuLaunchKernelEx, &cfg, k->fn, (void **)args, NULL);
}

/* The driver's encoder; d's parameters are already validated (backend.c),
 * so a refusal here is the driver's own word. */
static int cuda_tmap_encode(tuner_dev *d, const emu_tmap_desc *m, uint8_t *out, pt_err *e)
{
    cuda_dev *c = G(d);
    if (!c->api.cuTensorMapEncodeTiled)
        return tuner_dev_fail(d, pt_errf(e, PT_EUNSUPPORTED,
                                         "the CUDA driver has no cuTensorMapEncodeTiled (tensor "
                                         "maps need a CUDA 12 driver and compute capability 9)"),
                              TUNER_LAUNCH_ERROR, false);
    cuuint64_t dims[EMU_TMAP_MAX_RANK], strides[EMU_TMAP_MAX_RANK];
    cuuint32_t box[EMU_TMAP_MAX_RANK], es[EMU_TMAP_MAX_RANK];
    for (int i = 0; i < EMU_TMAP_MAX_RANK; i++) {
        dims[i] = m->dims[i];
        strides[i] = i + 1 < EMU_TMAP_MAX_RANK ? m->strides[i] : 0;
        box[i] = m->box[i];
        es[i] = m->estrides[i];
    }
    CUtensorMap map; /* alignas(128), as the driver wants (64 at least) */
    int rc = CU(d, e, cuTensorMapEncodeTiled, &map, (CUtensorMapDataType)m->dtype,
                (cuuint32_t)m->rank, (void *)(uintptr_t)m->gaddr, dims, strides, box, es,
                (CUtensorMapInterleave)m->interleave, (CUtensorMapSwizzle)m->swizzle,
                (CUtensorMapL2promotion)m->l2promo, (CUtensorMapFloatOOBfill)m->oobfill);
    if (!rc)
        memcpy(out, &map, EMU_TMAP_BYTES);
    return rc;
}

static int cuda_launch(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e)
{
    int rc = prepare_launch(d, k, l, e);
    return rc ? rc : launch1(d, k, l, args, e);
}

static int cuda_sync(tuner_dev *d, pt_err *e) { return CU(d, e, cuStreamSynchronize, G(d)->stream); }

static int cuda_batch_new(tuner_dev *d, tuner_kernel *k, const pt_launch *l,
                          void *const *const *argsets, int nsets, int count, bool graph,
                          tuner_batch **out, pt_err *e)
{
    int rc = prepare_launch(d, k, l, e);
    if (rc)
        return rc;
    tuner_batch *b = calloc(1, sizeof *b);
    if (!b)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    *b = (tuner_batch){.k = k, .l = *l, .argsets = argsets, .nsets = nsets, .count = count};
    if (graph) {
        cuda_dev *c = G(d);
        rc = CU(d, e, cuStreamBeginCapture, c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        for (int i = 0; i < count && !rc; i++)
            rc = launch1(d, k, l, argsets[i % nsets], e);
        CUgraph g = NULL;
        CUresult r = c->api.cuStreamEndCapture(c->stream, &g);
        if (!rc && r != CUDA_SUCCESS)
            rc = cu_fail(&c->api, d, e, r, "cuStreamEndCapture", NULL);
        b->graph = g;
        if (!rc)
            rc = CU(d, e, cuGraphInstantiateWithFlags, &b->exec, g, 0);
        if (rc) {
            d->ops->batch_free(d, b);
            return rc;
        }
    }
    *out = b;
    return PT_OK;
}

static int cuda_batch_time(tuner_dev *d, tuner_batch *b, tuner_ptr flush, size_t flush_bytes,
                           double *ms, pt_err *e)
{
    cuda_dev *c = G(d);
    int rc = PT_OK;
    if (flush_bytes) /* a new value each time, so the writes are real */
        rc = CU(d, e, cuMemsetD32Async, (CUdeviceptr)flush, ++c->flush_seq, flush_bytes / 4, c->stream);
    if (!rc)
        rc = CU(d, e, cuEventRecord, c->ev0, c->stream);
    if (!rc && b->exec)
        rc = CU(d, e, cuGraphLaunch, b->exec, c->stream);
    for (int i = 0; i < b->count && !rc && !b->exec; i++)
        rc = launch1(d, b->k, &b->l, b->argsets[i % b->nsets], e);
    if (!rc)
        rc = CU(d, e, cuEventRecord, c->ev1, c->stream);
    if (!rc)
        rc = CU(d, e, cuEventSynchronize, c->ev1);
    float f = 0;
    if (!rc)
        rc = CU(d, e, cuEventElapsedTime, &f, c->ev0, c->ev1);
    *ms = f;
    return rc;
}

static void cuda_batch_free(tuner_dev *d, tuner_batch *b)
{
    if (b->exec)
        G(d)->api.cuGraphExecDestroy(b->exec);
    if (b->graph)
        G(d)->api.cuGraphDestroy(b->graph);
    free(b);
}

static int cuda_clock(tuner_dev *d, int *sm_mhz, int *temp_c, pt_err *e)
{
    nvml_api *n = &G(d)->nvml;
    if (!n->lib || !n->dev)
        return pt_errf(e, PT_EUNSUPPORTED, "NVML not available (libnvidia-ml.so.1)");
    unsigned v = 0, t = 0;
    if (n->clock(n->dev, NVML_CLOCK_SM, &v) != 0)
        return pt_errf(e, PT_EIO, "nvmlDeviceGetClockInfo failed");
    *sm_mhz = (int)v;
    if (n->temp && n->temp(n->dev, NVML_TEMPERATURE_GPU, &t) == 0)
        *temp_c = (int)t;
    return PT_OK;
}

#else /* no CUDA headers at build time: the backend reports itself missing */

typedef struct tuner_kernel tuner_kernel;

static int cuda_open(tuner_dev *d, const tuner_dev_opts *o, pt_err *e)
{
    (void)d;
    (void)o;
    return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1): built without CUDA headers");
}

int tuner_cuda_list(tuner_devinfo *out, int max, int *n, pt_err *e)
{
    (void)out;
    (void)max;
    *n = 0;
    return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1): built without CUDA headers");
}

#define cuda_close NULL
#define cuda_alloc NULL
#define cuda_free NULL
#define cuda_write NULL
#define cuda_read NULL
#define cuda_fill NULL
#define cuda_load NULL
#define cuda_unload NULL
#define cuda_launch NULL
#define cuda_sync NULL
#define cuda_batch_new NULL
#define cuda_batch_time NULL
#define cuda_batch_free NULL
#define cuda_clock NULL
#define cuda_tmap_encode NULL
#endif

const tuner_backend_ops tuner_cuda_ops = {
    .name = "cuda",
    .can_time = true,
    .guard_bytes = 4096,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .write = cuda_write,
    .read = cuda_read,
    .fill = cuda_fill,
    .load = cuda_load,
    .unload = cuda_unload,
    .launch = cuda_launch,
    .sync = cuda_sync,
    .batch_new = cuda_batch_new,
    .batch_time = cuda_batch_time,
    .batch_free = cuda_batch_free,
    .clock = cuda_clock,
    .tmap_encode = cuda_tmap_encode,
};
