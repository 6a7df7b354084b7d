/* The fused elementwise / row-reduction family (op "elementwise"). */
#ifndef GEN_ELEMENTWISE_H
#define GEN_ELEMENTWISE_H

#include "gen/expr.h"
#include "gen/op.h"

/* The bound expression program of a prepared elementwise problem. */
const ex_prog *gen_elementwise_prog(const pt_prepared *pp);

#endif
