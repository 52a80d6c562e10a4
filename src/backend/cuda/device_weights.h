// The transformer's parameters on the device in the storage type T (__nv_bfloat16, __half, or
// float for --dtype fp32), uploaded from the checkpoint (widened to fp32 on the host by ModelWeights) or
// filled with synthetic random values for `bifocal bench --shape`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "bifocal/model_config.h"

namespace bifocal {
struct ModelWeights;
}

namespace bifocal::cuda {

template <typename T>
struct DeviceLayerWeights {
  DeviceBuffer<T> input_norm;                      // [hidden]
  // torch Linear layout [out, in]. In a CudaModel k_proj (and k_bias, if any) may carry the layer
  // mixer's gate rows after the key rows (CudaModel::append_gate_rows_to_keys).
  DeviceBuffer<T> q_proj, k_proj, v_proj, o_proj;
  DeviceBuffer<T> q_bias, k_bias, v_bias;          // Qwen2 only (empty otherwise)
  DeviceBuffer<T> q_norm, k_norm;                  // Qwen3 only, [d]
  DeviceBuffer<T> post_attention_norm;             // [hidden]
  DeviceBuffer<T> gate_proj, up_proj, down_proj;
};

template <typename T>
struct DeviceWeights {
  DeviceBuffer<T> embed_tokens;  // [vocab, hidden]
  std::vector<DeviceLayerWeights<T>> layers;
  DeviceBuffer<T> final_norm;    // [hidden]
  DeviceBuffer<T> lm_head;       // [vocab, hidden]; empty when tied to embed_tokens

  const T* output_projection() const { return lm_head.size() ? lm_head.data() : embed_tokens.data(); }
  std::size_t bytes() const;

  static DeviceWeights upload(const ModelConfig& config, const ModelWeights& host);
  // Uniform random matrices with the scale of a trained model's (±0.02·√3, so std 0.02) and unit
  // norm weights: the timings of the real thing without a checkpoint.
  static DeviceWeights synthetic(const ModelConfig& config, std::uint64_t seed, cudaStream_t stream);
};

// A host fp32 array in the device storage type (a 4B model's conversion takes seconds; done once).
template <typename T>
DeviceBuffer<T> upload_as(const std::vector<float>& host);

}  // namespace bifocal::cuda
