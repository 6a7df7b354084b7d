/* The engine runtime (include/ptxtune/runtime.h, docs/runtime.md): a tuned
 * table (bundle or JSON) read into immutable entries, the selector, lazy or
 * eager module loads under one lock, launches with the caller's pointers on
 * the caller's stream. The driver comes from the shared loader
 * (tuner/driver.c); no generator code is linked (tests/test_runtime.c checks
 * the library's symbols). */
#include "ptxtune/runtime.h"

#include <jansson.h>
#include <sqlite3.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db.h"
#include "ptx/base.h"
#include "tuner/driver.h"

#ifdef PT_HAVE_CUDA_HEADERS
#include <cuda.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
#define CUDA_SUCCESS 0
#endif

#define PTXTUNE_EXPORT __attribute__((visibility("default")))

/* ---- the driver ---------------------------------------------------------- */

#ifdef PT_HAVE_CUDA_HEADERS
/* required entry points, then optional ones */
#define RT_FNS_REQ(X)                                                                       \
    X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)   \
    X(cuDriverGetVersion) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)          \
    X(cuCtxSetCurrent) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)       \
    X(cuFuncSetAttribute) X(cuLaunchKernelEx)
#define RT_FNS_OPT(X)                                                                       \
    X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxPushCurrent) X(cuCtxPopCurrent)             \
    X(cuTensorMapEncodeTiled)
#define RT_FNS(X) RT_FNS_REQ(X) RT_FNS_OPT(X)

typedef struct rt_api {
    void *lib;
#define X(f) __typeof__(&f) f;
    RT_FNS(X)
#undef X
} rt_api;
#else
typedef struct rt_api {
    void *lib;
} rt_api;
#endif

/* ---- entries ------------------------------------------------------------- */

enum { RT_MAX_ARGS = 24 };

typedef enum rt_kind { K_INPUT, K_OUTPUT, K_WORKSPACE, K_U32, K_U64, K_F32, K_SCRATCH, K_TENSORMAP } rt_kind;
static const char *const kind_names[] = {"input", "output", "workspace", "u32", "u64", "f32",
                                         "scratch", "tensormap"};
enum { RT_NKINDS = 8 };

enum { RT_TMAP_RANK = 5, RT_TMAP_BYTES = 128 };

/* A tensor map's cuTensorMapEncodeTiled parameters (the contract's "tmap"),
 * encoded at launch over the caller's pointer (interleave none, element
 * strides 1, as the generator's maps are). */
typedef struct rt_tmap {
    rt_kind of;      /* K_INPUT or K_OUTPUT */
    int of_index;    /* the tensor's index in that list (the contract's "tensor") */
    int src;         /* the launch's tensor pointer it is over */
    uint64_t offset; /* bytes from that pointer to the map's origin */
    int dtype, rank; /* CUtensorMapDataType; 1..5 */
    uint64_t dims[RT_TMAP_RANK], strides[RT_TMAP_RANK - 1];
    /* the size each dim / stride follows (value / tuned * the launch's), -1
     * none: a map over a tensor whose extent is a run-time size (a dyn=m
     * GEMM's A and D rows) is encoded at the launch's sizes */
    int dim_of[RT_TMAP_RANK], stride_of[RT_TMAP_RANK - 1];
    uint32_t box[RT_TMAP_RANK];
    int swizzle, oobfill, l2promo;
} rt_tmap;

typedef struct rt_arg {
    char name[48];
    rt_kind kind;
    char dtype[8];
    int64_t elements;
    uint32_t scales; /* bit d: the element count follows dims[d] */
    int dim;         /* scalars: the dim whose value it is; -1 */
    double value;
    int tensor;      /* position among the launch's tensor pointers; -1 */
    int ctensor;     /* tensors: the contract's index in its list */
    int tmap;        /* tensor maps: index into the entry's tmaps; -1 */
} rt_arg;

/* One grid component's rule (tuner/contract.h): c, or times x
 * ceil(dims[dim] x mul / div); x with per_sm K (version 2): at most K x the
 * device's SMs, a whole number of clusters, at least one (pt_grid_cap). */
typedef struct rt_grid {
    int dim; /* -1: constant c */
    int64_t c, mul, div, times, per_sm;
} rt_grid;

struct ptxtune_entry {
    char *op, *klass, *problem, *config, *entry, *arch;
    uint64_t klass_hash;
    int klass_id; /* index of its class's first entry */
    int next_cls; /* the next entry of its class; -1 */
    bool grouped; /* two run-time sizes share a group (serves checks them) */
    int ndims;
    int64_t tuned[PTXTUNE_MAX_DIMS], lo[PTXTUNE_MAX_DIMS], hi[PTXTUNE_MAX_DIMS];
    double lg[PTXTUNE_MAX_DIMS], lg_sum; /* log2 of the tuned sizes, their sum */
    int group[PTXTUNE_MAX_DIMS];
    rt_grid grid[3];
    unsigned block[3];
    size_t smem, align, ws_bytes, scratch_bytes;
    int ntmaps;
    rt_tmap tmaps[8];   /* encoded at each launch (docs/runtime.md) */
    unsigned cluster[3]; /* CTAs per cluster; 1 1 1: no cluster launch */
    bool smem_optin;
    int nargs, ntensors;
    rt_arg args[RT_MAX_ARGS];
    /* the kernel, read at its first load (docs/runtime.md, start-up): the
     * bundle's kernels row, or the JSON table's kernel and cubin objects */
    char khash[17];    /* its identity: db_kernel_hash of the PTX, checked at load */
    int64_t kernel_id; /* bundle: kernels.id; 0 none */
    json_t *kjson, *cjson; /* JSON table: borrowed from the runtime's document */
    /* a JSON table read through its index (version 2): [offset, length] of
     * the row object and of its launch value, read at first use; its row */
    int64_t jrow[2], jlaunch[2];
    int jrowno;
    char chash[17]; /* its cubin's identity (pt_hash64 of the base64 text); "" none */
    /* the contract past its sizes: read at open from a JSON table, at the
     * entry's first selection or load from a bundle (its measurement's
     * launch, read then) */
    int64_t meas_id;
    atomic_int ready;      /* 1: the whole contract is read (release) */
    ptxtune_runtime *rt;
    double time_s;
    atomic_int loaded; /* 1: mod and fn are set (release) */
    CUmodule mod;
    CUfunction fn;
    bool jit;          /* loaded from the PTX */
};

struct ptxtune_runtime {
    unsigned flags;
    rt_api api;
    CUdevice dev;
    CUcontext primary; /* retained by us (no context was current) */
    CUcontext ctx;     /* the context every module is loaded in: the caller's, or primary */
    int cc;
    int sms; /* the device's SM count (persistent grids, pt_grid_cap) */
    char fp_key[17];
    ptxtune_entry *v;
    int n, cap;
    int *heads, nheads; /* the first entry of each class */
    pthread_mutex_t mu;
    sqlite3 *bundle;   /* the bundle, open read-only until close (loads read it) */
    sqlite3_stmt *kernel_q;
    sqlite3_stmt *launch_q; /* a bundle entry's launch, at its first use (under mu) */
    json_t *json;      /* the JSON table's document (loads read it) */
    int jfd;           /* a version 2 JSON table read through its index: the file; -1 */
    char *jpath;       /* its path (messages) */
};

static int fail(ptxtune_error *e, int code, const char *fmt, ...) PT_PRINTF(3, 4);

/* The class id of klass (hash, then one strcmp), -1 when none has it. */
static int class_id(const ptxtune_runtime *rt, const char *klass, uint64_t h)
{
    for (int c = 0; c < rt->nheads; c++) {
        const ptxtune_entry *k = &rt->v[rt->heads[c]];
        if (k->klass_hash == h && strcmp(k->klass, klass) == 0)
            return rt->heads[c];
    }
    return -1;
}

/* After the rows: each class's entries linked in order, the class heads. */
static int link_classes(ptxtune_runtime *rt, ptxtune_error *e)
{
    int *last = malloc(((size_t)rt->n + 1) * sizeof *last);
    rt->heads = malloc(((size_t)rt->n + 1) * sizeof *rt->heads);
    if (!rt->heads || !last) {
        free(last);
        return fail(e, PTXTUNE_ENOMEM, "out of memory");
    }
    rt->nheads = 0;
    for (int j = 0; j < rt->n; j++)
        last[j] = -1;
    for (int j = rt->n - 1; j >= 0; j--) {
        ptxtune_entry *k = &rt->v[j];
        k->next_cls = last[k->klass_id];
        last[k->klass_id] = j;
    }
    for (int j = 0; j < rt->n; j++)
        if (rt->v[j].klass_id == j)
            rt->heads[rt->nheads++] = j;
    free(last);
    return PTXTUNE_OK;
}

/* Whether two sizes of k that change together are taken at run time. */
static bool any_group(const ptxtune_entry *k)
{
    for (int i = 0; i < k->ndims; i++)
        for (int j = 0; j < i; j++)
            if (k->group[j] == k->group[i] && k->lo[i] != k->hi[i])
                return true;
    return false;
}

static int fail(ptxtune_error *e, int code, const char *fmt, ...) PT_PRINTF(3, 4);
static int fail(ptxtune_error *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

static int of_pt(int pt)
{
    switch (pt) {
    case PT_OK: return PTXTUNE_OK;
    case PT_ENOMEM: return PTXTUNE_ENOMEM;
    case PT_EIO: return PTXTUNE_EIO;
    case PT_ENODRIVER: return PTXTUNE_ENODRIVER;
    default: return PTXTUNE_EINVAL;
    }
}

static int from_pt(ptxtune_error *e, const pt_err *pe)
{
    return fail(e, of_pt(pe->code), "%s", pe->msg[0] ? pe->msg : pt_strerror(pe->code));
}

#ifdef PT_HAVE_CUDA_HEADERS
static int cu_fail(const ptxtune_runtime *rt, ptxtune_error *e, CUresult r, const char *call,
                   const char *what)
{
    const char *name = NULL;
    if (!rt->api.cuGetErrorName || rt->api.cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    return fail(e, r == CUDA_ERROR_OUT_OF_MEMORY ? PTXTUNE_ENOMEM : PTXTUNE_EDRIVER,
                "%s%s%s: %s (CUresult %d)", what ? what : "", what ? ": " : "", call,
                name ? name : "unknown error", (int)r);
}
#endif

#ifdef PT_HAVE_CUDA_HEADERS
/* Makes rt's context current for one call when the calling thread has
 * another or none (a worker thread of the caller's); *pushed says whether
 * ctx_leave pops it. Modules live in rt->ctx, so loads, launches and unloads
 * happen there whatever thread calls. */
static CUresult ctx_enter(const ptxtune_runtime *rt, bool *pushed)
{
    *pushed = false;
    const rt_api *a = &rt->api;
    CUcontext cur = NULL;
    if (!rt->ctx || !a->cuCtxGetCurrent || a->cuCtxGetCurrent(&cur) != CUDA_SUCCESS ||
        cur == rt->ctx)
        return CUDA_SUCCESS;
    if (a->cuCtxPushCurrent && a->cuCtxPopCurrent) {
        CUresult r = a->cuCtxPushCurrent(rt->ctx);
        *pushed = r == CUDA_SUCCESS;
        return r;
    }
    return cur ? CUDA_SUCCESS : a->cuCtxSetCurrent(rt->ctx); /* no stack: only a thread with none */
}

static void ctx_leave(const ptxtune_runtime *rt, bool pushed)
{
    CUcontext c;
    if (pushed)
        rt->api.cuCtxPopCurrent(&c);
}
#endif

static uint64_t hash_str(const char *s) { return pt_hash64(s, strlen(s)); }

static char *sdup(const char *s)
{
    return strdup(s ? s : ""); /* oom: caller checks */
}

static int contract_ensure(ptxtune_runtime *rt, ptxtune_entry *k, ptxtune_error *e);

static void entry_free(ptxtune_entry *k)
{
    free(k->op);
    free(k->klass);
    free(k->problem);
    free(k->config);
    free(k->entry);
    free(k->arch);
}

/* "16,64,32,1" */
static int parse_dims(const char *s, int64_t *v, int max)
{
    int n = 0;
    while (s && *s) {
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end == s || n == max)
            return -1;
        v[n++] = x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

static bool jint(json_t *o, const char *k, int64_t *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_integer(x))
        return false;
    *v = json_integer_value(x);
    return true;
}

/* The launch contract (tuner/contract.h) into k; a one-line reason when it
 * is missing or malformed. */
/* CUtensorMapDataType: bytes per element and the contract's dtype name */
static int tmap_elem_bytes(int dt)
{
    static const int bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
    return dt >= 0 && dt < (int)(sizeof bytes / sizeof bytes[0]) ? bytes[dt] : 0;
}

static const char *tmap_dtype_name(int dt)
{
    static const char *const names[] = {"u8",  "u16", "u32", "s32",  "u64", "s64", "f16",
                                        "f32", "f64", "bf16", "f32", "tf32", "tf32"};
    return dt >= 0 && dt < (int)(sizeof names / sizeof names[0]) ? names[dt] : "";
}

static bool juarr(json_t *a, uint64_t *v, int n)
{
    if (json_array_size(a) != (size_t)n)
        return false;
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 1)
            return false;
        v[i] = (uint64_t)json_integer_value(x);
    }
    return true;
}

