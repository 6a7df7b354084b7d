/* The emulator context: device allocations with shadow bytes, kernel
 * loading, launches (serially or across worker threads, one CTA at a time
 * per worker) and the detector reports. See emu.h for the model and
 * emu_int.h for the address map. */
#include "ptx/emu/emu_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const report_names[] = {
#define X(id, text) text,
    EMU_REPORT_MAP(X)
#undef X
};

const char *emu_report_kind_name(emu_report_kind k)
{
    return (unsigned)k < EMU_NREPORT_KINDS ? report_names[k] : "?";
}

static const char *const bank_names[EMU_NBANK] = {"ld.shared", "st.shared", "ldmatrix", "cp.async"};

const char *emu_bank_class_name(emu_bank_class b)
{
    return (unsigned)b < EMU_NBANK ? bank_names[b] : "?";
}

/* The bank class an instruction counts in, -1 none. */
static int bank_class_of(const emu_ins *in)
{
    switch ((enum emu_h)in->h) {
    case EMU_H_LD: return EMU_BANK_LD;
    case EMU_H_ST: return EMU_BANK_ST;
    case EMU_H_LDMATRIX: return EMU_BANK_LDMATRIX;
    case EMU_H_CP_ASYNC: return EMU_BANK_CP_ASYNC;
    default: return -1;
    }
}

emu_opts emu_default_opts(void)
{
    return (emu_opts){
        .detect_oob = true,
        .detect_uninit = true,
        .detect_race = true,
        .detect_divergence = true,
        .detect_cp_async = true,
        .detect_misaligned = true,
        .detect_deadlock = true,
        .detect_async = true,
        .threads = 1,
        .max_steps = 0,
        .max_reports = 0,
    };
}

int emu_schedule_parse(const char *s, emu_opts *o, pt_err *e)
{
    if (s && !strcmp(s, "lazy")) {
        o->schedule = EMU_SCHED_LAZY;
        o->schedule_seed = 0;
        return PT_OK;
    }
    if (s && !strcmp(s, "eager")) {
        o->schedule = EMU_SCHED_EAGER;
        o->schedule_seed = 0;
        return PT_OK;
    }
    if (s && !strncmp(s, "random:", 7) && s[7] >= '0' && s[7] <= '9') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s + 7, &end, 10);
        if (!*end && !errno) {
            o->schedule = EMU_SCHED_RANDOM;
            o->schedule_seed = (uint64_t)v;
            return PT_OK;
        }
    }
    return pt_errf(e, PT_EINVAL, "bad schedule '%s' (expected lazy, eager or random:SEED)",
                   s ? s : "");
}

const char *emu_schedule_str(const emu_opts *o, char *buf, size_t n)
{
    switch (o->schedule) {
    case EMU_SCHED_EAGER: snprintf(buf, n, "eager"); break;
    case EMU_SCHED_RANDOM:
        snprintf(buf, n, "random:%llu", (unsigned long long)o->schedule_seed);
        break;
    default: snprintf(buf, n, "lazy"); break;
    }
    return buf;
}

emu_ctx *emu_new(const emu_opts *o)
{
    emu_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->o = o ? *o : emu_default_opts();
    if (c->o.smem_shift > EMU_SMEM_SHIFT_MAX || c->o.smem_shift % 16 ||
        (unsigned)c->o.schedule > EMU_SCHED_RANDOM) {
        free(c);
        return NULL;
    }
    if (!c->o.max_steps)
        c->o.max_steps = 1ull << 30;
    if (c->o.max_reports <= 0)
        c->o.max_reports = 32;
    c->h2f = malloc(65536 * sizeof *c->h2f);
    if (!c->h2f || pthread_mutex_init(&c->lock, NULL)) {
        free(c->h2f);
        free(c);
        return NULL;
    }
    for (uint32_t i = 0; i < 65536; i++)
        c->h2f[i] = num_f32(num_f16_to_f32((uint16_t)i));
    for (unsigned i = 0; i < 256; i++) {
        c->fp8f[0][i] = (float)num_decode(EMU_FMT_E4M3, i);
        c->fp8f[1][i] = (float)num_decode(EMU_FMT_E5M2, i);
    }
    return c;
}

