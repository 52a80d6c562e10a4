// `bifocal bench --ablate` (DecodeAblation, src/backend/cuda/graph_ablation.h): the decode step's
// kernels are found by their bare names (the window attention: one per layer; RMSNorm: two per
// layer and the final norm), a name not in
// the step is skipped with the step's kernels listed, and emptying kernels in a recorded copy of the step
// leaves the model's own decode untouched. No timing is asserted: the times are the bench's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bifocal/model.h"
#include "cuda/cuda_test_support.h"
#include "cuda/greedy_decode.h"
#include "golden_model.h"
#include "model/device_model.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::testbed_model;

ModelOptions on_cuda(const std::string& mixer) {
  ModelOptions options;
  options.mixer = mixer;
  options.backend = "cuda";
  return options;
}

std::vector<std::int32_t> greedy_tokens(const Model& model, int count) {
  const std::vector<std::int32_t> prompt = {1, 450, 1203, 88, 39, 2710, 12, 901};
  return testing::greedy_tokens(model, prompt, count);
}

class GraphAblation : public testing::CudaTest {};

TEST_F(GraphAblation, FindsEveryLaunchOfANamedKernel) {
  for (const std::string mixer : {"swa:window=16,sinks=4", "bifocal:window=16,state=kv,sink=learned"}) {
    SCOPED_TRACE(mixer);
    const Model model = Model::load(testbed_model(), on_cuda(mixer));
    const DeviceModel& device = *model.device_model();
    const auto session = device.new_session(128, 16);
    device.fill_synthetic_context(*session, 64, 1);
    const DecodeAblation attention = device.time_ablated_decode_step(*session, 64, 4, "attention_decode_window");
    EXPECT_EQ(attention.kernel, "attention_decode_window");
    EXPECT_EQ(attention.launches, model.config().num_layers);  // swa's, and bifocal's window branch
    EXPECT_TRUE(std::isfinite(attention.reference_seconds) && attention.reference_seconds > 0);
    EXPECT_TRUE(std::isfinite(attention.ablated_seconds) && attention.ablated_seconds > 0);
    // q+k+v, o and down in every layer, and the LM head; the RMSNorms are folded into the
    // products (RmsNormedInput), so the step has no launch of their own.
    EXPECT_EQ(device.time_ablated_decode_step(*session, 64, 4, "gemv").launches, 3 * model.config().num_layers + 1);
    EXPECT_EQ(device.time_ablated_decode_step(*session, 64, 4, "gate_up_swiglu").launches,
              model.config().num_layers);
    EXPECT_EQ(device.time_ablated_decode_step(*session, 64, 4, "rmsnorm").launches, 0);
  }
}

// A name no kernel of this step has (swa has no mLSTM step; a typo) is not timed: launches 0 and
// the step's kernels listed, so that one --ablate list serves a bench of several mixers.
TEST_F(GraphAblation, ANameNotInTheStepIsNotTimedAndListsTheStepsKernels) {
  const Model model = Model::load(testbed_model(), on_cuda("swa:window=16,sinks=4"));
  const DeviceModel& device = *model.device_model();
  const auto session = device.new_session(128, 16);
  device.fill_synthetic_context(*session, 64, 1);
  const std::string layers = std::to_string(model.config().num_layers);
  for (const std::string name : {"mlstm_decode", "no_such_kernel"}) {
    SCOPED_TRACE(name);
    const DecodeAblation missing = device.time_ablated_decode_step(*session, 64, 2, name);
    EXPECT_EQ(missing.kernel, name);
    EXPECT_EQ(missing.launches, 0);
    EXPECT_EQ(missing.reference_seconds, 0.0);
    EXPECT_EQ(missing.ablated_seconds, 0.0);
    for (const std::string& listed : std::vector<std::string>{"embedding_kernel ×1", "advance_decode_step_kernel ×1",
                                                              "attention_decode_window_kernel ×" + layers})
      EXPECT_NE(missing.step_kernels.find(listed), std::string::npos) << listed << " in " << missing.step_kernels;
  }
}

// gemv runs q+k+v, o and down in every layer, then the LM head: NAME#I/N and NAME#I pick some of
// its launches by their place in the step (core/kernel_selector.h), the graph's dependency order.
TEST_F(GraphAblation, SelectsSomeLaunchesOfAKernelByTheirPlaceInTheStep) {
  const Model model = Model::load(testbed_model(), on_cuda("swa:window=16,sinks=4"));
  const DeviceModel& device = *model.device_model();
  const auto session = device.new_session(128, 16);
  device.fill_synthetic_context(*session, 64, 1);
  const int layers = model.config().num_layers;
  const auto launches = [&](const std::string& spec) {
    return device.time_ablated_decode_step(*session, 64, 2, spec).launches;
  };
  EXPECT_EQ(launches("gemv#1/3"), layers);      // o_proj
  EXPECT_EQ(launches("gemv#2/3"), layers);      // down_proj
  EXPECT_EQ(launches("gemv#0/3"), layers + 1);  // q+k+v, and the LM head (launch 3·layers)
  EXPECT_EQ(launches("gemv#" + std::to_string(3 * layers)), 1);
  EXPECT_EQ(launches("gemv#1/3+gemv#2/3"), 2 * layers);                       // o_proj and down_proj together
  EXPECT_EQ(launches("attention_decode_window+gate_up_swiglu"), 2 * layers);  // two kernels in one timing
  EXPECT_EQ(launches("gemv#1/3+gemv"), 3 * layers + 1);                       // a launch taken twice counts once
  const DecodeAblation past_the_last = device.time_ablated_decode_step(*session, 64, 2, "gemv#" + std::to_string(3 * layers + 1));
  EXPECT_EQ(past_the_last.launches, 0);
  EXPECT_EQ(past_the_last.reference_seconds, 0.0);
  // The step's order, as far as the census (names in first-seen order) shows it: the embedding
  // first, the sampled id's feedback in the step, and the first layer's q+k+v before its window
  // attention.
  const std::string census = past_the_last.step_kernels;
  EXPECT_EQ(census.rfind("embedding_kernel ×1", 0), 0u) << census;
  EXPECT_NE(census.find("advance_decode_step_kernel ×1"), std::string::npos) << census;
  EXPECT_LT(census.find("gemv_kernel"), census.find("attention_decode_window_kernel")) << census;
}

TEST_F(GraphAblation, LeavesTheModelsOwnDecodeUntouched) {
  const Model model = Model::load(testbed_model(), on_cuda("swa:window=16,sinks=4"));
  const std::vector<std::int32_t> before = greedy_tokens(model, 24);
  const DeviceModel& device = *model.device_model();
  const auto session = device.new_session(128, 16);
  device.fill_synthetic_context(*session, 64, 1);
  device.time_ablated_decode_step(*session, 64, 4, "gemv");
  EXPECT_EQ(greedy_tokens(model, 24), before);
}

}  // namespace
}  // namespace bifocal
