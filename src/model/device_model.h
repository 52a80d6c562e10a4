// A model that runs on an accelerator (today: the CUDA backend, src/backend/cuda/). Model::load
// builds one for --backend cuda and forwards its calls here; the CPU path in model.cpp stays the
// reference. The interface is backend-neutral so that CPU-only builds compile without CUDA: there
// make_cuda_model (src/backend/no_cuda/) explains how to get a CUDA build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bifocal/mixer_spec.h"
#include "bifocal/model_config.h"
#include "bifocal/sampler.h"
#include "mixer/mixer_parameters.h"

namespace bifocal {

struct ModelWeights;

// Weight and KV-cache storage on the device; activations and recurrent states are fp32 always.
// fp16 and bf16 move the same bytes; fp16 is the paper's storage (and HF's for fp16 checkpoints),
// fp32 a test path.
enum class DeviceDtype { BFloat16, Float16, Float32 };

// The --dtype flag's value: auto (= bf16 where no checkpoint decides: `bench`'s synthetic
// weights), bf16, fp16 or fp32; anything else fails naming --dtype.
DeviceDtype parse_device_dtype(const std::string& name);
// --dtype against a checkpoint: auto is fp16 when every floating-point tensor of `store` is fp16
// (bf16 would drop three significand bits of each; such a model was trained or exported to run in
// fp16's range), else bf16 (bf16 checkpoints, and fp32 ones, whose range fp16 may not hold) —
// the rule vLLM's auto follows. Other values as parse_device_dtype.
DeviceDtype resolve_device_dtype(const std::string& name, const WeightStore& store);
std::size_t device_dtype_bytes(DeviceDtype dtype);

// One sequence's state on the device: every layer's cache or recurrent state, and the scratch.
class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  virtual std::size_t state_bytes() const = 0;  // caches and states (the accounting's subject)
  virtual std::size_t layer_state_bytes(int layer) const = 0;
  virtual std::size_t workspace_bytes() const = 0;  // scratch: fixed for the session's shape
};

// What some kernels of the decode step cost where they run — overlapped with their neighbours by
// programmatic dependent launch, their inputs warm in L2 — which Nsight Compute's one kernel at a
// time (tools/cuda/kernel_times.sh) overstates: the step is timed with those kernels replaced by
// empty ones of the same launch shape (grid, block, cluster, shared memory, place in the chain).
// In both timings the sampled id no longer feeds the next step (its kernel is emptied too): with
// kernels emptied the logits are garbage, and an id read from them could index past the table.
// The emptied step's outputs are garbage; only its time means something.
struct DecodeAblation {
  std::string kernel;               // the spec asked for (core/kernel_selector.h)
  int launches = 0;                 // launches of one step it selected
  double reference_seconds = 0;     // the step, only the feedback emptied
  double ablated_seconds = 0;       // the same with the matched kernels emptied
  std::string step_kernels;         // when none matched (not timed): the step's kernels, "name ×count, …"
  double saved_seconds() const { return reference_seconds - ablated_seconds; }
};

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  virtual std::unique_ptr<DeviceSession> new_session(std::int64_t capacity, int chunk) const = 0;
  // `tokens` at positions position … position+n−1; logits of the last token (or of all) to host.
  virtual void forward(DeviceSession& session, std::int64_t position, std::span<const std::int32_t> tokens,
                       float* host_logits, bool all_logits) const = 0;
  // One decode step that also samples on the device: only the sampled id comes back.
  virtual std::int32_t decode_and_sample(DeviceSession& session, std::int64_t position, std::int32_t token,
                                         const SamplingParams& sampling) const = 0;
  // Copies every layer's cache and state of `from` into `to`, a session of this model with the
  // same capacity and chunk: one prefix continued several ways (Model::copy_session).
  virtual void copy_state(const DeviceSession& from, DeviceSession& to) const = 0;
  virtual std::size_t weight_bytes() const = 0;
  virtual std::string device_name() const = 0;

  // For `bifocal bench`. Pretends `context` tokens were processed: caches and states hold random
  // values and every slot a position, so a decode step at that context can be timed without
  // prefilling it.
  virtual void fill_synthetic_context(DeviceSession& session, std::int64_t context, std::uint64_t seed) const = 0;
  // Mean seconds of one greedy decode step over `steps` steps from `position` on (CUDA graph
  // replays, timed with device events around all of them).
  virtual double time_decode_step(DeviceSession& session, std::int64_t position, int steps) const = 0;
  // For `bifocal bench --ablate KERNEL`, a diagnosis: the mean seconds of a decode step whose
  // launches `kernel` selects (core/kernel_selector.h: a part of the bare name, optionally "#I" or
  // "#I/N" for some of its launches in the step's order; "A+B" for both) run empty, beside
  // the same step with none emptied. When it selects no launch of this step (a mixer without that
  // kernel, a typo, an occurrence past the last), nothing is timed: launches 0 and step_kernels
  // lists what the step runs.
  virtual DecodeAblation time_ablated_decode_step(DeviceSession& session, std::int64_t position, int steps,
                                                  const std::string& kernel) const = 0;
  // Seconds to prefill `tokens` from position 0 (device events), the logits of the last included.
  virtual double time_prefill(DeviceSession& session, std::span<const std::int32_t> tokens) const = 0;
  // A large device-to-device copy: bytes read plus written per second (the bandwidth ceiling).
  virtual double measure_copy_bandwidth() const = 0;
  // Device memory in use now, all processes' allocations included (cudaMemGetInfo).
  virtual std::size_t device_memory_used() const = 0;
};

// Everything a device model is built from: the checkpoint (widened to fp32 on the host) and each
// layer's mixer with its parameters.
struct DeviceModelSource {
  const ModelConfig* config = nullptr;
  const ModelWeights* weights = nullptr;  // null: synthetic random weights (bifocal bench --shape)
  std::vector<MixerSpec> layer_mixers;
  std::vector<MixerParameters> layer_parameters;
  std::vector<float> rope_inv_freq;
  DeviceDtype dtype = DeviceDtype::BFloat16;
  std::uint64_t synthetic_seed = 0;
};

std::unique_ptr<DeviceModel> make_cuda_model(const DeviceModelSource& source);

// Ends the process's CUDA context (cudaDeviceReset), so that the next device model starts in a
// fresh one, as in a process of its own. Only with no device model, session or buffer alive: every
// allocation, stream and handle of the old context is gone. `bifocal bench` calls it between its
// mixers (bench_runner.cpp says why). A build without CUDA has no context: nothing to do.
void reset_cuda_context();

}  // namespace bifocal
