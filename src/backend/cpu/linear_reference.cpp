#include "backend/cpu/linear_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace bifocal::reference {
namespace {

using cpu::FeatureMap;
using cpu::kHedgehogWidth;
using cpu::LinearShape;

const float* head_weight_of(const LinearShape& shape, const std::vector<float>& hedgehog_weight, int kv_head) {
  if (shape.feature != FeatureMap::Hedgehog) return nullptr;
  return hedgehog_weight.data() + std::size_t(kv_head) * shape.head_dim * kHedgehogWidth;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// φ of every key: features[t][kv].
std::vector<std::vector<std::vector<double>>> key_features(const LinearShape& shape,
                                                           const std::vector<float>& hedgehog_weight,
                                                           const std::vector<float>& k, int n) {
  std::vector<std::vector<std::vector<double>>> features(n);
  for (int t = 0; t < n; ++t)
    for (int kv = 0; kv < shape.kv_heads; ++kv)
      features[t].push_back(linear_feature_map(shape, head_weight_of(shape, hedgehog_weight, kv),
                                               &k[(std::size_t(t) * shape.kv_heads + kv) * shape.head_dim]));
  return features;
}

}  // namespace

std::vector<double> linear_feature_map(const LinearShape& shape, const float* head_weight, const float* x) {
  const int d = shape.head_dim;
  if (shape.feature == FeatureMap::Elu1) {
    std::vector<double> phi(d);
    for (int i = 0; i < d; ++i) phi[i] = x[i] > 0 ? x[i] + 1.0 : std::exp(double(x[i]));  // elu(x) + 1
    return phi;
  }
  std::vector<double> logits(kHedgehogWidth, 0.0);
  for (int c = 0; c < kHedgehogWidth; ++c)
    for (int i = 0; i < d; ++i) logits[c] += double(x[i]) * head_weight[std::size_t(i) * kHedgehogWidth + c];
  // [softmax(l), softmax(−l)], each shifted by its own maximum.
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  const double min_logit = *std::min_element(logits.begin(), logits.end());
  std::vector<double> phi(2 * kHedgehogWidth);
  double positive_sum = 0, negative_sum = 0;
  for (int c = 0; c < kHedgehogWidth; ++c) {
    positive_sum += phi[c] = std::exp(logits[c] - max_logit);
    negative_sum += phi[kHedgehogWidth + c] = std::exp(min_logit - logits[c]);
  }
  for (int c = 0; c < kHedgehogWidth; ++c) {
    phi[c] /= positive_sum;
    phi[kHedgehogWidth + c] /= negative_sum;
  }
  return phi;
}

std::vector<float> linear_attention(const LinearShape& shape, const std::vector<float>& hedgehog_weight,
                                    const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n, double eps) {
  const int d = shape.head_dim, group = shape.query_heads / shape.kv_heads;
  const auto phi_k = key_features(shape, hedgehog_weight, k, n);
  std::vector<float> out(std::size_t(n) * shape.query_heads * d);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < shape.query_heads; ++h) {
      const int kv = h / group;
      const std::size_t q_row = (std::size_t(t) * shape.query_heads + h) * d;
      const auto phi_q = linear_feature_map(shape, head_weight_of(shape, hedgehog_weight, kv), &q[q_row]);
      std::vector<double> numerator(d, 0.0);
      double denominator = 0;
      for (int j = 0; j <= t; ++j) {
        const double score = dot(phi_q, phi_k[j][kv]);
        for (int c = 0; c < d; ++c) numerator[c] += score * v[(std::size_t(j) * shape.kv_heads + kv) * d + c];
        denominator += score;
      }
      for (int c = 0; c < d; ++c) out[q_row + c] = float(numerator[c] / (denominator + eps));
    }
  return out;
}

std::vector<float> lolcats(const LinearShape& shape, int window, const std::vector<float>& hedgehog_weight,
                           const std::vector<float>& window_factor, const std::vector<float>& q,
                           const std::vector<float>& k, const std::vector<float>& v, int n) {
  const int d = shape.head_dim, group = shape.query_heads / shape.kv_heads;
  const auto phi_k = key_features(shape, hedgehog_weight, k, n);
  std::vector<float> out(std::size_t(n) * shape.query_heads * d);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < shape.query_heads; ++h) {
      const int kv = h / group;
      const std::size_t q_row = (std::size_t(t) * shape.query_heads + h) * d;
      const float* query = &q[q_row];
      auto value = [&](int j, int c) { return double(v[(std::size_t(j) * shape.kv_heads + kv) * d + c]); };
      const int window_start = std::max(0, t - window + 1);

      // Softmax term over W(t), shifted by the window row max m.
      std::vector<double> scores;
      for (int j = window_start; j <= t; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(query[c]) * k[(std::size_t(j) * shape.kv_heads + kv) * d + c];
        scores.push_back(s / std::sqrt(double(d)));
      }
      const double row_max = *std::max_element(scores.begin(), scores.end());
      const double gamma = 1.0 / (1.0 + std::exp(-double(window_factor[h])));
      std::vector<double> numerator(d, 0.0);
      double denominator = 0;
      for (int j = window_start; j <= t; ++j) {
        const double weight = gamma * std::exp(scores[j - window_start] - row_max);
        for (int c = 0; c < d; ++c) numerator[c] += weight * value(j, c);
        denominator += weight;
      }

      // Linear term over the keys that have left the window, j < t − w + 1.
      const auto phi_q = linear_feature_map(shape, head_weight_of(shape, hedgehog_weight, kv), query);
      for (int j = 0; j < window_start; ++j) {
        const double weight = dot(phi_q, phi_k[j][kv]);
        for (int c = 0; c < d; ++c) numerator[c] += weight * value(j, c);
        denominator += weight;
      }
      for (int c = 0; c < d; ++c) out[q_row + c] = float(numerator[c] / denominator);
    }
  return out;
}

}  // namespace bifocal::reference
