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

/* ---- copies ---- */

Test(kit, ldmatrix_lanes_match_the_isa_address_schemes)
{
    /* ptx-sm80.md section 4, "Address schemes that feed mma.m16n8k16":
     * A 16x16 row-major (K contiguous), .x4: lane l supplies &A[l%16][(l/16)*8];
     * B stored k-major B[k][n], two n8 tiles, .x4.trans: &B[l%16][(l/16)*8] */
    const kit_atom *at = kit_atom_get(PT_F16);
    kit_layout a = kit_ldsm_atom_lanes(at, KIT_A, true);
    kit_layout b = kit_ldsm_atom_lanes(at, KIT_B, false);
    /* B stored n-major Bt[n][k] (K contiguous), .x4 over two n8 tiles:
     * matrices (n 0-7, k 0-7) (n 0-7, k 8-15) (n 8-15, k 0-7) (n 8-15, k 8-15) */
    kit_layout bt = kit_ldsm_atom_lanes(at, KIT_B, true);
    for (int l = 0; l < 32; l++) {
        cr_assert(kit_eval_idx(&a, l, 0) == l % 16 && kit_eval_idx(&a, l, 1) == (l / 16) * 16, "A lane %d", l);
        cr_assert(kit_eval_idx(&b, l, 0) == l % 16 && kit_eval_idx(&b, l, 1) == (l / 16) * 16, "B lane %d", l);
        int j = l / 8;
        cr_assert(kit_eval_idx(&bt, l, 0) == 8 * (j / 2) + l % 8 && kit_eval_idx(&bt, l, 1) == 16 * (j % 2),
                  "Bt lane %d", l);
    }
    /* A stored k-major (m contiguous), .x4.trans: matrix j = register j of
     * the fragment = (m 8(j%2).., k 8(j/2)..) -> tile rows k, bytes m */
    kit_layout at_ = kit_ldsm_atom_lanes(at, KIT_A, false);
    for (int l = 0; l < 32; l++) {
        int j = l / 8;
        cr_assert(kit_eval_idx(&at_, l, 0) == 8 * (j / 2) + l % 8 && kit_eval_idx(&at_, l, 1) == 16 * (j % 2),
                  "At lane %d", l);
    }
}

Test(kit, ldsm_accesses_share_registers_where_the_swizzle_allows)
{
    tk t = tk_new("sm_80", "k");
    ptx_reg lane = tk_sreg(&t, PTX_S_LANEID);
    kit_layout tile = kit_smem_tile(64, 128, 0);
    kit_layout lanes = kit_ldsm_atom_lanes(kit_atom_get(PT_BF16), KIT_A, true);
    /* 4 row blocks 16 apart x 4 k-steps 32 bytes apart: rows share (16 rows
     * keep the pattern), k-steps do not (they move the XORed chunk bits) */
    int r[16], b[16];
    for (int ks = 0; ks < 4; ks++)
        for (int mi = 0; mi < 4; mi++) {
            r[ks * 4 + mi] = 16 * mi;
            b[ks * 4 + mi] = 32 * ks;
        }
    kit_ldsm s;
    kit_ldsm_init(t.f, &s, &tile, &lanes, lane, ptx_imm(0), ptx_imm(0), 16, r, b);
    int distinct = 0;
    for (int i = 0; i < 16; i++) {
        bool seen = false;
        for (int k = 0; k < i; k++)
            seen |= s.reg[k].id == s.reg[i].id;
        distinct += !seen;
        if (i % 4)
            cr_assert_eq(s.reg[i].id, s.reg[i - i % 4].id, "access %d", i);
        cr_assert_eq(s.imm[i], (i % 4) * 16 * 128, "access %d", i);
    }
    cr_assert_eq(distinct, 4);
    cr_assert(kit_shift_ok(&tile, 8, 0) && kit_shift_ok(&tile, 0, 128) && !kit_shift_ok(&tile, 0, 32) &&
              !kit_shift_ok(&tile, 4, 0));
    kit_layout pad = kit_smem_tile(16, 64, 16);
    cr_assert(kit_shift_ok(&pad, 3, 4));
    tk_free(&t);
}

