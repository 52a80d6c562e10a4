// The mLSTM's chunk-parallel prefill (recurrent_chunkwise.cuh's mlstm_prefill) against the CPU
// recurrence on fresh random inputs (the seed is printed with any failure): n tokens (not a
// multiple of the chunk; 1; several chunks) from a non-zero state = cpu::mlstm_recurrent, outputs
// and the state the call leaves; under moderate and strong gates (ĩ up to ±15, forget gates near
// 1 and saturated), over a whole 4,096-token chunk of Qwen3-4B, and as two calls in a row against
// one call on the concatenation; with 3xTF32 products (fp32 models) and one TF32 pass (bf16/fp16).
// Shapes: head_dim 16 … 256, GQA 4:1 and 1:1, state=kv and state=q, Qwen3-4B's, a group of 16
// query heads per state (more than one register pass). Outputs are poisoned (0xFF = NaN), and each
// call runs after shared memory is poisoned (shared_memory_poison.h), so that an unwritten element
// or shared word read fails.
//
// Tolerances, relative ‖got − want‖/‖want‖ (the CPU computes in double; the states are fp32 on
// both sides): kTolerance 1e-5 for outputs and states (measured ≤ 1e-6); an output may also differ
// by what the fp32 inter-chunk state carries through a cancelling denominator, 8·2^-24·κ
// (largest_denominator_conditioning), when that is larger. The stabilizer m is stepped from double
// gates exactly as the CPU does: 1e-6. MlstmProducts::Tf32: the worst case of its roundings,
// output by output (rounding_error_bound), for the outputs and the state's C.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/mlstm.h"
#include "backend/cuda/device_properties.h"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "cuda/recurrent_test_support.h"
#include "cuda/shared_memory_poison.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::ErrorLog;
using testing::on_device;
using testing::poisoned;
using testing::relative_error;

constexpr double kTolerance = 1e-5;
constexpr double kStabilizerTolerance = 1e-6;
constexpr int kPrefixTokens = 20;  // tokens run on the CPU to make the starting state
// MlstmProducts::Tf32: every operand of the numerators' products is rounded to nearest TF32 (a
// relative 2^-11) once where it is staged. The deepest path rounds a term four times — k and v
// into ΔC̃, then q and C_c (or q and k into the score, the weighted score S' and v) — so a term is
// off by at most 4·2^-11 of itself, and the fp32 sums add (d + L)·2^-24 ≪ 2^-11: an output is off
// by at most kTf32TermError × the sum of its numerator's term magnitudes over its denominator
// (rounding_error_bound computes that sum exactly). A fixed bound does not hold: under strong gates
// one token can dominate both C and n, so that q̂ᵀC cancels along with q̂ᵀn (exact in double) and
// the rounding shows magnified (4.6e-3 norm-wise once, Hq 16, d 32). A missing or doubled
// contribution moves the outputs by O(1).
constexpr double kTf32TermError = 5 * 0x1p-11;
// MlstmProducts::Bf16 (the bf16 models' outputs kernel): q, k, v, C_c and S' rounded to bf16 (a
// relative 2^-8) once where they are staged, the contributions with w∘V in bf16 and k in TF32: a
// term is rounded at most four times at 2^-8 (q and C_c, whose terms carry one bf16 and one TF32
// rounding; or q and k, S' and v).
constexpr double kBf16TermError = 5 * 0x1p-8;
double term_error_of(cuda::MlstmProducts products) {
  return products == cuda::MlstmProducts::Bf16 ? kBf16TermError : kTf32TermError;
}
// The state's C, a sum of k_j (w∘v)_jᵀ terms: both operands in TF32 (2·2^-11, and 2^-11 for the
// fp32 sums and the scan), or w∘V in bf16 (Bf16: 2^-8 in place of one 2^-11).
double matrix_term_error_of(cuda::MlstmProducts products) {
  return products == cuda::MlstmProducts::Bf16 ? 0x1p-8 + 2 * 0x1p-11 : 3 * 0x1p-11;
}

