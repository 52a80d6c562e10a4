// Each subcommand registers its flags on the CLI11 app and returns the function that runs it.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "bifocal/model.h"

namespace bifocal::cli {

using Run = std::function<int()>;

Run add_generate_command(CLI::App& app);
Run add_tokenize_command(CLI::App& app);
Run add_budget_command(CLI::App& app);
Run add_compare_command(CLI::App& app);

// --mixer SPEC and --budget N, shared by every subcommand that runs a model.
void add_mixer_options(CLI::App& command, std::string& mixer, std::int64_t& budget);
bifocal::ModelOptions model_options(const std::string& mixer, std::int64_t budget);
// Prints one warning listing the mixer tensors that got neutral (untrained) values.
void warn_untrained(const bifocal::Model& model);
// True when every layer bounds its RoPE positions (swa positions=rolling, or no RoPE state).
bool runs_past_max_positions(const bifocal::Model& model);

// The prompt from --prompt TEXT, --prompt-file FILE, or standard input ("-" or neither given).
std::string read_prompt(const std::string& prompt, const std::string& prompt_file);

}  // namespace bifocal::cli
