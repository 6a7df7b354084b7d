/* Rows from outside: the JSON table (db_import_json) and the checks every
 * SQLite source of a merge passes (db__merge_verify), bundles included.
 *
 * Nothing from outside is trusted. A fingerprint key is recomputed from the
 * fingerprint's fields and a kernel hash from its PTX; every JSON field is
 * type-checked (a string where an integer belongs is refused, never read as
 * 0); a winner needs a positive finite time; a run already in the store must
 * keep its fingerprint. A row that fails any check is refused by name and
 * one refused row refuses the whole source: an import is all or nothing, one
 * transaction, and the error counts the refused rows and gives the first
 * reason. */
#include <jansson.h>

#include "db/db_int.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- base64 (cubins in JSON) ------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Returns a malloc'd buffer, or NULL on bad input. */
static unsigned char *b64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    if (len % 4)
        return NULL;
    unsigned char *out = malloc(len / 4 * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + (size_t)k];
            const char *q = c ? strchr(b64, c) : NULL;
            if (c == '=' && i + 4 == len && k >= 2) {
                pad++;
                v <<= 6;
            } else if (q && !pad)
                v = v << 6 | (uint32_t)(q - b64);
            else {
                free(out);
                return NULL;
            }
        }
        out[o++] = (unsigned char)(v >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(v >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)v;
    }
    *n = o;
    return out;
}

/* ---- shared checks ------------------------------------------------------ */

static bool known_class(const char *c)
{
#define X(n) if (strcmp(c, #n) == 0) return true;
    DB_CLASS_MAP(X)
#undef X
    return false;
}

static bool known_run_status(const char *c)
{
#define X(n) if (strcmp(c, #n) == 0) return true;
    DB_RUN_STATUS(X)
#undef X
    return false;
}

static void kernel_hash(const char *ptx, size_t n, char out[17])
{
    db_kernel_hash(ptx, n, out); /* issue 15: comments are no part of a kernel */
}

/* ---- typed JSON reads ----------------------------------------------------- */

/* The first problem of one row ("" while none); reads after a failure go on
 * (returning harmless values) so the code stays linear. */
typedef struct jck {
    char why[512];
} jck;

static void bad(jck *c, const char *fmt, ...) PT_PRINTF(2, 3);
static void bad(jck *c, const char *fmt, ...)
{
    if (c->why[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

static const char *jtype(const json_t *v)
{
    if (!v)
        return "missing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

/* o.k, a string without NUL bytes (non-empty when asked); "" on failure. */
static const char *j_str(jck *c, json_t *o, const char *where, const char *k, bool nonempty)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_string(v)) {
        bad(c, "'%s%s' must be a string, not %s", where, k, jtype(v));
        return "";
    }
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v)) {
        bad(c, "'%s%s' holds a NUL character", where, k);
        return "";
    }
    if (nonempty && !*s)
        bad(c, "'%s%s' is empty", where, k);
    return s;
}

/* o.k, an integer in [lo, hi]; 0 on failure. */
static int64_t j_int(jck *c, json_t *o, const char *where, const char *k, int64_t lo, int64_t hi)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v)) {
        bad(c, "'%s%s' must be an integer, not %s", where, k, jtype(v));
        return 0;
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        bad(c, "'%s%s' = %lld is out of range [%lld, %lld]", where, k, (long long)x,
            (long long)lo, (long long)hi);
        return 0;
    }
    return (int64_t)x;
}

/* o.k, a number >= lo (> lo when strict), or null when nullable (NAN). */
static double j_num(jck *c, json_t *o, const char *where, const char *k, bool nullable, double lo,
                    bool strict)
{
    json_t *v = json_object_get(o, k);
    if (nullable && json_is_null(v))
        return NAN;
    if (!json_is_number(v)) {
        bad(c, "'%s%s' must be a number%s, not %s", where, k, nullable ? " or null" : "",
            jtype(v));
        return NAN;
    }
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || (strict && x == lo)) {
        bad(c, "'%s%s' = %g must be %s %g", where, k, x, strict ? "above" : "at least", lo);
        return NAN;
    }
    return x;
}

