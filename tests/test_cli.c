/* The ptxtune command: bad input gives one line naming the value and exit
 * code 2, never a crash; good input prints PTX. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptx/target.h"
#include "search/problem.h"
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
        /* options and items (issue 9 consistency, item 18) */
        {"emit elementwise --expr \"y = x\" --shape x=4 --foo", "ptxtune: unknown option '--foo'\n"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --foo=3", "ptxtune: unknown option '--foo'\n"},
        {"emit elementwise --expr \"y = x\" --shape x=4 -q", "ptxtune: unknown option '-q'\n"},
        {"emit elementwise --expr \"y = x\" --shape", "ptxtune: option '--shape' needs a value\n"},
        {"compile --frob x.ptx", "ptxtune: unknown option '--frob'\n"},
        {"compile x.ptx --arch", "ptxtune: option '--arch' needs a value\n"},
        {"export --frob", "ptxtune: unknown option '--frob'\n"},
        {"import --frob x.json", "ptxtune: unknown option '--frob'\n"},
        {"regress --frob", "ptxtune: unknown option '--frob'\n"},
        {"db merge --frob", "ptxtune: unknown option '--frob'\n"},
        {"exec --frob x.ptx", "ptxtune: unknown option '--frob'\n"},
        {"tune gemm m=1 n=1 k=1 --frob", "ptxtune: unknown option '--frob'\n"},
        {"devices --frob", "ptxtune: unknown option '--frob'\n"},
        {"emit elementwise --expr \"y = x\" --shape x=4 'expr=y = x * 2'", "duplicate key 'expr'"},
        {"emit gemm m=16 n=16 k=16 --m 32", "duplicate key 'm'"},
        {"emit gemm m=16 n=16 k=16 mm=3", "unknown key 'mm' for gemm"},
        {"emit gemm m=16 n=16 k=16 frob", "unexpected argument 'frob' (problem items are KEY=VALUE)"},
        {"emit gemm m=16 n=16 k=x", "bad value 'x' for k (a positive integer)"},
        {"emit gemm m=16 n=16 k=16 alpha=1e400", "alpha=1e400: must be a finite number"},
        {"emit gemm --m 16 --n 16 --k 16 --alpha nan", "bad value 'nan' for --alpha (expected a finite number)"},
        {"emit gemm --m 16 --n 16 --k 16 --beta 1e400", "bad value '1e400' for --beta (expected a finite number)"},
        {"emit gemm --m 16 --n 16 --k 99999999999999999999", "bad value '99999999999999999999' for --k"},
        {"variants elementwise --expr \"y = x\" --shape x=4 --limit abc", "bad value 'abc' for --limit (expected an integer)"},
        {"variants elementwise --expr \"y = x\" --shape x=4 --limit 0", "bad value '0' for --limit (1..2147483647)"},
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --seed -1", "bad value '-1' for --seed (0..2147483647)"},
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --deadline x", "bad value 'x' for --deadline (expected a number)"},
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --deadline 1e400", "bad value '1e400' for --deadline (expected a finite number)"},
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --sweep --sample 0", "bad value '0' for --sample (1..1048576)"},
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --emu-threads 2x", "bad value '2x' for --emu-threads"},
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --budget-ms nan", "bad value 'nan' for --budget-ms"},
        /* a bad config value is bad input in run as in emit */
        {"run elementwise --expr \"y = softmax(x, -1)\" --shape x=4x127 --backend emu --config vec=4", "vec=4 does not divide the row length 127"},
        {"run gemm --m 64 --n 64 --k 64 --dtype f16 --backend emu --config splitk=8", "splitk=8"},
        {"run gemm m=64 n=64 k=64 dtype=f16 --backend emu --config splitk=8", "splitk=8"},
        {"run elementwise --expr \"y = softmax(x, -1)\" --shape x=8x256 --backend emu --config online=2", "online=2"},
        /* the fp8 output scale */
        {"run elementwise --expr \"y = x\" --shape x=4 --backend emu --out-scale 2", "out_scale applies to fp8 outputs"},
        {"emit gemm m=32 n=32 k=32 dtype=bf16 out_scale=2", "out_scale applies to fp8 outputs"},
        {"emit elementwise --expr \"y = x\" --shape x=4 --out-dtype e4m3 --arch sm_89 --out-scale inf", "out_scale=inf: must be a finite number"},
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

/* A problem file is read one line at a time: 200k lines take memory for
 * one line and one problem, not for the file (issue 9 item 17). */
Test(cli, problem_file_is_streamed)
{
    char path[] = "/tmp/ptxtune_problems_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    enum { N = 200000 };
    for (int i = 0; i < N; i++)
        fprintf(f, "%sgemm m=%d n=4096 k=4096 dtype=bf16 layout=nt name='row %d' # %d\n",
                i % 7 ? "" : "# comment\n\n", i + 1, i, i);
    fclose(f);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long before = ru.ru_maxrss;
    search_problem_reader *r;
    pt_err e = {0};
    cr_assert_eq(search_problem_reader_open(path, &r, &e), PT_OK, "%s", e.msg);
    int n = 0, wrong = 0;
    int rc;
    for (;;) { /* (Criterion reports every assertion: none in the loop) */
        search_problem p;
        bool got;
        if ((rc = search_problem_next(r, &p, &got, &e)) || !got)
            break;
        wrong += p.prob.m != n + 1;
        if (n == 12345) {
            cr_expect_str_eq(p.name, "row 12345");
            cr_expect_str_eq(p.key, "gemm m=12346 n=4096 k=4096 layout=nt dtype=bf16");
        }
        n++;
    }
    cr_expect_eq(rc, PT_OK, "%s", e.msg);
    cr_expect_eq(wrong, 0);
    search_problem_reader_close(r);
    getrusage(RUSAGE_SELF, &ru);
    cr_expect_eq(n, N);
    /* the file is ~14 MB; a whole-file parse held it and every problem */
    cr_expect_lt(ru.ru_maxrss - before, 4096, "reading grew the peak RSS by %ld KB",
                 ru.ru_maxrss - before);
    remove(path);

    /* what the reader refuses: one line naming the file and line */
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"gemm m=1 n=1 k=1\ngemm m=1\0 n=1 k=1\n", "f.txt:2: NUL byte at column 9"},
        {"# nothing\n\n", "f.txt: no problems"},
        {"gemm m=1 n=1 k=1\ngemm m=1 n=1 k=1 m=2\n", "f.txt:2: duplicate key 'm'"},
    };
    size_t lens[] = {35, 11, 38};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(search_problem_reader_mem(bad[i].text, lens[i], "f.txt", &r, &e), PT_OK);
        rc = PT_OK;
        bool got = true;
        pt_err_clear(&e);
        while (!rc && got) {
            search_problem p;
            rc = search_problem_next(r, &p, &got, &e);
        }
        search_problem_reader_close(r);
        cr_expect_neq(rc, PT_OK, "case %zu", i);
        cr_expect(strstr(e.msg, bad[i].msg), "case %zu: '%s' lacks '%s'", i, e.msg, bad[i].msg);
    }
    pt_err_clear(&e);
    cr_expect_eq(search_problem_reader_open("/tmp", &r, &e), PT_EIO);
    cr_expect(strstr(e.msg, "'/tmp': is a directory"), "%s", e.msg);
}

