#include "agent/result_file.hpp"

#include <string>

#include "core/json.hpp"
#include "core/metrics.hpp"
#include "core/summary.hpp"

namespace d2k::agent {

using nlohmann::json;

json run_scores(const std::vector<Trace>& traces, bool passed) {
  const auto summary = summarize_run(traces);
  std::vector<double> percents;
  std::string final_status = traces.empty() ? "not_evaluated" : "passed";
  for (const auto& t : traces) {
    if (t.status != Status::passed) {
      if (final_status == "passed") final_status = std::string(name_of(t.status));
      continue;
    }
    if (t.performance && t.performance->sol_fraction) percents.push_back(100.0 * *t.performance->sol_fraction);
  }
  const auto optional = [](const std::optional<double>& v) { return v ? json(*v) : json(); };
  return {{"passed", passed},
          {"workloads_passed", summary.passed},
          {"workloads", summary.total},
          {"geomean_speedup", optional(summary.geomean_speedup)},
          {"geomean_percent_of_speed_of_light", optional(geomean(percents))},
          {"final_status", final_status}};
}

json result_document(const json& final_record, const RunSettings& settings, const std::vector<Trace>& traces,
                     bool passed) {
  json document = final_record;
  document["task"] = settings.task;
  document["model"] = settings.model;
  document["condition"] = std::string(name_of(settings.condition));
  document["language"] = std::string(name_of(settings.language));
  document["device"] = settings.device;
  document["seed"] = settings.seed;
  document["scores"] = run_scores(traces, passed);
  return document;
}

}  // namespace d2k::agent
