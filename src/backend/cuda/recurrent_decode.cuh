// One-token decode steps of the recurrent mixers on the GPU (DESIGN.md "Mixers: exact
// semantics": linear, lolcats, mlstm, and bifocal's mLSTM branch with its mix): the state is read
// and updated in place and the token's output written. The math, the shapes and the state
// layouts are those of the CPU kernels (backend/cpu/mlstm.h, linear_attention.h, lolcats.h), so a
// state can be copied between backends byte for byte; every pointer here is a DEVICE pointer.
//
// Inputs are fp32: q [Hq, d], k, v [Hkv, d] after q/k-norm and RoPE. The mLSTM step computes its
// gate pre-activations itself from the layer input x and the gate projections (T, the model's
// storage type), so a layer's mLSTM costs one launch, not a gate product and a step. States are
// fp32. The LoLCATs window holds keys and values in T = __nv_bfloat16, __half or float. Nothing is
// allocated or synchronised; every launch goes on `stream` as a programmatic dependent launch
// (dependent_launch.h), and every value that changes from token to token is read from device
// memory, so a decode step can be captured in a CUDA graph and replayed.
//
// Shapes: head_dim a multiple of 8, at most 256; the CPU's divisibility rules (Hq a multiple of
// S, S of Hkv). Violations throw bifocal::Error before anything is launched.
//
// Cost (what limits them): the bytes are few — mLSTM S·d²·4·2 (state read + written; Qwen3-4B
// state=kv: 8 × 64 KiB per layer, 1 MiB in all, 0.25 µs at 4.3 TB/s) plus the gate rows
// (2S + Hq)·hidden·sizeof(T) (245 KB); linear Hkv·f·d·4·2 — so a step is bound by latency: the
// number of dependent memory round trips, barriers and launches, not bandwidth. mlstm_decode.cu
// says how the mLSTM step keeps that to one round trip and one launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cpu/linear_attention.h"
#include "backend/cpu/mlstm.h"

namespace bifocal::cuda {

// The gate projections of an mLSTM layer, applied to the layer input x inside the decode step
// (DESIGN.md mlstm: ĩ, f̃ are linear in the layer input, with bias). T is the storage type of the
// weights and of x (__nv_bfloat16, __half or float); the products accumulate in fp32.
template <typename T>
struct MlstmGateProjections {
  const T* x = nullptr;              // [hidden] the normed layer input
  int hidden = 0;
  const T* input_weight = nullptr;   // [S, hidden]
  const T* input_bias = nullptr;     // [S], or nullptr for none
  const T* forget_weight = nullptr;  // [S, hidden]
  const T* forget_bias = nullptr;    // [S], or nullptr
};

// Bifocal's mix, applied to the mLSTM output before it is stored (DESIGN.md bifocal):
//   out = o·mLSTM + (1 − o)·SWA,  o = sigmoid(W_o x + b_o) per query head.
template <typename T>
struct MlstmMix {
  const T* weight = nullptr;          // W_o [Hq, hidden]
  const T* bias = nullptr;            // b_o [Hq], or nullptr
  const float* window_out = nullptr;  // the SWA branch [Hq, d]; nullptr: no mix (the mlstm mixer)
};

// The mLSTM cell for one token (cpu::mlstm_recurrent with n = 1): per state head s,
//   ĩ, f̃ = (W x + b)[s], m_t = max(logf + m_{t−1}, ĩ), C_t = f′C_{t−1} + i′ k vᵀ,
//   n_t = f′n_{t−1} + i′ k, h = q̂ᵀC_t / (max(|q̂ᵀn_t|, e^{−m_t}) + 1e-6) for the query heads that
// read s, written to out (converted to T), mixed with the window branch when mix.window_out is set.
// q [Hq, d], k, v [Hkv, d] and mix.window_out 16-byte aligned. state: laid out as
// cpu::MlstmState (matrix [S, d, d], normalizer [S, d], stabilizer [S]).
template <typename T>
struct MlstmDecodeArgs {
  cpu::MlstmShape shape;
  MlstmGateProjections<T> gates;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  cpu::MlstmState state{};
  T* out = nullptr;  // [Hq, d]
  MlstmMix<T> mix;
  // Optional, Bifocal's decode with the layer's q/k norm and RoPE folded in (attention_decode.cuh,
  // DecodeAttentionArgs::rope_inv_freq): q and k arrive raw and the step applies them to its copies,
  // RoPE at *position.
  const float* rope_inv_freq = nullptr;  // [d/2]
  const T* q_norm = nullptr;             // [d] or null
  const T* k_norm = nullptr;
  float norm_eps = 0.0f;
  const std::int64_t* position = nullptr;
  const float2* rope_rotation = nullptr;  // optional: the step's RoPE table (DecodeAttentionArgs::rope_rotation)
};

template <typename T>
void mlstm_decode(const MlstmDecodeArgs<T>& args, cudaStream_t stream);

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
