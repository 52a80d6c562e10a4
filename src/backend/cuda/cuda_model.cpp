// The CUDA model: follow one chunk of tokens through run_layers (the same steps as
// Model::forward_chunk in src/model/model.cpp), then the output head, then, for decode, the
// sampler — all on one stream, the decode step captured once per session as a CUDA graph.
// The bench's timing hooks are in cuda_model_bench.cpp.
#include "backend/cuda/cuda_model.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_kernels.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/sampling.cuh"
#include "backend/cuda/session_kernels.cuh"
#include "bifocal/error.h"
#include "model/weights.h"

namespace bifocal::cuda {

// ---- sessions --------------------------------------------------------------------------------

template <typename T>
CudaSession<T>::~CudaSession() {
  if (decode_graph != nullptr) cudaGraphExecDestroy(decode_graph);
}

template <typename T>
std::size_t CudaSession<T>::state_bytes() const {
  std::size_t bytes = 0;
  for (const auto& layer : layers) bytes += layer.state_bytes();
  return bytes;
}

template <typename T>
std::size_t CudaSession<T>::workspace_bytes() const {
  std::size_t bytes = tokens.bytes() + positions.bytes() + residual.bytes() + normed.bytes() + scaled.bytes() +
                      group_squares.bytes() + queries.bytes() + keys.bytes() + values.bytes() + key_products.bytes() +
                      attention.bytes() + gate.bytes() + up.bytes() + activation.bytes() + logits.bytes() +
                      sampled.bytes() + sample_step.bytes() + sampling_workspace.bytes();
  for (const auto& layer : layers) bytes += layer.workspace_bytes();
  return bytes + mixer_scratch.bytes();
}

// ---- the model -------------------------------------------------------------------------------

namespace {

// The name of device 0, once it is known to be there and to run this build's sm_90a code; a clear
// error otherwise (without this check first, cuBLAS's "library was not initialized" is the message).
std::string require_supported_device() {
  int device_count = 0;
  const cudaError_t status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess)
    fail("--backend cuda", std::string("no CUDA device is visible (") + cudaGetErrorString(status) + ")");
  if (device_count == 0) fail("--backend cuda", "no CUDA device is visible");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  const std::string name = properties.name;
  if (properties.major < 9)
    fail("--backend cuda", name + " is compute capability " + std::to_string(properties.major) + "." +
                               std::to_string(properties.minor) + "; this build targets sm_90a (H100/H200)");
  return name;
}

}  // namespace

template <typename T>
CudaModel<T>::CudaModel(const DeviceModelSource& source)
    : device_name_(require_supported_device()), config_(*source.config) {
  const auto& c = config_;
  if (c.head_dim % 8 != 0 || c.head_dim > 256)
    fail("--backend cuda", "head_dim " + std::to_string(c.head_dim) + " is not a multiple of 8 up to 256");
  check(cudaStreamCreate(&stream_), "cudaStreamCreate");
  weights_ = source.weights ? DeviceWeights<T>::upload(c, *source.weights)
                            : DeviceWeights<T>::synthetic(c, source.synthetic_seed, stream_);
  const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
  for (int l = 0; l < c.num_layers; ++l)
    mixers_.emplace_back(source.layer_mixers.at(l), shape, c.hidden_size, source.layer_parameters.at(l));
  for (int l = 0; l < c.num_layers; ++l) append_gate_rows_to_keys(l);
  rope_inv_freq_ = DeviceBuffer<float>(std::span<const float>(source.rope_inv_freq));
}

// A mixer's gate rows (mLSTM, Bifocal) after the key projection's, [kv_width + G, hidden], and
// zeros after a key bias: a prefill makes the keys and the gates' pre-activations in one product
// (run_layers). A separate gates product was one more launch on Bifocal's path, ~8 µs of a 1K-token
// layer (docs/notes/cuda-stop46-2026-12-04.md); a few more columns in the key product cost less.
// Decode reads the first kv_width rows as before, and the mixer its rows in place.
template <typename T>
void CudaModel<T>::append_gate_rows_to_keys(int layer_index) {
  DeviceMixer<T>& mixer = mixers_[layer_index];
  const std::size_t gate_rows = mixer.gate_count();
  if (gate_rows == 0) return;
  DeviceLayerWeights<T>& layer = weights_.layers[layer_index];
  const std::size_t key_elements = layer.k_proj.size(), gate_elements = gate_rows * config_.hidden_size;
  auto appended = [](const DeviceBuffer<T>& head, const T* tail, std::size_t tail_count) {
    DeviceBuffer<T> joined(head.size() + tail_count);
    check(cudaMemcpy(joined.data(), head.data(), head.bytes(), cudaMemcpyDeviceToDevice), "copy the key rows");
    if (tail != nullptr)
      check(cudaMemcpy(joined.data() + head.size(), tail, tail_count * sizeof(T), cudaMemcpyDeviceToDevice),
            "copy the gate rows");
    else
      check(cudaMemset(joined.data() + head.size(), 0, tail_count * sizeof(T)), "zero the gate biases");
    return joined;
  };
  layer.k_proj = appended(layer.k_proj, mixer.gate_weights(), gate_elements);
  if (layer.k_bias.size()) layer.k_bias = appended(layer.k_bias, nullptr, gate_rows);
  mixer.adopt_gate_weights(layer.k_proj.data() + key_elements);
}

