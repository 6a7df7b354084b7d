/* Opening, migrating and writing the store.
 *
 * Opening order matters: busy_timeout first (other processes may hold
 * locks), then an ownership check that only reads (application_id,
 * user_version, the schema's size), then the journal mode: a foreign file is
 * refused before anything could change it (journal_mode=WAL is persistent and
 * would rewrite its header). Migrations run in one BEGIN IMMEDIATE that
 * re-reads user_version inside, so four processes creating one new file at
 * once apply each step exactly once. */
#include "db/db_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Schema steps: migrations[v] takes user_version v to v+1. Never edit a
 * shipped step; append one. */
static const char *const migrations[DB_SCHEMA_VERSION] = {
    /* 0 -> 1: the records */
    "CREATE TABLE fingerprints(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  key TEXT NOT NULL UNIQUE,\n"
    "  gpu TEXT NOT NULL, cc INTEGER NOT NULL, sm_count INTEGER NOT NULL,\n"
    "  driver TEXT NOT NULL, compiler TEXT NOT NULL, ptx_version INTEGER NOT NULL,\n"
    "  generator TEXT NOT NULL, protocol TEXT NOT NULL,\n"
    "  UNIQUE(gpu, cc, sm_count, driver, compiler, ptx_version, generator, protocol));\n"
    "CREATE TABLE problems(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  key TEXT NOT NULL UNIQUE, op TEXT NOT NULL, class TEXT NOT NULL, dims TEXT NOT NULL,\n"
    "  name TEXT NOT NULL DEFAULT '', flops REAL, bytes REAL);\n"
    "CREATE TABLE kernels(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  hash TEXT NOT NULL UNIQUE, op TEXT NOT NULL, config TEXT NOT NULL,\n"
    "  entry TEXT NOT NULL, ptx TEXT NOT NULL);\n"
    "CREATE TABLE cubins(\n"
    "  kernel_id INTEGER NOT NULL REFERENCES kernels(id), arch TEXT NOT NULL,\n"
    "  compiler TEXT NOT NULL, cubin BLOB, resources TEXT,\n"
    "  PRIMARY KEY(kernel_id, arch));\n"
    "CREATE TABLE runs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  uuid TEXT NOT NULL UNIQUE,\n"
    "  fingerprint_id INTEGER NOT NULL REFERENCES fingerprints(id),\n"
    "  tool_version TEXT NOT NULL, git_rev TEXT NOT NULL,\n"
    "  strategy TEXT NOT NULL, budget TEXT NOT NULL, seed INTEGER NOT NULL,\n"
    "  backend TEXT NOT NULL, args_key TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,\n"
    "  started REAL NOT NULL, ended REAL,\n"
    "  status TEXT NOT NULL CHECK(status IN ('running','done','failed','interrupted')));\n"
    "CREATE TABLE measurements(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"
    "  problem_id INTEGER NOT NULL REFERENCES problems(id),\n"
    "  kernel_id INTEGER REFERENCES kernels(id),\n"
    "  config TEXT NOT NULL, rung INTEGER NOT NULL DEFAULT 0, final INTEGER NOT NULL DEFAULT 1,\n"
    "  status TEXT NOT NULL CHECK(status IN ('ok','compile_error','resource_limit',\n"
    "    'launch_error','fault','timeout','wrong_answer','invalid','duplicate')),\n"
    "  error TEXT NOT NULL DEFAULT '',\n"
    "  source TEXT NOT NULL CHECK(source IN ('measured','model')),\n"
    "  verified INTEGER NOT NULL DEFAULT 0,\n"
    "  t_min REAL, t_median REAL, t_max REAL, spread REAL, reps INTEGER,\n"
    "  tflops REAL, gbps REAL, launch TEXT, created REAL NOT NULL,\n"
    "  UNIQUE(run_id, problem_id, config, rung));\n"
    "CREATE UNIQUE INDEX measurements_kernel ON measurements(run_id, problem_id, kernel_id, rung)\n"
    "  WHERE kernel_id IS NOT NULL AND status <> 'duplicate';\n"
    "CREATE TABLE winners(\n"
    "  fingerprint_id INTEGER NOT NULL REFERENCES fingerprints(id),\n"
    "  problem_id INTEGER NOT NULL REFERENCES problems(id),\n"
    "  measurement_id INTEGER NOT NULL REFERENCES measurements(id),\n"
    "  PRIMARY KEY(fingerprint_id, problem_id));\n",
    /* 1 -> 2: the target arch of a run (which cubin a winner serves), and
     * the indexes the winner update, lookup and resume queries use */
    "ALTER TABLE runs ADD COLUMN arch TEXT NOT NULL DEFAULT '';\n"
    "CREATE INDEX measurements_problem ON measurements(problem_id, status);\n"
    "CREATE INDEX runs_args ON runs(args_key, status);\n"
    "CREATE INDEX problems_class ON problems(op, class);\n",
    /* 2 -> 3: provenance and identities (issue 15). source gains 'mock' (the
     * test device: never served as a winner); rows of mock runs said
     * 'measured' and now say 'mock'. sample: the uuid of the run that took
     * a row's timing when the row was reused from an earlier run (NULL:
     * this run's own). problems.canon: the key is canonical (0: written by
     * an older build; db_rekey makes it so). The kernels are rehashed and
     * the winners recomputed in C after this step (migrate_v3). SQLite
     * cannot change a CHECK in place: the table is rebuilt, winners (which
     * refer to it) dropped first and recomputed. */
    "CREATE TABLE measurements_v3(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"
    "  problem_id INTEGER NOT NULL REFERENCES problems(id),\n"
    "  kernel_id INTEGER REFERENCES kernels(id),\n"
    "  config TEXT NOT NULL, rung INTEGER NOT NULL DEFAULT 0, final INTEGER NOT NULL DEFAULT 1,\n"
    "  status TEXT NOT NULL CHECK(status IN ('ok','compile_error','resource_limit',\n"
    "    'launch_error','fault','timeout','wrong_answer','invalid','duplicate')),\n"
    "  error TEXT NOT NULL DEFAULT '',\n"
    "  source TEXT NOT NULL CHECK(source IN ('measured','model','mock')),\n"
    "  verified INTEGER NOT NULL DEFAULT 0,\n"
    "  t_min REAL, t_median REAL, t_max REAL, spread REAL, reps INTEGER,\n"
    "  tflops REAL, gbps REAL, launch TEXT, created REAL NOT NULL, sample TEXT,\n"
    "  UNIQUE(run_id, problem_id, config, rung));\n"
    "INSERT INTO measurements_v3(id, run_id, problem_id, kernel_id, config, rung, final, status,\n"
    "  error, source, verified, t_min, t_median, t_max, spread, reps, tflops, gbps, launch,\n"
    "  created)\n"
    " SELECT m.id, m.run_id, m.problem_id, m.kernel_id, m.config, m.rung, m.final, m.status,\n"
    "  m.error, CASE WHEN m.source = 'measured' AND r.backend = 'mock' THEN 'mock'\n"
    "  ELSE m.source END, m.verified, m.t_min, m.t_median, m.t_max, m.spread, m.reps,\n"
    "  m.tflops, m.gbps, m.launch, m.created\n"
    " FROM measurements m LEFT JOIN runs r ON r.id = m.run_id ORDER BY m.id;\n"
    "DROP TABLE winners;\n"
    "DROP TABLE measurements;\n"
    "ALTER TABLE measurements_v3 RENAME TO measurements;\n"
    "CREATE UNIQUE INDEX measurements_kernel ON measurements(run_id, problem_id, kernel_id, rung)\n"
    "  WHERE kernel_id IS NOT NULL AND status <> 'duplicate';\n"
    "CREATE INDEX measurements_problem ON measurements(problem_id, status);\n"
    "CREATE INDEX measurements_reuse ON measurements(problem_id, kernel_id);\n"
    "CREATE TABLE winners(\n"
    "  fingerprint_id INTEGER NOT NULL REFERENCES fingerprints(id),\n"
    "  problem_id INTEGER NOT NULL REFERENCES problems(id),\n"
    "  measurement_id INTEGER NOT NULL REFERENCES measurements(id),\n"
    "  PRIMARY KEY(fingerprint_id, problem_id));\n"
    "ALTER TABLE problems ADD COLUMN canon INTEGER NOT NULL DEFAULT 0;\n",
};

