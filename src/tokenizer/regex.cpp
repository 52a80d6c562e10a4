#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "bifocal/error.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int length = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return length < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buffer), length);
}

// One JIT stack and match context per thread: pcre2_code is shareable between threads, the
// stack is not. Long whitespace runs under `\s+(?!\S)` need more than the 32 KiB default.
struct ThreadMatchResources {
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  ThreadMatchResources() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadMatchResources() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
  }
  ThreadMatchResources(const ThreadMatchResources&) = delete;
  ThreadMatchResources& operator=(const ThreadMatchResources&) = delete;
};

ThreadMatchResources& thread_match_resources() {
  thread_local ThreadMatchResources resources;
  return resources;
}

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto compiled = std::make_shared<Code>();
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                 &error_code, &error_offset, nullptr);
  if (compiled->code == nullptr)
    throw std::invalid_argument(pcre2_message(error_code) + " at offset " + std::to_string(error_offset));
  // JIT is only a speed-up: when it is unavailable pcre2_match interprets the pattern.
  pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
  code_ = std::move(compiled);
}

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  MatchData match(code_->code);
  pcre2_match_context* context = thread_match_resources().context;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t search_from = 0;
  bool matched_before = false;
  std::size_t last_match_end = 0;
  while (search_from <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, match.data, context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("tokenizer regex", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
    const std::size_t begin = ovector[0], end = ovector[1];
    // The onig crate's FindMatches: an empty match where the last one ended is dropped and the
    // search moves on by one character.
    if (begin == end && matched_before && last_match_end == end) {
      if (search_from >= text.size()) break;
      search_from += utf8_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    matches.emplace_back(begin, end);
    search_from = end;
    last_match_end = end;
    matched_before = true;
  }
  return matches;
}

}  // namespace bifocal::tokenizer
