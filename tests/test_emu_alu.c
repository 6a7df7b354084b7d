/* Emulator: integer and bit instructions, each checked against a reference
 * computed here from the ISA definition on random and edge inputs. */
#include "test_emu_util.h"

/* out[i] = a[i] + b[i] over s32: the end-to-end smoke test. */
Test(emu_alu, vector_add)
{
    tk t = tk_new("sm_80", "vadd");
    ptx_reg po = tk_ptr(&t, "out"), pa = tk_ptr(&t, "a"), pb = tk_ptr(&t, "b");
    ptx_reg n = tk_u32(&t, "n");
    ptx_reg i = tk_gtid(&t), p = RP(&t);
    int done = ptx_label_new(t.f);
    ptx_emit(t.f, OP(SETP), PTX_MODS(MD(GE)), T1(U32), ptx_r(p), ptx_r(i), ptx_r(n));
    ptx_guard(ptx_emit(t.f, OP(BRA), PTX_NOMODS, PTX_NOTYPES, ptx_lbl(done)), p, false);
    ptx_reg x = R32(&t), y = R32(&t), z = R32(&t);
    ptx_emit(t.f, OP(LD), PTX_MODS(MD(GLOBAL)), T1(S32), ptx_r(x), ptx_addr(tk_addr(&t, pa, i, 4), 0));
    ptx_emit(t.f, OP(LD), PTX_MODS(MD(GLOBAL)), T1(S32), ptx_r(y), ptx_addr(tk_addr(&t, pb, i, 4), 0));
    ptx_emit(t.f, OP(ADD), PTX_NOMODS, T1(S32), ptx_r(z), ptx_r(x), ptx_r(y));
    ptx_emit(t.f, OP(ST), PTX_MODS(MD(GLOBAL)), T1(S32), ptx_addr(tk_addr(&t, po, i, 4), 0), ptx_r(z));
    ptx_label_place(t.f, done);
    tk_ret(&t);
    tk_load(&t);

    enum { N = 1000 };
    int32_t a[N], b[N], out[N];
    uint64_t s = 1;
    for (int k = 0; k < N; k++) {
        a[k] = (int32_t)rnd32(&s);
        b[k] = (int32_t)rnd32(&s);
    }
    uint64_t da = tk_buf(&t, a, sizeof a, "a"), db = tk_buf(&t, b, sizeof b, "b");
    uint64_t dout = tk_buf(&t, NULL, sizeof out, "out");
    uint32_t nn = N;
    const void *args[] = {&dout, &da, &db, &nn};
    tk_run(&t, (N + 127) / 128, 128, args);
    tk_get(&t, dout, out, sizeof out);
    for (int k = 0; k < N; k++)
        cr_assert_eq(out[k], (int32_t)((uint32_t)a[k] + (uint32_t)b[k]), "k=%d", k);
    tk_free(&t);
}

/* ---- table-driven one-instruction checks ---- */

static uint64_t msk(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }
static int64_t sx(uint64_t v, int bits)
{
    v &= msk(bits);
    if (bits < 64 && (v >> (bits - 1)) & 1)
        v |= ~msk(bits);
    return (int64_t)v;
}

/* Edge values first, then random ones, truncated to `bits`. */
static void fill(uint64_t *v, int n, int bits, uint64_t seed)
{
    static const uint64_t edge[] = {0, 1, 2, 3, 31, 32, 33, 63, 64, 0x7f, 0x80, 0xff, 0x7fff, 0x8000,
                                    0xffff, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                    0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull, ~1ull};
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        uint64_t r = rnd64(&s);
        if (i < (int)(sizeof edge / sizeof edge[0]))
            r = edge[i];
        else if (i % 5 == 0)
            r = (r >> (r & 63)); /* small values */
        else if (i % 7 == 0)
            r = (uint64_t)-(int64_t)(r & 0xff);
        v[i] = r & msk(bits);
    }
}

enum { N = 512 };

