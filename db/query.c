/* Reading the store: winners (exact fingerprint only), the nearest-bucket
 * lookup, filtered winner lists for export, and run-to-run regressions. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "db/db_int.h"
#include "db/wcols.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char db__winner_select[] =
    "SELECT m.id"
#define X(id, expr) ", " expr
    DB_WCOLS(X)
#undef X
    " FROM winners w JOIN measurements m ON m.id = w.measurement_id"
    " JOIN runs r ON r.id = m.run_id"
    " JOIN fingerprints f ON f.id = w.fingerprint_id"
    " JOIN problems p ON p.id = w.problem_id"
    " LEFT JOIN kernels k ON k.id = m.kernel_id"
    " LEFT JOIN cubins c ON c.kernel_id = m.kernel_id AND c.arch = r.arch";

void db__winner_row(sqlite3_stmt *st, db_winner *w)
{
    memset(w, 0, sizeof *w);
#define T(col) db__col_text(st, DB_WC_##col)
#define D(col) db__col_double(st, DB_WC_##col)
    w->fingerprint = T(FP_KEY);
    w->gpu = T(FP_GPU);
    w->problem_key = T(P_KEY);
    w->problem_name = T(P_NAME);
    w->op = T(P_OP);
    w->config = T(M_CONFIG);
    w->kernel_hash = T(K_HASH);
    w->entry = T(K_ENTRY);
    w->ptx = T(K_PTX);
    w->cubin = sqlite3_column_blob(st, DB_WC_C_CUBIN);
    w->cubin_size = (size_t)sqlite3_column_bytes(st, DB_WC_C_CUBIN);
    if (!w->cubin)
        w->cubin_size = 0;
    w->arch = T(R_ARCH);
    w->launch = T(M_LAUNCH);
    w->source = T(M_SOURCE);
    w->status = T(M_STATUS);
    w->t_min = D(M_TMIN);
    w->t_median = D(M_TMEDIAN);
    w->t_max = D(M_TMAX);
    w->spread = D(M_SPREAD);
    w->tflops = D(M_TFLOPS);
    w->gbps = D(M_GBPS);
    w->reps = sqlite3_column_int(st, DB_WC_M_REPS);
    w->verified = sqlite3_column_int(st, DB_WC_M_VERIFIED);
    w->run_uuid = T(R_UUID);
    w->tool_version = T(R_TOOL);
    w->git_rev = T(R_GIT);
    w->strategy = T(R_STRATEGY);
    w->measured_at = D(M_CREATED);
#undef T
#undef D
}

/* A query over db__winner_select with a WHERE tail. */
static sqlite3_stmt *winner_query(db_store *s, const char *where, pt_err *e)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_buf_puts(&b, db__winner_select);
    pt_buf_puts(&b, where);
    sqlite3_stmt *st = db__prepare(s, b.s, e);
    pt_buf_free(&b);
    return st;
}

static void bind_fp(sqlite3_stmt *st, int first, const db_fingerprint *f)
{
    db__bind_text(st, first, f->gpu ? f->gpu : "");
    sqlite3_bind_int(st, first + 1, f->cc);
    sqlite3_bind_int(st, first + 2, f->sm_count);
    db__bind_text(st, first + 3, f->driver ? f->driver : "");
    db__bind_text(st, first + 4, f->compiler ? f->compiler : "");
    sqlite3_bind_int(st, first + 5, f->ptx_version);
    db__bind_text(st, first + 6, f->generator ? f->generator : "");
    db__bind_text(st, first + 7, f->protocol ? f->protocol : "");
}

/* Every field, not only the key: a hash collision can never serve a winner
 * across fingerprints. */
#define FP_EXACT                                                                         \
    " f.gpu = ?1 AND f.cc = ?2 AND f.sm_count = ?3 AND f.driver = ?4 AND f.compiler = ?5" \
    " AND f.ptx_version = ?6 AND f.generator = ?7 AND f.protocol = ?8"

/* Provenance: a winner timed on the mock device (the test backend) is
 * never served, by any reader (lookup, lists, every export, the runtime's
 * bundle): its times are no device's. */
#define NOT_MOCK " AND m.source <> 'mock'"

