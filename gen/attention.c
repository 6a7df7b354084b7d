/* The attention op (issue 11; ../shared/design/attention_hopper.md section
 * 1): problem checks and strides (prepare), the tensor list, the dispatch of
 * space / defaults / check / emit to the kernel kinds (prefill:
 * attention_prefill.c, decode: attention_decode.c), flop and byte counts
 * and the registration. The float64 reference, structured inputs and the
 * verifier's hooks are in attention_ref.c; the semantics in
 * gen/attention_int.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/attention_combine.h"
#include "gen/attention_int.h"

/* ---------------------------------------------------------------------- */
/* prepare                                                                 */

static const int64_t head_dims[] = {64, 96, 128, 256};
#define HEAD_DIMS "64 96 128 256"

static bool head_dim_ok(int64_t d)
{
    for (size_t i = 0; i < sizeof head_dims / sizeof head_dims[0]; i++)
        if (head_dims[i] == d)
            return true;
    return false;
}

/* A window as given: -1 (unbounded) when not given and zero (a zeroed
 * problem) or at its default; otherwise the value, which prepare judges. */
static int64_t window_of(int64_t v, bool given) { return !given && v == 0 ? -1 : v; }

static int at_least_one(const char *name, int64_t v, pt_err *e)
{
    if (v < 1)
        return pt_errf(e, PT_EINVAL, "%s=%lld: must be at least 1", name, (long long)v);
    return PT_OK;
}

/* Element strides (token, head, batch) of a [B, S, H, D] tensor stored as
 * bshd or bhsd. */
static void strides(bool bhsd, int64_t S, int64_t H, int64_t D, int64_t st[3])
{
    if (bhsd) {
        st[0] = D;
        st[1] = S * D;
    } else {
        st[0] = H * D;
        st[1] = D;
    }
    st[2] = S * H * D;
}

