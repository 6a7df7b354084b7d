#!/usr/bin/env bash
# Builds and runs the test suite. PTXTUNE_REQUIRE_TOOLKIT=1 turns a missing
# CUDA toolkit from a skip into a failure (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
meson test -C build --print-errorlogs "$@"
