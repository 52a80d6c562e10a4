// `bifocal eval`'s loop: every mixer on identical items of every task (same prompts, same
// sampling seeds), one result line per (task, mixer, item) in OUT/results.jsonl, skipping what
// an earlier run already wrote there (resume), with --limit and --shard i/n to cut a run short
// or split it across machines. The report is made from the results file (eval_report.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "eval/eval_task.h"

namespace bifocal::eval {

struct EvalRunOptions {
  std::filesystem::path model_dir;
  std::vector<std::string> mixers;  // specs; "native" runs the checkpoint's own mixers
  std::vector<std::string> tasks;   // task specs, e.g. "niah_single_1:lengths=512,1024"
  TaskContext context;
  int limit = 0;                    // > 0: only the first `limit` items of each task
  int shard_index = 0;              // this run scores items i with i % shard_count == shard_index
  int shard_count = 1;
  std::filesystem::path out_dir;
  std::string backend = "cpu";
  std::string dtype = "auto";
};

// "i/n" with 0 <= i < n → {i, n}; errors name --shard.
std::pair<int, int> parse_shard(const std::string& text);

struct EvalRunSummary {
  std::size_t scored = 0;   // items scored by this run
  std::size_t resumed = 0;  // items found in the results file and skipped
  std::map<std::string, std::string> primary_metric;  // task name → its primary metric
};

// The items of one task that this run (limit, shard) covers, in order.
std::vector<EvalItem> select_items(std::vector<EvalItem> items, int limit, int shard_index, int shard_count);

// `progress` receives a status line after every item (a terminal overwrites it).
EvalRunSummary run_eval(const EvalRunOptions& options, const std::function<void(const std::string&)>& progress);

}  // namespace bifocal::eval
