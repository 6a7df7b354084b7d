/* The compile gate: nvJitLink through dlopen, ptxas as a child process, one
 * log parser for both (see compile.h). Log formats this parser was written
 * against (CUDA 13.0, sm_80 .. sm_120):
 *
 *   ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; ...
 *   ptxas info    : Function properties for k
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads      (ptxas)
 *   ptxas         .     0 bytes stack frame, 0 bytes spill stores, ...      (nvJitLink)
 *   ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
 *   ptxas warning : For entry k adjusting per thread register count of 16 to lower bound of 24
 *   ptxas x.ptx, line 10; warning : .minnctapersm is ignored when ...
 *   ptxas x.ptx, line 9; error   : Unknown symbol '%r99'                   (ptxas)
 *   ptxas application ptx input, line 9; error   : ...                    (nvJitLink)
 *   ptxas fatal   : Unresolved extern function 'foo'
 *   error   : Undefined reference to 'foo' in 'kernel.ptx'                (nvJitLink link)
 *   info    : used 12 registers, used 1 barriers, 0 stack, 2048 bytes smem, ...
 *
 * sm_90 and later drop "cmem[0]" from the Used line, so const_bytes then comes
 * from the cubin's .nv.constant0 section. The lower-case "info : used" lines
 * are nvJitLink's link summary; they count reserved smem, so they are not
 * parsed: only ptxas's own lines, identical for both backends, are. */
#include "ptx/compile.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef PT_HAVE_CUDA_HEADERS
#include <nvJitLink.h>
#endif

#ifndef PT_CUDA_ROOT
#define PT_CUDA_ROOT "/usr/local/cuda"
#endif

extern char **environ;

/* Log patterns, one row each, compiled once per context. Rows marked "Used"
 * are applied to the Used line only, so the link summary never feeds them. */
#define RX_MAP(X)                                                                   \
    X(USED, "^ptxas\\s+info\\s*:\\s*Used (\\d+) registers")                         \
    X(BARRIERS, "used (\\d+) barriers")                    /* Used line */          \
    X(SMEM, "(\\d+) bytes smem")                           /* Used line */          \
    X(CMEM0, "(\\d+) bytes cmem\\[0\\]")                   /* Used line */          \
    X(STACK, "(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads") \
    X(LINE_ERR, "^ptxas .*, line (\\d+); (?:error|fatal)\\s*:\\s*(.*?)\\s*$")       \
    X(ERR, "^(?:ptxas\\s+)?(?:error|fatal)\\s*:\\s*(.*?)\\s*$")                     \
    X(WARN, "^(?:ptxas\\b[^:]*?)?\\bwarning\\s*:")                                  \
    X(CODE, "(?<![\\w'])(C\\d{4})(?![\\w'])") /* not inside a quoted 'C1234' name */   \
    X(RELEASE, "release (\\d+)\\.(\\d+)")

enum rx_id {
#define X(name, pat) RX_##name,
    RX_MAP(X)
#undef X
    NRX
};

static const char *const rx_pattern[NRX] = {
#define X(name, pat) pat,
    RX_MAP(X)
#undef X
};

#ifdef PT_HAVE_CUDA_HEADERS
/* The header's entry points are static inline wrappers around versioned
 * exports (__nvJitLinkCreate_13_0); we resolve those by the library's major
 * version, falling back to the unversioned names the library also exports. */
#define JL_MAP(X)                                                                       \
    X(Create, (nvJitLinkHandle *, uint32_t, const char **))                              \
    X(Destroy, (nvJitLinkHandle *))                                                      \
    X(AddData, (nvJitLinkHandle, nvJitLinkInputType, const void *, size_t, const char *)) \
    X(Complete, (nvJitLinkHandle))                                                       \
    X(GetLinkedCubinSize, (nvJitLinkHandle, size_t *))                                   \
    X(GetLinkedCubin, (nvJitLinkHandle, void *))                                         \
    X(GetErrorLogSize, (nvJitLinkHandle, size_t *))                                      \
    X(GetErrorLog, (nvJitLinkHandle, char *))                                            \
    X(GetInfoLogSize, (nvJitLinkHandle, size_t *))                                       \
    X(GetInfoLog, (nvJitLinkHandle, char *))

