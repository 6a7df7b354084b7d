/* gen/kit/reduce on the emulator: builder-made kernels that reduce over
 * quads, warps and warps of a block, and run the online-softmax state
 * (with -inf rows and NaN), against float64 computed here. */
#include "gen/kit/reduce.h"

#include "test_emu_util.h"

enum { NT = 128 };

/* E for helpers that take the kernel as a pointer. */
#define EP(op, mods, types, ...)                                                             \
    cr_assert(ptx_emit(t->f, OP(op), mods, types, __VA_ARGS__), "%s", ptx_module_errmsg(t->m))

/* f32 values: lane i of the block, row j of its values. */
static float vals_in[NT * 8];

static void fill(uint64_t seed, int n)
{
    for (int i = 0; i < n; i++)
        vals_in[i] = (float)((double)(rnd32(&seed) % 20001) / 1000.0 - 10.0);
}

/* Loads nv f32 values per thread (x[tid * nv + j]) into v. */
static ptx_reg load_vals(tk *t, ptx_reg x, ptx_reg tid, int nv, ptx_reg *v)
{
    ptx_reg idx = R32(t);
    EP(MUL, MODS(MD(LO)), T1(U32), ptx_r(idx), ptx_r(tid), ptx_imm(nv));
    ptx_reg a = tk_addr(t, x, idx, 4);
    for (int j = 0; j < nv; j++) {
        v[j] = RF(t);
        EP(LD, MODS(MD(GLOBAL)), T1(F32), ptx_r(v[j]), ptx_addr(a, 4 * j));
    }
    return a;
}

static void store_vals(tk *t, ptx_reg y, ptx_reg tid, int nv, const ptx_reg *v)
{
    ptx_reg idx = R32(t);
    EP(MUL, MODS(MD(LO)), T1(U32), ptx_r(idx), ptx_r(tid), ptx_imm(nv));
    ptx_reg a = tk_addr(t, y, idx, 4);
    for (int j = 0; j < nv; j++)
        EP(ST, MODS(MD(GLOBAL)), T1(F32), ptx_addr(a, 4 * j), ptx_r(v[j]));
}

/* Runs a kernel (x, y) over NT threads with nx inputs and ny outputs. */
static void run_xy(tk *t, const float *x, int nx, float *y, int ny)
{
    tk_load(t);
    uint64_t bx = tk_buf(t, x, (size_t)nx * 4, "x"), by = tk_buf(t, NULL, (size_t)ny * 4, "y");
    const void *args[] = {&by, &bx};
    tk_run(t, 1, NT, args);
    tk_get(t, by, y, (size_t)ny * 4);
}

static double red64(kit_redop op, const float *v, int n, int stride)
{
    double r = op == KIT_RED_SUM ? 0 : op == KIT_RED_MAX ? -INFINITY : INFINITY;
    for (int i = 0; i < n; i++) {
        double x = v[i * stride];
        r = op == KIT_RED_SUM ? r + x : op == KIT_RED_MAX ? fmax(r, x) : fmin(r, x);
    }
    return r;
}

/* Lane-group all-reduce for every width: sum, max and min side by side;
 * every lane of a group holds the same bits, max and min are exact, the
 * sum within n u sum|x| of the float64 sum. */
