#include "judge/agreement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace d2k::judge {

double subject_agreement(const std::vector<int>& counts) {
  double n = 0, squares = 0;
  for (int c : counts) {
    n += c;
    squares += static_cast<double>(c) * c;
  }
  if (n < 2) return 1.0;
  return (squares - n) / (n * (n - 1));
}

std::optional<double> fleiss_kappa(const std::vector<std::vector<int>>& counts) {
  if (counts.empty()) return std::nullopt;
  const std::size_t categories = counts.front().size();
  std::vector<double> totals(categories, 0.0);
  double p_bar = 0, all = 0;
  for (const auto& row : counts) {
    int n = 0;
    for (std::size_t j = 0; j < categories; ++j) {
      totals[j] += row.at(j);
      n += row[j];
    }
    if (n < 2) return std::nullopt;
    all += n;
    p_bar += subject_agreement(row);
  }
  p_bar /= static_cast<double>(counts.size());
  double p_e = 0;
  for (double total : totals) p_e += (total / all) * (total / all);
  if (p_e >= 1.0 - 1e-12) return std::nullopt;
  return (p_bar - p_e) / (1.0 - p_e);
}

Agreement agreement_of(const std::vector<std::map<std::string, Verdict>>& verdicts, const std::vector<double>& sample_scores) {
  Agreement out;
  if (!sample_scores.empty()) {
    const auto [low, high] = std::minmax_element(sample_scores.begin(), sample_scores.end());
    out.score_range = *high - *low;
  }
  if (verdicts.size() < 2) return out;
  std::vector<std::vector<int>> rows;
  double sum = 0;
  for (const auto& [id, first] : verdicts.front()) {
    std::vector<int> row(3, 0);
    for (const auto& sample : verdicts) row[static_cast<int>(sample.at(id))] += 1;
    out.items[id] = subject_agreement(row);
    sum += out.items[id];
    rows.push_back(row);
  }
  out.mean = rows.empty() ? 1.0 : sum / static_cast<double>(rows.size());
  out.kappa = fleiss_kappa(rows);
  if (out.mean < kMinMeanAgreement) {
    out.flagged = true;
    out.why = fmt::format("mean per-item agreement {:.2f} is below {:.2f}", out.mean, kMinMeanAgreement);
  }
  if (out.score_range > kMaxScoreRange) {
    out.flagged = true;
    out.why += fmt::format("{}the samples' scores span {:.1f} points, more than {:.0f}", out.why.empty() ? "" : "; ",
                           out.score_range, kMaxScoreRange);
  }
  return out;
}

}  // namespace d2k::judge
