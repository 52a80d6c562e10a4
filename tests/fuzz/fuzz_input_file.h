// Fuzz targets whose input is a file (a safetensors file, a tokenizer.json): one scratch file per
// process, rewritten with each input, removed at exit.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace bifocal::fuzz {

// Writes `data` to `path`, replacing what was there.
inline void write_file(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  if (!out) std::abort();  // the fuzzer's own machinery failed, not the code under test
}

class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / ("bifocal-fuzz-" + std::to_string(getpid()) + "-" + name)) {}
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
    write_file(path_, data, size);
    return path_;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace bifocal::fuzz
