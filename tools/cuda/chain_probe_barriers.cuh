// The shared-memory ring's primitives for the decode-chain probes (chain_probe_ring.cuh,
// shared_stream_probe.cu, ring_chain_probe.cu): mbarrier wrappers, the bulk copy (TMA) and the
// 16-byte cp.async that complete on one, and %globaltimer (also the stamps of
// dependency_release_probe.cu and fused_attention_probe.cu). Device code for the probes only.
#pragma once

#include <cstdint>

namespace chain_probe {

__device__ __forceinline__ std::uint32_t shared_address_of(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// A barrier whose phase completes after `count` arrivals (and, with expect_tx, the bytes announced).
__device__ __forceinline__ void barrier_init(std::uint64_t* barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address_of(barrier)), "r"(count) : "memory");
}

__device__ __forceinline__ void barrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address_of(barrier)) : "memory");
}

// One arrival that also announces `bytes` the copies completing on the barrier will bring.
__device__ __forceinline__ void barrier_expect_bytes(std::uint64_t* barrier, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address_of(barrier)),
               "r"(bytes)
               : "memory");
}

// Waits until the phase with this parity of the barrier has completed (a fresh barrier counts the
// phase before its first as completed with parity 1: a producer's first wait for a free stage passes).
__device__ __forceinline__ void barrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(shared_address_of(barrier)),
      "r"(parity)
      : "memory");
}

// `bytes` (a multiple of 16) global → shared by the copy engine, completing on `barrier`.
__device__ __forceinline__ void bulk_copy_to_shared(void* destination, const void* source, std::uint32_t bytes,
                                                    std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address_of(destination)),
      "l"(source), "r"(bytes), "r"(shared_address_of(barrier))
      : "memory");
}

__device__ __forceinline__ void cp_async_16(void* destination, const void* source) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address_of(destination)), "l"(source)
               : "memory");
}

// An arrival on `barrier` once this thread's earlier cp.async copies have landed (counted in the
// barrier's initial count: .noinc).
__device__ __forceinline__ void cp_async_arrive(std::uint64_t* barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(shared_address_of(barrier)) : "memory");
}

// Nanoseconds of the global timer (it advances in steps of ~0.26 µs on the H200).
__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace chain_probe
