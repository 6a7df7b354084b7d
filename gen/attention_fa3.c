/* The attention prefill kernel for sm_90a, flash-attention-3 style
 * (impl=fa3; issue 16 item 1; design ../shared/design/attention_hopper.md
 * 1.8; facts shared/ref/ptx-sm90.md). Built from the kit: TMA loads
 * (gen/kit/tma.h), the mbarrier ring (KIT_PIPE_MBARRIER, gen/kit/pipe.h),
 * wgmma atoms and the attention pieces shared with the mma.sync kernel
 * and the sm_90a decode kernel (gen/kit/attn.h: block range, masks,
 * softcap, online softmax, finalize, lse, S = Q K^T by wgmma SS, O += P V
 * by wgmma RS).
 *
 * Grid (m blocks, Hq, B) (pack_gqa: (m blocks of packed rows, Hkv, B));
 * one CTA of 128 (1 + C) threads per bm = 64 C query rows of one
 * (sequence, query head); the kv head is h / group.
 *   warpgroup 0, the producer: setmaxnreg.dec; one elected thread of its
 *     warp 0 loads Q once (d / 64 TMA boxes of 64 columns x bm rows, 128B
 *     swizzle) on its own mbarrier, then for every visible key block, from
 *     the last one down, K (d / 64 boxes of bn rows) and V (dv / 64 boxes)
 *     each into a `stages`-deep full/empty mbarrier ring (acquire waits for
 *     the consumers to free the stage);
 *   warpgroups 1..C, the consumers (setmaxnreg.inc), 64 rows each: per key
 *     block S = Q K^T (wgmma SS m64n{bn}k16, d / 16 steps, the first from
 *     zero); softcap; the mask only on blocks at the end of the keys or
 *     meeting a diagonal / window edge (a uniform branch around it); the
 *     online softmax of the wgmma D fragment (one fma + ex2 a score, the
 *     scale folded in; quad max); O *= alpha; P = cvt.rn pairs of the
 *     exponentials, which are the RS A fragments; O += P V (wgmma RS
 *     m64n{dv}k16, V MN-major). Stages are released after the wgmmas
 *     reading them retired. overlap=0 (loop_plain) waits for each group at
 *     once; overlap=1 (loop_overlap, flash-attention 3's fwd_step) issues
 *     the next block's QK^T and this block's PV as two groups, runs the
 *     softmax after wait_group 1, rescales O and converts P after
 *     wait_group 0. pingpong=1: the consumers issue their GEMMs in turn
 *     (named barriers 2 + w), so one's softmax overlaps another's wgmmas.
 *     The loops carry .pragma "nounroll".
 *   epilogue (consumers): l quad-summed, O / l (0 for a row without a
 *     visible key), stored from the fragment 4 bytes a pair (rows past the
 *     sequence not stored); lse from the row statistics.
 * Key blocks nobody sees are never loaded (kit_attn_block_range); a CTA
 * with none writes o = 0 and lse = -inf. Sequence lengths are run-time
 * parameters or come from cu_seqlens / seqused_k; the TMA maps are over
 * whole tensors (bshd (d, H, S, B), bhsd (d, S, H, B), varlen (d, H,
 * total)), so a block's rows past the tensor are zero-filled by TMA and
 * rows past the sequence (varlen: the next sequence's) are masked (K),
 * zeroed in shared memory in the key-end block (V: 0 P times a NaN is
 * NaN) or not stored (Q). pack_gqa=1 (bshd, varlen): tile row r is packed
 * row m0 + r, position (m0 + r) / group of head hk group + (m0 + r) %
 * group; Q is one box of bm / group positions x the group's heads; masks,
 * o and lse take each row's own position. Paged K/V: the K and V maps are
 * over the pools (d, Hkv, page row, page) and a block is one box of one
 * page (page_size a multiple of bn; the producer reads the block-table
 * entry), so pages under 64 keys and head dim 96 are refused by check()
 * in one line, and on sm_90a those problems default to impl=fa2 (which
 * gathers small pages and serves hd96). Not yet: a TMA O store, clusters,
 * a persistent scheduler.
 *
 * Shared memory (dynamic, base rounded up to 1024 at run time, 1 KB of
 * slack; a tile row is 128 bytes, e4m3 hd64's TMA-loaded ones 64):
 * sQ d es / 128 sub-tiles of bm rows; K ring `stages` x d / 64
 * sub-tiles of bn x 128 bytes; V ring `stages` x dv / 64 boxes of bn x
 * 128 bytes; then the barriers: Q full/empty, K full[S] empty[S], V
 * full[S] empty[S]. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/attention_combine.h"
#include "gen/attention_int.h"
#include "ptx/emu/tmap.h"
#include "ptx/target.h"

/* setmaxnreg splits by consumer warpgroups (entry registers: 168 for 256
 * and 384 threads, 128 for 512): 40/232, 40/232, 32/160 */
static const int prod_regs[4] = {0, 40, 40, 32}, cons_regs[4] = {0, 232, 232, 160};
enum { FA3_REG_RESERVE = 40 }; /* addresses, softmax state, loop counters beside S, P and O */
/* fp8 (dtype e4m3, issue 16 item 3; descale_q descale_k folded into the
 * scale by prepare, descale_v into 1 / l): S by wgmma e4m3 (k32 steps over
 * the same 128-byte swizzled rows, TMA boxes of 128 elements); P rounded to
 * e4m3 in registers with exponent offset 8 (p in [0, 256], flash-attention
 * 3's max_offset) as the 8-bit RS A fragment (kit_attn_p_to_a8); O += P V^T
 * by wgmma RS m64n{dv}k32 e4m3 from V^T, which warps 1..3 of the producer
 * warpgroup (96 threads, barrier FA3_FP8_BAR) write per stage from the
 * landed V stage (kit_attn_v8_transpose, keys in the P fragment's order,
 * keys past the sequence as 0) into a V^T ring whose full barrier (count 1)
 * says "transposed"; V^T stage s is rewritten only after V's full[s]
 * completes again, which follows the consumers' release of V stage s after
 * the P V that read V^T s. Head dims 64 (Q, K and V rows one 64B swizzle
 * span; gathered K / V: the gather's 128-byte rows), 96 (128-byte rows, the box past
 * the row zero-filled, 3 k32 steps), 128, 256; pages under FA3_TMA_PAGE
 * keys: the producer's 128 threads gather and warps 1..3 transpose in one
 * loop (gather_transpose_loop); bn a multiple of 32 (P V's k32), o bf16. */
enum { FA3_FP8_OFF = 8, FA3_FP8_BAR = 5, FA3_FP8_CONV = 96 };

typedef struct fa3 {
    const pt_prepared *pp;
    ptx_fn *f;
    const kit_atom *mma;   /* m16n8k16 of the dtype: the fragment maps */
    kit_atom ws, wo;       /* wgmma m64n{bn}k16, m64n{dv}k16 */
    int bm, bn, stages, cons, threads;
    bool overlap, pingpong;  /* intra-warpgroup overlap; pingpong between the consumers */
    bool pack;             /* pack_gqa: tile rows are (query position, head) pairs of one kv head */
    bool fp8;              /* e4m3 q, k, v: P e4m3, V^T by the producer's warps 1..3 (FA3_FP8 below) */
    int64_t vtsub, vtbytes; /* fp8: a V^T sub-tile (dv x 128 keys), a V^T stage */
    int64_t grp;           /* query heads per packed position: group with pack, else 1 */
    int pr;                /* paged: key rows of one K/V TMA box, min(page_size, bn) */
    bool gather;           /* paged, pages under FA3_TMA_PAGE keys: cp.async gather (gather_kv) */
    int es, NI, NO;
    int qspan, kspan, vspan; /* bytes of a Q / K / V tile row: the swizzle span (128; e4m3 hd64: 64) */
    int64_t qsub, ksub, vbox;  /* sub-tile / box bytes */
    int64_t qbytes, kbytes, vbytes, region, smem;
    float k;               /* softmax exponent scale (scale, or softcap c) */
} fa3;

static bool fa3_target(const pt_target *t) { return t->sm == 90 && t->arch_specific; }

/* head dim 96: two 64-column boxes, the second's columns past 96 zero-filled by TMA and never read */
static bool fa3_dim(int64_t d) { return d == 64 || d == 96 || d == 128 || d == 256; }

/* Paged K/V: pages of FA3_TMA_PAGE keys or more load as TMA boxes of min(page, bn) rows (one
 * 1024-byte swizzle atom of 8 rows at least, so every box starts on the 128B pattern); smaller
 * pages are gathered row by row with cp.async by the producer warpgroup's 128 threads. */
enum { FA3_TMA_PAGE = 8, FA3_GATHER_T = 128 };

bool attn_fa3_applies(const pt_prepared *pp, const pt_target *t)
{
    /* e4m3 prefill has no other kernel: check() names what it refuses */
    return fa3_target(t) && !attn_decode_kind(pp) &&
           (pp->dt == PT_E4M3 || (fa3_dim(pp->d) && fa3_dim(pp->dv)));
}

