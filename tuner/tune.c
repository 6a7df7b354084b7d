/* The tuning loop (tuner/tune.h).
 *
 * Threads: the caller's thread runs the search, measures and stores; a
 * small pool builds candidates (tuner_build: emit, print, hash, compile)
 * ahead of it.
 * The measuring worker is a forked process (tuner/pool.h); a fork while a
 * builder thread holds a lock inside a library would leave that lock held
 * forever in the child, so the builders are paused whenever the next job may
 * start a new worker (the first job, and the one after a worker exited). */
#include "tuner/tune.h"
#include "tuner/contract.h"

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptx/target.h"
#include "tuner/driver.h"
#include "tuner/pipeline.h"
#include "tuner/sweep.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- a small string map: "rung|key" -> entry --------------------------- */

typedef struct smap_ent {
    char *key;
    double score;
    char status[16];
    char hash[17];
    char config[256];
} smap_ent;

typedef struct smap {
    smap_ent *v;
    size_t cap, n;
} smap;

static size_t smap_slot(const smap *m, const char *key)
{
    size_t i = (size_t)pt_hash64(key, strlen(key)) & (m->cap - 1);
    while (m->v[i].key && strcmp(m->v[i].key, key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static smap_ent *smap_get(const smap *m, int rung, const char *k)
{
    if (!m->cap)
        return NULL;
    char key[512];
    snprintf(key, sizeof key, "%d|%s", rung, k);
    smap_ent *e = &m->v[smap_slot(m, key)];
    return e->key ? e : NULL;
}

/* The entry of (rung, k), added when missing; NULL when out of memory. */
static smap_ent *smap_put(smap *m, int rung, const char *k)
{
    if (2 * (m->n + 1) > m->cap) {
        smap old = *m;
        size_t cap = m->cap ? 2 * m->cap : 256;
        smap_ent *v = calloc(cap, sizeof *v);
        if (!v)
            return NULL;
        m->cap = cap;
        m->v = v;
        m->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.v[i].key) {
                m->v[smap_slot(m, old.v[i].key)] = old.v[i];
                m->n++;
            }
        free(old.v);
    }
    char key[512];
    snprintf(key, sizeof key, "%d|%s", rung, k);
    smap_ent *e = &m->v[smap_slot(m, key)];
    if (!e->key) {
        e->key = strdup(key);
        if (!e->key)
            return NULL;
        m->n++;
    }
    return e;
}

static void smap_free(smap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->v[i].key);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ---- state -------------------------------------------------------------- */

typedef struct prob_state {
    const search_problem *sp;
    const pt_op *op;
    pt_arena *arena;
    pt_prepared *pp;
    pt_space space;
    int64_t db_id;
    double flops, bytes;
    bool verify; /* emulator: small enough to emulate */
} prob_state;

/* One proposal on its way: built by the pool (tuner_build), measured in
 * order. */
typedef struct build {
    search_cand cand;
    pt_config cfg;
    char cfg_str[256];
    bool skip;          /* known already: no build */
    bool done;
    int rc;             /* the build's harness error (out of memory), with err */
    pt_err err;
    tuner_built b;      /* b.cls: TUNER_OK built, else compile_error / resource_limit */
    char hash[17];
} build;

typedef struct sweep_ctx {
    const sweep_opts *o;
    prob_state *cur;    /* the problem being swept: one at a time */
    pt_buf cur_blob;    /* its pt_problem as bytes, for the worker's jobs */
    int nps;
    pt_target target;
    char arch[16];
    int max_ptx;
    pt_compiler *comp;
    search_device dev;
    bool timed_backend;
    bool mock;          /* the mock backend: rows say source=mock */
    int64_t fp_id;      /* the run's fingerprint (incremental reuse) */
    /* build pool */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    build *jobs;
    int njobs, next_job, active, problem;
    bool hold, quit;
    pthread_t *threads;
    int nthreads;
    /* measuring worker */
    tuner_pool *pool;
    tuner_runner runner;  /* jobs into the pool, builders held while it may fork */
    double deadline_s;
    tuner_dev_opts dev_opts;
} sweep_ctx;

/* ---- the cost model for a candidate -------------------------------------- */

static double model_of(const sweep_ctx *sc, const prob_state *ps, const pt_config *cfg,
                       const pt_launch *l, const pt_resource *res)
{
    const pt_problem *p = &ps->sp->prob;
    double mnk[3];
    bool tiled = pt_problem_mnk(p, mnk);
    search_kernel k = {
        .flops = ps->flops,
        .bytes = ps->bytes,
        .tensor = pt_problem_tensor_math(p),
        .blocks = (int64_t)pt_launch_grid_x(l, sc->dev.sm_count) * l->grid[1] * l->grid[2],
        .threads = (int)(l->block[0] * l->block[1] * l->block[2]),
        .regs = res ? res->registers : 0,
        .smem = (int)l->smem + (res ? res->shared_bytes : 0),
        .spill_bytes = res ? res->spill_stores + res->spill_loads : 0,
        .access_bytes = l->align > 0 ? l->align : 16,
        .pipelined = pt_config_get(cfg, "stages", 1) >= 2,
    };
    if (tiled) {
        k.m = mnk[0];
        k.n = mnk[1];
        k.k = mnk[2];
        k.tile_m = (double)pt_config_get(cfg, "bm", 0);
        k.tile_n = (double)pt_config_get(cfg, "bn", 0);
        k.elem_bytes = pt_dtype_get(p->dtype)->bytes;
    }
    int64_t epi = pt_config_get(cfg, "epi", -1);
    if (tiled && epi >= 0 && k.tile_m > 0 && k.tile_n > 0) {
        /* a config naming its epilogue (the sm_90a wgmma loop: 0 direct, 1
         * TMA store): its stores of D, tile by tile (search/model.h) */
        enum { MAXT = 24 };
        pt_tensor in[MAXT], out[MAXT];
        int nin = 0, nout = 0;
        ps->op->tensors(ps->pp, &nin, &nout, NULL, NULL);
        if (nin <= MAXT && nout >= 1 && nout <= MAXT && !ps->op->tensors(ps->pp, &nin, &nout, in, out)) {
            double batch = p->batch > 1 ? (double)p->batch : 1;
            k.out_tile_bytes = k.tile_m * k.tile_n * pt_dtype_get(out[0].dtype)->bytes;
            k.tiles = ceil(k.m / k.tile_m) * ceil(k.n / k.tile_n) * batch;
            k.epi_tma = epi == 1;
            k.epi_hidden = pt_config_get(cfg, "sched", 0) == 1;
        }
    }
    if (ps->op->cost) { /* the op's view of this config (attention: split-KV partials) */
        pt_cost pc = {0, false};
        ps->op->cost(ps->pp, cfg, &pc);
        k.op_traffic = pc.traffic;
        k.pipelined = k.pipelined || pc.pipelined;
    }
    search_estimate est;
    search_estimate_kernel(&sc->dev, &k, &est);
    return est.seconds;
}

static bool valid_cfg(void *ctx, const pt_config *c)
{
    sweep_ctx *sc = ctx;
    prob_state *ps = sc->cur;
    pt_err e = {0};
    return ps->op->check(ps->pp, &sc->target, c, &e) == PT_OK;
}

/* The prior: emit (no compile) and model with estimated registers. */
static double prior_cfg(void *ctx, int64_t index, const pt_config *c)
{
    (void)index;
    sweep_ctx *sc = ctx;
    prob_state *ps = sc->cur;
    ptx_module *m;
    pt_launch l;
    pt_err e = {0};
    if (pt_op_build(ps->op, ps->pp, &sc->target, sc->max_ptx, c, &m, &l, &e))
        return 1e30; /* the measurement will record why; keep it last, not pruned */
    double t = model_of(sc, ps, c, &l, NULL);
    ptx_module_free(m);
    return t;
}

/* ---- building ------------------------------------------------------------- */

/* The mock device times a kernel by its directive: give it the model's
 * estimate with a per-config wobble, so mock sweeps have a landscape (the
 * directive is part of the stored, hashed text). */
static void mock_directive(void *ctx, const pt_config *cfg, const pt_launch *l, pt_buf *text)
{
    sweep_ctx *sc = ctx;
    char cs[256];
    pt_config_str(cfg, cs, sizeof cs);
    double t = model_of(sc, sc->cur, cfg, l, NULL);
    uint64_t h = pt_hash64(cs, strlen(cs));
    double w = 1 + 0.2 * ((double)(h >> 11) * 0x1.0p-53 - 0.5);
    const char *slow = sc->o->mock_slow_match ? sc->o->mock_slow_match : "";
    if (sc->o->mock_slow > 0 && strstr(cs, slow)) /* a planted per-kernel delay */
        w *= sc->o->mock_slow;
    pt_buf_printf(text, "// mock: time_us=%.4f\n", isfinite(t) ? t * 1e6 * w : 1e6);
}

static void do_build(sweep_ctx *sc, prob_state *ps, build *b)
{
    bool mock = strcmp(sc->o->backend ? sc->o->backend : "", "mock") == 0 && !sc->o->measure;
    tuner_build_opts bo = {.target = sc->target, .max_ptx = sc->max_ptx,
                           .comp = sc->o->no_compile ? NULL : sc->comp, .want_cubin = true,
                           .annotate = mock ? mock_directive : NULL, .annotate_ctx = sc};
    b->rc = tuner_build(ps->op, ps->pp, &b->cfg, &bo, &b->b, &b->err);
    if (!b->rc && b->b.ptx)
        db_kernel_hash(b->b.ptx, b->b.ptx_len, b->hash); /* comments are no part of it */
}

static void *builder(void *arg)
{
    sweep_ctx *sc = arg;
    pthread_mutex_lock(&sc->mu);
    for (;;) {
        while (!sc->quit && (sc->hold || sc->next_job >= sc->njobs))
            pthread_cond_wait(&sc->cv_work, &sc->mu);
        if (sc->quit)
            break;
        build *b = &sc->jobs[sc->next_job++];
        prob_state *ps = sc->cur;
        sc->active++;
        pthread_mutex_unlock(&sc->mu);
        if (!b->skip)
            do_build(sc, ps, b);
        pthread_mutex_lock(&sc->mu);
        b->done = true;
        sc->active--;
        pthread_cond_broadcast(&sc->cv_done);
    }
    pthread_mutex_unlock(&sc->mu);
    return NULL;
}

static void pool_submit(sweep_ctx *sc, build *jobs, int n, int problem)
{
    pthread_mutex_lock(&sc->mu);
    sc->jobs = jobs;
    sc->njobs = n;
    sc->next_job = 0;
    sc->problem = problem;
    pthread_cond_broadcast(&sc->cv_work);
    pthread_mutex_unlock(&sc->mu);
}

static void pool_wait(sweep_ctx *sc, build *b)
{
    pthread_mutex_lock(&sc->mu);
    while (!b->done)
        pthread_cond_wait(&sc->cv_done, &sc->mu);
    pthread_mutex_unlock(&sc->mu);
}

/* Stops handing out builds and waits for the ones running: no builder
 * holds any lock while the worker is forked. */
static void pool_hold(sweep_ctx *sc, bool hold)
{
    pthread_mutex_lock(&sc->mu);
    sc->hold = hold;
    if (hold)
        while (sc->active > 0)
            pthread_cond_wait(&sc->cv_done, &sc->mu);
    else
        pthread_cond_broadcast(&sc->cv_work);
    pthread_mutex_unlock(&sc->mu);
}

static void hold_builders(void *ctx, bool on)
{
    pool_hold(ctx, on);
}

/* Waits for the batch to be taken and built, then detaches it. */
static void pool_drain(sweep_ctx *sc)
{
    pthread_mutex_lock(&sc->mu);
    sc->hold = false;
    pthread_cond_broadcast(&sc->cv_work);
    while (sc->next_job < sc->njobs || sc->active > 0)
        pthread_cond_wait(&sc->cv_done, &sc->mu);
    sc->jobs = NULL;
    sc->njobs = sc->next_job = 0;
    pthread_mutex_unlock(&sc->mu);
}

/* ---- the measuring worker (a child process) -------------------------------- */

/* A job: this header, the problem (prob_blob), the PTX, the cubin, the
 * entry name. The problem travels with every job because the worker may
 * have been forked before the sweep reached it (problems are read one at a
 * time); the worker prepares it again when the index changes. */
typedef struct job_hdr {
    int problem, rung, final;
    bool verify;
    uint32_t prob_len, ptx_len, cubin_len;
    pt_launch launch; /* entry: sent after the cubin */
} job_hdr;

/* The string members of pt_problem (every pointer it has): each is sent
 * after the struct as a presence byte and its NUL-terminated text. */
static const size_t prob_strs[] = {
    offsetof(pt_problem, op),     offsetof(pt_problem, expr),     offsetof(pt_problem, shapes),
    offsetof(pt_problem, layout), offsetof(pt_problem, epilogue),
};

static void prob_blob(const pt_problem *p, pt_buf *out)
{
    pt_problem c = *p;
    for (size_t i = 0; i < sizeof prob_strs / sizeof prob_strs[0]; i++)
        *(const char **)(void *)((char *)&c + prob_strs[i]) = NULL;
    out->len = 0;
    pt_buf_putn(out, (const char *)&c, sizeof c);
    for (size_t i = 0; i < sizeof prob_strs / sizeof prob_strs[0]; i++) {
        const char *v = *(const char *const *)(const void *)((const char *)p + prob_strs[i]);
        pt_buf_putc(out, v ? 1 : 0);
        if (v) {
            pt_buf_puts(out, v);
            pt_buf_putc(out, '\0');
        }
    }
}

static int prob_unblob(pt_arena *a, const char *s, size_t len, pt_problem *p, pt_err *e)
{
    if (len < sizeof *p)
        return pt_errf(e, PT_EINVAL, "bad job: short problem");
    memcpy(p, s, sizeof *p);
    size_t at = sizeof *p;
    for (size_t i = 0; i < sizeof prob_strs / sizeof prob_strs[0]; i++) {
        if (at >= len)
            return pt_errf(e, PT_EINVAL, "bad job: short problem");
        const char *v = NULL;
        if (s[at++]) {
            const char *nul = memchr(s + at, '\0', len - at);
            if (!nul)
                return pt_errf(e, PT_EINVAL, "bad job: unterminated problem string");
            v = pt_arena_strndup(a, s + at, (size_t)(nul - (s + at)));
            at = (size_t)(nul - s) + 1;
        }
        *(const char **)(void *)((char *)p + prob_strs[i]) = v;
    }
    return PT_OK;
}

typedef struct wstate {
    sweep_ctx *sc;
    tuner_dev *d;
    tuner_evaluator *ev;
    /* the problem of the last job, prepared here */
    int prob;
    pt_arena *arena;
    const pt_op *op;
    pt_prepared *pp;
} wstate;

/* Makes problem h->problem the worker's, from the job's bytes. */
static int w_problem(wstate *w, const job_hdr *h, const char *blob, pt_err *e)
{
    if (w->prob == h->problem && w->pp)
        return PT_OK;
    tuner_evaluator_drop_io(w->ev); /* the inputs belong to the old problem */
    pt_arena_free(w->arena);
    w->arena = pt_arena_new();
    w->pp = NULL;
    w->prob = -1;
    pt_problem p;
    int rc = prob_unblob(w->arena, blob, h->prob_len, &p, e);
    if (rc)
        return rc;
    w->op = p.op ? pt_op_find(p.op) : NULL;
    if (!w->op)
        return pt_errf(e, PT_EINVAL, "bad job: unknown op");
    rc = w->op->prepare(w->arena, &p, &w->sc->target, &w->pp, e);
    if (rc) {
        w->pp = NULL;
        return rc;
    }
    w->prob = h->problem;
    return PT_OK;
}

static int w_init(void *ctx, void **state, pt_buf *hello, pt_err *e)
{
    sweep_ctx *sc = ctx;
    wstate *w = calloc(1, sizeof *w);
    if (!w)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    w->sc = sc;
    w->prob = -1;
    int rc = tuner_dev_open(sc->o->backend, &sc->dev_opts, &w->d, e);
    /* the pipeline after the build: load, verify (inputs from the seed),
     * time where the backend times, sync; builds come compiled */
    tuner_eval_opts eo = {.target = sc->target, .max_ptx = sc->max_ptx, .check = true,
                          .bench = true, .seed = sc->o->seed ? sc->o->seed : 1,
                          .verify = {.seed = sc->o->seed}};
    if (!rc)
        rc = tuner_evaluator_new(w->d, &eo, &w->ev, e);
    if (rc) {
        tuner_dev_close(w->d);
        free(w);
        return rc;
    }
    pt_buf_putn(hello, (const char *)tuner_dev_info(w->d), sizeof(tuner_devinfo));
    *state = w;
    return PT_OK;
}

static void w_fini(void *state)
{
    wstate *w = state;
    tuner_evaluator_free(w->ev);
    tuner_dev_close(w->d);
    pt_arena_free(w->arena);
    free(w);
}

static void w_job(void *state, const void *req, size_t len, pt_buf *reply, bool *last,
                  tuner_progress_fn progress, void *pctx)
{
    wstate *w = state;
    tuner_result r;
    memset(&r, 0, sizeof r);
    job_hdr h;
    pt_err e = {0};
    *last = false;
    if (len < sizeof h) {
        r.cls = TUNER_LAUNCH_ERROR;
        snprintf(r.msg, sizeof r.msg, "bad job");
        goto out;
    }
    memcpy(&h, req, sizeof h);
    if ((size_t)h.prob_len + h.ptx_len + h.cubin_len + 1 > len - sizeof h) {
        r.cls = TUNER_LAUNCH_ERROR;
        snprintf(r.msg, sizeof r.msg, "bad job");
        goto out;
    }
    const char *blob = (const char *)req + sizeof h;
    const char *ptx = blob + h.prob_len;
    const void *cubin = h.cubin_len ? ptx + h.ptx_len : NULL;
    const char *entry = ptx + h.ptx_len + h.cubin_len;
    h.launch.entry = entry;
    progress(pctx, "load");
    if (w_problem(w, &h, blob, &e)) {
        r.cls = TUNER_LAUNCH_ERROR;
        snprintf(r.phase, sizeof r.phase, "load");
        snprintf(r.msg, sizeof r.msg, "%.1000s", e.msg[0] ? e.msg : pt_strerror(e.code));
        *last = tuner_dev_sticky(w->d);
        goto out;
    }
    /* successive halving: lower rungs get a fraction of the protocol */
    double frac = h.final ? 1.0 : h.rung == 0 ? 0.1 : 0.3;
    tuner_bench_opts bo = {.budget_ms = 500 * frac, .min_reps = frac < 1 ? 5 : 0};
    /* the emulator on a problem too large to emulate: the PTX parsed and
     * loaded; nothing runs */
    tuner_candidate c = {.op = w->op, .pp = w->pp, .ptx = ptx, .launch = &h.launch};
    tuner_eval_how how = {.cubin = cubin, .cubin_size = h.cubin_len, .compiled = true,
                          .ptx_len = h.ptx_len,
                          .load_only = !h.verify && !tuner_dev_can_time(w->d), .bench = &bo};
    tuner_eval_job(w->ev, w->d, &c, &how, &r, last, progress, pctx);
out:
    pt_buf_putn(reply, (const char *)&r, sizeof r);
}

/* What the pipeline's result says, as the store records it. */
static void meas_of(const tuner_result *r, sweep_meas *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->cls, sizeof m->cls, "%s", tuner_outcome_name(r->cls));
    snprintf(m->phase, sizeof m->phase, "%s", r->phase);
    snprintf(m->msg, sizeof m->msg, "%.1000s", r->msg);
    /* verified: the check passed (a later failure keeps it) */
    m->verified = r->verified && r->verify.cls == TUNER_OK &&
                  !(r->cls != TUNER_OK && strcmp(r->phase, "verify") == 0);
    m->timed = r->benched;
    if (r->benched) {
        m->t_min = r->bench.st.min;
        m->t_median = r->bench.st.median;
        m->t_max = r->bench.st.max;
        m->spread = r->bench.st.spread;
        m->reps = r->bench.st.n;
    }
}

/* Measures one built candidate in the worker. */
static int measure_worker(sweep_ctx *sc, int problem, const build *b, sweep_meas *m, pt_err *e)
{
    const tuner_built *t = &b->b;
    job_hdr h = {problem, b->cand.rung, b->cand.final, sc->cur->verify,
                 (uint32_t)sc->cur_blob.len, (uint32_t)t->ptx_len,
                 (uint32_t)(t->compiled ? t->cubin_size : 0), t->launch};
    h.launch.entry = NULL;
    pt_buf req;
    pt_buf_init(&req);
    pt_buf_putn(&req, (const char *)&h, sizeof h);
    pt_buf_putn(&req, sc->cur_blob.s, sc->cur_blob.len);
    pt_buf_putn(&req, t->ptx, t->ptx_len);
    if (h.cubin_len)
        pt_buf_putn(&req, t->cubin, h.cubin_len);
    pt_buf_puts(&req, t->entry);
    pt_buf_putc(&req, '\0');
    tuner_result r;
    int rc = tuner_runner_job(&sc->runner, req.s, req.len, &r, e);
    if (!rc)
        meas_of(&r, m);
    pt_buf_free(&req);
    return rc;
}

/* ---- recording ---------------------------------------------------------- */

static int record(db_store *db, int64_t run, prob_state *ps, const sweep_ctx *sc, const build *b,
                  db_class cls, const char *err, const sweep_meas *m, double model_s,
                  double *score, pt_err *e)
{
    const tuner_built *t_b = &b->b;
    bool ok = cls == DB_CLASS_OK;
    bool timed = m && m->timed;
    double t = timed ? m->t_median : model_s;
    *score = ok && isfinite(t) && t > 0 ? t : INFINITY;
    if (ok && !isfinite(*score)) {
        cls = DB_CLASS_RESOURCE_LIMIT;
        err = "the cost model says it cannot launch";
    }
    /* the launch; the contract an engine runs it by (tuner/contract.h) is
     * added when the row is the problem's winner at the end of the problem
     * (winner_contract), not for every candidate */
    pt_buf launch;
    pt_buf_init(&launch);
    pt_buf_printf(&launch, "{\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"smem\":%zu",
                  t_b->launch.grid[0], t_b->launch.grid[1], t_b->launch.grid[2],
                  t_b->launch.block[0], t_b->launch.block[1], t_b->launch.block[2],
                  t_b->launch.smem);
    /* a persistent kernel: grid is its natural extent, launched as
     * min(grid x, grid_per_sm x SMs) (gen/op.h) */
    if (t_b->launch.grid_per_sm)
        pt_buf_printf(&launch, ",\"grid_per_sm\":%u", t_b->launch.grid_per_sm);
    pt_buf_putc(&launch, '}');
    db_kernel k = {b->hash, ps->op->name, b->cfg_str, t_b->entry, t_b->ptx};
    pt_buf res;
    pt_buf_init(&res);
    db_cubin c = {0};
    if (t_b->compiled) {
        pt_resource_json(&t_b->res, &res);
        c = (db_cubin){sc->arch, pt_compiler_describe(sc->comp), t_b->cubin, t_b->cubin_size,
                       res.s};
    }
    bool isok = cls == DB_CLASS_OK;
    double tm = isok ? (timed ? m->t_min : t) : NAN, tM = isok ? (timed ? m->t_max : t) : NAN;
    db_measurement dm = {
        .run_id = run,
        .problem_id = ps->db_id,
        .config = b->cfg_str,
        .rung = b->cand.rung,
        .final = b->cand.final,
        .status = db_class_name(cls),
        .error = err ? err : "",
        /* the mock device's timings are stored and compared, never served */
        .source = !timed ? "model" : sc->mock ? "mock" : "measured",
        .verified = m && m->verified,
        .sample = m && m->sample[0] ? m->sample : NULL,
        .t_min = tm,
        .t_median = isok ? t : NAN,
        .t_max = tM,
        .spread = isok ? (timed ? m->spread : 0) : NAN,
        .reps = timed ? m->reps : 0,
        .tflops = isok && ps->flops > 0 ? ps->flops / t / 1e12 : NAN,
        .gbps = isok && ps->bytes > 0 ? ps->bytes / t / 1e9 : NAN,
        .launch = t_b->ptx ? launch.s : NULL,
    };
    int rc = db_record(db, t_b->ptx ? &k : NULL, t_b->compiled ? &c : NULL, &dm, NULL, e);
    pt_buf_free(&res);
    pt_buf_free(&launch);
    if (!isok)
        *score = INFINITY;
    return rc;
}

/* ---- setup ---------------------------------------------------------------- */

static int pick_threads(const sweep_opts *o)
{
    if (o->threads > 0)
        return o->threads > 64 ? 64 : o->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

static void device_from_info(search_device *d, const tuner_devinfo *di, int sm)
{
    *d = *search_device_for(sm);
    if (di->sm_count > 0)
        d->sm_count = di->sm_count;
    if (di->peak_tensor_tflops > 0)
        d->tensor_tflops = di->peak_tensor_tflops;
    if (di->peak_fp32_tflops > 0)
        d->fp32_tflops = di->peak_fp32_tflops;
    if (di->peak_gbs > 0)
        d->dram_gbs = di->peak_gbs;
    if (di->smem_per_sm > 0)
        d->smem_sm = di->smem_per_sm;
    if (di->smem_optin > 0)
        d->smem_block = di->smem_optin;
    if (di->regs_per_sm > 0)
        d->regs_sm = di->regs_per_sm;
    if (di->clock_khz > 0) /* 128 bytes of shared memory per clock */
        d->smem_gbs = 128.0 * di->clock_khz * 1e-6;
    d->name = NULL;
}

/* pt_hash64 (FNV-1a) fed piece by piece: the key of the arguments with
 * every problem's key, read from the source without keeping them, is the
 * one pt_hash64 gives the whole text (runs started before the problems were
 * streamed resume under the same key). */
static void fnv_add(uint64_t *h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *h ^= (unsigned char)s[i];
        *h *= 0x100000001b3ull;
    }
}

static int args_key(const sweep_opts *o, const sweep_ctx *sc, const sweep_source *src,
                    const char *fpkey, char out[17], pt_err *e)
{
    pt_buf b;
    pt_buf_init(&b);
    /* v2: per-key seeds (a v1 run replays other proposals: never resumed) */
    pt_buf_printf(&b, "v2|%s|%s|%s|%lld|%.17g|%llu|%.17g|%d|%s", o->measure ? "fake" : o->backend,
                  sc->arch, search_kind_name(o->strategy), (long long)o->budget, o->budget_s,
                  (unsigned long long)o->seed, o->prune, o->no_compile, fpkey);
    if (o->mock_slow > 0) /* another device in effect: never the same sweep */
        pt_buf_printf(&b, "|slow %.17g %s", o->mock_slow,
                      o->mock_slow_match ? o->mock_slow_match : "");
    uint64_t h = 0xcbf29ce484222325ull;
    fnv_add(&h, b.s, b.len);
    pt_buf_free(&b);
    int rc = src->open(src->ctx, e), n = 0;
    for (bool got = true; !rc;) {
        search_problem p;
        rc = src->next(src->ctx, &p, &got, e);
        if (rc || !got)
            break;
        fnv_add(&h, "|", 1);
        fnv_add(&h, p.key, strlen(p.key));
        n++;
    }
    if (!rc && n != sc->nps)
        rc = pt_errf(e, PT_EIO, "the problems changed while the sweep read them (%d, then %d)",
                     sc->nps, n);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return rc;
}

static int load_stored(void *ctx, const char *config, int rung, const char *status, double score,
                       const char *hash)
{
    smap **maps = ctx;
    bool dup = strcmp(status, db_class_name(DB_CLASS_DUPLICATE)) == 0;
    if (dup && hash) {
        /* a duplicate was told its original's score; rows come in id order,
         * so the original is known already */
        smap_ent *orig = smap_get(maps[1], rung, hash);
        if (orig)
            score = orig->score;
    }
    smap_ent *en = smap_put(maps[0], rung, config);
    if (!en)
        return PT_ENOMEM;
    en->score = score;
    snprintf(en->status, sizeof en->status, "%s", status);
    snprintf(en->hash, sizeof en->hash, "%s", hash ? hash : "");
    if (hash && !dup) {
        smap_ent *h = smap_put(maps[1], rung, hash);
        if (!h)
            return PT_ENOMEM;
        h->score = score;
        snprintf(h->config, sizeof h->config, "%s", config);
    }
    return 0;
}

static void free_build(build *b)
{
    tuner_built_free(&b->b);
}

/* ---- one problem ---------------------------------------------------------- */

/* Candidate b as a finished run of this fingerprint stored it, stored again
 * in this run with that run's sample (no measurement); *found false when
 * no finished run has it. */
static int reuse_stored(db_store *db, sweep_ctx *sc, int64_t run, const build *b, double model_s,
                        double *score, bool *found, sweep_summary *sum, pt_err *e)
{
    prob_state *ps = sc->cur;
    db_reuse ru;
    int rc = db_reuse_find(db, sc->fp_id, ps->db_id, b->hash, b->cand.rung, run, &ru, found, e);
    if (rc || !*found)
        return rc;
    tuner_outcome cls = tuner_outcome_parse(ru.status);
    if (cls == TUNER_NOUTCOMES)
        return pt_errf(e, PT_EINVAL, "a stored candidate has class '%s'", ru.status);
    sweep_meas m = {.verified = ru.verified, .timed = strcmp(ru.source, "model") != 0,
                    .t_min = ru.t_min, .t_median = ru.t_median, .t_max = ru.t_max,
                    .spread = ru.spread, .reps = ru.reps};
    snprintf(m.cls, sizeof m.cls, "%s", ru.status);
    snprintf(m.msg, sizeof m.msg, "%s", ru.error);
    snprintf(m.sample, sizeof m.sample, "%s", ru.sample);
    rc = record(db, run, ps, sc, b, (db_class)cls, m.msg, &m,
                m.timed || !isfinite(ru.t_median) ? model_s : ru.t_median, score, e);
    if (!rc) {
        sum->carried++;
        sum->failed += cls != TUNER_OK;
    }
    return rc;
}

static int sweep_prepared(db_store *db, sweep_ctx *sc, int pi, int64_t run, sweep_summary *sum,
                          pt_err *e)
{
    const sweep_opts *o = sc->o;
    prob_state *ps = sc->cur;
    /* the seed follows the problem's key, not its place in the set: a shard
     * or a reordered set proposes the same candidates */
    uint64_t pseed = o->seed ^ pt_hash64(ps->sp->key, strlen(ps->sp->key)) * 0x9e3779b97f4a7c15ull;
    search_opts so = {.kind = o->strategy, .seed = pseed,
                      .budget = o->budget, .prior = prior_cfg, .prior_ctx = sc,
                      .prune = o->prune};
    search *s;
    int rc = search_new(&ps->space, &so, valid_cfg, sc, &s, e);
    if (rc)
        return pt_errf(e, rc, "%s: %s", ps->sp->name[0] ? ps->sp->name : ps->sp->key, e->msg);
    sum->pruned += search_pruned_count(s);
    smap stored = {0}, hashes = {0};
    smap *maps[2] = {&stored, &hashes};
    rc = db_run_results(db, run, ps->db_id, load_stored, maps, e);
    if (rc == PT_ENOMEM && !e->msg[0])
        pt_errf(e, rc, "out of memory (replaying a run's results)");
    double t0 = mono();
    sweep_progress pr = {.problem = pi, .nproblems = sc->nps,
                         .problem_name = ps->sp->name[0] ? ps->sp->name : ps->sp->key,
                         .total = search_planned(s), .best_s = INFINITY};
    char best_cfg[256] = "";
    int64_t measured_here = 0;
    double measure_time = 0;
    enum { BATCH = 64 };
    search_cand cand[BATCH];
    build *jobs = calloc(BATCH, sizeof *jobs);
    if (!jobs && !rc)
        rc = pt_errf(e, PT_ENOMEM, "out of memory");
    int n;
    bool out_of_time = false;
    while (!rc && (n = search_ask(s, cand, BATCH)) != 0) {
        if (n < 0) {
            rc = pt_errf(e, -n, "out of memory (the search's proposals)");
            break;
        }
        for (int i = 0; i < n; i++) {
            build *b = &jobs[i];
            memset(b, 0, sizeof *b);
            b->cand = cand[i];
            pt_space_config(&ps->space, cand[i].index, &b->cfg);
            pt_config_str(&b->cfg, b->cfg_str, sizeof b->cfg_str);
            b->skip = smap_get(&stored, cand[i].rung, b->cfg_str) != NULL;
        }
        pool_submit(sc, jobs, n, pi);
        for (int i = 0; i < n; i++) {
            build *b = &jobs[i];
            if (o->budget_s > 0 && mono() - t0 > o->budget_s) {
                out_of_time = true;
                break;
            }
            if (o->stop && *o->stop) {
                sum->stopped = true;
                break;
            }
            double score = INFINITY;
            smap_ent *known = smap_get(&stored, b->cand.rung, b->cfg_str);
            if (known) {
                score = known->score;
                sum->reused++;
                pr.reused++;
            } else {
                pool_wait(sc, b);
                const tuner_built *t_b = &b->b;
                if (b->rc) {
                    *e = b->err;
                    rc = b->rc;
                    break;
                }
                smap_ent *dup = t_b->ptx ? smap_get(&hashes, b->cand.rung, b->hash) : NULL;
                double tm0 = mono();
                if (t_b->cls != TUNER_OK) {
                    char msg[1100];
                    snprintf(msg, sizeof msg, "%s%s", strcmp(t_b->phase, "emit") ? "" : "emit: ",
                             t_b->msg);
                    sweep_meas none = {0};
                    rc = record(db, run, ps, sc, b, (db_class)t_b->cls, msg, &none, INFINITY,
                                &score, e);
                    sum->failed++;
                } else if (dup) {
                    char msg[320];
                    snprintf(msg, sizeof msg, "same PTX as %s", dup->config);
                    sweep_meas none = {0};
                    rc = record(db, run, ps, sc, b, DB_CLASS_DUPLICATE, msg, &none, INFINITY,
                                &score, e);
                    score = dup->score;
                    sum->duplicates++;
                } else {
                    double model_s = model_of(sc, ps, &b->cfg, &t_b->launch,
                                              t_b->compiled ? &t_b->res : NULL);
                    sweep_meas m = {0};
                    /* incremental: a finished run of this fingerprint (device,
                     * versions, protocol) measured this kernel already */
                    bool again = false;
                    if (!o->fresh && !(o->mock_slow > 0) && t_b->ptx) /* a planted delay is measured */
                        rc = reuse_stored(db, sc, run, b, model_s, &score, &again, sum, e);
                    if (rc || again) {
                        pr.reused += again;
                    } else if (!isfinite(model_s)) {
                        snprintf(m.cls, sizeof m.cls, "%s",
                                 tuner_outcome_name(TUNER_RESOURCE_LIMIT));
                        snprintf(m.msg, sizeof m.msg, "cannot launch (cost model: %s)",
                                 "threads, registers or shared memory");
                    } else if (o->measure) {
                        sweep_cand c = {pi, ps->sp, ps->op, ps->pp, &sc->target, &b->cfg,
                                        b->cfg_str, t_b->ptx, t_b->ptx_len, b->hash,
                                        t_b->compiled ? t_b->cubin : NULL, t_b->cubin_size,
                                        &t_b->launch, t_b->compiled ? &t_b->res : NULL, model_s,
                                        b->cand.rung, b->cand.final};
                        rc = o->measure(o->measure_ctx, &c, &m, e);
                    } else
                        rc = measure_worker(sc, pi, b, &m, e);
                    if (!rc && o->stop && *o->stop) {
                        /* interrupted mid-measurement (the worker may have
                         * caught the same signal): not this kernel's fault */
                        sum->stopped = true;
                        free_build(b);
                        break;
                    }
                    tuner_outcome mc = m.cls[0] ? tuner_outcome_parse(m.cls) : TUNER_LAUNCH_ERROR;
                    if (!rc && !again && mc == TUNER_NOUTCOMES)
                        rc = pt_errf(e, PT_EINVAL, "the measure step gave an unknown class '%s'",
                                     m.cls);
                    if (!rc && !again) {
                        rc = record(db, run, ps, sc, b, (db_class)mc, m.msg, &m, model_s, &score,
                                    e);
                        if (mc != TUNER_OK)
                            sum->failed++;
                        else if (!m.verified)
                            sum->unverified++;
                        sum->measured++;
                        measured_here++;
                        measure_time += mono() - tm0;
                    }
                }
                if (!rc && t_b->ptx && !dup) {
                    smap_ent *h = smap_put(&hashes, b->cand.rung, b->hash);
                    if (h) {
                        h->score = score;
                        snprintf(h->config, sizeof h->config, "%s", b->cfg_str);
                    } else
                        rc = pt_errf(e, PT_ENOMEM, "out of memory");
                }
                if (!rc) {
                    smap_ent *en = smap_put(&stored, b->cand.rung, b->cfg_str);
                    if (en)
                        en->score = score;
                    else
                        rc = pt_errf(e, PT_ENOMEM, "out of memory");
                }
                free_build(b);
                if (rc)
                    break;
            }
            search_tell(s, &b->cand, score);
            pr.done = search_evaluations(s);
            if (!isfinite(score))
                pr.failed++;
            if (b->cand.final && score < pr.best_s) {
                pr.best_s = score;
                snprintf(best_cfg, sizeof best_cfg, "%s", b->cfg_str);
            }
            pr.best_config = best_cfg;
            pr.elapsed_s = mono() - t0;
            int64_t left = pr.total - pr.done;
            pr.eta_s = measured_here ? measure_time / (double)measured_here * (double)left : -1;
            if (o->progress)
                o->progress(o->progress_ctx, &pr);
        }
        pool_drain(sc);
        for (int i = 0; i < n; i++)
            free_build(&jobs[i]);
        if (sum->stopped || out_of_time)
            break;
    }
    free(jobs);
    smap_free(&stored);
    smap_free(&hashes);
    search_free(s);
    return rc;
}

/* ---- the whole sweep ---------------------------------------------------------- */

/* Prepares one problem into ps, in arena a (which ps owns only when the
 * caller says so); errors name its line. */
static int prepare_one(const sweep_ctx *sc, const search_problem *p, prob_state *ps,
                       pt_arena *a, pt_err *e)
{
    memset(ps, 0, sizeof *ps);
    ps->sp = p;
    ps->op = pt_op_find(p->prob.op);
    char where[64] = "";
    if (p->line)
        snprintf(where, sizeof where, "line %d: ", p->line);
    if (!ps->op)
        return pt_errf(e, PT_EINVAL, "%sunknown op '%s'", where, p->prob.op);
    ps->arena = a;
    pt_err pe = {0};
    if (ps->op->prepare(a, &p->prob, &sc->target, &ps->pp, &pe))
        return pt_errf(e, pe.code, "%s%s", where, pe.msg);
    ps->op->space(ps->pp, &sc->target, &ps->space);
    ps->flops = ps->op->flops(ps->pp);
    ps->bytes = ps->op->bytes(ps->pp);
    double limit = sc->o->emu_verify_limit > 0 ? (double)sc->o->emu_verify_limit : 2e7;
    bool emu = sc->o->backend && strcmp(sc->o->backend, "emu") == 0;
    ps->verify = !emu || ps->flops + ps->bytes <= limit;
    return PT_OK;
}

/* The first reading: every problem prepared (then freed) and counted, so a
 * problem the op refuses fails before anything is stored. Problems share an
 * arena for a while (a fresh 1 MB block each would make this pass mostly
 * page faults); CHECK_BATCH of them bound its size. */
enum { CHECK_BATCH = 64 };
static int check_problems(sweep_ctx *sc, const sweep_source *src, pt_err *e)
{
    sc->nps = 0;
    int rc = src->open(src->ctx, e);
    pt_arena *a = NULL;
    while (!rc) {
        search_problem p;
        bool got;
        rc = src->next(src->ctx, &p, &got, e);
        if (rc || !got)
            break;
        if (sc->nps % CHECK_BATCH == 0) {
            pt_arena_free(a);
            a = pt_arena_new();
        }
        prob_state ps;
        rc = prepare_one(sc, &p, &ps, a, e);
        if (!rc && sc->nps == INT32_MAX)
            rc = pt_errf(e, PT_ERANGE, "more than %d problems", INT32_MAX);
        sc->nps++;
    }
    pt_arena_free(a);
    if (!rc && sc->nps == 0)
        rc = pt_errf(e, PT_EINVAL, "no problem to tune");
    return rc;
}

/* The launch contract of the problem's winner under the run's fingerprint,
 * computed once the problem is swept (a winner beaten later in the sweep
 * never needed one) and added to its stored launch: the launch JSON with
 * ,"contract":{...} before its closing brace, the text the tuning loop
 * wrote into every ok row before. A winner that has one (an earlier run's)
 * is left alone; a config that no longer builds gets none (engines refuse
 * the row; an export tries again). Only running out of memory or the store
 * failing is an error. */
static int winner_contract(db_store *db, const sweep_ctx *sc, const prob_state *ps, pt_err *e)
{
    pt_buf cfg, launch, c;
    pt_buf_init(&cfg);
    pt_buf_init(&launch);
    pt_buf_init(&c);
    int64_t mid = 0;
    bool found = false;
    int rc = db_winner_launch(db, sc->fp_id, ps->db_id, &mid, &cfg, &launch, &found, e);
    if (!rc && found && launch.len > 1 && launch.s[launch.len - 1] == '}' &&
        !strstr(launch.s, "\"contract\"")) {
        pt_err ce = {0};
        int crc = tuner_contract_cfg(ps->op, ps->pp, &ps->sp->prob, &sc->target, sc->max_ptx,
                                     cfg.s ? cfg.s : "", &c, &ce);
        if (crc == PT_ENOMEM)
            rc = pt_errf(e, PT_ENOMEM, "out of memory (the launch contract)");
        else if (!crc && c.len) {
            launch.s[--launch.len] = '\0';
            pt_buf_puts(&launch, ",\"contract\":");
            pt_buf_putn(&launch, c.s, c.len);
            pt_buf_putc(&launch, '}');
            rc = db_launch_put(db, mid, launch.s, e);
        }
    }
    pt_buf_free(&cfg);
    pt_buf_free(&launch);
    pt_buf_free(&c);
    return rc;
}

/* One problem of the last reading: prepared, put in the store, swept, its
 * winner given its launch contract, freed. */
static int sweep_problem(db_store *db, sweep_ctx *sc, const search_problem *p, int pi,
                         int64_t run, sweep_summary *sum, pt_err *e)
{
    prob_state ps;
    pt_arena *a = pt_arena_new();
    int rc = prepare_one(sc, p, &ps, a, e);
    if (!rc) {
        db_problem dp = {p->prob.op, p->key, p->klass, p->dims, p->name, ps.flops, ps.bytes,
                         true};
        rc = db_problem_put(db, &dp, &ps.db_id, e);
    }
    if (!rc) {
        prob_blob(&p->prob, &sc->cur_blob);
        sc->cur = &ps;
        rc = sweep_prepared(db, sc, pi, run, sum, e);
        sc->cur = NULL;
        if (!rc)
            rc = winner_contract(db, sc, &ps, e);
    }
    pt_arena_free(a);
    return rc;
}

static void free_ctx(sweep_ctx *sc)
{
    if (sc->threads) {
        pthread_mutex_lock(&sc->mu);
        sc->quit = true;
        pthread_cond_broadcast(&sc->cv_work);
        pthread_mutex_unlock(&sc->mu);
        for (int i = 0; i < sc->nthreads; i++)
            pthread_join(sc->threads[i], NULL);
        free(sc->threads);
    }
    pthread_mutex_destroy(&sc->mu);
    pthread_cond_destroy(&sc->cv_work);
    pthread_cond_destroy(&sc->cv_done);
    if (sc->pool)
        tuner_pool_free(sc->pool);
    pt_buf_free(&sc->cur_blob);
    pt_compiler_close(sc->comp);
}

typedef struct array_src {
    const search_problem *v;
    int n, i;
} array_src;

static int array_open(void *ctx, pt_err *e)
{
    (void)e;
    ((array_src *)ctx)->i = 0;
    return PT_OK;
}

static int array_next(void *ctx, search_problem *out, bool *got, pt_err *e)
{
    (void)e;
    array_src *a = ctx;
    *got = a->i < a->n;
    if (*got)
        *out = a->v[a->i++];
    return PT_OK;
}

int sweep_run(db_store *db, const search_problem *problems, int nproblems, const sweep_opts *o,
              sweep_summary *sum, pt_err *e)
{
    array_src a = {problems, nproblems > 0 ? nproblems : 0, 0};
    sweep_source src = {array_open, array_next, &a};
    return sweep_run_source(db, &src, o, sum, e);
}

/* ---- a shard of a problem set ------------------------------------------------ */

typedef struct shard_src {
    const sweep_source *in;
    uint64_t *sel; /* the key hashes of this shard, sorted */
    size_t nsel;
} shard_src;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t key_hash(const search_problem *p)
{
    return pt_hash64(p->key, strlen(p->key));
}

static int shard_open(void *ctx, pt_err *e)
{
    shard_src *s = ctx;
    return s->in->open(s->in->ctx, e);
}

static int shard_next(void *ctx, search_problem *out, bool *got, pt_err *e)
{
    shard_src *s = ctx;
    for (;;) {
        int rc = s->in->next(s->in->ctx, out, got, e);
        if (rc || !*got)
            return rc;
        uint64_t h = key_hash(out);
        if (bsearch(&h, s->sel, s->nsel, sizeof h, cmp_u64))
            return PT_OK;
    }
}

/* Reads every key once (8 bytes a problem), ranks the distinct key hashes and
 * keeps every shard_count-th from shard_index - 1. */
static int shard_build(shard_src *s, const sweep_source *in, int index, int count, pt_err *e)
{
    memset(s, 0, sizeof *s);
    s->in = in;
    size_t n = 0, cap = 0;
    uint64_t *v = NULL;
    int rc = in->open(in->ctx, e);
    for (bool got = true; !rc;) {
        search_problem p;
        rc = in->next(in->ctx, &p, &got, e);
        if (rc || !got)
            break;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 1024;
            uint64_t *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = pt_errf(e, PT_ENOMEM, "out of memory (the shard's keys)");
                break;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = key_hash(&p);
    }
    if (rc) {
        free(v);
        return rc;
    }
    qsort(v, n, sizeof *v, cmp_u64);
    size_t m = 0, rank = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && v[i] == v[i - 1])
            continue; /* one problem twice: one rank */
        if (rank++ % (size_t)count == (size_t)(index - 1))
            v[m++] = v[i];
    }
    s->sel = v;
    s->nsel = m;
    return PT_OK;
}

