/* Split-KV attention decode on the sm_90a wgmma / TMA main loop (issue 16
 * item 2; design: ../shared/design/attention_hopper.md sections 1.8, 1.9;
 * facts: shared/ref/ptx-sm90.md). Config impl=3 (ATTN_FA3_SPLIT).
 *
 * Grid (splits, Hkv * row blocks, B), 256 threads: warpgroup 0 produces,
 * warpgroup 1 computes. A CTA owns one KV head of one sequence and 64
 * packed query rows, the wgmma M (row r: query r / group of head
 * hk * group + r % group, so the query heads of one KV head and the Sq
 * query positions share one read of K and V; rows past Sq * group are
 * zero and never stored). Its split covers the key blocks
 * [s NB / S, (s + 1) NB / S) of bn keys among those its rows can see,
 * exactly as the mma.sync split kernel (gen/attention_decode.c) cuts them.
 *
 *   producer (setmaxnreg.dec 40): one elected thread of warp 0 walks the
 *     split's key blocks through an mbarrier ring of `stages` stages
 *     (gen/kit/pipe.h): waits empty[s], arms full[s] with the stage's
 *     bytes, and loads K and V of bn keys by TMA in 64-column boxes that
 *     land as 128B-swizzled rows of 128 bytes. Paged KV: one box per page
 *     and 64 columns (maps over the pools [num_pages, page, Hkv, d], the
 *     page index read from the block table by that thread; a page past the
 *     sequence's keys is asked at page coordinate num_pages, which TMA
 *     fills with zeros, so no table entry past the sequence is read); the
 *     box rows are min(page, bn), so a page of 8 keys or more keeps every
 *     box on the swizzle pattern; smaller pages (1, 2, 4 keys) are gathered
 *     by all 128 producer threads with cp.async into the same layout
 *     (attn_gather_rows; a cp.async.mbarrier.arrive.noinc each, full barriers of
 *     128 arrivals, the consumer's fence.proxy.async after its wait; with
 *     e4m3 warps 1..3 also convert V, stages - 1 blocks behind their
 *     gather: see the gather loop). Not paged: one box per 64
 *     columns over [B, Sk, Hkv, d] (bshd) or [B, Hkv, Sk, d] (bhsd), zero
 *     past seqlen_k. Varlen without pages: boxes over the packed rows
 *     (d, Hkv, total) from cu_seqlens_k[b]; a box past the sequence reads
 *     the next one's keys, which the consumer masks and (V) zeroes as any
 *     key at or past len.
 *   consumer (setmaxnreg.inc): Q (64 packed rows) by ordinary loads into a
 *     K-major 128B-swizzled tile once, fence.proxy.async, bar.sync 1, 128;
 *     per key block: wait full[s]; S = Q K^T by d/16 wgmma m64n{bn}k16 SS;
 *     commit, wait 0; softcap, the mask (only on blocks some real row
 *     cannot see entirely: a warpgroup-uniform branch), the online softmax
 *     on the D fragment (one warp's D is an mma.sync m16n8 C row of
 *     atoms: kit_frag_mma_c over the warp's 16 rows; quad reductions);
 *     O *= alpha (a warp whose 16 rows are all padding, as most are in
 *     GQA decode, skips the softmax: P = 0, alpha = 0); P as two 16-bit parts (hi, lo; gen/attention_combine.h
 *     attn_p_split, as the split kernel), each the RS A fragment (the
 *     mma.sync A fragment, kit_frag_to_a); O += P V by bn/16 x 2 wgmma
 *     m64n{dv}k16 RS (V MN-major, 128B swizzle, transpose-B); commit,
 *     wait 0; release the stage (lane 0 of each warp).
 * After the loop the consumer writes its normalised O and log2-sum-exp to
 * shared memory (over the ring) and runs the split kernel's output stage
 * (attn_out_emit: the direct store, or the partials and the fused
 * last-arriver combine, deterministic in split order) on its 128 threads,
 * synchronised by bar.sync 1, 128.
 *
 * fp8 (dtype e4m3, descale_q and descale_k folded into the scale,
 * descale_v into the final 1 / l): S by wgmma e4m3 (k32 steps over the
 * same 128-byte swizzled rows: a box is 128 elements); wgmma takes 8-bit
 * B K-major only, so V ([keys][dv], MN-major) is converted to f16 (exact)
 * by warps 1..3 of warpgroup 0 into an f16 V ring of its own (convert_v;
 * its full barriers say "converted"), and P V runs in f16 as above. Head
 * dim 64: Q, K and raw V in 64-byte rows with the 64B swizzle (TMA boxes
 * of 64 elements, descriptors in 64B mode, SBO 512, two k32 steps); head
 * dim 96: one 128-byte span a row, the 32 bytes past it zero-filled by TMA
 * and never read (3 of 4 k32 steps), P V N=96 over two f16 boxes; pages
 * under 8 keys: the gather's 128-byte rows (hd64: the half past 64 unread).
 *
 * Registers: ctas=1 (one CTA an SM) producer 40 / consumer 256 (.maxnreg
 * 152 at entry, 160 at head_dim_v 256: ptxas checks each instruction
 * against the entry count, and the m64n256 P V wgmma needs 158); ctas=2:
 * 40 / 216 (.maxnreg 128, so head_dim_v 256 is refused); the entry count
 * fixed so that ptxas honours setmaxnreg. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/attention_combine.h"
#include "ptx/emu/tmap.h"

enum { F3D_BM = 64, F3D_T = 256, F3D_MAX_SPLITS = 128, F3D_PROD_REGS = 40, F3D_OPAD = 8, F3D_MIN_PAGE = 8 };

static const int f3d_bn[] = {64, 128, 32};
static const int f3d_stages[] = {2, 3, 4, 6, 8};

bool attn_fa3_decode_target(const pt_target *t) { return t->sm == 90 && t->arch_specific; }

/* ---- geometry ---------------------------------------------------------- */

typedef struct fgeo {
    int bn, stages, splits, ctas, cregs, eregs; /* eregs: .maxnreg at entry */
    int pr;                 /* rows of one TMA box: min(page, bn), or bn */
    bool gather;            /* pages under F3D_MIN_PAGE keys: cp.async gather (attn_gather_rows) */
    int64_t rows, nrb;
    int64_t q_bytes, k_bytes, v_bytes, stage_bytes;
    bool fp8;               /* e4m3 q, k, v: V converted to f16 by warps 1..3 of warpgroup 0 */
    int kw, vw;             /* bytes of a K (and Q) / raw V row in shared memory, the swizzle span: 128, or
                             * 64 (64B swizzle) for a 64-byte e4m3 row loaded by TMA */
    int64_t vc_off, vc_bytes, cbars_off; /* fp8: the f16 V ring and its barriers */
    int64_t ring_off, region, bars_off, lse_off, flag_off, smem;
    int64_t obuf_pitch, part_bytes, scratch_bytes, ws_bytes;
} fgeo;

static int consumer_regs(int ctas) { return ctas == 1 ? 256 : 216; }
/* Registers ptxas needs at one wgmma of N columns: N/2 accumulators and 30
 * more (A fragment, descriptors, the ones it keeps). ptxas checks an
 * instruction against the entry count (.maxnreg), not against the
 * setmaxnreg.inc in force: C7602 "Insufficient registers (152)" at the
 * m64n256k16 P V wgmma of head_dim_v 256 (158 needed: measured, as 62 at
 * N = 64 and 94 at N = 128). The widest wgmma is S (N = bn) or P V (N = dv). */
static int wgmma_regs(int bn, int64_t dv) { return (int)((bn > dv ? bn : dv) / 2) + 30; }
/* .maxnreg at entry: the CTA's register pool is entry x 256 threads, and
 * the split's 128 (40 + consumer) must fit it (152 x 256 = 38912: one CTA
 * an SM; 128 x 256: two, the most 65536 allow); one CTA an SM raises it to
 * the widest wgmma's need rounded up to 8 (160 at head_dim_v 256) */
static int entry_regs(int ctas, int need)
{
    if (ctas != 1)
        return 128;
    int r = (need + 7) / 8 * 8;
    return r > 152 ? r : 152;
}

