// Decode attention (one query token over the KV cache), flash-decoding style, and the store of
// new keys/values into their cache slots. Contracts in attention_decode.cuh.
//
// The math (DESIGN.md "full", "swa", learned sink): for query head h at position p,
//   o = Σ_j e^{s_j − m} v_j / (Σ_j e^{s_j − m} + e^{S_h − m}),  s_j = q·k_j / √d,
// over the visible slots j, m the max logit. The slots are cut into `splits` contiguous chunks; a
// block (chunk, KV head, group slice) keeps the online-softmax state (m, l, acc) of each of its
// query heads and writes it unnormalised; the combine kernel rescales the partials to the common
// max and divides once. Logits are kept in base 2 (q is pre-multiplied by log2(e)/√d) so each
// weight is one exp2f; the learned sink is converted likewise.
//
// Cost: every visible key and value row is read once per block slice (once in all for GQA groups
// of ≤ 8 heads), 2·d·sizeof(T) bytes per slot and KV head; ~4·d flops per byte pair per query
// head, so the kernel is bound by HBM bandwidth. 16-byte loads, keys and values of U slots issued
// together before any arithmetic so that each lane has 2·U loads in flight.
#include "backend/cuda/attention_decode.cuh"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

constexpr int kDecodeThreads = 128;
constexpr int kSlotsInFlight = 4;          // U: slots each lane group loads before computing
// How the slots are cut into splits (plan_splits): at least kMinSlotsPerSplit per split (one
// step of the slot loop), kSlotsPerSplit once the cache is long enough to fill kMinBlocks
// blocks (then a split's partial costs < 5% of its reads), and at most kMaxBlocks blocks in all
// (~5 waves of resident blocks on the H200's 132 SMs, so the last partial wave costs little).
constexpr int kMinSlotsPerSplit = 32;
constexpr int kSlotsPerSplit = 256;
constexpr int kMinBlocks = 264;
constexpr int kMaxBlocks = 2048;
constexpr int kCombineThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;

using device::key_visible;
using device::unpack16;

// One query head group of GQA is split into slices of at most GROUP heads per block; the
// registers of a lane hold GROUP query and accumulator slices.
int group_tile(int group_size) { return group_size == 1 ? 1 : group_size == 2 ? 2 : group_size <= 4 ? 4 : 8; }

// Lanes that share one key row: enough 16-byte vectors to cover head_dim, a power of two ≤ 32.
int lanes_per_key(int head_dim, std::size_t element_bytes) {
  const int vectors = head_dim / int(16 / element_bytes);
  int lanes = 1;
  while (lanes < vectors && lanes < 32) lanes *= 2;
  return lanes;
}

struct SplitPlan {
  int splits, group_tile, slices;
};

SplitPlan plan_splits(std::int64_t slots, int query_heads, int kv_heads) {
  const int tile = group_tile(query_heads / kv_heads);
  const int slices = (query_heads / kv_heads + tile - 1) / tile;
  const std::int64_t blocks_per_split = std::int64_t(kv_heads) * slices;
  const std::int64_t finest = (slots + kMinSlotsPerSplit - 1) / kMinSlotsPerSplit;
  const std::int64_t enough = (kMinBlocks + blocks_per_split - 1) / blocks_per_split;
  const std::int64_t wanted = std::max((slots + kSlotsPerSplit - 1) / kSlotsPerSplit, std::min(finest, enough));
  const std::int64_t most = std::max<std::int64_t>(1, kMaxBlocks / blocks_per_split);
  return {int(std::clamp<std::int64_t>(wanted, 1, most)), tile, slices};
}

// Workspace layout, all fp32: partial accumulator [splits, Hq, d] first (its rows stay 16-byte
// aligned for float4 reads), partial max (base-2 logits) [splits, Hq], partial sum [splits, Hq].
struct Partials {
  float* acc;
  float* max;
  float* sum;
};

