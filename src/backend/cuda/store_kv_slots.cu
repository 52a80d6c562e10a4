// store_kv_slots: new tokens' keys/values (fp32) into their cache slots (converted to the cache's
// type) with their positions, which decode (attention_decode's long-cache path) and prefill share.
// Contract in attention_decode.cuh.
#include "backend/cuda/attention_decode.cuh"

#include <cstddef>
#include <cstdint>

#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_math.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {

using device::store4;

// One block per new token: converts its kv_heads·head_dim keys and values, 4 at a time.
template <typename T>
__global__ void store_kv_slots_kernel(const float* keys, const float* values, int n, const std::int64_t* positions,
                                      T* cache_keys, T* cache_values, std::int64_t* slot_positions, int kv_heads,
                                      int head_dim, int window, int sink_tokens) {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();  // keys, values and positions are the previous kernels'
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
  launch_dependent(store_kv_slots_kernel<T>, dim3(n), dim3(128), 0, stream, "store_kv_slots_kernel", keys, values, n,
                   positions, cache_keys, cache_values, slot_positions, kv_heads, head_dim, window, sink_tokens);
}

template void store_kv_slots<__nv_bfloat16>(const float*, const float*, int, const std::int64_t*, __nv_bfloat16*,
                                            __nv_bfloat16*, std::int64_t*, int, int, int, int, cudaStream_t);
template void store_kv_slots<float>(const float*, const float*, int, const std::int64_t*, float*, float*,
                                    std::int64_t*, int, int, int, int, cudaStream_t);
template void store_kv_slots<__half>(const float*, const float*, int, const std::int64_t*, __half*, __half*,
                                     std::int64_t*, int, int, int, int, cudaStream_t);

}  // namespace bifocal::cuda
