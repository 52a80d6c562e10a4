#include "tokenizer/pre_tokenizer.h"

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

namespace {

// The regex HF's ByteLevel pre-tokenizer splits with when use_regex is true (GPT-2's).
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// HF's Whitespace pre-tokenizer keeps the matches of \w+|[^\w\s]+ (Rust regex syntax) and drops
// everything else. Rust's \w is spelled out, since PCRE2's \w (letters, numbers, '_') differs.
constexpr const char* kWhitespaceRegex =
    R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s]+)";

const Pattern& gpt2_pattern() {
  static const Pattern pattern = Pattern::regex(kGpt2Regex);
  return pattern;
}

// PreTokenizedString::split with NormalizedString::split: each piece is cut by the pattern;
// only a sub-piece that starts where an at-start piece starts is still at the text start.
void split_pieces(std::vector<PreToken>& pieces, const Pattern& pattern, SplitBehavior behavior, bool invert) {
  std::vector<PreToken> out;
  out.reserve(pieces.size());
  for (const PreToken& piece : pieces) {
    for (const TextSpan& span : split_spans(pattern.find_matches(piece.text), behavior, invert))
      out.push_back({piece.text.substr(span.begin, span.end - span.begin), piece.at_text_start && span.begin == 0});
  }
  pieces = std::move(out);
}

std::string replace_spaces(const std::string& text, const std::string& replacement) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == ' ') out.append(replacement);
    else out.push_back(c);
  }
  return out;
}

}  // namespace

PrependScheme prepend_scheme_from_json(const nlohmann::json& spec, const std::string& where) {
  if (spec.contains("prepend_scheme") && !spec.at("prepend_scheme").is_null()) {
    const auto scheme = json_get<std::string>(spec, "prepend_scheme", where);
    if (scheme == "always") return PrependScheme::kAlways;
    if (scheme == "first") return PrependScheme::kFirst;
    if (scheme == "never") return PrependScheme::kNever;
    fail(where, "unsupported prepend_scheme '" + scheme + "' (expected always, first or never)");
  }
  // Files written before prepend_scheme existed carry add_prefix_space instead.
  return json_get_or<bool>(spec, "add_prefix_space", true, where) ? PrependScheme::kAlways : PrependScheme::kNever;
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& spec, const std::string& where) {
  PreTokenizer pre_tokenizer;
  if (!spec.is_null()) append_steps(spec, where, pre_tokenizer.steps_);
  return pre_tokenizer;
}

void PreTokenizer::append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps) {
  const auto type = json_get<std::string>(spec, "type", where);
  if (type == "Sequence") {
    const nlohmann::json& members = json_array(spec, "pretokenizers", where);
    for (std::size_t i = 0; i < members.size(); ++i)
      append_steps(members[i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
  } else if (type == "ByteLevel") {
    steps.push_back(ByteLevel{json_get_or<bool>(spec, "add_prefix_space", true, where),
                              json_get_or<bool>(spec, "use_regex", true, where)});
  } else if (type == "Split") {
    steps.push_back(Split{Pattern::from_json(json_get<nlohmann::json>(spec, "pattern", where), where),
                          split_behavior_from_json(spec.value("behavior", nlohmann::json()), where),
                          json_get_or<bool>(spec, "invert", false, where)});
  } else if (type == "Metaspace") {
    const auto replacement = json_get_or<std::string>(spec, "replacement", "\u2581", where);
    std::size_t pos = 0;
    const char32_t character = replacement.empty() ? 0 : next_code_point(replacement, pos);
    if (replacement.empty() || pos != replacement.size()) fail(where, "Metaspace replacement must be one character");
    std::optional<Pattern> split_on;
    if (json_get_or<bool>(spec, "split", true, where))
      split_on = Pattern::character([character](char32_t c) { return c == character; });
    steps.push_back(Metaspace{replacement, prepend_scheme_from_json(spec, where), std::move(split_on)});
  } else if (type == "Digits") {
    // Digits splits off char::is_numeric characters, one by one or in runs.
    const bool individual = json_get_or<bool>(spec, "individual_digits", false, where);
    steps.push_back(Split{Pattern::character(is_numeric),
                          individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false});
  } else if (type == "Whitespace") {
    steps.push_back(Split{Pattern::regex(kWhitespaceRegex), SplitBehavior::kRemoved, true});
  } else if (type == "WhitespaceSplit") {
    steps.push_back(Split{Pattern::character(is_whitespace), SplitBehavior::kRemoved, false});
  } else {
    fail(where, "unsupported pre-tokenizer type '" + type +
                    "' (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence)");
  }
}

void PreTokenizer::pre_tokenize(std::vector<PreToken>& pieces) const {
  for (const Step& step : steps_) {
    if (const auto* byte_level = std::get_if<ByteLevel>(&step)) {
      // HF prepends the space to every piece that lacks one, not only the first.
      if (byte_level->add_prefix_space)
        for (PreToken& piece : pieces)
          if (!piece.text.starts_with(' ')) piece.text.insert(0, " ");
      if (byte_level->use_regex) split_pieces(pieces, gpt2_pattern(), SplitBehavior::kIsolated, false);
      for (PreToken& piece : pieces) piece.text = bytes_to_alphabet(piece.text);
    } else if (const auto* split = std::get_if<Split>(&step)) {
      split_pieces(pieces, split->pattern, split->behavior, split->invert);
    } else if (const auto* metaspace = std::get_if<Metaspace>(&step)) {
      for (PreToken& piece : pieces) {
        piece.text = replace_spaces(piece.text, metaspace->replacement);
        const bool wants_prefix = metaspace->prepend_scheme == PrependScheme::kAlways ||
                                  (metaspace->prepend_scheme == PrependScheme::kFirst && piece.at_text_start);
        if (wants_prefix && !piece.text.starts_with(metaspace->replacement)) piece.text.insert(0, metaspace->replacement);
      }
      // Each replacement character starts a new word.
      if (metaspace->split_on) split_pieces(pieces, *metaspace->split_on, SplitBehavior::kMergedWithNext, false);
    }
    std::erase_if(pieces, [](const PreToken& piece) { return piece.text.empty(); });
  }
}

}  // namespace bifocal::tokenizer
