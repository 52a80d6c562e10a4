// What the launchers need to know of the device (host code: .cpp files may include it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace bifocal::cuda {

// An attribute of the current device, read once (one device per process).
inline int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&value, attribute, device), "cudaDeviceGetAttribute");
  return value;
}

// Multiprocessors of the current device (read once; H200: 132).
inline int multiprocessor_count() {
  static const int count = device_attribute(cudaDevAttrMultiProcessorCount);
  return count;
}

// The dynamic shared memory to ask for a grid of `blocks` that needs `needed` bytes a block, so
// that at most `per_sm` of its blocks share a multiprocessor. A kernel launched as a programmatic
// dependent starts while the kernel before it still holds the SMs, and its blocks go wherever room
// frees up first: a small grid then piles up on a few SMs. The mLSTM contributions kernel (128
// blocks at 1K tokens, 54 KiB each, four fit an SM) took 28 µs so, against 17 µs spread one block
// an SM (docs/notes/cuda-stop42-2026-12-04.md). So a grid of at most per_sm blocks an SM asks for
// just over 1 / (per_sm + 1) of an SM's shared memory: per_sm + 1 of its blocks never share one.
inline std::size_t spread_shared_bytes(std::size_t needed, std::int64_t blocks, int per_sm = 1) {
  static const std::size_t sm_bytes = std::size_t(device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  static const std::size_t per_block = std::size_t(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  const std::size_t over_share = (sm_bytes / std::size_t(per_sm + 1) / 1024 + 1) * 1024;
  if (blocks > std::int64_t(per_sm) * multiprocessor_count() || needed >= over_share || over_share > per_block)
    return needed;
  return over_share;
}

}  // namespace bifocal::cuda
