// Every CUDA runtime and cuBLAS call is checked: a failure becomes a bifocal::Error that names
// the call site and the runtime's own message, never a silent wrong result.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "bifocal/error.h"

namespace bifocal::cuda {

inline void check(cudaError_t status, const char* where) {
  if (status != cudaSuccess) fail(where, std::string("CUDA error: ") + cudaGetErrorString(status));
}

inline void check(cublasStatus_t status, const char* where) {
  if (status != CUBLAS_STATUS_SUCCESS) fail(where, std::string("cuBLAS error: ") + cublasGetStatusString(status));
}

// After a kernel launch: a bad launch configuration shows up here, not three kernels later.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace bifocal::cuda
