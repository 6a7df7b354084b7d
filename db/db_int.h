/* Private to db/: the store's context, the statement table, and helpers the
 * db/ files share (db__ names). */
#ifndef PT_DB_INT_H
#define PT_DB_INT_H

#include <sqlite3.h>

#include "db/db.h"

/* The winner rule, the one home of its SQL (db_record's update, the full
 * rebuild after an import or merge): among the final ok rows of one
 * (fingerprint, problem), measured before model, then the lowest median,
 * then the smaller config string, the kernel hash, the older row. Over
 * measurements m LEFT JOIN kernels k. */
#define DB_WINNER_ORDER                                                                \
    "(m.source = 'measured') DESC, m.t_median ASC, m.config ASC, k.hash ASC, m.id ASC"

/* Every statement the store runs after opening, prepared once on first use
 * and kept: (id, SQL). Values are always bound, never formatted in. */
#define DB_STMT_MAP(X)                                                                       \
    X(FP_INSERT, "INSERT OR IGNORE INTO fingerprints(key, gpu, cc, sm_count, driver, compiler," \
                 " ptx_version, generator, protocol) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)")       \
    X(FP_ID, "SELECT id FROM fingerprints WHERE key = ?1")                                     \
    X(PROB_INSERT, "INSERT OR IGNORE INTO problems(key, op, class, dims, name, flops, bytes,"  \
                   " canon) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)")                                 \
    X(PROB_ID, "SELECT id FROM problems WHERE key = ?1")                                       \
    X(KERNEL_INSERT, "INSERT OR IGNORE INTO kernels(hash, op, config, entry, ptx)"             \
                     " VALUES(?1,?2,?3,?4,?5)")                                               \
    X(KERNEL_ID, "SELECT id FROM kernels WHERE hash = ?1")                                     \
    X(CUBIN_INSERT, "INSERT OR IGNORE INTO cubins(kernel_id, arch, compiler, cubin, resources)" \
                    " VALUES(?1,?2,?3,?4,?5)")                                                \
    X(MEAS_INSERT,                                                                             \
      "INSERT INTO measurements(run_id, problem_id, kernel_id, config, rung, final,"          \
      " status, error, source, verified, t_min, t_median, t_max, spread, reps, tflops, gbps,"  \
      " launch, created, sample) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,"  \
      "?16,?17,?18,?19,?20) ON CONFLICT DO NOTHING")                                         \
    X(RUN_FP, "SELECT fingerprint_id FROM runs WHERE id = ?1")                                 \
    X(REUSE,                                                                                   \
      "SELECT m.status, m.source, m.error, m.verified, m.reps, m.t_min, m.t_median, m.t_max,"  \
      " m.spread, coalesce(m.sample, r.uuid) FROM measurements m"                              \
      " JOIN runs r ON r.id = m.run_id JOIN kernels k ON k.id = m.kernel_id"                   \
      " WHERE m.problem_id = ?1 AND k.hash = ?2 AND m.rung = ?3 AND r.fingerprint_id = ?4"     \
      " AND r.status = 'done' AND r.id <> ?5 AND m.status <> 'duplicate'"                      \
      " ORDER BY m.id DESC LIMIT 1")                                                           \
    X(WINNER_UPDATE,                                                                           \
      "INSERT OR REPLACE INTO winners(fingerprint_id, problem_id, measurement_id)"             \
      " SELECT r.fingerprint_id, m.problem_id, m.id FROM measurements m"                      \
      " JOIN runs r ON r.id = m.run_id LEFT JOIN kernels k ON k.id = m.kernel_id"            \
      " WHERE r.fingerprint_id = ?1 AND m.problem_id = ?2 AND m.status = 'ok' AND m.final = 1" \
      " ORDER BY " DB_WINNER_ORDER " LIMIT 1")                                                \
    X(RUN_INSERT,                                                                              \
      "INSERT INTO runs(uuid, fingerprint_id, tool_version, git_rev, strategy, budget, seed,"  \
      " backend, arch, args_key, host, pid, started, ended, status)"                           \
      " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)")                           \
    X(RUN_CANDIDATES, "SELECT id, host, pid, status FROM runs WHERE args_key = ?1"             \
                      " AND fingerprint_id = ?2 AND status IN ('running','interrupted')"      \
                      " ORDER BY id")                                                         \
    X(RUN_TAKE, "UPDATE runs SET host = ?2, pid = ?3, status = 'running', ended = NULL"        \
                " WHERE id = ?1")                                                             \
    X(RUN_END, "UPDATE runs SET status = ?2, ended = ?3 WHERE id = ?1")                        \
    X(RUN_BY_ID, "SELECT id FROM runs WHERE id = ?1")                                          \
    X(RUN_UUID, "SELECT uuid FROM runs WHERE id = ?1")                                         \
    X(RUN_BY_UUID, "SELECT id FROM runs WHERE substr(uuid, 1, length(?1)) = ?1"              \
                   " ORDER BY id LIMIT 2")                                                    \
    X(RUN_RESULTS,                                                                             \
      "SELECT m.config, m.rung, m.status, m.t_median, k.hash FROM measurements m"              \
      " LEFT JOIN kernels k ON k.id = m.kernel_id WHERE m.run_id = ?1 AND m.problem_id = ?2"  \
      " ORDER BY m.id")                                                                       \
    X(RUNS_LIST,                                                                               \
      "SELECT r.id, r.uuid, f.key, f.gpu, r.strategy, r.budget, r.backend, r.status,"          \
      " r.git_rev, r.seed, r.started, r.ended,"                                                \
      " (SELECT count(*) FROM measurements m WHERE m.run_id = r.id AND m.status = 'ok'),"      \
      " (SELECT count(*) FROM measurements m WHERE m.run_id = r.id"                            \
      "   AND m.status NOT IN ('ok','duplicate'))"                                             \
      " FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id ORDER BY r.id")

