#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set, with libbifocal_timeline.so
# beside the binaries): the decode step's time kernel by kernel as the GPU ran it — every kernel's
# start and end from CUPTI (kernel_timeline.cpp, injected into `bifocal bench`), PDL's overlap kept.
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_timeline.sh MIXER [SHAPE=qwen3-4b] [OUT=/tmp/kernel_timeline] [CONTEXT=1k] [prefill]'
# With a fifth argument `prefill`, a prefill of CONTEXT tokens instead: its last pass's layers
# (prefill_timeline.py: the median layer, the middle layer kernel by kernel, then each kernel's
# medians over the layers), e.g.
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_timeline.sh bifocal:window=448,state=kv qwen3-4b /tmp/p 1k prefill'
# DTYPE (environment) passes `--dtype DTYPE` to the bench: paper-fig2's tables are fp16
# (DTYPE=fp16), the bench's default is bf16.
# Writes OUT/timeline.csv (one row a kernel), OUT/bench.log (the traced run's report: compare its
# tok/s with an untraced run's) and OUT/timeline.md (the table).
set -euo pipefail
mixer=${1:?mixer spec}; shape=${2:-qwen3-4b}; out=${3:-/tmp/kernel_timeline}; context=${4:-1k}; view=${5:-decode}
dtype=(); [ -n "${DTYPE:-}" ] && dtype=(--dtype "$DTYPE")
case "$view" in
  decode)  session=(--max-prefill 0 --gen 16); report=kernel_timeline.py; result="decode [0-9.]+ tok/s" ;;
  # --repeat 1: the warm-up prefill, then one timed prefill, whose last pass is reported
  prefill) session=(--gen 2); report=prefill_timeline.py; result="prefill [0-9]+ tok/s" ;;
  *) echo "kernel_timeline.sh: the fifth argument is 'prefill' or nothing (decode), not '$view'" >&2; exit 1 ;;
esac
mkdir -p "$out"
library="$BUILD/libbifocal_timeline.so"
[ -e "$library" ] || { echo "kernel_timeline.sh: $library is missing (a CUDA build with CUPTI builds it)" >&2; exit 1; }
# CUPTI: the bundle's copy (pack_for_device.sh) when the machine's CUDA has none on the path.
export LD_LIBRARY_PATH="$BUILD:${LD_LIBRARY_PATH:-}"
CUDA_INJECTION64_PATH="$library" BIFOCAL_TIMELINE_OUT="$out/timeline.csv" \
  "$BUILD/bifocal" bench --shape "$shape" --mixer "$mixer" --context "$context" "${dtype[@]}" "${session[@]}" --repeat 1 \
  > "$out/bench.log" 2>&1 || { tail -5 "$out/bench.log"; exit 1; }
# the tracer's count and bench's result line (its table's header also says "decode": not that)
grep -E "^kernel_timeline:|$result" "$out/bench.log" || true
python3 "$(dirname "$0")/$report" "$out/timeline.csv" | tee "$out/timeline.md"
