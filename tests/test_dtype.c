/* Storage dtype table and host conversions. Expected values come from
 * independent sources: the compiler's _Float16 (correctly rounded), bit
 * formulas written here, and bit patterns computed by hand. */
#include "gen/dtype.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

Test(dtype, table_from_xmacro)
{
    cr_assert_str_eq(pt_dtype_get(PT_F64)->name, "f64");
    cr_assert_eq(pt_dtype_get(PT_BF16)->bytes, 2);
    cr_assert_str_eq(pt_dtype_get(PT_BF16)->npy, "<u2");
    cr_assert_eq(pt_dtype_get(PT_E4M3)->min_sm, 89);
    cr_assert(pt_dtype_get(PT_TF32)->is_float);
    cr_assert(!pt_dtype_get(PT_S32)->is_float);
    cr_assert_eq(pt_dtype_get(PT_U64)->bytes, 8);
    for (int i = 0; i < PT_NDTYPES; i++) {
        pt_dtype t;
        pt_err e = {0};
        cr_assert_eq(pt_dtype_parse(pt_dtype_get((pt_dtype)i)->name, &t, &e), PT_OK);
        cr_assert_eq((int)t, i);
    }
}

Test(dtype, parse_error_text)
{
    pt_dtype t;
    pt_err e = {0};
    cr_assert_neq(pt_dtype_parse("f12", &t, &e), PT_OK);
    cr_assert_str_eq(e.msg, "unknown dtype 'f12' (supported: f64 f32 tf32 f16 bf16 e4m3 e5m2 s8 u8 "
                            "s16 u16 s32 u32 s64 u64)");
    pt_err e2 = {0};
    cr_assert_neq(pt_dtype_parse("F32", &t, &e2), PT_OK); /* names are case-sensitive */
}

#ifdef __FLT16_MAX__
/* the compiler's own half type: __extension__ keeps -Wpedantic quiet */
__extension__ typedef _Float16 half;

/* Every f16 pattern: decoding matches _Float16, and encoding the decoded
 * value gives the pattern back (NaNs become the canonical 0x7FFF). */
Test(dtype, f16_all_patterns_round_trip)
{
    for (uint32_t h = 0; h < 65536; h++) {
        half ref;
        uint16_t h16 = (uint16_t)h;
        memcpy(&ref, &h16, 2);
        float want = (float)ref, got = pt_f16_to_f32(h16);
        if (isnan(want)) {
            cr_assert(isnan(got), "h=%04x", h);
            cr_assert_eq(pt_f32_to_f16(got), 0x7FFF, "h=%04x", h);
            continue;
        }
        cr_assert_eq(f2u(got), f2u(want), "decode h=%04x: got %a want %a", h, (double)got, (double)want);
        cr_assert_eq(pt_f32_to_f16(got), h16, "round trip h=%04x", h);
    }
}

static uint16_t f16_bits_ref(float x)
{
    half r = (half)x;
    uint16_t b;
    memcpy(&b, &r, 2);
    return b;
}

/* Midpoints between neighbours (the ties), a hair either side of them, and
 * random f32 patterns, against the compiler's correctly rounded conversion. */
Test(dtype, f32_to_f16_matches_float16)
{
    for (uint32_t h = 0; h < 0x7C00; h++) {
        double lo = (double)pt_f16_to_f32((uint16_t)h);
        double hi = h + 1 < 0x7C00 ? (double)pt_f16_to_f32((uint16_t)(h + 1)) : 65536.0;
        float mid = (float)((lo + hi) / 2); /* exact in f32 */
        cr_assert_eq((double)mid, (lo + hi) / 2);
        float xs[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            for (int s = 0; s < 2; s++) {
                float x = s ? -xs[k] : xs[k];
                cr_assert_eq(pt_f32_to_f16(x), f16_bits_ref(x), "x=%a", (double)x);
            }
        }
    }
    for (int i = 0; i < 2000000; i++) {
        float x = u2f(rnd32());
        if (isnan(x))
            continue;
        cr_assert_eq(pt_f32_to_f16(x), f16_bits_ref(x), "x=%a", (double)x);
    }
}
#endif

