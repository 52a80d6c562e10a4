// The recurrent mixers' CUDA kernels (recurrent_decode.cuh, recurrent_prefill.cuh) against the
// CPU kernels on fresh random inputs (the seed is printed with any failure):
//   decode  300 one-token steps from a random non-zero state = the CPU recurrence, token by
//           token (outputs of every step, and the final state); the mLSTM step computes its gates
//           from the layer input (W·x + b against naive products) and writes bf16 or fp32;
//   prefill (linear attention, LoLCATs) n tokens (not a multiple of the chunk; 1; several
//           chunks) from a non-zero state = the CPU form, outputs and final state. The mLSTM's
//           chunk-parallel prefill: mlstm_prefill_test.cpp.
// Shapes: head_dim 16 … 256, GQA 4:1 and 1:1, state=kv and state=q, Qwen3-4B's (32 query heads,
// 8 KV heads, d 128); LoLCATs windows in bf16 and fp32. Outputs are poisoned (0xFF = NaN) so an
// unwritten element fails. Inputs a bf16 window stores are rounded first, so both sides see the
// same values.
//
// Tolerances, relative ‖got − want‖/‖want‖ (fp32 kernels against CPU kernels that compute in
// double (mLSTM) or fp32 with another summation order; the states are fp32 on both sides):
// kTolerance 1e-5 for outputs and states (measured ≤ 1e-6). The mLSTM step's stabilizer m comes
// from fp32 gates (and gate products summed in fp32): kDecodeStabilizerTolerance. A bf16 mLSTM
// decode output is compared with the CPU's rounded to bf16 (recurrent_test_support.h's
// output_error, 1e-3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/linear_attention.h"
#include "backend/cpu/lolcats.h"
#include "backend/cpu/mlstm.h"
#include "backend/cuda/recurrent_decode.cuh"
#include "backend/cuda/recurrent_prefill.cuh"
#include "cuda/recurrent_test_support.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::ErrorLog;
using testing::on_device;
using testing::poisoned;
using testing::relative_error;

constexpr double kTolerance = 1e-5;
constexpr int kDecodeSteps = 300;
constexpr int kPrefixTokens = 20;  // tokens run on the CPU to make the starting state
// The decode step's m_t = fp32(logf + m_{t−1}) or ĩ_t chains kDecodeSteps fp32 steps: each sum
// rounds once, and its fp32 logf (tanhf, log1pf, expf) lies within an ulp of the CPU's double
// one, so m may drift from the CPU's by up to 2 ulps a step: 300 · 2 · 2^-24 = 3.6e-5 of |m|.
// (1e-5 failed once at 1.65e-5: d = 256 with one state, seeded afresh each run.)
constexpr double kDecodeStabilizerTolerance = kDecodeSteps * 2 * 0x1p-24;

// =============================================================================================
// mLSTM

// The decode step, whose gates come from the layer input: shape and hidden size.
struct MlstmDecodeCase {
  cpu::MlstmShape shape;
  int hidden;
};
void PrintTo(const MlstmDecodeCase& c, std::ostream* out) {
  *out << testing::describe(c.shape) << " hidden=" << c.hidden;
}

const MlstmDecodeCase kMlstmDecodeCases[] = {
    {{32, 8, 8, 128}, 2560},   // Qwen3-4B, state=kv: 4 query heads per state (G = 4)
    {{32, 8, 32, 128}, 2560},  // Qwen3-4B, state=q
    {{4, 4, 4, 16}, 64},       // 1:1 (G = 1)
    {{16, 2, 2, 64}, 512},     // G = 8, head_dim 64
    {{8, 2, 8, 64}, 128},      // state=q over GQA 4:1
    {{6, 2, 2, 48}, 96},
    {{4, 1, 1, 256}, 256},
    {{16, 1, 1, 32}, 200},     // 16 readers: two reader passes over the registers
    {{12, 4, 4, 24}, 52},      // odd: 3 readers, 6 column quads; bf16 rows of 104 bytes go element by element
    {{9, 1, 1, 248}, 40},      // d = 248 (62 quads): four register batches, re-read by the second reader pass
};

