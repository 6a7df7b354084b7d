#!/usr/bin/env bash
# The sm_90a split-KV decode check (issue 16 item 2): the attention op's
# impl=3 kernel (gen/attention_fa3_decode.c: wgmma + TMA + mbarrier ring,
# the sm_90a decode default) on the GPU.
#
#   scripts/gpu/attention_fa3_decode.sh [--no-gpu] [--budget SECONDS]
#
# 1. verify: decode problems (paged 16/64/256 with shuffled tables and
#    ragged seqused_k, Sq 1 and 4 causal, GQA 4:1 / 8:1 / MQA, hd 64/128/256,
#    window, softcap, splits 1..16) with `ptxtune run ... --arch sm_90a
#    --check` on the GPU (--no-gpu: on the emulator).
# 2. bits: the small cases on the emulator and on the GPU with the same
#    inputs (--seed 3), outputs compared byte for byte (a GPU run only; the
#    split combine is deterministic, so equal bits are expected).
# 3. bench: the Llama-3-8B decode set (Hq 32, Hkv 8, d 128, page 16; Sk 8k x
#    batch 64, 32k x 16, 32k x 1) with --bench: impl=3 on sm_90a (its
#    default config), the same with e4m3 q/k/v (fp8, item 3: half the K/V
#    bytes) and the mma.sync split kernel (impl=1, sm_90 default),
#    each as GB/s of the op's bytes against the same run's copy bandwidth
#    (y = x * 1.0 over 8192 x 8192 f32: 512 MiB moved). Goal (issue 16):
#    decode >= 80% of the copy bandwidth.
# $OUT (default results/h200/attention_fa3_decode with a GPU,
# build-gpu/attention_fa3_decode-nogpu without): summary.md, verify.csv,
# bits.csv, bench.csv, log.txt. Needs a ptxtune binary ($PTXTUNE,
# build-gpu/ptxtune or build*/cli/ptxtune).
# Exit: 0 all passed, 1 a check failed, 3 no ptxtune, 4 no GPU (use --no-gpu).
set -uo pipefail

. "$(dirname "$0")/common.sh" # the options, PT, BACKEND, OUT, log, fail
gpu_init attention_fa3_decode 290 "$@"

# name|problem items|config (- the sm_90a default)|small (emulator differential)
cases() {
  cat <<'EOF'
paged16_gqa4|batch=3 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=77 head_dim=128 page_size=16 seqused_k=1 return_lse=1 dtype=bf16|impl=3,bm=64,bn=64,stages=4,ctas=1,splits=3|1
paged16_1000|batch=2 heads_q=16 heads_kv=2 seqlen_q=1 seqlen_k=1000 head_dim=128 page_size=16 seqused_k=1 return_lse=1 dtype=f16|impl=3,bm=64,bn=64,stages=6,ctas=1,splits=8|1
paged64_hd64|batch=2 heads_q=4 heads_kv=4 seqlen_q=1 seqlen_k=129 head_dim=64 page_size=64 return_lse=1 dtype=bf16|impl=3,bm=64,bn=128,stages=2,ctas=2,splits=2|1
paged256_hd256_mqa|batch=2 heads_q=8 heads_kv=1 seqlen_q=1 seqlen_k=1000 head_dim=256 page_size=256 seqused_k=1 dtype=bf16|impl=3,bm=64,bn=32,stages=3,ctas=1,splits=4|1
causal_sq4|batch=2 heads_q=8 heads_kv=2 seqlen_q=4 seqlen_k=129 head_dim=64 page_size=16 causal=1 seqused_k=1 return_lse=1 dtype=f16|impl=3,bm=64,bn=64,stages=2,ctas=1,splits=3|1
mqa32_sq4|batch=1 heads_q=32 heads_kv=1 seqlen_q=4 seqlen_k=77 head_dim=128 page_size=64 causal=1 dtype=bf16|impl=3,bm=64,bn=64,stages=3,ctas=1,splits=2|1
window|batch=2 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=1000 head_dim=64 page_size=16 window_left=40 dtype=f16|impl=3,bm=64,bn=64,stages=4,ctas=1,splits=5|1
softcap_unpaged|batch=1 heads_q=8 heads_kv=2 seqlen_q=4 seqlen_k=129 head_dim=128 causal=1 window_left=20 softcap=30 dtype=bf16|impl=3,bm=64,bn=32,stages=2,ctas=1,splits=2|1
fp8_paged16|batch=3 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=77 head_dim=128 page_size=16 seqused_k=1 return_lse=1 dtype=e4m3 descale_q=0.5 descale_k=2 descale_v=1.5|impl=3,bm=64,bn=64,stages=4,ctas=1,splits=3|1
fp8_hd256_causal|batch=2 heads_q=8 heads_kv=1 seqlen_q=4 seqlen_k=129 head_dim=256 page_size=256 causal=1 return_lse=1 dtype=e4m3|impl=3,bm=64,bn=32,stages=3,ctas=1,splits=2|1
fp8_hd64_64b|batch=3 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=1000 head_dim=64 page_size=16 seqused_k=1 return_lse=1 dtype=e4m3 descale_q=0.5 descale_k=2 descale_v=1.5|impl=3,bm=64,bn=128,stages=4,ctas=1,splits=3|1
fp8_hd96_mqa|batch=1 heads_q=32 heads_kv=1 seqlen_q=4 seqlen_k=129 head_dim=96 page_size=64 causal=1 softcap=30 dtype=e4m3|impl=3,bm=64,bn=64,stages=2,ctas=1,splits=2|1
fp8_page1_gather|batch=2 heads_q=8 heads_kv=2 seqlen_q=1 seqlen_k=1000 head_dim=128 page_size=1 seqused_k=1 return_lse=1 dtype=e4m3|impl=3,bm=64,bn=64,stages=2,ctas=1,splits=2|1
fp8_page4_hd64|batch=2 heads_q=16 heads_kv=2 seqlen_q=1 seqlen_k=300 head_dim=64 page_size=4 window_left=40 dtype=e4m3|impl=3,bm=64,bn=64,stages=3,ctas=1,splits=1|1
llama_8k_b4|batch=4 heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=8192 head_dim=128 page_size=16 dtype=bf16|-|0
EOF
}

