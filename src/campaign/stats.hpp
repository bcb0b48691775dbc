// The statistics of the report, each in one place: a seeded paired bootstrap, the Wilcoxon signed-rank
// test, Spearman's rank correlation and average ranks. Pure functions of their inputs; the report's
// numbers are reproducible from the store alone.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace d2k::campaign {

struct Interval {
  double low = 0, high = 0;
};

// Percentile bootstrap of the mean of `values` (paired differences: one value per pair, so resampling
// values resamples pairs): `resamples` draws of n values with replacement from a generator seeded with
// `seed` (splitmix64), the mean of each, and the (1 - level) / 2 and (1 + level) / 2 quantiles of those
// means (linear interpolation between order statistics). Empty input: nullopt.
std::optional<Interval> bootstrap_mean_interval(const std::vector<double>& values, uint64_t seed, int resamples = 10000,
                                                double level = 0.95);

// Average ranks, 1-based, ties sharing the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& values);

struct SignedRank {
  int n = 0;             // non-zero differences (zeros are dropped, Wilcoxon's convention)
  double w_plus = 0;     // sum of the ranks of |d| over positive differences
  double w_minus = 0;
  double p_value = 1;    // two-sided
  bool exact = true;     // the exact permutation distribution (n <= 50), else the normal approximation with tie correction
};

// The Wilcoxon signed-rank test of paired differences against a median of 0.
SignedRank wilcoxon_signed_rank(const std::vector<double>& differences);

// Spearman's rank correlation (Pearson's of the average ranks); nullopt below 3 pairs or with a
// constant side.
std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace d2k::campaign
