#!/usr/bin/env bash
# The main job on the embedded default. Until the pretrained testbed model lands (issue 4) this
# is generation on the tiny random Qwen3 fixture: the text is noise, the pipeline is real.
set -euo pipefail
cd "$(dirname "$0")/.."
model=tests/golden/models/qwen3_bf16
echo "== bifocal generate on $model (random weights: expect gibberish) =="
build/bifocal generate --model "$model" --prompt "The engine loads a checkpoint and" \
  --max-tokens 48 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
