#include "campaign/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/splitmix.hpp"

namespace d2k::campaign {

namespace {

double quantile(std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(at));
  const auto above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (at - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace

std::optional<Interval> bootstrap_mean_interval(const std::vector<double>& values, uint64_t seed, int resamples, double level) {
  if (values.empty()) return std::nullopt;
  if (resamples < 1 || !(level > 0 && level < 1)) fail("bootstrap: {} resamples at level {}", resamples, level);
  uint64_t state = seed;
  const auto n = values.size();
  std::vector<double> means(static_cast<std::size_t>(resamples));
  for (auto& mean : means) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += values[splitmix64(state) % n];
    mean = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return Interval{quantile(means, (1 - level) / 2), quantile(means, (1 + level) / 2)};
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

SignedRank wilcoxon_signed_rank(const std::vector<double>& differences) {
  std::vector<double> d;
  for (double v : differences)
    if (v != 0 && std::isfinite(v)) d.push_back(v);
  SignedRank out;
  out.n = static_cast<int>(d.size());
  if (d.empty()) return out;
  std::vector<double> magnitudes;
  for (double v : d) magnitudes.push_back(std::fabs(v));
  const auto ranks = average_ranks(magnitudes);
  for (std::size_t i = 0; i < d.size(); ++i) (d[i] > 0 ? out.w_plus : out.w_minus) += ranks[i];
  const double smaller = std::min(out.w_plus, out.w_minus);
  if (out.n <= 50) {
    // Exact: under H0 each rank's sign is + or - with probability 1/2, independently. Ranks are whole or
    // half numbers (ties), so the distribution of W+ is counted over doubled ranks.
    std::vector<int> doubled;
    int total = 0;
    for (double r : ranks) {
      doubled.push_back(static_cast<int>(std::lround(2 * r)));
      total += doubled.back();
    }
    std::vector<double> ways(static_cast<std::size_t>(total) + 1, 0.0);
    ways[0] = 1;
    int reach = 0;
    for (int r : doubled) {
      for (int s = reach; s >= 0; --s)
        if (ways[static_cast<std::size_t>(s)] != 0) ways[static_cast<std::size_t>(s + r)] += ways[static_cast<std::size_t>(s)];
      reach += r;
    }
    const double all = std::ldexp(1.0, out.n);
    const auto bound = static_cast<int>(std::lround(2 * smaller));
    double tail = 0;
    for (int s = 0; s <= bound; ++s) tail += ways[static_cast<std::size_t>(s)];
    out.p_value = std::min(1.0, 2 * tail / all);
    out.exact = true;
  } else {
    const double n = out.n;
    double ties = 0;
    auto sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t j = i;
      while (j + 1 < sorted.size() && sorted[j + 1] == sorted[i]) ++j;
      const double t = static_cast<double>(j - i + 1);
      ties += t * t * t - t;
      i = j + 1;
    }
    const double mean = n * (n + 1) / 4;
    const double sd = std::sqrt(n * (n + 1) * (2 * n + 1) / 24 - ties / 48);
    const double z = (std::fabs(out.w_plus - mean) - 0.5) / sd;  // continuity correction
    out.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
    out.exact = false;
  }
  return out;
}

std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) fail("spearman: {} and {} values", x.size(), y.size());
  if (x.size() < 3) return std::nullopt;
  const auto rx = average_ranks(x), ry = average_ranks(y);
  if (std::all_of(rx.begin(), rx.end(), [&](double r) { return r == rx[0]; }) ||
      std::all_of(ry.begin(), ry.end(), [&](double r) { return r == ry[0]; }))
    return std::nullopt;
  return pearson(rx, ry);
}

}  // namespace d2k::campaign