typedef uint64_t (*ref3)(uint64_t a, uint64_t b, uint64_t c, int bits);

/* Runs oc on n inputs and compares with ref (skip: a sample the ISA leaves
 * undefined). */
static void check(const opcase *oc, ref3 ref, int bits, bool (*skip)(uint64_t, uint64_t, int),
                  const char *what)
{
    uint64_t a[N], b[N], c[N], out[N];
    int sbits[4] = {64, 64, 64, 64};
    for (int k = 0; k < oc->nsrc; k++)
        sbits[k] = oc->sty[k] == TY(PRED) ? 1 : ptx_type_bits(oc->sty[k]);
    fill(a, N, sbits[0], 11);
    fill(b, N, oc->nsrc > 1 ? sbits[1] : 64, 22);
    fill(c, N, oc->nsrc > 2 ? sbits[2] : 64, 33);
    /* pair every edge value with every other in the first rows */
    for (int i = 0; i < 22 * 22 && i < N; i++) {
        a[i] = a[i / 22] & msk(sbits[0]);
        if (oc->nsrc > 1)
            b[i] = a[i % 22] & msk(sbits[1]);
    }
    for (int k = 0; k < oc->nsrc; k++)
        if (oc->sty[k] == TY(PRED)) {
            uint64_t *v = k == 0 ? a : k == 1 ? b : c;
            for (int i = 0; i < N; i++)
                v[i] &= 1;
        }
    const uint64_t *src[4] = {a, b, c, c};
    run_op(oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++) {
        if (skip && skip(a[i], b[i], bits))
            continue;
        uint64_t want = ref(a[i], b[i], c[i], bits);
        cr_assert_eq(out[i], want, "%s: a=0x%llx b=0x%llx c=0x%llx: got 0x%llx want 0x%llx", what,
                     (unsigned long long)a[i], (unsigned long long)b[i], (unsigned long long)c[i],
                     (unsigned long long)out[i], (unsigned long long)want);
    }
}

#define OC2(op_, mods_, ty_, dty_)                                                              \
    (opcase) { .op = OP(op_), .mods = mods_, .types = T1(ty_), .nsrc = 2,                       \
               .sty = {TY(ty_), TY(ty_)}, .dty = TY(dty_) }
#define OC1(op_, mods_, ty_, dty_)                                                              \
    (opcase) { .op = OP(op_), .mods = mods_, .types = T1(ty_), .nsrc = 1, .sty = {TY(ty_)},     \
               .dty = TY(dty_) }

