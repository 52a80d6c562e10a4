#include "bench/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>
#include <span>

#include <fmt/format.h>

#include "bench/bench_shapes.h"
#include "bench/decode_traffic.h"
#include "core/kernel_selector.h"
#include "core/whole_number.h"
#include "bifocal/budget.h"
#include "bifocal/error.h"
#include "bifocal/model.h"
#include "model/device_model.h"
#include "model/rope.h"

namespace bifocal {

std::vector<std::int64_t> parse_contexts(const std::string& text) {
  std::vector<std::int64_t> contexts;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    std::string item = text.substr(begin, end - begin);
    std::int64_t scale = 1;
    if (!item.empty() && (item.back() == 'k' || item.back() == 'K')) scale = 1024, item.pop_back();
    const auto parsed = parse_whole_number(item);
    const std::int64_t value = parsed.value_or(0);
    if (value <= 0)
      fail("--context", "'" + text + "' is not a comma-separated list of positive token counts (e.g. 1k,8k,32k)");
    // A bound far past any device's memory for a cache, and far inside int64 once the sizes of
    // the caches are multiplied out (value * scale itself overflowed for 9223372036854775807k).
    constexpr std::int64_t kMostTokens = std::int64_t(1) << 30;
    if (value > kMostTokens / scale)
      fail("--context", "'" + item + (scale > 1 ? "k" : "") + "' is more than 2^30 tokens (1048576k)");
    contexts.push_back(value * scale);
    begin = end + 1;
  }
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  return contexts;
}

