#include "core/summary.hpp"

#include "core/metrics.hpp"

namespace d2k {

RunSummary summarize_run(const std::vector<Trace>& traces) {
  RunSummary summary;
  std::vector<double> speedups;
  for (const auto& t : traces) {
    ++summary.total;
    if (t.clocks && t.clocks->throttled) ++summary.throttled;
    if (t.status != Status::passed) continue;
    ++summary.passed;
    if (t.performance && t.performance->speedup) speedups.push_back(*t.performance->speedup);
  }
  summary.geomean_speedup = geomean(speedups);
  summary.overhead = overhead_of(traces);
  return summary;
}

}  // namespace d2k
