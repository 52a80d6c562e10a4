// Decode attention over a short cache — ≤ kWindowDecodeMaxSlots slots: swa's window, Bifocal's
// window branch, full attention's linear cache while it is small — in ONE launch, the new
// token's store folded in when the caller passes its key and value. Contracts in
// attention_decode.cuh; the math is attention_decode.cu's (base-2 logits, q pre-multiplied by
// log2(e)/√d, the learned sink in the denominator only).
//
// ---- Cost model (H200: 132 SMs, ~1.98 GHz; Qwen3-4B swa(576): Hq 32, Hkv 8, d 128, bf16) ----
// The window is 576 slots × 8 KV heads × 512 B (key + value) = 2.4 MB: 0.6 µs at 4.3 TB/s, so a
// short cache is bound by latency, not bytes. The split kernel + combine cost 7–10 µs per layer
// (with store_kv_slots): three dependent launches, each waiting for its predecessor to drain,
// a cp.async ring prologue and a serial mma chain per tile. Here every step is one round trip:
//  * launch: one cluster of R ≤ 8 blocks (R = ⌈slots / 16⌉, capped) per KV head and group of ≤ 8
//    query heads, as few heads as keep the grid within one block per SM (window_plan): 2 heads, 128
//    blocks for Qwen3-4B; 1 head, 128 blocks for the Qwen3.5-like shape — more heads for windows
//    whose blocks stage more than 96 KiB. Block r
//    owns the contiguous slots
//    [r·n/R, (r+1)·n/R) (n: the ring's slots, or a linear cache's p + 1): 72 slots = 36 KiB.
//  * before the wait for the previous kernel (PDL): a ring's ranges depend on nothing earlier
//    kernels write, so the block asks L2 to prefetch its rows (cp.async.bulk.prefetch, one per
//    row: no register or shared-memory cost, no value read — a hint the contract allows) while
//    the previous kernels still run; the loads after the wait then come from L2 (~0.3 µs less).
//  * loads: ONE round — every 16-byte cp.async of the block's keys, values and slot positions is
//    issued before any arithmetic (9 per thread at 576 slots), the query and p meanwhile (with q/k
//    norm and RoPE folded in, a head, its norm weights and its sines and cosines in one round trip:
//    norm_rope_head_one_round_trip; three chained ones cost 0.5–1% of a decode step). The
//    staging holds ⌈slots/R⌉ rows; it falls back to two-stage rounds only when they do not fit
//    in 227 KiB (fp32 d ≥ 128 or d = 256 near 2K slots). ~0.4–0.8 µs from L2, ~1 µs from HBM.
//  * arithmetic, SIMT fp32 (exact; at ≤ 256 rows per block tensor cores would save nothing
//    visible): lanes_per_row = d/8 lanes share a row (16 for d = 128), 8 elements each, q of the
//    ≤ 8 heads in registers. A batch of 8/G rows × G heads = 8 dot products is reduced over the
//    row's lanes by a transposing butterfly (each step halves the values a lane keeps): 8
//    shuffles per batch instead of 32 (shuffles, at one warp-instruction per clock per SM, would
//    otherwise be the bound; 8 rather than 16 per batch pads a 72-row block to 96, not 128).
//    Then a block-wide softmax per head (warp per head), P·V on the same lanes
//    (8·G FMA per row and lane), the lanes' accumulators summed by shuffles and shared memory.
//    At 72 rows × 4 heads: ~1,200–1,500 FMA + ~200 shuffle warp-instructions per block per phase,
//    ~0.4 µs in all; at 256 rows (2K slots) ~1.2 µs.
//  * merge: each block's (max, Σe, Σe·v) per head stays in its shared memory; one cluster
//    barrier; block r then merges outputs [r·G·d/R, (r+1)·G·d/R) — 3R independent distributed
//    shared-memory loads per output, one round trip — applies the learned sink once and writes
//    the output (OutT float or bf16). A second barrier keeps every block's partial alive until
//    the cluster has read it. ~0.3 µs.
//  * store (new_key given): the block owning the new token's slot overwrites that staged row
//    and position with the fresh key/value (rounded to T, as the store would) once its copies
//    have landed, then writes them to the cache (one block) and the ring's position (one block
//    of the grid). Every block that stages that slot (other query-head slices of the KV head)
//    overrides it the same way, so what it read of the slot, old or new, never counts; other
//    KV heads' rows are other bytes. This removes store_kv_slots' launch and its kernel
//    boundary (~1.5 µs with PDL).
// Expected: ~1.5–2.5 µs per layer for swa(576) (one kernel, store included), ≤ ~3 µs at 2K bf16.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_decode_window_round.cuh"
#include "backend/cuda/cluster_launch.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/qk_norm_rope_device.cuh"
#include "backend/cuda/window_phase_stamps.cuh"