static int geometry(const pt_prepared *pp, const pt_target *t, const pt_config *c, fa3 *g, pt_err *e)
{
    memset(g, 0, sizeof *g);
    g->pp = pp;
    char tn[16];
    int64_t impl = pt_config_get(c, "impl", ATTN_FA3);
    if (impl != ATTN_FA3)
        return pt_errf(e, PT_EINVAL, "impl=%lld: the sm_90a prefill kernel is impl=%d (fa3)", (long long)impl,
                       ATTN_FA3);
    if (!fa3_target(t))
        return pt_errf(e, PT_EUNSUPPORTED, "impl=2 (fa3) needs sm_90a; target is %s",
                       pt_target_name(t, tn, sizeof tn));
    g->fp8 = pp->dt == PT_E4M3;
    g->mma = kit_atom_get(g->fp8 ? PT_BF16 : pp->dt); /* fp8: its m16n8 C map is the fragments' */
    if (!g->mma || g->mma->kind != KIT_ATOM_MMA_SYNC || g->mma->k != 16 || g->mma->es != 2)
        return pt_errf(e, PT_EUNSUPPORTED, "impl=2 (fa3): dtype %s (f16, bf16 or e4m3)", pt_dtype_get(pp->dt)->name);
    if (!fa3_dim(pp->d) || !fa3_dim(pp->dv))
        return pt_errf(e, PT_EUNSUPPORTED,
                       "impl=2 (fa3): head_dim=%lld head_dim_v=%lld: 64 96 128 256 (impl=0, fa2, serves the others)",
                       (long long)pp->d, (long long)pp->dv);
    if (!(pp->scale > 0) || (pp->softcap != 0 && !(pp->softcap > 0)))
        return pt_errf(e, PT_EUNSUPPORTED, "impl=2 (fa3): softmax_scale %g softcap %g (positive)",
                       (double)pp->scale, (double)pp->softcap);
    g->bm = (int)pt_config_get(c, "bm", 128);
    g->bn = (int)pt_config_get(c, "bn", 128);
    g->stages = (int)pt_config_get(c, "stages", 2);
    int64_t ov = pt_config_get(c, "overlap", 1), ppg = pt_config_get(c, "pingpong", 0);
    if (g->bm != 64 && g->bm != 128 && g->bm != 192)
        return pt_errf(e, PT_EINVAL, "bm=%d: 64, 128 or 192 (64 rows per consumer warpgroup)", g->bm);
    if (g->bn < 16 || g->bn > 256 || g->bn % 16)
        return pt_errf(e, PT_EINVAL, "bn=%d: a multiple of 16 up to 256 (the wgmma N of S, P V's k)", g->bn);
    if (g->fp8 && g->bn % 32)
        return pt_errf(e, PT_EINVAL, "bn=%d with dtype e4m3: a multiple of 32 (P V's k32 steps)", g->bn);
    if (g->stages < 2 || g->stages > 4)
        return pt_errf(e, PT_EINVAL, "stages=%d: 2..4", g->stages);
    if (ov != 0 && ov != 1)
        return pt_errf(e, PT_EINVAL, "overlap=%lld: 0 or 1 (the next block's QK^T under this block's softmax)",
                       (long long)ov);
    if (ppg != 0 && ppg != 1)
        return pt_errf(e, PT_EINVAL, "pingpong=%lld: 0 or 1", (long long)ppg);
    if (ppg && g->bm == 64)
        return pt_errf(e, PT_EINVAL, "pingpong=1 needs 2 or 3 consumer warpgroups (bm=128 or 192); bm=%d has one",
                       g->bm);
    g->overlap = ov != 0;
    g->pingpong = ppg != 0;
    int64_t pk = pt_config_get(c, "pack_gqa", 0);
    if (pk != 0 && pk != 1)
        return pt_errf(e, PT_EINVAL, "pack_gqa=%lld: 0 or 1", (long long)pk);
    if (pk && pp->group == 1)
        return pt_errf(e, PT_EINVAL, "pack_gqa=1: heads_q=%lld equals heads_kv (no query heads to pack)",
                       (long long)pp->Hq);
    if (pk && pp->bhsd)
        return pt_errf(e, PT_EINVAL, "pack_gqa=1 with layout bhsd: impl=2 packs bshd rows (one TMA box of the "
                       "group's heads)");
    if (pk && (g->bm % pp->group || g->bm / pp->group > 256))
        return pt_errf(e, PT_EINVAL, "pack_gqa=1: bm=%d is not a multiple of the group %lld (whole positions a "
                       "tile)", g->bm, (long long)pp->group);
    g->pack = pk != 0;
    g->grp = g->pack ? pp->group : 1;
    ptx_type ab = g->fp8 ? PTX_T_E4M3 : pp->dt == PT_BF16 ? PTX_T_BF16 : PTX_T_F16;
    if (!kit_wgmma_atom(ab, PTX_T_F32, g->bn, &g->ws) || !kit_wgmma_atom(ab, PTX_T_F32, (int)pp->dv, &g->wo))
        return pt_errf(e, PT_EINVAL, "bn=%d head_dim_v=%lld: not wgmma N values", g->bn, (long long)pp->dv);
    if (pp->page && (pp->page >= g->bn ? pp->page % g->bn : g->bn % pp->page))
        return pt_errf(e, PT_EINVAL, "impl=2 (fa3): page_size=%lld with bn=%d: a K/V block lies within one page "
                       "or is whole pages (page_size a multiple of bn, or bn of page_size)", (long long)pp->page,
                       g->bn);
    g->pr = pp->page && pp->page < g->bn ? (int)pp->page : g->bn;
    g->gather = pp->page && pp->page < FA3_TMA_PAGE;
    if (pp->page && pp->npages > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "num_pages=%lld: TMA coordinates are 32-bit", (long long)pp->npages);
    g->cons = g->bm / 64;
    g->threads = 128 * (1 + g->cons);
    g->es = g->fp8 ? 1 : 2;
    g->NI = g->bn / 8;
    g->NO = (int)pp->dv / 8;
    /* e4m3 head dim 64: Q, K and V rows are one 64B swizzle span (gathered: the gather's 128B rows) */
    g->qspan = pp->d * g->es == 64 ? 64 : 128;
    g->kspan = pp->d * g->es == 64 && !g->gather ? 64 : 128;
    g->vspan = pp->dv * g->es == 64 && !g->gather ? 64 : 128; /* e4m3 dv 64: the transposer reads 64B rows */
    g->qsub = (int64_t)g->bm * g->qspan;
    g->ksub = (int64_t)g->bn * g->kspan;
    g->vbox = (int64_t)g->bn * g->vspan;
    g->qbytes = g->qsub * ((pp->d * g->es + g->qspan - 1) / g->qspan); /* hd96: a second box half past the row */
    g->kbytes = g->ksub * ((pp->d * g->es + g->kspan - 1) / g->kspan);
    g->vbytes = g->vbox * ((pp->dv * g->es + g->vspan - 1) / g->vspan);
    g->region = g->qbytes + g->stages * (g->kbytes + g->vbytes);
    g->smem = 1024 + g->region + 16 * (1 + 2 * g->stages);
    if (g->fp8) { /* the V^T ring after V's, its full barriers after the others */
        g->vtsub = pp->dv * 128;
        g->vtbytes = g->vtsub * ((g->bn + 127) / 128);
        g->region += g->stages * g->vtbytes;
        g->smem += g->stages * (g->vtbytes + 16);
    }
    g->k = pp->softcap > 0 ? pp->softcap : pp->scale;
    return PT_OK;
}

/* Live values of a consumer thread: S bn / 2, P bn / 4 (packed), O dv / 2. */
static int p_regs(const fa3 *g) { return g->fp8 ? g->bn / 8 : g->bn / 4; }
static int64_t live_regs(const fa3 *g) { return g->bn / 2 + p_regs(g) + g->pp->dv / 2; }

int attn_fa3_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    fa3 g;
    int rc = geometry(pp, t, c, &g, e);
    if (rc)
        return rc;
    uint32_t lim = pt_target_smem_limit(t->sm);
    if (g.smem > (int64_t)lim)
        return pt_errf(e, PT_EINVAL,
                       "shared memory %lld bytes (Q %lld + %d x (K %lld + V %lld), 1 KB alignment slack, barriers) "
                       "over sm_90a's %u", (long long)g.smem, (long long)g.qbytes, g.stages, (long long)g.kbytes,
                       (long long)g.vbytes, lim);
    int budget = 128 * prod_regs[g.cons] + 128 * g.cons * cons_regs[g.cons];
    if (budget > 65536)
        return pt_errf(e, PT_EINTERNAL, "bm=%d: setmaxnreg %d/%d needs %d registers, 65536 exist", g.bm,
                       prod_regs[g.cons], cons_regs[g.cons], budget);
    int64_t live = live_regs(&g), room = cons_regs[g.cons] - FA3_REG_RESERVE;
    if (live > room)
        return pt_errf(e, PT_EINVAL,
                       "bm=%d bn=%d: %lld live values per consumer thread (S %d + P %d + O %lld) over %lld of its %d "
                       "registers (would spill)", g.bm, g.bn, (long long)live, g.bn / 2, p_regs(&g),
                       (long long)(pp->dv / 2), (long long)room, cons_regs[g.cons]);
    int64_t nmb = (pp->Sq * g.grp + g.bm - 1) / g.bm;
    if (nmb > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "%lld m blocks: grid x holds at most 2^31-1", (long long)nmb);
    return PT_OK;
}

/* pack_gqa=1 in the space: query heads share a kv head (bshd rows) and
 * some tile of the unpacked kernel is partly empty (a length that is not
 * a multiple of 128 rows, or varlen). */
static bool pack_useful(const pt_prepared *pp)
{
    return pp->group > 1 && !pp->bhsd && (pp->varlen || pp->Sq % 128 != 0);
}

int attn_fa3_space(const pt_prepared *pp, const pt_target *t, pt_space *out)
{
    (void)t;
    memset(out, 0, sizeof *out);
    pt_param_space ps[] = {
        {"impl", "kernel kind (2: fa3, sm_90a wgmma + TMA, warp-specialised prefill)", 1, {ATTN_FA3}},
        {"bm", "query rows per CTA (64 per consumer warpgroup)", 3, {128, 64, 192}},
        {"bn", "keys per K/V block (the wgmma N of S, a multiple of 16)", 8, {128, 64, 80, 96, 112, 144, 176, 192}},
        {"stages", "K and V mbarrier ring depth", 2, {2, 3}},
        {"overlap", "intra-warpgroup overlap: the next block's QK^T and this block's PV in flight together", 2,
         {1, 0}},
        {"pingpong", "consumer warpgroups take turns issuing their GEMMs (named barriers)", 2, {1, 0}},
        {"pack_gqa", "tile rows are (query position, head) pairs of the query heads of one kv head (GQA, MQA)",
         pack_useful(pp) ? 2 : 1, {0, 1}},
    };
    if (pp->dt == PT_E4M3) /* P V's k32: bn a multiple of 32 */
        ps[2] = (pt_param_space){"bn", "keys per K/V block (the wgmma N of S; e4m3: a multiple of 32)", 5,
                                 {128, 64, 96, 160, 192}};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        out->p[out->nparams++] = ps[i];
    return PT_OK;
}

