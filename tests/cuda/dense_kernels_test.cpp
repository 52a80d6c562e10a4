// The dense CUDA kernels (src/backend/cuda/dense_kernels.cuh) against the CPU backend, on fresh
// random inputs each run (the seed is printed with any failure), for bf16, fp16 and fp32 weight
// storage. Outputs are poisoned with 0xFF bytes (NaN) before each run, so an element a kernel
// forgets to write fails the comparison. Tolerances: fp32 results of fp32 math on identical
// inputs 1e-5 relative (measured differences are float rounding, ~1e-7); bf16-stored results
// 5e-3 (one bf16 rounding is at most 2⁻⁸ relative per element), fp16-stored 1e-3 (2⁻¹¹); copies
// and single adds exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/dense_kernels.cuh"
#include "cuda/cuda_test_support.h"
#include "model/rope.h"
#include "numerics.h"
#include "test_files.h"

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
using testing::upload;

constexpr double kFloatTolerance = 1e-5;
constexpr double kBf16Tolerance = 5e-3;
constexpr double kFp16Tolerance = 1e-3;

// Random weights every storage type holds exactly (testing::exact_in_16_bits): the device then
// holds the very values the CPU reference uses.
std::vector<float> exact_vector(std::size_t size, std::mt19937& rng, float scale = 1.0f) {
  const auto values = random_vector(size, rng, scale);
  return testing::exact_in_16_bits(values);
}



template <typename T>
class DenseKernels : public SeededCudaTest {};
TYPED_TEST_SUITE(DenseKernels, StorageTypes, StorageTypeNames);

class DenseElementwise : public SeededCudaTest {};

TYPED_TEST(DenseKernels, EmbeddingCopiesTheRowsOfTheIds) {
  using T = TypeParam;
  CpuBackend cpu;
  const int vocab = 1000;
  for (const auto [n, hidden] : {std::tuple{1, 64}, {7, 96}, {5, 33}, {3, 2560}, {2, 4}}) {
    const auto table = exact_vector(std::size_t(vocab) * hidden, this->rng_);
    std::vector<std::int32_t> ids(n);
    std::uniform_int_distribution<std::int32_t> id(0, vocab - 1);
    for (auto& i : ids) i = id(this->rng_);
    ids.front() = vocab - 1;  // the last row: an off-by-one in the row offset reads past the table
    if (n > 1) ids.back() = 0;
    std::vector<float> want(std::size_t(n) * hidden);
    cpu.embedding(table.data(), ids.data(), n, hidden, want.data());

    const auto device_table = upload(to_storage<T>(table));
    const auto device_ids = upload(ids);
    DeviceBuffer<float> out(want.size());
    out.fill_bytes(0xFF);
    cuda::embedding(device_table.data(), device_ids.data(), n, hidden, out.data(), nullptr);
    EXPECT_EQ(relative_error(out.download(), want), 0.0) << "n " << n << ", hidden " << hidden;
  }
}

