#!/usr/bin/env bash
# The GPU check: build (or take a carried build), verify every kernel of the
# test suite on the GPU, run the small ones on the emulator too and compare
# the outputs bit for bit (differential), benchmark a fixed suite against
# torch eager / torch.compile (and GEMMs against torch.matmul when the gemm
# op is registered; attention against torch's scaled_dot_product_attention
# with the flash and cuDNN backends when the attention op is registered),
# write CSV tables and summary.md to $OUT.
#
#   scripts/gpu/check.sh [--no-gpu] [--quick] [--small] [--budget SECONDS]
#
# --no-gpu  everything a CPU can do: the build, the correctness suite and
#           the differential plumbing on the emulator; no benchmarks.
# --quick   a sample of variants per case instead of all of them.
# --small   tiny benchmark shapes: a dry run of the GPU path on a CPU with
#           the fake driver (LD_LIBRARY_PATH=build/tests, see docs/gpu.md).
# --budget  wall-clock budget of the whole script (default 450 s, under the
#           8 minutes the device tool allows one command); steps that would
#           start past it are skipped and listed in notes.txt.
# $OUT defaults to build-gpu/out (ignored by git). Needs: bash, python3
# (torch for the benchmarks), the CUDA toolkit. How to run it with the
# device tool, what to carry, what comes back: docs/gpu.md.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/build-gpu/out}
NOGPU=0
QUICK=0
SMALL=0
BUDGET=450
while [ $# -gt 0 ]; do
  case $1 in
    --no-gpu) NOGPU=1 ;;
    --quick) QUICK=1 ;;
    --small) SMALL=1 ;;
    --budget) BUDGET=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    *) echo "check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT/raw"
rm -f "$OUT"/{check,diff,bench_ours,bench_torch,bench_summary}.csv "$OUT/notes.txt"
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(printf '%4d' "$(elapsed)")s] $*" | tee -a "$OUT/log.txt" >&2; }
note() { echo "- $*" >> "$OUT/notes.txt"; log "note: $*"; }
left() { echo $(( BUDGET - $(elapsed) )); }
# room N: a step that wants N of the default budget's 450 s may start (N
# scaled to this budget: all.sh gives check.sh a share of its own); tmo N:
# a step's timeout, N s but at most what is left + 40 s
room() { [ "$(left)" -ge $(( $1 * BUDGET / 450 )) ]; }
tmo() { local l=$(( $(left) + 40 )); [ "$l" -lt "$1" ] && [ "$l" -gt 0 ] && echo "$l" || echo "$1"; }
TOOLS="python3 $ROOT/scripts/gpu/tools.py"
: > "$OUT/log.txt"

# ---- 1. ptxtune: carried, meson, or plain cc ----
PT=""
if [ -n "${PTXTUNE_BIN:-}" ]; then # a given binary (e.g. a local build dir's cli/ptxtune)
  PT=$(cd "$(dirname "$PTXTUNE_BIN")" && pwd)/$(basename "$PTXTUNE_BIN")
  "$PT" --version >/dev/null 2>&1 || { echo "check.sh: PTXTUNE_BIN=$PTXTUNE_BIN does not run" >&2; exit 3; }
  log "using PTXTUNE_BIN=$PT ($($PT --version))"
elif [ "${PTXTUNE_REBUILD:-0}" != 1 ] && [ -x "$ROOT/build-gpu/ptxtune" ] &&
   "$ROOT/build-gpu/ptxtune" --version >/dev/null 2>&1; then
  PT=$ROOT/build-gpu/ptxtune
  log "using the carried build-gpu/ptxtune ($($PT --version))"
elif command -v meson >/dev/null && command -v ninja >/dev/null &&
     meson setup "$ROOT/build-gpu-meson" "$ROOT" -Dtests=disabled >"$OUT/raw/build.log" 2>&1 &&
     ninja -C "$ROOT/build-gpu-meson" >>"$OUT/raw/build.log" 2>&1; then
  PT=$ROOT/build-gpu-meson/cli/ptxtune
  log "built with meson: $PT"
