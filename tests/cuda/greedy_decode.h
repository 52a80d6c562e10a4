// The greedy continuation a model decodes on the device, for the CUDA tests that compare decodes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bifocal/model.h"
#include "bifocal/sampler.h"

namespace bifocal::testing {

// `count` tokens after `prompt`: the first from the prefill's logits, the rest sampled by the
// model's decode step (on the CUDA backend: the captured graph, greedy on the device).
inline std::vector<std::int32_t> greedy_tokens(const Model& model, std::span<const std::int32_t> prompt, int count) {
  Session session = model.new_session(std::int64_t(prompt.size()) + count + 8);
  Sampler sampler({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0}, model.config().vocab_size);
  std::int32_t next = sampler.sample(model.prefill(session, prompt));
  std::vector<std::int32_t> out = {next};
  while (int(out.size()) < count) out.push_back(next = model.decode_and_sample(session, next, sampler));
  return out;
}

}  // namespace bifocal::testing
