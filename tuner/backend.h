/* Device backends behind one interface: "cuda" (libcuda through dlopen),
 * "emu" (the CPU PTX emulator: verification only, no timing) and "mock" (a
 * fault-injecting fake for tests of the verifier, the benchmark protocol and
 * the worker isolation).
 *
 * A tuner_dev is one device of one backend. Calls return an int status
 * (PT_OK or a pt_status) with the message in the caller's pt_err; a failed
 * call also leaves its outcome class in the device (tuner_dev_failure), so
 * the sweep can say whether a candidate hit a resource limit, a launch
 * error or a fault. After a sticky fault (an illegal address on a GPU kills
 * the CUDA context until the process exits) every later call fails: the
 * process that owns the device must be replaced (see tuner/pool.h).
 *
 * Launches are asynchronous on every backend that can be (cuda, mock); a
 * fault surfaces at the next tuner_sync, as on a GPU. */
#ifndef TUNER_BACKEND_H
#define TUNER_BACKEND_H

#include "db/db.h"
#include "gen/op.h"
#include "ptx/emu/tmap.h"

/* Outcome classes of a candidate: the rows of DB_OUTCOME_ROWS (db/db.h, the
 * one list, with the store's names), as X(ID, "name"). */
#define TUNER__OUTCOME_ROW(A, id, name) A(id, #name)
#define TUNER_OUTCOME_MAP(X) DB_OUTCOME_ROWS(TUNER__OUTCOME_ROW, X)

typedef enum tuner_outcome {
#define X(id, name) TUNER_##id,
    TUNER_OUTCOME_MAP(X)
#undef X
    TUNER_NOUTCOMES
} tuner_outcome;
/* a tuner_outcome is its db_class (the store's name) */
_Static_assert((int)TUNER_OK == (int)DB_CLASS_OK &&
                   (int)TUNER_WRONG_ANSWER == (int)DB_CLASS_WRONG_ANSWER &&
                   (int)TUNER_NOUTCOMES == (int)DB_CLASS_INVALID,
               "tuner_outcome follows DB_OUTCOME_ROWS");
const char *tuner_outcome_name(tuner_outcome o);
/* TUNER_NOUTCOMES when name is not a class. */
tuner_outcome tuner_outcome_parse(const char *name);

/* What a backend knows about its device. Fields a backend cannot know are 0
 * (strings empty). */
typedef struct tuner_devinfo {
    char backend[8];        /* "cuda" "emu" "mock" */
    int ordinal;
    char name[96];          /* "NVIDIA H200" */
    char uuid[48];          /* "GPU-8c5c2b8f-...", NVML's spelling */
    int cc_major, cc_minor; /* compute capability */
    int sm_count;
    int64_t l2_bytes;
    int smem_optin;         /* largest dynamic+static shared memory a block may opt in to */
    int smem_per_sm;
    int regs_per_sm;
    int max_threads_per_block;
    int clock_khz;          /* SM clock the driver reports (max boost) */
    int mem_clock_khz;
    int mem_bus_bits;
    int64_t total_mem;
    int driver_version;     /* 13000 for CUDA 13.0 */
    double peak_gbs;        /* DRAM bandwidth: mem clock x bus width x 2 (DDR) */
    double peak_fp32_tflops; /* CUDA cores: SMs x FMA/clk x 2 x clock */
    double peak_tensor_tflops; /* dense f16/bf16 tensor cores, same clock */
} tuner_devinfo;

/* A device address (cuda: a CUdeviceptr; emu: the emulator's fake address;
 * mock: its own fake address). Never 0 for a live allocation. */
typedef uint64_t tuner_ptr;

/* A kernel image: the PTX text (what the emulator parses and the driver JIT
 * compiles) and, when the compile gate made one, the cubin (what cuda loads
 * first). op/pp say what the kernel is meant to compute: the mock executes
 * that reference as the kernel; other backends ignore them. */
typedef struct tuner_image {
    const char *ptx;
    size_t ptx_len;
    const void *cubin;
    size_t cubin_size;
    const char *entry;      /* NULL: the module's only entry */
    const pt_op *op;
    const pt_prepared *pp;
} tuner_image;

typedef struct tuner_dev tuner_dev;
typedef struct tuner_kernel tuner_kernel;
typedef struct tuner_batch tuner_batch;

/* Options of tuner_dev_open. */
typedef struct tuner_dev_opts {
    int ordinal;          /* cuda device number */
    int emu_threads;      /* emu: threads across CTAs (0: serial) */
    uint64_t emu_max_steps; /* emu: warp-instruction cap per run (0: default) */
    int emu_arch;         /* emu: shared layout of sm_<arch> (0: the module's .target) */
    int emu_smem_shift;   /* emu: bytes before the first shared array beyond the arch's
                             reserved region (0: EMU_SMEM_SHIFT_DEFAULT; -1: none) */
    int emu_schedule;     /* emu: async completion points (an emu_sched; 0: lazy) */
    int emu_sm_count;     /* emu: the SMs the device reports, which size persistent grids
                             (pt_launch.grid_per_sm; 0: tuner_emu_sm_count(emu_arch)) */
    uint64_t emu_schedule_seed; /* emu: the seed of the random schedule */
    double mock_gbs;      /* mock: bandwidth of its timing model (0: 2000) */
    double mock_noise;    /* mock: relative timing noise (0: none; 0.01 = 1%) */
    uint64_t mock_seed;
} tuner_dev_opts;

/* Opens a device: backend "cuda", "emu" or "mock". cuda without a driver
 * gives PT_ENODRIVER with "no CUDA driver found (libcuda.so.1)". */