// 300 one-token steps from a random non-zero state: the kernel's outputs (in T) and final state
// against cpu::mlstm_recurrent on the gates W·x + b (GateProjections, the naive products).
template <typename T>
void mlstm_decode_case(const MlstmDecodeCase& c) {
  const cpu::MlstmShape shape = c.shape;
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape) + " hidden " + std::to_string(c.hidden) +
               " " + testing::storage_name<T>());
  std::mt19937 rng(seed);
  testing::MlstmSequence x(shape, kPrefixTokens + kDecodeSteps, rng);
  const testing::GateProjections<T> gates(shape, c.hidden, x.n, rng);
  x.input_gate = gates.input_gate;  // the CPU takes the pre-activations the kernel computes
  x.forget_gate = gates.forget_gate;

  testing::HostMlstmState cpu_state(shape);
  std::vector<float> prefix_out(x.q_offset(kPrefixTokens));
  cpu::mlstm_recurrent(shape, x.q.data(), x.k.data(), x.v.data(), x.input_gate.data(), x.forget_gate.data(),
                       kPrefixTokens, cpu_state.view(), prefix_out.data());
  testing::DeviceMlstmState gpu_state(cpu_state);

  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v);
  auto out = poisoned<T>(x.q.size());
  std::vector<float> want(x.q.size(), 0.0f);
  for (int t = kPrefixTokens; t < x.n; ++t) {
    const cuda::MlstmDecodeArgs<T> args{.shape = shape, .gates = gates.projections(t), .q = q.data() + x.q_offset(t),
                                        .k = k.data() + x.kv_offset(t), .v = v.data() + x.kv_offset(t),
                                        .state = gpu_state.view(), .out = out.data() + x.q_offset(t), .mix = {}};
    cuda::mlstm_decode(args, nullptr);
    cpu::mlstm_recurrent(shape, x.q.data() + x.q_offset(t), x.k.data() + x.kv_offset(t), x.v.data() + x.kv_offset(t),
                         x.input_gate.data() + x.gate_offset(t), x.forget_gate.data() + x.gate_offset(t), 1,
                         cpu_state.view(), want.data() + x.q_offset(t));
  }
  testing::synchronize();
  const std::size_t from = x.q_offset(kPrefixTokens);
  static ErrorLog log{"mlstm decode, 300 steps (output error against its storage type's rounding)"};
  EXPECT_LE(log.add(testing::output_error<T>(
                testing::slice(testing::from_storage<T>(out.download()), from, x.q.size() - from),
                testing::slice(want, from, want.size() - from))),
            testing::output_tolerance<T>());
  EXPECT_LE(relative_error(gpu_state.matrix.download(), cpu_state.matrix), kTolerance);
  EXPECT_LE(relative_error(gpu_state.normalizer.download(), cpu_state.normalizer), kTolerance);
  EXPECT_LE(relative_error(gpu_state.stabilizer.download(), cpu_state.stabilizer), kDecodeStabilizerTolerance);
}

class MlstmDecode : public testing::CudaTest, public ::testing::WithParamInterface<MlstmDecodeCase> {};

TEST_P(MlstmDecode, StepsEqualTheCpuRecurrence) {
  mlstm_decode_case<__nv_bfloat16>(GetParam());
  mlstm_decode_case<__half>(GetParam());
  mlstm_decode_case<float>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlstmDecode, ::testing::ValuesIn(kMlstmDecodeCases),
                         [](const ::testing::TestParamInfo<MlstmDecodeCase>& info) {
                           const auto& s = info.param.shape;
                           return "Hq" + std::to_string(s.query_heads) + "_Hkv" + std::to_string(s.kv_heads) + "_S" +
                                  std::to_string(s.states) + "_d" + std::to_string(s.head_dim) + "_hidden" +
                                  std::to_string(info.param.hidden);
                         });

// =============================================================================================
// Linear attention and LoLCATs

