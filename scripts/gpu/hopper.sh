#!/usr/bin/env bash
# The Hopper probe check (issue 12): the layout / TMA / mbarrier probe
# kernels of tests/ptx/sm90/, the cluster probes (DSMEM exchange with
# atom/red.shared::cluster, TMA multicast with remote mbarrier arrives,
# barrier.cluster; launched with --cluster), the fixed twins of the
# emulator tests' wgmma and cluster kernels (tests/ptx/sm90/emu/) and the
# warp-specialised GEMM
# (gemm_ws_bf16.ptx) run through `ptxtune exec` on the emulator under
# three schedules and on the GPU, and every output is
# compared bit for bit: the emulator's schedules with each other (a correct
# kernel gives the same bytes under lazy, eager and random:SEED) and the GPU
# with the emulator. Integer-valued inputs, so every comparison is exact.
#
#   scripts/gpu/hopper.sh [--no-gpu] [--budget SECONDS]
#
# --no-gpu  the CPU half: the emulator runs and their agreement only. With
#           LD_LIBRARY_PATH=<build>/tests (the fake libcuda.so.1 over the
#           emulator) the GPU half runs too, against the fake: the script's
#           CI test on a machine without a GPU.
# --budget  wall-clock budget (default 290 s, for one H200 run inside a
#           5-minute window); cases that would start past it are skipped
#           and listed in summary.md.
# $OUT: where the tables go (default results/h200 when a GPU runs the GPU
# half, build-gpu/hopper-nogpu otherwise). At most 8 files: summary.md,
# probes.csv (one row per case: the emulator's verdicts), diff.csv (GPU vs
# emulator, one row per case), env.txt, devices.json, log.txt, raw.tgz
# (every output and stderr). Needs bash and python3 (standard library only),
# a ptxtune binary ($PTXTUNE, or a carried build-gpu/ptxtune, or a build
# under build*/cli/), and for the GPU half a CUDA driver. Exit: 0 all agree,
# 1 a check failed, 3 no ptxtune, 4 no GPU (rerun with --no-gpu).
set -uo pipefail

. "$(dirname "$0")/common.sh" # ROOT, T0, elapsed, budget_arg, pt_find
NOGPU=0
BUDGET=290
while [ $# -gt 0 ]; do
  case $1 in
    --no-gpu) NOGPU=1 ;;
    --budget)
      [ $# -ge 2 ] || { echo "hopper.sh: --budget needs a value" >&2; exit 2; }
      budget_arg hopper.sh "$2"; BUDGET=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    *) echo "hopper.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

# ---- ptxtune ----
if ! pt_find; then
  echo "hopper.sh: no ptxtune binary (set PTXTUNE, or carry build-gpu/ptxtune: scripts/gpu/build.sh --stage build-gpu)" >&2
  exit 3
fi

# ---- the GPU (or the fake driver) ----
GPU=0
DEVJSON=$("$PT" devices --json 2>/dev/null) && [ -n "$DEVJSON" ] && [ "$DEVJSON" != "[]" ] && GPU=1
if [ "$GPU" = 0 ] && [ "$NOGPU" = 0 ]; then
  echo "hopper.sh: no CUDA device ($("$PT" devices 2>&1 | head -1)); rerun with --no-gpu for the CPU half" >&2
  exit 4
fi
if [ -z "${OUT:-}" ]; then
  if [ "$GPU" = 1 ] && [ "$NOGPU" = 0 ]; then OUT=$ROOT/results/h200; else OUT=$ROOT/build-gpu/hopper-nogpu; fi
fi
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hopper.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RAW=$WORK/raw
mkdir -p "$RAW"
: > "$OUT/log.txt"
log() { echo "[$(printf '%4d' "$(elapsed)")s] $*" | tee -a "$OUT/log.txt" >&2; }
log "ptxtune: $PT ($("$PT" --version)); GPU half: $([ "$GPU" = 1 ] && echo yes || echo no); out: $OUT"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  echo "ptxtune: $("$PT" --version)"
  echo "host: $(uname -srm), $(nproc 2>/dev/null || echo '?') cores"
  echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
  else
    echo "nvidia-smi: none"
  fi
} > "$OUT/env.txt"
echo "${DEVJSON:-[]}" > "$OUT/devices.json"

