// Mixer spec parsing: every documented form, canonical round trips, and clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bifocal/mixer_spec.h"
#include "test_files.h"

namespace bifocal {
namespace {

using testing::expect_error;
using Kind = MixerSpec::Kind;

TEST(MixerSpec, ParsesEveryDocumentedForm) {
  auto swa = MixerSpec::parse("swa:window=64,sinks=4");
  EXPECT_EQ(swa.kind, Kind::SlidingWindow);
  EXPECT_EQ(swa.window, 64);
  EXPECT_EQ(swa.sink, MixerSpec::Sink::Tokens);
  EXPECT_EQ(swa.sink_tokens, 4);
  EXPECT_EQ(MixerSpec::parse("swa:window=64,sinks=0").sink, MixerSpec::Sink::None);
  EXPECT_EQ(MixerSpec::parse("swa:window=576,sink=learned").sink, MixerSpec::Sink::Learned);
  EXPECT_EQ(MixerSpec::parse("swa:window=64,sink=none").sink, MixerSpec::Sink::None);
  EXPECT_EQ(MixerSpec::parse("swa:window=64,sinks=4,positions=rolling").positions, MixerSpec::Positions::Rolling);
  EXPECT_EQ(MixerSpec::parse("linear:feature=hedgehog").feature, MixerSpec::Feature::Hedgehog);
  EXPECT_EQ(MixerSpec::parse("lolcats").window, 64);
  EXPECT_EQ(MixerSpec::parse("mlstm").state, MixerSpec::StatePlacement::PerKvHead);
  const auto bifocal = MixerSpec::parse("bifocal:window=448,state=q,sink=tokens:4");
  EXPECT_EQ(bifocal.kind, Kind::Bifocal);
  EXPECT_EQ(bifocal.state, MixerSpec::StatePlacement::PerQueryHead);
  EXPECT_EQ(bifocal.sink, MixerSpec::Sink::Tokens);
  EXPECT_EQ(bifocal.sink_tokens, 4);
  EXPECT_EQ(MixerSpec::parse("bifocal:window=448").sink, MixerSpec::Sink::Learned);
  EXPECT_EQ(MixerSpec::parse("full").kind, Kind::Full);
}

TEST(MixerSpec, CanonicalTextRoundTrips) {
  for (const char* text : {"full", "swa:window=64,sinks=4", "swa:window=64,sink=none", "swa:window=576,sink=learned",
                           "swa:window=64,sinks=4,positions=rolling", "linear:feature=elu1", "linear:feature=hedgehog",
                           "lolcats:window=64,feature=hedgehog", "mlstm:state=q", "bifocal:window=448,sink=learned,state=kv",
                           "bifocal:window=64,sink=tokens:4,state=q", "bifocal:window=64,sink=none,state=kv"}) {
    const auto spec = MixerSpec::parse(text);
    EXPECT_EQ(spec.to_string(), text);
    EXPECT_EQ(MixerSpec::parse(spec.to_string()), spec);
  }
}

TEST(MixerSpecErrors, MalformedSpecsNameTheSpecAndTheProblem) {
  const struct {
    const char* spec;
    const char* fragment;
  } cases[] = {
      {"attention", "unknown mixer 'attention'"},
      {"swa", "'window' is required"},
      {"swa:", "nothing after ':'"},
      {"swa:window=64,", "trailing ','"},
      {"swa:window", "expected key=value"},
      {"swa:window=abc", "'window' must be an integer"},
      {"swa:window=0", "'window' must be at least 1"},
      {"swa:window=64,window=32", "'window' given twice"},
      {"swa:window=4,sinks=4", "sink tokens must leave room"},
      {"swa:window=64,sink=maybe", "'sink' must be learned, none or tokens:N"},
      {"swa:window=64,sinks=4,sink=none", "either 'sinks' or 'sink'"},
      {"swa:window=64,positions=relative", "'positions' must be absolute or rolling"},
      {"swa:window=64,sink=learned,positions=rolling", "cannot be combined"},
      {"linear:feature=relu", "'feature' must be elu1 or hedgehog"},
      {"linear:window=64", "'window' does not apply"},
      {"mlstm:state=both", "'state' must be kv or q"},
      {"full:window=3", "does not apply"},
      {"bifocal:window=64,colour=red", "unknown option 'colour'"},
  };
  for (const auto& c : cases) expect_error([&] { MixerSpec::parse(c.spec); }, {std::string("mixer '") + c.spec + "'", c.fragment});
}

TEST(LayerMixers, ReadsTheConfigSection) {
  const nlohmann::json config = {{"bifocal", {{"mixer", "bifocal:window=448,state=kv,sink=learned"},
                                              {"layers", {{"0", "full"}, {"3", "swa:window=64,sinks=4"}}},
                                              {"budget", 576}}}};
  const auto mixers = LayerMixers::from_config(config, "config.json", 4);
  ASSERT_TRUE(mixers.default_mixer.has_value());
  EXPECT_EQ(mixers.default_mixer->kind, Kind::Bifocal);
  EXPECT_EQ(mixers.layer_overrides.at(0).kind, Kind::Full);
  EXPECT_EQ(mixers.layer_overrides.at(3).window, 64);
  EXPECT_EQ(mixers.budget_tokens, 576);
  EXPECT_FALSE(LayerMixers::from_config(nlohmann::json::object(), "c", 4).default_mixer.has_value());
}

TEST(LayerMixers, PatternRepeatsOverLayers) {
  const nlohmann::json config = {{"bifocal", {{"pattern", {"swa:window=64,sinks=4", "swa:window=64,sinks=4", "swa:window=64,sinks=4", "full"}}}}};
  const auto mixers = LayerMixers::from_config(config, "config.json", 8);
  ASSERT_EQ(mixers.pattern.size(), 4u);
  EXPECT_EQ(mixers.pattern[3].kind, Kind::Full);
  expect_error([] { LayerMixers::from_config({{"bifocal", {{"pattern", {"full", 3}}}}}, "/m/config.json", 2); },
               {"'pattern' entry 1 must be a string"});
  expect_error([] { LayerMixers::from_config({{"bifocal", {{"pattern", nlohmann::json::array()}}}}, "/m/config.json", 2); },
               {"'pattern' must be a non-empty list"});
}

TEST(LayerMixers, BadSectionsAreNamed) {
  expect_error([] { LayerMixers::from_config({{"bifocal", {{"mixer", "swa:window=x"}}}}, "/m/config.json", 2); },
               {"/m/config.json", "'bifocal' section", "must be an integer"});
  expect_error([] { LayerMixers::from_config({{"bifocal", {{"layers", {{"7", "full"}}}}}}, "/m/config.json", 2); },
               {"/m/config.json", "layer '7'"});
  expect_error([] { LayerMixers::from_config({{"bifocal", {{"windw", 3}}}}, "/m/config.json", 2); },
               {"unknown key 'windw'"});
  expect_error([] { LayerMixers::from_config({{"bifocal", {{"budget", -5}}}}, "/m/config.json", 2); },
               {"'budget' must be a positive integer"});
}

}  // namespace
}  // namespace bifocal
