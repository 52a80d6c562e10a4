#include "eval/haystack.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "bifocal/error.h"
#include "bifocal/tokenizer.h"
#include "core/whole_number.h"

namespace bifocal::eval {

namespace {

bool is_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Closing quotes and brackets that may follow a sentence's final punctuation: ASCII, and the
// UTF-8 right quotes U+2019 and U+201D (E2 80 99, E2 80 9D) that some essays use.
std::size_t closing_marks_length(std::string_view text, std::size_t at) {
  if (at >= text.size()) return 0;
  const char c = text[at];
  if (c == '"' || c == '\'' || c == ')' || c == ']') return 1;
  if (text.substr(at, 3) == "\xE2\x80\x99" || text.substr(at, 3) == "\xE2\x80\x9D") return 3;
  return 0;
}

std::string_view trim_spaces(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The filler as one growing string (sentences joined by single spaces), with the offsets the
// search cuts at: where each sentence starts and ends, and where each word ends.
class FillerStream {
 public:
  FillerStream(const std::vector<std::string>& sentences, std::size_t first) : sentences_(sentences), next_(first) {}

  const std::string& text() const { return text_; }
  // Offsets p such that text[0, p) ends with a whole word; word_ends()[0] == 0, the empty prefix.
  const std::vector<std::size_t>& word_ends() const { return word_ends_; }

  void extend_to(std::size_t chars) {
    while (text_.size() < chars) append_sentence();
  }
  // Makes sure word_ends()[index] exists.
  void extend_to_word(std::size_t index) {
    while (word_ends_.size() <= index) append_sentence();
  }

  // Whole sentences inside text[0, p).
  std::size_t sentences_within(std::size_t p) const {
    return std::size_t(std::upper_bound(ends_.begin(), ends_.end(), p) - ends_.begin());
  }
  // Where the text after the first `boundary` whole sentences starts, inside text[0, p).
  std::size_t boundary_offset(std::size_t boundary, std::size_t p) const {
    return boundary < starts_.size() ? std::min(starts_[boundary], p) : p;
  }

 private:
  void append_sentence() {
    const std::string& sentence = sentences_[next_ % sentences_.size()];
    ++next_;
    if (!text_.empty()) text_ += ' ';
    const std::size_t start = text_.size();
    starts_.push_back(start);
    text_ += sentence;
    for (std::size_t i = 0; i < sentence.size(); ++i)
      if (sentence[i] == ' ') word_ends_.push_back(start + i);
    ends_.push_back(text_.size());
    word_ends_.push_back(text_.size());
  }

  const std::vector<std::string>& sentences_;
  std::size_t next_;
  std::string text_;
  std::vector<std::size_t> starts_, ends_;
  std::vector<std::size_t> word_ends_{0};
};

// The insertions' boundaries for `whole_sentences` filler sentences: floor(depth × n), clamped.
std::vector<std::size_t> insertion_boundaries(const std::vector<Insertion>& insertions, std::size_t whole_sentences) {
  std::vector<std::size_t> boundaries;
  for (const auto& insertion : insertions) {
    const double depth = std::clamp(insertion.depth, 0.0, 1.0);
    boundaries.push_back(std::min(whole_sentences, std::size_t(std::floor(depth * double(whole_sentences)))));
  }
  return boundaries;
}

// Measures prompts made from prefixes of one filler stream.
class HaystackMeasure {
 public:
  HaystackMeasure(const Tokenizer& tokenizer, FillerStream& stream, const std::vector<Insertion>& insertions,
                  const PromptRenderer& render, bool add_special_tokens)
      : tokenizer_(tokenizer),
        stream_(stream),
        insertions_(insertions),
        render_(render),
        add_special_tokens_(add_special_tokens) {}

  // The haystack made of filler text[0, p) and the insertions.
  Haystack at(std::size_t p) const {
    Haystack result;
    result.filler_sentences = stream_.sentences_within(p);
    result.boundaries = insertion_boundaries(insertions_, result.filler_sentences);
    std::vector<std::size_t> order(insertions_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return result.boundaries[a] < result.boundaries[b]; });
    const std::string_view text(stream_.text());
    std::string haystack;
    const auto append = [&](std::string_view piece) {
      piece = trim_spaces(piece);
      if (piece.empty()) return;
      if (!haystack.empty()) haystack += ' ';
      haystack += piece;
    };
    std::size_t previous = 0;
    for (const std::size_t i : order) {
      const std::size_t offset = stream_.boundary_offset(result.boundaries[i], p);
      append(text.substr(previous, offset - previous));
      append(insertions_[i].text);
      previous = offset;
    }
    append(text.substr(previous, p - previous));
    result.haystack = std::move(haystack);
    result.prompt = render_(result.haystack);
    result.tokens = std::int64_t(tokenizer_.encode(result.prompt, add_special_tokens_).size());
    return result;
  }

  std::int64_t tokens_at(std::size_t p) const { return at(p).tokens; }

 private:
  const Tokenizer& tokenizer_;
  FillerStream& stream_;
  const std::vector<Insertion>& insertions_;
  const PromptRenderer& render_;
  bool add_special_tokens_;
};

// One attempt with the filler starting at sentence `first`: the haystack of exactly `target`
// tokens, or nothing when no cut near the target gives that count.
std::optional<Haystack> fill_from(const Tokenizer& tokenizer, const std::vector<std::string>& sentences,
                                  std::size_t first, const std::vector<Insertion>& insertions, std::int64_t target,
                                  const PromptRenderer& render, bool add_special_tokens, std::int64_t empty_tokens) {
  FillerStream stream(sentences, first);
  const HaystackMeasure measure(tokenizer, stream, insertions, render, add_special_tokens);
  const auto& ends = stream.word_ends();

  // Bracket the target between two word ends: tokens(lo) <= target < tokens(hi). The first
  // guesses extrapolate from the characters per token seen so far (4 to start with).
  std::size_t lo = 0, hi = 0;
  std::int64_t lo_tokens = empty_tokens, hi_tokens = 0;
  for (;;) {
    const double chars_per_token =
        lo > 0 && lo_tokens > empty_tokens ? double(ends[lo]) / double(lo_tokens - empty_tokens) : 4.0;
    const auto wanted_chars = std::size_t(double(ends[lo]) + double(target - lo_tokens) * chars_per_token * 1.1 + 16);
    stream.extend_to(wanted_chars + 1);
    const auto first_after = std::size_t(std::lower_bound(ends.begin(), ends.end(), wanted_chars) - ends.begin());
    const std::size_t guess = std::max(first_after, lo + 1);
    stream.extend_to_word(guess);
    const std::int64_t tokens = measure.tokens_at(ends[guess]);
    if (tokens > target) {
      hi = guess;
      hi_tokens = tokens;
      break;
    }
    lo = guess;
    lo_tokens = tokens;
  }
  // Interpolate between the brackets (token counts grow nearly linearly with the words), falling
  // back to halving whenever an interpolated step fails to halve the interval.
  bool bisect = false;
  while (hi - lo > 1) {
    std::size_t mid = lo + (hi - lo) / 2;
    if (!bisect) {
      const double share = double(target - lo_tokens) / double(hi_tokens - lo_tokens);
      mid = std::clamp(lo + std::size_t(std::llround(share * double(hi - lo))), lo + 1, hi - 1);
    }
    const std::size_t width = hi - lo;
    const std::int64_t tokens = measure.tokens_at(ends[mid]);
    if (tokens <= target) {
      lo = mid;
      lo_tokens = tokens;
    } else {
      hi = mid;
      hi_tokens = tokens;
    }
    bisect = !bisect && (hi - lo) * 2 > width;
  }
  if (lo_tokens == target) return measure.at(ends[lo]);

  // The last word, a character at a time: prefixes of the word after `lo` (without a trailing
  // space, and never inside a UTF-8 sequence), searched for the one with the exact count.
  const std::string& text = stream.text();
  const std::size_t word_start = ends[lo] == 0 ? 0 : ends[lo] + 1;
  std::vector<std::size_t> cuts;
  for (std::size_t q = word_start + 1; q < ends[hi]; ++q)
    if (!is_utf8_continuation(text[q])) cuts.push_back(q);
  std::size_t below = 0, above = cuts.size();  // cuts[0, below) fit; cuts[above, …) do not
  while (below < above) {
    const std::size_t mid = (below + above) / 2;
    Haystack haystack = measure.at(cuts[mid]);
    if (haystack.tokens == target) return haystack;
    if (haystack.tokens < target)
      below = mid + 1;
    else
      above = mid;
  }
  // Counts inside words are not monotone (a prefix can split into more pieces than the whole
  // word, and a final '.' merges with a newline after the haystack, so a whole sentence can cost
  // no more than its last word), so the search can step over the target. Every cut of the last
  // few words is tried then, the longest first.
  constexpr std::size_t kWordsBack = 4;
  const std::size_t from = ends[lo >= kWordsBack ? lo - kWordsBack : 0];
  for (std::size_t q = ends[hi] - 1; q > from; --q) {
    if (is_utf8_continuation(text[q]) || text[q - 1] == ' ') continue;  // mid-character, or a trailing space
    Haystack haystack = measure.at(q);
    if (haystack.tokens == target) return haystack;
  }
  return std::nullopt;
}

}  // namespace

std::string collapse_whitespace(std::string_view text) {
  std::string collapsed;
  collapsed.reserve(text.size());
  bool pending_space = false;
  for (const char c : text) {
    if (is_whitespace(c)) {
      pending_space = !collapsed.empty();
      continue;
    }
    if (pending_space) collapsed += ' ';
    pending_space = false;
    collapsed += c;
  }
  return collapsed;
}

std::vector<std::string> split_sentences(std::string_view text) {
  std::vector<std::string> sentences;
  std::size_t start = 0;
  const auto emit = [&](std::size_t end) {
    const std::string_view sentence = trim_spaces(text.substr(start, end - start));
    if (!sentence.empty()) sentences.emplace_back(sentence);
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '.' && text[i] != '!' && text[i] != '?') continue;
    std::size_t end = i + 1;
    while (const std::size_t marks = closing_marks_length(text, end)) end += marks;
    if (end < text.size() && text[end] != ' ') continue;
    emit(end);
    start = end;
    i = end;
  }
  if (start < text.size()) emit(text.size());
  return sentences;
}

