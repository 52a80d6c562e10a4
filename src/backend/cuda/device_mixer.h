// One layer's sequence mixer on the device (the CUDA counterpart of src/mixer/): its parameters
// in device memory, the per-session state it keeps (window cache, recurrent state, scratch),
// and the prefill/decode calls into the kernels. Same semantics and state layouts as the CPU
// mixers, which the tests compare it with.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "bifocal/budget.h"
#include "bifocal/mixer_spec.h"
#include "mixer/mixer_parameters.h"

namespace bifocal::cuda {

// The layer's q/k norm and RoPE, for a decode whose mixer applies them itself
// (DeviceMixer::decode_applies_qk_norm_rope): then queries and keys arrive raw.
template <typename T>
struct QkNormRope {
  const T* q_norm = nullptr;  // [d] or null (no q/k norm: Llama, Qwen2)
  const T* k_norm = nullptr;
  float eps = 0.0f;
  const float* inv_freq = nullptr;  // [d/2]
  const float2* rotation = nullptr;  // [d/2] the step's (sin, cos) at its position, or null (made in place)
};

// The layer's inputs, all on the device except n and first_position.
template <typename T>
struct DeviceMixerInput {
  const T* x;                      // [n, hidden] the normed layer input (gates read it)
  const float* queries;            // [n, Hq, d] after q/k-norm and RoPE (raw when raw_qk.inv_freq is set)
  const float* keys;               // [n, Hkv, d]
  const float* values;             // [n, Hkv, d]
  const std::int64_t* positions;   // [n] absolute positions (device)
  std::int64_t first_position = 0;  // positions[0], known on the host for prefill
  int n = 0;
  QkNormRope<T> raw_qk{};          // decode only, and only where decode_applies_qk_norm_rope()
  // Prefill of a mixer with gates (DeviceMixer::gate_count() > 0): the pre-activations x·Wᵀ of its
  // gate rows without the bias, token t's at gates + t·gate_stride, when the caller made them
  // (CudaModel: the same product as the keys, DeviceMixer::adopt_gate_weights); null: the mixer
  // makes them itself.
  const float* gates = nullptr;
  int gate_stride = 0;
};

// Scratch of one layer's prefill or decode call. The layers run one after another, so a session
// holds ONE of these for all its layers, sized for the largest (DeviceMixer::scratch_sizes):
// per-layer copies would make the workspace grow with the layer count (Bifocal, 4K-token chunks,
// Qwen3-4B: 160 MB a layer, 5.7 GB for 36 layers).
template <typename T>
struct DeviceMixerScratch {
  DeviceBuffer<T> gathered_keys, gathered_values;  // [slots + chunk, Hkv, d]: a window prefill's keys
  DeviceBuffer<std::int64_t> gathered_positions;   // [slots + chunk]
  DeviceBuffer<float> gates;                       // [chunk, G]: a token's input, forget (and mix) gates
  DeviceBuffer<float> branch;                      // [chunk, Hq, d]: linear's and lolcats's fp32 output
  DeviceBuffer<std::byte> workspace;               // kernel workspaces (attention splits, chunkwise)

  std::size_t bytes() const {
    return gathered_keys.bytes() + gathered_values.bytes() + gathered_positions.bytes() + gates.bytes() +
           branch.bytes() + workspace.bytes();
  }
};

// Element counts of each scratch buffer one layer needs; a session allocates the largest of each
// over its layers.
struct DeviceMixerScratchSizes {
  std::size_t gathered_elements = 0, gathered_positions = 0, gates = 0, branch = 0, workspace_bytes = 0;
  void grow_to(const DeviceMixerScratchSizes& other);
  template <typename T>
  DeviceMixerScratch<T> allocate() const;
};

// What one layer keeps for one sequence: the state proper (what the accounting counts) — keys and
// values, the fp32 recurrent state — and the slots' positions. `shared` is the session's scratch.
template <typename T>
struct DeviceMixerState {
  DeviceBuffer<T> keys, values;               // [slots, Hkv, d]
  DeviceBuffer<std::int64_t> slot_positions;  // [slots], −1 = empty (window mixers)
  DeviceBuffer<float> matrix, normalizer, stabilizer;
  std::int64_t slots = 0;
  DeviceMixerScratch<T>* shared = nullptr;    // set by the session before any call

  // What the accounting counts (include/bifocal/budget.h): keys, values and the fp32 state.
  std::size_t state_bytes() const {
    return keys.bytes() + values.bytes() + matrix.bytes() + normalizer.bytes() + stabilizer.bytes();
  }
  // Bookkeeping: the slots' positions, 8 bytes a slot.
  std::size_t workspace_bytes() const { return slot_positions.bytes(); }
};

template <typename T>
class DeviceMixer {
 public:
  // Throws bifocal::Error for a mixer the CUDA backend does not run (swa positions=rolling).
  DeviceMixer(const MixerSpec& spec, const LayerShape& shape, int hidden, const MixerParameters& parameters);

