// The CUDA backend as a whole against the CPU backend (the reference): logits of every golden
// model and of the testbed model for every mixer, in bf16 (within bf16 rounding), in fp16 (the
// golden models, within fp16 rounding) and in fp32
// (to fp32 rounding, and ≥ 64 identical greedy tokens), decode = prefill on the device, the
// session's state bytes = the accounting, and the errors for what the backend does not run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "bifocal/budget.h"
#include "bifocal/model.h"
#include "model/device_model.h"
#include "cli_runner.h"
#include "cuda/cuda_test_support.h"
#include "cuda/greedy_decode.h"
#include "golden_model.h"
#include "numerics.h"
#include "random_mixer_checkpoint.h"
#include "test_files.h"
#include "wide_head_checkpoint.h"

namespace bifocal {
namespace {

using testing::all_token_logits;
using testing::golden_model;
using testing::testbed_model;

const std::vector<std::string> kMixers = {
    "full", "swa:window=16,sinks=4", "swa:window=16,sink=learned", "swa:window=16,sink=none", "linear:feature=elu1",
    "linear:feature=hedgehog", "lolcats:window=16", "mlstm:state=kv", "mlstm:state=q",
    "bifocal:window=16,state=kv,sink=learned", "bifocal:window=16,state=q,sink=tokens:4",
    "bifocal:window=16,state=kv,sink=none"};

ModelOptions on(const std::string& mixer, const std::string& backend, const std::string& dtype = "auto") {
  ModelOptions options;
  options.mixer = mixer;
  options.backend = backend;
  options.dtype = dtype;
  return options;
}

class CudaModel : public testing::CudaTest {};

// The bf16 bound per mixer. mLSTM alone is ~10× more sensitive to bf16 rounding than the
// attention mixers: its output divides by |q̂ᵀn| (DESIGN.md "mlstm"), a running sum of keys whose
// terms cancel. Measured on the CPU (testbed, 300 tokens): rounding only q, k and v to bf16 moves
// the logits by 4.3% for mlstm:state=kv against 0.4% for full and swa, 0.05% for linear and 0.5%
// for bifocal (its mix gate starts near the window branch). The fp32 tests below hold the mLSTM
// kernels to fp32 rounding; this bound only absorbs the conditioning.
double bf16_bound(const std::string& mixer) { return mixer.starts_with("mlstm") ? 0.15 : 3e-2; }

// Every golden model under every mixer, on the device with `dtype` storage against the CPU's
// fp32, prefilled in each of `chunks`: the logits' relative error stays under bound(mixer).
void expect_golden_logits_near_the_cpu(const std::string& dtype, double (*bound)(const std::string&),
                                       std::initializer_list<int> chunks) {
  const std::string what = "cuda " + dtype + " vs cpu, golden models";
  testing::ErrorLog log{what.c_str()};
  for (const auto& name : testing::golden_model_names()) {
    const auto tokens = testing::GoldenReference::load(name).full_sequence();
    for (const auto& mixer : kMixers) {
      SCOPED_TRACE(name + " " + mixer);
      const Model cpu = Model::load(golden_model(name), on(mixer, "cpu"));
      const Model gpu = Model::load(golden_model(name), on(mixer, "cuda", dtype));
      for (const int chunk : chunks) {
        const double error =
            log.add(testing::relative_error(all_token_logits(gpu, tokens, chunk), all_token_logits(cpu, tokens, chunk)));
        EXPECT_LT(error, bound(mixer)) << "chunk " << chunk;
      }
    }
  }
}

// bf16 weights, KV and activations at the products' inputs against the CPU's fp32 on the same
// checkpoint: the difference is bf16 rounding (2^-8 relative per operand) carried through the layers.
TEST_F(CudaModel, GoldenLogitsMatchTheCpuForEveryMixerInBf16) {
  expect_golden_logits_near_the_cpu("bf16", bf16_bound, {7, 64});
}

// fp16 storage (`--dtype fp16`, the paper's): the same path with fp16 weights, KV and narrowed
// activations. fp16 rounds 8× finer than bf16 (2⁻¹¹ against 2⁻⁸), so a quarter of bf16's bound
// still leaves 2× headroom over the rounding; a wrong conversion anywhere (bf16 bits read as fp16)
// moves the logits by O(1). The golden models' activations stay far inside fp16's range.
TEST_F(CudaModel, GoldenLogitsMatchTheCpuForEveryMixerInFp16) {
  expect_golden_logits_near_the_cpu("fp16", [](const std::string& mixer) { return bf16_bound(mixer) / 4; }, {7, 64});
}

TEST_F(CudaModel, GoldenLogitsMatchTheCpuForEveryMixerInFp32) {
  expect_golden_logits_near_the_cpu("fp32", [](const std::string&) { return 1e-4; }, {32});
}

// Mixer tensors as a trained checkpoint has them (random_mixer_checkpoint.h: random, so that each
// reaches the logits, which its CPU test checks). The golden models' neutral values (zero gate rows,
// the mix gate at −30, no sink mass, identity feature maps) hide where and how the device makes and
// reads them; here a gate row or sink lost or misplaced moves the logits far past the bounds.
// Qwen2 adds a key bias.
TEST_F(CudaModel, RandomMixerTensorsMatchTheCpu) {
  testing::ErrorLog log{"cuda vs cpu, random mixer tensors"};
  testing::for_each_random_mixer_checkpoint(
      {"qwen3_bf16", "qwen2_fp32_tied"},
      [&](const std::string&, const auto& checkpoint, const auto& tokens, const std::string& mixer) {
        const Model cpu = Model::load(checkpoint, on(mixer, "cpu"));
        const auto want = all_token_logits(cpu, tokens, 64);
        for (const auto& [dtype, bound] :
             {std::pair{std::string("fp32"), 1e-4}, std::pair{std::string("bf16"), bf16_bound(mixer)}}) {
          const Model gpu = Model::load(checkpoint, on(mixer, "cuda", dtype));
          for (const int chunk : {1, 7, 64}) {  // chunk 1: every token through the decode step
            const double error = log.add(testing::relative_error(all_token_logits(gpu, tokens, chunk), want));
            EXPECT_LT(error, bound) << dtype << ", chunk " << chunk;
          }
        }
      });
}

// A prefill chunk longer than kMostTokensWithGatesInKeyProduct gives the gates a product of their
// own, read from the rows the model moved after the key rows (append_gate_rows_to_keys); a shorter
// one reads them from the keys' product. Both against the CPU on one sequence that spans the limit,
// with random gate rows (a row block read from the wrong place moves the logits far past 1e-4).
TEST_F(CudaModel, ChunksPastTheGatesTokenLimitMakeTheirOwnGates) {
  testing::ErrorLog log{"cuda vs cpu, a chunk past the gates' token limit"};
  constexpr int kLimit = cuda::CudaModel<float>::kMostTokensWithGatesInKeyProduct;
  testing::for_each_random_mixer_checkpoint(
      {"qwen3_bf16"}, [&](const std::string&, const auto& checkpoint, const auto& golden, const std::string& mixer) {
        if (!mixer.starts_with("mlstm") && !mixer.starts_with("bifocal")) return;  // no gate rows
        std::vector<std::int32_t> tokens;
        while (tokens.size() < std::size_t(kLimit) + 40) tokens.insert(tokens.end(), golden.begin(), golden.end());
        const Model cpu = Model::load(checkpoint, on(mixer, "cpu"));
        const Model gpu = Model::load(checkpoint, on(mixer, "cuda", "fp32"));
        const auto want = all_token_logits(cpu, tokens, 64);
        for (const int chunk : {int(tokens.size()), kLimit, 64}) {  // past the limit, at it, inside it
          const double error = log.add(testing::relative_error(all_token_logits(gpu, tokens, chunk), want));
          EXPECT_LT(error, 1e-4) << "chunk " << chunk << " of " << tokens.size() << " tokens";
        }
      });
}

// A model with 128-wide heads (wide_head_checkpoint.h), bf16 on the device against the CPU's
// fp32. The golden models' heads are 24–48 wide, so without this model no d = 128 tensor-core
// path (the prefill attention's, the mLSTM's chunkwise kernels, Bifocal's mix) is reached end to
// end through DeviceMixer's dispatch: one call of 600 tokens, and 64-token chunks; swa and full
// as the same model's control.
TEST_F(CudaModel, WideHeadModelMatchesTheCpuInBf16) {
  testing::TempDir dir;
  const auto checkpoint = testing::wide_head_checkpoint(dir.path(), 11);
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> token(1, testing::kWideHeadVocab - 1);
  std::vector<std::int32_t> tokens(600);
  for (auto& t : tokens) t = token(rng);
  testing::ErrorLog log{"cuda bf16 vs cpu, 128-wide heads"};
  for (const std::string mixer : {"bifocal:window=16,state=kv,sink=learned", "bifocal:window=448,state=kv,sink=learned",
                                  "swa:window=448,sink=learned", "full"}) {
    SCOPED_TRACE(mixer);
    const Model cpu = Model::load(checkpoint, on(mixer, "cpu"));
    const Model gpu = Model::load(checkpoint, on(mixer, "cuda", "bf16"));
    const auto want = all_token_logits(cpu, tokens, 64);
    for (const int chunk : {600, 64}) {
      const double error = log.add(testing::relative_error(all_token_logits(gpu, tokens, chunk), want));
      EXPECT_LT(error, bf16_bound(mixer)) << "chunk " << chunk;
    }
  }
}

// Prefill n then decode k one at a time = prefill n + k, on the device, for every mixer.
TEST_F(CudaModel, DecodeEqualsPrefill) {
  testing::ErrorLog log{"cuda decode vs prefill"};
  const auto tokens = testing::GoldenReference::load("qwen3_bf16").full_sequence();
  for (const auto& mixer : kMixers) {
    SCOPED_TRACE(mixer);
    const Model gpu = Model::load(golden_model("qwen3_bf16"), on(mixer, "cuda", "fp32"));
    const std::size_t vocab = gpu.config().vocab_size, prompt = 40;
    const auto reference = all_token_logits(gpu, tokens, 64);
    Session session = gpu.new_session(std::int64_t(tokens.size()) + 8, 16);
    std::vector<float> logits(vocab);
    gpu.forward(session, std::span(tokens).first(prompt), logits);
    for (std::size_t t = prompt; t < tokens.size(); ++t) {
      const auto step = gpu.decode(session, tokens[t]);
      const std::vector<float> got(step.begin(), step.end());
      const std::vector<float> want(reference.begin() + t * vocab, reference.begin() + (t + 1) * vocab);
      ASSERT_LT(log.add(testing::relative_error(got, want)), 1e-4) << "token " << t;
    }
  }
}

// A copied session continues as the original would (multiple-choice scoring runs a shared context
// once and each choice in a copy): for every mixer, the continuation's logits from a copy equal a
// fresh session's over prefix + continuation, and continuing one copy leaves the source as it was
// (a second copy gives bit-identical logits).
TEST_F(CudaModel, CopiedSessionContinuesLikeTheOriginal) {
  testing::ErrorLog log{"cuda session copy vs fresh session"};
  const auto tokens = testing::GoldenReference::load("qwen3_bf16").full_sequence();
  const std::size_t prefix = 24, rest = 12;
  ASSERT_GE(tokens.size(), prefix + rest);
  const std::vector<std::int32_t> whole(tokens.begin(), tokens.begin() + std::ptrdiff_t(prefix + rest));
  const std::span<const std::int32_t> continuation = std::span(whole).subspan(prefix);
  for (const auto& mixer : kMixers) {
    SCOPED_TRACE(mixer);
    const Model gpu = Model::load(golden_model("qwen3_bf16"), on(mixer, "cuda", "fp32"));
    const std::size_t vocab = gpu.config().vocab_size;
    const auto reference = all_token_logits(gpu, whole, 64);
    Session source = gpu.new_session(std::int64_t(whole.size()) + 8, 16);
    std::vector<float> last(vocab);
    gpu.forward(source, std::span(whole).first(prefix), last);
    std::vector<float> first(rest * vocab), second(rest * vocab);
    Session copy = gpu.copy_session(source);
    EXPECT_EQ(copy.position(), std::int64_t(prefix));
    gpu.forward(copy, continuation, first, /*all_logits=*/true);
    Session again = gpu.copy_session(source);
    gpu.forward(again, continuation, second, /*all_logits=*/true);
    EXPECT_EQ(first, second);
    EXPECT_EQ(source.position(), std::int64_t(prefix));
    const std::vector<float> want(reference.begin() + std::ptrdiff_t(prefix * vocab), reference.end());
    EXPECT_LT(log.add(testing::relative_error(first, want)), 1e-4);
  }
}

// The testbed model: bf16 logits near the CPU's for every mixer, and in fp32 the greedy
// continuation of a prompt identical to the CPU's for 64 tokens (decode on the device samples
// on the device: greedy through the captured graph).
TEST_F(CudaModel, TestbedGreedyTokensAgreeWithTheCpuInFp32) {
  const std::vector<std::int32_t> prompt = {1, 450, 1203, 88, 39, 2710, 12, 901, 77, 3050, 14, 5};
  for (const std::string mixer : {"full", "swa:window=64,sinks=4", "bifocal:window=64,state=kv,sink=learned"}) {
    SCOPED_TRACE(mixer);
    const Model cpu = Model::load(testbed_model(), on(mixer, "cpu"));
    const Model gpu = Model::load(testbed_model(), on(mixer, "cuda", "fp32"));
    EXPECT_EQ(testing::greedy_tokens(gpu, prompt, 64), testing::greedy_tokens(cpu, prompt, 64));
  }
}

// mlstm alone is left out here: the testbed's teacher never trained mLSTM gates, so under it the
// model is near-uniform noise (perplexity ~8,700 on held-out text against 5.8 for full) and its
// logits are ill-conditioned: summation order alone (cuda fp32 against the CPU) moves that
// perplexity by 0.4%, bf16 rounding by 3.5%, and the logits' relative error past any fixed bound
// (0.42 at stage 8). Its bf16 path is held by the golden models above (every mixer) and the kernel
// tests; bifocal, whose window branch carries the prediction, stays in.
TEST_F(CudaModel, TestbedLogitsMatchTheCpuInBf16) {
  testing::ErrorLog log{"cuda bf16 vs cpu, testbed"};
  std::vector<std::int32_t> tokens = {1};
  for (int i = 1; i < 300; ++i) tokens.push_back(std::int32_t((i * 7919) % 12000 + 2));
  for (const auto& mixer : kMixers) {
    if (mixer.starts_with("mlstm")) continue;
    SCOPED_TRACE(mixer);
    const Model cpu = Model::load(testbed_model(), on(mixer, "cpu"));
    const Model gpu = Model::load(testbed_model(), on(mixer, "cuda"));
    const double error = testing::relative_error(all_token_logits(gpu, tokens, 128), all_token_logits(cpu, tokens, 128));
    EXPECT_LT(log.add(error), bf16_bound(mixer));
  }
}

// mlstm alone on the testbed, in fp32: the kernels against the CPU with bf16 rounding out of the
// way. The model's ill-conditioning (above) magnifies summation order along the sequence: over 300
// tokens the logits' relative error measured 0.042 (stop 15, both state kinds; the testbed has as
// many kv heads as q heads), where a wrong kernel moves them by O(1). Over the first 24 tokens the
// magnification has not set in, and the bound is fp32's.
TEST_F(CudaModel, TestbedMlstmLogitsMatchTheCpuInFp32) {
  testing::ErrorLog log{"cuda fp32 vs cpu, testbed, mlstm alone"};
  std::vector<std::int32_t> tokens = {1};
  for (int i = 1; i < 300; ++i) tokens.push_back(std::int32_t((i * 7919) % 12000 + 2));
  const std::vector<std::int32_t> first_tokens(tokens.begin(), tokens.begin() + 24);
  for (const auto& mixer : kMixers) {
    if (!mixer.starts_with("mlstm")) continue;
    SCOPED_TRACE(mixer);
    const Model cpu = Model::load(testbed_model(), on(mixer, "cpu"));
    const Model gpu = Model::load(testbed_model(), on(mixer, "cuda", "fp32"));
    const double first_error =
        testing::relative_error(all_token_logits(gpu, first_tokens, 8), all_token_logits(cpu, first_tokens, 8));
    EXPECT_LT(log.add(first_error), 1e-3);
    const double error = testing::relative_error(all_token_logits(gpu, tokens, 128), all_token_logits(cpu, tokens, 128));
    EXPECT_LT(log.add(error), 0.1);
  }
}

// Measured state bytes = the accounting at bf16 KV (DESIGN.md "Memory accounting").
TEST_F(CudaModel, SessionStateBytesEqualTheAccounting) {
  for (const auto& mixer : kMixers) {
    SCOPED_TRACE(mixer);
    const Model gpu = Model::load(testbed_model(), on(mixer, "cuda"));
    const auto& c = gpu.config();
    const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
    const Session session = gpu.new_session(1000);
    EXPECT_EQ(session.cache_bytes(),
              std::size_t(c.num_layers) * mixer_memory(MixerSpec::parse(mixer), shape, 1000, 2).total_bytes());
  }
}

TEST_F(CudaModel, RollingPositionsAreRefusedByName) {
  testing::expect_error([] { Model::load(golden_model("qwen3_bf16"), on("swa:window=16,sinks=4,positions=rolling", "cuda")); },
                        {"positions=rolling", "not available on the CUDA backend"});
}

// Logits with no finite value (an overflow) stop the generation with an error that names the
// cause, on both paths: the host sampler after prefill, the device sampler in the decode graph.
TEST_F(CudaModel, LogitsWithoutAFiniteValueAreAnErrorNotAToken) {
  testing::TempDir dir;
  const auto checkpoint = testing::golden_qwen3_with_infinite_final_norm(dir.path());
  const Model gpu = Model::load(checkpoint, on("swa:window=16,sinks=4", "cuda"));
  Session session = gpu.new_session(64);
  Sampler sampler({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0}, gpu.config().vocab_size);
  const std::vector<std::int32_t> prompt = {5, 17, 99, 3};
  testing::expect_error([&] { sampler.sample(gpu.prefill(session, prompt)); }, {"sampler", "NaN", "--dtype bf16"});
  testing::expect_error([&] { gpu.decode_and_sample(session, 7, sampler); }, {"decode", "NaN or infinite"});
}

TEST_F(CudaModel, FullAttentionPastTheSessionCapacityIsAnError) {
  const Model gpu = Model::load(golden_model("qwen3_bf16"), on("full", "cuda"));
  Session session = gpu.new_session(8);
  std::vector<float> logits(gpu.config().vocab_size);
  const std::vector<std::int32_t> tokens(9, 3);
  testing::expect_error([&] { gpu.forward(session, tokens, logits); }, {"session", "holds 8 tokens"});
}

// A model made after reset_cuda_context (bifocal bench resets between its mixers) computes what one
// made before it did, bit for bit, in prefill and in decode: the backend keeps nothing of a context
// past it (the split decode kernel's carveout, set once a process until stop 78, is set a launch).
TEST_F(CudaModel, AFreshContextGivesTheSameLogits) {
  const auto tokens = testing::GoldenReference::load("qwen3_bf16").full_sequence();
  const std::size_t prompt = 40;
  ASSERT_GT(tokens.size(), prompt + 4);
  const auto run = [&](const std::string& mixer) {
    const Model gpu = Model::load(golden_model("qwen3_bf16"), on(mixer, "cuda", "bf16"));
    std::vector<float> logits = all_token_logits(gpu, tokens, 64);
    Session session = gpu.new_session(std::int64_t(tokens.size()) + 8, 16);
    std::vector<float> last(gpu.config().vocab_size);
    gpu.forward(session, std::span(tokens).first(prompt), last);
    for (std::size_t t = prompt; t < prompt + 4; ++t) {
      const auto step = gpu.decode(session, tokens[t]);
      logits.insert(logits.end(), step.begin(), step.end());
    }
    return logits;
  };
  for (const std::string mixer : {"full", "bifocal:window=16,state=kv,sink=learned"}) {
    SCOPED_TRACE(mixer);
    const std::vector<float> before = run(mixer);
    reset_cuda_context();
    EXPECT_EQ(run(mixer), before);
  }
}

// bench with two mixers: the second, in a fresh CUDA context, is measured as the first (both rows
// with prefill and decode rates), and the process ends cleanly.
TEST_F(CudaModel, BenchMeasuresEveryMixerAcrossContextResets) {
  testing::TempDir dir;
  const std::string command = "bench --model " + golden_model("qwen3_bf16").string() +
                              " --mixer swa:window=16,sink=learned --mixer bifocal:window=16,state=kv --mixer full"
                              " --context 48 --gen 2 --repeat 1 --max-prefill 64 --prefill-chunk 32 --out " +
                              dir.path().string();
  const auto result = testing::run_cli(command);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream file(dir.path() / "bench.json");
  const auto json = nlohmann::json::parse(file);
  ASSERT_EQ(json["rows"].size(), 3u) << json.dump();
  for (const auto& row : json["rows"]) {
    EXPECT_GT(row["prefill_tokens_per_second"].get<double>(), 0.0) << row.dump();
    EXPECT_GT(row["decode_tokens_per_second"].get<double>(), 0.0) << row.dump();
  }
}

// With no GPU visible (CUDA_VISIBLE_DEVICES empty here; a CUDA build on a machine without one alike),
// a command on the device is one error line naming the flag, exit status 1: not cuBLAS's "library
// was not initialized", which came first before the device check did. Runs with and without a GPU.
TEST(CudaModelErrors, NoVisibleDeviceIsOneClearError) {
  const std::string model = golden_model("qwen3_bf16").string();
  for (const std::string command :
       {"generate --model " + model + " --backend cuda --prompt hi --max-tokens 1",
        std::string("bench --shape paper-fig2 --mixer full --context 1k --gen 1 --repeat 1")}) {
    const auto result = testing::run_cli(command, "/dev/null", "2>&1", "CUDA_VISIBLE_DEVICES=");
    EXPECT_EQ(result.exit_code, 1) << command << "\n" << result.output;
    EXPECT_NE(result.output.find("--backend cuda: no CUDA device is visible"), std::string::npos)
        << command << "\n" << result.output;
    EXPECT_EQ(result.output.find("cuBLAS"), std::string::npos) << result.output;
  }
}

}  // namespace
}  // namespace bifocal
