/* Kernel families: every op exports one pt_op descriptor (name, parameter
 * space, validity check, emit, float64 reference, flop and byte counts), so
 * the search loop, the verifier and the CLI treat every op alike. */
#ifndef PT_OP_H
#define PT_OP_H

#include "gen/dtype.h"
#include "ptx/ir.h"

/* A problem: what to compute. Fields are read by the op that owns them. */
typedef struct pt_problem {
    const char *op;        /* "elementwise" */
    /* elementwise */
    const char *expr;      /* "y = gelu(x * w + b)" */
    const char *shapes;    /* "x=4096x8192,w=8192,b=8192" */
    pt_dtype dtype;        /* storage dtype of inputs and outputs */
    pt_dtype out_dtype;    /* outputs (fp8 e4m3/e5m2 with a scale); = dtype by default */
    /* gemm: D[b] = epilogue(alpha * op(A[b]) * op(B[b]) + beta * C[b]) */
    int64_t m, n, k, batch;     /* batch 0 or 1: not batched */
    const char *layout;         /* "nn" "nt" "tn" "tt": A then B; n = as written */
    bool d_colmajor;            /* D (and C) column-major */
    const char *epilogue;       /* expression over acc, e.g. "gelu(acc * alpha + bias[n])"; NULL: none */
    double alpha, beta;         /* beta 0: no C operand */
    int64_t lda, ldb, ldc, ldd; /* leading dimensions; 0: packed */
    const char *dyn;            /* sizes read at run time: "m"; NULL or "none": all baked in */
    /* fp8 / int8 per-tensor scales: acc = scale_a * scale_b * A * B. With
     * has_scale_a (has_scale_b) the value is used as given, 0 included; without
     * it 0 means "not given" (1.0), so a zeroed problem needs no scales. */
    double scale_a, scale_b;
    bool has_scale_a, has_scale_b;
    /* both ops: fp8 (e4m3/e5m2) outputs are multiplied by out_scale before
     * they are rounded; without has_out_scale the scale is 1 */
    double out_scale;
    bool has_out_scale;
    /* attention (gen/attention*.c): o = softmax(mask(softcap(scale * q k^T))) v
     * per (sequence, query head); batch and dtype are the members above,
     * layout is "bshd" or "bhsd". Sizes are maxima when varlen / paged. */
    int64_t heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, head_dim_v;
    bool causal;
    int64_t window_left, window_right; /* -1: unbounded (given: window_*_given) */
    bool window_left_given, window_right_given;
    double softmax_scale, softcap;     /* 0: 1/sqrt(head_dim); 0: off */
    bool varlen, seqused_k, return_lse;
    int64_t page_size, num_pages;      /* page_size 0: not paged */
    /* fp8 (dtype e4m3) per-tensor descales: the true q, k, v are the stored
     * ones times these (flash-attention 3's q/k/v_descale); 0: 1 */
    double descale_q, descale_k, descale_v;
} pt_problem;

/* A parameter space: named integer parameters, each with its values. */
enum { PT_MAX_PARAMS = 16, PT_MAX_VALUES = 16 };
typedef struct pt_param_space {
    const char *name, *doc;
    int nvalues;
    int64_t values[PT_MAX_VALUES];
} pt_param_space;
typedef struct pt_space {
    int nparams;
    pt_param_space p[PT_MAX_PARAMS];
} pt_space;

/* A configuration: one value per parameter, in the space's order. */
typedef struct pt_config {
    int n;
    const char *name[PT_MAX_PARAMS];
    int64_t value[PT_MAX_PARAMS];
} pt_config;

/* Value of name in c, or def when absent. */
int64_t pt_config_get(const pt_config *c, const char *name, int64_t def);
/* Sets (or adds) name = v. */
void pt_config_set(pt_config *c, const char *name, int64_t v);
/* "tpb=256,vec=8" into buf. */
const char *pt_config_str(const pt_config *c, char *buf, size_t n);
/* Parses "k=v,k=v" over a base config (defaults); unknown keys are errors
 * naming the key and the space's parameters. */
int pt_config_parse(const pt_space *s, const char *spec, pt_config *c, pt_err *e);
/* The i-th configuration of the cartesian product (i < pt_space_size). */
int64_t pt_space_size(const pt_space *s);
void pt_space_config(const pt_space *s, int64_t i, pt_config *c);