elif "$ROOT/scripts/gpu/build.sh" "$ROOT/build-gpu" >>"$OUT/raw/build.log" 2>&1; then
  PT=$ROOT/build-gpu/ptxtune
  log "built with scripts/gpu/build.sh: $PT"
else
  log "no ptxtune: the carried build does not run and neither meson nor cc could build one"
  tail -20 "$OUT/raw/build.log" >&2
  note "build failed (see raw/build.log); carry build-gpu made by scripts/gpu/build.sh --stage"
  $TOOLS summary "$OUT" >/dev/null
  exit 3
fi

# ---- 2. the machine ----
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "ptxtune: $($PT --version) (git $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown))"
  echo "host: $(uname -srm), $(nproc) cores"
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
      --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  # torch and triton apart (a torch without triton still prints its line)
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda, "cudnn:", torch.backends.cudnn.version(), "cuda available:", torch.cuda.is_available())' 2>/dev/null ||
    echo "torch: not importable"
  python3 -c 'import triton; print("triton:", triton.__version__)' 2>/dev/null || echo "triton: not importable"
  python3 -c 'from torch.nn.attention import SDPBackend as B; print("sdpa backends:", " ".join(n for n in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION") if hasattr(B, n)))' 2>/dev/null
} > "$OUT/env.txt"
$PT devices --json > "$OUT/devices.json" 2>"$OUT/raw/devices.err"
DEV_RC=$?
if [ $DEV_RC -eq 0 ]; then
  GPU=$(python3 -c 'import json,re,sys; n=json.load(open(sys.argv[1]))[0]["name"]; m=re.search(r"([A-Za-z]+[0-9]+[A-Za-z]*)", n.replace("NVIDIA","")); print((m.group(1) if m else n).lower())' "$OUT/devices.json")
  $PT devices >> "$OUT/env.txt"
else
  GPU=none
  echo "devices: $(cat "$OUT/raw/devices.err") (exit $DEV_RC)" >> "$OUT/env.txt"
fi
echo "$GPU" > "$OUT/gpu.txt"
if [ $NOGPU = 0 ] && [ $DEV_RC -ne 0 ]; then
  log "no GPU: $(cat "$OUT/raw/devices.err"); rerun with --no-gpu for the CPU parts"
  note "no CUDA device: $(cat "$OUT/raw/devices.err")"
  $TOOLS summary "$OUT" >/dev/null
  exit 4
fi
BK=cuda
[ $NOGPU = 1 ] && BK=emu
log "device: $GPU, backend $BK"