namespace bifocal::cuda {
namespace {

namespace cg = cooperative_groups;

// The round's steps and the launch shape they assume (attention_decode_window_round.cuh).
using window_decode::accumulate_values;
using window_decode::kElementsPerLane;
using window_decode::kThreads;
using window_decode::kWarps;
using window_decode::row_lanes;
using window_decode::RowLanes;
using window_decode::softmax_round;
using window_decode::stage_logits;
using window_decode::stage_slots;

constexpr int kMaxHeadsPerCluster = 8;  // query heads one cluster serves at most (the GROUP tiles: 1, 2, 4, 8)
constexpr int kMinRowsPerRank = 16;    // below this a block's fixed costs outweigh its share of the loads
constexpr int kSharedBudget = 227 * 1024 - 1024;  // the sm_90 per-block limit, less the static arrays
constexpr float kLog2e = 1.4426950408889634f;

static_assert(kMaxHeadsPerCluster <= kWarps, "the softmax step gives every head one warp");

// ---- PTX wrappers ----------------------------------------------------------------------------

using device::commit_async_copies;
using device::prefetch_bytes_to_l2;
using device::prefetch_line_to_l2;
using device::wait_async_copies;

template <typename OutT>  // float, bf16 or fp16
__device__ __forceinline__ void store_out(OutT* out, float value) { *out = device::from_float<OutT>(value); }

// ---- Layout (host and device) ------------------------------------------------------------------

// The launch and the dynamic shared memory of one block (the same in every block, so that a
// block's partial sits at the same address in each: map_shared_rank). Byte offsets:
//   acc    float [GROUP, d]  this block's Σ e·v per head (the partial the cluster merges)
//   q      float [GROUP, d]  the query heads, pre-scaled (zero past the unit's heads)
//   key    float [d]         the new token's key after q/k norm and RoPE (rope_inv_freq set)
//   logits float [round_rows, GROUP]  a round's logits, then in place its weights e^{s − m}
//   flags  u8 [round_rows]   a round's visibility per row
//   positions int64 [stages, round_rows]  a ring's staged slot positions
//   rows   the stages' key rows then value rows [round_rows][pitch] each; after the last round
//          the warps' accumulators [kWarps, GROUP, d] (it is at least that large)
struct WindowLayout {
  int ranks;          // blocks per cluster
  int heads_per_cluster;
  int slices;         // clusters per KV head (⌈group / heads_per_cluster⌉)
  int rows_per_rank;  // the most slots one block owns
  int round_rows;     // slots staged at once
  int stages;         // 1: the block's slots in one round; 2: double-buffered rounds
  int pitch;          // bytes per staged row: an odd number of 16-byte units ≥ the row
  int acc, q, key, logits, flags, positions, rows, bytes;
};

int window_ranks(std::int64_t slots) {
  return int(std::clamp<std::int64_t>((slots + kMinRowsPerRank - 1) / kMinRowsPerRank, 1, kMaxClusterRanks));
}

template <typename T>
WindowLayout window_layout(std::int64_t slots, int query_heads, int kv_heads, int head_dim, int heads_per_cluster,
                           int ranks, int group_tile) {
  WindowLayout l{};
  l.ranks = ranks;
  l.heads_per_cluster = heads_per_cluster;
  l.slices = (query_heads / kv_heads + heads_per_cluster - 1) / heads_per_cluster;
  l.rows_per_rank = int(std::max<std::int64_t>(1, (slots + l.ranks - 1) / l.ranks));
  const int units16 = head_dim * int(sizeof(T)) / 16;
  l.pitch = 16 * (units16 % 2 == 1 ? units16 : units16 + 1);
  const int head_floats = group_tile * head_dim * int(sizeof(float));
  const auto carve = [&](int round_rows, int stages) {
    int offset = 0;
    const auto take = [&](int bytes) {
      const int at = offset;
      offset += (bytes + 15) / 16 * 16;
      return at;
    };
    l.acc = take(head_floats);
    l.q = take(head_floats);
    l.key = take(head_dim * int(sizeof(float)));
    l.logits = take(round_rows * group_tile * int(sizeof(float)));
    l.flags = take(round_rows);
    l.positions = take(stages * round_rows * int(sizeof(std::int64_t)));
    l.rows = take(std::max(stages * round_rows * 2 * l.pitch, kWarps * head_floats));
    l.round_rows = round_rows;
    l.stages = stages;
    l.bytes = offset;
  };
  carve(l.rows_per_rank, 1);
  // Too large for one round: two stages of as many rows as fit (the copies of round k + 1 fly
  // while round k is computed).
  for (int rows = (l.rows_per_rank + 1) / 2; l.bytes > kSharedBudget && rows >= 1; --rows) carve(rows, 2);
  return l;
}

// ---- The kernel ----------------------------------------------------------------------------------

// Registers a thread. A group tile of one query head (the Qwen3.5-like shape, paper-fig2) takes 126
// unbounded, so its two blocks an SM fill the register file. Capped at 104 (no spills with 16-bit
// caches; fp32, a test path, would spill), stop 39, alternating rounds at 1K on two machines:
// Qwen3.5-like Bifocal 425.0–425.5 against 422.6–422.8 tok/s and 427.4–427.8 against 424.1–425.2
// (+0.6–0.8%), its swa ±0; paper-fig2 (fp16) swa 512 +0.5%, swa 64 −0.2%, Bifocal ±0. Qwen3-4B's
// two heads gained nothing at 104 (swa −0.4%, Bifocal ±0) and keep the compiler's 110 (255: no cap).
template <typename T, int GROUP>
constexpr int window_kernel_max_registers() {
  return GROUP == 1 && sizeof(T) == 2 ? 104 : 255;
}

// Cluster `unit` = (KV head kv, slice of ≤ 8 of its query heads); block `rank` of it owns the
// slots [rank·n/R, (rank+1)·n/R). See the cost model above for the steps. (kThreads a block.)
template <typename T, typename OutT, int GROUP>
__global__ void __maxnreg__((window_kernel_max_registers<T, GROUP>()))
    attention_decode_window_kernel(DecodeAttentionArgs<T> a, WindowLayout layout, OutT* out) {
  extern __shared__ __align__(16) unsigned char shared[];
  __shared__ float running_max[GROUP], running_sum[GROUP], correction[GROUP];
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank()), ranks = layout.ranks;
  const int unit = int(blockIdx.x) / ranks, kv = unit / layout.slices, slice = unit % layout.slices;
  const int d = a.head_dim, group = a.query_heads / a.kv_heads;
  const int first_head = kv * group + slice * layout.heads_per_cluster;
  const int heads = min(layout.heads_per_cluster, group - slice * layout.heads_per_cluster);
  const bool ring = a.slot_positions != nullptr;
  const std::int64_t row_stride = std::int64_t(a.kv_heads) * d;
  const T* keys = a.keys + std::int64_t(kv) * d;  // slot j's row: keys + j·row_stride
  const T* values = a.values + std::int64_t(kv) * d;

