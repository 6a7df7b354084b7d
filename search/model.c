/* The cost model (formulas in search/model.h). */
#include "search/model.h"

#include <math.h>

/* Reference devices: (name, sm, SMs, tensor TF/s, fp32 TF/s, GB/s, threads,
 * blocks, warps, registers, shared per SM, shared per block, launch us,
 * shared GB/s per SM = 128 B x boost clock: 1.41, 1.80, 2.52, 1.98 GHz).
 * Datasheet figures, dense, boost clock. */
static const search_device devices[] = {
    {"A100-SXM4-80GB (model)", 80, 108, 312, 19.5, 2039, 2048, 32, 64, 65536, 167936, 166912, 3, 180.5},
    {"RTX A6000 (model)", 86, 84, 155, 38.7, 768, 1536, 16, 48, 65536, 102400, 101376, 3, 230.4},
    {"L40S (model)", 89, 142, 362, 91.6, 864, 1536, 24, 48, 65536, 102400, 101376, 3, 322.6},
    {"H100-SXM5-80GB (model)", 90, 132, 989, 67, 3350, 2048, 32, 64, 65536, 233472, 232448, 3, 253.4},
};

const search_device *search_device_for(int sm)
{
    const search_device *best = &devices[0];
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
        if (devices[i].sm <= sm)
            best = &devices[i];
    return best;
}

static int imin(int a, int b) { return a < b ? a : b; }

/* The exposed epilogue (model.h): per output tile, direct stores pass the
 * tile through shared memory twice and out at the SM's share of DRAM
 * bandwidth, a TMA store only writes the staging, except the SM's last
 * tile, whose bulk store nothing overlaps (the kernel ends when it lands);
 * tiles in sequence per SM, overlapped by the co-resident blocks. */
static double epilogue(const search_device *d, const search_kernel *k, double blocks, int bps)
{
    if (k->out_tile_bytes <= 0 || k->epi_hidden || d->smem_gbs <= 0)
        return 0;
    double smem = d->smem_gbs * 1e9, share = d->dram_gbs * 1e9 / d->sm_count, b = k->out_tile_bytes;
    double per = k->epi_tma ? b / smem : b * (2 / smem + 1 / share);
    double last = k->epi_tma ? b * (1 / smem + 1 / share) : per;
    double tiles = k->tiles > 0 ? k->tiles : blocks, seq = ceil(tiles / d->sm_count);
    return ((seq - 1) * per + last) / bps;
}

void search_estimate_kernel(const search_device *d, const search_kernel *k, search_estimate *o)
{
    *o = (search_estimate){.seconds = INFINITY, .limiter = "launch"};
    int threads = k->threads > 0 ? k->threads : 1;
    int warps = (threads + 31) / 32;
    int regs = k->regs > 0 ? k->regs : 32;
    if (threads > 1024) {
        o->limiter = "threads";
        return;
    }
    if (regs > 255 || regs * threads > d->regs_sm) {
        o->limiter = "registers";
        return;
    }
    if (k->smem > d->smem_block) {
        o->limiter = "shared";
        return;
    }
    /* registers are allocated per warp in units of 256 */
    int regs_warp = (regs * 32 + 255) / 256 * 256;
    int by_regs = d->regs_sm / (warps * regs_warp);
    int by_smem = k->smem > 0 ? d->smem_sm / (k->smem + 1024) : d->max_blocks_sm;
    int bps = imin(imin(d->max_blocks_sm, d->max_threads_sm / (warps * 32)), imin(by_regs, by_smem));
    if (bps <= 0) {
        o->limiter = by_regs <= 0 ? "registers" : "shared";
        return;
    }
    o->blocks_per_sm = bps;
    o->occupancy = (double)(bps * warps) / d->max_warps_sm;
    if (o->occupancy > 1)
        o->occupancy = 1;
    double blocks = k->blocks > 0 ? (double)k->blocks : 1;
    double concurrent = (double)bps * d->sm_count;
    o->waves = ceil(blocks / concurrent);
    o->wave_eff = blocks / (o->waves * concurrent);
    double peak = (k->tensor ? d->tensor_tflops : d->fp32_tflops) * 1e12;
    double hide_c = fmin(1.0, 0.5 + 2 * o->occupancy);
    o->compute_s = k->flops > 0 ? k->flops / (peak * o->wave_eff * hide_c) : 0;
    double traffic = k->bytes > 0 ? k->bytes : 0;
    if (k->tile_m > 0 && k->tile_n > 0 && k->m > 0 && k->n > 0 && k->k > 0) {
        double tm = fmin(k->tile_m, k->m), tn = fmin(k->tile_n, k->n);
        double tiles = k->elem_bytes * k->m * k->n * k->k * (1 / tm + 1 / tn);
        if (tiles > traffic)
            traffic = tiles;
    }
    if (k->op_traffic > traffic)
        traffic = k->op_traffic;
    traffic += (double)k->spill_bytes * threads * blocks;
    o->traffic = traffic;
    int ab = k->access_bytes > 0 ? k->access_bytes : 16;
    double access = ab >= 8 ? 1.0 : ab >= 4 ? 0.9 : ab >= 2 ? 0.75 : 0.6;
    double occ_mem = k->pipelined ? 1.0 : fmin(1.0, 4 * o->occupancy);
    double mem_eff = occ_mem * fmin(1.0, blocks / d->sm_count) * access;
    o->memory_s = traffic / (d->dram_gbs * 1e9 * mem_eff);
    o->epilogue_s = epilogue(d, k, blocks, bps);
    double launch = d->launch_us * 1e-6;
    o->seconds = fmax(o->compute_s, o->memory_s) + o->epilogue_s + launch;
    o->limiter = o->compute_s >= o->memory_s ? (o->compute_s > launch ? "compute" : "launch")
                                             : (o->memory_s > launch ? "memory" : "launch");
}
