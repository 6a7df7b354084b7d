#include "ptx/target.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    pt_target t;
    int min_ptx;
    uint32_t smem;
} targets[] = {
#define X(A, name, sm, a, asm_only, ptx, smem_kb) {name, {sm, a, asm_only}, ptx, (smem_kb) << 10},
    PT_TARGET_ROWS(X, ~)
#undef X
};
enum { NTARGETS = sizeof targets / sizeof targets[0] };

int pt_target_parse(const char *name, pt_target *t, pt_err *e)
{
    for (int i = 0; i < NTARGETS; i++)
        if (strcmp(name, targets[i].name) == 0) {
            *t = targets[i].t;
            return PT_OK;
        }
    return pt_errf(e, PT_EINVAL, "unknown arch '%s' (supported:" PT_TARGET_NAMES ")", name);
}

const char *pt_target_name(const pt_target *t, char *buf, size_t n)
{
    snprintf(buf, n, "sm_%d%s", t->sm, t->arch_specific ? "a" : "");
    return buf;
}

int pt_target_min_ptx(const pt_target *t)
{
    for (int i = 0; i < NTARGETS; i++)
        if (targets[i].t.sm == t->sm && targets[i].t.arch_specific == t->arch_specific)
            return targets[i].min_ptx;
    return 90;
}

int pt_target_list(const pt_target **out)
{
    static const pt_target list[NTARGETS] = {
#define X(A, name, sm, a, asm_only, ptx, smem_kb) {sm, a, asm_only},
        PT_TARGET_ROWS(X, ~)
#undef X
    };
    *out = list;
    return NTARGETS;
}

uint32_t pt_target_smem_limit(int sm)
{
    uint32_t best = targets[0].smem;
    int best_sm = 0;
    for (int i = 0; i < NTARGETS; i++)
        if (targets[i].t.sm <= sm && targets[i].t.sm > best_sm) {
            best_sm = targets[i].t.sm;
            best = targets[i].smem;
        }
    return best;
}

/* PTX ISA release history: CUDA 11.0 -> 7.0 ... 11.8 -> 7.8, 12.0 -> 8.0 ...
 * 12.9 -> 8.8, 13.0 -> 9.0 (12.6 also ships 8.5). */
int pt_ptx_for_cuda(int cuda_version)
{
    int major = cuda_version / 1000, minor = (cuda_version % 1000) / 10;
    if (major < 11)
        return 0;
    if (major == 11)
        return 70 + minor;
    if (major == 12)
        return minor >= 6 ? 80 + minor - 1 : 80 + minor; /* 12.6 reuses 8.5 */
    return 90 + (major - 13) * 10 + minor; /* 13.x: 9.x, assumed to continue */
}

const char *pt_ptx_version_str(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", v / 10, v % 10);
    return buf;
}