/* The map's dims and strides at sizes at (the tuned ones scaled). */
static void tmap_at(const ptxtune_entry *k, const rt_tmap *m, const int64_t *at, uint64_t *dims,
                    uint64_t *strides)
{
    for (int d = 0; d < m->rank; d++)
        dims[d] = m->dim_of[d] < 0 ? m->dims[d]
                                   : m->dims[d] / (uint64_t)k->tuned[m->dim_of[d]] *
                                         (uint64_t)at[m->dim_of[d]];
    for (int d = 0; d + 1 < m->rank; d++)
        strides[d] = m->stride_of[d] < 0 ? m->strides[d]
                                         : m->strides[d] / (uint64_t)k->tuned[m->stride_of[d]] *
                                               (uint64_t)at[m->stride_of[d]];
}

/* Elements of the tensor a map spans at sizes at (its own launch tensor). */
static int64_t tmap_extent(const ptxtune_entry *k, const rt_tmap *m, const int64_t *at)
{
    uint64_t dims[RT_TMAP_RANK], strides[RT_TMAP_RANK];
    tmap_at(k, m, at, dims, strides);
    int esz = tmap_elem_bytes(m->dtype);
    uint64_t bytes = m->offset + dims[0] * (uint64_t)esz;
    for (int d = 1; d < m->rank; d++)
        bytes += (dims[d] - 1) * strides[d - 1];
    return (int64_t)((bytes + (uint64_t)esz - 1) / (uint64_t)esz);
}

/* Argument i's "tmap": the map's encode parameters (tuner/contract.c). */
static int read_tmap(ptxtune_entry *k, int i, json_t *t, ptxtune_error *e)
{
    rt_arg *r = &k->args[i];
    if (k->ntmaps == (int)(sizeof k->tmaps / sizeof k->tmaps[0]))
        return fail(e, PTXTUNE_EINVAL, "%s: more than %d tensor maps", k->problem, k->ntmaps);
    rt_tmap *m = &k->tmaps[k->ntmaps];
    memset(m, 0, sizeof *m);
    const char *of = json_string_value(json_object_get(t, "of"));
    int64_t idx = -1, off = 0, dt = -1, rank = 0, sw = 0, oob = 0, l2 = 0;
    uint64_t box[RT_TMAP_RANK] = {0};
    bool ok = of && (strcmp(of, "input") == 0 || strcmp(of, "output") == 0) &&
              jint(t, "tensor", &idx) && idx >= 0 && jint(t, "offset", &off) && off >= 0 &&
              jint(t, "dtype", &dt) && tmap_elem_bytes((int)dt) > 0 && jint(t, "rank", &rank) &&
              rank >= 1 && rank <= RT_TMAP_RANK && jint(t, "swizzle", &sw) &&
              jint(t, "oobfill", &oob) && jint(t, "l2promo", &l2);
    ok = ok && juarr(json_object_get(t, "dims"), m->dims, (int)rank) &&
         juarr(json_object_get(t, "strides"), m->strides, (int)rank - 1) &&
         juarr(json_object_get(t, "box"), box, (int)rank);
    /* "dims_scale" / "strides_scale": per dim / stride the size it follows
     * (-1 none; a multiple of that size's tuned value), both optional */
    json_t *sc[2] = {json_object_get(t, "dims_scale"), json_object_get(t, "strides_scale")};
    for (int w = 0; ok && w < 2; w++) {
        int n = w ? (int)rank - 1 : (int)rank;
        int *of_v = w ? m->stride_of : m->dim_of;
        const uint64_t *val = w ? m->strides : m->dims;
        for (int d = 0; d < n; d++)
            of_v[d] = -1;
        if (!sc[w])
            continue;
        ok = json_array_size(sc[w]) == (size_t)n;
        for (int d = 0; ok && d < n; d++) {
            json_t *x = json_array_get(sc[w], (size_t)d);
            json_int_t v = json_integer_value(x);
            ok = json_is_integer(x) && v >= -1 && v < k->ndims &&
                 (v < 0 || val[d] % (uint64_t)k->tuned[v] == 0);
            of_v[d] = (int)v;
        }
    }
    if (!ok)
        return fail(e, PTXTUNE_EINVAL, "%s: argument %d ('%s'): malformed tensor map", k->problem,
                    i, r->name);
    m->of = of[0] == 'i' ? K_INPUT : K_OUTPUT;
    m->of_index = (int)idx;
    m->offset = (uint64_t)off;
    m->dtype = (int)dt;
    m->rank = (int)rank;
    for (int d = 0; d < m->rank; d++)
        m->box[d] = (uint32_t)box[d];
    m->swizzle = (int)sw;
    m->oobfill = (int)oob;
    m->l2promo = (int)l2;
    r->tmap = k->ntmaps++;
    return PTXTUNE_OK;
}

/* The contract's version and sizes (what selection reads), from c: the
 * contract, or (a bundle's open) {"v": .., "dims": [..]} cut out of it. */
static int read_dims(ptxtune_entry *k, json_t *c, const char *dims, ptxtune_error *e)
{
    if (!json_is_object(c))
        return fail(e, PTXTUNE_EINVAL,
                    "%s: no launch contract (stored before contracts were recorded: tune it again)",
                    k->problem);
    int64_t v;
    if (!jint(c, "v", &v))
        return fail(e, PTXTUNE_EINVAL, "%s: launch contract without a version", k->problem);
    if (v != 1 && v != 2)
        return fail(e, PTXTUNE_EINVAL, "%s: launch contract version %lld: this library reads 1 and 2 "
                    "(a newer ptxtune exported it)", k->problem, (long long)v);
    json_t *dm = json_object_get(c, "dims");
    k->ndims = parse_dims(dims, k->tuned, PTXTUNE_MAX_DIMS);
    if (!json_is_array(dm) || k->ndims < 0 || (size_t)k->ndims != json_array_size(dm))
        return fail(e, PTXTUNE_EINVAL, "%s: the contract's dims do not match the problem's (%s)",
                    k->problem, dims);
    for (int i = 0; i < k->ndims; i++) {
        json_t *d = json_array_get(dm, (size_t)i);
        int64_t t, lo, hi, g;
        if (!jint(d, "tuned", &t) || !jint(d, "min", &lo) || !jint(d, "max", &hi) ||
            !jint(d, "group", &g) || t != k->tuned[i] || lo > t || hi < t || lo < 1)
            return fail(e, PTXTUNE_EINVAL, "%s: malformed launch contract (dim %d)", k->problem, i);
        k->lo[i] = lo;
        k->hi[i] = hi;
        k->group[i] = (int)g;
    }
    k->lg_sum = 0;
    for (int i = 0; i < k->ndims; i++) {
        k->lg[i] = log2((double)k->tuned[i]);
        k->lg_sum += k->lg[i];
    }
    return PTXTUNE_OK;
}

/* The same from a bundle's size index (rt_sizes, db/export.c): version v
 * and "index:tuned:min:max:group" per size, comma-separated; no JSON. */
static int read_dims_text(ptxtune_entry *k, int64_t v, const char *sizes, const char *dims,
                          ptxtune_error *e)
{
    if (v != 1 && v != 2)
        return fail(e, PTXTUNE_EINVAL, "%s: launch contract version %lld: this library reads 1 and 2 "
                    "(a newer ptxtune exported it)", k->problem, (long long)v);
    k->ndims = parse_dims(dims, k->tuned, PTXTUNE_MAX_DIMS);
    if (k->ndims < 0)
        return fail(e, PTXTUNE_EINVAL, "%s: the contract's dims do not match the problem's (%s)",
                    k->problem, dims);
    const char *p = sizes;
    int n = 0;
    while (*p) {
        int64_t f[5];
        for (int j = 0; j < 5; j++) {
            char *end;
            errno = 0;
            long long x = strtoll(p, &end, 10);
            if (end == p || errno || *end != (j < 4 ? ':' : *end) || (j == 4 && *end && *end != ','))
                return fail(e, PTXTUNE_EINVAL, "%s: malformed size index (rt_sizes '%s')",
                            k->problem, sizes);
            f[j] = x;
            p = *end ? end + 1 : end;
        }
        if (f[0] != n || n == k->ndims || f[1] != k->tuned[n] || f[2] > f[1] || f[3] < f[1] ||
            f[2] < 1 || f[4] < INT32_MIN || f[4] > INT32_MAX)
            return fail(e, PTXTUNE_EINVAL, "%s: malformed launch contract (dim %d)", k->problem, n);
        k->lo[n] = f[2];
        k->hi[n] = f[3];
        k->group[n] = (int)f[4];
        n++;
    }
    if (n != k->ndims)
        return fail(e, PTXTUNE_EINVAL, "%s: the contract's dims do not match the problem's (%s)",
                    k->problem, dims);
    k->lg_sum = 0;
    for (int i = 0; i < k->ndims; i++) {
        k->lg[i] = log2((double)k->tuned[i]);
        k->lg_sum += k->lg[i];
    }
    return PTXTUNE_OK;
}

