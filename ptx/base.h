/* Shared foundations: one error type, arenas, growable text buffers.
 * Every library function returns an int status (PT_OK == 0) and leaves the
 * first message in a pt_err owned by the caller (SQLite/libuv style). */
#ifndef PT_BASE_H
#define PT_BASE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* Arena: bump allocator, one per emission, freed at once.
 *
 * Out of memory, the one policy: a function that returns a status returns
 * PT_ENOMEM when an allocation fails (every malloc is checked). Arena
 * allocations cannot return NULL to their callers (the builders have no
 * error return), so an arena that runs out (malloc fails, or its limit is
 * reached) jumps to the recovery point its owner set with pt_arena_catch,
 * and that owner returns PT_ENOMEM (pt_op_emit does so for every emission;
 * nothing outside the arena is allocated there, so nothing leaks); a text
 * buffer (pt_buf, below) fails for good and hands back NULL. Only
 * an arena without a recovery point aborts (and pt_arena_new, when its
 * few header bytes cannot be had). */
typedef struct pt_arena pt_arena;
pt_arena *pt_arena_new(void);
void pt_arena_free(pt_arena *a);
/* The recovery point of a's allocations: jb (set by the caller's setjmp,
 * in a frame that outlives every allocation until pt_arena_catch(a, NULL)),
 * or NULL to remove it. Returns the previous one, for nesting. */
jmp_buf *pt_arena_catch(pt_arena *a, jmp_buf *jb);
/* Caps the bytes a hands out in all (0: no cap): failure injection for
 * tests, and a bound for callers that want one. */
void pt_arena_limit(pt_arena *a, size_t bytes);
/* Bytes a has handed out (rounded up to 16 each). */
size_t pt_arena_size(const pt_arena *a);
void *pt_arena_alloc(pt_arena *a, size_t n); /* zeroed, 16-byte aligned */
void *pt_arena_alloc_raw(pt_arena *a, size_t n); /* the same, not zeroed: for copies */
char *pt_arena_strdup(pt_arena *a, const char *s);
char *pt_arena_strndup(pt_arena *a, const char *s, size_t n);
char *pt_arena_printf(pt_arena *a, const char *fmt, ...) PT_PRINTF(2, 3);
/* Growable array in an arena: doubles capacity, copies old contents. */
void *pt_arena_grow(pt_arena *a, void *old, size_t elem, size_t *cap, size_t need);

/* Growable heap text buffer. Out of memory it fails for good: its text is
 * freed, every later write is dropped, `failed` is set and pt_buf_take
 * returns NULL (so a caller checks once, at the end). */
typedef struct pt_buf {
    char *s;
    size_t len, cap;
    bool failed;
} pt_buf;
/* Room for extra more bytes (and the NUL); false when out of memory. */
bool pt_buf_room(pt_buf *b, size_t extra);
void pt_buf_init(pt_buf *b);
void pt_buf_free(pt_buf *b);
void pt_buf_putc(pt_buf *b, char c);
void pt_buf_puts(pt_buf *b, const char *s);
void pt_buf_putn(pt_buf *b, const char *s, size_t n);
void pt_buf_printf(pt_buf *b, const char *fmt, ...) PT_PRINTF(2, 3);
/* Returns the string and resets the buffer; the caller frees. NULL when
 * the buffer failed (out of memory). */
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

/* The per-user probe caches (one line "KEY\tVALUE\n" each): the path of
 * cache file `name` in $PTXTUNE_CACHE_DIR, else $XDG_CACHE_HOME/ptxtune,
 * else ~/.cache/ptxtune ("" when none is known), and writing a line there
 * (its folders made; a cache that cannot be written is only slower, so
 * nothing is reported). */
void pt_cache_path(const char *name, char *out, size_t n);
void pt_cache_write(const char *path, const char *key, int value);

/* 64-bit FNV-1a, for kernel identity hashes. */
uint64_t pt_hash64(const void *data, size_t n);

/* The x extent of a persistent grid on a device of sms SMs (sms < 1: 1):
 * min(x, per_sm x sms) rounded down to a whole number of clusters of
 * cluster CTAs (< 1: 1), at least one cluster; per_sm 0: x. The rule of
 * pt_launch.grid_per_sm (gen/op.h) and of a launch contract's "per_sm"
 * (tuner/contract.h), applied by the tuner's backends and the runtime. */
int64_t pt_grid_cap(int64_t x, int64_t per_sm, int sms, int64_t cluster);

/* v in decimal at d, no terminator; returns the end (no printf: the
 * printer and the builder's label names). */
static inline char *pt_u64s(char *d, uint64_t v)
{
    static const char digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                     "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                     "8081828384858687888990919293949596979899";
    if (v < 10) {
        *d++ = (char)('0' + v);
        return d;
    }
    if (v < 100) {
        memcpy(d, digits2 + 2 * v, 2);
        return d + 2;
    }
    if (v < 1000) {
        *d = (char)('0' + v / 100);
        memcpy(d + 1, digits2 + 2 * (v % 100), 2);
        return d + 3;
    }
    if (v < 10000) {
        memcpy(d, digits2 + 2 * (v / 100), 2);
        memcpy(d + 2, digits2 + 2 * (v % 100), 2);
        return d + 4;
    }
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *d++ = tmp[--n];
    return d;
}

#endif
