/* Attention's reference side (gen/attention_int.h): the float64 reference
 * and its sampled form, accumulation magnitudes for the verifier's error
 * model, structured inputs (lengths, offsets, block tables), the input
 * check, per-output tolerances and the padding of varlen outputs.
 *
 * Every value is computed from the stored (rounded) inputs in double, one
 * query row at a time: a row costs Sk_b (d + dv). Lengths and page indices
 * are read defensively (clamped into range): the verifier's input check
 * (attn_check_inputs) refuses bad ones before a launch, and the reference
 * must not read outside its tensors whatever it is given. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gen/attention_int.h"

static int64_t clamp64(double v, int64_t lo, int64_t hi)
{
    if (!(v >= (double)lo))
        return lo;
    if (v > (double)hi)
        return hi;
    return (int64_t)v;
}

attn_seq attn_seq_of(const pt_prepared *pp, const pt_tensor *in, int64_t b)
{
    attn_seq s = {pp->Sq, pp->Sk, 0, 0};
    const attn_tensors *x = &pp->t;
    if (pp->varlen) {
        const double *cq = in[x->cu_seqlens_q].data, *ck = in[x->cu_seqlens_k].data;
        int64_t qcap = pp->B * pp->Sq, kcap = pp->B * pp->Sk;
        s.q0 = clamp64(cq[b], 0, qcap);
        s.sq = clamp64(cq[b + 1] - cq[b], 0, pp->Sq);
        if (s.q0 + s.sq > qcap)
            s.sq = qcap - s.q0;
        int64_t k0 = clamp64(ck[b], 0, kcap);
        s.sk = clamp64(ck[b + 1] - ck[b], 0, pp->Sk);
        if (!pp->page) {
            s.k0 = k0;
            if (s.k0 + s.sk > kcap)
                s.sk = kcap - s.k0;
        }
    }
    if (pp->seqused)
        s.sk = clamp64(in[x->seqused_k].data[b], 0, s.sk);
    return s;
}

/* Element offsets of row i, head h of sequence b in q / o. */
static int64_t q_at(const pt_prepared *pp, const attn_seq *s, int64_t b, int64_t i, int64_t h)
{
    return b * pp->sq[2] + (s->q0 + i) * pp->sq[0] + h * pp->sq[1];
}
static int64_t o_at(const pt_prepared *pp, const attn_seq *s, int64_t b, int64_t i, int64_t h)
{
    return b * pp->so[2] + (s->q0 + i) * pp->so[0] + h * pp->so[1];
}
/* Key j of sequence b, kv head hk, in k (st = pp->sk) or v (pp->sv). */
static int64_t kv_at(const pt_prepared *pp, const pt_tensor *in, const attn_seq *s,
                     const int64_t st[3], int64_t b, int64_t j, int64_t hk)
{
    if (pp->page) {
        const double *bt = in[pp->t.block_table].data;
        int64_t page = clamp64(bt[b * pp->pages_per_seq + j / pp->page], 0, pp->npages - 1);
        return page * st[2] + (j % pp->page) * st[0] + hk * st[1];
    }
    return b * st[2] + (s->k0 + j) * st[0] + hk * st[1];
}

/* Scratch of one evaluation: every sequence's lengths and two rows of Sk. */
typedef struct ref_ws {
    attn_seq *seq;
    double *s, *a; /* scores; |d score| bound per key */
    double *sq;    /* dv sums of squares (magnitudes) */
} ref_ws;

static int ws_new(const pt_prepared *pp, const pt_tensor *in, ref_ws *w, pt_err *e)
{
    w->seq = malloc((size_t)pp->B * sizeof *w->seq);
    w->s = malloc((size_t)pp->Sk * sizeof *w->s);
    w->a = malloc((size_t)pp->Sk * sizeof *w->a);
    w->sq = malloc((size_t)pp->dv * sizeof *w->sq);
    if (!w->seq || !w->s || !w->a || !w->sq) {
        free(w->seq);
        free(w->s);
        free(w->a);
        free(w->sq);
        return pt_errf(e, PT_ENOMEM, "attention reference: out of memory");
    }
    for (int64_t b = 0; b < pp->B; b++)
        w->seq[b] = attn_seq_of(pp, in, b);
    return PT_OK;
}

static void ws_free(ref_ws *w)
{
    free(w->seq);
    free(w->s);
    free(w->a);
    free(w->sq);
}

