// The Bifocal decode step (bifocal_decode.cuh: the window attention, then the mLSTM step that
// computes its gates and mixes) against the naive CPU composition that mixer/bifocal_mixer.cpp
// runs: CpuBackend::attention over the window cache (the SWA branch), cpu::mlstm_recurrent for
// one token on the gates W·x + b (GateProjections' naive products; the mLSTM branch), out =
// o·mLSTM + (1 − o)·SWA with o = sigmoid(W_o x + b_o). Fresh random inputs (the seed is printed
// with any failure), for sink kinds learned / tokens:4 / none, state=kv and state=q, bf16 and fp32
// (cache, weights, x and the output), GQA groups of 1, 3, 4 and 8, head_dim 24 … 256 (64 and 128
// among them), hidden sizes whose rows are and are not whole 16-byte chunks, Qwen3-4B's shape,
// over enough steps that the ring wraps several times and the state carries (also from an empty
// cache). The step stores the new token's k, v (as T) in its slot and its position itself: the
// test keeps the same ring on the host and checks, at the end, that the device ring equals it
// (filled rows exactly, positions). Empty slots hold NaN (they must never be read), the output is
// poisoned (0xFF = NaN).
//
// Tolerances: the output 1e-5 relative in fp32 — fp32 kernels on the very values the CPU sees
// (the window reads keys rounded to T on both sides) — and, in bf16, 1e-3 against the CPU's
// output rounded to bf16 (recurrent_test_support.h's output_error); the final state 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/mlstm.h"
#include "backend/cuda/bifocal_decode.cuh"
#include "cuda/recurrent_test_support.h"
#include "test_files.h"

namespace bifocal {
namespace {

using cuda::DeviceBuffer;
using testing::on_device;
using testing::poisoned;
using testing::relative_error;

constexpr double kStateTolerance = 1e-5;
constexpr int kPrefixTokens = 20;  // tokens that make the random starting mLSTM state

enum class Sink { Learned, Tokens, None };

struct BifocalCase {
  int query_heads, kv_heads, head_dim, window;
  int start, steps;  // the first decoded position (the cache holds 0 … start − 1), and how many
  int hidden;        // the layer input's size (the gate projections')
  Sink sink;
  bool state_per_query_head;
};

std::string name_of(const BifocalCase& c) {
  const char* sink = c.sink == Sink::Learned ? "learned" : c.sink == Sink::Tokens ? "tokens4" : "none";
  return "Hq" + std::to_string(c.query_heads) + "_Hkv" + std::to_string(c.kv_heads) + "_d" +
         std::to_string(c.head_dim) + "_w" + std::to_string(c.window) + "_from" + std::to_string(c.start) + "_hidden" +
         std::to_string(c.hidden) + "_" + sink + (c.state_per_query_head ? "_stateq" : "_statekv");
}

void PrintTo(const BifocalCase& c, std::ostream* out) { *out << name_of(c); }

// The window cache as SlidingWindowMixer keeps it, on the host (fp32 values of T) and the device.
template <typename T>
struct WindowCache {
  int window, sinks, row;  // row = Hkv·d
  std::vector<float> keys, values;
  std::vector<std::int64_t> positions;
  DeviceBuffer<T> gpu_keys, gpu_values;
  DeviceBuffer<std::int64_t> gpu_positions;

  WindowCache(int w, int s, int kv_heads, int d)
      : window(w), sinks(s), row(kv_heads * d), keys(std::size_t(w) * row, NAN), values(keys.size(), NAN),
        positions(w, -1) {}
  int slot_of(std::int64_t p) const { return p < sinks ? int(p) : sinks + int((p - sinks) % (window - sinks)); }
  void store_on_host(std::int64_t p, const float* key, const float* value) {
    const int slot = slot_of(p);
    std::copy_n(key, row, keys.begin() + std::size_t(slot) * row);
    std::copy_n(value, row, values.begin() + std::size_t(slot) * row);
    positions[slot] = p;
  }
  void upload() {
    gpu_keys = on_device(testing::to_storage<T>(keys));
    gpu_values = on_device(testing::to_storage<T>(values));
    gpu_positions = on_device(positions);
  }
  // The device ring after the steps, against this one: positions equal, and every filled slot's
  // key and value rows equal exactly (both are the fp32 k, v rounded once to T).
  void expect_device_equals_host() {
    EXPECT_EQ(gpu_positions.download(), positions);
    const std::vector<float> device_keys = testing::from_storage<T>(gpu_keys.download());
    const std::vector<float> device_values = testing::from_storage<T>(gpu_values.download());
    for (int slot = 0; slot < window; ++slot) {
      if (positions[slot] < 0) continue;
      const std::size_t at = std::size_t(slot) * row;
      EXPECT_EQ(testing::slice(device_keys, at, row), testing::slice(keys, at, row)) << "key row of slot " << slot;
      EXPECT_EQ(testing::slice(device_values, at, row), testing::slice(values, at, row)) << "value row of slot " << slot;
    }
  }
};

template <typename T>
void run_case(const BifocalCase& c) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + name_of(c) + " " + testing::storage_name<T>());
  std::mt19937 rng(seed);
  const int hq = c.query_heads, hkv = c.kv_heads, d = c.head_dim;
  const int states = c.state_per_query_head ? hq : hkv;
  const cpu::MlstmShape shape{hq, hkv, states, d};
  const int sink_tokens = c.sink == Sink::Tokens ? 4 : 0;
  const int total = c.start + c.steps;

