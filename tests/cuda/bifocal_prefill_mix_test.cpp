// Bifocal's prefill mix without a pass of its own (recurrent_chunkwise.cuh's MlstmOutputMix): `out`
// enters holding the window branch's share, u = (1 − o)·window in T (what attention_prefill
// writes with its output_gate; attention_prefill_test.cpp checks that side), and the mLSTM prefill
// adds its own share: out = T(u + T(o·h)), o = sigmoid(mix gate) per token and query head
// (DESIGN.md bifocal). The reference is u + o·h in double, h the same call's outputs without the
// mix (as stored in T), within the roundings of T: three at most an element, each half a unit of
// T's last place of |u| + |o·h| (fp32: o's expf and a few more units of 2^-24). Fresh random inputs (the seed is
// printed with any failure); the gates in the mixer's [input | forget | mix] rows with one more
// column that would show if read; u written on the call's stream just before it, as the mixer
// does; shapes that run every outputs kernel (bf16 products for d = 64 and d = 256, TF32 and
// 3xTF32) and token counts that end inside a chunk.
//
// The mixer launches the window attention inside the call instead (mlstm_prefill's
// window_branch, beside the denominators kernel), and the window's gather too (window_gather,
// beside the contributions kernel in short calls), and with bf16 storage hands the bf16 outputs
// kernel the keys and values as the gather rounded them (MlstmRoundedKeyValues): the second test
// checks that this gives the same bits as the gather and the attention launched before the call
// and the outputs kernel rounding k and v itself, for the tensor-core and SIMT attention, with the
// gather beside the contributions kernel and (a call of more chunks) before it. Where the call
// offers the mLSTM's outputs to the attention's epilogue (bf16, d = 128 or 256, a state per KV head, a
// short call: PrefillMlstmOutputs) the attention takes them, and must give the same bits too; so
// must the branch that declines them (the outputs kernel after the attention).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/mlstm.h"
#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gather_window.cuh"
#include "backend/cuda/recurrent_chunkwise.cuh"
#include "cuda/recurrent_test_support.h"

namespace bifocal {
namespace {

using testing::on_device;
using testing::poisoned;

// The products each storage type's model runs (DeviceMixer's mlstm_products_of).
template <typename T>
constexpr cuda::MlstmProducts products_of() {
  if constexpr (std::is_same_v<T, float>) return cuda::MlstmProducts::Fp32;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return cuda::MlstmProducts::Bf16;
  else return cuda::MlstmProducts::Tf32;
}

// The mixer's gate rows for x's tokens: [input | forget | mix | `unread` more columns], the mix
// pre-activations and the columns no kernel may read drawn at random.
std::vector<float> mixer_gate_rows(const testing::MlstmSequence& x, const cpu::MlstmShape& shape, int n, int unread,
                                   std::mt19937& rng) {
  const int S = shape.states, Hq = shape.query_heads, stride = 2 * S + Hq + unread;
  std::vector<float> rows(std::size_t(n) * stride);
  std::normal_distribution<float> mix_gate(0.0f, 3.0f), unread_value(0.0f, 50.0f);
  for (int j = 0; j < n; ++j)
    for (int column = 0; column < stride; ++column)
      rows[std::size_t(j) * stride + column] = column < S            ? x.input_gate[x.gate_offset(j) + column]
                                               : column < 2 * S      ? x.forget_gate[x.gate_offset(j) + column - S]
                                               : column < 2 * S + Hq ? mix_gate(rng)
                                                                     : unread_value(rng);
  return rows;
}

template <typename T>
void expect_mixed_outputs_follow_the_gate_formula(const cpu::MlstmShape& shape, int n, std::mt19937& rng) {
  const testing::MlstmSequence x(shape, n, rng);
  const int S = shape.states, Hq = shape.query_heads, d = shape.head_dim, stride = 2 * S + Hq + 1;
  const std::vector<float> rows = mixer_gate_rows(x, shape, n, 1, rng);
  std::normal_distribution<float> unread(0.0f, 50.0f);
  const std::vector<float> window_share = testing::as_stored<T>(testing::normal_vector(x.q.size(), rng, 0, 1));
  testing::HostMlstmState start(shape);
  for (float& value : start.matrix) value = unread(rng) / 500;
  testing::DeviceMlstmState plain_state(start), mixed_state(start);
  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v), gate_rows = on_device(rows);
  const cuda::MlstmGateInputs gates{gate_rows.data(), gate_rows.data() + S, stride};
  const auto products = products_of<T>();
  auto workspace = poisoned<std::uint8_t>(cuda::mlstm_prefill_workspace_bytes(shape, n, products));
  auto plain = testing::upload(std::vector<T>(x.q.size()));
  cuda::mlstm_prefill(shape, q.data(), k.data(), v.data(), gates, n, plain_state.view(), plain.data(), products,
                      workspace.data(), nullptr);
  testing::synchronize();