typedef struct jl_api {
#define X(name, params) nvJitLinkResult(*name) params;
    JL_MAP(X)
#undef X
} jl_api;

static const char *const jl_result_name[] = {
    "NVJITLINK_SUCCESS",
    "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
    "NVJITLINK_ERROR_MISSING_ARCH",
    "NVJITLINK_ERROR_INVALID_INPUT",
    "NVJITLINK_ERROR_PTX_COMPILE",
    "NVJITLINK_ERROR_NVVM_COMPILE",
    "NVJITLINK_ERROR_INTERNAL",
    "NVJITLINK_ERROR_THREADPOOL",
    "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
    "NVJITLINK_ERROR_FINALIZE",
    "NVJITLINK_ERROR_NULL_INPUT",
    "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
    "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
    "NVJITLINK_ERROR_ARCH_MISMATCH",
    "NVJITLINK_ERROR_OUTDATED_LIBRARY",
    "NVJITLINK_ERROR_MISSING_FATBIN",
    "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
    "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
    "NVJITLINK_ERROR_LTO_NOT_ENABLED",
};
#endif

struct pt_compiler {
    pcre2_code *rx[NRX];
    pt_backend backend; /* in use, never AUTO */
    void *dl;           /* libnvJitLink, NULL when not loaded */
#ifdef PT_HAVE_CUDA_HEADERS
    jl_api jl;
#endif
    int jl_major, jl_minor;
    char ptxas[PATH_MAX]; /* "" when not found */
    int ptxas_major, ptxas_minor;
    char desc[64];
    char jl_why[PATH_MAX + 128], ptxas_why[PATH_MAX + 64]; /* why a backend is missing */
    bool chosen;   /* the backend was set by pt_compiler_set_backend (not AUTO) */
    bool codes_ok; /* C75xx performance codes pass (pt_compiler_allow_codes) */
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- regex helpers ---- */

/* Matches rx against s[0..n); md receives the groups. */
static bool rx_match(const pt_compiler *c, enum rx_id id, const char *s, size_t n,
                     pcre2_match_data *md)
{
    return pcre2_match(c->rx[id], (PCRE2_SPTR)s, n, 0, 0, md, NULL) >= 0;
}

/* Group g of the last match as text. */
static size_t rx_group(pcre2_match_data *md, int g, const char *s, const char **start)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[2 * g] == PCRE2_UNSET) {
        *start = s;
        return 0;
    }
    *start = s + ov[2 * g];
    return ov[2 * g + 1] - ov[2 * g];
}

/* Group g of the last match as a non-negative int (digits only by pattern). */
static int rx_int(pcre2_match_data *md, int g, const char *s)
{
    const char *p;
    size_t n = rx_group(md, g, s, &p);
    long v = 0;
    for (size_t i = 0; i < n && v < INT_MAX / 10; i++)
        v = v * 10 + (p[i] - '0');
    return (int)v;
}

static int imax(int a, int b) { return a > b ? a : b; }

/* ---- log parsing ---- */

/* Folds one compile log into res; counts take the maximum over entries. */
static void parse_log(const pt_compiler *c, const char *log, pt_resource *res,
                      pcre2_match_data *md)
{
    for (const char *l = log; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (rx_match(c, RX_USED, l, n, md)) {
            res->registers = imax(res->registers, rx_int(md, 1, l));
            if (rx_match(c, RX_BARRIERS, l, n, md))
                res->barriers = imax(res->barriers, rx_int(md, 1, l));
            if (rx_match(c, RX_SMEM, l, n, md))
                res->shared_bytes = imax(res->shared_bytes, rx_int(md, 1, l));
            if (rx_match(c, RX_CMEM0, l, n, md))
                res->const_bytes = imax(res->const_bytes, rx_int(md, 1, l));
        } else if (rx_match(c, RX_STACK, l, n, md)) {
            res->stack_frame = imax(res->stack_frame, rx_int(md, 1, l));
            res->spill_stores = imax(res->spill_stores, rx_int(md, 2, l));
            res->spill_loads = imax(res->spill_loads, rx_int(md, 3, l));
        } else if (rx_match(c, RX_WARN, l, n, md)) {
            res->nwarnings++;
        }
        for (size_t off = 0; off < n;) {
            if (pcre2_match(c->rx[RX_CODE], (PCRE2_SPTR)l, n, off, 0, md, NULL) < 0)
                break;
            const char *p;
            size_t k = rx_group(md, 1, l, &p);
            off = (size_t)(p - l) + k;
            bool seen = false;
            for (int i = 0; i < res->ncodes && !seen; i++)
                seen = strncmp(res->codes[i], p, k) == 0 && res->codes[i][k] == '\0';
            if (!seen && res->ncodes < PT_MAX_CODES && k < sizeof res->codes[0]) {
                memcpy(res->codes[res->ncodes], p, k);
                res->codes[res->ncodes++][k] = '\0';
            }
        }
        l = nl ? nl + 1 : l + n;
    }
}

