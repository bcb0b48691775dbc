// The same solution evaluated several times (`--repeat N`): per workload, how many runs passed and how
// far the medians of the runs spread. It answers "does it ever fail when it should not?" and "how
// repeatable is a time?" (issue 3's bars: no false alarm in 20 runs; medians within 2%).
#pragma once

#include <string>
#include <vector>

#include "core/trace.hpp"

namespace d2k {

struct RepeatRow {
  std::string task;
  std::string workload;
  int runs = 0;
  int passed = 0;
  std::vector<std::string> failures;  // "run 3 (seed 12): rejected: ..." for each run that did not pass
  std::vector<double> medians_ms;     // the solution's median of each timed, passed run
  double median_ms = 0.0;             // median of medians_ms
  double min_ms = 0.0;
  double max_ms = 0.0;
  double spread = 0.0;                // (max_ms - min_ms) / median_ms; 0 with fewer than two medians
};

// `runs[i]` holds the traces of run i; rows come in the order workloads first appear.
std::vector<RepeatRow> summarize_repeats(const std::vector<std::vector<Trace>>& runs);

}  // namespace d2k