/* compile and exec refuse a NUL byte in the PTX file the same way, naming
 * its offset; a directory given as a file says so (issue 9 item 18). */
Test(cli, nul_bytes_and_directories_are_named)
{
    char dir[] = "/tmp/ptxtune_nul_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256], args[1024], err[4096], out[65536];
    snprintf(path, sizeof path, "%s/k.ptx", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite(".version 7.0\n.target sm_80\n.address_size 64\n\0junk\n", 1, 50, f);
    fclose(f);
    const char *fmts[] = {"compile --arch sm_80 %s", "exec %s --grid 1 --block 1"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, fmts[i], path);
        cr_expect_eq(run(args, err, sizeof err, out, sizeof out), 2, "'%s': %s", args, err);
        char want[400];
        snprintf(want, sizeof want, "ptxtune: %s: NUL byte at offset 44 (not a text file)\n", path);
        cr_expect_str_eq(err, want, "'%s'", args);
    }
    const char *dfmts[] = {"compile --arch sm_80 %s", "exec %s --grid 1 --block 1",
                           "tune --problems %s --backend emu --db %s/t.db", "import --db %s/t.db %s"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, dfmts[i], dir, dir);
        cr_expect_eq(run(args, err, sizeof err, out, sizeof out), 2, "'%s': %s", args, err);
        cr_expect(strstr(err, "is a directory"), "'%s': %s", args, err);
        cr_expect_eq(lines(err), 1, "'%s': %s", args, err);
    }
    remove(path);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    cr_expect_eq(system(rm), 0);
}