// The chunkwise prefill (recurrent_chunkwise.cuh's mlstm_prefill, parallel over chunks): shapes.
struct MlstmCase {
  cpu::MlstmShape shape;
};
void PrintTo(const MlstmCase& c, std::ostream* out) { *out << testing::describe(c.shape); }

const MlstmCase kMlstmCases[] = {
    {{32, 8, 8, 128}},   // Qwen3-4B, state=kv: 4 query heads per state
    {{32, 8, 32, 128}},  // Qwen3-4B, state=q
    {{4, 4, 4, 16}},     // 1:1
    {{8, 2, 2, 24}},     {{6, 2, 2, 48}}, {{8, 2, 8, 64}},
    {{4, 1, 1, 256}},    // d = 256: chunks of 32 (64 in bf16 products)
    {{16, 1, 1, 32}},    // 16 query heads per state
};

// Gates of a prefill test. Moderate: MlstmSequence's (ĩ ~ N(0, 1), f̃ ~ N(2, 3)), the stabilizer
// small and often reset. Strong: input pre-activations ~ N(0, 20), so after the soft cap ĩ spreads
// over ±15 and m sits near 15, where the floor e^{−m} of the denominator no longer holds off a
// cancelling q̂ᵀn (the kernel's double normaliser path must); forget pre-activations uniform in
// [2, 40] (f ≥ 0.88: long memory; a third past the cap, logf ≈ −3e-7, which an fp32 m ≈ 15 does
// not resolve, so m stays put and must be stepped as the CPU steps it).
enum class Gates { Moderate, Strong };

const char* name_of(Gates gates) { return gates == Gates::Moderate ? "moderate gates" : "strong gates"; }

testing::MlstmSequence mlstm_sequence(const cpu::MlstmShape& shape, int tokens, Gates gates, std::mt19937& rng) {
  testing::MlstmSequence x(shape, tokens, rng);
  if (gates == Gates::Strong) {
    std::normal_distribution<float> input(0.0f, 20.0f);
    std::uniform_real_distribution<float> forget(2.0f, 40.0f);
    for (float& g : x.input_gate) g = input(rng);
    for (float& g : x.forget_gate) g = forget(rng);
  }
  return x;
}

// How much the mLSTM output's denominator amplifies a relative error of the state: per token and
// query head κ = Σ_j |q̂_j n_j| / (max(|q̂ᵀn|, e^{−m}) + 1e-6) (DESIGN.md mlstm), the largest over
// tokens first … first + n − 1, stepping a copy of `state` through them on the CPU. The GPU prefill
// carries the state from chunk to chunk in fp32 (2^-24 relative per element) where the CPU keeps
// double, so a cancelling q̂ᵀn under strong gates moves the output by ~2^-24·κ: a seed once gave
// 1.4e-5 at n = 100, d = 256 (two chunks).
// h_t's denominator for query head h, max(|q̂ᵀn|, e^{−m}) + 1e-6 (DESIGN.md mlstm) from `state`
// after token t, and the sum of the magnitudes of q̂ᵀn's terms, Σ_j |q̂_j n_j|.
struct Denominator {
  double value, term_magnitudes;
};
Denominator denominator_of(const cpu::MlstmShape& shape, const testing::MlstmSequence& x, int t, int h,
                           const testing::HostMlstmState& state) {
  const int d = shape.head_dim, s = h / (shape.query_heads / shape.states);  // the state head h reads
  const double query_scale = 1.0 / std::sqrt(double(d));                   // q̂ = q/√d
  double dot = 0, magnitudes = 0;
  for (int j = 0; j < d; ++j) {
    const double term = query_scale * x.q[x.q_offset(t) + std::size_t(h) * d + j] * state.normalizer[std::size_t(s) * d + j];
    dot += term;
    magnitudes += std::abs(term);
  }
  return {std::max(std::abs(dot), std::exp(-double(state.stabilizer[s]))) + 1e-6, magnitudes};
}

