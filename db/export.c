/* The tuned table out of the store and back in: JSON (every column, so an
 * import rebuilds the same rows), CSV (one flat row per winner, no PTX), a C
 * header an engine compiles in, and the bundle (a small store holding only
 * the exported rows). Merge copies another store row by row, matching rows
 * by their natural keys. */
#include <jansson.h>

#include "db/db_int.h"
#include "db/wcols.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int db_format_parse(const char *name, db_format *f, pt_err *e)
{
    static const struct {
        const char *name;
        db_format f;
    } fmts[] = {{"json", DB_FMT_JSON},
                {"csv", DB_FMT_CSV},
                {"c-header", DB_FMT_CHEADER},
                {"bundle", DB_FMT_BUNDLE}};
    for (size_t i = 0; name && i < sizeof fmts / sizeof fmts[0]; i++)
        if (strcmp(name, fmts[i].name) == 0) {
            *f = fmts[i].f;
            return PT_OK;
        }
    return pt_errf(e, PT_EINVAL, "unknown format '%s' (json, csv, c-header, bundle)",
                   name ? name : "");
}

/* ---- base64 (cubins in JSON) ------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* NULL when out of memory. */
static char *b64_encode(const unsigned char *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }
static json_t *jstr(const char *s) { return json_string(s ? s : ""); }

/* A stored JSON text as a value (a plain string when it does not parse). */
static json_t *jparsed(const char *text)
{
    if (!text || !*text)
        return json_null();
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(text);
}

#define T(col) db__col_text(st, DB_WC_##col)
#define D(col) db__col_double(st, DB_WC_##col)
#define I(col) sqlite3_column_int64(st, DB_WC_##col)

static json_t *row_json(sqlite3_stmt *st, const char *launch)
{
    json_t *fp = json_pack("{s:o,s:o,s:I,s:I,s:o,s:o,s:I,s:o,s:o}", "key", jstr(T(FP_KEY)), "gpu",
                           jstr(T(FP_GPU)), "cc", (json_int_t)I(FP_CC), "sm_count",
                           (json_int_t)I(FP_SMS), "driver", jstr(T(FP_DRIVER)), "compiler",
                           jstr(T(FP_COMPILER)), "ptx_version", (json_int_t)I(FP_PTX),
                           "generator", jstr(T(FP_GENERATOR)), "protocol", jstr(T(FP_PROTOCOL)));
    json_t *prob = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "key", jstr(T(P_KEY)), "name",
                             jstr(T(P_NAME)), "op", jstr(T(P_OP)), "class", jstr(T(P_CLASS)),
                             "dims", jstr(T(P_DIMS)), "flops", jreal(D(P_FLOPS)), "bytes",
                             jreal(D(P_BYTES)));
    json_t *kernel = json_null();
    if (sqlite3_column_type(st, DB_WC_K_HASH) != SQLITE_NULL)
        kernel = json_pack("{s:o,s:o,s:o,s:o,s:o}", "hash", jstr(T(K_HASH)), "op", jstr(T(K_OP)),
                           "config", jstr(T(K_CONFIG)), "entry", jstr(T(K_ENTRY)), "ptx",
                           jstr(T(K_PTX)));
    json_t *cubin = json_null();
    if (sqlite3_column_type(st, DB_WC_C_COMPILER) != SQLITE_NULL) {
        const void *blob = sqlite3_column_blob(st, DB_WC_C_CUBIN);
        size_t n = (size_t)sqlite3_column_bytes(st, DB_WC_C_CUBIN);
        json_t *data = json_null();
        if (blob) {
            char *enc = b64_encode(blob, n);
            data = enc ? json_string(enc) : NULL; /* NULL: the row fails to pack */
            free(enc);
        }
        cubin = json_pack("{s:o,s:o,s:o,s:o}", "arch", jstr(T(R_ARCH)), "compiler",
                          jstr(T(C_COMPILER)), "base64", data, "resources",
                          jparsed(sqlite3_column_type(st, DB_WC_C_RESOURCES) == SQLITE_NULL
                                      ? NULL
                                      : T(C_RESOURCES)));
    }
    json_t *time = json_pack("{s:o,s:o,s:o,s:o,s:I}", "min", jreal(D(M_TMIN)), "median",
                             jreal(D(M_TMEDIAN)), "max", jreal(D(M_TMAX)), "spread",
                             jreal(D(M_SPREAD)), "reps", (json_int_t)I(M_REPS));
    json_t *meas = json_pack("{s:I,s:b,s:o,s:o,s:o}", "rung", (json_int_t)I(M_RUNG), "final",
                             (int)I(M_FINAL), "status", jstr(T(M_STATUS)), "error",
                             jstr(T(M_ERROR)), "created", jreal(D(M_CREATED)));
    json_t *prov = json_pack(
        "{s:o,s:o,s:o,s:o,s:o,s:I,s:o,s:o,s:o,s:o,s:I,s:o,s:o,s:o}", "run", jstr(T(R_UUID)),
        "tool_version", jstr(T(R_TOOL)), "git_rev", jstr(T(R_GIT)), "strategy",
        jstr(T(R_STRATEGY)), "budget", jstr(T(R_BUDGET)), "seed", (json_int_t)I(R_SEED),
        "backend", jstr(T(R_BACKEND)), "arch", jstr(T(R_ARCH)), "args_key", jstr(T(R_ARGS)),
        "host", jstr(T(R_HOST)), "pid", (json_int_t)I(R_PID), "started", jreal(D(R_STARTED)),
        "ended", jreal(D(R_ENDED)), "status", jstr(T(R_STATUS)));
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:o,s:o}", "fingerprint", fp,
                     "problem", prob, "config", jstr(T(M_CONFIG)), "kernel", kernel, "cubin",
                     cubin, "launch", jparsed(launch), "time_s", time, "tflops",
                     jreal(D(M_TFLOPS)), "gbps", jreal(D(M_GBPS)), "verified",
                     (int)I(M_VERIFIED), "source", jstr(T(M_SOURCE)), "measurement",
                     json_pack("{s:o,s:o}", "detail", meas, "provenance", prov));
}

/* ---- CSV ----------------------------------------------------------------- */

static void csv_field(pt_buf *b, const char *s, bool last)
{
    if (strpbrk(s, ",\"\r\n")) {
        pt_buf_putc(b, '"');
        for (; *s; s++) {
            if (*s == '"')
                pt_buf_putc(b, '"');
            pt_buf_putc(b, *s);
        }
        pt_buf_putc(b, '"');
    } else
        pt_buf_puts(b, s);
    pt_buf_putc(b, last ? '\n' : ',');
}

static void csv_num(pt_buf *b, double v, double scale)
{
    if (isfinite(v))
        pt_buf_printf(b, "%.6g,", v * scale);
    else
        pt_buf_putc(b, ',');
}

/* Launch geometry from its JSON: grid, block, smem (zeros when absent). */
static void launch_geom(const char *text, unsigned grid[3], unsigned block[3], unsigned *smem)
{
    for (int i = 0; i < 3; i++)
        grid[i] = block[i] = 0;
    *smem = 0;
    json_t *v = text && *text ? json_loads(text, 0, NULL) : NULL;
    if (!v)
        return;
    json_t *g = json_object_get(v, "grid"), *bl = json_object_get(v, "block");
    for (size_t i = 0; i < 3; i++) {
        grid[i] = (unsigned)json_integer_value(json_array_get(g, i));
        block[i] = (unsigned)json_integer_value(json_array_get(bl, i));
    }
    *smem = (unsigned)json_integer_value(json_object_get(v, "smem"));
    json_decref(v);
}

static const char csv_header[] =
    "fingerprint,gpu,problem,name,op,config,kernel_hash,entry,arch,grid,block,smem,"
    "time_us,min_us,max_us,spread,reps,tflops,gbps,source,verified,run,tool_version,git_rev,"
    "strategy\n";

/* The items of a problem key ("gemm m=16 n=64 dtype=bf16"; values may be
 * double-quoted with \" and \\ escapes, search/problem.c) and of a config
 * ("bm=128,bn=64"), appended to pairs as [name, value]. */
static void key_items(const char *key, json_t *pairs)
{
    const char *p = strchr(key, ' ');
    while (p && *p) {
        while (*p == ' ')
            p++;
        const char *eq = strchr(p, '=');
        if (!*p || !eq)
            break;
        pt_buf name, val;
        pt_buf_init(&name);
        pt_buf_init(&val);
        pt_buf_putn(&name, p, (size_t)(eq - p));
        p = eq + 1;
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1])
                    p++;
                pt_buf_putc(&val, *p);
            }
            if (*p)
                p++;
        } else
            while (*p && *p != ' ')
                pt_buf_putc(&val, *p++);
        json_array_append_new(pairs, json_pack("[s,s]", name.s ? name.s : "", val.s ? val.s : ""));
        pt_buf_free(&name);
        pt_buf_free(&val);
    }
}

static void config_items(const char *cfg, json_t *pairs)
{
    for (const char *p = cfg; p && *p;) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (eq && (size_t)(eq - p) < n) {
            char name[96], val[96];
            snprintf(name, sizeof name, "cfg_%.*s", (int)(eq - p) < 80 ? (int)(eq - p) : 80, p);
            snprintf(val, sizeof val, "%.*s", (int)(n - (size_t)(eq - p) - 1) < 90
                                                  ? (int)(n - (size_t)(eq - p) - 1) : 90, eq + 1);
            json_array_append_new(pairs, json_pack("[s,s]", name, val));
        }
        p = end ? end + 1 : p + n;
    }
}

/* The launch contract's columns (tuner/contract.h): workspace, opt-in,
 * alignment, cluster, the sizes taken at run time with their ranges, the
 * grid rule. Empty when the row has no contract. */
static void contract_items(const char *launch, json_t *pairs)
{
    json_t *v = launch && *launch ? json_loads(launch, 0, NULL) : NULL;
    json_t *c = json_object_get(v, "contract");
    char buf[1024];
    const char *ws = "", *optin = "", *align = "", *cluster = "", *dims = "", *grid = "";
    char wsb[32], alb[16], clb[48], dmb[512], grb[256];
    if (json_is_object(c)) {
        snprintf(wsb, sizeof wsb, "%lld",
                 (long long)json_integer_value(json_object_get(json_object_get(c, "workspace"), "bytes")));
        ws = wsb;
        optin = json_is_true(json_object_get(c, "smem_optin")) ? "1" : "0";
        snprintf(alb, sizeof alb, "%lld", (long long)json_integer_value(json_object_get(c, "align")));
        align = alb;
        json_t *cl = json_object_get(c, "cluster");
        snprintf(clb, sizeof clb, "%lldx%lldx%lld", (long long)json_integer_value(json_array_get(cl, 0)),
                 (long long)json_integer_value(json_array_get(cl, 1)),
                 (long long)json_integer_value(json_array_get(cl, 2)));
        cluster = clb;
        size_t o = 0;
        dmb[0] = '\0';
        json_t *d = json_object_get(c, "dims");
        for (size_t i = 0; i < json_array_size(d) && o < sizeof dmb - 64; i++) {
            json_t *x = json_array_get(d, i);
            json_int_t lo = json_integer_value(json_object_get(x, "min")),
                       hi = json_integer_value(json_object_get(x, "max"));
            if (lo == hi)
                continue;
            o += (size_t)snprintf(dmb + o, sizeof dmb - o, "%s%s=%lld..%lld", o ? " " : "",
                                  json_string_value(json_object_get(x, "name")), (long long)lo,
                                  (long long)hi);
        }
        dims = dmb;
        o = 0;
        json_t *g = json_object_get(c, "grid");
        for (size_t i = 0; i < 3 && o < sizeof grb - 96; i++) {
            json_t *r = json_array_get(g, i);
            json_t *ps = json_object_get(r, "per_sm"), *tm = json_object_get(r, "times");
            /* version 2: min(X, K*sms) for a persistent kernel's x, T*ceil(..) */
            o += (size_t)snprintf(grb + o, sizeof grb - o, "%s%s", i ? "x" : "", ps ? "min(" : "");
            if (json_object_get(r, "dim"))
                o += (size_t)snprintf(grb + o, sizeof grb - o, "ceil(d%lld*%lld/%lld)",
                                      (long long)json_integer_value(json_object_get(r, "dim")),
                                      (long long)json_integer_value(json_object_get(r, "mul")),
                                      (long long)json_integer_value(json_object_get(r, "div")));
            else
                o += (size_t)snprintf(grb + o, sizeof grb - o, "%lld",
                                      (long long)json_integer_value(json_object_get(r, "const")));
            if (tm)
                o += (size_t)snprintf(grb + o, sizeof grb - o, "*%lld", (long long)json_integer_value(tm));
            if (ps)
                o += (size_t)snprintf(grb + o, sizeof grb - o, ",%lld*sms)", (long long)json_integer_value(ps));
        }
        grid = grb;
    }
    (void)buf;
    const char *names[] = {"workspace_bytes", "smem_optin", "align", "cluster", "runtime_dims",
                           "grid_rule"};
    const char *vals[] = {ws, optin, align, cluster, dims, grid};
    for (size_t i = 0; i < 6; i++)
        json_array_append_new(pairs, json_pack("[s,s]", names[i], vals[i]));
    json_decref(v);
}

