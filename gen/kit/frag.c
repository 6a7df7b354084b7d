/* Accumulator fragments (gen/kit/frag.h): construction from the m16n8 C
 * map, lane maps, elementwise application, expression values, the
 * C -> A repack of the P*V step and the emit-time bank model. */
#include <string.h>

#include "gen/expr_ptx.h"
#include "gen/kit/build.h"
#include "gen/kit/frag.h"

/* m16n8 C map (sm80 ref §5: every m16n8k* shape, f32 and s32): c_i of
 * lane 4g + t at (g + 8 (i/2), 2t + i%2). */
static int c_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
static int c_col(int lane, int i) { return 2 * (lane % 4) + i % 2; }
/* m16n8k16 A map (f16/bf16): half h of a_j of lane 4g + t at
 * (g + 8 (j%2), 2t + h + 8 (j/2)). */
static int a_row(int lane, int j) { return lane / 4 + 8 * (j % 2); }
static int a_col(int lane, int j, int h) { return 2 * (lane % 4) + h + 8 * (j / 2); }

kit_frag kit_frag_mma_c(ptx_fn *f, int mi, int ni, ptx_reg *regs, ptx_reg wrow, ptx_reg wcol,
                        ptx_reg lane)
{
    pt_arena *ar = f->mod->arena;
    kit_frag fr;
    memset(&fr, 0, sizeof fr);
    fr.n = 4 * mi * ni;
    fr.vec = 2;
    fr.r = regs;
    fr.row = pt_arena_alloc(ar, (size_t)fr.n * sizeof(int));
    fr.col = pt_arena_alloc(ar, (size_t)fr.n * sizeof(int));
    for (int a = 0; a < mi; a++)
        for (int b = 0; b < ni; b++)
            for (int i = 0; i < 4; i++) {
                int k = (a * ni + b) * 4 + i;
                fr.row[k] = 16 * a + c_row(0, i);
                fr.col[k] = 8 * b + c_col(0, i);
            }
    ptx_reg g = ptx_reg_new(f, PTX_T_B32), t = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_SHR, NOM, U32T, ptx_r(g), ptx_r(lane), ptx_imm(2));
    ptx_emit(f, PTX_OP_AND, NOM, B32T, ptx_r(t), ptx_r(lane), ptx_imm(3));
    fr.row_base = ptx_reg_new(f, PTX_T_B32);
    fr.col_base = ptx_reg_new(f, PTX_T_B32);
    ptx_emit(f, PTX_OP_ADD, NOM, U32T, ptx_r(fr.row_base), ptx_r(wrow), ptx_r(g));
    ptx_emit(f, PTX_OP_MAD, M1(PTX_M_LO), U32T, ptx_r(fr.col_base), ptx_r(t), ptx_imm(2), ptx_r(wcol));
    fr.grp_row = wrow;
    fr.grp_col = wcol;
    fr.grp_rows = 16 * mi;
    fr.grp_cols = 8 * ni;
    kit_frag_lanes_mma(&fr);
    return fr;
}

void kit_frag_lanes_mma(kit_frag *fr)
{
    for (int l = 0; l < 32; l++) {
        fr->lrow[l] = c_row(l, 0);
        fr->lcol[l] = c_col(l, 0);
    }
    fr->lanes = true;
}

void kit_frag_lanes_blocks(kit_frag *fr, int tile_cols)
{
    int per_row = tile_cols / fr->grp_cols;
    for (int l = 0; l < 32; l++) {
        fr->lrow[l] = (l / per_row) * fr->grp_rows;
        fr->lcol[l] = (l % per_row) * fr->grp_cols;
    }
    fr->lanes = true;
}

int kit_frag_find(const kit_frag *fr, int row, int col)
{
    for (int i = 0; i < fr->n; i++)
        if (fr->row[i] == row && fr->col[i] == col)
            return i;
    return -1;
}

void kit_frag_apply(ptx_fn *f, kit_frag *fr, kit_frag_fn fn, void *arg)
{
    (void)f;
    for (int i = 0; i < fr->n; i++)
        fr->r[i] = fn(arg, fr, i, fr->r[i]);
}

