/* The backend interface: opening by name, dispatch, outcome names, peaks. */
#include "tuner/backend_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const outcome_names[TUNER_NOUTCOMES] = {
#define X(id, name) [TUNER_##id] = name,
    TUNER_OUTCOME_MAP(X)
#undef X
};

const char *tuner_outcome_name(tuner_outcome o)
{
    return (unsigned)o < TUNER_NOUTCOMES ? outcome_names[o] : "unknown";
}

tuner_outcome tuner_outcome_parse(const char *name)
{
    for (int i = 0; i < TUNER_NOUTCOMES; i++)
        if (strcmp(outcome_names[i], name) == 0)
            return (tuner_outcome)i;
    return TUNER_NOUTCOMES;
}

static const tuner_backend_ops *const backends[] = {&tuner_cuda_ops, &tuner_emu_ops,
                                                    &tuner_mock_ops};

int tuner_dev_open(const char *backend, const tuner_dev_opts *o, tuner_dev **out, pt_err *e)
{
    *out = NULL;
    const tuner_backend_ops *ops = NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i]->name, backend) == 0)
            ops = backends[i];
    if (!ops)
        return pt_errf(e, PT_EINVAL, "unknown device backend '%s' (cuda, emu, mock)", backend);
    tuner_dev_opts def = {0};
    tuner_dev *d = calloc(1, sizeof *d);
    if (!d)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    d->ops = ops;
    strcpy(d->info.backend, ops->name);
    int rc = ops->open(d, o ? o : &def, e);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return PT_OK;
}

void tuner_dev_close(tuner_dev *d)
{
    if (!d)
        return;
    d->ops->close(d);
    free(d);
}

const tuner_devinfo *tuner_dev_info(const tuner_dev *d) { return &d->info; }
bool tuner_dev_can_time(const tuner_dev *d) { return d->ops->can_time; }
size_t tuner_dev_guard_bytes(const tuner_dev *d) { return d->ops->guard_bytes; }
tuner_outcome tuner_dev_failure(const tuner_dev *d) { return d->fail; }
bool tuner_dev_sticky(const tuner_dev *d) { return d->sticky; }
void tuner_dev_reset_failure(tuner_dev *d) { d->fail = d->sticky ? TUNER_FAULT : TUNER_OK; }

int tuner_dev_fail(tuner_dev *d, int rc, tuner_outcome cls, bool sticky)
{
    d->fail = cls;
    d->sticky = d->sticky || sticky;
    return rc;
}

/* Every entry point refuses a device whose context is gone, with the class
 * of the fault that killed it, so nothing after a fault looks like a new
 * failure of its own. */
#define STICKY_GUARD(d, e)                                                   \
    do {                                                                     \
        if ((d)->sticky)                                                     \
            return pt_errf(e, PT_EIO, "device unusable after an earlier fault"); \
    } while (0)

int tuner_alloc(tuner_dev *d, size_t bytes, tuner_ptr *p, pt_err *e)
{
    STICKY_GUARD(d, e);
    return d->ops->alloc(d, bytes, p, e);
}

void tuner_free(tuner_dev *d, tuner_ptr p)
{
    if (p && !d->sticky)
        d->ops->free(d, p);
}

int tuner_write(tuner_dev *d, tuner_ptr dst, const void *src, size_t n, pt_err *e)
{
    STICKY_GUARD(d, e);
    return n ? d->ops->write(d, dst, src, n, e) : PT_OK;
}

int tuner_read(tuner_dev *d, tuner_ptr src, void *dst, size_t n, pt_err *e)
{
    STICKY_GUARD(d, e);
    return n ? d->ops->read(d, src, dst, n, e) : PT_OK;
}

int tuner_fill(tuner_dev *d, tuner_ptr dst, uint8_t byte, size_t n, pt_err *e)
{
    STICKY_GUARD(d, e);
    return n ? d->ops->fill(d, dst, byte, n, e) : PT_OK;
}

int tuner_tmap_encode(tuner_dev *d, const emu_tmap_desc *m, uint8_t out[EMU_TMAP_BYTES], pt_err *e)
{
    STICKY_GUARD(d, e);
    int rc = emu_tmap_validate(m, e);
    if (rc)
        return rc;
    return d->ops->tmap_encode ? d->ops->tmap_encode(d, m, out, e) : emu_tmap_encode(m, out, e);
}