/* The rest of the contract (launch, arguments), after read_dims. */
static int read_contract(ptxtune_entry *k, json_t *c, ptxtune_error *e)
{
    int rc = PTXTUNE_OK;
    k->ntensors = k->ntmaps = k->nargs = 0; /* a failed read may be tried again */
    if (!json_is_object(c))
        return fail(e, PTXTUNE_EINVAL, "%s: no launch contract", k->problem);
    json_t *bl = json_object_get(c, "block"), *gr = json_object_get(c, "grid"),
           *dm = json_object_get(c, "dims"), *args = json_object_get(c, "args"),
           *ws = json_object_get(c, "workspace");
    int64_t smem = 0, align = 0, wsb = 0;
    if (json_array_size(bl) != 3 || json_array_size(gr) != 3 || !json_is_array(dm) ||
        !json_is_array(args) || !jint(c, "smem", &smem) || !jint(c, "align", &align) ||
        !jint(ws, "bytes", &wsb) || smem < 0 || align < 1 || wsb < 0 ||
        json_array_size(args) > RT_MAX_ARGS || json_array_size(dm) > PTXTUNE_MAX_DIMS) {
        rc = fail(e, PTXTUNE_EINVAL, "%s: malformed launch contract", k->problem);
        goto out;
    }
    k->smem = (size_t)smem;
    k->align = (size_t)align;
    k->ws_bytes = (size_t)wsb;
    int64_t scr = 0;
    if (jint(ws, "scratch_bytes", &scr) && scr > 0)
        k->scratch_bytes = (size_t)scr;
    k->smem_optin = json_is_true(json_object_get(c, "smem_optin"));
    for (size_t i = 0; i < 3; i++) {
        json_t *b = json_array_get(bl, i), *g = json_array_get(gr, i);
        int64_t d = -1, cst = 0, mul = 1, div = 1, times = 1, per_sm = 0;
        bool has_t = json_object_get(g, "times") != NULL, has_k = json_object_get(g, "per_sm") != NULL;
        if (!json_is_integer(b) || json_integer_value(b) < 1 ||
            !(jint(g, "const", &cst) || (jint(g, "dim", &d) && jint(g, "mul", &mul) &&
                                         jint(g, "div", &div) && mul > 0 && div > 0)) ||
            (has_t && (!jint(g, "times", &times) || times < 1 || times > INT32_MAX || d < 0)) ||
            (has_k && (!jint(g, "per_sm", &per_sm) || per_sm < 1 || per_sm > 64 || i != 0))) {
            rc = fail(e, PTXTUNE_EINVAL, "%s: malformed launch contract (grid/block)",
                      k->problem);
            goto out;
        }
        k->block[i] = (unsigned)json_integer_value(b);
        k->grid[i] = (rt_grid){d < 0 ? -1 : (int)d, cst, mul, div, times, per_sm};
    }
    if ((size_t)k->ndims != json_array_size(dm)) {
        rc = fail(e, PTXTUNE_EINVAL, "%s: the contract's dims changed", k->problem);
        goto out;
    }
    /* what selection used (a bundle's size index, or the same contract) */
    for (int i = 0; i < k->ndims; i++) {
        json_t *d = json_array_get(dm, (size_t)i);
        int64_t t, lo, hi, g;
        if (!jint(d, "tuned", &t) || !jint(d, "min", &lo) || !jint(d, "max", &hi) ||
            !jint(d, "group", &g) || t != k->tuned[i] || lo != k->lo[i] || hi != k->hi[i] ||
            g != k->group[i]) {
            rc = fail(e, PTXTUNE_EINVAL,
                      "%s: the %s does not match its launch contract (dim %d): export the table "
                      "again",
                      k->problem,
                      k->jrow[1] ? "JSON table's index" : "bundle's size index (rt_sizes)", i);
            goto out;
        }
    }
    for (int i = 0; i < 3; i++)
        if (k->grid[i].dim >= k->ndims) {
            rc = fail(e, PTXTUNE_EINVAL, "%s: grid rule names dim %d of %d", k->problem,
                      k->grid[i].dim, k->ndims);
            goto out;
        }
    k->nargs = (int)json_array_size(args);
    for (int i = 0; i < k->nargs; i++) {
        json_t *a = json_array_get(args, (size_t)i);
        rt_arg *r = &k->args[i];
        const char *kind = json_string_value(json_object_get(a, "kind"));
        const char *name = json_string_value(json_object_get(a, "name"));
        int kk = -1;
        for (int j = 0; kind && j < RT_NKINDS; j++)
            if (strcmp(kind, kind_names[j]) == 0)
                kk = j;
        if (kk < 0) {
            rc = fail(e, PTXTUNE_EINVAL, "%s: argument %d has an unknown kind", k->problem, i);
            goto out;
        }
        snprintf(r->name, sizeof r->name, "%s", name ? name : "");
        r->kind = (rt_kind)kk;
        r->dim = -1;
        r->tensor = -1;
        r->ctensor = -1;
        r->tmap = -1;
        if (r->kind == K_INPUT || r->kind == K_OUTPUT) {
            r->tensor = k->ntensors++;
            int64_t ct = -1;
            if (jint(a, "tensor", &ct))
                r->ctensor = (int)ct;
            const char *dt = json_string_value(json_object_get(a, "dtype"));
            snprintf(r->dtype, sizeof r->dtype, "%s", dt ? dt : "");
            jint(a, "elements", &r->elements);
            json_t *sc = json_object_get(a, "scales");
            for (size_t j = 0; j < json_array_size(sc); j++) {
                json_int_t d = json_integer_value(json_array_get(sc, j));
                if (d >= 0 && d < k->ndims)
                    r->scales |= 1u << d;
            }
        } else if (r->kind == K_U32 || r->kind == K_U64) {
            int64_t d;
            if (jint(a, "dim", &d) && d >= 0 && d < k->ndims)
                r->dim = (int)d;
            else if (jint(a, "value", &d))
                r->value = (double)d;
            else {
                rc = fail(e, PTXTUNE_EINVAL, "%s: argument %d has no value", k->problem, i);
                goto out;
            }
        } else if (r->kind == K_TENSORMAP) {
            if ((rc = read_tmap(k, i, json_object_get(a, "tmap"), e)))
                goto out;
        } else if (r->kind == K_F32) {
            json_t *x = json_object_get(a, "value");
            r->value = json_is_number(x) ? json_number_value(x) : NAN;
        }
    }
    /* each map is over a tensor: the pointer argument of that tensor when the
     * kernel has one, else a pointer of its own, after the kernel's */
    for (int i = 0; i < k->nargs; i++) {
        rt_arg *r = &k->args[i];
        if (r->kind != K_TENSORMAP)
            continue;
        rt_tmap *m = &k->tmaps[r->tmap];
        m->src = -1;
        for (int j = 0; j < k->nargs; j++)
            if (k->args[j].kind == m->of && k->args[j].ctensor == m->of_index)
                m->src = k->args[j].tensor;
        for (int j = 0; m->src < 0 && j < r->tmap; j++) /* another map over the same tensor */
            if (k->tmaps[j].of == m->of && k->tmaps[j].of_index == m->of_index)
                m->src = k->tmaps[j].src;
        if (m->src < 0) {
            m->src = r->tensor = k->ntensors++;
            snprintf(r->dtype, sizeof r->dtype, "%s", tmap_dtype_name(m->dtype));
            r->elements = tmap_extent(k, m, k->tuned);
        }
    }
    json_t *cl = json_object_get(c, "cluster");
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(cl, i);
        k->cluster[i] = json_is_integer(x) && json_integer_value(x) > 0 &&
                                json_integer_value(x) <= 16
                            ? (unsigned)json_integer_value(x)
                            : 1;
    }
out:
    return rc;
}

typedef struct row_view {
    const char *op, *klass, *problem, *dims, *config, *entry, *arch, *khash;
    json_t *launch;      /* JSON table: the launch object, read whole */
    json_t *dims_c;      /* bundle: {"v", "dims"} of its contract, or */
    const char *sizes;   /* bundle: its size index (v in sizes_v), NULL none */
    int64_t sizes_v;
    int64_t meas_id;     /* bundle: the measurement (its launch, read at first use) */
    int64_t kernel_id;
    json_t *kjson, *cjson;
    double t_median;
    const int64_t *jat; /* JSON index: row offset, length, launch offset, length; NULL */
    int jrowno;
} row_view;

static int add_entry(ptxtune_runtime *rt, const row_view *r, ptxtune_error *e)
{
    if (rt->n == rt->cap) {
        int cap = rt->cap ? 2 * rt->cap : 64;
        ptxtune_entry *v = realloc(rt->v, (size_t)cap * sizeof *v);
        if (!v)
            return fail(e, PTXTUNE_ENOMEM, "out of memory");
        rt->v = v;
        rt->cap = cap;
    }
    ptxtune_entry *k = &rt->v[rt->n];
    memset(k, 0, sizeof *k);
    k->op = sdup(r->op);
    k->klass = sdup(r->klass);
    k->problem = sdup(r->problem);
    k->config = sdup(r->config);
    k->entry = sdup(r->entry);
    k->arch = sdup(r->arch);
    if (!k->op || !k->klass || !k->problem || !k->config || !k->entry || !k->arch) {
        entry_free(k);
        return fail(e, PTXTUNE_ENOMEM, "out of memory");
    }
    snprintf(k->khash, sizeof k->khash, "%s", r->khash ? r->khash : "");
    k->kernel_id = r->kernel_id;
    k->kjson = r->kjson;
    k->cjson = r->cjson;
    if (r->jat) {
        k->jrow[0] = r->jat[0];
        k->jrow[1] = r->jat[1];
        k->jlaunch[0] = r->jat[2];
        k->jlaunch[1] = r->jat[3];
        k->jrowno = r->jrowno;
    }
    k->klass_hash = hash_str(k->klass);
    k->klass_id = rt->n;
    for (int j = 0; j < rt->n; j++)
        if (rt->v[j].klass_hash == k->klass_hash && rt->v[j].klass_id == j &&
            strcmp(rt->v[j].klass, k->klass) == 0) {
            k->klass_id = j; /* the first entry of the class names it */
            break;
        }
    k->time_s = r->t_median;
    k->rt = rt;
    atomic_init(&k->loaded, 0);
    atomic_init(&k->ready, 0);
    json_t *c = r->launch ? json_object_get(r->launch, "contract") : r->dims_c;
    int rc = r->sizes ? read_dims_text(k, r->sizes_v, r->sizes, r->dims, e)
                      : read_dims(k, c, r->dims, e);
    if (!rc)
        k->grouped = any_group(k);
    if (!rc && r->launch)
        rc = read_contract(k, c, e);
    if (!rc && r->launch)
        atomic_store_explicit(&k->ready, 1, memory_order_relaxed);
    k->meas_id = r->meas_id;
    if (rc) {
        entry_free(k);
        return rc;
    }
    rt->n++;
    return PTXTUNE_OK;
}

/* ---- reading a table ------------------------------------------------------ */

/* The fingerprint served: the named one (a key or a prefix naming exactly
 * one), else this device's (same GPU name, cc and SM count; its driver
 * first, then the smaller key). Offered one fingerprint at a time. */
typedef struct fp_pick {
    const char *prefix; /* options.fingerprint */
    const char *gpu;
    int cc, sms;
    char drv[32];
    char key[17];
    bool have, drv_match, ambiguous;
    int rows; /* rows of every fingerprint */
} fp_pick;

static void fp_offer(fp_pick *p, const char *key, const char *gpu, int cc, int sms,
                     const char *driver, int rows)
{
    p->rows += rows;
    bool ok = p->prefix ? *p->prefix && strncmp(key, p->prefix, strlen(p->prefix)) == 0
                        : strcmp(gpu, p->gpu) == 0 && cc == p->cc && sms == p->sms;
    if (!ok || (p->have && strcmp(p->key, key) == 0))
        return;
    bool d = strcmp(driver, p->drv) == 0;
    if (p->have && p->prefix)
        p->ambiguous = true;
    if (!p->have || (d && !p->drv_match) || (d == p->drv_match && strcmp(key, p->key) < 0)) {
        snprintf(p->key, sizeof p->key, "%s", key);
        p->drv_match = d;
        p->have = true;
    }
}

static int fp_check(const char *path, const db_fingerprint *f, const char *key,
                    ptxtune_error *e)
{
    char want[17];
    db_fingerprint_key(f, want);
    if (strcmp(want, key) != 0)
        return fail(e, PTXTUNE_EINVAL, "%s: fingerprint key %s does not match its fields", path,
                    key);
    return PTXTUNE_OK;
}

static const char *col(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? t : "";
}

static int sql_fail(ptxtune_error *e, sqlite3 *db, const char *path, const char *what)
{
    int code = sqlite3_errcode(db);
    return fail(e, code == SQLITE_NOMEM ? PTXTUNE_ENOMEM : PTXTUNE_EINVAL,
                "%s: %s: %s (not a ptxtune bundle, or a damaged one)", path, what,
                sqlite3_errmsg(db));
}

/* The served rows: the winners, never the mock device's (db/query.c's
 * NOT_MOCK: the export's rule). */
#define RT_JOINS                                                                            \
    " FROM winners w JOIN measurements m ON m.id = w.measurement_id"                        \
    " JOIN runs r ON r.id = m.run_id JOIN fingerprints f ON f.id = w.fingerprint_id"        \
    " JOIN problems p ON p.id = w.problem_id LEFT JOIN kernels k ON k.id = m.kernel_id"
#define RT_WHERE " WHERE m.source <> 'mock'"
#define RT_WINNERS RT_JOINS RT_WHERE

