// The RMSNorm carried across a product boundary (carried_rms_norm.h), both sides against CPU
// references on the values the device holds, fresh random inputs each run, the three storage types:
//   * the writers — gemv_accumulate_for_norm (o_proj, down_proj) and the embedding — leave
//     g ⊙ x and the group sums of x² of the new residual beside it;
//   * the readers — gemv_shared_input (q+k+v, the LM head) and the fused gate/up — equal the same
//     product of the stored g ⊙ x divided by rms(x) (tight), and write rmsnorm(x) for the mixers;
//   * writer then reader equal the CPU backend's rmsnorm followed by a double-precision product,
//     within one 16-bit rounding of the input.
// Shapes from odd tiny ones (the scalar loop, a partial last group, idle warps) to Qwen3-4B's. The
// residual is drawn at several scales: rmsnorm(c·x) = rmsnorm(x), so a reader that does not divide
// by rms(x) is off by the scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/carried_rms_norm.h"
#include "backend/cuda/dense_kernels.cuh"
#include "backend/cuda/gemv.cuh"
#include "bifocal/error.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using cuda::GemvProduct;
using cuda::NextRmsNorm;
using cuda::RmsNormedInput;
using testing::SeededCudaTest;
using testing::StorageTypeNames;
using testing::StorageTypes;
using testing::as_stored;
using testing::download_floats;
using testing::random_vector;
using testing::relative_error;
using testing::to_storage;
using testing::upload;

// fp32 accumulation against double, as gemv_test's 1e-5.
constexpr double kFloatTolerance = 1e-5;
// One rounding to a 16-bit type of every element: ≤ 2⁻⁸ relative each for bf16.
constexpr double kNarrowTolerance = 5e-3;
constexpr float kEps = 1e-6f;

struct Shape {
  int m, k;
};
const Shape kShapes[] = {{1, 1}, {3, 5}, {7, 33}, {17, 64}, {100, 128}, {37, 1000}, {5, 1001}, {4096, 2560},
                         {2560, 9728}};

std::string describe(const Shape& s, float scale) {
  return "m " + std::to_string(s.m) + ", k " + std::to_string(s.k) + ", residual scale " + std::to_string(scale);
}

template <typename T>
double narrow_tolerance() {
  return std::is_same_v<T, float> ? kFloatTolerance : kNarrowTolerance;
}

// Norm weights around 1, as trained models have them, with a spread that a kernel ignoring g misses.
std::vector<float> random_norm_weight(int k, std::mt19937& rng) {
  std::vector<float> g = random_vector(k, rng, 0.3f);
  for (float& value : g) value += 1.0f;
  return g;
}

// What a writer leaves for the next norm, computed on the host: g ⊙ x as T stores it, and the sums
// of x² over groups of 8 (in double).
struct CarriedNorm {
  std::vector<float> scaled;
  std::vector<float> group_squares;
};

template <typename T>
CarriedNorm carried_norm(const std::vector<float>& x, const std::vector<float>& g) {
  CarriedNorm carried{std::vector<float>(x.size()), std::vector<float>(cuda::rms_norm_groups(int(x.size())))};
  for (std::size_t i = 0; i < x.size(); ++i) carried.scaled[i] = g[i] * x[i];
  carried.scaled = as_stored<T>(carried.scaled);
  for (std::size_t group = 0; group < carried.group_squares.size(); ++group) {
    double sum = 0;
    for (std::size_t i = group * cuda::kRmsNormGroup; i < std::min(x.size(), (group + 1) * cuda::kRmsNormGroup); ++i)
      sum += double(x[i]) * x[i];
    carried.group_squares[group] = float(sum);
  }
  return carried;
}

double inverse_rms(const std::vector<float>& x) {
  double sum = 0;
  for (const float v : x) sum += double(v) * v;
  return 1.0 / std::sqrt(sum / double(x.size()) + kEps);
}

std::vector<float> cpu_rmsnorm(const std::vector<float>& x, const std::vector<float>& g) {
  std::vector<float> normalized(x.size());
  CpuBackend().rmsnorm(x.data(), g.data(), 1, int(x.size()), kEps, normalized.data());
  return normalized;
}

// A device copy of a CarriedNorm, and the reader's input on it (with rmsnorm(x) written when asked).
template <typename T>
struct DeviceCarriedNorm {
  DeviceBuffer<T> scaled;
  DeviceBuffer<float> group_squares;
  DeviceCarriedNorm(const CarriedNorm& host)
      : scaled(upload(to_storage<T>(host.scaled))), group_squares(upload(host.group_squares)) {}
};