# ---- 3. correctness: every variant of every test case ----
# name|expression|shapes|dtype|out dtype|outputs|arch for the emulator
CHECK_CASES=(
  "softmax_bf16|y = softmax(x * 0.125, -1)|x=64x1024|bf16|bf16|y|sm_80"
  "layernorm_f16|y = layernorm(x + r, -1) * g + b|x=32x768,r=32x768,g=768,b=768|f16|f16|y|sm_80"
  "rmsnorm_f32|y = x * rsqrt(mean(x*x, -1) + 1e-6) * g|x=16x4096,g=4096|f32|f32|y|sm_80"
  "gelu_bf16|y = gelu(x * w + b)|x=128x512,w=512,b=512|bf16|bf16|y|sm_80"
  "add_rmsnorm_bf16|h = x + r; y = rmsnorm(h, -1) * g|x=8x2048,r=8x2048,g=2048|bf16|bf16|h,y|sm_80"
  "silu_where_f32|y = silu(x) * u + where(b > 0, b, 0.5 * b)|x=4x8x96,u=4x8x96,b=8x1|f32|f32|y|sm_80"
  "log_softmax_f16|y = log_softmax(x, -1)|x=33x1000|f16|f16|y|sm_80"
  "mean_center_f32|m = mean(x, -1); y = x - m|x=12x40|f32|f32|m,y|sm_80"
  "tail_f16|y = x * 2 + 1|x=1000x33|f16|f16|y|sm_80"
  "gelu_e4m3|y = gelu(x * w + b)|x=64x512,w=512,b=512|bf16|e4m3|y|sm_89"
  "softmax_e5m2|y = softmax(x, -1)|x=32x256|f16|e5m2|y|sm_89"
)
# name|gemm problem options (run only when the gemm op is registered)
GEMM_CHECK=(
  "gemm_bf16_nn|--m 256 --n 256 --k 128 --dtype bf16 --layout nn"
  "gemm_f16_tn|--m 192 --n 320 --k 96 --dtype f16 --layout tn"
  "gemm_f32|--m 128 --n 128 --k 64 --dtype f32 --layout nn"
)
HAVE_GEMM=0
$PT ops 2>/dev/null | grep -q '^gemm:' && HAVE_GEMM=1
# name|attention problem items (issue 11's grid: head dims 64/128/256, causal,
# window, softcap, Sq < Sk, Sq = Sk, Sq = 1, GQA 1:1 / 4:1 / MQA, odd lengths,
# varlen, paged decode with shuffled block tables and ragged lengths, f16/bf16)
ATTN_CHECK=(
  "attn_causal_bf16|batch=2 heads_q=8 heads_kv=2 seqlen_q=129 seqlen_k=129 head_dim=128 causal=1 return_lse=1 dtype=bf16"
  "attn_sq_lt_sk_f16|batch=1 heads_q=4 heads_kv=4 seqlen_q=77 seqlen_k=1000 head_dim=64 causal=1 dtype=f16"
  "attn_window_softcap|batch=1 heads_q=8 heads_kv=1 seqlen_q=300 seqlen_k=300 head_dim=256 window_left=64 window_right=0 softcap=30 dtype=bf16"
  "attn_varlen_f16|batch=4 heads_q=8 heads_kv=2 seqlen_q=129 seqlen_k=129 head_dim=128 varlen=1 causal=1 return_lse=1 dtype=f16"
  "attn_bhsd_scale|batch=2 heads_q=4 heads_kv=2 seqlen_q=7 seqlen_k=333 head_dim=64 layout=bhsd softmax_scale=0.5 dtype=bf16"
  "attn_decode_paged|batch=3 heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=1000 head_dim=128 page_size=16 seqused_k=1 dtype=bf16"
  "attn_decode_mqa_f16|batch=2 heads_q=8 heads_kv=1 seqlen_q=4 seqlen_k=777 head_dim=64 page_size=16 return_lse=1 dtype=f16"
)
# the small ones also run on the emulator for the differential (name|items|outputs)
ATTN_DIFF=(
  "attn_causal_small|batch=1 heads_q=4 heads_kv=2 seqlen_q=33 seqlen_k=33 head_dim=64 causal=1 return_lse=1 dtype=bf16|o,lse"
  "attn_decode_small|batch=2 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=100 head_dim=64 page_size=16 dtype=f16|o"
)
HAVE_ATTN=0
$PT ops 2>/dev/null | grep -q '^attention:' && HAVE_ATTN=1
# Every case of the attention test grids (tests/test_attention_decode.c
# `grid`, tests/test_attention_prefill.c `grid`) with its config, read from
# the test sources so that the list cannot drift from them:
# name|problem items|config|the test's arch (the emulator's; the GPU runs its own)
attn_grid_cases() {
  python3 - "$ROOT/tests/test_attention_decode.c" "$ROOT/tests/test_attention_prefill.c" <<'PY'
import csv, io, re, sys
def cases(path):
    s = open(path).read()
    g = s[s.index("grid[] = {"):]
    g = g[g.index("{") + 1:g.index("\n};")]
    g = re.sub(r"/\*.*?\*/", "", g, flags=re.S)
    for r in re.findall(r"\{([^{}]*)\}", g):
        yield [p.strip() for p in next(csv.reader(io.StringIO(" ".join(r.split())), skipinitialspace=True))]
def dt(x):
    return "f16" if x == "F16" else "bf16"
def on(x):
    return x == "true"
# decode: B Hq Hkv Sq Sk d dt causal page wl seqused lse softcap config arch varlen [dv]
for i, p in enumerate(cases(sys.argv[1])):
    B, Hq, Hkv, Sq, Sk, d, t, causal, page, wl, su, lse, cap, cfg, arch, varlen = p[:16]
    dv = p[16] if len(p) > 16 else "0"
    it = [f"batch={B}", f"heads_q={Hq}", f"heads_kv={Hkv}", f"seqlen_q={Sq}", f"seqlen_k={Sk}", f"head_dim={d}"]
    it += [f"head_dim_v={dv}"] * (dv != "0") + ["causal=1"] * on(causal) + [f"page_size={page}"] * (page != "0")
    it += [f"window_left={wl}"] * (wl != "-1") + ["seqused_k=1"] * on(su) + ["return_lse=1"] * on(lse)
    it += [f"softcap={cap}"] * (cap != "0") + ["varlen=1"] * on(varlen) + [f"dtype={dt(t)}"]
    print(f"attn_grid_dec{i:02d}|{' '.join(it)}|impl=1,{cfg}|{'sm_80' if arch == 'NULL' else arch}")
# prefill: dt b hq hkv sq sk d causal wl wr softcap scale varlen seqused lse bhsd arch config page
for i, p in enumerate(cases(sys.argv[2])):
    t, B, Hq, Hkv, Sq, Sk, d, causal, wl, wr, cap, scale, varlen, su, lse, bhsd, arch, cfg, page = p[:19]
    it = [f"batch={B}", f"heads_q={Hq}", f"heads_kv={Hkv}", f"seqlen_q={Sq}", f"seqlen_k={Sk}", f"head_dim={d}"]
    it += ["causal=1"] * on(causal) + [f"window_left={wl}"] * (wl != "-1") + [f"window_right={wr}"] * (wr != "-1")
    it += [f"softcap={cap}"] * (cap != "0") + [f"softmax_scale={scale}"] * (scale not in ("0", "0.0"))
    it += ["varlen=1"] * on(varlen) + ["seqused_k=1"] * on(su) + ["return_lse=1"] * on(lse)
    it += ["layout=bhsd"] * on(bhsd) + [f"page_size={page}"] * (page != "0") + [f"dtype={dt(t)}"]
    cfg = cfg.strip()
    cfg = cfg if cfg.startswith("impl=") else ("impl=0," + cfg).rstrip(",")
    print(f"attn_grid_pre{i:02d}|{' '.join(it)}|{cfg}|{arch}")
PY
}
SAMPLE=()
[ $QUICK = 1 ] && SAMPLE=(--sample 16)
[ $NOGPU = 1 ] && SAMPLE=(--sample 8) # the emulator is slow: a sample is enough on a CPU

