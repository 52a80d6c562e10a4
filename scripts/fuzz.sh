#!/usr/bin/env bash
# Fuzzes the inputs users hand the engine (tests/fuzz/: safetensors files, config.json, mixer
# specs, tokenizer.json, text to encode, eval's task and results files, the flags it parses itself)
# with libFuzzer, AddressSanitizer and UBSan.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   each target runs SECONDS (default 60); all by default
# Builds with clang into build-fuzz/ (needs Debian's `clang`), seeds each target from the shipped
# fixtures, and keeps what it learns in build-fuzz/corpus/TARGET. A finding stops its target and
# leaves the input in build-fuzz/findings/; rerun it with build-fuzz/TARGET FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_safetensors fuzz_model_config fuzz_mixer_spec fuzz_tokenizer_json fuzz_tokenizer_text
                               fuzz_eval_files fuzz_cli_values)
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBIFOCAL_TESTS=OFF \
  -DBIFOCAL_FUZZ=ON -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

# Seeds: the shipped fixtures, copied so that libFuzzer's additions never land in the repository.
seed() {  # seed TARGET FILE...
  mkdir -p "build-fuzz/corpus/$1"
  local name=$1; shift
  for file in "$@"; do cp -n "$file" "build-fuzz/corpus/$name/seed-$(basename "$(dirname "$file")")-$(basename "$file")"; done
}
seed fuzz_safetensors tests/golden/models/llama_fp32_sharded/model-0000{3,9}-of-00023.safetensors
seed fuzz_model_config tests/golden/models/*/config.json models/testbed/config.json
seed fuzz_tokenizer_json tests/golden/tokenizers/*/tokenizer.json
mkdir -p build-fuzz/corpus/fuzz_mixer_spec build-fuzz/corpus/fuzz_tokenizer_text
i=0
for spec in full swa:window=64,sinks=4 swa:window=576,sink=learned swa:window=64,sinks=0,positions=rolling \
  linear:feature=hedgehog lolcats:window=64 mlstm:state=q bifocal:window=448,state=kv,sink=tokens:4; do
  printf '%s' "$spec" >"build-fuzz/corpus/fuzz_mixer_spec/seed-$((i++))"
done
i=0
for text in "Hello world" "  leading spaces and\ttabs\n" "héllo wörld ñ 日本語 😀" "<|endoftext|>x" "a1234567 b"; do
  for pick in 0 1 2 3 4 5; do printf "\\x0$pick%s" "$text" >"build-fuzz/corpus/fuzz_tokenizer_text/seed-$((i++))"; done
done

# The eval readers and the flag parsers take a first byte that picks the reader (the targets' order).
picked() {  # picked TARGET PICK NAME: standard input, after the byte PICK, as a seed
  { printf "\\x0$2"; cat; } >"build-fuzz/corpus/$1/seed-$3"
}
mkdir -p build-fuzz/corpus/fuzz_eval_files build-fuzz/corpus/fuzz_cli_values
picked fuzz_eval_files 0 gsm8k <tests/eval/gsm8k/test.jsonl
picked fuzz_eval_files 1 aime <tests/eval/math_competitions/aime_2024.jsonl
picked fuzz_eval_files 2 hmmt <tests/eval/math_competitions/hmmt_feb_2025.jsonl
picked fuzz_eval_files 3 mmlu <tests/eval/mmlu/test/abstract_algebra_test.csv
echo '{"context": "The sky is", "choices": ["blue", "green"], "gold": 0}' | picked fuzz_eval_files 4 choice
picked fuzz_eval_files 5 hellaswag <tests/eval/hellaswag/hellaswag_val_full.txt
picked fuzz_eval_files 6 babi <tests/eval/babi/en-10k/qa1_single-supporting-fact_test.txt
echo '{"task": "niah", "mixer": "full", "id": "1", "metrics": {"acc": 1}, "group": "4096", "details": {}}' |
  picked fuzz_eval_files 7 results
printf '1k,8k,32k' | picked fuzz_cli_values 0 contexts
printf 'window_attention#1/4+gemv' | picked fuzz_cli_values 1 ablate
printf '1024,4096,16384' | picked fuzz_cli_values 2 lengths
printf '100' | picked fuzz_cli_values 3 samples

mkdir -p build-fuzz/findings
status=0
for target in "${targets[@]}"; do
  max_len=4096
  case $target in fuzz_safetensors) max_len=40000 ;; fuzz_tokenizer_json) max_len=50000 ;; esac
  echo "== $target: ${seconds}s"
  if ! "build-fuzz/$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix=build-fuzz/findings/"$target"- "build-fuzz/corpus/$target" 2>"build-fuzz/$target.log"; then
    status=1
    echo "$target: FINDING (build-fuzz/$target.log, input in build-fuzz/findings/)"
    grep -m3 -E "ERROR|runtime error|deadly signal|uncaught|Abort" "build-fuzz/$target.log" || true
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "build-fuzz/$target.log" | tr '\n' ' '; echo
  fi
done
exit $status
