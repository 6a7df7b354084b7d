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

#include "ptx/parse.h"

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

/* Golden file check: text against PTXTUNE_GOLDEN_DIR/<name>.ptx, which must
 * also parse back to itself; PTXTUNE_REGEN_GOLDEN=1 rewrites the file. */
static inline void test_golden(const char *name, const char *text)
{
    const char *regen = getenv("PTXTUNE_REGEN_GOLDEN");
    const char *dir = getenv("PTXTUNE_GOLDEN_DIR");
    cr_assert(dir, "PTXTUNE_GOLDEN_DIR not set (meson sets it)");
    char path[512];
    snprintf(path, sizeof path, "%s/%s.ptx", dir, name);
    if (regen && strcmp(regen, "1") == 0) {
        FILE *f = fopen(path, "wb");
        cr_assert(f, "cannot write %s", path);
        fputs(text, f);
        fclose(f);
        return;
    }
    FILE *f = fopen(path, "rb");
    cr_assert(f, "missing golden file %s (regenerate: see README)", path);
    static char want[1 << 20];
    size_t n = fread(want, 1, sizeof want - 1, f);
    want[n] = '\0';
    fclose(f);
    cr_expect_str_eq(text, want, "%s differs from the golden file", name);
    ptx_module *m = NULL;
    pt_err pe = {0};
    cr_assert_eq(ptx_parse(want, n, path, 90, &m, &pe), PT_OK, "%s", pe.msg);
    char *again = ptx_print(m);
    cr_expect_str_eq(again, want, "%s: parse(print) round trip", name);
    free(again);
    ptx_module_free(m);
}

/* A test's config may name the emulator device's SM count as an item
 * "sms=N" anywhere (not a config parameter: it sizes persistent grids at
 * launch): *sms (0 when absent) and the config without it in buf. */
static inline const char *config_sms(const char *config, int *sms, char *buf, size_t n)
{
    *sms = 0;
    if (!config)
        return config;
    const char *q = strstr(config, "sms=");
    while (q && q != config && q[-1] != ',')
        q = strstr(q + 1, "sms=");
    if (!q)
        return config;
    char *end;
    *sms = (int)strtol(q + 4, &end, 10);
    size_t head = (size_t)(q - config);
    const char *tail = *end == ',' ? end + 1 : end;
    if (!*tail && head)
        head--; /* the comma before a last item */
    snprintf(buf, n, "%.*s%s", (int)head, config, tail);
    return buf;
}

#endif
