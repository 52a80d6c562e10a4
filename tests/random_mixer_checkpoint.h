// A golden model with the mixer tensors a trained checkpoint carries (DESIGN.md "Checkpoint
// conventions for mixer parameters"), filled with random values. The golden models have none, so
// their mixers take the neutral values (zero gate weights, the mix gate at −30, no sink mass,
// identity feature maps, LoLCATs' window factor at 10): the mLSTM's gates are then the same for
// every token and Bifocal's mLSTM branch never reaches the output, which hides any mistake in
// where or how the device makes or reads them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden_model.h"
#include "io/safetensors.h"
#include "safetensors_writer.h"
#include "test_files.h"

namespace bifocal::testing {

// The mixers that read every tensor golden_with_random_mixer_tensors writes (the mLSTM's gates for
// state=kv), and the seed the tests use: the CPU test checks that with this seed these mixers'
// logits move, so the device test comparing them with the CPU can see a tensor lost on the way.
inline const std::vector<std::string>& random_tensor_mixers() {
  static const std::vector<std::string> mixers{"bifocal:window=16,state=kv,sink=learned", "mlstm:state=kv",
                                               "swa:window=16,sink=learned", "linear:feature=hedgehog",
                                               "lolcats:window=16"};
  return mixers;
}
inline constexpr std::uint32_t kRandomMixerTensorsSeed = 7;

// Writes into `dir` the golden model `name` (its files copied, its weights listed by a new
// model.safetensors.index.json) plus mixer.safetensors with, for every layer: learned sinks [Hq],
// mLSTM input and forget gates for one state per KV head ([Hkv, hidden] and [Hkv]: `state=kv`
// mixers only), Bifocal's mix gate ([Hq, hidden], [Hq]), the hedgehog feature maps ([Hkv, d, 64],
// ~ N(0, 0.1²) in place of the identity) and LoLCATs' window factors ([Hq], ~ N(0, 1) in place of
// 10, which leaves the window alone). Gate weights ~ N(0, 0.02²): the pre-activations spread
// ~0.02·√hidden·rms(x), ~0.2 for the golden models, mild enough that the mLSTM's denominators stay
// well conditioned; forget biases 3 (a long memory), mix biases near 0 (both branches in the
// output), sinks ~ N(0, 1). Returns dir.
inline std::filesystem::path golden_with_random_mixer_tensors(const std::string& name,
                                                              const std::filesystem::path& dir, std::uint32_t seed) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  const fs::path source = golden_model(name);
  json weight_map = json::object();
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string file = entry.path().filename().string();
    if (file == "model.safetensors") {  // listed under a new name: the index must be the only authority
      fs::copy_file(entry.path(), dir / "weights.safetensors");
      const auto weights = SafetensorsFile::open(entry.path());
      for (const TensorView& view : weights->tensors()) weight_map[view.name] = "weights.safetensors";
    } else if (file == "model.safetensors.index.json") {
      std::ifstream in(entry.path());
      const json index = json::parse(in);
      for (const auto& [tensor, shard] : index.at("weight_map").items()) weight_map[tensor] = shard;
    } else {
      fs::copy_file(entry.path(), dir / file);
    }
  }
  std::ifstream config_file(source / "config.json");
  const json config = json::parse(config_file);
  const int layers = config.at("num_hidden_layers"), hidden = config.at("hidden_size");
  const int query_heads = config.at("num_attention_heads"), kv_heads = config.at("num_key_value_heads");
  const int head_dim = config.value("head_dim", hidden / query_heads);

  std::mt19937 rng(seed);
  std::normal_distribution<float> weight(0.0f, 0.02f), unit(0.0f, 1.0f);
  std::vector<F32Tensor> tensors;
  auto add = [&](const std::string& tensor, std::vector<std::int64_t> shape, auto&& value) {
    tensors.push_back(filled_f32_tensor(tensor, std::move(shape), value));
    weight_map[tensor] = "mixer.safetensors";
  };
  for (int layer = 0; layer < layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".self_attn.";
    add_mixer_gate_tensors(add, prefix, query_heads, kv_heads, hidden, [&] { return unit(rng); },
                           [&] { return weight(rng); });
    add(prefix + "feature_map.weight", {kv_heads, head_dim, 64}, [&] { return 0.1f * unit(rng); });
    add(prefix + "window_factor", {query_heads}, [&] { return unit(rng); });
  }
  write_f32_safetensors(dir / "mixer.safetensors", tensors);
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
  return dir;
}

// For each golden model in `names`, written with random mixer tensors (kRandomMixerTensorsSeed), and
// each of random_tensor_mixers(): body(name, checkpoint, tokens, mixer), under a trace naming both.
template <typename Body>
void for_each_random_mixer_checkpoint(std::initializer_list<const char*> names, Body body) {
  for (const std::string name : names) {
    TempDir dir;
    const auto checkpoint = golden_with_random_mixer_tensors(name, dir.path(), kRandomMixerTensorsSeed);
    const auto tokens = GoldenReference::load(name).full_sequence();
    for (const std::string& mixer : random_tensor_mixers()) {
      SCOPED_TRACE(name + " " + mixer);
      body(name, checkpoint, tokens, mixer);
    }
  }
}

}  // namespace bifocal::testing
