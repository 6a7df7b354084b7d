/* Crash isolation. The acceptance run: 1,000 candidates on the mock device
 * with 60 planted bad ones (20 sticky faults, 10 hangs, 10 out-of-resources,
 * 10 wrong answers, 10 writes past the output) completes; every good one is
 * verified and measured; every bad one ends in its planted class; hangs die
 * within deadline + 1 s; no fault is charged to the candidate after it. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tuner/sweep.h"

enum { N = 1000, DEADLINE_MS = 200 };

typedef enum plant { P_GOOD, P_FAULT, P_HANG, P_OOR, P_WRONG, P_PAST, P_CRASH } plant;
static const char *const directive[] = {"// mock:\n", "// mock: fault\n", "// mock: hang\n",
                                        "// mock: oor\n", "// mock: wrong\n", "// mock: past\n",
                                        "// mock: crash\n"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct plan {
    pt_arena *a;
    pt_prepared *pp;
    ptx_module *m;
    pt_launch l;
    char *text[7];
    plant kind[N];
    tuner_candidate c[N];
} plan;

/* The real kernel of y = x * 2 + 1, prefixed with each directive. */
static void plan_init(plan *p)
{
    pt_problem pb = PT_EW("y = x * 2 + 1", "x=16x64", PT_F32, PT_F32);
    pt_target t = {80, false, false};
    pt_err e = {0};
    p->a = pt_arena_new();
    cr_assert_eq(gen_elementwise_op.prepare(p->a, &pb, &t, &p->pp, &e), PT_OK, "%s", e.msg);
    pt_config cfg;
    gen_elementwise_op.defaults(p->pp, &t, &cfg);
    cr_assert_eq(pt_op_build(&gen_elementwise_op, p->pp, &t, 0, &cfg, &p->m, &p->l, &e), PT_OK);
    char *body = ptx_print(p->m);
    for (int k = 0; k < 7; k++) {
        p->text[k] = malloc(strlen(body) + 64);
        sprintf(p->text[k], "%s%s", directive[k], body);
    }
    free(body);
}

static void plan_free(plan *p)
{
    for (int k = 0; k < 7; k++)
        free(p->text[k]);
    ptx_module_free(p->m);
    pt_arena_free(p->a);
}

static void plan_fill(plan *p, int n)
{
    for (int i = 0; i < n; i++)
        p->c[i] = (tuner_candidate){&gen_elementwise_op, p->pp, {0}, p->text[p->kind[i]], &p->l};
}

static tuner_sweep_opts mock_opts(void)
{
    tuner_sweep_opts o = {0};
    o.backend = "mock";
    o.eval.target = (pt_target){80, false, false};
    o.eval.check = true;
    o.eval.bench = true;
    o.pool.deadline_s = DEADLINE_MS * 1e-3;
    o.pool.start_deadline_s = 30;
    return o;
}

