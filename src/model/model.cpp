// The Llama-family decoder (Llama, Mistral, Qwen2, Qwen3) over a Backend. Follow one chunk of
// tokens from embedding to logits in forward_chunk: each line is one step of the math.
#include "bifocal/model.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "bifocal/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "bifocal/sampler.h"
#include "mixer/mixer.h"
#include "model/device_model.h"
#include "model/rope.h"
#include "model/weights.h"

namespace bifocal {

Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {

// Each layer's mixer: a per-layer override from config.json, else --mixer, else the config's
// pattern, else its default, else the layer's native attention.
MixerSpec choose_layer_mixer(const ModelConfig& c, const LayerMixers& configured, const ModelOptions& options, int layer) {
  if (auto it = configured.layer_overrides.find(layer); it != configured.layer_overrides.end()) return it->second;
  if (options.mixer) return MixerSpec::parse(*options.mixer);
  if (!configured.pattern.empty()) return configured.pattern[layer % configured.pattern.size()];
  if (configured.default_mixer) return *configured.default_mixer;
  if (c.layer_sliding_window[layer] > 0)  // HF sliding_window: keys t−w+1 … t, no sinks
    return MixerSpec::parse("swa:window=" + std::to_string(c.layer_sliding_window[layer]) + ",sink=none");
  return MixerSpec::parse("full");
}

// A window larger than the budget is an error; full attention grows, so it has no fixed size to
// check and is allowed only where chosen per layer.
void check_budget(const MixerSpec& spec, const LayerShape& shape, int layer, std::int64_t budget) {
  const MixerMemory memory = mixer_memory(spec, shape, budget);
  if (memory.grows_with_context)
    fail("--budget", "layer " + std::to_string(layer) + " runs full attention, which grows with the context (budget " +
                         std::to_string(budget) + " token equivalents per layer)");
  if (memory.token_equivalents() > double(budget) + 1e-9)
    fail("mixer '" + spec.to_string() + "'", fmt::format("needs {:g} token equivalents per layer, over the budget of {}",
                                                         memory.token_equivalents(), budget));
}

}  // namespace

DeviceDtype parse_device_dtype(const std::string& name) {
  if (name == "auto" || name == "bf16") return DeviceDtype::BFloat16;
  if (name == "fp16") return DeviceDtype::Float16;
  if (name == "fp32") return DeviceDtype::Float32;
  fail("--dtype", "unknown dtype '" + name + "' (expected auto, bf16, fp16 or fp32)");
}

DeviceDtype resolve_device_dtype(const std::string& name, const WeightStore& store) {
  if (name != "auto") return parse_device_dtype(name);
  bool any_floating = false;
  for (const std::string& tensor : store.names()) {
    const DType dtype = store.find(tensor)->dtype;
    if (!is_floating(dtype)) continue;
    if (dtype != DType::F16) return DeviceDtype::BFloat16;
    any_floating = true;
  }
  return any_floating ? DeviceDtype::Float16 : DeviceDtype::BFloat16;
}

std::size_t device_dtype_bytes(DeviceDtype dtype) { return dtype == DeviceDtype::Float32 ? 4 : 2; }

Model Model::load(const std::filesystem::path& dir, const ModelOptions& options) {
  Model model;
  model.config_ = ModelConfig::from_dir(dir);
  const auto& c = model.config_;
  const std::string config_file = (dir / "config.json").string();
  if (c.head_dim > kMaxHeadDim)
    fail(config_file, "head_dim " + std::to_string(c.head_dim) + " exceeds the supported " + std::to_string(kMaxHeadDim));
  const LayerMixers configured = LayerMixers::from_config(read_json_file(dir / "config.json"), config_file, c.num_layers);
  const auto budget = options.budget_tokens ? options.budget_tokens : configured.budget_tokens;
  if (budget && *budget <= 0) fail("--budget", "must be a positive number of tokens");

  if (options.backend != "cpu" && options.backend != "cuda")
    fail("--backend", "unknown backend '" + options.backend + "' (expected cpu or cuda)");
  if (options.backend == "cpu" && options.dtype != "auto" && options.dtype != "fp32")
    fail("--dtype", "the CPU backend computes in fp32; --dtype " + options.dtype + " needs --backend cuda");
  const WeightStore store = WeightStore::open(dir);
  model.weights_ = std::make_unique<ModelWeights>(ModelWeights::load(c, store));
  model.backend_ = std::make_unique<CpuBackend>();
  model.rope_inv_freq_ = rope_inverse_frequencies(c.rope, c.head_dim);
  const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
  DeviceModelSource device_source{.config = &model.config_, .weights = model.weights_.get(), .layer_mixers = {},
                                  .layer_parameters = {}, .rope_inv_freq = model.rope_inv_freq_,
                                  .dtype = resolve_device_dtype(options.dtype, store), .synthetic_seed = 0};
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const MixerSpec spec = choose_layer_mixer(c, configured, options, layer);
    // Full layers the config places on purpose (a single layer or the pattern) are exempt.
    const bool placed = configured.layer_overrides.contains(layer) || (!options.mixer && !configured.pattern.empty());
    const bool chosen_full = spec.kind == MixerSpec::Kind::Full && placed;
    if (budget && !chosen_full) check_budget(spec, shape, layer, *budget);
    MixerParameters parameters = MixerParameters::load(spec, shape, c.hidden_size, layer, &store);
    for (auto& name : parameters.untrained) model.untrained_.push_back(name);
    if (options.backend == "cuda") {
      device_source.layer_mixers.push_back(spec);
      device_source.layer_parameters.push_back(parameters);
    }
    model.mixers_.push_back(make_mixer(spec, shape, c.hidden_size, std::move(parameters), model.rope_inv_freq_));
  }
  if (options.backend == "cuda") {
    model.device_ = make_cuda_model(device_source);
    model.weights_.reset();  // the device holds its own copy; a 4B model's fp32 host copy is 16 GB
  }
  return model;
}

