/* ptxas sm_90a of the fa3 kernels over a grid of attention problems: for
 * each problem its default config and a seeded sample of the valid
 * configs of one impl (every valid config with PTXTUNE_FULL_SPACE=1),
 * identical PTX texts compiled once, on two threads. A failure to build
 * or assemble (C7602 "Insufficient registers" included), a spill, a stack
 * frame, local memory in the PTX or a C75xx/C76xx code counts against the
 * grid; the first is named. Shared by tests/test_attention_fa3_decode.c
 * (impl=3) and tests/test_attention_fa3_pages.c (impl=2).
 * Header-only: each test program is one translation unit. */
#ifndef PT_TEST_ATTN_FA3_SWEEP_H
#define PT_TEST_ATTN_FA3_SWEEP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/attention.h"
#include "ptx/compile.h"
#include "test_space.h"

typedef struct fa3_sweep {
    int problems, unsupported, candidates, texts, compiled, failures, spills, codes, local;
    char first[2048];
} fa3_sweep;

typedef struct fa3_text {
    char *text;
    char what[512];
    uint64_t hash;
} fa3_text;

typedef struct fa3_sweep_job {
    const pt_compiler *comp;
    fa3_text *t;
    int n, first, step;
    fa3_sweep r;
} fa3_sweep_job;

static inline void fa3_sweep_note(fa3_sweep *r, const char *what, const char *why)
{
    if (!r->first[0])
        snprintf(r->first, sizeof r->first, "%s%s%s", what, what[0] ? ": " : "", why);
}

static inline uint64_t fa3_hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211u;
    return h;
}

static inline void *fa3_sweep_compile(void *arg)
{
    fa3_sweep_job *j = arg;
    pt_target tg;
    pt_err e = {0};
    pt_target_parse("sm_90a", &tg, &e);
    for (int i = j->first; i < j->n; i += j->step) {
        pt_resource r;
        memset(&r, 0, sizeof r);
        pt_err ce = {0};
        j->r.compiled++;
        if (pt_compile(j->comp, j->t[i].text, &tg, NULL, NULL, &r, &ce)) {
            j->r.failures++;
            fa3_sweep_note(&j->r, j->t[i].what, ce.msg);
            continue;
        }
        if (r.spill_stores || r.spill_loads || r.stack_frame) {
            j->r.spills++;
            char w[96];
            snprintf(w, sizeof w, "spills %d/%d stack %d", r.spill_stores, r.spill_loads, r.stack_frame);
            fa3_sweep_note(&j->r, j->t[i].what, w);
        }
        for (int q = 0; q < r.ncodes; q++)
            if (!strncmp(r.codes[q], "C75", 3) || !strncmp(r.codes[q], "C76", 3)) {
                j->r.codes++;
                fa3_sweep_note(&j->r, j->t[i].what, r.codes[q]);
                break;
            }
    }
    return NULL;
}

/* probs[n] on sm_90a: of the problems whose default check() accepts
 * (the others, no kernel of the op takes them, are counted unsupported),
 * every stride-th: its default and `sample` seeded configs of impl among
 * its valid ones (every problem and every valid config when
 * test_full_space()); configs with splits > 2 are left out (their text is
 * that of splits=2). */
