/* The PTX parser: a byte lexer with one token of lookahead and a flat
 * statement loop (no recursion: vectors and addresses do not nest), building
 * the IR through the same calls the templates use. Names resolve through
 * small open-addressing hash tables kept in the module's arena, so parse time
 * stays linear in the text however many names it declares. */
#include "ptx/parse.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_EOF, T_WORD, T_NUM, T_PUNCT } tok_kind;

/* A token points into the text; words include dots ("ld.global.u32",
 * ".reg", "%tid.x") and "::" ("L2::128B"), numbers their letters ("0f3F800000",
 * "1U", "1.5e-3"); anything else is one byte of punctuation. */
typedef struct tok {
    tok_kind kind;
    const char *s;
    size_t n;
    int line, col;
} tok;

/* What a name stands for. Registers and symbols of one entry share a table
 * (a duplicate is an error); labels have their own; the module table holds
 * entries and module-scope shared arrays. */
enum { S_SCALAR = 1, S_FAMILY, S_PARAM, S_SHARED, S_MSHARED, S_ENTRY, S_LABEL };

typedef struct sym_ent {
    const char *name;
    size_t n;
    int kind, val;
} sym_ent;

typedef struct symtab {
    sym_ent *slot;
    size_t cap, used;
} symtab;

/* Per label: defined yet, and where it was first referenced (or defined). */
typedef struct label_info {
    bool placed;
    int line, col;
} label_info;

typedef struct parser {
    jmp_buf *oom; /* the module arena's recovery point (parse_guarded) */
    const char *cur, *end, *line_start;
    int line;
    const char *file;
    tok pk;
    bool has_pk;
    pt_err *e;
    ptx_module *m;
    pt_arena *a;
    symtab msyms;
    ptx_fn *f; /* the entry being parsed, NULL at module scope */
    symtab fsyms, labels, tails;
    label_info *linfo;
    size_t cap_linfo;
} parser;

enum { DESC = 200, MAX_SHARED = 1 << 24, MAX_PARAM_ARRAY = 1 << 16, MAX_NTID = 1 << 30 };

/* ---- errors ---- */

static int perr(parser *p, int line, int col, int code, const char *fmt, ...) PT_PRINTF(5, 6);
static int perr(parser *p, int line, int col, int code, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pt_errf(p->e, code, "%s:%d:%d: %s", p->file, line, col, msg);
}

/* The token as it appears, quoted, cut at 40 bytes, unprintable bytes as \xNN. */
static const char *tok_desc(const tok *t, char *buf, size_t n)
{
    if (t->kind == T_EOF)
        return "end of file";
    size_t k = 0;
    buf[k++] = '\'';
    for (size_t i = 0; i < t->n && k + 8 < n; i++) {
        unsigned char c = (unsigned char)t->s[i];
        if (i == 40) {
            memcpy(buf + k, "...", 3);
            k += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f)
            buf[k++] = (char)c;
        else
            k += (size_t)snprintf(buf + k, n - k, "\\x%02x", c);
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

static int expected(parser *p, const tok *t, const char *what)
{
    if (t->kind == T_EOF) {
        if (p->f)
            return perr(p, t->line, t->col, PT_EPARSE,
                        "unexpected end of file in entry '%s' (expected %s)", p->f->name, what);
        return perr(p, t->line, t->col, PT_EPARSE, "unexpected end of file (expected %s)", what);
    }
    char d[DESC];
    return perr(p, t->line, t->col, PT_EPARSE, "expected %s, found %s", what,
                tok_desc(t, d, sizeof d));
}

/* ---- lexer ---- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_idch(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' ||
           c == '$';
}

static int col_of(const parser *p, const char *s) { return (int)(s - p->line_start) + 1; }

static int lex(parser *p, tok *t)
{
    const char *s = p->cur, *end = p->end;
    while (s < end) {
        char c = *s;
        if (c == '\n') {
            p->line++;
            p->line_start = ++s;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v')
            s++;
        else if (c == '/' && end - s >= 2 && s[1] == '/') {
            while (s < end && *s != '\n')
                s++;
        } else if (c == '/' && end - s >= 2 && s[1] == '*') {
            int l0 = p->line, c0 = col_of(p, s);
            for (s += 2;; s++) {
                if (s >= end) {
                    p->cur = s;
                    return perr(p, l0, c0, PT_EPARSE, "unterminated /* comment");
                }
                if (*s == '*' && end - s >= 2 && s[1] == '/') {
                    s += 2;
                    break;
                }
                if (*s == '\n') {
                    p->line++;
                    p->line_start = s + 1;
                }
            }
        } else
            break;
    }
    t->line = p->line;
    t->col = col_of(p, s);
    t->s = s;
    const char *b = s;
    if (s >= end) {
        t->kind = T_EOF;
    } else if ((is_idch(*s) && !is_digit(*s)) || *s == '%' || *s == '.') {
        for (s++; s < end;) {
            if (is_idch(*s) || *s == '.')
                s++;
            else if (*s == ':' && end - s >= 3 && s[1] == ':' && is_idch(s[2]))
                s += 2;
            else
                break;
        }
        t->kind = T_WORD;
    } else if (is_digit(*s)) {
        /* a sign belongs to the number only as a decimal exponent: 1.5e-3 */
        bool dec = !(*s == '0' && end - s >= 2 && s[1] && strchr("xXbBfFdD", s[1]));
        for (s++; s < end;) {
            if (is_idch(*s) || *s == '.')
                s++;
            else if (dec && (*s == '+' || *s == '-') && (s[-1] == 'e' || s[-1] == 'E'))
                s++;
            else
                break;
        }
        t->kind = T_NUM;
    } else {
        s++;
        t->kind = T_PUNCT;
    }
    t->n = (size_t)(s - b);
    p->cur = s;
    return PT_OK;
}

static int next(parser *p, tok *t)
{
    if (p->has_pk) {
        *t = p->pk;
        p->has_pk = false;
        return PT_OK;
    }
    return lex(p, t);
}

static int peek(parser *p, const tok **t)
{
    if (!p->has_pk) {
        int rc = lex(p, &p->pk);
        if (rc)
            return rc;
        p->has_pk = true;
    }
    *t = &p->pk;
    return PT_OK;
}

static bool is_punct(const tok *t, char c) { return t->kind == T_PUNCT && t->s[0] == c; }

static bool is_word(const tok *t, const char *w)
{
    size_t n = strlen(w);
    return t->kind == T_WORD && t->n == n && memcmp(t->s, w, n) == 0;
}

static bool is_directive(const tok *t) { return t->kind == T_WORD && t->s[0] == '.'; }

/* Consumes the next token if it is punctuation c. */
static int accept(parser *p, char c, bool *got)
{
    const tok *t;
    int rc = peek(p, &t);
    if (rc)
        return rc;
    *got = is_punct(t, c);
    if (*got)
        p->has_pk = false;
    return PT_OK;
}

static int expect_punct(parser *p, char c, const char *what)
{
    tok t;
    int rc = next(p, &t);
    if (rc)
        return rc;
    return is_punct(&t, c) ? PT_OK : expected(p, &t, what);
}

/* A PTX identifier: [A-Za-z][A-Za-z0-9_$]* or [_$%][A-Za-z0-9_$]+; pct
 * allows the '%' start (register names). */
static bool is_ident(const tok *t, bool pct)
{
    if (t->kind != T_WORD)
        return false;
    char c = t->s[0];
    if (c == '.' || (c == '%' && !pct))
        return false;
    if ((c == '_' || c == '$' || c == '%') && t->n < 2)
        return false;
    for (size_t i = 1; i < t->n; i++)
        if (!is_idch(t->s[i]))
            return false;
    return true;
}

/* ---- numbers ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return 99;
}

/* An integer literal: decimal, 0x hex, 0b binary or 0-led octal, with an
 * optional U suffix. False when malformed or above UINT64_MAX. */
