#include "core/summary.hpp"

#include "core/metrics.hpp"

namespace d2k {

RunSummary summarize_run(const std::vector<Trace>& traces) {
  RunSummary summary;
  std::vector<double> speedups, over_library;
  for (const auto& t : traces) {
    ++summary.total;
    if (t.clocks && t.clocks->throttled) ++summary.throttled;
    if (t.status != Status::passed) continue;
    ++summary.passed;
    if (t.performance && t.performance->speedup) speedups.push_back(*t.performance->speedup);
    if (t.performance && t.performance->speedup_over_library) over_library.push_back(*t.performance->speedup_over_library);
  }
  summary.geomean_speedup = geomean(speedups);
  summary.geomean_speedup_over_library = geomean(over_library);
  summary.over_library = static_cast<int>(over_library.size());
  summary.overhead = overhead_of(traces);
  return summary;
}

}  // namespace d2k
