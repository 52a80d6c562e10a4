// The device mixers: which kernels each mixer kind runs, in the order of its math (DESIGN.md
// "Mixers: exact semantics"; the CPU mixers in src/mixer/ are the reference).
#include "backend/cuda/device_mixer.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/bifocal_decode.cuh"
#include "backend/cuda/dense_kernels.cuh"
#include "backend/cuda/device_weights.h"
#include "backend/cuda/gather_window.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/recurrent_decode.cuh"
#include "backend/cuda/recurrent_prefill.cuh"
#include "backend/cuda/session_kernels.cuh"
#include "bifocal/error.h"

namespace bifocal::cuda {

namespace {

using Kind = MixerSpec::Kind;

cpu::LinearShape linear_shape(const MixerSpec& spec, const LayerShape& shape) {
  return {shape.query_heads, shape.kv_heads, shape.head_dim,
          spec.feature == MixerSpec::Feature::Hedgehog ? cpu::FeatureMap::Hedgehog : cpu::FeatureMap::Elu1};
}

// The mLSTM prefill's numerators at the storage type's resolution: fp32 models keep fp32 products,
// fp16 ones one TF32 pass, bf16 ones bf16 operands (recurrent_chunkwise.cuh).
template <typename T>
constexpr MlstmProducts mlstm_products_of() {
  return std::is_same_v<T, float>           ? MlstmProducts::Fp32
         : std::is_same_v<T, __nv_bfloat16> ? MlstmProducts::Bf16
                                            : MlstmProducts::Tf32;
}

template <typename T>
std::byte* scratch_of(DeviceMixerState<T>& state) {
  return state.shared->workspace.size() ? state.shared->workspace.data() : nullptr;
}

// A float mixer output into the o_proj's input type (nothing to do for fp32 storage).
template <typename T>
void to_output(const float* branch, T* out, std::int64_t count, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    if (branch != out) check(cudaMemcpyAsync(out, branch, count * sizeof(float), cudaMemcpyDeviceToDevice, stream), "copy");
  } else {
    convert(branch, out, count, stream);
  }
}

}  // namespace

template <typename T>
DeviceMixer<T>::DeviceMixer(const MixerSpec& spec, const LayerShape& shape, int hidden, const MixerParameters& p)
    : spec_(spec), shape_(shape), hidden_(hidden) {
  if (spec.kind == Kind::SlidingWindow && spec.positions == MixerSpec::Positions::Rolling)
    fail("mixer '" + spec.to_string() + "'", "positions=rolling is not available on the CUDA backend yet (use --backend cpu)");
  sink_tokens_ = spec.sink == MixerSpec::Sink::Tokens ? spec.sink_tokens : 0;
  if (spec.sink == MixerSpec::Sink::Learned) learned_sinks_ = upload_as<float>(p.sinks);
  if (gate_count() > 0) {  // [input; forget; mix] rows, as gate_rows() reads them
    std::vector<float> weight, bias;
    for (const auto* block : {&p.input_gate_weight, &p.forget_gate_weight, &p.mix_gate_weight})
      weight.insert(weight.end(), block->begin(), block->end());
    for (const auto* block : {&p.input_gate_bias, &p.forget_gate_bias, &p.mix_gate_bias})
      bias.insert(bias.end(), block->begin(), block->end());
    if (weight.size() != std::size_t(gate_count()) * hidden || bias.size() != std::size_t(gate_count()))
      fail("mixer '" + spec.to_string() + "'", "gate projections of " + std::to_string(weight.size()) +
                                                   " weights and " + std::to_string(bias.size()) + " biases, expected " +
                                                   std::to_string(gate_count()) + " rows of " + std::to_string(hidden));
    gate_weight_ = upload_as<T>(weight);
    gate_weight_rows_ = gate_weight_.data();
    gate_bias_ = upload_as<T>(bias);
    std::vector<float> widened(bias.size());
    for (std::size_t i = 0; i < bias.size(); ++i) widened[i] = float(T(bias[i]));  // upload_as's rounding
    gate_bias_added_by_readers_ = upload_as<float>(widened);
  }
  if (spec.feature == MixerSpec::Feature::Hedgehog) feature_map_ = upload_as<float>(p.feature_map);
  window_factor_ = upload_as<float>(p.window_factor);
}

