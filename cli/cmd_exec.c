/* ptxtune exec: run any PTX file on the CPU emulator with its detectors. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ptx/emu/emu.h"
#include "ptx/emu/tmap.h"
#include "ptx/parse.h"
#include "tuner/exec.h"
#include "tuner/npy.h"

static const char exec_usage[] =
    "usage: ptxtune exec FILE.ptx [--entry NAME] --grid X[,Y[,Z]] --block X[,Y[,Z]]\n"
    "                    [--cluster X[,Y[,Z]] [--cluster-nonportable]] [--smem BYTES] [--arch sm_XX]\n"
    "                    [--schedule lazy|eager|random:SEED] [--threads N]\n"
    "                    [--no-detect KINDS] [--smem-shift BYTES] [--timeout SECONDS]\n"
    "                    [--backend emu|cuda] --arg SPEC...\n"
    "Runs a PTX kernel on the CPU emulator. One --arg per kernel parameter, in order:\n"
    "  FILE.npy                input buffer from a .npy file; its device pointer is passed\n"
    "  out:FILE.npy:DTYPE:N    output buffer of N elements, poisoned before the run, saved\n"
    "  DTYPE:VALUE             scalar, e.g. u32:1024, s32:-1, u64:7, f32:0.5, f64:1e-3\n"
    "  tmap:SOURCE:DTYPE:SHAPE:BOX[:SWIZZLE[:OOB]]\n"
    "                          a CUtensorMap by value (.param .align 64 .b8 NAME[128]) over\n"
    "                          SOURCE: a .npy file (uploaded as a new buffer, converted to\n"
    "                          DTYPE) or @N, the buffer of argument N (0-based; e.g. an out:\n"
    "                          argument, for TMA stores). SHAPE and BOX outermost first like\n"
    "                          numpy (128x256, 64x64), rank 1-5, packed strides; SWIZZLE\n"
    "                          none|32|64|128 (default none); OOB zero|nan (default zero)\n"
    "DTYPE: f64 f32 f16 bf16 s8 u8 s16 u16 s32 u32 s64 u64 e4m3 e5m2 (tf32 too in a\n"
    "tmap); in .npy files bf16 is stored as uint16 bits and fp8 as uint8 bits.\n"
    "--smem: dynamic shared memory, up to what a CTA may use on the arch (227 KB on\n"
    "sm_90). --arch sm_90a (or sm_90 ...): the shared layout and limits of that arch\n"
    "(default: the file's .target). --cluster: CTAs per cluster (the grid a multiple,\n"
    "at most 8 CTAs; 16 with --cluster-nonportable, emulator only); the emulator runs\n"
    "a cluster's CTAs together. --schedule (emulator only): when TMA and bulk copies complete:\n"
    "lazy (default: when no warp can run), eager (at issue) or random:SEED.\n"
    "Detectors (all on; --no-detect takes a comma list): oob uninit race divergence\n"
    "cp_async misaligned deadlock.\n"
    "Shared memory is laid out as on the hardware of --arch (default: the file's\n"
    ".target; sm_90 and above reserve the first 1 KB), then shifted by --smem-shift\n"
    "bytes (a multiple of 16, default 128; 0: the hardware's layout) so a kernel\n"
    "that assumes where its arrays start is caught. Any access outside a declared\n"
    "shared array is out of bounds; the dynamic array has --smem bytes.\n"
    "--backend cuda runs it on a GPU instead (driver JIT, guard zones checked).\n"
    "--timeout bounds the emulator's wall-clock time (default 300 s; 0: none); the\n"
    "work guard also counts every CTA launched, so a huge grid ends early (step-cap).\n"
    "Reports and a summary (with the shared-memory bank conflicts) go to stderr.\n"
    "Exit: 0 clean, 1 a detector fired or the kernel faulted, 2 bad input (a launch\n"
    "the emulator refuses too), 4 no CUDA driver, 5 the emulator timed out (one\n"
    "line: the timeout report).\n";

enum { EXEC_EXIT_TIMEOUT = 5 };

static const struct option exec_opts[] = {
    {"entry", required_argument, 0, 'e'},   {"grid", required_argument, 0, 'g'},
    {"block", required_argument, 0, 'b'},   {"smem", required_argument, 0, 's'},
    {"arg", required_argument, 0, 'a'},     {"threads", required_argument, 0, 't'},
    {"no-detect", required_argument, 0, 'n'}, {"backend", required_argument, 0, 'B'},
    {"arch", required_argument, 0, 'A'},    {"smem-shift", required_argument, 0, 'S'},
    {"timeout", required_argument, 0, 'T'}, {"cluster", required_argument, 0, 'c'},
    {"schedule", required_argument, 0, 'C'}, {"cluster-nonportable", no_argument, 0, 'P'},
    {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
};

static void parse_dim3(const char *s, const char *what, unsigned d[3])
{
    d[0] = d[1] = d[2] = 1;
    const char *p = s;
    for (int i = 0; i < 3; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 0x7fffffffL)
            cli_die(2, "bad --%s '%s' (expected X[,Y[,Z]] with positive integers)", what, s);
        d[i] = (unsigned)v;
        if (*end == '\0')
            return;
        if (*end != ',' || i == 2)
            cli_die(2, "bad --%s '%s' (expected X[,Y[,Z]] with positive integers)", what, s);
        p = end + 1;
    }
}

typedef struct out_spec {
    const char *path;
    pt_dtype dt;
    int64_t n;
    void *host; /* the bytes read back */
} out_spec;