Partials partials_in(void* workspace, int splits, int query_heads, int head_dim) {
  auto* base = static_cast<float*>(workspace);
  const std::size_t heads = std::size_t(splits) * query_heads;
  return {base, base + heads * head_dim, base + heads * (head_dim + 1)};
}

// One block: the slots of chunk blockIdx.x for KV head blockIdx.y and query heads
// [first_head, first_head + heads) of its group. Lanes are grouped LANES to a key row; each
// lane holds VPL 16-byte vectors of q, k, v and the accumulator (ELEMS floats per head).
template <typename T, int LANES, int GROUP>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_split_kernel(DecodeAttentionArgs<T> a, Partials partials) {
  constexpr int VEC = 16 / sizeof(T);
  constexpr int VPL = (sizeof(T) == 4 && LANES == 32) ? 2 : 1;  // fp32 head_dim up to 256
  constexpr int ELEMS = VEC * VPL;
  constexpr int KEY_GROUPS = kDecodeThreads / LANES;
  constexpr int ROW = LANES * ELEMS;  // the widest head_dim this instantiation covers
  constexpr int U = kSlotsInFlight;

  const int d = a.head_dim, vectors = d / VEC;
  const int group_size = a.query_heads / a.kv_heads;
  const int kv = blockIdx.y;
  const int first_head = kv * group_size + blockIdx.z * GROUP;
  const int heads = min(GROUP, group_size - int(blockIdx.z) * GROUP);
  const int lane = threadIdx.x % LANES, key_group = threadIdx.x / LANES;

  // The chunk: slots [begin, end). A linear cache (no slot positions) is read only up to p.
  const std::int64_t p = *a.query_position;
  const std::int64_t filled = a.slot_positions ? a.slots : min(a.slots, p + 1);
  // (A long, barely used linear cache gives whole steps to the first blocks; the rest idle.)
  const std::int64_t chunk = max((filled + gridDim.x - 1) / gridDim.x, std::int64_t(kMinSlotsPerSplit));
  const std::int64_t begin = blockIdx.x * chunk, end = min(begin + chunk, filled);

  // q, pre-scaled so that q·k is the base-2 logit log2(e)·s_j.
  const float q_scale = kLog2e * rsqrtf(float(d));
  float q[GROUP][ELEMS];
  #pragma unroll
  for (int g = 0; g < GROUP; ++g)
    #pragma unroll
    for (int vp = 0; vp < VPL; ++vp) {
      const int v = lane + vp * LANES;
      #pragma unroll
      for (int e = 0; e < VEC; ++e)
        q[g][vp * VEC + e] = (g < heads && v < vectors) ? a.query[(first_head + g) * d + v * VEC + e] * q_scale : 0.0f;
    }

  // Online softmax state; m and l are the same on every lane of a key group.
  float m[GROUP], l[GROUP], acc[GROUP][ELEMS];
  #pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    #pragma unroll
    for (int e = 0; e < ELEMS; ++e) acc[g][e] = 0.0f;
  }

  for (std::int64_t first = begin; first < end; first += KEY_GROUPS * U) {
    // 1. Issue every load of U slots. A ring's slots are nearly all visible, so its loads do not
    //    wait for slot_positions (that would add a memory round trip per step); a linear cache
    //    knows visibility without a load and skips what the window hides. An invisible slot
    //    (possibly empty, holding garbage or NaN) is zeroed below so 0·NaN never reaches a sum.
    uint4 k_raw[U][VPL], v_raw[U][VPL];
    bool visible[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t slot = first + u * KEY_GROUPS + key_group;
      const std::int64_t kp = slot < end ? (a.slot_positions ? a.slot_positions[slot] : slot) : -1;
      visible[u] = key_visible(p, kp, a.window, a.sink_tokens);
      const bool load_row = slot < end && (a.slot_positions != nullptr || visible[u]);
      const std::int64_t row = (slot * a.kv_heads + kv) * d;
      #pragma unroll
      for (int vp = 0; vp < VPL; ++vp) {
        const int v = lane + vp * LANES;
        const bool load = load_row && v < vectors;
        k_raw[u][vp] = load ? __ldg(reinterpret_cast<const uint4*>(a.keys + row + v * VEC)) : make_uint4(0, 0, 0, 0);
        v_raw[u][vp] = load ? __ldg(reinterpret_cast<const uint4*>(a.values + row + v * VEC)) : make_uint4(0, 0, 0, 0);
      }
    }
    // 2. Logits: each lane's partial dot product, summed over the LANES lanes of its key group
    //    (xor butterflies stay inside the aligned group and leave the sum on every lane).
    float s[U][GROUP];
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      float k[ELEMS];
      #pragma unroll
      for (int vp = 0; vp < VPL; ++vp) unpack16(k_raw[u][vp], k + vp * VEC, a.keys);
      #pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        float dot = 0.0f;
        #pragma unroll
        for (int e = 0; e < ELEMS; ++e) dot += q[g][e] * k[e];
        #pragma unroll
        for (int offset = LANES / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[u][g] = visible[u] ? dot : -INFINITY;
      }
    }
    // 3. Online softmax over the U new logits: rescale the state to the new max, then add
    //    e^{s − m} and e^{s − m}·v. With nothing visible yet m stays −∞; `shift` keeps the
    //    exponents finite (e^{−∞ − 0} = 0) instead of producing −∞ − (−∞) = NaN.
    float shift[GROUP];
    #pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      float tile_max = s[0][g];
      #pragma unroll
      for (int u = 1; u < U; ++u) tile_max = fmaxf(tile_max, s[u][g]);
      const float new_max = fmaxf(m[g], tile_max);
      shift[g] = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = exp2f(m[g] - shift[g]);
      l[g] *= correction;
      #pragma unroll
      for (int e = 0; e < ELEMS; ++e) acc[g][e] *= correction;
      m[g] = new_max;
    }
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      float v[ELEMS];
      #pragma unroll
      for (int vp = 0; vp < VPL; ++vp) unpack16(visible[u] ? v_raw[u][vp] : make_uint4(0, 0, 0, 0), v + vp * VEC, a.values);
      #pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        const float weight = exp2f(s[u][g] - shift[g]);
        l[g] += weight;
        #pragma unroll
        for (int e = 0; e < ELEMS; ++e) acc[g][e] += weight * v[e];
      }
    }
  }

  // 4. Merge the block's KEY_GROUPS states through shared memory: M = max_k m_k,
  //    L = Σ_k e^{m_k − M} l_k, ACC = Σ_k e^{m_k − M} acc_k.
  __shared__ float group_max[KEY_GROUPS][GROUP], group_sum[KEY_GROUPS][GROUP];
  __shared__ float group_acc[KEY_GROUPS][GROUP][ROW];
  __shared__ float block_max[GROUP], block_shift[GROUP];
  #pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    if (lane == 0) {
      group_max[key_group][g] = m[g];
      group_sum[key_group][g] = l[g];
    }
    #pragma unroll
    for (int vp = 0; vp < VPL; ++vp)
      #pragma unroll
      for (int e = 0; e < VEC; ++e) group_acc[key_group][g][(lane + vp * LANES) * VEC + e] = acc[g][vp * VEC + e];
  }
  __syncthreads();
  if (threadIdx.x < GROUP) {
    const int g = threadIdx.x;
    float max = -INFINITY;
    for (int k = 0; k < KEY_GROUPS; ++k) max = fmaxf(max, group_max[k][g]);
    block_max[g] = max;
    block_shift[g] = max == -INFINITY ? 0.0f : max;
    if (g < heads) partials.max[blockIdx.x * a.query_heads + first_head + g] = max;
  }
  __syncthreads();
  // e^{m_k − M} replaces each key group's max in place (every thread has read group_max).
  for (int i = threadIdx.x; i < KEY_GROUPS * GROUP; i += kDecodeThreads) {
    const int k = i / GROUP, g = i % GROUP;
    group_max[k][g] = exp2f(group_max[k][g] - block_shift[g]);
  }
  __syncthreads();
  // A block that saw no visible slot writes only its max (−∞): the combine skips its sum and
  // accumulator, so a long, mostly unused full-attention cache costs no writes.
  for (int i = threadIdx.x; i < heads * d; i += kDecodeThreads) {
    const int g = i / d, c = i % d;
    if (block_max[g] == -INFINITY) continue;
    float sum = 0.0f, value = 0.0f;
    for (int k = 0; k < KEY_GROUPS; ++k) {
      sum += group_max[k][g] * group_sum[k][g];
      value += group_max[k][g] * group_acc[k][g][c];
    }
    const std::size_t head = std::size_t(blockIdx.x) * a.query_heads + first_head + g;
    if (c == 0) partials.sum[head] = sum;
    partials.acc[head * d + c] = value;
  }
}

