#!/usr/bin/env bash
# Stop 85's short form of call85.sh for a call with ~400 s of device time left: statepass5's
# tests (the pass and the model goldens), then an A/B against main at 1K alone; no phases, no timeline.
set -uo pipefail
out=${OUT:-/tmp/out85s}; mkdir -p "$out"
TESTS='*MlstmStatePass*:*WarpgroupStateProducts*:CudaModel.Golden*' \
  AB_UNTIL=${AB_UNTIL:-170} CONTEXTS=1k TIMELINE=0 OUT=$out \
  GPU_DIR=.gpu bash tools/cuda/trial_on_device.sh statepass5 > "$out/trial.log" 2>&1
grep "tests ran\|PASSED\|FAILED" "$out/tests.txt" | head -6
grep -B2 -A7 "as a share" "$out/ab/ab.md"
tail -3 "$out/trial.log"
rm -f "$out/ab_progress.txt" "$out/ab/builds.txt"
