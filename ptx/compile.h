/* The compile gate: PTX text in, cubin and a resource report out.
 *
 * Two backends sit behind one context. nvJitLink is loaded with dlopen (never
 * linked) so the binary starts on machines without a toolkit; ptxas is run as
 * a child process when the library is missing, or when a caller asks for it.
 * Both print the same ptxas lines, which one PCRE2 table parses into a
 * pt_resource; a failed compile becomes PT_ECOMPILE naming the PTX line. */
#ifndef PT_COMPILE_H
#define PT_COMPILE_H

#include "ptx/base.h"
#include "ptx/target.h"

enum { PT_MAX_CODES = 16 };

/* What the compiler said about one compile. With several entry functions in
 * one PTX file each count is the largest over them. */
typedef struct pt_resource {
    int registers;    /* "Used N registers" */
    int spill_stores; /* bytes */
    int spill_loads;  /* bytes */
    int stack_frame;  /* bytes per thread (local arrays plus spills) */
    int shared_bytes; /* static .shared as ptxas reports it, before any reserved smem */
    int const_bytes;  /* cmem[0]; from the cubin where the log omits it (sm_90+), -1 unknown */
    int barriers;     /* named barriers used */
    double compile_ms;               /* wall time of the pt_compile call */
    int ncodes;                      /* distinct info/warning codes, in log order */
    char codes[PT_MAX_CODES][8];     /* "C7508" */
    int nwarnings;                   /* warning lines */
    char backend[16];                /* "nvJitLink" or "ptxas" */
} pt_resource;

typedef enum pt_backend {
    PT_BACKEND_AUTO,      /* nvJitLink when loaded, else ptxas */
    PT_BACKEND_NVJITLINK,
    PT_BACKEND_PTXAS,
} pt_backend;

/* Context: dlopen handle, resolved symbols, the ptxas path, versions and the
 * compiled regexes. pt_compile only reads it, so threads may share one
 * context once the backend is chosen. */
typedef struct pt_compiler pt_compiler;

/* Finds libnvJitLink.so.13 (PT_CUDA_ROOT/lib64, then the loader's search path)
 * and ptxas (PT_CUDA_ROOT/bin, then PATH). PT_ENOTOOLKIT naming both misses
 * when neither is found. */
int pt_compiler_open(pt_compiler **out, pt_err *e);
void pt_compiler_close(pt_compiler *c);
/* Picks the backend for later compiles; PT_ENOTOOLKIT when it is missing. */
int pt_compiler_set_backend(pt_compiler *c, pt_backend b, pt_err *e);
pt_backend pt_compiler_backend(const pt_compiler *c); /* the one in use, never AUTO */
/* Highest PTX .version the backend in use accepts (90 for CUDA 13.0). */
int pt_compiler_max_ptx(const pt_compiler *c);
/* The same cap without opening the gate, for commands that compile nothing
 * (emit): the first call opens the gate once (dlopen of nvJitLink, tens of
 * ms, and a `ptxas --version` child) and caches the answer, keyed by
 * nvJitLink's file (path, size, mtime, inode), in $PTXTUNE_CACHE_DIR
 * (default $XDG_CACHE_HOME/ptxtune or ~/.cache/ptxtune); later calls read
 * one line. 0 without nvJitLink (then open the compiler). */
int pt_compiler_probe_max_ptx(void);
/* "nvJitLink 13.0" or "ptxas 13.0". */
const char *pt_compiler_describe(const pt_compiler *c);

/* C75xx info/warning codes (C7508 setmaxnreg ignored, C7510/C7511/C7513
 * wgmma serialised, C7517/C7519 waits injected, ...) make pt_compile fail
 * with PT_ECOMPILE naming the code and its text ("ptxas performance code
 * C7511 (a compile failure): wgmma.mma_async instructions are serialized
 * ..."); res is still filled. allow = true lets them pass (the resource
 * report lists them), for tools that report rather than gate. */
void pt_compiler_allow_codes(pt_compiler *c, bool allow);

/* Compiles ptx for t. On success *cubin (malloc'd, the caller frees; may be
 * NULL to discard) and res (may be NULL) are filled. A PTX error gives
 * PT_ECOMPILE with "compile error at PTX line N: text | source line".
 * Arch-specific targets (sm_90a) are assembled by ptxas when it is there
 * and no backend was chosen with pt_compiler_set_backend. */
int pt_compile(const pt_compiler *c, const char *ptx, const pt_target *t, void **cubin,
               size_t *cubin_size, pt_resource *res, pt_err *e);

/* Appends the report as one JSON object, no trailing newline. */
int pt_resource_json(const pt_resource *r, pt_buf *out);

#endif