/* The error model of o (attn_magnitude). The kernels round P to the input
 * dtype for the P.V tensor-core product, so each term p_j v_jc carries one
 * independent rounding of relative size u(dtype): the error is about
 * u * sqrt(sum_j (p_j v_jc)^2), the allowance of one rounding (len 1) in
 * that dtype with mag = the terms' root sum of squares. The f32 sums (q.k
 * over d, P.V and l over the keys) are first-order smaller; they ride along
 * scaled to that dtype: f32_share * (sum_j p_j |v_jc| + sum_j p_j |v_jc -
 * o_c| A_j), with A_j = |scale| sum_c |q_c k_jc| times the softcap's slope
 * (the scores' error through the softmax, do_c/ds_j = p_j (v_jc - o_c)). */
static double unit_roundoff(pt_dtype dt) { return dt == PT_F16 ? 0x1p-11 : dt == PT_E4M3 ? 0x1p-4 : 0x1p-8; }
/* The dtype of that one rounding: o's, or e4m3 for e4m3 inputs, whose
 * kernels may round P to e4m3 (the sm_90a prefill kernel does, as
 * flash-attention 3; P in [0, 256], normal down to 2^-14 of the row max) */
static pt_dtype pv_dtype(const pt_prepared *pp) { return pp->dt == PT_E4M3 ? PT_E4M3 : pp->odt; }
static int64_t f32_len(const pt_prepared *pp) { return pp->Sk > pp->d ? pp->Sk : pp->d; }
static double f32_share(const pt_prepared *pp)
{
    return sqrt((double)f32_len(pp)) * 0x1p-24 / unit_roundoff(pv_dtype(pp));
}

/* One query row: o[dv] and lse, and (when mo is not NULL) the magnitudes:
 * mo[c] as above; *mlse = 1 (the row sum l, d lse / d l = 1/l) + sum_j p_j
 * A_j, in f32 (lse is computed from f32 row statistics). A row with no
 * visible key: o = 0, lse = -inf (magnitudes 0 and inf). */
static void row_eval(const pt_prepared *pp, const pt_tensor *in, ref_ws *w, int64_t b, int64_t h,
                     int64_t i, double *o, double *lse, double *mo, double *mlse)
{
    const attn_seq *s = &w->seq[b];
    const attn_tensors *x = &pp->t;
    int64_t hk = h / pp->group, d = pp->d, dv = pp->dv;
    const double *qv = in[x->q].data + q_at(pp, s, b, i, h);
    const double *K = in[x->k].data, *V = in[x->v].data;
    double scale = (double)pp->scale, cap = (double)pp->softcap;
    double m = -INFINITY;
    bool nan = false; /* a visible key's score is NaN (a NaN in q or k) */
    for (int64_t j = 0; j < s->sk; j++) {
        w->s[j] = -INFINITY;
        if (!attn_visible(pp, i, j, s->sq, s->sk))
            continue;
        const double *kv = K + kv_at(pp, in, s, pp->sk, b, j, hk);
        double dot = 0, adot = 0;
        for (int64_t c = 0; c < d; c++) {
            dot += qv[c] * kv[c];
            adot += fabs(qv[c] * kv[c]);
        }
        double v = scale * dot, slope = 1;
        if (cap > 0) {
            double t = tanh(v / cap);
            v = cap * t;
            slope = 1 - t * t;
        }
        w->s[j] = v;
        w->a[j] = fabs(scale) * adot * slope;
        nan |= isnan(v);
        if (v > m)
            m = v;
    }
    for (int64_t c = 0; c < dv; c++) {
        o[c] = nan ? NAN : 0;
        if (mo)
            mo[c] = nan ? NAN : 0;
    }
    if (nan) { /* the whole row is NaN, as torch and flash-attention give */
        *lse = NAN;
        if (mlse)
            *mlse = NAN;
        return;
    }
    if (m == -INFINITY) { /* no visible key */
        *lse = -INFINITY;
        if (mlse)
            *mlse = INFINITY;
        return;
    }
    double l = 0;
    for (int64_t j = 0; j < s->sk; j++)
        if (w->s[j] != -INFINITY)
            l += exp(w->s[j] - m);
    double ma = 0;
    for (int64_t j = 0; j < s->sk; j++) {
        if (w->s[j] == -INFINITY)
            continue;
        double p = exp(w->s[j] - m) / l;
        w->s[j] = p; /* from here on: the probability */
        const double *vv = V + kv_at(pp, in, s, pp->sv, b, j, hk);
        for (int64_t c = 0; c < dv; c++)
            o[c] += p * vv[c];
        ma += p * w->a[j];
    }
    *lse = m + log(l);
    double vs = (double)pp->vscale; /* e4m3: o = descale_v sum p v (1 otherwise) */
    if (vs != 1)
        for (int64_t c = 0; c < dv; c++)
            o[c] *= vs;
    if (!mo)
        return;
    *mlse = 1 + ma;
    double share = f32_share(pp);
    for (int64_t c = 0; c < dv; c++)
        w->sq[c] = 0;
    for (int64_t j = 0; j < s->sk; j++) {
        if (w->s[j] == -INFINITY)
            continue;
        const double *vv = V + kv_at(pp, in, s, pp->sv, b, j, hk);
        for (int64_t c = 0; c < dv; c++) {
            double t = w->s[j] * vv[c];
            w->sq[c] += t * t;
            mo[c] += w->s[j] * (fabs(vv[c]) + fabs(vv[c] - o[c] / vs) * w->a[j]);
        }
    }
    for (int64_t c = 0; c < dv; c++)
        mo[c] = fabs(vs) * (sqrt(w->sq[c]) + share * mo[c]);
}