// The decode step's RoPE table (RopeRotationTable), made by its embedding: (sin, cos) of
// position · inv_freq[i] formed in fp32 as the CPU backend forms it, against std::sin/std::cos of
// that float angle — also past |angle| ≈ 1e5, where sincosf changes its argument reduction — and
// qk_norm_rope reading it, bit for bit against qk_norm_rope making its own.
TEST_F(DenseElementwise, EmbeddingMakesTheStepsRopeTableAndQkNormRopeReadsIt) {
  const int hidden = 64, half = 64;
  const auto table = exact_vector(hidden, rng_);
  const std::vector<float> inv_freq = rope_inverse_frequencies(RopeConfig{.theta = 1e6}, 2 * half);  // Qwen3's
  const auto device_table = upload(to_storage<__nv_bfloat16>(table));
  const auto device_ids = upload(std::vector<std::int32_t>{0});
  const auto device_inv_freq = upload(inv_freq);
  DeviceBuffer<float> out(hidden);
  DeviceBuffer<float2> rotation(static_cast<std::size_t>(half));
  for (const std::int64_t position : {0L, 7L, 4097L, 131072L, 300001L, 1000000L}) {
    const auto device_position = upload(std::vector<std::int64_t>{position});
    rotation.fill_bytes(0xFF);
    cuda::embedding(device_table.data(), device_ids.data(), 1, hidden, out.data(), nullptr, {},
                    {.position = device_position.data(), .inv_freq = device_inv_freq.data(), .half = half,
                     .out = rotation.data()});
    const std::vector<float2> got = rotation.download();
    double worst = 0.0;
    for (int i = 0; i < half; ++i) {
      const float angle = float(position) * inv_freq[i];
      worst = std::max({worst, std::abs(double(got[i].x) - std::sin(double(angle))),
                        std::abs(double(got[i].y) - std::cos(double(angle)))});
    }
    EXPECT_LE(worst, 2e-7) << "position " << position;  // within about one fp32 unit of [-1, 1]

    // qk_norm_rope reading the table gives the bits it makes itself (the same rotation_at).
    const int heads = 3, d = 2 * half;
    const auto q = random_vector(std::size_t(heads) * d, rng_), k = random_vector(d, rng_);
    auto made_q = upload(q), made_k = upload(k), read_q = upload(q), read_k = upload(k);
    cuda::qk_norm_rope<float>(made_q.data(), made_k.data(), nullptr, nullptr, 1e-6f, device_position.data(),
                              device_inv_freq.data(), 1, heads, 1, d, true, nullptr);
    cuda::qk_norm_rope<float>(read_q.data(), read_k.data(), nullptr, nullptr, 1e-6f, device_position.data(),
                              device_inv_freq.data(), 1, heads, 1, d, true, nullptr, rotation.data());
    EXPECT_EQ(read_q.download(), made_q.download()) << "position " << position;
    EXPECT_EQ(read_k.download(), made_k.download()) << "position " << position;
  }
  std::vector<std::int32_t> two_ids{0, 0};
  const auto device_two_ids = upload(two_ids);
  DeviceBuffer<float> two_rows(2 * hidden);
  testing::expect_error(
      [&] {
        cuda::embedding(device_table.data(), device_two_ids.data(), 2, hidden, two_rows.data(), nullptr, {},
                        {.position = nullptr, .inv_freq = device_inv_freq.data(), .half = half, .out = rotation.data()});
      },
      {"embedding", "RoPE table is made for one token"});
  DeviceBuffer<float> two_q(2 * 2 * half), two_k(2 * 2 * half);
  testing::expect_error(
      [&] {
        cuda::qk_norm_rope<float>(two_q.data(), two_k.data(), nullptr, nullptr, 1e-6f, nullptr, device_inv_freq.data(),
                                  2, 1, 1, 2 * half, true, nullptr, rotation.data());
      },
      {"qk_norm_rope", "RoPE table holds one token's angles, not 2"});
}

TYPED_TEST(DenseKernels, RmsnormMatchesCpuForFloatAnd16BitOutputs) {
  using T = TypeParam;
  using Narrow = testing::Narrow<T>;  // bf16 out for fp32 and bf16 weights, fp16 for fp16
  CpuBackend cpu;
  testing::ErrorLog float_log{"rmsnorm, fp32 out"}, bf16_log{"rmsnorm, 16-bit out"};
  // Rows held in registers (dim a multiple of 4, at most 4,096) and the general kernel (the others).
  for (const auto [rows, dim] : {std::tuple{1, 2560}, {7, 96}, {3, 33}, {2, 9728}, {300, 64}, {5, 1}, {4, 1500},
                                 {9, 4096}, {2, 4100}, {3, 4}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", dim " + std::to_string(dim));
    const auto x = random_vector(std::size_t(rows) * dim, this->rng_, 3.0f);
    const auto weight = exact_vector(dim, this->rng_);
    const float eps = 1e-6f;
    std::vector<float> want(x.size());
    cpu.rmsnorm(x.data(), weight.data(), rows, dim, eps, want.data());

    const auto device_x = upload(x);
    const auto device_weight = upload(to_storage<T>(weight));
    DeviceBuffer<float> out_float(x.size());
    DeviceBuffer<Narrow> out_bf16(x.size());
    out_float.fill_bytes(0xFF);
    out_bf16.fill_bytes(0xFF);
    cuda::rmsnorm(device_x.data(), device_weight.data(), rows, dim, eps, out_float.data(), nullptr);
    cuda::rmsnorm(device_x.data(), device_weight.data(), rows, dim, eps, out_bf16.data(), nullptr);
    EXPECT_LT(float_log.add(relative_error(out_float.download(), want)), kFloatTolerance);
    EXPECT_LT(bf16_log.add(relative_error(testing::to_float(out_bf16.download()), want)), kBf16Tolerance);

    // In place, as the model normalises the q/k heads of the CPU path (out == x).
    auto in_place = upload(x);
    cuda::rmsnorm(in_place.data(), device_weight.data(), rows, dim, eps, in_place.data(), nullptr);
    EXPECT_LT(relative_error(in_place.download(), want), kFloatTolerance) << "in place";
  }
}