template <typename T>
int DeviceMixer<T>::state_heads() const {
  return spec_.state == MixerSpec::StatePlacement::PerKvHead ? shape_.kv_heads : shape_.query_heads;
}

template <typename T>
int DeviceMixer<T>::gate_count() const {
  if (spec_.kind == Kind::Mlstm) return 2 * state_heads();
  if (spec_.kind == Kind::Bifocal) return 2 * state_heads() + shape_.query_heads;
  return 0;
}

template <typename T>
void DeviceMixer<T>::adopt_gate_weights(const T* rows) {
  if (gate_count() == 0 || rows == nullptr)
    fail("mixer '" + spec_.to_string() + "'", "has no gate rows to move, or was given nowhere to move them");
  gate_weight_rows_ = rows;
  gate_weight_ = DeviceBuffer<T>();
}

template <typename T>
typename DeviceMixer<T>::GateRows DeviceMixer<T>::gate_rows() const {
  const std::size_t S = state_heads(), hidden = hidden_;
  const T *weight = gate_weight_rows_, *bias = gate_bias_.data();
  return {weight, bias, weight + S * hidden, bias + S, weight + 2 * S * hidden, bias + 2 * S};
}

// gate_products' rows for the mLSTM prefill, with the biases its kernels add.
template <typename T>
MlstmGateInputs DeviceMixer<T>::gate_inputs(const GatePreactivations& gates) const {
  const int S = state_heads();
  const float* bias = gate_bias_added_by_readers_.data();
  return {.input = gates.values, .forget = gates.values + S, .stride = gates.stride, .input_bias = bias,
          .forget_bias = bias + S};
}

template <typename T>
const float* DeviceMixer<T>::mix_bias() const {
  return gate_bias_added_by_readers_.data() + 2 * state_heads();
}

template <typename T>
DeviceMixerState<T> DeviceMixer<T>::new_state(std::int64_t capacity) const {
  DeviceMixerState<T> s;
  const std::size_t row = std::size_t(shape_.kv_heads) * shape_.head_dim;
  const auto linear = linear_shape(spec_, shape_);
  s.slots = spec_.kind == Kind::Full ? capacity : spec_.uses_window() ? spec_.window : 0;
  if (s.slots > 0) {
    s.keys = DeviceBuffer<T>(s.slots * row);
    s.values = DeviceBuffer<T>(s.slots * row);
  }
  if (spec_.kind == Kind::SlidingWindow || spec_.kind == Kind::Bifocal)
    s.slot_positions = DeviceBuffer<std::int64_t>(s.slots);
  if (spec_.kind == Kind::Linear || spec_.kind == Kind::Lolcats) {
    s.matrix = DeviceBuffer<float>(cpu::linear_matrix_floats(linear));
    s.normalizer = DeviceBuffer<float>(cpu::linear_normalizer_floats(linear));
  }
  if (spec_.kind == Kind::Mlstm || spec_.kind == Kind::Bifocal) {
    const std::size_t S = state_heads(), d = shape_.head_dim;
    s.matrix = DeviceBuffer<float>(S * d * d);
    s.normalizer = DeviceBuffer<float>(S * d);
    s.stabilizer = DeviceBuffer<float>(S);
  }
  reset(s, nullptr);
  check(cudaStreamSynchronize(nullptr), "new mixer state");
  return s;
}

