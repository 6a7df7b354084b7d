/* The attention prefill kernel's spaces assemble (issue 11's acceptance;
 * gen/attention_prefill.c): configs check() accepts, built, scanned for
 * local memory and compiled with 0 spills and no C7xxx warning, on two
 * threads:
 *   - the Llama-3-8B prefill (Sq = Sk = 4096, Hq 32, Hkv 8, d 128, causal,
 *     bf16) for sm_80/86/89/90;
 *   - the pack_gqa=1 configs of the same heads with Sq = 77 (a partly empty
 *     tile: the space packs there) for sm_80 (its registers are what can
 *     spill, and they are the same kernel's on every arch).
 * Per commit a seeded sample of each (test_space_sample: the configs with
 * the most live registers, every value of every parameter, a few more):
 * the whole spaces are minutes of nvJitLink (336 + 84 configs took some
 * 14 minutes at load 22 on this 2-core machine); PTXTUNE_FULL_SPACE=1 (or
 * scripts/check_spaces.sh) assembles every config. Skipped without a
 * toolkit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gen/attention_int.h"
#include "ptx/compile.h"
#include "test_space.h"
#include "test_util.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pt_problem llama(int64_t sq)
{
    pt_problem p;
    pt_schema_defaults(&gen_attention_op, &p);
    p.op = "attention";
    p.dtype = PT_BF16;
    p.batch = 1;
    p.heads_q = 32;
    p.heads_kv = 8;
    p.seqlen_q = sq;
    p.seqlen_k = 4096;
    p.head_dim = p.head_dim_v = 128;
    p.causal = true;
    return p;
}

/* The attention op with only the packed configs in its space. */
static int space_packed(const pt_prepared *pp, const pt_target *t, pt_space *s)
{
    int rc = gen_attention_op.space(pp, t, s);
    for (int i = 0; !rc && i < s->nparams; i++)
        if (!strcmp(s->p[i].name, "pack_gqa")) {
            s->p[i].nvalues = 1;
            s->p[i].values[0] = 1;
        }
    return rc;
}

/* The spill risk of a config: its live f32 values per thread, S and O
 * (bn/2 + dv/2 per m atom) and Q's fragments with q_in_regs (d/4). */
static int64_t live(const pt_config *c)
{
    int64_t mi = pt_config_get(c, "bm", 64) / (16 * pt_config_get(c, "warps", 4));
    return mi * ((pt_config_get(c, "bn", 64) + 128) / 2 + pt_config_get(c, "q_in_regs", 0) * 32);
}

/* min: the valid configs there must be (the whole space); target: the
 * sample's size per arch */
static void assemble(const pt_op *op, pt_problem p, const char *const *archs, int narchs, int min, int target,
                     const char *label, const char *what)
{
    pt_compiler *comp = NULL;
    pt_err e = {0};
    if (pt_compiler_open(&comp, &e)) {
        cr_assert(!test_toolkit_required(), "PTXTUNE_REQUIRE_TOOLKIT=1 but: %s", e.msg);
        cr_skip_test("no CUDA toolkit: %s", e.msg);
    }
    double t0 = now();
    int valid = 0;
    test_space_tally t = test_assemble_sample(op, &p, 1, archs, narchs, comp, live, 2, target, 11, &valid);
    if (!test_full_space())
        printf("sampled %d of %d configs (PTXTUNE_FULL_SPACE=1 for all)\n", t.variants, valid);
    printf("attention prefill: %d configs of %s assembled with %s in %.0f s: %d failures, %d with spills, %d with "
           "C7xxx warnings, %d with local memory\n",
           t.variants, what, pt_compiler_describe(comp), now() - t0, t.failures, t.spills, t.warned, t.local);
    /* the line scripts/check_spaces.sh reads */
    printf("space: %s | %s%s | %d | %d | %d | %.1f\n", label, archs[0], narchs > 1 ? "..sm_90" : "", valid, t.variants,
           t.failures + t.spills + t.warned + t.local, now() - t0);
    fflush(stdout);
    pt_compiler_close(comp);
    cr_assert(valid >= min, "only %d valid configs", valid);
    cr_assert(t.variants > 0, "no config assembled");
    cr_assert(t.failures + t.spills + t.warned + t.local == 0, "first: %s", t.first);
}

Test(attention_space, every_config_of_the_llama3_8b_prefill_space_assembles, .timeout = 3600)
{
    static const char *const archs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
    assemble(&gen_attention_op, llama(4096), archs, 4, 300, 6, "attention prefill Llama-3-8B Sq=Sk=4096 causal bf16 (fa2)",
             "the Llama-3-8B space (Sq=Sk=4096, Hq 32, Hkv 8, d 128, causal, bf16) for sm_80 sm_86 sm_89 sm_90");
}

Test(attention_space, every_packed_config_assembles, .timeout = 3600)
{
    static const char *const archs[] = {"sm_80"};
    pt_op packed = gen_attention_op;
    packed.space = space_packed;
    assemble(&packed, llama(77), archs, 1, 80, 8, "attention prefill Llama-3-8B Sq=77 pack_gqa=1 (fa2)", "pack_gqa=1 (Sq=77, Sk=4096, Hq 32, Hkv 8, d 128, causal, bf16) for sm_80");
}
