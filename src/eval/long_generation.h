// Long-generation tasks: problems with a checkable final answer, where the model writes a
// solution of its own length — the regime where a fixed memory budget is tested hardest
// (DESIGN.md: Bifocal against SWA on AIME/HMMT answers of ~7,600 tokens).
//
//   gsm8k               DATA/gsm8k/test.jsonl, {"question", "answer": "… #### N"}; zero-shot,
//                       "Question: …\nAnswer:" (lm-evaluation-harness's GSM8K layout), stops at
//                       the next "Question:".
//   aime24, aime25,     DATA/math_competitions/{aime_2024,aime_2025,hmmt_feb_2025}.jsonl,
//   hmmt_feb25          {"id", "problem", "answer"}; the problem, then matharena's instruction to
//                       reason step by step and put the final answer in \boxed{} (AIME adds that
//                       the answer is an integer from 0 to 999).
//   testbed_arithmetic  the testbed's own multi-step arithmetic (testbed_arithmetic.h), made
//                       from the run's seed; options problems=N (default 100), chars=N (prompt
//                       size in bytes, default 2000).
//
// Options of every task: samples=K (default: the run's --samples), max_tokens=N (default: the
// run's max_new_tokens). Each item is sampled K times with the run's temperature / top-k /
// top-p and a seed derived from (run seed, item id, sample index) — identical for every mixer.
// With greedy decoding (temperature <= 0) the K samples would be identical, so one is made.
// Per item: metrics pass@1 (share of correct samples) and truncated (share that hit max_tokens);
// group {"answer_length": median tokens over the samples}; details {"reference", "samples":
// [{"text", "extracted", "source", "correct", "length", "stop_reason"}]}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_task.h"

namespace bifocal::eval {

// One problem: a stable id, the prompt as the model sees it (template applied), the reference.
struct GenerationProblem {
  std::string id;
  std::string prompt;
  std::string answer;
};

// The prompt templates.
std::string gsm8k_prompt(std::string_view question);
// `integer_answer`: add the AIME note that the answer is an integer between 0 and 999.
std::string math_competition_prompt(std::string_view problem, bool integer_answer);

// GSM8K's reference answer: the number after "####" in a worked solution, thousands commas
// removed ("#### 1,450,000" → "1450000"); an error naming `where` when there is none.
std::string gsm8k_reference_answer(std::string_view solution, const std::string& where);

// Readers; ids are "gsm8k-<line index>" and the competitions' own ids. Errors name the file and
// line (unreadable file, bad JSON, a missing or non-string field, a solution without "####").
std::vector<GenerationProblem> read_gsm8k(const std::filesystem::path& file);
std::vector<GenerationProblem> read_math_competition(const std::filesystem::path& file, bool integer_answer);

// The sampling seed of sample `sample` of item `item_id` in a run seeded `run_seed`:
// splitmix64(splitmix64(run_seed XOR fnv1a(item_id)) + sample). Depends on nothing else, so
// every mixer, shard and resumed run draws the same seeds.
std::uint64_t sample_seed(std::uint64_t run_seed, std::string_view item_id, int sample);

// The median (mean of the two middle values for an even count); NaN for no values.
double median(std::vector<double> values);

// What one sample produced.
struct GeneratedSample {
  std::string text;
  std::int64_t length = 0;  // generated tokens (EOS excluded, a stop string's tokens included)
  std::string stop_reason;  // "eos", "stop string", "max tokens"
};

// Scores the samples of one item against `reference` (answer_extraction.h): the metrics, group
// and details described at the top of this file. At least one sample.
ItemResult score_samples(const std::vector<GeneratedSample>& samples, std::string_view reference);

// gsm8k, aime24, aime25, hmmt_feb25, testbed_arithmetic with the options above; unknown
// names and options, bad values and missing data files are errors that say which.
std::unique_ptr<Task> make_long_generation_task(TaskSpec spec, const TaskContext& context);

}  // namespace bifocal::eval