struct LinearCase {
  int query_heads, kv_heads, head_dim;
  cpu::FeatureMap feature;
  int window;  // LoLCATs
};

std::string name_of(const LinearCase& c) {
  return std::string(c.feature == cpu::FeatureMap::Elu1 ? "elu1" : "hedgehog") + "_Hq" + std::to_string(c.query_heads) +
         "_Hkv" + std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_w" + std::to_string(c.window);
}

void PrintTo(const LinearCase& c, std::ostream* out) { *out << name_of(c); }

const LinearCase kLinearCases[] = {
    {32, 8, 128, cpu::FeatureMap::Elu1, 64},     {32, 8, 128, cpu::FeatureMap::Hedgehog, 64},
    {4, 4, 16, cpu::FeatureMap::Elu1, 16},       {8, 2, 24, cpu::FeatureMap::Hedgehog, 16},
    {6, 2, 48, cpu::FeatureMap::Elu1, 37},       {8, 2, 64, cpu::FeatureMap::Hedgehog, 5},
    {4, 1, 256, cpu::FeatureMap::Elu1, 24},      {4, 1, 256, cpu::FeatureMap::Hedgehog, 24},
    // paper-fig2: 16 KV heads, more clusters of 8 than the H200 runs at once for LoLCATs, whose
    // decode then takes clusters of 4 (one_wave_cluster_ranks).
    {16, 16, 64, cpu::FeatureMap::Hedgehog, 64},
    // LoLCATs' window pass holds the group's heads in registers, rounded up to 1, 2, 4 or 8:
    // groups of 2 and of 8 (the cases above have 1, 3 and 4).
    {4, 2, 32, cpu::FeatureMap::Hedgehog, 12},   {16, 2, 64, cpu::FeatureMap::Elu1, 20},
};

// Inputs of one linear/LoLCATs layer over n tokens. Scale 0.5 keeps elu1's e^x and the
// unnormalised sums of a growing state moderate.
struct LinearInputs {
  cpu::LinearShape shape;
  int n;
  std::vector<float> weight, window_factor, q, k, v;
  LinearInputs(const LinearCase& c, int tokens, std::mt19937& rng)
      : shape{c.query_heads, c.kv_heads, c.head_dim, c.feature},
        n(tokens),
        window_factor(testing::random_vector(c.query_heads, rng, 2.0f)),
        q(testing::random_vector(std::size_t(tokens) * c.query_heads * c.head_dim, rng, 0.5f)),
        k(testing::random_vector(std::size_t(tokens) * c.kv_heads * c.head_dim, rng, 0.5f)),
        v(testing::random_vector(std::size_t(tokens) * c.kv_heads * c.head_dim, rng)) {
    if (c.feature == cpu::FeatureMap::Hedgehog)
      weight = testing::random_vector(std::size_t(c.kv_heads) * c.head_dim * cpu::kHedgehogWidth, rng, 0.3f);
  }
  const float* w() const { return weight.empty() ? nullptr : weight.data(); }
  std::size_t q_offset(int t) const { return std::size_t(t) * shape.query_heads * shape.head_dim; }
  std::size_t kv_offset(int t) const { return std::size_t(t) * shape.kv_heads * shape.head_dim; }
};

class LinearKernels : public testing::CudaTest, public ::testing::WithParamInterface<LinearCase> {};

