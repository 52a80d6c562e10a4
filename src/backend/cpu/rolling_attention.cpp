#include "backend/cpu/rolling_attention.h"

#include <cmath>

#include "backend/cpu/online_softmax.h"

#include "core/thread_pool.h"

namespace bifocal::cpu {

namespace {
// x rotated by `index` with HF's rotate_half pairing; angle formed in float32 as in CpuBackend::rope.
void rotate(const float* x, int head_dim, std::int64_t index, const float* inv_freq, float* out) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = float(index) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
}
}  // namespace

void rolling_window_attention(const AttentionArgs& a, const float* inv_freq) {
  const int group = a.query_heads / a.kv_heads;
  const int d = a.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  ThreadPool::global().parallel_for(std::int64_t(a.n) * a.query_heads, [&](std::int64_t task) {
    const std::int64_t i = task / a.query_heads;
    const int h = int(task % a.query_heads);
    const int kv = h / group;
    const std::int64_t p = a.positions[i];
    std::int64_t visible = 0;
    for (std::int64_t j = 0; j < a.num_keys; ++j) visible += key_visible(a, p, a.key_positions[j]);
    float query[kMaxHeadDim], key[kMaxHeadDim];
    rotate(a.queries + (i * a.query_heads + h) * d, d, visible - 1, inv_freq, query);
    OnlineSoftmax softmax(d);
    std::int64_t index = 0;  // rank of the key among the visible ones, in cache order
    for (std::int64_t j = 0; j < a.num_keys; ++j) {
      if (!key_visible(a, p, a.key_positions[j])) continue;
      rotate(a.keys + (j * a.kv_heads + kv) * d, d, index++, inv_freq, key);
      float score = 0.0f;
      for (int c = 0; c < d; ++c) score += query[c] * key[c];
      softmax.add(score * scale, a.values + (j * a.kv_heads + kv) * d);
    }
    softmax.write(a.out + (i * a.query_heads + h) * d);
  });
}

}  // namespace bifocal::cpu