static void row_csv(sqlite3_stmt *st, const char *launch, pt_buf *b)
{
    unsigned g[3], bl[3], smem;
    launch_geom(launch, g, bl, &smem);
    char gs[64], bs[64], ss[32];
    snprintf(gs, sizeof gs, "%ux%ux%u", g[0], g[1], g[2]);
    snprintf(bs, sizeof bs, "%ux%ux%u", bl[0], bl[1], bl[2]);
    snprintf(ss, sizeof ss, "%u", smem);
    const char *txt[] = {T(FP_KEY), T(FP_GPU), T(P_KEY), T(P_NAME), T(P_OP), T(M_CONFIG),
                         T(K_HASH), T(K_ENTRY), T(R_ARCH), gs, bs, ss};
    for (size_t i = 0; i < sizeof txt / sizeof txt[0]; i++)
        csv_field(b, txt[i], false);
    csv_num(b, D(M_TMEDIAN), 1e6);
    csv_num(b, D(M_TMIN), 1e6);
    csv_num(b, D(M_TMAX), 1e6);
    csv_num(b, D(M_SPREAD), 1);
    pt_buf_printf(b, "%lld,", (long long)I(M_REPS));
    csv_num(b, D(M_TFLOPS), 1);
    csv_num(b, D(M_GBPS), 1);
    csv_field(b, T(M_SOURCE), false);
    pt_buf_printf(b, "%d,", (int)I(M_VERIFIED));
    csv_field(b, T(R_UUID), false);
    csv_field(b, T(R_TOOL), false);
    csv_field(b, T(R_GIT), false);
    csv_field(b, T(R_STRATEGY), true);
}

/* ---- C header ------------------------------------------------------------ */

/* A C string literal: escapes quotes, backslashes, '?' (no trigraphs) and
 * every byte outside printable ASCII (3-digit octal, so a following digit
 * never joins the escape). Newlines end a literal piece (one per line). */
static void c_string(pt_buf *b, const char *s, const char *indent)
{
    pt_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?') {
            pt_buf_putc(b, '\\');
            pt_buf_putc(b, (char)*p);
        } else if (*p == '\n') {
            pt_buf_puts(b, "\\n\"");
            if (p[1]) {
                pt_buf_putc(b, '\n');
                pt_buf_puts(b, indent);
                pt_buf_putc(b, '"');
            } else
                return;
        } else if (*p < 0x20 || *p >= 0x7f)
            pt_buf_printf(b, "\\%03o", *p);
        else
            pt_buf_putc(b, (char)*p);
    }
    pt_buf_putc(b, '"');
}

/* static const char NAME[] = {bytes..., 0}; */
static void c_bytes(pt_buf *b, const char *name, const char *p, size_t n)
{
    pt_buf_printf(b, "static const char %s[%zu] = {", name, n + 1);
    for (size_t i = 0; i <= n; i++) {
        unsigned v = i < n ? (unsigned char)p[i] : 0;
        pt_buf_printf(b, v < 0x80 ? "%s%u," : "%s(char)%u,", i % 24 ? "" : "\n    ", v);
    }
    pt_buf_puts(b, "\n};\n");
}

static const char cheader_top[] =
    "#ifndef PTXTUNE_TABLE_H\n"
    "#define PTXTUNE_TABLE_H\n"
    "\n"
    "#include <stddef.h>\n"
    "\n"
    "/* One tuned kernel: serve it only when every fingerprint field equals the\n"
    " * device's (GPU name, compute capability, SM count, driver, compiler, PTX\n"
    " * version, generator, benchmark protocol). */\n"
    "typedef struct ptxtune_kernel {\n"
    "    const char *fingerprint; /* 16 hex digits */\n"
    "    const char *gpu;\n"
    "    int cc, sm_count;\n"
    "    const char *driver, *compiler;\n"
    "    int ptx_version;\n"
    "    const char *generator, *protocol;\n"
    "    const char *problem, *name, *op; /* problem key, label, op */\n"
    "    const char *config;              /* the tuned parameters */\n"
    "    const char *hash, *entry, *arch;  /* PTX hash, kernel name, cubin target */\n"
    "    const char *ptx;\n"
    "    const unsigned char *cubin;      /* NULL: load the PTX */\n"
    "    size_t cubin_size;\n"
    "    unsigned grid[3], block[3], smem;\n"
    "    double time_s, spread;           /* median and its relative spread */\n"
    "    int measured;                    /* 0: a cost-model estimate, never timed */\n"
    "    const char *run;                 /* provenance: run uuid */\n"
    "    /* the launch contract (docs/runtime.md): workspace bytes (zero-filled once,\n"
    "     * left zero by every launch), smem > 48 KB needs the opt-in attribute,\n"
    "     * every tensor pointer aligned to align, the cluster shape; the whole\n"
    "     * contract (arguments, run-time size ranges, grid rule) as JSON, NULL\n"
    "     * when the row has none */\n"
    "    unsigned long long workspace_bytes;\n"
    "    int smem_optin, align;\n"
    "    unsigned cluster[3];\n"
    "    /* persistent kernels: launch min(grid[0], grid_per_sm x the device's\n"
    "     * SMs) CTAs along x, rounded down to whole clusters (at least one);\n"
    "     * 0: grid as given */\n"
    "    unsigned grid_per_sm;\n"
    "    const char *contract;\n"
    "} ptxtune_kernel;\n"
    "\n"
    "extern const ptxtune_kernel ptxtune_table[];\n"
    "extern const size_t ptxtune_table_size;\n"
    "\n"
    "#ifdef PTXTUNE_TABLE_IMPLEMENTATION\n";

typedef struct export_ctx {
    db_format fmt;
    pt_buf *out;
    json_t *rows;
    pt_buf cubins, table; /* c-header: the arrays, then the table */
    json_t *csv_rows;     /* csv: [fixed text, [[column, value]...]] per row */
    json_t *csv_cols;     /* csv: the extra columns, in first-seen order */
    int n;
    const char *path;
    pt_err *e;
} export_ctx;

/* A row goes out only when its identities hold: the fingerprint key is the
 * hash of its fields and the kernel hash that of its PTX (a tampered store
 * or bundle never ships arbitrary PTX in a header). */
static int check_row(export_ctx *x, sqlite3_stmt *st, const db_winner *w)
{
    db_fingerprint f = {T(FP_GPU),    (int)I(FP_CC),       (int)I(FP_SMS), T(FP_DRIVER),
                        T(FP_COMPILER), (int)I(FP_PTX), T(FP_GENERATOR), T(FP_PROTOCOL)};
    char want[17];
    db_fingerprint_key(&f, want);
    if (strcmp(want, T(FP_KEY)) != 0)
        return pt_errf(x->e, PT_EINVAL,
                       "%s: fingerprint key %s does not match its fields (%s); nothing exported",
                       x->path, T(FP_KEY), want);
    if (sqlite3_column_type(st, DB_WC_K_HASH) == SQLITE_NULL)
        return PT_OK;
    size_t n = (size_t)sqlite3_column_bytes(st, DB_WC_K_PTX);
    db_kernel_hash(w->ptx, n, want); /* issue 15: the kernel identity */
    if (strcmp(want, w->kernel_hash) != 0 || strlen(w->ptx) != n)
        return pt_errf(x->e, PT_EINVAL,
                       "%s: kernel %s does not match its PTX (%s); nothing exported", x->path,
                       w->kernel_hash, want);
    return PT_OK;
}

