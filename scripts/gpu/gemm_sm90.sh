#!/usr/bin/env bash
# The Hopper GEMM check (issue 13): the wgmma main loop of the gemm op
# (gen/gemm_wgmma.c, the sm_90a default) on the GPU.
#
#   scripts/gpu/gemm_sm90.sh [--no-gpu] [--budget SECONDS]
#
# 1. verify: a grid of problems (every dtype, the layouts each allows, odd
#    M/N/K with 16-byte leading dimensions, 1 and 2 consumers, persistent,
#    epilogues) with `ptxtune run ... --arch sm_90a --check` on the GPU
#    (--no-gpu: on the emulator).
# 2. bits: small cases run on the emulator (lazy schedule) and on the GPU
#    with the same inputs (--seed), outputs compared byte for byte with
#    cmp (a GPU run only).
# 3. bench: bf16 8192^3, 4096^3 and the Llama-3-8B projections (M = 8192
#    tokens) with --bench, and torch.matmul on the same shapes in the same
#    run when python3 has torch (CUDA events, median of 20 after warm-up).
# $OUT (default results/h200/gemm_sm90 with a GPU, build-gpu/gemm_sm90-nogpu
# without): summary.md, verify.csv, bits.csv, bench.csv, log.txt. Needs a
# ptxtune binary ($PTXTUNE, build-gpu/ptxtune or build*/cli/ptxtune).
# Exit: 0 all passed, 1 a check failed, 3 no ptxtune, 4 no GPU (use --no-gpu).
set -uo pipefail

. "$(dirname "$0")/common.sh" # the options, PT, BACKEND, OUT, log, fail
gpu_init gemm_sm90 290 "$@"

# m n k layout dtype out_dtype config(- default) epilogue(- none)
cases() {
  cat <<'EOF'
128 256 512 nt bf16 - - -
257 129 72 nt bf16 - impl=1,bm=64,bn=128,wg_wait=0 -
65 129 264 nn bf16 - impl=1,bm=128,bn=128 -
129 65 257 tt bf16 - impl=1,bm=128,bn=64,persistent=1 relu(acc+bias[n])
200 200 200 tn f16 f32 - gelu(acc)
1 7 65 nt f16 - impl=1,bm=64,bn=16 -
129 96 256 nt e4m3 bf16 - -
65 64 96 nt e5m2 e4m3 - relu(acc)
100 128 128 nt s8 - - -
65 48 160 nt u8 - impl=1,bm=64,bn=16 -
128 128 1000 nt tf32 - - -
4096 4096 1024 nt bf16 - impl=1,bm=128,bn=256,persistent=1 -
EOF
}
pad() { # value bytes-per-element -> value rounded up to 16 bytes
  echo $(( ($1 * $2 + 15) / 16 * 16 / $2 ))
}
esize() { case $1 in bf16|f16) echo 2 ;; tf32) echo 4 ;; *) echo 1 ;; esac; }
args_of() { # m n k lay dt odt cfg epi -> ptxtune problem arguments
  local m=$1 n=$2 k=$3 lay=$4 dt=$5 odt=$6 cfg=$7 epi=$8 es lda ldb
  es=$(esize "$dt")
  if [ "${lay:0:1}" = n ]; then lda=$(pad "$k" "$es"); else lda=$(pad "$m" "$es"); fi
  if [ "${lay:1:1}" = t ]; then ldb=$(pad "$k" "$es"); else ldb=$(pad "$n" "$es"); fi
  A=(gemm "m=$m" "n=$n" "k=$k" "layout=$lay" "dtype=$dt" "lda=$lda" "ldb=$ldb" --arch sm_90a)
  [ "$odt" != - ] && A+=("out_dtype=$odt")
  [ "$cfg" != - ] && A+=(--config "$cfg")
  [ "$epi" != - ] && A+=("epilogue=$epi")
  return 0
}