Test(dtype, f16_hand_cases)
{
    cr_assert_eq(pt_f32_to_f16(1.0f), 0x3C00);
    cr_assert_eq(pt_f32_to_f16(-2.0f), 0xC000);
    cr_assert_eq(pt_f32_to_f16(65504.0f), 0x7BFF);
    cr_assert_eq(pt_f32_to_f16(65519.99f), 0x7BFF);
    cr_assert_eq(pt_f32_to_f16(65520.0f), 0x7C00); /* tie goes to even: inf */
    cr_assert_eq(pt_f32_to_f16(1e10f), 0x7C00);
    cr_assert_eq(pt_f32_to_f16(-INFINITY), 0xFC00);
    cr_assert_eq(pt_f32_to_f16(NAN), 0x7FFF);
    cr_assert_eq(pt_f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(pt_f32_to_f16(ldexpf(1, -24)), 0x0001);         /* min subnormal */
    cr_assert_eq(pt_f32_to_f16(ldexpf(1, -25)), 0x0000);         /* tie to even: 0 */
    cr_assert_eq(pt_f32_to_f16(-ldexpf(1, -25)), 0x8000);
    cr_assert_eq(pt_f32_to_f16(ldexpf(3, -26)), 0x0001);         /* 0.75 ulp */
    cr_assert_eq(pt_f32_to_f16(ldexpf(3, -25)), 0x0002);         /* 1.5 ulp, tie: even */
    cr_assert_eq(pt_f32_to_f16(ldexpf(1023, -24) + ldexpf(1, -25)), 0x0400); /* to min normal */
    cr_assert_eq(pt_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3C00);  /* tie: even */
    cr_assert_eq(pt_f32_to_f16(1.0f + ldexpf(3, -11)), 0x3C02);  /* tie: even (up) */
    cr_assert_eq(pt_f16_to_f32(0x0001), ldexpf(1, -24));
    cr_assert_eq(pt_f16_to_f32(0x7BFF), 65504.0f);
    cr_assert(isinf(pt_f16_to_f32(0xFC00)) && pt_f16_to_f32(0xFC00) < 0);
    cr_assert(isnan(pt_f16_to_f32(0x7C01)));
}

/* The double path rounds once: 1 + 2^-11 + 2^-40 is just above a tie, but
 * going through f32 first would land exactly on the tie and round down. */
Test(dtype, f16_from_double_rounds_once)
{
    double v = 1.0 + ldexp(1, -11) + ldexp(1, -40);
    cr_assert_eq((double)(float)v, 1.0 + ldexp(1, -11));
    cr_assert_eq(pt_dtype_round(PT_F16, v), 1.0 + ldexp(1, -10));
    uint16_t h;
    pt_dtype_store(PT_F16, &h, 0, v);
    cr_assert_eq(h, 0x3C01);
    cr_assert_eq(pt_f32_to_f16((float)v), 0x3C00);
    /* the same for bf16 and e4m3 */
    double b = 1.0 + ldexp(1, -8) + ldexp(1, -40);
    cr_assert_eq(pt_dtype_round(PT_BF16, b), 1.0 + ldexp(1, -7));
    double q = 1.0 + ldexp(1, -4) + ldexp(1, -40);
    cr_assert_eq(pt_dtype_round(PT_E4M3, q), 1.125);
}

/* Round to nearest even on the low 16 bits, written as the usual bit trick. */
static uint16_t bf16_ref(uint32_t u)
{
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

Test(dtype, bf16_rne)
{
    cr_assert_eq(pt_f32_to_bf16(1.0f), 0x3F80);
    cr_assert_eq(pt_f32_to_bf16(u2f(0x3F808000)), 0x3F80); /* tie, even below */
    cr_assert_eq(pt_f32_to_bf16(u2f(0x3F818000)), 0x3F82); /* tie, odd below: up */
    cr_assert_eq(pt_f32_to_bf16(u2f(0x3F808001)), 0x3F81);
    cr_assert_eq(pt_f32_to_bf16(u2f(0x3F807FFF)), 0x3F80);
    cr_assert_eq(pt_f32_to_bf16(u2f(0xBF818000)), 0xBF82);
    cr_assert_eq(pt_f32_to_bf16(u2f(0x7F7FFFFF)), 0x7F80); /* rounds up to inf */
    cr_assert_eq(pt_f32_to_bf16(u2f(0x7F7F7FFF)), 0x7F7F);
    cr_assert_eq(pt_f32_to_bf16(u2f(0x00008000)), 0x0000); /* subnormal tie: even */
    cr_assert_eq(pt_f32_to_bf16(u2f(0x00018000)), 0x0002);
    cr_assert_eq(pt_f32_to_bf16(u2f(0x00008001)), 0x0001);
    cr_assert_eq(pt_f32_to_bf16(-0.0f), 0x8000);
    cr_assert_eq(pt_f32_to_bf16(INFINITY), 0x7F80);
    cr_assert_eq(pt_f32_to_bf16(NAN), 0x7FFF);
    cr_assert_eq(pt_f32_to_bf16(u2f(0xFFC00001)), 0x7FFF); /* any NaN */
    cr_assert_eq(pt_f32_to_bf16(u2f(0x7F800001)), 0x7FFF);
    for (uint32_t h = 0; h < 65536; h++) {
        cr_assert_eq(f2u(pt_bf16_to_f32((uint16_t)h)), h << 16);
        uint32_t base = h << 16;
        for (uint32_t low = 0x7FFE; low <= 0x8001; low++) {
            float x = u2f(base | low);
            if (isnan(x))
                continue;
            cr_assert_eq(pt_f32_to_bf16(x), bf16_ref(base | low), "u=%08x", base | low);
        }
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = rnd32();
        if (isnan(u2f(u)))
            continue;
        cr_assert_eq(pt_f32_to_bf16(u2f(u)), bf16_ref(u), "u=%08x", u);
    }
}

Test(dtype, e4m3_cases)
{
    cr_assert_eq(pt_f32_to_e4m3(0.0f), 0x00);
    cr_assert_eq(pt_f32_to_e4m3(-0.0f), 0x80);
    cr_assert_eq(pt_f32_to_e4m3(1.0f), 0x38);
    cr_assert_eq(pt_f32_to_e4m3(-1.5f), 0xBC);
    cr_assert_eq(pt_f32_to_e4m3(0.3f), 0x2A);     /* 1.2*2^-2 -> 1.25*2^-2 */
    cr_assert_eq(pt_f32_to_e4m3(448.0f), 0x7E);
    cr_assert_eq(pt_f32_to_e4m3(464.0f), 0x7E);   /* tie between 448 and 480: even */
    cr_assert_eq(pt_f32_to_e4m3(470.0f), 0x7E);   /* would be 480: saturates */
    cr_assert_eq(pt_f32_to_e4m3(1e9f), 0x7E);
    cr_assert_eq(pt_f32_to_e4m3(-1e9f), 0xFE);
    cr_assert_eq(pt_f32_to_e4m3(INFINITY), 0x7E);
    cr_assert_eq(pt_f32_to_e4m3(-INFINITY), 0xFE);
    cr_assert_eq(pt_f32_to_e4m3(NAN), 0x7F);
    cr_assert_eq(pt_f32_to_e4m3(-NAN), 0xFF);
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(1, -6)), 0x08); /* min normal */
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(1, -9)), 0x01); /* min subnormal */
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(1, -10)), 0x00); /* half of it: tie to 0 */
    cr_assert_eq(pt_f32_to_e4m3(-ldexpf(1, -10)), 0x80);
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(1, -10) * 1.01f), 0x01);
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(3, -10)), 0x02); /* 1.5 ulp: even */
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(15, -10)), 0x08); /* 7.5 ulp: up to min normal */
    cr_assert_eq(pt_f32_to_e4m3(ldexpf(13, -10)), 0x06); /* 6.5 ulp: even */
    cr_assert_eq(pt_e4m3_to_f32(0x7E), 448.0f);
    cr_assert_eq(pt_e4m3_to_f32(0xFE), -448.0f);
    cr_assert_eq(pt_e4m3_to_f32(0x01), ldexpf(1, -9));
    cr_assert_eq(pt_e4m3_to_f32(0x07), ldexpf(7, -9));
    cr_assert_eq(pt_e4m3_to_f32(0x38), 1.0f);
    cr_assert(isnan(pt_e4m3_to_f32(0x7F)) && isnan(pt_e4m3_to_f32(0xFF)));
    cr_assert(signbit(pt_e4m3_to_f32(0x80)));
    for (int v = 0; v < 256; v++) {
        if ((v & 0x7F) == 0x7F)
            continue;
        cr_assert_eq(pt_f32_to_e4m3(pt_e4m3_to_f32((uint8_t)v)), v, "v=%02x", v);
    }
}