// Steps `state` through token t of x (its outputs to `out`, [Hq, d]).
void step(const cpu::MlstmShape& shape, const testing::MlstmSequence& x, int t, testing::HostMlstmState& state,
          std::vector<float>& out) {
  cpu::mlstm_recurrent(shape, x.q.data() + x.q_offset(t), x.k.data() + x.kv_offset(t), x.v.data() + x.kv_offset(t),
                       x.input_gate.data() + x.gate_offset(t), x.forget_gate.data() + x.gate_offset(t), 1,
                       state.view(), out.data());
}

double largest_denominator_conditioning(const cpu::MlstmShape& shape, const testing::MlstmSequence& x, int first,
                                        int n, testing::HostMlstmState state) {
  std::vector<float> ignored(std::size_t(shape.query_heads) * shape.head_dim);
  double largest = 1;
  for (int t = first; t < first + n; ++t) {
    step(shape, x, t, state, ignored);
    for (int h = 0; h < shape.query_heads; ++h) {
      const Denominator denominator = denominator_of(shape, x, t, h, state);
      largest = std::max(largest, denominator.term_magnitudes / denominator.value);
    }
  }
  return largest;
}

// The one-pass products' error bounds, relative and norm-wise as relative_error measures them. An mLSTM
// over |q|, |k|, |v| with the same gates (so the same stabilizer m, and every term positive) has
// the state |C| whose entries are the sums of the magnitudes of the terms that make C's, so
// |q̂|ᵀ|C|_τ is the sum of the magnitudes of h_τ's numerator terms. Output bound: term_error ×
// that / h_τ's denominator (from the actual state), per output; state bound: matrix_term_error
// × |C| at the end. `absolute` is x with |q|, |k|, |v|; `state` and `magnitudes` the
// actual and the |·| states entering token `first`; `want` the CPU outputs from token `first` on.
struct RoundingBounds {
  double outputs, matrix;
};
RoundingBounds rounding_error_bound(const cpu::MlstmShape& shape, const testing::MlstmSequence& x,
                                    const testing::MlstmSequence& absolute, int first, int n,
                                    testing::HostMlstmState state, testing::HostMlstmState magnitudes,
                                    std::span<const float> want, double term_error, double matrix_term_error) {
  const int d = shape.head_dim;
  std::vector<float> ignored(std::size_t(shape.query_heads) * d), magnitude_out(ignored.size());
  double bound_squares = 0, want_squares = 0;
  for (int t = first; t < first + n; ++t) {
    step(shape, x, t, state, ignored);
    step(shape, absolute, t, magnitudes, magnitude_out);
    for (int h = 0; h < shape.query_heads; ++h) {
      const double denominator = denominator_of(shape, x, t, h, state).value;
      // the |·| run's own denominator (same m: the gates are x's), which magnitude_out divides by
      const double magnitude_denominator = denominator_of(shape, absolute, t, h, magnitudes).value;
      for (int b = 0; b < d; ++b) {  // magnitude_out = |q̂|ᵀ|C| / its own denominator
        const std::size_t at = std::size_t(h) * d + b;
        const double bound = term_error * magnitude_out[at] * magnitude_denominator / denominator;
        const double w = want[std::size_t(t - first) * shape.query_heads * d + at];
        bound_squares += bound * bound, want_squares += w * w;
      }
    }
  }
  double matrix_bound_squares = 0, matrix_squares = 0;
  for (std::size_t i = 0; i < state.matrix.size(); ++i) {
    const double bound = matrix_term_error * magnitudes.matrix[i];
    matrix_bound_squares += bound * bound, matrix_squares += double(state.matrix[i]) * state.matrix[i];
  }
  return {std::sqrt(bound_squares / want_squares), std::sqrt(matrix_bound_squares / matrix_squares)};
}

