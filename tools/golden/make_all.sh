#!/usr/bin/env bash
# Makes every golden fixture on the GPU machine (needs torch, transformers, tokenizers, safetensors).
# Usage: bash tools/golden/make_all.sh OUT_DIR   -> OUT_DIR/golden.tar.gz (unpack into tests/golden/)
set -euo pipefail
out=${1:?output directory}
work=$(mktemp -d)
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
python3 "$(dirname "$0")/make_tokenizers.py" "$work"
python3 "$(dirname "$0")/make_models.py" "$work"
tar -C "$work" -czf "$out/golden.tar.gz" tokenizers models
du -sh "$work"/*
