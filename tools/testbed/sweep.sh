#!/usr/bin/env bash
# On the GPU machine: train several testbed variants at once on the one GPU, to compare how fast the
# first-token attention mass grows under each recipe (each run gets a share of the GPU). The
# procedural documents are generated once (by the first run) and shared through a cache file.
#   bash tools/testbed/sweep.sh OUT_DIR SECONDS NAME "train.py flags" [NAME "flags"]...
# Writes OUT_DIR/NAME.log (progress, one JSON line per 50 steps) and OUT_DIR/NAME/ (the saved model and
# training_log.json) per variant.
set -euo pipefail
out=${1:?output directory}; seconds=${2:?seconds per run}; shift 2
mkdir -p "$out"
cache="$out/procedural.jsonl"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
pids=()
while [ $# -ge 2 ]; do
    name=$1; flags=$2; shift 2
    # shellcheck disable=SC2086  # the flags are meant to split into words
    python3 "$here/train.py" --corpus corpus --out "$out/$name" --total-seconds "$seconds" \
        --procedural-cache "$cache" $flags > "$out/$name.log" 2>&1 &
    pids+=($!)
    # The first run generates the cache; the others wait for it rather than generate it again.
    while [ ${#pids[@]} -eq 1 ] && [ ! -f "$cache" ] && kill -0 "${pids[0]}" 2>/dev/null; do sleep 2; done
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
rm -f "$cache"
exit $status
