/* run --sweep: a list of candidates, each taken through the candidate
 * pipeline (tuner/pipeline.h) in an isolated worker (tuner/pool.h), so a
 * fault or a hang costs one candidate, never the sweep. The tuning loop
 * that stores its candidates is tuner/tune.h. */
#ifndef TUNER_SWEEP_H
#define TUNER_SWEEP_H

#include "tuner/pipeline.h"

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
