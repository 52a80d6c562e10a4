// Decode steps with the layer's q/k norm and RoPE folded in: swa's window attention
// (DecodeAttentionArgs::rope_inv_freq) and Bifocal's step, whose mLSTM branch applies them too
// (BifocalDecodeArgs::rope_inv_freq). Given the raw projections, each must give the very bits of
// the two-launch path — qk_norm_rope (dense_kernels.cuh) in place, then the step on its output —
// in its output, in what it stores in the cache and (Bifocal) in its mLSTM state, since all run
// qk_norm_rope_device.cuh's operations in the same order (the window attention through its
// one-round-trip path for d = 64, 128, 192, 256; qk_norm_rope and the mLSTM step through the general
// path). Fresh random inputs each run; bf16 and fp32 caches; with and without q/k norm (Qwen3 /
// Llama); head_dim 128 (Qwen3-4B), 256 (Qwen3.5-like), 192, 64 and 48 (RoPE pairs across lanes: the
// general path on both sides); GQA 4:1 and 16:1 (two clusters per KV head); rings with sink tokens
// or a learned sink, and a linear cache. A cache longer than the one-launch path refuses the folded
// form by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/bifocal_decode.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_kernels.cuh"
#include "cuda/cuda_test_support.h"
#include "cuda/recurrent_test_support.h"
#include "numerics.h"
#include "test_files.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::download_floats;
using testing::random_vector;
using testing::to_storage;

struct FoldedCase {
  int query_heads, kv_heads, head_dim;
  int window, sink_tokens;  // window 0: a linear cache of `slots` slots, slot j holding position j
  bool learned_sink, q_k_norm;
  std::int64_t slots, position;
};

std::string describe(const FoldedCase& c) {
  return "Hq " + std::to_string(c.query_heads) + " Hkv " + std::to_string(c.kv_heads) + " d " +
         std::to_string(c.head_dim) + " w " + std::to_string(c.window) + " s " + std::to_string(c.sink_tokens) +
         (c.learned_sink ? " learned" : "") + (c.q_k_norm ? " q/k norm" : "") + " p " + std::to_string(c.position);
}

std::int64_t slot_of(const FoldedCase& c, std::int64_t p) {
  if (c.window == 0) return p;
  return p < c.sink_tokens ? p : c.sink_tokens + (p - c.sink_tokens) % (c.window - c.sink_tokens);
}

// The decode step's RoPE table as the model makes it: by the embedding kernel (one token; its row
// is a dummy here), (sin, cos) of every angle at *position.
template <typename T>
DeviceBuffer<float2> rope_table(const std::int64_t* position, const float* inv_freq, int half) {
  constexpr int kHidden = 8;
  const DeviceBuffer<T> row{std::span<const T>(to_storage<T>(std::vector<float>(kHidden, 1.0f)))};
  const DeviceBuffer<std::int32_t> id{std::span<const std::int32_t>(std::vector<std::int32_t>{0})};
  DeviceBuffer<float> out(kHidden);
  DeviceBuffer<float2> table(static_cast<std::size_t>(half));
  cuda::embedding<T>(row.data(), id.data(), 1, kHidden, out.data(), nullptr, {},
                     {.position = position, .inv_freq = inv_freq, .half = half, .out = table.data()});
  return table;
}