Test(dtype, e5m2_cases)
{
    cr_assert_eq(pt_f32_to_e5m2(1.0f), 0x3C);
    cr_assert_eq(pt_f32_to_e5m2(-3.0f), 0xC2);
    cr_assert_eq(pt_f32_to_e5m2(57344.0f), 0x7B);
    cr_assert_eq(pt_f32_to_e5m2(61440.0f), 0x7B); /* tie rounds to 65536: saturates */
    cr_assert_eq(pt_f32_to_e5m2(1e6f), 0x7B);
    cr_assert_eq(pt_f32_to_e5m2(INFINITY), 0x7B);
    cr_assert_eq(pt_f32_to_e5m2(-INFINITY), 0xFB);
    cr_assert_eq(pt_f32_to_e5m2(NAN), 0x7F);
    cr_assert_eq(pt_f32_to_e5m2(-NAN), 0xFF);
    cr_assert_eq(pt_f32_to_e5m2(ldexpf(1, -14)), 0x04); /* min normal */
    cr_assert_eq(pt_f32_to_e5m2(ldexpf(1, -16)), 0x01); /* min subnormal */
    cr_assert_eq(pt_f32_to_e5m2(ldexpf(1, -17)), 0x00); /* tie to 0 */
    cr_assert_eq(pt_f32_to_e5m2(ldexpf(3, -17)), 0x02); /* 1.5 ulp: even */
    cr_assert_eq(pt_f32_to_e5m2(1.125f), 0x3C);          /* tie 1.0 / 1.25: even */
    cr_assert_eq(pt_f32_to_e5m2(1.375f), 0x3E);          /* tie 1.25 / 1.5: even */
    cr_assert_eq(pt_e5m2_to_f32(0x7B), 57344.0f);
    cr_assert(isinf(pt_e5m2_to_f32(0x7C)) && pt_e5m2_to_f32(0xFC) < 0);
    cr_assert(isnan(pt_e5m2_to_f32(0x7D)) && isnan(pt_e5m2_to_f32(0xFF)));
    cr_assert_eq(pt_e5m2_to_f32(0x01), ldexpf(1, -16));
    for (int v = 0; v < 256; v++) {
        if ((v & 0x7F) >= 0x7C)
            continue;
        cr_assert_eq(pt_f32_to_e5m2(pt_e5m2_to_f32((uint8_t)v)), v, "v=%02x", v);
    }
}

