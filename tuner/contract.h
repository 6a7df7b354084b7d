/* The launch contract of a tuned kernel: everything an engine needs to run
 * it from an export alone, with no generator code (runtime/, docs/runtime.md):
 * the entry, block, dynamic shared memory and its opt-in, cluster shape,
 * pointer alignment, workspace bytes and its zero-fill rule, the argument
 * list (name, kind, dtype, elements and which run-time dimensions they
 * scale with) and, per problem dimension, the range of values the same
 * kernel serves and the grid rule.
 *
 * Nothing is assumed about an op: a dimension is claimed run-time only when
 * re-emitting the same config for the problem with that dimension changed
 * passes the op's check and gives byte-identical PTX, the same block,
 * shared memory and workspace, scalars that follow the dimension or stay,
 * tensors whose sizes follow it or stay, and a grid the rule below
 * reproduces at every probe. Otherwise its range is the tuned value alone.
 *
 * JSON (version 1, or 2 when the grid rule has "times" or "per_sm"), the
 * "contract" member of a measurement's launch:
 *   {"v":1,"entry":E,"block":[x,y,z],"smem":N,"smem_optin":B,"cluster":[1,1,1],
 *    "align":A,"workspace":{"bytes":N,"zero_fill":"once"},
 *    "dims":[{"name":"m","tuned":T,"min":LO,"max":HI,"group":G},...],
 *    "grid":[R,R,R], R = {"const":N} or {"dim":I,"mul":M,"div":D}
 *           (ceil(dims[I] * M / D); the other dims at their tuned values);
 *           version 2: the dim form may carry "times":T (T x that: a
 *           persistent GEMM's tiles at run-time M) and the x rule
 *           "per_sm":K, the SM term of a persistent kernel (gen/op.h
 *           pt_launch.grid_per_sm): x = min(X, K x the device's SMs, rounded
 *           down to a whole cluster, at least one), X the rule's value
 *           (always a correct launch by itself). A stream-K kernel's X is
 *           at most K x 132 (GEMM_SK_MAX_SMS), the widest grid its
 *           workspace is sized for, so the workspace bytes do not depend
 *           on the launch,
 *    "args":[{"name":P,"kind":"input|output|workspace|u32|u64|f32",
 *             "tensor":I,"dtype":D,"elements":N,"scales":[I...]}  (tensors)
 *            {"name":P,"kind":"u32","dim":I} | {"name":P,"kind":"f32","value":V}]}
 * dims follow the store's dims order (the problem's size keys, then every
 * size of a shape list, in order); dims of one group change together. */
#ifndef TUNER_CONTRACT_H
#define TUNER_CONTRACT_H

#include "gen/op.h"

/* The contract of config c of problem p (its launch l, as emitted) as a
 * JSON object appended to out. max_ptx as for the build. */
int tuner_contract_json(const pt_op *op, const pt_problem *p, const pt_target *t, int max_ptx,
                        const pt_config *c, const pt_launch *l, pt_buf *out, pt_err *e);

/* The same for config text cfg (canonical "k=v,..." as stored) of prepared
 * problem pp (p, as prepared): the config parsed in the op's space, built
 * (check, emit) and its contract computed. What a sweep computes for a row
 * that became a winner and an export for a row that has none: the text is
 * the one tuner_contract_json gives at tune time. PT_EINVAL (or the op's
 * code) when the config does not parse or build; PT_ENOMEM. */
int tuner_contract_cfg(const pt_op *op, const pt_prepared *pp, const pt_problem *p,
                       const pt_target *t, int max_ptx, const char *cfg, pt_buf *out, pt_err *e);

/* The same from a stored row alone: op and problem key as the store writes
 * them ("gemm m=16 n=64 k=32"), the run's arch ("sm_80"), the fingerprint's
 * PTX version (the sweep's max_ptx) and the config text. The problem is
 * parsed and prepared here. */
int tuner_contract_row(const char *op, const char *problem_key, const char *arch, int max_ptx,
                       const char *cfg, pt_buf *out, pt_err *e);

#endif
