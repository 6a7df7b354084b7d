/* kit tma: tensor-map parameters and TMA tensor loads (gen/kit/tma.h). */
#include "gen/kit/tma.h"

#include "gen/kit/build.h"
#include "ptx/emu/tmap.h"

int kit_tma_dtype(pt_dtype dt)
{
    switch (dt) {
    case PT_F16: return EMU_TMAP_F16;
    case PT_BF16: return EMU_TMAP_BF16;
    case PT_F32:
    case PT_TF32: return EMU_TMAP_F32;
    case PT_S8:
    case PT_U8:
    case PT_E4M3:
    case PT_E5M2: return EMU_TMAP_U8;
    default: return -1;
    }
}

ptx_reg kit_tma_param(ptx_fn *f, pt_launch *l, const char *name, const pt_tmap *map)
{
    ptx_reg g = ptx_reg_new(f, PTX_T_B64);
    if (l->ntmaps >= PT_MAX_TMAPS || l->nargs >= (int)(sizeof l->args / sizeof l->args[0])) {
        pt_errf(&f->mod->err, PT_EINVAL, "kernel %s: more than %d tensor maps or too many parameters",
                f->name, PT_MAX_TMAPS);
        return g;
    }
    const char *pn = ptx_param_bytes(f, name, 64, EMU_TMAP_BYTES);
    l->tmaps[l->ntmaps] = *map;
    l->args[l->nargs++] = (pt_arg){PT_ARG_TENSORMAP, l->ntmaps, 0, 0};
    l->ntmaps++;
    ptx_reg p = ptx_reg_new(f, PTX_T_B64);
    ptx_emit(f, PTX_OP_MOV, NOM, B64T, ptx_r(p), ptx_sym(pn));
    ptx_emit(f, PTX_OP_CVTA, M1(PTX_M_PARAM), U64T, ptx_r(g), ptx_r(p));
    return g;
}

void kit_tma_prefetch(ptx_fn *f, ptx_reg map)
{
    ptx_emit(f, PTX_OP_PREFETCH, M1(PTX_M_TENSORMAP), PTX_NOTYPES, ptx_addr(map, 0));
}

void kit_tma_load(ptx_fn *f, ptx_reg dst, ptx_reg map, int rank, const ptx_opd *coords, ptx_reg mbar)
{
    static const ptx_mod dims[] = {PTX_M_T1D, PTX_M_T2D, PTX_M_T3D, PTX_M_T4D, PTX_M_T5D};
    if (rank < 1 || rank > 5) {
        pt_errf(&f->mod->err, PT_EINVAL, "TMA load of rank %d (1..5)", rank);
        return;
    }
    ptx_emit(f, PTX_OP_TMA_LD, PTX_MODS(dims[rank - 1], PTX_M_SHARED_CLUSTER, PTX_M_GLOBAL, PTX_M_MBAR_TX),
             PTX_NOTYPES, ptx_addr(dst, 0), ptx_tensor(f, ptx_r(map), rank, coords), ptx_addr(mbar, 0));
}

void kit_tma_load_mc(ptx_fn *f, ptx_reg dst, ptx_reg map, int rank, const ptx_opd *coords, ptx_reg mbar,
                     ptx_reg mask)
{
    static const ptx_mod dims[] = {PTX_M_T1D, PTX_M_T2D, PTX_M_T3D, PTX_M_T4D, PTX_M_T5D};
    if (rank < 1 || rank > 5) {
        pt_errf(&f->mod->err, PT_EINVAL, "TMA load of rank %d (1..5)", rank);
        return;
    }
    ptx_emit(f, PTX_OP_TMA_LD,
             PTX_MODS(dims[rank - 1], PTX_M_SHARED_CLUSTER, PTX_M_GLOBAL, PTX_M_MBAR_TX, PTX_M_MULTICAST),
             PTX_NOTYPES, ptx_addr(dst, 0), ptx_tensor(f, ptx_r(map), rank, coords), ptx_addr(mbar, 0),
             ptx_r(mask));
}

int64_t kit_tma_box_bytes(const pt_tmap *map)
{
    int64_t n = emu_tmap_elem_bytes(map->dtype);
    for (int i = 0; i < map->rank; i++)
        n *= map->box[i];
    return n;
}
