// Naive quadratic references of the linear-attention and LoLCATs mixers, from an empty state, in
// double, written straight from DESIGN.md's formulas for tests to compare the kernels against.
#pragma once

#include <vector>

#include "backend/cpu/linear_attention.h"

namespace bifocal::reference {

// φ(x) in double (DESIGN.md: elu1 = elu(x) + 1; hedgehog = [softmax(xW), softmax(−xW)]), with
// head_weight the KV head's [d, 64] slice (unused for elu1).
std::vector<double> linear_feature_map(const cpu::LinearShape&, const float* head_weight, const float* x);

// o_t = Σ_{j≤t} φ(q_t)ᵀφ(k_j) v_j / (Σ_{j≤t} φ(q_t)ᵀφ(k_j) + ε), query head h reading KV head h / G.
// q: [n, Hq, d]; k, v: [n, Hkv, d]; hedgehog_weight: [Hkv, d, 64] or empty for elu1. ε defaults
// to the kernels' kLinearEps; 0 gives the plain ratio (the linear term of LoLCATs has no ε).
std::vector<float> linear_attention(const cpu::LinearShape&, const std::vector<float>& hedgehog_weight,
                                    const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int n, double eps = cpu::kLinearEps);

// LoLCATs with the split written out: W(t) = {max(0, t−w+1) … t} under softmax (scaled by 1/√d,
// minus the window row max m), keys j < t−w+1 under φ(q)ᵀφ(k_j), one shared normalizer,
// γ = sigmoid(window_factor[h]).
std::vector<float> lolcats(const cpu::LinearShape&, int window, const std::vector<float>& hedgehog_weight,
                           const std::vector<float>& window_factor, const std::vector<float>& q,
                           const std::vector<float>& k, const std::vector<float>& v, int n);

}  // namespace bifocal::reference
