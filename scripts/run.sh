#!/usr/bin/env bash
# The main job: a tuning sweep of the smoke problem set (elementwise chains
# and a small GEMM) into ./ptxtune.db, then the winners. On a machine with a
# GPU every candidate is compiled, verified and timed on it; without one
# (the default here) candidates are verified on the CPU emulator and ranked
# by the cost model (rows say source=model). Extra arguments go to
# 'ptxtune tune' (e.g. --problems results/problems/llama3_8b_rows.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/cli/ptxtune tune --problems results/problems/smoke.txt --budget 40 --db ptxtune.db "$@"
