/* Assembling every config of an op's space: for each problem x arch, every
 * config the op's check() accepts is built, scanned for local memory and
 * compiled, on two threads. Shared by the elementwise and GEMM tests.
 * test_space_sample() picks the per-commit sample of a space too big to
 * assemble whole in the suite (PTXTUNE_FULL_SPACE=1: all of it;
 * scripts/check_spaces.sh runs the spaces whole).
 * Header-only: each test program is one translation unit. */
#ifndef PT_TEST_SPACE_H
#define PT_TEST_SPACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/op.h"
#include "ptx/compile.h"

/* PTXTUNE_FULL_SPACE=1: the space tests assemble every config. */
static inline bool test_full_space(void)
{
    const char *v = getenv("PTXTUNE_FULL_SPACE");
    return v && atoi(v) != 0;
}

static inline uint64_t test_space_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A deterministic sample of the n valid configs cfg[] (all of one space:
 * the same parameters in the same order), marked in keep[]: first the nbig
 * with the highest score[] (NULL: none; ties the lower index), the ones
 * most likely to spill (the biggest tiles); then, greedily, the config
 * giving the most (parameter, value) pairs no kept config has yet, until
 * every value each parameter takes among cfg[] appears at least once;
 * then seeded random ones until target are kept. Every config when
 * test_full_space(). Returns the number kept. */
static inline int test_space_sample(const pt_config *cfg, int n, const int64_t *score, int nbig, int target,
                                    uint64_t seed, bool *keep)
{
    bool full = test_full_space();
    for (int i = 0; i < n; i++)
        keep[i] = full;
    if (full || n <= 0)
        return full ? n : 0;
    int *perm = malloc((size_t)n * sizeof *perm);
    if (!perm)
        return 0;
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int r = (int)(test_space_rand(&seed) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[r];
        perm[r] = t;
    }
    int kept = 0;
    for (int b = 0; score && b < nbig && b < n; b++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!keep[i] && (best < 0 || score[i] > score[best]))
                best = i;
        keep[best] = true;
        kept++;
    }
    /* covered[p]: the values of parameter p some kept config has */
    int64_t covered[PT_MAX_PARAMS][PT_MAX_VALUES * 4];
    int ncov[PT_MAX_PARAMS] = {0};
    int np = cfg[0].n < PT_MAX_PARAMS ? cfg[0].n : PT_MAX_PARAMS;
    for (;;) {
        for (int i = 0; i < n; i++) {
            if (!keep[i])
                continue;
            for (int p = 0; p < np; p++) {
                bool have = false;
                for (int q = 0; q < ncov[p] && !have; q++)
                    have = covered[p][q] == cfg[i].value[p];
                if (!have && ncov[p] < PT_MAX_VALUES * 4)
                    covered[p][ncov[p]++] = cfg[i].value[p];
            }
        }
        int best = -1, gain_best = 0;
        for (int k = 0; k < n; k++) {
            int i = perm[k], gain = 0;
            if (keep[i])
                continue;
            for (int p = 0; p < np; p++) {
                bool have = false;
                for (int q = 0; q < ncov[p] && !have; q++)
                    have = covered[p][q] == cfg[i].value[p];
                gain += !have;
            }
            if (gain > gain_best) {
                gain_best = gain;
                best = i;
            }
        }
        if (best < 0)
            break;
        keep[best] = true;
        kept++;
    }
    for (int k = 0; k < n && kept < target; k++)
        if (!keep[perm[k]]) {
            keep[perm[k]] = true;
            kept++;
        }
    free(perm);
    return kept;
}

typedef struct test_space_tally {
    int variants; /* configs built and compiled */
    int failures; /* prepare, build or compile errors */
    int spills;   /* spill stores/loads or a stack frame */
    int warned;   /* a ptxas C7xxx code */
    int local;    /* ld.local / st.local in the PTX */
    char first[1200];
} test_space_tally;

typedef struct test_space_job {
    const pt_op *op;
    const pt_problem *probs;
    int nprobs;
    const char *const *archs;
    int narchs;
    const pt_compiler *comp;
    int max_ptx, first, step;
    test_space_tally t;
} test_space_job;