int attn_reference(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    ref_ws w;
    int rc = ws_new(pp, in, &w, e);
    if (rc)
        return rc;
    const attn_tensors *x = &pp->t;
    double *O = out[x->o].data, *L = x->lse >= 0 ? out[x->lse].data : NULL;
    memset(O, 0, (size_t)out[x->o].numel * sizeof *O);
    if (L)
        memset(L, 0, (size_t)out[x->lse].numel * sizeof *L);
    double *row = malloc((size_t)pp->dv * sizeof *row);
    if (!row) {
        ws_free(&w);
        return pt_errf(e, PT_ENOMEM, "attention reference: out of memory");
    }
    for (int64_t b = 0; b < pp->B; b++)
        for (int64_t h = 0; h < pp->Hq; h++)
            for (int64_t i = 0; i < w.seq[b].sq; i++) {
                double lse;
                row_eval(pp, in, &w, b, h, i, row, &lse, NULL, NULL);
                memcpy(O + o_at(pp, &w.seq[b], b, i, h), row, (size_t)pp->dv * sizeof *row);
                if (L)
                    L[(b * pp->Hq + h) * pp->Sq + i] = lse;
            }
    free(row);
    ws_free(&w);
    return PT_OK;
}

/* Where element idx of output `out` lives: sequence b, head h, row i,
 * column c (lse: c = 0). False for padding (varlen rows past a sequence's
 * length, past the packed total). */
static bool locate(const pt_prepared *pp, const ref_ws *w, int out, int64_t idx, int64_t *b,
                   int64_t *h, int64_t *i, int64_t *c)
{
    if (out == pp->t.lse) {
        *c = 0;
        *i = idx % pp->Sq;
        int64_t r = idx / pp->Sq;
        *h = r % pp->Hq;
        *b = r / pp->Hq;
        return *i < w->seq[*b].sq;
    }
    *c = idx % pp->dv;
    int64_t r = idx / pp->dv;
    if (pp->varlen) { /* token-major packed rows */
        *h = r % pp->Hq;
        int64_t tok = r / pp->Hq;
        int64_t lo = 0, hi = pp->B - 1;
        while (lo < hi) { /* the last sequence starting at or before tok */
            int64_t mid = (lo + hi + 1) / 2;
            if (w->seq[mid].q0 <= tok)
                lo = mid;
            else
                hi = mid - 1;
        }
        /* empty sequences share their start with the next: take the one
         * whose rows hold tok, if any */
        for (int64_t q = lo; q >= 0 && w->seq[q].q0 <= tok; q--)
            if (tok < w->seq[q].q0 + w->seq[q].sq) {
                *b = q;
                *i = tok - w->seq[q].q0;
                return true;
            }
        return false;
    }
    if (pp->bhsd) {
        *i = r % pp->Sq;
        r /= pp->Sq;
        *h = r % pp->Hq;
        *b = r / pp->Hq;
    } else {
        *h = r % pp->Hq;
        r /= pp->Hq;
        *i = r % pp->Sq;
        *b = r / pp->Sq;
    }
    return true;
}

