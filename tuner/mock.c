/* The mock backend: a fake device for tests of everything above the
 * backends (verifier, benchmark protocol, worker isolation, CLI).
 *
 * Memory is host memory at fake addresses with unmapped gaps. A kernel
 * "runs" the op's float64 reference (tuner_image.op/pp) on the tensors its
 * launch binds, stored in their dtypes, so a healthy mock kernel passes
 * verification. A directive line in the PTX text plants a failure:
 *
 *   // mock: fault        the launch succeeds; the next sync (or copy) fails
 *                         with an illegal address and the device stays dead
 *   // mock: hang         the launch never returns (for the supervisor to kill)
 *   // mock: oor          launch refused: out of resources
 *   // mock: launch_error launch refused otherwise
 *   // mock: wrong        one output element is off
 *   // mock: past         the kernel writes 4 bytes past output 0
 *   // mock: crash        the process dies (SIGKILL) at launch, as if the
 *                         driver had crashed
 *   // mock: time_us=12.5 the timing model's kernel time (default: bytes
 *                         at mock_gbs plus 2 us)
 *
 * Tensors reach the kernel as pointers or inside tensor maps (sm_90a TMA:
 * the 128-byte map by value, decoded here; the map's origin less its
 * pt_tmap.offset is the tensor), so a TMA kernel runs as any other.
 *
 * Timing is a model, never a sleep: elapsed = count x kernel time x (1 +
 * noise x u), u uniform in [-1, 1] from a seeded generator. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner/backend_int.h"

typedef struct mock_alloc {
    tuner_ptr base;
    size_t size;
    uint8_t *host;
} mock_alloc;

typedef struct mock_dev {
    mock_alloc *a;
    size_t n, cap;
    tuner_ptr next;
    bool pending_fault; /* a launch faulted; reported at the next sync */
    double gbs, noise;
    uint64_t rng;
} mock_dev;

typedef enum mock_kind {
    MK_OK, MK_FAULT, MK_HANG, MK_OOR, MK_LAUNCH_ERROR, MK_WRONG, MK_PAST, MK_CRASH
} mock_kind;

struct tuner_kernel {
    mock_kind kind;
    double time_us;
    const pt_op *op;
    const pt_prepared *pp;
};

struct tuner_batch {
    tuner_kernel *k;
    int count;
    bool graph;
};

static mock_dev *M(tuner_dev *d) { return d->impl; }

static int mock_open(tuner_dev *d, const tuner_dev_opts *o, pt_err *e)
{
    mock_dev *m = calloc(1, sizeof *m);
    if (!m)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    m->next = 0x7f0000000000ull;
    m->gbs = o->mock_gbs > 0 ? o->mock_gbs : 2000;
    m->noise = o->mock_noise;
    m->rng = o->mock_seed ? o->mock_seed : 0x9e3779b97f4a7c15ull;
    d->impl = m;
    tuner_devinfo *di = &d->info;
    snprintf(di->name, sizeof di->name, "mock device");
    snprintf(di->uuid, sizeof di->uuid, "MOCK-00000000-0000-0000-0000-000000000000");
    di->cc_major = 9;
    di->cc_minor = 0;
    di->sm_count = 132;
    di->l2_bytes = 4 << 20;
    di->smem_optin = 227 << 10;
    di->smem_per_sm = 228 << 10;
    di->regs_per_sm = 65536;
    di->max_threads_per_block = 1024;
    di->clock_khz = 1980000;
    di->mem_clock_khz = 2619000;
    di->mem_bus_bits = 5120;
    di->total_mem = (int64_t)1 << 34;
    di->driver_version = 13000;
    tuner_devinfo_peaks(di);
    di->peak_gbs = m->gbs / 0.9;
    return PT_OK;
}

static void mock_close(tuner_dev *d)
{
    mock_dev *m = M(d);
    for (size_t i = 0; i < m->n; i++)
        free(m->a[i].host);
    free(m->a);
    free(m);
}

/* The allocation holding [p, p+n), or NULL. */
static mock_alloc *find(mock_dev *m, tuner_ptr p, size_t n)
{
    for (size_t i = 0; i < m->n; i++)
        if (p >= m->a[i].base && p - m->a[i].base <= m->a[i].size &&
            n <= m->a[i].size - (p - m->a[i].base))
            return &m->a[i];
    return NULL;
}

