/* Problems as text: one problem per line, for problem sets
 * (results/problems/NAME.txt) and the command line.
 *
 *   # a comment; blank lines are skipped
 *   gemm m=16 n=4096 k=4096 dtype=bf16 layout=tn name=q_proj
 *   elementwise expr="y = softmax(x, -1)" shape=x=16x4096 dtype=bf16 name='attn softmax'
 *
 * A line is an op name then key=value items separated by blanks. A value is
 * bare (no blank, quote or '#'), "double-quoted" (\" and \\ escapes) or
 * 'single-quoted' (taken literally). The keys of each op, their types,
 * defaults and which are required are the op's schema (pt_op.schema,
 * gen/op.h; 'ptxtune ops' lists them); name is a label for every op, not
 * part of the problem's identity.
 *
 * Every problem gets a canonical key (op and every key of the schema in
 * table order, set keys at their default left out, expressions in
 * ex_canon's spelling and shape lists sorted by name, so two spellings of
 * one problem share a key and emit one kernel), a class (the key without
 * sizes) and its dims (the sizes, comma separated): the store's identity
 * and nearest-bucket lookup use them. */
#ifndef PT_SEARCH_PROBLEM_H
#define PT_SEARCH_PROBLEM_H

#include "gen/op.h"

typedef struct search_problem {
    pt_problem prob;
    const char *name;              /* "" when none */
    const char *key, *klass, *dims;
    int line;                      /* 1-based line in its file; 0: command line */
} search_problem;

typedef struct search_problem_set {
    pt_arena *arena;
    int n;
    search_problem *v;
} search_problem_set;

/* Parses a whole problem file; errors read "file:line: message". Ops must
 * be registered (pt_op_find). An empty set is an error. */
int search_problems_parse(const char *text, const char *filename, search_problem_set *out,
                          pt_err *e);
/* A problem file read one line at a time: memory is one line (at most
 * 1 MiB) and the strings of at most 256 problems (one arena, reused every
 * 256 lines), whatever the file's length. A NUL byte, an
 * unreadable file or a directory is an error naming the file. */
typedef struct search_problem_reader search_problem_reader;
/* path "-": stdin. */
int search_problem_reader_open(const char *path, search_problem_reader **out, pt_err *e);
/* Over len bytes of buf (which need not be NUL-terminated); name is for
 * messages. buf must outlive the reader. */
int search_problem_reader_mem(const char *buf, size_t len, const char *name,
                              search_problem_reader **out, pt_err *e);
/* The next problem into *out, valid until the next call: *got false at the
 * end. Errors read "file:line: message"; a file without any problem is an
 * error at its end. */
int search_problem_next(search_problem_reader *r, search_problem *out, bool *got, pt_err *e);
void search_problem_reader_close(search_problem_reader *r);

/* One problem: op and the items of one line (without the op). */
int search_problem_parse(pt_arena *a, const char *op, const char *items, search_problem *out,
                         pt_err *e);
/* The same for the command line's items (ptxtune run/emit/variants, where
 * flags become items too): required keys and zero dimensions are left to
 * the op's prepare, which names them. */
int search_problem_parse_partial(pt_arena *a, const char *op, const char *items,
                                 search_problem *out, pt_err *e);
/* Fills key, klass and dims from prob (after building one in code). */
void search_problem_canon(pt_arena *a, search_problem *p);
void search_problems_free(search_problem_set *s);
/* A stored key (an older build's spelling) made canonical: key, class and
 * dims appended to the buffers. PT_OK, or an error (an op this build does
 * not know, a key that does not parse) and the key stays as it is. The
 * store's migration calls it through db_rekey_fn (ctx unused). */
int search_problem_rekey(void *ctx, const char *key, pt_buf *nkey, pt_buf *klass, pt_buf *dims);

#endif
