#include "backend/cpu/reference_kernels.h"

#include <algorithm>
#include <cmath>

namespace bifocal::reference {

std::vector<float> matmul(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias, int n,
                          int k, int m) {
  std::vector<float> out(std::size_t(n) * m);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double sum = bias.empty() ? 0.0 : bias[j];
      for (int c = 0; c < k; ++c) sum += double(x[std::size_t(i) * k + c]) * w[std::size_t(j) * k + c];
      out[std::size_t(i) * m + j] = float(sum);
    }
  return out;
}

std::vector<float> attention(const AttentionArgs& a) {
  const int d = a.head_dim, group = a.query_heads / a.kv_heads;
  std::vector<float> out(std::size_t(a.n) * a.query_heads * d);
  for (int i = 0; i < a.n; ++i) {
    const std::int64_t p = a.positions[i];
    for (int h = 0; h < a.query_heads; ++h) {
      const int kv = h / group;
      const float* q = a.queries + (std::size_t(i) * a.query_heads + h) * d;
      // The mask written out, then a two-pass softmax with the learned sink as one extra logit
      // whose value row is zero.
      std::vector<double> scores(a.num_keys, -INFINITY);
      for (std::int64_t j = 0; j < a.num_keys; ++j) {
        const std::int64_t kp = a.key_positions ? a.key_positions[j] : j;
        const bool sink = kp < a.sink_tokens;
        const bool allowed = kp <= p && (a.window == 0 || sink || p - kp < a.window - a.sink_tokens);
        if (!allowed) continue;
        const float* k = a.keys + (std::size_t(j) * a.kv_heads + kv) * d;
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += double(q[c]) * k[c];
        scores[j] = dot / std::sqrt(double(d));
      }
      const double sink_logit = a.learned_sinks ? a.learned_sinks[h] : -INFINITY;
      const double max_score = std::max(sink_logit, *std::max_element(scores.begin(), scores.end()));
      double denominator = a.learned_sinks ? std::exp(sink_logit - max_score) : 0.0;
      for (double& s : scores) denominator += (s = std::exp(s - max_score));
      if (a.probe_mass != nullptr) {  // the probe: mass on keys at positions < probe_first_keys
        double mass = 0;
        for (std::int64_t j = 0; j < a.num_keys; ++j)
          if ((a.key_positions ? a.key_positions[j] : j) < a.probe_first_keys) mass += scores[j];
        a.probe_mass[std::size_t(i) * a.query_heads + h] = float(mass / denominator);
      }
      for (int c = 0; c < d; ++c) {
        double sum = 0;
        for (std::int64_t j = 0; j < a.num_keys; ++j) sum += scores[j] * a.values[(std::size_t(j) * a.kv_heads + kv) * d + c];
        out[(std::size_t(i) * a.query_heads + h) * d + c] = float(sum / denominator);
      }
    }
  }
  return out;
}

std::vector<float> rope(const std::vector<float>& x, int n, int heads, int head_dim, const std::vector<std::int64_t>& positions,
                        const std::vector<float>& inv_freq) {
  std::vector<float> out = x;
  const int half = head_dim / 2;
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double angle = double(positions[t]) * inv_freq[i];
        const std::size_t base = (std::size_t(t) * heads + h) * head_dim;
        const double a = x[base + i], b = x[base + i + half];
        out[base + i] = float(a * std::cos(angle) - b * std::sin(angle));
        out[base + i + half] = float(b * std::cos(angle) + a * std::sin(angle));
      }
  return out;
}

std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, int rows, int dim, float eps) {
  std::vector<float> out(x.size());
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += double(x[std::size_t(r) * dim + i]) * x[std::size_t(r) * dim + i];
    const double scale = 1.0 / std::sqrt(sum / dim + eps);
    for (int i = 0; i < dim; ++i) out[std::size_t(r) * dim + i] = float(weight[i] * x[std::size_t(r) * dim + i] * scale);
  }
  return out;
}

}  // namespace bifocal::reference
