// Counts calls of the global operator new in the test binary (allocation_counter.cpp), so a
// test can assert that a code path allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>

namespace bifocal::testing {
std::int64_t allocations_so_far();
}  // namespace bifocal::testing
