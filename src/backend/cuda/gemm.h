// Matrix products for prefill (n > 1 tokens) through cuBLAS: out = x · Wᵀ (+ bias) (+ out), with
// W in torch's Linear layout. At n tokens each weight is reused n times, so these are compute-
// bound for n in the hundreds and cuBLAS's tensor-core kernels are the right tool; decode (n = 1)
// uses gemv.cuh instead.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace bifocal::cuda {

// One cuBLAS handle (RAII over cublasCreate/cublasDestroy). Create it once per device and
// thread, outside any timed or captured region: creation allocates.
class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// out[n, m] = x[n, k] · weight[m, k]ᵀ + bias[m] (bias may be null); with accumulate,
// out += that instead (the residual add of o_proj and down_proj). x, weight and bias are in the
// storage type T (__nv_bfloat16, __half or float; dense_kernels.cuh's convert() makes x from float
// activations); out is float. Products run with fp32 accumulation (CUBLAS_COMPUTE_32F): tensor
// cores for bf16, plain fp32 for float (no TF32). Runs on `stream` (the handle is bound to it for
// the call); row-major throughout. The bias is a separate small kernel after the product.
template <typename T>
void gemm(const CublasHandle& handle, cudaStream_t stream, const T* x, const T* weight, const T* bias, int n, int k,
          int m, float* out, bool accumulate);

}  // namespace bifocal::cuda
