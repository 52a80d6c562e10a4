#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace bifocal {

std::vector<float> rope_inverse_frequencies(const RopeConfig& rope, int head_dim) {
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) {
    // float32 like HF's buffer: 1 / theta^(2i/d) with the exponent formed in float32.
    const float exponent = float(2 * i) / float(head_dim);
    inv_freq[i] = 1.0f / std::pow(float(rope.theta), exponent);
  }
  switch (rope.type) {
    case RopeConfig::Type::Default:
      break;
    case RopeConfig::Type::Linear:
      for (float& f : inv_freq) f = float(f / rope.factor);
      break;
    case RopeConfig::Type::Llama3: {
      // Llama 3.1: wavelengths longer than original_max/low_freq_factor are stretched by
      // `factor`, shorter than original_max/high_freq_factor kept, the band between blended.
      const double low_freq_wavelength = rope.original_max_position / rope.low_freq_factor;
      const double high_freq_wavelength = rope.original_max_position / rope.high_freq_factor;
      for (float& f : inv_freq) {
        const double wavelength = 2 * std::numbers::pi / f;
        if (wavelength < high_freq_wavelength) continue;
        if (wavelength > low_freq_wavelength) {
          f = float(f / rope.factor);
          continue;
        }
        const double smooth = (rope.original_max_position / wavelength - rope.low_freq_factor) /
                              (rope.high_freq_factor - rope.low_freq_factor);
        f = float((1 - smooth) * f / rope.factor + smooth * f);
      }
      break;
    }
  }
  return inv_freq;
}

}  // namespace bifocal
