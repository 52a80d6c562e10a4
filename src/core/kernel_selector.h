// Which launches of a decode step `bifocal bench --ablate SPEC` empties. SPEC is
//   NAME        every kernel whose bare name (core/kernel_name.h) contains NAME
//   NAME#I      only the I-th of those launches (from 0), in the order the step runs them
//   NAME#I/N    the I-th, (I+N)-th, (I+2N)-th, …: one launch in every N
//   A+B         the launches A takes and those B takes, emptied together in one timing (kernels
//               that overlap each other, as Bifocal's window attention and mLSTM step, hide each
//               other's cost when emptied one at a time)
// so that one kernel used for several products can be costed product by product: Qwen3-4B's
// `gemv` runs q+k+v, o and down in every layer and the LM head last, so gemv#0/3 is q+k+v (and
// the LM head, occurrence 108), gemv#1/3 o_proj, gemv#2/3 down_proj, gemv#108 the LM head.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bifocal {

struct KernelSelector {
  std::string name;  // a part of the bare kernel name
  int first = 0;     // the first occurrence taken (from 0)
  int period = 1;    // then every period-th; 0: only `first`

  // Parses SPEC as above; throws Error naming `where` (the flag) and what is wrong.
  static KernelSelector parse(std::string_view spec, const std::string& where = "--ablate");

  bool matches_name(std::string_view kernel_name) const { return kernel_name.find(name) != std::string_view::npos; }
  // Whether the occurrence-th launch whose name matches (from 0, in the step's order) is taken.
  bool takes(int occurrence) const {
    if (period == 0) return occurrence == first;
    return occurrence >= first && (occurrence - first) % period == 0;
  }
};

// The selectors of "A+B+…" (each part as KernelSelector::parse); throws Error naming `where`.
std::vector<KernelSelector> parse_kernel_selection(std::string_view spec, const std::string& where = "--ablate");

}  // namespace bifocal
