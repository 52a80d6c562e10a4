#include "eval/mc_datasets.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bifocal/error.h"
#include "eval/bzip2_file.h"
#include "eval/csv_records.h"
#include "eval/jsonl_records.h"
#include "io/json_file.h"

namespace bifocal::eval {

namespace {

// A data file a task needs; when it is missing the error names the path expected under
// --data-dir and what should be there (ARC and WinoGrande are not in ../shared/data).
std::filesystem::path require_data_file(const std::filesystem::path& data_dir, const std::filesystem::path& relative,
                                        const std::string& task, const std::string& what) {
  const auto path = data_dir / relative;
  if (!std::filesystem::is_regular_file(path))
    fail(path.string(), "file not found: the " + task + " task reads " + what + " from '" + relative.string() +
                            "' under --data-dir (" + data_dir.string() + ")");
  return path;
}

std::string read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Python's str.strip() for the ASCII whitespace that occurs in these datasets.
std::string strip(std::string_view text) {
  constexpr std::string_view kWhitespace = " \t\n\r\v\f";
  const std::size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return std::string(text.substr(begin, text.find_last_not_of(kWhitespace) - begin + 1));
}

// Every non-overlapping occurrence, left to right (Python's str.replace).
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t begin = 0;
  for (std::size_t at; (at = text.find(from, begin)) != std::string_view::npos; begin = at + from.size())
    out.append(text.substr(begin, at - begin)).append(to);
  return out.append(text.substr(begin));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    begin = end + 1;
  }
  return lines;
}

}  // namespace

// ---- MMLU --------------------------------------------------------------------------------

std::vector<MmluRow> read_mmlu_csv(const std::filesystem::path& file) {
  const auto records = parse_csv(read_text_file(file), file.string());
  const std::vector<std::string> header{"question", "choice0", "choice1", "choice2", "choice3", "answer"};
  if (records.empty() || records.front().fields != header)
    fail(file.string() + ":1", "expected the header 'question,choice0,choice1,choice2,choice3,answer'");
  std::vector<MmluRow> rows;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& record = records[r];
    const std::string where = file.string() + ":" + std::to_string(record.line);
    if (record.fields.size() != header.size())
      fail(where, "expected 6 fields, got " + std::to_string(record.fields.size()));
    const std::string& answer = record.fields[5];
    if (answer.size() != 1 || answer[0] < '0' || answer[0] > '3')
      fail(where, "answer must be 0, 1, 2 or 3, got '" + answer + "'");
    rows.push_back({.question = record.fields[0],
                    .choices = {record.fields.begin() + 1, record.fields.begin() + 5},
                    .answer = answer[0] - '0'});
  }
  return rows;
}

std::string mmlu_question_text(const MmluRow& row) {
  std::string text = strip(row.question);
  for (std::size_t i = 0; i < row.choices.size(); ++i) text += "\n" + std::string(1, char('A' + i)) + ". " + row.choices[i];
  return text + "\nAnswer:";
}

MultipleChoiceQuestion mmlu_question(const MmluRow& row, std::span<const MmluRow> examples, const std::string& subject) {
  // lm-evaluation-harness's MMLU: a description naming the subject, the few-shot examples each
  // answered by its letter after the target delimiter (a space), joined by blank lines.
  std::string prompt =
      "The following are multiple choice questions (with answers) about " + replace_all(subject, "_", " ") + ".\n\n";
  for (const MmluRow& example : examples)
    prompt += mmlu_question_text(example) + " " + std::string(1, char('A' + example.answer)) + "\n\n";
  prompt += mmlu_question_text(row);
  return shared_context_question(std::move(prompt), {"A", "B", "C", "D"}, row.answer);
}

std::vector<ChoiceItem> load_mmlu(const std::filesystem::path& data_dir, const std::vector<std::string>& subjects,
                                  int shots) {
  const std::filesystem::path test_dir = data_dir / "mmlu" / "test";
  if (!std::filesystem::is_directory(test_dir))
    fail(test_dir.string(), "folder not found: the mmlu task reads mmlu/test/SUBJECT_test.csv and "
                            "mmlu/dev/SUBJECT_dev.csv under --data-dir (" + data_dir.string() + ")");
  std::vector<std::string> chosen = subjects;
  if (chosen.empty()) {
    const std::string suffix = "_test.csv";
    for (const auto& entry : std::filesystem::directory_iterator(test_dir)) {
      const std::string file = entry.path().filename().string();
      if (file.size() > suffix.size() && file.ends_with(suffix))
        chosen.push_back(file.substr(0, file.size() - suffix.size()));
    }
    std::ranges::sort(chosen);
    if (chosen.empty()) fail(test_dir.string(), "no SUBJECT_test.csv files");
  }
  std::vector<ChoiceItem> items;
  for (const std::string& subject : chosen) {
    const auto test_file = require_data_file(data_dir, std::filesystem::path("mmlu") / "test" / (subject + "_test.csv"),
                                             "mmlu", "subject '" + subject + "'");
    const auto dev_file = require_data_file(data_dir, std::filesystem::path("mmlu") / "dev" / (subject + "_dev.csv"),
                                            "mmlu", "the few-shot examples of '" + subject + "'");
    const auto examples = read_mmlu_csv(dev_file);
    if (examples.size() < std::size_t(shots))
      fail(dev_file.string(), "has " + std::to_string(examples.size()) + " rows, fewer than the " +
                                  std::to_string(shots) + " examples asked for");
    const auto shown = std::span<const MmluRow>(examples).first(std::size_t(shots));
    const auto rows = read_mmlu_csv(test_file);
    for (std::size_t i = 0; i < rows.size(); ++i)
      items.push_back({.id = subject + "/" + std::to_string(i),
                       .question = mmlu_question(rows[i], shown, subject),
                       .group = {{"subject", subject}}});
  }
  return items;
}

