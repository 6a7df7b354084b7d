/* The attention op without its kernels (issue 11 items 3 and 4): schema and
 * prepare errors, the canonical key, the float64 reference against hand
 * computed rows (a fully masked row included), reference_at against the
 * reference, visible-pair flops, structured inputs and the input check, the
 * verifier's per-output tolerance, padding and scratch buffers, and the
 * CLI's one-line errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/attention_int.h"
#include "search/model.h"
#include "search/problem.h"
#include "tuner/verify.h"

#include "test_util.h"

static const pt_target sm80 = {80, false, false};

/* Prepares "attention ITEMS"; returns prepare's status, message in e. */
static int prep(pt_arena *a, const char *items, pt_prepared **pp, pt_err *e)
{
    search_problem sp;
    int rc = search_problem_parse(a, "attention", items, &sp, e);
    if (rc)
        return rc;
    return gen_attention_op.prepare(a, &sp.prob, &sm80, pp, e);
}

static pt_prepared *prep_ok(pt_arena *a, const char *items)
{
    pt_prepared *pp = NULL;
    pt_err e = {0};
    cr_assert_eq(prep(a, items, &pp, &e), PT_OK, "%s: %s", items, e.msg);
    return pp;
}

#define BASE "batch=2 heads_q=4 heads_kv=2 seqlen_q=5 seqlen_k=7 head_dim=64 dtype=bf16"

/* ---- schema and prepare ---- */

Test(attention, bad_problems_are_one_line_naming_the_value)
{
    static const struct {
        const char *items, *msg;
    } cases[] = {
        {"batch=1 heads_q=32 heads_kv=6 seqlen_q=8 seqlen_k=8 head_dim=128 dtype=f16",
         "heads_q=32 is not a multiple of heads_kv=6"},
        {"batch=1 heads_q=32 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=80 dtype=f16",
         "head_dim=80: supported 64 96 128 256"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 head_dim_v=48 dtype=f16",
         "head_dim_v=48: supported 64 96 128 256"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=1 seqlen_k=64 head_dim=64 dtype=f16 page_size=24",
         "page_size=24: must be a power of two"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=1 seqlen_k=64 head_dim=64 dtype=f16 page_size=2048",
         "page_size=2048: at most 1024"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f16 window_left=-2",
         "window_left=-2: -1 (unbounded) or >= 0"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f16 window_right=-5",
         "window_right=-5: -1 (unbounded) or >= 0"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f32",
         "dtype 'f32' is not supported for attention (f16 bf16)"},
        {"batch=70000 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f16",
         "batch=70000: must be 1..65535"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f16 num_pages=4",
         "num_pages=4 needs page_size (paged KV)"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f16 varlen=1 layout=bhsd",
         "varlen needs layout bshd (packed [total, heads, head_dim])"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 head_dim=64 dtype=f16 softcap=-1",
         "softcap=-1: must be a finite number >= 0"},
        {"batch=1 heads_q=8 heads_kv=8 seqlen_q=8 seqlen_k=8 dtype=f16",
         "missing head_dim=..."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_arena *a = pt_arena_new();
        pt_prepared *pp = NULL;
        pt_err e = {0};
        cr_expect_neq(prep(a, cases[i].items, &pp, &e), PT_OK, "%s accepted", cases[i].items);
        cr_expect(strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) == 0, "%s: '%s', wanted '%s'",
                  cases[i].items, e.msg, cases[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "%s", e.msg);
        pt_arena_free(a);
    }
}

Test(attention, prepare_fills_strides_and_tensor_indices)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = prep_ok(a, BASE " causal=1 window_right=3 return_lse=1");
    cr_expect_eq(pp->group, 2);
    cr_expect_eq(pp->wr, 0, "causal sets wr = 0");
    cr_expect_eq(pp->wl, -1);
    cr_expect_float_eq(pp->scale, 0.125f, 0);
    cr_expect_eq(pp->es, 2);
    /* bshd: q [B, Sq, Hq, d] */
    cr_expect(pp->sq[0] == 4 * 64 && pp->sq[1] == 64 && pp->sq[2] == 5 * 4 * 64);
    cr_expect(pp->sk[0] == 2 * 64 && pp->sk[1] == 64 && pp->sk[2] == 7 * 2 * 64);
    cr_expect(pp->t.q == 0 && pp->t.k == 1 && pp->t.v == 2 && pp->t.nin == 3);
    cr_expect(pp->t.block_table == -1 && pp->t.cu_seqlens_q == -1 && pp->t.seqused_k == -1);
    cr_expect(pp->t.o == 0 && pp->t.lse == 1 && pp->t.nout == 2);
    pp = prep_ok(a, BASE " layout=bhsd");
    cr_expect(pp->bhsd && pp->sq[0] == 64 && pp->sq[1] == 5 * 64 && pp->sq[2] == 4 * 5 * 64);
    cr_expect(pp->sv[0] == 64 && pp->sv[1] == 7 * 64);
    cr_expect_eq(pp->t.nout, 1);
    pp = prep_ok(a, BASE " page_size=4 seqused_k=1 varlen=1");
    cr_expect_eq(pp->pages_per_seq, 2);
    cr_expect_eq(pp->npages, 4, "default pool: batch * ceil(seqlen_k / page_size)");
    cr_expect(pp->sk[0] == 2 * 64 && pp->sk[2] == 4 * 2 * 64, "a page of [P, Hkv, d]");
    cr_expect(pp->sq[2] == 0, "varlen: rows from cu_seqlens");
    cr_expect(pp->t.block_table == 3 && pp->t.cu_seqlens_q == 4 && pp->t.cu_seqlens_k == 5 &&
              pp->t.seqused_k == 6 && pp->t.nin == 7);
    int nin, nout;
    pt_tensor in[8], out[2];
    cr_assert_eq(gen_attention_op.tensors(pp, &nin, &nout, in, out), PT_OK);
    cr_expect_str_eq(in[3].name, "block_table");
    cr_expect_eq(in[3].numel, 4);
    cr_expect_eq(in[3].dtype, PT_S32);
    cr_expect_eq(in[1].numel, 4 * 4 * 2 * 64, "k is the pool");
    cr_expect_str_eq(in[6].name, "seqused_k");
    cr_expect_str_eq(out[0].name, "o");
    cr_expect(attn_decode_kind(pp), "seqlen_q 5: the decode kind");
    cr_expect(!attn_decode_kind(prep_ok(a, "batch=1 heads_q=4 heads_kv=4 seqlen_q=512 seqlen_k=512 "
                                           "head_dim=64 dtype=f16 page_size=16")),
              "a paged prefill is the prefill kernel's");
    cr_expect(attn_decode_kind(prep_ok(a, BASE)), "seqlen_q 5 <= 16: decode");
    cr_expect(!attn_decode_kind(prep_ok(
        a, "batch=1 heads_q=4 heads_kv=4 seqlen_q=512 seqlen_k=512 head_dim=64 dtype=f16")));
    pt_arena_free(a);
}