Test(kit_reduce, lane_groups_all_reduce_for_every_width)
{
    for (int width = 1; width <= 32; width *= 2) {
        tk t = tk_new("sm_80", "lanes");
        ptx_reg y = tk_ptr(&t, "y"), x = tk_ptr(&t, "x"), tid = tk_sreg(&t, PTX_S_TID_X);
        ptx_reg v[1];
        load_vals(&t, x, tid, 1, v);
        ptx_reg acc[3];
        kit_redop ops[3] = {KIT_RED_SUM, KIT_RED_MAX, KIT_RED_MIN};
        for (int i = 0; i < 3; i++) {
            acc[i] = kit_red_init(t.f, ops[i]);
            kit_red_step(t.f, ops[i], acc[i], ptx_r(v[0]), (ptx_reg){0});
        }
        kit_red_lanes(t.f, ops, acc, 3, width);
        store_vals(&t, y, tid, 3, acc);
        tk_ret(&t);
        fill(7 + (uint64_t)width, NT);
        float out[NT * 3];
        run_xy(&t, vals_in, NT, out, NT * 3);
        for (int l = 0; l < NT; l++) {
            int g0 = l / width * width;
            for (int i = 0; i < 3; i++) {
                double ref = red64(ops[i], vals_in + g0, width, 1);
                double abs_sum = 0;
                for (int k = 0; k < width; k++)
                    abs_sum += fabs(vals_in[g0 + k]);
                double tol = i == 0 ? width * 0x1p-24 * abs_sum : 0;
                cr_assert_leq(fabs(out[l * 3 + i] - ref), tol, "width %d lane %d op %d: %g vs %g",
                              width, l, i, out[l * 3 + i], ref);
                cr_assert_eq(bitsof(out[l * 3 + i]), bitsof(out[g0 * 3 + i]),
                             "width %d: lanes %d and %d differ", width, l, g0);
            }
        }
        tk_free(&t);
    }
}

/* Row max and row sum of an m16n8-like fragment: each thread holds 2 rows
 * of 4 values; the rows' other values are in the 3 other lanes of its
 * quad. */
Test(kit_reduce, fragment_rows_over_a_quad)
{
    for (int opi = 0; opi < 2; opi++) {
        kit_redop op = opi ? KIT_RED_MAX : KIT_RED_SUM;
        tk t = tk_new("sm_80", "rows");
        ptx_reg y = tk_ptr(&t, "y"), x = tk_ptr(&t, "x"), tid = tk_sreg(&t, PTX_S_TID_X);
        ptx_reg v[8];
        load_vals(&t, x, tid, 8, v);
        ptx_opd vo[8];
        for (int j = 0; j < 8; j++)
            vo[j] = ptx_r(v[j]);
        ptx_reg out[2];
        kit_red_rows(t.f, op, vo, 2, 4, 4, out);
        store_vals(&t, y, tid, 2, out);
        tk_ret(&t);
        fill(11, NT * 8);
        float got[NT * 2];
        run_xy(&t, vals_in, NT * 8, got, NT * 2);
        for (int l = 0; l < NT; l++)
            for (int r = 0; r < 2; r++) {
                double ref = op == KIT_RED_SUM ? 0 : -INFINITY, abs_sum = 0;
                for (int q = l / 4 * 4; q < l / 4 * 4 + 4; q++)
                    for (int c = 0; c < 4; c++) {
                        double xv = vals_in[q * 8 + r * 4 + c];
                        ref = op == KIT_RED_SUM ? ref + xv : fmax(ref, xv);
                        abs_sum += fabs(xv);
                    }
                double tol = op == KIT_RED_SUM ? 16 * 0x1p-24 * abs_sum : 0;
                cr_assert_leq(fabs(got[l * 2 + r] - ref), tol, "op %d lane %d row %d: %g vs %g",
                              opi, l, r, got[l * 2 + r], ref);
            }
        tk_free(&t);
    }
}

/* Rows owned by groups of 2 warps (2 groups in a 128-thread block):
 * lanes, then shared memory; every thread gets its group's sum and max. */
