/* Expression language: the front end of the fused elementwise / row-reduction
 * kernel generator.
 *
 * A program is one or more statements `name = expr`, separated by `;` or
 * newlines (newlines inside parentheses are whitespace). Every assigned name
 * is an output, and later statements may use it; identifiers never assigned
 * are inputs (tensors), numbered in order of first use.
 *
 *   y = gelu(x * w + b)
 *   y = x * rsqrt(mean(x*x, -1) + 1e-6) * g
 *   h = x + r; y = rmsnorm(h, -1) * g
 *
 * Grammar (precedence low to high; binary operators are left-associative):
 *   stmt  := IDENT '=' cmp
 *   cmp   := add (('<' | '<=' | '>' | '>=' | '==' | '!=') add)*
 *   add   := mul (('+' | '-') mul)*
 *   mul   := unary (('*' | '/') unary)*
 *   unary := ('-' | '+') unary | prim
 *   prim  := NUMBER | IDENT | IDENT '(' cmp (',' cmp)* ')' | '(' cmp ')'
 * NUMBER is 12, 1.5, .5, 1e-6, 2.5E+3. Comparisons give 1.0 or 0.0.
 * `#` starts a comment that runs to the end of the line.
 *
 * Functions (arity checked):
 *   neg abs exp exp2 log sqrt rsqrt tanh sigmoid relu gelu gelu_erf silu (1)
 *   min(a, b) max(a, b) (elementwise)     where(c, a, b)     cast(x, DTYPE)
 *   sum(x, D) mean(x, D) max(x, -1)        reductions over the last dim
 *   softmax(x, D) log_softmax(x, D)        composites over the last dim
 *   layernorm(x, D[, eps = 1e-5]) rmsnorm(x, D[, eps = 1e-6])
 * D must be an integer literal naming the last dim: -1, or rank-1 of the
 * bound full shape (checked by ex_bind). The max rule: max(a, b) is the row
 * max exactly when b is the integer literal -1 (written `-1`, no decimal
 * point); any other b, including `-1.0` or `1`, makes it the elementwise max.
 * layernorm/rmsnorm have no affine part: write `* g + b`. eps may be any
 * expression. DTYPE is a pt_dtype name (f16, bf16, e4m3, ...).
 *
 * Numbers must be 0 or within f32's normal range (1.17549435e-38 to
 * 3.40282347e+38 in magnitude): kernels compute in f32, so 1e400 (inf) and
 * 1e-50 (flushed to 0) are refused. Nesting is limited to EX_MAX_NEST (200)
 * levels (each '(' of a group or a call, and each unary sign, opens one), so
 * deep input cannot exhaust the C stack of the recursive-descent parser.
 *
 * Errors carry the 1-based column of the offending token ("at line L, column
 * C" when the program has more than one line):
 *   unknown function 'gelo' at column 5
 *   unexpected ')' at column 9
 *   softmax takes 2 arguments, got 1 at column 5
 *   'x' is assigned twice at column 8
 *   number '1e400' is out of range for f32 (magnitude at most 3.40282347e+38) at column 9
 *   expression nested too deeply (more than 200 levels) at column 205
 *   empty expression
 *
 * Lowering. Composites become primitives and reduction nodes, hash-consed
 * (common subexpressions shared; operands of commutative ops ordered) into a
 * DAG kept in topological order; all-constant elementwise subtrees are
 * folded with the reference's own arithmetic; nodes no output reaches are
 * dropped. With M = rmax(t), S = rsumexp(t, M), mu = rmean(t):
 *   softmax(t)     = exp(t - M) / S
 *   log_softmax(t) = (t - M) - log(S)
 *   layernorm(t)   = (t - mu) * rsqrt(rmean((t - mu) * (t - mu)) + eps)
 *   rmsnorm(t)     = t * rsqrt(rmean(t * t) + eps)
 * so `x * rsqrt(mean(x*x, -1) + 1e-6)` and `rmsnorm(x, -1)` give one DAG.
 *
 * Value model. Every node is conceptually a tensor of the full shape (the
 * broadcast of all inputs), viewed as rows x cols where cols is the last dim.
 * A reduction maps each row to one value, broadcast back along the row
 * (keepdims): a reduction of a value that does not vary along the row acts
 * on cols copies of it (rsum(v) = cols * v, rmax(v) = rmean(v) = v).
 */
#ifndef PT_EXPR_H
#define PT_EXPR_H

#include "gen/dtype.h"
#include "ptx/target.h"