static int geometry(const pt_prepared *pp, const pt_target *t, const pt_config *c, fgeo *g, pt_err *e)
{
    memset(g, 0, sizeof *g);
    char tn[32];
    int64_t impl = pt_config_get(c, "impl", ATTN_FA3_SPLIT);
    if (impl != ATTN_FA3_SPLIT)
        return pt_errf(e, PT_EINVAL, "impl=%lld: the sm_90a decode kernel is impl=%d", (long long)impl,
                       ATTN_FA3_SPLIT);
    if (!attn_fa3_decode_target(t))
        return pt_errf(e, PT_EUNSUPPORTED, "impl=%d (wgmma decode) needs sm_90a; target is %s", ATTN_FA3_SPLIT,
                       pt_target_name(t, tn, sizeof tn));
    int64_t bm = pt_config_get(c, "bm", F3D_BM);
    g->bn = (int)pt_config_get(c, "bn", 64);
    g->stages = (int)pt_config_get(c, "stages", 4);
    g->ctas = (int)pt_config_get(c, "ctas", 1);
    int64_t splits = pt_config_get(c, "splits", 1);
    if (bm != F3D_BM)
        return pt_errf(e, PT_EINVAL, "bm=%lld: impl=%d's row block is the wgmma M (bm=64)", (long long)bm,
                       ATTN_FA3_SPLIT);
    if (g->bn != 32 && g->bn != 64 && g->bn != 128 && g->bn != 256)
        return pt_errf(e, PT_EINVAL, "bn=%d: 32, 64, 128 or 256 (the S wgmma's N)", g->bn);
    if (g->stages < 2 || g->stages > 8)
        return pt_errf(e, PT_EINVAL, "stages=%d: 2..8", g->stages);
    if (g->ctas != 1 && g->ctas != 2)
        return pt_errf(e, PT_EINVAL, "ctas=%d: 1 or 2 CTAs an SM (the setmaxnreg split)", g->ctas);
    if (splits < 1 || splits > F3D_MAX_SPLITS)
        return pt_errf(e, PT_EINVAL, "splits=%lld: 1..%d", (long long)splits, F3D_MAX_SPLITS);
    g->splits = (int)splits;
    /* hd96: two 64-column boxes a row, the second's columns past 96 zero-filled and never read */
    bool dok = pp->d == 64 || pp->d == 96 || pp->d == 128 || pp->d == 256;
    if (!dok || (pp->dv != 64 && pp->dv != 96 && pp->dv != 128 && pp->dv != 256))
        return pt_errf(e, PT_EUNSUPPORTED, "head_dim=%lld head_dim_v=%lld: impl=%d supports 64, 96, 128, 256 "
                       "(64-column TMA boxes)", (long long)pp->d, (long long)pp->dv, ATTN_FA3_SPLIT);
    if (pp->dt != PT_F16 && pp->dt != PT_BF16 && pp->dt != PT_E4M3)
        return pt_errf(e, PT_EUNSUPPORTED, "dtype %s: impl=%d supports f16, bf16 and e4m3", pt_dtype_get(pp->dt)->name,
                       ATTN_FA3_SPLIT);
    g->fp8 = pp->dt == PT_E4M3;
    if (!(pp->scale > 0.0f) || !isfinite(pp->scale))
        return pt_errf(e, PT_EUNSUPPORTED, "softmax_scale=%g: impl=%d needs a positive scale", (double)pp->scale,
                       ATTN_FA3_SPLIT);
    g->gather = pp->page && pp->page < F3D_MIN_PAGE;
    /* e4m3 rows of 64 bytes (hd64) by TMA: 64B swizzle spans; the gather
     * (attn_gather_rows) writes 128-byte rows, the half past 64 unread */
    g->kw = g->fp8 && pp->d == 64 && !g->gather ? 64 : 128;
    g->vw = g->fp8 && pp->dv == 64 && !g->gather ? 64 : 128;
    g->rows = pp->Sq * pp->group;
    g->nrb = (g->rows + F3D_BM - 1) / F3D_BM;
    if (pp->Hkv * g->nrb > 65535 || pp->B > 65535)
        return pt_errf(e, PT_EUNSUPPORTED, "heads_kv x row blocks = %lld, batch %lld: the grid allows 65535",
                       (long long)(pp->Hkv * g->nrb), (long long)pp->B);
    if (pp->page && pp->npages > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "num_pages=%lld: TMA coordinates are 32-bit", (long long)pp->npages);
    g->pr = pp->page && pp->page < g->bn ? (int)pp->page : g->bn;
    int es = pp->es;
    /* sub-tiles (swizzle spans) a row: hd96 e4m3 one 128-byte span, the
     * 32 bytes past the row zero-filled by TMA and never read */
    int64_t dsub = (pp->d * es + g->kw - 1) / g->kw, dvsub = (pp->dv * es + g->vw - 1) / g->vw;
    g->q_bytes = F3D_BM * dsub * g->kw;
    g->k_bytes = (int64_t)g->bn * dsub * g->kw;
    g->v_bytes = (int64_t)g->bn * dvsub * g->vw;
    g->stage_bytes = g->k_bytes + g->v_bytes;
    g->ring_off = g->q_bytes;
    g->obuf_pitch = pp->dv + F3D_OPAD;
    int64_t ring = g->stages * g->stage_bytes, obuf = F3D_BM * g->obuf_pitch * 4;
    if (g->fp8) { /* the f16 copies of V, a stage each, after the ring */
        g->vc_bytes = (int64_t)g->bn * ((pp->dv + 63) / 64) * 128; /* f16 boxes of 64 columns (dv 96: 2) */
        g->vc_off = g->ring_off + ring;
        ring += g->stages * g->vc_bytes;
    }
    g->region = g->ring_off + (ring > obuf ? ring : obuf);
    g->bars_off = g->region;
    g->cbars_off = g->bars_off + 16 * g->stages;
    g->lse_off = g->cbars_off + (g->fp8 ? 16 * g->stages : 0);
    g->flag_off = g->lse_off + F3D_BM * 4;
    g->smem = 1024 + g->flag_off + 16; /* 1 KB: the base rounded up to the swizzle pattern */
    int64_t blocks = pp->B * pp->Hkv * g->nrb;
    g->part_bytes = blocks * g->splits * F3D_BM * pp->dv * 4;
    g->scratch_bytes = g->splits > 1 ? g->part_bytes + blocks * g->splits * F3D_BM * 4 : 0;
    g->ws_bytes = g->splits > 1 ? (blocks * 4 + 15) / 16 * 16 : 0;
    /* registers: 128 (producer + consumer) a CTA, ctas CTAs an SM */
    g->cregs = consumer_regs(g->ctas);
    int need = wgmma_regs(g->bn, pp->dv);
    g->eregs = entry_regs(g->ctas, need);
    if (128 * (F3D_PROD_REGS + g->cregs) > g->eregs * F3D_T || g->eregs * F3D_T * g->ctas > 65536)
        return pt_errf(e, PT_EINTERNAL, "setmaxnreg %d/%d x %d CTAs exceeds the register file", F3D_PROD_REGS,
                       g->cregs, g->ctas);
    /* live consumer registers: O dv/2, S bn/2, P's two parts bn/2, ~44 more */
    int64_t live = pp->dv / 2 + g->bn + 44;
    if (live > g->cregs)
        return pt_errf(e, PT_ERANGE, "bn=%d head_dim_v=%lld ctas=%d: ~%lld live registers per consumer thread, "
                       "setmaxnreg gives %d", g->bn, (long long)pp->dv, g->ctas, (long long)live, g->cregs);
    if (need > g->eregs)
        return pt_errf(e, PT_ERANGE, "bn=%d head_dim_v=%lld ctas=%d: the m64n%lld wgmma needs %d registers, ptxas "
                       "checks it against the entry count %d (ctas=1 allows head_dim_v 256)", g->bn, (long long)pp->dv,
                       g->ctas, (long long)(g->bn > pp->dv ? g->bn : pp->dv), need, g->eregs);
    uint32_t lim = pt_target_smem_limit(t->sm);
    if (g->smem * g->ctas > (int64_t)lim)
        return pt_errf(e, PT_ERANGE, "bn=%d stages=%d ctas=%d: %lld bytes of shared memory a CTA, %s allows %u "
                       "an SM", g->bn, g->stages, g->ctas, (long long)g->smem, pt_target_name(t, tn, sizeof tn), lim);
    return PT_OK;
}

/* Splits that fill the SMs: decode streams memory, so an idle SM is lost
 * bandwidth. No split when the CTAs already fill 80% of the CTA slots or
 * there are few key blocks (as FA's rule); else the fewest splits whose
 * last wave is at least 95% full (FA's rule, attn_split_heuristic, stops
 * at 85% of the best: 112 of 132 SMs for the Llama 32k x B1 decode), or
 * the fullest. */
