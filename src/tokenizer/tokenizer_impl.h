// Tokenizer::Impl: the loaded pipeline, shared by tokenizer.cpp and streaming_decoder.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bifocal/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace bifocal {

struct Tokenizer::Impl {
  Impl(tokenizer::BpeModel model_, tokenizer::AddedVocabulary added_, tokenizer::Normalizer normalizer_,
       tokenizer::PreTokenizer pre_tokenizer_, tokenizer::PostProcessor post_processor_, tokenizer::Decoder decoder_)
      : model(std::move(model_)), added(std::move(added_)), normalizer(std::move(normalizer_)),
        pre_tokenizer(std::move(pre_tokenizer_)), post_processor(std::move(post_processor_)),
        decoder(std::move(decoder_)) {}

  tokenizer::BpeModel model;
  tokenizer::AddedVocabulary added;
  tokenizer::Normalizer normalizer;
  tokenizer::PreTokenizer pre_tokenizer;
  tokenizer::PostProcessor post_processor;
  tokenizer::Decoder decoder;

  // From tokenizer_config.json / generation_config.json (Tokenizer::from_dir only).
  std::optional<std::int32_t> bos_id;
  std::vector<std::int32_t> eos_ids;
  // add_bos_token / add_eos_token that the post-processor does not already honour.
  std::optional<std::int32_t> prepend_on_special;
  std::optional<std::int32_t> append_on_special;

  // Reads BOS/EOS settings from DIR/tokenizer_config.json and DIR/generation_config.json when
  // they exist (special_token_config.cpp).
  void load_special_token_config(const std::filesystem::path& dir);

  // HF's decode, first half: the token strings of `ids` (added tokens first), unknown ids
  // dropped, special tokens dropped when asked.
  std::vector<std::string> tokens_for(std::span<const std::int32_t> ids, bool skip_special_tokens) const;
};

}  // namespace bifocal