static bool j_bool(jck *c, json_t *o, const char *where, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_boolean(v)) {
        bad(c, "'%s%s' must be true or false, not %s", where, k, jtype(v));
        return false;
    }
    return json_is_true(v);
}

static json_t *j_obj(jck *c, json_t *o, const char *where, const char *k, bool nullable)
{
    json_t *v = json_object_get(o, k);
    if (nullable && json_is_null(v))
        return NULL;
    if (!json_is_object(v)) {
        bad(c, "'%s%s' must be an object%s, not %s", where, k, nullable ? " or null" : "",
            jtype(v));
        return NULL;
    }
    return v;
}

/* A JSON value back to the stored text (NULL for null or absent; out of
 * memory refuses the row). */
static char *jtext(jck *c, json_t *v)
{
    if (!v || json_is_null(v))
        return NULL;
    char *t = json_is_string(v) ? strdup(json_string_value(v))
                                : json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (!t)
        bad(c, "out of memory");
    return t;
}

/* ---- one JSON row ---------------------------------------------------------- */

typedef struct jrun {
    const char *uuid, *tool, *git, *strategy, *budget, *backend, *arch, *args, *host, *status;
    int64_t seed, pid;
    double started, ended;
} jrun;

/* A row of the table, every field read and checked (db_export_text's row
 * layout); the pointers live in the JSON document or in bin/res/launch. */
typedef struct jrow {
    db_fingerprint f;
    const char *fkey;
    db_problem p;
    bool has_kernel, has_cubin;
    db_kernel k;
    db_cubin c;
    jrun r;
    db_measurement m;
    unsigned char *bin;
    char *res, *launch;
} jrow;

static void jrow_free(jrow *r)
{
    free(r->bin);
    free(r->res);
    free(r->launch);
}

