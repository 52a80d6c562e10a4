// Token sampling on the device, the top-k / top-p path and the choice of path (the contract is
// in sampling.cuh; the CPU semantics it reproduces are src/runtime/sampler.cpp; greedy and
// Gumbel-max are in sampling_argmax.cu). The logits are cut into 16384-logit slices; one block per
// slice keeps the slice's k largest (radix select), one block keeps the k largest of those, sorts
// them (value descending, index ascending: the CPU's order), forms exp(s_i − s_0) and its running
// sum, cuts the nucleus where the running sum reaches p · total, and draws in it.
//
// Cost on an H200 at vocab 151,936 (0.6 MB of logits, read once), per call inside a CUDA graph:
// ≈ 29 µs at k ≤ 40, 36 µs at k = 256, 64 µs at k = 1024, 150 µs at the 4096 cap (top-p alone).
// It is bound by block-barrier latency, not bytes: with 1024 threads one barrier step costs ~550
// cycles, and each radix byte pass takes three of them (see find_top_k_threshold).
#include "backend/cuda/sampling.cuh"

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/sampling_device.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

using namespace sampling_detail;

// ---------------------------------------------------------------------------------------------
// Block-wide top-k selection (radix select), 1024 threads. The items are "warp-striped": warp w
// owns a contiguous run of positions and its lane l holds the run's items l, l + 32, l + 64, ...,
// so every load is coalesced and the position order is (warp, step, lane). The k-th largest
// logit t* is found one byte of its order key at a time (4 histogram passes, most significant
// first); then the items with logit > t* are written, and of those equal to t* the first ones in
// position order until k are written. Items under a lower bound known to be ≤ t* are skipped.
// ---------------------------------------------------------------------------------------------
constexpr int kSelectThreads = 1024;
constexpr int kSelectWarps = kSelectThreads / 32;
constexpr int kRadixBins = 256;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// A uint32 whose unsigned order is the float order of the logits (-0.0 made +0.0 first: they tie,
// as in the CPU comparator). Negative floats have their bits inverted, positive ones the sign set.
// Every finite or infinite logit has a key > 0.
__device__ __forceinline__ std::uint32_t order_key(float logit) {
  if (logit == 0.0f) logit = 0.0f;
  const std::uint32_t bits = __float_as_uint(logit);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The logit of an order key (the inverse of order_key, up to the sign of zero).
__device__ __forceinline__ float logit_of_key(std::uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

struct SelectionStorage {
  int histogram[kRadixBins];
  int warp_above[kSelectWarps];  // per warp: items above / tied with t*, then their exclusive
  int warp_ties[kSelectWarps];   // prefix sums over the warps
  std::uint32_t prefix;          // the bytes of t*'s key found so far
  int remaining;                 // how many of the items matching `prefix` still belong to the top k
};

// The k-th largest key t* and how many items equal to it belong to the top k.
struct SelectionThreshold {
  std::uint32_t key;
  int ties_taken;
};

// Warp 0: the bin, scanned from the top, where the running count reaches `remaining`.
// Lane l owns bins [8l, 8l + 8); a suffix scan over the lanes gives the counts of higher bins.
__device__ void pick_radix_bin(SelectionStorage& storage, int shift) {
  const int lane = threadIdx.x;
  int lane_count = 0;
  for (int bin = 8 * lane; bin < 8 * lane + 8; ++bin) lane_count += storage.histogram[bin];
  int suffix = lane_count;  // inclusive sum over lanes ≥ lane
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_down_sync(kFullWarp, suffix, offset);
    if (lane + offset < 32) suffix += other;
  }
  const int remaining = storage.remaining;
  const std::uint32_t prefix = storage.prefix;
  __syncwarp();  // every lane has read storage before one lane rewrites it
  int above = suffix - lane_count;  // items in bins above this lane's
  for (int bin = 8 * lane + 7; bin >= 8 * lane; --bin) {
    const int count = storage.histogram[bin];
    if (above < remaining && remaining <= above + count) {  // exactly one bin of the 256 passes
      storage.prefix = prefix | (std::uint32_t(bin) << shift);
      storage.remaining = remaining - above;
    }
    above += count;
  }
}

// for_each_item(visit) calls visit(std::uint32_t key, int token, bool valid) for each of this
// thread's items in position order (key = order_key(logit)), the same number of times in every
// thread (warp intrinsics run inside visit). Items with key < lower_bound count as absent; at
// least k items must be present. With bytes < 4 only the first bytes of t* are found (the rest of
// the returned key is 0, so it is a lower bound on t*; ties_taken is then meaningless).
template <typename ForEachItem>
__device__ SelectionThreshold find_top_k_threshold(ForEachItem for_each_item, int k, std::uint32_t lower_bound,
                                                   SelectionStorage& storage, int bytes = 4) {
  __syncthreads();  // a previous selection may still be reading storage
  if (threadIdx.x == 0) storage.prefix = 0, storage.remaining = k;
  const int lane = threadIdx.x % 32;
  std::uint32_t prefix_mask = 0;
#pragma unroll 1
  for (int shift = 24; shift >= 32 - 8 * bytes; shift -= 8) {
    if (threadIdx.x < kRadixBins) storage.histogram[threadIdx.x] = 0;
    __syncthreads();
    const std::uint32_t prefix = storage.prefix;
    for_each_item([&](std::uint32_t key, int, bool valid) {
      const bool counted = valid && key >= lower_bound && (key & prefix_mask) == prefix;
      if (!__any_sync(kFullWarp, counted)) return;  // after the first byte most warps have none
      const std::uint32_t bin = counted ? (key >> shift) & 0xFFu : kRadixBins;
      // Logits crowd into few bins: one atomic per distinct bin in the warp, not one per lane.
      const std::uint32_t peers = __match_any_sync(kFullWarp, bin);
      if (counted && lane == __ffs(int(peers)) - 1) atomicAdd(&storage.histogram[bin], __popc(peers));
    });
    __syncthreads();
    if (threadIdx.x < 32) pick_radix_bin(storage, shift);
    __syncthreads();
    prefix_mask |= 0xFFu << shift;
  }
  return {storage.prefix, storage.remaining};
}

// Warp 0: storage.warp_above/warp_ties become exclusive prefix sums over the warps.
__device__ void scan_warp_counts(SelectionStorage& storage) {
  const int lane = threadIdx.x;
  const int above = storage.warp_above[lane], ties = storage.warp_ties[lane];
  int above_inclusive = above, ties_inclusive = ties;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int above_other = __shfl_up_sync(kFullWarp, above_inclusive, offset);
    const int ties_other = __shfl_up_sync(kFullWarp, ties_inclusive, offset);
    if (lane >= offset) above_inclusive += above_other, ties_inclusive += ties_other;
  }
  storage.warp_above[lane] = above_inclusive - above;
  storage.warp_ties[lane] = ties_inclusive - ties;
}

