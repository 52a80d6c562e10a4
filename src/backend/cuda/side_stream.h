// A second stream for work that may run beside the caller's: Bifocal's prefill runs its window
// branch beside its mLSTM branch (they read the same q, k, v; only the mLSTM's last kernel needs
// the window's output), so the latency-bound mLSTM kernels share the SMs with the window attention
// instead of leaving them half idle. fork() makes the side stream wait for everything queued on
// the parent so far; record_done() gives the event that completes with everything queued on the
// side stream, for the parent to wait on where it needs that work. Both are stream-ordered
// (events), so a caller's stream sees one layer's prefill as a single ordered step.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"

namespace bifocal::cuda {

class SideStream {
 public:
  SideStream() = default;  // none: fork() and record_done() are not to be called
  // A stream at the default priority (the mLSTM branch on a higher-priority stream measured no
  // better) and its two events.
  static SideStream create() {
    SideStream side;
    check(cudaStreamCreateWithFlags(&side.stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreateWithFlags(&side.forked_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check(cudaEventCreateWithFlags(&side.done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return side;
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  SideStream(SideStream&& other) noexcept { swap(other); }
  SideStream& operator=(SideStream&& other) noexcept {
    SideStream moved(std::move(other));
    swap(moved);
    return *this;
  }
  ~SideStream() {
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (forked_ != nullptr) cudaEventDestroy(forked_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // The side stream, after everything queued on `parent` so far.
  cudaStream_t fork(cudaStream_t parent) {
    check(cudaEventRecord(forked_, parent), "SideStream::fork");
    check(cudaStreamWaitEvent(stream_, forked_, 0), "SideStream::fork");
    return stream_;
  }
  // An event that completes with everything queued on the side stream so far.
  cudaEvent_t record_done() {
    check(cudaEventRecord(done_, stream_), "SideStream::record_done");
    return done_;
  }

 private:
  void swap(SideStream& other) noexcept {
    std::swap(stream_, other.stream_);
    std::swap(forked_, other.forked_);
    std::swap(done_, other.done_);
  }
  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr, done_ = nullptr;
};

}  // namespace bifocal::cuda
