#include "bifocal/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "bifocal/error.h"

namespace bifocal {

std::int32_t argmax(std::span<const float> logits) {
  return std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void check_sampling_params(const SamplingParams& params) {
  if (!std::isfinite(params.temperature)) fail("--temperature", "must be a finite number");
  if (params.top_k < 0) fail("--top-k", "must be >= 0, got " + std::to_string(params.top_k));
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) fail("--top-p", "must be in (0, 1], got " + std::to_string(params.top_p));
}

Sampler::Sampler(const SamplingParams& params, int vocab_size) : params_(params), rng_(params.seed) {
  check_sampling_params(params);
  candidates_.resize(vocab_size);
}

namespace {

// NaN and +∞ have no place in the order (−∞ is a masked token): any token drawn from such logits
// would be an arbitrary one, given in silence.
void check_logits(std::span<const float> logits) {
  const auto bad = std::find_if(logits.begin(), logits.end(), [](float x) { return std::isnan(x) || x == INFINITY; });
  if (bad == logits.end()) return;
  fail("sampler", "the logit of token " + std::to_string(bad - logits.begin()) + " is " +
                      (std::isnan(*bad) ? "NaN" : "+inf") + ": " + kNonFiniteLogitsCause);
}

}  // namespace

std::int32_t Sampler::sample(std::span<const float> logits) {
  check_logits(logits);
  if (params_.temperature <= 0.0f) return argmax(logits);
  const std::size_t vocab = logits.size();
  for (std::size_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i] / params_.temperature, std::int32_t(i)};
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };

  // top-k: keep the k largest (sorted, since top-p needs them in order anyway).
  std::size_t kept = params_.top_k > 0 ? std::min<std::size_t>(params_.top_k, vocab) : vocab;
  std::partial_sort(candidates_.begin(), candidates_.begin() + kept, candidates_.begin() + vocab, by_logit);

  // softmax over the kept candidates, in place: first = probability.
  const float max_logit = candidates_[0].first;
  double total = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    candidates_[i].first = std::exp(candidates_[i].first - max_logit);
    total += candidates_[i].first;
  }
  // top-p: the smallest prefix whose probability reaches p (always at least one token).
  double cumulative = 0;
  std::size_t nucleus = kept;
  for (std::size_t i = 0; i < kept; ++i) {
    cumulative += candidates_[i].first / total;
    if (cumulative >= params_.top_p) {
      nucleus = i + 1;
      break;
    }
  }
  double nucleus_total = 0;
  for (std::size_t i = 0; i < nucleus; ++i) nucleus_total += candidates_[i].first;
  const double draw = std::uniform_real_distribution<double>(0.0, nucleus_total)(rng_);
  double running = 0;
  for (std::size_t i = 0; i < nucleus; ++i) {
    running += candidates_[i].first;
    if (draw < running) return candidates_[i].second;
  }
  return candidates_[nucleus - 1].second;
}

}  // namespace bifocal
