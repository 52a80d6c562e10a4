#!/usr/bin/env bash
# One step of a device call, shared by main_on_device.sh and trial_on_device.sh: a bundle's GPU tests
# under a gtest filter and a time limit. gtest's whole output and its exit status go to OUT_FILE (a
# file, not a pipe: a timeout would take a pipe's tail with it); its summary and failure lines are
# printed. Usage (on the GPU machine):
#   bash tools/cuda/gpu_tests.sh BUNDLE FILTER LIMIT_S OUT_FILE
set -uo pipefail  # no -e: failing tests are a result to print, not a reason to stop
cd "$(dirname "$0")/../.."
usage="usage: tools/cuda/gpu_tests.sh BUNDLE FILTER LIMIT_S OUT_FILE"
bundle=${1:?$usage}
filter=${2:?$usage}
limit=${3:?$usage}
out_file=${4:?$usage}
BUNDLE=$bundle FILTER=$filter LIMIT=$limit OUT_FILE=$out_file bash tools/cuda/run_on_device.sh \
  'timeout "$LIMIT" "$BUILD/bifocal_cuda_tests" --gtest_filter="$FILTER" > "$OUT_FILE" 2>&1
   echo "exit status $?" >> "$OUT_FILE"'
grep -E '^\[  (FAILED|PASSED) |^\[==========\]|exit status|Failure' "$out_file" | head -40