Test(attention, canonical_key_round_trips)
{
    static const char *const cases[] = {
        BASE,
        BASE " causal=1 window_left=0 return_lse=1",
        BASE " window_left=16 window_right=-1 softmax_scale=0.5 softcap=30 layout=bhsd",
        BASE " page_size=4 num_pages=9 seqused_k=1",
        BASE " varlen=1 head_dim_v=128",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_arena *a = pt_arena_new();
        pt_err e = {0};
        search_problem sp, back;
        cr_assert_eq(search_problem_parse(a, "attention", cases[i], &sp, &e), PT_OK, "%s", e.msg);
        const char *items = strchr(sp.key, ' ');
        cr_assert(items, "%s", sp.key);
        cr_assert_eq(search_problem_parse(a, "attention", items + 1, &back, &e), PT_OK, "%s: %s",
                     sp.key, e.msg);
        cr_expect_str_eq(back.key, sp.key);
        pt_arena_free(a);
    }
    /* defaults leave the key: window -1, head_dim_v = head_dim, the default pool */
    pt_arena *a = pt_arena_new();
    pt_err e = {0};
    search_problem sp;
    cr_assert_eq(search_problem_parse(a, "attention",
                                      BASE " window_left=-1 head_dim_v=64 page_size=4 num_pages=4",
                                      &sp, &e), PT_OK, "%s", e.msg);
    cr_expect_str_eq(sp.key, "attention batch=2 heads_q=4 heads_kv=2 seqlen_q=5 seqlen_k=7 "
                             "head_dim=64 dtype=bf16 page_size=4");
    cr_expect(!strstr(sp.klass, "seqlen"), "sequence lengths are sizes: %s", sp.klass);
    cr_expect(strstr(sp.klass, "heads_q=4"), "head counts are the class: %s", sp.klass);
    pt_arena_free(a);
}

/* ---- reference ---- */

/* Inputs of a prepared problem, zeroed (f64 data only). */
typedef struct host_io {
    int nin, nout;
    pt_tensor in[8], out[2];
} host_io;

static host_io host_new(const pt_prepared *pp)
{
    host_io h;
    gen_attention_op.tensors(pp, &h.nin, &h.nout, h.in, h.out);
    for (int i = 0; i < h.nin; i++)
        h.in[i].data = calloc((size_t)h.in[i].numel, sizeof(double));
    for (int i = 0; i < h.nout; i++)
        h.out[i].data = calloc((size_t)h.out[i].numel, sizeof(double));
    return h;
}

static void host_free(host_io *h)
{
    for (int i = 0; i < h->nin; i++)
        free(h->in[i].data);
    for (int i = 0; i < h->nout; i++)
        free(h->out[i].data);
}

/* One head, d = dv = 64 (scale 1/8), Sk = 2 keys: q rows hold 8 ln 2 in
 * column 0, k[0] = 0, k[1] = e_0, so the scores are 0 and ln 2 and the
 * weights 1 : 2; v[j] = (j + 1) * (c + 1). With three query rows and
 * causal (off = -1), row 0 sees no key, row 1 key 0, row 2 both. */
