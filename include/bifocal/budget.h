// Memory accounting (DESIGN.md "Memory accounting"): what one layer's mixer keeps per sequence,
// in bytes and in KV-token equivalents, and a planner for configurations that fit a budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bifocal/mixer_spec.h"

namespace bifocal {

struct ModelConfig;

struct LayerShape {
  int query_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int native_window = 0;  // a checkpoint's own sliding window (HF sliding_window) for "full"; 0 = none
};

// A model's dimensions: enough for accounting and for synthetic-weight benchmarks.
struct ModelShape {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int intermediate = 0;
  int vocab = 0;
  LayerShape layer;
};

// Built-in shapes: qwen3-4b, qwen3.5-4b-like, paper-fig2. Throws naming the known ones.
const ModelShape& builtin_shape(const std::string& name);
const std::vector<ModelShape>& builtin_shapes();
ModelShape shape_of(const ModelConfig& config, const std::string& name);

// The unit: one cached token of one layer, 2 × Hkv × d × bytes(kv dtype) (BF16 Qwen3-4B: 4 KiB).
std::size_t kv_token_bytes(const LayerShape& shape, std::size_t kv_element_bytes = 2);

struct MixerMemory {
  std::int64_t cached_tokens = 0;      // key/value slots (the window, or the context for full)
  bool grows_with_context = false;     // full attention without a native window
  int states = 0;                      // fp32 state heads (linear, mlstm, bifocal, lolcats)
  int state_key_dim = 0;               // rows of each state matrix (feature dim or d)
  int state_value_dim = 0;
  std::size_t kv_bytes = 0;            // cached_tokens × kv_token_bytes
  std::size_t state_matrix_bytes = 0;  // all state matrices (the published convention)
  std::size_t state_total_bytes = 0;   // + normalizers + stabilizers
  std::size_t kv_token_unit = 0;       // the unit these were counted in

  std::size_t total_bytes() const { return kv_bytes + state_total_bytes; }
  // (kv_bytes + state matrices) / unit, as the papers count.
  double token_equivalents() const;
};

// One layer's mixer at a context of `context_tokens` (only full attention depends on it).
MixerMemory mixer_memory(const MixerSpec& spec, const LayerShape& shape, std::int64_t context_tokens,
                         std::size_t kv_element_bytes = 2);

// Configurations that fit `budget_tokens` KV-token equivalents per layer: for each window-based
// mixer, the window left after its states; state-only mixers when they fit.
struct BudgetPlan {
  MixerSpec spec;
  std::int64_t state_tokens = 0;  // token equivalents taken by states (matrices)
  MixerMemory memory;
};
std::vector<BudgetPlan> plan_budget(const LayerShape& shape, std::int64_t budget_tokens, std::size_t kv_element_bytes = 2);

}  // namespace bifocal
