#include "judge/score.hpp"

namespace d2k::judge {

SampleScore score_sample(const Guidance& guidance, const std::map<std::string, Verdict>& verdicts) {
  SampleScore out;
  // Dependencies first: select_levels orders every item after the items it depends on.
  for (const GuidanceItem* item : select_levels(guidance, {1, 2, 3})) {
    const auto it = verdicts.find(item->id);
    double credit = it == verdicts.end() ? 0.0 : credit_of(it->second);
    for (const auto& dep : item->depends_on)
      if (out.credit.at(dep) < 0.5) credit = 0.0;
    out.credit[item->id] = credit;
  }
  std::map<int, std::pair<double, int>> levels;
  double total = 0;
  for (const auto& item : guidance.items) {
    const double credit = out.credit.at(item.id);
    total += credit;
    levels[item.level].first += credit;
    levels[item.level].second += 1;
  }
  out.score = guidance.items.empty() ? 0.0 : 100.0 * total / static_cast<double>(guidance.items.size());
  for (const auto& [level, sum] : levels) out.levels[level] = 100.0 * sum.first / sum.second;
  return out;
}

Score combine(const std::vector<SampleScore>& samples) {
  Score out;
  if (samples.empty()) return out;
  const double n = static_cast<double>(samples.size());
  for (const auto& sample : samples) {
    out.samples.push_back(sample.score);
    out.score += sample.score / n;
    for (const auto& [level, value] : sample.levels) out.levels[level] += value / n;
    for (const auto& [id, credit] : sample.credit) out.credit[id] += credit / n;
  }
  return out;
}

}  // namespace d2k::judge