__device__ __forceinline__ void store_out(float* out, float value) { *out = value; }
__device__ __forceinline__ void store_out(__nv_bfloat16* out, float value) { *out = __float2bfloat16_rn(value); }

// Block-wide max and sum over kCombineThreads threads (scratch: one float per warp).
__device__ float block_reduce_max(float x, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  __syncthreads();  // scratch is free again
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < kCombineThreads / 32; ++w) x = fmaxf(x, scratch[w]);
  return x;
}

__device__ float block_reduce_sum(float x, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < kCombineThreads / 32; ++w) x += scratch[w];
  return x;
}

// One block per query head: o = Σ_b e^{m_b − M} acc_b / (Σ_b e^{m_b − M} l_b + e^{S_h − M}),
// M = max(max_b m_b, S_h). Every step spreads the splits over the threads (a serial loop over
// hundreds of splits would be hundreds of dependent L2 round trips). Splits that saw no visible
// slot (m_b = −∞) are skipped unread: their sums and accumulators may hold anything.
template <typename OutT>
__global__ void __launch_bounds__(kCombineThreads)
    attention_decode_combine_kernel(Partials partials, int splits, int query_heads, int head_dim,
                                    const float* learned_sinks, OutT* out) {
  __shared__ float weights[kMaxBlocks];  // e^{m_b − M}; splits ≤ kMaxBlocks (plan_splits)
  __shared__ float scratch[kCombineThreads / 32];
  __shared__ float4 part_sums[kCombineThreads];
  const int h = blockIdx.x;
  const float sink = learned_sinks ? learned_sinks[h] * kLog2e : -INFINITY;

  float local_max = -INFINITY;
  for (int b = threadIdx.x; b < splits; b += kCombineThreads) local_max = fmaxf(local_max, partials.max[b * query_heads + h]);
  const float max = fmaxf(sink, block_reduce_max(local_max, scratch));
  const float shift = max == -INFINITY ? 0.0f : max;

  float local_sum = 0.0f;
  for (int b = threadIdx.x; b < splits; b += kCombineThreads) {
    const float split_max = partials.max[b * query_heads + h];
    const float weight = exp2f(split_max - shift);  // 0 for an empty split
    weights[b] = weight;
    if (split_max != -INFINITY) local_sum += weight * partials.sum[b * query_heads + h];
  }
  const float denominator = block_reduce_sum(local_sum, scratch) + exp2f(sink - shift);  // its barriers publish weights

  // Numerator: thread (part, quad) sums float4 column quad over the splits b ≡ part (mod parts).
  const int quads = head_dim / 4, parts = kCombineThreads / quads;
  const int quad = threadIdx.x % quads, part = threadIdx.x / quads;
  float4 numerator = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (part < parts) {
#pragma unroll 4
    for (int b = part; b < splits; b += parts) {
      const float weight = weights[b];
      if (weight == 0.0f) continue;
      const float4 x = *reinterpret_cast<const float4*>(partials.acc + (std::size_t(b) * query_heads + h) * head_dim + 4 * quad);
      numerator.x += weight * x.x;
      numerator.y += weight * x.y;
      numerator.z += weight * x.z;
      numerator.w += weight * x.w;
    }
  }
  part_sums[threadIdx.x] = numerator;
  __syncthreads();
  if (part != 0) return;
  for (int p = 1; p < parts; ++p) {
    const float4 x = part_sums[p * quads + quad];
    numerator.x += x.x;
    numerator.y += x.y;
    numerator.z += x.z;
    numerator.w += x.w;
  }
  OutT* o = out + std::size_t(h) * head_dim + 4 * quad;
  store_out(o + 0, numerator.x / denominator);
  store_out(o + 1, numerator.y / denominator);
  store_out(o + 2, numerator.z / denominator);
  store_out(o + 3, numerator.w / denominator);
}

