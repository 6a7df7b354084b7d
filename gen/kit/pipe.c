/* kit pipe: the cp.async-group implementation (gen/kit/pipe.h). */
#include "gen/kit/pipe.h"

#include "ptx/base.h"

static void end_init(kit_pipe *p, kit_pipe_end *e, bool keep_phase)
{
    e->addr = ptx_reg_new(p->f, PTX_T_B32);
    ptx_emit(p->f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->addr), ptx_r(p->base));
    e->phase = (ptx_reg){0};
    if (keep_phase) {
        e->phase = ptx_reg_new(p->f, PTX_T_B32);
        ptx_emit(p->f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->phase), ptx_imm(0));
    }
}

int kit_pipe_init(ptx_fn *f, kit_pipe *p, kit_pipe_kind kind, int stages, int64_t stage_bytes, ptx_reg base,
                  bool keep_phase)
{
    p->f = f;
    p->kind = kind;
    p->stages = stages;
    p->stage_bytes = stage_bytes;
    p->base = base;
    if (kind != KIT_PIPE_CP_ASYNC)
        return PT_EUNSUPPORTED;
    p->end = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(base), ptx_imm(stages * stage_bytes)));
    end_init(p, &p->prod, keep_phase);
    end_init(p, &p->cons, keep_phase);
    return PT_OK;
}

/* Next stage of one end: add, wrap to stage 0 at the end (and flip the phase). */
static void advance(kit_pipe *p, kit_pipe_end *e)
{
    ptx_fn *f = p->f;
    ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->addr), ptx_r(e->addr), ptx_imm(p->stage_bytes));
    ptx_reg w = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_SETP, PTX_MODS(PTX_M_GE), PTX_T1(PTX_T_U32), ptx_r(w), ptx_r(e->addr), ptx_r(p->end));
    ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->addr), ptx_r(p->base), ptx_r(e->addr), ptx_r(w));
    if (e->phase.id) {
        ptx_reg x = ptx_reg_new(f, PTX_T_B32);
        ptx_emit(f, PTX_OP_XOR, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(x), ptx_r(e->phase), ptx_imm(1));
        ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->phase), ptx_r(x), ptx_r(e->phase), ptx_r(w));
    }
}

ptx_reg kit_pipe_acquire(kit_pipe *p) { return p->prod.addr; }

void kit_pipe_commit(kit_pipe *p)
{
    ptx_emit0(p->f, PTX_OP_CP_ASYNC_COMMIT, PTX_NOMODS, PTX_NOTYPES);
    advance(p, &p->prod);
}

ptx_reg kit_pipe_wait(kit_pipe *p, int pending)
{
    ptx_emit(p->f, PTX_OP_CP_ASYNC_WAIT, PTX_NOMODS, PTX_NOTYPES, ptx_imm(pending < 0 ? p->stages - 2 : pending));
    ptx_emit(p->f, PTX_OP_BAR, PTX_MODS(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    return p->cons.addr;
}

void kit_pipe_release(kit_pipe *p) { advance(p, &p->cons); }

void kit_pipe_drain(kit_pipe *p)
{
    ptx_emit0(p->f, PTX_OP_CP_ASYNC_WAIT_ALL, PTX_NOMODS, PTX_NOTYPES);
    ptx_emit(p->f, PTX_OP_BAR, PTX_MODS(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
}
