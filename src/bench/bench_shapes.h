// The model configurations `bifocal bench --shape NAME` runs with synthetic weights: the builtin
// shapes of the budget planner (include/bifocal/budget.h) made into full Qwen3-style configs.
#pragma once

#include <string>

#include "bifocal/model_config.h"

namespace bifocal {

// qwen3-4b, qwen3.5-4b-like, paper-fig2: q/k RMSNorm, tied embeddings, RoPE θ = 1e6, no biases.
// Unknown names are an error that lists the known ones.
ModelConfig synthetic_model_config(const std::string& shape_name);

}  // namespace bifocal
