/* gen/kit/io: kernels that load every storage dtype into f32 and store f32
 * as every storage dtype, built with kit_load / kit_store, assembled with
 * ptxas when present and run on the emulator. Expected values are the host
 * conversions of gen/dtype.h (pt_dtype_load / pt_dtype_store), so kernel
 * and host agree bit for bit: NaN, inf, ties, saturation and subnormals
 * included. Each kernel's last thread is guarded off; its outputs must stay
 * as poisoned. */
#include "gen/kit/io.h"
#include "test_emu_util.h"

#define NT 64 /* threads per launch block */

static const pt_dtype IO_DTYPES[] = {PT_F32, PT_F16, PT_BF16, PT_E4M3, PT_E5M2,
                                     PT_S8,  PT_U8,  PT_S32,  PT_F64, PT_S16, PT_U16};

static int es_of(pt_dtype dt) { return pt_dtype_get(dt)->bytes; }
static bool is_fp8(pt_dtype dt) { return dt == PT_E4M3 || dt == PT_E5M2; }
static const char *sm_of(pt_dtype dt) { return is_fp8(dt) ? "sm_89" : "sm_80"; }

/* A kernel: thread t < count moves n elements from in + t n es_in to
 * out + t n es_out, loading dt_in into f32 and storing f32 as dt_out. */
static tk copy_kernel(pt_dtype din, pt_dtype dout, int n, int align_in, int align_out, bool fp8)
{
    tk t = tk_new(fp8 ? "sm_89" : "sm_80", "io");
    ptx_reg in = tk_ptr(&t, "in"), out = tk_ptr(&t, "out");
    ptx_reg count = tk_u32(&t, "count");
    ptx_reg tid = tk_gtid(&t);
    ptx_reg off = RP(&t);
    E(SETP, MODS(MD(GE)), T1(U32), ptx_r(off), ptx_r(tid), ptx_r(count));
    ptx_reg a = tk_addr(&t, in, tid, n * es_of(din));
    ptx_reg b = tk_addr(&t, out, tid, n * es_of(dout));
    kit_io ld = {.nc = true, .align = align_in, .guard = off, .guard_neg = true};
    kit_io st = {.align = align_out, .guard = off, .guard_neg = true};
    ptx_reg v[64];
    cr_assert_eq(kit_load(t.f, &ld, din, a, 0, n, v), PT_OK, "%s", ptx_module_errmsg(t.m));
    ptx_opd o[64];
    for (int i = 0; i < n; i++)
        o[i] = ptx_r(v[i]);
    cr_assert_eq(kit_store(t.f, &st, dout, b, 0, n, o), PT_OK, "%s", ptx_module_errmsg(t.m));
    tk_ret(&t);
    tk_load(&t);
    return t;
}

/* Runs t over nel elements (nel / n threads, the last one guarded off). */
static void run_copy(tk *t, const void *src, size_t src_bytes, void *dst, size_t dst_bytes, int n,
                     size_t nel)
{
    unsigned threads = (unsigned)(nel / (size_t)n);
    uint64_t in = tk_buf(t, src, src_bytes, "in"), out = tk_buf(t, NULL, dst_bytes, "out");
    pt_err e = {0};
    cr_assert_eq(emu_poison(t->emu, out, dst_bytes, &e), PT_OK, "%s", e.msg);
    uint32_t count = threads - 1;
    const void *args[] = {&in, &out, &count};
    unsigned grid = (threads + NT - 1) / NT;
    cr_assert_eq(threads % NT, 0);
    tk_run(t, grid, NT, args);
    tk_get(t, out, dst, dst_bytes);
}

/* Bits of element i of a dtype buffer (for exact comparison). */
static uint64_t bits_at(pt_dtype dt, const void *buf, size_t i)
{
    uint64_t b = 0;
    memcpy(&b, (const unsigned char *)buf + i * (size_t)es_of(dt), (size_t)es_of(dt));
    return b;
}

/* ---- load: every pattern of the 8- and 16-bit types, edges of the rest ---- */

