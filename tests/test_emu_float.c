/* Emulator: float arithmetic, min/max, compares, special functions and cvt.
 * References are computed here independently of ptx/emu: f32/f64 results
 * by the host FPU under fesetround, narrow formats (f16, bf16, fp8, tf32)
 * by searching the sorted list of every representable value, which shares
 * no code with the emulator's bit-level encoder. */
#include "test_emu_util.h"

#include <fenv.h>

enum { N = 1024 };

/* ---- reference rounding by search ---- */

typedef struct fmtdesc {
    int ebits, mbits;
    bool ieee; /* all-ones exponent is Inf/NaN; else (e4m3) only S.1111.111 is NaN */
    double *vals; /* finite non-negative values, ascending, index = encoding */
    int nvals;
} fmtdesc;

static double decode_fmt(const fmtdesc *f, unsigned code)
{
    int bias = (1 << (f->ebits - 1)) - 1;
    unsigned e = code >> f->mbits, m = code & ((1u << f->mbits) - 1);
    if (e == 0)
        return ldexp((double)m, 1 - bias - f->mbits);
    return ldexp((double)(m | (1u << f->mbits)), (int)e - bias - f->mbits);
}

static void fmt_init(fmtdesc *f, int ebits, int mbits, bool ieee)
{
    f->ebits = ebits;
    f->mbits = mbits;
    f->ieee = ieee;
    unsigned ncodes = 1u << (ebits + mbits);
    f->vals = malloc(ncodes * sizeof *f->vals);
    f->nvals = 0;
    for (unsigned c = 0; c < ncodes; c++) {
        unsigned e = c >> mbits;
        if (ieee && e == (1u << ebits) - 1)
            break;
        if (!ieee && c == ncodes - 1)
            break; /* NaN */
        f->vals[f->nvals++] = decode_fmt(f, c);
    }
}

enum { M_RN, M_RZ, M_RM, M_RP, M_RNA };

/* Encoding of x rounded into f. sat: overflow goes to max finite. */
static unsigned ref_round(const fmtdesc *f, double x, int mode, bool sat, unsigned nan)
{
    unsigned sign = 1u << (f->ebits + f->mbits);
    if (isnan(x))
        return nan;
    bool neg = signbit(x);
    double a = fabs(x);
    unsigned maxc = (unsigned)f->nvals - 1, inf = f->ieee ? maxc + 1 : nan & ~sign;
    double maxv = f->vals[maxc];
    /* binary search: lo = largest code with value <= a */
    int lo = 0, hi = f->nvals - 1;
    if (a >= maxv)
        lo = (int)maxc;
    else {
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (f->vals[mid] <= a)
                lo = mid;
            else
                hi = mid - 1;
        }
    }
    unsigned r;
    double below = f->vals[lo];
    if (below == a)
        r = (unsigned)lo;
    else {
        /* the value above: next code, or "overflow" past max */
        double above = lo < (int)maxc ? f->vals[lo + 1] : maxv + (maxv - f->vals[maxc - 1]);
        bool up;
        switch (mode) {
        case M_RZ: up = false; break;
        case M_RP: up = !neg; break;
        case M_RM: up = neg; break;
        case M_RNA: up = a - below >= above - a; break;
        default: up = (a - below > above - a) || (a - below == above - a && (lo & 1)); break;
        }
        r = up ? (unsigned)lo + 1 : (unsigned)lo;
        if (r > maxc)
            r = sat ? maxc : inf;
    }
    if (isinf(x))
        r = sat ? maxc : inf; /* Inf converts to Inf in every mode */
    return r | (neg ? sign : 0);
}

static fmtdesc F16, BF16, E4M3, E5M2, TF32;

static void init_fmts(void)
{
    fmt_init(&F16, 5, 10, true);
    fmt_init(&BF16, 8, 7, true);
    fmt_init(&E4M3, 4, 3, false);
    fmt_init(&E5M2, 5, 2, true);
    fmt_init(&TF32, 8, 10, true);
}
static void fini_fmts(void)
{
    free(F16.vals);
    free(BF16.vals);
    free(E4M3.vals);
    free(E5M2.vals);
    free(TF32.vals);
}

static double h2d(unsigned h) /* f16 bits -> value */
{
    unsigned e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : decode_fmt(&F16, h & 0x7fff);
    return (h & 0x8000) ? -v : v;
}
static double b2d(unsigned h) { return (double)f32of(h << 16); }

/* f16 bits of a value that f16 holds exactly (k / 64, |k| < 1024). */
static uint16_t f2h_ref(float v)
{
    if (v == 0)
        return 0;
    int e;
    float m = frexpf(fabsf(v), &e); /* |v| = m 2^e, m in [0.5, 1) */
    uint16_t bits = (uint16_t)((e - 1 + 15) << 10 | ((unsigned)(m * 2048.0f) & 1023));
    return v < 0 ? (uint16_t)(bits | 0x8000) : bits;
}

/* Random f32 bit patterns: specials, subnormals, wide and narrow ranges. */
static void fill_f32(uint64_t *v, int n, uint64_t seed)
{
    static const uint32_t edge[] = {0, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x7f800000u,
                                    0xff800000u, 0x7fc00000u, 0x7f800001u, 0x00000001u, 0x807fffffu,
                                    0x7f7fffffu, 0x00800000u, 0x477fe000u, 0x477ff000u, 0x477fefffu,
                                    0x387fc000u, 0x33800000u, 0x43e00000u, 0x43e80000u};
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd32(&s);
        if (i < (int)(sizeof edge / sizeof edge[0]))
            r = edge[i];
        else if (i % 3 == 0) /* |x| in [2^-20, 2^20] */
            r = (r & 0x807fffffu) | ((uint32_t)(107 + rnd32(&s) % 40) << 23);
        else if (i % 3 == 1) /* near halfway points of f16/bf16 */
            r = (r & 0xffffe000u) | (rnd32(&s) & 1 ? 0x1000u : 0x0fffu);
        v[i] = r;
    }
}

