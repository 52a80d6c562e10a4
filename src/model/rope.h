// Rotary embedding frequencies for one head dimension, with the scalings HF supports.
#pragma once

#include <vector>

#include "bifocal/model_config.h"

namespace bifocal {

// inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, rescaled for "linear" (÷ factor) and
// "llama3" (long wavelengths ÷ factor, short ones kept, a smooth blend between).
std::vector<float> rope_inverse_frequencies(const RopeConfig& rope, int head_dim);

}  // namespace bifocal