std::string Model::backend_description() const {
  return device_ ? "cuda (" + device_->device_name() + ")" : std::string("cpu");
}

const MixerSpec& Model::layer_mixer(int layer) const { return mixers_.at(layer)->spec(); }

std::size_t Model::accounted_state_bytes(std::int64_t context_tokens) const {
  std::size_t bytes = 0;
  for (const auto& mixer : mixers_) bytes += mixer->memory(context_tokens).total_bytes();
  return bytes;
}

Session::Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

std::size_t Session::cache_bytes() const {
  if (device_) return device_->state_bytes();
  std::size_t bytes = 0;
  for (const auto& layer : layers_) bytes += layer.state_bytes();
  return bytes;
}

std::size_t Session::layer_state_bytes(int layer) const {
  return device_ ? device_->layer_state_bytes(layer) : layers_.at(layer).state_bytes();
}

Session Model::copy_session(const Session& source) const {
  Session copy;
  copy.logits_ = source.logits_;
  copy.position_ = source.position_, copy.capacity_ = source.capacity_, copy.chunk_ = source.chunk_;
  if (source.device_) {  // the device holds the state; the host side is the bookkeeping above
    copy.device_ = device_->new_session(source.capacity_, source.chunk_);
    device_->copy_state(*source.device_, *copy.device_);
    return copy;
  }
  copy.layers_ = source.layers_;
  copy.residual_ = source.residual_, copy.normed_ = source.normed_, copy.queries_ = source.queries_;
  copy.keys_ = source.keys_, copy.values_ = source.values_, copy.attention_ = source.attention_;
  copy.projected_ = source.projected_, copy.gate_ = source.gate_, copy.up_ = source.up_;
  copy.positions_ = source.positions_;
  return copy;
}

Session Model::new_session(std::int64_t capacity, int chunk) const {
  if (capacity <= 0) fail("session", "capacity must be positive");
  const auto& c = config_;
  Session s;
  s.capacity_ = capacity;
  s.chunk_ = int(std::clamp<std::int64_t>(chunk, 1, capacity));
  s.logits_.resize(c.vocab_size);
  if (device_) {
    s.device_ = device_->new_session(capacity, s.chunk_);
    return s;
  }
  for (const auto& mixer : mixers_) s.layers_.push_back(mixer->new_state(capacity, s.chunk_));
  const std::int64_t n = s.chunk_, kv_row = std::int64_t(c.num_kv_heads) * c.head_dim;
  s.residual_.resize(n * c.hidden_size);
  s.normed_.resize(n * c.hidden_size);
  s.projected_.resize(n * c.hidden_size);
  s.queries_.resize(n * c.num_query_heads * c.head_dim);
  s.attention_.resize(n * c.num_query_heads * c.head_dim);
  s.keys_.resize(n * kv_row);
  s.values_.resize(n * kv_row);
  s.gate_.resize(n * c.intermediate_size);
  s.up_.resize(n * c.intermediate_size);
  s.positions_.resize(n);
  return s;
}

