// --backend / --dtype: bad values are named; a CPU-only build says how to get the CUDA backend.
#include <gtest/gtest.h>

#include "bifocal/model.h"
#include "cli_runner.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal {
namespace {

TEST(BackendOptions, UnknownBackendOrDtypeIsNamed) {
  ModelOptions bad_backend;
  bad_backend.backend = "tpu";
  testing::expect_error([&] { Model::load(testing::golden_model("qwen3_bf16"), bad_backend); },
                        {"--backend", "unknown backend 'tpu'"});
  ModelOptions bad_dtype;
  bad_dtype.dtype = "bf16";  // the CPU computes in fp32
  testing::expect_error([&] { Model::load(testing::golden_model("qwen3_bf16"), bad_dtype); },
                        {"--dtype", "needs --backend cuda"});
}

#ifndef BIFOCAL_WITH_CUDA
TEST(BackendOptions, CudaInACpuOnlyBuildSaysHowToBuildIt) {
  ModelOptions cuda;
  cuda.backend = "cuda";
  testing::expect_error([&] { Model::load(testing::golden_model("qwen3_bf16"), cuda); },
                        {"--backend cuda", "-DBIFOCAL_CUDA=ON"});
  const auto result = testing::run_cli("bench --shape paper-fig2 --mixer swa:window=64,sinks=4 --context 1k");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("-DBIFOCAL_CUDA=ON"), std::string::npos) << result.output;
}
#endif

TEST(BackendOptions, BenchRejectsBadArgumentsBeforeRunning) {
  const auto contexts = testing::run_cli("bench --shape qwen3-4b --mixer full --context 1k,x");
  EXPECT_NE(contexts.exit_code, 0);
  EXPECT_NE(contexts.output.find("--context"), std::string::npos) << contexts.output;
  const auto shape = testing::run_cli("bench --shape qwen9 --mixer full --context 1k");
  EXPECT_NE(shape.exit_code, 0);
  EXPECT_NE(shape.output.find("qwen9"), std::string::npos) << shape.output;
  const auto mixer = testing::run_cli("bench --shape qwen3-4b --mixer swa:window=0 --context 1k");
  EXPECT_NE(mixer.exit_code, 0);
  EXPECT_NE(mixer.output.find("swa:window=0"), std::string::npos) << mixer.output;
  const auto ablate = testing::run_cli("bench --shape qwen3-4b --mixer full --context 1k --ablate ''");
  EXPECT_NE(ablate.exit_code, 0);
  EXPECT_NE(ablate.output.find("--ablate"), std::string::npos) << ablate.output;
}

}  // namespace
}  // namespace bifocal