template <typename T>
DeviceMixerScratchSizes DeviceMixer<T>::scratch_sizes(std::int64_t capacity, int chunk) const {
  DeviceMixerScratchSizes sizes;
  const std::size_t row = std::size_t(shape_.kv_heads) * shape_.head_dim;
  const std::size_t out_row = std::size_t(shape_.query_heads) * shape_.head_dim;
  const std::size_t n = std::size_t(chunk);
  const auto linear = linear_shape(spec_, shape_);
  const std::int64_t slots = spec_.kind == Kind::Full ? capacity : spec_.uses_window() ? spec_.window : 0;
  if (spec_.kind == Kind::SlidingWindow || spec_.kind == Kind::Bifocal) {  // window prefill: cache + chunk
    sizes.gathered_elements = (std::size_t(slots) + n) * row;
    sizes.gathered_positions = std::size_t(slots) + n;
  }
  if (spec_.kind == Kind::Full || spec_.kind == Kind::SlidingWindow)
    sizes.workspace_bytes = attention_decode_workspace_bytes(slots, shape_.query_heads, shape_.kv_heads, shape_.head_dim);
  if (spec_.kind == Kind::Bifocal)  // the decode's window attention and its fp32 output
    sizes.workspace_bytes =
        bifocal_decode_workspace_bytes({shape_.query_heads, shape_.kv_heads, state_heads(), shape_.head_dim}, int(slots));
  if (spec_.kind == Kind::Linear) sizes.workspace_bytes = linear_prefill_workspace_bytes(linear, chunk);
  if (spec_.kind == Kind::Lolcats) sizes.workspace_bytes = lolcats_prefill_workspace_bytes(linear, chunk);
  if (spec_.kind == Kind::Mlstm || spec_.kind == Kind::Bifocal) {
    sizes.gates = n * std::size_t(gate_count());
    // the chunk-parallel mLSTM prefill's per-chunk states (Bifocal: shared with the decode's)
    sizes.workspace_bytes = std::max(
        sizes.workspace_bytes,
        mlstm_prefill_workspace_bytes({shape_.query_heads, shape_.kv_heads, state_heads(), shape_.head_dim}, chunk,
                                      mlstm_products_of<T>()));
  }
  if (spec_.kind == Kind::Linear || spec_.kind == Kind::Lolcats) sizes.branch = n * out_row;
  return sizes;
}

void DeviceMixerScratchSizes::grow_to(const DeviceMixerScratchSizes& other) {
  gathered_elements = std::max(gathered_elements, other.gathered_elements);
  gathered_positions = std::max(gathered_positions, other.gathered_positions);
  gates = std::max(gates, other.gates);
  branch = std::max(branch, other.branch);
  workspace_bytes = std::max(workspace_bytes, other.workspace_bytes);
}

template <typename T>
DeviceMixerScratch<T> DeviceMixerScratchSizes::allocate() const {
  DeviceMixerScratch<T> scratch;  // DeviceBuffer(0) allocates nothing
  scratch.gathered_keys = DeviceBuffer<T>(gathered_elements);
  scratch.gathered_values = DeviceBuffer<T>(gathered_elements);
  scratch.gathered_positions = DeviceBuffer<std::int64_t>(gathered_positions);
  scratch.gates = DeviceBuffer<float>(gates);
  scratch.branch = DeviceBuffer<float>(branch);
  scratch.workspace = DeviceBuffer<std::byte>(workspace_bytes);
  return scratch;
}

template DeviceMixerScratch<__nv_bfloat16> DeviceMixerScratchSizes::allocate() const;
template DeviceMixerScratch<float> DeviceMixerScratchSizes::allocate() const;
template DeviceMixerScratch<__half> DeviceMixerScratchSizes::allocate() const;

template <typename T>
void DeviceMixer<T>::reset(DeviceMixerState<T>& s, cudaStream_t stream) const {
  if (s.slot_positions.size()) fill_constant<std::int64_t>(s.slot_positions.data(), s.slots, -1, stream);
  for (DeviceBuffer<float>* b : {&s.matrix, &s.normalizer, &s.stabilizer})
    if (b->size()) check(cudaMemsetAsync(b->data(), 0, b->bytes(), stream), "reset state");
}

