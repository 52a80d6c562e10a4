#include "backend/cuda/graph_ablation.h"

#include <algorithm>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "backend/cuda/device_properties.h"
#include "bifocal/error.h"
#include "core/kernel_name.h"

namespace bifocal::cuda {

namespace {

// The stand-in for an emptied kernel: it lets its successor launch early and waits for its
// predecessor, as every kernel of the step does (dependent_launch.h), and holds `Held` values in
// registers across its wait, so that a stand-in can take as many registers a thread as the kernel it
// replaces. That matters: with the replaced kernel's shared memory but 4 registers, a multiprocessor
// fits more of its blocks than of the original's — the window attention's 128 blocks of 42 KiB as
// 5 an SM instead of 2 — and the stand-in itself then cost ~7 µs a launch more than one of the
// original's occupancy (stop 36, docs/notes/cuda-stop36-2026-12-04.md): the ablation said 3.4 µs a
// launch for a kernel that costs ~10.
__device__ float4 stand_in_values[1024];  // zero: what a stand-in holds, read before its wait
__device__ float stand_in_sink;            // zero, and never written (the sum it guards is 0)

template <int Held>
__global__ void emptied_kernel() {
  static_assert(Held % 4 == 0, "held as float4");
  device::allow_next_kernel_launch();
  float4 held[Held > 0 ? Held / 4 : 1];
#pragma unroll
  for (int i = 0; i < Held / 4; ++i) held[i] = stand_in_values[(int(threadIdx.x) + 32 * i) % 1024];
  device::wait_for_previous_kernel();
  // Every held value meets one read after the wait in a chain of FMAs (not reassociated), so no
  // part of the sum can be formed before it: all of them stay in registers across the wait.
  const float after_wait = stand_in_sink;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < Held / 4; ++i) {
    sum = fmaf(held[i].x, after_wait, sum);
    sum = fmaf(held[i].y, after_wait, sum);
    sum = fmaf(held[i].z, after_wait, sum);
    sum = fmaf(held[i].w, after_wait, sum);
  }
  if (Held > 0 && sum != 0.0f) stand_in_sink = sum;
}

// The stand-ins, lightest first; each takes about Held + 8 registers a thread.
constexpr void (*kStandIns[])() = {emptied_kernel<0>,  emptied_kernel<24>,  emptied_kernel<56>,
                                   emptied_kernel<88>, emptied_kernel<120>, emptied_kernel<152>,
                                   emptied_kernel<184>, emptied_kernel<216>};

// Blocks of `function` (threads each, shared_bytes of dynamic shared memory) one multiprocessor
// holds at once; -1 where the runtime cannot tell (a library's kernel).
int resident_blocks(const void* function, int threads, std::size_t shared_bytes) {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function, threads, shared_bytes) != cudaSuccess) {
    cudaGetLastError();  // clear what the failed query left
    return -1;
  }
  return blocks;
}

// Lets every stand-in take up to the device's dynamic shared memory (the original's may exceed the
// default 48 KiB), before their blocks an SM are asked for or they are launched.
void allow_stand_ins_shared_memory() {
  const int shared_limit = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  for (auto* stand_in : kStandIns)
    check(cudaFuncSetAttribute(stand_in, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_limit), "emptied_kernel");
}

// The lightest stand-in of which a multiprocessor holds no more blocks than of the original, and at
// least one (a heavy stand-in may not fit a large block at all); where none does, the one that
// fits fewest; the lightest where the original's count is unknown.
const void* stand_in_for(const cudaKernelNodeParams& original) {
  const int threads = int(original.blockDim.x * original.blockDim.y * original.blockDim.z);
  const int original_blocks = resident_blocks(original.func, threads, original.sharedMemBytes);
  const void* fewest = reinterpret_cast<const void*>(kStandIns[0]);
  if (original_blocks < 0) return fewest;
  int fewest_blocks = std::numeric_limits<int>::max();
  for (auto* stand_in : kStandIns) {
    const void* function = reinterpret_cast<const void*>(stand_in);
    const int blocks = resident_blocks(function, threads, original.sharedMemBytes);
    if (blocks < 1) break;  // heavier ones fit no better
    if (blocks <= original_blocks) return function;
    if (blocks < fewest_blocks) fewest = function, fewest_blocks = blocks;
  }
  return fewest;
}

