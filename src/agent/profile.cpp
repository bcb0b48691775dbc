// profile: Nsight Compute on the worker process of a one-workload evaluation run in this process (ncu
// inside the worker's sandbox, eval/ncu.hpp). The harness's own kernels (namespace d2k) are left out.
#include <fmt/format.h>

#include <algorithm>

#include "agent/tools.hpp"
#include "eval/evaluator.hpp"
#include "eval/ncu.hpp"
#include "core/error.hpp"
#include "core/file_bytes.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

ToolOutcome unavailable(const std::string& why) {
  ToolOutcome outcome;
  outcome.result = {{"available", false}, {"error", "profiling is unavailable: " + why}};
  outcome.is_error = true;
  return outcome;
}

}  // namespace

ToolOutcome ToolBox::profile(const json& args, int call_index) {
  auto it = args.find("workload");
  std::string workload;
  if (it != args.end() && !it->is_null()) {
    if (!it->is_string()) return unavailable("the argument 'workload' must be a string");
    workload = it->get<std::string>();
  }
  const auto published = select_workloads(*env_.task, env_.eval->workloads, false);
  if (published.empty()) return unavailable("the task has no published workload");
  if (workload.empty()) workload = published.front()->name;
  if (std::none_of(published.begin(), published.end(), [&](const Workload* w) { return w->name == workload; })) {
    std::string names;
    for (const auto* w : published) names += (names.empty() ? "" : ", ") + w->name;
    ToolOutcome outcome;
    outcome.result = {{"error", fmt::format("no published workload '{}' (they are: {})", workload, names)}};
    outcome.is_error = true;
    return outcome;
  }
  if (env_.environment->device != Device::cuda) return unavailable(fmt::format("the run's device is {}, not cuda", name_of(env_.environment->device)));
  const auto scratch = env_.run_dir / "profile";
  fs::create_directories(scratch);
  const auto report = scratch / "ncu-report.txt";
  std::error_code ignored;
  fs::remove(report, ignored);
  auto ncu = make_ncu_wrap(ncu_profile_metrics(), 40, report);
  if (!ncu) return unavailable("Nsight Compute (ncu) is not on PATH");
  auto loaded = run_solution();
  if (auto* why = std::get_if<std::string>(&loaded)) return unavailable(*why);
  const Solution solution = std::get<Solution>(std::move(loaded));

  // A one-workload evaluation, in this process, whose worker runs under ncu inside its sandbox
  // (eval/ncu.hpp): ncu outside the sandbox does not reach the worker. The reference runs in the
  // orchestrator, which ncu never sees, so only the solution's kernels and the worker's own (the L2
  // flush) are profiled. No baseline and a single timed call: the profile is what is wanted, not times.
  EvalSettings settings = *env_.eval;
  settings.workloads = {workload};
  settings.include_hidden = false;
  settings.seed = derive_seed(env_.seed, static_cast<uint64_t>(call_index));
  settings.baseline = false;
  settings.timing.min_samples = 1;
  settings.timing.warmup = 0;
  settings.timing.max_seconds = 0;
  settings.worker_timeout_seconds = 300;
  settings.ncu = std::move(ncu);
  const auto traces = Evaluator(*env_.environment, settings).evaluate(*env_.task, solution);
  const auto text = file_bytes(report);
  const auto kernels = parse_ncu_csv(text.value_or(""), 10);
  ToolOutcome outcome;
  if (kernels.empty()) {
    // The status only: the trace's message may name a reference value, which check and benchmark
    // redact and a model never sees.
    const Trace& trace = traces.front();
    outcome.result = {{"available", false},
                      {"error", fmt::format("ncu profiled no kernel of the solution (the evaluation: {}{})",
                                            name_of(trace.status), text ? "" : "; no ncu report")},
                      {"log", cap_text(trace.log + "\n" + text.value_or(""), 4096)}};
    outcome.is_error = true;
    return outcome;
  }
  outcome.result = {{"available", true}, {"workload", workload}, {"kernels", kernels}};
  return outcome;
}

}  // namespace d2k::agent