template <typename T>
CudaModel<T>::~CudaModel() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

template <typename T>
std::size_t CudaModel<T>::weight_bytes() const {
  return weights_.bytes();
}

template <typename T>
std::unique_ptr<DeviceSession> CudaModel<T>::new_session(std::int64_t capacity, int chunk) const {
  const auto& c = config_;
  auto s = std::make_unique<CudaSession<T>>();
  s->capacity = capacity;
  s->chunk = chunk;
  DeviceMixerScratchSizes scratch;
  for (const auto& mixer : mixers_) {
    s->layers.push_back(mixer.new_state(capacity));
    scratch.grow_to(mixer.scratch_sizes(capacity, chunk));
  }
  s->mixer_scratch = scratch.allocate<T>();
  for (auto& layer : s->layers) layer.shared = &s->mixer_scratch;
  const std::size_t n = chunk, q_width = std::size_t(c.num_query_heads) * c.head_dim,
                    kv_width = std::size_t(c.num_kv_heads) * c.head_dim;
  s->tokens = DeviceBuffer<std::int32_t>(n);
  s->positions = DeviceBuffer<std::int64_t>(n);
  s->residual = DeviceBuffer<float>(n * c.hidden_size);
  s->normed = DeviceBuffer<T>(n * c.hidden_size);
  s->scaled = DeviceBuffer<T>(c.hidden_size);
  s->group_squares = DeviceBuffer<float>(rms_norm_groups(c.hidden_size));
  s->rope_rotation = DeviceBuffer<float2>(std::size_t(c.head_dim / 2));
  s->queries = DeviceBuffer<float>(n * q_width);
  s->keys = DeviceBuffer<float>(n * kv_width);
  s->values = DeviceBuffer<float>(n * kv_width);
  s->attention = DeviceBuffer<T>(n * q_width);
  int most_gate_rows = 0;
  for (const auto& mixer : mixers_) most_gate_rows = std::max(most_gate_rows, mixer.gate_count());
  if (chunk > 1 && most_gate_rows > 0)
    s->key_products = DeviceBuffer<float>(std::min<std::size_t>(n, kMostTokensWithGatesInKeyProduct) *
                                          (kv_width + most_gate_rows));
  if (chunk > 1) {
    s->gate = DeviceBuffer<float>(n * c.intermediate_size);
    s->up = DeviceBuffer<float>(n * c.intermediate_size);
  }
  s->activation = DeviceBuffer<T>(n * c.intermediate_size);
  s->logits = DeviceBuffer<float>(std::size_t(kLogitRows) * c.vocab_size);
  s->sampled = DeviceBuffer<std::int32_t>(1);
  s->sample_step = DeviceBuffer<std::uint64_t>(1);
  s->sample_step.fill_bytes(0);
  s->sampling_workspace =
      DeviceBuffer<std::byte>(std::max(sampling_workspace_bytes(c.vocab_size), argmax_workspace_bytes(c.vocab_size)));
  return s;
}

template <typename T>
void CudaModel<T>::check_capacity(const CudaSession<T>& s, std::int64_t position, std::int64_t n) const {
  for (const auto& mixer : mixers_)
    if (mixer.spec().kind == MixerSpec::Kind::Full && position + n > s.capacity)
      fail("session", "full attention's cache holds " + std::to_string(s.capacity) + " tokens; position " +
                          std::to_string(position + n) + " is past it");
}