  device::WindowPhaseStamps phases;  // a debug build's (window_phase_stamps.cuh); nothing otherwise
  phases.begin();
  if (!a.launch_next_after_wait) device::allow_next_kernel_launch();
  if (ring) {  // the block's rows into L2 while the previous kernels run (a hint: no value is read)
    const std::int64_t begin = a.slots * rank / ranks, end = a.slots * (rank + 1) / ranks;
    const int row_bytes = d * int(sizeof(T)), count = int(end - begin);
    for (int i = threadIdx.x; i < 2 * count; i += kThreads)
      prefetch_bytes_to_l2((i < count ? keys : values) + (begin + i % count) * row_stride, row_bytes);
    // 16 positions per 128-byte line: addresses ≤ 16 apart, the last one the range's last slot.
    for (int i = threadIdx.x; count > 0 && i <= (count + 15) / 16; i += kThreads)
      prefetch_line_to_l2(a.slot_positions + min(begin + 16 * i, end - 1));
  }
  device::wait_for_previous_kernel();  // q, p, the new token (or its stored slot) are the previous kernels'
  phases.mark(device::kPhaseWaited);
  if (a.launch_next_after_wait) device::allow_next_kernel_launch();

  // The block's slots. A linear cache is read only up to p (its rows past p were never written).
  std::int64_t position = 0, end = a.slots;
  if (!ring) {
    position = *a.query_position;
    end = min(a.slots, position + 1);
  }
  const std::int64_t begin = end * rank / ranks;
  const int rows = int(end * (rank + 1) / ranks - begin);
  const int rounds = (rows + layout.round_rows - 1) / layout.round_rows;
  unsigned char* stage_rows = shared + layout.rows;
  std::int64_t* stage_positions = reinterpret_cast<std::int64_t*>(shared + layout.positions);
  const auto stage_keys = [&](int round) {
    return stage_rows + (round % layout.stages) * 2 * layout.round_rows * layout.pitch;
  };
  const auto stage_values = [&](int round) { return stage_keys(round) + layout.round_rows * layout.pitch; };
  const auto stage_positions_of = [&](int round) {
    return stage_positions + (round % layout.stages) * layout.round_rows;
  };
  const auto round_count = [&](int round) { return min(layout.round_rows, rows - round * layout.round_rows); };
  const auto round_first = [&](int round) { return begin + std::int64_t(round) * layout.round_rows; };