// n tokens from a non-zero state (kPrefixTokens run on the CPU): the GPU prefill — one call, or two
// calls split after `split` tokens — against cpu::mlstm_recurrent over the n tokens in one call
// (C, n carried in double, rounded once): outputs, and the state the calls leave.
void expect_prefill_equals_recurrence(const cpu::MlstmShape& shape, int n, Gates gates, int split, std::mt19937& rng,
                                      ErrorLog& log, cuda::MlstmProducts products = cuda::MlstmProducts::Fp32) {
  const testing::MlstmSequence x = mlstm_sequence(shape, kPrefixTokens + n, gates, rng);
  testing::HostMlstmState cpu_state(shape);
  std::vector<float> out_cpu(x.q.size());
  cpu::mlstm_recurrent(shape, x.q.data(), x.k.data(), x.v.data(), x.input_gate.data(), x.forget_gate.data(),
                       kPrefixTokens, cpu_state.view(), out_cpu.data());
  testing::DeviceMlstmState gpu_state(cpu_state);
  const testing::HostMlstmState entering = cpu_state;

  const std::size_t from = x.q_offset(kPrefixTokens), outputs = x.q.size() - from;
  const std::size_t kv_from = x.kv_offset(kPrefixTokens), gates_from = x.gate_offset(kPrefixTokens);
  // kTolerance, or the error the fp32 state may carry through a cancelling denominator (8·2^-24·κ:
  // the numerator's own cancellation and a rounding per chunk boundary), whichever is larger.
  const double conditioning = largest_denominator_conditioning(shape, x, kPrefixTokens, n, cpu_state);
  double output_tolerance = std::max(kTolerance, 8 * 0x1p-24 * conditioning), matrix_tolerance = kTolerance;
  cpu::mlstm_recurrent(shape, x.q.data() + from, x.k.data() + kv_from, x.v.data() + kv_from,
                       x.input_gate.data() + gates_from, x.forget_gate.data() + gates_from, n, cpu_state.view(),
                       out_cpu.data() + from);
  if (products != cuda::MlstmProducts::Fp32) {  // the |·| state after the prefix, then the bounds
    testing::MlstmSequence magnitudes = x;
    for (auto* values : {&magnitudes.q, &magnitudes.k, &magnitudes.v})
      for (float& value : *values) value = std::abs(value);
    testing::HostMlstmState magnitude_state(shape);
    std::vector<float> ignored(x.q.size());
    cpu::mlstm_recurrent(shape, magnitudes.q.data(), magnitudes.k.data(), magnitudes.v.data(),
                         x.input_gate.data(), x.forget_gate.data(), kPrefixTokens, magnitude_state.view(),
                         ignored.data());
    const RoundingBounds bounds = rounding_error_bound(shape, x, magnitudes, kPrefixTokens, n, entering, magnitude_state,
                                                       std::span<const float>(out_cpu).subspan(from),
                                                       term_error_of(products), matrix_term_error_of(products));
    output_tolerance = std::max(output_tolerance, bounds.outputs);
    matrix_tolerance = bounds.matrix;
  }

  const auto q = on_device(testing::slice(x.q, from, outputs));
  const auto k = on_device(testing::slice(x.k, kv_from, x.k.size() - kv_from));
  const auto v = on_device(testing::slice(x.v, kv_from, x.v.size() - kv_from));
  const std::size_t gate_count = std::size_t(n) * shape.states;
  const auto input_gate = on_device(testing::slice(x.input_gate, gates_from, gate_count));
  const auto forget_gate = on_device(testing::slice(x.forget_gate, gates_from, gate_count));
  auto out = poisoned<float>(outputs);
  // Sized for all n tokens, it serves the shorter calls too; poisoned, so that nothing is read
  // before this call writes it.
  auto workspace = poisoned<std::uint8_t>(cuda::mlstm_prefill_workspace_bytes(shape, n, products));
  const auto run = [&](int begin, int count) {
    testing::poison_shared_memory();  // an unwritten shared word read by the kernels is then NaN
    const cuda::MlstmGateInputs gates{input_gate.data() + x.gate_offset(begin),
                                      forget_gate.data() + x.gate_offset(begin), shape.states};
    cuda::mlstm_prefill(shape, q.data() + x.q_offset(begin), k.data() + x.kv_offset(begin),
                        v.data() + x.kv_offset(begin), gates, count, gpu_state.view(), out.data() + x.q_offset(begin),
                        products, workspace.data(), nullptr);
  };
  if (split > 0 && split < n) {
    run(0, split);
    run(split, n - split);
  } else {
    run(0, n);
  }
  testing::synchronize();
  const double output_error = relative_error(out.download(), testing::slice(out_cpu, from, outputs));
  EXPECT_LE(log.add(output_error), output_tolerance) << "denominator conditioning κ " << conditioning;
  static ErrorLog margin{"mlstm prefill, error / its tolerance"};
  margin.add(output_error / output_tolerance);
  EXPECT_LE(relative_error(gpu_state.matrix.download(), cpu_state.matrix), matrix_tolerance);
  EXPECT_LE(relative_error(gpu_state.normalizer.download(), cpu_state.normalizer), kTolerance);
  EXPECT_LE(relative_error(gpu_state.stabilizer.download(), cpu_state.stabilizer), kStabilizerTolerance);
}

