// Shared by the recurrent-mixer kernel tests (recurrent_test.cpp, bifocal_decode_test.cpp):
// fresh seeds, cache element conversions, device copies, the mLSTM token sequences and the gate
// projections the mLSTM decode step computes its gates from.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/mlstm.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/recurrent_decode.cuh"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal::testing {

inline unsigned fresh_seed() { return std::random_device{}(); }

inline std::vector<float> normal_vector(std::size_t size, std::mt19937& rng, float mean, float deviation) {
  std::normal_distribution<float> normal(mean, deviation);
  std::vector<float> x(size);
  for (float& value : x) value = normal(rng);
  return x;
}

// A cache element type's name, for test traces.
template <typename T>
const char* storage_name() {
  return std::is_same_v<T, float> ? "fp32" : std::is_same_v<T, __half> ? "fp16" : "bf16";
}

// T cache values back as fp32 (to_storage and as_stored are in cuda_test_support.h).
template <typename T>
std::vector<float> from_storage(const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, float>) return values;
  else return to_float(values);
}
template <typename T>
cuda::DeviceBuffer<T> on_device(const std::vector<T>& host) {
  return cuda::DeviceBuffer<T>(std::span<const T>(host));
}

// A device buffer of `count` elements whose every byte is 0xFF (NaN in fp32 and bf16), so an
// element a kernel fails to write shows.
template <typename T>
cuda::DeviceBuffer<T> poisoned(std::size_t count) {
  cuda::DeviceBuffer<T> buffer(count);
  buffer.fill_bytes(0xFF);
  return buffer;
}

