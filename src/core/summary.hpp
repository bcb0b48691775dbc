// The summary of a run's traces, computed once: the terminal table and the --json document both carry
// it, the exit status and the agent's tools read it (docs/metrics.md).
#pragma once

#include <optional>
#include <vector>

#include "core/overhead.hpp"
#include "core/trace.hpp"

namespace d2k {

struct RunSummary {
  int passed = 0;                         // traces with status passed
  int total = 0;                          // traces
  std::optional<double> geomean_speedup;  // over eager, of the passed traces that have one
  // Over the library path (PyTorch's fused one, where the task has one), of the passed traces that have one.
  std::optional<double> geomean_speedup_over_library;
  int over_library = 0;                   // those traces
  int throttled = 0;                      // traces timed while the GPU throttled (trace.clocks)
  Overhead overhead;                      // where the harness's wall time went

  // Something ran and all of it passed: the exit status 0 of eval and bench.
  bool all_passed() const { return total > 0 && passed == total; }
};

RunSummary summarize_run(const std::vector<Trace>& traces);

}  // namespace d2k