  // q, k, v for every position (q of the decoded ones only is used); x and the gates of the
  // decoded ones (token t's at t − start).
  const testing::MlstmSequence x(shape, total, rng);
  const testing::GateProjections<T> gates(shape, c.hidden, c.steps, rng);
  const std::vector<float> stored_k = testing::as_stored<T>(x.k), stored_v = testing::as_stored<T>(x.v);
  const std::vector<float> learned_sinks = testing::normal_vector(hq, rng, 1, 2);

  // The starting state: the cache holds positions 0 … start − 1, the mLSTM state has seen 20
  // other tokens.
  WindowCache<T> cache(c.window, sink_tokens, hkv, d);
  for (int p = 0; p < c.start; ++p)
    cache.store_on_host(p, stored_k.data() + x.kv_offset(p), stored_v.data() + x.kv_offset(p));
  cache.upload();
  testing::HostMlstmState cpu_state(shape);
  {
    const testing::MlstmSequence prefix(shape, kPrefixTokens, rng);
    std::vector<float> ignored(prefix.q.size());
    cpu::mlstm_recurrent(shape, prefix.q.data(), prefix.k.data(), prefix.v.data(), prefix.input_gate.data(),
                         prefix.forget_gate.data(), kPrefixTokens, cpu_state.view(), ignored.data());
  }
  testing::DeviceMlstmState gpu_state(cpu_state);

  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v);
  const auto sinks = on_device(learned_sinks);
  DeviceBuffer<std::int64_t> position(1);
  DeviceBuffer<std::byte> workspace(cuda::bifocal_decode_workspace_bytes(shape, c.window));
  auto out = poisoned<T>(x.q.size());
  std::vector<float> want(x.q.size(), 0.0f);

  CpuBackend cpu;
  std::vector<float> gathered_keys, gathered_values, window_out(std::size_t(hq) * d), memory_out(window_out.size());
  std::vector<std::int64_t> gathered_positions;
  for (std::int64_t p = c.start; p < total; ++p) {
    const int t = int(p), step = t - c.start;
    // The host ring takes the new token as the step will on the device; the position in device memory.
    cache.store_on_host(p, stored_k.data() + x.kv_offset(t), stored_v.data() + x.kv_offset(t));
    position.upload(std::span<const std::int64_t>(&p, 1));

    cuda::BifocalDecodeArgs<T> args{};
    args.shape = shape;
    args.keys = cache.gpu_keys.data(), args.values = cache.gpu_values.data();
    args.slot_positions = cache.gpu_positions.data();
    args.window = c.window, args.sink_tokens = sink_tokens;
    args.learned_sinks = c.sink == Sink::Learned ? sinks.data() : nullptr;
    args.position = position.data();
    args.q = q.data() + x.q_offset(t), args.k = k.data() + x.kv_offset(t), args.v = v.data() + x.kv_offset(t);
    args.gates = gates.projections(step);
    args.mix_weight = gates.gpu_mix_weight.data(), args.mix_bias = gates.gpu_mix_bias.data();
    args.state = gpu_state.view();
    args.out = out.data() + x.q_offset(t);
    args.workspace = workspace.data();
    cuda::bifocal_decode(args, nullptr);

    // The CPU: attention over the cache's filled slots (backend.h's window rule), the mLSTM step,
    // the mix (mixer/bifocal_mixer.cpp).
    gathered_keys.clear(), gathered_values.clear(), gathered_positions.clear();
    for (int slot = 0; slot < c.window; ++slot) {
      if (cache.positions[slot] < 0) continue;
      const std::size_t at = std::size_t(slot) * cache.row;
      gathered_keys.insert(gathered_keys.end(), cache.keys.begin() + at, cache.keys.begin() + at + cache.row);
      gathered_values.insert(gathered_values.end(), cache.values.begin() + at, cache.values.begin() + at + cache.row);
      gathered_positions.push_back(cache.positions[slot]);
    }
    const AttentionArgs attention{.queries = x.q.data() + x.q_offset(t), .positions = &p, .n = 1,
                                  .keys = gathered_keys.data(), .values = gathered_values.data(),
                                  .key_positions = gathered_positions.data(),
                                  .num_keys = std::int64_t(gathered_positions.size()), .query_heads = hq,
                                  .kv_heads = hkv, .head_dim = d, .window = c.window, .sink_tokens = sink_tokens,
                                  .learned_sinks = c.sink == Sink::Learned ? learned_sinks.data() : nullptr,
                                  .out = window_out.data()};
    cpu.attention(attention);
    cpu::mlstm_recurrent(shape, x.q.data() + x.q_offset(t), x.k.data() + x.kv_offset(t), x.v.data() + x.kv_offset(t),
                         gates.input_gate.data() + x.gate_offset(step), gates.forget_gate.data() + x.gate_offset(step),
                         1, cpu_state.view(), memory_out.data());
    for (int h = 0; h < hq; ++h) {
      const float o = 1.0f / (1.0f + std::exp(-gates.mix_gate[std::size_t(step) * hq + h]));
      for (int col = 0; col < d; ++col) {
        const std::size_t i = std::size_t(h) * d + col;
        want[x.q_offset(t) + i] = o * memory_out[i] + (1.0f - o) * window_out[i];
      }
    }
  }
  testing::synchronize();
  const std::size_t from = x.q_offset(c.start);
  static testing::ErrorLog log{"bifocal decode (output error against its storage type's rounding)"};
  EXPECT_LE(log.add(testing::output_error<T>(
                testing::slice(testing::from_storage<T>(out.download()), from, x.q.size() - from),
                testing::slice(want, from, want.size() - from))),
            testing::output_tolerance<T>());
  EXPECT_LE(relative_error(gpu_state.matrix.download(), cpu_state.matrix), kStateTolerance);
  EXPECT_LE(relative_error(gpu_state.normalizer.download(), cpu_state.normalizer), kStateTolerance);
  EXPECT_LE(relative_error(gpu_state.stabilizer.download(), cpu_state.stabilizer), kStateTolerance);  // fp32 gates
  // The step stored every new token in its slot: positions everywhere, rows of the filled slots.
  cache.expect_device_equals_host();
}

