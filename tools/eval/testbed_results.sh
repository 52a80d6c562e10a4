#!/usr/bin/env bash
# The measurements of docs/results.md: the embedded testbed model, full attention (the teacher)
# against swa with windows 64/128/256/512 and 0 or 4 sink tokens, on held-out perplexity,
# S-NIAH 1-3 (and S-NIAH 2 in the teacher's own wording, testbed_needle), BABILong QA1-5 and the
# testbed's long-generation problems.
#   [BACKEND=cuda] tools/eval/testbed_results.sh BIFOCAL_BINARY OUT_DIR [SHARDS=12] [extra bifocal eval flags…]
# Runs SHARDS processes of `bifocal eval --shard i/SHARDS` at once (on the GPU machine: all on the
# one GPU with --backend cuda; the testbed is far too small to fill it alone), then merges their
# results.jsonl into OUT_DIR and reruns the same command there, which resumes every item and only
# writes report.md, report.json and the SVGs. Perplexity by position comes from `bifocal compare`
# on the same mixers (OUT_DIR/compare).
# On the GPU machine (device tool, carry [".gpu"] with the bundle of tools/cuda/pack_for_device.sh
# and the needed data under .gpu/data: pg_essays/ and babi/en-10k/qa1-5 test files), pack the
# results into one file, since the tool returns at most 8 files:
#   BACKEND=cuda bash tools/cuda/run_on_device.sh 'bash tools/eval/testbed_results.sh $BUILD/bifocal \
#     $OUT/results 12 --data-dir $PWD/.gpu/data && tar -C $OUT -czf $OUT/results.tgz results && rm -r $OUT/results'

set -euo pipefail
bifocal=${1:?bifocal binary}; out=${2:?output directory}; shards=${3:-12}; shift $(( $# < 3 ? $# : 3 ))
root=$(cd "$(dirname "$0")/../.." && pwd)
backend=${BACKEND:-cpu}
mixers=(--mixer full)
for window in 64 128 256 512; do
  for sinks in 0 4; do mixers+=(--mixer "swa:window=$window,sinks=$sinks"); done
done
tasks=()
for niah in 1 2 3; do tasks+=(--task "niah_single_$niah:lengths=512,1024,2048,4096,samples=20"); done
tasks+=(--task "testbed_needle:lengths=512,1024,2048,4096,samples=20")  # S-NIAH 2 in the teacher's own wording
for qa in 1 2 3 4 5; do tasks+=(--task "babilong_qa$qa:lengths=0,1024,2048,4096,samples=20"); done
tasks+=(--task testbed_arithmetic:problems=40)
common=(-m "$root/models/testbed" "${mixers[@]}" "${tasks[@]}" --samples 2 --max-tokens 1024
        --length-edges 256 --length-edges 512 --long-threshold 512 --backend "$backend" "$@")
mkdir -p "$out"
"$bifocal" compare -m "$root/models/testbed" --text "$root/tests/testbed/heldout_python_docs.txt" "${mixers[@]}" \
  --backend "$backend" --out "$out/compare" > "$out/compare.log" 2>&1 &
for ((i = 0; i < shards; ++i)); do
  "$bifocal" eval "${common[@]}" --shard "$i/$shards" --out "$out/shard-$i" > "$out/shard-$i.log" 2>&1 &
done
wait
cat "$out"/shard-*/results.jsonl > "$out/results.jsonl"
"$bifocal" eval "${common[@]}" --out "$out" 2>&1 | tail -3
