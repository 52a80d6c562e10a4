#include "bifocal/generate.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "bifocal/error.h"

namespace bifocal {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
}  // namespace

std::string StopStringFilter::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  std::size_t earliest = std::string::npos;
  for (const auto& stop : stop_strings_) earliest = std::min(earliest, held_.find(stop));
  if (earliest != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, earliest);
    held_.clear();
    return out;
  }
  // Keep the longest tail of held_ that is a proper prefix of some stop string.
  std::size_t keep = 0;
  for (const auto& stop : stop_strings_)
    for (std::size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length)
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringFilter::finish() {
  std::string out = stopped_ ? std::string() : held_;
  held_.clear();
  return out;
}

double GenerationResult::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0.0;
}
double GenerationResult::decode_tokens_per_second() const {
  return decode_seconds > 0 ? double(decode_steps) / decode_seconds : 0.0;
}

std::string GenerationResult::stats_line() const {
  return fmt::format("prompt tokens: {} | generated tokens: {} | prefill: {:.1f} tok/s | decode: {:.1f} tok/s | "
                     "cache: {} bytes ({:.2f} MiB) | stop: {}",
                     prompt_tokens, tokens.size(), prefill_tokens_per_second(), decode_tokens_per_second(), cache_bytes,
                     double(cache_bytes) / (1024.0 * 1024.0), stop_reason);
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::span<const std::int32_t> prompt,
                          const GenerationOptions& options, const std::function<void(std::string_view)>& on_text) {
  if (prompt.empty()) fail("prompt", "empty prompt");
  if (options.max_tokens < 0) fail("--max-tokens", "must be >= 0");
  Session session = model.new_session(generation_capacity(prompt.size(), options.max_tokens));
  const auto prefill_start = Clock::now();
  const std::span<const float> logits = model.prefill(session, prompt);
  const double prefill_seconds = seconds_since(prefill_start);
  GenerationResult result = generate_from(model, tokenizer, session, logits, options, on_text);
  result.prefill_seconds = prefill_seconds;
  return result;
}

GenerationResult generate_from(const Model& model, const Tokenizer& tokenizer, Session& session,
                               std::span<const float> prompt_logits, const GenerationOptions& options,
                               const std::function<void(std::string_view)>& on_text) {
  if (options.max_tokens < 0) fail("--max-tokens", "must be >= 0");
  std::vector<std::int32_t> eos = model.config().eos_token_ids;
  for (const std::int32_t id : tokenizer.eos_ids()) eos.push_back(id);
  auto is_eos = [&](std::int32_t id) { return options.stop_at_eos && std::find(eos.begin(), eos.end(), id) != eos.end(); };

  GenerationResult result;
  result.prompt_tokens = session.position();
  result.tokens.reserve(options.max_tokens);
  result.cache_bytes = session.cache_bytes();
  Sampler sampler(options.sampling, model.config().vocab_size);
  StreamingDecoder decoder(tokenizer, /*skip_special_tokens=*/true);
  StopStringFilter stops(options.stop_strings);
  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return;
    result.text += piece;
    if (on_text) on_text(piece);
  };

  result.stop_reason = "max tokens";
  const auto decode_start = Clock::now();
  for (int step = 0; step < options.max_tokens; ++step) {
    // The first token comes from the prompt's logits; each later one from a decode step, which
    // on the CUDA backend also samples on the device.
    std::int32_t next = 0;
    if (step == 0) {
      next = sampler.sample(prompt_logits);
    } else {
      next = model.decode_and_sample(session, result.tokens.back(), sampler);
      ++result.decode_steps;
    }
    if (is_eos(next)) {
      result.stop_reason = "eos";
      break;
    }
    result.tokens.push_back(next);
    emit(stops.push(decoder.push(next)));
    if (stops.stopped()) {
      result.stop_reason = "stop string";
      break;
    }
  }
  result.decode_seconds = seconds_since(decode_start);
  if (!stops.stopped()) {
    emit(stops.push(decoder.finish()));
    emit(stops.finish());
  }
  return result;
}

}  // namespace bifocal
