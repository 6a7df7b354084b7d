/* The Python package (python/, issue 14 item 5) against the built library:
 * python/tests/test_numpy_emulator.py tunes a softmax and a GEMM with the
 * CLI through ptxtune.tune() on the emulator backend, exports a bundle and a
 * JSON table, opens them with ptxtune.Runtime on the fake driver over the
 * emulator (tests/fake_cuda.c), launches both at sizes not tuned exactly on
 * numpy arrays and checks them against numpy, and checks that each bad
 * argument is named; python/tests/test_torch_path.py takes the torch branch
 * on a stand-in torch module whose tensors live in the fake driver's memory
 * (no torch here); then `pip install` of python/ into a folder and an
 * import from there.
 *
 * The interpreter: $PTXTUNE_PYTHON, else the venv .venv-ci in the
 * repository root (what .ci/run installs numpy into), else python3 on PATH,
 * else /usr/bin/python3: the first that imports numpy. Without one the tests
 * skip saying so; with PTXTUNE_REQUIRE_TOOLKIT=1 (CI) that is a failure. */
#include <libgen.h>
#include <sys/wait.h>

#include "test_util.h"

static int sh(const char *cmd, char *out, size_t n)
{
    char tmp[] = "/tmp/ptxtune_py_sh_XXXXXX", full[16384];
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(full, sizeof full, "(%s) >'%s' 2>&1 </dev/null", cmd, tmp);
    int st = system(full);
    test_slurp(tmp, out, n);
    remove(tmp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The repository root (PTXTUNE_TESTS_DIR/..) and the build root
 * (PTXTUNE_BIN is BUILD/cli/ptxtune). */
static void roots(char *src, size_t ns, char *build, size_t nb)
{
    const char *t = getenv("PTXTUNE_TESTS_DIR"), *bin = getenv("PTXTUNE_BIN");
    cr_assert(t && bin, "PTXTUNE_TESTS_DIR / PTXTUNE_BIN not set (meson sets them)");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", t);
    snprintf(src, ns, "%s", dirname(tmp));
    snprintf(tmp, sizeof tmp, "%s", bin);
    snprintf(build, nb, "%s", dirname(dirname(tmp)));
}

/* The interpreter that has numpy into py; skips (or fails under
 * PTXTUNE_REQUIRE_TOOLKIT=1) when there is none. */
static void need_python(const char *src, char *py, size_t n)
{
    if (!getenv("PTXTUNE_FAKE_CUDA")) {
        cr_assert(!test_toolkit_required(),
                  "PTXTUNE_REQUIRE_TOOLKIT=1 but no fake driver (built without CUDA headers)");
        cr_skip_test("PTXTUNE_FAKE_CUDA not set (built without CUDA headers)");
    }
    static char venv[1100], out[4096], cmd[8192];
    snprintf(venv, sizeof venv, "%s/.venv-ci/bin/python", src);
    const char *env = getenv("PTXTUNE_PYTHON");
    const char *cands[] = {env ? env : "", venv, "python3", "/usr/bin/python3"};
    for (int i = 0; i < 4; i++) {
        if (!cands[i][0] || strlen(cands[i]) >= n)
            continue;
        snprintf(cmd, sizeof cmd, "'%s' -c 'import numpy, ctypes'", cands[i]);
        if (sh(cmd, out, sizeof out) == 0) {
            memcpy(py, cands[i], strlen(cands[i]) + 1);
            return;
        }
    }
    cr_assert(!test_toolkit_required(),
              "PTXTUNE_REQUIRE_TOOLKIT=1 but no python3 with numpy ($PTXTUNE_PYTHON, %s, "
              "python3, /usr/bin/python3)",
              venv);
    cr_skip_test("no python3 with numpy ($PTXTUNE_PYTHON, %s, python3, /usr/bin/python3): "
                 "the Python package is not tested",
                 venv);
}

static char out[1 << 17];

Test(python, numpy_on_the_emulator_matches_numpy, .timeout = 600)
{
    char src[1024], build[1024], py[1100], cmd[8192];
    roots(src, sizeof src, build, sizeof build);
    need_python(src, py, sizeof py);
    char d[] = "/tmp/ptxtune_py_XXXXXX";
    cr_assert(mkdtemp(d));
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PYTHONPATH='%s/python' PTXTUNE_LIB='%s/runtime/lib/libptxtune.so' "
             "PTXTUNE_CUDA_LIB='%s' PTXTUNE_BIN='%s' '%s' '%s/python/tests/test_numpy_emulator.py' '%s'",
             d, src, build, getenv("PTXTUNE_FAKE_CUDA"), getenv("PTXTUNE_BIN"), py, src, d);
    int rc = sh(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "checks passed"), "%s", out);
    cr_expect(strstr(out, "ok: softmax 40x256 matches numpy"), "%s", out);
    cr_expect(strstr(out, "ok: gemm 40x64x32 matches numpy"), "%s", out);
    /* the torch path, on a stand-in torch whose tensors are the fake's memory */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PYTHONPATH='%s/python' PTXTUNE_LIB='%s/runtime/lib/libptxtune.so' "
             "PTXTUNE_CUDA_LIB='%s' '%s' '%s/python/tests/test_torch_path.py' k.db \"$(cat fp.txt)\"",
             d, src, build, getenv("PTXTUNE_FAKE_CUDA"), py, src);
    rc = sh(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "ok: softmax on stand-in torch tensors matches numpy"), "%s", out);
    cr_expect(strstr(out, "checks passed"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    sh(cmd, out, sizeof out);
}

/* pip install ./python (no network: no build isolation, no dependencies),
 * then the package imports from where pip put it and finds the library
 * through PTXTUNE_LIB given as its folder. */
Test(python, pip_installs_the_package, .timeout = 300)
{
    char src[1024], build[1024], py[1100], cmd[8192];
    roots(src, sizeof src, build, sizeof build);
    need_python(src, py, sizeof py);
    /* (Debian's pip and setuptools refuse to be imported together: ask each) */
    /* (setuptools before 70.1 builds a wheel only with the wheel package) */
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import setuptools, sys, importlib.util as u; "
             "v = tuple(int(x) for x in setuptools.__version__.split(\".\")[:2]); "
             "sys.exit(0 if v >= (70, 1) or u.find_spec(\"wheel\") else \"no wheel package\")' && "
             "'%s' -m pip --version",
             py, py);
    if (sh(cmd, out, sizeof out) != 0) {
        cr_assert(!test_toolkit_required(),
                  "PTXTUNE_REQUIRE_TOOLKIT=1 but %s has no pip/setuptools/wheel: %s", py, out);
        cr_skip_test("%s has no pip, setuptools or wheel: %s", py, out);
    }
    char d[] = "/tmp/ptxtune_pip_XXXXXX";
    cr_assert(mkdtemp(d));
    /* a copy: pip's build writes into the source tree (build/, *.egg-info) */
    snprintf(cmd, sizeof cmd,
             "set -e; cp -r '%s/python' '%s/src'; cd '%s'; "
             "'%s' -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation "
             "--no-index --target '%s/site' ./src; "
             "cd /; PYTHONPATH='%s/site' PTXTUNE_LIB='%s/runtime/lib' PTXTUNE_CUDA_LIB='%s' '%s' -c "
             "'import ptxtune, ptxtune._lib as L; print(ptxtune.__file__); L.lib(); "
             "print(\"version\", ptxtune.__version__)'",
             src, d, d, py, d, d, build, getenv("PTXTUNE_FAKE_CUDA"), py);
    int rc = sh(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    char where[256];
    snprintf(where, sizeof where, "%s/site/ptxtune/__init__.py", d);
    cr_expect(strstr(out, where), "imported from elsewhere: %s", out);
    cr_expect(strstr(out, "version 0.1.0"), "%s", out);
    /* a library that is not there is named */
    snprintf(cmd, sizeof cmd,
             "cd /; PYTHONPATH='%s/site' PTXTUNE_LIB='%s/nope.so' '%s' -c 'import ptxtune._lib as L; L.lib()'",
             d, d, py);
    cr_expect_neq(sh(cmd, out, sizeof out), 0);
    cr_expect(strstr(out, "libptxtune not found") && strstr(out, "nope.so"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    sh(cmd, out, sizeof out);
}
