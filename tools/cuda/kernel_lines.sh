#!/usr/bin/env bash
# On the GPU machine, under tools/cuda/run_on_device.sh ($BUILD set, from a build configured with
# -DCMAKE_CUDA_FLAGS=-lineinfo): where one kernel's time goes, source line by source line —
# Nsight Compute's warp-stall samples and executed instructions per line of CUDA source, for one
# launch of the kernel whose name matches KERNEL_REGEX in `bifocal bench` with a prefill of
# CONTEXT tokens (prefill kernels; kernel_profile.sh is the decode companion).
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/kernel_lines.sh chunk_outputs bifocal:window=448,state=kv qwen3-4b 4096 /tmp/lines'
# Writes OUT/report.ncu-rep, OUT/lines.csv (ncu's source page: CUDA lines with their SASS) and
# prints the 30 lines with the most stall samples.
set -euo pipefail
kernels=${1:?kernel name regex}; mixer=${2:?mixer spec}; shape=${3:-qwen3-4b}; context=${4:-4096}; out=${5:-/tmp/kernel_lines}
mkdir -p "$out"
# --launch-skip 2: past the first layers' launches (their inputs are cold).
ncu --clock-control none --kernel-name "regex:$kernels" --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source yes -o "$out/report" -f \
    "$BUILD/bifocal" bench --shape "$shape" --mixer "$mixer" --context "$context" --max-prefill "$context" --gen 2 --repeat 1 \
    > "$out/ncu.log" 2>&1 || { tail -5 "$out/ncu.log"; exit 1; }
ncu -i "$out/report.ncu-rep" --page source --csv --print-source cuda,sass > "$out/lines.csv"
python3 "$(dirname "$0")/kernel_lines.py" "$out/lines.csv"