  // u lands in out on the call's stream, queued just before the mLSTM kernels.
  const std::vector<T> share_stored = testing::to_storage<T>(window_share);
  auto mixed = testing::upload(std::vector<T>(x.q.size()));
  cuda::check(cudaMemcpyAsync(mixed.data(), share_stored.data(), mixed.bytes(), cudaMemcpyHostToDevice, nullptr),
              "cudaMemcpyAsync");
  cuda::mlstm_prefill(shape, q.data(), k.data(), v.data(), gates, n, mixed_state.view(), mixed.data(), products,
                      workspace.data(), nullptr, {.gate = gate_rows.data() + 2 * S, .gate_stride = stride});
  testing::synchronize();

  const std::vector<float> memory = testing::download_floats(plain), got = testing::download_floats(mixed);
  double error = 0.0, magnitude = 0.0;  // ‖got − want‖² and ‖|u| + |o·h|‖²
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::size_t row = i / d, token = row / Hq, head = row % Hq;
    const double o = 1.0 / (1.0 + std::exp(-double(rows[token * stride + 2 * S + head])));
    const double want = window_share[i] + o * memory[i];
    error += (got[i] - want) * (got[i] - want);
    const double terms = std::abs(window_share[i]) + std::abs(o * memory[i]);
    magnitude += terms * terms;
  }
  const double unit = std::is_same_v<T, float> ? 0x1p-24 : std::is_same_v<T, __half> ? 0x1p-11 : 0x1p-8;
  EXPECT_LE(std::sqrt(error / magnitude), (std::is_same_v<T, float> ? 16 : 2) * unit);
  // The mix changes what is written, not the state the call leaves.
  EXPECT_EQ(mixed_state.matrix.download(), plain_state.matrix.download());
  EXPECT_EQ(mixed_state.normalizer.download(), plain_state.normalizer.download());
  EXPECT_EQ(mixed_state.stabilizer.download(), plain_state.stabilizer.download());
}

// How window_then_mlstm runs the two branches.
struct BranchOrder {
  // The gather and the attention launched before the call (false: the reference order), or as its
  // window_gather and window_branch with (bf16) the gathered keys and values as the outputs
  // kernel's, as DeviceMixer's prefill does.
  bool as_branch = false;
  // The gate rows' random bias per column added into the rows here (as gemm's bias pass would), or
  // left to the kernels that read them (MlstmGateInputs' and MlstmOutputMix's biases,
  // PrefillAttentionArgs::output_gate_bias), as DeviceMixer's prefill does.
  bool bias_by_readers = false;
  // The branch takes the mLSTM's outputs where the call offers them and the attention can.
  bool take_mlstm_outputs = true;
  int window = 16;  // the attention's window
};