static uint64_t r_add(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return (a + b) & msk(n); }
static uint64_t r_sub(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return (a - b) & msk(n); }
static uint64_t r_mullo(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return (a * b) & msk(n); }
static uint64_t r_mulhi_u(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    __extension__ unsigned __int128 p = (unsigned __int128)a * b;
    return (uint64_t)(p >> n) & msk(n);
}
static uint64_t r_mulhi_s(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    __extension__ __int128 p = (__int128)sx(a, n) * sx(b, n);
    return (uint64_t)(p >> n) & msk(n);
}
static uint64_t r_wide_u(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return (a * b) & msk(2 * n); }
static uint64_t r_wide_s(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    return (uint64_t)(sx(a, n) * sx(b, n)) & msk(2 * n);
}
static uint64_t r_madlo(uint64_t a, uint64_t b, uint64_t c, int n) { return (a * b + c) & msk(n); }
static uint64_t r_madhi_s(uint64_t a, uint64_t b, uint64_t c, int n)
{
    __extension__ __int128 p = (__int128)sx(a, n) * sx(b, n);
    return ((uint64_t)(p >> n) + c) & msk(n);
}
static uint64_t r_madwide_s(uint64_t a, uint64_t b, uint64_t c, int n)
{
    return ((uint64_t)(sx(a, n) * sx(b, n)) + c) & msk(2 * n);
}
static uint64_t r_div_u(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; (void)n; return a / b; }
static uint64_t r_div_s(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return (uint64_t)(sx(a, n) / sx(b, n)) & msk(n); }
static uint64_t r_rem_u(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; (void)n; return a % b; }
static uint64_t r_rem_s(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return (uint64_t)(sx(a, n) % sx(b, n)) & msk(n); }
static bool skip_div(uint64_t a, uint64_t b, int n)
{
    return (b & msk(n)) == 0 || (sx(b, n) == -1 && (a & msk(n)) == (1ull << (n - 1)));
}
static uint64_t r_min_u(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; (void)n; return a < b ? a : b; }
static uint64_t r_max_u(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; (void)n; return a > b ? a : b; }
static uint64_t r_min_s(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return sx(a, n) < sx(b, n) ? a : b; }
static uint64_t r_max_s(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c; return sx(a, n) > sx(b, n) ? a : b; }
static uint64_t r_abs(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)b, (void)c;
    int64_t x = sx(a, n);
    return (x < 0 ? 0 - (uint64_t)x : (uint64_t)x) & msk(n);
}
static uint64_t r_neg(uint64_t a, uint64_t b, uint64_t c, int n) { (void)b, (void)c; return (0 - a) & msk(n); }
static uint64_t r_and(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c, (void)n; return a & b; }
static uint64_t r_or(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c, (void)n; return a | b; }
static uint64_t r_xor(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c, (void)n; return a ^ b; }
static uint64_t r_not(uint64_t a, uint64_t b, uint64_t c, int n) { (void)b, (void)c; return ~a & msk(n); }
static uint64_t r_shl(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    b &= 0xffffffffu;
    return b >= (uint64_t)n ? 0 : (a << b) & msk(n);
}
static uint64_t r_shr_u(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    b &= 0xffffffffu;
    return b >= (uint64_t)n ? 0 : a >> b;
}
static uint64_t r_shr_s(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    b &= 0xffffffffu;
    int64_t x = sx(a, n);
    return (uint64_t)(b >= (uint64_t)n ? (x < 0 ? -1 : 0) : x >> b) & msk(n);
}
static uint64_t r_popc(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)b, (void)c, (void)n;
    uint64_t k = 0;
    for (; a; a &= a - 1)
        k++;
    return k;
}
static uint64_t r_clz(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)b, (void)c;
    uint64_t k = 0;
    for (int i = n - 1; i >= 0 && !((a >> i) & 1); i--)
        k++;
    return k;
}
static uint64_t r_brev(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)b, (void)c;
    uint64_t r = 0;
    for (int i = 0; i < n; i++)
        if ((a >> i) & 1)
            r |= 1ull << (n - 1 - i);
    return r;
}

