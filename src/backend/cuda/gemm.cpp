// cuBLAS prefill products (gemm.h). cuBLAS is column-major; a row-major matrix is the column-major
// view of its transpose, so the row-major product out[n, m] = x[n, k] · W[m, k]ᵀ is, in cuBLAS's
// terms, outᵀ (m × n, ld m) = Wᵀ-viewed-as-(k × m, ld k) transposed · xᵀ (k × n, ld k):
//   C = op(A) · B  with  A = W (op = transpose), B = x (no transpose), C = out.
#include "backend/cuda/gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_kernels.cuh"

namespace bifocal::cuda {
namespace {

template <typename T>
constexpr cudaDataType_t cuda_data_type();
template <>
constexpr cudaDataType_t cuda_data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType_t cuda_data_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <>
constexpr cudaDataType_t cuda_data_type<__half>() { return CUDA_R_16F; }

}  // namespace

CublasHandle::CublasHandle() { check(cublasCreate(&handle_), "cublasCreate"); }

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

template <typename T>
void gemm(const CublasHandle& handle, cudaStream_t stream, const T* x, const T* weight, const T* bias, int n, int k,
          int m, float* out, bool accumulate) {
  if (n <= 0 || m <= 0) return;
  check(cublasSetStream(handle.get(), stream), "cublasSetStream");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;  // host scalars (default pointer mode)
  check(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weight, cuda_data_type<T>(), k, x,
                     cuda_data_type<T>(), k, &beta, out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  // out = out + x·Wᵀ, then + bias: the same value as the CPU backend's (x·Wᵀ + bias) added to the
  // residual, up to float rounding.
  if (bias != nullptr) add_bias(out, bias, n, m, stream);
}

template void gemm(const CublasHandle&, cudaStream_t, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                   int, int, int, float*, bool);
template void gemm(const CublasHandle&, cudaStream_t, const float*, const float*, const float*, int, int, int, float*,
                   bool);
template void gemm(const CublasHandle&, cudaStream_t, const __half*, const __half*, const __half*, int, int, int,
                   float*, bool);

}  // namespace bifocal::cuda
