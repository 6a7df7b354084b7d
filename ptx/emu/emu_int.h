/* Private header of the emulator: the decoded kernel, the state of a
 * running CTA, and the entry points the ptx/emu/ files share (emu__ names).
 *
 * Address map (generic 64-bit addresses):
 *   global allocation i    [(i+1) << 40, (i+1) << 40 + size)   unmapped gaps between
 *   shared window          EMU_SHARED_BASE + offset             offset = what
 *                          `mov.u32 %r, smem` and ld.shared take: [0, smem_base) is
 *                          the arch's reserved region plus opts.smem_shift (no array
 *                          there), then static vars, each followed by a redzone, then
 *                          the .extern dynamic array
 *   local window           EMU_LOCAL_BASE + offset              per thread
 *   param window           EMU_PARAM_BASE + offset              cvta.param (tensor maps)
 *   shared::cluster        (rank + 1) << EMU_CL_SHIFT | offset: CTA `rank`'s window
 *                          (what mapa returns); an address below 1 << EMU_CL_SHIFT is
 *                          the own CTA's window offset (a shared::cta address is a
 *                          shared::cluster address of its own CTA); a generic one is
 *                          EMU_SHARED_BASE plus either
 * cvta.shared / cvta.to.shared add / subtract EMU_SHARED_BASE; cvta.global is
 * the identity. Kernel parameters live in their own buffer (ld.param).
 *
 * Registers: every PTX register, immediate, special register and symbol
 * address is a "slot"; a warp holds slots x 32 lanes of uint64_t, laid out
 * [slot][lane] so a lane loop walks contiguous memory. Immediates and
 * special registers are slots filled when a warp starts, so every source
 * operand is a plain slot read. A register holds its value zero-extended
 * from its declared width; predicates hold 0 or 1. */
#ifndef PTX_EMU_INT_H
#define PTX_EMU_INT_H

#include "ptx/emu/emu.h"
#include "ptx/num.h"

#include <pthread.h>
#include <string.h>

enum { EMU_LANES = 32, EMU_NBAR = 16 };

#define EMU_GSHIFT 40
#define EMU_GSPAN (1ull << EMU_GSHIFT)
#define EMU_MAX_ALLOCS ((1u << 20) - 2)
#define EMU_SHARED_BASE (1ull << 61)
#define EMU_LOCAL_BASE ((1ull << 61) + (1ull << 40))
#define EMU_PARAM_BASE ((1ull << 61) + (2ull << 40)) /* cvta.param: read-only */
#define EMU_WINDOW (1ull << 32)
#define EMU_CL_SHIFT 24
#define EMU_CL_OFF ((1u << EMU_CL_SHIFT) - 1)
#define EMU_SHARED_REDZONE 32 /* bytes between shared variables */
#define EMU_POISON 0xff /* poison byte: NaN in every float format */
#define EMU_FULL 0xffffffffu

/* Fixed slots: 0 always reads 0 (the base of a [symbol] address and the
 * "no guard" value), 1 swallows writes ('_' sinks), then one slot per special
 * register, then the kernel's registers, then its constants. */
enum { EMU_SLOT_ZERO = 0, EMU_SLOT_SINK = 1, EMU_SLOT_SREG = 2 };

/* Micro-operations: what an instruction becomes after decode. Each PTX
 * opcode (the ISA table's enum) decodes into one of these plus type, mode
 * and flag fields; exec.c switches over them. */
#define EMU_H_MAP(X)                                                                      \
    X(NOP) X(MOV) X(PACK) X(UNPACK) X(SREG_DYN) X(LD) X(ST) X(CVTA) X(CVT)                \
    X(IADD) X(ISUB) X(IADD_SAT) X(ISUB_SAT) X(IMUL_LO) X(IMUL_HI) X(IMUL_WIDE)           \
    X(IMAD_LO) X(IMAD_HI) X(IMAD_WIDE) X(IDIV) X(IREM) X(IMIN) X(IMAX) X(IABS) X(INEG)     \
    X(F32_ADD) X(F32_SUB) X(F32_MUL) X(F32_FMA) X(F32_DIV) X(F64_ADD) X(F64_SUB)          \
    X(F64_MUL) X(F64_FMA) X(F64_DIV) X(FARITH) X(FMINMAX) X(FABS) X(FNEG) X(COPYSIGN)     \
    X(FUNARY) X(AND) X(OR) X(XOR) X(NOT) X(SHL) X(SHR) X(LOP3) X(PRMT) X(BFE) X(BFI)       \
    X(POPC) X(CLZ) X(BREV) X(SETP) X(SELP) X(BRA) X(EXIT) X(TRAP) X(BAR) X(BAR_WARP)     \
    X(SHFL) X(VOTE) X(ACTIVEMASK) X(REDUX) X(ATOM) X(CP_ASYNC) X(CP_COMMIT) X(CP_WAIT)    \
    X(LDMATRIX) X(MMA) X(WG) X(MBAR) X(ASYNC)

enum emu_h {
#define X(id) EMU_H_##id,
    EMU_H_MAP(X)
#undef X
    EMU_NH
};