/* A view with run-time bounds copied into a swizzled tile by kit_g2s (64
 * threads, 16-byte cp.async with zero fill), then the tile advanced by 16
 * columns and copied again: every tile byte is the input element or 0
 * past the bounds. */
Test(kit, g2s_copies_a_bounded_view_with_zero_fill)
{
    enum { ROWS = 32, LD = 40, T = 64 };
    int rows = 29, cols = 27; /* in bounds, run-time */
    static uint16_t in[ROWS * LD];
    for (int i = 0; i < ROWS * LD; i++)
        in[i] = (uint16_t)(i + 1);
    kit_layout tile = kit_smem_tile(ROWS, 64, 0);
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "o"), pi = tk_ptr(&t, "x");
    ptx_reg nr = tk_u32(&t, "rows"), nc = tk_u32(&t, "cols");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X);
    ptx_module_extern_shared(t.m, "sm", 128);
    ptx_reg sm = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(sm), ptx_sym("sm"));
    kit_view v = {pi, LD * 2, 2, ptx_r(nr), ptx_r(nc), true, true};
    kit_g2s c;
    kit_g2s_init(t.f, &c, &tile, &v, T, tid, 16, 0, 16);
    c.l2_128 = true;
    kit_g2s_issue(&c, sm, 0, (ptx_reg){0});
    kit_g2s_advance(&c);
    kit_g2s_issue(&c, sm, tile.span, (ptx_reg){0});
    E0(CP_ASYNC_WAIT_ALL, NOM, PTX_NOTYPES);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    /* thread t stores bytes [64t, 64t + 64) of the two tiles */
    ptx_reg so = R32(&t), v4[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    E(MAD, MODS(MD(LO)), T1(U32), ptx_r(so), ptx_r(tid), ptx_imm(64), ptx_r(sm));
    ptx_reg oa = tk_addr(&t, po, tid, 64);
    for (int q = 0; q < 4; q++) {
        E(LD, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v4), ptx_addr(so, 16 * q));
        E(ST, MODS(MD(GLOBAL), MD(V4)), T1(U32), ptx_addr(oa, 16 * q), ptx_vecr(t.f, 4, v4));
    }
    tk_ret(&t);
    tk_load(&t);
    static uint16_t out[2 * ROWS * 32];
    uint64_t d = tk_buf(&t, NULL, sizeof out, "o"), x = tk_buf(&t, in, sizeof in, "x");
    uint32_t ur = (uint32_t)rows, uc = (uint32_t)cols;
    const void *args[] = {&d, &x, &ur, &uc};
    pt_err e = {0};
    cr_assert_eq(tk_run_dims(&t, 1, T, 2 * (size_t)tile.span, args, &e, NULL), 0, "%s", e.msg);
    tk_get(&t, d, out, sizeof out);
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < ROWS; r++)
            for (int el = 0; el < 32; el++) {
                int col = 16 * k + el;
                uint16_t want = r < rows && col < cols ? in[r * LD + col] : 0;
                int64_t o = k * tile.span + kit_at(&tile, r, 2 * el);
                cr_assert_eq(out[o / 2], want, "tile %d (%d,%d): got %u want %u", k, r, col, out[o / 2], want);
            }
    tk_free(&t);
}

/* ---- pipes ---- */

/* 64 threads stream NT tiles of 1 KB through a 3-stage kit_pipe: thread t
 * copies chunk t of each tile (cp.async 16 bytes) and reads chunk
 * (t + 1) % 64, written by another thread, so each read relies on the
 * pipe's wait (cp.async.wait_group + bar.sync) and each refill on the
 * release ordering; the emulator's detectors (cp.async read before wait,
 * shared-memory race) watch every access. The sums must match. */
