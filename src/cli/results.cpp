#include "cli/results.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <fmt/format.h>
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
  using Clock = std::chrono::steady_clock;
  const auto began = Clock::now();
  const auto seconds_since = [](Clock::time_point from) { return std::chrono::duration<double>(Clock::now() - from).count(); };
  double longest = 0;
  for (int run = 0; run < options.repeat; ++run) {
    // --time-limit: a run cut by an outside timeout would be lost whole (and the document with it); one not
    // started costs nothing.
    if (options.time_limit > 0 && run > 0 && seconds_since(began) + longest > options.time_limit) {
      std::cerr << fmt::format("d2k: --time-limit {:g} s: ran {} of {} runs (seeds {}..{}): after {:.0f} s the next, at "
                               "{:.0f} s a run so far, would have ended past it\n",
                               options.time_limit, run, options.repeat, first_seed, first_seed + run - 1,
                               seconds_since(began), longest);
      break;
    }
    const uint64_t seed = first_seed + static_cast<uint64_t>(run);
    observer.run_started(run + 1, options.repeat, seed);
    evaluator.set_seed(seed);
    const auto run_began = Clock::now();
    runs.push_back(evaluate_once());
    longest = std::max(longest, seconds_since(run_began));
  }
  const auto rows = summarize_repeats(runs);
  if (options.json != "-") print_repeat_table(std::cout, rows);
  if (!options.json.empty()) {
    auto doc = document_head(environment);
    doc["runs_requested"] = options.repeat;
    doc["repeat"] = rows;
    for (const auto& traces : runs) doc["runs"].push_back({{"summary", summarize_run(traces)}, {"traces", traces}});
    write_document(options.json, doc);
  }
  const bool all_passed = std::all_of(rows.begin(), rows.end(), [](const RepeatRow& r) { return r.passed == r.runs; });
  return all_passed && !rows.empty() ? 0 : 1;
}

}  // namespace d2k