static int heuristic_splits(const pt_prepared *pp, int bn, int ctas)
{
    int64_t rows = pp->Sq * pp->group, nrb = (rows + F3D_BM - 1) / F3D_BM;
    int64_t n = pp->B * pp->Hkv * nrb, nblocks = (pp->Sk + bn - 1) / bn;
    int slots = 132 * ctas, best = 1;
    if (n >= (int64_t)(0.8 * slots) || nblocks <= 4)
        return 1;
    double beff = 0;
    for (int sp = 1; sp <= F3D_MAX_SPLITS && sp <= nblocks; sp++) {
        double w = (double)(n * sp) / slots, eff = w / ceil(w);
        if (eff >= 0.95)
            return sp;
        if (eff > beff) {
            beff = eff;
            best = sp;
        }
    }
    return best;
}

bool attn_fa3_decode_applies(const pt_prepared *pp, const pt_target *t)
{
    pt_config c;
    attn_fa3_decode_defaults(pp, t, &c);
    pt_err e = {0};
    fgeo g;
    return geometry(pp, t, &c, &g, &e) == PT_OK;
}

int attn_fa3_decode_space(const pt_prepared *pp, const pt_target *t, pt_space *out)
{
    memset(out, 0, sizeof *out);
    pt_param_space *p = out->p;
    p[0] = (pt_param_space){"impl", "kernel kind: 3 = split-KV decode on wgmma / TMA (sm_90a)", 1, {ATTN_FA3_SPLIT}};
    p[1] = (pt_param_space){"bm", "packed query rows per CTA (the wgmma M)", 1, {F3D_BM}};
    p[2] = (pt_param_space){"bn", "keys per K/V stage (the S wgmma's N)", 0, {0}};
    for (size_t i = 0; i < sizeof f3d_bn / sizeof *f3d_bn; i++)
        p[2].values[p[2].nvalues++] = f3d_bn[i];
    p[3] = (pt_param_space){"stages", "mbarrier ring stages of K and V", 0, {0}};
    for (size_t i = 0; i < sizeof f3d_stages / sizeof *f3d_stages; i++)
        p[3].values[p[3].nvalues++] = f3d_stages[i];
    p[4] = (pt_param_space){"ctas", "CTAs an SM (setmaxnreg 40/256 or 40/216)", 2, {1, 2}};
    p[5] = (pt_param_space){"splits", "CTAs splitting each sequence's keys (fused last-arriver combine)", 0, {0}};
    pt_config dc;
    attn_fa3_decode_defaults(pp, t, &dc);
    int h = (int)pt_config_get(&dc, "splits", 1);
    attn_splits_param(&p[5], h);
    out->nparams = 6;
    return PT_OK;
}

/* bn 128 (hd <= 64), 64 (hd 128), 32 (hd 256), one CTA an SM, the
 * deepest ring that fits (decode hides latency with bytes in flight). */
void attn_fa3_decode_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out)
{
    memset(out, 0, sizeof *out);
    int64_t dmax = pp->d > pp->dv ? pp->d : pp->dv;
    int bn = dmax <= 64 ? 128 : dmax <= 128 ? 64 : 32;
    pt_config_set(out, "impl", ATTN_FA3_SPLIT);
    pt_config_set(out, "bm", F3D_BM);
    pt_config_set(out, "bn", bn);
    pt_config_set(out, "ctas", 1);
    pt_config_set(out, "splits", heuristic_splits(pp, bn, 1));
    pt_err e = {0};
    fgeo g;
    for (int s = 8; s >= 2; s--) {
        pt_config_set(out, "stages", s);
        if (geometry(pp, t, out, &g, &e) != PT_ERANGE)
            break;
    }
}

int attn_fa3_decode_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    fgeo g;
    return geometry(pp, t, c, &g, e);
}

/* ---- emission ---------------------------------------------------------- */

static ptx_reg r32(ptx_fn *f) { return ptx_reg_new(f, PTX_T_B32); }
static ptx_reg r64(ptx_fn *f) { return ptx_reg_new(f, PTX_T_B64); }
static ptx_reg rf(ptx_fn *f) { return ptx_reg_new(f, PTX_T_F32); }

static ptx_reg none_reg(void) { return (ptx_reg){0}; }

/* The 16-byte chunk XOR of row r in a K-major swizzled tile of w-byte rows
 * (ref 2.3): 128B: r % 8 (bits 4-6 ^= 7-9); 64B: (r / 2) % 4 (bits 4-5 ^= 7-8). */
static ptx_opd swz_row(ptx_fn *f, ptx_opd r, int w)
{
    if (w == 128)
        return kit_iop(f, PTX_OP_AND, r, ptx_imm(7));
    return kit_iop(f, PTX_OP_AND, kit_iop(f, PTX_OP_SHR, r, ptx_imm(1)), ptx_imm(3));
}

static ptx_reg sreg(ptx_fn *f, ptx_sreg s)
{
    ptx_reg r = r32(f);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_sr(s));
    return r;
}


/* The map of k (which 0) or v (1): boxes of one swizzle span (g->kw or
 * g->vw bytes: 64 columns of 16 bits, 128 or 64 of e4m3) and g->pr rows. */
static pt_tmap kv_map(const pt_prepared *pp, const fgeo *g, int which)
{
    int64_t D = which ? pp->dv : pp->d;
    const int64_t *s = which ? pp->sv : pp->sk;
    int es = pp->es, w = which ? g->vw : g->kw;
    pt_tmap m = {.of = PT_ARG_INPUT, .index = which ? pp->t.v : pp->t.k, .dtype = kit_tma_dtype(pp->dt),
                 .rank = 4, .l2promo = EMU_TMAP_L2_256B, .oobfill = EMU_TMAP_OOB_ZERO,
                 .swizzle = w == 64 ? EMU_TMAP_SWIZZLE_64B : EMU_TMAP_SWIZZLE_128B};
    m.dims[0] = (uint64_t)D;
    m.box[0] = (uint32_t)(w / es); /* one swizzle span */
    if (pp->page) { /* (D, Hkv, page, pages) */
        m.dims[1] = (uint64_t)pp->Hkv;
        m.dims[2] = (uint64_t)pp->page;
        m.dims[3] = (uint64_t)pp->npages;
        m.strides[0] = (uint64_t)(s[1] * es);
        m.strides[1] = (uint64_t)(s[0] * es);
        m.strides[2] = (uint64_t)(s[2] * es);
        m.box[1] = 1;
        m.box[2] = (uint32_t)g->pr;
    } else if (pp->varlen) { /* (D, Hkv, total): a box past the sequence reads the next one's keys, masked and
                              * (V) zeroed by the consumer as any key at or past len */
        m.rank = 3;
        m.dims[1] = (uint64_t)pp->Hkv;
        m.dims[2] = (uint64_t)(pp->B * pp->Sk);
        m.strides[0] = (uint64_t)(s[1] * es);
        m.strides[1] = (uint64_t)(s[0] * es);
        m.box[1] = 1;
        m.box[2] = (uint32_t)g->pr;
        return m;
    } else if (!pp->bhsd) { /* (D, Hkv, Sk, B) */
        m.dims[1] = (uint64_t)pp->Hkv;
        m.dims[2] = (uint64_t)pp->Sk;
        m.strides[0] = (uint64_t)(s[1] * es);
        m.strides[1] = (uint64_t)(s[0] * es);
        m.box[1] = 1;
        m.box[2] = (uint32_t)g->pr;
    } else { /* (D, Sk, Hkv, B) */
        m.dims[1] = (uint64_t)pp->Sk;
        m.dims[2] = (uint64_t)pp->Hkv;
        m.strides[0] = (uint64_t)(s[0] * es);
        m.strides[1] = (uint64_t)(s[1] * es);
        m.box[1] = (uint32_t)g->pr;
        m.box[2] = 1;
    }
    if (!pp->page) {
        m.dims[3] = (uint64_t)pp->B;
        m.strides[2] = (uint64_t)(s[2] * es);
    }
    m.box[3] = 1;
    return m;
}

/* Paged: the pool pages of the npg pages of the tile from key `key` (the
 * block table's row tab), into pages[] (registers kept across the loop);
 * a page past the sequence's len keys is num_pages, which TMA fills with
 * zeros, and its table entry is not read. */
