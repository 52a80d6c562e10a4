#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set): compute-sanitizer over the
# CUDA test binary, one gtest filter at a time (the tools slow kernels 10–100×: the whole binary
# would not fit a device call), each under its own time limit, e.g.
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/memcheck.sh memcheck 150 "Gemv*:GateUp*" "*LinearKernels*"'
# (parameterised suites are named Shapes/Suite.Test/case: lead their filters with '*').
# TOOL is memcheck (out-of-bounds and misaligned accesses, leaks), racecheck (shared-memory
# hazards), synccheck (barriers in divergent code) or initcheck (reads of uninitialised device
# memory). Prints one line a filter: clean, the sanitizer's error summary, or "timed out"; the
# full report of a filter with errors goes to ${MEMCHECK_OUT:-/tmp/memcheck}/FILTER.log.
set -uo pipefail
tool=${1:?tool: memcheck, racecheck, synccheck or initcheck}; limit=${2:?seconds a filter}; shift 2
case "$tool" in memcheck|racecheck|synccheck|initcheck) ;; *) echo "memcheck.sh: unknown tool '$tool'" >&2; exit 2 ;; esac
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -x "$sanitizer" ] || { echo "memcheck.sh: compute-sanitizer is not on this machine" >&2; exit 1; }
out=${MEMCHECK_OUT:-/tmp/memcheck}; mkdir -p "$out"
extra=(); [ "$tool" = memcheck ] && extra=(--leak-check full)
status=0
for filter in "$@"; do
  log="$out/$(echo "$tool-$filter" | tr -c 'A-Za-z0-9._\n-' '_').log"
  start=$(date +%s)
  timeout "$limit" "$sanitizer" --tool "$tool" "${extra[@]}" --print-limit 50 --error-exitcode 99 \
    "$BUILD/bifocal_cuda_tests" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?; seconds=$(( $(date +%s) - start ))
  tests=$(grep -Eo '^\[  PASSED  \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' || echo "?")
  summary=$(grep -E '^========= ERROR SUMMARY' "$log" | tail -1 | sed 's/^========= //')
  case $rc in
    0)       echo "$tool $filter: clean, $tests tests passed (${seconds} s) — $summary"; rm -f "$log" ;;
    124|137) echo "$tool $filter: timed out after ${limit} s"; status=1 ;;
    *)       echo "$tool $filter: rc $rc, ${summary:-no error summary} (${seconds} s; report $log)"; status=1
             [ -z "$summary" ] && tail -3 "$log"
             grep -E '^=========  *(Invalid|Program hit|Race|Barrier|Uninitialized|Leaked)|^=========     at ' "$log" | head -12 ;;
  esac
done
exit $status
