#include "core/repeat.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace d2k {
namespace {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

}  // namespace

std::vector<RepeatRow> summarize_repeats(const std::vector<std::vector<Trace>>& runs) {
  std::vector<RepeatRow> rows;
  const auto row_of = [&](const Trace& trace) -> RepeatRow& {
    for (auto& row : rows)
      if (row.task == trace.task && row.workload == trace.workload) return row;
    auto& row = rows.emplace_back();
    row.task = trace.task;
    row.workload = trace.workload;
    return row;
  };
  for (std::size_t run = 0; run < runs.size(); ++run) {
    for (const auto& trace : runs[run]) {
      auto& row = row_of(trace);
      ++row.runs;
      if (trace.status != Status::passed) {
        row.failures.push_back(fmt::format("run {} (seed {}): {}: {}", run + 1, trace.seed, name_of(trace.status), trace.message));
        continue;
      }
      ++row.passed;
      if (trace.performance) row.medians_ms.push_back(trace.performance->solution.median_ms);
    }
  }
  for (auto& row : rows) {
    if (row.medians_ms.empty()) continue;
    row.median_ms = median_of(row.medians_ms);
    const auto [low, high] = std::minmax_element(row.medians_ms.begin(), row.medians_ms.end());
    row.min_ms = *low;
    row.max_ms = *high;
    row.spread = row.medians_ms.size() > 1 && row.median_ms > 0 ? (row.max_ms - row.min_ms) / row.median_ms : 0.0;
  }
  return rows;
}

}  // namespace d2k
