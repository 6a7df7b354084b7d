/* Split-K ranges and the stream-K unit walk of the sm_90a wgmma GEMM
 * (gen/gemm_wgmma_sched.h says what they compute). */
#include "gen/gemm_wgmma_sched.h"

int wg_sk_plan(int64_t tiles, int64_t kt, int64_t gmax, wg_sk *sk, pt_err *e)
{
    sk->kt = kt;
    sk->iters = tiles * kt;
    sk->units = gmax < sk->iters ? gmax : sk->iters;
    int64_t I = sk->iters, G = sk->units;
    /* run-time u32 math at any G <= units: w I, (t KT + 1) G, (t + 1) KT G */
    if (I > 0xffffffffll / (G + 1) || I + 1 > 0xffffffffll / G)
        return pt_errf(e, PT_ERANGE, "streamk=1: %lld k iterations x %lld units overflow the scheduler's "
                       "32-bit index math (larger tiles)", (long long)I, (long long)G);
    if (tiles > (1 << 22))
        return pt_errf(e, PT_ERANGE, "streamk=1: %lld tiles: at most 2^22", (long long)tiles);
    /* the most units of any tile at any G <= units: units are at least
     * L = floor(I / G) iterations, so a tile's KT iterations hold the start
     * of its first unit's and at most floor((KT - 2) / L) + 1 more starts;
     * L is least at the widest G */
    int64_t L = I / G;
    int64_t s = kt < 2 ? 1 : (kt - 2) / L + 2;
    sk->slots = (int)(s < G ? s : G);
    return PT_OK;
}

int64_t wg_ws_bytes(const gemm_ctx *g, int slots)
{
    int64_t parts = g->pp->batch * g->tiles * slots * (int64_t)g->bm * g->bn * 4;
    return parts + (g->pp->batch * g->tiles * 4 + 15) / 16 * 16;
}

void wg_splitk_range(gemm_ctx *g)
{
    if (!g->split.id) /* dyn=m's plain grid decodes it from %ctaid.y beforehand */
        g->split = gemm_sreg(g, PTX_S_CTAID_Y);
    ptx_reg lo = gemm_mul(g, ptx_r(g->split), ptx_imm(g->kt_total));
    g->kt_begin = gemm_op2(g, PTX_OP_DIV, ptx_r(lo), ptx_imm(g->splitk));
    ptx_reg hi = gemm_op2(g, PTX_OP_ADD, ptx_r(lo), ptx_imm(g->kt_total));
    ptx_reg end = gemm_op2(g, PTX_OP_DIV, ptx_r(hi), ptx_imm(g->splitk));
    g->nkt = gemm_op2(g, PTX_OP_SUB, ptx_r(end), ptx_r(g->kt_begin));
}

void wg_sk_head(gemm_ctx *g, wg_sk *sk, int out)
{
    ptx_fn *f = g->f;
    sk->unit = gemm_sreg(g, PTX_S_CTAID_X);
    /* G: the launch's, at most the units the workspace is laid out for
     * (a wider grid's extra CTAs leave at once) */
    ptx_reg nc = gemm_sreg(g, PTX_S_NCTAID_X);
    sk->grid = gemm_op2(g, PTX_OP_MIN, ptx_r(nc), ptx_imm(sk->units));
    ptx_reg idle = gemm_setp(g, PTX_M_GE, ptx_r(sk->unit), ptx_r(sk->grid));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(out)), idle, false);
    ptx_reg lo = gemm_mul(g, ptx_r(sk->unit), ptx_imm(sk->iters));
    ptx_reg b0 = gemm_op2(g, PTX_OP_DIV, ptx_r(lo), ptx_r(sk->grid));
    ptx_reg hi = gemm_op2(g, PTX_OP_ADD, ptx_r(lo), ptx_imm(sk->iters));
    sk->end = gemm_op2(g, PTX_OP_DIV, ptx_r(hi), ptx_r(sk->grid));
    sk->cur = gemm_r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(sk->cur), ptx_r(b0));
    sk->top = ptx_label_new(f);
    ptx_label_place(f, sk->top);
    ptx_reg fin = gemm_setp(g, PTX_M_GE, ptx_r(sk->cur), ptx_r(sk->end));
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(out)), fin, false);
    g->tile = gemm_op2(g, PTX_OP_DIV, ptx_r(sk->cur), ptx_imm(sk->kt));
    if (g->pp->dyn_m) {
        /* planned at m_cap: the tiles past this m's (the last ones, the
         * units walk tiles in order) are nobody's */
        ptx_reg past = gemm_setp(g, PTX_M_GE, ptx_r(g->tile), ptx_r(g->tiles_r));
        ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(out)), past, false);
    }
    ptx_reg t0 = gemm_mul(g, ptx_r(g->tile), ptx_imm(sk->kt));
    g->kt_begin = gemm_op2(g, PTX_OP_SUB, ptx_r(sk->cur), ptx_r(t0));
    ptx_reg left = gemm_op2(g, PTX_OP_SUB, ptx_r(sk->end), ptx_r(sk->cur));
    ptx_reg tend = gemm_op2(g, PTX_OP_ADD, ptx_r(t0), ptx_imm(sk->kt));
    ptx_reg rest = gemm_op2(g, PTX_OP_SUB, ptx_r(tend), ptx_r(sk->cur));
    sk->nk = gemm_op2(g, PTX_OP_MIN, ptx_r(left), ptx_r(rest));
    g->nkt = sk->nk;
    gemm_tile_coords(g);
}

void wg_sk_fixup(gemm_ctx *g, wg_sk *sk)
{
    int64_t I = sk->iters;
    /* first = ((t KT + 1) G - 1) / I, last = ((t + 1) KT G - 1) / I, G the
     * launch's %nctaid.x */
    ptx_reg ktg = gemm_mul(g, ptx_r(sk->grid), ptx_imm(sk->kt));
    ptx_reg gm1 = gemm_op2(g, PTX_OP_SUB, ptx_r(sk->grid), ptx_imm(1));
    ptx_reg a = gemm_mad(g, ptx_r(g->tile), ptx_r(ktg), ptx_r(gm1));
    ptx_reg first = gemm_op2(g, PTX_OP_DIV, ptx_r(a), ptx_imm(I));
    ptx_reg ktg1 = gemm_op2(g, PTX_OP_SUB, ptx_r(ktg), ptx_imm(1));
    ptx_reg b = gemm_mad(g, ptx_r(g->tile), ptx_r(ktg), ptx_r(ktg1));
    ptx_reg last = gemm_op2(g, PTX_OP_DIV, ptx_r(b), ptx_imm(I));
    g->split = gemm_op2(g, PTX_OP_SUB, ptx_r(sk->unit), ptx_r(first));
    ptx_reg span = gemm_op2(g, PTX_OP_SUB, ptx_r(last), ptx_r(first));
    g->arrivals = gemm_op2(g, PTX_OP_ADD, ptx_r(span), ptx_imm(1));
}

void wg_sk_tail(gemm_ctx *g, wg_sk *sk)
{
    ptx_emit(g->f, PTX_OP_ADD, NOM, U32T, ptx_r(sk->cur), ptx_r(sk->cur), ptx_r(sk->nk));
    ptx_emit(g->f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(sk->top));
}
