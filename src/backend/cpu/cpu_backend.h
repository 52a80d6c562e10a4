// The CPU reference backend: OpenBLAS for matrix products, the thread pool for the rest.
#pragma once

#include "backend/backend.h"

namespace bifocal {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  void matmul(const float* x, const float* w, const float* bias, int n, int k, int m, float* out) override;
  void rmsnorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) override;
  void rope(float* x, int n, int heads, int head_dim, const std::int64_t* positions, const float* inv_freq) override;
  void attention(const AttentionArgs& args) override;
  void swiglu(const float* gate, const float* up, std::int64_t count, float* out) override;
  void add(float* x, const float* y, std::int64_t count) override;
  void embedding(const float* table, const std::int32_t* ids, int n, int dim, float* out) override;
};

}  // namespace bifocal
