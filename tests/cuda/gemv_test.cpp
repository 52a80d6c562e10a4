// The CUDA matrix products against a double-precision CPU reference (reference::matmul) on the
// very values the device holds: decode gemv and the fused gate/up SwiGLU gemv (gemv.cuh), and the
// cuBLAS prefill gemm (gemm.h). Fresh random inputs each run (the seed is printed with any
// failure), bf16, fp16 and fp32 weight storage, shapes from odd tiny ones (scalar tail path, partial
// warps) to Qwen3-4B's, and the LM head. Outputs are poisoned (0xFF: NaN) before each product
// that overwrites them. Tolerances: fp32 outputs 1e-5 for gemv (fp32 accumulation of exact
// products, measured ≤ 4e-7) and 1e-4 for cuBLAS (whose summation order and split we do not
// control); 16-bit outputs 5e-3 (one rounding, ≤ 2⁻⁸ relative per element for bf16, 2⁻¹¹ fp16).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.cuh"
#include "bifocal/error.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::SeededCudaTest;
using testing::StorageTypeNames;
using testing::StorageTypes;
using testing::random_vector;
using testing::as_stored;
using testing::relative_error;
using testing::to_storage;
using testing::download_floats;
using testing::upload;

constexpr double kGemvTolerance = 1e-5;
constexpr double kCublasTolerance = 1e-4;
constexpr double kBf16Tolerance = 5e-3;
// Four products deep with float intermediates: each one's rounding is carried into the next.
constexpr double kChainTolerance = 1e-4;

// Random weights bf16 holds exactly — a random sign, exponent in [−8, −1] and 7-bit mantissa,
// so |w| in [2⁻⁸, 1) — made from raw generator bits, two per 32-bit draw: the LM head needs 389 M
// of them, and a normal draw per value would take many seconds. Every storage type then holds
// the same values (fp16 too: its normal range starts at 2⁻¹⁴, its significand has 10 bits).
std::vector<float> bf16_exact_weights(std::size_t size, std::mt19937& rng) {
  std::vector<float> weights(size);
  for (std::size_t i = 0; i < size; i += 2) {
    const std::uint32_t draw = rng();
    for (std::size_t half = 0; half < 2 && i + half < size; ++half) {
      const std::uint32_t bits = draw >> (16 * half);
      const std::uint32_t sign = (bits & 1u) << 31, exponent = 126u - ((bits >> 1) & 7u),
                          mantissa = ((bits >> 4) & 0x7Fu) << 16;
      weights[i + half] = std::bit_cast<float>(sign | exponent << 23 | mantissa);
    }
  }
  return weights;
}

std::vector<float> plus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> sum(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  return sum;
}

// The error of an accumulated out = residual + added, against the size of its two terms: a sum
// can cancel (a lone row is one number), and float rounding is relative to the terms, not to the
// sum — ‖got − want‖ / ‖want‖ failed a correct kernel at 6e-5 on one such row (k 33, m 1).
double accumulate_error(const std::vector<float>& got, const std::vector<float>& residual,
                        const std::vector<float>& added) {
  const std::vector<float> want = plus(residual, added);
  double difference = 0, residual_norm = 0, added_norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    difference += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    residual_norm += double(residual[i]) * residual[i];
    added_norm += double(added[i]) * added[i];
  }
  return std::sqrt(difference) / (std::sqrt(residual_norm) + std::sqrt(added_norm));
}

// out[r, c] = product[r, c] + bias[c]
std::vector<float> plus_bias(const std::vector<float>& product, const std::vector<float>& bias) {
  std::vector<float> sum(product.size());
  for (std::size_t i = 0; i < product.size(); ++i) sum[i] = product[i] + bias[i % bias.size()];
  return sum;
}

struct Shape {
  int m, k;
};

template <typename T>
std::string type_name() {
  return StorageTypeNames::GetName<T>(0);
}

// Odd sizes (k % 8 ≠ 0: the scalar loop; m not a multiple of the rows per block: idle warps;
// m = 8193: two rows per warp with a lone last row), then Qwen3-4B's q, k/v, o and down.
const Shape kSmallShapes[] = {{1, 1}, {3, 5}, {7, 33}, {17, 64}, {31, 96}, {100, 128}, {37, 1000}, {5, 1001}, {8193, 24}};
// gemv.cu's launch variants at 16 bits: deep loads for one wave of blocks ({1024, 2560}, {2560, 4096},
// {2560, 9728}, the small shapes), the plain 8-warp kernel ({4096, 2560}: 512 blocks; {8193, 24}:
// warps of 48 bytes) and 2-warp blocks past one wave of 8-warp blocks (the LM head, the shared-input
// and gate/up products of 6,144 and 9,728 rows).
const Shape kQwen3Shapes[] = {{4096, 2560}, {1024, 2560}, {2560, 4096}, {2560, 9728}};

