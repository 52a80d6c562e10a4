// CudaModel's hooks for `bifocal bench` (src/model/device_model.h): a synthetic context in the
// caches and states, decode steps and prefills timed by device events, the decode step with chosen
// launches emptied (DecodeAblation), the copy bandwidth the roofline divides by, and the device
// memory in use. The model itself is in cuda_model.cpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/graph_ablation.h"
#include "backend/cuda/sampling.cuh"
#include "bifocal/error.h"
#include "core/kernel_selector.h"

namespace bifocal::cuda {

namespace {

// Seconds between construction and seconds() on `stream`, by device events (METHOD.md).
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  double seconds() {
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float milliseconds = 0;
    check(cudaEventElapsedTime(&milliseconds, start_, stop_), "cudaEventElapsedTime");
    return milliseconds / 1000.0;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

template <typename T>
void CudaModel<T>::fill_synthetic_context(DeviceSession& session, std::int64_t context, std::uint64_t seed) const {
  auto& s = static_cast<CudaSession<T>&>(session);
  check_capacity(s, context, 1);
  for (std::size_t l = 0; l < mixers_.size(); ++l) mixers_[l].fill_synthetic(s.layers[l], context, seed + l, stream_);
  check(cudaStreamSynchronize(stream_), "fill_synthetic_context");
  s.device_position = -1;
  s.device_token = -1;
}

template <typename T>
double CudaModel<T>::time_decode_step(DeviceSession& session, std::int64_t position, int steps) const {
  auto& s = static_cast<CudaSession<T>&>(session);
  check_capacity(s, position, steps);
  const SamplingParams greedy{.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
  decode_and_sample(session, position, 0, greedy);  // warm-up; captures the graph
  EventTimer timer(stream_);
  for (int i = 0; i < steps; ++i) check(cudaGraphLaunch(s.decode_graph, stream_), "cudaGraphLaunch");
  const double seconds = timer.seconds();
  s.device_position = -1;  // the replays moved it on the device
  s.device_token = -1;
  return seconds / steps;
}

// DecodeAblation (src/model/device_model.h): two graphs of the step, each replayed `steps` times
// after one untimed replay — the reference with the sampled id's feedback (advance_decode_step)
// emptied, so every replay decodes the same token at the same position, and the same with the
// launches `kernel` selects emptied as well. The reference is timed again for every name, right
// before its ablation: a paired measurement, so clock drift between the two stays small.
template <typename T>
DecodeAblation CudaModel<T>::time_ablated_decode_step(DeviceSession& session, std::int64_t position, int steps,
                                                      const std::string& kernel) const {
  auto& s = static_cast<CudaSession<T>&>(session);
  check_capacity(s, position, 1);
  const SamplingParams greedy{.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
  constexpr const char* kFeedback = "advance_decode_step_kernel";
  DecodeAblation ablation;
  ablation.kernel = kernel;
  const std::vector<KernelSelector> selectors = parse_kernel_selection(kernel);
  // The launches the selectors take, each counting the launches of its name in the step's order.
  const auto selected = [&](const std::vector<GraphKernelNode>& kernels) {
    std::vector<GraphKernelNode> taken;
    std::vector<int> occurrences(selectors.size(), 0);
    for (const GraphKernelNode& node : kernels) {
      if (node.name == kFeedback) continue;
      bool take = false;
      for (std::size_t i = 0; i < selectors.size(); ++i)
        if (selectors[i].matches_name(node.name) && selectors[i].takes(occurrences[i]++)) take = true;
      if (take) taken.push_back(node);
    }
    return taken;
  };
  const auto time_step = [&](bool ablate) {
    cudaGraph_t graph = record_decode_graph(s, greedy);
    cudaGraphExec_t exec = nullptr;
    try {
      const std::vector<GraphKernelNode> kernels = graph_kernel_nodes(graph);
      std::vector<GraphKernelNode> emptied = ablate ? selected(kernels) : std::vector<GraphKernelNode>{};
      if (ablate) ablation.launches = int(emptied.size());
      for (const GraphKernelNode& node : kernels)
        if (node.name == kFeedback) emptied.push_back(node);
      empty_kernel_nodes(emptied);
      check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      s.device_position = s.device_token = -1;
      upload_step_input(s, position, 0);
      check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");  // untimed: first replay uploads the graph
      EventTimer timer(stream_);
      for (int i = 0; i < steps; ++i) check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
      const double seconds = timer.seconds() / steps;
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      return seconds;
    } catch (...) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      throw;
    }
  };
  {  // Which launches the spec takes; none (another mixer's kernel, a typo, past the last): nothing to time.
    cudaGraph_t graph = record_decode_graph(s, greedy);
    const std::vector<GraphKernelNode> kernels = graph_kernel_nodes(graph);
    cudaGraphDestroy(graph);
    if (selected(kernels).empty()) {
      ablation.step_kernels = kernel_census(kernels);
      return ablation;
    }
  }
  ablation.reference_seconds = time_step(false);
  ablation.ablated_seconds = time_step(true);
  s.device_position = -1;  // the emptied kernels left the step's buffers as garbage
  s.device_token = -1;
  return ablation;
}

template <typename T>
double CudaModel<T>::time_prefill(DeviceSession& session, std::span<const std::int32_t> tokens) const {
  auto& s = static_cast<CudaSession<T>&>(session);
  for (std::size_t l = 0; l < mixers_.size(); ++l) mixers_[l].reset(s.layers[l], stream_);
  check(cudaStreamSynchronize(stream_), "reset");
  EventTimer timer(stream_);
  prefill(s, 0, tokens);
  argmax_logits(s.logits.data(), config_.vocab_size, s.sampling_workspace.data(), s.sampled.data(), stream_);
  return timer.seconds();
}
template <typename T>
double CudaModel<T>::measure_copy_bandwidth() const {
  constexpr std::size_t kBytes = std::size_t(2) << 30;  // 2 GiB: far past the 60 MB L2
  constexpr int kCopies = 10;
  DeviceBuffer<std::byte> from(kBytes), to(kBytes);
  from.fill_bytes(0x5a);
  check(cudaMemcpyAsync(to.data(), from.data(), kBytes, cudaMemcpyDeviceToDevice, stream_), "warm-up copy");
  EventTimer timer(stream_);
  for (int i = 0; i < kCopies; ++i)
    check(cudaMemcpyAsync(to.data(), from.data(), kBytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  return 2.0 * double(kBytes) * kCopies / timer.seconds();  // read + written
}

template <typename T>
std::size_t CudaModel<T>::device_memory_used() const {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return total - free;
}

// The hooks of each storage type; cuda_model.cpp instantiates the rest of each CudaModel.
template void CudaModel<__nv_bfloat16>::fill_synthetic_context(DeviceSession&, std::int64_t, std::uint64_t) const;
template double CudaModel<__nv_bfloat16>::time_decode_step(DeviceSession&, std::int64_t, int) const;
template DecodeAblation CudaModel<__nv_bfloat16>::time_ablated_decode_step(DeviceSession&, std::int64_t, int,
                                                                           const std::string&) const;
template double CudaModel<__nv_bfloat16>::time_prefill(DeviceSession&, std::span<const std::int32_t>) const;
template double CudaModel<__nv_bfloat16>::measure_copy_bandwidth() const;
template std::size_t CudaModel<__nv_bfloat16>::device_memory_used() const;
template void CudaModel<float>::fill_synthetic_context(DeviceSession&, std::int64_t, std::uint64_t) const;
template double CudaModel<float>::time_decode_step(DeviceSession&, std::int64_t, int) const;
template DecodeAblation CudaModel<float>::time_ablated_decode_step(DeviceSession&, std::int64_t, int,
                                                                   const std::string&) const;
template double CudaModel<float>::time_prefill(DeviceSession&, std::span<const std::int32_t>) const;
template double CudaModel<float>::measure_copy_bandwidth() const;
template std::size_t CudaModel<float>::device_memory_used() const;
template void CudaModel<__half>::fill_synthetic_context(DeviceSession&, std::int64_t, std::uint64_t) const;
template double CudaModel<__half>::time_decode_step(DeviceSession&, std::int64_t, int) const;
template DecodeAblation CudaModel<__half>::time_ablated_decode_step(DeviceSession&, std::int64_t, int,
                                                                    const std::string&) const;
template double CudaModel<__half>::time_prefill(DeviceSession&, std::span<const std::int32_t>) const;
template double CudaModel<__half>::measure_copy_bandwidth() const;
template std::size_t CudaModel<__half>::device_memory_used() const;

}  // namespace bifocal::cuda