int db_winner_get(db_store *s, const db_fingerprint *f, const char *problem_key,
                  db_winner_fn fn, void *ctx, bool *found, pt_err *e)
{
    *found = false;
    sqlite3_stmt *st = winner_query(s, " WHERE" FP_EXACT " AND p.key = ?9" NOT_MOCK, e);
    if (!st)
        return e->code;
    bind_fp(st, 1, f);
    db__bind_text(st, 9, problem_key);
    int rc = db__step(s, st), urc = PT_OK;
    if (rc == SQLITE_ROW) {
        db_winner w;
        db__winner_row(st, &w);
        *found = true;
        urc = fn ? fn(ctx, &w) : PT_OK;
        rc = SQLITE_DONE;
    }
    if (rc != SQLITE_DONE)
        urc = db__fail(s, rc, "reading a winner", e);
    sqlite3_finalize(st);
    return urc;
}

/* "4096,14336" -> dims; returns the count (0 on a malformed list). A size
 * of 0 (an elementwise shape x=0x4096 is a valid key) counts as 1, the
 * smallest bucket, so log2 ratios stay finite; sizes are integers, so every
 * other one is unchanged. Negative or non-finite: malformed. */
static int parse_dims(const char *s, double *d, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v >= 0) || !isfinite(v))
            return 0;
        d[n++] = v < 1 ? 1 : v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return 0;
    }
    return n;
}

static double dims_distance(const double *a, const double *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++)
        d += fabs(log2(a[i] / b[i]));
    return d;
}

static double dims_volume(const double *a, int n)
{
    double v = 1;
    for (int i = 0; i < n; i++)
        v *= a[i];
    return v;
}

int db_lookup(db_store *s, const db_fingerprint *f, const db_problem *p, db_winner_fn fn,
              void *ctx, bool *found, pt_err *e)
{
    return db_lookup_valid(s, f, p, NULL, NULL, fn, ctx, found, e);
}

int db_lookup_valid(db_store *s, const db_fingerprint *f, const db_problem *p,
                    db_config_ok_fn ok, void *ok_ctx, db_winner_fn fn, void *ctx, bool *found,
                    pt_err *e)
{
    int rc = db_winner_get(s, f, p->key, fn, ctx, found, e);
    if (rc || *found)
        return rc;
    enum { MAXD = 16 };
    double want[MAXD];
    int nd = parse_dims(p->dims ? p->dims : "", want, MAXD);
    if (nd == 0)
        return PT_OK;
    sqlite3_stmt *st =
        winner_query(s, " WHERE" FP_EXACT " AND p.op = ?9 AND p.class = ?10" NOT_MOCK, e);
    if (!st)
        return e->code;
    bind_fp(st, 1, f);
    db__bind_text(st, 9, p->op);
    db__bind_text(st, 10, p->klass ? p->klass : p->key);
    int64_t best_id = 0;
    double best_d = INFINITY, best_vol = 0;
    char *best_key = NULL;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        double have[MAXD];
        if (parse_dims(db__col_text(st, DB_WC_P_DIMS), have, MAXD) != nd)
            continue;
        double d = dims_distance(want, have, nd), vol = dims_volume(have, nd);
        const char *key = db__col_text(st, DB_WC_P_KEY);
        bool better = d < best_d - 1e-12 ||
                      (fabs(d - best_d) <= 1e-12 &&
                       (vol > best_vol || (vol == best_vol && best_key && strcmp(key, best_key) < 0)));
        /* a config the asked problem cannot take is no answer */
        if (better && ok && !ok(ok_ctx, db__col_text(st, DB_WC_M_CONFIG)))
            better = false;
        if (better) {
            best_d = d;
            best_vol = vol;
            best_id = sqlite3_column_int64(st, 0);
            free(best_key);
            best_key = strdup(key);
            if (!best_key) {
                sqlite3_finalize(st);
                return pt_errf(e, PT_ENOMEM, "out of memory");
            }
        }
    }
    free(best_key);
    if (rc != SQLITE_DONE) {
        rc = db__fail(s, rc, "looking up the nearest bucket", e);
        sqlite3_finalize(st);
        return rc;
    }
    sqlite3_finalize(st);
    if (!best_id)
        return PT_OK;
    st = winner_query(s, " WHERE m.id = ?1", e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, best_id);
    rc = db__step(s, st);
    int urc = PT_OK;
    if (rc == SQLITE_ROW) {
        db_winner w;
        db__winner_row(st, &w);
        w.nearest = true;
        w.distance = best_d;
        *found = true;
        urc = fn ? fn(ctx, &w) : PT_OK;
    } else
        urc = db__fail(s, rc, "reading the nearest bucket", e);
    sqlite3_finalize(st);
    return urc;
}

