#include "tokenizer/decoder.h"

#include <algorithm>
#include <optional>

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

namespace {

char32_t single_character(const std::string& text, const std::string& key, const std::string& where) {
  std::size_t pos = 0;
  if (text.empty() || (next_code_point(text, pos), pos != text.size()))
    fail(where, "'" + key + "' must be exactly one character, got '" + text + "'");
  pos = 0;
  return next_code_point(text, pos);
}

// ByteFallback's test: a 6-byte token "<0x..>" whose middle parses with u8::from_str_radix(_, 16)
// (which also accepts a leading '+').
std::optional<unsigned char> byte_token_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const char high = token[3], low = token[4];
  if (high == '+' && hex_value(low) >= 0) return static_cast<unsigned char>(hex_value(low));
  if (hex_value(high) < 0 || hex_value(low) < 0) return std::nullopt;
  return static_cast<unsigned char>(hex_value(high) * 16 + hex_value(low));
}

std::vector<std::string> decode_byte_fallback(std::vector<std::string> tokens) {
  // Runs of byte tokens become their UTF-8 text, or one U+FFFD per byte if the run is not valid
  // UTF-8 as a whole (HF's ByteFallback, which does not use from_utf8_lossy).
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string run;
  std::size_t run_length = 0;
  auto flush = [&] {
    if (run_length == 0) return;
    if (is_valid_utf8(run)) {
      out.push_back(run);
    } else {
      for (std::size_t i = 0; i < run_length; ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    run.clear();
    run_length = 0;
  };
  for (std::string& token : tokens) {
    if (const auto byte = byte_token_value(token)) {
      run.push_back(static_cast<char>(*byte));
      ++run_length;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  return out;
}

// HF's Strip decoder on one token: drops up to `start` leading and `stop` trailing `content`
// characters. Where HF's cuts cross (e.g. stop > 0 on an empty token) it panics; this gives "".
std::string strip_token(const std::string& token, char32_t content, std::size_t start, std::size_t stop) {
  std::vector<std::pair<std::size_t, std::size_t>> chars;  // byte [begin, end) of each character
  std::vector<char32_t> code_points;
  for (std::size_t pos = 0; pos < token.size();) {
    const std::size_t begin = pos;
    code_points.push_back(next_code_point(token, pos));
    chars.emplace_back(begin, pos);
  }
  std::size_t start_cut = 0;
  for (std::size_t i = 0; i < std::min(start, code_points.size()) && code_points[i] == content; ++i) start_cut = i + 1;
  std::size_t stop_cut = code_points.size();
  for (std::size_t i = 0; i < std::min(stop, code_points.size()) && code_points[code_points.size() - 1 - i] == content; ++i)
    stop_cut = code_points.size() - 1 - i;
  if (stop_cut <= start_cut) return "";
  return token.substr(chars[start_cut].first, chars[stop_cut - 1].second - chars[start_cut].first);
}

// How many of tokens[0..end] stay when an unfinished UTF-8 character at the end of their
// ByteLevel bytes is held back (the tokens holding its bytes are dropped).
std::size_t settled_byte_level_prefix(std::span<const std::string> tokens, std::size_t end) {
  while (end > 0) {
    std::string tail;  // the last few bytes, enough to see the last character's start
    std::vector<std::size_t> token_of_tail_byte;
    for (std::size_t j = end; j > 0 && tail.size() < 4; --j) {
      const std::string bytes = token_bytes(tokens[j - 1]);
      tail.insert(0, bytes);
      token_of_tail_byte.insert(token_of_tail_byte.begin(), bytes.size(), j - 1);
    }
    const std::size_t unfinished = unfinished_utf8_tail(tail);
    if (unfinished == 0) return end;
    end = token_of_tail_byte[tail.size() - unfinished];
  }
  return 0;
}

}  // namespace

Decoder Decoder::from_json(const nlohmann::json& spec, const std::string& where) {
  Decoder decoder;
  decoder.present_ = !spec.is_null();
  if (decoder.present_) append_steps(spec, where, decoder.steps_);
  return decoder;
}

void Decoder::append_steps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps) {
  const auto type = json_get<std::string>(spec, "type", where);
  if (type == "Sequence") {
    const nlohmann::json& members = json_array(spec, "decoders", where);
    for (std::size_t i = 0; i < members.size(); ++i)
      append_steps(members[i], where + ".decoders[" + std::to_string(i) + "]", steps);
  } else if (type == "ByteLevel") {
    steps.push_back(ByteLevel{});
  } else if (type == "Metaspace") {
    const auto replacement = json_get_or<std::string>(spec, "replacement", "\u2581", where);
    steps.push_back(Metaspace{single_character(replacement, "replacement", where), prepend_scheme_from_json(spec, where)});
  } else if (type == "Replace") {
    steps.push_back(Replace{Pattern::from_json(json_get<nlohmann::json>(spec, "pattern", where), where),
                            json_get<std::string>(spec, "content", where)});
  } else if (type == "ByteFallback") {
    steps.push_back(ByteFallback{});
  } else if (type == "Fuse") {
    steps.push_back(Fuse{});
  } else if (type == "Strip") {
    const auto start = json_get_or<std::int64_t>(spec, "start", 0, where);
    const auto stop = json_get_or<std::int64_t>(spec, "stop", 0, where);
    if (start < 0 || stop < 0) fail(where, "Strip 'start' and 'stop' must not be negative");
    steps.push_back(Strip{single_character(json_get<std::string>(spec, "content", where), "content", where),
                          static_cast<std::size_t>(start), static_cast<std::size_t>(stop)});
  } else {
    fail(where, "unsupported decoder type '" + type +
                    "' (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)");
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined.push_back(' ');
      joined.append(tokens[i]);
    }
    return joined;
  }
  for (const Step& step : steps_) {
    if (std::holds_alternative<ByteLevel>(step)) {
      std::string bytes;
      for (const std::string& token : tokens) bytes.append(token_bytes(token));
      tokens = {utf8_lossy(bytes)};
    } else if (const auto* metaspace = std::get_if<Metaspace>(&step)) {
      // Every replacement character becomes a space, except in the first token, where HF drops
      // them all (unless prepend_scheme is "never").
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const bool drop = i == 0 && metaspace->prepend_scheme != PrependScheme::kNever;
        std::string out;
        for (std::size_t pos = 0; pos < tokens[i].size();) {
          const std::size_t begin = pos;
          if (next_code_point(tokens[i], pos) != metaspace->replacement) out.append(tokens[i], begin, pos - begin);
          else if (!drop) out.push_back(' ');
        }
        tokens[i] = std::move(out);
      }
    } else if (const auto* replace = std::get_if<Replace>(&step)) {
      for (std::string& token : tokens) token = replace->pattern.replace_all(token, replace->content);
    } else if (std::holds_alternative<ByteFallback>(step)) {
      tokens = decode_byte_fallback(std::move(tokens));
    } else if (std::holds_alternative<Fuse>(step)) {
      std::string fused;
      for (const std::string& token : tokens) fused.append(token);
      tokens = {std::move(fused)};
    } else if (const auto* strip = std::get_if<Strip>(&step)) {
      for (std::string& token : tokens) token = strip_token(token, strip->content, strip->start, strip->stop);
    }
  }
  std::string text;
  for (const std::string& token : tokens) text.append(token);
  return text;
}

std::size_t Decoder::settled_prefix(std::span<const std::string> tokens) const {
  std::size_t settled = tokens.size();
  for (bool changed = true; changed;) {
    changed = false;
    for (const Step& step : steps_) {
      std::size_t next = settled;
      if (std::holds_alternative<ByteLevel>(step)) {
        next = settled_byte_level_prefix(tokens, settled);
      } else if (std::holds_alternative<ByteFallback>(step)) {
        while (next > 0 && byte_token_value(tokens[next - 1])) --next;
      }
      if (next != settled) {
        settled = next;
        changed = true;
      }
    }
  }
  return settled;
}

}  // namespace bifocal::tokenizer
