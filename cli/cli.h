/* Shared helpers of the ptxtune command (cli/ only). */
#ifndef PT_CLI_H
#define PT_CLI_H

#include <stdarg.h>
#include <stddef.h>

#include "gen/op.h"
#include "ptx/base.h"
#include "ptx/compile.h"

/* Prints "ptxtune: <message>" on stderr and exits with code. */
_Noreturn void cli_die(int code, const char *fmt, ...) PT_PRINTF(2, 3);
double cli_now(void);
/* Whole text file ("-": stdin), NUL-terminated, malloc'd; dies (exit 2) when it
 * cannot be read, is a directory or holds a NUL byte (naming its offset). */
char *cli_read_file(const char *path, size_t *len);

/* The problem options every op command takes. */
typedef struct cli_problem {
    const pt_op *op;
    pt_problem prob;
    const char *arch;   /* "sm_80" or "all" */
    const char *config; /* "k=v,..." */
    const char *backend;
    bool json;
    long limit;
} cli_problem;
/* Parses "OP --expr ... --shape ..." (argv[0] is the command name). */
void cli_parse_problem(int argc, char **argv, cli_problem *cp, const char *usage);
/* The op's default config for the problem, overridden by --config. */
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
/* Exit code of device commands when libcuda.so.1 is missing. */
enum { CLI_EXIT_NODRIVER = 4 };

#endif