static int prepare(pt_arena *a, const pt_problem *pb, const pt_target *t, pt_prepared **out,
                   pt_err *e)
{
    *out = NULL;
    char tn[16];
    if (pb->dtype == PT_F64) /* unset: the command line leaves it to prepare */
        return pt_errf(e, PT_EINVAL, "missing dtype=... (attention takes f16 or bf16)");
    if (pb->dtype != PT_F16 && pb->dtype != PT_BF16 && pb->dtype != PT_E4M3)
        return pt_errf(e, PT_EINVAL, "dtype '%s' is not supported for attention (f16 bf16); e4m3 on sm_90a",
                       pt_dtype_get(pb->dtype)->name);
    bool fp8 = pb->dtype == PT_E4M3;
    if (fp8 && !(t->sm == 90 && t->arch_specific))
        return pt_errf(e, PT_EUNSUPPORTED, "dtype e4m3: fp8 attention runs on sm_90a (the wgmma prefill and "
                       "decode kernels); target is %s", pt_target_name(t, tn, sizeof tn));
    const double desc[3] = {pb->descale_q, pb->descale_k, pb->descale_v};
    static const char *const desc_name[3] = {"descale_q", "descale_k", "descale_v"};
    for (int i = 0; i < 3; i++) {
        if (!(desc[i] >= 0) || isinf((float)desc[i]))
            return pt_errf(e, PT_EINVAL, "%s=%g: must be a finite number > 0", desc_name[i], desc[i]);
        if (!fp8 && desc[i] != 0 && desc[i] != 1)
            return pt_errf(e, PT_EINVAL, "%s=%g: descales are for dtype e4m3 (q, k, v in fp8)", desc_name[i],
                           desc[i]);
    }
    if (t->sm < 80)
        return pt_errf(e, PT_EUNSUPPORTED, "attention needs sm_80 or newer; target is %s",
                       pt_target_name(t, tn, sizeof tn));
    int rc = at_least_one("batch", pb->batch, e);
    if (!rc)
        rc = at_least_one("heads_q", pb->heads_q, e);
    if (!rc)
        rc = at_least_one("heads_kv", pb->heads_kv, e);
    if (!rc)
        rc = at_least_one("seqlen_q", pb->seqlen_q, e);
    if (!rc)
        rc = at_least_one("seqlen_k", pb->seqlen_k, e);
    if (!rc)
        rc = at_least_one("head_dim", pb->head_dim, e);
    if (rc)
        return rc;
    if (pb->batch > 65535)
        return pt_errf(e, PT_ERANGE, "batch=%lld: must be 1..65535", (long long)pb->batch);
    if (pb->heads_q > 65535 || pb->heads_kv > 65535)
        return pt_errf(e, PT_ERANGE, "heads_q=%lld heads_kv=%lld: each must be at most 65535",
                       (long long)pb->heads_q, (long long)pb->heads_kv);
    if (pb->heads_q % pb->heads_kv)
        return pt_errf(e, PT_EINVAL, "heads_q=%lld is not a multiple of heads_kv=%lld",
                       (long long)pb->heads_q, (long long)pb->heads_kv);
    if (pb->seqlen_q > 0x7fffffffll || pb->seqlen_k > 0x7fffffffll)
        return pt_errf(e, PT_ERANGE, "seqlen_q=%lld seqlen_k=%lld: each must be at most 2^31-1",
                       (long long)pb->seqlen_q, (long long)pb->seqlen_k);
    int64_t dv = pb->head_dim_v ? pb->head_dim_v : pb->head_dim;
    if (!head_dim_ok(pb->head_dim))
        return pt_errf(e, PT_EINVAL, "head_dim=%lld: supported " HEAD_DIMS,
                       (long long)pb->head_dim);
    if (!head_dim_ok(dv))
        return pt_errf(e, PT_EINVAL, "head_dim_v=%lld: supported " HEAD_DIMS, (long long)dv);
    int64_t wl = window_of(pb->window_left, pb->window_left_given);
    int64_t wr = window_of(pb->window_right, pb->window_right_given);
    if (wl < -1)
        return pt_errf(e, PT_EINVAL, "window_left=%lld: -1 (unbounded) or >= 0", (long long)wl);
    if (wr < -1)
        return pt_errf(e, PT_EINVAL, "window_right=%lld: -1 (unbounded) or >= 0", (long long)wr);
    if (!isfinite(pb->softmax_scale) || isinf((float)pb->softmax_scale))
        return pt_errf(e, PT_EINVAL, "softmax_scale=%g: must be a finite f32 number",
                       pb->softmax_scale);
    if (!(pb->softcap >= 0) || isinf((float)pb->softcap))
        return pt_errf(e, PT_EINVAL, "softcap=%g: must be a finite number >= 0", pb->softcap);
    const char *lay = pb->layout && *pb->layout ? pb->layout : "bshd";
    if (strcmp(lay, "bshd") && strcmp(lay, "bhsd"))
        return pt_errf(e, PT_EINVAL, "bad layout '%s' for attention (bshd or bhsd)", lay);
    bool bhsd = lay[1] == 'h';
    int64_t P = pb->page_size;
    if (P < 0 || (P & (P - 1)))
        return pt_errf(e, PT_EINVAL, "page_size=%lld: must be a power of two", (long long)P);
    if (P > 1024)
        return pt_errf(e, PT_EINVAL, "page_size=%lld: at most 1024", (long long)P);
    if (!P && pb->num_pages)
        return pt_errf(e, PT_EINVAL, "num_pages=%lld needs page_size (paged KV)",
                       (long long)pb->num_pages);
    if (pb->num_pages < 0)
        return pt_errf(e, PT_EINVAL, "num_pages=%lld: must be at least 1", (long long)pb->num_pages);
    if (pb->varlen && bhsd)
        return pt_errf(e, PT_EINVAL, "varlen needs layout bshd (packed [total, heads, head_dim])");
    if (P && bhsd)
        return pt_errf(e, PT_EINVAL,
                       "paged KV needs layout bshd (pools [num_pages, page_size, heads_kv, head_dim])");

    pt_prepared *pp = pt_arena_alloc(a, sizeof *pp);
    pp->prob = *pb;
    pp->prob.layout = pt_arena_strdup(a, lay);
    pp->prob.head_dim_v = dv;
    pp->prob.window_left = wl;
    pp->prob.window_right = wr;
    pp->target = *t;
    pp->dt = pb->dtype;
    pp->es = pt_dtype_get(pb->dtype)->bytes;
    pp->odt = fp8 ? PT_BF16 : pb->dtype;
    pp->oes = pt_dtype_get(pp->odt)->bytes;
    double dq = desc[0] ? desc[0] : 1, dk = desc[1] ? desc[1] : 1;
    pp->vscale = fp8 && desc[2] ? (float)desc[2] : 1.0f;
    pp->B = pb->batch;
    pp->Hq = pb->heads_q;
    pp->Hkv = pb->heads_kv;
    pp->group = pp->Hq / pp->Hkv;
    pp->Sq = pb->seqlen_q;
    pp->Sk = pb->seqlen_k;
    pp->d = pb->head_dim;
    pp->dv = dv;
    pp->causal = pb->causal;
    pp->wl = wl;
    pp->wr = pp->causal ? 0 : wr; /* causal: j <= i + off, tighter than any wr >= 0 */
    pp->scale = pb->softmax_scale != 0 ? (float)pb->softmax_scale : (float)(1.0 / sqrt((double)pp->d));
    if (fp8) /* the scores of the true q and k */
        pp->scale = (float)((double)pp->scale * dq * dk);
    pp->softcap = (float)pb->softcap;
    pp->bhsd = bhsd;
    pp->varlen = pb->varlen;
    pp->seqused = pb->seqused_k;
    pp->lse = pb->return_lse;
    pp->page = P;
    pp->pages_per_seq = P ? (pp->Sk + P - 1) / P : 0;
    pp->npages = P ? (pb->num_pages ? pb->num_pages : pp->B * pp->pages_per_seq) : 0;
    pp->prob.num_pages = pp->npages;

    strides(bhsd, pp->Sq, pp->Hq, pp->d, pp->sq);
    strides(bhsd, pp->Sq, pp->Hq, pp->dv, pp->so);
    if (P) {
        strides(false, P, pp->Hkv, pp->d, pp->sk);
        strides(false, P, pp->Hkv, pp->dv, pp->sv);
    } else {
        strides(bhsd, pp->Sk, pp->Hkv, pp->d, pp->sk);
        strides(bhsd, pp->Sk, pp->Hkv, pp->dv, pp->sv);
    }
    if (pp->varlen) { /* rows come from cu_seqlens */
        pp->sq[2] = pp->so[2] = 0;
        if (!P)
            pp->sk[2] = pp->sv[2] = 0;
    }
    double kv_rows = P ? (double)pp->npages * (double)P : (double)pp->B * (double)pp->Sk;
    double big = fmax((double)pp->B * (double)pp->Sq * (double)pp->Hq * (double)(pp->d > dv ? pp->d : dv),
                      kv_rows * (double)pp->Hkv * (double)(pp->d > dv ? pp->d : dv));
    if (big > 0x1p40)
        return pt_errf(e, PT_ERANGE, "tensors too large: more than 2^40 elements");

    /* tensor indices, in tensors()'s order */
    attn_tensors *x = &pp->t;
    int n = 0;
    x->q = n++;
    x->k = n++;
    x->v = n++;
    x->block_table = P ? n++ : -1;
    x->cu_seqlens_q = pp->varlen ? n++ : -1;
    x->cu_seqlens_k = pp->varlen ? n++ : -1;
    x->seqused_k = pp->seqused ? n++ : -1;
    x->nin = n;
    x->o = 0;
    x->lse = pp->lse ? 1 : -1;
    x->nout = pp->lse ? 2 : 1;
    *out = pp;
    return PT_OK;
}