static inline void test_space_fail(test_space_tally *t, const pt_problem *p, const char *arch,
                                   const pt_config *c, const char *what)
{
    if (t->first[0])
        return;
    char cs[256];
    snprintf(t->first, sizeof t->first, "%s %s [%s]: %s", p->expr ? p->expr : p->op, arch,
             c ? pt_config_str(c, cs, sizeof cs) : "", what);
}

/* keep: NULL, every valid config; else keep[k] for the k-th valid one */
static inline void test_space_run_kept(test_space_job *j, const bool *keep)
{
    test_space_tally *t = &j->t;
    int k = 0, kept = 0;
    for (int pi = 0; pi < j->nprobs; pi++)
        for (int ai = 0; ai < j->narchs; ai++) {
            const pt_problem *p = &j->probs[pi];
            pt_target tg;
            pt_err e = {0};
            pt_target_parse(j->archs[ai], &tg, &e);
            pt_arena *a = pt_arena_new();
            pt_prepared *pp;
            if (j->op->prepare(a, p, &tg, &pp, &e)) {
                t->failures++;
                test_space_fail(t, p, j->archs[ai], NULL, e.msg);
                pt_arena_free(a);
                continue;
            }
            pt_space s;
            j->op->space(pp, &tg, &s);
            for (int64_t i = 0; i < pt_space_size(&s); i++) {
                pt_config c;
                pt_space_config(&s, i, &c);
                pt_err ce = {0};
                if (j->op->check(pp, &tg, &c, &ce))
                    continue;
                int idx = k++;
                if (keep && !keep[idx])
                    continue;
                if (kept++ % j->step != j->first)
                    continue;
                ptx_module *m;
                pt_launch l;
                t->variants++;
                if (pt_op_build(j->op, pp, &tg, j->max_ptx, &c, &m, &l, &ce)) {
                    t->failures++;
                    test_space_fail(t, p, j->archs[ai], &c, ce.msg);
                    continue;
                }
                char *text = ptx_print(m);
                ptx_module_free(m);
                if (strstr(text, "ld.local") || strstr(text, "st.local")) {
                    t->local++;
                    test_space_fail(t, p, j->archs[ai], &c, "local memory in the PTX");
                }
                pt_resource r = {0};
                int rc = pt_compile(j->comp, text, &tg, NULL, NULL, &r, &ce);
                free(text);
                if (rc) {
                    t->failures++;
                    test_space_fail(t, p, j->archs[ai], &c, ce.msg);
                    continue;
                }
                if (r.spill_stores || r.spill_loads || r.stack_frame) {
                    t->spills++;
                    char w[96];
                    snprintf(w, sizeof w, "spills %d/%d stack %d", r.spill_stores, r.spill_loads,
                             r.stack_frame);
                    test_space_fail(t, p, j->archs[ai], &c, w);
                }
                for (int q = 0; q < r.ncodes; q++)
                    if (r.codes[q][0] == 'C' && r.codes[q][1] == '7') {
                        t->warned++;
                        test_space_fail(t, p, j->archs[ai], &c, r.codes[q]);
                        break;
                    }
            }
            pt_arena_free(a);
        }
}

static inline void *test_space_run(void *arg)
{
    test_space_run_kept(arg, NULL);
    return NULL;
}

typedef struct test_space_kjob {
    test_space_job j;
    const bool *keep;
} test_space_kjob;

static inline void *test_space_run_kjob(void *arg)
{
    test_space_kjob *k = arg;
    test_space_run_kept(&k->j, k->keep);
    return NULL;
}

static inline test_space_tally test_assemble_kept(const pt_op *op, const pt_problem *probs, int nprobs,
                                                 const char *const *archs, int narchs,
                                                 const pt_compiler *comp, const bool *keep);