// q+k+v of one residual in one launch (the second product without its bias, a mix the kernel must
// keep apart), accumulating or not, from a host-made CarriedNorm: each product against the double
// product of the stored g ⊙ x times 1/rms(x), and the normalised x written for the mixers.
template <typename T>
void check_reader(const Shape& shape, float scale, bool accumulate, std::mt19937& rng, testing::ErrorLog& log,
                  testing::ErrorLog& normalized_log) {
  const int k = shape.k;
  SCOPED_TRACE(describe(shape, scale) + (accumulate ? ", accumulate" : ""));
  const std::vector<float> x = random_vector(k, rng, scale);
  const std::vector<float> g = as_stored<T>(random_norm_weight(k, rng));
  const CarriedNorm carried = carried_norm<T>(x, g);
  const double inverse = inverse_rms(x);

  const std::vector<int> rows = {shape.m, (shape.m + 3) / 4, (shape.m + 3) / 4};
  std::vector<DeviceBuffer<T>> weights, biases;
  std::vector<DeviceBuffer<float>> outs;
  std::vector<std::vector<float>> wants;
  std::vector<GemvProduct<T>> products;
  for (std::size_t p = 0; p < rows.size(); ++p) {
    const int m = rows[p];
    const std::vector<float> weight = as_stored<T>(random_vector(std::size_t(m) * k, rng, 0.05f));
    const std::vector<float> bias = as_stored<T>(random_vector(m, rng));
    const std::vector<float> residual = random_vector(m, rng);
    std::vector<float> want = reference::matmul(carried.scaled, weight, {}, 1, k, m);
    for (int j = 0; j < m; ++j)
      want[j] = float(want[j] * inverse) + (p != 1 ? bias[j] : 0.0f) + (accumulate ? residual[j] : 0.0f);
    weights.push_back(upload(to_storage<T>(weight)));
    biases.push_back(upload(to_storage<T>(bias)));
    outs.emplace_back(m);
    if (accumulate)
      outs.back().upload(residual);
    else
      outs.back().fill_bytes(0xFF);
    wants.push_back(want);
    products.push_back({weights.back().data(), p != 1 ? biases.back().data() : nullptr, m, outs.back().data()});
  }
  const DeviceCarriedNorm<T> device_carried(carried);
  const DeviceBuffer<float> device_x = upload(x);
  const DeviceBuffer<T> device_g = upload(to_storage<T>(g));
  DeviceBuffer<T> normalized(k);
  normalized.fill_bytes(0xFF);
  const RmsNormedInput<T> input{device_carried.scaled.data(), device_carried.group_squares.data(), kEps,
                                device_x.data(), device_g.data(), normalized.data()};
  cuda::gemv_shared_input<T>(products, input, k, accumulate, nullptr);
  for (std::size_t p = 0; p < rows.size(); ++p)
    EXPECT_LT(log.add(relative_error(outs[p].download(), wants[p])), kFloatTolerance) << "product " << p;
  EXPECT_LT(normalized_log.add(relative_error(download_floats(normalized), cpu_rmsnorm(x, g))), narrow_tolerance<T>())
      << "normalised x";
}

// silu(W_g·h) ⊙ (W_u·h) with h = (stored g ⊙ x) / rms(x), into float and into T.
template <typename T, typename OutT>
void check_gate_up_reader(const Shape& shape, float scale, std::mt19937& rng, testing::ErrorLog& log) {
  const auto [m, k] = shape;
  SCOPED_TRACE(describe(shape, scale) + ", out " + StorageTypeNames::GetName<OutT>(0));
  const std::vector<float> x = random_vector(k, rng, scale);
  const std::vector<float> g = as_stored<T>(random_norm_weight(k, rng));
  const CarriedNorm carried = carried_norm<T>(x, g);
  std::vector<float> h(k);
  for (int i = 0; i < k; ++i) h[i] = float(carried.scaled[i] * inverse_rms(x));
  const std::vector<float> gate_weight = as_stored<T>(random_vector(std::size_t(m) * k, rng, 0.05f));
  const std::vector<float> up_weight = as_stored<T>(random_vector(std::size_t(m) * k, rng, 0.05f));
  const auto gate = reference::matmul(h, gate_weight, {}, 1, k, m);
  const auto up = reference::matmul(h, up_weight, {}, 1, k, m);
  std::vector<float> want(m);
  CpuBackend().swiglu(gate.data(), up.data(), m, want.data());
  // A narrow output against the reference rounded as the kernel rounds it: one output of ~1e-6
  // (m = 1, weights of 0.05) is an fp16 subnormal whose own rounding is ~1% of it — against the
  // unrounded reference the fp16 case failed now and then (0.0058, stop 24), whatever the kernel.
  if constexpr (!std::is_same_v<OutT, float>) want = as_stored<OutT>(want);

  const DeviceCarriedNorm<T> device_carried(carried);
  const DeviceBuffer<T> device_gate = upload(to_storage<T>(gate_weight));
  const DeviceBuffer<T> device_up = upload(to_storage<T>(up_weight));
  DeviceBuffer<OutT> out(m);
  out.fill_bytes(0xFF);
  cuda::gate_up_swiglu_gemv<T, OutT>(
      device_gate.data(), device_up.data(),
      RmsNormedInput<T>{device_carried.scaled.data(), device_carried.group_squares.data(), kEps}, m, k, out.data(),
      nullptr);
  const double tolerance = std::is_same_v<OutT, float> ? kFloatTolerance : kNarrowTolerance;
  EXPECT_LT(log.add(relative_error(download_floats(out), want)), tolerance);
}

