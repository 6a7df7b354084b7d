/* PTX byte-identity corpus: for every problem of a problem file and every
 * target, the op's default config and up to N seeded configs that check
 * accepts (seeded per problem and target, so two builds pick the same), each
 * emitted and printed into OUT/pNNN_ARCH.ptx (one file per problem and
 * target, each text headed by its config; an emission error is written as
 * its message). Two trees' outputs compared with diff -r must be identical
 * for a change that means to keep the PTX. Built and run by
 * scripts/ptx_identity.sh (-DCACHED: every module from one ptx_sigcache).
 *   ptx_identity PROBLEMS.txt OUT N sm_80 sm_86 ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/op.h"
#include "search/problem.h"

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#ifdef CACHED /* every module of the run from one ptx_sigcache (ptx/ir.h): emit_bench --cache */
static ptx_sigcache *cache;
#endif

static void emit_one(FILE *o, const pt_op *op, const pt_prepared *pp, const pt_target *t, const pt_config *c)
{
    char cs[256];
    pt_err e = {0};
    ptx_module *m;
    pt_launch l;
    fprintf(o, "//// config %s\n", pt_config_str(c, cs, sizeof cs));
#ifdef CACHED
    if (!cache)
        cache = ptx_sigcache_new();
    int rc = pt_op_build_cached(op, pp, t, 90, cache, c, &m, &l, &e);
#else
    int rc = pt_op_build(op, pp, t, 90, c, &m, &l, &e); /* a base tree may predate the cache */
#endif
    if (rc) {
        fprintf(o, "//// error: %s\n", e.msg);
        return;
    }
    char *text = ptx_print(m);
    fputs(text ? text : "//// print failed\n", o);
    fprintf(o, "//// launch grid %u,%u,%u block %u,%u,%u smem %zu\n", l.grid[0], l.grid[1], l.grid[2], l.block[0],
            l.block[1], l.block[2], l.smem);
    free(text);
    ptx_module_free(m);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: ptx_identity PROBLEMS.txt OUT N ARCH...\n");
        return 2;
    }
    FILE *pf = fopen(argv[1], "rb");
    if (!pf)
        return 2;
    static char text[1 << 20];
    size_t tn = fread(text, 1, sizeof text - 1, pf);
    fclose(pf);
    text[tn] = '\0';
    search_problem_set set;
    pt_err e = {0};
    if (search_problems_parse(text, argv[1], &set, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int nseed = atoi(argv[3]), kernels = 0;
    for (int pi = 0; pi < set.n; pi++) {
        const pt_op *op = pt_op_find(set.v[pi].prob.op);
        for (int ai = 4; ai < argc; ai++) {
            pt_target t;
            if (pt_target_parse(argv[ai], &t, &e))
                return 2;
            char path[4096];
            snprintf(path, sizeof path, "%s/p%03d_%s.ptx", argv[2], pi, argv[ai]);
            FILE *o = fopen(path, "wb");
            if (!o)
                return 2;
            fprintf(o, "//// problem %s (%s)\n", set.v[pi].key, set.v[pi].name);
            pt_arena *a = pt_arena_new();
            pt_prepared *pp;
            pt_err pe = {0};
            if (op->prepare(a, &set.v[pi].prob, &t, &pp, &pe)) {
                fprintf(o, "//// prepare: %s\n", pe.msg);
                fclose(o);
                pt_arena_free(a);
                continue;
            }
            pt_space s;
            pt_config c;
            op->space(pp, &t, &s);
            op->defaults(pp, &t, &c);
            emit_one(o, op, pp, &t, &c);
            kernels++;
            int64_t n = pt_space_size(&s), nvalid = 0;
            int64_t *valid = malloc((size_t)(n ? n : 1) * sizeof *valid);
            for (int64_t i = 0; i < n; i++) {
                pt_space_config(&s, i, &c);
                pt_err ce = {0};
                if (!op->check(pp, &t, &c, &ce))
                    valid[nvalid++] = i;
            }
            uint64_t seed = 0x9e3779b97f4a7c15ull ^ ((uint64_t)pi * 1000 + (uint64_t)ai);
            for (int k = 0; k < nseed && nvalid; k++) { /* seeded picks, without repeats where there is room */
                int64_t j = (int64_t)(rnd(&seed) % (uint64_t)nvalid);
                pt_space_config(&s, valid[j], &c);
                emit_one(o, op, pp, &t, &c);
                kernels++;
                if (nvalid > nseed)
                    valid[j] = valid[--nvalid];
            }
            free(valid);
            fclose(o);
            pt_arena_free(a);
        }
    }
    printf("%d problems, %d kernels\n", set.n, kernels);
    search_problems_free(&set);
    return 0;
}
