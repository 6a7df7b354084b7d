/* The emulator's tensor maps: validation, the private blob, the box model
 * (see tmap.h). */
#include "ptx/emu/tmap.h"

#include <string.h>

static const struct {
    const char *name;
    int bytes;
    bool is_float;
} dtypes[EMU_TMAP_NDTYPES] = {
    {"u8", 1, false},  {"u16", 2, false},  {"u32", 4, false},     {"s32", 4, false},
    {"u64", 8, false}, {"s64", 8, false},  {"f16", 2, true},      {"f32", 4, true},
    {"f64", 8, true},  {"bf16", 2, true},  {"f32_ftz", 4, true},  {"tf32", 4, true},
    {"tf32_ftz", 4, true}, {"16u4_align8b", 0, false}, {"16u4_align16b", 0, false},
    {"16u6_align16b", 0, false},
};

static const char *const swizzles[] = {"none",          "32B",
                                       "64B",           "128B",
                                       "128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B",
                                       "128B_ATOM_64B"};

int emu_tmap_elem_bytes(int dtype)
{
    return dtype >= 0 && dtype < EMU_TMAP_NDTYPES ? dtypes[dtype].bytes : 0;
}

const char *emu_tmap_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < EMU_TMAP_NDTYPES ? dtypes[dtype].name : "?";
}

const char *emu_tmap_swizzle_name(int swizzle)
{
    return swizzle >= 0 && swizzle < (int)(sizeof swizzles / sizeof swizzles[0]) ? swizzles[swizzle]
                                                                                 : "?";
}

uint32_t emu_tmap_swizzle_span(int swizzle)
{
    switch (swizzle) {
    case EMU_TMAP_SWIZZLE_32B: return 32;
    case EMU_TMAP_SWIZZLE_64B: return 64;
    case EMU_TMAP_SWIZZLE_NONE: return 0;
    default: return 128;
    }
}

/* The checks in the order of cuda.h's comment above cuTensorMapEncodeTiled
 * (CUDA 13.0). The packed sub-byte types and the _ATOM_ swizzles belong to
 * compute capability 10 and are refused as such: this is an sm_90 model. */
