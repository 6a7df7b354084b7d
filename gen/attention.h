/* Attention (flash-attention style prefill, split-KV decode over a paged KV
 * cache): the `attention` op. */
#ifndef GEN_ATTENTION_H
#define GEN_ATTENTION_H

#include "gen/op.h"

extern const pt_op gen_attention_op;
extern const pt_schema gen_attention_schema;

#endif
