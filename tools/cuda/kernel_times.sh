#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set): where a decode step's time
# goes, kernel by kernel, measured by Nsight Compute (ncu; no hardware counters needed, only each
# kernel's duration) on `bifocal bench` with a synthetic context and no prefill — or, given
# PREFILL tokens, where a prefill's time goes (bench prefills them after a warm-up prefill of up
# to 4,096; the table is per 1,000 prompt tokens of both).
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_times.sh MIXER [SHAPE=qwen3-4b] [OUT=/tmp/kernel_times] [PREFILL]'
# Writes OUT/ncu.csv (raw), OUT/ncu.log and OUT/kernel_times.md (kernel_times.py's table).
set -euo pipefail
mixer=${1:?mixer spec}; shape=${2:-qwen3-4b}; out=${3:-/tmp/kernel_times}; prefill=${4:-0}
mkdir -p "$out"
if [ "$prefill" -gt 0 ]; then
  run=(--context "$prefill" --max-prefill "$prefill")
  summary=(--prefill-tokens $((prefill + (prefill < 4096 ? prefill : 4096))))
else
  run=(--context 1k --max-prefill 0)
  summary=()
fi
# --clock-control none: leave the clocks as the bench runs them (the device README asks for it);
# node-level graph profiling: the decode step is a CUDA graph replay.
ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --page raw \
    "$BUILD/bifocal" bench --shape "$shape" --mixer "$mixer" "${run[@]}" --gen 2 --repeat 1 \
    > "$out/ncu.csv" 2> "$out/ncu.log"
python3 "$(dirname "$0")/kernel_times.py" "${summary[@]}" "$out/ncu.csv" | tee "$out/kernel_times.md"
