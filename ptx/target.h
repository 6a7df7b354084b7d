/* GPU targets and PTX ISA versions. A PTX version is written as major*10+minor
 * (7.0 -> 70, 8.1 -> 81, 9.0 -> 90). */
#ifndef PT_TARGET_H
#define PT_TARGET_H

#include "ptx/base.h"

typedef struct pt_target {
    int sm;              /* 80, 86, 89, 90, 100, 120 */
    bool arch_specific;  /* the 'a' suffix: sm_90a, sm_100a */
    bool assemble_only;  /* sm_100a/sm_120: we assemble, never claim to run */
} pt_target;

/* Parses "sm_80", "sm_90a", ...; unknown names give
 * "unknown arch 'sm_70' (supported: sm_80 sm_86 sm_89 sm_90 sm_90a sm_100a sm_120)". */
int pt_target_parse(const char *name, pt_target *t, pt_err *e);
/* "sm_90a" style name into buf (at least 16 bytes). */
const char *pt_target_name(const pt_target *t, char *buf, size_t n);
/* Lowest .version that ptxas accepts for this .target. */
int pt_target_min_ptx(const pt_target *t);
/* The targets we claim, in order; assemble_only ones last. */
int pt_target_list(const pt_target **out);
/* PTX ISA version a CUDA release (e.g. 12040 from cuDriverGetVersion) can load. */
int pt_ptx_for_cuda(int cuda_version);
/* "8.1" from 81 into buf. */
const char *pt_ptx_version_str(int v, char *buf, size_t n);

#endif