static int export_row(void *ctx, sqlite3_stmt *st, const db_winner *w)
{
    export_ctx *x = ctx;
    int rc = check_row(x, st, w);
    if (rc)
        return rc;
    if (x->fmt == DB_FMT_JSON) {
        /* jansson answers NULL when it runs out of memory: never a row left out */
        if (json_array_append_new(x->rows, row_json(st, w->launch)) != 0)
            return pt_errf(x->e, PT_ENOMEM, "out of memory (building the JSON table)");
    } else if (x->fmt == DB_FMT_CSV) {
        /* one column per problem key and config parameter (the union over
         * the rows, as the CUTLASS profiler writes them), then the contract */
        pt_buf fixed;
        pt_buf_init(&fixed);
        row_csv(st, w->launch, &fixed);
        json_t *pairs = json_array();
        key_items(T(P_KEY), pairs);
        config_items(T(M_CONFIG), pairs);
        contract_items(w->launch, pairs);
        for (size_t i = 0; i < json_array_size(pairs); i++) {
            const char *col = json_string_value(json_array_get(json_array_get(pairs, i), 0));
            bool have = false;
            for (size_t j = 0; j < json_array_size(x->csv_cols) && !have; j++)
                have = strcmp(json_string_value(json_array_get(x->csv_cols, j)), col) == 0;
            if (!have)
                json_array_append_new(x->csv_cols, json_string(col));
        }
        if (fixed.len)
            fixed.s[--fixed.len] = '\0'; /* the newline: extras follow */
        int bad = json_array_append_new(x->csv_rows, json_pack("[s,o]", fixed.s ? fixed.s : "", pairs));
        pt_buf_free(&fixed);
        if (bad)
            return pt_errf(x->e, PT_ENOMEM, "out of memory (building the CSV table)");
    }
    else {
        pt_buf *t = &x->table;
        char cub[64] = "NULL";
        if (w->cubin && w->cubin_size) {
            snprintf(cub, sizeof cub, "ptxtune_cubin_%d", x->n);
            pt_buf_printf(&x->cubins, "static const unsigned char %s[%zu] = {", cub,
                          w->cubin_size);
            const unsigned char *p = w->cubin;
            for (size_t i = 0; i < w->cubin_size; i++)
                pt_buf_printf(&x->cubins, "%s0x%02x,", i % 16 ? "" : "\n    ", p[i]);
            pt_buf_puts(&x->cubins, "\n};\n");
        }
        /* the PTX (and the contract below) as NUL-terminated char arrays: a
         * string literal past 4095 characters fails -Wpedantic's
         * -Woverlength-strings */
        char ptxname[64];
        snprintf(ptxname, sizeof ptxname, "ptxtune_ptx_%d", x->n);
        c_bytes(&x->cubins, ptxname, w->ptx, strlen(w->ptx));
        unsigned g[3], bl[3], smem;
        launch_geom(w->launch, g, bl, &smem);
        const char *ind = "        ";
        /* positional, with the field names in comments: C++17 has no
         * designated initializers, and the header compiles in both */
        pt_buf_puts(t, "    {\n        /* fingerprint */ ");
        c_string(t, w->fingerprint, ind);
        pt_buf_puts(t, ",\n        /* gpu */ ");
        c_string(t, w->gpu, ind);
        pt_buf_printf(t, ",\n        /* cc, sm_count */ %d, %d,\n        /* driver */ ",
                      (int)I(FP_CC), (int)I(FP_SMS));
        c_string(t, T(FP_DRIVER), ind);
        pt_buf_puts(t, ",\n        /* compiler */ ");
        c_string(t, T(FP_COMPILER), ind);
        pt_buf_printf(t, ",\n        /* ptx_version */ %d,\n        /* generator */ ", (int)I(FP_PTX));
        c_string(t, T(FP_GENERATOR), ind);
        pt_buf_puts(t, ",\n        /* protocol */ ");
        c_string(t, T(FP_PROTOCOL), ind);
        pt_buf_puts(t, ",\n        /* problem */ ");
        c_string(t, w->problem_key, ind);
        pt_buf_puts(t, ",\n        /* name */ ");
        c_string(t, w->problem_name, ind);
        pt_buf_puts(t, ",\n        /* op */ ");
        c_string(t, w->op, ind);
        pt_buf_puts(t, ",\n        /* config */ ");
        c_string(t, w->config, ind);
        pt_buf_puts(t, ",\n        /* hash */ ");
        c_string(t, w->kernel_hash, ind);
        pt_buf_puts(t, ",\n        /* entry */ ");
        c_string(t, w->entry, ind);
        pt_buf_puts(t, ",\n        /* arch */ ");
        c_string(t, w->arch, ind);
        pt_buf_printf(t, ",\n        /* ptx */ %s", ptxname);
        pt_buf_printf(t, ",\n        /* cubin, cubin_size */ %s, %zu,\n", cub,
                      w->cubin ? w->cubin_size : (size_t)0);
        pt_buf_printf(t,
                      "        /* grid, block, smem */ {%u, %u, %u}, {%u, %u, %u}, %u,\n"
                      "        /* time_s, spread, measured */ %.17g, %.17g, %d,\n"
                      "        /* run */ ",
                      g[0], g[1], g[2], bl[0], bl[1], bl[2], smem,
                      isfinite(w->t_median) ? w->t_median : 0.0,
                      isfinite(w->spread) ? w->spread : 0.0, strcmp(w->source, "measured") == 0);
        c_string(t, w->run_uuid, ind);
        /* the launch contract: its main facts as fields, all of it as JSON */
        unsigned long long wsb = 0;
        int optin = 0, align = 0;
        unsigned cl[3] = {1, 1, 1}, per_sm = 0;
        json_t *lv = w->launch && *w->launch ? json_loads(w->launch, 0, NULL) : NULL;
        json_t *ct = json_object_get(lv, "contract");
        char *ctext = ct ? json_dumps(ct, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (ct) {
            wsb = (unsigned long long)json_integer_value(
                json_object_get(json_object_get(ct, "workspace"), "bytes"));
            optin = json_is_true(json_object_get(ct, "smem_optin"));
            align = (int)json_integer_value(json_object_get(ct, "align"));
            for (size_t k = 0; k < 3; k++)
                cl[k] = (unsigned)json_integer_value(json_array_get(json_object_get(ct, "cluster"), k));
            per_sm = (unsigned)json_integer_value(
                json_object_get(json_array_get(json_object_get(ct, "grid"), 0), "per_sm"));
        }
        pt_buf_printf(t,
                      ",\n        /* workspace_bytes, smem_optin, align */ %llu, %d, %d,\n"
                      "        /* cluster */ {%u, %u, %u},\n        /* grid_per_sm */ %u,\n"
                      "        /* contract */ ",
                      wsb, optin, align, cl[0], cl[1], cl[2], per_sm);
        if (ctext) {
            char cname[64];
            snprintf(cname, sizeof cname, "ptxtune_contract_%d", x->n);
            c_bytes(&x->cubins, cname, ctext, strlen(ctext));
            pt_buf_puts(t, cname);
        } else
            pt_buf_puts(t, "NULL");
        free(ctext);
        json_decref(lv);
        pt_buf_puts(t, ",\n    },\n");
    }
    x->n++;
    return PT_OK;
}

/* ---- the JSON table, version 2 (docs/db.md, Formats) ------------------------
 *
 *   {"format": "ptxtune-table", "version": 2, "index": INDEX,
 *    "rows": [
 *   ROW,
 *   ...
 *   ]}
 *
 * Each ROW is the version 1 row (row_json), on one line. INDEX is what the
 * runtime's open reads instead of the whole document (docs/runtime.md,
 * start-up): {"file_bytes": the document's length, "columns": the names of
 * the row columns, "fingerprints": [the rows' fingerprint objects],
 * "rows": [one array per row, in "columns" order: its fingerprint's index,
 * [byte offset, length] of the row object and of its "launch" value (offsets
 * from the document's first byte), op, class, problem key, dims, config,
 * entry, kernel hash, cubin arch, median time, the contract's version and
 * its sizes as "index:tuned:min:max:group,..." (null when the contract has
 * none that read so), and the cubin's identity: pt_hash64 of its base64
 * text as 16 hex digits (null without one)]}. The offsets include the index's own length: found by
 * iterating to the fixed point (the index's length grows with its numbers). */

static const char json_v2_cols[] =
    "[\"fingerprint\", \"row\", \"launch\", \"op\", \"class\", \"problem\", \"dims\", \"config\", "
    "\"entry\", \"hash\", \"arch\", \"time_s\", \"contract_v\", \"sizes\", \"cubin_hash\"]";

static const char *jget_str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* The contract's version and sizes (the bundle's rt_sizes text) of a launch
 * object; false when they are not all integers. */
static bool json_sizes(json_t *launch, json_int_t *v, pt_buf *sz)
{
    json_t *c = json_object_get(launch, "contract"), *dm = json_object_get(c, "dims");
    json_t *jv = json_object_get(c, "v");
    if (!json_is_integer(jv) || !json_is_array(dm))
        return false;
    *v = json_integer_value(jv);
    static const char *const f[] = {"tuned", "min", "max", "group"};
    for (size_t i = 0; i < json_array_size(dm); i++) {
        pt_buf_printf(sz, "%s%zu", i ? "," : "", i);
        for (int j = 0; j < 4; j++) {
            json_t *x = json_object_get(json_array_get(dm, i), f[j]);
            if (!json_is_integer(x))
                return false;
            pt_buf_printf(sz, ":%lld", (long long)json_integer_value(x));
        }
    }
    return true;
}

static int json_table_text(json_t *rows, pt_buf *out, pt_err *e)
{
    static const char prefix[] = "{\"format\": \"ptxtune-table\", \"version\": 2, \"index\": ";
    static const char mid[] = ",\n \"rows\": [\n", tail[] = "\n]}\n";
    const size_t flags = JSON_ENCODE_ANY | JSON_PRESERVE_ORDER;
    size_t n = json_array_size(rows);
    char **text = calloc(n + 1, sizeof *text);
    size_t *lat = calloc(n + 1, sizeof *lat), *llen = calloc(n + 1, sizeof *llen);
    json_t *fps = json_array(), *irows = json_array(), *cols = json_loads(json_v2_cols, 0, NULL);
    json_t *fbytes = json_integer(0), **pos = calloc(4 * n + 1, sizeof *pos);
    json_t *index = json_pack("{s:O,s:O,s:O,s:O}", "file_bytes", fbytes, "columns", cols,
                              "fingerprints", fps, "rows", irows);
    pt_buf row, sz;
    pt_buf_init(&row);
    pt_buf_init(&sz);
    int rc = (text && lat && llen && pos && index) ? PT_OK : PT_ENOMEM;
    /* the rows' texts, each launch value's place in its row */
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *r = json_array_get(rows, i);
        row.len = 0;
        pt_buf_putc(&row, '{');
        bool first = true;
        for (void *it = json_object_iter(r); it && !rc; it = json_object_iter_next(r, it)) {
            json_t *ks = json_string(json_object_iter_key(it));
            char *kt = ks ? json_dumps(ks, flags) : NULL;
            char *vt = json_dumps(json_object_iter_value(it), flags);
            json_decref(ks);
            if (!kt || !vt)
                rc = PT_ENOMEM;
            else {
                pt_buf_printf(&row, "%s%s: ", first ? "" : ", ", kt);
                if (strcmp(json_object_iter_key(it), "launch") == 0) {
                    lat[i] = row.len;
                    llen[i] = strlen(vt);
                }
                pt_buf_puts(&row, vt);
            }
            first = false;
            free(kt);
            free(vt);
        }
        pt_buf_putc(&row, '}');
        if (!rc && !(text[i] = pt_buf_take(&row)))
            rc = PT_ENOMEM;
        pt_buf_init(&row);
        if (rc)
            break;
        /* its index row */
        json_t *fp = json_object_get(r, "fingerprint"), *pb = json_object_get(r, "problem"),
               *kn = json_object_get(r, "kernel"), *cb = json_object_get(r, "cubin"),
               *ln = json_object_get(r, "launch"),
               *med = json_object_get(json_object_get(r, "time_s"), "median");
        size_t fi = 0;
        while (fi < json_array_size(fps) &&
               strcmp(jget_str(json_array_get(fps, fi), "key"), jget_str(fp, "key")) != 0)
            fi++;
        if (fi == json_array_size(fps) && json_array_append(fps, fp))
            rc = PT_ENOMEM;
        json_int_t v = 0;
        sz.len = 0;
        if (sz.s)
            sz.s[0] = '\0';
        bool have = json_is_object(ln) && json_sizes(ln, &v, &sz);
        for (int j = 0; j < 4; j++)
            pos[4 * i + (size_t)j] = json_integer(0);
        const char *cubin64 = json_string_value(json_object_get(cb, "base64"));
        char ch[17] = "";
        if (cubin64)
            snprintf(ch, sizeof ch, "%016llx", (unsigned long long)pt_hash64(cubin64, strlen(cubin64)));
        json_t *ir = json_pack(
            "[I,[O,O],[O,O],s,s,s,s,s,s,s,s,O,o,o,o]", (json_int_t)fi, pos[4 * i], pos[4 * i + 1],
            pos[4 * i + 2], pos[4 * i + 3], jget_str(pb, "op"), jget_str(pb, "class"),
            jget_str(pb, "key"), jget_str(pb, "dims"), jget_str(r, "config"),
            jget_str(kn, "entry"), jget_str(kn, "hash"), jget_str(cb, "arch"),
            json_is_number(med) ? med : json_null(), have ? json_integer(v) : json_null(),
            have ? json_string(sz.s ? sz.s : "") : json_null(),
            cubin64 ? json_string(ch) : json_null());
        if (!rc && (!ir || json_array_append_new(irows, ir)))
            rc = PT_ENOMEM;
    }
    /* the offsets, to the index's fixed point */
    char *itext = NULL;
    size_t ilen = 0;
    for (int round = 0; !rc && round < 32; round++) {
        size_t at = strlen(prefix) + ilen + strlen(mid);
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(text[i]);
            json_integer_set(pos[4 * i], (json_int_t)at);
            json_integer_set(pos[4 * i + 1], (json_int_t)len);
            json_integer_set(pos[4 * i + 2], (json_int_t)(at + lat[i]));
            json_integer_set(pos[4 * i + 3], (json_int_t)llen[i]);
            at += len + (i + 1 < n ? 2 : 0);
        }
        json_integer_set(fbytes, (json_int_t)(at + strlen(tail)));
        free(itext);
        if (!(itext = json_dumps(index, flags))) {
            rc = PT_ENOMEM;
            break;
        }
        if (strlen(itext) == ilen)
            break;
        ilen = strlen(itext);
    }
    if (!rc && (!itext || strlen(itext) != ilen))
        rc = PT_ENOMEM;
    if (!rc) {
        pt_buf_puts(out, prefix);
        pt_buf_puts(out, itext);
        pt_buf_puts(out, mid);
        for (size_t i = 0; i < n; i++) {
            pt_buf_puts(out, text[i]);
            if (i + 1 < n)
                pt_buf_puts(out, ",\n");
        }
        pt_buf_puts(out, tail);
    }
    free(itext);
    for (size_t i = 0; text && i < n; i++)
        free(text[i]);
    for (size_t i = 0; pos && i < 4 * n; i++)
        json_decref(pos[i]);
    free(text);
    free(lat);
    free(llen);
    free(pos);
    json_decref(fps);
    json_decref(irows);
    json_decref(cols);
    json_decref(fbytes);
    json_decref(index);
    pt_buf_free(&row);
    pt_buf_free(&sz);
    return rc ? pt_errf(e, rc, "out of memory (building the JSON table)") : PT_OK;
}

