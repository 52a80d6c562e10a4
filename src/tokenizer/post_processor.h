// tokenizer.json "post_processor" for single sequences: the special tokens HF's encode adds when
// add_special_tokens is true (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel,
// Sequence).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace bifocal::tokenizer {

class PostProcessor {
 public:
  // `spec` may be null (adds nothing). Throws Error "<where>: ..." for an unsupported type.
  static PostProcessor from_json(const nlohmann::json& spec, const std::string& where);

  // The ids of one encoded sequence with the processor's special tokens around them.
  std::vector<std::int32_t> process(std::vector<std::int32_t> ids) const;

 private:
  // One element of a template: the sequence itself, or the ids of a special token.
  struct SequencePlaceholder {};
  using TemplatePiece = std::variant<SequencePlaceholder, std::vector<std::int32_t>>;
  struct Template { std::vector<TemplatePiece> pieces; };

  static void append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Template>& steps);
  std::vector<Template> steps_;  // ByteLevel adds nothing and is not kept; a Sequence runs in order
};

}  // namespace bifocal::tokenizer
