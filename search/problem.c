/* The problem text format (search/problem.h). */
#include "search/problem.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum fkind { F_STR, F_INT, F_DTYPE, F_LAYOUT, F_BOOL, F_REAL } fkind;

/* The keys of each op: (op, key, kind, field offset, part of the shape).
 * Order here is the order of the canonical key. */
typedef struct field {
    const char *op, *key;
    fkind kind;
    size_t off;
    bool shape;
} field;

#define F(op, key, kind, member, shape) {op, key, kind, offsetof(pt_problem, member), shape}
static const field fields[] = {
    F("elementwise", "expr", F_STR, expr, false),
    F("elementwise", "shape", F_STR, shapes, true),
    F("elementwise", "dtype", F_DTYPE, dtype, false),
    F("elementwise", "out_dtype", F_DTYPE, out_dtype, false),
    F("elementwise", "out_scale", F_REAL, out_scale, false),
    F("gemm", "m", F_INT, m, true),
    F("gemm", "n", F_INT, n, true),
    F("gemm", "k", F_INT, k, true),
    F("gemm", "batch", F_INT, batch, true),
    F("gemm", "layout", F_LAYOUT, layout, false),
    F("gemm", "dtype", F_DTYPE, dtype, false),
    F("gemm", "out_dtype", F_DTYPE, out_dtype, false),
    F("gemm", "epilogue", F_STR, epilogue, false),
    F("gemm", "alpha", F_REAL, alpha, false),
    F("gemm", "beta", F_REAL, beta, false),
    F("gemm", "d_colmajor", F_BOOL, d_colmajor, false),
    F("gemm", "lda", F_INT, lda, false),
    F("gemm", "ldb", F_INT, ldb, false),
    F("gemm", "ldc", F_INT, ldc, false),
    F("gemm", "ldd", F_INT, ldd, false),
    F("gemm", "scale_a", F_REAL, scale_a, false),
    F("gemm", "scale_b", F_REAL, scale_b, false),
    F("gemm", "out_scale", F_REAL, out_scale, false),
};
#undef F

static void *at(pt_problem *p, const field *f) { return (char *)p + f->off; }
static const void *cat(const pt_problem *p, const field *f) { return (const char *)p + f->off; }

static void defaults(pt_problem *p, const char *op)
{
    memset(p, 0, sizeof *p);
    p->op = op;
    p->dtype = PT_F32;
    if (strcmp(op, "gemm") == 0) {
        p->out_dtype = PT_F64; /* the op's default output for the dtype */
        p->layout = "nn";
        p->alpha = 1.0;
    } else
        p->out_dtype = PT_NDTYPES; /* = dtype, set after parsing */
}

static bool is_default(const pt_problem *p, const field *f)
{
    const void *v = cat(p, f);
    switch (f->kind) {
    case F_STR:
        return !*(const char *const *)v || !**(const char *const *)v;
    case F_INT:
        return *(const int64_t *)v == 0 || (strcmp(f->key, "batch") == 0 && *(const int64_t *)v == 1);
    case F_DTYPE:
        if (strcmp(f->key, "dtype") == 0)
            return false;
        return *(const pt_dtype *)v == p->dtype || *(const pt_dtype *)v == PT_F64;
    case F_LAYOUT:
        return !*(const char *const *)v || strcmp(*(const char *const *)v, "nn") == 0;
    case F_BOOL:
        return !*(const bool *)v;
    case F_REAL:
        if (strcmp(f->key, "scale_a") == 0 || strcmp(f->key, "scale_b") == 0) /* 1 = not given */
            return *(const double *)v == 1.0 ||
                   (*(const double *)v == 0.0 && !(f->key[6] == 'a' ? p->has_scale_a : p->has_scale_b));
        if (strcmp(f->key, "out_scale") == 0)
            return *(const double *)v == 1.0 || (*(const double *)v == 0.0 && !p->has_out_scale);
        return strcmp(f->key, "alpha") == 0 ? *(const double *)v == 1.0 : *(const double *)v == 0.0;
    }
    return true;
}

/* A value as the canonical form writes it: bare when it can be, else
 * double-quoted with \" and \\. */
static void put_value(pt_buf *b, const char *s)
{
    bool bare = *s != '\0';
    for (const char *c = s; *c && bare; c++)
        bare = !isspace((unsigned char)*c) && *c != '"' && *c != '\'' && *c != '#' && *c != '\\';
    if (bare) {
        pt_buf_puts(b, s);
        return;
    }
    pt_buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            pt_buf_putc(b, '\\');
        pt_buf_putc(b, *s);
    }
    pt_buf_putc(b, '"');
}

