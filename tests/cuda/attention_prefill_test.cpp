// The CUDA prefill attention (attention_prefill.cuh: the tensor-core flash kernel and its
// fallback) against the CPU backend's attention on the very key/value values the device holds:
// linear caches, SlidingWindowMixer's gathered window, and shuffled keys with empty ones mixed in;
// window, sink tokens, learned sinks; bf16, fp16 and fp32 storage, both output types. Fresh
// random inputs each run (the seed is printed with any failure). Tolerances as attention_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/attention_prefill.cuh"
#include "cuda/attention_test_support.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"
#include "test_files.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::random_vector;
using testing::as_stored;
using testing::relative_error;
using testing::to_storage;
using testing::download_floats;
using namespace testing::attention;

// ---- Prefill ---------------------------------------------------------------------------------

struct PrefillCase {
  int query_heads, kv_heads, head_dim;
  int window, sink_tokens;
  bool learned_sink;
  Layout layout;        // Linear: keys 0 … first + n − 1 (key_positions nullptr); Ring: the
  std::int64_t first;   // SlidingWindowMixer's gathered cached window, then the new tokens;
  int n;                // Shuffled: those keys in a random order, with empty (−1, NaN) keys mixed in
};

void PrintTo(const PrefillCase& c, std::ostream* out) {
  const char* layouts[] = {"linear", "gathered", "shuffled"};
  *out << "Hq=" << c.query_heads << " Hkv=" << c.kv_heads << " d=" << c.head_dim << " w=" << c.window
       << " s=" << c.sink_tokens << (c.learned_sink ? " learned" : "") << " " << layouts[int(c.layout)]
       << " first=" << c.first << " n=" << c.n;
}

// The key positions the kernel sees for case c (−1: an empty key).
std::vector<std::int64_t> prefill_key_positions(const PrefillCase& c, std::mt19937& rng) {
  std::vector<std::int64_t> positions;
  if (c.layout == Layout::Linear) {
    positions.resize(c.first + c.n);
    std::iota(positions.begin(), positions.end(), 0);
    return positions;
  }
  // sliding_window_mixer.cpp's gather: sinks, the ring oldest first, then the new tokens.
  const std::int64_t seen = c.first, sinks = std::min<std::int64_t>(seen, c.sink_tokens);
  const std::int64_t oldest = std::max<std::int64_t>(sinks, seen - (c.window - c.sink_tokens));
  for (std::int64_t p = 0; p < sinks; ++p) positions.push_back(p);
  for (std::int64_t p = oldest; p < seen; ++p) positions.push_back(p);
  for (int i = 0; i < c.n; ++i) positions.push_back(c.first + i);
  if (c.layout == Layout::Shuffled) {
    positions.insert(positions.end(), 7, -1);
    std::shuffle(positions.begin(), positions.end(), rng);
  }
  return positions;
}

// gated: Bifocal's window branch, each output row (t, h) scaled by 1 − sigmoid(gate[t·stride + h])
// (PrefillAttentionArgs::output_gate), the gates in rows wider than the heads (stride Hq + 3, the
// gate at column 3 + h: the other columns would show if read).
template <typename T, typename OutT>
double prefill_error(const PrefillCase& c, std::mt19937& rng, bool gated = false) {
  const int d = c.head_dim;
  const std::size_t row = std::size_t(c.kv_heads) * d;
  const auto key_positions = prefill_key_positions(c, rng);
  const std::int64_t num_keys = std::int64_t(key_positions.size());
  Cache keys{random_vector(num_keys * row, rng, 2.0f), random_vector(num_keys * row, rng), key_positions};
  for (std::int64_t j = 0; j < num_keys; ++j)
    if (key_positions[j] < 0) {
      std::fill_n(keys.keys.begin() + j * row, row, NAN);
      std::fill_n(keys.values.begin() + j * row, row, NAN);
    }
  const auto queries = random_vector(std::size_t(c.n) * c.query_heads * d, rng, 2.0f);
  const auto sinks = random_vector(c.query_heads, rng, 2.0f);
  std::vector<std::int64_t> positions(c.n);
  std::iota(positions.begin(), positions.end(), c.first);

  const ReferenceKeys ref = reference_keys<T>(keys, row);
  std::vector<float> want(queries.size());
  CpuBackend().attention({.queries = queries.data(), .positions = positions.data(), .n = c.n, .keys = ref.keys.data(),
                          .values = ref.values.data(), .key_positions = ref.positions.data(),
                          .num_keys = std::int64_t(ref.positions.size()), .query_heads = c.query_heads,
                          .kv_heads = c.kv_heads, .head_dim = d, .window = c.window, .sink_tokens = c.sink_tokens,
                          .learned_sinks = c.learned_sink ? sinks.data() : nullptr, .out = want.data()});
  const int gate_stride = c.query_heads + 3;
  const auto gates = random_vector(std::size_t(c.n) * gate_stride, rng, 4.0f);
  if (gated)
    for (std::size_t i = 0; i < want.size(); ++i) {
      const std::size_t row = i / d, token = row / c.query_heads, head = row % c.query_heads;
      want[i] = float(want[i] * (1.0 - 1.0 / (1.0 + std::exp(-double(gates[token * gate_stride + 3 + head])))));
    }

  const DeviceBuffer<float> device_queries{std::span<const float>(queries)}, device_sinks{std::span<const float>(sinks)};
  const DeviceBuffer<std::int64_t> device_positions{std::span<const std::int64_t>(positions)};
  const DeviceBuffer<float> device_gates{std::span<const float>(gates)};
  const DeviceBuffer<T> device_keys{std::span<const T>(to_storage<T>(keys.keys))};
  const DeviceBuffer<T> device_values{std::span<const T>(to_storage<T>(keys.values))};
  const DeviceBuffer<std::int64_t> device_key_positions{std::span<const std::int64_t>(key_positions)};
  DeviceBuffer<OutT> out(queries.size());
  out.fill_bytes(0xFF);
  const cuda::PrefillAttentionArgs<T> device_args{
      .queries = device_queries.data(), .positions = device_positions.data(), .n = c.n, .keys = device_keys.data(),
      .values = device_values.data(),
      .key_positions = c.layout == Layout::Linear ? nullptr : device_key_positions.data(), .num_keys = num_keys,
      .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d, .window = c.window,
      .sink_tokens = c.sink_tokens, .learned_sinks = c.learned_sink ? device_sinks.data() : nullptr,
      .output_gate = gated ? device_gates.data() + 3 : nullptr, .output_gate_stride = gate_stride};
  cuda::attention_prefill(device_args, out.data(), nullptr);
  cuda::check(cudaDeviceSynchronize(), "attention_prefill");
  return relative_error(download_floats(out), want);
}