// What qk_norm_rope is asked to do: the Qwen3 norm and RoPE, RoPE alone (Llama, Qwen2), the norm
// alone (mixers that rotate keys themselves), or nothing (must leave q and k untouched).
struct QkSteps {
  bool norm, rope;
};

TYPED_TEST(DenseKernels, QkNormRopeMatchesCpuRmsnormThenRope) {
  using T = TypeParam;
  CpuBackend cpu;
  testing::ErrorLog log{"qk_norm_rope"};
  RopeConfig rope_config;
  rope_config.theta = 1e6;  // Qwen3's
  const float eps = 1e-6f;
  for (const int d : {16, 24, 32, 48, 64, 128, 256}) {
    const auto inv_freq = rope_inverse_frequencies(rope_config, d);
    for (const auto [query_heads, kv_heads] : {std::pair{4, 1}, {2, 2}, {32, 8}}) {
      for (const int n : {1, 5}) {
        for (const QkSteps steps : {QkSteps{true, true}, {false, true}, {true, false}, {false, false}}) {
          SCOPED_TRACE("d " + std::to_string(d) + ", heads " + std::to_string(query_heads) + ":" +
                       std::to_string(kv_heads) + ", n " + std::to_string(n) + ", norm " +
                       std::to_string(steps.norm) + ", rope " + std::to_string(steps.rope));
          auto q = random_vector(std::size_t(n) * query_heads * d, this->rng_, 2.0f);
          auto k = random_vector(std::size_t(n) * kv_heads * d, this->rng_, 2.0f);
          const auto q_norm = exact_vector(d, this->rng_), k_norm = exact_vector(d, this->rng_);
          // Positions up to 128 K: large angles test the float32 angle formation and sin/cos.
          std::vector<std::int64_t> positions(n);
          std::uniform_int_distribution<std::int64_t> position(0, 131071);
          for (auto& p : positions) p = position(this->rng_);
          positions.front() = 0;

          const auto device_q_norm = upload(to_storage<T>(q_norm));
          const auto device_k_norm = upload(to_storage<T>(k_norm));
          const auto device_positions = upload(positions);
          const auto device_inv_freq = upload(inv_freq);
          auto device_q = upload(q);
          auto device_k = upload(k);
          cuda::qk_norm_rope(device_q.data(), device_k.data(), steps.norm ? device_q_norm.data() : nullptr,
                             steps.norm ? device_k_norm.data() : nullptr, eps, device_positions.data(),
                             device_inv_freq.data(), n, query_heads, kv_heads, d, steps.rope, nullptr);

          // The keys read from a wider product (CudaModel's key product, a mixer's gate columns after
          // each token's keys) and written to k: the same bits, the product left as it was.
          const int key_width = kv_heads * d, product_width = key_width + 3;
          auto product = random_vector(std::size_t(n) * product_width, this->rng_, 2.0f);
          for (int t = 0; t < n; ++t)
            std::copy_n(k.begin() + std::size_t(t) * key_width, key_width,
                        product.begin() + std::size_t(t) * product_width);
          auto device_product = upload(product);
          auto again_q = upload(q);
          DeviceBuffer<float> keys_out(k.size());
          keys_out.fill_bytes(0xFF);
          cuda::qk_norm_rope(again_q.data(), keys_out.data(), steps.norm ? device_q_norm.data() : nullptr,
                             steps.norm ? device_k_norm.data() : nullptr, eps, device_positions.data(),
                             device_inv_freq.data(), n, query_heads, kv_heads, d, steps.rope, nullptr, nullptr,
                             device_product.data(), product_width);
          EXPECT_EQ(keys_out.download(), device_k.download()) << "keys from the wider product";
          EXPECT_EQ(again_q.download(), device_q.download()) << "queries beside keys from a wider product";
          EXPECT_EQ(device_product.download(), product) << "the wider product is only read";

          if (steps.norm) {
            cpu.rmsnorm(q.data(), q_norm.data(), n * query_heads, d, eps, q.data());
            cpu.rmsnorm(k.data(), k_norm.data(), n * kv_heads, d, eps, k.data());
          }
          if (steps.rope) {
            cpu.rope(q.data(), n, query_heads, d, positions.data(), inv_freq.data());
            cpu.rope(k.data(), n, kv_heads, d, positions.data(), inv_freq.data());
          }
          EXPECT_LT(log.add(relative_error(device_q.download(), q)), kFloatTolerance) << "queries";
          EXPECT_LT(log.add(relative_error(device_k.download(), k)), kFloatTolerance) << "keys";
        }
      }
    }
  }
}

