#include "core/thread_pool.h"

#include <algorithm>

namespace bifocal {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

// Chunks are claimed from an atomic counter, so uneven rows (causal attention) balance out.
void ThreadPool::work_on_chunks() {
  for (;;) {
    const std::int64_t begin = next_.fetch_add(chunk_);
    if (begin >= count_) return;
    task_(context_, begin, std::min(count_, begin + chunk_));
  }
}

void ThreadPool::run(std::int64_t count, Task task, void* context) {
  if (count <= 0) return;
  if (workers_.empty() || count == 1) {
    task(context, 0, count);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = task;
    context_ = context;
    count_ = count;
    chunk_ = std::max<std::int64_t>(1, count / (std::int64_t(size()) * 4));
    next_.store(0);
    busy_workers_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  work_on_chunks();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return busy_workers_ == 0; });
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    work_on_chunks();
    std::lock_guard lock(mutex_);
    if (--busy_workers_ == 0) done_.notify_one();
  }
}

}  // namespace bifocal