// out after the window attention (order.window, learned sinks, scaled by 1 − o) and the mLSTM's mix,
// with the window's gather (of the n new tokens, no ring, into poisoned buffers), in `order`;
// then the state the call leaves (matrix, normalizer, stabilizer). `took` (if given) says whether
// the attention's epilogue took the mLSTM's outputs.
template <typename T>
std::vector<float> window_then_mlstm(const cpu::MlstmShape& shape, int n, std::mt19937& rng, BranchOrder order,
                                     bool* took = nullptr) {
  const auto [as_branch, bias_by_readers, take_mlstm_outputs, window_size] = order;
  const testing::MlstmSequence x(shape, n, rng);
  const int S = shape.states, Hq = shape.query_heads, stride = 2 * S + Hq;
  std::vector<float> rows = mixer_gate_rows(x, shape, n, 0, rng);
  const std::vector<float> bias = testing::normal_vector(std::size_t(stride), rng, 0, 2);
  if (!bias_by_readers)
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] += bias[i % stride];
  const auto gate_bias = on_device(bias);
  const float* readers_bias = bias_by_readers ? gate_bias.data() : nullptr;
  std::vector<std::int64_t> positions(n);
  for (int j = 0; j < n; ++j) positions[j] = j;
  const auto q = on_device(x.q), k = on_device(x.k), v = on_device(x.v), gate_rows = on_device(rows);
  const auto token_positions = on_device(positions);
  auto keys = poisoned<T>(x.k.size()), values = poisoned<T>(x.v.size());
  auto key_positions = poisoned<std::int64_t>(std::size_t(n));
  const std::int64_t row = std::int64_t(shape.kv_heads) * shape.head_dim;
  const auto gather = [&](bool wait_at_end) {
    cuda::gather_window<T>({.new_keys = k.data(), .new_values = v.data(), .new_positions = token_positions.data(),
                            .n = n, .row = row, .keys = keys.data(), .values = values.data(),
                            .positions = key_positions.data(), .wait_at_end = wait_at_end},
                           nullptr);
  };
  const auto sinks = on_device(testing::normal_vector(std::size_t(Hq), rng, 0, 1));
  const auto products = products_of<T>();
  auto workspace = poisoned<std::uint8_t>(cuda::mlstm_prefill_workspace_bytes(shape, n, products));
  testing::DeviceMlstmState state(testing::HostMlstmState{shape});
  auto out = poisoned<T>(x.q.size());
  const cuda::PrefillAttentionArgs<T> window{.queries = q.data(), .positions = token_positions.data(), .n = n,
                                             .keys = keys.data(), .values = values.data(),
                                             .key_positions = key_positions.data(),
                                             .num_keys = n, .query_heads = Hq, .kv_heads = shape.kv_heads,
                                             .head_dim = shape.head_dim, .window = window_size, .sink_tokens = 0,
                                             .learned_sinks = sinks.data(), .output_gate = gate_rows.data() + 2 * S,
                                             .output_gate_stride = stride,
                                             .output_gate_bias = readers_bias ? readers_bias + 2 * S : nullptr,
                                             .beside_previous_kernel = as_branch};
  const auto attend = [&] { cuda::attention_prefill<T, T>(window, out.data(), nullptr); };
  bool taken = false;
  const auto attend_as_branch = [&](const cuda::PrefillMlstmOutputs& offer) {
    taken = take_mlstm_outputs && offer.states != nullptr &&
            cuda::attention_prefill_takes_mlstm_outputs<T, T>(window);
    cuda::attention_prefill<T, T>(window, out.data(), nullptr, taken ? offer : cuda::PrefillMlstmOutputs{});
    return taken;
  };
  cuda::MlstmRoundedKeyValues rounded;  // the gather's copy holds only the n new tokens here
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    if (as_branch) rounded = {keys.data(), values.data()};
  if (!as_branch) {  // the reference order: gather, attention, then the mLSTM's kernels
    gather(false);
    attend();
  }
  const cuda::MlstmGateInputs gates{.input = gate_rows.data(), .forget = gate_rows.data() + S, .stride = stride,
                                    .input_bias = readers_bias, .forget_bias = readers_bias ? readers_bias + S : nullptr};
  cuda::mlstm_prefill(shape, q.data(), k.data(), v.data(), gates, n, state.view(), out.data(), products,
                      workspace.data(), nullptr,
                      {.gate = gate_rows.data() + 2 * S, .gate_stride = stride,
                       .gate_bias = readers_bias ? readers_bias + 2 * S : nullptr},
                      as_branch ? cuda::MlstmWindowBranch(attend_as_branch) : cuda::MlstmWindowBranch(),
                      as_branch ? std::function<void(bool)>(gather) : std::function<void(bool)>(), rounded);
  testing::synchronize();
  if (took != nullptr) *took = taken;
  std::vector<float> result = testing::download_floats(out);
  for (const auto* part : {&state.matrix, &state.normalizer, &state.stabilizer}) {
    const std::vector<float> values = part->download();
    result.insert(result.end(), values.begin(), values.end());
  }
  return result;
}

// got and want the same floats, bit for bit; a NaN in want is an output no kernel wrote.
void expect_the_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(want[i])) << "element " << i << ": no output written there";
    differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0u) << "of " << got.size() << " values (outputs, then the state)";
}

// {Hq, Hkv, S, d}: GQA with states per KV head; d = 256 streams C_c in the bf16 kernel; state=q.
// d = 64, 128 and 256 take the tensor-core attention for 16-bit T; d = 32 and fp32 the SIMT
// kernel. d = 128 and 256 with bf16: the mLSTM's outputs in the attention's epilogue, its blocks
// of 4 or 2 heads × 16 or 32 tokens and of 1 head × 64 tokens (d = 256: half of the columns each).
const cpu::MlstmShape kShapes[] = {{8, 2, 2, 64},  {4, 2, 2, 256},  {4, 2, 4, 32},
                                   {8, 2, 2, 128}, {2, 2, 2, 128}, {4, 4, 4, 256}};
