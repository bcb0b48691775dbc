// compile, check, benchmark and submit: the workspace's solution through the builder and the
// Evaluator, on the published workloads only, and what of it the model may see.
#include <fmt/format.h>

#include <cmath>
#include <regex>

#include "agent/run_types.hpp"
#include "agent/tools.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"
#include "runner/triton.hpp"
#include "runner/worker_run.hpp"
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

// The workload's tensors and scalars as the warm-up needs them: names, dtypes, shapes, strides.
void add_workload(WarmupSpec& spec, const Task& task, const Workload& workload) {
  const auto tensor = [&](const TensorSpec& t) {
    const auto geometry = geometry_of(t, workload);
    return WireTensor{.name = t.name, .dtype = t.dtype, .shape = geometry.shape, .strides = geometry.strides, .inplace = t.inplace};
  };
  spec.inputs.clear();
  spec.outputs.clear();
  spec.scalars.clear();
  for (const auto& t : task.inputs) spec.inputs.push_back(tensor(t));
  for (const auto& t : task.outputs) spec.outputs.push_back(tensor(t));
  for (const auto& [scalar, value] : scalars_of(task, workload)) spec.scalars.push_back({scalar->name, scalar->is_int, value});
}

}  // namespace

std::variant<Solution, std::string> ToolBox::run_solution() const {
  Solution solution;
  try {
    solution = load_solution(workspace_.dir());
  } catch (const Error& e) {
    if (env_.language == Language::triton)
      return fmt::format("{} (this run's language is Triton: write solution.py in the workspace)", e.what());
    return std::string(e.what());
  }
  if (!solution_fits(env_.language, solution.language)) {
    if (env_.language == Language::triton)
      return fmt::format("the workspace holds {} sources ({}), but this run's language is Triton: the solution is "
                         "solution.py (with the .py modules it imports) and no .cu, .cpp or .cc file may sit beside it",
                         name_of(solution.language), solution.sources.front().filename().string());
    return fmt::format("the workspace's solution is Triton ({}), but this run's language is cuda: write the solution as "
                       "{} files", solution.sources.front().filename().string(),
                       env_.environment && env_.environment->device == Device::cpu ? ".cpp" : ".cu");
  }
  return solution;
}

ToolOutcome ToolBox::compile(const json&) {
  auto loaded = run_solution();
  if (auto* why = std::get_if<std::string>(&loaded)) return failure(*why);
  const Solution solution = std::get<Solution>(std::move(loaded));
  std::optional<TritonSetup> triton;
  const auto options = solution_build_options(*env_.environment, solution, env_.eval->build_timeout_seconds, &triton);
  const auto build = build_solution(solution, options);
  ToolOutcome outcome;
  outcome.result = {{"ok", build.ok}, {"seconds", build.seconds}, {"log", cap_text(build.log, kLogBytes)}};
  if (build.timed_out) outcome.result["timed_out"] = true;
  outcome.is_error = !build.ok;
  if (!build.ok || solution.language != Language::triton) return outcome;
  return compile_triton(solution, build, *triton, std::move(outcome));
}

// A Triton build only packages the sources: the kernels are compiled by the warm-up, per workload (its
// shapes decide their specializations), as check and benchmark do before each worker. Here the warm-up
// runs for every published workload and fills the build's Triton cache, so that the next check finds the
// kernels compiled.
ToolOutcome ToolBox::compile_triton(const Solution& solution, const BuildResult& build, const TritonSetup& setup,
                                    ToolOutcome outcome) {
  const auto entry = build.library.parent_path();
  const auto manifest = json::parse(read_whole_file(build.library).value_or("{}"), nullptr, false);
  if (manifest.is_discarded() || !manifest.contains("entry") || !manifest.contains("modules"))
    fail("the Triton build of {} has no readable manifest {}", solution.name, build.library.string());
  WarmupSpec spec;
  spec.src_dir = entry / "src";
  spec.entry = manifest.at("entry").get<std::string>();
  spec.modules = manifest.at("modules").get<std::vector<std::string>>();
  spec.cache_dir = entry / "triton-cache";
  spec.build_stubs = env_.environment->device == Device::cuda;
  spec.timeout_seconds = env_.eval->build_timeout_seconds;
  spec.sandbox = env_.environment->sandbox;
  json workloads = json::array();
  bool all = true;
  double seconds = build.seconds;
  for (const auto* workload : select_workloads(*env_.task, env_.eval->workloads, false)) {
    add_workload(spec, *env_.task, *workload);
    spec.scratch_dir = env_.environment->scratch_dir / fmt::format("warmup-{:016x}", random_u64());
    const WarmupResult warm = triton_warmup(setup, spec);
    std::error_code ignored;
    fs::remove_all(spec.scratch_dir, ignored);
    seconds += warm.seconds;
    json w = {{"workload", workload->name}, {"ok", warm.ok}};
    if (warm.ok) {
      json kernels = json::array();
      for (const auto& kernel : warm.kernels)
        kernels.push_back({{"kernel", kernel.value("kernel", "?")}, {"num_warps", kernel.value("num_warps", 0)}});
      w["kernels"] = kernels;
    } else {
      all = false;
      // refused: an import the guard refused (check would reject the solution); compile: Triton's error;
      // load, run: the solution's Python failed; harness: the warm-up itself.
      w["error"] = warm.kind;
      w["message"] = cap_text(warm.message, 2048);
      if (warm.kind != "refused" && warm.kind != "compile" && !warm.log.empty()) w["log"] = cap_text(warm.log, 2048);
    }
    workloads.push_back(std::move(w));
    if (!warm.ok) break;  // the first failure is what to fix; the rest would likely repeat it
  }
  outcome.result["ok"] = all;
  outcome.result["seconds"] = seconds;
  outcome.result["workloads"] = std::move(workloads);
  outcome.is_error = !all;
  if (outcome.result.dump().size() > kResultBytes) outcome.result["log"] = cap_text(build.log, 512);
  return outcome;
}

ToolOutcome ToolBox::evaluate(const json&, bool time, int call_index) {
  auto loaded = run_solution();
  if (auto* why = std::get_if<std::string>(&loaded)) return failure(*why);
  const Solution solution = std::get<Solution>(std::move(loaded));
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
    auto loaded = run_solution();
    if (auto* why = std::get_if<std::string>(&loaded)) return failure(fmt::format("nothing to submit: {}", *why));
    const auto& solution = std::get<Solution>(loaded);
    json files = json::array();
    for (const auto& f : solution.sources) files.push_back(f.filename().string());
    for (const auto& f : solution.headers) files.push_back(f.filename().string());
    outcome.result = {{"submitted", files}};
  }
  outcome.result["note"] = "the run ends now; the final evaluation follows";
  outcome.submitted = true;
  return outcome;
}

}  // namespace d2k::agent