static bool parse_uint(const char *s, size_t n, uint64_t *v, bool *hex)
{
    if (n && (s[n - 1] == 'U' || s[n - 1] == 'u'))
        n--;
    unsigned base = 10;
    size_t i = 0;
    *hex = false;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        i = 2;
        *hex = true;
    } else if (n >= 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
        base = 2;
        i = 2;
    } else if (n >= 2 && s[0] == '0') {
        base = 8;
        i = 1;
    }
    if (i >= n)
        return false;
    uint64_t x = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)hexval(s[i]);
        if (d >= base || x > (UINT64_MAX - d) / base)
            return false;
        x = x * base + d;
    }
    *v = x;
    return true;
}

/* A non-negative integer token within [lo, hi]. */
static int int_tok(parser *p, const tok *t, int64_t lo, int64_t hi, const char *what, int64_t *out)
{
    uint64_t v;
    bool hex;
    if (t->kind != T_NUM)
        return expected(p, t, what);
    char d[DESC];
    if (!parse_uint(t->s, t->n, &v, &hex))
        return perr(p, t->line, t->col, PT_EPARSE, "bad integer %s for %s", tok_desc(t, d, sizeof d),
                    what);
    if (v < (uint64_t)lo || v > (uint64_t)hi)
        return perr(p, t->line, t->col, PT_ERANGE, "%s %s out of range (%lld..%lld)", what,
                    tok_desc(t, d, sizeof d), (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return PT_OK;
}

static int next_int(parser *p, int64_t lo, int64_t hi, const char *what, int64_t *out)
{
    tok t;
    int rc = next(p, &t);
    return rc ? rc : int_tok(p, &t, lo, hi, what, out);
}

/* Hex digits of a 0f / 0d bit pattern. */
static bool hex_bits(const char *s, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hexval(s[i]);
        if (d > 15)
            return false;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return true;
}

static bool is_float_tok(const tok *t)
{
    if (t->n >= 2 && t->s[0] == '0' && t->s[1] && strchr("xXbB", t->s[1]))
        return false;
    for (size_t i = 0; i < t->n; i++)
        if (t->s[i] == '.' || t->s[i] == 'e' || t->s[i] == 'E')
            return true;
    return false;
}

/* An immediate operand, t its first token ('-' or a number). ty is the
 * operand's type (-1 unknown): it picks f32 or f64 for a decimal float and
 * refuses floats for integer operands; int_only refuses them always. */
static int parse_imm(parser *p, tok *t, int ty, bool int_only, ptx_opd *o)
{
    tok first = *t;
    bool neg = false;
    char d[DESC];
    int rc;
    if (is_punct(t, '-')) {
        neg = true;
        if ((rc = next(p, t)))
            return rc;
        if (t->kind != T_NUM)
            return expected(p, t, "a number after '-'");
    }
    const char *s = t->s;
    size_t n = t->n;
    char cls = ty >= 0 ? ptx_type_class((ptx_type)ty) : '?';
    bool fbits = n >= 2 && s[0] == '0' && s[1] && strchr("fFdD", s[1]);
    if (fbits || is_float_tok(t)) {
        if (int_only || cls == 'u' || cls == 's' || cls == 'p')
            return perr(p, first.line, first.col, PT_EPARSE,
                        "floating-point immediate %s where an integer is expected",
                        tok_desc(t, d, sizeof d));
    }
    if (fbits) {
        bool f64 = s[1] == 'd' || s[1] == 'D';
        uint64_t bits;
        if (n != (f64 ? 18u : 10u) || !hex_bits(s + 2, n - 2, &bits))
            return perr(p, t->line, t->col, PT_EPARSE, "bad %s immediate %s (0%c takes %d hex digits)",
                        f64 ? "f64" : "f32", tok_desc(t, d, sizeof d), f64 ? 'd' : 'f',
                        f64 ? 16 : 8);
        if (neg)
            return perr(p, first.line, first.col, PT_EPARSE,
                        "'-' before a bit-pattern immediate %s", tok_desc(t, d, sizeof d));
        if (f64) {
            o->kind = PTX_O_F64;
            memcpy(&o->u.f64, &bits, 8);
        } else {
            uint32_t b32 = (uint32_t)bits;
            o->kind = PTX_O_F32;
            memcpy(&o->u.f32, &b32, 4);
        }
        return PT_OK;
    }
    if (is_float_tok(t)) {
        char buf[72];
        bool ok = n < 64;
        for (size_t i = 0; ok && i < n; i++)
            ok = is_digit(s[i]) || (s[i] && strchr(".eE+-", s[i]));
        if (ok) {
            buf[0] = '-';
            memcpy(buf + 1, s, n);
            buf[n + 1] = '\0';
            const char *start = neg ? buf : buf + 1;
            char *endp;
            bool f64 = ty >= 0 && ptx_type_bits((ptx_type)ty) == 64;
            errno = 0;
            if (f64) {
                o->kind = PTX_O_F64;
                o->u.f64 = strtod(start, &endp);
                ok = endp == buf + n + 1 && isfinite(o->u.f64);
            } else {
                o->kind = PTX_O_F32;
                o->u.f32 = strtof(start, &endp);
                ok = endp == buf + n + 1 && isfinite(o->u.f32);
            }
        }
        if (!ok)
            return perr(p, t->line, t->col, PT_EPARSE, "bad floating-point immediate %s",
                        tok_desc(t, d, sizeof d));
        return PT_OK;
    }
    uint64_t v;
    bool hex;
    if (!parse_uint(s, n, &v, &hex))
        return perr(p, t->line, t->col, PT_EPARSE, "bad integer immediate %s",
                    tok_desc(t, d, sizeof d));
    if (neg && v > (uint64_t)INT64_MAX + 1)
        return perr(p, first.line, first.col, PT_ERANGE, "integer immediate -%s out of range",
                    tok_desc(t, d, sizeof d));
    o->kind = PTX_O_IMM;
    o->hex = hex && !neg;
    o->u.imm = neg ? (int64_t)(0 - v) : (int64_t)v;
    return PT_OK;
}

/* ---- names ---- */

static sym_ent *sym_find(symtab *t, const char *s, size_t n)
{
    if (!t->cap)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)pt_hash64(s, n) & mask;; i = (i + 1) & mask) {
        sym_ent *e = &t->slot[i];
        if (!e->name)
            return NULL;
        if (e->n == n && memcmp(e->name, s, n) == 0)
            return e;
    }
}

static void sym_put(sym_ent *slot, size_t cap, sym_ent v)
{
    size_t mask = cap - 1;
    size_t i = (size_t)pt_hash64(v.name, v.n) & mask;
    while (slot[i].name)
        i = (i + 1) & mask;
    slot[i] = v;
}

/* Adds a name (not present); the key is copied into the arena. */
static const char *sym_add(parser *p, symtab *t, const char *s, size_t n, int kind, int val)
{
    if (2 * (t->used + 1) > t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 64;
        sym_ent *ns = pt_arena_alloc(p->a, nc * sizeof *ns);
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i].name)
                sym_put(ns, nc, t->slot[i]);
        t->slot = ns;
        t->cap = nc;
    }
    const char *name = pt_arena_strndup(p->a, s, n);
    sym_put(t->slot, t->cap, (sym_ent){name, n, kind, val});
    t->used++;
    return name;
}

/* Splits "%r12" into the prefix length and a canonical index (no leading
 * zero) below PTX_PARSE_MAX_REGS; false when the name has no such tail. */
static bool split_idx(const char *s, size_t n, size_t *k, uint32_t *idx)
{
    size_t i = n;
    while (i > 0 && is_digit(s[i - 1]))
        i--;
    if (i == n || i == 0 || n - i > 7 || (s[i] == '0' && n - i > 1))
        return false;
    uint32_t x = 0;
    for (size_t j = i; j < n; j++)
        x = x * 10 + (uint32_t)(s[j] - '0');
    if (x >= PTX_PARSE_MAX_REGS)
        return false;
    *k = i;
    *idx = x;
    return true;
}

static ptx_reg mkreg(int bank, uint32_t idx) { return (ptx_reg){((uint32_t)(bank + 1) << 20) | idx}; }