static const char *const stmt_sql[DB_NSTMT] = {
#define X(id, sql) sql,
    DB_STMT_MAP(X)
#undef X
};

double db__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void db__uuid(char out[33])
{
    unsigned char b[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f)
        fclose(f);
    if (n != sizeof b) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x[2] = {(uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32), (uint64_t)ts.tv_sec};
        uint64_t h1 = pt_hash64(x, sizeof x), h2 = pt_hash64(&h1, sizeof h1) ^ x[0];
        memcpy(b, &h1, 8);
        memcpy(b + 8, &h2, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* ---- errors and statements -------------------------------------------- */

int db__fail(db_store *s, int src, const char *what, pt_err *e)
{
    int prim = src & 0xff;
    s->io_failed = prim == SQLITE_FULL || prim == SQLITE_IOERR;
    const char *msg = s->h ? sqlite3_errmsg(s->h) : sqlite3_errstr(src);
    switch (prim) {
    case SQLITE_NOTADB:
        return pt_errf(e, PT_EINVAL, "%s: not a ptxtune database (not an SQLite file)", s->path);
    case SQLITE_CORRUPT:
        /* bad input, like a file that is not ours */
        return pt_errf(e, PT_EINVAL, "%s: database is corrupt (%s); nothing was written",
                       s->path, msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return pt_errf(e, PT_EIO, "%s: still locked by another process after %d ms (%s)",
                       s->path, s->busy_ms, what);
    case SQLITE_CONSTRAINT:
        /* a row that breaks the schema's rules: bad input, never "already present" */
        return pt_errf(e, PT_EINVAL, "%s: %s refused: %s", s->path, what, msg);
    case SQLITE_FULL:
        return pt_errf(e, PT_EIO, "%s: disk full while %s", s->path, what);
    case SQLITE_IOERR: {
        int en = s->h ? sqlite3_system_errno(s->h) : 0;
        return pt_errf(e, PT_EIO, "%s: %s: %s%s%s%s", s->path, what, msg, en ? " (" : "",
                       en ? strerror(en) : "", en ? ")" : "");
    }
    case SQLITE_READONLY:
        return pt_errf(e, PT_EIO, "%s: read-only (%s)", s->path, what);
    case SQLITE_CANTOPEN:
        return pt_errf(e, PT_EIO, "%s: cannot open (%s)", s->path, msg);
    default:
        return pt_errf(e, PT_EIO, "%s: %s: %s", s->path, what, msg);
    }
}

static bool busy(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* sqlite's own busy handler covers most waits; this loop covers the cases
 * it does not (a busy WAL recovery, a lock taken while the schema changes). */
int db__step(db_store *s, sqlite3_stmt *st)
{
    double deadline = mono_ms() + s->busy_ms;
    for (;;) {
        int rc = sqlite3_step(st);
        if (!busy(rc) || mono_ms() > deadline)
            return rc;
        sqlite3_reset(st);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

int db__exec(db_store *s, const char *sql, pt_err *e)
{
    double deadline = mono_ms() + s->busy_ms;
    for (;;) {
        int rc = sqlite3_exec(s->h, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return PT_OK;
        if (!busy(rc) || mono_ms() > deadline) {
            /* name the statement: a COMMIT that hits a full disk is no schema step */
            char what[64];
            size_t n = strcspn(sql, "\n;(");
            snprintf(what, sizeof what, "running '%.*s'", (int)(n < 40 ? n : 40), sql);
            return db__fail(s, rc, what, e);
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

sqlite3_stmt *db__prepare(db_store *s, const char *sql, pt_err *e)
{
    sqlite3_stmt *st = NULL;
    int rc;
    double deadline = mono_ms() + s->busy_ms;
    while ((rc = sqlite3_prepare_v2(s->h, sql, -1, &st, NULL)) != SQLITE_OK) {
        if (!busy(rc) || mono_ms() > deadline) {
            db__fail(s, rc, "preparing a query", e);
            return NULL;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return st;
}

sqlite3_stmt *db__stmt(db_store *s, db_stmt_id id, pt_err *e)
{
    if (!s->st[id])
        s->st[id] = db__prepare(s, stmt_sql[id], e);
    else {
        sqlite3_reset(s->st[id]);
        sqlite3_clear_bindings(s->st[id]);
    }
    return s->st[id];
}

int db__begin(db_store *s, pt_err *e) { return db__exec(s, "BEGIN IMMEDIATE", e); }

int db__commit(db_store *s, pt_err *e)
{
    int rc = db__exec(s, "COMMIT", e);
    if (rc)
        db__rollback(s);
    return rc;
}

void db__rollback(db_store *s)
{
    if (!sqlite3_get_autocommit(s->h))
        sqlite3_exec(s->h, "ROLLBACK", NULL, NULL, NULL);
}

void db__bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void db__bind_double(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

const char *db__col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

double db__col_double(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* Runs a one-row integer query (pragmas, counts). */
static int query_int(db_store *s, const char *sql, int64_t *v, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, sql, e);
    if (!st)
        return e->code;
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int64(st, 0);
        rc = PT_OK;
    } else if (rc == SQLITE_DONE) {
        *v = 0;
        rc = PT_OK;
    } else
        rc = db__fail(s, rc, "reading", e);
    sqlite3_finalize(st);
    return rc;
}

int db_query_int(db_store *s, const char *sql, int64_t *v, pt_err *e)
{
    return query_int(s, sql, v, e);
}

/* ---- open ------------------------------------------------------------- */

const char *db_path(const db_store *s) { return s->path; }

bool db_io_failed(const db_store *s) { return s && s->io_failed; }

void db_close(db_store *s)
{
    if (!s)
        return;
    for (int i = 0; i < DB_NSTMT; i++)
        sqlite3_finalize(s->st[i]);
    if (s->h)
        sqlite3_close_v2(s->h);
    free(s->path);
    free(s);
}

int db_schema_version(db_store *s)
{
    int64_t v = 0;
    pt_err e = {0};
    query_int(s, "PRAGMA user_version", &v, &e);
    return (int)v;
}

/* Reads who owns the file without writing anything. */
static int check_owner(db_store *s, int64_t *version, bool *fresh, pt_err *e)
{
    /* one statement, so one read transaction: read separately, the three
     * could straddle another process's first migration */
    int64_t app = 0, nobj = 0;
    sqlite3_stmt *st = db__prepare(s,
                                   "SELECT (SELECT application_id FROM pragma_application_id()),"
                                   " (SELECT user_version FROM pragma_user_version()),"
                                   " (SELECT count(*) FROM sqlite_master)",
                                   e);
    if (!st)
        return e->code;
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW) {
        app = sqlite3_column_int64(st, 0);
        *version = sqlite3_column_int64(st, 1);
        nobj = sqlite3_column_int64(st, 2);
        rc = PT_OK;
    } else
        rc = db__fail(s, rc, "reading the file header", e);
    sqlite3_finalize(st);
    if (rc)
        return rc;
    *fresh = app == 0 && nobj == 0 && *version == 0;
    if (*fresh)
        return PT_OK;
    if ((uint32_t)app != (uint32_t)DB_APPLICATION_ID)
        return pt_errf(e, PT_EINVAL,
                       "%s: not a ptxtune database (an SQLite file with application_id 0x%08x and "
                       "%lld schema objects); left untouched",
                       s->path, (unsigned)app, (long long)nobj);
    if (*version > DB_SCHEMA_VERSION)
        return pt_errf(e, PT_EINVAL,
                       "%s: schema version %lld is newer than this ptxtune understands (%d); "
                       "upgrade ptxtune",
                       s->path, (long long)*version, DB_SCHEMA_VERSION);
    return PT_OK;
}

/* One statement with integer parameters ?1, ?2 (one-off SQL of the
 * migration and the rekey). */
static int exec_ids(db_store *s, const char *sql, int64_t a, int64_t b, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, sql, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, a);
    if (sqlite3_bind_parameter_count(st) >= 2)
        sqlite3_bind_int64(st, 2, b);
    int rc = db__step(s, st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? PT_OK : db__fail(s, rc, "migrating", e);
}

/* The id of the row of table whose column col is v; 0 when none. */
static int id_of(db_store *s, const char *sql, const char *v, int64_t *id, pt_err *e)
{
    *id = 0;
    sqlite3_stmt *st = db__prepare(s, sql, e);
    if (!st)
        return e->code;
    db__bind_text(st, 1, v);
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? PT_OK : db__fail(s, rc, "migrating", e);
}

/* Kernel `from` is kernel `into` (one body): its rows move over; a row
 * that would make the kernel twice in one (run, problem, rung) is what the
 * sweep calls a duplicate; its cubins go where into has none. */
static int merge_kernel(db_store *s, int64_t from, int64_t into, pt_err *e)
{
    static const char *const steps[] = {
        "UPDATE OR IGNORE measurements SET kernel_id = ?2 WHERE kernel_id = ?1",
        "UPDATE measurements SET kernel_id = ?2, status = 'duplicate' WHERE kernel_id = ?1",
        "UPDATE OR IGNORE cubins SET kernel_id = ?2 WHERE kernel_id = ?1",
        "DELETE FROM cubins WHERE kernel_id = ?1 AND ?2 = ?2",
        "DELETE FROM kernels WHERE id = ?1 AND ?2 = ?2",
    };
    int rc = PT_OK;
    for (size_t i = 0; !rc && i < sizeof steps / sizeof steps[0]; i++)
        rc = exec_ids(s, steps[i], from, into, e);
    return rc;
}

/* 2 -> 3 in C: every kernel's hash is db_kernel_hash of its PTX (the tool
 * version line and comments no longer count); kernels that now share a
 * hash are one kernel. Winners are recomputed (the SQL step dropped them). */
static int migrate_v3(db_store *s, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, "SELECT id, hash, ptx FROM kernels ORDER BY id", e);
    if (!st)
        return e->code;
    typedef struct kh {
        int64_t id;
        char hash[17];
    } kh;
    kh *v = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        char want[17];
        db_kernel_hash(db__col_text(st, 2), (size_t)sqlite3_column_bytes(st, 2), want);
        if (strcmp(want, db__col_text(st, 1)) == 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 256;
            kh *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                free(v);
                sqlite3_finalize(st);
                return pt_errf(e, PT_ENOMEM, "out of memory (migrating kernels)");
            }
            v = nv;
            cap = nc;
        }
        v[n].id = sqlite3_column_int64(st, 0);
        memcpy(v[n++].hash, want, sizeof want);
    }
    rc = rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "migrating kernels", e);
    sqlite3_finalize(st);
    for (size_t i = 0; !rc && i < n; i++) {
        int64_t other;
        rc = id_of(s, "SELECT id FROM kernels WHERE hash = ?1", v[i].hash, &other, e);
        if (rc)
            break;
        if (other)
            rc = merge_kernel(s, v[i].id, other, e);
        else {
            sqlite3_stmt *u = db__prepare(s, "UPDATE kernels SET hash = ?1 WHERE id = ?2", e);
            if (!u) {
                rc = e->code;
                break;
            }
            db__bind_text(u, 1, v[i].hash);
            sqlite3_bind_int64(u, 2, v[i].id);
            int src = db__step(s, u);
            sqlite3_finalize(u);
            rc = src == SQLITE_DONE ? PT_OK : db__fail(s, src, "migrating kernels", e);
        }
    }
    free(v);
    return rc ? rc : db__winners_recompute(s, e);
}

/* Problem `from` is problem `into` (one canonical key): its rows move
 * over; a row the same run stored under both spellings is kept once. */
static int merge_problem(db_store *s, int64_t from, int64_t into, pt_err *e)
{
    static const char *const steps[] = {
        "DELETE FROM winners WHERE problem_id IN (?1, ?2)",
        "UPDATE OR IGNORE measurements SET problem_id = ?2 WHERE problem_id = ?1",
        "DELETE FROM measurements WHERE problem_id = ?1 AND ?2 = ?2",
        "DELETE FROM problems WHERE id = ?1 AND ?2 = ?2",
    };
    int rc = PT_OK;
    for (size_t i = 0; !rc && i < sizeof steps / sizeof steps[0]; i++)
        rc = exec_ids(s, steps[i], from, into, e);
    return rc;
}

static int rekey_nolock(db_store *s, db_rekey_fn fn, void *ctx, int64_t *changed, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, "SELECT id, key FROM problems WHERE canon = 0 ORDER BY id", e);
    if (!st)
        return e->code;
    typedef struct pk {
        int64_t id;
        char *key;
    } pk;
    pk *v = NULL;
    size_t n = 0, cap = 0;
    int rc;
    bool oom = false;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            pk *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                oom = true;
                break;
            }
            v = nv;
            cap = nc;
        }
        char *key = strdup(db__col_text(st, 1));
        if (!key) {
            oom = true;
            break;
        }
        v[n].id = sqlite3_column_int64(st, 0);
        v[n++].key = key;
    }
    rc = oom ? pt_errf(e, PT_ENOMEM, "out of memory (rekeying problems)")
         : rc == SQLITE_DONE ? PT_OK
                             : db__fail(s, rc, "reading problems", e);
    sqlite3_finalize(st);
    bool merged = false;
    for (size_t i = 0; !rc && i < n; i++) {
        pt_buf k, c, d;
        pt_buf_init(&k);
        pt_buf_init(&c);
        pt_buf_init(&d);
        if (fn(ctx, v[i].key, &k, &c, &d) == PT_OK && k.s) {
            int64_t other = 0;
            if (strcmp(k.s, v[i].key) != 0)
                rc = id_of(s, "SELECT id FROM problems WHERE key = ?1", k.s, &other, e);
            if (!rc && other && other != v[i].id) {
                rc = merge_problem(s, v[i].id, other, e);
                merged = true;
            } else if (!rc) {
                sqlite3_stmt *u = db__prepare(
                    s, "UPDATE problems SET key = ?1, class = ?2, dims = ?3, canon = 1 WHERE id = ?4",
                    e);
                if (!u)
                    rc = e->code;
                else {
                    db__bind_text(u, 1, k.s);
                    db__bind_text(u, 2, c.s ? c.s : k.s);
                    db__bind_text(u, 3, d.s ? d.s : "");
                    sqlite3_bind_int64(u, 4, v[i].id);
                    int src = db__step(s, u);
                    sqlite3_finalize(u);
                    rc = src == SQLITE_DONE ? PT_OK : db__fail(s, src, "rekeying a problem", e);
                }
            }
            if (!rc && strcmp(k.s, v[i].key) != 0)
                ++*changed;
        }
        pt_buf_free(&k);
        pt_buf_free(&c);
        pt_buf_free(&d);
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].key);
    free(v);
    if (!rc && merged)
        rc = db__winners_recompute(s, e);
    return rc;
}

int db_rekey(db_store *s, db_rekey_fn fn, void *ctx, int64_t *changed, pt_err *e)
{
    int64_t dummy = 0;
    if (!changed)
        changed = &dummy;
    *changed = 0;
    if (!fn)
        return PT_OK;
    int64_t stale = 0; /* none of the old keys: no transaction, nothing written */
    int rc = query_int(s, "SELECT EXISTS(SELECT 1 FROM problems WHERE canon = 0)", &stale, e);
    if (rc || !stale)
        return rc;
    rc = db__begin(s, e);
    if (rc)
        return rc;
    rc = rekey_nolock(s, fn, ctx, changed, e);
    if (rc) {
        db__rollback(s);
        return rc;
    }
    return db__commit(s, e);
}

static int migrate(db_store *s, int target, pt_err *e)
{
    int rc = db__begin(s, e);
    if (rc)
        return rc;
    int64_t v = 0;
    bool fresh;
    rc = check_owner(s, &v, &fresh, e); /* again, inside the lock */
    for (int64_t i = v; !rc && i < target; i++) {
        rc = db__exec(s, migrations[i], e);
        if (!rc && i == 2)
            rc = migrate_v3(s, e);
        if (rc)
            break;
        char pragma[64];
        /* pragmas take no bound parameters; the value is our own integer */
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %lld", (long long)(i + 1));
        rc = db__exec(s, pragma, e);
    }
    if (!rc && v < target) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA application_id = %d", (int)DB_APPLICATION_ID);
        rc = db__exec(s, pragma, e);
    }
    if (rc) {
        db__rollback(s);
        return rc;
    }
    return db__commit(s, e);
}

int db__src_version(const char *path, int64_t *version, pt_err *e)
{
    db_store s = {.path = (char *)path, .busy_ms = 60000, .readonly = true};
    struct stat sb;
    if (stat(path, &sb) != 0)
        return pt_errf(e, PT_EINVAL, "%s: no such database file", path);
    int rc = sqlite3_open_v2(path, &s.h, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK)
        rc = db__fail(&s, rc, "opening", e);
    else {
        sqlite3_busy_timeout(s.h, s.busy_ms);
        bool fresh;
        rc = check_owner(&s, version, &fresh, e);
        if (!rc && fresh)
            rc = pt_errf(e, PT_EINVAL, "%s: empty file, not a ptxtune database", path);
    }
    sqlite3_close_v2(s.h);
    return rc;
}

int db_open(const char *path, const db_open_opts *o, db_store **out, pt_err *e)
{
    db_open_opts def = {0};
    if (!o)
        o = &def;
    *out = NULL;
    if (!path || !*path)
        return pt_errf(e, PT_EINVAL, "no database file given (--db FILE)");
    struct stat sb;
    bool exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        return pt_errf(e, PT_EINVAL, "%s: is a directory, not a database file", path);
    if (!exists && (o->readonly || o->must_exist))
        return pt_errf(e, PT_EINVAL, "%s: no such database file", path);
    db_store *s = calloc(1, sizeof *s);
    if (!s)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    s->path = strdup(path);
    if (!s->path) {
        free(s);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    s->busy_ms = o->busy_ms > 0 ? o->busy_ms : 60000;
    s->readonly = o->readonly;
    int flags = SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX |
                (o->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &s->h, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = db__fail(s, rc, "opening", e);
        db_close(s);
        return rc;
    }
    sqlite3_extended_result_codes(s->h, 1);
    sqlite3_busy_timeout(s->h, s->busy_ms); /* before anything takes a lock */
    int64_t version = 0;
    bool fresh = false;
    rc = check_owner(s, &version, &fresh, e);
    if (!rc && fresh && o->readonly)
        rc = pt_errf(e, PT_EINVAL, "%s: empty file, not a ptxtune database", path);
    /* a writer never adds to a damaged store: the full integrity_check (it
     * also compares every index with its table, which quick_check skips;
     * about 0.3 s for a 225 MB store), before the journal mode can touch the
     * file */
    if (!rc && !fresh && !o->readonly) {
        char msg[512];
        pt_err ie = {0};
        if (db_integrity(s, msg, sizeof msg, &ie))
            rc = pt_errf(e, ie.code, "%s%s", ie.msg,
                         strstr(ie.msg, "nothing was written") ? "" : "; nothing was written");
    }
    if (!rc && !o->readonly) {
        /* WAL: readers never block the writer; NORMAL sync keeps every
         * committed candidate across a process kill (not a power cut) */
        sqlite3_stmt *st = db__prepare(s, "PRAGMA journal_mode = WAL", e);
        if (!st)
            rc = e->code;
        else {
            int src = db__step(s, st);
            if (src != SQLITE_ROW)
                rc = db__fail(s, src, "setting WAL mode", e);
            else if (strcmp(db__col_text(st, 0), "wal") != 0)
                rc = pt_errf(e, PT_EIO, "%s: cannot use WAL mode (journal mode stays '%s')",
                             path, db__col_text(st, 0));
            sqlite3_finalize(st);
        }
        if (!rc)
            rc = db__exec(s, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", e);
        int target = o->max_version > 0 && o->max_version < DB_SCHEMA_VERSION ? o->max_version
                                                                                : DB_SCHEMA_VERSION;
        if (!rc && version < target)
            rc = migrate(s, target, e);
        if (!rc && o->rekey && target >= 3)
            rc = db_rekey(s, o->rekey, o->rekey_ctx, NULL, e);
    } else if (!rc && version < DB_SCHEMA_VERSION) {
        rc = pt_errf(e, PT_EINVAL,
                     "%s: schema version %lld is older than %d; open it once for writing to "
                     "migrate it",
                     path, (long long)version, DB_SCHEMA_VERSION);
    }
    if (rc) {
        db_close(s);
        return rc;
    }
    *out = s;
    return PT_OK;
}

int db_integrity(db_store *s, char *msg, size_t n, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, "PRAGMA integrity_check", e);
    if (!st)
        return e->code;
    int rc = db__step(s, st);
    if (rc != SQLITE_ROW) {
        rc = db__fail(s, rc, "checking integrity", e);
        snprintf(msg, n, "%s", e->msg);
    } else {
        snprintf(msg, n, "%s", db__col_text(st, 0));
        for (char *c = msg; *c; c++) /* one line */
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        rc = strcmp(msg, "ok") == 0
                 ? PT_OK
                 : pt_errf(e, PT_EINVAL, "%s: database is corrupt (integrity check: %s)",
                           s->path, msg);
    }
    sqlite3_finalize(st);
    return rc;
}

/* ---- records ---------------------------------------------------------- */

void db_fingerprint_key(const db_fingerprint *f, char key[17])
{
    pt_buf b;
    pt_buf_init(&b);
    /* length-prefixed so no two field lists serialise alike */
    const char *strs[] = {f->gpu, f->driver, f->compiler, f->generator, f->protocol};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        pt_buf_printf(&b, "%zu:%s;", strlen(strs[i] ? strs[i] : ""), strs[i] ? strs[i] : "");
    pt_buf_printf(&b, "%d;%d;%d", f->cc, f->sm_count, f->ptx_version);
    snprintf(key, 17, "%016llx", (unsigned long long)pt_hash64(b.s, b.len));
    pt_buf_free(&b);
}

/* FNV-1a 64 over the PTX without its comments (// to the end of a line,
 * block comments) and blank lines, every run of blanks one space, lines
 * trimmed: the tool's version line and the mock's directives are comments,
 * so one body is one kernel whatever build printed it. */
static uint64_t fnv_byte(uint64_t h, char c)
{
    return (h ^ (unsigned char)c) * 1099511628211ull;
}

void db_kernel_hash(const char *ptx, size_t n, char out[17])
{
    uint64_t h = 1469598103934665603ull;
    bool block = false, first = true;
    for (size_t i = 0; i < n;) {
        size_t eol = i;
        while (eol < n && ptx[eol] != '\n')
            eol++;
        bool any = false, blank = false;
        for (size_t j = i; j < eol; j++) {
            char c = ptx[j];
            if (block) {
                if (c == '*' && j + 1 < eol && ptx[j + 1] == '/') {
                    block = false;
                    j++;
                    blank = true;
                }
                continue;
            }
            if (c == '/' && j + 1 < eol && ptx[j + 1] == '/')
                break;
            if (c == '/' && j + 1 < eol && ptx[j + 1] == '*') {
                block = true;
                j++;
                continue;
            }
            if (c == ' ' || c == '\t' || c == '\r') {
                blank = true;
                continue;
            }
            if (!any) {
                if (!first)
                    h = fnv_byte(h, '\n');
                any = true;
                first = false;
            } else if (blank)
                h = fnv_byte(h, ' ');
            blank = false;
            h = fnv_byte(h, c);
        }
        i = eol + 1;
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* INSERT OR IGNORE then SELECT id by key: one round trip each. */
static int put_then_id(db_store *s, sqlite3_stmt *ins, db_stmt_id idq, const char *key,
                       int64_t *id, const char *what, pt_err *e)
{
    int rc = db__step(s, ins);
    if (rc != SQLITE_DONE)
        return db__fail(s, rc, what, e);
    sqlite3_stmt *q = db__stmt(s, idq, e);
    if (!q)
        return e->code;
    db__bind_text(q, 1, key);
    rc = db__step(s, q);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? pt_errf(e, PT_EINTERNAL, "%s: %s vanished", s->path, what)
                                 : db__fail(s, rc, what, e);
    *id = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    return PT_OK;
}

int db__fp_put(db_store *s, const db_fingerprint *f, int64_t *id, pt_err *e)
{
    char key[17];
    db_fingerprint_key(f, key);
    sqlite3_stmt *st = db__stmt(s, DB_ST_FP_INSERT, e);
    if (!st)
        return e->code;
    db__bind_text(st, 1, key);
    db__bind_text(st, 2, f->gpu ? f->gpu : "");
    sqlite3_bind_int(st, 3, f->cc);
    sqlite3_bind_int(st, 4, f->sm_count);
    db__bind_text(st, 5, f->driver ? f->driver : "");
    db__bind_text(st, 6, f->compiler ? f->compiler : "");
    sqlite3_bind_int(st, 7, f->ptx_version);
    db__bind_text(st, 8, f->generator ? f->generator : "");
    db__bind_text(st, 9, f->protocol ? f->protocol : "");
    return put_then_id(s, st, DB_ST_FP_ID, key, id, "storing a fingerprint", e);
}

/* Wraps one write in BEGIN IMMEDIATE .. COMMIT. */
#define DB_TXN(s, e, body)                 \
    do {                                   \
        int txrc_ = db__begin((s), (e));   \
        if (txrc_)                         \
            return txrc_;                  \
        txrc_ = (body);                    \
        if (txrc_) {                       \
            db__rollback(s);               \
            return txrc_;                  \
        }                                  \
        return db__commit((s), (e));       \
    } while (0)

int db_fingerprint_put(db_store *s, const db_fingerprint *f, int64_t *id, pt_err *e)
{
    DB_TXN(s, e, db__fp_put(s, f, id, e));
}

int db__problem_put(db_store *s, const db_problem *p, int64_t *id, pt_err *e)
{
    sqlite3_stmt *st = db__stmt(s, DB_ST_PROB_INSERT, e);
    if (!st)
        return e->code;
    db__bind_text(st, 1, p->key);
    db__bind_text(st, 2, p->op);
    db__bind_text(st, 3, p->klass ? p->klass : p->key);
    db__bind_text(st, 4, p->dims ? p->dims : "");
    db__bind_text(st, 5, p->name ? p->name : "");
    db__bind_double(st, 6, p->flops);
    db__bind_double(st, 7, p->bytes);
    sqlite3_bind_int(st, 8, p->canonical);
    return put_then_id(s, st, DB_ST_PROB_ID, p->key, id, "storing a problem", e);
}

int db_problem_put(db_store *s, const db_problem *p, int64_t *id, pt_err *e)
{
    if (!p->key || !p->op)
        return pt_errf(e, PT_EINVAL, "problem without key or op");
    DB_TXN(s, e, db__problem_put(s, p, id, e));
}

static int update_winner(db_store *s, int64_t run, int64_t problem, pt_err *e)
{
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUN_FP, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    int rc = db__step(s, st);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? pt_errf(e, PT_EINVAL, "%s: no run %lld", s->path, (long long)run)
                                 : db__fail(s, rc, "reading a run", e);
    int64_t fp = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    st = db__stmt(s, DB_ST_WINNER_UPDATE, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, fp);
    sqlite3_bind_int64(st, 2, problem);
    rc = db__step(s, st);
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "updating a winner", e);
}

int db__record(db_store *s, const db_kernel *k, const db_cubin *c,
                         const db_measurement *m, bool *inserted, pt_err *e)
{
    int64_t kid = 0;
    int rc;
    if (k) {
        sqlite3_stmt *st = db__stmt(s, DB_ST_KERNEL_INSERT, e);
        if (!st)
            return e->code;
        db__bind_text(st, 1, k->hash);
        db__bind_text(st, 2, k->op);
        db__bind_text(st, 3, k->config ? k->config : "");
        db__bind_text(st, 4, k->entry ? k->entry : "");
        db__bind_text(st, 5, k->ptx ? k->ptx : "");
        if ((rc = put_then_id(s, st, DB_ST_KERNEL_ID, k->hash, &kid, "storing a kernel", e)))
            return rc;
        if (c) {
            st = db__stmt(s, DB_ST_CUBIN_INSERT, e);
            if (!st)
                return e->code;
            sqlite3_bind_int64(st, 1, kid);
            db__bind_text(st, 2, c->arch);
            db__bind_text(st, 3, c->compiler ? c->compiler : "");
            if (c->data && c->size)
                sqlite3_bind_blob64(st, 4, c->data, c->size, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(st, 4);
            db__bind_text(st, 5, c->resources);
            rc = db__step(s, st);
            if (rc != SQLITE_DONE)
                return db__fail(s, rc, "storing a cubin", e);
        }
    }
    sqlite3_stmt *st = db__stmt(s, DB_ST_MEAS_INSERT, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, m->run_id);
    sqlite3_bind_int64(st, 2, m->problem_id);
    if (kid)
        sqlite3_bind_int64(st, 3, kid);
    else
        sqlite3_bind_null(st, 3);
    db__bind_text(st, 4, m->config);
    sqlite3_bind_int(st, 5, m->rung);
    sqlite3_bind_int(st, 6, m->final);
    db__bind_text(st, 7, m->status);
    db__bind_text(st, 8, m->error ? m->error : "");
    db__bind_text(st, 9, m->source);
    sqlite3_bind_int(st, 10, m->verified);
    db__bind_double(st, 11, m->t_min);
    db__bind_double(st, 12, m->t_median);
    db__bind_double(st, 13, m->t_max);
    db__bind_double(st, 14, m->spread);
    sqlite3_bind_int(st, 15, m->reps);
    db__bind_double(st, 16, m->tflops);
    db__bind_double(st, 17, m->gbps);
    db__bind_text(st, 18, m->launch);
    sqlite3_bind_double(st, 19, m->created > 0 ? m->created : db__now());
    db__bind_text(st, 20, m->sample);
    rc = db__step(s, st);
    if (rc != SQLITE_DONE)
        return db__fail(s, rc, "storing a measurement", e);
    *inserted = sqlite3_changes(s->h) > 0;
    if (*inserted && strcmp(m->status, "ok") == 0 && m->final)
        return update_winner(s, m->run_id, m->problem_id, e);
    return PT_OK;
}

static const char *const class_names[] = {
#define X(n) #n,
    DB_CLASS_MAP(X)
#undef X
};
_Static_assert(sizeof class_names / sizeof class_names[0] == DB_NCLASSES, "DB_CLASS_MAP");

const char *db_class_name(db_class c)
{
    return (unsigned)c < DB_NCLASSES ? class_names[c] : NULL;
}

static bool known_class(const char *c)
{
    for (size_t i = 0; c && i < sizeof class_names / sizeof class_names[0]; i++)
        if (strcmp(c, class_names[i]) == 0)
            return true;
    return false;
}

int db_record(db_store *s, const db_kernel *k, const db_cubin *c, const db_measurement *m,
              bool *inserted, pt_err *e)
{
    bool dummy;
    if (!inserted)
        inserted = &dummy;
    *inserted = false;
    if (!known_class(m->status))
        return pt_errf(e, PT_EINVAL, "unknown candidate class '%s'", m->status ? m->status : "");
    if (!m->source ||
        (strcmp(m->source, "measured") && strcmp(m->source, "model") && strcmp(m->source, "mock")))
        return pt_errf(e, PT_EINVAL, "source must be 'measured', 'model' or 'mock'");
    if (strcmp(m->status, "ok") == 0 && !isfinite(m->t_median))
        return pt_errf(e, PT_EINVAL, "an ok candidate needs a finite time");
    if (k && (!k->hash || !k->op))
        return pt_errf(e, PT_EINVAL, "kernel without hash or op");
    DB_TXN(s, e, db__record(s, k, c, m, inserted, e));
}

/* ---- runs ------------------------------------------------------------- */

static bool known_run_status(const char *st)
{
#define X(n) if (st && strcmp(st, #n) == 0) return true;
    DB_RUN_STATUS(X)
#undef X
    return false;
}

int db_run_begin(db_store *s, const db_run *r, int64_t *id, pt_err *e)
{
    char uuid[33];
    if (!r->uuid)
        db__uuid(uuid);
    const char *status = r->status ? r->status : "running";
    if (!known_run_status(status))
        return pt_errf(e, PT_EINVAL, "unknown run status '%s'", status);
    int rc = db__begin(s, e);
    if (rc)
        return rc;
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUN_INSERT, e);
    if (!st) {
        db__rollback(s);
        return e->code;
    }
    db__bind_text(st, 1, r->uuid ? r->uuid : uuid);
    sqlite3_bind_int64(st, 2, r->fingerprint_id);
    db__bind_text(st, 3, r->tool_version ? r->tool_version : "");
    db__bind_text(st, 4, r->git_rev ? r->git_rev : "");
    db__bind_text(st, 5, r->strategy ? r->strategy : "");
    db__bind_text(st, 6, r->budget ? r->budget : "");
    sqlite3_bind_int64(st, 7, (int64_t)r->seed);
    db__bind_text(st, 8, r->backend ? r->backend : "");
    db__bind_text(st, 9, r->arch ? r->arch : "");
    db__bind_text(st, 10, r->args_key ? r->args_key : "");
    db__bind_text(st, 11, r->host ? r->host : "");
    sqlite3_bind_int64(st, 12, r->pid);
    sqlite3_bind_double(st, 13, r->started > 0 ? r->started : db__now());
    if (r->ended > 0)
        sqlite3_bind_double(st, 14, r->ended);
    else
        sqlite3_bind_null(st, 14);
    db__bind_text(st, 15, status);
    rc = db__step(s, st);
    if (rc != SQLITE_DONE) {
        rc = db__fail(s, rc, "starting a run", e);
        db__rollback(s);
        return rc;
    }
    *id = sqlite3_last_insert_rowid(s->h);
    return db__commit(s, e);
}

/* A zombie (killed, not yet reaped by its parent) counts as gone. */
static bool pid_alive(int64_t pid)
{
    if (pid <= 0 || pid > INT32_MAX)
        return false;
    if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
        return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')'); /* the command name may hold anything */
    return !(close && close[1] == ' ' && close[2] == 'Z');
}

static int claim_nolock(db_store *s, const char *args_key, int64_t fp, const char *host,
                        bool any, int64_t pid, int64_t *id, pt_err *e)
{
    *id = 0;
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUN_CANDIDATES, e);
    if (!st)
        return e->code;
    db__bind_text(st, 1, args_key);
    sqlite3_bind_int64(st, 2, fp);
    int rc;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        const char *rhost = db__col_text(st, 1);
        int64_t rpid = sqlite3_column_int64(st, 2);
        bool interrupted = strcmp(db__col_text(st, 3), "interrupted") == 0;
        /* any: the store is the caller's own copy, nobody else runs it */
        if (interrupted || any || (strcmp(rhost, host) == 0 && !pid_alive(rpid))) {
            *id = sqlite3_column_int64(st, 0);
            break;
        }
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db__fail(s, rc, "looking for a run to resume", e);
    sqlite3_reset(st);
    if (!*id)
        return PT_OK;
    st = db__stmt(s, DB_ST_RUN_TAKE, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, *id);
    db__bind_text(st, 2, host);
    sqlite3_bind_int64(st, 3, pid);
    rc = db__step(s, st);
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "taking over a run", e);
}

