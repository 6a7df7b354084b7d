/* The emulator's tensor maps (ptx/emu/tmap.h): every constraint of
 * cuTensorMapEncodeTiled refused with a message naming it, the blob's round
 * trip and its opacity, and the box model (shared address with each swizzle,
 * global address, OOB fill) spot-checked against ../shared/ref/ptx-sm90.md
 * sections 2.3 and 4.4. */
#include <criterion/criterion.h>
#include <string.h>

#include "ptx/emu/tmap.h"

/* A K-major bf16 GEMM operand as the sm90 ref's 4.3 describes it: 128 rows
 * of 64 elements (128 B) with a 128B swizzle, box {64, 64}. */
static emu_tmap_desc good(void)
{
    emu_tmap_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = EMU_TMAP_BF16;
    d.rank = 2;
    d.gaddr = 1ull << 40;
    d.dims[0] = 64;
    d.dims[1] = 128;
    d.strides[0] = 128;
    d.box[0] = 64;
    d.box[1] = 64;
    d.estrides[0] = d.estrides[1] = 1;
    d.swizzle = EMU_TMAP_SWIZZLE_128B;
    d.l2promo = EMU_TMAP_L2_256B;
    return d;
}

Test(emu_tmap, good_map_validates)
{
    emu_tmap_desc d = good();
    pt_err e = {0};
    cr_assert_eq(emu_tmap_validate(&d, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(emu_tmap_emulable(&d, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(emu_tmap_box_bytes(&d), 64u * 64u * 2u);
}

typedef void (*mutate_fn)(emu_tmap_desc *d);
#define M(name, body) static void name(emu_tmap_desc *d) { body; }
M(m_dtype, d->dtype = 16)
M(m_packed, d->dtype = EMU_TMAP_16U4_ALIGN8B)
M(m_rank0, d->rank = 0)
M(m_rank6, d->rank = 6)
M(m_interleave_rank, d->interleave = EMU_TMAP_INTERLEAVE_16B)
M(m_interleave_bad, d->interleave = 3)
M(m_addr15, d->gaddr += 8)
M(m_addr_null, d->gaddr = 0)
M(m_addr32, (d->rank = 3, d->dims[2] = 2, d->strides[1] = 128 * 128, d->box[2] = 1,
             d->estrides[2] = 1, d->interleave = EMU_TMAP_INTERLEAVE_32B,
             d->swizzle = EMU_TMAP_SWIZZLE_32B, d->gaddr += 16))
M(m_dim0, d->dims[1] = 0)
M(m_dimbig, d->dims[0] = (1ull << 32) + 1)
M(m_stride16, d->strides[0] = 136)
M(m_stride40, d->strides[0] = 1ull << 40)
M(m_stride32, (d->rank = 3, d->dims[2] = 2, d->strides[0] = 144, d->strides[1] = 144 * 128,
               d->box[2] = 1, d->estrides[2] = 1, d->interleave = EMU_TMAP_INTERLEAVE_32B,
               d->swizzle = EMU_TMAP_SWIZZLE_32B))
M(m_box0, d->box[1] = 0)
M(m_box257, (d->swizzle = 0, d->box[1] = 257))
M(m_box_inner16, (d->swizzle = 0, d->box[0] = 12))
M(m_estride0, d->estrides[1] = 0)
M(m_estride9, d->estrides[0] = 9)
M(m_swizzle_bad, d->swizzle = 7)
M(m_swizzle_atom, d->swizzle = EMU_TMAP_SWIZZLE_128B_ATOM_32B)
M(m_span128, (d->dims[0] = 128, d->strides[0] = 256, d->box[0] = 72))
M(m_span64, d->swizzle = EMU_TMAP_SWIZZLE_64B)
M(m_span32, d->swizzle = EMU_TMAP_SWIZZLE_32B)
M(m_il32_swizzle, (d->rank = 3, d->dims[2] = 2, d->strides[1] = 128 * 128, d->box[2] = 1,
                   d->estrides[2] = 1, d->interleave = EMU_TMAP_INTERLEAVE_32B,
                   d->swizzle = EMU_TMAP_SWIZZLE_128B))
M(m_l2, d->l2promo = 4)
M(m_oob_bad, d->oobfill = 2)
M(m_oob_int, (d->dtype = EMU_TMAP_U8, d->box[0] = 128, d->oobfill = EMU_TMAP_OOB_NAN))
#undef M

Test(emu_tmap, every_constraint_is_refused_with_its_message)
{
    static const struct {
        mutate_fn f;
        const char *msg;
    } bad[] = {
        {m_dtype, "tensorDataType 16 is not a CUtensorMapDataType"},
        {m_packed, "tensorDataType 13 (16u4_align8b): packed sub-byte types need compute capability 10"},
        {m_rank0, "tensorRank 0 outside 1..5"},
        {m_rank6, "tensorRank 6 outside 1..5"},
        {m_interleave_rank, "tensorRank 2 with interleave 16B: at least 3"},
        {m_interleave_bad, "interleave 3 is not a CUtensorMapInterleave"},
        {m_addr15, "globalAddress 0x10000000008 is not 16-byte aligned"},
        {m_addr_null, "globalAddress 0x0 is not 16-byte aligned (null)"},
        {m_addr32, "globalAddress 0x10000000010 is not 32-byte aligned"},
        {m_dim0, "globalDim[1] = 0 outside 1..2^32"},
        {m_dimbig, "globalDim[0] = 4294967297 outside 1..2^32"},
        {m_stride16, "globalStrides[0] = 136 bytes is not a multiple of 16"},
        {m_stride40, "globalStrides[0] = 1099511627776 bytes: at most 2^40 - 1"},
        {m_stride32, "globalStrides[0] = 144 bytes is not a multiple of 32"},
        {m_box0, "boxDim[1] = 0 outside 1..256"},
        {m_box257, "boxDim[1] = 257 outside 1..256"},
        {m_box_inner16, "boxDim[0]*elementSize = 24 bytes (12 x 2) is not a multiple of 16"},
        {m_estride0, "elementStrides[1] = 0 outside 1..8"},
        {m_estride9, "elementStrides[0] = 9 outside 1..8"},
        {m_swizzle_bad, "swizzle 7 is not a CUtensorMapSwizzle"},
        {m_swizzle_atom, "swizzle 4 (128B_ATOM_32B) needs compute capability 10"},
        {m_span128, "boxDim[0]*elementSize = 144 bytes exceeds the 128B swizzle span"},
        {m_span64, "boxDim[0]*elementSize = 128 bytes exceeds the 64B swizzle span"},
        {m_span32, "boxDim[0]*elementSize = 128 bytes exceeds the 32B swizzle span"},
        {m_il32_swizzle, "interleave 32B needs swizzle 32B, not 128B"},
        {m_l2, "l2Promotion 4 is not a CUtensorMapL2promotion"},
        {m_oob_bad, "oobFill 2 is not a CUtensorMapFloatOOBfill"},
        {m_oob_int, "oobFill NAN_REQUEST_ZERO_FMA needs a float tensorDataType, not u8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        emu_tmap_desc d = good();
        bad[i].f(&d);
        pt_err e = {0};
        uint8_t blob[EMU_TMAP_BYTES];
        memset(blob, 0x5a, sizeof blob);
        cr_expect_eq(emu_tmap_validate(&d, &e), PT_EINVAL, "case %zu (%s) accepted", i, bad[i].msg);
        cr_expect(strstr(e.msg, bad[i].msg), "case %zu: '%s' lacks '%s'", i, e.msg, bad[i].msg);
        cr_expect(!strchr(e.msg, '\n'), "one line: %s", e.msg);
        cr_expect_eq(emu_tmap_encode(&d, blob, &e), PT_EINVAL, "case %zu encoded", i);
        cr_expect_eq(blob[0], 0x5a, "case %zu: a refused map writes nothing", i);
    }
    /* the edges are legal: 2^32 elements, 256-element boxes, strides 2^40 - 16,
     * element strides 8, the 32B interleave with 32-aligned address and strides */
    emu_tmap_desc d = good();
    d.dims[1] = 1ull << 32;
    d.strides[0] = (1ull << 40) - 16;
    d.box[1] = 256;
    d.estrides[1] = 8;
    pt_err e = {0};
    cr_expect_eq(emu_tmap_validate(&d, &e), PT_OK, "%s", e.msg);
    d = good();
    m_stride32(&d);
    d.strides[0] = 160;
    d.strides[1] = 160 * 128;
    d.box[0] = 16; /* 32 B rows in a 32B swizzle */
    cr_expect_eq(emu_tmap_validate(&d, &e), PT_OK, "%s", e.msg);
    /* fields of ranks above tensorRank are ignored */
    d = good();
    d.box[4] = 999;
    d.dims[3] = 0;
    cr_expect_eq(emu_tmap_validate(&d, &e), PT_OK, "%s", e.msg);
}

Test(emu_tmap, round_trip_and_opacity)
{
    emu_tmap_desc in = good();
    in.rank = 5;
    for (int i = 2; i < 5; i++) {
        in.dims[i] = (uint64_t)(3 + i);
        in.strides[i - 1] = in.strides[i - 2] * in.dims[i - 1];
        in.box[i] = (uint32_t)i;
        in.estrides[i] = 1;
    }
    in.dims[4] = 1ull << 32;
    in.oobfill = EMU_TMAP_OOB_NAN;
    uint8_t blob[EMU_TMAP_BYTES];
    pt_err e = {0};
    cr_assert_eq(emu_tmap_encode(&in, blob, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(memcmp(blob, "ptxtTMA1", 8), 0, "magic");
    emu_tmap_desc out;
    cr_assert_eq(emu_tmap_decode(blob, &out, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(memcmp(&in, &out, sizeof in), 0, "decode(encode(d)) == d");
    /* deterministic: the same map, the same bytes */
    uint8_t again[EMU_TMAP_BYTES];
    cr_assert_eq(emu_tmap_encode(&out, again, &e), PT_OK);
    cr_expect_eq(memcmp(blob, again, sizeof blob), 0);
    /* any byte a kernel changes is caught */
    for (int i = 0; i < EMU_TMAP_BYTES; i++) {
        uint8_t b[EMU_TMAP_BYTES];
        memcpy(b, blob, sizeof b);
        b[i] ^= 0x01;
        pt_err_clear(&e);
        cr_expect_eq(emu_tmap_decode(b, &out, &e), PT_EINVAL, "byte %d flipped decodes", i);
        const char *want = i < 8 ? "bad magic" : i < 12 ? "version" : "checksum";
        cr_expect(strstr(e.msg, want), "byte %d: %s", i, e.msg);
    }
    uint8_t zero[EMU_TMAP_BYTES] = {0};
    pt_err_clear(&e);
    cr_expect_eq(emu_tmap_decode(zero, &out, &e), PT_EINVAL);
    cr_expect(strstr(e.msg, "not a ptxtune tensor map"), "%s", e.msg);
}

Test(emu_tmap, what_the_emulator_refuses)
{
    emu_tmap_desc d = good();
    pt_err e = {0};
    d.box[0] = 32; /* 64 B rows in a 128B swizzle: legal, layout unverified */
    cr_expect_eq(emu_tmap_validate(&d, &e), PT_OK, "%s", e.msg);
    pt_err_clear(&e);
    cr_expect_eq(emu_tmap_emulable(&d, &e), PT_EUNSUPPORTED);
    cr_expect(strstr(e.msg, "inner box of 64 bytes narrower than the 128B swizzle span"), "%s", e.msg);
    d = good();
    d.estrides[1] = 2;
    pt_err_clear(&e);
    cr_expect_eq(emu_tmap_emulable(&d, &e), PT_EUNSUPPORTED);
    cr_expect(strstr(e.msg, "elementStrides[1] = 2"), "%s", e.msg);
    d = good();
    m_stride32(&d);
    pt_err_clear(&e);
    cr_expect_eq(emu_tmap_emulable(&d, &e), PT_EUNSUPPORTED);
    cr_expect(strstr(e.msg, "interleave 32B"), "%s", e.msg);
    d = good();
    d.swizzle = EMU_TMAP_SWIZZLE_NONE;
    d.box[0] = 8; /* 16 B rows, no swizzle: fine */
    pt_err_clear(&e);
    cr_expect_eq(emu_tmap_emulable(&d, &e), PT_OK, "%s", e.msg);
}

/* sm90 ref 2.3, spelt as the table does (not as tmap.c computes it): the
 * 16-byte chunk index within the span's row XORed with the row (the 128-byte
 * line) modulo the number of chunks in the span. */
static uint32_t ref_swizzle(int mode, uint32_t x)
{
    uint32_t chunks = mode == EMU_TMAP_SWIZZLE_128B ? 8 : mode == EMU_TMAP_SWIZZLE_64B ? 4
                      : mode == EMU_TMAP_SWIZZLE_32B ? 2 : 1;
    uint32_t line = x / 128, chunk = (x / 16) % 8;
    uint32_t within = chunk % chunks, group = chunk / chunks;
    return (x & ~0x7fu) | ((group * chunks + (within ^ (line % chunks))) << 4) | (x & 15u);
}

Test(emu_tmap, swizzle_functions_match_the_reference)
{
    /* the ref's worked facts: 128B flips bits 4-6 with bits 7-9 */
    cr_expect_eq(emu_tmap_swizzle(EMU_TMAP_SWIZZLE_128B, 0x080), 0x090);
    cr_expect_eq(emu_tmap_swizzle(EMU_TMAP_SWIZZLE_128B, 0x3f0), 0x380);
    cr_expect_eq(emu_tmap_swizzle(EMU_TMAP_SWIZZLE_64B, 0x180), 0x1b0);
    cr_expect_eq(emu_tmap_swizzle(EMU_TMAP_SWIZZLE_32B, 0x080), 0x090);
    cr_expect_eq(emu_tmap_swizzle(EMU_TMAP_SWIZZLE_32B, 0x100), 0x100);
    for (int mode = 0; mode <= EMU_TMAP_SWIZZLE_128B; mode++)
        for (uint32_t x = 0; x < 8192; x++) {
            uint32_t s = emu_tmap_swizzle(mode, x);
            cr_assert_eq(s, ref_swizzle(mode, x), "mode %d x 0x%x: 0x%x", mode, x, s);
            cr_assert_eq(emu_tmap_swizzle(mode, s), x, "an involution");
        }
}

/* A box gathered element by element through emu_tmap_box_elem, against the
 * sm90 ref 4.4 model written out directly: dense row-major at dst, swizzled
 * absolute shared addresses, OOB elements filled. */
static void check_box(int swizzle, int oob, int dtype, const int32_t coord[2])
{
    enum { ROWS = 20 };
    int es = emu_tmap_elem_bytes(dtype);
    uint32_t span = swizzle ? emu_tmap_swizzle_span(swizzle) : 64;
    uint32_t cols = span / (uint32_t)es;
    emu_tmap_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = dtype;
    d.rank = 2;
    d.gaddr = 1ull << 41;
    d.dims[0] = cols + 3;                       /* a partial last box in dim 0 */
    d.strides[0] = (uint64_t)(cols + 16) * (uint64_t)es; /* padded rows */
    d.dims[1] = ROWS;
    d.box[0] = cols;
    d.box[1] = 8;
    d.estrides[0] = d.estrides[1] = 1;
    d.swizzle = swizzle;
    d.oobfill = oob;
    pt_err e = {0};
    cr_assert_eq(emu_tmap_validate(&d, &e), PT_OK, "%s", e.msg);
    cr_assert_eq(emu_tmap_emulable(&d, &e), PT_OK, "%s", e.msg);
    uint8_t fill[8];
    emu_tmap_fill_bytes(&d, fill);
    const uint32_t dst = 0x2400; /* 1024-aligned, as a 128B tile must be */
    uint64_t n = emu_tmap_box_elems(&d), oobs = 0;
    cr_assert_eq(n, (uint64_t)cols * 8);
    uint8_t seen[4096] = {0};
    for (uint64_t i = 0; i < n; i++) {
        uint32_t smem;
        uint64_t ga;
        bool in = emu_tmap_box_elem(&d, coord, dst, i, &smem, &ga);
        int64_t b0 = (int64_t)(i % cols), b1 = (int64_t)(i / cols);
        int64_t c0 = coord[0] + b0, c1 = coord[1] + b1;
        bool want_in = c0 >= 0 && c0 < (int64_t)d.dims[0] && c1 >= 0 && c1 < ROWS;
        cr_assert_eq(in, want_in, "element %llu (%lld, %lld)", (unsigned long long)i,
                     (long long)c0, (long long)c1);
        if (in)
            cr_assert_eq(ga, d.gaddr + (uint64_t)c0 * (uint64_t)es + (uint64_t)c1 * d.strides[0]);
        else {
            cr_assert_eq(ga, 0u);
            oobs++;
        }
        uint32_t dense = dst + (uint32_t)i * (uint32_t)es;
        cr_assert_eq(smem, ref_swizzle(swizzle, dense), "element %llu", (unsigned long long)i);
        /* every box byte lands once, inside the box's footprint */
        uint32_t off = smem - dst;
        cr_assert_lt(off + (uint32_t)es, (uint32_t)emu_tmap_box_bytes(&d) + 1);
        for (int k = 0; k < es; k++) {
            cr_assert_eq(seen[off + (uint32_t)k], 0, "byte %u twice", off + (uint32_t)k);
            seen[off + (uint32_t)k] = 1;
        }
    }
    cr_expect_gt(oobs, 0u, "the box reaches out of bounds");
}

Test(emu_tmap, box_addresses_with_each_swizzle_and_oob_fill)
{
    /* OOB on each side: rows past the end, columns before the start, and
     * columns past the end (dims[0] = cols + 3) */
    const int32_t corners[][2] = {{0, 16}, {-8, 0}, {8, -3}, {-2, 14}};
    const int dts[] = {EMU_TMAP_BF16, EMU_TMAP_F32, EMU_TMAP_U8, EMU_TMAP_F64};
    for (int sw = EMU_TMAP_SWIZZLE_NONE; sw <= EMU_TMAP_SWIZZLE_128B; sw++)
        for (size_t c = 0; c < sizeof corners / sizeof corners[0]; c++)
            for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
                check_box(sw, dts[t] == EMU_TMAP_U8 ? EMU_TMAP_OOB_ZERO : (int)(c & 1), dts[t],
                          corners[c]);
    /* a spot value from sm90 ref 2.3: bf16, 128B swizzle, row 1 of the box,
     * columns 8..15 (16-byte chunk 1) land in chunk 1 ^ 1 = 0 of line 1 */
    emu_tmap_desc d = good();
    uint32_t smem;
    uint64_t ga;
    const int32_t at[2] = {0, 4};
    cr_assert(emu_tmap_box_elem(&d, at, 0x400, 64 + 8, &smem, &ga));
    cr_expect_eq(smem, 0x400u + 128u + 0u);
    cr_expect_eq(ga, d.gaddr + 5 * 128 + 8 * 2);
    cr_assert(emu_tmap_box_elem(&d, at, 0x400, 7 * 64 + 0, &smem, &ga));
    cr_expect_eq(smem, 0x400u + 7u * 128u + 7u * 16u, "row 7, chunk 0 -> chunk 7");
}

Test(emu_tmap, oob_fill_bytes)
{
    static const struct {
        int dtype;
        int n;
        uint8_t nan[8];
    } v[] = {
        {EMU_TMAP_F32, 4, {0xff, 0xff, 0xff, 0x7f}},
        {EMU_TMAP_F16, 2, {0xff, 0x7f}},
        {EMU_TMAP_BF16, 2, {0xff, 0x7f}},
        {EMU_TMAP_F64, 8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
        {EMU_TMAP_TF32, 4, {0xff, 0xff, 0xff, 0x7f}},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        emu_tmap_desc d = good();
        d.dtype = v[i].dtype;
        d.swizzle = 0;
        uint8_t b[8];
        emu_tmap_fill_bytes(&d, b);
        static const uint8_t zero[8];
        cr_expect_eq(memcmp(b, zero, 8), 0, "zero fill of %s", emu_tmap_dtype_name(d.dtype));
        d.oobfill = EMU_TMAP_OOB_NAN;
        emu_tmap_fill_bytes(&d, b);
        cr_expect_eq(memcmp(b, v[i].nan, (size_t)v[i].n), 0, "NaN fill of %s",
                     emu_tmap_dtype_name(d.dtype));
    }
}