// Whether the window attention's epilogue takes the mLSTM's outputs in this call: offered and
// takeable (the conditions recurrent_chunkwise.cuh names; a few chunks, far under any GPU's SM
// count).
template <typename T>
bool epilogue_takes_outputs(const cpu::MlstmShape& shape) {
  return std::is_same_v<T, __nv_bfloat16> && (shape.head_dim == 128 || shape.head_dim == 256) &&
         shape.states == shape.kv_heads;
}
constexpr int kLengths[] = {7, 150};  // inside one chunk, and ending inside the third

template <typename T>
class BifocalPrefillMix : public testing::CudaTest {};
TYPED_TEST_SUITE(BifocalPrefillMix, testing::StorageTypes, testing::StorageTypeNames);

TYPED_TEST(BifocalPrefillMix, OutputsKernelAddsItsShareOntoTheWindowBranch) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const cpu::MlstmShape& shape : kShapes) {
    for (const int n : kLengths) {
      SCOPED_TRACE(testing::describe(shape) + " n " + std::to_string(n));
      expect_mixed_outputs_follow_the_gate_formula<TypeParam>(shape, n, rng);
    }
  }
}

TYPED_TEST(BifocalPrefillMix, WindowBranchBesideTheDenominatorsGivesTheSameBits) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto expect_both_orders_alike = [&](const cpu::MlstmShape& shape, int n, int window = 16) {
    SCOPED_TRACE(testing::describe(shape) + " n " + std::to_string(n) + " window " + std::to_string(window));
    std::mt19937 before(seed), beside(seed), declined(seed);  // the same inputs for each order
    const std::vector<float> reference = window_then_mlstm<TypeParam>(shape, n, before, {.window = window});
    bool took = false;
    expect_the_same_bits(
        window_then_mlstm<TypeParam>(shape, n, beside, {.as_branch = true, .window = window}, &took), reference);
    EXPECT_EQ(took, epilogue_takes_outputs<TypeParam>(shape))
        << "the attention's epilogue took the mLSTM's outputs, or not";
    if (took) {  // the branch that declines them: the outputs kernel after the attention
      SCOPED_TRACE("the offer declined");
      const BranchOrder declining{.as_branch = true, .take_mlstm_outputs = false, .window = window};
      expect_the_same_bits(window_then_mlstm<TypeParam>(shape, n, declined, declining), reference);
    }
  };
  for (const cpu::MlstmShape& shape : kShapes)
    for (const int n : kLengths) expect_both_orders_alike(shape, n);  // the gather beside kernel 1
  // A window of at least a chunk: the epilogue reads the chunk's keys and values from the block's
  // last key tile (PrefillMlstmOutputs::chunk_in_last_tile), at d = 128 and d = 256.
  for (const cpu::MlstmShape& shape : {kShapes[1], kShapes[3], kShapes[4], kShapes[5]})
    expect_both_orders_alike(shape, 150, 96);
  // 4 states × 35 chunks of 64 tokens, more blocks than any GPU of ours has SMs: the gather
  // goes before kernel 1 (mlstm_prefill's window_gather).
  expect_both_orders_alike(kShapes[2], 35 * 64 - 40);
}

// The gate biases added by the kernels that read the pre-activations give the bits of the same
// biases added into the rows first: the outputs (both branches' shares) and the state left.
TYPED_TEST(BifocalPrefillMix, GateBiasesAddedByTheReadersGiveTheSameBits) {
  const unsigned seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const cpu::MlstmShape& shape : kShapes) {
    for (const int n : kLengths) {
      SCOPED_TRACE(testing::describe(shape) + " n " + std::to_string(n));
      std::mt19937 added(seed), by_readers(seed);  // the same inputs and biases for both
      const BranchOrder by_the_readers{.as_branch = true, .bias_by_readers = true};
      expect_the_same_bits(window_then_mlstm<TypeParam>(shape, n, by_readers, by_the_readers),
                           window_then_mlstm<TypeParam>(shape, n, added, {.as_branch = true}));
    }
  }
}

}  // namespace
}  // namespace bifocal
