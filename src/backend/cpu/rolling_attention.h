// StreamingLLM's rolling positions (DESIGN.md swa positions=rolling): keys are cached before
// RoPE; for a query, its visible keys in cache order (sinks first, then recent oldest first)
// are rotated by their index 0 … n−1 in that order and the query by n−1, its own index.
// Positions therefore never exceed the window, so generation runs past max_position_embeddings.
#pragma once

#include "backend/backend.h"

namespace bifocal::cpu {

// args as for Backend::attention, with queries and keys NOT rotated; keys must be listed in
// ascending position (cache order). inv_freq: [head_dim / 2].
void rolling_window_attention(const AttentionArgs& args, const float* inv_freq);

}  // namespace bifocal::cpu
