/* The ptxtune command: bad input gives one line naming the value and exit
 * code 2, never a crash; good input prints PTX. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

/* Runs ptxtune with args (a shell fragment); returns the exit code and the
 * stderr text. */
static int run(const char *args, char *err, size_t n, char *out, size_t on)
{
    return test_run_ptxtune(NULL, args, out, on, err, n);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(cli, bad_input_exits_2_with_one_line)
{
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"emit elementwise --expr \"\" --shape x=4", "empty expression"},
        {"emit elementwise --expr \"y = frob(x)\" --shape x=4", "unknown function 'frob' at column 5"},
        {"emit elementwise --expr \"y = x + w\" --shape x=4x8,w=5", "cannot broadcast"},
        {"emit elementwise --expr \"y = x\" --shape x=0x8", "bad dimension '0'"},
        {"emit elementwise --expr \"y = x\" --shape x=-2x8", "-2"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --arch sm_70", "unknown arch 'sm_70'"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --arch sm_99", "unknown arch 'sm_99'"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --dtype f12", "unknown dtype 'f12'"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --out-dtype e4m3 --arch sm_80", "e4m3 needs sm_89"},
        {"emit gemmx --expr \"y = x\"", "unknown op 'gemmx'"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --config vec=3", "vec=3"},
        /* a config value outside the parameter's domain (issue 9 item 18) */
        {"emit elementwise --expr \"y = softmax(x, -1)\" --shape x=8x256 --config online=2", "online=2"},
        {"emit elementwise --expr \"y = softmax(x, -1)\" --shape x=8x256 --config cache=-1", "cache=-1"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --config vec=2,vec=4", "'vec' given twice"},
        {"frobnicate", "unknown command 'frobnicate'"},
        {"compile --arch sm_80 /nonexistent.ptx", "cannot open '/nonexistent.ptx'"},
        {"compile --arch sm_70 -", "unknown arch 'sm_70'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[4096], out[65536];
        int rc = run(bad[i].args, err, sizeof err, out, sizeof out);
        cr_expect_eq(rc, 2, "'%s' exited %d (stderr: %s)", bad[i].args, rc, err);
        cr_expect(strstr(err, bad[i].msg), "'%s': stderr '%s' lacks '%s'", bad[i].args, err, bad[i].msg);
        cr_expect_eq(lines(err), 1, "'%s': one line, got '%s'", bad[i].args, err);
    }
}

Test(cli, emit_prints_ptx)
{
    char err[4096], out[1 << 16];
    int rc = run("emit elementwise --expr \"y = relu(x) * 2\" --shape x=8x32 --dtype f16 --arch sm_86",
                 err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, ".target sm_86"));
    cr_expect(strstr(out, ".visible .entry ew_flat_"));
    cr_expect(strstr(err, "grid "), "%s", err);
    rc = run("--version", err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0);
    cr_expect(strstr(out, "ptxtune "));
    rc = run("ops", err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0);
    cr_expect(strstr(out, "elementwise") && strstr(out, "wpr"), "%s", out);
}

/* Emission is deterministic across processes (the kernel's identity in the
 * database is the hash of this text). */
Test(cli, emit_is_identical_across_processes)
{
    static const char *const cmds[] = {
        "emit elementwise --expr \"y = softmax(x, -1)\" --shape x=64x512 --dtype bf16 --arch sm_80",
        "emit elementwise --expr \"y = gelu(x) * w\" --shape x=64x512,w=512 --dtype f16 --arch sm_90 --config unroll=2",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        static char a[1 << 20], b[1 << 20];
        char err[4096];
        cr_assert_eq(run(cmds[i], err, sizeof err, a, sizeof a), 0, "%s", err);
        /* a different environment size shifts the stack the emitter runs on */
        setenv("PTXTUNE_TEST_PADDING", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 1);
        cr_assert_eq(run(cmds[i], err, sizeof err, b, sizeof b), 0, "%s", err);
        unsetenv("PTXTUNE_TEST_PADDING");
        cr_expect_str_eq(a, b, "emit differs between two processes");
    }
}