Test(attention, reference_matches_hand_computed_rows)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = prep_ok(a, "batch=1 heads_q=1 heads_kv=1 seqlen_q=3 seqlen_k=2 head_dim=64 "
                                 "dtype=f16 causal=1 return_lse=1");
    host_io h = host_new(pp);
    for (int i = 0; i < 3; i++)
        h.in[0].data[i * 64] = 8 * log(2.0);
    h.in[1].data[1 * 64] = 1;
    for (int j = 0; j < 2; j++)
        for (int c = 0; c < 64; c++)
            h.in[2].data[j * 64 + c] = (j + 1) * (c + 1);
    pt_err e = {0};
    cr_assert_eq(gen_attention_op.reference(pp, h.in, h.out, &e), PT_OK, "%s", e.msg);
    const double *o = h.out[0].data, *lse = h.out[1].data;
    for (int c = 0; c < 64; c++) {
        cr_expect_eq(o[c], 0.0, "fully masked row: o = 0");
        cr_expect(fabs(o[64 + c] - (c + 1)) < 1e-12, "row 1: v[0] alone");
        double want = (1.0 / 3) * (c + 1) + (2.0 / 3) * 2 * (c + 1);
        cr_expect(fabs(o[128 + c] - want) < 1e-9, "row 2 col %d: %g, want %g", c, o[128 + c], want);
    }
    cr_expect(isinf(lse[0]) && lse[0] < 0, "fully masked row: lse = -inf, got %g", lse[0]);
    cr_expect(fabs(lse[1] - 0.0) < 1e-12, "%g", lse[1]);
    cr_expect(fabs(lse[2] - log(3.0)) < 1e-12, "%g", lse[2]);
    for (int64_t j = 0; j < h.out[0].numel; j++)
        cr_assert(!isnan(o[j]));
    /* the sliding window: window_left=0 with causal keeps the diagonal key
     * (j = i + off) only: row 2 sees key 1 alone */
    pt_prepared *pw = prep_ok(a, "batch=1 heads_q=1 heads_kv=1 seqlen_q=3 seqlen_k=2 head_dim=64 "
                                 "dtype=f16 causal=1 window_left=0 return_lse=1");
    cr_assert_eq(gen_attention_op.reference(pw, h.in, h.out, &e), PT_OK, "%s", e.msg);
    cr_expect(fabs(h.out[0].data[128 + 5] - 2 * 6) < 1e-12, "%g", h.out[0].data[128 + 5]);
    cr_expect(fabs(h.out[1].data[2] - log(2.0)) < 1e-12, "%g", h.out[1].data[2]);
    cr_expect(!attn_visible(pw, 2, 0, 3, 2) && attn_visible(pw, 2, 1, 3, 2));
    cr_expect(!attn_visible(pw, 0, 0, 3, 2), "row 0 of 3 against 2 keys sees nothing");
    /* softcap 0.5: the scores become 0.5 tanh(2 s) */
    pt_prepared *pc = prep_ok(a, "batch=1 heads_q=1 heads_kv=1 seqlen_q=3 seqlen_k=2 head_dim=64 "
                                 "dtype=f16 softcap=0.5 return_lse=1");
    cr_assert_eq(gen_attention_op.reference(pc, h.in, h.out, &e), PT_OK, "%s", e.msg);
    double s1 = 0.5 * tanh(2 * log(2.0)), w1 = exp(s1);
    cr_expect(fabs(h.out[1].data[0] - log(1 + w1)) < 1e-12, "%g", h.out[1].data[0]);
    host_free(&h);
    pt_arena_free(a);
}

/* Uniform noise in [-2, 2) rounded to the dtype, then the op's structured
 * inputs: what the verifier does (tuner_io_random). */
static tuner_io *io_random(const pt_prepared *pp, uint64_t seed)
{
    tuner_io *io;
    pt_err e = {0};
    cr_assert_eq(tuner_io_new(&gen_attention_op, pp, &io, &e), PT_OK, "%s", e.msg);
    tuner_io_random(io, seed, 0, 0);
    return io;
}

Test(attention, reference_at_equals_reference_at_every_element)
{
    static const char *const cases[] = {
        BASE " causal=1 return_lse=1",
        BASE " layout=bhsd window_left=2 window_right=1 softcap=5 return_lse=1",
        BASE " varlen=1 return_lse=1 causal=1",
        BASE " page_size=4 seqused_k=1 return_lse=1",
        "batch=3 heads_q=4 heads_kv=1 seqlen_q=3 seqlen_k=9 head_dim=64 dtype=f16 varlen=1 "
        "page_size=2 seqused_k=1 return_lse=1 causal=1",
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        pt_arena *a = pt_arena_new();
        pt_prepared *pp = prep_ok(a, cases[ci]);
        tuner_io *io = io_random(pp, 7 + ci);
        pt_err e = {0};
        cr_assert_eq(gen_attention_op.check_inputs(pp, io->in, &e), PT_OK, "%s: %s", cases[ci],
                     e.msg);
        pt_tensor ref[2];
        for (int o = 0; o < io->nout; o++) {
            ref[o] = io->out[o];
            ref[o].data = calloc((size_t)ref[o].numel, sizeof(double));
        }
        cr_assert_eq(gen_attention_op.reference(pp, io->in, ref, &e), PT_OK, "%s", e.msg);
        int64_t finite = 0, masked = 0;
        for (int o = 0; o < io->nout; o++) {
            int64_t n = ref[o].numel;
            int64_t *idx = malloc((size_t)n * sizeof *idx);
            double *v = malloc((size_t)n * sizeof *v), *mag = malloc((size_t)n * sizeof *mag);
            for (int64_t j = 0; j < n; j++)
                idx[j] = j;
            cr_assert_eq(gen_attention_op.reference_at(pp, io->in, o, idx, (int)n, v, &e), PT_OK,
                         "%s", e.msg);
            pt_accum acc;
            cr_assert_eq(gen_attention_op.magnitude(pp, io->in, o, idx, n, mag, &acc, &e), PT_OK,
                         "%s", e.msg);
            /* o: one rounding of each P.V term in the input dtype; lse: f32 sums */
            cr_expect_eq(acc.dtype, o == pp->t.o ? pp->dt : PT_F32);
            cr_expect_eq(acc.len, o == pp->t.o ? 1 : (pp->Sk > pp->d ? pp->Sk : pp->d));
            for (int64_t j = 0; j < n; j++) {
                cr_assert(v[j] == ref[o].data[j] || (isinf(v[j]) && v[j] == ref[o].data[j]),
                          "%s: output %d [%lld]: %.17g vs %.17g", cases[ci], o, (long long)j, v[j],
                          ref[o].data[j]);
                cr_assert(!isnan(v[j]), "%s: NaN at %d[%lld]", cases[ci], o, (long long)j);
                finite += isfinite(v[j]) && v[j] != 0;
                masked += isinf(v[j]);
                if (isfinite(v[j]) && v[j] != 0)
                    cr_assert(mag[j] >= fabs(v[j]) * 0.0 && isfinite(mag[j]) && mag[j] > 0,
                              "magnitude at %lld: %g", (long long)j, mag[j]);
            }
            free(idx);
            free(v);
            free(mag);
            free(ref[o].data);
        }
        cr_expect_gt(finite, 0, "%s", cases[ci]);
        (void)masked;
        tuner_io_free(NULL, io);
        pt_arena_free(a);
    }
}

