/* The tuning store: one SQLite file holding every measurement, the kernels
 * that were measured, the runs that made them and the winners per GPU
 * fingerprint and problem (docs/db.md has the schema and the rules).
 *
 * Records are plain: the store knows nothing of ops, PTX or devices. Every
 * write is one BEGIN IMMEDIATE transaction through prepared statements, so a
 * process killed at any moment leaves either the whole candidate or nothing;
 * busy waits (other processes writing) are absorbed here and never reach the
 * caller. A file that is not ours, is newer than us or is corrupt gives a
 * one-line error and is never modified. */
#ifndef PT_DB_H
#define PT_DB_H

#include "ptx/base.h"

/* 'PTXT': PRAGMA application_id of every ptxtune store and bundle. */
#define DB_APPLICATION_ID 0x50545854
/* PRAGMA user_version this build writes; older files are migrated. */
enum { DB_SCHEMA_VERSION = 3 };

typedef struct db_store db_store;

/* A stored problem key made canonical (search_problem_rekey has this
 * signature): the key, class and dims appended to the buffers; non-zero
 * leaves the problem as it is (an op this build does not know). */
typedef int (*db_rekey_fn)(void *ctx, const char *key, pt_buf *nkey, pt_buf *klass,
                           pt_buf *dims);

typedef struct db_open_opts {
    bool readonly;   /* never writes; a missing or empty file is an error */
    bool must_exist; /* a missing file is an error instead of a new store */
    int busy_ms;     /* how long to wait for other writers; 0: 60 s */
    int max_version; /* tests: migrate only up to this version; 0: all */
    db_rekey_fn rekey; /* writers: problems of older builds' keys rekeyed (db_rekey) */
    void *rekey_ctx;
} db_open_opts;

/* Opens (creating or migrating when allowed) the store at path. */
int db_open(const char *path, const db_open_opts *o, db_store **out, pt_err *e);
void db_close(db_store *s);
const char *db_path(const db_store *s);
int db_schema_version(db_store *s);
/* PRAGMA integrity_check: PT_OK with "ok" in msg, or PT_EINVAL ("database
 * is corrupt", like a damaged page found at open) with the first problem in
 * msg and e. Every open for writing runs it first and refuses a damaged
 * store. */
int db_integrity(db_store *s, char *msg, size_t n, pt_err *e);
/* Every fingerprint key is the hash of its fields and every kernel hash that
 * of its PTX (a store edited by hand); PT_EINVAL names the first bad row. */
int db_verify(db_store *s, pt_err *e);
/* True when the store's last failure was a full disk or an I/O error (the
 * write may succeed once the cause is gone): a sweep then keeps its run
 * resumable instead of failing it. */
bool db_io_failed(const db_store *s);

/* Problems whose key an older build wrote (or a merge brought in) get
 * their canonical key from fn; two that turn out to be one problem become
 * one (their rows together; a row one run stored under both keys kept
 * once), and the winners are recomputed. *changed counts the keys that
 * changed. One transaction. */
int db_rekey(db_store *s, db_rekey_fn fn, void *ctx, int64_t *changed, pt_err *e);

/* ---- records -------------------------------------------------------- */

/* A kernel's identity: 16 hex digits of FNV-1a 64 over its PTX without
 * comments (the tool version line, mock directives), blank lines and
 * repeated blanks. Every writer and every check (db_verify, import, export)
 * uses it. */
void db_kernel_hash(const char *ptx, size_t n, char out[17]);

/* Everything a timing depends on besides the kernel and the problem. A
 * winner is served only when all eight fields match. */
typedef struct db_fingerprint {
    const char *gpu;       /* "NVIDIA H200", "emulator" */
    int cc;                /* compute capability as sm number: 90 */
    int sm_count;
    const char *driver;    /* "13000", "none" */
    const char *compiler;  /* "nvJitLink 13.0" */
    int ptx_version;       /* 90 = PTX ISA 9.0 */
    const char *generator; /* "ptxtune 0.1.0" */
    const char *protocol;  /* benchmark protocol name and version */
} db_fingerprint;

/* 16 hex digits naming the fingerprint (a hash of its fields). */
void db_fingerprint_key(const db_fingerprint *f, char key[17]);
int db_fingerprint_put(db_store *s, const db_fingerprint *f, int64_t *id, pt_err *e);

/* A problem: key identifies it (op + every field, canonical); class is the
 * key without the shape dimensions and dims the dimensions ("4096,4096,14336"):
 * the nearest-bucket lookup compares dims within one class. */