/* A bundle (export --format bundle, a SQLite store): its fingerprints are
 * checked (key against fields) and one chosen, then that fingerprint's rows
 * become entries without their kernels: the PTX and cubin are read, and the
 * kernel's identity checked, at its first load. The file stays open
 * (read-only) until ptxtune_close. */
static int read_bundle(ptxtune_runtime *rt, const char *path, fp_pick *pk, ptxtune_error *e)
{
    /* one connection, used under rt->mu after open: no SQLite mutexes */
    int rc = sqlite3_open_v2(path, &rt->bundle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK)
        return rt->bundle ? sql_fail(e, rt->bundle, path, "cannot open")
                          : fail(e, PTXTUNE_ENOMEM, "out of memory");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(rt->bundle, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return sql_fail(e, rt->bundle, path, "reading the schema version");
    }
    int version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version != DB_SCHEMA_VERSION)
        return fail(e, PTXTUNE_EINVAL,
                    "%s: store schema version %d, this library reads version %d (export the "
                    "bundle again with this version)",
                    path, version, DB_SCHEMA_VERSION);
    static const char fps[] = "SELECT f.key, f.gpu, f.cc, f.sm_count, f.driver, f.compiler,"
                              " f.ptx_version, f.generator, f.protocol, COUNT(*)" RT_WINNERS
                              " GROUP BY f.id ORDER BY f.key";
    if (sqlite3_prepare_v2(rt->bundle, fps, -1, &st, NULL) != SQLITE_OK)
        return sql_fail(e, rt->bundle, path, "reading its fingerprints");
    int src;
    rc = PTXTUNE_OK;
    while (!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
        db_fingerprint f = {col(st, 1), sqlite3_column_int(st, 2), sqlite3_column_int(st, 3),
                            col(st, 4), col(st, 5), sqlite3_column_int(st, 6), col(st, 7),
                            col(st, 8)};
        rc = fp_check(path, &f, col(st, 0), e);
        if (!rc)
            fp_offer(pk, col(st, 0), f.gpu, f.cc, f.sm_count, f.driver, sqlite3_column_int(st, 9));
    }
    if (!rc && src != SQLITE_DONE)
        rc = sql_fail(e, rt->bundle, path, "reading its fingerprints");
    sqlite3_finalize(st);
    return rc;
}

/* The served fingerprint's rows, without their kernels and without their
 * contracts past the sizes. The sizes come from the bundle's size index
 * (rt_sizes, written by export: no JSON read at open) while the launch still
 * has the length the index was cut from; else (an older bundle, a row the
 * index lacks or a launch changed since) from the contract, cut out by
 * SQLite's JSON functions and parsed. */
static int read_bundle_rows(ptxtune_runtime *rt, const char *path, ptxtune_error *e)
{
#define RT_ROW_COLS                                                                         \
    "SELECT p.op, p.class, p.key, p.dims, m.config, k.entry, r.arch, k.hash, m.id,"         \
    " m.t_median, k.id,"
    static const char q_index[] =
        RT_ROW_COLS " s.sizes, s.v, s.launch_bytes = length(CAST(m.launch AS BLOB))" RT_JOINS
        " LEFT JOIN rt_sizes s ON s.measurement_id = m.id" RT_WHERE " AND f.key = ?1 ORDER BY p.key";
    static const char q_plain[] =
        RT_ROW_COLS " NULL, NULL, 0" RT_WINNERS " AND f.key = ?1 ORDER BY p.key";
#undef RT_ROW_COLS
    static const char q_cut[] =
        "SELECT CASE WHEN json_type(launch, '$.contract') = 'object' THEN json_object('v',"
        " json_extract(launch, '$.contract.v'), 'dims', json_extract(launch, '$.contract.dims'))"
        " END FROM measurements WHERE id = ?1";
    sqlite3_stmt *st = NULL, *cut = NULL;
    if (sqlite3_prepare_v2(rt->bundle, q_index, -1, &st, NULL) != SQLITE_OK &&
        sqlite3_prepare_v2(rt->bundle, q_plain, -1, &st, NULL) != SQLITE_OK)
        return sql_fail(e, rt->bundle, path, "reading its rows");
    sqlite3_bind_text(st, 1, rt->fp_key, -1, SQLITE_STATIC);
    int rc = PTXTUNE_OK, src;
    while (!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
        bool indexed = sqlite3_column_type(st, 11) != SQLITE_NULL && sqlite3_column_int(st, 13);
        json_t *d = NULL;
        int64_t mid = sqlite3_column_int64(st, 8);
        if (!indexed) { /* the contract's sizes, cut out of it */
            if (!cut && sqlite3_prepare_v2(rt->bundle, q_cut, -1, &cut, NULL) != SQLITE_OK) {
                rc = sql_fail(e, rt->bundle, path, "reading its contracts");
                break;
            }
            sqlite3_reset(cut);
            sqlite3_bind_int64(cut, 1, mid);
            if (sqlite3_step(cut) != SQLITE_ROW) {
                rc = sql_fail(e, rt->bundle, path, "reading its contracts");
                break;
            }
            json_error_t je;
            const char *dc = col(cut, 0);
            d = *dc ? json_loads(dc, 0, &je) : NULL;
        }
        row_view v = {col(st, 0), col(st, 1), col(st, 2), col(st, 3), col(st, 4), col(st, 5),
                      col(st, 6), col(st, 7), NULL, d, indexed ? col(st, 11) : NULL,
                      indexed ? sqlite3_column_int64(st, 12) : 0, mid,
                      sqlite3_column_int64(st, 10), NULL, NULL,
                      sqlite3_column_type(st, 9) == SQLITE_NULL ? NAN
                                                                : sqlite3_column_double(st, 9),
                      NULL, 0};
        rc = add_entry(rt, &v, e);
        json_decref(d);
    }
    if (!rc && src != SQLITE_DONE)
        rc = sql_fail(e, rt->bundle, path, "reading its rows");
    sqlite3_finalize(st);
    sqlite3_finalize(cut);
    if (!rc && sqlite3_prepare_v2(rt->bundle,
                                  "SELECT k.ptx, k.hash, c.cubin FROM kernels k LEFT JOIN cubins c"
                                  " ON c.kernel_id = k.id AND c.arch = ?2 WHERE k.id = ?1",
                                  -1, &rt->kernel_q, NULL) != SQLITE_OK)
        rc = sql_fail(e, rt->bundle, path, "reading its kernels");
    return rc;
}

static int b64_val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* NULL on bad input or no memory. */
static unsigned char *b64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    if (len % 4)
        return NULL;
    unsigned char *out = malloc(len / 4 * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++)
            v[j] = s[i + j] == '=' && i + 4 == len && j >= 2 ? 0 : b64_val(s[i + j]);
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) {
            free(out);
            return NULL;
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        out[o++] = (unsigned char)(x >> 16);
        if (s[i + 2] != '=')
            out[o++] = (unsigned char)(x >> 8 & 255);
        if (s[i + 3] != '=')
            out[o++] = (unsigned char)(x & 255);
    }
    *n = o;
    return out;
}

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* A JSON table (export --format json): every row's fingerprint key is
 * checked against its fields at open; a kernel's hash against its PTX (and
 * its cubin decoded) at its first load. pass 0 offers the fingerprints,
 * pass 1 makes the served fingerprint's rows entries; the document stays
 * (rt->json) until close. */
static int read_json(ptxtune_runtime *rt, const char *path, int pass, fp_pick *pk,
                     ptxtune_error *e)
{
    json_t *rowsj = json_object_get(rt->json, "rows");
    int rc = PTXTUNE_OK;
    for (size_t i = 0; i < json_array_size(rowsj) && !rc; i++) {
        json_t *r = json_array_get(rowsj, i), *fp = json_object_get(r, "fingerprint"),
               *pb = json_object_get(r, "problem"), *kn = json_object_get(r, "kernel"),
               *cb = json_object_get(r, "cubin"), *tm = json_object_get(r, "time_s");
        const char *key = jstr(fp, "key");
        if (pass == 1) {
            if (strcmp(key, rt->fp_key) != 0)
                continue;
            json_t *med = json_object_get(tm, "median");
            row_view v = {jstr(pb, "op"), jstr(pb, "class"), jstr(pb, "key"), jstr(pb, "dims"),
                          jstr(r, "config"), jstr(kn, "entry"), cb ? jstr(cb, "arch") : "",
                          jstr(kn, "hash"), json_object_get(r, "launch"), NULL, NULL, 0, 0, 0, kn,
                          cb && jstr(cb, "base64") ? cb : NULL,
                          json_is_number(med) ? json_number_value(med) : NAN, NULL, 0};
            rc = add_entry(rt, &v, e);
            continue;
        }
        int64_t cc = 0, sms = 0, ptxv = 0;
        db_fingerprint f = {jstr(fp, "gpu"), 0, 0, jstr(fp, "driver"), jstr(fp, "compiler"), 0,
                            jstr(fp, "generator"), jstr(fp, "protocol")};
        if (!jint(fp, "cc", &cc) || !jint(fp, "sm_count", &sms) ||
            !jint(fp, "ptx_version", &ptxv) || !f.gpu || !f.driver || !f.compiler ||
            !f.generator || !f.protocol || !key || !jstr(kn, "ptx") || !jstr(kn, "hash") ||
            !jstr(pb, "key") || !jstr(pb, "class") || !jstr(pb, "dims") || !jstr(pb, "op")) {
            rc = fail(e, PTXTUNE_EINVAL, "%s: row %zu: missing or mistyped fields", path, i + 1);
            break;
        }
        f.cc = (int)cc;
        f.sm_count = (int)sms;
        f.ptx_version = (int)ptxv;
        char want[17];
        db_fingerprint_key(&f, want);
        if (strcmp(want, key) != 0) {
            rc = fail(e, PTXTUNE_EINVAL, "%s: row %zu: fingerprint key %s does not match its fields",
                      path, i + 1, key);
            break;
        }
        fp_offer(pk, key, f.gpu, f.cc, f.sm_count, f.driver, 1);
    }
    return rc;
}

/* ---- a JSON table's index (version 2, db/export.c's json_table_text) ----- */

/* The document's first bytes when the index follows (the writer's): any
 * other start (a table rewritten by another tool) is read whole. */
static const char json_v2_prefix[] = "{\"format\": \"ptxtune-table\", \"version\": 2, \"index\": ";
static const char *const json_v2_cols[] = {"fingerprint", "row",    "launch",     "op",
                                           "class",       "problem", "dims",      "config",
                                           "entry",       "hash",    "arch",      "time_s",
                                           "contract_v",  "sizes",   "cubin_hash"};
enum { JC_FP, JC_ROW, JC_LAUNCH, JC_OP, JC_CLASS, JC_PROBLEM, JC_DIMS, JC_CONFIG, JC_ENTRY,
       JC_HASH, JC_ARCH, JC_TIME, JC_CV, JC_SIZES, JC_CUBIN, JC_N };

/* bytes [off, off + len) of the indexed table as one JSON value (a
 * slice that is not exactly one: NULL, with why) */
static json_t *slice_load(const ptxtune_runtime *rt, const int64_t at[2], char *why, size_t nwhy)
{
    if (at[0] < 0 || at[1] < 1 || at[1] > (int64_t)1 << 30) {
        snprintf(why, nwhy, "bad offsets");
        return NULL;
    }
    char *buf = malloc((size_t)at[1]);
    if (!buf) {
        snprintf(why, nwhy, "out of memory");
        return NULL;
    }
    ssize_t got = pread(rt->jfd, buf, (size_t)at[1], (off_t)at[0]);
    json_t *v = NULL;
    json_error_t je;
    if (got != (ssize_t)at[1])
        snprintf(why, nwhy, "%s", got < 0 ? strerror(errno) : "past the end of the file");
    else if (!(v = json_loadb(buf, (size_t)at[1], 0, &je)))
        snprintf(why, nwhy, "not one JSON value there: %.100s", je.text);
    free(buf);
    return v;
}

