// The warpgroup product (sm_90a `wgmma.mma_async`) that Bifocal's prefill epilogue takes for
// h = q̂·C_c at d = 256 (attention_prefill_mlstm_outputs.cuh): a block's four warps act as one warpgroup of 64
// rows. A, the rows' q fragments, comes from registers in mma.m16n8k16's A layout (each warp its 16
// rows: the PTX ISA's m64nNk16 A fragments are that layout, warp by warp). B, C_c's rows, comes
// from shared memory and is read once for the 64 rows, where ldmatrix + mma.sync read it once per
// warp's 16 (stop 67's note: at d = 256 a block read 384 KiB of shared memory for its epilogue).
// The accumulators are mma.m16n8k16's C fragments, n-tile by n-tile (h[nt] = columns 8·nt … +7).
// DEVICE CODE: include from .cu files only.
#pragma once

#ifndef __CUDACC__
#error "warpgroup_products.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

namespace bifocal::cuda::device {

// ---- B in shared memory: N-major tiles with the 128-byte swizzle ------------------------------------

// A B tile: kBTileRows rows of k × kBTileColumns columns of n, 16-bit, n contiguous (the wgmma's
// "N-major" B, imm-trans-b = 1), kept as core-matrix groups of 8 rows × 64 columns (1 KiB each,
// rows 128 bytes apart, 16-byte chunk c of row r stored at chunk c ^ r: the 128-byte swizzle, which
// the hardware applies to address bits 4–6 from bits 7–9, so a tile starts 1024-byte aligned).
// Group (n / 64, k / 8) lies at (n / 64 · kBTileRows / 8 + k / 8) KiB: along k the groups are
// 1 KiB apart, and each half of the columns is one 64-row run.
inline constexpr int kBTileRows = 64, kBTileColumns = 128;
inline constexpr int kBTileBytes = kBTileRows * kBTileColumns * 2;
inline constexpr int kBGroupBytes = 1024;  // 8 rows × 128 bytes
inline constexpr int kBHalfBytes = kBTileBytes / 2;

// Element offset of (k, n) in a B tile (kBTileRows × kBTileColumns, 16-bit elements).
__host__ __device__ constexpr int b_tile_offset(int k, int n) {
  return (n / 64 * (kBTileRows / 8) + k / 8) * (kBGroupBytes / 2) + (k % 8) * 64 + (((n % 64) / 8) ^ (k % 8)) * 8 +
         n % 8;
}

// The layout above is the hardware's: element (k, n) at the byte address of the unswizzled N-major
// layout (64-column halves of 8-row groups, rows 128 bytes apart) with address bits 4–6 XORed by
// bits 7–9. Checked here over the whole tile, at compile time.
__host__ __device__ constexpr bool b_tile_is_the_hardware_swizzle() {
  for (int k = 0; k < kBTileRows; ++k)
    for (int n = 0; n < kBTileColumns; ++n) {
      const int plain = n / 64 * kBHalfBytes + k / 8 * kBGroupBytes + k % 8 * 128 + n % 64 * 2;
      if (2 * b_tile_offset(k, n) != (plain ^ (((plain >> 7) & 7) << 4))) return false;
    }
  return true;
}
static_assert(b_tile_is_the_hardware_swizzle());

// The shared-memory descriptor of a 16-row × 64-column slice of a B tile at shared address
// `address` (its first row; 1024-byte aligned, as the tile). PTX names the two offsets by
// K-major's roles ("leading": along k, "stride": along m/n), and a transposed operand swaps them
// (CUTLASS's canonical N-major layouts). With 64 columns, one swizzle width, the n-direction offset
// is never read, so both carry the k-direction one: the descriptor is right under either reading.
__device__ __forceinline__ std::uint64_t b_slice_descriptor(std::uint32_t address) {
  constexpr std::uint64_t kGroup = kBGroupBytes >> 4, kSwizzle128 = 1;
  return std::uint64_t((address & 0x3FFFF) >> 4) | (kGroup << 16) | (kGroup << 32) | (kSwizzle128 << 62);
}

// ---- Issue, commit, wait ------------------------------------------------------------------------------

// Orders this thread's earlier register and shared-memory accesses before the warpgroup products
// issued next (the PTX ISA asks for it before the first, and after any other write of their registers).
__device__ __forceinline__ void warpgroup_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void warpgroup_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void warpgroup_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Shared memory written through the generic proxy (st.shared, cp.async) made visible to the async
// proxy the warpgroup products read it through: each writer, once its copies landed, before the
// barrier after which the products are issued.
__device__ __forceinline__ void fence_shared_for_warpgroup() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Ties accumulators to this point of the instruction stream: after warpgroup_wait, so that no use
// of them is moved before the wait (the products' asm told the compiler they were written already).
template <int kTiles>
__device__ __forceinline__ void pin_accumulators(float (&c)[kTiles][4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(c[t][e])::"memory");
}

// c (64 × 64 fp32, the warpgroup's; this thread's 8 n-tiles) += a (64 × 16 bf16, registers) · b (16 × 64
// bf16, the B tile slice b_slice_descriptor names). Issued, not awaited. bf16 only: the one caller is
// Bifocal's bf16 epilogue.
template <typename T>
__device__ __forceinline__ void warpgroup_mma_m64n64k16(float (&c)[8][4], const std::uint32_t (&a)[4],
                                                        std::uint64_t b) {
  static_assert(std::is_same_v<T, __nv_bfloat16>, "bf16 operands");
  // scale-d = 1 (accumulate), imm-scale-a = imm-scale-b = 1, imm-trans-b = 1 (B N-major).
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, accumulate, 1, 1, 1;\n"
      "}\n"
      : "+f"(c[0][0]), "+f"(c[0][1]), "+f"(c[0][2]), "+f"(c[0][3]), "+f"(c[1][0]), "+f"(c[1][1]), "+f"(c[1][2]),
        "+f"(c[1][3]), "+f"(c[2][0]), "+f"(c[2][1]), "+f"(c[2][2]), "+f"(c[2][3]), "+f"(c[3][0]), "+f"(c[3][1]),
        "+f"(c[3][2]), "+f"(c[3][3]), "+f"(c[4][0]), "+f"(c[4][1]), "+f"(c[4][2]), "+f"(c[4][3]), "+f"(c[5][0]),
        "+f"(c[5][1]), "+f"(c[5][2]), "+f"(c[5][3]), "+f"(c[6][0]), "+f"(c[6][1]), "+f"(c[6][2]), "+f"(c[6][3]),
        "+f"(c[7][0]), "+f"(c[7][1]), "+f"(c[7][2]), "+f"(c[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}

}  // namespace bifocal::cuda::device
