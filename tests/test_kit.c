/* The kit (gen/kit/): layouts, swizzle, MMA atom maps, copies and pipes.
 * Expected values are computed by hand or restated from the PTX ISA
 * figures (shared/ref/ptx-sm80.md sections 4-5), never by the kit. */
#include "gen/kit/kit.h"
#include "gen/kit/atom.h"
#include "gen/kit/layout.h"
#include "test_emu_util.h"

/* ---- layouts ---- */

Test(kit, smem_tile_offsets_by_hand)
{
    /* 128-byte rows: chunk ^= row & 7 */
    kit_layout t = kit_smem_tile(64, 128, 0);
    cr_assert_eq(t.span, 64 * 128);
    cr_assert_eq(kit_at(&t, 0, 0), 0);
    cr_assert_eq(kit_at(&t, 1, 0), 128 + 16);
    cr_assert_eq(kit_at(&t, 3, 32), 384 + 16 * (2 ^ 3));
    cr_assert_eq(kit_at(&t, 9, 5), 9 * 128 + 16 + 5);
    cr_assert_eq(kit_at(&t, 7, 127), 7 * 128 + 16 * (7 ^ 7) + 15);
    /* 64-byte rows: 4 chunks, chunk ^= (row >> 1) & 3 */
    t = kit_smem_tile(32, 64, 0);
    cr_assert_eq(kit_at(&t, 1, 0), 64);
    cr_assert_eq(kit_at(&t, 2, 0), 128 + 16);
    cr_assert_eq(kit_at(&t, 7, 16), 7 * 64 + 16 * (1 ^ 3));
    /* 32-byte rows: 2 chunks, chunk ^= (row >> 2) & 1 */
    t = kit_smem_tile(32, 32, 0);
    cr_assert_eq(kit_at(&t, 3, 16), 3 * 32 + 16);
    cr_assert_eq(kit_at(&t, 4, 0), 128 + 16);
    cr_assert_eq(kit_at(&t, 4, 16), 128);
    /* 256-byte rows: the low 3 bits of 16 chunks, chunk ^= row & 7 */
    t = kit_smem_tile(16, 256, 0);
    cr_assert_eq(kit_at(&t, 1, 9 * 16), 256 + 16 * (9 ^ 1));
    cr_assert_eq(kit_at(&t, 6, 8 * 16 + 3), 6 * 256 + 16 * (8 ^ 6) + 3);
    /* 16-byte rows: one chunk, nothing to swizzle */
    t = kit_smem_tile(16, 16, 0);
    cr_assert_eq(kit_at(&t, 5, 7), 5 * 16 + 7);
    /* padded: rows 48 bytes apart, no swizzle */
    t = kit_smem_tile(8, 32, 16);
    cr_assert_eq(t.span, 8 * 48);
    cr_assert_eq(kit_at(&t, 3, 8), 3 * 48 + 8);
}

Test(kit, swizzle_is_a_bijection_and_an_involution)
{
    int widths[] = {32, 64, 128, 256, 512};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        int rb = widths[w], rows = 8192 / rb;
        kit_layout t = kit_smem_tile(rows, rb, 0);
        static unsigned char seen[8192];
        memset(seen, 0, sizeof seen);
        for (int r = 0; r < rows; r++)
            for (int b = 0; b < rb; b++) {
                int64_t o = kit_at(&t, r, b);
                cr_assert(o >= 0 && o < 8192, "%d-byte rows: (%d,%d) -> %lld out of the tile", rb, r, b,
                          (long long)o);
                cr_assert(!seen[o], "%d-byte rows: offset %lld twice", rb, (long long)o);
                seen[o] = 1;
                cr_assert_eq(kit_swz(t.swz, kit_swz(t.swz, r * rb + b)), r * rb + b);
                /* bytes inside a 16-byte chunk stay together */
                cr_assert_eq(o % 16, b % 16);
            }
        /* 8 consecutive rows at one logical chunk: 8 distinct 16-byte bank groups */
        for (int r0 = 0; r0 + 8 <= rows; r0 += 8)
            for (int c = 0; c < rb / 16; c++) {
                int mask = 0;
                for (int r = r0; r < r0 + 8; r++)
                    mask |= 1 << ((kit_at(&t, r, 16 * c) / 16) % 8);
                cr_assert_eq(mask, 0xff, "%d-byte rows, rows %d.., chunk %d: groups %02x", rb, r0, c, mask);
            }
    }
}

