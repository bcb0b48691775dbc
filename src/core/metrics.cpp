#include "core/metrics.hpp"

#include <algorithm>
#include <cmath>

namespace d2k {

double floor_ms(double flops, double min_bytes, const Ceiling& ceiling) {
  double memory_ms = ceiling.copy_gbps > 0 ? min_bytes / (ceiling.copy_gbps * 1e9) * 1e3 : 0.0;
  double compute_ms = ceiling.peak_tflops && *ceiling.peak_tflops > 0 ? flops / (*ceiling.peak_tflops * 1e12) * 1e3 : 0.0;
  return std::max(memory_ms, compute_ms);
}

Performance performance_of(const TimingSummary& solution, const std::optional<TimingSummary>& baseline,
                           double flops, double min_bytes, const Ceiling& ceiling) {
  Performance p;
  p.solution = solution;
  p.baseline = baseline;
  p.flops = flops;
  p.min_bytes = min_bytes;
  const double seconds = solution.median_ms * 1e-3;
  if (seconds > 0) {
    p.achieved_gbps = min_bytes / seconds / 1e9;
    p.achieved_tflops = flops / seconds / 1e12;
    const double floor = floor_ms(flops, min_bytes, ceiling);
    if (floor > 0) p.sol_fraction = floor / solution.median_ms;
  }
  if (baseline && solution.median_ms > 0) p.speedup = baseline->median_ms / solution.median_ms;
  return p;
}

std::optional<double> geomean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double log_sum = 0.0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

}  // namespace d2k
