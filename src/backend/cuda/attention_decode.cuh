// Softmax attention of ONE new token over a KV cache (DESIGN.md "full", "swa"), flash-decoding
// style: the cache's slots are cut into contiguous ranges. A short cache (≤ kWindowDecodeMaxSlots
// slots: swa's window, a small linear cache) takes ONE kernel: a cluster of blocks per KV head
// merges its ranges through distributed shared memory (attention_decode_window.cu), the new
// token's store folded in when its key and value are passed. A longer one streams each range
// through shared memory (bf16 caches on tensor cores) and writes a partial (max, sum, acc) to a
// caller-provided workspace that a combine kernel merges (with the learned sink).
// Also the store of the new token's key/value into its cache slot, which decode and prefill share.
//
// Cache layout: keys/values T[slots, kv_heads, head_dim] (T = __nv_bfloat16, __half or float),
// base and rows 16-byte aligned; slot_positions int64[slots], 16-byte aligned, holds each slot's absolute
// position, −1 = empty. slot_positions == nullptr means "slot j holds position j" (full
// attention's linear cache); then only slots 0 … position are read, so a large capacity costs
// nothing until it is used.
//
// Launches: every kernel here is a programmatic dependent of the kernel before it on the stream
// (dependent_launch.h): it waits for that kernel before reading anything (a short ring's kernel
// only asks L2 to prefetch its rows before — a hint that reads no value), and lets the next one
// be scheduled at once. Graph capture: the query position (and the chunk's positions in the
// store) are read from device memory inside the kernels; every host argument is fixed for a
// session's shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace bifocal::cuda {

// Shape and mask rule of one decode attention call; all pointers are device pointers.
// Query head h reads KV head h / (query_heads / kv_heads) (GQA).
template <typename T>
struct DecodeAttentionArgs {
  const float* query;                  // [query_heads, head_dim], after RoPE
  const std::int64_t* query_position;  // [1] absolute position of the query token
  // Writable: with new_key/new_value set, the call stores the new token into them.
  T* keys;                             // [slots, kv_heads, head_dim]
  T* values;                           // same layout as keys
  std::int64_t* slot_positions;        // [slots], −1 = empty; nullptr: slot j holds position j
  std::int64_t slots = 0;
  int query_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;                    // a multiple of 8, at most 256
  int window = 0;                      // 0: full attention; else backend.h's key_visible rule
  int sink_tokens = 0;
  const float* learned_sinks = nullptr;  // [query_heads] or nullptr
  // Optional, decode's store folded in: the new token's key and value (fp32 [kv_heads, head_dim],
  // 16-byte aligned, both or neither). When set, attention_decode stores them first exactly as
  //   store_kv_slots(new_key, new_value, 1, query_position, keys, values, slot_positions,
  //                  kv_heads, head_dim, slot_positions ? window : 0, sink_tokens)
  // would (keys, values and slot_positions must then point to writable memory; a ring needs
  // window > sink_tokens), and the caller launches no store of its own. A short cache does it
  // inside its one kernel; a longer one launches the store before the split kernel.
  const float* new_key = nullptr;
  const float* new_value = nullptr;
  // Optional, decode's q/k norm and RoPE folded in: `query` and `new_key` arrive as the projections
  // wrote them, and the kernel applies what dense_kernels' qk_norm_rope would (the same bits:
  // device::norm_rope_head) — the per-head RMSNorm with q_norm / k_norm (either null: none), then
  // RoPE at query_position with rope_inv_freq [head_dim / 2] — so the step launches no
  // qk_norm_rope. Only the one-launch path (slots ≤ kWindowDecodeMaxSlots) does; attention_decode
  // refuses it on longer caches.
  const float* rope_inv_freq = nullptr;
  const T* q_norm = nullptr;
  const T* k_norm = nullptr;
  float norm_eps = 0.0f;
  // Optional with rope_inv_freq: the step's (sin, cos) of every angle at query_position
  // [head_dim / 2] (dense_kernels.cuh's RopeRotationTable, the same bits), read instead of made.
  const float2* rope_rotation = nullptr;
  // The kernels let the next one launch only after their wait for the previous one, not at their
  // start (dependent_launch.h, "triggered after the wait"): Bifocal's mLSTM step, launched next,
  // then reads everything but this output before it waits.
  bool launch_next_after_wait = false;
};

// Caches of at most this many slots take the one-launch cluster kernel (attention_decode_window.cu);
// larger ones the split kernel and the combine. A linear cache is judged by its capacity (slots),
// as the host does not know the position when a graph is captured.
inline constexpr std::int64_t kWindowDecodeMaxSlots = 2048;

// Bytes of scratch attention_decode needs for this shape (a pure function of its arguments and
// the device's multiprocessor count, so a session sizes its workspace once).
std::size_t attention_decode_workspace_bytes(std::int64_t slots, int query_heads, int kv_heads, int head_dim);

// out[query_heads, head_dim] (OutT = float, __nv_bfloat16 or __half) = softmax attention of the query
// over the visible slots: slot j is visible when slot_positions[j] >= 0 and key_visible(p,
// slot_positions[j]) holds (backend.h). A learned sink S_h adds e^{S_h} to the denominator only.
// workspace: attention_decode_workspace_bytes(...) bytes (0, and workspace may be null, for a
// short cache), 16-byte aligned, any contents. Nothing is allocated or synchronised; one kernel
// (short cache) or two or three (store, split, combine) are launched on `stream`.
template <typename T, typename OutT>
void attention_decode(const DecodeAttentionArgs<T>& args, void* workspace, OutT* out, cudaStream_t stream);

// attention_decode's short-cache path on its own (any slot count; meant for ≤ kWindowDecodeMaxSlots,
// whose blocks stage their whole range at once): one launch, no workspace, the store included
// when args.new_key is set. Shapes are not checked here (attention_decode does).
template <typename T, typename OutT>
void attention_decode_window(const DecodeAttentionArgs<T>& args, OutT* out, cudaStream_t stream);

// attention_decode_window's launch for these arguments: its clusters, and how many of them the
// device runs at once (cluster_launch.h's max_active_clusters). The kernel is meant to run every
// cluster at once; more clusters than fit wait for a second wave (stop 31: at 133 registers a
// thread instead of 109, one block per multiprocessor, Qwen3-4B's 16th cluster of 8 did, and decode
// fell from 381 to 333 tok/s). Only the sizes and counts of `args` are read.
struct WindowClusterFit {
  int clusters = 0;    // launched
  int max_active = 0;  // running at once
};
template <typename T, typename OutT>
WindowClusterFit attention_decode_window_cluster_fit(const DecodeAttentionArgs<T>& args);

// Stores n new tokens' keys/values (fp32 [n, kv_heads, head_dim], converted to T) in their cache
// slots and records their positions. positions: device int64[n], consecutive and increasing
// (one prefill chunk, or the one decoded token). Slot of position p:
//   window == 0 (full):  p                       (the caller guarantees p < capacity)
//   swa(w, s):           p < s ? p : s + (p − s) mod (w − s)   (sliding_window_mixer.cpp)
// With a ring, a token of a long chunk is stored only when no later token of the chunk takes its
// slot (the CPU mixer's sequential overwrite, without a race). slot_positions may be nullptr
// (full attention's linear cache).
template <typename T>
void store_kv_slots(const float* keys, const float* values, int n, const std::int64_t* positions, T* cache_keys,
                    T* cache_values, std::int64_t* slot_positions, int kv_heads, int head_dim, int window,
                    int sink_tokens, cudaStream_t stream);

}  // namespace bifocal::cuda