// gemv_accumulate_for_norm: the residual updated as an accumulating gemv's, then its scaled copy
// and group sums — and a reader (a product of k = m) fed by them equals the CPU rmsnorm's product.
template <typename T>
void check_writer_then_reader(const Shape& shape, float scale, std::mt19937& rng, testing::ErrorLog& log,
                              testing::ErrorLog& chain_log) {
  const auto [m, k] = shape;  // the writer's product: [m, k]; the residual and the reader's k: m
  SCOPED_TRACE(describe(shape, scale));
  const std::vector<float> input = as_stored<T>(random_vector(k, rng));
  const std::vector<float> weight = as_stored<T>(random_vector(std::size_t(m) * k, rng, 0.05f));
  const std::vector<float> residual = random_vector(m, rng, scale);
  const std::vector<float> g = as_stored<T>(random_norm_weight(m, rng));
  std::vector<float> new_residual = reference::matmul(input, weight, {}, 1, k, m);
  for (int j = 0; j < m; ++j) new_residual[j] += residual[j];
  const CarriedNorm want = carried_norm<T>(new_residual, g);

  const DeviceBuffer<T> device_input = upload(to_storage<T>(input));
  const DeviceBuffer<T> device_weight = upload(to_storage<T>(weight));
  const DeviceBuffer<T> device_g = upload(to_storage<T>(g));
  DeviceBuffer<float> x = upload(residual);
  DeviceBuffer<T> scaled(m);
  DeviceBuffer<float> group_squares(cuda::rms_norm_groups(m));
  scaled.fill_bytes(0xFF);
  group_squares.fill_bytes(0xFF);
  cuda::gemv_accumulate_for_norm<T, T>(device_weight.data(), device_input.data(), nullptr, m, k, x.data(),
                                       NextRmsNorm<T>{device_g.data(), scaled.data(), group_squares.data()}, nullptr);
  const std::vector<float> got_residual = x.download();
  EXPECT_LT(log.add(relative_error(got_residual, new_residual)), kFloatTolerance) << "residual";
  EXPECT_LT(log.add(relative_error(download_floats(scaled), want.scaled)), narrow_tolerance<T>()) << "g ⊙ x";
  EXPECT_LT(log.add(relative_error(group_squares.download(), want.group_squares)), kFloatTolerance) << "Σx² by group";

  // The reader on what the writer left: W2 · rmsnorm(x) by the CPU backend, within one rounding.
  const int reader_rows = 40;
  const std::vector<float> reader_weight = as_stored<T>(random_vector(std::size_t(reader_rows) * m, rng, 0.05f));
  const std::vector<float> chain_want =
      reference::matmul(cpu_rmsnorm(got_residual, g), reader_weight, {}, 1, m, reader_rows);
  const DeviceBuffer<T> device_reader_weight = upload(to_storage<T>(reader_weight));
  DeviceBuffer<float> out(reader_rows);
  out.fill_bytes(0xFF);
  const GemvProduct<T> product{device_reader_weight.data(), nullptr, reader_rows, out.data()};
  cuda::gemv_shared_input<T>(std::span(&product, 1), RmsNormedInput<T>{scaled.data(), group_squares.data(), kEps}, m,
                             false, nullptr);
  EXPECT_LT(chain_log.add(relative_error(out.download(), chain_want)), narrow_tolerance<T>()) << "writer then reader";
}

template <typename T>
class CarriedRmsNorm : public SeededCudaTest {};
TYPED_TEST_SUITE(CarriedRmsNorm, StorageTypes, StorageTypeNames);

TYPED_TEST(CarriedRmsNorm, SharedInputReaderEqualsTheProductOfTheStoredInputOverRms) {
  testing::ErrorLog log{"carried norm, q+k+v reader"}, normalized_log{"carried norm, normalised x"};
  for (const Shape& shape : kShapes)
    for (const float scale : {1.0f, 40.0f})
      for (const bool accumulate : {false, true})
        check_reader<TypeParam>(shape, scale, accumulate, this->rng_, log, normalized_log);
}