static int mock_alloc_fn(tuner_dev *d, size_t bytes, tuner_ptr *p, pt_err *e)
{
    mock_dev *m = M(d);
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        mock_alloc *na = realloc(m->a, cap * sizeof *na);
        if (!na)
            return tuner_dev_fail(d, pt_errf(e, PT_ENOMEM, "cuMemAlloc: out of memory (mock)"),
                                  TUNER_LAUNCH_ERROR, false);
        m->a = na;
        m->cap = cap;
    }
    uint8_t *h = calloc(bytes ? bytes : 1, 1);
    if (!h)
        return tuner_dev_fail(d, pt_errf(e, PT_ENOMEM, "cuMemAlloc: out of memory (mock)"),
                              TUNER_LAUNCH_ERROR, false);
    m->a[m->n++] = (mock_alloc){m->next, bytes, h};
    *p = m->next;
    m->next += (bytes + 0xffff) / 0x10000 * 0x10000 + 0x10000; /* 64 KB gap */
    return PT_OK;
}

static void mock_free(tuner_dev *d, tuner_ptr p)
{
    mock_dev *m = M(d);
    for (size_t i = 0; i < m->n; i++)
        if (m->a[i].base == p) {
            free(m->a[i].host);
            m->a[i] = m->a[--m->n];
            return;
        }
}

/* A copy waits for the device, as cuMemcpy does: a pending fault shows up
 * here and kills the device. */
static int check_fault(tuner_dev *d, const char *call, pt_err *e)
{
    if (!M(d)->pending_fault)
        return PT_OK;
    M(d)->pending_fault = false;
    return tuner_dev_fail(
        d, pt_errf(e, PT_EIO, "%s: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered; mock)", call),
        TUNER_FAULT, true);
}

static int mock_write(tuner_dev *d, tuner_ptr dst, const void *src, size_t n, pt_err *e)
{
    int rc = check_fault(d, "cuMemcpyHtoD", e);
    if (rc)
        return rc;
    mock_alloc *a = find(M(d), dst, n);
    if (!a)
        return tuner_dev_fail(d, pt_errf(e, PT_EINVAL, "cuMemcpyHtoD: CUDA_ERROR_INVALID_VALUE (mock: %zu bytes at 0x%llx)", n, (unsigned long long)dst),
                              TUNER_LAUNCH_ERROR, false);
    memcpy(a->host + (dst - a->base), src, n);
    return PT_OK;
}

static int mock_read(tuner_dev *d, tuner_ptr src, void *dst, size_t n, pt_err *e)
{
    int rc = check_fault(d, "cuMemcpyDtoH", e);
    if (rc)
        return rc;
    mock_alloc *a = find(M(d), src, n);
    if (!a)
        return tuner_dev_fail(d, pt_errf(e, PT_EINVAL, "cuMemcpyDtoH: CUDA_ERROR_INVALID_VALUE (mock: %zu bytes at 0x%llx)", n, (unsigned long long)src),
                              TUNER_LAUNCH_ERROR, false);
    memcpy(dst, a->host + (src - a->base), n);
    return PT_OK;
}

static int mock_fill(tuner_dev *d, tuner_ptr dst, uint8_t byte, size_t n, pt_err *e)
{
    int rc = check_fault(d, "cuMemsetD8", e);
    if (rc)
        return rc;
    mock_alloc *a = find(M(d), dst, n);
    if (!a)
        return tuner_dev_fail(d, pt_errf(e, PT_EINVAL, "cuMemsetD8: CUDA_ERROR_INVALID_VALUE (mock)"),
                              TUNER_LAUNCH_ERROR, false);
    memset(a->host + (dst - a->base), byte, n);
    return PT_OK;
}

/* The directive line, anywhere in the text: "// mock: WORD [time_us=X]". */
static void parse_directive(const char *ptx, size_t len, tuner_kernel *k)
{
    static const struct {
        const char *word;
        mock_kind kind;
    } words[] = {{"fault", MK_FAULT}, {"hang", MK_HANG}, {"oor", MK_OOR},
                 {"launch_error", MK_LAUNCH_ERROR}, {"wrong", MK_WRONG}, {"past", MK_PAST},
                 {"crash", MK_CRASH}};
    const char *tag = "// mock:";
    size_t tl = strlen(tag);
    for (size_t i = 0; ptx && i + tl <= len; i++) {
        if (memcmp(ptx + i, tag, tl) != 0)
            continue;
        size_t j = i + tl;
        while (j < len && ptx[j] != '\n') {
            while (j < len && ptx[j] == ' ')
                j++;
            size_t s = j;
            while (j < len && ptx[j] != ' ' && ptx[j] != '\n')
                j++;
            size_t wl = j - s;
            for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
                if (wl == strlen(words[w].word) && memcmp(ptx + s, words[w].word, wl) == 0)
                    k->kind = words[w].kind;
            if (wl > 8 && memcmp(ptx + s, "time_us=", 8) == 0)
                k->time_us = strtod(ptx + s + 8, NULL);
        }
        return;
    }
}

