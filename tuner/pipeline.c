/* The candidate pipeline (tuner/pipeline.h). */
#include "tuner/pipeline.h"

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

/* ---- emit and compile ------------------------------------------------------- */

bool tuner_is_resource_message(const char *m)
{
    static const char *const pats[] = {"too much shared data", "too many resources",
                                       "too much local data", "too much parameter space"};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
        if (strstr(m, pats[i]))
            return true;
    return false;
}

static void build_fail(tuner_built *b, tuner_outcome cls, const char *phase, const pt_err *e)
{
    b->cls = cls;
    snprintf(b->phase, sizeof b->phase, "%s", phase);
    snprintf(b->msg, sizeof b->msg, "%.1000s", e->msg[0] ? e->msg : pt_strerror(e->code));
}

int tuner_build(const pt_op *op, const pt_prepared *pp, const pt_config *cfg,
                const tuner_build_opts *o, tuner_built *b, pt_err *e)
{
    memset(b, 0, sizeof *b);
    double t0 = now_s();
    pt_err be = {0};
    ptx_module *m;
    if (pt_op_build(op, pp, &o->target, o->max_ptx, cfg, &m, &b->launch, &be)) {
        if (be.code == PT_ENOMEM)
            return pt_errf(e, PT_ENOMEM, "%s", be.msg[0] ? be.msg : "out of memory");
        build_fail(b, TUNER_COMPILE_ERROR, "emit", &be);
        return PT_OK;
    }
    snprintf(b->entry, sizeof b->entry, "%s", b->launch.entry ? b->launch.entry : "");
    b->launch.entry = b->entry;
    pt_buf text;
    pt_buf_init(&text);
    ptx_print_buf(m, &text);
    ptx_module_free(m);
    if (o->annotate)
        o->annotate(o->annotate_ctx, cfg, &b->launch, &text);
    b->ptx_len = text.len;
    b->ptx = pt_buf_take(&text);
    if (!b->ptx)
        return pt_errf(e, PT_ENOMEM, "out of memory printing the kernel");
    b->hash = pt_hash64(b->ptx, b->ptx_len);
    b->emit_ms = (now_s() - t0) * 1e3;
    b->cls = TUNER_OK;
    if (o->comp) {
        if (pt_compile(o->comp, b->ptx, &o->target, o->want_cubin ? &b->cubin : NULL,
                       &b->cubin_size, &b->res, &be)) {
            if (be.code == PT_ENOMEM)
                return pt_errf(e, PT_ENOMEM, "%s", be.msg[0] ? be.msg : "out of memory");
            build_fail(b, tuner_is_resource_message(be.msg) ? TUNER_RESOURCE_LIMIT
                                                            : TUNER_COMPILE_ERROR,
                       "compile", &be);
            return PT_OK;
        }
        b->compiled = true;
    }
    return PT_OK;
}

void tuner_built_free(tuner_built *b)
{
    free(b->ptx);
    free(b->cubin);
    b->ptx = NULL;
    b->cubin = NULL;
}

/* ---- the evaluator ------------------------------------------------------------ */

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

void tuner_evaluator_drop_io(tuner_evaluator *ev)
{
    tuner_io_free(ev->d, ev->io);
    ev->io = NULL;
    ev->io_pp = NULL;
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
    tuner_evaluator_drop_io(ev);
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
    if (!rc)
        rc = tuner_io_run(d, k, l, io, e);
    return rc;
}

int tuner_eval(tuner_evaluator *ev, const tuner_candidate *c, tuner_result *r,
               tuner_progress_fn progress, void *pctx)
{
    return tuner_eval_with(ev, c, NULL, r, progress, pctx);
}

