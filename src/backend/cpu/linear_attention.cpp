#include "backend/cpu/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace bifocal::cpu {
namespace {

float dot(const float* a, const float* b, int length) {
  float sum = 0;
  for (int i = 0; i < length; ++i) sum += a[i] * b[i];
  return sum;
}

// row[0 … length) += scale · x
void add_scaled(float* row, float scale, const float* x, int length) {
  for (int i = 0; i < length; ++i) row[i] += scale * x[i];
}

const float* head_weight_of(const LinearShape& shape, const float* hedgehog_weight, int kv_head) {
  if (shape.feature != FeatureMap::Hedgehog) return nullptr;
  return hedgehog_weight + std::int64_t(kv_head) * shape.head_dim * kHedgehogWidth;
}

}  // namespace

void linear_absorb_key(const float* phi_k, const float* value, int f, int d, float* matrix, float* normalizer) {
  for (int a = 0; a < f; ++a) {
    add_scaled(matrix + std::int64_t(a) * d, phi_k[a], value, d);
    normalizer[a] += phi_k[a];
  }
}

float linear_add_state_read(const float* phi_q, const float* matrix, const float* normalizer, int f, int d,
                            float* numerator) {
  for (int a = 0; a < f; ++a) add_scaled(numerator, phi_q[a], matrix + std::int64_t(a) * d, d);
  return dot(phi_q, normalizer, f);
}

std::int64_t linear_matrix_floats(const LinearShape& shape) {
  return std::int64_t(shape.kv_heads) * shape.feature_dim() * shape.head_dim;
}

std::int64_t linear_normalizer_floats(const LinearShape& shape) {
  return std::int64_t(shape.kv_heads) * shape.feature_dim();
}

void linear_check_shape(const LinearShape& shape, const float* hedgehog_weight) {
  if (shape.kv_heads <= 0 || shape.query_heads <= 0 || shape.query_heads % shape.kv_heads != 0)
    throw std::invalid_argument("linear attention: query heads (" + std::to_string(shape.query_heads) +
                                ") must be a positive multiple of KV heads (" + std::to_string(shape.kv_heads) + ")");
  if (shape.head_dim <= 0 || shape.head_dim > kMaxHeadDim)
    throw std::invalid_argument("linear attention: head dimension " + std::to_string(shape.head_dim) +
                                " outside 1 … " + std::to_string(kMaxHeadDim));
  if (shape.feature == FeatureMap::Hedgehog && hedgehog_weight == nullptr)
    throw std::invalid_argument("linear attention: the hedgehog feature map needs feature_map.weight");
}

void linear_reset(const LinearShape& shape, LinearState state) {
  std::fill(state.matrix, state.matrix + linear_matrix_floats(shape), 0.0f);
  std::fill(state.normalizer, state.normalizer + linear_normalizer_floats(shape), 0.0f);
}

void linear_feature_map(const LinearShape& shape, const float* head_weight, const float* x, float* phi) {
  const int d = shape.head_dim;
  if (shape.feature == FeatureMap::Elu1) {
    // elu(x) + 1 = x + 1 for x > 0, e^x for x ≤ 0 (written as e^x, not expm1(x) + 1, to keep
    // small values exact).
    for (int i = 0; i < d; ++i) phi[i] = x[i] > 0 ? x[i] + 1.0f : std::exp(x[i]);
    return;
  }
  // DESIGN.md: φ(x) = [softmax(xW), softmax(−xW)], W = head_weight [d, 64].
  float logits[kHedgehogWidth] = {};
  for (int i = 0; i < d; ++i) add_scaled(logits, x[i], head_weight + std::int64_t(i) * kHedgehogWidth, kHedgehogWidth);
  const auto [lowest, highest] = std::minmax_element(logits, logits + kHedgehogWidth);
  const float max_logit = *highest, min_logit = *lowest;  // softmax(−l) subtracts max(−l) = −min(l)
  float positive_sum = 0, negative_sum = 0;
  for (int c = 0; c < kHedgehogWidth; ++c) {
    positive_sum += phi[c] = std::exp(logits[c] - max_logit);
    negative_sum += phi[kHedgehogWidth + c] = std::exp(min_logit - logits[c]);
  }
  for (int c = 0; c < kHedgehogWidth; ++c) {
    phi[c] /= positive_sum;
    phi[kHedgehogWidth + c] /= negative_sum;
  }
}

