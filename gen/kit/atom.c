/* kit atom: the MMA table (gen/kit/atom.h). The thread-value maps restate
 * the PTX ISA fragment figures (shared/ref/ptx-sm80.md section 5) as
 * layouts: lane l = (t, g) = (l % 4, l / 4) is mode (4, 8) of thr; each
 * value mode is one bit (or two) of the element index, lowest first. */
#include <stddef.h>

#include "gen/kit/atom.h"

#include "gen/kit/build.h"

#define P(r, c) {r, c}

/* lane (t, g): the (row, col) one step of t and of g adds */
#define THR(tr, tc, gr, gc) {.rank = 2, .dims = 2, .shape = {4, 8}, .stride = {P(tr, tc), P(gr, gc)}}
#define VAL1(s0, r0, c0) {.rank = 1, .dims = 2, .shape = {s0}, .stride = {P(r0, c0)}}
#define VAL2(s0, r0, c0, s1, r1, c1) {.rank = 2, .dims = 2, .shape = {s0, s1}, .stride = {P(r0, c0), P(r1, c1)}}
#define VAL3(s0, r0, c0, s1, r1, c1, s2, r2, c2)                                                      \
    {.rank = 3, .dims = 2, .shape = {s0, s1, s2}, .stride = {P(r0, c0), P(r1, c1), P(r2, c2)}}

/* C/D of every m16n8 shape: c_i at (g + 8(i/2), 2t + i%2) */
#define C_F32 {THR(0, 2, 1, 0), VAL2(2, 0, 1, 2, 8, 0), 4}
#define C_F16 {THR(0, 2, 1, 0), VAL2(2, 0, 1, 2, 8, 0), 2}

/* m16n8k16 16-bit: a_i (g + 8((i>>1)&1), 2t + (i&1) + 8(i>>2)); b_i (2t + (i&1) + 8(i>>1), g) */
#define A_K16_16 {THR(0, 2, 1, 0), VAL3(2, 0, 1, 2, 8, 0, 2, 0, 8), 4}
#define B_K16_16 {THR(2, 0, 0, 1), VAL2(2, 1, 0, 2, 8, 0), 2}
/* m16n8k8 16-bit: a_i (g + 8(i>>1), 2t + (i&1)); b_i (2t + i, g) */
#define A_K8_16 {THR(0, 2, 1, 0), VAL2(2, 0, 1, 2, 8, 0), 2}
#define B_K8_16 {THR(2, 0, 0, 1), VAL1(2, 1, 0), 1}
/* m16n8k8 tf32: a_i (g + 8(i&1), t + 4(i>>1)); b_i (t + 4i, g) */
#define A_K8_TF32 {THR(0, 1, 1, 0), VAL2(2, 8, 0, 2, 0, 4), 4}
#define B_K8_TF32 {THR(1, 0, 0, 1), VAL1(2, 4, 0), 2}
/* m16n8k32 8-bit: a_i (g + 8((i>>2)&1), 4t + (i&3) + 16(i>>3)); b_i (4t + (i&3) + 16(i>>2), g) */
#define A_K32_8 {THR(0, 4, 1, 0), VAL3(4, 0, 1, 2, 8, 0, 2, 0, 16), 4}
#define B_K32_8 {THR(4, 0, 0, 1), VAL2(4, 1, 0, 2, 16, 0), 2}
/* m16n8k16 8-bit: a_i (g + 8(i>>2), 4t + (i&3)); b_i (4t + i, g) */
#define A_K16_8 {THR(0, 4, 1, 0), VAL2(4, 0, 1, 2, 8, 0), 2}
#define B_K16_8 {THR(4, 0, 0, 1), VAL1(4, 1, 0), 1}

/* SIMT FMA: one thread, one element of each */
#define FMA1 {{.rank = 1, .dims = 2, .shape = {1}}, {.rank = 1, .dims = 2, .shape = {1}}, 1}

