// Goodness-of-fit helpers for the sampling tests. Every test draws with fixed seeds, so
// a test passes or fails deterministically; the critical values only decide whether the
// observed histogram is believable under the claimed distribution.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace deepinfer::sampling::testing {

// Pearson's statistic sum (O - E)^2 / E over bins with expected > 0. Bins with expected
// count 0 must have no observations; count_impossible() reports those.
inline double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws) {
  double stat = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0) continue;
    double e = probs[i] * double(draws);
    double d = double(counts[i]) - e;
    stat += d * d / e;
  }
  return stat;
}

inline int64_t count_impossible(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  int64_t n = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0) n += counts[i];
  }
  return n;
}

// Degrees of freedom: bins with positive probability, minus one.
inline int degrees_of_freedom(const std::vector<double>& probs) {
  int n = 0;
  for (double p : probs) n += p > 0;
  return n - 1;
}

// Upper 0.001 quantile of chi-square with df degrees of freedom, by the Wilson-Hilferty
// cube approximation (within about 1% of the tables for df >= 3; slightly above them,
// i.e. slightly lenient, which the table test checks).
inline double chi_square_critical_001(int df) {
  const double z = 3.090232306;  // standard normal upper 0.001 quantile
  const double a = 2.0 / (9.0 * df);
  const double c = 1.0 - a + z * std::sqrt(a);
  return df * c * c * c;
}

// Total variation distance between the empirical and the claimed distribution.
inline double total_variation(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws) {
  double tv = 0;
  for (size_t i = 0; i < counts.size(); ++i) tv += std::fabs(double(counts[i]) / double(draws) - probs[i]);
  return tv / 2;
}

}  // namespace deepinfer::sampling::testing
