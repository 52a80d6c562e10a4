// UTF-8 coding and the few Unicode character properties that HF tokenizers' Rust code relies on
// (char::is_whitespace, char::is_numeric, char::to_lowercase, regex's \w), so every component
// answers these questions the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bifocal::tokenizer {

// Decodes the code point that starts at `pos` of valid UTF-8 and advances `pos` past it.
char32_t next_code_point(std::string_view text, std::size_t& pos);
// Byte length of the UTF-8 character whose first byte is `lead` (1 for a stray byte).
std::size_t utf8_length(unsigned char lead);
void append_utf8(std::string& out, char32_t code_point);
std::string utf8_encode(char32_t code_point);

bool is_valid_utf8(std::string_view bytes);
// Rust's String::from_utf8_lossy: each maximal ill-formed subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// Length of a trailing sequence that is a valid but unfinished UTF-8 character (0 when the bytes
// end on a character boundary or in an error that no later byte can repair).
std::size_t unfinished_utf8_tail(std::string_view bytes);

bool is_whitespace(char32_t c);     // Rust char::is_whitespace (the Unicode White_Space property)
bool is_numeric(char32_t c);        // Rust char::is_numeric (categories Nd, Nl, No)
bool is_word_character(char32_t c); // regex-syntax's \w: letters, marks, Nd, Nl, Pc, ZWJ/ZWNJ
// Rust char::to_lowercase, appended to `out` (U+0130 lowercases to two code points).
void append_lowercase(std::string& out, char32_t c);

}  // namespace bifocal::tokenizer