typedef struct rows_ctx {
    export_ctx x;
    db_export_row_fn fn;
    void *ctx;
} rows_ctx;

static int export_raw_row(void *ctx, sqlite3_stmt *st, const db_winner *w)
{
    rows_ctx *r = ctx;
    int rc = check_row(&r->x, st, w);
    if (rc)
        return rc;
    db_export_row row = {
        .fp = {T(FP_GPU), (int)I(FP_CC), (int)I(FP_SMS), T(FP_DRIVER), T(FP_COMPILER),
               (int)I(FP_PTX), T(FP_GENERATOR), T(FP_PROTOCOL)},
        .fp_key = T(FP_KEY),
        .problem_key = T(P_KEY),
        .klass = T(P_CLASS),
        .dims = T(P_DIMS),
        .op = T(P_OP),
        .config = T(M_CONFIG),
        .kernel_hash = w->kernel_hash ? w->kernel_hash : "",
        .entry = w->entry ? w->entry : "",
        .ptx = w->ptx ? w->ptx : "",
        .ptx_len = (size_t)sqlite3_column_bytes(st, DB_WC_K_PTX),
        .cubin = w->cubin,
        .cubin_size = w->cubin ? w->cubin_size : 0,
        .arch = w->arch ? w->arch : "",
        .launch = T(M_LAUNCH),
        .source = T(M_SOURCE),
        .t_median = D(M_TMEDIAN),
    };
    r->x.n++;
    return r->fn(r->ctx, &row);
}

int db_export_rows(db_store *s, const char *gpu, const char *match, db_export_row_fn fn,
                   void *ctx, pt_err *e)
{
    rows_ctx r = {.x = {.fmt = DB_FMT_JSON, .path = s->path, .e = e}, .fn = fn, .ctx = ctx};
    return db__winners_raw(s, gpu, match, export_raw_row, &r, e);
}

static int sel_rows(db_store *s, const db_export_sel *x,
                    int (*fn)(void *ctx, sqlite3_stmt *st, const db_winner *w), void *ctx,
                    pt_err *e);

/* The table of the selected rows in a text format (the store checked). */
static int text_of(db_store *s, db_format f, const db_export_sel *sel, pt_buf *out, int *nrows,
                   pt_err *e)
{
    int rc;
    export_ctx x = {.fmt = f, .out = out, .path = s->path, .e = e};
    pt_buf_init(&x.cubins);
    pt_buf_init(&x.table);
    if (f == DB_FMT_JSON)
        x.rows = json_array();
    if (f == DB_FMT_CSV) {
        x.csv_rows = json_array();
        x.csv_cols = json_array();
    }
    rc = sel_rows(s, sel, export_row, &x, e);
    if (!rc && f == DB_FMT_JSON)
        rc = json_table_text(x.rows, out, e);
    else if (!rc && f == DB_FMT_CHEADER) {
        pt_buf_printf(out,
                      "/* ptxtune tuned kernel table: %d entries. Generated by ptxtune %s;\n"
                      " * do not edit. Include it everywhere; define\n"
                      " * PTXTUNE_TABLE_IMPLEMENTATION in exactly one file. */\n",
                      x.n, PT_VERSION);
        pt_buf_puts(out, cheader_top);
        if (x.cubins.len)
            pt_buf_putn(out, x.cubins.s, x.cubins.len);
        pt_buf_puts(out, "const ptxtune_kernel ptxtune_table[] = {\n");
        if (x.table.len)
            pt_buf_putn(out, x.table.s, x.table.len);
        else
            pt_buf_puts(out, "#ifdef __cplusplus\n    {}\n#else\n    {0}\n#endif\n");
        pt_buf_printf(out,
                      "};\nconst size_t ptxtune_table_size = %d;\n"
                      "#endif /* PTXTUNE_TABLE_IMPLEMENTATION */\n\n#endif\n",
                      x.n);
    }
    if (!rc && f == DB_FMT_CSV) {
        pt_buf_putn(out, csv_header, strlen(csv_header) - 1);
        for (size_t j = 0; j < json_array_size(x.csv_cols); j++) {
            pt_buf_putc(out, ',');
            csv_field(out, json_string_value(json_array_get(x.csv_cols, j)), true);
            out->s[--out->len] = '\0';
        }
        pt_buf_putc(out, '\n');
        for (size_t i = 0; i < json_array_size(x.csv_rows); i++) {
            json_t *r = json_array_get(x.csv_rows, i), *pairs = json_array_get(r, 1);
            pt_buf_puts(out, json_string_value(json_array_get(r, 0)));
            for (size_t j = 0; j < json_array_size(x.csv_cols); j++) {
                const char *col = json_string_value(json_array_get(x.csv_cols, j)), *val = "";
                for (size_t k = 0; k < json_array_size(pairs); k++) {
                    json_t *pr = json_array_get(pairs, k);
                    if (strcmp(json_string_value(json_array_get(pr, 0)), col) == 0)
                        val = json_string_value(json_array_get(pr, 1));
                }
                pt_buf_putc(out, ',');
                csv_field(out, val, true);
                out->s[--out->len] = '\0';
            }
            pt_buf_putc(out, '\n');
        }
    }
    json_decref(x.csv_rows);
    json_decref(x.csv_cols);
    json_decref(x.rows);
    pt_buf_free(&x.cubins);
    pt_buf_free(&x.table);
    if (nrows)
        *nrows = x.n;
    return rc;
}


int db_export_text(db_store *s, db_format f, const char *gpu, const char *match, pt_buf *out,
                   int *nrows, pt_err *e)
{
    if (f == DB_FMT_BUNDLE)
        return pt_errf(e, PT_EINVAL, "the bundle is a file: use db_export_bundle");
    db_export_sel *x = NULL;
    int rc = db_export_select(s, gpu, match, NULL, &x, NULL, e);
    if (!rc)
        rc = text_of(s, f, x, out, nrows, e);
    db_export_sel_free(x);
    return rc;
}

int db_export_sel_text(db_store *s, db_format f, const db_export_sel *x, pt_buf *out, int *nrows,
                       pt_err *e)
{
    if (f == DB_FMT_BUNDLE)
        return pt_errf(e, PT_EINVAL, "the bundle is a file: use db_export_bundle");
    return text_of(s, f, x, out, nrows, e);
}

#undef T
#undef D
#undef I

/* ---- merge and bundle ------------------------------------------------- */

/* Percent-encodes a path into a read-only file: URI. */
static char *ro_uri(const char *path)
{
    pt_buf b;
    pt_buf_init(&b);
    pt_buf_puts(&b, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/._-", *p))
            pt_buf_putc(&b, (char)*p);
        else
            pt_buf_printf(&b, "%%%02X", *p);
    }
    pt_buf_puts(&b, "?mode=ro");
    return pt_buf_take(&b);
}

int db__attach_ro(db_store *s, const char *path, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, "ATTACH DATABASE ?1 AS src", e);
    if (!st)
        return e->code;
    char *uri = ro_uri(path);
    if (!uri) {
        sqlite3_finalize(st);
        return pt_errf(e, PT_ENOMEM, "out of memory attaching %s", path);
    }
    db__bind_text(st, 1, uri);
    free(uri);
    int rc = db__step(s, st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return pt_errf(e, PT_EIO, "%s: cannot attach '%s': %s", s->path, path,
                       sqlite3_errmsg(s->h));
    return PT_OK;
}

void db__detach(db_store *s) { sqlite3_exec(s->h, "DETACH DATABASE src", NULL, NULL, NULL); }

#define SEL " (SELECT id FROM temp.sel)"
/* The copy, in dependency order. ?1 = 1: only the measurements in temp.sel
 * and the rows they reference. */
static const char *const merge_sql[] = {
    "INSERT INTO main.fingerprints(key, gpu, cc, sm_count, driver, compiler,"
    " ptx_version, generator, protocol)"
    " SELECT f.key, f.gpu, f.cc, f.sm_count, f.driver, f.compiler, f.ptx_version, f.generator,"
    " f.protocol FROM src.fingerprints f WHERE ?1 = 0 OR f.id IN (SELECT r.fingerprint_id"
    " FROM src.runs r JOIN src.measurements m ON m.run_id = r.id WHERE m.id IN" SEL ")"
    " ORDER BY f.id ON CONFLICT DO NOTHING",
    "INSERT INTO main.problems(key, op, class, dims, name, flops, bytes)"
    " SELECT p.key, p.op, p.class, p.dims, p.name, p.flops, p.bytes FROM src.problems p"
    " WHERE ?1 = 0 OR p.id IN (SELECT m.problem_id FROM src.measurements m WHERE m.id IN" SEL
    ") ORDER BY p.id ON CONFLICT DO NOTHING",
    "INSERT INTO main.kernels(hash, op, config, entry, ptx)"
    " SELECT k.hash, k.op, k.config, k.entry, k.ptx FROM src.kernels k"
    " WHERE ?1 = 0 OR k.id IN (SELECT m.kernel_id FROM src.measurements m WHERE m.id IN" SEL
    ") ORDER BY k.id ON CONFLICT DO NOTHING",
    "INSERT INTO main.cubins(kernel_id, arch, compiler, cubin, resources)"
    " SELECT mk.id, c.arch, c.compiler, c.cubin, c.resources FROM src.cubins c"
    " JOIN src.kernels sk ON sk.id = c.kernel_id JOIN main.kernels mk ON mk.hash = sk.hash"
    " WHERE ?1 = 0 OR EXISTS (SELECT 1 FROM src.measurements m JOIN src.runs r"
    " ON r.id = m.run_id WHERE m.id IN" SEL " AND m.kernel_id = c.kernel_id AND r.arch = c.arch)"
    " ORDER BY c.kernel_id, c.arch ON CONFLICT DO NOTHING",
    "INSERT INTO main.runs(uuid, fingerprint_id, tool_version, git_rev, strategy,"
    " budget, seed, backend, arch, args_key, host, pid, started, ended, status)"
    " SELECT r.uuid, mf.id, r.tool_version, r.git_rev, r.strategy, r.budget, r.seed, r.backend,"
    " r.arch, r.args_key, r.host, r.pid, r.started, r.ended, r.status FROM src.runs r"
    " JOIN src.fingerprints sf ON sf.id = r.fingerprint_id JOIN main.fingerprints mf"
    " ON mf.key = sf.key WHERE ?1 = 0 OR r.id IN (SELECT m.run_id FROM src.measurements m"
    " WHERE m.id IN" SEL ") ORDER BY r.id ON CONFLICT DO NOTHING",
    "INSERT INTO main.measurements(run_id, problem_id, kernel_id, config, rung, final,"
    " status, error, source, verified, t_min, t_median, t_max, spread, reps, tflops, gbps,"
    " launch, created, sample)"
    " SELECT mr.id, mp.id, mk.id, m.config, m.rung, m.final, m.status, m.error, m.source,"
    " m.verified, m.t_min, m.t_median, m.t_max, m.spread, m.reps, m.tflops, m.gbps, m.launch,"
    " m.created, m.sample FROM src.measurements m JOIN src.runs sr ON sr.id = m.run_id"
    " JOIN main.runs mr ON mr.uuid = sr.uuid JOIN src.problems sp ON sp.id = m.problem_id"
    " JOIN main.problems mp ON mp.key = sp.key LEFT JOIN src.kernels sk ON sk.id = m.kernel_id"
    " LEFT JOIN main.kernels mk ON mk.hash = sk.hash WHERE ?1 = 0 OR m.id IN" SEL
    " ORDER BY m.id ON CONFLICT DO NOTHING",
};
#undef SEL

