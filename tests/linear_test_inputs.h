// Random inputs of one linear-attention layer for the CPU mixer tests (linear attention and
// LoLCATs share them): q, k, v for n tokens and a hedgehog W that differs per KV head.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "backend/cpu/linear_attention.h"
#include "numerics.h"

namespace bifocal::testing {

struct LinearInputs {
  std::vector<float> weight, q, k, v;
  LinearInputs(const cpu::LinearShape& shape, int n, std::mt19937& rng, float scale = 1.0f) {
    if (shape.feature == cpu::FeatureMap::Hedgehog)
      weight = random_vector(std::size_t(shape.kv_heads) * shape.head_dim * cpu::kHedgehogWidth, rng, 0.3f);
    q = random_vector(std::size_t(n) * shape.query_heads * shape.head_dim, rng, scale);
    k = random_vector(std::size_t(n) * shape.kv_heads * shape.head_dim, rng, scale);
    v = random_vector(std::size_t(n) * shape.kv_heads * shape.head_dim, rng);
  }
  // The hedgehog W, or null for elu1 (the kernels' convention).
  const float* w() const { return weight.empty() ? nullptr : weight.data(); }
};

inline std::string describe(const cpu::LinearShape& shape) {
  return std::string(shape.feature == cpu::FeatureMap::Elu1 ? "elu1" : "hedgehog") + " Hq=" +
         std::to_string(shape.query_heads) + " Hkv=" + std::to_string(shape.kv_heads) +
         " d=" + std::to_string(shape.head_dim);
}

}  // namespace bifocal::testing