/* ---- naming a GPU --------------------------------------------------------- */

/* "NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3" (the name without the vendor). */
static const char *short_name(const char *gpu)
{
    return strncmp(gpu, "NVIDIA ", 7) == 0 ? gpu + 7 : gpu;
}

/* The GPU's short names: the name without the vendor, its first word and
 * that word up to a '-' ("H100", "A100" of "A100-SXM4-80GB"), any case. */
static bool short_match(const char *gpu, const char *want)
{
    const char *s = short_name(gpu);
    if (strcasecmp(s, want) == 0)
        return true;
    size_t w = strcspn(s, " "), d = strcspn(s, " -");
    size_t n = strlen(want);
    return n && ((n == w && strncasecmp(s, want, n) == 0) || (n == d && strncasecmp(s, want, n) == 0));
}

typedef char fpkey[17];

typedef struct fpsel {
    fpkey *keys;
    char **gpus;
    int n, cap;
    pt_buf known; /* "key (gpu), ..." of every fingerprint */
    int nknown;
} fpsel;

static void fpsel_free(fpsel *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->gpus[i]);
    free(f->keys);
    free(f->gpus);
    pt_buf_free(&f->known);
    memset(f, 0, sizeof *f);
}

static int fpsel_add(fpsel *f, const char *key, const char *gpu)
{
    if (f->n == f->cap) {
        int nc = f->cap ? 2 * f->cap : 8;
        fpkey *k = realloc(f->keys, (size_t)nc * sizeof *k);
        if (!k)
            return PT_ENOMEM;
        f->keys = k;
        char **g = realloc(f->gpus, (size_t)nc * sizeof *g);
        if (!g)
            return PT_ENOMEM;
        f->gpus = g;
        f->cap = nc;
    }
    snprintf(f->keys[f->n], 17, "%s", key);
    f->gpus[f->n] = strdup(gpu);
    if (!f->gpus[f->n])
        return PT_ENOMEM;
    f->n++;
    return PT_OK;
}

/* The fingerprints --gpu names, by the first rule that matches any: the
 * key; a unique key prefix (several: ambiguous); the exact GPU name (every
 * fingerprint of that GPU); a short name of one GPU ("H200", "h100",
 * "A100"; several GPUs: ambiguous). None: PT_EINVAL listing the known
 * fingerprints. */