int emu_tmap_validate(const emu_tmap_desc *d, pt_err *e)
{
    if (d->dtype < 0 || d->dtype >= EMU_TMAP_NDTYPES)
        return pt_errf(e, PT_EINVAL, "tensorDataType %d is not a CUtensorMapDataType (0..%d)",
                       d->dtype, EMU_TMAP_NDTYPES - 1);
    if (!dtypes[d->dtype].bytes)
        return pt_errf(e, PT_EINVAL,
                       "tensorDataType %d (%s): packed sub-byte types need compute capability 10",
                       d->dtype, dtypes[d->dtype].name);
    uint64_t es = (uint64_t)dtypes[d->dtype].bytes;
    if (d->interleave < EMU_TMAP_INTERLEAVE_NONE || d->interleave > EMU_TMAP_INTERLEAVE_32B)
        return pt_errf(e, PT_EINVAL, "interleave %d is not a CUtensorMapInterleave (0..2)",
                       d->interleave);
    if (d->rank < 1 || d->rank > EMU_TMAP_MAX_RANK)
        return pt_errf(e, PT_EINVAL, "tensorRank %d outside 1..%d", d->rank, EMU_TMAP_MAX_RANK);
    if (d->interleave != EMU_TMAP_INTERLEAVE_NONE && d->rank < 3)
        return pt_errf(e, PT_EINVAL, "tensorRank %d with interleave %s: at least 3", d->rank,
                       d->interleave == EMU_TMAP_INTERLEAVE_16B ? "16B" : "32B");
    uint64_t galign = d->interleave == EMU_TMAP_INTERLEAVE_32B ? 32 : 16;
    if (d->gaddr == 0 || d->gaddr % galign)
        return pt_errf(e, PT_EINVAL, "globalAddress 0x%llx is not %llu-byte aligned%s",
                       (unsigned long long)d->gaddr, (unsigned long long)galign,
                       d->gaddr ? "" : " (null)");
    for (int i = 0; i < d->rank; i++)
        if (d->dims[i] == 0 || d->dims[i] > (1ull << 32))
            return pt_errf(e, PT_EINVAL, "globalDim[%d] = %llu outside 1..2^32", i,
                           (unsigned long long)d->dims[i]);
    uint64_t salign = d->interleave == EMU_TMAP_INTERLEAVE_32B ? 32 : 16;
    for (int i = 0; i + 1 < d->rank; i++) {
        if (d->strides[i] % salign)
            return pt_errf(e, PT_EINVAL, "globalStrides[%d] = %llu bytes is not a multiple of %llu",
                           i, (unsigned long long)d->strides[i], (unsigned long long)salign);
        if (d->strides[i] >= (1ull << 40))
            return pt_errf(e, PT_EINVAL, "globalStrides[%d] = %llu bytes: at most 2^40 - 1", i,
                           (unsigned long long)d->strides[i]);
        if (d->strides[i] == 0)
            return pt_errf(e, PT_EINVAL, "globalStrides[%d] = 0 bytes", i);
    }
    for (int i = 0; i < d->rank; i++)
        if (d->box[i] == 0 || d->box[i] > 256)
            return pt_errf(e, PT_EINVAL, "boxDim[%d] = %u outside 1..256", i, d->box[i]);
    uint64_t inner = (uint64_t)d->box[0] * es;
    if (d->interleave == EMU_TMAP_INTERLEAVE_NONE && inner % 16)
        return pt_errf(e, PT_EINVAL,
                       "boxDim[0]*elementSize = %llu bytes (%u x %llu) is not a multiple of 16",
                       (unsigned long long)inner, d->box[0], (unsigned long long)es);
    for (int i = 0; i < d->rank; i++)
        if (d->estrides[i] == 0 || d->estrides[i] > 8)
            return pt_errf(e, PT_EINVAL, "elementStrides[%d] = %u outside 1..8", i, d->estrides[i]);
    if (d->swizzle < EMU_TMAP_SWIZZLE_NONE || d->swizzle > EMU_TMAP_SWIZZLE_128B_ATOM_64B)
        return pt_errf(e, PT_EINVAL, "swizzle %d is not a CUtensorMapSwizzle (0..6)", d->swizzle);
    if (d->swizzle > EMU_TMAP_SWIZZLE_128B)
        return pt_errf(e, PT_EINVAL, "swizzle %d (%s) needs compute capability 10", d->swizzle,
                       swizzles[d->swizzle]);
    uint32_t span = emu_tmap_swizzle_span(d->swizzle);
    if (d->interleave == EMU_TMAP_INTERLEAVE_NONE && span && inner > span)
        return pt_errf(e, PT_EINVAL, "boxDim[0]*elementSize = %llu bytes exceeds the %s swizzle span",
                       (unsigned long long)inner, swizzles[d->swizzle]);
    if (d->interleave == EMU_TMAP_INTERLEAVE_32B && d->swizzle != EMU_TMAP_SWIZZLE_32B)
        return pt_errf(e, PT_EINVAL, "interleave 32B needs swizzle 32B, not %s",
                       swizzles[d->swizzle]);
    if (d->l2promo < EMU_TMAP_L2_NONE || d->l2promo > EMU_TMAP_L2_256B)
        return pt_errf(e, PT_EINVAL, "l2Promotion %d is not a CUtensorMapL2promotion (0..3)",
                       d->l2promo);
    if (d->oobfill != EMU_TMAP_OOB_ZERO && d->oobfill != EMU_TMAP_OOB_NAN)
        return pt_errf(e, PT_EINVAL, "oobFill %d is not a CUtensorMapFloatOOBfill (0..1)",
                       d->oobfill);
    if (d->oobfill == EMU_TMAP_OOB_NAN && !dtypes[d->dtype].is_float)
        return pt_errf(e, PT_EINVAL, "oobFill NAN_REQUEST_ZERO_FMA needs a float tensorDataType, not %s",
                       dtypes[d->dtype].name);
    return PT_OK;
}

