// The CUDA DeviceModel (src/model/device_model.h): the transformer's weights and mixers on the
// GPU, sessions with every buffer allocated once, prefill through cuBLAS and the flash-style
// kernels, and decode as one captured CUDA graph per session whose only copy to the host is
// the sampled token id (issue: "decode as one CUDA graph … nothing allocated or copied to the
// host per token except the sampled id").
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_mixer.h"
#include "backend/cuda/device_weights.h"
#include "backend/cuda/gemm.h"
#include "model/device_model.h"

namespace bifocal::cuda {

template <typename T>
class CudaSession final : public DeviceSession {
 public:
  CudaSession() = default;
  ~CudaSession() override;
  std::size_t state_bytes() const override;
  std::size_t layer_state_bytes(int layer) const override { return layers.at(layer).state_bytes(); }
  std::size_t workspace_bytes() const override;

  std::vector<DeviceMixerState<T>> layers;
  DeviceMixerScratch<T> mixer_scratch;   // one for all layers (they run in turn); layers[i].shared
  std::int64_t capacity = 0;
  int chunk = 0;
  // Scratch of the forward pass for up to `chunk` tokens (the layer's math, in order).
  DeviceBuffer<std::int32_t> tokens;     // [chunk]; tokens[0] is the decode step's input
  DeviceBuffer<std::int64_t> positions;  // [chunk]; positions[0] is the decode step's position
  DeviceBuffer<float> residual;          // [chunk, hidden] the residual stream x
  DeviceBuffer<T> normed;                // [chunk, hidden] h = rmsnorm(x), the products' input
  DeviceBuffer<T> scaled;                // [hidden] g ⊙ x for one token's next RMSNorm (carried_rms_norm.h)
  DeviceBuffer<float> group_squares;     // [hidden / 8] its sums of x² by groups of 8
  DeviceBuffer<float2> rope_rotation;    // [d/2] the decode step's RoPE (sin, cos), made by its embedding
  DeviceBuffer<float> queries, keys, values;
  // [min(chunk, kMostTokensWithGatesInKeyProduct), kv_width + G] prefill only, where a layer's mixer
  // has G gate rows: the key product's raw output, the gates' pre-activations after each token's
  // keys (CudaModel::run_layers)
  DeviceBuffer<float> key_products;
  DeviceBuffer<T> attention;             // [chunk, Hq·d] the mixer output, o_proj's input
  DeviceBuffer<float> gate, up;          // [chunk, intermediate] (prefill only)
  DeviceBuffer<T> activation;            // [chunk, intermediate] silu(gate)·up, down_proj's input
  DeviceBuffer<float> logits;            // [kLogitRows, vocab]
  DeviceBuffer<std::int32_t> sampled;    // [1]
  DeviceBuffer<std::uint64_t> sample_step;  // [1] the sampler's counter
  DeviceBuffer<std::byte> sampling_workspace;

  // The captured decode step, and what it was captured for.
  cudaGraphExec_t decode_graph = nullptr;
  SamplingParams graph_sampling{};
  // What positions[0] / tokens[0] hold on the device after the last decode step (−1: unknown).
  std::int64_t device_position = -1;
  std::int32_t device_token = -1;
};

template <typename T>
class CudaModel final : public DeviceModel {
 public:
  explicit CudaModel(const DeviceModelSource& source);
  ~CudaModel() override;

  std::unique_ptr<DeviceSession> new_session(std::int64_t capacity, int chunk) const override;
  void forward(DeviceSession& session, std::int64_t position, std::span<const std::int32_t> tokens, float* host_logits,
               bool all_logits) const override;
  std::int32_t decode_and_sample(DeviceSession& session, std::int64_t position, std::int32_t token,
                                 const SamplingParams& sampling) const override;
  std::size_t weight_bytes() const override;
  std::string device_name() const override { return device_name_; }

  void fill_synthetic_context(DeviceSession& session, std::int64_t context, std::uint64_t seed) const override;
  double time_decode_step(DeviceSession& session, std::int64_t position, int steps) const override;
  DecodeAblation time_ablated_decode_step(DeviceSession& session, std::int64_t position, int steps,
                                          const std::string& kernel) const override;
  double time_prefill(DeviceSession& session, std::span<const std::int32_t> tokens) const override;
  void copy_state(const DeviceSession& from, DeviceSession& to) const override;
  double measure_copy_bandwidth() const override;
  std::size_t device_memory_used() const override;

  static constexpr int kLogitRows = 32;  // rows of logits per LM-head product when all are wanted
  // A prefill chunk of up to this many tokens makes its mixers' gate pre-activations in the keys'
  // product (append_gate_rows_to_keys); a longer one gives the gates a product of their own. The
  // 48 more columns (Qwen3-4B Bifocal) cost nothing while the product's tiles fill less than a wave,
  // and save a launch on Bifocal's path (~8 µs of a 1K-token layer); at 4,096 tokens they may add a
  // partial wave (4,096 × 1,024 in 128 × 256 tiles is 128 tiles on 132 SMs, × 1,072 is 160), where
  // the gates' own product costs ~8–10 µs (docs/notes/cuda-stop46-2026-12-04.md, section 1).
  static constexpr int kMostTokensWithGatesInKeyProduct = 2048;

 private:
  // The layers over n tokens already in session.tokens/positions (see the .cpp: reads like the math).
  void run_layers(CudaSession<T>& s, int n, std::int64_t first_position) const;
  // Final norm and LM head of `rows` rows starting at `first_row` into s.logits.
  void output_head(CudaSession<T>& s, int first_row, int rows, bool norm_carried) const;
  void project(const T* x, const T* weight, const T* bias, int n, int k, int m, float* out, bool accumulate) const;
  // Prefill of `tokens` from `position` on, logits of the last token left in s.logits row 0.
  void prefill(CudaSession<T>& s, std::int64_t position, std::span<const std::int32_t> tokens) const;
  // The decode step recorded into a graph the caller destroys; capture_decode_graph instantiates it.
  cudaGraph_t record_decode_graph(CudaSession<T>& s, const SamplingParams& sampling) const;
  void capture_decode_graph(CudaSession<T>& s, const SamplingParams& sampling) const;
  // Uploads the decode step's input token and position unless the device already holds them.
  void upload_step_input(CudaSession<T>& s, std::int64_t position, std::int32_t token) const;
  void check_capacity(const CudaSession<T>& s, std::int64_t position, std::int64_t n) const;
  // Moves layer l's mixer gate rows (if any) after its key projection's rows (see the .cpp).
  void append_gate_rows_to_keys(int layer);

  // First, so that a missing or unsupported GPU is reported before cuBLAS or an allocation fails
  // with a message of its own (members are initialised in this order).
  std::string device_name_;
  ModelConfig config_;
  DeviceWeights<T> weights_;
  std::vector<DeviceMixer<T>> mixers_;
  DeviceBuffer<float> rope_inv_freq_;
  CublasHandle cublas_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace bifocal::cuda
