// Evaluation: one solution on a task's workloads. For each workload: draw the inputs, compute the
// float64 oracle here, run the solution in a fresh worker process, check what it wrote, then time the
// eager baseline the same way the worker timed the solution. Failures become trace statuses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/task.hpp"
#include "core/trace.hpp"
#include "core/worker_protocol.hpp"
#include "eval/environment.hpp"
#include "eval/observer.hpp"
#include "eval/phase_clock.hpp"
#include "eval/workloads.hpp"
#include "runner/builder.hpp"
#include "runner/worker_run.hpp"

namespace d2k {

// How evaluations run: which workloads, the seed, what is timed and how. The command line fills it once
// (cli/), the agent's tools copy it and narrow the workloads.
struct EvalSettings {
  std::vector<std::string> workloads;  // names to run; empty: all published ones
  bool include_hidden = false;         // final evaluation: the hidden workloads too
  WorkloadTier tier = WorkloadTier::all;  // smoke: with no names, the smoke workloads only (eval/workloads.hpp)
  uint64_t seed = 1;
  bool time = true;       // time the solution (and the baselines)
  bool baseline = true;   // time the eager baseline too
  TimingConfig timing;
  double worker_timeout_seconds = 120.0;
  double build_timeout_seconds = 300.0;
  std::optional<NcuWrap> ncu;         // profile the worker (cuda only)
};

class Evaluator {
 public:
  // `environment` must outlive the evaluator; `observer` may be null (nothing is reported).
  Evaluator(const EvalEnvironment& environment, EvalSettings settings, EvalObserver* observer = nullptr);

  // One trace per selected workload, in the task's order. Throws d2k::Error only for harness
  // problems (an unknown workload name, a task without a reference); solution failures are traces.
  std::vector<Trace> evaluate(const Task& task, const Solution& solution);

  // The seed of the next evaluations' input draws (repeated runs draw fresh inputs each time).
  void set_seed(uint64_t seed) { settings_.seed = seed; }

  const EvalEnvironment& environment() const { return environment_; }
  const EvalSettings& settings() const { return settings_; }

 private:
  Trace evaluate_workload(const Task& task, const Workload& workload, const Solution& solution,
                          const BuildResult& build, int index, int count);
  // A Triton solution's warm-up for the workload of `request`, which gains its python part; a failure is
  // the trace's status and message. `summary` gets a line for the trace's log: the kernels and the time.
  std::optional<std::pair<Status, std::string>> triton_warmup_for(const Solution& solution, const BuildResult& build,
                                                                  WorkerRequest& request, std::string& summary);

  const EvalEnvironment& environment_;
  EvalSettings settings_;
  EvalObserver* observer_;
  std::map<std::string, TimingSummary> baselines_;  // "<task>/<workload>": timed once per process
  PhaseClock phases_;                               // of the workload being evaluated
};

}  // namespace d2k