/* ---- f32 / f64 arithmetic against the host FPU ---- */

static int host_mode(int m)
{
    return m == M_RZ ? FE_TOWARDZERO : m == M_RM ? FE_DOWNWARD : m == M_RP ? FE_UPWARD : FE_TONEAREST;
}

enum { ADD, SUB, MUL, FMA, DIV, SQRT };

static float host32(int op, int mode, float a, float b, float c)
{
    int old = fegetround();
    fesetround(host_mode(mode));
    volatile float x = a, y = b, z = c, r;
    switch (op) {
    case ADD: r = x + y; break;
    case SUB: r = x - y; break;
    case MUL: r = x * y; break;
    case FMA: r = fmaf(x, y, z); break;
    case DIV: r = x / y; break;
    default: r = sqrtf(x); break;
    }
    fesetround(old);
    return r;
}

static double host64(int op, int mode, double a, double b, double c)
{
    int old = fegetround();
    fesetround(host_mode(mode));
    volatile double x = a, y = b, z = c, r;
    switch (op) {
    case ADD: r = x + y; break;
    case SUB: r = x - y; break;
    case MUL: r = x * y; break;
    case FMA: r = fma(x, y, z); break;
    case DIV: r = x / y; break;
    default: r = sqrt(x); break;
    }
    fesetround(old);
    return r;
}

static uint32_t ftz32(uint32_t b) { return (b & 0x7f800000u) ? b : b & 0x80000000u; }

static const ptx_mod rmods[] = {MD(RN), MD(RZ), MD(RM), MD(RP)};
static const ptx_op aops[] = {OP(ADD), OP(SUB), OP(MUL), OP(FMA), OP(DIV), OP(SQRT)};

Test(emu_float, f32_arith_all_modes)
{
    uint64_t a[N], b[N], c[N], out[N];
    fill_f32(a, N, 1);
    fill_f32(b, N, 2);
    fill_f32(c, N, 3);
    const uint64_t *src[4] = {a, b, c, c};
    for (int op = ADD; op <= SQRT; op++)
        for (int m = M_RN; m <= M_RP; m++)
            for (int ftz = 0; ftz < 2; ftz++) {
                opcase oc = {.op = aops[op], .types = T1(F32), .dty = TY(F32),
                             .nsrc = op == FMA ? 3 : op == SQRT ? 1 : 2,
                             .sty = {TY(F32), TY(F32), TY(F32)}};
                oc.mods = ftz ? PTX_MODS(rmods[m], MD(FTZ)) : PTX_MODS(rmods[m]);
                run_op(&oc, "sm_80", N, src, out);
                for (int i = 0; i < N; i++) {
                    uint32_t x = (uint32_t)a[i], y = (uint32_t)b[i], z = (uint32_t)c[i];
                    if (ftz)
                        x = ftz32(x), y = ftz32(y), z = ftz32(z);
                    float r = host32(op, m, f32of(x), f32of(y), f32of(z));
                    uint32_t want = isnan(r) ? 0x7fffffffu : bitsof(r);
                    if (ftz)
                        want = ftz32(want);
                    cr_assert_eq(out[i], want, "%s.%s%s.f32 %08x %08x %08x: got %08llx want %08x",
                                 ptx_op_info(aops[op]).name, ptx_mod_name(rmods[m]), ftz ? ".ftz" : "",
                                 x, y, z, (unsigned long long)out[i], want);
                }
            }
}

Test(emu_float, f32_sat_and_default_rounding)
{
    uint64_t a[N], b[N], out[N];
    fill_f32(a, N, 4);
    fill_f32(b, N, 5);
    const uint64_t *src[4] = {a, b, a, a};
    opcase oc = {.op = OP(ADD), .mods = PTX_MODS(MD(SAT)), .types = T1(F32), .nsrc = 2,
                 .sty = {TY(F32), TY(F32)}, .dty = TY(F32)};
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++) {
        float r = f32of((uint32_t)a[i]) + f32of((uint32_t)b[i]);
        float w = isnan(r) || r <= 0 ? 0.0f : r > 1 ? 1.0f : r;
        cr_assert_eq(out[i], bitsof(w), "add.sat %08llx %08llx", (unsigned long long)a[i],
                     (unsigned long long)b[i]);
    }
    oc.mods = PTX_NOMODS; /* mul.f32 defaults to .rn */
    oc.op = OP(MUL);
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++) {
        float r = f32of((uint32_t)a[i]) * f32of((uint32_t)b[i]);
        cr_assert_eq(out[i], isnan(r) ? 0x7fffffffu : bitsof(r));
    }
}

