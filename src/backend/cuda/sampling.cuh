// Picking the next token on the device, so that decode copies one int32 to the host instead of
// the vocab-sized logits. Same semantics as the CPU Sampler (src/runtime/sampler.cpp): greedy is
// torch.argmax (the first index of the largest logit); otherwise temperature, then top-k, then
// top-p (the smallest prefix of the sorted distribution whose probability reaches p, at least one
// token), then one draw. The draws come from a counter-based RNG (Philox4x32-10) keyed by
// (params.seed, *step), not from the CPU Sampler's mt19937: the same distribution, other numbers.
//
// Conventions: raw device pointers, the caller's stream and workspace, no allocation, no
// synchronisation (decode is captured into a CUDA graph). `logits` is fp32 [vocab], 16-byte
// aligned (it is read as float4). A NaN or +inf logit (an overflow, or NaN weights) makes
// *out_token kNonFiniteLogitsToken on every path, as the CPU Sampler fails on one
// (kNonFiniteLogitsCause): the caller, which reads the id anyway, turns it into that error.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bifocal/sampler.h"

namespace bifocal::cuda {

// Top-k and top-p work on at most this many candidates, the largest logits. top_k > 4096 is cut
// to 4096, and so is top-p with top_k = 0: the nucleus is then searched among the 4096 most
// likely tokens only (the mass beyond them is dropped). A model's nucleus at p ≤ 0.95 is almost
// always far smaller. With top_p = 1 and no top-k limit, sampling covers the whole vocabulary
// exactly (Gumbel-max, no cap).
inline constexpr int kMaxSamplingCandidates = 4096;

// The id written for logits that hold a NaN or +inf: outside every vocabulary.
inline constexpr std::int32_t kNonFiniteLogitsToken = -1;

// Scratch bytes argmax_logits needs for `vocab` logits (8 bytes per 2048 logits).
std::size_t argmax_workspace_bytes(int vocab);

// *out_token = the first index of the largest of logits[0, vocab) (bifocal::argmax's rule).
// out_token: device int32. workspace: device, ≥ argmax_workspace_bytes(vocab) bytes.
// Two kernels: per-block maxima over 2048-logit chunks, then one block over those.
void argmax_logits(const float* logits, int vocab, void* workspace, std::int32_t* out_token, cudaStream_t stream);

// Scratch bytes sample_logits needs for `vocab` logits, whatever the params
// (≈ 32 KiB per 16384 logits: 320 KiB for Qwen3's 151,936).
std::size_t sampling_workspace_bytes(int vocab);

// *out_token = a token drawn as the CPU Sampler with `params` draws (see the top of this file).
// params is validated as the Sampler validates it (bifocal::Error naming the flag).
// step: device uint64 counter, read by the kernels and advanced by one on the device on every
// call (greedy ones included), so a replayed CUDA graph draws fresh numbers and a run is
// reproducible from (seed, initial *step). workspace: device, ≥ sampling_workspace_bytes(vocab).
// Paths, chosen on the host from params (fixed for a generation, so a graph captures one path):
//   temperature ≤ 0 or top_k = 1       → argmax_logits (2 kernels);
//   no top-k limit and top_p = 1       → Gumbel-max over all logits (2 kernels, exact);
//   otherwise                          → top-k candidates per 16384-logit slice, then one block
//                                        merges them, sorts, applies top-p and draws (2 kernels).
void sample_logits(const float* logits, int vocab, const SamplingParams& params, std::uint64_t* step,
                   void* workspace, std::int32_t* out_token, cudaStream_t stream);

}  // namespace bifocal::cuda
