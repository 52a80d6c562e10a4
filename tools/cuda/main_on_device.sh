#!/usr/bin/env bash
# One device call for main's build (a bundle from pack_for_device.sh with CONTENTS "bifocal
# bifocal_cuda_tests"): every GPU test, then the issue's tables (issue_tables.sh). What comes back
# under $OUT: gpu.txt, tests.txt (gtest's whole output and its exit status) and tables.tar.gz (the
# device tool returns only a few files a call, so the tables' ~20 travel as one). Usage (on the GPU
# machine, `carry` naming the bundle's folder), after packing main here:
#   CONTENTS="bifocal bifocal_cuda_tests" bash tools/cuda/pack_for_device.sh /work/build-cuda .gpu/main-tests.tar.xz
#   bash tools/cuda/main_on_device.sh .gpu/main-tests.tar.xz
# Settings (environment): TESTS_LIMIT, the suite's time limit in s (default 480: the whole suite
# took ~270 s on stop 70's H200 and ~300 s on stop 76's H100, but stop 80's H100 ran its CPU
# references 1.3-1.9x slower and reached only 217 of 408 tests in 330 s; 480 s and the tables'
# ~45 s stay inside a call's 600), or 0 for no tests; TESTS, a gtest filter (default: every test);
# TABLES=0 skips the tables.
set -uo pipefail  # no -e: failing tests must not hide the tables
cd "$(dirname "$0")/../.."
bundle=${1:?usage: tools/cuda/main_on_device.sh BUNDLE (from pack_for_device.sh)}
for file in "$bundle" "$(dirname "$bundle")/libs.tar.xz"; do
  [ -f "$file" ] || { echo "main_on_device: $file is missing (tools/cuda/pack_for_device.sh makes it)" >&2; exit 2; }
done
out=${OUT:-/tmp/main-on-device}
mkdir -p "$out"
began=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
limit=${TESTS_LIMIT:-480}
if [ "$limit" != 0 ]; then
  bash tools/cuda/gpu_tests.sh "$bundle" "${TESTS:-*}" "$limit" "$out/tests.txt"
  echo "main_on_device: tests ended at $(( $(date +%s) - began )) s"
fi
if [ "${TABLES:-1}" != 0 ]; then
  BUNDLE=$bundle OUT=$out bash tools/cuda/run_on_device.sh 'bash tools/cuda/issue_tables.sh $BUILD/bifocal $OUT/tables'
  cat "$out/tables/targets.md" 2>/dev/null
  tar -C "$out" -czf "$out/tables.tar.gz" tables && rm -rf "$out/tables"
fi
echo "main_on_device: the call took $(( $(date +%s) - began )) s"
