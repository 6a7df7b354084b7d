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
 * of the released stage before any thread's refill.
 *
 * KIT_PIPE_MBARRIER (sm_90; shared/ref/ptx-sm90.md 5.3), made by
 * kit_pipe_init_mbar: a full and an empty mbarrier per stage (full[s] at
 * bars + 8 s, empty[s] at bars + 8 (stages + s)); full counts the
 * producer's one arrive.expect_tx plus the stage's TMA bytes, empty counts
 * `empty_count` consumer arrivals. Producer: acquire spins on empty[s] at
 * parity phase ^ 1 (the first pass through the ring passes at once),
 * kit_pipe_arrive_tx arms full[s] with the stage's bytes (the copies
 * signal kit_pipe_full(p)), commit moves on. Consumer: wait spins on
 * full[s] at parity phase; release arrives on the empty barrier of the
 * oldest stage not yet released (a third end, so a consumer keeping one
 * stage in flight, wgmma.wait_group 1, releases the one before) and moves
 * that end on. Arrivals come from the threads where `arrive_pred` is true
 * (id 0: every thread). */
#ifndef GEN_KIT_PIPE_H
#define GEN_KIT_PIPE_H

#include "gen/kit/layout.h"

typedef enum kit_pipe_kind { KIT_PIPE_CP_ASYNC, KIT_PIPE_MBARRIER } kit_pipe_kind;

typedef struct kit_pipe_end {
    ptx_reg addr;  /* u32 shared address of the current stage */
    ptx_reg phase; /* u32 0/1, flips at each wrap (id 0: not kept) */
    ptx_reg bar;   /* MBARRIER: u32 shared address of the stage's full barrier */
} kit_pipe_end;

typedef struct kit_pipe {
    ptx_fn *f;
    kit_pipe_kind kind;
    int stages;
    int64_t stage_bytes;
    ptx_reg base, end;  /* u32 shared addresses of stage 0 and past the last */
    kit_pipe_end prod, cons;
    /* MBARRIER */
    ptx_reg bars;       /* u32 shared address of full[0] */
    int empty_count;    /* arrivals that free a stage */
    ptx_reg arrive_pred; /* who arrives on release (id 0: every thread) */
    kit_pipe_end rel;   /* the oldest stage not yet released */
    /* clusters (a peer CTA multicasts into this ring): peer is the u32
     * %cluster_ctarank of the CTA whose empty barrier a release also
     * arrives on (mapa + arrive.release.cluster; id 0: none); cluster:
     * the producer's empty wait is .acquire.cluster */
    ptx_reg peer;
    bool cluster;
} kit_pipe;

/* A ring of `stages` stages of stage_bytes each from the shared address
 * base (u32 register). Both ends start at stage 0; keep_phase: track the
 * phases. */
int kit_pipe_init(ptx_fn *f, kit_pipe *p, kit_pipe_kind kind, int stages, int64_t stage_bytes, ptx_reg base,
                  bool keep_phase);
/* An mbarrier ring (KIT_PIPE_MBARRIER, above) of `stages` stages from
 * base, barriers at bars (16 stages bytes, 8-byte aligned); phases kept.
 * Emits nothing but the ends' registers: kit_pipe_mbar_setup initialises
 * the barriers. */
int kit_pipe_init_mbar(ptx_fn *f, kit_pipe *p, int stages, int64_t stage_bytes, ptx_reg base, ptx_reg bars,
                       int empty_count);
/* mbarrier.init of every barrier by the threads where `who` is true (one
 * thread); the caller then synchronises the CTA (bar.sync) before any use. */
void kit_pipe_mbar_setup(kit_pipe *p, ptx_reg who);
/* Producer (MBARRIER): arms the current stage's full barrier with one
 * arrival and `bytes` of transactions. */
void kit_pipe_arrive_tx(kit_pipe *p, int64_t bytes);
/* Producer (MBARRIER): the current stage's full barrier, the mbarrier its
 * TMA copies complete on. */
ptx_reg kit_pipe_full(const kit_pipe *p);
/* Producer: the stage to write now. */
ptx_reg kit_pipe_acquire(kit_pipe *p);
/* Producer: this stage's copies are issued; moves to the next stage. */
void kit_pipe_commit(kit_pipe *p);
/* Consumer: waits until at most `pending` newer commits are in flight
 * (-1: stages - 2) and the stage is visible; returns its address. */
ptx_reg kit_pipe_wait(kit_pipe *p, int pending);
/* Consumer: done with the stage; moves to the next. */
void kit_pipe_release(kit_pipe *p);
/* MBARRIER: moves end e (&p->prod, &p->cons or &p->rel) n stages on
 * without waiting or arriving (a consumer skipping the stages another
 * consumer reads: pingpong). */
void kit_pipe_skip(kit_pipe *p, kit_pipe_end *e, int64_t n);
/* Drains every commit (e.g. before the stages' memory is reused). */
void kit_pipe_drain(kit_pipe *p);

#endif
