/* ptxtune run: one variant (or every variant, --sweep) on a device backend,
 * verified against the float64 reference and timed by the benchmark
 * protocol. A single run owns the device in this process; a sweep runs each
 * candidate in an isolated worker process (tuner/pool.h), so a fault or a
 * hang costs one candidate, never the sweep. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "search/problem.h"
#include "tuner/npy.h"
#include "tuner/sweep.h"

static const char run_usage[] =
    "usage: ptxtune run OP [KEY=VALUE ...] [--expr ... --shape ...] [--dtype D] [--out-dtype D]\n"
    "                  [--out-scale S] [--config k=v,...]\n"
    "                  [--backend cuda|emu|mock] [--arch sm_XX] [--device N] [--check] [--bench]\n"
    "                  [--seed S] [--in NAME=FILE.npy ...] [--out NAME=FILE.npy ...] [--json]\n"
    "                  [--sweep [--limit N] [--sample N] [--deadline SECONDS]]\n"
    "                  [--compiler nvjitlink|ptxas]\n"
    "                  [--budget-ms MS] [--warm-l2] [--no-graph] [--emu-threads N]\n"
    "Emits one variant (the op's default config, or --config), loads it on the backend\n"
    "(default cuda) and runs it once. --check verifies it against the float64 reference\n"
    "(outputs poisoned, guard zones, inputs unchanged; every element up to 2^20 output\n"
    "elements, else >= 4096 sampled per output). --bench times it with the protocol\n"
    "ptxtune-bench/1 (warm-up, L2 flush, rotating inputs, CUDA graphs for short kernels,\n"
    "adaptive repetitions; not on emu). Inputs are uniform in [-2, 2) from --seed (default\n"
    "1) unless --in gives them (.npy; bf16 as uint16 bits, fp8 as uint8 bits, or floats).\n"
    "--out writes an output the kernel produced. Without --arch the cuda backend targets\n"
    "the device's own architecture; emu and mock default to sm_80.\n"
    "--sweep runs every config of the op's space (the first --limit, or --sample N of\n"
    "them picked by --seed, the default config always among them) in an isolated worker\n"
    "process, killed after --deadline seconds (default 10) in any phase, one row each.\n"
    "Exit: 0 ok (every candidate ok); 1 a candidate failed (compile_error resource_limit\n"
    "launch_error fault timeout wrong_answer); 2 bad input; 4 no CUDA driver found.\n";

enum { MAX_IO = 16 };

typedef struct run_opts {
    bool check, bench, sweep, warm_l2, no_graph, has_arch;
    uint64_t seed;
    int device, emu_threads, sample;
    double deadline, budget_ms;
    const char *compiler;
    int nin, nout;
    const char *in[MAX_IO], *out[MAX_IO];
} run_opts;

enum {
    RO_CHECK = CLI_OPT_OWN, RO_BENCH, RO_SWEEP, RO_WARM_L2, RO_NO_GRAPH, RO_SEED, RO_IN, RO_OUT,
    RO_DEVICE, RO_COMPILER, RO_DEADLINE, RO_BUDGET_MS, RO_EMU_THREADS, RO_SAMPLE,
};

static const struct option run_opts_table[] = {
    {"check", no_argument, 0, RO_CHECK},           {"bench", no_argument, 0, RO_BENCH},
    {"sweep", no_argument, 0, RO_SWEEP},           {"warm-l2", no_argument, 0, RO_WARM_L2},
    {"no-graph", no_argument, 0, RO_NO_GRAPH},     {"seed", required_argument, 0, RO_SEED},
    {"in", required_argument, 0, RO_IN},           {"out", required_argument, 0, RO_OUT},
    {"device", required_argument, 0, RO_DEVICE},   {"compiler", required_argument, 0, RO_COMPILER},
    {"deadline", required_argument, 0, RO_DEADLINE},
    {"budget-ms", required_argument, 0, RO_BUDGET_MS},
    {"emu-threads", required_argument, 0, RO_EMU_THREADS},
    {"sample", required_argument, 0, RO_SAMPLE},   {0, 0, 0, 0},
};

/* run's own options, parsed in cli_parse_problem's pass */
static void on_option(void *ctx, int id, const char *val)
{
    run_opts *ro = ctx;
    switch (id) {
    case RO_CHECK: ro->check = true; break;
    case RO_BENCH: ro->bench = true; break;
    case RO_SWEEP: ro->sweep = true; break;
    case RO_WARM_L2: ro->warm_l2 = true; break;
    case RO_NO_GRAPH: ro->no_graph = true; break;
    case RO_SEED: ro->seed = (uint64_t)cli_opt_int("--seed", val, 0, INT32_MAX); break;
    case RO_IN:
        if (ro->nin == MAX_IO)
            cli_die(2, "too many --in (at most %d)", MAX_IO);
        ro->in[ro->nin++] = val;
        break;
    case RO_OUT:
        if (ro->nout == MAX_IO)
            cli_die(2, "too many --out (at most %d)", MAX_IO);
        ro->out[ro->nout++] = val;
        break;
    case RO_DEVICE: ro->device = (int)cli_opt_int("--device", val, 0, 64); break;
    case RO_COMPILER: ro->compiler = val; break;
    case RO_DEADLINE: ro->deadline = cli_opt_real("--deadline", val, 1e-3, 1e6); break;
    case RO_BUDGET_MS: ro->budget_ms = cli_opt_real("--budget-ms", val, 1e-3, 1e7); break;
    case RO_EMU_THREADS: ro->emu_threads = (int)cli_opt_int("--emu-threads", val, 0, 256); break;
    case RO_SAMPLE: ro->sample = (int)cli_opt_int("--sample", val, 1, 1 << 20); break;
    default: break;
    }
}

