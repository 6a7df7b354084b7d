/* Helpers shared by the sm_90a wgmma GEMM tests (test_gemm_sm90*.c): the
 * clock, the problems with TMA-padded leading dimensions, check() and emit
 * over a config string, and substring counting. Header-only: each test
 * program is one translation unit. */
#ifndef PT_GEMM_SM90_UTIL_H
#define PT_GEMM_SM90_UTIL_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/gemm.h"
#include "ptx/compile.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "test_util.h"

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int64_t up16(int64_t v, int es) { return (v * es + 15) / 16 * 16 / es; }

/* A problem with leading dimensions padded to 16 bytes (TMA strides). */
static inline pt_problem prob(int64_t m, int64_t n, int64_t k, const char *lay, pt_dtype dt, pt_dtype odt)
{
    pt_problem p = PT_GEMM(m, n, k, lay, dt, odt);
    int es = pt_dtype_get(dt)->bytes;
    p.lda = up16(lay[0] == 'n' ? k : m, es);
    p.ldb = up16(lay[1] == 't' ? k : n, es);
    return p;
}

/* The same, D's leading dimension padded too (the TMA-store epilogue). */
static inline pt_problem prob_ldd(int64_t m, int64_t n, int64_t k, const char *lay, pt_dtype dt, pt_dtype odt)
{
    pt_problem p = prob(m, n, k, lay, dt, odt);
    pt_dtype o = odt == PT_F64 ? dt : odt;
    if (o == PT_TF32)
        o = PT_F32;
    p.ldd = up16(n, pt_dtype_get(o)->bytes);
    return p;
}

/* Occurrences of s in t. */
static inline int count(const char *t, const char *s)
{
    int n = 0;
    for (const char *q = strstr(t, s); q; q = strstr(q + 1, s))
        n++;
    return n;
}

/* gen_gemm_op.prepare of p on tg, and the defaults with config (NULL:
 * none) parsed over them into c. */
static inline int prepare_config(pt_arena *a, const pt_problem *p, const pt_target *tg, const char *config,
                                 pt_prepared **pp, pt_config *c, pt_err *e)
{
    int rc = gen_gemm_op.prepare(a, p, tg, pp, e);
    char buf[512];
    int sms;
    config = config_sms(config, &sms, buf, sizeof buf); /* the device's, not the config's */
    if (!rc) {
        pt_space s;
        gen_gemm_op.space(*pp, tg, &s);
        gen_gemm_op.defaults(*pp, tg, c);
        rc = config ? pt_config_parse(&s, config, c, e) : PT_OK;
    }
    return rc;
}

/* The built kernel printed (*text, malloc'd), parsed (*parsed) and printed
 * again, which must give the same text. */
static inline int print_round_trip(ptx_module *built, char **text, ptx_module **parsed, pt_err *e)
{
    *text = ptx_print(built);
    int rc = ptx_parse(*text, strlen(*text), "<emitted>", 0, parsed, e);
    if (!rc) {
        char *again = ptx_print(*parsed);
        if (strcmp(again, *text) != 0)
            rc = pt_errf(e, PT_EINTERNAL, "parse(print(kernel)) does not print back identically");
        free(again);
    }
    return rc;
}

/* The kernel's text loaded on backend (the emulator at schedule sched,
 * seed for the random one, reporting sms SMs: 0 the arch's, which size
 * persistent grids), its io with seeded random inputs (then
 * plant(io, plant_arg) where plant is not NULL) allocated with the
 * device's guard bytes, on an emulator of sm_<arch>. The caller releases
 * *d, *k and *io (run_release). */
static inline int open_load_io_arch(const char *backend, int arch, emu_sched sched, uint64_t seed, int sms,
                                    const char *text, const char *entry, const pt_prepared *pp, const pt_problem *p,
                                    void (*plant)(tuner_io *, void *), void *plant_arg, tuner_dev **d,
                                    tuner_kernel **k, tuner_io **io, pt_err *e)
{
    tuner_dev_opts dopts = {.emu_threads = 1, .emu_arch = arch, .emu_schedule = (int)sched,
                            .emu_schedule_seed = seed, .emu_sm_count = sms};
    int rc = tuner_dev_open(backend, &dopts, d, e);
    tuner_image img = {text, strlen(text), NULL, 0, entry, &gen_gemm_op, pp};
    if (!rc)
        rc = tuner_load(*d, &img, k, e);
    if (!rc)
        rc = tuner_io_new(&gen_gemm_op, pp, io, e);
    if (!rc) {
        tuner_io_random(*io, (uint64_t)(p->m * 131 + p->n * 7 + p->k), 0, 0);
        if (plant)
            plant(*io, plant_arg);
        rc = tuner_io_alloc(*d, *io, tuner_dev_guard_bytes(*d), e);
    }
    return rc;
}

