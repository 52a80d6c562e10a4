// A window's prefill reads its keys from one array: the cached window (the ring, in T) followed by
// the chunk's new keys (fp32 from the products, converted to T), each with its position
// (DeviceMixer::gather_window; the attention only needs positions, not order, DESIGN.md "swa").
// One kernel does the six copies (three copies and two conversions and the positions were six
// launches, ~14 µs of a 1K-token Qwen3-4B window layer; the kernel ~7).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace bifocal::cuda {

template <typename T>
struct GatherWindowArgs {
  const T* ring_keys = nullptr;                  // [slots, row]
  const T* ring_values = nullptr;                // [slots, row]
  const std::int64_t* ring_positions = nullptr;  // [slots] (−1: empty)
  std::int64_t slots = 0;
  const float* new_keys = nullptr;               // [n, row]
  const float* new_values = nullptr;             // [n, row]
  const std::int64_t* new_positions = nullptr;   // [n]
  std::int64_t n = 0;
  std::int64_t row = 0;                          // kv_heads · head_dim, a multiple of 4
  T* keys = nullptr;                             // [slots + n, row]
  T* values = nullptr;                           // [slots + n, row]
  std::int64_t* positions = nullptr;             // [slots + n]
};

// T is float, __nv_bfloat16 or __half. Fails, by name, on a row that is not a positive multiple
// of 4 or a missing pointer.
template <typename T>
void gather_window(const GatherWindowArgs<T>& args, cudaStream_t stream);

}  // namespace bifocal::cuda
