// `d2k eval --profile`: Nsight Compute on the solution's kernels for one workload (eval/ncu.hpp: ncu runs
// the worker inside its sandbox). The solution runs untimed (no baseline, no timed calls, no CUPTI clock,
// whose activity records ncu's own would collide with): the checked call and the second draw's, whose
// kernels ncu replays to read its counters.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/task.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"
#include "runner/builder.hpp"

namespace d2k {

// Profiles `solution` on the one workload `settings` names and prints, per kernel launch, the time,
// the DRAM traffic and rate, the throughputs, occupancy, registers and shared memory, beside the task's
// speed-of-light floor, then the values of `more_metrics` (more ncu metric names) per kernel. Returns 0
// when ncu reported a kernel of the solution, 1 otherwise (with the evaluation's status and the worker's
// log). Fails with a message naming the flag when the device is not cuda, not exactly one workload is
// named, a name of `more_metrics` is not a metric name, or ncu is not on PATH.
int profile_and_report(std::ostream& out, const Task& task, const Solution& solution,
                       const EvalEnvironment& environment, EvalSettings settings,
                       const std::vector<std::string>& more_metrics = {});

}  // namespace d2k