/* A declared register by name: a scalar, or a member of a %r<N> family. */
static bool find_reg(parser *p, const char *s, size_t n, ptx_reg *r)
{
    sym_ent *e = sym_find(&p->fsyms, s, n);
    if (e) {
        if (e->kind != S_SCALAR)
            return false;
        *r = mkreg(e->val, 0);
        return true;
    }
    size_t k;
    uint32_t idx;
    if (!split_idx(s, n, &k, &idx))
        return false;
    e = sym_find(&p->fsyms, s, k);
    if (!e || e->kind != S_FAMILY || idx >= p->f->banks[e->val].count)
        return false;
    *r = mkreg(e->val, idx);
    return true;
}

/* A param or shared array named by t (entry scope first, then module). */
static const char *find_sym(parser *p, const tok *t)
{
    sym_ent *e = sym_find(&p->fsyms, t->s, t->n);
    if (e && (e->kind == S_PARAM || e->kind == S_SHARED))
        return e->name;
    if (e)
        return NULL;
    e = sym_find(&p->msyms, t->s, t->n);
    if (e && e->kind == S_MSHARED)
        return e->name;
    return NULL;
}

/* A new entry-scope name must not repeat a name, be a member of a declared
 * %r<N> family, or spell a special register. */
static int check_new_name(parser *p, const tok *t)
{
    char d[DESC];
    ptx_reg r;
    if (sym_find(&p->fsyms, t->s, t->n) || find_reg(p, t->s, t->n, &r) ||
        ptx_sreg_lookup(t->s, t->n) >= 0)
        return perr(p, t->line, t->col, PT_EPARSE, "duplicate definition of %s in entry '%s'",
                    tok_desc(t, d, sizeof d), p->f->name);
    return PT_OK;
}

/* Adds an entry-scope name (checked new). A name with a numeric tail,
 * "x12", also records its prefix with the lowest such index, so a later
 * family x<N> finds the clash in one lookup. */
static const char *fsym_add(parser *p, const tok *t, int kind, int val)
{
    const char *name = sym_add(p, &p->fsyms, t->s, t->n, kind, val);
    size_t k;
    uint32_t idx;
    if (split_idx(t->s, t->n, &k, &idx)) {
        sym_ent *e = sym_find(&p->tails, t->s, k);
        if (!e)
            sym_add(p, &p->tails, t->s, k, 0, (int)idx);
        else if ((uint32_t)e->val > idx)
            e->val = (int)idx;
    }
    return name;
}

/* A new family P<N> must not cover a name declared before it, nor a special
 * register (P = "%clock" with N > 64 would cover %clock64). */
static int check_new_family(parser *p, const tok *t, uint32_t count)
{
    char d[DESC];
    if (is_digit(t->s[t->n - 1]))
        return perr(p, t->line, t->col, PT_EPARSE,
                    "register family name %s must not end in a digit", tok_desc(t, d, sizeof d));
    sym_ent *tail = sym_find(&p->tails, t->s, t->n);
    bool dup = sym_find(&p->fsyms, t->s, t->n) || (tail && (uint32_t)tail->val < count);
    for (int i = 0; !dup && i < PTX_NSREGS; i++) {
        const char *sr = ptx_sreg_name((ptx_sreg)i);
        size_t k;
        uint32_t idx;
        dup = split_idx(sr, strlen(sr), &k, &idx) && k == t->n && memcmp(sr, t->s, k) == 0 &&
              idx < count;
    }
    if (dup)
        return perr(p, t->line, t->col, PT_EPARSE,
                    "duplicate definition: %s<%u> repeats a name in entry '%s'",
                    tok_desc(t, d, sizeof d), count, p->f->name);
    return PT_OK;
}

/* The builder's register family for a type, so that ptx_reg_new() on a
 * parsed entry extends the declared %r<N> instead of adding a second one
 * (the same names ir.c gives them). */
static const char *std_family(ptx_type t)
{
    switch (t) {
    case PTX_T_PRED: return "%p";
    case PTX_T_B16: return "%rs";
    case PTX_T_B32: return "%r";
    case PTX_T_B64: return "%rd";
    case PTX_T_F32: return "%f";
    case PTX_T_F64: return "%fd";
    default: return NULL;
    }
}

/* ---- declarations ---- */

static int type_tok(parser *p, const tok *t, ptx_type *ty)
{
    if (!is_directive(t))
        return expected(p, t, "a type such as .b32");
    int k = ptx_type_lookup(t->s + 1, t->n - 1);
    if (k < 0) {
        char d[DESC];
        return perr(p, t->line, t->col, PT_EPARSE, "unknown type %s", tok_desc(t, d, sizeof d));
    }
    *ty = (ptx_type)k;
    return PT_OK;
}

static int align_val(parser *p, int *align)
{
    tok t;
    int64_t v;
    int rc = next(p, &t);
    if (!rc)
        rc = int_tok(p, &t, 1, 1 << 16, "alignment", &v);
    if (rc)
        return rc;
    if (v & (v - 1))
        return perr(p, t.line, t.col, PT_EPARSE, "alignment %lld is not a power of two",
                    (long long)v);
    *align = (int)v;
    return PT_OK;
}

/* .reg .type name[<N>] {, name[<N>]} ; */
static int parse_reg(parser *p)
{
    tok t;
    ptx_type ty;
    char d[DESC];
    int rc = next(p, &t);
    if (rc)
        return rc;
    if (is_word(&t, ".v2") || is_word(&t, ".v4") || is_word(&t, ".v8"))
        return perr(p, t.line, t.col, PT_EPARSE, "vector registers (.reg %s) are not supported",
                    tok_desc(&t, d, sizeof d));
    if ((rc = type_tok(p, &t, &ty)))
        return rc;
    for (;;) {
        tok name;
        bool fam;
        if ((rc = next(p, &name)))
            return rc;
        if (!is_ident(&name, true))
            return expected(p, &name, "a register name");
        if (name.n > PTX_PARSE_MAX_NAME)
            return perr(p, name.line, name.col, PT_EPARSE,
                        "register name %s is longer than %d bytes", tok_desc(&name, d, sizeof d),
                        PTX_PARSE_MAX_NAME);
        if (p->f->nbanks >= PTX_PARSE_MAX_BANKS)
            return perr(p, name.line, name.col, PT_ERANGE,
                        "too many .reg declarations in entry '%s' (at most %d)", p->f->name,
                        PTX_PARSE_MAX_BANKS);
        if ((rc = accept(p, '<', &fam)))
            return rc;
        if (fam) {
            int64_t count;
            if ((rc = next_int(p, 1, PTX_PARSE_MAX_REGS, "register count", &count)) ||
                (rc = expect_punct(p, '>', "'>'")) ||
                (rc = check_new_family(p, &name, (uint32_t)count)))
                return rc;
            const char *pre = fsym_add(p, &name, S_FAMILY, (int)p->f->nbanks);
            int bank = ptx_bank_add(p->f, pre, ty, (uint32_t)count, false);
            const char *std = std_family(ty);
            if (std && strcmp(std, pre) == 0 && p->f->std_bank[ty] < 0)
                p->f->std_bank[ty] = bank;
        } else {
            if ((rc = check_new_name(p, &name)))
                return rc;
            const char *nm = fsym_add(p, &name, S_SCALAR, (int)p->f->nbanks);
            ptx_bank_add(p->f, nm, ty, 1, true);
        }
        if ((rc = next(p, &t)))
            return rc;
        if (is_punct(&t, ';'))
            return PT_OK;
        if (!is_punct(&t, ','))
            return expected(p, &t, "',' or ';' in .reg");
    }
}

