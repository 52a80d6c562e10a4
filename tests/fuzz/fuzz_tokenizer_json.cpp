// libFuzzer target: any bytes as a tokenizer.json. Tokenizer::from_file either throws
// bifocal::Error naming the file or returns a tokenizer that can encode and decode a fixed text;
// a crash, a sanitizer report, a hang or another exception type is a finding. Seeds:
// scripts/fuzz.sh (tests/golden/tokenizers/*/tokenizer.json).
#include <cstddef>
#include <cstdint>

#include "bifocal/error.h"
#include "bifocal/tokenizer.h"
#include "fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static bifocal::fuzz::ScratchFile file("tokenizer.json");
  const auto& path = file.write(data, size);
  try {
    const bifocal::Tokenizer tokenizer = bifocal::Tokenizer::from_file(path);
    const auto ids = tokenizer.encode("Hello, world! 123 <|endoftext|> héllo\n\tend", true);
    (void)tokenizer.decode(ids);
    (void)tokenizer.decode(ids, /*skip_special_tokens=*/true);
  } catch (const bifocal::Error&) {
  }
  return 0;
}
