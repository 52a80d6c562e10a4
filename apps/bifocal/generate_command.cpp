// bifocal generate: stream a continuation of a prompt, then one stats line.
#include <chrono>
#include <cstdio>
#include <random>

#include "bifocal/generate.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "commands.h"

namespace bifocal::cli {

namespace {
struct GenerateFlags {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int max_tokens = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  std::int64_t seed = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::string mixer;
  std::int64_t budget = 0;
  BackendFlags backend;
};
}  // namespace

Run add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* command = app.add_subcommand("generate", "Generate text from a prompt; prints the text as it is made, then a stats line");
  command->add_option("-m,--model", flags->model, "Checkpoint directory (config.json, *.safetensors, tokenizer.json)")->required();
  command->add_option("-p,--prompt", flags->prompt, "Prompt text; '-' reads standard input");
  command->add_option("-f,--prompt-file", flags->prompt_file, "Read the prompt from this file ('-': standard input)");
  command->add_option("-n,--max-tokens", flags->max_tokens, "Most tokens to generate")->capture_default_str();
  command->add_option("--temperature", flags->temperature, "Softmax temperature; 0 (or below) picks the most likely token (greedy)")
      ->capture_default_str();
  command->add_option("--top-k", flags->top_k, "Sample among the k most likely tokens; 0 = no limit")->capture_default_str();
  command->add_option("--top-p", flags->top_p, "Sample among the most likely tokens whose probability adds up to p (nucleus)")
      ->capture_default_str();
  command->add_option("--seed", flags->seed, "Random seed for sampling; -1 draws one (printed in the stats line)")
      ->capture_default_str();
  command->add_option("--stop", flags->stop, "Stop before this string (repeatable)");
  command->add_flag("--ignore-eos", flags->ignore_eos, "Keep generating past end-of-sequence tokens");
  add_mixer_options(*command, flags->mixer, flags->budget);
  add_backend_options(*command, flags->backend);
  return [flags] {
    const std::string prompt = read_prompt(flags->prompt, flags->prompt_file);
    const Model model = Model::load(flags->model, model_options(flags->mixer, flags->budget, flags->backend));
    warn_untrained(model);
    const Tokenizer tokenizer = Tokenizer::from_dir(flags->model);
    const std::vector<std::int32_t> ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
    GenerationOptions options;
    options.max_tokens = flags->max_tokens;
    options.sampling = {.temperature = flags->temperature, .top_k = flags->top_k, .top_p = flags->top_p,
                        .seed = flags->seed >= 0 ? std::uint64_t(flags->seed) : std::random_device{}()};
    options.stop_strings = flags->stop;
    options.stop_at_eos = !flags->ignore_eos;
    if (!runs_past_max_positions(model) && ids.size() + options.max_tokens > std::size_t(model.config().max_position_embeddings))
      std::fprintf(stderr, "bifocal: warning: %zu prompt + %d new tokens exceed max_position_embeddings (%d)\n", ids.size(),
                   options.max_tokens, model.config().max_position_embeddings);
    const GenerationResult result = generate(model, tokenizer, ids, options, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    std::fprintf(stdout, "\n");
    std::fflush(stdout);  // the text, then the stats line on stderr
    std::fprintf(stderr, "%s | seed: %llu\n", result.stats_line().c_str(), (unsigned long long)options.sampling.seed);
    return 0;
  };
}

}  // namespace bifocal::cli
