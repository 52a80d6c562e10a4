// The mixer flags every model-running subcommand takes, and the warnings they lead to.
#include <cstdio>
#include <string>

#include "commands.h"

namespace bifocal::cli {

void add_mixer_options(CLI::App& command, std::string& mixer, std::int64_t& budget) {
  command.add_option("--mixer", mixer,
                     "Sequence mixer for every layer (replaces config.json's default): full, swa:window=W,sinks=S, "
                     "swa:window=W,sink=learned|none, swa:...,positions=rolling, linear:feature=elu1|hedgehog, "
                     "lolcats:window=W, mlstm:state=kv|q, bifocal:window=W,state=kv|q,sink=learned|tokens:S|none");
  command.add_option("--budget", budget, "Per-layer memory budget in KV-token equivalents; a mixer over it is an error");
}

void add_backend_options(CLI::App& command, BackendFlags& flags) {
  command.add_option("--backend", flags.backend, "Where the model runs: cpu (the reference) or cuda (a -DBIFOCAL_CUDA=ON build)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command.add_option("--dtype", flags.dtype,
                     "Weight and KV-cache storage on the CUDA backend: auto (fp16 for an fp16 checkpoint, else "
                     "bf16), bf16, fp16, or fp32 (a test path); the CPU backend computes in fp32")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bf16", "fp16", "fp32"}));
}

ModelOptions model_options(const std::string& mixer, std::int64_t budget, const BackendFlags& backend) {
  ModelOptions options;
  options.backend = backend.backend;
  options.dtype = backend.dtype;
  if (!mixer.empty()) options.mixer = mixer;
  if (budget != 0) options.budget_tokens = budget;
  return options;
}

void warn_untrained(const Model& model) {
  const auto& names = model.untrained_parameters();
  if (names.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < names.size() && i < 4; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 4) list += ", …";
  std::fprintf(stderr,
               "bifocal: warning: the mixer is untrained on this checkpoint: %zu tensors are missing and got neutral "
               "values (%s)\n",
               names.size(), list.c_str());
}

bool runs_past_max_positions(const Model& model) {
  for (int layer = 0; layer < model.config().num_layers; ++layer) {
    const MixerSpec& spec = model.layer_mixer(layer);
    const bool bounded = spec.positions == MixerSpec::Positions::Rolling;
    if (!bounded) return false;
  }
  return true;
}

}  // namespace bifocal::cli