Test(kit, layout_index_order_and_compose)
{
    /* lane (4, 8): l -> (t, g) = (l % 4, l / 4); C map thr: (g, 2t) */
    kit_layout thr = kit_layout2(2, (int[]){4, 8}, (int64_t[]){0, 1}, (int64_t[]){2, 0});
    cr_assert_eq(kit_eval_idx(&thr, 13, 0), 3);
    cr_assert_eq(kit_eval_idx(&thr, 13, 1), 2);
    /* ldmatrix A K-major: lane l -> (row l % 16, chunk l / 16), composed with a 128-byte tile */
    kit_layout lanes = kit_layout2(2, (int[]){16, 2}, (int64_t[]){1, 0}, (int64_t[]){0, 16});
    kit_layout t = kit_smem_tile(64, 128, 0);
    kit_layout lo = kit_compose(&t, &lanes);
    for (int l = 0; l < 32; l++)
        cr_assert_eq(kit_eval_idx(&lo, l, 0), (l % 16) * 128 + 16 * ((l / 16) ^ (l % 8)), "lane %d", l);
    /* tiler: 4 x 2 warps of 32 x 64 over 128 x 128, m fastest */
    kit_layout w = kit_tiler(128, 128, 32, 64, true);
    cr_assert_eq(kit_size(&w), 8);
    cr_assert_eq(kit_eval_idx(&w, 5, 0), 32);
    cr_assert_eq(kit_eval_idx(&w, 5, 1), 64);
    kit_layout m = kit_modes(&lanes, 1, 1);
    cr_assert_eq(m.rank, 1);
    cr_assert_eq(kit_eval_idx(&m, 1, 1), 16);
    kit_layout cat = kit_concat(&thr, &m);
    cr_assert_eq(cat.rank, 3);
    cr_assert_eq(kit_eval_idx(&cat, 32 + 5, 1), 2 + 16);
}

Test(kit, emitted_index_code_equals_evaluation)
{
    /* every lane computes the composed ldmatrix offsets of three tiles as
     * code; the emulator's results must equal kit_eval_idx */
    kit_layout lanes = kit_layout2(3, (int[]){8, 2, 2}, (int64_t[]){1, 8, 0}, (int64_t[]){0, 0, 16});
    kit_layout tiles[3] = {kit_smem_tile(64, 128, 0), kit_smem_tile(32, 64, 0), kit_smem_tile(32, 48, 16)};
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "o");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID);
    ptx_reg oa = tk_addr(&t, po, lane, 16);
    for (int i = 0; i < 3; i++) {
        kit_layout lo = kit_compose(&tiles[i], &lanes);
        ptx_opd v = kit_emit_idx(t.f, &lo, ptx_r(lane), 0);
        cr_assert_eq(v.kind, PTX_O_REG);
        E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(oa, 4 * i), v);
    }
    /* immediates fold */
    kit_layout lo = kit_compose(&tiles[0], &lanes);
    ptx_opd k = kit_emit_idx(t.f, &lo, ptx_imm(21), 0);
    cr_assert_eq(k.kind, PTX_O_IMM);
    cr_assert_eq(k.u.imm, kit_eval_idx(&lo, 21, 0));
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[32 * 4];
    uint64_t d = tk_buf(&t, NULL, sizeof out, "o");
    const void *args[] = {&d};
    tk_run(&t, 1, 32, args);
    tk_get(&t, d, out, sizeof out);
    for (int i = 0; i < 3; i++) {
        kit_layout l2 = kit_compose(&tiles[i], &lanes);
        for (int l = 0; l < 32; l++) {
            int row = l % 8 + 8 * ((l / 8) % 2), chunk = l / 16;
            cr_assert_eq(out[l * 4 + i], (uint32_t)kit_at(&tiles[i], row, 16 * chunk), "tile %d lane %d", i, l);
            cr_assert_eq(out[l * 4 + i], (uint32_t)kit_eval_idx(&l2, l, 0));
        }
    }
    tk_free(&t);
}

/* ---- atoms against the ISA fragment figures ---- */

static void pos(const kit_atom *at, kit_operand op, int l, int v, int *r, int *c)
{
    int reg, bit;
    kit_tv_at(at, op, l, v, r, c, &reg, &bit);
}