int db_run_claim(db_store *s, const char *args_key, int64_t fingerprint_id, const char *host,
                 int64_t pid, int64_t *id, pt_err *e)
{
    DB_TXN(s, e, claim_nolock(s, args_key, fingerprint_id, host, false, pid, id, e));
}

int db_run_claim_any(db_store *s, const char *args_key, int64_t fingerprint_id, const char *host,
                     int64_t pid, int64_t *id, pt_err *e)
{
    DB_TXN(s, e, claim_nolock(s, args_key, fingerprint_id, host, true, pid, id, e));
}

static int run_end_nolock(db_store *s, int64_t run, const char *status, pt_err *e)
{
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUN_END, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    db__bind_text(st, 2, status);
    sqlite3_bind_double(st, 3, db__now());
    int rc = db__step(s, st);
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "ending a run", e);
}

int db_run_end(db_store *s, int64_t run, const char *status, pt_err *e)
{
    if (!known_run_status(status))
        return pt_errf(e, PT_EINVAL, "unknown run status '%s'", status ? status : "");
    DB_TXN(s, e, run_end_nolock(s, run, status, e));
}

int db_run_uuid(db_store *s, int64_t run, char uuid[33], pt_err *e)
{
    uuid[0] = '\0';
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUN_UUID, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW)
        snprintf(uuid, 33, "%s", db__col_text(st, 0));
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return pt_errf(e, PT_EINVAL, "%s: no run %lld", s->path, (long long)run);
    return rc == SQLITE_ROW ? PT_OK : db__fail(s, rc, "reading a run", e);
}

