/* Generator commands: emit, compile, variants, ops. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ptx/compile.h"
#include "tuner/backend.h"
#include "tuner/driver.h"

static int ops_table(void);


static const char emit_usage[] =
    "usage: ptxtune emit OP [KEY=VALUE ...] [--KEY VALUE ...] [--arch sm_80] [--config k=v,...]\n"
    "Prints the PTX of one variant on stdout and its launch geometry on stderr.\n"
    "The default config is the op's own choice; 'ptxtune ops' lists the parameters.\n";

int cmd_emit(int argc, char **argv)
{
    cli_problem cp;
    cli_parse_problem(argc, argv, &cp, emit_usage, NULL);
    pt_target t;
    pt_err e = {0};
    if (pt_target_parse(cp.arch, &t, &e))
        cli_die(2, "%s", e.msg);
    /* emit compiles nothing: the version cap from the probe's cache, so
     * start-up neither loads nvJitLink nor forks ptxas (issue 14) */
    int cmax = pt_compiler_probe_max_ptx();
    if (!cmax) {
        pt_compiler *comp = cli_open_compiler(NULL, false);
        cmax = comp ? pt_compiler_max_ptx(comp) : 0;
        pt_compiler_close(comp);
    }
    int max_ptx = pt_toolchain_max_ptx(cmax);
    pt_arena *a = pt_arena_new();
    pt_prepared *pp;
    if (cp.op->prepare(a, &cp.prob, &t, &pp, &e))
        cli_die(2, "%s", e.msg);
    pt_config cfg;
    cli_make_config(&cp, pp, &t, &cfg);
    ptx_module *m;
    pt_launch l;
    if (pt_op_build(cp.op, pp, &t, max_ptx, &cfg, &m, &l, &e))
        cli_die(2, "%s", e.msg);
    char *text = ptx_print(m);
    if (!text)
        cli_die(1, "out of memory printing the kernel");
    fputs(text, stdout);
    char cs[256];
    char per[48] = ""; /* a persistent grid: x is capped at launch by the device's SMs */
    if (l.grid_per_sm)
        snprintf(per, sizeof per, " (x at most %u x SMs at launch)", l.grid_per_sm);
    fprintf(stderr, "config %s grid %u,%u,%u%s block %u,%u,%u smem %zu align %d\n",
            pt_config_str(&cfg, cs, sizeof cs), l.grid[0], l.grid[1], l.grid[2], per, l.block[0],
            l.block[1], l.block[2], l.smem, l.align);
    free(text);
    ptx_module_free(m);
    pt_arena_free(a);
    cli_problem_free(&cp);
    return 0;
}

static const char compile_usage[] =
    "usage: ptxtune compile FILE.ptx|- --arch sm_XX [--json] [--compiler nvjitlink|ptxas]\n"
    "Assembles PTX and prints the resource report (registers, spills, stack, shared,\n"
    "constant, barriers, compile time, ptxas codes). --backend names a device (run,\n"
    "tune, exec), never the compiler.\n";

