// Softmax attention of a chunk of n queries over a list of keys with explicit positions
// (DESIGN.md "full", "swa"; backend.h's AttentionArgs and key_visible): flash-attention style,
// query and key tiles through shared memory, online softmax in fp32, the n × num_keys score
// matrix never materialised. Two kernels behind one call: bf16 or fp16 keys with head_dim 64 or
// 128 run on the tensor cores (attention_prefill_tensor_core.cu: q and the softmax weights rounded
// to the keys' type for the mma, fp32 accumulation); everything else on the fp32 SIMT kernel
// (attention_prefill.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace bifocal::cuda {

// All pointers are device pointers. Query head h reads KV head h / (query_heads / kv_heads).
template <typename T>
struct PrefillAttentionArgs {
  const float* queries;               // [n, query_heads, head_dim], after RoPE
  const std::int64_t* positions;      // [n] absolute position of each query
  int n = 0;
  const T* keys;                      // [num_keys, kv_heads, head_dim], rows 16-byte aligned
  const T* values;                    // same layout as keys
  const std::int64_t* key_positions;  // [num_keys], −1 = empty (never visible); nullptr: key j at position j
  std::int64_t num_keys = 0;
  int query_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;                   // a multiple of 8, at most 256
  int window = 0;                     // 0: full attention; else backend.h's key_visible rule
  int sink_tokens = 0;
  const float* learned_sinks = nullptr;  // [query_heads] or nullptr: e^{S_h} joins the denominator
  // Bifocal's window branch (DESIGN.md bifocal): each output row (token t, query head h) scaled by
  // 1 − o, o = sigmoid(output_gate[t·output_gate_stride + h]), the window's share of the mix, onto
  // which the mLSTM prefill adds o·h (recurrent_chunkwise.cuh's MlstmOutputMix). nullptr: none.
  const float* output_gate = nullptr;
  int output_gate_stride = 0;  // ≥ query_heads
  const float* output_gate_bias = nullptr;  // [query_heads], added to each pre-activation as it is read
  // Bifocal's window branch launched right after the mLSTM's denominators kernel, which lets it
  // launch only once every kernel before that one has completed (dependent_launch.h): all of the
  // attention's inputs are then there, so it starts at once and runs beside that kernel, and waits
  // for it only at its end, so that its completion still implies the previous kernel's.
  bool beside_previous_kernel = false;
};


// out[n, query_heads, head_dim] (OutT = float, or T for the o_proj input) =
// CpuBackend::attention on the same arguments (to fp32 rounding on the SIMT kernel; within the
// T rounding of q and of the softmax weights on the tensor cores). One kernel on `stream`, a
// programmatic dependent of the kernel before it (dependent_launch.h); no workspace.
template <typename T, typename OutT>
void attention_prefill(const PrefillAttentionArgs<T>& args, OutT* out, cudaStream_t stream);

// Whether attention_prefill takes the tensor-core kernel for these arguments.
template <typename T>
bool prefill_uses_tensor_cores(const PrefillAttentionArgs<T>& args) {
  return sizeof(T) == 2 && (args.head_dim == 64 || args.head_dim == 128 || args.head_dim == 256);  // bf16 or fp16
}

// The tensor-core kernel alone (attention_prefill dispatches to it); prefill_uses_tensor_cores
// must hold.
template <typename T, typename OutT>
void attention_prefill_tensor_core(const PrefillAttentionArgs<T>& args, OutT* out, cudaStream_t stream);

}  // namespace bifocal::cuda