typedef struct db_problem {
    const char *op, *key, *klass, *dims;
    const char *name; /* a label; the first one stored is kept */
    double flops, bytes;
    bool canonical;   /* key is this build's canonical key (a sweep's); false:
                       * db_rekey looks at it (an import's) */
} db_problem;
int db_problem_put(db_store *s, const db_problem *p, int64_t *id, pt_err *e);

typedef struct db_kernel {
    const char *hash;   /* db_kernel_hash(ptx) */
    const char *op;
    const char *config; /* the config that first produced it */
    const char *entry;  /* kernel (entry) name */
    const char *ptx;
} db_kernel;

typedef struct db_cubin {
    const char *arch;      /* "sm_80" */
    const char *compiler;  /* "nvJitLink 13.0" */
    const void *data;      /* may be NULL: resources only */
    size_t size;
    const char *resources; /* pt_resource as JSON */
} db_cubin;

/* Run states. A 'running' run whose process is gone can be resumed. */
#define DB_RUN_STATUS(X) X(running) X(done) X(failed) X(interrupted)

typedef struct db_run {
    const char *uuid;         /* NULL: db_run_begin makes one */
    int64_t fingerprint_id;
    const char *tool_version, *git_rev;
    const char *strategy, *budget; /* "anneal", "300" or "60s" */
    uint64_t seed;
    const char *backend;  /* cuda | emu | mock */
    const char *arch;     /* target: which cubin its winners serve ("sm_80") */
    const char *args_key; /* what makes two invocations the same sweep */
    const char *host;
    int64_t pid;
    double started, ended; /* unix seconds; ended 0: not ended */
    const char *status;
} db_run;

/* Candidate outcome classes: the one list. The names are what the store
 * keeps, the CLI prints and the import accepts; DB_OUTCOME_ROWS are what a
 * candidate can end in (tuner/backend.h makes tuner_outcome of them, with the
 * same values as db_class), DB_STORE_ROWS the store's own: invalid, and
 * duplicate (a config whose PTX equals one already measured in the run). ok
 * is the only class with a score. A row is X(A, ID, name); A is passed
 * through, so one list serves X-macros of any shape (DB_CLASS_MAP below,
 * TUNER_OUTCOME_MAP). */
#define DB_OUTCOME_ROWS(X, A)                                                 \
    X(A, OK, ok)                                                              \
    X(A, COMPILE_ERROR, compile_error)   /* emit or PTX assembly failed */    \
    X(A, RESOURCE_LIMIT, resource_limit) /* registers/shared/threads too many */ \
    X(A, LAUNCH_ERROR, launch_error)     /* load or launch refused otherwise */ \
    X(A, FAULT, fault)                   /* illegal address & co, worker died */ \
    X(A, TIMEOUT, timeout)               /* killed past its deadline */       \
    X(A, WRONG_ANSWER, wrong_answer)     /* values, guard zones, inputs */
#define DB_STORE_ROWS(X, A) X(A, INVALID, invalid) X(A, DUPLICATE, duplicate)

/* X(name) for every class the store accepts. */
#define DB__CLASS_NAME(A, id, name) A(name)
#define DB_CLASS_MAP(X) DB_OUTCOME_ROWS(DB__CLASS_NAME, X) DB_STORE_ROWS(DB__CLASS_NAME, X)

typedef enum db_class {
#define DB__CLASS_ENUM(A, id, name) DB_CLASS_##id,
    DB_OUTCOME_ROWS(DB__CLASS_ENUM, ~) DB_STORE_ROWS(DB__CLASS_ENUM, ~)
#undef DB__CLASS_ENUM
    DB_NCLASSES
} db_class;

/* The stored name of c ("ok", "duplicate"...); NULL out of range. */
const char *db_class_name(db_class c);

/* One candidate of one run on one problem. Statistics are seconds; spread
 * is the relative spread (coefficient of variation) of the repetitions. */
typedef struct db_measurement {
    int64_t run_id, problem_id;
    const char *config; /* canonical "k=v,..." */
    int rung;           /* successive-halving level; 0 otherwise */
    bool final;         /* may be a winner (the last rung of its strategy) */
    const char *status; /* DB_CLASS_MAP name */
    const char *error;  /* one line, "" when ok */
    const char *source; /* "measured" (a real device), "model" (the cost model's
                         * estimate, never timed) or "mock" (the test device:
                         * stored, compared, never served as a winner) */
    const char *sample; /* reused from an earlier run: that run's uuid; NULL: ours */
    int verified;       /* 1 checked against the reference, 0 not checked */
    double t_min, t_median, t_max, spread;
    int reps;
    double tflops, gbps;
    const char *launch; /* JSON: grid, block, smem */
    double created;     /* unix seconds; 0: now */
} db_measurement;