int db__merge_attached(db_store *s, bool filtered, const char *src_name, db_merge_stats *stats,
                       pt_err *e)
{
    db_merge_stats dummy;
    if (!stats)
        stats = &dummy;
    memset(stats, 0, sizeof *stats);
    int rc = db__exec(s, "CREATE TEMP TABLE IF NOT EXISTS sel(id INTEGER PRIMARY KEY)", e);
    if (rc)
        return rc;
    int64_t total = 0;
    sqlite3_stmt *cnt = db__prepare(
        s, "SELECT count(*) FROM src.measurements WHERE ?1 = 0 OR id IN (SELECT id FROM temp.sel)",
        e);
    if (!cnt)
        return e->code;
    sqlite3_bind_int(cnt, 1, filtered);
    int src = db__step(s, cnt);
    if (src == SQLITE_ROW)
        total = sqlite3_column_int64(cnt, 0);
    sqlite3_finalize(cnt);
    if (src != SQLITE_ROW)
        return db__fail(s, src, "reading the source store", e);
    if ((rc = db__begin(s, e)))
        return rc;
    /* inside the transaction: the run check reads main too */
    if ((rc = db__merge_verify(s, filtered, src_name, e))) {
        db__rollback(s);
        return rc;
    }
    int64_t *counts[] = {&stats->fingerprints, &stats->problems, &stats->kernels, NULL,
                         &stats->runs,         &stats->measurements};
    for (size_t i = 0; !rc && i < sizeof merge_sql / sizeof merge_sql[0]; i++) {
        sqlite3_stmt *st = db__prepare(s, merge_sql[i], e);
        if (!st) {
            rc = e->code;
            break;
        }
        sqlite3_bind_int(st, 1, filtered);
        src = db__step(s, st);
        if (src != SQLITE_DONE)
            rc = db__fail(s, src, "merging", e);
        else if (counts[i])
            *counts[i] = sqlite3_changes(s->h);
        sqlite3_finalize(st);
    }
    if (!rc)
        rc = db__winners_recompute(s, e);
    if (rc) {
        db__rollback(s);
        return rc;
    }
    stats->skipped = total - stats->measurements;
    return db__commit(s, e);
}

/* An older source is copied to a temporary file and migrated there: the
 * source itself is never written. */
static int migrated_copy(const char *src, char *tmp, size_t n, pt_err *e)
{
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, n, "%s/ptxtune-merge-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return pt_errf(e, PT_EIO, "cannot create a temporary file: %s", strerror(errno));
    close(fd);
    sqlite3 *from = NULL, *to = NULL;
    int rc = sqlite3_open_v2(src, &from, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_open_v2(tmp, &to, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(from, 60000);
        sqlite3_backup *bk = sqlite3_backup_init(to, "main", from, "main");
        if (bk) {
            sqlite3_backup_step(bk, -1);
            rc = sqlite3_backup_finish(bk);
        } else
            rc = sqlite3_errcode(to);
    }
    if (rc != SQLITE_OK)
        pt_errf(e, PT_EIO, "%s: cannot copy for migration: %s", src, sqlite3_errstr(rc));
    sqlite3_close_v2(from);
    sqlite3_close_v2(to);
    if (rc != SQLITE_OK) {
        unlink(tmp);
        return PT_EIO;
    }
    db_store *m;
    int prc = db_open(tmp, NULL, &m, e);
    if (prc) {
        unlink(tmp);
        return prc;
    }
    db_close(m);
    return PT_OK;
}

static void unlink_db(const char *path)
{
    char side[4096];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-journal", path);
    unlink(side);
}

int db_merge(db_store *s, const char *src_path, db_merge_stats *st, pt_err *e)
{
    if (pt_same_file(s->path, src_path))
        return pt_errf(e, PT_EINVAL, "%s: cannot merge a store into itself", src_path);
    int64_t version = 0;
    int rc = db__src_version(src_path, &version, e);
    if (rc)
        return rc;
    char tmp[4096] = "";
    const char *from = src_path;
    if (version < DB_SCHEMA_VERSION) {
        if ((rc = migrated_copy(src_path, tmp, sizeof tmp, e)))
            return rc;
        from = tmp;
    }
    rc = db__attach_ro(s, from, e);
    if (!rc) {
        rc = db__merge_attached(s, false, src_path, st, e);
        db__detach(s);
    }
    if (*tmp)
        unlink_db(tmp);
    return rc;
}

/* The bundle is built under pt_wfile's temporary name in the target's
 * directory and renamed into place only when whole: the temporary file stays
 * open (SQLite writes it through its own descriptor), so the commit's fsync
 * covers what SQLite wrote, and it is closed only after SQLite let go of it
 * (closing any descriptor of a file drops the process's POSIX locks on it). */
/* The launches an export replaced (a contract added): the bundle's copies
 * of those rows, matched by their natural key (run, problem, config, rung),
 * get them. src is attached. */
static int bundle_launches(db_store *b, const db_export_sel *x, pt_err *e);
static bool sel_is_set(const db_export_sel *x, size_t i);

/* The contracts' sizes, indexed for the runtime's open (docs/runtime.md,
 * start-up; README, "Formats"): per winner whose launch has a contract with
 * an integer version and integer sizes, the version, the byte length of the
 * launch text it was cut from (the runtime uses a row only while the launch
 * still has that length, else reads the contract itself) and per size
 * "index:tuned:min:max:group", comma-separated, in the contract's order.
 * A reader without this table (an older runtime) never looks at it; one
 * that finds no table (an older bundle) reads the contracts instead. */
static const char bundle_sizes[] =
    "CREATE TABLE rt_sizes(measurement_id INTEGER PRIMARY KEY, v INTEGER NOT NULL,"
    " launch_bytes INTEGER NOT NULL, sizes TEXT NOT NULL);"
    "INSERT INTO rt_sizes SELECT m.id, json_extract(m.launch, '$.contract.v'),"
    " length(CAST(m.launch AS BLOB)), coalesce((SELECT group_concat(d.key || ':' ||"
    " json_extract(d.value, '$.tuned') || ':' || json_extract(d.value, '$.min') || ':' ||"
    " json_extract(d.value, '$.max') || ':' || json_extract(d.value, '$.group'), ',') FROM"
    " json_each(m.launch, '$.contract.dims') d), '')"
    " FROM winners w JOIN measurements m ON m.id = w.measurement_id"
    " WHERE CASE WHEN json_valid(m.launch) THEN"
    " json_type(m.launch, '$.contract.v') = 'integer' AND"
    " json_type(m.launch, '$.contract.dims') = 'array' AND NOT EXISTS (SELECT 1 FROM"
    " json_each(m.launch, '$.contract.dims') d WHERE json_type(d.value, '$.tuned') IS NOT"
    " 'integer' OR json_type(d.value, '$.min') IS NOT 'integer' OR json_type(d.value, '$.max')"
    " IS NOT 'integer' OR json_type(d.value, '$.group') IS NOT 'integer') ELSE 0 END"
    " ORDER BY m.id";

static int bundle_of(db_store *s, const db_export_sel *x, const char *path, int *nrows,
                     pt_err *e)
{
    if (db__is_store_file(s, path))
        return pt_errf(e, PT_EINVAL, "%s: is the store being exported; give another --out",
                       path);
    struct stat sb;
    if (stat(path, &sb) == 0)
        return pt_errf(e, PT_EINVAL, "%s: already exists; a bundle is always a new file", path);
    int rc;
    pt_wfile w;
    if ((rc = pt_wfile_open(&w, path, e)))
        return rc;
    char *tmp = strdup(w.tmp);
    db_store *b = NULL;
    if (!tmp)
        rc = pt_errf(e, PT_ENOMEM, "out of memory");
    if (!rc)
        rc = db_open(tmp, NULL, &b, e);
    if (!rc)
        rc = db__exec(b, "CREATE TEMP TABLE IF NOT EXISTS sel(id INTEGER PRIMARY KEY)", e);
    sqlite3_stmt *ins = rc ? NULL : db__prepare(b, "INSERT INTO temp.sel(id) VALUES(?1)", e);
    if (!rc && !ins)
        rc = e->code;
    size_t nsel = db_sel_count(x);
    for (size_t i = 0; !rc && i < nsel; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, db_sel_row_at(x, i)->id);
        int src = db__step(b, ins);
        if (src != SQLITE_DONE)
            rc = db__fail(b, src, "selecting rows", e);
    }
    sqlite3_finalize(ins);
    if (!rc)
        rc = db__attach_ro(b, s->path, e);
    if (!rc) {
        rc = db__merge_attached(b, true, s->path, NULL, e);
        if (!rc)
            rc = bundle_launches(b, x, e);
        db__detach(b);
    }
    if (!rc)
        rc = db__exec(b, bundle_sizes, e);
    /* a bundle is one file: fold the WAL back in */
    if (!rc)
        rc = db__exec(b, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE", e);
    db_close(b);
    if (!rc)
        rc = pt_wfile_commit(&w, e);
    else {
        pt_wfile_abort(&w);
        if (tmp) { /* the message names the temporary: name the target */
            pt_err inner = *e;
            pt_err_clear(e);
            pt_errf(e, inner.code, "%s: the bundle was not written (%s)", path, inner.msg);
        }
    }
    if (tmp)
        unlink_db(tmp); /* the sidecars; the file itself is renamed or removed */
    free(tmp);
    if (!rc && nrows)
        *nrows = (int)nsel;
    return rc;
}

static int bundle_launches(db_store *b, const db_export_sel *x, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(
        b,
        "UPDATE main.measurements SET launch = ?2 WHERE id = (SELECT bm.id FROM"
        " main.measurements bm JOIN main.runs br ON br.id = bm.run_id JOIN main.problems bp"
        " ON bp.id = bm.problem_id JOIN src.measurements sm ON sm.config = bm.config"
        " AND sm.rung = bm.rung JOIN src.runs sr ON sr.id = sm.run_id AND sr.uuid = br.uuid"
        " JOIN src.problems sp ON sp.id = sm.problem_id AND sp.key = bp.key WHERE sm.id = ?1)",
        e);
    if (!st)
        return e->code;
    int rc = PT_OK;
    for (size_t i = 0; !rc && i < db_sel_count(x); i++) {
        if (!sel_is_set(x, i))
            continue;
        const db_sel_row *r = db_sel_row_at(x, i);
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, r->id);
        db__bind_text(st, 2, r->launch);
        int src = db__step(b, st);
        if (src != SQLITE_DONE)
            rc = db__fail(b, src, "adding launch contracts", e);
    }
    sqlite3_finalize(st);
    return rc;
}

int db_export_bundle(db_store *s, const char *gpu, const char *match, const char *path,
                     int *nrows, pt_err *e)
{
    if (db__is_store_file(s, path))
        return pt_errf(e, PT_EINVAL, "%s: is the store being exported; give another --out",
                       path);
    struct stat sb;
    if (stat(path, &sb) == 0)
        return pt_errf(e, PT_EINVAL, "%s: already exists; a bundle is always a new file", path);
    db_export_sel *x = NULL;
    int rc = db_export_select(s, gpu, match, NULL, &x, NULL, e);
    if (!rc)
        rc = bundle_of(s, x, path, nrows, e);
    db_export_sel_free(x);
    return rc;
}

bool db__is_store_file(db_store *s, const char *path)
{
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    char buf[4096];
    for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", s->path, side[i]);
        if (pt_same_file(buf, path))
            return true;
    }
    return false;
}

/* path names a file that can be written (not the store, not a
 * directory, in a directory that exists). */
