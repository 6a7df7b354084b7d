/* Accumulator fragments (gen/kit/frag.h): construction from an atom's C
 * map (gen/kit/atom.h), lane maps, elementwise application, expression values, the
 * C -> A repack of the P*V step and the emit-time bank model. */
#include <string.h>

#include "gen/expr_ptx.h"
#include "gen/kit/build.h"
#include "gen/kit/frag.h"

/* The (row, col) of lane l's first element relative to lane 0's, for the
 * 32 lanes of operand op's map: the thread layout alone (an element's own
 * offset is the same for every lane, and lane 0's thread offset is 0). What
 * kit_tv_at(at, op, l, 0) - kit_tv_at(at, op, 0, 0) gives, for the dims-2
 * maps every atom has; false for another map. */
static bool tv_lanes(const kit_atom *at, kit_operand op, int lrow[32], int lcol[32])
{
    const kit_tv *tv = kit_atom_tv(at, op);
    if (tv->thr.dims != 2 || tv->val.dims != 2)
        return false;
    for (int t = 0; t < 32; t++) {
        int64_t r, c;
        kit_eval_idx2(&tv->thr, t, &r, &c);
        lrow[t] = (int)r;
        lcol[t] = (int)c;
    }
    return true;
}

void kit_frag_shape_mma(kit_frag *fr, const kit_atom *at, int mi, int ni, int *row, int *col)
{
    int nv = kit_tv_elems(&at->c), r0, c0, reg, bit;
    fr->n = nv * mi * ni;
    fr->vec = 2;
    fr->row = row;
    fr->col = col;
    kit_tv_at(at, KIT_C, 0, 0, &r0, &c0, &reg, &bit);
    int vr[64], vc[64]; /* element v's place, the same in every block */
    for (int v = 0; v < nv && v < 64; v++)
        kit_tv_at(at, KIT_C, 0, v, &vr[v], &vc[v], &reg, &bit);
    for (int a = 0; a < mi; a++)
        for (int b = 0; b < ni; b++)
            for (int v = 0; v < nv; v++) {
                int k = (a * ni + b) * nv + v, r, c;
                if (v < 64)
                    r = vr[v], c = vc[v];
                else
                    kit_tv_at(at, KIT_C, 0, v, &r, &c, &reg, &bit);
                row[k] = at->m * a + r - r0;
                col[k] = at->n * b + c - c0;
            }
    fr->grp_rows = at->m * mi;
    fr->grp_cols = at->n * ni;
    kit_frag_lanes(fr, at);
}

void kit_frag_shape_blocks(kit_frag *fr, int rows, int cols, int tile_cols, int *row, int *col)
{
    fr->n = rows * cols;
    fr->vec = cols < 4 ? cols : 4;
    fr->row = row;
    fr->col = col;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            row[i * cols + j] = i;
            col[i * cols + j] = j;
        }
    fr->grp_rows = rows;
    fr->grp_cols = cols;
    kit_frag_lanes_blocks(fr, tile_cols);
}

kit_frag kit_frag_mma_c(ptx_fn *f, const kit_atom *at, int mi, int ni, ptx_reg *regs, ptx_reg wrow,
                        ptx_reg wcol, ptx_reg lane)
{
    pt_arena *ar = f->mod->arena;
    kit_frag fr;
    memset(&fr, 0, sizeof fr);
    int n = kit_tv_elems(&at->c) * mi * ni;
    kit_frag_shape_mma(&fr, at, mi, ni, pt_arena_alloc(ar, (size_t)n * sizeof(int)),
                       pt_arena_alloc(ar, (size_t)n * sizeof(int)));
    fr.r = regs;
    ptx_opd lr = kit_emit_idx(f, &at->c.thr, ptx_r(lane), 0);
    ptx_opd lc = kit_emit_idx(f, &at->c.thr, ptx_r(lane), 1);
    fr.row_base = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(wrow), lr));
    fr.col_base = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(wcol), lc));
    fr.grp_row = wrow;
    fr.grp_col = wcol;
    return fr;
}

void kit_frag_lanes(kit_frag *fr, const kit_atom *at)
{
    if (tv_lanes(at, KIT_C, fr->lrow, fr->lcol)) {
        fr->lanes = true;
        return;
    }
    int r0, c0, reg, bit;
    kit_tv_at(at, KIT_C, 0, 0, &r0, &c0, &reg, &bit);
    for (int l = 0; l < 32; l++) {
        int r, c;
        kit_tv_at(at, KIT_C, l, 0, &r, &c, &reg, &bit);
        fr->lrow[l] = r - r0;
        fr->lcol[l] = c - c0;
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

void kit_frag_to_a(ptx_fn *f, const kit_frag *fr, const kit_atom *at, int mi, int kb, ptx_reg *a)
{
    if ((at->ab != PTX_T_F16 && at->ab != PTX_T_BF16) || kit_atom_elem_bits(at, KIT_A) != 16) {
        pt_errf(&f->mod->err, PT_EINTERNAL, "kit_frag_to_a: atom %s: A is not f16 or bf16", at->name);
        return;
    }
    ptx_type x2 = at->ab == PTX_T_F16 ? PTX_T_F16X2 : PTX_T_BF16X2;
    int nv = kit_tv_elems(&at->a), r0, c0, reg, bit;
    kit_tv_at(at, KIT_A, 0, 0, &r0, &c0, &reg, &bit);
    /* the lane parts must agree: each lane's A elements are its own C
     * registers, so no data moves between lanes */
    int alr[32], alc[32];
    bool fast = tv_lanes(at, KIT_A, alr, alc);
    for (int l = 0; l < 32; l++) {
        int r = alr[l], c = alc[l];
        if (fast)
            r += r0, c += c0;
        else
            kit_tv_at(at, KIT_A, l, 0, &r, &c, &reg, &bit);
        if (!fr->lanes || fr->lrow[l] != r - r0 || fr->lcol[l] != c - c0) {
            pt_errf(&f->mod->err, PT_EINTERNAL,
                    "kit_frag_to_a: the fragment's lanes are not those of %s's A map", at->name);
            return;
        }
    }
    int src[2 * 8];
    for (int v = 0; v < nv && v < 16; v++) {
        int r, c;
        kit_tv_at(at, KIT_A, 0, v, &r, &c, &reg, &bit);
        src[v] = kit_frag_find(fr, at->m * mi + r - r0, at->k * kb + c - c0);
        if (src[v] < 0) {
            pt_errf(&f->mod->err, PT_EINTERNAL,
                    "kit_frag_to_a: no accumulator for A block (%d, %d) of the fragment", mi, kb);
            return;
        }
    }
    /* element 2j is the low half of register j, 2j + 1 the high half:
     * cvt.rn.bf16x2.f32 d, hi, lo puts hi in d[31:16] */
    for (int j = 0; j < nv / 2; j++) {
        a[j] = ptx_reg_new(f, PTX_T_B32);
        ptx_emit(f, PTX_OP_CVT, M1(PTX_M_RN), PTX_TYPES(x2, PTX_T_F32), ptx_r(a[j]),
                 ptx_r(fr->r[src[2 * j + 1]]), ptx_r(fr->r[src[2 * j]]));
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