Test(emu_float, f64_arith_all_modes)
{
    uint64_t a[N], b[N], c[N], out[N];
    uint64_t s = 9;
    for (int i = 0; i < N; i++) {
        double x = ldexp((double)(rnd64(&s) >> 11), (int)(rnd32(&s) % 120) - 113);
        double y = ldexp((double)(rnd64(&s) >> 11), (int)(rnd32(&s) % 120) - 113);
        double z = -ldexp((double)(rnd64(&s) >> 11), (int)(rnd32(&s) % 120) - 113);
        memcpy(&a[i], &x, 8);
        memcpy(&b[i], &y, 8);
        memcpy(&c[i], &z, 8);
    }
    const uint64_t *src[4] = {a, b, c, c};
    for (int op = ADD; op <= SQRT; op++)
        for (int m = M_RN; m <= M_RP; m++) {
            opcase oc = {.op = aops[op], .mods = PTX_MODS(rmods[m]), .types = T1(F64),
                         .dty = TY(F64), .nsrc = op == FMA ? 3 : op == SQRT ? 1 : 2,
                         .sty = {TY(F64), TY(F64), TY(F64)}};
            run_op(&oc, "sm_80", N, src, out);
            for (int i = 0; i < N; i++) {
                double x, y, z;
                memcpy(&x, &a[i], 8);
                memcpy(&y, &b[i], 8);
                memcpy(&z, &c[i], 8);
                double r = host64(op, m, x, y, z);
                uint64_t want;
                memcpy(&want, &r, 8);
                cr_assert_eq(out[i], want, "%s.%s.f64 #%d", ptx_op_info(aops[op]).name,
                             ptx_mod_name(rmods[m]), i);
            }
        }
}

/* min/max: a NaN input yields the other (both NaN: canonical NaN); .NaN
 * makes any NaN canonical NaN; -0 < +0. */
Test(emu_float, minmax_nan_rules)
{
    uint64_t a[N], b[N], out[N];
    fill_f32(a, N, 7);
    fill_f32(b, N, 8);
    for (int i = 0; i < 64; i++) { /* pair specials */
        static const uint32_t sp[] = {0x7fc00000u, 0x80000000u, 0, 0x3f800000u, 0xff800000u,
                                      0x7f800000u, 0xffc00001u, 0x00000001u};
        a[i] = sp[i / 8];
        b[i] = sp[i % 8];
    }
    const uint64_t *src[4] = {a, b, a, a};
    for (int mx = 0; mx < 2; mx++)
        for (int nan = 0; nan < 2; nan++) {
            opcase oc = {.op = mx ? OP(MAX) : OP(MIN), .types = T1(F32), .nsrc = 2,
                         .sty = {TY(F32), TY(F32)}, .dty = TY(F32)};
            oc.mods = nan ? PTX_MODS(MD(NAN)) : PTX_NOMODS;
            run_op(&oc, "sm_80", N, src, out);
            for (int i = 0; i < N; i++) {
                float x = f32of((uint32_t)a[i]), y = f32of((uint32_t)b[i]);
                uint32_t want;
                if (isnan(x) && isnan(y))
                    want = 0x7fffffffu;
                else if (isnan(x) || isnan(y))
                    want = nan ? 0x7fffffffu : bitsof(isnan(x) ? y : x);
                else if (x == 0 && y == 0)
                    want = (mx ? (signbit(x) && signbit(y)) : (signbit(x) || signbit(y))) ? 0x80000000u : 0;
                else
                    want = bitsof(mx ? (x > y ? x : y) : (x < y ? x : y));
                cr_assert_eq(out[i], want, "%s%s %08llx %08llx: got %08llx", mx ? "max" : "min",
                             nan ? ".NaN" : "", (unsigned long long)a[i], (unsigned long long)b[i],
                             (unsigned long long)out[i]);
            }
        }
}

/* setp over every float comparison, ordered and unordered. */
Test(emu_float, setp_float)
{
    static const ptx_mod cmps[] = {MD(EQ), MD(NE), MD(LT), MD(LE), MD(GT), MD(GE), MD(EQU),
                                   MD(NEU), MD(LTU), MD(LEU), MD(GTU), MD(GEU), MD(NUM), MD(NANCMP)};
    uint64_t a[N], b[N], out[N];
    fill_f32(a, N, 10);
    for (int i = 0; i < N; i++)
        b[i] = (i % 4 == 0) ? a[(i * 7) % N] : (i % 4 == 1) ? a[i] : a[(i + 1) % N];
    const uint64_t *src[4] = {a, b, a, a};
    for (int k = 0; k < 14; k++) {
        opcase oc = {.op = OP(SETP), .mods = PTX_MODS(cmps[k]), .types = T1(F32), .nsrc = 2,
                     .sty = {TY(F32), TY(F32)}, .dty = TY(PRED)};
        run_op(&oc, "sm_80", N, src, out);
        for (int i = 0; i < N; i++) {
            float x = f32of((uint32_t)a[i]), y = f32of((uint32_t)b[i]);
            bool u = isnan(x) || isnan(y), r;
            switch (k) {
            case 0: r = !u && x == y; break;
            case 1: r = !u && x != y; break;
            case 2: r = !u && x < y; break;
            case 3: r = !u && x <= y; break;
            case 4: r = !u && x > y; break;
            case 5: r = !u && x >= y; break;
            case 6: r = u || x == y; break;
            case 7: r = u || x != y; break;
            case 8: r = u || x < y; break;
            case 9: r = u || x <= y; break;
            case 10: r = u || x > y; break;
            case 11: r = u || x >= y; break;
            case 12: r = !u; break;
            default: r = u; break;
            }
            cr_assert_eq(out[i], (uint64_t)r, "setp.%s.f32 %g %g", ptx_mod_name(cmps[k]), (double)x,
                         (double)y);
        }
    }
}

/* ---- narrow formats ---- */

/* Random f16 / bf16 bit patterns, finite mostly. */
static void fill_h(uint64_t *v, int n, uint64_t seed, bool packed)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd32(&s);
        if (i % 8 == 0)
            r &= 0x83ff83ffu; /* subnormals */
        v[i] = packed ? r : r & 0xffff;
    }
}

