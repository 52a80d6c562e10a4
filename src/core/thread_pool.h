// A fixed pool of worker threads for the CPU backend's loops over heads and rows.
// parallel_for does not allocate: the body is passed by reference through a plain function
// pointer, so the decode step stays allocation-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace bifocal {

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }  // the calling thread works too

  // Calls body(i) for every i in [0, count), spread over the threads; returns when all are done.
  template <typename Body>
  void parallel_for(std::int64_t count, Body&& body) {
    auto trampoline = [](void* context, std::int64_t begin, std::int64_t end) {
      auto& f = *static_cast<std::remove_reference_t<Body>*>(context);
      for (std::int64_t i = begin; i < end; ++i) f(i);
    };
    run(count, trampoline, const_cast<void*>(static_cast<const void*>(&body)));
  }

  // The process-wide pool used by the CPU backend.
  static ThreadPool& global();

 private:
  using Task = void (*)(void*, std::int64_t, std::int64_t);
  void run(std::int64_t count, Task task, void* context);
  void worker_loop();
  void work_on_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  Task task_ = nullptr;
  void* context_ = nullptr;
  std::int64_t count_ = 0;
  std::int64_t chunk_ = 1;
  std::atomic<std::int64_t> next_{0};
  int busy_workers_ = 0;
};

}  // namespace bifocal
