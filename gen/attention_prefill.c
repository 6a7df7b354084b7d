/* The attention prefill kernel, FA2-style on the kit (impl=fa2; see
 * gen/attention_int.h and ../shared/design/attention_hopper.md 1.7).
 *
 * Grid (m blocks, Hq, B) (raster 1 swaps x and y); one CTA of `warps` warps
 * per bm query rows of one (sequence, query head); warp w owns rows
 * [w bm/warps, (w+1) bm/warps), MI = bm/warps/16 m16 atoms. The kv head is
 * h / group (GQA, MQA).
 *
 *   prologue  cp.async Q -> sQ with K_0 (one group), then V_i, K_{i+1} for
 *             i < stages - 1                    [zero-filled past Sq_b / Sk_b]
 *   block j   (key blocks from the last visible one down: the masked ones at
 *             the diagonal come first, then the full ones)
 *     wait K_j, bar.sync             K_j landed; every warp is done with V_{j-1}
 *     cp.async V_{j+s-1}; commit
 *     S = Q K_j^T                    ldmatrix (Q, K non-trans), mma.sync m16n8k16
 *                                    (k step 0 from a zero accumulator)
 *     mask S (-inf) only when the block meets the causal / window diagonal
 *       or the end of the keys (a uniform branch around it otherwise)
 *     online softmax of S's rows (kit_softmax_update_fma: quad max, each
 *       exponential one fma with the scale times log2 e folded in plus one
 *       ex2, the -inf rules), O *= alpha
 *     wait V_j, bar.sync             V_j landed; every warp is done with K_j
 *                                    (after the softmax: V's fragments are
 *                                    not hoisted into it, fewer live registers)
 *     cp.async K_{j+s}; commit       (overlaps P V and the next block's S)
 *     P = S repacked C -> A (kit_frag_to_a, no shuffles)
 *     O += P V_j                     ldmatrix.trans on V
 *   epilogue  l quad-summed; O *= 1/l (0 when l = 0: a row without a visible
 *             key gives o = 0, lse = -inf); O staged as the dtype in shared
 *             memory, stored 16 bytes a lane; lse.
 *
 * Key blocks nobody sees are never loaded: blocks [n_lo, n_hi) come from the
 * mask (n_hi = ceil(min(Sk_b, last row + off + wr + 1) / bn), n_lo = (first
 * row + off - wl) / bn); a CTA with none writes o = 0, lse = -inf. Sequence
 * lengths are run-time parameters (PT_ARG_U32) or come from cu_seqlens /
 * seqused_k; head counts, head dims, masks, scale and softcap are
 * immediates. Paged K/V (block_table): the K and V tiles are gathered from
 * the pools through the kit's paged copy (kit_g2s_paged_*, shared with the
 * decode kernel); bn is a power of two then. Softcap: x = tanh(s scale /
 * c) and the softmax exponent scale is c (c tanh(...) - c m = c (x - m)).
 * pack_gqa: one CTA per (m block, kv head, sequence); tile row r is packed
 * row m0 + r, query position (m0 + r) / group of query head hk group +
 * (m0 + r) % group (Q's pieces each compute their source, q_copy_packed;
 * the masks take each row's own position; o and lse rows likewise), so the
 * group's heads share every K/V block. Epilogue: O / l is staged as the
 * dtype through shared memory (over Q, K and V, after a barrier) and
 * stored 16 bytes a lane, bank-conflict free both ways. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/attention_combine.h"
#include "gen/attention_int.h"
#include "ptx/target.h"

/* ---- geometry ---- */

typedef struct fa2 {
    const pt_prepared *pp;
    ptx_fn *f;
    const kit_atom *at;
    int bm, bn, warps, threads, stages, raster;
    bool qregs;
    bool pack;              /* pack_gqa: tile rows are (query position, head) pairs of one kv head */
    int64_t grp;            /* query heads per tile row position: group with pack, else 1 */
    int MI, NI, NO, KD, KN; /* m atoms per warp, S n8 atoms, O n8 atoms, d / 16, bn / 16 */
    int es;
    kit_layout tq, tk, tv;  /* shared tiles */
    kit_layout to;          /* O's staging tile (bm x dv, over the others after the loop) */
    int64_t qbytes, kbytes, vbytes, obytes, smem;
    float k;                /* softmax exponent scale (scale, or softcap c) */
    /* run time */
    ptx_reg tid, lane, warp, wrow, smem_base;
    ptx_reg b, h, hk, m0;          /* sequence, query head, kv head, first row */
    ptx_reg sq, sk;                /* this sequence's lengths (s32) */
    ptx_reg tq0, tk0;              /* first token of the sequence in q/o and k/v (varlen) */
} fa2;

static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

static kit_layout tile(int rows, int64_t row_bytes)
{
    return kit_smem_tile(rows, (int)row_bytes, pow2(row_bytes) ? 0 : 16);
}

static int geometry(const pt_prepared *pp, const pt_target *t, const pt_config *c, fa2 *g, pt_err *e)
{
    memset(g, 0, sizeof *g);
    g->pp = pp;
    int64_t impl = pt_config_get(c, "impl", ATTN_FA2);
    if (impl != ATTN_FA2)
        return pt_errf(e, PT_EINVAL, "impl=%lld: the prefill kernel is impl=%d (fa2)", (long long)impl, ATTN_FA2);
    g->bm = (int)pt_config_get(c, "bm", 128);
    g->bn = (int)pt_config_get(c, "bn", 64);
    g->warps = (int)pt_config_get(c, "warps", 4);
    g->qregs = pt_config_get(c, "q_in_regs", 0) != 0;
    g->stages = (int)pt_config_get(c, "kv_stages", 1);
    g->raster = (int)pt_config_get(c, "raster", 0);
    int64_t pack = pt_config_get(c, "pack_gqa", 0);
    g->at = kit_atom_get(pp->dt);
    if (!g->at || g->at->kind != KIT_ATOM_MMA_SYNC || g->at->k != 16 || g->at->es != 2)
        return pt_errf(e, PT_EUNSUPPORTED, "attention prefill: dtype %s (f16 or bf16)",
                       pt_dtype_get(pp->dt)->name);
    if (t->sm < 80)
        return pt_errf(e, PT_EUNSUPPORTED, "attention prefill: sm_%d (sm_80 or newer)", t->sm);
    if (g->bm != 64 && g->bm != 128)
        return pt_errf(e, PT_EINVAL, "bm=%d: 64 or 128", g->bm);
    if (g->bn < 16 || g->bn > 128 || g->bn % 16)
        return pt_errf(e, PT_EINVAL, "bn=%d: a multiple of 16 up to 128", g->bn);
    if (g->warps != 4 && g->warps != 8)
        return pt_errf(e, PT_EINVAL, "warps=%d: 4 or 8", g->warps);
    if ((g->bm / g->warps) % 16)
        return pt_errf(e, PT_EINVAL, "bm=%d with warps=%d: %d rows per warp (a multiple of 16)", g->bm, g->warps,
                       g->bm / g->warps);
    if (g->stages < 1 || g->stages > 2)
        return pt_errf(e, PT_EINVAL, "kv_stages=%d: 1 or 2", g->stages);
    if (g->raster < 0 || g->raster > 1)
        return pt_errf(e, PT_EINVAL, "raster=%d: 0 (head-major) or 1 (m-major)", g->raster);
    if (pack < 0 || pack > 1)
        return pt_errf(e, PT_EINVAL, "pack_gqa=%lld: 0 or 1", (long long)pack);
    if (pack && pp->group == 1)
        return pt_errf(e, PT_EINVAL, "pack_gqa=1: heads_q=%lld equals heads_kv (no query heads to pack)",
                       (long long)pp->Hq);
    g->pack = pack != 0;
    g->grp = g->pack ? pp->group : 1;
    if (pp->d % 16 || pp->dv % 16 || pp->d > 256 || pp->dv > 256)
        return pt_errf(e, PT_EUNSUPPORTED, "attention prefill: head_dim=%lld head_dim_v=%lld (multiples of 16 up to 256)",
                       (long long)pp->d, (long long)pp->dv);
    if (!(pp->scale > 0) || (pp->softcap != 0 && !(pp->softcap > 0)))
        return pt_errf(e, PT_EUNSUPPORTED, "attention prefill: softmax_scale %g softcap %g (positive)",
                       (double)pp->scale, (double)pp->softcap);
    if (pp->page && !pow2(g->bn))
        return pt_errf(e, PT_EINVAL, "bn=%d with paged K/V: a power of two (the tile's rows come from pages)", g->bn);
    if (pp->page && (!pow2(pp->d) || !pow2(pp->dv)))
        return pt_errf(e, PT_EUNSUPPORTED,
                       "attention prefill: head_dim=%lld head_dim_v=%lld with paged K/V (powers of two: the paged "
                       "gather cuts power-of-two rows)", (long long)pp->d, (long long)pp->dv);
    g->threads = 32 * g->warps;
    g->es = g->at->es;
    g->MI = g->bm / g->warps / 16;
    g->NI = g->bn / 8;
    g->NO = (int)pp->dv / 8;
    g->KD = (int)pp->d / 16;
    g->KN = g->bn / 16;
    g->tq = tile(g->bm, pp->d * g->es);
    g->tk = tile(g->bn, pp->d * g->es);
    g->tv = tile(g->bn, pp->dv * g->es);
    g->to = tile(g->bm, pp->dv * g->es);
    g->qbytes = (g->tq.span + 127) / 128 * 128;
    g->kbytes = (g->tk.span + 127) / 128 * 128;
    g->vbytes = (g->tv.span + 127) / 128 * 128;
    g->obytes = (g->to.span + 127) / 128 * 128;
    g->smem = g->qbytes + g->stages * (g->kbytes + g->vbytes);
    if (g->obytes > g->smem) /* O is staged over Q, K and V once the loop is done */
        g->smem = g->obytes;
    g->k = pp->softcap > 0 ? pp->softcap : pp->scale;
    return PT_OK;
}