/* fma/add/mul of f16 and bf16 (scalar and x2): the exact result (when the
 * host double holds it exactly) rounded to nearest even by search. */
Test(emu_float, half_arith, .init = init_fmts, .fini = fini_fmts)
{
    static const struct {
        ptx_op op;
        ptx_type ty;
        int nsrc;
    } cases[] = {
        {OP(FMA), TY(F16X2), 3}, {OP(FMA), TY(F16), 3}, {OP(ADD), TY(F16), 2},
        {OP(MUL), TY(F16X2), 2}, {OP(SUB), TY(F16X2), 2}, {OP(FMA), TY(BF16X2), 3},
        {OP(FMA), TY(BF16), 3},
    };
    uint64_t a[N], b[N], c[N], out[N];
    fill_h(a, N, 21, true);
    fill_h(b, N, 22, true);
    fill_h(c, N, 23, true);
    const uint64_t *src[4] = {a, b, c, c};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ptx_type t = cases[k].ty;
        bool bf = t == TY(BF16) || t == TY(BF16X2), pk = t == TY(F16X2) || t == TY(BF16X2);
        opcase oc = {.op = cases[k].op, .mods = PTX_MODS(MD(RN)), .types = PTX_T1(t),
                     .nsrc = cases[k].nsrc, .sty = {t, t, t}, .dty = t};
        run_op(&oc, "sm_80", N, src, out);
        for (int i = 0; i < N; i++)
            for (int h = 0; h < (pk ? 2 : 1); h++) {
                unsigned ha = (unsigned)(a[i] >> (16 * h)) & 0xffff, hb = (unsigned)(b[i] >> (16 * h)) & 0xffff,
                         hc = (unsigned)(c[i] >> (16 * h)) & 0xffff;
                double x = bf ? b2d(ha) : h2d(ha), y = bf ? b2d(hb) : h2d(hb), z = bf ? b2d(hc) : h2d(hc);
                double p, r;
                switch (cases[k].op) {
                case OP(FMA): p = x * y; r = p + z; if (isfinite(r) && (r - p != z || r - z != p)) continue; break;
                case OP(ADD): r = x + y; break;
                case OP(SUB): r = x - y; break;
                default: r = x * y; break;
                }
                unsigned want = ref_round(bf ? &BF16 : &F16, r, M_RN, false, 0x7fff);
                unsigned got = (unsigned)(out[i] >> (16 * h)) & 0xffff;
                cr_assert_eq(got, want, "%s.rn.%s %04x %04x %04x: got %04x want %04x (%g)",
                             ptx_op_info(cases[k].op).name, ptx_type_name(t), ha, hb, hc, got, want, r);
            }
    }
}

/* cvt to f16 / bf16 in every rounding mode, from f32. */
Test(emu_float, cvt_f32_to_half, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], out[N];
    fill_f32(a, N, 31);
    const uint64_t *src[4] = {a, a, a, a};
    static const int modes[] = {M_RN, M_RZ, M_RM, M_RP};
    for (int bf = 0; bf < 2; bf++)
        for (int m = 0; m < 4; m++) {
            if (bf && m)
                continue; /* cvt.{rz,rm,rp}.bf16.f32 need sm_90 */
            ptx_type dt = bf ? TY(BF16) : TY(F16);
            opcase oc = {.op = OP(CVT), .mods = PTX_MODS(rmods[m]), .types = PTX_TYPES(dt, TY(F32)),
                         .nsrc = 1, .sty = {TY(F32)}, .dty = dt};
            run_op(&oc, "sm_80", N, src, out);
            for (int i = 0; i < N; i++) {
                unsigned want = ref_round(bf ? &BF16 : &F16, (double)f32of((uint32_t)a[i]), modes[m],
                                          false, 0x7fff);
                cr_assert_eq(out[i], want, "cvt.%s.%s.f32 %08llx: got %04llx want %04x",
                             ptx_mod_name(rmods[m]), ptx_type_name(dt), (unsigned long long)a[i],
                             (unsigned long long)out[i], want);
            }
        }
}

/* Packing: d.hi = cvt(a), d.lo = cvt(b); relu and satfinite variants. */
Test(emu_float, cvt_pack_x2, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], b[N], out[N];
    fill_f32(a, N, 41);
    fill_f32(b, N, 42);
    const uint64_t *src[4] = {a, b, a, a};
    for (int bf = 0; bf < 2; bf++)
        for (int v = 0; v < 3; v++) {
            ptx_type dt = bf ? TY(BF16X2) : TY(F16X2);
            opcase oc = {.op = OP(CVT), .types = PTX_TYPES(dt, TY(F32)), .nsrc = 2,
                         .sty = {TY(F32), TY(F32)}, .dty = dt};
            oc.mods = v == 0 ? PTX_MODS(MD(RN)) : v == 1 ? PTX_MODS(MD(RN), MD(RELU))
                                                          : PTX_MODS(MD(RN), MD(SATFINITE));
            run_op(&oc, "sm_80", N, src, out);
            for (int i = 0; i < N; i++)
                for (int h = 0; h < 2; h++) {
                    double x = (double)f32of((uint32_t)(h ? a[i] : b[i]));
                    unsigned want;
                    if (v == 1 && !isnan(x) && (x < 0 || (x == 0 && signbit(x))))
                        want = 0;
                    else
                        want = ref_round(bf ? &BF16 : &F16, x, M_RN, v == 2, 0x7fff);
                    unsigned got = (unsigned)(out[i] >> (16 * h)) & 0xffff;
                    cr_assert_eq(got, want, "cvt.rn%s.%s.f32 half %d of %g: got %04x want %04x",
                                 v == 1 ? ".relu" : v == 2 ? ".satfinite" : "", ptx_type_name(dt), h, x,
                                 got, want);
                }
        }
}

