// The log-probability of a continuation given a context: the measurement behind every
// likelihood multiple-choice task (issue 6). The split into context and continuation tokens
// follows lm-evaluation-harness's causal-LM behaviour, so that scores are comparable with
// published numbers:
//   * whitespace at the end of the context moves to the front of the continuation (a BPE
//     vocabulary spells " Paris" as one token, not " " + "Paris");
//   * context and continuation are encoded jointly, and the continuation's tokens are those of
//     the joint encoding past the length of the context's own encoding — the context tokens fed
//     to the model are the context's own encoding, even where the joint one merged across the
//     boundary;
//   * an empty context is replaced by one prefix token (BOS, else the first EOS);
//   * special tokens follow the tokenizer's own post-processor (lm-evaluation-harness delegates
//     BOS to the tokenizer since late 2025; the older "never add BOS" default is an option);
//   * a sequence longer than the model's context is cut from the left, the continuation kept.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bifocal {
class Model;
class Tokenizer;
}  // namespace bifocal

namespace bifocal::eval {

// The token ids of one (context, continuation) request, before truncation.
struct ContextContinuationTokens {
  std::vector<std::int32_t> context;
  std::vector<std::int32_t> continuation;
};

// lm-evaluation-harness's split (see the file comment). Throws Error when the continuation
// gets no token of its own (the joint encoding merged it entirely into the context's last token).
ContextContinuationTokens split_context_continuation(const Tokenizer& tokenizer, std::string_view context,
                                                     std::string_view continuation, bool add_special_tokens = true);

struct ContinuationScore {
  double logprob = 0;            // Σ log softmax(logits)[token] over the continuation's tokens (nats)
  bool is_greedy = true;         // every continuation token was the argmax of its logits
  int continuation_tokens = 0;
  int context_tokens = 0;        // context tokens the model saw, after truncation
  bool truncated = false;        // tokens were dropped from the left to fit max_length
};

// Scores `continuation` after `context` on a fresh session. The model sees at most `max_length`
// tokens: of context + continuation, the last max_length + 1 are kept and the very last is not
// fed (it is only predicted), as lm-evaluation-harness does. Throws Error when the continuation
// is empty or longer than max_length. Only the continuation's rows of logits are materialised,
// so memory is continuation_tokens × vocab floats however long the context.
ContinuationScore score_continuation(const Model& model, std::span<const std::int32_t> context,
                                     std::span<const std::int32_t> continuation, int max_length);

// score_continuation for each continuation after one shared context, with the context run once:
// its tokens but the last go through one session, which each continuation then continues in a
// copy (Model::copy_session). The scores equal score_continuation's up to float rounding (the
// prefill is cut at a different token). A continuation whose input would be cut from the left,
// or a one-token context, falls back to score_continuation for that request.
std::vector<ContinuationScore> score_continuations(const Model& model, std::span<const std::int32_t> context,
                                                   std::span<const std::vector<std::int32_t>> continuations,
                                                   int max_length);

struct LoglikelihoodOptions {
  // Longest input fed to the model; nullopt: the checkpoint's max_position_embeddings.
  std::optional<int> max_length;
  // Whether encoding applies the tokenizer's post-processor (e.g. prepends BOS).
  bool add_special_tokens = true;
};

// split_context_continuation, then score_continuation.
ContinuationScore loglikelihood(const Model& model, const Tokenizer& tokenizer, std::string_view context,
                                std::string_view continuation, const LoglikelihoodOptions& options = {});

}  // namespace bifocal::eval