static int index_fail(const ptxtune_runtime *rt, ptxtune_error *e, int row, const int64_t at[2],
                      const char *why)
{
    return fail(e, PTXTUNE_EINVAL,
                "%s: row %d does not match the table's index (bytes %lld+%lld: %s): the table "
                "was edited or damaged; export it again",
                rt->jpath, row, (long long)at[0], (long long)at[1], why);
}

static bool jint_of(json_t *x, int64_t *v)
{
    if (!json_is_integer(x))
        return false;
    *v = json_integer_value(x);
    return true;
}

/* [offset, length] */
static bool jspan(json_t *a, int64_t v[2])
{
    return json_array_size(a) == 2 && jint_of(json_array_get(a, 0), &v[0]) &&
           jint_of(json_array_get(a, 1), &v[1]) && v[0] >= 0 && v[1] >= 1 &&
           v[0] <= INT64_MAX - v[1];
}

/* The index's rows: pass 0 checks and offers its fingerprints, pass 1 makes
 * the served fingerprint's rows entries (their contracts and kernels are
 * read from the document at first use). size: the file's. */
static int read_index(ptxtune_runtime *rt, json_t *ix, int64_t size, int pass, fp_pick *pk,
                      ptxtune_error *e)
{
    const char *path = rt->jpath;
    json_t *fps = json_object_get(ix, "fingerprints"), *rows = json_object_get(ix, "rows");
    size_t nfp = json_array_size(fps);
    if (!json_is_array(fps) || !json_is_array(rows))
        return fail(e, PTXTUNE_EINVAL, "%s: the table's index has no fingerprints or rows", path);
    int *count = calloc(nfp + 1, sizeof *count);
    if (!count)
        return fail(e, PTXTUNE_ENOMEM, "out of memory");
    int rc = PTXTUNE_OK;
    for (size_t i = 0; i < json_array_size(rows) && !rc; i++) {
        json_t *r = json_array_get(rows, i), *c[JC_N];
        for (int j = 0; j < JC_N; j++)
            c[j] = json_array_get(r, (size_t)j);
        int64_t fi = -1, at[4] = {0};
        const char *sv[JC_N] = {0};
        for (int j = JC_OP; j <= JC_ARCH; j++)
            sv[j] = json_string_value(c[j]);
        bool ok = json_array_size(r) == JC_N && jint_of(c[JC_FP], &fi) && fi >= 0 &&
                  (size_t)fi < nfp && jspan(c[JC_ROW], at) && jspan(c[JC_LAUNCH], at + 2) &&
                  at[0] + at[1] <= size && at[2] >= at[0] && at[2] + at[3] <= at[0] + at[1] &&
                  (json_is_number(c[JC_TIME]) || json_is_null(c[JC_TIME])) &&
                  ((json_is_integer(c[JC_CV]) && json_is_string(c[JC_SIZES])) ||
                   (json_is_null(c[JC_CV]) && json_is_null(c[JC_SIZES])));
        for (int j = JC_OP; ok && j <= JC_ARCH; j++)
            ok = sv[j] != NULL;
        ok = ok && strlen(sv[JC_HASH]) == 16 && *sv[JC_PROBLEM] && *sv[JC_CLASS] &&
             (json_is_null(c[JC_CUBIN]) || (json_is_string(c[JC_CUBIN]) &&
                                            strlen(json_string_value(c[JC_CUBIN])) == 16));
        if (!ok) {
            rc = fail(e, PTXTUNE_EINVAL,
                      "%s: row %zu of the table's index is malformed (missing, mistyped or "
                      "out-of-file fields)",
                      path, i + 1);
            break;
        }
        if (pass == 0) {
            count[fi]++;
            continue;
        }
        if (strcmp(jstr(json_array_get(fps, (size_t)fi), "key"), rt->fp_key) != 0)
            continue;
        json_t *l = NULL, *dc = NULL;
        char why[160];
        if (json_is_null(c[JC_SIZES])) { /* no sizes in the index: the contract's own */
            if (!(l = slice_load(rt, at + 2, why, sizeof why))) {
                rc = index_fail(rt, e, (int)i + 1, at + 2, why);
                break;
            }
            dc = json_object_get(l, "contract");
        }
        row_view v = {sv[JC_OP], sv[JC_CLASS], sv[JC_PROBLEM], sv[JC_DIMS], sv[JC_CONFIG],
                      sv[JC_ENTRY], sv[JC_ARCH], sv[JC_HASH], NULL, dc,
                      l ? NULL : json_string_value(c[JC_SIZES]),
                      l ? 0 : json_integer_value(c[JC_CV]), 0, 0, NULL, NULL,
                      json_is_number(c[JC_TIME]) ? json_number_value(c[JC_TIME]) : NAN, at,
                      (int)i + 1};
        rc = add_entry(rt, &v, e);
        if (!rc && json_is_string(c[JC_CUBIN]))
            snprintf(rt->v[rt->n - 1].chash, sizeof rt->v[rt->n - 1].chash, "%s",
                     json_string_value(c[JC_CUBIN]));
        json_decref(l);
    }
    for (size_t f = 0; pass == 0 && !rc && f < nfp; f++) {
        json_t *fp = json_array_get(fps, f);
        int64_t cc = 0, sms = 0, ptxv = 0;
        db_fingerprint df = {jstr(fp, "gpu"), 0, 0, jstr(fp, "driver"), jstr(fp, "compiler"), 0,
                             jstr(fp, "generator"), jstr(fp, "protocol")};
        const char *key = jstr(fp, "key");
        if (!jint(fp, "cc", &cc) || !jint(fp, "sm_count", &sms) ||
            !jint(fp, "ptx_version", &ptxv) || !df.gpu || !df.driver || !df.compiler ||
            !df.generator || !df.protocol || !key) {
            rc = fail(e, PTXTUNE_EINVAL, "%s: fingerprint %zu of the table's index: missing or "
                      "mistyped fields", path, f + 1);
            break;
        }
        df.cc = (int)cc;
        df.sm_count = (int)sms;
        df.ptx_version = (int)ptxv;
        rc = fp_check(path, &df, key, e);
        if (!rc && count[f])
            fp_offer(pk, key, df.gpu, df.cc, df.sm_count, df.driver, count[f]);
    }
    free(count);
    return rc;
}

/* The row of an indexed entry, checked against what the index said of it
 * (and the row's launch against the launch slice selection read). */
static int index_row(ptxtune_runtime *rt, const ptxtune_entry *k, json_t **row,
                     ptxtune_error *e)
{
    char why[160];
    json_t *r = slice_load(rt, k->jrow, why, sizeof why);
    if (!r)
        return index_fail(rt, e, k->jrowno, k->jrow, why);
    json_t *fp = json_object_get(r, "fingerprint"), *pb = json_object_get(r, "problem"),
           *kn = json_object_get(r, "kernel"), *cb = json_object_get(r, "cubin");
    const char *arch = json_is_null(cb) ? "" : jstr(cb, "arch");
    int64_t dv[PTXTUNE_MAX_DIMS];
    int nd = jstr(pb, "dims") ? parse_dims(jstr(pb, "dims"), dv, PTXTUNE_MAX_DIMS) : -1;
    bool same = nd == k->ndims;
    for (int i = 0; same && i < nd; i++)
        same = dv[i] == k->tuned[i];
    static const char *const fields[][2] = {{"fingerprint", "key"}, {"problem", "key"},
                                            {"problem", "class"},   {"problem", "op"},
                                            {"", "config"},         {"kernel", "entry"},
                                            {"kernel", "hash"}};
    const char *want[] = {rt->fp_key, k->problem, k->klass, k->op, k->config, k->entry, k->khash};
    const char *bad = same ? NULL : "problem.dims";
    char bname[32] = "";
    for (size_t i = 0; !bad && i < sizeof fields / sizeof fields[0]; i++) {
        json_t *o = *fields[i][0] ? json_object_get(r, fields[i][0]) : r;
        const char *got = jstr(o, fields[i][1]);
        if (!got || strcmp(got, want[i]) != 0) {
            snprintf(bname, sizeof bname, "%s%s%s", fields[i][0], *fields[i][0] ? "." : "",
                     fields[i][1]);
            bad = bname;
        }
    }
    if (!bad && (!arch || strcmp(arch, k->arch) != 0))
        bad = "cubin.arch";
    if (!bad && (!json_is_object(fp) || !jstr(kn, "ptx")))
        bad = "kernel.ptx";
    const char *b64 = json_is_object(cb) ? jstr(cb, "base64") : NULL;
    char ch[17] = "";
    if (b64)
        snprintf(ch, sizeof ch, "%016llx", (unsigned long long)pt_hash64(b64, strlen(b64)));
    if (!bad && strcmp(ch, k->chash) != 0)
        bad = "cubin (its hash)";
    json_t *l = bad ? NULL : slice_load(rt, k->jlaunch, why, sizeof why);
    if (!bad && !(l && json_equal(l, json_object_get(r, "launch"))))
        bad = "launch";
    json_decref(l);
    if (bad) {
        json_decref(r);
        snprintf(why, sizeof why, "its %s differs", bad);
        return index_fail(rt, e, k->jrowno, k->jrow, why);
    }
    *row = r;
    return PTXTUNE_OK;
}

/* The kernel of k: its PTX (checked against its identity, as import checks
 * it) and its cubin, both owned by the caller (the bundle's or the table's). */
static int kernel_read(ptxtune_runtime *rt, const ptxtune_entry *k, char **ptx,
                       unsigned char **cubin, size_t *cubin_size, ptxtune_error *e)
{
    *ptx = NULL;
    *cubin = NULL;
    *cubin_size = 0;
    const char *p = NULL, *hash = k->khash;
    size_t n = 0;
    json_t *own = NULL; /* the row read through the index */
    if (rt->bundle) {
        if (!k->kernel_id)
            return fail(e, PTXTUNE_EINVAL, "%s: the row has no kernel", k->problem);
        sqlite3_stmt *q = rt->kernel_q;
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, k->kernel_id);
        sqlite3_bind_text(q, 2, k->arch, -1, SQLITE_STATIC);
        if (sqlite3_step(q) != SQLITE_ROW)
            return fail(e, PTXTUNE_EINVAL, "%s: kernel %s: %s", k->problem, k->khash,
                        sqlite3_errmsg(rt->bundle));
        p = (const char *)sqlite3_column_text(q, 0);
        n = (size_t)sqlite3_column_bytes(q, 0);
        const void *b = sqlite3_column_blob(q, 2);
        *cubin_size = b ? (size_t)sqlite3_column_bytes(q, 2) : 0;
        if (*cubin_size) {
            *cubin = malloc(*cubin_size);
            if (!*cubin)
                return fail(e, PTXTUNE_ENOMEM, "out of memory");
            memcpy(*cubin, b, *cubin_size);
        }
    } else {
        json_t *kj = k->kjson, *cj = k->cjson;
        if (!kj) { /* through the index: the row, read now */
            int rc = index_row(rt, k, &own, e);
            if (rc)
                return rc;
            kj = json_object_get(own, "kernel");
            cj = json_object_get(own, "cubin");
        }
        p = jstr(kj, "ptx");
        n = p ? strlen(p) : 0;
        const char *b64 = json_is_object(cj) ? jstr(cj, "base64") : NULL;
        if (b64 && !(*cubin = b64_decode(b64, cubin_size))) {
            json_decref(own);
            return fail(e, PTXTUNE_EINVAL, "%s: kernel %s: the cubin is not base64", k->problem,
                        hash);
        }
    }
    char want[17] = "";
    if (p)
        db_kernel_hash(p, n, want);
    if (!p || strcmp(want, hash) != 0 || strlen(p) != n) {
        free(*cubin);
        *cubin = NULL;
        json_decref(own);
        return fail(e, PTXTUNE_EINVAL, "%s: kernel %s does not match its PTX (%s): the table is damaged",
                    k->problem, hash, want);
    }
    *ptx = malloc(n + 1);
    if (!*ptx) {
        free(*cubin);
        *cubin = NULL;
        json_decref(own);
        return fail(e, PTXTUNE_ENOMEM, "out of memory");
    }
    memcpy(*ptx, p, n);
    (*ptx)[n] = '\0';
    json_decref(own);
    return PTXTUNE_OK;
}