static void parse_row(jck *c, json_t *row, jrow *r)
{
    memset(r, 0, sizeof *r);
    json_t *fp = j_obj(c, row, "", "fingerprint", false);
    json_t *prob = j_obj(c, row, "", "problem", false);
    json_t *time = j_obj(c, row, "", "time_s", false);
    json_t *meas = j_obj(c, row, "", "measurement", false);
    json_t *detail = j_obj(c, meas, "measurement.", "detail", false);
    json_t *prov = j_obj(c, meas, "measurement.", "provenance", false);
    json_t *kernel = j_obj(c, row, "", "kernel", true);
    json_t *cubin = j_obj(c, row, "", "cubin", true);
    if (c->why[0])
        return;
    const char *F = "fingerprint.";
    r->f = (db_fingerprint){
        .gpu = j_str(c, fp, F, "gpu", true),
        .cc = (int)j_int(c, fp, F, "cc", 1, INT_MAX),
        .sm_count = (int)j_int(c, fp, F, "sm_count", 0, INT_MAX),
        .driver = j_str(c, fp, F, "driver", false),
        .compiler = j_str(c, fp, F, "compiler", false),
        .ptx_version = (int)j_int(c, fp, F, "ptx_version", 0, INT_MAX),
        .generator = j_str(c, fp, F, "generator", false),
        .protocol = j_str(c, fp, F, "protocol", true),
    };
    r->fkey = j_str(c, fp, F, "key", true);
    const char *P = "problem.";
    r->p = (db_problem){
        .key = j_str(c, prob, P, "key", true),
        .name = j_str(c, prob, P, "name", false),
        .op = j_str(c, prob, P, "op", true),
        .klass = j_str(c, prob, P, "class", true),
        .dims = j_str(c, prob, P, "dims", false),
        .flops = j_num(c, prob, P, "flops", true, 0, false),
        .bytes = j_num(c, prob, P, "bytes", true, 0, false),
    };
    const char *config = j_str(c, row, "", "config", true);
    const char *source = j_str(c, row, "", "source", true);
    if (*source && strcmp(source, "measured") && strcmp(source, "model") && strcmp(source, "mock"))
        bad(c, "'source' is '%s', not measured, model or mock", source);
    const char *D = "measurement.detail.";
    const char *status = j_str(c, detail, D, "status", true);
    if (*status && !known_class(status))
        bad(c, "'%sstatus' is '%s', not an outcome class", D, status);
    bool ok = strcmp(status, "ok") == 0;
    r->m = (db_measurement){
        .config = config,
        .rung = (int)j_int(c, detail, D, "rung", 0, INT_MAX),
        .final = j_bool(c, detail, D, "final"),
        .status = status,
        .error = j_str(c, detail, D, "error", false),
        .source = source,
        .verified = j_bool(c, row, "", "verified"),
        .t_min = j_num(c, time, "time_s.", "min", true, 0, ok),
        .t_median = j_num(c, time, "time_s.", "median", !ok, 0, ok),
        .t_max = j_num(c, time, "time_s.", "max", true, 0, ok),
        .spread = j_num(c, time, "time_s.", "spread", true, 0, false),
        .reps = (int)j_int(c, time, "time_s.", "reps", 0, INT_MAX),
        .tflops = j_num(c, row, "", "tflops", true, 0, false),
        .gbps = j_num(c, row, "", "gbps", true, 0, false),
        .created = j_num(c, detail, D, "created", true, 0, false),
    };
    json_t *launch = json_object_get(row, "launch");
    if (launch && !json_is_object(launch) && !json_is_null(launch) && !json_is_string(launch))
        bad(c, "'launch' must be an object, a string or null, not %s", jtype(launch));
    const char *R = "measurement.provenance.";
    r->r = (jrun){
        .uuid = j_str(c, prov, R, "run", true),
        .tool = j_str(c, prov, R, "tool_version", false),
        .git = j_str(c, prov, R, "git_rev", false),
        .strategy = j_str(c, prov, R, "strategy", false),
        .budget = j_str(c, prov, R, "budget", false),
        .seed = j_int(c, prov, R, "seed", INT64_MIN, INT64_MAX),
        .backend = j_str(c, prov, R, "backend", false),
        .arch = j_str(c, prov, R, "arch", false),
        .args = j_str(c, prov, R, "args_key", false),
        .host = j_str(c, prov, R, "host", false),
        .pid = j_int(c, prov, R, "pid", INT64_MIN, INT64_MAX),
        .started = j_num(c, prov, R, "started", false, 0, false),
        .ended = j_num(c, prov, R, "ended", true, 0, false),
        .status = j_str(c, prov, R, "status", true),
    };
    if (*r->r.status && !known_run_status(r->r.status))
        bad(c, "'%sstatus' is '%s', not a run status", R, r->r.status);
    if (kernel) {
        const char *K = "kernel.";
        r->has_kernel = true;
        r->k = (db_kernel){
            .hash = j_str(c, kernel, K, "hash", true),
            .op = j_str(c, kernel, K, "op", true),
            .config = j_str(c, kernel, K, "config", false),
            .entry = j_str(c, kernel, K, "entry", false),
            .ptx = j_str(c, kernel, K, "ptx", true),
        };
        if (*r->k.op && *r->p.op && strcmp(r->k.op, r->p.op) != 0)
            bad(c, "'kernel.op' is '%s', not the problem's op '%s'", r->k.op, r->p.op);
    }
    if (cubin && !kernel)
        bad(c, "'cubin' without a kernel");
    if (cubin && kernel) {
        const char *C = "cubin.";
        r->has_cubin = true;
        r->c.arch = j_str(c, cubin, C, "arch", true);
        r->c.compiler = j_str(c, cubin, C, "compiler", false);
        json_t *data = json_object_get(cubin, "base64");
        if (json_is_string(data)) {
            if (!(r->bin = b64_decode(json_string_value(data), &r->c.size)))
                bad(c, "'cubin.base64' is not valid base64");
            r->c.data = r->bin;
        } else if (!json_is_null(data))
            bad(c, "'cubin.base64' must be a string or null, not %s", jtype(data));
        json_t *res = json_object_get(cubin, "resources");
        if (res && !json_is_object(res) && !json_is_null(res) && !json_is_string(res))
            bad(c, "'cubin.resources' must be an object, a string or null, not %s", jtype(res));
        r->res = jtext(c, res);
        r->c.resources = r->res;
    }
    if (c->why[0])
        return;
    /* identities recomputed from the content */
    char want[17];
    db_fingerprint_key(&r->f, want);
    if (strcmp(r->fkey, want) != 0)
        bad(c, "fingerprint key %s does not match its fields (%s)", r->fkey, want);
    if (r->has_kernel) {
        kernel_hash(r->k.ptx, strlen(r->k.ptx), want);
        if (strcmp(r->k.hash, want) != 0)
            bad(c, "kernel hash %s does not match its PTX (%s)", r->k.hash, want);
    }
    r->launch = jtext(c, launch);
    r->m.launch = r->launch;
}

