#!/usr/bin/env bash
# Runs the whole test suite (builds first if needed).
set -euo pipefail
cd "$(dirname "$0")"
[ -x build/bifocal_tests ] || bash scripts/build.sh
cmake --build build -j"$(nproc)" >/dev/null
ctest --test-dir build --output-on-failure -j"$(nproc)"
