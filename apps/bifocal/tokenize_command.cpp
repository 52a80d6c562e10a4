// bifocal tokenize: show the ids (and pieces) a checkpoint's tokenizer makes of a text.
#include <cstdio>

#include <fmt/format.h>

#include "bifocal/tokenizer.h"
#include "commands.h"

namespace bifocal::cli {

namespace {
struct TokenizeFlags {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  bool no_special = false;
  bool pieces = false;
};
}  // namespace

Run add_tokenize_command(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* command = app.add_subcommand("tokenize", "Print the token ids of a text");
  command->add_option("-m,--model", flags->model, "Checkpoint directory holding tokenizer.json")->required();
  command->add_option("-p,--prompt", flags->prompt, "Text to tokenize; '-' reads standard input");
  command->add_option("-f,--prompt-file", flags->prompt_file, "Read the text from this file");
  command->add_flag("--no-special", flags->no_special, "Do not add the tokenizer's special tokens (e.g. BOS)");
  command->add_flag("--pieces", flags->pieces, "Print each id with its vocabulary string");
  return [flags] {
    const Tokenizer tokenizer = Tokenizer::from_dir(flags->model);
    const auto ids = tokenizer.encode(read_prompt(flags->prompt, flags->prompt_file), !flags->no_special);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (flags->pieces)
        fmt::print("{}\t{:?}\n", ids[i], tokenizer.token_text(ids[i]));
      else
        fmt::print("{}{}", i ? " " : "", ids[i]);
    }
    if (!flags->pieces) fmt::print("\n");
    std::fprintf(stderr, "%zu tokens\n", ids.size());
    return 0;
  };
}

}  // namespace bifocal::cli