/* [.extern] .shared [.align A] .type name[N] ;   (extern: name[]) */
static int parse_shared(parser *p, bool is_extern)
{
    tok t, name;
    int align = 0, rc;
    ptx_type ty;
    char d[DESC];
    if ((rc = next(p, &t)))
        return rc;
    if (is_word(&t, ".align")) {
        if ((rc = align_val(p, &align)) || (rc = next(p, &t)))
            return rc;
    }
    if ((rc = type_tok(p, &t, &ty)))
        return rc;
    if (ty == PTX_T_PRED)
        return perr(p, t.line, t.col, PT_EPARSE, "a .shared array cannot have type .pred");
    if ((rc = next(p, &name)))
        return rc;
    if (!is_ident(&name, false))
        return expected(p, &name, "a .shared array name");
    const tok *pk;
    int64_t count = 1;
    if ((rc = peek(p, &pk)))
        return rc;
    bool arr = is_punct(pk, '[');
    if (is_extern && !arr)
        return expected(p, pk, "'[]' after an .extern .shared name");
    if (arr)
        p->has_pk = false;
    if (is_extern) {
        if ((rc = expect_punct(p, ']', "']' (an .extern .shared array has no size)")))
            return rc;
        count = 0;
    } else if (arr) {
        if ((rc = next_int(p, 1, MAX_SHARED, ".shared array size", &count)) ||
            (rc = expect_punct(p, ']', "']'")))
            return rc;
    }
    if ((rc = expect_punct(p, ';', "';'")))
        return rc;
    int64_t elem = ptx_type_bits(ty) / 8;
    if (count * elem > MAX_SHARED)
        return perr(p, name.line, name.col, PT_ERANGE,
                    ".shared array %s of %lld bytes is too large", tok_desc(&name, d, sizeof d),
                    (long long)(count * elem));
    if (!align)
        align = (int)elem;
    ptx_module *m = p->m;
    if (p->f) {
        if ((rc = check_new_name(p, &name)))
            return rc;
        const char *nm = fsym_add(p, &name, S_SHARED, (int)p->f->nshared);
        ptx_shared_add(p->f, nm, align, count * elem);
        return PT_OK;
    }
    if (sym_find(&p->msyms, name.s, name.n))
        return perr(p, name.line, name.col, PT_EPARSE, "duplicate module-scope name %s",
                    tok_desc(&name, d, sizeof d));
    const char *nm = sym_add(p, &p->msyms, name.s, name.n, S_MSHARED, (int)m->nshared);
    if (is_extern)
        ptx_module_extern_shared(m, nm, align);
    else {
        m->shared = pt_arena_grow(m->arena, m->shared, sizeof *m->shared, &m->cap_shared,
                                  m->nshared + 1);
        m->shared[m->nshared++] = (ptx_shared){nm, align, count * elem, false};
    }
    return PT_OK;
}

/* .param [.align A] .type [.ptr .global [.align A] | .align A] name[[N]] */
static int parse_param(parser *p)
{
    tok t, name;
    int align = 0, ptr_align = 0, rc;
    bool ptr = false, arr;
    ptx_type ty;
    int64_t count = 0;
    if ((rc = next(p, &t)))
        return rc;
    if (!is_word(&t, ".param"))
        return expected(p, &t, "'.param'");
    if ((rc = next(p, &t)))
        return rc;
    if (is_word(&t, ".align") && ((rc = align_val(p, &align)) || (rc = next(p, &t))))
        return rc;
    if ((rc = type_tok(p, &t, &ty)) || (rc = next(p, &t)))
        return rc;
    if (is_word(&t, ".ptr")) {
        tok sp;
        if (ty != PTX_T_U64 || align)
            return perr(p, t.line, t.col, PT_EPARSE, "'.ptr' needs a plain .u64 parameter");
        ptr = true;
        if ((rc = next(p, &sp)))
            return rc;
        if (!is_word(&sp, ".global"))
            return expected(p, &sp, "'.global' after '.ptr' (the only state space supported)");
        if ((rc = next(p, &t)))
            return rc;
        if (is_word(&t, ".align") && ((rc = align_val(p, &ptr_align)) || (rc = next(p, &t))))
            return rc;
    } else if (is_word(&t, ".align") && !align) {
        if ((rc = align_val(p, &align)) || (rc = next(p, &t)))
            return rc;
    }
    name = t;
    if (!is_ident(&name, false))
        return expected(p, &name, "a parameter name");
    if ((rc = accept(p, '[', &arr)))
        return rc;
    if (arr) {
        if (ptr)
            return perr(p, name.line, name.col, PT_EPARSE, "a '.ptr' parameter cannot be an array");
        if ((rc = next_int(p, 1, MAX_PARAM_ARRAY, "parameter array size", &count)) ||
            (rc = expect_punct(p, ']', "']'")))
            return rc;
    }
    if ((rc = check_new_name(p, &name)))
        return rc;
    const char *nm = fsym_add(p, &name, S_PARAM, (int)p->f->nparams);
    if (ptr)
        ptx_param_ptr(p->f, nm, ptr_align);
    else
        ptx_param_add(p->f, nm, ty);
    ptx_param *pa = &p->f->params[p->f->nparams - 1];
    pa->name = nm;
    pa->array = (int)count;
    if (!ptr)
        pa->align = align;
    return PT_OK;
}

/* .maxntid / .reqntid x[, y[, z]]; the ones left out are 1. */
static int parse_ntid(parser *p, const tok *dir, int *v)
{
    char d[DESC];
    if (v[0])
        return perr(p, dir->line, dir->col, PT_EPARSE, "duplicate %s", tok_desc(dir, d, sizeof d));
    for (int i = 0; i < 3; i++) {
        int64_t x;
        bool more;
        int rc = next_int(p, 1, MAX_NTID, "thread count", &x);
        if (rc)
            return rc;
        v[i] = (int)x;
        if (i < 2 && (rc = accept(p, ',', &more)))
            return rc;
        if (i < 2 && !more) {
            for (int j = i + 1; j < 3; j++)
                v[j] = 1;
            break;
        }
    }
    return PT_OK;
}

/* ---- operands and instructions ---- */

/* The operand class letter at position pos of an opnds string. */
static char opd_class(const char *opnds, int pos)
{
    for (int k = 0; *opnds; opnds++) {
        if (*opnds == '?')
            continue;
        if (k++ == pos)
            return *opnds;
    }
    return 0;
}

/* The type an operand is read as, by its typing rule (see isa.def); -1 when
 * the instruction has no type. mma-like rows with one type per operand
 * (d, a, b, c) use the type at the operand's position. */
static int opd_type(const ptx_opinfo *info, const ptx_ins *ins, int pos)
{
    char rule = (size_t)pos < strlen(info->typing) ? info->typing[pos] : '-';
    if (rule == '3')
        return PTX_T_U32;
    if (rule == 'P')
        return PTX_T_PRED;
    if (ins->ntypes == 0)
        return -1;
    if (rule == 'U')
        return ins->types[ins->ntypes > 1 ? 1 : 0];
    if (rule == '-' && ins->ntypes == info->max_opnds && pos < ins->ntypes)
        return ins->types[pos];
    return ins->types[0];
}

static int reg_opd(parser *p, const tok *t, ptx_opd *o)
{
    ptx_reg r;
    char d[DESC];
    if (t->kind != T_WORD || !find_reg(p, t->s, t->n, &r)) {
        if (t->kind == T_WORD && t->s[0] == '%')
            return perr(p, t->line, t->col, PT_EPARSE, "undeclared register %s",
                        tok_desc(t, d, sizeof d));
        if (is_ident(t, false))
            return perr(p, t->line, t->col, PT_EPARSE, "undeclared register %s",
                        tok_desc(t, d, sizeof d));
        return expected(p, t, "a register");
    }
    *o = ptx_r(r);
    return PT_OK;
}

