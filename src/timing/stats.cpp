#include "timing/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

namespace d2k {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  std::size_t below = static_cast<std::size_t>(std::floor(position));
  std::size_t above = std::min(below + 1, sorted.size() - 1);
  double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

std::pair<double, double> median_ci95(const std::vector<double>& sorted) {
  if (sorted.empty()) return {0.0, 0.0};
  const double n = static_cast<double>(sorted.size());
  const double half = 0.98 * std::sqrt(n);
  const auto low = static_cast<std::ptrdiff_t>(std::floor(n / 2.0 - half));
  const auto high = static_cast<std::ptrdiff_t>(std::ceil(n / 2.0 + half));
  const auto last = static_cast<std::ptrdiff_t>(sorted.size()) - 1;
  return {sorted[static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(low, 0, last))],
          sorted[static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(high, 0, last))]};
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
  std::tie(summary.ci_low_ms, summary.ci_high_ms) = median_ci95(samples_ms);
  summary.samples = static_cast<int>(samples_ms.size());
  return summary;
}

}  // namespace d2k