bool attn_decode_kind(const pt_prepared *pp) { return pp->Sq <= ATTN_DECODE_MAX_SQ; }

bool attn_visible(const pt_prepared *pp, int64_t i, int64_t j, int64_t sq, int64_t sk)
{
    int64_t off = sk - sq;
    if (j < 0 || j >= sk || i < 0 || i >= sq)
        return false;
    if (pp->wl >= 0 && j < i + off - pp->wl)
        return false;
    if (pp->wr >= 0 && j > i + off + pp->wr)
        return false;
    return true;
}

/* ---------------------------------------------------------------------- */
/* dispatch by kernel kind                                                 */

static int space(const pt_prepared *pp, const pt_target *t, pt_space *s)
{
    if (attn_decode_kind(pp))
        return attn_fa3_decode_applies(pp, t) ? attn_fa3_decode_space(pp, t, s) : attn_decode_space(pp, t, s);
    return attn_fa3_applies(pp, t) ? attn_fa3_space(pp, t, s) : attn_prefill_space(pp, t, s);
}

static void defaults(const pt_prepared *pp, const pt_target *t, pt_config *c)
{
    if (attn_decode_kind(pp) && attn_fa3_decode_applies(pp, t))
        attn_fa3_decode_defaults(pp, t, c);
    else if (attn_decode_kind(pp))
        attn_decode_defaults(pp, t, c);
    else if (attn_fa3_applies(pp, t))
        attn_fa3_defaults(pp, t, c);
    else
        attn_prefill_defaults(pp, t, c);
}