// out = x·Wᵀ (+bias) (+out): the bandwidth-bound gemv for one token, cuBLAS for a chunk.
template <typename T>
void CudaModel<T>::project(const T* x, const T* weight, const T* bias, int n, int k, int m, float* out,
                           bool accumulate) const {
  if (n == 1)
    gemv<T, T>(weight, x, bias, m, k, out, accumulate, stream_);
  else
    gemm<T>(cublas_, stream_, x, weight, bias, n, k, m, out, accumulate);
}

// n tokens at session.positions through every layer (model.cpp's forward_chunk):
//   x = embed(tokens)
//   per layer:  h = rmsnorm(x);  q, k, v = h·Wqᵀ(+b), h·Wkᵀ(+b), h·Wvᵀ(+b)
//               [Qwen3] q, k = rmsnorm per head;  q, k = rope(q, k, positions)
//               x += mixer(h, q, k, v; layer state) · Woᵀ
//               h = rmsnorm(x);  x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ) · Wdᵀ
// For one token (decode) every RMSNorm is carried into the products that read h
// (carried_rms_norm.h: W·rmsnorm(x) = (W·(g ⊙ x)) / rms(x)), a launch fewer each.
template <typename T>
void CudaModel<T>::run_layers(CudaSession<T>& s, int n, std::int64_t first_position) const {
  const auto& c = config_;
  const int hidden = c.hidden_size, d = c.head_dim, hq = c.num_query_heads, hkv = c.num_kv_heads;
  const int q_width = hq * d, kv_width = hkv * d, inter = c.intermediate_size;
  const float eps = float(c.rms_norm_eps);
  auto bias = [](const DeviceBuffer<T>& b) { return b.size() ? b.data() : nullptr; };
  float* x = s.residual.data();
  T* h = s.normed.data();

  // One token: the writer of x (embedding, o_proj, down_proj) also leaves the inputs of the norm
  // read next, and its products divide by rms(x) themselves.
  const bool carry_norm = n == 1;
  auto next_norm = [&](const DeviceBuffer<T>& norm_weight) {
    return NextRmsNorm<T>{norm_weight.data(), s.scaled.data(), s.group_squares.data()};
  };
  auto normed_input = [&](const DeviceBuffer<T>& norm_weight, T* normalized_out) {
    return RmsNormedInput<T>{s.scaled.data(), s.group_squares.data(), eps, x, norm_weight.data(), normalized_out};
  };
  // x += input·Wᵀ, and for one token the next norm's inputs.
  auto add_to_residual = [&](const T* input, const DeviceBuffer<T>& weight, int k,
                             const DeviceBuffer<T>& next_norm_weight) {
    if (carry_norm)
      gemv_accumulate_for_norm<T, T>(weight.data(), input, nullptr, hidden, k, x, next_norm(next_norm_weight), stream_);
    else
      project(input, weight.data(), nullptr, n, k, hidden, x, /*accumulate=*/true);
  };

  // One token: the step's RoPE table is made once, here, for every layer's folded q/k norm and RoPE.
  RopeRotationTable rotation;
  if (carry_norm && rope_inv_freq_.size() > 0)
    rotation = {s.positions.data(), rope_inv_freq_.data(), d / 2, s.rope_rotation.data()};
  embedding<T>(weights_.embed_tokens.data(), s.tokens.data(), n, hidden, x, stream_,
               carry_norm ? next_norm(weights_.layers[0].input_norm) : NextRmsNorm<T>{}, rotation);
  for (int l = 0; l < c.num_layers; ++l) {
    const DeviceLayerWeights<T>& layer = weights_.layers[l];
    // A chunk short enough makes the keys and its mixer's gates in one product: the gate rows follow
    // the key rows (append_gate_rows_to_keys, kMostTokensWithGatesInKeyProduct).
    const bool gates_with_keys = n > 1 && n <= kMostTokensWithGatesInKeyProduct && mixers_[l].gate_count() > 0;
    const int key_product_width = kv_width + (gates_with_keys ? mixers_[l].gate_count() : 0);
    const DeviceBuffer<T>& next_layer_norm =
        l + 1 < c.num_layers ? weights_.layers[l + 1].input_norm : weights_.final_norm;

    // Attention block.
    if (carry_norm) {  // one launch for the three products of h, which also writes h (the mixers read it)
      const std::array<GemvProduct<T>, 3> qkv = {
          GemvProduct<T>{layer.q_proj.data(), bias(layer.q_bias), q_width, s.queries.data()},
          GemvProduct<T>{layer.k_proj.data(), bias(layer.k_bias), kv_width, s.keys.data()},
          GemvProduct<T>{layer.v_proj.data(), bias(layer.v_bias), kv_width, s.values.data()}};
      gemv_shared_input<T>(qkv, normed_input(layer.input_norm, h), hidden, false, stream_);
    } else {
      rmsnorm<T, T>(x, layer.input_norm.data(), n, hidden, eps, h, stream_);
      project(h, layer.q_proj.data(), bias(layer.q_bias), n, hidden, q_width, s.queries.data(), false);
      project(h, layer.k_proj.data(), bias(layer.k_bias), n, hidden, key_product_width,
              gates_with_keys ? s.key_products.data() : s.keys.data(), false);
      project(h, layer.v_proj.data(), bias(layer.v_bias), n, hidden, kv_width, s.values.data(), false);
    }
    // One token through a mixer that folds q/k norm and RoPE into its decode: no launch for them.
    const bool raw_qk = n == 1 && mixers_[l].decode_applies_qk_norm_rope();
    if (!raw_qk)
      qk_norm_rope<T>(s.queries.data(), s.keys.data(), bias(layer.q_norm), bias(layer.k_norm), eps,
                      s.positions.data(), rope_inv_freq_.data(), n, hq, hkv, d, /*apply_rope=*/true, stream_,
                      rotation.out, gates_with_keys ? s.key_products.data() : nullptr, key_product_width);
    DeviceMixerInput<T> input{.x = h, .queries = s.queries.data(), .keys = s.keys.data(), .values = s.values.data(),
                              .positions = s.positions.data(), .first_position = first_position, .n = n};
    if (gates_with_keys) input.gates = s.key_products.data() + kv_width, input.gate_stride = key_product_width;
    if (raw_qk) input.raw_qk = {bias(layer.q_norm), bias(layer.k_norm), eps, rope_inv_freq_.data(), rotation.out};
    if (n == 1)
      mixers_[l].decode(input, s.layers[l], s.attention.data(), stream_);
    else
      mixers_[l].prefill(input, s.layers[l], s.attention.data(), cublas_, stream_);
    add_to_residual(s.attention.data(), layer.o_proj, q_width, layer.post_attention_norm);

    // Feed-forward block (SwiGLU).
    if (carry_norm) {
      gate_up_swiglu_gemv<T, T>(layer.gate_proj.data(), layer.up_proj.data(),
                                normed_input(layer.post_attention_norm, nullptr), inter, hidden, s.activation.data(),
                                stream_);
    } else {
      rmsnorm<T, T>(x, layer.post_attention_norm.data(), n, hidden, eps, h, stream_);
      project(h, layer.gate_proj.data(), nullptr, n, hidden, inter, s.gate.data(), false);
      project(h, layer.up_proj.data(), nullptr, n, hidden, inter, s.up.data(), false);
      swiglu<T>(s.gate.data(), s.up.data(), std::int64_t(n) * inter, s.activation.data(), stream_);
    }
    add_to_residual(s.activation.data(), layer.down_proj, inter, next_layer_norm);
  }
}