/* ---- counts ---- */

Test(attention, flops_count_the_visible_pairs)
{
    pt_arena *a = pt_arena_new();
    char items[256];
    for (int S = 1; S <= 300; S += 37) {
        snprintf(items, sizeof items,
                 "batch=3 heads_q=8 heads_kv=2 seqlen_q=%d seqlen_k=%d head_dim=128 "
                 "dtype=bf16 causal=1", S, S);
        pt_prepared *pp = prep_ok(a, items);
        double want = 2.0 * 256 * S * (S + 1) / 2.0 * 3 * 8;
        cr_expect_eq(gen_attention_op.flops(pp), want, "S=%d: %g, want %g", S,
                     gen_attention_op.flops(pp), want);
        cr_expect_eq(attn_flops_fa(pp), 4.0 * 3 * 8 * S * S * 128 / 2);
        cr_expect_eq(gen_attention_op.flops_quoted(pp), attn_flops_fa(pp));
    }
    /* the closed form against counting attn_visible, over masks and shapes */
    int cases = 0;
    for (int sq = 1; sq <= 13; sq += 3)
        for (int sk = 1; sk <= 17; sk += 4)
            for (int wl = -1; wl <= 6; wl += 3)
                for (int wr = -1; wr <= 6; wr += 3)
                    for (int causal = 0; causal < 2; causal++) {
                        snprintf(items, sizeof items,
                                 "batch=1 heads_q=1 heads_kv=1 seqlen_q=%d seqlen_k=%d head_dim=64 "
                                 "dtype=f16 causal=%d window_left=%d window_right=%d",
                                 sq, sk, causal, wl, wr);
                        pt_prepared *pp = prep_ok(a, items);
                        double n = 0;
                        for (int i = 0; i < sq; i++)
                            for (int j = 0; j < sk; j++)
                                n += attn_visible(pp, i, j, sq, sk);
                        cr_expect_eq(attn_visible_pairs(pp, sq, sk), n, "%s: %g, counted %g", items,
                                     attn_visible_pairs(pp, sq, sk), n);
                        cr_expect_eq(gen_attention_op.flops(pp), 2.0 * 128 * n);
                        cases++;
                    }
    cr_expect_eq(cases, 450);
    /* bytes: q k v o once, lse, block table (design 1.5) */
    pt_prepared *pp = prep_ok(a, "batch=2 heads_q=4 heads_kv=2 seqlen_q=1 seqlen_k=32 head_dim=64 "
                                 "dtype=f16 page_size=16 return_lse=1");
    double want = 2.0 * (2 * 1 * 4 * 64 + 2 * 32 * 2 * 128 + 2 * 1 * 4 * 64) + 4.0 * 2 * 4 * 1 +
                  4.0 * 2 * 2;
    cr_expect_eq(gen_attention_op.bytes(pp), want, "%g, want %g", gen_attention_op.bytes(pp), want);
    pt_arena_free(a);
}

/* ---- structured inputs and the input check ---- */

Test(attention, init_inputs_are_valid_and_structured)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = prep_ok(a, "batch=6 heads_q=4 heads_kv=2 seqlen_q=9 seqlen_k=40 head_dim=64 "
                                 "dtype=bf16 varlen=1 page_size=8 seqused_k=1");
    tuner_io *io = io_random(pp, 3);
    pt_err e = {0};
    cr_assert_eq(gen_attention_op.check_inputs(pp, io->in, &e), PT_OK, "%s", e.msg);
    const attn_tensors *x = &pp->t;
    const double *cq = io->in[x->cu_seqlens_q].data, *bt = io->in[x->block_table].data;
    const double *su = io->in[x->seqused_k].data, *ck = io->in[x->cu_seqlens_k].data;
    bool one = false, ragged = false;
    cr_expect_eq(cq[0], 0);
    for (int b = 0; b < 6; b++) {
        double l = cq[b + 1] - cq[b];
        cr_expect(l >= 1 && l <= 9, "length %g", l);
        one |= l == 1;
        ragged |= l > 1 && l < 9;
        cr_expect(su[b] >= 1 && su[b] <= ck[b + 1] - ck[b], "seqused_k[%d] = %g", b, su[b]);
    }
    cr_expect(one && ragged, "a length-1 and a ragged sequence");
    /* distinct pages, not in order */
    bool seen[30] = {false}, shuffled = false;
    cr_assert_eq(pp->npages, 30);
    for (int k = 0; k < 30; k++) {
        cr_assert(bt[k] >= 0 && bt[k] < 30 && bt[k] == floor(bt[k]), "%g", bt[k]);
        cr_expect(!seen[(int)bt[k]], "page %g twice", bt[k]);
        seen[(int)bt[k]] = true;
        shuffled |= bt[k] != k;
    }
    cr_expect(shuffled);
    /* the stored bits are the values (s32) */
    cr_expect_eq(((const int32_t *)io->in_bits[x->block_table])[3], (int32_t)bt[3]);
    /* deterministic in the seed */
    tuner_io *io2 = io_random(pp, 3);
    cr_expect(memcmp(io2->in_bits[x->block_table], io->in_bits[x->block_table],
                     io->in_bytes[x->block_table]) == 0);
    tuner_io_free(NULL, io2);

    /* out of range: one line naming the element */
    double keep = io->in[x->block_table].data[9];
    io->in[x->block_table].data[9] = 30;
    cr_expect_neq(gen_attention_op.check_inputs(pp, io->in, &e), PT_OK);
    cr_expect_str_eq(e.msg, "block_table[1][4] = 30: outside the pool (num_pages=30)");
    io->in[x->block_table].data[9] = -1;
    e = (pt_err){0};
    cr_expect_neq(gen_attention_op.check_inputs(pp, io->in, &e), PT_OK);
    cr_expect_str_eq(e.msg, "block_table[1][4] = -1: outside the pool (num_pages=30)");
    io->in[x->block_table].data[9] = keep;
    io->in[x->seqused_k].data[2] = ck[3] - ck[2] + 1;
    e = (pt_err){0};
    cr_expect_neq(gen_attention_op.check_inputs(pp, io->in, &e), PT_OK);
    cr_expect(strstr(e.msg, "seqused_k[2] = ") && !strchr(e.msg, '\n'), "%s", e.msg);
    io->in[x->seqused_k].data[2] = 1;
    io->in[x->cu_seqlens_q].data[3] = io->in[x->cu_seqlens_q].data[2] + 10;
    e = (pt_err){0};
    cr_expect_neq(gen_attention_op.check_inputs(pp, io->in, &e), PT_OK);
    cr_expect(strstr(e.msg, "cu_seqlens_q"), "%s", e.msg);
    tuner_io_free(NULL, io);
    pt_arena_free(a);
}