/* A word operand: special register, register or a param/shared symbol. */
static int word_opd(parser *p, const tok *t, ptx_opd *o)
{
    char d[DESC];
    if (t->s[0] == '%') {
        int sr = ptx_sreg_lookup(t->s, t->n);
        if (sr >= 0) {
            *o = ptx_sr((ptx_sreg)sr);
            return PT_OK;
        }
        return reg_opd(p, t, o);
    }
    ptx_reg r;
    if (find_reg(p, t->s, t->n, &r)) {
        *o = ptx_r(r);
        return PT_OK;
    }
    if (!is_ident(t, false))
        return expected(p, t, "an operand");
    const char *s = find_sym(p, t);
    if (!s)
        return perr(p, t->line, t->col, PT_EPARSE, "undeclared identifier %s",
                    tok_desc(t, d, sizeof d));
    *o = ptx_sym(s);
    return PT_OK;
}

/* [reg], [reg+off], [reg+-off], [reg-off], [sym], [sym+off] */
static int parse_addr(parser *p, ptx_opd *o)
{
    tok b, t;
    char d[DESC];
    int rc = next(p, &b);
    if (rc)
        return rc;
    ptx_reg base = {0};
    const char *sym = NULL;
    if (b.kind == T_NUM)
        return perr(p, b.line, b.col, PT_EPARSE, "immediate addresses such as [%s] are not supported",
                    tok_desc(&b, d, sizeof d));
    if (b.kind != T_WORD || is_directive(&b))
        return expected(p, &b, "a register or symbol in the address");
    if (!find_reg(p, b.s, b.n, &base)) {
        sym = b.s[0] == '%' || !is_ident(&b, false) ? NULL : find_sym(p, &b);
        if (!sym)
            return perr(p, b.line, b.col, PT_EPARSE, "undeclared %s %s",
                        b.s[0] == '%' ? "register" : "symbol", tok_desc(&b, d, sizeof d));
    }
    int64_t off = 0;
    if ((rc = next(p, &t)))
        return rc;
    if (is_punct(&t, ',')) { /* a tensor operand: [tmap, {c0, c1, ...}] */
        ptx_opd el[6];
        int n = 1;
        el[0] = sym ? ptx_sym(sym) : ptx_r(base);
        bool empty;
        if ((rc = expect_punct(p, '{', "'{' after the tensor map")) || (rc = accept(p, '}', &empty)))
            return rc;
        for (; !empty;) {
            if ((rc = next(p, &t)))
                return rc;
            if (n == 6)
                return perr(p, t.line, t.col, PT_EPARSE, "more than 5 tensor coordinates");
            memset(&el[n], 0, sizeof el[n]);
            if (t.kind == T_NUM || is_punct(&t, '-'))
                rc = parse_imm(p, &t, PTX_T_S32, true, &el[n]);
            else
                rc = reg_opd(p, &t, &el[n]);
            n++;
            if (rc || (rc = next(p, &t)))
                return rc;
            if (is_punct(&t, '}'))
                break;
            if (!is_punct(&t, ','))
                return expected(p, &t, "',' or '}' in the tensor coordinates");
        }
        if ((rc = expect_punct(p, ']', "']' after the tensor coordinates")))
            return rc;
        *o = ptx_tensor(p->f, el[0], n - 1, el + 1);
        return PT_OK;
    }
    if (is_punct(&t, '+') || is_punct(&t, '-')) {
        bool neg = is_punct(&t, '-');
        if ((rc = next(p, &t)))
            return rc;
        if (!neg && is_punct(&t, '-')) {
            neg = true;
            if ((rc = next(p, &t)))
                return rc;
        }
        uint64_t v;
        bool hex;
        if (t.kind != T_NUM)
            return expected(p, &t, "an address offset");
        if (!parse_uint(t.s, t.n, &v, &hex) || v > (uint64_t)INT64_MAX + neg)
            return perr(p, t.line, t.col, PT_EPARSE, "bad address offset %s",
                        tok_desc(&t, d, sizeof d));
        off = neg ? (int64_t)(0 - v) : (int64_t)v;
        if ((rc = next(p, &t)))
            return rc;
    }
    if (!is_punct(&t, ']'))
        return expected(p, &t, "']' or '+offset' in the address");
    *o = sym ? ptx_saddr(sym, off) : ptx_addr(base, off);
    return PT_OK;
}

/* {a, b, _, 0f3F800000} : registers, sinks and immediates. */
static int parse_vec(parser *p, int ty, ptx_opd *o)
{
    ptx_opd el[PTX_PARSE_MAX_VEC];
    int n = 0, rc;
    for (;;) {
        tok t;
        if ((rc = next(p, &t)))
            return rc;
        if (n == PTX_PARSE_MAX_VEC)
            return perr(p, t.line, t.col, PT_EPARSE, "vector operand has more than %d elements",
                        PTX_PARSE_MAX_VEC);
        ptx_opd *e = &el[n++];
        memset(e, 0, sizeof *e);
        if (is_word(&t, "_"))
            e->kind = PTX_O_SINK;
        else if (t.kind == T_WORD && !is_directive(&t))
            rc = reg_opd(p, &t, e);
        else if (t.kind == T_NUM || is_punct(&t, '-'))
            rc = parse_imm(p, &t, ty, false, e);
        else
            return expected(p, &t, "a register, '_' or an immediate in the vector");
        if (rc || (rc = next(p, &t)))
            return rc;
        if (is_punct(&t, '}'))
            break;
        if (!is_punct(&t, ','))
            return expected(p, &t, "',' or '}' in the vector");
    }
    *o = ptx_vec(p->f, n, el);
    return PT_OK;
}

/* A label operand: known, or created now (a forward reference). */
static int label_id(parser *p, const tok *t)
{
    sym_ent *s = sym_find(&p->labels, t->s, t->n);
    if (s)
        return s->val;
    const char *name = sym_add(p, &p->labels, t->s, t->n, S_LABEL, (int)p->f->nlabels);
    int id = ptx_label_named(p->f, name);
    p->linfo = pt_arena_grow(p->a, p->linfo, sizeof *p->linfo, &p->cap_linfo, (size_t)id + 1);
    p->linfo[id] = (label_info){false, t->line, t->col};
    return id;
}

static int parse_opd(parser *p, tok *t, const ptx_opinfo *info, const ptx_ins *ins, int pos,
                     ptx_opd *o)
{
    char cls = opd_class(info->opnds, pos);
    int ty = opd_type(info, ins, pos);
    memset(o, 0, sizeof *o);
    if (is_punct(t, '['))
        return parse_addr(p, o);
    if (is_punct(t, '{'))
        return parse_vec(p, ty, o);
    if (is_punct(t, '!')) {
        tok r;
        int rc = next(p, &r);
        if (rc || (rc = reg_opd(p, &r, o)))
            return rc;
        o->neg = true;
        return PT_OK;
    }
    if (is_punct(t, '-') || t->kind == T_NUM)
        return parse_imm(p, t, ty, cls == 'i', o);
    if (t->kind != T_WORD || is_directive(t))
        return expected(p, t, "an operand");
    if (is_word(t, "_")) {
        o->kind = PTX_O_SINK;
        return PT_OK;
    }
    if (cls == 'l') {
        if (!is_ident(t, false))
            return expected(p, t, "a label");
        *o = ptx_lbl(label_id(p, t));
        return PT_OK;
    }
    return word_opd(p, t, o);
}

static void push_ins(ptx_fn *f, const ptx_ins *ins)
{
    f->body = pt_arena_grow(f->mod->arena, f->body, sizeof *f->body, &f->cap_body, f->nbody + 1);
    f->body[f->nbody++] = *ins;
}

/* Checks an instruction against the ISA table and the file's .version,
 * then appends it. at is where the statement starts. */
static int finish_ins(parser *p, const tok *at, ptx_ins *ins)
{
    pt_err ce;
    pt_err_clear(&ce);
    if (ptx_check_ins(p->f, ins, &ce))
        return perr(p, at->line, at->col, ce.code, "%s", ce.msg);
    if (p->f->need_ver > p->m->version) {
        pt_buf b;
        char need[8], have[8];
        pt_buf_init(&b);
        ptx_ins_opname(ins, &b);
        perr(p, at->line, at->col, PT_EUNSUPPORTED,
             "%s needs PTX %s but the file declares .version %s", b.s,
             pt_ptx_version_str(p->f->need_ver, need, sizeof need),
             pt_ptx_version_str(p->m->version, have, sizeof have));
        pt_buf_free(&b);
        return PT_EUNSUPPORTED;
    }
    push_ins(p->f, ins);
    return PT_OK;
}