TEST_F(DenseElementwise, QkNormRopeRefusesAKeyProductNarrowerThanItsKeys) {
  DeviceBuffer<float> q(8 * 2), k(8 * 2), product(8 * 2);
  const auto positions = upload(std::vector<std::int64_t>{0, 1});
  const auto inv_freq = upload(std::vector<float>{1.0f, 0.5f, 0.25f, 0.125f});
  testing::expect_error(
      [&] {
        cuda::qk_norm_rope<float>(q.data(), k.data(), nullptr, nullptr, 1e-6f, positions.data(), inv_freq.data(), 2, 1,
                                  1, 8, true, nullptr, nullptr, product.data(), 7);
      },
      {"qk_norm_rope", "product of 7 columns a token, fewer than the 8 of its keys"});
}

TYPED_TEST(DenseKernels, AddBiasAddsTheBiasToEveryRow) {
  using T = TypeParam;
  for (const auto [rows, cols] : {std::tuple{1, 1}, {3, 37}, {64, 1024}}) {
    const auto out = random_vector(std::size_t(rows) * cols, this->rng_);
    const auto bias = exact_vector(cols, this->rng_);
    std::vector<float> want(out.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) want[std::size_t(r) * cols + c] = out[std::size_t(r) * cols + c] + bias[c];
    auto device_out = upload(out);
    const auto device_bias = upload(to_storage<T>(bias));
    cuda::add_bias(device_out.data(), device_bias.data(), rows, cols, nullptr);
    EXPECT_EQ(relative_error(device_out.download(), want), 0.0) << rows << "x" << cols;
  }
}