static inline fa3_sweep fa3_sweep_run(const pt_problem *probs, int n, int stride, int64_t impl, int sample,
                                      uint64_t seed, const pt_compiler *comp)
{
    fa3_sweep res;
    memset(&res, 0, sizeof res);
    bool full = test_full_space();
    int cap = 256, nt = 0;
    fa3_text *t = malloc((size_t)cap * sizeof *t);
    pt_target tg;
    pt_err e = {0};
    pt_target_parse("sm_90a", &tg, &e);
    int supported = 0;
    if (full)
        stride = 1;
    for (int pi = 0; pi < n && t; pi++) {
        const pt_problem *p = &probs[pi];
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        char pname[200];
        snprintf(pname, sizeof pname, "B%lld Hq%lld Hkv%lld Sq%lld Sk%lld d%lld %s page%lld", (long long)p->batch,
                 (long long)p->heads_q, (long long)p->heads_kv, (long long)p->seqlen_q, (long long)p->seqlen_k,
                 (long long)p->head_dim, pt_dtype_get(p->dtype)->name, (long long)p->page_size);
        if (gen_attention_op.prepare(a, p, &tg, &pp, &e)) {
            res.failures++;
            fa3_sweep_note(&res, pname, e.msg);
            pt_arena_free(a);
            continue;
        }
        pt_config dc;
        pt_err de = {0};
        gen_attention_op.defaults(pp, &tg, &dc);
        if (gen_attention_op.check(pp, &tg, &dc, &de)) {
            res.unsupported++;
            pt_arena_free(a);
            continue;
        }
        if (supported++ % stride) {
            pt_arena_free(a);
            continue;
        }
        res.problems++;
        pt_space s;
        gen_attention_op.space(pp, &tg, &s);
        /* the valid configs of impl, then the seeded pick */
        int64_t nv = 0, size = pt_space_size(&s);
        int64_t *valid = malloc((size_t)(size + 1) * sizeof *valid);
        for (int64_t i = 0; valid && i < size; i++) {
            pt_config c;
            pt_space_config(&s, i, &c);
            pt_err ce = {0};
            if (pt_config_get(&c, "impl", -1) != impl || pt_config_get(&c, "splits", 1) > 2 ||
                gen_attention_op.check(pp, &tg, &c, &ce))
                continue;
            valid[nv++] = i;
        }
        uint64_t st = seed + (uint64_t)pi * 7919u;
        for (int64_t k = nv - 1; k > 0; k--) { /* seeded shuffle */
            int64_t r = (int64_t)(test_space_rand(&st) % (uint64_t)(k + 1)), x = valid[k];
            valid[k] = valid[r];
            valid[r] = x;
        }
        int64_t take = full ? nv : (nv < sample ? nv : sample);
        for (int64_t k = -1; k < take && t; k++) {
            pt_config c;
            if (k < 0)
                gen_attention_op.defaults(pp, &tg, &c);
            else
                pt_space_config(&s, valid[k], &c);
            char cs[256], what[512];
            pt_config_str(&c, cs, sizeof cs);
            snprintf(what, sizeof what, "%s [%s%s]", pname, k < 0 ? "default " : "", cs);
            res.candidates++;
            ptx_module *m = NULL;
            pt_launch l;
            pt_err ce = {0};
            if (gen_attention_op.check(pp, &tg, &c, &ce) || pt_op_build(&gen_attention_op, pp, &tg, 0, &c, &m, &l, &ce)) {
                res.failures++;
                fa3_sweep_note(&res, what, ce.msg);
                continue;
            }
            char *text = ptx_print(m);
            ptx_module_free(m);
            if (!text) {
                res.failures++;
                fa3_sweep_note(&res, what, "no PTX text");
                continue;
            }
            if (strstr(text, "ld.local") || strstr(text, "st.local")) {
                res.local++;
                fa3_sweep_note(&res, what, "local memory in the PTX");
            }
            uint64_t h = fa3_hash(text);
            bool dup = false;
            for (int q = 0; q < nt && !dup; q++)
                dup = t[q].hash == h && !strcmp(t[q].text, text);
            if (dup) {
                free(text);
                continue;
            }
            if (nt == cap) {
                fa3_text *g = realloc(t, (size_t)cap * 2 * sizeof *t);
                if (!g) {
                    free(text);
                    break;
                }
                t = g;
                cap *= 2;
            }
            t[nt].text = text;
            t[nt].hash = h;
            snprintf(t[nt].what, sizeof t[nt].what, "%s", what);
            nt++;
        }
        free(valid);
        pt_arena_free(a);
    }
    if (!t) {
        res.failures++;
        fa3_sweep_note(&res, "sweep", "out of memory");
        return res;
    }
    res.texts = nt;
    enum { NTHREADS = 2 };
    fa3_sweep_job j[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&j[i], 0, sizeof j[i]);
        j[i].comp = comp;
        j[i].t = t;
        j[i].n = nt;
        j[i].first = i;
        j[i].step = NTHREADS;
        pthread_create(&th[i], NULL, fa3_sweep_compile, &j[i]);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        res.compiled += j[i].r.compiled;
        res.failures += j[i].r.failures;
        res.spills += j[i].r.spills;
        res.codes += j[i].r.codes;
        if (j[i].r.first[0] && !res.first[0])
            memcpy(res.first, j[i].r.first, sizeof res.first);
    }
    for (int i = 0; i < nt; i++)
        free(t[i].text);
    free(t);
    return res;
}

#endif