typedef enum { ARG_IN, ARG_OUT, ARG_SCALAR, ARG_TMAP } arg_kind;
typedef struct exec_arg {
    arg_kind kind;
    void *data;        /* IN, TMAP over a .npy: the payload */
    const char *name;  /* IN, TMAP: the file, for reports */
    size_t bytes;
    out_spec *out;     /* OUT */
    unsigned char scalar[16];
    uint64_t dptr;     /* emu: the device address of an OUT (and of every buffer) */
    int of;            /* TMAP: the argument whose buffer it maps; -1: its own */
    emu_tmap_desc tmap; /* TMAP: gaddr 0 (the buffer's start) */
    const char *spec;  /* the --arg text, for messages */
} exec_arg;

/* The launch geometry both backends take. */
typedef struct exec_geom {
    unsigned grid[3], block[3], cluster[3];
    bool nonportable; /* --cluster-nonportable: up to 16 CTAs a cluster */
    size_t smem;
} exec_geom;

static int run_emu(const emu_opts *eo, ptx_module *m, const char *entry, const exec_geom *g,
                   int nargs, exec_arg *xa);
static int run_cuda(const char *entry, const char *text, size_t len, const exec_geom *g,
                    int nargs, exec_arg *xa);

/* A scalar DTYPE:VALUE into bytes (size of the dtype). */
static size_t parse_scalar(const char *spec, const char *colon, unsigned char *bytes, int param)
{
    char dname[16];
    size_t dl = (size_t)(colon - spec);
    if (dl >= sizeof dname)
        cli_die(2, "bad --arg '%s' for parameter %d", spec, param + 1);
    memcpy(dname, spec, dl);
    dname[dl] = '\0';
    pt_dtype dt;
    pt_err e = {0};
    if (pt_dtype_parse(dname, &dt, &e))
        cli_die(2, "--arg '%s': %s", spec, e.msg);
    const char *v = colon + 1;
    char *end;
    errno = 0;
    size_t size = (size_t)pt_dtype_get(dt)->bytes;
    if (pt_dtype_get(dt)->is_float) {
        double x = strtod(v, &end);
        if (end == v || *end || errno)
            cli_die(2, "bad value '%s' in --arg '%s'", v, spec);
        pt_dtype_store(dt, bytes, 0, x);
    } else {
        bool sgn = dname[0] == 's';
        long long x = sgn ? strtoll(v, &end, 0) : (long long)strtoull(v, &end, 0);
        if (end == v || *end || errno || (!sgn && v[0] == '-'))
            cli_die(2, "bad value '%s' in --arg '%s'", v, spec);
        int bits = (int)size * 8;
        if (bits < 64 && (sgn ? (x < -(1LL << (bits - 1)) || x >= (1LL << (bits - 1)))
                              : ((unsigned long long)x >> bits) != 0))
            cli_die(2, "value '%s' does not fit %s in --arg '%s'", v, dname, spec);
        memcpy(bytes, &x, size); /* little-endian: the low bytes */
    }
    return size;
}

/* One positive integer per 'x'-separated field of s (outermost first), at
 * most max; the count, or 0 on a malformed list. */
static int parse_dims(const char *s, uint64_t *out, int max, uint64_t limit)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9' || n == max)
            return 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || v < 1 || v > limit)
            return 0;
        out[n++] = v;
        if (*end == '\0')
            return n;
        if (*end != 'x')
            return 0;
        p = end + 1;
    }
}

