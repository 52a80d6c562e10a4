#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set): where a decode step's time
# goes, kernel by kernel, measured by Nsight Compute (ncu; no hardware counters needed, only each
# kernel's duration) on `bifocal bench` with a synthetic context and no prefill.
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_times.sh MIXER [SHAPE=qwen3-4b] [OUT=/tmp/kernel_times]'
# Writes OUT/ncu.csv (raw), OUT/ncu.log and OUT/kernel_times.md (kernel_times.py's table).
set -euo pipefail
mixer=${1:?mixer spec}; shape=${2:-qwen3-4b}; out=${3:-/tmp/kernel_times}
mkdir -p "$out"
# --clock-control none: leave the clocks as the bench runs them (the device README asks for it);
# node-level graph profiling: the decode step is a CUDA graph replay.
ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --page raw \
    "$BUILD/bifocal" bench --shape "$shape" --mixer "$mixer" --context 1k --max-prefill 0 --gen 2 --repeat 1 \
    > "$out/ncu.csv" 2> "$out/ncu.log"
python3 "$(dirname "$0")/kernel_times.py" "$out/ncu.csv" | tee "$out/kernel_times.md"
