// "name:key=value,key=value" task specs (`bifocal eval --task`). A field without '=' is the
// task's file (mc:FILE.jsonl, perplexity:FILE), stored as the option "file".
#include "bifocal/error.h"
#include "eval/eval_task.h"

namespace bifocal::eval {

TaskSpec TaskSpec::parse(const std::string& spec) {
  TaskSpec parsed;
  const std::size_t colon = spec.find(':');
  parsed.name = spec.substr(0, colon);
  if (parsed.name.empty()) fail("--task '" + spec + "'", "no task name");
  if (colon == std::string::npos) return parsed;
  const std::string rest = spec.substr(colon + 1);
  std::size_t begin = 0;
  while (begin <= rest.size()) {
    std::size_t end = rest.find(',', begin);
    if (end == std::string::npos) end = rest.size();
    const std::string field = rest.substr(begin, end - begin);
    const std::size_t equals = field.find('=');
    if (field.empty()) fail("--task '" + spec + "'", "empty option");
    if (equals == std::string::npos) {
      if (parsed.options.contains("file")) fail("--task '" + spec + "'", "more than one file given");
      parsed.options["file"] = field;
    } else {
      const std::string key = field.substr(0, equals);
      // Lists such as lengths=512,1024 continue over the following fields without '='.
      std::string value = field.substr(equals + 1);
      while (end < rest.size()) {
        const std::size_t next_end = std::min(rest.find(',', end + 1), rest.size());
        const std::string next = rest.substr(end + 1, next_end - end - 1);
        if (next.find('=') != std::string::npos || next.empty()) break;
        if (key == "file") break;
        value += "," + next;
        end = next_end;
      }
      if (key.empty()) fail("--task '" + spec + "'", "option without a name");
      if (parsed.options.contains(key)) fail("--task '" + spec + "'", "option '" + key + "' given twice");
      parsed.options[key] = value;
    }
    begin = end + 1;
  }
  return parsed;
}

std::optional<std::string> TaskSpec::take(const std::string& key) {
  const auto it = options.find(key);
  if (it == options.end()) return std::nullopt;
  std::string value = it->second;
  options.erase(it);
  return value;
}

void TaskSpec::expect_no_more_options() const {
  if (!options.empty())
    fail("--task " + name, "unknown option '" + options.begin()->first + "'");
}

}  // namespace bifocal::eval
