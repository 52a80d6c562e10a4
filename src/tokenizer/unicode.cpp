#include "tokenizer/unicode.h"

#include <utf8proc.h>

namespace bifocal::tokenizer {

namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// The range the byte after `lead` must fall in for a well-formed sequence (Unicode Table 3-7);
// this is what rules out overlong forms, surrogates and code points above U+10FFFF.
struct ByteRange {
  unsigned char low, high;
};
ByteRange second_byte_range(unsigned char lead) {
  switch (lead) {
    case 0xE0: return {0xA0, 0xBF};
    case 0xED: return {0x80, 0x9F};
    case 0xF0: return {0x90, 0xBF};
    case 0xF4: return {0x80, 0x8F};
    default: return {0x80, 0xBF};
  }
}

// Bytes a sequence starting with `lead` needs; 0 when `lead` can never start one.
std::size_t sequence_width(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// One step of Rust's UTF-8 validation from `pos`: either a complete character, or the "maximal
// subpart" of one that breaks off (or runs into the end of the input), which Rust's
// from_utf8_lossy replaces by a single U+FFFD.
struct SequenceScan {
  std::size_t length;  // bytes of the character, or of the broken-off subpart (at least 1)
  bool complete;
  bool ran_out;        // broken off only because the input ended
};
SequenceScan scan_sequence(std::string_view bytes, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(bytes[pos]);
  const std::size_t width = sequence_width(lead);
  if (width == 1) return {1, true, false};
  if (width == 0) return {1, false, false};
  std::size_t valid = 1;
  while (valid < width && pos + valid < bytes.size()) {
    const auto byte = static_cast<unsigned char>(bytes[pos + valid]);
    const ByteRange range = valid == 1 ? second_byte_range(lead) : ByteRange{0x80, 0xBF};
    if (byte < range.low || byte > range.high) break;
    ++valid;
  }
  return {valid, valid == width, valid < width && pos + valid == bytes.size()};
}

}  // namespace

std::size_t utf8_length(unsigned char lead) {
  const std::size_t width = sequence_width(lead);
  return width == 0 ? 1 : width;
}

char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const std::size_t width = utf8_length(lead);
  if (width == 1 || pos + width > text.size()) {
    ++pos;
    return lead;
  }
  char32_t code_point = lead & (0x7F >> width);
  for (std::size_t i = 1; i < width; ++i) code_point = (code_point << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += width;
  return code_point;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(char32_t code_point) {
  std::string out;
  append_utf8(out, code_point);
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  for (std::size_t pos = 0; pos < bytes.size();) {
    const SequenceScan scan = scan_sequence(bytes, pos);
    if (!scan.complete) return false;
    pos += scan.length;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t pos = 0; pos < bytes.size();) {
    const SequenceScan scan = scan_sequence(bytes, pos);
    if (scan.complete) {
      out.append(bytes.substr(pos, scan.length));
    } else {
      out.append(kReplacement);
    }
    pos += scan.length;
  }
  return out;
}

std::size_t unfinished_utf8_tail(std::string_view bytes) {
  // A lead byte is never a continuation byte, so an unfinished character must start at the last
  // non-continuation byte, which lies within the last three bytes.
  for (std::size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    const std::size_t pos = bytes.size() - back;
    if (is_continuation(static_cast<unsigned char>(bytes[pos]))) continue;
    const SequenceScan scan = scan_sequence(bytes, pos);
    return scan.ran_out ? back : 0;
  }
  return 0;
}

bool is_whitespace(char32_t c) {
  // Rust's char::is_whitespace is the White_Space property: these ranges, nothing else.
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_numeric(char32_t c) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
}

bool is_word_character(char32_t c) {
  if (c == '_' || c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

void append_lowercase(std::string& out, char32_t c) {
  // The one unconditional multi-character lowercase mapping in SpecialCasing.txt.
  if (c == 0x130) {
    out.append("i\xCC\x87");
    return;
  }
  append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

}  // namespace bifocal::tokenizer
