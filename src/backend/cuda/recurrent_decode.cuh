// One-token decode steps of the recurrent mixers on the GPU (DESIGN.md "Mixers: exact
// semantics": linear, lolcats, mlstm): the state is read and updated in place and the token's
// output written. The math, the shapes and the state layouts are those of the CPU kernels
// (backend/cpu/mlstm.h, linear_attention.h, lolcats.h), so a state can be copied between
// backends byte for byte; every pointer here is a DEVICE pointer.
//
// Inputs are fp32: q [Hq, d], k, v [Hkv, d] after q/k-norm and RoPE; mLSTM gate pre-activations
// [S] (raw, the soft cap is applied inside). States are fp32. The LoLCATs window holds keys and
// values in T = __nv_bfloat16 or float. Nothing is allocated or synchronised; every launch goes
// on `stream`, and every value that changes from token to token is read from device memory, so a
// decode step can be captured in a CUDA graph and replayed.
//
// Shapes: head_dim a multiple of 8, at most 256; the CPU's divisibility rules (Hq a multiple of
// S, S of Hkv). Violations throw bifocal::Error before anything is launched.
//
// Cost (what limits them): each step streams its state once, read and written: S·d²·4·2 bytes for
// mLSTM (Qwen3-4B state=kv: 8 × 64 KiB per layer), Hkv·f·d·4·2 for linear; the arithmetic is 2–3
// flops per state element per reading head. Each state head is split over a cluster of up to 8
// blocks (by columns of the state) so that one head is not one multiprocessor's bandwidth.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cpu/linear_attention.h"
#include "backend/cpu/mlstm.h"

namespace bifocal::cuda {

// The mLSTM cell for one token (cpu::mlstm_recurrent with n = 1): per state head s,
//   m_t = max(logf + m_{t−1}, ĩ), C_t = f′C_{t−1} + i′ k vᵀ, n_t = f′n_{t−1} + i′ k,
//   h = q̂ᵀC_t / (max(|q̂ᵀn_t|, e^{−m_t}) + 1e-6) for the query heads that read s.
// q [Hq, d], k, v [Hkv, d], input_gate, forget_gate [S]; out [Hq, d]. state: device pointers
// laid out as cpu::MlstmState (matrix [S, d, d], normalizer [S, d], stabilizer [S]).
void mlstm_decode(const cpu::MlstmShape& shape, const float* q, const float* k, const float* v,
                  const float* input_gate, const float* forget_gate, cpu::MlstmState state, float* out,
                  cudaStream_t stream);

// Linear attention for one token (cpu::linear_attention_recurrent with n = 1): S += φ(k)vᵀ,
// z += φ(k), then o = φ(q)ᵀS / (φ(q)ᵀz + ε). hedgehog_weight [Hkv, d, 64] (nullptr for elu1).
// state: laid out as cpu::LinearState (matrix [Hkv, f, d], normalizer [Hkv, f]).
void linear_decode(const cpu::LinearShape& shape, const float* hedgehog_weight, const float* q, const float* k,
                   const float* v, cpu::LinearState state, float* out, cudaStream_t stream);

// A LoLCATs layer's state on the device: the window ring and the linear state of the keys that
// left it (cpu::LolcatsState, with the ring in T).
template <typename T>
struct LolcatsDeviceState {
  T* window_keys;                    // [w, Hkv, d]: token p in slot p mod w
  T* window_values;                  // [w, Hkv, d]
  cpu::LinearState linear;           // S [Hkv, f, d], z [Hkv, f]
  const std::int64_t* tokens_seen;   // [1] tokens before this call (the new token's index t)
};

// LoLCATs for one token (cpu::lolcats_step_by_step with n = 1) at t = *tokens_seen: the key
// t − w (if t ≥ w) leaves the ring for the linear state, the new k, v take its slot t mod w (the
// kernel stores them, converted to T), and
//   y = (γ Σ_W e^{s−m} v + φ(q)ᵀS) / (γ Σ_W e^{s−m} + φ(q)ᵀz),  γ = sigmoid(window_factor[h]),
// W = the last min(t + 1, w) tokens, the new one as the ring keeps it (rounded to T).
// tokens_seen is read, not advanced: the caller increments it after the step.
// window_factor [Hq]; hedgehog_weight [Hkv, d, 64] or nullptr (elu1).
template <typename T>
void lolcats_decode(const cpu::LinearShape& shape, int window, const float* hedgehog_weight,
                    const float* window_factor, const float* q, const float* k, const float* v,
                    LolcatsDeviceState<T> state, float* out, cudaStream_t stream);

}  // namespace bifocal::cuda