  // 1. Every copy of the first rounds (all of them, nearly always) before any arithmetic.
  for (int round = 0; round < layout.stages; ++round) {
    if (round < rounds)
      stage_slots(a, keys, values, round_first(round), round_count(round), position, layout.pitch, stage_keys(round),
                  stage_values(round), stage_positions_of(round));
    commit_async_copies();
  }
  // q (pre-scaled) and a ring's p while the copies fly.
  if (ring) position = *a.query_position;
  float* q_shared = reinterpret_cast<float*>(shared + layout.q);
  const float q_scale = kLog2e * rsqrtf(float(d));
  float* key_shared = reinterpret_cast<float*>(shared + layout.key);
  if (a.rope_inv_freq == nullptr) {
    for (int i = threadIdx.x; i < GROUP * d; i += kThreads)
      q_shared[i] = i / d < heads ? a.query[std::size_t(first_head) * d + i] * q_scale : 0.0f;
  } else {  // q/k norm and RoPE folded in: warp w the query head w, the warp after the last head the key
    for (int item = int(threadIdx.x) / 32; item <= GROUP; item += kThreads / 32) {
      if (item < heads) {
        float* row = q_shared + item * d;
        device::norm_rope_head_one_round_trip(a.query + std::size_t(first_head + item) * d, row, row, a.q_norm,
                                              a.norm_eps, float(position), a.rope_inv_freq, d, q_scale,
                                              a.rope_rotation);
      } else if (item < GROUP) {
        for (int i = int(threadIdx.x) % 32; i < d; i += 32) q_shared[item * d + i] = 0.0f;
      } else if (a.new_key != nullptr) {
        device::norm_rope_head_one_round_trip(a.new_key + std::size_t(kv) * d, key_shared, key_shared, a.k_norm,
                                              a.norm_eps, float(position), a.rope_inv_freq, d, 1.0f, a.rope_rotation);
      }
    }
  }
  phases.mark(device::kPhaseQueryReady);
  if (threadIdx.x < GROUP) {
    running_max[threadIdx.x] = -INFINITY;
    running_sum[threadIdx.x] = 0.0f;
  }
  // The new token's slot (store_kv_slots' rule), when this launch stores it.
  std::int64_t new_slot = -1;
  if (a.new_key != nullptr) {
    const bool wraps = ring && a.window > 0 && position >= a.sink_tokens;
    new_slot = wraps ? a.sink_tokens + (position - a.sink_tokens) % (a.window - a.sink_tokens) : position;
    if (new_slot >= a.slots) new_slot = -1;
  }

