// Shared numeric helpers of the kernel and mixer tests: fresh random inputs and the relative
// error ‖got − want‖ / ‖want‖ (METHOD: NaN never passes).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace bifocal::testing {

inline std::vector<float> random_vector(std::size_t size, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(size);
  for (float& x : values) x = normal(rng);
  return values;
}

// a followed by b: the outputs of two calls that continue one state, to compare with one call.
inline std::vector<float> concatenate(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ‖got − want‖ / ‖want‖, infinite when got holds a NaN or an infinity.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double difference = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    difference += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(difference / norm);
}

// Largest error seen by a test, printed at its end for the record.
struct ErrorLog {
  const char* what;
  double max_error = 0;
  double add(double error) { return max_error = std::max(max_error, error), error; }
  ~ErrorLog() { std::printf("[ max relative error ] %s: %.3g\n", what, max_error); }
};

}  // namespace bifocal::testing