/* "name=FILE" into its parts; dies naming the item otherwise. */
static void split_item(const char *item, const char *opt, char *name, size_t n, const char **file)
{
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1] || (size_t)(eq - item) >= n)
        cli_die(2, "bad %s '%s' (expected NAME=FILE.npy)", opt, item);
    memcpy(name, item, (size_t)(eq - item));
    name[eq - item] = '\0';
    *file = eq + 1;
}

/* Every --out before anything runs: not an input, not another output, not
 * a directory (an output that is an input would destroy the data it was
 * computed from). */
static void check_outputs(const run_opts *ro)
{
    for (int i = 0; i < ro->nout; i++) {
        char name[64], other[64];
        const char *file, *f2;
        split_item(ro->out[i], "--out", name, sizeof name, &file);
        struct stat st;
        if (stat(file, &st) == 0 && S_ISDIR(st.st_mode))
            cli_die(2, "--out '%s': '%s' is a directory", ro->out[i], file);
        for (int j = 0; j < ro->nin; j++) {
            split_item(ro->in[j], "--in", other, sizeof other, &f2);
            if (strcmp(file, f2) == 0 || pt_same_file(file, f2))
                cli_die(2, "--out '%s': '%s' is also an input (--in %s)", ro->out[i], file,
                        ro->in[j]);
        }
        for (int j = 0; j < i; j++) {
            split_item(ro->out[j], "--out", other, sizeof other, &f2);
            if (strcmp(file, f2) == 0 || pt_same_file(file, f2))
                cli_die(2, "--out '%s': '%s' is also written by --out %s", ro->out[i], file,
                        ro->out[j]);
        }
    }
}

static pt_target device_target(const tuner_devinfo *di)
{
    char name[16];
    snprintf(name, sizeof name, "sm_%d%d", di->cc_major, di->cc_minor);
    pt_target t;
    pt_err e = {0};
    if (pt_target_parse(name, &t, &e))
        cli_die(2, "device %d (%s) is %s: %s", di->ordinal, di->name, name, e.msg);
    return t;
}