static int out_ok(db_store *s, const char *path, pt_err *e)
{
    if (!path || !*path)
        return pt_errf(e, PT_EINVAL, "no output file given (--out FILE)");
    if (db__is_store_file(s, path))
        return pt_errf(e, PT_EINVAL, "%s: is the store being exported; give another --out",
                       path);
    /* a path that cannot name a file is bad input; a write that fails is I/O */
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return pt_errf(e, PT_EINVAL, "cannot write '%s': is a directory", path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *(slash == dir ? slash + 1 : slash) = '\0';
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return pt_errf(e, PT_EINVAL, "cannot write '%s': %s: No such file or directory", path,
                           dir);
    }
    return PT_OK;
}

static int file_of(db_store *s, db_format f, const db_export_sel *x, const char *path,
                   int *nrows, pt_err *e)
{
    if (f == DB_FMT_BUNDLE)
        return bundle_of(s, x, path, nrows, e);
    pt_buf b;
    pt_buf_init(&b);
    int rc = text_of(s, f, x, &b, nrows, e); /* the caller checked the store */
    pt_wfile w;
    if (!rc)
        rc = pt_wfile_open(&w, path, e);
    if (!rc) {
        if (b.len && fwrite(b.s, 1, b.len, w.f) != b.len) {
            rc = pt_errf(e, PT_EIO, "cannot write '%s': %s", path, strerror(errno));
            pt_wfile_abort(&w);
        } else
            rc = pt_wfile_commit(&w, e);
    }
    pt_buf_free(&b);
    return rc;
}

int db_export_file(db_store *s, db_format f, const char *gpu, const char *match,
                   const char *path, int *nrows, pt_err *e)
{
    int rc = out_ok(s, path, e);
    if (rc)
        return rc;
    if (f == DB_FMT_BUNDLE)
        return db_export_bundle(s, gpu, match, path, nrows, e);
    db_export_sel *x = NULL;
    rc = db_export_select(s, gpu, match, NULL, &x, NULL, e);
    if (!rc)
        rc = file_of(s, f, x, path, nrows, e);
    db_export_sel_free(x);
    return rc;
}

int db_export_sel_file(db_store *s, db_format f, const db_export_sel *x, const char *path,
                       int *nrows, pt_err *e)
{
    int rc = out_ok(s, path, e);
    return rc ? rc : file_of(s, f, x, path, nrows, e);
}

/* ---- the rows to export: the winners, or a cover (issue 14 item 7) -------- */

typedef struct sel_item {
    db_sel_row r;
    bool set; /* launch replaced by db_sel_set_launch */
} sel_item;

struct db_export_sel {
    sel_item *v;
    size_t n, cap;
};

size_t db_sel_count(const db_export_sel *x) { return x ? x->n : 0; }
const db_sel_row *db_sel_row_at(const db_export_sel *x, size_t i) { return &x->v[i].r; }
static bool sel_is_set(const db_export_sel *x, size_t i) { return x->v[i].set; }

static void row_free(db_sel_row *r)
{
    char *p[] = {(char *)r->fp_key,      (char *)r->op,     (char *)r->problem_key,
                 (char *)r->problem_name, (char *)r->config, (char *)r->arch,
                 (char *)r->kernel_hash,  (char *)r->launch, (char *)r->winner_kernel};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

void db_export_sel_free(db_export_sel *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->n; i++)
        row_free(&x->v[i].r);
    free(x->v);
    free(x);
}

int db_sel_set_launch(db_export_sel *x, size_t i, const char *launch, pt_err *e)
{
    char *d = strdup(launch);
    if (!d)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    free((char *)x->v[i].r.launch);
    x->v[i].r.launch = d;
    x->v[i].r.contract = strstr(d, "\"contract\"") != NULL;
    x->v[i].set = true;
    return PT_OK;
}

/* Every column of the export for one measurement (db__winner_select's,
 * from the measurement instead of the winners table). */
static const char sel_select[] =
    "SELECT m.id"
#define X(id, expr) ", " expr
    DB_WCOLS(X)
#undef X
    " FROM measurements m JOIN runs r ON r.id = m.run_id"
    " JOIN fingerprints f ON f.id = r.fingerprint_id"
    " JOIN problems p ON p.id = m.problem_id"
    " LEFT JOIN kernels k ON k.id = m.kernel_id"
    " LEFT JOIN cubins c ON c.kernel_id = m.kernel_id AND c.arch = r.arch"
    " WHERE m.id = ?1";

static int sel_rows(db_store *s, const db_export_sel *x,
                    int (*fn)(void *ctx, sqlite3_stmt *st, const db_winner *w), void *ctx,
                    pt_err *e)
{
    sqlite3_stmt *st = db__prepare(s, sel_select, e);
    if (!st)
        return e->code;
    int rc = PT_OK;
    for (size_t i = 0; !rc && i < db_sel_count(x); i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, x->v[i].r.id);
        int src = db__step(s, st);
        if (src != SQLITE_ROW) {
            rc = src == SQLITE_DONE ? pt_errf(e, PT_EIO, "%s: measurement %lld vanished", s->path,
                                              (long long)x->v[i].r.id)
                                    : db__fail(s, src, "reading a row to export", e);
            break;
        }
        db_winner w;
        db__winner_row(st, &w);
        w.launch = x->v[i].r.launch; /* with the contract an export added */
        rc = fn(ctx, st, &w);
    }
    sqlite3_finalize(st);
    return rc;
}

static char *xdup(const char *s, bool *oom)
{
    char *d = strdup(s ? s : "");
    if (!d)
        *oom = true;
    return d;
}

static int sel_push(db_export_sel *x, const db_sel_row *r, pt_err *e)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 32;
        sel_item *v = realloc(x->v, cap * sizeof *v);
        if (!v)
            return pt_errf(e, PT_ENOMEM, "out of memory");
        x->v = v;
        x->cap = cap;
    }
    bool oom = false;
    sel_item it = {.r = *r};
    it.r.fp_key = xdup(r->fp_key, &oom);
    it.r.op = xdup(r->op, &oom);
    it.r.problem_key = xdup(r->problem_key, &oom);
    it.r.problem_name = xdup(r->problem_name, &oom);
    it.r.config = xdup(r->config, &oom);
    it.r.arch = xdup(r->arch, &oom);
    it.r.kernel_hash = xdup(r->kernel_hash, &oom);
    it.r.launch = xdup(r->launch, &oom);
    it.r.winner_kernel = xdup(r->winner_kernel, &oom);
    it.r.contract = strstr(it.r.launch ? it.r.launch : "", "\"contract\"") != NULL;
    x->v[x->n++] = it; /* freed with the selection, whole or not */
    return oom ? pt_errf(e, PT_ENOMEM, "out of memory") : PT_OK;
}

/* A row of the export from a statement over sel_select's columns. */
static db_sel_row row_of(sqlite3_stmt *st)
{
#define T(col) db__col_text(st, DB_WC_##col)
    db_sel_row r = {
        .id = sqlite3_column_int64(st, DB_WC_M_ID),
        .fp_key = T(FP_KEY),
        .op = T(P_OP),
        .problem_key = T(P_KEY),
        .problem_name = T(P_NAME),
        .config = T(M_CONFIG),
        .arch = T(R_ARCH),
        .kernel_hash = T(K_HASH),
        .launch = T(M_LAUNCH),
        .ptx_version = sqlite3_column_int(st, DB_WC_FP_PTX),
        .t_median = db__col_double(st, DB_WC_M_TMEDIAN),
    };
#undef T
    r.winner_kernel = r.kernel_hash;
    r.winner_s = r.t_median;
    r.slowdown = 0;
    return r;
}

static int collect_winner(void *ctx, sqlite3_stmt *st, const db_winner *w)
{
    (void)w;
    struct {
        db_export_sel *x;
        pt_err *e;
    } *c = ctx;
    db_sel_row r = row_of(st);
    return sel_push(c->x, &r, c->e);
}

/* ---- the cover ---------------------------------------------------------- *
 * Per fingerprint: problems p (the table's winners), kernels k (distinct
 * kernel hashes, sorted), and e[k][p] = t(k, p) / t_winner(p) - 1, where
 * t(k, p) is the fastest final ok verified row of kernel k on problem p of
 * the winner's provenance (measured rows against a measured winner, cost-
 * model estimates against an estimate; mock rows are never exported), and
 * INFINITY where k was not measured and verified on p or is beyond the
 * slowdown bound there. A set S serves every problem when each column has a
 * finite entry in S; each problem takes the fastest kernel of S. The
 * objective is (|S|, worst, mean) with a slowdown bound, (worst, mean, |S|)
 * with only --max-kernels, subject to |S| <= max_kernels. */

enum { COVER_EXACT_MAX = 64, COVER_NODES = 2000000 };

typedef struct cover {
    int np, nk;
    double *e; /* nk x np */
    int max_k; /* INT32_MAX: none */
    bool by_count;
    /* the exact search */
    int *order;
    double *suffix; /* (nk + 1) x np: min over order[i..] */
    double *cur;    /* (nk + 1) x np: per depth */
    double best[3];
    uint64_t best_set, set;
    bool have_best;
    long nodes;
    bool aborted;
} cover;

#define E(c, k, p) ((c)->e[(size_t)(k) * (size_t)(c)->np + (size_t)(p)])

static void objective(const cover *c, int count, double worst, double mean, double o[3])
{
    if (c->by_count) {
        o[0] = count;
        o[1] = worst;
        o[2] = mean;
    } else {
        o[0] = worst;
        o[1] = mean;
        o[2] = count;
    }
}

/* a < b lexicographically, with a tolerance for sums of slowdowns */
static int obj_cmp(const double a[3], const double b[3])
{
    for (int i = 0; i < 3; i++) {
        double tol = 1e-12 * (1 + fabs(a[i]) + fabs(b[i]));
        if (a[i] < b[i] - tol)
            return -1;
        if (a[i] > b[i] + tol)
            return 1;
    }
    return 0;
}

/* worst and mean of the best entry per problem over the set pick; false
 * when some problem is not served */
static bool set_figures(const cover *c, const bool *pick, double *worst, double *mean, int *count)
{
    double w = 0, sum = 0;
    *count = 0;
    for (int k = 0; k < c->nk; k++)
        *count += pick[k];
    for (int p = 0; p < c->np; p++) {
        double b = INFINITY;
        for (int k = 0; k < c->nk; k++)
            if (pick[k] && E(c, k, p) < b)
                b = E(c, k, p);
        if (!isfinite(b))
            return false;
        w = b > w ? b : w;
        sum += b;
    }
    *worst = w;
    *mean = c->np ? sum / c->np : 0;
    return true;
}

/* Greedy set cover at threshold T (entries above it do not serve): the
 * kernel serving the most problems left, then the least sum of their
 * slowdowns, then the smaller hash. The count, or -1 when some problem has
 * no kernel within T or the cover would exceed limit. */
