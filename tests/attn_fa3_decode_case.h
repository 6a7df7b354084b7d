/* The sm_90a decode kernel's (impl=3) emulator case for
 * tests/test_attention_fa3_decode.c and tests/test_attention_fa3_decode_fp8.c:
 * a problem (fcase), one run at a schedule (emit -> print -> parse ->
 * print back identically -> emulate at sm_90a, every detector on ->
 * tuner_verify against the float64 reference with the verifier's own
 * tolerances), and check() of a config. Header-only: each test program is
 * one translation unit. */
#ifndef TESTS_ATTN_FA3_DECODE_CASE_H
#define TESTS_ATTN_FA3_DECODE_CASE_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_e4m3_adv.h"
#include "attn_emu_verify.h"
#include "gen/attention.h"
#include "gen/attention_int.h"
#include "ptx/emu/emu.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct fcase {
    int64_t B, Hq, Hkv, Sq, Sk, d;
    pt_dtype dt;
    bool causal;
    int64_t page, wl;
    bool seqused, lse;
    double softcap;
    const char *config;
    bool varlen, bhsd;
    double dq, dk, dv; /* e4m3 descales (0: not given) */
} fcase;

static pt_problem problem_of(const fcase *c)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.batch = c->B;
    p.heads_q = c->Hq;
    p.heads_kv = c->Hkv;
    p.seqlen_q = c->Sq;
    p.seqlen_k = c->Sk;
    p.head_dim = c->d;
    p.dtype = c->dt;
    p.causal = c->causal;
    p.page_size = c->page;
    p.seqused_k = c->seqused;
    p.return_lse = c->lse;
    p.softcap = c->softcap;
    p.varlen = c->varlen;
    p.layout = c->bhsd ? "bhsd" : "bshd";
    p.descale_q = c->dq;
    p.descale_k = c->dk;
    p.descale_v = c->dv;
    if (c->wl >= 0) {
        p.window_left = c->wl;
        p.window_left_given = true;
    }
    return p;
}

static void describe(const fcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld d%lld%s%s page%lld%s%s%s softcap%g wl%lld [%s]",
             pt_dtype_get(c->dt)->name, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Sk, (long long)c->d, c->causal ? " causal" : "", c->seqused ? " seqused" : "",
             (long long)c->page, c->lse ? " lse" : "", c->varlen ? " varlen" : "", c->bhsd ? " bhsd" : "",
             c->softcap, (long long)c->wl, c->config);
}

static const char *const sched_names[] = {"lazy", "eager", "random"};

/* One case with op (the attention op or an adversarial one) at schedule
 * sched on the emulator (sm_90a); the config over the defaults must be
 * impl=3. */
/* dv: head_dim_v (0: c->d) */
static int run_case_dv(const pt_op *op, const fcase *c, int64_t dv, emu_sched sched, uint64_t seed, double *max_err,
                       emu_stats *st, pt_err *e)
{
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, e), PT_OK);
    pt_problem p = problem_of(c);
    if (dv)
        p.head_dim_v = dv;
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = NULL;
    pt_config cf;
    *max_err = 0;
    int rc = op->prepare(a, &p, &tg, &pp, e);
    if (!rc) {
        pt_space s;
        op->space(pp, &tg, &s);
        op->defaults(pp, &tg, &cf);
        rc = pt_config_parse(&s, c->config, &cf, e);
    }
    if (!rc && pt_config_get(&cf, "impl", 0) != ATTN_FA3_SPLIT)
        rc = pt_errf(e, PT_EINVAL, "not the sm_90a decode kernel (impl=%lld)",
                     (long long)pt_config_get(&cf, "impl", 0));
    if (!rc)
        rc = attn_emu_verify(op, pp, &tg, &cf, sched, seed, 1, max_err, st, NULL, e);
    pt_arena_free(a);
    return rc;
}

static int run_case_st(const pt_op *op, const fcase *c, emu_sched sched, uint64_t seed, double *max_err,
                       emu_stats *st, pt_err *e)
{
    return run_case_dv(op, c, 0, sched, seed, max_err, st, e);
}

static int run_case(const pt_op *op, const fcase *c, emu_sched sched, uint64_t seed, double *max_err, pt_err *e)
{
    return run_case_st(op, c, sched, seed, max_err, NULL, e);
}

static int check_of(const fcase *c, const char *arch, const char *config, pt_err *e)
{
    pt_target tg;
    cr_assert_eq(pt_target_parse(arch, &tg, e), PT_OK);
    pt_problem p = problem_of(c);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    int rc = gen_attention_op.prepare(a, &p, &tg, &pp, e);
    if (!rc) {
        pt_config cf;
        attn_fa3_decode_defaults(pp, &tg, &cf);
        pt_space s;
        attn_fa3_decode_space(pp, &tg, &s);
        rc = pt_config_parse(&s, config, &cf, e);
        if (!rc)
            rc = gen_attention_op.check(pp, &tg, &cf, e);
    }
    pt_arena_free(a);
    return rc;
}

/* Every adversarial e4m3 kind (tests/attn_e4m3_adv.h) in `variants`
 * runs: variant v of kind k takes shape (k + v) % ns, schedule (k + v) % 3,
 * seed seed0 + step k + v. Counts into *ran; returns the failures (the
 * first's message in first), each printed. */
static int run_e4m3_adv(const fcase *shapes, int ns, int variants, uint64_t seed0, uint64_t step, int *ran,
                        char *first, size_t nfirst)
{
    int failed = 0;
    for (int kind = 0; kind < E4M3_ADV_N; kind++)
        for (int v = 0; v < variants; v++) {
            const fcase *c = &shapes[(kind + v) % ns];
            pt_op op;
            e4m3_op((e4m3_adv)kind, &op);
            double err;
            pt_err e = {0};
            emu_sched sch = (emu_sched)((kind + v) % 3);
            int rc = run_case(&op, c, sch, seed0 + step * (uint64_t)kind + (uint64_t)v, &err, &e);
            ++*ran;
            if (rc) {
                char d[512];
                describe(c, d, sizeof d);
                if (!failed++)
                    snprintf(first, nfirst, "%s: %.500s: %.1000s", e4m3_adv_names[kind], d, e.msg);
                printf("FAILED %s: %s (%s): %s\n", e4m3_adv_names[kind], d, sched_names[sch], e.msg);
            }
        }
    return failed;
}

#endif
