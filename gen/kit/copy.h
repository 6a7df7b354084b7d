/* kit copy: tensor views and copy steps.
 *
 * A view is a 2-D region of a tensor in global memory: a run-time base
 * (a u64 register: per batch, per head or per page it is just another
 * register), a row pitch, run-time or immediate bounds and an element
 * size. Copy steps move tiles between a view and a shared-memory layout
 * (gen/kit/layout.h):
 *   global -> shared  kit_g2s: cp.async of 16, 8 or 4 bytes with zero-fill
 *                     past the bounds (src-size), .L2::128B prefetch, or
 *                     element loads for rows that are only 1-2 byte
 *                     aligned; the tile is cut among the CTA's threads once
 *                     (kit_g2s_init) and every later tile is one issue with
 *                     immediate offsets plus one pointer advance;
 *   shared -> regs    kit_ldsm: ldmatrix .x1/.x2/.x4 (.trans) lane addresses
 *                     of a tile, one register per distinct swizzle pattern
 *                     and immediates for the rest.
 * (registers -> global stores live in gen/kit/io.c.) */
#ifndef GEN_KIT_COPY_H
#define GEN_KIT_COPY_H

#include "gen/kit/atom.h"
#include "gen/kit/layout.h"

typedef struct kit_view {
    ptx_reg base;     /* u64 global address of element (0, 0) of the region */
    int64_t ld_bytes; /* bytes from one row to the next */
    int es;           /* bytes per element */
    ptx_opd rows;     /* rows of the region in bounds (s32 register or immediate) */
    ptx_opd cols;     /* elements of a row in bounds */
    bool row_edge;    /* rows may end inside a tile (else every row is in bounds) */
    bool col_edge;    /* cols may end inside a tile */
} kit_view;

/* A global -> shared tile copy: which pieces of a tile of tile->rows rows
 * of tile->row_bytes bytes each of T threads copies, their shared offsets
 * and the source pointer and bounds, advanced from tile to tile. */
typedef struct kit_g2s {
    ptx_fn *f;
    const kit_layout *tile;
    kit_view v;
    int cw;            /* bytes per copy */
    int n;             /* copies per thread */
    bool l2_128;       /* .L2::128B on cp.async */
    int *rowimm, *pcimm;
    ptx_reg *soff;     /* per copy: shared offset register inside the tile ... */
    int *simm;         /* ... plus this immediate */
    ptx_reg *guard;    /* per copy: thread has this piece (id 0: always) */
    ptx_reg *rowok;    /* per copy: row in bounds (static bounds) */
    ptx_reg *csize;    /* per copy: in-bound bytes (static col bounds; id 0: cw) */
    ptx_reg gp;        /* u64 source of copy 0 of the next tile */
    ptx_reg rrem;      /* rows left from this thread's row 0 (advancing row bound) */
    ptx_reg crem;      /* elements left from this thread's column 0 (advancing col bound) */
    bool radv, cadv;   /* the bound advances with the tile */
    int64_t drow, dcol; /* advance per tile: rows and elements */
} kit_g2s;

/* Cuts the tile among T threads (tid: u32 register), cw bytes a piece.
 * v's base must point at the tile's element (0, 0) of the first tile;
 * each kit_g2s_advance moves the tile by (drow, dcol). */
void kit_g2s_init(ptx_fn *f, kit_g2s *c, const kit_layout *tile, const kit_view *v, int T,
                  ptx_reg tid, int cw, int64_t drow, int64_t dcol);
/* Issues this thread's copies of the current tile into shared memory at
 * dst (u32 register holding a shared address) + dimm; pred (id 0: none):
 * issue only where true (uniform). */
void kit_g2s_issue(kit_g2s *c, ptx_reg dst, int64_t dimm, ptx_reg pred);
/* Moves the source and the bounds to the next tile. */
void kit_g2s_advance(kit_g2s *c);

/* ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 of one warp.
 * lanes: the 2-D lane layout giving lane l's (row, byte) inside the tile
 * relative to the access origin; the accesses: origins (row0 + r[i],
 * byte0 + b[i]), r/b immediates, row0/byte0 registers or immediates. */
typedef struct kit_ldsm {
    int n;
    ptx_reg *reg; /* per access: register ... */
    int64_t *imm; /* ... plus immediate */
} kit_ldsm;

void kit_ldsm_init(ptx_fn *f, kit_ldsm *s, const kit_layout *tile, const kit_layout *lanes,
                   ptx_reg lane, ptx_opd row0, ptx_opd byte0, int n, const int *r, const int *b);
/* The lane layout of an .xN ldmatrix whose matrices j = 0..N-1 sit at
 * (rows j_r * 8, bytes j_b * 16) for the bits of j: lane l supplies row l % 8
 * of matrix l / 8. jr[k], jb[k]: the (row, byte) step of bit k of j. */
