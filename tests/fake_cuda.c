/* A fake libcuda.so.1 for tests: the driver API calls tuner/cuda.c makes,
 * implemented over the CPU emulator, so the cuda backend (dlopen,
 * cuGetProcAddress_v2, queries, module load with JIT logs, launches,
 * events, graphs, sticky faults, hangs) runs on machines without a GPU.
 *
 * It behaves like a driver where tuner/cuda.c can tell: cubins (ELF) are
 * refused with CUDA_ERROR_NO_BINARY_FOR_GPU (so the PTX JIT fallback runs),
 * bad PTX gives CUDA_ERROR_INVALID_PTX with the parser's message in the
 * JIT error log, launches run at once but report their faults at the next
 * synchronising call and then stick (CUDA_ERROR_ILLEGAL_ADDRESS for an
 * out-of-bounds access), a kernel past the emulator's step cap "hangs"
 * (every later synchronising call blocks forever), events read the wall
 * clock. One device; this is test code, so its state is one global, as a
 * driver's is.
 *
 * Environment: FAKE_CUDA_CC (e.g. 90, the default), FAKE_CUDA_SMS (the SM count, 4),
 * FAKE_CUDA_MAX_THREADS
 * (the per-kernel block limit, 1024), FAKE_CUDA_MAX_STEPS (emulator step
 * cap that counts as a hang, 2^26). */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptx/emu/emu.h"
#include "ptx/emu/tmap.h"
#include "ptx/parse.h"

typedef struct fake_fn {
    emu_kernel *k;
    CUcontext ctx; /* its module's */
    ptx_fn *f;
    int max_dyn;
    int static_smem;
} fake_fn;

typedef struct fake_module {
    ptx_module *m;
    CUcontext ctx; /* current when it was loaded: its functions launch only there */
    fake_fn *fns[64];
    int nfns;
} fake_module;

typedef struct fake_launch {
    fake_fn *fn;
    emu_launch l;
    int nparams;
    unsigned char *blob;  /* parameter values, back to back */
    size_t off[64];
} fake_launch;

typedef struct fake_graph {
    fake_launch *v;
    int n, cap;
} fake_graph;

static struct {
    bool init;
    emu_ctx *emu;
    CUresult sticky;  /* set by a faulting launch, reported from then on */
    bool pending;     /* the fault has not been reported yet */
    bool hung;
    bool capturing;
    fake_graph *cap;
    int stream_tag, event_tag, ctx_tag;
    int primary_retains; /* retained and not released (fake_cuda_primary_retains) */
    int primary_retain_calls;
    int last_grid_x; /* of the last cuLaunchKernelEx */
} G;

/* Contexts (issue 14): each thread has a stack of current contexts, as the
 * driver keeps; the primary context is &G.ctx_tag, cuCtxCreate makes others.
 * Modules load in the current context and their functions launch only there
 * (CUDA_ERROR_INVALID_CONTEXT with none current, or another one). */
enum { FAKE_CTX_DEPTH = 16 };
static _Thread_local CUcontext ctx_stack[FAKE_CTX_DEPTH];
static _Thread_local int ctx_depth;

static CUcontext ctx_current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

/* For tests (dlsym): how many primary-context retains are outstanding, and
 * how many were made since the library was loaded. */
int fake_cuda_primary_retains(void);
int fake_cuda_primary_retains(void) { return G.primary_retains; }
int fake_cuda_primary_retain_calls(void);
int fake_cuda_primary_retain_calls(void) { return G.primary_retain_calls; }
int fake_cuda_last_grid_x(void);
int fake_cuda_last_grid_x(void) { return G.last_grid_x; }

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Calls that wait for the device: a hang blocks here, a fault shows here. */
static CUresult wait_device(void)
{
    while (G.hung)
        pause();
    if (G.sticky)
        G.pending = false;
    return G.sticky;
}

static CUresult f_init(unsigned int flags)
{
    (void)flags;
    if (!G.init) {
        emu_opts o = emu_default_opts();
        o.detect_uninit = o.detect_race = o.detect_divergence = o.detect_cp_async = false;
        o.max_steps = (uint64_t)env_int("FAKE_CUDA_MAX_STEPS", 1 << 26);
        o.smem_shift = EMU_SMEM_SHIFT_DEFAULT; /* no kernel may rely on a zero shared base */
        G.emu = emu_new(&o);
        G.init = true;
    }
    return CUDA_SUCCESS;
}