class CudaPrefillAttention : public testing::CudaTest, public ::testing::WithParamInterface<PrefillCase> {};

// bf16 or fp16 keys with head_dim 64, 128 or 256 take the tensor-core kernel
// (attention_prefill_tensor_core.cu), which rounds q and the softmax weights to the keys' type as
// well: its error bound is the one derived (for bf16, the coarser) in
// tests/cuda/attention_prefill_tensor_core_test.cpp, not fp32's.
double sixteen_bit_keys_tolerance(const PrefillCase& c, double otherwise) {
  const bool tensor_cores = cuda::prefill_uses_tensor_cores(cuda::PrefillAttentionArgs<__nv_bfloat16>{.head_dim = c.head_dim});
  return tensor_cores ? kTensorCorePrefillTolerance : otherwise;
}

TEST_P(CudaPrefillAttention, MatchesCpuForBf16Fp16AndFp32Storage) {
  const PrefillCase c = GetParam();
  Seeded seeded;
  SCOPED_TRACE("seed " + std::to_string(seeded.seed));
  testing::ErrorLog log{"prefill attention"};
  EXPECT_LT(log.add(prefill_error<__nv_bfloat16, float>(c, seeded.rng)),
            sixteen_bit_keys_tolerance(c, kFp32Tolerance))
      << "bf16 keys, fp32 out";
  EXPECT_LT(log.add(prefill_error<__half, float>(c, seeded.rng)), sixteen_bit_keys_tolerance(c, kFp32Tolerance))
      << "fp16 keys, fp32 out";
  EXPECT_LT(log.add(prefill_error<float, float>(c, seeded.rng)), kFp32Tolerance) << "fp32 keys, fp32 out";
  EXPECT_LT((prefill_error<__nv_bfloat16, __nv_bfloat16>(c, seeded.rng)), sixteen_bit_keys_tolerance(c, kBf16Tolerance))
      << "bf16 keys, bf16 out";
  EXPECT_LT((prefill_error<__half, __half>(c, seeded.rng)), sixteen_bit_keys_tolerance(c, kFp16Tolerance))
      << "fp16 keys, fp16 out";
  EXPECT_LT((prefill_error<float, __nv_bfloat16>(c, seeded.rng)), kBf16Tolerance) << "fp32 keys, bf16 out";
}

// Bifocal's window branch: the rows scaled by the window's share of the mix, on both kernels.
TEST_P(CudaPrefillAttention, ScalesEachRowByTheWindowShareOfBifocalsMix) {
  const PrefillCase c = GetParam();
  Seeded seeded;
  SCOPED_TRACE("seed " + std::to_string(seeded.seed));
  EXPECT_LT((prefill_error<__nv_bfloat16, __nv_bfloat16>(c, seeded.rng, true)),
            sixteen_bit_keys_tolerance(c, kBf16Tolerance))
      << "bf16 keys, bf16 out";
  EXPECT_LT((prefill_error<float, float>(c, seeded.rng, true)), kFp32Tolerance) << "fp32 keys, fp32 out";
}