/* ---- the problem schema ----
 * Every op describes its problem in one table of keys: problem files, the
 * KEY=VALUE items and flags of emit/variants/run/tune (--KEY, '_' written
 * '-'), the canonical problem key, 'ptxtune ops' and the README's table are
 * all derived from it (search/problem.c, cli/common.c), so nothing outside
 * gen/ knows an op's keys or branches on its name.
 *
 * A key's value lives in a pt_problem member. Its zero value (0, NULL, "",
 * false, PT_F64 for a dtype) means "unset" where zero is not a value the key
 * can be given: a string, an enum, a dtype, a bool (false is its default),
 * an int whose min is above 0; a real, or an int that may be 0, is unset
 * only through its `given` member (a zeroed problem then reads as all
 * defaults). The canonical key writes, in table order, every key that is set
 * and differs from its default, and PT_KEY_ALWAYS keys in any case. */
typedef enum pt_key_type {
    PT_KEY_INT,    /* int64_t, an integer >= min */
    PT_KEY_REAL,   /* double, a finite number (>= min with PT_KEY_MIN) */
    PT_KEY_BOOL,   /* bool, 0 or 1 (the flag alone means 1) */
    PT_KEY_ENUM,   /* const char *, one of `values` */
    PT_KEY_DTYPE,  /* pt_dtype, a dtype name (gen/dtype.h) */
    PT_KEY_EXPR,   /* const char *, gen/expr text */
    PT_KEY_SHAPES, /* const char *, NAME=DxD,... (the digits are the problem's dims) */
    PT_KEY_NTYPES
} pt_key_type;

enum {
    PT_KEY_REQUIRED = 1u << 0, /* a problem without it is refused */
    PT_KEY_SHAPE = 1u << 1,    /* a size: in the dims, left out of the class */
    PT_KEY_ALWAYS = 1u << 2,   /* in the canonical key even at its default */
    PT_KEY_MIN = 1u << 3,      /* REAL: at least min */
    /* roles a tiled cost model reads (search/model.h: m x n output tiles
     * over a k reduction, batch problems): pt_problem_mnk */
    PT_KEY_ROLE_M = 1u << 4,
    PT_KEY_ROLE_N = 1u << 5,
    PT_KEY_ROLE_K = 1u << 6,
    PT_KEY_ROLE_BATCH = 1u << 7,
};

typedef struct pt_key {
    const char *name;   /* "m", "out_dtype" */
    pt_key_type type;
    unsigned flags;     /* PT_KEY_* */
    size_t off;         /* offsetof(pt_problem, member) */
    size_t given;       /* offsetof a bool set when the key is given; 0: none */
    const char *def;    /* default as a value ("nn", "1"), "=KEY" the value of
                         * KEY, NULL none (unset; the doc says what it means) */
    const char *values; /* ENUM: the values, blank separated */
    double min;         /* INT (and REAL with PT_KEY_MIN): the least value */
    /* The op's own default rule where it depends on other keys (a GEMM's
     * output dtype); NULL: equal to def. */
    bool (*is_default)(const pt_problem *p);
    const char *doc;    /* one line */
} pt_key;

/* Op-level facts read outside gen/. */
enum {
    PT_OP_TENSOR = 1u << 0, /* tensor-core math where the dtype has it (peaks, cost model) */
};

enum { PT_MAX_KEYS = 64 }; /* keys of one schema at most */
typedef struct pt_schema {
    int nkeys;
    const pt_key *keys;
    unsigned flags;     /* PT_OP_* */
} pt_schema;

/* How a kernel parameter is bound at launch. WORKSPACE: a device buffer of
 * .u bytes the launcher allocates and zero-fills before the first launch;
 * the kernel uses it as scratch (split-K partial tiles, arrival counters)
 * and leaves it all zero again, so one buffer serves repeated launches. */
typedef enum pt_arg_kind {
    PT_ARG_INPUT, PT_ARG_OUTPUT, PT_ARG_U32, PT_ARG_U64, PT_ARG_F32, PT_ARG_WORKSPACE,
    /* SCRATCH: a device buffer of .u bytes without the zero contract: the
     * verifier poisons it (0xFF) before every launch, so a kernel that reads
     * a partial it did not write this launch reads NaN (on the emulator: an
     * uninitialised read). Arrival counters stay WORKSPACE. */
    PT_ARG_SCRATCH,
    /* TENSORMAP: a CUtensorMap passed by value (.param .align 64 .b8 [128]);
     * .index is the launch's tmaps[] entry, which the binder encodes with the
     * backend's encoder (tuner_tmap_encode) once the tensor's device pointer
     * is known, since a map bakes the pointer in. */
    PT_ARG_TENSORMAP
} pt_arg_kind;
typedef struct pt_arg {
    pt_arg_kind kind;
    int index;        /* tensor index for INPUT / OUTPUT */
    uint64_t u;       /* value of a U32 / U64 scalar; bytes of a WORKSPACE */
    float f;          /* value of an F32 scalar */
} pt_arg;