/* ---- the blob ---- */

static const char magic[8] = {'p', 't', 'x', 't', 'T', 'M', 'A', '1'}; /* "ptxtTMA1" */
enum {
    OFF_MAGIC = 0, OFF_VERSION = 8, OFF_SUM = 12, OFF_SMALL = 16, /* dtype rank il sw l2 oob */
    OFF_GADDR = 24, OFF_DIMS = 32, OFF_STRIDES = 72, OFF_BOX = 104, OFF_ESTR = 114, OFF_END = 119
};
_Static_assert((int)OFF_END <= (int)EMU_TMAP_BYTES, "the fields fit the blob");

static void put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

int emu_tmap_encode(const emu_tmap_desc *d, uint8_t out[EMU_TMAP_BYTES], pt_err *e)
{
    int rc = emu_tmap_validate(d, e);
    if (rc)
        return rc;
    uint8_t b[EMU_TMAP_BYTES];
    memset(b, 0, sizeof b);
    memcpy(b + OFF_MAGIC, magic, sizeof magic);
    put(b + OFF_VERSION, EMU_TMAP_VERSION, 4);
    const int small[6] = {d->dtype, d->rank, d->interleave, d->swizzle, d->l2promo, d->oobfill};
    for (int i = 0; i < 6; i++)
        b[OFF_SMALL + i] = (uint8_t)small[i];
    put(b + OFF_GADDR, d->gaddr, 8);
    for (int i = 0; i < d->rank; i++) {
        put(b + OFF_DIMS + 8 * i, d->dims[i], 8);
        put(b + OFF_BOX + 2 * i, d->box[i], 2);
        b[OFF_ESTR + i] = (uint8_t)d->estrides[i];
    }
    for (int i = 0; i + 1 < d->rank; i++)
        put(b + OFF_STRIDES + 8 * i, d->strides[i], 8);
    put(b + OFF_SUM, fnv1a(b + OFF_SMALL, EMU_TMAP_BYTES - OFF_SMALL), 4);
    memcpy(out, b, sizeof b);
    return PT_OK;
}

int emu_tmap_decode(const uint8_t in[EMU_TMAP_BYTES], emu_tmap_desc *d, pt_err *e)
{
    memset(d, 0, sizeof *d);
    if (memcmp(in + OFF_MAGIC, magic, sizeof magic) != 0)
        return pt_errf(e, PT_EINVAL, "not a ptxtune tensor map (bad magic)");
    uint32_t v = (uint32_t)get(in + OFF_VERSION, 4);
    if (v != EMU_TMAP_VERSION)
        return pt_errf(e, PT_EINVAL, "tensor map version %u (this emulator reads %d)", v,
                       EMU_TMAP_VERSION);
    uint32_t sum = (uint32_t)get(in + OFF_SUM, 4), want = fnv1a(in + OFF_SMALL,
                                                                 EMU_TMAP_BYTES - OFF_SMALL);
    if (sum != want)
        return pt_errf(e, PT_EINVAL,
                       "tensor map bytes modified (checksum 0x%08x, the fields give 0x%08x): a "
                       "map is opaque",
                       sum, want);
    d->dtype = in[OFF_SMALL];
    d->rank = in[OFF_SMALL + 1];
    d->interleave = in[OFF_SMALL + 2];
    d->swizzle = in[OFF_SMALL + 3];
    d->l2promo = in[OFF_SMALL + 4];
    d->oobfill = in[OFF_SMALL + 5];
    d->gaddr = get(in + OFF_GADDR, 8);
    int r = d->rank <= EMU_TMAP_MAX_RANK ? d->rank : EMU_TMAP_MAX_RANK;
    for (int i = 0; i < r; i++) {
        d->dims[i] = get(in + OFF_DIMS + 8 * i, 8);
        d->box[i] = (uint32_t)get(in + OFF_BOX + 2 * i, 2);
        d->estrides[i] = in[OFF_ESTR + i];
    }
    for (int i = 0; i + 1 < r; i++)
        d->strides[i] = get(in + OFF_STRIDES + 8 * i, 8);
    return emu_tmap_validate(d, e);
}