// The mLSTM gates (and Bifocal's mix gate) from the layer input: x·Wᵀ in one product, a token's
// gate_count() pre-activations side by side ([input S | forget S | mix Hq]), without the bias:
// the kernels that read them add it (gate_inputs(), mix_bias()), the same float additions gemm's
// bias pass made, so the same bits with one kernel fewer a layer (stop 44: that pass took ~2 µs of
// a 1K-token Bifocal layer, but the gather after it set the mLSTM kernels' start). Inside a model
// the keys' product has already made them (DeviceMixerInput::gates): no launch at all here.
template <typename T>
typename DeviceMixer<T>::GatePreactivations DeviceMixer<T>::gate_products(const DeviceMixerInput<T>& in,
                                                                         DeviceMixerState<T>& s,
                                                                         const CublasHandle* cublas,
                                                                         cudaStream_t stream) const {
  if (in.gates != nullptr) {
    if (in.gate_stride < gate_count())
      fail("mixer '" + spec_.to_string() + "'",
           "gate pre-activations of " + std::to_string(in.gate_stride) + " columns a token, fewer than its " +
               std::to_string(gate_count()));
    return {in.gates, in.gate_stride};
  }
  float* gates = s.shared->gates.data();
  if (in.n == 1) {
    const GemvProduct<T> product{gate_weight_rows_, nullptr, gate_count(), gates};
    gemv_shared_input<T, T>(std::span<const GemvProduct<T>>(&product, 1), in.x, hidden_, false, stream);
  } else {
    gemm<T>(*cublas, stream, in.x, gate_weight_rows_, nullptr, in.n, hidden_, gate_count(), gates, false);
  }
  return {gates, gate_count()};
}

// A window's prefill (swa, Bifocal's window branch): the cached window and the new tokens side
// by side, the new tokens into the ring as they are gathered (gather_window's store_new_tokens:
// each slot's old row copied out before its new one lands), then attention under the window rule
// over the gathered copy. Gathering first keeps it exact when new tokens evict old ones that
// earlier queries of the chunk still see (as SlidingWindowMixer does); key order does not matter to
// the softmax, only positions do.
template <typename T>
void DeviceMixer<T>::gather_window(const DeviceMixerInput<T>& in, DeviceMixerState<T>& s, cudaStream_t stream,
                                   bool wait_at_end) const {
  cuda::gather_window<T>({.ring_keys = s.keys.data(), .ring_values = s.values.data(),
                          .ring_positions = s.slot_positions.data(), .slots = s.slots, .new_keys = in.keys,
                          .new_values = in.values, .new_positions = in.positions, .n = in.n,
                          .row = std::int64_t(shape_.kv_heads) * shape_.head_dim,
                          .keys = s.shared->gathered_keys.data(), .values = s.shared->gathered_values.data(),
                          .positions = s.shared->gathered_positions.data(), .store_new_tokens = true,
                          .sink_tokens = sink_tokens_, .first_position = in.first_position,
                          .wait_at_end = wait_at_end},
                         stream);
}

template <typename T>
bool DeviceMixer<T>::attend_window(const DeviceMixerInput<T>& in, DeviceMixerState<T>& s, T* out, cudaStream_t stream,
                                   const float* mix_gate, int mix_gate_stride, bool beside_previous_kernel,
                                   const PrefillMlstmOutputs& mlstm_outputs) const {
  const PrefillAttentionArgs<T> args{.queries = in.queries, .positions = in.positions, .n = in.n,
                               .keys = s.shared->gathered_keys.data(), .values = s.shared->gathered_values.data(),
                               .key_positions = s.shared->gathered_positions.data(), .num_keys = s.slots + in.n,
                               .query_heads = shape_.query_heads, .kv_heads = shape_.kv_heads,
                               .head_dim = shape_.head_dim, .window = spec_.window, .sink_tokens = sink_tokens_,
                               .learned_sinks = learned_sinks_.size() ? learned_sinks_.data() : nullptr,
                               .output_gate = mix_gate, .output_gate_stride = mix_gate_stride,
                               .output_gate_bias = mix_gate != nullptr ? mix_bias() : nullptr,
                               .beside_previous_kernel = beside_previous_kernel};
  const bool takes_mlstm = mlstm_outputs.states != nullptr && attention_prefill_takes_mlstm_outputs<T, T>(args);
  attention_prefill<T, T>(args, out, stream, takes_mlstm ? mlstm_outputs : PrefillMlstmOutputs{});
  return takes_mlstm;
}