/* ---- open ----------------------------------------------------------------- */

static bool is_sqlite(const char *head, size_t n)
{
    return n >= 16 && memcmp(head, "SQLite format 3", 16) == 0;
}

static int device_open(ptxtune_runtime *rt, int ordinal, char *name, size_t nname, int *sms,
                       int *driver, ptxtune_error *e)
{
#ifdef PT_HAVE_CUDA_HEADERS
    rt_api *a = &rt->api;
#define NAME(f) #f,
#define SLOT(f) (void **)&a->f,
    static const char *const names[] = {RT_FNS(NAME)};
    static const char *const req[] = {RT_FNS_REQ(NAME)};
    void **const slots[] = {RT_FNS(SLOT)};
#undef NAME
#undef SLOT
    pt_err pe = {0};
    if (pt_driver_open(&a->lib, names, slots, (int)(sizeof names / sizeof names[0]),
                       (int)(sizeof req / sizeof req[0]), &pe))
        return from_pt(e, &pe);
    CUresult r = a->cuInit(0);
    if (r != CUDA_SUCCESS)
        return cu_fail(rt, e, r, "cuInit", NULL);
    CUcontext cur = NULL;
    if (a->cuCtxGetCurrent && a->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur &&
        a->cuCtxGetDevice && a->cuCtxGetDevice(&rt->dev) == CUDA_SUCCESS) {
        rt->ctx = cur; /* the caller's context: used, never changed */
    } else {
        if ((r = a->cuDeviceGet(&rt->dev, ordinal)) != CUDA_SUCCESS)
            return cu_fail(rt, e, r, "cuDeviceGet", NULL);
        if ((r = a->cuDevicePrimaryCtxRetain(&rt->primary, rt->dev)) != CUDA_SUCCESS)
            return cu_fail(rt, e, r, "cuDevicePrimaryCtxRetain", NULL);
        if ((r = a->cuCtxSetCurrent(rt->primary)) != CUDA_SUCCESS)
            return cu_fail(rt, e, r, "cuCtxSetCurrent", NULL);
        rt->ctx = rt->primary;
    }
    int maj = 0, min = 0;
    if ((r = a->cuDeviceGetName(name, (int)nname, rt->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                     rt->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                     rt->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->dev)) !=
            CUDA_SUCCESS ||
        (r = a->cuDriverGetVersion(driver)) != CUDA_SUCCESS)
        return cu_fail(rt, e, r, "querying the device", NULL);
    rt->cc = maj * 10 + min;
    return PTXTUNE_OK;
#else
    (void)rt;
    (void)ordinal;
    (void)name;
    (void)nname;
    (void)sms;
    (void)driver;
    return fail(e, PTXTUNE_ENODRIVER, "no CUDA driver found (libcuda.so.1): built without CUDA headers");
#endif
}

PTXTUNE_EXPORT void ptxtune_close(ptxtune_runtime *rt)
{
    if (!rt)
        return;
#ifdef PT_HAVE_CUDA_HEADERS
    bool pushed = false;
    if (rt->ctx)
        ctx_enter(rt, &pushed);
#endif
    for (int i = 0; i < rt->n; i++) {
#ifdef PT_HAVE_CUDA_HEADERS
        if (atomic_load(&rt->v[i].loaded) && rt->api.cuModuleUnload)
            rt->api.cuModuleUnload(rt->v[i].mod);
#endif
        entry_free(&rt->v[i]);
    }
#ifdef PT_HAVE_CUDA_HEADERS
    if (rt->ctx)
        ctx_leave(rt, pushed);
#endif
    free(rt->v);
    free(rt->heads);
    sqlite3_finalize(rt->kernel_q);
    sqlite3_finalize(rt->launch_q);
    sqlite3_close(rt->bundle);
    json_decref(rt->json);
    if (rt->jfd >= 0)
        close(rt->jfd);
    free(rt->jpath);
#ifdef PT_HAVE_CUDA_HEADERS
    if (rt->primary && rt->api.cuDevicePrimaryCtxRelease)
        rt->api.cuDevicePrimaryCtxRelease(rt->dev);
#endif
    pt_driver_close(&rt->api.lib);
    pthread_mutex_destroy(&rt->mu);
    free(rt);
}

/* A JSON table. Version 2 as its writer wrote it (json_v2_prefix, then an
 * index whose file_bytes is the file's size): only the index is read (the
 * file stays open; rows are read at first use); *index is it. Else (version
 * 1, or a version 2 table rewritten by another tool, whose offsets no
 * longer hold) the whole document is read into rt->json. */
static int open_json(ptxtune_runtime *rt, const char *path, fp_pick *pk, json_t **index,
                     int64_t *isize, ptxtune_error *e)
{
    *index = NULL;
    rt->jpath = strdup(path);
    if (!rt->jpath)
        return fail(e, PTXTUNE_ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return fail(e, PTXTUNE_EIO, "%s: cannot open: %s", path, strerror(err));
    }
    int64_t size = st.st_size;
    size_t plen = sizeof json_v2_prefix - 1, want = 65536, have = 0;
    pt_buf b;
    pt_buf_init(&b);
    int rc = PTXTUNE_OK;
    json_error_t je;
    for (;;) { /* the head (the index after the prefix), grown until it parses */
        if (want > (size_t)size)
            want = (size_t)size;
        if (!pt_buf_room(&b, want - have)) {
            rc = fail(e, PTXTUNE_ENOMEM, "out of memory");
            break;
        }
        while (have < want) {
            ssize_t got = pread(fd, b.s + have, want - have, (off_t)have);
            if (got <= 0) {
                rc = got < 0 ? fail(e, PTXTUNE_EIO, "%s: cannot read: %s", path, strerror(errno))
                             : fail(e, PTXTUNE_EIO, "%s: changed while read", path);
                break;
            }
            have += (size_t)got;
        }
        b.len = have;
        if (rc || have < plen || memcmp(b.s, json_v2_prefix, plen) != 0)
            break;
        json_t *ix = json_loadb(b.s + plen, have - plen, JSON_DISABLE_EOF_CHECK, &je);
        if (!ix && json_error_code(&je) == json_error_premature_end_of_input && have < (size_t)size) {
            want = 4 * have;
            continue;
        }
        int64_t fb = -1;
        if (!ix || !jint(ix, "file_bytes", &fb) || fb != size) {
            json_decref(ix); /* not the writer's index for this file: read it whole */
            break;
        }
        json_t *cols = json_object_get(ix, "columns");
        bool ok = json_array_size(cols) == JC_N;
        for (int j = 0; ok && j < JC_N; j++)
            ok = json_string_value(json_array_get(cols, (size_t)j)) &&
                 strcmp(json_string_value(json_array_get(cols, (size_t)j)), json_v2_cols[j]) == 0;
        if (!ok) {
            json_decref(ix);
            rc = fail(e, PTXTUNE_EINVAL,
                      "%s: the table's index (version 2) has other columns than this library "
                      "reads; export it again with this version",
                      path);
            break;
        }
        rt->jfd = fd;
        fd = -1;
        rc = read_index(rt, ix, size, 0, pk, e);
        if (rc)
            json_decref(ix);
        else {
            *index = ix;
            *isize = size;
        }
        break;
    }
    if (!rc && !*index) { /* the whole document */
        for (;;) { /* to the end, whatever its size now */
            if (!pt_buf_room(&b, 65536)) {
                rc = fail(e, PTXTUNE_ENOMEM, "out of memory");
                break;
            }
            ssize_t got = pread(fd, b.s + have, b.cap - have - 1, (off_t)have);
            if (got < 0)
                rc = fail(e, PTXTUNE_EIO, "%s: cannot read: %s", path, strerror(errno));
            if (got <= 0)
                break;
            have += (size_t)got;
            b.len = have;
        }
        if (!rc && !(rt->json = json_loadb(b.s ? b.s : "", have, 0, &je)))
            rc = fail(e, PTXTUNE_EINVAL, "%s:%d: not a JSON table (%s)", path, je.line, je.text);
        const char *fmt = rc ? NULL : jstr(rt->json, "format");
        json_t *ver = rc ? NULL : json_object_get(rt->json, "version");
        if (!rc && (!fmt || strcmp(fmt, "ptxtune-table") != 0 ||
                    !json_is_array(json_object_get(rt->json, "rows"))))
            rc = fail(e, PTXTUNE_EINVAL, "%s: not a ptxtune table (format ptxtune-table)", path);
        else if (!rc && (!json_is_integer(ver) || json_integer_value(ver) < 1 ||
                         json_integer_value(ver) > 2))
            rc = fail(e, PTXTUNE_EINVAL,
                      "%s: table version %s is not supported (this library reads 1 and 2)", path,
                      json_is_integer(ver) ? "other than 1 and 2" : "missing or not an integer");
        if (!rc)
            rc = read_json(rt, path, 0, pk, e);
    }
    if (fd >= 0)
        close(fd);
    pt_buf_free(&b);
    return rc;
}

PTXTUNE_EXPORT int ptxtune_open(const char *path, const ptxtune_options *o, ptxtune_runtime **out,
                                ptxtune_error *e)
{
    *out = NULL;
    if (e) {
        e->code = 0;
        e->msg[0] = '\0';
    }
    ptxtune_options dflt = {0};
    if (!o)
        o = &dflt;
    if (!path || !*path)
        return fail(e, PTXTUNE_EINVAL, "no table given");
    ptxtune_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return fail(e, PTXTUNE_ENOMEM, "out of memory");
    pthread_mutex_init(&rt->mu, NULL);
    rt->jfd = -1;
    rt->flags = o->flags;
    char name[256] = "";
    int sms = 0, driver = 0;
    int rc = device_open(rt, o->device, name, sizeof name, &sms, &driver, e);
    rt->sms = sms;
    fp_pick pk = {.prefix = o->fingerprint, .gpu = name, .cc = rt->cc, .sms = sms};
    snprintf(pk.drv, sizeof pk.drv, "%d", driver);
    bool bundle = false;
    json_t *index = NULL; /* a version 2 JSON table's index */
    int64_t isize = 0;
    if (!rc) {
        FILE *f = fopen(path, "rb");
        char head[16] = "";
        size_t nh = f ? fread(head, 1, sizeof head, f) : 0;
        if (!f)
            rc = fail(e, PTXTUNE_EIO, "%s: cannot open: %s", path, strerror(errno));
        else if (is_sqlite(head, nh)) {
            fclose(f);
            f = NULL;
            bundle = true;
            rc = read_bundle(rt, path, &pk, e);
        } else {
            fclose(f);
            f = NULL;
            rc = open_json(rt, path, &pk, &index, &isize, e);
        }
        if (f)
            fclose(f);
    }
    if (!rc && pk.ambiguous)
        rc = fail(e, PTXTUNE_EINVAL, "%s: fingerprint prefix '%s' names more than one", path,
                  o->fingerprint);
    if (!rc && !pk.have)
        rc = o->fingerprint
                 ? fail(e, PTXTUNE_ENOTFOUND, "%s: no entry has fingerprint '%s'", path,
                        o->fingerprint)
                 : fail(e, PTXTUNE_ENOTFOUND,
                        "%s: no entry tuned on this device ('%s', sm_%d, %d SMs); %d rows for "
                        "other devices",
                        path, name, rt->cc, sms, pk.rows);
    if (!rc) {
        snprintf(rt->fp_key, sizeof rt->fp_key, "%s", pk.key);
        rc = bundle  ? read_bundle_rows(rt, path, e)
             : index ? read_index(rt, index, isize, 1, &pk, e)
                     : read_json(rt, path, 1, &pk, e);
    }
    json_decref(index);
    if (!rc)
        rc = link_classes(rt, e);
    for (int i = 0; !rc && (rt->flags & PTXTUNE_LOAD_EAGER) && i < rt->n; i++)
        rc = ptxtune_load(rt, &rt->v[i], e);
    if (rc) {
        ptxtune_close(rt);
        return rc;
    }
    *out = rt;
    return PTXTUNE_OK;
}

