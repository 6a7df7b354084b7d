/* The engine runtime: open a table exported by `ptxtune export` (a bundle,
 * --format bundle, or a JSON table, --format json), select a tuned kernel for
 * a problem given at run time, load it once and launch it on the caller's
 * stream with the caller's device pointers. No compiler and no generator:
 * cubins are loaded as they are (the PTX through the driver's JIT only when
 * the caller allows it, PTXTUNE_ALLOW_PTX_JIT, and the cubin's architecture
 * does not match the device); libcuda.so.1 is loaded at run time (dlopen).
 *
 * Contexts: every call that touches the device uses the context current on
 * the calling thread (the primary context torch makes current, or the
 * caller's own); when none is current, ptxtune_open retains the primary
 * context of options.device and makes it current. Modules belong to the
 * context that was current when they were loaded.
 *
 * Threads: a ptxtune_runtime may be shared; selection reads immutable data
 * and takes no lock; the first load of a kernel takes the runtime's lock.
 *
 * Problems: a class (the problem key without its sizes, as the store writes
 * it: `gemm dtype=bf16 layout=nt`, `elementwise expr="y = softmax(x, -1)"
 * shape=x=#x# dtype=f32`; ptxtune_entry_info lists them) and its sizes in
 * the store's order (gemm: m n k batch; elementwise: every size of the shape
 * list). Selection (docs/runtime.md):
 *   1. exact: the entry tuned at these sizes;
 *   2. bucket: each size rounded up to the next power of two (or, with
 *      PTXTUNE_BUCKET_TUNED, to the next tuned size); the entry tuned there,
 *      else the smallest tuned entry above the request;
 *   3. default: no entry at or above the request: the entry tuned at the
 *      largest sizes, flagged PTXTUNE_MATCH_DEFAULT so engines can log it.
 * An entry serves a request only where its launch contract says it is valid
 * (every size within the range the kernel takes at run time); with
 * PTXTUNE_ALLOW_PAD a size the kernel has baked in may be smaller than the
 * tuned one: the selection then says padded, and the caller allocates and
 * zero-pads its buffers to the selection's dims (right for the GEMM's m, n
 * and k; never for a row that is reduced, such as softmax's columns). */
#ifndef PTXTUNE_RUNTIME_H
#define PTXTUNE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: every function returns one (PTXTUNE_OK is 0). */
enum ptxtune_status {
    PTXTUNE_OK = 0,
    PTXTUNE_EINVAL = 1,    /* bad argument, or a table that is not ours or damaged */
    PTXTUNE_ENOTFOUND = 2, /* no entry for this device, class or size */
    PTXTUNE_ENODRIVER = 3, /* no libcuda.so.1, or one too old */
    PTXTUNE_EDRIVER = 4,   /* a CUDA call failed (its name and CUresult in the message) */
    PTXTUNE_EIO = 5,       /* the file cannot be read */
    PTXTUNE_ENOMEM = 6
};

/* The error of a failed call: its code and one line. */
typedef struct ptxtune_error {
    int code;
    char msg[512];
} ptxtune_error;

/* ptxtune_options.flags */
enum {
    PTXTUNE_LOAD_EAGER = 1u << 0,    /* load every kernel at open (default: at first launch) */
    PTXTUNE_ALLOW_PTX_JIT = 1u << 1, /* a cubin for another arch (or none): JIT its PTX */
    PTXTUNE_BUCKET_TUNED = 1u << 2,  /* buckets are the tuned sizes, not powers of two */
    PTXTUNE_ALLOW_PAD = 1u << 3      /* baked-in sizes may serve smaller requests (padded) */
};

typedef struct ptxtune_options {
    unsigned flags;
    /* NULL: serve the entries tuned on this device (same GPU name, compute
     * capability and SM count; a fingerprint with the same driver first).
     * Else a fingerprint key, or a prefix naming exactly one, served as is. */
    const char *fingerprint;
    int device; /* the device when no context is current (primary context) */
} ptxtune_options;

typedef struct ptxtune_runtime ptxtune_runtime;
typedef struct ptxtune_entry ptxtune_entry; /* one tuned kernel of the table */