// Writes the top k to out[0, k): first the items above t*, then the first ties_taken items equal
// to t*, each group in position order (so equal logits stay in position order).
template <typename ForEachItem>
__device__ void write_top_k(ForEachItem for_each_item, int k, SelectionThreshold threshold,
                            SelectionStorage& storage, Candidate* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned lanes_before = (1u << lane) - 1;
  int warp_above = 0, warp_ties = 0;
  for_each_item([&](std::uint32_t key, int, bool valid) {
    warp_above += __popc(__ballot_sync(kFullWarp, valid && key > threshold.key));
    warp_ties += __popc(__ballot_sync(kFullWarp, valid && key == threshold.key));
  });
  if (lane == 0) storage.warp_above[warp] = warp_above, storage.warp_ties[warp] = warp_ties;
  __syncthreads();
  if (warp == 0) scan_warp_counts(storage);
  __syncthreads();
  int above_before = storage.warp_above[warp], ties_before = storage.warp_ties[warp];
  const int above_total = k - threshold.ties_taken;
  for_each_item([&](std::uint32_t key, int token, bool valid) {
    const bool above = valid && key > threshold.key, tie = valid && key == threshold.key;
    const unsigned above_lanes = __ballot_sync(kFullWarp, above), tie_lanes = __ballot_sync(kFullWarp, tie);
    if (above) out[above_before + __popc(above_lanes & lanes_before)] = Candidate{logit_of_key(key), token};
    const int tie_rank = ties_before + __popc(tie_lanes & lanes_before);
    if (tie && tie_rank < threshold.ties_taken) out[above_total + tie_rank] = Candidate{logit_of_key(key), token};
    above_before += __popc(above_lanes);
    ties_before += __popc(tie_lanes);
  });
}

