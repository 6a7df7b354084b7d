/* The candidate pipeline: one kernel variant taken to one outcome class.
 *
 *   emit     pt_op_build + ptx_print + hash (tuner_build); a refusal is
 *            compile_error
 *   compile  the compile gate to a cubin (tuner_build); ptxas errors are
 *            compile_error, "too much shared data" and the like resource_limit
 *   load     the backend's module load (cuda: cubin, else the PTX via JIT)
 *   verify   tuner_verify (tuner/verify.h): wrong_answer or the backend's class
 *   time     tuner_bench (tuner/bench.h), when asked and the backend times
 *   sync     a last device sync, so a late asynchronous fault is charged to
 *            this candidate and never to the next one
 *   record   the caller's: tune stores the result (tuner/tune.h), run prints it
 *
 * Every user goes through these functions: `run` (one candidate in this
 * process: tuner_eval), `run --sweep` (a candidate list in an isolated worker:
 * tuner/sweep.h) and `tune` (builders on a thread pool call tuner_build, the
 * worker calls tuner_eval_job, the supervisor tuner_runner_job; tuner/tune.h).
 * In a worker a job starts with a sync: a device that is already broken
 * sends the job back to be retried on a fresh worker. */
#ifndef TUNER_PIPELINE_H
#define TUNER_PIPELINE_H

#include "ptx/compile.h"
#include "tuner/bench.h"
#include "tuner/pool.h"
#include "tuner/verify.h"

/* ---- emit and compile ------------------------------------------------------- */

typedef struct tuner_build_opts {
    pt_target target;
    int max_ptx;             /* .version ceiling; 0: none */
    pt_compiler *comp;       /* NULL: no compile (no resource report, no cubin) */
    bool want_cubin;         /* keep the cubin (else only the resource report) */
    /* Optional: appends to the printed text before it is hashed (the mock
     * device's timing directive). */
    void (*annotate)(void *ctx, const pt_config *c, const pt_launch *l, pt_buf *text);
    void *annotate_ctx;
} tuner_build_opts;

/* One candidate emitted, printed, hashed and compiled. cls is TUNER_OK when
 * it built; else compile_error or resource_limit with phase and msg. */
typedef struct tuner_built {
    tuner_outcome cls;
    char phase[16];          /* emit or compile, where it failed */
    char msg[1024];
    char *ptx;               /* NULL when the emit failed */
    size_t ptx_len;
    uint64_t hash;           /* pt_hash64 of the PTX text: the kernel's identity */
    void *cubin;             /* NULL unless want_cubin and compiled */
    size_t cubin_size;
    bool compiled;
    pt_resource res;
    pt_launch launch;        /* launch.entry points into entry */
    char entry[128];
    double emit_ms;
} tuner_built;

/* Always fills b (free it with tuner_built_free); PT_OK unless the harness
 * itself failed (out of memory: PT_ENOMEM in e). */
int tuner_build(const pt_op *op, const pt_prepared *pp, const pt_config *cfg,
                const tuner_build_opts *o, tuner_built *b, pt_err *e);
void tuner_built_free(tuner_built *b);
/* The compile gate's message says the kernel needs more than the device has. */
bool tuner_is_resource_message(const char *msg);

/* ---- load, verify, time ------------------------------------------------------ */

typedef struct tuner_candidate {
    const pt_op *op;
    const pt_prepared *pp;
    pt_config config;
    /* Optional: the kernel as text with its launch (exec, mock plans, a
     * build from tuner_build); NULL: emitted from config. */
    const char *ptx;
    const pt_launch *launch;
} tuner_candidate;

/* How one candidate goes through the pipeline where it differs from the
 * evaluator's options (tuner_eval_with; tune's worker). */
typedef struct tuner_eval_how {
    /* With the candidate's ptx: compiled is true when the compile gate ran
     * already (cubin is its output; NULL: load the PTX), so it is not
     * compiled again. */
    const void *cubin;
    size_t cubin_size;
    bool compiled;
    size_t ptx_len;        /* the candidate's ptx is this long (0: NUL-terminated) */
    /* Load only, nothing runs (the emulator on a problem too large to
     * emulate): ok once loaded. */
    bool load_only;
    /* Optional: this candidate's benchmark options (a halving rung's
     * shorter protocol); NULL: the evaluator's. */
    const tuner_bench_opts *bench;
} tuner_eval_how;

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
    char phase[32];            /* where it ended: emit compile load verify run bench sync */
    char msg[1024];            /* first error, one line; empty when ok */
    char config[256];
    uint64_t ptx_hash;         /* pt_hash64 of the PTX text: the kernel's identity */
    bool compiled;
    pt_resource res;
    bool verified;             /* the check ran (r.verify says how it ended) */
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
/* Forgets the host tensors (the problem they belong to is about to be freed). */
void tuner_evaluator_drop_io(tuner_evaluator *ev);

/* Takes one candidate through the pipeline. Always fills r; returns PT_OK
 * unless the harness itself failed (out of memory). progress may be NULL. */
int tuner_eval(tuner_evaluator *ev, const tuner_candidate *c, tuner_result *r,
               tuner_progress_fn progress, void *pctx);
/* The same, as how says (NULL: as tuner_eval). */
int tuner_eval_with(tuner_evaluator *ev, const tuner_candidate *c, const tuner_eval_how *how,
                    tuner_result *r, tuner_progress_fn progress, void *pctx);

/* ---- in an isolated worker (tuner/pool.h) ----------------------------------- */

/* Worker side: a sync first (a device broken before this job sets r->retry,
 * not its fault), then tuner_eval; *last when the worker must exit after
 * replying (retry, or a sticky device error). */
void tuner_eval_job(tuner_evaluator *ev, tuner_dev *d, const tuner_candidate *c,
                    const tuner_eval_how *how, tuner_result *r, bool *last,
                    tuner_progress_fn progress, void *pctx);

/* Supervisor side: runs jobs whose reply is a tuner_result, mapping how a job
 * ended to its class (a timeout or a dead worker is the candidate's class,
 * never the next one's) and resending a retry once to a fresh worker. */
typedef struct tuner_runner {
    tuner_pool *pool;
    double deadline_s;        /* the pool's, for the message */
    /* Optional: called with true before a job that may start a worker and
     * with false after it (tune pauses its builder threads: a fork while
     * one holds a lock would leave the lock held in the child). */
    void (*hold)(void *ctx, bool on);
    void *hold_ctx;
    bool may_fork;            /* the next job may start a worker (no worker yet, or it exited) */
    int retries;              /* jobs resent to a fresh worker */
    double max_kill_s;        /* slowest timeout, from its phase start to the reap */
} tuner_runner;

/* One job into r; PT_OK whenever the job ended (r says how), an error only
 * when no worker could be started or talked to. */
int tuner_runner_job(tuner_runner *rn, const void *req, size_t len, tuner_result *r, pt_err *e);

/* ---- which candidates ------------------------------------------------------- */

/* The valid configs of the op's space (check() passes) in space order, the
 * first limit of them (0: all); with sample (0: none) fewer than those, the
 * default config first, then a shuffle seeded by seed of the rest, cut to
 * sample. *out is malloc'ed (free it); PT_ENOMEM when it cannot be. */
int tuner_pick_configs(const pt_op *op, const pt_prepared *pp, const pt_target *t, int64_t limit,
                       int64_t sample, uint64_t seed, pt_config **out, int64_t *n, pt_err *e);

#endif
