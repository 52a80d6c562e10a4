// The stand-in that `--ablate` gives an emptied kernel (graph_ablation.h) holds about its registers:
// a multiprocessor fits as many of its blocks as of the original's, with the original's shared
// memory — not more, as a 4-register stand-in would (stop 36: with the window attention's 42 KiB and
// 4 registers, 5 blocks an SM instead of 2, and the ablation read 3.4 µs a launch for a ~10 µs
// kernel). Two kernels of known appetite are captured into a graph and their stand-ins compared.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/graph_ablation.h"
#include "cuda/cuda_test_support.h"

namespace bifocal {
namespace {

// ~100 registers a thread: 24 float4 loaded, then combined in one dependent chain.
__global__ void __launch_bounds__(256, 1) register_hungry_kernel(const float4* in, float* out) {
  float4 held[24];
#pragma unroll
  for (int i = 0; i < 24; ++i) held[i] = in[(threadIdx.x + 256 * i) % 6144];
  float sum = in[threadIdx.x % 7].x;
#pragma unroll
  for (int i = 0; i < 24; ++i) sum = fmaf(held[i].x, sum, fmaf(held[i].y, held[i].z, held[i].w));
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

__global__ void light_kernel(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

int resident_blocks(const void* kernel, int threads, std::size_t shared_bytes) {
  int blocks = 0;
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, shared_bytes), cudaSuccess);
  return blocks;
}

int registers_of(const void* kernel) {
  cudaFuncAttributes attributes{};
  EXPECT_EQ(cudaFuncGetAttributes(&attributes, kernel), cudaSuccess);
  return attributes.numRegs;
}

class GraphAblationStandIn : public testing::CudaTest {};

TEST_F(GraphAblationStandIn, TakesAsManyBlocksAnSmAsTheKernelItReplaces) {
  constexpr std::size_t kShared = 42 * 1024;  // the Qwen3-4B window attention's, at 576 slots
  float4* in = nullptr;
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&in, 6144 * sizeof(float4)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, 128 * 1024 * sizeof(float)), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  register_hungry_kernel<<<128, 256, kShared, stream>>>(in, out);
  light_kernel<<<128, 256, kShared, stream>>>(out);
  light_kernel<<<128, 64, 0, stream>>>(out);
  light_kernel<<<128, 1024, 0, stream>>>(out);  // 1,024 threads: heavy stand-ins would not fit one
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);

  const std::vector<cuda::GraphKernelNode> nodes = cuda::graph_kernel_nodes(graph);
  ASSERT_EQ(nodes.size(), 4u);
  const int shapes[4][2] = {{256, int(kShared)}, {256, int(kShared)}, {64, 0}, {1024, 0}};
  const void* light = reinterpret_cast<const void*>(light_kernel);
  const void* originals[4] = {reinterpret_cast<const void*>(register_hungry_kernel), light, light, light};
  ASSERT_GE(registers_of(originals[0]), 96);  // the premise: hungry enough to limit its blocks an SM
  ASSERT_LT(resident_blocks(originals[0], 256, kShared), resident_blocks(originals[1], 256, kShared));
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const void* stand_in = cuda::stand_in_kernel(nodes[i]);
    const int threads = shapes[i][0];
    const std::size_t shared = std::size_t(shapes[i][1]);
    EXPECT_EQ(resident_blocks(stand_in, threads, shared), resident_blocks(originals[i], threads, shared));
  }
  // The light kernel's stand-in is the lightest one; the hungry kernel's holds registers.
  EXPECT_LT(registers_of(cuda::stand_in_kernel(nodes[1])), 16);
  EXPECT_GE(registers_of(cuda::stand_in_kernel(nodes[0])), 64);

  // Emptied, the graph still runs: every stand-in launches with its node's block.
  cuda::empty_kernel_nodes(nodes);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(in);
  cudaFree(out);
}

}  // namespace
}  // namespace bifocal
