#include "campaign/records.hpp"

#include "core/error.hpp"
#include "core/json.hpp"

namespace d2k::campaign {

std::string_view name_of(RunState state) {
  switch (state) {
    case RunState::pending: return "pending";
    case RunState::running: return "running";
    case RunState::finished: return "finished";
    case RunState::failed: return "failed";
  }
  return "?";
}

RunState parse_run_state(std::string_view name) {
  for (auto s : {RunState::pending, RunState::running, RunState::finished, RunState::failed})
    if (name_of(s) == name) return s;
  fail("unknown run state '{}'", name);
}

std::string_view name_of(EvaluationKind kind) {
  switch (kind) {
    case EvaluationKind::final: return "final";
    case EvaluationKind::rerun: return "rerun";
    case EvaluationKind::expert: return "expert";
  }
  return "?";
}

EvaluationKind parse_evaluation_kind(std::string_view name) {
  for (auto k : {EvaluationKind::final, EvaluationKind::rerun, EvaluationKind::expert})
    if (name_of(k) == name) return k;
  fail("unknown evaluation kind '{}'", name);
}

TraceRow trace_row(const Trace& trace) {
  TraceRow row;
  row.workload = trace.workload;
  row.status = std::string(name_of(trace.status));
  if (trace.performance) {
    const auto& p = *trace.performance;
    row.median_ms = p.solution.median_ms;
    row.ci_low_ms = p.solution.ci_low_ms;
    row.ci_high_ms = p.solution.ci_high_ms;
    if (p.baseline) {
      row.baseline_median_ms = p.baseline->median_ms;
      row.baseline_ci_low_ms = p.baseline->ci_low_ms;
      row.baseline_ci_high_ms = p.baseline->ci_high_ms;
    }
    row.speedup = p.speedup;
    row.sol_fraction = p.sol_fraction;
  }
  if (trace.clocks && trace.clocks->available) {
    row.throttled = trace.clocks->throttled;
    for (const auto& r : trace.clocks->reasons) row.clock_reasons += (row.clock_reasons.empty() ? "" : ",") + r;
  }
  row.json = nlohmann::json(trace).dump();
  return row;
}

bool EvaluationRow::same_as(const EvaluationRow& o) const {
  return key == o.key && task == o.task && kind == o.kind && solution == o.solution && seed == o.seed &&
         device == o.device && created == o.created && passed == o.passed && traces == o.traces;
}

}  // namespace d2k::campaign
