// libFuzzer target: any bytes as text to encode. The first byte picks one of the shipped
// tokenizers (the four byte-level BPE ones and the two SentencePiece-style ones of
// tests/golden/tokenizers, and the testbed model's); the rest is the text. For every tokenizer:
// encode either throws bifocal::Error or returns ids inside the vocabulary, and the streaming
// decoder's pieces add up to decode(ids) (tokenizer.h). For byte-level BPE, whose normalizer
// (none or NFC) is idempotent and which spells every byte, re-encoding the decoded text gives the
// same ids. Anything else aborts as a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bifocal/error.h"
#include "bifocal/tokenizer.h"

namespace {

struct Loaded {
  bifocal::Tokenizer tokenizer;
  bool byte_level;
};

std::vector<Loaded> load_all() {
  const std::string golden = BIFOCAL_GOLDEN_DIR "/tokenizers/";
  std::vector<Loaded> all;
  for (const char* name : {"gpt2_bytelevel", "llama3_bytelevel", "qwen2_bytelevel"})
    all.push_back({bifocal::Tokenizer::from_dir(golden + name), true});
  all.push_back({bifocal::Tokenizer::from_dir(BIFOCAL_TESTBED_DIR), true});
  for (const char* name : {"sp_legacy", "sp_metaspace"}) all.push_back({bifocal::Tokenizer::from_dir(golden + name), false});
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<Loaded> tokenizers = load_all();
  if (size == 0) return 0;
  const Loaded& chosen = tokenizers[data[0] % tokenizers.size()];
  const bifocal::Tokenizer& tokenizer = chosen.tokenizer;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::int32_t> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const bifocal::Error&) {
    return 0;
  }
  for (const std::int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
  const std::string decoded = tokenizer.decode(ids);
  bifocal::StreamingDecoder stream(tokenizer);
  std::string streamed;
  for (const std::int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (streamed != decoded) std::abort();
  if (chosen.byte_level && tokenizer.encode(decoded) != ids) std::abort();
  return 0;
}
