#!/usr/bin/env bash
# Fuzzes the parsers with libFuzzer under ASan and UBSan, one target after
# the other:
#   parse     the PTX parser (tests/fuzz_parse.c)
#   expr      the expression language, elementwise emission, GEMM epilogues
#   problems  the problem-file reader (search/problem.c)
#   npy       the .npy reader (tuner/npy.c)
#   json      the store's JSON import (db_import_json)
#
#   scripts/fuzz.sh [SECONDS] [WORKDIR]
#
# SECONDS per target defaults to 300. WORKDIR (default $TMPDIR/ptxtune-fuzz)
# keeps the sanitizer build of the library, the binaries, a growing corpus
# per target (corpus/NAME; seeded from seeds/NAME, regenerated every run from
# tests/fuzz/NAME (the regression inputs meson replays as tests) and limit
# values: dimensions 2^31, 2^32, 2^40, 2^48, numbers past any type, 10k-deep
# nesting, NUL bytes), token dictionaries, logs (NAME.log) and any
# crash artifacts (NAME-crash-*, NAME-leak-*, NAME-timeout-*, NAME-oom-*).
# Reproduce a finding with: WORKDIR/fuzz_NAME WORKDIR/NAME-crash-<hash>
#
# Prints one line per target ("fuzz_NAME: N executions in S s, K findings")
# and exits 1 when any target found something (CI fails on it), 2 when the
# build failed. FUZZ_TARGETS="expr npy" runs a subset; FUZZ_JOBS=N runs N
# worker processes per target (libFuzzer -fork=N); FUZZ_KEEP_GOING=1 keeps a
# target running after a finding (fork mode; findings = new artifacts), for
# long runs by hand; CC picks the compiler (clang with libFuzzer: Debian's
# clang and libclang-rt-14-dev).
set -uo pipefail

