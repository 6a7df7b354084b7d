/* libFuzzer entry point for the PTX parser (built by scripts/fuzz.sh, not by
 * meson). Properties checked on every input:
 *  - a rejected input leaves no module and a "f.ptx:line:col: " message;
 *  - an accepted one prints, the print parses again, and the second print
 *    is byte-identical to the first (print(parse(print(parse(x)))) is a
 *    fixed point).
 * Sanitizers (address, undefined) catch over-reads: the input buffer has
 * exactly size bytes and no terminator. */
#include "ptx/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* "f.ptx:<digits>:<digits>: " */
static int located(const char *msg)
{
    const char *s = msg;
    if (strncmp(s, "f.ptx:", 6) != 0)
        return 0;
    s += 6;
    for (int part = 0; part < 2; part++) {
        if (*s < '1' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
        if (*s++ != ':')
            return 0;
    }
    return *s == ' ';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ptx_module *m = NULL, *m2 = NULL;
    pt_err e;
    pt_err_clear(&e);
    if (ptx_parse((const char *)data, size, "f.ptx", 90, &m, &e) != PT_OK) {
        if (m || e.code == PT_OK || !located(e.msg)) {
            fprintf(stderr, "bad failure: code %d msg '%s'\n", e.code, e.msg);
            abort();
        }
        return 0;
    }
    char *t1 = ptx_print(m);
    pt_err_clear(&e);
    if (ptx_parse(t1, strlen(t1), "f.ptx", 90, &m2, &e) != PT_OK) {
        fprintf(stderr, "printed text does not parse: %s\n----\n%s----\n", e.msg, t1);
        abort();
    }
    char *t2 = ptx_print(m2);
    if (strcmp(t1, t2) != 0) {
        fprintf(stderr, "print is not a fixed point\n----\n%s----\n%s----\n", t1, t2);
        abort();
    }
    free(t1);
    free(t2);
    ptx_module_free(m);
    ptx_module_free(m2);
    return 0;
}