static int fpsel_resolve(db_store *s, const char *gpu, fpsel *f, pt_err *e)
{
    memset(f, 0, sizeof *f);
    pt_buf_init(&f->known);
    sqlite3_stmt *st = db__prepare(s, "SELECT key, gpu FROM fingerprints ORDER BY key", e);
    if (!st)
        return e->code;
    size_t n = strlen(gpu);
    fpsel rule[4];
    memset(rule, 0, sizeof rule);
    int rc, urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        const char *key = db__col_text(st, 0), *name = db__col_text(st, 1);
        if (f->nknown < 8)
            pt_buf_printf(&f->known, "%s%s (%s)", f->nknown ? ", " : "", key, name);
        else if (f->nknown == 8)
            pt_buf_puts(&f->known, ", ...");
        f->nknown++;
        if (strcmp(key, gpu) == 0)
            urc = urc ? urc : fpsel_add(&rule[0], key, name);
        else if (n && strncmp(key, gpu, n) == 0)
            urc = urc ? urc : fpsel_add(&rule[1], key, name);
        if (strcmp(name, gpu) == 0)
            urc = urc ? urc : fpsel_add(&rule[2], key, name);
        else if (short_match(name, gpu))
            urc = urc ? urc : fpsel_add(&rule[3], key, name);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        urc = db__fail(s, rc, "reading fingerprints", e);
    else if (urc)
        urc = pt_errf(e, PT_ENOMEM, "out of memory (fingerprints)");
    int pick = -1;
    for (int i = 0; !urc && i < 4 && pick < 0; i++)
        if (rule[i].n)
            pick = i;
    if (!urc && pick < 0)
        urc = pt_errf(e, PT_EINVAL, "%s: no fingerprint '%s' (known: %s)", s->path, gpu,
                      f->nknown ? f->known.s : "none, the store is empty");
    if (!urc && (pick == 1 || pick == 3)) {
        /* a prefix names one fingerprint; a short name one GPU */
        bool several = pick == 1 ? rule[1].n > 1 : false;
        for (int i = 1; pick == 3 && i < rule[3].n; i++)
            several = several || strcmp(rule[3].gpus[i], rule[3].gpus[0]) != 0;
        if (several) {
            pt_buf l;
            pt_buf_init(&l);
            for (int i = 0; i < rule[pick].n && i < 8; i++)
                pt_buf_printf(&l, "%s%s (%s)", i ? ", " : "", rule[pick].keys[i], rule[pick].gpus[i]);
            urc = pt_errf(e, PT_EINVAL, "%s: --gpu '%s' is ambiguous: %d matches: %s", s->path, gpu,
                          rule[pick].n, l.s ? l.s : "");
            pt_buf_free(&l);
        }
    }
    if (!urc) {
        pt_buf known = f->known;
        int nk = f->nknown;
        *f = rule[pick];
        f->known = known;
        f->nknown = nk;
        rule[pick] = (fpsel){0};
    }
    for (int i = 0; i < 4; i++)
        fpsel_free(&rule[i]);
    return urc;
}

int db_gpu_resolve(db_store *s, const char *gpu, db_fingerprint_fn fn, void *ctx, pt_err *e)
{
    if (!gpu || !*gpu)
        return pt_errf(e, PT_EINVAL, "empty --gpu: give a fingerprint key or a prefix of it, or "
                                     "the GPU's name (see 'ptxtune db fingerprints')");
    fpsel f;
    int rc = fpsel_resolve(s, gpu, &f, e);
    for (int i = 0; !rc && i < f.n; i++)
        rc = db_fingerprints(s, f.keys[i], fn, ctx, e);
    fpsel_free(&f);
    return rc;
}

/* ---- filtered winner lists -------------------------------------------- */

typedef struct wfilter {
    const char *gpu;
    fpsel sel; /* the fingerprints gpu names */
    pcre2_code *re;
    pcre2_match_data *md;
} wfilter;

static int filter_open(db_store *s, wfilter *f, const char *gpu, const char *match, pt_err *e)
{
    memset(f, 0, sizeof *f);
    f->gpu = gpu && *gpu ? gpu : NULL;
    if (gpu && !*gpu)
        return pt_errf(e, PT_EINVAL, "empty --gpu: give a fingerprint key or a prefix of it, or "
                                     "the GPU's name (see 'ptxtune db fingerprints')");
    if (f->gpu) {
        int rc = fpsel_resolve(s, f->gpu, &f->sel, e);
        if (rc)
            return rc;
    }
    if (!match)
        return PT_OK;
    int err;
    PCRE2_SIZE off;
    f->re = pcre2_compile((PCRE2_SPTR)match, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off, NULL);
    if (!f->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return pt_errf(e, PT_EINVAL, "bad --match pattern '%s' at offset %zu: %s", match,
                       (size_t)off, (const char *)msg);
    }
    f->md = pcre2_match_data_create_from_pattern(f->re, NULL);
    return PT_OK;
}

static void filter_close(wfilter *f)
{
    fpsel_free(&f->sel);
    pcre2_match_data_free(f->md);
    pcre2_code_free(f->re);
}

static bool re_match(const wfilter *f, const char *s)
{
    return pcre2_match(f->re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, 0, f->md, NULL) >= 0;
}

