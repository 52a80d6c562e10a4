// The public multiple-choice datasets (issue 6): each one's loader, reading the layout of
// ../shared/data (every folder's PROVENANCE.md gives the record format) under --data-dir, and
// its prompt format as lm-evaluation-harness writes it, so that scores compare with published
// ones. Missing files are errors that name the file expected under the data directory.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "eval/multiple_choice.h"

namespace bifocal::eval {

// ---- MMLU (Hendrycks et al.): mmlu/{dev,test}/SUBJECT_{dev,test}.csv, columns question,
// choice0..choice3, answer (0-3).
struct MmluRow {
  std::string question;
  std::vector<std::string> choices;  // four, in A-D order
  int answer = 0;
};
std::vector<MmluRow> read_mmlu_csv(const std::filesystem::path& file);
// "QUESTION\nA. c0\nB. c1\nC. c2\nD. c3\nAnswer:" (the question stripped of surrounding whitespace).
std::string mmlu_question_text(const MmluRow& row);
// The header "The following are multiple choice questions (with answers) about SUBJECT.\n\n"
// (underscores of the subject read as spaces), the examples each followed by " LETTER\n\n",
// then the question; the choices are scored as " A" … " D".
MultipleChoiceQuestion mmlu_question(const MmluRow& row, std::span<const MmluRow> examples, const std::string& subject);
// The subjects that have a test file, sorted; `subjects` (empty: all) picks some of them.
// Each subject's first `shots` dev rows are its examples.
std::vector<ChoiceItem> load_mmlu(const std::filesystem::path& data_dir, const std::vector<std::string>& subjects,
                                  int shots);

// ---- HellaSwag: hellaswag/hellaswag_val_full.txt (or .txt.bz2), six lines per item: the
// activity label and context, the gold index, the four endings.
struct HellaswagRecord {
  std::string context;  // "<activity label>: <ctx>"
  std::vector<std::string> endings;
  int label = 0;
};
std::vector<HellaswagRecord> parse_hellaswag_text(const std::string& text, const std::string& where);
// lm-evaluation-harness's cleanup of a HellaSwag field: trim, " [title]" → ". ", drop every
// "[...]", then one pass replacing two spaces by one.
std::string hellaswag_preprocess(const std::string& text);
MultipleChoiceQuestion hellaswag_question(const HellaswagRecord& record);
std::vector<ChoiceItem> load_hellaswag(const std::filesystem::path& data_dir);

// ---- PIQA: piqa/valid.jsonl ({goal, sol1, sol2}) with piqa/valid-labels.lst (0 or 1 a line).
// "Question: GOAL\nAnswer:", the two solutions scored after a space.
MultipleChoiceQuestion piqa_question(const std::string& goal, const std::string& sol1, const std::string& sol2, int label);
std::vector<ChoiceItem> load_piqa(const std::filesystem::path& data_dir);

// ---- ARC (AI2 Reasoning Challenge): arc/ARC-Easy-Test.jsonl or arc/ARC-Challenge-Test.jsonl,
// AI2's release format ({"id", "question": {"stem", "choices": [{"text", "label"}]},
// "answerKey"}) or the Hugging Face flattening ({"id", "question", "choices": {"text": [...],
// "label": [...]}, "answerKey"}). "Question: QUESTION\nAnswer:", the choice texts after a space.
MultipleChoiceQuestion arc_question(const std::string& question, const std::vector<std::string>& choices, int gold);
std::vector<ChoiceItem> load_arc(const std::filesystem::path& data_dir, bool challenge);

// ---- WinoGrande: winogrande/dev.jsonl ({"qID", "sentence", "option1", "option2", "answer":
// "1"|"2"}). Partial scoring: the sentence up to the blank with an option substituted is the
// context (one per option); the rest of the sentence after the blank, trimmed and joined by a
// space, is the one continuation scored. acc_norm divides by the length of each context
// (lm-evaluation-harness divides by the choice's text, which here is the context).
MultipleChoiceQuestion winogrande_question(const std::string& sentence, const std::string& option1,
                                           const std::string& option2, int answer_index, const std::string& where);
std::vector<ChoiceItem> load_winogrande(const std::filesystem::path& data_dir);

}  // namespace bifocal::eval
