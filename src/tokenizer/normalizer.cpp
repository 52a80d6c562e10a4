#include "tokenizer/normalizer.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

namespace {

std::string apply_utf8proc(std::string_view text, int options) {
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                               static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                               static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  if (length < 0) fail("normalizer", std::string("Unicode normalization failed: ") + utf8proc_errmsg(length));
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
}

template <typename Predicate>
std::string filter_characters(std::string_view text, Predicate keep) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t begin = pos;
    if (keep(next_code_point(text, pos))) out.append(text.substr(begin, pos - begin));
  }
  return out;
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& spec, const std::string& where) {
  Normalizer normalizer;
  if (!spec.is_null()) append_steps(spec, where, normalizer.steps_);
  return normalizer;
}

void Normalizer::append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps) {
  const auto type = json_get<std::string>(spec, "type", where);
  if (type == "Sequence") {
    const nlohmann::json& members = json_array(spec, "normalizers", where);
    for (std::size_t i = 0; i < members.size(); ++i)
      append_steps(members[i], where + ".normalizers[" + std::to_string(i) + "]", steps);
  } else if (type == "NFC") {
    steps.push_back(UnicodeForm{UTF8PROC_STABLE | UTF8PROC_COMPOSE});
  } else if (type == "NFD") {
    steps.push_back(UnicodeForm{UTF8PROC_STABLE | UTF8PROC_DECOMPOSE});
  } else if (type == "NFKC") {
    steps.push_back(UnicodeForm{UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT});
  } else if (type == "NFKD") {
    steps.push_back(UnicodeForm{UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT});
  } else if (type == "Lowercase") {
    steps.push_back(Lowercase{});
  } else if (type == "Prepend") {
    steps.push_back(Prepend{json_get<std::string>(spec, "prepend", where)});
  } else if (type == "Replace") {
    steps.push_back(Replace{Pattern::from_json(json_get<nlohmann::json>(spec, "pattern", where), where),
                            json_get<std::string>(spec, "content", where)});
  } else if (type == "Strip") {
    steps.push_back(Strip{json_get_or<bool>(spec, "strip_left", false, where),
                          json_get_or<bool>(spec, "strip_right", false, where)});
  } else if (type == "StripAccents") {
    steps.push_back(StripAccents{});
  } else {
    fail(where, "unsupported normalizer type '" + type +
                    "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, StripAccents, Sequence)");
  }
}

std::string Normalizer::normalize(std::string_view input) const {
  std::string text(input);
  for (const Step& step : steps_) {
    if (const auto* form = std::get_if<UnicodeForm>(&step)) {
      text = apply_utf8proc(text, form->utf8proc_options);
    } else if (std::holds_alternative<Lowercase>(step)) {
      // NormalizedString::lowercase maps each char with char::to_lowercase (no context rules).
      std::string lowered;
      lowered.reserve(text.size());
      for (std::size_t pos = 0; pos < text.size();) append_lowercase(lowered, next_code_point(text, pos));
      text = std::move(lowered);
    } else if (const auto* prepend = std::get_if<Prepend>(&step)) {
      // HF's Prepend leaves empty text empty.
      if (!text.empty()) text.insert(0, prepend->prefix);
    } else if (const auto* replace = std::get_if<Replace>(&step)) {
      text = replace->pattern.replace_all(text, replace->content);
    } else if (const auto* strip = std::get_if<Strip>(&step)) {
      std::size_t begin = 0, end = text.size();
      if (strip->left) {
        for (std::size_t pos = 0; pos < end;) {
          if (!is_whitespace(next_code_point(text, pos))) break;
          begin = pos;
        }
      }
      if (strip->right) {
        end = begin;
        for (std::size_t pos = begin; pos < text.size();) {
          if (!is_whitespace(next_code_point(text, pos))) end = pos;
        }
      }
      text = text.substr(begin, end - begin);
    } else if (std::holds_alternative<StripAccents>(step)) {
      // HF's StripAccents drops every combining mark (categories Mn, Mc, Me).
      text = filter_characters(text, [](char32_t c) {
        const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        return category != UTF8PROC_CATEGORY_MN && category != UTF8PROC_CATEGORY_MC && category != UTF8PROC_CATEGORY_ME;
      });
    }
  }
  return text;
}

}  // namespace bifocal::tokenizer
