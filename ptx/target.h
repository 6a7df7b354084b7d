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

/* The targets, the one list (the parser, its error message, the CLI's help
 * and "variants --arch all", pt_target_list, the shared-memory limit). A row
 * is X(A, name, sm, arch_specific, assemble_only, min_ptx, smem_kb), A passed
 * through so the list serves X-macros of any shape. min_ptx: the lowest
 * .version ptxas 13.0 accepts for the .target (shared/ref/ptx-sm80.md 1.2);
 * smem_kb: the shared memory one CTA may use (static + dynamic, the opt-in
 * maximum, a reserved region not counted). Runnable targets first,
 * assemble-only ones last; the flags are 0/1 (the selectors below paste
 * them). */
#define PT_TARGET_ROWS(X, A)                       \
    X(A, "sm_80", 80, 0, 0, 70, 163)               \
    X(A, "sm_86", 86, 0, 0, 71, 99)                \
    X(A, "sm_89", 89, 0, 0, 78, 99)                \
    X(A, "sm_90", 90, 0, 0, 78, 227)               \
    X(A, "sm_90a", 90, 1, 0, 80, 227)              \
    X(A, "sm_100a", 100, 1, 1, 86, 227)            \
    X(A, "sm_120", 120, 0, 1, 87, 99)

/* Y(name) for every target, and for the ones "all" means (runnable and
 * not arch-specific: sm_80 sm_86 sm_89 sm_90). */
#define PT__TARGET_ANY(Y, name, sm, a, asm_only, ptx, smem) Y(name)
#define PT__TARGET_ALL(Y, name, sm, a, asm_only, ptx, smem) PT__IF_##a##asm_only(Y(name))
#define PT__IF_00(x) x
#define PT__IF_01(x)
#define PT__IF_10(x)
#define PT__IF_11(x)
#define PT_TARGET_ANY_MAP(Y) PT_TARGET_ROWS(PT__TARGET_ANY, Y)
#define PT_TARGET_ALL_MAP(Y) PT_TARGET_ROWS(PT__TARGET_ALL, Y)
/* As string literals, each name after a space: " sm_80 sm_86 ..." (for
 * messages and help text: "(supported:" PT_TARGET_NAMES ")"). */
#define PT__SPACE_NAME(name) " " name
#define PT_TARGET_NAMES PT_TARGET_ANY_MAP(PT__SPACE_NAME)
#define PT_TARGET_ALL_NAMES PT_TARGET_ALL_MAP(PT__SPACE_NAME)

/* Parses "sm_80", "sm_90a", ...; unknown names give
 * "unknown arch 'sm_70' (supported: sm_80 sm_86 sm_89 sm_90 sm_90a sm_100a sm_120)". */
int pt_target_parse(const char *name, pt_target *t, pt_err *e);
/* "sm_90a" style name into buf (at least 16 bytes). */
const char *pt_target_name(const pt_target *t, char *buf, size_t n);
/* Lowest .version that ptxas accepts for this .target. */
int pt_target_min_ptx(const pt_target *t);
/* The targets we claim, in order; assemble_only ones last. */
int pt_target_list(const pt_target **out);
/* Shared memory (bytes) one CTA may use on sm_<sm> (the smem_kb column of
 * its row; an sm between rows takes the row below it, below sm_80 sm_80's). */
uint32_t pt_target_smem_limit(int sm);
/* PTX ISA version a CUDA release (e.g. 12040 from cuDriverGetVersion) can load. */
int pt_ptx_for_cuda(int cuda_version);
/* "8.1" from 81 into buf. */
const char *pt_ptx_version_str(int v, char *buf, size_t n);

#endif
