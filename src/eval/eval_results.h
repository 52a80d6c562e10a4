// The results of an evaluation run, one JSON object per line in OUT/results.jsonl: every
// (task, mixer, item) scored so far. Lines are appended and flushed one at a time, so an
// interrupted run loses at most the item in progress, and a rerun with the same --out skips
// everything already there (resume).
#pragma once

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_task.h"

namespace bifocal::eval {

struct ResultRecord {
  std::string task;
  std::string mixer;
  std::string id;
  ItemResult result;
};

nlohmann::json to_json(const ResultRecord& record);
// Throws naming `where` (file:line) when a field is missing or of the wrong type.
ResultRecord record_from_json(const nlohmann::json& line, const std::string& where);

class ResultsFile {
 public:
  // Opens (creating the directory) and reads what an earlier run left. A last line cut short by
  // an interruption is dropped with a warning on stderr; any other malformed line is an error
  // naming the file and line.
  explicit ResultsFile(const std::filesystem::path& path);

  bool contains(const std::string& task, const std::string& mixer, const std::string& id) const;
  void append(const ResultRecord& record);  // written and flushed before it returns
  const std::vector<ResultRecord>& records() const { return records_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<ResultRecord> records_;
  std::set<std::tuple<std::string, std::string, std::string>> done_;
  std::ofstream out_;
};

}  // namespace bifocal::eval