# ---- inputs (python3, standard library: no numpy needed) ----
py() { python3 - "$@"; }
py "$WORK" <<'PY' || { log "python3 failed writing the inputs"; exit 3; }
import struct, sys
d = sys.argv[1]
def save(name, descr, shape, fmt, vals):
    dims = ''.join('%d, ' % s for s in shape).rstrip(' ') if len(shape) > 1 else '%d,' % shape[0]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pad = (64 - (10 + len(hdr) + 1) % 64) % 64
    h = (hdr + ' ' * pad + '\n').encode()
    with open('%s/%s' % (d, name), 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h)
        f.write(b''.join(struct.pack('<' + fmt, v) for v in vals))
# bf16 bits 1..1440 (exact integers as bit patterns), f32 integer values, u8
save('a16.npy', '<u2', (20, 72), 'H', [i + 1 for i in range(20 * 72)])
save('a32.npy', '<f4', (20, 72), 'f', [float(i + 1) for i in range(20 * 72)])
save('a8.npy', '|u1', (20, 80), 'B', [(i * 7 + 1) % 251 + 1 for i in range(20 * 80)])
# the warp-specialised GEMM's A (128 x 128) and B (256 x 128): small integers in bf16
bf = lambda x: struct.unpack('<I', struct.pack('<f', float(x)))[0] >> 16
save('gA.npy', '<u2', (128, 128), 'H', [bf((i * 3 + k * 5) % 5 - 2) for i in range(128) for k in range(128)])
save('gB.npy', '<u2', (256, 128), 'H', [bf((j * 7 + k * 3) % 5 - 2) for j in range(256) for k in range(128)])
# the multicast probe's 16 x 64 f32 tensor: y * 100 + x + 0.5 (exact)
save('m32.npy', '<f4', (16, 64), 'f', [y * 100 + x + 0.5 for y in range(16) for x in range(64)])
PY

# ---- the cases: name | file | grid | block | smem | arguments ----
# TMA loads: a box at (c0, c1) (innermost first) with OOB on two sides, every
# swizzle and both fills; the box's bytes raw (placement and fill visible).
CASES=$WORK/cases.txt
{
  for sw in none 32 64 128; do
    inner=$([ "$sw" = none ] && echo 32 || echo $((sw / 2)))
    nb=$((inner * 2 * 8))
    for oob in zero nan; do
      echo "tma_load_bf16_${sw}_${oob}|tests/ptx/sm90/tma_load_sm90.ptx|1|128|4096|--arg tmap:a16.npy:bf16:20x72:8x${inner}:${sw}:${oob} --arg out:OUT:u8:${nb} --arg s32:-8 --arg s32:15 --arg u32:${nb}"
    done
  done
  echo "tma_load_f32_128_nan|tests/ptx/sm90/tma_load_sm90.ptx|1|128|4096|--arg tmap:a32.npy:f32:20x72:8x32:128:nan --arg out:OUT:u8:1024 --arg s32:60 --arg s32:-3 --arg u32:1024"
  echo "tma_load_u8_64|tests/ptx/sm90/tma_load_sm90.ptx|1|128|4096|--arg tmap:a8.npy:u8:20x80:8x64:64 --arg out:OUT:u8:512 --arg s32:40 --arg s32:2 --arg u32:512"
  echo "tma_load_u8_none_inner|tests/ptx/sm90/tma_load_sm90.ptx|1|128|4096|--arg tmap:a8.npy:u8:20x80:4x16 --arg out:OUT:u8:64 --arg s32:72 --arg s32:18 --arg u32:64"
  # TMA stores: clipped at the destination's edges (the rest keeps exec's poison)
  echo "tma_store_bf16_128|tests/ptx/sm90/tma_store_sm90.ptx|1|128|4096|--arg tmap:a16.npy:bf16:20x72:8x64:128 --arg tmap:@2:bf16:12x64:8x64:128 --arg out:OUT:u8:1536 --arg s32:0 --arg s32:14 --arg s32:0 --arg s32:6 --arg u32:1024"
  echo "tma_store_bf16_none|tests/ptx/sm90/tma_store_sm90.ptx|1|128|4096|--arg tmap:a16.npy:bf16:20x72:8x32 --arg tmap:@2:bf16:12x64:8x32 --arg out:OUT:u8:1536 --arg s32:3 --arg s32:2 --arg s32:48 --arg s32:-2 --arg u32:512"
  # mbarrier parity / token truth table
  echo "mbarrier_truth|tests/ptx/sm90/mbarrier_probe_sm90.ptx|1|32|0|--arg out:OUT:u32:16"
  # wgmma (sm_90a): the emulator tests' fixed twins, D = ones x ones
  # issue 12's acceptance GEMM: TMA producer, two wgmma consumer warpgroups, 4-stage ring
  echo "gemm_ws_bf16|tests/ptx/sm90/gemm_ws_bf16.ptx|1|384|197696|--arg tmap:gA.npy:bf16:128x128:128x64:128 --arg tmap:gB.npy:bf16:256x128:256x64:128 --arg out:OUT:f32:32768 --arg u32:256 --arg u32:128"
  for k in acc_early desc_mismatch no_fence proxy smem_write; do
    echo "wgmma_${k}_fixed|tests/ptx/sm90/emu/wgmma_${k}_fixed.ptx|1|128|0|--arg out:OUT:f32:512"
  done
  # clusters (issue 12 item 4): DSMEM exchange (mapa, ld/atom/red.shared::cluster,
  # getctarank, the cluster registers), TMA multicast of each rank's slice with
  # remote mbarrier arrives, barrier.cluster split around an mbarrier wait
  echo "cluster_dsmem_2|tests/ptx/sm90/cluster_dsmem_sm90.ptx|4|64|0|--cluster 2 --arg out:OUT:u32:576"
  echo "cluster_dsmem_8|tests/ptx/sm90/cluster_dsmem_sm90.ptx|16|64|0|--cluster 8 --arg out:OUT:u32:2304"
  echo "cluster_dsmem_2x2|tests/ptx/sm90/cluster_dsmem_sm90.ptx|2,4|64|0|--cluster 2,2 --arg out:OUT:u32:1152"
  echo "cluster_multicast_2|tests/ptx/sm90/cluster_multicast_sm90a.ptx|4|64|0|--cluster 2 --arg tmap:m32.npy:f32:16x64:4x32 --arg out:OUT:u32:1026"
  echo "cluster_multicast_4|tests/ptx/sm90/cluster_multicast_sm90a.ptx|8|64|0|--cluster 4 --arg tmap:m32.npy:f32:16x64:2x32 --arg out:OUT:u32:2050"
  for k in exit race window deadlock; do
    echo "cluster_${k}_fixed|tests/ptx/sm90/emu/cluster_${k}_fixed.ptx|2|64|0|--cluster 2 --arg out:OUT:u32:128"
  done
  echo "wgmma_pingpong|tests/ptx/sm90/emu/wgmma_pingpong.ptx|1|384|0|--arg out:OUT:f32:1536"
} > "$CASES"