/* The kind a config names (impl; the problem's kind when absent). */
static int64_t impl_of(const pt_prepared *pp, const pt_config *c)
{
    if (attn_decode_kind(pp))
        return pt_config_get(c, "impl", attn_fa3_decode_applies(pp, &pp->target) ? ATTN_FA3_SPLIT : ATTN_SPLIT);
    return pt_config_get(c, "impl", attn_decode_kind(pp) ? ATTN_SPLIT
                                    : attn_fa3_applies(pp, &pp->target) ? ATTN_FA3 : ATTN_FA2);
}

static int check(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e)
{
    switch (impl_of(pp, c)) {
    case ATTN_FA2: return attn_prefill_check(pp, t, c, e);
    case ATTN_SPLIT:
        if (pp->dt == PT_E4M3) { /* only impl=3 has fp8: say why it does not take the problem */
            pt_config fc;
            attn_fa3_decode_defaults(pp, t, &fc);
            int rc = attn_fa3_decode_check(pp, t, &fc, e);
            if (rc)
                return rc;
        }
        return attn_decode_check(pp, t, c, e);
    case ATTN_FA3_SPLIT: return attn_fa3_decode_check(pp, t, c, e);
    case ATTN_FA3: return attn_fa3_check(pp, t, c, e);
    default:
        return pt_errf(e, PT_EINVAL, "config impl=%lld: 0 (fa2, prefill), 1 (split, decode) or 2 (fa3, sm_90a prefill)",
                       (long long)impl_of(pp, c));
    }
}

static int emit(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l, pt_err *e)
{
    switch (impl_of(pp, c)) {
    case ATTN_FA2: return attn_prefill_emit(pp, c, m, l, e);
    case ATTN_SPLIT: return attn_decode_emit(pp, c, m, l, e);
    case ATTN_FA3_SPLIT: return attn_fa3_decode_emit(pp, c, m, l, e);
    case ATTN_FA3: return attn_fa3_emit(pp, c, m, l, e);
    default:
        return pt_errf(e, PT_EINVAL, "config impl=%lld: 0 (fa2, prefill), 1 (split, decode) or 2 (fa3, sm_90a prefill)",
                       (long long)impl_of(pp, c));
    }
}

/* ---------------------------------------------------------------------- */
/* tensors, counts                                                         */

/* A tensor of ndim dimensions (outermost first). */
static pt_tensor tensor(const char *name, pt_dtype dt, int ndim, const int64_t *shape)
{
    pt_tensor t = {.name = name, .dtype = dt, .numel = 1, .ndim = ndim};
    for (int i = 0; i < ndim; i++) {
        t.shape[i] = shape[i];
        t.numel *= shape[i];
    }
    return t;
}

/* q / o: [B, S, H, D] (bshd), [B, H, S, D] (bhsd), packed [B*S, H, D]
 * (varlen: the maxima's room), of dtype dt. */
