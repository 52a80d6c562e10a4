#include "mixer/mixers.h"

namespace bifocal {

std::unique_ptr<Mixer> make_mixer(const MixerSpec& spec, const LayerShape& shape, int hidden, MixerParameters parameters,
                                  const std::vector<float>& inv_freq) {
  switch (spec.kind) {
    case MixerSpec::Kind::Full:
      return std::make_unique<FullAttentionMixer>(spec, shape, hidden);
    case MixerSpec::Kind::SlidingWindow:
      return std::make_unique<SlidingWindowMixer>(spec, shape, hidden, std::move(parameters.sinks), inv_freq);
    case MixerSpec::Kind::Linear:
      return std::make_unique<LinearAttentionMixer>(spec, shape, hidden, std::move(parameters.feature_map));
    case MixerSpec::Kind::Lolcats:
      return std::make_unique<LolcatsMixer>(spec, shape, hidden, std::move(parameters.feature_map),
                                            std::move(parameters.window_factor));
    case MixerSpec::Kind::Mlstm:
      return std::make_unique<MlstmMixer>(spec, shape, hidden, std::move(parameters));
    case MixerSpec::Kind::Bifocal:
      return std::make_unique<BifocalMixer>(spec, shape, hidden, std::move(parameters), inv_freq);
  }
  return nullptr;
}

}  // namespace bifocal