/* Flag bits of emu_ins.flags; the low four match num.h's EMU_NF_*. */
enum {
    EMU_IF_SATFINITE = EMU_NF_SATFINITE,
    EMU_IF_RELU = EMU_NF_RELU,
    EMU_IF_FTZ = EMU_NF_FTZ,
    EMU_IF_SAT = EMU_NF_SAT,
    EMU_IF_SIGNED = 16,   /* signed integer type */
    EMU_IF_NAN = 32,      /* min/max .NaN */
    EMU_IF_XORSIGN = 64,  /* min/max .xorsign.abs */
    EMU_IF_ALIGNED = 128, /* .sync.aligned collective: all lanes must be converged */
    EMU_IF_ARRIVE = 256,  /* bar.arrive: does not wait */
    EMU_IF_TRANS = 512,   /* ldmatrix .trans */
    EMU_IF_HAS_C = 1024,  /* optional operand present (setp c, bar count, cp src-size) */
    EMU_IF_PAIR = 2048,   /* two-source packing cvt */
    EMU_IF_NOFTZ = 4096,  /* atom .noftz */
    EMU_IF_APPROX = 8192,
    EMU_IF_IGNSRC = 16384, /* cp.async ignore-src predicate: true -> zero fill */
};

/* Memory spaces of a decoded access. */
enum { EMU_SP_GENERIC, EMU_SP_GLOBAL, EMU_SP_SHARED, EMU_SP_LOCAL, EMU_SP_PARAM, EMU_SP_CONST,
       EMU_SP_CLUSTER /* .shared::cluster: a peer's window or the own one */ };

/* setp comparisons (integer ones use the unsigned/signed flag). */
enum {
    EMU_CMP_EQ, EMU_CMP_NE, EMU_CMP_LT, EMU_CMP_LE, EMU_CMP_GT, EMU_CMP_GE,
    EMU_CMP_EQU, EMU_CMP_NEU, EMU_CMP_LTU, EMU_CMP_LEU, EMU_CMP_GTU, EMU_CMP_GEU,
    EMU_CMP_NUM, EMU_CMP_NAN,
};
enum { EMU_BOOL_NONE, EMU_BOOL_AND, EMU_BOOL_OR, EMU_BOOL_XOR };
/* FUNARY functions */
enum { EMU_FN_RCP, EMU_FN_SQRT, EMU_FN_RSQRT, EMU_FN_EX2, EMU_FN_LG2, EMU_FN_SIN, EMU_FN_COS, EMU_FN_TANH };
/* shfl, vote, redux/atom operations */
enum { EMU_SHFL_UP, EMU_SHFL_DOWN, EMU_SHFL_BFLY, EMU_SHFL_IDX };
enum { EMU_VOTE_BALLOT, EMU_VOTE_ALL, EMU_VOTE_ANY, EMU_VOTE_UNI };
enum {
    EMU_AOP_ADD, EMU_AOP_MIN, EMU_AOP_MAX, EMU_AOP_AND, EMU_AOP_OR, EMU_AOP_XOR,
    EMU_AOP_CAS, EMU_AOP_EXCH, EMU_AOP_INC, EMU_AOP_DEC,
};
/* cvta: which way and which window */
enum { EMU_CVTA_ID, EMU_CVTA_TO_GENERIC, EMU_CVTA_FROM_GENERIC };
/* mma shapes */
enum { EMU_MMA_K8, EMU_MMA_K16, EMU_MMA_K32 };
/* EMU_H_WG operations (sub): the Hopper warp and warpgroup instructions of
 * ptx/emu/wgmma.c */
enum {
    EMU_WG_FENCE, EMU_WG_COMMIT, EMU_WG_WAIT, EMU_WG_MMA, EMU_WG_STMATRIX, EMU_WG_ELECT,
    EMU_WG_SETMAXNREG,
};
/* wgmma.mma_async's sub2 bits */
enum { EMU_WGMMA_RS = 1, EMU_WGMMA_NEG_A = 2, EMU_WGMMA_NEG_B = 4, EMU_WGMMA_TRANS_A = 8, EMU_WGMMA_TRANS_B = 16 };

/* EMU_H_MBAR operations (sub; mbarrier.c) and their mode bits (aux) */
enum {
    EMU_MB_INIT, EMU_MB_INVAL, EMU_MB_ARRIVE, EMU_MB_EXPECT_TX, EMU_MB_COMPLETE_TX,
    EMU_MB_TRY_WAIT, EMU_MB_TEST_WAIT, EMU_MB_PENDING, EMU_MB_CP_ARRIVE,
};
enum {
    EMU_MBF_PARITY = 1, /* .parity form of a wait */
    EMU_MBF_DROP = 2,   /* arrive_drop */
    EMU_MBF_TX = 4,     /* arrive.expect_tx */
    EMU_MBF_NOINC = 8,  /* cp.async.mbarrier.arrive.noinc */
    EMU_MBF_COUNT = 16, /* an arrival count operand */
};
/* EMU_H_ASYNC operations (sub; async.c): the async proxy's copies and fences */
enum {
    EMU_AS_TMA_LD, EMU_AS_TMA_ST, EMU_AS_TMA_RED, EMU_AS_BULK_G2S, EMU_AS_BULK_S2G,
    EMU_AS_BULK_S2S, EMU_AS_COMMIT, EMU_AS_WAIT, EMU_AS_PREFETCH_TMAP, EMU_AS_FENCE_PROXY,
    EMU_AS_NOP, EMU_AS_MAPA, EMU_AS_GETCTARANK, EMU_AS_BAR_CLUSTER,
};