/* Stores one candidate atomically: the kernel (when k is not NULL; kept if
 * present), its cubin (when c is not NULL), the measurement, and the winner
 * of (fingerprint, problem) when this one beats it. Winner order among the
 * final ok rows of one fingerprint: measured before model, then the lowest
 * median, then the smaller config string, then the kernel hash. PT_OK also when the
 * measurement was already there (*inserted false): a resumed sweep never
 * stores a candidate twice. */
int db_record(db_store *s, const db_kernel *k, const db_cubin *c, const db_measurement *m,
              bool *inserted, pt_err *e);

/* Starts a run (status running) and returns its id. */
int db_run_begin(db_store *s, const db_run *r, int64_t *id, pt_err *e);
/* Finds an unfinished run of the same args_key and fingerprint whose process
 * is gone (same host, pid not alive) and takes it over (host, pid := ours).
 * *id 0 when none. */
int db_run_claim(db_store *s, const char *args_key, int64_t fingerprint_id, const char *host,
                 int64_t pid, int64_t *id, pt_err *e);
/* The same for a store that is the caller's own copy (a Slurm task's
 * node-local store, copied out after a killed task and in on another
 * node): an unfinished run of any host is taken over. */
int db_run_claim_any(db_store *s, const char *args_key, int64_t fingerprint_id, const char *host,
                     int64_t pid, int64_t *id, pt_err *e);
int db_run_end(db_store *s, int64_t run, const char *status, pt_err *e);
/* The uuid of run id. */
int db_run_uuid(db_store *s, int64_t run, char uuid[33], pt_err *e);
/* A run named by its id ("12") or a unique prefix of 6+ digits of its uuid. */
int db_run_resolve(db_store *s, const char *name, int64_t *id, pt_err *e);

/* A candidate measured by a finished run: what an incremental sweep reuses
 * instead of measuring it again. */
typedef struct db_reuse {
    char status[16], source[16];
    char error[1024];
    int verified, reps;
    double t_min, t_median, t_max, spread;
    char sample[33]; /* the uuid of the run that took the timing */
} db_reuse;
/* The latest row of kernel kernel_hash at rung for problem_id in a 'done'
 * run (other than exclude_run) under fingerprint_id (same device, versions
 * and benchmark protocol): *found false when there is none. Duplicates are
 * never reused (their original is). */
int db_reuse_find(db_store *s, int64_t fingerprint_id, int64_t problem_id, const char *kernel_hash,
                  int rung, int64_t exclude_run, db_reuse *out, bool *found, pt_err *e);

/* The candidates already stored for (run, problem): the replay of a resumed
 * sweep. score is t_median for ok rows, INFINITY otherwise. */
typedef int (*db_result_fn)(void *ctx, const char *config, int rung, const char *status,
                            double score, const char *kernel_hash);
int db_run_results(db_store *s, int64_t run, int64_t problem, db_result_fn fn, void *ctx,
                   pt_err *e);

/* ---- winners and lookup --------------------------------------------- */

typedef struct db_winner {
    const char *fingerprint; /* key */
    const char *gpu;
    const char *problem_key, *problem_name, *op;
    const char *config, *kernel_hash, *entry, *ptx;
    const void *cubin; /* NULL when none */
    size_t cubin_size;
    const char *arch, *launch, *source, *status;
    double t_min, t_median, t_max, spread, tflops, gbps;
    int reps, verified;
    const char *run_uuid, *tool_version, *git_rev, *strategy;
    double measured_at;
    /* lookup only */
    bool nearest;        /* from the nearest tuned bucket, not this problem */
    double distance;     /* sum |log2 ratio| over the dimensions */
} db_winner;
typedef int (*db_winner_fn)(void *ctx, const db_winner *w);

/* The winner of a problem under exactly this fingerprint; PT_OK and *found
 * false when there is none (never a winner of another fingerprint). */
int db_winner_get(db_store *s, const db_fingerprint *f, const char *problem_key,
                  db_winner_fn fn, void *ctx, bool *found, pt_err *e);

