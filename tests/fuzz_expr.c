/* libFuzzer entry point for the expression language (gen/expr.c) and what
 * consumes it, built by scripts/fuzz.sh. The input is up to three lines:
 *
 *   EXPR            e.g. y = softmax(x * w, -1)
 *   SHAPES          e.g. x=16x4096,w=4096   (absent: the expression only)
 *   CONFIG          e.g. vec=4,unroll=2      (absent: the op's default)
 *
 * As the command line does, the text ends at a NUL byte. Properties: a
 * rejected input gives an error code and a one-line message; an accepted
 * elementwise problem emits a module that prints and parses back (the
 * builder never accepts what its own parser refuses); the expression, as
 * a GEMM epilogue, prepares or is refused the same way. UBSan catches
 * overflowing size arithmetic (dims of 2^31, 2^40, ...). */
#include "gen/elementwise.h"
#include "gen/gemm.h"
#include "ptx/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void expect_failure(const char *what, const pt_err *e)
{
    if (e->code == PT_OK || !e->msg[0] || strchr(e->msg, '\n')) {
        fprintf(stderr, "%s: bad failure: code %d msg '%s'\n", what, e->code, e->msg);
        abort();
    }
}

static void emit(const pt_op *op, const pt_problem *p, const char *config)
{
    pt_target t = {0};
    pt_err e = {0};
    if (pt_target_parse("sm_80", &t, &e))
        abort();
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    if (op->prepare(a, p, &t, &pp, &e) != PT_OK) {
        expect_failure(op->name, &e);
        pt_arena_free(a);
        return;
    }
    pt_config cfg;
    pt_space s;
    op->space(pp, &t, &s);
    op->defaults(pp, &t, &cfg);
    if (config && pt_config_parse(&s, config, &cfg, &e) != PT_OK) {
        expect_failure("config", &e);
        pt_arena_free(a);
        return;
    }
    ptx_module *m = NULL;
    pt_launch l;
    if (pt_op_build(op, pp, &t, 0, &cfg, &m, &l, &e) != PT_OK) {
        expect_failure("build", &e);
        pt_arena_free(a);
        return;
    }
    char *text = ptx_print(m);
    ptx_module *m2 = NULL;
    pt_err pe = {0};
    if (ptx_parse(text, strlen(text), "k.ptx", 90, &m2, &pe) != PT_OK) {
        fprintf(stderr, "emitted PTX does not parse: %s\n----\n%s----\n", pe.msg, text);
        abort();
    }
    ptx_module_free(m2);
    free(text);
    ptx_module_free(m);
    pt_arena_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char *lines[3] = {s, NULL, NULL};
    for (int i = 0; i < 2 && lines[i]; i++) {
        char *nl = strchr(lines[i], '\n');
        if (nl) {
            *nl = '\0';
            lines[i + 1] = nl + 1;
        }
    }
    pt_arena *a = pt_arena_new();
    ex_prog *prog;
    pt_err e = {0};
    if (ex_parse_indexed(a, lines[0], &prog, &e) != PT_OK)
        expect_failure("expression", &e);
    pt_arena_free(a);
    if (lines[1]) {
        pt_problem p = PT_EW(lines[0], lines[1], PT_F32, PT_F32);
        emit(&gen_elementwise_op, &p, lines[2]);
    } else {
        pt_problem g = {.op = "gemm", .m = 32, .n = 48, .k = 64, .batch = 1, .layout = "nn",
                        .dtype = PT_F16, .out_dtype = PT_F32, .epilogue = lines[0], .alpha = 1};
        pt_target t;
        pt_err te = {0};
        if (pt_target_parse("sm_80", &t, &te))
            abort();
        pt_arena *ga = pt_arena_new();
        pt_prepared *pp;
        pt_err ge = {0};
        if (gen_gemm_op.prepare(ga, &g, &t, &pp, &ge) != PT_OK)
            expect_failure("gemm epilogue", &ge);
        pt_arena_free(ga);
    }
    free(s);
    return 0;
}