template <typename T>
void DeviceMixer<T>::prefill(const DeviceMixerInput<T>& in, DeviceMixerState<T>& s, T* out, const CublasHandle& cublas,
                             cudaStream_t stream) const {
  const std::int64_t out_count = std::int64_t(in.n) * shape_.query_heads * shape_.head_dim;
  const auto linear = linear_shape(spec_, shape_);
  const float* hedgehog = feature_map_.size() ? feature_map_.data() : nullptr;
  const cpu::MlstmShape mlstm{shape_.query_heads, shape_.kv_heads, state_heads(), shape_.head_dim};
  const cpu::MlstmState cell{s.matrix.data(), s.normalizer.data(), s.stabilizer.data()};
  const MlstmProducts mlstm_products = mlstm_products_of<T>();
  switch (spec_.kind) {
    case Kind::Full: {  // keys first, then attention over the linear cache 0 … p0+n−1
      store_kv_slots<T>(in.keys, in.values, in.n, in.positions, s.keys.data(), s.values.data(), nullptr,
                        shape_.kv_heads, shape_.head_dim, 0, 0, stream);
      const PrefillAttentionArgs<T> args{.queries = in.queries, .positions = in.positions, .n = in.n,
                                         .keys = s.keys.data(), .values = s.values.data(), .key_positions = nullptr,
                                         .num_keys = in.first_position + in.n, .query_heads = shape_.query_heads,
                                         .kv_heads = shape_.kv_heads, .head_dim = shape_.head_dim, .window = 0,
                                         .sink_tokens = 0, .learned_sinks = nullptr};
      attention_prefill<T, T>(args, out, stream);
      return;
    }
    case Kind::SlidingWindow:
      gather_window(in, s, stream);
      attend_window(in, s, out, stream);
      return;
    case Kind::Linear:
      linear_prefill(linear, hedgehog, in.queries, in.keys, in.values, in.n, {s.matrix.data(), s.normalizer.data()},
                     s.shared->branch.data(), scratch_of(s), stream);
      break;
    case Kind::Lolcats:
      lolcats_prefill<T>(linear, spec_.window, hedgehog, window_factor_.data(), in.queries, in.keys, in.values, in.n,
                         {s.keys.data(), s.values.data(), {s.matrix.data(), s.normalizer.data()}, in.positions},
                         s.shared->branch.data(), scratch_of(s), stream);
      break;
    case Kind::Mlstm: {  // the outputs in T straight from the kernel
      const GatePreactivations gates = gate_products(in, s, &cublas, stream);
      mlstm_prefill<T>(mlstm, in.queries, in.keys, in.values, gate_inputs(gates), in.n, cell, out, mlstm_products,
                       scratch_of(s), stream);
      return;
    }
    case Kind::Bifocal: {  // out = o·mLSTM + (1 − o)·SWA, o = sigmoid(mix gate)
      // The gates first: both branches take their share of the mix from them. The window branch
      // writes (1 − o)·SWA straight into out, and the mLSTM's outputs kernel adds o·mLSTM onto it
      // in L2 (MlstmOutputMix): no pass of its own, no mLSTM branch buffer. The window's attention
      // is launched between the mLSTM's denominators and outputs kernels and runs beside the
      // denominators (mlstm_prefill's window_branch): Qwen3-4B's 1K-token prefill is ~4% faster
      // than with the attention first (docs/notes/cuda-stop41-2026-12-04.md). One stream: the
      // window branch on a second stream beside the mLSTM kernels left every later graph replay of
      // the process ~1% slower (a kernel holding most of an SM's shared memory run on another
      // stream: tools/cuda/stream_aftereffect_probe.cu, docs/notes/cuda-stop40-2026-12-04.md).
      // The window's gather goes where mlstm_prefill puts it: in short calls beside the mLSTM's
      // contributions kernel, which then need not wait for it (window_gather; stop 53: +1.0% at 1K).
      // With bf16 storage the mLSTM's outputs kernel copies the chunk's keys and values from the
      // gathered window as they were rounded for the attention (MlstmRoundedKeyValues): the new
      // tokens' rows follow the cached window's `slots` rows there.
      // Where the call offers them (bf16, d = 128, its (state, chunk) blocks at most one an SM:
      // 1K tokens of Qwen3-4B), the attention's epilogue computes the mLSTM's outputs too and adds
      // them onto its rows (PrefillMlstmOutputs), and no outputs kernel follows it: Bifocal's
      // 1K prefill +1.2 to +1.7% there (docs/notes/cuda-stop65-2026-12-06.md).
      const GatePreactivations gates = gate_products(in, s, &cublas, stream);
      const float* mix_gate = gates.values + 2 * mlstm.states;
      MlstmRoundedKeyValues rounded;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        const std::size_t new_rows = std::size_t(s.slots) * shape_.kv_heads * shape_.head_dim;
        rounded = {s.shared->gathered_keys.data() + new_rows, s.shared->gathered_values.data() + new_rows};
      }
      mlstm_prefill<T>(
          mlstm, in.queries, in.keys, in.values, gate_inputs(gates), in.n, cell, out, mlstm_products, scratch_of(s),
          stream, {.gate = mix_gate, .gate_stride = gates.stride, .gate_bias = mix_bias()},
          [&](const PrefillMlstmOutputs& mlstm_outputs) {
            return attend_window(in, s, out, stream, mix_gate, gates.stride, /*beside_previous_kernel=*/true,
                                 mlstm_outputs);
          },
          [&](bool beside_contributions) { gather_window(in, s, stream, /*wait_at_end=*/beside_contributions); },
          rounded);
      return;
    }
  }
  to_output(s.shared->branch.data(), out, out_count, stream);
}