/* "m64n128k16": a shape component (m 1..255, n and k 1..65535, no leading
 * zero); false otherwise. */
static bool parse_shape(const char *s, size_t n, ptx_shape *sh)
{
    static const char key[3] = {'m', 'n', 'k'};
    unsigned v[3];
    size_t i = 0;
    for (int f = 0; f < 3; f++) {
        if (i >= n || s[i] != key[f])
            return false;
        i++;
        size_t b = i;
        unsigned x = 0;
        while (i < n && is_digit(s[i]) && i - b < 6)
            x = x * 10 + (unsigned)(s[i++] - '0');
        if (i == b || (s[b] == '0' && i - b > 1) || x == 0 || x > (f == 0 ? 255u : 65535u))
            return false;
        v[f] = x;
    }
    if (i != n)
        return false;
    *sh = (ptx_shape){(uint8_t)v[0], (uint16_t)v[2], PTX_SHAPE_END, (uint16_t)v[1]};
    return true;
}

/* The most operands any row named like op takes (shared names, PTX_OPADD). */
static int max_operands(int op)
{
    const char *name = ptx_op_name((ptx_op)op);
    int most = 0;
    for (int o = op; o < PTX_NOPS && strcmp(ptx_op_name((ptx_op)o), name) == 0; o++) {
        int n = ptx_op_info((ptx_op)o).max_opnds;
        for (int r = 0; r < ptx_isa_nrules(PTX_RULE_OPADD); r++)
            n += ptx_isa_rule(PTX_RULE_OPADD, r).op == o;
        if (n > most)
            most = n;
    }
    return most < PTX_MAX_OPDS ? most : PTX_MAX_OPDS;
}

/* op.mod.type operands ; -- op is the opcode word, at the statement start
 * (the guard's '@' when guarded). */
static int parse_ins(parser *p, const tok *op, const tok *at, ptx_reg guard, bool gneg)
{
    enum { MAXC = 24 };
    size_t cut[MAXC];
    int nc = 0, k, opi = -1, rc;
    char d[DESC];
    ptx_ins ins;
    memset(&ins, 0, sizeof ins);
    ins.guard = guard;
    ins.guard_neg = gneg;
    ins.line = at->line;
    for (size_t i = 0; i <= op->n; i++)
        if (i == op->n || op->s[i] == '.') {
            if (nc == MAXC)
                return perr(p, op->line, op->col, PT_EPARSE, "too many modifiers in %s",
                            tok_desc(op, d, sizeof d));
            cut[nc++] = i;
        }
    /* the longest table name that is a dotted prefix: cp.async.wait_group
     * before cp.async; k components make the opcode */
    for (k = nc; k >= 1; k--)
        if ((opi = ptx_op_lookup(op->s, cut[k - 1])) >= 0)
            break;
    if (opi < 0) {
        tok first = *op;
        first.n = cut[0];
        return perr(p, op->line, op->col, PT_EPARSE, "unknown opcode %s",
                    tok_desc(&first, d, sizeof d));
    }
    ins.op = (uint16_t)opi;
    for (int j = k; j < nc; j++) {
        const char *cs = op->s + cut[j - 1] + 1;
        size_t cn = cut[j] - cut[j - 1] - 1;
        int ccol = op->col + (int)(cut[j - 1] + 1);
        int mi = cn ? ptx_mod_lookup(cs, cn) : -1, ti = cn ? ptx_type_lookup(cs, cn) : -1;
        ptx_shape sh;
        if (mi < 0 && ti < 0 && parse_shape(cs, cn, &sh)) {
            tok m = {T_WORD, cs, cn, op->line, ccol};
            char d2[DESC];
            if (ins.shape.m || ins.ntypes)
                return perr(p, op->line, ccol, PT_EPARSE, "shape %s %s in %s",
                            tok_desc(&m, d2, sizeof d2), ins.shape.m ? "given twice" : "after the type",
                            tok_desc(op, d, sizeof d));
            ins.shape = sh;
            ins.shape.at = ins.nmods;
            continue;
        }
        if (mi >= 0 && ins.ntypes) {
            /* the grammar's order: modifiers, then types (what the printer
             * writes). Deliberately stricter than ptxas 13.0, which takes
             * some interleavings (add.f32.rn, setp.f32.lt) and refuses
             * others (mul.u32.lo, cvta.u64.to.global), with no rule the
             * table could state */
            tok m = {T_WORD, cs, cn, op->line, ccol};
            char d2[DESC];
            return perr(p, op->line, ccol, PT_EPARSE, "modifier %s after the type in %s",
                        tok_desc(&m, d2, sizeof d2), tok_desc(op, d, sizeof d));
        }
        if (mi >= 0) {
            if (ins.nmods == PTX_MAX_MODS)
                return perr(p, op->line, ccol, PT_EPARSE, "more than %d modifiers in %s",
                            PTX_MAX_MODS, tok_desc(op, d, sizeof d));
            ins.mods[ins.nmods++] = (uint8_t)mi;
        } else if (ti >= 0) {
            if (ins.ntypes == PTX_MAX_TYPES)
                return perr(p, op->line, ccol, PT_EPARSE, "more than %d types in %s",
                            PTX_MAX_TYPES, tok_desc(op, d, sizeof d));
            ins.types[ins.ntypes++] = (uint8_t)ti;
        } else {
            tok m = {T_WORD, cs, cn, op->line, ccol};
            if (!cn)
                return perr(p, op->line, ccol - 1, PT_EPARSE, "empty modifier in %s",
                            tok_desc(op, d, sizeof d));
            char d2[DESC];
            return perr(p, op->line, ccol, PT_EPARSE, "unknown modifier %s in %s",
                        tok_desc(&m, d2, sizeof d2), tok_desc(op, d, sizeof d));
        }
    }
    ptx_opinfo info = ptx_op_info((ptx_op)opi);
    int maxo = max_operands(opi);
    bool none;
    if ((rc = accept(p, ';', &none)))
        return rc;
    for (int pos = 0; !none; pos++) {
        tok t;
        if ((rc = next(p, &t)))
            return rc;
        if (pos >= maxo) {
            pt_buf b;
            pt_buf_init(&b);
            ptx_ins_opname(&ins, &b);
            perr(p, t.line, t.col, PT_EINVAL, "%s: wrong operand count: more than %d operands",
                 b.s, maxo);
            pt_buf_free(&b);
            return PT_EINVAL;
        }
        if ((rc = parse_opd(p, &t, &info, &ins, pos, &ins.opd[pos])))
            return rc;
        ins.nopd = (uint8_t)(pos + 1);
        if ((rc = next(p, &t)))
            return rc;
        if (is_punct(&t, '|') && opd_class(info.opnds, pos) == 'c') {
            /* elect.sync d|p: the register (or '_') and the predicate */
            ptx_opd q;
            ptx_opd *o = &ins.opd[pos];
            if (o->kind != PTX_O_REG && o->kind != PTX_O_SINK)
                return perr(p, t.line, t.col, PT_EPARSE, "expected a register or '_' before '|'");
            if ((rc = next(p, &t)) || (rc = reg_opd(p, &t, &q)))
                return rc;
            *o = ptx_pair(o->kind == PTX_O_REG ? o->u.reg : (ptx_reg){0}, q.u.reg);
            if ((rc = next(p, &t)))
                return rc;
        }
        if (is_punct(&t, ';'))
            break;
        if (is_punct(&t, '|'))
            return perr(p, t.line, t.col, PT_EPARSE,
                        "a second destination ('d|p') is not supported");
        if (!is_punct(&t, ','))
            return expected(p, &t, "',' or ';' after an operand");
    }
    ins.op = (uint16_t)ptx_resolve_op(p->f, &ins);
    return finish_ins(p, at, &ins);
}