/* Flash-attention 3's tile table (hopper/tile_size.h) within this
 * kernel's register and shared-memory budget: bm 128 (64 for Sq <= 64),
 * bn 128 for hd64 and hd128, 80 for hd256; 2 stages. */
void attn_fa3_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out)
{
    memset(out, 0, sizeof *out);
    pt_space s;
    attn_fa3_space(pp, t, &s);
    for (int i = 0; i < s.nparams; i++)
        pt_config_set(out, s.p[i].name, s.p[i].values[0]);
    int64_t d = pp->d > pp->dv ? pp->d : pp->dv;
    pt_config_set(out, "bm", pp->Sq <= 64 ? 64 : 128);
    int bn = d >= 256 ? (pp->dt == PT_E4M3 ? 64 : 80) : 128;
    if (pp->page && (pp->page >= bn ? pp->page % bn : bn % pp->page)) /* within one page, or whole pages */
        bn = 64;
    pt_config_set(out, "bn", bn);
    pt_config_set(out, "stages", 2);
    pt_config_set(out, "overlap", 1);
    /* flash-attention 3 pingpongs two or more consumers for d <= 128 */
    pt_config_set(out, "pingpong", pp->Sq > 64 && d <= 128 ? 1 : 0);
    /* pack the group's heads when that fills the tiles better (flash-attention
     * 3's rule, as impl=0's: the unpacked rows' efficiency under 0.9 of the
     * packed one's; always for varlen); bm 128 then, whole positions a tile */
    int pack = 0;
    if (pack_useful(pp) && 128 % pp->group == 0) {
        int bm = pp->Sq <= 64 ? 64 : 128;
        double rows = (double)pp->Sq, prow = rows * (double)pp->group;
        double eff = rows / (ceil(rows / bm) * bm), peff = prow / (ceil(prow / 128) * 128);
        pack = pp->varlen || eff < 0.9 * peff;
        if (pack) {
            pt_config_set(out, "bm", 128);
            pt_config_set(out, "pingpong", d <= 128 ? 1 : 0);
        }
    }
    pt_config_set(out, "pack_gqa", pack);
    pt_space_default(&s, attn_fa3_check, pp, t, out);
}

/* ---- emission helpers ---- */

static ptx_reg r32(fa3 *g) { return ptx_reg_new(g->f, PTX_T_B32); }
static ptx_reg iop(fa3 *g, ptx_op op, ptx_opd a, ptx_opd b) { return kit_reg(g->f, kit_iop(g->f, op, a, b)); }

static ptx_reg sreg(fa3 *g, ptx_sreg s)
{
    ptx_reg r = r32(g);
    ptx_emit(g->f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_sr(s));
    return r;
}

static ptx_reg setp(fa3 *g, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = ptx_reg_new(g->f, PTX_T_PRED);
    ptx_emit(g->f, PTX_OP_SETP, M1(cmp), S32T, ptx_r(p), a, b);
    return p;
}

static void bra(fa3 *g, int label, ptx_reg p, bool neg)
{
    ptx_ins *in = ptx_emit(g->f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(label));
    if (p.id)
        ptx_guard(in, p, neg);
}

/* p64 + a * bytes (a: a u32 register; bytes < 2^32). */
static ptx_reg addr(fa3 *g, ptx_reg p64, ptx_reg a, int64_t bytes)
{
    ptx_fn *f = g->f;
    if (bytes == 0)
        return p64;
    ptx_reg off = ptx_reg_new(f, PTX_T_B64), d = ptx_reg_new(f, PTX_T_B64);
    if (bytes <= 0xffffffffll) {
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_WIDE), U32T, ptx_r(off), ptx_r(a), ptx_imm(bytes));
    } else {
        ptx_reg w = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), ptx_r(a));
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U64T, ptx_r(off), ptx_r(w), ptx_imm(bytes));
    }
    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(d), ptx_r(p64), ptx_r(off));
    return d;
}

static int log2i(int64_t v)
{
    int sh = 0;
    while ((INT64_C(1) << sh) < v)
        sh++;
    return sh;
}

static ptx_reg ld_s32(fa3 *g, ptx_reg p, ptx_reg idx)
{
    ptx_reg a = addr(g, p, idx, 4), r = r32(g);
    ptx_emit(g->f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(r), ptx_addr(a, 0));
    return r;
}

/* The TMA map of q (which 0), k (1) or v (2): innermost first (d, head,
 * token, batch) for bshd, (d, token, head, batch) for bhsd, (d, head,
 * token) over the packed rows for varlen; boxes of 64 columns x `rows`
 * tokens x one head, 128B swizzle, zero fill. */
static pt_tmap qkv_map(const fa3 *g, int which, int rows, int heads)
{
    const pt_prepared *pp = g->pp;
    const int64_t *st = which == 0 ? pp->sq : which == 1 ? pp->sk : pp->sv;
    int64_t S = which == 0 ? pp->Sq : pp->Sk, H = which == 0 ? pp->Hq : pp->Hkv;
    int64_t D = which == 2 ? pp->dv : pp->d;
    int idx = which == 0 ? pp->t.q : which == 1 ? pp->t.k : pp->t.v;
    pt_tmap m = {.of = PT_ARG_INPUT, .index = idx, .dtype = kit_tma_dtype(pp->dt), .l2promo = EMU_TMAP_L2_256B,
                 .oobfill = EMU_TMAP_OOB_ZERO, .swizzle = EMU_TMAP_SWIZZLE_128B};
    int es = g->es, span = which == 0 ? g->qspan : which == 1 ? g->kspan : g->vspan;
    if (span == 64)
        m.swizzle = EMU_TMAP_SWIZZLE_64B;
    m.dims[0] = (uint64_t)D;
    m.box[0] = (uint32_t)(span / es); /* the swizzle span */
    if (which && pp->page) { /* the pools [num_pages, page_size, Hkv, D]: (D, Hkv, page row, page) */
        m.rank = 4;
        m.dims[1] = (uint64_t)H;
        m.dims[2] = (uint64_t)pp->page;
        m.dims[3] = (uint64_t)pp->npages;
        m.strides[0] = (uint64_t)(st[1] * es);
        m.strides[1] = (uint64_t)(st[0] * es);
        m.strides[2] = (uint64_t)(st[2] * es);
        m.box[1] = 1;
        m.box[2] = (uint32_t)(rows < pp->page ? rows : pp->page); /* pages under bn keys: a box a page */
        m.box[3] = 1;
        return m;
    }
    if (pp->varlen) {
        m.rank = 3;
        m.dims[1] = (uint64_t)H;
        m.dims[2] = (uint64_t)(pp->B * S);
        m.strides[0] = (uint64_t)(st[1] * es);
        m.strides[1] = (uint64_t)(st[0] * es);
        m.box[1] = (uint32_t)heads;
        m.box[2] = (uint32_t)rows;
        return m;
    }
    m.rank = 4;
    bool tok1 = pp->bhsd; /* dimension 1 is the token (bhsd) or the head (bshd) */
    m.dims[1] = (uint64_t)(tok1 ? S : H);
    m.dims[2] = (uint64_t)(tok1 ? H : S);
    m.dims[3] = (uint64_t)pp->B;
    m.strides[0] = (uint64_t)(st[tok1 ? 0 : 1] * es);
    m.strides[1] = (uint64_t)(st[tok1 ? 1 : 0] * es);
    m.strides[2] = (uint64_t)(st[2] * es);
    m.box[1] = tok1 ? (uint32_t)rows : (uint32_t)heads;
    m.box[2] = tok1 ? (uint32_t)heads : (uint32_t)rows;
    m.box[3] = 1;
    return m;
}

/* The boxes of one tile (Q, a K stage or a V stage): ncol / 64 boxes of 64
 * columns at dst + c step, tokens from tok, head hd, sequence b. */
static void tile_load(fa3 *g, ptx_reg map, int span, ptx_reg dst, int64_t step, int64_t ncol, ptx_reg tok,
                      ptx_reg hd, ptx_reg b, ptx_reg bar, bool paged)
{
    const pt_prepared *pp = g->pp;
    int64_t bc = span / g->es; /* columns a box */
    for (int64_t c = 0; c < (ncol + bc - 1) / bc; c++) { /* hd96: the second box half past the row */
        ptx_reg d = c ? iop(g, PTX_OP_ADD, ptx_r(dst), ptx_imm(c * step)) : dst;
        ptx_opd co[4];
        co[0] = ptx_imm(bc * c);
        int rank = pp->varlen && !paged ? 3 : 4;
        if (paged || pp->varlen || !pp->bhsd) { /* paged: (head, page row, page) */
            co[1] = ptx_r(hd);
            co[2] = ptx_r(tok);
        } else {
            co[1] = ptx_r(tok);
            co[2] = ptx_r(hd);
        }
        co[3] = ptx_r(b);
        kit_tma_load(g->f, d, map, rank, co, bar);
    }
}

/* Paged K or V of the block from key n0 when pages are under bn keys
 * (FA3_TMA_PAGE <= page_size < bn): bn / page boxes of page rows a 64-column
 * sub-tile, box i at row i page of the stage (8-row multiples: each starts
 * on a 1024-byte swizzle atom), at page coordinate table[n0 / page + i];
 * a page whose first key is at or past sk is asked at num_pages, which
 * TMA fills with zeros (still its bytes of the stage's transactions), so
 * no block-table entry past the sequence is read. */