std::string describe(const Shape& s) { return "m " + std::to_string(s.m) + ", k " + std::to_string(s.k); }

// gemv<T, XT> on one shape, three ways: with a bias, without, and accumulating (with the bias)
// into a random residual. x is not rounded for XT = float, so a float path that rounded x would
// show. x_offset shifts x and W off their 16-byte alignment (the scalar fallback).
template <typename T, typename XT>
void check_gemv(const Shape& shape, std::mt19937& rng, testing::ErrorLog& log, int x_offset = 0, int w_offset = 0) {
  const auto [m, k] = shape;
  SCOPED_TRACE(describe(shape) + ", x " + type_name<XT>());
  const auto weight = bf16_exact_weights(std::size_t(m) * k, rng);
  const auto bias = bf16_exact_weights(m, rng);
  const auto x = random_vector(k, rng);
  const auto residual = random_vector(m, rng);
  const auto product = reference::matmul(as_stored<XT>(x), weight, {}, 1, k, m);

  std::vector<float> padded_weight(w_offset, 0.0f), padded_x(x_offset, 0.0f);
  padded_weight.insert(padded_weight.end(), weight.begin(), weight.end());
  padded_x.insert(padded_x.end(), x.begin(), x.end());
  const auto device_weight = upload(to_storage<T>(padded_weight));
  const auto device_x = upload(to_storage<XT>(padded_x));
  const auto device_bias = upload(to_storage<T>(bias));
  const T* w = device_weight.data() + w_offset;
  const XT* x_in = device_x.data() + x_offset;
  DeviceBuffer<float> out(m);

  out.fill_bytes(0xFF);
  cuda::gemv(w, x_in, device_bias.data(), m, k, out.data(), false, nullptr);
  EXPECT_LT(log.add(relative_error(out.download(), plus_bias(product, bias))), kGemvTolerance) << "with bias";

  out.fill_bytes(0xFF);
  cuda::gemv(w, x_in, static_cast<const T*>(nullptr), m, k, out.data(), false, nullptr);
  EXPECT_LT(log.add(relative_error(out.download(), product)), kGemvTolerance) << "no bias";

  out.upload(residual);
  cuda::gemv(w, x_in, device_bias.data(), m, k, out.data(), true, nullptr);
  EXPECT_LT(log.add(accumulate_error(out.download(), residual, plus_bias(product, bias))), kGemvTolerance)
      << "accumulate";
}

// gemv_shared_input<T, XT>: several products of one x in one launch (a layer's q, k and v), the
// second without a bias (a mix the kernel must keep apart), into poisoned or residual outputs.
template <typename T, typename XT>
void check_shared_input(const std::vector<int>& rows, int k, bool accumulate, std::mt19937& rng,
                        testing::ErrorLog& log) {
  SCOPED_TRACE("k " + std::to_string(k) + (accumulate ? ", accumulate" : "") +
               ", x " + type_name<XT>());
  const auto x = random_vector(k, rng);
  const auto device_x = upload(to_storage<XT>(x));
  std::vector<std::vector<float>> residuals, added;
  std::vector<DeviceBuffer<T>> weights, biases;
  std::vector<DeviceBuffer<float>> outs;
  std::vector<cuda::GemvProduct<T>> products;
  for (std::size_t p = 0; p < rows.size(); ++p) {
    const int m = rows[p];
    const bool with_bias = p != 1;
    const auto weight = bf16_exact_weights(std::size_t(m) * k, rng);
    const auto bias = bf16_exact_weights(m, rng);
    const auto residual = random_vector(m, rng);
    auto result = reference::matmul(as_stored<XT>(x), weight, {}, 1, k, m);
    if (with_bias) result = plus_bias(result, bias);
    residuals.push_back(residual);
    added.push_back(result);
    weights.push_back(upload(to_storage<T>(weight)));
    biases.push_back(upload(to_storage<T>(bias)));
    outs.emplace_back(m);
    if (accumulate)
      outs.back().upload(residual);
    else
      outs.back().fill_bytes(0xFF);
    products.push_back({weights.back().data(), with_bias ? biases.back().data() : nullptr, m, outs.back().data()});
  }
  cuda::gemv_shared_input<T, XT>(products, device_x.data(), k, accumulate, nullptr);
  for (std::size_t p = 0; p < rows.size(); ++p) {
    const auto got = outs[p].download();
    const double error = accumulate ? accumulate_error(got, residuals[p], added[p]) : relative_error(got, added[p]);
    EXPECT_LT(log.add(error), kGemvTolerance) << "product " << p;
  }
}

