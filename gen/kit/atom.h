/* kit atom: one table row per MMA instruction (and the FMA of the SIMT
 * path), holding its A, B and C thread-value maps as data.
 *
 * A thread-value map says where each register element of each thread
 * lives in the operand tile: element v of thread l is at
 *   (row, col) = thr(l) + val(v),
 * two 2-D layouts (gen/kit/layout.h) over the atom's threads and its
 * per-thread elements. A is M x K (row m, col k), B is K x N (row k,
 * col n), C/D is M x N. Elements pack into 32-bit registers low to high:
 * with b-bit elements, element v is register v / (32 / b) at bit
 * b * (v % (32 / b)) (tf32 and 32-bit accumulators: one per register).
 * The maps are the PTX ISA's fragment figures (shared/ref/ptx-sm80.md
 * section 5); the emulator tests (tests/test_emu_tensor.c) pack their
 * fragments with them, and tests/test_kit.c checks them against the
 * figures. A wgmma m64nNk* row will have 128 threads (warp = a thr mode). */
#ifndef GEN_KIT_ATOM_H
#define GEN_KIT_ATOM_H

#include "gen/dtype.h"
#include "gen/kit/layout.h"
#include "ptx/ir.h"

typedef enum kit_atom_kind {
    KIT_ATOM_FMA,      /* one fma.rn.f32 per thread and element (SIMT) */
    KIT_ATOM_MMA_SYNC, /* mma.sync.aligned.<shape>.row.col, one warp */
    KIT_ATOM_WGMMA,    /* wgmma.mma_async m64nNk*, one warpgroup (kit_wgmma_atom) */
} kit_atom_kind;

typedef struct kit_tv {
    kit_layout thr, val; /* dims 2: thread -> (row, col), element -> (row, col) */
    int regs;            /* 32-bit registers per thread */
} kit_tv;

typedef struct kit_atom {
    const char *name;       /* "m16n8k16.bf16.f32" */
    kit_atom_kind kind;
    pt_dtype dt;            /* input storage dtype it serves (PT_TF32: f32 storage) */
    int m, n, k;            /* atom shape */
    int threads;            /* 32 for mma.sync */
    ptx_mod shape;          /* PTX_M_M16N8K16 ... (FMA: 0) */
    ptx_type ab, acc;       /* A/B and C/D type suffixes */
    int es;                 /* bytes per input element in memory */
    bool simt;              /* KIT_ATOM_FMA */
    bool tf32;              /* operands rounded with cvt.rna.tf32.f32 in registers */
    bool int_acc;           /* s32 accumulators */
    int kstep;              /* k elements per instruction (= k) */
    int min_sm;
    kit_tv a, b, c;
} kit_atom;

/* The atom the GEMM uses for input dtype dt (the widest k of that dtype);
 * NULL: no atom takes dt. */
const kit_atom *kit_atom_get(pt_dtype dt);
/* The row of an MMA shape and A/B and C types; NULL: none. */
const kit_atom *kit_atom_find(ptx_mod shape, ptx_type ab, ptx_type acc);
/* Row i of the table (NULL past the end), for tests and listings. */
const kit_atom *kit_atom_at(int i);

typedef enum kit_operand { KIT_A, KIT_B, KIT_C } kit_operand;

static inline const kit_tv *kit_atom_tv(const kit_atom *at, kit_operand op)
{
    return op == KIT_A ? &at->a : op == KIT_B ? &at->b : &at->c;
}
/* Elements per thread of an operand. */
int kit_tv_elems(const kit_tv *tv);
/* Position of element v of thread l: (row, col), and its register and bit. */
void kit_tv_at(const kit_atom *at, kit_operand op, int l, int v, int *row, int *col, int *reg, int *bit);
/* Bits of one element of an operand (tf32 and 32-bit types: 32). */
int kit_atom_elem_bits(const kit_atom *at, kit_operand op);

/* ---- wgmma (sm_90a) ----
 * The atom of wgmma.mma_async.m64n{n}k{k} for A/B type ab and accumulator
 * acc: 128 threads, thread t = 32 w + l with thr modes (l % 4, l / 4, w);
 * C/D (shared/ref/ptx-sm90.md 1.3): register i of thread t holds
 * (16 w + l/4 + 8 ((i >> 1) & 1), 8 (i >> 2) + 2 (l % 4) + (i & 1)), N/2
 * registers (f16: elements 2j, 2j+1 packed in register j, N/4 registers);
 * A is the RS form's register fragment (ref 1.4; the SS form reads A
 * through a descriptor); B has no thread map (regs 0): it is always read
 * from shared memory. Fills *out and returns true, false when (ab, acc, n)
 * is not a wgmma shape (ref 1.2: bf16 and tf32 accumulate in f32 only;
 * 8-bit integers take N 8, 16, 24 and multiples of 16). */
bool kit_wgmma_atom(ptx_type ab, ptx_type acc, int n, kit_atom *out);

/* The 64-bit shared-memory matrix descriptor (ref 2.1) of a tile at shared
 * address addr with byte offsets lbo and sbo and swizzle span
 * swizzle_bytes (0: none, 32, 64 or 128); base offset 0. */
uint64_t kit_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes);

/* The descriptor of a tile whose shared address is the u32 register addr
 * (run time): kit_wgmma_desc's fields with the start address taken from
 * addr (a fresh b64 register). */
ptx_reg kit_wgmma_desc_emit(ptx_fn *f, ptx_reg addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes);

/* wgmma.mma_async.sync.aligned.m64n{n}k{k} of atom `at` (kit_wgmma_atom),
 * both operands through descriptors (SS): d the accumulator vector
 * (at->c.regs registers), scale_d a predicate register or the immediate
 * 0/1 (false: D = A B); trans_a/trans_b: MN-major operands (16-bit types
 * only; tf32, 8-bit and integer operands are K-major and take no
 * immediates, nor scales for integers). */
void kit_wgmma_ss(ptx_fn *f, const kit_atom *at, ptx_opd d, ptx_reg desc_a, ptx_reg desc_b, ptx_opd scale_d,
                  bool trans_a, bool trans_b);

#endif
