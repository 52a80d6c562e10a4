// The `bifocal` command line: one subcommand per file in this folder. Every error reaches the
// user as one line naming the file or flag at fault, with a non-zero exit status.
#include <cstdio>
#include <map>

#include "bifocal/error.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "bifocal: run Hugging Face Llama, Mistral, Qwen2 and Qwen3 checkpoints with a fixed memory budget per layer.",
      "bifocal"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "bifocal 0.1.0");
  std::map<CLI::App*, bifocal::cli::Run> runs;
  auto add = [&](auto adder) {
    const std::size_t before = app.get_subcommands({}).size();
    auto run = adder(app);
    runs[app.get_subcommands({})[before]] = std::move(run);
  };
  add(bifocal::cli::add_generate_command);
  add(bifocal::cli::add_tokenize_command);
  add(bifocal::cli::add_budget_command);
  add(bifocal::cli::add_compare_command);
  add(bifocal::cli::add_bench_command);
  add(bifocal::cli::add_eval_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& [command, run] : runs)
      if (command->parsed()) return run();
  } catch (const bifocal::Error& e) {
    std::fprintf(stderr, "bifocal: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bifocal: internal error: %s\n", e.what());
    return 2;
  }
  return 1;
}
