#!/usr/bin/env bash
# The main job: emit and compile the elementwise family for every claimed
# architecture and print one row per variant (registers, spills, shared
# memory, emit and compile time). Later this becomes the tuning sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
B=build/cli/ptxtune
status=0
run() { echo; echo "## $1 ($3, $2)"; shift; $B variants elementwise --expr "$3" --shape "$1" --dtype "$2" --arch all \
          | awk 'NR==1 || /variants,|FAILED/ || NR % 12 == 0' || status=1; }
run "softmax"           "x=4096x8192"                        bf16 "y = softmax(x * 0.125, -1)"
run "layernorm"         "x=4096x4096,r=4096x4096,g=4096,b=4096" bf16 "y = layernorm(x + r, -1) * g + b"
run "rmsnorm"           "x=4096x4096,g=4096"                 f16  "y = x * rsqrt(mean(x*x, -1) + 1e-6) * g"
run "bias+gelu"         "x=4096x8192,w=8192,b=8192"          bf16 "y = gelu(x * w + b)"
run "residual+rmsnorm"  "x=4096x4096,r=4096x4096,g=4096"     bf16 "h = x + r; y = rmsnorm(h, -1) * g"
run "swiglu"            "x=4096x14336,u=4096x14336"          f32  "y = silu(x) * u"
echo
echo "(every 12th variant shown; 'ptxtune variants' prints all)"
exit $status
