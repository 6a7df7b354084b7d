#!/usr/bin/env bash
# Every GPU check in one call: the entry point for a session lent an H200
# (15 minutes of device time in all, at most 10 minutes a command).
#
#   scripts/gpu/all.sh [--no-gpu] [--budget SECONDS] [--only A,B] [--skip A,B] [--plan]
#
# Runs, in this order, each with a share of the budget:
#   gemm_sm90             gemm_sm90.sh             weight 4  (issue 13: wgmma GEMM)
#   attention_fa3         attention_fa3.sh         weight 4  (issue 16: fa3 prefill)
#   attention_fa3_decode  attention_fa3_decode.sh  weight 3  (issue 16: fa3 decode)
#   hopper                hopper.sh                weight 2  (issue 12: probes, cluster, wgmma)
#   check                 check.sh --quick         weight 5  (elementwise, attention grids, benches)
# A script's share is the budget still left times its weight over the
# weights still to run (time a script leaves unused goes to the later
# ones); it gets --budget at 4/5 of its share (its steps check that
# before they start) and is killed at its share + 20 s (`timeout`; the
# tables it wrote so far stay), and never past the whole budget + 40 s. A
# failing, missing or killed script does not stop the rest.
#
# --budget  the whole run (default 480 s: with the machine's start-up it
#           fits one 10-minute command and leaves device time for a rerun)
# --no-gpu  every script's CPU half (emulator, no benchmarks): the dry run
#           of this script on a machine without a GPU
# --only, --skip  names from the list above (a rerun of what failed)
# --plan    print the schedule and the commands, run nothing
#
# $OUT (default results/h200 with a GPU, build-gpu/all-nogpu without) gets
# the results/h200/ layout: one folder per script (OUT of that script;
# check.sh's raw/ packed into check/raw.tgz), env.txt, all.csv (name,
# share_s, budget_s, seconds, exit, status) and summary.md (that table and
# the head of each script's summary.md). Copy $OUT/* into results/h200/ and
# commit it. ptxtune: $PTXTUNE, else the carried build-gpu/ptxtune (built
# here with scripts/gpu/build.sh --stage build-gpu), else build*/cli/ptxtune.
# The device tool call: scripts/gpu/README.md.
# Exit: 0 every script passed, 1 one failed or was killed, 2 bad usage,
# 3 no ptxtune, 4 no GPU (use --no-gpu).
set -uo pipefail

. "$(dirname "$0")/common.sh" # ROOT, T0, elapsed, budget_arg, pt_find

PLAN=(
  "gemm_sm90 4 gemm_sm90.sh"
  "attention_fa3 4 attention_fa3.sh"
  "attention_fa3_decode 3 attention_fa3_decode.sh"
  "hopper 2 hopper.sh"
  "check 5 check.sh --quick"
)
nogpu=0
budget=480
only=""
skip=""
plan=0
while [ $# -gt 0 ]; do
  case $1 in
    --no-gpu) nogpu=1 ;;
    --budget) budget_arg all.sh "${2:-}"; budget=$2; shift ;;
    --only) only=,${2:-},; shift ;;
    --skip) skip=,${2:-},; shift ;;
    --plan) plan=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    *) echo "all.sh: unknown option '$1' (--no-gpu --budget S --only A,B --skip A,B --plan)" >&2; exit 2 ;;
  esac
  shift
done
names=""
for p in "${PLAN[@]}"; do names="$names ${p%% *}"; done
for n in ${only//,/ } ${skip//,/ }; do
  case " $names " in *" $n "*) ;; *) echo "all.sh: no script '$n' (one of:$names)" >&2; exit 2 ;; esac
done
selected() { # name
  { [ -z "$only" ] || [[ $only == *",$1,"* ]]; } && [[ $skip != *",$1,"* ]]
}

pt_find || { echo "all.sh: no ptxtune binary (set PTXTUNE, or carry build-gpu: scripts/gpu/build.sh --stage build-gpu)" >&2; exit 3; }
export PTXTUNE=$PT PTXTUNE_BIN=$PT # every script takes this one
if [ $nogpu = 0 ] && [ $plan = 0 ] && ! "$PT" devices >/dev/null 2>&1; then
  echo "all.sh: no GPU ($("$PT" devices 2>&1 | head -1)); rerun with --no-gpu for the CPU halves" >&2
  exit 4
fi
if [ $nogpu = 1 ]; then OUT=${OUT_NOGPU:-$ROOT/build-gpu/all-nogpu}; else OUT=${OUT:-$ROOT/results/h200}; fi
mode=$([ $nogpu = 1 ] && echo --no-gpu)

# the weights of the selected scripts
wleft=0
for p in "${PLAN[@]}"; do
  read -r n w _ <<<"$p"
  selected "$n" && wleft=$((wleft + w))