/* The problem as KEY=VALUE items (as tune and problem files spell it) is
 * the same problem as the flags, in emit, variants and run; the two mix
 * (issue 9 consistency). */
Test(cli, items_and_flags_are_one_problem)
{
    static const struct {
        const char *items, *flags;
    } same[] = {
        {"emit gemm m=16 n=4096 k=4096 dtype=bf16 layout=nt",
         "emit gemm --m 16 --n 4096 --k 4096 --dtype bf16 --layout nt"},
        {"emit gemm m=64 k=32 --n 48 dtype=f16 'epilogue=relu(acc * alpha + bias[n])' --alpha 0.5",
         "emit gemm --m 64 --n 48 --k 32 --dtype f16 --epilogue 'relu(acc * alpha + bias[n])' --alpha 0.5"},
        {"emit elementwise 'expr=y = softmax(x, -1)' shape=x=16x4096 dtype=bf16 --config vec=4",
         "emit elementwise --expr 'y = softmax(x, -1)' --shape x=16x4096 --dtype bf16 --config vec=4"},
        {"emit elementwise expr=\"y = x * w\" --shape x=8x32,w=32 out_dtype=f16",
         "emit elementwise --expr 'y = x * w' --shape x=8x32,w=32 --out-dtype f16"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        static char a[1 << 20], b[1 << 20];
        char ea[4096], eb[4096];
        cr_assert_eq(run(same[i].items, ea, sizeof ea, a, sizeof a), 0, "'%s': %s", same[i].items, ea);
        cr_assert_eq(run(same[i].flags, eb, sizeof eb, b, sizeof b), 0, "'%s': %s", same[i].flags, eb);
        cr_expect_str_eq(a, b, "'%s' and '%s' emit different PTX", same[i].items, same[i].flags);
        cr_expect_str_eq(ea, eb);
    }
    char err[4096], out[65536];
    int rc = run("run gemm m=16 n=64 k=32 dtype=bf16 layout=nt --backend emu --check", err,
                 sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0, "%s%s", out, err);
    cr_expect(strstr(out, "check    ok"), "%s", out);
    rc = run("run elementwise 'expr=y = x * 2' shape=x=4x32 --backend emu --check --sweep --limit 2",
             err, sizeof err, out, sizeof out);
    cr_expect_eq(rc, 0, "%s%s", out, err);
    cr_expect(strstr(out, "2 candidates"), "%s", out);
    rc = run("variants elementwise 'expr=y = x' shape=x=4 --limit 1 --help", err, sizeof err, out,
             sizeof out);
    cr_expect_eq(rc, 0);
    cr_expect(strstr(out, "KEY=VALUE"), "%s", out);
}

/* 'ptxtune ops' lists every key of every op's schema with its type and
 * default (issue 10 item 4), and --json says the same as data. */
Test(cli, ops_lists_every_schema_key)
{
    static char out[1 << 16];
    char err[4096];
    cr_assert_eq(run("ops", err, sizeof err, out, sizeof out), 0, "%s", err);
    const pt_op *const *ops;
    int nops = pt_op_list(&ops);
    int nkeys = 0;
    for (int i = 0; i < nops; i++) {
        cr_assert(ops[i]->schema, "op %s has no schema", ops[i]->name);
        char head[128];
        snprintf(head, sizeof head, "%s: ", ops[i]->name);
        const char *sec = strstr(out, head);
        cr_assert(sec, "ops lacks '%s'", head);
        for (int k = 0; k < ops[i]->schema->nkeys; k++, nkeys++) {
            const pt_key *key = &ops[i]->schema->keys[k];
            char line[128];
            snprintf(line, sizeof line, "\n    %-11s %s", key->name, pt_key_type_name(key->type));
            const char *at = strstr(sec, line);
            cr_expect(at, "ops: %s has no line for key %s", ops[i]->name, key->name);
            const char *eol = at ? strchr(at + 1, '\n') : NULL;
            char row[512];
            snprintf(row, sizeof row, "%.*s", at && eol ? (int)(eol - at) : 0, at ? at : "");
            const char *def = key->flags & PT_KEY_REQUIRED ? "required" : key->def ? key->def : "-";
            cr_expect(strstr(row, def) && strstr(row, key->doc), "ops row '%s' lacks '%s' or its doc",
                      row, def);
        }
    }
    cr_expect_gt(nkeys, 20);
    /* ops --json: docs/json.md's envelope (see ops_and_variants_json_is_the_envelope) */
    cr_assert_eq(run("ops --json", err, sizeof err, out, sizeof out), 0, "%s", err);
    cr_expect(strstr(out, "\"format\": \"ptxtune-ops\""), "%s", out);
    cr_expect_eq(run("ops --frob", err, sizeof err, out, sizeof out), 2);
    cr_expect(strstr(err, "unknown option '--frob'"), "%s", err);
}

/* The README's problem-key table is 'ptxtune ops --markdown', byte for
 * byte, so the documentation cannot drift from the schemas. */
Test(cli, readme_key_table_is_ops_markdown)
{
    static char out[1 << 16], readme[1 << 18];
    char err[4096];
    cr_assert_eq(run("ops --markdown", err, sizeof err, out, sizeof out), 0, "%s", err);
    const char *tdir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tdir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/../README.md", tdir);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    size_t n = fread(readme, 1, sizeof readme - 1, f);
    readme[n] = '\0';
    fclose(f);
    static const char begin[] = "<!-- problem keys: generated by 'ptxtune ops --markdown' -->\n",
                      end[] = "<!-- end of problem keys -->";
    const char *b = strstr(readme, begin), *e = b ? strstr(b, end) : NULL;
    cr_assert(b && e, "README.md lacks the generated problem-key table markers");
    b += strlen(begin);
    cr_expect(strlen(out) == (size_t)(e - b) && strncmp(out, b, (size_t)(e - b)) == 0,
              "README.md's key table differs from 'ptxtune ops --markdown' (regenerate it):\n%s",
              out);
}

/* Every key of every op is a flag of emit, run and tune alike (derived
 * from the schema; tune took only a dozen of them before), and a bad
 * value is one line naming the key, exit 2. */
Test(cli, every_schema_key_is_a_flag_of_every_problem_command)
{
    const pt_op *const *ops;
    int nops = pt_op_list(&ops);
    static const char *const cmds[] = {"emit", "run", "tune"};
    int checked = 0;
    for (int i = 0; i < nops; i++)
        for (int k = 0; k < ops[i]->schema->nkeys; k++) {
            const pt_key *key = &ops[i]->schema->keys[k];
            const char *bad = key->type == PT_KEY_INT ? "x1" : key->type == PT_KEY_REAL ? "nan"
                              : key->type == PT_KEY_BOOL ? "2" : key->type == PT_KEY_ENUM ? "zz"
                              : key->type == PT_KEY_DTYPE ? "f12" : NULL;
            if (!bad)
                continue; /* expressions and shapes are judged by the op */
            char flag[64];
            snprintf(flag, sizeof flag, "%s", key->name);
            for (char *c = flag; *c; c++)
                *c = *c == '_' ? '-' : *c;
            for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
                char args[256], err[4096], out[4096];
                snprintf(args, sizeof args, "%s %s --%s=%s --backend mock%s", cmds[c],
                         ops[i]->name, flag, bad, c == 2 ? " --db /nonexistent/x.db" : "");
                int rc = run(args, err, sizeof err, out, sizeof out);
                cr_expect_eq(rc, 2, "'%s' exited %d: %s", args, rc, err);
                cr_expect_eq(lines(err), 1, "'%s': %s", args, err);
                cr_expect(!strstr(err, "unknown option"), "'%s': %s", args, err);
                cr_expect(strstr(err, bad) && (strstr(err, key->name) || strstr(err, flag) ||
                                               key->type == PT_KEY_DTYPE),
                          "'%s': '%s' names neither the value nor the key", args, err);
                checked++;
            }
        }
    cr_expect_gt(checked, 40);
    /* a bool flag alone is 1; =0 is given and default */
    char e1[4096], e2[4096];
    static char o1[1 << 20], o2[1 << 20];
    cr_assert_eq(run("emit gemm --m 16 --n 16 --k 16 --d-colmajor", e1, sizeof e1, o1, sizeof o1), 0,
                 "%s", e1);
    cr_assert_eq(run("emit gemm m=16 n=16 k=16 d_colmajor=1", e2, sizeof e2, o2, sizeof o2), 0,
                 "%s", e2);
    cr_expect_str_eq(o1, o2);
    cr_assert_eq(run("emit gemm --m 16 --n 16 --k 16 --d-colmajor=0", e1, sizeof e1, o1, sizeof o1),
                 0, "%s", e1);
    cr_assert_eq(run("emit gemm m=16 n=16 k=16", e2, sizeof e2, o2, sizeof o2), 0, "%s", e2);
    cr_expect_str_eq(o1, o2);
    /* --help lists the op's flags from its schema */
    cr_assert_eq(run("emit gemm --help", e1, sizeof e1, o1, sizeof o1), 0);
    cr_expect(strstr(o1, "--scale-a X") && strstr(o1, "[required]") && !strstr(o1, "--expr EXPR"),
              "%s", o1);
    cr_assert_eq(run("tune --help", e1, sizeof e1, o1, sizeof o1), 0);
    cr_expect(strstr(o1, "--d-colmajor[=0|1]") && strstr(o1, "--expr EXPR"), "%s", o1);
}

