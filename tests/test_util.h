/* Helpers shared by the Criterion tests: running the ptxtune binary and the
 * toolkit rule (skip without a CUDA toolkit unless PTXTUNE_REQUIRE_TOOLKIT=1,
 * which CI sets, makes it a failure). Header-only: each test program is one
 * translation unit. */
#ifndef PT_TEST_UTIL_H
#define PT_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static inline bool test_toolkit_required(void)
{
    const char *v = getenv("PTXTUNE_REQUIRE_TOOLKIT");
    return v && strcmp(v, "1") == 0;
}

/* The whole file (at most n-1 bytes) into buf, NUL-terminated; "" if absent. */
static inline void test_slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(buf, 1, n - 1, f) : 0;
    buf[len] = '\0';
    if (f)
        fclose(f);
}

/* Runs "ptxtune ARGS" (a shell fragment) in dir (NULL: a fresh temporary
 * directory); returns the exit code, stdout and stderr (either may be NULL). */
static inline int test_run_ptxtune(const char *dir, const char *args, char *out, size_t on,
                                   char *err, size_t en)
{
    const char *bin = getenv("PTXTUNE_BIN");
    cr_assert(bin, "PTXTUNE_BIN not set (meson sets it)");
    char tmp[] = "/tmp/ptxtune_test_XXXXXX";
    if (!dir) {
        cr_assert(mkdtemp(tmp));
        dir = tmp;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s >%s/.out 2>%s/.err </dev/null", dir, bin, args, dir,
             dir);
    int st = system(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/.out", dir);
    if (out)
        test_slurp(path, out, on);
    remove(path);
    snprintf(path, sizeof path, "%s/.err", dir);
    if (err)
        test_slurp(path, err, en);
    remove(path);
    if (dir == tmp)
        rmdir(tmp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
