// bifocal compare: perplexity on held-out text by token position for several mixers at once
// (the mission statement of DESIGN.md: full attention stays flat, a window without sinks blows
// up once the first tokens leave it, SWA(w, s) with sinks stays close to full), plus
// attention-sink statistics of the model's own attention.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "bifocal/budget.h"
#include "bifocal/error.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "commands.h"
#include "eval/compare_report.h"

namespace bifocal::cli {

namespace {

const char* const kDefaultMixers[] = {"full", "swa:window=64,sinks=0", "swa:window=64,sinks=4", "swa:window=256,sinks=4"};

struct CompareFlags {
  std::string model;
  std::vector<std::string> texts;
  std::vector<std::string> mixers;
  int context = 4096;
  std::string buckets = "0,128,256,512,1024,2048,4096";
  int max_windows = 0;
  std::string out;
  bool attention_stats = false;
  int first_tokens = 1;
  BackendFlags backend;
};

std::vector<int> parse_bucket_edges(const std::string& text, int context) {
  std::vector<int> edges;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    int value = 0;
    const auto [rest, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || rest != item.data() + item.size())
      fail("--buckets", "'" + item + "' is not an integer (give edges like 0,128,256)");
    edges.push_back(value);
    begin = end + 1;
  }
  if (edges.size() < 2) fail("--buckets", "need at least two edges (e.g. 0,128,256)");
  if (edges.front() < 0) fail("--buckets", "edges must not be negative");
  for (std::size_t i = 1; i < edges.size(); ++i)
    if (edges[i] <= edges[i - 1]) fail("--buckets", fmt::format("edges must increase, but {} follows {}", edges[i], edges[i - 1]));
  if (edges.back() > context)
    fail("--buckets", fmt::format("the last edge {} is past --context {}: no window reaches it", edges.back(), context));
  return edges;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot read text file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (buffer.str().empty()) fail(path, "empty text file");
  return buffer.str();
}

// The command as it ran, with every default spelled out (compare.md records it).
std::string command_line(const CompareFlags& f, const std::vector<MixerSpec>& specs) {
  std::string line = "bifocal compare --model " + shell_quote(f.model);
  for (const auto& text : f.texts) line += " --text " + shell_quote(text);
  for (const auto& spec : specs) line += " --mixer " + shell_quote(spec.to_string());
  line += fmt::format(" --context {} --buckets {}", f.context, f.buckets);
  if (f.max_windows > 0) line += fmt::format(" --max-windows {}", f.max_windows);
  if (!f.out.empty()) line += " --out " + shell_quote(f.out);
  if (f.attention_stats) line += fmt::format(" --attention-stats --first-tokens {}", f.first_tokens);
  if (f.backend.backend != "cpu") line += " --backend " + f.backend.backend + " --dtype " + f.backend.dtype;
  return line;
}

// Mean over layers of each layer's BF16 KV-token equivalents at `context` tokens.
double token_equivalents_per_layer(const Model& model, std::int64_t context) {
  const auto& c = model.config();
  const LayerShape shape{c.num_query_heads, c.num_kv_heads, c.head_dim, 0};
  double sum = 0;
  for (int l = 0; l < c.num_layers; ++l) sum += mixer_memory(model.layer_mixer(l), shape, context).token_equivalents();
  return sum / c.num_layers;
}

// Progress on standard error: rewritten in place on a terminal, one line per window otherwise.
class Progress {
 public:
  Progress(std::size_t mixer, std::size_t mixers, std::string spec)
      : mixer_(mixer), mixers_(mixers), spec_(std::move(spec)), terminal_(isatty(STDERR_FILENO)) {}
  void operator()(const PerplexityProgress& p) const {
    std::fprintf(stderr, "%smixer %zu/%zu %s: window %zu/%zu, %.1f tok/s%s", terminal_ ? "\r" : "", mixer_, mixers_,
                 spec_.c_str(), p.window, p.windows, p.seconds > 0 ? double(p.tokens) / p.seconds : 0.0,
                 terminal_ && p.window < p.windows ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  std::size_t mixer_, mixers_;
  std::string spec_;
  bool terminal_;
};

// The probe needs softmax attention over absolute positions in every layer (full, or swa without
// rolling positions); a checkpoint whose config.json places other mixers is probed with full
// attention instead, and the report says so.
Model attention_model(const std::string& dir, std::string& described) {
  Model native = Model::load(dir);
  for (int l = 0; l < native.config().num_layers; ++l) {
    const MixerSpec& spec = native.layer_mixer(l);
    const bool softmax = spec.kind == MixerSpec::Kind::Full ||
                         (spec.kind == MixerSpec::Kind::SlidingWindow && spec.positions == MixerSpec::Positions::Absolute);
    if (!softmax) {
      described = "full attention: the checkpoint's own mixers have no softmax attention to probe";
      return Model::load(dir, model_options("full", 0));
    }
  }
  described = "the checkpoint's own attention";
  return native;
}

}  // namespace

Run add_compare_command(CLI::App& app) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* command = app.add_subcommand(
      "compare", "Perplexity on held-out text by token position for several mixers (Markdown table; --out adds JSON and SVG)");
  command->add_option("-m,--model", flags->model, "Checkpoint directory (config.json, *.safetensors, tokenizer.json)")->required();
  command->add_option("--text", flags->texts, "Held-out text file (repeatable); each is cut into its own windows")->required();
  command->add_option("--mixer", flags->mixers,
                      "Mixer spec to compare (repeatable); default: full, swa:window=64,sinks=0, swa:window=64,sinks=4, "
                      "swa:window=256,sinks=4");
  command->add_option("--context", flags->context, "Tokens per window (BOS included); every window starts a fresh session")
      ->capture_default_str();
  command->add_option("--buckets", flags->buckets, "Increasing position bucket edges; the last must be <= --context")
      ->capture_default_str();
  command->add_option("--max-windows", flags->max_windows, "Score at most this many windows; 0 = all")->capture_default_str();
  command->add_option("--out", flags->out, "Directory for compare.md, compare.json and compare.svg");
  command->add_flag("--attention-stats", flags->attention_stats,
                    "Also measure the attention mass on the first tokens per layer, with the model's own attention "
                    "(always on the CPU backend: the probe is a CPU feature)");
  command->add_option("--first-tokens", flags->first_tokens, "Key positions counted as the first tokens by --attention-stats")
      ->capture_default_str();
  add_backend_options(*command, flags->backend);
  return [flags] {
    const CompareFlags& f = *flags;
    // Everything the user gave is checked before any model runs.
    if (f.context < 2) fail("--context", "must be at least 2 tokens");
    const std::vector<int> edges = parse_bucket_edges(f.buckets, f.context);
    if (f.max_windows < 0) fail("--max-windows", "must not be negative");
    if (f.first_tokens < 1) fail("--first-tokens", "must be at least 1");
    std::vector<MixerSpec> specs;
    for (const auto& text : f.mixers) specs.push_back(MixerSpec::parse(text));
    if (specs.empty())
      for (const char* text : kDefaultMixers) specs.push_back(MixerSpec::parse(text));
    std::vector<std::string> texts;
    for (const auto& path : f.texts) texts.push_back(read_text_file(path));
    if (!f.out.empty()) prepare_report_directory(f.out);

    const Tokenizer tokenizer = Tokenizer::from_dir(f.model);
    CompareReport report;
    report.command_line = command_line(f, specs);
    report.model = f.model;
    report.texts = f.texts;
    report.context = f.context;
    report.bucket_edges = edges;
    report.bos = window_bos(tokenizer, ModelConfig::from_dir(f.model));
    std::vector<std::vector<std::int32_t>> windows;
    std::size_t text_tokens = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const auto ids = tokenizer.encode(texts[i]);
      if (ids.empty()) fail(f.texts[i], "the text has no tokens");
      text_tokens += ids.size();
      Windows split = split_windows(ids, f.context, report.bos, edges.back());
      report.dropped_tokens += split.dropped_tokens;
      for (auto& window : split.windows) windows.push_back(std::move(window));
    }
    if (windows.empty())
      fail("--text", fmt::format("{} text tokens make no window of at least {} tokens (the last bucket edge)", text_tokens,
                                 edges.back()));
    if (f.max_windows > 0 && windows.size() > std::size_t(f.max_windows)) windows.resize(f.max_windows);
    report.windows = windows.size();
    std::fprintf(stderr, "bifocal: %zu text tokens -> %zu windows of up to %d tokens%s", text_tokens, windows.size(),
                 f.context, report.bos ? fmt::format(" (BOS {} first)", *report.bos).c_str() : "");
    if (report.dropped_tokens > 0)
      std::fprintf(stderr, "; dropped %zu tokens at the end of a text (a window shorter than %d tokens)", report.dropped_tokens,
                   edges.back());
    std::fprintf(stderr, "\n");

