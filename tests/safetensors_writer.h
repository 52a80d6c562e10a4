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