/* A tensor map of a launch (PT_ARG_TENSORMAP), relative to one of its
 * tensors: what cuTensorMapEncodeTiled takes but the pointer. Dimension 0
 * is the innermost, as in CUDA; dtype, swizzle, oobfill and l2promo hold
 * CUDA's enum values (ptx/emu/tmap.h names them); elementStrides are 1 and
 * there is no interleave. Emission describes maps, the binder encodes. */
enum { PT_MAX_TMAPS = 8 };
typedef struct pt_tmap {
    pt_arg_kind of;       /* PT_ARG_INPUT or PT_ARG_OUTPUT: which tensor list */
    int index;            /* the tensor's index in that list */
    uint64_t offset;      /* bytes from the tensor's pointer to the map's origin */
    int dtype, rank;      /* CUtensorMapDataType; 1..5 */
    uint64_t dims[5];     /* elements per dimension */
    uint64_t strides[4];  /* bytes, of dimensions 1..rank-1 */
    uint32_t box[5];      /* elements per dimension of one copy */
    int swizzle, oobfill, l2promo;
} pt_tmap;

typedef struct pt_launch {
    unsigned grid[3], block[3];
    size_t smem;          /* dynamic shared memory bytes */
    bool smem_optin;      /* smem > 48 KB: the host must raise the kernel's
                           * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                           * to smem before launching */
    int align;            /* every tensor pointer must be aligned to this */
    int nargs;
    pt_arg args[24];
    const char *entry;    /* kernel name */
    unsigned cluster[3];  /* CTAs per cluster (cuLaunchKernelEx's cluster
                           * dimension); 0: no cluster launch */
    int ntmaps;
    pt_tmap tmaps[PT_MAX_TMAPS]; /* PT_ARG_TENSORMAP's .index */
    /* A persistent kernel's SM term (issues 13, 14): 0 none; K > 0: the
     * kernel walks its work by %nctaid.x, grid[0] is its natural x extent
     * (one CTA per tile or unit: always a correct launch) and every launcher
     * runs min(grid[0], K x the device's SMs) CTAs along x, rounded down to
     * a multiple of cluster[0] (at least one cluster): pt_launch_grid_x. */
    unsigned grid_per_sm;
} pt_launch;

/* The x extent l launches with on a device of sms SMs (sms < 1: 1): pt_grid_cap (ptx/base.h). */
unsigned pt_launch_grid_x(const pt_launch *l, int sms);

/* A host tensor for references and verification: float64 values in the
 * tensor's own contiguous shape, plus its storage dtype. */
enum { PT_TENSOR_MAX_DIMS = 8 };
typedef struct pt_tensor {
    const char *name;
    pt_dtype dtype;
    int64_t numel;
    double *data;
    /* The tensor's shape, outermost first (as .npy files write it); ndim 0:
     * one dimension of numel elements. The product is numel. */
    int ndim;
    int64_t shape[PT_TENSOR_MAX_DIMS];
} pt_tensor;

/* The verifier's comparison of one output (tuner/verify.h), where the op
 * knows better than the dtype: tol, the tolerance (0: the dtype's); floor,
 * the fraction of the output's largest |reference| below which an element
 * is judged against that scale instead of itself (0: the verifier's 1e-2;
 * 1: every element against max |w|, an absolute bound). */
typedef struct pt_tol {
    double tol, floor;
} pt_tol;

/* The cost model's view of one config (search/model.h) where the op knows
 * more than its ideal counts: traffic, the DRAM bytes the config moves
 * (split-KV partials, re-reads; 0: bytes()); pipelined, asynchronous copies
 * keep bytes in flight at any occupancy. */
typedef struct pt_cost {
    double traffic;
    bool pipelined;
} pt_cost;

/* Everything an op knows about a problem once it is prepared (parsed,
 * bound); allocated in the arena given to prepare. */
typedef struct pt_prepared pt_prepared;
/* A default that check accepts: c itself when it passes, else the first
 * configuration of s (in order) that does; c unchanged when none does. */