Test(emu_alu, integer_arithmetic)
{
    static const struct {
        ptx_op op;
        int nmods;
        ptx_mod mod;
        ptx_type ty;
        ref3 ref;
        bool divlike;
    } cases[] = {
        {OP(ADD), 0, 0, TY(U32), r_add, 0},      {OP(ADD), 0, 0, TY(S64), r_add, 0},
        {OP(ADD), 0, 0, TY(U16), r_add, 0},      {OP(SUB), 0, 0, TY(S32), r_sub, 0},
        {OP(SUB), 0, 0, TY(U64), r_sub, 0},      {OP(MUL), 1, MD(LO), TY(U32), r_mullo, 0},
        {OP(MUL), 1, MD(LO), TY(S64), r_mullo, 0}, {OP(MUL), 1, MD(HI), TY(U32), r_mulhi_u, 0},
        {OP(MUL), 1, MD(HI), TY(S32), r_mulhi_s, 0}, {OP(MUL), 1, MD(HI), TY(U64), r_mulhi_u, 0},
        {OP(MUL), 1, MD(HI), TY(S64), r_mulhi_s, 0}, {OP(MUL), 1, MD(HI), TY(S16), r_mulhi_s, 0},
        {OP(DIV), 0, 0, TY(U32), r_div_u, 1},    {OP(DIV), 0, 0, TY(S32), r_div_s, 1},
        {OP(DIV), 0, 0, TY(U64), r_div_u, 1},    {OP(DIV), 0, 0, TY(S64), r_div_s, 1},
        {OP(REM), 0, 0, TY(U32), r_rem_u, 1},    {OP(REM), 0, 0, TY(S32), r_rem_s, 1},
        {OP(REM), 0, 0, TY(S64), r_rem_s, 1},    {OP(MIN), 0, 0, TY(U32), r_min_u, 0},
        {OP(MIN), 0, 0, TY(S32), r_min_s, 0},    {OP(MAX), 0, 0, TY(U64), r_max_u, 0},
        {OP(MAX), 0, 0, TY(S64), r_max_s, 0},    {OP(MAX), 0, 0, TY(S16), r_max_s, 0},
        {OP(AND), 0, 0, TY(B32), r_and, 0},      {OP(OR), 0, 0, TY(B64), r_or, 0},
        {OP(XOR), 0, 0, TY(B16), r_xor, 0},      {OP(SHL), 0, 0, TY(B32), r_shl, 0},
        {OP(SHL), 0, 0, TY(B64), r_shl, 0},      {OP(SHR), 0, 0, TY(U32), r_shr_u, 0},
        {OP(SHR), 0, 0, TY(S32), r_shr_s, 0},    {OP(SHR), 0, 0, TY(B64), r_shr_u, 0},
        {OP(SHR), 0, 0, TY(S64), r_shr_s, 0},    {OP(SHR), 0, 0, TY(S16), r_shr_s, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        opcase oc = OC2(ADD, PTX_NOMODS, U32, U32);
        oc.op = cases[i].op;
        oc.mods = cases[i].nmods ? PTX_MODS(cases[i].mod) : PTX_NOMODS;
        oc.types = PTX_T1(cases[i].ty);
        oc.sty[0] = oc.sty[1] = oc.dty = cases[i].ty;
        if (oc.op == OP(SHL) || oc.op == OP(SHR))
            oc.sty[1] = TY(U32);
        char what[64];
        pt_buf b;
        pt_buf_init(&b);
        pt_buf_printf(&b, "%s.%s%s", ptx_op_info(oc.op).name, cases[i].nmods ? ptx_mod_name(cases[i].mod) : "",
                      ptx_type_name(cases[i].ty));
        snprintf(what, sizeof what, "%s", b.s);
        pt_buf_free(&b);
        check(&oc, cases[i].ref, ptx_type_bits(cases[i].ty), cases[i].divlike ? skip_div : NULL, what);
    }
}

Test(emu_alu, wide_and_mad)
{
    opcase oc = OC2(MUL, PTX_MODS(MD(WIDE)), U32, U64);
    check(&oc, r_wide_u, 32, NULL, "mul.wide.u32");
    oc = OC2(MUL, PTX_MODS(MD(WIDE)), S32, S64);
    check(&oc, r_wide_s, 32, NULL, "mul.wide.s32");
    oc = OC2(MUL, PTX_MODS(MD(WIDE)), S16, S32);
    check(&oc, r_wide_s, 16, NULL, "mul.wide.s16");
    oc = (opcase){.op = OP(MAD), .mods = PTX_MODS(MD(LO)), .types = T1(U32), .nsrc = 3,
                  .sty = {TY(U32), TY(U32), TY(U32)}, .dty = TY(U32)};
    check(&oc, r_madlo, 32, NULL, "mad.lo.u32");
    oc = (opcase){.op = OP(MAD), .mods = PTX_MODS(MD(HI)), .types = T1(S32), .nsrc = 3,
                  .sty = {TY(S32), TY(S32), TY(S32)}, .dty = TY(S32)};
    check(&oc, r_madhi_s, 32, NULL, "mad.hi.s32");
    oc = (opcase){.op = OP(MAD), .mods = PTX_MODS(MD(WIDE)), .types = T1(S32), .nsrc = 3,
                  .sty = {TY(S32), TY(S32), TY(S64)}, .dty = TY(S64)};
    check(&oc, r_madwide_s, 32, NULL, "mad.wide.s32");
}

Test(emu_alu, unary_and_bits)
{
    opcase oc = OC1(ABS, PTX_NOMODS, S32, S32);
    check(&oc, r_abs, 32, NULL, "abs.s32");
    oc = OC1(NEG, PTX_NOMODS, S64, S64);
    check(&oc, r_neg, 64, NULL, "neg.s64");
    oc = OC1(NOT, PTX_NOMODS, B32, B32);
    check(&oc, r_not, 32, NULL, "not.b32");
    oc = OC1(NOT, PTX_NOMODS, B16, B16);
    check(&oc, r_not, 16, NULL, "not.b16");
    oc = OC1(POPC, PTX_NOMODS, B32, U32);
    check(&oc, r_popc, 32, NULL, "popc.b32");
    oc = OC1(POPC, PTX_NOMODS, B64, U32);
    check(&oc, r_popc, 64, NULL, "popc.b64");
    oc = OC1(CLZ, PTX_NOMODS, B32, U32);
    check(&oc, r_clz, 32, NULL, "clz.b32");
    oc = OC1(CLZ, PTX_NOMODS, B64, U32);
    check(&oc, r_clz, 64, NULL, "clz.b64");
    oc = OC1(BREV, PTX_NOMODS, B32, B32);
    check(&oc, r_brev, 32, NULL, "brev.b32");
    oc = OC1(BREV, PTX_NOMODS, B64, B64);
    check(&oc, r_brev, 64, NULL, "brev.b64");
}

/* lop3: bit i of d = LUT[(a_i << 2) | (b_i << 1) | c_i]. */
static unsigned g_lut;
static uint64_t r_lop3(uint64_t a, uint64_t b, uint64_t c, int n)
{
    uint64_t r = 0;
    for (int i = 0; i < n; i++) {
        unsigned idx = (unsigned)(((a >> i) & 1) << 2 | ((b >> i) & 1) << 1 | ((c >> i) & 1));
        r |= (uint64_t)((g_lut >> idx) & 1) << i;
    }
    return r;
}

Test(emu_alu, lop3)
{
    static const unsigned luts[] = {0x96, 0xca, 0xf0, 0xcc, 0xaa, 0x00, 0xff, 0xe8, 0x80, 0x1e, 0x6a};
    for (size_t k = 0; k < sizeof luts / sizeof luts[0]; k++) {
        g_lut = luts[k];
        opcase oc = {.op = OP(LOP3), .types = T1(B32), .nsrc = 3, .sty = {TY(B32), TY(B32), TY(B32)},
                     .dty = TY(B32), .has_imm = true, .imm = luts[k]};
        check(&oc, r_lop3, 32, NULL, "lop3.b32");
    }
}

/* prmt default mode: bytes {b, a} numbered 0..7; selector nibble k picks
 * result byte k; bit 3 replicates the picked byte's sign. */
static uint64_t r_prmt(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)n;
    uint8_t src[8];
    for (int i = 0; i < 4; i++) {
        src[i] = (uint8_t)(a >> (8 * i));
        src[4 + i] = (uint8_t)(b >> (8 * i));
    }
    uint64_t r = 0;
    for (int k = 0; k < 4; k++) {
        unsigned sel = (unsigned)(c >> (4 * k)) & 0xf;
        uint8_t v = src[sel & 7];
        if (sel & 8)
            v = (v & 0x80) ? 0xff : 0x00;
        r |= (uint64_t)v << (8 * k);
    }
    return r;
}