/* Node kinds. X(id, name, nargs, flops, flags)
 * flops: cost per evaluated element, for ex_flops() (a reduction counts per
 *   element of the full shape it reads).
 * flags: EXK_COMM for commutative binary ops (operands ordered for CSE),
 *   EXK_RED for reductions.
 * Exact meaning, shared by the code generator and ex_reference(); a, b, c
 * are the args in order; all arithmetic IEEE, in double in the reference:
 *   INPUT     the input tensor p->inputs[node.input], broadcast
 *   CONST     node.value
 *   ADD SUB MUL DIV   a+b a-b a*b a/b
 *   NEG ABS   -a, |a|
 *   MIN MAX   fmin(a,b), fmax(a,b): a NaN operand yields the other one
 *   LT LE GT GE EQ NE   1.0 when the ordered comparison holds, else 0.0;
 *             any NaN operand gives 0.0, for NE too (PTX setp.ne semantics)
 *   EXP EXP2 LOG SQRT   e^a, 2^a, ln a, sqrt a
 *   RSQRT     1/sqrt(a)
 *   TANH      tanh a
 *   SIGMOID   1/(1+exp(-a))
 *   RELU      a > 0 ? a : 0 (fmax(a, 0): NaN gives 0)
 *   GELU      0.5*a*(1+tanh(sqrt(2/pi)*(a+0.044715*a^3)))   (tanh form)
 *   GELU_ERF  0.5*a*(1+erf(a/sqrt(2)))
 *   SILU      a/(1+exp(-a))   (= a*sigmoid(a))
 *   CAST      pt_dtype_round(node.dtype, a): a rounded through the dtype;
 *             integer dtypes round to nearest even and saturate to the
 *             type's range, NaN giving 0 (cvt.rni.sat.s8.f32 and kin);
 *             the kernel then holds the integer as f32 (exact to 2^24)
 *   WHERE     a != 0 ? b : c, ordered (a NaN condition picks c)
 *   RSUM      sum over the row of a: sequential sum j = 0..cols-1
 *   RMAX      max over the row of a, fmax-folded from -inf (NaNs ignored)
 *   RMEAN     RSUM(a) / cols
 *   RSUMEXP   sum over the row of exp(a_j - b); the lowering only makes
 *             RSUMEXP(t, RMAX(t)), so b is one value per row and a generator
 *             may compute the pair in one online pass.
 * Masked entries (-inf), the attention-style mask: they contribute exactly
 * 0 to softmax's sum and get softmax 0 and log_softmax -inf; the other
 * entries are exactly the softmax of the unmasked ones. A row that is -inf
 * everywhere gives NaN in every element of softmax(t) and log_softmax(t)
 * (M = -inf, so t - M = -inf - -inf = NaN), as numpy and torch do, in the
 * kernel and in ex_reference alike. For attention's 0 write
 * where(t > -3e38, softmax(t, -1), 0). A +inf entry makes its row NaN. */
enum { EXK_COMM = 1, EXK_RED = 2 };

#define EX_KIND_MAP(X)                        \
    X(INPUT, "input", 0, 0, 0)                \
    X(CONST, "const", 0, 0, 0)                \
    X(ADD, "add", 2, 1, EXK_COMM)             \
    X(SUB, "sub", 2, 1, 0)                    \
    X(MUL, "mul", 2, 1, EXK_COMM)             \
    X(DIV, "div", 2, 1, 0)                    \
    X(NEG, "neg", 1, 1, 0)                    \
    X(ABS, "abs", 1, 1, 0)                    \
    X(MIN, "min", 2, 1, EXK_COMM)             \
    X(MAX, "max", 2, 1, EXK_COMM)             \
    X(LT, "lt", 2, 1, 0)                      \
    X(LE, "le", 2, 1, 0)                      \
    X(GT, "gt", 2, 1, 0)                      \
    X(GE, "ge", 2, 1, 0)                      \
    X(EQ, "eq", 2, 1, EXK_COMM)               \
    X(NE, "ne", 2, 1, EXK_COMM)               \
    X(EXP, "exp", 1, 1, 0)                    \
    X(EXP2, "exp2", 1, 1, 0)                  \
    X(LOG, "log", 1, 1, 0)                    \
    X(SQRT, "sqrt", 1, 1, 0)                  \
    X(RSQRT, "rsqrt", 1, 1, 0)                \
    X(TANH, "tanh", 1, 1, 0)                  \
    X(SIGMOID, "sigmoid", 1, 4, 0)            \
    X(RELU, "relu", 1, 1, 0)                  \
    X(GELU, "gelu", 1, 8, 0)                  \
    X(GELU_ERF, "gelu_erf", 1, 5, 0)          \
    X(SILU, "silu", 1, 5, 0)                  \
    X(CAST, "cast", 1, 1, 0)                  \
    X(WHERE, "where", 3, 1, 0)                \
    X(RSUM, "rsum", 1, 1, EXK_RED)            \
    X(RMAX, "rmax", 1, 1, EXK_RED)            \
    X(RMEAN, "rmean", 1, 1, EXK_RED)          \
    X(RSUMEXP, "rsumexp", 2, 3, EXK_RED)