static pt_tensor rows(const pt_prepared *pp, const char *name, pt_dtype dt, int64_t S, int64_t H, int64_t D)
{
    if (pp->varlen)
        return tensor(name, dt, 3, (int64_t[]){pp->B * S, H, D});
    if (pp->bhsd)
        return tensor(name, dt, 4, (int64_t[]){pp->B, H, S, D});
    return tensor(name, dt, 4, (int64_t[]){pp->B, S, H, D});
}

/* k / v: like q, or the page pools [num_pages, page_size, Hkv, D]. */
static pt_tensor keys(const pt_prepared *pp, const char *name, int64_t D)
{
    if (pp->page)
        return tensor(name, pp->dt, 4, (int64_t[]){pp->npages, pp->page, pp->Hkv, D});
    return rows(pp, name, pp->dt, pp->Sk, pp->Hkv, D);
}

static int tensors(const pt_prepared *pp, int *nin, int *nout, pt_tensor *in, pt_tensor *out)
{
    const attn_tensors *x = &pp->t;
    *nin = x->nin;
    *nout = x->nout;
    if (in) {
        in[x->q] = rows(pp, "q", pp->dt, pp->Sq, pp->Hq, pp->d);
        in[x->k] = keys(pp, "k", pp->d);
        in[x->v] = keys(pp, "v", pp->dv);
        if (x->block_table >= 0)
            in[x->block_table] =
                tensor("block_table", PT_S32, 2, (int64_t[]){pp->B, pp->pages_per_seq});
        if (x->cu_seqlens_q >= 0)
            in[x->cu_seqlens_q] = tensor("cu_seqlens_q", PT_S32, 1, (int64_t[]){pp->B + 1});
        if (x->cu_seqlens_k >= 0)
            in[x->cu_seqlens_k] = tensor("cu_seqlens_k", PT_S32, 1, (int64_t[]){pp->B + 1});
        if (x->seqused_k >= 0)
            in[x->seqused_k] = tensor("seqused_k", PT_S32, 1, (int64_t[]){pp->B});
    }
    if (out) {
        out[x->o] = rows(pp, "o", pp->odt, pp->Sq, pp->Hq, pp->dv);
        if (x->lse >= 0)
            out[x->lse] = tensor("lse", PT_F32, 3, (int64_t[]){pp->B, pp->Hq, pp->Sq});
    }
    return PT_OK;
}

/* sum over i in [0, n) of max(0, g(i)), g(i) = g0 + slope * i (slope -1,
 * 0 or 1), exactly in double (sizes < 2^31: sums < 2^62, exact below 2^53
 * for every size attention takes in practice) */
static double positive_sum(int64_t g0, int slope, int64_t n)
{
    if (n <= 0)
        return 0;
    if (slope == 0)
        return g0 > 0 ? (double)g0 * (double)n : 0;
    /* g positive on a subrange [lo, hi) */
    int64_t lo = 0, hi = n;
    if (slope > 0) {
        if (g0 <= 0)
            lo = 1 - g0 > n ? n : 1 - g0;
    } else {
        hi = g0 < n ? (g0 > 0 ? g0 : 0) : n; /* g(i) > 0 iff i < g0 */
    }
    if (hi <= lo)
        return 0;
    double first = (double)(g0 + slope * lo), last = (double)(g0 + slope * (hi - 1));
    return (first + last) * (double)(hi - lo) / 2.0;
}