TEST_P(LinearKernels, DecodeStepsEqualTheCpuRecurrence) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + name_of(GetParam()));
  std::mt19937 rng(seed);
  const LinearInputs x(GetParam(), kPrefixTokens + kDecodeSteps, rng);
  std::vector<float> matrix(cpu::linear_matrix_floats(x.shape), 0.0f);
  std::vector<float> normalizer(cpu::linear_normalizer_floats(x.shape), 0.0f);
  std::vector<float> want(x.q.size(), 0.0f);
  cpu::linear_attention_recurrent(x.shape, x.w(), x.q.data(), x.k.data(), x.v.data(), kPrefixTokens,
                                  {matrix.data(), normalizer.data()}, want.data());
  auto gpu_matrix = on_device(matrix), gpu_normalizer = on_device(normalizer);
  const auto weight = on_device(x.weight.empty() ? std::vector<float>(1) : x.weight);
  const float* gpu_weight = x.weight.empty() ? nullptr : weight.data();
  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v);
  auto out = poisoned<float>(x.q.size());
  for (int t = kPrefixTokens; t < x.n; ++t) {
    cuda::linear_decode(x.shape, gpu_weight, q.data() + x.q_offset(t), k.data() + x.kv_offset(t),
                        v.data() + x.kv_offset(t), {gpu_matrix.data(), gpu_normalizer.data()},
                        out.data() + x.q_offset(t), nullptr);
    cpu::linear_attention_recurrent(x.shape, x.w(), x.q.data() + x.q_offset(t), x.k.data() + x.kv_offset(t),
                                    x.v.data() + x.kv_offset(t), 1, {matrix.data(), normalizer.data()},
                                    want.data() + x.q_offset(t));
  }
  testing::synchronize();
  const std::size_t from = x.q_offset(kPrefixTokens);
  static ErrorLog log{"linear decode, 300 steps"};
  EXPECT_LE(log.add(relative_error(testing::slice(out.download(), from, x.q.size() - from),
                                   testing::slice(want, from, want.size() - from))),
            kTolerance);
  EXPECT_LE(relative_error(gpu_matrix.download(), matrix), kTolerance);
  EXPECT_LE(relative_error(gpu_normalizer.download(), normalizer), kTolerance);
}

TEST_P(LinearKernels, PrefillEqualsTheCpuChunkwiseFormFromANonZeroState) {
  const unsigned seed = testing::fresh_seed();
  std::mt19937 rng(seed);
  static ErrorLog log{"linear prefill"};
  for (int n : {1, 7, 64, 100, 333}) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + name_of(GetParam()) + " n=" + std::to_string(n));
    const LinearInputs x(GetParam(), kPrefixTokens + n, rng);
    std::vector<float> matrix(cpu::linear_matrix_floats(x.shape), 0.0f);
    std::vector<float> normalizer(cpu::linear_normalizer_floats(x.shape), 0.0f);
    std::vector<float> want(x.q.size(), 0.0f);
    cpu::linear_attention_recurrent(x.shape, x.w(), x.q.data(), x.k.data(), x.v.data(), kPrefixTokens,
                                    {matrix.data(), normalizer.data()}, want.data());
    auto gpu_matrix = on_device(matrix), gpu_normalizer = on_device(normalizer);
    const std::size_t from = x.q_offset(kPrefixTokens), kv_from = x.kv_offset(kPrefixTokens);
    cpu::linear_attention_chunkwise(x.shape, x.w(), x.q.data() + from, x.k.data() + kv_from, x.v.data() + kv_from, n,
                                    64, {matrix.data(), normalizer.data()}, want.data() + from);

    const auto weight = on_device(x.weight.empty() ? std::vector<float>(1) : x.weight);
    const auto q = on_device(testing::slice(x.q, from, x.q.size() - from));
    const auto k = on_device(testing::slice(x.k, kv_from, x.k.size() - kv_from));
    const auto v = on_device(testing::slice(x.v, kv_from, x.v.size() - kv_from));
    DeviceBuffer<std::uint8_t> workspace(cuda::linear_prefill_workspace_bytes(x.shape, n));
    auto out = poisoned<float>(x.q.size() - from);
    cuda::linear_prefill(x.shape, x.weight.empty() ? nullptr : weight.data(), q.data(), k.data(), v.data(), n,
                         {gpu_matrix.data(), gpu_normalizer.data()}, out.data(), workspace.data(), nullptr);
    testing::synchronize();
    EXPECT_LE(log.add(relative_error(out.download(), testing::slice(want, from, want.size() - from))), kTolerance);
    EXPECT_LE(relative_error(gpu_matrix.download(), matrix), kTolerance);
    EXPECT_LE(relative_error(gpu_normalizer.download(), normalizer), kTolerance);
  }
}

