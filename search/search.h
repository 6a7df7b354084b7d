/* Search strategies over an op's parameter space (gen/op.h pt_space).
 *
 * A strategy works on configuration indices (pt_space_config order) and
 * knows nothing of PTX: the caller says which configs are valid (the op's
 * check()), optionally gives a prior (a cost-model estimate, lower is
 * better) and reports a score for every proposal (seconds, INFINITY for a
 * failure). Protocol: search_ask proposes a batch, the caller evaluates it
 * and calls search_tell once per proposal in the order given, then asks
 * again. Proposals depend only on the seed and the scores told, never on
 * timing, so a sweep replayed from stored scores proposes the same configs.
 *
 * No config is ever proposed twice at the same rung. Successive halving
 * re-proposes survivors at higher rungs (longer timings); every other
 * strategy uses rung 0 only. */
#ifndef PT_SEARCH_H
#define PT_SEARCH_H

#include "gen/op.h"

#define SEARCH_KIND_MAP(X)                                                               \
    X(EXHAUSTIVE, "exhaustive", "every valid config, best prior first")                 \
    X(RANDOM, "random", "a seeded random order")                                         \
    X(ANNEAL, "anneal", "simulated annealing over neighbouring configs")                \
    X(GENETIC, "genetic", "tournament selection, uniform crossover, mutation, elitism") \
    X(HALVING, "halving", "successive halving: short timings first, longer for survivors")

typedef enum search_kind {
#define X(id, name, doc) SEARCH_##id,
    SEARCH_KIND_MAP(X)
#undef X
    SEARCH_NKINDS
} search_kind;

/* "unknown strategy 'x' (exhaustive, random, anneal, genetic, halving)" */
int search_kind_parse(const char *name, search_kind *k, pt_err *e);
const char *search_kind_name(search_kind k);
const char *search_kind_doc(search_kind k);

typedef bool (*search_valid_fn)(void *ctx, const pt_config *c);
/* Estimated seconds (INFINITY: the model says it cannot run). */
typedef double (*search_prior_fn)(void *ctx, int64_t index, const pt_config *c);

typedef struct search_opts {
    search_kind kind;
    uint64_t seed;
    int64_t budget;  /* evaluations (rungs included); <= 0: every valid config */
    int batch;       /* proposals per ask; 0: 8 (anneal: budget/16 in 2..8; genetic:
                      * a generation; halving: a rung) */
    search_prior_fn prior; /* optional */
    void *prior_ctx;
    /* With a prior: drop configs whose prior is infinite, and (prune > 0)
     * those above prune x the best prior. Computed on every valid config
     * when there are at most prior_limit of them (0: 20000). */
    double prune;
    int64_t prior_limit;
    int rungs;       /* halving: levels (0: 3) */
    int eta;         /* halving: keep 1/eta per level (0: 3) */
    int population;  /* genetic: (0: 16) */
} search_opts;

typedef struct search_cand {
    int64_t index;  /* into the space */
    int rung;
    bool final;     /* its score may make it the winner */
} search_cand;

typedef struct search search;

/* Enumerates the valid configs (PT_EINVAL when none is valid, or the space
 * has more than 2^22 configs). */
int search_new(const pt_space *s, const search_opts *o, search_valid_fn valid, void *ctx,
               search **out, pt_err *e);
void search_free(search *s);
/* Up to max proposals into out; 0 when the search is over, -PT_ENOMEM when
 * out of memory (the search is then unusable: free it). */
int search_ask(search *s, search_cand *out, int max);
/* The score of a proposal (seconds; INFINITY: failed). */
void search_tell(search *s, const search_cand *c, double score);

int64_t search_valid_count(const search *s);  /* after pruning */
int64_t search_pruned_count(const search *s); /* dropped by the prior */
int64_t search_evaluations(const search *s);  /* told so far */
/* Best final score told so far; false when none. */
bool search_best(const search *s, int64_t *index, double *score);
/* The budget in evaluations the strategy will use (for progress and ETA). */
int64_t search_planned(const search *s);

#endif
