/* Candidates: one kernel variant taken through the whole pipeline (emit,
 * compile, load, verify, benchmark) to one outcome class, and the sweep
 * that runs many of them in an isolated worker (tuner/pool.h).
 *
 * Pipeline of tuner_eval, each step a phase the supervisor times:
 *   emit     pt_op_build + ptx_print (skipped when the candidate brings PTX);
 *            a refusal is compile_error
 *   compile  the compile gate to a cubin for the device's arch (cuda only,
 *            unless compile_always); ptxas errors are compile_error, "too
 *            much shared data" and the like resource_limit
 *   load     the backend's module load (cuda: cubin, else the PTX via JIT)
 *   verify   tuner_verify (tuner/verify.h): wrong_answer or the backend's class
 *   bench    tuner_bench (tuner/bench.h), when asked and the backend times
 *   sync     a last device sync, so a late asynchronous fault is charged to
 *            this candidate and never to the next one
 * In the worker a job also starts with a sync: a device that is already
 * broken sends the job back to be retried on a fresh worker. */
#ifndef TUNER_SWEEP_H
#define TUNER_SWEEP_H

#include "ptx/compile.h"
#include "tuner/bench.h"
#include "tuner/pool.h"
#include "tuner/verify.h"

typedef struct tuner_candidate {
    const pt_op *op;
    const pt_prepared *pp;
    pt_config config;
    /* Optional: the kernel as text with its launch (exec, mock plans);
     * NULL: emitted from config. */
    const char *ptx;
    const pt_launch *launch;
} tuner_candidate;

typedef struct tuner_eval_opts {
    pt_target target;       /* the arch to emit and compile for */
    int max_ptx;            /* .version ceiling; 0: none (emu, mock), what the compiler
                             * and the driver accept (cuda) */
    bool check;             /* verify against the reference */
    bool bench;             /* run the benchmark protocol (after a passing check) */
    bool compile_always;    /* compile on emu/mock too (catches what ptxas refuses) */
    pt_backend compiler;    /* PT_BACKEND_AUTO: nvJitLink, else ptxas */
    uint64_t seed;          /* inputs (0: 1) */
    double lo, hi;          /* input range (0,0: [-2, 2)) */
    const void *const *inputs; /* optional: input bits per input (NULL entries: random) */
    tuner_verify_opts verify;
    tuner_bench_opts bench_opts;
} tuner_eval_opts;

/* What became of one candidate: a plain struct (it crosses the worker's
 * socket as bytes). */
typedef struct tuner_result {
    tuner_outcome cls;
    char phase[32];            /* where it ended: emit compile load verify bench sync */
    char msg[1024];            /* first error, one line; empty when ok */
    char config[256];
    uint64_t ptx_hash;         /* pt_hash64 of the PTX text: the kernel's identity */
    bool compiled;
    pt_resource res;
    bool verified;
    tuner_verify_result verify;
    bool benched;
    tuner_bench_result bench;
    double emit_ms, total_ms;
    bool retry;                /* worker only: device broken before this job began */
} tuner_result;

/* The result as one JSON object (no trailing newline): class, phase,
 * config, ptx_hash, msg, resources, verify{...}, bench{protocol, ...}. */
void tuner_result_json(const tuner_result *r, pt_buf *out);

/* The device and the host tensors a worker keeps between candidates. */
typedef struct tuner_evaluator tuner_evaluator;
int tuner_evaluator_new(tuner_dev *d, const tuner_eval_opts *o, tuner_evaluator **out, pt_err *e);
void tuner_evaluator_free(tuner_evaluator *ev);
/* The kernel's outputs of the last verify run of this problem (NULL when
 * none), for --out files. */
const tuner_io *tuner_evaluator_io(const tuner_evaluator *ev, const pt_prepared *pp);

/* Takes one candidate through the pipeline. Always fills r; returns PT_OK
 * unless the harness itself failed (out of memory). progress may be NULL. */
int tuner_eval(tuner_evaluator *ev, const tuner_candidate *c, tuner_result *r,
               tuner_progress_fn progress, void *pctx);

typedef struct tuner_sweep_opts {
    const char *backend;       /* "cuda" "emu" "mock" */
    tuner_dev_opts dev;
    tuner_eval_opts eval;
    tuner_pool_opts pool;      /* deadlines */
    /* Called in the supervisor after each candidate (CLI rows). */
    void (*on_result)(void *ctx, int i, const tuner_result *r);
    void *ctx;
} tuner_sweep_opts;

typedef struct tuner_sweep_stats {
    tuner_devinfo dev;         /* from the first worker's hello */
    int count[TUNER_NOUTCOMES];
    int workers;               /* workers started */
    int retries;               /* jobs resent to a fresh worker */
    double max_kill_s;         /* slowest timeout, from its phase start to the reap */
    double wall_s;
} tuner_sweep_stats;

/* Runs n candidates, each in the isolated worker; results[i] for each. A
 * worker that cannot start (no driver) is the error; every candidate
 * failure is a result. */
int tuner_sweep(const tuner_candidate *c, int n, const tuner_sweep_opts *o, tuner_result *results,
                tuner_sweep_stats *st, pt_err *e);

/* tuner_cuda_list run in a child process, for a supervisor that must not
 * initialise CUDA itself (a forked worker could not use it after). */
int tuner_cuda_list_isolated(tuner_devinfo *out, int max, int *n, pt_err *e);

#endif