cd "$WORK" || exit 3
# one exec: name tag file grid block smem args [extra...] -> rc in $RAW/tag.rc
run_exec() {
  local tag=$1 file=$2 grid=$3 block=$4 smem=$5 args=$6
  shift 6
  local a=${args//OUT/$RAW\/$tag.npy}
  # shellcheck disable=SC2086
  timeout 60 "$PT" exec "$ROOT/$file" --grid "$grid" --block "$block" --smem "$smem" $a "$@" \
    >"$RAW/$tag.out" 2>"$RAW/$tag.err" </dev/null
  echo $? > "$RAW/$tag.rc"
}
# bit comparison of two outputs' payloads: "identical same_bytes first_diff
# payload_bytes" (first_diff -1: none)
cmp_npy() {
  py "$1" "$2" <<'PY'
import struct, sys
def load(p):
    try:
        b = open(p, 'rb').read()
    except OSError:
        return None
    hl = struct.unpack('<H', b[8:10])[0]
    return b[10 + hl:]
a, b = load(sys.argv[1]), load(sys.argv[2])
if a is None or b is None:
    print('missing 0 -1 %d' % len(a or b or b'')); sys.exit()
n = min(len(a), len(b))
same = sum(1 for i in range(n) if a[i] == b[i])
first = next((i for i in range(n) if a[i] != b[i]), -1 if len(a) == len(b) else n)
print('%s %d %d %d' % ('yes' if len(a) == len(b) and same == n else 'no', same, first, len(a)))
PY
}

echo "case,file,emu_lazy_rc,emu_eager_rc,emu_random_rc,bytes,schedules_agree,note" > "$OUT/probes.csv"
echo "case,gpu_rc,bytes,identical,identical_bytes,first_diff,note" > "$OUT/diff.csv"
FAIL=0
SKIPPED=""
NCASE=0
NAGREE=0
NREFUSED=0
NGPU=0
NSAME=0
while IFS='|' read -r name file grid block smem args; do
  [ -n "$name" ] || continue
  if [ "$(elapsed)" -ge "$BUDGET" ]; then SKIPPED="$SKIPPED $name"; continue; fi
  if [ ! -f "$ROOT/$file" ]; then
    SKIPPED="$SKIPPED $name"
    echo "$name,$file,,,,0,no,file missing" >> "$OUT/probes.csv"
    log "$name: $file missing, skipped"
    continue
  fi
  NCASE=$((NCASE + 1))
  run_exec "$name.lazy" "$file" "$grid" "$block" "$smem" "$args"
  run_exec "$name.eager" "$file" "$grid" "$block" "$smem" "$args" --schedule eager
  run_exec "$name.random" "$file" "$grid" "$block" "$smem" "$args" --schedule random:7
  rl=$(cat "$RAW/$name.lazy.rc") re=$(cat "$RAW/$name.eager.rc") rr=$(cat "$RAW/$name.random.rc")
  read -r s1 _ _ bytes <<< "$(cmp_npy "$RAW/$name.lazy.npy" "$RAW/$name.eager.npy")"
  read -r s2 _ _ _ <<< "$(cmp_npy "$RAW/$name.lazy.npy" "$RAW/$name.random.npy")"
  agree=no
  note=""
  if [ "$rl" = 0 ] && [ "$re" = 0 ] && [ "$rr" = 0 ] && [ "$s1" = yes ] && [ "$s2" = yes ]; then
    agree=yes
    NAGREE=$((NAGREE + 1))
  elif [ "$rl" = 2 ] && grep -q 'not emulated' "$RAW/$name.lazy.err"; then
    # a form the emulator refuses at load time: no reference, not a failure
    agree=refused
    NREFUSED=$((NREFUSED + 1))
    note=$(head -1 "$RAW/$name.lazy.err" | tr ',' ';' | cut -c1-160)
  else
    FAIL=1
    note=$(head -1 "$RAW/$name.lazy.err" | tr ',' ';' | cut -c1-160)
  fi
  echo "$name,$file,$rl,$re,$rr,$bytes,$agree,$note" >> "$OUT/probes.csv"
  log "$name: emulator $rl/$re/$rr (lazy/eager/random), schedules agree: $agree"
  if [ "$GPU" = 1 ]; then
    NGPU=$((NGPU + 1))
    run_exec "$name.gpu" "$file" "$grid" "$block" "$smem" "$args" --backend cuda
    rg=$(cat "$RAW/$name.gpu.rc")
    read -r same nsame first _ <<< "$(cmp_npy "$RAW/$name.lazy.npy" "$RAW/$name.gpu.npy")"
    gnote=""
    [ "$rg" = 0 ] || gnote=$(head -1 "$RAW/$name.gpu.err" | tr ',' ';' | cut -c1-160)
    if [ "$agree" = refused ]; then
      same=no-reference
    elif [ "$rg" = 0 ] && [ "$same" = yes ]; then
      NSAME=$((NSAME + 1))
    else
      FAIL=1
    fi
    echo "$name,$rg,$bytes,$same,$nsame,$first,$gnote" >> "$OUT/diff.csv"
    log "$name: GPU rc $rg, bit-identical to the emulator: $same (first differing byte $first)"
  fi
done < "$CASES"

{
  echo "# Hopper probes: GPU vs emulator, bit for bit"
  echo
  echo "$(date -u +%Y-%m-%d), git $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown), $(head -1 "$OUT/devices.json" | grep -o '"name":"[^"]*"' | head -1)"
  echo
  echo "- cases run: $NCASE (budget ${BUDGET} s, $(elapsed) s used)"
  echo "- emulator: $NAGREE of $NCASE ran clean with the same bytes under lazy, eager and random:7; $NREFUSED refused (a form not emulated yet: no reference)"
  if [ "$GPU" = 1 ]; then
    echo "- GPU: $NSAME of $NGPU bit-identical to the emulator (diff.csv)"
  else
    echo "- GPU half not run (--no-gpu without a driver)"
  fi
  [ -z "$SKIPPED" ] || echo "- skipped past the budget:$SKIPPED"
  echo
  echo "| case | emulator (lazy/eager/random) | schedules agree | GPU identical |"
  echo "|---|---|---|---|"
  tail -n +2 "$OUT/probes.csv" | while IFS=, read -r c _ a b r _ ag _; do
    g=$(grep "^$c," "$OUT/diff.csv" | cut -d, -f4)
    echo "| $c | $a/$b/$r | $ag | ${g:--} |"
  done
} > "$OUT/summary.md"
tar -czf "$OUT/raw.tgz" -C "$WORK" raw cases.txt 2>/dev/null
log "done: $( [ "$FAIL" = 0 ] && echo 'all agree' || echo 'a check failed' ) ($OUT/summary.md)"
exit "$FAIL"