#define MMA(nm, d, mm, kk, shp, abt, acct, es_, tf, ia, sm, A, B, C)                                  \
    {nm, KIT_ATOM_MMA_SYNC, d, 16, 8, kk, 32, shp, abt, acct, es_, false, tf, ia, kk, sm, A, B, C}

/* The first row of each input dtype is the GEMM's (kit_atom_get); later
 * rows of a dtype are the other shapes and accumulators the emulator
 * tests check. */
static const kit_atom atoms[] = {
    {"fma.f32", KIT_ATOM_FMA, PT_F32, 1, 1, 1, 1, 0, PTX_T_F32, PTX_T_F32, 4, true, false, false, 1, 80,
     FMA1, FMA1, FMA1},
    MMA("m16n8k8.tf32.f32", PT_TF32, 16, 8, PTX_M_M16N8K8, PTX_T_TF32, PTX_T_F32, 4, true, false, 80,
        A_K8_TF32, B_K8_TF32, C_F32),
    MMA("m16n8k16.f16.f32", PT_F16, 16, 16, PTX_M_M16N8K16, PTX_T_F16, PTX_T_F32, 2, false, false, 80,
        A_K16_16, B_K16_16, C_F32),
    MMA("m16n8k16.bf16.f32", PT_BF16, 16, 16, PTX_M_M16N8K16, PTX_T_BF16, PTX_T_F32, 2, false, false, 80,
        A_K16_16, B_K16_16, C_F32),
    MMA("m16n8k32.s8.s32", PT_S8, 16, 32, PTX_M_M16N8K32, PTX_T_S8, PTX_T_S32, 1, false, true, 80,
        A_K32_8, B_K32_8, C_F32),
    MMA("m16n8k32.u8.s32", PT_U8, 16, 32, PTX_M_M16N8K32, PTX_T_U8, PTX_T_S32, 1, false, true, 80,
        A_K32_8, B_K32_8, C_F32),
    MMA("m16n8k32.e4m3.f32", PT_E4M3, 16, 32, PTX_M_M16N8K32, PTX_T_E4M3, PTX_T_F32, 1, false, false, 89,
        A_K32_8, B_K32_8, C_F32),
    MMA("m16n8k32.e5m2.f32", PT_E5M2, 16, 32, PTX_M_M16N8K32, PTX_T_E5M2, PTX_T_F32, 1, false, false, 89,
        A_K32_8, B_K32_8, C_F32),
    /* not used by the GEMM today */
    MMA("m16n8k16.f16.f16", PT_F16, 16, 16, PTX_M_M16N8K16, PTX_T_F16, PTX_T_F16, 2, false, false, 80,
        A_K16_16, B_K16_16, C_F16),
    MMA("m16n8k8.f16.f32", PT_F16, 16, 8, PTX_M_M16N8K8, PTX_T_F16, PTX_T_F32, 2, false, false, 80,
        A_K8_16, B_K8_16, C_F32),
    MMA("m16n8k8.bf16.f32", PT_BF16, 16, 8, PTX_M_M16N8K8, PTX_T_BF16, PTX_T_F32, 2, false, false, 80,
        A_K8_16, B_K8_16, C_F32),
    MMA("m16n8k16.s8.s32", PT_S8, 16, 16, PTX_M_M16N8K16, PTX_T_S8, PTX_T_S32, 1, false, true, 80,
        A_K16_8, B_K16_8, C_F32),
    MMA("m16n8k16.u8.s32", PT_U8, 16, 16, PTX_M_M16N8K16, PTX_T_U8, PTX_T_S32, 1, false, true, 80,
        A_K16_8, B_K16_8, C_F32),
};

const kit_atom *kit_atom_at(int i)
{
    return i >= 0 && (size_t)i < sizeof atoms / sizeof atoms[0] ? &atoms[i] : NULL;
}

const kit_atom *kit_atom_get(pt_dtype dt)
{
    for (size_t i = 0; i < sizeof atoms / sizeof atoms[0]; i++)
        if (atoms[i].dt == dt)
            return &atoms[i];
    return NULL;
}

