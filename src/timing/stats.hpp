// Summaries of timing samples. Percentiles interpolate linearly between the sorted samples.
#pragma once

#include <utility>
#include <vector>

#include "core/trace.hpp"

namespace d2k {

// All zero for no samples.
TimingSummary summarize(std::vector<double> samples_ms);

// The q-quantile (0 <= q <= 1) of sorted samples; 0 for none.
double quantile(const std::vector<double>& sorted, double q);

// A distribution-free 95% confidence interval of the median of sorted samples: the order statistics
// at n/2 -+ 0.98 sqrt(n) (normal approximation of the binomial). The whole range for fewer than 6.
std::pair<double, double> median_ci95(const std::vector<double>& sorted);

}  // namespace d2k
