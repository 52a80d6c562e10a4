#include "backend/cuda/device_weights.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/session_kernels.cuh"
#include "model/weights.h"

namespace bifocal::cuda {

template <typename T>
DeviceBuffer<T> upload_as(const std::vector<float>& host) {
  if (host.empty()) return {};
  if constexpr (std::is_same_v<T, float>) {
    return DeviceBuffer<float>(std::span<const float>(host));
  } else {
    std::vector<T> converted(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) converted[i] = T(host[i]);  // round to nearest even
    return DeviceBuffer<T>(std::span<const T>(converted));
  }
}

template <typename T>
std::size_t DeviceWeights<T>::bytes() const {
  std::size_t total = embed_tokens.bytes() + final_norm.bytes() + lm_head.bytes();
  for (const auto& l : layers)
    for (const DeviceBuffer<T>* b : {&l.input_norm, &l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.q_bias, &l.k_bias,
                                     &l.v_bias, &l.q_norm, &l.k_norm, &l.post_attention_norm, &l.gate_proj,
                                     &l.up_proj, &l.down_proj})
      total += b->bytes();
  return total;
}

template <typename T>
DeviceWeights<T> DeviceWeights<T>::upload(const ModelConfig& config, const ModelWeights& host) {
  DeviceWeights w;
  w.embed_tokens = upload_as<T>(host.embed_tokens);
  w.final_norm = upload_as<T>(host.final_norm);
  w.lm_head = upload_as<T>(host.lm_head);
  for (int i = 0; i < config.num_layers; ++i) {
    const LayerWeights& h = host.layers[i];
    DeviceLayerWeights<T> l;
    l.input_norm = upload_as<T>(h.input_norm);
    l.q_proj = upload_as<T>(h.q_proj);
    l.k_proj = upload_as<T>(h.k_proj);
    l.v_proj = upload_as<T>(h.v_proj);
    l.o_proj = upload_as<T>(h.o_proj);
    l.q_bias = upload_as<T>(h.q_bias);
    l.k_bias = upload_as<T>(h.k_bias);
    l.v_bias = upload_as<T>(h.v_bias);
    l.q_norm = upload_as<T>(h.q_norm);
    l.k_norm = upload_as<T>(h.k_norm);
    l.post_attention_norm = upload_as<T>(h.post_attention_norm);
    l.gate_proj = upload_as<T>(h.gate_proj);
    l.up_proj = upload_as<T>(h.up_proj);
    l.down_proj = upload_as<T>(h.down_proj);
    w.layers.push_back(std::move(l));
  }
  return w;
}

template <typename T>
DeviceWeights<T> DeviceWeights<T>::synthetic(const ModelConfig& c, std::uint64_t seed, cudaStream_t stream) {
  const std::int64_t hidden = c.hidden_size, q_width = std::int64_t(c.num_query_heads) * c.head_dim,
                     kv_width = std::int64_t(c.num_kv_heads) * c.head_dim, inter = c.intermediate_size;
  constexpr float kMatrixScale = 0.0346f;  // uniform ±a has std a/√3 = 0.02
  std::uint64_t stream_id = seed * 1000003ull;
  auto matrix = [&](std::int64_t rows, std::int64_t cols) {
    DeviceBuffer<T> b{std::size_t(rows * cols)};
    fill_uniform(b.data(), rows * cols, ++stream_id, kMatrixScale, stream);
    return b;
  };
  auto ones = [&](std::int64_t count) {
    DeviceBuffer<T> b{std::size_t(count)};
    fill_constant(b.data(), count, T(1.0f), stream);
    return b;
  };
  DeviceWeights w;
  w.embed_tokens = matrix(c.vocab_size, hidden);
  w.final_norm = ones(hidden);
  if (!c.tie_word_embeddings) w.lm_head = matrix(c.vocab_size, hidden);
  for (int i = 0; i < c.num_layers; ++i) {
    DeviceLayerWeights<T> l;
    l.input_norm = ones(hidden);
    l.q_proj = matrix(q_width, hidden);
    l.k_proj = matrix(kv_width, hidden);
    l.v_proj = matrix(kv_width, hidden);
    l.o_proj = matrix(hidden, q_width);
    if (c.qk_norm) {
      l.q_norm = ones(c.head_dim);
      l.k_norm = ones(c.head_dim);
    }
    l.post_attention_norm = ones(hidden);
    l.gate_proj = matrix(inter, hidden);
    l.up_proj = matrix(inter, hidden);
    l.down_proj = matrix(hidden, inter);
    w.layers.push_back(std::move(l));
  }
  check(cudaStreamSynchronize(stream), "synthetic weights");
  return w;
}

template struct DeviceWeights<__nv_bfloat16>;
template struct DeviceWeights<float>;
template DeviceBuffer<__nv_bfloat16> upload_as<__nv_bfloat16>(const std::vector<float>&);
template DeviceBuffer<float> upload_as<float>(const std::vector<float>&);
template struct DeviceWeights<__half>;
template DeviceBuffer<__half> upload_as<__half>(const std::vector<float>&);

}  // namespace bifocal::cuda
