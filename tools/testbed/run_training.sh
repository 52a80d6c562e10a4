#!/usr/bin/env bash
# On the GPU machine: train the testbed model and pack it so it comes back through the device
# tool (at most 8 files of 16 MiB): the weight shards as they are, everything else in one tarball.
#   bash tools/testbed/run_training.sh OUT_DIR [train.py flags...]
set -euo pipefail
out=${1:?output directory}; shift
work=$(mktemp -d); mkdir -p "$work/model"
export PYTHONUNBUFFERED=1
python3 "$(dirname "$0")/train.py" --corpus corpus --out "$work/model" "$@" 2>&1 | tee "$work/model/train_stdout.log" || true
cp "$work"/model/*.safetensors "$out"/ 2>/dev/null || true
tar -C "$work/model" --exclude='*.safetensors' -czf "$out/meta.tar.gz" .
ls -la "$out"
