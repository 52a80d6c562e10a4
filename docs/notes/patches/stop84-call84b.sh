#!/usr/bin/env bash
# Stop 84, call 2: (1) main's (b08b5bc: wgmma at d = 256) model and prefill GPU tests; (2) the state
# pass's phases with the prologue changes (statepass4 + stamps); (3) the statepass4 trial: its
# tests and an A/B against main (8a827cb), no timeline.
set -uo pipefail
out=${OUT:-/tmp/out84b}; mkdir -p "$out"
began=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
BUNDLE=.gpu/main-tests.tar.xz OUT=$out bash tools/cuda/run_on_device.sh \
  "timeout 80 \$BUILD/bifocal_cuda_tests --gtest_filter='CudaModel*:*BifocalPrefillMix*:*WarpgroupStateProducts*:*TensorCorePrefill*:*CudaPrefillAttention*:MlstmPrefill*:BifocalDecode*' > $out/main-tests.txt 2>&1; echo exit \$?"
grep "tests ran\|PASSED\|FAILED" "$out/main-tests.txt" | head -12
echo "main tests ended at $(( $(date +%s) - began )) s"
for spec in "qwen3.5-4b-like bifocal:window=320,state=kv" "qwen3-4b bifocal:window=448,state=kv"; do
  set -- $spec
  BUNDLE=.gpu/phases4.tar.xz OUT=$out bash tools/cuda/run_on_device.sh \
    "\$BUILD/bifocal bench --shape $1 --mixer $2 --context 1k --gen 8 --repeat 3 --out /tmp/ph-$1 > $out/phases-$1.log 2>&1"
  grep -c state-pass-phases "$out/phases-$1.log"
done
echo "phases ended at $(( $(date +%s) - began )) s"
TESTS='*MlstmStatePass*:*MlstmKernels*Bf16*:*BifocalPrefillMix*' AB_UNTIL=${AB_UNTIL:-110} CONTEXTS=1k \
  TIMELINE=0 OUT=$out GPU_DIR=.gpu bash tools/cuda/trial_on_device.sh statepass4 > "$out/trial.log" 2>&1
grep "tests ran\|PASSED\|FAILED" "$out/tests.txt" | head -6
grep -B2 -A6 "as a share" "$out/ab/ab.md"
echo "trial ended at $(( $(date +%s) - began )) s"
