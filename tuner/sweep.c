/* Candidate pipeline and the isolated sweep (see sweep.h). */
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

struct tuner_evaluator {
    tuner_dev *d;
    tuner_eval_opts o;
    pt_compiler *comp;
    bool comp_tried;
    const pt_prepared *io_pp;
    tuner_io *io;
};

static pt_compiler *compiler(tuner_evaluator *ev);

int tuner_evaluator_new(tuner_dev *d, const tuner_eval_opts *o, tuner_evaluator **out, pt_err *e)
{
    tuner_evaluator *ev = calloc(1, sizeof *ev);
    if (!ev)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    ev->d = d;
    ev->o = *o;
    /* the .version ceiling of a real device: compiler and driver */
    if (!ev->o.max_ptx && strcmp(tuner_dev_info(d)->backend, "cuda") == 0) {
        pt_compiler *c = compiler(ev);
        ev->o.max_ptx = pt_toolchain_max_ptx(c ? pt_compiler_max_ptx(c) : 0);
    }
    *out = ev;
    return PT_OK;
}

void tuner_evaluator_free(tuner_evaluator *ev)
{
    if (!ev)
        return;
    tuner_io_free(ev->d, ev->io);
    pt_compiler_close(ev->comp);
    free(ev);
}

const tuner_io *tuner_evaluator_io(const tuner_evaluator *ev, const pt_prepared *pp)
{
    return ev->io && ev->io_pp == pp ? ev->io : NULL;
}

/* The compile gate, opened on first use; NULL when there is no toolkit
 * (cuda then loads the PTX through the driver's JIT). */
static pt_compiler *compiler(tuner_evaluator *ev)
{
    if (!ev->comp_tried) {
        ev->comp_tried = true;
        pt_err e = {0};
        if (pt_compiler_open(&ev->comp, &e) == PT_OK && ev->o.compiler != PT_BACKEND_AUTO &&
            pt_compiler_set_backend(ev->comp, ev->o.compiler, &e) != PT_OK) {
            pt_compiler_close(ev->comp);
            ev->comp = NULL;
        }
    }
    return ev->comp;
}

/* Host tensors of the candidate's problem: kept while the problem stays. */
static int problem_io(tuner_evaluator *ev, const tuner_candidate *c, pt_err *e)
{
    if (ev->io && ev->io_pp == c->pp)
        return PT_OK;
    tuner_io_free(ev->d, ev->io);
    ev->io = NULL;
    ev->io_pp = NULL;
    int rc = tuner_io_new(c->op, c->pp, &ev->io, e);
    if (rc)
        return rc;
    tuner_io_random(ev->io, ev->o.seed, ev->o.lo, ev->o.hi);
    for (int i = 0; ev->o.inputs && i < ev->io->nin; i++)
        if (ev->o.inputs[i])
            tuner_io_set_input(ev->io, i, ev->o.inputs[i]);
    ev->io_pp = c->pp;
    return PT_OK;
}

static bool is_resource_message(const char *m)
{
    static const char *const pats[] = {"too much shared data", "too many resources",
                                       "too much local data", "too much parameter space"};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
        if (strstr(m, pats[i]))
            return true;
    return false;
}

static void finish(tuner_result *r, tuner_outcome cls, const char *phase, const pt_err *e)
{
    r->cls = cls;
    snprintf(r->phase, sizeof r->phase, "%s", phase);
    if (cls != TUNER_OK && !r->msg[0])
        snprintf(r->msg, sizeof r->msg, "%s", e->msg[0] ? e->msg : pt_strerror(e->code));
}

static tuner_outcome dev_class(tuner_dev *d)
{
    tuner_outcome c = tuner_dev_failure(d);
    return c == TUNER_OK ? TUNER_LAUNCH_ERROR : c;
}

/* Launch once without checking (run without --check): outputs for --out. */
static int plain_run(tuner_dev *d, tuner_kernel *k, const pt_launch *l, tuner_io *io, pt_err *e)
{
    int rc = tuner_io_alloc(d, io, tuner_dev_guard_bytes(d), e);
    if (!rc)
        rc = tuner_io_upload(d, io, e);
    tuner_args a;
    if (!rc)
        rc = tuner_io_bind(d, io, l, &a, e);
    if (!rc)
        rc = tuner_launch(d, k, l, a.p, e);
    if (!rc)
        rc = tuner_sync(d, e);
    if (!rc)
        rc = tuner_io_download(d, io, e);
    return rc;
}