log "verify on $BACKEND"
echo "case,result" > "$OUT/verify.csv"
while read -r m n k lay dt odt cfg epi; do
  [ "$(elapsed)" -gt "$budget" ] && { log "budget spent: verify stops"; break; }
  [ $nogpu = 1 ] && [ $(( m * n * k )) -gt 100000000 ] && continue # minutes on the emulator
  args_of "$m" "$n" "$k" "$lay" "$dt" "$odt" "$cfg" "$epi"
  name="${m}x${n}x${k}_${lay}_${dt}"
  if "$PT" run "${A[@]}" --backend "$BACKEND" --check >>"$OUT/log.txt" 2>&1; then r=ok; else r=FAIL; fail=1; fi
  echo "$name,$r" >> "$OUT/verify.csv"
  log "$name $r"
done < <(cases)

echo "case,result" > "$OUT/bits.csv"
if [ $nogpu = 0 ]; then
  log "bits: emulator vs GPU"
  while read -r m n k lay dt odt cfg epi; do
    [ "$(elapsed)" -gt "$budget" ] && { log "budget spent: bits stops"; break; }
    [ $(( m * n * k )) -gt 4000000 ] && continue
    args_of "$m" "$n" "$k" "$lay" "$dt" "$odt" "$cfg" "$epi"
    name="${m}x${n}x${k}_${lay}_${dt}"
    "$PT" run "${A[@]}" --backend emu --seed 7 --out "d=$OUT/$name.emu.npy" >>"$OUT/log.txt" 2>&1
    "$PT" run "${A[@]}" --backend cuda --seed 7 --out "d=$OUT/$name.gpu.npy" >>"$OUT/log.txt" 2>&1
    if cmp -s "$OUT/$name.emu.npy" "$OUT/$name.gpu.npy"; then r=identical; else r=DIFFER; fail=1; fi
    rm -f "$OUT/$name.emu.npy" "$OUT/$name.gpu.npy"
    echo "$name,$r" >> "$OUT/bits.csv"
    log "$name $r"
  done < <(cases)
fi

echo "shape,ptxtune_us,ptxtune_tflops,torch_us,torch_tflops" > "$OUT/bench.csv"
if [ $nogpu = 0 ]; then
  log "bench"
  for s in "8192 8192 8192" "4096 4096 4096" "8192 4096 4096" "8192 1024 4096" "8192 14336 4096" "8192 4096 14336"; do
    [ "$(elapsed)" -gt "$budget" ] && { log "budget spent: bench stops"; break; }
    read -r m n k <<<"$s"
    line=$("$PT" run gemm "m=$m" "n=$n" "k=$k" layout=nt dtype=bf16 --arch sm_90a --backend cuda --bench 2>&1 |
           tee -a "$OUT/log.txt" | grep -E 'median|time' | head -1)
    us=$(echo "$line" | grep -oE '[0-9.]+ us' | head -1 | cut -d' ' -f1)
    tus=$(python3 - "$m" "$n" "$k" 2>>"$OUT/log.txt" <<'PY' || true
import sys
try:
    import torch
except Exception:
    sys.exit(0)
m, n, k = map(int, sys.argv[1:])
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    torch.matmul(a, b.t())
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); torch.matmul(a, b.t()); e.record(); torch.cuda.synchronize()
    ts.append(s.elapsed_time(e) * 1000)
ts.sort()
print(f"{ts[len(ts) // 2]:.2f}")
PY
)
    fl=$(( 2 * m * n * k ))
    tf() { [ -n "$1" ] && python3 -c "print(f'{$fl / ($1 * 1e-6) / 1e12:.1f}')" || echo; }
    echo "${m}x${n}x${k},${us},$(tf "$us"),${tus},$(tf "$tus")" >> "$OUT/bench.csv"
    log "${m}x${n}x${k}: ptxtune ${us:-?} us, torch ${tus:-?} us"
  done
fi

summary_md "Hopper GEMM (wgmma) check"
exit $fail
