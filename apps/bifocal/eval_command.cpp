// bifocal eval: every mixer on identical items of every task; per-sample JSONL (resumable),
// a Markdown report with one table per task (teacher row first, recovery column), JSON and SVG
// plots (src/eval/eval_runner.h, eval_report.h).
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "bifocal/error.h"
#include "commands.h"
#include "eval/eval_comparisons.h"
#include "eval/eval_report.h"
#include "eval/eval_runner.h"
#include "eval/eval_task.h"

namespace bifocal::cli {

namespace {

struct EvalFlags {
  eval::EvalRunOptions options;
  std::string model;
  std::string data_dir;
  std::string shard = "0/1";
  std::string out;
  std::int64_t seed = 1234;
  std::vector<double> length_edges = {4000};
  double long_threshold = 4000;
  BackendFlags backend;
};

std::string command_line(const EvalFlags& f) {
  std::string line = "bifocal eval --model " + shell_quote(f.model);
  for (const auto& mixer : f.options.mixers) line += " --mixer " + shell_quote(mixer);
  for (const auto& task : f.options.tasks) line += " --task " + shell_quote(task);
  if (!f.data_dir.empty()) line += " --data-dir " + shell_quote(f.data_dir);
  const auto& c = f.options.context;
  line += fmt::format(" --samples {} --temperature {} --top-k {} --top-p {} --max-tokens {} --seed {}", c.samples,
                      c.sampling.temperature, c.sampling.top_k, c.sampling.top_p, c.max_new_tokens, f.seed);
  // The strata of long-generation answers shape the report's tables: spelled out, defaults too.
  for (const double edge : f.length_edges) line += fmt::format(" --length-edges {}", edge);
  line += fmt::format(" --long-threshold {}", f.long_threshold);
  if (f.options.limit > 0) line += fmt::format(" --limit {}", f.options.limit);
  if (f.shard != "0/1") line += " --shard " + f.shard;
  if (f.backend.backend != "cpu") line += " --backend " + f.backend.backend + " --dtype " + f.backend.dtype;
  return line + " --out " + shell_quote(f.out);
}

// ../shared/data when it is there (a development checkout), else nothing: tasks that need data
// then say which file is missing.
std::string default_data_dir() {
  for (const char* candidate : {"../shared/data", "shared/data"})
    if (std::filesystem::is_directory(candidate)) return candidate;
  return "";
}

}  // namespace

Run add_eval_command(CLI::App& app) {
  auto flags = std::make_shared<EvalFlags>();
  CLI::App* command = app.add_subcommand(
      "eval", "Evaluate mixers on tasks at equal inputs: per-sample JSONL (resumable), Markdown/JSON report, SVG plots");
  EvalFlags& f = *flags;
  command->add_option("-m,--model", f.model, "Checkpoint directory")->required();
  command->add_option("--mixer", f.options.mixers,
                      "Mixer spec (repeatable; the first is the teacher); 'native' = the checkpoint's own mixers")
      ->required();
  command->add_option("--task", f.options.tasks,
                      std::string("Task (repeatable): ") + eval::kKnownTaskNames +
                          "; options as NAME:key=value,… e.g. niah_single_1:lengths=512,1024")
      ->required();
  command->add_option("--data-dir", f.data_dir, "Folder of the public datasets (default: ../shared/data when present)");
  command->add_option("--samples", f.options.context.samples, "Samples per generation problem (pass@1 is their mean)")
      ->capture_default_str();
  command->add_option("--temperature", f.options.context.sampling.temperature, "Sampling temperature of generation tasks")
      ->capture_default_str();
  command->add_option("--top-k", f.options.context.sampling.top_k, "Top-k of generation tasks")->capture_default_str();
  command->add_option("--top-p", f.options.context.sampling.top_p, "Top-p of generation tasks")->capture_default_str();
  command->add_option("--max-tokens", f.options.context.max_new_tokens, "Longest generated answer")->capture_default_str();
  command->add_option("--seed", f.seed, "Seed of item construction and sampling (same for every mixer)")
      ->capture_default_str();
  command->add_option("--limit", f.options.limit, "Only the first N items of each task");
  command->add_option("--shard", f.shard, "Run shard i of n (i/n): items with index % n == i")->capture_default_str();
  command->add_option("--length-edges", f.length_edges,
                      "Answer-length strata edges in tokens (repeatable); default: short/long at 4000")
      ->capture_default_str();
  command->add_option("--long-threshold", f.long_threshold, "Count correct answers longer than this many tokens")
      ->capture_default_str();
  command->add_option("--out", f.out, "Directory for results.jsonl (resumable), report.md, report.json, *.svg")->required();
  add_backend_options(*command, f.backend);
  return [flags] {
    EvalFlags& f = *flags;
    auto& o = f.options;
    o.model_dir = f.model;
    o.out_dir = f.out;
    o.context.seed = std::uint64_t(f.seed);
    o.context.data_dir = f.data_dir.empty() ? default_data_dir() : f.data_dir;
    std::tie(o.shard_index, o.shard_count) = eval::parse_shard(f.shard);
    o.backend = f.backend.backend;
    o.dtype = f.backend.dtype;
    const bool terminal = isatty(STDERR_FILENO);
    const auto summary = eval::run_eval(o, [&](const std::string& line) {
      std::fprintf(stderr, terminal ? "\r\033[K%s" : "%s\n", line.c_str());
    });
    if (terminal) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "bifocal: scored %zu items, %zu already in %s/results.jsonl\n", summary.scored,
                 summary.resumed, f.out.c_str());

    const eval::ResultsFile results(std::filesystem::path(f.out) / "results.jsonl");
    std::vector<std::string> mixers;
    for (const auto& mixer : o.mixers) mixers.push_back(mixer == "native" ? mixer : MixerSpec::parse(mixer).to_string());
    eval::EvalReport report = eval::aggregate(results.records(), mixers, summary.primary_metric, f.length_edges);
    report.command_line = command_line(f);
    report.model = f.model;
    const eval::Comparisons comparisons = eval::compare_to_teacher(
        results.records(), mixers, summary.primary_metric,
        {.length_edges = f.length_edges, .long_answer_threshold = f.long_threshold});
    const std::string markdown =
        eval::report_markdown(report) + (comparisons.markdown.empty() ? "" : "\n## Against the teacher\n" + comparisons.markdown);
    nlohmann::json report_data = eval::report_json(report);
    report_data["against_teacher"] = comparisons.json;
    std::fputs(markdown.c_str(), stdout);
    std::vector<std::pair<std::string, std::string>> files = {{"report.md", markdown},
                                                              {"report.json", report_data.dump(2) + "\n"}};
    for (auto& plot : eval::report_plots(report)) files.push_back(std::move(plot));
    write_report_files(f.out, files);
    return 0;
  };
}

}  // namespace bifocal::cli
