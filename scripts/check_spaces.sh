#!/usr/bin/env bash
# Every config of each acceptance space through the assembler with the
# resource check (0 spills, no stack frame, no ld/st.local in the PTX, no
# ptxas C75xx code), by running the space tests of the suite with
# PTXTUNE_FULL_SPACE=1 (per commit they assemble a seeded sample: see
# tests/test_space.h). Writes a table to results/cpu/spaces.md, rewritten
# after each space so an interrupted run keeps what finished.
#
#   scripts/check_spaces.sh [BUILD_DIR] [OUT.md]     (default build, results/cpu/spaces.md)
#   SPACES="gemm fa3" scripts/check_spaces.sh        (a subset: gemm fa2 fa2pack decode fa3 fa3decode fa3fp8)
#
# Exit 0 when every space passed, 1 when one failed, 2 for bad usage.
# Hours on a loaded 2-core machine: run it nice'd in the background.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-results/cpu/spaces.md}
[ -f "$build/build.ninja" ] || { echo "check_spaces: no build directory '$build' (meson setup $build)" >&2; exit 2; }
all="gemm fa2 fa2pack decode fa3 fa3decode fa3fp8"
spaces=${SPACES:-$all}
for s in $spaces; do
    case " $all " in *" $s "*) ;; *) echo "check_spaces: unknown space '$s' (one of: $all)" >&2; exit 2 ;; esac
done

# name -> test program, criterion filter, what it covers
prog_of() {
    case $1 in
    gemm) echo "test_gemm_sm90 gemm_sm90/every_config_of_the_8192_bf16_space_assembles" ;;
    fa2) echo "test_attention_space attention_space/every_config_of_the_llama3_8b_prefill_space_assembles" ;;
    fa2pack) echo "test_attention_space attention_space/every_packed_config_assembles" ;;
    decode) echo "test_attention_decode attention_decode/llama3_8b_decode_space_assembles" ;;
    fa3) echo "test_attention_fa3 attention_fa3/llama3_8b_prefill_space_assembles_for_sm_90a" ;;
    fa3decode) echo "test_attention_fa3_decode attention_fa3_decode/llama3_8b_decode_space_assembles_for_sm_90a" ;;
    fa3fp8) echo "test_attention_fa3 attention_fa3/llama3_8b_fp8_prefill_space_assembles_for_sm_90a" ;;
    esac
}

targets=()
for s in $spaces; do
    read -r prog _ <<<"$(prog_of "$s")"
    targets+=("tests/$prog")
done
nice ninja -C "$build" -j1 "${targets[@]}" >/dev/null || { echo "check_spaces: build failed" >&2; exit 1; }

logdir=$(mktemp -d "${TMPDIR:-/tmp}/check_spaces.XXXXXX")
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git diff --name-only HEAD -- gen ptx tests 2>/dev/null | tr '\n' ' ')
[ -z "$dirty" ] || commit="$commit (+ uncommitted changes in: $dirty)"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load0=$(cut -d' ' -f1-3 /proc/loadavg)
rows=""
status=0

write_table() {
    {
        echo "# Every config of the acceptance spaces assembles"
        echo
        echo "\`scripts/check_spaces.sh\`: the space tests with PTXTUNE_FULL_SPACE=1 (every valid config"
        echo "built, scanned for ld/st.local, assembled: 0 spill stores/loads, stack frame 0, no C75xx; the"
        echo "attention prefill space tests also refuse any C7xxx). Per commit the suite assembles a seeded"
        echo "sample of each (tests/test_space.h: the riskiest tiles plus every value of every parameter)."
        echo
        echo "- machine: $(uname -n), $(nproc) cores, $cpu"
        echo "- commit: $commit"
        echo "- started: $started, load average at start $load0${1:+, $1}"
        echo
        echo "| space | arch | valid configs | assembled | failures | assembly time (s) | program wall (s) | result |"
        echo "|---|---|---|---|---|---|---|---|"
        printf '%b' "$rows"
        echo
        echo "Assembly time: the test's own clock over emission and assembly (ptxas, or nvJitLink where the"
        echo "attention fa2 tests use it), on the machine's load. Decode (fa2): configs whose PTX is identical"
        echo "are assembled once (the assembled column counts distinct kernels; the space's split counts"
        echo "share a text). fa3 decode: the split counts 1 and 2 (every count above 1 has one text)."
    } >"$out.tmp" && mv "$out.tmp" "$out"
}