class MlstmKernels : public testing::CudaTest, public ::testing::WithParamInterface<MlstmCase> {};

// expect_prefill_equals_recurrence for both gate regimes × `lengths`, in one call each, from a
// fresh seed (printed with a failure).
void expect_prefill_equals_recurrence_for(const cpu::MlstmShape& shape, std::initializer_list<int> lengths,
                                          ErrorLog& log, cuda::MlstmProducts products) {
  const unsigned seed = testing::fresh_seed();
  std::mt19937 rng(seed);
  for (const Gates gates : {Gates::Moderate, Gates::Strong})
    for (int n : lengths) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape) + " n=" + std::to_string(n) + " " +
                   name_of(gates));
      expect_prefill_equals_recurrence(shape, n, gates, 0, rng, log, products);
    }
}

// One chunk or less (1, 7, 64 = L), several with a partial last one (100, 333), both gate regimes.
TEST_P(MlstmKernels, PrefillEqualsTheCpuRecurrenceFromANonZeroState) {
  static ErrorLog log{"mlstm prefill"};
  expect_prefill_equals_recurrence_for(GetParam().shape, {1, 7, 64, 100, 333}, log, cuda::MlstmProducts::Fp32);
}

// Consecutive calls continue one sequence: 77 then 223 tokens (neither a multiple of the chunk)
// equal 300 in one call. Moderate gates: the state is rounded to fp32 between the calls, which a
// cancelling q̂ᵀn under strong gates would magnify past the tolerance (tests/mlstm_test.cpp).
TEST_P(MlstmKernels, TwoCallsEqualOneCallOnTheConcatenation) {
  const cpu::MlstmShape shape = GetParam().shape;
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape));
  std::mt19937 rng(seed);
  static ErrorLog log{"mlstm prefill, two calls"};
  expect_prefill_equals_recurrence(shape, 300, Gates::Moderate, 77, rng, log);
}

// One TF32 pass (the bf16 and fp16 models' prefill): within rounding_error_bound of the same CPU
// recurrence, both gate regimes, one chunk or less and several, after shared memory is poisoned
// (C_c resident at d = 64 and 128, streamed otherwise); the state's n and m are the
// normaliser path's and the stabilizer chain's, unchanged, so they keep the fp32 bounds.
TEST_P(MlstmKernels, Tf32ProductsStayWithinTf32RoundingOfTheCpuRecurrence) {
  static ErrorLog log{"mlstm prefill, one TF32 pass"};
  expect_prefill_equals_recurrence_for(GetParam().shape, {7, 64, 333}, log, cuda::MlstmProducts::Tf32);
}