/* fp8: d[15:8] = fp8(a), d[7:0] = fp8(b), satfinite, RNE; back to f16x2. */
Test(emu_float, cvt_fp8, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], b[N], out[N];
    uint64_t s = 51;
    for (int i = 0; i < N; i++) { /* values around the fp8 ranges, and their ties */
        float x = ldexpf((float)(rnd32(&s) & 0xff) / 16.0f, (int)(rnd32(&s) % 36) - 20);
        a[i] = bitsof((rnd32(&s) & 1) ? -x : x);
        b[i] = i < 8 ? (uint32_t[]){0x7fc00000u, 0x7f800000u, 0xff800000u, 0x43e80000u, 0x43e00000u,
                                    0x43e40000u, 0x477fe000u, 0x35000000u}[i]
                     : (uint32_t)a[(i * 3) % N] ^ 0x80000000u;
    }
    const uint64_t *src[4] = {a, b, a, a};
    for (int e5 = 0; e5 < 2; e5++) {
        ptx_type dt = e5 ? TY(E5M2X2) : TY(E4M3X2);
        const fmtdesc *f = e5 ? &E5M2 : &E4M3;
        opcase oc = {.op = OP(CVT), .mods = PTX_MODS(MD(RN), MD(SATFINITE)),
                     .types = PTX_TYPES(dt, TY(F32)), .nsrc = 2, .sty = {TY(F32), TY(F32)},
                     .dty = TY(B16)};
        run_op(&oc, "sm_89", N, src, out);
        for (int i = 0; i < N; i++)
            for (int h = 0; h < 2; h++) {
                float x = f32of((uint32_t)(h ? a[i] : b[i]));
                /* NaN: e4m3 0x7f, e5m2 0x7f (quiet), sign kept */
                unsigned nan = 0x7f | (signbit(x) ? 0x80 : 0);
                unsigned want = ref_round(f, (double)x, M_RN, true, nan);
                unsigned got = (unsigned)(out[i] >> (8 * h)) & 0xff;
                if (e5 && isnan(x)) /* any quiet e5m2 NaN (0x7d..0x7f), sign kept */
                    got = (got & 0x7f) > 0x7c ? (got & 0x80) | 0x7f : got;
                cr_assert_eq(got, want, "cvt.rn.satfinite.%s.f32 %g: got %02x want %02x",
                             ptx_type_name(dt), (double)x, got, want);
            }
        /* every fp8 pair back to f16x2: exact */
        uint64_t pairs[N];
        for (int i = 0; i < N; i++)
            pairs[i] = (uint64_t)((i * 37 + 11) & 0xff) << 8 | (uint64_t)(i & 0xff);
        const uint64_t *src2[4] = {pairs, pairs, pairs, pairs};
        opcase back = {.op = OP(CVT), .mods = PTX_MODS(MD(RN)), .types = PTX_TYPES(TY(F16X2), dt),
                       .nsrc = 1, .sty = {TY(B16)}, .dty = TY(F16X2)};
        run_op(&back, "sm_89", N, src2, out);
        for (int i = 0; i < N; i++)
            for (int h = 0; h < 2; h++) {
                unsigned code = (unsigned)(pairs[i] >> (8 * h)) & 0xff, mag = code & 0x7f;
                bool nan = e5 ? mag > 0x7c : mag == 0x7f;
                double v = (e5 && mag == 0x7c) ? INFINITY : nan ? NAN : decode_fmt(f, mag);
                if (code & 0x80)
                    v = -v;
                unsigned want = nan ? 0x7fff : ref_round(&F16, v, M_RN, false, 0x7fff);
                unsigned got = (unsigned)(out[i] >> (16 * h)) & 0xffff;
                cr_assert_eq(got, want, "cvt.rn.f16x2.%s %02x: got %04x want %04x", ptx_type_name(dt),
                             code, got, want);
            }
    }
}

/* cvt.rna.tf32.f32: nearest with ties away, 10 mantissa bits, f32 layout. */
Test(emu_float, cvt_tf32, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], out[N];
    fill_f32(a, N, 61);
    const uint64_t *src[4] = {a, a, a, a};
    opcase oc = {.op = OP(CVT), .mods = PTX_MODS(MD(RNA)), .types = PTX_TYPES(TY(TF32), TY(F32)),
                 .nsrc = 1, .sty = {TY(F32)}, .dty = TY(B32)};
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++) {
        float x = f32of((uint32_t)a[i]);
        uint32_t want = isnan(x) ? 0x7fffffffu : ref_round(&TF32, (double)x, M_RNA, false, 0) << 13;
        cr_assert_eq(out[i], want, "cvt.rna.tf32.f32 %08llx: got %08llx want %08x",
                     (unsigned long long)a[i], (unsigned long long)out[i], want);
    }
}

/* float -> int: round to integral (rni even ties, rzi, rmi, rpi), saturate,
 * NaN -> 0. */