Test(kit_reduce, warps_of_a_group_combine_through_shared_memory)
{
    tk t = tk_new("sm_80", "warps");
    ptx_reg y = tk_ptr(&t, "y"), x = tk_ptr(&t, "x"), tid = tk_sreg(&t, PTX_S_TID_X);
    ptx_reg v[1];
    load_vals(&t, x, tid, 1, v);
    ptx_reg grp = R32(&t), in_grp = R32(&t);
    E(SHR, NOM, T1(U32), ptx_r(grp), ptx_r(tid), ptx_imm(6));
    E(AND, NOM, T1(B32), ptx_r(in_grp), ptx_r(tid), ptx_imm(63));
    kit_warps g = kit_warps_new(t.f, "red", 2, 2, 2, ptx_r(grp), ptx_r(in_grp));
    kit_redop ops[2] = {KIT_RED_SUM, KIT_RED_MAX};
    ptx_reg acc[2];
    for (int i = 0; i < 2; i++) {
        acc[i] = RF(&t);
        E(MOV, NOM, T1(F32), ptx_r(acc[i]), ptx_r(v[0]));
    }
    kit_red_group(t.f, &g, ops, acc, 2);
    store_vals(&t, y, tid, 2, acc);
    tk_ret(&t);
    fill(13, NT);
    float got[NT * 2];
    run_xy(&t, vals_in, NT, got, NT * 2);
    for (int l = 0; l < NT; l++) {
        int g0 = l / 64 * 64;
        double abs_sum = 0;
        for (int k = 0; k < 64; k++)
            abs_sum += fabs(vals_in[g0 + k]);
        cr_assert_leq(fabs(got[l * 2] - red64(KIT_RED_SUM, vals_in + g0, 64, 1)),
                      64 * 0x1p-24 * abs_sum, "lane %d sum", l);
        cr_assert_eq(got[l * 2 + 1], red64(KIT_RED_MAX, vals_in + g0, 64, 1), "lane %d max", l);
        cr_assert_eq(bitsof(got[l * 2]), bitsof(got[g0 * 2]), "lane %d differs from its group", l);
    }
    tk_free(&t);
}

/* ---- online softmax ---------------------------------------------------- */

/* Rows of 32 values, one row per quad (8 values per lane), in blocks of
 * 4 per lane, as attention runs it: update with the quad's max (width 4),
 * an O-like accumulator o = o * alpha + sum p_j w_j, then the quad reduce
 * of (m, s) and of o. Outputs per lane: m, s, o. */
enum { SM_NV = 8, SM_BLK = 4 };

static void softmax_kernel(tk *t, float k)
{
    ptx_reg y = tk_ptr(t, "y"), x = tk_ptr(t, "x"), tid = tk_sreg(t, PTX_S_TID_X);
    ptx_reg v[SM_NV];
    load_vals(t, x, tid, SM_NV, v);
    kit_softmax st = kit_softmax_new(t->f, k);
    ptx_reg o = kit_red_init(t->f, KIT_RED_SUM);
    for (int b = 0; b < SM_NV / SM_BLK; b++) {
        ptx_opd vo[SM_BLK], p[SM_BLK];
        for (int j = 0; j < SM_BLK; j++)
            vo[j] = ptx_r(v[b * SM_BLK + j]);
        ptx_opd alpha = kit_softmax_update(t->f, &st, vo, NULL, SM_BLK, 4, p);
        ptx_reg no = RF(t);
        EP(MUL, NOM, T1(F32), ptx_r(no), ptx_r(o), alpha);
        for (int j = 0; j < SM_BLK; j++) /* weight w_j = position in the lane + 1 */
            EP(FMA, MODS(MD(RN)), T1(F32), ptx_r(no), p[j], ptx_f32((float)(b * SM_BLK + j + 1)),
              ptx_r(no));
        EP(MOV, NOM, T1(F32), ptx_r(o), ptx_r(no));
    }
    kit_softmax_reduce(t->f, &st, 4, NULL);
    kit_redop sum = KIT_RED_SUM;
    kit_red_lanes(t->f, &sum, &o, 1, 4);
    ptx_reg out[3] = {st.m, st.s, o};
    store_vals(t, y, tid, 3, out);
    tk_ret(t);
}