int db_run_resolve(db_store *s, const char *name, int64_t *id, pt_err *e)
{
    *id = 0;
    if (!name || !*name)
        return pt_errf(e, PT_EINVAL, "empty run name");
    char *end;
    long long n = strtoll(name, &end, 10);
    sqlite3_stmt *st;
    int rc;
    if (!*end && n > 0) {
        st = db__stmt(s, DB_ST_RUN_BY_ID, e);
        if (!st)
            return e->code;
        sqlite3_bind_int64(st, 1, n);
        rc = db__step(s, st);
        if (rc == SQLITE_ROW)
            *id = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return db__fail(s, rc, "finding a run", e);
        if (*id)
            return PT_OK;
    }
    /* a uuid prefix needs 6 hex digits: "99" is a run id, never the start
     * of some random uuid */
    if (strlen(name) < 6)
        return pt_errf(e, PT_EINVAL, "%s: no run '%s' (a run id, or 6+ digits of its uuid; see "
                       "'ptxtune db runs')", s->path, name);
    st = db__stmt(s, DB_ST_RUN_BY_UUID, e);
    if (!st)
        return e->code;
    db__bind_text(st, 1, name);
    int found = 0;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        found++;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return db__fail(s, rc, "finding a run", e);
    if (found == 0)
        return pt_errf(e, PT_EINVAL, "%s: no run '%s' (see 'ptxtune db runs')", s->path, name);
    if (found > 1)
        return pt_errf(e, PT_EINVAL, "%s: run prefix '%s' is ambiguous", s->path, name);
    return PT_OK;
}

