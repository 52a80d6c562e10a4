// Each subcommand registers its flags on the CLI11 app and returns the function that runs it.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace bifocal::cli {

using Run = std::function<int()>;

Run add_generate_command(CLI::App& app);
Run add_tokenize_command(CLI::App& app);
Run add_budget_command(CLI::App& app);

// The prompt from --prompt TEXT, --prompt-file FILE, or standard input ("-" or neither given).
std::string read_prompt(const std::string& prompt, const std::string& prompt_file);

}  // namespace bifocal::cli
