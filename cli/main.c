/* The ptxtune command: argument parsing over the library. Only cli/ prints
 * and exits. Bad input: one line on stderr naming the value, exit 2.
 * Each command lives in a cli/cmd_*.c file and has one row below. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct {
    const char *name, *summary;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {"emit", "print the PTX of one variant of an op (ptxtune ops lists them)", cmd_emit},
    {"compile", "assemble PTX and print the resource report", cmd_compile},
    {"variants", "emit and compile every variant per arch, one row each", cmd_variants},
    {"ops", "list the ops and their parameter spaces", cmd_ops},
    {"exec", "run a PTX file on the CPU emulator with its detectors", cmd_exec},
    {"devices", "list the CUDA devices (name, cc, SMs, L2, clocks, peaks, UUID)", cmd_devices},
    {"run", "run, verify and time one variant (or --sweep all) on cuda, emu or mock", cmd_run},
    {"tune", "tuning sweep into a SQLite store (resumable), top results", cmd_tune},
    {"export", "tuned table as json, csv, c-header or bundle", cmd_export},
    {"import", "add stores, bundles or JSON tables to a store", cmd_import},
    {"db", "store tools: merge, check, runs, fingerprints, lookup", cmd_db},
    {"regress", "compare two runs, winners (default) or kernels; exit 1 on a regression", cmd_regress},
};

static void usage(FILE *f)
{
    fputs("usage: ptxtune COMMAND [options]\n"
          "Writes PTX kernels from parametric templates, compiles them and checks them.\n\n"
          "commands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("  --version  print the version\nEach command takes --help.\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("ptxtune %s\n", PT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    cli_die(2, "unknown command '%s' (see ptxtune --help)", cmd);
}
