// The CUDA decode attention kernels (attention_decode.cuh; prefill: attention_prefill_test.cpp)
// against the CPU backend's attention (CpuBackend::attention) on the very key/value values the device holds
// (rounded to bf16 or fp16 for 16-bit storage). Fresh random inputs each run (the seed is printed with any
// failure); outputs poisoned (0xFF: NaN) before each run; empty cache slots and cache rows past
// the query hold NaN, so reading one shows. Masks: full, swa(w, s), learned sink, none; caches
// partially filled, wrapped rings (positions far past the window), shuffled slots; GQA 1:1, 3:1,
// 4:1, 16:1; head dims 8 … 256; Qwen3-4B's shape; a 70,000-slot cache (split path and combine).
// Decode's paths: caches of ≤ 2048 slots (kWindowDecodeMaxSlots) take the one-launch cluster
// kernel (attention_decode_window.cu): 1 … 8 blocks per cluster (slots 1, 15, 16, 17, …), one
// round of loads or double-buffered rounds (d = 256, fp32 near 2K), linear caches split by the
// position (blocks with no slot), rings by slot, empty ring slots (NaN) skipped. Longer caches
// take the split kernel (attention_decode.cu): bf16/fp16 on tensor cores, fp32 on plain FMA, many
// ranges and the combine kernel; head dims ≡ 8 (mod 16) (zero-padded mma k-step); GQA groups
// 1 … 16 (> 8: several blocks or clusters per KV head); linear caches much larger than the
// query's position, windows over a linear cache (hidden rows never read). Every case runs bf16,
// fp16 and fp32 caches and both output types; cases whose slot rule is store_kv_slots' (all but the
// shuffled ones) also run with the store folded in (DecodeAttentionArgs::new_key): the new
// token's cache row poisoned and its slot marked empty before, its bytes and position checked
// after.
// Tolerances: fp32 outputs 1e-5 (the same fp32 math, only the summation order differs);
// bf16 outputs 5e-3 (one rounding, ≤ 2⁻⁹ relative per element), fp16 outputs 1e-3 (≤ 2⁻¹²).
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
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_prefill.cuh"
#include "cuda/attention_test_support.h"
#include "cuda/cuda_test_support.h"
#include "numerics.h"