Test(tuner_pool, thousand_candidates_sixty_planted, .timeout = 300)
{
    static plan p; /* large: keep it off the stack */
    plan_init(&p);
    /* plant 60 bad candidates: two faults in a row then a hang (at 500-502,
     * a good one after them), the rest at seeded random places */
    static const struct {
        plant k;
        int n;
    } quota[] = {{P_FAULT, 18}, {P_HANG, 9}, {P_OOR, 10}, {P_WRONG, 10}, {P_PAST, 10}};
    p.kind[500] = p.kind[501] = P_FAULT;
    p.kind[502] = P_HANG;
    uint64_t s = 12345;
    for (size_t q = 0; q < sizeof quota / sizeof quota[0]; q++)
        for (int j = 0; j < quota[q].n;) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int i = (int)((s >> 33) % N);
            if (p.kind[i] == P_GOOD && (i < 500 || i > 503)) {
                p.kind[i] = quota[q].k;
                j++;
            }
        }
    int planted[7] = {0};
    for (int i = 0; i < N; i++)
        planted[p.kind[i]]++;
    cr_assert(planted[P_FAULT] == 20 && planted[P_HANG] == 10 && planted[P_OOR] == 10 &&
              planted[P_WRONG] == 10 && planted[P_PAST] == 10 && planted[P_GOOD] == 940);
    plan_fill(&p, N);
    tuner_sweep_opts o = mock_opts();
    static tuner_result r[N];
    tuner_sweep_stats st;
    pt_err e = {0};
    double t0 = now_s();
    cr_assert_eq(tuner_sweep(p.c, N, &o, r, &st, &e), PT_OK, "%s", e.msg);
    double wall = now_s() - t0;

    int restarts_expected = 1;
    for (int i = 0; i < N; i++) {
        const tuner_result *x = &r[i];
        switch (p.kind[i]) {
        case P_GOOD:
            cr_assert_eq(x->cls, TUNER_OK, "good candidate %d: %s in %s: %s", i,
                         tuner_outcome_name(x->cls), x->phase, x->msg);
            cr_assert(x->verified && x->verify.checked == 16 * 64, "candidate %d not verified", i);
            cr_assert(x->benched && x->bench.st.n >= 10 && x->bench.st.median > 0,
                      "candidate %d not measured", i);
            cr_assert_str_eq(x->bench.protocol, TUNER_BENCH_PROTOCOL);
            break;
        case P_FAULT:
            cr_assert_eq(x->cls, TUNER_FAULT, "fault %d: %s (%s)", i, tuner_outcome_name(x->cls), x->msg);
            cr_assert(strstr(x->msg, "ILLEGAL_ADDRESS"), "%d: %s", i, x->msg);
            break;
        case P_HANG:
            cr_assert_eq(x->cls, TUNER_TIMEOUT, "hang %d: %s (%s)", i, tuner_outcome_name(x->cls), x->msg);
            cr_assert_str_eq(x->phase, "verify");
            cr_assert(x->total_ms <= DEADLINE_MS + 1000, "hang %d killed after %.0f ms", i, x->total_ms);
            break;
        case P_OOR:
            cr_assert_eq(x->cls, TUNER_RESOURCE_LIMIT, "oor %d: %s (%s)", i, tuner_outcome_name(x->cls), x->msg);
            break;
        case P_WRONG:
            cr_assert_eq(x->cls, TUNER_WRONG_ANSWER, "wrong %d: %s", i, tuner_outcome_name(x->cls));
            cr_assert_str_eq(x->verify.what, "values");
            break;
        case P_PAST:
            cr_assert_eq(x->cls, TUNER_WRONG_ANSWER, "past %d: %s", i, tuner_outcome_name(x->cls));
            cr_assert_str_eq(x->verify.what, "guard");
            break;
        default: break;
        }
        /* a fault or a hang ends its worker; the next candidate gets a fresh one */
        if ((p.kind[i] == P_FAULT || p.kind[i] == P_HANG) && i + 1 < N)
            restarts_expected++;
        if (p.kind[i] == P_FAULT && i + 1 < N && p.kind[i + 1] == P_GOOD)
            cr_assert_eq(r[i + 1].cls, TUNER_OK, "candidate %d after fault %d blamed: %s", i + 1, i,
                         r[i + 1].msg);
    }
    cr_expect_eq(st.count[TUNER_OK], planted[P_GOOD]);
    cr_expect_eq(st.count[TUNER_FAULT], planted[P_FAULT]);
    cr_expect_eq(st.count[TUNER_TIMEOUT], planted[P_HANG]);
    cr_expect_eq(st.count[TUNER_RESOURCE_LIMIT], planted[P_OOR]);
    cr_expect_eq(st.count[TUNER_WRONG_ANSWER], planted[P_WRONG] + planted[P_PAST]);
    cr_expect_eq(st.workers, restarts_expected, "workers %d, expected %d", st.workers, restarts_expected);
    cr_expect(st.max_kill_s <= DEADLINE_MS * 1e-3 + 1.0, "slowest kill %.3f s", st.max_kill_s);
    cr_expect_str_eq(st.dev.name, "mock device");
    fprintf(stderr,
            "tuner_pool: %d candidates (%d good, %d fault, %d hang, %d oor, %d wrong, %d past) "
            "in %.2f s wall; %d workers; slowest hang kill %.3f s (deadline %.3f s)\n",
            N, planted[P_GOOD], planted[P_FAULT], planted[P_HANG], planted[P_OOR],
            planted[P_WRONG], planted[P_PAST], wall, st.workers, st.max_kill_s, DEADLINE_MS * 1e-3);
    plan_free(&p);
}