/* The README's architecture line names the targets of ptx/target.h's one
 * table: the runnable ones in its first group, the assemble-only ones in
 * the parenthesis, nothing else. */
#define RUN_NAME(A, name, sm, a, asm_only, ptx, smem) RUN_##asm_only(name)
#define RUN_0(n) " " n
#define RUN_1(n)
#define ASM_NAME(A, name, sm, a, asm_only, ptx, smem) ASM_##asm_only(name)
#define ASM_0(n)
#define ASM_1(n) n "\0"
Test(cli, readme_architectures_are_the_target_table)
{
    static char readme[1 << 18];
    const char *tdir = getenv("PTXTUNE_TESTS_DIR");
    cr_assert(tdir, "PTXTUNE_TESTS_DIR not set (meson sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/../README.md", tdir);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    size_t n = fread(readme, 1, sizeof readme - 1, f);
    readme[n] = '\0';
    fclose(f);
    const char *b = strstr(readme, "Architectures: `");
    cr_assert(b, "README.md has no 'Architectures: `...`' line");
    b += strlen("Architectures: `");
    const char *e = strchr(b, '`'), *end = strstr(b, "assemble-only");
    cr_assert(e && end && e < end, "the architecture line ends in '... assemble-only)'");
    static const char runnable[] = PT_TARGET_ROWS(RUN_NAME, 0);
    cr_expect(strlen(runnable + 1) == (size_t)(e - b) && strncmp(b, runnable + 1, (size_t)(e - b)) == 0,
              "README.md lists '%.*s' as the runnable targets; ptx/target.h has '%s'", (int)(e - b),
              b, runnable + 1);
    int named = 0, want = 0;
    for (const char *p = e + 1; (p = strstr(p, "`sm_")) && p < end; p++)
        named++;
    static const char asm_only[] = PT_TARGET_ROWS(ASM_NAME, 0);
    for (const char *a = asm_only; *a; a += strlen(a) + 1, want++) {
        char tick[32];
        snprintf(tick, sizeof tick, "`%s`", a);
        const char *hit = strstr(e, tick);
        cr_expect(hit && hit < end, "README.md's architecture line lacks the assemble-only %s", a);
    }
    cr_expect_eq(named, want, "README.md names %d assemble-only targets; ptx/target.h has %d", named,
                 want);
}