/* .pragma "nounroll"; -- the only pragma the table has (a pseudo-op) */
static int parse_pragma(parser *p, const tok *at)
{
    tok q, w, q2;
    char d[DESC];
    int rc;
    if ((rc = next(p, &q)) || (rc = next(p, &w)) || (rc = next(p, &q2)))
        return rc;
    if (!is_punct(&q, '"'))
        return expected(p, &q, "a quoted pragma such as \"nounroll\"");
    if (w.kind != T_WORD || w.s != q.s + 1 || !is_punct(&q2, '"') || q2.s != w.s + w.n)
        return perr(p, q.line, q.col, PT_EPARSE, "unsupported pragma (only \"nounroll\")");
    int mi = ptx_mod_lookup(w.s, w.n);
    if (mi < 0 || !ptx_op_allows_mod(PTX_OP_PRAGMA, (ptx_mod)mi))
        return perr(p, w.line, w.col, PT_EPARSE, "unsupported pragma %s (only \"nounroll\")",
                    tok_desc(&w, d, sizeof d));
    if ((rc = expect_punct(p, ';', "';' after the pragma")))
        return rc;
    ptx_ins ins;
    memset(&ins, 0, sizeof ins);
    ins.op = PTX_OP_PRAGMA;
    ins.nmods = 1;
    ins.mods[0] = (uint8_t)mi;
    ins.line = at->line;
    return finish_ins(p, at, &ins);
}

/* name: -- a label definition (forward references already made it). */
static int place_label(parser *p, const tok *t)
{
    char d[DESC];
    if (!is_ident(t, false))
        return perr(p, t->line, t->col, PT_EPARSE, "bad label name %s", tok_desc(t, d, sizeof d));
    int id = label_id(p, t);
    label_info *li = &p->linfo[id];
    if (li->placed)
        return perr(p, t->line, t->col, PT_EPARSE, "duplicate label %s (first defined at %d:%d)",
                    tok_desc(t, d, sizeof d), li->line, li->col);
    *li = (label_info){true, t->line, t->col};
    ptx_ins ins;
    memset(&ins, 0, sizeof ins);
    ins.op = PTX_OP_LABEL;
    ins.nopd = 1;
    ins.opd[0] = ptx_lbl(id);
    ins.line = t->line;
    return finish_ins(p, t, &ins);
}

/* Statements up to the entry's closing brace. Nested { } blocks without
 * declarations (nvcc's inline-asm wrappers) are flattened: only a counter,
 * no recursion. */
static int parse_body(parser *p)
{
    ptx_fn *f = p->f;
    char d[DESC];
    int rc;
    size_t depth = 0;
    for (;;) {
        tok t, at;
        const tok *pk;
        ptx_reg guard = {0};
        bool gneg = false;
        if ((rc = next(p, &t)))
            return rc;
        if (t.kind == T_EOF)
            return perr(p, t.line, t.col, PT_EPARSE, "unexpected end of file in entry '%s'",
                        f->name);
        if (is_punct(&t, '}') && depth == 0)
            break;
        if (is_punct(&t, '}') || is_punct(&t, '{')) {
            if (is_punct(&t, '{'))
                depth++;
            else
                depth--;
            continue;
        }
        if (depth && (is_word(&t, ".reg") || is_word(&t, ".shared")))
            return perr(p, t.line, t.col, PT_EPARSE,
                        "declarations inside nested { } blocks are not supported");
        if (is_word(&t, ".reg")) {
            if ((rc = parse_reg(p)))
                return rc;
            continue;
        }
        if (is_word(&t, ".shared")) {
            if ((rc = parse_shared(p, false)))
                return rc;
            continue;
        }
        if (is_word(&t, ".pragma")) {
            if ((rc = parse_pragma(p, &t)))
                return rc;
            continue;
        }
        if (is_directive(&t))
            return perr(p, t.line, t.col, PT_EPARSE, "unsupported directive %s in entry '%s'",
                        tok_desc(&t, d, sizeof d), f->name);
        at = t;
        if (is_punct(&t, '@')) {
            tok r;
            if ((rc = next(p, &r)))
                return rc;
            if (is_punct(&r, '!')) {
                gneg = true;
                if ((rc = next(p, &r)))
                    return rc;
            }
            if (r.kind != T_WORD || !find_reg(p, r.s, r.n, &guard)) {
                if (r.kind == T_WORD && !is_directive(&r))
                    return perr(p, r.line, r.col, PT_EPARSE, "undeclared register %s",
                                tok_desc(&r, d, sizeof d));
                return expected(p, &r, "a predicate register after '@'");
            }
            if ((rc = next(p, &t)))
                return rc;
            if (t.kind != T_WORD || is_directive(&t))
                return expected(p, &t, "an instruction after the guard");
        }
        if (t.kind != T_WORD)
            return expected(p, &t, "an instruction, label or directive");
        if ((rc = peek(p, &pk)))
            return rc;
        if (is_punct(pk, ':')) {
            if (guard.id)
                return perr(p, t.line, t.col, PT_EPARSE, "a label cannot be guarded");
            p->has_pk = false;
            rc = place_label(p, &t);
        } else
            rc = parse_ins(p, &t, &at, guard, gneg);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < f->nlabels; i++)
        if (!p->linfo[i].placed)
            return perr(p, p->linfo[i].line, p->linfo[i].col, PT_EPARSE,
                        "undefined label '%s' in entry '%s'", f->labels[i], f->name);
    return PT_OK;
}

/* .entry name ( params ) directives { body } -- after ".entry". */
static int parse_entry(parser *p)
{
    tok name, t;
    char d[DESC];
    int rc;
    bool got;
    if ((rc = next(p, &name)))
        return rc;
    if (!is_ident(&name, false))
        return expected(p, &name, "an entry name");
    if (sym_find(&p->msyms, name.s, name.n))
        return perr(p, name.line, name.col, PT_EPARSE, "duplicate module-scope name %s",
                    tok_desc(&name, d, sizeof d));
    const char *nm = sym_add(p, &p->msyms, name.s, name.n, S_ENTRY, (int)p->m->nfns);
    ptx_fn *f = p->f = ptx_fn_new(p->m, nm);
    p->fsyms = (symtab){0};
    p->labels = (symtab){0};
    p->tails = (symtab){0};
    p->linfo = NULL;
    p->cap_linfo = 0;
    if ((rc = accept(p, '(', &got)))
        return rc;
    if (got) {
        if ((rc = accept(p, ')', &got)))
            return rc;
        while (!got) {
            if ((rc = parse_param(p)) || (rc = next(p, &t)))
                return rc;
            got = is_punct(&t, ')');
            if (!got && !is_punct(&t, ','))
                return expected(p, &t, "',' or ')' after a parameter");
        }
    }
    for (;;) {
        int64_t v;
        if ((rc = next(p, &t)))
            return rc;
        if (is_word(&t, ".maxntid") || is_word(&t, ".reqntid")) {
            bool max = t.s[3] == 'x';
            if ((rc = parse_ntid(p, &t, max ? f->maxntid : f->reqntid)))
                return rc;
            if (f->maxntid[0] && f->reqntid[0])
                return perr(p, t.line, t.col, PT_EPARSE,
                            ".maxntid and .reqntid cannot both be given");
        } else if (is_word(&t, ".minnctapersm") || is_word(&t, ".maxnreg")) {
            int *dst = t.s[2] == 'i' ? &f->minnctapersm : &f->maxnreg;
            if (*dst)
                return perr(p, t.line, t.col, PT_EPARSE, "duplicate %s", tok_desc(&t, d, sizeof d));
            if ((rc = next_int(p, 1, MAX_NTID, tok_desc(&t, d, sizeof d), &v)))
                return rc;
            *dst = (int)v;
        } else if (is_word(&t, ".explicitcluster")) {
            if (f->explicitcluster)
                return perr(p, t.line, t.col, PT_EPARSE, "duplicate .explicitcluster");
            f->explicitcluster = true;
        } else if (is_word(&t, ".reqnctapercluster")) {
            if ((rc = parse_ntid(p, &t, f->reqnctapercluster)))
                return rc;
        } else if (is_word(&t, ".maxclusterrank")) {
            if (f->maxclusterrank)
                return perr(p, t.line, t.col, PT_EPARSE, "duplicate .maxclusterrank");
            if ((rc = next_int(p, 1, MAX_NTID, ".maxclusterrank", &v)))
                return rc;
            f->maxclusterrank = (int)v;
        } else if (is_punct(&t, '{')) {
            pt_err ce;
            pt_err_clear(&ce);
            if (ptx_fn_check_directives(f, &ce))
                return perr(p, t.line, t.col, ce.code, "%s", ce.msg);
            if (f->need_ver > p->m->version) {
                char a[8], b[8];
                return perr(p, t.line, t.col, PT_EUNSUPPORTED,
                            "cluster directives need PTX %s but the file declares .version %s",
                            pt_ptx_version_str(f->need_ver, a, sizeof a),
                            pt_ptx_version_str(p->m->version, b, sizeof b));
            }
            break;
        } else if (is_directive(&t))
            return perr(p, t.line, t.col, PT_EPARSE, "unsupported directive %s for entry '%s'",
                        tok_desc(&t, d, sizeof d), f->name);
        else
            return expected(p, &t, "'{' to open the body");
    }
    if ((rc = parse_body(p)))
        return rc;
    p->f = NULL;
    return PT_OK;
}