/* A decoded instruction: 64 bytes, no pointers into the IR on the hot path.
 * Scalar operands are slots; vector operands (.v2/.v4, {a,b}, mma
 * fragments, ldmatrix destinations) index the kernel's vpool. */
typedef struct emu_ins {
    uint16_t h;     /* micro-op, EMU_H_* */
    uint16_t op;    /* the PTX opcode (ptx_op), for reports */
    uint16_t flags; /* EMU_IF_* */
    uint8_t ty;     /* types[0] (ptx_type) */
    uint8_t ty2;    /* second type: cvt source, mma A type */
    uint8_t bits;   /* width of ty in bits (1 for pred) */
    uint8_t rnd;    /* EMU_RN ... */
    uint8_t sub;    /* cmp, function, mode, space... per micro-op */
    uint8_t sub2;   /* setp bool op, atom op, mma shape... */
    uint8_t n;      /* vector elements */
    uint8_t sz;     /* bytes per element of a memory access */
    uint8_t dbits;  /* destination register width */
    uint8_t gneg;   /* guard is negated */
    uint8_t cneg;   /* predicate source is negated */
    uint8_t wg;     /* 1: an operand is a wgmma D or A register (wgmma.c checks it) */
    uint8_t pad[2];
    uint32_t guard; /* guard predicate slot, 0 when unguarded */
    uint32_t d, a, b, c, e;
    uint32_t target; /* branch target pc */
    int32_t line;    /* PTX line (0: module never printed) */
    int64_t off;     /* address offset, symbol resolved */
    uint64_t aux;    /* lop3 lut, cp-size, wait count, mma B/C types */
} emu_ins;

typedef struct emu_shvar {
    const char *name;
    uint32_t off, size; /* size 0: dynamic (its size is the launch's dyn_smem) */
    bool dyn;
} emu_shvar;

struct emu_kernel {
    emu_ctx *ctx;
    const ptx_fn *fn;
    const char *name;
    emu_ins *code;
    uint32_t ncode;
    uint32_t *vpool;
    uint32_t nvpool;
    uint32_t nslots;     /* all slots */
    uint32_t reg_base;   /* first register slot */
    uint32_t const_base; /* first constant slot */
    uint32_t nconst;
    uint64_t *consts;
    uint32_t nparams;
    uint32_t *param_off, *param_size;
    uint32_t param_bytes;
    emu_shvar *shvars;
    uint32_t nshvars;
    uint32_t smem_base;   /* reserved region + shift: where the first array may start */
    uint32_t smem_static; /* end of the static shared (dynamic starts after) */
    uint32_t dyn_off;     /* window offset of the .extern array */
    uint32_t dyn_align;
    uint32_t local_bytes; /* per-thread .local (none declared by the IR yet) */
    bool async;           /* uses mbarriers, TMA, bulk copies or proxy fences (emu_asc) */
    int maxntid[3], reqntid[3];
    struct emu_wgk *wg; /* wgmma.c: the kernel's warpgroup bookkeeping, NULL: none */
};

typedef struct emu_allocrec {
    char *name;
    uint64_t base;
    size_t size;
    uint8_t *data;
    uint64_t *shadow; /* one bit per byte: 1 written (bit b % 64 of word b / 64) */
} emu_allocrec;

struct emu_ctx {
    emu_opts o;
    emu_allocrec **allocs;
    size_t nallocs, cap_allocs;
    pthread_mutex_t lock; /* reports */
    char **reports;
    uint8_t *report_kinds;
    int nreports, total_reports;
    uint64_t *report_keys; /* (kernel code pointer ^ kind/pc) dedupe across CTAs */
    size_t nkeys, cap_keys;
    float *h2f;         /* f16 -> f32 table, 65536 entries (mma operands) */
    float fp8f[2][256]; /* e4m3, e5m2 -> f32 */
};

/* One queued cp.async of one thread. */
typedef struct emu_cp {
    uint64_t src;
    uint32_t dst;
    uint32_t group; /* the lane's group number it belongs to */
    uint32_t pc;
    uint32_t seq;   /* the warp's issue order (cp_seq at issue) */
    uint8_t lane, size, srcsize;
} emu_cp;

typedef struct emu_warp {
    uint64_t *R;
    uint32_t index;   /* warp index in the CTA */
    uint32_t pc;      /* pc of the running group */
    uint32_t group;   /* lanes running at pc */
    uint32_t next_pc; /* lowest pc of the other runnable lanes, UINT32_MAX none */
    uint32_t exists;  /* lanes that are threads of the CTA */
    uint32_t live;    /* lanes not exited */
    uint32_t blocked; /* lanes waiting at a barrier */
    uint32_t bar_wait[EMU_NBAR];    /* lanes blocked per barrier id */
    uint32_t bar_arrived[EMU_NBAR]; /* lanes arrived in the current phase */
    uint32_t ws_wait, ws_mask;      /* bar.warp.sync waiters and their masks */
    uint32_t lane_pc[EMU_LANES];    /* pc of lanes outside the running group */
    uint32_t mb_wait;               /* lanes parked on an mbarrier (async.c) */
    bool spin;                      /* the last slice ended on a failed test_wait */
    uint32_t cp_group[EMU_LANES];   /* next cp.async group number per lane */
    uint32_t cp_seq;                /* cp.async issued by the warp so far (emu_cp.seq) */
    uint32_t cp_arr[EMU_LANES];     /* cp_seq at the lane's last cp.async.mbarrier.arrive */
    emu_cp *cp;
    size_t ncp, cap_cp;
} emu_warp;