// The nodes of `graph` in an order that runs each after everything it depends on (Kahn's: of the
// nodes whose dependencies are all placed, the first in cudaGraphGetNodes' order goes next), so that
// "the I-th launch of a kernel" means the I-th the step runs, not the API's listing order.
std::vector<cudaGraphNode_t> dependency_ordered_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(count);
  check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes");
  std::size_t edge_count = 0;
  check(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edge_count), "cudaGraphGetEdges (count)");
  std::vector<cudaGraphNode_t> from(edge_count), to(edge_count);
  // The edge data must be asked for: without it the runtime refuses a graph whose edges carry some
  // (the programmatic edges of dependent launches).
  std::vector<cudaGraphEdgeData> edge_data(edge_count);
  if (edge_count > 0)
    check(cudaGraphGetEdges(graph, from.data(), to.data(), edge_data.data(), &edge_count), "cudaGraphGetEdges");

  const auto index_of = [&](cudaGraphNode_t node) {
    return std::size_t(std::find(nodes.begin(), nodes.end(), node) - nodes.begin());
  };
  std::vector<int> waiting_on(count, 0);               // unplaced dependencies of each node
  std::vector<std::vector<std::size_t>> dependents(count);
  for (std::size_t e = 0; e < edge_count; ++e) {
    const std::size_t a = index_of(from[e]), b = index_of(to[e]);
    if (a == count || b == count) fail("graph ablation", "an edge of the decode graph names a node it does not list");
    dependents[a].push_back(b);
    ++waiting_on[b];
  }
  std::vector<cudaGraphNode_t> ordered;
  std::vector<bool> placed(count, false);
  while (ordered.size() < count) {
    std::size_t next = 0;
    while (next < count && (placed[next] || waiting_on[next] > 0)) ++next;
    if (next == count) fail("graph ablation", "the decode graph has a dependency cycle");
    placed[next] = true;
    ordered.push_back(nodes[next]);
    for (std::size_t d : dependents[next]) --waiting_on[d];
  }
  return ordered;
}

}  // namespace

std::vector<GraphKernelNode> graph_kernel_nodes(cudaGraph_t graph) {
  std::vector<GraphKernelNode> kernels;
  for (cudaGraphNode_t node : dependency_ordered_nodes(graph)) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    if (type != cudaGraphNodeTypeKernel) continue;
    GraphKernelNode kernel{.node = node, .name = "?"};
    cudaKernelNodeParams params{};
    const char* name = nullptr;
    // A library's kernel (driver-API function) may have no runtime name: keep "?".
    if (cudaGraphKernelNodeGetParams(node, &params) == cudaSuccess && params.func != nullptr &&
        cudaFuncGetName(&name, params.func) == cudaSuccess && name != nullptr)
      kernel.name = kernel_short_name(name);
    cudaGetLastError();  // clear what a failed lookup left
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

void empty_kernel_nodes(std::span<const GraphKernelNode> nodes) {
  allow_stand_ins_shared_memory();  // a stand-in keeps the original's dynamic shared memory
  for (const GraphKernelNode& kernel : nodes) {
    cudaKernelNodeParams params{};
    check(cudaGraphKernelNodeGetParams(kernel.node, &params), "cudaGraphKernelNodeGetParams");
    params.func = const_cast<void*>(stand_in_for(params));
    params.kernelParams = nullptr;
    params.extra = nullptr;
    const std::string where = "cudaGraphKernelNodeSetParams (" + kernel.name + ")";
    check(cudaGraphKernelNodeSetParams(kernel.node, &params), where.c_str());
  }
}

const void* stand_in_kernel(const GraphKernelNode& node) {
  allow_stand_ins_shared_memory();
  cudaKernelNodeParams params{};
  check(cudaGraphKernelNodeGetParams(node.node, &params), "cudaGraphKernelNodeGetParams");
  return stand_in_for(params);
}

std::string kernel_census(std::span<const GraphKernelNode> nodes) {
  std::vector<std::pair<std::string, int>> counts;
  for (const GraphKernelNode& kernel : nodes) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == kernel.name; });
    if (it == counts.end())
      counts.emplace_back(kernel.name, 1);
    else
      ++it->second;
  }
  std::string text;
  for (const auto& [name, count] : counts) text += (text.empty() ? "" : ", ") + name + " ×" + std::to_string(count);
  return text;
}

}  // namespace bifocal::cuda
