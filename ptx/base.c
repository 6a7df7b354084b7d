#include "ptx/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const status_text[] = {
#define X(name, text) text,
    PT_ERRNO_MAP(X)
#undef X
};

const char *pt_strerror(int code)
{
    if (code < 0 || code >= PT_NSTATUS)
        return "unknown error";
    return status_text[code];
}

int pt_verrf(pt_err *e, int code, const char *fmt, va_list ap)
{
    if (e && e->code == PT_OK) {
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        for (char *p = e->msg; *p; p++) /* keep it one line */
            if (*p == '\n')
                *p = ' ';
    }
    return code;
}

int pt_errf(pt_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_verrf(e, code, fmt, ap);
    va_end(ap);
    return code;
}

void pt_err_clear(pt_err *e)
{
    e->code = PT_OK;
    e->msg[0] = '\0';
}

/* ---- arena ---- */

typedef struct pt_block {
    struct pt_block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} pt_block;

struct pt_arena {
    pt_block *head;
    size_t size, limit; /* bytes handed out; cap (0: none) */
    jmp_buf *oom;       /* recovery point, NULL: abort */
};

enum { ARENA_BLOCK = 1024 * 1024 };

pt_arena *pt_arena_new(void)
{
    pt_arena *a = calloc(1, sizeof *a);
    if (!a) /* the header only: blocks come at the first allocation */
        abort();
    return a;
}

jmp_buf *pt_arena_catch(pt_arena *a, jmp_buf *jb)
{
    jmp_buf *old = a->oom;
    a->oom = jb;
    return old;
}

void pt_arena_limit(pt_arena *a, size_t bytes) { a->limit = bytes; }

size_t pt_arena_size(const pt_arena *a) { return a->size; }