/* Stores one checked row. PT_OK with c->why set when the store refuses it
 * (a run of another fingerprint, a problem of another op, a constraint);
 * an error code only for a failure of the store itself. */
static int insert_row(db_store *s, jrow *r, jck *c, db_merge_stats *st, pt_err *e)
{
    int64_t fp_id, prob_id, run_id = 0, run_fp = 0;
    int rc = db__fp_put(s, &r->f, &fp_id, e);
    if (!rc)
        rc = db__problem_put(s, &r->p, &prob_id, e);
    if (rc)
        return rc;
    sqlite3_stmt *q = db__prepare(s, "SELECT op FROM problems WHERE id = ?1", e);
    if (!q)
        return e->code;
    sqlite3_bind_int64(q, 1, prob_id);
    int src = db__step(s, q);
    if (src == SQLITE_ROW && strcmp(db__col_text(q, 0), r->p.op) != 0)
        bad(c, "problem '%s' is in the store with op '%s', not '%s'", r->p.key,
            db__col_text(q, 0), r->p.op);
    sqlite3_finalize(q);
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        return db__fail(s, src, "reading problems", e);
    if (c->why[0])
        return PT_OK;
    q = db__prepare(s, "SELECT id, fingerprint_id FROM runs WHERE uuid = ?1", e);
    if (!q)
        return e->code;
    db__bind_text(q, 1, r->r.uuid);
    src = db__step(s, q);
    if (src == SQLITE_ROW) {
        run_id = sqlite3_column_int64(q, 0);
        run_fp = sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        return db__fail(s, src, "reading runs", e);
    if (run_id && run_fp != fp_id) {
        bad(c, "run %s is in the store under another fingerprint", r->r.uuid);
        return PT_OK;
    }
    if (!run_id) {
        sqlite3_stmt *ins = db__stmt(s, DB_ST_RUN_INSERT, e);
        if (!ins)
            return e->code;
        db__bind_text(ins, 1, r->r.uuid);
        sqlite3_bind_int64(ins, 2, fp_id);
        db__bind_text(ins, 3, r->r.tool);
        db__bind_text(ins, 4, r->r.git);
        db__bind_text(ins, 5, r->r.strategy);
        db__bind_text(ins, 6, r->r.budget);
        sqlite3_bind_int64(ins, 7, r->r.seed);
        db__bind_text(ins, 8, r->r.backend);
        db__bind_text(ins, 9, r->r.arch);
        db__bind_text(ins, 10, r->r.args);
        db__bind_text(ins, 11, r->r.host);
        sqlite3_bind_int64(ins, 12, r->r.pid);
        db__bind_double(ins, 13, r->r.started);
        db__bind_double(ins, 14, r->r.ended);
        db__bind_text(ins, 15, r->r.status);
        src = db__step(s, ins);
        if (src != SQLITE_DONE) {
            if ((src & 0xff) != SQLITE_CONSTRAINT)
                return db__fail(s, src, "storing a run", e);
            bad(c, "run %s refused by the store: %s", r->r.uuid, sqlite3_errmsg(s->h));
            return PT_OK;
        }
        run_id = sqlite3_last_insert_rowid(s->h);
        st->runs++;
    }
    r->m.run_id = run_id;
    r->m.problem_id = prob_id;
    bool inserted = false;
    pt_err re = {0};
    rc = db__record(s, r->has_kernel ? &r->k : NULL, r->has_cubin ? &r->c : NULL, &r->m,
                    &inserted, &re);
    if (rc == PT_EINVAL) { /* a constraint: the row, not the store */
        bad(c, "%s", re.msg);
        return PT_OK;
    }
    if (rc) {
        *e = re;
        return rc;
    }
    st->measurements += inserted;
    st->skipped += !inserted;
    return PT_OK;
}

int db_import_json(db_store *s, const char *text, size_t len, const char *name,
                   db_merge_stats *st, pt_err *e)
{
    db_merge_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        return pt_errf(e, PT_EPARSE, "%s:%d:%d: not valid JSON: %s", name, je.line, je.column,
                       je.text);
    json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    json_t *rows = json_object_get(root, "rows");
    int rc = PT_OK;
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "ptxtune-table") != 0 ||
        !json_is_array(rows))
        rc = pt_errf(e, PT_EINVAL, "%s: not a ptxtune table (expected \"format\": "
                     "\"ptxtune-table\" and a \"rows\" array)", name);
    else if (!json_is_integer(ver) || json_integer_value(ver) < 1 || json_integer_value(ver) > 2)
        /* version 2 adds the runtime's index before the rows (docs/db.md); the rows are read */
        rc = pt_errf(e, PT_EINVAL, "%s: table version %s%s is not supported (the integer 1 or 2)",
                     name, json_is_integer(ver) ? "" : "of type ",
                     json_is_integer(ver) ? "other than 1 or 2" : jtype(ver));
    if (!rc)
        rc = db__begin(s, e);
    if (rc) {
        json_decref(root);
        return rc;
    }
    db_counts before = {0}, after = {0};
    rc = db_count(s, &before, e);
    size_t nrows = json_array_size(rows), first = 0;
    char first_why[512] = "";
    for (size_t i = 0; !rc && i < nrows; i++) {
        json_t *row = json_array_get(rows, i);
        jck c = {""};
        jrow r;
        memset(&r, 0, sizeof r);
        if (!json_is_object(row))
            bad(&c, "not an object but %s", jtype(row));
        else
            parse_row(&c, row, &r);
        if (!c.why[0])
            rc = insert_row(s, &r, &c, st, e);
        jrow_free(&r);
        if (c.why[0] && !st->refused++) {
            first = i + 1;
            snprintf(first_why, sizeof first_why, "%s", c.why);
        }
    }
    if (!rc)
        rc = db_count(s, &after, e);
    json_decref(root);
    if (!rc && st->refused) {
        int64_t refused = st->refused;
        memset(st, 0, sizeof *st);
        st->refused = refused;
        rc = pt_errf(e, PT_EINVAL, "%s: %lld of %zu rows refused, nothing imported; first: row "
                     "%zu: %s", name, (long long)refused, nrows, first, first_why);
    }
    if (rc) {
        db__rollback(s);
        return rc;
    }
    st->fingerprints = after.fingerprints - before.fingerprints;
    st->problems = after.problems - before.problems;
    st->kernels = after.kernels - before.kernels;
    return db__commit(s, e);
}

