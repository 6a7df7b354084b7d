/* kit pipe: a ring of shared-memory stages between producers (copies
 * into a stage) and consumers (reads of a stage), as acquire / commit /
 * wait / release over a stage index and a phase.
 *
 *   producer: kit_pipe_acquire  a free stage to write (its address)
 *             kit_pipe_commit   the writes of that stage are issued
 *   consumer: kit_pipe_wait     the oldest committed stage has landed and
 *                               is visible to the CTA (its address)
 *             kit_pipe_release  done reading it: it may be refilled
 *
 * The stage addresses are registers walking the ring (add, wrap); the
 * phase flips at each wrap (an mbarrier pipeline waits on it; the
 * cp.async one does not need it). KIT_PIPE_CP_ASYNC: the copies are
 * cp.async groups of each thread, wait is cp.async.wait_group (stages - 2
 * groups may stay in flight, or an explicit count) then bar.sync, and
 * release is implicit: the next wait's bar.sync orders every warp's reads
 * of the released stage before any thread's refill. KIT_PIPE_MBARRIER
 * (full/empty barrier pairs per stage, the Hopper issue) fills the same
 * calls; it is not implemented. */
#ifndef GEN_KIT_PIPE_H
#define GEN_KIT_PIPE_H

#include "gen/kit/layout.h"

typedef enum kit_pipe_kind { KIT_PIPE_CP_ASYNC, KIT_PIPE_MBARRIER } kit_pipe_kind;

typedef struct kit_pipe_end {
    ptx_reg addr;  /* u32 shared address of the current stage */
    ptx_reg phase; /* u32 0/1, flips at each wrap (id 0: not kept) */
} kit_pipe_end;

typedef struct kit_pipe {
    ptx_fn *f;
    kit_pipe_kind kind;
    int stages;
    int64_t stage_bytes;
    ptx_reg base, end;  /* u32 shared addresses of stage 0 and past the last */
    kit_pipe_end prod, cons;
} kit_pipe;

/* A ring of `stages` stages of stage_bytes each from the shared address
 * base (u32 register). Both ends start at stage 0; keep_phase: track the
 * phases. */
int kit_pipe_init(ptx_fn *f, kit_pipe *p, kit_pipe_kind kind, int stages, int64_t stage_bytes, ptx_reg base,
                  bool keep_phase);
/* Producer: the stage to write now. */
ptx_reg kit_pipe_acquire(kit_pipe *p);
/* Producer: this stage's copies are issued; moves to the next stage. */
void kit_pipe_commit(kit_pipe *p);
/* Consumer: waits until at most `pending` newer commits are in flight
 * (-1: stages - 2) and the stage is visible; returns its address. */
ptx_reg kit_pipe_wait(kit_pipe *p, int pending);
/* Consumer: done with the stage; moves to the next. */
void kit_pipe_release(kit_pipe *p);
/* Drains every commit (e.g. before the stages' memory is reused). */
void kit_pipe_drain(kit_pipe *p);

#endif
