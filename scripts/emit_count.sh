#!/usr/bin/env bash
# Instructions per emission (callgrind: the difference of 6 and 1 emissions,
# divided by 5) of the rows below, for the tree whose build is given:
#   scripts/emit_count.sh TREE [BUILD]     (BUILD default TREE/build; needs libptxtune.a there)
#   CACHED=1 scripts/emit_count.sh TREE    (one ptx_sigcache across the emissions)
# Prints one line per row: instructions per emission and the PTX lines.
set -eu
tree=$1
build=${2:-$tree/build}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp /tmp/emit_count.XXXXXX)
trap 'rm -f "$bin" "$bin".cg.* "$bin".err "$bin".out' EXIT
gcc ${CACHED:+-DCACHED} -O2 -g -std=c17 -D_GNU_SOURCE -I"$tree" -I"$tree/include" "$here/emit_count.c" "$build/libptxtune.a" \
    -lpcre2-8 -lsqlite3 -ljansson -lm -ldl -lpthread -o "$bin"
L='batch=1 heads_q=32 heads_kv=8 seqlen_k=4096 dtype=bf16'
rows=(
    "sm_80|attention|$L seqlen_q=4096 head_dim=128 causal=1|"
    "sm_80|attention|$L seqlen_q=4096 head_dim=128 causal=1|bm=64,bn=128,warps=4,q_in_regs=1,kv_stages=2"
    "sm_80|attention|$L seqlen_q=4096 head_dim=128 causal=1|bm=64,bn=128,warps=4,q_in_regs=1"
    "sm_80|attention|$L seqlen_q=4096 head_dim=128|"
    "sm_80|attention|$L seqlen_q=4096 head_dim=64 causal=1|"
    "sm_80|attention|$L seqlen_q=4096 head_dim=256 causal=1|"
    "sm_80|gemm|m=4096 n=4096 k=4096 layout=tn dtype=bf16|"
)
for r in "${rows[@]}"; do
    IFS='|' read -r arch op items cfg <<<"$r"
    ins() {
        valgrind --tool=callgrind --callgrind-out-file="$bin.cg.$1" "$bin" "$arch" "$1" "$op" "$items" $cfg \
            2>"$bin.err" >"$bin.out" || { cat "$bin.err" >&2; exit 1; }
        grep -m1 '^summary:' "$bin.cg.$1" | awk '{print $2}'
    }
    a=$(ins 1)
    b=$(ins 6)
    echo "$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f M", (b-a)/5e6}') | $(cat "$bin.out") | $arch $op $items"
done
