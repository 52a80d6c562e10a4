// StreamingDecoder: emits text as ids arrive, never a partial character, and such that the
// pieces add up to Tokenizer::decode of all ids.
//
// Settled text: Decoder::settled_prefix gives the longest run of tokens whose decoding is final
// (everything except an unfinished UTF-8 character under ByteLevel, or a trailing run of <0xNN>
// tokens under ByteFallback). Such a decoding is a prefix of every later one, so what is emitted
// never has to be taken back.
//
// Window: decoding all tokens on every push would cost O(stream length) per token. Instead the
// decoder keeps a window that starts at a settled boundary s, with at least one already-emitted
// context token, and emits decode(window)[settled_bytes_..]. That difference equals the
// difference of the full decodings when
//   - s is settled: ByteLevel's bytes and ByteFallback's byte runs do not straddle it;
//   - the window's first token is already emitted, so what the decoders do only to the first
//     token (Metaspace drops its ▁) or only at the start of the text (Strip after Fuse) happens
//     in both window decodings alike and cancels out;
//   - the context text and the text before s are both non-empty, so a Strip of the text's start
//     has already stopped (it stops at a non-matching character or after `start` characters)
//     and reaches into neither the window nor the rest.
#include "bifocal/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"

namespace bifocal {

namespace {

// The window is moved forward once this many of its tokens are settled.
constexpr std::size_t kWindowTrimThreshold = 16;
// How many context tokens to try keeping when moving it.
constexpr std::size_t kMaxContextTokens = 8;

std::string decode_range(const tokenizer::Decoder& decoder, const std::vector<std::string>& tokens, std::size_t begin,
                         std::size_t end) {
  return decoder.decode(std::vector<std::string>(tokens.begin() + begin, tokens.begin() + end));
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDecoder::push(std::int32_t id) {
  const Tokenizer::Impl& impl = *tokenizer_.impl_;
  std::vector<std::string> token = impl.tokens_for(std::span(&id, 1), skip_special_tokens_);
  if (token.empty()) return {};  // an unknown id, or a special token being skipped
  window_.push_back(std::move(token.front()));

  const std::size_t settled = impl.decoder.settled_prefix(window_);
  if (settled <= settled_tokens_) return {};
  const std::string text = decode_range(impl.decoder, window_, 0, settled);
  std::string piece = text.size() > settled_bytes_ ? text.substr(settled_bytes_) : std::string();
  settled_tokens_ = settled;
  settled_bytes_ = text.size();
  emitted_bytes_ += piece.size();
  shrink_window();
  return piece;
}

void StreamingDecoder::shrink_window() {
  if (settled_tokens_ < kWindowTrimThreshold) return;
  const tokenizer::Decoder& decoder = tokenizer_.impl_->decoder;
  for (std::size_t context = 1; context <= kMaxContextTokens && context < settled_tokens_; ++context) {
    const std::size_t start = settled_tokens_ - context;
    if (decoder.settled_prefix(std::span(window_).first(start)) != start) continue;  // not a settled boundary
    const std::string context_text = decode_range(decoder, window_, start, settled_tokens_);
    if (context_text.empty() || context_text.size() >= emitted_bytes_) continue;
    window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(start));
    settled_tokens_ = context;
    settled_bytes_ = context_text.size();
    return;
  }
}

std::string StreamingDecoder::finish() {
  const std::string text = tokenizer_.impl_->decoder.decode(window_);
  std::string rest = text.size() > settled_bytes_ ? text.substr(settled_bytes_) : std::string();
  // The stream is over: the decoder starts afresh for the next one.
  window_.clear();
  settled_tokens_ = 0;
  settled_bytes_ = 0;
  emitted_bytes_ = 0;
  return rest;
}

}  // namespace bifocal