/* The winner for a problem that may be untuned: the exact one when tuned,
 * else the winner of the nearest problem of the same op and class under the
 * same fingerprint (flagged nearest, with its distance). Rule: distance =
 * sum over dimensions of |log2(a/b)|; ties go to the larger problem, then
 * to the smaller key. The config is what transfers: re-emit it for the new
 * problem. *found false when the class has no winner at all. */
int db_lookup(db_store *s, const db_fingerprint *f, const db_problem *p, db_winner_fn fn,
              void *ctx, bool *found, pt_err *e);
/* db_lookup where a nearest winner counts only when ok(ok_ctx, its config)
 * (e.g. the op's check() for the asked problem: the config must apply
 * there); ok NULL: every winner. The exact winner is the problem's own. */
typedef bool (*db_config_ok_fn)(void *ctx, const char *config);
int db_lookup_valid(db_store *s, const db_fingerprint *f, const db_problem *p,
                    db_config_ok_fn ok, void *ok_ctx, db_winner_fn fn, void *ctx, bool *found,
                    pt_err *e);

/* Every winner, optionally filtered: gpu names fingerprints as
 * db_gpu_resolve does (NULL: all; one it does not name is PT_EINVAL listing
 * the known ones), and a PCRE2 pattern over the problem key and name
 * (NULL: all). Winners timed on the mock device are never listed (nor
 * exported, nor looked up). */
int db_winners(db_store *s, const char *gpu, const char *match, db_winner_fn fn, void *ctx,
               pt_err *e);
/* Recomputes every winner from the measurements (after a merge). */
int db_winners_rebuild(db_store *s, pt_err *e);

/* The launch contract (tuner/contract.h) is computed for rows that are
 * served, not for every candidate: a sweep adds it to each problem's winner
 * at the end of the problem, an export to the rows it writes that have
 * none. The winner of (fingerprint, problem): its measurement id, config
 * and launch JSON appended to the buffers; *found false when none. */
int db_winner_launch(db_store *s, int64_t fingerprint_id, int64_t problem_id, int64_t *mid,
                     pt_buf *config, pt_buf *launch, bool *found, pt_err *e);
/* Replaces the launch JSON of a measurement (the same launch with its
 * contract added). One transaction. */
int db_launch_put(db_store *s, int64_t measurement_id, const char *launch, pt_err *e);

/* ---- export, import, merge ------------------------------------------ */

typedef enum db_format { DB_FMT_JSON, DB_FMT_CSV, DB_FMT_CHEADER, DB_FMT_BUNDLE } db_format;
int db_format_parse(const char *name, db_format *f, pt_err *e);

/* The tuned table (winners, filtered as db_winners) as JSON, CSV or a C
 * header, appended to out; *nrows says how many. */
int db_export_text(db_store *s, db_format f, const char *gpu, const char *match, pt_buf *out,
                   int *nrows, pt_err *e);
/* The same rows (with their kernel, cubin, problem, fingerprint, run and
 * measurement) into a new store at path: the bundle. path must not exist; it
 * is built under a temporary name beside it and renamed into place whole. */
int db_export_bundle(db_store *s, const char *gpu, const char *match, const char *path,
                     int *nrows, pt_err *e);
/* The table in any format into the file path: written to a temporary file in
 * path's directory, synced and renamed over it, so a failure (full disk,
 * missing directory) leaves an old file whole and the message names the
 * cause (PT_EIO). A path naming the store itself (or its -wal, -shm or
 * -journal) is refused (PT_EINVAL) before anything is written. */
int db_export_file(db_store *s, db_format f, const char *gpu, const char *match,
                   const char *path, int *nrows, pt_err *e);

/* One exported winner with everything an engine runs it by (the engine
 * runtime, runtime/, reads a bundle through this): identities checked as
 * for every export (fingerprint key against its fields, kernel hash against
 * its PTX; a mismatch refuses the whole table). launch is the stored launch
 * JSON with its contract (tuner/contract.h). */
typedef struct db_export_row {
    db_fingerprint fp;
    const char *fp_key;
    const char *problem_key, *klass, *dims, *op;
    const char *config, *kernel_hash, *entry, *ptx;
    size_t ptx_len;
    const void *cubin; /* NULL when none */
    size_t cubin_size;
    const char *arch, *launch, *source;
    double t_median;
} db_export_row;
typedef int (*db_export_row_fn)(void *ctx, const db_export_row *r);
/* The rows of the tuned table (filtered as db_winners), without the
 * integrity check of a file export (the caller opened the store). */
int db_export_rows(db_store *s, const char *gpu, const char *match, db_export_row_fn fn,
                   void *ctx, pt_err *e);