namespace bifocal {
namespace {

using namespace testing::attention;

using cuda::DeviceBuffer;
using testing::random_vector;
using testing::as_stored;
using testing::relative_error;
using testing::to_storage;
using testing::download_floats;

// The fixture of the single tests: skipped where no GPU is present.
class CudaAttention : public testing::CudaTest {};

// ---- Decode ----------------------------------------------------------------------------------

struct DecodeCase {
  int query_heads, kv_heads, head_dim;
  int window, sink_tokens;  // window 0: full attention
  bool learned_sink;
  Layout layout;            // Linear: slot j holds position j (slot_positions nullptr); Ring: swa's
  std::int64_t slots;       // ring; Shuffled: the ring's slots in a random order
  std::int64_t position;    // the query token's position (it is in the cache, as after a store)
};

void PrintTo(const DecodeCase& c, std::ostream* out) {
  const char* layouts[] = {"linear", "ring", "shuffled"};
  *out << "Hq=" << c.query_heads << " Hkv=" << c.kv_heads << " d=" << c.head_dim << " w=" << c.window
       << " s=" << c.sink_tokens << (c.learned_sink ? " learned" : "") << " " << layouts[int(c.layout)]
       << " slots=" << c.slots << " p=" << c.position;
}

// The cache after tokens 0 … position were stored (the rows random, the rest NaN).
Cache decode_cache(const DecodeCase& c, std::mt19937& rng) {
  const std::size_t row = std::size_t(c.kv_heads) * c.head_dim;
  Cache cache{std::vector<float>(c.slots * row, NAN), std::vector<float>(c.slots * row, NAN),
              std::vector<std::int64_t>(c.slots, -1)};
  const std::int64_t first = c.layout == Layout::Linear ? 0 : std::max<std::int64_t>(0, c.position - c.slots + 1);
  auto store = [&](std::int64_t p) {
    const std::int64_t slot = c.layout == Layout::Linear ? p : ring_slot(p, c.slots, c.sink_tokens);
    const auto k = random_vector(row, rng, 2.0f), v = random_vector(row, rng);
    std::copy(k.begin(), k.end(), cache.keys.begin() + slot * row);
    std::copy(v.begin(), v.end(), cache.values.begin() + slot * row);
    cache.slot_positions[slot] = p;
  };
  for (std::int64_t p = 0; p < std::min<std::int64_t>(c.sink_tokens, c.position + 1); ++p) store(p);
  for (std::int64_t p = std::max<std::int64_t>(first, c.sink_tokens); p <= c.position; ++p) store(p);
  if (c.layout == Layout::Shuffled) {
    std::vector<std::int64_t> order(c.slots);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    Cache shuffled = cache;
    for (std::int64_t to = 0; to < c.slots; ++to) {
      const std::int64_t from = order[to];
      std::copy_n(cache.keys.begin() + from * row, row, shuffled.keys.begin() + to * row);
      std::copy_n(cache.values.begin() + from * row, row, shuffled.values.begin() + to * row);
      shuffled.slot_positions[to] = cache.slot_positions[from];
    }
    cache = std::move(shuffled);
  }
  return cache;
}

// Runs attention_decode<T, OutT> on a fresh cache for case c; the relative error against the CPU.
// fused_store: the query token's key/value are passed as new_key/new_value and its slot on the
// device holds NaN and position −1 until the kernel stores them (checked afterwards).
template <typename T, typename OutT>
double decode_error(const DecodeCase& c, std::mt19937& rng, bool double_reference = false, bool fused_store = false) {
  const int d = c.head_dim;
  const std::size_t row = std::size_t(c.kv_heads) * d;
  const Cache cache = decode_cache(c, rng);
  const auto query = random_vector(std::size_t(c.query_heads) * d, rng, 2.0f);
  const auto sinks = random_vector(c.query_heads, rng, 2.0f);

  const ReferenceKeys ref = reference_keys<T>(cache, row);
  std::vector<float> want(query.size());
  const AttentionArgs args{.queries = query.data(), .positions = &c.position, .n = 1, .keys = ref.keys.data(),
                           .values = ref.values.data(), .key_positions = ref.positions.data(),
                           .num_keys = std::int64_t(ref.positions.size()), .query_heads = c.query_heads,
                           .kv_heads = c.kv_heads, .head_dim = d, .window = c.window, .sink_tokens = c.sink_tokens,
                           .learned_sinks = c.learned_sink ? sinks.data() : nullptr, .out = want.data()};
  if (double_reference)
    want = reference::attention(args);
  else
    CpuBackend().attention(args);

  // The device's cache: with the store folded in, the new token's slot as before its store.
  const std::int64_t new_slot =
      c.layout == Layout::Linear ? c.position : ring_slot(c.position, c.window, c.sink_tokens);
  Cache device_cache = cache;
  const std::vector<float> new_key(cache.keys.begin() + new_slot * row, cache.keys.begin() + (new_slot + 1) * row);
  const std::vector<float> new_value(cache.values.begin() + new_slot * row,
                                     cache.values.begin() + (new_slot + 1) * row);
  if (fused_store) {
    std::fill_n(device_cache.keys.begin() + new_slot * row, row, NAN);
    std::fill_n(device_cache.values.begin() + new_slot * row, row, NAN);
    device_cache.slot_positions[new_slot] = -1;
  }
  const DeviceBuffer<float> device_query{std::span<const float>(query)}, device_sinks{std::span<const float>(sinks)};
  const DeviceBuffer<float> device_new_key{std::span<const float>(new_key)};
  const DeviceBuffer<float> device_new_value{std::span<const float>(new_value)};
  const DeviceBuffer<std::int64_t> device_position{std::span<const std::int64_t>(&c.position, 1)};
  DeviceBuffer<T> keys{std::span<const T>(to_storage<T>(device_cache.keys))};  // written by the folded store
  DeviceBuffer<T> values{std::span<const T>(to_storage<T>(device_cache.values))};
  DeviceBuffer<std::int64_t> slot_positions{std::span<const std::int64_t>(device_cache.slot_positions)};
  DeviceBuffer<std::byte> workspace(cuda::attention_decode_workspace_bytes(c.slots, c.query_heads, c.kv_heads, d));
  DeviceBuffer<OutT> out(query.size());
  out.fill_bytes(0xFF);
  if (workspace.size() > 0) workspace.fill_bytes(0xFF);  // a short cache needs none
  const cuda::DecodeAttentionArgs<T> device_args{
      .query = device_query.data(), .query_position = device_position.data(), .keys = keys.data(),
      .values = values.data(), .slot_positions = c.layout == Layout::Linear ? nullptr : slot_positions.data(),
      .slots = c.slots, .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d, .window = c.window,
      .sink_tokens = c.sink_tokens, .learned_sinks = c.learned_sink ? device_sinks.data() : nullptr,
      .new_key = fused_store ? device_new_key.data() : nullptr,
      .new_value = fused_store ? device_new_value.data() : nullptr};
  cuda::attention_decode(device_args, workspace.data(), out.data(), nullptr);
  cuda::check(cudaDeviceSynchronize(), "attention_decode");
  if (fused_store) {  // the stored row as store_kv_slots writes it, and its position
    const auto stored_keys = download_floats(keys), stored_values = download_floats(values);
    const auto want_key = as_stored<T>(new_key), want_value = as_stored<T>(new_value);
    EXPECT_TRUE(std::equal(want_key.begin(), want_key.end(), stored_keys.begin() + new_slot * row)) << "stored key";
    EXPECT_TRUE(std::equal(want_value.begin(), want_value.end(), stored_values.begin() + new_slot * row))
        << "stored value";
    if (c.layout != Layout::Linear) EXPECT_EQ(slot_positions.download()[new_slot], c.position) << "stored position";
  }
  return relative_error(download_floats(out), want);
}

class CudaDecodeAttention : public testing::CudaTest, public ::testing::WithParamInterface<DecodeCase> {};

TEST_P(CudaDecodeAttention, MatchesCpuForBf16Fp16AndFp32Storage) {
  const DecodeCase c = GetParam();
  Seeded seeded;
  SCOPED_TRACE("seed " + std::to_string(seeded.seed));
  testing::ErrorLog log{"decode attention"};
  // Past the one-launch kernel's 2,048 slots the reference is reference::attention (double sums):
  // CpuBackend's sequential fp32 sums over thousands of keys carry ~1e-5 of rounding themselves
  // (5,000 slots: 1.05–1.30e-5 against it in 7 of 14 runs on the H200, stop 23).
  const bool exact = c.slots > cuda::kWindowDecodeMaxSlots;
  std::mt19937& rng = seeded.rng;
  EXPECT_LT(log.add(decode_error<__nv_bfloat16, float>(c, rng, exact)), kFp32Tolerance) << "bf16 cache, fp32 out";
  EXPECT_LT(log.add(decode_error<__half, float>(c, rng, exact)), kFp32Tolerance) << "fp16 cache, fp32 out";
  EXPECT_LT(log.add(decode_error<float, float>(c, rng, exact)), kFp32Tolerance) << "fp32 cache, fp32 out";
  EXPECT_LT((decode_error<__nv_bfloat16, __nv_bfloat16>(c, rng, exact)), kBf16Tolerance) << "bf16 cache, bf16 out";
  EXPECT_LT((decode_error<__half, __half>(c, rng, exact)), kFp16Tolerance) << "fp16 cache, fp16 out";
  EXPECT_LT((decode_error<float, __nv_bfloat16>(c, rng, exact)), kBf16Tolerance) << "fp32 cache, bf16 out";
  if (c.layout == Layout::Shuffled) return;  // no slot rule to store by
  EXPECT_LT(log.add(decode_error<__nv_bfloat16, float>(c, rng, exact, true)), kFp32Tolerance)
      << "bf16 cache, fp32 out, store folded in";
  EXPECT_LT(log.add(decode_error<__half, float>(c, rng, exact, true)), kFp32Tolerance)
      << "fp16 cache, fp32 out, store folded in";
  EXPECT_LT(log.add(decode_error<float, float>(c, rng, exact, true)), kFp32Tolerance)
      << "fp32 cache, fp32 out, store folded in";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaDecodeAttention,
    ::testing::Values(
        // Full attention on a linear cache, partly filled (rows past the query are NaN).
        DecodeCase{4, 1, 16, 0, 0, false, Layout::Linear, 100, 0}, DecodeCase{4, 1, 16, 0, 0, false, Layout::Linear, 100, 37},
        DecodeCase{4, 4, 24, 0, 0, false, Layout::Linear, 333, 332}, DecodeCase{6, 2, 32, 0, 0, false, Layout::Linear, 64, 50},
        DecodeCase{8, 2, 48, 0, 0, false, Layout::Linear, 1000, 999}, DecodeCase{8, 8, 64, 0, 0, false, Layout::Linear, 5000, 4321},
        DecodeCase{16, 1, 128, 0, 0, false, Layout::Linear, 3000, 2500}, DecodeCase{4, 1, 256, 0, 0, false, Layout::Linear, 2000, 1999},
        DecodeCase{2, 2, 8, 0, 0, false, Layout::Linear, 77, 76}, DecodeCase{32, 8, 128, 0, 0, false, Layout::Linear, 4096, 4095},
        // A window rule on a linear cache (an HF sliding_window): only the visible rows are read.
        DecodeCase{4, 1, 64, 50, 4, false, Layout::Linear, 900, 800},
        // swa(w, s) rings: filling up, just full, wrapped far past the window; shuffled slots.
        DecodeCase{4, 1, 16, 8, 4, false, Layout::Ring, 8, 2}, DecodeCase{4, 1, 16, 8, 4, false, Layout::Ring, 8, 7},
        DecodeCase{4, 2, 24, 16, 4, false, Layout::Ring, 16, 1001}, DecodeCase{6, 6, 32, 64, 1, false, Layout::Ring, 64, 63},
        DecodeCase{8, 2, 48, 64, 4, false, Layout::Shuffled, 64, 5000}, DecodeCase{4, 4, 64, 7, 2, false, Layout::Shuffled, 7, 4},
        DecodeCase{32, 8, 128, 576, 4, false, Layout::Ring, 576, 100000},
        DecodeCase{32, 8, 128, 576, 4, false, Layout::Shuffled, 576, 300},
        DecodeCase{8, 2, 256, 40, 4, false, Layout::Ring, 40, 77},
        // Learned sinks (s = 0) and none.
        DecodeCase{4, 1, 16, 8, 0, true, Layout::Ring, 8, 30}, DecodeCase{4, 4, 32, 20, 0, true, Layout::Ring, 20, 3},
        DecodeCase{32, 8, 128, 576, 0, true, Layout::Ring, 576, 9999},
        DecodeCase{16, 1, 64, 100, 0, true, Layout::Shuffled, 100, 1234},
        DecodeCase{4, 2, 32, 10, 0, false, Layout::Ring, 10, 55}, DecodeCase{4, 1, 128, 0, 0, true, Layout::Linear, 300, 299},
        // Head dims ≡ 8 (mod 16) and the widest tiles, GQA groups 1 … 16, direct and combined.
        DecodeCase{8, 1, 8, 0, 0, false, Layout::Linear, 64, 63}, DecodeCase{8, 1, 40, 0, 0, true, Layout::Linear, 700, 650},
        DecodeCase{4, 2, 200, 0, 0, false, Layout::Linear, 500, 499}, DecodeCase{8, 4, 96, 0, 0, false, Layout::Linear, 1000, 998},
        DecodeCase{8, 8, 128, 0, 0, true, Layout::Linear, 3000, 2999}, DecodeCase{8, 1, 128, 64, 0, true, Layout::Ring, 64, 200},
        DecodeCase{4, 2, 256, 0, 0, true, Layout::Linear, 1500, 1400}, DecodeCase{32, 2, 256, 0, 0, false, Layout::Linear, 800, 799},
        DecodeCase{6, 1, 64, 90, 2, false, Layout::Ring, 90, 3000}, DecodeCase{24, 2, 128, 0, 0, true, Layout::Linear, 600, 555},
        // Positions on tile edges (16 slots), and a cache far larger than the position.
        DecodeCase{8, 2, 64, 0, 0, false, Layout::Linear, 200, 15}, DecodeCase{8, 2, 64, 0, 0, false, Layout::Linear, 200, 16},
        DecodeCase{8, 2, 64, 0, 0, false, Layout::Linear, 65, 64}, DecodeCase{4, 1, 64, 0, 0, false, Layout::Linear, 20000, 500},
        DecodeCase{32, 8, 128, 0, 0, true, Layout::Linear, 8192, 100},
        // Windows over a linear cache (whole tiles hidden), nearly empty and partial rings.
        DecodeCase{8, 2, 128, 100, 0, true, Layout::Linear, 2000, 1500}, DecodeCase{8, 2, 64, 40, 8, false, Layout::Linear, 3000, 2900},
        DecodeCase{32, 8, 128, 576, 4, false, Layout::Ring, 576, 10}, DecodeCase{8, 2, 64, 576, 0, true, Layout::Shuffled, 576, 40},
        DecodeCase{8, 2, 128, 100, 0, true, Layout::Ring, 100, 5000}, DecodeCase{8, 2, 128, 100, 4, false, Layout::Shuffled, 100, 70},
        // Both sides of the one-launch threshold (2048 slots) and of the cluster sizes (16 slots
        // per block: 1, 15, 16 → 1 block, 17 → 2): every mask, GQA 1/4/8, d 64/128/256.
        DecodeCase{8, 8, 64, 0, 0, false, Layout::Linear, 1, 0}, DecodeCase{4, 1, 128, 0, 0, true, Layout::Linear, 15, 14},
        DecodeCase{8, 1, 256, 0, 0, false, Layout::Linear, 16, 15}, DecodeCase{32, 8, 128, 0, 0, false, Layout::Linear, 17, 16},
        DecodeCase{16, 2, 64, 15, 3, false, Layout::Ring, 15, 100}, DecodeCase{4, 4, 128, 16, 0, true, Layout::Ring, 16, 16},
        DecodeCase{8, 2, 256, 17, 4, false, Layout::Ring, 17, 40}, DecodeCase{8, 8, 64, 576, 0, false, Layout::Ring, 576, 1000},
        DecodeCase{8, 1, 256, 576, 4, false, Layout::Ring, 576, 700}, DecodeCase{16, 1, 64, 448, 0, true, Layout::Ring, 448, 448},
        DecodeCase{32, 8, 128, 2048, 4, false, Layout::Ring, 2048, 5000},
        DecodeCase{32, 8, 128, 2049, 4, false, Layout::Ring, 2049, 5000},
        DecodeCase{32, 8, 128, 2048, 0, true, Layout::Ring, 2048, 2047},
        DecodeCase{32, 8, 128, 2049, 0, true, Layout::Ring, 2049, 2100},
        DecodeCase{4, 1, 256, 2048, 0, true, Layout::Shuffled, 2048, 3000},  // bf16 and fp32: rounds
        DecodeCase{8, 8, 64, 0, 0, false, Layout::Linear, 2048, 2047}, DecodeCase{8, 8, 64, 0, 0, false, Layout::Linear, 2049, 2048},
        DecodeCase{32, 8, 128, 0, 0, false, Layout::Linear, 2048, 1023},  // full at 1K in a 2K cache
        DecodeCase{32, 8, 128, 0, 0, true, Layout::Linear, 1200, 1100},
        DecodeCase{32, 4, 128, 0, 0, false, Layout::Linear, 2048, 2047},  // fp32: two-stage rounds
        DecodeCase{4, 1, 128, 100, 4, false, Layout::Linear, 2048, 1500},  // a window over a linear cache
        DecodeCase{8, 1, 128, 0, 0, false, Layout::Linear, 2048, 3}));    // most blocks without a slot

// 70,000 slots: the work is split over many blocks and merged by the combine kernel. The
// reference here is reference::attention (double sums): CpuBackend's sequential fp32 sums over
// 70,000 keys carry ~1e-5 rounding themselves, which the split kernel's shorter sums do not.
TEST_F(CudaAttention, DecodeAttentionOnSeventyThousandSlotsMatchesDoubleReference) {
  Seeded seeded;
  SCOPED_TRACE("seed " + std::to_string(seeded.seed));
  testing::ErrorLog log{"decode attention, 70,000 slots"};
  for (const DecodeCase& c : {DecodeCase{32, 8, 128, 0, 0, false, Layout::Linear, 70000, 69999},
                              DecodeCase{32, 8, 128, 0, 0, false, Layout::Linear, 70000, 41234},
                              DecodeCase{8, 2, 64, 70000, 0, true, Layout::Shuffled, 70000, 123456},
                              DecodeCase{16, 1, 256, 0, 0, true, Layout::Linear, 70000, 69999},
                              DecodeCase{8, 8, 40, 70000, 4, false, Layout::Ring, 70000, 200000}}) {
    std::ostringstream name;
    PrintTo(c, &name);
    EXPECT_LT(log.add(decode_error<__nv_bfloat16, float>(c, seeded.rng, true)), kFp32Tolerance) << name.str();
  }
  // The fp32 cache's path once at this length (it shares the staging and the split plan).
  const DecodeCase fp32_case{32, 8, 128, 0, 0, true, Layout::Linear, 70000, 69999};
  EXPECT_LT(log.add(decode_error<float, float>(fp32_case, seeded.rng, true)), kFp32Tolerance) << "fp32 cache";
}

// Decode of a whole sequence the way a session runs it: store_kv_slots then attention_decode,
// captured ONCE into a CUDA graph and replayed per token with only device memory changing (the
// position, q, k, v). Each step must equal full attention over all tokens so far under the
// window mask (DESIGN.md: SWA(w, s) equals the teacher's masked full attention).
// fused_store: no store_kv_slots in the graph; attention_decode stores the token itself
// (DecodeAttentionArgs::new_key): one launch per step for a cache of ≤ 2048 slots.
struct SequenceCase {
  int query_heads, kv_heads, head_dim, window, sink_tokens;
  bool learned_sink;
  int capacity, steps;
  bool fused_store = false;
};

void PrintTo(const SequenceCase& c, std::ostream* out) {
  *out << "Hq=" << c.query_heads << " Hkv=" << c.kv_heads << " d=" << c.head_dim << " w=" << c.window
       << " s=" << c.sink_tokens << (c.learned_sink ? " learned" : "") << " capacity=" << c.capacity
       << " steps=" << c.steps << (c.fused_store ? " fused store" : "");
}

class CudaDecodeSequence : public testing::CudaTest, public ::testing::WithParamInterface<SequenceCase> {};

TEST_P(CudaDecodeSequence, GraphReplayPerTokenEqualsMaskedFullAttention) {
  const SequenceCase c = GetParam();
  Seeded seeded;
  SCOPED_TRACE("seed " + std::to_string(seeded.seed));
  testing::ErrorLog log{"decode sequence in a graph"};
  using T = __nv_bfloat16;
  const int d = c.head_dim;
  const std::size_t row = std::size_t(c.kv_heads) * d, query_size = std::size_t(c.query_heads) * d;
  const bool ring = c.window > 0;
  const auto sinks = random_vector(c.query_heads, seeded.rng, 2.0f);

  DeviceBuffer<float> query(query_size), new_key(row), new_value(row);
  const DeviceBuffer<float> device_sinks{std::span<const float>(sinks)};
  DeviceBuffer<std::int64_t> position(1);
  DeviceBuffer<T> cache_keys(c.capacity * row), cache_values(c.capacity * row);
  cache_keys.fill_bytes(0xFF);  // NaN: a slot read before it is written shows
  cache_values.fill_bytes(0xFF);
  const std::vector<std::int64_t> empty(c.capacity, -1);
  DeviceBuffer<std::int64_t> slot_positions{std::span<const std::int64_t>(empty)};
  DeviceBuffer<std::byte> workspace(cuda::attention_decode_workspace_bytes(c.capacity, c.query_heads, c.kv_heads, d));
  DeviceBuffer<float> out(query_size);

  cudaStream_t stream;
  cuda::check(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph;
  cudaGraphExec_t replay;
  cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  if (!c.fused_store)
    cuda::store_kv_slots<T>(new_key.data(), new_value.data(), 1, position.data(), cache_keys.data(),
                            cache_values.data(), ring ? slot_positions.data() : nullptr, c.kv_heads, d, c.window,
                            c.sink_tokens, stream);
  const cuda::DecodeAttentionArgs<T> args{
      .query = query.data(), .query_position = position.data(), .keys = cache_keys.data(),
      .values = cache_values.data(), .slot_positions = ring ? slot_positions.data() : nullptr, .slots = c.capacity,
      .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d, .window = c.window,
      .sink_tokens = c.sink_tokens, .learned_sinks = c.learned_sink ? device_sinks.data() : nullptr,
      .new_key = c.fused_store ? new_key.data() : nullptr, .new_value = c.fused_store ? new_value.data() : nullptr};
  cuda::attention_decode(args, workspace.data(), out.data(), stream);
  cuda::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cuda::check(cudaGraphInstantiate(&replay, graph, 0), "cudaGraphInstantiate");

  std::vector<float> all_keys, all_values;  // every token so far, bf16-rounded: the reference's cache
  for (std::int64_t p = 0; p < c.steps; ++p) {
    const auto q = random_vector(query_size, seeded.rng, 2.0f), k = random_vector(row, seeded.rng, 2.0f),
               v = random_vector(row, seeded.rng);
    query.upload(q);
    new_key.upload(k);
    new_value.upload(v);
    position.upload(std::span<const std::int64_t>(&p, 1));
    out.fill_bytes(0xFF);
    cuda::check(cudaGraphLaunch(replay, stream), "cudaGraphLaunch");
    cuda::check(cudaStreamSynchronize(stream), "decode step");

    const auto stored_k = as_stored<T>(k), stored_v = as_stored<T>(v);
    all_keys.insert(all_keys.end(), stored_k.begin(), stored_k.end());
    all_values.insert(all_values.end(), stored_v.begin(), stored_v.end());
    std::vector<float> want(query_size);
    CpuBackend().attention({.queries = q.data(), .positions = &p, .n = 1, .keys = all_keys.data(),
                            .values = all_values.data(), .key_positions = nullptr, .num_keys = p + 1,
                            .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d, .window = c.window,
                            .sink_tokens = c.sink_tokens, .learned_sinks = c.learned_sink ? sinks.data() : nullptr,
                            .out = want.data()});
    ASSERT_LT(log.add(relative_error(out.download(), want)), kFp32Tolerance) << "step " << p;
  }
  cudaGraphExecDestroy(replay);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Mixers, CudaDecodeSequence,
                         ::testing::Values(SequenceCase{8, 2, 64, 16, 4, false, 16, 60},   // swa:window=16,sinks=4
                                           SequenceCase{4, 4, 32, 9, 1, false, 9, 40},     // odd ring of 8
                                           SequenceCase{4, 1, 48, 12, 0, true, 12, 40},    // sink=learned
                                           SequenceCase{8, 2, 128, 0, 0, false, 64, 50},   // full, 64 slots
                                           SequenceCase{32, 8, 128, 0, 0, false, 5000, 20},
                                           SequenceCase{8, 2, 64, 100, 4, false, 100, 150},  // ring, 7 blocks
                                           SequenceCase{16, 2, 128, 70, 0, true, 70, 90},
                                           // The store folded in: rings, linear caches, both paths.
                                           SequenceCase{8, 2, 64, 16, 4, false, 16, 60, true},
                                           SequenceCase{4, 4, 32, 9, 1, false, 9, 40, true},
                                           SequenceCase{4, 1, 48, 12, 0, true, 12, 40, true},
                                           SequenceCase{8, 2, 128, 0, 0, false, 64, 50, true},
                                           SequenceCase{32, 8, 128, 576, 4, false, 576, 620, true},  // swa(576)
                                           SequenceCase{32, 8, 128, 448, 0, true, 448, 470, true},   // Bifocal's
                                           SequenceCase{16, 2, 128, 0, 0, true, 2049, 30, true},     // split path
                                           SequenceCase{8, 2, 64, 2049, 4, false, 2049, 40, true}));

// The window kernel's plan runs every cluster at once on this device, for the bench shapes and
// every window up to the one-launch path's 2,048 slots: a launch of more clusters than fit runs
// the rest in a second wave, ~2× the kernel (stop 31: a variant at 133 registers a thread held one
// block per multiprocessor, where the H200 runs 15 clusters of 8, and Qwen3-4B's 16th cluster
// waited: 381 → 333 tok/s). Guards the kernel's registers and shared memory against that cliff,
// which no output test sees, and the plan's fallback to fewer clusters where a block's staging
// leaves room for only one block a multiprocessor (Qwen3-4B past ~1,570 slots).
TEST_F(CudaAttention, WindowDecodeRunsEveryClusterAtOnce) {
  struct Case {
    const char* name;
    int query_heads, kv_heads, head_dim;
    std::int64_t slots;
  };
  for (const Case& c : {Case{"qwen3-4b swa 576", 32, 8, 128, 576}, Case{"qwen3-4b bifocal 448", 32, 8, 128, 448},
                        Case{"qwen3.5-4b-like swa 576", 16, 4, 256, 576},
                        Case{"qwen3.5-4b-like bifocal 320", 16, 4, 256, 320},
                        Case{"paper-fig2 swa 512", 16, 16, 64, 512}, Case{"qwen3-4b 1024", 32, 8, 128, 1024},
                        Case{"qwen3-4b 1600", 32, 8, 128, 1600}, Case{"qwen3-4b 2048", 32, 8, 128, 2048},
                        Case{"qwen3.5-4b-like 1200", 16, 4, 256, 1200},
                        Case{"qwen3.5-4b-like 2048", 16, 4, 256, 2048}, Case{"paper-fig2 2048", 16, 16, 64, 2048},
                        Case{"group 1, 8 heads, 2048", 8, 8, 128, 2048}}) {
    const cuda::DecodeAttentionArgs<__nv_bfloat16> bf16{.slots = c.slots, .query_heads = c.query_heads,
                                                  .kv_heads = c.kv_heads, .head_dim = c.head_dim};
    const cuda::DecodeAttentionArgs<__half> fp16{.slots = c.slots, .query_heads = c.query_heads, .kv_heads = c.kv_heads,
                                           .head_dim = c.head_dim};
    const cuda::WindowClusterFit swa = cuda::attention_decode_window_cluster_fit<__nv_bfloat16, __nv_bfloat16>(bf16);
    const cuda::WindowClusterFit bifocal = cuda::attention_decode_window_cluster_fit<__nv_bfloat16, float>(bf16);
    const cuda::WindowClusterFit paper = cuda::attention_decode_window_cluster_fit<__half, __half>(fp16);
    EXPECT_GT(swa.clusters, 0) << c.name;
    EXPECT_GE(swa.max_active, swa.clusters) << c.name << ": bf16 output";
    EXPECT_GE(bifocal.max_active, bifocal.clusters) << c.name << ": fp32 output (Bifocal's window branch)";
    EXPECT_GE(paper.max_active, paper.clusters) << c.name << ": fp16";
  }
}

// store_kv_slots: the cache bytes and slot positions equal the CPU mixer's in-order store of a
// chunk, for a ring the chunk overruns (only the last w − s tokens survive) and a linear cache.
TEST_F(CudaAttention, StoreKvSlotsEqualsInOrderStore) {
  Seeded seeded;
  SCOPED_TRACE("seed " + std::to_string(seeded.seed));
  using T = __nv_bfloat16;
  const int kv_heads = 2, d = 24;
  const std::size_t row = std::size_t(kv_heads) * d;
  struct Chunk { int window, sink_tokens, capacity; std::int64_t first; int n; };
  for (const Chunk chunk : {Chunk{16, 4, 16, 0, 37}, Chunk{16, 4, 16, 30, 5}, Chunk{10, 0, 10, 3, 25},
                            Chunk{0, 0, 100, 40, 33}}) {
    const bool ring = chunk.window > 0;
    const auto keys = random_vector(chunk.n * row, seeded.rng), values = random_vector(chunk.n * row, seeded.rng);
    std::vector<std::int64_t> positions(chunk.n);
    std::iota(positions.begin(), positions.end(), chunk.first);

    // The CPU mixer's store, token by token, as bf16 bit patterns over a cache poisoned like
    // the device's (0xFFFF).
    std::vector<std::uint16_t> want_keys(chunk.capacity * row, 0xFFFF), want_values(chunk.capacity * row, 0xFFFF);
    std::vector<std::int64_t> want_positions(chunk.capacity, -1);
    const auto stored_keys = to_storage<T>(keys), stored_values = to_storage<T>(values);
    for (int i = 0; i < chunk.n; ++i) {
      const std::int64_t slot = ring ? ring_slot(positions[i], chunk.window, chunk.sink_tokens) : positions[i];
      std::memcpy(want_keys.data() + slot * row, stored_keys.data() + i * row, row * sizeof(T));
      std::memcpy(want_values.data() + slot * row, stored_values.data() + i * row, row * sizeof(T));
      want_positions[slot] = positions[i];
    }

    const DeviceBuffer<float> device_keys{std::span<const float>(keys)}, device_values{std::span<const float>(values)};
    const DeviceBuffer<std::int64_t> device_positions{std::span<const std::int64_t>(positions)};
    DeviceBuffer<T> cache_keys(chunk.capacity * row), cache_values(chunk.capacity * row);
    cache_keys.fill_bytes(0xFF);
    cache_values.fill_bytes(0xFF);
    DeviceBuffer<std::int64_t> slot_positions(chunk.capacity);
    slot_positions.fill_bytes(0xFF);  // −1 in every slot
    cuda::store_kv_slots<T>(device_keys.data(), device_values.data(), chunk.n, device_positions.data(),
                            cache_keys.data(), cache_values.data(), ring ? slot_positions.data() : nullptr, kv_heads,
                            d, chunk.window, chunk.sink_tokens, nullptr);
    const auto got_keys = cache_keys.download(), got_values = cache_values.download();
    EXPECT_EQ(std::memcmp(got_keys.data(), want_keys.data(), got_keys.size() * sizeof(T)), 0)
        << "keys, window " << chunk.window << " first " << chunk.first;
    EXPECT_EQ(std::memcmp(got_values.data(), want_values.data(), got_values.size() * sizeof(T)), 0)
        << "values, window " << chunk.window << " first " << chunk.first;
    if (ring) {
      EXPECT_EQ(slot_positions.download(), want_positions) << "window " << chunk.window;
    }
  }
}

}  // namespace
}  // namespace bifocal