/* The driver's state goes with the library (dlclose or exit). */
__attribute__((destructor)) static void fake_unload(void)
{
    emu_free(G.emu);
    G.emu = NULL;
    G.init = false;
}

CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

static CUresult f_error_name(CUresult r, const char **s)
{
    switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_MISALIGNED_ADDRESS: *s = "CUDA_ERROR_MISALIGNED_ADDRESS"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *s = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
    case CUDA_ERROR_INVALID_CLUSTER_SIZE: *s = "CUDA_ERROR_INVALID_CLUSTER_SIZE"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult f_error_string(CUresult r, const char **s)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_INVALID_PTX: *s = "a PTX JIT compilation failed"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "no kernel image is available for execution on the device"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    default: *s = "fake driver error"; break;
    }
    return CUDA_SUCCESS;
}

static CUresult f_device_count(int *n)
{
    *n = 1;
    return CUDA_SUCCESS;
}

static CUresult f_device_get(CUdevice *d, int ordinal)
{
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

static CUresult f_device_name(char *name, int len, CUdevice d)
{
    (void)d;
    strncpy(name, "Fake GPU (ptxtune emulator)", (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

static CUresult f_device_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    int cc = env_int("FAKE_CUDA_CC", 90);
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = env_int("FAKE_CUDA_SMS", 4); break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 1 << 20; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

static CUresult f_total_mem(size_t *b, CUdevice d)
{
    (void)d;
    *b = (size_t)16 << 30;
    return CUDA_SUCCESS;
}

static CUresult f_uuid(CUuuid *u, CUdevice d)
{
    (void)d;
    for (int i = 0; i < 16; i++)
        u->bytes[i] = (char)(0xf0 + i);
    return CUDA_SUCCESS;
}

static CUresult f_ctx_retain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = (CUcontext)&G.ctx_tag;
    G.primary_retains++;
    G.primary_retain_calls++;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_release(CUdevice d)
{
    (void)d;
    if (G.primary_retains > 0)
        G.primary_retains--;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_set(CUcontext c)
{
    if (G.sticky)
        return G.sticky;
    if (!c) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_depth)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_get(CUcontext *c)
{
    *c = ctx_current();
    return CUDA_SUCCESS;
}

static CUresult f_ctx_push(CUcontext c)
{
    if (!c || ctx_depth == FAKE_CTX_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_pop(CUcontext *c)
{
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext top = ctx_stack[--ctx_depth];
    if (c)
        *c = top;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_device(CUdevice *d)
{
    if (!ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    *d = 0;
    return CUDA_SUCCESS;
}

/* A context of the caller's own (not the primary one), made current. */
static CUresult f_ctx_create(CUcontext *c, CUctxCreateParams *params, unsigned int flags,
                             CUdevice d)
{
    (void)params;
    (void)flags;
    if (d != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *c = (CUcontext)calloc(1, 16);
    if (!*c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = f_ctx_push(*c);
    if (r)
        free(*c);
    return r;
}

static CUresult f_ctx_destroy(CUcontext c)
{
    if (!c || c == (CUcontext)&G.ctx_tag)
        return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == c) { /* the driver pops it from this thread's stack */
            memmove(&ctx_stack[i], &ctx_stack[i + 1], (size_t)(ctx_depth - i - 1) * sizeof c);
            ctx_depth--;
            break;
        }
    free(c);
    return CUDA_SUCCESS;
}

static CUresult f_ctx_sync(void) { return wait_device(); }

static CUresult f_stream_create(CUstream *s, unsigned int flags)
{
    (void)flags;
    *s = (CUstream)&G.stream_tag;
    return G.sticky;
}

static CUresult f_stream_destroy(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}

static CUresult f_stream_sync(CUstream s)
{
    (void)s;
    return wait_device();
}

static CUresult f_alloc(CUdeviceptr *p, size_t n)
{
    if (G.sticky)
        return G.sticky;
    uint64_t a = emu_alloc(G.emu, n, "cuMemAlloc");
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)a;
    return CUDA_SUCCESS;
}

static CUresult f_free(CUdeviceptr p)
{
    (void)p; /* the emulator keeps allocations until it goes */
    return G.sticky;
}

static CUresult f_htod(CUdeviceptr dst, const void *src, size_t n)
{
    CUresult r = wait_device();
    pt_err e = {0};
    return r ? r : emu_write(G.emu, dst, src, n, &e) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult f_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    CUresult r = wait_device();
    pt_err e = {0};
    return r ? r : emu_read(G.emu, src, dst, n, &e) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult fill(CUdeviceptr dst, const void *pattern, size_t psize, size_t count)
{
    unsigned char buf[4096];
    size_t per = sizeof buf / psize;
    for (size_t i = 0; i < per; i++)
        memcpy(buf + i * psize, pattern, psize);
    pt_err e = {0};
    for (size_t done = 0; done < count; done += per) {
        size_t k = count - done < per ? count - done : per;
        if (emu_write(G.emu, dst + done * psize, buf, k * psize, &e))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult f_memset8(CUdeviceptr dst, unsigned char v, size_t n)
{
    CUresult r = wait_device();
    return r ? r : fill(dst, &v, 1, n);
}

static CUresult f_memset32_async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s)
{
    (void)s;
    return G.sticky ? G.sticky : fill(dst, &v, 4, n);
}

static char *find_opt(unsigned n, const CUjit_option *o, void **v, CUjit_option want, size_t *size,
                      CUjit_option size_opt)
{
    char *buf = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (o[i] == want)
            buf = v[i];
        if (o[i] == size_opt)
            *size = (size_t)(uintptr_t)v[i];
    }
    return buf;
}

static CUresult f_module_load(CUmodule *out, const void *image, unsigned n, CUjit_option *o, void **v)
{
    if (G.sticky)
        return G.sticky;
    if (!ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    const char *text = image;
    if (memcmp(text, "\177ELF", 4) == 0)
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    size_t esz = 0, isz = 0;
    char *elog = find_opt(n, o, v, CU_JIT_ERROR_LOG_BUFFER, &esz, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    char *ilog = find_opt(n, o, v, CU_JIT_INFO_LOG_BUFFER, &isz, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
    fake_module *fm = calloc(1, sizeof *fm);
    pt_err e = {0};
    if (ptx_parse(text, strlen(text), "jit.ptx", 0, &fm->m, &e)) {
        if (elog && esz) {
            strncpy(elog, e.msg, esz - 1);
            elog[esz - 1] = '\0';
        }
        free(fm);
        return CUDA_ERROR_INVALID_PTX;
    }
    if (ilog && isz) {
        strncpy(ilog, "fake JIT: parsed", isz - 1);
        ilog[isz - 1] = '\0';
    }
    fm->ctx = ctx_current();
    *out = (CUmodule)fm;
    return CUDA_SUCCESS;
}

static CUresult f_module_unload(CUmodule m)
{
    fake_module *fm = (fake_module *)m;
    for (int i = 0; i < fm->nfns; i++) {
        emu_kernel_free(fm->fns[i]->k);
        free(fm->fns[i]);
    }
    ptx_module_free(fm->m);
    free(fm);
    return CUDA_SUCCESS;
}

static CUresult f_get_function(CUfunction *out, CUmodule m, const char *name)
{
    fake_module *fm = (fake_module *)m;
    ptx_fn *f = NULL;
    for (size_t i = 0; i < fm->m->nfns; i++)
        if (strcmp(fm->m->fns[i]->name, name) == 0)
            f = fm->m->fns[i];
    if (!f || fm->nfns == 64)
        return CUDA_ERROR_NOT_FOUND;
    fake_fn *fn = calloc(1, sizeof *fn);
    pt_err e = {0};
    if (emu_load(G.emu, fm->m, name, &fn->k, &e)) {
        free(fn);
        return CUDA_ERROR_INVALID_PTX;
    }
    fn->f = f;
    fn->ctx = fm->ctx;
    fn->max_dyn = 48 << 10;
    for (size_t i = 0; i < f->nshared; i++)
        fn->static_smem += (int)f->shared[i].bytes;
    fm->fns[fm->nfns++] = fn;
    *out = (CUfunction)fn;
    return CUDA_SUCCESS;
}

static CUresult f_func_get(int *v, CUfunction_attribute a, CUfunction f)
{
    fake_fn *fn = (fake_fn *)f;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = env_int("FAKE_CUDA_MAX_THREADS", 1024); break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 32; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = fn->static_smem; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = fn->max_dyn; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

static CUresult f_func_set(CUfunction f, CUfunction_attribute a, int v)
{
    if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || v > 232448)
        return CUDA_ERROR_INVALID_VALUE;
    ((fake_fn *)f)->max_dyn = v;
    return CUDA_SUCCESS;
}

/* Runs one launch now (cl: a cluster shape, NULL none); its fault (or
 * hang) is reported later. */
static void execute_cl(fake_fn *fn, const emu_launch *l, const unsigned *cl, void **params)
{
    pt_err e = {0};
    if (emu_run_cluster(G.emu, fn->k, l, cl, false, (const void *const *)params, NULL, &e) == PT_OK ||
        !emu_nreports(G.emu))
        return;
    switch (emu_report_kind_of(G.emu, 0)) {
    case EMU_R_STEP_CAP:
    case EMU_R_DEADLOCK: G.hung = true; break;
    case EMU_R_MISALIGNED: G.sticky = CUDA_ERROR_MISALIGNED_ADDRESS; break;
    case EMU_R_TRAP: G.sticky = CUDA_ERROR_LAUNCH_FAILED; break;
    default: G.sticky = CUDA_ERROR_ILLEGAL_ADDRESS; break;
    }
    G.pending = true;
}

static void execute(fake_fn *fn, const emu_launch *l, void **params) { execute_cl(fn, l, NULL, params); }

static CUresult f_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)extra;
    if (G.sticky)
        return G.sticky;
    fake_fn *fn = (fake_fn *)f;
    if (!ctx_current() || ctx_current() != fn->ctx)
        return CUDA_ERROR_INVALID_CONTEXT; /* a function of another context's module */
    uint64_t threads = (uint64_t)c->blockDimX * c->blockDimY * c->blockDimZ;
    if (threads > (uint64_t)env_int("FAKE_CUDA_MAX_THREADS", 1024))
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    if (c->sharedMemBytes > (unsigned)fn->max_dyn)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned cl[3] = {1, 1, 1};
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            return CUDA_ERROR_NOT_SUPPORTED;
        cl[0] = c->attrs[i].value.clusterDim.x;
        cl[1] = c->attrs[i].value.clusterDim.y;
        cl[2] = c->attrs[i].value.clusterDim.z;
    }
    if (!cl[0] || !cl[1] || !cl[2] || c->gridDimX % cl[0] || c->gridDimY % cl[1] ||
        c->gridDimZ % cl[2] || cl[0] * cl[1] * cl[2] > 8)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (cl[0] * cl[1] * cl[2] > 1 && G.capturing)
        return CUDA_ERROR_NOT_SUPPORTED; /* graphs of cluster launches are not faked */
    emu_launch l = {{c->gridDimX, c->gridDimY, c->gridDimZ},
                    {c->blockDimX, c->blockDimY, c->blockDimZ},
                    c->sharedMemBytes};
    G.last_grid_x = (int)c->gridDimX;
    if (!G.capturing) {
        execute_cl(fn, &l, cl[0] * cl[1] * cl[2] > 1 ? cl : NULL, params);
        return CUDA_SUCCESS;
    }
    fake_graph *g = G.cap;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->v = realloc(g->v, (size_t)g->cap * sizeof *g->v);
    }
    fake_launch *fl = &g->v[g->n++];
    fl->fn = fn;
    fl->l = l;
    fl->nparams = (int)fn->f->nparams;
    size_t total = 0;
    for (int i = 0; i < fl->nparams; i++) {
        const ptx_param *p = &fn->f->params[i];
        fl->off[i] = total;
        total += p->array ? (size_t)p->array : (size_t)ptx_type_bits(p->type) / 8;
    }
    fl->blob = malloc(total ? total : 1);
    for (int i = 0; i < fl->nparams; i++) {
        const ptx_param *p = &fn->f->params[i];
        size_t n = p->array ? (size_t)p->array : (size_t)ptx_type_bits(p->type) / 8;
        memcpy(fl->blob + fl->off[i], params[i], n);
    }
    return CUDA_SUCCESS;
}

static CUresult f_event_create(CUevent *ev, unsigned int flags)
{
    (void)flags;
    *ev = (CUevent)calloc(1, sizeof(double));
    return G.sticky;
}

static CUresult f_event_destroy(CUevent ev)
{
    free(ev);
    return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent ev, CUstream s)
{
    (void)s;
    *(double *)ev = now_ms();
    return G.sticky;
}

static CUresult f_event_sync(CUevent ev)
{
    (void)ev;
    return wait_device();
}

static CUresult f_event_elapsed(float *ms, CUevent a, CUevent b)
{
    *ms = (float)(*(double *)b - *(double *)a);
    return G.sticky;
}

static CUresult f_begin_capture(CUstream s, CUstreamCaptureMode mode)
{
    (void)s;
    (void)mode;
    if (G.capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    G.capturing = true;
    G.cap = calloc(1, sizeof *G.cap);
    return G.sticky;
}

static CUresult f_end_capture(CUstream s, CUgraph *g)
{
    (void)s;
    if (!G.capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    G.capturing = false;
    *g = (CUgraph)G.cap;
    G.cap = NULL;
    return G.sticky;
}

static CUresult f_instantiate(CUgraphExec *x, CUgraph g, unsigned long long flags)
{
    (void)flags;
    *x = (CUgraphExec)g; /* the exec is the graph itself */
    return G.sticky;
}

static CUresult f_graph_launch(CUgraphExec x, CUstream s)
{
    (void)s;
    if (G.sticky)
        return G.sticky;
    fake_graph *g = (fake_graph *)x;
    for (int i = 0; i < g->n && !G.sticky && !G.hung; i++) {
        void *params[64];
        for (int p = 0; p < g->v[i].nparams; p++)
            params[p] = g->v[i].blob + g->v[i].off[p];
        execute(g->v[i].fn, &g->v[i].l, params);
    }
    return CUDA_SUCCESS;
}

static CUresult f_exec_destroy(CUgraphExec x)
{
    (void)x; /* freed with the graph */
    return CUDA_SUCCESS;
}

static CUresult f_graph_destroy(CUgraph g)
{
    fake_graph *fg = (fake_graph *)g;
    for (int i = 0; i < fg->n; i++)
        free(fg->v[i].blob);
    free(fg->v);
    free(fg);
    return CUDA_SUCCESS;
}

/* The driver's checks are the emulator's (every constraint of cuda.h's
 * comment, tmap.c); the blob is the emulator's, which its TMA decodes. */
static CUresult f_tmap_encode(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank,
                              void *gaddr, const cuuint64_t *dims, const cuuint64_t *strides,
                              const cuuint32_t *box, const cuuint32_t *estrides,
                              CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                              CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    if (!map || ((uintptr_t)map & 63) || rank < 1 || rank > EMU_TMAP_MAX_RANK)
        return CUDA_ERROR_INVALID_VALUE;
    emu_tmap_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = (int)dt;
    d.rank = (int)rank;
    d.gaddr = (uint64_t)(uintptr_t)gaddr;
    for (cuuint32_t i = 0; i < rank; i++) {
        d.dims[i] = dims[i];
        d.box[i] = box[i];
        d.estrides[i] = estrides[i];
        if (i + 1 < rank)
            d.strides[i] = strides[i];
    }
    d.interleave = (int)il;
    d.swizzle = (int)sw;
    d.l2promo = (int)l2;
    d.oobfill = (int)oob;
    pt_err e = {0};
    return emu_tmap_encode(&d, (uint8_t *)map, &e) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

typedef void (*any_fn)(void);
static const struct {
    const char *name;
    any_fn fn;
} table[] = {
#define E(name, f) {name, (any_fn)f}
    E("cuInit", f_init), E("cuDriverGetVersion", cuDriverGetVersion),
    E("cuGetErrorName", f_error_name), E("cuGetErrorString", f_error_string),
    E("cuDeviceGetCount", f_device_count), E("cuDeviceGet", f_device_get),
    E("cuDeviceGetName", f_device_name), E("cuDeviceGetAttribute", f_device_attr),
    E("cuDeviceTotalMem", f_total_mem), E("cuDeviceGetUuid", f_uuid),
    E("cuDevicePrimaryCtxRetain", f_ctx_retain), E("cuDevicePrimaryCtxRelease", f_ctx_release),
    E("cuCtxSetCurrent", f_ctx_set), E("cuCtxSynchronize", f_ctx_sync),
    E("cuCtxGetCurrent", f_ctx_get), E("cuCtxPushCurrent", f_ctx_push),
    E("cuCtxPopCurrent", f_ctx_pop), E("cuCtxGetDevice", f_ctx_device),
    E("cuCtxCreate", f_ctx_create), E("cuCtxDestroy", f_ctx_destroy),
    E("cuStreamCreate", f_stream_create), E("cuStreamDestroy", f_stream_destroy),
    E("cuStreamSynchronize", f_stream_sync), E("cuMemAlloc", f_alloc), E("cuMemFree", f_free),
    E("cuMemcpyHtoD", f_htod), E("cuMemcpyDtoH", f_dtoh), E("cuMemsetD8", f_memset8),
    E("cuMemsetD32Async", f_memset32_async), E("cuModuleLoadDataEx", f_module_load),
    E("cuModuleUnload", f_module_unload), E("cuModuleGetFunction", f_get_function),
    E("cuFuncGetAttribute", f_func_get), E("cuFuncSetAttribute", f_func_set),
    E("cuLaunchKernelEx", f_launch_ex), E("cuEventCreate", f_event_create),
    E("cuEventDestroy", f_event_destroy), E("cuEventRecord", f_event_record),
    E("cuEventSynchronize", f_event_sync), E("cuEventElapsedTime", f_event_elapsed),
    E("cuStreamBeginCapture", f_begin_capture), E("cuStreamEndCapture", f_end_capture),
    E("cuGraphInstantiateWithFlags", f_instantiate), E("cuGraphLaunch", f_graph_launch),
    E("cuGraphExecDestroy", f_exec_destroy), E("cuGraphDestroy", f_graph_destroy),
    E("cuTensorMapEncodeTiled", f_tmap_encode),
#undef E
};

/* Base names, as cuda.c asks for them; the requested ABI version is what
 * our cuda.h declares, and so are these functions' types (checked below). */
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0) {
            if (cudaVersion < 12000) {
                *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
                return CUDA_ERROR_NOT_FOUND;
            }
            *(any_fn *)pfn = table[i].fn;
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

/* Each fake has exactly the type cuda.h gives the function it stands for. */
#define SAME(f, g) _Static_assert(__builtin_types_compatible_p(__typeof__(&f), __typeof__(&g)), #f)
SAME(cuInit, f_init);
SAME(cuGetErrorName, f_error_name);
SAME(cuDeviceGetAttribute, f_device_attr);
SAME(cuDeviceTotalMem, f_total_mem);
SAME(cuDeviceGetUuid, f_uuid);
SAME(cuDevicePrimaryCtxRelease, f_ctx_release);
SAME(cuCtxGetCurrent, f_ctx_get);
SAME(cuCtxPushCurrent, f_ctx_push);
SAME(cuCtxPopCurrent, f_ctx_pop);
SAME(cuCtxGetDevice, f_ctx_device);
SAME(cuCtxCreate, f_ctx_create);
SAME(cuCtxDestroy, f_ctx_destroy);
SAME(cuStreamDestroy, f_stream_destroy);
SAME(cuMemAlloc, f_alloc);
SAME(cuMemFree, f_free);
SAME(cuMemcpyHtoD, f_htod);
SAME(cuMemcpyDtoH, f_dtoh);
SAME(cuMemsetD8, f_memset8);
SAME(cuMemsetD32Async, f_memset32_async);
SAME(cuModuleLoadDataEx, f_module_load);
SAME(cuLaunchKernelEx, f_launch_ex);
SAME(cuEventDestroy, f_event_destroy);
SAME(cuEventRecord, f_event_record);
SAME(cuEventElapsedTime, f_event_elapsed);
SAME(cuStreamBeginCapture, f_begin_capture);
SAME(cuStreamEndCapture, f_end_capture);
SAME(cuGraphInstantiateWithFlags, f_instantiate);
SAME(cuGraphLaunch, f_graph_launch);
SAME(cuFuncSetAttribute, f_func_set);
SAME(cuTensorMapEncodeTiled, f_tmap_encode);