static void put_field(pt_buf *b, const pt_problem *p, const field *f)
{
    const void *v = cat(p, f);
    pt_buf_printf(b, " %s=", f->key);
    switch (f->kind) {
    case F_STR:
    case F_LAYOUT:
        put_value(b, *(const char *const *)v);
        break;
    case F_INT:
        pt_buf_printf(b, "%lld", (long long)*(const int64_t *)v);
        break;
    case F_DTYPE:
        pt_buf_puts(b, pt_dtype_get(*(const pt_dtype *)v)->name);
        break;
    case F_BOOL:
        pt_buf_puts(b, *(const bool *)v ? "1" : "0");
        break;
    case F_REAL:
        pt_buf_printf(b, "%.17g", *(const double *)v);
        break;
    }
}

/* "x=4096x8192,w=8192" -> pattern "x=#x#,w=#" and dims "4096,8192,8192". */
static void shape_split(const char *shape, pt_buf *pat, pt_buf *dims)
{
    const char *s = shape;
    bool in_dims = false;
    while (*s) {
        if (*s == '=') {
            in_dims = true;
            pt_buf_putc(pat, *s++);
        } else if (*s == ',') {
            in_dims = false;
            pt_buf_putc(pat, *s++);
        } else if (in_dims && isdigit((unsigned char)*s)) {
            const char *e = s;
            while (isdigit((unsigned char)*e))
                e++;
            pt_buf_putc(pat, '#');
            if (dims->len)
                pt_buf_putc(dims, ',');
            pt_buf_putn(dims, s, (size_t)(e - s));
            s = e;
        } else
            pt_buf_putc(pat, *s++);
    }
}

void search_problem_canon(pt_arena *a, search_problem *sp)
{
    const pt_problem *p = &sp->prob;
    pt_buf key, klass, dims;
    pt_buf_init(&key);
    pt_buf_init(&klass);
    pt_buf_init(&dims);
    pt_buf_puts(&key, p->op);
    pt_buf_puts(&klass, p->op);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const field *f = &fields[i];
        if (strcmp(f->op, p->op) != 0 || is_default(p, f))
            continue;
        put_field(&key, p, f);
        if (!f->shape)
            put_field(&klass, p, f);
        else if (f->kind == F_STR) {
            pt_buf pat;
            pt_buf_init(&pat);
            shape_split(*(const char *const *)cat(p, f), &pat, &dims);
            pt_buf_printf(&klass, " %s=", f->key);
            put_value(&klass, pat.s ? pat.s : "");
            pt_buf_free(&pat);
        }
    }
    if (strcmp(p->op, "gemm") == 0)
        pt_buf_printf(&dims, "%lld,%lld,%lld,%lld", (long long)p->m, (long long)p->n,
                      (long long)p->k, (long long)(p->batch > 1 ? p->batch : 1));
    sp->key = pt_arena_strdup(a, key.s);
    sp->klass = pt_arena_strdup(a, klass.s);
    sp->dims = pt_arena_strdup(a, dims.s ? dims.s : "");
    if (!sp->name)
        sp->name = "";
    pt_buf_free(&key);
    pt_buf_free(&klass);
    pt_buf_free(&dims);
}

/* ---- parsing ------------------------------------------------------------- */

/* partial: the command line's items, where a missing or zero dimension is
 * left to the op's prepare to name. */