static int mock_load(tuner_dev *d, const tuner_image *img, tuner_kernel **out, pt_err *e)
{
    (void)d;
    tuner_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    parse_directive(img->ptx, img->ptx_len, k);
    k->op = img->op;
    k->pp = img->pp;
    if (k->time_us <= 0) {
        double bytes = k->op && k->pp ? k->op->bytes(k->pp) : 0;
        k->time_us = bytes / (M(d)->gbs * 1e3) + 2.0;
    }
    *out = k;
    return PT_OK;
}

static void mock_unload(tuner_dev *d, tuner_kernel *k)
{
    (void)d;
    free(k);
}

enum { MOCK_MAX_TENSORS = 24 };

/* Runs the op's reference as the kernel: reads the bound inputs from mock
 * memory, stores the outputs in their dtypes. */
static int execute(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e)
{
    mock_dev *m = M(d);
    if (!k->op || !k->pp)
        return PT_OK;
    int nin = 0, nout = 0;
    pt_tensor in[MOCK_MAX_TENSORS], out[MOCK_MAX_TENSORS];
    k->op->tensors(k->pp, &nin, &nout, NULL, NULL);
    if (nin > MOCK_MAX_TENSORS || nout > MOCK_MAX_TENSORS)
        return pt_errf(e, PT_EINVAL, "mock: too many tensors");
    k->op->tensors(k->pp, &nin, &nout, in, out);
    mock_alloc *ina[MOCK_MAX_TENSORS] = {0}, *outa[MOCK_MAX_TENSORS] = {0};
    tuner_ptr inp[MOCK_MAX_TENSORS] = {0}, outp[MOCK_MAX_TENSORS] = {0};
    for (int a = 0; a < l->nargs; a++) {
        const pt_arg *g = &l->args[a];
        pt_arg_kind kind = g->kind;
        int index = g->index;
        tuner_ptr p;
        if (kind == PT_ARG_TENSORMAP) {
            /* a tensor map (sm_90a TMA) binds its tensor: the map's origin
             * less the launch's offset of it is the tensor's pointer */
            if (index < 0 || index >= l->ntmaps)
                return pt_errf(e, PT_EINVAL, "mock: parameter %d: tensor map %d of %d", a + 1, index, l->ntmaps);
            const pt_tmap *tm = &l->tmaps[index];
            emu_tmap_desc md;
            int rc = emu_tmap_decode(args[a], &md, e);
            if (rc)
                return tuner_dev_fail(d, rc, TUNER_LAUNCH_ERROR, false);
            kind = tm->of;
            index = tm->index;
            p = md.gaddr - tm->offset;
        } else if (kind == PT_ARG_INPUT || kind == PT_ARG_OUTPUT)
            p = *(const uint64_t *)args[a];
        else
            continue;
        if ((kind != PT_ARG_INPUT && kind != PT_ARG_OUTPUT) || index < 0 ||
            index >= (kind == PT_ARG_INPUT ? nin : nout))
            return pt_errf(e, PT_EINVAL, "mock: parameter %d binds no tensor", a + 1);
        const pt_tensor *t = kind == PT_ARG_INPUT ? &in[index] : &out[index];
        size_t bytes = (size_t)t->numel * (size_t)pt_dtype_get(t->dtype)->bytes;
        mock_alloc *al = find(m, p, bytes);
        if (!al) { /* the kernel would touch unmapped memory */
            m->pending_fault = true;
            return PT_OK;
        }
        if (kind == PT_ARG_INPUT) {
            ina[index] = al;
            inp[index] = p;
        } else {
            outa[index] = al;
            outp[index] = p;
        }
    }
    int rc = PT_OK;
    for (int i = 0; i < nin; i++)
        in[i].data = NULL;
    for (int i = 0; i < nout; i++)
        out[i].data = NULL;
    for (int i = 0; i < nin && !rc; i++) {
        in[i].data = malloc((size_t)in[i].numel * sizeof(double));
        if (!in[i].data || !ina[i]) {
            rc = pt_errf(e, PT_EINVAL, "mock: input %d not bound or out of memory", i);
            break;
        }
        const uint8_t *src = ina[i]->host + (inp[i] - ina[i]->base);
        for (int64_t j = 0; j < in[i].numel; j++)
            in[i].data[j] = pt_dtype_load(in[i].dtype, src, (size_t)j);
    }
    for (int i = 0; i < nout && !rc; i++) {
        out[i].data = calloc((size_t)out[i].numel, sizeof(double));
        if (!out[i].data || !outa[i])
            rc = pt_errf(e, PT_EINVAL, "mock: output %d not bound or out of memory", i);
    }
    if (!rc)
        rc = k->op->reference(k->pp, in, out, e);
    if (!rc && k->kind == MK_WRONG && nout > 0)
        out[0].data[out[0].numel / 2] = out[0].data[out[0].numel / 2] * 2 + 1;
    for (int i = 0; i < nout && !rc; i++) {
        uint8_t *dst = outa[i]->host + (outp[i] - outa[i]->base);
        for (int64_t j = 0; j < out[i].numel; j++)
            pt_dtype_store(out[i].dtype, dst, (size_t)j, out[i].data[j]);
    }
    if (!rc && k->kind == MK_PAST && nout > 0) {
        size_t bytes = (size_t)out[0].numel * (size_t)pt_dtype_get(out[0].dtype)->bytes;
        mock_alloc *al = find(m, outp[0] + bytes, 4);
        if (al)
            memset(al->host + (outp[0] + bytes - al->base), 0, 4);
        else
            m->pending_fault = true;
    }
    for (int i = 0; i < nin; i++)
        free(in[i].data);
    for (int i = 0; i < nout; i++)
        free(out[i].data);
    return rc;
}

