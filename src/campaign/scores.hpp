// A run's scores from its evaluation's traces and the expert's (docs/metrics.md, "Scores across tasks"):
// the task score (expert ratio), the speedup over eager with its noise band, % of speed of light.
#pragma once

#include <optional>
#include <string>

#include "campaign/records.hpp"

namespace d2k::campaign {

// The noise band of a speedup (docs/metrics.md, "The noise band"): per workload, the larger of the
// timing's own uncertainty (the half-widths of the solution's and the baseline's 95% intervals of the
// median, relative to their medians, added) and the run-to-run spread of medians measured on the H200
// (2% for medians of 20 us and more, 6% below).
double noise_band(const TraceRow& trace);
inline constexpr double kRunToRunBand = 0.02;
inline constexpr double kRunToRunBandShort = 0.06;
inline constexpr double kShortMs = 0.020;

struct RunScore {
  bool evaluated = false;      // there is an evaluation with traces
  bool correct = false;        // every workload passed
  std::optional<double> task_score;       // geomean over workloads of t_expert / t_solution; failed: t_expert / t_eager
  std::optional<double> speedup;          // correct only: geomean over workloads of t_eager / t_solution
  std::optional<double> speedup_low;      // the same with each workload's speedup taken at the bottom of its band
  std::optional<double> percent_sol;      // correct only: geomean over workloads of 100 x floor / t_solution
  std::string note;                       // why a number is missing
};

// `run`: the run's evaluation (null: none, e.g. no solution); `expert`: the task's expert evaluation on the
// same workloads (null: none). A failed run scores as if the user kept eager PyTorch.
RunScore score_run(const EvaluationRow* run, bool passed, const EvaluationRow* expert);

// fast_p: correct and faster than eager by p beyond the noise band (speedup_low > p).
bool fast(const RunScore& score, double p);

}  // namespace d2k::campaign
