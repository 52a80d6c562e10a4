// Softmax attention of a chunk of n queries over a list of keys with explicit positions
// (DESIGN.md "full", "swa"; backend.h's AttentionArgs and key_visible): flash-attention style,
// query and key tiles through shared memory, online softmax in fp32, the n × num_keys score
// matrix never materialised. fp32 SIMT arithmetic (no tensor cores yet).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

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
};

// out[n, query_heads, head_dim] (OutT = float, or __nv_bfloat16 for the o_proj input) =
// CpuBackend::attention on the same arguments. One kernel on `stream`; no workspace.
template <typename T, typename OutT>
void attention_prefill(const PrefillAttentionArgs<T>& args, OutT* out, cudaStream_t stream);

}  // namespace bifocal::cuda