/* float64: m, s = sum exp(k (x - m)), o = sum exp(k (x - m)) w. */
static void softmax64(const float *row, float k, double *m, double *s, double *o)
{
    *m = -INFINITY;
    for (int i = 0; i < 4 * SM_NV; i++)
        *m = isnan(row[i]) ? *m : fmax(*m, row[i]);
    double ms = *m == -INFINITY ? 0 : *m;
    *s = *o = 0;
    for (int i = 0; i < 4 * SM_NV; i++) {
        double e = exp((double)k * (row[i] - ms));
        *s += e;
        *o += e * (i % SM_NV + 1);
    }
}

static void check_softmax(const float *x, const float *got, float k)
{
    for (int l = 0; l < NT; l++) {
        const float *row = x + l / 4 * 4 * SM_NV;
        double m, s, o;
        softmax64(row, k, &m, &s, &o);
        const float *g = got + l * 3;
        if (isnan(s)) {
            cr_assert(isnan(g[1]) && isnan(g[2]), "lane %d: a NaN row gives s %g o %g", l, g[1],
                      g[2]);
            continue;
        }
        cr_assert_eq(g[0], m, "lane %d: max %g vs %g", l, g[0], m);
        /* ex2.approx: ~2^-22 relative per term, plus the sum's rounding */
        cr_assert_leq(fabs(g[1] - s), 1e-6 * s, "lane %d: s %.9g vs %.9g", l, g[1], s);
        cr_assert_leq(fabs(g[2] - o), 1e-6 * o, "lane %d: o %.9g vs %.9g", l, g[2], o);
    }
}

Test(kit_reduce, online_softmax_on_quad_rows_matches_float64)
{
    for (int ki = 0; ki < 2; ki++) {
        float k = ki ? 0.125f : 1.0f;
        tk t = tk_new("sm_80", "smax");
        softmax_kernel(&t, k);
        fill(17 + (uint64_t)ki, NT * SM_NV);
        float got[NT * 3];
        run_xy(&t, vals_in, NT * SM_NV, got, NT * 3);
        check_softmax(vals_in, got, k);
        tk_free(&t);
    }
}

/* -inf rows: a row masked everywhere ends (-inf, 0) with o = 0 (no NaN
 * from -inf - -inf); a row whose first block is masked in every lane (the
 * first update sees only -inf: alpha = 0 later), one with a single
 * unmasked value, one masked in some lanes only; a NaN makes s and o NaN;
 * the others stay exact. */
Test(kit_reduce, online_softmax_minus_inf_and_nan_rows)
{
    tk t = tk_new("sm_80", "smask");
    softmax_kernel(&t, 1.0f);
    fill(19, NT * SM_NV);
    float *x = vals_in;
    enum { R = 4 * SM_NV }; /* values per row (quad) */
    for (int i = 0; i < R; i++)
        x[0 * R + i] = -INFINITY; /* row 0: all masked */
    for (int q = 0; q < 4; q++)
        for (int j = 0; j < SM_BLK; j++)
            x[1 * R + q * SM_NV + j] = -INFINITY; /* row 1: first block masked */
    for (int i = 0; i < R; i++)
        x[2 * R + i] = i == 29 ? 3.5f : -INFINITY; /* row 2: one value */
    for (int i = 0; i < SM_NV; i++)
        x[3 * R + 2 * SM_NV + i] = -INFINITY; /* row 3: lane 2 masked */
    x[4 * R + 13] = NAN;                      /* row 4: a NaN */
    float got[NT * 3];
    run_xy(&t, x, NT * SM_NV, got, NT * 3);
    for (int l = 0; l < 4; l++) {
        cr_assert_eq(got[l * 3], -INFINITY, "all-masked row: m %g", got[l * 3]);
        cr_assert_eq(bitsof(got[l * 3 + 1]), 0, "all-masked row: s %g", got[l * 3 + 1]);
        cr_assert_eq(bitsof(got[l * 3 + 2]), 0, "all-masked row: o %g", got[l * 3 + 2]);
    }
    for (int l = 8; l < 12; l++) {
        cr_assert_eq(got[l * 3], 3.5f);
        cr_assert_eq(got[l * 3 + 1], 1.0f, "one value: s = exp(0) exactly, got %g", got[l * 3 + 1]);
        cr_assert_eq(got[l * 3 + 2], 6.0f, "its weight, got %g", got[l * 3 + 2]);
    }
    check_softmax(x, got, 1.0f);
    tk_free(&t);
}

