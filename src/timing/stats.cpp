#include "timing/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace d2k {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  std::size_t below = static_cast<std::size_t>(std::floor(position));
  std::size_t above = std::min(below + 1, sorted.size() - 1);
  double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

TimingSummary summarize(std::vector<double> samples_ms) {
  TimingSummary summary;
  if (samples_ms.empty()) return summary;
  std::sort(samples_ms.begin(), samples_ms.end());
  summary.median_ms = quantile(samples_ms, 0.5);
  summary.p10_ms = quantile(samples_ms, 0.1);
  summary.p90_ms = quantile(samples_ms, 0.9);
  summary.min_ms = samples_ms.front();
  summary.mean_ms =
      std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(samples_ms.size());
  summary.samples = static_cast<int>(samples_ms.size());
  return summary;
}

}  // namespace d2k
