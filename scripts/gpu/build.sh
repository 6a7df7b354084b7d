#!/usr/bin/env bash
# Builds ptxtune with one plain `cc` command line: no meson, no ninja, no
# package registry. For machines that have a C compiler and the CUDA
# toolkit but none of our build tools (the GPU machine of the device tool).
#
#   scripts/gpu/build.sh [OUTDIR]        # default OUTDIR: build-gpu
#   scripts/gpu/build.sh --stage [OUTDIR]
#   scripts/gpu/build.sh --sources       # print the source list and exit
#
# The library sources are read from the meson.build files (every subdir of
# the root meson.build but cli, bench and tests), so the list never drifts.
# PCRE2, SQLite and Jansson are linked statically when their .a files are
# found (then the binary needs nothing but glibc at run time); headers and
# .a files are looked up on the system first, then in OUTDIR/deps.
# --stage also copies those headers and .a files into OUTDIR/deps, so a
# carried OUTDIR can rebuild on a machine without the -dev packages.
# libcuda and libnvJitLink are loaded at run time (dlopen), never linked.
set -euo pipefail

stage=0
sources=0
if [ "${1:-}" = "--stage" ]; then stage=1; shift; fi
if [ "${1:-}" = "--sources" ]; then sources=1; shift; fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${1:-$ROOT/build-gpu}
CC=${CC:-cc}
CUDA=${CUDA_ROOT:-/usr/local/cuda}
if [ $sources = 0 ]; then mkdir -p "$OUTDIR"; OUTDIR=$(cd "$OUTDIR" && pwd); fi

# Sources named in a meson.build: 'x.c' items of files(...), and subdirs.
meson_sources() { # dir
  local d=$1
  grep -o "'[A-Za-z0-9_/]*\.c'" "$ROOT/$d/meson.build" | tr -d "'" | sed "s|^|$d/|"
  local s
  for s in $(grep -o "subdir('[^']*')" "$ROOT/$d/meson.build" | sed "s/subdir('\(.*\)')/\1/"); do
    meson_sources "$d/$s"
  done
}
SRC=()
for d in $(grep -o "^subdir('[^']*')" "$ROOT/meson.build" | sed "s/subdir('\(.*\)')/\1/"); do
  case $d in cli|bench|tests) continue ;; esac
  while read -r f; do SRC+=("$ROOT/${f#./}"); done < <(meson_sources "$d")
done
while read -r f; do SRC+=("$ROOT/$f"); done < <(meson_sources cli)
if [ $sources = 1 ]; then printf '%s\n' "${SRC[@]}"; exit 0; fi

# A dependency: header dir and link argument (static .a when present).
LIBS=()
INCS=()
STAGE_H=()
STAGE_A=()
find_dep() { # header lib
  local h=$1 l=$2 a="" hdir=""
  for dir in /usr/include /usr/local/include "$OUTDIR/deps/include"; do
    if [ -f "$dir/$h" ]; then hdir=$dir; break; fi
  done
  if [ -z "$hdir" ]; then
    echo "build.sh: $h not found (install the -dev package, or carry a build-gpu/deps staged with --stage)" >&2
    exit 3
  fi
  [ "$hdir" = /usr/include ] || INCS+=("-I$hdir")
  STAGE_H+=("$hdir/$h")
  for cand in "$($CC -print-file-name=lib$l.a)" "$OUTDIR/deps/lib/lib$l.a"; do
    if [ -f "$cand" ]; then a=$cand; break; fi
  done
  if [ -n "$a" ]; then LIBS+=("$a"); STAGE_A+=("$a"); else LIBS+=("-l$l"); fi
}
find_dep pcre2.h pcre2-8
find_dep sqlite3.h sqlite3
find_dep jansson.h jansson

CUDA_ARGS=()
if [ -f "$CUDA/include/cuda.h" ] && [ -f "$CUDA/include/nvJitLink.h" ]; then
  CUDA_ARGS=(-isystem "$CUDA/include" -DPT_HAVE_CUDA_HEADERS=1)
else
  echo "build.sh: no CUDA headers under $CUDA: driver and nvJitLink support compiled out" >&2
fi
VERSION=$(grep -o "version : '[^']*'" "$ROOT/meson.build" | head -1 | sed "s/version : '\(.*\)'/\1/")
REV=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# One cc per source, all cores at once, then one link.
CFLAGS=(-std=c17 -O2 -g -D_GNU_SOURCE -fno-strict-aliasing -w -I"$ROOT" -I"$ROOT/include" "${INCS[@]}"
        "${CUDA_ARGS[@]}" -DPT_CUDA_ROOT="\"$CUDA\"" -DPT_VERSION="\"$VERSION\""
        -DPT_GIT_REV="\"$REV\"")
mkdir -p "$OUTDIR/obj"
OBJS=()
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
running=0
for f in "${SRC[@]}"; do
  rel=${f#"$ROOT"/}
  o="$OUTDIR/obj/${rel//\//_}.o"
  OBJS+=("$o")
  "$CC" "${CFLAGS[@]}" -c "$f" -o "$o" &
  running=$((running + 1))
  if [ $running -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
while [ $running -gt 0 ]; do wait -n; running=$((running - 1)); done
"$CC" "${OBJS[@]}" -o "$OUTDIR/ptxtune" "${LIBS[@]}" -lm -ldl -lpthread
rm -rf "$OUTDIR/obj" # keeps a carried OUTDIR small

if [ $stage = 1 ]; then
  mkdir -p "$OUTDIR/deps/include" "$OUTDIR/deps/lib"
  for h in "${STAGE_H[@]}"; do
    cp -f "$h" "$OUTDIR/deps/include/"
    # headers that include siblings (jansson_config.h, sqlite3ext.h)
    for extra in jansson_config.h; do
      [ -f "$(dirname "$h")/$extra" ] && cp -f "$(dirname "$h")/$extra" "$OUTDIR/deps/include/"
    done
  done
  for a in "${STAGE_A[@]}"; do cp -f "$a" "$OUTDIR/deps/lib/"; done
fi
echo "build.sh: $OUTDIR/ptxtune (${#SRC[@]} sources; $("$OUTDIR/ptxtune" --version))"