/* cvt.rna.tf32.f32: add half an ulp of the kept 10 bits, truncate. */
static float tf32_ref(float x)
{
    return u2f((f2u(x) + 0x1000u) & ~0x1FFFu);
}

Test(dtype, tf32_ties_away)
{
    cr_assert_eq(pt_dtype_round(PT_TF32, 1.0 + ldexp(1, -11)), 1.0 + ldexp(1, -10));
    cr_assert_eq(pt_dtype_round(PT_TF32, -(1.0 + ldexp(1, -11))), -(1.0 + ldexp(1, -10)));
    cr_assert_eq(pt_dtype_round(PT_TF32, 1.0 + ldexp(3, -11)), 1.0 + ldexp(1, -9)); /* away */
    cr_assert_eq(pt_dtype_round(PT_TF32, 1.0 + ldexp(5, -11)), 1.0 + ldexp(3, -10)); /* away, not even */
    cr_assert_eq(pt_dtype_round(PT_TF32, 1.0 + ldexp(1, -12)), 1.0);
    cr_assert(isinf(pt_dtype_round(PT_TF32, (double)u2f(0x7F7FFFFF))));
    cr_assert(isnan(pt_dtype_round(PT_TF32, NAN)));
    for (int i = 0; i < 1000000; i++) {
        float x = u2f(rnd32());
        if (isnan(x) || isinf(x))
            continue;
        double got = pt_dtype_round(PT_TF32, (double)x);
        cr_assert_eq(got, (double)tf32_ref(x), "x=%a", (double)x);
    }
}

