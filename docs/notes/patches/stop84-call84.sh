#!/usr/bin/env bash
# Stop 84: (1) the state pass's phase stamps at 1K (statepass3 + stamps, -DBIFOCAL_MLSTM_STATE_PASS_PHASES=1),
# raw lines to $OUT (parsed here with the patch's phase_stamps.py --kernel pass); (2) the d = 256-only
# warpgroup products: tests and an A/B against main; (3) on an H200 only, the tables at main.
set -uo pipefail
out=${OUT:-/tmp/out84}; mkdir -p "$out"
began=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
for spec in "qwen3.5-4b-like bifocal:window=320,state=kv" "qwen3-4b bifocal:window=448,state=kv"; do
  set -- $spec
  BUNDLE=.gpu/phases.tar.xz OUT=$out bash tools/cuda/run_on_device.sh \
    "\$BUILD/bifocal bench --shape $1 --mixer $2 --context 1k --gen 8 --repeat 3 --out /tmp/ph-$1 > $out/phases-$1.log 2>&1"
  grep -c state-pass-phases "$out/phases-$1.log"
done
echo "phases ended at $(( $(date +%s) - began )) s"
TESTS='*WarpgroupStateProducts*:*BifocalPrefillMix*:*CudaModel*Bifocal*' AB_UNTIL=${AB_UNTIL:-230} CONTEXTS=1k,2k \
  TIMELINE=0 OUT=$out GPU_DIR=.gpu bash tools/cuda/trial_on_device.sh wgmma256 > "$out/trial.log" 2>&1
grep -A3 "PASSED\|FAILED" "$out/tests.txt" | head -8
grep -B2 -A6 "as a share" "$out/ab/ab.md"
echo "trial ended at $(( $(date +%s) - began )) s"