template <typename T, int LANES, int GROUP>
void launch_split(const DecodeAttentionArgs<T>& a, const SplitPlan& plan, Partials partials, cudaStream_t stream) {
  const dim3 grid(plan.splits, a.kv_heads, plan.slices);
  attention_decode_split_kernel<T, LANES, GROUP><<<grid, kDecodeThreads, 0, stream>>>(a, partials);
  check_launch("attention_decode_split_kernel");
}

template <typename T, int LANES>
void launch_split_for_group(const DecodeAttentionArgs<T>& a, const SplitPlan& plan, Partials partials,
                            cudaStream_t stream) {
  switch (plan.group_tile) {
    case 1: return launch_split<T, LANES, 1>(a, plan, partials, stream);
    case 2: return launch_split<T, LANES, 2>(a, plan, partials, stream);
    case 4: return launch_split<T, LANES, 4>(a, plan, partials, stream);
    default: return launch_split<T, LANES, 8>(a, plan, partials, stream);
  }
}

void check_shape(int query_heads, int kv_heads, int head_dim) {
  if (head_dim < 8 || head_dim > 256 || head_dim % 8 != 0)
    fail("attention", "CUDA head_dim must be a multiple of 8 in [8, 256], got " + std::to_string(head_dim));
  if (kv_heads <= 0 || query_heads % kv_heads != 0)
    fail("attention", "query heads (" + std::to_string(query_heads) + ") must be a multiple of KV heads (" +
                          std::to_string(kv_heads) + ")");
}

}  // namespace

