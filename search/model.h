/* The static cost model: an estimate of a kernel's time from what is known
 * before (or without) running it. It orders candidates (exhaustive search,
 * the starts of annealing and the genetic population, the first rung of
 * successive halving), prunes the ones that cannot launch, and is the
 * score of the emulator backend, whose rows say source=model.
 *
 *   blocks/SM  = min(max blocks, threads limit, registers limit, shared
 *                memory limit); 0 -> cannot launch (INFINITY)
 *   occupancy  = resident warps / max warps
 *   waves      = ceil(blocks / (blocks/SM x SMs)); wave efficiency =
 *                blocks / (waves x blocks/SM x SMs)
 *   traffic    = max(op bytes, tile traffic, op traffic) + spills; tile
 *                traffic for a GEMM-like tiling = elem x M N K (1/tile_m +
 *                1/tile_n) (every block streams its A panel and B panel
 *                once); op traffic: the op's own figure for the config
 *                (pt_op.cost: attention's split-KV partials)
 *   compute    = flops / (peak x wave efficiency x min(1, 0.5 + 2 occupancy))
 *   memory     = traffic / (bandwidth x min(1, 4 occupancy)
 *                x min(1, blocks / SMs) x access efficiency); a pipelined
 *                kernel (cp.async stages) keeps enough bytes in flight at
 *                any occupancy, so its occupancy term is 1
 *   epilogue   = the output tiles' stores where the consumer warps wait for
 *                them (a config that names its epilogue: the sm_90a wgmma
 *                loop's epi), per tile: direct, D tile bytes x (2 / shared
 *                bandwidth + SMs / DRAM bandwidth) (the fragment staged in
 *                shared memory, read back in store units, the global stores
 *                issued at the SM's share of DRAM bandwidth); TMA store,
 *                D tile bytes / shared bandwidth (stmatrix into the staging;
 *                the bulk store runs on the TMA engine under the next tile's
 *                or the next block's main loop), the SM's last tile also its
 *                store at the DRAM share (nothing overlaps the last drain);
 *                0 when another warpgroup's
 *                MMAs overlap it (pingpong). Exposed: per tile x ceil(tiles
 *                / SMs) / blocks per SM (co-resident blocks overlap one's
 *                epilogue with another's main loop). It is serial with both
 *                sides: while the consumers store, the ring fills and the
 *                producer stops, so neither the MMAs nor the block's loads
 *                go on
 *   time       = max(compute, memory) + epilogue + launch overhead
 * access efficiency: 1 for 8- or 16-byte accesses, 0.9 for 4, 0.75 for 2,
 * 0.6 for 1 byte. Shared bandwidth: 128 bytes per clock per SM at the boost
 * clock. Unknown registers count as 32. Not modelled: L2 reuse
 * between concurrent blocks (tile traffic is counted at DRAM), instruction
 * issue limits, bank conflicts. The numbers are coarse by design: the model
 * ranks, the device decides. */
#ifndef PT_SEARCH_MODEL_H
#define PT_SEARCH_MODEL_H

#include "ptx/base.h"

typedef struct search_device {
    const char *name;
    int sm;                 /* 80, 86, 89, 90 */
    int sm_count;
    double tensor_tflops;   /* dense f16/bf16 tensor cores */
    double fp32_tflops;
    double dram_gbs;
    int max_threads_sm, max_blocks_sm, max_warps_sm;
    int regs_sm, smem_sm, smem_block; /* smem_block: opt-in maximum per block */
    double launch_us;
    double smem_gbs;        /* shared memory bandwidth of one SM (128 B/clock) */
} search_device;

/* The reference device the emulator backend models for an arch: sm_80
 * A100-SXM4-80GB, sm_86 RTX A6000, sm_89 L40S, sm_90 H100-SXM (sm_90a the
 * same), later archs the sm_90 figures. */
const search_device *search_device_for(int sm);

typedef struct search_kernel {
    double flops, bytes;      /* the op's counts (ideal traffic) */
    bool tensor;              /* flops run on tensor cores */
    int64_t blocks;           /* grid size */
    int threads;              /* per block */
    int regs;                 /* per thread; 0: unknown */
    int smem;                 /* per block, static + dynamic */
    int spill_bytes;          /* per thread, stores + loads */
    int access_bytes;         /* widest global access; 0: 16 */
    bool pipelined;           /* multi-stage asynchronous copies */
    double m, n, k;           /* GEMM-like problem, 0: none */
    double tile_m, tile_n;    /* block tile, 0: none */
    double elem_bytes;        /* of A and B */
    double op_traffic;        /* the op's bytes for this config (pt_op.cost), 0: none */
    /* the epilogue: bytes of D one output tile stores (0: not modelled),
     * the output tiles (0: blocks; a persistent grid walks several per
     * block), a TMA-store epilogue (else direct stores), hidden under
     * another warpgroup's MMAs (pingpong) */
    double out_tile_bytes, tiles;
    bool epi_tma, epi_hidden;
} search_kernel;

typedef struct search_estimate {
    double seconds;           /* INFINITY: cannot launch */
    double compute_s, memory_s;
    int blocks_per_sm;
    double occupancy, waves, wave_eff, traffic;
    double epilogue_s;        /* exposed epilogue time (serial) */
    const char *limiter;      /* "compute" "memory" "launch" "threads" "registers" "shared" */
} search_estimate;

void search_estimate_kernel(const search_device *d, const search_kernel *k, search_estimate *out);

#endif