/* The CUtensorMapDataType a dtype is copied as (8-bit floats and ints as
 * UINT8, as CUTLASS does; 16-bit ints as UINT16). */
static int tmap_dtype(pt_dtype dt)
{
    switch (dt) {
    case PT_F64: return EMU_TMAP_F64;
    case PT_F32: return EMU_TMAP_F32;
    case PT_TF32: return EMU_TMAP_TF32;
    case PT_F16: return EMU_TMAP_F16;
    case PT_BF16: return EMU_TMAP_BF16;
    case PT_S32: return EMU_TMAP_S32;
    case PT_U32: return EMU_TMAP_U32;
    case PT_S64: return EMU_TMAP_S64;
    case PT_U64: return EMU_TMAP_U64;
    case PT_S16:
    case PT_U16: return EMU_TMAP_U16;
    default: return EMU_TMAP_U8; /* e4m3 e5m2 s8 u8 */
    }
}

/* tmap:SOURCE:DTYPE:SHAPE:BOX[:SWIZZLE[:OOB]] into a (the map's gaddr is 0:
 * the start of its buffer, placed at run time). Every bad field: one line
 * naming it, exit 2. */
static void parse_tmap(const char *spec, int param, int nargs, exec_arg *a)
{
    char *copy = strdup(spec + 5);
    if (!copy)
        cli_die(1, "out of memory");
    char *f[7];
    int nf = 0;
    for (char *p = copy, *c; nf < 7; p = c + 1) {
        f[nf++] = p;
        if (!(c = strchr(p, ':')))
            break;
        *c = '\0';
    }
    if (nf < 4 || nf > 6)
        cli_die(2, "bad --arg '%s' (tmap:SOURCE:DTYPE:SHAPE:BOX[:SWIZZLE[:OOB]])", spec);
    pt_dtype dt;
    pt_err e = {0};
    if (pt_dtype_parse(f[1], &dt, &e))
        cli_die(2, "--arg '%s': %s", spec, e.msg);
    emu_tmap_desc *d = &a->tmap;
    memset(d, 0, sizeof *d);
    d->dtype = tmap_dtype(dt);
    uint64_t shape[EMU_TMAP_MAX_RANK], box[EMU_TMAP_MAX_RANK];
    int rank = parse_dims(f[2], shape, EMU_TMAP_MAX_RANK, 1ull << 32);
    if (!rank)
        cli_die(2, "bad tmap shape '%s' in --arg '%s' (1 to 5 sizes, outermost first: 128x256)",
                f[2], spec);
    int nbox = parse_dims(f[3], box, EMU_TMAP_MAX_RANK, 256);
    if (!nbox)
        cli_die(2, "bad tmap box '%s' in --arg '%s' (sizes 1..256, outermost first: 64x64)", f[3],
                spec);
    if (nbox != rank)
        cli_die(2, "tmap box '%s' has %d sizes but shape '%s' has %d in --arg '%s'", f[3], nbox, f[2],
                rank, spec);
    d->rank = rank;
    uint64_t es = (uint64_t)emu_tmap_elem_bytes(d->dtype), stride = es, elems = 1;
    for (int i = 0; i < rank; i++) { /* dim 0 innermost: numpy's last */
        d->dims[i] = shape[rank - 1 - i];
        d->box[i] = (uint32_t)box[rank - 1 - i];
        d->estrides[i] = 1;
        if (i)
            d->strides[i - 1] = stride;
        if (d->dims[i] > (1ull << 48) / stride)
            cli_die(2, "tmap shape '%s' in --arg '%s' is more than 2^48 bytes", f[2], spec);
        stride *= d->dims[i];
        elems *= d->dims[i];
    }
    d->swizzle = EMU_TMAP_SWIZZLE_NONE;
    if (nf > 4) {
        static const char *const sw[] = {"none", "32", "64", "128"};
        int k = 0;
        while (k < 4 && strcmp(f[4], sw[k]) != 0)
            k++;
        if (k == 4)
            cli_die(2, "bad tmap swizzle '%s' in --arg '%s' (none, 32, 64, 128)", f[4], spec);
        d->swizzle = k;
    }
    d->oobfill = EMU_TMAP_OOB_ZERO;
    if (nf > 5) {
        if (strcmp(f[5], "nan") == 0)
            d->oobfill = EMU_TMAP_OOB_NAN;
        else if (strcmp(f[5], "zero") != 0)
            cli_die(2, "bad tmap OOB fill '%s' in --arg '%s' (zero, nan)", f[5], spec);
    }
    /* the driver's constraints now, on an aligned stand-in address */
    d->gaddr = 1ull << 40;
    if (emu_tmap_validate(d, &e))
        cli_die(2, "--arg '%s': %s", spec, e.msg);
    d->gaddr = 0;
    a->kind = ARG_TMAP;
    a->spec = spec;
    a->bytes = (size_t)(elems * es);
    if (f[0][0] == '@') {
        char *end;
        errno = 0;
        long n = strtol(f[0] + 1, &end, 10);
        if (end == f[0] + 1 || *end || errno || n < 0 || n >= nargs || n == param)
            cli_die(2, "bad tmap source '%s' in --arg '%s' (@N: another argument, 0..%d)", f[0],
                    spec, nargs - 1);
        a->of = (int)n;
    } else {
        size_t l = strlen(f[0]);
        if (l < 5 || strcmp(f[0] + l - 4, ".npy") != 0)
            cli_die(2, "bad tmap source '%s' in --arg '%s' (a .npy file or @N)", f[0], spec);
        tuner_npy n;
        if (tuner_npy_read(f[0], &n, &e))
            cli_die(2, "%s", e.msg);
        if ((uint64_t)n.numel != elems)
            cli_die(2, "tmap shape '%s' has %llu elements but %s has %lld in --arg '%s'", f[2],
                    (unsigned long long)elems, f[0], (long long)n.numel, spec);
        a->of = -1;
        a->data = malloc(a->bytes ? a->bytes : 1);
        if (!a->data)
            cli_die(1, "out of memory for --arg '%s'", spec);
        if (tuner_npy_to_dtype(&n, dt, a->data, &e))
            cli_die(2, "--arg '%s': %s", spec, e.msg);
        tuner_npy_free(&n);
        a->name = strdup(f[0]);
        if (!a->name)
            cli_die(1, "out of memory for --arg '%s'", spec);
    }
    free(copy);
}