run_check() { # name, then ptxtune run arguments
  local name=$1; shift
  if ! room 200; then note "skipped check $name: time budget"; return; fi
  timeout $(tmo 240) $PT run "$@" --backend $BK --check --sweep "${SAMPLE[@]}" --json \
    > "$OUT/raw/check_$name.jsonl" 2> "$OUT/raw/check_$name.err"
  local rc=$?
  if [ $rc -ge 2 ]; then
    note "check $name: ptxtune exit $rc: $(head -c 300 "$OUT/raw/check_$name.err")"
    return
  fi
  $TOOLS csv "$OUT/raw/check_$name.jsonl" "$name" "$OUT/check.csv" | tee -a "$OUT/log.txt" >&2
}
for c in "${CHECK_CASES[@]}"; do
  IFS='|' read -r name expr shapes dt odt outs arch <<< "$c"
  archarg=()
  [ $NOGPU = 1 ] && archarg=(--arch "$arch")
  run_check "$name" elementwise --expr "$expr" --shape "$shapes" --dtype "$dt" --out-dtype "$odt" "${archarg[@]}"
done
if [ $HAVE_GEMM = 1 ]; then
  for c in "${GEMM_CHECK[@]}"; do
    IFS='|' read -r name opts <<< "$c"
    # shellcheck disable=SC2086
    run_check "$name" gemm $opts $([ $NOGPU = 1 ] && echo --arch sm_80)
  done