typedef enum db_stmt_id {
#define X(id, sql) DB_ST_##id,
    DB_STMT_MAP(X)
#undef X
    DB_NSTMT
} db_stmt_id;

struct db_store {
    sqlite3 *h;
    char *path;
    int busy_ms;
    bool readonly;
    bool io_failed; /* the last failure was SQLITE_FULL or SQLITE_IOERR */
    sqlite3_stmt *st[DB_NSTMT];
};

/* The statement, reset and unbound; NULL with e set on a prepare error. */
sqlite3_stmt *db__stmt(db_store *s, db_stmt_id id, pt_err *e);
/* sqlite3_step with busy retries up to the store's deadline: SQLITE_ROW or
 * SQLITE_DONE, else an error recorded in e (and returned as a PT_ code via
 * db__fail). */
int db__step(db_store *s, sqlite3_stmt *st);
/* Records "path: what: sqlite message" (corrupt / not-a-database worded
 * plainly) and returns the PT_ code. */
int db__fail(db_store *s, int src, const char *what, pt_err *e);
/* Static SQL (schema, pragmas), with busy retries. */
int db__exec(db_store *s, const char *sql, pt_err *e);
int db__begin(db_store *s, pt_err *e); /* BEGIN IMMEDIATE */
int db__commit(db_store *s, pt_err *e);
void db__rollback(db_store *s);
/* A one-off prepared statement (not cached); finalize it after use. */
sqlite3_stmt *db__prepare(db_store *s, const char *sql, pt_err *e);

void db__bind_text(sqlite3_stmt *st, int i, const char *v);
void db__bind_double(sqlite3_stmt *st, int i, double v); /* NAN: NULL */
const char *db__col_text(sqlite3_stmt *st, int i);        /* never NULL */
double db__col_double(sqlite3_stmt *st, int i);           /* NULL: NAN */

double db__now(void);
/* 32 hex digits from /dev/urandom (time and pid when it is missing). */
void db__uuid(char out[33]);

/* The SELECT list and joins shared by winner queries (db_winner_get,
 * db_lookup, db_winners, the exports); fills w from a row of it. */
extern const char db__winner_select[];
void db__winner_row(sqlite3_stmt *st, db_winner *w);

/* Every winner recomputed from the measurements by DB_WINNER_ORDER, inside
 * the caller's transaction (db_winners_rebuild, merge). */
int db__winners_recompute(db_store *s, pt_err *e);

/* Unlocked writers for callers that hold a transaction (import). */
int db__fp_put(db_store *s, const db_fingerprint *f, int64_t *id, pt_err *e);
int db__problem_put(db_store *s, const db_problem *p, int64_t *id, pt_err *e);
int db__record(db_store *s, const db_kernel *k, const db_cubin *c, const db_measurement *m,
               bool *inserted, pt_err *e);
/* Ownership and schema version of a file, read-only (merge sources). */
int db__src_version(const char *path, int64_t *version, pt_err *e);
/* Filtered winners with the raw row (all DB_WCOLS columns). */
int db__winners_raw(db_store *s, const char *gpu, const char *match,
                    int (*fn)(void *ctx, sqlite3_stmt *st, const db_winner *w), void *ctx,
                    pt_err *e);

/* True when path is the store's file or one of its sidecars (an output that
 * is an input). */
bool db__is_store_file(db_store *s, const char *path);

/* Copies src (attached as "src") into main. With filtered, only the
 * measurements listed in temp.sel (src ids) and what they reference. The
 * source passes db__merge_verify first; src_name is for messages. */
int db__merge_attached(db_store *s, bool filtered, const char *src_name, db_merge_stats *st,
                       pt_err *e);
/* Refuses (PT_EINVAL, naming the first bad row and counting them) a source
 * whose fingerprint keys do not match their fields, whose kernel hashes do
 * not match their PTX, whose runs are in main under another fingerprint, or
 * whose measurements break the rules (status, source, a winner's time,
 * dangling references). Reads the rows the merge would read. */
int db__merge_verify(db_store *s, bool filtered, const char *src_name, pt_err *e);
/* ATTACH path read-only as schema "src" (URI-encoded). */
int db__attach_ro(db_store *s, const char *path, pt_err *e);
void db__detach(db_store *s);

#endif