/* ---- space, defaults, check ---- */

/* Whether pack_gqa=1 is in the space: query heads share a kv head and
 * some tile of the unpacked kernel is partly empty (a length that is not a
 * multiple of 128 rows, or varlen lengths), where packing fills the rows
 * with the other heads of the group and loads each K/V block once for
 * them all. */
static bool pack_useful(const pt_prepared *pp) { return pp->group > 1 && (pp->varlen || pp->Sq % 128 != 0); }

int attn_prefill_space(const pt_prepared *pp, const pt_target *t, pt_space *out)
{
    (void)t;
    memset(out, 0, sizeof *out);
    pt_param_space ps[] = {
        {"impl", "kernel kind (0: fa2, mma.sync prefill)", 1, {ATTN_FA2}},
        {"bm", "query rows per CTA", 2, {64, 128}},
        {"bn", "keys per K/V block (PV's k: a multiple of 16)", 6, {32, 48, 64, 96, 112, 128}},
        {"warps", "warps per CTA (each owns bm/warps query rows)", 2, {4, 8}},
        {"q_in_regs", "Q fragments kept in registers (loaded from shared memory once)", 2, {0, 1}},
        {"kv_stages", "K and V buffers each (cp.async ring depth)", 2, {1, 2}},
        {"raster", "CTA order: 0 m blocks of a head together (K/V stay in L2), 1 heads of an m block together",
         2, {0, 1}},
        {"pack_gqa", "tile rows are (query position, head) pairs of the query heads of one kv head (GQA, MQA)",
         pack_useful(pp) ? 2 : 1, {0, 1}},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        out->p[out->nparams++] = ps[i];
    return PT_OK;
}

/* Live f32 values per thread: S (bn/2 per m atom) and O (dv/2); Q's
 * fragments with q_in_regs (d/4 per m atom). The design's budget (1.6) is
 * 192; measured with the compile gate (nvJitLink, ptxas 13.0), the kernel's
 * addresses, copies and softmax temporaries leave room for 128 S + O
 * values (160 with Q): 2 m atoms x (bn 64 + dv 128) = 192 spilled 112 bytes
 * and 2 x (32 + 128) = 160 spilled 80 on sm_80 to sm_90, 2 x (64 + 64) and
 * 1 x (128 + 128) assemble clean. Head dims over 128 keep O alone at
 * dv/2 per m atom, so they get one m atom and bn <= 64 (dv 256: S 32 + O
 * 128; nvJitLink spills some 70 bytes there, ptxas none). */
static int64_t live_regs(const fa2 *g, int64_t *limit)
{
    int64_t acc = (int64_t)g->MI * (g->bn + g->pp->dv) / 2, r = acc;
    *limit = 128;
    if (g->pp->dv > 128 && g->MI == 1)
        *limit = g->pp->dv / 2 + 32;
    if (g->qregs) {
        r += (int64_t)g->MI * g->pp->d / 4;
        *limit += 32;
    }
    return r;
}

int attn_prefill_check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    fa2 g;
    int rc = geometry(pp, t, c, &g, e);
    if (rc)
        return rc;
    uint32_t slim = pt_target_smem_limit(t->sm);
    if (g.smem > (int64_t)slim)
        return pt_errf(e, PT_EINVAL, "shared memory %lld bytes (Q %lld + %d x (K %lld + V %lld)) over sm_%d's %u",
                       (long long)g.smem, (long long)g.qbytes, g.stages, (long long)g.kbytes,
                       (long long)g.vbytes, t->sm, slim);
    if (g.pack && pp->Sq * pp->group > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "pack_gqa=1: seqlen_q x group = %lld packed rows (at most 2^31-1)",
                       (long long)(pp->Sq * pp->group));
    int64_t nmb = (pp->Sq * g.grp + g.bm - 1) / g.bm;
    if (g.raster && nmb > 65535)
        return pt_errf(e, PT_EINVAL, "raster=1 with %lld m blocks: grid y holds at most 65535", (long long)nmb);
    int64_t lim, r = live_regs(&g, &lim);
    if (r > lim)
        return pt_errf(e, PT_EINVAL, "%lld live values per thread (S %d + O %lld%s) over %lld (registers would spill)",
                       (long long)r, g.MI * g.bn / 2, (long long)(g.MI * pp->dv / 2), g.qregs ? " + Q" : "",
                       (long long)lim);
    return PT_OK;
}

void attn_prefill_defaults(const pt_prepared *pp, const pt_target *t, pt_config *out)
{
    memset(out, 0, sizeof *out);
    pt_space s;
    attn_prefill_space(pp, t, &s);
    for (int i = 0; i < s.nparams; i++)
        pt_config_set(out, s.p[i].name, s.p[i].values[0]);
    /* FA2's tile table (flash_fwd_launch_template.h) within this kernel's
     * register budget (live_regs): hd <= 64 128 x 64 on 4 warps (two m atoms
     * per warp), hd128 128 x 64 on 8 warps (one), larger 128 x 64 on 8 */
    int64_t d = pp->d > pp->dv ? pp->d : pp->dv;
    int bm = 128, bn = 64, warps = d <= 64 ? 4 : 8;
    if (pp->Sq <= 64) {
        bm = 64;
        warps = 4;
    }
    pt_config_set(out, "bm", bm);
    pt_config_set(out, "bn", bn);
    pt_config_set(out, "warps", warps);
    pt_config_set(out, "q_in_regs", 0);
    pt_config_set(out, "kv_stages", 1);
    pt_config_set(out, "raster", 0);
    /* pack the group's heads when that fills the tiles better (flash-attention
     * 3's rule: the unpacked rows' efficiency under 0.9 of the packed one's) */
    int pack = 0;
    if (pack_useful(pp)) {
        double rows = (double)pp->Sq, prow = rows * (double)pp->group;
        double eff = rows / (ceil(rows / bm) * bm), peff = prow / (ceil(prow / bm) * bm);
        pack = pp->varlen || eff < 0.9 * peff;
    }
    pt_config_set(out, "pack_gqa", pack);
    pt_space_default(&s, attn_prefill_check, pp, t, out);
}

/* ---- emission helpers ---- */

