// CPU kernels of the mLSTM sequence mixer (DESIGN.md "Mixers: exact semantics", mlstm, and the
// mLSTM branch of bifocal): the stabilized xLSTM mLSTM cell, per state head and token t,
//   ĩ = 15·tanh(i_raw/15), f̃ = 15·tanh(f_raw/15), logf = logsigmoid(f̃),
//   m_t = max(logf + m_{t−1}, ĩ), f′ = exp(logf + m_{t−1} − m_t), i′ = exp(ĩ − m_t),
//   C_t = f′C_{t−1} + i′ k_t v_tᵀ, n_t = f′n_{t−1} + i′ k_t, q̂ = q/√d,
//   h_t = q̂ᵀC_t / (max(|q̂ᵀn_t|, exp(−m_t)) + 1e-6).
// The state (C, n, m) is fp32 and owned by the caller.
#pragma once

#include <cstdint>

namespace bifocal::cpu {

struct MlstmShape {
  int query_heads;  // Hq
  int kv_heads;     // Hkv
  int states;       // S: Hkv for state=kv (one state per KV head, read by its G = Hq/Hkv query heads), Hq for state=q
  int head_dim;     // d
};
// Query head h reads state h / (Hq / S). State s is written with k, v of KV head s / (S / Hkv)
// (state=q: k, v repeated across the G query heads of a group).

struct MlstmState {
  float* matrix;      // C: [S, d, d], C[s][a][b] = sum over keys of weight * k[a] * v[b]
  float* normalizer;  // n: [S, d]
  float* stabilizer;  // m: [S]
};

// Floats of each part of the state (DESIGN.md "Memory accounting": the matrix alone is the
// published size; the normalizer and stabilizer complete the total).
std::int64_t mlstm_matrix_floats(const MlstmShape&);
std::int64_t mlstm_normalizer_floats(const MlstmShape&);
std::int64_t mlstm_stabilizer_floats(const MlstmShape&);

// Largest (Hq / S) · d: the decode path keeps one token's numerators of a state's query heads on
// the stack in double (64 KiB), e.g. 64 heads per state at d = 128, 16 at d = 512.
inline constexpr int kMaxGroupWidth = 8192;

// Throws std::invalid_argument for a shape the kernels cannot run: Hq not a multiple of S, S not a
// multiple of Hkv, a head dimension outside 1 … kMaxHeadDim, or (Hq / S) · d > kMaxGroupWidth.
// All entry points below check it.
void mlstm_check_shape(const MlstmShape&);

// A fresh state: C = 0, n = 0, m = 0.
void mlstm_reset(const MlstmShape&, MlstmState);

// n tokens. q: [n, Hq, d]; k, v: [n, Hkv, d]; input_gate, forget_gate: [n, S] raw pre-activations
// (the soft cap 15·tanh(x/15) is applied inside); out: [n, Hq, d]. The state is read and updated.
// Token by token. A one-token call (decode) allocates nothing. Arithmetic is double; a call of
// more than one token carries C and n in double and rounds them to fp32 once at its end (a
// per-token fp32 rounding, magnified by outputs whose q̂ᵀn nearly cancels, would otherwise set the
// two forms apart by more than 1e-5). A sequence of one-token calls rounds after every token.
void mlstm_recurrent(const MlstmShape&, const float* q, const float* k, const float* v, const float* input_gate,
                     const float* forget_gate, int n, MlstmState state, float* out);

// Same function computed chunkwise (parallel within chunks of chunk_size tokens, recurrent across
// chunks); equal to mlstm_recurrent to fp32 rounding for any n (also n not a multiple of
// chunk_size) and any starting state. Allocates O(d² + chunk_size²) scratch per state head.
void mlstm_chunkwise(const MlstmShape&, const float* q, const float* k, const float* v, const float* input_gate,
                     const float* forget_gate, int n, int chunk_size, MlstmState state, float* out);

}  // namespace bifocal::cpu