static size_t load_inputs(pt_dtype dt, unsigned char *buf, size_t cap)
{
    int es = es_of(dt);
    size_t n = cap / (size_t)es;
    uint64_t s = 0x1234567u + (uint64_t)dt;
    if (es <= 2) { /* every pattern, then repeats */
        for (size_t i = 0; i < n; i++) {
            uint16_t v = (uint16_t)(i & (es == 1 ? 0xffu : 0xffffu));
            memcpy(buf + i * (size_t)es, &v, (size_t)es);
        }
        return n;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rnd64(&s);
        if (i % 7 == 0) /* some small integers and specials */
            v = es == 4 ? (uint64_t)(uint32_t)(int32_t)((int)(i % 300) - 150) : v;
        memcpy(buf + i * (size_t)es, &v, (size_t)es);
    }
    static const uint32_t f32sp[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f800000u,
                                     0xff800000u, 0x80000000u, 0x00000001u, 0x7f7fffffu};
    static const int32_t s32sp[] = {INT32_MIN, INT32_MAX, 16777217, -16777217, 0, -1};
    if (dt == PT_F32)
        memcpy(buf, f32sp, sizeof f32sp);
    if (dt == PT_S32)
        memcpy(buf, s32sp, sizeof s32sp);
    return n;
}

static void check_load(pt_dtype dt, int n, int align)
{
    enum { NEL = 65536 };
    int es = es_of(dt);
    unsigned char *src = calloc(NEL, (size_t)es);
    float *dst = calloc(NEL, sizeof(float));
    cr_assert(src && dst);
    load_inputs(dt, src, (size_t)NEL * (size_t)es);
    tk t = copy_kernel(dt, PT_F32, n, align, 0, is_fp8(dt));
    run_copy(&t, src, (size_t)NEL * (size_t)es, dst, NEL * sizeof(float), n, NEL);
    for (size_t i = 0; i < NEL - (size_t)n; i++) {
        double want = pt_dtype_load(dt, src, i);
        float got = dst[i];
        if (isnan(want))
            cr_assert(isnan(got), "%s n=%d: element %zu (bits %llx): got %a, want NaN",
                      pt_dtype_get(dt)->name, n, i, (unsigned long long)bits_at(dt, src, i),
                      (double)got);
        else if (dt == PT_F32)
            cr_assert_eq(bitsof(got), bitsof((float)want), "f32 n=%d element %zu", n, i);
        else
            cr_assert(bitsof(got) == bitsof((float)want),
                      "%s n=%d: element %zu (bits %llx): got %a, want %a", pt_dtype_get(dt)->name,
                      n, i, (unsigned long long)bits_at(dt, src, i), (double)got, (double)(float)want);
    }
    uint32_t poison;
    memcpy(&poison, &dst[NEL - 1], 4);
    for (size_t i = NEL - (size_t)n; i < NEL; i++)
        cr_assert_eq(memcmp(&dst[i], &poison, 4), 0, "guarded-off element %zu written", i);
    tk_free(&t);
    free(src);
    free(dst);
}

Test(kit_io, load_every_dtype_every_width)
{
    for (size_t d = 0; d < sizeof IO_DTYPES / sizeof IO_DTYPES[0]; d++)
        for (int n = 1; n <= 16; n *= 2)
            check_load(IO_DTYPES[d], n, 0);
}

Test(kit_io, load_at_element_alignment)
{
    for (size_t d = 0; d < sizeof IO_DTYPES / sizeof IO_DTYPES[0]; d++)
        check_load(IO_DTYPES[d], 8, es_of(IO_DTYPES[d]));
}

/* ---- store: f32 edge values through every dtype ---- */

/* f32 inputs: specials, every format's ties and saturation edges, integer
 * rounding edges, then random bit patterns at every scale. */