const kit_atom *kit_atom_find(ptx_mod shape, ptx_type ab, ptx_type acc)
{
    for (size_t i = 0; i < sizeof atoms / sizeof atoms[0]; i++)
        if (atoms[i].kind == KIT_ATOM_MMA_SYNC && atoms[i].shape == shape && atoms[i].ab == ab &&
            atoms[i].acc == acc)
            return &atoms[i];
    return NULL;
}

int kit_atom_elem_bits(const kit_atom *at, kit_operand op)
{
    ptx_type t = op == KIT_C ? at->acc : at->ab;
    if (t == PTX_T_TF32)
        return 32;
    return ptx_type_bits(t);
}

int kit_tv_elems(const kit_tv *tv) { return (int)kit_size(&tv->val); }

void kit_tv_at(const kit_atom *at, kit_operand op, int l, int v, int *row, int *col, int *reg, int *bit)
{
    const kit_tv *tv = kit_atom_tv(at, op);
    if (tv->thr.dims == 2 && tv->val.dims == 2) { /* both codomain dims in one walk of each layout */
        int64_t tr, tc, vr, vc;
        kit_eval_idx2(&tv->thr, l, &tr, &tc);
        kit_eval_idx2(&tv->val, v, &vr, &vc);
        *row = (int)(tr + vr);
        *col = (int)(tc + vc);
    } else {
        *row = (int)(kit_eval_idx(&tv->thr, l, 0) + kit_eval_idx(&tv->val, v, 0));
        *col = (int)(kit_eval_idx(&tv->thr, l, 1) + kit_eval_idx(&tv->val, v, 1));
    }
    int b = kit_atom_elem_bits(at, op);
    int per = b > 0 && b <= 32 && (b & (b - 1)) == 0 ? 32 >> __builtin_ctz((unsigned)b) : 32 / b;
    if (v >= 0 && (per & (per - 1)) == 0) { /* no divide (tens of cycles): 8/16/32-bit elements */
        *reg = v >> __builtin_ctz((unsigned)per);
        *bit = b * (v & (per - 1));
        return;
    }
    *reg = v / per;
    *bit = b * (v % per);
}

/* ---- wgmma ---- */

/* thread t = (l % 4, l / 4, w): the (row, col) one step of each adds */
#define WTHR(tr, tc) {.rank = 3, .dims = 2, .shape = {4, 8, 4}, .stride = {P(tr, tc), P(1, 0), P(16, 0)}}

