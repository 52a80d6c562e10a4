#!/usr/bin/env bash
# Prepared in stop 84 for the next stop (either card; ~420 s): the state pass with its gates and
# summaries made once a head by pass_chains_kernel (statepass5, stop84-state-pass-chains-kernel.patch):
# (1) its phase stamps at 1K on both shapes (phases5: the same patch built with
# -DBIFOCAL_MLSTM_STATE_PASS_PHASES=1), raw lines to $OUT (read them with the patch's
# `tools/cuda/phase_stamps.py --kernel pass`); (2) its tests, an A/B against main and its
# Qwen3.5-like 1K timeline.
set -uo pipefail
out=${OUT:-/tmp/out85}; mkdir -p "$out"
began=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
for spec in "qwen3.5-4b-like bifocal:window=320,state=kv" "qwen3-4b bifocal:window=448,state=kv"; do
  set -- $spec
  BUNDLE=.gpu/phases5.tar.xz OUT=$out bash tools/cuda/run_on_device.sh \
    "\$BUILD/bifocal bench --shape $1 --mixer $2 --context 1k --gen 8 --repeat 3 --out /tmp/ph-$1 > $out/phases-$1.log 2>&1"
  grep -c state-pass-phases "$out/phases-$1.log"
done
echo "phases ended at $(( $(date +%s) - began )) s"
TESTS='*MlstmStatePass*:*MlstmKernels*Bf16*:*BifocalPrefillMix*:*WarpgroupStateProducts*:CudaModel.Golden*:CudaModel.DecodeEqualsPrefill' \
  AB_UNTIL=${AB_UNTIL:-300} CONTEXTS=1k,2k TIMELINE='bifocal:window=320,state=kv qwen3.5-4b-like' OUT=$out \
  GPU_DIR=.gpu bash tools/cuda/trial_on_device.sh statepass5 > "$out/trial.log" 2>&1
grep "tests ran\|PASSED\|FAILED" "$out/tests.txt" | head -6
grep -B2 -A7 "as a share" "$out/ab/ab.md"
grep -A8 "Each kernel's median" "$out/timeline.md"
echo "trial ended at $(( $(date +%s) - began )) s"
# At most 8 files come back from $OUT (stop 84's calls lost ab/ab.md to that count): the phase logs
# as one archive, and the A/B's progress and build list (its log has both) left out.
tar -C "$out" -czf "$out/phases.tar.gz" phases-qwen3.5-4b-like.log phases-qwen3-4b.log \
  && rm -f "$out"/phases-*.log
rm -f "$out/ab_progress.txt" "$out/ab/builds.txt"
