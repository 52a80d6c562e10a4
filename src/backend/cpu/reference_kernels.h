// Naive reference versions of the CPU backend's kernels, written for obviousness, not speed:
// double accumulation, an explicit mask, two-pass softmax. Tests compare the backend to these.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace bifocal::reference {

// out[n, m] = x[n, k] · w[m, k]ᵀ + bias
std::vector<float> matmul(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias, int n,
                          int k, int m);
// Attention with the mask of AttentionArgs written out and the learned sink as an extra logit;
// fills args.probe_mass too when it is set.
std::vector<float> attention(const AttentionArgs& args);
// RoPE as a rotation of each pair (x_i, x_{i+d/2}) by angle p · inv_freq_i, in double.
std::vector<float> rope(const std::vector<float>& x, int n, int heads, int head_dim, const std::vector<std::int64_t>& positions,
                        const std::vector<float>& inv_freq);
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, int rows, int dim, float eps);

}  // namespace bifocal::reference