// A LoLCATs state on both sides: the CPU's fp32 ring and linear state, the device's T ring.
template <typename T>
struct LolcatsStates {
  std::vector<float> keys, values, matrix, normalizer;
  std::int64_t tokens_seen = 0;
  DeviceBuffer<T> gpu_keys, gpu_values;
  DeviceBuffer<float> gpu_matrix, gpu_normalizer;
  DeviceBuffer<std::int64_t> gpu_tokens_seen;

  LolcatsStates(const cpu::LinearShape& shape, int window)
      : keys(cpu::lolcats_window_floats(shape, window), 0.0f),
        values(keys.size(), 0.0f),
        matrix(cpu::linear_matrix_floats(shape), 0.0f),
        normalizer(cpu::linear_normalizer_floats(shape), 0.0f),
        gpu_tokens_seen(1) {}
  cpu::LolcatsState cpu_view() {
    return {keys.data(), values.data(), {matrix.data(), normalizer.data()}, &tokens_seen};
  }
  void upload() {  // the CPU state, as the device keeps it
    gpu_keys = on_device(testing::to_storage<T>(keys));
    gpu_values = on_device(testing::to_storage<T>(values));
    gpu_matrix = on_device(matrix);
    gpu_normalizer = on_device(normalizer);
    set_tokens_seen(tokens_seen);
  }
  void set_tokens_seen(std::int64_t value) { gpu_tokens_seen.upload(std::span<const std::int64_t>(&value, 1)); }
  cuda::LolcatsDeviceState<T> gpu_view() {
    return {gpu_keys.data(), gpu_values.data(), {gpu_matrix.data(), gpu_normalizer.data()}, gpu_tokens_seen.data()};
  }
  void expect_same(double tolerance) {
    EXPECT_EQ(testing::from_storage<T>(gpu_keys.download()), keys);
    EXPECT_EQ(testing::from_storage<T>(gpu_values.download()), values);
    EXPECT_LE(relative_error(gpu_matrix.download(), matrix), tolerance);
    EXPECT_LE(relative_error(gpu_normalizer.download(), normalizer), tolerance);
  }
};

// LoLCATs inputs with k, v already as a T ring keeps them (both sides then see the same values).
template <typename T>
LinearInputs lolcats_inputs(const LinearCase& c, int tokens, std::mt19937& rng) {
  LinearInputs x(c, tokens, rng);
  x.k = testing::as_stored<T>(x.k);
  x.v = testing::as_stored<T>(x.v);
  return x;
}

template <typename T>
void lolcats_decode_case(const LinearCase& c, int prefix) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + name_of(c) + " " + testing::storage_name<T>() + " prefix " +
               std::to_string(prefix));
  std::mt19937 rng(seed);
  const LinearInputs x = lolcats_inputs<T>(c, prefix + kDecodeSteps, rng);
  LolcatsStates<T> state(x.shape, c.window);
  std::vector<float> want(x.q.size(), 0.0f);
  cpu::lolcats_prefill(x.shape, c.window, x.w(), x.window_factor.data(), x.q.data(), x.k.data(), x.v.data(), prefix,
                       state.cpu_view(), want.data());
  state.upload();
  const auto weight = on_device(x.weight.empty() ? std::vector<float>(1) : x.weight);
  const auto window_factor = on_device(x.window_factor);
  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v);
  auto out = poisoned<float>(x.q.size());
  for (int t = prefix; t < x.n; ++t) {
    state.set_tokens_seen(t);  // the caller advances the device counter between steps
    cuda::lolcats_decode<T>(x.shape, c.window, x.weight.empty() ? nullptr : weight.data(), window_factor.data(),
                            q.data() + x.q_offset(t), k.data() + x.kv_offset(t), v.data() + x.kv_offset(t),
                            state.gpu_view(), out.data() + x.q_offset(t), nullptr);
    cpu::lolcats_step_by_step(x.shape, c.window, x.w(), x.window_factor.data(), x.q.data() + x.q_offset(t),
                              x.k.data() + x.kv_offset(t), x.v.data() + x.kv_offset(t), 1, state.cpu_view(),
                              want.data() + x.q_offset(t));
  }
  testing::synchronize();
  const std::size_t from = x.q_offset(prefix);
  static ErrorLog log{"lolcats decode, 300 steps"};
  EXPECT_LE(log.add(relative_error(testing::slice(out.download(), from, x.q.size() - from),
                                   testing::slice(want, from, want.size() - from))),
            kTolerance);
  state.expect_same(kTolerance);
}

