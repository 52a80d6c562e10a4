// A captured graph's kernels by name, and emptying some of them in place: the tool behind
// `bifocal bench --ablate` (DecodeAblation in src/model/device_model.h says what it measures).
#pragma once

#include <cuda_runtime.h>

#include <span>
#include <string>
#include <vector>

namespace bifocal::cuda {

struct GraphKernelNode {
  cudaGraphNode_t node = nullptr;
  std::string name;  // the bare kernel name (core/kernel_name.h); "?" when the runtime cannot tell
};

// The kernel nodes of `graph`, in the order the graph runs them: each after every node it
// depends on (ties, which a captured chain does not have, in cudaGraphGetNodes' order).
std::vector<GraphKernelNode> graph_kernel_nodes(cudaGraph_t graph);

// Gives each node an empty kernel with the node's grid, block, dynamic shared memory and launch
// attributes (cluster shape, programmatic dependency), and about its registers: of the stand-ins,
// which hold values in registers across their wait, the lightest of which a multiprocessor holds
// no more blocks than of the original. The empty kernel still lets its successor launch early and
// waits for its predecessor, so the chain's ordering stays transitive (dependent_launch.h).
void empty_kernel_nodes(std::span<const GraphKernelNode> nodes);

// The stand-in kernel that empty_kernel_nodes would give this node (not yet emptied).
const void* stand_in_kernel(const GraphKernelNode& node);

// "a_kernel ×36, b_kernel ×73, …": each distinct name once with its count, in first-seen order.
std::string kernel_census(std::span<const GraphKernelNode> nodes);

}  // namespace bifocal::cuda