static size_t store_inputs(float *v, size_t cap)
{
    static const float edges[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.5f,
        /* f16: ties at 1 + 2^-11 (even: down), 1 + 3 2^-11 (up); max 65504; 65520 ties to inf */
        1.00048828125f, 1.00146484375f, 65504.0f, 65519.0f, 65520.0f, 70000.0f, -65520.0f,
        /* f16 subnormals: 2^-24 min; 2^-25 ties to 0; 3 2^-25 ties up to 2^-23 */
        5.9604645e-08f, 2.9802322e-08f, 8.940697e-08f, 6.1035156e-05f,
        /* bf16: ties at 1 + 2^-8 (down), 1 + 3 2^-8 (up); max; the tie to inf */
        1.00390625f, 1.01171875f, 3.3895314e+38f, 3.3961775e+38f, 3.4028235e+38f,
        /* e4m3: 448 max; 464 ties to 448 (even); 470 and beyond saturate; 2^-10 tie to 0 */
        448.0f, 464.0f, 470.0f, 480.0f, 1e9f, -1e9f, 0.0009765625f, 0.0029296875f, 0.3f,
        /* e5m2: 57344 max; 61440 ties up and saturates; 1.125 / 1.375 ties */
        57344.0f, 61440.0f, 1.125f, 1.375f, 1.52587890625e-05f, 7.62939453125e-06f,
        /* integers: .5 ties, saturation of s8/u8/s16/u16/s32 */
        126.5f, 127.5f, 128.0f, -128.5f, -129.0f, 254.5f, 255.5f, 256.0f, -0.4f,
        32767.5f, 65535.5f, -32768.5f, 2147483520.0f, 2147483648.0f, -2147483648.0f, -3e9f,
        1e10f, 16777215.0f, 8388609.5f,
    };
    static const uint32_t bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fbfffffu, 0x7f800000u, 0xff800000u, 0x00000001u,
                                    0x80000001u, 0x007fffffu, 0x00800000u};
    size_t n = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0] && n < cap; i++)
        v[n++] = edges[i];
    for (size_t i = 0; i < sizeof bits / sizeof bits[0] && n < cap; i++)
        v[n++] = f32of(bits[i]);
    uint64_t s = 42;
    while (n < cap) { /* random values with exponents near every format's range */
        uint32_t r = rnd32(&s);
        int e = (int)(r % 80) - 40;
        float m = (float)(rnd32(&s) >> 8) / 16777216.0f + 0.5f;
        float x = ldexpf(m, e);
        v[n++] = (r & 0x80000000u) ? -x : x;
    }
    return n;
}

static void check_store(pt_dtype dt, int n, int align, bool scale)
{
    enum { NEL = 4096 };
    int es = es_of(dt);
    float *src = calloc(NEL, sizeof(float));
    unsigned char *dst = calloc(NEL, (size_t)es), *want = calloc(NEL, (size_t)es);
    cr_assert(src && dst && want);
    store_inputs(src, NEL);
    tk t = tk_new(sm_of(dt), "io");
    {
        ptx_reg in = tk_ptr(&t, "in"), out = tk_ptr(&t, "out");
        ptx_reg count = tk_u32(&t, "count");
        ptx_reg tid = tk_gtid(&t);
        ptx_reg off = RP(&t);
        E(SETP, MODS(MD(GE)), T1(U32), ptx_r(off), ptx_r(tid), ptx_r(count));
        ptx_reg a = tk_addr(&t, in, tid, n * 4), b = tk_addr(&t, out, tid, n * es);
        ptx_reg sc = {0};
        if (scale) {
            sc = RF(&t);
            E(MOV, NOM, T1(F32), ptx_r(sc), ptx_f32(0.25f));
        }
        kit_io ld = {.nc = true, .guard = off, .guard_neg = true};
        kit_io st = {.align = align, .guard = off, .guard_neg = true, .scale = sc};
        ptx_reg v[64];
        ptx_opd o[64];
        cr_assert_eq(kit_load(t.f, &ld, PT_F32, a, 0, n, v), PT_OK, "%s", ptx_module_errmsg(t.m));
        for (int i = 0; i < n; i++)
            o[i] = ptx_r(v[i]);
        cr_assert_eq(kit_store(t.f, &st, dt, b, 0, n, o), PT_OK, "%s", ptx_module_errmsg(t.m));
        tk_ret(&t);
        tk_load(&t);
    }
    run_copy(&t, src, NEL * sizeof(float), dst, (size_t)NEL * (size_t)es, n, NEL);
    for (size_t i = 0; i < NEL - (size_t)n; i++) {
        double x = (double)src[i];
        if (scale) /* mul.f32 gives the canonical NaN */
            x = isnan(src[i]) ? (double)f32of(0x7fffffffu) : (double)(src[i] * 0.25f);
        pt_dtype_store(dt, want, i, x);
        uint64_t g = bits_at(dt, dst, i), w = bits_at(dt, want, i);
        if ((dt == PT_F32 || dt == PT_F64) && isnan(x)) { /* payloads are not the point */
            cr_assert(isnan(pt_dtype_load(dt, dst, i)), "%s element %zu", pt_dtype_get(dt)->name, i);
            continue;
        }
        cr_assert_eq(g, w, "%s n=%d align=%d%s: element %zu = %a (bits %08x): got %llx, want %llx",
                     pt_dtype_get(dt)->name, n, align, scale ? " scaled" : "", i, (double)src[i],
                     bitsof(src[i]), (unsigned long long)g, (unsigned long long)w);
    }
    for (size_t i = (NEL - (size_t)n) * (size_t)es; i < (size_t)NEL * (size_t)es; i++)
        cr_assert_eq(dst[i], dst[(size_t)NEL * (size_t)es - 1], "guarded-off byte %zu written", i);
    tk_free(&t);
    free(src);
    free(dst);
    free(want);
}

