// The measurement loop of `bifocal bench`: for each mixer, a device model (synthetic weights
// for a shape, or a checkpoint), and for each context a session whose cache is filled as if
// that many tokens had been processed; decode steps timed as CUDA graph replays, a real prefill
// timed where it fits --max-prefill, and device memory read before and after.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_report.h"

namespace bifocal {

struct BenchOptions {
  std::string shape;      // a builtin shape (synthetic weights) …
  std::string model_dir;  // … or a checkpoint directory
  std::vector<std::string> mixers;
  std::vector<std::int64_t> contexts;
  int generated_tokens = 256;
  int repeats = 5;
  std::string dtype = "bf16";
  std::int64_t max_prefill = 32768;  // longest prompt whose prefill is timed (TTFT)
  // Tokens a prefill pass takes (llama-bench's ubatch): the activations and the mixers' prefill
  // workspace are sized for one pass, the same at every context. cuBLAS is near its peak from ~2K rows.
  int prefill_chunk = 4096;
  std::uint64_t seed = 1;
  std::vector<std::string> ablate_kernels;  // --ablate: time the step with these kernels emptied too
};

// `progress` gets one line per finished measurement.
BenchReport run_bench(const BenchOptions& options, const std::function<void(const std::string&)>& progress);

// "1k,8k,32k,128k,256k" → {1024, 8192, …}; plain numbers are tokens. Errors name --context.
std::vector<std::int64_t> parse_contexts(const std::string& text);

}  // namespace bifocal