static void load_pages(ptx_fn *f, const pt_prepared *pp, const fgeo *g, ptx_reg tab, ptx_reg key, ptx_reg len,
                       ptx_reg *pages)
{
    for (int pg = 0; pg < g->bn / g->pr; pg++) {
        ptx_reg j = pg ? kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(key), ptx_imm(pg * g->pr))) : key;
        ptx_reg in = attn_setp(f, PTX_M_LT, S32T, ptx_r(j), ptx_r(len));
        ptx_emit(f, PTX_OP_MOV, NOM, S32T, ptx_r(pages[pg]), ptx_imm(pp->npages));
        ptx_reg pi = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(j), ptx_imm(attn_ilog2(pp->page))));
        ptx_reg pa = attn_add64(f, tab, ptx_r(pi), 4);
        ptx_guard(ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(pages[pg]), ptx_addr(pa, 0)), in,
                  false);
    }
}


/* fp8: warps 1..3 of warpgroup 0 (96 threads, conversion thread ct)
 * turn a stage's e4m3 V ([bn rows] x dv bytes, swizzled rows of vw bytes:
 * dv/vw sub-tiles bn x vw bytes apart; vw 128, or 64 at dv 64 by TMA)
 * into the f16 V the RS wgmma reads (MN-major: dv/64 boxes of bn rows x
 * 128 bytes, 128B swizzle; dv 96: the second box half written): wait full[s] (a copy of the ring's consumer end), convert
 * 16 elements a unit (cvt.rn.f16x2.e4m3x2, exact; rows of keys at or
 * past len, the sequence's end, as 0: a page's tail or the rows past
 * seqused_k hold another's keys or anything, a NaN there times P = 0 is
 * NaN), fence.proxy.async (the
 * wgmma reads through the async proxy), bar.sync 2, 96, and one thread
 * arrives on cvt[s] (the conversion ring's full barrier, count 1). The
 * f16 stage s is rewritten only after full[s] completes again, which
 * follows the consumer's release of the stage. */
static void convert_stage(ptx_fn *f, const fgeo *g, int64_t dv, kit_pipe *pw, kit_pipe *pc, ptx_reg ct, ptx_reg key,
                          ptx_reg len)
{
    int64_t cpr = dv / 16, units = (int64_t)g->bn * cpr; /* 16-byte chunks a row, a stage */
    int cpw = g->vw / 16;                                /* chunks a raw span */
    ptx_reg st = kit_pipe_wait(pw, 0);
    ptx_reg raw = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(st), ptx_imm(g->k_bytes)));
    ptx_reg dst = pc->prod.addr; /* the stage to fill (nothing to wait for: see above) */
    ptx_reg u = r32(f);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(u), ptx_r(ct));
    int ut = ptx_label_new(f), ue = ptx_label_new(f);
    ptx_label_place(f, ut);
    ptx_pragma_nounroll(f);
    attn_bra(f, ue, attn_setp(f, PTX_M_GE, U32T, ptx_r(u), ptx_imm(units)), false);
    {
        ptx_reg r, cg;
        attn_idx_div(f, u, cpr, &r, &cg);
        ptx_opd r7 = kit_iop(f, PTX_OP_AND, ptx_r(r), ptx_imm(7));
        /* raw: sub-tile cg / (vw / 16), row r of vw bytes, chunk (cg % (vw / 16)) ^ the row's swizzle */
        ptx_opd sub = kit_iop(f, PTX_OP_MUL, kit_iop(f, PTX_OP_SHR, ptx_r(cg), ptx_imm(attn_ilog2(cpw))),
                              ptx_imm(g->bn * g->vw));
        ptx_opd c8 = kit_iop(f, PTX_OP_AND, ptx_r(cg), ptx_imm(cpw - 1));
        ptx_opd rs = g->vw == 128 ? r7 : swz_row(f, ptx_r(r), g->vw);
        ptx_opd ra = kit_iop(f, PTX_OP_ADD, sub,
                             kit_imad(f, ptx_r(r), ptx_imm(g->vw),
                                      kit_iop(f, PTX_OP_SHL, kit_iop(f, PTX_OP_XOR, c8, rs), ptx_imm(4))));
        ptx_reg src = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(raw), ra));
        ptx_reg w[4] = {r32(f), r32(f), r32(f), r32(f)};
        for (int i = 0; i < 4; i++)
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(w[i]), ptx_imm(0));
        ptx_reg in = attn_setp(f, PTX_M_LT, S32T, kit_iop(f, PTX_OP_ADD, ptx_r(key), ptx_r(r)), ptx_r(len));
        ptx_guard(ptx_emit(f, PTX_OP_LD, M2(PTX_M_SHARED, PTX_M_V4), B32T, ptx_vecr(f, 4, w), ptx_addr(src, 0)), in,
                  false);
        ptx_reg h16[8];
        for (int i = 0; i < 4; i++) {
            ptx_reg b2[2] = {ptx_reg_new(f, PTX_T_B16), ptx_reg_new(f, PTX_T_B16)};
            ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_vecr(f, 2, b2), ptx_r(w[i]));
            for (int j = 0; j < 2; j++) {
                h16[2 * i + j] = r32(f);
                ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(PTX_T_F16X2, PTX_T_E4M3X2), ptx_r(h16[2 * i + j]),
                         ptx_r(b2[j]));
            }
        }
        /* f16: columns 16 cg .. +16 are box cg / 4, chunks 2 (cg % 4) and +1 */
        ptx_opd ob = kit_iop(f, PTX_OP_MUL, kit_iop(f, PTX_OP_SHR, ptx_r(cg), ptx_imm(2)), ptx_imm(g->bn * 128));
        ptx_opd c2 = kit_iop(f, PTX_OP_SHL, kit_iop(f, PTX_OP_AND, ptx_r(cg), ptx_imm(3)), ptx_imm(1));
        ptx_reg rb = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(dst), kit_imad(f, ptx_r(r), ptx_imm(128), ob)));
        for (int hh = 0; hh < 2; hh++) {
            ptx_opd ch = hh ? kit_iop(f, PTX_OP_ADD, c2, ptx_imm(1)) : c2;
            ptx_opd sw = kit_iop(f, PTX_OP_SHL, kit_iop(f, PTX_OP_XOR, ch, r7), ptx_imm(4));
            ptx_reg a = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(rb), sw));
            ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V4), B32T, ptx_addr(a, 0), ptx_vecr(f, 4, h16 + 4 * hh));
        }
    }
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(u), ptx_r(u), ptx_imm(96));
    attn_bra(f, ut, none_reg(), false);
    ptx_label_place(f, ue);
    ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
    attn_bar(f, 2, 96);
    ptx_guard(ptx_emit(f, PTX_OP_MBAR_ARRIVE, M1(PTX_M_SHARED_CTA), B64T, ptx_sink(), ptx_addr(kit_pipe_full(pc), 0)),
              attn_setp(f, PTX_M_EQ, U32T, ptx_r(ct), ptx_imm(0)), false);
    kit_pipe_commit(pc);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(key), ptx_r(key), ptx_imm(g->bn));
}

/* The converters' loop over the split's nblk blocks (TMA producer). */
static void convert_v(ptx_fn *f, const fgeo *g, int64_t dv, kit_pipe *pw, kit_pipe *pc, ptx_reg ct, ptx_reg nblk,
                      ptx_reg key0, ptx_reg len)
{
    ptx_reg it = kit_reg(f, ptx_imm(0));
    ptx_reg key = kit_reg(f, ptx_r(key0)); /* the stage's first key */
    int top = ptx_label_new(f), end = ptx_label_new(f);
    attn_bra(f, end, attn_setp(f, PTX_M_LE, S32T, ptx_r(nblk), ptx_imm(0)), false);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    convert_stage(f, g, dv, pw, pc, ct, key, len);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
    attn_bra(f, top, attn_setp(f, PTX_M_LT, S32T, ptx_r(it), ptx_r(nblk)), false);
    ptx_label_place(f, end);
}