else
  note "gemm is not registered in this build: GEMM checks and benchmarks skipped"
fi
if [ $HAVE_ATTN = 1 ]; then
  # the test grids, one run each with the test's config (the emulator: the
  # test's arch); rows in check.csv like the sweeps'
  GRID=$(attn_grid_cases 2> "$OUT/raw/attn_grid.err")
  [ -n "$GRID" ] || note "attention grid: no cases read from the test sources ($(head -c 200 "$OUT/raw/attn_grid.err"))"
  # the JIT compile is the cost (1-10 s a decode kernel): several cases at
  # a time, up to the cores (the GPU work of each is a few microseconds)
  NJ=$(nproc 2>/dev/null || echo 2)
  [ "$NJ" -gt 8 ] && NJ=8
  ng=0
  while IFS='|' read -r name items cfg arch; do
    [ -n "$name" ] || continue
    if ! room 200; then note "skipped check $name and the rest of the attention grid: time budget"; break; fi
    while [ "$(jobs -rp | wc -l)" -ge "$NJ" ]; do wait -n; done
    a=()
    [ $NOGPU = 1 ] && a=(--arch "$arch")
    # shellcheck disable=SC2086
    { timeout $(tmo 90) $PT run attention $items --config "$cfg" "${a[@]}" --backend $BK --check --json \
        > "$OUT/raw/check_$name.jsonl" 2> "$OUT/raw/check_$name.err"
      echo $? > "$OUT/raw/check_$name.rc"; } &
    ng=$((ng + 1))
  done <<< "$GRID"
  wait
  nok=0
  while IFS='|' read -r name items cfg arch; do
    [ -f "$OUT/raw/check_$name.rc" ] || continue
    rc=$(cat "$OUT/raw/check_$name.rc")
    if [ ! -s "$OUT/raw/check_$name.jsonl" ]; then
      note "check $name: ptxtune exit $rc, no result: $(head -c 300 "$OUT/raw/check_$name.err")"
      continue
    fi
    $TOOLS csv "$OUT/raw/check_$name.jsonl" "$name" "$OUT/check.csv" >> "$OUT/log.txt" 2>&1
    [ "$rc" = 0 ] && nok=$((nok + 1))
  done <<< "$GRID"
  log "attention grid: $ng of $(grep -c . <<< "$GRID") cases run, $nok passed (check.csv rows attn_grid_*)"
  # sweeps of a sample of each space (the attention spaces are large and
  # every variant is a JIT compile on the GPU)
  # (--deadline: a decode kernel's JIT alone took up to 17 s here; the
  # sweep's default of 10 s would count it a timeout), several at a time
  ASAMPLE=(--sample 3)
  [ $QUICK = 1 ] && ASAMPLE=(--sample 2)
  for c in "${ATTN_CHECK[@]}"; do
    IFS='|' read -r name items <<< "$c"
    if ! room 200; then note "skipped check $name: time budget"; continue; fi
    while [ "$(jobs -rp | wc -l)" -ge "$NJ" ]; do wait -n; done
    a=()
    [ $NOGPU = 1 ] && a=(--arch sm_80)
    # shellcheck disable=SC2086
    { timeout $(tmo 240) $PT run attention $items "${a[@]}" --backend $BK --check --sweep "${ASAMPLE[@]}" --deadline 60 \
        --json > "$OUT/raw/check_$name.jsonl" 2> "$OUT/raw/check_$name.err"
      echo $? > "$OUT/raw/check_$name.rc"; } &
  done
  wait
  for c in "${ATTN_CHECK[@]}"; do
    IFS='|' read -r name items <<< "$c"
    [ -f "$OUT/raw/check_$name.rc" ] || continue
    rc=$(cat "$OUT/raw/check_$name.rc")
    if [ "$rc" -ge 2 ]; then note "check $name: ptxtune exit $rc: $(head -c 300 "$OUT/raw/check_$name.err")"; continue; fi
    $TOOLS csv "$OUT/raw/check_$name.jsonl" "$name" "$OUT/check.csv" | tee -a "$OUT/log.txt" >&2
  done