// ---- HellaSwag ---------------------------------------------------------------------------

std::vector<HellaswagRecord> parse_hellaswag_text(const std::string& text, const std::string& where) {
  const auto lines = split_lines(text);
  if (lines.size() % 6 != 0)
    fail(where, std::to_string(lines.size()) + " lines, not six per item (context, label, four endings)");
  std::vector<HellaswagRecord> records;
  for (std::size_t first = 0; first < lines.size(); first += 6) {
    const std::string& label = lines[first + 1];
    if (label.size() != 1 || label[0] < '0' || label[0] > '3')
      fail(where + ":" + std::to_string(first + 2), "expected the gold ending's index (0 to 3), got '" + label + "'");
    records.push_back({.context = lines[first],
                       .endings = {lines.begin() + std::ptrdiff_t(first) + 2, lines.begin() + std::ptrdiff_t(first) + 6},
                       .label = label[0] - '0'});
  }
  return records;
}

std::string hellaswag_preprocess(const std::string& text) {
  std::string titled = replace_all(strip(text), " [title]", ". ");
  // Drop every bracketed span, each '[' to the first ']' after it (a non-greedy match).
  std::string unbracketed;
  for (std::size_t i = 0; i < titled.size(); ++i) {
    if (titled[i] == '[') {
      const std::size_t close = titled.find(']', i + 1);
      if (close != std::string::npos) {
        i = close;
        continue;
      }
    }
    unbracketed += titled[i];
  }
  return replace_all(unbracketed, "  ", " ");
}

MultipleChoiceQuestion hellaswag_question(const HellaswagRecord& record) {
  // lm-evaluation-harness capitalizes the first letter of ctx_b before joining; the text
  // rendering has lost the ctx_a/ctx_b split, so the context is taken as written.
  std::vector<std::string> endings;
  for (const auto& ending : record.endings) endings.push_back(hellaswag_preprocess(ending));
  return shared_context_question(hellaswag_preprocess(record.context), endings, record.label);
}

std::vector<ChoiceItem> load_hellaswag(const std::filesystem::path& data_dir) {
  const auto plain = data_dir / "hellaswag" / "hellaswag_val_full.txt";
  const auto compressed = data_dir / "hellaswag" / "hellaswag_val_full.txt.bz2";
  std::string text;
  std::string where;
  if (std::filesystem::is_regular_file(plain)) {
    text = read_text_file(plain);
    where = plain.string();
  } else if (std::filesystem::is_regular_file(compressed)) {
    text = read_bzip2_file(compressed);
    where = compressed.string();
  } else {
    fail(compressed.string(), "file not found: the hellaswag task reads the validation set's six-line text "
                              "rendering from 'hellaswag/hellaswag_val_full.txt.bz2' (or the decompressed "
                              "'hellaswag_val_full.txt') under --data-dir (" + data_dir.string() + ")");
  }
  std::vector<ChoiceItem> items;
  const auto records = parse_hellaswag_text(text, where);
  for (std::size_t i = 0; i < records.size(); ++i)
    items.push_back({.id = std::to_string(i), .question = hellaswag_question(records[i])});
  return items;
}

// ---- PIQA --------------------------------------------------------------------------------

MultipleChoiceQuestion piqa_question(const std::string& goal, const std::string& sol1, const std::string& sol2, int label) {
  return shared_context_question("Question: " + goal + "\nAnswer:", {sol1, sol2}, label);
}

std::vector<ChoiceItem> load_piqa(const std::filesystem::path& data_dir) {
  const auto questions_file = require_data_file(data_dir, "piqa/valid.jsonl", "piqa", "the validation questions");
  const auto labels_file = require_data_file(data_dir, "piqa/valid-labels.lst", "piqa", "the validation labels");
  const auto records = read_jsonl_records(questions_file);
  auto labels = split_lines(read_text_file(labels_file));
  if (labels.size() != records.size())
    fail(labels_file.string(), std::to_string(labels.size()) + " labels for " + std::to_string(records.size()) +
                                   " questions in " + questions_file.string());
  std::vector<ChoiceItem> items;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const JsonlRecord& record = records[i];
    if (labels[i] != "0" && labels[i] != "1")
      fail(labels_file.string() + ":" + std::to_string(i + 1), "expected 0 or 1, got '" + labels[i] + "'");
    items.push_back({.id = std::to_string(i),
                     .question = piqa_question(json_get<std::string>(record.value, "goal", record.where),
                                               json_get<std::string>(record.value, "sol1", record.where),
                                               json_get<std::string>(record.value, "sol2", record.where),
                                               labels[i][0] - '0')});
  }
  return items;
}