Test(dtype, load_store_every_dtype)
{
    unsigned char buf[64];
    for (int t = 0; t < PT_NDTYPES; t++) {
        memset(buf, 0xAB, sizeof buf);
        pt_dtype_store((pt_dtype)t, buf, 3, 1.5);
        pt_dtype_store((pt_dtype)t, buf, 1, -2.0);
        double a = pt_dtype_load((pt_dtype)t, buf, 3), b = pt_dtype_load((pt_dtype)t, buf, 1);
        bool sgn = t < PT_S8 || t == PT_S8 || t == PT_S16 || t == PT_S32 || t == PT_S64;
        bool isf = pt_dtype_get((pt_dtype)t)->is_float;
        cr_assert_eq(a, isf ? 1.5 : 2.0, "%s", pt_dtype_get((pt_dtype)t)->name); /* ints: RNE */
        cr_assert_eq(b, sgn ? -2.0 : 0.0, "%s", pt_dtype_get((pt_dtype)t)->name);
        /* neighbours untouched */
        size_t sz = (size_t)pt_dtype_get((pt_dtype)t)->bytes;
        cr_assert_eq(buf[4 * sz], 0xAB);
    }
    int8_t s8[1];
    pt_dtype_store(PT_S8, s8, 0, -200.0);
    cr_assert_eq(s8[0], -128);
    uint8_t u8[1];
    pt_dtype_store(PT_U8, u8, 0, 300.0);
    cr_assert_eq(u8[0], 255);
    pt_dtype_store(PT_U8, u8, 0, NAN);
    cr_assert_eq(u8[0], 0);
    cr_assert_eq(pt_dtype_round(PT_S32, 2.5), 2.0);
    cr_assert_eq(pt_dtype_round(PT_S32, 3.5), 4.0);
    cr_assert_eq(pt_dtype_round(PT_S32, -2.5), -2.0);
    cr_assert_eq(pt_dtype_round(PT_S32, 1e20), 2147483647.0);
    uint64_t u64[1];
    pt_dtype_store(PT_U64, u64, 0, 1e30);
    cr_assert_eq(u64[0], 18446744073709549568ull);
    int64_t s64[1];
    pt_dtype_store(PT_S64, s64, 0, -1e30);
    cr_assert_eq(s64[0], INT64_MIN);
    uint16_t h[1];
    pt_dtype_store(PT_BF16, h, 0, 1.0 + ldexp(1, -8));
    cr_assert_eq(h[0], 0x3F80);
    uint8_t q[1];
    pt_dtype_store(PT_E5M2, q, 0, -1e9);
    cr_assert_eq(q[0], 0xFB);
    float f[1];
    pt_dtype_store(PT_TF32, f, 0, 1.0 + ldexp(1, -11));
    cr_assert_eq(f[0], 1.0f + ldexpf(1, -10));
    cr_assert_eq(pt_dtype_round(PT_F32, 1.0 + ldexp(1, -30)), 1.0);
    cr_assert_eq(pt_dtype_round(PT_F64, 1.0 + ldexp(1, -30)), 1.0 + ldexp(1, -30));
}

/* Every midpoint of every narrow float format (positive and negative): a
 * tie goes to the even neighbour, a hair above to the upper one, a hair
 * below to the lower one, from a double (pt_dtype_round) and from an f32
 * (the midpoints are f32 values); past the largest finite value f16/bf16
 * go to inf and fp8 saturates. Neighbours come from the decoders, which
 * the round trips above check. */
static double decode_fmt(pt_dtype t, uint32_t v)
{
    switch (t) {
    case PT_F16: return (double)pt_f16_to_f32((uint16_t)v);
    case PT_BF16: return (double)pt_bf16_to_f32((uint16_t)v);
    case PT_E4M3: return (double)pt_e4m3_to_f32((uint8_t)v);
    default: return (double)pt_e5m2_to_f32((uint8_t)v);
    }
}

static uint32_t encode_fmt(pt_dtype t, float x)
{
    switch (t) {
    case PT_F16: return pt_f32_to_f16(x);
    case PT_BF16: return pt_f32_to_bf16(x);
    case PT_E4M3: return pt_f32_to_e4m3(x);
    default: return pt_f32_to_e5m2(x);
    }
}