//   logits = rmsnorm(x) · Wlmᵀ   for rows first_row … first_row + rows − 1 (rows ≤ kLogitRows).
// norm_carried: run_layers ran on one token, so its last down_proj wrote the final norm's inputs.
template <typename T>
void CudaModel<T>::output_head(CudaSession<T>& s, int first_row, int rows, bool norm_carried) const {
  const auto& c = config_;
  const std::int64_t offset = std::int64_t(first_row) * c.hidden_size;
  if (norm_carried) {
    const GemvProduct<T> head{weights_.output_projection(), nullptr, c.vocab_size, s.logits.data()};
    const RmsNormedInput<T> normed{s.scaled.data(), s.group_squares.data(), float(c.rms_norm_eps)};
    gemv_shared_input<T>(std::span(&head, 1), normed, c.hidden_size, false, stream_);
    return;
  }
  rmsnorm<T, T>(s.residual.data() + offset, weights_.final_norm.data(), rows, c.hidden_size, float(c.rms_norm_eps),
                s.normed.data() + offset, stream_);
  project(s.normed.data() + offset, weights_.output_projection(), nullptr, rows, c.hidden_size, c.vocab_size,
          s.logits.data(), false);
}

template <typename T>
void CudaModel<T>::prefill(CudaSession<T>& s, std::int64_t position, std::span<const std::int32_t> tokens) const {
  check_capacity(s, position, std::int64_t(tokens.size()));
  std::vector<std::int64_t> positions(s.chunk);
  for (std::size_t begin = 0; begin < tokens.size(); begin += s.chunk) {
    const int n = int(std::min<std::size_t>(s.chunk, tokens.size() - begin));
    const std::int64_t first = position + std::int64_t(begin);
    for (int i = 0; i < n; ++i) positions[i] = first + i;
    check(cudaMemcpyAsync(s.tokens.data(), tokens.data() + begin, n * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                          stream_),
          "upload tokens");
    check(cudaMemcpyAsync(s.positions.data(), positions.data(), n * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                          stream_),
          "upload positions");
    run_layers(s, n, first);
    if (begin + n == tokens.size()) output_head(s, n - 1, 1, /*norm_carried=*/n == 1);
    check(cudaStreamSynchronize(stream_), "prefill");  // `positions` is reused by the next chunk
  }
  s.device_position = -1;  // positions[0] and tokens[0] now hold the chunk's, not a decode step's
  s.device_token = -1;
}