void emu_clear_reports(emu_ctx *c)
{
    for (int i = 0; i < c->nreports; i++)
        free(c->reports[i]);
    c->nreports = c->total_reports = 0;
    c->nkeys = 0;
}

void emu_free(emu_ctx *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nallocs; i++) {
        emu_allocrec *a = c->allocs[i];
        free(a->name);
        free(a->data);
        free(a->shadow);
        free(a);
    }
    free(c->allocs);
    emu_clear_reports(c);
    free(c->reports);
    free(c->report_kinds);
    free(c->report_keys);
    free(c->h2f);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- device memory ---- */

uint64_t emu_alloc(emu_ctx *c, size_t bytes, const char *name)
{
    if (c->nallocs >= EMU_MAX_ALLOCS || bytes >= EMU_GSPAN / 2)
        return 0;
    emu_allocrec *a = calloc(1, sizeof *a);
    size_t cap = bytes ? bytes : 1;
    if (!a)
        return 0;
    a->data = aligned_alloc(256, (cap + 255) / 256 * 256);
    a->shadow = calloc((cap + 63) / 64, sizeof *a->shadow);
    a->name = strdup(name ? name : "?");
    if (c->nallocs == c->cap_allocs) {
        size_t nc = c->cap_allocs ? c->cap_allocs * 2 : 16;
        emu_allocrec **q = realloc(c->allocs, nc * sizeof *q);
        if (q) {
            c->allocs = q;
            c->cap_allocs = nc;
        }
    }
    if (!a->data || !a->shadow || !a->name || c->nallocs == c->cap_allocs) {
        free(a->data);
        free(a->shadow);
        free(a->name);
        free(a);
        return 0;
    }
    memset(a->data, EMU_POISON, cap);
    a->size = bytes;
    a->base = (uint64_t)(c->nallocs + 1) << EMU_GSHIFT;
    c->allocs[c->nallocs++] = a;
    return a->base;
}

size_t emu_alloc_size(const emu_ctx *c, uint64_t dptr)
{
    emu_allocrec *a = emu__galloc((emu_ctx *)c, dptr);
    return a ? a->size : 0;
}

static emu_allocrec *range(emu_ctx *c, uint64_t dptr, size_t n, pt_err *e)
{
    emu_allocrec *a = emu__galloc(c, dptr);
    if (!a || dptr - a->base > a->size || n > a->size - (dptr - a->base)) {
        pt_errf(e, PT_EINVAL, "emulator: %zu bytes at 0x%llx are not inside one allocation", n,
                (unsigned long long)dptr);
        return NULL;
    }
    return a;
}

int emu_write(emu_ctx *c, uint64_t dptr, const void *src, size_t n, pt_err *e)
{
    emu_allocrec *a = range(c, dptr, n, e);
    if (!a)
        return PT_EINVAL;
    memcpy(a->data + (dptr - a->base), src, n);
    emu_bits_set(a->shadow, dptr - a->base, n, true);
    return PT_OK;
}

int emu_read(emu_ctx *c, uint64_t dptr, void *dst, size_t n, pt_err *e)
{
    emu_allocrec *a = range(c, dptr, n, e);
    if (!a)
        return PT_EINVAL;
    memcpy(dst, a->data + (dptr - a->base), n);
    return PT_OK;
}

int emu_poison(emu_ctx *c, uint64_t dptr, size_t n, pt_err *e)
{
    emu_allocrec *a = range(c, dptr, n, e);
    if (!a)
        return PT_EINVAL;
    memset(a->data + (dptr - a->base), EMU_POISON, n);
    emu_bits_set(a->shadow, dptr - a->base, n, false);
    return PT_OK;
}

/* ---- kernels ---- */