log "verify on $BACKEND"
echo "case,result" > "$OUT/verify.csv"
while IFS='|' read -r name items cfg small; do
  [ "$(elapsed)" -gt "$budget" ] && { log "budget spent: verify stops"; break; }
  [ $nogpu = 1 ] && [ "$small" = 0 ] && continue # minutes on the emulator
  # shellcheck disable=SC2206 # the items are words
  A=(attention $items --arch sm_90a)
  [ "$cfg" != - ] && A+=(--config "$cfg")
  if timeout 300 "$PT" run "${A[@]}" --backend "$BACKEND" --check >>"$OUT/log.txt" 2>&1; then r=ok; else r=FAIL; fail=1; fi
  echo "$name,$r" >> "$OUT/verify.csv"
  log "$name $r"
done < <(cases)

echo "case,result" > "$OUT/bits.csv"
if [ $nogpu = 0 ]; then
  log "bits: emulator vs GPU"
  while IFS='|' read -r name items cfg small; do
    [ "$(elapsed)" -gt "$budget" ] && { log "budget spent: bits stops"; break; }
    [ "$small" = 1 ] || continue
    # shellcheck disable=SC2206 # the items are words
  A=(attention $items --arch sm_90a)
    [ "$cfg" != - ] && A+=(--config "$cfg")
    "$PT" run "${A[@]}" --backend emu --seed 3 --out "o=$OUT/$name.emu.npy" >>"$OUT/log.txt" 2>&1
    "$PT" run "${A[@]}" --backend cuda --seed 3 --out "o=$OUT/$name.gpu.npy" >>"$OUT/log.txt" 2>&1
    if cmp -s "$OUT/$name.emu.npy" "$OUT/$name.gpu.npy"; then r=identical; else r=DIFFER; fail=1; fi
    rm -f "$OUT/$name.emu.npy" "$OUT/$name.gpu.npy"
    echo "$name,$r" >> "$OUT/bits.csv"
    log "$name $r"
  done < <(cases)
fi

# the op's bytes (docs/attention.md "Counts": q, k, v, o once, the block table)
bytes_of() { # B Sk impl -> bytes of the Llama decode problem (Hq 32, Hkv 8, d 128, page 16; bf16, or e4m3 q k v)
  local es=2
  [ "$3" = fp8 ] && es=1
  python3 -c "B,S,e=$1,$2,$es; print(e*(B*32*128 + B*S*8*256) + 2*B*32*128 + 4*B*((S+15)//16))"
}
us_of() { grep -E '^bench +median' | head -1 | grep -oE 'median [0-9.]+' | grep -oE '[0-9.]+'; }

echo "shape,impl,us,GB/s,of_copy" > "$OUT/bench.csv"
if [ $nogpu = 0 ]; then
  log "bench"
  cline=$("$PT" run elementwise --expr 'y = x * 1.0' --shape x=8192x8192 --dtype f32 --backend cuda --bench 2>&1 |
          tee -a "$OUT/log.txt")
  cus=$(echo "$cline" | us_of)
  copy=$(python3 -c "print(f'{2 * 4 * 8192 * 8192 / ($cus * 1e-6) / 1e9:.0f}')" 2>/dev/null || echo)
  log "copy: ${cus:-?} us, ${copy:-?} GB/s"
  echo "copy_f32_8192x8192,-,$cus,$copy,1.00" >> "$OUT/bench.csv"
  for s in "64 8192" "16 32768" "1 32768"; do
    [ "$(elapsed)" -gt "$budget" ] && { log "budget spent: bench stops"; break; }
    read -r b sk <<<"$s"
    items="batch=$b heads_q=32 heads_kv=8 seqlen_q=1 seqlen_k=$sk head_dim=128 page_size=16 dtype=bf16"
    for impl in 3 1 fp8; do
      arch=sm_90a
      [ $impl = 1 ] && arch=sm_90
      run_items=$items
      # fp8: e4m3 q, k, v (half the K/V bytes), o bf16
      [ $impl = fp8 ] && run_items="${items/dtype=bf16/dtype=e4m3}"
      by=$(bytes_of "$b" "$sk" "$impl")
      # shellcheck disable=SC2086
      us=$("$PT" run attention $run_items --arch $arch --backend cuda --check --bench 2>&1 | tee -a "$OUT/log.txt" | us_of)
      gbs=$(python3 -c "print(f'{$by / ($us * 1e-6) / 1e9:.0f}')" 2>/dev/null || echo)
      frac=$(python3 -c "print(f'{$gbs / $copy:.2f}')" 2>/dev/null || echo)
      echo "B${b}_Sk${sk},$impl,$us,$gbs,$frac" >> "$OUT/bench.csv"
      log "B$b Sk$sk impl=$impl ($arch default): ${us:-?} us, ${gbs:-?} GB/s, ${frac:-?} of copy"
    done
  done
fi

summary_md "sm_90a split-KV decode (impl=3) check"
exit $fail
