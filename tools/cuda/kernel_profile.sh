#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set): why one kernel takes the time
# it does — Nsight Compute's details (speed of light, the pipes' utilization, launch and occupancy,
# warp stall reasons, memory traffic, the source lines that stall) for a few launches of the kernels
# whose names match KERNEL_REGEX, on `bifocal bench`: decode kernels with a synthetic context and no
# prefill, or, given PREFILL tokens, the kernels of a prefill of that many tokens (passes of 4,096).
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_profile.sh "mlstm_decode" bifocal:window=448,state=kv [SHAPE=qwen3-4b] [OUT=/tmp/kernel_profile] [PREFILL]'
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_profile.sh chunk_outputs_bf16 bifocal:window=320,state=kv qwen3.5-4b-like /tmp/p 4096'
# Each kernel runs alone under ncu (it serialises launches), without what runs beside it in place.
# Needs the hardware counters (a Firecracker machine; on gVisor ncu cannot read them: KINDS.md).
# kernel_times.sh is the counter-free companion: durations of every kernel of a step.
# Writes OUT/details.txt (ncu's report) and OUT/ncu.log.
set -euo pipefail
kernels=${1:?kernel name regex}; mixer=${2:?mixer spec}; shape=${3:-qwen3-4b}; out=${4:-/tmp/kernel_profile}
prefill=${5:-}
mkdir -p "$out"
if [ -n "$prefill" ]; then
  session=(--context "$prefill" --max-prefill "$prefill")   # the prompt prefilled, then 2 steps
else
  session=(--context 1k --max-prefill 0)                    # a synthetic context, decode only
fi
# --launch-skip: past the first layers' launches (their inputs are cold); --clock-control none:
# the clocks as the bench runs them (METHOD.md); node-level graph profiling: the step is a graph.
ncu --clock-control none --graph-profiling node --kernel-name "regex:$kernels" --launch-skip 8 --launch-count 3 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
    --print-details all \
    "$BUILD/bifocal" bench --shape "$shape" --mixer "$mixer" "${session[@]}" --gen 2 --repeat 1 \
    > "$out/details.txt" 2> "$out/ncu.log" || { tail -5 "$out/ncu.log"; exit 1; }
grep -E "Duration|Registers Per Thread|Achieved Occupancy|Memory Throughput|Stall|Warp Cycles Per Issued|Pipe .* Cycles Active" \
    "$out/details.txt" | head -80
