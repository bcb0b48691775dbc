// Harness overhead: where the wall time of evaluating workloads went (docs/metrics.md, "Overhead").
// The time spent timing (the solution's timed calls in the worker and the eager baseline's) is the
// measurement; everything else the harness spends on a workload (drawing inputs, the oracle, files,
// starting the worker, the correctness call, reading and checking outputs) is overhead.
#pragma once

#include <string>
#include <vector>

#include "core/trace.hpp"

namespace d2k {

// The phases that are the measurement itself.
inline constexpr const char* kSolutionTimingPhase = "solution_timing";
inline constexpr const char* kBaselineTimingPhase = "baseline_timing";

struct Overhead {
  int workloads = 0;
  double wall_seconds = 0.0;             // sum of the traces' wall times
  double solution_timing_seconds = 0.0;
  double baseline_timing_seconds = 0.0;
  double overhead_seconds = 0.0;         // wall - solution timing - baseline timing
  std::string largest_phase;             // the overhead phase with the most time over all traces
  double largest_phase_seconds = 0.0;
};

Overhead overhead_of(const std::vector<Trace>& traces);

// "harness: 12.3 s wall for 5 workloads; timing 4.1 s (solution 2.0 s, baseline 2.1 s); overhead
// 8.2 s (67%), most of it check 5.0 s"
std::string describe(const Overhead& overhead);

}  // namespace d2k
