// Picks the next token from logits: greedy, or temperature with top-k and top-p, seeded.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace bifocal {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax)
  int top_k = 40;            // 0: no limit
  float top_p = 0.95f;       // 1: no limit
  std::uint64_t seed = 0;
};

// Why a model's logits hold NaN or +inf, for the errors that stop sampling from them (the CPU
// Sampler's, and the CUDA decode step's when its device sampler finds no finite logit).
inline constexpr const char* kNonFiniteLogitsCause =
    "the model's activations overflowed (under --dtype fp16, past fp16's ±65,504: try --dtype bf16) or its weights "
    "hold NaN or inf";

// Throws bifocal::Error naming the flag (--temperature, --top-k, --top-p) for a value sampling
// cannot use. The CPU Sampler and the CUDA device sampler both check with it.
void check_sampling_params(const SamplingParams& params);

// Validates params (check_sampling_params) and owns the buffers sampling needs,
// so sample() allocates nothing. Order as in HF's logits processors: temperature, top-k, top-p.
class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab_size);
  std::int32_t sample(std::span<const float> logits);
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, std::int32_t>> candidates_;
};

// The first index of the largest logit (torch.argmax's tie rule).
std::int32_t argmax(std::span<const float> logits);

}  // namespace bifocal