/* --json on ops and variants is the one envelope of docs/json.md:
 * {"format": "ptxtune-<command>", "version": 1, "rows": [...], "summary"}. */
static json_t *envelope(const char *args, const char *format, int want_rc)
{
    static char out[1 << 18];
    char err[4096];
    int rc = run(args, err, sizeof err, out, sizeof out);
    if (rc == 3)
        return NULL; /* no toolkit */
    cr_assert_eq(rc, want_rc, "'%s' exited %d: %s", args, rc, err);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    cr_assert(o, "'%s' is not JSON (%s): %.300s", args, je.text, out);
    cr_expect_str_eq(json_string_value(json_object_get(o, "format")), format);
    cr_expect_eq(json_integer_value(json_object_get(o, "version")), 1);
    cr_assert(json_is_array(json_object_get(o, "rows")), "%s: no rows", args);
    return o;
}

Test(cli, ops_and_variants_json_is_the_envelope)
{
    json_t *o = envelope("ops --json", "ptxtune-ops", 0);
    cr_assert(o);
    const pt_op *const *ops;
    int n = pt_op_list(&ops);
    json_t *rows = json_object_get(o, "rows");
    cr_assert_eq((int)json_array_size(rows), n);
    bool layout = false, m = false;
    for (int i = 0; i < n; i++) {
        json_t *r = json_array_get(rows, (size_t)i);
        cr_expect_str_eq(json_string_value(json_object_get(r, "op")), ops[i]->name);
        cr_expect_str_eq(json_string_value(json_object_get(r, "summary")), ops[i]->summary);
        json_t *keys = json_object_get(r, "keys");
        cr_expect_eq((int)json_array_size(keys), ops[i]->schema ? ops[i]->schema->nkeys : 0);
        size_t k;
        json_t *key;
        json_array_foreach(keys, k, key) {
            const char *name = json_string_value(json_object_get(key, "key"));
            if (strcmp(ops[i]->name, "gemm") == 0 && strcmp(name, "layout") == 0) {
                json_t *v = json_object_get(key, "values");
                layout = json_array_size(v) == 4 &&
                         strcmp(json_string_value(json_array_get(v, 2)), "tn") == 0;
            }
            if (strcmp(ops[i]->name, "gemm") == 0 && strcmp(name, "m") == 0)
                m = json_integer_value(json_object_get(key, "min")) == 1 &&
                    json_is_true(json_object_get(key, "required"));
        }
    }
    cr_expect(layout, "gemm's layout key lacks its 4 values");
    cr_expect(m, "gemm's m key is not int >= 1, required");
    json_decref(o);

    o = envelope("variants elementwise --expr 'y = x' --shape x=64 --limit 2 --arch sm_80 --json",
                 "ptxtune-variants", 0);
    if (!o)
        cr_skip_test("no CUDA toolkit");
    rows = json_object_get(o, "rows");
    cr_assert_eq(json_array_size(rows), 2);
    json_t *r = json_array_get(rows, 0);
    cr_expect_str_eq(json_string_value(json_object_get(r, "arch")), "sm_80");
    cr_expect(json_is_string(json_object_get(r, "config")));
    cr_expect_gt(json_integer_value(json_object_get(r, "registers")), 0);
    cr_expect(json_is_real(json_object_get(r, "compile_s")));
    cr_expect(json_is_null(json_object_get(r, "error")));
    json_t *sum = json_object_get(o, "summary");
    cr_expect_eq(json_integer_value(json_object_get(sum, "variants")), 2);
    cr_expect_eq(json_integer_value(json_object_get(sum, "failed")), 0);
    json_decref(o);
}