template <typename ForEachItem>
__device__ SelectionThreshold select_top_k(ForEachItem for_each_item, int k, std::uint32_t lower_bound,
                                           SelectionStorage& storage, Candidate* out) {
  const SelectionThreshold threshold = find_top_k_threshold(for_each_item, k, lower_bound, storage);
  write_top_k(for_each_item, k, threshold, storage, out);
  return threshold;
}

// `value` combined with `op` over the 1024 threads, returned to every thread.
template <typename T, typename Op>
__device__ T block_reduce(T value, Op op, T (&scratch)[kSelectWarps]) {
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(kFullWarp, value, offset));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  value = scratch[threadIdx.x % 32];
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(kFullWarp, value, offset));
  __syncthreads();  // scratch may be reused
  return value;
}

// ---------------------------------------------------------------------------------------------
// Stage 1: one block per 16384-logit slice writes the slice's top min(k, slice length) to
// candidates[slice · k, ...) and a SliceSummary. Each thread holds 16 order keys in registers.
// ---------------------------------------------------------------------------------------------
constexpr int kSliceItemsPerThread = 16;
constexpr int kSliceSize = kSelectThreads * kSliceItemsPerThread;

int slice_count(int vocab) { return (vocab + kSliceSize - 1) / kSliceSize; }

struct SliceSummary {
  std::uint32_t threshold_key;  // the slice's k-th largest key (0 if it has fewer than k logits)
  float max_scaled_logit;       // with_softmax_sum only: max logit / T over the slice,
  float exp_sum;                // and Σ exp(logit / T − that max) over the slice
};

__global__ __launch_bounds__(kSelectThreads) void select_slice_candidates_kernel(
    const float* logits, int vocab, int k, float temperature, bool with_softmax_sum, Candidate* candidates,
    SliceSummary* summaries) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  __shared__ SelectionStorage storage;
  __shared__ std::uint32_t max_scratch[kSelectWarps];
  __shared__ float sum_scratch[kSelectWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slice_start = blockIdx.x * kSliceSize;
  const int slice_length = min(kSliceSize, vocab - slice_start);
  const int warp_start = slice_start + warp * 32 * kSliceItemsPerThread;
  std::uint32_t keys[kSliceItemsPerThread];  // item j is token warp_start + 32·j + lane
#pragma unroll
  for (int j = 0; j < kSliceItemsPerThread; ++j) {
    const int token = warp_start + 32 * j + lane;
    keys[j] = token < vocab ? order_key(logits[token]) : 0;
  }
  auto for_each_item = [&](auto&& visit) {
#pragma unroll
    for (int j = 0; j < kSliceItemsPerThread; ++j) {
      const int token = warp_start + 32 * j + lane;
      visit(keys[j], token, token < vocab);
    }
  };
  std::uint32_t thread_max = 0;  // 0: no item (every real key is > 0)
  for_each_item([&](std::uint32_t key, int, bool valid) {
    if (valid) thread_max = max(thread_max, key);
  });

  // A lower bound on the slice's k-th largest: the first two bytes of the k-th largest of the
  // per-thread maxima (k distinct items reach it). The exact passes then see a few dozen items
  // instead of 16384 (each pass costs ~3 block barriers, ~1.5 µs: the bound takes two of them).
  const int k_slice = min(k, slice_length);
  std::uint32_t lower_bound = 0;
  if (k_slice <= __syncthreads_count(thread_max > 0)) {
    auto for_each_maximum = [&](auto&& visit) { visit(thread_max, -1, thread_max > 0); };
    lower_bound = find_top_k_threshold(for_each_maximum, k_slice, 0u, storage, 2).key;
  }
  const SelectionThreshold threshold =
      select_top_k(for_each_item, k_slice, lower_bound, storage, candidates + std::size_t(blockIdx.x) * k);

  SliceSummary summary{k_slice == k ? threshold.key : 0u, -INFINITY, 0.0f};
  if (with_softmax_sum) {  // online-softmax pieces of the whole vocabulary's Σ exp(s − s_max)
    const auto larger = [](std::uint32_t a, std::uint32_t b) { return max(a, b); };
    summary.max_scaled_logit = logit_of_key(block_reduce(thread_max, larger, max_scratch)) / temperature;
    float exp_sum = 0.0f;
    for_each_item([&](std::uint32_t key, int, bool valid) {
      if (valid) exp_sum += expf(logit_of_key(key) / temperature - summary.max_scaled_logit);
    });
    summary.exp_sum = block_reduce(exp_sum, [](float a, float b) { return a + b; }, sum_scratch);
  }
  if (threadIdx.x == 0) summaries[blockIdx.x] = summary;
}