Test(kit, cp_async_pipe_streams_tiles_through_the_stages)
{
    enum { T = 64, NT = 7, S = 3, TB = 1024 };
    static uint32_t in[NT * TB / 4];
    for (int i = 0; i < NT * TB / 4; i++)
        in[i] = (uint32_t)(i * 7 + 3);
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "o"), pi = tk_ptr(&t, "x");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X);
    ptx_module_extern_shared(t.m, "sm", 128);
    ptx_reg sm = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(sm), ptx_sym("sm"));
    kit_pipe p;
    cr_assert_eq(kit_pipe_init(t.f, &p, KIT_PIPE_CP_ASYNC, S, TB, sm, true), PT_OK);
    ptx_reg src = tk_addr(&t, pi, tid, 16), so = R32(&t), ro = R32(&t), nx = R32(&t), acc = R32(&t);
    E(SHL, NOM, T1(B32), ptx_r(so), ptx_r(tid), ptx_imm(4));
    E(ADD, NOM, T1(U32), ptx_r(nx), ptx_r(tid), ptx_imm(1));
    E(AND, NOM, T1(B32), ptx_r(nx), ptx_r(nx), ptx_imm(T - 1));
    E(SHL, NOM, T1(B32), ptx_r(ro), ptx_r(nx), ptx_imm(4));
    E(MOV, NOM, T1(U32), ptx_r(acc), ptx_imm(0));
    /* the GEMM's schedule: tiles 0..S-1 into the stages; per tile k: read
     * it, release its stage, wait for tile k+1 (the barrier also orders
     * every thread's read of stage k before the refill), refill stage k
     * with tile k+S, commit (an empty group past the end) */
    for (int k = 0; k < S; k++) {
        ptx_reg st = kit_pipe_acquire(&p), d = R32(&t);
        E(ADD, NOM, T1(U32), ptx_r(d), ptx_r(st), ptx_r(so));
        E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(d, 0),
          ptx_addr(src, (int64_t)k * TB), ptx_imm(16));
        kit_pipe_commit(&p);
    }
    kit_pipe_wait(&p, S - 1);
    for (int k = 0; k < NT; k++) {
        ptx_reg st = p.cons.addr, a = R32(&t), w = R32(&t);
        E(ADD, NOM, T1(U32), ptx_r(a), ptx_r(st), ptx_r(ro));
        E(LD, MODS(MD(SHARED)), T1(U32), ptx_r(w), ptx_addr(a, 0));
        E(ADD, NOM, T1(U32), ptx_r(acc), ptx_r(acc), ptx_r(w));
        kit_pipe_release(&p);
        kit_pipe_wait(&p, -1);
        if (k + S < NT) {
            ptx_reg d = R32(&t);
            E(ADD, NOM, T1(U32), ptx_r(d), ptx_r(kit_pipe_acquire(&p)), ptx_r(so));
            E(CP_ASYNC, MODS(MD(CG), MD(SHARED), MD(GLOBAL)), PTX_NOTYPES, ptx_addr(d, 0),
              ptx_addr(src, (int64_t)(k + S) * TB), ptx_imm(16));
        }
        kit_pipe_commit(&p);
    }
    kit_pipe_drain(&p);
    ptx_reg oa = tk_addr(&t, po, tid, 4);
    E(ST, MODS(MD(GLOBAL)), T1(U32), ptx_addr(oa, 0), ptx_r(acc));
    tk_ret(&t);
    tk_load(&t);
    uint32_t out[T];
    uint64_t d = tk_buf(&t, NULL, sizeof out, "o"), x = tk_buf(&t, in, sizeof in, "x");
    const void *args[] = {&d, &x};
    pt_err e = {0};
    emu_stats st;
    memset(&st, 0, sizeof st);
    cr_assert_eq(tk_run_dims(&t, 1, T, S * TB, args, &e, &st), 0, "%s", e.msg);
    cr_assert_eq(emu_nreports(t.emu), 0, "detector reports");
    tk_get(&t, d, out, sizeof out);
    for (int th = 0; th < T; th++) {
        uint32_t want = 0;
        int c = (th + 1) % T;
        for (int k = 0; k < NT; k++)
            want += in[(k * TB + c * 16) / 4];
        cr_assert_eq(out[th], want, "thread %d: %u, want %u", th, out[th], want);
    }
    /* the phase flips once per wrap: NT releases over 3 stages */
    cr_assert(p.cons.phase.id);
    tk_free(&t);
}
