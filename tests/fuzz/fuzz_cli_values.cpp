// libFuzzer target: any text as the value of a CLI flag that the engine parses itself (CLI11 parses
// the plain numbers): bench's --context list and --ablate selection, eval's lengths= and samples=.
// The first byte picks the parser. Each either parses or throws bifocal::Error; --context's list
// comes back sorted, without repeats, each in [1, 2^30].
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bench/bench_runner.h"
#include "bifocal/error.h"
#include "core/kernel_selector.h"
#include "eval/haystack.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        const auto contexts = bifocal::parse_contexts(text);
        for (std::size_t i = 0; i < contexts.size(); ++i)
          if (contexts[i] < 1 || contexts[i] > (std::int64_t(1) << 30) || (i > 0 && contexts[i - 1] >= contexts[i]))
            std::abort();
        break;
      }
      case 1: (void)bifocal::parse_kernel_selection(text); break;
      case 2: (void)bifocal::eval::parse_context_lengths(text, "niah", 16); break;
      default: (void)bifocal::eval::parse_sample_count(text, "niah"); break;
    }
  } catch (const bifocal::Error&) {
  }
  return 0;
}
