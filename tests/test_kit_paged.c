/* gen/kit/copy: the paged gather (kit_g2s_paged_init / kit_g2s_issue_paged /
 * kit_g2s_paged_advance) on the emulator. A pool of pages of P rows, a block
 * table that is a permutation (so a wrong entry reads another page's rows),
 * a run-time row bound that ends inside the last tile, and three tiles
 * copied by advancing: every tile byte must be its row's element from the
 * page the table names, or 0 past the bound. The table buffer holds exactly
 * the entries of the rows in bounds, so a lookup past them is an
 * out-of-bounds read the emulator reports. Pages smaller than a thread's
 * row step, equal to it, between it and a tile, equal to and larger than a
 * tile; 32 and 64 threads. */
#include "gen/kit/kit.h"
#include "test_emu_util.h"

enum { TR = 32, RB = 64, NTILE = 3, LDE = RB / 2 }; /* tile rows, row bytes, tiles, u16 per row */

/* ld.global.nc instructions emitted so far (the table lookups). */
static int nc_loads(const ptx_fn *f)
{
    int n = 0;
    for (size_t i = 0; i < f->nbody; i++)
        for (int k = 0; k < f->body[i].nmods; k++)
            n += f->body[i].op == PTX_OP_LD && f->body[i].mods[k] == PTX_M_NC;
    return n;
}

/* share: a second copy of the same rows from a second pool (the first's
 * values + 0x4000) into tiles after the first three, sharing the first
 * copy's table lookups (kit_g2s_issue_paged_shared): it must read the
 * same pages. */
static void gather_case(int P, int T, int rows, bool share)
{
    int nent = (rows + P - 1) / P;               /* table entries in bounds */
    int npages = nent + 3;                        /* spare pages no entry names */
    int64_t pool_n = (int64_t)npages * P * LDE;
    uint16_t *pool = malloc((size_t)pool_n * 2);
    uint32_t *table = malloc((size_t)nent * 4);
    cr_assert(pool && table);
    uint16_t *pool2 = malloc((size_t)pool_n * 2);
    cr_assert(pool2);
    for (int64_t i = 0; i < pool_n; i++) {
        pool[i] = (uint16_t)(i * 7 + 1);
        pool2[i] = (uint16_t)(pool[i] + 0x4000);
    }
    int ncopy = share ? 2 : 1;
    /* distinct pages, reversed and pairwise swapped (none where it would be
     * in order) */
    for (int i = 0; i < nent; i++)
        table[i] = (uint32_t)(npages - 1 - i);
    for (int i = 0; i + 1 < nent; i += 2) {
        uint32_t x = table[i];
        table[i] = table[i + 1];
        table[i + 1] = x;
    }

    kit_layout tile = kit_smem_tile(TR, RB, 0);
    tk t = tk_new("sm_80", "k");
    ptx_reg po = tk_ptr(&t, "o"), ppool = tk_ptr(&t, "pool"), ptab = tk_ptr(&t, "table");
    ptx_reg ppool2 = tk_ptr(&t, "pool2");
    ptx_reg nr = tk_u32(&t, "rows");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X);
    ptx_module_extern_shared(t.m, "sm", 128);
    ptx_reg sm = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(sm), ptx_sym("sm"));
    kit_view v = {ppool, RB, 2, ptx_r(nr), ptx_imm(LDE), true, false};
    kit_view v2 = {ppool2, RB, 2, ptx_r(nr), ptx_imm(LDE), true, false};
    kit_g2s c, c2;
    kit_g2s_init(t.f, &c, &tile, &v, T, tid, 16, TR, 0);
    kit_g2s_init(t.f, &c2, &tile, &v2, T, tid, 16, TR, 0);
    ptx_reg row = R32(&t), row2 = R32(&t);
    E(MOV, NOM, T1(U32), ptx_r(row), ptx_imm(0));
    E(MOV, NOM, T1(U32), ptx_r(row2), ptx_imm(0));
    kit_paged pg = {.table = ptab, .pool = ppool, .page = P, .page_bytes = (int64_t)P * RB, .row = row};
    kit_paged pg2 = {.table = ptab, .pool = ppool2, .page = P, .page_bytes = (int64_t)P * RB, .row = row2};
    kit_g2s_paged_init(&c, &pg, tid);
    kit_g2s_paged_init(&c2, &pg2, tid);
    for (int k = 0; k < NTILE; k++) {
        if (share) {
            ptx_reg pages[64] = {{0}};
            kit_g2s_issue_paged_shared(&c, &pg, sm, k * tile.span, (ptx_reg){0}, pages, c.n);
            int before = nc_loads(t.f);
            cr_assert_gt(before, 0);
            kit_g2s_issue_paged_shared(&c2, &pg2, sm, (NTILE + k) * tile.span, (ptx_reg){0}, pages, c.n);
            cr_assert_eq(nc_loads(t.f), before, "P=%d: the second copy looked pages up again", P);
            kit_g2s_paged_advance(&c2, &pg2);
        } else {
            kit_g2s_issue_paged(&c, &pg, sm, k * tile.span, (ptx_reg){0});
        }
        kit_g2s_paged_advance(&c, &pg);
    }
    E0(CP_ASYNC_WAIT_ALL, NOM, PTX_NOTYPES);
    E(BAR, MODS(MD(SYNC)), PTX_NOTYPES, ptx_imm(0));
    /* thread t stores 16-byte chunks t, t + T, ... of the three tiles */
    int64_t total = ncopy * NTILE * tile.span / 16;
    ptx_reg v4[4] = {R32(&t), R32(&t), R32(&t), R32(&t)};
    for (int64_t q = 0; q * T < total; q++) {
        ptx_reg so = R32(&t);
        E(MAD, MODS(MD(LO)), T1(U32), ptx_r(so), ptx_r(tid), ptx_imm(16), ptx_r(sm));
        ptx_reg oa = tk_addr(&t, po, tid, 16);
        E(LD, MODS(MD(SHARED), MD(V4)), T1(U32), ptx_vecr(t.f, 4, v4), ptx_addr(so, q * T * 16));
        E(ST, MODS(MD(GLOBAL), MD(V4)), T1(U32), ptx_addr(oa, q * T * 16), ptx_vecr(t.f, 4, v4));
    }
    tk_ret(&t);
    cr_assert_eq(ptx_module_error(t.m), 0, "%s", ptx_module_errmsg(t.m));
    tk_load(&t);
    size_t obytes = (size_t)(ncopy * NTILE * tile.span);
    uint16_t *out = malloc(obytes);
    cr_assert(out);
    uint64_t d = tk_buf(&t, NULL, obytes, "o"), x = tk_buf(&t, pool, (size_t)pool_n * 2, "pool");
    uint64_t tb = tk_buf(&t, table, (size_t)nent * 4, "table");
    uint64_t x2 = tk_buf(&t, pool2, (size_t)pool_n * 2, "pool2");
    uint32_t ur = (uint32_t)rows;
    const void *args[] = {&d, &x, &tb, &x2, &ur};
    pt_err e = {0};
    cr_assert_eq(tk_run_dims(&t, 1, (unsigned)T, obytes, args, &e, NULL), 0, "P=%d T=%d: %s", P, T, e.msg);
    tk_get(&t, d, out, obytes);
    for (int q = 0; q < ncopy; q++)
        for (int k = 0; k < NTILE; k++)
            for (int r = 0; r < TR; r++) {
                int vr = k * TR + r;
                for (int el = 0; el < LDE; el++) {
                    uint16_t want = 0;
                    if (vr < rows)
                        want = (q ? pool2 : pool)[((int64_t)table[vr / P] * P + vr % P) * LDE + el];
                    int64_t o = (q * NTILE + k) * tile.span + kit_at(&tile, r, 2 * el);
                    cr_assert_eq(out[o / 2], want, "P=%d T=%d copy %d tile %d row %d el %d: got %u want %u", P, T,
                                 q, k, r, el, out[o / 2], want);
                }
            }
    free(out);
    free(pool);
    free(pool2);
    free(table);
    tk_free(&t);
}

