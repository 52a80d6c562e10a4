// The operations a transformer forward pass needs, over plain float buffers that live on the
// backend's device. The model (src/model/model.cpp) calls these in the order of the math; the
// CPU backend is the reference, a CUDA backend implements the same calls with kernels.
#pragma once

#include <cstdint>

namespace bifocal {

// Largest head dimension the backends support (Qwen3.5-like shapes use 256).
inline constexpr int kMaxHeadDim = 512;

// Softmax attention of n queries over a list of cached keys, each with its absolute position.
// Query i (at position p) sees key j (at position kp) when kp <= p and
//   window == 0                       (full attention), or
//   kp < sink_tokens                  (a sink token, DESIGN.md swa(w, s)), or
//   p - kp < window - sink_tokens     (the recent part of the window, current token included).
// With learned_sinks, query head h adds e^{S_h} to the softmax denominator only (gpt-oss).
// The optional probe measures attention sinks (`bifocal compare --attention-stats`): the softmax
// mass each query head puts on the keys at positions < probe_first_keys, with the learned sink
// counted in the denominator as in the output. It costs nothing unless probe_mass is set.
struct AttentionArgs {
  const float* queries;               // [n, query_heads, head_dim], after RoPE
  const std::int64_t* positions;      // [n] absolute position of each query
  int n = 0;
  const float* keys;                  // [num_keys, kv_heads, head_dim]
  const float* values;                // same layout as keys
  const std::int64_t* key_positions;  // [num_keys]; null: key j is at position j
  std::int64_t num_keys = 0;
  int query_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;
  int sink_tokens = 0;
  const float* learned_sinks = nullptr;  // [query_heads] or null
  float* out;                         // [n, query_heads, head_dim]
  int probe_first_keys = 0;
  float* probe_mass = nullptr;        // [n, query_heads] or null: no probe
};

// Whether a query at position p sees a key at position kp under args' window rule.
inline bool key_visible(const AttentionArgs& a, std::int64_t p, std::int64_t kp) {
  if (kp > p) return false;
  if (a.window == 0 || kp < a.sink_tokens) return true;
  return p - kp < a.window - a.sink_tokens;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // out[n, m] = x[n, k] · w[m, k]ᵀ + bias[m] (bias may be null): the layout of torch's Linear.
  virtual void matmul(const float* x, const float* w, const float* bias, int n, int k, int m, float* out) = 0;
  // out = x / sqrt(mean(x²) + eps) · weight, per row of length dim (out may equal x).
  virtual void rmsnorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) = 0;
  // Rotates each head of x[n, heads, head_dim] in place by its token's position, with HF's
  // rotate_half pairing (i, i + head_dim/2) and angle position · inv_freq[i].
  virtual void rope(float* x, int n, int heads, int head_dim, const std::int64_t* positions,
                    const float* inv_freq) = 0;
  virtual void attention(const AttentionArgs& args) = 0;
  // out = silu(gate) · up, elementwise.
  virtual void swiglu(const float* gate, const float* up, std::int64_t count, float* out) = 0;
  // x += y, elementwise: the residual connection.
  virtual void add(float* x, const float* y, std::int64_t count) = 0;
  // out[i] = table[ids[i]], rows of length dim.
  virtual void embedding(const float* table, const std::int32_t* ids, int n, int dim, float* out) = 0;
};

}  // namespace bifocal