static bool filter_pass(const wfilter *f, const db_winner *w)
{
    if (f->gpu) {
        bool ok = false;
        for (int i = 0; !ok && i < f->sel.n; i++)
            ok = strcmp(w->fingerprint, f->sel.keys[i]) == 0;
        if (!ok)
            return false;
    }
    if (f->re && !re_match(f, w->problem_key) && !re_match(f, w->problem_name))
        return false;
    return true;
}

/* Export needs columns the public struct leaves out: the raw row too. */
int db__winners_raw(db_store *s, const char *gpu, const char *match,
                    int (*fn)(void *ctx, sqlite3_stmt *st, const db_winner *w), void *ctx,
                    pt_err *e)
{
    wfilter f;
    int rc = filter_open(s, &f, gpu, match, e);
    if (rc) {
        filter_close(&f);
        return rc;
    }
    sqlite3_stmt *st = winner_query(s, " WHERE 1" NOT_MOCK " ORDER BY f.key, p.key", e);
    if (!st) {
        filter_close(&f);
        return e->code;
    }
    int urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        db_winner w;
        db__winner_row(st, &w);
        if (!filter_pass(&f, &w))
            continue;
        if ((urc = fn(ctx, st, &w)))
            break;
    }
    if (!urc && rc != SQLITE_DONE)
        urc = db__fail(s, rc, "listing winners", e);
    sqlite3_finalize(st);
    filter_close(&f);
    return urc;
}

typedef struct plain_ctx {
    db_winner_fn fn;
    void *ctx;
} plain_ctx;

static int plain_cb(void *ctx, sqlite3_stmt *st, const db_winner *w)
{
    (void)st;
    plain_ctx *p = ctx;
    return p->fn(p->ctx, w);
}

int db_winners(db_store *s, const char *gpu, const char *match, db_winner_fn fn, void *ctx,
               pt_err *e)
{
    plain_ctx p = {fn, ctx};
    return db__winners_raw(s, gpu, match, plain_cb, &p, e);
}

int db__winners_recompute(db_store *s, pt_err *e)
{
    return db__exec(s,
                    "DELETE FROM main.winners;"
                    "INSERT INTO main.winners(fingerprint_id, problem_id, measurement_id)"
                    " SELECT fingerprint_id, problem_id, id FROM ("
                    "  SELECT r.fingerprint_id, m.problem_id, m.id, ROW_NUMBER() OVER ("
                    "    PARTITION BY r.fingerprint_id, m.problem_id"
                    "    ORDER BY " DB_WINNER_ORDER ") AS rn"
                    "  FROM main.measurements m JOIN main.runs r ON r.id = m.run_id"
                    "  LEFT JOIN main.kernels k ON k.id = m.kernel_id"
                    "  WHERE m.status = 'ok' AND m.final = 1)"
                    " WHERE rn = 1",
                    e);
}

int db_winners_rebuild(db_store *s, pt_err *e)
{
    int rc = db__begin(s, e);
    if (rc)
        return rc;
    rc = db__winners_recompute(s, e);
    if (rc) {
        db__rollback(s);
        return rc;
    }
    return db__commit(s, e);
}

/* ---- regression ------------------------------------------------------- */

const char *db_verdict_name(db_verdict v)
{
    static const char *const names[] = {"same", "faster", "SLOWER", "new", "gone", "shared"};
    return names[v];
}

typedef struct rrow {
    char *pkey, *pname, *config, *hash, *sample;
    double t, spread;
} rrow;

/* The final ok timed rows of a run (measured, or the mock device's: model
 * estimates are never regressions), highest rung first per kernel. sample:
 * the run that took the timing (the row's own run unless it was reused). */