/* vals (and/or mags) at the given elements, one row evaluation per
 * distinct row in a run of indices. */
static int eval_at(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                   int64_t n, double *vals, double *mags, pt_err *e)
{
    const attn_tensors *x = &pp->t;
    if (out != x->o && out != x->lse)
        return pt_errf(e, PT_EINVAL, "attention: no output %d", out);
    int64_t numel = out == x->o ? pp->B * pp->Sq * pp->Hq * pp->dv : pp->B * pp->Hq * pp->Sq;
    ref_ws w;
    int rc = ws_new(pp, in, &w, e);
    if (rc)
        return rc;
    double *o = malloc((size_t)pp->dv * sizeof *o), *mo = malloc((size_t)pp->dv * sizeof *mo);
    if (!o || !mo) {
        free(o);
        free(mo);
        ws_free(&w);
        return pt_errf(e, PT_ENOMEM, "attention reference: out of memory");
    }
    int64_t cb = -1, ch = -1, ci = -1;
    double lse = 0, mlse = 0;
    for (int64_t j = 0; j < n && !rc; j++) {
        int64_t at = idx ? idx[j] : j;
        if (at < 0 || at >= numel) {
            rc = pt_errf(e, PT_ERANGE, "attention reference: index %lld outside %s (%lld elements)",
                         (long long)at, out == x->o ? "o" : "lse", (long long)numel);
            break;
        }
        int64_t b, h, i, c;
        if (!locate(pp, &w, out, at, &b, &h, &i, &c)) {
            if (vals)
                vals[j] = 0;
            if (mags)
                mags[j] = 0;
            continue;
        }
        if (b != cb || h != ch || i != ci) {
            row_eval(pp, in, &w, b, h, i, o, &lse, mo, &mlse);
            cb = b;
            ch = h;
            ci = i;
        }
        bool is_o = out == x->o;
        if (vals)
            vals[j] = is_o ? o[c] : lse;
        if (mags)
            mags[j] = is_o ? mo[c] : mlse;
    }
    free(o);
    free(mo);
    ws_free(&w);
    return rc;
}

int attn_reference_at(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                      int n, double *vals, pt_err *e)
{
    return eval_at(pp, in, out, idx, n, vals, NULL, e);
}

int attn_magnitude(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                   int64_t n, double *mag, pt_accum *acc, pt_err *e)
{
    /* o: one rounding of each P.V term in the input dtype (the f32 sums
     * scaled into it, row_eval); lse: f32 sums over Sk_b keys and d */
    bool is_o = out == pp->t.o;
    acc->dtype = is_o ? pv_dtype(pp) : PT_F32;
    acc->len = is_o ? 1 : f32_len(pp);
    return eval_at(pp, in, out, idx, n, NULL, mag, e);
}

/* ---- structured inputs ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (lo <= hi). */
static int64_t rand_in(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(splitmix(s) % (uint64_t)(hi - lo + 1));
}

/* len[b] in [1, max[b]], random; with two sequences or more one of them
 * has length 1 and another a ragged length (neither 1 nor its maximum,
 * where the maximum leaves room), with three or more a third the maximum. */
static void pick_lengths(uint64_t *s, int64_t B, const int64_t *max, int64_t *len)
{
    for (int64_t b = 0; b < B; b++)
        len[b] = rand_in(s, 1, max[b]);
    if (B < 2)
        return;
    int64_t r = rand_in(s, 0, B - 1);
    len[r] = 1;
    int64_t m2 = max[(r + 1) % B];
    len[(r + 1) % B] = m2 > 2 ? rand_in(s, 2, m2 - 1) : m2;
    if (B >= 3)
        len[(r + 2) % B] = max[(r + 2) % B];
}

/* used[i] = 1 where element i of k (t = 0) or v (t = 1) belongs to a key
 * of some sequence (calloc'd; NULL: out of memory). */
