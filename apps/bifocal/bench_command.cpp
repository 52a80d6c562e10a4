// bifocal bench: decode and prefill throughput, time to first token and device memory against
// context length, per mixer, at batch 1 on the CUDA backend (src/bench/). Synthetic bf16 weights
// for a builtin shape, or a checkpoint. Prints a Markdown table; --out adds JSON and SVG.
#include <cstdio>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "bifocal/error.h"
#include "commands.h"

namespace bifocal::cli {

namespace {

struct BenchFlags {
  BenchOptions options;
  std::string contexts = "1k,8k,32k,128k,256k";
  std::string out;
};

std::string command_line(const BenchFlags& f) {
  const BenchOptions& o = f.options;
  std::string line = "bifocal bench";
  line += o.shape.empty() ? " --model " + shell_quote(o.model_dir) : " --shape " + o.shape;
  for (const auto& mixer : o.mixers) line += " --mixer " + shell_quote(mixer);
  line += fmt::format(" --context {} --gen {} --repeat {} --dtype {} --max-prefill {} --prefill-chunk {} --seed {}",
                      f.contexts, o.generated_tokens, o.repeats, o.dtype, o.max_prefill, o.prefill_chunk, o.seed);
  for (const auto& kernel : o.ablate_kernels) line += " --ablate " + shell_quote(kernel);
  if (!f.out.empty()) line += " --out " + shell_quote(f.out);
  return line;
}

}  // namespace

Run add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* command = app.add_subcommand(
      "bench", "Decode/prefill throughput and device memory against context, per mixer (CUDA backend; Markdown table, "
               "--out adds JSON and SVG)");
  BenchOptions& o = flags->options;
  command->add_option("--shape", o.shape, "Synthetic weights of a builtin shape: qwen3-4b, qwen3.5-4b-like, paper-fig2");
  command->add_option("-m,--model", o.model_dir, "A checkpoint directory instead of a shape");
  command->add_option("--mixer", o.mixers, "Mixer spec to benchmark (repeatable)")->required();
  command->add_option("--context", flags->contexts, "Context lengths: tokens in the cache before decoding")
      ->capture_default_str();
  command->add_option("--gen", o.generated_tokens, "Decode steps timed per repeat")->capture_default_str();
  command->add_option("--repeat", o.repeats, "Repeats; the median is reported")->capture_default_str();
  command->add_option("--dtype", o.dtype, "Weight and KV storage: bf16, fp16 (the paper's) or fp32")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  command->add_option("--max-prefill", o.max_prefill, "Longest prompt whose prefill (and TTFT) is timed")->capture_default_str();
  command->add_option("--prefill-chunk", o.prefill_chunk,
                      "Tokens a prefill pass takes (llama-bench's ubatch); the workspace is sized for one pass")
      ->capture_default_str();
  command->add_option("--seed", o.seed, "Seed of the synthetic weights and prompts")->capture_default_str();
  command->add_option("--ablate", o.ablate_kernels,
                      "Diagnosis: also time the decode step with the kernels whose bare name contains this emptied "
                      "(launch shape kept), to see what they cost in place; NAME#I empties only the I-th such launch "
                      "(from 0, in the step's order), NAME#I/N one in every N from the I-th, A+B both in one timing "
                      "(repeatable; a mixer whose step has no such launch gets a row saying so)");
  command->add_option("--out", flags->out, "Directory for bench.md, bench.json and bench.svg");
  return [flags] {
    BenchFlags& f = *flags;
    f.options.contexts = parse_contexts(f.contexts);
    if (!f.out.empty()) prepare_report_directory(f.out);
    BenchReport report = run_bench(f.options, [](const std::string& line) { std::fprintf(stderr, "bifocal: %s\n", line.c_str()); });
    report.command_line = command_line(f);
    std::fputs(bench_markdown(report).c_str(), stdout);
    if (!f.out.empty())
      write_report_files(f.out, {{"bench.md", bench_markdown(report)},
                                 {"bench.json", bench_json(report).dump(2) + "\n"},
                                 {"bench.svg", bench_svg(report)}});
    return 0;
  };
}

}  // namespace bifocal::cli
