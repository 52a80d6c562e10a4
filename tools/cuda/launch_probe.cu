// What a decode kernel's launch shape costs on this GPU, before any work: a CUDA graph of N
// dependent launches (programmatic dependent launch, as the decode step uses) of near-empty
// kernels, timed by replay, per launch. Variants add one thing at a time — thread-block clusters,
// a cluster barrier, a block's dynamic shared memory, one round trip to global memory — so the
// differences say what each costs. Why: under Nsight Compute the cluster kernels of the decode
// step (mlstm_decode 11.4 µs, the window attention 13.5 µs) take 5× what their work should, while
// plain kernels of similar work take ~4.5 µs (docs/notes/cuda-decode-2026-12-01.md).
//
//   nvcc -O3 -std=c++20 -arch=sm_90a tools/cuda/launch_probe.cu -o launch_probe && ./launch_probe
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "launch_probe: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

struct Variant {
  const char* name;
  int ranks;             // cluster size (1: no cluster)
  bool cluster_barrier;  // one cluster.sync() in the body
  int shared_bytes;      // dynamic shared memory per block
  bool read_global;      // each thread loads 32 bytes written by the previous kernel
};

constexpr int kBlocks = 64, kThreads = 256, kLaunches = 200, kReplays = 50;

// The decode kernels' skeleton: let the next kernel launch, wait for the previous one, touch
// memory the previous kernel wrote (optional), meet the cluster (optional), write one value.
__global__ void probe_kernel(float4* buffer, Variant variant) {
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  extern __shared__ float shared[];
  float value = float(threadIdx.x);
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (variant.read_global) {
    const float4 a = buffer[2 * index], b = buffer[2 * index + 1];
    value += a.x + b.w;
  }
  if (variant.shared_bytes > 0) {
    shared[threadIdx.x] = value;
    __syncthreads();
    value = shared[(threadIdx.x + 1) % blockDim.x];
  }
  if (variant.cluster_barrier) cg::this_cluster().sync();
  if (threadIdx.x == 0) buffer[2 * index].x = value;
}

void launch(const Variant& variant, float4* buffer, cudaStream_t stream) {
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = unsigned(variant.ranks);
  attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = std::size_t(variant.shared_bytes);
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = variant.ranks > 1 ? 2 : 1;
  check(cudaLaunchKernelEx(&config, probe_kernel, buffer, variant), variant.name);
}

// Microseconds per launch: a graph of kLaunches dependent launches, replayed kReplays times.
double microseconds_per_launch(const Variant& variant, float4* buffer, cudaStream_t stream) {
  if (variant.shared_bytes > 48 * 1024)
    check(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, variant.shared_bytes),
          "cudaFuncSetAttribute");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  for (int i = 0; i < kLaunches; ++i) launch(variant, buffer, stream);
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec, stream), "warm-up replay");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int r = 0; r < kReplays; ++r) check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float milliseconds = 0;
  check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  return 1e3 * milliseconds / (kReplays * kLaunches);
}

}  // namespace

int main() {
  float4* buffer = nullptr;
  check(cudaMalloc(&buffer, sizeof(float4) * 2 * kBlocks * kThreads), "cudaMalloc");
  check(cudaMemset(buffer, 0, sizeof(float4) * 2 * kBlocks * kThreads), "cudaMemset");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const std::vector<Variant> variants = {
      {"plain", 1, false, 0, false},
      {"plain + global read", 1, false, 0, true},
      {"plain + 36 KiB shared", 1, false, 36 * 1024, false},
      {"cluster 2", 2, false, 0, false},
      {"cluster 8", 8, false, 0, false},
      {"cluster 8 + barrier", 8, true, 0, false},
      {"cluster 8 + barrier + 36 KiB shared", 8, true, 36 * 1024, false},
      {"cluster 8 + barrier + 36 KiB + global read", 8, true, 36 * 1024, true},
  };
  std::printf("| %d blocks × %d threads, %d dependent launches a graph | µs per launch |\n| --- | ---: |\n", kBlocks,
              kThreads, kLaunches);
  for (const Variant& variant : variants)
    std::printf("| %s | %.2f |\n", variant.name, microseconds_per_launch(variant, buffer, stream));
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  check(cudaFree(buffer), "cudaFree");
  return 0;
}