/* kit_softmax_update_fma (one fma + ex2 per exponential, flash-attention's
 * form): the same kernel shape and float64 check on random rows for two
 * scales, then the -inf rows (all masked: (-inf, 0), o = 0; first block
 * masked; one value; masked lanes). */
static void softmax_kernel_fma(tk *t, float k)
{
    ptx_reg y = tk_ptr(t, "y"), x = tk_ptr(t, "x"), tid = tk_sreg(t, PTX_S_TID_X);
    ptx_reg v[SM_NV];
    load_vals(t, x, tid, SM_NV, v);
    kit_softmax st = kit_softmax_new(t->f, k);
    ptx_reg o = kit_red_init(t->f, KIT_RED_SUM);
    for (int b = 0; b < SM_NV / SM_BLK; b++) {
        ptx_opd vo[SM_BLK], p[SM_BLK];
        for (int j = 0; j < SM_BLK; j++)
            vo[j] = ptx_r(v[b * SM_BLK + j]);
        ptx_opd alpha = kit_softmax_update_fma(t->f, &st, vo, SM_BLK, 4, p);
        ptx_reg no = RF(t);
        EP(MUL, NOM, T1(F32), ptx_r(no), ptx_r(o), alpha);
        for (int j = 0; j < SM_BLK; j++)
            EP(FMA, MODS(MD(RN)), T1(F32), ptx_r(no), p[j], ptx_f32((float)(b * SM_BLK + j + 1)),
              ptx_r(no));
        EP(MOV, NOM, T1(F32), ptx_r(o), ptx_r(no));
    }
    kit_softmax_reduce(t->f, &st, 4, NULL);
    kit_redop sum = KIT_RED_SUM;
    kit_red_lanes(t->f, &sum, &o, 1, 4);
    ptx_reg out[3] = {st.m, st.s, o};
    store_vals(t, y, tid, 3, out);
    tk_ret(t);
}

Test(kit_reduce, online_softmax_fma_matches_float64_and_keeps_minus_inf_exact)
{
    for (int ki = 0; ki < 2; ki++) {
        float k = ki ? 0.125f : 1.0f;
        tk t = tk_new("sm_80", "smaxf");
        softmax_kernel_fma(&t, k);
        fill(23 + (uint64_t)ki, NT * SM_NV);
        float got[NT * 3];
        run_xy(&t, vals_in, NT * SM_NV, got, NT * 3);
        check_softmax(vals_in, got, k);
        tk_free(&t);
    }
    tk t = tk_new("sm_80", "smaskf");
    softmax_kernel_fma(&t, 1.0f);
    fill(29, NT * SM_NV);
    float *x = vals_in;
    enum { R = 4 * SM_NV };
    for (int i = 0; i < R; i++)
        x[0 * R + i] = -INFINITY;
    for (int q = 0; q < 4; q++)
        for (int j = 0; j < SM_BLK; j++)
            x[1 * R + q * SM_NV + j] = -INFINITY;
    for (int i = 0; i < R; i++)
        x[2 * R + i] = i == 29 ? 3.5f : -INFINITY;
    for (int i = 0; i < SM_NV; i++)
        x[3 * R + 2 * SM_NV + i] = -INFINITY;
    float got[NT * 3];
    run_xy(&t, x, NT * SM_NV, got, NT * 3);
    for (int l = 0; l < 4; l++) {
        cr_assert_eq(got[l * 3], -INFINITY, "all-masked row: m %g", got[l * 3]);
        cr_assert_eq(bitsof(got[l * 3 + 1]), 0, "all-masked row: s %g", got[l * 3 + 1]);
        cr_assert_eq(bitsof(got[l * 3 + 2]), 0, "all-masked row: o %g", got[l * 3 + 2]);
    }
    for (int l = 8; l < 12; l++)
        cr_assert_eq(got[l * 3], 3.5f);
    check_softmax(x, got, 1.0f);
    tk_free(&t);
}