int tuner_eval_with(tuner_evaluator *ev, const tuner_candidate *c, const tuner_eval_how *how,
                    tuner_result *r, tuner_progress_fn progress, void *pctx)
{
    static const tuner_eval_how plain = {0};
    if (!how)
        how = &plain;
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    tuner_dev *d = ev->d;
    const tuner_eval_opts *o = &ev->o;
    pt_err e = {0};
    pt_config_str(&c->config, r->config, sizeof r->config);
    tuner_dev_reset_failure(d);
    tuner_built b = {0};
    const char *text = c->ptx;
    size_t len = 0;
    pt_launch l;
    const void *cubin = how->cubin;
    size_t cubin_size = how->cubin_size;
    tuner_kernel *k = NULL;
    int rc = PT_OK, hrc = PT_OK;
    bool need_cubin = strcmp(tuner_dev_info(d)->backend, "cuda") == 0;

#define PHASE(name) (progress ? progress(pctx, name) : (void)0)
    if (text) {
        l = *c->launch;
        len = how->ptx_len ? how->ptx_len : strlen(text);
        if (!how->compiled && (need_cubin || o->compile_always) && compiler(ev)) {
            PHASE("compile");
            void *own = NULL;
            rc = pt_compile(ev->comp, text, &o->target, need_cubin ? &own : NULL, &b.cubin_size,
                            &r->res, &e);
            b.cubin = own;
            if (rc) {
                finish(r, tuner_is_resource_message(e.msg) ? TUNER_RESOURCE_LIMIT
                                                           : TUNER_COMPILE_ERROR,
                       "compile", &e);
                goto out;
            }
            r->compiled = true;
            cubin = b.cubin;
            cubin_size = b.cubin_size;
        }
    } else {
        PHASE("emit");
        tuner_build_opts bo = {.target = o->target, .max_ptx = o->max_ptx,
                               .comp = (need_cubin || o->compile_always) ? compiler(ev) : NULL,
                               .want_cubin = need_cubin};
        hrc = tuner_build(c->op, c->pp, &c->config, &bo, &b, &e);
        if (hrc) {
            finish(r, TUNER_LAUNCH_ERROR, "emit", &e);
            goto out;
        }
        r->emit_ms = b.emit_ms;
        r->compiled = b.compiled;
        r->res = b.res;
        r->ptx_hash = b.hash;
        if (b.cls != TUNER_OK) {
            snprintf(r->msg, sizeof r->msg, "%s", b.msg);
            finish(r, b.cls, b.phase, &e);
            goto out;
        }
        text = b.ptx;
        len = b.ptx_len;
        l = b.launch;
        cubin = b.cubin;
        cubin_size = b.cubin_size;
    }
    r->ptx_hash = pt_hash64(text, len);
    if (!r->emit_ms)
        r->emit_ms = (now_s() - t0) * 1e3;

    PHASE("load");
    tuner_image img = {text, len, cubin, cubin_size, l.entry, c->op, c->pp};
    rc = tuner_load(d, &img, &k, &e);
    if (rc) {
        finish(r, dev_class(d), "load", &e);
        goto out;
    }
    if (how->load_only) {
        finish(r, TUNER_OK, "load", &e);
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
            finish(r, r->verify.cls == TUNER_OK ? TUNER_WRONG_ANSWER : r->verify.cls, "verify",
                   &e);
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
        rc = tuner_bench(d, k, &l, ev->io, how->bench ? how->bench : &o->bench_opts, &r->bench, &e);
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
    tuner_built_free(&b);
    r->total_ms = (now_s() - t0) * 1e3;
    return hrc;
}

/* ---- in an isolated worker --------------------------------------------------- */

void tuner_eval_job(tuner_evaluator *ev, tuner_dev *d, const tuner_candidate *c,
                    const tuner_eval_how *how, tuner_result *r, bool *last,
                    tuner_progress_fn progress, void *pctx)
{
    pt_err e = {0};
    tuner_dev_reset_failure(d);
    if (tuner_sync(d, &e) != PT_OK) {
        memset(r, 0, sizeof *r);
        r->retry = true; /* broken before this job: not its fault */
        r->cls = TUNER_LAUNCH_ERROR;
        snprintf(r->msg, sizeof r->msg, "%s", e.msg);
    } else if (tuner_eval_with(ev, c, how, r, progress, pctx) != PT_OK) {
        r->cls = TUNER_LAUNCH_ERROR; /* the harness failed (out of memory): msg says so */
    }
    *last = r->retry || tuner_dev_sticky(d);
}

int tuner_runner_job(tuner_runner *rn, const void *req, size_t len, tuner_result *r, pt_err *e)
{
    pt_buf reply;
    pt_buf_init(&reply);
    int rc = PT_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        tuner_job_info info;
        bool held = rn->hold && rn->may_fork;
        if (held)
            rn->hold(rn->hold_ctx, true);
        rc = tuner_pool_run(rn->pool, req, len, &reply, &info, e);
        if (held)
            rn->hold(rn->hold_ctx, false);
        if (rc)
            break;
        rn->may_fork = info.worker_exited;
        memset(r, 0, sizeof *r);
        if (info.status == TUNER_JOB_TIMEOUT) {
            r->cls = TUNER_TIMEOUT;
            snprintf(r->phase, sizeof r->phase, "%s", info.phase);
            snprintf(r->msg, sizeof r->msg, "killed after %.3f s in phase '%s' (deadline %.3f s)",
                     info.kill_s, info.phase, rn->deadline_s > 0 ? rn->deadline_s : 10);
            r->total_ms = info.kill_s * 1e3;
            if (info.kill_s > rn->max_kill_s)
                rn->max_kill_s = info.kill_s;
        } else if (info.status == TUNER_JOB_DIED) {
            r->cls = TUNER_FAULT;
            snprintf(r->phase, sizeof r->phase, "%s", info.phase);
            snprintf(r->msg, sizeof r->msg, "worker died in phase '%s' (%s %d)", info.phase,
                     info.signal ? "signal" : "exit code",
                     info.signal ? info.signal : info.exit_code);
        } else if (reply.len == sizeof *r) {
            memcpy(r, reply.s, sizeof *r);
            if (r->retry && attempt == 0) {
                rn->retries++;
                continue;
            }
            if (r->retry) {
                r->cls = TUNER_LAUNCH_ERROR;
                snprintf(r->msg, sizeof r->msg, "device broken before the job, twice");
            }
        } else {
            r->cls = TUNER_FAULT;
            snprintf(r->msg, sizeof r->msg, "worker sent a reply of %zu bytes", reply.len);
        }
        break;
    }
    if (!rc && (unsigned)r->cls >= TUNER_NOUTCOMES)
        r->cls = TUNER_FAULT;
    pt_buf_free(&reply);
    return rc;
}

