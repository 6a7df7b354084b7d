/* Assembling every config of an op's space: for each problem x arch, every
 * config the op's check() accepts is built, scanned for local memory and
 * compiled, on two threads. Shared by the elementwise and GEMM tests.
 * Header-only: each test program is one translation unit. */
#ifndef PT_TEST_SPACE_H
#define PT_TEST_SPACE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/op.h"
#include "ptx/compile.h"

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

static inline void *test_space_run(void *arg)
{
    test_space_job *j = arg;
    test_space_tally *t = &j->t;
    int k = 0;
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
                if (j->op->check(pp, &tg, &c, &ce) || k++ % j->step != j->first)
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
    return NULL;
}

/* Every config of op's space for each problem x arch, on two threads. */
static inline test_space_tally test_assemble_space(const pt_op *op, const pt_problem *probs,
                                                   int nprobs, const char *const *archs,
                                                   int narchs, const pt_compiler *comp)
{
    enum { NTHREADS = 2 };
    test_space_job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i] = (test_space_job){op, probs, nprobs, archs, narchs, comp,
                                   pt_compiler_max_ptx(comp), i, NTHREADS, {0}};
        pthread_create(&th[i], NULL, test_space_run, &jobs[i]);
    }
    test_space_tally sum = {0};
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        sum.variants += jobs[i].t.variants;
        sum.failures += jobs[i].t.failures;
        sum.spills += jobs[i].t.spills;
        sum.warned += jobs[i].t.warned;
        sum.local += jobs[i].t.local;
        if (jobs[i].t.first[0] && !sum.first[0])
            memcpy(sum.first, jobs[i].t.first, sizeof sum.first);
    }
    return sum;
}

#endif