/* The state shared by the workers of one emu_run. */
typedef struct emu_runst {
    emu_ctx *ctx;
    const emu_kernel *k;
    emu_launch l;
    uint8_t *params;
    uint32_t nctas, nthreads, nwarps;
    uint32_t csize;        /* CTAs per cluster (1: no cluster launch) */
    unsigned cdim[3];      /* the cluster shape */
    uint64_t nclusters;    /* what next_cta counts */
    bool clustered;        /* a cluster launch of more than one CTA */
    uint32_t smem_size; /* window size: static + dynamic */
    uint64_t max_steps;
    uint64_t cta_cost;  /* guard cost of one CTA's launch and retirement */
    double deadline;    /* CLOCK_MONOTONIC seconds; 0: no timeout */
    uint64_t next_cta;  /* atomics */
    uint64_t steps;
    uint64_t cost;      /* steps + CTA costs: what the guard counts */
    uint64_t bank[EMU_NBANK][3]; /* accesses, wavefronts, ideal */
    uint64_t *bank_pc;  /* conflicts (extra wavefronts) per instruction */
    uint64_t lanes;
    uint64_t ctas;
    int abort;
    int reports;
} emu_runst;

/* Shadow of the shared bytes, one array per field (the checks of a 4-, 8-
 * or 16-byte access then vectorise): the last write and read of each byte
 * as (barrier epoch, thread). Epochs count barrier intervals and never
 * repeat across the CTAs a worker runs, so nothing is cleared between
 * CTAs. rtid EMU_MANY: readers from several warps. */
typedef struct emu_shadow {
    uint32_t *wep, *rep;
    uint16_t *wtid, *rtid;
} emu_shadow;
#define EMU_MANY 0xffffu

typedef struct emu_cta {
    emu_runst *rs;
    emu_ctx *ctx;
    const emu_kernel *k;
    const emu_opts *o;
    unsigned ctaid[3];
    uint32_t nwarps, nthreads;
    emu_warp *warps;
    uint64_t *regs;
    uint8_t *smem;
    uint32_t smem_size;
    emu_shadow sh;
    uint32_t last_var; /* shared variable of the last access (a cache) */
    uint8_t *pend;  /* 1: a cp.async to this shared byte is pending */
    uint64_t npend; /* queued cp.async copies in the CTA */
    uint8_t *local, *local_w;
    uint32_t epoch, epoch0;
    uint32_t live_threads;
    uint32_t bar_thr[EMU_NBAR], bar_cnt[EMU_NBAR], bar_need[EMU_NBAR];
    uint64_t steps, lanes, steps_flushed, clock;
    uint64_t charge; /* CTA costs not yet added to the run's guard count */
    uint64_t bank[EMU_NBANK][3]; /* this worker's bank counts (emu_runst.bank) */
    uint64_t *bank_pc;           /* this worker's conflicts per instruction */
    uint64_t *seen; /* report dedupe bitmap: kind x pc */
    bool shadow_sh; /* any shared-memory detector on */
    struct emu_asc *as; /* Hopper async state (NULL: the kernel uses none) */
    struct emu_wgc *wg; /* wgmma.c: wgmma groups, footprint locks, setmaxnreg (NULL: none) */
    bool dead;      /* CTA (or run) aborted */
    /* its cluster (always set: a CTA launched without one is a cluster of
     * one), its rank, and whether it exited (every thread; its shared memory
     * is gone for its peers) */
    struct emu_cluster *cl;
    uint32_t rank;
    bool exited;
    /* peers' DSMEM accesses to this CTA (vector clocks on): per agent of the
     * cluster, the accessor's clock at its last access and the instruction */
    uint32_t *xvc, *xpc;
} emu_cta;

/* The CTAs of one cluster, run together (exec.c emu__cluster_run). */
typedef struct emu_cluster {
    emu_cta *cta; /* n CTAs by rank */
    uint32_t n;
    unsigned dim[3], id[3];
    /* barrier.cluster: completed phases, arrivals of the current one, the
     * arrivals' vector clocks and the last completed phase's (vcm) */
    uint32_t cb_phase, cb_count;
    uint32_t *cbvc, *cbpub;
    uint32_t spin_rounds;
} emu_cluster;

static inline uint64_t emu_mask(int bits)
{
    return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}