// bf16 products (the bf16 models' outputs kernel where the shape has it: L = 64, d a multiple of
// 32 up to 128, or 256 in two blocks of 128 value columns; the others run the TF32 one): within
// the bf16 rounding bound, as above.
TEST_P(MlstmKernels, Bf16ProductsStayWithinBf16RoundingOfTheCpuRecurrence) {
  static ErrorLog log{"mlstm prefill, bf16 products"};
  expect_prefill_equals_recurrence_for(GetParam().shape, {7, 64, 333}, log, cuda::MlstmProducts::Bf16);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlstmKernels, ::testing::ValuesIn(kMlstmCases),
                         [](const ::testing::TestParamInfo<MlstmCase>& info) {
                           const auto& s = info.param.shape;
                           return "Hq" + std::to_string(s.query_heads) + "_Hkv" + std::to_string(s.kv_heads) + "_S" +
                                  std::to_string(s.states) + "_d" + std::to_string(s.head_dim);
                         });

// A whole 4,096-token prefill chunk of Qwen3-4B (64 chunks of 64: the scan and the stabilizer
// chain over many chunks), state=kv and state=q, both gate regimes; and the same chunk in two calls.
TEST(MlstmPrefill, Qwen3FourBChunkOf4096TokensEqualsTheCpuRecurrence) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const unsigned seed = testing::fresh_seed();
  std::mt19937 rng(seed);
  static ErrorLog log{"mlstm prefill, 4,096 tokens"};
  for (const cpu::MlstmShape shape : {cpu::MlstmShape{32, 8, 8, 128}, cpu::MlstmShape{32, 8, 32, 128}}) {
    for (const Gates gates : {Gates::Moderate, Gates::Strong}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape) + " " + name_of(gates));
      expect_prefill_equals_recurrence(shape, 4096, gates, 0, rng, log);
    }
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape) + " two calls, 1,000 + 3,096");
    expect_prefill_equals_recurrence(shape, 4096, Gates::Moderate, 1000, rng, log);
    SCOPED_TRACE("one TF32 pass, strong gates");
    static ErrorLog tf32_log{"mlstm prefill, 4,096 tokens, one TF32 pass"};
    expect_prefill_equals_recurrence(shape, 4096, Gates::Strong, 0, rng, tf32_log, cuda::MlstmProducts::Tf32);
    SCOPED_TRACE("bf16 products, strong gates");
    static ErrorLog bf16_log{"mlstm prefill, 4,096 tokens, bf16 products"};
    expect_prefill_equals_recurrence(shape, 4096, Gates::Strong, 0, rng, bf16_log, cuda::MlstmProducts::Bf16);
  }
}

// A whole 4,096-token chunk of the Qwen3.5-4B-like shape in bf16 products (d = 256: chunks of 64,
// each computed by two blocks of 128 value columns), both gate regimes, and in two calls.
TEST(MlstmPrefill, Qwen35LikeChunkOf4096TokensInBf16ProductsStaysWithinBf16Rounding) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const unsigned seed = testing::fresh_seed();
  std::mt19937 rng(seed);
  static ErrorLog log{"mlstm prefill, 4,096 tokens, d = 256, bf16 products"};
  const cpu::MlstmShape shape{16, 4, 4, 256};
  for (const Gates gates : {Gates::Moderate, Gates::Strong}) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape) + " " + name_of(gates));
    expect_prefill_equals_recurrence(shape, 4096, gates, 0, rng, log, cuda::MlstmProducts::Bf16);
  }
  SCOPED_TRACE("seed " + std::to_string(seed) + " two calls, 1,000 + 3,096");
  expect_prefill_equals_recurrence(shape, 4096, Gates::Moderate, 1000, rng, log, cuda::MlstmProducts::Bf16);
}