// ---------------------------------------------------------------------------------------------
// Stage 2, one block: the top k of the stage-1 candidates, sorted; softmax; top-p; the draw.
// ---------------------------------------------------------------------------------------------
struct DrawParams {
  float temperature;
  float top_p;
  std::uint64_t seed;
  bool whole_vocabulary_total;  // top-p against Σ over all logits (top_k = 0, k capped), not over the k
};

// Sorts items[0, size) best first (size a power of two): Batcher's bitonic network, whose merge
// runs alternate direction so that neighbouring runs form a bitonic sequence for the next size.
__device__ void sort_best_first(Candidate* items, int size) {
  for (int run = 2; run <= size; run *= 2) {
    for (int stride = run / 2; stride > 0; stride /= 2) {
      for (int pair = threadIdx.x; pair < size / 2; pair += kSelectThreads) {
        const int low = (pair / stride) * 2 * stride + pair % stride, high = low + stride;
        const bool best_first = (low & run) == 0;  // the last run (run = size) is all best-first
        const Candidate a = items[low], b = items[high];
        if (best_first ? is_better(b, a) : is_better(a, b)) items[low] = b, items[high] = a;
      }
      __syncthreads();
    }
  }
}

// Up to this many candidates are sorted by counting, for each, the candidates better than it:
// k steps per thread and one barrier, where the bitonic network needs ~log²k barriers.
constexpr int kRankSortLimit = 256;

__device__ void rank_sort_best_first(const Candidate* items, int size, Candidate* sorted) {
  for (int i = threadIdx.x; i < size; i += kSelectThreads) {
    const Candidate item = items[i];
    int rank = 0;
    for (int j = 0; j < size; ++j) rank += is_better(items[j], item);
    sorted[rank] = item;  // a strict total order: the ranks are a permutation
  }
  __syncthreads();
}

constexpr int kDrawItemsPerThread = kMaxSamplingCandidates / kSelectThreads;

