// libFuzzer target: any bytes as a .safetensors file. Opening validates the whole header
// (SafetensorsFile::open); every tensor it accepts must then read back in full. Only
// bifocal::Error may come out: a crash, a sanitizer report, another exception type or a read
// outside the mapping is a finding. Seeds: scripts/fuzz.sh (the golden models' shards).
#include <cstddef>
#include <cstdint>

#include "bifocal/dtype.h"
#include "bifocal/error.h"
#include "fuzz/fuzz_input_file.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static bifocal::fuzz::ScratchFile file("model.safetensors");
  const auto& path = file.write(data, size);
  try {
    const auto opened = bifocal::SafetensorsFile::open(path);
    for (const bifocal::TensorView& tensor : opened->tensors()) {
      if (tensor.numel() > (std::int64_t(1) << 20)) continue;  // a valid huge shape is not a finding
      if (bifocal::is_floating(tensor.dtype))
        (void)tensor.to_f32();
      else if (tensor.dtype == bifocal::DType::I64 || tensor.dtype == bifocal::DType::I32)
        (void)tensor.to_i64();
    }
  } catch (const bifocal::Error&) {
  }
  return 0;
}
