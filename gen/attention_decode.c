/* The attention decode kernel: split-KV with the fused last-arriver combine
 * (issue 11 item 2; ../shared/design/attention_hopper.md sections 1.6, 1.9).
 *
 * Grid (splits, Hkv * row blocks, B). A CTA owns one KV head of one
 * sequence and bm = 16 packed query rows (GQA packing: row r is query
 * r / group of head hk * group + r % group, so all query heads of a KV head
 * share one read of K and V; Sq * group > 16 takes several row blocks). Its
 * split s of S covers the key blocks [s NB / S, (s + 1) NB / S) of bn keys,
 * NB = ceil(len / bn) with len the sequence's run-time length (seqused_k,
 * the varlen cu_seqlens_k difference, or the run-time seqlen_k), so ragged
 * sequences split evenly and a split may be empty. Varlen: the sequence's
 * rows of the packed q and o (and k, v unless paged) start at its
 * cu_seqlens offsets and its query count is run-time too.
 *
 * Main loop (mma.sync m16n8k16, f32 accumulation): K and V tiles of bn keys
 * stream through a cp.async ring of `stages` stages (16-byte pieces, the
 * whole CTA's threads; paged KV gathers rows through the block table,
 * gen/kit/copy.h kit_paged). The kv_warps warps split every tile's keys
 * (kw = bn / kv_warps each) and keep their own online-softmax state and O
 * (Q from shared memory by ldmatrix, S = Q K^T, mask, softcap, exp2 with
 * the scale folded in, O += P V with P split into two 16-bit A fragments,
 * hi = P rounded and lo = the rest rounded, so P keeps ~16 bits: FA's
 * single rounding of P to bf16 costs 2^-9 of every term, which a long
 * average with cancellation turns into errors over the verifier's bound;
 * decode waits on memory, so the second P V mma is free); at the end the
 * warps' states merge in warp order through shared memory.
 *
 * Masks: key j of packed row r (query i) is visible iff j < len, j <= i +
 * len - Sq + wr when wr >= 0 (causal: wr = 0) and j >= i + len - Sq - wl
 * when wl >= 0; masked scores are -inf, so a row with no visible key keeps
 * (m, l) = (-inf, 0) and gives o = 0, lse = -inf exactly.
 *
 * Output: S = 1 writes o (and lse) directly. S > 1: each split writes its
 * normalised partial O (f32) and log2-sum-exp to the scratch (PT_ARG_SCRATCH:
 * nothing is read that this launch did not write), fences and counts itself
 * in its row block's counter (PT_ARG_WORKSPACE, u32); the split that brings
 * the counter to S resets it to 0 (the workspace stays all zero) and
 * combines the S partials in split order (deterministic whatever the
 * arrival order; no CTA waits on another): M = max lse_s, w_s = 2^(lse_s -
 * M), O = sum w_s O_s / sum w_s. S is read from %nctaid.x, so every split
 * count above 1 runs the same code. Sequence lengths are run-time
 * parameters (PT_ARG_U32); heads, head dims, masks and the page size are
 * immediates. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/attention_combine.h"
#include "gen/expr.h"
#include "gen/expr_ptx.h"

enum { DEC_BM = 16, DEC_MAX_SPLITS = 128, DEC_OPAD = 8, DEC_CUNITS = 4 };

static const int dec_bn[] = {32, 64, 128, 256};
static const int dec_warps[] = {1, 2, 4};
static const int dec_stages[] = {2, 3};

/* SMs of the usual part of each arch, for the split heuristic (A100 108,
 * A10 / RTX 3090 84 / 82, L40 / RTX 4090 142 / 128, H100 / H200 132). */
static int dec_sms(int sm)
{
    return sm >= 90 ? 132 : sm >= 89 ? 128 : sm >= 86 ? 84 : 108;
}

/* head dims of the op's schema (64 96 128 256): rows of 96 are 12 or 24
 * pieces, cut with a division (attn_idx_div) and, paged, on a power-of-two
 * row count a pass (copy_threads) */
static bool dec_dim_ok(int64_t d) { return d == 64 || d == 96 || d == 128 || d == 256; }

/* ---- geometry ---------------------------------------------------------- */

typedef struct dgeo {
    int bm, bn, W, T, kw, stages, splits;
    int64_t rows, nrb;        /* packed rows (Sq * group, maximum) and row blocks */
    kit_layout qt, kt, vt;    /* shared tiles: Q [bm][d], K [bn][d], V [bn][dv] */
    int64_t q_off, pipe_off, stage_bytes, v_off, obuf_pitch, obuf_bytes, stats_off, lse_off, flag_off;
    int64_t smem;
    int64_t part_bytes, scratch_bytes, ws_bytes;
    int regs;                 /* estimated live registers of the main loop */
} dgeo;

static kit_layout row_tile(int rows, int64_t row_bytes)
{
    return attn_pow2(row_bytes) ? kit_smem_tile(rows, (int)row_bytes, 0) : kit_smem_tile(rows, (int)row_bytes, 16);
}

static int64_t span(const kit_layout *l) { return (l->span + 127) / 128 * 128; }

