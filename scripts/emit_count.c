/* Emits one config of one problem N times (prepare once, then IR build +
 * checks + print, as emit_bench's loop), for callgrind: instructions per
 * emission = (count at N=6 - count at N=1) / 5. Built against a tree's
 * libptxtune.a by scripts/emit_count.sh (-DCACHED: one ptx_sigcache for all
 * emissions).
 *   emit_count ARCH N OP 'ITEMS' ['CONFIG']
 *   e.g. emit_count sm_80 6 attention 'batch=1 heads_q=32 heads_kv=8 seqlen_q=4096 seqlen_k=4096
 *        head_dim=128 causal=1 dtype=bf16' 'bm=64,bn=128,warps=4,q_in_regs=1' */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/op.h"
#include "search/problem.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: emit_count ARCH N OP 'ITEMS' ['CONFIG']\n");
        return 2;
    }
    pt_err e = {0};
    pt_target t;
    if (pt_target_parse(argv[1], &t, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int n = atoi(argv[2]);
    const pt_op *op = pt_op_find(argv[3]);
    if (!op) {
        fprintf(stderr, "no op %s\n", argv[3]);
        return 2;
    }
    pt_arena *a = pt_arena_new();
    search_problem sp;
    pt_prepared *pp;
    if (search_problem_parse(a, argv[3], argv[4], &sp, &e) || op->prepare(a, &sp.prob, &t, &pp, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    pt_space s;
    pt_config c;
    op->space(pp, &t, &s);
    op->defaults(pp, &t, &c);
    if (argc > 5 && pt_config_parse(&s, argv[5], &c, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    size_t bytes = 0;
    int lines = 0;
#ifdef CACHED /* one ptx_sigcache across the emissions (ptx/ir.h), as emit_bench --cache */
    ptx_sigcache *sc = ptx_sigcache_new();
#endif
    for (int r = 0; r < n; r++) {
        ptx_module *m;
        pt_launch l;
#ifdef CACHED
        if (pt_op_build_cached(op, pp, &t, 90, sc, &c, &m, &l, &e)) {
#else
        if (pt_op_build(op, pp, &t, 90, &c, &m, &l, &e)) { /* a base tree may predate the cache */
#endif
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        char *text = ptx_print(m);
        if (r == 0) {
            bytes = strlen(text);
            for (const char *p = text; *p; p++)
                lines += *p == '\n';
        }
        free(text);
        ptx_module_free(m);
    }
    char cs[256];
    printf("%s: %d lines, %zu bytes\n", pt_config_str(&c, cs, sizeof cs), lines, bytes);
#ifdef CACHED
    ptx_sigcache_free(sc);
#endif
    pt_arena_free(a);
    return 0;
}