Test(kit_paged, gather_through_a_block_table)
{
    static const int pages[] = {1, 4, 8, 16, 32, 64, 128};
    static const int threads[] = {32, 64, 128};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++)
        for (size_t j = 0; j < sizeof threads / sizeof *threads; j++)
            gather_case(pages[i], threads[j], 75, false); /* tile 2 ends at row 96: 75..95 zero */
    gather_case(16, 64, 96, false);                      /* bound on a tile edge */
    gather_case(8, 32, 1, false);                        /* one row */
}

/* A second copy (V after K) takes the first one's page numbers. */
Test(kit_paged, second_copy_shares_the_lookups)
{
    static const int pages[] = {1, 8, 16, 64};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++)
        gather_case(pages[i], 64, 75, true);
}

/* Setup errors are the module's sticky error, not wrong code: a page that
 * is not a power of two. */
Test(kit_paged, refuses_a_page_that_is_not_a_power_of_two)
{
    kit_layout tile = kit_smem_tile(TR, RB, 0);
    tk t = tk_new("sm_80", "k");
    ptx_reg pp = tk_ptr(&t, "pool"), tab = tk_ptr(&t, "table");
    ptx_reg tid = tk_sreg(&t, PTX_S_TID_X);
    kit_view v = {pp, RB, 2, ptx_imm(TR), ptx_imm(LDE), true, false};
    kit_g2s c;
    kit_g2s_init(t.f, &c, &tile, &v, 64, tid, 16, TR, 0);
    ptx_reg row = R32(&t);
    kit_paged pg = {.table = tab, .pool = pp, .page = 12, .page_bytes = 12 * RB, .row = row};
    kit_g2s_paged_init(&c, &pg, tid);
    cr_assert_neq(ptx_module_error(t.m), 0);
    cr_assert(strstr(ptx_module_errmsg(t.m), "power-of-two page (12)"), "%s", ptx_module_errmsg(t.m));
    tk_free(&t);
}