Test(tuner_pool, worker_death_is_a_fault)
{
    static plan p;
    plan_init(&p);
    p.kind[1] = P_CRASH;
    plan_fill(&p, 3);
    tuner_sweep_opts o = mock_opts();
    tuner_result r[3];
    tuner_sweep_stats st;
    pt_err e = {0};
    cr_assert_eq(tuner_sweep(p.c, 3, &o, r, &st, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r[0].cls, TUNER_OK);
    cr_expect_eq(r[1].cls, TUNER_FAULT);
    cr_expect(strstr(r[1].msg, "worker died in phase 'verify' (signal 9)"), "%s", r[1].msg);
    cr_expect_eq(r[2].cls, TUNER_OK, "%s", r[2].msg);
    cr_expect_eq(st.workers, 2);
    plan_free(&p);
}

Test(tuner_pool, missing_driver_is_the_error)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        cr_skip_test("a CUDA driver is installed here");
    }
    static plan p;
    plan_init(&p);
    plan_fill(&p, 2);
    tuner_sweep_opts o = mock_opts();
    o.backend = "cuda";
    tuner_result r[2];
    tuner_sweep_stats st;
    pt_err e = {0};
    cr_expect_eq(tuner_sweep(p.c, 2, &o, r, &st, &e), PT_ENODRIVER);
    cr_expect_str_eq(e.msg, "no CUDA driver found (libcuda.so.1)");
    tuner_devinfo di[4];
    int n;
    pt_err_clear(&e);
    cr_expect_eq(tuner_cuda_list_isolated(di, 4, &n, &e), PT_ENODRIVER);
    cr_expect_str_eq(e.msg, "no CUDA driver found (libcuda.so.1)");
    plan_free(&p);
}

/* ---- the pool itself: per-phase deadlines ---- */

static int t_init(void *ctx, void **state, pt_buf *hello, pt_err *e)
{
    (void)ctx;
    (void)e;
    *state = NULL;
    pt_buf_puts(hello, "hi");
    return PT_OK;
}

/* req: "sleep MS" (one phase) or "steps K MS" (K phases of MS each) */
static void t_job(void *state, const void *req, size_t len, pt_buf *reply, bool *last,
                  tuner_progress_fn progress, void *pctx)
{
    (void)state;
    (void)len;
    int k = 1, ms = 0;
    if (sscanf(req, "steps %d %d", &k, &ms) != 2)
        sscanf(req, "sleep %d", &ms);
    for (int i = 0; i < k; i++) {
        progress(pctx, "step");
        usleep((useconds_t)ms * 1000);
    }
    pt_buf_puts(reply, "done");
    *last = false;
}

Test(tuner_pool, deadline_is_per_phase)
{
    tuner_worker_fns fns = {t_init, t_job, NULL};
    tuner_pool_opts po = {.deadline_s = 0.2};
    tuner_pool *p;
    pt_err e = {0};
    cr_assert_eq(tuner_pool_new(&fns, NULL, &po, &p, &e), PT_OK);
    pt_buf reply;
    pt_buf_init(&reply);
    tuner_job_info info;
    /* 6 phases of 100 ms: 600 ms in all, never 200 ms in one phase */
    cr_assert_eq(tuner_pool_run(p, "steps 6 100", 12, &reply, &info, &e), PT_OK);
    cr_expect_eq(info.status, TUNER_JOB_DONE);
    cr_expect(reply.len == 4 && memcmp(reply.s, "done", 4) == 0);
    /* one phase of 2 s: killed near 200 ms */
    double t0 = now_s();
    cr_assert_eq(tuner_pool_run(p, "sleep 2000", 11, &reply, &info, &e), PT_OK);
    double took = now_s() - t0;
    cr_expect_eq(info.status, TUNER_JOB_TIMEOUT);
    cr_expect_str_eq(info.phase, "step");
    cr_expect(info.kill_s >= 0.2 && info.kill_s < 1.2, "kill after %.3f s", info.kill_s);
    cr_expect(took < 1.2, "took %.3f s", took);
    /* the pool goes on with a fresh worker */
    cr_assert_eq(tuner_pool_run(p, "sleep 1", 8, &reply, &info, &e), PT_OK);
    cr_expect_eq(info.status, TUNER_JOB_DONE);
    cr_expect_eq(tuner_pool_starts(p), 2);
    size_t hl;
    const char *h = tuner_pool_hello(p, &hl);
    cr_expect(hl == 2 && memcmp(h, "hi", 2) == 0);
    pt_buf_free(&reply);
    tuner_pool_free(p);
}