uint32_t emu__smem_base(const emu_ctx *c, const ptx_module *m)
{
    int arch = c->o.arch ? c->o.arch : m->target.sm;
    uint32_t reserved = arch >= 90 ? 1024 : 0; /* sm_90 cubins: first array at 0x400 */
    return reserved + c->o.smem_shift;
}

uint32_t emu_kernel_smem_base(const emu_kernel *k) { return k->smem_base; }

/* Shared memory one CTA may use on sm_<arch>: the target table's
 * (ptx/target.h PT_TARGET_ROWS, what the GEMM generator checks too). */
static uint64_t smem_limit(int arch) { return pt_target_smem_limit(arch); }

int emu_load(emu_ctx *c, ptx_module *m, const char *name, emu_kernel **out, pt_err *e)
{
    *out = NULL;
    ptx_fn *f = NULL;
    for (size_t i = 0; i < m->nfns && !f; i++)
        if (!name || strcmp(m->fns[i]->name, name) == 0)
            f = m->fns[i];
    if (!f)
        return pt_errf(e, PT_EINVAL, "emulator: no entry '%s' in the module", name ? name : "");
    emu_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return pt_errf(e, PT_ENOMEM, "emulator: out of memory");
    k->ctx = c;
    int rc = emu__decode(k, m, f, e);
    if (rc) {
        emu_kernel_free(k);
        return rc;
    }
    *out = k;
    return PT_OK;
}

void emu_kernel_free(emu_kernel *k)
{
    if (!k)
        return;
    free(k->code);
    free(k->vpool);
    free(k->consts);
    free(k->param_off);
    free(k->param_size);
    free(k->shvars);
    emu__wg_kernel_free(k);
    free(k);
}

/* ---- reports ---- */

int emu_nreports(const emu_ctx *c) { return c->nreports; }
const char *emu_report(const emu_ctx *c, int i)
{
    return i >= 0 && i < c->nreports ? c->reports[i] : NULL;
}
emu_report_kind emu_report_kind_of(const emu_ctx *c, int i)
{
    return i >= 0 && i < c->nreports ? (emu_report_kind)c->report_kinds[i] : EMU_NREPORT_KINDS;
}

/* " in 'name' (base 0x..., size N, offset +K)" or the nearest allocation. */
static void where(emu_cta *c, int space, uint64_t addr, pt_buf *b)
{
    const char *best = NULL;
    uint64_t bbase = 0, bsize = 0, bdist = UINT64_MAX;
    if (space == EMU_SP_CLUSTER) { /* a peer's window: its variables are the kernel's */
        uint64_t rank = (addr >> EMU_CL_SHIFT) - 1;
        addr &= EMU_CL_OFF;
        if (rank < (c->cl ? c->cl->n : 1))
            pt_buf_printf(b, " (CTA rank %llu's offset 0x%llx)", (unsigned long long)rank,
                          (unsigned long long)addr);
        space = EMU_SP_SHARED;
    }
    if (space == EMU_SP_SHARED) {
        for (uint32_t i = 0; i < c->k->nshvars; i++) {
            const emu_shvar *v = &c->k->shvars[i];
            uint64_t size = v->dyn ? c->rs->l.dyn_smem : v->size, d;
            d = addr < v->off ? v->off - addr : addr < v->off + size ? 0 : addr - (v->off + size) + 1;
            if (d < bdist) {
                bdist = d;
                best = v->name;
                bbase = v->off;
                bsize = size;
            }
        }
    } else if (space == EMU_SP_GLOBAL || space == EMU_SP_GENERIC) {
        for (size_t i = 0; i < c->ctx->nallocs; i++) {
            const emu_allocrec *a = c->ctx->allocs[i];
            uint64_t d = addr < a->base ? a->base - addr
                         : addr < a->base + a->size ? 0 : addr - (a->base + a->size) + 1;
            if (d < bdist) {
                bdist = d;
                best = a->name;
                bbase = a->base;
                bsize = a->size;
            }
        }
    } else if (space == EMU_SP_PARAM) {
        best = "parameters";
        bsize = c->k->param_bytes;
        bdist = addr < bsize ? 0 : 1;
    } else if (space == EMU_SP_LOCAL) {
        best = "local";
        bsize = c->k->local_bytes;
        bdist = addr < bsize ? 0 : 1;
    }
    if (!best) {
        pt_buf_puts(b, ", no allocation");
        return;
    }
    int64_t off = (int64_t)(addr - bbase);
    pt_buf_printf(b, ", %s '%s' (base 0x%llx, size %llu, offset %+lld)",
                  bdist == 0 ? "in" : "nearest", best, (unsigned long long)bbase,
                  (unsigned long long)bsize, (long long)off);
}