/* ---- the verifier ---- */

/* The mock backend runs the op's reference as the kernel: an op whose
 * reference is skewed gives a kernel with a known error. */
static int ref_skewed(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, double lse_rel,
                      double o_rel, bool pad_nan, pt_err *e)
{
    int rc = attn_reference(pp, in, out, e);
    if (rc)
        return rc;
    double m = 0;
    if (pp->t.lse >= 0) {
        for (int64_t j = 0; j < out[1].numel; j++)
            if (isfinite(out[1].data[j]) && fabs(out[1].data[j]) > m)
                m = fabs(out[1].data[j]);
        for (int64_t j = 0; j < out[1].numel; j++)
            out[1].data[j] += lse_rel * m;
    }
    for (int64_t j = 0; j < out[0].numel; j++)
        out[0].data[j] *= 1 + o_rel;
    if (pad_nan) {
        uint8_t *mask = malloc((size_t)out[0].numel);
        attn_padding(pp, in, 0, mask, e);
        for (int64_t j = 0; j < out[0].numel; j++)
            if (mask[j])
                out[0].data[j] = NAN;
        free(mask);
    }
    return PT_OK;
}
static int ref_lse_3e5(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    return ref_skewed(pp, in, out, 3e-5, 0, false, e);
}
static int ref_lse_3e4(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    return ref_skewed(pp, in, out, 3e-4, 0, false, e);
}
static int ref_o_3e2(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    return ref_skewed(pp, in, out, 0, 3e-2, false, e);
}
static int ref_pad_nan(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e)
{
    return ref_skewed(pp, in, out, 0, 0, true, e);
}

/* An off-by-one window (the oldest visible key of each row dropped). */
static int ref_window_off_by_one(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out,
                                 pt_err *e)
{
    pt_prepared q = *pp;
    q.wl = pp->wl - 1;
    return attn_reference(&q, in, out, e);
}

/* A launch binding every tensor, in order. */
static pt_launch all_tensors(const pt_prepared *pp)
{
    pt_launch l = {.grid = {1, 1, 1}, .block = {32, 1, 1}, .entry = "k"};
    for (int i = 0; i < pp->t.nin; i++)
        l.args[l.nargs++] = (pt_arg){PT_ARG_INPUT, i, 0, 0};
    for (int i = 0; i < pp->t.nout; i++)
        l.args[l.nargs++] = (pt_arg){PT_ARG_OUTPUT, i, 0, 0};
    return l;
}

/* Verifies the mock kernel of op (the reference skewed or not) on pp; the
 * verifier itself judges with the real op. */
static int verify_with(const pt_prepared *pp, int (*ref)(const pt_prepared *, const pt_tensor *,
                                                         pt_tensor *, pt_err *),
                       tuner_io *io, tuner_verify_result *r, pt_err *e)
{
    *e = (pt_err){0};
    pt_op skew = gen_attention_op;
    if (ref)
        skew.reference = ref;
    tuner_dev *d;
    cr_assert_eq(tuner_dev_open("mock", NULL, &d, e), PT_OK, "%s", e->msg);
    tuner_image img = {"// mock kernel\n", 15, NULL, 0, "k", &skew, pp};
    tuner_kernel *k;
    cr_assert_eq(tuner_load(d, &img, &k, e), PT_OK, "%s", e->msg);
    pt_launch l = all_tensors(pp);
    tuner_verify_opts o = {0};
    int rc = tuner_verify(d, k, &l, io, &o, r, e);
    tuner_unload(d, k);
    tuner_io_free(d, io);
    tuner_dev_close(d);
    return rc;
}

