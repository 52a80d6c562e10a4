// The generation loop: prefill the prompt, then sample and decode one token at a time,
// streaming text, until max_tokens, an end-of-sequence token or a stop string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bifocal/model.h"
#include "bifocal/sampler.h"
#include "bifocal/tokenizer.h"

namespace bifocal {

struct GenerationOptions {
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop_strings;  // generation ends before the first occurrence
  bool stop_at_eos = true;
};

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // generated ids (EOS excluded)
  std::string text;                  // generated text, cut before a stop string
  std::string stop_reason;           // "eos", "stop string", "max tokens"
  std::int64_t prompt_tokens = 0;
  double prefill_seconds = 0;        // prompt prefill, up to the first token's logits
  double decode_seconds = 0;         // all decode steps after the first token
  std::int64_t decode_steps = 0;
  std::size_t cache_bytes = 0;

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
  std::string stats_line() const;    // one line: prompt/generated tokens, tok/s, cache bytes
};

// The session capacity a generation of up to max_tokens after prompt_tokens needs.
inline std::int64_t generation_capacity(std::size_t prompt_tokens, int max_tokens) {
  return std::int64_t(prompt_tokens) + (max_tokens > 1 ? max_tokens : 1);
}

// `on_text` receives each piece of text as soon as it is final (valid UTF-8, not part of a
// possible stop string). The session is made here, sized for prompt + max_tokens.
GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::span<const std::int32_t> prompt,
                          const GenerationOptions& options,
                          const std::function<void(std::string_view)>& on_text = {});

// The same loop from a session that already holds the prompt (prefilled, e.g. a copy made with
// Model::copy_session so that k samples share one prefill) and the prompt's last logits. The
// session needs room for max_tokens − 1 more tokens (full attention's cache is checked by
// Model::forward); prompt_tokens is the session's position, prefill_seconds is left at 0.
GenerationResult generate_from(const Model& model, const Tokenizer& tokenizer, Session& session,
                               std::span<const float> prompt_logits, const GenerationOptions& options,
                               const std::function<void(std::string_view)>& on_text = {});

// Holds back text that could still turn into a stop string; see generate().
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {}
  // Adds text; returns what can be shown now. After a stop string is seen, stopped() is true
  // and nothing from the stop string on is ever returned.
  std::string push(std::string_view text);
  std::string finish();  // the held-back tail when generation ends without a stop string
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_strings_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace bifocal
