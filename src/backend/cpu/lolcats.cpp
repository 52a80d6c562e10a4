#include "backend/cpu/lolcats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.h"

namespace bifocal::cpu {
namespace {

float dot(const float* a, const float* b, int length) {
  float sum = 0;
  for (int i = 0; i < length; ++i) sum += a[i] * b[i];
  return sum;
}

// γ = sigmoid(x), in the form that neither overflows nor cancels for large |x|.
float sigmoid(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

// The window part for one query over the keys first … last (absolute positions), two passes so
// that m is exactly the window row max (DESIGN.md: m subtracted from the softmax term only):
// accumulator[d] = Σ_j e^{s_j−m} v_j, returns Σ_j e^{s_j−m}, s_j = q·k_j/√d.
template <typename KeyRow, typename ValueRow>
float window_softmax(const float* query, int d, std::int64_t first, std::int64_t last, const KeyRow& key_row,
                     const ValueRow& value_row, float* accumulator) {
  const float scale = 1.0f / std::sqrt(float(d));
  float row_max = -INFINITY;
  for (std::int64_t j = first; j <= last; ++j) row_max = std::max(row_max, dot(query, key_row(j), d) * scale);
  std::fill(accumulator, accumulator + d, 0.0f);
  float weight_sum = 0;
  for (std::int64_t j = first; j <= last; ++j) {
    const float weight = std::exp(dot(query, key_row(j), d) * scale - row_max);
    const float* value = value_row(j);
    for (int c = 0; c < d; ++c) accumulator[c] += weight * value[c];
    weight_sum += weight;
  }
  return weight_sum;
}

void check_arguments(const LinearShape& shape, int window, const float* hedgehog_weight, const float* window_factor) {
  linear_check_shape(shape, hedgehog_weight);
  if (window <= 0) throw std::invalid_argument("lolcats: window must be positive");
  if (window_factor == nullptr) throw std::invalid_argument("lolcats: window_factor is required");
}

const float* head_weight_of(const LinearShape& shape, const float* hedgehog_weight, std::int64_t kv_head) {
  if (shape.feature != FeatureMap::Hedgehog) return nullptr;
  return hedgehog_weight + kv_head * shape.head_dim * kHedgehogWidth;
}

}  // namespace

std::int64_t lolcats_window_floats(const LinearShape& shape, int window) {
  return std::int64_t(window) * shape.kv_heads * shape.head_dim;
}

void lolcats_reset(const LinearShape& shape, int window, LolcatsState state) {
  std::fill(state.window_keys, state.window_keys + lolcats_window_floats(shape, window), 0.0f);
  std::fill(state.window_values, state.window_values + lolcats_window_floats(shape, window), 0.0f);
  linear_reset(shape, state.linear);
  *state.tokens_seen = 0;
}

void lolcats_step_by_step(const LinearShape& shape, int window, const float* hedgehog_weight, const float* window_factor,
                          const float* q, const float* k, const float* v, int n, LolcatsState state, float* out) {
  check_arguments(shape, window, hedgehog_weight, window_factor);
  const int d = shape.head_dim, f = shape.feature_dim(), group = shape.group();
  const int query_heads = shape.query_heads, kv_heads = shape.kv_heads;
  const std::int64_t start = *state.tokens_seen;
  // One task per KV head: it owns that head's ring slice and linear state.
  ThreadPool::global().parallel_for(kv_heads, [&](std::int64_t kv) {
    const float* weight = head_weight_of(shape, hedgehog_weight, kv);
    float* matrix = state.linear.matrix + kv * f * d;
    float* normalizer = state.linear.normalizer + kv * f;
    auto ring_key = [&](std::int64_t position) { return state.window_keys + ((position % window) * kv_heads + kv) * d; };
    auto ring_value = [&](std::int64_t position) {
      return state.window_values + ((position % window) * kv_heads + kv) * d;
    };
    float phi[kMaxFeatureDim];
    for (int i = 0; i < n; ++i) {
      const std::int64_t t = start + i;
      // Key t − w leaves W(t) = {t−w+1 … t}: it enters the linear state, and token t takes its slot
      // (slot t % w, which holds key t − w until the copy below).
      if (t >= window) {
        linear_feature_map(shape, weight, ring_key(t), phi);
        linear_absorb_key(phi, ring_value(t), f, d, matrix, normalizer);
      }
      const std::int64_t kv_row = (std::int64_t(i) * kv_heads + kv) * d;
      std::copy(k + kv_row, k + kv_row + d, ring_key(t));
      std::copy(v + kv_row, v + kv_row + d, ring_value(t));

      for (int g = 0; g < group; ++g) {
        const std::int64_t head = kv * group + g;
        const std::int64_t q_row = (std::int64_t(i) * query_heads + head) * d;
        float* o = out + q_row;
        const float window_sum =
            window_softmax(q + q_row, d, std::max<std::int64_t>(0, t - window + 1), t, ring_key, ring_value, o);
        const float gamma = sigmoid(window_factor[head]);
        for (int c = 0; c < d; ++c) o[c] *= gamma;
        linear_feature_map(shape, weight, q + q_row, phi);
        // DESIGN.md: y = (γ Σ_W e^{s−m} v + φ(q)ᵀS) / (γ Σ_W e^{s−m} + φ(q)ᵀz), S, z over keys outside W.
        const float denominator = gamma * window_sum + linear_add_state_read(phi, matrix, normalizer, f, d, o);
        for (int c = 0; c < d; ++c) o[c] /= denominator;
      }
    }
  });
  *state.tokens_seen = start + n;
}

void lolcats_prefill(const LinearShape& shape, int window, const float* hedgehog_weight, const float* window_factor,
                     const float* q, const float* k, const float* v, int n, LolcatsState state, float* out) {
  check_arguments(shape, window, hedgehog_weight, window_factor);
  const int d = shape.head_dim, f = shape.feature_dim(), group = shape.group();
  const int kv_heads = shape.kv_heads;
  const std::int64_t q_stride = std::int64_t(shape.query_heads) * d, kv_stride = std::int64_t(kv_heads) * d;
  const std::int64_t start = *state.tokens_seen;
  ThreadPool::global().parallel_for(kv_heads, [&](std::int64_t kv) {
    // Key or value at an absolute position in [start − w, start + n): the ring holds the ones
    // before this call (not overwritten until the end), the inputs the new ones.
    auto key_at = [&](std::int64_t position) {
      return position >= start ? k + (position - start) * kv_stride + kv * d
                               : state.window_keys + ((position % window) * kv_heads + kv) * d;
    };
    auto value_at = [&](std::int64_t position) {
      return position >= start ? v + (position - start) * kv_stride + kv * d
                               : state.window_values + ((position % window) * kv_heads + kv) * d;
    };

    // The linear part is linear attention over the stream of keys leaving the window: at token
    // t = start + i the key t − w enters the state (none while t < w, the first `first_key` tokens).
    const int first_key = int(std::clamp<std::int64_t>(window - start, 0, n));
    std::vector<float> leaving_keys(std::size_t(n) * d), leaving_values(std::size_t(n) * d);
    for (int i = first_key; i < n; ++i) {
      const std::int64_t leaving = start + i - window;
      std::copy(key_at(leaving), key_at(leaving) + d, &leaving_keys[std::size_t(i) * d]);
      std::copy(value_at(leaving), value_at(leaving) + d, &leaving_values[std::size_t(i) * d]);
    }
    std::vector<float> linear_denominators(std::size_t(n) * group);
    const std::int64_t first_query = kv * group * d;  // the group's query heads are consecutive
    linear_head_chunkwise(shape, head_weight_of(shape, hedgehog_weight, kv), n, kLolcatsPrefillChunk,
                          q + first_query, q_stride, leaving_keys.data(), leaving_values.data(), d, first_key,
                          state.linear.matrix + kv * f * d, state.linear.normalizer + kv * f, out + first_query,
                          q_stride, linear_denominators.data());

    // The window part, banded: token t attends to max(0, t−w+1) … t; out holds φ(q)ᵀS so far.
    std::vector<float> window_numerator(d);
    for (int i = 0; i < n; ++i) {
      const std::int64_t t = start + i;
      for (int g = 0; g < group; ++g) {
        const std::int64_t head = kv * group + g;
        float* o = out + i * q_stride + head * d;
        const float window_sum = window_softmax(q + i * q_stride + head * d, d, std::max<std::int64_t>(0, t - window + 1),
                                                t, key_at, value_at, window_numerator.data());
        const float gamma = sigmoid(window_factor[head]);
        // DESIGN.md: y = (γ Σ_W e^{s−m} v + φ(q)ᵀS) / (γ Σ_W e^{s−m} + φ(q)ᵀz).
        const float denominator = gamma * window_sum + linear_denominators[std::size_t(i) * group + g];
        for (int c = 0; c < d; ++c) o[c] = (gamma * window_numerator[c] + o[c]) / denominator;
      }
    }

    // The last min(w, start + n) tokens now fill the ring.
    for (std::int64_t position = std::max(start, start + n - window); position < start + n; ++position) {
      std::copy(key_at(position), key_at(position) + d, state.window_keys + ((position % window) * kv_heads + kv) * d);
      std::copy(value_at(position), value_at(position) + d,
                state.window_values + ((position % window) * kv_heads + kv) * d);
    }
  });
  *state.tokens_seen = start + n;
}

}  // namespace bifocal::cpu