__global__ __launch_bounds__(kSelectThreads) void draw_from_candidates_kernel(
    const Candidate* candidates, int count, const SliceSummary* summaries, int slices, int k, DrawParams params,
    std::uint64_t* step, std::int32_t* out_token) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
  using RunningSum = cub::BlockScan<float, kSelectThreads>;
  __shared__ SelectionStorage selection;
  __shared__ Candidate top[kMaxSamplingCandidates];
  __shared__ Candidate small_sorted[kRankSortLimit];
  __shared__ typename RunningSum::TempStorage scan;
  __shared__ float total_weight, nucleus_weight;
  __shared__ int last_rank, chosen_rank;  // the nucleus is ranks [0, last_rank]

  const std::uint64_t step_value = *step;  // every thread reads it before thread 0 advances it
  if (threadIdx.x == 0) last_rank = k - 1, chosen_rank = INT_MAX;

  // The top k of the candidates. Each slice's k-th largest bounds the overall k-th from below.
  std::uint32_t lower_bound = 0;
  for (int s = 0; s < slices; ++s) lower_bound = max(lower_bound, summaries[s].threshold_key);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_thread = (count + kSelectThreads - 1) / kSelectThreads;
  const int warp_start = warp * 32 * per_thread;
  // Loads go in batches of 8 so that 8 are in flight at once (visit's warp intrinsics would
  // otherwise keep the compiler from hoisting the next load above them).
  constexpr int kBatch = 8;
  auto for_each_item = [&](auto&& visit) {
    for (int batch_start = 0; batch_start < per_thread; batch_start += kBatch) {
      Candidate batch[kBatch];
      bool valid[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int position = warp_start + 32 * (batch_start + b) + lane;
        valid[b] = batch_start + b < per_thread && position < count;
        batch[b] = valid[b] ? candidates[position] : Candidate{-INFINITY, -1};
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) visit(order_key(batch[b].logit), batch[b].token, valid[b]);
    }
  };
  select_top_k(for_each_item, k, lower_bound, selection, top);
  __syncthreads();  // every thread wrote its share of top: read it whole only after this
  // A NaN or +inf logit orders above every finite one (order_key), so it is among the top k if the
  // logits hold one: then the answer is kNonFiniteLogitsToken, not a draw.
  bool non_finite = false;
  for (int i = threadIdx.x; i < k; i += kSelectThreads) non_finite = non_finite || is_non_finite_logit(top[i].logit);
  if (__syncthreads_or(non_finite)) {
    if (threadIdx.x == 0) *out_token = kNonFiniteLogitsToken, *step = step_value + 1;
    return;
  }

  // Sorted best first, as the CPU sorts (__syncthreads_or was the barrier). Bitonic: padding
  // (no_candidate) goes after every token.
  const Candidate* sorted = top;
  if (k <= kRankSortLimit) {
    rank_sort_best_first(top, k, small_sorted);
    sorted = small_sorted;
  } else {
    int sorted_size = 2;
    while (sorted_size < k) sorted_size *= 2;
    for (int i = k + threadIdx.x; i < sorted_size; i += kSelectThreads) top[i] = no_candidate();
    __syncthreads();
    sort_best_first(top, sorted_size);
  }

  // Softmax weights as the CPU computes them: s_i = logit_i / T, w_i = exp(s_i − s_0), and their
  // running sum over the ranks (thread t holds ranks [4t, 4t + 4): a blocked arrangement).
  const float max_scaled_logit = sorted[0].logit / params.temperature;
  const int first_rank = threadIdx.x * kDrawItemsPerThread;
  float weights[kDrawItemsPerThread], running[kDrawItemsPerThread];
#pragma unroll
  for (int j = 0; j < kDrawItemsPerThread; ++j) {
    const int rank = first_rank + j;
    weights[j] = rank < k ? expf(sorted[rank].logit / params.temperature - max_scaled_logit) : 0.0f;
  }
  RunningSum(scan).InclusiveSum(weights, running);
  if (params.whole_vocabulary_total) {
    if (threadIdx.x == 0) {
      float total = 0.0f;
      for (int s = 0; s < slices; ++s) {
        const SliceSummary summary = summaries[s];
        if (summary.max_scaled_logit > -INFINITY)
          total += summary.exp_sum * expf(summary.max_scaled_logit - max_scaled_logit);
      }
      total_weight = total;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kDrawItemsPerThread; ++j)
      if (first_rank + j == k - 1) total_weight = running[j];
  }
  __syncthreads();

  // top-p: the first rank whose running sum reaches p · total (rank k − 1 always does at p = 1;
  // with the whole vocabulary's total, none may: the nucleus is then all k candidates).
  const float nucleus_threshold = params.top_p * total_weight;
#pragma unroll
  for (int j = 0; j < kDrawItemsPerThread; ++j) {
    if (first_rank + j < k && running[j] >= nucleus_threshold) {
      atomicMin(&last_rank, first_rank + j);
      break;
    }
  }
  __syncthreads();
  const int nucleus_last = last_rank;
