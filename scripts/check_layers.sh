#!/usr/bin/env bash
# check_layers.sh [ROOT]: the source tree's two static rules, run by the test
# suite (tests/test_layers.c) so CI counts them. Exit 0 when both hold, 1
# with one line per violation (FILE:LINE: what), 2 on bad usage.
#
# 1. Layers point down. A folder includes headers of its own folder and of
#    the folders below it, never above:
#        ptx < gen < search < tuner < cli,   db beside tuner
#    db/ stores plain records: it includes ptx/ (pt_err, pt_buf) and itself
#    only, so the store never depends on ops, spaces or devices. tuner/ (the
#    candidate pipeline, which records into the store) may include db/; cli/
#    everything. tests/ bench/ scripts/ are exempt. An include must name its
#    folder ("ptx/base.h"); a relative "../x.h" would hide the edge, so it is
#    refused too.
#    runtime/ (the engine runtime, the installed library) sits above ptx/
#    and db/ beside tuner/: it includes ptx/, db/, itself and, of tuner/,
#    only the driver loader tuner/driver.h (which includes ptx/ only), never
#    gen/ or search/: no generator code on an engine's path. cli/ may
#    include it. A row of `allowed` may name a single header ("tuner/driver.h").
#
# 2. One out-of-memory policy: every malloc/calloc/realloc/aligned_alloc/
#    strdup/strndup result stored in a variable is tested for NULL within 16
#    lines (`if (!p`, `p == NULL`, `!p ||`, `|| !p`, `(p &&`, `(p ?`; one test after a
#    block of allocations counts for each), and `p = realloc(p, ...)`
#    (which loses p when it fails) is refused. A line that hands the result
#    on unchecked on purpose (an allocator wrapper whose callers check)
#    carries the comment `oom: caller checks`.
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
[ -d "$root" ] || { echo "check_layers.sh: no directory '$root'" >&2; exit 2; }
cd "$root" || exit 2

# folder -> the folders it may include (itself included)
declare -A allowed=(
    [ptx]="ptx"
    [gen]="ptx gen"
    [search]="ptx gen search"
    [db]="ptx db"
    [tuner]="ptx gen search db tuner"
    [runtime]="ptx db runtime tuner/driver.h"
    [cli]="ptx gen search db tuner runtime cli"
)
folders="ptx gen search db tuner runtime cli"
bad=0

files=()
for f in $folders; do
    [ -d "$f" ] || continue
    while IFS= read -r -d '' p; do files+=("$p"); done \
        < <(find "$f" -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' \) -print0 | sort -z)
done

for p in "${files[@]}"; do
    top=${p%%/*}
    out=$(awk -v top="$top" -v ok=" ${allowed[$top]} " -v file="$p" '
        /^[ \t]*#[ \t]*include[ \t]*"/ {
            s = $0
            sub(/^[^"]*"/, "", s)
            sub(/".*/, "", s)
            if (s ~ /^\.\.?\//) {
                printf "%s:%d: relative include \"%s\" (name the folder)\n", file, FNR, s
                next
            }
            n = index(s, "/")
            if (n == 0)
                next              # same-folder header, e.g. "isa.def" beside it
            inc = substr(s, 1, n - 1)
            if (inc !~ /^(ptx|gen|search|db|tuner|runtime|cli)$/)
                next
            if (index(ok, " " inc " ") == 0 && index(ok, " " s " ") == 0)
                printf "%s:%d: %s/ includes \"%s\": %s/ may include only%s\n", file, FNR, top, s, top, substr(ok, 1, length(ok) - 1)
        }' "$p")
    if [ -n "$out" ]; then
        echo "$out"
        bad=1
    fi
done

for p in "${files[@]}"; do
    case $p in *.c) ;; *) continue ;; esac
    out=$(awk -v file="$p" '
        function report(ln, what) { printf "%s:%d: %s\n", file, ln, what; found = 1 }
        {
            line[FNR] = $0
        }
        END {
            for (i = 1; i <= FNR; i++) {
                s = line[i]
                if (s !~ /(^|[^_a-zA-Z0-9])(malloc|calloc|realloc|aligned_alloc|strdup|strndup)[ \t]*\(/)
                    continue
                if (s ~ /oom: caller checks/)
                    continue
                t = s
                sub(/^[ \t]+/, "", t)
                if (t ~ /^(\/\/|\/\*|\*( |\/|$))/)
                    continue      # a comment
                # the variable assigned: "lhs = [cond ?] [cast] alloc("
                m = match(s, /[*]?[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*|->[A-Za-z_][A-Za-z0-9_]*|\[[^]=]*\])*[ \t]*=[ \t]*([^;?]*\?[ \t]*)?(\([^()]*\)[ \t]*)?(malloc|calloc|realloc|aligned_alloc|strdup|strndup)[ \t]*\(/)
                if (!m) {
                    report(i, "allocation whose result is not stored and tested (" t ")")
                    continue
                }
                a = substr(s, RSTART, RLENGTH)
                lhs = a
                sub(/[ \t]*=.*/, "", lhs)
                bare = lhs
                sub(/^[*]/, "", bare)     # "int *p = ...": p is tested
                if (a ~ /realloc[ \t]*\($/) {
                    rest = substr(s, RSTART + RLENGTH)
                    arg = rest
                    sub(/[ \t]*,.*/, "", arg)
                    sub(/^[*]/, "", arg)
                    if (arg == bare) {
                        report(i, "\"" lhs " = realloc(" lhs ", ...)\" loses " lhs " when it fails")
                        continue
                    }
                }
                # a NULL test of it on this line or the next 16
                q = bare
                gsub(/[][.*+?()^$|\\]/, "\\\\&", q)
                q = "[*]?" q
                pat = "(!" q "[^A-Za-z0-9_.\\[-]|!" q "$|" q "[ \t]*==[ \t]*NULL|if[ \t]*\\([ \t]*" q "[ \t]*\\)|[(&|;][ \t]*" q "[ \t]*(&&|\\?))"
                ok = 0
                for (j = i; j <= i + 16 && j <= FNR; j++) {
                    u = line[j]
                    if (j == i)
                        u = substr(u, RSTART + RLENGTH)
                    if (u ~ pat) { ok = 1; break }
                }
                if (!ok)
                    report(i, "unchecked allocation of " bare " (test it for NULL and fail with PT_ENOMEM)")
            }
        }' "$p")
    if [ -n "$out" ]; then
        echo "$out"
        bad=1
    fi
done

exit $bad