inline void synchronize() { cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

inline std::vector<float> slice(const std::vector<float>& x, std::size_t begin, std::size_t count) {
  return {x.begin() + begin, x.begin() + begin + count};
}

// An mLSTM token sequence: q [n, Hq, d], k, v [n, Hkv, d], raw gates [n, S]. Moderate input gates
// (deviation 1) keep the stabilizer small, where the floor e^{−m} of the denominator stops a
// nearly cancelling q̂ᵀn from magnifying fp32 rounding into the comparison (tests/mlstm_test.cpp).
struct MlstmSequence {
  cpu::MlstmShape shape;
  int n;
  std::vector<float> q, k, v, input_gate, forget_gate;

  MlstmSequence(const cpu::MlstmShape& s, int tokens, std::mt19937& rng)
      : shape(s),
        n(tokens),
        q(normal_vector(std::size_t(tokens) * s.query_heads * s.head_dim, rng, 0, 1)),
        k(normal_vector(std::size_t(tokens) * s.kv_heads * s.head_dim, rng, 0, 1)),
        v(normal_vector(std::size_t(tokens) * s.kv_heads * s.head_dim, rng, 0, 1)),
        input_gate(normal_vector(std::size_t(tokens) * s.states, rng, 0, 1)),
        forget_gate(normal_vector(std::size_t(tokens) * s.states, rng, 2, 3)) {}

  std::size_t q_offset(int t) const { return std::size_t(t) * shape.query_heads * shape.head_dim; }
  std::size_t kv_offset(int t) const { return std::size_t(t) * shape.kv_heads * shape.head_dim; }
  std::size_t gate_offset(int t) const { return std::size_t(t) * shape.states; }
};

// A CPU mLSTM state (fresh: zero).
struct HostMlstmState {
  std::vector<float> matrix, normalizer, stabilizer;
  explicit HostMlstmState(const cpu::MlstmShape& shape)
      : matrix(cpu::mlstm_matrix_floats(shape), 0.0f),
        normalizer(cpu::mlstm_normalizer_floats(shape), 0.0f),
        stabilizer(cpu::mlstm_stabilizer_floats(shape), 0.0f) {}
  cpu::MlstmState view() { return {matrix.data(), normalizer.data(), stabilizer.data()}; }
};

// The same state on the device.
struct DeviceMlstmState {
  cuda::DeviceBuffer<float> matrix, normalizer, stabilizer;
  explicit DeviceMlstmState(const HostMlstmState& host)
      : matrix(on_device(host.matrix)),
        normalizer(on_device(host.normalizer)),
        stabilizer(on_device(host.stabilizer)) {}
  cpu::MlstmState view() { return {matrix.data(), normalizer.data(), stabilizer.data()}; }
};

// The gate projections of an mLSTM (or Bifocal) layer and the layer inputs x of n tokens, as the
// storage type T keeps them (CPU values rounded as T rounds them, device copies in T), and the
// pre-activations W·x + b that the CPU reference takes (summed in double, rounded to fp32):
// input_gate, forget_gate [n, S] (DESIGN.md mlstm: ĩ, f̃ linear in the layer input, with bias)
// and mix_gate [n, Hq] (bifocal: o = sigmoid(W_o x + b_o)). Scaled so that ĩ ~ N(0, 1) and
// f̃ ~ N(2, 3), the distributions MlstmSequence draws, and o's pre-activation ~ N(0, 2).
template <typename T>
struct GateProjections {
  int hidden, n, states, query_heads;
  std::vector<float> x, input_weight, input_bias, forget_weight, forget_bias, mix_weight, mix_bias;
  std::vector<float> input_gate, forget_gate, mix_gate;
  cuda::DeviceBuffer<T> gpu_x, gpu_input_weight, gpu_input_bias, gpu_forget_weight, gpu_forget_bias, gpu_mix_weight,
      gpu_mix_bias;

  GateProjections(const cpu::MlstmShape& shape, int hidden_size, int tokens, std::mt19937& rng)
      : hidden(hidden_size), n(tokens), states(shape.states), query_heads(shape.query_heads) {
    const float scale = 1.0f / std::sqrt(float(hidden));
    x = as_stored<T>(normal_vector(std::size_t(n) * hidden, rng, 0, 1));
    input_weight = as_stored<T>(normal_vector(std::size_t(states) * hidden, rng, 0, scale));
    input_bias = as_stored<T>(normal_vector(states, rng, 0, 0.1f));
    forget_weight = as_stored<T>(normal_vector(std::size_t(states) * hidden, rng, 0, 3 * scale));
    forget_bias = as_stored<T>(normal_vector(states, rng, 2, 0.1f));
    mix_weight = as_stored<T>(normal_vector(std::size_t(query_heads) * hidden, rng, 0, 2 * scale));
    mix_bias = as_stored<T>(normal_vector(query_heads, rng, 0, 0.1f));
    input_gate = products(input_weight, input_bias, states);
    forget_gate = products(forget_weight, forget_bias, states);
    mix_gate = products(mix_weight, mix_bias, query_heads);
    gpu_x = on_device(to_storage<T>(x));
    gpu_input_weight = on_device(to_storage<T>(input_weight));
    gpu_input_bias = on_device(to_storage<T>(input_bias));
    gpu_forget_weight = on_device(to_storage<T>(forget_weight));
    gpu_forget_bias = on_device(to_storage<T>(forget_bias));
    gpu_mix_weight = on_device(to_storage<T>(mix_weight));
    gpu_mix_bias = on_device(to_storage<T>(mix_bias));
  }

  // [n, rows]: W·x_t + b, the naive reference of the kernel's gate products.
  std::vector<float> products(const std::vector<float>& weight, const std::vector<float>& bias, int rows) const {
    std::vector<float> out(std::size_t(n) * rows);
    for (int t = 0; t < n; ++t)
      for (int r = 0; r < rows; ++r) {
        double sum = bias[r];
        for (int c = 0; c < hidden; ++c)
          sum += double(weight[std::size_t(r) * hidden + c]) * x[std::size_t(t) * hidden + c];
        out[std::size_t(t) * rows + r] = float(sum);
      }
    return out;
  }

  // The kernels' view for token t.
  cuda::MlstmGateProjections<T> projections(int t) const {
    return {.x = gpu_x.data() + std::size_t(t) * hidden, .hidden = hidden, .input_weight = gpu_input_weight.data(),
            .input_bias = gpu_input_bias.data(), .forget_weight = gpu_forget_weight.data(),
            .forget_bias = gpu_forget_bias.data()};
  }
};

// A decode kernel's output in T (as floats) against the CPU's fp32 output. fp32: the relative
// error itself. bf16 / fp16: against the CPU's values rounded to T, as the kernel rounds its fp32
// result once — an element whose two fp32 values straddle a rounding boundary then differs by one
// ulp (bf16: 2^-8 relative), which happens for ~1e-6 / 2^-9 of the elements (‖·‖ error ~1e-4).
template <typename T>
double output_error(const std::vector<float>& got, const std::vector<float>& want) {
  return relative_error(got, as_stored<T>(want));
}
template <typename T>
constexpr double output_tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-3;
}

inline std::string describe(const cpu::MlstmShape& shape) {
  return "Hq=" + std::to_string(shape.query_heads) + " Hkv=" + std::to_string(shape.kv_heads) +
         " S=" + std::to_string(shape.states) + " d=" + std::to_string(shape.head_dim);
}

}  // namespace bifocal::testing