namespace {

// One mixer's device model: synthetic weights for a shape, or the checkpoint through Model.
struct BenchModel {
  ModelConfig config;
  std::vector<MixerSpec> layer_mixers;
  std::unique_ptr<DeviceModel> synthetic;  // --shape
  std::unique_ptr<Model> checkpoint;       // --model
  const DeviceModel& device() const { return synthetic ? *synthetic : *checkpoint->device_model(); }
};

BenchModel load_bench_model(const BenchOptions& options, const std::string& mixer) {
  BenchModel bench;
  const MixerSpec spec = MixerSpec::parse(mixer);
  if (!options.shape.empty()) {
    bench.config = synthetic_model_config(options.shape);
    const auto& c = bench.config;
    const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
    DeviceModelSource source{.config = &bench.config, .weights = nullptr, .layer_mixers = {}, .layer_parameters = {},
                             .rope_inv_freq = rope_inverse_frequencies(c.rope, c.head_dim),
                             .dtype = parse_device_dtype(options.dtype),
                             .synthetic_seed = options.seed};
    for (int layer = 0; layer < c.num_layers; ++layer) {
      source.layer_mixers.push_back(spec);
      source.layer_parameters.push_back(MixerParameters::load(spec, shape, c.hidden_size, layer, nullptr));
    }
    bench.layer_mixers = source.layer_mixers;
    bench.synthetic = make_cuda_model(source);
  } else {
    ModelOptions model_options;
    model_options.mixer = mixer;
    model_options.backend = "cuda";
    model_options.dtype = options.dtype;
    bench.checkpoint = std::make_unique<Model>(Model::load(options.model_dir, model_options));
    bench.config = bench.checkpoint->config();
    for (int layer = 0; layer < bench.config.num_layers; ++layer)
      bench.layer_mixers.push_back(bench.checkpoint->layer_mixer(layer));
  }
  return bench;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace

BenchReport run_bench(const BenchOptions& options, const std::function<void(const std::string&)>& progress) {
  if (options.shape.empty() == options.model_dir.empty()) fail("bench", "give exactly one of --shape NAME or --model DIR");
  if (options.mixers.empty()) fail("--mixer", "give at least one mixer");
  if (options.contexts.empty()) fail("--context", "give at least one context length");
  if (options.generated_tokens < 1) fail("--gen", "must be at least 1");
  if (options.repeats < 1) fail("--repeat", "must be at least 1");
  if (options.max_prefill < 0) fail("--max-prefill", "must be 0 (no prefill timed) or more, got " + std::to_string(options.max_prefill));
  if (options.prefill_chunk < 1) fail("--prefill-chunk", "must be at least 1 token, got " + std::to_string(options.prefill_chunk));
  for (const auto& mixer : options.mixers) MixerSpec::parse(mixer);  // every spec checked before any run
  for (const auto& kernel : options.ablate_kernels) parse_kernel_selection(kernel);  // NAME[#I[/N]][+…]

  BenchReport report;
  report.date = today();
  report.model = options.shape.empty() ? options.model_dir : options.shape;
  report.dtype = options.dtype;
  report.generated_tokens = options.generated_tokens;
  report.repeats = options.repeats;
  report.prefill_chunk = options.prefill_chunk;
  const std::size_t element_bytes = device_dtype_bytes(parse_device_dtype(options.dtype));
  double bandwidth = 0;
  std::mt19937_64 rng(options.seed);

  for (std::size_t m = 0; m < options.mixers.size(); ++m) {
    const std::string& mixer = options.mixers[m];
    // Each mixer in a fresh CUDA context, as if alone in its process (the last mixer's model and
    // sessions are gone by now). In one context the mixer measured second prefilled 1K tokens
    // 0.3–1.0% slower than alone, whichever mixer it was (stop 78, H100): the tables, which put swa
    // first, read Bifocal's prefill up to a point low beside it.
    if (m > 0) reset_cuda_context();
    const BenchModel bench = load_bench_model(options, mixer);
    const DeviceModel& device = bench.device();
    if (bandwidth == 0) {
      bandwidth = device.measure_copy_bandwidth();
      report.device = device.device_name();
      progress(fmt::format("{}: copy bandwidth {:.2f} TB/s", report.device, bandwidth / 1e12));
    }
    const auto& c = bench.config;
    const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
    for (const std::int64_t context : options.contexts) {
      const std::int64_t capacity = context + options.generated_tokens + 1;
      BenchRow row;
      row.mixer = MixerSpec::parse(mixer).to_string();
      row.context = context;
      row.weight_bytes = device.weight_bytes();
      row.bandwidth = bandwidth;
      {
        // One prefill chunk size for every context, so the workspace (activations of one chunk)
        // is the same fixed amount at 1K and at 256K, and peak memory differs only by the cache.
        const auto session = device.new_session(capacity, options.prefill_chunk);
        row.cache_bytes = session->state_bytes();
        row.workspace_bytes = session->workspace_bytes();
        for (const auto& spec : bench.layer_mixers)
          row.accounted_cache_bytes += mixer_memory(spec, shape, capacity, element_bytes).total_bytes();

        if (context <= options.max_prefill) {
          std::vector<std::int32_t> prompt(context);
          std::uniform_int_distribution<std::int32_t> token(0, c.vocab_size - 1);
          for (auto& id : prompt) id = token(rng);
          // An untimed warm-up prefill first, as llama-bench and vLLM's benchmarks do: the first
          // prefill of a process also loads kernels lazily and lets cuBLAS pick its algorithms.
          const std::span<const std::int32_t> warm_up(prompt.data(), std::min<std::size_t>(prompt.size(), options.prefill_chunk));
          device.time_prefill(*session, warm_up);
          // The median of `repeats` timed prefills, as for the decode (time_prefill starts each from
          // position 0): one prefill's time moves by ±1% from run to run.
          std::vector<double> prefill_seconds;
          for (int r = 0; r < options.repeats; ++r) prefill_seconds.push_back(device.time_prefill(*session, prompt));
          const double seconds = median(prefill_seconds);
          row.time_to_first_token_seconds = seconds;
          row.prefill_tokens_per_second = double(context) / seconds;
        }
        std::vector<double> step_seconds;
        for (int r = 0; r < options.repeats; ++r) {
          device.fill_synthetic_context(*session, context, options.seed + r);  // each repeat from `context`
          step_seconds.push_back(device.time_decode_step(*session, context, options.generated_tokens));
        }
        row.decode_tokens_per_second = 1.0 / median(step_seconds);
        row.peak_device_bytes = device.device_memory_used();
        for (const std::string& kernel : options.ablate_kernels) {  // last: they leave the cache as garbage
          row.ablations.push_back(device.time_ablated_decode_step(*session, context, options.generated_tokens, kernel));
          const DecodeAblation& a = row.ablations.back();
          if (a.launches == 0) {
            progress(fmt::format("{} at {} tokens: --ablate {}: no launch of its decode step matches; "
                                 "skipped (its kernels: {})", row.mixer, context, kernel, a.step_kernels));
            continue;
          }
          progress(fmt::format("{} at {} tokens without {} ({} launches): step {:.1f} µs → {:.1f} µs", row.mixer, context,
                               kernel, a.launches, 1e6 * a.reference_seconds, 1e6 * a.ablated_seconds));
        }
      }
      // The traffic at the middle of the timed steps.
      row.bytes_per_token =
          decode_traffic(c, bench.layer_mixers, context + options.generated_tokens / 2, element_bytes).total();
      progress(fmt::format("{} at {} tokens: decode {:.1f} tok/s ({:.1f}% of roofline){}", row.mixer, context,
                           row.decode_tokens_per_second, 100.0 * row.roofline_ratio(),
                           row.prefill_tokens_per_second ? fmt::format(", prefill {:.0f} tok/s", *row.prefill_tokens_per_second)
                                                         : std::string()));
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

}  // namespace bifocal
