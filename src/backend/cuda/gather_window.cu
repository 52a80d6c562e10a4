// The window prefill's gather in one kernel (gather_window.cuh). Memory-bound and tiny: a
// grid-stride loop over each part in turn (the cached window, the new keys, the new values, the
// positions), 4 elements of a row an item.
#include "backend/cuda/gather_window.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"

namespace bifocal::cuda {
namespace {

constexpr int kThreads = 256;

// 4 elements of T as raw bits (8 bytes of bf16 or fp16, 16 of fp32).
template <typename T>
using Four = std::conditional_t<std::is_same_v<T, float>, uint4, uint2>;

// The chunk's token that store_kv_slots leaves in `slot` (−1: none), the inverse of its rule: a
// position p < sinks goes to slot p, a later one to sinks + (p − sinks) mod (slots − sinks), and
// of the chunk's tokens landing on one slot the last wins.
template <typename T>
__device__ std::int64_t token_for_slot(const GatherWindowArgs<T>& a, std::int64_t slot) {
  const std::int64_t first = a.first_position, last = first + a.n - 1, sinks = a.sink_tokens;
  std::int64_t p = slot;
  if (slot >= sinks) {
    const std::int64_t ring = a.slots - sinks, offset = slot - sinks, past = last - sinks;
    if (past < offset) return -1;  // no position of the chunk's reaches this slot yet
    p = last - (past - offset) % ring;  // the latest p ≤ last with (p − sinks) mod ring = offset
  }
  return p >= first && p <= last ? p - first : -1;
}

// The new tokens' quads a thread loads before it stores any (gather_new_tokens).
constexpr int kNewTokenQuadsInFlight = 4;

// The cached window, bit for bit, and (store_new_tokens) each slot's new element over the one just
// read (this thread's alone): flat index i over the keys' then the values' ring quads.
template <typename T>
__device__ void gather_cached_window(const GatherWindowArgs<T>& a, std::int64_t first, std::int64_t step) {
  const std::int64_t quads = a.row / 4, ring = a.slots * quads;
  for (std::int64_t i = first; i < 2 * ring; i += step) {
    const bool value = i >= ring;
    const std::int64_t q = value ? i - ring : i;
    T* from = (value ? a.ring_values : a.ring_keys) + 4 * q;
    T* to = (value ? a.values : a.keys) + 4 * q;
    // Both loads before either store: two in flight, and the old element read before the new lands.
    const Four<T> cached = __ldcg(reinterpret_cast<const Four<T>*>(from));
    const std::int64_t token = a.store_new_tokens ? token_for_slot(a, q / quads) : -1;
    float4 incoming{};
    if (token >= 0)
      incoming = __ldcg(reinterpret_cast<const float4*>((value ? a.new_values : a.new_keys) + token * a.row +
                                                        4 * (q % quads)));
    *reinterpret_cast<Four<T>*>(to) = cached;
    if (token >= 0) device::store4(from, incoming);
  }
}

// The new tokens after the window, rounded to T: `from` (fp32) to `to`, `count` quads. A thread
// loads kNewTokenQuadsInFlight quads before it stores one, so that a block keeps that many times
// its threads' loads in flight: this is most of the gather's bytes, and beside Bifocal's
// contributions kernel (wait_at_end) only two blocks of it fit an SM. Measured (stop 55): swa's
// 1K gather 10.0 → 9.6 µs; beside the contributions kernel it ends with that kernel either way.
template <typename T>
__device__ void gather_new_tokens(const float* from, T* to, std::int64_t count, std::int64_t first,
                                  std::int64_t step) {
  for (std::int64_t q = first; q < count; q += kNewTokenQuadsInFlight * step) {
    float4 x[kNewTokenQuadsInFlight];
    #pragma unroll
    for (int u = 0; u < kNewTokenQuadsInFlight; ++u)
      if (q + u * step < count) x[u] = __ldcg(reinterpret_cast<const float4*>(from) + q + u * step);
    #pragma unroll
    for (int u = 0; u < kNewTokenQuadsInFlight; ++u)
      if (q + u * step < count) device::store4(to + 4 * (q + u * step), x[u]);
  }
}

// Every element is read once, through L2 only (__ldcg); the three parts write disjoint rows.
template <typename T>
__global__ void __launch_bounds__(kThreads) gather_window_kernel(GatherWindowArgs<T> a) {
  device::allow_next_kernel_launch();
  // The new keys, values and positions are earlier kernels': complete already when wait_at_end.
  if (!a.wait_at_end) device::wait_for_previous_kernel();
  const std::int64_t first = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x,
                     step = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t fresh = a.n * (a.row / 4), window = a.slots * a.row;
  gather_cached_window(a, first, step);
  gather_new_tokens(a.new_keys, a.keys + window, fresh, first, step);
  gather_new_tokens(a.new_values, a.values + window, fresh, first, step);
  for (std::int64_t j = first; j < a.slots + a.n; j += step) {  // positions: the window's, then the new tokens'
    a.positions[j] = j < a.slots ? __ldcg(a.ring_positions + j) : __ldcg(a.new_positions + (j - a.slots));
    if (j < a.slots && a.store_new_tokens)
      if (const std::int64_t token = token_for_slot(a, j); token >= 0) a.ring_positions[j] = a.first_position + token;
  }
  if (a.wait_at_end) device::wait_for_previous_kernel();  // this kernel's completion implies the one before
}
}  // namespace

template <typename T>
void gather_window(const GatherWindowArgs<T>& args, cudaStream_t stream) {
  if (args.row <= 0 || args.row % 4 != 0)
    fail("gather_window", "row of " + std::to_string(args.row) + " elements is not a positive multiple of 4");
  if (args.slots < 0 || args.n < 0) fail("gather_window", "negative slot or token count");
  const bool ring_missing =
      args.slots > 0 && (args.ring_keys == nullptr || args.ring_values == nullptr || args.ring_positions == nullptr);
  const bool new_missing =
      args.n > 0 && (args.new_keys == nullptr || args.new_values == nullptr || args.new_positions == nullptr);
  if (args.keys == nullptr || args.values == nullptr || args.positions == nullptr || ring_missing || new_missing)
    fail("gather_window", "missing input or output");
  if (args.store_new_tokens && (args.sink_tokens < 0 || args.slots <= args.sink_tokens))
    fail("gather_window", "a window of " + std::to_string(args.slots) + " slots is not larger than its " +
                              std::to_string(args.sink_tokens) + " sink tokens");
  const std::int64_t total = 2 * (args.slots + args.n) * (args.row / 4) + args.slots + args.n;
  if (total == 0) return;
  // A grid-stride loop over at most 8 blocks an SM: enough to keep the copies in flight (2 when
  // each waits at its end, beside a kernel that holds the SMs).
  const std::int64_t blocks = std::min<std::int64_t>((total + kThreads - 1) / kThreads,
                                                     (args.wait_at_end ? 2 : 8) * std::int64_t(multiprocessor_count()));
  launch_dependent(gather_window_kernel<T>, dim3(unsigned(blocks)), dim3(kThreads), 0, stream, "gather_window_kernel",
                   args);
}

template void gather_window(const GatherWindowArgs<float>&, cudaStream_t);
template void gather_window(const GatherWindowArgs<__nv_bfloat16>&, cudaStream_t);
template void gather_window(const GatherWindowArgs<__half>&, cudaStream_t);

}  // namespace bifocal::cuda
