// Owning device memory (RAII over cudaMalloc/cudaFree) and the two copies tests and loading need.
// Sessions and weights allocate once; nothing here is used per decoded token.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace bifocal::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) check(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)), "cudaMalloc");
  }
  // A copy of host data.
  explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  void upload(std::span<const T> host) {
    if (host.size() > count_) fail("DeviceBuffer::upload", "more elements than the buffer holds");
    check(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    check(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
  // Fills every byte with `byte` (tests poison outputs with 0xFF: a NaN pattern in bf16 and fp32).
  void fill_bytes(int byte) { check(cudaMemset(data_, byte, bytes()), "cudaMemset"); }

 private:
  void release() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace bifocal::cuda