/* --in files, as storage bits per input (NULL: random). */
static void load_inputs(const run_opts *ro, const cli_problem *cp, const pt_prepared *pp,
                        void **bits)
{
    int nin, nout;
    pt_tensor in[TUNER_MAX_TENSORS], out[TUNER_MAX_TENSORS];
    cp->op->tensors(pp, &nin, &nout, NULL, NULL);
    if (nin > TUNER_MAX_TENSORS || nout > TUNER_MAX_TENSORS)
        cli_die(2, "too many tensors");
    cp->op->tensors(pp, &nin, &nout, in, out);
    for (int i = 0; i < ro->nin; i++) {
        char name[64];
        const char *file;
        split_item(ro->in[i], "--in", name, sizeof name, &file);
        int k = -1;
        for (int j = 0; j < nin; j++)
            if (strcmp(in[j].name, name) == 0)
                k = j;
        if (k < 0)
            cli_die(2, "--in '%s': no input named '%s'", ro->in[i], name);
        tuner_npy n;
        pt_err e = {0};
        if (tuner_npy_read(file, &n, &e))
            cli_die(2, "%s", e.msg);
        if (n.numel != in[k].numel)
            cli_die(2, "%s has %lld elements; input '%s' has %lld", file, (long long)n.numel, name,
                    (long long)in[k].numel);
        free(bits[k]);
        bits[k] = malloc((size_t)in[k].numel * (size_t)pt_dtype_get(in[k].dtype)->bytes + 1);
        if (!bits[k] || tuner_npy_to_dtype(&n, in[k].dtype, bits[k], &e))
            cli_die(2, "%s: %s", file, e.msg[0] ? e.msg : "out of memory");
        tuner_npy_free(&n);
    }
}

static void write_outputs(const run_opts *ro, const tuner_io *io)
{
    for (int i = 0; i < ro->nout; i++) {
        char name[64];
        const char *file;
        split_item(ro->out[i], "--out", name, sizeof name, &file);
        int k = -1;
        for (int j = 0; io && j < io->nout; j++)
            if (strcmp(io->out[j].name, name) == 0)
                k = j;
        if (!io || !io->out_bits[0])
            cli_die(1, "--out '%s': the kernel produced no outputs", ro->out[i]);
        if (k < 0)
            cli_die(2, "--out '%s': no output named '%s'", ro->out[i], name);
        int64_t shape[TUNER_NPY_MAX_DIMS] = {io->out[k].numel};
        int ndim = 1;
        const pt_tensor *t = &io->out[k];
        if (t->ndim > 0 && t->ndim <= TUNER_NPY_MAX_DIMS) { /* the output's own shape */
            ndim = t->ndim;
            for (int d = 0; d < ndim; d++)
                shape[d] = t->shape[d];
        }
        pt_err e = {0};
        if (tuner_npy_write(file, pt_dtype_get(io->out[k].dtype)->npy, ndim, shape,
                            io->out_bits[k], &e))
            cli_die(1, "%s", e.msg);
    }
}