Test(kit_io, store_every_dtype_every_width)
{
    for (size_t d = 0; d < sizeof IO_DTYPES / sizeof IO_DTYPES[0]; d++)
        for (int n = 1; n <= 16; n *= 2)
            check_store(IO_DTYPES[d], n, 0, false);
}

Test(kit_io, store_at_element_alignment_and_scaled)
{
    for (size_t d = 0; d < sizeof IO_DTYPES / sizeof IO_DTYPES[0]; d++) {
        check_store(IO_DTYPES[d], 8, es_of(IO_DTYPES[d]), false);
        check_store(IO_DTYPES[d], 4, 0, true);
    }
    check_store(PT_E4M3, 8, 2, false); /* pairs one b16 at a time */
}

/* ---- structure: the widest accesses, the packed conversions ---- */

static int count_of(const char *text, const char *s)
{
    int c = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        c++;
    return c;
}

Test(kit_io, vector_widths_and_packed_cvts)
{
    tk t = copy_kernel(PT_F16, PT_BF16, 8, 0, 0, false);
    cr_assert_eq(count_of(t.text, "ld.global.nc.v4.b32"), 1, "%s", t.text);
    cr_assert_eq(count_of(t.text, "cvt.f32.f16"), 8);
    cr_assert_eq(count_of(t.text, "cvt.rn.bf16x2.f32"), 4);
    cr_assert_eq(count_of(t.text, "st.global.v4.b32"), 1);
    tk_free(&t);
    t = copy_kernel(PT_F32, PT_E4M3, 16, 0, 0, true);
    cr_assert_eq(count_of(t.text, "ld.global.nc.v4.f32"), 4, "%s", t.text);
    cr_assert_eq(count_of(t.text, "cvt.rn.satfinite.e4m3x2.f32"), 8);
    cr_assert_eq(count_of(t.text, "st.global.v4.b32"), 1);
    tk_free(&t);
    t = copy_kernel(PT_E5M2, PT_S8, 4, 0, 0, true);
    cr_assert_eq(count_of(t.text, "ld.global.nc.b32"), 1, "%s", t.text);
    cr_assert_eq(count_of(t.text, "cvt.rn.f16x2.e5m2x2"), 2);
    cr_assert_eq(count_of(t.text, "cvt.rni.sat.s8.f32"), 4);
    cr_assert_eq(count_of(t.text, "st.global.v4.s8"), 1);
    tk_free(&t);
    t = copy_kernel(PT_BF16, PT_F16, 64, 0, 0, false); /* the largest run: 8 accesses */
    cr_assert_eq(count_of(t.text, "ld.global.nc.v4.b32"), 8, "%s", t.text);
    cr_assert_eq(count_of(t.text, "st.global.v4.b32"), 8);
    tk_free(&t);
    t = copy_kernel(PT_F16, PT_F16, 8, 2, 4, false); /* alignment caps the width */
    cr_assert_eq(count_of(t.text, "ld.global.nc.b16"), 8, "%s", t.text);
    cr_assert_eq(count_of(t.text, "st.global.b32"), 4);
    tk_free(&t);
}

