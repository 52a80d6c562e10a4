#include "backend/cuda/graph_ablation.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "bifocal/error.h"
#include "core/kernel_name.h"

namespace bifocal::cuda {

namespace {

__global__ void emptied_kernel() {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
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
  int device = 0, shared_limit = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "shared memory limit");
  // The emptied node keeps the original's dynamic shared memory, which may exceed the default 48 KiB.
  check(cudaFuncSetAttribute(emptied_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_limit),
        "emptied_kernel");
  for (const GraphKernelNode& kernel : nodes) {
    cudaKernelNodeParams params{};
    check(cudaGraphKernelNodeGetParams(kernel.node, &params), "cudaGraphKernelNodeGetParams");
    params.func = reinterpret_cast<void*>(emptied_kernel);
    params.kernelParams = nullptr;
    params.extra = nullptr;
    const std::string where = "cudaGraphKernelNodeSetParams (" + kernel.name + ")";
    check(cudaGraphKernelNodeSetParams(kernel.node, &params), where.c_str());
  }
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
