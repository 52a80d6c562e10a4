// Haystacks for the long-context retrieval tasks (S-NIAH, BABILong): filler text cut into
// sentences, a few texts (needles, bAbI facts) put between sentences at chosen depths, and the
// whole prompt grown until the model's own tokenizer counts exactly the requested number of
// tokens. RULER sizes its inputs with the evaluated model's tokenizer too, to "as long as fits";
// an exact count makes a context length in a report mean the same number of tokens for every
// item.
//
// Filler is either the noise of the passkey-retrieval test (Mohtashami and Jaggi, "Landmark
// Attention", 2023), which RULER's niah_single_1 repeats, or essay text (the Paul Graham essays
// that RULER's and Kamradt's needle tests use, ../shared/data/pg_essays), repeated from its start
// when a context needs more text than there is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bifocal {
class Tokenizer;
}

namespace bifocal::eval {

// Every run of whitespace (spaces, tabs, newlines) replaced by one space, the ends trimmed: the
// essays' line breaks fall in the middle of paragraphs, and RULER joins its filler words with
// single spaces too.
std::string collapse_whitespace(std::string_view text);

// Sentences of whitespace-collapsed text: a sentence ends after '.', '!' or '?' (and any closing
// quotes or brackets right after it) where a space follows. Abbreviations ("e.g. x") split too,
// which only adds insertion points. No sentence is empty; none has surrounding spaces.
std::vector<std::string> split_sentences(std::string_view text);

// The five noise sentences of the passkey-retrieval test ("The grass is green. …"), repeated in
// this order to make niah_single_1's haystack.
const std::vector<std::string>& noise_sentences();

// The sentences of every essay (*.txt) in `folder`, each file whitespace-collapsed, the files in
// sorted name order (the data folder's PROVENANCE.md suggests it; a directory listing's order
// would differ between machines). Errors name the folder when it is missing or holds no .txt.
std::vector<std::string> read_essay_sentences(const std::filesystem::path& folder);

// Where filler comes from: `sentences` taken cyclically from index `first` (so any length can be
// filled, repeating the text as RULER does when its essays run out).
struct Filler {
  std::vector<std::string> sentences;
  std::size_t first = 0;
};

// A text put into the haystack between filler sentences: with n whole filler sentences in the
// haystack, it goes after the first floor(depth × n) of them (depth 0: before all, 1: after all),
// as RULER places needles by depth percent. Insertions at the same boundary keep their order.
struct Insertion {
  double depth = 0;
  std::string text;
};

// Turns the haystack text into the full prompt (instructions, question …) whose tokens count.
using PromptRenderer = std::function<std::string(const std::string& haystack)>;

struct Haystack {
  std::string haystack;                 // the filler with the insertions, sentences joined by spaces
  std::string prompt;                   // render(haystack)
  std::int64_t tokens = 0;              // tokens of `prompt` (the requested count when filled)
  std::size_t filler_sentences = 0;     // whole filler sentences (a cut-off last one not counted)
  std::vector<std::size_t> boundaries;  // per insertion: the whole filler sentences before it
  std::size_t filler_first = 0;         // the filler sentence the haystack starts with
};

// The haystack with no filler at all: the insertions alone, joined by spaces.
Haystack haystack_without_filler(const Tokenizer& tokenizer, const std::vector<Insertion>& insertions,
                                 const PromptRenderer& render, bool add_special_tokens);

// Grows the filler (whole words, then the characters of one last word) until
// tokenizer.encode(render(haystack), add_special_tokens) has exactly `target_tokens` ids, so the
// haystack may end in a cut-off word. Token counts of BPE text are not monotone in its length
// (a word's prefix can take more tokens than the word; a final '.' can merge with the newline
// after it), so the search brackets the target between two word ends, then tries the cuts of the
// last few words. Some counts no cut of a given filler reaches (with the noise filler, about one
// target in 25: a whole sentence there costs two tokens more than the text one word shorter); the
// filler then starts one sentence later and the search runs again (Haystack::filler_first says
// where it started). Errors name `where` (the task): the target is smaller than the prompt
// without filler, or no start tried gives the exact count.
Haystack fill_to_length(const Tokenizer& tokenizer, const Filler& filler, const std::vector<Insertion>& insertions,
                        std::int64_t target_tokens, const PromptRenderer& render, bool add_special_tokens,
                        const std::string& where);

// The options every haystack task takes. `lengths=512,1024,…`: context lengths in tokens, each
// at least `minimum`, no repeats, kept in the order given; `samples=N`: items per length, N >= 1.
// Errors name `where` (the task) and the bad value.
std::vector<std::int64_t> parse_context_lengths(const std::string& text, const std::string& where,
                                                std::int64_t minimum);
int parse_sample_count(const std::string& text, const std::string& where);
// "512,1024": the canonical form of a lengths list, for task names.
std::string format_context_lengths(const std::vector<std::int64_t>& lengths);

}  // namespace bifocal::eval