static uint8_t *kv_used(const pt_prepared *pp, const pt_tensor *in, int t)
{
    const int64_t *st = t ? pp->sv : pp->sk;
    int64_t w = t ? pp->dv : pp->d, n = in[t ? pp->t.v : pp->t.k].numel;
    uint8_t *used = calloc((size_t)(n ? n : 1), 1);
    if (!used)
        return NULL;
    for (int64_t b = 0; b < pp->B; b++) {
        attn_seq s = attn_seq_of(pp, in, b);
        for (int64_t j = 0; j < s.sk; j++)
            for (int64_t hk = 0; hk < pp->Hkv; hk++) {
                int64_t o = kv_at(pp, in, &s, st, b, j, hk);
                for (int64_t c = 0; c < w && o + c < n; c++)
                    used[o + c] = 1;
            }
    }
    return used;
}

/* Every K and V element no key of any sequence uses (a page's tail past
 * the sequence's keys, pool pages no block-table entry of a key names, the
 * rows past seqused_k or past the last packed sequence) holds NaN, +inf or
 * -inf, as a serving engine's unused KV slots hold garbage: a kernel may
 * load them (a whole page, a whole key block) but never use them, and the
 * reference ignores them, so a kernel that lets one reach o or lse (0 P
 * times a NaN V, a masked score added to a NaN) fails verification. */
static void poison_slack(const pt_prepared *pp, pt_tensor *in)
{
    static const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (int t = 0; t < 2; t++) {
        pt_tensor *kv = &in[t ? pp->t.v : pp->t.k];
        uint8_t *used = kv_used(pp, in, t);
        if (!used)
            return; /* the noise stays: only less adversarial */
        for (int64_t i = 0; i < kv->numel; i++)
            if (!used[i])
                kv->data[i] = bad[i % 3];
        free(used);
    }
}

void attn_init_inputs(const pt_prepared *pp, uint64_t seed, pt_tensor *in)
{
    uint64_t s = (seed ? seed : 1) ^ 0x5eed0a77e0f10ull;
    const attn_tensors *x = &pp->t;
    int64_t B = pp->B;
    int64_t *max = calloc((size_t)B, sizeof *max), *len = calloc((size_t)B, sizeof *len);
    int64_t *klen = calloc((size_t)B, sizeof *klen);
    if (!max || !len || !klen)
        goto done; /* the uniform values stay: the input check refuses them */
    for (int64_t b = 0; b < B; b++)
        klen[b] = pp->Sk;
    if (pp->varlen) {
        double *cq = in[x->cu_seqlens_q].data, *ck = in[x->cu_seqlens_k].data;
        for (int64_t b = 0; b < B; b++)
            max[b] = pp->Sq;
        pick_lengths(&s, B, max, len);
        cq[0] = 0;
        for (int64_t b = 0; b < B; b++)
            cq[b + 1] = cq[b] + (double)len[b];
        for (int64_t b = 0; b < B; b++)
            max[b] = pp->Sk;
        pick_lengths(&s, B, max, klen);
        ck[0] = 0;
        for (int64_t b = 0; b < B; b++)
            ck[b + 1] = ck[b] + (double)klen[b];
    }
    if (pp->seqused) {
        double *su = in[x->seqused_k].data;
        pick_lengths(&s, B, klen, len);
        for (int64_t b = 0; b < B; b++)
            su[b] = (double)len[b];
    }
    if (pp->page) {
        /* distinct pages in random order when the pool has enough (a wrong
         * page index reads another sequence's data), else random pages */
        double *bt = in[x->block_table].data;
        int64_t need = B * pp->pages_per_seq, np = pp->npages;
        if (np >= need) {
            int64_t *perm = malloc((size_t)np * sizeof *perm);
            if (perm) {
                for (int64_t p = 0; p < np; p++)
                    perm[p] = p;
                for (int64_t p = np - 1; p > 0; p--) {
                    int64_t q = rand_in(&s, 0, p), t = perm[p];
                    perm[p] = perm[q];
                    perm[q] = t;
                }
                for (int64_t k = 0; k < need; k++)
                    bt[k] = (double)perm[k];
                free(perm);
            }
        } else {
            for (int64_t k = 0; k < need; k++)
                bt[k] = (double)rand_in(&s, 0, np - 1);
        }
    }
    poison_slack(pp, in);
done:
    free(max);
    free(len);
    free(klen);
}

/* cu_seqlens_{q,k}: nondecreasing from cu[0] >= 0, each length at most the
 * maximum, the total within the packed tensor (cap rows; 0: no cap). */
