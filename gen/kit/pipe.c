/* kit pipe: the cp.async-group and mbarrier implementations (gen/kit/pipe.h). */
#include "gen/kit/pipe.h"

#include "gen/kit/build.h"
#include "ptx/base.h"

static void end_init(kit_pipe *p, kit_pipe_end *e, bool keep_phase)
{
    e->addr = ptx_reg_new(p->f, PTX_T_B32);
    ptx_emit(p->f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->addr), ptx_r(p->base));
    e->phase = (ptx_reg){0};
    e->bar = (ptx_reg){0};
    if (p->kind == KIT_PIPE_MBARRIER) {
        e->bar = ptx_reg_new(p->f, PTX_T_B32);
        ptx_emit(p->f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->bar), ptx_r(p->bars));
    }
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

int kit_pipe_init_mbar(ptx_fn *f, kit_pipe *p, int stages, int64_t stage_bytes, ptx_reg base, ptx_reg bars,
                       int empty_count)
{
    p->f = f;
    p->kind = KIT_PIPE_MBARRIER;
    p->stages = stages;
    p->stage_bytes = stage_bytes;
    p->base = base;
    p->bars = bars;
    p->empty_count = empty_count;
    p->arrive_pred = (ptx_reg){0};
    p->peer = (ptx_reg){0};
    p->cluster = false;
    if (stages < 1 || empty_count < 1)
        return PT_EINVAL;
    p->end = kit_reg(f, kit_iop(f, PTX_OP_ADD, ptx_r(base), ptx_imm(stages * stage_bytes)));
    end_init(p, &p->prod, true);
    end_init(p, &p->cons, true);
    end_init(p, &p->rel, true);
    return PT_OK;
}

void kit_pipe_mbar_setup(kit_pipe *p, ptx_reg who)
{
    for (int s = 0; s < p->stages; s++) {
        ptx_guard(ptx_emit(p->f, PTX_OP_MBAR_INIT, M1(PTX_M_SHARED_CTA), B64T, ptx_addr(p->bars, 8 * s),
                           ptx_imm(1)),
                  who, false);
        ptx_guard(ptx_emit(p->f, PTX_OP_MBAR_INIT, M1(PTX_M_SHARED_CTA), B64T,
                           ptx_addr(p->bars, 8 * (p->stages + s)), ptx_imm(p->empty_count)),
                  who, false);
    }
}

/* Spins until the barrier at bar + off has completed the phase of parity
 * par (par ^ flip when flip). */
static void spin(kit_pipe *p, ptx_reg bar, int64_t off, ptx_reg phase, bool flip, bool cluster)
{
    ptx_fn *f = p->f;
    ptx_opd par = ptx_r(phase);
    if (flip)
        par = kit_iop(f, PTX_OP_XOR, ptx_r(phase), ptx_imm(1));
    int top = ptx_label_new(f);
    ptx_label_place(f, top);
    ptx_reg ok = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_MBAR_TRY_WAIT_P,
             cluster ? M3(PTX_M_ACQUIRE, PTX_M_CLUSTER, PTX_M_SHARED_CTA) : M1(PTX_M_SHARED_CTA), B64T, ptx_r(ok),
             ptx_addr(bar, off), par);
    ptx_guard(ptx_emit(f, PTX_OP_BRA, NOM, PTX_NOTYPES, ptx_lbl(top)), ok, true);
}

void kit_pipe_arrive_tx(kit_pipe *p, int64_t bytes)
{
    ptx_emit(p->f, PTX_OP_MBAR_ARRIVE_TX, M1(PTX_M_SHARED_CTA), B64T, ptx_sink(), ptx_addr(p->prod.bar, 0),
             ptx_imm(bytes));
}

ptx_reg kit_pipe_full(const kit_pipe *p) { return p->prod.bar; }

/* Next stage of one end: add, wrap to stage 0 at the end (and flip the phase). */
static void advance(kit_pipe *p, kit_pipe_end *e)
{
    ptx_fn *f = p->f;
    ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->addr), ptx_r(e->addr), ptx_imm(p->stage_bytes));
    ptx_reg w = ptx_reg_new(f, PTX_T_PRED);
    ptx_emit(f, PTX_OP_SETP, PTX_MODS(PTX_M_GE), PTX_T1(PTX_T_U32), ptx_r(w), ptx_r(e->addr), ptx_r(p->end));
    ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->addr), ptx_r(p->base), ptx_r(e->addr), ptx_r(w));
    if (e->bar.id) {
        ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->bar), ptx_r(e->bar), ptx_imm(8));
        ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->bar), ptx_r(p->bars), ptx_r(e->bar),
                 ptx_r(w));
    }
    if (e->phase.id) {
        ptx_reg x = ptx_reg_new(f, PTX_T_B32);
        ptx_emit(f, PTX_OP_XOR, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(x), ptx_r(e->phase), ptx_imm(1));
        ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->phase), ptx_r(x), ptx_r(e->phase), ptx_r(w));
    }
}

ptx_reg kit_pipe_acquire(kit_pipe *p)
{
    if (p->kind == KIT_PIPE_MBARRIER)
        spin(p, p->prod.bar, 8 * p->stages, p->prod.phase, true, p->cluster);
    return p->prod.addr;
}

