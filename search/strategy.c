/* The strategies. State lives in one struct per search; randomness comes
 * from a xoshiro256** generator seeded from the options, so a search is a
 * pure function of (space, validity, prior, seed, scores told).
 *
 * Configs are handled as slots: positions in the sorted list of valid
 * indices. Per slot: the prior (NAN: not computed), the last score told and
 * a bit per rung saying it was proposed there. */
#include "search/search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SPACE = 1 << 22, MAX_RUNGS = 8 };

struct search {
    search_opts o;
    const pt_space *space;
    int np;
    int64_t nv[PT_MAX_PARAMS];
    int64_t n;       /* valid slots */
    int64_t *idx;    /* slot -> index, ascending */
    double *prior;   /* NAN: not computed */
    double *score;   /* last score told (NAN: none) */
    uint8_t *seen;   /* bit r: proposed at rung r */
    int64_t pruned, asked, told, planned;
    uint64_t rng[4];
    int64_t best_slot;
    double best_score;
    /* exhaustive, random: a fixed order */
    int64_t *order, cursor;
    /* anneal */
    int64_t cur;
    double cur_f; /* log score of cur; INFINITY until told */
    bool cur_told;
    int64_t since_improve, restarts;
    /* genetic */
    int64_t *pop, *gen; /* survivors; the generation being evaluated */
    int npop, ngen, gen_asked, gen_told, popsize;
    /* halving */
    int rung;
    int64_t *rs;        /* slots of the current rung */
    double *rscore;
    int64_t nrs, rs_asked, rs_told;
    /* the batch last asked, for tell */
    search_cand *pending;
    int npending, cap_pending;
    void *scratch; /* allocated with the search, so ask and tell never allocate:
                    * halving's rung ranking, genetic's survivor pool */
};

/* ---- names ------------------------------------------------------------ */

static const char *const kind_names[] = {
#define X(id, name, doc) name,
    SEARCH_KIND_MAP(X)
#undef X
};
static const char *const kind_docs[] = {
#define X(id, name, doc) doc,
    SEARCH_KIND_MAP(X)
#undef X
};

const char *search_kind_name(search_kind k) { return k < SEARCH_NKINDS ? kind_names[k] : "?"; }
const char *search_kind_doc(search_kind k) { return k < SEARCH_NKINDS ? kind_docs[k] : "?"; }

int search_kind_parse(const char *name, search_kind *k, pt_err *e)
{
    for (int i = 0; i < SEARCH_NKINDS; i++)
        if (name && strcmp(name, kind_names[i]) == 0) {
            *k = (search_kind)i;
            return PT_OK;
        }
    return pt_errf(e, PT_EINVAL, "unknown strategy '%s' (exhaustive, random, anneal, genetic, halving)",
                   name ? name : "");
}

/* ---- randomness --------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rnd(search *s)
{
    uint64_t *r = s->rng;
    uint64_t out = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl(r[3], 45);
    return out;
}

static int64_t rnd_below(search *s, int64_t n) { return n <= 1 ? 0 : (int64_t)(rnd(s) % (uint64_t)n); }
static double rnd_unit(search *s) { return (double)(rnd(s) >> 11) * 0x1.0p-53; }

/* ---- slots ---------------------------------------------------------------- */