/* The failure a planted kernel shows at launch, if any. */
static int launch_failure(tuner_dev *d, tuner_kernel *k, pt_err *e)
{
    switch (k->kind) {
    case MK_HANG:
        for (;;)
            pause(); /* until the supervisor's SIGKILL */
    case MK_CRASH:
        raise(SIGKILL);
        for (;;)
            pause();
    case MK_OOR:
        return tuner_dev_fail(d, pt_errf(e, PT_ERANGE, "cuLaunchKernelEx: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested for launch; mock)"),
                              TUNER_RESOURCE_LIMIT, false);
    case MK_LAUNCH_ERROR:
        return tuner_dev_fail(d, pt_errf(e, PT_EIO, "cuLaunchKernelEx: CUDA_ERROR_INVALID_HANDLE (mock)"),
                              TUNER_LAUNCH_ERROR, false);
    case MK_FAULT:
        M(d)->pending_fault = true;
        return PT_OK;
    default:
        return PT_OK;
    }
}

static int mock_launch(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e)
{
    if (M(d)->pending_fault)
        return PT_OK; /* queued behind the fault: nothing runs */
    int rc = launch_failure(d, k, e);
    if (rc || M(d)->pending_fault)
        return rc;
    return execute(d, k, l, args, e);
}

static int mock_sync(tuner_dev *d, pt_err *e) { return check_fault(d, "cuStreamSynchronize", e); }

static int mock_batch_new(tuner_dev *d, tuner_kernel *k, const pt_launch *l,
                          void *const *const *argsets, int nsets, int count, bool graph,
                          tuner_batch **out, pt_err *e)
{
    (void)d;
    (void)l;
    (void)argsets;
    (void)nsets;
    tuner_batch *b = calloc(1, sizeof *b);
    if (!b)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    *b = (tuner_batch){k, count, graph};
    *out = b;
    return PT_OK;
}

/* Uniform in [-1, 1) (splitmix64). */
static double unit(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / (double)(1ull << 52) - 1.0;
}

static int mock_batch_time(tuner_dev *d, tuner_batch *b, tuner_ptr flush, size_t flush_bytes,
                           double *ms, pt_err *e)
{
    mock_dev *m = M(d);
    if (flush_bytes && !find(m, flush, flush_bytes))
        return tuner_dev_fail(d, pt_errf(e, PT_EINVAL, "cuMemsetD32Async: CUDA_ERROR_INVALID_VALUE (mock flush buffer)"),
                              TUNER_LAUNCH_ERROR, false);
    int rc = launch_failure(d, b->k, e);
    if (rc)
        return rc;
    if (m->pending_fault)
        return check_fault(d, "cuEventSynchronize", e);
    double per = b->k->time_us * (1.0 + m->noise * unit(&m->rng)) + (b->graph ? 0.0 : 1.0);
    *ms = b->count * per * 1e-3;
    return PT_OK;
}

static void mock_batch_free(tuner_dev *d, tuner_batch *b)
{
    (void)d;
    free(b);
}

static int mock_clock(tuner_dev *d, int *sm_mhz, int *temp_c, pt_err *e)
{
    (void)d;
    (void)e;
    *sm_mhz = 1980;
    *temp_c = 40;
    return PT_OK;
}

const tuner_backend_ops tuner_mock_ops = {
    .name = "mock",
    .can_time = true,
    .guard_bytes = 1024,
    .open = mock_open,
    .close = mock_close,
    .alloc = mock_alloc_fn,
    .free = mock_free,
    .write = mock_write,
    .read = mock_read,
    .fill = mock_fill,
    .load = mock_load,
    .unload = mock_unload,
    .launch = mock_launch,
    .sync = mock_sync,
    .batch_new = mock_batch_new,
    .batch_time = mock_batch_time,
    .batch_free = mock_batch_free,
    .clock = mock_clock,
};
