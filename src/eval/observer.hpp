// What an evaluation reports while it runs, for a person or a machine watching it. The evaluator only
// calls these; how they are shown (a terminal line, a JSON line, nothing) is the observer's business.
// Measure, then print: the traces themselves are the evaluation's result, not these calls.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/task.hpp"
#include "core/trace.hpp"
#include "runner/builder.hpp"

namespace d2k {

// One workload's place in its task's evaluation, and how long that workload has taken so far.
struct WorkloadProgress {
  const Task& task;
  const Workload& workload;
  int index = 0;  // 1-based, among `count` selected workloads
  int count = 0;
  double elapsed_seconds = 0;
};

class EvalObserver {
 public:
  virtual ~EvalObserver() = default;
  virtual void building(const Task& task, const Solution& solution) {}
  virtual void built(const Task& task, const BuildResult& build) {}
  // A step of a workload's evaluation begins: "running the solution", "oracle" (on the cpu device, while
  // the worker waits for its draws), "checking", "timing the eager baseline", ...
  virtual void step(const WorkloadProgress& at, std::string_view what) {}
  virtual void finished(const WorkloadProgress& at, const Trace& trace) {}
  // Whoever repeats evaluations (`--repeat N`) says so before each: run 1-based among `runs`, its seed.
  virtual void run_started(int run, int runs, uint64_t seed) {}
};

}  // namespace d2k