const std::vector<std::string>& noise_sentences() {
  static const std::vector<std::string> sentences = {"The grass is green.", "The sky is blue.", "The sun is yellow.",
                                                     "Here we go.", "There and back again."};
  return sentences;
}

std::vector<std::string> read_essay_sentences(const std::filesystem::path& folder) {
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error))
    fail(folder.string(), "no such folder: the essays used as filler (pg_essays/*.txt) are expected there");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
  if (files.empty()) fail(folder.string(), "holds no essay (*.txt) to use as filler");
  std::sort(files.begin(), files.end());
  std::vector<std::string> sentences;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(file.string(), "cannot read this essay");
    std::ostringstream text;
    text << in.rdbuf();
    for (auto& sentence : split_sentences(collapse_whitespace(text.str()))) sentences.push_back(std::move(sentence));
  }
  if (sentences.empty()) fail(folder.string(), "the essays hold no text");
  return sentences;
}

Haystack haystack_without_filler(const Tokenizer& tokenizer, const std::vector<Insertion>& insertions,
                                 const PromptRenderer& render, bool add_special_tokens) {
  const std::vector<std::string> nothing = {""};
  FillerStream stream(nothing, 0);
  return HaystackMeasure(tokenizer, stream, insertions, render, add_special_tokens).at(0);
}

