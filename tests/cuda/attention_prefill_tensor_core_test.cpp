// The tensor-core prefill attention (attention_prefill_tensor_core.cu: bf16 keys and values,
// head_dim 64, 128 or 256), reached through attention_prefill as every caller reaches it, against the
// CPU backend's attention (CpuBackend::attention) on the very bf16 key/value values the device
// holds. Fresh random inputs each run (the seed is printed with any failure); outputs poisoned
// (0xFF: NaN) before each run; empty cache slots and cache rows no token wrote hold NaN, so
// reading one shows. Masks: full causal, swa(w, s) sink tokens, learned sinks, the plain window;
// chunks at position 0 and later chunks over a cache of earlier keys (linear, the windowed
// mixer's gathered ring + chunk with key_positions, and that list shuffled with empty slots); n
// cut against the 64-row tiles; GQA groups 1, 3, 4, 6, 8; head_dim 64, 128 and 256 (two blocks a
// row group, each with half of O: both halves must land); fp32 and bf16 out.
//
// Tolerance 1e-2 relative (‖got − want‖ / ‖want‖), both outputs. The kernel rounds q and the
// softmax weights p to bf16 for the mma (k and v are bf16 already, and so are the reference's).
// One bf16 rounding is ≤ 2⁻⁹ relative, RMS ≈ 2⁻⁹/√3 ≈ 1.1e-3, per element. Here q, k ~ N(0, 2²),
// so a logit q·k/√d has standard deviation 4 and q's rounding moves it by ≈ 4 · 1.1e-3 ≈ 5e-3:
// each weight changes by ≈ 0.5% relative and the output, an average over keys, by ≈ 3e-3
// (2.3e-3 … 4.8e-3 measured on these shapes in a host emulation of the kernel); rounding p adds
// ≈ 1e-3/√keys, a bf16 output ≤ 2⁻⁹. 1e-2 leaves 2–3× margin, while a wrong index, mask or
// missed tile gives errors of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_prefill.cuh"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal {
namespace {

using bf16 = __nv_bfloat16;
using cuda::DeviceBuffer;
using testing::as_stored;
using testing::random_vector;
using testing::relative_error;
using testing::to_storage;

constexpr double kTensorCoreTolerance = 1e-2;

enum class Keys {
  Linear,    // key j at position j (key_positions nullptr): full attention's cache
  Gathered,  // the windowed mixer's list: its ring of `window` slots (−1 where empty), then the chunk
  Shuffled,  // the gathered list in a random order, with 7 more empty slots
};

struct TensorCoreCase {
  int query_heads, kv_heads, head_dim;
  int window, sink_tokens;  // window 0: full attention
  bool learned_sink;
  Keys keys;
  std::int64_t first;  // position of the chunk's first query
  int n;
  int unwritten_rows = 0;  // Linear: cache rows past the chunk that no token wrote (NaN)
};

void PrintTo(const TensorCoreCase& c, std::ostream* out) {
  const char* layouts[] = {"linear", "gathered", "shuffled"};
  *out << "Hq=" << c.query_heads << " Hkv=" << c.kv_heads << " d=" << c.head_dim << " w=" << c.window
       << " s=" << c.sink_tokens << (c.learned_sink ? " learned" : "") << " " << layouts[int(c.keys)]
       << " first=" << c.first << " n=" << c.n << (c.unwritten_rows ? " +unwritten" : "");
}

// The slot of position p in swa(w, s)'s ring: sliding_window_mixer.cpp's slot_of.
std::int64_t ring_slot(std::int64_t p, int window, int sink_tokens) {
  return p < sink_tokens ? p : sink_tokens + (p - sink_tokens) % (window - sink_tokens);
}

// The position of every key the kernel sees; −1 for an empty slot or a row no token wrote.
std::vector<std::int64_t> key_positions(const TensorCoreCase& c, std::mt19937& rng) {
  std::vector<std::int64_t> positions;
  if (c.keys == Keys::Linear) {
    positions.resize(c.first + c.n);
    std::iota(positions.begin(), positions.end(), 0);
    positions.insert(positions.end(), c.unwritten_rows, -1);
    return positions;
  }
  positions.assign(c.window, -1);  // the ring after tokens 0 … first − 1, later tokens overwriting
  for (std::int64_t p = 0; p < c.first; ++p) positions[ring_slot(p, c.window, c.sink_tokens)] = p;
  for (int i = 0; i < c.n; ++i) positions.push_back(c.first + i);
  if (c.keys == Keys::Shuffled) {
    positions.insert(positions.end(), 7, -1);
    std::shuffle(positions.begin(), positions.end(), rng);
  }
  return positions;
}

// Runs attention_prefill<bf16, OutT> on fresh inputs for case c; the relative error against the CPU.
template <typename OutT>
double tensor_core_error(const TensorCoreCase& c, std::mt19937& rng) {
  const int d = c.head_dim;
  const std::size_t row = std::size_t(c.kv_heads) * d;
  const auto positions_of_keys = key_positions(c, rng);
  const std::int64_t num_keys = std::int64_t(positions_of_keys.size());
  auto keys = random_vector(num_keys * row, rng, 2.0f), values = random_vector(num_keys * row, rng);
  for (std::int64_t j = 0; j < num_keys; ++j)
    if (positions_of_keys[j] < 0) {
      std::fill_n(keys.begin() + j * row, row, NAN);
      std::fill_n(values.begin() + j * row, row, NAN);
    }
  const auto queries = random_vector(std::size_t(c.n) * c.query_heads * d, rng, 2.0f);
  const auto sinks = random_vector(c.query_heads, rng, 2.0f);
  std::vector<std::int64_t> positions(c.n);
  std::iota(positions.begin(), positions.end(), c.first);

  // The reference sees the written keys only, as the device stores them (bf16).
  std::vector<float> reference_keys, reference_values;
  std::vector<std::int64_t> reference_positions;
  const auto stored_keys = as_stored<bf16>(keys), stored_values = as_stored<bf16>(values);
  for (std::int64_t j = 0; j < num_keys; ++j) {
    if (positions_of_keys[j] < 0) continue;
    reference_keys.insert(reference_keys.end(), stored_keys.begin() + j * row, stored_keys.begin() + (j + 1) * row);
    reference_values.insert(reference_values.end(), stored_values.begin() + j * row,
                            stored_values.begin() + (j + 1) * row);
    reference_positions.push_back(positions_of_keys[j]);
  }
  std::vector<float> want(queries.size());
  CpuBackend().attention({.queries = queries.data(),
                          .positions = positions.data(),
                          .n = c.n,
                          .keys = reference_keys.data(),
                          .values = reference_values.data(),
                          .key_positions = reference_positions.data(),
                          .num_keys = std::int64_t(reference_positions.size()),
                          .query_heads = c.query_heads,
                          .kv_heads = c.kv_heads,
                          .head_dim = d,
                          .window = c.window,
                          .sink_tokens = c.sink_tokens,
                          .learned_sinks = c.learned_sink ? sinks.data() : nullptr,
                          .out = want.data()});

  const DeviceBuffer<float> device_queries{std::span<const float>(queries)},
      device_sinks{std::span<const float>(sinks)};
  const DeviceBuffer<std::int64_t> device_positions{std::span<const std::int64_t>(positions)};
  const DeviceBuffer<bf16> device_keys{std::span<const bf16>(to_storage<bf16>(keys))};
  const DeviceBuffer<bf16> device_values{std::span<const bf16>(to_storage<bf16>(values))};
  const DeviceBuffer<std::int64_t> device_key_positions{std::span<const std::int64_t>(positions_of_keys)};
  DeviceBuffer<OutT> out(queries.size());
  out.fill_bytes(0xFF);
  const cuda::PrefillAttentionArgs<bf16> args{
      .queries = device_queries.data(),
      .positions = device_positions.data(),
      .n = c.n,
      .keys = device_keys.data(),
      .values = device_values.data(),
      .key_positions = c.keys == Keys::Linear ? nullptr : device_key_positions.data(),
      .num_keys = num_keys,
      .query_heads = c.query_heads,
      .kv_heads = c.kv_heads,
      .head_dim = d,
      .window = c.window,
      .sink_tokens = c.sink_tokens,
      .learned_sinks = c.learned_sink ? device_sinks.data() : nullptr};
  EXPECT_TRUE(cuda::prefill_uses_tensor_cores(args)) << "bf16 keys with head_dim " << d << " take the SIMT kernel";
  cuda::attention_prefill(args, out.data(), nullptr);
  cuda::check(cudaDeviceSynchronize(), "attention_prefill");
  if constexpr (std::is_same_v<OutT, float>)
    return relative_error(out.download(), want);
  else
    return relative_error(testing::to_float(out.download()), want);
}

class TensorCorePrefill : public testing::SeededCudaTest, public ::testing::WithParamInterface<TensorCoreCase> {};
class TensorCorePrefillRuns : public testing::SeededCudaTest {};

TEST_P(TensorCorePrefill, MatchesCpuWithinBf16RoundingForFp32AndBf16Outputs) {
  const TensorCoreCase c = GetParam();
  testing::ErrorLog log{"tensor-core prefill attention"};
  EXPECT_LT(log.add(tensor_core_error<float>(c, rng_)), kTensorCoreTolerance) << "fp32 out";
  EXPECT_LT(log.add(tensor_core_error<bf16>(c, rng_)), kTensorCoreTolerance) << "bf16 out";
}

INSTANTIATE_TEST_SUITE_P(
    Masks, TensorCorePrefill,
    ::testing::Values(
        // Full causal: a first chunk (n cut against the tiles), one tile exactly, a single token,
        // later chunks over earlier keys, rows past the chunk that hold NaN; GQA 4, 1, 8, 3, 6.
        TensorCoreCase{4, 1, 64, 0, 0, false, Keys::Linear, 0, 100},
        TensorCoreCase{8, 8, 128, 0, 0, false, Keys::Linear, 0, 64},
        TensorCoreCase{16, 2, 128, 0, 0, false, Keys::Linear, 77, 1},
        TensorCoreCase{32, 8, 128, 0, 0, false, Keys::Linear, 300, 333},  // Qwen3-4B
        TensorCoreCase{4, 4, 64, 0, 0, false, Keys::Linear, 40, 75, 50},
        TensorCoreCase{6, 2, 64, 0, 0, false, Keys::Linear, 5, 90},
        TensorCoreCase{12, 2, 128, 0, 0, false, Keys::Linear, 130, 47},
        // A window rule over a linear cache (an HF sliding_window): most tiles skipped.
        TensorCoreCase{4, 1, 64, 50, 4, false, Keys::Linear, 900, 130},
        // swa(w, s) sink tokens over the gathered ring: a first chunk longer than the window (empty
        // ring, evictions inside the chunk), chunks after a wrapped ring, shuffled with empty slots.
        TensorCoreCase{4, 1, 64, 16, 4, false, Keys::Gathered, 0, 100},
        TensorCoreCase{32, 8, 128, 576, 4, false, Keys::Gathered, 10000, 129},
        TensorCoreCase{32, 8, 128, 576, 4, false, Keys::Gathered, 0, 700},
        TensorCoreCase{16, 2, 128, 100, 1, false, Keys::Gathered, 1000, 300},
        TensorCoreCase{8, 2, 64, 64, 4, false, Keys::Shuffled, 500, 90},
        // Learned sinks (s = 0), with a window and with full attention.
        TensorCoreCase{32, 8, 128, 576, 0, true, Keys::Gathered, 700, 100},
        TensorCoreCase{6, 3, 64, 32, 0, true, Keys::Shuffled, 90, 45},
        TensorCoreCase{4, 1, 128, 0, 0, true, Keys::Linear, 0, 50},
        // The plain window (no sink).
        TensorCoreCase{4, 2, 64, 10, 0, false, Keys::Gathered, 20, 25},
        TensorCoreCase{8, 1, 128, 48, 0, false, Keys::Gathered, 3000, 200},
        // head_dim 256 (Qwen3.5-like: 16 query heads, 4 KV heads): full causal with rows past the
        // chunk, swa(w, s) over the gathered ring, a learned sink, shuffled keys with empty slots.
        TensorCoreCase{4, 1, 256, 0, 0, false, Keys::Linear, 30, 100, 40},
        TensorCoreCase{16, 4, 256, 576, 4, false, Keys::Gathered, 3000, 129},
        TensorCoreCase{16, 4, 256, 320, 0, true, Keys::Gathered, 0, 500},
        TensorCoreCase{6, 3, 256, 40, 4, false, Keys::Shuffled, 90, 70}));

// A long chunk of Qwen3-4B under swa(576, 4 sinks): 1,024 queries over the wrapped ring, every
// query block far from key 0, so the sink tile, the window's first tile and the diagonal all mask.
TEST_F(TensorCorePrefillRuns, LongQwen3ChunkUnderSlidingWindowMatchesCpu) {
  testing::ErrorLog log{"tensor-core prefill attention, 1,024-token chunk"};
  const TensorCoreCase c{32, 8, 128, 576, 4, false, Keys::Gathered, 4000, 1024};
  EXPECT_LT(log.add(tensor_core_error<bf16>(c, rng_)), kTensorCoreTolerance);
}

// Full attention's prefill as the device mixer runs it: store_kv_slots writes the chunk's keys
// into the linear cache and attention_prefill reads them right after on the same stream, the
// attention launched as a programmatic dependent. A kernel that read before its
// wait_for_previous_kernel() would see the NaN the cache was poisoned with. Three chunks, the last
// one captured in a CUDA graph and replayed.
TEST_F(TensorCorePrefillRuns, ReadsKeysStoredByThePreviousKernelOnTheStream) {
  testing::ErrorLog log{"tensor-core prefill after store_kv_slots"};
  const int query_heads = 32, kv_heads = 8, d = 128, n = 200, chunks = 3;
  const std::size_t row = std::size_t(kv_heads) * d, query_row = std::size_t(query_heads) * d;
  DeviceBuffer<bf16> cache_keys(chunks * n * row), cache_values(chunks * n * row);
  cache_keys.fill_bytes(0xFF);
  cache_values.fill_bytes(0xFF);
  DeviceBuffer<float> queries(n * query_row), new_keys(n * row), new_values(n * row), out(n * query_row);
  DeviceBuffer<std::int64_t> positions(n);
  cudaStream_t stream;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  std::vector<float> all_keys, all_values;  // every token so far, as stored: the reference's cache
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const auto q = random_vector(n * query_row, rng_, 2.0f), k = random_vector(n * row, rng_, 2.0f),
               v = random_vector(n * row, rng_);
    std::vector<std::int64_t> chunk_positions(n);
    std::iota(chunk_positions.begin(), chunk_positions.end(), std::int64_t(chunk) * n);
    queries.upload(q);
    new_keys.upload(k);
    new_values.upload(v);
    positions.upload(chunk_positions);
    out.fill_bytes(0xFF);
    const cuda::PrefillAttentionArgs<bf16> args{.queries = queries.data(),
                                                .positions = positions.data(),
                                                .n = n,
                                                .keys = cache_keys.data(),
                                                .values = cache_values.data(),
                                                .key_positions = nullptr,
                                                .num_keys = std::int64_t(chunk + 1) * n,
                                                .query_heads = query_heads,
                                                .kv_heads = kv_heads,
                                                .head_dim = d};
    const auto run = [&] {
      cuda::store_kv_slots<bf16>(new_keys.data(), new_values.data(), n, positions.data(), cache_keys.data(),
                                 cache_values.data(), nullptr, kv_heads, d, 0, 0, stream);
      cuda::attention_prefill(args, out.data(), stream);
    };
    if (chunk + 1 < chunks) {
      run();
    } else {
      cudaGraph_t graph;
      cudaGraphExec_t replay;
      cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
      run();
      cuda::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
      cuda::check(cudaGraphInstantiate(&replay, graph, 0), "cudaGraphInstantiate");
      cuda::check(cudaGraphLaunch(replay, stream), "cudaGraphLaunch");
      cuda::check(cudaStreamSynchronize(stream), "graph replay");
      cudaGraphExecDestroy(replay);
      cudaGraphDestroy(graph);
    }
    cuda::check(cudaStreamSynchronize(stream), "prefill chunk");

    const auto stored_k = as_stored<bf16>(k), stored_v = as_stored<bf16>(v);
    all_keys.insert(all_keys.end(), stored_k.begin(), stored_k.end());
    all_values.insert(all_values.end(), stored_v.begin(), stored_v.end());
    std::vector<float> want(n * query_row);
    CpuBackend().attention({.queries = q.data(),
                            .positions = chunk_positions.data(),
                            .n = n,
                            .keys = all_keys.data(),
                            .values = all_values.data(),
                            .key_positions = nullptr,
                            .num_keys = std::int64_t(chunk + 1) * n,
                            .query_heads = query_heads,
                            .kv_heads = kv_heads,
                            .head_dim = d,
                            .out = want.data()});
    EXPECT_LT(log.add(relative_error(out.download(), want)), kTensorCoreTolerance) << "chunk " << chunk;
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace bifocal
