// tokenizer.json "decoder": turns token strings back into text (ByteLevel, Metaspace, Replace,
// ByteFallback, Fuse, Strip, Sequence), as HF's Decoder::decode_chain steps followed by a join.
#pragma once

#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/pattern.h"
#include "tokenizer/pre_tokenizer.h"

namespace bifocal::tokenizer {

class Decoder {
 public:
  // `spec` may be null: HF then joins the tokens with spaces. Throws Error "<where>: ..." for an
  // unsupported type.
  static Decoder from_json(const nlohmann::json& spec, const std::string& where);

  std::string decode(std::vector<std::string> tokens) const;

  // The largest k such that decode(tokens[0..k]) is final: it is a prefix of the decoding of
  // tokens[0..k] followed by any further tokens. Only ByteLevel (an unfinished UTF-8 character
  // at the end) and ByteFallback (a trailing run of <0xNN> tokens, which decodes as one group)
  // hold tokens back; the other steps act per token or only on the text's start.
  std::size_t settled_prefix(std::span<const std::string> tokens) const;

 private:
  struct ByteLevel {};
  struct Metaspace { char32_t replacement; PrependScheme prepend_scheme; };
  struct Replace { Pattern pattern; std::string content; };
  struct ByteFallback {};
  struct Fuse {};
  struct Strip { char32_t content; std::size_t start, stop; };
  using Step = std::variant<ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip>;

  static void append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps);
  bool present_ = false;
  std::vector<Step> steps_;  // a Sequence is flattened: its members run in order
};

}  // namespace bifocal::tokenizer