template <typename T>
void lolcats_prefill_case(const LinearCase& c) {
  const unsigned seed = testing::fresh_seed();
  std::mt19937 rng(seed);
  static ErrorLog log{"lolcats prefill"};
  // A prefix longer than the window (the ring has wrapped), then chunks of several sizes.
  const int prefix = 2 * c.window + 3;
  for (int n : {1, 7, 64, 100, 333}) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + name_of(c) + " " + testing::storage_name<T>() + " n=" +
                 std::to_string(n));
    const LinearInputs x = lolcats_inputs<T>(c, prefix + n, rng);
    LolcatsStates<T> state(x.shape, c.window);
    std::vector<float> want(x.q.size(), 0.0f);
    cpu::lolcats_prefill(x.shape, c.window, x.w(), x.window_factor.data(), x.q.data(), x.k.data(), x.v.data(), prefix,
                         state.cpu_view(), want.data());
    state.upload();
    const std::size_t from = x.q_offset(prefix), kv_from = x.kv_offset(prefix);
    cpu::lolcats_prefill(x.shape, c.window, x.w(), x.window_factor.data(), x.q.data() + from, x.k.data() + kv_from,
                         x.v.data() + kv_from, n, state.cpu_view(), want.data() + from);

    const auto weight = on_device(x.weight.empty() ? std::vector<float>(1) : x.weight);
    const auto window_factor = on_device(x.window_factor);
    const auto q = on_device(testing::slice(x.q, from, x.q.size() - from));
    const auto k = on_device(testing::slice(x.k, kv_from, x.k.size() - kv_from));
    const auto v = on_device(testing::slice(x.v, kv_from, x.v.size() - kv_from));
    DeviceBuffer<std::uint8_t> workspace(cuda::lolcats_prefill_workspace_bytes(x.shape, n));
    auto out = poisoned<float>(x.q.size() - from);
    cuda::lolcats_prefill<T>(x.shape, c.window, x.weight.empty() ? nullptr : weight.data(), window_factor.data(),
                             q.data(), k.data(), v.data(), n, state.gpu_view(), out.data(), workspace.data(), nullptr);
    testing::synchronize();
    EXPECT_LE(log.add(relative_error(out.download(), testing::slice(want, from, want.size() - from))), kTolerance);
    state.expect_same(kTolerance);
  }
}

TEST_P(LinearKernels, LolcatsDecodeStepsEqualTheCpuStepByStep) {
  lolcats_decode_case<__nv_bfloat16>(GetParam(), 0);  // from the empty ring
  lolcats_decode_case<float>(GetParam(), kPrefixTokens);
  lolcats_decode_case<__nv_bfloat16>(GetParam(), 3 * GetParam().window + 1);  // a wrapped ring
  lolcats_decode_case<__half>(GetParam(), 3 * GetParam().window + 1);
}

TEST_P(LinearKernels, LolcatsPrefillEqualsTheCpuPrefill) {
  lolcats_prefill_case<__nv_bfloat16>(GetParam());
  lolcats_prefill_case<__half>(GetParam());
  lolcats_prefill_case<float>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearKernels, ::testing::ValuesIn(kLinearCases),
                         [](const ::testing::TestParamInfo<LinearCase>& info) { return name_of(info.param); });

}  // namespace
}  // namespace bifocal