/* .version X.Y  .target sm_XX[a]  [.address_size 64] -- creates the module. */
static int parse_header(parser *p, int max_ptx)
{
    tok t, v, tg;
    char d[DESC], a[8], b[8], tn[16];
    int rc;
    if ((rc = next(p, &t)))
        return rc;
    if (!is_word(&t, ".version"))
        return expected(p, &t, "'.version'");
    if ((rc = next(p, &v)))
        return rc;
    if (v.kind != T_NUM || v.n < 3 || v.n > 4 || v.s[v.n - 2] != '.' ||
        !is_digit(v.s[v.n - 1]) || !is_digit(v.s[0]) || (v.n == 4 && !is_digit(v.s[1])))
        return v.kind == T_NUM ? perr(p, v.line, v.col, PT_EPARSE, "bad .version %s (want X.Y)",
                                      tok_desc(&v, d, sizeof d))
                               : expected(p, &v, "a version such as 7.0");
    int ver = (v.n == 4 ? (v.s[0] - '0') * 10 + v.s[1] - '0' : v.s[0] - '0') * 10 +
              v.s[v.n - 1] - '0';
    if ((rc = next(p, &t)))
        return rc;
    if (!is_word(&t, ".target"))
        return expected(p, &t, "'.target'");
    if ((rc = next(p, &tg)))
        return rc;
    if (tg.kind != T_WORD || is_directive(&tg))
        return expected(p, &tg, "a target such as sm_80");
    char name[32];
    size_t n = tg.n < sizeof name - 1 ? tg.n : sizeof name - 1;
    memcpy(name, tg.s, n);
    name[n] = '\0';
    pt_target target;
    pt_err te;
    pt_err_clear(&te);
    if (tg.n >= sizeof name || pt_target_parse(name, &target, &te))
        return perr(p, tg.line, tg.col, PT_EINVAL, "%s",
                    te.code ? te.msg : "unknown arch (name too long)");
    const tok *pk;
    if ((rc = peek(p, &pk)))
        return rc;
    if (is_punct(pk, ','))
        return perr(p, pk->line, pk->col, PT_EPARSE, ".target options are not supported");
    int minv = pt_target_min_ptx(&target);
    if (ver < minv)
        return perr(p, v.line, v.col, PT_EUNSUPPORTED,
                    ".version %s is below the minimum for %s (PTX %s)",
                    pt_ptx_version_str(ver, a, sizeof a), pt_target_name(&target, tn, sizeof tn),
                    pt_ptx_version_str(minv, b, sizeof b));
    if (max_ptx && ver > max_ptx)
        return perr(p, v.line, v.col, PT_EUNSUPPORTED,
                    ".version %s is above what the toolchain accepts (PTX %s)",
                    pt_ptx_version_str(ver, a, sizeof a), pt_ptx_version_str(max_ptx, b, sizeof b));
    if (is_word(pk, ".address_size")) {
        int64_t bits;
        p->has_pk = false;
        if ((rc = next(p, &t)) || (rc = int_tok(p, &t, 0, 1024, ".address_size", &bits)))
            return rc;
        if (bits == 32)
            return perr(p, t.line, t.col, PT_EUNSUPPORTED,
                        "32-bit addressing (.address_size 32) is not supported");
        if (bits != 64)
            return perr(p, t.line, t.col, PT_EPARSE, "expected .address_size 64, found %lld",
                        (long long)bits);
    }
    p->m = ptx_module_new(&target, max_ptx);
    if (!p->m)
        return pt_errf(p->e, PT_ENOMEM, "%s: out of memory", p->file);
    pt_arena_catch(p->m->arena, p->oom);
    p->m->version = ver;
    p->a = p->m->arena;
    return PT_OK;
}

static int parse_module(parser *p, int max_ptx)
{
    char d[DESC];
    int rc = parse_header(p, max_ptx);
    while (!rc) {
        tok t;
        if ((rc = next(p, &t)))
            break;
        if (t.kind == T_EOF)
            break;
        if (is_word(&t, ".visible")) {
            if ((rc = next(p, &t)))
                break;
            if (!is_word(&t, ".entry"))
                rc = is_directive(&t) ? perr(p, t.line, t.col, PT_EPARSE,
                                             "unsupported directive %s after .visible",
                                             tok_desc(&t, d, sizeof d))
                                      : expected(p, &t, "'.entry' after '.visible'");
            else
                rc = parse_entry(p);
        } else if (is_word(&t, ".entry"))
            rc = parse_entry(p);
        else if (is_word(&t, ".shared"))
            rc = parse_shared(p, false);
        else if (is_word(&t, ".extern")) {
            if ((rc = next(p, &t)))
                break;
            rc = is_word(&t, ".shared") ? parse_shared(p, true)
                                        : expected(p, &t, "'.shared' after '.extern'");
        } else if (is_directive(&t))
            rc = perr(p, t.line, t.col, PT_EPARSE, "unsupported module-scope directive %s",
                      tok_desc(&t, d, sizeof d));
        else
            rc = expected(p, &t, "'.entry', '.visible', '.shared' or '.extern'");
    }
    return rc;
}

/* parse_module with the module arena's recovery point here: out of
 * memory, the arena jumps back and the parse fails with PT_ENOMEM (*p, a
 * caller's object, keeps the module to free). */
static int parse_guarded(parser *p, int max_ptx)
{
    jmp_buf jb;
    if (setjmp(jb))
        return pt_errf(p->e, PT_ENOMEM, "%s: out of memory", p->file);
    p->oom = &jb;
    int rc = parse_module(p, max_ptx);
    if (p->m)
        pt_arena_catch(p->m->arena, NULL);
    return rc;
}

int ptx_parse(const char *text, size_t len, const char *filename, int max_ptx,
              ptx_module **out, pt_err *e)
{
    parser p;
    memset(&p, 0, sizeof p);
    *out = NULL;
    p.file = filename ? filename : "<input>";
    p.e = e;
    if (!text && len)
        return pt_errf(e, PT_EINVAL, "%s: no text", p.file);
    if (len > INT_MAX)
        return pt_errf(e, PT_ERANGE, "%s: text of %zu bytes is too large", p.file, len);
    p.cur = p.line_start = text ? text : "";
    p.end = p.cur + len;
    p.line = 1;
    int rc = parse_guarded(&p, max_ptx);
    if (rc) {
        if (e && !e->code) /* every path records a message; keep the contract anyway */
            pt_errf(e, rc, "%s: parse error", p.file);
        ptx_module_free(p.m);
        return rc;
    }
    *out = p.m;
    return PT_OK;
}
