#!/usr/bin/env bash
# The issue's tables (docs/performance.md's commands, 3 repeats each) and their targets' check, in
# one command on the GPU machine. Until stop 76 each stop rewrote this list into an uncommitted
# .gpu/callNN/tables.sh. Usage (inside run_on_device.sh, so that $BUILD is the bundle's):
#   bash tools/cuda/run_on_device.sh 'bash tools/cuda/issue_tables.sh $BUILD/bifocal $OUT/tables'
# Writes OUT/NAME.{json,md,svg} for each table below, OUT/progress.txt (each bench's progress
# lines) and OUT/targets.md (tools/bench/issue_targets.py over the four decode tables). A table
# that fails is named and skipped; the exit status says whether any failed.
set -uo pipefail  # no -e: one failing table must not hide the ones after it
cd "$(dirname "$0")/../.."
bifocal=${1:?usage: tools/cuda/issue_tables.sh BIFOCAL_BINARY OUT_DIR}
out=${2:?usage: tools/cuda/issue_tables.sh BIFOCAL_BINARY OUT_DIR}
[ -x "$bifocal" ] || { echo "issue_tables: $bifocal is not an executable bifocal" >&2; exit 2; }
mkdir -p "$out"

qwen3_mixers=(--mixer swa:window=576,sink=learned --mixer bifocal:window=448,state=kv)
qwen35_mixers=(--mixer swa:window=576,sink=learned --mixer bifocal:window=320,state=kv)
decode_contexts=(--context 1k,32k,128k,256k --gen 64 --repeat 3)
prefill_contexts=(--context 1k,2k,4k,8k,16k,32k --gen 8 --repeat 3)

failed=()
table() {  # NAME, then bifocal bench's arguments
  local name=$1; shift
  local began; began=$(date +%s)
  if "$bifocal" bench "$@" --out "$out/$name.run" 2>>"$out/progress.txt"; then
    for ext in json md svg; do
      [ -f "$out/$name.run/bench.$ext" ] && mv "$out/$name.run/bench.$ext" "$out/$name.$ext"
    done
    rm -rf "$out/$name.run"
    echo "issue_tables: $name in $(( $(date +%s) - began )) s"
  else
    echo "issue_tables: $name FAILED (its progress lines: $out/progress.txt)" >&2
    failed+=("$name")
  fi
}

table qwen3-4b --shape qwen3-4b "${qwen3_mixers[@]}" "${decode_contexts[@]}"
table qwen3.5 --shape qwen3.5-4b-like "${qwen35_mixers[@]}" "${decode_contexts[@]}"
table qwen3-4b-full --shape qwen3-4b --mixer full --context 1k,128k --max-prefill 1024 --gen 64 --repeat 3
table paper-fig2 --shape paper-fig2 --dtype fp16 --mixer swa:window=64,sinks=4 --mixer swa:window=512,sinks=4 \
  --mixer full --mixer linear:feature=hedgehog --mixer lolcats:window=64 --mixer bifocal:window=448,state=kv \
  --mixer mlstm:state=kv --context 1k,32k,256k --max-prefill 0 --gen 64 --repeat 3
table qwen3-4b-prefill --shape qwen3-4b "${qwen3_mixers[@]}" "${prefill_contexts[@]}"
table qwen3.5-prefill --shape qwen3.5-4b-like "${qwen35_mixers[@]}" "${prefill_contexts[@]}"

decode_tables=()
for name in qwen3-4b qwen3.5 qwen3-4b-full paper-fig2; do
  [ -f "$out/$name.json" ] && decode_tables+=("$out/$name.json")
done
if [ ${#decode_tables[@]} -gt 0 ]; then
  python3 tools/bench/issue_targets.py "${decode_tables[@]}" > "$out/targets.md" \
    || echo "issue_tables: issue_targets.py failed on ${decode_tables[*]}" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "issue_tables: failed: ${failed[*]}" >&2
  exit 1
fi
