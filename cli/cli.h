/* Shared helpers of the ptxtune command (cli/ only). */
#ifndef PT_CLI_H
#define PT_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gen/op.h"
#include "ptx/base.h"
#include "ptx/compile.h"

/* Prints "ptxtune: <message>" on stderr and exits with code. */
_Noreturn void cli_die(int code, const char *fmt, ...) PT_PRINTF(2, 3);
double cli_now(void);
/* Whole text file ("-": stdin), NUL-terminated, malloc'd; dies (exit 2) when it
 * cannot be read, is a directory or holds a NUL byte (naming its offset). */
char *cli_read_file(const char *path, size_t *len);

/* Checked numeric option values: the whole text, in [lo, hi], and for
 * reals finite (no nan, inf, or 1e400 read as inf); dies with exit 2 naming
 * the option (opt, e.g. "--limit") and the value. */
int64_t cli_opt_int(const char *opt, const char *v, int64_t lo, int64_t hi);
double cli_opt_real(const char *opt, const char *v, double lo, double hi);
/* getopt_long's failure c ('?' unknown option, ':' missing value, with the
 * optstring ":" and opterr 0) as one line: "unknown option '--foo'". */
_Noreturn void cli_opt_error(int c, char **argv);

/* The problem options every op command takes. */
typedef struct cli_problem {
    const pt_op *op;
    pt_problem prob;
    const char *arch;   /* "sm_80" or "all" */
    bool has_arch;      /* --arch given */
    const char *config; /* "k=v,..." */
    const char *backend;
    bool json;
    long limit;
    pt_arena *arena;    /* the problem's strings */
} cli_problem;
/* A command's own options, parsed in the same pass: ids >= CLI_OPT_OWN;
 * fn gets each (optarg NULL for flags). usage replaces the --help text. */
enum { CLI_OPT_OWN = 1024 };
typedef struct cli_extra {
    const struct option *opts; /* {0} terminated */
    void (*fn)(void *ctx, int id, const char *arg);
    void *ctx;
    const char *usage;
} cli_extra;
/* Parses "OP [KEY=VALUE ...] [--expr ... --shape ... and the other
 * flags]" (argv[0] is the command name): flags and items mix, both go
 * through the problem-file parser (search/problem.h), a key given twice is
 * refused. Dies with one line and exit 2 on bad input. */
/* The problem flags, one per key name of every op's schema (--m --expr
 * --d-colmajor ...; '_' written '-'; a bool's value optional, 1), appended
 * to a getopt_long table at opts[n] (terminated; cap entries at most);
 * returns the new count. *names holds their names: free it after parsing.
 * Their ids lie above every command's own (CLI_OPT_OWN + 1024 on). */
size_t cli_problem_opts(struct option *opts, size_t cap, size_t n, void **names);
/* For an id of those flags: checks a numeric value (dies, exit 2, naming
 * the flag), appends the item ` key="value"` to items, returns true; false
 * for another id. The problem parser then judges the item for the op. */
bool cli_problem_flag(int id, const char *arg, pt_buf *items);
/* Every op's problem flags with their docs and defaults, for --help. */
void cli_problem_usage(FILE *f);
/* Appends ` key="value"` in the problem syntax (quotes and backslashes escaped). */
void cli_put_item(pt_buf *b, const char *key, const char *v);

void cli_parse_problem(int argc, char **argv, cli_problem *cp, const char *usage,
                       const cli_extra *x);
void cli_problem_free(cli_problem *cp);
/* The op's default config for the problem, overridden by --config; dies
 * (exit 2, one line) when --config is not a valid config for the problem
 * (an unknown key, a value outside a flag's domain, the op's check). */
void cli_make_config(const cli_problem *cp, const pt_prepared *pp, const pt_target *t,
                     pt_config *cfg);
/* The compile gate; dies (exit 3) when required and missing. */
pt_compiler *cli_open_compiler(const char *backend, bool required);

/* Commands: one file each (cli/cmd_*.c), one row in cli/main.c. */
int cmd_emit(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_variants(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tune(int argc, char **argv);    /* cli/cmd_tune.c */
int cmd_export(int argc, char **argv);  /* cli/cmd_db.c: export import db regress */
int cmd_import(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_regress(int argc, char **argv);
/* --json: the one envelope of docs/json.md ({"format": "ptxtune-WHAT",
 * "version": 1, "rows": [...]}); cli_jrow appends a row (and takes it),
 * cli_jprint writes the envelope to stdout and frees it; cli_jnum is a
 * number, null when not finite. Out of memory: exit 1. */
json_t *cli_jenv(const char *what);
void cli_jrow(json_t *env, json_t *row);
void cli_jprint(json_t *env);
json_t *cli_jnum(double v);

/* Exit code of device commands when libcuda.so.1 is missing. */
enum { CLI_EXIT_NODRIVER = 4 };

#endif