/* The same on an sm_90 emulator. */
static inline int open_load_io_sms(const char *backend, emu_sched sched, uint64_t seed, int sms, const char *text,
                                   const char *entry, const pt_prepared *pp, const pt_problem *p,
                                   void (*plant)(tuner_io *, void *), void *plant_arg, tuner_dev **d,
                                   tuner_kernel **k, tuner_io **io, pt_err *e)
{
    return open_load_io_arch(backend, 90, sched, seed, sms, text, entry, pp, p, plant, plant_arg, d, k, io, e);
}

/* The same on a device of the arch's SM count. */
static inline int open_load_io(const char *backend, emu_sched sched, uint64_t seed, const char *text,
                               const char *entry, const pt_prepared *pp, const pt_problem *p,
                               void (*plant)(tuner_io *, void *), void *plant_arg, tuner_dev **d,
                               tuner_kernel **k, tuner_io **io, pt_err *e)
{
    return open_load_io_sms(backend, sched, seed, 0, text, entry, pp, p, plant, plant_arg, d, k, io, e);
}

/* Frees what a run made (any of them may be NULL). */
static inline void run_release(tuner_dev *d, tuner_kernel *k, tuner_io *io, char *text, ptx_module *parsed,
                               ptx_module *built, pt_arena *a)
{
    if (io)
        tuner_io_free(d, io);
    if (k)
        tuner_unload(d, k);
    if (d)
        tuner_dev_close(d);
    free(text);
    ptx_module_free(parsed);
    ptx_module_free(built);
    pt_arena_free(a);
}

/* The fake CUDA driver (tests/fake_cuda.c, PTXTUNE_FAKE_CUDA) loaded
 * globally, or the test skipped where it was not built. A macro: the skip
 * must come from the test itself. */