/* ---- the exported table: the winners, or fewer kernels (issue 14) ---- */

/* export --max-kernels N / --max-slowdown P: instead of each problem's
 * winner, the smallest set of kernels that serves every problem of the
 * table within the bound, each problem served by the fastest kernel of the
 * set (a set cover over the stored measurements, per fingerprint; the
 * rules are in docs/db.md). */
typedef struct db_cover_opts {
    int max_kernels;     /* per fingerprint; 0: no bound */
    double max_slowdown; /* against the problem's winner, a fraction (0.03 = 3%); < 0: none */
} db_cover_opts;

typedef struct db_cover_summary {
    int problems;        /* rows of the table */
    int kernels;         /* distinct kernels of the table (summed over fingerprints) */
    int winner_kernels;  /* distinct kernels of the winners' table */
    double worst, mean;  /* slowdown against the per-problem winners (fractions) */
    double compile_s;    /* the table's kernels' stored compile times, summed */
    int compile_known;   /* kernels with a stored compile time */
    bool exact;          /* every fingerprint's cover proven optimal (exhaustive
                          * search); false: greedy for at least one */
} db_cover_summary;

/* One row of the table to export: a measurement and what the contract
 * and the report need (strings owned by the selection). */
typedef struct db_sel_row {
    int64_t id; /* the measurement */
    const char *fp_key, *op, *problem_key, *problem_name, *config, *arch, *kernel_hash;
    const char *launch;  /* the stored launch JSON, or the one set by db_sel_set_launch */
    bool contract;       /* launch has a "contract" */
    int ptx_version;     /* the fingerprint's: the sweep's max_ptx */
    double t_median;
    const char *winner_kernel; /* the problem's winner */
    double winner_s, slowdown; /* t_median / winner_s - 1 */
} db_sel_row;

typedef struct db_export_sel db_export_sel;

/* The rows an export writes, in the table's order (fingerprint, problem):
 * the winners filtered as db_winners, or with cover (NULL: none) the cover
 * of those problems, *sum (may be NULL) its figures. The store passes the
 * integrity check first (a damaged index could hide rows). A bound no set
 * meets is PT_EINVAL naming a problem that cannot be served within it. */
int db_export_select(db_store *s, const char *gpu, const char *match, const db_cover_opts *cover,
                     db_export_sel **out, db_cover_summary *sum, pt_err *e);
size_t db_sel_count(const db_export_sel *x);
const db_sel_row *db_sel_row_at(const db_export_sel *x, size_t i);
/* Replaces row i's launch JSON for the export (the same launch with its
 * contract added); PT_ENOMEM. */
int db_sel_set_launch(db_export_sel *x, size_t i, const char *launch, pt_err *e);
void db_export_sel_free(db_export_sel *x);
/* db_export_text and db_export_file over a selection. */
int db_export_sel_text(db_store *s, db_format f, const db_export_sel *x, pt_buf *out, int *nrows,
                       pt_err *e);
int db_export_sel_file(db_store *s, db_format f, const db_export_sel *x, const char *path,
                       int *nrows, pt_err *e);

typedef struct db_merge_stats {
    int64_t fingerprints, problems, kernels, runs, measurements; /* new rows */
    int64_t skipped; /* measurements already present */
    int64_t refused; /* rows that failed a check (then nothing was imported) */
} db_merge_stats;

/* Copies another store (or a bundle) into s: rows are matched by their
 * natural keys (fingerprint fields, problem key, kernel hash, run uuid,
 * (run, problem, config, rung)); existing rows win; winners are rebuilt.
 * The source is opened read-only and never changed. */
int db_merge(db_store *s, const char *src_path, db_merge_stats *st, pt_err *e);
/* Imports a JSON table written by db_export_text (name is for messages). */
int db_import_json(db_store *s, const char *text, size_t len, const char *name,
                   db_merge_stats *st, pt_err *e);

/* ---- regression ----------------------------------------------------- */

/* shared: both runs hold one timing (a row reused from an earlier run, not
 * measured again): no evidence either way, left out of the verdict. */
typedef enum db_verdict { DB_SAME, DB_FASTER, DB_SLOWER, DB_NEW, DB_GONE, DB_SHARED } db_verdict;
const char *db_verdict_name(db_verdict v);

