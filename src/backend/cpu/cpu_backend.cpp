#include "backend/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/online_softmax.h"
#include "core/thread_pool.h"

namespace bifocal {

void CpuBackend::matmul(const float* x, const float* w, const float* bias, int n, int k, int m, float* out) {
  if (n == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m, k, 1.0f, w, k, x, 1, 0.0f, out, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, k, w, k, 0.0f, out, m);
  }
  if (bias == nullptr) return;
  for (int row = 0; row < n; ++row)
    for (int col = 0; col < m; ++col) out[std::int64_t(row) * m + col] += bias[col];
}

void CpuBackend::rmsnorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) {
  ThreadPool::global().parallel_for(rows, [&](std::int64_t row) {
    const float* in = x + row * dim;
    float* o = out + row * dim;
    double sum_squares = 0;
    for (int i = 0; i < dim; ++i) sum_squares += double(in[i]) * in[i];
    const float inverse_rms = float(1.0 / std::sqrt(sum_squares / dim + eps));
    for (int i = 0; i < dim; ++i) o[i] = weight[i] * (in[i] * inverse_rms);
  });
}

// Angles are formed in float32 as HF does (inv_freq · position in float32, then cos/sin), so the
// rotation matches the reference to float32 rounding even at large positions.
void CpuBackend::rope(float* x, int n, int heads, int head_dim, const std::int64_t* positions, const float* inv_freq) {
  const int half = head_dim / 2;
  ThreadPool::global().parallel_for(n, [&](std::int64_t token) {
    const float position = float(positions[token]);
    for (int i = 0; i < half; ++i) {
      const float angle = position * inv_freq[i];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int h = 0; h < heads; ++h) {
        float* head = x + (token * heads + h) * head_dim;
        const float a = head[i], b = head[i + half];
        head[i] = a * c - b * s;
        head[i + half] = b * c + a * s;
      }
    }
  });
}

namespace {

// The attention probe (backend.h): the softmax weight of the visible keys at positions
// < probe_first_keys, rescored with the same float operations as the main loop and normalised by
// its final max and denominator (which hold the learned sink, if any). Keys without explicit
// positions sit at their index, so only the first few are rescored; a ring buffer's positions
// are scanned, which costs integer compares only.
float first_key_mass(const AttentionArgs& a, const float* q, int kv, std::int64_t p, float running_max, float denominator) {
  const int d = a.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  const std::int64_t end = a.key_positions ? a.num_keys : std::min<std::int64_t>(a.num_keys, a.probe_first_keys);
  float mass = 0.0f;
  for (std::int64_t j = 0; j < end; ++j) {
    const std::int64_t kp = a.key_positions ? a.key_positions[j] : j;
    if (kp >= a.probe_first_keys || !key_visible(a, p, kp)) continue;
    const float* k = a.keys + (j * a.kv_heads + kv) * d;
    float score = 0.0f;
    for (int c = 0; c < d; ++c) score += q[c] * k[c];
    score *= scale;
    mass += std::exp(score - running_max);
  }
  return mass / denominator;
}

}  // namespace

// Online softmax over the visible keys (DESIGN.md "full", "swa"), one pass (online_softmax.h); a
// learned sink S_h seeds m = S_h, l = 1 (DESIGN.md: the sink enters the denominator only).
void CpuBackend::attention(const AttentionArgs& a) {
  const int group = a.query_heads / a.kv_heads;
  const float scale = 1.0f / std::sqrt(float(a.head_dim));
  const int d = a.head_dim;
  ThreadPool::global().parallel_for(std::int64_t(a.n) * a.query_heads, [&](std::int64_t task) {
    const std::int64_t i = task / a.query_heads;
    const int h = int(task % a.query_heads);
    const int kv = h / group;
    const float* q = a.queries + (i * a.query_heads + h) * d;
    const std::int64_t p = a.positions[i];
    cpu::OnlineSoftmax softmax(d);
    if (a.learned_sinks != nullptr) softmax.seed_sink(a.learned_sinks[h]);
    // Keys without explicit positions sit at their index: only 0 … p can be visible.
    const std::int64_t end = a.key_positions ? a.num_keys : std::min(a.num_keys, p + 1);
    for (std::int64_t j = 0; j < end; ++j) {
      if (!key_visible(a, p, a.key_positions ? a.key_positions[j] : j)) continue;
      const float* k = a.keys + (j * a.kv_heads + kv) * d;
      float score = 0.0f;
      for (int c = 0; c < d; ++c) score += q[c] * k[c];
      softmax.add(score * scale, a.values + (j * a.kv_heads + kv) * d);
    }
    softmax.write(a.out + (i * a.query_heads + h) * d);
    if (a.probe_mass != nullptr)
      a.probe_mass[i * a.query_heads + h] = first_key_mass(a, q, kv, p, softmax.running_max(), softmax.denominator());
  });
}

void CpuBackend::swiglu(const float* gate, const float* up, std::int64_t count, float* out) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void CpuBackend::add(float* x, const float* y, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void CpuBackend::embedding(const float* table, const std::int32_t* ids, int n, int dim, float* out) {
  for (int i = 0; i < n; ++i) std::memcpy(out + std::int64_t(i) * dim, table + std::int64_t(ids[i]) * dim, sizeof(float) * dim);
}

}  // namespace bifocal
