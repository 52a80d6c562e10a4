// Small kernels of the device model's own bookkeeping (cuda_model.cpp), not of the math:
// random fills for synthetic weights and bench caches, and the end of a captured decode step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace bifocal::cuda {

// data[i] = scale · u_i with u_i uniform in [−1, 1), a hash of (seed, i): reproducible, and fast
// enough to fill 8 GB of synthetic weights in milliseconds. T: __nv_bfloat16, __half or float.
template <typename T>
void fill_uniform(T* data, std::int64_t count, std::uint64_t seed, float scale, cudaStream_t stream);

// data[i] = value.
template <typename T>
void fill_constant(T* data, std::int64_t count, T value, cudaStream_t stream);

// The last kernel of a decode step: the sampled token becomes the next step's input and the
// position advances, both on the device, so a replayed graph needs no copy from the host.
void advance_decode_step(const std::int32_t* sampled, std::int32_t* next_input, std::int64_t* position,
                         cudaStream_t stream);

}  // namespace bifocal::cuda
