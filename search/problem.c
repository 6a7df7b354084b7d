/* The problem text format (search/problem.h). */
#include "search/problem.h"

#include "gen/expr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Keys, types, defaults and their order come from the op's schema
 * (pt_op.schema, gen/op.h); this file only reads and writes the text. */

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

static void put_field(pt_buf *b, const pt_problem *p, const pt_key *k)
{
    pt_buf_printf(b, " %s=", k->name);
    pt_buf v;
    pt_buf_init(&v);
    pt_key_value(k, p, &v);
    if (k->type == PT_KEY_EXPR || k->type == PT_KEY_SHAPES || k->type == PT_KEY_ENUM)
        put_value(b, v.s ? v.s : "");
    else
        pt_buf_puts(b, v.s ? v.s : "");
    pt_buf_free(&v);
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "x = 8x256 , g=256" -> "g=256,x=8x256": items without blanks, sorted by
 * name (shapes bind by name, so their order is only spelling); NULL when
 * an item has no name (prepare names the error). */
static const char *canon_shapes(pt_arena *a, const char *spec)
{
    size_t len = strlen(spec), n = 1;
    for (const char *c = spec; *c; c++)
        n += *c == ',';
    char *buf = pt_arena_alloc(a, len + 1);
    const char **items = pt_arena_alloc(a, n * sizeof *items);
    size_t j = 0, k = 0;
    items[k++] = buf;
    for (const char *c = spec; *c; c++) {
        if (isspace((unsigned char)*c))
            continue;
        if (*c == ',') {
            buf[j++] = '\0';
            items[k++] = buf + j;
        } else
            buf[j++] = *c;
    }
    buf[j] = '\0';
    for (size_t i = 0; i < k; i++)
        if (!*items[i] || *items[i] == '=' || !strchr(items[i], '='))
            return NULL;
    qsort(items, k, sizeof *items, cmp_str);
    pt_buf b;
    pt_buf_init(&b);
    for (size_t i = 0; i < k; i++)
        pt_buf_printf(&b, "%s%s", i ? "," : "", items[i]);
    const char *out = pt_arena_strdup(a, b.s ? b.s : "");
    pt_buf_free(&b);
    return out;
}

/* Expressions and shape lists in their canonical spelling (ex_canon, sorted
 * shapes), written back into the problem so that every spelling also
 * emits the same kernel. A value that does not parse is left as written:
 * the op's prepare names its error on the user's text. Generic over ops:
 * only the key types are looked at. */
static void canon_values(pt_arena *a, pt_problem *p, const pt_schema *s)
{
    for (int i = 0; s && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        if ((k->type != PT_KEY_EXPR && k->type != PT_KEY_SHAPES) || pt_key_is_default(k, p))
            continue;
        const char **v = (const char **)(void *)((char *)p + k->off);
        if (!*v || !**v)
            continue;
        const char *c = NULL;
        if (k->type == PT_KEY_SHAPES)
            c = canon_shapes(a, *v);
        else {
            pt_err e = {0};
            if (ex_canon(a, *v, &c, &e) != PT_OK)
                c = NULL;
        }
        if (c && *c)
            *v = c;
    }
}

/* The canonical key: the op, then every key of its schema in table order
 * that is set and not at its default (PT_KEY_ALWAYS keys in any case). The
 * class is the key without sizes (a shape list keeps its pattern, "x=#x#");
 * dims are the sizes, shape keys in table order (an unset size its
 * default). */
void search_problem_canon(pt_arena *a, search_problem *sp)
{
    const pt_problem *p = &sp->prob;
    const pt_op *op = p->op ? pt_op_find(p->op) : NULL;
    const pt_schema *s = op ? op->schema : NULL;
    pt_buf key, klass, dims;
    canon_values(a, &sp->prob, s);
    pt_buf_init(&key);
    pt_buf_init(&klass);
    pt_buf_init(&dims);
    pt_buf_puts(&key, p->op ? p->op : "");
    pt_buf_puts(&klass, p->op ? p->op : "");
    for (int i = 0; s && i < s->nkeys; i++) {
        const pt_key *k = &s->keys[i];
        bool shape = k->flags & PT_KEY_SHAPE;
        if (shape && k->type == PT_KEY_INT) {
            if (dims.len)
                pt_buf_putc(&dims, ',');
            pt_buf_printf(&dims, "%lld", (long long)pt_key_int(k, p));
        }
        if (!(k->flags & PT_KEY_ALWAYS) && pt_key_is_default(k, p))
            continue;
        put_field(&key, p, k);
        if (!shape)
            put_field(&klass, p, k);
        else if (k->type == PT_KEY_SHAPES) {
            pt_buf pat;
            pt_buf_init(&pat);
            shape_split(*(const char *const *)((const char *)p + k->off), &pat, &dims);
            pt_buf_printf(&klass, " %s=", k->name);
            put_value(&klass, pat.s ? pat.s : "");
            pt_buf_free(&pat);
        }
    }
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

/* "expr shape dtype ... name": the keys an op's problem takes. */
static void keys_of(const pt_op *op, char *buf, size_t n)
{
    pt_schema_names(op->schema, buf, n);
    size_t len = strlen(buf);
    if (len < n)
        snprintf(buf + len, n - len, "%sname", len ? " " : "");
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
    const pt_op *o = pt_op_find(op);
    if (!o->schema || o->schema->nkeys > PT_MAX_KEYS)
        return pt_errf(e, PT_EUNSUPPORTED, "op '%s' has no problem schema", op);
    pt_schema_defaults(o, &out->prob);
    bool given[PT_MAX_KEYS] = {false}, named = false;
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
            if (named) {
                rc = pt_errf(e, PT_EINVAL, "duplicate key 'name'");
                break;
            }
            named = true;
            out->name = pt_arena_strdup(a, v);
            continue;
        }
        const pt_key *k = pt_schema_find(o->schema, k0, klen);
        if (!k) {
            char keys[512];
            keys_of(o, keys, sizeof keys);
            rc = pt_errf(e, PT_EINVAL, "unknown key '%.*s' for %s (keys: %s)", (int)klen, k0, op,
                         keys);
            break;
        }
        size_t ki = (size_t)(k - o->schema->keys);
        if (given[ki]) {
            rc = pt_errf(e, PT_EINVAL, "duplicate key '%s'", k->name);
            break;
        }
        given[ki] = true;
        /* the command line leaves a missing or zero size to the op's
         * prepare, which names it */
        rc = pt_key_set(a, k, &out->prob, v, partial && (k->flags & PT_KEY_REQUIRED), e);
    }
    pt_buf_free(&val);
    if (!rc)
        rc = pt_schema_finish(o, &out->prob, given, partial, e);
    if (rc)
        return rc;
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
    if (!r->name) {
        search_problem_reader_close(r);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
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
    if (!r->name) {
        search_problem_reader_close(r);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
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

int search_problem_rekey(void *ctx, const char *key, pt_buf *nkey, pt_buf *klass, pt_buf *dims)
{
    (void)ctx;
    size_t n = strcspn(key, " ");
    char op[64];
    if (n == 0 || n >= sizeof op)
        return PT_EINVAL;
    memcpy(op, key, n);
    op[n] = '\0';
    if (!pt_op_find(op))
        return PT_EINVAL; /* an op this build does not have: the key stays */
    pt_arena *a = pt_arena_new();
    search_problem sp;
    pt_err e = {0};
    int rc = search_problem_parse(a, op, key + n, &sp, &e);
    if (!rc) {
        pt_buf_puts(nkey, sp.key);
        pt_buf_puts(klass, sp.klass);
        pt_buf_puts(dims, sp.dims);
    }
    pt_arena_free(a);
    return rc;
}