// The relative error an output stored in OutT may carry: kBf16Tolerance of its norm, and for fp16
// the subnormals' absolute rounding too: below 2^-14 fp16 values are spaced 2^-24 apart, so one tiny
// output (m = 1, k = 1 makes one whenever x is near 0: silu(g·x)·(u·x) ~ x²) is rounded by up to
// 2^-25 absolutely, which no relative bound covers (seen: 0.0057 of a ~5e-6 output).
template <typename OutT>
double narrow_output_tolerance(const std::vector<float>& want) {
  if constexpr (std::is_same_v<OutT, float>) return kGemvTolerance;
  double norm = 0;
  for (const float w : want) norm += double(w) * w;
  const double subnormal_rounding = std::is_same_v<OutT, __half> ? std::ldexp(1.0, -25) * std::sqrt(double(want.size())) : 0.0;
  return kBf16Tolerance + subnormal_rounding / std::sqrt(norm);
}

// gate_up_swiglu_gemv<T, XT, OutT> on one shape against silu(W_gate·x) · (W_up·x) by the CPU
// backend's swiglu on double-precision products.
template <typename T, typename XT, typename OutT>
void check_gate_up(const Shape& shape, std::mt19937& rng, testing::ErrorLog& log) {
  const auto [m, k] = shape;
  SCOPED_TRACE(describe(shape) + ", x " + type_name<XT>() +
               ", out " + type_name<OutT>());
  // At k = 2560, W·x reaches ±30: silu's curved part and both tails are exercised.
  const auto gate_weight = bf16_exact_weights(std::size_t(m) * k, rng);
  const auto up_weight = bf16_exact_weights(std::size_t(m) * k, rng);
  const auto x = random_vector(k, rng);
  const auto stored_x = as_stored<XT>(x);
  const auto gate = reference::matmul(stored_x, gate_weight, {}, 1, k, m);
  const auto up = reference::matmul(stored_x, up_weight, {}, 1, k, m);
  std::vector<float> want(m);
  CpuBackend().swiglu(gate.data(), up.data(), m, want.data());

  const auto device_gate = upload(to_storage<T>(gate_weight));
  const auto device_up = upload(to_storage<T>(up_weight));
  const auto device_x = upload(to_storage<XT>(x));
  DeviceBuffer<OutT> out(m);
  out.fill_bytes(0xFF);
  cuda::gate_up_swiglu_gemv(device_gate.data(), device_up.data(), device_x.data(), m, k, out.data(), nullptr);
  EXPECT_LT(log.add(relative_error(download_floats(out), want)), narrow_output_tolerance<OutT>(want));
}

template <typename T>
class Gemv : public SeededCudaTest {};
TYPED_TEST_SUITE(Gemv, StorageTypes, StorageTypeNames);

TYPED_TEST(Gemv, MatchesReferenceOnOddShapes) {
  testing::ErrorLog log{"gemv, odd shapes"};
  for (const Shape& shape : kSmallShapes) {
    check_gemv<TypeParam, float>(shape, this->rng_, log);
    check_gemv<TypeParam, testing::Narrow<TypeParam>>(shape, this->rng_, log);
  }
}

TYPED_TEST(Gemv, MatchesReferenceOnQwen3Shapes) {
  testing::ErrorLog log{"gemv, Qwen3-4B shapes"};
  for (const Shape& shape : kQwen3Shapes) {
    check_gemv<TypeParam, float>(shape, this->rng_, log);
    check_gemv<TypeParam, testing::Narrow<TypeParam>>(shape, this->rng_, log);
  }
}

// k % 8 == 0 but x or W not 16-byte aligned: the kernel must not issue 16-byte loads (a
// misaligned one faults) and falls back to the scalar loop.
TYPED_TEST(Gemv, MisalignedInputsFallBackToScalarLoads) {
  testing::ErrorLog log{"gemv, misaligned"};
  const Shape shape{300, 256};
  check_gemv<TypeParam, float>(shape, this->rng_, log, 1, 0);
  check_gemv<TypeParam, testing::Narrow<TypeParam>>(shape, this->rng_, log, 1, 0);
  check_gemv<TypeParam, float>(shape, this->rng_, log, 0, 3);
  check_gemv<TypeParam, testing::Narrow<TypeParam>>(shape, this->rng_, log, 0, 3);
}

class GemvLmHead : public SeededCudaTest {};

