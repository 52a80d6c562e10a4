// The device pieces both sampling files use (sampling_argmax.cu: greedy and Gumbel-max;
// sampling.cu: top-k / top-p and the dispatch): the candidate order, the counter-based random
// numbers, and the argmax launch the dispatch calls. Contract: sampling.cuh.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "backend/cuda/sampling.cuh"

namespace bifocal::cuda::sampling_detail {

// A token and its logit: argmax partial results and top-k candidates alike.
struct Candidate {
  float logit;
  int token;
};

// The order of the CPU Sampler's sort (and of torch.argmax): larger logit first, then smaller
// index. A strict total order on finite/-inf logits, so reductions may combine in any order.
__device__ __forceinline__ bool is_better(Candidate a, Candidate b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}
__device__ __forceinline__ Candidate better(Candidate a, Candidate b) { return is_better(a, b) ? a : b; }

// Loses to every real token, a -inf logit included (its index is smaller).
__device__ __forceinline__ Candidate no_candidate() { return {-INFINITY, INT_MAX}; }

// A NaN or +inf logit (sampling.cuh: the sampler's answer is then kNonFiniteLogitsToken).
__device__ __forceinline__ bool is_non_finite_logit(float logit) { return !(logit < INFINITY); }

// Beats every candidate (no real logit reaches +inf in the order once +inf logits are this), so a
// reduction that meets one ends with it: the argmax paths' answer for non-finite logits.
__device__ __forceinline__ Candidate non_finite_marker() { return {INFINITY, kNonFiniteLogitsToken}; }

// ---------------------------------------------------------------------------------------------
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
// constants of Random123 and curand): 4 random uint32 per (counter, key). Counter-based, so a
// thread needs no state: the key is the seed, the counter says which numbers (step, purpose, lane).
// ---------------------------------------------------------------------------------------------
__host__ __device__ __forceinline__ uint4 philox4x32_10(uint4 counter, uint2 key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the Weyl key schedule
      key.x += 0x9E3779B9u;
      key.y += 0xBB67AE85u;
    }
    const std::uint64_t product0 = std::uint64_t(0xD2511F53u) * counter.x;
    const std::uint64_t product1 = std::uint64_t(0xCD9E8D57u) * counter.z;
    counter = make_uint4(std::uint32_t(product1 >> 32) ^ counter.y ^ key.x, std::uint32_t(product1),
                         std::uint32_t(product0 >> 32) ^ counter.w ^ key.y, std::uint32_t(product0));
  }
  return counter;
}

// What a Philox call's numbers are for; part of the counter, so the purposes never share numbers.
enum RandomPurpose : std::uint32_t { kGumbelNoise = 0, kCandidateDraw = 1 };

__device__ __forceinline__ uint4 random_bits(std::uint64_t seed, std::uint64_t step, RandomPurpose purpose,
                                             std::uint32_t lane) {
  const uint4 counter = make_uint4(lane, purpose, std::uint32_t(step), std::uint32_t(step >> 32));
  return philox4x32_10(counter, make_uint2(std::uint32_t(seed), std::uint32_t(seed >> 32)));
}

// Uniform in [0, 1) with 24 bits: every value is an exact float.
__device__ __forceinline__ float uniform_from_bits(std::uint32_t bits) { return float(bits >> 8) * 0x1p-24f; }

// Gumbel(0, 1) noise −log(−log u) with u = (m + ½)·2⁻²³ ∈ [2⁻²⁴, 1 − 2⁻²⁴]: never 0 or 1, so the
// noise is finite (it lies in [−2.8, 16.6]; the cut tails hold 6e-8 of the mass each).
__device__ __forceinline__ float gumbel_from_bits(std::uint32_t bits) {
  const float u = float(bits >> 9) * 0x1p-23f + 0x1p-24f;
  return -logf(-logf(u));
}

// The Gumbel-max variant's inputs; step is read on the device (a graph freezes arguments).
struct GumbelNoise {
  float temperature;
  std::uint64_t seed;
  const std::uint64_t* step;
};

// argmax (with Gumbel noise: a draw from softmax(logit / T)) over logits[0, vocab) into
// *out_token; step_to_advance (nullable) += 1 on the device. sampling_argmax.cu.
template <bool kWithGumbelNoise>
void launch_argmax(const float* logits, int vocab, GumbelNoise noise, void* workspace, std::int32_t* out_token,
                   std::uint64_t* step_to_advance, cudaStream_t stream);

// The entry points' argument checks (bifocal::Error naming `where`).
void check_logits(const char* where, const float* logits, int vocab);

}  // namespace bifocal::cuda::sampling_detail
