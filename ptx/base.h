/* Shared foundations: one error type, arenas, growable text buffers.
 * Every library function returns an int status (PT_OK == 0) and leaves the
 * first message in a pt_err owned by the caller (SQLite/libuv style). */
#ifndef PT_BASE_H
#define PT_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Error codes: one X-macro backs the enum and pt_strerror(). */
#define PT_ERRNO_MAP(X)                                             \
    X(OK, "ok")                                                     \
    X(EINVAL, "invalid argument")                                   \
    X(ENOMEM, "out of memory")                                      \
    X(EUNSUPPORTED, "unsupported on this target")                   \
    X(EPARSE, "parse error")                                        \
    X(ECOMPILE, "compile error")                                    \
    X(ENOTOOLKIT, "CUDA toolkit component missing")                 \
    X(ENODRIVER, "CUDA driver missing")                             \
    X(EIO, "i/o error")                                             \
    X(ERANGE, "value out of range")                                 \
    X(EEMU, "emulator detected a fault")                            \
    X(EINTERNAL, "internal error")

typedef enum pt_status {
#define X(name, text) PT_##name,
    PT_ERRNO_MAP(X)
#undef X
    PT_NSTATUS
} pt_status;

typedef struct pt_err {
    int code;       /* first error code, PT_OK when none */
    char msg[1024]; /* first error message, one line */
} pt_err;

const char *pt_strerror(int code);
/* Records code and message unless an error is already recorded; returns code. */
int pt_errf(pt_err *e, int code, const char *fmt, ...) PT_PRINTF(3, 4);
int pt_verrf(pt_err *e, int code, const char *fmt, va_list ap);
void pt_err_clear(pt_err *e);

/* Arena: bump allocator, one per emission, freed at once. Allocation failure
 * aborts (an invariant, not bad input): emission sizes are bounded. */
typedef struct pt_arena pt_arena;
pt_arena *pt_arena_new(void);
void pt_arena_free(pt_arena *a);
void *pt_arena_alloc(pt_arena *a, size_t n); /* zeroed, 16-byte aligned */
char *pt_arena_strdup(pt_arena *a, const char *s);
char *pt_arena_strndup(pt_arena *a, const char *s, size_t n);
char *pt_arena_printf(pt_arena *a, const char *fmt, ...) PT_PRINTF(2, 3);
/* Growable array in an arena: doubles capacity, copies old contents. */
void *pt_arena_grow(pt_arena *a, void *old, size_t elem, size_t *cap, size_t need);

/* Growable heap text buffer. */
typedef struct pt_buf {
    char *s;
    size_t len, cap;
} pt_buf;
void pt_buf_init(pt_buf *b);
void pt_buf_free(pt_buf *b);
void pt_buf_putc(pt_buf *b, char c);
void pt_buf_puts(pt_buf *b, const char *s);
void pt_buf_putn(pt_buf *b, const char *s, size_t n);
void pt_buf_printf(pt_buf *b, const char *fmt, ...) PT_PRINTF(2, 3);
/* Returns the string and resets the buffer; the caller frees. */
char *pt_buf_take(pt_buf *b);

/* Files written whole or not at all: the data goes to a temporary file in
 * the target's directory, which pt_wfile_commit flushes, syncs and renames
 * over the target; on any failure (full disk, bad directory) the old file is
 * untouched and the message names the path and the cause. Every file the
 * library writes goes through this. */
typedef struct pt_wfile {
    void *f;       /* FILE *, open for writing while the file is pending */
    char *path;    /* target (heap) */
    char *tmp;     /* temporary name (heap) */
} pt_wfile;
int pt_wfile_open(pt_wfile *w, const char *path, pt_err *e);
int pt_wfile_commit(pt_wfile *w, pt_err *e); /* closes; renames on success */
void pt_wfile_abort(pt_wfile *w);            /* closes and removes the temporary */
/* True when both paths name one existing file (same device and inode), so
 * an output that is also an input can be refused. */
bool pt_same_file(const char *a, const char *b);

/* 64-bit FNV-1a, for kernel identity hashes. */
uint64_t pt_hash64(const void *data, size_t n);

#endif