done
if [ $plan = 1 ]; then
  echo "all.sh plan: budget $budget s, ptxtune $PT, out $OUT"
  for p in "${PLAN[@]}"; do
    read -r n w cmd <<<"$p"
    selected "$n" || continue
    share=$(( budget * w / wleft ))
    echo "  $n: share ${share} s (more when an earlier script ends early): OUT=$OUT/$n scripts/gpu/$cmd${mode:+ $mode} --budget $(( share * 4 / 5 )), killed at $(( share + 20 )) s"
  done
  exit 0
fi
mkdir -p "$OUT"
: > "$OUT/log.txt"
log() { echo "[$(printf '%4d' "$(elapsed)")s] $*" | tee -a "$OUT/log.txt" >&2; }
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  echo "ptxtune: $PT ($("$PT" --version 2>&1))"
  echo "budget: $budget s, mode: $([ $nogpu = 1 ] && echo no-gpu || echo gpu)"
  echo "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
  echo "devices: $("$PT" devices 2>&1 | head -3 | tr '\n' ' ')"
} > "$OUT/env.txt"
log "ptxtune $PT; budget $budget s; out $OUT"
echo "name,share_s,budget_s,seconds,exit,status" > "$OUT/all.csv"
deadline=$(( budget + 40 ))
fail=0
for p in "${PLAN[@]}"; do
  read -r n w cmd <<<"$p"
  selected "$n" || continue
  left=$(( budget - $(elapsed) ))
  share=$(( left * w / wleft ))
  wleft=$((wleft - w))
  hard=$(( share + 20 ))
  [ $hard -gt $(( deadline - $(elapsed) )) ] && hard=$(( deadline - $(elapsed) ))
  sb=$(( share * 4 / 5 ))
  if [ $sb -lt 10 ] || [ $hard -lt 15 ]; then
    log "$n: skipped, no time left (share $share s)"
    echo "$n,$share,0,0,-,skipped" >> "$OUT/all.csv"
    fail=1
    continue
  fi
  rm -rf "${OUT:?}/$n"
  mkdir -p "$OUT/$n"
  log "$n: scripts/gpu/$cmd${mode:+ $mode} --budget $sb (killed at $hard s)"
  s0=$(date +%s)
  # shellcheck disable=SC2086
  dir=$OUT/$n
  OUT=$dir OUT_NOGPU=$dir timeout -k 5 "$hard" "$ROOT/scripts/gpu/"$cmd $mode --budget "$sb" \
    > "$OUT/$n/stdout.txt" 2> "$OUT/$n/stderr.txt"
  rc=$?
  secs=$(( $(date +%s) - s0 ))
  case $rc in
    0) st=ok ;;
    124|137) st=killed; fail=1 ;;
    3) st=no-ptxtune; fail=1 ;;
    4) st=no-gpu; fail=1 ;;
    *) st=FAIL; fail=1 ;;
  esac
  if [ -d "$OUT/$n/raw" ]; then # check.sh's every-run outputs: one archive
    tar -czf "$OUT/$n/raw.tgz" -C "$OUT/$n" raw && rm -rf "${OUT:?}/$n/raw"
  fi
  rm -rf "${OUT:?}/$n/results" # check.sh's copy of its own tables
  echo "$n,$share,$sb,$secs,$rc,$st" >> "$OUT/all.csv"
  log "$n: $st (exit $rc) in $secs s"
done

{
  echo "# GPU checks ($(date -u +%Y-%m-%dT%H:%MZ), $([ $nogpu = 1 ] && echo 'CPU halves, --no-gpu' || echo GPU), budget $budget s, $(elapsed) s)"
  echo
  echo "| script | share s | --budget | seconds | exit | status |"
  echo "| --- | --- | --- | --- | --- | --- |"
  tail -n +2 "$OUT/all.csv" | while IFS=, read -r n sh sb secs rc st; do
    echo "| $n | $sh | $sb | $secs | $rc | $st |"
  done
  echo
  cat "$OUT/env.txt" | sed 's/^/    /'
  for p in "${PLAN[@]}"; do
    read -r n _ <<<"$p"
    [ -d "$OUT/$n" ] || continue
    echo
    echo "## $n"
    echo
    if [ -s "$OUT/$n/summary.md" ]; then
      head -40 "$OUT/$n/summary.md"
    else # killed (or failed early): what its tables hold so far
      echo "no summary.md; its tables so far:"
      echo
      for t in "$OUT/$n"/*.csv; do
        [ -f "$t" ] || continue
        echo "- $(basename "$t"): $(( $(wc -l < "$t") - 1 )) rows$(grep -qi ',fail' "$t" && echo ", $(grep -ci ',fail' "$t") FAIL")"
      done
      echo
      echo "the end of its stderr:"
      echo '```'; tail -8 "$OUT/$n/stderr.txt"; echo '```'
    fi
  done
} > "$OUT/summary.md"
log "done in $(elapsed) s: $OUT/summary.md"
column -s, -t < "$OUT/all.csv" >&2 2>/dev/null || cat "$OUT/all.csv" >&2
exit $fail