Test(emu_float, cvt_float_to_int)
{
    static const ptx_mod im[] = {MD(RNI), MD(RZI), MD(RMI), MD(RPI)};
    static const ptx_type dts[] = {TY(S32), TY(U32), TY(S64), TY(U8), TY(S16)};
    uint64_t a[N], out[N];
    fill_f32(a, N, 71);
    uint64_t s = 3;
    for (int i = 30; i < N; i += 2) /* exact halves */
        a[i] = bitsof((float)((int)(rnd32(&s) % 2001) - 1000) + 0.5f);
    const uint64_t *src[4] = {a, a, a, a};
    for (int d = 0; d < 5; d++)
        for (int m = 0; m < 4; m++) {
            opcase oc = {.op = OP(CVT), .mods = PTX_MODS(im[m]), .types = PTX_TYPES(dts[d], TY(F32)),
                         .nsrc = 1, .sty = {TY(F32)}, .dty = dts[d]};
            if (dts[d] == TY(U8))
                oc.dty = TY(U16), oc.types = PTX_TYPES(TY(U16), TY(F32)); /* u8 has no register */
            run_op(&oc, "sm_80", N, src, out);
            int bits = ptx_type_bits(oc.dty);
            bool sg = ptx_type_class(dts[d]) == 's';
            for (int i = 0; i < N; i++) {
                double x = (double)f32of((uint32_t)a[i]), r;
                r = m == 0 ? x : m == 1 ? trunc(x) : m == 2 ? floor(x) : ceil(x);
                if (m == 0 && isfinite(x)) { /* ties to even */
                    r = floor(x + 0.5);
                    if (r - x == 0.5 && fmod(r, 2.0) != 0)
                        r -= 1;
                }
                double lo = sg ? -ldexp(1, bits - 1) : 0, hi = sg ? ldexp(1, bits - 1) : ldexp(1, bits);
                uint64_t himax = sg ? (1ull << (bits - 1)) - 1 : bits == 64 ? ~0ull : (1ull << bits) - 1;
                uint64_t want;
                if (isnan(x))
                    want = 0;
                else if (r <= lo)
                    want = (uint64_t)(int64_t)lo;
                else if (r >= hi)
                    want = himax;
                else
                    want = (uint64_t)(int64_t)r;
                want &= bits >= 64 ? ~0ull : (1ull << bits) - 1;
                cr_assert_eq(out[i], want, "cvt.%s.%s.f32 %g: got %llx want %llx", ptx_mod_name(im[m]),
                             ptx_type_name(oc.dty), x, (unsigned long long)out[i], (unsigned long long)want);
            }
        }
}

/* int -> f32 in every mode (2^24 < |v| needs rounding), and -> f64. */
Test(emu_float, cvt_int_to_float)
{
    static const ptx_type sts[] = {TY(S32), TY(U32), TY(S64), TY(U64)};
    uint64_t a[N], out[N];
    uint64_t s = 81;
    for (int i = 0; i < N; i++)
        a[i] = rnd64(&s) >> (rnd32(&s) % 40);
    const uint64_t *src[4] = {a, a, a, a};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 4; m++) {
            int sb = ptx_type_bits(sts[k]);
            opcase oc = {.op = OP(CVT), .mods = PTX_MODS(rmods[m]), .types = PTX_TYPES(TY(F32), sts[k]),
                         .nsrc = 1, .sty = {sts[k]}, .dty = TY(F32)};
            run_op(&oc, "sm_80", N, src, out);
            for (int i = 0; i < N; i++) {
                uint64_t v = a[i] & (sb == 64 ? ~0ull : (1ull << sb) - 1);
                int old = fegetround();
                fesetround(host_mode(m));
                volatile float r;
                if (ptx_type_class(sts[k]) == 's') {
                    volatile int64_t x = sb == 32 ? (int64_t)(int32_t)v : (int64_t)v;
                    r = (float)x;
                } else {
                    volatile uint64_t x = v;
                    r = (float)x;
                }
                fesetround(old);
                cr_assert_eq(out[i], bitsof(r), "cvt.%s.f32.%s %llx", ptx_mod_name(rmods[m]),
                             ptx_type_name(sts[k]), (unsigned long long)v);
            }
        }
}

/* Widening f16/bf16 -> f32 is exact; int <-> int with .sat clamps. */
Test(emu_float, cvt_widen_and_int_sat, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], out[N];
    for (int i = 0; i < N; i++)
        a[i] = (uint64_t)(i * 64 + (i % 64)) & 0xffff;
    const uint64_t *src[4] = {a, a, a, a};
    for (int bf = 0; bf < 2; bf++) {
        opcase oc = {.op = OP(CVT), .types = PTX_TYPES(TY(F32), bf ? TY(BF16) : TY(F16)), .nsrc = 1,
                     .sty = {bf ? TY(BF16) : TY(F16)}, .dty = TY(F32)};
        run_op(&oc, "sm_80", N, src, out);
        for (int i = 0; i < N; i++) {
            double v = bf ? b2d((unsigned)a[i]) : h2d((unsigned)a[i]);
            uint32_t want = isnan(v) ? 0x7fffffffu : bitsof((float)v);
            cr_assert_eq(out[i], want, "cvt.f32.%s %04llx", bf ? "bf16" : "f16", (unsigned long long)a[i]);
        }
    }
    uint64_t s = 5;
    for (int i = 0; i < N; i++)
        a[i] = rnd64(&s) >> (rnd32(&s) % 64);
    static const struct {
        ptx_type d, s;
    } pairs[] = {{TY(U16), TY(S32)}, {TY(S16), TY(S64)}, {TY(U32), TY(S64)}, {TY(S32), TY(U32)},
                 {TY(U64), TY(S32)}, {TY(S64), TY(U64)}};
    for (int p = 0; p < 6; p++)
        for (int sat = 0; sat < 2; sat++) {
            opcase oc = {.op = OP(CVT), .types = PTX_TYPES(pairs[p].d, pairs[p].s), .nsrc = 1,
                         .sty = {pairs[p].s}, .dty = pairs[p].d};
            oc.mods = sat ? PTX_MODS(MD(SAT)) : PTX_NOMODS;
            run_op(&oc, "sm_80", N, src, out);
            int sb = ptx_type_bits(pairs[p].s), db = ptx_type_bits(pairs[p].d);
            bool ss = ptx_type_class(pairs[p].s) == 's', ds = ptx_type_class(pairs[p].d) == 's';
            for (int i = 0; i < N; i++) {
                uint64_t v = a[i] & (sb == 64 ? ~0ull : (1ull << sb) - 1);
                __extension__ __int128 x = ss ? (__int128)(sb == 64 ? (int64_t)v : (int64_t)(v << (64 - sb)) >> (64 - sb))
                                              : (__int128)v;
                __extension__ __int128 lo = ds ? -((__int128)1 << (db - 1)) : 0;
                __extension__ __int128 hi = ds ? ((__int128)1 << (db - 1)) - 1 : ((__int128)1 << db) - 1;
                if (sat)
                    x = x < lo ? lo : x > hi ? hi : x;
                uint64_t want = (uint64_t)x & (db == 64 ? ~0ull : (1ull << db) - 1);
                cr_assert_eq(out[i], want, "cvt%s.%s.%s %llx", sat ? ".sat" : "",
                             ptx_type_name(pairs[p].d), ptx_type_name(pairs[p].s), (unsigned long long)v);
            }
        }
}