static int geometry(const pt_prepared *pp, const pt_target *t, const pt_config *c, dgeo *g, pt_err *e)
{
    memset(g, 0, sizeof *g);
    int64_t impl = pt_config_get(c, "impl", ATTN_SPLIT);
    if (impl != ATTN_SPLIT)
        return pt_errf(e, PT_EINVAL, "impl=%lld: the decode kernel is impl=%d (split)", (long long)impl,
                       ATTN_SPLIT);
    g->bm = (int)pt_config_get(c, "bm", DEC_BM);
    g->bn = (int)pt_config_get(c, "bn", 128);
    g->W = (int)pt_config_get(c, "kv_warps", 4);
    g->stages = (int)pt_config_get(c, "stages", 2);
    int64_t splits = pt_config_get(c, "splits", 1);
    if (g->bm != DEC_BM)
        return pt_errf(e, PT_EINVAL, "bm=%d: the split kernel's row block is one m16 atom (bm=16)", g->bm);
    if (g->bn != 32 && g->bn != 64 && g->bn != 128 && g->bn != 256)
        return pt_errf(e, PT_EINVAL, "bn=%d: 32, 64, 128 or 256", g->bn);
    if (g->W != 1 && g->W != 2 && g->W != 4)
        return pt_errf(e, PT_EINVAL, "kv_warps=%d: 1, 2 or 4", g->W);
    if (g->stages < 2 || g->stages > 3)
        return pt_errf(e, PT_EINVAL, "stages=%d: 2 or 3", g->stages);
    if (splits < 1 || splits > DEC_MAX_SPLITS)
        return pt_errf(e, PT_EINVAL, "splits=%lld: 1..%d", (long long)splits, DEC_MAX_SPLITS);
    g->splits = (int)splits;
    g->T = 32 * g->W;
    g->kw = g->bn / g->W;
    if (g->kw < 16)
        return pt_errf(e, PT_EINVAL, "bn=%d with kv_warps=%d: each warp needs at least 16 keys of a tile", g->bn,
                       g->W);
    if (!dec_dim_ok(pp->d) || !dec_dim_ok(pp->dv))
        return pt_errf(e, PT_EUNSUPPORTED, "head_dim=%lld head_dim_v=%lld: impl=split supports 64, 96, 128, 256",
                       (long long)pp->d, (long long)pp->dv);
    if (pp->dt != PT_F16 && pp->dt != PT_BF16)
        return pt_errf(e, PT_EUNSUPPORTED, "dtype %s: impl=split supports f16 and bf16", pt_dtype_get(pp->dt)->name);
    if (!(pp->scale > 0.0f) || !isfinite(pp->scale))
        return pt_errf(e, PT_EUNSUPPORTED, "softmax_scale=%g: impl=split needs a positive scale", (double)pp->scale);
    if (pp->softcap < 0.0f || !isfinite(pp->softcap))
        return pt_errf(e, PT_EUNSUPPORTED, "softcap=%g: impl=split needs softcap >= 0", (double)pp->softcap);
    if (pp->page && !attn_pow2(pp->page))
        return pt_errf(e, PT_EINVAL, "page_size=%lld: must be a power of two", (long long)pp->page);
    g->rows = pp->Sq * pp->group;
    g->nrb = (g->rows + g->bm - 1) / g->bm;
    if (pp->Hkv * g->nrb > 65535 || pp->B > 65535)
        return pt_errf(e, PT_EUNSUPPORTED, "heads_kv x row blocks = %lld, batch %lld: the grid allows 65535",
                       (long long)(pp->Hkv * g->nrb), (long long)pp->B);
    int es = pp->es;
    g->qt = row_tile(g->bm, pp->d * es);
    g->kt = row_tile(g->bn, pp->d * es);
    g->vt = row_tile(g->bn, pp->dv * es);
    g->q_off = 0;
    g->pipe_off = span(&g->qt);
    g->v_off = span(&g->kt);
    g->stage_bytes = g->v_off + span(&g->vt);
    g->obuf_pitch = pp->dv + DEC_OPAD; /* floats: rows 8 words apart mod 32 */
    g->obuf_bytes = (int64_t)g->W * g->bm * g->obuf_pitch * 4;
    int64_t body = g->stages * g->stage_bytes;
    if (g->obuf_bytes > body)
        body = g->obuf_bytes;
    g->stats_off = g->pipe_off + body;
    g->lse_off = g->stats_off + (int64_t)g->W * g->bm * 8;
    g->flag_off = g->lse_off + g->bm * 4;
    g->smem = g->flag_off + 16;
    int64_t blocks = pp->B * pp->Hkv * g->nrb;
    g->part_bytes = blocks * g->splits * g->bm * pp->dv * 4;
    g->scratch_bytes = g->splits > 1 ? g->part_bytes + blocks * g->splits * g->bm * 4 : 0;
    g->ws_bytes = g->splits > 1 ? (blocks * 4 + 15) / 16 * 16 : 0;
    /* O (dv / 2), S (kw / 2), P (kw / 4), fragments and addresses */
    g->regs = (int)(pp->dv / 2 + g->kw / 2 + g->kw / 4 + 48);
    uint32_t lim = pt_target_smem_limit(t->sm);
    char tn[32];
    if (g->smem > (int64_t)lim)
        return pt_errf(e, PT_ERANGE, "bn=%d stages=%d kv_warps=%d: %lld bytes of shared memory, %s allows %u", g->bn,
                       g->stages, g->W, (long long)g->smem, pt_target_name(t, tn, sizeof tn), lim);
    /* live f32 registers of the main loop: O (dv / 2), S (kw / 2) and P's
     * hi and lo (kw / 2); above 160 ptxas took all 255 and compiled slowly */
    if (pp->dv / 2 + g->kw > 160)
        return pt_errf(e, PT_ERANGE,
                       "bn=%d kv_warps=%d head_dim_v=%lld: %lld O + %d S and P f32 registers per thread, 160 at most",
                       g->bn, g->W, (long long)pp->dv, (long long)(pp->dv / 2), g->kw);
    return PT_OK;
}

static int default_bn(const pt_prepared *pp) { return pp->d <= 64 ? 256 : pp->d <= 128 ? 128 : 64; }

static int heuristic_splits(const pt_prepared *pp, const pt_target *t, int bn)
{
    int64_t rows = pp->Sq * pp->group, nrb = (rows + DEC_BM - 1) / DEC_BM;
    /* two CTAs an SM, as FA2 counts (flash_api.cpp: multiProcessorCount * 2)
     * and the defaults' tiles allow */
    return attn_split_heuristic(pp->B * pp->Hkv * nrb, (pp->Sk + bn - 1) / bn, 2 * dec_sms(t->sm));
}

