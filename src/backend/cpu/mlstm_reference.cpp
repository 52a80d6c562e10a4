#include "backend/cpu/mlstm_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace bifocal::reference {

MlstmResult mlstm(const cpu::MlstmShape& shape, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& input_gate,
                  const std::vector<float>& forget_gate, int n) {
  const int d = shape.head_dim, hq = shape.query_heads, hkv = shape.kv_heads, states = shape.states;
  const double initial_stabilizer = 0;  // m_0 of a fresh state
  MlstmResult result;
  result.out.assign(std::size_t(n) * hq * d, 0.0f);
  result.matrix.assign(std::size_t(states) * d * d, 0.0f);
  result.normalizer.assign(std::size_t(states) * d, 0.0f);
  result.stabilizer.assign(states, float(initial_stabilizer));
  if (n == 0) return result;

  for (int s = 0; s < states; ++s) {
    const int kv = s / (states / hkv);  // the KV head whose k, v this state absorbs
    // Gates: ĩ = 15·tanh(i/15); logF_t = Σ logsigmoid(15·tanh(f/15)).
    std::vector<double> input(n), log_forget_sum(n);
    double sum = 0;
    for (int t = 0; t < n; ++t) {
      input[t] = 15.0 * std::tanh(double(input_gate[std::size_t(t) * states + s]) / 15.0);
      const double forget = 15.0 * std::tanh(double(forget_gate[std::size_t(t) * states + s]) / 15.0);
      sum += -std::log1p(std::exp(-forget));  // logsigmoid; forget ≥ −15, so exp(15) at most
      log_forget_sum[t] = sum;
    }
    auto key = [&](int t) { return &k[(std::size_t(t) * hkv + kv) * d]; };
    auto value = [&](int t) { return &v[(std::size_t(t) * hkv + kv) * d]; };

    std::vector<double> weight(n);
    double stabilizer = initial_stabilizer;
    for (int t = 0; t < n; ++t) {
      stabilizer = log_forget_sum[t] + initial_stabilizer;
      for (int j = 0; j <= t; ++j)
        stabilizer = std::max(stabilizer, log_forget_sum[t] - log_forget_sum[j] + input[j]);
      for (int j = 0; j <= t; ++j) weight[j] = std::exp(log_forget_sum[t] - log_forget_sum[j] + input[j] - stabilizer);

      for (int h = 0; h < hq; ++h) {
        if (h / (hq / states) != s) continue;  // query head h reads state h / (Hq / S)
        const float* query = &q[(std::size_t(t) * hq + h) * d];
        std::vector<double> numerator(d, 0.0);
        double normalizer = 0;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int a = 0; a < d; ++a) dot += double(query[a]) * key(j)[a];
          const double score = weight[j] * dot / std::sqrt(double(d));
          for (int b = 0; b < d; ++b) numerator[b] += score * value(j)[b];
          normalizer += score;
        }
        const double denominator = std::max(std::abs(normalizer), std::exp(-stabilizer)) + 1e-6;
        for (int b = 0; b < d; ++b) result.out[(std::size_t(t) * hq + h) * d + b] = float(numerator[b] / denominator);
      }
    }

    // The state after the last token: C = Σ_j w_j k_j v_jᵀ, n = Σ_j w_j k_j with the last row's weights.
    std::vector<double> matrix(std::size_t(d) * d, 0.0), normalizer(d, 0.0);
    for (int j = 0; j < n; ++j)
      for (int a = 0; a < d; ++a) {
        const double key_weight = weight[j] * key(j)[a];
        normalizer[a] += key_weight;
        for (int b = 0; b < d; ++b) matrix[std::size_t(a) * d + b] += key_weight * value(j)[b];
      }
    for (int a = 0; a < d; ++a) {
      result.normalizer[std::size_t(s) * d + a] = float(normalizer[a]);
      for (int b = 0; b < d; ++b) result.matrix[(std::size_t(s) * d + a) * d + b] = float(matrix[std::size_t(a) * d + b]);
    }
    result.stabilizer[s] = float(stabilizer);
  }
  return result;
}

}  // namespace bifocal::reference
