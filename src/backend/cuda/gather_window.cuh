// A window's prefill reads its keys from one array: the cached window (the ring, in T) followed by
// the chunk's new keys (fp32 from the products, converted to T), each with its position
// (DeviceMixer::gather_window; the attention only needs positions, not order, DESIGN.md "swa").
// One kernel does the six copies (three copies and two conversions and the positions were six
// launches, ~14 µs of a 1K-token Qwen3-4B window layer; the kernel ~7).
//
// With store_new_tokens it also stores the chunk's tokens into the ring, as store_kv_slots would
// after it: the thread that copies a slot's element out then writes that slot's new element (the
// chunk's last token landing on it), so no element is overwritten before it is read and the
// window prefill launches no store of its own (a ~1024-block kernel that, after the attention,
// held up the next launch until the attention's last blocks left).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace bifocal::cuda {

template <typename T>
struct GatherWindowArgs {
  T* ring_keys = nullptr;                        // [slots, row] (written only with store_new_tokens)
  T* ring_values = nullptr;                      // [slots, row]
  std::int64_t* ring_positions = nullptr;        // [slots] (−1: empty)
  std::int64_t slots = 0;
  const float* new_keys = nullptr;               // [n, row]
  const float* new_values = nullptr;             // [n, row]
  const std::int64_t* new_positions = nullptr;   // [n]
  std::int64_t n = 0;
  std::int64_t row = 0;                          // kv_heads · head_dim, a multiple of 4
  T* keys = nullptr;                             // [slots + n, row]
  T* values = nullptr;                           // [slots + n, row]
  std::int64_t* positions = nullptr;             // [slots + n]
  // The store folded in (above): the ring is a window of `slots` slots whose first sink_tokens
  // hold positions 0 … sink_tokens − 1 and the rest a ring (store_kv_slots' slot rule), and the
  // new tokens' positions are first_position, first_position + 1, … (prefill's).
  bool store_new_tokens = false;
  int sink_tokens = 0;
  std::int64_t first_position = 0;
  // Beside the kernel before it (Bifocal's prefill: mlstm_prefill's window_gather, after the
  // mLSTM contributions kernel, which lets it launch only after its own wait, so every input here
  // was written by kernels that have completed): copies at once and waits for the kernel before
  // it only at its end, so that its completion still implies that kernel's (dependent_launch.h).
  // Its grid is then at most two blocks an SM, since a block that waits at its end keeps its slot.
  bool wait_at_end = false;
};

// T is float, __nv_bfloat16 or __half. Fails, by name, on a row that is not a positive multiple
// of 4, a missing pointer, or (store_new_tokens) a window no larger than its sink tokens.
template <typename T>
void gather_window(const GatherWindowArgs<T>& args, cudaStream_t stream);

}  // namespace bifocal::cuda