/* An offset past a 32-bit immediate is added to the base first. */
Test(kit_io, far_offset)
{
    tk t = tk_new("sm_80", "io");
    ptx_reg in = tk_ptr(&t, "in"), out = tk_ptr(&t, "out");
    (void)tk_u32(&t, "count");
    const int64_t far = 0x100000000ll;
    ptx_reg lo = R64(&t);
    E(ADD, NOM, T1(S64), ptx_r(lo), ptx_r(in), ptx_imm(-far));
    kit_io io = {0};
    ptx_reg v[4];
    cr_assert_eq(kit_load(t.f, &io, PT_F16, lo, far, 4, v), PT_OK, "%s", ptx_module_errmsg(t.m));
    ptx_opd o[4] = {ptx_r(v[0]), ptx_r(v[1]), ptx_r(v[2]), ptx_r(v[3])};
    cr_assert_eq(kit_store(t.f, &io, PT_F32, out, 0, 4, o), PT_OK);
    tk_ret(&t);
    tk_load(&t);
    cr_assert(strstr(t.text, "4294967296"), "%s", t.text);
    uint16_t src[4] = {0x3c00, 0xc000, 0x7c00, 0x0001};
    uint64_t pi = tk_buf(&t, src, sizeof src, "in"), po = tk_buf(&t, NULL, 16, "out");
    uint32_t one = 1;
    const void *args[] = {&pi, &po, &one};
    tk_run(&t, 1, 1, args);
    float got[4];
    tk_get(&t, po, got, sizeof got);
    cr_assert(got[0] == 1.0f && got[1] == -2.0f && isinf(got[2]) && got[3] == ldexpf(1, -24));
    tk_free(&t);
}