template <typename T>
void CudaModel<T>::forward(DeviceSession& session, std::int64_t position, std::span<const std::int32_t> tokens,
                           float* host_logits, bool all_logits) const {
  auto& s = static_cast<CudaSession<T>&>(session);
  const std::size_t vocab = config_.vocab_size;
  if (!all_logits) {
    prefill(s, position, tokens);
    check(cudaMemcpy(host_logits, s.logits.data(), vocab * sizeof(float), cudaMemcpyDeviceToHost), "logits to host");
    return;
  }
  check_capacity(s, position, std::int64_t(tokens.size()));
  std::vector<std::int64_t> positions(s.chunk);
  for (std::size_t begin = 0; begin < tokens.size(); begin += s.chunk) {
    const int n = int(std::min<std::size_t>(s.chunk, tokens.size() - begin));
    const std::int64_t first = position + std::int64_t(begin);
    for (int i = 0; i < n; ++i) positions[i] = first + i;
    check(cudaMemcpy(s.tokens.data(), tokens.data() + begin, n * sizeof(std::int32_t), cudaMemcpyHostToDevice),
          "upload tokens");
    check(cudaMemcpy(s.positions.data(), positions.data(), n * sizeof(std::int64_t), cudaMemcpyHostToDevice),
          "upload positions");
    run_layers(s, n, first);
    for (int row = 0; row < n; row += kLogitRows) {
      const int rows = std::min(kLogitRows, n - row);
      output_head(s, row, rows, /*norm_carried=*/n == 1);
      check(cudaMemcpyAsync(host_logits + (begin + row) * vocab, s.logits.data(), rows * vocab * sizeof(float),
                            cudaMemcpyDeviceToHost, stream_),
            "logits to host");
      check(cudaStreamSynchronize(stream_), "forward");
    }
  }
  s.device_position = -1;
  s.device_token = -1;
}