// The denominators kernel in two blocks a (state, chunk) where twice its blocks fit one an SM, and
// in one block where they do not (mlstm_prefill_denominator_parts), at the Qwen3.5-like shape (d =
// 256) in bf16 products. The lengths follow this GPU's SM count, so that both plans run on any GPU:
// the most chunks of 64 that fit the plan, the last one partial. Qwen3-4B's shape (d = 128) keeps one
// part at the length where its halves would fit.
TEST(MlstmPrefill, DenominatorsInOneAndTwoPartsStayWithinBf16Rounding) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const unsigned seed = testing::fresh_seed();
  std::mt19937 rng(seed);
  static ErrorLog log{"mlstm prefill, the denominators in one and two parts"};
  const auto products = cuda::MlstmProducts::Bf16;
  const int multiprocessors = cuda::multiprocessor_count();
  const auto length = [&](const cpu::MlstmShape& shape, int parts) {  // 0: too few SMs for two chunks
    const int chunks = multiprocessors / (parts * shape.states);
    return chunks < 2 ? 0 : chunks * 64 - 23;
  };
  const cpu::MlstmShape qwen3{32, 8, 8, 128}, qwen35_like{16, 4, 4, 256};
  if (length(qwen35_like, 2) == 0 || length(qwen3, 2) == 0) GTEST_SKIP() << multiprocessors << " SMs: too few";
  EXPECT_EQ(cuda::mlstm_prefill_denominator_parts(qwen3, length(qwen3, 2), products), 1);
  for (const int parts : {2, 1}) {
    const int n = length(qwen35_like, parts);
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(qwen35_like) + " n=" + std::to_string(n));
    ASSERT_EQ(cuda::mlstm_prefill_denominator_parts(qwen35_like, n, products), parts);
    for (const Gates gates : {Gates::Moderate, Gates::Strong}) {
      SCOPED_TRACE(name_of(gates));
      expect_prefill_equals_recurrence(qwen35_like, n, gates, 0, rng, log, products);
    }
  }
}

// The mixers' calls: the gates in rows of a token's [input | forget | mix] pre-activations, and the
// outputs in the model's bf16 or fp16. The same call on gates of their own with fp32 outputs is
// the reference: the narrow outputs are its outputs rounded to nearest, bit for bit, and the
// states the same bits (the kernels compute the same values; only the store differs).
template <typename Out>
void expect_strided_gates_and_narrow_outputs_round_the_float_call(const cpu::MlstmShape& shape, int n,
                                                                  std::mt19937& rng) {
  const testing::MlstmSequence x = mlstm_sequence(shape, n, Gates::Moderate, rng);
  const int S = shape.states, stride = 2 * S + shape.query_heads;
  std::vector<float> rows(std::size_t(n) * stride);
  std::normal_distribution<float> unread(0.0f, 50.0f);  // the mix columns: read, they would show
  for (int j = 0; j < n; ++j)
    for (int column = 0; column < stride; ++column)
      rows[std::size_t(j) * stride + column] = column < S       ? x.input_gate[x.gate_offset(j) + column]
                                               : column < 2 * S ? x.forget_gate[x.gate_offset(j) + column - S]
                                                                : unread(rng);
  testing::HostMlstmState start(shape);
  for (float& value : start.matrix) value = unread(rng) / 500;
  testing::DeviceMlstmState reference_state(start), state(start);
  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v);
  const auto input_gate = on_device(x.input_gate), forget_gate = on_device(x.forget_gate);
  const auto gate_rows = on_device(rows);
  auto reference = poisoned<float>(x.q.size());
  auto out = testing::upload(std::vector<Out>(x.q.size()));
  const auto products = cuda::MlstmProducts::Tf32;  // the fp16 models' pass
  auto workspace = poisoned<std::uint8_t>(cuda::mlstm_prefill_workspace_bytes(shape, n, products));
  cuda::mlstm_prefill(shape, q.data(), k.data(), v.data(), {input_gate.data(), forget_gate.data(), S}, n,
                      reference_state.view(), reference.data(), products, workspace.data(), nullptr);
  cuda::mlstm_prefill(shape, q.data(), k.data(), v.data(), {gate_rows.data(), gate_rows.data() + S, stride}, n,
                      state.view(), out.data(), products, workspace.data(), nullptr);
  testing::synchronize();
  EXPECT_EQ(testing::download_floats(out), testing::as_stored<Out>(reference.download()));
  EXPECT_EQ(state.matrix.download(), reference_state.matrix.download());
  EXPECT_EQ(state.normalizer.download(), reference_state.normalizer.download());
  EXPECT_EQ(state.stabilizer.download(), reference_state.stabilizer.download());
}

