/* The attention op's problem keys (gen/op.h: pt_schema; issue 11's op
 * contract). The order is the canonical key's: changing it, a default or a
 * name changes stored problem keys. Values the schema cannot judge alone
 * (heads_q a multiple of heads_kv, the supported head dims, a power-of-two
 * page size, a window of -1 or >= 0) are checked by the op's prepare
 * (gen/attention.c), which names them. */
#include <stddef.h>

#include "gen/attention.h"

/* The pool's default is one page per block-table entry of every sequence:
 * batch * ceil(seqlen_k / page_size); a given count equal to it is the
 * default too (one problem, one key). */
static bool num_pages_default(const pt_problem *p)
{
    if (p->num_pages == 0)
        return true;
    if (p->page_size <= 0 || p->seqlen_k <= 0)
        return false;
    int64_t b = p->batch > 0 ? p->batch : 1;
    return p->num_pages == b * ((p->seqlen_k + p->page_size - 1) / p->page_size);
}

/* window_left/right: any integer reaches prepare, which says what is
 * allowed (-1 or >= 0) in the contract's words */
#define ANY_INT (-0x1p63)

#define M(x) offsetof(pt_problem, x)
static const pt_key keys[] = {
    {"batch", PT_KEY_INT, PT_KEY_REQUIRED | PT_KEY_SHAPE, M(batch), 0, NULL, NULL, 1, NULL,
     "sequences B (1..65535)"},
    {"heads_q", PT_KEY_INT, PT_KEY_REQUIRED, M(heads_q), 0, NULL, NULL, 1, NULL,
     "query heads Hq (a multiple of heads_kv)"},
    {"heads_kv", PT_KEY_INT, PT_KEY_REQUIRED, M(heads_kv), 0, NULL, NULL, 1, NULL,
     "key/value heads Hkv; query head h reads kv head h / (Hq/Hkv) (GQA, MQA)"},
    {"seqlen_q", PT_KEY_INT, PT_KEY_REQUIRED | PT_KEY_SHAPE, M(seqlen_q), 0, NULL, NULL, 1, NULL,
     "query rows Sq per sequence (the maximum with varlen)"},
    {"seqlen_k", PT_KEY_INT, PT_KEY_REQUIRED | PT_KEY_SHAPE, M(seqlen_k), 0, NULL, NULL, 1, NULL,
     "keys Sk per sequence (the maximum with varlen / seqused_k)"},
    {"head_dim", PT_KEY_INT, PT_KEY_REQUIRED, M(head_dim), 0, NULL, NULL, 1, NULL,
     "d of q and k: 64 96 128 256"},
    {"head_dim_v", PT_KEY_INT, 0, M(head_dim_v), 0, "=head_dim", NULL, 1, NULL,
     "dv of v and o"},
    {"causal", PT_KEY_BOOL, 0, M(causal), 0, "0", NULL, 0, NULL,
     "mask key j > i + Sk_b - Sq_b (bottom-right aligned)"},
    {"window_left", PT_KEY_INT, 0, M(window_left), M(window_left_given), "-1", NULL, ANY_INT,
     NULL, "sliding window: keys j >= i + Sk_b - Sq_b - window_left; -1 unbounded"},
    {"window_right", PT_KEY_INT, 0, M(window_right), M(window_right_given), "-1", NULL, ANY_INT,
     NULL, "sliding window: keys j <= i + Sk_b - Sq_b + window_right; -1 unbounded"},
    {"softmax_scale", PT_KEY_REAL, 0, M(softmax_scale), 0, "0", NULL, 0, NULL,
     "s = softmax_scale * q.k; 0 means 1/sqrt(head_dim)"},
    {"softcap", PT_KEY_REAL, PT_KEY_MIN, M(softcap), 0, "0", NULL, 0, NULL,
     "s = softcap * tanh(s / softcap) before masking; 0 off"},
    {"dtype", PT_KEY_DTYPE, PT_KEY_REQUIRED | PT_KEY_ALWAYS, M(dtype), 0, NULL, NULL, 0, NULL,
     "q, k, v and o: f16 bf16 (math in f32); e4m3: q, k, v fp8 with descales, o bf16 (sm_90a prefill and decode)"},
    {"layout", PT_KEY_ENUM, 0, M(layout), 0, "bshd", "bshd bhsd", 0, NULL,
     "q k v o as [B, S, H, d] (bshd) or [B, H, S, d] (bhsd)"},
    {"varlen", PT_KEY_BOOL, 0, M(varlen), 0, "0", NULL, 0, NULL,
     "packed [total, H, d] sequences over cu_seqlens_q / cu_seqlens_k [B+1] s32 inputs"},
    {"page_size", PT_KEY_INT, 0, M(page_size), 0, "0", NULL, 0, NULL,
     "paged KV: k and v are pools [num_pages, page_size, Hkv, d], block_table input; "
     "a power of two <= 1024, 0 not paged"},
    /* not a size of the class's dims: its default depends on others (an
     * unset one would be a 0 there, which the store's nearest-bucket distance
     * cannot take); a pool other than the default is part of the class */
    {"num_pages", PT_KEY_INT, 0, M(num_pages), 0, NULL, NULL, 1, num_pages_default,
     "pages of the pools; default batch * ceil(seqlen_k / page_size)"},
    {"seqused_k", PT_KEY_BOOL, 0, M(seqused_k), 0, "0", NULL, 0, NULL,
     "seqused_k [B] s32 input: each sequence's used keys (<= seqlen_k)"},
    {"return_lse", PT_KEY_BOOL, 0, M(return_lse), 0, "0", NULL, 0, NULL,
     "also output lse [B, Hq, Sq] f32 (natural log; -inf for a row with no key)"},
    {"descale_q", PT_KEY_REAL, PT_KEY_MIN, M(descale_q), 0, "1", NULL, 0, NULL,
     "dtype e4m3: q is the stored q times descale_q (per tensor)"},
    {"descale_k", PT_KEY_REAL, PT_KEY_MIN, M(descale_k), 0, "1", NULL, 0, NULL,
     "dtype e4m3: k is the stored k times descale_k"},
    {"descale_v", PT_KEY_REAL, PT_KEY_MIN, M(descale_v), 0, "1", NULL, 0, NULL,
     "dtype e4m3: v is the stored v times descale_v"},
};
#undef M

const pt_schema gen_attention_schema = {
    .nkeys = (int)(sizeof keys / sizeof keys[0]),
    .keys = keys,
    .flags = PT_OP_TENSOR,
};