void kit_pipe_commit(kit_pipe *p)
{
    if (p->kind != KIT_PIPE_MBARRIER)
        ptx_emit0(p->f, PTX_OP_CP_ASYNC_COMMIT, PTX_NOMODS, PTX_NOTYPES);
    advance(p, &p->prod);
}

ptx_reg kit_pipe_wait(kit_pipe *p, int pending)
{
    if (p->kind == KIT_PIPE_MBARRIER) {
        (void)pending;
        spin(p, p->cons.bar, 0, p->cons.phase, false, false);
        ptx_reg a = ptx_reg_new(p->f, PTX_T_B32);
        ptx_emit(p->f, PTX_OP_MOV, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(a), ptx_r(p->cons.addr));
        advance(p, &p->cons);
        return a;
    }
    ptx_emit(p->f, PTX_OP_CP_ASYNC_WAIT, PTX_NOMODS, PTX_NOTYPES, ptx_imm(pending < 0 ? p->stages - 2 : pending));
    ptx_emit(p->f, PTX_OP_BAR, PTX_MODS(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
    return p->cons.addr;
}

void kit_pipe_release(kit_pipe *p)
{
    if (p->kind != KIT_PIPE_MBARRIER) {
        advance(p, &p->cons);
        return;
    }
    ptx_ins *in = ptx_emit(p->f, PTX_OP_MBAR_ARRIVE, M1(PTX_M_SHARED_CTA), B64T, ptx_sink(),
                           ptx_addr(p->rel.bar, 8 * p->stages));
    if (p->arrive_pred.id)
        ptx_guard(in, p->arrive_pred, false);
    if (p->peer.id) { /* the peer's producer multicasts into this stage too */
        ptx_reg eb = kit_reg(p->f, kit_iop(p->f, PTX_OP_ADD, ptx_r(p->rel.bar), ptx_imm(8 * p->stages)));
        ptx_reg rb = ptx_reg_new(p->f, PTX_T_B32);
        ptx_emit(p->f, PTX_OP_MAPA, M1(PTX_M_SHARED_CLUSTER), U32T, ptx_r(rb), ptx_r(eb), ptx_r(p->peer));
        in = ptx_emit(p->f, PTX_OP_MBAR_ARRIVE, M3(PTX_M_RELEASE, PTX_M_CLUSTER, PTX_M_SHARED_CLUSTER), B64T,
                      ptx_sink(), ptx_addr(rb, 0));
        if (p->arrive_pred.id)
            ptx_guard(in, p->arrive_pred, false);
    }
    advance(p, &p->rel);
}

void kit_pipe_skip(kit_pipe *p, kit_pipe_end *e, int64_t n)
{
    ptx_fn *f = p->f;
    int64_t q = n / p->stages, r = n % p->stages;
    if (r) {
        ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->addr), ptx_r(e->addr),
                 ptx_imm(r * p->stage_bytes));
        ptx_reg w = ptx_reg_new(f, PTX_T_PRED);
        ptx_emit(f, PTX_OP_SETP, PTX_MODS(PTX_M_GE), PTX_T1(PTX_T_U32), ptx_r(w), ptx_r(e->addr), ptx_r(p->end));
        ptx_reg back = kit_reg(f, kit_iop(f, PTX_OP_SUB, ptx_r(e->addr), ptx_imm(p->stages * p->stage_bytes)));
        ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->addr), ptx_r(back), ptx_r(e->addr),
                 ptx_r(w));
        if (e->bar.id) {
            ptx_emit(f, PTX_OP_ADD, PTX_NOMODS, PTX_T1(PTX_T_U32), ptx_r(e->bar), ptx_r(e->bar), ptx_imm(8 * r));
            ptx_reg bb = kit_reg(f, kit_iop(f, PTX_OP_SUB, ptx_r(e->bar), ptx_imm(8 * p->stages)));
            ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->bar), ptx_r(bb), ptx_r(e->bar),
                     ptx_r(w));
        }
        if (e->phase.id) {
            ptx_reg x = ptx_reg_new(f, PTX_T_B32);
            ptx_emit(f, PTX_OP_XOR, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(x), ptx_r(e->phase), ptx_imm(1));
            ptx_emit(f, PTX_OP_SELP, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->phase), ptx_r(x), ptx_r(e->phase),
                     ptx_r(w));
        }
    }
    if ((q & 1) && e->phase.id)
        ptx_emit(f, PTX_OP_XOR, PTX_NOMODS, PTX_T1(PTX_T_B32), ptx_r(e->phase), ptx_r(e->phase), ptx_imm(1));
}

void kit_pipe_drain(kit_pipe *p)
{
    if (p->kind == KIT_PIPE_MBARRIER)
        return; /* every wait already saw its stage land */
    ptx_emit0(p->f, PTX_OP_CP_ASYNC_WAIT_ALL, PTX_NOMODS, PTX_NOTYPES);
    ptx_emit(p->f, PTX_OP_BAR, PTX_MODS(PTX_M_SYNC), PTX_NOTYPES, ptx_imm(0));
}
