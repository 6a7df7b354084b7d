#!/usr/bin/env bash
# A ptxtune sweep as a Slurm job array: one shard of the problem set per task,
# each into a node-local store (SQLite's WAL needs a local file system), copied
# out into OUT when the task ends, however it ends; a rerun of a task (on any
# node) copies its store in and resumes it. docs/slurm.md says how to use it.
#
#   scripts/slurm/tune_array.sh --problems FILE --tasks N --out DIR [--ptxtune BIN]
#       [--sbatch "ARGS"] [--array LIST] [--write-only] [-- TUNE OPTIONS...]
#
# Writes DIR/tune_array.sbatch and submits it (sbatch --array=1-N, or LIST to
# rerun some tasks); prints the job id. Then, when the array is done:
#   ptxtune db merge --db ALL.db DIR/shard-*.db      (idempotent)
set -euo pipefail

problems= tasks= out= bin= sbatch_args= array= write_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --problems) problems=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ptxtune) bin=$2; shift 2 ;;
    --sbatch) sbatch_args=$2; shift 2 ;;
    --array) array=$2; shift 2 ;;
    --write-only) write_only=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tune_array.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$problems" ] || { echo "tune_array.sh: missing --problems FILE" >&2; exit 2; }
[ -f "$problems" ] || { echo "tune_array.sh: no such problem file '$problems'" >&2; exit 2; }
case "$tasks" in ''|*[!0-9]*|0) echo "tune_array.sh: bad --tasks '$tasks' (a count >= 1)" >&2; exit 2 ;; esac
[ -n "$out" ] || { echo "tune_array.sh: missing --out DIR" >&2; exit 2; }
if [ -z "$bin" ]; then bin=$(command -v ptxtune || true); fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "tune_array.sh: no ptxtune binary (--ptxtune BIN)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
problems=$(cd "$(dirname "$problems")" && pwd)/$(basename "$problems")
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tune_args=$(printf '%q ' "$@")

job="$out/tune_array.sbatch"
cat > "$job" <<JOB
#!/usr/bin/env bash
#SBATCH --job-name=ptxtune
#SBATCH --output=$out/task-%a.log
#SBATCH --ntasks=1
# One shard of $problems (task I of $tasks): written by scripts/slurm/tune_array.sh
set -u
i=\$SLURM_ARRAY_TASK_ID
local=\${TMPDIR:-/tmp}/ptxtune-\$SLURM_ARRAY_JOB_ID-\$i.db
keep=$out/shard-\$i.db
rm -f "\$local" "\$local-wal" "\$local-shm"
# a task killed before: its copied-out store, resumed here (on any node)
if [ -f "\$keep" ]; then cp "\$keep" "\$local"; fi
"$bin" tune --problems "$problems" --shard "\$i/$tasks" --db "\$local" --any-host --quiet \\
    --top 0 $tune_args &
tune=\$!
echo \$tune > "$out/task-\$i.pid"
wait \$tune
rc=\$?
# copy out, whatever happened: one file (the WAL folded in by a merge into a
# new store), renamed into place whole
if [ -f "\$local" ]; then
  rm -f "\$keep.tmp"
  if "$bin" db merge --db "\$keep.tmp" "\$local" >/dev/null; then
    mv -f "\$keep.tmp" "\$keep"
  else
    echo "task \$i: copying the store out failed" >&2
    rc=1
  fi
fi
rm -f "\$local" "\$local-wal" "\$local-shm" "$out/task-\$i.pid"
echo "task \$i: tune exited \$rc"
exit \$rc
JOB
chmod +x "$job"
if [ "$write_only" = 1 ]; then echo "$job"; exit 0; fi
# shellcheck disable=SC2086
sbatch --parsable --array="${array:-1-$tasks}" $sbatch_args "$job"