/* Line `line` (1-based) of src, whitespace-trimmed, into buf. */
static const char *source_line(const char *src, int line, char *buf, size_t n)
{
    const char *p = src;
    for (int i = 1; i < line && p; i++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    buf[0] = '\0';
    if (!p || line < 1)
        return buf;
    const char *end = p + strcspn(p, "\r\n");
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t k = (size_t)(end - p);
    if (k >= n)
        k = n - 1;
    memcpy(buf, p, k);
    buf[k] = '\0';
    return buf;
}

/* Turns an error log into PT_ECOMPILE: the first "line N; error" names the PTX
 * line and quotes it; otherwise the first error/fatal line, else fallback. */
static int compile_error(const pt_compiler *c, const char *log, const char *ptx,
                         const char *fallback, pt_err *e)
{
    pcre2_match_data *md = pcre2_match_data_create(8, NULL);
    if (!md)
        return pt_errf(e, PT_ENOMEM, "pcre2_match_data_create failed");
    int nerr = 0, line = 0;
    const char *msg = NULL, *other = NULL;
    size_t msgn = 0, othern = 0;
    for (const char *l = log ? log : ""; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (rx_match(c, RX_LINE_ERR, l, n, md)) {
            if (nerr++ == 0) {
                line = rx_int(md, 1, l);
                msgn = rx_group(md, 2, l, &msg);
            }
        } else if (!other && rx_match(c, RX_ERR, l, n, md)) {
            othern = rx_group(md, 1, l, &other);
        }
        l = nl ? nl + 1 : l + n;
    }
    int rc;
    if (nerr > 0) {
        char src[256], more[32] = "";
        if (nerr > 1)
            snprintf(more, sizeof more, " (1 of %d errors)", nerr);
        source_line(ptx, line, src, sizeof src);
        rc = pt_errf(e, PT_ECOMPILE, "compile error at PTX line %d: %.*s%s%s%s", line,
                     (int)msgn, msg, more, src[0] ? " | " : "", src);
    } else if (other) {
        rc = pt_errf(e, PT_ECOMPILE, "compile error: %.*s", (int)othern, other);
    } else {
        rc = pt_errf(e, PT_ECOMPILE, "compile error: %s", fallback);
    }
    pcre2_match_data_free(md);
    return rc;
}

/* ---- cubin ---- */

static uint64_t rd_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Largest .nv.constant0.* section of an ELF64 cubin: the cmem[0] figure ptxas
 * stops printing from sm_90 on. -1 when the image is not one we can read;
 * every offset is bounds-checked because the bytes come from outside. */
static int cubin_cmem0(const unsigned char *b, size_t n)
{
    if (n < 64 || memcmp(b, "\177ELF", 4) != 0 || b[4] != 2 || b[5] != 1)
        return -1;
    uint64_t shoff = rd_le(b + 0x28, 8), shentsize = rd_le(b + 0x3a, 2),
             shnum = rd_le(b + 0x3c, 2), shstrndx = rd_le(b + 0x3e, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff > n || shnum > (n - shoff) / shentsize)
        return -1;
    const unsigned char *strsh = b + shoff + shstrndx * shentsize;
    uint64_t stroff = rd_le(strsh + 0x18, 8), strsize = rd_le(strsh + 0x20, 8);
    if (stroff > n || strsize > n - stroff)
        return -1;
    static const char prefix[] = ".nv.constant0.";
    int best = -1;
    for (uint64_t i = 0; i < shnum; i++) {
        const unsigned char *sh = b + shoff + i * shentsize;
        uint64_t name = rd_le(sh, 4), size = rd_le(sh + 0x20, 8);
        if (name >= strsize || strsize - name < sizeof prefix)
            continue;
        if (memcmp(b + stroff + name, prefix, sizeof prefix - 1) == 0 && size <= INT_MAX)
            best = imax(best, (int)size);
    }
    return best;
}

/* ---- nvJitLink backend ---- */

#ifdef PT_HAVE_CUDA_HEADERS
static const char *jl_name(nvJitLinkResult r)
{
    size_t i = (size_t)r;
    return i < sizeof jl_result_name / sizeof jl_result_name[0] ? jl_result_name[i]
                                                                : "NVJITLINK_ERROR_?";
}

/* Loads the library and resolves every entry point; on failure leaves c->dl
 * NULL and a reason in why. */
static void jl_open(pt_compiler *c, char *why, size_t whyn)
{
    static const char *const names[] = {"libnvJitLink.so.13", "libnvJitLink.so"};
    char path[PATH_MAX], dlerr[256] = "not found";
    for (int pass = 0; pass < 2 && !c->dl; pass++)
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !c->dl; i++) {
            if (pass == 0)
                snprintf(path, sizeof path, "%s/lib64/%s", PT_CUDA_ROOT, names[i]);
            else
                snprintf(path, sizeof path, "%s", names[i]);
            /* NODELETE: the library links its own libstdc++, whose pools and
             * threads must not vanish under a later dlopen or at exit */
            c->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
            const char *msg = c->dl ? NULL : dlerror();
            if (msg && pass == 1 && i == 0) /* the loader's own words on the .so.13 */
                snprintf(dlerr, sizeof dlerr, "%s", msg);
        }
    if (!c->dl) {
        snprintf(why, whyn, "libnvJitLink.so.13 not loadable from %s/lib64 or the default "
                 "search path (%s)", PT_CUDA_ROOT, dlerr);
        return;
    }
    nvJitLinkResult (*version)(unsigned *, unsigned *) = NULL;
    *(void **)&version = dlsym(c->dl, "nvJitLinkVersion");
    unsigned major = 0, minor = 0;
    if (!version || version(&major, &minor) != NVJITLINK_SUCCESS) {
        snprintf(why, whyn, "libnvJitLink: nvJitLinkVersion missing or failing");
        goto fail;
    }
    c->jl_major = (int)major;
    c->jl_minor = (int)minor;
    char sym[128];
#define X(name, params)                                                        \
    snprintf(sym, sizeof sym, "__nvJitLink" #name "_%u_0", major);            \
    *(void **)&c->jl.name = dlsym(c->dl, sym);                                \
    if (!c->jl.name)                                                           \
        *(void **)&c->jl.name = dlsym(c->dl, "nvJitLink" #name);              \
    if (!c->jl.name) {                                                         \
        snprintf(why, whyn, "libnvJitLink %u.%u lacks %s", major, minor, sym); \
        goto fail;                                                             \
    }
    JL_MAP(X)
#undef X
    return;
fail:
    dlclose(c->dl);
    c->dl = NULL;
}

/* Copies one nvJitLink log into a malloc'd string ("" when empty). */
static char *jl_log(const pt_compiler *c, nvJitLinkHandle h, bool info)
{
    size_t n = 0;
    nvJitLinkResult r = info ? c->jl.GetInfoLogSize(h, &n) : c->jl.GetErrorLogSize(h, &n);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    s[0] = '\0';
    if (r == NVJITLINK_SUCCESS && n > 0) {
        r = info ? c->jl.GetInfoLog(h, s) : c->jl.GetErrorLog(h, s);
        s[r == NVJITLINK_SUCCESS ? n : 0] = '\0';
    }
    return s;
}

/* nvJitLink compiles the PTX inside AddData, so its failure is the compile
 * error; Complete after a failed AddData still "succeeds" with an empty image. */
static int jl_compile(const pt_compiler *c, const char *ptx, const char *arch, void **cubin,
                      size_t *size, char **info, pt_err *e)
{
    char archopt[32];
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    const char *opts[] = {archopt, "-verbose"};
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = c->jl.Create(&h, 2, opts);
    if (r != NVJITLINK_SUCCESS)
        return pt_errf(e, PT_ECOMPILE, "nvJitLinkCreate(%s) failed: %s", archopt, jl_name(r));
    int rc = PT_OK;
    const char *step = "nvJitLinkAddData";
    r = c->jl.AddData(h, NVJITLINK_INPUT_PTX, ptx, strlen(ptx), "kernel.ptx");
    if (r == NVJITLINK_SUCCESS) {
        step = "nvJitLinkComplete";
        r = c->jl.Complete(h);
    }
    if (r == NVJITLINK_SUCCESS) {
        step = "nvJitLinkGetLinkedCubin";
        r = c->jl.GetLinkedCubinSize(h, size);
        *cubin = r == NVJITLINK_SUCCESS ? malloc(*size ? *size : 1) : NULL;
        if (r == NVJITLINK_SUCCESS && !*cubin)
            rc = pt_errf(e, PT_ENOMEM, "cubin of %zu bytes", *size);
        else if (r == NVJITLINK_SUCCESS)
            r = c->jl.GetLinkedCubin(h, *cubin);
    }
    if (rc == PT_OK && r != NVJITLINK_SUCCESS) {
        char *log = jl_log(c, h, false), why[160];
        snprintf(why, sizeof why, "%s: %s", step, jl_name(r));
        rc = compile_error(c, log, ptx, why, e);
        free(log);
    }
    if (rc == PT_OK && !(*info = jl_log(c, h, true)))
        rc = pt_errf(e, PT_ENOMEM, "nvJitLink info log");
    if (rc != PT_OK) {
        free(*cubin);
        *cubin = NULL;
    }
    c->jl.Destroy(&h);
    return rc;
}
#endif

/* ---- ptxas backend ---- */

/* Runs argv[0] with stdout and stderr into one malloc'd string; *status gets
 * the wait status. The pipe is O_CLOEXEC so concurrent spawns do not inherit
 * each other's ends. */
static int run_capture(char *const argv[], char **out, int *status, pt_err *e)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0)
        return pt_errf(e, PT_EIO, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    pid_t pid;
    int err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (err != 0) {
        close(fd[0]);
        return pt_errf(e, err == ENOENT ? PT_ENOTOOLKIT : PT_EIO, "spawn %s: %s", argv[0],
                       strerror(err));
    }
    pt_buf b;
    pt_buf_init(&b);
    char chunk[4096];
    for (;;) {
        ssize_t k = read(fd[0], chunk, sizeof chunk);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        pt_buf_putn(&b, chunk, (size_t)k);
    }
    close(fd[0]);
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR) {
            pt_buf_free(&b);
            return pt_errf(e, PT_EIO, "waitpid %s: %s", argv[0], strerror(errno));
        }
    *out = pt_buf_take(&b);
    return *out ? PT_OK : pt_errf(e, PT_ENOMEM, "out of memory reading %s's output", argv[0]);
}