// The largest read of a decode step: Qwen3-4B's tied LM head, 151936 × 2560 bf16 (778 MB).
TEST_F(GemvLmHead, MatchesReferenceOnQwen3LmHead) {
  testing::ErrorLog log{"gemv, LM head"};
  check_gemv<__nv_bfloat16, __nv_bfloat16>({151936, 2560}, rng_, log);
  check_gemv<__nv_bfloat16, float>({151936, 2560}, rng_, log);
}

// Qwen3-4B's q, k and v in one launch; odd row counts (rows of one product in the same block as
// the next product's) and four products on an odd k.
TYPED_TEST(Gemv, SharedInputProductsMatchReference) {
  testing::ErrorLog log{"gemv_shared_input"};
  for (const bool accumulate : {false, true}) {
    check_shared_input<TypeParam, float>({4096, 1024, 1024}, 2560, accumulate, this->rng_, log);
    check_shared_input<TypeParam, testing::Narrow<TypeParam>>({4096, 1024, 1024}, 2560, accumulate, this->rng_, log);
    check_shared_input<TypeParam, float>({5, 1, 17, 3}, 33, accumulate, this->rng_, log);
    check_shared_input<TypeParam, testing::Narrow<TypeParam>>({13, 7, 9}, 64, accumulate, this->rng_, log);
  }
}

TYPED_TEST(Gemv, SharedInputRejectsMoreProductsThanItHolds) {
  std::vector<cuda::GemvProduct<TypeParam>> products(cuda::kMaxSharedInputProducts + 1,
                                                     {nullptr, nullptr, 0, nullptr});
  EXPECT_THROW(cuda::gemv_shared_input<TypeParam>(products, static_cast<const float*>(nullptr), 8, false, nullptr),
               Error);
}

template <typename T>
class GateUpSwigluGemv : public SeededCudaTest {};
TYPED_TEST_SUITE(GateUpSwigluGemv, StorageTypes, StorageTypeNames);

TYPED_TEST(GateUpSwigluGemv, MatchesSwigluOfReferenceProducts) {
  using T = TypeParam;
  using Narrow = testing::Narrow<T>;  // the 16-bit activations of a T model
  testing::ErrorLog log{"gate_up_swiglu_gemv"};
  // Both launch shapes (gemv.cu): under one wave of 8-warp blocks, kUnroll chunks a lane (k = 4,104:
  // 513 chunks a row, whole steps then a partial one); over one wave on an H200, 2-warp blocks
  // and, for 16-bit weights, kGateUpUnroll chunks (k = 1,032: 129 chunks, one partial step).
  for (const Shape& shape : {Shape{1, 1}, Shape{7, 33}, Shape{31, 96}, Shape{200, 64}, Shape{300, 4104},
                             Shape{4500, 1032}, Shape{9728, 2560}}) {
    check_gate_up<T, float, float>(shape, this->rng_, log);
    check_gate_up<T, float, Narrow>(shape, this->rng_, log);
    check_gate_up<T, Narrow, float>(shape, this->rng_, log);
    check_gate_up<T, Narrow, Narrow>(shape, this->rng_, log);
  }
}

class GemvChain : public SeededCudaTest {};

