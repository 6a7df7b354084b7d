/* The CPU PTX emulator: runs a kernel of a ptx_module (from the builder or
 * the parser) over a whole grid, with detectors a GPU does not have.
 *
 * Memory model: device allocations live at fake 64-bit addresses with
 * unmapped gaps between them; every byte has a shadow "written" bit, so
 * reads of memory nothing wrote are reported. Outputs are poisoned
 * (filled and marked unwritten) before a run. Shared memory is a per-CTA
 * window: `mov.u32 %r, smem` gives a window offset, cvta.shared turns it into
 * a generic address (see emu_int.h for the address map). The window is laid
 * out as the hardware does per arch: a reserved region first (1 KB on sm_90
 * and above, none on sm_80-89), optionally an extra shift (opts.smem_shift),
 * then the static arrays (aligned as declared, a redzone after each), then
 * the dynamic (.extern) array of the launch's dyn_smem bytes. Any access
 * outside a declared array, the reserved region included, is out of bounds.
 *
 * Execution: instructions are pre-decoded once per kernel (emu_load) from
 * the IR, dispatched through the ISA table's opcode enum; no string work
 * per step. Each warp keeps per-lane registers and per-lane pcs and always
 * runs the group of lanes with the lowest pc ("min-pc" scheduling, which
 * reconverges structured code without a stack); bar.sync blocks lanes until
 * the CTA's arrivals complete. CTAs may run in parallel on worker threads
 * (opts.threads): each CTA's shared memory is private, global memory is
 * shared, atomics are atomic; races between CTAs are not detected, except
 * on distributed shared memory within a cluster.
 *
 * Hopper: wgmma, stmatrix, elect.sync and setmaxnreg run in wgmma.c,
 * mbarriers in mbarrier.c, TMA and bulk copies in async.c.
 *
 * Clusters (emu_launch.cluster): the CTAs of one cluster run together on
 * one worker, interleaved round by round (each runnable warp a slice per
 * round), so they can block on each other; each has its own shared memory,
 * reached from its peers through shared::cluster addresses (mapa,
 * ld/st/atom/red.shared::cluster, remote mbarrier arrives, multicast TMA).
 * The model of those addresses is in emu_int.h.
 *
 * Not emulated yet (a load-time PT_EUNSUPPORTED, never a wrong answer):
 * .b128 registers, .local variables (the IR declares none), single-bit
 * wgmma (.and.popc). */
#ifndef PTX_EMU_H
#define PTX_EMU_H

#include "ptx/ir.h"

/* When the async engine (TMA and bulk copies, cp.async.mbarrier.arrive)
 * completes in-flight work. A correct kernel gives bit-identical outputs
 * under every schedule. */
typedef enum emu_sched {
    EMU_SCHED_LAZY,   /* only when no warp can run (a waiting warp is parked): the
                         latest legal point, so a read before the wait sees no data */
    EMU_SCHED_EAGER,  /* as soon as it is issued (before the issuing warp runs on) */
    EMU_SCHED_RANDOM, /* at points drawn from schedule_seed (and lazily when stuck) */
} emu_sched;

typedef struct emu_opts {
    bool detect_oob;        /* out-of-bounds global/shared/local access */
    bool detect_uninit;     /* read of memory nothing wrote */
    bool detect_race;       /* shared-memory race between barriers (threads of
                               different warps; atomics excluded) */
    bool detect_divergence; /* .sync.aligned op reached by a non-converged warp */
    bool detect_cp_async;   /* cp.async destination read before its wait */
    bool detect_misaligned; /* misaligned (vector) access */
    bool detect_deadlock;   /* barrier that can never complete (off: the run still
                               stops, returning PT_EEMU without a report) */
    bool detect_async;      /* Hopper async hazards: shared bytes of an in-flight TMA or
                               bulk copy touched, a missing fence.proxy.async, mbarrier
                               misuse and tx counts, tensor-map boxes */
    int threads;            /* worker threads across CTAs; 0 or 1 = serial */
    uint64_t max_steps;     /* per-run work cap (hang guard) in warp instructions, where
                               launching and retiring a CTA also costs EMU_CTA_COST plus
                               EMU_WARP_COST per warp; 0 = default 2^30 */
    int max_reports;        /* reports kept; 0 = default 32 */
    int arch;               /* shared-memory layout of sm_<arch>: 90 and above reserve the
                               window's first 1 KB (ptxas places the first array at 0x400),
                               80-89 reserve nothing; and the most a CTA may use (163 KB on
                               sm_80, 99 KB on sm_86/89, 227 KB on sm_90); 0: the module's
                               .target */
    uint32_t smem_shift;    /* extra bytes between the reserved region and the first shared
                               array on any arch, a multiple of 16 (at most EMU_SMEM_SHIFT_MAX):
                               a kernel that assumes a fixed shared base then touches bytes
                               outside its arrays, which is reported */
    double timeout;         /* wall-clock seconds one emu_run may take, checked as it runs
                               (a "timeout" report, PT_EEMU); 0 = no limit */
    emu_sched schedule;     /* async completion points (default EMU_SCHED_LAZY) */
    uint64_t schedule_seed; /* the seed of EMU_SCHED_RANDOM */
} emu_opts;