static bool is_one(ptx_opd o)
{
    return (o.kind == PTX_O_F32 && o.u.f32 == 1.0f) || (o.kind == PTX_O_F64 && o.u.f64 == 1.0);
}

ptx_opd kit_expr_value(ptx_fn *f, const ex_prog *p, const ptx_opd *in, ptx_opd *val)
{
    for (int i = 0; i < p->nnodes; i++) {
        const ex_node *n = &p->nodes[i];
        if (n->kind == EX_INPUT) {
            val[i] = in[n->input];
            continue;
        }
        ptx_opd args[3];
        for (int k = 0; k < n->nargs; k++)
            args[k] = val[n->arg[k]];
        if (n->kind == EX_MUL && (is_one(args[0]) || is_one(args[1]))) {
            val[i] = is_one(args[0]) ? args[1] : args[0];
            continue;
        }
        val[i] = ex_ptx_node(f, n, args);
    }
    return val[p->outputs[0].node];
}

void kit_frag_to_a(ptx_fn *f, const kit_frag *fr, int mi, int kb, ptx_type ab, ptx_reg a[4])
{
    ptx_type x2 = ab == PTX_T_F16 ? PTX_T_F16X2 : PTX_T_BF16X2;
    if (ab != PTX_T_F16 && ab != PTX_T_BF16) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "kit_frag_to_a: A type %s is not f16 or bf16",
                ptx_type_name(ab));
        return;
    }
    /* the lane parts must agree: lane l at (g, 2t) in both maps */
    for (int l = 0; fr->lanes && l < 32; l++)
        if (fr->lrow[l] != a_row(l, 0) - a_row(0, 0) || fr->lcol[l] != a_col(l, 0, 0) - a_col(0, 0, 0)) {
            pt_errf(&f->mod->err, PT_EINTERNAL, "kit_frag_to_a: the fragment is not an m16n8 C map");
            return;
        }
    for (int j = 0; j < 4; j++) {
        int lo = kit_frag_find(fr, 16 * mi + a_row(0, j), 16 * kb + a_col(0, j, 0));
        int hi = kit_frag_find(fr, 16 * mi + a_row(0, j), 16 * kb + a_col(0, j, 1));
        if (lo < 0 || hi < 0) {
            pt_errf(&f->mod->err, PT_EINTERNAL,
                    "kit_frag_to_a: no accumulator for A block (%d, %d) of the fragment", mi, kb);
            return;
        }
        a[j] = ptx_reg_new(f, PTX_T_B32);
        /* cvt.rn.bf16x2.f32 d, hi, lo: d[31:16] = hi, d[15:0] = lo */
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(x2, PTX_T_F32), ptx_r(a[j]),
                 ptx_r(fr->r[hi]), ptx_r(fr->r[lo]));
    }
}

int kit_smem_wavefronts(const int64_t addr[32], int bytes)
{
    int ub = bytes >= 16 ? 16 : bytes >= 8 ? 8 : 4;
    int64_t any = 0;
    for (int l = 0; l < 32; l++)
        if (addr[l] >= 0)
            any |= addr[l];
    if (ub > 4 && (any & (ub - 1)))
        ub = 4;
    int per = bytes <= 4 ? 32 : bytes >= 16 ? 8 : 16, ngroups = 128 / ub, wf = 0;
    for (int p = 0; p < 32; p += per) {
        int64_t list[32][32];
        int cnt[32] = {0}, worst = 0;
        for (int l = p; l < p + per; l++) {
            if (addr[l] < 0)
                continue;
            int64_t u = addr[l] / ub;
            int g = (int)(u & (ngroups - 1)), i = 0;
            while (i < cnt[g] && list[g][i] != u)
                i++;
            if (i == cnt[g]) {
                list[g][cnt[g]++] = u;
                if (cnt[g] > worst)
                    worst = cnt[g];
            }
        }
        wf += worst;
    }
    return wf;
}