else
  note "attention is not registered in this build: attention checks and benchmarks skipped"
fi

# ---- 4. differential: the same PTX on the GPU and on the emulator ----
# The default config of each small case, same seed on both backends; the
# outputs are compared element by element (tools.py npydiff). Without a
# GPU the emulator is compared with itself, which exercises the plumbing.
OTHER=cuda
[ $NOGPU = 1 ] && OTHER=emu
for c in "${CHECK_CASES[@]}"; do
  IFS='|' read -r name expr shapes dt odt outs arch <<< "$c"
  if ! room 150; then note "skipped diff $name: time budget"; continue; fi
  ok=1
  for bk in emu $OTHER; do
    outargs=()
    IFS=',' read -ra names <<< "$outs"
    for o in "${names[@]}"; do outargs+=(--out "$o=$OUT/raw/diff_${name}_${o}_$bk.npy"); done
    a=(--arch "$arch")
    [ "$bk" = cuda ] && a=()
    timeout $(tmo 120) $PT run elementwise --expr "$expr" --shape "$shapes" --dtype "$dt" --out-dtype "$odt" \
      "${a[@]}" --backend "$bk" --seed 3 "${outargs[@]}" > "$OUT/raw/diff_${name}_$bk.txt" 2>&1 || ok=0
  done
  if [ $ok = 0 ]; then note "diff $name: a run failed (raw/diff_${name}_*.txt)"; continue; fi
  for o in "${names[@]}"; do
    r=$($TOOLS npydiff "$OUT/raw/diff_${name}_${o}_$OTHER.npy" "$OUT/raw/diff_${name}_${o}_emu.npy" "$odt")
    $TOOLS diffrow "$OUT/diff.csv" "$name" "$o" "$r" "$OTHER"
  done
done
# the emulator runs the GPU's arch (so both sides emit the same PTX: the
# defaults, e.g. decode's tile and split count, depend on the arch)
EMU_ARCH=sm_80
if [ "$DEV_RC" -eq 0 ]; then
  EMU_ARCH=$(python3 -c 'import json,sys; c=str(json.load(open(sys.argv[1]))[0].get("cc","8.0")).split("."); print("sm_%s%s" % (c[0], c[1] if len(c) > 1 else "0"))' "$OUT/devices.json" 2>/dev/null || echo sm_80)
fi
attn_diff() { # name, items, outputs: the default config on the emulator and on $OTHER
  local name=$1 items=$2 outs=$3 ok=1 bk o
  local names
  IFS=',' read -ra names <<< "$outs"
  for bk in emu $OTHER; do
    local outargs=() a=(--arch "$EMU_ARCH")
    for o in "${names[@]}"; do outargs+=(--out "$o=$OUT/raw/diff_${name}_${o}_$bk.npy"); done
    [ "$bk" = cuda ] && a=()
    # shellcheck disable=SC2086
    timeout $(tmo 150) $PT run attention $items "${a[@]}" --backend "$bk" --seed 3 "${outargs[@]}" \
      > "$OUT/raw/diff_${name}_$bk.txt" 2>&1 || ok=0
  done
  if [ $ok = 0 ]; then note "diff $name: a run failed (raw/diff_${name}_*.txt)"; return; fi
  for o in "${names[@]}"; do
    local dt=f32
    [ "$o" = o ] && dt=$(echo "$items" | sed -n 's/.*dtype=\([a-z0-9]*\).*/\1/p')
    local r
    r=$($TOOLS npydiff "$OUT/raw/diff_${name}_${o}_$OTHER.npy" "$OUT/raw/diff_${name}_${o}_emu.npy" "$dt")
    $TOOLS diffrow "$OUT/diff.csv" "$name" "$o" "$r" "$OTHER"
  done
}
if [ $HAVE_ATTN = 1 ]; then
  for c in "${ATTN_DIFF[@]}"; do
    IFS='|' read -r name items outs <<< "$c"
    if ! room 150; then note "skipped diff $name: time budget"; continue; fi
    attn_diff "$name" "$items" "$outs"
  done
