#include "bifocal/mixer_spec.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "bifocal/error.h"

namespace bifocal {

namespace {

struct KindName {
  MixerSpec::Kind kind;
  const char* name;
};
constexpr KindName kKinds[] = {{MixerSpec::Kind::Full, "full"},       {MixerSpec::Kind::SlidingWindow, "swa"},
                               {MixerSpec::Kind::Linear, "linear"},   {MixerSpec::Kind::Lolcats, "lolcats"},
                               {MixerSpec::Kind::Mlstm, "mlstm"},     {MixerSpec::Kind::Bifocal, "bifocal"}};

class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  [[noreturn]] void error(const std::string& what) const { fail("mixer '" + std::string(text_) + "'", what); }

  int parse_int(std::string_view key, std::string_view value, int minimum) const {
    int result = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), result);
    if (ec != std::errc() || end != value.data() + value.size())
      error("'" + std::string(key) + "' must be an integer, got '" + std::string(value) + "'");
    if (result < minimum) error("'" + std::string(key) + "' must be at least " + std::to_string(minimum));
    return result;
  }

  // sink=learned | none | tokens:S
  void parse_sink(std::string_view value, MixerSpec& spec) const {
    if (value == "learned") {
      spec.sink = MixerSpec::Sink::Learned;
    } else if (value == "none") {
      spec.sink = MixerSpec::Sink::None;
      spec.sink_tokens = 0;
    } else if (value.starts_with("tokens:")) {
      spec.sink_tokens = parse_int("sink=tokens", value.substr(7), 1);
      spec.sink = MixerSpec::Sink::Tokens;
    } else {
      error("'sink' must be learned, none or tokens:N, got '" + std::string(value) + "'");
    }
  }

  MixerSpec parse() const {
    MixerSpec spec;
    const auto colon = text_.find(':');
    const std::string_view kind_name = text_.substr(0, colon);
    bool known = false;
    for (const auto& k : kKinds)
      if (kind_name == k.name) {
        spec.kind = k.kind;
        known = true;
      }
    if (!known) error("unknown mixer '" + std::string(kind_name) + "' (known: full, swa, linear, lolcats, mlstm, bifocal)");
    // Defaults (DESIGN.md): swa keeps 4 sink tokens, bifocal a learned sink and one state per KV head.
    if (spec.kind == MixerSpec::Kind::SlidingWindow) {
      spec.sink = MixerSpec::Sink::Tokens;
      spec.sink_tokens = 4;
    }
    if (spec.kind == MixerSpec::Kind::Bifocal) spec.sink = MixerSpec::Sink::Learned;
    if (spec.kind == MixerSpec::Kind::Lolcats) {
      spec.window = 64;
      spec.feature = MixerSpec::Feature::Hedgehog;
    }
    std::map<std::string, std::string> seen;
    std::string_view rest = colon == std::string_view::npos ? std::string_view() : text_.substr(colon + 1);
    if (colon != std::string_view::npos && rest.empty()) error("nothing after ':'");
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (comma != std::string_view::npos && rest.empty()) error("trailing ','");
      const auto equals = item.find('=');
      if (equals == std::string_view::npos || equals == 0 || equals + 1 == item.size())
        error("expected key=value, got '" + std::string(item) + "'");
      const std::string key(item.substr(0, equals));
      const std::string_view value = item.substr(equals + 1);
      if (!seen.emplace(key, value).second) error("'" + key + "' given twice");
      apply(key, value, spec);
    }
    validate(spec, seen);
    return spec;
  }

 private:
  void apply(const std::string& key, std::string_view value, MixerSpec& spec) const {
    using Kind = MixerSpec::Kind;
    auto only_for = [&](std::initializer_list<Kind> kinds) {
      for (Kind k : kinds)
        if (spec.kind == k) return;
      error("option '" + key + "' does not apply to this mixer");
    };
    if (key == "window") {
      only_for({Kind::SlidingWindow, Kind::Lolcats, Kind::Bifocal});
      spec.window = parse_int(key, value, 1);
    } else if (key == "sinks") {  // the paper's SWA(w, s): s sink tokens inside the window
      only_for({Kind::SlidingWindow, Kind::Bifocal});
      spec.sink_tokens = parse_int(key, value, 0);
      spec.sink = spec.sink_tokens > 0 ? MixerSpec::Sink::Tokens : MixerSpec::Sink::None;
    } else if (key == "sink") {
      only_for({Kind::SlidingWindow, Kind::Bifocal});
      parse_sink(value, spec);
    } else if (key == "positions") {
      only_for({Kind::SlidingWindow});
      if (value == "absolute") spec.positions = MixerSpec::Positions::Absolute;
      else if (value == "rolling") spec.positions = MixerSpec::Positions::Rolling;
      else error("'positions' must be absolute or rolling, got '" + std::string(value) + "'");
    } else if (key == "feature") {
      only_for({Kind::Linear, Kind::Lolcats});
      if (value == "elu1") spec.feature = MixerSpec::Feature::Elu1;
      else if (value == "hedgehog") spec.feature = MixerSpec::Feature::Hedgehog;
      else error("'feature' must be elu1 or hedgehog, got '" + std::string(value) + "'");
    } else if (key == "state") {
      only_for({Kind::Mlstm, Kind::Bifocal});
      if (value == "kv") spec.state = MixerSpec::StatePlacement::PerKvHead;
      else if (value == "q") spec.state = MixerSpec::StatePlacement::PerQueryHead;
      else error("'state' must be kv or q, got '" + std::string(value) + "'");
    } else {
      error("unknown option '" + key + "'");
    }
  }

  void validate(const MixerSpec& spec, const std::map<std::string, std::string>& seen) const {
    if (seen.contains("sinks") && seen.contains("sink")) error("give either 'sinks' or 'sink', not both");
    if ((spec.kind == MixerSpec::Kind::SlidingWindow || spec.kind == MixerSpec::Kind::Bifocal) && spec.window == 0)
      error("'window' is required");
    if (spec.sink == MixerSpec::Sink::Tokens && spec.sink_tokens >= spec.window)
      error("the " + std::to_string(spec.sink_tokens) + " sink tokens must leave room in the window of " +
            std::to_string(spec.window) + " (sinks are counted inside the window)");
    if (spec.positions == MixerSpec::Positions::Rolling && spec.sink == MixerSpec::Sink::Learned)
      error("positions=rolling keeps token sinks; it cannot be combined with sink=learned");
  }

  std::string_view text_;
};

}  // namespace

