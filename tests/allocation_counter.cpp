#include "allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {

std::atomic<std::int64_t> allocation_count{0};

void* counted_malloc(std::size_t size) {
  allocation_count.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size ? size : 1);
}

}  // namespace

namespace bifocal::testing {
std::int64_t allocations_so_far() { return allocation_count.load(); }
}  // namespace bifocal::testing

// Every unaligned form is replaced, throwing and nothrow, single and array, so each allocation
// is counted and each is freed by the matching replacement. With only the throwing forms replaced,
// a nothrow new (std::stable_sort's temporary buffer) came from the runtime's allocator and went
// back through this file's free(): AddressSanitizer's alloc-dealloc-mismatch in 16 eval tests.
// The aligned forms stay the runtime's own, new and delete alike.
void* operator new(std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
