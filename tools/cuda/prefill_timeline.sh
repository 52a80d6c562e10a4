#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set, with libbifocal_timeline.so
# beside the binaries): a prefill's layers kernel by kernel as the GPU ran them — every kernel's
# start and end from CUPTI (kernel_timeline.cpp, injected into `bifocal bench`), PDL's overlap kept.
# The decode step's companion is kernel_timeline.sh.
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/prefill_timeline.sh MIXER [SHAPE=qwen3-4b] [OUT=/tmp/prefill_timeline] [TOKENS=1k]'
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/prefill_timeline.sh bifocal:window=448,state=kv qwen3-4b /tmp/p 1k'
# Writes OUT/timeline.csv (one row a kernel), OUT/bench.log (the traced run's report: compare its
# prefill tok/s with an untraced run's) and OUT/prefill.md (prefill_timeline.py's table: the last
# pass, i.e. the last TOKENS-token prefill's last chunk of at most 4,096 tokens).
set -euo pipefail
mixer=${1:?mixer spec}; shape=${2:-qwen3-4b}; out=${3:-/tmp/prefill_timeline}; tokens=${4:-1k}
mkdir -p "$out"
library="$BUILD/libbifocal_timeline.so"
[ -e "$library" ] || { echo "prefill_timeline.sh: $library is missing (a CUDA build with CUPTI builds it)" >&2; exit 1; }
# CUPTI: the bundle's copy (pack_for_device.sh) when the machine's CUDA has none on the path.
export LD_LIBRARY_PATH="$BUILD:${LD_LIBRARY_PATH:-}"
# --repeat 1: the warm-up prefill, then one timed prefill (the last pass is the timed one's).
CUDA_INJECTION64_PATH="$library" BIFOCAL_TIMELINE_OUT="$out/timeline.csv" \
  "$BUILD/bifocal" bench --shape "$shape" --mixer "$mixer" --context "$tokens" --gen 2 --repeat 1 \
  > "$out/bench.log" 2>&1 || { tail -5 "$out/bench.log"; exit 1; }
grep -E "^kernel_timeline:|prefill [0-9]+ tok/s" "$out/bench.log" || true
python3 "$(dirname "$0")/prefill_timeline.py" "$out/timeline.csv" | tee "$out/prefill.md"