/* ---- merge sources ---------------------------------------------------------- */

/* The rows of src a merge reads: all, or (filtered) those the measurements
 * in temp.sel reference. */
#define SEL "(SELECT id FROM temp.sel)"
#define FP_FILTER                                                                          \
    " WHERE ?1 = 0 OR f.id IN (SELECT r.fingerprint_id FROM src.runs r JOIN src.measurements" \
    " m ON m.run_id = r.id WHERE m.id IN " SEL ")"
#define K_FILTER                                                                          \
    " WHERE ?1 = 0 OR k.id IN (SELECT m.kernel_id FROM src.measurements m WHERE m.id IN " SEL ")"
#define R_FILTER                                                                          \
    " AND (?1 = 0 OR r.id IN (SELECT m.run_id FROM src.measurements m WHERE m.id IN " SEL "))"
#define M_FILTER " AND (?1 = 0 OR m.id IN " SEL ")"

#define SQL_CLASS(n) ",'" #n "'"
#define SQL_RUN_STATUS(n) ",'" #n "'"

static const char fp_sql[] =
    "SELECT f.id, f.key, f.gpu, f.cc, f.sm_count, f.driver, f.compiler, f.ptx_version,"
    " f.generator, f.protocol FROM src.fingerprints f" FP_FILTER " ORDER BY f.id";
