#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages ptxtune needs (apt-get when root,
# otherwise prints the command), then configures and builds into ./build.
# Sourced by scripts/run.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="meson ninja-build gcc pkg-config libsqlite3-dev libpcre2-dev libjansson-dev libcriterion-dev"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "ptxtune needs these packages; run:" >&2
    echo "  sudo apt-get install -y$missing" >&2
    exit 1
  fi
fi
if [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v ptxas >/dev/null 2>&1; then
  echo "note: no CUDA toolkit found (/usr/local/cuda): compile steps are skipped;" \
       "set -Dcuda-root=DIR if it lives elsewhere" >&2
fi
[ -d build ] || meson setup build "$@" >/dev/null
ninja -C build >/dev/null
