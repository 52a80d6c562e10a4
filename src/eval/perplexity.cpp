#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "bifocal/error.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"

namespace bifocal {

double PerplexityBucket::perplexity() const {
  return tokens > 0 ? std::exp(nll_sum / double(tokens)) : std::numeric_limits<double>::quiet_NaN();
}

double PositionPerplexity::perplexity() const {
  return tokens > 0 ? std::exp(nll_sum / double(tokens)) : std::numeric_limits<double>::quiet_NaN();
}

PositionPerplexity PositionPerplexity::with_edges(const std::vector<int>& edges) {
  if (edges.size() < 2) fail("buckets", "need at least two edges (e.g. 0,128,256)");
  if (edges.front() < 0) fail("buckets", "edges must not be negative");
  PositionPerplexity result;
  for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
    if (edges[i + 1] <= edges[i])
      fail("buckets", "edges must increase, but " + std::to_string(edges[i + 1]) + " follows " + std::to_string(edges[i]));
    result.buckets.push_back({.begin = edges[i], .end = edges[i + 1]});
  }
  return result;
}

void PositionPerplexity::add(std::int64_t position, double nll) {
  nll_sum += nll;
  ++tokens;
  // Buckets are few (about eight), so a scan is cheap.
  for (auto& bucket : buckets)
    if (position >= bucket.begin && position < bucket.end) {
      bucket.nll_sum += nll;
      ++bucket.tokens;
      return;
    }
}

double token_nll(std::span<const float> logits, std::int32_t target) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (const float z : logits) max_logit = std::max(max_logit, double(z));
  double sum = 0;
  for (const float z : logits) sum += std::exp(double(z) - max_logit);
  return max_logit + std::log(sum) - double(logits[std::size_t(target)]);
}

void add_next_token_nll(std::span<const float> logits, std::size_t vocab, std::span<const std::int32_t> targets,
                        std::int64_t first_position, PositionPerplexity& into) {
  for (std::size_t i = 0; i < targets.size(); ++i)
    into.add(first_position + std::int64_t(i) + 1, token_nll(logits.subspan(i * vocab, vocab), targets[i]));
}

std::optional<std::int32_t> window_bos(const Tokenizer& tokenizer, const ModelConfig& config) {
  if (auto bos = tokenizer.bos_id()) return bos;
  return config.bos_token_id;
}

Windows split_windows(std::span<const std::int32_t> ids, int context, std::optional<std::int32_t> bos, int min_length) {
  if (context < 2) fail("windows", "a context of " + std::to_string(context) + " tokens is too short (at least 2)");
  const std::size_t text_per_window = std::size_t(context) - (bos ? 1 : 0);
  Windows result;
  for (std::size_t begin = 0; begin < ids.size(); begin += text_per_window) {
    const auto text = ids.subspan(begin, std::min(text_per_window, ids.size() - begin));
    std::vector<std::int32_t> window;
    window.reserve(text.size() + 1);
    if (bos) window.push_back(*bos);
    window.insert(window.end(), text.begin(), text.end());
    if (std::int64_t(window.size()) < min_length)
      result.dropped_tokens += text.size();
    else
      result.windows.push_back(std::move(window));
  }
  return result;
}

PositionPerplexity evaluate_perplexity(const Model& model, const std::vector<std::vector<std::int32_t>>& windows,
                                       const std::vector<int>& bucket_edges, const PerplexityProgressFn& progress,
                                       int slice) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  PositionPerplexity result = PositionPerplexity::with_edges(bucket_edges);
  const std::size_t vocab = model.config().vocab_size;
  std::vector<float> logits(std::size_t(std::max(slice, 1)) * vocab);
  std::int64_t tokens_run = 0;
  for (std::size_t w = 0; w < windows.size(); ++w) {
    const std::span<const std::int32_t> window = windows[w];
    if (window.size() < 2) fail("perplexity", "a window needs at least 2 tokens");
    // A fresh session per window: every window is scored independently, from position 0.
    Session session = model.new_session(std::int64_t(window.size()), slice);
    for (std::size_t begin = 0; begin < window.size(); begin += slice) {
      const std::size_t count = std::min<std::size_t>(slice, window.size() - begin);
      model.forward(session, window.subspan(begin, count), logits, /*all_logits=*/true);
      // Row i predicts token begin + i + 1; the window's last token predicts nothing.
      const std::size_t targets = std::min(count, window.size() - 1 - begin);
      add_next_token_nll(std::span<const float>(logits).first(count * vocab), vocab,
                         window.subspan(begin + 1, targets), std::int64_t(begin), result);
    }
    tokens_run += std::int64_t(window.size());
    result.cache_bytes = session.cache_bytes();
    ++result.windows;
    if (progress)
      progress({.window = w + 1, .windows = windows.size(), .tokens = tokens_run,
                .seconds = std::chrono::duration<double>(Clock::now() - start).count()});
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace bifocal