static int load_run(db_store *s, int64_t run, rrow **out, int *n, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(
        s,
        "SELECT p.key, p.name, m.config, k.hash, m.t_median, m.spread,"
        " coalesce(m.sample, r.uuid)"
        " FROM measurements m JOIN problems p ON p.id = m.problem_id"
        " JOIN kernels k ON k.id = m.kernel_id JOIN runs r ON r.id = m.run_id"
        " WHERE m.run_id = ?1 AND m.status = 'ok' AND m.final = 1"
        " AND m.source IN ('measured', 'mock')"
        " ORDER BY p.key, k.hash, m.rung DESC",
        e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    size_t cap = 0;
    rrow *v = NULL;
    int rc;
    bool oom = false;
    *n = 0;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        const char *pk = db__col_text(st, 0), *h = db__col_text(st, 3);
        /* highest rung first: keep only the first row of a (problem, kernel) */
        if (*n && strcmp(v[*n - 1].pkey, pk) == 0 && strcmp(v[*n - 1].hash, h) == 0)
            continue;
        if ((size_t)*n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            rrow *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                oom = true;
                break;
            }
            v = nv;
            cap = nc;
        }
        rrow r = {.t = sqlite3_column_double(st, 4), .spread = db__col_double(st, 5)};
        r.pkey = strdup(pk);
        r.pname = strdup(db__col_text(st, 1));
        r.config = strdup(db__col_text(st, 2));
        r.hash = strdup(h);
        r.sample = strdup(db__col_text(st, 6));
        v[(*n)++] = r; /* freed with the rows, whole or not */
        if (!r.pkey || !r.pname || !r.config || !r.hash || !r.sample) {
            oom = true;
            break;
        }
        if (isnan(v[*n - 1].spread))
            v[*n - 1].spread = 0;
    }
    if (oom)
        rc = pt_errf(e, PT_ENOMEM, "out of memory (reading a run)");
    else if (rc != SQLITE_DONE)
        rc = db__fail(s, rc, "reading a run", e);
    else
        rc = PT_OK;
    sqlite3_finalize(st);
    *out = v;
    return rc;
}

static void free_rows(rrow *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].pkey);
        free(v[i].pname);
        free(v[i].config);
        free(v[i].hash);
        free(v[i].sample);
    }
    free(v);
}

/* Winner level: the fastest row of each problem (rows sorted by problem),
 * compacted in place; the others are freed. */
static int best_per_problem(rrow *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && strcmp(v[m - 1].pkey, v[i].pkey) == 0) {
            bool better = v[i].t < v[m - 1].t ||
                          (v[i].t == v[m - 1].t && strcmp(v[i].config, v[m - 1].config) < 0);
            rrow loser = better ? v[m - 1] : v[i];
            if (better)
                v[m - 1] = v[i];
            free(loser.pkey);
            free(loser.pname);
            free(loser.config);
            free(loser.hash);
            free(loser.sample);
            continue;
        }
        v[m++] = v[i];
    }
    return m;
}

/* The fingerprint of a run, every field (copied into buf). */
typedef struct runfp {
    char key[17];
    db_fingerprint f;
    char buf[1024];
} runfp;

static int run_fp(db_store *s, int64_t run, runfp *out, pt_err *e)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = db__prepare(
        s,
        "SELECT f.key, f.gpu, f.cc, f.sm_count, f.driver, f.compiler, f.ptx_version,"
        " f.generator, f.protocol FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id"
        " WHERE r.id = ?1",
        e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW) {
        snprintf(out->key, sizeof out->key, "%s", db__col_text(st, 0));
        char *b = out->buf;
        size_t left = sizeof out->buf;
        const char **dst[] = {&out->f.gpu, &out->f.driver, &out->f.compiler, &out->f.generator,
                              &out->f.protocol};
        int cols[] = {1, 4, 5, 7, 8};
        for (int i = 0; i < 5; i++) {
            int w = snprintf(b, left, "%s", db__col_text(st, cols[i]));
            *dst[i] = b;
            size_t used = (size_t)(w < 0 ? 0 : w) + 1;
            used = used > left ? left : used;
            b += used;
            left -= used;
        }
        out->f.cc = sqlite3_column_int(st, 2);
        out->f.sm_count = sqlite3_column_int(st, 3);
        out->f.ptx_version = sqlite3_column_int(st, 6);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "reading a run", e);
}

/* The fields in which a and b differ, into sum->fields; false when one of
 * them makes the runs incomparable (another GPU or benchmark protocol). */
