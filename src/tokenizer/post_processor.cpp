#include "tokenizer/post_processor.h"

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/json_fields.h"

namespace bifocal::tokenizer {

namespace {

// RobertaProcessing / BertProcessing write a token as ["[CLS]", 101].
std::int32_t processing_token_id(const nlohmann::json& spec, const std::string& key, const std::string& where) {
  const nlohmann::json& pair = json_array(spec, key, where);
  if (pair.size() != 2 || !pair[1].is_number_integer())
    fail(where, "'" + key + "' must be [token, id], got " + pair.dump());
  return pair[1].get<std::int32_t>();
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& spec, const std::string& where) {
  PostProcessor processor;
  if (!spec.is_null()) append_steps(spec, where, processor.steps_);
  return processor;
}

void PostProcessor::append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Template>& steps) {
  const auto type = json_get<std::string>(spec, "type", where);
  if (type == "Sequence") {
    const nlohmann::json& members = json_array(spec, "processors", where);
    for (std::size_t i = 0; i < members.size(); ++i)
      append_steps(members[i], where + ".processors[" + std::to_string(i) + "]", steps);
  } else if (type == "ByteLevel") {
    // Only trims offsets; the ids are untouched.
  } else if (type == "TemplateProcessing") {
    const nlohmann::json& single = json_array(spec, "single", where);
    const auto special_tokens = json_get_or<nlohmann::json>(spec, "special_tokens", nlohmann::json::object(), where);
    Template result;
    for (const auto& piece : single) {
      if (piece.contains("Sequence")) {
        result.pieces.emplace_back(SequencePlaceholder{});
      } else if (piece.contains("SpecialToken")) {
        const auto name = json_get<std::string>(piece.at("SpecialToken"), "id", where + ".single");
        if (!special_tokens.contains(name))
          fail(where, "template uses special token '" + name + "' that 'special_tokens' does not define");
        const nlohmann::json& ids = json_array(special_tokens.at(name), "ids", where + ".special_tokens['" + name + "']");
        std::vector<std::int32_t> token_ids;
        for (const auto& id : ids) {
          if (!id.is_number_integer()) fail(where, "special_tokens['" + name + "'].ids must hold integers");
          token_ids.push_back(id.get<std::int32_t>());
        }
        result.pieces.emplace_back(std::move(token_ids));
      } else {
        fail(where, "template piece must be {\"Sequence\": ...} or {\"SpecialToken\": ...}, got " + piece.dump());
      }
    }
    steps.push_back(std::move(result));
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    // Single sequence: [CLS] A [SEP].
    steps.push_back(Template{{std::vector<std::int32_t>{processing_token_id(spec, "cls", where)}, SequencePlaceholder{},
                              std::vector<std::int32_t>{processing_token_id(spec, "sep", where)}}});
  } else {
    fail(where, "unsupported post-processor type '" + type +
                    "' (supported: TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence)");
  }
}

std::vector<std::int32_t> PostProcessor::process(std::vector<std::int32_t> ids) const {
  for (const Template& step : steps_) {
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 4);
    for (const TemplatePiece& piece : step.pieces) {
      if (std::holds_alternative<SequencePlaceholder>(piece)) out.insert(out.end(), ids.begin(), ids.end());
      else {
        const auto& special = std::get<std::vector<std::int32_t>>(piece);
        out.insert(out.end(), special.begin(), special.end());
      }
    }
    ids = std::move(out);
  }
  return ids;
}

}  // namespace bifocal::tokenizer