static int set_field(pt_arena *a, pt_problem *p, const field *f, const char *v, bool partial,
                     pt_err *e)
{
    void *dst = at(p, f);
    char *end;
    switch (f->kind) {
    case F_STR:
        *(const char **)dst = pt_arena_strdup(a, v);
        return PT_OK;
    case F_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        bool dim0 = partial && x == 0 && f->shape && strcmp(f->key, "batch") != 0;
        if (*end || end == v || errno || (x <= 0 && !dim0))
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (a positive integer)", v, f->key);
        *(int64_t *)dst = x;
        return PT_OK;
    }
    case F_DTYPE:
        return pt_dtype_parse(v, (pt_dtype *)dst, e);
    case F_LAYOUT:
        if (strlen(v) != 2 || !strchr("nt", v[0]) || !strchr("nt", v[1]))
            return pt_errf(e, PT_EINVAL, "bad layout '%s' (nn, nt, tn, tt)", v);
        *(const char **)dst = pt_arena_strdup(a, v);
        return PT_OK;
    case F_BOOL:
        if (strcmp(v, "0") && strcmp(v, "1"))
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (0 or 1)", v, f->key);
        *(bool *)dst = v[0] == '1';
        return PT_OK;
    case F_REAL: {
        errno = 0;
        double x = strtod(v, &end);
        bool scale = strcmp(f->key, "scale_a") == 0 || strcmp(f->key, "scale_b") == 0;
        bool junk = *end || end == v;
        if (!junk && (errno || !isfinite(x) || (scale && x < 0))) /* 1e400, nan, inf */
            return pt_errf(e, PT_EINVAL, "%s=%s: must be a finite number%s", f->key, v,
                           scale ? " >= 0" : "");
        if (junk)
            return pt_errf(e, PT_EINVAL, "bad value '%s' for %s (a number)", v, f->key);
        *(double *)dst = x;
        if (strcmp(f->key, "scale_a") == 0) /* given, so 0 means 0 */
            p->has_scale_a = true;
        else if (strcmp(f->key, "scale_b") == 0)
            p->has_scale_b = true;
        else if (strcmp(f->key, "out_scale") == 0)
            p->has_out_scale = true;
        return PT_OK;
    }
    }
    return PT_OK;
}

static void keys_of(const char *op, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && len < n; i++)
        if (strcmp(fields[i].op, op) == 0)
            len += (size_t)snprintf(buf + len, n - len, "%s ", fields[i].key);
    if (len < n)
        snprintf(buf + len, n - len, "name");
}

static bool op_known_here(const char *op)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(fields[i].op, op) == 0)
            return true;
    return false;
}

static int parse_items(pt_arena *a, const char *op, const char *items, bool partial,
                       search_problem *out, pt_err *e)
{
    memset(out, 0, sizeof *out);
    if (!pt_op_find(op)) {
        const pt_op *const *ops;
        int nops = pt_op_list(&ops);
        char names[256] = "";
        size_t len = 0;
        for (int i = 0; i < nops && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                    ops[i]->name);
        return pt_errf(e, PT_EINVAL, "unknown op '%s' (registered: %s)", op, names);
    }
    if (!op_known_here(op))
        return pt_errf(e, PT_EUNSUPPORTED, "op '%s' has no problem-file keys yet", op);
    defaults(&out->prob, pt_op_find(op)->name);
    uint32_t set = 0;
    const char *s = items;
    pt_buf val;
    pt_buf_init(&val);
    int rc = PT_OK;
    while (!rc) {
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (!*s || *s == '#' || *s == '\n')
            break;
        const char *k0 = s;
        while (isalnum((unsigned char)*s) || *s == '_')
            s++;
        if (s == k0 || *s != '=') {
            rc = pt_errf(e, PT_EPARSE, "expected key=value at column %d", (int)(k0 - items) + 1);
            break;
        }
        size_t klen = (size_t)(s - k0);
        s++;
        val.len = 0;
        pt_buf_putc(&val, '\0');
        val.len = 0;
        if (*s == '"' || *s == '\'') {
            char q = *s++;
            while (*s && *s != q && *s != '\n') {
                if (q == '"' && *s == '\\' && (s[1] == '"' || s[1] == '\\'))
                    s++;
                pt_buf_putc(&val, *s++);
            }
            if (*s != q) {
                rc = pt_errf(e, PT_EPARSE, "unterminated %s quote in the value of '%.*s'",
                             q == '"' ? "double" : "single", (int)klen, k0);
                break;
            }
            s++;
        } else {
            while (*s && !isspace((unsigned char)*s) && *s != '#')
                pt_buf_putc(&val, *s++);
        }
        if (*s && !isspace((unsigned char)*s) && *s != '#') {
            rc = pt_errf(e, PT_EPARSE, "expected a blank after the value of '%.*s'", (int)klen, k0);
            break;
        }
        const char *v = val.s ? val.s : "";
        if (klen == 4 && strncmp(k0, "name", 4) == 0) {
            if (set & 1u << 31) {
                rc = pt_errf(e, PT_EINVAL, "duplicate key 'name'");
                break;
            }
            set |= 1u << 31;
            out->name = pt_arena_strdup(a, v);
            continue;
        }
        const field *f = NULL;
        size_t fi = 0;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (strcmp(fields[i].op, op) == 0 && strlen(fields[i].key) == klen &&
                strncmp(fields[i].key, k0, klen) == 0) {
                f = &fields[i];
                fi = i;
            }
        if (!f) {
            char keys[256];
            keys_of(op, keys, sizeof keys);
            rc = pt_errf(e, PT_EINVAL, "unknown key '%.*s' for %s (keys: %s)", (int)klen, k0, op,
                         keys);
            break;
        }
        if (set & 1u << fi) {
            rc = pt_errf(e, PT_EINVAL, "duplicate key '%s'", f->key);
            break;
        }
        set |= 1u << fi;
        rc = set_field(a, &out->prob, f, v, partial, e);
    }
    pt_buf_free(&val);
    if (rc)
        return rc;
    pt_problem *p = &out->prob;
    if (partial) {
        if (p->out_dtype == PT_NDTYPES)
            p->out_dtype = p->dtype;
    } else if (strcmp(op, "elementwise") == 0) {
        if (!p->expr || !*p->expr)
            return pt_errf(e, PT_EINVAL, "missing expr=\"...\"");
        if (!p->shapes || !*p->shapes)
            return pt_errf(e, PT_EINVAL, "missing shape=...");
        if (p->out_dtype == PT_NDTYPES)
            p->out_dtype = p->dtype;
    } else if (strcmp(op, "gemm") == 0) {
        if (!p->m || !p->n || !p->k)
            return pt_errf(e, PT_EINVAL, "missing %s (gemm needs m, n and k)",
                           !p->m ? "m" : !p->n ? "n" : "k");
    }
    search_problem_canon(a, out);
    return PT_OK;
}