#pragma unroll
  for (int j = 0; j < kDrawItemsPerThread; ++j)
    if (first_rank + j == nucleus_last) nucleus_weight = running[j];
  __syncthreads();

  // The draw: target uniform in [0, nucleus weight); the token is the first rank whose running sum
  // exceeds it (the CPU's rule). Every thread computes the same Philox number.
  const float target = uniform_from_bits(random_bits(params.seed, step_value, kCandidateDraw, 0).x) * nucleus_weight;
#pragma unroll
  for (int j = 0; j < kDrawItemsPerThread; ++j) {
    if (first_rank + j <= nucleus_last && running[j] > target) {
      atomicMin(&chosen_rank, first_rank + j);
      break;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    *out_token = sorted[min(chosen_rank, nucleus_last)].token;  // u · weight rounding up: the last
    *step = step_value + 1;
  }
}

// Workspace of the top-k path: the stage-1 candidates (room for kMaxSamplingCandidates per
// slice), then one SliceSummary per slice.
std::size_t candidates_bytes(int vocab) {
  return std::size_t(slice_count(vocab)) * kMaxSamplingCandidates * sizeof(Candidate);
}
std::size_t top_k_workspace_bytes(int vocab) {
  return candidates_bytes(vocab) + std::size_t(slice_count(vocab)) * sizeof(SliceSummary);
}

// Stage-1 output: slice s wrote min(k, its length) candidates at s · k; only the last slice can
// be shorter than k, so the candidates are one contiguous run of this length.
int stage1_candidate_count(int vocab, int k) {
  const int slices = slice_count(vocab);
  const int last_length = vocab - (slices - 1) * kSliceSize;
  return (slices - 1) * k + std::min(k, last_length);
}

void launch_top_k_top_p(const float* logits, int vocab, int k, DrawParams params, std::uint64_t* step,
                        void* workspace, std::int32_t* out_token, cudaStream_t stream) {
  auto* candidates = static_cast<Candidate*>(workspace);
  auto* summaries = reinterpret_cast<SliceSummary*>(static_cast<char*>(workspace) + candidates_bytes(vocab));
  const int slices = slice_count(vocab);
  launch_dependent(select_slice_candidates_kernel, dim3(slices), dim3(kSelectThreads), 0, stream,
                   "select_slice_candidates_kernel", logits, vocab, k, params.temperature,
                   params.whole_vocabulary_total, candidates, summaries);
  launch_dependent(draw_from_candidates_kernel, dim3(1), dim3(kSelectThreads), 0, stream,
                   "draw_from_candidates_kernel", static_cast<const Candidate*>(candidates),
                   stage1_candidate_count(vocab, k), static_cast<const SliceSummary*>(summaries), slices, k, params,
                   step, out_token);
}

}  // namespace

std::size_t sampling_workspace_bytes(int vocab) {
  return std::max(argmax_workspace_bytes(vocab), top_k_workspace_bytes(vocab));  // the paths never run together
}

void sample_logits(const float* logits, int vocab, const SamplingParams& params, std::uint64_t* step,
                   void* workspace, std::int32_t* out_token, cudaStream_t stream) {
  check_logits("sample_logits", logits, vocab);
  check_sampling_params(params);  // the CPU Sampler's checks and messages
  const int k = params.top_k > 0 ? std::min(params.top_k, vocab) : vocab;
  if (params.temperature <= 0.0f || k == 1) {
    launch_argmax<false>(logits, vocab, GumbelNoise{}, workspace, out_token, step, stream);
  } else if (k == vocab && params.top_p >= 1.0f) {
    const GumbelNoise noise{params.temperature, params.seed, step};
    launch_argmax<true>(logits, vocab, noise, workspace, out_token, step, stream);
  } else {
    // With no top-k limit, top-p measures the nucleus against all logits even when the candidates
    // are capped, so it is exact whenever the nucleus fits in kMaxSamplingCandidates tokens.
    const bool capped = k > kMaxSamplingCandidates;
    const DrawParams draw{params.temperature, params.top_p, params.seed, capped && k == vocab};
    launch_top_k_top_p(logits, vocab, std::min(k, kMaxSamplingCandidates), draw, step, workspace, out_token, stream);
  }
}

}  // namespace bifocal::cuda