kit_layout kit_ldsm_lanes(int num, const int *jr, const int *jb);
/* An MMA operand in a shared tile. Atom coordinates (row, col) of A
 * (m, k) or B (k, n) become tile coordinates (row, byte): a K-major tile
 * (kmajor) has rows m|n and k along the row, an MN-major one rows k. */
void kit_atom_to_tile(kit_operand w, bool kmajor, int es, int64_t r, int64_t c, int64_t *tr, int64_t *tb);
/* A 2-D (row, col) layout of an atom map (e.g. its thr part) in tile
 * coordinates. */
kit_layout kit_tv_to_tile(const kit_layout *l, kit_operand w, bool kmajor, int es);
/* The lanes of the ldmatrix.x4 that loads operand w of atom at from a tile
 * (.trans when !kmajor): matrix j is register j % regs of the atom
 * j / regs atoms along m|n (B: two n8 atoms), and its origin is where
 * lane 0 holds that register's first element. */
kit_layout kit_ldsm_atom_lanes(const kit_atom *at, kit_operand w, bool kmajor);

/* The shared addresses of the accesses for a tile at stage (a register
 * with the tile's shared address): one add per distinct register, into
 * out[0..n-1] (accesses sharing a register share the result; an out[i]
 * with an id is written in place, e.g. a register carried around a loop,
 * id 0 gets a new register). */
void kit_ldsm_at(ptx_fn *f, const kit_ldsm *s, ptx_reg stage, ptx_reg *out);
/* Emits access i: ldmatrix into the vector dst (num registers) from
 * [at[i] + imm[i] + simm]; pred (id 0: none) a uniform guard. */
void kit_ldsm_emit(ptx_fn *f, const kit_ldsm *s, int i, int num, bool trans, ptx_opd dst, const ptx_reg *at,
                   int64_t simm, ptx_reg pred);

/* Paged rows (a gather; a serving engine's KV cache): row r of the view
 * lives on page table[r / page] of the pool, at row r % page of that page.
 * A kit_g2s cut as usual (kit_g2s_init on a view whose base is the pool,
 * ld_bytes the row pitch inside a page, rows the rows in bounds) issues its
 * pieces from the pages instead of from one pointer: each distinct page of
 * a thread's pieces is one ld.global.nc.u32 of its table entry (skipped,
 * page 0, where none of that thread's rows on it are in bounds; the
 * zero-filled pieces then point into page 0, never past the pool), then
 * one 64-bit multiply-add; pieces on one page share it plus immediates.
 * page and the tile's rows are powers of two; tiles start at multiples of
 * the tile's rows; no column bound; pieces per row <= threads. Pieces per
 * row np need not be a power of two (192-byte rows: 12) when the rows a
 * pass, T / np of kit_g2s_init's T, are: cut with T = np 2^k <= the CTA's
 * threads and keep threads >= T from issuing (pred). */
typedef struct kit_paged {
    ptx_reg table;      /* u64 address of the table's entry 0 (u32 page numbers) */
    ptx_reg pool;       /* u64 address of row 0 of page 0 (any per-head offset included) */
    int page;           /* rows per page */
    int64_t page_bytes; /* bytes from one page of the pool to the next */
    ptx_reg row;        /* u32 view row of the current tile's row 0 (advanced by
                           kit_g2s_paged_advance) */
    /* filled by kit_g2s_paged_init */
    ptx_reg erow;       /* u32 table entries from the tile's first to this thread's row 0 */
    ptx_reg prow;       /* u32 row inside the page of this thread's row 0, less the tile's */
    ptx_reg cbyte;      /* u32 byte of this thread's piece column 0 in a row */
} kit_paged;

/* Sets up the gather for copy c (already kit_g2s_init'ed; tid the same
 * u32 thread index) from pg's table, pool, page, page_bytes and the first
 * tile's view row pg->row (u32 register, a multiple of the tile's rows). */
void kit_g2s_paged_init(kit_g2s *c, kit_paged *pg, ptx_reg tid);
/* kit_g2s_issue through the pages: this thread's pieces of the current
 * tile into shared memory at dst + dimm; pred (id 0: none) as there. */
void kit_g2s_issue_paged(kit_g2s *c, const kit_paged *pg, ptx_reg dst, int64_t dimm, ptx_reg pred);
/* The same, sharing the table lookups with another copy over the same
 * rows, table and cut (V after K, both rows of the same bytes): pages[i]
 * is this thread's i-th distinct page of the tile (npages entries, at most
 * one per piece); an entry with id 0 is looked up and filled in, any other
 * is used as it is. Clear the entries (id 0) before each tile's first copy;
 * the entries are only valid for the tile they were filled in. */
void kit_g2s_issue_paged_shared(kit_g2s *c, const kit_paged *pg, ptx_reg dst, int64_t dimm, ptx_reg pred,
                                ptx_reg *pages, int npages);
/* Moves to the next tile (drow rows): the row bound and pg->row. */
void kit_g2s_paged_advance(kit_g2s *c, kit_paged *pg);

#endif
