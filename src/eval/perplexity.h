// Perplexity by token position: the measurement behind DESIGN.md's mission statement that a
// window without sink tokens collapses once the first tokens leave it, while SWA(w, s) with
// sinks stays close to full attention. Text is cut into independent windows, each scored from a
// fresh session; the negative log-likelihood of every next token is added to the bucket of
// the position it sits at.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace bifocal {

class Model;
class Tokenizer;
struct ModelConfig;

// One position bucket [begin, end): the summed NLL (nats) of the targets at those positions.
struct PerplexityBucket {
  int begin = 0;
  int end = 0;
  double nll_sum = 0;
  std::int64_t tokens = 0;
  double perplexity() const;  // exp(mean NLL); NaN for an empty bucket
};

struct PositionPerplexity {
  std::vector<PerplexityBucket> buckets;
  double nll_sum = 0;          // every scored target, inside a bucket or not
  std::int64_t tokens = 0;
  std::size_t windows = 0;
  std::size_t cache_bytes = 0;  // Session::cache_bytes() at the end of the last window
  double seconds = 0;
  double perplexity() const;    // overall

  // Empty buckets between consecutive edges, which must increase (throws Error otherwise).
  static PositionPerplexity with_edges(const std::vector<int>& bucket_edges);
  // Adds one target's NLL at `position`; positions outside every bucket count only overall.
  void add(std::int64_t position, double nll);
};

// −log softmax(logits)[target], computed in double with the max subtracted.
double token_nll(std::span<const float> logits, std::int32_t target);

// Scores rows of logits: row i (the logits at position first_position + i) predicts targets[i],
// which sits at position first_position + i + 1.
void add_next_token_nll(std::span<const float> logits, std::size_t vocab, std::span<const std::int32_t> targets,
                        std::int64_t first_position, PositionPerplexity& into);

// The id each window starts with: the tokenizer's BOS, else config.json's bos_token_id, else none.
std::optional<std::int32_t> window_bos(const Tokenizer& tokenizer, const ModelConfig& config);

// Consecutive, non-overlapping windows of `context` tokens (BOS included when given) over one
// text's ids. A last window shorter than `min_length` tokens is dropped; `dropped_tokens`
// counts the text ids it held.
struct Windows {
  std::vector<std::vector<std::int32_t>> windows;
  std::size_t dropped_tokens = 0;
};
Windows split_windows(std::span<const std::int32_t> ids, int context, std::optional<std::int32_t> bos, int min_length);

struct PerplexityProgress {
  std::size_t window = 0;   // windows finished
  std::size_t windows = 0;  // windows in all
  std::int64_t tokens = 0;  // tokens run so far
  double seconds = 0;
};
using PerplexityProgressFn = std::function<void(const PerplexityProgress&)>;

// Runs every window through `model` from a fresh session, scoring each next token by position.
// Logits are taken a slice of `slice` tokens at a time (one prefill chunk), so memory stays at
// slice × vocab floats however long the window.
PositionPerplexity evaluate_perplexity(const Model& model, const std::vector<std::vector<std::int32_t>>& windows,
                                       const std::vector<int>& bucket_edges, const PerplexityProgressFn& progress = {},
                                       int slice = 256);

}  // namespace bifocal
