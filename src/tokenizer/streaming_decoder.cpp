// StreamingDecoder: emits text as ids arrive, never a partial character, and such that the
// pieces add up to Tokenizer::decode of all ids.
//
// Each push decodes the tokens whose text is settled (Decoder::settled_prefix: everything except
// a trailing unfinished UTF-8 character under ByteLevel, or a trailing run of <0xNN> tokens under
// ByteFallback) and emits what lies past the bytes already emitted. Settled decodings are
// prefixes of every later decoding, so emitted text never has to be taken back. Re-decoding the
// settled prefix costs O(generated tokens) per push, which keeps the invariant exact for every
// supported decoder (Strip and Metaspace act on the text's start, which a windowed decode would
// have to special-case).
#include "bifocal/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"

namespace bifocal {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDecoder::push(std::int32_t id) {
  ids_.push_back(id);
  const Tokenizer::Impl& impl = *tokenizer_.impl_;
  std::vector<std::string> tokens = impl.tokens_for(ids_, skip_special_tokens_);
  tokens.resize(impl.decoder.settled_prefix(tokens));
  const std::string settled = impl.decoder.decode(std::move(tokens));
  if (settled.size() <= emitted_bytes_) return {};
  std::string piece = settled.substr(emitted_bytes_);
  emitted_bytes_ = settled.size();
  return piece;
}

std::string StreamingDecoder::finish() {
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  std::string rest = text.size() > emitted_bytes_ ? text.substr(emitted_bytes_) : std::string();
  // The stream is over: the decoder starts afresh for the next one.
  ids_.clear();
  emitted_bytes_ = 0;
  return rest;
}

}  // namespace bifocal