static const char kernel_sql[] =
    "SELECT k.id, k.hash, k.ptx FROM src.kernels k" K_FILTER " ORDER BY k.id";
/* the store's own rows (db_verify); ?1 is bound and unused */
static const char main_fp_sql[] =
    "SELECT f.id, f.key, f.gpu, f.cc, f.sm_count, f.driver, f.compiler, f.ptx_version,"
    " f.generator, f.protocol FROM main.fingerprints f WHERE ?1 = ?1 ORDER BY f.id";
static const char main_kernel_sql[] =
    "SELECT k.id, k.hash, k.ptx FROM main.kernels k WHERE ?1 = ?1 ORDER BY k.id";
/* one reason per bad run; NULL when the run is fine */
static const char run_sql[] =
    "SELECT r.id, r.uuid, CASE"
    " WHEN sf.id IS NULL THEN 'names no fingerprint of the source'"
    " WHEN mf.key IS NOT NULL AND mf.key <> sf.key THEN"
    "  'is in the store under another fingerprint (' || mf.key || ', not ' || sf.key || ')'"
    " WHEN r.status NOT IN ('running'" DB_RUN_STATUS(SQL_RUN_STATUS) ") THEN"
    "  'has an unknown status'"
    " END FROM src.runs r LEFT JOIN src.fingerprints sf ON sf.id = r.fingerprint_id"
    " LEFT JOIN main.runs mr ON mr.uuid = r.uuid"
    " LEFT JOIN main.fingerprints mf ON mf.id = mr.fingerprint_id"
    " WHERE 1" R_FILTER " ORDER BY r.id";
static const char problem_sql[] =
    "SELECT p.id, p.key, CASE"
    " WHEN typeof(p.key) <> 'text' OR p.key = '' THEN 'has no key'"
    " WHEN typeof(p.op) <> 'text' OR p.op = '' THEN 'has no op'"
    " WHEN mp.op IS NOT NULL AND mp.op <> p.op THEN"
    "  'is in the store with op ''' || mp.op || ''', not ''' || p.op || ''''"
    " END FROM src.problems p LEFT JOIN main.problems mp ON mp.key = p.key"
    " WHERE ?1 = 0 OR p.id IN (SELECT m.problem_id FROM src.measurements m WHERE m.id IN " SEL ")"
    " ORDER BY p.id";