MixerSpec MixerSpec::parse(std::string_view text) { return SpecParser(text).parse(); }

std::string MixerSpec::to_string() const {
  std::string out;
  for (const auto& k : kKinds)
    if (k.kind == kind) out = k.name;
  std::vector<std::string> options;
  if (uses_window()) options.push_back("window=" + std::to_string(window));
  if (kind == Kind::SlidingWindow || kind == Kind::Bifocal) {
    if (sink == Sink::Learned) options.push_back("sink=learned");
    else if (sink == Sink::None) options.push_back("sink=none");
    else options.push_back(kind == Kind::SlidingWindow ? "sinks=" + std::to_string(sink_tokens)
                                                       : "sink=tokens:" + std::to_string(sink_tokens));
  }
  if (kind == Kind::SlidingWindow && positions == Positions::Rolling) options.push_back("positions=rolling");
  if (kind == Kind::Linear || kind == Kind::Lolcats) options.push_back(feature == Feature::Elu1 ? "feature=elu1" : "feature=hedgehog");
  if (kind == Kind::Mlstm || kind == Kind::Bifocal) options.push_back(state == StatePlacement::PerKvHead ? "state=kv" : "state=q");
  for (std::size_t i = 0; i < options.size(); ++i) out += (i == 0 ? ":" : ",") + options[i];
  return out;
}

LayerMixers LayerMixers::from_config(const nlohmann::json& config, const std::string& file, int num_layers) {
  LayerMixers mixers;
  if (!config.contains("bifocal") || config["bifocal"].is_null()) return mixers;
  const auto& section = config["bifocal"];
  const std::string where = file + " 'bifocal' section";
  if (!section.is_object()) fail(where, "must be an object");
  for (const auto& [key, value] : section.items()) {
    if (key == "mixer") {
      if (!value.is_string()) fail(where, "'mixer' must be a string");
      try {
        mixers.default_mixer = MixerSpec::parse(value.get<std::string>());
      } catch (const Error& e) {
        fail(where, e.what());
      }
    } else if (key == "layers") {
      if (!value.is_object()) fail(where, "'layers' must map layer numbers to mixer specs");
      for (const auto& [layer_text, spec] : value.items()) {
        int layer = -1;
        const auto [end, ec] = std::from_chars(layer_text.data(), layer_text.data() + layer_text.size(), layer);
        if (ec != std::errc() || end != layer_text.data() + layer_text.size() || layer < 0 || layer >= num_layers)
          fail(where, "layer '" + layer_text + "' is not a layer number below " + std::to_string(num_layers));
        if (!spec.is_string()) fail(where, "layer " + layer_text + ": mixer must be a string");
        try {
          mixers.layer_overrides[layer] = MixerSpec::parse(spec.get<std::string>());
        } catch (const Error& e) {
          fail(where, "layer " + layer_text + ": " + e.what());
        }
      }
    } else if (key == "pattern") {
      if (!value.is_array() || value.empty()) fail(where, "'pattern' must be a non-empty list of mixer specs");
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string()) fail(where, "'pattern' entry " + std::to_string(i) + " must be a string");
        try {
          mixers.pattern.push_back(MixerSpec::parse(value[i].get<std::string>()));
        } catch (const Error& e) {
          fail(where, "'pattern' entry " + std::to_string(i) + ": " + e.what());
        }
      }
    } else if (key == "budget") {
      if (!value.is_number_integer() || value.get<std::int64_t>() <= 0) fail(where, "'budget' must be a positive integer");
      mixers.budget_tokens = value.get<std::int64_t>();
    } else {
      fail(where, "unknown key '" + key + "' (known: mixer, pattern, layers, budget)");
    }
  }
  return mixers;
}

}  // namespace bifocal
