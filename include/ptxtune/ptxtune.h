/* ptxtune's public C API (C99/C11/C17 and C++17, -Wall -Wextra -Wpedantic
 * clean): include this header, link with `pkg-config --libs ptxtune`.
 * Every name is prefixed ptxtune_ / PTXTUNE_; nothing else is exported by
 * libptxtune.so. The engine runtime is include/ptxtune/runtime.h
 * (docs/runtime.md). */
#ifndef PTXTUNE_PTXTUNE_H
#define PTXTUNE_PTXTUNE_H

#define PTXTUNE_VERSION_MAJOR 0
#define PTXTUNE_VERSION_MINOR 1
#define PTXTUNE_VERSION_PATCH 0

#include "ptxtune/runtime.h"

#endif
