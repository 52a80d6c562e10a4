#include "eval/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bifocal/error.h"
#include "eval/seeded_random.h"

namespace bifocal::eval {

double interpolated_quantile(std::span<const double> sorted, double q) {
  if (sorted.empty()) fail("quantile", "no values");
  if (!(q >= 0 && q <= 1)) fail("quantile", "q must lie in [0, 1]");
  const double rank = q * double(sorted.size() - 1);
  const auto below = std::size_t(std::floor(rank));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = rank - double(below);
  // Equal neighbours give that value exactly (no rounding from the interpolation).
  if (sorted[below] == sorted[above]) return sorted[below];
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

PairedBootstrapResult paired_bootstrap(std::span<const double> a, std::span<const double> b,
                                       const PairedBootstrapOptions& options) {
  if (a.size() != b.size())
    fail("paired bootstrap", "the two mixers have scores for " + std::to_string(a.size()) + " and " +
                                 std::to_string(b.size()) + " problems; they must be the same problems");
  if (a.empty()) fail("paired bootstrap", "no problems");
  if (options.resamples < 1) fail("paired bootstrap", "resamples must be >= 1");
  if (!(options.confidence > 0 && options.confidence < 1)) fail("paired bootstrap", "confidence must lie in (0, 1)");

  const std::size_t n = a.size();
  std::vector<double> differences(n);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += differences[i] = a[i] - b[i];

  SeededRandom random(options.seed);
  std::vector<double> means(std::size_t(options.resamples));
  std::size_t at_most_zero = 0;
  for (double& mean : means) {
    double sum = 0;
    for (std::size_t draw = 0; draw < n; ++draw) sum += differences[random.below(n)];
    mean = sum / double(n);
    at_most_zero += mean <= 0;
  }
  std::sort(means.begin(), means.end());

  PairedBootstrapResult result;
  result.problems = n;
  result.resamples = options.resamples;
  result.mean_difference = total / double(n);
  result.lower = interpolated_quantile(means, (1 - options.confidence) / 2);
  result.upper = interpolated_quantile(means, (1 + options.confidence) / 2);
  result.fraction_at_most_zero = double(at_most_zero) / double(options.resamples);
  return result;
}

}  // namespace bifocal::eval
