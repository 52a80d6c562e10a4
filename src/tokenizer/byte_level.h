// GPT-2's byte-level alphabet: every byte is shown as one printable character, so byte-level BPE
// vocabularies never contain raw whitespace, control bytes or partial UTF-8.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bifocal::tokenizer {

// Text with each byte replaced by its alphabet character (ByteLevel pre-tokenizer).
std::string bytes_to_alphabet(std::string_view bytes);
// The byte an alphabet character stands for, or nothing for any other character.
std::optional<std::uint8_t> alphabet_to_byte(char32_t c);

// The ByteLevel decoder on one token: its alphabet characters turned back into bytes, or the
// token's own UTF-8 when it holds a character outside the alphabet (an added token such as
// "<|im_start|>" or one with spaces is kept as written).
std::string token_bytes(std::string_view token);

}  // namespace bifocal::tokenizer
