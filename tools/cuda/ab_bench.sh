#!/usr/bin/env bash
# A/B of two or more builds in one device call: `bifocal bench` of each build in turn, round after
# round, so that the machine's drift (clocks under the power cap, a neighbour) falls on every build
# alike; then ab_summary.py's table (each build's rounds, medians, change against the first build,
# spread over the rounds, and Bifocal's share of swa). Run on the GPU machine (device tool,
# `carry: [".gpu"]`), with bundles from tools/cuda/pack_for_device.sh, e.g. main's build and an
# experiment's:
#   bash tools/cuda/pack_for_device.sh /work/build-main .gpu/main.tar.xz
#   bash tools/cuda/pack_for_device.sh /work/build-cuda .gpu/gates.tar.xz
#   bash tools/cuda/ab_bench.sh main=.gpu/main.tar.xz gates=.gpu/gates.tar.xz
# Settings (environment): ROUNDS (2), CONTEXTS (1k,2k,4k,16k), SHAPES (qwen3-4b qwen3.5-4b-like),
# METRIC (prefill; or decode), BENCH_ARGS (--gen 8 --repeat 3), OUT (a folder for the runs and
# ab.md; the device tool's $OUT when set). Each shape runs swa:window=576,sink=learned and the
# issue's Bifocal for it (window 448 for qwen3-4b, 320 for qwen3.5-4b-like; MIXERS replaces both).
# A device call ends at its time limit with whatever it wrote: ab.md is rewritten after every round,
# and with ROUNDS_UNTIL_S no round starts once that many seconds have passed (set it to the call's
# limit less a round's time, and ROUNDS high: the call then runs as many rounds as fit).
# AB_ENV_<NAME> (e.g. AB_ENV_probe='BIFOCAL_PROBE_PARALLEL=skip_classify') sets variables for that
# build's runs only, so that one bundle can run as two builds (NAME=BUNDLE twice, other names).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 1 ]; then
  echo "usage: tools/cuda/ab_bench.sh NAME=BUNDLE [NAME=BUNDLE ...]" >&2
  exit 2
fi
rounds=${ROUNDS:-2}
contexts=${CONTEXTS:-1k,2k,4k,16k}
shapes=${SHAPES:-qwen3-4b qwen3.5-4b-like}
bench_args=${BENCH_ARGS:---gen 8 --repeat 3}
out=${OUT:-/tmp/ab_bench}/ab
# A fresh folder each call: a machine kept warm between calls still holds the last call's runs,
# and the summary reads every run in the folder (stop 68's second call listed the first's builds,
# and its rounds would have mixed with them where a build ran in both).
rm -rf "$out"
mkdir -p "$out"
names=()
for pair in "$@"; do
  name=${pair%%=*} bundle=${pair#*=}
  if [ "$name" = "$pair" ] || [ -z "$name" ] || [[ "$name" == *.* ]] || [ ! -f "$bundle" ]; then
    echo "ab_bench: '$pair' is not NAME=BUNDLE with a NAME free of dots and an existing bundle file" >&2
    exit 2
  fi
  names+=("$name")
done
printf '%s\n' "${names[@]}" > "$out/builds.txt"

mixers_for() {
  if [ -n "${MIXERS:-}" ]; then echo "$MIXERS"; return; fi
  case $1 in
    qwen3.5-4b-like) echo "--mixer swa:window=576,sink=learned --mixer bifocal:window=320,state=kv" ;;
    *) echo "--mixer swa:window=576,sink=learned --mixer bifocal:window=448,state=kv" ;;
  esac
}

began=$(date +%s)
for round in $(seq 1 "$rounds"); do
  if [ -n "${ROUNDS_UNTIL_S:-}" ] && [ $(($(date +%s) - began)) -ge "$ROUNDS_UNTIL_S" ]; then
    echo "ab_bench: ${ROUNDS_UNTIL_S} s passed: no round $round" >&2
    break
  fi
  for pair in "$@"; do
    name=${pair%%=*} bundle=${pair#*=}
    for shape in $shapes; do
      run="$out/$name.${shape//./_}.$round"
      mkdir -p "$run"
      start=$(date +%s)
      build_env="AB_ENV_$name"
      env ${!build_env:-} BUNDLE="$bundle" bash tools/cuda/run_on_device.sh \
        "\$BUILD/bifocal bench --shape $shape $(mixers_for "$shape") --context $contexts $bench_args --out $run" \
        > "$run/log.txt" 2>&1 || echo "ab_bench: $name $shape round $round failed (see $run/log.txt)" >&2
      echo "round $round/$rounds: $name $shape ($(($(date +%s) - start)) s)" >&2
    done
  done
  # the rounds so far, in case the call ends before the next (an error here shows in the last one)
  python3 tools/cuda/ab_summary.py "$out" --metric "${METRIC:-prefill}" > "$out/ab.md" 2>&1 || true
done
python3 tools/cuda/ab_summary.py "$out" --metric "${METRIC:-prefill}" | tee "$out/ab.md"
