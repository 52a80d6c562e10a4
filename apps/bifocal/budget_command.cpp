// bifocal budget: what each mixer keeps per layer and per model, in bytes and in KV-token
// equivalents, and which configurations fit a budget of N tokens per layer.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bifocal/budget.h"
#include "bifocal/error.h"
#include "bifocal/model_config.h"
#include "commands.h"
#include "core/human_bytes.h"

namespace bifocal::cli {

namespace {

struct BudgetFlags {
  std::string model;
  std::string shape;
  std::int64_t tokens = 0;
  std::vector<std::string> mixers;
  std::string kv_dtype = "bf16";
  bool json = false;
};

std::string token_equivalents_text(double value) {
  return value == double(std::int64_t(value)) ? fmt::format("{}", std::int64_t(value)) : fmt::format("{:.2f}", value);
}

nlohmann::json memory_json(const MixerSpec& spec, const MixerMemory& m, int layers) {
  return {{"mixer", spec.to_string()}, {"cached_tokens", m.cached_tokens}, {"states", m.states},
          {"kv_bytes", m.kv_bytes}, {"state_matrix_bytes", m.state_matrix_bytes},
          {"state_total_bytes", m.state_total_bytes}, {"layer_bytes", m.total_bytes()},
          {"token_equivalents", m.token_equivalents()}, {"model_bytes", m.total_bytes() * std::size_t(layers)},
          {"grows_with_context", m.grows_with_context}};
}

std::string memory_row(const MixerSpec& spec, const MixerMemory& m, int layers, std::int64_t state_tokens = -1) {
  const std::string states = m.states ? fmt::format("{} × {}", m.states, human_bytes(double(m.state_matrix_bytes) / m.states)) : "—";
  std::string row = fmt::format("| `{}` | {} | {} | {} | {} | {} | {} |", spec.to_string(),
                                m.cached_tokens, states, human_bytes(double(m.kv_bytes + m.state_matrix_bytes)),
                                human_bytes(double(m.total_bytes())), token_equivalents_text(m.token_equivalents()),
                                human_bytes(double(m.total_bytes()) * layers));
  if (state_tokens >= 0) row += fmt::format(" {} |", state_tokens);
  return row;
}

}  // namespace

Run add_budget_command(CLI::App& app) {
  auto flags = std::make_shared<BudgetFlags>();
  CLI::App* command = app.add_subcommand(
      "budget", "Memory per layer and per model for each mixer, and the configurations that fit N tokens per layer");
  auto* model = command->add_option("-m,--model", flags->model, "Checkpoint directory (its config.json gives the shape)");
  command->add_option("--shape", flags->shape, "Built-in shape: qwen3-4b, qwen3.5-4b-like, paper-fig2")->excludes(model);
  command->add_option("-t,--tokens", flags->tokens, "Budget per layer in KV-token equivalents (also the context for full)")
      ->required();
  command->add_option("--mixer", flags->mixers, "Mixer spec to account (repeatable); default: the planner's list and full");
  command->add_option("--kv-dtype", flags->kv_dtype, "Element type of cached keys/values: bf16, fp16 or fp32")
      ->capture_default_str();
  command->add_flag("--json", flags->json, "Print JSON instead of Markdown tables");
  return [flags] {
    if (flags->model.empty() == flags->shape.empty()) fail("budget", "give exactly one of --model DIR or --shape NAME");
    const ModelShape shape = flags->model.empty() ? builtin_shape(flags->shape)
                                                  : shape_of(ModelConfig::from_dir(flags->model), flags->model);
    std::size_t kv_element_bytes = 2;
    if (flags->kv_dtype == "fp32") kv_element_bytes = 4;
    else if (flags->kv_dtype != "bf16" && flags->kv_dtype != "fp16") fail("--kv-dtype", "must be bf16, fp16 or fp32");
    if (flags->tokens <= 0) fail("--tokens", "must be positive");

    std::vector<MixerSpec> specs;
    for (const auto& text : flags->mixers) specs.push_back(MixerSpec::parse(text));
    const auto plans = plan_budget(shape.layer, flags->tokens, kv_element_bytes);
    if (specs.empty()) {
      specs.push_back(MixerSpec::parse("full"));
      for (const auto& plan : plans) specs.push_back(plan.spec);
    }
    const std::size_t unit = kv_token_bytes(shape.layer, kv_element_bytes);
    if (flags->json) {
      nlohmann::json out = {{"shape", shape.name}, {"layers", shape.layers}, {"query_heads", shape.layer.query_heads},
                            {"kv_heads", shape.layer.kv_heads}, {"head_dim", shape.layer.head_dim},
                            {"kv_token_bytes", unit}, {"tokens", flags->tokens}, {"mixers", nlohmann::json::array()},
                            {"plans", nlohmann::json::array()}};
      for (const auto& spec : specs)
        out["mixers"].push_back(memory_json(spec, mixer_memory(spec, shape.layer, flags->tokens, kv_element_bytes), shape.layers));
      for (const auto& plan : plans) {
        auto row = memory_json(plan.spec, plan.memory, shape.layers);
        row["state_tokens"] = plan.state_tokens;
        out["plans"].push_back(row);
      }
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    fmt::print("# Memory budget: {} ({} layers, {} query / {} KV heads, head dim {})\n\n", shape.name, shape.layers,
               shape.layer.query_heads, shape.layer.kv_heads, shape.layer.head_dim);
    fmt::print("One cached token per layer = 2 × {} KV heads × {} × {} bytes = {} ({}). States are fp32.\n"
               "Token equivalents count cached tokens plus state matrices (the published convention); the total\n"
               "adds normalizers and stabilizers. Full attention is counted at {} tokens of context.\n\n",
               shape.layer.kv_heads, shape.layer.head_dim, kv_element_bytes, unit, human_bytes(double(unit)), flags->tokens);
    fmt::print("| mixer | cached tokens | states | per layer | per layer (total) | token equivalents | per model |\n"
               "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (const auto& spec : specs)
      fmt::print("{}\n", memory_row(spec, mixer_memory(spec, shape.layer, flags->tokens, kv_element_bytes), shape.layers));
    fmt::print("\n## Configurations that fit {} token equivalents per layer\n\n", flags->tokens);
    fmt::print("| mixer | cached tokens | states | per layer | per layer (total) | token equivalents | per model | state tokens |\n"
               "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& plan : plans) fmt::print("{}\n", memory_row(plan.spec, plan.memory, shape.layers, plan.state_tokens));
    return 0;
  };
}

}  // namespace bifocal::cli