int cmd_exec(int argc, char **argv)
{
    const char *entry = NULL;
    unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, cluster[3] = {0, 0, 0};
    long smem = 0;
    const char *smem_arg = NULL, *schedule = NULL, *cluster_arg = NULL;
    bool nonportable = false;
    const char *args[64];
    int nargs = 0;
    emu_opts eo = emu_default_opts();
    eo.smem_shift = EMU_SMEM_SHIFT_DEFAULT;
    eo.timeout = 300;
    const char *backend = "emu";
    optind = 1;
    int c;
    opterr = 0; /* cli_opt_error: one line naming the option */
    while ((c = getopt_long(argc, argv, ":", exec_opts, NULL)) != -1) {
        switch (c) {
        case 'e': entry = optarg; break;
        case 'g': parse_dim3(optarg, "grid", grid); break;
        case 'b': parse_dim3(optarg, "block", block); break;
        case 's': {
            char *end;
            errno = 0;
            smem = strtol(optarg, &end, 10);
            if (end == optarg || *end || errno || smem < 0 || smem > (1L << 30))
                cli_die(2, "bad --smem '%s' (bytes, up to the arch's limit)", optarg);
            smem_arg = optarg;
            break;
        }
        case 'c':
            parse_dim3(optarg, "cluster", cluster);
            cluster_arg = optarg;
            break;
        case 'P': nonportable = true; break;
        case 'C': {
            pt_err se = {0};
            if (emu_schedule_parse(optarg, &eo, &se))
                cli_die(2, "%s", se.msg);
            schedule = optarg;
            break;
        }
        case 't': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || errno || v < 1 || v > 256)
                cli_die(2, "bad --threads '%s' (an integer, 1..256)", optarg);
            eo.threads = (int)v;
            break;
        }
        case 'a':
            if (nargs == 64)
                cli_die(2, "too many --arg (64 at most)");
            args[nargs++] = optarg;
            break;
        case 'n': {
            char *list = strdup(optarg);
            if (!list)
                cli_die(1, "out of memory");
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (strcmp(tok, "oob") == 0) eo.detect_oob = false;
                else if (strcmp(tok, "uninit") == 0) eo.detect_uninit = false;
                else if (strcmp(tok, "race") == 0) eo.detect_race = false;
                else if (strcmp(tok, "divergence") == 0) eo.detect_divergence = false;
                else if (strcmp(tok, "cp_async") == 0) eo.detect_cp_async = false;
                else if (strcmp(tok, "misaligned") == 0) eo.detect_misaligned = false;
                else if (strcmp(tok, "deadlock") == 0) eo.detect_deadlock = false;
                else
                    cli_die(2, "unknown detector '%s' (oob uninit race divergence cp_async misaligned deadlock)", tok);
            }
            free(list);
            break;
        }
        case 'B':
            if (strcmp(optarg, "emu") != 0 && strcmp(optarg, "cuda") != 0)
                cli_die(2, "unknown exec backend '%s' (emu, cuda)", optarg);
            backend = optarg;
            break;
        case 'A': {
            pt_target t;
            pt_err te = {0};
            if (pt_target_parse(optarg, &t, &te))
                cli_die(2, "%s", te.msg);
            eo.arch = t.sm;
            break;
        }
        case 'S': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || errno || v < 0 || v > (long)EMU_SMEM_SHIFT_MAX || v % 16)
                cli_die(2, "bad --smem-shift '%s' (bytes, a multiple of 16, 0..%u)", optarg,
                        EMU_SMEM_SHIFT_MAX);
            eo.smem_shift = (uint32_t)v;
            break;
        }
        case 'T': {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(v >= 0) || v > 604800)
                cli_die(2, "bad --timeout '%s' (seconds, 0..604800; 0: none)", optarg);
            eo.timeout = v;
            break;
        }
        case 'h': fputs(exec_usage, stdout); return 0;
        default: cli_opt_error(c, argv);
        }
    }
    if (optind != argc - 1)
        cli_die(2, "expected one PTX file");
    if (!grid[0])
        cli_die(2, "missing --grid");
    if (!block[0])
        cli_die(2, "missing --block");
    if ((uint64_t)block[0] * block[1] * block[2] > 1024)
        cli_die(2, "block %u,%u,%u has more than 1024 threads", block[0], block[1], block[2]);
    if (schedule && strcmp(backend, "cuda") == 0)
        cli_die(2, "--schedule '%s' is an emulator option: not with --backend cuda", schedule);
    if (nonportable && (!cluster_arg || strcmp(backend, "cuda") == 0))
        cli_die(2, "--cluster-nonportable needs --cluster and the emulator backend");
    if (cluster_arg) {
        if ((uint64_t)cluster[0] * cluster[1] * cluster[2] > (nonportable ? 16u : 8u))
            cli_die(2, "bad --cluster '%s' (at most %s)", cluster_arg,
                    nonportable ? "16 CTAs with --cluster-nonportable"
                                : "8 CTAs, the portable cluster size; 16 with --cluster-nonportable");
        for (int i = 0; i < 3; i++)
            if (grid[i] % cluster[i])
                cli_die(2, "grid %u,%u,%u is not a multiple of --cluster '%s'", grid[0], grid[1],
                        grid[2], cluster_arg);
    }
    const char *path = argv[optind];
    size_t len;
    char *text = cli_read_file(path, &len);
    ptx_module *m;
    pt_err e = {0};
    if (ptx_parse(text, len, path, 0, &m, &e))
        cli_die(2, "%s", e.msg);
    /* dynamic shared memory up to the arch's limit (ptx/target.h's rows) */
    int sm = eo.arch ? eo.arch : m->target.sm;
    if (smem_arg && (uint64_t)smem > pt_target_smem_limit(sm))
        cli_die(2, "bad --smem '%s': more than the %u bytes a CTA may use on sm_%d", smem_arg,
                pt_target_smem_limit(sm), sm);
    ptx_fn *f = NULL;
    for (size_t i = 0; i < m->nfns; i++)
        if (!entry || strcmp(m->fns[i]->name, entry) == 0) {
            f = m->fns[i];
            break;
        }
    if (!f)
        cli_die(2, entry ? "no entry '%s' in %s" : "no entry in %s%s", entry ? entry : "", path);
    if ((size_t)nargs != f->nparams)
        cli_die(2, "entry '%s' has %zu parameters but %d --arg given", f->name, f->nparams, nargs);

    /* the arguments, backend-neutral: input bytes, output sizes, scalars */
    exec_arg xa[64];
    memset(xa, 0, sizeof xa);
    out_spec outs[64];
    int nouts = 0;
    for (int i = 0; i < nargs; i++) {
        const char *s = args[i];
        const ptx_param *p = &f->params[i];
        int psize = p->array ? p->array : ptx_type_bits(p->type) / 8;
        if (strncmp(s, "tmap:", 5) == 0) {
            if (p->array != EMU_TMAP_BYTES || p->align < 64)
                cli_die(2, "parameter %d '%s' is not a tensor map (.param .align 64 .b8 %s[128]) "
                           "for --arg '%s'",
                        i + 1, p->name, p->name, s);
            parse_tmap(s, i, nargs, &xa[i]);
        } else if (strncmp(s, "out:", 4) == 0) {
            /* out:FILE.npy:DTYPE:N */
            char *copy = strdup(s + 4);
            if (!copy)
                cli_die(1, "out of memory");
            char *c2 = strrchr(copy, ':');
            char *c1 = c2 ? (*c2 = '\0', strrchr(copy, ':')) : NULL;
            if (!c1)
                cli_die(2, "bad --arg '%s' (out:FILE.npy:DTYPE:N)", s);
            *c1 = '\0';
            out_spec *o = &outs[nouts++];
            o->path = copy;
            if (pt_dtype_parse(c1 + 1, &o->dt, &e))
                cli_die(2, "--arg '%s': %s", s, e.msg);
            char *end;
            o->n = strtoll(c2 + 1, &end, 10);
            if (*end || o->n < 1 || o->n > (1LL << 32))
                cli_die(2, "bad element count '%s' in --arg '%s'", c2 + 1, s);
            if (psize != 8)
                cli_die(2, "parameter %d '%s' is not a pointer (.u64/.b64) for --arg '%s'", i + 1, p->name, s);
            xa[i].kind = ARG_OUT;
            xa[i].bytes = (size_t)o->n * (size_t)pt_dtype_get(o->dt)->bytes;
            xa[i].out = o;
            o->host = calloc(1, xa[i].bytes);
            if (!o->host)
                cli_die(1, "out of memory for --arg '%s'", s);
        } else if (strlen(s) > 4 && strcmp(s + strlen(s) - 4, ".npy") == 0) {
            tuner_npy n;
            if (tuner_npy_read(s, &n, &e))
                cli_die(2, "%s", e.msg);
            if (psize != 8)
                cli_die(2, "parameter %d '%s' is not a pointer (.u64/.b64) for --arg '%s'", i + 1, p->name, s);
            xa[i].kind = ARG_IN;
            xa[i].bytes = (size_t)n.numel * n.itemsize;
            xa[i].data = n.data; /* owned from here */
            xa[i].name = s;
        } else {
            const char *colon = strchr(s, ':');
            if (!colon)
                cli_die(2, "bad --arg '%s' (FILE.npy, out:FILE.npy:DTYPE:N or DTYPE:VALUE)", s);
            if (p->array)
                cli_die(2, "parameter %d '%s' is a %d-byte array: scalars cannot fill it", i + 1, p->name, p->array);
            size_t size = parse_scalar(s, colon, xa[i].scalar, i);
            if ((int)size != psize)
                cli_die(2, "--arg '%s' is %zu bytes but parameter %d '%s' is .%s", s, size, i + 1,
                        p->name, ptx_type_name(p->type));
            xa[i].kind = ARG_SCALAR;
            xa[i].bytes = size;
        }
    }
    /* a map over another argument: a buffer holding the whole packed tensor */
    for (int i = 0; i < nargs; i++) {
        if (xa[i].kind != ARG_TMAP || xa[i].of < 0)
            continue;
        const exec_arg *src = &xa[xa[i].of];
        if (src->kind != ARG_IN && src->kind != ARG_OUT)
            cli_die(2, "--arg '%s': argument %d is not a buffer (FILE.npy or out:)", xa[i].spec,
                    xa[i].of);
        if (src->bytes < xa[i].bytes)
            cli_die(2, "--arg '%s': the map covers %zu bytes but argument %d has %zu", xa[i].spec,
                    xa[i].bytes, xa[i].of, src->bytes);
    }
    exec_geom geom;
    memset(&geom, 0, sizeof geom);
    memcpy(geom.grid, grid, sizeof grid);
    memcpy(geom.block, block, sizeof block);
    if (cluster_arg)
        memcpy(geom.cluster, cluster, sizeof cluster);
    geom.nonportable = nonportable;
    geom.smem = (size_t)smem;
    int rc = strcmp(backend, "cuda") == 0 ? run_cuda(f->name, text, len, &geom, nargs, xa)
                                          : run_emu(&eo, m, f->name, &geom, nargs, xa);
    for (int i = 0; i < nouts; i++) {
        pt_err we = {0};
        /* a run that timed out or never launched has no outputs to save */
        if (rc != EXEC_EXIT_TIMEOUT && rc != 2 &&
            tuner_npy_write(outs[i].path, pt_dtype_get(outs[i].dt)->npy, 1, &outs[i].n,
                            outs[i].host, &we))
            cli_die(1, "%s", we.msg);
        free(outs[i].host);
        free((void *)outs[i].path);
    }
    for (int i = 0; i < nargs; i++)
        if (xa[i].kind == ARG_IN || xa[i].kind == ARG_TMAP) {
            free(xa[i].data);
            if (xa[i].kind == ARG_TMAP)
                free((void *)xa[i].name);
        }
    ptx_module_free(m);
    free(text);
    return rc;
}