static int check_cu(const char *name, const double *cu, int64_t B, int64_t maxlen, int64_t cap,
                    const char *maxname, pt_err *e)
{
    if (cu[0] < 0)
        return pt_errf(e, PT_ERANGE, "%s[0] = %.0f: must be >= 0", name, cu[0]);
    for (int64_t b = 0; b < B; b++) {
        double l = cu[b + 1] - cu[b];
        if (l < 0)
            return pt_errf(e, PT_ERANGE, "%s[%lld] = %.0f: below %s[%lld] = %.0f", name,
                           (long long)b + 1, cu[b + 1], name, (long long)b, cu[b]);
        if (l > (double)maxlen)
            return pt_errf(e, PT_ERANGE, "%s: sequence %lld has %.0f rows, more than %s=%lld",
                           name, (long long)b, l, maxname, (long long)maxlen);
    }
    if (cap && cu[B] > (double)cap)
        return pt_errf(e, PT_ERANGE, "%s[%lld] = %.0f: past the packed tensor's %lld rows", name,
                       (long long)B, cu[B], (long long)cap);
    return PT_OK;
}

int attn_check_inputs(const pt_prepared *pp, const pt_tensor *in, pt_err *e)
{
    const attn_tensors *x = &pp->t;
    int64_t B = pp->B;
    if (pp->varlen) {
        int rc = check_cu("cu_seqlens_q", in[x->cu_seqlens_q].data, B, pp->Sq, B * pp->Sq,
                          "seqlen_q", e);
        if (!rc)
            rc = check_cu("cu_seqlens_k", in[x->cu_seqlens_k].data, B, pp->Sk,
                          pp->page ? 0 : B * pp->Sk, "seqlen_k", e);
        if (rc)
            return rc;
    }
    if (pp->seqused) {
        const double *su = in[x->seqused_k].data;
        for (int64_t b = 0; b < B; b++) {
            int64_t kmax = pp->Sk;
            if (pp->varlen) {
                const double *ck = in[x->cu_seqlens_k].data;
                kmax = (int64_t)(ck[b + 1] - ck[b]);
            }
            if (!(su[b] >= 0) || su[b] > (double)kmax)
                return pt_errf(e, PT_ERANGE, "seqused_k[%lld] = %.0f: outside 0..%lld (%s)",
                               (long long)b, su[b], (long long)kmax,
                               pp->varlen ? "the sequence's keys in cu_seqlens_k" : "seqlen_k");
        }
    }
    if (pp->page) {
        const double *bt = in[x->block_table].data;
        for (int64_t k = 0; k < B * pp->pages_per_seq; k++)
            if (!(bt[k] >= 0) || bt[k] >= (double)pp->npages)
                return pt_errf(e, PT_ERANGE, "block_table[%lld][%lld] = %.0f: outside the pool (num_pages=%lld)",
                               (long long)(k / pp->pages_per_seq), (long long)(k % pp->pages_per_seq),
                               bt[k], (long long)pp->npages);
    }
    return PT_OK;
}

void attn_tolerance(const pt_prepared *pp, int out, pt_tol *tol)
{
    *tol = (pt_tol){0, 0};
    if (out == pp->t.lse) /* f32 from ex2/lg2 row statistics: absolute, against max |lse| */
        *tol = (pt_tol){ATTN_LSE_TOL, 1.0};
}

/* ---- non-finite v: what is specified ----
 * A NaN or inf in v at key j (kv head hk, column c) reaches column c of
 * the rows that see key j: NaN there (p_j v = NaN), inf of its sign where
 * the row's p_j >= 2^-14 (a P element the kernels keep nonzero in f16 and
 * bf16, rescales included; below that the kernels' P may underflow to 0
 * and 0 * inf is NaN). Column c of the other rows is unspecified: the
 * P.V product of a tile multiplies a masked key's p = 0 by the element
 * (NaN), as flash-attention and torch's math kernel do, while rows of
 * tiles that never load key j keep their value. Those elements are left
 * out of the comparison (attn_padding). */
enum { NONFINITE_V_ROWS = 16 }; /* inf elements judged row by row; past that, unspecified */
#define P_KEPT 0x1p-14

