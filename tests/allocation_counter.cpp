#include "allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
std::atomic<std::int64_t> allocation_count{0};
}

namespace bifocal::testing {
std::int64_t allocations_so_far() { return allocation_count.load(); }
}  // namespace bifocal::testing

void* operator new(std::size_t size) {
  allocation_count.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