void pt_arena_free(pt_arena *a)
{
    if (!a)
        return;
    for (pt_block *b = a->head, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(a);
}

static void *arena_raw(pt_arena *a, size_t n);
_Noreturn static void arena_fail(pt_arena *a);

void *pt_arena_alloc(pt_arena *a, size_t n)
{
    void *p = arena_raw(a, n);
    memset(p, 0, n);
    return p;
}

void *pt_arena_alloc_raw(pt_arena *a, size_t n) { return arena_raw(a, n); }

_Noreturn static void arena_fail(pt_arena *a)
{
    if (a->oom)
        longjmp(*a->oom, 1);
    abort();
}

static void *arena_raw(pt_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->limit && a->size + n > a->limit)
        arena_fail(a);
    a->size += n;
    pt_block *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        pt_block *nb = malloc(sizeof *nb + size);
        if (!nb)
            arena_fail(a);
        nb->used = 0;
        nb->size = size;
        /* a big one-off block goes behind the head so the head keeps its room */
        if (b && size > ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

char *pt_arena_strndup(pt_arena *a, const char *s, size_t n)
{
    char *d = pt_arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *pt_arena_strdup(pt_arena *a, const char *s)
{
    return pt_arena_strndup(a, s, strlen(s));
}

char *pt_arena_printf(pt_arena *a, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof tmp)
        return pt_arena_strndup(a, tmp, (size_t)n);
    char *d = pt_arena_alloc(a, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return d;
}

void *pt_arena_grow(pt_arena *a, void *old, size_t elem, size_t *cap, size_t need)
{
    if (need <= *cap)
        return old;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *p = arena_raw(a, nc * elem); /* callers fill what they use */
    if (old)
        memcpy(p, old, *cap * elem);
    *cap = nc;
    return p;
}

/* ---- text buffer ---- */

void pt_buf_init(pt_buf *b)
{
    b->s = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

void pt_buf_free(pt_buf *b)
{
    free(b->s);
    pt_buf_init(b);
}

bool pt_buf_room(pt_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap : 256;
    if (extra > SIZE_MAX / 4 - b->len) /* no doubling reaches it */
        nc = 0;
    else
        while (nc < b->len + extra + 1)
            nc *= 2;
    char *s = nc ? realloc(b->s, nc) : NULL;
    if (!s) {
        free(b->s);
        pt_buf_init(b);
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = nc;
    return true;
}

void pt_buf_putn(pt_buf *b, const char *s, size_t n)
{
    if (!pt_buf_room(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void pt_buf_puts(pt_buf *b, const char *s) { pt_buf_putn(b, s, strlen(s)); }

void pt_buf_putc(pt_buf *b, char c) { pt_buf_putn(b, &c, 1); }

void pt_buf_printf(pt_buf *b, const char *fmt, ...)
{
    if (!pt_buf_room(b, 128))
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        if (!pt_buf_room(b, (size_t)n))
            return;
        va_start(ap, fmt);
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

char *pt_buf_take(pt_buf *b)
{
    char *s = b->s;
    if (!s && !b->failed) {
        s = malloc(1);
        if (s)
            s[0] = '\0';
    }
    pt_buf_init(b);
    return s;
}

int64_t pt_grid_cap(int64_t x, int64_t per_sm, int sms, int64_t cluster)
{
    if (per_sm <= 0)
        return x;
    int64_t c = cluster > 1 ? cluster : 1;
    int64_t cap = per_sm * (sms > 0 ? sms : 1) / c * c;
    if (cap < c)
        cap = c;
    return cap < x ? cap : x;
}

uint64_t pt_hash64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int pt_wfile_open(pt_wfile *w, const char *path, pt_err *e)
{
    memset(w, 0, sizeof *w);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return pt_errf(e, PT_EIO, "cannot write '%s': is a directory", path);
    size_t n = strlen(path);
    w->path = malloc(n + 1);
    w->tmp = malloc(n + 16);
    if (!w->path || !w->tmp) {
        pt_wfile_abort(w);
        return pt_errf(e, PT_ENOMEM, "out of memory writing '%s'", path);
    }
    memcpy(w->path, path, n + 1);
    snprintf(w->tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(w->tmp);
    if (fd < 0) {
        int err = errno;
        free(w->tmp);
        w->tmp = NULL;
        pt_wfile_abort(w);
        return pt_errf(e, PT_EIO, "cannot write '%s': %s", path, strerror(err));
    }
    /* mkstemp makes the file 0600; give it the usual umask-based mode */
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        int err = errno;
        close(fd);
        pt_wfile_abort(w);
        return pt_errf(e, PT_EIO, "cannot write '%s': %s", path, strerror(err));
    }
    return PT_OK;
}

int pt_wfile_commit(pt_wfile *w, pt_err *e)
{
    FILE *f = w->f;
    int err = 0;
    if (!f || !w->tmp)
        err = EBADF;
    else {
        if (fflush(f) != 0 || ferror(f))
            err = errno ? errno : EIO;
        if (!err && fsync(fileno(f)) != 0)
            err = errno;
        if (fclose(f) != 0 && !err)
            err = errno ? errno : EIO;
        w->f = NULL;
        if (!err && rename(w->tmp, w->path) != 0)
            err = errno;
    }
    if (err) {
        int rc = pt_errf(e, PT_EIO, "cannot write '%s': %s", w->path ? w->path : "?",
                         strerror(err));
        pt_wfile_abort(w);
        return rc;
    }
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
    return PT_OK;
}

void pt_wfile_abort(pt_wfile *w)
{
    if (w->f)
        fclose(w->f);
    if (w->tmp)
        unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
}

bool pt_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void pt_cache_path(const char *name, char *out, size_t n)
{
    const char *d = getenv("PTXTUNE_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (d && *d)
        snprintf(out, n, "%s/%s", d, name);
    else if (x && *x)
        snprintf(out, n, "%s/ptxtune/%s", x, name);
    else if (h && *h)
        snprintf(out, n, "%s/.cache/ptxtune/%s", h, name);
    else if (n)
        out[0] = '\0';
}

void pt_cache_write(const char *path, const char *key, int value)
{
    char dir[4096];
    if (!path[0] || strlen(path) >= sizeof dir)
        return;
    memcpy(dir, path, strlen(path) + 1);
    for (char *p = dir + 1; *p; p++) /* mkdir -p of the cache's folder */
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    pt_wfile w;
    pt_err e = {0};
    if (pt_wfile_open(&w, path, &e) == PT_OK) {
        fprintf(w.f, "%s\t%d\n", key, value);
        pt_wfile_commit(&w, &e);
    }
}