    for (std::size_t i = 0; i < specs.size(); ++i) {
      const std::string spec = specs[i].to_string();
      const Model model = Model::load(f.model, model_options(spec, 0, f.backend));
      warn_untrained(model);
      if (i == 0 && !runs_past_max_positions(model) && f.context > model.config().max_position_embeddings)
        std::fprintf(stderr, "bifocal: warning: --context %d exceeds max_position_embeddings (%d)\n", f.context,
                     model.config().max_position_embeddings);
      MixerComparison row{.mixer = spec,
                          .perplexity = evaluate_perplexity(model, windows, edges, Progress(i + 1, specs.size(), spec)),
                          .accounted_state_bytes = model.accounted_state_bytes(f.context),
                          .token_equivalents_per_layer = token_equivalents_per_layer(model, f.context)};
      report.mixers.push_back(std::move(row));
    }
    if (f.attention_stats) {
      const Model model = attention_model(f.model, report.attention_mixer);
      std::size_t shortest = windows.front().size();
      for (const auto& window : windows) shortest = std::min(shortest, window.size());
      std::fprintf(stderr, "bifocal: attention statistics over %zu windows (%s)\n", windows.size(), report.attention_mixer.c_str());
      const std::vector<std::int64_t> position_edges(report.bucket_edges.begin(), report.bucket_edges.end());
      report.attention = measure_attention_sinks(model, windows, f.first_tokens, sink_query_start(shortest, f.first_tokens),
                                                 position_edges);
    }

    std::fputs(perplexity_table_markdown(report).c_str(), stdout);
    if (report.attention) {
      std::fprintf(stdout, "\nAttention on the first tokens (%s), queries at positions >= %lld:\n\n",
                   report.attention_mixer.c_str(), (long long)report.attention->min_query_position);
      std::fputs(attention_table_markdown(*report.attention).c_str(), stdout);
      std::fputs(("\nBy query position:\n\n" + position_sink_table_markdown(*report.attention)).c_str(), stdout);
    }
    if (!f.out.empty())
      write_report_files(f.out, {{"compare.md", compare_markdown(report)},
                                 {"compare.json", compare_json(report).dump(2) + "\n"},
                                 {"compare.svg", render_line_plot_svg(compare_plot(report))}});
    return 0;
  };
}

}  // namespace bifocal::cli
