/* Search strategies on a synthetic landscape over a GEMM parameter space:
 * best found versus evaluations, per strategy, over several seeds.
 *
 * The space is the gemm op's own (its check() as the constraint) for a
 * 4096^3 bf16 TN problem on sm_80 when the op is registered; otherwise a
 * GEMM-like space defined here (same parameter names). The landscape is a
 * deterministic function of the config standing in for measured time: a
 * roofline over block tiles, warp tiles, pipeline depth, occupancy, wave
 * quantisation, split-K and rasterisation, times +-6% per-config noise
 * from a hash. It is not the cost model (search/model.c): the "exhaustive
 * by model" row shows how well the model orders this landscape.
 *
 * Usage: search_bench [--seeds N] [--md]   (--md: the markdown table of
 * results/cpu/search.md) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/op.h"
#include "ptx/target.h"
#include "search/model.h"
#include "search/search.h"

typedef struct land {
    const pt_op *op;
    const pt_prepared *pp;
    pt_target t;
    pt_space s;
    double m, n, k;
} land;

static int64_t cfg(const pt_config *c, const char *name, int64_t def)
{
    return pt_config_get(c, name, def);
}

static bool fallback_valid(void *ctx, const pt_config *c)
{
    (void)ctx;
    int64_t bm = cfg(c, "bm", 128), bn = cfg(c, "bn", 128), bk = cfg(c, "bk", 32);
    int64_t wm = cfg(c, "wm", 64), wn = cfg(c, "wn", 64), st = cfg(c, "stages", 3);
    if (wm > bm || wn > bn)
        return false;
    int64_t warps = (bm / wm) * (bn / wn);
    if (warps < 1 || warps > 8)
        return false;
    if (wm * wn / 32 > 128) /* accumulators per thread */
        return false;
    if (st * (bm + bn) * bk * 2 > 160 * 1024)
        return false;
    return true;
}

static bool op_valid(void *ctx, const pt_config *c)
{
    land *l = ctx;
    pt_err e = {0};
    return l->op->check(l->pp, &l->t, c, &e) == PT_OK;
}

static void fallback_space(pt_space *s)
{
    memset(s, 0, sizeof *s);
    pt_param_space p[] = {
        {"bm", "block tile M", 5, {16, 32, 64, 128, 256}},
        {"bn", "block tile N", 5, {16, 32, 64, 128, 256}},
        {"bk", "block tile K", 3, {16, 32, 64}},
        {"wm", "warp tile M", 4, {16, 32, 64, 128}},
        {"wn", "warp tile N", 4, {16, 32, 64, 128}},
        {"stages", "pipeline stages", 4, {2, 3, 4, 5}},
        {"splitk", "split-K factor", 3, {1, 2, 4}},
        {"raster", "swizzled CTA order", 2, {0, 1}},
    };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        s->p[s->nparams++] = p[i];
}

/* The landscape: seconds for one config of the M x N x K problem. */
static double landscape(const land *l, const pt_config *c)
{
    double M = l->m, N = l->n, K = l->k;
    double bm = (double)cfg(c, "bm", 128), bn = (double)cfg(c, "bn", 128);
    double bk = (double)cfg(c, "bk", 32), wm = (double)cfg(c, "wm", 64);
    double wn = (double)cfg(c, "wn", 64), st = (double)cfg(c, "stages", 3);
    double sk = (double)cfg(c, "splitk", 1), ras = (double)cfg(c, "raster", 0);
    double warps = fmax(1, bm / wm) * fmax(1, bn / wn);
    double threads = 32 * warps;
    double smem = st * (bm + bn) * bk * 2;
    double bps = fmin(fmin(floor(232448 / (smem + 1024)), floor(2048 / threads)), 32);
    if (bps < 1)
        return INFINITY;
    double tiles = ceil(M / bm) * ceil(N / bn) * sk;
    double conc = bps * 132;
    double waves = ceil(tiles / conc), wave_eff = tiles / (waves * conc);
    double mma = pow(fmin(1.0, wm * wn / 4096.0), 0.35) * (wm * wn > 8192 ? 0.6 : 1.0);
    double pipe = (st <= 2 ? 0.80 : st <= 3 ? 0.93 : st <= 4 ? 1.0 : 0.99) *
                  (bk <= 16 ? 0.85 : bk <= 32 ? 1.0 : 0.97);
    double occ = fmin(1.0, 0.4 + bps * warps / 16.0);
    double compute = 2 * M * N * K / (989e12 * mma * pipe * occ * wave_eff);
    double traffic = 2 * M * N * K * (1 / bm + 1 / bn) / (ras ? 1.3 : 1.0) + 4 * M * N * (sk - 1) * 2;
    double mem = traffic / (3.35e12 * fmin(1.0, tiles / 132));
    double t = fmax(compute, mem) + 0.5 * fmin(compute, mem) + (sk > 1 ? 4e-6 : 0);
    char buf[512];
    pt_config_str(c, buf, sizeof buf);
    uint64_t h = pt_hash64(buf, strlen(buf));
    double noise = (double)(h >> 11) * 0x1.0p-53 * 2 - 1;
    return t * (1 + 0.06 * noise);
}