  const RowLanes lanes = row_lanes(d);
  float* logits = reinterpret_cast<float*>(shared + layout.logits);
  unsigned char* flags = shared + layout.flags;
  float acc[GROUP][kElementsPerLane] = {};
  for (int round = 0; round < rounds; ++round) {
    if (layout.stages == 2)
      wait_async_copies<1>();
    else
      wait_async_copies<0>();
    __syncthreads();  // the round's rows, q and the running state are visible to the block
    if (round == 0) phases.mark(device::kPhaseRowsLanded);
    const std::int64_t first = round_first(round);
    const int count = round_count(round);
    if (new_slot >= first && new_slot < first + count) {  // block-uniform
      // The store, folded in: the fresh key/value as the cache holds them (rounded to T) into
      // the staged row — its copy has landed, so nothing overwrites them — and into the cache.
      const int row = int(new_slot - first);
      T* staged_key = reinterpret_cast<T*>(stage_keys(round) + row * layout.pitch);
      T* staged_value = reinterpret_cast<T*>(stage_values(round) + row * layout.pitch);
      const std::size_t cache_row = std::size_t(new_slot) * row_stride + std::size_t(kv) * d;
      const float* new_key = a.rope_inv_freq != nullptr ? key_shared : a.new_key + std::size_t(kv) * d;
      for (int i = threadIdx.x; i < d; i += kThreads) {
        const T key = device::from_float<T>(new_key[i]);
        const T value = device::from_float<T>(a.new_value[std::size_t(kv) * d + i]);
        staged_key[i] = key;
        staged_value[i] = value;
        if (slice == 0) {  // the unit's other slices stage the same row; one writes the cache
          a.keys[cache_row + i] = key;
          a.values[cache_row + i] = value;
        }
      }
      if (threadIdx.x == 0) {
        stage_positions_of(round)[row] = position;
        if (ring && unit == 0) a.slot_positions[new_slot] = position;
      }
      __syncthreads();
    }
    stage_logits<T, GROUP>(a, stage_keys(round), ring ? stage_positions_of(round) : nullptr, first, count, position,
                           layout.pitch, q_shared, lanes, logits, flags);
    __syncthreads();
    softmax_round<GROUP>(logits, count, running_max, running_sum, correction);
    __syncthreads();
    accumulate_values<T, GROUP>(stage_values(round), logits, flags, count, layout.pitch, correction, lanes, acc);
    if (round + layout.stages < rounds) {
      __syncthreads();  // every thread is done with this stage
      stage_slots(a, keys, values, round_first(round + layout.stages), round_count(round + layout.stages), position,
                  layout.pitch, stage_keys(round), stage_values(round), stage_positions_of(round));
    }
    commit_async_copies();
  }

  phases.mark(device::kPhaseRoundsDone);
  // 2. The block's partial: the row groups' accumulators summed, first inside each warp by
  //    shuffles (its groups are `lanes` lanes apart), then over the warps through the staging
  //    memory, free now.
  for (int offset = lanes.lanes; offset < 32; offset *= 2)
    #pragma unroll
    for (int g = 0; g < GROUP; ++g)
      #pragma unroll
      for (int e = 0; e < kElementsPerLane; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], offset);
  wait_async_copies<0>();
  __syncthreads();
  float* warp_acc = reinterpret_cast<float*>(stage_rows);  // [kWarps, GROUP, d]
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 < lanes.lanes && lanes.active)
    #pragma unroll
    for (int g = 0; g < GROUP; ++g)
      #pragma unroll
      for (int e = 0; e < kElementsPerLane; ++e)
        warp_acc[(warp * GROUP + g) * d + lanes.part * kElementsPerLane + e] = acc[g][e];
  __syncthreads();
  float* block_acc = reinterpret_cast<float*>(shared + layout.acc);
  for (int i = threadIdx.x; i < heads * d; i += kThreads) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += warp_acc[(w * GROUP + i / d) * d + i % d];
    block_acc[i] = sum;
  }

  // 3. The cluster's merge: o = Σ_r e^{m_r − M} acc_r / (Σ_r e^{m_r − M} l_r + e^{S − M}),
  //    M = max(max_r m_r, S) (S: the learned sink, base 2; −∞ without). A block that saw no
  //    visible slot has m = −∞, l = 0, acc = 0: factor 0 on zeroes.
  cluster.sync();
  phases.mark(device::kPhaseMergeStart);
  const int total = heads * d, from = total * rank / ranks, to = total * (rank + 1) / ranks;
  for (int i = from + int(threadIdx.x); i < to; i += kThreads) {
    const int g = i / d;
    float max[kMaxClusterRanks], sum[kMaxClusterRanks], value[kMaxClusterRanks];
    #pragma unroll
    for (int r = 0; r < kMaxClusterRanks; ++r) {  // all loads first: one round trip
      if (r >= ranks) break;
      max[r] = *cluster.map_shared_rank(running_max + g, r);
      sum[r] = *cluster.map_shared_rank(running_sum + g, r);
      value[r] = *cluster.map_shared_rank(block_acc + i, r);
    }
    const float sink = a.learned_sinks ? a.learned_sinks[first_head + g] * kLog2e : -INFINITY;
    float top = sink;
    #pragma unroll
    for (int r = 0; r < kMaxClusterRanks; ++r)
      if (r < ranks) top = fmaxf(top, max[r]);
    const float shift = top == -INFINITY ? 0.0f : top;
    float numerator = 0.0f, denominator = exp2f(sink - shift);
    #pragma unroll
    for (int r = 0; r < kMaxClusterRanks; ++r) {
      if (r >= ranks) break;
      const float factor = exp2f(max[r] - shift);
      numerator = fmaf(factor, value[r], numerator);
      denominator = fmaf(factor, sum[r], denominator);
    }
    store_out(out + std::size_t(first_head) * d + i, numerator / denominator);
  }
  phases.mark(device::kPhaseMerged);
  cluster.sync();  // no block leaves while another still reads its partial
  phases.mark(device::kPhaseEnd);
  phases.report();
}

