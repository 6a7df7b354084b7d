/* .npy reading and writing (format in npy.h). The header is a Python dict
 * literal; we read the three keys NumPy writes, transpose Fortran-order data
 * into C order and refuse what we cannot represent (big-endian, object
 * arrays). */
#include "tuner/npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* The value text after 'key': within the header h[0..n). */
static const char *find_key(const char *h, size_t n, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 <= n; i++) {
        if ((h[i] == '\'' || h[i] == '"') && memcmp(h + i + 1, key, kl) == 0 &&
            h[i + 1 + kl] == h[i]) {
            size_t j = i + kl + 2;
            while (j < n && (h[j] == ' ' || h[j] == ':'))
                j++;
            return j < n ? h + j : NULL;
        }
    }
    return NULL;
}

/* Fortran order (first index fastest) into C order (last index fastest):
 * walks the C-order index, keeping the Fortran offset alongside. */
static void fortran_to_c(tuner_npy *n, const unsigned char *src)
{
    int64_t idx[TUNER_NPY_MAX_DIMS] = {0}, fstride[TUNER_NPY_MAX_DIMS];
    int64_t s = 1;
    for (int d = 0; d < n->ndim; d++) {
        fstride[d] = s;
        s *= n->shape[d];
    }
    unsigned char *dst = n->data;
    int64_t off = 0;
    for (int64_t i = 0; i < n->numel; i++) {
        memcpy(dst + (size_t)i * n->itemsize, src + (size_t)off * n->itemsize, n->itemsize);
        for (int d = n->ndim - 1; d >= 0; d--) {
            off += fstride[d];
            if (++idx[d] < n->shape[d])
                break;
            off -= fstride[d] * n->shape[d];
            idx[d] = 0;
        }
    }
}

int tuner_npy_parse(const void *buf, size_t len, const char *name, tuner_npy *out, pt_err *e)
{
    memset(out, 0, sizeof *out);
    const unsigned char *b = buf;
    if (len < 10 || memcmp(b, MAGIC, 6) != 0)
        return pt_errf(e, PT_EPARSE, "%s: not a .npy file (no \\x93NUMPY magic)", name);
    int major = b[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return pt_errf(e, PT_EPARSE, "%s: truncated header", name);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hoff = 12;
    } else {
        return pt_errf(e, PT_EPARSE, "%s: unsupported .npy version %d", name, major);
    }
    if (hlen > len - hoff)
        return pt_errf(e, PT_EPARSE, "%s: header of %zu bytes runs past the file", name, hlen);
    const char *h = (const char *)b + hoff;
    const char *d = find_key(h, hlen, "descr");
    const char *f = find_key(h, hlen, "fortran_order");
    const char *s = find_key(h, hlen, "shape");
    if (!d || !f || !s)
        return pt_errf(e, PT_EPARSE, "%s: header lacks descr, fortran_order or shape", name);
    const char *end = h + hlen;
    char q = *d++;
    size_t dl = 0;
    while (d + dl < end && d[dl] != q)
        dl++;
    if ((q != '\'' && q != '"') || d + dl >= end || dl == 0 || dl >= sizeof out->descr)
        return pt_errf(e, PT_EPARSE, "%s: bad descr", name);
    memcpy(out->descr, d, dl);
    out->descr[dl] = '\0';
    /* NumPy writes a bool here; anything else would be read as C order */
    bool fortran;
    if ((size_t)(end - f) >= 4 && memcmp(f, "True", 4) == 0 &&
        (end - f == 4 || !isalnum((unsigned char)f[4])))
        fortran = true;
    else if ((size_t)(end - f) >= 5 && memcmp(f, "False", 5) == 0 &&
             (end - f == 5 || !isalnum((unsigned char)f[5])))
        fortran = false;
    else
        return pt_errf(e, PT_EPARSE, "%s: bad fortran_order (True or False)", name);
    if (out->descr[0] == '>' && strcmp(out->descr + 1, "u1") && strcmp(out->descr + 1, "i1"))
        return pt_errf(e, PT_EUNSUPPORTED, "%s: big-endian data (%s) is not supported", name,
                       out->descr);
    if (!strchr("<|=", out->descr[0]) || !strchr("fiub", out->descr[1]))
        return pt_errf(e, PT_EUNSUPPORTED, "%s: dtype '%s' is not supported", name, out->descr);
    char *num_end;
    long isz = strtol(out->descr + 2, &num_end, 10);
    if (*num_end || isz <= 0 || isz > 16)
        return pt_errf(e, PT_EUNSUPPORTED, "%s: dtype '%s' is not supported", name, out->descr);
    out->itemsize = (size_t)isz;
    if (*s != '(')
        return pt_errf(e, PT_EPARSE, "%s: bad shape", name);
    s++;
    out->numel = 1;
    for (;;) {
        while (s < end && (*s == ' ' || *s == ','))
            s++;
        if (s >= end)
            return pt_errf(e, PT_EPARSE, "%s: unterminated shape", name);
        if (*s == ')')
            break;
        if (*s < '0' || *s > '9')
            return pt_errf(e, PT_EPARSE, "%s: bad shape", name);
        int64_t v = 0;
        while (s < end && *s >= '0' && *s <= '9') {
            if (v > ((int64_t)1 << 40))
                return pt_errf(e, PT_ERANGE, "%s: dimension too large", name);
            v = v * 10 + (*s++ - '0');
        }
        if (out->ndim == TUNER_NPY_MAX_DIMS)
            return pt_errf(e, PT_EUNSUPPORTED, "%s: more than %d dimensions", name,
                           TUNER_NPY_MAX_DIMS);
        out->shape[out->ndim++] = v;
        if (v && out->numel > ((int64_t)1 << 40) / v)
            return pt_errf(e, PT_ERANGE, "%s: array too large", name);
        out->numel *= v;
    }
    size_t bytes = (size_t)out->numel * out->itemsize;
    if (bytes > len - hoff - hlen)
        return pt_errf(e, PT_EPARSE, "%s: %zu bytes of data expected, %zu present", name, bytes,
                       len - hoff - hlen);
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data)
        return pt_errf(e, PT_ENOMEM, "%s: out of memory", name);
    if (fortran && out->ndim > 1)
        fortran_to_c(out, b + hoff + hlen);
    else
        memcpy(out->data, b + hoff + hlen, bytes);
    return PT_OK;
}

