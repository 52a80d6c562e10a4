// CPU kernels of the linear-attention mixer (DESIGN.md "Mixers: exact semantics", linear):
// o_t = φ(q_t)ᵀ S_t / (φ(q_t)ᵀ z_t + ε), S_t = Σ_{j≤t} φ(k_j) v_jᵀ, z_t = Σ_{j≤t} φ(k_j), state in fp32.
// One state per KV head, read by the G = Hq / Hkv query heads of its group.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/backend.h"

namespace bifocal::cpu {

// ε of the linear-attention denominator (DESIGN.md: φ(q)ᵀ z + ε).
inline constexpr float kLinearEps = 1e-6f;
// Width of one hedgehog softmax: W is d × 64 per KV head, φ(x) = [softmax(xW), softmax(−xW)].
inline constexpr int kHedgehogWidth = 64;
// Largest φ length: elu1 keeps the head dimension (≤ kMaxHeadDim), hedgehog is 128. Bounds the
// stack buffers of the allocation-free decode paths.
inline constexpr int kMaxFeatureDim = std::max(kMaxHeadDim, 2 * kHedgehogWidth);

enum class FeatureMap { Elu1, Hedgehog };

struct LinearShape {
  int query_heads = 0, kv_heads = 0, head_dim = 0;
  FeatureMap feature = FeatureMap::Elu1;
  // Length f of φ(x): elu1 keeps the head dimension, hedgehog concatenates two 64-wide softmaxes.
  int feature_dim() const { return feature == FeatureMap::Elu1 ? head_dim : 2 * kHedgehogWidth; }
  int group() const { return query_heads / kv_heads; }
};

// Floats of the caller-allocated state (DESIGN.md "Memory accounting": the matrix f × d per KV
// head, the published size, and its normalizer f per KV head).
std::int64_t linear_matrix_floats(const LinearShape&);
std::int64_t linear_normalizer_floats(const LinearShape&);

// matrix: S, [Hkv, f, d]; normalizer: z, [Hkv, f]; both fp32, owned by the caller.
struct LinearState {
  float* matrix;
  float* normalizer;
};

// Throws std::invalid_argument for a shape the kernels cannot run (heads not divisible, head
// dimension outside 1 … kMaxHeadDim, a hedgehog map without weights).
void linear_check_shape(const LinearShape&, const float* hedgehog_weight);

void linear_reset(const LinearShape&, LinearState);

// φ(x) for one head vector x[d] into phi[feature_dim()]. head_weight is the KV head's hedgehog
// slice [d, 64] (ignored for elu1). elu1: φ(x)_i = elu(x_i) + 1, i.e. x_i + 1 for x_i > 0, e^{x_i}
// otherwise. hedgehog: both softmaxes subtract their own maximum, so large inputs stay finite.
void linear_feature_map(const LinearShape&, const float* head_weight, const float* x, float* phi);

// Building blocks for one KV head's state S [f, d], z [f] (shared with LoLCATs):
// S += φ(k) vᵀ, z += φ(k).
void linear_absorb_key(const float* phi_k, const float* value, int f, int d, float* matrix, float* normalizer);
// numerator[d] += φ(q)ᵀ S; returns φ(q)ᵀ z.
float linear_add_state_read(const float* phi_q, const float* matrix, const float* normalizer, int f, int d,
                            float* numerator);

// hedgehog_weight: [Hkv, d, 64] (model.layers.i.self_attn.feature_map.weight), may be null for
// elu1; query head h uses the slice of its KV head h / G, as keys of that KV head do.
// q: [n, Hq, d]; k, v: [n, Hkv, d] (already rotated); out: [n, Hq, d]. The state is advanced by
// the n tokens, so consecutive calls continue one sequence.

// Token by token: S and z are updated with token t, then read (S_t includes token t). Allocates
// nothing: this is the decode path.
void linear_attention_recurrent(const LinearShape&, const float* hedgehog_weight, const float* q, const float* k,
                                const float* v, int n, LinearState, float* out);
// The prefill form: per chunk of chunk_size tokens, the state before the chunk (inter-chunk
// term) plus causal φ(Q)φ(K)ᵀ inside the chunk (intra-chunk term), then one state update.
// Same result as the recurrent form to fp32 rounding; scratch is O(chunk_size · f) per KV head.
void linear_attention_chunkwise(const LinearShape&, const float* hedgehog_weight, const float* q, const float* k,
                                const float* v, int n, int chunk_size, LinearState, float* out);

// The chunkwise core for one KV head, shared with the LoLCATs prefill; unnormalised, no ε.
// For token i in [0, n) and query head g in [0, G), with queries at q + i·q_token_stride + g·d
// (the group's heads consecutive) and keys/values at k, v + i·kv_token_stride:
//   numerators row (i, g) = φ(q_i,g)ᵀ S_i  -> numerators + i·out_token_stride + g·d
//   denominators[i·G + g] = φ(q_i,g)ᵀ z_i
// where S_i, z_i hold the state passed in plus keys first_key … i (tokens before first_key
// contribute no key: LoLCATs has nothing leaving the window yet). The state ends holding
// keys first_key … n−1 as well. matrix [f, d], normalizer [f] are this KV head's state.
void linear_head_chunkwise(const LinearShape&, const float* head_weight, int n, int chunk_size, const float* q,
                           std::int64_t q_token_stride, const float* k, const float* v,
                           std::int64_t kv_token_stride, int first_key, float* matrix, float* normalizer,
                           float* numerators, std::int64_t out_token_stride, float* denominators);

}  // namespace bifocal::cpu
