// The Bifocal decode step (contract in bifocal_decode.cuh; CPU counterpart
// mixer/bifocal_mixer.cpp = SlidingWindowMixer + MlstmMixer + the gate mix, DESIGN.md bifocal).
//
// Design: each branch runs as the kernel that is already fastest for it, and neither the gates
// nor the mix costs a launch of its own:
//   1. the window branch is swa's own decode attention, attention_decode<T, float>
//      (attention_decode.cuh: split kernel + combine, or one kernel for short windows), which
//      stores the new token in the ring (new_key/new_value), applies the learned sink and writes
//      the SWA output in fp32 into the workspace — so the window costs Bifocal exactly what it
//      costs swa at the same window;
//   2. the mLSTM step (mlstm_decode.cu: one cluster of blocks per state head, one memory round
//      trip) computes the gates ĩ, f̃, o from x itself, reads the SWA output of its columns in
//      the same round trip as its state, and writes out = o·mLSTM + (1 − o)·SWA converted to T.
// Bifocal's decode is therefore swa's one attention launch plus ONE launch; the separate store,
// the gate product kernel and the fp32 → T conversion of the old path are gone. And the two run
// side by side: the attention lets the mLSTM step launch once its own inputs are complete
// (dependent_launch.h, "triggered after the wait"), and the step waits for the attention only to
// read the window's output for the mix (measured on the H200 before: the step alone 11.8 µs a
// layer in place, after the attention's 6.4; bench --ablate mlstm_decode).
//
// Why not the mLSTM step first, the window attention mixing in its merge (stop 28, measured and
// reverted: docs/notes/cuda-stop28-2026-12-03.md): the step is the longer of the two branches —
// the attention is done before the step waits for it — so that order put the attention's merge
// behind the whole step: Bifocal −2.1% at 1K on Qwen3-4B.
//
// Why not one fused kernel (the previous design: one cluster of 8 blocks per KV head walking its
// window, then its state, then merging through distributed shared memory): the bytes are few —
// the window 8 KV heads × 448 slots × 128 × 2 × 2 B = 1.8 MiB, the state 1 MiB read and written,
// < 1 µs at 4.3 TB/s — but that kernel ran its phases one after another on 64 multiprocessors,
// each phase paying its own dependent memory round trips, and measured ~19 µs per layer on the
// H200 (4 % of bandwidth). Split, the window streams on as many blocks as swa's attention, and the
// mLSTM step pays one round trip (~2 µs expected, DESIGN.md "Measuring": a Qwen3-4B layer's
// Bifocal decode should then cost swa's + ~2 µs).
//
// The prefill's mix has no kernel of its own: the window attention writes (1 − o)·SWA and the
// mLSTM outputs kernel adds o·mLSTM onto it (recurrent_chunkwise.cuh's MlstmOutputMix).
#include "backend/cuda/bifocal_decode.cuh"

#include <cstdint>
#include <string>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {
namespace {

// The workspace: the attention's partials, then (256-byte aligned) the window output [Hq, d].
struct BifocalWorkspace {
  std::size_t attention_bytes, window_offset, total_bytes;
  BifocalWorkspace(const cpu::MlstmShape& shape, int window)
      : attention_bytes(attention_decode_workspace_bytes(window, shape.query_heads, shape.kv_heads, shape.head_dim)),
        window_offset((attention_bytes + 255) / 256 * 256),
        total_bytes(window_offset + std::size_t(shape.query_heads) * shape.head_dim * sizeof(float)) {}
};

}  // namespace

std::size_t bifocal_decode_workspace_bytes(const cpu::MlstmShape& shape, int window) {
  return BifocalWorkspace(shape, window).total_bytes;
}

template <typename T>
void bifocal_decode(const BifocalDecodeArgs<T>& args, cudaStream_t stream) {
  const cpu::MlstmShape& shape = args.shape;
  cpu::mlstm_check_shape(shape);
  if (args.window <= 0 || args.sink_tokens < 0 || args.sink_tokens >= args.window)
    fail("bifocal_decode", "window " + std::to_string(args.window) + " with " + std::to_string(args.sink_tokens) +
                               " sink tokens");
  if (args.workspace == nullptr) fail("bifocal_decode", "a workspace of bifocal_decode_workspace_bytes is required");
  const BifocalWorkspace workspace(shape, args.window);
  float* window_out = reinterpret_cast<float*>(static_cast<std::byte*>(args.workspace) + workspace.window_offset);

  const DecodeAttentionArgs<T> attention{.query = args.q, .query_position = args.position, .keys = args.keys,
                                         .values = args.values, .slot_positions = args.slot_positions,
                                         .slots = args.window, .query_heads = shape.query_heads,
                                         .kv_heads = shape.kv_heads, .head_dim = shape.head_dim, .window = args.window,
                                         .sink_tokens = args.sink_tokens, .learned_sinks = args.learned_sinks,
                                         .new_key = args.k, .new_value = args.v,
                                         .rope_inv_freq = args.rope_inv_freq, .q_norm = args.q_norm,
                                         .k_norm = args.k_norm, .norm_eps = args.norm_eps,
                                         .rope_rotation = args.rope_rotation, .launch_next_after_wait = true};
  attention_decode<T, float>(attention, args.workspace, window_out, stream);

  const MlstmDecodeArgs<T> memory{.shape = shape, .gates = args.gates, .q = args.q, .k = args.k, .v = args.v,
                                  .state = args.state, .out = args.out,
                                  .mix = {.weight = args.mix_weight, .bias = args.mix_bias, .window_out = window_out},
                                  .rope_inv_freq = args.rope_inv_freq, .q_norm = args.q_norm, .k_norm = args.k_norm,
                                  .norm_eps = args.norm_eps, .position = args.position,
                                  .rope_rotation = args.rope_rotation};
  mlstm_decode(memory, stream);
}

template void bifocal_decode<__nv_bfloat16>(const BifocalDecodeArgs<__nv_bfloat16>&, cudaStream_t);
template void bifocal_decode<float>(const BifocalDecodeArgs<float>&, cudaStream_t);
template void bifocal_decode<__half>(const BifocalDecodeArgs<__half>&, cudaStream_t);

}  // namespace bifocal::cuda