static void paged_load(fa3 *g, ptx_reg map, int span, ptx_reg dst, int64_t step, int64_t ncol, ptx_reg n0,
                       ptx_reg hd, ptx_reg btab, ptx_reg sk, ptx_reg bar)
{
    const pt_prepared *pp = g->pp;
    ptx_fn *f = g->f;
    /* a loop over the pages (not unrolled: 9 pages of bn 144 spilled the producer's 40 registers) */
    ptx_reg key = r32(g), pi = r32(g), di = r32(g), it = r32(g), row = kit_reg(f, ptx_imm(0));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(key), ptx_r(n0));
    ptx_emit(f, PTX_OP_SHR, NOM, U32T, ptx_r(pi), ptx_r(n0), ptx_imm(log2i(pp->page)));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(di), ptx_r(dst));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(it), ptx_imm(0));
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    ptx_reg pg = r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, S32T, ptx_r(pg), ptx_imm(pp->npages));
    ptx_guard(ptx_emit(f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(pg), ptx_addr(addr(g, btab, pi, 4), 0)),
              setp(g, PTX_M_LT, ptx_r(key), ptx_r(sk)), false);
    tile_load(g, map, span, di, step, ncol, row, hd, pg, bar, true);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(key), ptx_r(key), ptx_imm(g->pr));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(pi), ptx_r(pi), ptx_imm(1));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(di), ptx_r(di), ptx_imm((int64_t)g->pr * span));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(it), ptx_r(it), ptx_imm(1));
    bra(g, top, setp(g, PTX_M_LT, ptx_r(it), ptx_imm(g->bn / g->pr)), false);
}

/* Paged K or V of the block from key n0 when pages are under FA3_TMA_PAGE
 * keys (a TMA box of one page would start inside a swizzle atom): the
 * producer warpgroup's FA3_GATHER_T threads gather the key rows by cp.async
 * into the TMA layout (attn_gather_rows, shared with the decode kernel),
 * then each arrives on the stage's full barrier with
 * cp.async.mbarrier.arrive.noinc (the barrier counts FA3_GATHER_T arrivals
 * and no transactions); the consumers fence.proxy.async after their wait. */
static void gather_kv(fa3 *g, kit_pipe *p, ptx_reg pool, const int64_t *st, int64_t ncol, ptx_reg n0, ptx_reg hd,
                      ptx_reg btab, ptx_reg sk, ptx_reg pt)
{
    ptx_fn *f = g->f;
    attn_gather_rows(f, g->es, g->pp->page, g->bn, kit_pipe_acquire(p), pool, (ptx_reg){0}, 0, st, ncol, n0, sk, hd,
                     btab, pt);
    ptx_emit(f, PTX_OP_CP_ASYNC_MBAR, M2(PTX_M_NOINC, PTX_M_SHARED_CTA), B64T, ptx_addr(kit_pipe_full(p), 0));
    kit_pipe_commit(p);
}

/* K and V of the block: in one pass (attn_gather_rows with both pools: a
 * row's table entry read once) when K and V have one width, stride set and
 * stage size, so V's stage of the same index is K's plus the K ring's
 * bytes (the rings advance together: stages x kbytes apart); else one
 * pass each. Each pipe waits its empty stage first; each full barrier
 * takes the 128 threads' cp.async.mbarrier.arrive.noinc (the K one also
 * waits for the V copies issued before it). */
static void gather_kv_both(fa3 *g, kit_pipe *pk, kit_pipe *pv, ptx_reg kpool, ptx_reg vpool, ptx_reg n0, ptx_reg hd,
                           ptx_reg btab, ptx_reg sk, ptx_reg pt)
{
    const pt_prepared *pp = g->pp;
    if (pp->d != pp->dv || g->kbytes != g->vbytes || memcmp(pp->sk, pp->sv, 3 * sizeof *pp->sk)) {
        gather_kv(g, pk, kpool, pp->sk, pp->d, n0, hd, btab, sk, pt);
        gather_kv(g, pv, vpool, pp->sv, pp->dv, n0, hd, btab, sk, pt);
        return;
    }
    ptx_fn *f = g->f;
    ptx_reg ks = kit_pipe_acquire(pk);
    kit_pipe_acquire(pv); /* V's empty wait; its stage is ks + stages x kbytes */
    attn_gather_rows(f, g->es, pp->page, g->bn, ks, kpool, vpool, g->stages * g->kbytes, pp->sk, pp->d, n0, sk, hd,
                     btab, pt);
    ptx_emit(f, PTX_OP_CP_ASYNC_MBAR, M2(PTX_M_NOINC, PTX_M_SHARED_CTA), B64T, ptx_addr(kit_pipe_full(pk), 0));
    kit_pipe_commit(pk);
    ptx_emit(f, PTX_OP_CP_ASYNC_MBAR, M2(PTX_M_NOINC, PTX_M_SHARED_CTA), B64T, ptx_addr(kit_pipe_full(pv), 0));
    kit_pipe_commit(pv);
}

/* The barriers of a ring; a gathered K or V ring's full barriers count
 * the producer warpgroup's FA3_GATHER_T cp.async arrivals. */
static void ring_setup(fa3 *g, kit_pipe *p, ptx_reg who)
{
    if (!g->gather) {
        kit_pipe_mbar_setup(p, who);
        return;
    }
    for (int s = 0; s < 2 * p->stages; s++) /* full[s] at 8 s, empty[s] at 8 (stages + s) */
        ptx_guard(ptx_emit(g->f, PTX_OP_MBAR_INIT, M1(PTX_M_SHARED_CTA), B64T, ptx_addr(p->bars, 8 * s),
                           ptx_imm(s < p->stages ? FA3_GATHER_T : p->empty_count)),
                  who, false);
}

/* ---- the consumers' main loop ---- */

typedef struct cons_loop {
    fa3 *g;
    kit_pipe *pk, *pv;
    kit_pipe *pvt;         /* fp8: the V^T ring (waited for; V's stages are released) */
    kit_softmax *sm;
    const kit_attn_mask *mask;
    const kit_frag *sf;
    ptx_reg *sacc, *preg, *oacc;
    ptx_reg qaddr, n0, j, nblk, sk, ct, cwg;
    ptx_reg pa[16][4]; /* P's RS A fragments, carried across iterations (overlap) */
} cons_loop;

static void wg_wait(fa3 *g, int n)
{
    ptx_emit(g->f, PTX_OP_WGMMA_WAIT, M2(PTX_M_SYNC, PTX_M_ALIGNED), PTX_NOTYPES, ptx_imm(n));
}

/* Pingpong (named barriers 2 + w, 256 threads: warpgroup w and the one
 * before it): a warpgroup issues its GEMMs only after the previous one
 * issued its own, so one's softmax runs under the other's wgmmas. */
static void sched_sync(cons_loop *c)
{
    fa3 *g = c->g;
    if (!g->pingpong)
        return;
    ptx_reg id = iop(g, PTX_OP_ADD, ptx_r(c->cwg), ptx_imm(2));
    ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_r(id), ptx_imm(256));
}

static void sched_arrive(cons_loop *c)
{
    fa3 *g = c->g;
    if (!g->pingpong)
        return;
    /* the next warpgroup's barrier: 2 + (w + 1) % C */
    ptx_reg nx = iop(g, PTX_OP_ADD, ptx_r(c->cwg), ptx_imm(1));
    ptx_reg wrap = setp(g, PTX_M_GE, ptx_r(nx), ptx_imm(g->cons));
    ptx_emit(g->f, PTX_OP_SELP, NOM, B32T, ptx_r(nx), ptx_imm(0), ptx_r(nx), ptx_r(wrap));
    ptx_reg id = iop(g, PTX_OP_ADD, ptx_r(nx), ptx_imm(2));
    ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_ARRIVE), PTX_NOTYPES, ptx_r(id), ptx_imm(256));
}

/* S = Q K^T of the current K stage (issued, not waited). */
static void qk_issue(cons_loop *c, ptx_reg kst)
{
    fa3 *g = c->g;
    if (g->gather) /* the stage was written by cp.async (generic proxy), wgmma reads through the async one */
        ptx_emit0(g->f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
    /* d es bytes a row in k steps of 32 (bf16/f16 k16, e4m3 k32) */
    kit_attn_wg_qk(g->f, &g->ws, c->sacc, c->qaddr, g->qsub, g->qspan, kst, g->ksub, g->kspan,
                   (int)(g->pp->d * g->es));
}

/* The V stage of block nv0 waited for; its rows past the keys zeroed when
 * the block crosses them (another sequence's or unused keys: 0 P times a
 * NaN there is NaN), ordered before every consumer's wgmma (a barrier of
 * the consumers, outside any pingpong window). */
static ptx_reg v_wait(cons_loop *c, ptx_reg nv0)
{
    fa3 *g = c->g;
    ptx_fn *f = g->f;
    if (g->fp8) /* V^T, its keys past the sequence written as 0 */
        return kit_pipe_wait(c->pvt, 0);
    ptx_reg vst = kit_pipe_wait(c->pv, 0);
    if (g->gather) /* cp.async's writes, read by wgmma */
        ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
    int skip = ptx_label_new(f);
    bra(g, skip, setp(g, PTX_M_GT, ptx_r(nv0), ptx_r(c->mask->skbn)), true);
    kit_attn_zero_rows(f, vst, (int)((g->pp->dv + 63) / 64), g->vbox, g->bn,
                       iop(g, PTX_OP_SUB, ptx_r(c->sk), ptx_r(nv0)), c->ct, 128 * g->cons);
    ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
    ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(1), ptx_imm(128 * g->cons));
    ptx_label_place(f, skip);
    return vst;
}

/* softcap, mask and the online softmax of S (block n0): P's exponentials
 * into preg, each row's alpha. */