/* Approximate functions against libm in double, with the hardware's
 * documented error bounds (see ptx/emu/fpu.c) as tolerance. */
Test(emu_float, special_functions)
{
    static const struct {
        ptx_op op;
        ptx_mod mod;
        double (*ref)(double);
        double rel, abs;
    } fns[] = {
        {OP(EX2), MD(APPROX), exp2, 3e-7, 0},  {OP(LG2), MD(APPROX), log2, 3e-7, 3e-7},
        {OP(RCP), MD(APPROX), NULL, 2e-7, 0},  {OP(RSQRT), MD(APPROX), NULL, 3e-7, 0},
        {OP(SQRT), MD(APPROX), sqrt, 2e-7, 0}, {OP(SIN), MD(APPROX), sin, 0, 6e-7},
        {OP(COS), MD(APPROX), cos, 0, 6e-7},   {OP(TANH), MD(APPROX), tanh, 6e-4, 1e-6},
    };
    uint64_t a[N], out[N];
    uint64_t s = 91;
    for (int i = 0; i < N; i++)
        a[i] = bitsof((float)((double)rnd32(&s) / 4294967296.0 * 6.0 + 0.01) * ((i & 1) ? 1.0f : -1.0f));
    a[0] = 0xff800000u; /* -inf */
    a[1] = 0x7f800000u;
    a[2] = 0;
    a[3] = 0x80000000u;
    a[4] = 0x7fc00000u;
    const uint64_t *src[4] = {a, a, a, a};
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        opcase oc = {.op = fns[k].op, .mods = PTX_MODS(fns[k].mod), .types = T1(F32), .nsrc = 1,
                     .sty = {TY(F32)}, .dty = TY(F32)};
        run_op(&oc, "sm_80", N, src, out);
        for (int i = 0; i < N; i++) {
            double x = (double)f32of((uint32_t)a[i]), w;
            if (fns[k].op == OP(RCP))
                w = 1.0 / x;
            else if (fns[k].op == OP(RSQRT))
                w = 1.0 / sqrt(x);
            else
                w = fns[k].ref(x);
            double g = (double)f32of((uint32_t)out[i]);
            if (isnan(w)) {
                cr_assert(isnan(g), "%s(%g) = %g, want NaN", ptx_op_info(fns[k].op).name, x, g);
                continue;
            }
            if (isinf(w) || w == 0) {
                cr_assert(g == w || (fns[k].op == OP(SIN) && fabs(g) < 1e-6), "%s(%g) = %g, want %g",
                          ptx_op_info(fns[k].op).name, x, g, w);
                continue;
            }
            double tol = fns[k].rel * fabs(w) + fns[k].abs;
            cr_assert(fabs(g - w) <= tol, "%s(%g) = %.9g, want %.9g", ptx_op_info(fns[k].op).name, x, g, w);
        }
    }
    /* ex2(-inf) = +0, ex2(+inf) = +inf, ex2(+-0) = 1 */
    opcase oc = {.op = OP(EX2), .mods = PTX_MODS(MD(APPROX), MD(FTZ)), .types = T1(F32), .nsrc = 1,
                 .sty = {TY(F32)}, .dty = TY(F32)};
    run_op(&oc, "sm_80", 8, src, out);
    cr_assert_eq(out[0], 0);
    cr_assert_eq(out[1], 0x7f800000u);
    cr_assert_eq(out[2], 0x3f800000u);
    cr_assert_eq(out[3], 0x3f800000u);
}

/* abs/neg flip or clear sign bits (x2: both halves); copysign d = |b| with
 * a's sign; .ftz flushes an f32 subnormal first. */