void Model::forward(Session& session, std::span<const std::int32_t> tokens, std::span<float> logits,
                    bool all_logits) const {
  forward(session, tokens, logits, all_logits, nullptr);
}

void Model::forward(Session& session, std::span<const std::int32_t> tokens, std::span<float> logits, bool all_logits,
                    AttentionProbe* probe) const {
  const std::size_t vocab = config_.vocab_size;
  if (tokens.empty()) fail("forward", "no tokens to process");
  if (logits.size() < (all_logits ? tokens.size() * vocab : vocab)) fail("forward", "logits buffer too small");
  for (const std::int32_t id : tokens)
    if (id < 0 || id >= config_.vocab_size)
      fail("input", "token id " + std::to_string(id) + " is outside the vocabulary (size " + std::to_string(vocab) + ")");
  if (device_) {
    if (probe != nullptr) fail("attention probe", "not available on the CUDA backend; run with --backend cpu");
    device_->forward(*session.device_, session.position_, tokens, logits.data(), all_logits);
    session.position_ += std::int64_t(tokens.size());
    return;
  }
  if (probe != nullptr) prepare_probe(*probe, tokens.size());
  for (std::size_t begin = 0; begin < tokens.size(); begin += session.chunk_) {
    const std::size_t count = std::min<std::size_t>(session.chunk_, tokens.size() - begin);
    const bool last_chunk = begin + count == tokens.size();
    float* out = all_logits ? logits.data() + begin * vocab : (last_chunk ? logits.data() : nullptr);
    forward_chunk(session, tokens.subspan(begin, count), out, all_logits, probe, begin);
  }
}

// The probe's buffers, sized for this call; a layer that cannot report it is an error rather
// than a silent gap in the statistics.
void Model::prepare_probe(AttentionProbe& probe, std::size_t tokens) const {
  if (probe.first_keys < 1) fail("attention probe", "first_keys must be at least 1");
  probe.mass_per_layer.resize(mixers_.size());
  for (std::size_t l = 0; l < mixers_.size(); ++l) {
    if (!mixers_[l]->supports_attention_probe())
      fail("attention probe", "layer " + std::to_string(l) + " runs '" + mixers_[l]->spec().to_string() +
                                  "', which has no softmax attention over absolute positions to probe");
    probe.mass_per_layer[l].assign(tokens * config_.num_query_heads, 0.0f);
  }
}

std::span<const float> Model::prefill(Session& session, std::span<const std::int32_t> tokens) const {
  forward(session, tokens, session.logits_);
  return session.logits_;
}

std::span<const float> Model::decode(Session& session, std::int32_t token) const {
  forward(session, std::span<const std::int32_t>(&token, 1), session.logits_);
  return session.logits_;
}

std::int32_t Model::decode_and_sample(Session& session, std::int32_t token, Sampler& sampler) const {
  if (!device_) return sampler.sample(decode(session, token));
  if (token < 0 || token >= config_.vocab_size)
    fail("input", "token id " + std::to_string(token) + " is outside the vocabulary (size " +
                      std::to_string(config_.vocab_size) + ")");
  const std::int32_t next = device_->decode_and_sample(*session.device_, session.position_, token, sampler.params());
  session.position_ += 1;
  return next;
}

