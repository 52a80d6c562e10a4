#include "eval/eval_results.h"

#include <cstdio>

#include "bifocal/error.h"

namespace bifocal::eval {

nlohmann::json to_json(const ResultRecord& r) {
  return {{"task", r.task}, {"mixer", r.mixer}, {"id", r.id}, {"metrics", r.result.metrics},
          {"group", r.result.group}, {"details", r.result.details}};
}

ResultRecord record_from_json(const nlohmann::json& line, const std::string& where) {
  auto text = [&](const char* key) {
    if (!line.contains(key) || !line[key].is_string()) fail(where, std::string("missing string field '") + key + "'");
    return line[key].get<std::string>();
  };
  ResultRecord r{.task = text("task"), .mixer = text("mixer"), .id = text("id"), .result = {}};
  if (!line.contains("metrics") || !line["metrics"].is_object()) fail(where, "missing object field 'metrics'");
  for (const auto& [name, value] : line["metrics"].items()) {
    if (!value.is_number()) fail(where, "metric '" + name + "' is not a number");
    r.result.metrics[name] = value.get<double>();
  }
  if (line.contains("group")) r.result.group = line["group"];
  if (line.contains("details")) r.result.details = line["details"];
  return r;
}

ResultsFile::ResultsFile(const std::filesystem::path& path) : path_(path) {
  std::error_code error;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
  if (error) fail(path.parent_path().string(), "cannot create the output directory: " + error.message());
  std::size_t keep_bytes = 0;  // the file's length up to its last complete line
  bool ends_without_newline = false;
  if (std::ifstream in{path, std::ios::binary}) {
    std::string line;
    int number = 0;
    std::size_t offset = 0;
    while (std::getline(in, line)) {
      ++number;
      const bool complete = !in.eof();  // the line ended with '\n'
      const std::size_t line_bytes = line.size() + (complete ? 1 : 0);
      if (line.empty()) {
        offset += line_bytes;
        keep_bytes = offset;
        continue;
      }
      nlohmann::json parsed;
      try {
        parsed = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        if (!complete) {  // an interrupted write: drop it and overwrite it
          std::fprintf(stderr, "bifocal: %s:%d: dropping an incomplete last line (an interrupted run)\n",
                       path.string().c_str(), number);
          break;
        }
        fail(path.string() + ":" + std::to_string(number), "not valid JSON");
      }
      ResultRecord record = record_from_json(parsed, path.string() + ":" + std::to_string(number));
      done_.insert({record.task, record.mixer, record.id});
      records_.push_back(std::move(record));
      offset += line_bytes;
      keep_bytes = offset;
      ends_without_newline = !complete;
    }
  }
  if (std::filesystem::exists(path)) std::filesystem::resize_file(path, keep_bytes);
  out_.open(path, std::ios::binary | std::ios::app);
  if (!out_) fail(path.string(), "cannot open for appending");
  if (ends_without_newline) out_ << '\n';  // a whole record whose newline was never written
}

bool ResultsFile::contains(const std::string& task, const std::string& mixer, const std::string& id) const {
  return done_.contains({task, mixer, id});
}

void ResultsFile::append(const ResultRecord& record) {
  out_ << to_json(record).dump() << '\n';
  out_.flush();
  if (!out_) fail(path_.string(), "cannot write");
  done_.insert({record.task, record.mixer, record.id});
  records_.push_back(record);
}

}  // namespace bifocal::eval
