// libFuzzer target: any bytes as one of the task and results files `bifocal eval` reads. The first
// byte picks the reader (GSM8K and AIME/HMMT JSONL, MMLU CSV, multiple-choice JSONL, HellaSwag
// JSONL text, bAbI text, a results file to resume); the rest is the file. Each either reads it or
// throws bifocal::Error naming the file; a crash, a sanitizer report or another exception type is
// a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "bifocal/error.h"
#include "eval/babilong.h"
#include "eval/eval_results.h"
#include "eval/long_generation.h"
#include "eval/mc_datasets.h"
#include "eval/multiple_choice.h"
#include "fuzz/fuzz_input_file.h"

namespace eval = bifocal::eval;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static bifocal::fuzz::ScratchFile jsonl("task.jsonl"), csv("task.csv"), results("results.jsonl");
  // bAbI is read from DATA_DIR/babi/en-10k/<task 1's file>: a scratch data folder of one file.
  static const std::filesystem::path babi_dir = std::filesystem::temp_directory_path() /
                                                ("bifocal-fuzz-babi-" + std::to_string(getpid()));
  if (size == 0) return 0;
  const int reader = data[0] % 8;
  ++data, --size;
  try {
    switch (reader) {
      case 0: (void)eval::read_gsm8k(jsonl.write(data, size)); break;
      case 1: (void)eval::read_math_competition(jsonl.write(data, size), /*integer_answer=*/true); break;
      case 2: (void)eval::read_math_competition(jsonl.write(data, size), /*integer_answer=*/false); break;
      case 3: (void)eval::read_mmlu_csv(csv.write(data, size)); break;
      case 4: (void)eval::read_choice_jsonl(jsonl.write(data, size)); break;
      case 5: (void)eval::parse_hellaswag_text(std::string(reinterpret_cast<const char*>(data), size), "hellaswag"); break;
      case 6: {
        const auto file = eval::babi_test_file(babi_dir, 1);
        std::filesystem::create_directories(file.parent_path());
        bifocal::fuzz::write_file(file, data, size);
        (void)eval::read_babi_test(babi_dir, 1);
        break;
      }
      default: (void)eval::ResultsFile(results.write(data, size)); break;
    }
  } catch (const bifocal::Error&) {
  }
  return 0;
}
