#!/usr/bin/env bash
# Fuzzes the PTX parser (ptx/parse.c) with libFuzzer under ASan and UBSan.
#
#   scripts/fuzz.sh [SECONDS] [WORKDIR]
#
# SECONDS defaults to 300. WORKDIR (default $TMPDIR/ptxtune-fuzz) keeps the
# binary, the growing corpus (seeded from tests/ptx/*.ptx), a token
# dictionary and any crash artifacts (crash-*, leak-*, timeout-*). Reproduce
# a finding with: WORKDIR/fuzz_parse WORKDIR/crash-<hash>
# FUZZ_JOBS=N runs N worker processes (libFuzzer -fork=N); CC picks the
# compiler (clang with libFuzzer). Meson does not build this: it compiles the
# library sources it needs directly.
set -euo pipefail

secs=${1:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${2:-${TMPDIR:-/tmp}/ptxtune-fuzz}
cc=${CC:-clang}
jobs=${FUZZ_JOBS:-1}

mkdir -p "$work/corpus"
cp "$root"/tests/ptx/*.ptx "$work/corpus/"

"$cc" -g -O1 -std=c17 -D_GNU_SOURCE -DPT_VERSION='"fuzz"' -I"$root" \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "$root"/ptx/base.c "$root"/ptx/target.c "$root"/ptx/ir.c "$root"/ptx/print.c \
    "$root"/ptx/parse.c "$root"/tests/fuzz_parse.c -lm -o "$work/fuzz_parse"

# Tokens that take random bytes a long way into the grammar.
cat > "$work/ptx.dict" <<'DICT'
".version 7.0"
".version 8.1"
".target sm_80"
".target sm_89"
".target sm_90a"
".address_size 64"
".visible"
".entry"
".param"
".ptr"
".global"
".align"
".extern"
".shared"
".reg"
".pred"
".b8"
".b16"
".b32"
".b64"
".u32"
".u64"
".s32"
".f32"
".f64"
".f16"
".f16x2"
".v2"
".v4"
".maxntid"
".reqntid"
".minnctapersm"
".maxnreg"
"%r<"
"%rd<"
"%p<"
"%f<"
"%r1"
"%rd1"
"%p1"
"%f1"
"%tid.x"
"%laneid"
"@%p1 "
"@!%p1 "
"$L__BB0_1"
"ld.param.u64"
"ld.global.nc.v4.f32"
"st.global.f32"
"mov.u32"
"add.s32"
"mad.lo.s32"
"mul.wide.s32"
"setp.lt.u32"
"bra.uni"
"ret;"
"cvta.to.global.u64"
"cp.async.cg.shared.global"
"cp.async.commit_group;"
"cp.async.wait_group"
"bar.sync 0;"
"shfl.sync.bfly.b32"
"ldmatrix.sync.aligned.m8n8.x4.shared.b16"
"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
"0f3F800000"
"0d3FF0000000000000"
"0x1f"
"1.5"
"-1"
"017"
"1U"
"+-4"
"{"
"}"
"["
"]"
"/*"
"*/"
"//"
DICT

opts=(-max_total_time="$secs" -dict="$work/ptx.dict" -max_len=8192 -timeout=10
      -print_final_stats=1 -artifact_prefix="$work/")
if [ "$jobs" -gt 1 ]; then
    opts+=(-fork="$jobs" -ignore_crashes=0)
fi
exec "$work/fuzz_parse" "${opts[@]}" "$work/corpus"
