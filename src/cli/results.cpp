#include "cli/results.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/repeat.hpp"
#include "core/summary.hpp"

namespace d2k {
namespace {

// `doc` to FILE, or to stdout for "-".
void write_document(const std::string& target, const nlohmann::json& doc) {
  if (target == "-") {
    std::cout << doc.dump(2) << '\n';
    return;
  }
  std::ofstream out(target);
  out << doc.dump(2) << '\n';
  if (!out) fail("--json: could not write {}", target);
}

nlohmann::json document_head(const EvalEnvironment& environment) {
  return {{"device", environment.device}, {"device_name", environment.device_name}, {"ceilings", environment.ceilings}};
}

int report_one(const RunOptions& options, const EvalEnvironment& environment, const std::vector<Trace>& traces) {
  const auto summary = summarize_run(traces);
  if (options.json != "-") print_trace_table(std::cout, traces, summary);
  if (!options.json.empty()) {
    auto doc = document_head(environment);
    doc["summary"] = summary;
    doc["overhead"] = summary.overhead;  // also at the top, where the first readers of the document look
    doc["traces"] = traces;
    write_document(options.json, doc);
  }
  return summary.all_passed() ? 0 : 1;
}

}  // namespace

int evaluate_and_report(const RunOptions& options, const EvalEnvironment& environment, Evaluator& evaluator,
                        EvalObserver& observer, const std::function<std::vector<Trace>()>& evaluate_once) {
  const uint64_t first_seed = evaluator.settings().seed;
  if (options.repeat == 1) {
    observer.run_started(1, 1, first_seed);
    return report_one(options, environment, evaluate_once());
  }
  std::vector<std::vector<Trace>> runs;
  for (int run = 0; run < options.repeat; ++run) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(run);
    observer.run_started(run + 1, options.repeat, seed);
    evaluator.set_seed(seed);
    runs.push_back(evaluate_once());
  }
  const auto rows = summarize_repeats(runs);
  if (options.json != "-") print_repeat_table(std::cout, rows);
  if (!options.json.empty()) {
    auto doc = document_head(environment);
    doc["repeat"] = rows;
    for (const auto& traces : runs) doc["runs"].push_back({{"summary", summarize_run(traces)}, {"traces", traces}});
    write_document(options.json, doc);
  }
  const bool all_passed = std::all_of(rows.begin(), rows.end(), [](const RepeatRow& r) { return r.passed == r.runs; });
  return all_passed && !rows.empty() ? 0 : 1;
}

}  // namespace d2k
