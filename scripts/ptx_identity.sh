#!/usr/bin/env bash
# PTX byte-identity of two trees: builds scripts/ptx_identity.c against each
# tree's libptxtune.a (TREE/BUILD, built here if missing or stale), writes the
# corpus of scripts/ptx_identity_problems.txt (default + N seeded configs of
# every problem on sm_80/86/89/90/90a) for each, and compares with diff -r.
#   scripts/ptx_identity.sh BASE_TREE NEW_TREE [N=30] [BUILD=build]
# Exit 0: identical (the corpus removed); 1: a difference (diff -r's summary
# printed, the corpus kept under the /tmp folder named).
# The corpus is also written by NEW_TREE with every module from one
# ptx_sigcache (new-cached), which must equal base too.
set -eu
base=$1 new=$2 n=${3:-30} bd=${4:-build}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/ptx_identity.XXXXXX)
# new-cached: NEW_TREE's modules all from one ptx_sigcache (emit_bench --cache);
# CACHED=0 leaves it out (a tree without the cache)
sides="base new"
[ "${CACHED:-1}" = 0 ] || sides="base new new-cached"
for side in $sides; do
    tree=$base cflags=
    [ "$side" = base ] || tree=$new
    [ "$side" = new-cached ] && cflags=-DCACHED
    [ -f "$tree/$bd/build.ninja" ] || meson setup "$tree/$bd" "$tree" >/dev/null
    nice ninja -C "$tree/$bd" -j2 libptxtune.a >/dev/null
    gcc $cflags -O2 -std=c17 -D_GNU_SOURCE -I"$tree" -I"$tree/include" "$here/ptx_identity.c" "$tree/$bd/libptxtune.a" \
        -lpcre2-8 -lsqlite3 -ljansson -lm -ldl -lpthread -o "$out/$side.bin"
    mkdir -p "$out/$side"
    echo "$side ($tree): $("$out/$side.bin" "$here/ptx_identity_problems.txt" "$out/$side" "$n" sm_80 sm_86 sm_89 sm_90 sm_90a)"
done
echo "files: $(ls "$out/base" | wc -l), bytes: $(cat "$out/base"/* | wc -c), errors: $(cat "$out/base"/* | grep -c '^//// error' || true)"
rc=0
for side in $sides; do
    [ "$side" = base ] && continue
    if diff -rq "$out/base" "$out/$side"; then
        echo "$side: identical to base"
    else
        echo "$side: DIFFERENT from base ($out)"
        rc=1
    fi
done
# identical: the corpus goes (a difference keeps it for inspection)
[ $rc = 0 ] && rm -rf "$out"
exit $rc