int attn_fa3_decode_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    fgeo G;
    int rc = geometry(pp, &pp->target, c, &G, e);
    if (rc)
        return rc;
    const fgeo *g = &G;
    /* P V in 16 bits (fp8: f16, V converted exactly) */
    pt_dtype pdt = g->fp8 ? PT_F16 : pp->dt;
    const kit_atom *at = kit_atom_get(pdt); /* m16n8k16: the D / RS A fragment maps */
    ptx_type ab = pdt == PT_BF16 ? PTX_T_BF16 : PTX_T_F16;
    kit_atom wsa, wpv;
    if (!kit_wgmma_atom(g->fp8 ? PTX_T_E4M3 : ab, PTX_T_F32, g->bn, &wsa) ||
        !kit_wgmma_atom(ab, PTX_T_F32, (int)pp->dv, &wpv))
        return pt_errf(e, PT_EINTERNAL, "fa3 decode: no wgmma atom");
    ptx_reg none = {0};
    int es = pp->es;
    int64_t d = pp->d, dv = pp->dv;
    bool split = g->splits > 1, paged = pp->page > 0;

    char cfg[256], sig[512], name[128];
    pt_config cn = *c;
    pt_config_set(&cn, "splits", split ? 2 : 1);
    pt_config_str(&cn, cfg, sizeof cfg);
    snprintf(sig, sizeof sig, "%lld %lld %lld %lld %lld %lld %lld %d %lld %lld %g %g %d %d %d %d %lld %lld|%s",
             (long long)pp->B, (long long)pp->Hq, (long long)pp->Hkv, (long long)pp->Sq, (long long)pp->Sk,
             (long long)d, (long long)dv, pp->causal, (long long)pp->wl, (long long)pp->wr, (double)pp->scale,
             (double)pp->softcap, pp->bhsd, pp->seqused, pp->lse, pp->varlen, (long long)pp->page,
             (long long)pp->npages, cfg);
    snprintf(name, sizeof name, "attn_fa3_decode_%s_d%lld_%016llx", pt_dtype_get(pp->dt)->name, (long long)d,
             (unsigned long long)pt_hash64(sig, strlen(sig)));
    ptx_fn *f = ptx_fn_new(m, name);
    f->maxntid[0] = F3D_T;
    f->maxntid[1] = f->maxntid[2] = 1;
    f->maxnreg = g->eregs; /* setmaxnreg needs the entry count fixed (ref 6.4) */
    ptx_module_extern_shared(m, "attn_smem", 128);

    /* ---- parameters ---- */
    l->nargs = 0;
    l->ntmaps = 0;
    attn_out ao = {.pp = pp, .f = f, .bm = F3D_BM, .T = 128, .W = 1, .splits = g->splits, .nrb = g->nrb,
                   .part_bytes = g->part_bytes, .obuf_pitch = g->obuf_pitch, .bar_id = 1, .bar_threads = 128};
    ao.o = attn_param_ptr(f, l, "o", (pt_arg){PT_ARG_OUTPUT, pp->t.o, 0, 0});
    if (pp->lse)
        ao.lse = attn_param_ptr(f, l, "lse", (pt_arg){PT_ARG_OUTPUT, pp->t.lse, 0, 0});
    ptx_reg q = attn_param_ptr(f, l, "q", (pt_arg){PT_ARG_INPUT, pp->t.q, 0, 0});
    pt_tmap mk = kv_map(pp, g, 0), mv = kv_map(pp, g, 1);
    ptx_reg tmk = none, tmv = none, kpool = none, vpool = none; /* gather: the pools by pointer */
    if (g->gather) {
        kpool = attn_param_ptr(f, l, "k", (pt_arg){PT_ARG_INPUT, pp->t.k, 0, 0});
        vpool = attn_param_ptr(f, l, "v", (pt_arg){PT_ARG_INPUT, pp->t.v, 0, 0});
    } else {
        tmk = kit_tma_param(f, l, "tmk", &mk);
        tmv = kit_tma_param(f, l, "tmv", &mv);
    }
    ptx_reg bt = none, cq = none, ck = none, su = none;
    if (paged)
        bt = attn_param_ptr(f, l, "block_table", (pt_arg){PT_ARG_INPUT, pp->t.block_table, 0, 0});
    if (pp->varlen) {
        cq = attn_param_ptr(f, l, "cu_seqlens_q", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_q, 0, 0});
        ck = attn_param_ptr(f, l, "cu_seqlens_k", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_k, 0, 0});
    }
    if (pp->seqused)
        su = attn_param_ptr(f, l, "seqused_k", (pt_arg){PT_ARG_INPUT, pp->t.seqused_k, 0, 0});
    if (split) {
        ao.scr = attn_param_ptr(f, l, "partials", (pt_arg){PT_ARG_SCRATCH, 0, (uint64_t)g->scratch_bytes, 0});
        ao.ws = attn_param_ptr(f, l, "counters", (pt_arg){PT_ARG_WORKSPACE, 0, (uint64_t)g->ws_bytes, 0});
    }
    ptx_reg sq_u = attn_param_u32(f, l, "seqlen_q", (uint64_t)pp->Sq);
    ptx_reg sk_u = attn_param_u32(f, l, "seqlen_k", (uint64_t)pp->Sk);

    /* ---- coordinates, shared memory, barriers ---- */
    ptx_reg tid = sreg(f, PTX_S_TID_X);
    ptx_reg lane = kit_reg(f, kit_iop(f, PTX_OP_AND, ptx_r(tid), ptx_imm(31)));
    ptx_reg warp = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(tid), ptx_imm(5)));
    ao.split = sreg(f, PTX_S_CTAID_X);
    ao.nsplit = sreg(f, PTX_S_NCTAID_X);
    ptx_reg cy = sreg(f, PTX_S_CTAID_Y);
    ao.b = sreg(f, PTX_S_CTAID_Z);
    ao.hk = g->nrb == 1 ? cy : kit_reg(f, kit_iop(f, PTX_OP_DIV, ptx_r(cy), ptx_imm(g->nrb)));
    ao.rb = g->nrb == 1 ? kit_reg(f, ptx_imm(0)) : kit_reg(f, kit_iop(f, PTX_OP_REM, ptx_r(cy), ptx_imm(g->nrb)));
    ptx_reg raw = r32(f);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(raw), ptx_sym("attn_smem"));
    ptx_reg smem = kit_reg(f, kit_iop(f, PTX_OP_AND, kit_iop(f, PTX_OP_ADD, ptx_r(raw), ptx_imm(1023)),
                                      ptx_imm(-1024)));
    ao.smem = smem;
    ao.lse_off = g->lse_off;
    ao.flag_off = g->flag_off;
    ptx_reg ring = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(smem), ptx_imm(g->ring_off)));
    ptx_reg bars = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(smem), ptx_imm(g->bars_off)));
    kit_pipe pipe;
    if (kit_pipe_init_mbar(f, &pipe, g->stages, g->stage_bytes, ring, bars, 4))
        return pt_errf(e, PT_EINTERNAL, "fa3 decode: bad mbarrier ring");
    ptx_reg tz = attn_setp(f, PTX_M_EQ, U32T, ptx_r(tid), ptx_imm(0));
    if (!g->gather)
        kit_pipe_mbar_setup(&pipe, tz);
    for (int s = 0; g->gather && s < 2 * g->stages; s++) /* full[s]: the 128 gathering threads' noinc arrivals */
        ptx_guard(ptx_emit(f, PTX_OP_MBAR_INIT, M1(PTX_M_SHARED_CTA), B64T, ptx_addr(bars, 8 * s),
                           ptx_imm(s < g->stages ? 128 : 4)),
                  tz, false);
    /* fp8: the f16 V ring, full = converted (count 1; its empty barriers unused) */
    kit_pipe pcv = {0}, pwv = pipe;
    if (g->fp8) {
        ptx_reg vc = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(smem), ptx_imm(g->vc_off)));
        ptx_reg cb = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(smem), ptx_imm(g->cbars_off)));
        if (kit_pipe_init_mbar(f, &pcv, g->stages, g->vc_bytes, vc, cb, 1))
            return pt_errf(e, PT_EINTERNAL, "fa3 decode: bad conversion ring");
        kit_pipe_mbar_setup(&pcv, attn_setp(f, PTX_M_EQ, U32T, ptx_r(tid), ptx_imm(0)));
        pwv = pipe; /* the converters' own consumer end of the ring (registers of their threads) */
    }
    attn_bar(f, 0, 0);

    /* ---- lengths and this split's key blocks (both roles) ---- */
    ao.sq = sq_u;
    ptx_reg len = sk_u, q0 = none, kbase = none; /* varlen: the sequence's first key row */
    if (pp->varlen) {
        ptx_reg aq = attn_add64(f, cq, ptx_r(ao.b), 4), ak = attn_add64(f, ck, ptx_r(ao.b), 4);
        ptx_reg q1 = r32(f), k0 = r32(f), k1 = r32(f);
        q0 = r32(f);
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(q0), ptx_addr(aq, 0));
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(q1), ptx_addr(aq, 4));
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(k0), ptx_addr(ak, 0));
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(k1), ptx_addr(ak, 4));
        ptx_reg sqb = attn_s32op(f, PTX_OP_SUB, ptx_r(q1), ptx_r(q0));
        sqb = attn_s32op(f, PTX_OP_MIN, ptx_r(sqb), ptx_r(sq_u));
        ao.sq = attn_s32op(f, PTX_OP_MAX, ptx_r(sqb), ptx_imm(0));
        kbase = k0;
        ptx_reg skb = attn_s32op(f, PTX_OP_SUB, ptx_r(k1), ptx_r(k0));
        len = attn_s32op(f, PTX_OP_MIN, ptx_r(skb), ptx_r(sk_u));
        q = attn_add64(f, q, ptx_r(q0), pp->sq[0] * es);
        ao.o = attn_add64(f, ao.o, ptx_r(q0), pp->so[0] * pp->oes);
    }
    if (pp->seqused) {
        ptx_reg a = attn_add64(f, su, ptx_r(ao.b), 4);
        ptx_reg u = r32(f);
        ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(u), ptx_addr(a, 0));
        len = attn_s32op(f, PTX_OP_MIN, ptx_r(u), ptx_r(len));
    }
    if (pp->seqused || pp->varlen)
        len = attn_s32op(f, PTX_OP_MAX, ptx_r(len), ptx_imm(0));
    attn_kv_range kr;
    attn_kv_range_emit(f, pp, F3D_BM, g->bn, ao.rb, ao.sq, len, ao.split, ao.nsplit, &kr);

    /* ---- roles ---- */
    int cons = ptx_label_new(f), done = ptx_label_new(f);
    ptx_reg wg = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(tid), ptx_imm(7)));
    attn_bra(f, cons, attn_setp(f, PTX_M_NE, U32T, ptx_r(wg), ptx_imm(0)), false);

    /* producer: one elected thread of warp 0 */
    {
        ptx_emit(f, PTX_OP_SETMAXNREG, M3(PTX_M_DEC, PTX_M_SYNC, PTX_M_ALIGNED), U32T, ptx_imm(F3D_PROD_REGS));
        if (g->fp8 && !g->gather) {
            int lead_warp = ptx_label_new(f);
            attn_bra(f, lead_warp, attn_setp(f, PTX_M_EQ, U32T, ptx_r(warp), ptx_imm(0)), false);
            ptx_reg ct = kit_reg(f, kit_iop(f, PTX_OP_SUB, ptx_r(tid), ptx_imm(32)));
            convert_v(f, g, dv, &pwv, &pcv, ct, kr.nblk, kr.key0, len);
            attn_bra(f, done, none, false);
            ptx_label_place(f, lead_warp);
        } else if (!g->gather) {
            attn_bra(f, done, attn_setp(f, PTX_M_NE, U32T, ptx_r(warp), ptx_imm(0)), false);
        }
        if (g->gather) { /* all 128 threads: the gather, a noinc arrival each a stage */
            ptx_reg tab = attn_add64(f, bt, ptx_r(ao.b), pp->pages_per_seq * 4);
            ptx_reg it = kit_reg(f, ptx_imm(0)), key = r32(f);
            ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(key), ptx_r(kr.key0));
            /* fp8: warps 1..3 also convert V, block i - lag at iteration i
             * (after gathering block i): the gather of block i waits
             * empty[i % stages], the consumer's release of block
             * i - stages, whose conversion (iteration i - stages + lag <=
             * i - 1) these threads did already; the conversion of block j
             * waits full[j], the 128 gathers of block j, which warp 0
             * issues at its iteration j (it waits only on the consumer) and
             * warps 1..3 at iteration j < j + lag. No cycle: neither role
             * waits on the other's later work. */
            int lag = g->stages - 1;
            ptx_reg bound = kr.nblk, cv = none, ct = none, ckey = none;
            if (g->fp8) {
                cv = attn_setp(f, PTX_M_NE, U32T, ptx_r(warp), ptx_imm(0));
                ct = kit_reg(f, kit_iop(f, PTX_OP_SUB, ptx_r(tid), ptx_imm(32)));
                ckey = kit_reg(f, ptx_r(kr.key0));
                bound = r32(f);
                ptx_emit(f, PTX_OP_SELP, NOM, B32T, ptx_r(bound),
                         kit_iop(f, PTX_OP_ADD, ptx_r(kr.nblk), ptx_imm(lag)), ptx_r(kr.nblk), ptx_r(cv));
            }
            attn_bra(f, done, attn_setp(f, PTX_M_LE, S32T, ptx_r(kr.nblk), ptx_imm(0)), false);
            int gtop = ptx_label_new(f), gskip = g->fp8 ? ptx_label_new(f) : -1;
            ptx_label_place(f, gtop);
            ptx_pragma_nounroll(f);
            if (g->fp8) /* the last lag iterations of warps 1..3 only convert */
                attn_bra(f, gskip, attn_setp(f, PTX_M_GE, S32T, ptx_r(it), ptx_r(kr.nblk)), false);
            ptx_reg st = kit_pipe_acquire(&pipe);
            if (d == dv && !memcmp(pp->sk, pp->sv, 3 * sizeof *pp->sk)) {
                attn_gather_rows(f, pp->es, pp->page, g->bn, st, kpool, vpool, g->k_bytes, pp->sk, d, key, len, ao.hk,
                                 tab, tid);
            } else {
                attn_gather_rows(f, pp->es, pp->page, g->bn, st, kpool, none, 0, pp->sk, d, key, len, ao.hk, tab, tid);
                ptx_reg sv = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(st), ptx_imm(g->k_bytes)));
                attn_gather_rows(f, pp->es, pp->page, g->bn, sv, vpool, none, 0, pp->sv, dv, key, len, ao.hk, tab, tid);
            }
            ptx_emit(f, PTX_OP_CP_ASYNC_MBAR, M2(PTX_M_NOINC, PTX_M_SHARED_CTA), B64T,
                     ptx_addr(kit_pipe_full(&pipe), 0));
            kit_pipe_commit(&pipe);
            ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(key), ptx_r(key), ptx_imm(g->bn));
            if (g->fp8) { /* warps 1..3, from iteration lag: block it - lag */
                ptx_label_place(f, gskip);
                int cskip = ptx_label_new(f);
                attn_bra(f, cskip, cv, true);
                attn_bra(f, cskip, attn_setp(f, PTX_M_LT, S32T, ptx_r(it), ptx_imm(lag)), false);
                convert_stage(f, g, dv, &pwv, &pcv, ct, ckey, len);
                ptx_label_place(f, cskip);
            }
            ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
            attn_bra(f, gtop, attn_setp(f, PTX_M_LT, S32T, ptx_r(it), ptx_r(bound)), false);
            attn_bra(f, done, none, false);
        } else {
            ptx_reg lead = ptx_reg_new(f, PTX_T_PRED);
            ptx_emit(f, PTX_OP_ELECT, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_pair(none, lead), ptx_hex(0xffffffff));
            attn_bra(f, done, lead, true);
            kit_tma_prefetch(f, tmk);
            kit_tma_prefetch(f, tmv);
            ptx_reg tab = paged ? attn_add64(f, bt, ptx_r(ao.b), pp->pages_per_seq * 4) : none;
            ptx_reg it = kit_reg(f, ptx_imm(0));
            ptx_reg key = r32(f);
            ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(key), ptx_r(kr.key0));
            /* paged: the next tile's table entries are read while this tile's
             * loads go out (their latency overlaps the next empty wait), when
             * they are at most 4 (more would not stay in the producer's 40
             * registers: bn 128 over pages of 16 spilled) */
            int npg = g->bn / g->pr;
            bool ahead = paged && npg <= 4;
            ptx_reg pages[64];
            for (int pg = 0; paged && pg < npg; pg++)
                pages[pg] = r32(f);
            if (ahead)
                load_pages(f, pp, g, tab, key, len, pages);
            int top = ptx_label_new(f);
            attn_bra(f, done, attn_setp(f, PTX_M_LE, S32T, ptx_r(kr.nblk), ptx_imm(0)), false);
            ptx_label_place(f, top);
            ptx_pragma_nounroll(f);
            ptx_reg st = kit_pipe_acquire(&pipe);
            kit_pipe_arrive_tx(&pipe, g->stage_bytes);
            ptx_reg full = kit_pipe_full(&pipe);
            if (paged && !ahead)
                load_pages(f, pp, g, tab, key, len, pages);
            for (int pg = 0; pg < npg; pg++) {
                ptx_reg j = pg ? kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(key), ptx_imm(pg * g->pr))) : key;
                ptx_opd c1, c2, c3;
                if (paged) { /* page pages[pg] (num_pages past the keys), row j % page */
                    ptx_reg row = kit_reg(f, kit_iop(f, PTX_OP_AND, ptx_r(j), ptx_imm(pp->page - 1)));
                    c1 = ptx_r(ao.hk);
                    c2 = ptx_r(row);
                    c3 = ptx_r(pages[pg]);
                } else if (pp->varlen) { /* (hk, the packed row k0 + j) */
                    c1 = ptx_r(ao.hk);
                    c2 = kit_iop(f, PTX_OP_ADD, ptx_r(kbase), ptx_r(j));
                    c3 = ptx_imm(0);
                } else if (!pp->bhsd) {
                    c1 = ptx_r(ao.hk);
                    c2 = ptx_r(j);
                    c3 = ptx_r(ao.b);
                } else {
                    c1 = ptx_r(j);
                    c2 = ptx_r(ao.hk);
                    c3 = ptx_r(ao.b);
                }
                for (int which = 0; which < 2; which++) {
                    int64_t D = which ? dv : d, w = which ? g->vw : g->kw;
                    int64_t base = which ? g->k_bytes : 0;
                    for (int cc = 0; cc < (D * es + w - 1) / w; cc++) { /* hd96: the last box part past the row */
                        int64_t off = base + (int64_t)cc * g->bn * w + (int64_t)pg * g->pr * w;
                        ptx_reg dst = off ? kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(st), ptx_imm(off))) : st;
                        ptx_opd co[4] = {ptx_imm(cc * w / es), c1, c2, c3};
                        kit_tma_load(f, dst, which ? tmv : tmk, pp->varlen && !paged ? 3 : 4, co, full);
                    }
                }
            }
            kit_pipe_commit(&pipe);
            ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(key), ptx_r(key), ptx_imm(g->bn));
            if (ahead) /* the next tile's pages (past the split's last tile: guarded by len, or unused) */
                load_pages(f, pp, g, tab, key, len, pages);
            ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
            attn_bra(f, top, attn_setp(f, PTX_M_LT, S32T, ptx_r(it), ptx_r(kr.nblk)), false);
        }
        attn_bra(f, done, none, false);
    }

    /* consumer warpgroup */
    ptx_label_place(f, cons);
    ptx_emit(f, PTX_OP_SETMAXNREG, M3(PTX_M_INC, PTX_M_SYNC, PTX_M_ALIGNED), U32T, ptx_imm(g->cregs));
    ao.tid = kit_reg(f, kit_iop(f, PTX_OP_SUB, ptx_r(tid), ptx_imm(128)));
    ptx_reg cw = kit_reg(f, kit_iop(f, PTX_OP_SHR, ptx_r(ao.tid), ptx_imm(5)));
    pipe.arrive_pred = attn_setp(f, PTX_M_EQ, U32T, ptx_r(lane), ptx_imm(0));
    ptx_reg qs = smem;
    /* Q: 64 packed rows x d, K-major 128B-swizzled sub-tiles of 64 columns
     * (64 rows x 128 bytes), zero past the real rows */
    {
        int64_t nch = d * es / 16, total = F3D_BM * nch;
        ptx_reg rowsr = kit_reg(f, kit_iop(f, PTX_OP_MUL, ptx_r(ao.sq), ptx_imm(pp->group)));
        for (int64_t k = 0; k * 128 < total; k++) {
            ptx_reg id = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(ao.tid), ptx_imm(k * 128)));
            ptx_reg r, ch;
            attn_idx_div(f, id, nch, &r, &ch);
            ptx_reg rg = kit_reg(f, kit_imad(f, ptx_r(ao.rb), ptx_imm(F3D_BM), ptx_r(r)));
            ptx_reg ok = attn_setp(f, PTX_M_LT, S32T, ptx_r(rg), ptx_r(rowsr));
            ptx_reg v4[4];
            for (int i = 0; i < 4; i++) {
                v4[i] = r32(f);
                ptx_emit(f, PTX_OP_MOV, NOM, B32T, ptx_r(v4[i]), ptx_imm(0));
            }
            ptx_reg rgs = r32(f);
            ptx_emit(f, PTX_OP_SELP, NOM, B32T, ptx_r(rgs), ptx_r(rg), ptx_imm(0), ptx_r(ok));
            ptx_reg src = attn_add64(f, attn_row_addr(&ao, q, pp->sq, pp->es, rgs), ptx_r(ch), 16);
            ptx_guard(ptx_emit(f, PTX_OP_LD, M3(PTX_M_GLOBAL, PTX_M_NC, PTX_M_V4), B32T, ptx_vecr(f, 4, v4),
                               ptx_addr(src, 0)),
                      ok, false);
            /* sub-tile ch / (kw / 16), row r: kw bytes, chunk (ch % (kw / 16)) ^ the row's swizzle */
            int cpw = g->kw / 16;
            ptx_opd sub = kit_iop(f, PTX_OP_SHL, kit_iop(f, PTX_OP_SHR, ptx_r(ch), ptx_imm(attn_ilog2(cpw))),
                                  ptx_imm(attn_ilog2(F3D_BM * g->kw)));
            ptx_opd cx = kit_iop(f, PTX_OP_XOR, kit_iop(f, PTX_OP_AND, ptx_r(ch), ptx_imm(cpw - 1)),
                                 swz_row(f, ptx_r(r), g->kw));
            ptx_opd off = kit_iop(f, PTX_OP_ADD, sub,
                                  kit_imad(f, ptx_r(r), ptx_imm(g->kw), kit_iop(f, PTX_OP_SHL, cx, ptx_imm(4))));
            ptx_reg dst = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(qs), off));
            ptx_ins *in = ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V4), B32T, ptx_addr(dst, 0),
                                   ptx_vecr(f, 4, v4));
            if ((k + 1) * 128 > total)
                ptx_guard(in, attn_setp(f, PTX_M_LT, U32T, ptx_r(id), ptx_imm(total)), false);
        }
        ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
        attn_bar(f, 1, 128);
    }

    /* ---- fragments, masks, state ---- */
    int nS = g->bn / 2, nO = (int)(dv / 2);
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
    ptx_reg wrow = kit_reg(f, kit_iop(f, PTX_OP_SHL, ptx_r(cw), ptx_imm(4)));
    kit_frag sfr = kit_frag_mma_c(f, at, 1, g->bn / 8, Sr, wrow, zr, lane);
    kit_frag ofr = kit_frag_mma_c(f, at, 1, (int)(dv / 8), Or, wrow, zr, lane);
    attn_rows_mask rm;
    attn_rows_mask_emit(f, pp, F3D_BM, ao.rb, sfr.row_base, ao.sq, len, &kr, &rm);
    float kexp = pp->softcap > 0.0f ? pp->softcap : pp->scale;
    kit_softmax sm[2] = {kit_softmax_new(f, kexp), kit_softmax_new(f, kexp)};
    sm[0].fresh = sm[1].fresh = false;
    ptx_reg kcol = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(kr.key0), ptx_r(sfr.col_base)));
    /* this warp's rows are all padding (warp-uniform) */
    ptx_reg dead = attn_setp(f, PTX_M_GE, S32T, kit_iop(f, PTX_OP_ADD, kit_iop(f, PTX_OP_MUL, ptx_r(ao.rb),
                                                                             ptx_imm(F3D_BM)), ptx_r(wrow)),
                             ptx_r(kr.rowsr));
    ptx_reg alr[2] = {rf(f), rf(f)};
    ptx_reg tkey = r32(f);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(tkey), ptx_r(kr.key0));
    /* descriptors: Q and K K-major 128B (SBO 1024, +32 B a k16 step, next
     * 64 columns a sub-tile on); V MN-major 128B (LBO = a 64-column block
     * of bn rows, SBO 1024, +2048 B a k16 step) */

    /* ---- main loop ---- */
    ptx_reg it = kit_reg(f, ptx_imm(0));
    int top = ptx_label_new(f), after = ptx_label_new(f);
    attn_bra(f, after, attn_setp(f, PTX_M_LE, S32T, ptx_r(kr.nblk), ptx_imm(0)), false);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    {
        ptx_reg st = kit_pipe_wait(&pipe, 0);
        if (g->gather) /* cp.async wrote the stage through the generic proxy; wgmma reads through the async one */
            ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
        ptx_reg dvd = none;
        if (!g->fp8) { /* V's rows of keys at or past len as 0 (the fp8 converter does so for its copy) */
            int whole = ptx_label_new(f);
            ptx_reg bnl = attn_s32op(f, PTX_OP_SUB, ptx_r(len), ptx_imm(g->bn));
            attn_bra(f, whole, attn_setp(f, PTX_M_GT, S32T, ptx_r(tkey), ptx_r(bnl)), true);
            ptx_reg sv = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(st), ptx_imm(g->k_bytes)));
            kit_attn_zero_rows(f, sv, (int)((dv * es + 127) / 128), (int64_t)g->bn * 128, g->bn,
                               attn_s32op(f, PTX_OP_SUB, ptx_r(len), ptx_r(tkey)), ao.tid, 128);
            ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
            attn_bar(f, 1, 128);
            ptx_label_place(f, whole);
        }
        if (!g->fp8) {
            ptx_reg sv = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(st), ptx_imm(g->k_bytes)));
            dvd = kit_wgmma_desc_emit(f, sv, (uint32_t)(g->bn * 128), 1024, 128);
        }
        /* d es / 2: the 16-bit width of a row (e4m3: k32 steps of 32 bytes, as k16 steps of 16-bit ones) */
        kit_attn_wg_qk(f, &wsa, Sr, qs, F3D_BM * g->kw, g->kw, st, (int64_t)g->bn * g->kw, g->kw, (int)(d * es));
        ptx_emit(f, PTX_OP_WGMMA_WAIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES, ptx_imm(0));

        /* a warp whose 16 rows are all padding (GQA decode: Sq x group < 64)
         * skips the softmax: its P is 0 and its O stays 0 (never stored) */
        int dead_path = ptx_label_new(f), join = ptx_label_new(f);
        attn_bra(f, dead_path, dead, false);
        /* softcap, the mask where some real row cannot see the whole tile */
        ptx_reg *mvr = pt_arena_alloc(m->arena, (size_t)nS * sizeof(ptx_reg));
        for (int i = 0; i < nS; i++) {
            /* fresh registers: the mask writes them behind a branch, and
             * a wgmma accumulator written on a divergent path makes ptxas
             * serialise the wgmmas (C7520) */
            mvr[i] = attn_score(f, pp, Sr[i]);
            if (mvr[i].id == Sr[i].id) {
                mvr[i] = rf(f);
                ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(mvr[i]), ptx_r(Sr[i]));
            }
        }
        int nomask = ptx_label_new(f);
        attn_bra(f, nomask, attn_mask_needed(f, &kr, tkey, g->bn), true);
        attn_mask_scores(f, &sfr, &rm, kcol, mvr, nS);
        ptx_label_place(f, nomask);
        for (int h = 0; h < 2; h++) {
            ptx_opd alpha = attn_softmax_half(f, sm, &sfr, mvr, nS, h, Pr);
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(alr[h]), alpha);
        }
        attn_p_split(f, pdt, Pr, Ph, Pl, nS);
        attn_bra(f, join, none, false);
        ptx_label_place(f, dead_path);
        for (int h = 0; h < 2; h++)
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(alr[h]), ptx_f32(0.0f));
        for (int i = 0; i < nS; i++) {
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(Ph[i]), ptx_f32(0.0f));
            ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(Pl[i]), ptx_f32(0.0f));
        }
        ptx_label_place(f, join);
        /* O *= alpha on both paths (O is a wgmma accumulator: not written on
         * a divergent path) */
        for (int i = 0; i < nO; i++)
            ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(Or[i]), ptx_r(Or[i]), ptx_r(alr[ofr.row[i] >= 8]));
        if (g->fp8) { /* V's f16 copy of this stage */
            ptx_reg vst = kit_pipe_wait(&pcv, 0);
            dvd = kit_wgmma_desc_emit(f, vst, (uint32_t)(g->bn * 128), 1024, 128);
        }
        kit_frag phi = sfr, plo = sfr;
        phi.r = Ph;
        plo.r = Pl;
        /* the A fragments and descriptors before the fence: a register an
         * RS wgmma reads, written after the fence, makes ptxas insert a
         * warpgroup arrive (C7520) */
        int nkb = g->bn / 16;
        ptx_reg(*pa)[4] = pt_arena_alloc(m->arena, (size_t)nkb * sizeof *pa);
        ptx_reg(*pl)[4] = pt_arena_alloc(m->arena, (size_t)nkb * sizeof *pl);
        ptx_reg *vb = pt_arena_alloc(m->arena, (size_t)nkb * sizeof *vb);
        for (int kb = 0; kb < nkb; kb++) {
            kit_frag_to_a(f, &phi, at, 0, kb, pa[kb]);
            kit_frag_to_a(f, &plo, at, 0, kb, pl[kb]);
            vb[kb] = dvd;
            if (kb) {
                vb[kb] = r64(f);
                ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(vb[kb]), ptx_r(dvd), ptx_imm(kb * 128));
            }
        }
        ptx_emit0(f, PTX_OP_WGMMA_FENCE, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
        for (int kb = 0; kb < nkb; kb++) {
            kit_wgmma_rs(f, &wpv, ptx_vecr(f, nO, Or), pa[kb], vb[kb], ptx_imm(1), true);
            kit_wgmma_rs(f, &wpv, ptx_vecr(f, nO, Or), pl[kb], vb[kb], ptx_imm(1), true);
        }
        ptx_emit0(f, PTX_OP_WGMMA_COMMIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES);
        ptx_emit(f, PTX_OP_WGMMA_WAIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES, ptx_imm(0));
        kit_pipe_release(&pipe);
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(kcol), ptx_r(kcol), ptx_imm(g->bn));
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(tkey), ptx_r(tkey), ptx_imm(g->bn));
        ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
        attn_bra(f, top, attn_setp(f, PTX_M_LT, S32T, ptx_r(it), ptx_r(kr.nblk)), false);
    }
    ptx_label_place(f, after);
    /* every warp's wgmmas retired before O is staged over the ring */
    attn_bar(f, 1, 128);

    /* ---- the row statistics, normalised O and lse2 into shared memory ---- */
    ptx_reg fac[2], lse2[2];
    float k2 = (float)(kexp * 1.44269504088896341);
    for (int h = 0; h < 2; h++) {
        kit_softmax_reduce(f, &sm[h], 4, NULL);
        fac[h] = attn_inv_or_zero(f, sm[h].s);
        if (pp->vscale != 1.0f) /* e4m3: o = descale_v sum p v */
            fac[h] = attn_fop2(f, PTX_OP_MUL, ptx_r(fac[h]), ptx_f32(pp->vscale));
        ptx_reg lg = rf(f);
        ptx_emit(f, PTX_OP_LG2, M1(PTX_M_APPROX), F32T, ptx_r(lg), ptx_r(sm[h].s));
        lse2[h] = rf(f);
        ptx_emit(f, PTX_OP_FMA, M1(PTX_M_RN), F32T, ptx_r(lse2[h]), ptx_r(sm[h].m), ptx_f32(k2), ptx_r(lg));
    }
    ptx_reg ob = ring;
    {
        ptx_opd rb0 = kit_imad(f, ptx_r(ofr.row_base), ptx_imm(g->obuf_pitch * 4),
                               kit_iop(f, PTX_OP_SHL, ptx_r(ofr.col_base), ptx_imm(2)));
        ptx_reg a = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(ob), rb0));
        for (int i = 0; i < nO; i += 2) {
            int h = ofr.row[i] >= 8;
            ptx_reg v0 = attn_fop2(f, PTX_OP_MUL, ptx_r(Or[i]), ptx_r(fac[h]));
            ptx_reg v1 = attn_fop2(f, PTX_OP_MUL, ptx_r(Or[i + 1]), ptx_r(fac[h]));
            ptx_emit(f, PTX_OP_ST, M2(PTX_M_SHARED, PTX_M_V2), F32T,
                     ptx_addr(a, ((int64_t)ofr.row[i] * g->obuf_pitch + ofr.col[i]) * 4),
                     ptx_vecr(f, 2, (ptx_reg[]){v0, v1}));
        }
        ptx_reg t0 = attn_setp(f, PTX_M_EQ, U32T, kit_iop(f, PTX_OP_AND, ptx_r(lane), ptx_imm(3)), ptx_imm(0));
        for (int h = 0; h < 2; h++) {
            ptx_opd row = kit_iop(f, PTX_OP_ADD, ptx_r(sfr.row_base), ptx_imm(8 * h));
            ptx_reg la2 = kit_reg(f, kit_imad(f, row, ptx_imm(4), ptx_imm(g->lse_off)));
            la2 = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(la2), ptx_r(smem)));
            ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_SHARED), F32T, ptx_addr(la2, 0), ptx_r(lse2[h])), t0, false);
        }
    }
    attn_bar(f, 1, 128);
    attn_out_emit(&ao, ob);

    ptx_label_place(f, done);
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);

    l->grid[0] = (unsigned)g->splits;
    l->grid[1] = (unsigned)(pp->Hkv * g->nrb);
    l->grid[2] = (unsigned)pp->B;
    l->block[0] = F3D_T;
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
