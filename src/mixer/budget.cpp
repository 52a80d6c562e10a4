#include "bifocal/budget.h"

#include <algorithm>

#include "bifocal/error.h"
#include "bifocal/model_config.h"

namespace bifocal {

namespace {
constexpr int kHedgehogFeatures = 64;  // DESIGN.md: W per head d × 64, φ = [softmax(xW), softmax(−xW)]
constexpr std::size_t kStateElementBytes = 4;  // states are fp32

int linear_feature_dim(const MixerSpec& spec, const LayerShape& shape) {
  return spec.feature == MixerSpec::Feature::Hedgehog ? 2 * kHedgehogFeatures : shape.head_dim;
}
}  // namespace

const std::vector<ModelShape>& builtin_shapes() {
  static const std::vector<ModelShape> shapes{
      {"qwen3-4b", 36, 2560, 9728, 151936, {32, 8, 128, 0}},
      // The blog's Qwen3.5-4B-like student: 32 layers, 16 query / 4 KV heads of 256.
      {"qwen3.5-4b-like", 32, 2560, 9216, 151936, {16, 4, 256, 0}},
      // The paper's Figure 2 throughput model: 4 layers, hidden 1024, 16 heads of 64.
      {"paper-fig2", 4, 1024, 4096, 32000, {16, 16, 64, 0}},
  };
  return shapes;
}

const ModelShape& builtin_shape(const std::string& name) {
  std::string known;
  for (const auto& shape : builtin_shapes()) {
    if (shape.name == name) return shape;
    known += (known.empty() ? "" : ", ") + shape.name;
  }
  fail("--shape", "unknown shape '" + name + "' (known: " + known + ")");
}

ModelShape shape_of(const ModelConfig& c, const std::string& name) {
  const int native_window = c.layer_sliding_window.empty() ? 0 : *std::max_element(c.layer_sliding_window.begin(), c.layer_sliding_window.end());
  return {name, c.num_layers, c.hidden_size, c.intermediate_size, c.vocab_size,
          {c.num_query_heads, c.num_kv_heads, c.head_dim, native_window}};
}

std::size_t kv_token_bytes(const LayerShape& shape, std::size_t kv_element_bytes) {
  return 2 * std::size_t(shape.kv_heads) * shape.head_dim * kv_element_bytes;
}

double MixerMemory::token_equivalents() const {
  return kv_token_unit ? double(kv_bytes + state_matrix_bytes) / double(kv_token_unit) : 0.0;
}

MixerMemory mixer_memory(const MixerSpec& spec, const LayerShape& shape, std::int64_t context_tokens,
                         std::size_t kv_element_bytes) {
  using Kind = MixerSpec::Kind;
  MixerMemory m;
  m.kv_token_unit = kv_token_bytes(shape, kv_element_bytes);
  switch (spec.kind) {
    case Kind::Full:
      m.grows_with_context = shape.native_window == 0;
      m.cached_tokens = m.grows_with_context ? context_tokens : std::min<std::int64_t>(context_tokens, shape.native_window);
      break;
    case Kind::SlidingWindow:
    case Kind::Lolcats:
    case Kind::Bifocal:
      m.cached_tokens = spec.window;  // sink tokens live inside the window
      break;
    case Kind::Linear:
    case Kind::Mlstm:
      break;
  }
  // States: linear/lolcats keep S = Σφ(k)vᵀ [f × d] and z [f] per KV head; mLSTM keeps
  // C [d × d], n [d] and the stabilizer m per state head (Hkv for state=kv, Hq for state=q).
  if (spec.kind == Kind::Linear || spec.kind == Kind::Lolcats) {
    m.states = shape.kv_heads;
    m.state_key_dim = linear_feature_dim(spec, shape);
    m.state_value_dim = shape.head_dim;
  } else if (spec.kind == Kind::Mlstm || spec.kind == Kind::Bifocal) {
    m.states = spec.state == MixerSpec::StatePlacement::PerKvHead ? shape.kv_heads : shape.query_heads;
    m.state_key_dim = shape.head_dim;
    m.state_value_dim = shape.head_dim;
  }
  m.kv_bytes = std::size_t(m.cached_tokens) * m.kv_token_unit;
  m.state_matrix_bytes = std::size_t(m.states) * m.state_key_dim * m.state_value_dim * kStateElementBytes;
  const bool has_stabilizer = spec.kind == Kind::Mlstm || spec.kind == Kind::Bifocal;
  m.state_total_bytes = m.state_matrix_bytes + std::size_t(m.states) * (m.state_key_dim + (has_stabilizer ? 1 : 0)) * kStateElementBytes;
  return m;
}

std::vector<BudgetPlan> plan_budget(const LayerShape& shape, std::int64_t budget_tokens, std::size_t kv_element_bytes) {
  if (budget_tokens <= 0) fail("--tokens", "the budget must be positive");
  std::vector<BudgetPlan> plans;
  auto state_tokens = [&](const MixerSpec& spec) {
    const MixerMemory m = mixer_memory(spec, shape, 0, kv_element_bytes);
    return std::int64_t((m.state_matrix_bytes + m.kv_token_unit - 1) / m.kv_token_unit);
  };
  auto add = [&](MixerSpec spec) {
    const std::int64_t taken = state_tokens(spec);
    if (spec.uses_window()) {
      const std::int64_t window = budget_tokens - taken;
      if (window < 1 || (spec.sink == MixerSpec::Sink::Tokens && window <= spec.sink_tokens)) return;
      spec.window = int(window);
    } else if (taken > budget_tokens) {
      return;
    }
    plans.push_back({spec, taken, mixer_memory(spec, shape, budget_tokens, kv_element_bytes)});
  };
  for (const char* text : {"swa:window=1,sink=learned", "swa:window=8,sinks=4", "bifocal:window=1,state=kv,sink=learned",
                           "bifocal:window=1,state=q,sink=learned", "lolcats:window=1,feature=hedgehog",
                           "mlstm:state=kv", "mlstm:state=q", "linear:feature=elu1", "linear:feature=hedgehog"})
    add(MixerSpec::parse(text));
  return plans;
}

}  // namespace bifocal
