/* Out of memory (issue 10, the one policy of ptx/base.h): an emission whose
 * arena runs out returns PT_ENOMEM with a message, at every point of the
 * emission, and the same emission with room gives the same kernel; a text
 * buffer that fails drops its text and hands back NULL. Allocation failures
 * are injected with pt_arena_limit. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gen/elementwise.h"
#include "gen/gemm.h"
#include "ptx/base.h"
#include "ptx/ir.h"

/* Emits op's default kernel for p under every arena cap from nothing up to
 * what it needs (a cap at each of `steps` points, plus the exact need and
 * one byte less): below the need PT_ENOMEM, at it the reference text. */
static void sweep(const pt_problem *p, int steps)
{
    pt_target t;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_80", &t, &e), 0, "%s", e.msg);
    const pt_op *op = pt_op_find(p->op);
    cr_assert(op);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(op->prepare(a, p, &t, &pp, &e), 0, "%s", e.msg);
    pt_config c;
    op->defaults(pp, &t, &c);
    /* the reference: no cap */
    ptx_module *m = ptx_module_new(&t, 0);
    cr_assert(m);
    size_t base = pt_arena_size(m->arena);
    pt_launch l;
    cr_assert_eq(pt_op_emit(op, pp, &c, m, &l, &e), 0, "%s", e.msg);
    size_t need = pt_arena_size(m->arena) - base;
    char *want = ptx_print(m);
    cr_assert(want);
    ptx_module_free(m);
    cr_assert_gt(need, 1000u, "an emission allocates (%zu bytes)", need);
    int nomem = 0, ok = 0;
    for (int i = 0; i <= steps + 1; i++) {
        size_t cap = i < steps ? need / (size_t)steps * (size_t)i + (size_t)i * 7 % 16
                   : i == steps ? need - 1 : need;
        m = ptx_module_new(&t, 0);
        cr_assert(m);
        pt_arena_limit(m->arena, pt_arena_size(m->arena) + cap);
        pt_err me = {0};
        int rc = pt_op_emit(op, pp, &c, m, &l, &me);
        if (cap < need) {
            cr_expect_eq(rc, PT_ENOMEM, "cap %zu of %zu: rc %d (%s)", cap, need, rc, me.msg);
            cr_expect(strstr(me.msg, "out of memory"), "cap %zu: '%s'", cap, me.msg);
            nomem += rc == PT_ENOMEM;
        } else {
            cr_expect_eq(rc, PT_OK, "cap %zu = need: %s", cap, me.msg);
            char *got = ptx_print(m);
            cr_expect(got && strcmp(got, want) == 0, "the kernel with room differs");
            free(got);
            ok += rc == PT_OK;
        }
        ptx_module_free(m);
    }
    cr_expect_eq(nomem, steps + 1);
    cr_expect_eq(ok, 1);
    free(want);
    pt_arena_free(a);
}

Test(oom, gemm_emission_fails_cleanly_at_every_point)
{
    pt_problem p = PT_GEMM(64, 64, 64, "tn", PT_BF16, PT_F64);
    p.epilogue = "gelu(acc + bias[n])";
    sweep(&p, 97);
}

Test(oom, softmax_emission_fails_cleanly_at_every_point)
{
    pt_problem p = PT_EW("y = softmax(x * 0.125, -1)", "x=64x1024", PT_BF16, PT_BF16);
    sweep(&p, 61);
}

Test(oom, pt_op_build_reports_enomem_not_abort)
{
    /* the arena of a module made by pt_op_build is not reachable before the
     * emission, so the cap goes on a module of the caller (pt_op_emit);
     * pt_op_build's own path is the same function: check it succeeds and
     * leaves no recovery point behind (a later failure must abort, not
     * jump into a dead frame: pt_arena_catch returns what is set) */
    pt_target t;
    pt_err e = {0};
    pt_target_parse("sm_80", &t, &e);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    pt_problem p = PT_EW("y = x * 2", "x=256", PT_F32, PT_F32);
    cr_assert_eq(gen_elementwise_op.prepare(a, &p, &t, &pp, &e), 0, "%s", e.msg);
    pt_config c;
    gen_elementwise_op.defaults(pp, &t, &c);
    ptx_module *m;
    pt_launch l;
    cr_assert_eq(pt_op_build(&gen_elementwise_op, pp, &t, 0, &c, &m, &l, &e), 0, "%s", e.msg);
    cr_expect_null(pt_arena_catch(m->arena, NULL), "pt_op_build left a recovery point set");
    ptx_module_free(m);
    pt_arena_free(a);
}

Test(oom, failed_text_buffer_drops_writes_and_takes_null)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_buf_puts(&b, "kept until the failure");
    cr_assert(pt_buf_room(&b, 16));
    /* a reservation no allocator can meet fails the buffer for good */
    cr_expect_not(pt_buf_room(&b, SIZE_MAX / 2));
    cr_expect(b.failed);
    cr_expect_null(b.s, "the text is freed");
    pt_buf_puts(&b, "dropped");
    pt_buf_printf(&b, "%d", 42);
    cr_expect_eq(b.len, 0u);
    cr_expect_null(pt_buf_take(&b), "a failed buffer hands back NULL");
    /* take resets it: the buffer is usable again */
    pt_buf_puts(&b, "ok");
    char *s = pt_buf_take(&b);
    cr_expect_str_eq(s, "ok");
    free(s);
}
