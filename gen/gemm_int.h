/* GEMM building blocks shared by gen/gemm*.c (private to the family).
 *
 *   gemm.c       the op: problem checks, parameter space, reference, the
 *                kernel skeleton (tile order, split-K ranges, pipeline)
 *   gemm_tile.c  the main loops on the kit (gen/kit/): operands as views
 *                and shared tiles (kit_g2s copies), the cp.async pipeline
 *                (kit_pipe), ldmatrix fragments addressed from the atom's
 *                thread-value maps (kit_ldsm) and the mma.sync / FFMA
 *                inner products
 *   gemm_epi.c   epilogue: accumulator staging through shared memory,
 *                in-CTA k-slice reduction, parallel split-K fixup, the
 *                expression epilogue and vector stores
 *
 * The main loop and the epilogue meet at gemm_accs: a thread's accumulator
 * registers with their tile-local (row, col) positions. A Hopper main loop
 * (wgmma) fills the same struct and reuses the loaders' layouts and the
 * whole epilogue. */
#ifndef GEN_GEMM_INT_H
#define GEN_GEMM_INT_H

#include "gen/expr.h"
#include "gen/gemm.h"
#include "gen/kit/kit.h"

/* The inner product of an input dtype is its kit atom (gen/kit/atom.h):
 * kit_atom_get(dt) is the GEMM's row (mma.sync shape, A/B/C thread-value
 * maps, es, simt, tf32, int_acc, min_sm). */
enum { GEMM_MAX_AUX = 6 };

/* `persistent` = K: 0 one CTA per tile; 1 or 2 a persistent grid of
 * min(tiles, K x SMs) CTAs, the SM count the device's at launch
 * (pt_launch.grid_per_sm; both main loops; the wgmma loop takes K = 1 only:
 * a persistent CTA's staging fills the SM's shared memory). Stream-K's
 * workspace is sized for the widest grid it may be launched with:
 * GEMM_SK_MAX_SMS, the most SMs of any sm_90 part (H100/H200 SXM: 132);
 * the natural grid is capped there, so a device with more SMs leaves the
 * rest idle. */
enum { GEMM_PERSISTENT_MAX = 2, GEMM_SK_MAX_SMS = 132 };
#define GEMM_PERSISTENT_MSG \
    "persistent=%lld: 0 (off), 1 or 2 (CTAs per SM of a persistent grid sized from the SM count at launch)"

/* How an epilogue tensor is indexed. */
typedef enum gemm_aux_kind {
    GEMM_AUX_N,    /* name[n]: one value per column, N elements */
    GEMM_AUX_M,    /* name[m]: one value per row, M elements */
    GEMM_AUX_FULL, /* name: an M x N tensor stored like D (packed) */
} gemm_aux_kind;

typedef struct gemm_aux {
    const char *name; /* as written: "bias[n]", "r" */
    const char *base; /* "bias", "r": the tensor's name (tensors(), --in) and its parameter's */
    gemm_aux_kind kind;
    int input;        /* index in the epilogue program's inputs */
} gemm_aux;

struct pt_prepared {
    pt_problem prob;
    pt_target target;
    const kit_atom *at;
    pt_dtype out_dt, c_dt, aux_dt;
    int64_t M, N, K, batch;
    int64_t lda, ldb, ldc, ldd;
    int64_t sa, sb, sc, sd, saux; /* batch strides in elements */
    bool a_kmajor, b_kmajor;      /* A 'n', B 't' */
    bool d_col;
    bool has_c;                   /* C is read (beta != 0 or c in the epilogue) */
    bool int_exact;               /* s32 out: D = acc (+ C) in integers */
    ex_prog *epi;                 /* the epilogue program (NULL when int_exact) */
    int in_acc, in_alpha, in_beta, in_c; /* program input indices, -1 unused */
    int naux;
    gemm_aux aux[GEMM_MAX_AUX];
    int cw_a, cw_b;               /* global->shared copy width, bytes */
    int vec_max;                  /* widest epilogue access, elements */
    float alpha, beta, scale_ab, out_scale;
    /* dyn=m: M is the kernel's u32 parameter "m" (M above is the tuned
     * value: tensor sizes, the parameter's value); m_cap = pow2ceil(M), the
     * largest M the split-K workspace is laid out for */
    bool dyn_m;
    int64_t m_cap;
    /* dyn=m with a column-major D: D's (C's) leading dimension is the
     * run-time M (ldd, ldc not given: they follow M; M x N epilogue tensors,
     * stored like D, always do) */
    bool ldd_m, ldc_m;
};