typedef struct db_regress_row {
    const char *problem_key, *problem_name, *config, *kernel_hash; /* the candidate's */
    double base_s, cand_s;       /* medians; NAN when absent */
    double base_spread, cand_spread;
    double change;               /* cand/base - 1 */
    double noise;                /* the change the spreads alone can explain */
    db_verdict verdict;
    const char *base_config, *base_kernel; /* the baseline's (winners: may differ) */
} db_regress_row;
typedef int (*db_regress_fn)(void *ctx, const db_regress_row *r);

/* What is compared: each problem's best row per run (the winner level, the
 * default view) or each kernel of each problem. */
typedef enum db_regress_level { DB_REGRESS_WINNERS, DB_REGRESS_KERNELS } db_regress_level;

typedef struct db_regress_summary {
    int rows, slower, faster, same, only_base, only_cand;
    int shared;  /* one timing in both runs: left out of the verdict */
    bool same_fingerprint;
    char base_fp[17], cand_fp[17];
    char fields[160]; /* the fingerprint fields that differ, "generator,driver" ("" none) */
    db_regress_level level;
} db_regress_summary;

/* Compares two runs on each problem: final ok timed rows (measured, or both
 * the mock device's; cost-model estimates never), at the winner level
 * (problem -> best time of each run) or kernel by kernel. The runs' fingerprints
 * may differ in tool (generator), driver, compiler and PTX ISA versions (the
 * fields are named in sum->fields); another GPU or protocol is PT_EINVAL. A
 * change is a regression when it exceeds both the threshold (0.03 = 3%) and
 * the noise, 2*sqrt(sb^2 + sc^2) from the stored relative spreads. Rows of
 * one run only (new, gone) and rows both runs share one timing of (shared)
 * are counted, never judged. */
int db_regress_at(db_store *s, const char *base, const char *cand, double threshold,
                  db_regress_level level, db_regress_fn fn, void *ctx, db_regress_summary *sum,
                  pt_err *e);
/* db_regress_at kernel by kernel. */
int db_regress(db_store *s, const char *base, const char *cand, double threshold,
               db_regress_fn fn, void *ctx, db_regress_summary *sum, pt_err *e);

/* ---- listing -------------------------------------------------------- */

typedef struct db_run_info {
    int64_t id;
    const char *uuid, *fingerprint, *gpu, *strategy, *budget, *backend, *status, *git_rev;
    uint64_t seed;
    double started, ended;
    int64_t measured, failed;
} db_run_info;
typedef int (*db_run_fn)(void *ctx, const db_run_info *r);
int db_runs(db_store *s, db_run_fn fn, void *ctx, pt_err *e);

/* The best final ok rows of a run, up to per_problem for each problem (in
 * the order problems were stored), fastest first. */
typedef struct db_top_row {
    const char *problem_key, *problem_name, *config, *kernel_hash, *source;
    double t_median, spread, tflops, gbps;
    int rank, verified;
} db_top_row;
typedef int (*db_top_fn)(void *ctx, const db_top_row *r);
int db_run_top(db_store *s, int64_t run, int per_problem, db_top_fn fn, void *ctx, pt_err *e);
/* Candidates of a run per outcome class. */
typedef int (*db_class_fn)(void *ctx, const char *status, int64_t count);
int db_run_classes(db_store *s, int64_t run, db_class_fn fn, void *ctx, pt_err *e);

/* Fingerprints whose key starts with prefix (NULL or "": all), by key. */
typedef int (*db_fingerprint_fn)(void *ctx, const char *key, const db_fingerprint *f);
int db_fingerprints(db_store *s, const char *prefix, db_fingerprint_fn fn, void *ctx, pt_err *e);

/* The fingerprints a --gpu value names, each passed to fn: the key; a key
 * prefix naming one fingerprint; the exact GPU name (every fingerprint of
 * that GPU); a short name of one GPU (without "NVIDIA ", its first word, or
 * that word up to a '-': "H200", "h100", "A100"). Nothing named, an
 * ambiguous prefix or short name, or an empty value: PT_EINVAL with one
 * line listing the known or the matching fingerprints. */
int db_gpu_resolve(db_store *s, const char *gpu, db_fingerprint_fn fn, void *ctx, pt_err *e);

typedef struct db_counts {
    int64_t fingerprints, problems, kernels, cubins, runs, measurements, winners;
} db_counts;
int db_count(db_store *s, db_counts *c, pt_err *e);

/* A query for tests and tools that need a number the API does not expose:
 * runs sql (no parameters) and returns the first column of the first row. */
int db_query_int(db_store *s, const char *sql, int64_t *v, pt_err *e);

#endif