void tuner_tmap_desc(const pt_tmap *t, tuner_ptr base, emu_tmap_desc *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->rank = t->rank;
    out->gaddr = base + t->offset;
    for (int i = 0; i < EMU_TMAP_MAX_RANK; i++) {
        out->dims[i] = t->dims[i];
        out->box[i] = t->box[i];
        out->estrides[i] = 1;
    }
    for (int i = 0; i + 1 < EMU_TMAP_MAX_RANK; i++)
        out->strides[i] = t->strides[i];
    out->swizzle = t->swizzle;
    out->oobfill = t->oobfill;
    out->l2promo = t->l2promo;
}

int tuner_load(tuner_dev *d, const tuner_image *img, tuner_kernel **k, pt_err *e)
{
    *k = NULL;
    STICKY_GUARD(d, e);
    return d->ops->load(d, img, k, e);
}

void tuner_unload(tuner_dev *d, tuner_kernel *k)
{
    if (k)
        d->ops->unload(d, k);
}

/* A cluster shape: every dimension at least 1 and dividing the grid's. */
static int check_cluster(const pt_launch *l, pt_err *e)
{
    if (!l->cluster[0] && !l->cluster[1] && !l->cluster[2])
        return PT_OK;
    for (int i = 0; i < 3; i++)
        if (!l->cluster[i] || l->grid[i] % l->cluster[i])
            return pt_errf(e, PT_EINVAL, "grid %u,%u,%u is not a multiple of cluster %u,%u,%u",
                           l->grid[0], l->grid[1], l->grid[2], l->cluster[0], l->cluster[1],
                           l->cluster[2]);
    return PT_OK;
}

/* l as this device runs it: a persistent kernel's grid x from the
 * device's SM count (pt_launch_grid_x), the same on every backend. */
static const pt_launch *sized(const tuner_dev *d, const pt_launch *l, pt_launch *tmp)
{
    if (!l->grid_per_sm)
        return l;
    *tmp = *l;
    tmp->grid[0] = pt_launch_grid_x(l, d->info.sm_count);
    tmp->grid_per_sm = 0;
    return tmp;
}

int tuner_launch(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e)
{
    STICKY_GUARD(d, e);
    pt_launch tmp;
    l = sized(d, l, &tmp);
    int rc = check_cluster(l, e);
    if (rc)
        return tuner_dev_fail(d, rc, TUNER_LAUNCH_ERROR, false);
    return d->ops->launch(d, k, l, args, e);
}

int tuner_sync(tuner_dev *d, pt_err *e)
{
    STICKY_GUARD(d, e);
    return d->ops->sync(d, e);
}

int tuner_batch_new(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *const *argsets,
                    int nsets, int count, bool graph, tuner_batch **out, pt_err *e)
{
    *out = NULL;
    STICKY_GUARD(d, e);
    if (!d->ops->can_time)
        return pt_errf(e, PT_EUNSUPPORTED, "the %s backend does not time kernels", d->ops->name);
    if (nsets < 1 || count < 1)
        return pt_errf(e, PT_EINVAL, "batch of %d launches over %d argument sets", count, nsets);
    pt_launch tmp;
    l = sized(d, l, &tmp);
    return d->ops->batch_new(d, k, l, argsets, nsets, count, graph, out, e);
}

int tuner_batch_time(tuner_dev *d, tuner_batch *b, tuner_ptr flush, size_t flush_bytes, double *ms,
                     pt_err *e)
{
    STICKY_GUARD(d, e);
    return d->ops->batch_time(d, b, flush, flush_bytes, ms, e);
}

void tuner_batch_free(tuner_dev *d, tuner_batch *b)
{
    if (b)
        d->ops->batch_free(d, b);
}

int tuner_clock(tuner_dev *d, int *sm_mhz, int *temp_c, pt_err *e)
{
    *sm_mhz = *temp_c = 0;
    if (!d->ops->clock)
        return pt_errf(e, PT_EUNSUPPORTED, "the %s backend has no clocks", d->ops->name);
    return d->ops->clock(d, sm_mhz, temp_c, e);
}