/* Raw moves keep the stored bits; bad requests are errors, not code. */
Test(kit_io, raw_and_refusals)
{
    tk t = tk_new("sm_89", "io");
    ptx_reg in = tk_ptr(&t, "in"), out = tk_ptr(&t, "out");
    (void)tk_u32(&t, "count");
    kit_io raw = {.raw = true};
    ptx_reg v[8];
    cr_assert_eq(kit_load(t.f, &raw, PT_E4M3, in, 0, 8, v), PT_OK, "%s", ptx_module_errmsg(t.m));
    ptx_opd o[4] = {ptx_r(v[0]), ptx_r(v[1]), ptx_r(v[2]), ptx_r(v[3])};
    cr_assert_eq(kit_store(t.f, &raw, PT_E4M3, out, 0, 8, o), PT_OK, "%s", ptx_module_errmsg(t.m));
    cr_assert_eq(kit_load(t.f, &raw, PT_S32, in, 8, 2, v), PT_OK);
    ptx_opd o2[2] = {ptx_r(v[0]), ptx_r(v[1])};
    cr_assert_eq(kit_store(t.f, &raw, PT_S32, out, 8, 2, o2), PT_OK);
    tk_ret(&t);
    tk_load(&t);
    uint8_t src[16], got[16];
    for (int i = 0; i < 16; i++)
        src[i] = (uint8_t)(0x7b + 17 * i);
    uint64_t pi = tk_buf(&t, src, 16, "in"), po = tk_buf(&t, NULL, 16, "out");
    uint32_t one = 1;
    const void *args[] = {&pi, &po, &one};
    tk_run(&t, 1, 1, args);
    tk_get(&t, po, got, 16);
    cr_assert_eq(memcmp(src, got, 16), 0);
    tk_free(&t);

    static const struct {
        pt_dtype dt;
        int n, align;
        bool raw;
        const char *msg;
    } bad[] = {
        {PT_TF32, 4, 0, false, "tf32"},
        {PT_F16, 3, 0, false, "3 elements"},
        {PT_F32, 4, 2, false, "alignment 2"},
        {PT_E4M3, 4, 1, true, "raw fp8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk b = tk_new("sm_89", "io");
        ptx_reg p = tk_ptr(&b, "in");
        kit_io io = {.align = bad[i].align, .raw = bad[i].raw};
        ptx_reg r[8];
        cr_assert_neq(kit_load(b.f, &io, bad[i].dt, p, 0, bad[i].n, r), PT_OK);
        cr_assert(strstr(ptx_module_errmsg(b.m), bad[i].msg), "%s", ptx_module_errmsg(b.m));
        ptx_module_free(b.m);
    }
}

/* kit_cvt_from_f32 then kit_cvt_to_f32 rounds through the dtype, as the
 * host's pt_dtype_round does (every dtype but f64, tf32 included). */
Test(kit_io, cvt_round_trip_every_dtype)
{
    enum { NEL = 2048 };
    float *src = calloc(NEL, sizeof(float)), *dst = calloc(NEL, sizeof(float));
    cr_assert(src && dst);
    store_inputs(src, NEL);
    for (int d = 0; d < PT_NDTYPES; d++) {
        pt_dtype dt = (pt_dtype)d;
        if (dt == PT_F64)
            continue;
        tk t = tk_new(sm_of(dt), "io");
        ptx_reg in = tk_ptr(&t, "in"), out = tk_ptr(&t, "out");
        ptx_reg count = tk_u32(&t, "count");
        ptx_reg tid = tk_gtid(&t);
        ptx_reg off = RP(&t);
        E(SETP, MODS(MD(GE)), T1(U32), ptx_r(off), ptx_r(tid), ptx_r(count));
        ptx_reg a = tk_addr(&t, in, tid, 4), b = tk_addr(&t, out, tid, 4);
        kit_io io = {.guard = off, .guard_neg = true};
        ptx_reg x;
        cr_assert_eq(kit_load(t.f, &io, PT_F32, a, 0, 1, &x), PT_OK);
        ptx_reg y = kit_cvt_to_f32(t.f, dt, ptx_r(kit_cvt_from_f32(t.f, dt, ptx_r(x))));
        ptx_opd o = ptx_r(y);
        cr_assert_eq(kit_store(t.f, &io, PT_F32, b, 0, 1, &o), PT_OK, "%s: %s",
                     pt_dtype_get(dt)->name, ptx_module_errmsg(t.m));
        tk_ret(&t);
        tk_load(&t);
        run_copy(&t, src, NEL * sizeof(float), dst, NEL * sizeof(float), 1, NEL);
        for (size_t i = 0; i + 1 < NEL; i++) {
            double want = pt_dtype_round(dt, (double)src[i]);
            if (isnan(want))
                cr_assert(isnan(dst[i]), "%s element %zu", pt_dtype_get(dt)->name, i);
            else
                cr_assert_eq((double)dst[i], (double)(float)want, "%s: %a -> %a, want %a",
                             pt_dtype_get(dt)->name, (double)src[i], (double)dst[i], want);
        }
        tk_free(&t);
    }
    free(src);
    free(dst);
}

/* .shared accesses (a 32-bit shared address as the base): f16 from global
 * to shared as bf16, then each thread reads its neighbour's slot back. */
Test(kit_io, shared_round_trip)
{
    tk t = tk_new("sm_80", "io");
    ptx_reg in = tk_ptr(&t, "in"), out = tk_ptr(&t, "out");
    (void)tk_u32(&t, "count");
    const char *sm = ptx_shared_add(t.f, "stage", 16, 32 * 8);
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X), sb = R32(&t), mine = R32(&t), nb = R32(&t), other = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(sb), ptx_sym(sm));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(mine), ptx_r(tid), ptx_imm(8), ptx_r(sb));
    E(XOR, NOM, T1(B32), ptx_r(nb), ptx_r(tid), ptx_imm(1));
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(other), ptx_r(nb), ptx_imm(8), ptx_r(sb));
    ptx_reg a = tk_addr(&t, in, tid, 8), b = tk_addr(&t, out, tid, 16);
    kit_io g = {.nc = true}, s = {.shared = true, .nc = true};
    ptx_reg v[4], w[4];
    cr_assert_eq(kit_load(t.f, &g, PT_F16, a, 0, 4, v), PT_OK, "%s", ptx_module_errmsg(t.m));
    ptx_opd o[4] = {ptx_r(v[0]), ptx_r(v[1]), ptx_r(v[2]), ptx_r(v[3])};
    cr_assert_eq(kit_store(t.f, &s, PT_BF16, mine, 0, 4, o), PT_OK, "%s", ptx_module_errmsg(t.m));
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    cr_assert_eq(kit_load(t.f, &s, PT_BF16, other, 0, 4, w), PT_OK, "%s", ptx_module_errmsg(t.m));
    ptx_opd p[4] = {ptx_r(w[0]), ptx_r(w[1]), ptx_r(w[2]), ptx_r(w[3])};
    kit_io gs = {0};
    cr_assert_eq(kit_store(t.f, &gs, PT_F32, b, 0, 4, p), PT_OK);
    tk_ret(&t);
    tk_load(&t);
    cr_assert(strstr(t.text, "st.shared.v2.b32") && strstr(t.text, "ld.shared.v2.b32"), "%s", t.text);
    uint16_t src[128];
    uint64_t st = 7;
    for (int i = 0; i < 128; i++)
        src[i] = (uint16_t)rnd32(&st);
    uint64_t pi = tk_buf(&t, src, sizeof src, "in"), po = tk_buf(&t, NULL, 128 * 4, "out");
    uint32_t n = 32;
    const void *args[] = {&pi, &po, &n};
    tk_run(&t, 1, 32, args);
    float got[128];
    tk_get(&t, po, got, sizeof got);
    for (int i = 0; i < 128; i++) {
        int j = ((i / 4) ^ 1) * 4 + i % 4; /* the neighbour's element */
        double want = pt_dtype_round(PT_BF16, (double)pt_f16_to_f32(src[j]));
        if (isnan(want))
            cr_assert(isnan(got[i]));
        else
            cr_assert_eq((double)got[i], want, "element %d", i);
    }
    tk_free(&t);
}

