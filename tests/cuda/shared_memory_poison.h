// Shared memory that a kernel reads before it writes holds whatever the previous kernel on that SM
// left there, usually finite numbers, so such a read can pass a test by luck. poison_shared_memory
// fills the shared memory of every SM with 0xFF bytes (NaN as floats and doubles) by a kernel that
// takes the most an SM allows, so that the next kernel's unwritten shared words are NaN: a result
// that reads one fails. (What an SM's shared memory holds between kernels is not specified; on
// sm_90 it is kept, which is what this relies on to catch reads, not to pass.)
#pragma once

namespace bifocal::testing {

// On the default stream; synchronous (errors name the kernel).
void poison_shared_memory();

}  // namespace bifocal::testing