/* Every config of op's space for each problem x arch, on two threads. */
static inline test_space_tally test_assemble_space(const pt_op *op, const pt_problem *probs,
                                                   int nprobs, const char *const *archs,
                                                   int narchs, const pt_compiler *comp)
{
    return test_assemble_kept(op, probs, nprobs, archs, narchs, comp, NULL);
}

/* test_assemble_space over test_space_sample()'s sample of each problem x
 * arch (score: NULL, or the spill risk of a config, e.g. its tile area;
 * the nbig riskiest of each are kept), at least target configs of each;
 * all of them with PTXTUNE_FULL_SPACE=1. *nvalid: the valid configs. */
static inline test_space_tally test_assemble_sample(const pt_op *op, const pt_problem *probs, int nprobs,
                                                    const char *const *archs, int narchs,
                                                    const pt_compiler *comp,
                                                    int64_t (*score)(const pt_config *), int nbig,
                                                    int target, uint64_t seed, int *nvalid)
{
    int cap = 4096, n = 0;
    pt_config *cfg = malloc((size_t)cap * sizeof *cfg);
    bool *keep = malloc((size_t)cap * sizeof *keep);
    int64_t *sc = malloc((size_t)cap * sizeof *sc);
    test_space_tally bad = {0};
    bad.failures = 1;
    if (!cfg || !keep || !sc) {
        snprintf(bad.first, sizeof bad.first, "out of memory");
        free(cfg), free(keep), free(sc);
        return bad;
    }
    for (int pi = 0; pi < nprobs; pi++)
        for (int ai = 0; ai < narchs; ai++) {
            pt_target tg;
            pt_err e = {0};
            pt_target_parse(archs[ai], &tg, &e);
            pt_arena *a = pt_arena_new();
            pt_prepared *pp;
            if (op->prepare(a, &probs[pi], &tg, &pp, &e)) {
                pt_arena_free(a);
                continue; /* test_assemble_kept counts the failure */
            }
            pt_space s;
            op->space(pp, &tg, &s);
            int g0 = n;
            for (int64_t i = 0; i < pt_space_size(&s); i++) {
                pt_config c;
                pt_space_config(&s, i, &c);
                pt_err ce = {0};
                if (op->check(pp, &tg, &c, &ce))
                    continue;
                if (n == cap) {
                    snprintf(bad.first, sizeof bad.first, "more than %d valid configs", cap);
                    pt_arena_free(a);
                    free(cfg), free(keep), free(sc);
                    return bad;
                }
                sc[n] = score ? score(&c) : 0;
                cfg[n++] = c;
            }
            test_space_sample(cfg + g0, n - g0, score ? sc + g0 : NULL, nbig, target,
                              seed + (uint64_t)(pi * narchs + ai), keep + g0);
            pt_arena_free(a);
        }
    test_space_tally t = test_assemble_kept(op, probs, nprobs, archs, narchs, comp, keep);
    *nvalid = n;
    free(cfg), free(keep), free(sc);
    return t;
}

static inline test_space_tally test_assemble_kept(const pt_op *op, const pt_problem *probs, int nprobs,
                                                 const char *const *archs, int narchs,
                                                 const pt_compiler *comp, const bool *keep)
{
    enum { NTHREADS = 2 };
    test_space_kjob kj[NTHREADS];
    test_space_job *jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&kj[i], 0, sizeof kj[i]);
        kj[i].j = (test_space_job){op, probs, nprobs, archs, narchs, comp,
                                   pt_compiler_max_ptx(comp), i, NTHREADS, {0}};
        kj[i].keep = keep;
        jobs[i] = &kj[i].j;
        pthread_create(&th[i], NULL, test_space_run_kjob, &kj[i]);
    }
    test_space_tally sum = {0};
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        sum.variants += jobs[i]->t.variants;
        sum.failures += jobs[i]->t.failures;
        sum.spills += jobs[i]->t.spills;
        sum.warned += jobs[i]->t.warned;
        sum.local += jobs[i]->t.local;
        if (jobs[i]->t.first[0] && !sum.first[0])
            memcpy(sum.first, jobs[i]->t.first, sizeof sum.first);
    }
    return sum;
}

#endif
