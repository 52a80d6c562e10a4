#include "eval/eval_runner.h"

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "bifocal/error.h"
#include "bifocal/mixer_spec.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "core/whole_number.h"
#include "eval/eval_results.h"

namespace bifocal::eval {

std::pair<int, int> parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  const std::string_view whole(text);
  const auto index = slash == std::string::npos ? std::nullopt : parse_whole_int(whole.substr(0, slash));
  const auto count = slash == std::string::npos ? std::nullopt : parse_whole_int(whole.substr(slash + 1));
  if (!index || !count || *count < 1 || *index >= *count)
    fail("--shard", "'" + text + "' is not i/n with 0 <= i < n (e.g. 0/4)");
  return {*index, *count};
}

std::vector<EvalItem> select_items(std::vector<EvalItem> items, int limit, int shard_index, int shard_count) {
  if (limit > 0 && std::size_t(limit) < items.size()) items.resize(limit);
  std::vector<EvalItem> mine;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (int(i % shard_count) == shard_index) mine.push_back(std::move(items[i]));
  return mine;
}

namespace {

std::string canonical_mixer(const std::string& mixer) {
  return mixer == "native" ? mixer : MixerSpec::parse(mixer).to_string();
}

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const long s = long(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
}

}  // namespace

EvalRunSummary run_eval(const EvalRunOptions& options, const std::function<void(const std::string&)>& progress) {
  if (options.mixers.empty()) fail("--mixer", "give at least one mixer (the first is the teacher)");
  if (options.tasks.empty()) fail("--task", "give at least one task");
  if (options.out_dir.empty()) fail("--out", "an output directory is required (results.jsonl, report.md)");
  std::vector<std::string> mixers;
  for (const auto& mixer : options.mixers) mixers.push_back(canonical_mixer(mixer));  // every spec checked first

  // Tasks and items first: bad task names, options or data fail before any model loads.
  const Tokenizer tokenizer = Tokenizer::from_dir(options.model_dir);
  std::vector<std::unique_ptr<Task>> tasks;
  std::vector<std::vector<EvalItem>> items;
  EvalRunSummary summary;
  for (const auto& spec : options.tasks) {
    tasks.push_back(make_task(spec, options.context));
    items.push_back(select_items(tasks.back()->items(tokenizer), options.limit, options.shard_index, options.shard_count));
    summary.primary_metric[tasks.back()->name()] = tasks.back()->primary_metric();
  }
  ResultsFile results(options.out_dir / "results.jsonl");

  for (std::size_t m = 0; m < mixers.size(); ++m) {
    ModelOptions model_options;
    if (mixers[m] != "native") model_options.mixer = mixers[m];
    model_options.backend = options.backend;
    model_options.dtype = options.dtype;
    std::unique_ptr<Model> model;  // loaded only when something is left to score
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      const std::string task = tasks[t]->name();
      const auto start = std::chrono::steady_clock::now();
      std::size_t done_here = 0, total = items[t].size(), resumed = 0;
      for (std::size_t i = 0; i < total; ++i) {
        const EvalItem& item = items[t][i];
        if (results.contains(task, mixers[m], item.id)) {
          ++resumed;
          ++summary.resumed;
          continue;
        }
        if (!model) model = std::make_unique<Model>(Model::load(options.model_dir, model_options));
        ResultRecord record{.task = task, .mixer = mixers[m], .id = item.id,
                            .result = tasks[t]->score(*model, tokenizer, item)};
        results.append(record);
        ++done_here;
        ++summary.scored;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double rate = done_here / elapsed;
        progress(fmt::format("mixer {}/{} {} · {}: {}/{} items ({} resumed), {:.2f} items/s, ETA {}", m + 1, mixers.size(),
                             mixers[m], task, i + 1, total, resumed, rate,
                             duration(double(total - i - 1) / rate)));
      }
      if (resumed == total && total > 0)
        progress(fmt::format("mixer {}/{} {} · {}: all {} items already in {}", m + 1, mixers.size(), mixers[m], task,
                             total, results.path().string()));
    }
  }
  return summary;
}

}  // namespace bifocal::eval