static int sweep_run_all(db_store *db, const sweep_source *src, const sweep_opts *o,
                         sweep_summary *sum, pt_err *e);

int sweep_run_source(db_store *db, const sweep_source *src, const sweep_opts *o,
                     sweep_summary *sum, pt_err *e)
{
    if (o->shard_count <= 0)
        return sweep_run_all(db, src, o, sum, e);
    memset(sum, 0, sizeof *sum);
    if (o->shard_index < 1 || o->shard_index > o->shard_count)
        return pt_errf(e, PT_EINVAL, "bad shard %d/%d (1 <= I <= N)", o->shard_index,
                       o->shard_count);
    shard_src ss;
    int rc = shard_build(&ss, src, o->shard_index, o->shard_count, e);
    if (rc)
        return rc;
    if (ss.nsel == 0) {
        free(ss.sel);
        sum->empty_shard = true;
        return PT_OK;
    }
    sweep_source sub = {shard_open, shard_next, &ss};
    rc = sweep_run_all(db, &sub, o, sum, e);
    free(ss.sel);
    return rc;
}

static int sweep_run_all(db_store *db, const sweep_source *src, const sweep_opts *o,
                         sweep_summary *sum, pt_err *e)
{
    memset(sum, 0, sizeof *sum);
    double t_start = mono();
    if (!o->measure && (!o->backend || (strcmp(o->backend, "cuda") && strcmp(o->backend, "emu") &&
                                        strcmp(o->backend, "mock"))))
        return pt_errf(e, PT_EINVAL, "unknown backend '%s' (cuda, emu, mock)",
                       o->backend ? o->backend : "");
    if (o->measure && !o->fingerprint)
        return pt_errf(e, PT_EINVAL, "an in-process measure step needs a fingerprint");
    sweep_ctx sc = {.o = o};
    pt_buf_init(&sc.cur_blob);
    pthread_mutex_init(&sc.mu, NULL);
    pthread_cond_init(&sc.cv_work, NULL);
    pthread_cond_init(&sc.cv_done, NULL);
    bool cuda = !o->measure && strcmp(o->backend, "cuda") == 0;
    bool emu = !o->measure && strcmp(o->backend, "emu") == 0;
    sc.timed_backend = !o->measure && !emu;
    sc.mock = !o->measure && strcmp(o->backend, "mock") == 0;
    sc.dev_opts = (tuner_dev_opts){.emu_threads = 2, .mock_noise = o->mock_noise,
                                   .mock_seed = o->seed + 1};
    pt_err ce = {0};
    if (pt_compiler_open(&sc.comp, &ce) != PT_OK)
        sc.comp = NULL;
    /* the worker: started before any thread exists (it inherits memory,
     * not threads); for cuda its hello is the device, hence the arch */
    tuner_devinfo di = {0};
    int rc = PT_OK;
    if (!o->measure) {
        sc.deadline_s = o->deadline_s > 0 ? o->deadline_s : emu ? 60 : 10;
        tuner_pool_opts po = {.deadline_s = sc.deadline_s};
        tuner_worker_fns fns = {w_init, w_job, w_fini};
        rc = tuner_pool_new(&fns, &sc, &po, &sc.pool, e);
    }
    /* the target: asked, else the device's (asked of a child process: this
     * one must not touch CUDA before forking workers), else sm_80 */
    const char *arch = o->arch;
    char devarch[16];
    if (!rc && !arch && cuda) {
        int ndev = 0;
        rc = tuner_cuda_list_isolated(&di, 1, &ndev, e);
        if (!rc && ndev == 0)
            rc = pt_errf(e, PT_ENODRIVER, "no CUDA device found");
        snprintf(devarch, sizeof devarch, "sm_%d%d", di.cc_major, di.cc_minor);
        arch = devarch;
    }
    if (!arch)
        arch = "sm_80";
    if (!rc) {
        pt_err te = {0};
        if (pt_target_parse(arch, &sc.target, &te))
            rc = pt_errf(e, PT_EINVAL, "%s", te.msg);
        else if (sc.target.assemble_only && !emu && !o->measure)
            rc = pt_errf(e, PT_EUNSUPPORTED, "%s is assemble-only: tune it with --backend emu",
                         arch);
    }
    if (!rc) {
        pt_target_name(&sc.target, sc.arch, sizeof sc.arch);
        sc.max_ptx = pt_toolchain_max_ptx(sc.comp ? pt_compiler_max_ptx(sc.comp) : 0);
        rc = check_problems(&sc, src, e);
    }
    if (!rc && sc.pool) {
        rc = tuner_pool_start(sc.pool, e);
        size_t hl = 0;
        const void *h = rc ? NULL : tuner_pool_hello(sc.pool, &hl);
        if (h && hl == sizeof di)
            memcpy(&di, h, sizeof di);
    }
    if (rc) {
        free_ctx(&sc);
        return rc;
    }
    /* fingerprint and model device */
    char gpu[192], driver[32], compiler[64];
    db_fingerprint fp;
    if (o->measure) {
        fp = *o->fingerprint;
        sc.dev = *search_device_for(sc.target.sm);
    } else if (emu) {
        sc.dev = *search_device_for(sc.target.sm);
        snprintf(gpu, sizeof gpu, "emulator (cost model of %s)", sc.dev.name);
        fp = (db_fingerprint){gpu, sc.target.sm, sc.dev.sm_count, "none", NULL, sc.max_ptx, NULL,
                              "cost-model/1"};
    } else {
        device_from_info(&sc.dev, &di, sc.target.sm);
        snprintf(gpu, sizeof gpu, "%s", di.name);
        snprintf(driver, sizeof driver, "%d", di.driver_version);
        fp = (db_fingerprint){gpu, di.cc_major * 10 + di.cc_minor, di.sm_count, driver, NULL,
                              sc.max_ptx, NULL, TUNER_BENCH_PROTOCOL};
    }
    char generator[64];
    snprintf(generator, sizeof generator, "ptxtune %s", o->tool_version ? o->tool_version : "?");
    snprintf(compiler, sizeof compiler, "%s",
             sc.comp && !o->no_compile ? pt_compiler_describe(sc.comp) : "none");
    if (!o->measure) {
        fp.compiler = compiler;
        fp.generator = generator;
    }
    db_fingerprint_key(&fp, sum->fingerprint);
    snprintf(sum->device, sizeof sum->device, "%s", fp.gpu);
    snprintf(sum->protocol, sizeof sum->protocol, "%s", fp.protocol);
    int64_t fp_id = 0, run = 0;
    char key[17], host[256] = "localhost", budget[64];
    rc = args_key(o, &sc, src, sum->fingerprint, key, e);
    if (!rc)
        rc = db_fingerprint_put(db, &fp, &fp_id, e);
    sc.fp_id = fp_id;
    gethostname(host, sizeof host - 1);
    if (o->budget > 0 && o->budget_s > 0)
        snprintf(budget, sizeof budget, "%lld,%gs", (long long)o->budget, o->budget_s);
    else if (o->budget_s > 0)
        snprintf(budget, sizeof budget, "%gs", o->budget_s);
    else if (o->budget > 0)
        snprintf(budget, sizeof budget, "%lld", (long long)o->budget);
    else
        snprintf(budget, sizeof budget, "all");
    if (!rc && !o->fresh)
        rc = (o->any_host ? db_run_claim_any : db_run_claim)(db, key, fp_id, host, getpid(), &run,
                                                             e);
    sum->resumed = run != 0;
    if (!rc && !run) {
        db_run r = {.fingerprint_id = fp_id, .tool_version = o->tool_version,
                    .git_rev = o->git_rev, .strategy = search_kind_name(o->strategy),
                    .budget = budget, .seed = o->seed,
                    .backend = o->measure ? "fake" : o->backend, .arch = sc.arch,
                    .args_key = key, .host = host, .pid = getpid()};
        rc = db_run_begin(db, &r, &run, e);
    }
    sum->run_id = run;
    if (!rc)
        rc = db_run_uuid(db, run, sum->run_uuid, e);
    /* builders */
    /* the worker is up; it forks again only after an exit */
    sc.runner = (tuner_runner){.pool = sc.pool, .deadline_s = sc.deadline_s,
                               .hold = hold_builders, .hold_ctx = &sc, .may_fork = false};
    int want = pick_threads(o);
    if (!rc) {
        sc.threads = calloc((size_t)want, sizeof *sc.threads);
        if (!sc.threads)
            rc = pt_errf(e, PT_ENOMEM, "out of memory");
    }
    /* nthreads counts the builders started: free_ctx joins those */
    for (int i = 0; !rc && i < want; i++) {
        if (pthread_create(&sc.threads[i], NULL, builder, &sc) != 0) {
            if (i == 0)
                rc = pt_errf(e, PT_ENOMEM, "cannot start a builder thread");
            break;
        }
        sc.nthreads++;
    }
    if (!rc)
        rc = src->open(src->ctx, e);
    for (int i = 0; !rc && i < sc.nps && !sum->stopped; i++) {
        search_problem p;
        bool got;
        rc = src->next(src->ctx, &p, &got, e);
        if (!rc && !got)
            rc = pt_errf(e, PT_EIO, "the problems changed while the sweep read them "
                                    "(%d, then %d)", sc.nps, i);
        if (!rc)
            rc = sweep_problem(db, &sc, &p, i, run, sum, e);
    }
    if (run) {
        pt_err ee = {0};
        /* a full disk or an I/O error of the store is no verdict on the run:
         * it stays resumable (claimed like an interrupted one). When even
         * this update cannot be written, the run stays 'running' under a pid
         * that is gone, which the same host's next sweep claims too. */
        sum->resumable = rc && db_io_failed(db);
        const char *st = rc ? (sum->resumable ? "interrupted" : "failed")
                         : sum->stopped && o->stop && *o->stop ? "interrupted"
                                                              : "done";
        int erc = db_run_end(db, run, st, &ee);
        if (!rc && erc) {
            rc = erc;
            *e = ee;
        }
    }
    free_ctx(&sc);
    sum->wall_s = mono() - t_start;
    return rc;
}