bool kit_wgmma_atom(ptx_type ab, ptx_type acc, int n, kit_atom *out)
{
    static const struct {
        ptx_type ab;
        pt_dtype dt;
        int k, es;
        const char *f32, *f16;
    } tab[] = {
        {PTX_T_F16, PT_F16, 16, 2, "wgmma.m64nNk16.f16.f32", "wgmma.m64nNk16.f16.f16"},
        {PTX_T_BF16, PT_BF16, 16, 2, "wgmma.m64nNk16.bf16.f32", NULL},
        {PTX_T_TF32, PT_TF32, 8, 4, "wgmma.m64nNk8.tf32.f32", NULL},
        {PTX_T_E4M3, PT_E4M3, 32, 1, "wgmma.m64nNk32.e4m3.f32", "wgmma.m64nNk32.e4m3.f16"},
        {PTX_T_E5M2, PT_E5M2, 32, 1, "wgmma.m64nNk32.e5m2.f32", "wgmma.m64nNk32.e5m2.f16"},
        {PTX_T_S8, PT_S8, 32, 1, "wgmma.m64nNk32.s8.s32", NULL},
        {PTX_T_U8, PT_U8, 32, 1, "wgmma.m64nNk32.u8.s32", NULL},
    };
    const char *name = NULL;
    size_t i = 0;
    for (; i < sizeof tab / sizeof tab[0] && tab[i].ab != ab; i++)
        ;
    if (i == sizeof tab / sizeof tab[0] || n < 8 || n > 256 || n % 8)
        return false;
    bool isint = ab == PTX_T_S8 || ab == PTX_T_U8;
    if (isint)
        name = acc == PTX_T_S32 && (n <= 24 || n % 16 == 0) ? tab[i].f32 : NULL;
    else
        name = acc == PTX_T_F32 ? tab[i].f32 : acc == PTX_T_F16 ? tab[i].f16 : NULL;
    if (!name)
        return false;
    kit_atom a = {.name = name, .kind = KIT_ATOM_WGMMA, .dt = tab[i].dt, .m = 64, .n = n, .k = tab[i].k,
                  .threads = 128, .ab = ab, .acc = acc, .es = tab[i].es, .tf32 = ab == PTX_T_TF32,
                  .int_acc = isint, .kstep = tab[i].k, .min_sm = 90};
    /* D: i -> bit 0 col + 1, bit 1 row + 8, i >> 2 col + 8 */
    a.c = (kit_tv){WTHR(0, 2), VAL3(2, 0, 1, 2, 8, 0, n / 8, 0, 8), acc == PTX_T_F16 ? n / 4 : n / 2};
    if (tab[i].es == 2) /* v = 2q + half: half col + 1, q & 1 row + 8, q >> 1 col + 8 */
        a.a = (kit_tv){WTHR(0, 2), VAL3(2, 0, 1, 2, 8, 0, 2, 0, 8), 4};
    else if (tab[i].es == 4) /* v = q: q & 1 row + 8, q >> 1 col + 4 */
        a.a = (kit_tv){WTHR(0, 1), VAL2(2, 8, 0, 2, 0, 4), 4};
    else /* v = 4q + byte: byte col + 1, q & 1 row + 8, q >> 1 col + 16 */
        a.a = (kit_tv){WTHR(0, 4), VAL3(4, 0, 1, 2, 8, 0, 2, 0, 16), 4};
    *out = a;
    return true;
}

uint64_t kit_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes)
{
    uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)((lbo & 0x3ffffu) >> 4) << 16 |
           (uint64_t)((sbo & 0x3ffffu) >> 4) << 32 | mode << 62;
}

ptx_reg kit_wgmma_desc_emit(ptx_fn *f, ptx_reg addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes)
{
    uint64_t hi = kit_wgmma_desc(0, lbo, sbo, swizzle_bytes);
    ptx_reg w = ptx_reg_new(f, PTX_T_B64), d = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_CVT, NOM, PTX_TYPES(PTX_T_U64, PTX_T_U32), ptx_r(w), ptx_r(addr));
    ptx_emit(f, PTX_OP_SHR, NOM, U64T, ptx_r(w), ptx_r(w), ptx_imm(4));
    ptx_emit(f, PTX_OP_AND, NOM, B64T, ptx_r(w), ptx_r(w), ptx_hex(0x3fff));
    ptx_emit(f, PTX_OP_OR, NOM, B64T, ptx_r(d), ptx_r(w), ptx_hex((int64_t)hi));
    return d;
}

void kit_wgmma_ss(ptx_fn *f, const kit_atom *at, ptx_opd d, ptx_reg desc_a, ptx_reg desc_b, ptx_opd scale_d,
                  bool trans_a, bool trans_b)
{
    ptx_mods sa = PTX_MODS(PTX_M_SYNC, PTX_M_ALIGNED);
    ptx_types ty = PTX_TYPES(at->acc, at->ab, at->ab);
    bool sixteen = at->es == 2;
    ptx_opd o[8] = {d, ptx_r(desc_a), ptx_r(desc_b), scale_d, ptx_imm(1), ptx_imm(1),
                    ptx_imm(trans_a ? 1 : 0), ptx_imm(trans_b ? 1 : 0)};
    int n = at->int_acc ? 4 : sixteen ? 8 : 6;
    if (!sixteen && (trans_a || trans_b)) {
        pt_errf(&f->mod->err, PT_EINVAL, "%s: only 16-bit operands may be MN-major", at->name);
        return;
    }
    ptx_emit_shape_n(f, PTX_OP_WGMMA_SS, sa, ptx_mnk(64, at->n, at->k), ty, n, o);
}