static ptx_reg r32(fa2 *g) { return ptx_reg_new(g->f, PTX_T_B32); }
static ptx_reg pred(fa2 *g) { return ptx_reg_new(g->f, PTX_T_PRED); }

static ptx_reg sreg(fa2 *g, ptx_sreg s)
{
    ptx_reg r = r32(g);
    ptx_emit(g->f, PTX_OP_MOV, NOM, U32T, ptx_r(r), ptx_sr(s));
    return r;
}

static ptx_reg iop(fa2 *g, ptx_op op, ptx_opd a, ptx_opd b) { return kit_reg(g->f, kit_iop(g->f, op, a, b)); }

static ptx_reg setp(fa2 *g, ptx_mod cmp, ptx_opd a, ptx_opd b)
{
    ptx_reg p = pred(g);
    ptx_emit(g->f, PTX_OP_SETP, M1(cmp), S32T, ptx_r(p), a, b);
    return p;
}

static void bra(fa2 *g, int label, ptx_reg p, bool neg)
{
    ptx_ins *in = ptx_emit(g->f, PTX_OP_BRA, M1(PTX_M_UNI), PTX_NOTYPES, ptx_lbl(label));
    if (p.id)
        ptx_guard(in, p, neg);
}

static int log2i(int64_t v)
{
    int sh = 0;
    while ((INT64_C(1) << sh) < v)
        sh++;
    return sh;
}

/* x / k and x % k of a u32 register by an immediate k >= 1. */
static ptx_reg udiv(fa2 *g, ptx_reg x, int64_t k)
{
    if (k == 1)
        return x;
    return pow2(k) ? iop(g, PTX_OP_SHR, ptx_r(x), ptx_imm(log2i(k))) : iop(g, PTX_OP_DIV, ptx_r(x), ptx_imm(k));
}

static ptx_reg umod(fa2 *g, ptx_reg x, int64_t k)
{
    if (k == 1)
        return kit_reg(g->f, ptx_imm(0));
    return pow2(k) ? iop(g, PTX_OP_AND, ptx_r(x), ptx_imm(k - 1)) : iop(g, PTX_OP_REM, ptx_r(x), ptx_imm(k));
}

/* p64 + a * bytes (a: u32 register or immediate). */
static ptx_reg addr(fa2 *g, ptx_reg p64, ptx_opd a, int64_t bytes)
{
    ptx_fn *f = g->f;
    if (a.kind == PTX_O_IMM) {
        if (a.u.imm == 0 || bytes == 0)
            return p64;
        ptx_reg d = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(d), ptx_r(p64), ptx_imm(a.u.imm * bytes));
        return d;
    }
    ptx_reg off = ptx_reg_new(f, PTX_T_B64);
    if (bytes >= 0 && bytes <= 0xffffffffll) {
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_WIDE), U32T, ptx_r(off), a, ptx_imm(bytes));
    } else {
        ptx_reg w = ptx_reg_new(f, PTX_T_B64);
        ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), a);
        ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U64T, ptx_r(off), ptx_r(w), ptx_imm(bytes));
    }
    ptx_reg d = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_ADD, NOM, S64T, ptx_r(d), ptx_r(p64), ptx_r(off));
    return d;
}

/* s32 element idx of an int32 tensor at p. */
static ptx_reg ld_s32(fa2 *g, ptx_reg p, ptx_opd idx)
{
    ptx_reg a = addr(g, p, idx, 4), r = r32(g);
    ptx_emit(g->f, PTX_OP_LD, M2(PTX_M_GLOBAL, PTX_M_NC), S32T, ptx_r(r), ptx_addr(a, 0));
    return r;
}

static ptx_reg fmov(fa2 *g, ptx_opd v)
{
    ptx_reg r = ptx_reg_new(g->f, PTX_T_F32);
    ptx_emit(g->f, PTX_OP_MOV, NOM, F32T, ptx_r(r), v);
    return r;
}

/* ---- operands in shared memory ---- */

/* The ldmatrix.x4 accesses of an operand: for each k step ks < nks, the
 * .x4 loads of `atoms` m|n atoms (A: one per atom, B: one per two n8
 * atoms), origins in tile coordinates (row0 + r, b). */
static void ldsm_init(fa2 *g, kit_ldsm *s, const kit_layout *t, kit_operand w, bool kmajor, ptx_opd row0,
                      int nks, int atoms)
{
    const kit_atom *at = g->at;
    int per = 4 / kit_atom_tv(at, w)->regs, am = w == KIT_A ? at->m : at->n, n = 0;
    int r[512], b[512];
    for (int ks = 0; ks < nks; ks++)
        for (int a = 0; a < atoms; a += per) {
            int64_t tr, tb;
            if (w == KIT_A)
                kit_atom_to_tile(w, kmajor, g->es, a * am, ks * at->k, &tr, &tb);
            else
                kit_atom_to_tile(w, kmajor, g->es, ks * at->k, a * am, &tr, &tb);
            r[n] = (int)tr;
            b[n++] = (int)tb;
        }
    kit_layout lanes = kit_ldsm_atom_lanes(at, w, kmajor);
    kit_ldsm_init(g->f, s, t, &lanes, g->lane, kmajor ? row0 : ptx_imm(0), kmajor ? ptx_imm(0) : row0, n, r, b);
}

/* The four A registers of m atom mi at k step ks (Q) from its access. */
static void ldsm_x4(fa2 *g, const kit_ldsm *s, int i, const ptx_reg *at, bool trans, ptx_reg *out)
{
    for (int q = 0; q < 4; q++)
        out[q] = r32(g);
    kit_ldsm_emit(g->f, s, i, 4, trans, ptx_vecr(g->f, 4, out), at, 0, (ptx_reg){0});
}

/* d = a b + c, c = d unless zero (a register holding 0: the first k step
 * of S starts from zero without a mov per accumulator). */
static void mma(fa2 *g, ptx_reg *c, const ptx_reg *a, const ptx_reg *b, ptx_reg zero)
{
    const kit_atom *at = g->at;
    ptx_opd dv = ptx_vecr(g->f, 4, c);
    ptx_reg z4[4] = {zero, zero, zero, zero};
    ptx_opd cv = zero.id ? ptx_vecr(g->f, 4, z4) : dv;
    ptx_reg av[4] = {a[0], a[1], a[2], a[3]}, bv[2] = {b[0], b[1]};
    ptx_emit(g->f, PTX_OP_MMA, PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED, at->shape, PTX_M_ROW, PTX_M_COL),
             PTX_TYPES(at->acc, at->ab, at->ab, at->acc), dv, ptx_vecr(g->f, 4, av), ptx_vecr(g->f, 2, bv), cv);
}

/* A tile copy of rows [row, row + tile rows) of a (token, d) view: base
 * p64 at the tile's first row, `rows` rows in bounds (s32), moving by
 * drow rows per advance. */
static void g2s_init(fa2 *g, kit_g2s *c, const kit_layout *t, ptx_reg p64, int64_t pitch_elems, int64_t cols,
                     ptx_reg rows, int64_t drow)
{
    kit_view v;
    memset(&v, 0, sizeof v);
    v.base = p64;
    v.ld_bytes = pitch_elems * g->es;
    v.es = g->es;
    v.rows = ptx_r(rows);
    v.cols = ptx_imm(cols);
    v.row_edge = true;
    v.col_edge = false;
    kit_g2s_init(g->f, c, t, &v, g->threads, g->tid, 16, drow, 0);
}

/* The Q tile of a packed CTA (pack_gqa): tile row r is packed row m0 + r,
 * query position (m0 + r) / group of head hk group + (m0 + r) % group, so
 * rows are not one pitch apart and each 16-byte piece computes its own
 * source. Pieces L = tid + k T of bm x (d es / 16); rows at or past Sq_b
 * are zero-filled (src-size 0, the source clamped to row Sq_b - 1, inside
 * the tensor). qb: the sequence's row 0 of head hk group. Issued with K_0
 * (the caller commits). */
