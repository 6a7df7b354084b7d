/* Shared helpers of the ptxtune command (cli/ only). */
#ifndef PT_CLI_H
#define PT_CLI_H

#include <stdarg.h>
#include <stddef.h>

#include "ptx/base.h"

/* Prints "ptxtune: <message>" on stderr and exits with code. */
_Noreturn void cli_die(int code, const char *fmt, ...) PT_PRINTF(2, 3);
double cli_now(void);
/* Whole file ("-": stdin), NUL-terminated, malloc'd; dies on error. */
char *cli_read_file(const char *path, size_t *len);

#endif