typedef enum ex_kind {
#define X(id, nm, na, fl, fg) EX_##id,
    EX_KIND_MAP(X)
#undef X
    EX_NKINDS
} ex_kind;

typedef struct ex_kind_info {
    const char *name;
    int nargs, flops, flags;
} ex_kind_info;

const ex_kind_info *ex_kind_get(ex_kind k);

#define EX_MAX_RANK 6
/* Parser nesting limit (see the grammar above). */
#define EX_MAX_NEST 200
/* Most elements of any tensor, the broadcast shape included: every size
 * product in binding is a checked multiplication against this bound. */
#define EX_MAX_NUMEL ((int64_t)1 << 48)

typedef struct ex_shape {
    int ndim;                  /* 0..EX_MAX_RANK */
    int64_t dim[EX_MAX_RANK];  /* each >= 1 */
} ex_shape;

/* "Rank class" of a node: ELEM varies along the last dim, ROW has one value
 * per row (reductions, and nodes whose args are all ROW or constant). */
typedef enum ex_class { EX_ROW, EX_ELEM } ex_class;

/* One DAG node. Fields below the line are set by ex_bind(). */
typedef struct ex_node {
    ex_kind kind;
    int nargs;
    int arg[3];      /* indices of earlier nodes */
    double value;    /* CONST */
    pt_dtype dtype;  /* CAST */
    int input;       /* INPUT: index into p->inputs */
    int level;       /* reduction pass: see ex_prog.nlevels */
    bool has_red;    /* a reduction is this node or among its operands */
    /* ---- */
    bool varies_col; /* differs along the last dim: class EX_ELEM */
    bool varies_row; /* differs from row to row */
} ex_node;

/* An input or an output, as bound to shapes.
 * shape: its own shape (inputs: as given; outputs: the full shape, or the
 *   full shape with last dim 1 for a "per-row" output, see below).
 * stride[d], d < full.ndim: element stride of this tensor (contiguous in its
 *   own shape) along full-shape dim d; 0 where it is broadcast (own dim 1 or
 *   missing on the left). Element (row r, col c) of the rows x cols view is
 *   at ex_row_offset(p, t, r) + c * stride[full.ndim - 1].
 * varies_col: stride on the last dim != 0; varies_row: some other stride != 0. */
typedef struct ex_tensor {
    const char *name;
    int node;               /* the INPUT node, or the node an output names */
    ex_shape shape;
    int64_t stride[EX_MAX_RANK];
    int64_t numel;
    bool varies_col, varies_row;
    bool per_row;           /* outputs: one value per row, shape [..., 1] */
    const char *index;      /* ex_parse_indexed: "n" for an input written bias[n]
                             * (its name is then "bias[n]"); NULL otherwise */
} ex_tensor;

/* A reduction dim written in the source, checked against the rank by ex_bind. */
typedef struct ex_dimref {
    const char *fn;
    long dim;
    int line, col;
} ex_dimref;

/* A parsed, lowered program. Read-only for users; lives in the arena given
 * to ex_parse(). Nodes are in topological order (args before users).
 * nlevels: the longest chain of dependent reductions (0 without any). Node
 *   .level for a reduction is the pass that computes it (1-based): one more
 *   than the highest level among its operands, except that RSUMEXP(t, M) with
 *   M = RMAX(t) shares M's level (online softmax). For other nodes .level is
 *   the highest operand level: how many passes must finish before it can be
 *   evaluated. So softmax has 1 level, layernorm 2 (the variance needs mu).
 * Outputs: an output that depends on a reduction but does not vary along the
 *   last dim (m = mean(x, -1)) is per_row with shape [..., 1]; every other
 *   output has the full shape (broadcast if need be). */
typedef struct ex_prog {
    pt_arena *arena;
    const char *src;
    ex_node *nodes;
    int nnodes;
    ex_tensor *inputs;
    int ninputs;
    ex_tensor *outputs;
    int noutputs;
    ex_dimref *dims;
    int ndims;
    bool has_reduction;
    int nlevels;
    /* set by ex_bind(); a program may be bound again to other shapes */
    bool bound;
    ex_shape full;          /* broadcast of every input */
    int64_t rows, cols;     /* rows: product of all but the last full dim */
} ex_prog;