TEST_F(DenseElementwise, SwigluMatchesCpuForFloatAnd16BitOutputs) {
  CpuBackend cpu;
  testing::ErrorLog float_log{"swiglu, fp32 out"}, bf16_log{"swiglu, bf16 out"}, fp16_log{"swiglu, fp16 out"};
  for (const std::int64_t count : {std::int64_t(1), std::int64_t(7), std::int64_t(9728), (std::int64_t(1) << 20) + 3}) {
    SCOPED_TRACE("count " + std::to_string(count));
    // Gates up to ±20: silu's saturated tails (e^{−g} overflow for g ≪ 0) are exercised too.
    const auto gate = random_vector(count, rng_, 5.0f), up = random_vector(count, rng_);
    std::vector<float> want(count);
    cpu.swiglu(gate.data(), up.data(), count, want.data());

    auto device_gate = upload(gate);
    const auto device_up = upload(up);
    DeviceBuffer<float> out_float(count);
    DeviceBuffer<__nv_bfloat16> out_bf16(count);
    DeviceBuffer<__half> out_fp16(count);
    out_float.fill_bytes(0xFF);
    out_bf16.fill_bytes(0xFF);
    out_fp16.fill_bytes(0xFF);
    cuda::swiglu(device_gate.data(), device_up.data(), count, out_float.data(), nullptr);
    cuda::swiglu(device_gate.data(), device_up.data(), count, out_bf16.data(), nullptr);
    cuda::swiglu(device_gate.data(), device_up.data(), count, out_fp16.data(), nullptr);
    EXPECT_LT(float_log.add(relative_error(out_float.download(), want)), kFloatTolerance);
    EXPECT_LT(bf16_log.add(relative_error(testing::to_float(out_bf16.download()), want)), kBf16Tolerance);
    EXPECT_LT(fp16_log.add(relative_error(testing::to_float(out_fp16.download()), want)), kFp16Tolerance);
    // One element in: pointers off the 16-byte grid take the one-element path, same values.
    if (count > 1) {
      DeviceBuffer<__nv_bfloat16> shifted(count);
      shifted.fill_bytes(0xFF);
      cuda::swiglu(device_gate.data() + 1, device_up.data() + 1, count - 1, shifted.data() + 1, nullptr);
      const auto got = testing::to_float(shifted.download()), all = testing::to_float(out_bf16.download());
      EXPECT_EQ(std::vector<float>(got.begin() + 1, got.end()), std::vector<float>(all.begin() + 1, all.end()))
          << "off the 16-byte grid";
    }
    // In place into the gate buffer, as the CPU forward pass does.
    cuda::swiglu(device_gate.data(), device_up.data(), count, device_gate.data(), nullptr);
    EXPECT_LT(relative_error(device_gate.download(), want), kFloatTolerance) << "in place";
  }
}

TEST_F(DenseElementwise, AddResidualAddsElementwise) {
  for (const std::int64_t count : {std::int64_t(1), std::int64_t(2560), std::int64_t(1000003)}) {
    const auto x = random_vector(count, rng_), y = random_vector(count, rng_);
    std::vector<float> want(x);
    CpuBackend().add(want.data(), y.data(), count);
    auto device_x = upload(x);
    const auto device_y = upload(y);
    cuda::add_residual(device_x.data(), device_y.data(), count, nullptr);
    EXPECT_EQ(relative_error(device_x.download(), want), 0.0) << "count " << count;
  }
}

TEST_F(DenseElementwise, ConvertRoundsToNearestBf16AndFp16) {
  for (const std::int64_t count : {std::int64_t(1), std::int64_t(33), std::int64_t(1000003)}) {
    const auto values = random_vector(count, rng_, 100.0f);
    const auto device_values = upload(values);
    DeviceBuffer<__nv_bfloat16> as_bf16(count);
    DeviceBuffer<__half> as_fp16(count);
    DeviceBuffer<float> as_float(count);
    as_bf16.fill_bytes(0xFF);
    as_fp16.fill_bytes(0xFF);
    as_float.fill_bytes(0xFF);
    cuda::convert(device_values.data(), as_bf16.data(), count, nullptr);
    cuda::convert(device_values.data(), as_fp16.data(), count, nullptr);
    cuda::convert(device_values.data(), as_float.data(), count, nullptr);
    EXPECT_EQ(relative_error(testing::to_float(as_bf16.download()), testing::round_to_bf16(values)), 0.0);
    EXPECT_EQ(relative_error(testing::to_float(as_fp16.download()), testing::as_stored<__half>(values)), 0.0);
    EXPECT_EQ(relative_error(as_float.download(), values), 0.0);
    // One element in: pointers off the 16-byte grid take the one-element path, same values.
    if (count > 1) {
      DeviceBuffer<__nv_bfloat16> shifted(count);
      shifted.fill_bytes(0xFF);
      cuda::convert(device_values.data() + 1, shifted.data() + 1, count - 1, nullptr);
      const auto got = testing::to_float(shifted.download()), all = testing::to_float(as_bf16.download());
      EXPECT_EQ(std::vector<float>(got.begin() + 1, got.end()), std::vector<float>(all.begin() + 1, all.end()))
          << "off the 16-byte grid";
    }
  }
}

}  // namespace
}  // namespace bifocal