int db_reuse_find(db_store *s, int64_t fingerprint_id, int64_t problem_id, const char *kernel_hash,
                  int rung, int64_t exclude_run, db_reuse *out, bool *found, pt_err *e)
{
    memset(out, 0, sizeof *out);
    *found = false;
    sqlite3_stmt *st = db__stmt(s, DB_ST_REUSE, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, problem_id);
    db__bind_text(st, 2, kernel_hash);
    sqlite3_bind_int(st, 3, rung);
    sqlite3_bind_int64(st, 4, fingerprint_id);
    sqlite3_bind_int64(st, 5, exclude_run);
    int rc = db__step(s, st);
    if (rc == SQLITE_ROW) {
        *found = true;
        snprintf(out->status, sizeof out->status, "%s", db__col_text(st, 0));
        snprintf(out->source, sizeof out->source, "%s", db__col_text(st, 1));
        snprintf(out->error, sizeof out->error, "%s", db__col_text(st, 2));
        out->verified = sqlite3_column_int(st, 3);
        out->reps = sqlite3_column_int(st, 4);
        out->t_min = db__col_double(st, 5);
        out->t_median = db__col_double(st, 6);
        out->t_max = db__col_double(st, 7);
        out->spread = db__col_double(st, 8);
        snprintf(out->sample, sizeof out->sample, "%s", db__col_text(st, 9));
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? PT_OK
                                                 : db__fail(s, rc, "looking for a stored candidate", e);
}

int db_run_results(db_store *s, int64_t run, int64_t problem, db_result_fn fn, void *ctx,
                   pt_err *e)
{
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUN_RESULTS, e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, problem);
    int rc, urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        const char *status = db__col_text(st, 2);
        double score = strcmp(status, "ok") == 0 ? sqlite3_column_double(st, 3) : INFINITY;
        const char *hash = sqlite3_column_type(st, 4) == SQLITE_NULL ? NULL : db__col_text(st, 4);
        urc = fn(ctx, db__col_text(st, 0), sqlite3_column_int(st, 1), status, score, hash);
        if (urc)
            break;
    }
    sqlite3_reset(st);
    if (urc)
        return urc;
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "reading a run's results", e);
}