/* Opens a bundle or a JSON table for the current device. o may be NULL. */
int ptxtune_open(const char *path, const ptxtune_options *o, ptxtune_runtime **out,
                 ptxtune_error *e);
/* Unloads every module (in the context current now) and frees rt. */
void ptxtune_close(ptxtune_runtime *rt);

/* The fingerprint key served, and the entries of it. */
const char *ptxtune_fingerprint(const ptxtune_runtime *rt);
int ptxtune_entry_count(const ptxtune_runtime *rt);
const ptxtune_entry *ptxtune_entry_get(const ptxtune_runtime *rt, int i);

enum { PTXTUNE_MAX_DIMS = 16 };

typedef struct ptxtune_entry_info {
    const char *op, *klass, *problem, *config, *entry, *arch;
    int ndims;
    int64_t tuned[PTXTUNE_MAX_DIMS]; /* the sizes it was tuned at */
    int64_t min[PTXTUNE_MAX_DIMS];   /* the range each size may take at run time */
    int64_t max[PTXTUNE_MAX_DIMS];
    int nargs;
    double time_s; /* its tuned median (a model estimate when not measured) */
    int loaded;    /* 1 once its module is loaded */
} ptxtune_entry_info;
int ptxtune_entry_info_get(const ptxtune_entry *k, ptxtune_entry_info *info);

typedef enum ptxtune_match {
    PTXTUNE_MATCH_EXACT = 0,
    PTXTUNE_MATCH_BUCKET = 1,
    PTXTUNE_MATCH_DEFAULT = 2
} ptxtune_match;

/* A selected kernel for one request. */
typedef struct ptxtune_selection {
    const ptxtune_entry *entry;
    ptxtune_match match;
    int ndims;
    int64_t dims[PTXTUNE_MAX_DIMS]; /* the sizes it runs at: the request's, or the
                                     * tuned ones where padded */
    int padded;                     /* 1 when dims differ from the request */
    unsigned grid[3], block[3];     /* the launch at dims */
    size_t smem;                    /* dynamic shared memory bytes */
    size_t workspace_bytes;         /* 0: none; else zero-filled once by the caller */
    size_t workspace_align;
    size_t align;                   /* every tensor pointer's alignment */
} ptxtune_selection;

/* Selects for class klass at the sizes dims[0..ndims). */
int ptxtune_select(const ptxtune_runtime *rt, const char *klass, const int64_t *dims, int ndims,
                   ptxtune_selection *sel, ptxtune_error *e);

/* The kernel's arguments in order. kind: "input" "output" "workspace"
 * "u32" "u64" "f32". Tensors: dtype and element count at the selection's
 * dims; scalars are filled by the runtime (sizes from dims, others with
 * their tuned value unless overridden by name at launch). */
typedef struct ptxtune_arg_info {
    const char *name, *kind, *dtype;
    int64_t elements;
    int tensor; /* position among the tensor pointers ptxtune_launch takes; -1 */
} ptxtune_arg_info;
int ptxtune_arg_count(const ptxtune_selection *sel);
int ptxtune_arg_get(const ptxtune_selection *sel, int i, ptxtune_arg_info *a);

/* Loads the selected kernel now (else the first launch does). */
int ptxtune_load(ptxtune_runtime *rt, const ptxtune_entry *k, ptxtune_error *e);

typedef struct ptxtune_scalar {
    const char *name;
    double value;
} ptxtune_scalar;

typedef struct ptxtune_launch_args {
    const uint64_t *tensors; /* CUdeviceptr of every input/output, in argument order */
    int ntensors;
    uint64_t workspace;      /* workspace_bytes zero-filled bytes; 0 when none */
    void *stream;            /* a CUstream; NULL: the default stream */
    const ptxtune_scalar *scalars; /* overrides by name (alpha, beta); may be NULL */
    int nscalars;
} ptxtune_launch_args;

/* Launches the selection (asynchronous, on a->stream). */
int ptxtune_launch(ptxtune_runtime *rt, const ptxtune_selection *sel,
                   const ptxtune_launch_args *a, ptxtune_error *e);

#ifdef __cplusplus
}
#endif

#endif
