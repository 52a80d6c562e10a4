#!/usr/bin/env bash
# The main job on the embedded default, the testbed model (models/testbed/README.md): a short
# generation, then the paper's central measurement — perplexity on held-out text by token position
# for full attention and sliding windows with and without sink tokens, with each mixer's memory —
# as a Markdown table and an SVG plot (out/compare/compare.svg).
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/testbed
echo "== bifocal generate on $model =="
build/bifocal generate --model "$model" --prompt "The Python interpreter" \
  --max-tokens 64 --temperature 0.7 --top-k 40 --top-p 0.95 --seed 1
echo
echo "== bifocal compare on $model (held-out Python documentation, one 4,096-token window) =="
build/bifocal compare --model "$model" --text tests/testbed/heldout_python_docs.txt --max-windows 1 \
  --mixer full --mixer swa:window=64,sinks=0 --mixer swa:window=64,sinks=4 --mixer swa:window=256,sinks=4 \
  --attention-stats --out out/compare
echo "(table, JSON and SVG plot written to out/compare/)"
