#!/usr/bin/env bash
# The Slurm acceptance test on a single-node cluster on loopback (munge +
# slurmctld + slurmd, started here, stopped by PID): a 4-task array of one
# problem set on the emulator backend, merged: the winners equal an unsharded
# run's; merging twice changes nothing; one task killed with kill -9 mid-sweep
# and rerun finishes without measuring again what it had stored.
#   scripts/slurm/ci_test.sh PTXTUNE_BIN
# Skipped (exit 0, one line) when slurm-wlm or munge is not installed; bounded
# in time (every wait has a deadline; about 30-60 s). Must run as root (the
# daemons run as root on this private cluster).
set -uo pipefail
bin=${1:-${PTXTUNE_BIN:-}}
here=$(cd "$(dirname "$0")" && pwd)
for t in slurmctld slurmd sbatch squeue sinfo munged; do
  if ! command -v "$t" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$t" ]; then
    echo "slurm test skipped: $t not installed (apt-get install slurm-wlm munge)"; exit 0
  fi
done
[ -n "$bin" ] && [ -x "$bin" ] || { echo "slurm test: no ptxtune binary given" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slurm test skipped: needs root (the daemons of the private cluster)"; exit 0; }
PATH=$PATH:/usr/sbin
w=$(mktemp -d /tmp/ptxtune-slurm-XXXXXX)
pids=()
fail() { echo "slurm test FAILED: $*" >&2; for f in "$w"/*.log "$w"/out/task-*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -15 "$f" >&2; }; done; exit 1; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; kill -9 "$p" 2>/dev/null; done
  rm -rf "$w"
}
trap cleanup EXIT
# the daemons' ports: free ones above 20000
port=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$w/state" "$w/spool" "$w/munge" "$w/out"
chmod 700 "$w/munge"
dd if=/dev/urandom of="$w/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$w/munge/munge.key"
munged --key-file="$w/munge/munge.key" --socket="$w/munge/sock" --pid-file="$w/munge/pid" \
  --log-file="$w/munged.log" --seed-file="$w/munge/seed" --force || fail "munged did not start"
for _ in $(seq 50); do [ -s "$w/munge/pid" ] && break; sleep 0.1; done
pids+=("$(cat "$w/munge/pid")")
cpus=$(nproc)
cat > "$w/slurm.conf" <<CONF
ClusterName=ptxtune
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$w/munge/sock
CredType=cred/munge
StateSaveLocation=$w/state
SlurmdSpoolDir=$w/spool
SlurmctldPidFile=$w/slurmctld.pid
SlurmdPidFile=$w/slurmd.pid
SlurmctldLogFile=$w/slurmctld.log
SlurmdLogFile=$w/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF=$w/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
up=0
for _ in $(seq 150); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
  sleep 0.2
done
[ "$up" = 1 ] || fail "the cluster did not come up in 30 s"

# wait for job $1 to leave the queue (deadline $2 seconds)
wait_job() {
  for _ in $(seq $(( $2 * 5 ))); do
    [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  scancel "$1" 2>/dev/null; fail "job $1 still queued or running after $2 s"
}

cat > "$w/set.txt" <<'SET'
elementwise expr='y = silu(g) * u' shape=g=8x256,u=8x256 name=gate
elementwise expr='y = softmax(x, -1)' shape=x=8x256 dtype=f16 name=softmax
elementwise expr='y = relu(x) + 1' shape=x=8x256 name=relu
elementwise expr='y = x * rsqrt(mean(x*x, -1) + 1e-6)' shape=x=8x512 name=rms
elementwise expr='y = exp(x) * 0.5' shape=x=8x256 name=exp
elementwise expr='y = tanh(x)' shape=x=8x256 name=tanh
SET
opts=(--backend emu --strategy exhaustive --budget 6 --no-compile --threads 1)
job=$("$here/tune_array.sh" --problems "$w/set.txt" --tasks 4 --out "$w/out" --ptxtune "$bin" \
      -- "${opts[@]}") || fail "submitting the array"
wait_job "$job" 60
for i in 1 2 3 4; do
  [ -f "$w/out/shard-$i.db" ] || fail "task $i left no store"
  grep -q "tune exited 0" "$w/out/task-$i.log" || fail "task $i did not finish"
done
"$bin" db merge --db "$w/all.db" "$w"/out/shard-*.db > "$w/merge1.txt" || fail "merge"
"$bin" db merge --db "$w/all.db" "$w"/out/shard-*.db > "$w/merge2.txt" || fail "second merge"
grep -q " [1-9][0-9]* measurements added" "$w/merge2.txt" && fail "merging twice added rows: $(cat "$w/merge2.txt")"
(cd "$w" && "$bin" tune --problems set.txt --db one.db --quiet --top 0 "${opts[@]}" >/dev/null) \
  || fail "the unsharded run"
"$bin" export --db "$w/all.db" --format csv | cut -d, -f3,6 | sort > "$w/sharded.csv"
"$bin" export --db "$w/one.db" --format csv | cut -d, -f3,6 | sort > "$w/one.csv"
[ "$(wc -l < "$w/one.csv")" -eq 7 ] || fail "expected 6 winners: $(cat "$w/one.csv")"
cmp -s "$w/sharded.csv" "$w/one.csv" || fail "sharded winners differ: $(diff "$w/sharded.csv" "$w/one.csv")"
echo "slurm: 4-task array merged, winners equal the unsharded run's; second merge added nothing"

# kill -9 one task's sweep mid-run, rerun the task: it resumes, measuring only the rest.
# Four times the first set's problems, each with 16 to 32 times its rows, so the
# sweep outlasts the 1.5 s before the kill on an idle machine too (the first set's
# shard finished in 0.8 s in CI, and 16x rows alone were 158 of 168 done by then).
for sh in 32x1024 64x1024 16x2048 32x2048; do
  sed "s/8x[0-9]*/$sh/g; s/name=\([a-z]*\)/name=\1_$sh/" "$w/set.txt"
done > "$w/set2.txt"
rm -rf "$w/out2"
job=$("$here/tune_array.sh" --problems "$w/set2.txt" --tasks 2 --out "$w/out2" --ptxtune "$bin" \
      --array 1 -- --backend emu --strategy exhaustive --budget 60 --no-compile --threads 1) \
  || fail "submitting the task to kill"
killed=0
for _ in $(seq 300); do
  if [ -s "$w/out2/task-1.pid" ]; then
    p=$(cat "$w/out2/task-1.pid")
    # some candidates stored first
    if [ -f "${TMPDIR:-/tmp}/ptxtune-$job-1.db" ] && sleep 1.5; then kill -9 "$p" 2>/dev/null && killed=1; break; fi
  fi
  sleep 0.1
done
[ "$killed" = 1 ] || fail "the task's sweep could not be killed"
wait_job "$job" 60
[ -f "$w/out2/shard-1.db" ] || fail "the killed task copied out no store"
count() { "$bin" db check --db "$1" | sed -n 's/.* \([0-9][0-9]*\) measurements.*/\1/p'; }
stored=$(count "$w/out2/shard-1.db")
[ -n "$stored" ] && [ "$stored" -gt 0 ] || fail "the killed task had stored nothing"
job=$("$here/tune_array.sh" --problems "$w/set2.txt" --tasks 2 --out "$w/out2" --ptxtune "$bin" \
      --array 1 -- --backend emu --strategy exhaustive --budget 60 --no-compile --threads 1) \
  || fail "resubmitting the killed task"
wait_job "$job" 90
grep -q "tune exited 0" "$w/out2/task-1.log" || fail "the rerun did not finish"
grep -q ", resumed" "$w/out2/task-1.log" || fail "the rerun did not resume the run: $(cat "$w/out2/task-1.log")"
total=$(count "$w/out2/shard-1.db")
measured=$(sed -n 's/^\([0-9][0-9]*\) measured, \([0-9][0-9]*\) replayed.*/\1/p' "$w/out2/task-1.log")
replayed=$(sed -n 's/^\([0-9][0-9]*\) measured, \([0-9][0-9]*\) replayed.*/\2/p' "$w/out2/task-1.log")
[ "$replayed" = "$stored" ] || fail "the rerun replayed $replayed, the killed task had stored $stored"
[ $((measured + stored)) = "$total" ] || fail "measured $measured + stored $stored != $total"
echo "slurm: a task killed with kill -9 after $stored of $total candidates, rerun: resumed (--any-host, so on any node), measured only the other $measured"
exit 0