/* ---- which candidates ------------------------------------------------------- */

int tuner_pick_configs(const pt_op *op, const pt_prepared *pp, const pt_target *t, int64_t limit,
                       int64_t sample, uint64_t seed, pt_config **out, int64_t *count, pt_err *e)
{
    *out = NULL;
    *count = 0;
    pt_space s;
    op->space(pp, t, &s);
    int64_t total = pt_space_size(&s);
    pt_config *c = malloc(((size_t)total + 1) * sizeof *c);
    if (!c)
        return pt_errf(e, PT_ENOMEM, "out of memory (%lld configs)", (long long)total);
    int64_t n = 0;
    for (int64_t i = 0; i < total && (!limit || n < limit); i++) {
        pt_space_config(&s, i, &c[n]);
        pt_err ce = {0};
        if (op->check(pp, t, &c[n], &ce) == PT_OK)
            n++;
    }
    if (sample && sample < n) {
        /* the default config first, then a seeded shuffle of the rest */
        pt_config def;
        op->defaults(pp, t, &def);
        char want[256], have[256];
        pt_config_str(&def, want, sizeof want);
        for (int64_t i = 0; i < n; i++)
            if (strcmp(pt_config_str(&c[i], have, sizeof have), want) == 0) {
                pt_config tmp = c[0];
                c[0] = c[i];
                c[i] = tmp;
                break;
            }
        uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
        for (int64_t i = n - 1; i > 1; i--) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int64_t j = 1 + (int64_t)((r >> 33) % (uint64_t)i);
            pt_config tmp = c[i];
            c[i] = c[j];
            c[j] = tmp;
        }
        n = sample;
    }
    *out = c;
    *count = n;
    return PT_OK;
}

/* ---- JSON ----------------------------------------------------------------------- */

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