std::size_t attention_decode_workspace_bytes(std::int64_t slots, int query_heads, int kv_heads, int head_dim) {
  const SplitPlan plan = plan_splits(slots, query_heads, kv_heads);
  return std::size_t(plan.splits) * query_heads * (head_dim + 2) * sizeof(float);
}

template <typename T, typename OutT>
void attention_decode(const DecodeAttentionArgs<T>& a, void* workspace, OutT* out, cudaStream_t stream) {
  check_shape(a.query_heads, a.kv_heads, a.head_dim);
  const SplitPlan plan = plan_splits(a.slots, a.query_heads, a.kv_heads);
  const Partials partials = partials_in(workspace, plan.splits, a.query_heads, a.head_dim);
  switch (lanes_per_key(a.head_dim, sizeof(T))) {
    case 1: launch_split_for_group<T, 1>(a, plan, partials, stream); break;
    case 2: launch_split_for_group<T, 2>(a, plan, partials, stream); break;
    case 4: launch_split_for_group<T, 4>(a, plan, partials, stream); break;
    case 8: launch_split_for_group<T, 8>(a, plan, partials, stream); break;
    case 16: launch_split_for_group<T, 16>(a, plan, partials, stream); break;
    default: launch_split_for_group<T, 32>(a, plan, partials, stream); break;
  }
  attention_decode_combine_kernel<OutT><<<a.query_heads, kCombineThreads, 0, stream>>>(
      partials, plan.splits, a.query_heads, a.head_dim, a.learned_sinks, out);
  check_launch("attention_decode_combine_kernel");
}