static const struct option compile_opts[] = {
    {"arch", required_argument, 0, 'a'}, {"json", no_argument, 0, 'j'},
    {"backend", required_argument, 0, 'b'}, {"compiler", required_argument, 0, 'c'},
    {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
};

int cmd_compile(int argc, char **argv)
{
    const char *arch = NULL, *backend = NULL;
    bool json = false;
    optind = 1;
    opterr = 0; /* one line of our own on bad options */
    int c;
    while ((c = getopt_long(argc, argv, ":", compile_opts, NULL)) != -1) {
        switch (c) {
        case 'a': arch = optarg; break;
        case 'j': json = true; break;
        case 'b':
            cli_die(2, "--backend %s: --backend names a device (run, tune, exec); the compiler "
                       "is --compiler",
                    optarg);
        case 'c': backend = optarg; break;
        case 'h': fputs(compile_usage, stdout); return 0;
        default: cli_opt_error(c, argv);
        }
    }
    if (optind != argc - 1)
        cli_die(2, "expected one PTX file (or - for stdin)");
    if (!arch)
        cli_die(2, "missing --arch");
    pt_target t;
    pt_err e = {0};
    if (pt_target_parse(arch, &t, &e))
        cli_die(2, "%s", e.msg);
    char *text = cli_read_file(argv[optind], NULL);
    pt_compiler *comp = cli_open_compiler(backend, true);
    pt_resource r;
    int rc = pt_compile(comp, text, &t, NULL, NULL, &r, &e);
    pt_compiler_close(comp);
    free(text);
    if (rc)
        cli_die(1, "%s", e.msg);
    if (json) {
        pt_buf b;
        pt_buf_init(&b);
        pt_resource_json(&r, &b);
        puts(b.s);
        pt_buf_free(&b);
    } else {
        printf("backend      %s\nregisters    %d\nspill stores %d bytes\nspill loads  %d bytes\n"
               "stack frame  %d bytes\nshared       %d bytes\nconstant     %d bytes\n"
               "barriers     %d\ncompile time %.2f ms\n",
               r.backend, r.registers, r.spill_stores, r.spill_loads, r.stack_frame,
               r.shared_bytes, r.const_bytes, r.barriers, r.compile_ms);
        printf("codes       ");
        for (int i = 0; i < r.ncodes; i++)
            printf(" %s", r.codes[i]);
        printf("%s\nwarnings     %d\n", r.ncodes ? "" : " none", r.nwarnings);
    }
    return 0;
}

static const char variants_usage[] =
    "usage: ptxtune variants OP [KEY=VALUE ...] [--KEY VALUE ...] [--arch sm_XX|all] [--limit N]\n"
    "                           [--compiler nvjitlink|ptxas] [--json]\n"
    "Emits and compiles every config of the op's parameter space for each\n"
    "architecture (all =" PT_TARGET_ALL_NAMES ") and prints one row per variant:\n"
    "registers, spills, shared memory, emit time and compile time.\n"
    "--json prints them as one object (docs/json.md, format ptxtune-variants).\n"
    "(--backend nvjitlink|ptxas, the old spelling of --compiler, is still read.)\n";

enum { VO_COMPILER = CLI_OPT_OWN };

static void variants_opt(void *ctx, int id, const char *arg)
{
    if (id == VO_COMPILER)
        *(const char **)ctx = arg;
}

int cmd_variants(int argc, char **argv)
{
    static const struct option own[] = {{"compiler", required_argument, 0, VO_COMPILER},
                                        {0, 0, 0, 0}};
    const char *compiler = NULL;
    cli_extra x = {own, variants_opt, &compiler, variants_usage};
    cli_problem cp;
    cli_parse_problem(argc, argv, &cp, variants_usage, &x);
    if (cp.backend)
        cli_die(2, "--backend %s: --backend names a device (run, tune, exec); the compiler is "
                   "--compiler",
                cp.backend);
    cp.backend = compiler;
    pt_err e = {0};
    static const char *const archs_all[] = {
#define ARCH(name) name,
        PT_TARGET_ALL_MAP(ARCH)
#undef ARCH
    };
    const char *const *archs = archs_all;
    int narchs = (int)(sizeof archs_all / sizeof archs_all[0]);
    if (strcmp(cp.arch, "all") != 0) {
        archs = (const char *const *)&cp.arch;
        narchs = 1;
    }
    pt_compiler *comp = cli_open_compiler(cp.backend, true);
    int max_ptx = pt_toolchain_max_ptx(pt_compiler_max_ptx(comp));
    int total = 0, failed = 0, spilled = 0;
    json_t *env = cp.json ? cli_jenv("variants") : NULL;
    if (!env)
        printf("%-7s %-52s %5s %7s %6s %9s %10s\n", "arch", "config", "regs", "spill", "smem",
               "emit_us", "compile_ms");
    for (int ai = 0; ai < narchs; ai++) {
        pt_target t;
        if (pt_target_parse(archs[ai], &t, &e))
            cli_die(2, "%s", e.msg);
        pt_arena *a = pt_arena_new();
        pt_prepared *pp;
        if (cp.op->prepare(a, &cp.prob, &t, &pp, &e))
            cli_die(2, "%s", e.msg);
        pt_space s;
        cp.op->space(pp, &t, &s);
        int64_t n = pt_space_size(&s);
        for (int64_t i = 0; i < n && (!cp.limit || total < cp.limit); i++) {
            pt_config cfg;
            pt_space_config(&s, i, &cfg);
            pt_err ce = {0};
            if (cp.op->check(pp, &t, &cfg, &ce))
                continue;
            ptx_module *m;
            pt_launch l;
            double t0 = cli_now();
            int rc = pt_op_build(cp.op, pp, &t, max_ptx, &cfg, &m, &l, &ce);
            char *text = rc ? NULL : ptx_print(m);
            if (!rc && !text)
                rc = pt_errf(&ce, PT_ENOMEM, "out of memory printing the kernel");
            double emit_us = (cli_now() - t0) * 1e6;
            char cs[256];
            pt_config_str(&cfg, cs, sizeof cs);
            total++;
            pt_resource r;
            if (!rc)
                rc = pt_compile(comp, text, &t, NULL, NULL, &r, &ce);
            if (rc)
                failed++;
            else
                spilled += r.spill_stores + r.spill_loads > 0;
            if (env && rc)
                cli_jrow(env, json_pack("{s:s, s:s, s:n, s:n, s:n, s:n, s:o, s:n, s:s}", "arch",
                                    archs[ai], "config", cs, "registers", "spill_stores",
                                    "spill_loads", "shared_bytes", "emit_s", cli_jnum(emit_us * 1e-6),
                                    "compile_s", "error", ce.msg));
            else if (env)
                cli_jrow(env, json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:o, s:n}", "arch",
                                    archs[ai], "config", cs, "registers", r.registers,
                                    "spill_stores", r.spill_stores, "spill_loads", r.spill_loads,
                                    "shared_bytes", r.shared_bytes, "emit_s", cli_jnum(emit_us * 1e-6),
                                    "compile_s", cli_jnum(r.compile_ms * 1e-3), "error"));
            else if (rc)
                printf("%-7s %-52s FAILED: %s\n", archs[ai], cs, ce.msg);
            else
                printf("%-7s %-52s %5d %3d/%-3d %6d %9.1f %10.2f\n", archs[ai], cs, r.registers,
                       r.spill_stores, r.spill_loads, r.shared_bytes, emit_us, r.compile_ms);
            free(text);
            if (m && !rc)
                ptx_module_free(m);
        }
        pt_arena_free(a);
    }
    pt_compiler_close(comp);
    if (env) {
        if (json_object_set_new(env, "summary",
                                json_pack("{s:i, s:i, s:i}", "variants", total, "failed", failed,
                                          "spilled", spilled)))
            cli_die(1, "out of memory");
        cli_jprint(env);
    } else {
        printf("%d variants, %d failed, %d with spills\n", total, failed, spilled);
    }
    cli_problem_free(&cp);
    return failed || spilled ? 1 : 0;
}