/* The cost model's view of the same config (no noise, its own formulas). */
static double model_prior(void *ctx, int64_t index, const pt_config *c)
{
    (void)index;
    const land *l = ctx;
    double bm = (double)cfg(c, "bm", 128), bn = (double)cfg(c, "bn", 128);
    double wm = (double)cfg(c, "wm", 64), wn = (double)cfg(c, "wn", 64);
    double st = (double)cfg(c, "stages", 3), bk = (double)cfg(c, "bk", 32);
    double sk = (double)cfg(c, "splitk", 1);
    search_kernel k = {
        .flops = 2 * l->m * l->n * l->k, .bytes = 2 * (l->m * l->k + l->k * l->n) + 2 * l->m * l->n,
        .tensor = true,
        .blocks = (int64_t)(ceil(l->m / bm) * ceil(l->n / bn) * sk),
        .threads = (int)(32 * fmax(1, bm / wm) * fmax(1, bn / wn)),
        .regs = (int)fmin(255, 40 + wm * wn / 32),
        .smem = (int)(st * (bm + bn) * bk * 2),
        .m = l->m, .n = l->n, .k = l->k, .tile_m = bm, .tile_n = bn, .elem_bytes = 2,
        .pipelined = st >= 2,
    };
    search_estimate est;
    search_estimate_kernel(search_device_for(90), &k, &est);
    return est.seconds;
}

typedef struct run_stats {
    int64_t evals;
    int64_t to5;       /* evaluations until within 5% (0: never) */
    double best;       /* best found */
    double at[8];      /* best after checkpoint fractions */
} run_stats;

static const double checkpoints[] = {0.01, 0.02, 0.05, 0.10, 0.20, 0.50, 1.00};
enum { NCP = 7 };