// The launch's shape: query heads a cluster serves, blocks a cluster.
struct WindowPlan {
  int heads_per_cluster;
  int ranks;
};

// The group tile (a power of two) that holds `heads` query heads.
int group_tile_of(int heads) { return heads <= 1 ? 1 : heads <= 2 ? 2 : heads <= 4 ? 4 : 8; }

// The group tile for `heads` query heads per cluster: body.template operator()<GROUP>().
template <typename Body>
auto with_group_tile(int heads, Body&& body) {
  switch (group_tile_of(heads)) {
    case 1: return body.template operator()<1>();
    case 2: return body.template operator()<2>();
    case 4: return body.template operator()<4>();
    default: return body.template operator()<8>();
  }
}

// GROUP: the tile (a power of two) that holds the plan's query heads.
template <typename T, int GROUP>
WindowLayout planned_layout(const DecodeAttentionArgs<T>& a, WindowPlan plan) {
  return window_layout<T>(a.slots, a.query_heads, a.kv_heads, a.head_dim, plan.heads_per_cluster, plan.ranks, GROUP);
}

template <typename T, typename OutT>
WindowClusterFit cluster_fit(const DecodeAttentionArgs<T>& a, WindowPlan plan) {
  return with_group_tile(plan.heads_per_cluster, [&]<int GROUP>() {
    const WindowLayout layout = planned_layout<T, GROUP>(a, plan);
    return WindowClusterFit{a.kv_heads * layout.slices,
                            max_active_clusters(attention_decode_window_kernel<T, OutT, GROUP>, kThreads,
                                                layout.ranks, std::size_t(layout.bytes),
                                                "attention_decode_window_kernel")};
  });
}

// Query heads a cluster: the fewest (halving from 8) whose grid still fits one block per
// multiprocessor — unless the blocks stage more than kPairedStagingLimit, where a grid of more than
// half the multiprocessors keeps twice the heads. Each cluster stages its KV head's slots itself
// (a second cluster on the same KV head reads them again, from L2), but a block's dot products,
// P·V and q/k norm + RoPE shrink with its heads, and they, not the bytes, bound the kernel at the
// bench's windows (its cost model above). H200, tok/s, decode at 4K (stop 33; stop 23 for 576 first):
//   Qwen3-4B swa      576    1,024  1,280  1,600  2,048 slots  (a block stages 42, 73, 90, 112, 143 KiB)
//     2 heads, 128 blocks  382.2  375.5  365.3  329.3  306.2
//     4 heads,  64 blocks  377.3  370.0  363.5  358.2  351.0
//   Qwen3.5-like swa  576    1,024  1,600  2,048  (1 head stages 78, 137, 212, 226 KiB)
//     1 head,  128 blocks  427.9  357.0  311.9  281.9
//     2 heads,  64 blocks  427.9  415.2  361.4  329.2
//     4 heads,  32 blocks  419.5  397.3  347.0  316.0
// The one-block-per-multiprocessor grid falls off a cliff between 90 and 112 KiB a block (Qwen3-4B:
// 8 µs a layer from 1,280 to 1,600 slots, where twice the heads grow by 1.2 µs); why is not known.
// Past ~113 KiB only one block fits a multiprocessor and the H200 runs 15 clusters of 8, not 16:
// the fit check then doubles the heads so that every cluster runs at once (a second wave would
// cost a whole kernel's latency again; 2,048 slots).
constexpr int kPairedStagingLimit = 96 * 1024;