// Runs one case three ways on identical caches — qk_norm_rope then the attention, the attention
// folding them in, and that with the step's RoPE table — every output and cache byte must agree.
template <typename T>
void check_folded_equals_separate(const FoldedCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int d = c.head_dim;
  const std::size_t row = std::size_t(c.kv_heads) * d;
  const bool ring = c.window > 0;
  // The cache before the new token: every earlier position still visible, the new token's slot empty.
  std::vector<float> keys = random_vector(c.slots * row, rng), values = random_vector(c.slots * row, rng);
  std::vector<std::int64_t> slot_positions(c.slots, -1);
  for (std::int64_t p = 0; p < c.position; ++p) slot_positions[slot_of(c, p)] = p;
  const std::int64_t new_slot = slot_of(c, c.position);
  slot_positions[new_slot] = -1;
  for (std::size_t i = 0; i < row; ++i) keys[new_slot * row + i] = values[new_slot * row + i] = NAN;

  const auto query = random_vector(std::size_t(c.query_heads) * d, rng, 3.0f);
  const auto key = random_vector(row, rng, 3.0f), value = random_vector(row, rng);
  const auto sinks = random_vector(c.query_heads, rng);
  std::vector<float> norm(d), inv_freq(d / 2);
  for (float& w : norm) w = 1.0f + 0.3f * std::normal_distribution<float>()(rng);
  for (int i = 0; i < d / 2; ++i) inv_freq[i] = float(std::pow(1e6, -2.0 * i / d));

  const DeviceBuffer<float> device_sinks{std::span<const float>(sinks)}, device_inv_freq{std::span<const float>(inv_freq)};
  const DeviceBuffer<T> device_norm{std::span<const T>(to_storage<T>(norm))};
  const DeviceBuffer<float> device_value{std::span<const float>(value)};
  const DeviceBuffer<std::int64_t> device_position{std::span<const std::int64_t>(&c.position, 1)};
  const T* norm_weight = c.q_k_norm ? device_norm.data() : nullptr;
  constexpr float kEps = 1e-6f;

  struct Run {
    DeviceBuffer<float> query, key;
    DeviceBuffer<T> keys, values;
    DeviceBuffer<std::int64_t> slot_positions;
    DeviceBuffer<float> out;
  };
  auto fresh = [&] {
    return Run{DeviceBuffer<float>{std::span<const float>(query)}, DeviceBuffer<float>{std::span<const float>(key)},
               DeviceBuffer<T>{std::span<const T>(to_storage<T>(keys))},
               DeviceBuffer<T>{std::span<const T>(to_storage<T>(values))},
               DeviceBuffer<std::int64_t>{std::span<const std::int64_t>(slot_positions)},
               DeviceBuffer<float>(query.size())};
  };
  auto args_of = [&](Run& run) {
    return cuda::DecodeAttentionArgs<T>{
        .query = run.query.data(), .query_position = device_position.data(), .keys = run.keys.data(),
        .values = run.values.data(), .slot_positions = ring ? run.slot_positions.data() : nullptr, .slots = c.slots,
        .query_heads = c.query_heads, .kv_heads = c.kv_heads, .head_dim = d, .window = c.window,
        .sink_tokens = c.sink_tokens, .learned_sinks = c.learned_sink ? device_sinks.data() : nullptr,
        .new_key = run.key.data(), .new_value = device_value.data()};
  };

  Run separate = fresh();  // qk_norm_rope in place, then the attention
  separate.out.fill_bytes(0xFF);
  cuda::qk_norm_rope<T>(separate.query.data(), separate.key.data(), norm_weight, norm_weight, kEps,
                        device_position.data(), device_inv_freq.data(), 1, c.query_heads, c.kv_heads, d, true, nullptr);
  cuda::attention_decode<T, float>(args_of(separate), nullptr, separate.out.data(), nullptr);

  Run folded = fresh();  // the raw projections; the kernel normalises and rotates them
  folded.out.fill_bytes(0xFF);
  auto folded_args = args_of(folded);
  folded_args.rope_inv_freq = device_inv_freq.data();
  folded_args.q_norm = norm_weight;
  folded_args.k_norm = norm_weight;
  folded_args.norm_eps = kEps;
  cuda::attention_decode<T, float>(folded_args, nullptr, folded.out.data(), nullptr);
  Run tabled = fresh();  // folded, the sines and cosines read from the step's table
  tabled.out.fill_bytes(0xFF);
  const DeviceBuffer<float2> table = rope_table<T>(device_position.data(), device_inv_freq.data(), d / 2);
  auto tabled_args = folded_args;
  tabled_args.query = tabled.query.data(), tabled_args.keys = tabled.keys.data();
  tabled_args.values = tabled.values.data(), tabled_args.new_key = tabled.key.data();
  tabled_args.slot_positions = ring ? tabled.slot_positions.data() : nullptr;
  tabled_args.rope_rotation = table.data();
  cuda::attention_decode<T, float>(tabled_args, nullptr, tabled.out.data(), nullptr);
  cuda::check(cudaDeviceSynchronize(), "attention_decode");

  const auto want = separate.out.download();
  EXPECT_TRUE(std::all_of(want.begin(), want.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_EQ(folded.out.download(), want) << "output";
  EXPECT_EQ(download_floats(folded.keys), download_floats(separate.keys)) << "stored key";
  EXPECT_EQ(download_floats(folded.values), download_floats(separate.values)) << "stored value";
  EXPECT_EQ(folded.slot_positions.download(), separate.slot_positions.download()) << "slot positions";
  EXPECT_EQ(folded.query.download(), query) << "the raw query is left as it was";
  EXPECT_EQ(tabled.out.download(), want) << "output, RoPE from the table";
  EXPECT_EQ(download_floats(tabled.keys), download_floats(separate.keys)) << "stored key, RoPE from the table";
}

class FoldedQkNormRope : public testing::SeededCudaTest {};

TEST_F(FoldedQkNormRope, EqualsQkNormRopeThenAttentionBitForBit) {
  const FoldedCase cases[] = {
      {32, 8, 128, 576, 0, true, true, 576, 5000},   // Qwen3-4B's swa(576, learned), the ring wrapped
      {32, 8, 128, 576, 0, true, false, 576, 300},   // no q/k norm (Llama-like), the ring still filling
      {8, 2, 48, 64, 4, false, true, 64, 1000},      // the testbed's shape: RoPE pairs across lanes
      {16, 1, 64, 128, 4, false, true, 128, 129},    // 16 query heads a KV head: two clusters
      {4, 4, 128, 0, 0, false, true, 300, 200},      // a linear cache (window 0), read up to p
      {32, 8, 128, 576, 0, true, true, 576, 300000}, // past |angle| ≈ 1e5: sincosf's slow reduction
      {16, 4, 256, 576, 0, true, true, 576, 5000},   // the Qwen3.5-like shape: d = 256, 8 elements a lane
      {8, 2, 192, 64, 4, false, true, 64, 70},       // d = 192: 6 elements a lane
  };
  for (const FoldedCase& c : cases) {
    check_folded_equals_separate<__nv_bfloat16>(c, rng_);
    check_folded_equals_separate<float>(c, rng_);
  }
}

// Bifocal(window 64, learned sink): one step from a cache of earlier tokens and a random mLSTM
// state, both ways; state=kv and state=q; with and without q/k norm.
template <typename T>
void check_bifocal_folded_equals_separate(int query_heads, int kv_heads, int d, bool state_per_query_head,
                                          bool q_k_norm, std::mt19937& rng, std::int64_t position = 200) {
  SCOPED_TRACE("bifocal Hq " + std::to_string(query_heads) + " Hkv " + std::to_string(kv_heads) + " d " +
               std::to_string(d) + (state_per_query_head ? " state=q" : " state=kv") + (q_k_norm ? " q/k norm" : "") +
               " p " + std::to_string(position));
  constexpr int kWindow = 64, kHidden = 96;
  const int states = state_per_query_head ? query_heads : kv_heads;
  const cpu::MlstmShape shape{query_heads, kv_heads, states, d};
  const std::size_t row = std::size_t(kv_heads) * d;
  const testing::MlstmSequence x(shape, 1, rng);  // q, k, v of the new token
  const testing::GateProjections<T> gates(shape, kHidden, 1, rng);
  testing::HostMlstmState start(shape);
  for (float& value : start.matrix) value = std::normal_distribution<float>()(rng);
  for (float& value : start.normalizer) value = std::normal_distribution<float>()(rng);
  for (float& value : start.stabilizer) value = std::normal_distribution<float>()(rng);
  std::vector<float> cache_keys = random_vector(kWindow * row, rng), cache_values = random_vector(kWindow * row, rng);
  std::vector<std::int64_t> slot_positions(kWindow);
  for (std::int64_t p = position - kWindow; p < position; ++p) slot_positions[p % kWindow] = p;
  slot_positions[position % kWindow] = -1;  // the new token's slot, stored by the step
  std::vector<float> norm(d), inv_freq(d / 2);
  for (float& w : norm) w = 1.0f + 0.3f * std::normal_distribution<float>()(rng);
  for (int i = 0; i < d / 2; ++i) inv_freq[i] = float(std::pow(1e6, -2.0 * i / d));
  const auto sinks = testing::on_device(random_vector(query_heads, rng));
  const auto device_norm = testing::on_device(to_storage<T>(norm)), device_inv_freq = testing::on_device(inv_freq);
  const auto device_value = testing::on_device(x.v);
  const auto device_position = testing::on_device(std::vector<std::int64_t>{position});
  const T* norm_weight = q_k_norm ? device_norm.data() : nullptr;
  constexpr float kEps = 1e-6f;

  struct Run {
    DeviceBuffer<float> q, k;
    DeviceBuffer<T> keys, values;
    DeviceBuffer<std::int64_t> slot_positions;
    testing::DeviceMlstmState state;
    DeviceBuffer<T> out;
    DeviceBuffer<std::byte> workspace;
  };
  auto fresh = [&] {
    return Run{testing::on_device(x.q), testing::on_device(x.k), testing::on_device(to_storage<T>(cache_keys)),
               testing::on_device(to_storage<T>(cache_values)), testing::on_device(slot_positions),
               testing::DeviceMlstmState(start), testing::poisoned<T>(x.q.size()),
               DeviceBuffer<std::byte>(cuda::bifocal_decode_workspace_bytes(shape, kWindow))};
  };
  auto args_of = [&](Run& run) {
    cuda::BifocalDecodeArgs<T> args{};
    args.shape = shape;
    args.keys = run.keys.data(), args.values = run.values.data(), args.slot_positions = run.slot_positions.data();
    args.window = kWindow, args.learned_sinks = sinks.data(), args.position = device_position.data();
    args.q = run.q.data(), args.k = run.k.data(), args.v = device_value.data();
    args.gates = gates.projections(0);
    args.mix_weight = gates.gpu_mix_weight.data(), args.mix_bias = gates.gpu_mix_bias.data();
    args.state = run.state.view(), args.out = run.out.data(), args.workspace = run.workspace.data();
    return args;
  };
  Run separate = fresh();
  cuda::qk_norm_rope<T>(separate.q.data(), separate.k.data(), norm_weight, norm_weight, kEps, device_position.data(),
                        device_inv_freq.data(), 1, query_heads, kv_heads, d, true, nullptr);
  cuda::bifocal_decode<T>(args_of(separate), nullptr);
  Run folded = fresh();
  auto folded_args = args_of(folded);
  folded_args.rope_inv_freq = device_inv_freq.data();
  folded_args.q_norm = norm_weight;
  folded_args.k_norm = norm_weight;
  folded_args.norm_eps = kEps;
  cuda::bifocal_decode<T>(folded_args, nullptr);
  Run tabled = fresh();  // folded, the sines and cosines of both branches read from the step's table
  const DeviceBuffer<float2> table = rope_table<T>(device_position.data(), device_inv_freq.data(), d / 2);
  auto tabled_args = args_of(tabled);
  tabled_args.rope_inv_freq = device_inv_freq.data();
  tabled_args.q_norm = norm_weight;
  tabled_args.k_norm = norm_weight;
  tabled_args.norm_eps = kEps;
  tabled_args.rope_rotation = table.data();
  cuda::bifocal_decode<T>(tabled_args, nullptr);
  testing::synchronize();

  const auto want = download_floats(separate.out);
  EXPECT_TRUE(std::all_of(want.begin(), want.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_EQ(download_floats(folded.out), want) << "output";
  EXPECT_EQ(folded.state.matrix.download(), separate.state.matrix.download()) << "C";
  EXPECT_EQ(folded.state.normalizer.download(), separate.state.normalizer.download()) << "n";
  EXPECT_EQ(folded.state.stabilizer.download(), separate.state.stabilizer.download()) << "m";
  EXPECT_EQ(download_floats(folded.keys), download_floats(separate.keys)) << "stored key";
  EXPECT_EQ(folded.slot_positions.download(), separate.slot_positions.download()) << "slot positions";
  EXPECT_EQ(download_floats(tabled.out), want) << "output, RoPE from the table";
  EXPECT_EQ(tabled.state.matrix.download(), separate.state.matrix.download()) << "C, RoPE from the table";
}

TEST_F(FoldedQkNormRope, BifocalEqualsQkNormRopeThenTheStepBitForBit) {
  for (const bool state_per_query_head : {false, true})
    for (const bool q_k_norm : {true, false}) {
      check_bifocal_folded_equals_separate<__nv_bfloat16>(32, 8, 128, state_per_query_head, q_k_norm, rng_);
      check_bifocal_folded_equals_separate<float>(32, 8, 128, state_per_query_head, q_k_norm, rng_);
    }
  check_bifocal_folded_equals_separate<__nv_bfloat16>(8, 2, 48, false, true, rng_);  // the testbed's shape
  check_bifocal_folded_equals_separate<__nv_bfloat16>(16, 4, 256, false, true, rng_);  // Qwen3.5-like d
  check_bifocal_folded_equals_separate<__nv_bfloat16>(32, 8, 128, false, true, rng_, 300000);  // sincosf's slow path
}

TEST_F(FoldedQkNormRope, ALongCacheRefusesTheFoldedForm) {
  const std::int64_t slots = cuda::kWindowDecodeMaxSlots + 1;
  const cuda::DecodeAttentionArgs<float> args{.query = nullptr, .query_position = nullptr, .keys = nullptr,
                                              .values = nullptr, .slot_positions = nullptr, .slots = slots,
                                              .query_heads = 8, .kv_heads = 2, .head_dim = 64,
                                              .rope_inv_freq = reinterpret_cast<const float*>(16)};
  testing::expect_error([&] { cuda::attention_decode<float, float>(args, nullptr, nullptr, nullptr); },
                        {"attention_decode", "folded in only for caches of at most 2048 slots", "2049"});
}

}  // namespace
}  // namespace bifocal