static void print_result(const tuner_result *r, const tuner_devinfo *di, bool json)
{
    if (json) {
        pt_buf b;
        pt_buf_init(&b);
        tuner_result_json(r, &b);
        b.len--; /* reopen the object to add the device */
        pt_buf_puts(&b, ",\"device\":");
        tuner_devinfo_json(di, &b);
        pt_buf_putc(&b, '}');
        puts(b.s);
        pt_buf_free(&b);
        return;
    }
    /* one line per failure: the message flattened, and no check line for a
     * candidate that failed before anything was compared */
    char msg[sizeof r->msg];
    snprintf(msg, sizeof msg, "%s", r->msg);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = c[1] ? ';' : '\0';
    printf("result   %s%s%s\n", tuner_outcome_name(r->cls), msg[0] ? ": " : "", msg);
    if (r->compiled)
        printf("compile  %d registers, %d bytes spilled, %d bytes shared (%s)\n", r->res.registers,
               r->res.spill_stores + r->res.spill_loads, r->res.shared_bytes, r->res.backend);
    if (r->verified && (r->verify.checked > 0 || r->verify.cls == TUNER_OK)) {
        const tuner_verify_result *v = &r->verify;
        printf("check    %s: %lld %selements, %lld over tolerance %g, max error %.3g%s%s (%.1f ms)\n",
               v->cls == TUNER_OK ? "ok" : tuner_outcome_name(v->cls), (long long)v->checked,
               v->sampled ? "sampled " : "", (long long)v->bad,
               v->worst_tol > 0 ? v->worst_tol : v->tol, v->max_err,
               v->worst[0] ? " at " : "", v->worst, v->seconds * 1e3);
    }
    if (r->benched) {
        const tuner_bench_result *b = &r->bench;
        printf("bench    median %.3f us (min %.3f, max %.3f, cv %.2f%%, %d reps, %d outliers, "
               "spread %.2f%%%s)\n",
               b->st.median * 1e6, b->st.min * 1e6, b->st.max * 1e6, b->st.cv * 100, b->st.n,
               b->st.outliers, b->st.spread * 100, b->converged ? "" : ", not converged");
        printf("         %s, batch %d, %d set%s, L2 %s; %.3f TFLOP/s, %.1f GB/s, %.1f%% of roofline\n",
               b->graph ? "graph" : "launches", b->batch, b->nsets, b->nsets == 1 ? "" : "s",
               b->flushed ? "flushed" : "warm", b->tflops, b->gbs, b->roofline * 100);
        printf("         SM clock %d -> %d MHz, %d -> %d C [%s]\n", b->sm_mhz_before,
               b->sm_mhz_after, b->temp_before, b->temp_after, b->protocol);
    }
}

typedef struct sweep_print {
    bool json;
    const tuner_candidate *c;
} sweep_print;

static void on_result(void *ctx, int i, const tuner_result *r)
{
    const sweep_print *sp = ctx;
    (void)sp->c;
    if (sp->json) {
        pt_buf b;
        pt_buf_init(&b);
        tuner_result_json(r, &b);
        puts(b.s);
        pt_buf_free(&b);
    } else {
        char med[32] = "-", gbs[32] = "-", err[32] = "-";
        if (r->benched) {
            snprintf(med, sizeof med, "%.3f", r->bench.st.median * 1e6);
            snprintf(gbs, sizeof gbs, "%.1f", r->bench.gbs);
        }
        if (r->verified)
            snprintf(err, sizeof err, "%.2g", r->verify.max_err);
        printf("%-5d %-52s %-14s %9s %10s %9s  %s\n", i, r->config, tuner_outcome_name(r->cls), err,
               med, gbs, r->msg);
    }
    fflush(stdout);
}