static const char ops_usage[] =
    "usage: ptxtune ops [--markdown | --json]\n"
    "Lists every op: its problem keys (KEY=VALUE in problem files and on the command line,\n"
    "--KEY as flags; type, default, meaning) and its parameter space for example problems.\n"
    "--markdown prints the keys as the README's table; --json as one object\n"
    "(docs/json.md, format ptxtune-ops), one row per op with its keys.\n";

/* A key's type as ops shows it: "enum nn|nt|tn|tt", "int >= 1", "real". */
static void key_type(const pt_key *k, char *buf, size_t n)
{
    switch (k->type) {
    case PT_KEY_ENUM:
        snprintf(buf, n, "enum %s", k->values);
        for (char *c = buf + 5; *c; c++)
            if (*c == ' ')
                *c = '|';
        break;
    case PT_KEY_INT: snprintf(buf, n, "int >= %lld", (long long)k->min); break;
    case PT_KEY_REAL:
        if (k->flags & PT_KEY_MIN)
            snprintf(buf, n, "real >= %g", k->min);
        else
            snprintf(buf, n, "real");
        break;
    default: snprintf(buf, n, "%s", pt_key_type_name(k->type)); break;
    }
}

/* "required", the default value, "=dtype" (the value of dtype), or "-". */
static const char *key_default(const pt_key *k)
{
    return k->flags & PT_KEY_REQUIRED ? "required" : k->def ? k->def : "-";
}

static void ops_markdown(void)
{
    const pt_op *const *ops;
    int n = pt_op_list(&ops);
    puts("| op | key | type | default | meaning |");
    puts("|---|---|---|---|---|");
    for (int i = 0; i < n; i++)
        for (int k = 0; ops[i]->schema && k < ops[i]->schema->nkeys; k++) {
            const pt_key *key = &ops[i]->schema->keys[k];
            char type[160];
            key_type(key, type, sizeof type);
            printf("| %s | `%s` | ", ops[i]->name, key->name);
            for (const char *c = type; *c; c++) /* a table cell holds no bare '|' */
                printf(*c == '|' ? "\\|" : "%c", *c);
            printf(" | %s | ", key_default(key));
            for (const char *c = key->doc; *c; c++)
                printf(*c == '|' ? "\\|" : "%c", *c);
            puts(" |");
        }
}

