// Memory-mapped safetensors files and the set of files that make up one checkpoint.
// Format: 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to the start of the data section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bifocal/dtype.h"

namespace bifocal {

// A read-only view of one tensor inside a mapped file.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
  std::string file;  // the file it lives in, for error messages
  std::uint64_t file_offset = 0;  // where `bytes` starts in that file (8 + header length + data offset)

  std::int64_t numel() const;
  // Copies the elements widened to float32 (F32, F16, BF16, F64). Throws for integer dtypes.
  std::vector<float> to_f32() const;
  void copy_to_f32(std::span<float> out) const;
  // Copies I64/I32 elements as int64.
  std::vector<std::int64_t> to_i64() const;
};

// One mapped .safetensors file. Opening validates the whole header: header length within the
// file, JSON well formed, known dtypes, shape × dtype size == byte length, offsets inside the
// data section, no two tensors overlapping. Errors name the file and the tensor.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* mapping_ = nullptr;
  std::size_t mapping_size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// All weights of a checkpoint directory: DIR/model.safetensors, or the shards listed in
// DIR/model.safetensors.index.json ("weight_map": name -> shard file).
class WeightStore {
 public:
  static WeightStore open(const std::filesystem::path& model_dir);

  const TensorView* find(const std::string& name) const;  // nullptr when absent
  // The tensor `name` with exactly `shape`; throws naming the file when missing or misshapen.
  const TensorView& require(const std::string& name, const std::vector<std::int64_t>& shape) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& directory() const { return directory_; }

 private:
  std::filesystem::path directory_;
  std::filesystem::path source_;  // model.safetensors or the index: where `require` looked for names
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> tensors_;
};

}  // namespace bifocal