int db_runs(db_store *s, db_run_fn fn, void *ctx, pt_err *e)
{
    sqlite3_stmt *st = db__stmt(s, DB_ST_RUNS_LIST, e);
    if (!st)
        return e->code;
    int rc, urc = PT_OK;
    while ((rc = db__step(s, st)) == SQLITE_ROW) {
        db_run_info r = {
            .id = sqlite3_column_int64(st, 0),
            .uuid = db__col_text(st, 1),
            .fingerprint = db__col_text(st, 2),
            .gpu = db__col_text(st, 3),
            .strategy = db__col_text(st, 4),
            .budget = db__col_text(st, 5),
            .backend = db__col_text(st, 6),
            .status = db__col_text(st, 7),
            .git_rev = db__col_text(st, 8),
            .seed = (uint64_t)sqlite3_column_int64(st, 9),
            .started = db__col_double(st, 10),
            .ended = db__col_double(st, 11),
            .measured = sqlite3_column_int64(st, 12),
            .failed = sqlite3_column_int64(st, 13),
        };
        if ((urc = fn(ctx, &r)))
            break;
    }
    sqlite3_reset(st);
    if (urc)
        return urc;
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "listing runs", e);
}

int db_count(db_store *s, db_counts *c, pt_err *e)
{
    static const char *const q[] = {
        "SELECT count(*) FROM fingerprints", "SELECT count(*) FROM problems",
        "SELECT count(*) FROM kernels",      "SELECT count(*) FROM cubins",
        "SELECT count(*) FROM runs",         "SELECT count(*) FROM measurements",
        "SELECT count(*) FROM winners",
    };
    int64_t *f[] = {&c->fingerprints, &c->problems, &c->kernels, &c->cubins,
                    &c->runs,         &c->measurements, &c->winners};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        int rc = query_int(s, q[i], f[i], e);
        if (rc)
            return rc;
    }
    return PT_OK;
}