static const char meas_sql[] =
    "SELECT m.id, m.config, CASE"
    " WHEN sr.id IS NULL THEN 'names no run of the source'"
    " WHEN sp.id IS NULL THEN 'names no problem of the source'"
    " WHEN m.kernel_id IS NOT NULL AND sk.id IS NULL THEN 'names no kernel of the source'"
    " WHEN typeof(m.config) <> 'text' OR m.config = '' THEN 'has no config'"
    " WHEN m.status NOT IN ('ok'" DB_CLASS_MAP(SQL_CLASS) ") THEN 'has an unknown status'"
    " WHEN m.source NOT IN ('measured', 'model', 'mock') THEN 'has an unknown source'"
    " WHEN m.final NOT IN (0, 1) OR typeof(m.final) <> 'integer' THEN 'has final neither 0 nor 1'"
    " WHEN typeof(m.rung) <> 'integer' OR m.rung < 0 THEN 'has a bad rung'"
    " WHEN m.status = 'ok' AND NOT (typeof(m.t_median) IN ('real', 'integer')"
    "  AND m.t_median > 0 AND m.t_median < 1e300) THEN 'is ok without a positive time'"
    " END FROM src.measurements m LEFT JOIN src.runs sr ON sr.id = m.run_id"
    " LEFT JOIN src.problems sp ON sp.id = m.problem_id"
    " LEFT JOIN src.kernels sk ON sk.id = m.kernel_id"
    " WHERE 1" M_FILTER " ORDER BY m.id";

typedef struct vctx {
    int64_t bad;
    char first[768];
} vctx;

static void vbad(vctx *v, const char *fmt, ...) PT_PRINTF(2, 3);
static void vbad(vctx *v, const char *fmt, ...)
{
    if (v->bad++)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->first, sizeof v->first, fmt, ap);
    va_end(ap);
}

static bool col_is(sqlite3_stmt *st, int i, int type)
{
    return sqlite3_column_type(st, i) == type;
}

static bool col_int32(sqlite3_stmt *st, int i)
{
    if (!col_is(st, i, SQLITE_INTEGER))
        return false;
    sqlite3_int64 x = sqlite3_column_int64(st, i);
    return x >= INT_MIN && x <= INT_MAX;
}

/* One row of a verify query: a bad row counts in v (its first reason kept). */
typedef void verify_row_fn(sqlite3_stmt *st, const char *what, vctx *v);

/* Runs a verify query (parameter 1: filtered) and checks each of its rows. */
static int verify_rows(db_store *s, const char *sql, bool filtered, verify_row_fn *check,
                       const char *what, const char *doing, vctx *v, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, sql, e);
    if (!st)
        return e->code;
    sqlite3_bind_int(st, 1, filtered);
    int rc;
    while ((rc = db__step(s, st)) == SQLITE_ROW)
        check(st, what, v);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, doing, e);
}

static void check_fingerprint(sqlite3_stmt *st, const char *what, vctx *v)
{
    (void)what;
    long long id = sqlite3_column_int64(st, 0);
    const char *gpu = db__col_text(st, 2);
    bool typed = col_is(st, 1, SQLITE_TEXT) && col_is(st, 2, SQLITE_TEXT) &&
                 col_int32(st, 3) && col_int32(st, 4) && col_is(st, 5, SQLITE_TEXT) &&
                 col_is(st, 6, SQLITE_TEXT) && col_int32(st, 7) &&
                 col_is(st, 8, SQLITE_TEXT) && col_is(st, 9, SQLITE_TEXT);
    if (!typed) {
        vbad(v, "fingerprint %lld (gpu '%.200s') has a field of the wrong type", id, gpu);
        return;
    }
    db_fingerprint f = {gpu, sqlite3_column_int(st, 3), sqlite3_column_int(st, 4),
                        db__col_text(st, 5), db__col_text(st, 6),
                        sqlite3_column_int(st, 7), db__col_text(st, 8),
                        db__col_text(st, 9)};
    char want[17];
    db_fingerprint_key(&f, want);
    if (strcmp(db__col_text(st, 1), want) != 0)
        vbad(v, "fingerprint %lld (gpu '%.200s'): key %.40s does not match its fields (%s)",
             id, gpu, db__col_text(st, 1), want);
}

