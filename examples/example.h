/* The runtime from an engine's side, in C and C++ alike (example.c and
 * example.cpp include this): open a bundle exported by `ptxtune export
 * --format bundle`, select a softmax and a GEMM kernel for sizes that were
 * not tuned exactly, launch them on device buffers and check the results
 * against a CPU reference. Device memory comes from the driver itself
 * (libcuda.so.1 through cuGetProcAddress_v2, as an engine that has its own
 * allocator would do); tests/test_runtime.c runs both against the fake driver.
 *
 *   example BUNDLE SOFTMAX_CLASS GEMM_CLASS
 * Exit 0 when both results match. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ptxtune/ptxtune.h>

typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*alloc_fn)(uint64_t *, size_t);
typedef int (*copy_h2d_fn)(uint64_t, const void *, size_t);
typedef int (*copy_d2h_fn)(void *, uint64_t, size_t);
typedef int (*sync_fn)(void);

typedef struct drv {
    alloc_fn alloc;
    copy_h2d_fn h2d;
    copy_d2h_fn d2h;
    sync_fn sync;
} drv;

static int drv_open(drv *d)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 1;
    gpa_fn gpa;
    *(void **)&gpa = dlsym(lib, "cuGetProcAddress_v2");
    int st = 0;
    if (!gpa || gpa("cuMemAlloc", (void **)&d->alloc, 12000, 1, &st) ||
        gpa("cuMemcpyHtoD", (void **)&d->h2d, 12000, 1, &st) ||
        gpa("cuMemcpyDtoH", (void **)&d->d2h, 12000, 1, &st) ||
        gpa("cuCtxSynchronize", (void **)&d->sync, 12000, 1, &st))
        return 1;
    return 0;
}

static uint64_t upload(const drv *d, const float *h, size_t n)
{
    uint64_t p = 0;
    if (d->alloc(&p, n * sizeof *h) || (h && d->h2d(p, h, n * sizeof *h)))
        return 0;
    return p;
}

static int check(const char *what, const float *got, const double *ref, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= tol * (fabs(ref[i]) + 1e-3))) {
            fprintf(stderr, "%s: element %zu is %g, the reference %g\n", what, i, got[i], ref[i]);
            return 1;
        }
    return 0;
}

static const char *match_name(ptxtune_match m)
{
    return m == PTXTUNE_MATCH_EXACT ? "exact" : m == PTXTUNE_MATCH_BUCKET ? "bucket" : "default";
}

/* y = softmax(x) over rows x cols, at rows not tuned exactly */
static int run_softmax(ptxtune_runtime *rt, const drv *d, const char *klass, int64_t rows,
                       int64_t cols)
{
    ptxtune_error e;
    int64_t dims[2] = {rows, cols};
    ptxtune_selection sel;
    if (ptxtune_select(rt, klass, dims, 2, &sel, &e)) {
        fprintf(stderr, "select: %s\n", e.msg);
        return 1;
    }
    ptxtune_entry_info info;
    ptxtune_entry_info_get(sel.entry, &info);
    printf("softmax %lldx%lld: %s match, kernel tuned for %s\n", (long long)rows, (long long)cols,
           match_name(sel.match), info.problem);
    size_t n = (size_t)(sel.dims[0] * sel.dims[1]);
    float *x = (float *)malloc(n * sizeof *x), *y = (float *)malloc(n * sizeof *y);
    double *ref = (double *)malloc(n * sizeof *ref);
    if (!x || !y || !ref)
        return 1;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)(i * 7919 % 97) - 48) / 16.0f;
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < cols; c++)
            m = fmax(m, x[r * cols + c]);
        for (int64_t c = 0; c < cols; c++)
            s += exp(x[r * cols + c] - m);
        for (int64_t c = 0; c < cols; c++)
            ref[r * cols + c] = exp(x[r * cols + c] - m) / s;
    }
    uint64_t dx = upload(d, x, n), dy = upload(d, NULL, n);
    /* tensors in argument order: outputs and inputs as the kernel lists them */
    uint64_t ptrs[8];
    int nt = 0;
    for (int i = 0; i < ptxtune_arg_count(&sel); i++) {
        ptxtune_arg_info a;
        ptxtune_arg_get(&sel, i, &a);
        if (a.tensor >= 0)
            ptrs[nt++] = strcmp(a.kind, "output") == 0 ? dy : dx;
    }
    ptxtune_launch_args la;
    memset(&la, 0, sizeof la);
    la.tensors = ptrs;
    la.ntensors = nt;
    int rc = ptxtune_launch(rt, &sel, &la, &e);
    if (rc)
        fprintf(stderr, "launch: %s\n", e.msg);
    if (!rc)
        rc = d->sync() || d->d2h(y, dy, (size_t)(rows * cols) * sizeof *y);
    if (!rc)
        rc = check("softmax", y, ref, (size_t)(rows * cols), 1e-4);
    free(x);
    free(y);
    free(ref);
    return rc;
}

