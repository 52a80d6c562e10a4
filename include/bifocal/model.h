// A loaded checkpoint and its forward pass (src/model/model.cpp reads like the math).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bifocal/mixer_spec.h"
#include "bifocal/model_config.h"
#include "bifocal/session.h"

namespace bifocal {

class Backend;
class DeviceModel;
class Mixer;
class Sampler;
struct ModelWeights;

struct ModelOptions {
  std::optional<std::string> mixer;          // --mixer SPEC: replaces the config's default mixer
  std::optional<std::int64_t> budget_tokens;  // --budget N: KV-token equivalents allowed per layer
  std::string backend = "cpu";                // --backend cpu|cuda
  std::string dtype = "auto";                 // --dtype auto|bf16|fp16|fp32: CUDA weight and KV storage (auto: bf16)
};

// Measures attention sinks during a forward pass: for each layer, the softmax probability mass
// that each query head puts on the keys at positions < first_keys (a learned sink counts in the
// denominator). Filled by forward() for the tokens of that call; every layer must run softmax
// attention over absolute positions (full, or swa without rolling positions).
struct AttentionProbe {
  int first_keys = 1;
  std::vector<std::vector<float>> mass_per_layer;  // [layer][token · query_heads + head]
};

class Model {
 public:
  // Reads DIR/config.json and the safetensors weights; errors name the file and the problem.
  // The `bifocal` section of config.json and `options` choose each layer's mixer; a layer with
  // neither runs its native attention (full, or swa:sink=none for an HF sliding window).
  static Model load(const std::filesystem::path& dir, const ModelOptions& options = {});
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const { return config_; }
  const MixerSpec& layer_mixer(int layer) const;
  // Mixer tensors the checkpoint lacks, which got neutral values (DESIGN.md): the CLI warns.
  const std::vector<std::string>& untrained_parameters() const { return untrained_; }
  // Per-layer state bytes of a session at `context_tokens` tokens, from the accounting.
  std::size_t accounted_state_bytes(std::int64_t context_tokens) const;

  // A session whose cache holds `capacity` tokens; prefill runs in chunks of `chunk` tokens.
  Session new_session(std::int64_t capacity, int chunk = 256) const;

  // An independent copy of a session (caches, states, position; on --backend cuda a new device
  // session and a device-to-device copy): one prefix continued several ways, as multiple-choice
  // scoring does with a shared context.
  Session copy_session(const Session& source) const;

  // Runs `tokens` at the session's next positions. Writes the logits of the last token
  // ([vocab]) or, with all_logits, of every token ([tokens, vocab]) into `logits`.
  void forward(Session& session, std::span<const std::int32_t> tokens, std::span<float> logits,
               bool all_logits = false) const;
  // The same, also filling `probe` (when not null); allocates its buffers, so not for decoding.
  void forward(Session& session, std::span<const std::int32_t> tokens, std::span<float> logits, bool all_logits,
               AttentionProbe* probe) const;
  // Prefill a prompt / decode one token; the returned logits of the last token live in the
  // session and stay valid until its next call.
  std::span<const float> prefill(Session& session, std::span<const std::int32_t> tokens) const;
  std::span<const float> decode(Session& session, std::int32_t token) const;
  // Decodes `token` and picks the next one with `sampler`. On the CUDA backend the sampling runs
  // on the device (same distribution, the device's own random stream) and only the id is copied.
  std::int32_t decode_and_sample(Session& session, std::int32_t token, Sampler& sampler) const;

  // "cpu", or "cuda (NVIDIA H200)"; and the bytes its weights take there.
  std::string backend_description() const;
  bool on_device() const { return device_ != nullptr; }
  // The device model behind --backend cuda (null on the CPU), for `bifocal bench`.
  const DeviceModel* device_model() const { return device_.get(); }

 private:
  Model() = default;
  void forward_chunk(Session& session, std::span<const std::int32_t> tokens, float* logits, bool all_logits,
                     AttentionProbe* probe, std::size_t probe_first_token) const;
  void prepare_probe(AttentionProbe& probe, std::size_t tokens) const;

  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::vector<float> rope_inv_freq_;
  std::vector<std::unique_ptr<Mixer>> mixers_;
  std::vector<std::string> untrained_;
  std::unique_ptr<DeviceModel> device_;  // --backend cuda: the forward pass runs there
};

}  // namespace bifocal
