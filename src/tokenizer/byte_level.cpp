#include "tokenizer/byte_level.h"

#include <vector>

#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

namespace {

// GPT-2's bytes_to_unicode: bytes that are printable Latin-1 characters ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 bytes take code points 256, 257, ... in byte order.
struct ByteAlphabet {
  std::array<char32_t, 256> character{};
  std::array<std::string, 256> utf8{};
  std::vector<std::int16_t> byte_of;  // indexed by code point < 512; -1 when not in the alphabet

  ByteAlphabet() : byte_of(512, -1) {
    auto stands_for_itself = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      character[b] = stands_for_itself(b) ? char32_t(b) : next_extra++;
      utf8[b] = utf8_encode(character[b]);
      byte_of[character[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

}  // namespace

std::string bytes_to_alphabet(std::string_view bytes) {
  const ByteAlphabet& table = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes) out.append(table.utf8[static_cast<std::uint8_t>(byte)]);
  return out;
}

std::optional<std::uint8_t> alphabet_to_byte(char32_t c) {
  if (c >= 512) return std::nullopt;
  const std::int16_t byte = alphabet().byte_of[c];
  if (byte < 0) return std::nullopt;
  return static_cast<std::uint8_t>(byte);
}

std::string token_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t pos = 0; pos < token.size();) {
    const auto byte = alphabet_to_byte(next_code_point(token, pos));
    if (!byte) return std::string(token);
    bytes.push_back(static_cast<char>(*byte));
  }
  return bytes;
}

}  // namespace bifocal::tokenizer