for s in $spaces; do
    read -r prog filter <<<"$(prog_of "$s")"
    log="$logdir/$s.log"
    t0=$(date +%s)
    PTXTUNE_FULL_SPACE=1 nice "$build/tests/$prog" --filter "$filter" -j1 >"$log" 2>&1
    rc=$?
    wall=$(($(date +%s) - t0))
    result=PASS
    [ $rc -eq 0 ] || { result="FAIL (exit $rc)"; status=1; }
    grep -q 'Tested: 0\b' "$log" && { result="NOT RUN (filter matched nothing)"; status=1; }
    grep -qi 'skipp' "$log" && result="SKIPPED ($(grep -m1 -i 'skip' "$log" | tr -d '|' | cut -c1-80))"
    nfail=$(grep -c 'Assertion Failed\|Assertion failed' "$log")
    case $s in
    gemm | fa2 | fa2pack)
        line=$(grep '^space: ' "$log" | sed 's/^space: //')
        if [ -n "$line" ]; then
            while IFS= read -r l; do
                rows+="| $l | $wall | $result |\n"
            done <<<"$line"
        else
            rows+="| $s | | | | $nfail | | $wall | $result |\n"
        fi
        ;;
    decode)
        l=$(grep -m1 'attention decode: Llama-3-8B decode space' "$log")
        cfg=$(sed -n 's/.*: \([0-9]*\) configs accepted.*/\1/p' <<<"$l")
        kern=$(sed -n 's/.*, \([0-9]*\) distinct kernels.*/\1/p' <<<"$l")
        bad=$(sed -n 's/.* \([0-9]*\) failures;.*/\1/p' <<<"$l")
        tt=$(sed -n 's/.*total \([0-9.]*\) s.*/\1/p' <<<"$l")
        rows+="| attention decode Llama-3-8B B16 Sk=8192 page 16 bf16 (fa2) | sm_80..sm_90 | ${cfg:-?} | ${kern:-?} distinct | ${bad:-$nfail} | ${tt:-?} | $wall | $result |\n"
        ;;
    fa3 | fa3decode | fa3fp8)
        while IFS= read -r l; do
            [ -n "$l" ] || continue
            what=$(sed -n 's/^\(Llama-3-8B [a-z]*\) (\([^)]*\)).*/\1 \2/p' <<<"$l" | cut -c1-100)
            built=$(sed -n 's/.*on sm_90a: \([0-9]*\) of \([0-9]*\) valid.*/\1/p' <<<"$l")
            valid=$(sed -n 's/.*on sm_90a: \([0-9]*\) of \([0-9]*\) valid.*/\2/p' <<<"$l")
            tt=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' <<<"$l")
            rows+="| attention $what (fa3) | sm_90a | ${valid:-?} | ${built:-?} | $nfail (assertions, program) | ${tt:-?} | $wall | $result |\n"
        done <<<"$(grep '^Llama-3-8B .* on sm_90a: ' "$log")"
        grep -q '^Llama-3-8B .* on sm_90a: ' "$log" || rows+="| $s | sm_90a | | | $nfail | | $wall | $result |\n"
        ;;
    esac
    write_table "running"
    echo "check_spaces: $s: $result in ${wall}s (log $log)" >&2
done
write_table "finished $(date -u '+%H:%M UTC'), load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "check_spaces: wrote $out (logs in $logdir)" >&2
exit $status