/* The emulator: detector reports one per line, then a summary. */
static int run_emu(const emu_opts *eo, ptx_module *m, const char *entry, const exec_geom *g,
                   int nargs, exec_arg *xa)
{
    const unsigned *grid = g->grid, *block = g->block;
    size_t smem = g->smem;
    pt_err e = {0};
    emu_ctx *ctx = emu_new(eo);
    if (!ctx)
        cli_die(1, "emulator: out of memory");
    _Alignas(128) unsigned char vals[64][EMU_TMAP_BYTES];
    const void *argp[64];
    for (int i = 0; i < nargs; i++) {
        memset(vals[i], 0, sizeof vals[i]);
        argp[i] = vals[i];
        uint64_t d = 0;
        switch (xa[i].kind) {
        case ARG_OUT:
            d = emu_alloc(ctx, xa[i].bytes, xa[i].out->path);
            if (emu_poison(ctx, d, xa[i].bytes, &e))
                cli_die(1, "%s", e.msg);
            xa[i].dptr = d;
            memcpy(vals[i], &d, 8);
            break;
        case ARG_IN:
            d = emu_alloc(ctx, xa[i].bytes ? xa[i].bytes : 1, xa[i].name);
            if (emu_write(ctx, d, xa[i].data, xa[i].bytes, &e))
                cli_die(1, "%s", e.msg);
            xa[i].dptr = d;
            memcpy(vals[i], &d, 8);
            break;
        case ARG_SCALAR: memcpy(vals[i], xa[i].scalar, xa[i].bytes); break;
        case ARG_TMAP:
            if (xa[i].of >= 0)
                break;
            d = emu_alloc(ctx, xa[i].bytes, xa[i].name);
            if (emu_write(ctx, d, xa[i].data, xa[i].bytes, &e))
                cli_die(1, "%s", e.msg);
            xa[i].dptr = d;
            break;
        }
    }
    /* the maps, once every buffer has its address */
    for (int i = 0; i < nargs; i++) {
        if (xa[i].kind != ARG_TMAP)
            continue;
        emu_tmap_desc d = xa[i].tmap;
        d.gaddr = xa[i].of < 0 ? xa[i].dptr : xa[xa[i].of].dptr;
        if (emu_tmap_encode(&d, vals[i], &e))
            cli_die(2, "--arg '%s': %s", xa[i].spec, e.msg);
    }
    emu_kernel *k;
    if (emu_load(ctx, m, entry, &k, &e))
        cli_die(2, "%s", e.msg);
    emu_launch l = {{grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, smem};
    emu_stats st;
    memset(&st, 0, sizeof st);
    int rc = emu_run_cluster(ctx, k, &l, g->cluster, g->nonportable, argp, &st, &e);
    /* a timeout ends with its report alone as the last line (other reports
     * made before it come first) */
    int timeout_at = -1;
    for (int i = 0; i < emu_nreports(ctx); i++)
        if (emu_report_kind_of(ctx, i) == EMU_R_TIMEOUT && timeout_at < 0)
            timeout_at = i;
        else
            fprintf(stderr, "%s\n", emu_report(ctx, i));
    if (timeout_at >= 0) {
        fprintf(stderr, "%s\n", emu_report(ctx, timeout_at));
        emu_kernel_free(k);
        emu_free(ctx);
        return EXEC_EXIT_TIMEOUT;
    }
    if (rc && !emu_nreports(ctx)) {
        /* a launch the emulator refuses (block over .maxntid, too much shared
         * memory) is bad input: its one line, no summary */
        fprintf(stderr, "ptxtune: %s\n", e.msg);
        emu_kernel_free(k);
        emu_free(ctx);
        return rc == PT_EINVAL ? 2 : 1;
    }
    for (int i = 0; i < nargs; i++) {
        pt_err re = {0};
        if (xa[i].kind == ARG_OUT && emu_read(ctx, xa[i].dptr, xa[i].out->host, xa[i].bytes, &re))
            cli_die(1, "%s", re.msg);
    }
    /* shared-memory bank conflicts, per access class that ran */
    char banks[512] = "";
    size_t bl = 0;
    for (int b = 0; b < EMU_NBANK && bl < sizeof banks - 96; b++) {
        const emu_bank_stat *bs = &st.bank[b];
        if (!bs->accesses)
            continue;
        bl += (size_t)snprintf(banks + bl, sizeof banks - bl, "%s %s %llu of %llu",
                               bl ? "," : "; bank conflicts (extra wavefronts):",
                               emu_bank_class_name((emu_bank_class)b),
                               (unsigned long long)bs->conflicts, (unsigned long long)bs->wavefronts);
        if (bs->worst_line)
            bl += (size_t)snprintf(banks + bl, sizeof banks - bl, " (most at line %d)",
                                   bs->worst_line);
    }
    fprintf(stderr,
            "exec %s: grid %u,%u,%u block %u,%u,%u: %llu lane-instructions, %llu warp-instructions, "
            "%.3f s (%.1f M lane-instr/s), %d report%s%s\n",
            entry, grid[0], grid[1], grid[2], block[0], block[1], block[2],
            (unsigned long long)st.lane_instructions, (unsigned long long)st.warp_instructions,
            st.seconds, st.seconds > 0 ? (double)st.lane_instructions / st.seconds * 1e-6 : 0.0,
            emu_nreports(ctx), emu_nreports(ctx) == 1 ? "" : "s", banks);
    emu_kernel_free(k);
    emu_free(ctx);
    return rc ? 1 : 0;
}

/* A GPU through the driver (no driver: exit 4 with the plain message). */
static int run_cuda(const char *entry, const char *text, size_t len, const exec_geom *g,
                    int nargs, exec_arg *xa)
{
    const unsigned *grid = g->grid, *block = g->block;
    pt_err e = {0};
    tuner_dev *d;
    int rc = tuner_dev_open("cuda", NULL, &d, &e);
    if (rc == PT_ENODRIVER)
        cli_die(CLI_EXIT_NODRIVER, "%s", e.msg);
    if (rc)
        cli_die(1, "%s", e.msg);
    tuner_exec_arg ta[64];
    memset(ta, 0, sizeof ta);
    for (int i = 0; i < nargs; i++) {
        ta[i].kind = xa[i].kind == ARG_IN    ? TUNER_EXEC_IN
                   : xa[i].kind == ARG_OUT   ? TUNER_EXEC_OUT
                   : xa[i].kind == ARG_TMAP  ? TUNER_EXEC_TMAP
                                             : TUNER_EXEC_SCALAR;
        ta[i].data = xa[i].kind == ARG_SCALAR ? (const void *)xa[i].scalar : xa[i].data;
        ta[i].bytes = xa[i].bytes;
        ta[i].result = xa[i].kind == ARG_OUT ? xa[i].out->host : NULL;
        ta[i].of = xa[i].of;
        ta[i].tmap = xa[i].tmap;
    }
    pt_launch l;
    memset(&l, 0, sizeof l);
    memcpy(l.grid, g->grid, sizeof l.grid);
    memcpy(l.block, g->block, sizeof l.block);
    memcpy(l.cluster, g->cluster, sizeof l.cluster);
    l.smem = g->smem;
    rc = tuner_exec_launch(d, text, len, entry, &l, nargs, ta, &e);
    if (rc)
        fprintf(stderr, "ptxtune: %s (%s)\n", e.msg, tuner_outcome_name(tuner_dev_failure(d)));
    else
        fprintf(stderr, "exec %s on %s: grid %u,%u,%u block %u,%u,%u: ok\n", entry,
                tuner_dev_info(d)->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
    tuner_dev_close(d);
    return rc ? 1 : 0;
}
