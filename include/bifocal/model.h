// A loaded checkpoint and its forward pass (src/model/model.cpp reads like the math).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "bifocal/model_config.h"
#include "bifocal/session.h"

namespace bifocal {

class Backend;
struct ModelWeights;

class Model {
 public:
  // Reads DIR/config.json and the safetensors weights; errors name the file and the problem.
  static Model load(const std::filesystem::path& dir);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const { return config_; }

  // A session whose cache holds `capacity` tokens; prefill runs in chunks of `chunk` tokens.
  Session new_session(std::int64_t capacity, int chunk = 256) const;

  // Runs `tokens` at the session's next positions. Writes the logits of the last token
  // ([vocab]) or, with all_logits, of every token ([tokens, vocab]) into `logits`.
  void forward(Session& session, std::span<const std::int32_t> tokens, std::span<float> logits,
               bool all_logits = false) const;
  // Prefill a prompt / decode one token; the returned logits of the last token live in the
  // session and stay valid until its next call.
  std::span<const float> prefill(Session& session, std::span<const std::int32_t> tokens) const;
  std::span<const float> decode(Session& session, std::int32_t token) const;

 private:
  Model() = default;
  void forward_chunk(Session& session, std::span<const std::int32_t> tokens, float* logits, bool all_logits) const;

  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::vector<float> rope_inv_freq_;
};

}  // namespace bifocal