/* Room for one more report (under the lock, or before workers start). */
static bool grow_reports(emu_ctx *x)
{
    if (x->nkeys < x->cap_keys)
        return true;
    size_t nc = x->cap_keys ? x->cap_keys * 2 : 32;
    uint64_t *q = realloc(x->report_keys, nc * sizeof *q);
    if (q)
        x->report_keys = q;
    char **r = realloc(x->reports, nc * sizeof *r);
    if (r)
        x->reports = r;
    uint8_t *kk = realloc(x->report_kinds, nc);
    if (kk)
        x->report_kinds = kk;
    if (!q || !r || !kk)
        return false;
    x->cap_keys = nc;
    return true;
}

void emu__report(emu_cta *c, emu_report_kind kind, const emu_ins *in, int tid, int space,
                 uint64_t addr, uint32_t n, const char *fmt, ...)
{
    size_t bit = (size_t)kind * (c->k->ncode + 1) + (in ? (size_t)(in - c->k->code) : c->k->ncode);
    if ((c->seen[bit >> 6] >> (bit & 63)) & 1)
        return;
    c->seen[bit >> 6] |= 1ull << (bit & 63);
    __atomic_add_fetch(&c->rs->reports, 1, __ATOMIC_RELAXED);
    emu_ctx *x = c->ctx;
    uint64_t key = (uint64_t)bit;
    pthread_mutex_lock(&x->lock);
    bool dup = false;
    for (size_t i = 0; i < x->nkeys && !dup; i++)
        dup = x->report_keys[i] == key;
    x->total_reports++;
    if (dup || x->nreports >= x->o.max_reports) {
        pthread_mutex_unlock(&x->lock);
        return;
    }
    if (!grow_reports(x)) {
        pthread_mutex_unlock(&x->lock);
        return;
    }
    x->report_keys[x->nkeys++] = key;
    pthread_mutex_unlock(&x->lock);

    pt_buf b;
    pt_buf_init(&b);
    pt_buf_printf(&b, "%s: kernel %s", report_names[kind], c->k->name);
    if (in && in->line)
        pt_buf_printf(&b, " line %d", in->line);
    else if (in)
        pt_buf_printf(&b, " instruction %ld", (long)(in - c->k->code));
    if (in)
        pt_buf_printf(&b, " (%s)", ptx_op_info((ptx_op)in->op).name);
    pt_buf_printf(&b, ", cta (%u,%u,%u)", c->ctaid[0], c->ctaid[1], c->ctaid[2]);
    if (c->rs->clustered)
        pt_buf_printf(&b, " (cluster rank %u)", c->rank);
    if (tid >= 0) {
        const unsigned *bd = c->rs->l.block;
        pt_buf_printf(&b, " thread (%u,%u,%u)", (unsigned)tid % bd[0], (unsigned)tid / bd[0] % bd[1],
                      (unsigned)tid / (bd[0] * bd[1]));
    }
    if (space >= 0) {
        static const char *const sp[] = {"generic", "global",   "shared",         "local",
                                         "param",   "const",    "shared::cluster"};
        pt_buf_printf(&b, ": %u-byte %s access at 0x%llx", n, sp[space], (unsigned long long)addr);
        where(c, space, addr, &b);
    }
    va_list ap;
    va_start(ap, fmt);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_buf_printf(&b, ": %s", msg);
    char *line = pt_buf_take(&b); /* NULL out of memory: counted, not kept */
    pthread_mutex_lock(&x->lock);
    if (line && x->nreports < x->o.max_reports) {
        x->report_kinds[x->nreports] = (uint8_t)kind;
        x->reports[x->nreports++] = line;
        line = NULL;
    }
    pthread_mutex_unlock(&x->lock);
    free(line);
}