static int greedy_at(const cover *c, double T, int limit, bool *pick, bool *left)
{
    for (int k = 0; k < c->nk; k++)
        pick[k] = false;
    int nleft = c->np, count = 0;
    for (int p = 0; p < c->np; p++)
        left[p] = true;
    while (nleft > 0) {
        int bk = -1, bn = 0;
        double bs = INFINITY;
        for (int k = 0; k < c->nk; k++) {
            if (pick[k])
                continue;
            int n = 0;
            double sum = 0;
            for (int p = 0; p < c->np; p++)
                if (left[p] && isfinite(E(c, k, p)) && E(c, k, p) <= T) {
                    n++;
                    sum += E(c, k, p);
                }
            if (n > bn || (n == bn && n > 0 && sum < bs)) {
                bk = k;
                bn = n;
                bs = sum;
            }
        }
        if (bk < 0 || count == limit)
            return -1;
        pick[bk] = true;
        count++;
        for (int p = 0; p < c->np; p++)
            if (left[p] && isfinite(E(c, bk, p)) && E(c, bk, p) <= T) {
                left[p] = false;
                nleft--;
            }
    }
    return count;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The greedy answer: with a bound, the greedy cover at it (then slots left
 * fill as below); else the least threshold (binary search over the
 * entries) whose greedy cover fits max_k, then up to max_k kernels added
 * one at a time while one lowers the mean. false: none found. */
static bool greedy(const cover *c, bool *pick, bool *left)
{
    int limit = c->max_k;
    if (c->by_count)
        return greedy_at(c, INFINITY, limit, pick, left) >= 0;
    size_t n = 0;
    double *t = malloc((size_t)c->nk * (size_t)c->np * sizeof *t + sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < (size_t)c->nk * (size_t)c->np; i++)
        if (isfinite(c->e[i]))
            t[n++] = c->e[i];
    qsort(t, n, sizeof *t, dcmp);
    size_t lo = 0, hi = n; /* t[hi-1] is the largest: every entry serves */
    if (n == 0 || greedy_at(c, t[n - 1], limit, pick, left) < 0) {
        free(t);
        return false;
    }
    hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (greedy_at(c, t[mid], limit, pick, left) >= 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    greedy_at(c, t[hi], limit, pick, left);
    free(t);
    int count;
    double w, m;
    set_figures(c, pick, &w, &m, &count);
    while (count < limit) {
        int bk = -1;
        double bm = m;
        for (int k = 0; k < c->nk; k++) {
            if (pick[k])
                continue;
            pick[k] = true;
            double w2, m2;
            int c2;
            set_figures(c, pick, &w2, &m2, &c2);
            pick[k] = false;
            if (m2 < bm - 1e-12 && w2 <= w + 1e-12) {
                bm = m2;
                bk = k;
            }
        }
        if (bk < 0)
            break;
        pick[bk] = true;
        set_figures(c, pick, &w, &m, &count);
    }
    return true;
}

/* Branch and bound over the kernels in order: include or leave out each;
 * a node is cut when some problem can no longer be served, when it holds
 * max_k kernels and problems are left, or when the objective's lower bound
 * (per problem the best of the set and of every kernel still to decide) is
 * no better than the best set found. */
static void search(cover *c, int i, int count)
{
    /* every node costs O(problems): about 2e8 problem steps at most */
    long limit = 200000000L / (c->np > 0 ? c->np : 1);
    limit = limit > COVER_NODES ? COVER_NODES : limit < 10000 ? 10000 : limit;
    if (++c->nodes > limit) {
        c->aborted = true;
        return;
    }
    const double *cur = c->cur + (size_t)i * (size_t)c->np;
    const double *suf = c->suffix + (size_t)i * (size_t)c->np;
    double w = 0, sum = 0, cw = 0, csum = 0;
    bool all = true;
    for (int p = 0; p < c->np; p++) {
        double lb = cur[p] < suf[p] ? cur[p] : suf[p];
        if (!isfinite(lb))
            return;
        w = lb > w ? lb : w;
        sum += lb;
        all = all && isfinite(cur[p]);
        cw = cur[p] > cw ? cur[p] : cw;
        csum += cur[p];
    }
    int clb = count + (all ? 0 : 1);
    if (clb > c->max_k)
        return;
    double lbo[3];
    objective(c, clb, w, sum / c->np, lbo);
    if (c->have_best && obj_cmp(lbo, c->best) >= 0)
        return;
    if (all) {
        double o[3];
        objective(c, count, cw, csum / c->np, o);
        if (!c->have_best || obj_cmp(o, c->best) < 0) {
            memcpy(c->best, o, sizeof o);
            c->best_set = c->set;
            c->have_best = true;
        }
        if (c->by_count) /* more kernels only cost more */
            return;
    }
    if (i == c->nk)
        return;
    int k = c->order[i];
    double *next = c->cur + (size_t)(i + 1) * (size_t)c->np;
    bool helps = false;
    for (int p = 0; p < c->np; p++) {
        next[p] = E(c, k, p) < cur[p] ? E(c, k, p) : cur[p];
        helps = helps || E(c, k, p) < cur[p];
    }
    if (helps && count < c->max_k) {
        c->set |= 1ull << i;
        search(c, i + 1, count + 1);
        c->set &= ~(1ull << i);
    }
    memcpy(next, cur, (size_t)c->np * sizeof *next);
    search(c, i + 1, count);
}

/* The exact search for nk <= 64, seeded with the greedy set; *exact false
 * when it ran out of nodes (the best set found is kept). */
static int exact(cover *c, bool *pick, bool *done, pt_err *e)
{
    *done = false;
    size_t np = (size_t)c->np, nk = (size_t)c->nk;
    c->order = malloc(nk * sizeof *c->order);
    c->suffix = malloc((nk + 1) * np * sizeof *c->suffix);
    c->cur = malloc((nk + 1) * np * sizeof *c->cur);
    int *served = calloc(nk, sizeof *served);
    if (!c->order || !c->suffix || !c->cur || !served) {
        free(served);
        return pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
    }
    for (size_t k = 0; k < nk; k++) {
        c->order[k] = (int)k;
        for (size_t p = 0; p < np; p++)
            served[k] += isfinite(E(c, k, p));
    }
    /* the kernels serving the most first (a good set early), then by hash */
    for (size_t i = 1; i < nk; i++)
        for (size_t j = i; j > 0 && served[c->order[j]] > served[c->order[j - 1]]; j--) {
            int t = c->order[j];
            c->order[j] = c->order[j - 1];
            c->order[j - 1] = t;
        }
    for (size_t p = 0; p < np; p++)
        c->suffix[nk * np + p] = INFINITY;
    for (size_t i = nk; i-- > 0;)
        for (size_t p = 0; p < np; p++) {
            double v = E(c, c->order[i], p), s = c->suffix[(i + 1) * np + p];
            c->suffix[i * np + p] = v < s ? v : s;
        }
    for (size_t p = 0; p < np; p++)
        c->cur[p] = INFINITY;
    /* the incumbent: the greedy set given */
    double w, m;
    int count;
    if (set_figures(c, pick, &w, &m, &count) && count <= c->max_k) {
        objective(c, count, w, m, c->best);
        c->have_best = true;
        c->best_set = 0;
        for (size_t i = 0; i < nk; i++)
            if (pick[c->order[i]])
                c->best_set |= 1ull << i;
    }
    c->set = 0;
    search(c, 0, 0);
    if (c->have_best)
        for (size_t i = 0; i < nk; i++)
            pick[c->order[i]] = c->best_set >> i & 1;
    *done = !c->aborted;
    free(served);
    return PT_OK;
}

/* One fingerprint's problems: the winners x->v[from..to) become the rows of
 * the cover. */
typedef struct cand {
    char hash[17];
    int p;
    int64_t id;
    double t;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    int c = strcmp(x->hash, y->hash);
    if (c)
        return c;
    if (x->p != y->p)
        return x->p - y->p;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int group_cover(db_store *s, db_export_sel *x, size_t from, size_t to,
                       const db_cover_opts *o, db_export_sel *out, db_cover_summary *sum,
                       pt_err *e)
{
    int np = (int)(to - from);
    sqlite3_stmt *q = db__prepare(
        s,
        "SELECT k.hash, m.id, m.t_median FROM winners w JOIN measurements wm"
        " ON wm.id = w.measurement_id JOIN runs r ON r.fingerprint_id = w.fingerprint_id"
        " JOIN measurements m ON m.run_id = r.id AND m.problem_id = w.problem_id"
        " JOIN kernels k ON k.id = m.kernel_id WHERE w.measurement_id = ?1"
        " AND m.status = 'ok' AND m.final = 1 AND m.verified = 1 AND m.source = wm.source"
        " AND m.source <> 'mock' AND m.t_median > 0"
        " ORDER BY k.hash, m.t_median, m.config, m.id",
        e);
    if (!q)
        return e->code;
    cand *cs = NULL;
    size_t nc = 0, cap = 0;
    int rc = PT_OK;
    for (int p = 0; !rc && p < np; p++) {
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, x->v[from + (size_t)p].r.id);
        int src;
        while ((src = db__step(s, q)) == SQLITE_ROW) {
            if (nc == cap) {
                size_t nc2 = cap ? 2 * cap : 256;
                cand *v = realloc(cs, nc2 * sizeof *v);
                if (!v) {
                    rc = pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
                    break;
                }
                cs = v;
                cap = nc2;
            }
            cand c = {.p = p, .id = sqlite3_column_int64(q, 1),
                      .t = sqlite3_column_double(q, 2)};
            snprintf(c.hash, sizeof c.hash, "%s", db__col_text(q, 0));
            cs[nc++] = c;
        }
        if (!rc && src != SQLITE_DONE)
            rc = db__fail(s, src, "reading the measurements", e);
    }
    sqlite3_finalize(q);
    if (rc) {
        free(cs);
        return rc;
    }
    /* per (kernel, problem) the fastest row; a kernel serving one problem
     * only and not its best is beaten by that one everywhere: left out */
    qsort(cs, nc, sizeof *cs, cand_cmp);
    double *bestp = malloc((size_t)np * sizeof *bestp);
    int *nserve = NULL;
    if (!bestp) {
        free(cs);
        return pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
    }
    for (int p = 0; p < np; p++)
        bestp[p] = INFINITY;
    size_t m = 0;
    for (size_t i = 0; i < nc; i++) {
        if (m && strcmp(cs[m - 1].hash, cs[i].hash) == 0 && cs[m - 1].p == cs[i].p)
            continue; /* a slower row of the same kernel on the same problem */
        cs[m++] = cs[i];
    }
    nc = m;
    double bound = o->max_slowdown >= 0 ? o->max_slowdown : INFINITY;
    for (size_t i = 0; i < nc; i++) {
        double w = x->v[from + (size_t)cs[i].p].r.t_median;
        double sl = cs[i].t / w - 1;
        if (sl < 0)
            sl = 0; /* the winner is the fastest row; rounding only */
        cs[i].t = sl; /* from here on: the slowdown */
        if (sl < bestp[cs[i].p])
            bestp[cs[i].p] = sl;
    }
    /* a problem nothing serves within the bound: the one-line refusal */
    for (int p = 0; p < np && !rc; p++) {
        const db_sel_row *w = &x->v[from + (size_t)p].r;
        if (!isfinite(bestp[p]))
            rc = pt_errf(e, PT_EINVAL,
                         "no kernel serves '%s' (fingerprint %s): it has no verified final ok "
                         "row (a kernel serves a problem only where it was measured and "
                         "verified)",
                         w->problem_key, w->fp_key);
        else if (bestp[p] > bound * (1 + 1e-12))
            rc = pt_errf(e, PT_EINVAL,
                         "--max-slowdown %.4g%%: '%s' (fingerprint %s) cannot be served within "
                         "it: its fastest verified kernel is %.2f%% slower than its winner",
                         bound * 100, w->problem_key, w->fp_key, bestp[p] * 100);
    }
    /* kernels: distinct hashes with at least one entry within the bound */
    char (*hashes)[17] = NULL;
    int nk = 0;
    if (!rc) {
        hashes = malloc((nc + 1) * sizeof *hashes);
        nserve = calloc(nc + 1, sizeof *nserve);
        if (!hashes || !nserve)
            rc = pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
    }
    for (size_t i = 0; !rc && i < nc; i++) {
        if (cs[i].t > bound * (1 + 1e-12)) {
            cs[i].p = -1; /* does not serve within the bound */
            continue;
        }
        if (!nk || strcmp(hashes[nk - 1], cs[i].hash) != 0)
            snprintf(hashes[nk++], 17, "%s", cs[i].hash);
        nserve[nk - 1]++;
    }
    cover c = {.np = np, .max_k = o->max_kernels > 0 ? o->max_kernels : INT32_MAX,
               .by_count = o->max_slowdown >= 0};
    int64_t *ids = NULL;
    bool *pick = NULL, *left = NULL;
    if (!rc) {
        /* a kernel serving one problem that is not the best there is beaten */
        int *keep = calloc((size_t)nk + 1, sizeof *keep);
        ids = malloc(((size_t)nk + 1) * (size_t)np * sizeof *ids);
        c.e = malloc(((size_t)nk + 1) * (size_t)np * sizeof *c.e);
        if (!keep || !ids || !c.e)
            rc = pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
        int k = -1, kk = -1;
        for (size_t i = 0; !rc && i < nc; i++) {
            if (cs[i].p < 0)
                continue;
            if (k < 0 || strcmp(hashes[k], cs[i].hash) != 0) {
                k++;
                bool single_beaten = nserve[k] == 1 && cs[i].t > bestp[cs[i].p];
                keep[k] = !single_beaten;
                if (keep[k]) {
                    kk++;
                    if (kk != k)
                        memcpy(hashes[kk], hashes[k], sizeof hashes[0]);
                    for (int p = 0; p < np; p++) {
                        E(&c, kk, p) = INFINITY;
                        ids[(size_t)kk * (size_t)np + (size_t)p] = 0;
                    }
                }
            }
            if (keep[k]) {
                E(&c, kk, cs[i].p) = cs[i].t;
                ids[(size_t)kk * (size_t)np + (size_t)cs[i].p] = cs[i].id;
            }
        }
        c.nk = kk + 1;
        free(keep);
    }
    /* kernels beaten everywhere by another (equal: the later hash goes) */
    if (!rc && (double)c.nk * c.nk * np <= 2e8) { /* O(k^2 p) */
        bool *gone = calloc((size_t)c.nk + 1, sizeof *gone);
        if (!gone)
            rc = pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
        for (int a = 0; !rc && a < c.nk; a++)
            for (int b = 0; b < c.nk && !gone[a]; b++) {
                if (a == b || gone[b])
                    continue;
                bool le = true, lt = false;
                for (int p = 0; p < np && le; p++) {
                    le = E(&c, b, p) <= E(&c, a, p);
                    lt = lt || E(&c, b, p) < E(&c, a, p);
                }
                if (le && (lt || b < a))
                    gone[a] = true;
            }
        int kk = 0;
        for (int a = 0; !rc && a < c.nk; a++) {
            if (gone[a])
                continue;
            if (kk != a) {
                memmove(&E(&c, kk, 0), &E(&c, a, 0), (size_t)np * sizeof *c.e);
                memmove(&ids[(size_t)kk * (size_t)np], &ids[(size_t)a * (size_t)np],
                        (size_t)np * sizeof *ids);
                memcpy(hashes[kk], hashes[a], sizeof hashes[0]);
            }
            kk++;
        }
        if (!rc)
            c.nk = kk;
        free(gone);
    }
    if (!rc) {
        pick = calloc((size_t)c.nk + 1, sizeof *pick);
        left = calloc((size_t)np + 1, sizeof *left);
        if (!pick || !left)
            rc = pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
    }
    bool found = false, proven = false;
    if (!rc) {
        found = greedy(&c, pick, left);
        if (c.nk <= COVER_EXACT_MAX) {
            if (!found)
                for (int k = 0; k < c.nk; k++)
                    pick[k] = false;
            rc = exact(&c, pick, &proven, e);
            found = c.have_best;
        }
    }
    if (!rc && !found) {
        /* name a problem the kernels that serve the most leave out */
        bool *pk = pick;
        cover c2 = c;
        c2.max_k = INT32_MAX;
        int n = greedy_at(&c2, INFINITY, INT32_MAX, pk, left);
        (void)n;
        int kept = 0;
        /* keep the first max_k the greedy took, in the order it took them */
        for (int k = 0; k < c.nk; k++)
            pk[k] = false;
        for (int p = 0; p < np; p++)
            left[p] = true;
        int lp = -1;
        for (kept = 0; kept < c.max_k; kept++) {
            int bk = -1, bn = 0;
            for (int k = 0; k < c.nk; k++) {
                int cnt = 0;
                for (int p = 0; p < np; p++)
                    cnt += !pk[k] && left[p] && isfinite(E(&c, k, p));
                if (cnt > bn) {
                    bn = cnt;
                    bk = k;
                }
            }
            if (bk < 0)
                break;
            pk[bk] = true;
            for (int p = 0; p < np; p++)
                if (isfinite(E(&c, bk, p)))
                    left[p] = false;
        }
        for (int p = 0; p < np && lp < 0; p++)
            if (left[p])
                lp = p;
        const db_sel_row *w = &x->v[from + (size_t)(lp < 0 ? 0 : lp)].r;
        if (bound < INFINITY)
            rc = pt_errf(e, PT_EINVAL,
                         "--max-kernels %d --max-slowdown %.4g%%: no %d kernels serve every "
                         "problem of fingerprint %s within it: the %d that serve the most leave "
                         "'%s'%s",
                         c.max_k, bound * 100, c.max_k, w->fp_key, c.max_k, w->problem_key,
                         proven || c.nk <= COVER_EXACT_MAX ? "" : " (greedy search)");
        else
            rc = pt_errf(e, PT_EINVAL,
                         "--max-kernels %d: no %d kernels serve every problem of fingerprint "
                         "%s: the %d that serve the most leave '%s'",
                         c.max_k, c.max_k, w->fp_key, c.max_k, w->problem_key);
    }
    /* the rows: each problem's fastest kernel of the set */
    if (!rc) {
        sqlite3_stmt *st = db__prepare(s, sel_select, e);
        if (!st)
            rc = e->code;
        sum->exact = sum->exact && (c.nk <= COVER_EXACT_MAX && proven);
        bool *used = calloc((size_t)c.nk + 1, sizeof *used);
        if (!used)
            rc = pt_errf(e, PT_ENOMEM, "out of memory (the cover)");
        for (int p = 0; !rc && p < np; p++) {
            int bk = -1;
            for (int k = 0; k < c.nk; k++)
                if (pick[k] && (bk < 0 || E(&c, k, p) < E(&c, bk, p)))
                    bk = k;
            if (bk < 0 || !isfinite(E(&c, bk, p))) {
                rc = pt_errf(e, PT_EINVAL, "the cover leaves '%s' unserved (a bug)",
                             x->v[from + (size_t)p].r.problem_key);
                break;
            }
            if (!used[bk]) {
                used[bk] = true;
                sum->kernels++;
            }
            const db_sel_row *w = &x->v[from + (size_t)p].r;
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, ids[(size_t)bk * (size_t)np + (size_t)p]);
            int src = db__step(s, st);
            if (src != SQLITE_ROW) {
                rc = db__fail(s, src == SQLITE_DONE ? SQLITE_CORRUPT : src, "reading a row", e);
                break;
            }
            db_sel_row r = row_of(st);
            r.winner_kernel = w->kernel_hash;
            r.winner_s = w->t_median;
            r.slowdown = E(&c, bk, p);
            rc = sel_push(out, &r, e);
        }
        free(used);
        sqlite3_finalize(st);
    }
    free(pick);
    free(left);
    free(ids);
    free(c.e);
    free(c.order);
    free(c.suffix);
    free(c.cur);
    free(hashes);
    free(nserve);
    free(bestp);
    free(cs);
    return rc;
}

static int winner_kernels(const db_export_sel *x, size_t from, size_t to)
{
    int n = 0;
    for (size_t i = from; i < to; i++) {
        bool seen = false;
        for (size_t j = from; j < i && !seen; j++)
            seen = strcmp(x->v[j].r.kernel_hash, x->v[i].r.kernel_hash) == 0;
        n += !seen;
    }
    return n;
}

/* The stored compile times (the cubin's resource report, compile_ms) of
 * the table's distinct kernels, per fingerprint. */
static int compile_time(db_store *s, const db_export_sel *x, db_cover_summary *sum, pt_err *e)
{
    sqlite3_stmt *st = db__prepare(
        s,
        "SELECT c.resources FROM cubins c JOIN kernels k ON k.id = c.kernel_id"
        " WHERE k.hash = ?1 AND c.arch = ?2",
        e);
    if (!st)
        return e->code;
    int rc = PT_OK;
    sum->compile_s = 0;
    for (size_t i = 0; !rc && i < x->n; i++) {
        const db_sel_row *r = &x->v[i].r;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(x->v[j].r.kernel_hash, r->kernel_hash) == 0 &&
                   strcmp(x->v[j].r.fp_key, r->fp_key) == 0;
        if (seen)
            continue;
        sqlite3_reset(st);
        db__bind_text(st, 1, r->kernel_hash);
        db__bind_text(st, 2, r->arch);
        int src = db__step(s, st);
        if (src == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
            json_t *v = json_loads(db__col_text(st, 0), 0, NULL);
            json_t *ms = json_object_get(v, "compile_ms");
            if (json_is_number(ms) && json_number_value(ms) > 0) {
                sum->compile_s += json_number_value(ms) / 1e3;
                sum->compile_known++;
            }
            json_decref(v);
        } else if (src != SQLITE_ROW && src != SQLITE_DONE)
            rc = db__fail(s, src, "reading compile times", e);
    }
    sqlite3_finalize(st);
    return rc;
}

int db_export_select(db_store *s, const char *gpu, const char *match, const db_cover_opts *cover_o,
                     db_export_sel **out, db_cover_summary *sum, pt_err *e)
{
    *out = NULL;
    db_cover_summary dummy;
    if (!sum)
        sum = &dummy;
    memset(sum, 0, sizeof *sum);
    sum->exact = true;
    if (cover_o && cover_o->max_kernels < 0)
        return pt_errf(e, PT_EINVAL, "bad --max-kernels %d (an integer >= 1)",
                       cover_o->max_kernels);
    if (cover_o && !(cover_o->max_slowdown < 0) && !(cover_o->max_slowdown >= 0 &&
                                                     isfinite(cover_o->max_slowdown)))
        return pt_errf(e, PT_EINVAL, "bad --max-slowdown (a finite percentage >= 0)");
    bool cov = cover_o && (cover_o->max_kernels > 0 || cover_o->max_slowdown >= 0);
    /* a damaged index could hide winners: a table from a damaged store would
     * look complete and not be (the bundle checks its source the same way) */
    char msg[256];
    int irc = db_integrity(s, msg, sizeof msg, e);
    if (irc)
        return irc;
    db_export_sel *w = calloc(1, sizeof *w);
    if (!w)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    struct {
        db_export_sel *x;
        pt_err *e;
    } c = {w, e};
    int rc = db__winners_raw(s, gpu, match, collect_winner, &c, e);
    if (rc == PT_ENOMEM && !e->msg[0])
        pt_errf(e, rc, "out of memory");
    if (rc || !cov) {
        if (rc)
            db_export_sel_free(w);
        else {
            *out = w;
            sum->problems = (int)w->n;
        }
        return rc;
    }
    db_export_sel *x = calloc(1, sizeof *x);
    if (!x) {
        db_export_sel_free(w);
        return pt_errf(e, PT_ENOMEM, "out of memory");
    }
    double tot = 0;
    for (size_t from = 0; !rc && from < w->n;) {
        size_t to = from + 1;
        while (to < w->n && strcmp(w->v[to].r.fp_key, w->v[from].r.fp_key) == 0)
            to++;
        sum->winner_kernels += winner_kernels(w, from, to);
        rc = group_cover(s, w, from, to, cover_o, x, sum, e);
        from = to;
    }
    for (size_t i = 0; !rc && i < x->n; i++) {
        double sl = x->v[i].r.slowdown;
        sum->worst = sl > sum->worst ? sl : sum->worst;
        tot += sl;
    }
    sum->problems = (int)x->n;
    sum->mean = x->n ? tot / (double)x->n : 0;
    if (!rc)
        rc = compile_time(s, x, sum, e);
    db_export_sel_free(w);
    if (rc) {
        db_export_sel_free(x);
        return rc;
    }
    *out = x;
    return PT_OK;
}
