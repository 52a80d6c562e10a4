// --backend / --dtype: bad values are named; a CPU-only build says how to get the CUDA backend.
#include <gtest/gtest.h>

#include "bifocal/model.h"
#include "cli_runner.h"
#include "golden_model.h"
#include "io/safetensors.h"
#include "model/device_model.h"
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

// --dtype's values for the CUDA backend: auto means bf16 where no checkpoint decides (bench's
// synthetic weights); fp16 and bf16 both store 2 bytes.
TEST(BackendOptions, DeviceDtypesParseAndSizeTheirElements) {
  EXPECT_EQ(parse_device_dtype("auto"), DeviceDtype::BFloat16);
  EXPECT_EQ(parse_device_dtype("bf16"), DeviceDtype::BFloat16);
  EXPECT_EQ(parse_device_dtype("fp16"), DeviceDtype::Float16);
  EXPECT_EQ(parse_device_dtype("fp32"), DeviceDtype::Float32);
  EXPECT_EQ(device_dtype_bytes(DeviceDtype::BFloat16), 2u);
  EXPECT_EQ(device_dtype_bytes(DeviceDtype::Float16), 2u);
  EXPECT_EQ(device_dtype_bytes(DeviceDtype::Float32), 4u);
  testing::expect_error([] { parse_device_dtype("fp8"); }, {"--dtype", "unknown dtype 'fp8'", "fp16"});
  ModelOptions fp16_on_cpu;
  fp16_on_cpu.dtype = "fp16";  // the CPU computes in fp32
  testing::expect_error([&] { Model::load(testing::golden_model("qwen3_bf16"), fp16_on_cpu); },
                        {"--dtype", "needs --backend cuda"});
  const auto bench = testing::run_cli("bench --shape paper-fig2 --mixer full --context 1k --dtype fp8");
  EXPECT_NE(bench.exit_code, 0);
  EXPECT_NE(bench.output.find("--dtype"), std::string::npos) << bench.output;
}

// Against a checkpoint, auto follows it: fp16 for one whose floating-point tensors are all fp16
// (the golden Mistral), bf16 for a bf16 one and for an fp32 one; explicit values are kept.
TEST(BackendOptions, AutoDtypeIsFp16ForAnFp16Checkpoint) {
  const auto store = [](const char* name) { return WeightStore::open(testing::golden_model(name)); };
  EXPECT_EQ(resolve_device_dtype("auto", store("mistral_fp16_swa")), DeviceDtype::Float16);
  EXPECT_EQ(resolve_device_dtype("auto", store("qwen3_bf16")), DeviceDtype::BFloat16);
  EXPECT_EQ(resolve_device_dtype("auto", store("qwen2_fp32_tied")), DeviceDtype::BFloat16);
  EXPECT_EQ(resolve_device_dtype("auto", store("llama_fp32_sharded")), DeviceDtype::BFloat16);
  EXPECT_EQ(resolve_device_dtype("bf16", store("mistral_fp16_swa")), DeviceDtype::BFloat16);
  EXPECT_EQ(resolve_device_dtype("fp32", store("mistral_fp16_swa")), DeviceDtype::Float32);
  testing::expect_error([&] { resolve_device_dtype("fp8", store("qwen3_bf16")); }, {"--dtype", "unknown dtype 'fp8'"});
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
  const auto occurrence = testing::run_cli("bench --shape qwen3-4b --mixer full --context 1k --ablate 'gemv#3/3'");
  EXPECT_NE(occurrence.exit_code, 0);
  EXPECT_NE(occurrence.output.find("--ablate: 'gemv#3/3': I in NAME#I/N must be below N"), std::string::npos)
      << occurrence.output;
  // An --out that cannot be written fails at the start, not after the benchmark's minutes of work.
  const auto out = testing::run_cli("bench --shape qwen3-4b --mixer full --context 1k --out /proc/no-such-dir/bench");
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.output.find("/proc/no-such-dir/bench: cannot create the output directory"), std::string::npos)
      << out.output;
}

}  // namespace
}  // namespace bifocal