/* Parses and lowers src; the program and all it holds live in arena a. */
int ex_parse(pt_arena *a, const char *src, ex_prog **out, pt_err *e);
/* ex_parse, also accepting indexed inputs NAME[IDX] (prim := IDENT '[' IDENT
 * ']'): an input called "NAME[IDX]" with .index = "IDX", distinct from NAME
 * and from NAME[OTHER]. The language gives IDX no meaning; the caller does
 * (GEMM epilogues bind bias[n] as one value per column). */
int ex_parse_indexed(pt_arena *a, const char *src, ex_prog **out, pt_err *e);

/* The canonical text of src, for identities (a problem's key): the same
 * statements with comments, blank statements, redundant parentheses and a
 * unary plus dropped, one blank around each binary operator, ", " between
 * arguments and "; " between statements; names, numbers and operand order
 * stay as written, so the program (its DAG, its inputs' order) is the same.
 * Spellings that differ only so map to one text. src must parse
 * (ex_parse_indexed: NAME[IDX] inputs are kept), as a program or as one
 * bare expression ("gelu(acc)", canonical as an expression); ex_parse's
 * errors are returned as they are. *out lives in arena a. */
int ex_canon(pt_arena *a, const char *src, const char **out, pt_err *e);

/* Binds input shapes (numpy broadcasting, aligned right). names/shapes give
 * one shape per input, in any order; every input needs one and every name
 * must be an input. Each shape, and the broadcast shape, has at most
 * EX_MAX_NUMEL elements. Errors: "bad dimension '0' in shape 'x=0x8'",
 * "broadcast shape 1099511627776x1099511627776 has more than 2^48 elements",
 * "cannot broadcast w=8000 with x=4096x8192 at dim -1",
 * "no shape given for input 'g'", "shape given for 'q', which is not an
 * input", reduction dims that are not the last. */
int ex_bind(ex_prog *p, int n, const char *const *names, const ex_shape *shapes, pt_err *e);

/* Parses "x=4096x8192,w=8192,b=8192" (spaces allowed around items) into
 * arena-allocated arrays for ex_bind(). */
int ex_parse_shapes(pt_arena *a, const char *spec, int *n, const char ***names,
                    ex_shape **shapes, pt_err *e);
/* ex_parse_shapes() then ex_bind(). */
int ex_bind_spec(ex_prog *p, const char *spec, pt_err *e);

/* Whether target t can run p: every cast's dtype is available there
 * (e4m3/e5m2 need sm_89). PT_EUNSUPPORTED with "cast to e4m3 needs sm_89;
 * target is sm_80" otherwise, as an fp8 output dtype is refused. */
int ex_check_target(const ex_prog *p, const pt_target *t, pt_err *e);

/* Index of the input / output called name, or -1. */
int ex_find_input(const ex_prog *p, const char *name);
int ex_find_output(const ex_prog *p, const char *name);

/* Offset of row r (0 <= r < rows) of tensor t in its own contiguous layout. */
int64_t ex_row_offset(const ex_prog *p, const ex_tensor *t, int64_t r);

/* Class of node i (needs ex_bind). */
ex_class ex_node_class(const ex_prog *p, int i);

/* Float64 reference. inputs[i]: input i, contiguous in its own shape;
 * outputs[i]: room for output i (outputs[i].numel doubles), contiguous in its
 * own shape. Evaluates the DAG row by row exactly per the node definitions
 * above; nodes that do not vary across rows are evaluated once. Scratch is
 * one row per node, on the heap, freed before it returns. Needs ex_bind. */
int ex_reference(const ex_prog *p, const double *const *inputs, double **outputs, pt_err *e);

/* Approximate flops: per node, the kind's flops times the elements it is
 * evaluated on (rows*cols for ELEM nodes and reductions, rows for ROW nodes).
 * 0 before ex_bind. */
double ex_flops(const ex_prog *p);

/* Bytes moved by a kernel that reads every input once and writes every
 * output once, in storage dtypes in_dt[ninputs] and out_dt[noutputs] (either
 * may be NULL: f32). 0 before ex_bind. */
int64_t ex_bytes(const ex_prog *p, const pt_dtype *in_dt, const pt_dtype *out_dt);

/* Prints the lowered DAG, one node per line, then the outputs:
 *   %0 = input x                 ; level 0
 *   %2 = mul %0 %1               ; level 0
 *   y = %5
 * Bound programs also show shapes and classes:
 *   %0 = input x 4x8             ; elem, level 0
 *   %3 = rmax %2                 ; row, level 1
 *   %4 = input w 8               ; elem, same every row, level 0
 *   y = %5 4x8                   (or "m = %3 4x1 per-row") */
void ex_dump(const ex_prog *p, pt_buf *b);

/* "4096x8192" ("scalar" for rank 0) into buf. */
void ex_shape_str(const ex_shape *s, char *buf, size_t n);

#endif