static void s_post(cons_loop *c, ptx_reg n0, ptx_opd *alpha)
{
    fa3 *g = c->g;
    const pt_prepared *pp = g->pp;
    if (pp->softcap > 0)
        kit_attn_softcap(g->f, c->sacc, g->NI * 4, (float)((double)pp->scale / (double)pp->softcap));
    kit_attn_mask_block(g->f, c->mask, c->sf, c->sacc, 2, g->NI, n0);
    kit_attn_softmax_rows(g->f, c->sm, 2, g->NI, c->sacc, c->preg, alpha);
}

/* P's exponentials -> the carried A fragments. */
static void p_convert(cons_loop *c)
{
    fa3 *g = c->g;
    kit_frag pf = *c->sf;
    pf.r = c->preg;
    ptx_reg a[16][4];
    if (g->fp8) {
        kit_attn_p_to_a8(g->f, &pf, g->bn, a);
        for (int kb = 0; kb < g->bn / 32; kb++)
            for (int q = 0; q < 4; q++)
                ptx_emit(g->f, PTX_OP_MOV, NOM, B32T, ptx_r(c->pa[kb][q]), ptx_r(a[kb][q]));
        return;
    }
    kit_attn_p_to_a(g->f, &pf, g->mma, g->bn, a);
    for (int kb = 0; kb < g->bn / 16; kb++)
        for (int q = 0; q < 4; q++)
            ptx_emit(g->f, PTX_OP_MOV, NOM, B32T, ptx_r(c->pa[kb][q]), ptx_r(a[kb][q]));
}

static void pv_issue(cons_loop *c, ptx_reg vst)
{
    fa3 *g = c->g;
    if (g->fp8)
        kit_attn_wg_pv8_issue(g->f, &g->wo, c->oacc, c->pa, vst, g->vtsub, g->bn);
    else
        kit_attn_wg_pv_issue(g->f, &g->wo, c->oacc, c->pa, vst, g->vbox, g->bn);
}

static void next_block(cons_loop *c)
{
    fa3 *g = c->g;
    ptx_emit(g->f, PTX_OP_SUB, NOM, S32T, ptx_r(c->n0), ptx_r(c->n0), ptx_imm(g->bn));
    ptx_emit(g->f, PTX_OP_ADD, NOM, U32T, ptx_r(c->j), ptx_r(c->j), ptx_imm(1));
}

static void alloc_pa(cons_loop *c)
{
    for (int kb = 0; kb < c->g->bn / (c->g->fp8 ? 32 : 16); kb++)
        for (int q = 0; q < 4; q++)
            c->pa[kb][q] = r32(c->g);
}

/* The first warpgroup's extra sync at the end takes the arrival the last
 * one gave it at the start (pingpong: every barrier's arrivals balanced). */
static void sched_start(cons_loop *c)
{
    fa3 *g = c->g;
    if (!g->pingpong)
        return;
    int skip = ptx_label_new(g->f);
    bra(g, skip, setp(g, PTX_M_NE, ptx_r(c->cwg), ptx_imm(g->cons - 1)), false);
    ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_ARRIVE), PTX_NOTYPES, ptx_imm(2), ptx_imm(256));
    ptx_label_place(g->f, skip);
}

static void sched_end(cons_loop *c)
{
    fa3 *g = c->g;
    if (!g->pingpong)
        return;
    int skip = ptx_label_new(g->f);
    bra(g, skip, setp(g, PTX_M_NE, ptx_r(c->cwg), ptx_imm(0)), false);
    ptx_emit(g->f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(2), ptx_imm(256));
    ptx_label_place(g->f, skip);
}

/* One block at a time: S, softmax, O *= alpha, O += P V, each wgmma group
 * waited for at once. */
static void loop_plain(cons_loop *c)
{
    fa3 *g = c->g;
    ptx_fn *f = g->f;
    alloc_pa(c);
    sched_start(c);
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    for (int r = 0; r < 2; r++)
        c->sm[r].fresh = false;
    ptx_reg kst = kit_pipe_wait(c->pk, 0);
    sched_sync(c);
    qk_issue(c, kst);
    sched_arrive(c);
    wg_wait(g, 0);
    kit_pipe_release(c->pk);
    ptx_opd alpha[2];
    s_post(c, c->n0, alpha);
    kit_attn_rescale(f, 2, g->NO, c->oacc, alpha);
    ptx_reg vst = v_wait(c, c->n0);
    p_convert(c);
    sched_sync(c);
    pv_issue(c, vst);
    sched_arrive(c);
    wg_wait(g, 0);
    kit_pipe_release(c->pv);
    next_block(c);
    bra(g, top, setp(g, PTX_M_LT, ptx_r(c->j), ptx_r(c->nblk)), false);
    sched_end(c);
}

/* Intra-warpgroup overlap (flash-attention 3's fwd_step): the next
 * block's S = Q K^T and this block's O += P V issued together (two
 * groups), the softmax of the next block after wait_group 1 (its S
 * retired, P V still running), O *= alpha and P's conversion after
 * wait_group 0. */
static void loop_overlap(cons_loop *c)
{
    fa3 *g = c->g;
    ptx_fn *f = g->f;
    alloc_pa(c);
    sched_start(c);
    /* the first block: S, softmax, P */
    ptx_reg kst = kit_pipe_wait(c->pk, 0);
    sched_sync(c);
    qk_issue(c, kst);
    sched_arrive(c);
    wg_wait(g, 0);
    kit_pipe_release(c->pk);
    ptx_opd alpha[2];
    s_post(c, c->n0, alpha); /* fresh states: O is zero, no rescale */
    p_convert(c);
    next_block(c);
    int tail = ptx_label_new(f), top = ptx_label_new(f);
    bra(g, tail, setp(g, PTX_M_GE, ptx_r(c->j), ptx_r(c->nblk)), false);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    for (int r = 0; r < 2; r++)
        c->sm[r].fresh = false;
    ptx_reg nv0 = iop(g, PTX_OP_ADD, ptx_r(c->n0), ptx_imm(g->bn)); /* the previous block's V */
    ptx_reg vst = v_wait(c, nv0);
    kst = kit_pipe_wait(c->pk, 0);
    sched_sync(c);
    qk_issue(c, kst);
    pv_issue(c, vst);
    sched_arrive(c);
    wg_wait(g, 1);
    kit_pipe_release(c->pk);
    s_post(c, c->n0, alpha);
    wg_wait(g, 0);
    kit_pipe_release(c->pv);
    kit_attn_rescale(f, 2, g->NO, c->oacc, alpha);
    p_convert(c);
    next_block(c);
    bra(g, top, setp(g, PTX_M_LT, ptx_r(c->j), ptx_r(c->nblk)), false);
    /* the last block's P V */
    ptx_label_place(f, tail);
    nv0 = iop(g, PTX_OP_ADD, ptx_r(c->n0), ptx_imm(g->bn));
    vst = v_wait(c, nv0);
    sched_sync(c);
    pv_issue(c, vst);
    sched_arrive(c);
    wg_wait(g, 0);
    kit_pipe_release(c->pv);
    sched_end(c);
}

/* fp8: warps 1..3 of the producer warpgroup (ct in [0, 96)) walk the key
 * blocks as the TMA thread does (n0 from the last visible block down):
 * wait for V stage s (pw: their own consumer end of V's ring), transpose
 * it into V^T stage s (keys >= sk - n0 as 0), fence.proxy.async (wgmma
 * reads through the async proxy), bar.sync FA3_FP8_BAR, 96, one thread
 * arrives on V^T's full[s]. */
static void v_transpose_step(fa3 *g, kit_pipe *pw, kit_pipe *pvt, ptx_reg ct, ptx_reg n0, ptx_reg sk)
{
    ptx_fn *f = g->f;
    ptx_reg st = kit_pipe_wait(pw, 0);
    ptx_reg lim = iop(g, PTX_OP_SUB, ptx_r(sk), ptx_r(n0));
    kit_attn_v8_transpose_span(f, st, g->vspan, g->vbox, pvt->prod.addr, g->vtsub, g->bn, (int)g->pp->dv, lim, ct,
                               FA3_FP8_CONV);
    ptx_emit0(f, PTX_OP_FENCE_PROXY_ASYNC, M1(PTX_M_SHARED_CTA), PTX_NOTYPES);
    ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(FA3_FP8_BAR), ptx_imm(FA3_FP8_CONV));
    ptx_guard(ptx_emit(f, PTX_OP_MBAR_ARRIVE, M1(PTX_M_SHARED_CTA), B64T, ptx_sink(), ptx_addr(kit_pipe_full(pvt), 0)),
              setp(g, PTX_M_EQ, ptx_r(ct), ptx_imm(0)), false);
    kit_pipe_commit(pvt);
}

static void v_transpose_loop(fa3 *g, kit_pipe *pw, kit_pipe *pvt, ptx_reg ct, ptx_reg n0, ptx_reg j, ptx_reg nblk,
                             ptx_reg sk)
{
    ptx_fn *f = g->f;
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    v_transpose_step(g, pw, pvt, ct, n0, sk);
    next_block(&(cons_loop){.g = g, .n0 = n0, .j = j});
    bra(g, top, setp(g, PTX_M_LT, ptx_r(j), ptx_r(nblk)), false);
}

/* A view of ring p at stage s (u32 register) and phase ph for one use of
 * one end (acquire + commit, or wait): every register of the view is
 * fresh and computed from the CTA's shared base (the ring's stages at
 * base + stage0, its barriers at base + bar0), so nothing of the ring but
 * base and the loop counter stays live across a loop (the producer's 40
 * registers); the end's advance at commit / wait writes only the view's
 * own registers, which are dead afterwards. */