/* D = A * B (f32, nn) at m not tuned exactly: a kernel with m baked in
 * serves it padded (A zero-filled to the tuned rows). */
static int run_gemm(ptxtune_runtime *rt, const drv *d, const char *klass, int64_t m, int64_t n,
                    int64_t k)
{
    ptxtune_error e;
    int64_t dims[4] = {m, n, k, 1};
    ptxtune_selection sel;
    if (ptxtune_select(rt, klass, dims, 4, &sel, &e)) {
        fprintf(stderr, "select: %s\n", e.msg);
        return 1;
    }
    ptxtune_entry_info info;
    ptxtune_entry_info_get(sel.entry, &info);
    printf("gemm m=%lld n=%lld k=%lld: %s match%s, kernel tuned for %s, workspace %zu bytes\n",
           (long long)m, (long long)n, (long long)k, match_name(sel.match),
           sel.padded ? " (padded)" : "", info.problem, sel.workspace_bytes);
    int64_t M = sel.dims[0], N = sel.dims[1], K = sel.dims[2];
    float *a = (float *)calloc((size_t)(M * K), sizeof(float));
    float *b = (float *)calloc((size_t)(K * N), sizeof(float));
    float *dd = (float *)calloc((size_t)(M * N), sizeof(float));
    double *ref = (double *)calloc((size_t)(m * n), sizeof(double));
    if (!a || !b || !dd || !ref)
        return 1;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++)
            a[i * K + j] = (float)((i * 3 + j * 5) % 11 - 5) / 4.0f;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++)
            b[i * N + j] = (float)((i * 7 + j * 2) % 13 - 6) / 8.0f;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++)
                s += (double)a[i * K + l] * b[l * N + j];
            ref[i * n + j] = s;
        }
    uint64_t da = upload(d, a, (size_t)(M * K)), db = upload(d, b, (size_t)(K * N)),
             dD = upload(d, dd, (size_t)(M * N)), ws = 0;
    if (sel.workspace_bytes) {
        char *z = (char *)calloc(1, sel.workspace_bytes);
        if (!z || d->alloc(&ws, sel.workspace_bytes) || d->h2d(ws, z, sel.workspace_bytes))
            return 1;
        free(z);
    }
    uint64_t ptrs[8];
    int nt = 0;
    for (int i = 0; i < ptxtune_arg_count(&sel); i++) {
        ptxtune_arg_info ai;
        ptxtune_arg_get(&sel, i, &ai);
        if (ai.tensor < 0)
            continue;
        ptrs[nt++] = strcmp(ai.name, "a") == 0 ? da : strcmp(ai.name, "b") == 0 ? db : dD;
    }
    ptxtune_launch_args la;
    memset(&la, 0, sizeof la);
    la.tensors = ptrs;
    la.ntensors = nt;
    la.workspace = ws;
    int rc = ptxtune_launch(rt, &sel, &la, &e);
    if (rc)
        fprintf(stderr, "launch: %s\n", e.msg);
    if (!rc)
        rc = d->sync() || d->d2h(dd, dD, (size_t)(M * N) * sizeof(float));
    for (int64_t i = 0; !rc && i < m; i++) /* the first m rows, the first n columns */
        rc = check("gemm", dd + i * N, ref + i * n, (size_t)n, 1e-4);
    free(a);
    free(b);
    free(dd);
    free(ref);
    return rc;
}

int example_main(int argc, char **argv);
int example_main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s BUNDLE SOFTMAX_CLASS GEMM_CLASS\n", argv[0]);
        return 2;
    }
    drv d;
    if (drv_open(&d)) {
        fprintf(stderr, "no CUDA driver\n");
        return 1;
    }
    ptxtune_options o;
    memset(&o, 0, sizeof o);
    o.flags = PTXTUNE_ALLOW_PTX_JIT | PTXTUNE_ALLOW_PAD;
    ptxtune_runtime *rt;
    ptxtune_error e;
    if (ptxtune_open(argv[1], &o, &rt, &e)) {
        fprintf(stderr, "open: %s\n", e.msg);
        return 1;
    }
    printf("%d kernels for fingerprint %s\n", ptxtune_entry_count(rt), ptxtune_fingerprint(rt));
    int rc = run_softmax(rt, &d, argv[2], 40, 256) || run_gemm(rt, &d, argv[3], 40, 64, 32);
    ptxtune_close(rt);
    printf("%s\n", rc ? "FAILED" : "ok");
    return rc;
}
