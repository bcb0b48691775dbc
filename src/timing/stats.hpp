// Summaries of timing samples. Percentiles interpolate linearly between the sorted samples.
#pragma once

#include <vector>

#include "core/trace.hpp"

namespace d2k {

// All zero for no samples.
TimingSummary summarize(std::vector<double> samples_ms);

// The q-quantile (0 <= q <= 1) of sorted samples; 0 for none.
double quantile(const std::vector<double>& sorted, double q);

}  // namespace d2k