int search_problem_parse(pt_arena *a, const char *op, const char *items, search_problem *out,
                         pt_err *e)
{
    return parse_items(a, op, items, false, out, e);
}

int search_problem_parse_partial(pt_arena *a, const char *op, const char *items,
                                 search_problem *out, pt_err *e)
{
    return parse_items(a, op, items, true, out, e);
}

/* ---- reading a file one line at a time ----------------------------------- */

enum { MAX_LINE = 1 << 20 };

struct search_problem_reader {
    FILE *f;
    bool own;          /* f is ours to close */
    char *name;        /* for messages */
    int lineno, count;
    pt_buf line;
    pt_arena *arena;   /* the current problem's; replaced every ARENA_USES nexts */
    int uses;
};

/* An arena's first block is 1 MB: a fresh one per line would make reading
 * a long file mostly mmap and page faults, so problems share one for a
 * while (a few hundred bytes each). */
enum { ARENA_USES = 256 };

int search_problem_reader_open(const char *path, search_problem_reader **out, pt_err *e)
{
    *out = NULL;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return pt_errf(e, PT_EIO, "cannot open '%s': %s", path, strerror(errno));
    /* fopen succeeds on a directory; the first read would say EISDIR */
    int c = getc(f);
    if (c == EOF && ferror(f)) {
        int err = errno;
        if (f != stdin)
            fclose(f);
        return pt_errf(e, PT_EIO, "cannot read '%s': %s", path,
                       err == EISDIR ? "is a directory" : strerror(err));
    }
    if (c != EOF)
        ungetc(c, f);
    search_problem_reader *r = calloc(1, sizeof *r);
    if (!r) {
        if (f != stdin)
            fclose(f);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    r->f = f;
    r->own = f != stdin;
    r->name = strdup(path);
    pt_buf_init(&r->line);
    *out = r;
    return PT_OK;
}

int search_problem_reader_mem(const char *buf, size_t len, const char *name,
                              search_problem_reader **out, pt_err *e)
{
    *out = NULL;
    /* fmemopen refuses an empty buffer: read /dev/null's nothing instead */
    FILE *f = len ? fmemopen((void *)(uintptr_t)buf, len, "rb") : fopen("/dev/null", "rb");
    if (!f)
        return pt_errf(e, PT_ENOMEM, "%s: cannot open the text: %s", name, strerror(errno));
    search_problem_reader *r = calloc(1, sizeof *r);
    if (!r) {
        fclose(f);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    r->f = f;
    r->own = true;
    r->name = strdup(name);
    pt_buf_init(&r->line);
    *out = r;
    return PT_OK;
}

void search_problem_reader_close(search_problem_reader *r)
{
    if (!r)
        return;
    if (r->own)
        fclose(r->f);
    pt_buf_free(&r->line);
    pt_arena_free(r->arena);
    free(r->name);
    free(r);
}

/* The next line into r->line (without its '\n'); *eof at the end. */
static int read_line(search_problem_reader *r, bool *eof, pt_err *e)
{
    *eof = false;
    r->line.len = 0;
    pt_buf_putc(&r->line, '\0');
    r->line.len = 0;
    int c;
    bool any = false;
    while ((c = getc(r->f)) != EOF) {
        any = true;
        if (c == '\n')
            break;
        if (c == '\0')
            return pt_errf(e, PT_EPARSE, "%s:%d: NUL byte at column %zu (not a text file)",
                           r->name, r->lineno + 1, r->line.len + 1);
        if (r->line.len >= MAX_LINE)
            return pt_errf(e, PT_EINVAL, "%s:%d: line longer than %d bytes", r->name,
                           r->lineno + 1, MAX_LINE);
        pt_buf_putc(&r->line, (char)c);
    }
    if (ferror(r->f))
        return pt_errf(e, PT_EIO, "cannot read '%s': %s", r->name,
                       errno == EISDIR ? "is a directory" : strerror(errno));
    *eof = !any;
    if (any)
        r->lineno++;
    return PT_OK;
}

/* One line's problem into out (strings in arena a); *got false for a blank
 * or comment line. */
static int parse_line(pt_arena *a, const char *name, int lineno, const char *l,
                      search_problem *out, bool *got, pt_err *e)
{
    *got = false;
    const char *s = l;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s || *s == '#')
        return PT_OK;
    const char *o0 = s;
    while (isalnum((unsigned char)*s) || *s == '_')
        s++;
    if (s == o0 || (*s && !isspace((unsigned char)*s)))
        return pt_errf(e, PT_EPARSE, "%s:%d: expected an op name first (e.g. gemm m=...)", name,
                       lineno);
    char *op = pt_arena_strndup(a, o0, (size_t)(s - o0));
    pt_err le = {0};
    if (search_problem_parse(a, op, s, out, &le))
        return pt_errf(e, le.code, "%s:%d: %s", name, lineno, le.msg);
    out->line = lineno;
    *got = true;
    return PT_OK;
}

/* Next problem, parsed into arena a (NULL: the reader's own, replaced on
 * every call). */
static int next_into(search_problem_reader *r, pt_arena *a, search_problem *out, bool *got,
                     pt_err *e)
{
    *got = false;
    if (!a) {
        if (!r->arena || ++r->uses >= ARENA_USES) {
            pt_arena_free(r->arena);
            r->arena = pt_arena_new();
            r->uses = 0;
        }
        a = r->arena;
    }
    for (;;) {
        bool eof;
        int rc = read_line(r, &eof, e);
        if (rc)
            return rc;
        if (eof)
            break;
        rc = parse_line(a, r->name, r->lineno, r->line.s, out, got, e);
        if (rc)
            return rc;
        if (*got) {
            r->count++;
            return PT_OK;
        }
    }
    if (r->count == 0)
        return pt_errf(e, PT_EINVAL, "%s: no problems (one per line: OP key=value ...)", r->name);
    return PT_OK;
}

int search_problem_next(search_problem_reader *r, search_problem *out, bool *got, pt_err *e)
{
    return next_into(r, NULL, out, got, e);
}

int search_problems_parse(const char *text, const char *filename, search_problem_set *out,
                          pt_err *e)
{
    memset(out, 0, sizeof *out);
    search_problem_reader *r;
    int rc = search_problem_reader_mem(text, strlen(text), filename, &r, e);
    if (rc)
        return rc;
    out->arena = pt_arena_new();
    size_t cap = 0;
    for (;;) {
        search_problem p;
        bool got;
        rc = next_into(r, out->arena, &p, &got, e);
        if (rc || !got)
            break;
        out->v = pt_arena_grow(out->arena, out->v, sizeof *out->v, &cap, (size_t)out->n + 1);
        out->v[out->n++] = p;
    }
    search_problem_reader_close(r);
    if (rc)
        search_problems_free(out);
    return rc;
}

void search_problems_free(search_problem_set *s)
{
    if (!s)
        return;
    pt_arena_free(s->arena);
    memset(s, 0, sizeof *s);
}
