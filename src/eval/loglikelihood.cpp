#include "eval/loglikelihood.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bifocal/error.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/perplexity.h"

namespace bifocal::eval {

namespace {

// The characters Python's str.rstrip() removes that are one byte in UTF-8 (lm-evaluation-harness
// measures the trailing whitespace with rstrip()).
bool is_ascii_whitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1f');
}

std::int32_t prefix_token(const Tokenizer& tokenizer) {
  if (const auto bos = tokenizer.bos_id()) return *bos;
  const auto eos = tokenizer.eos_ids();
  if (!eos.empty()) return eos.front();
  fail("loglikelihood", "an empty context needs a BOS or EOS token to stand for it, and the tokenizer has neither");
}

// The first index of the largest value (torch's argmax picks the first of equal maxima too).
std::size_t argmax(std::span<const float> values) {
  return std::size_t(std::max_element(values.begin(), values.end()) - values.begin());
}

// Adds to `score` the log-probability of each continuation token under its row of `logits`
// (row i predicts continuation[i]) and clears is_greedy where a token is not its row's argmax.
void add_continuation_rows(std::span<const float> logits, std::size_t vocab,
                           std::span<const std::int32_t> continuation, ContinuationScore& score) {
  for (std::size_t i = 0; i < continuation.size(); ++i) {
    const std::span<const float> row = logits.subspan(i * vocab, vocab);
    score.logprob -= token_nll(row, continuation[i]);
    if (argmax(row) != std::size_t(continuation[i])) score.is_greedy = false;
  }
}

}  // namespace

ContextContinuationTokens split_context_continuation(const Tokenizer& tokenizer, std::string_view context,
                                                     std::string_view continuation, bool add_special_tokens) {
  std::size_t kept = context.size();
  while (kept > 0 && is_ascii_whitespace(context[kept - 1])) --kept;
  const std::string moved_context(context.substr(0, kept));
  const std::string moved_continuation = std::string(context.substr(kept)) + std::string(continuation);

  ContextContinuationTokens tokens;
  if (moved_context.empty()) {
    tokens.context = {prefix_token(tokenizer)};
    tokens.continuation = tokenizer.encode(moved_continuation, /*add_special_tokens=*/false);
  } else {
    tokens.context = tokenizer.encode(moved_context, add_special_tokens);
    const auto whole = tokenizer.encode(moved_context + moved_continuation, add_special_tokens);
    if (whole.size() > tokens.context.size())
      tokens.continuation.assign(whole.begin() + std::ptrdiff_t(tokens.context.size()), whole.end());
  }
  if (tokens.continuation.empty())
    fail("loglikelihood", "the continuation '" + std::string(continuation) +
                              "' has no token of its own after the context '" + std::string(context) +
                              "' (the joint encoding merged it into the context)");
  return tokens;
}

ContinuationScore score_continuation(const Model& model, std::span<const std::int32_t> context,
                                     std::span<const std::int32_t> continuation, int max_length) {
  if (continuation.empty()) fail("loglikelihood", "empty continuation");
  if (context.empty()) fail("loglikelihood", "empty context (it needs at least one token to predict from)");
  if (max_length < 1) fail("loglikelihood", "max_length must be at least 1, got " + std::to_string(max_length));
  if (continuation.size() > std::size_t(max_length))
    fail("loglikelihood", "the continuation has " + std::to_string(continuation.size()) +
                              " tokens, more than the model's context of " + std::to_string(max_length));

  // The last max_length + 1 tokens of context + continuation; all but the last are fed.
  std::vector<std::int32_t> sequence(context.begin(), context.end());
  sequence.insert(sequence.end(), continuation.begin(), continuation.end());
  const std::size_t keep = std::min(sequence.size(), std::size_t(max_length) + 1);
  const std::span<const std::int32_t> kept = std::span<const std::int32_t>(sequence).last(keep);
  const std::span<const std::int32_t> input = kept.first(keep - 1);
  const std::size_t count = continuation.size();
  // Row i of the last `count` inputs' logits predicts continuation token i.
  const std::size_t lead = input.size() - count;

  ContinuationScore score;
  score.continuation_tokens = int(count);
  score.context_tokens = int(keep - count);
  score.truncated = keep < sequence.size();

  const std::size_t vocab = std::size_t(model.config().vocab_size);
  Session session = model.new_session(std::int64_t(input.size()));
  std::vector<float> logits(count * vocab);
  // The context before the first predicting position needs no logits but its last row's.
  if (lead > 0) model.forward(session, input.first(lead), std::span<float>(logits).first(vocab));
  model.forward(session, input.subspan(lead), logits, /*all_logits=*/true);
  add_continuation_rows(logits, vocab, continuation, score);
  return score;
}

std::vector<ContinuationScore> score_continuations(const Model& model, std::span<const std::int32_t> context,
                                                   std::span<const std::vector<std::int32_t>> continuations,
                                                   int max_length) {
  std::vector<ContinuationScore> scores(continuations.size());
  std::vector<std::size_t> shared;  // the requests that continue the shared prefix
  std::size_t longest = 0;
  for (std::size_t i = 0; i < continuations.size(); ++i) {
    const std::size_t length = context.size() + continuations[i].size();
    const bool alone = context.size() < 2 || continuations[i].empty() ||
                       max_length < 1 || length > std::size_t(max_length) + 1;
    if (alone) {
      scores[i] = score_continuation(model, context, continuations[i], max_length);  // also its errors
    } else {
      shared.push_back(i);
      longest = std::max(longest, continuations[i].size());
    }
  }
  if (shared.empty()) return scores;

  // The prefix: every context token but the last, whose row predicts the first continuation token.
  const std::span<const std::int32_t> prefix = context.first(context.size() - 1);
  const std::size_t vocab = std::size_t(model.config().vocab_size);
  Session prefixed = model.new_session(std::int64_t(context.size() + longest - 1));
  std::vector<float> logits(std::max<std::size_t>(1, longest) * vocab);
  model.forward(prefixed, prefix, std::span<float>(logits).first(vocab));
  std::vector<std::int32_t> input;
  for (const std::size_t i : shared) {
    const std::vector<std::int32_t>& continuation = continuations[i];
    input.assign(1, context.back());
    input.insert(input.end(), continuation.begin(), continuation.end() - 1);
    Session session = model.copy_session(prefixed);
    const std::span<float> rows = std::span<float>(logits).first(continuation.size() * vocab);
    model.forward(session, input, rows, /*all_logits=*/true);
    ContinuationScore& score = scores[i];
    score.continuation_tokens = int(continuation.size());
    score.context_tokens = int(context.size());
    add_continuation_rows(rows, vocab, continuation, score);
  }
  return scores;
}

ContinuationScore loglikelihood(const Model& model, const Tokenizer& tokenizer, std::string_view context,
                                std::string_view continuation, const LoglikelihoodOptions& options) {
  const auto tokens = split_context_continuation(tokenizer, context, continuation, options.add_special_tokens);
  const int max_length = options.max_length.value_or(model.config().max_position_embeddings);
  return score_continuation(model, tokens.context, tokens.continuation, max_length);
}

}  // namespace bifocal::eval
