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

// Bifocal's mLSTM branch computed in the window attention's epilogue (mlstm_prefill's
// window_branch offers it; recurrent_chunkwise.cuh): the outputs of the bf16 outputs kernel
// (mlstm_prefill_bf16.cu), h_τ = (e_τ q̂_τᵀC_c + Σ_{j≤τ} W_τj (q̂_τ·k_j) v_j) · o/den_τ, from the
// same bf16 operands in the same order, added in L2 onto the block's (1 − o)·window rows once it
// has stored them: the same bits as that kernel's additions, without its launch or its tail
// after the attention. For d = 128 or 256 (a block's half of the columns, as that kernel splits
// them), bf16 keys and output, one mLSTM state per KV head (a block's rows share one C_c) and
// chunks of kMlstmChunk tokens (a block's tokens lie in one chunk).
// Read from the mLSTM's workspace; `states` null: no mLSTM outputs in the epilogue.
inline constexpr int kMlstmChunk = 64;
struct PrefillMlstmOutputs {
  const __nv_bfloat16* states = nullptr;      // [Hkv, chunks, d, d]: C_c, as the scan rounded it
  const float* weights = nullptr;             // [Hkv, chunks, L, L]: W_τj (0 above the diagonal)
  const float* entering = nullptr;            // [Hkv, chunks, L]: e_τ
  const float* inverse_denominators = nullptr;  // [Hkv, chunks, G, L]: o / den_τ
  // The denominators kernel's finished blocks (it adds 1 a block, release), which the epilogue
  // awaits before it reads W, e and the denominators: that kernel runs beside the attention.
  const unsigned* denominators_done = nullptr;
  unsigned denominator_blocks = 0;
  int chunks = 0;
  // Set by the attention's launcher: the block's last key tile is its chunk's keys and values (at
  // d = 256 the block's half of the columns), so the epilogue reads them there instead of copying
  // them again — where the cached window's rows are a whole number of tiles and every key of a
  // chunk up to a row is in that row's window (the values of keys no row of the block sees are
  // zeroed in the tile, but those carry W = 0).
  bool chunk_in_last_tile = false;
};

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
// mlstm_outputs (Bifocal): the mLSTM's outputs added in the epilogue, where `states` is set
// (attention_prefill_takes_mlstm_outputs must hold). A kernel argument of its own, not a member of
// args: args grown by its 56 bytes cost the d = 256 kernel 3 registers and a 20-byte spill.
template <typename T, typename OutT>
void attention_prefill(const PrefillAttentionArgs<T>& args, OutT* out, cudaStream_t stream,
                       const PrefillMlstmOutputs& mlstm_outputs = {});

// Whether attention_prefill takes the tensor-core kernel for these arguments.
template <typename T>
bool prefill_uses_tensor_cores(const PrefillAttentionArgs<T>& args) {
  return sizeof(T) == 2 && (args.head_dim == 64 || args.head_dim == 128 || args.head_dim == 256);  // bf16 or fp16
}

// Whether attention_prefill can compute an offered PrefillMlstmOutputs in its epilogue (it refuses
// one it cannot take by name).
template <typename T, typename OutT>
bool attention_prefill_takes_mlstm_outputs(const PrefillAttentionArgs<T>& args) {
  return std::is_same_v<T, __nv_bfloat16> && std::is_same_v<OutT, __nv_bfloat16> &&
         (args.head_dim == 128 || args.head_dim == 256);
}

// The tensor-core kernel alone (attention_prefill dispatches to it); prefill_uses_tensor_cores
// must hold.
template <typename T, typename OutT>
void attention_prefill_tensor_core(const PrefillAttentionArgs<T>& args, OutT* out, cudaStream_t stream,
                                   const PrefillMlstmOutputs& mlstm_outputs = {});

}  // namespace bifocal::cuda