static void run_one(land *l, search_kind kind, uint64_t seed, int64_t budget, bool prior,
                    int64_t nvalid, double opt, run_stats *rs)
{
    search_opts o = {.kind = kind, .seed = seed, .budget = budget};
    if (prior) {
        o.prior = model_prior;
        o.prior_ctx = l;
    }
    search *s;
    pt_err e = {0};
    if (search_new(&l->s, &o, l->op ? op_valid : fallback_valid, l, &s, &e)) {
        fprintf(stderr, "search_bench: %s\n", e.msg);
        exit(1);
    }
    memset(rs, 0, sizeof *rs);
    rs->best = INFINITY;
    for (int i = 0; i < NCP; i++)
        rs->at[i] = INFINITY;
    /* halving: noisy short timings at the lower rungs */
    uint64_t nz = seed * 0x9e3779b97f4a7c15ull + 1;
    search_cand cand[64];
    int n;
    while ((n = search_ask(s, cand, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            pt_config c;
            pt_space_config(&l->s, cand[i].index, &c);
            double t = landscape(l, &c);
            if (!cand[i].final) {
                nz = nz * 6364136223846793005ull + 1442695040888963407ull;
                double u = (double)(nz >> 11) * 0x1.0p-53 * 2 - 1;
                t *= 1 + (cand[i].rung == 0 ? 0.15 : 0.05) * u;
            }
            search_tell(s, &cand[i], t);
            rs->evals++;
            if (cand[i].final && t < rs->best)
                rs->best = t;
            if (!rs->to5 && rs->best <= opt * 1.05)
                rs->to5 = rs->evals;
            for (int k = 0; k < NCP; k++)
                if (rs->evals <= (int64_t)ceil(checkpoints[k] * (double)nvalid))
                    rs->at[k] = rs->best;
        }
    }
    search_free(s);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int seeds = 10;
    bool md = false, fallback = false;
    const char *shape = "4096,4096,4096";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--md") == 0)
            md = true;
        else if (strcmp(argv[i], "--fallback") == 0)
            fallback = true;
        else if (strcmp(argv[i], "--mnk") == 0 && i + 1 < argc)
            shape = argv[++i];
        else {
            fprintf(stderr, "usage: search_bench [--seeds N] [--md] [--fallback] [--mnk M,N,K]\n");
            return 2;
        }
    }
    if (seeds < 1)
        seeds = 1;
    land l = {.m = 4096, .n = 4096, .k = 4096};
    if (sscanf(shape, "%lf,%lf,%lf", &l.m, &l.n, &l.k) != 3 || l.m < 1 || l.n < 1 || l.k < 1) {
        fprintf(stderr, "search_bench: bad --mnk '%s'\n", shape);
        return 2;
    }
    pt_arena *a = pt_arena_new();
    const char *space_name = "GEMM-like space defined in bench/search_bench.c (--fallback, or the gemm op not registered)";
    l.op = fallback ? NULL : pt_op_find("gemm");
    if (l.op) {
        pt_err e = {0};
        pt_target_parse("sm_80", &l.t, &e);
        pt_problem p = {.op = "gemm", .m = (int64_t)l.m, .n = (int64_t)l.n, .k = (int64_t)l.k, .layout = "tn",
                        .dtype = PT_BF16, .out_dtype = PT_BF16, .alpha = 1.0};
        pt_prepared *pp;
        if (l.op->prepare(a, &p, &l.t, &pp, &e)) {
            fprintf(stderr, "search_bench: gemm prepare: %s\n", e.msg);
            return 1;
        }
        l.pp = pp;
        l.op->space(pp, &l.t, &l.s);
        static char sn[160];
        snprintf(sn, sizeof sn, "the gemm op's space and check() for %.0fx%.0fx%.0f bf16 tn, sm_80",
                 l.m, l.n, l.k);
        space_name = sn;
    } else
        fallback_space(&l.s);

    /* the optimum: exhaustive over every valid config */
    run_stats ex;
    double t0 = now();
    run_one(&l, SEARCH_EXHAUSTIVE, 1, 0, false, 1, INFINITY, &ex);
    int64_t nvalid = ex.evals;
    double opt = ex.best;
    run_one(&l, SEARCH_EXHAUSTIVE, 1, 0, false, nvalid, opt, &ex);
    double ex_s = now() - t0;
    int64_t budget = nvalid / 5; /* 20% of exhaustive */

    printf("%sspace: %s\n", md ? "- " : "", space_name);
    printf("%sconfigs: %lld in the space, %lld valid; optimum %.2f us (exhaustive, %lld evaluations, %.2f s)\n",
           md ? "- " : "", (long long)pt_space_size(&l.s), (long long)nvalid, opt * 1e6,
           (long long)nvalid, ex_s);
    printf("%sbudget for the others: %lld evaluations (20%% of exhaustive); %d seeds each\n\n",
           md ? "- " : "", (long long)budget, seeds);

    struct {
        const char *name;
        search_kind kind;
        bool prior;
        int64_t budget;
    } rows[] = {
        {"exhaustive (index order)", SEARCH_EXHAUSTIVE, false, budget},
        {"exhaustive (cost-model order)", SEARCH_EXHAUSTIVE, true, budget},
        {"random", SEARCH_RANDOM, false, budget},
        {"anneal", SEARCH_ANNEAL, false, budget},
        {"anneal + model start", SEARCH_ANNEAL, true, budget},
        {"genetic", SEARCH_GENETIC, false, budget},
        {"genetic + model start", SEARCH_GENETIC, true, budget},
        {"halving (3 rungs, eta 3)", SEARCH_HALVING, false, budget},
    };
    if (md) {
        printf("| strategy | evaluations | gap to optimum after 1%% / 2%% / 5%% / 10%% / 20%% of exhaustive's (median over seeds) | "
               "final gap median / worst | evaluations to within 5%% median / worst | seeds within 5%% |\n");
        printf("|---|---|---|---|---|---|\n");
    } else
        printf("%-30s %6s  %-40s %-17s %-15s %s\n", "strategy", "evals",
               "gap after 1/2/5/10/20% of exhaustive", "final gap med/max", "to-5% med/max",
               "within 5%");
    int fails = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        bool deterministic = rows[r].kind == SEARCH_EXHAUSTIVE;
        int ns = deterministic ? 1 : seeds;
        double gaps[64][NCP], final[64], to5[64];
        int ok = 0;
        int64_t evals = 0;
        for (int sd = 0; sd < ns && sd < 64; sd++) {
            run_stats rs;
            run_one(&l, rows[r].kind, (uint64_t)sd + 1, rows[r].budget, rows[r].prior, nvalid, opt,
                    &rs);
            for (int k = 0; k < NCP; k++)
                gaps[sd][k] = (rs.at[k] / opt - 1) * 100;
            final[sd] = (rs.best / opt - 1) * 100;
            to5[sd] = rs.to5 ? (double)rs.to5 : INFINITY;
            ok += rs.to5 > 0;
            evals = rs.evals;
        }
        double med[NCP];
        for (int k = 0; k < NCP; k++) {
            double v[64];
            for (int sd = 0; sd < ns; sd++)
                v[sd] = gaps[sd][k];
            qsort(v, (size_t)ns, sizeof v[0], cmp_d);
            med[k] = v[ns / 2];
        }
        qsort(final, (size_t)ns, sizeof final[0], cmp_d);
        qsort(to5, (size_t)ns, sizeof to5[0], cmp_d);
        char gapstr[128] = "", t5[64];
        for (int k = 0; k < 5; k++) {
            char one[24];
            if (isfinite(med[k]))
                snprintf(one, sizeof one, "%s%.1f%%", k ? " / " : "", med[k]);
            else
                snprintf(one, sizeof one, "%s-", k ? " / " : "");
            strcat(gapstr, one);
        }
        if (isfinite(to5[ns - 1]))
            snprintf(t5, sizeof t5, "%.0f / %.0f", to5[ns / 2], to5[ns - 1]);
        else if (isfinite(to5[ns / 2]))
            snprintf(t5, sizeof t5, "%.0f / never", to5[ns / 2]);
        else
            snprintf(t5, sizeof t5, "never");
        if (md)
            printf("| %s | %lld | %s | %.2f%% / %.2f%% | %s | %d/%d |\n", rows[r].name,
                   (long long)evals, gapstr, final[ns / 2], final[ns - 1], t5, ok, ns);
        else
            printf("%-30s %6lld  %-40s %5.2f%% / %5.2f%%  %-15s %d/%d\n", rows[r].name,
                   (long long)evals, gapstr, final[ns / 2], final[ns - 1], t5, ok, ns);
        if ((rows[r].kind == SEARCH_ANNEAL || rows[r].kind == SEARCH_GENETIC) && !rows[r].prior &&
            ok < ns)
            fails++;
    }
    printf("\n%sacceptance (anneal and genetic, blind, within 5%% of the optimum in <= 20%% of exhaustive's evaluations, every seed): %s\n",
           md ? "- " : "", fails ? "NOT MET" : "met");
    pt_arena_free(a);
    return fails ? 1 : 0;
}