static int64_t slot_of(const search *s, int64_t index)
{
    int64_t lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (s->idx[mid] == index)
            return mid;
        if (s->idx[mid] < index)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void decode(const search *s, int64_t index, int64_t *pos)
{
    for (int i = s->np - 1; i >= 0; i--) {
        pos[i] = index % s->nv[i];
        index /= s->nv[i];
    }
}

static int64_t encode(const search *s, const int64_t *pos)
{
    int64_t index = 0;
    for (int i = 0; i < s->np; i++)
        index = index * s->nv[i] + pos[i];
    return index;
}

static double prior_of(search *s, int64_t slot)
{
    if (!s->o.prior)
        return 0;
    if (isnan(s->prior[slot])) {
        pt_config c;
        pt_space_config(s->space, s->idx[slot], &c);
        s->prior[slot] = s->o.prior(s->o.prior_ctx, s->idx[slot], &c);
    }
    return s->prior[slot];
}

static bool seen(const search *s, int64_t slot, int rung) { return s->seen[slot] >> rung & 1; }

/* A random slot not yet proposed at rung 0; -1 when every slot was. */
static int64_t random_unseen(search *s)
{
    for (int t = 0; t < 64; t++) {
        int64_t k = rnd_below(s, s->n);
        if (!seen(s, k, 0))
            return k;
    }
    int64_t start = rnd_below(s, s->n);
    for (int64_t i = 0; i < s->n; i++) {
        int64_t k = (start + i) % s->n;
        if (!seen(s, k, 0))
            return k;
    }
    return -1;
}

/* The best-prior slot among a random sample (the whole set when priors are
 * all known); random without a prior. */
static int64_t good_start(search *s, int64_t sample)
{
    if (!s->o.prior)
        return random_unseen(s);
    int64_t best = -1;
    double bp = INFINITY;
    bool all = sample >= s->n;
    if (all)
        sample = s->n;
    for (int64_t i = 0; i < sample; i++) {
        int64_t k = all ? i : random_unseen(s);
        if (k < 0 || seen(s, k, 0))
            continue;
        double p = prior_of(s, k);
        if (best < 0 || p < bp) {
            best = k;
            bp = p;
        }
    }
    return best >= 0 ? best : random_unseen(s);
}

/* ---- construction ---------------------------------------------------------- */

static int cmp_prior_ctx_slot(const search *s, int64_t a, int64_t b)
{
    double pa = s->prior[a], pb = s->prior[b];
    if (pa < pb)
        return -1;
    if (pa > pb)
        return 1;
    return (a > b) - (a < b);
}

/* qsort has no context argument: a small merge sort over slots instead. */
static void sort_by_prior(const search *s, int64_t *v, int64_t n, int64_t *tmp)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    sort_by_prior(s, v, h, tmp);
    sort_by_prior(s, v + h, n - h, tmp);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_prior_ctx_slot(s, v[i], v[j]) <= 0 ? v[i++] : v[j++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

static bool plan_halving(search *s);

int search_new(const pt_space *sp, const search_opts *o, search_valid_fn valid, void *ctx,
               search **out, pt_err *e)
{
    *out = NULL;
    int64_t size = pt_space_size(sp);
    if (size <= 0)
        return pt_errf(e, PT_EINVAL, "empty parameter space");
    if (size > MAX_SPACE)
        return pt_errf(e, PT_EINVAL, "parameter space of %lld configs is too large to enumerate (at most %d)",
                       (long long)size, MAX_SPACE);
    if (o->kind >= SEARCH_NKINDS)
        return pt_errf(e, PT_EINVAL, "unknown strategy");
    search *s = calloc(1, sizeof *s);
    if (!s)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    s->o = *o;
    s->space = sp;
    s->np = sp->nparams;
    for (int i = 0; i < s->np; i++)
        s->nv[i] = sp->p[i].nvalues;
    if (!s->o.batch)
        s->o.batch = 8;
    if (!s->o.rungs)
        s->o.rungs = 3;
    if (s->o.rungs > MAX_RUNGS)
        s->o.rungs = MAX_RUNGS;
    if (s->o.eta < 2)
        s->o.eta = 3;
    if (!s->o.prior_limit)
        s->o.prior_limit = 20000;
    uint64_t seed = o->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix(&seed);
    s->idx = malloc((size_t)size * sizeof *s->idx);
    if (!s->idx)
        goto oom;
    for (int64_t i = 0; i < size; i++) {
        pt_config c;
        pt_space_config(sp, i, &c);
        if (!valid || valid(ctx, &c))
            s->idx[s->n++] = i;
    }
    if (s->n == 0) {
        search_free(s);
        return pt_errf(e, PT_EINVAL, "no valid config in the space (%lld checked)", (long long)size);
    }
    s->prior = malloc((size_t)s->n * sizeof *s->prior);
    if (!s->prior)
        goto oom;
    for (int64_t i = 0; i < s->n; i++)
        s->prior[i] = NAN;
    if (s->o.prior && s->n <= s->o.prior_limit) {
        double best = INFINITY;
        for (int64_t i = 0; i < s->n; i++) {
            double p = prior_of(s, i);
            if (p < best)
                best = p;
        }
        int64_t k = 0;
        for (int64_t i = 0; i < s->n; i++) {
            double p = s->prior[i];
            bool keep = isfinite(p) && !(s->o.prune > 0 && isfinite(best) && p > s->o.prune * best);
            if (keep) {
                s->idx[k] = s->idx[i];
                s->prior[k++] = p;
            }
        }
        s->pruned = s->n - k;
        s->n = k;
        if (s->n == 0) {
            search_free(s);
            return pt_errf(e, PT_EINVAL, "the cost model rules out every valid config");
        }
    }
    size_t nslots = (size_t)(s->n > 0 ? s->n : 1);
    s->score = malloc(nslots * sizeof *s->score);
    s->seen = calloc(nslots, 1);
    if (!s->score || !s->seen)
        goto oom;
    for (int64_t i = 0; i < s->n; i++)
        s->score[i] = NAN;
    s->best_slot = -1;
    s->best_score = INFINITY;
    s->planned = o->budget > 0 && o->budget < s->n ? o->budget : s->n;
    switch (s->o.kind) {
    case SEARCH_EXHAUSTIVE:
    case SEARCH_RANDOM: {
        s->order = malloc((size_t)s->n * sizeof *s->order);
        if (!s->order)
            goto oom;
        for (int64_t i = 0; i < s->n; i++)
            s->order[i] = i;
        if (s->o.kind == SEARCH_RANDOM)
            for (int64_t i = s->n - 1; i > 0; i--) {
                int64_t j = rnd_below(s, i + 1), t = s->order[i];
                s->order[i] = s->order[j];
                s->order[j] = t;
            }
        else if (s->o.prior && !isnan(s->prior[0])) {
            int64_t *tmp = malloc((size_t)s->n * sizeof *tmp);
            if (!tmp)
                goto oom;
            sort_by_prior(s, s->order, s->n, tmp);
            free(tmp);
        }
        break;
    }
    case SEARCH_ANNEAL:
        s->cur = good_start(s, 64);
        s->cur_f = INFINITY;
        /* a batch is neighbours of one state: keep the chain moving when
         * the budget is small (each batch is one step of the walk) */
        if (!o->batch)
            s->o.batch = (int)(s->planned / 16 < 2 ? 2 : s->planned / 16 > 8 ? 8 : s->planned / 16);
        break;
    case SEARCH_GENETIC: {
        /* small budgets need more generations, not bigger ones */
        int p = s->o.population > 0 ? s->o.population
                                    : (int)(s->planned / 8 < 4 ? 4 : s->planned / 8 > 16 ? 16 : s->planned / 8);
        if (p > 256)
            p = 256;
        if (p > s->n / 2)
            p = (int)(s->n / 2 > 2 ? s->n / 2 : 2);
        s->popsize = p;
        s->pop = malloc((size_t)(2 * p + 1) * sizeof *s->pop);
        s->gen = malloc((size_t)(p + 1) * sizeof *s->gen);
        s->scratch = malloc((size_t)(3 * p + 4) * sizeof(int64_t)); /* parents + children */
        if (!s->pop || !s->gen || !s->scratch)
            goto oom;
        break;
    }
    case SEARCH_HALVING:
        if (!plan_halving(s))
            goto oom;
        break;
    default:
        break;
    }
    *out = s;
    return PT_OK;
oom:
    search_free(s);
    return pt_errf(e, PT_ENOMEM, "out of memory (a search over %lld configs)", (long long)size);
}

void search_free(search *s)
{
    if (!s)
        return;
    free(s->idx);
    free(s->prior);
    free(s->score);
    free(s->seen);
    free(s->order);
    free(s->pop);
    free(s->gen);
    free(s->rs);
    free(s->rscore);
    free(s->pending);
    free(s->scratch);
    free(s);
}

int64_t search_valid_count(const search *s) { return s->n; }
int64_t search_pruned_count(const search *s) { return s->pruned; }
int64_t search_evaluations(const search *s) { return s->told; }
int64_t search_planned(const search *s) { return s->planned; }

bool search_best(const search *s, int64_t *index, double *score)
{
    if (s->best_slot < 0)
        return false;
    if (index)
        *index = s->idx[s->best_slot];
    if (score)
        *score = s->best_score;
    return true;
}

/* ---- halving ------------------------------------------------------------ */

static int64_t halving_cost(const search *s, int64_t n0)
{
    int64_t c = 0, k = n0;
    for (int r = 0; r < s->o.rungs; r++) {
        c += k;
        k = (k + s->o.eta - 1) / s->o.eta;
    }
    return c;
}

typedef struct scored {
    double score;
    int64_t slot;
} scored;

/* false when out of memory */
static bool plan_halving(search *s)
{
    int64_t n0 = s->n;
    if (s->o.budget > 0)
        while (n0 > 1 && halving_cost(s, n0) > s->o.budget)
            n0--;
    s->planned = halving_cost(s, n0);
    s->rs = malloc((size_t)n0 * sizeof *s->rs);
    s->rscore = malloc((size_t)n0 * sizeof *s->rscore);
    s->scratch = malloc((size_t)(n0 + 1) * sizeof(scored)); /* a rung's ranking */
    if (!s->rs || !s->rscore || !s->scratch)
        return false;
    if (n0 == s->n) {
        for (int64_t i = 0; i < n0; i++)
            s->rs[i] = i;
    } else if (s->o.prior && !isnan(s->prior[0])) {
        /* the n0 best priors */
        int64_t *all = malloc((size_t)s->n * sizeof *all), *tmp = malloc((size_t)s->n * sizeof *tmp);
        if (!all || !tmp) {
            free(all);
            free(tmp);
            return false;
        }
        for (int64_t i = 0; i < s->n; i++)
            all[i] = i;
        sort_by_prior(s, all, s->n, tmp);
        memcpy(s->rs, all, (size_t)n0 * sizeof *s->rs);
        free(all);
        free(tmp);
    } else {
        /* a random n0-subset (partial Fisher-Yates) */
        int64_t *all = malloc((size_t)s->n * sizeof *all);
        if (!all)
            return false;
        for (int64_t i = 0; i < s->n; i++)
            all[i] = i;
        for (int64_t i = 0; i < n0; i++) {
            int64_t j = i + rnd_below(s, s->n - i), t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
        memcpy(s->rs, all, (size_t)n0 * sizeof *s->rs);
        free(all);
    }
    s->nrs = n0;
    return true;
}

static int cmp_scored(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* Survivors: the best ceil(n/eta) finite scores of the rung (ties by slot). */
static void halving_promote(search *s)
{
    scored *v = s->scratch; /* nrs + 1 entries */
    int64_t m = 0;
    for (int64_t i = 0; i < s->nrs; i++)
        if (isfinite(s->rscore[i]))
            v[m++] = (scored){s->rscore[i], s->rs[i]};
    qsort(v, (size_t)m, sizeof *v, cmp_scored);
    int64_t keep = (s->nrs + s->o.eta - 1) / s->o.eta;
    if (keep > m)
        keep = m;
    for (int64_t i = 0; i < keep; i++)
        s->rs[i] = v[i].slot;
    s->nrs = keep;
    s->rs_asked = s->rs_told = 0;
    s->rung++;
}

/* ---- anneal ----------------------------------------------------------- */

static double temperature(const search *s)
{
    double t0 = 0.15, t1 = 0.003, x = s->planned ? (double)s->told / (double)s->planned : 1;
    return t0 * pow(t1 / t0, x > 1 ? 1 : x);
}

static void anneal_step(search *s, int64_t slot, double score)
{
    double f = isfinite(score) && score > 0 ? log(score) : INFINITY;
    bool accept = !isfinite(s->cur_f) || f <= s->cur_f;
    if (!accept && isfinite(f))
        accept = rnd_unit(s) < exp(-(f - s->cur_f) / temperature(s));
    if (accept) {
        s->cur = slot;
        s->cur_f = f;
    }
}

/* A neighbour of cur: one parameter moved one step (1 in 2) or to any other
 * value; -1 when 32 tries find no valid one. */
static int64_t neighbour(search *s, int64_t from)
{
    int64_t pos[PT_MAX_PARAMS];
    int movable[PT_MAX_PARAMS], nm = 0;
    for (int i = 0; i < s->np; i++)
        if (s->nv[i] > 1)
            movable[nm++] = i;
    if (!nm)
        return -1;
    for (int t = 0; t < 32; t++) {
        decode(s, s->idx[from], pos);
        int p = movable[rnd_below(s, nm)];
        if (rnd_below(s, 2) < 1) {
            int64_t d = rnd_below(s, 2) ? 1 : -1;
            int64_t v = pos[p] + d;
            if (v < 0 || v >= s->nv[p])
                v = pos[p] - d;
            pos[p] = v;
        } else {
            int64_t v = rnd_below(s, s->nv[p] - 1);
            pos[p] = v >= pos[p] ? v + 1 : v;
        }
        int64_t k = slot_of(s, encode(s, pos));
        if (k >= 0)
            return k;
    }
    return -1;
}

static bool in_batch(const search_cand *out, int n, int64_t index)
{
    for (int i = 0; i < n; i++)
        if (out[i].index == index)
            return true;
    return false;
}

static int anneal_ask(search *s, search_cand *out, int max)
{
    int n = 0;
    if (!s->cur_told && !seen(s, s->cur, 0)) {
        out[n++] = (search_cand){s->idx[s->cur], 0, true};
        return n; /* the start is evaluated alone: the chain needs its score */
    }
    int cached = 0;
    while (n < max && s->asked + n < s->planned) {
        int64_t k = neighbour(s, s->cur);
        if (k >= 0 && !seen(s, k, 0) && !in_batch(out, n, s->idx[k])) {
            out[n++] = (search_cand){s->idx[k], 0, true};
            continue;
        }
        if (k >= 0 && seen(s, k, 0) && !isnan(s->score[k]))
            anneal_step(s, k, s->score[k]); /* walking over known ground is free */
        if (++cached > 256) {
            /* the neighbourhood is used up: jump somewhere new */
            int64_t r = random_unseen(s);
            if (r < 0 || in_batch(out, n, s->idx[r]))
                break;
            out[n++] = (search_cand){s->idx[r], 0, true};
            cached = 0;
        }
    }
    return n;
}

/* ---- genetic ------------------------------------------------------------ */

static int64_t tournament(search *s)
{
    int64_t best = s->pop[rnd_below(s, s->npop)];
    for (int i = 1; i < 3; i++) {
        int64_t c = s->pop[rnd_below(s, s->npop)];
        if (s->score[c] < s->score[best])
            best = c;
    }
    return best;
}

static int64_t make_child(search *s)
{
    int64_t pa[PT_MAX_PARAMS], pb[PT_MAX_PARAMS], pc[PT_MAX_PARAMS];
    int movable = 0;
    for (int i = 0; i < s->np; i++)
        movable += s->nv[i] > 1;
    for (int t = 0; t < 32; t++) {
        decode(s, s->idx[tournament(s)], pa);
        decode(s, s->idx[tournament(s)], pb);
        for (int i = 0; i < s->np; i++) {
            pc[i] = rnd_below(s, 2) ? pa[i] : pb[i];
            /* one mutation per child on average, over the parameters that vary */
            if (s->nv[i] > 1 && rnd_below(s, movable) == 0) {
                if (rnd_below(s, 2)) {
                    int64_t d = rnd_below(s, 2) ? 1 : -1;
                    int64_t v = pc[i] + d;
                    pc[i] = v < 0 || v >= s->nv[i] ? pc[i] - d : v;
                } else
                    pc[i] = rnd_below(s, s->nv[i]);
            }
        }
        int64_t k = slot_of(s, encode(s, pc));
        if (k >= 0 && !seen(s, k, 0))
            return k;
    }
    return random_unseen(s);
}

static void genetic_next_generation(search *s)
{
    int p = s->popsize;
    if (s->ngen == 0 && s->npop == 0) {
        /* generation 0: random, or the best priors of a 4x larger sample */
        for (int i = 0; i < p; i++) {
            int64_t k = s->o.prior ? good_start(s, 4) : random_unseen(s);
            bool dup = false;
            for (int j = 0; j < s->ngen; j++)
                dup |= s->gen[j] == k;
            if (k >= 0 && !dup)
                s->gen[s->ngen++] = k;
        }
        return;
    }
    /* survivors: the best p of parents and children (elitist) */
    int64_t *all = s->scratch; /* npop + ngen + 1 <= 3 popsize + 3 entries */
    int na = 0;
    for (int i = 0; i < s->npop; i++)
        all[na++] = s->pop[i];
    for (int i = 0; i < s->ngen; i++)
        if (isfinite(s->score[s->gen[i]]))
            all[na++] = s->gen[i];
    for (int i = 1; i < na; i++)
        for (int j = i; j > 0; j--) {
            double a = s->score[all[j - 1]], b = s->score[all[j]];
            if (b < a || (b == a && all[j] < all[j - 1])) {
                int64_t t = all[j];
                all[j] = all[j - 1];
                all[j - 1] = t;
            } else
                break;
        }
    s->npop = na < p ? na : p;
    for (int i = 0; i < s->npop; i++)
        s->pop[i] = all[i];
    s->ngen = 0;
    if (s->npop < 2) {
        /* nothing worked yet: fresh random blood */
        for (int i = 0; i < p; i++) {
            int64_t k = random_unseen(s);
            bool dup = false;
            for (int j = 0; j < s->ngen; j++)
                dup |= s->gen[j] == k;
            if (k >= 0 && !dup)
                s->gen[s->ngen++] = k;
        }
        return;
    }
    for (int i = 0; i < p; i++) {
        /* the last child of each generation is a random newcomer: diversity
         * against early convergence when populations are small */
        int64_t k = i == p - 1 && p >= 4 ? random_unseen(s) : make_child(s);
        bool dup = false;
        for (int j = 0; j < s->ngen; j++)
            dup |= s->gen[j] == k;
        if (dup)
            k = random_unseen(s);
        dup = false;
        for (int j = 0; j < s->ngen; j++)
            dup |= s->gen[j] == k;
        if (k >= 0 && !dup)
            s->gen[s->ngen++] = k;
    }
}

static int genetic_ask(search *s, search_cand *out, int max)
{
    if (s->gen_asked == s->ngen && s->gen_told == s->ngen) {
        genetic_next_generation(s);
        s->gen_asked = s->gen_told = 0;
        if (s->ngen == 0)
            return 0;
    }
    int n = 0;
    while (n < max && s->gen_asked < s->ngen && s->asked + n < s->planned) {
        int64_t k = s->gen[s->gen_asked++];
        out[n++] = (search_cand){s->idx[k], 0, true};
    }
    /* budget cut the generation short: what was not asked is never told */
    if (s->asked + n >= s->planned)
        s->ngen = s->gen_asked;
    return n;
}

/* ---- ask / tell ---------------------------------------------------------- */

int search_ask(search *s, search_cand *out, int max)
{
    if (max <= 0 || s->npending)
        return 0;
    if (max > s->o.batch && s->o.kind != SEARCH_HALVING)
        max = s->o.batch;
    int n = 0;
    switch (s->o.kind) {
    case SEARCH_EXHAUSTIVE:
    case SEARCH_RANDOM:
        while (n < max && s->cursor < s->planned) {
            int64_t k = s->order[s->cursor++];
            out[n++] = (search_cand){s->idx[k], 0, true};
        }
        break;
    case SEARCH_ANNEAL:
        if (s->asked < s->planned)
            n = anneal_ask(s, out, max);
        break;
    case SEARCH_GENETIC:
        if (s->asked < s->planned)
            n = genetic_ask(s, out, max);
        break;
    case SEARCH_HALVING:
        if (s->rs_asked == s->nrs && s->rs_told == s->nrs && s->nrs > 0) {
            if (s->rung + 1 >= s->o.rungs)
                return 0;
            halving_promote(s);
        }
        while (n < max && s->rs_asked < s->nrs) {
            int64_t k = s->rs[s->rs_asked++];
            out[n++] = (search_cand){s->idx[k], s->rung, s->rung + 1 >= s->o.rungs};
        }
        break;
    default:
        break;
    }
    for (int i = 0; i < n; i++) {
        int64_t k = slot_of(s, out[i].index);
        s->seen[k] |= (uint8_t)(1u << out[i].rung);
    }
    if (n > s->cap_pending) {
        search_cand *p = realloc(s->pending, (size_t)n * sizeof *p);
        if (!p)
            return -PT_ENOMEM;
        s->pending = p;
        s->cap_pending = n;
    }
    memcpy(s->pending, out, (size_t)n * sizeof *out);
    s->npending = n;
    s->asked += n;
    return n;
}

void search_tell(search *s, const search_cand *c, double score)
{
    int64_t k = slot_of(s, c->index);
    if (k < 0)
        return;
    /* drop it from pending (in order, but tolerate any order) */
    for (int i = 0; i < s->npending; i++)
        if (s->pending[i].index == c->index && s->pending[i].rung == c->rung) {
            memmove(&s->pending[i], &s->pending[i + 1],
                    (size_t)(s->npending - i - 1) * sizeof *s->pending);
            s->npending--;
            break;
        }
    if (!(score > 0))
        score = INFINITY;
    s->score[k] = score;
    s->told++;
    if (c->final && score < s->best_score) {
        s->best_score = score;
        s->best_slot = k;
        s->since_improve = 0;
    } else
        s->since_improve++;
    switch (s->o.kind) {
    case SEARCH_ANNEAL:
        if (!s->cur_told && k == s->cur) {
            s->cur_told = true;
            s->cur_f = isfinite(score) ? log(score) : INFINITY;
            if (!isfinite(score)) {
                int64_t r = random_unseen(s);
                if (r >= 0) {
                    s->cur = r;
                    s->cur_told = false;
                }
            }
        } else
            anneal_step(s, k, score);
        /* stuck: go back to the best so far, or (every other time) start
         * afresh somewhere not seen, to leave a local basin */
        if (s->since_improve > (s->planned / 8 > 8 ? s->planned / 8 : 8) && s->best_slot >= 0) {
            int64_t r = (s->restarts++ & 1) ? random_unseen(s) : -1;
            if (r >= 0) {
                s->cur = r;
                s->cur_told = false;
                s->cur_f = INFINITY;
            } else {
                s->cur = s->best_slot;
                s->cur_f = log(s->best_score);
            }
            s->since_improve = 0;
        }
        break;
    case SEARCH_GENETIC:
        s->gen_told++;
        break;
    case SEARCH_HALVING:
        for (int64_t i = 0; i < s->nrs; i++)
            if (s->rs[i] == k) {
                s->rscore[i] = score;
                break;
            }
        s->rs_told++;
        break;
    default:
        break;
    }
}
