#include "campaign/scores.hpp"

#include <cmath>
#include <map>
#include <vector>

#include "core/metrics.hpp"

namespace d2k::campaign {
namespace {

double half_width(const std::optional<double>& low, const std::optional<double>& high, const std::optional<double>& median) {
  if (!low || !high || !median || *median <= 0) return 0;
  return std::max(0.0, (*high - *low) / 2 / *median);
}

}  // namespace

double noise_band(const TraceRow& t) {
  const double own = half_width(t.ci_low_ms, t.ci_high_ms, t.median_ms) +
                     half_width(t.baseline_ci_low_ms, t.baseline_ci_high_ms, t.baseline_median_ms);
  const double shortest = std::min(t.median_ms.value_or(0), t.baseline_median_ms.value_or(t.median_ms.value_or(0)));
  const double spread = shortest < kShortMs ? kRunToRunBandShort : kRunToRunBand;
  return std::min(0.99, std::max(own, spread));
}

RunScore score_run(const EvaluationRow* run, bool passed, const EvaluationRow* expert) {
  RunScore score;
  std::map<std::string, const TraceRow*> expert_traces;
  if (expert)
    for (const auto& t : expert->traces)
      if (t.status == "passed" && t.median_ms && *t.median_ms > 0) expert_traces[t.workload] = &t;
  score.evaluated = run && !run->traces.empty();
  score.correct = score.evaluated && passed && run->passed;
  if (score.correct) {
    std::vector<double> ratios, speedups, lows, percents;
    for (const auto& t : run->traces) {
      if (!t.median_ms || *t.median_ms <= 0) continue;
      if (auto e = expert_traces.find(t.workload); e != expert_traces.end()) ratios.push_back(*e->second->median_ms / *t.median_ms);
      if (t.speedup && *t.speedup > 0) {
        speedups.push_back(*t.speedup);
        lows.push_back(*t.speedup * (1 - noise_band(t)));
      }
      if (t.sol_fraction && *t.sol_fraction > 0) percents.push_back(100 * *t.sol_fraction);
    }
    score.task_score = geomean(ratios);
    if (speedups.size() == run->traces.size()) {
      score.speedup = geomean(speedups);
      score.speedup_low = geomean(lows);
    }
    if (percents.size() == run->traces.size()) score.percent_sol = geomean(percents);
    if (!score.task_score) score.note = "no expert time for its workloads";
  } else {
    // The user keeps the eager path: t_expert / t_eager, from the expert's own evaluation.
    std::vector<double> ratios;
    for (const auto& [name, t] : expert_traces)
      if (t->baseline_median_ms && *t->baseline_median_ms > 0) ratios.push_back(*t->median_ms / *t->baseline_median_ms);
    if (!ratios.empty() && ratios.size() == expert_traces.size()) score.task_score = geomean(ratios);
    else score.note = "no eager time in the expert's evaluation (timing.baseline = false?)";
  }
  return score;
}

bool fast(const RunScore& score, double p) { return score.correct && score.speedup_low && *score.speedup_low > p; }

}  // namespace d2k::campaign