/* ---- the launch contract (issue 14) ---------------------------------------- */

int db_winner_launch(db_store *s, int64_t fingerprint_id, int64_t problem_id, int64_t *mid,
                     pt_buf *config, pt_buf *launch, bool *found, pt_err *e)
{
    *found = false;
    *mid = 0;
    sqlite3_stmt *st = db__prepare(
        s,
        "SELECT m.id, m.config, m.launch FROM winners w JOIN measurements m"
        " ON m.id = w.measurement_id WHERE w.fingerprint_id = ?1 AND w.problem_id = ?2",
        e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, fingerprint_id);
    sqlite3_bind_int64(st, 2, problem_id);
    int rc = db__step(s, st), urc = PT_OK;
    if (rc == SQLITE_ROW) {
        *found = true;
        *mid = sqlite3_column_int64(st, 0);
        pt_buf_puts(config, db__col_text(st, 1));
        pt_buf_puts(launch, db__col_text(st, 2));
    } else if (rc != SQLITE_DONE)
        urc = db__fail(s, rc, "reading a winner", e);
    sqlite3_finalize(st);
    return urc;
}

static int launch_put_nolock(db_store *s, int64_t mid, const char *launch, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, "UPDATE measurements SET launch = ?2 WHERE id = ?1", e);
    if (!st)
        return e->code;
    sqlite3_bind_int64(st, 1, mid);
    db__bind_text(st, 2, launch);
    int rc = db__step(s, st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? PT_OK : db__fail(s, rc, "storing a launch contract", e);
}

int db_launch_put(db_store *s, int64_t measurement_id, const char *launch, pt_err *e)
{
    if (s->readonly)
        return pt_errf(e, PT_EINVAL, "%s: opened read-only", s->path);
    DB_TXN(s, e, launch_put_nolock(s, measurement_id, launch, e));
}