int tuner_eval(tuner_evaluator *ev, const tuner_candidate *c, tuner_result *r,
               tuner_progress_fn progress, void *pctx)
{
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    tuner_dev *d = ev->d;
    const tuner_eval_opts *o = &ev->o;
    pt_err e = {0};
    pt_config_str(&c->config, r->config, sizeof r->config);
    tuner_dev_reset_failure(d);
    ptx_module *m = NULL;
    char *owned = NULL;
    const char *text = c->ptx;
    pt_launch l;
    void *cubin = NULL;
    size_t cubin_size = 0;
    tuner_kernel *k = NULL;
    int rc = PT_OK;

#define PHASE(name) (progress ? progress(pctx, name) : (void)0)
    PHASE("emit");
    if (text) {
        l = *c->launch;
    } else {
        rc = pt_op_build(c->op, c->pp, &o->target, o->max_ptx, &c->config, &m, &l, &e);
        if (rc) {
            finish(r, TUNER_COMPILE_ERROR, "emit", &e);
            goto out;
        }
        text = owned = ptx_print(m);
    }
    size_t len = strlen(text);
    r->ptx_hash = pt_hash64(text, len);
    r->emit_ms = (now_s() - t0) * 1e3;

    bool need_cubin = strcmp(tuner_dev_info(d)->backend, "cuda") == 0;
    if ((need_cubin || o->compile_always) && compiler(ev)) {
        PHASE("compile");
        rc = pt_compile(ev->comp, text, &o->target, need_cubin ? &cubin : NULL, &cubin_size,
                        &r->res, &e);
        if (rc) {
            finish(r, is_resource_message(e.msg) ? TUNER_RESOURCE_LIMIT : TUNER_COMPILE_ERROR,
                   "compile", &e);
            goto out;
        }
        r->compiled = true;
    }

    PHASE("load");
    tuner_image img = {text, len, cubin, cubin_size, l.entry, c->op, c->pp};
    rc = tuner_load(d, &img, &k, &e);
    if (rc) {
        finish(r, dev_class(d), "load", &e);
        goto out;
    }
    rc = problem_io(ev, c, &e);
    if (rc) {
        finish(r, TUNER_LAUNCH_ERROR, "load", &e);
        goto out;
    }
    if (o->check) {
        PHASE("verify");
        rc = tuner_verify(d, k, &l, ev->io, &o->verify, &r->verify, &e);
        r->verified = true;
        if (rc) {
            finish(r, r->verify.cls, "verify", &e);
            goto out;
        }
    } else {
        PHASE("run");
        rc = plain_run(d, k, &l, ev->io, &e);
        if (rc) {
            finish(r, dev_class(d), "run", &e);
            goto out;
        }
    }
    if (o->bench && tuner_dev_can_time(d)) {
        PHASE("bench");
        rc = tuner_bench(d, k, &l, ev->io, &o->bench_opts, &r->bench, &e);
        r->benched = rc == PT_OK;
        if (rc) {
            finish(r, dev_class(d), "bench", &e);
            goto out;
        }
    }
    PHASE("sync");
    rc = tuner_sync(d, &e);
    if (rc) {
        finish(r, dev_class(d), "sync", &e);
        goto out;
    }
    finish(r, TUNER_OK, "done", &e);
#undef PHASE
out:
    tuner_unload(d, k);
    free(cubin);
    free(owned);
    ptx_module_free(m);
    r->total_ms = (now_s() - t0) * 1e3;
    return PT_OK;
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
    pt_err e = {0};
    if (i < 0 || i >= w->sc->n) {
        r.cls = TUNER_LAUNCH_ERROR;
        snprintf(r.msg, sizeof r.msg, "bad job index");
    } else if (tuner_sync(w->d, &e) != PT_OK) {
        r.retry = true; /* broken before this job: not its fault */
        snprintf(r.msg, sizeof r.msg, "%s", e.msg);
    } else {
        tuner_eval(w->ev, &w->sc->c[i], &r, progress, pctx);
    }
    *last = r.retry || tuner_dev_sticky(w->d);
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
    double deadline = o->pool.deadline_s > 0 ? o->pool.deadline_s : 10;
    pt_buf reply;
    pt_buf_init(&reply);
    for (int i = 0; i < n && !rc; i++) {
        tuner_result *r = &results[i];
        for (int attempt = 0; attempt < 2; attempt++) {
            tuner_job_info info;
            rc = tuner_pool_run(pool, &i, sizeof i, &reply, &info, e);
            if (rc)
                break;
            memset(r, 0, sizeof *r);
            pt_config_str(&c[i].config, r->config, sizeof r->config);
            if (info.status == TUNER_JOB_TIMEOUT) {
                r->cls = TUNER_TIMEOUT;
                snprintf(r->phase, sizeof r->phase, "%s", info.phase);
                snprintf(r->msg, sizeof r->msg, "killed after %.3f s in phase '%s' (deadline %.3f s)",
                         info.kill_s, info.phase, deadline);
                r->total_ms = info.kill_s * 1e3;
                if (info.kill_s > st->max_kill_s)
                    st->max_kill_s = info.kill_s;
            } else if (info.status == TUNER_JOB_DIED) {
                r->cls = TUNER_FAULT;
                snprintf(r->phase, sizeof r->phase, "%s", info.phase);
                snprintf(r->msg, sizeof r->msg, "worker died in phase '%s' (%s %d)", info.phase,
                         info.signal ? "signal" : "exit code",
                         info.signal ? info.signal : info.exit_code);
            } else if (reply.len == sizeof *r) {
                memcpy(r, reply.s, sizeof *r);
                if (r->retry && attempt == 0) {
                    st->retries++;
                    continue;
                }
            } else {
                r->cls = TUNER_FAULT;
                snprintf(r->msg, sizeof r->msg, "worker sent a reply of %zu bytes", reply.len);
            }
            break;
        }
        if (rc)
            break;
        st->count[r->cls < TUNER_NOUTCOMES ? r->cls : TUNER_FAULT]++;
        if (o->on_result)
            o->on_result(o->ctx, i, r);
    }
    pt_buf_free(&reply);
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

void tuner_result_json(const tuner_result *r, pt_buf *out)
{
    pt_buf_puts(out, "{\"class\":");
    tuner_json_str(out, tuner_outcome_name(r->cls));
    pt_buf_puts(out, ",\"phase\":");
    tuner_json_str(out, r->phase);
    pt_buf_puts(out, ",\"config\":");
    tuner_json_str(out, r->config);
    pt_buf_printf(out, ",\"ptx_hash\":\"%016llx\",\"msg\":", (unsigned long long)r->ptx_hash);
    tuner_json_str(out, r->msg);
    if (r->compiled)
        pt_buf_printf(out, ",\"registers\":%d,\"spill_bytes\":%d,\"shared_bytes\":%d",
                      r->res.registers, r->res.spill_stores + r->res.spill_loads, r->res.shared_bytes);
    if (r->verified) {
        const tuner_verify_result *v = &r->verify;
        pt_buf_printf(out, ",\"verify\":{\"checked\":%lld,\"bad\":%lld,\"sampled\":%s,\"what\":",
                      (long long)v->checked, (long long)v->bad, v->sampled ? "true" : "false");
        tuner_json_str(out, v->what);
        pt_buf_puts(out, ",\"max_err\":");
        tuner_json_num(out, v->max_err);
        pt_buf_puts(out, ",\"tol\":");
        tuner_json_num(out, v->tol);
        pt_buf_puts(out, ",\"worst\":");
        tuner_json_str(out, v->worst);
        pt_buf_puts(out, ",\"seconds\":");
        tuner_json_num(out, v->seconds);
        pt_buf_putc(out, '}');
    }
    if (r->benched) {
        const tuner_bench_result *b = &r->bench;
        pt_buf_puts(out, ",\"bench\":{\"protocol\":");
        tuner_json_str(out, b->protocol);
        static const char *const names[] = {"median_us", "min_us", "max_us", "mean_us"};
        double v[] = {b->st.median * 1e6, b->st.min * 1e6, b->st.max * 1e6, b->st.mean * 1e6};
        for (int i = 0; i < 4; i++) {
            pt_buf_printf(out, ",\"%s\":", names[i]);
            tuner_json_num(out, v[i]);
        }
        pt_buf_puts(out, ",\"cv\":");
        tuner_json_num(out, b->st.cv);
        pt_buf_puts(out, ",\"spread\":");
        tuner_json_num(out, b->st.spread);
        pt_buf_printf(out, ",\"reps\":%d,\"outliers\":%d,\"converged\":%s,\"batch\":%d,"
                           "\"graph\":%s,\"flushed\":%s,\"nsets\":%d,\"tflops\":",
                      b->st.n, b->st.outliers, b->converged ? "true" : "false", b->batch,
                      b->graph ? "true" : "false", b->flushed ? "true" : "false", b->nsets);
        tuner_json_num(out, b->tflops);
        pt_buf_puts(out, ",\"gbs\":");
        tuner_json_num(out, b->gbs);
        pt_buf_puts(out, ",\"roofline\":");
        tuner_json_num(out, b->roofline);
        pt_buf_printf(out, ",\"sm_mhz_before\":%d,\"sm_mhz_after\":%d,\"temp_before\":%d,"
                           "\"temp_after\":%d}",
                      b->sm_mhz_before, b->sm_mhz_after, b->temp_before, b->temp_after);
    }
    pt_buf_puts(out, ",\"emit_ms\":");
    tuner_json_num(out, r->emit_ms);
    pt_buf_puts(out, ",\"total_ms\":");
    tuner_json_num(out, r->total_ms);
    pt_buf_putc(out, '}');
}