double attn_visible_pairs(const pt_prepared *pp, int64_t sq, int64_t sk)
{
    /* row i sees keys [lo(i), hi(i)]: lo = max(0, i + off - wl) (0 when
     * wl < 0), hi = min(sk - 1, i + off + wr) (sk - 1 when wr < 0). Each
     * of lo and hi is linear with slope 0 or 1 between its one breakpoint,
     * so the count hi - lo + 1 is linear between at most two breakpoints. */
    if (sq <= 0 || sk <= 0)
        return 0;
    int64_t off = sk - sq;
    int64_t cut[4] = {0, sq, sq, sq};
    int nc = 1;
    if (pp->wl >= 0) { /* lo = 0 for i <= wl - off, i + off - wl after */
        int64_t b = pp->wl - off + 1;
        if (b > 0 && b < sq)
            cut[nc++] = b;
    }
    if (pp->wr >= 0) { /* hi = i + off + wr until it reaches sk - 1 */
        int64_t b = sk - off - pp->wr; /* the first i with i + off + wr > sk - 1 */
        if (b > 0 && b < sq)
            cut[nc++] = b;
    }
    cut[nc++] = sq;
    /* sort the (at most 4) cuts */
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && cut[j - 1] > cut[j]; j--) {
            int64_t tmp = cut[j];
            cut[j] = cut[j - 1];
            cut[j - 1] = tmp;
        }
    double total = 0;
    for (int s = 0; s + 1 < nc; s++) {
        int64_t a = cut[s], b = cut[s + 1];
        if (b <= a)
            continue;
        /* within [a, b): lo and hi are each constant or slope 1 */
        bool lo_lin = pp->wl >= 0 && a + off - pp->wl >= 0;
        bool hi_lin = pp->wr >= 0 && a + off + pp->wr <= sk - 1;
        int64_t lo_a = lo_lin ? a + off - pp->wl : 0;
        int64_t hi_a = hi_lin ? a + off + pp->wr : sk - 1;
        int slope = (hi_lin ? 1 : 0) - (lo_lin ? 1 : 0);
        total += positive_sum(hi_a - lo_a + 1, slope, b - a);
    }
    return total;
}

/* flops = sum over sequences and query heads of 2 (d + dv) visible pairs
 * (QK^T and PV; the softmax is not counted), at the problem's maxima. */
static double flops(const pt_prepared *pp)
{
    return 2.0 * (double)(pp->d + pp->dv) * attn_visible_pairs(pp, pp->Sq, pp->Sk) * (double)pp->B *
           (double)pp->Hq;
}

double attn_flops_fa(const pt_prepared *pp)
{
    double f = 2.0 * (double)(pp->d + pp->dv) * (double)pp->B * (double)pp->Hq * (double)pp->Sq *
               (double)pp->Sk;
    return pp->causal ? f / 2 : f;
}

/* Design 1.5, at the maxima: q, k, v and o once, lse, the block table. */
static double bytes(const pt_prepared *pp)
{
    double B = (double)pp->B, es = pp->es;
    double b = es * (B * (double)pp->Sq * (double)pp->Hq * (double)pp->d +
                     B * (double)pp->Sk * (double)pp->Hkv * (double)(pp->d + pp->dv)) +
               (double)pp->oes * B * (double)pp->Sq * (double)pp->Hq * (double)pp->dv;
    if (pp->lse)
        b += 4.0 * B * (double)pp->Hq * (double)pp->Sq;
    if (pp->page)
        b += 4.0 * B * (double)pp->pages_per_seq;
    if (pp->varlen)
        b += 2 * 4.0 * (B + 1);
    if (pp->seqused)
        b += 4.0 * B;
    return b;
}

/* The cost model's view of a config: prefill is compute-bound over the
 * ideal traffic (K/V re-reads of the m blocks of one head hit L2); split
 * decode adds each split's partial O and LSE, written and read back once
 * (design 1.5: 2 * 4 * splits * B * Hq * Sq * (dv + 1)). Both kinds stream
 * K/V through cp.async buffers. */
static void cost(const pt_prepared *pp, const pt_config *c, pt_cost *out)
{
    *out = (pt_cost){bytes(pp), true};
    if (impl_of(pp, c) != ATTN_SPLIT && impl_of(pp, c) != ATTN_FA3_SPLIT)
        return;
    int64_t splits = pt_config_get(c, "splits", 1);
    if (splits > 1)
        out->traffic += 2.0 * 4.0 * (double)splits * (double)pp->B * (double)pp->Hq *
                        (double)pp->Sq * (double)(pp->dv + 1);
}

/* ---- the op with adversarial inputs (attn_plant), one per kind ---- */

