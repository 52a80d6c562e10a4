// The long-cache path's split plan (how many contiguous slot ranges, one block each per unit),
// the workspace of partials the split kernel writes, and the combine kernel that merges them with
// the learned sink. The split kernel, its cost model and the dispatch are in attention_decode.cu
// (the plan is its cost model's "waves" item); shared declarations in attention_decode_split.cuh;
// the contract in attention_decode.cuh.
#include "backend/cuda/attention_decode.cuh"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention_decode_split.cuh"
#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/dependent_launch.h"

namespace bifocal::cuda {
namespace {

using namespace attention_decode_detail;

constexpr int kCombineThreads = 128;

// ---- Combine ---------------------------------------------------------------------------------

// One block per query head: o = Σ_b e^{m_b − M} acc_b / (Σ_b e^{m_b − M} l_b + e^{S_h − M}),
// M = max(max_b m_b, S_h). Thread (part, quad) runs an online merge over the splits b ≡ part
// (mod parts) for float4 column quad: its loads depend on nothing, so they all go out together
// (one L2 round trip); then the parts merge in shared memory. Splits that saw no visible slot
// (m_b = −∞) are masked by selects: their sums and accumulators may hold anything.
template <typename OutT>
__global__ void __launch_bounds__(kCombineThreads)
    attention_decode_combine_kernel(Partials partials, int splits, int query_heads, int head_dim,
                                    const float* learned_sinks, bool launch_next_after_wait, OutT* out) {
  __shared__ float part_max[kCombineThreads], part_sum[kCombineThreads];
  __shared__ float4 part_acc[kCombineThreads];
  if (!launch_next_after_wait) device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  if (launch_next_after_wait) device::allow_next_kernel_launch();  // DecodeAttentionArgs::launch_next_after_wait
  const int h = blockIdx.x, quads = head_dim / 4, parts = kCombineThreads / quads;
  const int quad = threadIdx.x % quads, part = threadIdx.x / quads;
  float max = -INFINITY, sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (part < parts) {
    #pragma unroll 4
    for (int b = part; b < splits; b += parts) {
      const std::size_t head = std::size_t(b) * query_heads + h;
      const float split_max = partials.max[head], split_sum = partials.sum[head];
      const float4 x = *reinterpret_cast<const float4*>(partials.acc + head * head_dim + 4 * quad);
      const bool seen = split_max != -INFINITY;
      const float new_max = seen ? fmaxf(max, split_max) : max;
      const float shift = new_max == -INFINITY ? 0.0f : new_max;
      const float old_factor = exp2f(max - shift), factor = seen ? exp2f(split_max - shift) : 0.0f;
      sum = sum * old_factor + (seen ? factor * split_sum : 0.0f);
      acc.x = acc.x * old_factor + (seen ? factor * x.x : 0.0f);
      acc.y = acc.y * old_factor + (seen ? factor * x.y : 0.0f);
      acc.z = acc.z * old_factor + (seen ? factor * x.z : 0.0f);
      acc.w = acc.w * old_factor + (seen ? factor * x.w : 0.0f);
      max = new_max;
    }
  }
  part_max[threadIdx.x] = max, part_sum[threadIdx.x] = sum, part_acc[threadIdx.x] = acc;
  __syncthreads();
  if (part != 0) return;
  const float sink = learned_sinks ? learned_sinks[h] * kLog2e : -INFINITY;
  float top = sink;
  for (int r = 0; r < parts; ++r) top = fmaxf(top, part_max[r * quads + quad]);
  const float shift = top == -INFINITY ? 0.0f : top;
  float denominator = exp2f(sink - shift);
  float4 numerator = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int r = 0; r < parts; ++r) {
    const float factor = exp2f(part_max[r * quads + quad] - shift);  // 0 for a part that saw nothing
    const float4 x = part_acc[r * quads + quad];
    denominator += factor * part_sum[r * quads + quad];
    numerator.x += factor * x.x, numerator.y += factor * x.y, numerator.z += factor * x.z, numerator.w += factor * x.w;
  }
  OutT* o = out + std::size_t(h) * head_dim + 4 * quad;
  store_out(o + 0, numerator.x / denominator);
  store_out(o + 1, numerator.y / denominator);
  store_out(o + 2, numerator.z / denominator);
  store_out(o + 3, numerator.w / denominator);
}

}  // namespace

namespace attention_decode_detail {

// ---- Plan (host) -----------------------------------------------------------------------------

DecodePlan plan_decode(std::int64_t slots, int query_heads, int kv_heads) {
  const int group = query_heads / kv_heads;
  const int slices = (group + kHeadsPerUnit - 1) / kHeadsPerUnit;
  const int units = kv_heads * slices;
  const std::int64_t tiles = (slots + kTileSlots - 1) / kTileSlots;
  // One wave of blocks, but no block with fewer tiles than warps (a short window's blocks then
  // issue every load in their prologue).
  const std::int64_t one_wave = (std::int64_t(kBlocksPerSm) * multiprocessor_count() + units - 1) / units;
  const std::int64_t one_tile_per_warp = (tiles + kMaxWarps - 1) / kMaxWarps;
  return {slices, units, int(std::clamp<std::int64_t>(std::min(one_wave, one_tile_per_warp), 1, kMaxSplits))};
}

Partials partials_in(void* workspace, int splits, int query_heads, int head_dim) {
  auto* base = static_cast<float*>(workspace);
  const std::size_t heads = std::size_t(splits) * query_heads;
  return {base, base + heads * head_dim, base + heads * (head_dim + 1)};
}

template <typename OutT>
void launch_combine(Partials partials, int splits, int query_heads, int head_dim, const float* learned_sinks,
                    bool launch_next_after_wait, OutT* out, cudaStream_t stream) {
  launch_dependent(attention_decode_combine_kernel<OutT>, dim3(query_heads), dim3(kCombineThreads), 0, stream,
                   "attention_decode_combine_kernel", partials, splits, query_heads, head_dim, learned_sinks,
                   launch_next_after_wait, out);
}

template void launch_combine<float>(Partials, int, int, int, const float*, bool, float*, cudaStream_t);
template void launch_combine<__nv_bfloat16>(Partials, int, int, int, const float*, bool, __nv_bfloat16*,
                                            cudaStream_t);
template void launch_combine<__half>(Partials, int, int, int, const float*, bool, __half*, cudaStream_t);

}  // namespace attention_decode_detail

std::size_t attention_decode_workspace_bytes(std::int64_t slots, int query_heads, int kv_heads, int head_dim) {
  if (slots <= kWindowDecodeMaxSlots) return 0;  // one kernel, partials in shared memory
  const DecodePlan plan = plan_decode(slots, query_heads, kv_heads);
  return std::size_t(plan.splits) * query_heads * (head_dim + 2) * sizeof(float);
}

}  // namespace bifocal::cuda