secs=${1:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${2:-${TMPDIR:-/tmp}/ptxtune-fuzz}
cc=${CC:-clang}
jobs=${FUZZ_JOBS:-1}
keep=${FUZZ_KEEP_GOING:-0}
targets=(${FUZZ_TARGETS:-parse expr problems npy json})
mkdir -p "$work"
work=$(cd "$work" && pwd)

# ---- build: the library (and the CLI, for seeds) instrumented for coverage
if [ ! -f "$work/build/build.ninja" ]; then
    CC="$cc" meson setup "$work/build" "$root" --buildtype=debugoptimized -Dtests=disabled \
        -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" \
        >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; echo "fuzz: meson setup failed" >&2; exit 2; }
fi
if ! ninja -C "$work/build" libptxtune.a cli/ptxtune >>"$work/build.log" 2>&1; then
    tail -30 "$work/build.log" >&2
    echo "fuzz: library build failed" >&2
    exit 2
fi
libs=$(pkg-config --libs sqlite3 libpcre2-8 jansson)
for t in "${targets[@]}"; do
    # shellcheck disable=SC2086
    if ! "$cc" -g -O1 -std=c17 -D_GNU_SOURCE -I"$root" \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        "$root/tests/fuzz_$t.c" "$work/build/libptxtune.a" $libs -lm -ldl -lpthread \
        -o "$work/fuzz_$t" 2>"$work/fuzz_$t.build.log"; then
        cat "$work/fuzz_$t.build.log" >&2
        echo "fuzz: fuzz_$t does not build" >&2
        exit 2
    fi
done

# ---- seeds: typical inputs plus limit values
rm -rf "$work/seeds"
mkdir -p "$work/seeds"/{parse,expr,problems,npy,json}
cp "$root"/tests/ptx/*.ptx "$work/seeds/parse/"
for t in expr problems npy json; do # the regression inputs meson replays
    cp "$root"/tests/fuzz/$t/* "$work/seeds/$t/"
done
deep_open=$(printf '(%.0s' $(seq 10000))
deep_close=$(printf ')%.0s' $(seq 10000))
deep_neg=$(printf -- '-%.0s' $(seq 10000))
n=0
seed() { # seed DIR TEXT: one seed file (printf %b: \0 is a NUL byte)
    n=$((n + 1))
    printf '%b' "$2" >"$work/seeds/$1/s$n"
}
# expressions: EXPR \n SHAPES \n CONFIG
seed expr 'y = x * 2 + 1\nx=16x64'
seed expr 'y = softmax(x, -1)\nx=8x256'
seed expr 'y = log_softmax(x, -1)\nx=8x256\nonline=1'
seed expr 'y = gelu(x * w + b)\nx=64x512,w=512,b=512\nvec=4,unroll=2'
seed expr 'y = layernorm(x, -1) * w + b\nx=16x4096,w=4096,b=4096'
seed expr 'y = rmsnorm(x, -1)\nx=4x1024'
seed expr 'y = where(x > 0, x, 0.1 * x); z = sum(x, -1)\nx=32x128'
seed expr 'y = cast(x, f16) + mean(x, -1)\nx=2x3x4'
seed expr 'y = x + w\nx=1099511627776x1,w=1099511627776'
seed expr 'y = x\nx=2147483648'
seed expr 'y = x\nx=2147483647x2'
seed expr 'y = x\nx=4294967296'
seed expr 'y = x\nx=4294967295x4294967295'
seed expr 'y = x\nx=281474976710656'
seed expr 'y = x * w\nx=65536x65536x65536,w=65536'
seed expr 'y = x\nx=99999999999999999999999999'
seed expr 'y = 1e400 * x\nx=4'
seed expr 'y = 99999999999999999999999999999 * x\nx=4'
seed expr "y = ${deep_open}x${deep_close}\nx=4"
seed expr "y = ${deep_neg}x\nx=4"
seed expr 'y = x\0\nx=4'
seed expr 'y = x\nx=4\0x4'
seed expr 'gelu(acc * alpha + bias[n]) + r'
seed expr 'acc * scale[m] + beta * c'
seed expr "${deep_open}acc${deep_close}"
cat >"$work/expr.dict" <<'DICT'
"y = "
"x"
"w"
"acc"
"alpha"
"beta"
"bias[n]"
"[m]"
"softmax("
"log_softmax("
"layernorm("
"rmsnorm("
"sum("
"mean("
"max("
"min("
"where("
"cast("
"gelu("
"gelu_erf("
"silu("
"sigmoid("
"tanh("
"rsqrt("
"exp2("
", -1)"
", f16)"
", e4m3)"
", s8)"
"; "
"\x0a"
"x=16x64"
"x=2147483648"
"x=4294967296"
"x=1099511627776"
"x=281474976710656"
",w="
"vec=8"
"online=1"
"cache=0"
"1e400"
"-inf"
DICT
# problem files
for f in "$root"/results/problems/*.txt; do cp "$f" "$work/seeds/problems/"; done
seed problems 'gemm m=16 n=4096 k=4096 dtype=bf16 layout=nt name=q\n'
seed problems 'elementwise expr="y = softmax(x, -1)" shape=x=16x4096 dtype=bf16 name='"'"'a b'"'"'\n'
seed problems 'gemm m=2147483648 n=1 k=1\ngemm m=4294967296 n=4294967296 k=1099511627776\n'
seed problems 'gemm m=281474976710656 n=281474976710656 k=281474976710656 batch=4294967296\n'
seed problems 'gemm m=99999999999999999999999 n=1 k=1\n'
seed problems 'gemm m=8 n=8 k=8 alpha=1e400 beta=-1e-400 scale_a=nan\n'
seed problems 'elementwise expr="y = x + w" shape=x=1099511627776x1,w=1099511627776\n'
seed problems "elementwise expr=\"y = ${deep_open}x${deep_close}\" shape=x=4\n"
seed problems 'gemm m=1 n=1 k=1\0 name=x\n'
seed problems 'gemm m=1 n=1 k=1 m=2\n# c\n\n'
cat >"$work/problems.dict" <<'DICT'
"gemm"
"elementwise"
" m="
" n="
" k="
" batch="
" layout=tn"
" dtype=bf16"
" out_dtype=e4m3"
" epilogue="
" alpha="
" beta="
" d_colmajor=1"
" lda="
" scale_a="
" out_scale="
" expr=\"y = x\""
" shape=x=4x4"
" name='n'"
"2147483648"
"4294967296"
"1099511627776"
"281474976710656"
"\x0a"
"#"
DICT
# .npy files
python3 - "$work/seeds/npy" <<'PY'
import struct, sys
d = sys.argv[1]
def npy(name, header, data=b'', major=1):
    h = header.encode('latin-1')
    pre = 10 if major == 1 else 12
    h += b' ' * ((-(pre + len(h) + 1)) % 64) + b'\n'
    ln = struct.pack('<H', len(h)) if major == 1 else struct.pack('<I', len(h))
    open(f'{d}/{name}', 'wb').write(b'\x93NUMPY' + bytes([major, 0]) + ln + h + data)
npy('f4', "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", struct.pack('<6f', *range(6)))
npy('f2', "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", b'\x00\x3c' * 4)
npy('f8', "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 2), }", struct.pack('<2d', 1.5, -2))
npy('u2', "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", b'\x80\x3f' * 2)
npy('u1', "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", b'\x38\x40\x48')
npy('v2', "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", b'\0\0\x80\x3f', 2)
npy('v3', "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", b'\0\0\x80\x3f', 3)
npy('fortran', "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", struct.pack('<6f', *range(6)))
npy('empty', "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }")
npy('d31', "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648,), }")
npy('d32', "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }")
npy('d40', "{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776,), }")
npy('d48', "{'descr': '|u1', 'fortran_order': False, 'shape': (281474976710656, 1), }")
npy('huge', "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999999,), }")
npy('deep', "{'descr': '<f4', 'fortran_order': False, 'shape': " + '(' * 10000 + ')' * 10000 + ", }")
npy('nul', "{'descr': '<f4\0', 'fortran_order': False, 'shape': (1,), }", b'\0' * 4)
npy('big', "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", b'\0' * 4)
npy('obj', "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", b'\0' * 8)
PY
cat >"$work/npy.dict" <<'DICT'
"\x93NUMPY"
"'descr': "
"'<f4'"
"'<f2'"
"'<f8'"
"'<u2'"
"'|u1'"
"'fortran_order': "
"True"
"False"
"'shape': "
"(2147483648,)"
"(4294967296, 4294967296)"
"(1099511627776,)"
DICT
# JSON tables: a real export, then broken copies
if (cd "$work" && rm -f seed.db && "$work/build/cli/ptxtune" tune elementwise expr='y = x * 2' \
        shape=x=16x64 --backend mock --budget 3 --quiet --top 0 --db seed.db >/dev/null 2>&1 &&
        "$work/build/cli/ptxtune" export --format json --db seed.db >"$work/seeds/json/table" 2>/dev/null); then
    python3 - "$work/seeds/json" <<'PY'
import json, sys
d = sys.argv[1]
t = json.load(open(f'{d}/table'))
def out(name, obj):
    open(f'{d}/{name}', 'w').write(json.dumps(obj) if not isinstance(obj, str) else obj)
import copy
def mut(name, f):
    c = copy.deepcopy(t)
    if c['rows']:
        f(c['rows'][0])
    out(name, c)
mut('neg', lambda r: r['measurement'].__setitem__('median', -1.0) if 'measurement' in r else None)
mut('final', lambda r: r.__setitem__('final', 1))
mut('cc', lambda r: r['fingerprint'].__setitem__('cc', 'ninety'))
mut('driver', lambda r: r['fingerprint'].__setitem__('driver', 13000))
mut('key', lambda r: r['fingerprint'].__setitem__('key', '0000000000000000'))
mut('hash', lambda r: r['kernel'].__setitem__('hash', 'ffffffffffffffff'))
mut('dims', lambda r: r['problem'].__setitem__('key', 'gemm m=4294967296 n=4294967296 k=1099511627776'))
import re
out('huge', re.sub(r'"version": [0-9]+', '"version": 1e400', json.dumps(t), count=1))
out('deep', '{"format": "ptxtune-table", "version": 1, "rows": ' + '[' * 10000 + ']' * 10000 + '}')
out('nul', '{"format": "ptxtune-table\\u0000", "version": 1, "rows": []}')
out('rawnul', '{"format": "ptxtune-table", "version": 1, "rows": []}\0')
out('big', '{"format": "ptxtune-table", "version": 99999999999999999999999, "rows": []}')
PY
fi
printf '{"format": "ptxtune-table", "version": 1, "rows": []}' >"$work/seeds/json/min"
cat >"$work/json.dict" <<'DICT'
"\"format\": \"ptxtune-table\""
"\"version\": 1"
"\"version\": 2"
"\"index\": "
"\"file_bytes\": "
"\"columns\": "
"\"rows\": "
"\"fingerprint\": "
"\"problem\": "
"\"kernel\": "
"\"measurement\": "
"\"median\": "
"\"final\": "
"true"
"false"
"null"
"1e400"
"-1"
"0"
"\\u0000"
DICT
cat >"$work/parse.dict" <<'DICT'
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
"4294967296"
"99999999999999999999999"
"{"
"}"
"["
"]"
"/*"
"*/"
"//"
DICT

# ---- run: each target for SECONDS; a finding stops that target
declare -A maxlen=([parse]=8192 [expr]=32768 [problems]=32768 [npy]=32768 [json]=32768)
found=0
for t in "${targets[@]}"; do
    mkdir -p "$work/corpus/$t"
    opts=(-max_total_time="$secs" -dict="$work/$t.dict" -max_len="${maxlen[$t]}" -timeout=10
          -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/$t-")
    fork=0
    if [ "$keep" = 1 ]; then
        fork=1
        opts+=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    elif [ "$jobs" -gt 1 ]; then
        fork=1
        opts+=(-fork="$jobs" -ignore_crashes=0)
    fi
    touch "$work/.stamp-$t"
    start=$(date +%s)
    (cd "$work" && "$work/fuzz_$t" "${opts[@]}" "$work/corpus/$t" "$work/seeds/$t") \
        >"$work/$t.log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    execs=$(grep -h 'stat::number_of_executed_units' "$work/$t.log" | awk '{ s += $2 } END { print s + 0 }')
    if [ "$fork" = 1 ]; then # fork mode prints "#N: cov: ..." lines instead
        execs=$(grep -oE '^#[0-9]+' "$work/$t.log" | tail -1 | tr -d '#')
    fi
    arts=$(find "$work" -maxdepth 1 -name "$t-*" -newer "$work/.stamp-$t" | sort)
    nfind=$(printf '%s' "$arts" | grep -c . || true)
    if [ "$rc" -ne 0 ] && [ "$nfind" -eq 0 ]; then nfind=1; fi
    if [ "$nfind" -gt 0 ]; then
        found=$((found + 1))
        grep -E 'ERROR: |runtime error|bad failure|does not parse|parses to|inconsistent|winners with|integrity' \
            "$work/$t.log" | sort | uniq -c | sort -rn | head -5 | sed "s/^/fuzz_$t: /" >&2
        printf '%s\n' "$arts" | grep . | sed "s/^/fuzz_$t: artifact /" >&2
    fi
    echo "fuzz_$t: ${execs:-0} executions in $took s, $nfind findings (corpus $(ls "$work/corpus/$t" | wc -l) files)"
done
echo "fuzz: ${#targets[@]} targets, $found with findings (logs in $work)"
[ "$found" -eq 0 ]