Test(dtype, every_midpoint_ties_to_even)
{
    static const struct {
        pt_dtype t;
        uint32_t maxfin, sign;
        bool sat;
    } fm[] = {{PT_F16, 0x7BFF, 0x8000, false}, {PT_BF16, 0x7F7F, 0x8000, false},
              {PT_E4M3, 0x7E, 0x80, true}, {PT_E5M2, 0x7B, 0x80, true}};
    for (size_t k = 0; k < sizeof fm / sizeof fm[0]; k++) {
        pt_dtype t = fm[k].t;
        for (uint32_t p = 0; p <= fm[k].maxfin; p++) {
            double lo = decode_fmt(t, p);
            double hi = p < fm[k].maxfin ? decode_fmt(t, p + 1) : 2 * lo - decode_fmt(t, p - 1);
            double mid = (lo + hi) / 2, eps = (hi - lo) / 1024;
            uint32_t up = p < fm[k].maxfin ? p + 1 : fm[k].sat ? p : (t == PT_F16 ? 0x7C00 : 0x7F80);
            uint32_t even = (p & 1) ? up : p;
            double want_up = p < fm[k].maxfin || fm[k].sat ? decode_fmt(t, up) : INFINITY;
            double want_even = even == p ? lo : want_up;
            for (int s = 0; s < 2; s++) {
                double sg = s ? -1.0 : 1.0;
                uint32_t sb = s ? fm[k].sign : 0;
                cr_assert_eq(pt_dtype_round(t, sg * mid), sg * want_even, "%s tie after %x",
                             pt_dtype_get(t)->name, p);
                cr_assert_eq(pt_dtype_round(t, sg * (mid + eps)), sg * want_up, "%s above tie %x",
                             pt_dtype_get(t)->name, p);
                cr_assert_eq(pt_dtype_round(t, sg * (mid - eps)), sg * lo, "%s below tie %x",
                             pt_dtype_get(t)->name, p);
                cr_assert_eq(encode_fmt(t, (float)(sg * mid)), sb | even, "%s f32 tie after %x",
                             pt_dtype_get(t)->name, p);
            }
        }
    }
}

/* NaN from either sign: f16/bf16 the canonical 0x7FFF, fp8 0x7F with the
 * sign kept (whatever the payload); what the emulated cvt gives too. */
Test(dtype, nan_encodings)
{
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fbfffffu, 0x7fffffffu, 0xffffffffu, 0x7fa00000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float x = u2f(nans[i]);
        unsigned s = (nans[i] >> 31) ? 0x80u : 0u;
        cr_assert_eq(pt_f32_to_f16(x), 0x7FFF);
        cr_assert_eq(pt_f32_to_bf16(x), 0x7FFF);
        cr_assert_eq(pt_f32_to_e4m3(x), 0x7F | s, "%08x", nans[i]);
        cr_assert_eq(pt_f32_to_e5m2(x), 0x7F | s, "%08x", nans[i]);
    }
}

/* The PTX columns: lookup by element type, and what the templates spelled
 * out before (cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32, ld.b16). */
Test(dtype, ptx_columns)
{
    pt_dtype d;
    for (int i = 0; i < PT_NDTYPES; i++) {
        cr_assert(pt_dtype_of_ptx(pt_dtype_get((pt_dtype)i)->ptx, &d));
        cr_assert_eq(d, i);
    }
    cr_assert(!pt_dtype_of_ptx(PTX_T_F16X2, &d));
    cr_assert(!pt_dtype_of_ptx(PTX_T_PRED, &d));
    cr_assert(pt_dtype_of_ptx(PTX_T_BF16, &d) && pt_dtype_get(d)->x2 == PTX_T_BF16X2);
    const pt_dtype_info *e = pt_dtype_get(PT_E4M3);
    cr_assert(e->x2 == PTX_T_E4M3X2 && e->ldst == PTX_T_B8 && e->reg == PTX_T_B16 && e->pack == 2);
    cr_assert(e->from_f32.n == 2 && e->from_f32.m[0] == PTX_M_RN &&
              e->from_f32.m[1] == PTX_M_SATFINITE);
    cr_assert(pt_dtype_get(PT_F16)->ldst == PTX_T_B16 && pt_dtype_get(PT_F16)->to_f32.n == 0);
    cr_assert(pt_dtype_get(PT_S8)->from_f32.n == 2 && pt_dtype_get(PT_S8)->ldst == PTX_T_S8);
    cr_assert(pt_dtype_get(PT_TF32)->from_f32.m[0] == PTX_M_RNA);
}
