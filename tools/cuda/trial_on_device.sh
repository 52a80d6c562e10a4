#!/usr/bin/env bash
# One device call for a patch's trial (bundles from tools/cuda/pack_trial.sh; `carry: [".gpu"]`):
# the trial's GPU tests, an A/B of main against it (ab_bench.sh, rounds alternated until a time),
# then the trial's 1K prefill layer timeline. What comes back under $OUT: gpu.txt, tests.txt,
# ab/ab.md (rewritten after every round, so a call cut short keeps its rounds), ab_rounds.tar.gz
# (each round's bench files), ab_progress.txt and timeline.md. Usage (on the GPU machine):
#   bash tools/cuda/trial_on_device.sh NAME [NAME ...]
# Several names: one A/B of main and every trial, each a build of its own; the tests and the
# timeline take the last name's bundle. Name cumulative trials in order (a patch, then that patch
# with one more change), so that the last holds every change and the A/B tells each step's share.
# Settings (environment):
#   GPU_DIR    the bundles' folder, as pack_trial.sh was given it (default .gpu);
#   AB_UNTIL   seconds after the call's start at which no A/B round starts (default 420);
#   TESTS      the gtest filter, or 0 for none (default: the prefill, mLSTM and model suites);
#   SHAPES, CONTEXTS   the A/B's (default "qwen3-4b qwen3.5-4b-like", 512,1k,2k,4k);
#   TIMELINE   "MIXER SHAPE" of the trial's 1K prefill timeline, or 0 for none
#              (default "bifocal:window=448,state=kv qwen3-4b").
set -uo pipefail  # no -e: a failing step must not hide the steps after it
cd "$(dirname "$0")/../.."
usage="usage: tools/cuda/trial_on_device.sh NAME [NAME ...] (bundles GPU_DIR/NAME.tar.xz beside GPU_DIR/main.tar.xz)"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
names=("$@")
source tools/cuda/trial_name.sh
for trial in "${names[@]}"; do refuse_bad_trial_name trial_on_device "$trial"; done
name=${names[-1]}  # the tests' and the timeline's
gpu_dir=${GPU_DIR:-.gpu}
out=${OUT:-/tmp/trial}
mkdir -p "$out"
# The shared libraries too (pack_for_device.sh): without them every step fails, after using the
# call's device time (stop 77's third call, 150 s).
bundles=("$gpu_dir/main.tar.xz")
for trial in "${names[@]}"; do bundles+=("$gpu_dir/$trial.tar.xz"); done
bundles+=("$gpu_dir/libs.tar.xz")
for bundle in "${bundles[@]}"; do
  [ -f "$bundle" ] || { echo "trial_on_device: $bundle is missing (tools/cuda/pack_trial.sh makes it)" >&2; exit 2; }
done
began=$(date +%s)
elapsed() { echo $(( $(date +%s) - began )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"

prefill_suites='*BifocalPrefillMix*:*CudaPrefillAttention*:*MlstmKernels*:*MlstmPrefill*:*TensorCorePrefill*'
filter=${TESTS:-"$prefill_suites:*CudaModel*"}
if [ "$filter" != 0 ]; then
  bash tools/cuda/gpu_tests.sh "$gpu_dir/$name.tar.xz" "$filter" 300 "$out/tests.txt"
  echo "trial_on_device: tests ended at $(elapsed) s"
fi

until_s=$(( ${AB_UNTIL:-420} - $(elapsed) ))
if [ "$until_s" -gt 0 ]; then
  builds=("main=$gpu_dir/main.tar.xz")
  for trial in "${names[@]}"; do builds+=("$trial=$gpu_dir/$trial.tar.xz"); done
  OUT="$out" ROUNDS=100 ROUNDS_UNTIL_S="$until_s" CONTEXTS="${CONTEXTS:-512,1k,2k,4k}" \
    SHAPES="${SHAPES:-qwen3-4b qwen3.5-4b-like}" \
    bash tools/cuda/ab_bench.sh "${builds[@]}" 2> "$out/ab_progress.txt"
  tail -2 "$out/ab_progress.txt"
  # the device tool returns only a few files a call: the rounds' ~350 travel as one archive
  (cd "$out/ab" && ls -d */ > /dev/null 2>&1 && tar -czf ../ab_rounds.tar.gz */ && rm -rf -- */)
  echo "trial_on_device: A/B ended at $(elapsed) s"
fi

timeline=${TIMELINE:-bifocal:window=448,state=kv qwen3-4b}
if [ "$timeline" != 0 ]; then
  read -r mixer shape <<< "$timeline"
  BUNDLE="$gpu_dir/$name.tar.xz" timeout 120 bash tools/cuda/run_on_device.sh \
    "bash tools/cuda/kernel_timeline.sh '$mixer' '$shape' /tmp/trial-timeline 1k prefill > /dev/null 2>&1"
  cp /tmp/trial-timeline/timeline.md "$out/timeline.md" 2>/dev/null && sed -n '/Each kernel/,$p' "$out/timeline.md"
fi
echo "trial_on_device: the call took $(elapsed) s"
