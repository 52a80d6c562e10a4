// BABILong QA1–QA5 (Kuratov et al., "BABILong: Testing the Limits of LLMs with Long Context
// Reasoning-in-a-Haystack", 2024): a bAbI question (Weston et al., 2015) whose story facts are
// scattered, in their original order, over long background text, with the question after it.
//
// Items. Every question of a bAbI test file is one sample, its facts being all the story's
// statements before it (as BABILong builds its samples); the first `samples` of them are used at
// every length, so lengths compare the same questions. At length 0 the context is the facts
// alone; at length L > 0 each fact goes to a random sentence boundary of essay background text
// (the facts' depths drawn uniformly and sorted, so their order is kept) and the background is
// grown until the context has exactly L tokens with the evaluated model's tokenizer (BABILong
// measures its lengths on the context, facts and background together). A story whose facts alone
// are longer than L is given as the facts alone. BABILong's background is PG19 books; bifocal uses
// the essays of ../shared/data/pg_essays, starting at a random sentence of them.
//
// Prompt, in BABILong's layout (the wording is bifocal's own): the task's instruction, one worked
// example inside <example> tags, the answer format, the context between <context> tags, then
// "Question: …" last, and an "Answer:" cue for base models.
//
// Scoring, as BABILong's: only the first sentence of the output counts (up to the first '.', and
// before any "<context>", "<example>" or "question" the model goes on to write), ignoring case;
// the answer is correct when the expected label appears there and no other label of the task
// does. Labels that the question itself names (qa4's reference place, qa5's giver or receiver)
// do not count against the output, since repeating the question is no mistake.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_task.h"

namespace bifocal::eval {

struct BabiSample {
  std::vector<std::string> facts;  // the story's statements before the question, in order
  std::string question;
  std::string answer;              // one word
};

// The samples of a bAbI file's text (lines "ID sentence", questions "ID question<TAB>answer<TAB>
// supporting IDs"; a story starts again where ID 1 comes back). `where` (the file) names the
// line in errors: a line without an ID, a question without an answer, a file without questions.
std::vector<BabiSample> parse_babi(std::string_view text, const std::string& where);

// DATA_DIR/babi/en-10k/qaN_<name>_test.txt for N = 1…5, read and parsed; a missing file is an
// error naming the path expected.
std::filesystem::path babi_test_file(const std::filesystem::path& data_dir, int task);
std::vector<BabiSample> read_babi_test(const std::filesystem::path& data_dir, int task);

// The answers task N can have, from the bAbI data (every answer of the QA1–QA5 test and train
// files): the six rooms for qa1–qa4; the four people and three objects for qa5.
const std::vector<std::string>& babilong_labels(int task);

// The scoring rule above.
bool babilong_answer_correct(std::string_view output, std::string_view answer, std::string_view question,
                             const std::vector<std::string>& labels);

// The whole prompt of task N for a context (facts and background) and a question.
std::string babilong_prompt(int task, std::string_view context, std::string_view question);

// Tasks babilong_qa1 … babilong_qa5. Options: lengths=0,1024,2048,4096 (the default; 0 is the
// facts alone), samples=N questions (default 100, the size of BABILong's released test sets; fewer
// when the file has fewer). Reads the task's bAbI test file and, for a length above 0,
// DATA_DIR/pg_essays/*.txt; missing files are errors that name them. Items are ordered question
// first, then length, so `--limit` keeps every length.
std::unique_ptr<Task> make_babilong_task(TaskSpec spec, const TaskContext& context);

}  // namespace bifocal::eval