static kit_pipe ring_view(fa3 *g, const kit_pipe *p, ptx_reg base, int64_t stage0, int64_t bar0, ptx_reg s,
                          ptx_reg ph)
{
    ptx_fn *f = g->f;
    kit_pipe v = *p;
    v.base = iop(g, PTX_OP_ADD, ptx_r(base), ptx_imm(stage0));
    v.end = iop(g, PTX_OP_ADD, ptx_r(base), ptx_imm(stage0 + p->stages * p->stage_bytes));
    v.bars = iop(g, PTX_OP_ADD, ptx_r(base), ptx_imm(bar0));
    kit_pipe_end e = {r32(g), r32(g), r32(g)};
    ptx_emit(f, PTX_OP_MAD, M1(PTX_M_LO), U32T, ptx_r(e.addr), ptx_r(s), ptx_imm(p->stage_bytes), ptx_r(v.base));
    ptx_emit(f, PTX_OP_MAD, M1(PTX_M_LO), U32T, ptx_r(e.bar), ptx_r(s), ptx_imm(8), ptx_r(v.bars));
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(e.phase), ptx_r(ph));
    v.prod = v.cons = v.rel = e;
    return v;
}

/* Stage and phase of the ring's k-th use (k u32 register): k % stages, (k / stages) & 1. */
static void stage_of(fa3 *g, ptx_reg k, ptx_reg *s, ptx_reg *ph)
{
    *s = iop(g, PTX_OP_REM, ptx_r(k), ptx_imm(g->stages));
    *ph = iop(g, PTX_OP_AND, ptx_r(iop(g, PTX_OP_DIV, ptx_r(k), ptx_imm(g->stages))), ptx_imm(1));
}

/* fp8 with pages under FA3_TMA_PAGE keys: the producer warpgroup's 128
 * threads gather K and V of block i (cp.async, gather_kv) and warps 1..3
 * then transpose block i - L (L = stages - 1) in one loop of nblk + L
 * iterations. Neither role waits on the other in a cycle: gathering block
 * i acquires K and V stages freed by the consumers after block i - stages
 * (its P V reads V^T of block i - stages, and in the overlap loop its S
 * waits V^T of block i - stages - 1), which these threads transposed at
 * iteration i - 1 or earlier; transposing block i - L waits V full of
 * block i - L, which every thread gathered at iteration i - L <= i, and
 * warp 0 (not transposing) gathers block b after the transposers'
 * iteration b - 1 (the same argument), so it never waits on a later
 * transpose. V^T stage s of block b is rewritten after V's full of block
 * b, whose gathers each waited V's empty of block b - stages, released
 * after the P V that read V^T stage s. Registers: the rings are views at
 * the iteration's stages (ring_view; live across the loop: i, n0, the
 * lengths, the pools, the table row, the shared base). */
static void gather_transpose_loop(fa3 *g, kit_pipe *pk, kit_pipe *pv, kit_pipe *pvt, ptx_reg base, ptx_reg kpool,
                                  ptx_reg vpool, ptx_reg n0, ptx_reg nblk, ptx_reg hk, ptx_reg btab, ptx_reg sk,
                                  ptx_reg tid)
{
    ptx_fn *f = g->f;
    int L = g->stages - 1;
    int64_t S = g->stages, sK = g->qbytes, sV = sK + S * g->kbytes, sVT = sV + S * g->vbytes;
    int64_t bk = g->region + 16, bv = bk + 16 * S, bvt = bv + 16 * S;
    /* n0 steps down every iteration (the transposed block's first key is n0 + (L + 1) bn after the
     * step), i - L < nblk ends the loop, the transposers' index and warp test come from tid */
    ptx_reg i = r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(i), ptx_imm(0));
    int top = ptx_label_new(f), skipg = ptx_label_new(f), skipt = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_pragma_nounroll(f);
    bra(g, skipg, setp(g, PTX_M_GE, ptx_r(i), ptx_r(nblk)), false);
    {
        ptx_reg s, ph;
        stage_of(g, i, &s, &ph);
        kit_pipe k = ring_view(g, pk, base, sK, bk, s, ph), v = ring_view(g, pv, base, sV, bv, s, ph);
        gather_kv_both(g, &k, &v, kpool, vpool, n0, hk, btab, sk, tid);
    }
    ptx_label_place(f, skipg);
    ptx_emit(f, PTX_OP_SUB, NOM, S32T, ptx_r(n0), ptx_r(n0), ptx_imm(g->bn));
    bra(g, skipt, setp(g, PTX_M_LT, ptx_r(tid), ptx_imm(32)), false);
    bra(g, skipt, setp(g, PTX_M_LT, ptx_r(i), ptx_imm(L)), false);
    {
        ptx_reg s, ph;
        stage_of(g, iop(g, PTX_OP_SUB, ptx_r(i), ptx_imm(L)), &s, &ph);
        kit_pipe w = ring_view(g, pv, base, sV, bv, s, ph);
        kit_pipe t = ring_view(g, pvt, base, sVT, bvt, s, ph);
        v_transpose_step(g, &w, &t, iop(g, PTX_OP_SUB, ptx_r(tid), ptx_imm(32)),
                         iop(g, PTX_OP_ADD, ptx_r(n0), ptx_imm((int64_t)(L + 1) * g->bn)), sk);
    }
    ptx_label_place(f, skipt);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(i), ptx_r(i), ptx_imm(1));
    bra(g, top, setp(g, PTX_M_LT, ptx_r(iop(g, PTX_OP_SUB, ptx_r(i), ptx_imm(L))), ptx_r(nblk)), false);
}

/* ---- the kernel ---- */

