// The Bifocal mixer's decode step (DESIGN.md bifocal): per query head h,
//   out_h = o_h · mLSTM_h + (1 − o_h) · SWA_h,   o_h = sigmoid(W_o x + b_o)[h],
// where SWA is softmax attention over the window cache (learned sink, sink tokens or none) and
// mLSTM the stabilized mLSTM cell (state=kv: one state per KV head read by its G query heads;
// state=q: one per query head, k and v repeated). The window branch is swa's decode attention
// (attention_decode.cuh, which also stores the new token's k, v in the ring; its output in fp32 in
// the workspace), then ONE mLSTM step computes the gates from x and writes the mixed output
// (recurrent_decode.cuh's mlstm_decode).
// Every pointer is a DEVICE pointer; nothing is allocated or synchronised; the token position is
// read from device memory (graph capture). The mLSTM state has cpu::MlstmState's layout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/mlstm.h"
#include "backend/cuda/recurrent_decode.cuh"

namespace bifocal::cuda {

template <typename T>  // the storage of the cache, the weights, x and out: __nv_bfloat16, __half or float
struct BifocalDecodeArgs {
  cpu::MlstmShape shape;  // Hq, Hkv, S (Hkv for state=kv, Hq for state=q), d (a multiple of 8, ≤ 256)

  // The window branch: the cache of SlidingWindowMixer, `window` slots [window, Hkv, d], token p
  // in slot p < s ? p : s + (p − s) mod (w − s). This step stores the new token's k, v (converted
  // to T) in its slot and its position in slot_positions itself, inside the window attention's
  // launch (attention_decode's new_key/new_value), as swa's decode does: no store launch of its own.
  T* keys = nullptr;  // the window cache, read and written
  T* values = nullptr;
  std::int64_t* slot_positions = nullptr;  // [window], −1 = empty
  int window = 0;                                // w, sink tokens included
  int sink_tokens = 0;                           // s of sink=tokens:s, else 0
  const float* learned_sinks = nullptr;          // [Hq] for sink=learned, else nullptr
  const std::int64_t* position = nullptr;        // [1] the new token's absolute position p

  const float* q = nullptr;  // [Hq, d] fp32, after q/k-norm and RoPE (16-byte aligned, as k, v)
  const float* k = nullptr;  // [Hkv, d] fp32 (the mLSTM branch takes k, v unrounded; the cache gets them in T)
  const float* v = nullptr;  // [Hkv, d]
  MlstmGateProjections<T> gates;   // x and the ĩ, f̃ projections [S, hidden]
  const T* mix_weight = nullptr;   // W_o [Hq, hidden]
  const T* mix_bias = nullptr;     // b_o [Hq], or nullptr
  cpu::MlstmState state{};         // read and updated in place
  T* out = nullptr;                // [Hq, d]
  void* workspace = nullptr;       // bifocal_decode_workspace_bytes(shape, window) bytes, 16-byte aligned
  // Optional: q and k arrive raw and both branches apply the layer's q/k norm and RoPE themselves
  // (DecodeAttentionArgs::rope_inv_freq; window ≤ kWindowDecodeMaxSlots).
  const float* rope_inv_freq = nullptr;
  const T* q_norm = nullptr;
  const T* k_norm = nullptr;
  float norm_eps = 0.0f;
  const float2* rope_rotation = nullptr;  // optional with rope_inv_freq: the step's RoPE table [d/2]
};

// Scratch of bifocal_decode for this shape: the window attention's split partials and its fp32
// output [Hq, d] (a pure function of the arguments, so a session sizes it once).
std::size_t bifocal_decode_workspace_bytes(const cpu::MlstmShape& shape, int window);

// The window branch sees slot j when slot_positions[j] ≥ 0 and backend.h's key_visible(p,
// slot_positions[j]) holds with (window, sink_tokens); a learned sink S_h adds e^{S_h} to the
// denominator only. The mLSTM branch is cpu::mlstm_recurrent for one token on the gates W x + b.
// Throws bifocal::Error for an unsupported shape before launching.
template <typename T>
void bifocal_decode(const BifocalDecodeArgs<T>& args, cudaStream_t stream);

}  // namespace bifocal::cuda