fi
[ -f "$OUT/diff.csv" ] && log "differential: $(($(wc -l < "$OUT/diff.csv") - 1)) outputs compared"

# ---- 5. benchmarks: ours (best of a sample of verified configs) vs torch ----
if [ $NOGPU = 0 ]; then
  printf '# name\texpr\tshapes\tdtype\n' > "$OUT/raw/bench_cases.tsv"
  BENCH_CASES=(
    "copy_f32|y = x * 1.0|x=8192x8192|f32"
    "gelu_bias_bf16|y = gelu(x * w + b)|x=8192x8192,w=8192,b=8192|bf16"
    "softmax_bf16|y = softmax(x, -1)|x=8192x8192|bf16"
    "layernorm_bf16|y = layernorm(x, -1) * g + b|x=8192x8192,g=8192,b=8192|bf16"
    "add_rmsnorm_bf16|h = x + r; y = rmsnorm(h, -1) * g|x=8192x8192,r=8192x8192,g=8192|bf16"
    "swiglu_bf16|y = silu(x) * u|x=8192x14336,u=8192x14336|bf16"
  )
  NS=24
  [ $QUICK = 1 ] && NS=8
  shrink() { if [ $SMALL = 1 ]; then sed 's/8192x14336/64x1024/g; s/8192x8192/64x1024/g; s/=8192/=1024/g'; else cat; fi; }
  for c in "${BENCH_CASES[@]}"; do
    IFS='|' read -r name expr shapes dt <<< "$c"
    shapes=$(echo "$shapes" | shrink)
    if ! room 120; then note "skipped bench $name: time budget"; continue; fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$expr" "$shapes" "$dt" >> "$OUT/raw/bench_cases.tsv"
    timeout $(tmo 150) $PT run elementwise --expr "$expr" --shape "$shapes" --dtype "$dt" --backend cuda \
      --check --bench --sweep --sample $NS --budget-ms 300 --json \
      > "$OUT/raw/bench_$name.jsonl" 2> "$OUT/raw/bench_$name.err"
    $TOOLS csv "$OUT/raw/bench_$name.jsonl" "$name" "$OUT/bench_ours.csv" | tee -a "$OUT/log.txt" >&2
  done
  if [ $HAVE_GEMM = 1 ]; then
    MNKS="4096 8192"
    [ $SMALL = 1 ] && MNKS="128 256"
    for mnk in $MNKS; do
      name=gemm_bf16_$mnk
      if ! room 120; then note "skipped bench $name: time budget"; continue; fi
      printf '%s\t%s\t%s\t%s\n' "$name" "" "a=${mnk}x${mnk},b=${mnk}x${mnk}" bf16 >> "$OUT/raw/bench_cases.tsv"
      opts=(--m $mnk --n $mnk --k $mnk --dtype bf16 --layout nn)
      timeout $(tmo 150) $PT run gemm "${opts[@]}" --backend cuda --check --bench --sweep --sample $NS \
        --budget-ms 300 --json > "$OUT/raw/bench_$name.jsonl" 2> "$OUT/raw/bench_$name.err"
      if grep -q 'no sampled reference' "$OUT/raw/bench_$name.jsonl"; then
        note "$name: timed unverified (gemm has no pt_op.reference_at yet; small GEMMs are verified above)"
        timeout $(tmo 150) $PT run gemm "${opts[@]}" --backend cuda --bench --sweep --sample $NS \
          --budget-ms 300 --json > "$OUT/raw/bench_$name.jsonl" 2> "$OUT/raw/bench_$name.err"
      fi
      $TOOLS csv "$OUT/raw/bench_$name.jsonl" "$name" "$OUT/bench_ours.csv" | tee -a "$OUT/log.txt" >&2
    done
  fi
  if [ $HAVE_ATTN = 1 ]; then
    # prefill: hd128 causal at 16k tokens (the issue's 330 TFLOP/s target) and a
    # 4096-token batch; decode: one token against 8k and 32k paged KV (its GB/s
    # against copy_f32's, the same run's copy bandwidth). Columns of the TSV for
    # the torch side: name, "attention", the problem items, dtype.
    ATTN_BENCH=(
      "attn_prefill_16k|batch=1 heads_q=32 heads_kv=8 seqlen_q=16384 seqlen_k=16384 head_dim=128 causal=1 dtype=bf16"
      "attn_prefill_4k_b8|batch=8 heads_q=32 heads_kv=8 seqlen_q=4096 seqlen_k=4096 head_dim=128 causal=1 dtype=bf16"
      "attn_decode_8k_b64|batch=64 heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=8192 head_dim=128 page_size=16 dtype=bf16"
      "attn_decode_32k_b16|batch=16 heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=32768 head_dim=128 page_size=16 dtype=bf16"
      "attn_decode_32k_b1|batch=1 heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=32768 head_dim=128 page_size=16 dtype=bf16"
    )
    # a sample of each space: every candidate is a JIT compile (1-10 s an
    # attention kernel) before its check and timing
    ANS=4
    [ $QUICK = 1 ] && ANS=2
    for c in "${ATTN_BENCH[@]}"; do
      IFS='|' read -r name items <<< "$c"
      [ $SMALL = 1 ] && items=$(echo "$items" | sed 's/=16384/=256/g; s/=4096/=128/g; s/=8192/=512/g; s/=32768/=1024/g; s/batch=64/batch=4/; s/batch=16/batch=2/')
      if ! room 120; then note "skipped bench $name: time budget"; continue; fi
      printf '%s\t%s\t%s\t%s\n' "$name" attention "$items" bf16 >> "$OUT/raw/bench_cases.tsv"
      # shellcheck disable=SC2086
      # (--deadline: JIT, the sampled float64 check of a 16k prefill and the timing)
      timeout $(tmo 200) $PT run attention $items --backend cuda --check --bench --sweep --sample $ANS --deadline 90 \
        --budget-ms 300 --json > "$OUT/raw/bench_$name.jsonl" 2> "$OUT/raw/bench_$name.err"
      $TOOLS csv "$OUT/raw/bench_$name.jsonl" "$name" "$OUT/bench_ours.csv" | tee -a "$OUT/log.txt" >&2
    done
  fi
  TB=$(( $(left) - 40 ))
  if [ $TB -gt 30 ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    log "torch side (torch.compile while $TB s remain)"
    timeout $(( TB + 60 )) $TOOLS torchbench "$OUT/raw/bench_cases.tsv" "$OUT/bench_torch.csv" "$TB" \
      > "$OUT/raw/torch.jsonl" 2> "$OUT/raw/torch.err" || note "torch bench: exit $? (raw/torch.err)"
  else
    note "torch benchmarks skipped (no torch with CUDA, or no time left)"
  fi
fi

# ---- 6. summary ----
$TOOLS summary "$OUT" > /dev/null
# ---- 7. the tables for the repository: $OUT/results/<gpu>/ is what to copy
# to results/<gpu>/ (env.txt: machine, driver, torch, cuDNN and the SDPA
# backends; raw/ stays out). Without a GPU: results/cpu-<gpu or none>/.
RES=$GPU
[ $NOGPU = 1 ] && RES=cpu-$GPU
mkdir -p "$OUT/results/$RES"
for f in summary.md env.txt devices.json notes.txt check.csv diff.csv bench_ours.csv bench_torch.csv bench_summary.csv; do
  [ -f "$OUT/$f" ] && cp "$OUT/$f" "$OUT/results/$RES/"
done
log "done in $(elapsed) s: $OUT/summary.md; tables for the repository in $OUT/results/$RES/"
cat "$OUT/summary.md"
FAILED=$(python3 - "$OUT/check.csv" <<'PY'
import csv, os, sys
p = sys.argv[1]
print(sum(r["class"] != "ok" for r in csv.DictReader(open(p))) if os.path.exists(p) else 0)
PY
)
[ "$FAILED" = 0 ] || { log "$FAILED variants failed their check"; exit 1; }
exit 0