/* The emission context of one kernel. */
typedef struct gemm_ctx {
    const pt_prepared *pp;
    const kit_atom *at;
    ptx_fn *f;
    /* config */
    int bm, bn, bk, wm, wn, tm, tn, stages, kslice, splitk, raster, persistent;
    int threads, warps_m, warps_n, ksteps; /* ksteps: mma k-steps per tile */
    /* tile and layouts */
    kit_layout sa, sb;  /* shared tiles of one stage (kit_smem_tile: (row, byte) -> offset) */
    int stage_bytes;    /* A + B of one stage */
    int smem_bytes;     /* dynamic shared memory of the kernel */
    int64_t kt_total;   /* k tiles over the whole K */
    /* registers */
    ptx_reg tid, lane, warp, smem;   /* u32; smem: shared window base */
    ptx_reg tile;                    /* u32 linear tile index (%ctaid.x) */
    int64_t tiles;                   /* tiles per batch entry (dyn=m: at m_cap, the workspace's) */
    ptx_reg m0, n0;                  /* u32 tile origin */
    ptx_reg bidx;                    /* u32 batch index */
    ptx_reg split;                   /* u32 split-K index (splitk > 1) */
    ptx_reg arrivals;                /* u32 CTAs counting in this tile's fixup (stream-K:
                                      * run-time, at most splitk; id 0: splitk) */
    ptx_reg kt_begin, nkt;           /* u32 first k tile of this CTA, count */
    ptx_reg pa, pb, pc, pd, pws;     /* u64 global pointers (batch applied) */
    ptx_reg paux[GEMM_MAX_AUX];
    ptx_reg alpha, beta, scale_ab, out_scale; /* f32 params (id 0: absent) */
    ptx_reg kslice_idx;              /* u32 warp's k slice */
    int bar_threads;                 /* > 0: gemm_bar is bar.sync 1, bar_threads (the wgmma
                                      * loop's consumer warpgroups; the producer takes no part) */
    ptx_reg bar_id;                  /* with bar_threads: the named barrier's id (u32 register;
                                      * id 0: barrier 1), e.g. one per pingpong consumer */
    ptx_reg mreg;                    /* dyn=m: u32 M (the parameter "m") */
    ptx_reg tm_r, tiles_r;           /* dyn=m: u32 tile rows, tiles per batch entry at this M */
} gemm_ctx;

/* Accumulators handed from a main loop to the epilogue: the accumulator
 * fragment (gen/kit/frag.h; same fields as before: register i holds
 * tile-local element (row_base + row[i], col_base + col[i]), runs of vec
 * registers share a row, the group block grp_*). A main loop may fill the
 * lane map (kit_frag_lanes) and the slice fields; the epilogue fills what
 * is left from the atom. With kslice > 1 every slice holds a partial sum
 * of the same positions. */
typedef kit_frag gemm_accs;

/* ---- integer helpers (u32 unless named 64) ---- */
ptx_reg gemm_r32(gemm_ctx *g);
ptx_reg gemm_r64(gemm_ctx *g);
ptx_reg gemm_pred(gemm_ctx *g);
ptx_reg gemm_op2(gemm_ctx *g, ptx_op op, ptx_opd a, ptx_opd b);   /* add sub and or xor shl shr min max */
ptx_reg gemm_mul(gemm_ctx *g, ptx_opd a, ptx_opd b);              /* mul.lo.u32 */
ptx_reg gemm_mad(gemm_ctx *g, ptx_opd a, ptx_opd b, ptx_opd c);   /* mad.lo.u32 */
ptx_reg gemm_setp(gemm_ctx *g, ptx_mod cmp, ptx_opd a, ptx_opd b); /* setp.cmp.u32 */
ptx_reg gemm_setp_s(gemm_ctx *g, ptx_mod cmp, ptx_opd a, ptx_opd b); /* setp.cmp.s32 */
ptx_reg gemm_selp(gemm_ctx *g, ptx_opd a, ptx_opd b, ptx_reg p);  /* selp.b32 */
ptx_reg gemm_pand(gemm_ctx *g, ptx_reg a, ptx_reg b);             /* and.pred (a id 0: b) */
/* p64 + a*b (a u32 register or immediate, b immediate): mul.wide then add. */
ptx_reg gemm_addr64(gemm_ctx *g, ptx_reg p64, ptx_opd a, int64_t b);
ptx_reg gemm_add64(gemm_ctx *g, ptx_reg p64, int64_t imm);
void gemm_inc64(gemm_ctx *g, ptx_reg p64, int64_t imm);            /* in place */
void gemm_inc32(gemm_ctx *g, ptx_reg r, int64_t imm);              /* in place */
void gemm_bar(gemm_ctx *g);
/* M as an operand: the register with dyn=m, else the immediate. */
ptx_opd gemm_m(const gemm_ctx *g);

