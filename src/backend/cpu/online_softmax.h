// The online-softmax recurrence shared by the CPU attention kernels: keys arrive one at a time;
// a running max m and denominator l are kept, and the value accumulator is rescaled by
// e^{m_old − m_new} whenever m grows, so one pass gives Σ e^{s_j−m} v_j / Σ e^{s_j−m}.
#pragma once

#include <cmath>
#include <limits>

#include "backend/backend.h"

namespace bifocal::cpu {

class OnlineSoftmax {
 public:
  explicit OnlineSoftmax(int head_dim) : head_dim_(head_dim) {}

  // A learned sink S enters the denominator only (DESIGN.md): seed m = S, l = e^{S−S} = 1.
  void seed_sink(float logit) {
    running_max_ = logit;
    denominator_ = 1.0f;
  }

  void add(float score, const float* value) {
    if (score > running_max_) {
      const float correction = std::exp(running_max_ - score);
      denominator_ *= correction;
      for (int c = 0; c < head_dim_; ++c) accumulator_[c] *= correction;
      running_max_ = score;
    }
    const float weight = std::exp(score - running_max_);
    denominator_ += weight;
    for (int c = 0; c < head_dim_; ++c) accumulator_[c] += weight * value[c];
  }

  void write(float* out) const {
    for (int c = 0; c < head_dim_; ++c) out[c] = accumulator_[c] / denominator_;
  }

  float running_max() const { return running_max_; }
  float denominator() const { return denominator_; }

 private:
  int head_dim_;
  float running_max_ = -std::numeric_limits<float>::infinity();
  float denominator_ = 0.0f;
  float accumulator_[kMaxHeadDim] = {};
};

}  // namespace bifocal::cpu