/* ---- launches ---- */

static void *worker(void *arg)
{
    emu_runst *rs = arg;
    emu_cluster cl;
    memset(&cl, 0, sizeof cl);
    cl.n = rs->csize;
    cl.cta = calloc(cl.n, sizeof *cl.cta);
    uint32_t ok = 0;
    bool fail = !cl.cta;
    for (uint32_t r = 0; !fail && r < cl.n; r++) {
        fail = emu__cta_init(&cl.cta[r], rs) != PT_OK; /* a failed one is freed too */
        cl.cta[r].cl = &cl;
        cl.cta[r].rank = r;
        ok = r + 1;
    }
    if (!fail)
        fail = emu__cluster_init(&cl, rs->csize * (rs->nwarps + 1)) != PT_OK;
    if (fail) {
        __atomic_store_n(&rs->abort, 2, __ATOMIC_RELAXED);
        for (uint32_t r = 0; r < ok; r++)
            emu__cta_free(&cl.cta[r]);
        free(cl.cta);
        emu__cluster_free(&cl);
        return NULL;
    }
    for (;;) {
        if (__atomic_load_n(&rs->abort, __ATOMIC_RELAXED))
            break;
        uint64_t i = __atomic_fetch_add(&rs->next_cta, 1, __ATOMIC_RELAXED);
        if (i >= rs->nclusters)
            break;
        if (rs->clustered)
            emu__cluster_run(&cl, i);
        else
            emu__cta_run(&cl.cta[0], i);
        for (uint32_t r = 0; r < cl.n; r++)
            if (!cl.cta[r].dead)
                __atomic_add_fetch(&rs->ctas, 1, __ATOMIC_RELAXED);
    }
    for (uint32_t r = 0; r < cl.n; r++) {
        emu_cta *c = &cl.cta[r];
        __atomic_add_fetch(&rs->lanes, c->lanes, __ATOMIC_RELAXED);
        for (int b = 0; b < EMU_NBANK; b++)
            for (int j = 0; j < 3; j++)
                __atomic_add_fetch(&rs->bank[b][j], c->bank[b][j], __ATOMIC_RELAXED);
        for (uint32_t pc = 0; pc < rs->k->ncode; pc++)
            if (c->bank_pc[pc])
                __atomic_add_fetch(&rs->bank_pc[pc], c->bank_pc[pc], __ATOMIC_RELAXED);
        emu__cta_free(c);
    }
    free(cl.cta);
    emu__cluster_free(&cl);
    return NULL;
}

double emu__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int emu_run(emu_ctx *c, emu_kernel *k, const emu_launch *l, const void *const *args,
            emu_stats *st, pt_err *e)
{
    return emu_run_cluster(c, k, l, NULL, false, args, st, e);
}