// One decode layer's chain of dependent products captured into a CUDA graph on its own stream,
// the way decode runs: y = W_o·x, z = W_d·y, h = silu(W_g·z) ⊙ (W_u·z), z += W_d2·h. The gemv
// kernels are programmatic dependent launches that start reading W before the previous kernel
// has finished; each must still wait for it before reading its input. y is poisoned inside the
// graph just before it is written, so a kernel that read it early would carry NaN to the end.
TEST_F(GemvChain, DependentLaunchesInACapturedGraphSeeTheirInputs) {
  using T = __nv_bfloat16;
  const int hidden = 2560, q_width = 4096, inter = 9728;
  const auto x = random_vector(q_width, rng_);
  const auto w_o = bf16_exact_weights(std::size_t(hidden) * q_width, rng_);
  const auto w_gate = bf16_exact_weights(std::size_t(inter) * hidden, rng_);
  const auto w_up = bf16_exact_weights(std::size_t(inter) * hidden, rng_);
  const auto w_down = bf16_exact_weights(std::size_t(hidden) * inter, rng_);
  const auto w_square = bf16_exact_weights(std::size_t(hidden) * hidden, rng_);

  // The chain on the CPU: double-precision products, float between them.
  const auto y = reference::matmul(x, w_o, {}, 1, q_width, hidden);
  const auto z0 = reference::matmul(y, w_square, {}, 1, hidden, hidden);
  const auto gate = reference::matmul(z0, w_gate, {}, 1, hidden, inter);
  const auto up = reference::matmul(z0, w_up, {}, 1, hidden, inter);
  std::vector<float> h(inter);
  CpuBackend().swiglu(gate.data(), up.data(), inter, h.data());
  const auto want = plus(z0, reference::matmul(h, w_down, {}, 1, inter, hidden));

  const auto device_x = upload(x);
  const auto device_o = upload(to_storage<T>(w_o)), device_square = upload(to_storage<T>(w_square));
  const auto device_gate = upload(to_storage<T>(w_gate)), device_up = upload(to_storage<T>(w_up));
  const auto device_down = upload(to_storage<T>(w_down));
  DeviceBuffer<float> device_y(hidden), device_z(hidden), device_h(inter);
  device_z.fill_bytes(0xFF);
  device_h.fill_bytes(0xFF);

  cudaStream_t stream = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t executable = nullptr;
  cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cuda::check(cudaMemsetAsync(device_y.data(), 0xFF, device_y.bytes(), stream), "cudaMemsetAsync");
  cuda::gemv(device_o.data(), device_x.data(), static_cast<const T*>(nullptr), hidden, q_width, device_y.data(),
             false, stream);
  cuda::gemv(device_square.data(), device_y.data(), static_cast<const T*>(nullptr), hidden, hidden, device_z.data(),
             false, stream);
  cuda::gate_up_swiglu_gemv(device_gate.data(), device_up.data(), device_z.data(), inter, hidden, device_h.data(),
                            stream);
  cuda::gemv(device_down.data(), device_h.data(), static_cast<const T*>(nullptr), hidden, inter, device_z.data(), true,
             stream);
  cuda::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cuda::check(cudaGraphInstantiate(&executable, graph, 0), "cudaGraphInstantiate");
  for (int replay = 0; replay < 3; ++replay) {  // every replay recomputes z from scratch
    cuda::check(cudaGraphLaunch(executable, stream), "cudaGraphLaunch");
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    EXPECT_LT(relative_error(device_z.download(), want), kChainTolerance) << "replay " << replay;
  }
  cudaGraphExecDestroy(executable);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

template <typename T>
class Gemm : public SeededCudaTest {};
TYPED_TEST_SUITE(Gemm, StorageTypes, StorageTypeNames);

// gemm on n tokens, three ways as check_gemv: with a bias, without, accumulating with the bias
// into a random residual; shapes from tiny odd ones to Qwen3-4B's prefill products.
TYPED_TEST(Gemm, MatchesReference) {
  using T = TypeParam;
  testing::ErrorLog log{"gemm (cuBLAS)"};
  cuda::CublasHandle handle;
  for (const auto [n, k, m] : {std::tuple{2, 1, 1}, {3, 5, 7}, {5, 33, 17}, {16, 64, 96}, {37, 128, 200},
                               {70, 96, 1000}, {33, 2560, 4096}, {17, 9728, 2560}, {9, 2560, 9728}}) {
    SCOPED_TRACE("n " + std::to_string(n) + ", k " + std::to_string(k) + ", m " + std::to_string(m));
    const auto x = as_stored<T>(random_vector(std::size_t(n) * k, this->rng_));
    const auto weight = bf16_exact_weights(std::size_t(m) * k, this->rng_);
    const auto bias = bf16_exact_weights(m, this->rng_);
    const auto residual = random_vector(std::size_t(n) * m, this->rng_);
    const auto product = reference::matmul(x, weight, {}, n, k, m);

    const auto device_x = upload(to_storage<T>(x));
    const auto device_weight = upload(to_storage<T>(weight));
    const auto device_bias = upload(to_storage<T>(bias));
    DeviceBuffer<float> out(std::size_t(n) * m);

    out.fill_bytes(0xFF);
    cuda::gemm(handle, nullptr, device_x.data(), device_weight.data(), device_bias.data(), n, k, m, out.data(), false);
    EXPECT_LT(log.add(relative_error(out.download(), plus_bias(product, bias))), kCublasTolerance) << "with bias";

    out.fill_bytes(0xFF);
    cuda::gemm(handle, nullptr, device_x.data(), device_weight.data(), static_cast<const T*>(nullptr), n, k, m,
               out.data(), false);
    EXPECT_LT(log.add(relative_error(out.download(), product)), kCublasTolerance) << "no bias";

    out.upload(residual);
    cuda::gemm(handle, nullptr, device_x.data(), device_weight.data(), device_bias.data(), n, k, m, out.data(), true);
    EXPECT_LT(log.add(relative_error(out.download(), plus(residual, plus_bias(product, bias)))), kCublasTolerance)
        << "accumulate";
  }
}

}  // namespace
}  // namespace bifocal
