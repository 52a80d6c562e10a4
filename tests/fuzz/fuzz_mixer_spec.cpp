// libFuzzer target: any text as a mixer spec (--mixer, config.json). MixerSpec::parse either
// throws bifocal::Error or returns a spec whose canonical text parses back to the same spec
// (mixer_spec.h: parse(to_string()) == *this); anything else aborts as a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bifocal/error.h"
#include "bifocal/mixer_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bifocal::MixerSpec spec;
  try {
    spec = bifocal::MixerSpec::parse(text);
  } catch (const bifocal::Error&) {
    return 0;
  }
  if (bifocal::MixerSpec::parse(spec.to_string()) != spec) std::abort();
  return 0;
}