int attn_decode_space(const pt_prepared *pp, const pt_target *t, pt_space *out)
{
    memset(out, 0, sizeof *out);
    pt_param_space *p = out->p;
    p[0] = (pt_param_space){"impl", "kernel kind: 1 = split-KV decode", 1, {ATTN_SPLIT}};
    p[1] = (pt_param_space){"bm", "packed query rows per CTA (one m16 atom)", 1, {DEC_BM}};
    p[2] = (pt_param_space){"bn", "keys per K/V tile", 0, {0}};
    for (size_t i = 0; i < sizeof dec_bn / sizeof *dec_bn; i++)
        p[2].values[p[2].nvalues++] = dec_bn[i];
    p[3] = (pt_param_space){"kv_warps", "warps splitting each tile's keys (merged in warp order)", 0, {0}};
    for (size_t i = 0; i < sizeof dec_warps / sizeof *dec_warps; i++)
        p[3].values[p[3].nvalues++] = dec_warps[i];
    p[4] = (pt_param_space){"stages", "cp.async ring stages of K and V", 0, {0}};
    for (size_t i = 0; i < sizeof dec_stages / sizeof *dec_stages; i++)
        p[4].values[p[4].nvalues++] = dec_stages[i];
    p[5] = (pt_param_space){"splits", "CTAs splitting each sequence's keys (fused last-arriver combine)", 0, {0}};
    pt_config dc;
    attn_decode_defaults(pp, t, &dc);
    int h = (int)pt_config_get(&dc, "splits", 1);
    attn_splits_param(&p[5], h);
    out->nparams = 6;
    return PT_OK;
}

void attn_decode_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out)
{
    memset(out, 0, sizeof *out);
    int bn = default_bn(pp);
    pt_config_set(out, "impl", ATTN_SPLIT);
    pt_config_set(out, "bm", DEC_BM);
    pt_config_set(out, "bn", bn);
    pt_config_set(out, "kv_warps", 4);
    pt_config_set(out, "stages", 2);
    pt_config_set(out, "splits", heuristic_splits(pp, t, bn));
    /* the largest tile up to FA's that leaves room for two CTAs an SM
     * (decode hides memory latency with bytes in flight: FA2's split kernel
     * holds one K and one V tile, the ring two of each, so two CTAs of a
     * half-width tile keep as much in flight as one of FA's), or at least
     * fits (sm_86/89 have 99 KB) */
    pt_err e = {0};
    dgeo g;
    uint32_t lim = pt_target_smem_limit(t->sm);
    for (;;) {
        int rc = geometry(pp, t, out, &g, &e);
        bool fits2 = rc == PT_OK && 2 * (g.smem + 1024) <= (int64_t)lim;
        if (fits2 || bn <= 32 || (rc != PT_OK && rc != PT_ERANGE))
            break;
        bn /= 2;
        pt_config_set(out, "bn", bn);
        if (bn / 4 < 16)
            pt_config_set(out, "kv_warps", bn / 16);
    }
    pt_config_set(out, "splits", heuristic_splits(pp, t, bn)); /* key blocks of the tile chosen */
}

int attn_decode_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    dgeo g;
    return geometry(pp, t, c, &g, e);
}

/* ---- emission helpers -------------------------------------------------- */

typedef struct dctx {
    const pt_prepared *pp;
    dgeo g;
    ptx_fn *f;
    const kit_atom *at;
    ptx_reg tid, lane, warp, smem;
    ptx_reg b, hk, rb, split, nsplit;   /* u32 CTA coordinates, S */
    ptx_reg sq, len;                     /* s32 run-time lengths: this launch's Sq, this sequence's keys */
    ptx_reg o, lse, q, k, v, bt, su, cq, ck, scr, ws;
    float kexp;                          /* exponent scale of the softmax values */
    attn_out ao;                         /* the output stage's view (ao_sync) */
} dctx;

/* The output stage's view of the kernel (its current registers). */
static void ao_sync(dctx *x)
{
    const dgeo *g = &x->g;
    x->ao = (attn_out){.pp = x->pp, .f = x->f, .bm = g->bm, .T = g->T, .W = g->W, .splits = g->splits,
                       .nrb = g->nrb, .part_bytes = g->part_bytes, .obuf_pitch = g->obuf_pitch,
                       .lse_off = g->lse_off, .flag_off = g->flag_off, .tid = x->tid, .b = x->b, .hk = x->hk,
                       .rb = x->rb, .split = x->split, .nsplit = x->nsplit, .sq = x->sq, .smem = x->smem,
                       .o = x->o, .lse = x->lse, .scr = x->scr, .ws = x->ws};
}

static ptx_reg r32(ptx_fn *f) { return ptx_reg_new(f, PTX_T_B32); }
static ptx_reg rf(ptx_fn *f) { return ptx_reg_new(f, PTX_T_F32); }

static ptx_reg sreg(ptx_fn *f, ptx_sreg s)
{
    ptx_reg r = r32(f);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_sr(s));
    return r;
}


/* ---- the kernel -------------------------------------------------------- */

/* One K and one V tile through the pages; with equal row bytes the two
 * copies have the same cut, so V reuses K's table lookups. */
static void issue_kv_paged(ptx_fn *f, kit_g2s *ck, const kit_paged *pk, kit_g2s *cv, const kit_paged *pv,
                           ptx_reg st, int64_t v_off, ptx_reg kpred, ptx_reg vpred, bool share)
{
    if (!share) {
        kit_g2s_issue_paged(ck, pk, st, 0, kpred);
        kit_g2s_issue_paged(cv, pv, st, v_off, vpred);
        return;
    }
    ptx_reg *pages = pt_arena_alloc(f->mod->arena, (size_t)ck->n * sizeof(ptx_reg));
    memset(pages, 0, (size_t)ck->n * sizeof(ptx_reg));
    kit_g2s_issue_paged_shared(ck, pk, st, 0, kpred, pages, ck->n);
    kit_g2s_issue_paged_shared(cv, pv, st, v_off, vpred, pages, ck->n);
}

/* Threads of a paged tile copy of np pieces a row: all T when np is a
 * power of two, else np times the largest power of two <= T / np (the
 * gather needs a power-of-two rows a pass; gen/kit/copy.h). */
static int copy_threads(int T, int64_t np)
{
    if (attn_pow2(np) || np > T)
        return T;
    int rp = 1;
    while (2 * rp * np <= T)
        rp *= 2;
    return (int)(rp * np);
}

static void mma(ptx_fn *f, const kit_atom *at, ptx_opd d, ptx_opd a, ptx_opd b)
{
    ptx_types mt = PTX_TYPES(at->acc, at->ab, at->ab, at->acc);
    ptx_mods mm = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, at->shape, PTX_M_ROW, PTX_M_COL);
    ptx_emit(f, PTX_OP_MMA, mm, mt, d, a, b, d);
}

