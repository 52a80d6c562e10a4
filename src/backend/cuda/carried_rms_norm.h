// The layer's RMSNorm carried across a product boundary in decode (one token), so that it needs
// no launch of its own: what the writer of the residual prepares, and what the products that read
// rmsnorm(residual) take instead of the normalised vector.
//
// rmsnorm(x) needs Σx² over all of x, which no warp of the product that writes x has, and
// recomputing it in every block of the product that reads it costs more than the norm's own launch
// (three variants, docs/notes/cuda-decode-2026-12-01.md; every warp reading the fp32 x and g,
// docs/notes/cuda-stop22-2026-12-02.md). So the writer of the residual — the embedding
// (dense_kernels.cuh), and o_proj and down_proj, which accumulate into it (gemv.cuh's
// gemv_accumulate_for_norm) — also writes, for the norm read next,
//   scaled[j] = g_j · x_j (in T)   and   group_squares[b] = Σ x_j² over j in 8b … 8b + 7,
// and the products that read the norm (q+k+v, gate/up, the LM head) compute
//   out[j] = (Σ_c W[j, c] · scaled[c]) / rms(x),   rms(x) = sqrt(Σ_b group_squares[b] / k + eps),
// which is W · rmsnorm(x) (DESIGN.md "RMSNorm") with one rounding of each input element, as the
// norm kernel's 16-bit h had. A reader reads what it read before plus k/8 floats.
#pragma once

namespace bifocal::cuda {

inline constexpr int kRmsNormGroup = 8;  // elements per group_squares entry: a gemv block's rows

inline constexpr int rms_norm_groups(int k) { return (k + kRmsNormGroup - 1) / kRmsNormGroup; }

template <typename T>
struct NextRmsNorm {  // the writer's side; all null: nothing written
  const T* norm_weight = nullptr;  // g [k] of the norm that reads the residual next
  T* scaled = nullptr;             // [k]
  float* group_squares = nullptr;  // [rms_norm_groups(k)]
};

template <typename T>
struct RmsNormedInput {  // the reader's side
  const T* scaled;
  const float* group_squares;
  float eps;
  // Optional: rmsnorm(x) itself into normalized_out (the RMSNorm kernel's values, from the residual
  // and g), for the consumers of the normalised vector (the mLSTM step's gate projections).
  const float* residual = nullptr;
  const T* norm_weight = nullptr;
  T* normalized_out = nullptr;
};

}  // namespace bifocal::cuda
