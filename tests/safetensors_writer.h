// Writes a safetensors file of F32 tensors for the tests that build checkpoints of their own
// (mixer tensors beside a golden model): the 8-byte little-endian header length, the JSON header
// padded with spaces so that the data starts 8-byte aligned, then each tensor's values in order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace bifocal::testing {

struct F32Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// A tensor of `shape` whose values are value() called once each, in row-major order (a random
// draw, or a constant): the checkpoint builders' one way to make a tensor.
template <typename Value>
F32Tensor filled_f32_tensor(std::string name, std::vector<std::int64_t> shape, Value&& value) {
  std::int64_t count = 1;
  for (const auto dim : shape) count *= dim;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) v = value();
  return {std::move(name), std::move(shape), std::move(values)};
}

// One layer's mixer tensors that DESIGN.md's "Checkpoint conventions for mixer parameters" names
// for learned sinks, the mLSTM's gates (state=kv) and Bifocal's mix gate, under `prefix` (ending
// in "self_attn."), through the builder's add(name, shape, value): the sinks from unit(), the gate
// weights and biases from gate_weight(), the forget bias 3 above it (a long memory). Each builder
// passes its own generators, so its draws stay its own; the order of the tensors is shared.
template <typename Add, typename Unit, typename GateWeight>
void add_mixer_gate_tensors(Add&& add, const std::string& prefix, std::int64_t query_heads, std::int64_t kv_heads,
                            std::int64_t hidden, Unit&& unit, GateWeight&& gate_weight) {
  add(prefix + "sinks", {query_heads}, unit);
  add(prefix + "mlstm.igate.weight", {kv_heads, hidden}, gate_weight);
  add(prefix + "mlstm.igate.bias", {kv_heads}, gate_weight);
  add(prefix + "mlstm.fgate.weight", {kv_heads, hidden}, gate_weight);
  add(prefix + "mlstm.fgate.bias", {kv_heads}, [&] { return 3.0f + gate_weight(); });
  add(prefix + "mix_gate.weight", {query_heads, hidden}, gate_weight);
  add(prefix + "mix_gate.bias", {query_heads}, gate_weight);  // near 0: both branches in the output
}

inline void write_f32_safetensors(const std::filesystem::path& path, const std::vector<F32Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::size_t offset = 0;
  for (const auto& tensor : tensors) {
    const std::size_t bytes = tensor.values.size() * sizeof(float);
    header[tensor.name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = char((std::uint64_t(text.size()) >> (8 * i)) & 0xff);
  std::ofstream out(path, std::ios::binary);
  out.write(length, 8);
  out << text;
  for (const auto& tensor : tensors)  // little-endian host, as the reader assumes
    out.write(reinterpret_cast<const char*>(tensor.values.data()), std::streamsize(tensor.values.size() * sizeof(float)));
}

}  // namespace bifocal::testing