static void q_copy_packed(fa2 *g, ptx_reg qb)
{
    ptx_fn *f = g->f;
    const pt_prepared *pp = g->pp;
    int64_t np = pp->d * g->es / 16, total = g->bm * np;
    ptx_reg last = iop(g, PTX_OP_SUB, ptx_r(g->sq), ptx_imm(1));
    for (int64_t k = 0; k * g->threads < total; k++) {
        ptx_reg L = iop(g, PTX_OP_ADD, ptx_r(g->tid), ptx_imm(k * g->threads));
        ptx_reg row = udiv(g, L, np), pc = umod(g, L, np);
        ptx_reg pr = iop(g, PTX_OP_ADD, ptx_r(g->m0), ptx_r(row));
        ptx_reg pos = udiv(g, pr, g->grp), hh = umod(g, pr, g->grp);
        ptx_reg ok = setp(g, PTX_M_LT, ptx_r(pos), ptx_r(g->sq));
        ptx_reg src = addr(g, qb, ptx_r(iop(g, PTX_OP_MIN, ptx_r(pos), ptx_r(last))), pp->sq[0] * g->es);
        src = addr(g, src, ptx_r(hh), pp->sq[1] * g->es);
        src = addr(g, src, ptx_r(pc), 16);
        ptx_opd c[2] = {ptx_r(row), ptx_r(iop(g, PTX_OP_SHL, ptx_r(pc), ptx_imm(4)))};
        ptx_reg dst = iop(g, PTX_OP_ADD, ptx_r(g->smem_base), kit_emit(f, &g->tq, c, 0));
        ptx_reg size = r32(g);
        ptx_emit(f, PTX_OP_SELP, NOM, B32T, ptx_r(size), ptx_imm(16), ptx_imm(0), ptx_r(ok));
        ptx_ins *in = ptx_emit(f, PTX_OP_CP_ASYNC, M3(PTX_M_CG, PTX_M_SHARED, PTX_M_GLOBAL), PTX_NOTYPES,
                               ptx_addr(dst, 0), ptx_addr(src, 0), ptx_imm(16), ptx_r(size));
        if ((k + 1) * g->threads > total) /* a partial last pass */
            ptx_guard(in, setp(g, PTX_M_LT, ptx_r(L), ptx_imm(total)), false);
    }
}

/* K / V copies, through the pages when pg is set. */
static void kv_issue(kit_g2s *c, const kit_paged *pg, ptx_reg dst, ptx_reg p)
{
    if (pg)
        kit_g2s_issue_paged(c, pg, dst, 0, p);
    else
        kit_g2s_issue(c, dst, 0, p);
}

static void kv_advance(kit_g2s *c, kit_paged *pg)
{
    if (pg)
        kit_g2s_paged_advance(c, pg);
    else
        kit_g2s_advance(c);
}

/* Whether, for every lane position (r[i], c[i]) given, the tile offset of
 * (r + dr, c + db) is (the offset of (r, c)) ^ x + d: the swizzle XORs
 * 16-byte chunk bits with row bits, so a move that carries into neither is
 * an XOR there plus a plain shift (d: dr rows, and db's bits above the
 * XORed chunk bits, or all of db); checked through kit_at, the swizzle's
 * one definition. An address then costs an xor instead of the whole
 * swizzle. */
static bool xor_shift(const kit_layout *t, const int64_t *r, const int64_t *c, int n, int64_t dr, int64_t db,
                      int64_t *x, int64_t *d)
{
    int64_t y0 = kit_at(t, r[0], c[0]), y = kit_at(t, r[0] + dr, c[0] + db);
    int64_t cand[2] = {dr * kit_tile_pitch(t) + db, dr * kit_tile_pitch(t) + (db & ~(int64_t)127)};
    for (int k = 0; k < 2; k++) {
        int64_t dd = cand[k], xx = (y - dd) ^ y0;
        bool ok = y - dd >= 0;
        for (int i = 0; i < n && ok; i++)
            ok = kit_at(t, r[i] + dr, c[i] + db) == ((kit_at(t, r[i], c[i]) ^ xx) + dd);
        if (ok) {
            *x = xx;
            *d = dd;
            return true;
        }
    }
    return false;
}

/* smem_base + (off ^ x), one register per distinct x (cache of n <= 16). */
typedef struct xaddr {
    int n;
    int64_t x[16];
    ptx_reg a[16];
} xaddr;

static ptx_reg xaddr_get(fa2 *g, xaddr *c, ptx_opd off, int64_t x)
{
    for (int i = 0; i < c->n; i++)
        if (c->x[i] == x)
            return c->a[i];
    ptx_reg a = iop(g, PTX_OP_ADD, ptx_r(g->smem_base), kit_iop(g->f, PTX_OP_XOR, off, ptx_imm(x)));
    if (c->n < 16) {
        c->x[c->n] = x;
        c->a[c->n++] = a;
    }
    return a;
}

/* ---- the kernel ---- */

/* Per-thread rows (row_off) and registers (creg) of the fragments: gen/kit/attn.h. */

