// result.json of a run folder: the final record, with what a campaign groups and aggregates runs by
// (the task, model, condition, device and seed) and the final evaluation's scores. docs/agent.md lists
// the fields.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "agent/run_types.hpp"
#include "core/trace.hpp"

namespace d2k::agent {

// The scores of a final evaluation: passed, workloads passed of all, geomean speedup over eager and
// geomean percent of speed of light over the passed workloads (null where none has one), and the final
// status: passed, the first failing workload's status, or not_evaluated when no solution ran.
nlohmann::json run_scores(const std::vector<Trace>& traces, bool passed);

// result.json: `final_record` (the transcript's final record) with the run's identity and run_scores.
nlohmann::json result_document(const nlohmann::json& final_record, const RunSettings& settings,
                               const std::vector<Trace>& traces, bool passed);

}  // namespace d2k::agent