int emu_tmap_emulable(const emu_tmap_desc *d, pt_err *e)
{
    if (d->interleave != EMU_TMAP_INTERLEAVE_NONE)
        return pt_errf(e, PT_EUNSUPPORTED, "tensor map with interleave %s: not emulated",
                       d->interleave == EMU_TMAP_INTERLEAVE_16B ? "16B" : "32B");
    for (int i = 0; i < d->rank; i++)
        if (d->estrides[i] != 1)
            return pt_errf(e, PT_EUNSUPPORTED, "tensor map with elementStrides[%d] = %u: not emulated (1 only)",
                           i, d->estrides[i]);
    if (d->swizzle > EMU_TMAP_SWIZZLE_128B)
        return pt_errf(e, PT_EUNSUPPORTED, "tensor map swizzle %s: not emulated",
                       emu_tmap_swizzle_name(d->swizzle));
    uint32_t span = emu_tmap_swizzle_span(d->swizzle);
    uint64_t inner = (uint64_t)d->box[0] * (uint64_t)emu_tmap_elem_bytes(d->dtype);
    if (span && inner != span)
        return pt_errf(e, PT_EUNSUPPORTED,
                       "tensor map inner box of %llu bytes narrower than the %s swizzle span: how "
                       "the hardware lays it out is unverified, not emulated",
                       (unsigned long long)inner, emu_tmap_swizzle_name(d->swizzle));
    return PT_OK;
}

uint32_t emu_tmap_swizzle(int swizzle, uint32_t x)
{
    switch (swizzle) {
    case EMU_TMAP_SWIZZLE_32B: return x ^ (((x >> 7) & 1u) << 4);
    case EMU_TMAP_SWIZZLE_64B: return x ^ (((x >> 7) & 3u) << 4);
    case EMU_TMAP_SWIZZLE_128B: return x ^ (((x >> 7) & 7u) << 4);
    default: return x;
    }
}

uint64_t emu_tmap_box_elems(const emu_tmap_desc *d)
{
    uint64_t n = 1;
    for (int i = 0; i < d->rank; i++)
        n *= d->box[i];
    return n;
}

uint64_t emu_tmap_box_bytes(const emu_tmap_desc *d)
{
    return emu_tmap_box_elems(d) * (uint64_t)emu_tmap_elem_bytes(d->dtype);
}

bool emu_tmap_box_elem(const emu_tmap_desc *d, const int32_t *coord, uint32_t dst, uint64_t i,
                       uint32_t *smem, uint64_t *gaddr)
{
    uint64_t es = (uint64_t)emu_tmap_elem_bytes(d->dtype);
    *smem = emu_tmap_swizzle(d->swizzle, dst + (uint32_t)(i * es));
    uint64_t rest = i, addr = d->gaddr;
    bool in = true;
    for (int k = 0; k < d->rank; k++) {
        uint64_t b = rest % d->box[k];
        rest /= d->box[k];
        int64_t c = (int64_t)coord[k] + (int64_t)b;
        if (c < 0 || (uint64_t)c >= d->dims[k])
            in = false;
        else
            addr += (uint64_t)c * (k ? d->strides[k - 1] : es);
    }
    *gaddr = in ? addr : 0;
    return in;
}

void emu_tmap_fill_bytes(const emu_tmap_desc *d, uint8_t out[8])
{
    memset(out, 0, 8);
    if (d->oobfill != EMU_TMAP_OOB_NAN)
        return;
    int n = emu_tmap_elem_bytes(d->dtype);
    memset(out, 0xff, (size_t)n);
    out[n - 1] = 0x7f; /* sign clear, every exponent and mantissa bit set */
}