Haystack fill_to_length(const Tokenizer& tokenizer, const Filler& filler, const std::vector<Insertion>& insertions,
                        std::int64_t target_tokens, const PromptRenderer& render, bool add_special_tokens,
                        const std::string& where) {
  if (filler.sentences.empty()) fail(where, "no filler text to fill the context with");
  const std::int64_t empty_tokens = haystack_without_filler(tokenizer, insertions, render, add_special_tokens).tokens;
  if (empty_tokens > target_tokens)
    fail(where, "the prompt takes " + std::to_string(empty_tokens) + " tokens without any filler, more than the " +
                    std::to_string(target_tokens) + " requested");
  // Starting the filler one sentence later moves every cut point against the fixed prompt, so
  // a count one start cannot reach, the next one usually does; a few attempts are plenty.
  constexpr int kAttempts = 8;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const std::size_t first = (filler.first + std::size_t(attempt)) % filler.sentences.size();
    if (auto haystack = fill_from(tokenizer, filler.sentences, first, insertions, target_tokens, render,
                                  add_special_tokens, empty_tokens)) {
      haystack->filler_first = first;
      return *std::move(haystack);
    }
  }
  fail(where, "no cut of the filler text gives exactly " + std::to_string(target_tokens) + " tokens");
}

namespace {

// A whole decimal number in [0, 2^53) (exact as a JSON number in the results), or nothing.
std::optional<std::int64_t> parse_count(const std::string& text) {
  const auto value = parse_whole_number(text);
  if (!value || *value >= (std::int64_t(1) << 53)) return std::nullopt;
  return value;
}

}  // namespace

std::vector<std::int64_t> parse_context_lengths(const std::string& text, const std::string& where,
                                                std::int64_t minimum) {
  std::vector<std::int64_t> lengths;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string field = text.substr(begin, end - begin);
    const auto length = parse_count(field);
    if (!length) fail(where, "lengths=" + text + ": '" + field + "' is not a number of tokens");
    if (*length < minimum)
      fail(where, "lengths=" + text + ": " + field + " is below the smallest length, " + std::to_string(minimum));
    if (std::find(lengths.begin(), lengths.end(), *length) != lengths.end())
      fail(where, "lengths=" + text + ": " + field + " is given twice");
    lengths.push_back(*length);
    begin = end + 1;
  }
  return lengths;
}

int parse_sample_count(const std::string& text, const std::string& where) {
  const auto count = parse_count(text);
  if (!count || *count < 1 || *count > 1'000'000) fail(where, "samples=" + text + " is not a number of items >= 1");
  return int(*count);
}

std::string format_context_lengths(const std::vector<std::int64_t>& lengths) {
  std::string text;
  for (const auto length : lengths) text += (text.empty() ? "" : ",") + std::to_string(length);
  return text;
}

}  // namespace bifocal::eval