void linear_attention_recurrent(const LinearShape& shape, const float* hedgehog_weight, const float* q, const float* k,
                                const float* v, int n, LinearState state, float* out) {
  linear_check_shape(shape, hedgehog_weight);
  const int d = shape.head_dim, f = shape.feature_dim(), group = shape.group();
  const int query_heads = shape.query_heads, kv_heads = shape.kv_heads;
  // One task per KV head: it owns that head's state and writes its G query heads.
  ThreadPool::global().parallel_for(kv_heads, [&](std::int64_t kv) {
    const float* weight = head_weight_of(shape, hedgehog_weight, int(kv));
    float* matrix = state.matrix + kv * f * d;
    float* normalizer = state.normalizer + kv * f;
    float phi[kMaxFeatureDim];
    for (int t = 0; t < n; ++t) {
      const std::int64_t kv_row = (std::int64_t(t) * kv_heads + kv) * d;
      linear_feature_map(shape, weight, k + kv_row, phi);
      linear_absorb_key(phi, v + kv_row, f, d, matrix, normalizer);  // S_t, z_t include token t
      for (int g = 0; g < group; ++g) {
        const std::int64_t q_row = (std::int64_t(t) * query_heads + kv * group + g) * d;
        linear_feature_map(shape, weight, q + q_row, phi);
        float* o = out + q_row;
        std::fill(o, o + d, 0.0f);
        const float denominator = linear_add_state_read(phi, matrix, normalizer, f, d, o) + kLinearEps;
        for (int c = 0; c < d; ++c) o[c] /= denominator;
      }
    }
  });
}

void linear_head_chunkwise(const LinearShape& shape, const float* head_weight, int n, int chunk_size, const float* q,
                           std::int64_t q_token_stride, const float* k, const float* v,
                           std::int64_t kv_token_stride, int first_key, float* matrix, float* normalizer,
                           float* numerators, std::int64_t out_token_stride, float* denominators) {
  const int d = shape.head_dim, f = shape.feature_dim(), group = shape.group();
  std::vector<float> phi_q(std::size_t(chunk_size) * group * f), phi_k(std::size_t(chunk_size) * f);
  for (int chunk_start = 0; chunk_start < n; chunk_start += chunk_size) {
    const int length = std::min(chunk_size, n - chunk_start);
    const int first_local_key = std::clamp(first_key - chunk_start, 0, length);  // keys of this chunk start here
    for (int j = first_local_key; j < length; ++j)
      linear_feature_map(shape, head_weight, k + (chunk_start + j) * kv_token_stride, &phi_k[std::size_t(j) * f]);
    for (int i = 0; i < length; ++i)
      for (int g = 0; g < group; ++g)
        linear_feature_map(shape, head_weight, q + (chunk_start + i) * q_token_stride + g * d,
                           &phi_q[(std::size_t(i) * group + g) * f]);

    for (int i = 0; i < length; ++i) {
      const int token = chunk_start + i;
      for (int g = 0; g < group; ++g) {
        const float* phi = &phi_q[(std::size_t(i) * group + g) * f];
        float* numerator = numerators + token * out_token_stride + g * d;
        // Inter-chunk: the state as it was before this chunk.
        std::fill(numerator, numerator + d, 0.0f);
        float denominator = linear_add_state_read(phi, matrix, normalizer, f, d, numerator);
        // Intra-chunk: causal φ(q_i)ᵀφ(k_j) for the chunk's keys j ≤ i.
        for (int j = first_local_key; j <= i; ++j) {
          const float score = dot(phi, &phi_k[std::size_t(j) * f], f);
          add_scaled(numerator, score, v + (chunk_start + j) * kv_token_stride, d);
          denominator += score;
        }
        denominators[std::int64_t(token) * group + g] = denominator;
      }
    }
    // The chunk's keys enter the state: S += φ(K)ᵀ V, z += Σ φ(k_j).
    for (int j = first_local_key; j < length; ++j)
      linear_absorb_key(&phi_k[std::size_t(j) * f], v + (chunk_start + j) * kv_token_stride, f, d, matrix, normalizer);
  }
}

void linear_attention_chunkwise(const LinearShape& shape, const float* hedgehog_weight, const float* q, const float* k,
                                const float* v, int n, int chunk_size, LinearState state, float* out) {
  linear_check_shape(shape, hedgehog_weight);
  if (chunk_size <= 0) throw std::invalid_argument("linear attention: chunk size must be positive");
  const int d = shape.head_dim, f = shape.feature_dim(), group = shape.group();
  const std::int64_t q_stride = std::int64_t(shape.query_heads) * d, kv_stride = std::int64_t(shape.kv_heads) * d;
  ThreadPool::global().parallel_for(shape.kv_heads, [&](std::int64_t kv) {
    std::vector<float> denominators(std::size_t(n) * group);
    const std::int64_t first_query = kv * group * d;  // the group's query heads are consecutive
    linear_head_chunkwise(shape, head_weight_of(shape, hedgehog_weight, int(kv)), n, chunk_size, q + first_query,
                          q_stride, k + kv * d, v + kv * d, kv_stride, 0, state.matrix + kv * f * d,
                          state.normalizer + kv * f, out + first_query, q_stride, denominators.data());
    // DESIGN.md: o = φ(q)ᵀ S / (φ(q)ᵀ z + ε).
    for (int t = 0; t < n; ++t)
      for (int g = 0; g < group; ++g) {
        float* o = out + t * q_stride + first_query + g * d;
        const float denominator = denominators[std::size_t(t) * group + g] + kLinearEps;
        for (int c = 0; c < d; ++c) o[c] /= denominator;
      }
  });
}

}  // namespace bifocal::cpu
