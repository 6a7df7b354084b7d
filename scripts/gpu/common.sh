# The preamble the GPU check scripts share (sourced, never run):
#
#   . "$(dirname "$0")/common.sh"
#   gpu_init NAME DEFAULT_BUDGET "$@"    # gemm_sm90.sh, attention_fa3*.sh
#
# gpu_init parses the scripts' two options (--no-gpu: the CPU half on the
# emulator; --budget SECONDS: no step starts past it) and sets what their
# bodies use: ROOT (the repository), T0 and elapsed, PT (the ptxtune
# binary), nogpu and budget, BACKEND (cuda, or emu with --no-gpu), OUT
# (results/h200/NAME with a GPU, build-gpu/NAME-nogpu without; $OUT /
# $OUT_NOGPU override), an empty $OUT/log.txt, log and fail=0.
# Exit 2 on a bad option, 3 without a ptxtune binary, 4 without a GPU
# unless --no-gpu. pt_find alone (hopper.sh, all.sh): PT from $PTXTUNE,
# else a carried build-gpu/ptxtune, else a build*/cli/ptxtune; the first
# that runs. budget_arg: the --budget value checked (seconds). summary_md
# TITLE: $OUT/summary.md from verify.csv, bits.csv and bench.csv.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }

pt_find() {
  PT=${PTXTUNE:-}
  if [ -z "$PT" ]; then
    local c
    for c in "$ROOT/build-gpu/ptxtune" "$ROOT"/build*/cli/ptxtune; do
      if [ -x "$c" ] && "$c" --version >/dev/null 2>&1; then PT=$c; break; fi
    done
  fi
  [ -n "$PT" ] && "$PT" --version >/dev/null 2>&1
}

budget_arg() { # script value
  case $2 in
    ''|*[!0-9]*) echo "$1: bad --budget '$2' (seconds)" >&2; exit 2 ;;
  esac
}

gpu_init() { # name default-budget options...
  local name=$1
  budget=$2
  shift 2
  nogpu=0
  while [ $# -gt 0 ]; do
    case $1 in
      --no-gpu) nogpu=1 ;;
      --budget) budget_arg "$name.sh" "${2:-}"; budget=$2; shift ;;
      *) echo "usage: $name.sh [--no-gpu] [--budget SECONDS]" >&2; exit 2 ;;
    esac
    shift
  done
  pt_find || { echo "$name.sh: no ptxtune binary (set PTXTUNE, or carry build-gpu: scripts/gpu/build.sh --stage build-gpu)" >&2; exit 3; }
  if [ $nogpu = 0 ] && ! "$PT" devices >/dev/null 2>&1; then
    echo "$name.sh: no GPU (rerun with --no-gpu)" >&2; exit 4
  fi
  BACKEND=cuda
  [ $nogpu = 1 ] && BACKEND=emu
  if [ $nogpu = 1 ]; then OUT=${OUT_NOGPU:-$ROOT/build-gpu/$name-nogpu}; else OUT=${OUT:-$ROOT/results/h200/$name}; fi
  mkdir -p "$OUT"
  : > "$OUT/log.txt"
  fail=0
}

log() { echo "[$(printf '%4d' "$(elapsed)")s] $*" | tee -a "$OUT/log.txt" >&2; }

summary_md() { # title
  {
    echo "# $1, $(date -u +%Y-%m-%dT%H:%MZ), backend $BACKEND"
    echo
    echo "verify: $(grep -c ',ok$' "$OUT/verify.csv") ok of $(( $(wc -l < "$OUT/verify.csv") - 1 ))"
    echo "bits: $(grep -c ',identical$' "$OUT/bits.csv") identical of $(( $(wc -l < "$OUT/bits.csv") - 1 ))"
    echo
    echo '```'; cat "$OUT/bench.csv"; echo '```'
  } > "$OUT/summary.md"
  log "done in $(elapsed) s; $OUT/summary.md"
}