/* Finds ptxas and reads its release; leaves c->ptxas "" and a reason in why
 * when there is none that runs. */
static void ptxas_open(pt_compiler *c, pcre2_match_data *md, char *why, size_t whyn)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/bin/ptxas", PT_CUDA_ROOT);
    bool found = access(path, X_OK) == 0;
    const char *env = getenv("PATH");
    for (const char *p = env; !found && p && *p;) {
        size_t n = strcspn(p, ":");
        snprintf(path, sizeof path, "%.*s/ptxas", (int)n, n ? p : ".");
        found = access(path, X_OK) == 0;
        p += n + (p[n] == ':');
    }
    if (!found) {
        snprintf(why, whyn, "ptxas not found in %s/bin or PATH", PT_CUDA_ROOT);
        return;
    }
    char *argv[] = {path, "--version", NULL}, *out = NULL;
    int status = 0;
    pt_err e = {0};
    if (run_capture(argv, &out, &status, &e) != PT_OK) {
        snprintf(why, whyn, "%s", e.msg);
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
        rx_match(c, RX_RELEASE, out, strlen(out), md)) {
        c->ptxas_major = rx_int(md, 1, out);
        c->ptxas_minor = rx_int(md, 2, out);
        snprintf(c->ptxas, sizeof c->ptxas, "%s", path);
    } else {
        snprintf(why, whyn, "%s --version gave no \"release X.Y\"", path);
    }
    free(out);
}

