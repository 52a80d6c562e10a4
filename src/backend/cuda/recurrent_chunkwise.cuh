// The chunkwise core shared by the mLSTM, linear-attention and LoLCATs prefills
// (recurrent_prefill.cu): one kernel that runs a state head's whole sequence chunk by chunk. Per
// state head and chunk of L tokens entered with state (C_0, n_0, m_0),
//   scores  S_τj = (q_τ · k_j) · W_τj                        (j ≤ τ)
//   numer.  h_τ  = e_τ · q_τᵀC_0 + Σ_j S_τj v_j,   q·n_τ = e_τ · q_τᵀn_0 + Σ_j S_τj
//   leaving C_L  = e_L · C_0 + Σ_j W_Lj k_j v_jᵀ,  n_L likewise
// with, for mLSTM, q = q̂ = q/√d, W_τj = e^{b_τ − b_j + ĩ_j − m_τ} and e_τ = e^{b_τ + m_0 − m_τ}
// (b the cumulative log forget gate, m_τ the recurrence's stabilizer: cpu/mlstm.cpp's
// chunkwise_state_head derives the form), and for linear attention q, k = φ(q), φ(k), W = 1 and
// e = 1 (LoLCATs: W = 0 for the tokens whose leaving key does not exist yet). All device
// pointers; plain C++ header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace bifocal::cuda {

enum class ChunkwiseNormalisation {
  Mlstm,         // h / (max(|q̂ᵀn|, e^{−m}) + 1e-6)
  Linear,        // h / (φ(q)ᵀz + ε)
  Unnormalised,  // h as is, φ(q)ᵀz to `denominators` (LoLCATs merges it with the window)
};

struct ChunkwiseArgs {
  int n, chunk;                          // tokens; chunk length L (a multiple of 4)
  int query_heads, kv_heads, states;     // S: mLSTM states, Hkv for linear attention
  int feature_dim, head_dim;             // f rows, d columns of each state
  const float* query_features;           // [n, Hq, f]: q (mLSTM) or φ(q)
  float query_scale;                     // 1/√d (q̂ = q/√d) or 1
  const float* key_features;             // [n, Hkv, f]: k or φ(k) (LoLCATs: of the leaving key)
  const float* values;                   // [n, Hkv, d]
  const float* input_gate;               // [n, S] (mLSTM)
  const float* forget_gate;              // [n, S] (mLSTM)
  const std::int64_t* tokens_seen;       // LoLCATs: keys exist from token w − start on; else nullptr
  int window;                            // LoLCATs w
  float* matrix;                         // [S, f, d]
  float* normalizer;                     // [S, f]
  float* stabilizer;                     // [S] (mLSTM)
  float* out;                            // [n, Hq, d]
  float* denominators;                   // [n, Hq] (Unnormalised)
};

// Runs the n tokens of args on `stream` (one cluster of up to 8 blocks per state head, each
// owning a slice of the state's columns, which stays in its shared memory for the whole call).
// args.chunk is chosen here. Nothing is allocated or synchronised.
void launch_chunkwise(ChunkwiseNormalisation normalise, ChunkwiseArgs args, cudaStream_t stream);

}  // namespace bifocal::cuda