int attn_decode_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    dctx X = {.pp = pp};
    dctx *x = &X;
    int rc = geometry(pp, &pp->target, c, &x->g, e);
    if (rc)
        return rc;
    const dgeo *g = &x->g;
    x->at = kit_atom_get(pp->dt);
    const kit_atom *at = x->at;
    ptx_reg none = {0};
    int es = pp->es;
    int64_t d = pp->d, dv = pp->dv;
    bool split = g->splits > 1, paged = pp->page > 0;

    /* the name (and so the text) is the same for every split count above
     * 1: the code reads S from %nctaid.x */
    char cfg[256], sig[512], name[128];
    pt_config cn = *c;
    pt_config_set(&cn, "splits", split ? 2 : 1);
    pt_config_str(&cn, cfg, sizeof cfg);
    snprintf(sig, sizeof sig, "%lld %lld %lld %lld %lld %lld %lld %d %lld %lld %g %g %d %d %d %lld %lld|%s",
             (long long)pp->B, (long long)pp->Hq, (long long)pp->Hkv, (long long)pp->Sq, (long long)pp->Sk,
             (long long)d, (long long)dv, pp->causal, (long long)pp->wl, (long long)pp->wr, (double)pp->scale,
             (double)pp->softcap, pp->bhsd, pp->seqused, pp->lse, (long long)pp->page, (long long)pp->npages, cfg);
    snprintf(name, sizeof name, "attn_decode_%s_d%lld_%016llx", pt_dtype_get(pp->dt)->name, (long long)d,
             (unsigned long long)pt_hash64(sig, strlen(sig)));
    ptx_fn *f = x->f = ptx_fn_new(m, name);
    f->maxntid[0] = g->T;
    f->maxntid[1] = f->maxntid[2] = 1;
    /* the CTAs an SM holds by shared memory, at most those that leave 160
     * registers a thread: without it ptxas plans for 512 threads an SM
     * (128 registers) and spills where shared memory allows one CTA */
    {
        int64_t by_smem = (int64_t)pt_target_smem_limit(pp->target.sm) / (g->smem + 1024);
        int64_t by_regs = 65536 / ((int64_t)g->T * 160);
        int64_t n = by_smem < by_regs ? by_smem : by_regs;
        f->minnctapersm = (int)(n < 1 ? 1 : n);
    }
    ptx_module_extern_shared(m, "attn_smem", 128);

    /* ---- parameters ---- */
    l->nargs = 0;
    x->o = attn_param_ptr(x->f, l, "o", (pt_arg){PT_ARG_OUTPUT, pp->t.o, 0, 0});
    if (pp->lse)
        x->lse = attn_param_ptr(x->f, l, "lse", (pt_arg){PT_ARG_OUTPUT, pp->t.lse, 0, 0});
    x->q = attn_param_ptr(x->f, l, "q", (pt_arg){PT_ARG_INPUT, pp->t.q, 0, 0});
    x->k = attn_param_ptr(x->f, l, "k", (pt_arg){PT_ARG_INPUT, pp->t.k, 0, 0});
    x->v = attn_param_ptr(x->f, l, "v", (pt_arg){PT_ARG_INPUT, pp->t.v, 0, 0});
    if (paged)
        x->bt = attn_param_ptr(x->f, l, "block_table", (pt_arg){PT_ARG_INPUT, pp->t.block_table, 0, 0});
    if (pp->varlen) {
        x->cq = attn_param_ptr(x->f, l, "cu_seqlens_q", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_q, 0, 0});
        x->ck = attn_param_ptr(x->f, l, "cu_seqlens_k", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_k, 0, 0});
    }
    if (pp->seqused)
        x->su = attn_param_ptr(x->f, l, "seqused_k", (pt_arg){PT_ARG_INPUT, pp->t.seqused_k, 0, 0});
    if (split) {
        x->scr = attn_param_ptr(x->f, l, "partials", (pt_arg){PT_ARG_SCRATCH, 0, (uint64_t)g->scratch_bytes, 0});
        x->ws = attn_param_ptr(x->f, l, "counters", (pt_arg){PT_ARG_WORKSPACE, 0, (uint64_t)g->ws_bytes, 0});
    }
    ptx_reg sq_u = attn_param_u32(x->f, l, "seqlen_q", (uint64_t)pp->Sq);
    ptx_reg sk_u = attn_param_u32(x->f, l, "seqlen_k", (uint64_t)pp->Sk);

    /* ---- coordinates ---- */
    x->tid = sreg(f, PTX_S_TID_X);
    x->lane = kit_reg(f, kit_iop(f, PTX_OP_AND, ptx_r(x->tid), ptx_imm(31)));
    x->warp = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(x->tid), ptx_imm(5)));
    x->split = sreg(f, PTX_S_CTAID_X);
    x->nsplit = sreg(f, PTX_S_NCTAID_X);
    ptx_reg cy = sreg(f, PTX_S_CTAID_Y);
    x->b = sreg(f, PTX_S_CTAID_Z);
    x->hk = g->nrb == 1 ? cy : kit_reg(f, kit_iop(f, PTX_OP_DIV, ptx_r(cy), ptx_imm(g->nrb)));
    x->rb = g->nrb == 1 ? kit_reg(f, ptx_imm(0)) : kit_reg(f, kit_iop(f, PTX_OP_REM, ptx_r(cy), ptx_imm(g->nrb)));
    x->smem = r32(f);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(x->smem), ptx_sym("attn_smem"));
    x->sq = sq_u;
    /* this sequence's keys: seqused_k[b] (or seqlen_k, or its varlen
     * length), at most seqlen_k; varlen: its rows of the packed q, o (and
     * k, v when not paged) start at the cu_seqlens offsets */
    ptx_reg len = sk_u;
    if (pp->varlen) {
        ptx_reg aq = attn_add64(f, x->cq, ptx_r(x->b), 4), ak = attn_add64(f, x->ck, ptx_r(x->b), 4);
        ptx_reg q0 = r32(f), q1 = r32(f), k0 = r32(f), k1 = r32(f);
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(q0), ptx_addr(aq, 0));
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(q1), ptx_addr(aq, 4));
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(k0), ptx_addr(ak, 0));
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(k1), ptx_addr(ak, 4));
        ptx_reg sqb = attn_s32op(f, PTX_OP_SUB, ptx_r(q1), ptx_r(q0));
        sqb = attn_s32op(f, PTX_OP_MIN, ptx_r(sqb), ptx_r(sq_u));
        x->sq = attn_s32op(f, PTX_OP_MAX, ptx_r(sqb), ptx_imm(0));
        ptx_reg skb = attn_s32op(f, PTX_OP_SUB, ptx_r(k1), ptx_r(k0));
        len = attn_s32op(f, PTX_OP_MIN, ptx_r(skb), ptx_r(sk_u));
        x->q = attn_add64(f, x->q, ptx_r(q0), pp->sq[0] * pp->es);
        x->o = attn_add64(f, x->o, ptx_r(q0), pp->so[0] * pp->oes);
        if (!paged) {
            x->k = attn_add64(f, x->k, ptx_r(k0), pp->sk[0] * pp->es);
            x->v = attn_add64(f, x->v, ptx_r(k0), pp->sv[0] * pp->es);
        }
    }
    if (pp->seqused) {
        ptx_reg a = attn_add64(f, x->su, ptx_r(x->b), 4);
        ptx_reg u = r32(f);
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(u), ptx_addr(a, 0));
        len = attn_s32op(f, PTX_OP_MIN, ptx_r(u), ptx_r(len));
    }
    if (pp->seqused || pp->varlen)
        len = attn_s32op(f, PTX_OP_MAX, ptx_r(len), ptx_imm(0));
    x->len = len;
    attn_kv_range kr;
    attn_kv_range_emit(f, pp, g->bm, g->bn, x->rb, x->sq, len, x->split, x->nsplit, &kr);
    ptx_reg nblk = kr.nblk, key0 = kr.key0;

    /* ---- Q tile: 16 packed rows, zero past the real ones ---- */
    ao_sync(x);
    ptx_reg qs = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->smem), ptx_imm(g->q_off)));
    {
        int64_t nch = d * es / 16, total = g->bm * nch;
        ptx_reg rows = kit_reg(f, kit_iop(f, PTX_OP_MUL, ptx_r(x->sq), ptx_imm(pp->group)));
        for (int64_t k = 0; k * g->T < total; k++) {
            ptx_reg id = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->tid), ptx_imm(k * g->T)));
            ptx_reg r, ch;
            attn_idx_div(f, id, nch, &r, &ch);
            ptx_reg rg = kit_reg(f, kit_imad(f, ptx_r(x->rb), ptx_imm(g->bm), ptx_r(r)));
            ptx_reg ok = attn_setp(f, PTX_M_LT, S32T, ptx_r(rg), ptx_r(rows));
            ptx_reg have = (k + 1) * g->T > total ? attn_setp(f, PTX_M_LT, U32T, ptx_r(id), ptx_imm(total)) : none;
            ptx_reg rgs = r32(f); /* a real row, or row 0 (read nothing: src-size 0) */
            ptx_emit(f, PTX_OP_SELP, NOM, PTX_T1(PTX_T_B32), ptx_r(rgs), ptx_r(rg), ptx_imm(0), ptx_r(ok));
            ptx_reg src = attn_add64(f, attn_row_addr(&x->ao, x->q, pp->sq, pp->es, rgs), ptx_r(ch), 16);
            ptx_opd co[2] = {ptx_r(r), kit_iop(f, PTX_OP_SHL, ptx_r(ch), ptx_imm(4))};
            ptx_reg dst = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(qs), kit_emit(f, &g->qt, co, 0)));
            ptx_reg sz = r32(f);
            ptx_emit(f, PTX_OP_SELP, NOM, PTX_T1(PTX_T_B32), ptx_r(sz), ptx_imm(16), ptx_imm(0), ptx_r(ok));
            ptx_ins *in = ptx_emit(f, PTX_OP_CP_ASYNC, M3(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL), PTX_NOTYPES,
                                   ptx_addr(dst, 0), ptx_addr(src, 0), ptx_imm(16), ptx_r(sz));
            if (have.id)
                ptx_guard(in, have, false);
        }
    }

    /* ---- K / V copies ---- */
    ptx_reg ps = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->smem), ptx_imm(g->pipe_off)));
    ptx_reg rows_left = attn_s32op(f, PTX_OP_SUB, ptx_r(len), ptx_r(key0));
    kit_g2s ck, cv;
    kit_paged pk, pv;
    ptx_reg kin = none, vin = none;
    {
        int64_t kbase = pp->sk[1] * es, vbase = pp->sv[1] * es; /* this head */
        ptx_reg kh = attn_add64(f, x->k, ptx_r(x->hk), kbase), vh = attn_add64(f, x->v, ptx_r(x->hk), vbase);
        kit_view vk = {.ld_bytes = pp->sk[0] * es, .es = es, .rows = ptx_r(rows_left), .cols = ptx_imm(d),
                       .row_edge = true};
        kit_view vvv = {.ld_bytes = pp->sv[0] * es, .es = es, .rows = ptx_r(rows_left), .cols = ptx_imm(dv),
                        .row_edge = true};
        if (paged) {
            vk.base = kh;
            vvv.base = vh;
        } else {
            ptx_reg kb = attn_add64(f, kh, ptx_r(x->b), pp->sk[2] * es), vb = attn_add64(f, vh, ptx_r(x->b), pp->sv[2] * es);
            vk.base = attn_add64(f, kb, ptx_r(key0), pp->sk[0] * es);
            vvv.base = attn_add64(f, vb, ptx_r(key0), pp->sv[0] * es);
        }
        int tk = paged ? copy_threads(g->T, d * es / 16) : g->T, tv = paged ? copy_threads(g->T, dv * es / 16) : g->T;
        kit_g2s_init(f, &ck, &g->kt, &vk, tk, x->tid, 16, g->bn, 0);
        kit_g2s_init(f, &cv, &g->vt, &vvv, tv, x->tid, 16, g->bn, 0);
        /* hd96 paged: threads past the cut's (a power of two rows a pass)
         * issue nothing */
        if (tk < g->T)
            kin = attn_setp(f, PTX_M_LT, U32T, ptx_r(x->tid), ptx_imm(tk));
        if (tv < g->T)
            vin = attn_setp(f, PTX_M_LT, U32T, ptx_r(x->tid), ptx_imm(tv));
        ck.l2_128 = cv.l2_128 = true;
        if (paged) {
            ptx_reg tab = attn_add64(f, x->bt, ptx_r(x->b), pp->pages_per_seq * 4);
            pk = (kit_paged){.table = tab, .pool = kh, .page = (int)pp->page, .page_bytes = pp->sk[2] * es,
                             .row = r32(f)};
            pv = (kit_paged){.table = tab, .pool = vh, .page = (int)pp->page, .page_bytes = pp->sv[2] * es,
                             .row = r32(f)};
            ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(pk.row), ptx_r(key0));
            ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(pv.row), ptx_r(key0));
            kit_g2s_paged_init(&ck, &pk, x->tid);
            kit_g2s_paged_init(&cv, &pv, x->tid);
        }
    }
    kit_pipe pipe;
    kit_pipe_init(f, &pipe, KIT_PIPE_CP_ASYNC, g->stages, g->stage_bytes, ps, false);
    /* prologue: stages - 1 tiles (the first group carries Q too) */
    for (int s = 0; s < g->stages - 1; s++) {
        ptx_reg st = kit_pipe_acquire(&pipe);
        ptx_reg p = attn_setp(f, PTX_M_GT, S32T, ptx_r(nblk), ptx_imm(s));
        if (paged) {
            issue_kv_paged(f, &ck, &pk, &cv, &pv, st, g->v_off, attn_pand(f, p, kin), attn_pand(f, p, vin), d == dv);
            kit_g2s_paged_advance(&ck, &pk);
            kit_g2s_paged_advance(&cv, &pv);
        } else {
            kit_g2s_issue(&ck, st, 0, p);
            kit_g2s_issue(&cv, st, g->v_off, p);
            kit_g2s_advance(&ck);
            kit_g2s_advance(&cv);
        }
        kit_pipe_commit(&pipe);
    }

    /* ---- fragments, masks, state ---- */
    int nS = g->kw / 8 * 4, nO = (int)(dv / 8 * 4);
    ptx_reg *Sr = pt_arena_alloc(m->arena, (size_t)nS * sizeof(ptx_reg));
    ptx_reg *Pr = pt_arena_alloc(m->arena, (size_t)nS * sizeof(ptx_reg));
    ptx_reg *Ph = pt_arena_alloc(m->arena, (size_t)nS * sizeof(ptx_reg));
    ptx_reg *Pl = pt_arena_alloc(m->arena, (size_t)nS * sizeof(ptx_reg));
    ptx_reg *Or = pt_arena_alloc(m->arena, (size_t)nO * sizeof(ptx_reg));
    for (int i = 0; i < nS; i++)
        Sr[i] = rf(f);
    for (int i = 0; i < nO; i++) {
        Or[i] = rf(f);
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(Or[i]), ptx_f32(0.0f));
    }
    ptx_reg zr = kit_reg(f, ptx_imm(0));
    kit_frag sfr = kit_frag_mma_c(f, at, 1, g->kw / 8, Sr, zr, zr, x->lane);
    kit_frag ofr = kit_frag_mma_c(f, at, 1, (int)(dv / 8), Or, zr, zr, x->lane);
    attn_rows_mask rm;
    attn_rows_mask_emit(f, pp, g->bm, x->rb, sfr.row_base, x->sq, len, &kr, &rm);
    x->kexp = pp->softcap > 0.0f ? pp->softcap : pp->scale;
    kit_softmax sm[2] = {kit_softmax_new(f, x->kexp), kit_softmax_new(f, x->kexp)};
    sm[0].fresh = sm[1].fresh = false; /* updates are emitted in the loop body */

    /* ldmatrix addressing: Q (A, K-major), K (B, K-major), V (B, MN-major) */
    kit_layout la = kit_ldsm_atom_lanes(at, KIT_A, true);
    kit_layout lbk = kit_ldsm_atom_lanes(at, KIT_B, true);
    kit_layout lbv = kit_ldsm_atom_lanes(at, KIT_B, false);
    int nks = (int)(d / 16), nkb = g->kw / 16, nvb = (int)(dv / 16);
    int *ra = pt_arena_alloc(m->arena, (size_t)(nks + nkb * nks + nkb * nvb) * 2 * sizeof(int));
    int *qa_r = ra, *qa_b = ra + nks, *kr_ = qa_b + nks, *kb_ = kr_ + nkb * nks, *vr_ = kb_ + nkb * nks,
        *vb_ = vr_ + nkb * nvb;
    for (int s = 0; s < nks; s++) {
        qa_r[s] = 0;
        qa_b[s] = s * 16 * es;
    }
    for (int n = 0; n < nkb; n++)
        for (int s = 0; s < nks; s++) {
            kr_[n * nks + s] = n * 16;
            kb_[n * nks + s] = s * 16 * es;
        }
    for (int kb = 0; kb < nkb; kb++)
        for (int n = 0; n < nvb; n++) {
            vr_[kb * nvb + n] = kb * 16;
            vb_[kb * nvb + n] = n * 16 * es;
        }
    ptx_reg wrow = kit_reg(f, kit_iop(f, PTX_OP_MUL, ptx_r(x->warp), ptx_imm(g->kw)));
    kit_ldsm lq, lk, lv;
    kit_ldsm_init(f, &lq, &g->qt, &la, x->lane, ptx_imm(0), ptx_imm(0), nks, qa_r, qa_b);
    kit_ldsm_init(f, &lk, &g->kt, &lbk, x->lane, ptx_r(wrow), ptx_imm(0), nkb * nks, kr_, kb_);
    kit_ldsm_init(f, &lv, &g->vt, &lbv, x->lane, ptx_r(wrow), ptx_imm(0), nkb * nvb, vr_, vb_);
    ptx_reg *qaddr = pt_arena_alloc(m->arena, (size_t)nks * sizeof(ptx_reg));
    ptx_reg *kaddr = pt_arena_alloc(m->arena, (size_t)(nkb * nks) * sizeof(ptx_reg));
    ptx_reg *vaddr = pt_arena_alloc(m->arena, (size_t)(nkb * nvb) * sizeof(ptx_reg));
    kit_ldsm_at(f, &lq, qs, qaddr);
    /* key of this thread's column 0 in the current tile */
    ptx_reg kcol = kit_reg(f, kit_iop(f, PTX_OP_ADD, kit_iop(f, PTX_OP_ADD, ptx_r(key0), ptx_r(wrow)),
                                      ptx_r(sfr.col_base)));
    /* and of the warp's key 0 (warp-uniform: the mask branch) */
    ptx_reg wkey = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(key0), ptx_r(wrow)));

    /* ---- main loop over this split's key blocks ---- */
    ptx_reg it = kit_reg(f, ptx_imm(0));
    int top = ptx_label_new(f), after = ptx_label_new(f);
    attn_bra(f, after, attn_setp(f, PTX_M_LE, S32T, ptx_r(nblk), ptx_imm(0)), false);
    ptx_label_place(f, top);
    {
        ptx_reg st = kit_pipe_wait(&pipe, -1);
        /* refill: tile it + stages - 1 into the stage released last round */
        ptx_reg nx = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(it), ptx_imm(g->stages - 1)));
        ptx_reg p = attn_setp(f, PTX_M_LT, S32T, ptx_r(nx), ptx_r(nblk));
        ptx_reg wst = kit_pipe_acquire(&pipe);
        if (paged) {
            issue_kv_paged(f, &ck, &pk, &cv, &pv, wst, g->v_off, attn_pand(f, p, kin), attn_pand(f, p, vin), d == dv);
            kit_g2s_paged_advance(&ck, &pk);
            kit_g2s_paged_advance(&cv, &pv);
        } else {
            kit_g2s_issue(&ck, wst, 0, p);
            kit_g2s_issue(&cv, wst, g->v_off, p);
            kit_g2s_advance(&ck);
            kit_g2s_advance(&cv);
        }
        kit_pipe_commit(&pipe);

        /* S = Q K^T over this warp's kw keys */
        for (int i = 0; i < nS; i++)
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(Sr[i]), ptx_f32(0.0f));
        kit_ldsm_at(f, &lk, st, kaddr);
        for (int s = 0; s < nks; s++) {
            ptx_reg qa[4] = {r32(f), r32(f), r32(f), r32(f)};
            kit_ldsm_emit(f, &lq, s, 4, false, ptx_vecr(f, 4, qa), qaddr, 0, none);
            for (int n = 0; n < nkb; n++) {
                ptx_reg kb4[4] = {r32(f), r32(f), r32(f), r32(f)};
                kit_ldsm_emit(f, &lk, n * nks + s, 4, false, ptx_vecr(f, 4, kb4), kaddr, 0, none);
                for (int h = 0; h < 2; h++)
                    mma(f, at, ptx_vecr(f, 4, Sr + (2 * n + h) * 4), ptx_vecr(f, 4, qa), ptx_vecr(f, 2, kb4 + 2 * h));
            }
        }
        /* softcap, then the mask only where the warp's keys are not all
         * visible to every real row (the sequence's last block, a split
         * or window edge, causal Sq > 1's last blocks): a warp-uniform
         * branch skips it on full blocks */
        ptx_reg mvr[256];
        for (int i = 0; i < nS; i++)
            mvr[i] = attn_score(f, pp, Sr[i]);
        int nomask = ptx_label_new(f);
        attn_bra(f, nomask, attn_mask_needed(f, &kr, wkey, g->kw), true);
        attn_mask_scores(f, &sfr, &rm, kcol, mvr, nS);
        ptx_label_place(f, nomask);
        for (int h = 0; h < 2; h++) {
            ptx_opd alpha = attn_softmax_half(f, sm, &sfr, mvr, nS, h, Pr);
            for (int i = 0; i < nO; i++)
                if ((ofr.row[i] >= 8) == h)
                    ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(Or[i]), ptx_r(Or[i]), alpha);
        }
        /* O += P V with P = hi + lo, both 16-bit (hi = P rounded, lo = the
         * rest rounded): P keeps ~16 significant bits instead of 8 (bf16) or
         * 11 (f16), so O's error is the f32 sums' and not P's rounding,
         * which cancels badly in a long average; decode has the MMA time
         * (it waits on memory) */
        /* hi = P rounded toward zero, lo = P - hi >= 0, and a positive P
         * keeps a nonzero lo (at least 2^-24 in f16, 2^-126 in bf16: at
         * most 1000 x 2^-24 of |v| over 1000 keys): a v of +-inf then
         * meets two nonzero parts of one sign and gives +-inf, as one
         * rounded P would (a zero part, or hi and a negative lo, times inf
         * is NaN) */
        attn_p_split(f, pp->dt, Pr, Ph, Pl, nS);
        kit_frag phi = sfr, plo = sfr;
        phi.r = Ph;
        plo.r = Pl;
        kit_ldsm_at(f, &lv, st, vaddr);
        for (int kb = 0; kb < nkb; kb++) {
            ptx_reg pa[4], pl[4];
            kit_frag_to_a(f, &phi, at, 0, kb, pa);
            kit_frag_to_a(f, &plo, at, 0, kb, pl);
            for (int n = 0; n < nvb; n++) {
                ptx_reg vb4[4] = {r32(f), r32(f), r32(f), r32(f)};
                kit_ldsm_emit(f, &lv, kb * nvb + n, 4, true, ptx_vecr(f, 4, vb4), vaddr, g->v_off, none);
                for (int h = 0; h < 2; h++) {
                    ptx_opd od = ptx_vecr(f, 4, Or + (2 * n + h) * 4), vb = ptx_vecr(f, 2, vb4 + 2 * h);
                    mma(f, at, od, ptx_vecr(f, 4, pa), vb);
                    mma(f, at, od, ptx_vecr(f, 4, pl), vb);
                }
            }
        }
        kit_pipe_release(&pipe);
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(kcol), ptx_r(kcol), ptx_imm(g->bn));
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(wkey), ptx_r(wkey), ptx_imm(g->bn));
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
        attn_bra(f, top, attn_setp(f, PTX_M_LT, S32T, ptx_r(it), ptx_r(nblk)), false);
    }
    ptx_label_place(f, after);
    kit_pipe_drain(&pipe); /* Q's group too, when the split is empty */

    /* ---- the warps' states: row (m, l), merged in warp order ---- */
    for (int h = 0; h < 2; h++)
        kit_softmax_reduce(f, &sm[h], 4, NULL);
    ptx_reg fac[2], lse2[2];
    float k2 = (float)(x->kexp * 1.44269504088896341);
    ptx_reg t0 = attn_setp(f, PTX_M_EQ, U32T, kit_iop(f, PTX_OP_AND, ptx_r(x->lane), ptx_imm(3)), ptx_imm(0));
    ptx_reg stats = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->smem), ptx_imm(g->stats_off)));
    if (g->W > 1) {
        for (int h = 0; h < 2; h++) {
            ptx_opd row = kit_iop(f, PTX_OP_ADD, ptx_r(sfr.row_base), ptx_imm(8 * h));
            ptx_reg a = kit_reg(f, kit_imad(f, kit_imad(f, ptx_r(x->warp), ptx_imm(g->bm), row), ptx_imm(8),
                                            ptx_r(stats)));
            ptx_guard(ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V2), F32T, ptx_addr(a, 0),
                               ptx_vecr(f, 2, (ptx_reg[]){sm[h].m, sm[h].s})),
                      t0, false);
        }
        attn_bar(f, 0, 0);
    }
    for (int h = 0; h < 2; h++) {
        ptx_reg M = sm[h].m, L = sm[h].s;
        if (g->W > 1) {
            ptx_opd row = kit_iop(f, PTX_OP_ADD, ptx_r(sfr.row_base), ptx_imm(8 * h));
            ptx_reg a = kit_reg(f, kit_imad(f, row, ptx_imm(8), ptx_r(stats)));
            kit_softmax all = kit_softmax_new(f, x->kexp);
            for (int w = 0; w < g->W; w++) {
                ptx_reg mw = rf(f), lw = rf(f);
                ptx_emit(f, PTX_OP_LD, M2(PTX_M_SHARED, PTX_M_V2), F32T, ptx_vecr(f, 2, (ptx_reg[]){mw, lw}),
                         ptx_addr(a, (int64_t)w * g->bm * 8));
                if (w == 0) {
                    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(all.m), ptx_r(mw));
                    ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(all.s), ptx_r(lw));
                } else {
                    kit_softmax_merge(f, &all, ptx_r(mw), ptx_r(lw));
                }
            }
            M = all.m;
            L = all.s;
        }
        /* this warp's share: exp(k (m_w - safe(M))) / L */
        ptx_reg inv = attn_inv_or_zero(f, L);
        if (g->W > 1) {
            ptx_reg ms = kit_softmax_safe_max(f, ptx_r(M));
            ptx_reg ew = kit_softmax_exp(f, ptx_r(sm[h].m), ptx_r(ms), x->kexp);
            fac[h] = attn_fop2(f, PTX_OP_MUL, ptx_r(ew), ptx_r(inv));
        } else {
            fac[h] = inv;
        }
        ptx_reg lg = rf(f);
        ptx_emit(f, PTX_OP_LG2, M1(PTX_M_APPROX), F32T, ptx_r(lg), ptx_r(L));
        lse2[h] = rf(f);
        ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(lse2[h]), ptx_r(M), ptx_f32(k2), ptx_r(lg));
    }
    /* scaled O of every warp into the buffer (over the ring), row lse2 */
    ptx_reg ob = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(x->smem), ptx_imm(g->pipe_off)));
    {
        ptx_opd wbase = kit_iop(f, PTX_OP_MUL, ptx_r(x->warp), ptx_imm((int64_t)g->bm * g->obuf_pitch * 4));
        ptx_opd rb0 = kit_imad(f, ptx_r(ofr.row_base), ptx_imm(g->obuf_pitch * 4),
                               kit_iop(f, PTX_OP_SHL, ptx_r(ofr.col_base), ptx_imm(2)));
        ptx_reg a = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(ob), kit_iop(f, PTX_OP_ADD, wbase, rb0)));
        for (int i = 0; i < nO; i += 2) {
            int h = ofr.row[i] >= 8;
            ptx_reg v0 = attn_fop2(f, PTX_OP_MUL, ptx_r(Or[i]), ptx_r(fac[h]));
            ptx_reg v1 = attn_fop2(f, PTX_OP_MUL, ptx_r(Or[i + 1]), ptx_r(fac[h]));
            ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V2), F32T,
                     ptx_addr(a, ((int64_t)ofr.row[i] * g->obuf_pitch + ofr.col[i]) * 4),
                     ptx_vecr(f, 2, (ptx_reg[]){v0, v1}));
        }
        ptx_reg w0 = attn_pand(f, t0, attn_setp(f, PTX_M_EQ, U32T, ptx_r(x->warp), ptx_imm(0)));
        for (int h = 0; h < 2; h++) {
            ptx_opd row = kit_iop(f, PTX_OP_ADD, ptx_r(sfr.row_base), ptx_imm(8 * h));
            ptx_reg la2 = kit_reg(f, kit_imad(f, row, ptx_imm(4), ptx_imm(g->lse_off)));
            la2 = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(la2), ptx_r(x->smem)));
            ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), F32T, ptx_addr(la2, 0), ptx_r(lse2[h])), w0, false);
        }
    }
    attn_bar(f, 0, 0);

    /* ---- the CTA's normalised O: stored, or the split partials and the
     * last arriver's combine (gen/attention_combine.c) ---- */
    ao_sync(x);
    attn_out_emit(&x->ao, ob);

    l->grid[0] = (unsigned)g->splits;
    l->grid[1] = (unsigned)(pp->Hkv * g->nrb);
    l->grid[2] = (unsigned)pp->B;
    l->block[0] = (unsigned)g->T;
    l->block[1] = l->block[2] = 1;
    l->smem = (size_t)g->smem;
    l->smem_optin = g->smem > 48 * 1024;
    l->align = 16;
    l->entry = f->name;
    if (m->err.code) {
        pt_errf(e, m->err.code, "%s", m->err.msg);
        return m->err.code;
    }
    return PT_OK;
}
