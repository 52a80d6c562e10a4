// The paired bootstrap over problems: how sure is a difference between two mixers scored on the
// same problems? Problems are resampled with replacement (both mixers' scores of a problem stay
// together, which removes the between-problem variance the two share), the mean difference is
// recomputed per resample, and the spread of those means gives a percentile interval (Efron and
// Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13). The resampling stream is fixed
// by the seed and the same on every platform (seeded_random.h), so a report is reproducible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace bifocal::eval {

struct PairedBootstrapOptions {
  int resamples = 20'000;
  std::uint64_t seed = 20'261'129;
  double confidence = 0.95;  // the interval covers this central share of the resampled means
};

struct PairedBootstrapResult {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::size_t problems = 0;
  int resamples = 0;
  double mean_difference = kNaN;        // mean over the problems of a[i] − b[i] (not resampled)
  double lower = kNaN;                  // percentile interval of the resampled mean differences
  double upper = kNaN;
  double fraction_at_most_zero = kNaN;  // share of resamples whose mean difference is <= 0
};

// `a[i]` and `b[i]` are two mixers' scores (pass@1, accuracy …) on problem i. The interval's
// ends are the (1 − confidence)/2 and (1 + confidence)/2 quantiles of the sorted resampled means,
// interpolated linearly between neighbours (NumPy's default quantile). Errors: different
// lengths, no problems, resamples < 1, confidence outside (0, 1).
PairedBootstrapResult paired_bootstrap(std::span<const double> a, std::span<const double> b,
                                       const PairedBootstrapOptions& options = {});

// The q-quantile (0 <= q <= 1) of ascending `sorted` values by linear interpolation between the
// values at ranks floor and ceil of q·(n − 1).
double interpolated_quantile(std::span<const double> sorted, double q);

}  // namespace bifocal::eval
