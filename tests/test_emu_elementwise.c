/* Every elementwise variant, run on the CPU emulator against the float64
 * reference: random inputs (never zeros), outputs poisoned first, every
 * detector on, within the dtype tolerance (tuner/emu_check.h). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tuner/emu_check.h"

/* Small shapes that still exercise tails: rows not a multiple of the rows
 * per block, rows longer than one warp's chunk, broadcast operands. */
static const pt_problem cases[] = {
    PT_EW("y = softmax(x * 0.125, -1)", "x=5x256", PT_BF16, PT_BF16),
    PT_EW("y = log_softmax(x, -1)", "x=3x96", PT_F32, PT_F32),
    PT_EW("y = layernorm(x + r, -1) * g + b", "x=3x192,r=3x192,g=192,b=192", PT_F16, PT_F16),
    PT_EW("y = x * rsqrt(mean(x*x, -1) + 1e-6) * g", "x=4x128,g=128", PT_F32, PT_F32),
    PT_EW("y = gelu(x * w + b)", "x=7x40,w=40,b=40", PT_BF16, PT_BF16),
    PT_EW("h = x + r; y = rmsnorm(h, -1) * g", "x=3x64,r=3x64,g=64", PT_BF16, PT_BF16),
    PT_EW("y = silu(x) * u + where(b > 0, b, 0.5 * b)", "x=2x3x24,u=2x3x24,b=3x1", PT_F32, PT_F32),
    PT_EW("y = exp(x) * s", "x=3x5x7,s=1", PT_F32, PT_F32),
    PT_EW("m = max(x, -1); s = sum(x, -1); y = gelu_erf(x) - m", "x=5x80", PT_F32, PT_F32),
    PT_EW("y = tanh(x) + sigmoid(x) + relu(x) + abs(x) + sqrt(abs(x)) + log(abs(x)) + exp2(x)",
          "x=300", PT_F32, PT_F32),
    PT_EW("y = cast(x * 3, bf16) + min(x, 0.5) / max(x, -0.5) + (x >= 0.25)", "x=9x33", PT_F32, PT_F32),
};
enum { NCASES = sizeof cases / sizeof cases[0] };

typedef struct job {
    int first, step;
    int ran, failed;
    double worst;
    char msg[1400];
} job;

static void run_case(job *j, const pt_problem *p, const char *arch, int *k)
{
    pt_target t;
    pt_err e = {0};
    pt_target_parse(arch, &t, &e);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    if (gen_elementwise_op.prepare(a, p, &t, &pp, &e)) {
        if (!j->failed++)
            snprintf(j->msg, sizeof j->msg, "%s: %s", p->expr, e.msg);
        pt_arena_free(a);
        return;
    }
    pt_space s;
    gen_elementwise_op.space(pp, &t, &s);
    for (int64_t i = 0; i < pt_space_size(&s); i++) {
        pt_config c;
        pt_space_config(&s, i, &c);
        pt_err ce = {0};
        if (gen_elementwise_op.check(pp, &t, &c, &ce))
            continue;
        if ((*k)++ % j->step != j->first)
            continue;
        pt_check_opts o = {.seed = 0x5eed + (uint64_t)i};
        pt_check_result r;
        int rc = pt_check_emu(&gen_elementwise_op, pp, &t, &c, &o, &r, &ce);
        j->ran++;
        if (r.max_err > j->worst)
            j->worst = r.max_err;
        if (rc && !j->failed++) {
            char cs[256];
            snprintf(j->msg, sizeof j->msg, "%s %s [%s]: %s", p->expr, arch,
                     pt_config_str(&c, cs, sizeof cs), ce.msg);
        }
    }
    pt_arena_free(a);
}

static void *run_job(void *arg)
{
    job *j = arg;
    int k = 0;
    for (int ci = 0; ci < NCASES; ci++)
        run_case(j, &cases[ci], "sm_80", &k);
    /* fp8 outputs (sm_89) */
    static const pt_problem fp8[] = {
        PT_EW("y = silu(x)", "x=4x64", PT_BF16, PT_E4M3),
        PT_EW("y = softmax(x, -1) * 8", "x=3x64", PT_F16, PT_E5M2),
    };
    for (int ci = 0; ci < 2; ci++)
        run_case(j, &fp8[ci], "sm_89", &k);
    return NULL;
}

Test(emu_elementwise, every_variant_matches_the_reference, .timeout = 900)
{
    enum { NTHREADS = 2 };
    job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].first = i;
        jobs[i].step = NTHREADS;
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    int ran = 0, failed = 0;
    double worst = 0;
    const char *msg = "";
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        ran += jobs[i].ran;
        failed += jobs[i].failed;
        if (jobs[i].worst > worst)
            worst = jobs[i].worst;
        if (jobs[i].msg[0] && !msg[0])
            msg = jobs[i].msg;
    }
    printf("emu_elementwise: %d variants of %d problems ran on the emulator against the float64 "
           "reference: %d failed, worst relative error %.3g\n",
           ran, NCASES + 2, failed, worst);
    cr_assert(ran > 1000, "only %d variants", ran);
    cr_assert(failed == 0, "%d failed; first: %s", failed, msg);
}

/* The checker itself must be able to fail: a kernel emitted for
 * y = x * 2.0001 checked against the reference of y = x * 2 (relative error
 * 5e-5 > 1e-5) is caught, and the right kernel passes. */
static const pt_prepared *other_pp; /* test-local: the kernel actually emitted */

static int wrong_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l,
                      pt_err *e)
{
    (void)pp;
    return gen_elementwise_op.emit(other_pp, c, m, l, e);
}

Test(emu_elementwise, a_wrong_kernel_is_caught)
{
    pt_target t = {80, false, false};
    pt_arena *a = pt_arena_new();
    pt_prepared *good, *other;
    pt_err e = {0};
    pt_problem p1 = PT_EW("y = x * 2", "x=4x32", PT_F32, PT_F32);
    pt_problem p2 = PT_EW("y = x * 2.0001", "x=4x32", PT_F32, PT_F32);
    cr_assert_eq(gen_elementwise_op.prepare(a, &p1, &t, &good, &e), 0, "%s", e.msg);
    cr_assert_eq(gen_elementwise_op.prepare(a, &p2, &t, &other, &e), 0, "%s", e.msg);
    pt_config c;
    gen_elementwise_op.defaults(good, &t, &c);
    pt_check_opts o = {.seed = 7};
    pt_check_result r;
    cr_assert_eq(pt_check_emu(&gen_elementwise_op, good, &t, &c, &o, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.checked, 128);
    cr_expect_lt(r.max_err, 1e-6);
    other_pp = other;
    pt_op wrong = gen_elementwise_op;
    wrong.emit = wrong_emit;
    cr_expect_eq(pt_check_emu(&wrong, good, &t, &c, &o, &r, &e), PT_ERANGE);
    cr_expect(strstr(e.msg, "over tolerance"), "%s", e.msg);
    cr_expect_gt(r.max_err, 4e-5);
    pt_arena_free(a);
}
