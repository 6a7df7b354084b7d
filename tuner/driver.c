#include "tuner/driver.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptx/target.h"

#ifdef PT_HAVE_CUDA_HEADERS
#include <cuda.h>
#endif

int pt_driver_version(int *version, pt_err *e)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1)");
    typedef int (*get_version_fn)(int *);
    get_version_fn fn;
    *(void **)&fn = dlsym(h, "cuDriverGetVersion");
    int rc = PT_OK;
    if (!fn)
        rc = pt_errf(e, PT_ENODRIVER, "libcuda.so.1 has no cuDriverGetVersion");
    else if (fn(version) != 0)
        rc = pt_errf(e, PT_ENODRIVER, "cuDriverGetVersion failed");
    dlclose(h);
    return rc;
}

/* ---- the driver's version, cached (issue 14 item 6: start-up) -------------
 * Without a driver, dlopen("libcuda.so.1") searches LD_LIBRARY_PATH, the
 * loader's cache and the default folders (~70 failing openat/stat calls);
 * with one it maps and relocates a library of tens of MB. pt_toolchain_max_ptx
 * asks at every emit, so the answer is kept in pt_cache_path("driver-v1"),
 * one line "KEY\tVERSION\n" (VERSION 0: no driver), KEY
 * naming everything the search depends on: the LD_LIBRARY_PATH value, the
 * loader's cache (/etc/ld.so.cache) and every searched folder by size,
 * mtime and inode (a library added to a folder changes its mtime), and the
 * library found, by path, size, mtime and inode. A libcuda.so.1 already in
 * the process (a caller's, a test's fake) is asked directly, never cached. */

static void key_stat(pt_buf *k, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        pt_buf_printf(k, "|%s -", path);
    else
        pt_buf_printf(k, "|%s %lld %lld.%09ld %llu", path, (long long)st.st_size,
                      (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                      (unsigned long long)st.st_ino);
}

/* The search's inputs (without the library found). */
static void driver_key(pt_buf *k)
{
    const char *lp = getenv("LD_LIBRARY_PATH");
    pt_buf_printf(k, "LD_LIBRARY_PATH=%s", lp ? lp : "");
    for (const char *p = lp; p && *p;) {
        size_t n = strcspn(p, ":;");
        char dir[PATH_MAX];
        if (n && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            key_stat(k, dir);
        }
        p += n;
        p += *p != '\0';
    }
    static const char *const fixed[] = {"/etc/ld.so.cache", "/lib/x86_64-linux-gnu",
                                        "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                                        "/lib", "/usr/lib"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        key_stat(k, fixed[i]);
}

static int version_of(void *h, int *version, pt_err *e)
{
    typedef int (*get_version_fn)(int *);
    get_version_fn fn;
    *(void **)&fn = dlsym(h, "cuDriverGetVersion");
    if (!fn)
        return pt_errf(e, PT_ENODRIVER, "libcuda.so.1 has no cuDriverGetVersion");
    if (fn(version) != 0)
        return pt_errf(e, PT_ENODRIVER, "cuDriverGetVersion failed");
    return PT_OK;
}

/* dl_iterate_phdr: a libcuda.so.1 among the loaded objects (dlopen's
 * RTLD_NOLOAD would search the folders first when none is) */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    const char *n = info->dlpi_name, *b = n ? strrchr(n, '/') : NULL;
    b = b ? b + 1 : n;
    if (!b || strcmp(b, "libcuda.so.1") != 0 || n[0] != '/')
        return 0;
    snprintf(ctx, PATH_MAX, "%s", n);
    return 1;
}

int pt_driver_version_cached(int *version, pt_err *e)
{
    char loaded[PATH_MAX] = "";
    dl_iterate_phdr(find_loaded, loaded);
    void *h = loaded[0] ? dlopen(loaded, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD) : NULL;
    if (h) { /* already in the process */
        int rc = version_of(h, version, e);
        dlclose(h);
        return rc;
    }
    char cache[PATH_MAX];
    pt_cache_path("driver-v1", cache, sizeof cache);
    pt_buf key;
    pt_buf_init(&key);
    driver_key(&key);
    FILE *f = cache[0] && key.s ? fopen(cache, "r") : NULL;
    if (f) {
        char line[8192];
        bool got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        char *tab = got ? strrchr(line, '\t') : NULL, *lib = NULL;
        /* KEY = the search's inputs, then "|lib|PATH SIZE MTIME INODE" when one was found */
        if (tab && (size_t)(tab - line) >= key.len && memcmp(line, key.s, key.len) == 0 &&
            (line[key.len] == '\t' || strncmp(line + key.len, "|lib|", 5) == 0)) {
            bool ok = true;
            if (line[key.len] == '|') { /* the library found then: unchanged? */
                lib = line + key.len + 4; /* "|PATH ..." */
                char *sp = strchr(lib, ' ');
                pt_buf lk;
                pt_buf_init(&lk);
                if (sp && sp < tab) {
                    *sp = '\0';
                    key_stat(&lk, lib + 1);
                    *sp = ' ';
                }
                ok = lk.s && (size_t)(tab - lib) == lk.len && memcmp(lib, lk.s, lk.len) == 0;
                pt_buf_free(&lk);
            }
            char *end;
            long v = strtol(tab + 1, &end, 10);
            if (ok && end != tab + 1 && *end == '\n' && v >= 0 && v < 1000000) {
                pt_buf_free(&key);
                if (v == 0)
                    return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1)");
                *version = (int)v;
                return PT_OK;
            }
        }
    }
    /* probe, then remember */
    int rc = PT_OK;
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        rc = pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1)");
    else {
        struct link_map *lm = NULL;
        if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] == '/') {
            pt_buf_puts(&key, "|lib");
            key_stat(&key, lm->l_name);
        } else
            key.failed = true; /* where it came from is not known: not cached */
        rc = version_of(h, version, e);
        dlclose(h);
    }
    if ((rc == PT_OK || !h) && key.s && !key.failed)
        pt_cache_write(cache, key.s, rc == PT_OK ? *version : 0);
    pt_buf_free(&key);
    return rc;
}

