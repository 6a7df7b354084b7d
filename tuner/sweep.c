/* The isolated sweep of run --sweep (see sweep.h); each candidate goes
 * through the one pipeline (tuner/pipeline.h) in the worker. */
#include "tuner/sweep.h"

#include "tuner/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the sweep: supervisor and worker ---- */

typedef struct sweep_ctx {
    const tuner_candidate *c;
    int n;
    const tuner_sweep_opts *o;
} sweep_ctx;

typedef struct sweep_worker {
    const sweep_ctx *sc;
    tuner_dev *d;
    tuner_evaluator *ev;
} sweep_worker;

static int w_init(void *ctx, void **state, pt_buf *hello, pt_err *e)
{
    const sweep_ctx *sc = ctx;
    sweep_worker *w = calloc(1, sizeof *w);
    if (!w)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    w->sc = sc;
    int rc = tuner_dev_open(sc->o->backend, &sc->o->dev, &w->d, e);
    if (!rc)
        rc = tuner_evaluator_new(w->d, &sc->o->eval, &w->ev, e);
    if (rc) {
        tuner_dev_close(w->d);
        free(w);
        return rc;
    }
    pt_buf_putn(hello, (const char *)tuner_dev_info(w->d), sizeof(tuner_devinfo));
    *state = w;
    return PT_OK;
}

static void w_job(void *state, const void *req, size_t len, pt_buf *reply, bool *last,
                  tuner_progress_fn progress, void *pctx)
{
    sweep_worker *w = state;
    tuner_result r;
    memset(&r, 0, sizeof r);
    int i = -1;
    if (len == sizeof i)
        memcpy(&i, req, sizeof i);
    if (i < 0 || i >= w->sc->n) {
        r.cls = TUNER_LAUNCH_ERROR;
        snprintf(r.msg, sizeof r.msg, "bad job index");
        *last = tuner_dev_sticky(w->d);
    } else {
        tuner_eval_job(w->ev, w->d, &w->sc->c[i], NULL, &r, last, progress, pctx);
    }
    pt_buf_putn(reply, (const char *)&r, sizeof r);
}

static void w_fini(void *state)
{
    sweep_worker *w = state;
    tuner_evaluator_free(w->ev);
    tuner_dev_close(w->d);
    free(w);
}

int tuner_sweep(const tuner_candidate *c, int n, const tuner_sweep_opts *o, tuner_result *results,
                tuner_sweep_stats *st, pt_err *e)
{
    memset(st, 0, sizeof *st);
    double t0 = now_s();
    sweep_ctx sc = {c, n, o};
    tuner_worker_fns fns = {w_init, w_job, w_fini};
    tuner_pool *pool;
    int rc = tuner_pool_new(&fns, &sc, &o->pool, &pool, e);
    if (rc)
        return rc;
    rc = tuner_pool_start(pool, e);
    if (!rc) {
        size_t hl;
        const void *h = tuner_pool_hello(pool, &hl);
        if (hl == sizeof st->dev)
            memcpy(&st->dev, h, sizeof st->dev);
    }
    tuner_runner rn = {.pool = pool, .deadline_s = o->pool.deadline_s};
    for (int i = 0; i < n && !rc; i++) {
        tuner_result *r = &results[i];
        rc = tuner_runner_job(&rn, &i, sizeof i, r, e);
        if (rc)
            break;
        if (!r->config[0])
            pt_config_str(&c[i].config, r->config, sizeof r->config);
        st->count[r->cls]++;
        if (o->on_result)
            o->on_result(o->ctx, i, r);
    }
    st->retries = rn.retries;
    st->max_kill_s = rn.max_kill_s;
    st->workers = tuner_pool_starts(pool);
    tuner_pool_free(pool);
    st->wall_s = now_s() - t0;
    return rc;
}

/* ---- device listing from a child process ---- */

typedef struct list_reply {
    int n;
    tuner_devinfo d[16];
} list_reply;

static int l_init(void *ctx, void **state, pt_buf *hello, pt_err *e)
{
    (void)ctx;
    *state = NULL;
    list_reply r;
    memset(&r, 0, sizeof r);
    int rc = tuner_cuda_list(r.d, 16, &r.n, e);
    if (!rc)
        pt_buf_putn(hello, (const char *)&r, sizeof r);
    return rc;
}

static void l_job(void *state, const void *req, size_t len, pt_buf *reply, bool *last,
                  tuner_progress_fn progress, void *pctx)
{
    (void)state, (void)req, (void)len, (void)reply, (void)progress, (void)pctx;
    *last = true;
}

int tuner_cuda_list_isolated(tuner_devinfo *out, int max, int *n, pt_err *e)
{
    *n = 0;
    tuner_worker_fns fns = {l_init, l_job, NULL};
    tuner_pool_opts po = {.deadline_s = 60, .start_deadline_s = 60};
    tuner_pool *p;
    int rc = tuner_pool_new(&fns, NULL, &po, &p, e);
    if (rc)
        return rc;
    rc = tuner_pool_start(p, e);
    if (!rc) {
        size_t len;
        const void *h = tuner_pool_hello(p, &len);
        list_reply r;
        if (len == sizeof r) {
            memcpy(&r, h, sizeof r);
            *n = r.n;
            for (int i = 0; i < r.n && i < max && i < 16; i++)
                out[i] = r.d[i];
        } else {
            rc = pt_errf(e, PT_EINTERNAL, "device listing: bad reply");
        }
    }
    tuner_pool_free(p);
    return rc;
}