int attn_prefill_emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    fa2 G, *g = &G;
    int rc = geometry(pp, &pp->target, c, g, e);
    if (rc)
        return rc;
    rc = attn_prefill_check(pp, &pp->target, c, e);
    if (rc)
        return rc;
    char cfg[256], name[128], sig[512];
    pt_config_str(c, cfg, sizeof cfg);
    snprintf(sig, sizeof sig, "%s|%lld %lld %lld %lld %lld %lld %lld %d %lld %lld %.9g %.9g %d %d %d %d",
             cfg, (long long)pp->B, (long long)pp->Hq, (long long)pp->Hkv, (long long)pp->Sq, (long long)pp->Sk,
             (long long)pp->d, (long long)pp->dv, pp->causal, (long long)pp->wl, (long long)pp->wr,
             (double)pp->scale, (double)pp->softcap, pp->bhsd, pp->varlen, pp->seqused, pp->lse);
    snprintf(name, sizeof name, "attn_fa2_%s_d%lld_%016llx", pt_dtype_get(pp->dt)->name, (long long)pp->d,
             (unsigned long long)pt_hash64(sig, strlen(sig)));
    g->f = ptx_fn_new(m, name);
    ptx_fn *f = g->f;
    /* the body in one piece: the kernel is 1100 to 1800 instructions, past
     * the IR's first 1024, whose regrowth copies the whole body (6% of an
     * emission); the unused first block stays in the module's arena */
    f->cap_body = 0;
    f->body = pt_arena_grow(m->arena, NULL, sizeof *f->body, &f->cap_body, 2048);
    f->maxntid[0] = g->threads;
    f->maxntid[1] = f->maxntid[2] = 1;
    ptx_module_extern_shared(m, "attn_smem", 128);
    const kit_atom *at = g->at;
    int es = g->es, MI = g->MI, NI = g->NI, NO = g->NO, S = g->stages;
    ptx_reg none = {0};

    /* parameters, in pt_launch order */
    l->nargs = 0;
    ptx_reg po = attn_param_ptr(g->f, l, "o", (pt_arg){PT_ARG_OUTPUT, pp->t.o, 0, 0});
    ptx_reg plse = pp->lse ? attn_param_ptr(g->f, l, "lse", (pt_arg){PT_ARG_OUTPUT, pp->t.lse, 0, 0}) : none;
    ptx_reg pq = attn_param_ptr(g->f, l, "q", (pt_arg){PT_ARG_INPUT, pp->t.q, 0, 0});
    ptx_reg pk = attn_param_ptr(g->f, l, "k", (pt_arg){PT_ARG_INPUT, pp->t.k, 0, 0});
    ptx_reg pv = attn_param_ptr(g->f, l, "v", (pt_arg){PT_ARG_INPUT, pp->t.v, 0, 0});
    bool paged = pp->page > 0;
    ptx_reg pbt = paged ? attn_param_ptr(g->f, l, "block_table", (pt_arg){PT_ARG_INPUT, pp->t.block_table, 0, 0}) : none;
    ptx_reg pcq = none, pck = none, psu = none;
    if (pp->varlen) {
        pcq = attn_param_ptr(g->f, l, "cu_seqlens_q", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_q, 0, 0});
        pck = attn_param_ptr(g->f, l, "cu_seqlens_k", (pt_arg){PT_ARG_INPUT, pp->t.cu_seqlens_k, 0, 0});
    }
    if (pp->seqused)
        psu = attn_param_ptr(g->f, l, "seqused_k", (pt_arg){PT_ARG_INPUT, pp->t.seqused_k, 0, 0});
    ptx_reg psq = none, psk = none;
    if (!pp->varlen) {
        psq = attn_param_u32(g->f, l, "seqlen_q", (uint64_t)pp->Sq);
        if (!pp->seqused)
            psk = attn_param_u32(g->f, l, "seqlen_k", (uint64_t)pp->Sk);
    }

    /* thread, CTA: m block, head, sequence */
    g->tid = sreg(g, PTX_S_TID_X);
    g->lane = iop(g, PTX_OP_AND, ptx_r(g->tid), ptx_imm(31));
    g->warp = iop(g, PTX_OP_SHR, ptx_r(g->tid), ptx_imm(5));
    g->wrow = iop(g, PTX_OP_MUL, ptx_r(g->warp), ptx_imm(g->bm / g->warps));
    g->smem_base = r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(g->smem_base), ptx_sym("attn_smem"));
    ptx_reg mb = sreg(g, g->raster ? PTX_S_CTAID_Y : PTX_S_CTAID_X);
    g->h = sreg(g, g->raster ? PTX_S_CTAID_X : PTX_S_CTAID_Y);
    g->b = sreg(g, PTX_S_CTAID_Z);
    int64_t nmb = (pp->Sq * g->grp + g->bm - 1) / g->bm;
    if (pp->causal || pp->wr >= 0) /* the longest rows first */
        mb = iop(g, PTX_OP_SUB, ptx_imm(nmb - 1), ptx_r(mb));
    g->m0 = iop(g, PTX_OP_MUL, ptx_r(mb), ptx_imm(g->bm)); /* packed: the first packed row */
    if (g->pack) { /* the CTA's head index is the kv head's */
        g->hk = g->h;
        g->h = (ptx_reg){0};
    } else if (pp->group == 1) {
        g->hk = g->h;
    } else if (pow2(pp->group)) {
        int sh = 0;
        while ((INT64_C(1) << sh) < pp->group)
            sh++;
        g->hk = iop(g, PTX_OP_SHR, ptx_r(g->h), ptx_imm(sh));
    } else {
        g->hk = iop(g, PTX_OP_DIV, ptx_r(g->h), ptx_imm(pp->group));
    }
    /* this sequence's lengths and first tokens */
    if (pp->varlen) {
        ptx_reg b1 = iop(g, PTX_OP_ADD, ptx_r(g->b), ptx_imm(1));
        g->tq0 = ld_s32(g, pcq, ptx_r(g->b));
        g->sq = iop(g, PTX_OP_SUB, ptx_r(ld_s32(g, pcq, ptx_r(b1))), ptx_r(g->tq0));
        g->tk0 = ld_s32(g, pck, ptx_r(g->b));
        g->sk = iop(g, PTX_OP_SUB, ptx_r(ld_s32(g, pck, ptx_r(b1))), ptx_r(g->tk0));
    } else {
        g->sq = psq;
        g->sk = psk;
    }
    if (pp->seqused)
        g->sk = ld_s32(g, psu, ptx_r(g->b));
    /* the query positions of the tile's first and last rows (packed rows:
     * position = row / group) */
    ptx_reg p0 = g->m0, plast = iop(g, PTX_OP_ADD, ptx_r(g->m0), ptx_imm(g->bm - 1));
    if (g->pack) {
        p0 = udiv(g, g->m0, g->grp);
        plast = udiv(g, plast, g->grp);
    }
    /* rows of this block past the sequence: nothing to do */
    int done = ptx_label_new(f);
    bra(g, done, setp(g, PTX_M_GE, ptx_r(p0), ptx_r(g->sq)), false);

    /* visible key blocks [n_lo, n_hi) of the block's rows */
    kit_attn_blocks blk = kit_attn_block_range(f, p0, plast, g->sq, g->sk, pp->wl, pp->wr, g->bn);
    ptx_reg off = blk.off, n_hi = blk.n_hi, nblk = blk.nblk;

    /* global views: Q rows m0.., K and V rows from the last visible block down */
    /* (packed: the sequence's row 0 of the group's first head; rows come per piece) */
    ptx_reg qrow = g->pack ? (pp->varlen ? g->tq0 : none) : g->m0;
    if (!g->pack && pp->varlen)
        qrow = iop(g, PTX_OP_ADD, ptx_r(g->tq0), ptx_r(g->m0));
    ptx_reg qb = qrow.id ? addr(g, pq, ptx_r(qrow), pp->sq[0] * es) : pq;
    qb = g->pack ? addr(g, qb, ptx_r(g->hk), g->grp * pp->sq[1] * es) : addr(g, qb, ptx_r(g->h), pp->sq[1] * es);
    qb = pp->varlen ? qb : addr(g, qb, ptx_r(g->b), pp->sq[2] * es);
    ptx_reg n0 = r32(g); /* first key of the current block */
    ptx_emit(f, PTX_OP_MUL, M1(PTX_M_LO), U32T, ptx_r(n0), ptx_r(iop(g, PTX_OP_SUB, ptx_r(n_hi), ptx_imm(1))),
             ptx_imm(g->bn));
    ptx_reg kb = addr(g, pk, ptx_r(g->hk), pp->sk[1] * es), vb = addr(g, pv, ptx_r(g->hk), pp->sv[1] * es);
    if (!paged) { /* paged: the pool of this head; rows come through the block table */
        ptx_reg krow = pp->varlen ? iop(g, PTX_OP_ADD, ptx_r(g->tk0), ptx_r(n0)) : n0;
        kb = addr(g, kb, ptx_r(krow), pp->sk[0] * es);
        kb = pp->varlen ? kb : addr(g, kb, ptx_r(g->b), pp->sk[2] * es);
        vb = addr(g, vb, ptx_r(krow), pp->sv[0] * es);
        vb = pp->varlen ? vb : addr(g, vb, ptx_r(g->b), pp->sv[2] * es);
    }
    ptx_reg qleft = iop(g, PTX_OP_SUB, ptx_r(g->sq), ptx_r(g->m0));
    ptx_reg kleft = iop(g, PTX_OP_SUB, ptx_r(g->sk), ptx_r(n0));

    /* O accumulators and row states (before any branch: the epilogue reads them) */
    int no = MI * NO * 4, ns = MI * NI * 4, nr = 2 * MI;
    pt_arena *ar = m->arena;
    ptx_reg *oacc = pt_arena_alloc(ar, (size_t)no * sizeof(ptx_reg));
    for (int i = 0; i < no; i++)
        oacc[i] = fmov(g, ptx_f32(0.0f));
    kit_softmax st[16];
    for (int r = 0; r < nr; r++)
        st[r] = kit_softmax_new(f, g->k);
    ptx_reg sacc[512];
    for (int i = 0; i < ns; i++)
        sacc[i] = ptx_reg_new(f, PTX_T_F32);
    ptx_reg fzero = fmov(g, ptx_f32(0.0f));
    int epi = ptx_label_new(f);
    bra(g, epi, setp(g, PTX_M_LE, ptx_r(nblk), ptx_imm(0)), false);

    /* copies and pipes */
    kit_g2s cq, ck, cv;
    if (!g->pack)
        g2s_init(g, &cq, &g->tq, qb, pp->sq[0], pp->d, qleft, 0);
    g2s_init(g, &ck, &g->tk, kb, pp->sk[0], pp->d, kleft, -g->bn);
    g2s_init(g, &cv, &g->tv, vb, pp->sv[0], pp->dv, kleft, -g->bn);
    kit_paged gk, gv, *pgk = NULL, *pgv = NULL;
    if (paged) { /* the kit's paged gather (gen/kit/copy.h), shared with decode */
        ptx_reg tab = addr(g, pbt, ptx_r(g->b), pp->pages_per_seq * 4);
        gk = (kit_paged){.table = tab, .pool = kb, .page = (int)pp->page, .page_bytes = pp->sk[2] * es, .row = r32(g)};
        gv = (kit_paged){.table = tab, .pool = vb, .page = (int)pp->page, .page_bytes = pp->sv[2] * es, .row = r32(g)};
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(gk.row), ptx_r(n0));
        ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(gv.row), ptx_r(n0));
        kit_g2s_paged_init(&ck, &gk, g->tid);
        kit_g2s_paged_init(&cv, &gv, g->tid);
        pgk = &gk;
        pgv = &gv;
    }
    ptx_reg kbase = iop(g, PTX_OP_ADD, ptx_r(g->smem_base), ptx_imm(g->qbytes));
    ptx_reg vbase = iop(g, PTX_OP_ADD, ptx_r(kbase), ptx_imm(S * g->kbytes));
    kit_pipe pk_, pv_;
    kit_pipe_init(f, &pk_, KIT_PIPE_CP_ASYNC, S, g->kbytes, kbase, false);
    kit_pipe_init(f, &pv_, KIT_PIPE_CP_ASYNC, S, g->vbytes, vbase, false);
    /* ldmatrix accesses: Q (A, K-major) at the warp's rows; K (B, K-major:
     * rows are keys); V (B, MN-major: rows are keys, .trans) */
    kit_ldsm lq, lk, lv;
    ldsm_init(g, &lq, &g->tq, KIT_A, true, ptx_r(g->wrow), g->KD, MI);
    ldsm_init(g, &lk, &g->tk, KIT_B, true, ptx_imm(0), g->KD, NI);
    ldsm_init(g, &lv, &g->tv, KIT_B, false, ptx_imm(0), g->KN, NO);

    /* prologue: Q with K_0, then V_i, K_{i+1} */
    if (g->pack)
        q_copy_packed(g, qb);
    else
        kit_g2s_issue(&cq, g->smem_base, 0, none);
    kv_issue(&ck, pgk, kit_pipe_acquire(&pk_), none);
    kv_advance(&ck, pgk);
    kit_pipe_commit(&pk_);
    for (int i = 0; i + 1 < S; i++) {
        ptx_reg more = setp(g, PTX_M_GT, ptx_r(nblk), ptx_imm(i + 1));
        kv_issue(&cv, pgv, kit_pipe_acquire(&pv_), none);
        kv_advance(&cv, pgv);
        kit_pipe_commit(&pv_);
        kv_issue(&ck, pgk, kit_pipe_acquire(&pk_), more);
        kv_advance(&ck, pgk);
        kit_pipe_commit(&pk_);
    }
    /* Q fragments in registers: loaded once */
    ptx_reg qf[4][16][4];
    ptx_reg qat[512];
    memset(qat, 0, sizeof qat);
    kit_ldsm_at(f, &lq, g->smem_base, qat);
    if (g->qregs) {
        kit_pipe_wait(&pk_, 2 * (S - 1));
        for (int ks = 0; ks < g->KD; ks++)
            for (int a = 0; a < MI; a++)
                ldsm_x4(g, &lq, ks * MI + a, qat, false, qf[a][ks]);
    }
    /* the mask's row terms: row i = m0 + row_base + kit_attn_row_off(r); key hi
     * (exclusive) min(Sk_b, i + off + wr + 1), key lo i + off - wl; as
     * offsets from the lane's first column of the block */
    ptx_reg zero = kit_reg(f, ptx_imm(0));
    kit_frag sf = kit_frag_mma_c(f, at, MI, NI, sacc, g->wrow, zero, g->lane);
    ptx_reg rowdiag = none, rdiag[16];
    if (g->pack && (pp->wr >= 0 || pp->wl >= 0)) { /* each row its own position: (m0 + row) / group */
        for (int r = 0; r < nr; r++) {
            ptx_reg pr = iop(g, PTX_OP_ADD, ptx_r(g->m0), ptx_r(iop(g, PTX_OP_ADD, ptx_r(sf.row_base), ptx_imm(kit_attn_row_off(r)))));
            rdiag[r] = iop(g, PTX_OP_SUB, ptx_r(udiv(g, pr, g->grp)), ptx_r(sf.col_base));
            rdiag[r] = iop(g, PTX_OP_ADD, ptx_r(rdiag[r]), ptx_r(off));
        }
    } else {
        rowdiag = iop(g, PTX_OP_SUB, ptx_r(iop(g, PTX_OP_ADD, ptx_r(g->m0), ptx_r(sf.row_base))), ptx_r(sf.col_base));
        rowdiag = iop(g, PTX_OP_ADD, ptx_r(rowdiag), ptx_r(off)); /* i - col_base + off at row offset 0 */
    }
    ptx_reg skc = iop(g, PTX_OP_SUB, ptx_r(g->sk), ptx_r(sf.col_base));
    /* block-level: the first row's right limit and the last row's left limit */
    ptx_reg rlim = none, llim = none;
    if (pp->wr >= 0)
        rlim = iop(g, PTX_OP_ADD, ptx_r(iop(g, PTX_OP_ADD, ptx_r(p0), ptx_r(off))), ptx_imm(pp->wr + 1 - g->bn));
    if (pp->wl >= 0)
        llim = iop(g, PTX_OP_SUB, ptx_r(iop(g, PTX_OP_ADD, ptx_r(plast), ptx_r(off))), ptx_imm(pp->wl));
    ptx_reg skbn = iop(g, PTX_OP_SUB, ptx_r(g->sk), ptx_imm(g->bn));

    /* ---- the loop over key blocks ---- */
    ptx_reg j = r32(g);
    ptx_emit(f, PTX_OP_MOV, NOM, U32T, ptx_r(j), ptx_imm(0));
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    for (int r = 0; r < nr; r++)
        st[r].fresh = false;
    ptx_reg kst = kit_pipe_wait(&pk_, 2 * (S - 1));
    {
        ptx_reg more = setp(g, PTX_M_LT, ptx_r(iop(g, PTX_OP_ADD, ptx_r(j), ptx_imm(S - 1))), ptx_r(nblk));
        int skip = ptx_label_new(f);
        bra(g, skip, more, true);
        kv_issue(&cv, pgv, kit_pipe_acquire(&pv_), none);
        ptx_label_place(f, skip);
        kv_advance(&cv, pgv);
        kit_pipe_commit(&pv_);
    }
    /* S = Q K^T (k step 0 from a zero accumulator) */
    ptx_reg kat[512];
    memset(kat, 0, sizeof kat);
    kit_ldsm_at(f, &lk, kst, kat);
    for (int ks = 0; ks < g->KD; ks++) {
        ptx_reg qa[4][4], kf[16][4];
        for (int a = 0; a < MI; a++) {
            if (g->qregs)
                memcpy(qa[a], qf[a][ks], sizeof qa[a]);
            else
                ldsm_x4(g, &lq, ks * MI + a, qat, false, qa[a]);
        }
        for (int np = 0; np < NI / 2; np++)
            ldsm_x4(g, &lk, ks * (NI / 2) + np, kat, false, kf[np]);
        for (int a = 0; a < MI; a++)
            for (int bi = 0; bi < NI; bi++) {
                int b = (a & 1) ? NI - 1 - bi : bi;
                mma(g, &sacc[(a * NI + b) * 4], qa[a], &kf[b / 2][(b % 2) * 2], ks ? none : fzero);
            }
    }
    kit_pipe_release(&pk_);
    /* softcap: x = tanh(s scale / c) */
    if (pp->softcap > 0)
        kit_attn_softcap(f, sacc, ns, (float)((double)pp->scale / (double)pp->softcap));
    /* mask: only blocks at the end of the keys or meeting a diagonal */
    {
        kit_attn_mask mk = {.wl = pp->wl, .wr = pp->wr, .skbn = skbn, .rlim = rlim, .llim = llim, .skc = skc,
                            .rowdiag = rowdiag, .rdiag = rdiag, .per_row = g->pack};
        kit_attn_mask_block(f, &mk, &sf, sacc, nr, NI, n0);
    }
    /* online softmax per row; O *= alpha; P */
    ptx_reg preg[512];
    kit_attn_softmax(f, st, nr, NI, sacc, preg, NO, oacc);
    /* V_j landed, every warp is done with K_j (after the softmax: ldmatrix of V
     * cannot be hoisted above the barrier, so its fragments are not live
     * during the softmax); the next K block's copies overlap P V */
    ptx_reg vst = kit_pipe_wait(&pv_, 2 * (S - 1));
    {
        ptx_reg more = setp(g, PTX_M_LT, ptx_r(iop(g, PTX_OP_ADD, ptx_r(j), ptx_imm(S))), ptx_r(nblk));
        int skip = ptx_label_new(f);
        bra(g, skip, more, true);
        kv_issue(&ck, pgk, kit_pipe_acquire(&pk_), none);
        ptx_label_place(f, skip);
        kv_advance(&ck, pgk);
        kit_pipe_commit(&pk_);
    }
    /* O += P V */
    kit_frag pf = sf;
    pf.r = preg;
    ptx_reg vat[512];
    memset(vat, 0, sizeof vat);
    kit_ldsm_at(f, &lv, vst, vat);
    for (int ks = 0; ks < g->KN; ks++) {
        ptx_reg pa[4][4], vf[16][4];
        for (int a = 0; a < MI; a++)
            kit_frag_to_a(f, &pf, at, a, ks, pa[a]);
        for (int np = 0; np < NO / 2; np++)
            ldsm_x4(g, &lv, ks * (NO / 2) + np, vat, true, vf[np]);
        for (int a = 0; a < MI; a++)
            for (int bi = 0; bi < NO; bi++) {
                int b = (a & 1) ? NO - 1 - bi : bi;
                mma(g, &oacc[(a * NO + b) * 4], pa[a], &vf[b / 2][(b % 2) * 2], none);
            }
    }
    kit_pipe_release(&pv_);
    ptx_emit(f, PTX_OP_SUB, NOM, S32T, ptx_r(n0), ptx_r(n0), ptx_imm(g->bn));
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(j), ptx_r(j), ptx_imm(1));
    bra(g, top, setp(g, PTX_M_LT, ptx_r(j), ptx_r(nblk)), false);
    kit_pipe_drain(&pk_);

    /* ---- epilogue ---- */
    ptx_label_place(f, epi);
    ptx_reg lrow[16], inv[16];
    kit_attn_finalize(f, st, nr, lrow, inv); /* 1 / l, 0 when l = 0 (no visible key) */
    /* O / l as the dtype, staged through shared memory (the tile `to`, over
     * Q, K and V: the barrier has every warp done with them), then stored
     * 16 bytes a lane. Each warp writes and reads back only its own rows
     * (bar.warp.sync between). The writes are the C fragment's pairs, one
     * b32 per row and n8 atom: 8 rows at one 16-byte chunk, swizzled (or
     * padded), land in 8 bank groups; the reads take 16-byte chunks of a
     * row, a quarter warp 8 consecutive chunks: both conflict free. */
    kit_frag of = kit_frag_mma_c(f, at, MI, NO, oacc, g->wrow, sf.grp_col, g->lane);
    ptx_emit(f, PTX_OP_BAR, M1(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    {
        ptx_reg cb = iop(g, PTX_OP_MUL, ptx_r(of.col_base), ptx_imm(es));
        struct oaddr {
            int64_t dr, db, imm;
            ptx_reg a;
        } ac[16];
        int nac = 0;
        kit_io io = {.shared = true, .align = 2 * es};
        /* every thread's (row, byte) of value 0: warp w's rows w R + lane / 4, bytes 2 es (lane % 4);
         * warp 0's stand for all when warps are whole swizzle periods apart */
        int64_t R = g->bm / g->warps, tr0[256], tb0[256];
        int nchk = kit_shift_ok(&g->to, R, 0) ? 32 : g->threads;
        for (int i = 0; i < nchk; i++) {
            tr0[i] = (i / 32) * R + (i % 32) / 4;
            tb0[i] = (i % 4) * 2 * es;
        }
        ptx_opd off0 = {0};
        xaddr xa = {0};
        for (int r = 0; r < nr; r++)
            for (int b = 0; b < NO; b++) {
                int64_t dr = kit_attn_row_off(r), db = (int64_t)b * 8 * es, imm = 0, x;
                ptx_reg a = none;
                for (int k = 0; k < nac && !a.id; k++)
                    if (kit_shift_ok(&g->to, dr - ac[k].dr, db - ac[k].db)) {
                        a = ac[k].a;
                        imm = ac[k].imm + (dr - ac[k].dr) * kit_tile_pitch(&g->to) + db - ac[k].db;
                    }
                if (!a.id && xor_shift(&g->to, tr0, tb0, nchk, dr, db, &x, &imm)) {
                    if (off0.kind == PTX_O_NONE) {
                        ptx_opd c0[2] = {ptx_r(of.row_base), ptx_r(cb)};
                        off0 = kit_emit(f, &g->to, c0, 0);
                    }
                    a = xaddr_get(g, &xa, off0, x);
                    if (nac < 16)
                        ac[nac++] = (struct oaddr){dr, db, imm, a};
                }
                if (!a.id) {
                    ptx_opd c2[2] = {kit_iop(f, PTX_OP_ADD, ptx_r(of.row_base), ptx_imm(dr)),
                                     kit_iop(f, PTX_OP_ADD, ptx_r(cb), ptx_imm(db))};
                    a = iop(g, PTX_OP_ADD, ptx_r(g->smem_base), kit_emit(f, &g->to, c2, 0));
                    if (nac < 16)
                        ac[nac++] = (struct oaddr){dr, db, 0, a};
                }
                ptx_opd v[2];
                for (int q = 0; q < 2; q++) {
                    ptx_reg o = ptx_reg_new(f, PTX_T_F32);
                    ptx_emit(f, PTX_OP_MUL, NOM, F32T, ptx_r(o), ptx_r(oacc[kit_attn_creg(NO, r, b, q)]), ptx_r(inv[r]));
                    v[q] = ptx_r(o);
                }
                kit_store(f, &io, pp->dt, a, imm, 2, v);
            }
    }
    ptx_emit(f, PTX_OP_BAR_WARP, NOM, PTX_NOTYPES, ptx_hex(0xffffffff));
    /* the global rows: o [token, head, d] at the sequence's row 0 */
    ptx_reg ob = pp->varlen ? addr(g, po, ptx_r(g->tq0), pp->so[0] * es) : po;
    ob = g->pack ? addr(g, ob, ptx_r(g->hk), g->grp * pp->so[1] * es) : addr(g, ob, ptx_r(g->h), pp->so[1] * es);
    ob = pp->varlen ? ob : addr(g, ob, ptx_r(g->b), pp->so[2] * es);
    {
        /* the read-back passes: pass k has lane l read chunk c(l) of warp row
         * r(l) + rk; a pass's quarter warps take 8 chunks of distinct bank
         * groups. 32 / cpr rows a pass when cpr divides 32 (one pattern:
         * r = l / cpr, c = l % cpr); hd96 (12 chunks, rows padded to 52
         * words: row r's chunk c in bank group (5 r + c) mod 8) in groups of
         * 8 rows: rows 0-3 and 4-7 chunks 0-7 (pattern 0: r = l / 8,
         * c = l % 8), then chunks 8-11 of rows q and q + 4 in quarter q
         * (pattern 1), 5 (q + 4) = 5 q + 4 mod 8 apart */
        int64_t R = g->bm / g->warps, cpr = pp->dv * es / 16, per = R * cpr / 32;
        ptx_reg lr[2], lc[2];
        int npat = 1;
        int64_t prow[64], plr[2][32], plc[2][32]; /* passes' rows; the patterns at emit time */
        int ppat[64];
        for (int ln = 0; ln < 32; ln++) {
            bool even = 32 % cpr == 0;
            plr[0][ln] = even ? ln / cpr : ln / 8;
            plc[0][ln] = even ? ln % cpr : ln % 8;
            plr[1][ln] = ln / 8 + (ln & 4);
            plc[1][ln] = 8 + (ln & 3);
        }
        if (32 % cpr == 0) {
            lr[0] = udiv(g, g->lane, cpr);
            lc[0] = umod(g, g->lane, cpr);
            for (int64_t k = 0; k < per; k++) {
                prow[k] = k * (32 / cpr);
                ppat[k] = 0;
            }
        } else if (cpr == 12 && R % 8 == 0 && kit_tile_pitch(&g->to) == 208) {
            npat = 2;
            lr[0] = udiv(g, g->lane, 8);
            lc[0] = umod(g, g->lane, 8);
            lr[1] = iop(g, PTX_OP_ADD, ptx_r(lr[0]), ptx_r(iop(g, PTX_OP_AND, ptx_r(g->lane), ptx_imm(4))));
            lc[1] = iop(g, PTX_OP_ADD, ptx_r(iop(g, PTX_OP_AND, ptx_r(g->lane), ptx_imm(3))), ptx_imm(8));
            for (int64_t k = 0; k < per; k++) {
                prow[k] = 8 * (k / 3) + (k % 3 == 1 ? 4 : 0);
                ppat[k] = k % 3 == 2;
            }
        } else {
            pt_errf(&m->err, PT_EINTERNAL, "attention prefill: no O read-back pattern for %lld chunks a row",
                    (long long)cpr);
            per = 0;
        }
        ptx_reg wrow0 = iop(g, PTX_OP_ADD, ptx_r(g->m0), ptx_r(g->wrow)); /* the warp's first (packed) row */
        ptx_reg sa0[2], ga0[2], rem0[2];
        ptx_opd soff[2];
        xaddr xs[2] = {{0}, {0}};
        for (int q = 0; q < npat; q++) {
            ptx_opd c2[2] = {ptx_r(iop(g, PTX_OP_ADD, ptx_r(g->wrow), ptx_r(lr[q]))),
                             ptx_r(iop(g, PTX_OP_SHL, ptx_r(lc[q]), ptx_imm(4)))};
            soff[q] = kit_emit(f, &g->to, c2, 0);
            sa0[q] = xaddr_get(g, &xs[q], soff[q], 0);
            ptx_reg row = iop(g, PTX_OP_ADD, ptx_r(wrow0), ptx_r(lr[q]));
            if (!g->pack) {
                ga0[q] = addr(g, addr(g, ob, ptx_r(row), pp->so[0] * es), ptx_r(lc[q]), 16);
                rem0[q] = iop(g, PTX_OP_SUB, ptx_r(g->sq), ptx_r(row));
            } else {
                ga0[q] = addr(g, ob, ptx_r(lc[q]), 16);
                rem0[q] = row; /* the packed row of the pattern's row 0 */
            }
        }
        for (int64_t k = 0; k < per; k++) {
            int q = ppat[k];
            int64_t rk = prow[k], simm = 0, gimm = 0, x, wr[256], wc[256];
            int nchk = kit_shift_ok(&g->to, R, 0) ? 32 : g->threads; /* warp 0 stands for all, as above */
            for (int i = 0; i < nchk; i++) { /* every thread's (row, byte) in pattern q */
                wr[i] = (i / 32) * R + plr[q][i % 32];
                wc[i] = 16 * plc[q][i % 32];
            }
            ptx_reg sa = sa0[q], ga = ga0[q], ok;
            if (kit_shift_ok(&g->to, rk, 0)) {
                simm = rk * kit_tile_pitch(&g->to);
            } else if (xor_shift(&g->to, wr, wc, nchk, rk, 0, &x, &simm)) {
                sa = xaddr_get(g, &xs[q], soff[q], x);
            } else {
                ptx_opd c2[2] = {ptx_r(iop(g, PTX_OP_ADD, ptx_r(g->wrow), ptx_r(iop(g, PTX_OP_ADD, ptx_r(lr[q]), ptx_imm(rk))))),
                                 ptx_r(iop(g, PTX_OP_SHL, ptx_r(lc[q]), ptx_imm(4)))};
                sa = iop(g, PTX_OP_ADD, ptx_r(g->smem_base), kit_emit(f, &g->to, c2, 0));
            }
            if (!g->pack && rk * pp->so[0] * es <= 0x7fffffffll) {
                gimm = rk * pp->so[0] * es;
                ok = setp(g, PTX_M_GT, ptx_r(rem0[q]), ptx_imm(rk));
            } else if (!g->pack) {
                ga = addr(g, ga, ptx_imm(rk), pp->so[0] * es);
                ok = setp(g, PTX_M_GT, ptx_r(rem0[q]), ptx_imm(rk));
            } else { /* packed: this row's position and head */
                ptx_reg pr = iop(g, PTX_OP_ADD, ptx_r(rem0[q]), ptx_imm(rk));
                ptx_reg pos = udiv(g, pr, g->grp);
                ga = addr(g, addr(g, ga, ptx_r(pos), pp->so[0] * es), ptx_r(umod(g, pr, g->grp)), pp->so[1] * es);
                ok = setp(g, PTX_M_LT, ptx_r(pos), ptx_r(g->sq));
            }
            ptx_reg w[4];
            for (int t = 0; t < 4; t++)
                w[t] = r32(g);
            ptx_emit(f, PTX_OP_LD, M2(PTX_M_SHARED, PTX_M_V4), B32T, ptx_vecr(f, 4, w), ptx_addr(sa, simm));
            ptx_guard(ptx_emit(f, PTX_OP_ST, M2(PTX_M_GLOBAL, PTX_M_V4), B32T, ptx_addr(ga, gimm), ptx_vecr(f, 4, w)),
                      ok, false);
        }
    }
    if (pp->lse) {
        /* lse = k m + ln l (natural log), -inf when l = 0; lse [B, Hq, Sq] (varlen: the
         * sequence's rows at b Hq Sq + h Sq + i as well); lane t = 0 of each row */
        ptx_reg lb = addr(g, plse, ptx_r(g->b), pp->Hq * pp->Sq * 4);
        ptx_reg orow = iop(g, PTX_OP_ADD, ptx_r(g->m0), ptx_r(of.row_base));
        ptx_reg orem = none;
        if (g->pack) {
            lb = addr(g, lb, ptx_r(g->hk), g->grp * pp->Sq * 4);
        } else {
            lb = addr(g, lb, ptx_r(g->h), pp->Sq * 4);
            lb = addr(g, lb, ptx_r(orow), 4);
            orem = iop(g, PTX_OP_SUB, ptx_r(g->sq), ptx_r(orow));
        }
        ptx_reg t0 = setp(g, PTX_M_EQ, ptx_r(iop(g, PTX_OP_AND, ptx_r(g->lane), ptx_imm(3))), ptx_imm(0));
        for (int r = 0; r < nr; r++) {
            ptx_reg v = kit_attn_lse(f, &st[r], lrow[r], g->k);
            ptx_reg ok, la = lb;
            int64_t limm = 0;
            if (g->pack) {
                ptx_reg pr = iop(g, PTX_OP_ADD, ptx_r(orow), ptx_imm(kit_attn_row_off(r)));
                ptx_reg pos = udiv(g, pr, g->grp);
                la = addr(g, addr(g, lb, ptx_r(umod(g, pr, g->grp)), pp->Sq * 4), ptx_r(pos), 4);
                ok = setp(g, PTX_M_LT, ptx_r(pos), ptx_r(g->sq));
            } else {
                limm = kit_attn_row_off(r) * 4;
                ok = setp(g, PTX_M_GT, ptx_r(orem), ptx_imm(kit_attn_row_off(r)));
            }
            ptx_reg w = pred(g);
            ptx_emit(f, PTX_OP_AND, NOM, PREDT, ptx_r(w), ptx_r(ok), ptx_r(t0));
            ptx_guard(ptx_emit(f, PTX_OP_ST, M1(PTX_M_GLOBAL), F32T, ptx_addr(la, limm), ptx_r(v)), w, false);
        }
    }
    ptx_label_place(f, done);
    ptx_emit0(f, PTX_OP_RET, NOM, PTX_NOTYPES);

    unsigned gx = (unsigned)nmb, gy = (unsigned)(g->pack ? pp->Hkv : pp->Hq);
    l->grid[0] = g->raster ? gy : gx;
    l->grid[1] = g->raster ? gx : gy;
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
