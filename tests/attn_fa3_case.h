/* The fa3 prefill (impl=2) tests' cases on the emulator: a problem of
 * the grid (fcase; f8case with e4m3 descales), its description, its fa3
 * config (the defaults, the case's config over them), and one run: emit ->
 * print -> parse -> print back identically -> emulate at sm_90a under a
 * schedule with every detector -> tuner_verify (the op's inputs, poisoned
 * outputs, every element against the verifier's tolerances). Shared by
 * tests/test_attention_fa3.c and tests/test_attention_fa3_fp8.c.
 * Header-only: each test program is one translation unit. */
#ifndef PT_TEST_ATTN_FA3_CASE_H
#define PT_TEST_ATTN_FA3_CASE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_e4m3_adv.h"
#include "attn_emu_verify.h"
#include "gen/attention_int.h"
#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct fcase {
    pt_dtype dt;
    int64_t B, Hq, Hkv, Sq, Sk, d;
    bool causal;
    int64_t wl, wr;
    double softcap;
    bool varlen, seqused, lse, bhsd;
    const char *config;
    int64_t page; /* paged K/V: page_size (num_pages: the op's default; shuffled block tables) */
} fcase;

static inline pt_problem problem_of(const fcase *c)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.dtype = c->dt;
    p.batch = c->B;
    p.heads_q = c->Hq;
    p.heads_kv = c->Hkv;
    p.seqlen_q = c->Sq;
    p.seqlen_k = c->Sk;
    p.head_dim = p.head_dim_v = c->d;
    p.causal = c->causal;
    p.window_left = c->wl;
    p.window_right = c->wr;
    p.window_left_given = p.window_right_given = true;
    p.softcap = c->softcap;
    p.varlen = c->varlen;
    p.seqused_k = c->seqused;
    p.return_lse = c->lse;
    p.layout = c->bhsd ? "bhsd" : "bshd";
    p.page_size = c->page;
    return p;
}

static inline void describe(const fcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld d%lld%s wl%lld wr%lld softcap%g%s%s%s%s [%s]",
             pt_dtype_get(c->dt)->name, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Sk, (long long)c->d, c->causal ? " causal" : "", (long long)c->wl, (long long)c->wr,
             c->softcap, c->varlen ? " varlen" : "", c->seqused ? " seqused" : "", c->lse ? " lse" : "",
             c->bhsd ? " bhsd" : "", c->config);
}

static const char *const sched_names[] = {"lazy", "eager", "random"};

/* The fa3 config of a prepared problem: its defaults, c->config over them
 * (parsed against the fa3 space, so decode-kind problems, Sq <= 16, take
 * it too). */
static inline int fa3_config(const pt_prepared *pp, const pt_target *tg, const char *config, pt_config *cf, pt_err *e)
{
    pt_space s;
    attn_fa3_space(pp, tg, &s);
    attn_fa3_defaults(pp, tg, cf);
    return pt_config_parse(&s, config, cf, e);
}

/* One case with op (the attention op or an adversarial one) under sched;
 * descales (e4m3) from d3 when not NULL; nthreads emulator workers. */
/* st (not NULL): the emulator's counters of the verified launch */
/* dv: head_dim_v (0: c->d) */
static inline int run_case_dv(const pt_op *op, const fcase *c, int64_t dv, const double *d3, emu_sched sched,
                              uint64_t seed, int nthreads, double *max_err, emu_stats *st, pt_err *e)
{
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, e), PT_OK);
    pt_problem p = problem_of(c);
    if (dv)
        p.head_dim_v = dv;
    if (d3) {
        p.descale_q = d3[0];
        p.descale_k = d3[1];
        p.descale_v = d3[2];
    }
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = NULL;
    pt_config cf;
    *max_err = 0;
    int rc = op->prepare(a, &p, &tg, &pp, e);
    if (!rc)
        rc = fa3_config(pp, &tg, c->config, &cf, e);
    if (!rc && pt_config_get(&cf, "impl", 0) != ATTN_FA3)
        rc = pt_errf(e, PT_EINVAL, "not the fa3 kernel (impl=%lld)", (long long)pt_config_get(&cf, "impl", 0));
    if (!rc)
        rc = attn_emu_verify(op, pp, &tg, &cf, sched, seed, nthreads, max_err, st, NULL, e);
    pt_arena_free(a);
    return rc;
}

static inline int run_case_st(const pt_op *op, const fcase *c, const double *d3, emu_sched sched, uint64_t seed,
                              int nthreads, double *max_err, emu_stats *st, pt_err *e)
{
    return run_case_dv(op, c, 0, d3, sched, seed, nthreads, max_err, st, e);
}

static inline int run_case_t(const pt_op *op, const fcase *c, const double *d3, emu_sched sched, uint64_t seed,
                              int nthreads, double *max_err, pt_err *e)
{
    return run_case_st(op, c, d3, sched, seed, nthreads, max_err, NULL, e);
}

static inline int run_case_d(const pt_op *op, const fcase *c, const double *d3, emu_sched sched, uint64_t seed,
                      double *max_err, pt_err *e)
{
    return run_case_t(op, c, d3, sched, seed, 2, max_err, e);
}

static inline int run_case(const pt_op *op, const fcase *c, emu_sched sched, uint64_t seed, double *max_err, pt_err *e)
{
    return run_case_d(op, c, NULL, sched, seed, max_err, e);
}

#define E4 PT_E4M3
typedef struct f8case {
    fcase c;
    double d3[3]; /* descale_q, descale_k, descale_v (0: not given) */
} f8case;

/* Every adversarial e4m3 kind (tests/attn_e4m3_adv.h) over the shapes in
 * turn (kind k: shape k % ns, schedule (k + sched0) % 3, seed seed0 +
 * step k), against the reference; prints the count as "what". */
static inline void run_e4m3_adv(const char *what, const f8case *shapes, int ns, int sched0, uint64_t seed0,
                                uint64_t step)
{
    int ran = 0, failed = 0;
    char first[2048] = "";
    double t0 = now();
    for (int kind = 0; kind < E4M3_ADV_N; kind++) {
        const f8case *c = &shapes[kind % ns];
        pt_op op;
        e4m3_op((e4m3_adv)kind, &op);
        double err;
        pt_err e = {0};
        emu_sched sch = (emu_sched)((kind + sched0) % 3);
        int rc = run_case_d(&op, &c->c, c->d3, sch, seed0 + step * (uint64_t)kind, &err, &e);
        ran++;
        if (rc) {
            char d[512];
            describe(&c->c, d, sizeof d);
            failed++;
            if (!first[0])
                snprintf(first, sizeof first, "%s: %.500s: %.1000s", e4m3_adv_names[kind], d, e.msg);
            printf("FAILED %s: %s (%s): %s\n", e4m3_adv_names[kind], d, sched_names[sch], e.msg);
        }
    }
    printf("%s: %d cases, %d failed, %.1f s\n", what, ran, failed, now() - t0);
    fflush(stdout);
    cr_expect_eq(failed, 0, "%d of %d failed; first: %s", failed, ran, first);
}

#endif