#define LOAD_FAKE_CUDA_OR_SKIP()                                                                        \
    do {                                                                                               \
        const char *fake_lib_ = getenv("PTXTUNE_FAKE_CUDA");                                           \
        if (!fake_lib_)                                                                                \
            cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");                    \
        cr_assert(dlopen(fake_lib_, RTLD_NOW | RTLD_GLOBAL), "%s", dlerror());                         \
    } while (0)

/* ptxas opened into comp (a pt_compiler *), or the test skipped (a
 * failure when PTXTUNE_REQUIRE_TOOLKIT=1); e: the test's pt_err. A macro:
 * the skip must come from the test itself. */
#define OPEN_PTXAS_OR_SKIP(comp, e)                                                                     \
    do {                                                                                               \
        if (pt_compiler_open(&(comp), &(e))) {                                                         \
            cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", (e).msg);         \
            cr_skip_test("no CUDA toolkit: %s", (e).msg);                                              \
        }                                                                                              \
    } while (0)

/* ptxas on text for tg, its resources in *r: it must assemble with no
 * C75xx warning, no spills and no local memory (expectations, each message
 * led by what). */
static inline void expect_assembles_clean(const pt_compiler *comp, const char *text, const pt_target *tg,
                                          const char *what, pt_resource *r)
{
    pt_err e = {0};
    memset(r, 0, sizeof *r);
    int rc = pt_compile(comp, text, tg, NULL, NULL, r, &e);
    cr_expect_eq(rc, PT_OK, "%s: %s", what, e.msg);
    for (int k = 0; k < r->ncodes; k++)
        cr_expect(strncmp(r->codes[k], "C75", 3) != 0, "%s: %s", what, r->codes[k]);
    cr_expect_eq(r->spill_stores + r->spill_loads, 0, "%s: spills", what);
    cr_expect_eq(r->stack_frame, 0, "%s: local memory", what);
}

/* gen_gemm_op.check on sm_90a of the defaults with config ("k=v,k=v")
 * set over them; the message in e. */
static inline int check_cfg(const pt_problem *p, const char *config, pt_err *e)
{
    memset(e, 0, sizeof *e);
    pt_target tg;
    cr_assert_eq(pt_target_parse("sm_90a", &tg, e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, p, &tg, &pp, e), PT_OK, "%s", e->msg);
    pt_config c;
    gen_gemm_op.defaults(pp, &tg, &c);
    char buf[256], sbuf[256];
    int sms;
    snprintf(buf, sizeof buf, "%s", config_sms(config, &sms, sbuf, sizeof sbuf));
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        cr_assert(eq);
        *eq = 0;
        pt_config_set(&c, pt_arena_strdup(a, tok), atoll(eq + 1));
    }
    int rc = gen_gemm_op.check(pp, &tg, &c, e);
    pt_arena_free(a);
    return rc;
}

/* The printed PTX of the sm_90a kernel at config (parsed over the
 * defaults), its launch in l; the caller frees the text. */
static inline char *emit_text(const pt_problem *p, const char *config, pt_launch *l)
{
    pt_target tg;
    pt_err e = {0};
    cr_assert_eq(pt_target_parse("sm_90a", &tg, &e), PT_OK);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    cr_assert_eq(gen_gemm_op.prepare(a, p, &tg, &pp, &e), PT_OK, "%s", e.msg);
    pt_space s;
    gen_gemm_op.space(pp, &tg, &s);
    pt_config c;
    gen_gemm_op.defaults(pp, &tg, &c);
    char sbuf[512];
    int sms;
    cr_assert_eq(pt_config_parse(&s, config_sms(config, &sms, sbuf, sizeof sbuf), &c, &e), PT_OK, "%s", e.msg);
    ptx_module *m = NULL;
    cr_assert_eq(pt_op_build(&gen_gemm_op, pp, &tg, 0, &c, &m, l, &e), PT_OK, "%s: %s", config, e.msg);
    char *t = ptx_print(m);
    ptx_module_free(m);
    pt_arena_free(a);
    return t;
}

/* ---- a grid of emulated cases, tallied per input dtype ---- */

enum { GRID_MAXDT = 8 };

typedef struct sm90_grid {
    int cases, failed;
    int per_dt[GRID_MAXDT];
    double worst[GRID_MAXDT];
    double emu_s;
    char first[2048];
} sm90_grid;

/* With GEMM_SM90_TRACE set, the case on stderr before it runs. */
static inline void grid_trace(const pt_problem *p, const char *config, emu_sched sched)
{
    if (getenv("GEMM_SM90_TRACE"))
        fprintf(stderr, "case %lldx%lldx%lld %s %s [%s] sched %d\n", (long long)p->m, (long long)p->n,
                (long long)p->k, p->layout, pt_dtype_get(p->dtype)->name, config ? config : "-", (int)sched);
}

/* One case's result (rc, the verifier's max_err, emulated seconds emu_s)
 * tallied at dtype slot di; the first failure kept with its config shown. */
static inline void grid_tally(sm90_grid *g, int di, int rc, double max_err, double emu_s, const pt_problem *p,
                              const char *shown, emu_sched sched, const char *msg)
{
    g->cases++;
    g->per_dt[di]++;
    g->emu_s += emu_s;
    if (!rc && max_err > g->worst[di])
        g->worst[di] = max_err;
    if (rc) {
        if (!g->failed)
            snprintf(g->first, sizeof g->first, "%lldx%lldx%lld %s %s [%s] sched %d: %s", (long long)p->m,
                     (long long)p->n, (long long)p->k, p->layout, pt_dtype_get(p->dtype)->name, shown,
                     (int)sched, msg);
        g->failed++;
    }
}

/* The grid's count line (with the emulated seconds where emulated), the
 * worst error per dtype of dts[0..ndt), and no failure expected. */
static inline void grid_report_dts(const sm90_grid *g, const char *what, double t0, const pt_dtype *dts, int ndt,
                                   bool emulated)
{
    if (emulated)
        printf("%s: %d cases, %d failed, %.1f s (emulated %.1f s)\n", what, g->cases, g->failed, now() - t0,
               g->emu_s);
    else
        printf("%s: %d cases, %d failed, %.1f s\n", what, g->cases, g->failed, now() - t0);
    for (int i = 0; i < ndt; i++)
        if (g->per_dt[i])
            printf("  %-5s %3d cases, worst error %.3g\n", pt_dtype_get(dts[i])->name, g->per_dt[i], g->worst[i]);
    fflush(stdout);
    cr_expect_eq(g->failed, 0, "%d of %d failed; first: %s", g->failed, g->cases, g->first);
}

#endif