// ---- Store of new keys/values in their cache slots -------------------------------------------

__device__ __forceinline__ void store4(float* dst, float4 x) { *reinterpret_cast<float4*>(dst) = x; }
__device__ __forceinline__ void store4(__nv_bfloat16* dst, float4 x) {
  const __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(x.x, x.y), __floats2bfloat162_rn(x.z, x.w)};
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(pair);
}

// One block per new token: converts its kv_heads·head_dim keys and values, 4 at a time.
template <typename T>
__global__ void store_kv_slots_kernel(const float* keys, const float* values, int n, const std::int64_t* positions,
                                      T* cache_keys, T* cache_values, std::int64_t* slot_positions, int kv_heads,
                                      int head_dim, int window, int sink_tokens) {
  const int i = blockIdx.x;
  const std::int64_t p = positions[i];
  std::int64_t slot = p;
  if (window > 0 && p >= sink_tokens) {
    const int ring = window - sink_tokens;
    // A later token of this chunk lands on the same slot: it wins, as in the CPU's in-order store.
    if (positions[n - 1] - p >= ring) return;
    slot = sink_tokens + (p - sink_tokens) % ring;
  }
  const std::size_t row = std::size_t(kv_heads) * head_dim;
  for (std::size_t c = 4 * threadIdx.x; c < row; c += 4 * blockDim.x) {
    store4(cache_keys + slot * row + c, *reinterpret_cast<const float4*>(keys + i * row + c));
    store4(cache_values + slot * row + c, *reinterpret_cast<const float4*>(values + i * row + c));
  }
  if (threadIdx.x == 0 && slot_positions != nullptr) slot_positions[slot] = p;
}

template <typename T>
void store_kv_slots(const float* keys, const float* values, int n, const std::int64_t* positions, T* cache_keys,
                    T* cache_values, std::int64_t* slot_positions, int kv_heads, int head_dim, int window,
                    int sink_tokens, cudaStream_t stream) {
  if (n <= 0) return;
  if (head_dim % 4 != 0) fail("store_kv_slots", "head_dim must be a multiple of 4");
  if (window > 0 && window <= sink_tokens) fail("store_kv_slots", "the window must be larger than the sink tokens");
  store_kv_slots_kernel<T><<<n, 128, 0, stream>>>(keys, values, n, positions, cache_keys, cache_values, slot_positions,
                                                   kv_heads, head_dim, window, sink_tokens);
  check_launch("store_kv_slots_kernel");
}

template void attention_decode<__nv_bfloat16, float>(const DecodeAttentionArgs<__nv_bfloat16>&, void*, float*,
                                                     cudaStream_t);
template void attention_decode<__nv_bfloat16, __nv_bfloat16>(const DecodeAttentionArgs<__nv_bfloat16>&, void*,
                                                             __nv_bfloat16*, cudaStream_t);
template void attention_decode<float, float>(const DecodeAttentionArgs<float>&, void*, float*, cudaStream_t);
template void attention_decode<float, __nv_bfloat16>(const DecodeAttentionArgs<float>&, void*, __nv_bfloat16*,
                                                     cudaStream_t);
template void store_kv_slots<__nv_bfloat16>(const float*, const float*, int, const std::int64_t*, __nv_bfloat16*,
                                            __nv_bfloat16*, std::int64_t*, int, int, int, int, cudaStream_t);
template void store_kv_slots<float>(const float*, const float*, int, const std::int64_t*, float*, float*,
                                    std::int64_t*, int, int, int, int, cudaStream_t);

}  // namespace bifocal::cuda
