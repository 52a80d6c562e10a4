// The operations a transformer forward pass needs, over plain float buffers that live on the
// backend's device. The model (src/model/model.cpp) calls these in the order of the math; the
// CPU backend is the reference, a CUDA backend implements the same calls with kernels.
#pragma once

#include <cstdint>

namespace bifocal {

// Causal softmax attention of n queries over a key/value cache indexed by absolute position.
// Largest head dimension the backends support (Qwen3.5-like shapes use 256).
inline constexpr int kMaxHeadDim = 512;

struct AttentionArgs {
  const float* queries;            // [n, query_heads, head_dim], after RoPE
  const std::int64_t* positions;   // [n] absolute position of each query
  int n = 0;
  const float* keys;               // [capacity, kv_heads, head_dim], row p = token at position p
  const float* values;             // same layout as keys
  int query_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;                  // 0: keys 0 … p; w > 0: keys p − w + 1 … p (HF sliding_window)
  float* out;                      // [n, query_heads, head_dim]
};

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