static bool fp_compare(const db_fingerprint *a, const db_fingerprint *b, db_regress_summary *sum)
{
    size_t n = 0;
    bool ok = true;
#define FIELD(name, differs, comparable)                                                    \
    if (differs) {                                                                          \
        n += (size_t)snprintf(sum->fields + n, n < sizeof sum->fields ? sizeof sum->fields - n : 0, \
                              "%s%s", n ? "," : "", name);                                  \
        ok = ok && (comparable);                                                            \
    }
    FIELD("gpu", strcmp(a->gpu, b->gpu) != 0, false)
    FIELD("cc", a->cc != b->cc, false)
    FIELD("sm_count", a->sm_count != b->sm_count, false)
    FIELD("driver", strcmp(a->driver, b->driver) != 0, true)
    FIELD("compiler", strcmp(a->compiler, b->compiler) != 0, true)
    FIELD("ptx_version", a->ptx_version != b->ptx_version, true)
    FIELD("generator", strcmp(a->generator, b->generator) != 0, true)
    FIELD("protocol", strcmp(a->protocol, b->protocol) != 0, false)
#undef FIELD
    return ok;
}

int db_regress_at(db_store *s, const char *base, const char *cand, double threshold,
                  db_regress_level level, db_regress_fn fn, void *ctx, db_regress_summary *sum,
                  pt_err *e)
{
    memset(sum, 0, sizeof *sum);
    if (!(threshold >= 0) || threshold > 10)
        return pt_errf(e, PT_EINVAL, "threshold %g out of range (0 .. 10, i.e. 0%% .. 1000%%)",
                       threshold);
    int64_t bid, cid;
    int rc = db_run_resolve(s, base, &bid, e);
    if (!rc)
        rc = db_run_resolve(s, cand, &cid, e);
    if (rc)
        return rc;
    runfp bf, cf;
    rc = run_fp(s, bid, &bf, e);
    if (!rc)
        rc = run_fp(s, cid, &cf, e);
    if (rc)
        return rc;
    snprintf(sum->base_fp, sizeof sum->base_fp, "%s", bf.key);
    snprintf(sum->cand_fp, sizeof sum->cand_fp, "%s", cf.key);
    sum->same_fingerprint = strcmp(bf.key, cf.key) == 0;
    sum->level = level;
    if (!fp_compare(&bf.f, &cf.f, sum))
        return pt_errf(e, PT_EINVAL,
                       "runs %s and %s are not comparable: their fingerprints differ in %s (only "
                       "tool, driver and compiler versions may differ)",
                       base, cand, sum->fields);
    rrow *b = NULL, *c = NULL;
    int nb = 0, nc = 0;
    rc = load_run(s, bid, &b, &nb, e);
    if (!rc)
        rc = load_run(s, cid, &c, &nc, e);
    if (!rc && level == DB_REGRESS_WINNERS) {
        nb = best_per_problem(b, nb);
        nc = best_per_problem(c, nc);
    }
    bool win = level == DB_REGRESS_WINNERS;
    int i = 0, j = 0;
    while (!rc && (i < nb || j < nc)) {
        int cmp = i >= nb ? 1 : j >= nc ? -1 : strcmp(b[i].pkey, c[j].pkey);
        if (!cmp && !win)
            cmp = strcmp(b[i].hash, c[j].hash);
        db_regress_row r = {0};
        if (cmp < 0) {
            r = (db_regress_row){b[i].pkey, b[i].pname, b[i].config, b[i].hash, b[i].t, NAN,
                                 b[i].spread, NAN, NAN, NAN, DB_GONE, b[i].config, b[i].hash};
            sum->only_base++;
            i++;
        } else if (cmp > 0) {
            r = (db_regress_row){c[j].pkey, c[j].pname, c[j].config, c[j].hash, NAN, c[j].t,
                                 NAN, c[j].spread, NAN, NAN, DB_NEW, NULL, NULL};
            sum->only_cand++;
            j++;
        } else if (strcmp(b[i].sample, c[j].sample) == 0) {
            /* one timing in both runs (reused, not measured again): no evidence */
            r = (db_regress_row){c[j].pkey, c[j].pname, c[j].config, c[j].hash, b[i].t, c[j].t,
                                 b[i].spread, c[j].spread, 0, NAN, DB_SHARED, b[i].config,
                                 b[i].hash};
            sum->shared++;
            i++;
            j++;
        } else {
            double change = c[j].t / b[i].t - 1.0;
            double noise = 2.0 * sqrt(b[i].spread * b[i].spread + c[j].spread * c[j].spread);
            double bar = threshold > noise ? threshold : noise;
            db_verdict v = change > bar ? DB_SLOWER : change < -bar ? DB_FASTER : DB_SAME;
            r = (db_regress_row){c[j].pkey, c[j].pname, c[j].config, c[j].hash, b[i].t, c[j].t,
                                 b[i].spread, c[j].spread, change, noise, v, b[i].config,
                                 b[i].hash};
            sum->rows++;
            sum->slower += v == DB_SLOWER;
            sum->faster += v == DB_FASTER;
            sum->same += v == DB_SAME;
            i++;
            j++;
        }
        if (fn)
            rc = fn(ctx, &r);
    }
    free_rows(b, nb);
    free_rows(c, nc);
    return rc;
}