TEST(CudaPrefillAttentionArguments, AnOutputGateRowShorterThanTheQueryHeadsIsRefusedByName) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const DeviceBuffer<float> buffer(64);
  const cuda::PrefillAttentionArgs<float> args{.queries = buffer.data(), .n = 1, .num_keys = 1, .query_heads = 4,
                                               .kv_heads = 1, .head_dim = 8, .output_gate = buffer.data(),
                                               .output_gate_stride = 3};
  DeviceBuffer<float> out(32);
  testing::expect_error([&] { cuda::attention_prefill(args, out.data(), nullptr); },
                        {"attention", "output gate stride 3", "4 query heads"});
}

// The mLSTM's outputs in the epilogue (PrefillMlstmOutputs) exist for bf16 keys and output with
// the head sizes attention_prefill_takes_mlstm_outputs names: an offer to any other kernel is
// refused by name, before anything launches.
TEST(CudaPrefillAttentionArguments, MlstmOutputsTheKernelCannotTakeAreRefusedByName) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const DeviceBuffer<float> buffer(64);
  const DeviceBuffer<__nv_bfloat16> states(64);
  const cuda::PrefillMlstmOutputs offer{.states = states.data(), .chunks = 1};
  const cuda::PrefillAttentionArgs<float> fp32_keys{.queries = buffer.data(), .n = 1, .num_keys = 1, .query_heads = 4,
                                                    .kv_heads = 1, .head_dim = 128};
  DeviceBuffer<float> out(512);
  testing::expect_error([&] { cuda::attention_prefill(fp32_keys, out.data(), nullptr, offer); },
                        {"attention", "mLSTM outputs", "not fp32 keys and fp32 output"});
  const DeviceBuffer<__nv_bfloat16> keys(512);
  const cuda::PrefillAttentionArgs<__nv_bfloat16> narrow_heads{.queries = buffer.data(), .n = 1, .keys = keys.data(),
                                                               .values = keys.data(), .num_keys = 1, .query_heads = 4,
                                                               .kv_heads = 1, .head_dim = 64};
  DeviceBuffer<__nv_bfloat16> bf16_out(256);
  testing::expect_error([&] { cuda::attention_prefill(narrow_heads, bf16_out.data(), nullptr, offer); },
                        {"attention", "mLSTM outputs", "bf16 output with head_dim 64"});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaPrefillAttention,
    ::testing::Values(
        // Full attention: a first chunk, a later chunk, a single token; tiles of 64 queries cut.
        PrefillCase{4, 1, 16, 0, 0, false, Layout::Linear, 0, 100}, PrefillCase{4, 4, 24, 0, 0, false, Layout::Linear, 50, 65},
        PrefillCase{6, 2, 32, 0, 0, false, Layout::Linear, 7, 1}, PrefillCase{8, 2, 48, 0, 0, false, Layout::Linear, 0, 64},
        PrefillCase{4, 1, 64, 0, 0, false, Layout::Linear, 100, 130}, PrefillCase{2, 2, 8, 0, 0, false, Layout::Linear, 0, 33},
        PrefillCase{4, 1, 128, 0, 0, false, Layout::Linear, 10, 70}, PrefillCase{4, 4, 256, 0, 0, false, Layout::Linear, 0, 90},
        PrefillCase{8, 8, 96, 0, 0, true, Layout::Linear, 0, 40}, PrefillCase{16, 1, 200, 0, 0, false, Layout::Linear, 3, 20},
        PrefillCase{32, 8, 128, 0, 0, false, Layout::Linear, 0, 300},  // Qwen3-4B
        // swa(w, s) over the gathered window: chunks longer than the window (evictions inside the
        // chunk), shorter ones after a wrapped ring, and the same keys shuffled with empty ones.
        PrefillCase{4, 1, 16, 8, 4, false, Layout::Ring, 0, 40}, PrefillCase{4, 2, 24, 16, 4, false, Layout::Ring, 1000, 7},
        PrefillCase{8, 2, 64, 64, 4, false, Layout::Ring, 0, 200}, PrefillCase{4, 4, 48, 20, 1, false, Layout::Ring, 333, 50},
        PrefillCase{32, 8, 128, 576, 4, false, Layout::Ring, 10000, 129},
        PrefillCase{4, 1, 32, 12, 4, false, Layout::Shuffled, 100, 30},
        PrefillCase{8, 2, 256, 40, 4, false, Layout::Shuffled, 5, 70},
        // Learned sinks (s = 0) and none.
        PrefillCase{4, 1, 16, 8, 0, true, Layout::Ring, 0, 30}, PrefillCase{32, 8, 128, 576, 0, true, Layout::Ring, 700, 100},
        PrefillCase{6, 3, 64, 32, 0, true, Layout::Shuffled, 90, 45},
        PrefillCase{4, 2, 32, 10, 0, false, Layout::Ring, 20, 25}));

}  // namespace
}  // namespace bifocal
