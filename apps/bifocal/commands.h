// Each subcommand registers its flags on the CLI11 app and returns the function that runs it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "bifocal/model.h"

namespace bifocal::cli {

using Run = std::function<int()>;

Run add_generate_command(CLI::App& app);
Run add_tokenize_command(CLI::App& app);
Run add_budget_command(CLI::App& app);
Run add_compare_command(CLI::App& app);
Run add_bench_command(CLI::App& app);
Run add_eval_command(CLI::App& app);

// --backend and --dtype, shared by every subcommand that runs a model.
struct BackendFlags {
  std::string backend = "cpu";
  std::string dtype = "auto";
};
void add_backend_options(CLI::App& command, BackendFlags& flags);

// --mixer SPEC and --budget N, shared by every subcommand that runs a model.
void add_mixer_options(CLI::App& command, std::string& mixer, std::int64_t& budget);
bifocal::ModelOptions model_options(const std::string& mixer, std::int64_t budget, const BackendFlags& backend = {});
// Prints one warning listing the mixer tensors that got neutral (untrained) values.
void warn_untrained(const bifocal::Model& model);
// True when every layer bounds its RoPE positions (swa positions=rolling, or no RoPE state).
bool runs_past_max_positions(const bifocal::Model& model);

// Quotes s for a POSIX shell (reports record the command that made them).
std::string shell_quote(const std::string& s);

// Creates `dir` and checks that a file can be written in it, so that a long run with an unusable
// --out fails at its start, not after its work; the error names the path.
void prepare_report_directory(const std::string& dir);

// Writes each (file name, content) into `dir`, creating it; errors name the path. Prints one
// line listing the files on standard error.
void write_report_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);

// The prompt from --prompt TEXT, --prompt-file FILE, or standard input ("-" or neither given).
std::string read_prompt(const std::string& prompt, const std::string& prompt_file);

}  // namespace bifocal::cli