/* The dtype table's PTX columns name what the templates used to spell out. */
Test(kit_io, table_ptx_columns)
{
    cr_assert_eq(pt_dtype_get(PT_F16)->ptx, PTX_T_F16);
    cr_assert_eq(pt_dtype_get(PT_F16)->x2, PTX_T_F16X2);
    cr_assert_eq(pt_dtype_get(PT_BF16)->x2, PTX_T_BF16X2);
    cr_assert_eq(pt_dtype_get(PT_E4M3)->x2, PTX_T_E4M3X2);
    cr_assert_eq(pt_dtype_get(PT_E5M2)->x2, PTX_T_E5M2X2);
    cr_assert_eq(pt_dtype_get(PT_E4M3)->pack, 2);
    cr_assert_eq(pt_dtype_get(PT_S8)->pack, 1);
    cr_assert_eq(pt_dtype_get(PT_S32)->ldst, PTX_T_B32);
    cr_assert_eq(pt_dtype_get(PT_E5M2)->from_f32.n, 2);
    cr_assert_eq(pt_dtype_get(PT_E5M2)->from_f32.m[1], PTX_M_SATFINITE);
    cr_assert_eq(pt_dtype_get(PT_F16)->to_f32.n, 0);
    for (int d = 0; d < PT_NDTYPES; d++) {
        const pt_dtype_info *di = pt_dtype_get((pt_dtype)d);
        cr_assert_eq(ptx_type_bits(di->ldst), 8 * di->bytes, "%s", di->name);
        cr_assert_geq(ptx_type_bits(di->reg), 8 * di->bytes, "%s", di->name);
    }
}