int pt_toolchain_max_ptx(int compiler_max)
{
    int v = compiler_max, dv;
    pt_err e = {0};
    if (pt_driver_version_cached(&dv, &e) == PT_OK) {
        int d = pt_ptx_for_cuda(dv);
        if (d && (!v || d < v))
            v = d;
    }
    return v;
}

void pt_driver_close(void **lib)
{
    if (*lib)
        dlclose(*lib);
    *lib = NULL;
}

int pt_driver_open(void **lib, const char *const *names, void **const *slots, int n, int nreq,
                   pt_err *e)
{
    *lib = NULL;
    for (int i = 0; i < n; i++)
        *slots[i] = NULL;
#ifdef PT_HAVE_CUDA_HEADERS
    *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!*lib)
        return pt_errf(e, PT_ENODRIVER, "no CUDA driver found (libcuda.so.1)");
    __typeof__(&cuGetProcAddress) gpa;
    *(void **)&gpa = dlsym(*lib, "cuGetProcAddress_v2");
    if (!gpa) {
        pt_driver_close(lib);
        return pt_errf(e, PT_ENODRIVER,
                       "libcuda.so.1 has no cuGetProcAddress_v2 (a CUDA 12 or newer driver is needed)");
    }
    for (int i = 0; i < n; i++) {
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = gpa(names[i], slots[i], CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st);
        if (r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && *slots[i])
            continue;
        *slots[i] = NULL;
        if (i >= nreq)
            continue;
        pt_driver_close(lib);
        return pt_errf(e, PT_ENODRIVER,
                       "libcuda.so.1 lacks %s for CUDA %d (cuGetProcAddress_v2: CUresult %d, "
                       "status %d); update the driver",
                       names[i], CUDA_VERSION, (int)r, (int)st);
    }
    return PT_OK;
#else
    (void)names;
    (void)nreq;
    return pt_errf(e, PT_ENODRIVER,
                   "no CUDA driver found (libcuda.so.1): built without CUDA headers");
#endif
}
