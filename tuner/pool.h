/* Crash isolation: a supervisor process that never touches CUDA feeds jobs
 * to one worker process that owns the device, and replaces the worker when
 * it hangs, crashes or loses its context.
 *
 * The worker is fork()ed (no exec) from the supervisor, so it inherits
 * everything the supervisor built before starting it (ops, prepared
 * problems, candidate lists): jobs only carry small requests, and replies
 * are plain structs (one binary on both ends). This is why the supervisor
 * must not initialise CUDA: a forked child cannot use a parent's driver
 * state. The two talk over a socketpair (a bidirectional pipe; sends use
 * MSG_NOSIGNAL, so a dead peer is an error, not a SIGPIPE) in frames:
 * u32 type, u32 length, payload.
 *
 *   worker start:   HELLO (payload from init) or INIT_FAILED (message)
 *   per job:        JOB ->  PROGRESS* (phase names) -> REPLY | REPLY_LAST
 *
 * Deadlines apply per phase: the clock restarts at every PROGRESS frame, so
 * a long compile or a long benchmark does not count against a kernel that
 * hangs. Past the deadline the worker gets SIGKILL, is reaped, and the job
 * ends as TUNER_JOB_TIMEOUT; a worker that dies mid-job (a signal, an exit)
 * ends it as TUNER_JOB_DIED. REPLY_LAST means the worker exits after this
 * reply (its device is dead after a fault); either way the next job gets a
 * fresh worker, so nothing a job did is ever seen by the next one.
 *
 * Threads: the worker dies with the thread that forked it (PR_SET_PDEATHSIG
 * follows the thread, not the process), so start and run jobs from one
 * long-lived thread; after fork only that thread exists in the child, so
 * locks other supervisor threads held at the fork must not be needed there. */
#ifndef TUNER_POOL_H
#define TUNER_POOL_H

#include "ptx/base.h"

typedef struct tuner_pool tuner_pool;

/* Worker side: called in the child. progress(pctx, "phase") before each
 * step that might hang. */
typedef void (*tuner_progress_fn)(void *pctx, const char *phase);
typedef struct tuner_worker_fns {
    /* Opens what the worker owns (the device); hello goes to the supervisor. */
    int (*init)(void *ctx, void **state, pt_buf *hello, pt_err *e);
    /* One job; *last = true when the worker must exit after replying. */
    void (*job)(void *state, const void *req, size_t len, pt_buf *reply, bool *last,
                tuner_progress_fn progress, void *pctx);
    void (*fini)(void *state);
} tuner_worker_fns;

typedef struct tuner_pool_opts {
    double deadline_s;       /* per phase; 0: 10 s */
    double start_deadline_s; /* worker start up to HELLO; 0: 120 s */
} tuner_pool_opts;

typedef enum tuner_job_status {
    TUNER_JOB_DONE,    /* reply received */
    TUNER_JOB_TIMEOUT, /* killed past the deadline */
    TUNER_JOB_DIED,    /* the worker died without replying */
} tuner_job_status;

typedef struct tuner_job_info {
    tuner_job_status status;
    char phase[32];      /* last phase reported */
    double phase_s;      /* time spent in that phase, up to the reply or the reap */
    double kill_s;       /* TIMEOUT: from the phase start to the worker reaped */
    int signal;          /* DIED: the signal that killed it, 0 if it exited */
    int exit_code;
    bool worker_exited;  /* the worker is gone after this job (any reason) */
} tuner_job_info;

int tuner_pool_new(const tuner_worker_fns *fns, void *ctx, const tuner_pool_opts *o,
                   tuner_pool **out, pt_err *e);
/* Starts a worker now (otherwise the first job does); the HELLO payload is
 * kept (tuner_pool_hello). An INIT_FAILED message comes back as the error
 * with the code the worker's init returned. */
int tuner_pool_start(tuner_pool *p, pt_err *e);
const void *tuner_pool_hello(const tuner_pool *p, size_t *len);
/* Runs one job. PT_OK whenever the job ended one of the three ways (info
 * says which; reply holds the payload when DONE); an error only when no
 * worker could be started or talked to at all. */
int tuner_pool_run(tuner_pool *p, const void *req, size_t len, pt_buf *reply,
                   tuner_job_info *info, pt_err *e);
/* Workers started so far (the first one included). */
int tuner_pool_starts(const tuner_pool *p);
/* Stops the worker (closing its socket ends its loop) and frees the pool. */
void tuner_pool_free(tuner_pool *p);

#endif