  const MixerSpec& spec() const { return spec_; }
  // Whether decode applies the layer's q/k norm and RoPE itself (DeviceMixerInput::raw_qk), so the
  // step launches no qk_norm_rope for this layer: swa, whose window attention folds them in
  // (attention_decode.cuh, DecodeAttentionArgs::rope_inv_freq), and Bifocal, whose mLSTM step
  // does too (MlstmDecodeArgs::rope_inv_freq), for windows of ≤ 2,048 slots.
  bool decode_applies_qk_norm_rope() const;
  DeviceMixerState<T> new_state(std::int64_t capacity) const;
  // The scratch this layer's calls need for a session of `capacity` tokens and prefill chunks of
  // `chunk` tokens.
  DeviceMixerScratchSizes scratch_sizes(std::int64_t capacity, int chunk) const;
  // Back to an empty sequence: no cached token, zero states.
  void reset(DeviceMixerState<T>& state, cudaStream_t stream) const;
  // n tokens; out [n, Hq, d] in T (the o_proj input). Not captured: may copy small index arrays.
  void prefill(const DeviceMixerInput<T>& in, DeviceMixerState<T>& state, T* out, const CublasHandle& cublas,
               cudaStream_t stream) const;
  // One token at the position in device memory; graph-capturable.
  void decode(const DeviceMixerInput<T>& in, DeviceMixerState<T>& state, T* out, cudaStream_t stream) const;
  // bench: caches and states as if `context` tokens had been seen (random contents).
  void fill_synthetic(DeviceMixerState<T>& state, std::int64_t context, std::uint64_t seed, cudaStream_t stream) const;

  // The rows of the mLSTM's and Bifocal's gate projections (0 for the other mixers), and their
  // weights [gate_count(), hidden] on the device.
  int gate_count() const;
  const T* gate_weights() const { return gate_weight_rows_; }
  // The gate rows now live at `rows` (a copy of gate_weights() the caller owns and keeps alive:
  // CudaModel puts them after the key projection's rows, so that one prefill product makes the
  // keys and the gates); the mixer's own copy is released.
  void adopt_gate_weights(const T* rows);

 private:
  int state_heads() const;
  // A window's prefill in two steps: the cached window and the new tokens gathered side by side
  // (and the new tokens into the ring), then attention over them. mix_gate: Bifocal's window branch,
  // its output rows scaled by 1 − sigmoid(mix gate); wait_at_end and beside_previous_kernel: the
  // gather or the attention runs beside the kernel launched before it (GatherWindowArgs::
  // wait_at_end, PrefillAttentionArgs::beside_previous_kernel); mlstm_outputs: the mLSTM prefill's
  // offer of its outputs for the attention's epilogue (PrefillMlstmOutputs), taken where the
  // attention can (attend_window returns whether it did).
  void gather_window(const DeviceMixerInput<T>& in, DeviceMixerState<T>& state, cudaStream_t stream,
                     bool wait_at_end = false) const;
  bool attend_window(const DeviceMixerInput<T>& in, DeviceMixerState<T>& state, T* out, cudaStream_t stream,
                     const float* mix_gate = nullptr, int mix_gate_stride = 0, bool beside_previous_kernel = false,
                     const PrefillMlstmOutputs& mlstm_outputs = {}) const;
  // The prefill's gate pre-activations: the caller's (DeviceMixerInput::gates), or made here.
  struct GatePreactivations {
    const float* values;  // token t's gate_count() values at values + t·stride: [input S | forget S | mix Hq]
    int stride;
  };
  GatePreactivations gate_products(const DeviceMixerInput<T>& in, DeviceMixerState<T>& state,
                                   const CublasHandle* cublas, cudaStream_t stream) const;
  MlstmGateInputs gate_inputs(const GatePreactivations& gates) const;
  const float* mix_bias() const;  // Bifocal's [Hq] mix gate biases, as floats

  MixerSpec spec_;
  LayerShape shape_;
  int hidden_;
  int sink_tokens_ = 0;
  DeviceBuffer<float> learned_sinks_;                    // [Hq] (sink=learned)
  // The mLSTM's and Bifocal's gate projections as one [G, hidden] matrix and [G] bias: the input
  // gates' S rows, the forget gates' S, Bifocal's Hq mix gates (G = 2S + Hq). One product a
  // prefill chunk (three small GEMMs and bias passes cost ~34 µs a 4,096-token layer, one ~12);
  // the decode kernels read the row blocks in place (gate_rows).
  DeviceBuffer<T> gate_weight_, gate_bias_;
  const T* gate_weight_rows_ = nullptr;  // gate_weight_, or where adopt_gate_weights put them
  // The bias as the floats it adds (gate_bias_'s values widened): the prefill product leaves it out
  // and the kernels that read the pre-activations add it (MlstmGateInputs, MlstmOutputMix,
  // PrefillAttentionArgs::output_gate_bias), which saves a pass and a launch on Bifocal's path.
  DeviceBuffer<float> gate_bias_added_by_readers_;
  struct GateRows {
    const T *input_weight, *input_bias, *forget_weight, *forget_bias, *mix_weight, *mix_bias;
  };
  GateRows gate_rows() const;
  DeviceBuffer<float> feature_map_;                      // [Hkv, d, 64] (hedgehog)
  DeviceBuffer<float> window_factor_;                    // [Hq] (lolcats)
};

}  // namespace bifocal::cuda