/* Every (sequence, key) whose v row holds v element idx: calls mark_key. */
static void nonfinite_v_rows(const pt_prepared *pp, const pt_tensor *in, ref_ws *w, int64_t idx, bool judge,
                             double *o, uint8_t *mask)
{
    const int64_t *st = pp->sv;
    int64_t dv = pp->dv, c = idx % dv, hk, b0 = 0, b1 = pp->B, j0 = -1, tok = -1, page = -1;
    if (pp->page) { /* pools [page, row, hk, c] */
        page = idx / st[2];
        int64_t r = idx % st[2];
        j0 = r / st[0];
        hk = (r % st[0]) / st[1];
    } else if (pp->varlen) { /* packed [token, hk, c] */
        tok = idx / st[0];
        hk = (idx % st[0]) / st[1];
    } else {
        b0 = idx / st[2];
        b1 = b0 + 1;
        int64_t r = idx % st[2];
        if (!pp->bhsd) { /* bshd (the layout, not the strides: with one kv head both are dv) */
            j0 = r / st[0];
            hk = (r % st[0]) / st[1];
        } else {
            hk = r / st[1];
            j0 = (r % st[1]) / st[0];
        }
    }
    double val = in[pp->t.v].data[idx];
    for (int64_t b = b0; b < b1 && b < pp->B; b++) {
        const attn_seq *s = &w->seq[b];
        int64_t nkeys = pp->page ? pp->pages_per_seq : 1;
        for (int64_t k = 0; k < nkeys; k++) {
            int64_t j = j0;
            if (pp->page) {
                if (clamp64(in[pp->t.block_table].data[b * pp->pages_per_seq + k], 0, pp->npages - 1) != page)
                    continue;
                j = k * pp->page + j0;
            } else if (pp->varlen) {
                j = tok - s->k0;
            }
            if (j < 0 || j >= s->sk)
                continue;
            for (int64_t h = hk * pp->group; h < (hk + 1) * pp->group; h++)
                for (int64_t i = 0; i < s->sq; i++) {
                    bool spec = attn_visible(pp, i, j, s->sq, s->sk);
                    if (spec && !isnan(val)) { /* inf: where p_j keeps it */
                        spec = judge;
                        if (spec) {
                            double lse;
                            row_eval(pp, in, w, b, h, i, o, &lse, NULL, NULL);
                            /* w->s[j]: p_j of a finite row (a NaN row is NaN everywhere) */
                            spec = isnan(lse) || w->s[j] >= P_KEPT;
                        }
                    }
                    if (!spec)
                        mask[o_at(pp, s, b, i, h) + c] = 1;
                }
        }
    }
}

static int nonfinite_v(const pt_prepared *pp, const pt_tensor *in, uint8_t *mask, pt_err *e)
{
    const pt_tensor *V = &in[pp->t.v];
    /* only elements of some sequence's keys count: the slack's NaN / inf
     * (poison_slack) reach no output and must not turn the judged inf
     * rows into unspecified ones */
    uint8_t *used = kv_used(pp, in, 1);
    if (!used)
        return pt_errf(e, PT_ENOMEM, "out of memory (attention v's used elements)");
    int64_t ninf = 0, nbad = 0;
    for (int64_t k = 0; k < V->numel; k++)
        if (used[k] && !isfinite(V->data[k])) {
            nbad++;
            ninf += isinf(V->data[k]) != 0; /* glibc: -1 for -inf */
        }
    if (!nbad) {
        free(used);
        return PT_OK;
    }
    double *o = malloc((size_t)pp->dv * sizeof *o); /* one row's output, for row_eval */
    if (!o) {
        free(used);
        return pt_errf(e, PT_ENOMEM, "out of memory (attention reference row)");
    }
    ref_ws w;
    int rc = ws_new(pp, in, &w, e);
    if (rc) {
        free(o);
        free(used);
        return rc;
    }
    for (int64_t k = 0; k < V->numel; k++)
        if (used[k] && !isfinite(V->data[k]))
            nonfinite_v_rows(pp, in, &w, k, ninf <= NONFINITE_V_ROWS, o, mask);
    ws_free(&w);
    free(o);
    free(used);
    return PT_OK;
}

