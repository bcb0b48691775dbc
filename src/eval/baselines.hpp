// The baselines a solution's time is set against, timed in this process the way the worker times the
// solution (same timer, same rotation of the inputs through copies): the eager reference, which every
// task has, and the fused library path, which tasks have where PyTorch offers one (TaskCode::library).
// docs/metrics.md says what each means.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/device.hpp"
#include "core/task.hpp"
#include "core/trace.hpp"
#include "core/worker_protocol.hpp"
#include "reference/task_code.hpp"

namespace d2k {

// Timings kept for the life of the process: a baseline depends on the task, the workload and the
// device, not on the solution or the seed, so it is timed once. Eager and library entries have keys of
// their own, so one cache can hold both.
using BaselineCache = std::map<std::string, TimingSummary>;

// The eager reference timed on the workload's inputs (already drawn, on the CPU) on `device`.
std::optional<TimingSummary> baseline_time(const Task& task, const Workload& workload, const TaskCode& code,
                                           const TensorMap& inputs, const Scalars& scalars, Device device,
                                           const TimingConfig& timing, BaselineCache& cache);

// The library path timed the same way: nothing when the task has none. A library that cannot run the
// workload (it supports fewer shapes than the task: cuBLASLt's block-scaled fp8 GEMM refuses some) is
// not a harness failure: its error is kept as `refused`, and the trace says so beside an empty column.
struct LibraryTime {
  std::optional<TimingSummary> summary;
  std::string refused;
};
LibraryTime library_time(const Task& task, const Workload& workload, const TaskCode& code,
                                          const TensorMap& inputs, const Scalars& scalars, Device device,
                                          const TimingConfig& timing, BaselineCache& cache);

}  // namespace d2k