PTXTUNE_EXPORT const char *ptxtune_fingerprint(const ptxtune_runtime *rt) { return rt->fp_key; }
PTXTUNE_EXPORT int ptxtune_entry_count(const ptxtune_runtime *rt) { return rt->n; }
PTXTUNE_EXPORT const ptxtune_entry *ptxtune_entry_get(const ptxtune_runtime *rt, int i)
{
    return i >= 0 && i < rt->n ? &rt->v[i] : NULL;
}

PTXTUNE_EXPORT int ptxtune_entry_info_get(const ptxtune_entry *k, ptxtune_entry_info *info)
{
    memset(info, 0, sizeof *info);
    if (!k)
        return PTXTUNE_EINVAL;
    ptxtune_error e;
    if (contract_ensure(k->rt, &k->rt->v[k - k->rt->v], &e))
        return e.code; /* a contract that does not read: its problem and nothing else */
    *info = (ptxtune_entry_info){.op = k->op, .klass = k->klass, .problem = k->problem,
                                 .config = k->config, .entry = k->entry, .arch = k->arch,
                                 .ndims = k->ndims, .nargs = k->nargs, .time_s = k->time_s,
                                 .loaded = atomic_load(&k->loaded)};
    for (int i = 0; i < k->ndims; i++) {
        info->tuned[i] = k->tuned[i];
        info->min[i] = k->lo[i];
        info->max[i] = k->hi[i];
    }
    return PTXTUNE_OK;
}

/* ---- selection ------------------------------------------------------------ */

static int64_t pow2_up(int64_t v)
{
    int64_t p = 1;
    while (p < v && p < INT64_MAX / 2)
        p *= 2;
    return p;
}

/* Whether k serves the request; dims it runs at into at, *padded. */
static bool serves(const ptxtune_entry *k, const int64_t *r, bool pad, int64_t *at, bool *padded)
{
    *padded = false;
    for (int i = 0; i < k->ndims; i++) {
        for (int j = 0; k->grouped && j < i; j++)
            if (k->group[j] == k->group[i] && r[j] != r[i] && k->lo[i] != k->hi[i])
                return false; /* a group takes one value */
        if (r[i] >= k->lo[i] && r[i] <= k->hi[i]) {
            at[i] = r[i];
            continue;
        }
        if (pad && k->lo[i] == k->hi[i] && r[i] >= 1 && r[i] < k->tuned[i]) {
            at[i] = k->tuned[i];
            *padded = true;
            continue;
        }
        return false;
    }
    return true;
}

/* sum of log2(tuned / request): the request's log2 sum is the same for
 * every entry, so the tuned sum orders them */
static double dist_up(const ptxtune_entry *k, double req_lg)
{
    return k->lg_sum - req_lg;
}

static int fill_selection(const ptxtune_runtime *crt, const ptxtune_entry *ck, const int64_t *r,
                          int n, const int64_t *at, bool padded, ptxtune_match m,
                          ptxtune_selection *s, ptxtune_error *e)
{
    memset(s, 0, sizeof *s);
    /* its whole contract: read once, at its first selection (a bundle's) */
    ptxtune_runtime *rt = (ptxtune_runtime *)crt;
    const ptxtune_entry *k = ck;
    int rc = contract_ensure(rt, &rt->v[ck - rt->v], e);
    if (rc)
        return rc;
    s->entry = k;
    s->match = m;
    s->ndims = n;
    for (int i = 0; i < n; i++)
        s->dims[i] = at[i];
    (void)r;
    s->padded = padded;
    for (int i = 0; i < 3; i++) {
        const rt_grid *g = &k->grid[i];
        int64_t v = g->dim < 0 ? g->c : (at[g->dim] * g->mul + g->div - 1) / g->div * g->times;
        if (i == 0) /* a persistent kernel: at most K x this device's SMs, whole clusters */
            v = pt_grid_cap(v, g->per_sm, crt->sms, k->cluster[0]);
        if (v < 1 || v > (i == 0 ? INT32_MAX : 65535))
            return fail(e, PTXTUNE_EINVAL, "%s: grid %c of %lld is out of range", k->problem,
                        "xyz"[i], (long long)v);
        s->grid[i] = (unsigned)v;
        s->block[i] = k->block[i];
    }
    s->smem = k->smem;
    /* the zero-filled workspace, then the scratch (any contents) */
    s->workspace_bytes = k->scratch_bytes ? (k->ws_bytes + 255) / 256 * 256 + k->scratch_bytes
                                          : k->ws_bytes;
    s->workspace_align = s->workspace_bytes ? 256 : 0;
    s->align = k->align;
    return PTXTUNE_OK;
}

PTXTUNE_EXPORT int ptxtune_select(const ptxtune_runtime *rt, const char *klass,
                                  const int64_t *dims, int ndims, ptxtune_selection *sel,
                                  ptxtune_error *e)
{
    if (!rt || !klass || !sel || ndims < 0 || ndims > PTXTUNE_MAX_DIMS || (ndims && !dims))
        return fail(e, PTXTUNE_EINVAL, "ptxtune_select: bad arguments");
    for (int i = 0; i < ndims; i++)
        if (dims[i] < 1)
            return fail(e, PTXTUNE_EINVAL, "size %d is %lld: sizes are at least 1", i,
                        (long long)dims[i]);
    uint64_t h = hash_str(klass);
    int cid = class_id(rt, klass, h);
    bool pad = rt->flags & PTXTUNE_ALLOW_PAD;
    int64_t bucket[PTXTUNE_MAX_DIMS];
    for (int i = 0; i < ndims; i++)
        bucket[i] = pow2_up(dims[i]);
    if (rt->flags & PTXTUNE_BUCKET_TUNED) /* the next tuned size of the class */
        for (int i = 0; i < ndims; i++) {
            int64_t best = 0;
            for (int j = cid; j >= 0; j = rt->v[j].next_cls) {
                const ptxtune_entry *k = &rt->v[j];
                if (k->ndims == ndims && k->tuned[i] >= dims[i] && (!best || k->tuned[i] < best))
                    best = k->tuned[i];
            }
            bucket[i] = best ? best : dims[i];
        }
    /* the class's entries (linked at open); the first exact one ends the
     * walk (it wins); the others are kept as entries, their sizes to run at
     * computed again for the one chosen */
    const ptxtune_entry *exact = NULL, *inb = NULL, *above = NULL, *dflt = NULL;
    double above_d = 0, dflt_d = 0;
    int64_t at[PTXTUNE_MAX_DIMS];
    bool pd;
    int nclass = 0;
    for (int j = cid; j >= 0; j = rt->v[j].next_cls) {
        const ptxtune_entry *k = &rt->v[j];
        if (k->ndims != ndims)
            continue;
        nclass++;
        if (!serves(k, dims, pad, at, &pd))
            continue;
        bool eq = true, is_b = true, up = true;
        for (int i = 0; i < ndims; i++) {
            eq = eq && k->tuned[i] == dims[i];
            is_b = is_b && k->tuned[i] == bucket[i];
            up = up && k->tuned[i] >= dims[i];
        }
        if (eq) {
            exact = k;
            break;
        }
        if (is_b && (!inb || strcmp(k->problem, inb->problem) < 0))
            inb = k;
        double d = up ? dist_up(k, 0) : 0;
        if (up && (!above || d < above_d || (d == above_d && strcmp(k->problem, above->problem) < 0))) {
            above = k;
            above_d = d;
        }
        double size = k->lg_sum;
        if (!dflt || size > dflt_d || (size == dflt_d && strcmp(k->problem, dflt->problem) < 0)) {
            dflt = k;
            dflt_d = size;
        }
    }
    const ptxtune_entry *pick = exact ? exact : inb ? inb : above ? above : dflt;
    if (pick) {
        serves(pick, dims, pad, at, &pd);
        return fill_selection(rt, pick, dims, ndims, at, pd,
                              exact ? PTXTUNE_MATCH_EXACT
                              : inb || above ? PTXTUNE_MATCH_BUCKET
                                             : PTXTUNE_MATCH_DEFAULT,
                              sel, e);
    }
    char req[256] = "";
    size_t o = 0;
    for (int i = 0; i < ndims && o < sizeof req - 24; i++)
        o += (size_t)snprintf(req + o, sizeof req - o, "%s%lld", i ? "," : "", (long long)dims[i]);
    return fail(e, PTXTUNE_ENOTFOUND,
                nclass ? "'%s' at %s: none of its %d entries serves these sizes%s"
                       : "'%s' at %s: no entry of this class (%d)%s",
                klass, req, nclass, nclass && !pad ? " (PTXTUNE_ALLOW_PAD pads baked-in sizes)" : "");
}

PTXTUNE_EXPORT int ptxtune_arg_count(const ptxtune_selection *sel)
{
    return sel && sel->entry ? sel->entry->nargs : 0;
}

PTXTUNE_EXPORT int ptxtune_arg_get(const ptxtune_selection *sel, int i, ptxtune_arg_info *a)
{
    memset(a, 0, sizeof *a);
    if (!sel || !sel->entry || i < 0 || i >= sel->entry->nargs)
        return PTXTUNE_EINVAL;
    const ptxtune_entry *k = sel->entry;
    const rt_arg *r = &k->args[i];
    a->name = r->name;
    a->kind = kind_names[r->kind];
    a->dtype = r->dtype;
    a->tensor = r->tensor;
    a->elements = r->elements;
    for (int d = 0; d < k->ndims; d++)
        if (r->scales >> d & 1 && k->tuned[d] > 0)
            a->elements = a->elements / k->tuned[d] * sel->dims[d];
    if (r->kind == K_TENSORMAP && r->tmap >= 0 && k->tmaps[r->tmap].src == r->tensor)
        a->elements = tmap_extent(k, &k->tmaps[r->tmap], sel->dims);
    return PTXTUNE_OK;
}

/* ---- load and launch -------------------------------------------------------- */

/* The whole contract of k (a bundle's entries read it at their first
 * selection or load, once, under the runtime's lock). */
