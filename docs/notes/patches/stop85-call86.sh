#!/usr/bin/env bash
# Prepared in stop 85 for the next stop (either card, ~470 s). On an H200 it first makes the issue's
# tables at main (no H200 table since stop 70's). Stop 86 took them from main.tar.xz, the CLI-only
# build pack_trial.sh makes beside the trial, in place of stop 85's main-tl bundle (a second whole
# CUDA build, ~7 MB more carry): the tables run $BUILD/bifocal alone (issue_tables.sh). On either card it
# then runs statepass5's trial (stop84-state-pass-chains-kernel.patch): its tests, an A/B against
# main at 1K and 2K (main's Bifocal share of swa, the 1K prefill target, on that card too) and its
# Qwen3.5-like 1K timeline. At most 8 files come back: gpu.txt, tables.log, tables.tar.gz,
# trial.log, tests.txt, ab/ab.md, ab_rounds.tar.gz, timeline.md.
set -uo pipefail
out=${OUT:-/tmp/out86}; mkdir -p "$out"
began=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
ab_until=360
if grep -q H200 "$out/gpu.txt"; then
  TESTS_LIMIT=0 OUT=$out bash tools/cuda/main_on_device.sh .gpu/main.tar.xz > "$out/tables.log" 2>&1
  tail -16 "$out/tables.log"
  ab_until=300
  echo "tables ended at $(( $(date +%s) - began )) s"
fi
TESTS='*MlstmStatePass*:*MlstmKernels*Bf16*:*BifocalPrefillMix*:*WarpgroupStateProducts*:CudaModel.Golden*:CudaModel.DecodeEqualsPrefill' \
  AB_UNTIL=${AB_UNTIL:-$ab_until} CONTEXTS=1k,2k TIMELINE='bifocal:window=320,state=kv qwen3.5-4b-like' OUT=$out \
  GPU_DIR=.gpu bash tools/cuda/trial_on_device.sh statepass5 > "$out/trial.log" 2>&1
grep "tests ran\|PASSED\|FAILED" "$out/tests.txt" | head -6
grep -B2 -A7 "as a share" "$out/ab/ab.md"
grep -A8 "Each kernel's median" "$out/timeline.md"
echo "the call ended at $(( $(date +%s) - began )) s"
rm -f "$out/ab_progress.txt" "$out/ab/builds.txt"