int emu_run_cluster(emu_ctx *c, emu_kernel *k, const emu_launch *l, const unsigned *cluster,
                    bool nonportable, const void *const *args, emu_stats *st, pt_err *e)
{
    emu_clear_reports(c);
    if (st)
        memset(st, 0, sizeof *st);
    uint64_t nthreads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    uint64_t nctas = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    if (!nthreads || !nctas || nthreads > 1024 || nctas > UINT32_MAX)
        return pt_errf(e, PT_EINVAL, "emulator: bad launch of %s: grid %ux%ux%u, block %ux%ux%u",
                       k->name, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                       l->block[2]);
    for (int i = 0; i < 3; i++) {
        if (k->reqntid[0] && l->block[i] != (unsigned)(k->reqntid[i] ? k->reqntid[i] : 1))
            return pt_errf(e, PT_EINVAL, "emulator: %s needs .reqntid %d,%d,%d", k->name,
                           k->reqntid[0], k->reqntid[1], k->reqntid[2]);
        if (k->maxntid[0] && l->block[i] > (unsigned)(k->maxntid[i] ? k->maxntid[i] : 1))
            return pt_errf(e, PT_EINVAL, "emulator: block exceeds .maxntid of %s", k->name);
    }
    /* the window: reserved region + shift, static arrays, the dynamic array */
    uint64_t smem = (uint64_t)k->dyn_off + l->dyn_smem, used = l->dyn_smem;
    for (uint32_t i = 0; i < k->nshvars; i++) /* what the kernel uses: no redzones */
        used += k->shvars[i].dyn ? 0 : k->shvars[i].size;
    int arch = c->o.arch ? c->o.arch : k->fn->mod->target.sm;
    uint64_t limit = smem_limit(arch);
    if (used > limit)
        return pt_errf(e, PT_EINVAL,
                       "emulator: %llu bytes of shared memory exceed the %llu a CTA may use on sm_%d",
                       (unsigned long long)used, (unsigned long long)limit, arch);
    /* the cluster shape: the launch's, else the kernel's .reqnctapercluster */
    unsigned cdim[3] = {1, 1, 1};
    const int *req = k->fn->reqnctapercluster;
    bool given = cluster && (cluster[0] || cluster[1] || cluster[2]);
    for (int i = 0; i < 3; i++) {
        if (given)
            cdim[i] = cluster[i];
        else if (req[0])
            cdim[i] = req[i] > 0 ? (unsigned)req[i] : 1;
        if (given && req[0] && cdim[i] != (unsigned)(req[i] > 0 ? req[i] : 1))
            return pt_errf(e, PT_EINVAL, "emulator: cluster %u,%u,%u differs from the .reqnctapercluster %d,%d,%d of %s",
                           cluster[0], cluster[1], cluster[2], req[0], req[1], req[2], k->name);
    }
    uint64_t csize = (uint64_t)cdim[0] * cdim[1] * cdim[2];
    uint64_t cmax = nonportable ? EMU_CLUSTER_MAX : EMU_CLUSTER_PORTABLE;
    if (!csize || csize > cmax || l->grid[0] % cdim[0] || l->grid[1] % cdim[1] ||
        l->grid[2] % cdim[2])
        return pt_errf(e, PT_EINVAL,
                       "emulator: bad cluster %u,%u,%u for grid %u,%u,%u (the grid a multiple of "
                       "the cluster, at most %llu CTAs%s)",
                       cdim[0], cdim[1], cdim[2], l->grid[0], l->grid[1], l->grid[2],
                       (unsigned long long)cmax,
                       nonportable ? "" : ", the portable size; 16 with the non-portable opt-in");
    if (k->nparams && !args)
        return pt_errf(e, PT_EINVAL, "emulator: %s takes %u parameters", k->name, k->nparams);
    /* the hang guard counts each CTA's launch and retirement and at least
     * one instruction per warp: a grid over the cap fails before it runs */
    uint64_t nwarps = (nthreads + 31) / 32;
    uint64_t cta_cost = EMU_CTA_COST + nwarps * EMU_WARP_COST;
    uint64_t min_cost = nctas * (cta_cost + nwarps);
    if (min_cost > c->o.max_steps) {
        pt_buf b;
        pt_buf_init(&b);
        pt_buf_printf(&b,
                      "%s: kernel %s: a grid of %llu CTAs of %llu warps costs at least %llu warp "
                      "instructions (launch and retirement of each CTA, one instruction per warp), "
                      "over the cap of %llu",
                      report_names[EMU_R_STEP_CAP], k->name, (unsigned long long)nctas,
                      (unsigned long long)nwarps, (unsigned long long)min_cost,
                      (unsigned long long)c->o.max_steps);
        char *line = pt_buf_take(&b);
        c->total_reports++;
        if (line && grow_reports(c)) {
            c->report_keys[c->nkeys++] = UINT64_MAX;
            c->report_kinds[c->nreports] = (uint8_t)EMU_R_STEP_CAP;
            c->reports[c->nreports++] = line;
            line = NULL;
        }
        free(line);
        if (st)
            st->reports = c->total_reports;
        return pt_errf(e, PT_EEMU, "%s", c->nreports ? c->reports[0] : "emulator: step cap");
    }
    emu_runst rs = {.ctx = c, .k = k, .l = *l, .cta_cost = cta_cost};
    rs.params = calloc(k->param_bytes + 16, 1);
    rs.bank_pc = calloc(k->ncode, sizeof *rs.bank_pc);
    if (!rs.params || !rs.bank_pc) {
        free(rs.params);
        free(rs.bank_pc);
        return pt_errf(e, PT_ENOMEM, "emulator: out of memory");
    }
    for (uint32_t i = 0; i < k->nparams; i++)
        memcpy(rs.params + k->param_off[i], args[i], k->param_size[i]);
    rs.nctas = (uint32_t)nctas;
    rs.csize = (uint32_t)csize;
    memcpy(rs.cdim, cdim, sizeof cdim);
    rs.nclusters = nctas / csize;
    rs.clustered = csize > 1;
    rs.nthreads = (uint32_t)nthreads;
    rs.nwarps = (uint32_t)((nthreads + 31) / 32);
    rs.smem_size = (uint32_t)smem;
    rs.max_steps = c->o.max_steps;
    int nw = c->o.threads > 1 ? c->o.threads : 1;
    if ((uint64_t)nw > rs.nclusters)
        nw = (int)rs.nclusters;
    double t0 = emu__now();
    if (c->o.timeout > 0)
        rs.deadline = t0 + c->o.timeout;
    if (nw == 1)
        worker(&rs);
    else {
        pthread_t *th = calloc((size_t)nw, sizeof *th);
        int started = 0;
        for (int i = 0; th && i < nw; i++)
            if (pthread_create(&th[i], NULL, worker, &rs) == 0)
                started++;
            else
                break;
        if (!started)
            worker(&rs);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        free(th);
    }
    double t1 = emu__now();
    free(rs.params);
    if (st) {
        st->lane_instructions = rs.lanes;
        st->warp_instructions = rs.steps;
        st->seconds = t1 - t0;
        st->reports = c->total_reports;
        st->ctas = rs.ctas;
        st->cost = rs.cost;
        for (int b = 0; b < EMU_NBANK; b++) {
            emu_bank_stat *bs = &st->bank[b];
            bs->accesses = rs.bank[b][0];
            bs->wavefronts = rs.bank[b][1];
            bs->ideal = rs.bank[b][2];
            bs->conflicts = bs->wavefronts - bs->ideal;
        }
        for (uint32_t pc = 0; pc < k->ncode; pc++) {
            int b = bank_class_of(&k->code[pc]);
            if (b >= 0 && rs.bank_pc[pc] > st->bank[b].worst_conflicts) {
                st->bank[b].worst_conflicts = rs.bank_pc[pc];
                st->bank[b].worst_pc = pc;
                st->bank[b].worst_line = k->code[pc].line;
            }
        }
    }
    free(rs.bank_pc);
    if (rs.abort == 2)
        return pt_errf(e, PT_ENOMEM, "emulator: out of memory for a CTA of %s", k->name);
    if (rs.abort == 3 && !c->total_reports)
        return pt_errf(e, PT_EEMU, "emulator: %s hung at a barrier (deadlock detector off)", k->name);
    if (c->total_reports || rs.abort) {
        if (c->nreports)
            return pt_errf(e, PT_EEMU, "%s", c->reports[0]);
        return pt_errf(e, PT_EEMU, "emulator: %s failed", k->name);
    }
    return PT_OK;
}
