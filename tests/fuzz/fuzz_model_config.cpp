// libFuzzer target: any JSON as a checkpoint's config.json. ModelConfig::from_json and the mixer
// section (LayerMixers::from_config) either accept it or throw bifocal::Error naming the file; a
// crash, a sanitizer report or any other exception (nlohmann's type_error escaping a lookup) is a
// finding. Bytes that are not JSON are skipped: read_json_file reports those before these run.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "bifocal/error.h"
#include "bifocal/mixer_spec.h"
#include "bifocal/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  try {
    const auto model = bifocal::ModelConfig::from_json(config, "config.json");
    (void)bifocal::LayerMixers::from_config(config, "config.json", model.num_layers);
  } catch (const bifocal::Error&) {
  }
  return 0;
}