Test(emu_float, abs_neg_copysign)
{
    uint64_t a[N], b[N], out[N];
    fill_f32(a, N, 101);
    fill_f32(b, N, 102);
    const uint64_t *src[4] = {a, b, a, a};
    static const struct {
        ptx_op op;
        ptx_type ty;
        bool ftz;
    } cases[] = {{OP(ABS), TY(F32), false}, {OP(NEG), TY(F32), false}, {OP(ABS), TY(F32), true},
                 {OP(NEG), TY(F16X2), false}, {OP(ABS), TY(BF16X2), false}, {OP(NEG), TY(F64), false}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ptx_type t = cases[k].ty;
        opcase oc = {.op = cases[k].op, .types = PTX_T1(t), .nsrc = 1, .sty = {t}, .dty = t};
        oc.mods = cases[k].ftz ? PTX_MODS(MD(FTZ)) : PTX_NOMODS;
        run_op(&oc, "sm_80", N, src, out);
        for (int i = 0; i < N; i++) {
            uint64_t x = t == TY(F64) ? a[i] : a[i] & 0xffffffffu, want;
            uint64_t sm = t == TY(F64) ? 1ull << 63 : t == TY(F32) ? 1u << 31 : 0x80008000u;
            if (cases[k].ftz)
                x = ftz32((uint32_t)x);
            want = cases[k].op == OP(ABS) ? x & ~sm : x ^ sm;
            cr_assert_eq(out[i], want, "%s.%s %llx", ptx_op_info(cases[k].op).name, ptx_type_name(t),
                         (unsigned long long)a[i]);
        }
    }
    opcase oc = {.op = OP(COPYSIGN), .types = T1(F32), .nsrc = 2, .sty = {TY(F32), TY(F32)}, .dty = TY(F32)};
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++)
        cr_assert_eq(out[i], (b[i] & 0x7fffffffu) | (a[i] & 0x80000000u));
}

/* min/max on f16x2 and bf16x2, with and without .NaN, per half. */
Test(emu_float, half_minmax, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], b[N], out[N];
    fill_h(a, N, 111, true);
    fill_h(b, N, 112, true);
    for (int i = 0; i < 16; i++) { /* NaN halves */
        a[i] = (a[i] & 0xffff0000u) | 0x7e00u;
        b[i + 16] = (b[i + 16] & 0x0000ffffu) | 0xffc10000u;
    }
    const uint64_t *src[4] = {a, b, a, a};
    for (int bf = 0; bf < 2; bf++)
        for (int mx = 0; mx < 2; mx++)
            for (int nan = 0; nan < 2; nan++) {
                ptx_type t = bf ? TY(BF16X2) : TY(F16X2);
                opcase oc = {.op = mx ? OP(MAX) : OP(MIN), .types = PTX_T1(t), .nsrc = 2, .sty = {t, t}, .dty = t};
                oc.mods = nan ? PTX_MODS(MD(NAN)) : PTX_NOMODS;
                run_op(&oc, "sm_80", N, src, out);
                for (int i = 0; i < N; i++)
                    for (int h = 0; h < 2; h++) {
                        unsigned ha = (unsigned)(a[i] >> (16 * h)) & 0xffff, hb = (unsigned)(b[i] >> (16 * h)) & 0xffff;
                        double x = bf ? b2d(ha) : h2d(ha), y = bf ? b2d(hb) : h2d(hb);
                        unsigned want;
                        if ((isnan(x) && isnan(y)) || (nan && (isnan(x) || isnan(y))))
                            want = 0x7fff;
                        else if (isnan(x) || isnan(y))
                            want = isnan(x) ? hb : ha;
                        else if (x == y && x == 0)
                            want = mx ? ((ha & hb) & 0x8000 ? ha : (ha & 0x8000 ? hb : ha))
                                      : ((ha | hb) & 0x8000 ? (ha & 0x8000 ? ha : hb) : ha);
                        else
                            want = (mx ? x > y : x < y) ? ha : hb;
                        unsigned got = (unsigned)(out[i] >> (16 * h)) & 0xffff;
                        cr_assert_eq(got, want, "%s%s.%s %04x %04x: got %04x want %04x", mx ? "max" : "min",
                                     nan ? ".NaN" : "", ptx_type_name(t), ha, hb, got, want);
                    }
            }
}

/* rcp.rn.f32 is correctly rounded; ex2.approx.f16x2 within an f16 ulp. */
Test(emu_float, rcp_rn_and_ex2_f16x2, .init = init_fmts, .fini = fini_fmts)
{
    uint64_t a[N], out[N];
    fill_f32(a, N, 121);
    const uint64_t *src[4] = {a, a, a, a};
    opcase oc = {.op = OP(RCP), .mods = PTX_MODS(MD(RN)), .types = T1(F32), .nsrc = 1, .sty = {TY(F32)},
                 .dty = TY(F32)};
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++) {
        float r = 1.0f / f32of((uint32_t)a[i]);
        cr_assert_eq(out[i], isnan(r) ? 0x7fffffffu : bitsof(r), "rcp.rn %08llx", (unsigned long long)a[i]);
    }
    uint64_t s = 7;
    for (int i = 0; i < N; i++) /* halves in [-8, 8) */
        a[i] = (uint64_t)f2h_ref((float)((int)(rnd32(&s) % 1024) - 512) / 64.0f) << 16 |
               f2h_ref((float)((int)(rnd32(&s) % 1024) - 512) / 64.0f);
    oc = (opcase){.op = OP(EX2), .mods = PTX_MODS(MD(APPROX)), .types = T1(F16X2), .nsrc = 1,
                  .sty = {TY(F16X2)}, .dty = TY(F16X2)};
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++)
        for (int h = 0; h < 2; h++) {
            double x = h2d((unsigned)(a[i] >> (16 * h)) & 0xffff), w = exp2(x);
            double g = h2d((unsigned)(out[i] >> (16 * h)) & 0xffff);
            cr_assert(fabs(g - w) <= w * 0x1p-10, "ex2.approx.f16x2(%g) = %g, want %g", x, g, w);
        }
}