Test(kit, atom_m16n8k16_maps_match_the_isa_figure)
{
    const kit_atom *at = kit_atom_get(PT_BF16);
    cr_assert(at && at->shape == PTX_M_M16N8K16 && at->k == 16);
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3, r, c;
        for (int i = 0; i < 8; i++) {
            pos(at, KIT_A, l, i, &r, &c);
            cr_assert(r == g + 8 * ((i >> 1) & 1) && c == 2 * t + (i & 1) + 8 * (i >> 2), "A lane %d a%d", l, i);
        }
        for (int i = 0; i < 4; i++) {
            pos(at, KIT_B, l, i, &r, &c);
            cr_assert(r == 2 * t + (i & 1) + 8 * (i >> 1) && c == g, "B lane %d b%d", l, i);
            pos(at, KIT_C, l, i, &r, &c);
            cr_assert(r == g + 8 * (i >> 1) && c == 2 * t + i % 2, "C lane %d c%d", l, i);
        }
    }
    /* spot values of the explicit per-lane table */
    int r, c, reg, bit;
    kit_tv_at(at, KIT_A, 5, 2, &r, &c, &reg, &bit);
    cr_assert(r == 9 && c == 2 && reg == 1 && bit == 0);
    kit_tv_at(at, KIT_A, 5, 5, &r, &c, &reg, &bit);
    cr_assert(r == 1 && c == 11 && reg == 2 && bit == 16);
    kit_tv_at(at, KIT_B, 13, 3, &r, &c, &reg, &bit);
    cr_assert(r == 11 && c == 3 && reg == 1 && bit == 16);
    kit_tv_at(at, KIT_C, 31, 3, &r, &c, &reg, &bit);
    cr_assert(r == 15 && c == 7 && reg == 3 && bit == 0);
    cr_assert_eq(at->a.regs, 4);
    cr_assert_eq(at->b.regs, 2);
    cr_assert_eq(at->c.regs, 4);
}

Test(kit, atom_tf32_and_8bit_maps_match_the_isa_figures)
{
    const kit_atom *tf = kit_atom_get(PT_TF32);
    cr_assert(tf && tf->shape == PTX_M_M16N8K8 && tf->tf32);
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3, r, c, reg, bit;
        for (int i = 0; i < 4; i++) {
            kit_tv_at(tf, KIT_A, l, i, &r, &c, &reg, &bit);
            cr_assert(r == g + 8 * (i & 1) && c == t + 4 * (i >> 1) && reg == i && bit == 0, "tf32 A lane %d a%d", l, i);
        }
        for (int i = 0; i < 2; i++) {
            kit_tv_at(tf, KIT_B, l, i, &r, &c, &reg, &bit);
            cr_assert(r == t + 4 * i && c == g && reg == i, "tf32 B lane %d b%d", l, i);
        }
    }
    pt_dtype eight[] = {PT_S8, PT_U8, PT_E4M3, PT_E5M2};
    for (size_t d = 0; d < 4; d++) {
        const kit_atom *at = kit_atom_get(eight[d]);
        cr_assert(at && at->shape == PTX_M_M16N8K32);
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3, r, c, reg, bit;
            for (int i = 0; i < 16; i++) {
                kit_tv_at(at, KIT_A, l, i, &r, &c, &reg, &bit);
                cr_assert(r == g + 8 * ((i >> 2) & 1) && c == 4 * t + (i & 3) + 16 * (i >> 3) && reg == i >> 2 &&
                              bit == 8 * (i & 3),
                          "%s A lane %d a%d", at->name, l, i);
            }
            for (int i = 0; i < 8; i++) {
                kit_tv_at(at, KIT_B, l, i, &r, &c, &reg, &bit);
                cr_assert(r == 4 * t + (i & 3) + 16 * (i >> 2) && c == g, "%s B lane %d b%d", at->name, l, i);
            }
        }
        /* "reg1 = row g+8, cols 4t..4t+3" */
        int r, c, reg, bit;
        kit_tv_at(at, KIT_A, 6, 4, &r, &c, &reg, &bit);
        cr_assert(r == 9 && c == 8 && reg == 1);
    }
}

Test(kit, every_atom_covers_its_tiles_once)
{
    for (int i = 0; kit_atom_at(i); i++) {
        const kit_atom *at = kit_atom_at(i);
        int dims[3][2] = {{at->m, at->k}, {at->k, at->n}, {at->m, at->n}};
        for (int op = 0; op < 3; op++) {
            const kit_tv *tv = kit_atom_tv(at, (kit_operand)op);
            int rows = dims[op][0], cols = dims[op][1];
            static unsigned char seen[64 * 64];
            memset(seen, 0, sizeof seen);
            int n = kit_tv_elems(tv), bits = kit_atom_elem_bits(at, (kit_operand)op);
            cr_assert_eq(n * bits, tv->regs * 32, "%s operand %d: %d elements of %d bits in %d registers",
                         at->name, op, n, bits, tv->regs);
            cr_assert_eq(at->threads * n, rows * cols, "%s operand %d", at->name, op);
            for (int l = 0; l < at->threads; l++)
                for (int v = 0; v < n; v++) {
                    int r, c;
                    pos(at, (kit_operand)op, l, v, &r, &c);
                    cr_assert(r >= 0 && r < rows && c >= 0 && c < cols, "%s operand %d", at->name, op);
                    cr_assert(!seen[r * cols + c], "%s operand %d: (%d,%d) twice", at->name, op, r, c);
                    seen[r * cols + c] = 1;
                }
        }
    }
}