// One chunk of n tokens at positions p0 … p0+n−1 through every layer:
//   x = embed(tokens)
//   per layer:  h = rmsnorm(x);  q, k, v = h·Wqᵀ(+b), h·Wkᵀ(+b), h·Wvᵀ(+b)
//               [Qwen3] q, k = rmsnorm per head;  q, k = rope(q, k, positions)
//               x += mixer(h, q, k, v; layer state) · Woᵀ     (full attention, swa, mlstm, …)
//               h = rmsnorm(x);  x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ) · Wdᵀ
//   logits = rmsnorm(x) · Wlmᵀ   (last token, or every token when all_logits)
// With a probe, each mixer also writes its attention mass on the first keys for these tokens,
// which start at token `probe_first_token` of the forward call.
void Model::forward_chunk(Session& s, std::span<const std::int32_t> tokens, float* logits, bool all_logits,
                          AttentionProbe* probe, std::size_t probe_first_token) const {
  const auto& c = config_;
  const ModelWeights& w = *weights_;
  Backend& backend = *backend_;
  const int n = int(tokens.size());
  const int hidden = c.hidden_size, d = c.head_dim, hq = c.num_query_heads, hkv = c.num_kv_heads;
  const int q_width = hq * d, kv_width = hkv * d, inter = c.intermediate_size;
  const float eps = float(c.rms_norm_eps);
  for (int i = 0; i < n; ++i) s.positions_[i] = s.position_ + i;
  float* x = s.residual_.data();
  float* h = s.normed_.data();

  backend.embedding(w.embed_tokens.data(), tokens.data(), n, hidden, x);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& layer = w.layers[l];
    auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };

    // Attention block.
    backend.rmsnorm(x, layer.input_norm.data(), n, hidden, eps, h);
    backend.matmul(h, layer.q_proj.data(), bias(layer.q_bias), n, hidden, q_width, s.queries_.data());
    backend.matmul(h, layer.k_proj.data(), bias(layer.k_bias), n, hidden, kv_width, s.keys_.data());
    backend.matmul(h, layer.v_proj.data(), bias(layer.v_bias), n, hidden, kv_width, s.values_.data());
    if (c.qk_norm) {  // Qwen3: RMSNorm over each head's d features, before RoPE
      backend.rmsnorm(s.queries_.data(), layer.q_norm.data(), n * hq, d, eps, s.queries_.data());
      backend.rmsnorm(s.keys_.data(), layer.k_norm.data(), n * hkv, d, eps, s.keys_.data());
    }
    const Mixer& mixer = *mixers_[l];
    if (!mixer.rotates_keys_itself()) {
      backend.rope(s.queries_.data(), n, hq, d, s.positions_.data(), rope_inv_freq_.data());
      backend.rope(s.keys_.data(), n, hkv, d, s.positions_.data(), rope_inv_freq_.data());
    }
    const MixerInput input{.x = h, .queries = s.queries_.data(), .keys = s.keys_.data(), .values = s.values_.data(),
                           .positions = s.positions_.data(), .n = n,
                           .probe_first_keys = probe ? probe->first_keys : 0,
                           .probe_mass = probe ? probe->mass_per_layer[l].data() + probe_first_token * hq : nullptr};
    if (n == 1)
      mixer.decode(backend, input, s.layers_[l], s.attention_.data());
    else
      mixer.prefill(backend, input, s.layers_[l], s.attention_.data());
    backend.matmul(s.attention_.data(), layer.o_proj.data(), nullptr, n, q_width, hidden, s.projected_.data());
    backend.add(x, s.projected_.data(), std::int64_t(n) * hidden);

    // Feed-forward block (SwiGLU).
    backend.rmsnorm(x, layer.post_attention_norm.data(), n, hidden, eps, h);
    backend.matmul(h, layer.gate_proj.data(), nullptr, n, hidden, inter, s.gate_.data());
    backend.matmul(h, layer.up_proj.data(), nullptr, n, hidden, inter, s.up_.data());
    backend.swiglu(s.gate_.data(), s.up_.data(), std::int64_t(n) * inter, s.gate_.data());
    backend.matmul(s.gate_.data(), layer.down_proj.data(), nullptr, n, inter, hidden, s.projected_.data());
    backend.add(x, s.projected_.data(), std::int64_t(n) * hidden);
  }
  s.position_ += n;
  if (logits == nullptr) return;

  // Output head: only the rows whose logits are wanted.
  const int first = all_logits ? 0 : n - 1;
  const int rows = n - first;
  backend.rmsnorm(x + std::int64_t(first) * hidden, w.final_norm.data(), rows, hidden, eps, h);
  backend.matmul(h, w.output_projection(), nullptr, rows, hidden, c.vocab_size, logits);
}

}  // namespace bifocal