/* ---- kernel skeleton pieces (gen/gemm.c), shared by both main loops ---- */
ptx_reg gemm_sreg(gemm_ctx *g, ptx_sreg s);  /* mov.u32 of a special register */
/* A pointer parameter (recorded in l as arg), converted to a global address. */
ptx_reg gemm_param_ptr(gemm_ctx *g, pt_launch *l, const char *name, pt_arg arg);
ptx_reg gemm_param_f32(gemm_ctx *g, pt_launch *l, const char *name, float v);
/* g->tile (linear CTA index) -> tile origin g->m0, g->n0: groups of
 * `raster` tile rows walked column by column, so that a wave of CTAs shares
 * B columns. */
void gemm_tile_coords(gemm_ctx *g);

/* ---- main loops ---- */
void gemm_mainloop_tc(gemm_ctx *g, gemm_accs *acc);
void gemm_mainloop_simt(gemm_ctx *g, gemm_accs *acc);

/* ---- the sm_90a main loop (gemm_wgmma.c; config impl=1): warp-specialised
 * wgmma + TMA + mbarrier ring; it runs the epilogue below on its consumer
 * threads. _target: sm_90a; _applies: the default there (dtype served,
 * strides TMA can describe); the rest are the op's hooks for impl=1. ---- */
bool gemm_wgmma_target(const pt_target *t);
bool gemm_wgmma_applies(const pt_prepared *pp, const pt_target *t);
int gemm_wgmma_space(const pt_prepared *pp, const pt_target *t, pt_space *s);
void gemm_wgmma_defaults(const pt_prepared *pp, const pt_target *t, pt_config *c);
int gemm_wgmma_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);
int gemm_wgmma_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e);
int gemm_wgmma_resources(const pt_prepared *pp, const pt_config *c, int *smem, int *threads, pt_err *e);

/* ---- epilogue ---- */
/* Shared memory the epilogue needs beyond the pipeline (bytes), for the
 * config in g (before any register exists). */
int gemm_epi_smem(const gemm_ctx *g);
void gemm_epilogue(gemm_ctx *g, const gemm_accs *acc);
/* The TMA-store epilogue of the wgmma loop (config epi=1): the expression
 * in registers, D's dtype into a swizzled staging tile (stmatrix for 16-bit
 * outputs), fence.proxy.async, the consumers' barrier, one thread's
 * cp.async.bulk.tensor stores through map (gemm_epi_tma_map's, a launch
 * tensor map over output 0) and commit. _check: one line when the problem
 * or tile cannot be stored so; _smem: the staging bytes (1024-aligned
 * boxes at g->smem, itself 1024-aligned); _reuse: before the barrier that
 * precedes a later tile's epilogue (cp.async.bulk.wait_group.read 0);
 * _drain: the same before the CTA exits (every thread may run it). */
int gemm_epi_tma_check(const gemm_ctx *g, pt_err *e);
int gemm_epi_tma_smem(const gemm_ctx *g);
pt_tmap gemm_epi_tma_map(const gemm_ctx *g);
void gemm_epilogue_tma(gemm_ctx *g, const gemm_accs *acc, ptx_reg map);
void gemm_epi_tma_reuse(gemm_ctx *g);
void gemm_epi_tma_drain(gemm_ctx *g);

#endif