// ---- ARC ---------------------------------------------------------------------------------

MultipleChoiceQuestion arc_question(const std::string& question, const std::vector<std::string>& choices, int gold) {
  return shared_context_question("Question: " + question + "\nAnswer:", choices, gold);
}

namespace {

// One ARC record in either layout (AI2's nested one or the Hugging Face flattening).
ChoiceItem arc_item(const JsonlRecord& record) {
  const nlohmann::json& value = record.value;
  const std::string& where = record.where;
  std::string stem;
  std::vector<std::string> texts, labels;
  const auto question = json_get<nlohmann::json>(value, "question", where);
  if (question.is_object()) {  // AI2: {"stem", "choices": [{"text", "label"}, ...]}
    stem = json_get<std::string>(question, "stem", where);
    const auto choices = json_get<nlohmann::json>(question, "choices", where);
    if (!choices.is_array()) fail(where, "'question.choices' must be an array");
    for (const auto& choice : choices) {
      texts.push_back(json_get<std::string>(choice, "text", where));
      labels.push_back(json_get<std::string>(choice, "label", where));
    }
  } else if (question.is_string()) {  // Hugging Face: "question", "choices": {"text": [...], "label": [...]}
    stem = question.get<std::string>();
    const auto choices = json_get<nlohmann::json>(value, "choices", where);
    try {
      texts = json_get<nlohmann::json>(choices, "text", where).get<std::vector<std::string>>();
      labels = json_get<nlohmann::json>(choices, "label", where).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      fail(where, "'choices.text' and 'choices.label' must be arrays of strings");
    }
    if (texts.size() != labels.size()) fail(where, "'choices.text' and 'choices.label' differ in length");
  } else {
    fail(where, "'question' must be an object (AI2's layout) or a string (Hugging Face's)");
  }
  const auto answer_key = json_get<std::string>(value, "answerKey", where);
  const auto gold = std::ranges::find(labels, answer_key);
  if (gold == labels.end()) fail(where, "answerKey '" + answer_key + "' is not one of the choices' labels");
  ChoiceItem item{.id = json_get<std::string>(value, "id", where),
                  .question = arc_question(stem, texts, int(gold - labels.begin()))};
  item.question.validate(where);
  return item;
}

}  // namespace

std::vector<ChoiceItem> load_arc(const std::filesystem::path& data_dir, bool challenge) {
  const std::string split = challenge ? "ARC-Challenge" : "ARC-Easy";
  const auto file = require_data_file(data_dir, "arc/" + split + "-Test.jsonl", challenge ? "arc_challenge" : "arc_easy",
                                      "the " + split + " test split (AI2's ARC-V1-Feb2018 " + split + "-Test.jsonl)");
  std::vector<ChoiceItem> items;
  for (const JsonlRecord& record : read_jsonl_records(file)) items.push_back(arc_item(record));
  return items;
}

// ---- WinoGrande --------------------------------------------------------------------------

MultipleChoiceQuestion winogrande_question(const std::string& sentence, const std::string& option1,
                                           const std::string& option2, int answer_index, const std::string& where) {
  const std::size_t blank = sentence.find('_');
  if (blank == std::string::npos) fail(where, "the sentence has no blank '_'");
  const std::string before = sentence.substr(0, blank);
  MultipleChoiceQuestion question;
  question.contexts = {before + option1, before + option2};
  question.continuations = {" " + strip(sentence.substr(blank + 1))};
  question.choice_texts = question.contexts;
  question.gold = answer_index;
  question.validate(where);
  return question;
}

std::vector<ChoiceItem> load_winogrande(const std::filesystem::path& data_dir) {
  const auto file = require_data_file(data_dir, "winogrande/dev.jsonl", "winogrande",
                                      "the validation split (winogrande_1.1 dev.jsonl)");
  std::vector<ChoiceItem> items;
  for (const JsonlRecord& record : read_jsonl_records(file)) {
    const auto& value = record.value;
    // The release writes the answer as the string "1" or "2"; accept the number too.
    const auto answer = json_get<nlohmann::json>(value, "answer", record.where);
    const std::string answer_text = answer.is_string() ? answer.get<std::string>() : answer.dump();
    if (answer_text != "1" && answer_text != "2") fail(record.where, "answer must be \"1\" or \"2\", got " + answer.dump());
    items.push_back({.id = json_get<std::string>(value, "qID", record.where),
                     .question = winogrande_question(json_get<std::string>(value, "sentence", record.where),
                                                     json_get<std::string>(value, "option1", record.where),
                                                     json_get<std::string>(value, "option2", record.where),
                                                     answer_text == "1" ? 0 : 1, record.where)});
  }
  return items;
}

}  // namespace bifocal::eval