Test(attention, verifier_judges_lse_by_its_own_bound)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = prep_ok(a, BASE " causal=1 return_lse=1");
    tuner_verify_result r;
    pt_err e = {0};
    cr_expect_eq(verify_with(pp, NULL, io_random(pp, 1), &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.cls, TUNER_OK);
    /* 3e-5 of max |lse|: within 1e-4 (an f32 output's default 1e-5 relative
     * would refuse it), 3e-4: over */
    cr_expect_eq(verify_with(pp, ref_lse_3e5, io_random(pp, 1), &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.cls, TUNER_OK);
    cr_expect_eq(verify_with(pp, ref_lse_3e4, io_random(pp, 1), &r, &e), PT_ERANGE);
    cr_expect_eq(r.cls, TUNER_WRONG_ANSWER);
    cr_expect(strstr(e.msg, "over tolerance 0.0001; worst lse["), "%s", e.msg);
    /* o by its dtype: 3% is wrong in bf16 */
    e = (pt_err){0};
    cr_expect_eq(verify_with(pp, ref_o_3e2, io_random(pp, 1), &r, &e), PT_ERANGE);
    cr_expect(strstr(e.msg, "o["), "%s", e.msg);
    /* the bf16 P.V allowance still sees one key of 65 missing */
    pt_prepared *pw = prep_ok(a, "batch=1 heads_q=2 heads_kv=1 seqlen_q=40 seqlen_k=200 "
                                 "head_dim=64 dtype=bf16 window_left=64");
    cr_expect_eq(verify_with(pw, NULL, io_random(pw, 2), &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(verify_with(pw, ref_window_off_by_one, io_random(pw, 2), &r, &e), PT_ERANGE);
    cr_expect(strstr(e.msg, "over tolerance 0.01; worst o["), "%s", e.msg);
    /* the metric itself: against max |w| with floor 1 */
    tuner_verify_result m = {0};
    pt_tol tol;
    attn_tolerance(pp, pp->t.lse, &tol);
    double ref[2] = {10, 0.001}, got[2] = {10, 0.0015};
    tuner_compare_tol("lse", PT_F32, &tol, got, ref, NULL, NULL, 2, &m);
    cr_expect_eq(m.bad, 0, "5e-4 absolute against max |lse| 10: 5e-5 (%g)", m.max_err);
    memset(&m, 0, sizeof m);
    tuner_compare_tol("lse", PT_F32, NULL, got, ref, NULL, NULL, 2, &m);
    cr_expect_eq(m.bad, 1, "by dtype the same error is refused");
    pt_arena_free(a);
}

Test(attention, verifier_skips_varlen_padding_and_checks_inputs_first)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = prep_ok(a, "batch=4 heads_q=2 heads_kv=1 seqlen_q=6 seqlen_k=6 head_dim=64 "
                                 "dtype=f16 varlen=1 return_lse=1");
    tuner_verify_result r;
    pt_err e = {0};
    /* rows past the packed total hold NaN (as a kernel leaves them): not compared */
    tuner_io *io = io_random(pp, 5);
    cr_assert_lt(io->in[pp->t.cu_seqlens_q].data[4], 24, "some padding");
    cr_expect_eq(verify_with(pp, ref_pad_nan, io, &r, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(r.cls, TUNER_OK);
    /* an input out of range: refused before the launch, one line */
    pt_prepared *pg = prep_ok(a, "batch=2 heads_q=2 heads_kv=1 seqlen_q=1 seqlen_k=32 head_dim=64 "
                                 "dtype=f16 page_size=16");
    io = io_random(pg, 5);
    io->in[pg->t.block_table].data[2] = 4;
    pt_dtype_store(PT_S32, io->in_bits[pg->t.block_table], 2, 4);
    cr_expect_neq(verify_with(pg, NULL, io, &r, &e), PT_OK);
    cr_expect_str_eq(e.msg, "block_table[1][0] = 4: outside the pool (num_pages=4)");
    pt_arena_free(a);
}

Test(attention, scratch_is_poisoned_before_every_launch)
{
    pt_arena *a = pt_arena_new();
    pt_prepared *pp = prep_ok(a, BASE);
    pt_err e = {0};
    tuner_dev *d;
    cr_assert_eq(tuner_dev_open("mock", NULL, &d, &e), PT_OK, "%s", e.msg);
    tuner_io *io = io_random(pp, 1);
    cr_assert_eq(tuner_io_alloc(d, io, 0, &e), PT_OK, "%s", e.msg);
    pt_launch l = all_tensors(pp);
    int ws = l.nargs, sc = l.nargs + 1;
    l.args[l.nargs++] = (pt_arg){PT_ARG_WORKSPACE, 0, 64, 0};
    l.args[l.nargs++] = (pt_arg){PT_ARG_SCRATCH, 0, 64, 0};
    tuner_args args;
    uint8_t buf[64];
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(tuner_io_bind(d, io, &l, &args, &e), PT_OK, "%s", e.msg);
        cr_assert(io->ws[sc] && io->ws[ws] && io->ws[sc] != io->ws[ws]);
        cr_expect_eq(args.v[sc].u64, io->ws[sc]);
        cr_assert_eq(tuner_read(d, io->ws[sc], buf, 64, &e), PT_OK);
        for (int i = 0; i < 64; i++)
            cr_assert_eq(buf[i], 0xFF, "round %d: scratch byte %d = %u", round, i, buf[i]);
        cr_assert_eq(tuner_read(d, io->ws[ws], buf, 64, &e), PT_OK);
        for (int i = 0; i < 64; i++)
            cr_assert_eq(buf[i], 0, "workspace byte %d", i);
        memset(buf, 7, sizeof buf); /* a launch writes its partials */
        cr_assert_eq(tuner_write(d, io->ws[sc], buf, 64, &e), PT_OK);
    }
    tuner_io_free(d, io);
    tuner_dev_close(d);
    pt_arena_free(a);
}

/* ---- the tool ---- */

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(attention, cli_lists_the_op_and_refuses_bad_problems_in_one_line)
{
    static char out[1 << 16];
    char err[4096];
    cr_assert_eq(test_run_ptxtune(NULL, "ops", out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_expect(strstr(out, "\nattention: "), "%s", out);
    cr_expect(strstr(out, "window_left"), "%s", out);
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"emit attention batch=1 heads_q=32 heads_kv=6 seqlen_q=1 seqlen_k=64 head_dim=128 dtype=f16",
         "heads_q=32 is not a multiple of heads_kv=6"},
        {"emit attention --batch 1 --heads-q 32 --heads-kv 8 --seqlen-q 1 --seqlen-k 64 "
         "--head-dim 80 --dtype bf16", "head_dim=80: supported 64 96 128 256"},
        {"emit attention batch=1 heads_q=8 heads_kv=8 seqlen_q=1 seqlen_k=64 head_dim=64 dtype=f16 "
         "--page-size 24", "page_size=24: must be a power of two"},
        {"emit attention batch=1 heads_q=8 heads_kv=8 seqlen_q=4 seqlen_k=64 head_dim=64 dtype=f16 "
         "--window-left -2", "window_left=-2: -1 (unbounded) or >= 0"},
        {"variants attention batch=1 heads_q=8 heads_kv=8 seqlen_q=4 seqlen_k=64 head_dim=64 "
         "dtype=f32", "dtype 'f32' is not supported for attention"},
        {"emit attention batch=1 heads_q=8 heads_kv=8 seqlen_q=4 seqlen_k=64 head_dim=64",
         "missing dtype=..."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = test_run_ptxtune(NULL, cases[i].args, out, sizeof out, err, sizeof err);
        cr_expect_eq(rc, 2, "'%s' exited %d: %s", cases[i].args, rc, err);
        cr_expect_eq(lines(err), 1, "'%s': %s", cases[i].args, err);
        cr_expect(strstr(err, cases[i].msg), "'%s': '%s', wanted '%s'", cases[i].args, err,
                  cases[i].msg);
    }
}

/* results/problems/llama3_8b_attention.txt: the Llama-3-8B set
 * parses, prepares on sm_80, and holds distinct problems of both kinds. */
Test(attention, llama3_8b_problem_set_is_valid)
{
    const char *tdir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tdir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/../results/problems/llama3_8b_attention.txt", tdir);
    static char text[1 << 16];
    test_slurp(path, text, sizeof text);
    search_problem_set set;
    pt_err e = {0};
    cr_assert_eq(search_problems_parse(text, "llama3_8b_attention.txt", &set, &e), PT_OK, "%s",
                 e.msg);
    cr_expect_eq(set.n, 13);
    int decode = 0;
    for (int k = 0; k < set.n; k++) {
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        cr_assert_eq(gen_attention_op.prepare(a, &set.v[k].prob, &sm80, &pp, &e), PT_OK,
                     "line %d: %s", set.v[k].line, e.msg);
        cr_expect(pp->Hq == 32 && pp->Hkv == 8 && pp->d == 128 && pp->dt == PT_BF16);
        decode += attn_decode_kind(pp);
        if (attn_decode_kind(pp))
            cr_expect(pp->Sq == 1 && pp->page == 16, "line %d", set.v[k].line);
        else
            cr_expect(pp->causal && pp->Sq == pp->Sk, "line %d", set.v[k].line);
        pt_arena_free(a);
        for (int j = 0; j < k; j++)
            cr_expect_str_neq(set.v[j].key, set.v[k].key);
        /* the store's nearest bucket compares dims by log2 ratios: none is 0 */
        const char *d = set.v[k].dims;
        cr_expect(d[0] != '0' && !strstr(d, ",0"), "line %d: dims %s", set.v[k].line, d);
    }
    cr_expect_eq(decode, 9);
    search_problems_free(&set);
}

/* The cost model: a Llama-3-8B prefill is compute-bound, a paged decode
 * bandwidth-bound, and split-KV partials add traffic (pt_op.cost). */
Test(attention, cost_model_kinds)
{
    pt_arena *a = pt_arena_new();
    const search_device *dev = search_device_for(80);
    pt_prepared *pf = prep_ok(a, "batch=1 heads_q=32 heads_kv=8 seqlen_q=4096 seqlen_k=4096 "
                                 "head_dim=128 causal=1 dtype=bf16");
    pt_config c = {0};
    pt_config_set(&c, "impl", 0);
    pt_cost pc;
    gen_attention_op.cost(pf, &c, &pc);
    cr_expect_eq(pc.traffic, gen_attention_op.bytes(pf));
    search_kernel k = {.flops = gen_attention_op.flops(pf), .bytes = gen_attention_op.bytes(pf),
                       .tensor = true, .blocks = 32 * 32, .threads = 128, .regs = 200,
                       .smem = 48 << 10, .pipelined = pc.pipelined, .op_traffic = pc.traffic};
    search_estimate est;
    search_estimate_kernel(dev, &k, &est);
    cr_expect_str_eq(est.limiter, "compute", "prefill: %s", est.limiter);
    pt_prepared *pd = prep_ok(a, "batch=16 heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=8192 "
                                 "head_dim=128 page_size=16 dtype=bf16");
    pt_config_set(&c, "impl", 1);
    pt_config_set(&c, "splits", 4);
    gen_attention_op.cost(pd, &c, &pc);
    double partial = 2.0 * 4 * 4 * 16 * 32 * 1 * 129;
    cr_expect_eq(pc.traffic, gen_attention_op.bytes(pd) + partial);
    k = (search_kernel){.flops = gen_attention_op.flops(pd), .bytes = gen_attention_op.bytes(pd),
                        .tensor = true, .blocks = 4 * 8 * 16, .threads = 128, .regs = 128,
                        .smem = 32 << 10, .pipelined = pc.pipelined, .op_traffic = pc.traffic};
    search_estimate_kernel(dev, &k, &est);
    cr_expect_str_eq(est.limiter, "memory", "decode: %s", est.limiter);
    cr_expect_eq(est.traffic, pc.traffic);
    pt_arena_free(a);
}

/* A .npy file of s32 values (format 1.0, little-endian, C order). */
static void write_npy_s32(const char *path, const int32_t *v, int n0, int n1)
{
    char hdr[128];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }",
                       n0, n1);
    int total = 10 + len + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s", path);
    uint16_t hl = (uint16_t)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fwrite(hdr, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(v, sizeof *v, (size_t)(n0 * n1), f);
    fclose(f);
}

/* 'run --in' with a block table outside the pool: bad input, exit 2, one
 * line naming the entry, before anything is launched. */
Test(attention, cli_refuses_given_inputs_out_of_range)
{
    char dir[] = "/tmp/ptxtune_attn_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/bt.npy", dir);
    const int32_t bad[8] = {0, 1, 2, 3, 4, 5, 6, 99}, good[8] = {7, 1, 2, 3, 4, 5, 6, 0};
    write_npy_s32(path, bad, 2, 4);
    static char out[1 << 14];
    char err[4096];
    const char *args = "run attention batch=2 heads_q=4 heads_kv=1 seqlen_q=1 seqlen_k=64 "
                       "head_dim=64 page_size=16 dtype=bf16 --backend mock --check "
                       "--in block_table=bt.npy";
    int rc = test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 2, "exit %d: %s%s", rc, out, err);
    cr_expect_str_eq(err, "ptxtune: block_table[1][3] = 99: outside the pool (num_pages=8)\n");
    write_npy_s32(path, good, 2, 4);
    rc = test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err);
    cr_expect(rc != 2 && !strstr(err, "outside the pool"), "exit %d: %s", rc, err);
    remove(path);
    rmdir(dir);
}