template <typename T>
bool DeviceMixer<T>::decode_applies_qk_norm_rope() const {
  return (spec_.kind == Kind::SlidingWindow || spec_.kind == Kind::Bifocal) && spec_.window <= kWindowDecodeMaxSlots;
}

template <typename T>
void DeviceMixer<T>::decode(const DeviceMixerInput<T>& in, DeviceMixerState<T>& s, T* out, cudaStream_t stream) const {
  const std::int64_t out_count = std::int64_t(shape_.query_heads) * shape_.head_dim;
  const auto linear = linear_shape(spec_, shape_);
  const float* hedgehog = feature_map_.size() ? feature_map_.data() : nullptr;
  const cpu::MlstmShape mlstm{shape_.query_heads, shape_.kv_heads, state_heads(), shape_.head_dim};
  const cpu::MlstmState cell{s.matrix.data(), s.normalizer.data(), s.stabilizer.data()};
  const bool windowed = spec_.kind == Kind::SlidingWindow;
  switch (spec_.kind) {
    case Kind::Full:
    case Kind::SlidingWindow: {
      // attention_decode stores the new token's k, v in their slot itself (new_key/new_value).
      std::int64_t* slot_positions = windowed ? s.slot_positions.data() : nullptr;
      const DecodeAttentionArgs<T> args{.query = in.queries, .query_position = in.positions, .keys = s.keys.data(),
                                        .values = s.values.data(), .slot_positions = slot_positions, .slots = s.slots,
                                        .query_heads = shape_.query_heads, .kv_heads = shape_.kv_heads,
                                        .head_dim = shape_.head_dim, .window = windowed ? spec_.window : 0,
                                        .sink_tokens = sink_tokens_,
                                        .learned_sinks = learned_sinks_.size() ? learned_sinks_.data() : nullptr,
                                        .new_key = in.keys, .new_value = in.values,
                                        .rope_inv_freq = in.raw_qk.inv_freq, .q_norm = in.raw_qk.q_norm,
                                        .k_norm = in.raw_qk.k_norm, .norm_eps = in.raw_qk.eps,
                                        .rope_rotation = in.raw_qk.rotation};
      attention_decode<T, T>(args, scratch_of(s), out, stream);
      return;
    }
    case Kind::Linear:
      linear_decode(linear, hedgehog, in.queries, in.keys, in.values, {s.matrix.data(), s.normalizer.data()},
                    s.shared->branch.data(), stream);
      break;
    case Kind::Lolcats:
      lolcats_decode<T>(linear, spec_.window, hedgehog, window_factor_.data(), in.queries, in.keys, in.values,
                        {s.keys.data(), s.values.data(), {s.matrix.data(), s.normalizer.data()}, in.positions},
                        s.shared->branch.data(), stream);
      break;
    case Kind::Mlstm: {  // one launch: the gates W·x + b, the step and the output in T
      const GateRows rows = gate_rows();
      const MlstmGateProjections<T> gates{.x = in.x, .hidden = hidden_, .input_weight = rows.input_weight,
                                          .input_bias = rows.input_bias, .forget_weight = rows.forget_weight,
                                          .forget_bias = rows.forget_bias};
      const MlstmDecodeArgs<T> args{.shape = mlstm, .gates = gates, .q = in.queries, .k = in.keys, .v = in.values,
                                    .state = cell, .out = out, .mix = {}};  // no mix: the plain mLSTM mixer
      mlstm_decode(args, stream);
      return;
    }
    case Kind::Bifocal: {  // the window attention (it stores the new token in the ring), then the mLSTM step + mix
      const GateRows rows = gate_rows();
      const MlstmGateProjections<T> gates{.x = in.x, .hidden = hidden_, .input_weight = rows.input_weight,
                                          .input_bias = rows.input_bias, .forget_weight = rows.forget_weight,
                                          .forget_bias = rows.forget_bias};
      const BifocalDecodeArgs<T> args{.shape = mlstm, .keys = s.keys.data(), .values = s.values.data(),
                                      .slot_positions = s.slot_positions.data(), .window = spec_.window,
                                      .sink_tokens = sink_tokens_,
                                      .learned_sinks = learned_sinks_.size() ? learned_sinks_.data() : nullptr,
                                      .position = in.positions, .q = in.queries, .k = in.keys, .v = in.values,
                                      .gates = gates, .mix_weight = rows.mix_weight, .mix_bias = rows.mix_bias,
                                      .state = cell, .out = out, .workspace = scratch_of(s),
                                      .rope_inv_freq = in.raw_qk.inv_freq, .q_norm = in.raw_qk.q_norm,
                                      .k_norm = in.raw_qk.k_norm, .norm_eps = in.raw_qk.eps,
                                      .rope_rotation = in.raw_qk.rotation};
      bifocal_decode<T>(args, stream);
      return;
    }
  }
  to_output(s.shared->branch.data(), out, out_count, stream);
}