int attn_padding(const pt_prepared *pp, const pt_tensor *in, int out, uint8_t *mask, pt_err *e)
{
    const attn_tensors *x = &pp->t;
    if (out != x->o && out != x->lse)
        return pt_errf(e, PT_EINVAL, "attention: no output %d", out);
    int64_t numel = out == x->o ? pp->B * pp->Sq * pp->Hq * pp->dv : pp->B * pp->Hq * pp->Sq;
    memset(mask, 0, (size_t)numel);
    if (!pp->varlen)
        return out == x->o ? nonfinite_v(pp, in, mask, e) : PT_OK;
    memset(mask, 1, (size_t)numel);
    for (int64_t b = 0; b < pp->B; b++) {
        attn_seq s = attn_seq_of(pp, in, b);
        for (int64_t h = 0; h < pp->Hq; h++)
            for (int64_t i = 0; i < s.sq; i++) {
                if (out == x->lse)
                    mask[(b * pp->Hq + h) * pp->Sq + i] = 0;
                else
                    memset(mask + o_at(pp, &s, b, i, h), 0, (size_t)pp->dv);
            }
    }
    return out == x->o ? nonfinite_v(pp, in, mask, e) : PT_OK;
}

/* ---- adversarial inputs ---- */

void attn_plant(const pt_prepared *pp, attn_adv kind, uint64_t seed, pt_tensor *in)
{
    if (kind <= ATTN_ADV_NONE || kind >= ATTN_ADV_N)
        return;
    uint64_t s = (seed ? seed : 1) ^ 0xadd5eed0a77ull;
    const attn_tensors *x = &pp->t;
    /* a sequence with rows and keys, from a random start */
    int64_t b0 = rand_in(&s, 0, pp->B - 1), b = -1;
    attn_seq q = {0, 0, 0, 0};
    for (int64_t t = 0; t < pp->B && b < 0; t++) {
        attn_seq c = attn_seq_of(pp, in, (b0 + t) % pp->B);
        if (c.sq > 0 && c.sk > 0) {
            b = (b0 + t) % pp->B;
            q = c;
        }
    }
    if (b < 0)
        return;
    static const double vals[ATTN_ADV_N] = {
        [ATTN_ADV_Q_NAN] = NAN, [ATTN_ADV_Q_POSINF] = INFINITY, [ATTN_ADV_Q_NEGINF] = -INFINITY,
        [ATTN_ADV_Q_HUGE] = ATTN_HUGE, [ATTN_ADV_K_NAN] = NAN, [ATTN_ADV_K_POSINF] = INFINITY,
        [ATTN_ADV_K_NEGINF] = -INFINITY, [ATTN_ADV_K_HUGE_FIRST] = ATTN_HUGE, [ATTN_ADV_K_HUGE_LAST] = ATTN_HUGE,
        [ATTN_ADV_V_NAN] = NAN, [ATTN_ADV_V_POSINF] = INFINITY, [ATTN_ADV_V_NEGINF] = -INFINITY,
    };
    double v = vals[kind];
    /* a row with visible keys [lo, hi] (from a random start), and its keys */
    int64_t i0 = rand_in(&s, 0, q.sq - 1), i = -1, lo = 0, hi = -1, off = q.sk - q.sq;
    for (int64_t t = 0; t < q.sq && i < 0; t++) {
        int64_t r = (i0 + t) % q.sq;
        lo = pp->wl >= 0 ? r + off - pp->wl : 0;
        hi = pp->wr >= 0 ? r + off + pp->wr : q.sk - 1;
        lo = lo < 0 ? 0 : lo;
        hi = hi > q.sk - 1 ? q.sk - 1 : hi;
        if (lo <= hi)
            i = r;
    }
    if (i < 0)
        return; /* no row of this sequence sees a key */
    if (kind <= ATTN_ADV_Q_HUGE) {
        int64_t h = rand_in(&s, 0, pp->Hq - 1), c = rand_in(&s, 0, pp->d - 1);
        in[x->q].data[q_at(pp, &q, b, i, h) + c] = v;
        return;
    }
    bool is_k = kind <= ATTN_ADV_K_HUGE_LAST;
    int64_t j = rand_in(&s, lo, hi);
    if (kind == ATTN_ADV_K_HUGE_FIRST) /* in the first key block, which the kernels take last */
        j = rand_in(&s, lo, hi - lo < 16 ? hi : lo + 15);
    else if (kind == ATTN_ADV_K_HUGE_LAST)
        j = hi;
    int64_t hk = rand_in(&s, 0, pp->Hkv - 1), c = rand_in(&s, 0, (is_k ? pp->d : pp->dv) - 1);
    int t = is_k ? x->k : x->v;
    in[t].data[kv_at(pp, in, &q, is_k ? pp->sk : pp->sv, b, j, hk) + c] = v;
}
