/* The source tree's static rules (scripts/check_layers.sh): layers point
 * down (ptx < gen < search < tuner < cli, db beside tuner and including
 * ptx only) and every allocation is tested for NULL. The script runs over
 * the real tree, and over small planted trees to prove each rule can fail. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

/* The repository root: the parent of PTXTUNE_TESTS_DIR. */
static void root_dir(char *out, size_t n)
{
    const char *t = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(t, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    snprintf(out, n, "%s/..", t);
}

/* Runs the check over dir; its exit code, its output in out. */
static int check(const char *dir, char *out, size_t n)
{
    char root[1024], cmd[4096], tmp[] = "/tmp/ptxtune_layers_out_XXXXXX";
    root_dir(root, sizeof root);
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/check_layers.sh' '%s' >'%s' 2>&1", root, dir, tmp);
    int st = system(cmd);
    test_slurp(tmp, out, n);
    remove(tmp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A fresh planted tree: one file per (path, text) pair. */
static void plant(char *dir, const char *const *files)
{
    cr_assert(mkdtemp(dir));
    for (int i = 0; files[i]; i += 2) {
        char path[1024], cmd[1200];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
        cr_assert(system(cmd) == 0);
        FILE *f = fopen(path, "w");
        cr_assert(f, "cannot write %s", path);
        fputs(files[i + 1], f);
        fclose(f);
    }
}

static void unplant(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert(system(cmd) == 0);
}

Test(layers, the_source_tree_passes)
{
    char root[1024], out[65536];
    root_dir(root, sizeof root);
    int rc = check(root, out, sizeof out);
    cr_assert_eq(rc, 0, "check_layers.sh failed (%d):\n%s", rc, out);
    cr_assert_str_empty(out);
}

Test(layers, an_include_of_a_folder_above_fails)
{
    static const char *const files[] = {
        "search/sweep.c", "#include \"search/search.h\"\n#include \"gen/op.h\"\n"
                          "#include \"tuner/pool.h\"\n",
        "gen/x.c", "#include \"ptx/ir.h\"\n",
        NULL,
    };
    char dir[] = "/tmp/ptxtune_layers_XXXXXX", out[8192];
    plant(dir, files);
    cr_assert_eq(check(dir, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "search/sweep.c:3: search/ includes \"tuner/pool.h\""), "%s", out);
    cr_assert(!strstr(out, "gen/x.c"), "%s", out);
    unplant(dir);
}

Test(layers, db_includes_ptx_only)
{
    static const char *const files[] = {
        "db/a.c", "#include \"db/db.h\"\n#include \"ptx/base.h\"\n",
        "db/b.c", "#include \"gen/op.h\"\n",
        "db/c.c", "#include <stdio.h>\n#include \"tuner/backend.h\"\n",
        NULL,
    };
    char dir[] = "/tmp/ptxtune_layers_XXXXXX", out[8192];
    plant(dir, files);
    cr_assert_eq(check(dir, out, sizeof out), 1, "%s", out);
    cr_assert(!strstr(out, "db/a.c"), "%s", out);
    cr_assert(strstr(out, "db/b.c:1: db/ includes \"gen/op.h\""), "%s", out);
    cr_assert(strstr(out, "db/c.c:2: db/ includes \"tuner/backend.h\""), "%s", out);
    unplant(dir);
}

Test(layers, what_is_allowed_passes)
{
    static const char *const files[] = {
        "tuner/t.c", "#include \"db/db.h\"\n#include \"search/search.h\"\n#include \"gen/op.h\"\n",
        "cli/c.c", "#include \"tuner/pool.h\"\n#include \"db/db.h\"\n",
        "ptx/emu/e.c", "#include \"ptx/emu/emu.h\"\n#include \"ptx/base.h\"\n",
        "tests/t.c", "#include \"cli/cli.h\"\n", /* tests are exempt */
        "bench/b.c", "#include \"cli/cli.h\"\n",
        NULL,
    };
    char dir[] = "/tmp/ptxtune_layers_XXXXXX", out[8192];
    plant(dir, files);
    cr_assert_eq(check(dir, out, sizeof out), 0, "%s", out);
    unplant(dir);
}

Test(layers, ptx_includes_nothing_above_and_no_relative_path)
{
    static const char *const files[] = {
        "ptx/emu/e.c", "#include \"gen/dtype.h\"\n",
        "gen/g.c", "#include \"../tuner/pool.h\"\n",
        NULL,
    };
    char dir[] = "/tmp/ptxtune_layers_XXXXXX", out[8192];
    plant(dir, files);
    cr_assert_eq(check(dir, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "ptx/emu/e.c:1: ptx/ includes \"gen/dtype.h\""), "%s", out);
    cr_assert(strstr(out, "gen/g.c:1: relative include"), "%s", out);
    unplant(dir);
}

Test(layers, an_unchecked_allocation_fails)
{
    static const char *const files[] = {
        "gen/ok.c", "static int f(int **p, char **s)\n{\n    *p = calloc(4, sizeof **p);\n"
                    "    int *q = malloc(8);\n    *s = strdup(\"x\");\n"
                    "    if (!*p || !q || *s == NULL)\n        return 2;\n"
                    "    int *r = realloc(q, 16);\n    if (!r)\n        return 2;\n"
                    "    return 0;\n}\n",
        "gen/bad.c", "static void f(void)\n{\n    int *p = calloc(4, sizeof *p);\n    p[0] = 1;\n}\n",
        "tuner/grow.c", "static int g(int **v)\n{\n    *v = realloc(*v, 64);\n"
                        "    return *v ? 0 : 2;\n}\nstatic int h(char **v)\n{\n"
                        "    v[0] = realloc(v[0], 8);\n    return !v[0];\n}\n",
        "db/arg.c", "static void k(void)\n{\n    use(strdup(\"x\"));\n}\n",
        NULL,
    };
    char dir[] = "/tmp/ptxtune_layers_XXXXXX", out[8192];
    plant(dir, files);
    cr_assert_eq(check(dir, out, sizeof out), 1, "%s", out);
    cr_assert(!strstr(out, "gen/ok.c"), "%s", out);
    cr_assert(strstr(out, "gen/bad.c:3: unchecked allocation of p"), "%s", out);
    cr_assert(strstr(out, "tuner/grow.c:3: \"*v = realloc(*v, ...)\" loses *v"), "%s", out);
    cr_assert(strstr(out, "tuner/grow.c:8: \"v[0] = realloc(v[0], ...)\" loses v[0]"), "%s", out);
    cr_assert(strstr(out, "db/arg.c:3: allocation whose result is not stored"), "%s", out);
    unplant(dir);
}

Test(layers, runtime_includes_no_generator)
{
    static const char *const files[] = {
        "runtime/ok.c", "#include \"db/db.h\"\n#include \"ptx/base.h\"\n"
                        "#include \"tuner/driver.h\"\n#include \"runtime/x.h\"\n",
        "runtime/gen.c", "#include \"gen/op.h\"\n",
        "runtime/tuner.c", "#include \"tuner/backend.h\"\n",
        "tuner/up.c", "#include \"runtime/x.h\"\n",
        "cli/c.c", "#include \"runtime/x.h\"\n",
        NULL,
    };
    char dir[] = "/tmp/ptxtune_layers_XXXXXX", out[8192];
    plant(dir, files);
    cr_assert_eq(check(dir, out, sizeof out), 1, "%s", out);
    cr_assert(!strstr(out, "runtime/ok.c"), "%s", out);
    cr_assert(!strstr(out, "cli/c.c"), "%s", out);
    cr_assert(strstr(out, "runtime/gen.c:1: runtime/ includes \"gen/op.h\""), "%s", out);
    cr_assert(strstr(out, "runtime/tuner.c:1: runtime/ includes \"tuner/backend.h\""), "%s", out);
    cr_assert(strstr(out, "tuner/up.c:1: tuner/ includes \"runtime/x.h\""), "%s", out);
    unplant(dir);
}

/* scripts/gpu/build.sh (the GPU machine's build, no meson) reads its
 * source list from the meson.build files: every library and CLI source
 * must be in it, or the one-shot GPU run fails to link (kit/ sources
 * written 'kit/x.c' were skipped by a pattern without '/'). */
Test(layers, the_gpu_build_script_lists_every_source)
{
    char root[1024], cmd[4096], tmp[] = "/tmp/ptxtune_layers_src_XXXXXX";
    root_dir(root, sizeof root);
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/gpu/build.sh' --sources >'%s' 2>&1", root, tmp);
    cr_assert(system(cmd) == 0, "build.sh --sources failed");
    static char listed[1 << 16];
    test_slurp(tmp, listed, sizeof listed);
    remove(tmp);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && find ptx gen search tuner db runtime cli -name '*.c' | sort", root);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        char want[1100];
        snprintf(want, sizeof want, "/%s\n", line);
        cr_expect(strstr(listed, want), "build.sh --sources misses %s", line);
        n++;
    }
    pclose(p);
    cr_assert(n > 50, "only %d sources found under the library folders", n);
}