// One decode step as a graph: the layers on tokens[0] at positions[0], the LM head, the sampler,
// then the sampled id becomes tokens[0] and positions[0] advances — so replays chain on their own.
template <typename T>
cudaGraph_t CudaModel<T>::record_decode_graph(CudaSession<T>& s, const SamplingParams& sampling) const {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  try {
    run_layers(s, 1, -1);
    output_head(s, 0, 1, /*norm_carried=*/true);
    sample_logits(s.logits.data(), config_.vocab_size, sampling, s.sample_step.data(), s.sampling_workspace.data(),
                  s.sampled.data(), stream_);
    advance_decode_step(s.sampled.data(), s.tokens.data(), s.positions.data(), stream_);
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  return graph;
}

template <typename T>
void CudaModel<T>::capture_decode_graph(CudaSession<T>& s, const SamplingParams& sampling) const {
  if (s.decode_graph != nullptr) {
    check(cudaGraphExecDestroy(s.decode_graph), "cudaGraphExecDestroy");
    s.decode_graph = nullptr;
  }
  cudaGraph_t graph = record_decode_graph(s, sampling);
  const cudaError_t instantiated = cudaGraphInstantiate(&s.decode_graph, graph, 0);
  cudaGraphDestroy(graph);
  check(instantiated, "cudaGraphInstantiate");
  s.graph_sampling = sampling;
}

// Only when the host's token or position differ from what the last step left on the device (the
// first step after a prefill) do they travel.
template <typename T>
void CudaModel<T>::upload_step_input(CudaSession<T>& s, std::int64_t position, std::int32_t token) const {
  if (s.device_position != position || s.device_token != token) {
    check(cudaMemcpyAsync(s.positions.data(), &position, sizeof position, cudaMemcpyHostToDevice, stream_), "position");
    check(cudaMemcpyAsync(s.tokens.data(), &token, sizeof token, cudaMemcpyHostToDevice, stream_), "token");
  }
}

template <typename T>
std::int32_t CudaModel<T>::decode_and_sample(DeviceSession& session, std::int64_t position, std::int32_t token,
                                             const SamplingParams& sampling) const {
  auto& s = static_cast<CudaSession<T>&>(session);
  check_capacity(s, position, 1);
  const SamplingParams& g = s.graph_sampling;
  if (s.decode_graph == nullptr || g.temperature != sampling.temperature || g.top_k != sampling.top_k ||
      g.top_p != sampling.top_p || g.seed != sampling.seed)
    capture_decode_graph(s, sampling);
  upload_step_input(s, position, token);
  check(cudaGraphLaunch(s.decode_graph, stream_), "cudaGraphLaunch");
  std::int32_t next = 0;
  check(cudaMemcpyAsync(&next, s.sampled.data(), sizeof next, cudaMemcpyDeviceToHost, stream_), "sampled id");
  check(cudaStreamSynchronize(stream_), "decode");
  // The device sampler answers kNonFiniteLogitsToken when a logit is NaN or +inf (sampling.cuh):
  // the activations overflowed (fp16's range ends at ±65,504) or the weights hold NaN — the CPU
  // Sampler's error. The next step must not embed that id, and the caller must not print one.
  if (next < 0 || next >= config_.vocab_size)
    fail("decode", "the logits at position " + std::to_string(position) + " hold a NaN or infinite value: " +
                       kNonFiniteLogitsCause);
  s.device_position = position + 1;
  s.device_token = next;
  return next;
}

// ---- copying a session -----------------------------------------------------------------------

namespace {

template <typename U>
void copy_buffer(const DeviceBuffer<U>& from, DeviceBuffer<U>& to, cudaStream_t stream) {
  if (from.size() != to.size()) fail("session", "copying a session into one of another capacity");
  if (from.size() > 0)
    check(cudaMemcpyAsync(to.data(), from.data(), from.bytes(), cudaMemcpyDeviceToDevice, stream), "copy session");
}

}  // namespace

template <typename T>
void CudaModel<T>::copy_state(const DeviceSession& from_session, DeviceSession& to_session) const {
  const auto& from = static_cast<const CudaSession<T>&>(from_session);
  auto& to = static_cast<CudaSession<T>&>(to_session);
  if (from.layers.size() != to.layers.size() || from.capacity != to.capacity || from.chunk != to.chunk)
    fail("session", "copying a session into one of another shape");
  // The layers' caches and states are all a session carries from one call to the next; the
  // scratch is rewritten by every call, and the copy's decode graph is captured on first use.
  for (std::size_t l = 0; l < from.layers.size(); ++l) {
    const DeviceMixerState<T>& a = from.layers[l];
    DeviceMixerState<T>& b = to.layers[l];
    copy_buffer(a.keys, b.keys, stream_);
    copy_buffer(a.values, b.values, stream_);
    copy_buffer(a.slot_positions, b.slot_positions, stream_);
    copy_buffer(a.matrix, b.matrix, stream_);
    copy_buffer(a.normalizer, b.normalizer, stream_);
    copy_buffer(a.stabilizer, b.stabilizer, stream_);
  }
  check(cudaStreamSynchronize(stream_), "copy session");
}

template class CudaModel<__nv_bfloat16>;
template class CudaModel<float>;
template class CudaSession<__nv_bfloat16>;
template class CudaSession<float>;
template class CudaModel<__half>;
template class CudaSession<__half>;

}  // namespace bifocal::cuda

namespace bifocal {

std::unique_ptr<DeviceModel> make_cuda_model(const DeviceModelSource& source) {
  if (source.dtype == DeviceDtype::Float32) return std::make_unique<cuda::CudaModel<float>>(source);
  if (source.dtype == DeviceDtype::Float16) return std::make_unique<cuda::CudaModel<__half>>(source);
  return std::make_unique<cuda::CudaModel<__nv_bfloat16>>(source);
}

void reset_cuda_context() { cuda::check(cudaDeviceReset(), "cudaDeviceReset"); }

}  // namespace bifocal