#define ADV_INIT(K)                                                                               \
    static void adv_init_##K(const pt_prepared *pp, uint64_t seed, pt_tensor *in)                 \
    {                                                                                             \
        attn_init_inputs(pp, seed, in);                                                           \
        attn_plant(pp, ATTN_ADV_##K, seed, in);                                                   \
    }
ADV_INIT(Q_NAN)
ADV_INIT(Q_POSINF)
ADV_INIT(Q_NEGINF)
ADV_INIT(Q_HUGE)
ADV_INIT(K_NAN)
ADV_INIT(K_POSINF)
ADV_INIT(K_NEGINF)
ADV_INIT(K_HUGE_FIRST)
ADV_INIT(K_HUGE_LAST)
ADV_INIT(V_NAN)
ADV_INIT(V_POSINF)
ADV_INIT(V_NEGINF)

static const pt_problem examples[] = {
    {.op = "attention", .batch = 1, .heads_q = 32, .heads_kv = 8, .seqlen_q = 4096,
     .seqlen_k = 4096, .head_dim = 128, .causal = true, .dtype = PT_BF16},
    {.op = "attention", .batch = 16, .heads_q = 32, .heads_kv = 8, .seqlen_q = 1,
     .seqlen_k = 8192, .head_dim = 128, .dtype = PT_BF16, .page_size = 16},
};

#define gen_attention_op_summary                                                                \
    "o = softmax(mask(scale * q k^T)) v: flash-attention prefill (mma.sync) and "              \
    "split-KV decode over a paged KV cache; GQA, causal/window masks, varlen"

const pt_op gen_attention_op = {
    .name = "attention",
    .summary = gen_attention_op_summary,
    .schema = &gen_attention_schema,
    .prepare = prepare,
    .space = space,
    .defaults = defaults,
    .check = check,
    .emit = emit,
    .tensors = tensors,
    .reference = attn_reference,
    .reference_at = attn_reference_at,
    .magnitude = attn_magnitude,
    .init_inputs = attn_init_inputs,
    .check_inputs = attn_check_inputs,
    .tolerance = attn_tolerance,
    .padding = attn_padding,
    .cost = cost,
    .flops = flops,
    .flops_quoted = attn_flops_fa,
    .flops_quoted_name = "flash-attention",
    .bytes = bytes,
    .examples = examples,
    .nexamples = 2,
};

#define ADV_OP(K)                                                                                 \
    [ATTN_ADV_##K] = {.name = "attention", .summary = gen_attention_op_summary,                   \
                      .schema = &gen_attention_schema, .prepare = prepare, .space = space,          \
                      .defaults = defaults, .check = check, .emit = emit, .tensors = tensors,        \
                      .reference = attn_reference, .reference_at = attn_reference_at,                \
                      .magnitude = attn_magnitude, .init_inputs = adv_init_##K,                      \
                      .check_inputs = attn_check_inputs, .tolerance = attn_tolerance,                \
                      .padding = attn_padding, .cost = cost, .flops = flops,                         \
                      .flops_quoted = attn_flops_fa, .flops_quoted_name = "flash-attention",         \
                      .bytes = bytes, .examples = examples, .nexamples = 2}

static const pt_op adversarial_ops[ATTN_ADV_N] = {
    ADV_OP(Q_NAN),    ADV_OP(Q_POSINF),     ADV_OP(Q_NEGINF),    ADV_OP(Q_HUGE),
    ADV_OP(K_NAN),    ADV_OP(K_POSINF),     ADV_OP(K_NEGINF),    ADV_OP(K_HUGE_FIRST),
    ADV_OP(K_HUGE_LAST), ADV_OP(V_NAN),     ADV_OP(V_POSINF),    ADV_OP(V_NEGINF),
};

const pt_op *gen_attention_adversarial_op(attn_adv kind)
{
    if (kind == ATTN_ADV_NONE)
        return &gen_attention_op;
    if (kind < 0 || kind >= ATTN_ADV_N)
        return NULL;
    return &adversarial_ops[kind];
}