Test(emu_alu, prmt)
{
    opcase oc = {.op = OP(PRMT), .types = T1(B32), .nsrc = 3, .sty = {TY(B32), TY(B32), TY(B32)},
                 .dty = TY(B32)};
    check(&oc, r_prmt, 32, NULL, "prmt.b32");
}

/* bfe: d[i] = a[pos + i] for i < len (within the type), else the sign bit
 * of the field (signed types, len > 0) or 0. */
static uint64_t r_bfe(uint64_t a, uint64_t b, uint64_t c, int n, bool sgn)
{
    unsigned pos = (unsigned)b & 0xff, len = (unsigned)c & 0xff, msb = (unsigned)n - 1;
    uint64_t sbit = 0;
    if (sgn && len) {
        unsigned at = pos + len - 1 < msb ? pos + len - 1 : msb;
        sbit = (a >> at) & 1;
    }
    uint64_t d = 0;
    for (unsigned i = 0; i <= msb; i++) {
        uint64_t bit = (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
        d |= bit << i;
    }
    return d;
}
static uint64_t r_bfe_u(uint64_t a, uint64_t b, uint64_t c, int n) { return r_bfe(a, b, c, n, false); }
static uint64_t r_bfe_s(uint64_t a, uint64_t b, uint64_t c, int n) { return r_bfe(a, b, c, n, true); }

Test(emu_alu, bfe_bfi)
{
    static const ptx_type tys[] = {TY(U32), TY(S32), TY(U64), TY(S64)};
    for (int k = 0; k < 4; k++) {
        opcase oc = {.op = OP(BFE), .types = PTX_T1(tys[k]), .nsrc = 3,
                     .sty = {tys[k], TY(U32), TY(U32)}, .dty = tys[k]};
        bool s = ptx_type_class(tys[k]) == 's';
        check(&oc, s ? r_bfe_s : r_bfe_u, ptx_type_bits(tys[k]), NULL, "bfe");
    }
    /* bfi via a 4-source kernel: f = b with a's low len bits at pos */
    uint64_t a[N], b[N], c[N], d[N], out[N];
    fill(a, N, 32, 5);
    fill(b, N, 32, 6);
    fill(c, N, 32, 7);
    fill(d, N, 32, 8);
    for (int i = 0; i < N; i += 2) { /* make half the fields in range */
        c[i] &= 31;
        d[i] &= 31;
    }
    opcase oc = {.op = OP(BFI), .types = T1(B32), .nsrc = 4,
                 .sty = {TY(B32), TY(B32), TY(U32), TY(U32)}, .dty = TY(B32)};
    const uint64_t *src[4] = {a, b, c, d};
    run_op(&oc, "sm_80", N, src, out);
    for (int i = 0; i < N; i++) {
        unsigned pos = (unsigned)c[i] & 0xff, len = (unsigned)d[i] & 0xff;
        uint64_t f = b[i];
        for (unsigned j = 0; j < len && pos + j <= 31; j++)
            f = (f & ~(1ull << (pos + j))) | (((a[i] >> j) & 1) << (pos + j));
        cr_assert_eq(out[i], f, "bfi a=%llx b=%llx pos=%u len=%u", (unsigned long long)a[i],
                     (unsigned long long)b[i], pos, len);
    }
}

/* setp.cmp{.bop}.type p, a, b{, {!}c} over every integer comparison. */
static int g_cmp, g_bop;
static bool g_negc;
static uint64_t r_setp(uint64_t a, uint64_t b, uint64_t c, int n, bool sgn)
{
    bool r;
    int64_t x = sx(a, n), y = sx(b, n);
    switch (g_cmp) {
    case MD(EQ): r = a == b; break;
    case MD(NE): r = a != b; break;
    case MD(LT): r = sgn ? x < y : a < b; break;
    case MD(LE): r = sgn ? x <= y : a <= b; break;
    case MD(GT): r = sgn ? x > y : a > b; break;
    case MD(GE): r = sgn ? x >= y : a >= b; break;
    case MD(LO): r = a < b; break;
    case MD(LS): r = a <= b; break;
    case MD(HI): r = a > b; break;
    default: r = a >= b; break; /* hs */
    }
    bool p = (c & 1) != g_negc;
    if (g_bop == MD(AND))
        r = r && p;
    else if (g_bop == MD(OR))
        r = r || p;
    else if (g_bop == MD(XOR))
        r = r != p;
    return r;
}
static uint64_t r_setp_u(uint64_t a, uint64_t b, uint64_t c, int n) { return r_setp(a, b, c, n, false); }
static uint64_t r_setp_s(uint64_t a, uint64_t b, uint64_t c, int n) { return r_setp(a, b, c, n, true); }

Test(emu_alu, setp_integer)
{
    static const ptx_mod cmps[] = {MD(EQ), MD(NE), MD(LT), MD(LE), MD(GT), MD(GE),
                                   MD(LO), MD(LS), MD(HI), MD(HS)};
    static const ptx_type tys[] = {TY(U32), TY(S32), TY(S64), TY(U16)};
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 10; k++) {
            bool s = ptx_type_class(tys[t]) == 's';
            if (s && k >= 6)
                continue; /* lo/ls/hi/hs are for unsigned types */
            g_cmp = cmps[k];
            g_bop = -1;
            g_negc = false;
            opcase oc = {.op = OP(SETP), .mods = PTX_MODS(cmps[k]), .types = PTX_T1(tys[t]),
                         .nsrc = 2, .sty = {tys[t], tys[t]}, .dty = TY(PRED)};
            check(&oc, s ? r_setp_s : r_setp_u, ptx_type_bits(tys[t]), NULL, "setp");
        }
    static const ptx_mod bops[] = {MD(AND), MD(OR), MD(XOR)};
    for (int k = 0; k < 3; k++)
        for (int ng = 0; ng < 2; ng++) {
            g_cmp = MD(LT);
            g_bop = bops[k];
            g_negc = ng;
            opcase oc = {.op = OP(SETP), .mods = PTX_MODS(MD(LT), bops[k]), .types = T1(S32),
                         .nsrc = 3, .sty = {TY(S32), TY(S32), TY(PRED)}, .dty = TY(PRED)};
            oc.neg[2] = ng;
            check(&oc, r_setp_s, 32, NULL, "setp.lt.bop.s32");
        }
}