int tuner_npy_read(const char *path, tuner_npy *out, pt_err *e)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return pt_errf(e, PT_EIO, "cannot open '%s': %s", path, strerror(errno));
    pt_buf b;
    pt_buf_init(&b);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        pt_buf_putn(&b, tmp, n);
    int bad = ferror(f) ? errno : 0;
    fclose(f);
    int rc = bad ? pt_errf(e, PT_EIO, "cannot read '%s': %s", path,
                           bad == EISDIR ? "is a directory" : strerror(bad))
                 : tuner_npy_parse(b.s, b.len, path, out, e);
    pt_buf_free(&b);
    return rc;
}

void tuner_npy_free(tuner_npy *n)
{
    free(n->data);
    memset(n, 0, sizeof *n);
}

int tuner_npy_write(const char *path, const char *descr, int ndim, const int64_t *shape,
                    const void *data, pt_err *e)
{
    char h[512];
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        len += snprintf(h + len, sizeof h - (size_t)len, "%lld,%s", (long long)shape[i],
                        i + 1 < ndim ? " " : "");
        numel *= shape[i];
    }
    if (ndim > 1) /* (3,) for one dim, (3, 4) for more */
        len--;
    len += snprintf(h + len, sizeof h - (size_t)len, "), }");
    /* pad with spaces so magic + length + header is a multiple of 64 */
    int total = (10 + len + 1 + 63) / 64 * 64;
    while (10 + len + 1 < total)
        h[len++] = ' ';
    h[len++] = '\n';
    size_t item = (size_t)strtol(descr + 2, NULL, 10);
    pt_wfile w;
    int rc = pt_wfile_open(&w, path, e);
    if (rc)
        return rc;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    size_t bytes = (size_t)numel * item;
    FILE *f = w.f;
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)len, f) == (size_t)len &&
              (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
    if (!ok) {
        pt_wfile_abort(&w);
        return pt_errf(e, PT_EIO, "cannot write '%s'", path);
    }
    return pt_wfile_commit(&w, e);
}

static bool descr_eq(const char *a, const char *b)
{
    /* '=' and '<' are the same on the little-endian hosts we run on; '|' for one byte */
    return (a[0] == b[0] || strchr("<=|", a[0])) && strcmp(a + 1, b + 1) == 0;
}

int tuner_npy_to_dtype(const tuner_npy *n, pt_dtype dt, void *bits, pt_err *e)
{
    const pt_dtype_info *di = pt_dtype_get(dt);
    if (descr_eq(n->descr, di->npy) && n->itemsize == (size_t)di->bytes) {
        memcpy(bits, n->data, (size_t)n->numel * n->itemsize);
        return PT_OK;
    }
    pt_dtype from;
    if (descr_eq(n->descr, "<f2"))
        from = PT_F16;
    else if (descr_eq(n->descr, "<f4"))
        from = PT_F32;
    else if (descr_eq(n->descr, "<f8"))
        from = PT_F64;
    else
        return pt_errf(e, PT_EINVAL, "array of %s cannot be %s (stored as %s, or give floats)",
                       n->descr, di->name, di->npy);
    for (int64_t i = 0; i < n->numel; i++)
        pt_dtype_store(dt, bits, (size_t)i, pt_dtype_load(from, n->data, (size_t)i));
    return PT_OK;
}