/* tune on the emulator stores verified attention winners; export carries
 * them with their launch; db lookup finds a tuned problem and, for an
 * untuned one of the same class, the nearest (issue 11 item 4). */
Test(attention, tune_export_lookup)
{
    char dir[] = "/tmp/ptxtune_attn_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/p.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("attention batch=1 heads_q=2 heads_kv=1 seqlen_q=17 seqlen_k=40 head_dim=64 causal=1 "
          "dtype=bf16 name=tiny\n", f);
    fclose(f);
    static char out[1 << 16];
    char err[4096];
    int rc = test_run_ptxtune(dir, "tune --problems p.txt --backend emu --budget 2 --db t.db --quiet",
                              out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "tune exit %d: %s", rc, err);
    rc = test_run_ptxtune(dir, "export --db t.db --format csv", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "export exit %d: %s", rc, err);
    cr_expect(strstr(out, "attention batch=1 heads_q=2 heads_kv=1 seqlen_q=17 seqlen_k=40") &&
                  strstr(out, ",tiny,attention,"),
              "%s", out);
    char fp[32] = "";
    const char *nl = strchr(out, '\n');
    cr_assert(nl && sscanf(nl + 1, "%16[0-9a-f]", fp) == 1, "%s", out);
    char args[512];
    snprintf(args, sizeof args,
             "db lookup --db t.db --gpu %s attention batch=1 heads_q=2 heads_kv=1 seqlen_q=17 "
             "seqlen_k=40 head_dim=64 causal=1 dtype=bf16", fp);
    rc = test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "lookup exit %d: %s", rc, err);
    cr_expect(strstr(out, "tuned: attention"), "%s", out);
    snprintf(args, sizeof args,
             "db lookup --db t.db --gpu %s attention batch=4 heads_q=2 heads_kv=1 seqlen_q=300 "
             "seqlen_k=300 head_dim=64 causal=1 dtype=bf16", fp);
    rc = test_run_ptxtune(dir, args, out, sizeof out, err, sizeof err);
    cr_expect_eq(rc, 0, "nearest lookup exit %d: %s", rc, err);
    cr_expect(strstr(out, "nearest tuned problem: attention"), "%s%s", out, err);
    const char *files[] = {"p.txt", "t.db", "t.db-wal", "t.db-shm"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        remove(path);
    }
    rmdir(dir);
}

