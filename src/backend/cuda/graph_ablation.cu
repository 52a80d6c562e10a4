#include "backend/cuda/graph_ablation.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.h"
#include "core/kernel_name.h"

namespace bifocal::cuda {

namespace {

__global__ void emptied_kernel() {
  device::allow_next_kernel_launch();
  device::wait_for_previous_kernel();
}

}  // namespace

std::vector<GraphKernelNode> graph_kernel_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(count);
  check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes");
  std::vector<GraphKernelNode> kernels;
  for (cudaGraphNode_t node : nodes) {
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
