/* libFuzzer entry point for the problem-file parser (search/problem.c),
 * built by scripts/fuzz.sh. The input is a whole file, read through the
 * streaming reader. Properties checked on every input:
 *  - a rejected file gives an error code and a "f.txt..." message;
 *  - every accepted problem has a canonical key that parses back to a
 *    problem with the same key, class and dims (the store's identity is
 *    stable across spellings). */
#include "search/problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const search_problem *p)
{
    const char *sp = strchr(p->key, ' ');
    char op[64];
    size_t n = sp ? (size_t)(sp - p->key) : strlen(p->key);
    if (n >= sizeof op)
        abort();
    memcpy(op, p->key, n);
    op[n] = '\0';
    pt_arena *a = pt_arena_new();
    search_problem q;
    pt_err e = {0};
    if (search_problem_parse(a, op, sp ? sp : "", &q, &e) != PT_OK) {
        fprintf(stderr, "canonical key '%s' does not parse: %s\n", p->key, e.msg);
        abort();
    }
    if (strcmp(q.key, p->key) || strcmp(q.klass, p->klass) || strcmp(q.dims, p->dims)) {
        fprintf(stderr, "key '%s' parses to '%s' (class '%s' / '%s', dims '%s' / '%s')\n", p->key,
                q.key, p->klass, q.klass, p->dims, q.dims);
        abort();
    }
    pt_arena_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    search_problem_reader *r;
    pt_err e = {0};
    if (search_problem_reader_mem((const char *)data, size, "f.txt", &r, &e) != PT_OK)
        abort();
    for (;;) {
        search_problem p;
        bool got;
        pt_err_clear(&e);
        int rc = search_problem_next(r, &p, &got, &e);
        if (rc) {
            if (e.code == PT_OK || strncmp(e.msg, "f.txt", 5) != 0 || strchr(e.msg, '\n')) {
                fprintf(stderr, "bad failure: code %d msg '%s'\n", e.code, e.msg);
                abort();
            }
            break;
        }
        if (!got)
            break;
        roundtrip(&p);
    }
    search_problem_reader_close(r);
    return 0;
}