/* Guarded update: invalid values (here NaN and +inf garbage) take no part;
 * merge of two states equals the state of both halves. Each thread holds
 * one row of 8 values (width 1); values 5..7 are invalid in odd lanes. */
Test(kit_reduce, guarded_update_and_merge)
{
    tk t = tk_new("sm_80", "sguard");
    ptx_reg y = tk_ptr(&t, "y"), x = tk_ptr(&t, "x"), tid = tk_sreg(&t, PTX_S_TID_X);
    ptx_reg v[8];
    load_vals(&t, x, tid, 8, v);
    ptx_reg odd = R32(&t), even = RP(&t);
    E(AND, NOM, T1(B32), ptx_r(odd), ptx_r(tid), ptx_imm(1));
    E(SETP, MODS(MD(EQ)), T1(U32), ptx_r(even), ptx_r(odd), ptx_imm(0));
    ptx_opd vo[8];
    ptx_reg guard[8] = {{0}};
    for (int j = 0; j < 8; j++) {
        vo[j] = ptx_r(v[j]);
        if (j >= 5)
            guard[j] = even;
    }
    kit_softmax a = kit_softmax_new(t.f, 1.0f), b = kit_softmax_new(t.f, 1.0f);
    kit_softmax_update(t.f, &a, vo, NULL, 3, 1, NULL);
    kit_softmax_update(t.f, &b, vo + 3, guard + 3, 5, 1, NULL);
    kit_softmax_merge(t.f, &a, ptx_r(b.m), ptx_r(b.s));
    ptx_reg out[2] = {a.m, a.s};
    store_vals(&t, y, tid, 2, out);
    tk_ret(&t);
    fill(23, NT * 8);
    for (int l = 1; l < NT; l += 2) {
        vals_in[l * 8 + 5] = NAN;
        vals_in[l * 8 + 6] = INFINITY;
        vals_in[l * 8 + 7] = 100.0f;
    }
    vals_in[2 * 8 + 0] = vals_in[2 * 8 + 1] = vals_in[2 * 8 + 2] = -INFINITY; /* a masked state */
    float got[NT * 2];
    run_xy(&t, vals_in, NT * 8, got, NT * 2);
    for (int l = 0; l < NT; l++) {
        int n = l % 2 ? 5 : 8;
        double m = -INFINITY, s = 0;
        for (int j = 0; j < n; j++)
            m = fmax(m, vals_in[l * 8 + j]);
        for (int j = 0; j < n; j++)
            s += exp((double)vals_in[l * 8 + j] - m);
        cr_assert_eq(got[l * 2], m, "lane %d: m %g vs %g", l, got[l * 2], m);
        cr_assert_leq(fabs(got[l * 2 + 1] - s), 1e-6 * s, "lane %d: s %.9g vs %.9g", l,
                      got[l * 2 + 1], s);
    }
    tk_free(&t);
}

/* A width the butterfly cannot do is a sticky builder error. */
Test(kit_reduce, bad_width_is_an_error)
{
    tk t = tk_new("sm_80", "bad");
    ptx_reg r = kit_red_init(t.f, KIT_RED_SUM);
    kit_redop op = KIT_RED_SUM;
    kit_red_lanes(t.f, &op, &r, 1, 3);
    cr_assert_neq(ptx_module_finish(t.m), PT_OK);
    cr_assert(strstr(ptx_module_errmsg(t.m), "width 3"), "%s", ptx_module_errmsg(t.m));
    ptx_module_free(t.m);
}