/* Parses a schedule as `ptxtune exec --schedule` spells it: "lazy", "eager"
 * or "random:SEED" (SEED a decimal uint64) into o->schedule and
 * o->schedule_seed; PT_EINVAL with a one-line message naming the value. */
int emu_schedule_parse(const char *s, emu_opts *o, pt_err *e);
/* The spelling emu_schedule_parse reads back ("random:7"); buf of n bytes. */
const char *emu_schedule_str(const emu_opts *o, char *buf, size_t n);

/* Guard cost of launching and retiring one CTA, and of setting up each of
 * its warps, in warp instructions (about what they take on the emulator,
 * rounded up): a grid of many empty CTAs trips the guard like a long loop,
 * and up front when the grid alone is over the cap. */
#define EMU_CTA_COST 32u
#define EMU_WARP_COST 8u

/* The shift the tuner's emulator backend (and so every test grid) and
 * `ptxtune exec` apply unless told otherwise: an odd multiple of 128, so no
 * kernel can rely on a zero (or a 256-aligned) base, while bank mapping is
 * that of the unshifted layout. */
#define EMU_SMEM_SHIFT_DEFAULT 128u
#define EMU_SMEM_SHIFT_MAX 65536u

/* Detector report kinds: one X-macro backs the enum and the names that
 * start each report line. */
#define EMU_REPORT_MAP(X)                                                   \
    X(OOB, "out-of-bounds")                                                 \
    X(UNINIT, "uninitialized-read")                                         \
    X(RACE, "shared-race")                                                  \
    X(DIVERGENCE, "divergent-sync")                                         \
    X(CP_ASYNC, "cp-async-read-before-wait")                                \
    X(MISALIGNED, "misaligned")                                             \
    X(DEADLOCK, "deadlock")                                                 \
    X(STEP_CAP, "step-cap")                                                 \
    X(TIMEOUT, "timeout")                                                   \
    X(TRAP, "trap")                                                         \
    X(INVALID, "invalid")                                                   \
    X(MBARRIER, "mbarrier")           /* mbarrier misuse (sm90 ref 5.1) */   \
    X(EXPECT_TX, "expect-tx")         /* tx count negative or not zero */    \
    X(BAD_TENSORMAP, "bad-tensormap")                                       \
    X(CLUSTER, "cluster")                                                   \
    X(WGMMA_HAZARD, "wgmma-hazard")                                         \
    X(WGMMA_MISUSE, "wgmma-misuse")                                         \
    X(ASYNC_RACE, "async-race")                                             \
    X(PROXY_FENCE, "missing-proxy-fence")                                   \
    X(LAYOUT, "layout")                                                     \
    X(SETMAXNREG, "setmaxnreg")                                             \
    X(DSMEM_EXITED, "dsmem-exited-cta") /* DSMEM after (or unordered with) its exit */

typedef enum emu_report_kind {
#define X(id, text) EMU_R_##id,
    EMU_REPORT_MAP(X)
#undef X
    EMU_NREPORT_KINDS
} emu_report_kind;
const char *emu_report_kind_name(emu_report_kind k);

/* All detectors on, serial. */
emu_opts emu_default_opts(void);

/* A context owns device memory, conversion tables and the reports of its
 * last run. One emu_run at a time per context, and no
 * allocation while it runs; separate contexts are independent. */
typedef struct emu_ctx emu_ctx;
emu_ctx *emu_new(const emu_opts *o); /* o NULL: emu_default_opts(); NULL: out of memory,
                                      a bad smem_shift or a bad schedule */
void emu_free(emu_ctx *c);

/* Device memory. Pointers are fake device addresses (never 0). */
uint64_t emu_alloc(emu_ctx *c, size_t bytes, const char *name);
int emu_write(emu_ctx *c, uint64_t dptr, const void *src, size_t n, pt_err *e); /* marks written */
int emu_read(emu_ctx *c, uint64_t dptr, void *dst, size_t n, pt_err *e);
/* Fills with a poison byte pattern and marks the bytes unwritten. */
int emu_poison(emu_ctx *c, uint64_t dptr, size_t n, pt_err *e);