int db_regress(db_store *s, const char *base, const char *cand, double threshold,
               db_regress_fn fn, void *ctx, db_regress_summary *sum, pt_err *e)
{
    return db_regress_at(s, base, cand, threshold, DB_REGRESS_KERNELS, fn, ctx, sum, e);
}

/* ---- listings ----------------------------------------------------------- */

int db_run_top(db_store *s, int64_t run, int per_problem, db_top_fn fn, void *ctx, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(
        s,
        "SELECT key, name, config, hash, source, t_median, spread, tflops, gbps, rn, verified"
        " FROM (SELECT p.id AS pid, p.key, p.name, m.config, k.hash, m.source, m.t_median,"
        "  m.spread, m.tflops, m.gbps, m.verified, ROW_NUMBER() OVER (PARTITION BY m.problem_id"
        "  ORDER BY m.t_median, m.config, k.hash) AS rn"
        "  FROM measurements m JOIN problems p ON p.id = m.problem_id"
        "  LEFT JOIN kernels k ON k.id = m.kernel_id"
        "  WHERE m.run_id = ?1 AND m.status = 'ok' AND m.final = 1)"
        " WHERE rn <= ?2 ORDER BY pid, rn",
        e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, per_problem);
    int rc, urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        db_top_row r = {db__col_text(st, 0), db__col_text(st, 1), db__col_text(st, 2),
                        db__col_text(st, 3), db__col_text(st, 4), db__col_double(st, 5),
                        db__col_double(st, 6), db__col_double(st, 7), db__col_double(st, 8),
                        sqlite3_column_int(st, 9), sqlite3_column_int(st, 10)};
        if ((urc = fn(ctx, &r)))
            break;
    }
    if (!urc && rc != SQLITE_DONE)
        urc = db__fail(s, rc, "reading a run's results", e);
    sqlite3_finalize(st);
    return urc;
}

int db_run_classes(db_store *s, int64_t run, db_class_fn fn, void *ctx, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s,
                                   "SELECT status, count(*) FROM measurements WHERE run_id = ?1"
                                   " GROUP BY status ORDER BY count(*) DESC, status",
                                   e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    int rc, urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW)
        if ((urc = fn(ctx, db__col_text(st, 0), sqlite3_column_int64(st, 1))))
            break;
    if (!urc && rc != SQLITE_DONE)
        urc = db__fail(s, rc, "reading a run", e);
    sqlite3_finalize(st);
    return urc;
}

int db_fingerprints(db_store *s, const char *prefix, db_fingerprint_fn fn, void *ctx, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(
        s,
        "SELECT key, gpu, cc, sm_count, driver, compiler, ptx_version, generator, protocol"
        " FROM fingerprints WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key",
        e);
    if (!st)
        return e->code;
    db__bind_text(st, 1, prefix ? prefix : "");
    int rc, urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        db_fingerprint f = {db__col_text(st, 1), sqlite3_column_int(st, 2),
                            sqlite3_column_int(st, 3), db__col_text(st, 4), db__col_text(st, 5),
                            sqlite3_column_int(st, 6), db__col_text(st, 7), db__col_text(st, 8)};
        if ((urc = fn(ctx, db__col_text(st, 0), &f)))
            break;
    }
    if (!urc && rc != SQLITE_DONE)
        urc = db__fail(s, rc, "reading fingerprints", e);
    sqlite3_finalize(st);
    return urc;
}