static void ops_json(void)
{
    const pt_op *const *ops;
    int n = pt_op_list(&ops);
    json_t *env = cli_jenv("ops");
    for (int i = 0; i < n; i++) {
        json_t *keys = json_array();
        for (int k = 0; keys && ops[i]->schema && k < ops[i]->schema->nkeys; k++) {
            const pt_key *key = &ops[i]->schema->keys[k];
            json_t *o = json_pack("{s:s, s:s}", "key", key->name, "type",
                                  pt_key_type_name(key->type));
            if (o && key->type == PT_KEY_ENUM) {
                json_t *vals = json_array();
                for (const char *v = key->values; vals && *v;) {
                    size_t w = strcspn(v, " ");
                    if (json_array_append_new(vals, json_stringn(v, w)))
                        cli_die(1, "out of memory");
                    v += w;
                    v += strspn(v, " ");
                }
                if (json_object_set_new(o, "values", vals))
                    cli_die(1, "out of memory");
            }
            if (o && (key->type == PT_KEY_INT || (key->flags & PT_KEY_MIN)) &&
                json_object_set_new(o, "min", key->type == PT_KEY_INT
                                                    ? json_integer((json_int_t)key->min)
                                                    : cli_jnum(key->min)))
                cli_die(1, "out of memory");
            if (!o || json_object_set_new(o, "required",
                                          json_boolean(key->flags & PT_KEY_REQUIRED)) ||
                json_object_set_new(o, "default", key->def ? json_string(key->def) : json_null()) ||
                json_object_set_new(o, "size", json_boolean(key->flags & PT_KEY_SHAPE)) ||
                json_object_set_new(o, "doc", json_string(key->doc)) ||
                json_array_append_new(keys, o))
                cli_die(1, "out of memory");
        }
        cli_jrow(env, keys ? json_pack("{s:s, s:s, s:o}", "op", ops[i]->name, "summary",
                                   ops[i]->summary, "keys", keys)
                       : NULL);
    }
    cli_jprint(env);
}

static const struct option ops_opts[] = {
    {"markdown", no_argument, 0, 'm'}, {"json", no_argument, 0, 'j'},
    {"help", no_argument, 0, 'h'},     {0, 0, 0, 0},
};

int cmd_ops(int argc, char **argv)
{
    bool md = false, json = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", ops_opts, NULL)) != -1) {
        switch (c) {
        case 'm': md = true; break;
        case 'j': json = true; break;
        case 'h': fputs(ops_usage, stdout); return 0;
        default: cli_opt_error(c, argv);
        }
    }
    if (optind < argc)
        cli_die(2, "unexpected argument '%s' (ptxtune ops [--markdown | --json])", argv[optind]);
    if (md && json)
        cli_die(2, "give --markdown or --json, not both");
    if (md)
        ops_markdown();
    else if (json)
        ops_json();
    else
        return ops_table();
    return 0;
}

static int ops_table(void)
{
    const pt_op *const *ops;
    int n = pt_op_list(&ops);
    for (int i = 0; i < n; i++) {
        printf("%s: %s\n", ops[i]->name, ops[i]->summary);
        if (ops[i]->schema) {
            printf("  problem keys (KEY=VALUE or --KEY; name=LABEL names any problem):\n");
            printf("    %-11s %-20s %-9s %s\n", "key", "type", "default", "meaning");
            for (int k = 0; k < ops[i]->schema->nkeys; k++) {
                const pt_key *key = &ops[i]->schema->keys[k];
                char type[160];
                key_type(key, type, sizeof type);
                printf("    %-11s %-20s %-9s %s\n", key->name, type, key_default(key), key->doc);
            }
        }
        for (int k = 0; k < ops[i]->nexamples; k++) {
            const pt_problem *pr = &ops[i]->examples[k];
            pt_arena *a = pt_arena_new();
            pt_prepared *pp;
            pt_err e = {0};
            pt_target t = {80, false, false};
            if (ops[i]->prepare(a, pr, &t, &pp, &e) == 0) {
                pt_space s;
                ops[i]->space(pp, &t, &s);
                printf("  parameters for e.g. %s (%s):\n", pr->expr ? pr->expr : pr->op,
                       pt_dtype_get(pr->dtype)->name);
                for (int p = 0; p < s.nparams; p++) {
                    printf("    %-10s", s.p[p].name);
                    for (int v = 0; v < s.p[p].nvalues; v++)
                        printf("%s%lld", v ? "," : " ", (long long)s.p[p].values[v]);
                    printf("   %s\n", s.p[p].doc);
                }
            }
            pt_arena_free(a);
        }
    }
    return 0;
}