static int read_file(const char *path, void **data, size_t *size, pt_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return pt_errf(e, PT_EIO, "open %s: %s", path, strerror(errno));
    pt_buf b;
    pt_buf_init(&b);
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        pt_buf_putn(&b, chunk, k);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        pt_buf_free(&b);
        return pt_errf(e, PT_EIO, "read %s", path);
    }
    *size = b.len;
    *data = pt_buf_take(&b);
    return *data ? PT_OK : pt_errf(e, PT_ENOMEM, "out of memory reading %s", path);
}

/* Writes the PTX into a fresh temp directory, runs ptxas -v on it and reads
 * the cubin back; the directory goes whatever happens. */
static int ptxas_compile(const pt_compiler *c, const char *ptx, const char *arch,
                         void **cubin, size_t *size, char **info, pt_err *e)
{
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], src[PATH_MAX + 16], bin[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/ptxtune-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return pt_errf(e, PT_EIO, "mkdtemp %s: %s", dir, strerror(errno));
    snprintf(src, sizeof src, "%s/kernel.ptx", dir);
    snprintf(bin, sizeof bin, "%s/kernel.cubin", dir);
    int rc = PT_OK;
    FILE *f = fopen(src, "wb");
    size_t n = strlen(ptx);
    if (!f || fwrite(ptx, 1, n, f) != n)
        rc = pt_errf(e, PT_EIO, "write %s: %s", src, strerror(errno));
    if (f && fclose(f) != 0 && rc == PT_OK)
        rc = pt_errf(e, PT_EIO, "write %s: %s", src, strerror(errno));
    char archopt[32], *log = NULL;
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    char *argv[] = {(char *)c->ptxas, archopt, "-v", "-o", bin, src, NULL};
    int status = 0;
    if (rc == PT_OK)
        rc = run_capture(argv, &log, &status, e);
    if (rc == PT_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char why[64];
        if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "ptxas killed by signal %d", WTERMSIG(status));
        else
            snprintf(why, sizeof why, "ptxas exited with status %d", WEXITSTATUS(status));
        rc = compile_error(c, log, ptx, why, e);
    }
    if (rc == PT_OK)
        rc = read_file(bin, cubin, size, e);
    if (rc == PT_OK)
        *info = log;
    else
        free(log);
    unlink(bin);
    unlink(src);
    rmdir(dir);
    return rc;
}