void pt_space_default(const pt_space *s,
                      int (*check)(const pt_prepared *, const pt_target *, const pt_config *, pt_err *),
                      const pt_prepared *pp, const pt_target *t, pt_config *c);

/* How an output is accumulated, for the verifier's error model
 * (tuner/verify.h): sums in `dtype` whose longest chain of dependent
 * additions, in any config of the op, is `len` (K for a GEMM; a lane's
 * share of a row plus the shuffle steps for a row reduction). len 0: no
 * accumulation (the output's dtype tolerance alone). dtype PT_F32: rounded
 * sums (f32 and tf32/f16/bf16/fp8 tensor-core products, f32 row
 * reductions); an integer dtype (PT_S32 for int8 GEMMs): exact. */
typedef struct pt_accum {
    pt_dtype dtype;
    int64_t len;
} pt_accum;

typedef struct pt_op {
    const char *name;
    const char *summary;
    const pt_schema *schema; /* the problem's keys */
    int (*prepare)(pt_arena *a, const pt_problem *p, const pt_target *t, pt_prepared **out,
                   pt_err *e);
    int (*space)(const pt_prepared *pp, const pt_target *t, pt_space *out);
    /* A config's defaults (the space's first value unless the op knows better). */
    void (*defaults)(const pt_prepared *pp, const pt_target *t, pt_config *out);
    int (*check)(const pt_prepared *pp, const pt_target *t, const pt_config *c, pt_err *e);
    int (*emit)(const pt_prepared *pp, const pt_config *c, ptx_module *m, pt_launch *l,
                pt_err *e);
    /* Inputs and outputs for a reference run: counts, names, sizes. */
    int (*tensors)(const pt_prepared *pp, int *nin, int *nout, pt_tensor *in, pt_tensor *out);
    int (*reference)(const pt_prepared *pp, const pt_tensor *in, pt_tensor *out, pt_err *e);
    /* Sampled float64 reference, for problems too large to compute whole:
     * vals[j] = element idx[j] of output `out` (idx ascending, so an op that
     * evaluates per row reuses one row for neighbouring samples). Same values
     * as reference() gives at those indices. NULL: only reference() exists. */
    int (*reference_at)(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                        int n, double *vals, pt_err *e);
    /* Accumulation magnitude, next to the reference, for the verifier's
     * error model: mag[j] for element idx[j] of output `out` (idx NULL: the
     * first n elements, in order) is the sum of |terms| of every rounded
     * accumulation the element depends on, carried to the output to first
     * order (times |d output / d sum|): |scale| * sum_k |a_ik| |b_kj| through
     * the epilogue's slope for a GEMM; sum_j |x_j| for a row sum, the
     * denominator S times |d y / d S| for a softmax. A rounding error of u
     * per addition moves the element by about u * mag (times a length
     * factor the verifier owns). Fills *acc (the same for every element of
     * an output). Non-finite where the reference is; 0 where no rounded
     * accumulation reaches the element. NULL: the op accumulates nothing. */
    int (*magnitude)(const pt_prepared *pp, const pt_tensor *in, int out, const int64_t *idx,
                     int64_t n, double *mag, pt_accum *acc, pt_err *e);
    /* Structured inputs (NULL: uniform noise for every input): after the
     * verifier's uniform fill, the op rewrites the float64 values of the
     * inputs that must make sense (lengths, offsets, page tables), in
     * in[i].data, deterministically in seed; the verifier stores them in
     * their dtypes. */
    void (*init_inputs)(const pt_prepared *pp, uint64_t seed, pt_tensor *in);
    /* Inputs no kernel may be launched on (an index out of range, a length
     * over its maximum): an error naming the tensor, the element and the
     * value. Run by the verifier before every upload. NULL: any values. */
    int (*check_inputs)(const pt_prepared *pp, const pt_tensor *in, pt_err *e);
    /* The comparison of output `out` (NULL, or zeros: by dtype). */
    void (*tolerance)(const pt_prepared *pp, int out, pt_tol *tol);
    /* Elements of output `out` that no kernel writes (the padding of
     * variable-length outputs, which depends on the inputs): mask[j] = 1,
     * 0 elsewhere (numel bytes). The verifier neither requires them written
     * nor compares them. NULL: every element is written. */
    int (*padding)(const pt_prepared *pp, const pt_tensor *in, int out, uint8_t *mask, pt_err *e);
    /* The cost model's view of config c (NULL: bytes(), and pipelined when
     * the config has stages >= 2). */
    void (*cost)(const pt_prepared *pp, const pt_config *c, pt_cost *out);
    double (*flops)(const pt_prepared *pp);
    /* The flop count the field's tables quote where it differs from flops()
     * (attention: flash-attention's 4 B Hq Sq Sk d, halved when causal), named
     * by flops_quoted_name; benchmarks print both. NULL: none. */
    double (*flops_quoted)(const pt_prepared *pp);
    const char *flops_quoted_name;
    double (*bytes)(const pt_prepared *pp);
    /* Representative problems, for 'ptxtune ops' and smoke tests. */
    const pt_problem *examples;
    int nexamples;
} pt_op;

