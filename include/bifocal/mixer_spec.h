// Which sequence mixer a layer runs, parsed from text such as "swa:window=64,sinks=4" or
// "bifocal:window=448,state=kv,sink=learned" (DESIGN.md "Mixers: exact semantics").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace bifocal {

struct MixerSpec {
  enum class Kind { Full, SlidingWindow, Linear, Lolcats, Mlstm, Bifocal };
  enum class Sink { None, Tokens, Learned };           // swa and bifocal's window branch
  enum class Positions { Absolute, Rolling };          // swa: rolling = StreamingLLM
  enum class Feature { Elu1, Hedgehog };               // linear and lolcats
  enum class StatePlacement { PerKvHead, PerQueryHead };  // mlstm and bifocal: state=kv | state=q

  Kind kind = Kind::Full;
  int window = 0;       // cached tokens of the window, sink tokens included (swa, lolcats, bifocal)
  Sink sink = Sink::None;
  int sink_tokens = 0;  // Sink::Tokens: the first s tokens, kept inside the window
  Positions positions = Positions::Absolute;
  Feature feature = Feature::Elu1;
  StatePlacement state = StatePlacement::PerKvHead;

  // Parses SPEC; throws Error("mixer 'SPEC': <what is wrong>") for anything malformed.
  static MixerSpec parse(std::string_view text);
  // The canonical text form, e.g. "swa:window=64,sinks=4"; parse(to_string()) == *this.
  std::string to_string() const;
  bool uses_window() const { return kind == Kind::SlidingWindow || kind == Kind::Lolcats || kind == Kind::Bifocal; }
  bool uses_state() const { return kind == Kind::Linear || kind == Kind::Lolcats || kind == Kind::Mlstm || kind == Kind::Bifocal; }
  bool operator==(const MixerSpec&) const = default;
};

// The mixer of every layer of a model, from the `bifocal` section of config.json:
//   {"mixer": SPEC,                       the default for every layer
//    "pattern": [SPEC, SPEC, SPEC, "full"], layer i takes pattern[i mod 4] (e.g. every fourth full)
//    "layers": {"0": "full"},             single layers, which win over both
//    "budget": TOKENS}                    KV-token equivalents allowed per layer
// A --mixer flag replaces the default and the pattern, keeping the single-layer overrides.
struct LayerMixers {
  std::optional<MixerSpec> default_mixer;        // none: each layer's native attention
  std::vector<MixerSpec> pattern;
  std::map<int, MixerSpec> layer_overrides;
  std::optional<std::int64_t> budget_tokens;     // per-layer budget in KV-token equivalents

  static LayerMixers from_config(const nlohmann::json& config, const std::string& file, int num_layers);
};

}  // namespace bifocal