static int run_sweep(const cli_problem *cp, const run_opts *ro, const char *backend,
                     const pt_prepared *pp, const pt_target *t, tuner_eval_opts *eo)
{
    pt_config *cfg;
    int64_t n64;
    pt_err pe = {0};
    if (tuner_pick_configs(cp->op, pp, t, cp->limit, ro->sample, ro->seed, &cfg, &n64, &pe))
        cli_die(1, "%s", pe.msg);
    int n = (int)n64;
    tuner_candidate *c = calloc((size_t)n + 1, sizeof *c);
    if (!c)
        cli_die(1, "out of memory");
    for (int i = 0; i < n; i++)
        c[i] = (tuner_candidate){cp->op, pp, cfg[i], NULL, NULL};
    free(cfg);
    tuner_result *res = calloc((size_t)n + 1, sizeof *res);
    if (!res)
        cli_die(1, "out of memory");
    sweep_print sp = {cp->json, c};
    tuner_sweep_opts so = {
        .backend = backend,
        .dev = {.ordinal = ro->device, .emu_threads = ro->emu_threads},
        .eval = *eo,
        .pool = {.deadline_s = ro->deadline},
        .on_result = on_result,
        .ctx = &sp,
    };
    if (!cp->json)
        printf("%-5s %-52s %-14s %9s %10s %9s  %s\n", "#", "config", "class", "max_err",
               "median_us", "GB/s", "message");
    tuner_sweep_stats st;
    pt_err e = {0};
    int rc = tuner_sweep(c, n, &so, res, &st, &e);
    if (rc == PT_ENODRIVER)
        cli_die(CLI_EXIT_NODRIVER, "%s", e.msg);
    if (rc)
        cli_die(1, "%s", e.msg);
    int best = -1;
    for (int i = 0; i < n; i++)
        if (res[i].cls == TUNER_OK && res[i].benched &&
            (best < 0 || res[i].bench.st.median < res[best].bench.st.median))
            best = i;
    if (cp->json) {
        printf("{\"summary\":true,\"candidates\":%d", n);
        for (int k = 0; k < TUNER_NOUTCOMES; k++)
            printf(",\"%s\":%d", tuner_outcome_name((tuner_outcome)k), st.count[k]);
        printf(",\"workers\":%d,\"wall_s\":%.3f,\"best\":\"%s\",\"best_median_us\":%.4f}\n",
               st.workers, st.wall_s, best >= 0 ? res[best].config : "",
               best >= 0 ? res[best].bench.st.median * 1e6 : 0.0);
    } else {
        printf("%d candidates on %s (%s):", n, st.dev.name, backend);
        for (int k = 0; k < TUNER_NOUTCOMES; k++)
            if (st.count[k])
                printf(" %d %s", st.count[k], tuner_outcome_name((tuner_outcome)k));
        printf("; %d worker%s, %.2f s\n", st.workers, st.workers == 1 ? "" : "s", st.wall_s);
        if (best >= 0)
            printf("best     %s: %.3f us, %.1f GB/s [%s]\n", res[best].config,
                   res[best].bench.st.median * 1e6, res[best].bench.gbs, res[best].bench.protocol);
    }
    int ok = st.count[TUNER_OK];
    free(res);
    free(c);
    return ok == n ? 0 : 1;
}