TYPED_TEST(CarriedRmsNorm, GateUpReaderEqualsSwigluOfTheStoredInputOverRms) {
  testing::ErrorLog log{"carried norm, gate/up reader"};
  for (const Shape& shape : kShapes)
    for (const float scale : {1.0f, 0.02f}) {
      check_gate_up_reader<TypeParam, float>(shape, scale, this->rng_, log);
      if constexpr (!std::is_same_v<TypeParam, float>)
        check_gate_up_reader<TypeParam, TypeParam>(shape, scale, this->rng_, log);
    }
}

TYPED_TEST(CarriedRmsNorm, AccumulatingWriterLeavesWhatTheReaderNeeds) {
  testing::ErrorLog log{"carried norm, writer"}, chain_log{"carried norm, writer then reader vs CPU rmsnorm"};
  // m = 1, 7, 13: a lone and a partial group (idle warps in the writer's last block). Both launch
  // variants of the 16-bit writer (gemv.cu): one wave of blocks, deep loads (o_proj's 2,560 × 4,096,
  // down_proj's 2,560 × 9,728), and more than one wave, the plain kernel (4,000 × 9,728: 500 blocks).
  for (const Shape& shape : {Shape{1, 8}, Shape{7, 33}, Shape{13, 64}, Shape{100, 1001}, Shape{2560, 4096},
                             Shape{2560, 9728}, Shape{4000, 9728}})
    for (const float scale : {1.0f, 40.0f})
      check_writer_then_reader<TypeParam>(shape, scale, this->rng_, log, chain_log);
}

// The embedding row of one token: x as the plain embedding writes it, and the first norm's inputs.
TYPED_TEST(CarriedRmsNorm, EmbeddingWritesTheFirstNormsInputs) {
  using T = TypeParam;
  for (const int hidden : {5, 64, 1001, 2560}) {
    SCOPED_TRACE("hidden " + std::to_string(hidden));
    const int vocab = 7, id = 4;
    const std::vector<float> table = as_stored<T>(random_vector(std::size_t(vocab) * hidden, this->rng_));
    const std::vector<float> g = as_stored<T>(random_norm_weight(hidden, this->rng_));
    const auto row_begin = table.begin() + std::size_t(id) * hidden;
    const std::vector<float> row(row_begin, row_begin + hidden);
    const CarriedNorm want = carried_norm<T>(row, g);
    const DeviceBuffer<T> device_table = upload(to_storage<T>(table));
    const DeviceBuffer<T> device_g = upload(to_storage<T>(g));
    const DeviceBuffer<std::int32_t> ids = upload(std::vector<std::int32_t>{id});
    DeviceBuffer<float> x(hidden);
    DeviceBuffer<T> scaled(hidden);
    DeviceBuffer<float> group_squares(cuda::rms_norm_groups(hidden));
    scaled.fill_bytes(0xFF);
    group_squares.fill_bytes(0xFF);
    cuda::embedding<T>(device_table.data(), ids.data(), 1, hidden, x.data(), nullptr,
                       NextRmsNorm<T>{device_g.data(), scaled.data(), group_squares.data()});
    EXPECT_EQ(x.download(), row);
    EXPECT_EQ(download_floats(scaled), want.scaled);  // one product g·x, rounded once: the same bits
    EXPECT_LT(relative_error(group_squares.download(), want.group_squares), kFloatTolerance);
  }
}

TEST(CarriedRmsNormErrors, EmbeddingOfSeveralTokensCannotCarryTheNorm) {
  // Checked on the host before any launch: no device needed for the message.
  EXPECT_THROW(cuda::embedding<float>(nullptr, nullptr, 2, 16, nullptr, nullptr,
                                      NextRmsNorm<float>{reinterpret_cast<const float*>(16),
                                                         reinterpret_cast<float*>(16), reinterpret_cast<float*>(16)}),
               Error);
}

TEST(CarriedRmsNormErrors, WriterWithoutEveryOutputOfTheNextNormIsRefused) {
  // Checked on the host before any launch; each missing piece alone is refused.
  const auto* weight = reinterpret_cast<const float*>(16);
  auto* scaled = reinterpret_cast<float*>(16);
  auto* group_squares = reinterpret_cast<float*>(16);
  for (const NextRmsNorm<float>& next : {NextRmsNorm<float>{nullptr, scaled, group_squares},
                                         NextRmsNorm<float>{weight, nullptr, group_squares},
                                         NextRmsNorm<float>{weight, scaled, nullptr}})
    EXPECT_THROW((cuda::gemv_accumulate_for_norm<float, float>(weight, weight, nullptr, 8, 8, scaled, next, nullptr)),
                 Error);
}

}  // namespace
}  // namespace bifocal
