// The fewest bytes one decoded token must move through device memory (DESIGN.md "Measuring":
// time per token >= (weight bytes + cache/state bytes read and written) / bandwidth). The bench
// divides this by the measured time to get the achieved bandwidth, and that by the copy
// bandwidth to get the roofline ratio.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bifocal/mixer_spec.h"
#include "bifocal/model_config.h"

namespace bifocal {

struct DecodeTraffic {
  std::size_t weight_bytes = 0;       // every matrix once (the LM head included), norms, mixer gates and
                                      // the fp32 mixer parameters (sinks, feature maps, window factors)
  std::size_t cache_read_bytes = 0;   // visible cached keys/values, states read
  std::size_t cache_write_bytes = 0;  // the new token's key/value, states written back
  std::size_t total() const { return weight_bytes + cache_read_bytes + cache_write_bytes; }
};

// At `context` tokens already processed; `element_bytes` of weights and KV (2 for bf16/fp16).
// States are fp32 and read and written once per token.
DecodeTraffic decode_traffic(const ModelConfig& config, const std::vector<MixerSpec>& layer_mixers,
                             std::int64_t context, std::size_t element_bytes);

// Weight bytes of the transformer alone (no mixer gates): what a device model uploads.
std::size_t transformer_weight_bytes(const ModelConfig& config, std::size_t element_bytes);

}  // namespace bifocal