/* --compiler names the compiler on compile and variants; --backend names
 * the device (run, tune, exec) and is refused there. */
Test(cli, compiler_is_spelled_compiler)
{
    static char out[1 << 16];
    char err[4096];
    const char *v = "variants elementwise --expr 'y = x' --shape x=64 --limit 1 --arch sm_80";
    char args[512];
    snprintf(args, sizeof args, "%s --compiler frob", v);
    int rc = run(args, err, sizeof err, out, sizeof out);
    if (rc == 3)
        cr_skip_test("no CUDA toolkit: %s", err);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(strstr(err, "'frob'"), "%s", err);
    snprintf(args, sizeof args, "%s --backend nvjitlink", v);
    cr_expect_eq(run(args, err, sizeof err, out, sizeof out), 2);
    cr_expect(strstr(err, "--backend names a device"), "%s", err);
    cr_expect_eq(run("compile --backend nvjitlink x.ptx --arch sm_80", err, sizeof err, out,
                     sizeof out), 2);
    cr_expect(strstr(err, "--backend names a device"), "%s", err);
    snprintf(args, sizeof args, "%s --compiler ptxas", v);
    rc = run(args, err, sizeof err, out, sizeof out);
    cr_expect(rc == 0 || rc == 3, "%s", err); /* 3: this toolkit lacks ptxas */
    cr_assert_eq(run("variants --help", err, sizeof err, out, sizeof out), 0);
    cr_expect(strstr(out, "[--compiler nvjitlink|ptxas]"), "%s", out);
    cr_assert_eq(run("compile --help", err, sizeof err, out, sizeof out), 0);
    cr_expect(strstr(out, "[--compiler nvjitlink|ptxas]"), "%s", out);
}
