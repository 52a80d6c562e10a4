// Tokenizer loaded from a Hugging Face tokenizer.json: byte-level BPE (GPT-2 / Llama-3 / Qwen2
// pre-tokenizer regexes) and SentencePiece-style BPE (Metaspace, byte fallback), with added and
// special tokens. Ids and decoded text equal HF tokenizers' (tests/golden/tokenizers/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bifocal {

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json, and BOS/EOS from DIR/tokenizer_config.json and
  // DIR/generation_config.json when present. Throws bifocal::Error naming the file on bad input.
  static Tokenizer from_dir(const std::filesystem::path& dir);
  // Reads one tokenizer.json (no BOS/EOS configuration files).
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special_tokens: apply the post-processor (e.g. prepend BOS), as HF's encode() does.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Decodes ids the way HF's decode(ids, skip_special_tokens) does.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  std::int32_t vocab_size() const;                         // largest id + 1, added tokens included
  std::optional<std::int32_t> token_id(std::string_view token) const;
  std::string token_text(std::int32_t id) const;           // the vocabulary string of `id`
  bool is_special(std::int32_t id) const;
  std::optional<std::int32_t> bos_id() const;
  std::vector<std::int32_t> eos_ids() const;               // every id that ends generation

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class StreamingDecoder;
};

// Turns a stream of ids into text as it is generated. A multi-byte UTF-8 character split across
// tokens is held back until complete, so every returned piece is valid UTF-8 and the
// concatenation of all pieces equals tokenizer.decode(all ids). Each push costs time bounded by a
// short window of recent tokens, not by the length of the stream.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(std::int32_t id);  // the text that became final with this id (may be empty)
  std::string finish();               // whatever is still held back; the next push starts a new stream

 private:
  void shrink_window();

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<std::string> window_;     // token strings from the window start to the newest
  std::size_t settled_tokens_ = 0;      // window tokens whose text has been emitted
  std::size_t settled_bytes_ = 0;       // decoded length of those tokens, decoded as a window
  std::size_t emitted_bytes_ = 0;       // text emitted since the stream began
};

}  // namespace bifocal