int tuner_dev_open(const char *backend, const tuner_dev_opts *o, tuner_dev **out, pt_err *e);
void tuner_dev_close(tuner_dev *d);
const tuner_devinfo *tuner_dev_info(const tuner_dev *d);
/* Whether the backend times kernels (emu does not). */
bool tuner_dev_can_time(const tuner_dev *d);
/* Guard bytes the verifier puts around each buffer on this backend (0 on
 * the emulator, whose own detector sees every out-of-bounds access). */
size_t tuner_dev_guard_bytes(const tuner_dev *d);
/* Class of the last failed call, and whether the device is now unusable. */
tuner_outcome tuner_dev_failure(const tuner_dev *d);
bool tuner_dev_sticky(const tuner_dev *d);
/* Forgets the last failure's class (not stickiness), before a new step. */
void tuner_dev_reset_failure(tuner_dev *d);

/* The SM count an emulator device of sm_<arch> reports by default: the
 * arch's flagship (80: A100's 108, 86: 84, 87: 16, 89: 142, 90 and 0: H100's 132). */
int tuner_emu_sm_count(int arch);

/* The emulator's counts for its last launch (PT_EINVAL on other backends). */
int tuner_emu_last_stats(tuner_dev *d, uint64_t *lane_instructions, double *seconds);

/* Lists cuda devices without keeping a context (for 'ptxtune devices').
 * *n is set to the count; at most max are filled. */
int tuner_cuda_list(tuner_devinfo *out, int max, int *n, pt_err *e);

/* Memory. fill writes `byte` into n bytes (poison, guard patterns). */
int tuner_alloc(tuner_dev *d, size_t bytes, tuner_ptr *p, pt_err *e);
void tuner_free(tuner_dev *d, tuner_ptr p);
int tuner_write(tuner_dev *d, tuner_ptr dst, const void *src, size_t n, pt_err *e);
int tuner_read(tuner_dev *d, tuner_ptr src, void *dst, size_t n, pt_err *e);
int tuner_fill(tuner_dev *d, tuner_ptr dst, uint8_t byte, size_t n, pt_err *e);

/* Modules. load prefers the cubin, falls back to the PTX text through the
 * driver JIT (its error log becomes the message). */
int tuner_load(tuner_dev *d, const tuner_image *img, tuner_kernel **k, pt_err *e);
void tuner_unload(tuner_dev *d, tuner_kernel *k);

/* One launch of l's geometry; args[i] points at the value of parameter i, as
 * in cuLaunchKernel (a tensor map: its 128 bytes). More than 48 KB of
 * dynamic shared memory is opted in first; a block the kernel cannot run
 * gives TUNER_RESOURCE_LIMIT. l->cluster set (non-zero): a cluster launch
 * (cuda: cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION); the
 * grid must be a multiple of it. */
int tuner_launch(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *args, pt_err *e);
/* (l->grid_per_sm: grid x is pt_launch_grid_x of the device's sm_count, here
 * and in tuner_batch_new, for every backend.) */
/* Tensor maps (PT_ARG_TENSORMAP): encodes the map d describes (gaddr a
 * device address of this device) into the 128 bytes a kernel parameter
 * takes by value. cuda: the driver's cuTensorMapEncodeTiled (through
 * cuGetProcAddress_v2; its refusal names the call and CUresult, and the
 * parameters are validated first with the same one-line messages as the
 * emulator's); emu and mock: ptx/emu/tmap.h's own encoding, which the
 * emulator's TMA instructions decode. */
int tuner_tmap_encode(tuner_dev *d, const emu_tmap_desc *m, uint8_t out[EMU_TMAP_BYTES], pt_err *e);
/* The encoder's parameters of a launch's map t over a tensor at base. */
void tuner_tmap_desc(const pt_tmap *t, tuner_ptr base, emu_tmap_desc *out);

/* Waits for the device; where an asynchronous fault shows up. */
int tuner_sync(tuner_dev *d, pt_err *e);

/* Timing (not on the emulator: PT_EUNSUPPORTED). A batch is `count`
 * launches of k back to back, launch i using argument set i % nsets; graph
 * records them once as a CUDA graph, so per-launch CPU overhead vanishes.
 * batch_time runs it once between two events and gives the elapsed
 * milliseconds; when flush_bytes > 0, the buffer at flush is rewritten
 * first, outside the timed span, to evict L2. */
int tuner_batch_new(tuner_dev *d, tuner_kernel *k, const pt_launch *l, void *const *const *argsets,
                    int nsets, int count, bool graph, tuner_batch **out, pt_err *e);
int tuner_batch_time(tuner_dev *d, tuner_batch *b, tuner_ptr flush, size_t flush_bytes, double *ms,
                     pt_err *e);
void tuner_batch_free(tuner_dev *d, tuner_batch *b);

/* Current SM clock in MHz and temperature in C (NVML); PT_EUNSUPPORTED
 * where unknown. */
int tuner_clock(tuner_dev *d, int *sm_mhz, int *temp_c, pt_err *e);

/* The device as one JSON object (no trailing newline); strings escaped. */
void tuner_devinfo_json(const tuner_devinfo *di, pt_buf *out);
/* s as a JSON string literal, quotes included. */
void tuner_json_str(pt_buf *out, const char *s);
/* A number, or null when it is not finite. */
void tuner_json_num(pt_buf *out, double v);

/* Peak figures for a roofline: tensor-core ops (gemm, attention) against
 * the dtype's tensor peak, everything else against the CUDA cores. */
double tuner_peak_tflops(const tuner_devinfo *di, const char *op, pt_dtype dt);

#endif
