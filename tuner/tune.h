/* The tuning sweep: problems x strategy -> measured (or modelled)
 * candidates in the store, resumable at any moment.
 *
 * This is the tuner's outer loop: search/ proposes (spaces, strategies,
 * the cost model), the candidate pipeline (tuner/pipeline.h) builds and
 * measures, db/ stores.
 *
 * Per problem: prepare -> the op's space with check() as the constraint ->
 * a strategy (search/search.h) with the cost model as its prior -> batches
 * of proposals. Each proposal is emitted, printed, hashed and compiled on a
 * thread pool while earlier ones are measured; measuring happens in order,
 * one at a time, in an isolated worker process (tuner/pool.h) that owns the
 * device: load (cubin, else PTX), verify against the float64 reference,
 * then the benchmark protocol where the backend times (cuda, mock). On the
 * emulator nothing is timed: the candidate is verified and its score is the
 * cost model's estimate; the row says source=model.
 *
 * Every candidate is one transaction in the store (kernel, cubin,
 * measurement, winner). A sweep killed at any moment resumes: the same
 * command finds its run (same arguments, same fingerprint, its process
 * gone), replays the strategy with the stored scores (no measurement) and
 * measures only what was never stored: at most the candidates in flight are
 * lost. Two configs that print the same PTX are measured once (the second
 * is stored as duplicate with the first one's score). */
#ifndef TUNER_TUNE_H
#define TUNER_TUNE_H

#include <signal.h>

#include "db/db.h"
#include "ptx/compile.h"
#include "search/model.h"
#include "search/problem.h"
#include "search/search.h"

/* One candidate as the measurement step sees it. */
typedef struct sweep_cand {
    int problem;              /* index in the sweep's problem list */
    const search_problem *sp;
    const pt_op *op;
    const pt_prepared *pp;
    const pt_target *target;
    const pt_config *config;
    const char *config_str;
    const char *ptx;
    size_t ptx_len;
    const char *hash;         /* 16 hex digits */
    const void *cubin;        /* NULL when not compiled */
    size_t cubin_size;
    const pt_launch *launch;
    const pt_resource *res;   /* NULL when not compiled */
    double model_s;           /* cost-model estimate */
    int rung;
    bool final;
} sweep_cand;

/* What measuring one candidate gave. cls is an outcome class name
 * (TUNER_OUTCOME_MAP). timed: the t_* fields hold a measurement; otherwise the
 * score is the model's. */
typedef struct sweep_meas {
    char cls[16];
    char phase[32];
    char msg[1024];
    bool verified;
    bool timed;
    double t_min, t_median, t_max, spread;
    int reps;
    char sample[33];          /* reused from a finished run: its uuid; "" measured here */
} sweep_meas;

/* A measurement step in the caller's process (tests: a fake device).
 * Return PT_OK with the outcome in m; an error stops the sweep. */
typedef int (*sweep_measure_fn)(void *ctx, const sweep_cand *c, sweep_meas *m, pt_err *e);

typedef struct sweep_progress {
    int problem, nproblems;
    const char *problem_name;
    int64_t done, total;      /* candidates of this problem */
    int64_t failed, reused;   /* reused: replayed from the store */
    double best_s;            /* INFINITY: none yet */
    const char *best_config;
    double elapsed_s, eta_s;  /* eta < 0: unknown */
} sweep_progress;

typedef struct sweep_opts {
    const char *backend;      /* "cuda" "emu" "mock" (ignored with measure) */
    const char *arch;         /* target, e.g. "sm_80"; NULL: the device's, else sm_80 */
    search_kind strategy;
    int64_t budget;           /* candidates per problem; 0: every valid config */
    double budget_s;          /* seconds per problem; 0: none */
    uint64_t seed;
    int threads;              /* compile threads; 0: online CPUs (at most 8) */
    double prune;             /* see search_opts.prune; 0: only what cannot launch */
    bool no_compile;          /* emu/mock: skip the compile gate (no resource report) */
    bool fresh;               /* never resume, never reuse: a new run measuring everything */
    const char *tool_version, *git_rev;
    double deadline_s;        /* per worker phase; 0: 10 s (60 s on the emulator) */
    int64_t emu_verify_limit; /* emulator: verify problems up to this many flops+bytes;
                               * 0: 2e7; larger ones are not verified (verified=0) */
    int shard_index, shard_count; /* shard_count > 0: only slice shard_index (1-based) of
                               * shard_count: the problems whose key hashes, sorted,
                               * sit at ranks = shard_index - 1 modulo shard_count
                               * (deterministic, balanced, independent of order) */
    bool any_host;            /* the store is this process's own copy (a Slurm task's
                               * node-local store): resume an unfinished run whatever
                               * host it names */
    double mock_noise;        /* mock backend timing noise */
    /* mock backend, tests of regression tracking: kernels whose config
     * contains mock_slow_match ("" every kernel) take mock_slow times the
     * model's time (0: 1, no delay): a planted slowdown */
    double mock_slow;
    const char *mock_slow_match;
    sweep_measure_fn measure; /* non-NULL: measure in-process with this */
    void *measure_ctx;
    const db_fingerprint *fingerprint; /* with measure: the fingerprint to store under */
    void (*progress)(void *ctx, const sweep_progress *p);
    void *progress_ctx;
    const volatile sig_atomic_t *stop; /* set by a signal handler: end cleanly */
} sweep_opts;

typedef struct sweep_summary {
    int64_t run_id;
    char run_uuid[33];
    bool resumed;
    int64_t measured, reused, failed, duplicates, unverified, pruned;
    int64_t carried;          /* candidates taken from finished runs, not measured again */
    double wall_s;
    bool stopped;             /* by opts.stop or the time budget */
    bool resumable;           /* failed on a full disk or an I/O error of the store: the
                               * run is kept ('interrupted') and the same sweep resumes it */
    bool empty_shard;         /* the shard holds no problem: nothing was done */
    char fingerprint[17];
    char device[128];
    char protocol[32];
} sweep_summary;

/* Where a sweep's problems come from, one at a time: the sweep reads them
 * three times (prepare each to check it, so bad input fails before
 * anything is stored; their keys for the run's identity; then tune each),
 * and keeps one problem prepared at a time, so memory does not grow with
 * the length of the list. A problem file is one (search_problem_reader). */
typedef struct sweep_source {
    /* (Re)starts at the first problem. */
    int (*open)(void *ctx, pt_err *e);
    /* The next problem into *out, valid until the next call of next or
     * open; *got false at the end. */
    int (*next)(void *ctx, search_problem *out, bool *got, pt_err *e);
    void *ctx;
} sweep_source;

/* Runs the sweep over the source's problems into the store. Bad input (a
 * problem the op refuses, an unknown arch) fails before any run is started;
 * a source that fails on a later read (a file changed under the sweep)
 * fails the run. */
int sweep_run_source(db_store *db, const sweep_source *src, const sweep_opts *o,
                     sweep_summary *sum, pt_err *e);
/* The same over an array. */
int sweep_run(db_store *db, const search_problem *problems, int nproblems, const sweep_opts *o,
              sweep_summary *sum, pt_err *e);

#endif
