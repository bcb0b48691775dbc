// compile, check, benchmark and submit: the workspace's solution through the builder and the
// Evaluator, on the published workloads only, and what of it the model may see.
#include <fmt/format.h>

#include <cmath>
#include <regex>

#include "agent/tools.hpp"
#include "eval/evaluator.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/summary.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

ToolOutcome failure(const std::string& message) {
  ToolOutcome outcome;
  outcome.result = {{"error", message}};
  outcome.is_error = true;
  return outcome;
}

// The checker names one reference value of the worst element ("want 0.5"): never shown to a model.
std::string redact(const std::string& message) {
  static const std::regex want(R"(, want [^);]*)");
  return std::regex_replace(message, want, "");
}

json comparison_json(const Comparison& c) {
  json j = {{"name", c.name}, {"passed", c.passed}, {"elements", c.elements}, {"mismatches", c.mismatches}};
  if (c.metric == "numeric") {
    j["nmse"] = c.nmse;
    j["max_abs_error"] = c.max_abs_error;
    j["max_rel_error"] = c.max_rel_error;
    j["worst_excess"] = c.worst_excess;  // <= 1 passes
    if (c.misrounded) j["misrounded"] = *c.misrounded;  // the share not rounded as the specification says
  }
  if (c.non_finite) j["non_finite"] = c.non_finite;
  if (!c.passed && c.worst_index >= 0) {
    j["worst_index"] = c.worst_index;
    j["worst_got"] = c.worst_got;
  }
  return j;
}

}  // namespace

ToolOutcome ToolBox::compile(const json&) {
  Solution solution;
  try {
    solution = load_solution(workspace_.dir());
  } catch (const Error& e) {
    return failure(e.what());
  }
  BuildOptions options;
  options.device = env_.environment->device;
  options.cache_dir = env_.environment->build_cache;
  options.abi_include_dir = env_.environment->root / "include";
  options.cutlass_include_dir = cutlass_include_dir(env_.environment->root);
  options.timeout_seconds = env_.eval->build_timeout_seconds;
  // The evaluator's sandbox: outside it a solution could #include any host file (the task's task.toml
  // names the hidden workloads) and read it back in the compiler's log.
  options.sandbox = env_.environment->sandbox;
  const auto build = build_solution(solution, options);
  ToolOutcome outcome;
  outcome.result = {{"ok", build.ok}, {"seconds", build.seconds}, {"log", cap_text(build.log, kLogBytes)}};
  if (build.timed_out) outcome.result["timed_out"] = true;
  outcome.is_error = !build.ok;
  return outcome;
}

ToolOutcome ToolBox::evaluate(const json&, bool time, int call_index) {
  Solution solution;
  try {
    solution = load_solution(workspace_.dir());
  } catch (const Error& e) {
    return failure(e.what());
  }
  EvalSettings options = *env_.eval;
  options.include_hidden = false;
  options.time = time;
  options.baseline = options.baseline && time;
  options.seed = derive_seed(env_.seed, static_cast<uint64_t>(call_index));
  Evaluator evaluator(*env_.environment, options);
  const auto traces = evaluator.evaluate(*env_.task, solution);

  ToolOutcome outcome;
  json& r = outcome.result;
  const auto summary = summarize_run(traces);
  const bool all = summary.all_passed();
  r["passed"] = all;
  r["workloads_passed"] = summary.passed;
  r["workloads"] = json::array();
  if (!traces.empty() && traces.front().status == Status::compile_error) {
    r = {{"passed", false}, {"status", "compile_error"}, {"log", cap_text(traces.front().log, kLogBytes)}};
    return outcome;
  }
  std::vector<double> times, speedups;
  for (const auto& t : traces) {
    json w = {{"workload", t.workload}, {"status", std::string(name_of(t.status))}};
    if (!t.message.empty()) w["message"] = cap_text(redact(t.message), 1024);
    if (t.status != Status::passed && !t.log.empty()) w["log"] = cap_text(t.log, 2048);
    if (!t.comparisons.empty()) {
      w["comparisons"] = json::array();
      for (const auto& c : t.comparisons) w["comparisons"].push_back(comparison_json(c));
    }
    if (time && t.performance) {
      const auto& p = *t.performance;
      w["median_ms"] = p.solution.median_ms;
      w["ci95_ms"] = {p.solution.ci_low_ms, p.solution.ci_high_ms};
      if (p.baseline) w["baseline_median_ms"] = p.baseline->median_ms;
      if (p.speedup) {
        w["speedup"] = *p.speedup;
        speedups.push_back(*p.speedup);
      }
      if (p.sol_fraction) w["percent_of_speed_of_light"] = 100.0 * *p.sol_fraction;
      w["achieved_gbps"] = p.achieved_gbps;
      w["achieved_tflops"] = p.achieved_tflops;
      times.push_back(p.solution.median_ms);
    }
    r["workloads"].push_back(std::move(w));
  }
  if (time && all) {
    if (auto g = geomean(times)) r["geomean_median_ms"] = *g;
    if (auto g = geomean(speedups)) r["geomean_speedup"] = *g;
  }
  if (all) {
    // Keep this solution: it is what the run submits if the budget ends first.
    Candidate candidate;
    candidate.call_index = call_index;
    candidate.dir = fmt::format("candidates/{}", call_index);
    const auto target = env_.run_dir / candidate.dir;
    fs::remove_all(target);
    fs::create_directories(target);
    for (const auto& file : solution.sources) fs::copy_file(file, target / file.filename());
    for (const auto& file : solution.headers) fs::copy_file(file, target / file.filename());
    if (time) candidate.time_geomean_ms = geomean(times);
    outcome.candidate = candidate;
  }
  const auto dumped = r.dump();
  if (dumped.size() > kResultBytes) {
    // Many failing workloads with long logs: keep the statuses, drop the logs.
    for (auto& w : r["workloads"]) w.erase("log");
  }
  return outcome;
}

ToolOutcome ToolBox::submit(const json&) {
  ToolOutcome outcome;
  if (env_.condition == Condition::design_only) {
    const auto design = read_whole_file(workspace_.dir() / "design.md");
    if (!design || design->find_first_not_of(" \t\r\n") == std::string::npos)
      return failure("there is no design.md in the workspace (or it is empty); write it first");
    outcome.result = {{"submitted", "design.md"}, {"bytes", design->size()}};
  } else {
    try {
      const auto solution = load_solution(workspace_.dir());
      json files = json::array();
      for (const auto& f : solution.sources) files.push_back(f.filename().string());
      for (const auto& f : solution.headers) files.push_back(f.filename().string());
      outcome.result = {{"submitted", files}};
    } catch (const Error& e) {
      return failure(fmt::format("nothing to submit: {}", e.what()));
    }
  }
  outcome.result["note"] = "the run ends now; the final evaluation follows";
  outcome.submitted = true;
  return outcome;
}

}  // namespace d2k::agent