static int contract_ensure(ptxtune_runtime *rt, ptxtune_entry *k, ptxtune_error *e)
{
    if (atomic_load_explicit(&k->ready, memory_order_acquire))
        return PTXTUNE_OK;
    pthread_mutex_lock(&rt->mu);
    int rc = PTXTUNE_OK;
    if (!atomic_load_explicit(&k->ready, memory_order_relaxed) && !rt->bundle) {
        /* a JSON table read through its index: the launch value, now */
        char why[160];
        json_t *l = slice_load(rt, k->jlaunch, why, sizeof why);
        rc = l ? read_contract(k, json_object_get(l, "contract"), e)
               : index_fail(rt, e, k->jrowno, k->jlaunch, why);
        json_decref(l);
        if (!rc)
            atomic_store_explicit(&k->ready, 1, memory_order_release);
    } else if (!atomic_load_explicit(&k->ready, memory_order_relaxed)) {
        json_error_t je;
        json_t *l = NULL;
        if (!rt->launch_q &&
            sqlite3_prepare_v2(rt->bundle, "SELECT launch FROM measurements WHERE id = ?1", -1,
                               &rt->launch_q, NULL) != SQLITE_OK)
            rc = fail(e, PTXTUNE_EINVAL, "%s: reading its launch contract: %s", k->problem,
                      sqlite3_errmsg(rt->bundle));
        if (!rc) {
            sqlite3_reset(rt->launch_q);
            sqlite3_bind_int64(rt->launch_q, 1, k->meas_id);
            if (sqlite3_step(rt->launch_q) != SQLITE_ROW)
                rc = fail(e, PTXTUNE_EINVAL, "%s: reading its launch contract: %s", k->problem,
                          sqlite3_errmsg(rt->bundle));
        }
        if (!rc && !(l = json_loadb((const char *)sqlite3_column_text(rt->launch_q, 0),
                                    (size_t)sqlite3_column_bytes(rt->launch_q, 0), 0, &je)))
            rc = fail(e, PTXTUNE_EINVAL, "%s: the launch contract is not JSON (%s)", k->problem,
                      je.text);
        if (!rc)
            rc = read_contract(k, json_object_get(l, "contract"), e);
        if (rt->launch_q)
            sqlite3_reset(rt->launch_q);
        json_decref(l);
        if (!rc)
            atomic_store_explicit(&k->ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&rt->mu);
    return rc;
}

PTXTUNE_EXPORT int ptxtune_load(ptxtune_runtime *rt, const ptxtune_entry *ck, ptxtune_error *e)
{
    if (!rt || !ck || ck < rt->v || ck >= rt->v + rt->n)
        return fail(e, PTXTUNE_EINVAL, "ptxtune_load: not an entry of this runtime");
    ptxtune_entry *k = &rt->v[ck - rt->v];
    if (atomic_load_explicit(&k->loaded, memory_order_acquire))
        return PTXTUNE_OK;
    int crc = contract_ensure(rt, k, e);
    if (crc)
        return crc;
#ifdef PT_HAVE_CUDA_HEADERS
    pthread_mutex_lock(&rt->mu);
    int rc = PTXTUNE_OK;
    bool pushed = false;
    char *ptx = NULL;
    unsigned char *cubin = NULL;
    size_t cubin_size = 0;
    if (atomic_load_explicit(&k->loaded, memory_order_relaxed))
        goto out;
    const rt_api *a = &rt->api;
    CUresult r = ctx_enter(rt, &pushed);
    if (r != CUDA_SUCCESS) {
        rc = cu_fail(rt, e, r, "cuCtxPushCurrent", k->problem);
        goto out;
    }
    if ((rc = kernel_read(rt, k, &ptx, &cubin, &cubin_size, e)))
        goto out;
    char want[16];
    snprintf(want, sizeof want, "sm_%d", rt->cc);
    /* sm_90a runs on sm_90 only; the cubin's arch is the run's target */
    bool arch_ok = cubin && (strcmp(k->arch, want) == 0 ||
                                (strncmp(k->arch, want, strlen(want)) == 0 &&
                                 strcmp(k->arch + strlen(want), "a") == 0));
    r = CUDA_ERROR_NO_BINARY_FOR_GPU;
    if (arch_ok)
        r = a->cuModuleLoadDataEx(&k->mod, cubin, 0, NULL, NULL);
    if (r != CUDA_SUCCESS && (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE)) {
        if (!(rt->flags & PTXTUNE_ALLOW_PTX_JIT)) {
            rc = fail(e, PTXTUNE_ENOTFOUND,
                      "%s: %s for the device's %s%s; export it for this arch or allow the PTX "
                      "JIT (PTXTUNE_ALLOW_PTX_JIT)",
                      k->problem, cubin ? "cubin is" : "no cubin", want,
                      cubin ? (arch_ok ? " (the driver refused it)" : "") : "");
            if (cubin && !arch_ok)
                snprintf(e ? e->msg : want, e ? sizeof e->msg : sizeof want,
                         "%s: the cubin is for %s, the device is %s; export it for this arch "
                         "or allow the PTX JIT (PTXTUNE_ALLOW_PTX_JIT)",
                         k->problem, k->arch, want);
            goto out;
        }
        char log[2048] = "";
        CUjit_option opt[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *val[] = {log, (void *)(uintptr_t)sizeof log};
        r = a->cuModuleLoadDataEx(&k->mod, ptx, 2, opt, val);
        if (r != CUDA_SUCCESS) {
            for (char *p = log; *p; p++)
                if (*p == '\n')
                    *p = ' ';
            rc = cu_fail(rt, e, r, "cuModuleLoadDataEx (PTX JIT)", k->problem);
            goto out;
        }
        k->jit = true;
    } else if (r != CUDA_SUCCESS) {
        rc = cu_fail(rt, e, r, "cuModuleLoadDataEx", k->problem);
        goto out;
    }
    r = a->cuModuleGetFunction(&k->fn, k->mod, k->entry);
    if (r == CUDA_SUCCESS && k->smem > (48u << 10))
        r = a->cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  (int)k->smem);
    if (r != CUDA_SUCCESS) {
        rc = cu_fail(rt, e, r, "cuModuleGetFunction/cuFuncSetAttribute", k->problem);
        a->cuModuleUnload(k->mod);
        goto out;
    }
    atomic_store_explicit(&k->loaded, 1, memory_order_release);
out:
    free(ptx);
    free(cubin);
    ctx_leave(rt, pushed);
    pthread_mutex_unlock(&rt->mu);
    return rc;
#else
    (void)k;
    return fail(e, PTXTUNE_ENODRIVER, "built without CUDA headers");
#endif
}

/* One map over the launch's pointers, into out (64-byte aligned). */
static int tmap_encode(const ptxtune_runtime *rt, const ptxtune_entry *k, const rt_tmap *m,
                       const int64_t *at, const uint64_t *tensors, unsigned char *out,
                       ptxtune_error *e)
{
#ifdef PT_HAVE_CUDA_HEADERS
    if (!rt->api.cuTensorMapEncodeTiled)
        return fail(e, PTXTUNE_ENODRIVER,
                    "%s: takes tensor maps; the driver has no cuTensorMapEncodeTiled (a CUDA 12 "
                    "driver)",
                    k->problem);
    cuuint64_t dims[RT_TMAP_RANK] = {0}, strides[RT_TMAP_RANK] = {0};
    cuuint32_t box[RT_TMAP_RANK] = {0}, es[RT_TMAP_RANK];
    uint64_t md[RT_TMAP_RANK], ms[RT_TMAP_RANK];
    tmap_at(k, m, at, md, ms);
    for (int d = 0; d < RT_TMAP_RANK; d++) {
        dims[d] = d < m->rank ? md[d] : 1;
        strides[d] = d + 1 < m->rank ? ms[d] : 0;
        box[d] = d < m->rank ? m->box[d] : 1;
        es[d] = 1;
    }
    CUtensorMap map;
    void *addr = (void *)(uintptr_t)(tensors[m->src] + m->offset);
    CUresult r = rt->api.cuTensorMapEncodeTiled(
        &map, (CUtensorMapDataType)m->dtype, (cuuint32_t)m->rank, addr, dims, strides, box, es,
        CU_TENSOR_MAP_INTERLEAVE_NONE, (CUtensorMapSwizzle)m->swizzle,
        (CUtensorMapL2promotion)m->l2promo, (CUtensorMapFloatOOBfill)m->oobfill);
    if (r != CUDA_SUCCESS)
        return cu_fail(rt, e, r, "cuTensorMapEncodeTiled", k->problem);
    memcpy(out, &map, RT_TMAP_BYTES);
    return PTXTUNE_OK;
#else
    (void)rt;
    (void)m;
    (void)at;
    (void)tensors;
    (void)out;
    return fail(e, PTXTUNE_ENODRIVER, "%s: built without CUDA headers", k->problem);
#endif
}

PTXTUNE_EXPORT int ptxtune_launch(ptxtune_runtime *rt, const ptxtune_selection *sel,
                                  const ptxtune_launch_args *a, ptxtune_error *e)
{
    if (!rt || !sel || !sel->entry || !a)
        return fail(e, PTXTUNE_EINVAL, "ptxtune_launch: bad arguments");
    const ptxtune_entry *k = sel->entry;
    int rc = ptxtune_load(rt, k, e);
    if (rc)
        return rc;
    if (a->ntensors != k->ntensors || (k->ntensors && !a->tensors))
        return fail(e, PTXTUNE_EINVAL, "%s: %d tensor pointers given, the kernel takes %d",
                    k->problem, a->ntensors, k->ntensors);
    if ((k->ws_bytes || k->scratch_bytes) && !a->workspace)
        return fail(e, PTXTUNE_EINVAL, "%s: needs a workspace of %zu bytes (its first %zu zero-filled)",
                    k->problem, k->ws_bytes + k->scratch_bytes, k->ws_bytes);
    union {
        uint64_t u64;
        uint32_t u32;
        float f32;
    } vals[RT_MAX_ARGS];
    void *params[RT_MAX_ARGS];
    /* the maps, by value: 128 bytes each, 64-byte aligned (the driver's
     * CUtensorMap); encoded over this launch's pointers */
    _Alignas(64) unsigned char maps[8][RT_TMAP_BYTES];
    for (int i = 0; i < k->ntensors; i++)
        if (!a->tensors[i] || (k->align > 1 && a->tensors[i] % k->align))
            for (int j = 0; j < k->nargs; j++)
                if (k->args[j].tensor == i)
                    return fail(e, PTXTUNE_EINVAL,
                                "%s: tensor '%s' at 0x%llx: must be non-null and aligned to %zu "
                                "bytes",
                                k->problem, k->args[j].name, (unsigned long long)a->tensors[i],
                                k->align);
    for (int i = 0; i < k->ntmaps; i++)
        if ((rc = tmap_encode(rt, k, &k->tmaps[i], sel->dims, a->tensors, maps[i], e)))
            return rc;
    for (int i = 0; i < k->nargs; i++) {
        const rt_arg *r = &k->args[i];
        double v = r->value;
        for (int s = 0; s < a->nscalars && a->scalars; s++)
            if (a->scalars[s].name && strcmp(a->scalars[s].name, r->name) == 0)
                v = a->scalars[s].value;
        if (r->dim >= 0)
            v = (double)sel->dims[r->dim];
        switch (r->kind) {
        case K_INPUT:
        case K_OUTPUT: {
            uint64_t p = a->tensors[r->tensor];
            if (!p || (k->align > 1 && p % k->align))
                return fail(e, PTXTUNE_EINVAL,
                            "%s: tensor '%s' at 0x%llx: must be non-null and aligned to %zu bytes",
                            k->problem, r->name, (unsigned long long)p, k->align);
            vals[i].u64 = p;
            break;
        }
        case K_WORKSPACE: vals[i].u64 = a->workspace; break;
        case K_SCRATCH: vals[i].u64 = a->workspace + (k->ws_bytes + 255) / 256 * 256; break;
        case K_TENSORMAP: break;
        case K_U32: vals[i].u32 = (uint32_t)v; break;
        case K_U64: vals[i].u64 = (uint64_t)v; break;
        case K_F32: vals[i].f32 = (float)v; break;
        }
        params[i] = r->kind == K_TENSORMAP ? (void *)maps[r->tmap] : (void *)&vals[i];
    }
#ifdef PT_HAVE_CUDA_HEADERS
    CUlaunchConfig cfg = {
        .gridDimX = sel->grid[0], .gridDimY = sel->grid[1], .gridDimZ = sel->grid[2],
        .blockDimX = sel->block[0], .blockDimY = sel->block[1], .blockDimZ = sel->block[2],
        .sharedMemBytes = (unsigned)sel->smem, .hStream = (CUstream)a->stream,
        .attrs = NULL, .numAttrs = 0,
    };
    CUlaunchAttribute attr;
    if (k->cluster[0] * k->cluster[1] * k->cluster[2] > 1) { /* the contract's cluster shape */
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = k->cluster[0];
        attr.value.clusterDim.y = k->cluster[1];
        attr.value.clusterDim.z = k->cluster[2];
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    bool pushed;
    CUresult r = ctx_enter(rt, &pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(rt, e, r, "cuCtxPushCurrent", k->problem);
    r = rt->api.cuLaunchKernelEx(&cfg, k->fn, params, NULL);
    ctx_leave(rt, pushed);
    return r == CUDA_SUCCESS ? PTXTUNE_OK : cu_fail(rt, e, r, "cuLaunchKernelEx", k->problem);
#else
    (void)params;
    return fail(e, PTXTUNE_ENODRIVER, "built without CUDA headers");
#endif
}
