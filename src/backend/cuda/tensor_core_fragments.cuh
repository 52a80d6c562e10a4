// The 16-bit tensor-core operations the prefill kernels share (attention_prefill_tensor_core.cu,
// mlstm_prefill_bf16.cu): ldmatrix fragments out of shared memory and the m16n8k16 mma with fp32
// accumulation. attention_decode.cu keeps its own (volatile mma, its tuned schedule). Device code,
// so only .cu files include it.
#pragma once

#ifndef __CUDACC__
#error "tensor_core_fragments.cuh holds device code: include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace bifocal::cuda::device {

// Four 8 × 8 matrices of 16-bit elements from shared memory (`address` a shared-window address);
// lane t names row t % 8 of matrix t / 8, and register i receives matrix i's fragment: row
// lane / 4, columns 2·(lane % 4) and +1 (.trans: rows 2·(lane % 4) and +1 of column lane / 4).
__device__ __forceinline__ void load_matrices(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void load_matrices_transposed(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// c (16 × 8 fp32) += a (16 × 16 T, row-major) · b (16 × 8 T, column-major), T __nv_bfloat16 or
// __half. Fragments, with g = lane / 4 and c = lane % 4: a[0] = A[g][2c, 2c+1], a[1] =
// A[g+8][2c, 2c+1], a[2] = A[g][2c+8, +9], a[3] = A[g+8][2c+8, +9]; b0 = B[2c, 2c+1][g], b1 =
// B[2c+8, +9][g]; c = C[g][2c, 2c+1], C[g+8][2c, 2c+1].
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "a 16-bit float type");
  if constexpr (std::is_same_v<T, __half>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace bifocal::cuda::device