/* An elementwise problem, for tables of cases. */
#define PT_EW(ex, sh, dt, odt) \
    {.op = "elementwise", .expr = (ex), .shapes = (sh), .dtype = (dt), .out_dtype = (odt)}

extern const pt_op gen_elementwise_op;

/* The registry: every op, by name. */
/* The fp8 output scale of a problem (pt_problem.out_scale, 1 when unset):
 * a finite f32, given for e4m3/e5m2 outputs only. Both ops read it here. */
int pt_problem_out_scale(const pt_problem *pb, pt_dtype out_dt, float *scale, pt_err *e);

/* ---- schema helpers (gen/op.c): values of one key, generic over ops ---- */
extern const pt_schema gen_elementwise_schema, gen_gemm_schema;
const char *pt_key_type_name(pt_key_type t);
/* The key of s named by the len bytes at name; NULL when none. */
const pt_key *pt_schema_find(const pt_schema *s, const char *name, size_t len);
/* "expr shape dtype ..." (blank separated, table order) into buf. */
const char *pt_schema_names(const pt_schema *s, char *buf, size_t n);
/* A zeroed problem of op with every constant default set (not marked given). */
void pt_schema_defaults(const pt_op *op, pt_problem *p);
/* Parses v into k's member of p (strings copied into a); marks it given.
 * zero_ok: an INT key may be 0 (the command line leaves a missing size to
 * the op's prepare, which names it). Errors name the key and the value. */
int pt_key_set(pt_arena *a, const pt_key *k, pt_problem *p, const char *v, bool zero_ok,
               pt_err *e);
/* After the items: "=KEY" defaults of keys not given take KEY's value, and
 * (unless partial) a missing PT_KEY_REQUIRED key is an error naming it.
 * given[i]: key i of the op's schema was given. */
int pt_schema_finish(const pt_op *op, pt_problem *p, const bool *given, bool partial,
                     pt_err *e);
bool pt_key_unset(const pt_key *k, const pt_problem *p);
/* Unset or equal to its default: left out of the canonical key. */
bool pt_key_is_default(const pt_key *k, const pt_problem *p);
/* The value as text (a string raw, unquoted; a real %.17g) into b. */
void pt_key_value(const pt_key *k, const pt_problem *p, pt_buf *b);
/* An INT key's value (its default when unset, 0 when it has none). */
int64_t pt_key_int(const pt_key *k, const pt_problem *p);
/* For the cost model, from the schema (no op names): m, n and k * batch of
 * an op whose keys have the M, N and K roles (false otherwise, mnk zero);
 * tensor-core math: the op's PT_OP_TENSOR and an input dtype other than
 * f32. */
bool pt_problem_mnk(const pt_problem *p, double mnk[3]);
bool pt_problem_tensor_math(const pt_problem *p);

const pt_op *pt_op_find(const char *name);
int pt_op_list(const pt_op *const **out);

/* emit + ptx_module_finish into m, with m's arena recovery point set: an
 * emission that runs out of memory (or past pt_arena_limit) returns
 * PT_ENOMEM, m still to be freed by the caller. */
int pt_op_emit(const pt_op *op, const pt_prepared *pp, const pt_config *c, ptx_module *m,
               pt_launch *l, pt_err *e);
/* Convenience: check + ptx_module_new + pt_op_emit for one config. */
int pt_op_build(const pt_op *op, const pt_prepared *pp, const pt_target *t, int max_ptx,
                const pt_config *c, ptx_module **m, pt_launch *l, pt_err *e);
/* The same with the module's signature verdicts kept in cache (ptx/ir.h
 * ptx_sigcache: a caller emitting many configs; NULL: pt_op_build). */
int pt_op_build_cached(const pt_op *op, const pt_prepared *pp, const pt_target *t, int max_ptx, ptx_sigcache *cache,
                       const pt_config *c, ptx_module **m, pt_launch *l, pt_err *e);

#endif