static inline int64_t emu_sx(uint64_t v, int bits)
{
    return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
#define EMU_RG(R, s) ((R) + (size_t)(s) * EMU_LANES)
/* Iterates the set bits of a lane mask. */
#define EMU_FOR_LANES(m, l)                                                         \
    for (uint32_t l##_m = (m), l = 0; l##_m && ((l = (uint32_t)__builtin_ctz(l##_m)), 1); \
         l##_m &= l##_m - 1)

/* Global shadow bits of [off, off+n): all set? Set them (atomically: workers
 * share global memory) / clear them (host side only). n may be any size. */
static inline bool emu_bits_all(const uint64_t *w, uint64_t off, uint64_t n)
{
    while (n) {
        uint64_t i = off >> 6, b = off & 63, k = 64 - b < n ? 64 - b : n;
        uint64_t m = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;
        if ((__atomic_load_n(&w[i], __ATOMIC_RELAXED) & m) != m)
            return false;
        off += k;
        n -= k;
    }
    return true;
}
static inline void emu_bits_set(uint64_t *w, uint64_t off, uint64_t n, bool v)
{
    while (n) {
        uint64_t i = off >> 6, b = off & 63, k = 64 - b < n ? 64 - b : n;
        uint64_t m = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;
        uint64_t cur = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
        if (v && (cur & m) != m)
            __atomic_fetch_or(&w[i], m, __ATOMIC_RELAXED);
        else if (!v && (cur & m))
            __atomic_fetch_and(&w[i], ~m, __ATOMIC_RELAXED);
        off += k;
        n -= k;
    }
}

/* emu.c: the window offset of the first shared array for module m (the
 * reserved region of the arch plus the shift of the options). */
uint32_t emu__smem_base(const emu_ctx *c, const ptx_module *m);

/* emu.c: CLOCK_MONOTONIC in seconds */
double emu__now(void);

/* ---- Hopper's asynchronous part (mbarrier.c, async.c) ----
 * Present only for kernels that use an mbarrier, TMA or bulk copy, or
 * fence.proxy.async (emu_kernel.async; emu_cta.as NULL otherwise), so the
 * sm_80 kernels keep their speed.
 *
 * mbarrier objects live in a per-CTA table keyed by the barrier's 8-aligned
 * window offset: phase (completed phases; the current parity is phase & 1),
 * expected and pending arrivals, and the tx count (sm90 ref 5.1). A
 * try_wait that would fail parks its lanes at the instruction (they never
 * spin); a phase completion wakes every parked lane, which re-executes the
 * wait. test_wait never blocks: a failed one ends the warp's slice.
 *
 * The async engine holds the CTA's in-flight operations (TMA loads, stores
 * and reduces, bulk copies) in issue order. Loads gather their bytes at
 * issue and write shared memory when they complete; stores read shared
 * memory when they complete. Completion points (emu_opts.schedule): lazy,
 * the oldest operation when no warp can run; eager, at issue; random, each
 * pending operation with probability 1/4 between slices of random length
 * (seeded), and lazily when stuck. A CTA drains its queue before it retires.
 * While an operation is in flight its shared destination bytes (loads) and
 * source bytes (stores) are marked in emu_cta.pend (bits EMU_PEND_*). */
enum { EMU_PEND_CP = 1, EMU_PEND_DST = 2, EMU_PEND_SRC = 4 };
enum { EMU_WFT_PEER = 0x8000, /* emu_asc.wft: written by a peer CTA (DSMEM) */
       EMU_WFT_CPA = 0x4000 /* written by a (non-bulk) cp.async of this CTA landing: CPA | tid */ };

typedef struct emu_mbar {
    uint32_t off;      /* window offset */
    uint8_t state;     /* EMU_MBS_* */
    bool neg_reported;
    uint32_t expected; /* arrivals per phase */
    uint32_t pending;  /* arrivals missing in the current phase */
    int64_t tx;        /* expect_tx minus complete_tx in the current phase */
    uint64_t phase;    /* completed phases */
    uint64_t inflight; /* bytes of async operations issued in the current phase, not landed */
    int32_t init_line, last_line; /* PTX lines of the init and the last arrival */
    int last_tid;
    uint32_t tx_pc;    /* the last instruction that announced tx (expect_tx), and its thread */
    int tx_tid;
} emu_mbar;
enum { EMU_MBS_FREE, EMU_MBS_LIVE, EMU_MBS_INVAL };

typedef struct emu_aop emu_aop; /* async.c */

typedef struct emu_asc {
    emu_mbar *mb;       /* the CTA's barriers */
    uint32_t nmb, cap_mb;
    uint16_t *mbix;     /* per 8-byte slot of the window: barrier index + 1, 0 none */
    int16_t *wait_mb;   /* per thread: the barrier its parked lane waits on */
    uint64_t *wait_arg; /* per thread: the parity or token it waits for */
    uint32_t *bgroup;   /* per thread: next bulk async-group number */
    uint32_t *fcnt;     /* per thread: fence.proxy.async executed */
    uint32_t *wfence;   /* per shared byte: fcnt + 1 of its generic writer at the write, 0: none;
                         * a peer CTA's write (wft & EMU_WFT_PEER): the writer's own clock at
                         * the write (vcm), else pfc + 1 */
    uint16_t *wft;      /* per shared byte: that writer (a peer's: EMU_WFT_PEER | rank << 10 | tid;
                         * a cp.async landing: EMU_WFT_CPA | tid, wfence the clock of the release
                         * that covers it (vcm; the issuer's at its wait, or its
                         * cp.async.mbarrier.arrive's), else pfc + 1) */
    uint32_t *wland;    /* vcm, per shared byte of a cp.async landing: the issuing warp's own clock
                         * at the landing (its own later fences are above it) */
    uint32_t pfc;       /* fence.proxy.async executed by any thread of the CTA */
    uint32_t *fvc;      /* vcm: warps x nw, warp w's vector clock at its last fence.proxy.async */
    emu_aop **q;        /* in-flight operations, issue order */
    uint32_t nq, cap_q;
    uint64_t marked;    /* operations whose shared bytes are marked in pend */
    uint64_t rng;       /* random schedule state */
    uint32_t spin_rounds;
    /* The race detector's order for these kernels (detect_race): vector
     * clocks over the CTA's warps (mem.c shadow_vc). A warp's clock ticks at
     * each release (an mbarrier arrive, a barrier arrival, an async copy's
     * issue); an arrival joins the warp's clock into the barrier's phase, an
     * async copy's landing joins its issuer's clock at issue; a successful
     * wait joins the completed phase into the waiter; a bar.sync release joins
     * every arrival into the waiters. Shadow: the last write (clock, thread)
     * and the last read, or a read vector when several warps read unordered. */
    bool vcm;
    uint32_t nw;        /* agents: each CTA's warps, then its async proxy (per rank) */
    uint32_t xclk;      /* the async proxy's clock */
    uint32_t vbase;     /* clocks below it are earlier CTAs' (ordered, and unwritten) */
    uint32_t *vc;       /* warps x nw: warp w's view of agent q's clock */
    uint32_t *barvc;    /* EMU_NBAR x nw: arrivals joined per named barrier */
    uint32_t *mbvc;     /* per barrier 3 x nw: current phase, last completed of parity 0, 1 */
    uint32_t *rpool;    /* read vectors (nw each; entry 0 unused) */
    uint32_t *rfree;    /* free read vectors */
    uint32_t nrp, cap_rp, nfree;
    const uint32_t *acc_vc; /* accessor override while an async completion writes */
    uint32_t acc_clk;
    /* barrier.cluster (emu_cluster holds the phase): per thread the phase + 1
     * it arrived in (0: none), parked lanes per warp */
    uint32_t *cb_arr, *cbw;
    /* clusters: agents are numbered across the cluster, CTA rank r's warps
     * r * (nwarps + 1) + w and its async proxy r * (nwarps + 1) + nwarps; nw
     * counts them all, me0 is this CTA's first. Shadow thread ids are agent
     * * 32 + lane. */
    uint32_t me0;
} emu_asc;

/* async.c: vector-clock edges (no-ops unless c->as->vcm) */
void emu__vc_arrive(emu_cta *c, uint32_t warp, uint32_t *dst); /* dst |= vc[warp]; tick */
void emu__vc_acquire(emu_cta *c, uint32_t warp, const uint32_t *src); /* vc[warp] |= src */
void emu__vc_bar_arrive(emu_cta *c, uint32_t warp, uint32_t id);
void emu__vc_bar_release(emu_cta *c, uint32_t id); /* before the waiters are released */

/* mbarrier.c: EMU_H_MBAR. Returns true when it parked lanes or ended the
 * warp's slice (the interpreter then re-reads the warp's group). */
bool emu__mbar(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc);
/* The barrier at window offset off (NULL: none live there). */
emu_mbar *emu__mbar_at(emu_cta *c, uint32_t off);
/* complete_tx of `bytes` on barrier b by the async engine (op issued in
 * phase `phase`); `in` the issuing instruction, for reports. */
void emu__mbar_complete_tx(emu_cta *c, emu_mbar *b, uint64_t bytes, uint64_t phase,
                           const emu_ins *in, int tid, const uint32_t *vc);
/* The deadlock report for parked mbarrier waiters; false when none waits. */
bool emu__mbar_deadlock(emu_cta *c);
/* The CTA ends (its copies landed): a live barrier whose phase has every
 * arrival in and a tx count above zero can never complete (expect-tx). */
void emu__mbar_end(emu_cta *c);

/* async.c */
int emu__async_cta_init(emu_cta *c);
void emu__async_cta_start(emu_cta *c, uint64_t linear);
/* The vector clocks of a cluster's CTAs, started together (after each
 * one's emu__async_cta_start): one base for all, barrier.cluster reset. */
void emu__async_cluster_start(emu_cluster *cl);
int emu__cluster_init(emu_cluster *cl, uint32_t nw); /* nw: agents of the cluster */
void emu__cluster_free(emu_cluster *cl);
/* c's threads all exited (a cluster of more than one): its queue drains,
 * and peers' DSMEM accesses not ordered before the exit are reported. */
void emu__async_cta_exited(emu_cta *c);
void emu__async_cta_free(emu_cta *c);
/* EMU_H_ASYNC. Returns true when the warp's flow changed. */
bool emu__async(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc);
/* Completes in-flight work per the schedule when no warp can run (lazy), or
 * at a random point; returns true when something completed. */
bool emu__async_step(emu_cta *c, bool stuck);
void emu__async_drain(emu_cta *c); /* completes everything (CTA end) */
void emu__async_exit(emu_cta *c);  /* threads exited: a cluster barrier may complete */
bool emu__cluster_deadlock(emu_cta *c); /* the report for parked barrier.cluster.wait lanes */
/* The CTA of a shared::cluster (or shared::cta) address a of c, or NULL
 * (reported, fatal) when it names a rank outside the cluster; *off gets
 * the window offset. */
emu_cta *emu__cl_peer(emu_cta *c, const emu_ins *in, int tid, uint64_t a, uint64_t *off);
/* The cluster-wide agent of warp w of c (its vector-clock index). */
static inline uint32_t emu__agent(const emu_cta *c, uint32_t w)
{
    return c->as ? c->as->me0 + w : w;
}
/* A generic-proxy access of shared [off, off+n) by a thread: the checks
 * against in-flight copies and, for writes, the proxy marks. */
void emu__async_smem(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                     uint64_t off, uint32_t n, int acc);
/* cp.async.mbarrier.arrive of lane l on live barrier b: queued, it lands
 * the thread's prior cp.async copies and then arrives. */
void emu__async_cp_arrive(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t l, uint32_t pc,
                          emu_mbar *b);
/* mem.c: the shadow of what the async proxy writes into shared memory when
 * a copy lands (written, by thread tid, in the current epoch), and the race
 * probe of a copy's destination at issue (as for cp.async). */
void emu__shadow_async_write(emu_cta *c, uint32_t off, uint32_t n, int tid, uint32_t clk);
void emu__shadow_probe(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                       uint64_t off, uint32_t n);
/* The same for a destination in CTA o of c's cluster (a multicast). */
void emu__shadow_probe_at(emu_cta *o, emu_cta *c, const emu_ins *in, const emu_warp *w,
                          uint32_t lane, uint64_t off, uint32_t n);
/* Wakes lanes of w (their lane_pc already set) without disturbing its
 * running group. */
void emu__wake(emu_warp *w, uint32_t lanes);

/* A (non-bulk) cp.async of lane `lane` of warp w landed in c's shared
 * [off, off+n): the generic proxy's write (PTX ISA, memory consistency model),
 * marked for the proxy rule as of the landing (a->acc_vc: an arrive's). */
void emu__async_cp_landed(emu_cta *c, emu_warp *w, uint32_t lane, uint32_t off, uint32_t n);
/* async.c (Hopper's async proxy), for its other clients (wgmma.c): the
 * window offset of the first byte of shared [off, off+n) written through the
 * generic proxy (st/atom/red.shared, stmatrix, a generic store, a cp.async
 * landing) by a thread that has not executed fence.proxy.async since that
 * write, or -1 when every byte is fenced (or was written by the async proxy,
 * or not at all); *tid (may be NULL) gets the writing thread's linear index.
 * A byte a peer CTA wrote (st/red/atom .shared::cluster) is fenced only by a
 * fence.proxy.async of a thread of c that the write happens before and that
 * happens before the read by warp rw (the vector clocks; without them: any
 * fence of c's threads executed after the write); *rank (may be NULL) gets
 * the writer's CTA rank, or -1 for c's own thread. A byte a cp.async of c
 * landed (the generic proxy, not the thread's own store) is fenced by a
 * fence.proxy.async of the issuing warp executed after the landing, or of
 * another warp of c that the landing's release (the issuer's later barrier,
 * its cp.async.mbarrier.arrive's phase) happens before and that happens
 * before the read (without the vector clocks: any fence of c's threads after
 * the landing); *rank gets -2.
 * Always -1 when the kernel uses no async feature or detect_async is off. */
int64_t emu__proxy_unfenced(const emu_cta *c, const emu_warp *rw, uint32_t off, uint32_t n,
                            int *tid, int *rank);
/* A peer CTA's generic-proxy write of c's shared [off, off+n) by thread tid
 * of CTA rank `rank`, whose warp's own clock is clk (vcm; mem.c's dsmem):
 * marks the bytes for the proxy rule. */
void emu__async_peer_write(emu_cta *c, uint32_t off, uint32_t n, uint32_t rank, int tid,
                           uint32_t clk);
/* Is a byte of shared [off, off+n) the destination of a TMA or bulk copy in
 * flight (write false: reading it races), or also the source of a TMA store
 * or bulk copy not yet read (write true: writing it races)? */
bool emu__async_busy(const emu_cta *c, uint32_t off, uint32_t n, bool write);

/* decode.c */
int emu__decode(emu_kernel *k, ptx_module *m, ptx_fn *f, pt_err *e);

/* exec.c */
void emu__cta_run(emu_cta *c, uint64_t cta_linear);
void emu__cluster_run(emu_cluster *cl, uint64_t index); /* cluster `index` of the grid */
int emu__cta_init(emu_cta *c, emu_runst *rs);
void emu__cta_free(emu_cta *c);

/* mem.c */
enum { EMU_ACC_READ = 1, EMU_ACC_WRITE = 2, EMU_ACC_ATOMIC = 4, EMU_ACC_NOALIGN = 8,
       EMU_ACC_ASYNC = 16 /* by the async proxy (TMA, bulk) or a cp.async landing (its generic-proxy
                             mark set apart: emu__async_cp_landed) */ };
uint8_t *emu__mem(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane, int space,
                  uint64_t addr, uint32_t n, int acc);
void emu__ld(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__st(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__atom(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__cp_async(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc);
/* Completes lane copies: all committed groups but the newest `keep`
 * (keep < 0: every queued copy). */
void emu__cp_wait(emu_cta *c, emu_warp *w, uint32_t m, int keep);
/* Completes the cp.async of the lanes in m issued before the warp's
 * cp_seq was seq (cp.async.mbarrier.arrive: its thread's prior copies). */
void emu__cp_wait_before(emu_cta *c, emu_warp *w, uint32_t m, uint32_t seq);
/* A lane's exit: its cp.async land now, except those a pending
 * cp.async.mbarrier.arrive of the lane lands (as of the arrive's issue). */
void emu__cp_exit(emu_cta *c, emu_warp *w, uint32_t m);
emu_allocrec *emu__galloc(emu_ctx *ctx, uint64_t addr);

/* Bank conflicts of one warp-level shared access: off[l] is lane l's
 * window offset for the lanes of m, `bytes` per lane (1..16). */
void emu__banks(emu_cta *c, const emu_ins *in, emu_bank_class cls, const uint32_t *off,
                uint32_t m, uint32_t bytes);

/* warp.c */
void emu__shfl(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__vote(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__redux(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__ldmatrix(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
void emu__mma(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m);
/* cvt of one lane (warp.c keeps the numeric per-lane helpers too) */
uint64_t emu__cvt(const emu_ins *in, uint64_t a, uint64_t b);
uint64_t emu__funary(const emu_ins *in, uint64_t a);
uint64_t emu__farith(const emu_ins *in, uint64_t a, uint64_t b, uint64_t c);
uint64_t emu__fminmax(const emu_ins *in, uint64_t a, uint64_t b);
bool emu__setp_f(const emu_ins *in, uint64_t a, uint64_t b);

/* wgmma.c: wgmma.fence/mma_async/commit_group/wait_group, stmatrix,
 * elect.sync, setmaxnreg and fence.proxy.async (EMU_H_WG). prepare runs
 * after decode (marks the instructions whose operands are wgmma registers,
 * in->wg); the CTA functions are no-ops for kernels without these ops.
 * emu__wg_exec returns true when it blocked the warp's lanes (setmaxnreg.inc
 * waiting for registers; the scheduler then picks other lanes). */
int emu__wg_prepare(emu_kernel *k, const ptx_fn *f, pt_err *e);
void emu__wg_kernel_free(emu_kernel *k);
int emu__wg_cta_init(emu_cta *c);
void emu__wg_cta_start(emu_cta *c);
void emu__wg_cta_free(emu_cta *c);
bool emu__wg_exec(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t m, uint32_t pc);
void emu__wg_touch(emu_cta *c, emu_warp *w, const emu_ins *in, uint32_t pc);
void emu__wg_exit(emu_cta *c, emu_warp *w, uint32_t m); /* before the lanes of m leave */
bool emu__wg_deadlock(emu_cta *c);                       /* reports a setmaxnreg wait */
void emu__wg_round(emu_cta *c); /* a scheduling round starts: warps that yielded resume */
/* Shared-memory writes [off, off+n) (window offsets) into the footprint of
 * an in-flight wgmma are an async-race: emu__mem calls the first for every
 * shared write when c->wg is set; the async engine calls the second for
 * what it writes (TMA, bulk copies) at issue. (The missing-proxy-fence
 * check of wgmma operands uses async.c's emu__proxy_unfenced.) */
void emu__wg_smem_write(emu_cta *c, const emu_ins *in, const emu_warp *w, uint32_t lane,
                        uint64_t off, uint32_t n);
/* wv, wagent: the issuer's vector clock and agent (the race detector's
 * check against wgmma reads), wv NULL: none */
void emu__wg_async_write(emu_cta *c, const emu_ins *in, int tid, uint64_t off, uint64_t n,
                         const uint32_t *wv, uint32_t wagent);
/* A DSMEM write of CTA c (thread tid, cluster address addr) to [off,
 * off+n) of peer p: an async-race, reported in c, when an in-flight wgmma
 * of p reads it (mem.c's dsmem). */
void emu__wg_peer_write(emu_cta *p, emu_cta *c, const emu_ins *in, int tid, uint64_t off, uint32_t n,
                        uint64_t addr);
/* exec.c: picks the warp's next running group (after lanes block or wake) */
void emu__resched(emu_warp *w);

/* emu.c: one detector report (deduplicated per kind and instruction). tid
 * is the thread's linear index in the CTA, -1 for a CTA-wide report. */
void emu__report(emu_cta *c, emu_report_kind kind, const emu_ins *in, int tid, int space,
                 uint64_t addr, uint32_t n, const char *fmt, ...) PT_PRINTF(8, 9);
static inline bool emu__seen(emu_cta *c, emu_report_kind kind, const emu_ins *in)
{
    size_t bit = (size_t)kind * (c->k->ncode + 1) + (in ? (size_t)(in - c->k->code) : c->k->ncode);
    return (c->seen[bit >> 6] >> (bit & 63)) & 1;
}

#endif
