/* The Hopper GEMM (issue 13): the wgmma main loop of the gemm op
 * (gen/gemm_wgmma.c) on the emulator against the float64 reference, every
 * detector on, under the lazy, eager and random async schedules; the
 * tensor-map binding of the verifier; and the compile gate over the
 * sm_90a space.
 *
 * An emulated case is emit -> print -> parse (identical) -> the emu
 * backend at the chosen schedule -> tuner_verify (random inputs, poisoned
 * outputs, the verifier's error model). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/gemm.h"
#include "ptx/compile.h"
#include "ptx/emu/tmap.h"
#include "ptx/parse.h"
#include "tuner/backend.h"
#include "tuner/emu_check.h"
#include "tuner/verify.h"

/* ---- item 4: the verifier binds tensor maps ---- */

/* A launch whose parameter 1 is a map over input 0 at byte offset 256:
 * tuner_args_bind encodes it over the input's device pointer (the value
 * the emulator's TMA decodes), 64-byte aligned; before issue 13 the
 * binder refused every tensor map. */
Test(gemm_sm90, args_bind_encodes_tensor_maps)
{
    pt_err e = {0};
    tuner_dev *d = NULL;
    tuner_dev_opts o = {0};
    cr_assert_eq(tuner_dev_open("emu", &o, &d, &e), PT_OK, "%s", e.msg);
    tuner_ptr in[2] = {0}, out[1] = {0};
    cr_assert_eq(tuner_alloc(d, 64 * 128 * 2 + 256, &in[0], &e), PT_OK, "%s", e.msg);
    cr_assert_eq(tuner_alloc(d, 1024, &out[0], &e), PT_OK, "%s", e.msg);
    pt_launch l;
    memset(&l, 0, sizeof l);
    l.nargs = 3;
    l.args[0] = (pt_arg){PT_ARG_OUTPUT, 0, 0, 0};
    l.args[1] = (pt_arg){PT_ARG_TENSORMAP, 0, 0, 0};
    l.args[2] = (pt_arg){PT_ARG_U32, 0, 7, 0};
    l.ntmaps = 1;
    l.tmaps[0] = (pt_tmap){.of = PT_ARG_INPUT, .index = 0, .offset = 256, .dtype = EMU_TMAP_BF16,
                           .rank = 2, .dims = {128, 64}, .strides = {256}, .box = {64, 64},
                           .swizzle = EMU_TMAP_SWIZZLE_128B, .l2promo = EMU_TMAP_L2_256B};
    tuner_args a;
    cr_assert_eq(tuner_args_bind(d, &a, &l, in, out, NULL, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(*(uint64_t *)a.p[0], out[0]);
    cr_expect_eq(*(uint32_t *)a.p[2], 7u);
    cr_expect_eq((uintptr_t)a.p[1] % 64, 0u, "the map is 64-byte aligned");
    emu_tmap_desc m;
    cr_assert_eq(emu_tmap_decode(a.p[1], &m, &e), PT_OK, "%s", e.msg);
    cr_expect_eq(m.gaddr, in[0] + 256, "the map bakes in the input's pointer plus its offset");
    cr_expect_eq(m.dims[0], 128u);
    cr_expect_eq(m.dims[1], 64u);
    cr_expect_eq(m.box[0], 64u);
    cr_expect_eq(m.swizzle, EMU_TMAP_SWIZZLE_128B);
    /* a map the encoder refuses (box row past the swizzle span) is an error */
    l.tmaps[0].box[0] = 128;
    cr_expect_neq(tuner_args_bind(d, &a, &l, in, out, NULL, &e), PT_OK);
    cr_expect(strstr(e.msg, "swizzle") != NULL, "%s", e.msg);
    /* an index past the launch's maps */
    l.tmaps[0].box[0] = 64;
    l.args[1].index = 3;
    cr_expect_eq(tuner_args_bind(d, &a, &l, in, out, NULL, &e), PT_EINVAL);
    tuner_free(d, in[0]);
    tuner_free(d, out[0]);
    tuner_dev_close(d);
}