class BifocalDecode : public testing::CudaTest, public ::testing::WithParamInterface<BifocalCase> {};

TEST_P(BifocalDecode, EqualsTheCpuComposition) {
  run_case<__nv_bfloat16>(GetParam());
  run_case<__half>(GetParam());
  run_case<float>(GetParam());
}

std::vector<BifocalCase> all_cases() {
  struct Shape {
    int hq, hkv, d, window, start, steps, hidden;
  };
  const Shape shapes[] = {
      {32, 8, 128, 448, 1000, 40, 2560},  // Qwen3-4B bifocal(448), the ring full and wrapping (G = 4)
      {32, 8, 128, 64, 300, 40, 2560},    // Qwen3-4B bifocal(64)
      {4, 4, 64, 16, 0, 200, 64},         // 1:1 (G = 1), head_dim 64, from an empty cache
      {16, 2, 64, 24, 5, 200, 512},       // G = 8: 10 gate rows, two register groups
      {12, 4, 24, 12, 0, 200, 52},        // odd: 3 query heads per KV head, d 24, bf16 gate rows of 104 bytes
      {6, 2, 48, 32, 100, 150, 96},
      {8, 2, 256, 20, 50, 100, 256},
  };
  std::vector<BifocalCase> cases;
  for (const Shape& s : shapes)
    for (Sink sink : {Sink::Learned, Sink::Tokens, Sink::None})
      for (bool per_query : {false, true})
        cases.push_back({s.hq, s.hkv, s.d, s.window, s.start, s.steps, s.hidden, sink, per_query});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, BifocalDecode, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<BifocalCase>& info) { return name_of(info.param); });

}  // namespace
}  // namespace bifocal
