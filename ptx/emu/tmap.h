/* The emulator's tensor maps (CUtensorMap look-alikes): what TMA
 * instructions (cp.async.bulk.tensor) read through their tensor-map
 * operand.
 *
 * The driver's 128-byte CUtensorMap layout is undocumented, so the emulator
 * never guesses it: emu_tmap_encode validates exactly the parameters
 * cuTensorMapEncodeTiled takes, against every constraint its cuda.h
 * comment states (../shared/ref/ptx-sm90.md section 4.3), and packs them
 * into a private 128-byte blob: the 8 bytes "ptxtTMA1", a u32 version, a
 * u32 FNV-1a checksum of bytes 16..127, then the fields, little-endian.
 * The blob is as opaque to a kernel as the driver's: one that writes inside
 * a map fails decode (checksum), here and on a GPU alike. The emu backend,
 * ptxtune exec and tests/fake_cuda.c's cuTensorMapEncodeTiled all encode
 * here; the emulator's TMA engine decodes here.
 *
 * Enum values are CUDA's (CUtensorMapDataType, CUtensorMapInterleave,
 * CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill), so
 * the fake driver passes its arguments through unchanged.
 *
 * The box model (sm90 ref 4.4): box element (b0..b{r-1}) (b0 fastest) sits
 * densely, row-major, at byte dst + i * elementSize (i its linear index),
 * then the map's swizzle is applied to that absolute shared address; its
 * global element is (c0 + b0, c1 + b1, ...) at byte gaddr + (c0+b0) * es +
 * sum_{d>=1} (cd+bd) * globalStrides[d-1]; an element with any coordinate
 * < 0 or >= globalDim is out of bounds: a load fills it (zero, or NaN with
 * NAN_REQUEST_ZERO_FMA) and a store skips it. */
#ifndef PTX_EMU_TMAP_H
#define PTX_EMU_TMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "ptx/base.h"

enum { EMU_TMAP_BYTES = 128, EMU_TMAP_MAX_RANK = 5, EMU_TMAP_VERSION = 1 };

/* CUtensorMapDataType values */
enum {
    EMU_TMAP_U8 = 0, EMU_TMAP_U16, EMU_TMAP_U32, EMU_TMAP_S32, EMU_TMAP_U64, EMU_TMAP_S64,
    EMU_TMAP_F16, EMU_TMAP_F32, EMU_TMAP_F64, EMU_TMAP_BF16, EMU_TMAP_F32_FTZ, EMU_TMAP_TF32,
    EMU_TMAP_TF32_FTZ, EMU_TMAP_16U4_ALIGN8B, EMU_TMAP_16U4_ALIGN16B, EMU_TMAP_16U6_ALIGN16B,
    EMU_TMAP_NDTYPES
};
/* CUtensorMapInterleave */
enum { EMU_TMAP_INTERLEAVE_NONE = 0, EMU_TMAP_INTERLEAVE_16B, EMU_TMAP_INTERLEAVE_32B };
/* CUtensorMapSwizzle (the _ATOM_ modes are compute capability 10 and up) */
enum {
    EMU_TMAP_SWIZZLE_NONE = 0, EMU_TMAP_SWIZZLE_32B, EMU_TMAP_SWIZZLE_64B, EMU_TMAP_SWIZZLE_128B,
    EMU_TMAP_SWIZZLE_128B_ATOM_32B, EMU_TMAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
    EMU_TMAP_SWIZZLE_128B_ATOM_64B
};
/* CUtensorMapL2promotion */
enum { EMU_TMAP_L2_NONE = 0, EMU_TMAP_L2_64B, EMU_TMAP_L2_128B, EMU_TMAP_L2_256B };
/* CUtensorMapFloatOOBfill */
enum { EMU_TMAP_OOB_ZERO = 0, EMU_TMAP_OOB_NAN = 1 };

/* Exactly cuTensorMapEncodeTiled's parameters. Dimension 0 is the
 * innermost (contiguous) one, as in CUDA (numpy's last axis). */