static uint64_t r_selp(uint64_t a, uint64_t b, uint64_t c, int n) { (void)n; return (c & 1) ? a : b; }
static uint64_t r_pand(uint64_t a, uint64_t b, uint64_t c, int n) { (void)c, (void)n; return a & b & 1; }
static uint64_t r_pnot(uint64_t a, uint64_t b, uint64_t c, int n) { (void)b, (void)c, (void)n; return !(a & 1); }

Test(emu_alu, selp_and_predicates)
{
    opcase oc = {.op = OP(SELP), .types = T1(B64), .nsrc = 3, .sty = {TY(B64), TY(B64), TY(PRED)},
                 .dty = TY(B64)};
    check(&oc, r_selp, 64, NULL, "selp.b64");
    oc = (opcase){.op = OP(AND), .types = T1(PRED), .nsrc = 2, .sty = {TY(PRED), TY(PRED)}, .dty = TY(PRED)};
    check(&oc, r_pand, 1, NULL, "and.pred");
    oc = (opcase){.op = OP(NOT), .types = T1(PRED), .nsrc = 1, .sty = {TY(PRED)}, .dty = TY(PRED)};
    check(&oc, r_pnot, 1, NULL, "not.pred");
}

static uint64_t r_addsat(uint64_t a, uint64_t b, uint64_t c, int n)
{
    (void)c;
    int64_t r = sx(a, n) + sx(b, n);
    r = r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : r;
    return (uint64_t)r & msk(n);
}

Test(emu_alu, add_sat)
{
    opcase oc = OC2(ADD, PTX_MODS(MD(SAT)), S32, S32);
    check(&oc, r_addsat, 32, NULL, "add.sat.s32");
}