TEST_P(MlstmKernels, StridedGatesAndNarrowOutputsRoundTheFloatCallsOutputs) {
  const cpu::MlstmShape shape = GetParam().shape;
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + testing::describe(shape));
  std::mt19937 rng(seed);
  for (int n : {7, 150}) {
    SCOPED_TRACE("n " + std::to_string(n));
    expect_strided_gates_and_narrow_outputs_round_the_float_call<__nv_bfloat16>(shape, n, rng);
    expect_strided_gates_and_narrow_outputs_round_the_float_call<__half>(shape, n, rng);
  }
}

// The gate rows: the input and forget gates' shorter than the state heads, Bifocal's mix gates'
// (MlstmOutputMix) shorter than the query heads; rounded keys without rounded values.
TEST(MlstmPrefillArguments, BadGateStridesAndABranchWithoutAMixAreRefusedByName) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const cpu::MlstmShape shape{8, 2, 2, 16};
  const int n = 4;
  auto workspace = poisoned<std::uint8_t>(cuda::mlstm_prefill_workspace_bytes(shape, n, cuda::MlstmProducts::Tf32));
  auto buffer = on_device(std::vector<float>(std::size_t(n) * shape.query_heads * shape.head_dim));
  testing::HostMlstmState host(shape);
  testing::DeviceMlstmState state(host);
  testing::expect_error(
      [&] {
        cuda::mlstm_prefill(shape, buffer.data(), buffer.data(), buffer.data(), {buffer.data(), buffer.data(), 1}, n,
                            state.view(), buffer.data(), cuda::MlstmProducts::Tf32, workspace.data(), nullptr);
      },
      {"mlstm_prefill", "gate stride 1", "2 state heads"});
  testing::expect_error(
      [&] {
        cuda::mlstm_prefill(shape, buffer.data(), buffer.data(), buffer.data(), {buffer.data(), buffer.data(), 2}, n,
                            state.view(), buffer.data(), cuda::MlstmProducts::Tf32, workspace.data(), nullptr,
                            {.gate = buffer.data(), .gate_stride = 7});
      },
      {"mlstm_prefill", "mix gate stride 7", "8 query heads"});
  // A window branch writes the window's share of a mix, (1 − o)·window, so it needs the mix's gate.
  bool launched = false;
  testing::expect_error(
      [&] {
        cuda::mlstm_prefill(shape, buffer.data(), buffer.data(), buffer.data(), {buffer.data(), buffer.data(), 2}, n,
                            state.view(), buffer.data(), cuda::MlstmProducts::Tf32, workspace.data(), nullptr, {},
                            [&](const cuda::PrefillMlstmOutputs&) {
                              launched = true;
                              return false;
                            });
      },
      {"mlstm_prefill", "window branch without a mix gate"});
  EXPECT_FALSE(launched);
  // The gathered bf16 keys and values (MlstmRoundedKeyValues) come as a pair.
  const auto rounded = on_device(std::vector<__nv_bfloat16>(std::size_t(n) * shape.kv_heads * shape.head_dim));
  testing::expect_error(
      [&] {
        cuda::mlstm_prefill(shape, buffer.data(), buffer.data(), buffer.data(), {buffer.data(), buffer.data(), 2}, n,
                            state.view(), buffer.data(), cuda::MlstmProducts::Tf32, workspace.data(), nullptr, {}, {},
                            {}, {.keys = rounded.data()});
      },
      {"mlstm_prefill", "rounded keys without rounded values"});
}

}  // namespace
}  // namespace bifocal