typedef struct emu_tmap_desc {
    int dtype;                     /* EMU_TMAP_U8 .. */
    int rank;                      /* tensorRank, 1..5 */
    uint64_t gaddr;                /* globalAddress (a device address) */
    uint64_t dims[EMU_TMAP_MAX_RANK];     /* globalDim, elements */
    uint64_t strides[EMU_TMAP_MAX_RANK - 1]; /* globalStrides, bytes, of dims 1..rank-1 */
    uint32_t box[EMU_TMAP_MAX_RANK];      /* boxDim, elements */
    uint32_t estrides[EMU_TMAP_MAX_RANK]; /* elementStrides */
    int interleave, swizzle, l2promo, oobfill;
} emu_tmap_desc;

/* Bytes per element of a dtype (0: a packed sub-byte type, or unknown). */
int emu_tmap_elem_bytes(int dtype);
/* "bf16", "f32", ... (CUDA's names without the prefix: "UINT8" -> "u8"). */
const char *emu_tmap_dtype_name(int dtype);
/* "none" "32B" "64B" "128B" "128B_ATOM_32B" ... ("?" when out of range). */
const char *emu_tmap_swizzle_name(int swizzle);
/* Bytes of the swizzle's span (32, 64, 128; 0 for none). */
uint32_t emu_tmap_swizzle_span(int swizzle);

/* Every constraint cuTensorMapEncodeTiled states, in its order; the first
 * one broken is PT_EINVAL with one line naming the parameter and its value,
 * e.g. "boxDim[0]*elementSize = 136 bytes exceeds the 128B swizzle span".
 * Parameters of the ranks above d->rank are ignored. */
int emu_tmap_validate(const emu_tmap_desc *d, pt_err *e);
/* Validates and packs d into out (the blob described above). */
int emu_tmap_encode(const emu_tmap_desc *d, uint8_t out[EMU_TMAP_BYTES], pt_err *e);
/* Unpacks a blob: PT_EINVAL ("not a ptxtune tensor map (bad magic)", a
 * version or checksum mismatch: "tensor map bytes modified (checksum ...)",
 * or fields that no longer validate). */
int emu_tmap_decode(const uint8_t in[EMU_TMAP_BYTES], emu_tmap_desc *d, pt_err *e);

/* What the emulator's TMA model can run beyond a valid map (PT_EUNSUPPORTED
 * naming the field otherwise): no interleave, elementStrides all 1, a
 * swizzle of none/32B/64B/128B, and with a swizzle an inner box row of
 * exactly the span (how the hardware lays out a narrower row is
 * [unverified], sm90 ref 4.4; the GPU probe decides). */
int emu_tmap_emulable(const emu_tmap_desc *d, pt_err *e);

/* The swizzle function of a mode on an absolute shared byte address (sm90
 * ref 2.3: 128B x ^ ((x >> 7) & 7) << 4; 64B two bits; 32B one bit). */
uint32_t emu_tmap_swizzle(int swizzle, uint32_t addr);

/* Elements of one box (the product of boxDim over the rank; elementStrides
 * 1) and its bytes: what a load's complete_tx counts, filled elements
 * included. */
uint64_t emu_tmap_box_elems(const emu_tmap_desc *d);
uint64_t emu_tmap_box_bytes(const emu_tmap_desc *d);

/* Where box element i (linear, dim 0 fastest) of the box at coordinates
 * coord[0..rank) goes: *smem the swizzled absolute shared byte address for a
 * box whose first byte is at dst; *gaddr its global byte address, false when
 * the element is out of bounds (*gaddr then 0). Requires emu_tmap_emulable. */
bool emu_tmap_box_elem(const emu_tmap_desc *d, const int32_t *coord, uint32_t dst, uint64_t i,
                       uint32_t *smem, uint64_t *gaddr);

/* The bytes an out-of-bounds element is filled with (elem_bytes of them):
 * zero, or for EMU_TMAP_OOB_NAN the dtype's canonical quiet NaN (f32
 * 0x7fffffff, f16/bf16 0x7fff, f64 0x7fffffffffffffff; [unverified] against
 * the hardware's pattern, the GPU probe decides). */
void emu_tmap_fill_bytes(const emu_tmap_desc *d, uint8_t out[8]);

#endif
