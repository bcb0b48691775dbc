#include "core/overhead.hpp"

#include <fmt/format.h>

#include <map>

namespace d2k {

Overhead overhead_of(const std::vector<Trace>& traces) {
  Overhead out;
  std::map<std::string, double> per_phase;
  for (const auto& trace : traces) {
    ++out.workloads;
    out.wall_seconds += trace.wall_seconds;
    for (const auto& phase : trace.phases) {
      if (phase.name == kSolutionTimingPhase) {
        out.solution_timing_seconds += phase.seconds;
      } else if (phase.name == kBaselineTimingPhase) {
        out.baseline_timing_seconds += phase.seconds;
      } else {
        per_phase[phase.name] += phase.seconds;
      }
    }
  }
  out.overhead_seconds = out.wall_seconds - out.solution_timing_seconds - out.baseline_timing_seconds;
  for (const auto& [name, seconds] : per_phase) {
    if (seconds > out.largest_phase_seconds) {
      out.largest_phase = name;
      out.largest_phase_seconds = seconds;
    }
  }
  return out;
}

std::string describe(const Overhead& o) {
  std::string line = fmt::format("harness: {:.1f} s wall for {} workload{}; timing {:.1f} s (solution {:.1f} s, "
                                 "baseline {:.1f} s); overhead {:.1f} s",
                                 o.wall_seconds, o.workloads, o.workloads == 1 ? "" : "s",
                                 o.solution_timing_seconds + o.baseline_timing_seconds, o.solution_timing_seconds,
                                 o.baseline_timing_seconds, o.overhead_seconds);
  if (o.wall_seconds > 0) line += fmt::format(" ({:.0f}%)", 100.0 * o.overhead_seconds / o.wall_seconds);
  if (!o.largest_phase.empty())
    line += fmt::format(", most of it {} {:.1f} s", o.largest_phase, o.largest_phase_seconds);
  return line;
}

}  // namespace d2k