typedef struct emu_kernel emu_kernel;
/* Pre-decodes entry `name` (NULL: the only/first entry) of module m. The
 * module must outlive the kernel. */
int emu_load(emu_ctx *c, ptx_module *m, const char *name, emu_kernel **out, pt_err *e);
void emu_kernel_free(emu_kernel *k);
/* Window offset where the reserved region (and the shift) end: the lowest
 * address a shared array of k can have. */
uint32_t emu_kernel_smem_base(const emu_kernel *k);

typedef struct emu_launch {
    unsigned grid[3], block[3];
    size_t dyn_smem; /* bytes of .extern .shared */
} emu_launch;

/* The most CTAs one cluster may have: portable, and with the opt-in. */
#define EMU_CLUSTER_PORTABLE 8u
#define EMU_CLUSTER_MAX 16u

/* Shared-memory bank conflicts, counted per warp-level access with the
 * hardware's model: 32 banks of 4 bytes; lanes reading or writing the same
 * word share it (broadcast); an access of B bytes per lane is served in
 * phases of 128 bytes (B <= 4: the whole warp; 8: half-warps; 16: quarter
 * warps), a phase taking as many wavefronts as the most distinct words any
 * one bank holds. ldmatrix: one phase per 8x16-byte matrix (its 8 row
 * addresses); cp.async: the shared destinations, like a store of cp-size. */
typedef enum emu_bank_class {
    EMU_BANK_LD,       /* ld.shared (and generic loads that land in shared) */
    EMU_BANK_ST,       /* st.shared (and generic stores) */
    EMU_BANK_LDMATRIX, /* ldmatrix rows */
    EMU_BANK_CP_ASYNC, /* cp.async shared destinations */
    EMU_NBANK
} emu_bank_class;
const char *emu_bank_class_name(emu_bank_class b); /* "ld.shared", "st.shared", ... */

typedef struct emu_bank_stat {
    uint64_t accesses;   /* warp-level accesses (executions of such an instruction) */
    uint64_t wavefronts; /* wavefronts they took */
    uint64_t ideal;      /* wavefronts they would take without conflicts */
    uint64_t conflicts;  /* wavefronts - ideal */
    int worst_line;      /* PTX line of the instruction with the most conflicts (0: none) */
    uint32_t worst_pc;   /* its instruction index */
    uint64_t worst_conflicts;
} emu_bank_stat;

typedef struct emu_stats {
    uint64_t lane_instructions; /* executed instructions x active lanes */
    uint64_t warp_instructions;
    double seconds;
    int reports; /* detector reports in this run */
    uint64_t ctas; /* CTAs run to completion */
    uint64_t cost; /* what the hang guard counted: warp instructions + CTA costs */
    emu_bank_stat bank[EMU_NBANK]; /* shared-memory bank conflicts per access class */
} emu_stats;

/* Runs the grid. args[i] points to the value of parameter i (as in
 * cuLaunchKernel): a uint64_t device pointer, a uint32_t, a float, or the
 * bytes of a .b8 array. Returns PT_EEMU when a detector fired (first report
 * in e), PT_EINVAL for a bad launch. */
int emu_run(emu_ctx *c, emu_kernel *k, const emu_launch *l, const void *const *args,
            emu_stats *st, pt_err *e);
/* The same as a cluster launch: cluster[3] CTAs per cluster (NULL or all 0:
 * no cluster launch; each CTA is its own cluster, or the kernel's
 * .reqnctapercluster shape when it has one). The grid must be a multiple;
 * at most EMU_CLUSTER_PORTABLE CTAs, EMU_CLUSTER_MAX with nonportable (the
 * CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED opt-in); PT_EINVAL
 * with one line otherwise. */
int emu_run_cluster(emu_ctx *c, emu_kernel *k, const emu_launch *l, const unsigned *cluster,
                    bool nonportable, const void *const *args, emu_stats *st, pt_err *e);

/* Detector reports of the last run, one line each: kind, kernel, PTX line,
 * CTA and thread, address and nearest allocation. */
int emu_nreports(const emu_ctx *c);
const char *emu_report(const emu_ctx *c, int i);
/* Kind of report i, for tests and the tuner's failure classes. */
emu_report_kind emu_report_kind_of(const emu_ctx *c, int i);
/* Reports are cleared at the start of every emu_run; this clears them now. */
void emu_clear_reports(emu_ctx *c);
/* Size in bytes of the allocation holding dptr (0: none); for tests and
 * tools that print allocations. */
size_t emu_alloc_size(const emu_ctx *c, uint64_t dptr);

#endif