static void check_kernel(sqlite3_stmt *st, const char *what, vctx *v)
{
    (void)what;
    long long id = sqlite3_column_int64(st, 0);
    if (!col_is(st, 1, SQLITE_TEXT) || !col_is(st, 2, SQLITE_TEXT)) {
        vbad(v, "kernel %lld has a hash or PTX that is not text", id);
        return;
    }
    const char *ptx = db__col_text(st, 2);
    size_t n = (size_t)sqlite3_column_bytes(st, 2);
    char want[17];
    kernel_hash(ptx, n, want);
    if (strlen(ptx) != n)
        vbad(v, "kernel %lld: its PTX holds a NUL byte", id);
    else if (strcmp(db__col_text(st, 1), want) != 0)
        vbad(v, "kernel %lld: hash %.40s does not match its PTX (%s)", id,
             db__col_text(st, 1), want);
}

/* A row of a reason query: (id, name, reason or NULL). */
static void check_reason(sqlite3_stmt *st, const char *what, vctx *v)
{
    if (sqlite3_column_type(st, 2) != SQLITE_NULL)
        vbad(v, "%s %lld (%.200s) %s", what, (long long)sqlite3_column_int64(st, 0),
             db__col_text(st, 1), db__col_text(st, 2));
}

/* A damaged source can hide rows from the merge's joins (an index that no
 * longer matches its table): its whole integrity check first. */
static int verify_integrity(db_store *s, const char *src_name, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, "PRAGMA src.integrity_check", e);
    if (!st)
        return e->code;
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW && strcmp(db__col_text(st, 0), "ok") != 0)
        rc = pt_errf(e, PT_EINVAL, "%s: database is corrupt (integrity check: %.300s); nothing "
                     "merged", src_name, db__col_text(st, 0));
    else if (rc == SQLITE_ROW)
        rc = PT_OK;
    else
        rc = db__fail(s, rc, "checking the source's integrity", e);
    sqlite3_finalize(st);
    return rc;
}

int db__merge_verify(db_store *s, bool filtered, const char *src_name, pt_err *e)
{
    vctx v = {0};
    int rc = verify_integrity(s, src_name, e);
    if (!rc)
        rc = verify_rows(s, fp_sql, filtered, check_fingerprint, NULL,
                       "checking the source's fingerprints", &v, e);
    if (!rc)
        rc = verify_rows(s, kernel_sql, filtered, check_kernel, NULL,
                       "checking the source's kernels", &v, e);
    if (!rc)
        rc = verify_rows(s, problem_sql, filtered, check_reason, "problem", "checking the source",
                       &v, e);
    if (!rc)
        rc = verify_rows(s, run_sql, filtered, check_reason, "run", "checking the source", &v, e);
    if (!rc)
        rc = verify_rows(s, meas_sql, filtered, check_reason, "measurement",
                       "checking the source", &v, e);
    if (!rc && v.bad)
        rc = pt_errf(e, PT_EINVAL, "%s: %lld rows refused, nothing merged; first: %s", src_name,
                     (long long)v.bad, v.first);
    return rc;
}

int db_verify(db_store *s, pt_err *e)
{
    vctx v = {0};
    int rc = verify_rows(s, main_fp_sql, false, check_fingerprint, NULL,
                         "checking the source's fingerprints", &v, e);
    if (!rc)
        rc = verify_rows(s, main_kernel_sql, false, check_kernel, NULL,
                       "checking the source's kernels", &v, e);
    if (!rc && v.bad)
        rc = pt_errf(e, PT_EINVAL, "%s: %lld rows do not match their identity; first: %s",
                     s->path, (long long)v.bad, v.first);
    return rc;
}