template <typename T, typename OutT>
WindowPlan window_plan(const DecodeAttentionArgs<T>& a) {
  const int group = a.query_heads / a.kv_heads, most = std::min(group, kMaxHeadsPerCluster);
  WindowPlan plan{most, window_ranks(a.slots)};
  const auto blocks = [&](int heads) { return std::int64_t(a.kv_heads) * ((group + heads - 1) / heads) * plan.ranks; };
  const auto staged_bytes = [&](int heads) {
    return window_layout<T>(a.slots, a.query_heads, a.kv_heads, a.head_dim, heads, plan.ranks, group_tile_of(heads)).bytes;
  };
  while (plan.heads_per_cluster > 1) {
    const int fewer = (plan.heads_per_cluster + 1) / 2;
    if (blocks(fewer) > multiprocessor_count()) break;
    if (blocks(fewer) > multiprocessor_count() / 2 && staged_bytes(fewer) > kPairedStagingLimit) break;
    plan.heads_per_cluster = fewer;
  }
  while (plan.heads_per_cluster < most) {
    const WindowClusterFit fit = cluster_fit<T, OutT>(a, plan);
    if (fit.max_active >= fit.clusters) break;
    plan.heads_per_cluster = std::min(2 * plan.heads_per_cluster, most);
  }
  return plan;
}

}  // namespace

template <typename T, typename OutT>
void attention_decode_window(const DecodeAttentionArgs<T>& a, OutT* out, cudaStream_t stream) {
  const WindowPlan plan = window_plan<T, OutT>(a);
  with_group_tile(plan.heads_per_cluster, [&]<int GROUP>() {
    const WindowLayout layout = planned_layout<T, GROUP>(a, plan);
    launch_in_clusters(attention_decode_window_kernel<T, OutT, GROUP>,
                       dim3(unsigned(a.kv_heads * layout.slices * layout.ranks)), kThreads, layout.ranks,
                       std::size_t(layout.bytes), stream, "attention_decode_window_kernel", a, layout, out);
  });
}

template <typename T, typename OutT>
WindowClusterFit attention_decode_window_cluster_fit(const DecodeAttentionArgs<T>& a) {
  return cluster_fit<T, OutT>(a, window_plan<T, OutT>(a));
}

template void attention_decode_window<__nv_bfloat16, float>(const DecodeAttentionArgs<__nv_bfloat16>&, float*,
                                                            cudaStream_t);
template void attention_decode_window<__nv_bfloat16, __nv_bfloat16>(const DecodeAttentionArgs<__nv_bfloat16>&,
                                                                    __nv_bfloat16*, cudaStream_t);
template void attention_decode_window<float, float>(const DecodeAttentionArgs<float>&, float*, cudaStream_t);
template void attention_decode_window<float, __nv_bfloat16>(const DecodeAttentionArgs<float>&, __nv_bfloat16*,
                                                            cudaStream_t);
template void attention_decode_window<__half, float>(const DecodeAttentionArgs<__half>&, float*, cudaStream_t);
template void attention_decode_window<__half, __half>(const DecodeAttentionArgs<__half>&, __half*, cudaStream_t);

template WindowClusterFit attention_decode_window_cluster_fit<__nv_bfloat16, float>(
    const DecodeAttentionArgs<__nv_bfloat16>&);
template WindowClusterFit attention_decode_window_cluster_fit<__nv_bfloat16, __nv_bfloat16>(
    const DecodeAttentionArgs<__nv_bfloat16>&);
template WindowClusterFit attention_decode_window_cluster_fit<__half, __half>(const DecodeAttentionArgs<__half>&);

}  // namespace bifocal::cuda
