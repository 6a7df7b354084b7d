/* The kernel-building kit: layouts, MMA atoms, copies, pipelines, fragment
 * ops and dtype I/O as small values that the GEMM, row and attention
 * generators compose (docs/design.md, "The kit"). One header for users;
 * one file (and one sub-header) per concept under gen/kit/. */
#ifndef GEN_KIT_H
#define GEN_KIT_H

#include "gen/kit/build.h"
#include "gen/kit/layout.h"
#include "gen/kit/atom.h"
#include "gen/kit/copy.h"
#include "gen/kit/pipe.h"
#include "gen/kit/frag.h"
#include "gen/kit/reduce.h"
#include "gen/kit/io.h"
#include "gen/kit/tma.h"
#include "gen/kit/attn.h"

#endif