int cmd_run(int argc, char **argv)
{
    run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.seed = 1;
    cli_problem cp;
    cli_extra x = {run_opts_table, on_option, &ro, NULL};
    cli_parse_problem(argc, argv, &cp, run_usage, &x);
    ro.has_arch = cp.has_arch;
    check_outputs(&ro);
    const char *backend = cp.backend ? cp.backend : "cuda";
    if (strcmp(backend, "cuda") && strcmp(backend, "emu") && strcmp(backend, "mock"))
        cli_die(2, "unknown backend '%s' (cuda, emu, mock)", backend);
    pt_backend comp = PT_BACKEND_AUTO;
    if (ro.compiler && strcmp(ro.compiler, "nvjitlink") == 0)
        comp = PT_BACKEND_NVJITLINK;
    else if (ro.compiler && strcmp(ro.compiler, "ptxas") == 0)
        comp = PT_BACKEND_PTXAS;
    else if (ro.compiler)
        cli_die(2, "unknown compiler '%s' (nvjitlink, ptxas)", ro.compiler);
    pt_err e = {0};
    pt_target t;
    if (pt_target_parse(cp.arch, &t, &e))
        cli_die(2, "%s", e.msg);
    tuner_dev *d = NULL;
    tuner_devinfo di;
    memset(&di, 0, sizeof di);
    tuner_dev_opts dopts = {.ordinal = ro.device, .emu_threads = ro.emu_threads};
    if (!ro.sweep) { /* the device lives in this process */
        int rc = tuner_dev_open(backend, &dopts, &d, &e);
        if (rc == PT_ENODRIVER)
            cli_die(CLI_EXIT_NODRIVER, "%s", e.msg);
        if (rc)
            cli_die(1, "%s", e.msg);
        di = *tuner_dev_info(d);
    } else if (strcmp(backend, "cuda") == 0 && !ro.has_arch) {
        /* the supervisor must not initialise CUDA: ask a child */
        tuner_devinfo list[16];
        int n;
        int rc = tuner_cuda_list_isolated(list, 16, &n, &e);
        if (rc == PT_ENODRIVER)
            cli_die(CLI_EXIT_NODRIVER, "%s", e.msg);
        if (rc)
            cli_die(1, "%s", e.msg);
        if (ro.device >= n)
            cli_die(2, "no CUDA device %d (%d found)", ro.device, n);
        di = list[ro.device];
    }
    if (strcmp(backend, "cuda") == 0 && !ro.has_arch)
        t = device_target(&di);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    if (cp.op->prepare(a, &cp.prob, &t, &pp, &e))
        cli_die(2, "%s", e.msg);
    void *bits[TUNER_MAX_TENSORS] = {0};
    load_inputs(&ro, &cp, pp, bits);
    if (ro.nin && cp.op->check_inputs) {
        /* given inputs an op refuses (a block-table entry outside the pool)
         * are bad input, one line, before anything runs: the inputs as the
         * verifier will hold them (the seed's values, the files over them) */
        tuner_io *io;
        if (tuner_io_new(cp.op, pp, &io, &e))
            cli_die(1, "%s", e.msg);
        tuner_io_random(io, ro.seed, 0, 0);
        for (int i = 0; i < io->nin; i++)
            if (bits[i])
                tuner_io_set_input(io, i, bits[i]);
        int rc = tuner_io_check_inputs(io, &e);
        tuner_io_free(NULL, io);
        if (rc)
            cli_die(2, "%s", e.msg);
    }
    tuner_eval_opts eo = {
        .target = t,
        .check = ro.check,
        .bench = ro.bench,
        .compiler = comp,
        .seed = ro.seed,
        .inputs = ro.nin ? (const void *const *)bits : NULL,
        .bench_opts = {.budget_ms = ro.budget_ms, .warm_l2 = ro.warm_l2, .no_graph = ro.no_graph},
    };
    int code;
    if (ro.sweep) {
        if (ro.nout)
            cli_die(2, "--out needs a single run (not --sweep)");
        code = run_sweep(&cp, &ro, backend, pp, &t, &eo);
    } else {
        if (ro.bench && !tuner_dev_can_time(d))
            cli_die(2, "the %s backend does not time kernels (--bench needs cuda or mock)", backend);
        pt_config cfg;
        cli_make_config(&cp, pp, &t, &cfg);
        tuner_evaluator *ev;
        if (tuner_evaluator_new(d, &eo, &ev, &e))
            cli_die(1, "%s", e.msg);
        tuner_candidate c = {cp.op, pp, cfg, NULL, NULL};
        tuner_result r;
        tuner_eval(ev, &c, &r, NULL, NULL);
        if (!cp.json && !cp.prob.expr && !cp.prob.shapes) {
            /* an op without an expression and shapes (gemm, attention): its
             * canonical problem key says what runs */
            char tn[16];
            search_problem sp = {.prob = cp.prob};
            search_problem_canon(a, &sp);
            printf("kernel   %s on %s %s (%s), config %s\n", sp.key, backend, di.name,
                   pt_target_name(&t, tn, sizeof tn), r.config);
        } else if (!cp.json) {
            char tn[16];
            printf("kernel   %s '%s' [%s] %s on %s %s (%s), config %s\n", cp.op->name,
                   cp.prob.expr ? cp.prob.expr : "", cp.prob.shapes ? cp.prob.shapes : "",
                   pt_dtype_get(cp.prob.dtype)->name, backend, di.name,
                   pt_target_name(&t, tn, sizeof tn), r.config);
        }
        print_result(&r, &di, cp.json);
        if (!cp.json && r.benched && cp.op->flops_quoted && r.bench.st.median > 0)
            printf("         %.3f TFLOP/s by the %s convention (%.6g flops a launch)\n",
                   cp.op->flops_quoted(pp) / r.bench.st.median * 1e-12,
                   cp.op->flops_quoted_name ? cp.op->flops_quoted_name : "op's quoted",
                   cp.op->flops_quoted(pp));
        if (r.cls == TUNER_OK)
            write_outputs(&ro, tuner_evaluator_io(ev, pp));
        code = r.cls == TUNER_OK ? 0 : 1;
        tuner_evaluator_free(ev);
        tuner_dev_close(d);
    }
    for (int i = 0; i < TUNER_MAX_TENSORS; i++)
        free(bits[i]);
    pt_arena_free(a);
    cli_problem_free(&cp);
    return code;
}
