#include "core/kernel_selector.h"

#include "bifocal/error.h"
#include "core/whole_number.h"

namespace bifocal {

KernelSelector KernelSelector::parse(std::string_view spec, const std::string& where) {
  const std::string quoted = "'" + std::string(spec) + "'";
  const std::size_t hash = spec.find('#');
  KernelSelector selector;
  selector.name = std::string(spec.substr(0, hash));
  if (selector.name.empty())
    fail(where, quoted + ": give a kernel name (or part of one) before any '#', e.g. gemv or gemv#1/3");
  if (hash == std::string_view::npos) return selector;

  const std::string_view occurrence = spec.substr(hash + 1);
  const std::size_t slash = occurrence.find('/');
  selector.first = parse_whole_int(occurrence.substr(0, slash)).value_or(-1);  // -1: not a number
  if (selector.first < 0)
    fail(where, quoted + ": after '#' comes the launch's number from 0 (NAME#I) or one in every N (NAME#I/N)");
  if (slash == std::string_view::npos) {
    selector.period = 0;
    return selector;
  }
  selector.period = parse_whole_int(occurrence.substr(slash + 1)).value_or(-1);
  if (selector.period < 1) fail(where, quoted + ": N in NAME#I/N must be a whole number of at least 1");
  if (selector.first >= selector.period)
    fail(where, quoted + ": I in NAME#I/N must be below N (launches I, I+N, I+2N, …)");
  return selector;
}

std::vector<KernelSelector> parse_kernel_selection(std::string_view spec, const std::string& where) {
  std::vector<KernelSelector> selectors;
  for (std::size_t begin = 0;;) {
    const std::size_t plus = spec.find('+', begin);
    const std::string_view part = spec.substr(begin, plus == std::string_view::npos ? plus : plus - begin);
    if (part.empty()) fail(where, "'" + std::string(spec) + "': an empty part around '+' (A+B names two kernels)");
    selectors.push_back(KernelSelector::parse(part, where));
    if (plus == std::string_view::npos) return selectors;
    begin = plus + 1;
  }
}

}  // namespace bifocal