/* ---- public ---- */

static void set_desc(pt_compiler *c)
{
    if (c->backend == PT_BACKEND_NVJITLINK)
        snprintf(c->desc, sizeof c->desc, "nvJitLink %d.%d", c->jl_major, c->jl_minor);
    else
        snprintf(c->desc, sizeof c->desc, "ptxas %d.%d", c->ptxas_major, c->ptxas_minor);
}

int pt_compiler_open(pt_compiler **out, pt_err *e)
{
    *out = NULL;
    pt_compiler *c = calloc(1, sizeof *c);
    if (!c)
        return pt_errf(e, PT_ENOMEM, "pt_compiler");
    for (int i = 0; i < NRX; i++) {
        int err;
        PCRE2_SIZE at;
        c->rx[i] = pcre2_compile((PCRE2_SPTR)rx_pattern[i], PCRE2_ZERO_TERMINATED, 0, &err,
                                 &at, NULL);
        /* the patterns are constants: a failure is a bug, reported not hidden */
        if (!c->rx[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(err, msg, sizeof msg);
            pt_compiler_close(c);
            return pt_errf(e, PT_EINTERNAL, "regex %d at %zu: %s", i, (size_t)at,
                           (const char *)msg);
        }
    }
    pcre2_match_data *md = pcre2_match_data_create(8, NULL);
    if (!md) {
        pt_compiler_close(c);
        return pt_errf(e, PT_ENOMEM, "pcre2_match_data_create failed");
    }
    snprintf(c->jl_why, sizeof c->jl_why,
             "nvJitLink support compiled out (no CUDA headers at build time)");
#ifdef PT_HAVE_CUDA_HEADERS
    c->jl_why[0] = '\0';
    jl_open(c, c->jl_why, sizeof c->jl_why);
#endif
    ptxas_open(c, md, c->ptxas_why, sizeof c->ptxas_why);
    pcre2_match_data_free(md);
    if (!c->dl && !c->ptxas[0]) {
        int rc = pt_errf(e, PT_ENOTOOLKIT, "no PTX compiler: %s; %s", c->jl_why, c->ptxas_why);
        pt_compiler_close(c);
        return rc;
    }
    c->backend = c->dl ? PT_BACKEND_NVJITLINK : PT_BACKEND_PTXAS;
    set_desc(c);
    *out = c;
    return PT_OK;
}

void pt_compiler_close(pt_compiler *c)
{
    if (!c)
        return;
    for (int i = 0; i < NRX; i++)
        pcre2_code_free(c->rx[i]);
    if (c->dl)
        dlclose(c->dl);
    free(c);
}

int pt_compiler_set_backend(pt_compiler *c, pt_backend b, pt_err *e)
{
    bool chosen = b != PT_BACKEND_AUTO;
    if (b == PT_BACKEND_AUTO)
        b = c->dl ? PT_BACKEND_NVJITLINK : PT_BACKEND_PTXAS;
    if (b == PT_BACKEND_NVJITLINK && !c->dl)
        return pt_errf(e, PT_ENOTOOLKIT, "nvJitLink backend not available: %s", c->jl_why);
    if (b == PT_BACKEND_PTXAS && !c->ptxas[0])
        return pt_errf(e, PT_ENOTOOLKIT, "ptxas backend not available: %s", c->ptxas_why);
    c->backend = b;
    c->chosen = chosen;
    set_desc(c);
    return PT_OK;
}

void pt_compiler_allow_codes(pt_compiler *c, bool allow) { c->codes_ok = allow; }

/* The first ptxas line with a C75xx code, e.g. "(C7511) wgmma.mma_async
 * instructions are serialized ...": these report a kernel ptxas quietly
 * slowed down (wgmma serialised or waits injected, setmaxnreg ignored), so
 * the gate fails on them. Returns the code's offset in log, or NULL. */
static const char *perf_code(const char *log)
{
    for (const char *p = log; (p = strstr(p, "(C75")) != NULL; p++)
        if (p[4] >= '0' && p[4] <= '9' && p[5] >= '0' && p[5] <= '9' && p[6] == ')')
            return p;
    return NULL;
}

pt_backend pt_compiler_backend(const pt_compiler *c) { return c->backend; }

int pt_compiler_max_ptx(const pt_compiler *c)
{
    if (c->backend == PT_BACKEND_NVJITLINK)
        return pt_ptx_for_cuda(c->jl_major * 1000 + c->jl_minor * 10);
    return pt_ptx_for_cuda(c->ptxas_major * 1000 + c->ptxas_minor * 10);
}

const char *pt_compiler_describe(const pt_compiler *c) { return c->desc; }

/* The cache of pt_compiler_probe_max_ptx (pt_cache_path "toolchain-v1"):
 * one line "KEY\tMAX\n", KEY naming nvJitLink's file (path, size, mtime,
 * inode), so a changed toolkit is probed again. */
int pt_compiler_probe_max_ptx(void)
{
#ifdef PT_HAVE_CUDA_HEADERS
    char path[PATH_MAX], real[PATH_MAX], cache[PATH_MAX], key[PATH_MAX + 96];
    snprintf(path, sizeof path, "%s/lib64/libnvJitLink.so.13", PT_CUDA_ROOT);
    struct stat st;
    if (!realpath(path, real) || stat(real, &st) != 0)
        return 0;
    snprintf(key, sizeof key, "%s %lld %lld.%09ld %llu", real, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (unsigned long long)st.st_ino);
    pt_cache_path("toolchain-v1", cache, sizeof cache);
    FILE *f = cache[0] ? fopen(cache, "r") : NULL;
    if (f) {
        char line[PATH_MAX + 128];
        bool got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        char *tab = got ? strrchr(line, '\t') : NULL;
        if (tab && (size_t)(tab - line) == strlen(key) && memcmp(line, key, strlen(key)) == 0) {
            int v = atoi(tab + 1);
            if (v > 0)
                return v;
        }
    }
    /* probe once: open the gate as a compile would, then remember */
    pt_compiler *c;
    pt_err e = {0};
    if (pt_compiler_open(&c, &e))
        return 0;
    int v = pt_compiler_backend(c) == PT_BACKEND_NVJITLINK ? pt_compiler_max_ptx(c) : 0;
    pt_compiler_close(c);
    if (v > 0)
        pt_cache_write(cache, key, v);
    return v;
#else
    return 0;
#endif
}

int pt_compile(const pt_compiler *c, const char *ptx, const pt_target *t, void **cubin,
               size_t *cubin_size, pt_resource *res, pt_err *e)
{
    double t0 = now_ms();
    if (cubin)
        *cubin = NULL;
    if (cubin_size)
        *cubin_size = 0;
    if (!c || !ptx || !t)
        return pt_errf(e, PT_EINVAL, "pt_compile: NULL compiler, PTX or target");
    char arch[16];
    pt_target_name(t, arch, sizeof arch);
    void *bin = NULL;
    size_t size = 0;
    char *info = NULL;
    int rc;
    /* sm_90a kernels go to ptxas unless a backend was asked for: nvJitLink
     * compiles relocatable code and ignores setmaxnreg (C7504) */
    pt_backend use = c->backend;
    if (!c->chosen && t->arch_specific && c->ptxas[0])
        use = PT_BACKEND_PTXAS;
#ifdef PT_HAVE_CUDA_HEADERS
    if (use == PT_BACKEND_NVJITLINK)
        rc = jl_compile(c, ptx, arch, &bin, &size, &info, e);
    else
#endif
        rc = ptxas_compile(c, ptx, arch, &bin, &size, &info, e);
    if (rc != PT_OK)
        return rc;
    if (res) {
        pcre2_match_data *md = pcre2_match_data_create(8, NULL);
        if (!md) {
            free(bin);
            free(info);
            return pt_errf(e, PT_ENOMEM, "pcre2_match_data_create failed");
        }
        memset(res, 0, sizeof *res);
        res->const_bytes = -1;
        parse_log(c, info, res, md);
        pcre2_match_data_free(md);
        if (res->const_bytes < 0)
            res->const_bytes = cubin_cmem0(bin, size);
        snprintf(res->backend, sizeof res->backend, "%s",
                 use == PT_BACKEND_NVJITLINK ? "nvJitLink" : "ptxas");
        res->compile_ms = now_ms() - t0;
    }
    const char *code = c->codes_ok || !info ? NULL : perf_code(info);
    if (code) {
        size_t n = strcspn(code + 7, "\n");
        const char *txt = code + 7;
        while (n && (*txt == ' ' || *txt == '\t'))
            txt++, n--;
        rc = pt_errf(e, PT_ECOMPILE, "ptxas performance code %.5s (a compile failure): %.*s",
                     code + 1, (int)(n > 300 ? 300 : n), txt);
        free(info);
        free(bin);
        return rc;
    }
    free(info);
    if (cubin)
        *cubin = bin;
    else
        free(bin);
    if (cubin_size)
        *cubin_size = size;
    return PT_OK;
}

int pt_resource_json(const pt_resource *r, pt_buf *out)
{
    pt_buf_printf(out,
                  "{\"backend\":\"%s\",\"registers\":%d,\"spill_stores\":%d,\"spill_loads\":%d,"
                  "\"stack_frame\":%d,\"shared_bytes\":%d,",
                  r->backend, r->registers, r->spill_stores, r->spill_loads, r->stack_frame,
                  r->shared_bytes);
    if (r->const_bytes >= 0)
        pt_buf_printf(out, "\"const_bytes\":%d,", r->const_bytes);
    else
        pt_buf_puts(out, "\"const_bytes\":null,");
    pt_buf_printf(out, "\"barriers\":%d,\"compile_ms\":%.3f,\"nwarnings\":%d,\"codes\":[",
                  r->barriers, r->compile_ms, r->nwarnings);
    for (int i = 0; i < r->ncodes && i < PT_MAX_CODES; i++)
        pt_buf_printf(out, "%s\"%.*s\"", i ? "," : "", (int)sizeof r->codes[i], r->codes[i]);
    pt_buf_puts(out, "]}");
    return PT_OK;
}