/* An e4m3 decode problem on sm_90a that the fp8 decode kernel (impl=3)
 * cannot take (a negative softmax scale; it takes head dims 64 to 256 and
 * pages of any size since issue 16 items 2-3): the default config (impl=1,
 * which has no fp8) is refused in one line giving impl=3's reason, not
 * impl=1's "supports f16 and bf16" for a dtype the user could not avoid. */
Test(attention, fp8_decode_without_a_kernel_says_why)
{
    static const pt_target sm90a = {90, true, false};
    static const struct {
        const char *items, *msg;
    } cases[] = {
        {"batch=1 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=1000 head_dim=64 page_size=16 dtype=e4m3 softmax_scale=-1",
         "softmax_scale=-1: impl=3 needs a positive scale"},
        {"batch=1 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=1000 head_dim=128 page_size=1 dtype=e4m3 softmax_scale=-0.5",
         "softmax_scale=-0.5: impl=3 needs a positive scale"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_arena *a = pt_arena_new();
        search_problem sp;
        pt_err e = {0};
        cr_assert_eq(search_problem_parse(a, "attention", cases[i].items, &sp, &e), PT_OK, "%s", e.msg);
        pt_prepared *pp = NULL;
        cr_assert_eq(gen_attention_op.prepare(a, &sp.prob, &sm90a, &pp, &e), PT_OK, "%s", e.msg);
        pt_config c;
        gen_attention_op.defaults(pp, &sm90a, &c);
        cr_expect_neq(gen_attention_op.check(pp, &sm90a, &c, &e), PT_OK, "%s: accepted", cases[i].items);
        cr_expect(strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) == 0, "%s: '%s', wanted '%s'", cases[i].items,
                  e.msg, cases[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "%s", e.msg);
        pt_arena_free(a);
    }
}