int attn_fa3_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    fa3 G, *g = &G;
    int rc = attn_fa3_check(pp, &pp->target, c, e);
    if (rc)
        return rc;
    geometry(pp, &pp->target, c, g, e);
    char cfg[256], name[128], sig[512];
    pt_config_str(c, cfg, sizeof cfg);
    snprintf(sig, sizeof sig, "%s|%lld %lld %lld %lld %lld %lld %lld %d %lld %lld %.9g %.9g %d %d %d %d", cfg,
             (long long)pp->B, (long long)pp->Hq, (long long)pp->Hkv, (long long)pp->Sq, (long long)pp->Sk,
             (long long)pp->d, (long long)pp->dv, pp->causal, (long long)pp->wl, (long long)pp->wr,
             (double)pp->scale, (double)pp->softcap, pp->bhsd, pp->varlen, pp->seqused, pp->lse);
    if (g->fp8) /* descale_v */
        snprintf(sig + strlen(sig), sizeof sig - strlen(sig), " %.9g", (double)pp->vscale);
    snprintf(name, sizeof name, "attn_fa3_%s_d%lld_%016llx", pt_dtype_get(pp->dt)->name, (long long)pp->d,
             (unsigned long long)pt_hash64(sig, strlen(sig)));
    g->f = ptx_fn_new(m, name);
    ptx_fn *f = g->f;
    f->cap_body = 0;
    f->body = pt_arena_grow(m->arena, NULL, sizeof *f->body, &f->cap_body, 2048);
    f->maxntid[0] = g->threads;
    f->maxntid[1] = f->maxntid[2] = 1;
    if (g->threads >= 384)
        f->minnctapersm = 1; /* entry registers 65536 / threads: setmaxnreg is honoured */
    else
        f->maxnreg = 168;
    ptx_module_extern_shared(m, "attn_smem", 128);
    int NI = g->NI, NO = g->NO, C = g->cons;
    ptx_reg none = {0};

    /* parameters, in pt_launch order */
    l->nargs = 0;
    l->ntmaps = 0;
    ptx_reg po = attn_param_ptr(g->f, l, "o", (pt_arg){PT_ARG_OUTPUT, pp->t.o, 0, 0});
    ptx_reg plse = pp->lse ? attn_param_ptr(g->f, l, "lse", (pt_arg){PT_ARG_OUTPUT, pp->t.lse, 0, 0}) : none;
    /* packed: one box is bm / group positions x the group's heads */
    pt_tmap mq = qkv_map(g, 0, (int)(g->bm / g->grp), (int)g->grp), mk = qkv_map(g, 1, g->bn, 1),
            mv = qkv_map(g, 2, g->bn, 1);
    ptx_reg tq = kit_tma_param(f, l, "tmq", &mq);
    ptx_reg tk = none, tv = none, kpool = none, vpool = none; /* gather: the pools by pointer, no K/V maps */
    if (g->gather) {
        kpool = attn_param_ptr(g->f, l, "k", (pt_arg){PT_ARG_INPUT, pp->t.k, 0, 0});
        vpool = attn_param_ptr(g->f, l, "v", (pt_arg){PT_ARG_INPUT, pp->t.v, 0, 0});
    } else {
        tk = kit_tma_param(f, l, "tmk", &mk);
        tv = kit_tma_param(f, l, "tmv", &mv);
    }
    bool paged = pp->page > 0;
    ptx_reg pbt = paged ? attn_param_ptr(g->f, l, "block_table", (pt_arg){PT_ARG_INPUT, pp->t.block_table, 0, 0}) : none;
    ptx_reg pcq = none, pck = none, psu = none;
    if (pp->varlen) {
        pcq = attn_param_ptr(g->f, l, "cu_seqlens_q", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_q, 0, 0});
        pck = attn_param_ptr(g->f, l, "cu_seqlens_k", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_k, 0, 0});
    }
    if (pp->seqused)
        psu = attn_param_ptr(g->f, l, "seqused_k", (pt_arg){PT_ARG_INPUT, pp->t.seqused_k, 0, 0});
    ptx_reg sq = none, sk = none;
    if (!pp->varlen) {
        sq = attn_param_u32(g->f, l, "seqlen_q", (uint64_t)pp->Sq);
        if (!pp->seqused)
            sk = attn_param_u32(g->f, l, "seqlen_k", (uint64_t)pp->Sk);
    }

    /* the CTA: m block, head, sequence; lengths; visible key blocks */
    ptx_reg tid = sreg(g, PTX_S_TID_X);
    ptx_reg lane = iop(g, PTX_OP_AND, ptx_r(tid), ptx_imm(31));
    ptx_reg mb = sreg(g, PTX_S_CTAID_X), h = sreg(g, PTX_S_CTAID_Y), b = sreg(g, PTX_S_CTAID_Z);
    int64_t nmb = (pp->Sq * g->grp + g->bm - 1) / g->bm;
    if (pp->causal || pp->wr >= 0) /* the longest rows first */
        mb = iop(g, PTX_OP_SUB, ptx_imm(nmb - 1), ptx_r(mb));
    ptx_reg m0 = iop(g, PTX_OP_MUL, ptx_r(mb), ptx_imm(g->bm)); /* packed: the first packed row */
    ptx_reg hk = h;
    if (g->pack) /* the CTA's head index is the kv head's; h: the group's first query head */
        h = iop(g, PTX_OP_MUL, ptx_r(hk), ptx_imm(g->grp));
    else if (pp->group > 1)
        hk = iop(g, PTX_OP_DIV, ptx_r(h), ptx_imm(pp->group));
    ptx_reg tq0 = none, tk0 = none;
    if (pp->varlen) {
        ptx_reg b1 = iop(g, PTX_OP_ADD, ptx_r(b), ptx_imm(1));
        tq0 = ld_s32(g, pcq, b);
        sq = iop(g, PTX_OP_SUB, ptx_r(ld_s32(g, pcq, b1)), ptx_r(tq0));
        tk0 = ld_s32(g, pck, b);
        sk = iop(g, PTX_OP_SUB, ptx_r(ld_s32(g, pck, b1)), ptx_r(tk0));
    }
    if (pp->seqused)
        sk = ld_s32(g, psu, b);
    int done = ptx_label_new(f);
    /* the query positions of the tile's first and last rows (packed: row / group) */
    ptx_reg p0 = m0, plast = iop(g, PTX_OP_ADD, ptx_r(m0), ptx_imm(g->bm - 1));
    if (g->pack) {
        p0 = iop(g, PTX_OP_DIV, ptx_r(m0), ptx_imm(g->grp));
        plast = iop(g, PTX_OP_DIV, ptx_r(plast), ptx_imm(g->grp));
    }
    bra(g, done, setp(g, PTX_M_GE, ptx_r(p0), ptx_r(sq)), false);
    kit_attn_blocks kb = kit_attn_block_range(f, p0, plast, sq, sk, pp->wl, pp->wr, g->bn);

    /* shared memory and the three rings */
    ptx_reg raw = r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(raw), ptx_sym("attn_smem"));
    ptx_reg base = iop(g, PTX_OP_AND, ptx_r(iop(g, PTX_OP_ADD, ptx_r(raw), ptx_imm(1023))), ptx_imm(-1024));
    ptx_reg sK = iop(g, PTX_OP_ADD, ptx_r(base), ptx_imm(g->qbytes));
    ptx_reg sV = iop(g, PTX_OP_ADD, ptx_r(sK), ptx_imm(g->stages * g->kbytes));
    ptx_reg bq = iop(g, PTX_OP_ADD, ptx_r(base), ptx_imm(g->region));
    ptx_reg bk = iop(g, PTX_OP_ADD, ptx_r(bq), ptx_imm(16));
    ptx_reg bv = iop(g, PTX_OP_ADD, ptx_r(bk), ptx_imm(16 * g->stages));
    kit_pipe pq, pk, pv, pvt = {0};
    if (kit_pipe_init_mbar(f, &pq, 1, g->qbytes, base, bq, 1) ||
        kit_pipe_init_mbar(f, &pk, g->stages, g->kbytes, sK, bk, 4 * C) ||
        kit_pipe_init_mbar(f, &pv, g->stages, g->vbytes, sV, bv, 4 * C))
        return pt_errf(e, PT_EINTERNAL, "attention fa3: bad mbarrier ring");
    ptx_reg t0 = setp(g, PTX_M_EQ, ptx_r(tid), ptx_imm(0));
    kit_pipe_mbar_setup(&pq, t0);
    ring_setup(g, &pk, t0);
    ring_setup(g, &pv, t0);
    if (g->fp8) { /* V^T after V's ring; its barriers after V's (full: count 1, the empty ones unused) */
        ptx_reg sVT = iop(g, PTX_OP_ADD, ptx_r(sV), ptx_imm(g->stages * g->vbytes));
        ptx_reg bvt = iop(g, PTX_OP_ADD, ptx_r(bv), ptx_imm(16 * g->stages));
        if (kit_pipe_init_mbar(f, &pvt, g->stages, g->vtbytes, sVT, bvt, 1))
            return pt_errf(e, PT_EINTERNAL, "attention fa3: bad V^T ring");
        kit_pipe_mbar_setup(&pvt, t0);
    }
    ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    ptx_reg nb0 = setp(g, PTX_M_LE, ptx_r(kb.nblk), ptx_imm(0));
    ptx_reg n0 = r32(g); /* first key of the current block: the last visible block first */
    ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U32T, ptx_r(n0), ptx_r(iop(g, PTX_OP_SUB, ptx_r(kb.n_hi), ptx_imm(1))),
             ptx_imm(g->bn));
    ptx_reg j = r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(j), ptx_imm(0));

    /* warpgroup 0 produces, the others consume */
    int cons = ptx_label_new(f);
    ptx_reg wg = iop(g, PTX_OP_SHR, ptx_r(tid), ptx_imm(7));
    bra(g, cons, setp(g, PTX_M_NE, ptx_r(wg), ptx_imm(0)), false);
    {
        ptx_emit(f, PTX_OP_SETMAXNREG, M3(PTX_M_DEC, PTX_M_SYNC, PTX_M_ALIGNED), U32T, ptx_imm(prod_regs[C]));
        ptx_reg warp = iop(g, PTX_OP_SHR, ptx_r(tid), ptx_imm(5));
        ptx_reg btab = paged ? addr(g, pbt, b, pp->pages_per_seq * 4) : none; /* this sequence's row */
        int conv = ptx_label_new(f), gkv = ptx_label_new(f); /* gather: all 128 threads load K and V */
        bra(g, g->fp8 && !g->gather ? conv : g->gather ? gkv : done, setp(g, PTX_M_NE, ptx_r(warp), ptx_imm(0)),
            false);
        ptx_reg lead = ptx_reg_new(f, PTX_T_PRED);
        ptx_emit(f, PTX_OP_ELECT, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_pair((ptx_reg){0}, lead), ptx_hex(0xffffffff));
        bra(g, g->gather ? gkv : done, lead, true);
        bra(g, done, nb0, false);
        kit_tma_prefetch(f, tq);
        if (!g->gather) {
            kit_tma_prefetch(f, tk);
            kit_tma_prefetch(f, tv);
        }
        ptx_reg bz = pp->varlen ? none : b;
        ptx_reg qtok = pp->varlen ? iop(g, PTX_OP_ADD, ptx_r(tq0), ptx_r(p0)) : p0;
        ptx_reg st = kit_pipe_acquire(&pq);
        kit_pipe_arrive_tx(&pq, g->qbytes);
        tile_load(g, tq, g->qspan, st, g->qsub, pp->d, qtok, h, bz, kit_pipe_full(&pq), false);
        kit_pipe_commit(&pq);
        if (g->gather) {
            ptx_label_place(f, gkv);
            bra(g, done, nb0, false);
        }
        if (g->gather && g->fp8) { /* all 128 gather, warps 1..3 transpose V too */
            gather_transpose_loop(g, &pk, &pv, &pvt, base, kpool, vpool, n0, kb.nblk, hk, btab, sk, tid);
            bra(g, done, none, false);
        } else {
            int top = ptx_label_new(f);
            ptx_label_place(f, top);
            ptx_pragma_nounroll(f);
            ptx_reg ktok = pp->varlen ? iop(g, PTX_OP_ADD, ptx_r(tk0), ptx_r(n0)) : n0, kb_ = bz;
            if (paged && g->pr == g->bn) { /* the block's page from the block table, its first row in the page */
                ktok = iop(g, PTX_OP_AND, ptx_r(n0), ptx_imm(pp->page - 1));
                ptx_reg pg = iop(g, PTX_OP_SHR, ptx_r(n0), ptx_imm(log2i(pp->page)));
                kb_ = ld_s32(g, btab, pg);
            }
            if (g->gather) { /* pages under FA3_TMA_PAGE keys: cp.async row by row */
                gather_kv_both(g, &pk, &pv, kpool, vpool, n0, hk, btab, sk, tid);
            } else if (g->pr < g->bn) { /* pages under bn keys: a TMA box a page */
                st = kit_pipe_acquire(&pk);
                kit_pipe_arrive_tx(&pk, g->kbytes);
                paged_load(g, tk, g->kspan, st, g->ksub, pp->d, n0, hk, btab, sk, kit_pipe_full(&pk));
                kit_pipe_commit(&pk);
                st = kit_pipe_acquire(&pv);
                kit_pipe_arrive_tx(&pv, g->vbytes);
                paged_load(g, tv, g->vspan, st, g->vbox, pp->dv, n0, hk, btab, sk, kit_pipe_full(&pv));
                kit_pipe_commit(&pv);
            } else {
                st = kit_pipe_acquire(&pk);
                kit_pipe_arrive_tx(&pk, g->kbytes);
                tile_load(g, tk, g->kspan, st, g->ksub, pp->d, ktok, hk, kb_, kit_pipe_full(&pk), paged);
                kit_pipe_commit(&pk);
                st = kit_pipe_acquire(&pv);
                kit_pipe_arrive_tx(&pv, g->vbytes);
                tile_load(g, tv, g->vspan, st, g->vbox, pp->dv, ktok, hk, kb_, kit_pipe_full(&pv), paged);
                kit_pipe_commit(&pv);
            }
            ptx_emit(f, PTX_OP_SUB, NOM, S32T, ptx_r(n0), ptx_r(n0), ptx_imm(g->bn));
            ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(j), ptx_r(j), ptx_imm(1));
            bra(g, top, setp(g, PTX_M_LT, ptx_r(j), ptx_r(kb.nblk)), false);
            bra(g, done, none, false);
        }
        if (g->fp8 && !g->gather) { /* warps 1..3: V -> V^T */
            ptx_label_place(f, conv);
            bra(g, done, nb0, false);
            kit_pipe pw = pv; /* their own consumer end of V's ring */
            v_transpose_loop(g, &pw, &pvt, iop(g, PTX_OP_SUB, ptx_r(tid), ptx_imm(32)), n0, j, kb.nblk, sk);
            bra(g, done, none, false);
        }
    }

    /* ---- consumers ---- */
    ptx_label_place(f, cons);
    ptx_emit(f, PTX_OP_SETMAXNREG, M3(PTX_M_INC, PTX_M_SYNC, PTX_M_ALIGNED), U32T, ptx_imm(cons_regs[C]));
    ptx_reg ct = iop(g, PTX_OP_SUB, ptx_r(tid), ptx_imm(128));
    ptx_reg cwg = iop(g, PTX_OP_SHR, ptx_r(ct), ptx_imm(7));
    ptx_reg wrow = iop(g, PTX_OP_MUL, ptx_r(iop(g, PTX_OP_SHR, ptx_r(ct), ptx_imm(5))), ptx_imm(16));
    pk.arrive_pred = pv.arrive_pred = setp(g, PTX_M_EQ, ptx_r(lane), ptx_imm(0));
    int no = NO * 4, ns = NI * 4, nr = 2;
    pt_arena *ar = m->arena;
    ptx_reg *oacc = pt_arena_alloc(ar, (size_t)no * sizeof(ptx_reg));
    ptx_reg *sacc = pt_arena_alloc(ar, (size_t)ns * sizeof(ptx_reg));
    ptx_reg *preg = pt_arena_alloc(ar, (size_t)ns * sizeof(ptx_reg));
    for (int i = 0; i < no; i++) {
        oacc[i] = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_MOV, NOM, F32T, ptx_r(oacc[i]), ptx_f32(0.0f));
    }
    for (int i = 0; i < ns; i++)
        sacc[i] = ptx_reg_new(f, PTX_T_F32);
    kit_softmax sm[2];
    for (int r = 0; r < nr; r++) {
        sm[r] = kit_softmax_new(f, g->k);
        sm[r].off = g->fp8 ? FA3_FP8_OFF : 0;
    }
    ptx_reg zero = kit_reg(f, ptx_imm(0));
    kit_frag sf = kit_frag_mma_c(f, g->mma, 1, NI, sacc, wrow, zero, lane);
    int epi = ptx_label_new(f);
    bra(g, epi, nb0, false);
    /* the mask's terms (gen/kit/attn.h kit_attn_mask) */
    kit_attn_mask mask = {.wl = pp->wl, .wr = pp->wr};
    ptx_reg rdiag[2];
    mask.per_row = g->pack;
    if (!g->pack) {
        mask.rowdiag = iop(g, PTX_OP_SUB, ptx_r(iop(g, PTX_OP_ADD, ptx_r(m0), ptx_r(sf.row_base))),
                           ptx_r(sf.col_base));
        mask.rowdiag = iop(g, PTX_OP_ADD, ptx_r(mask.rowdiag), ptx_r(kb.off));
    } else if (pp->wr >= 0 || pp->wl >= 0) { /* each row its own position: (m0 + row) / group */
        for (int r = 0; r < nr; r++) {
            ptx_reg pr = iop(g, PTX_OP_ADD, ptx_r(m0), ptx_r(iop(g, PTX_OP_ADD, ptx_r(sf.row_base),
                                                                 ptx_imm(kit_attn_row_off(r)))));
            rdiag[r] = iop(g, PTX_OP_SUB, ptx_r(iop(g, PTX_OP_DIV, ptx_r(pr), ptx_imm(g->grp))), ptx_r(sf.col_base));
            rdiag[r] = iop(g, PTX_OP_ADD, ptx_r(rdiag[r]), ptx_r(kb.off));
        }
        mask.rdiag = rdiag;
    }
    mask.skc = iop(g, PTX_OP_SUB, ptx_r(sk), ptx_r(sf.col_base));
    if (pp->wr >= 0)
        mask.rlim = iop(g, PTX_OP_ADD, ptx_r(iop(g, PTX_OP_ADD, ptx_r(p0), ptx_r(kb.off))),
                        ptx_imm(pp->wr + 1 - g->bn));
    if (pp->wl >= 0)
        mask.llim = iop(g, PTX_OP_SUB, ptx_r(iop(g, PTX_OP_ADD, ptx_r(plast), ptx_r(kb.off))), ptx_imm(pp->wl));
    mask.skbn = iop(g, PTX_OP_SUB, ptx_r(sk), ptx_imm(g->bn));
    ptx_reg qaddr = iop(g, PTX_OP_ADD, ptx_r(base), ptx_r(iop(g, PTX_OP_MUL, ptx_r(cwg), ptx_imm(64 * g->qspan))));
    kit_pipe_wait(&pq, 0);
    cons_loop cl = {.g = g, .pk = &pk, .pv = &pv, .pvt = &pvt, .sm = sm, .mask = &mask, .sf = &sf, .sacc = sacc, .preg = preg,
                    .oacc = oacc, .qaddr = qaddr, .n0 = n0, .j = j, .nblk = kb.nblk, .sk = sk, .ct = ct,
                    .cwg = cwg};
    if (g->overlap)
        loop_overlap(&cl);
    else
        loop_plain(&cl);

    /* ---- epilogue ---- */
    ptx_label_place(f, epi);
    ptx_reg lrow[2], inv[2];
    kit_attn_finalize(f, sm, nr, lrow, inv);
    for (int r = 0; g->fp8 && pp->vscale != 1.0f && r < nr; r++) { /* e4m3: o = descale_v sum p v */
        ptx_reg w = ptx_reg_new(f, PTX_T_F32);
        ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(w), ptx_r(inv[r]), ptx_f32(pp->vscale));
        inv[r] = w;
    }
    int oes = pp->oes; /* o's element (e4m3: bf16) */
    kit_frag of = kit_frag_mma_c(f, g->mma, 1, NO, oacc, wrow, zero, lane);
    /* each of the thread's two rows: its o row's address, its lse element's, whether it is stored */
    ptx_reg orow = iop(g, PTX_OP_ADD, ptx_r(m0), ptx_r(of.row_base)); /* the thread's row 0 (packed) */
    ptx_reg ob[2], lb[2], ok[2];
    kit_io io = {.align = 2 * oes};
    for (int r = 0; r < nr; r++) {
        ptx_reg pos = iop(g, PTX_OP_ADD, ptx_r(orow), ptx_imm(kit_attn_row_off(r))), hd = h;
        if (g->pack) {
            hd = iop(g, PTX_OP_ADD, ptx_r(h), ptx_r(iop(g, PTX_OP_REM, ptx_r(pos), ptx_imm(g->grp))));
            pos = iop(g, PTX_OP_DIV, ptx_r(pos), ptx_imm(g->grp));
        }
        ok[r] = setp(g, PTX_M_LT, ptx_r(pos), ptx_r(sq));
        ptx_reg a = pp->varlen ? addr(g, po, iop(g, PTX_OP_ADD, ptx_r(tq0), ptx_r(pos)), pp->so[0] * oes)
                               : addr(g, addr(g, po, pos, pp->so[0] * oes), b, pp->so[2] * oes);
        ob[r] = addr(g, addr(g, a, hd, pp->so[1] * oes), of.col_base, oes);
        if (pp->lse) /* lse [B, Hq, Sq] (varlen: b Hq Sq + h Sq + i as well) */
            lb[r] = addr(g, addr(g, addr(g, plse, b, pp->Hq * pp->Sq * 4), hd, pp->Sq * 4), pos, 4);
    }
    for (int r = 0; r < nr; r++) {
        io.guard = ok[r];
        for (int bb = 0; bb < NO; bb++) {
            ptx_opd v[2];
            for (int q = 0; q < 2; q++) {
                ptx_reg o = ptx_reg_new(f, PTX_T_F32);
                ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(o), ptx_r(oacc[kit_attn_creg(NO, r, bb, q)]), ptx_r(inv[r]));
                v[q] = ptx_r(o);
            }
            kit_store(f, &io, pp->odt, ob[r], (int64_t)of.col[kit_attn_creg(NO, r, bb, 0)] * oes, 2, v);
        }
    }
    if (pp->lse) { /* lane t = 0 of each row */
        ptx_reg q0 = setp(g, PTX_M_EQ, ptx_r(iop(g, PTX_OP_AND, ptx_r(lane), ptx_imm(3))), ptx_imm(0));
        for (int r = 0; r < nr; r++) {
            ptx_reg v = kit_attn_lse(f, &sm[r], lrow[r], g->k);
            ptx_reg w = ptx_reg_new(f, PTX_T_PRED);
            ptx_emit(f, PTX_OP_AND, NOM, PREDT, ptx_r(w), ptx_r(ok[r]), ptx_r(q0));
            ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), F32T, ptx_addr(lb[r], 0), ptx_r(v)), w, false);
        }
    }
    ptx_label_place(f, done);
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);

    l->grid[0] = (unsigned)nmb;
    l->grid[1] = (unsigned)(g->pack ? pp->Hkv : pp->Hq);
    l->grid[2] = (unsigned)pp->B;
    l->block[0] = (unsigned)g->threads;
    l->block[1] = l->block[2] = 1;
    l->smem = (size_t)g->smem;
    l->smem_optin = g->smem > 48 * 1024;
    l->align = 16;
    l->entry = f->name;
    if (m->err.code)
        return pt_errf(e, m->err.code, "%s", m->err.msg);
    return PT_OK;
}