/* Per-SM throughput per clock, by compute capability. fp32: FMA lanes x 2;
 * tensor: dense f16/bf16 flop per clock per SM (A100 312 TF = 108 SMs x
 * 1.41 GHz x 2048; H100 989 TF = 132 x 1.83 GHz x 4096). tf32 is half the
 * f16 rate, fp8 twice (sm_89+). */
static void per_sm(int cc, int *fp32, int *tensor)
{
    switch (cc) {
    case 80: *fp32 = 128; *tensor = 2048; break;
    case 86: *fp32 = 256; *tensor = 1024; break;
    case 87: *fp32 = 256; *tensor = 1024; break;
    case 89: *fp32 = 256; *tensor = 1024; break;
    case 90: *fp32 = 256; *tensor = 4096; break;
    case 100: *fp32 = 256; *tensor = 8192; break;
    default: *fp32 = 256; *tensor = 1024; break;
    }
}

void tuner_devinfo_peaks(tuner_devinfo *di)
{
    int fp32, tensor;
    per_sm(di->cc_major * 10 + di->cc_minor, &fp32, &tensor);
    double ghz = di->clock_khz * 1e-6;
    di->peak_fp32_tflops = di->sm_count * ghz * fp32 * 1e-3;
    di->peak_tensor_tflops = di->sm_count * ghz * tensor * 1e-3;
    di->peak_gbs = (double)di->mem_clock_khz * 1e3 * di->mem_bus_bits / 8.0 * 2.0 * 1e-9;
}

double tuner_peak_tflops(const tuner_devinfo *di, const char *op, pt_dtype dt)
{
    const pt_op *o = op ? pt_op_find(op) : NULL; /* the op's schema says */
    bool tensor = o && o->schema && (o->schema->flags & PT_OP_TENSOR);
    if (!tensor)
        return di->peak_fp32_tflops;
    switch (dt) {
    case PT_E4M3:
    case PT_E5M2: return di->peak_tensor_tflops * 2;
    case PT_TF32:
    case PT_F32: return di->peak_tensor_tflops / 2;
    default: return di->peak_tensor_tflops;
    }
}

void tuner_json_str(pt_buf *out, const char *s)
{
    pt_buf_putc(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            pt_buf_printf(out, "\\%c", *p);
        else if (*p < 0x20)
            pt_buf_printf(out, "\\u%04x", *p);
        else
            pt_buf_putc(out, (char)*p);
    }
    pt_buf_putc(out, '"');
}

void tuner_json_num(pt_buf *out, double v)
{
    if (isfinite(v))
        pt_buf_printf(out, "%.9g", v);
    else
        pt_buf_puts(out, "null");
}

void tuner_devinfo_json(const tuner_devinfo *di, pt_buf *out)
{
    pt_buf_printf(out, "{\"backend\":");
    tuner_json_str(out, di->backend);
    pt_buf_printf(out, ",\"ordinal\":%d,\"name\":", di->ordinal);
    tuner_json_str(out, di->name);
    pt_buf_printf(out, ",\"uuid\":");
    tuner_json_str(out, di->uuid);
    pt_buf_printf(out,
                  ",\"cc\":\"%d.%d\",\"sm_count\":%d,\"l2_bytes\":%lld,\"smem_optin\":%d,"
                  "\"smem_per_sm\":%d,\"regs_per_sm\":%d,\"max_threads_per_block\":%d,"
                  "\"clock_khz\":%d,\"mem_clock_khz\":%d,\"mem_bus_bits\":%d,"
                  "\"total_mem\":%lld,\"driver_version\":%d,\"peak_gbs\":",
                  di->cc_major, di->cc_minor, di->sm_count, (long long)di->l2_bytes,
                  di->smem_optin, di->smem_per_sm, di->regs_per_sm, di->max_threads_per_block,
                  di->clock_khz, di->mem_clock_khz, di->mem_bus_bits, (long long)di->total_mem,
                  di->driver_version);
    tuner_json_num(out, di->peak_gbs);
    pt_buf_puts(out, ",\"peak_fp32_tflops\":");
    tuner_json_num(out, di->peak_fp32_tflops);
    pt_buf_puts(out, ",\"peak_tensor_tflops\":");
    tuner_json_num(out, di->peak_tensor_tflops);
    pt_buf_putc(out, '}');
}