template <typename T>
void DeviceMixer<T>::fill_synthetic(DeviceMixerState<T>& s, std::int64_t context, std::uint64_t seed,
                                    cudaStream_t stream) const {
  reset(s, stream);
  if (s.keys.size()) {
    fill_uniform(s.keys.data(), std::int64_t(s.keys.size()), seed * 31 + 1, 1.0f, stream);
    fill_uniform(s.values.data(), std::int64_t(s.values.size()), seed * 31 + 2, 1.0f, stream);
  }
  if (s.slot_positions.size()) {  // the window after `context` tokens: sinks, then the most recent
    std::vector<std::int64_t> positions(s.slots, -1);
    const std::int64_t w = s.slots, sinks = sink_tokens_;
    for (std::int64_t p = 0; p < std::min(context, sinks); ++p) positions[p] = p;
    for (std::int64_t p = std::max(sinks, context - (w - sinks)); p < context; ++p)
      positions[sinks + (p - sinks) % (w - sinks)] = p;
    check(cudaMemcpyAsync(s.slot_positions.data(), positions.data(), positions.size() * sizeof(std::int64_t),
                          cudaMemcpyHostToDevice, stream),
          "synthetic window");
    check(cudaStreamSynchronize(stream), "synthetic window");  // `positions` leaves scope
  }
  if (s.matrix.size()) fill_uniform(s.matrix.data(), std::int64_t(s.matrix.size()), seed * 31 + 3, 0.01f, stream);
  if (s.normalizer.size()) fill_uniform(s.normalizer.data(), std::int64_t(s.normalizer.size()), seed * 31 + 4, 0.01f, stream);
}

template class DeviceMixer<__nv_bfloat16>;
template class DeviceMixer<float>;
template class DeviceMixer<__half>;

}  // namespace bifocal::cuda
