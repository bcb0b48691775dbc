// The checks of one workload's run: pure policy over what the orchestrator computed (the draws, the
// oracles, digests of what it sent) and what the worker reported (runner/worker_run.hpp). Each check is
// a small function that returns a finding or nothing; the first finding decides the trace's status.
// Adding a kind of check is adding one function to the list in checks.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ceilings.hpp"
#include "core/task.hpp"
#include "core/trace.hpp"
#include "reference/task_code.hpp"
#include "runner/worker_run.hpp"

namespace d2k {

// What the checks look at.
struct WorkloadRun {
  const Task& task;
  const Workload& workload;
  const TaskCode& code;
  const Scalars& scalars;
  Device device;
  const WorkerRequest& request;
  const WorkerOutcome& outcome;
  const TensorMap& want;         // the oracle of the first draw, on the device
  const TensorMap& second_want;  // the oracle of the second draw
  // The oracle of timed call `call`: the first draw with that call's patch (core/call_patch.hpp).
  std::function<TensorMap(int64_t call)> oracle_of_call;
  // Digests (request.digest_key) of the read-only inputs as sent, in request order of those inputs.
  std::vector<uint64_t> first_digests, second_digests;
  const Ceilings& ceilings;
  bool timed = true;  // the request asked for timing
};

struct Finding {
  Status status = Status::rejected;
  std::string message;
  std::vector<Comparison> comparisons;
  // The outside clock's disagreement: a stall of the host during the timed loop (the hypervisor taking
  // the CPU, say) makes it in an honest run too, once; a forged clock makes it every time. The evaluator
  // runs the worker once more, with fresh secrets, before it counts.
  bool host_may_explain = false;
};

// Runs the checks in order; nothing when the run passed every one. `comparisons` gets the checked
// call's comparisons whenever they were made.
std::optional<Finding> check_run(const WorkloadRun& run, std::vector<Comparison>& comparisons);

// The solution's outputs of one frame as tensors on `device` (the task's dtypes and layouts).
TensorMap outputs_of(const Task& task, const Workload& workload, const std::vector<std::string_view>& bytes,
                     Device device);

// The outside clock (core/worker_protocol.hpp): what the orchestrator's wall clock and the kernel's count
// of the worker's time on or waiting for a CPU say each timed call took beyond the harness's own cost (the same loop with
// nothing called), against the worker's samples; nothing when the worker sent no samples.
std::optional<OutsideClock> outside_clock_of(const WorkerReport& report);

// Whether the reported samples explain the outside clock's account of the calls. Why not, or nothing.
std::optional<std::string> clock_disagrees(const WorkerReport& report, Device device);

// The medians the second clock compares; nothing where CUPTI did not run.
std::optional<SecondClock> second_clock_of(const WorkerReport& report);

// The second clock (CUPTI's records of the verification calls, cuda) against the event timer's samples of
// the same calls and the timed calls' median: why they disagree, or nothing.
std::optional<std::string> second_clock_disagrees(const SecondClockReport& second, double timed_median_ms);

// A median faster than the speed of light: rejected when the inputs were cold (rotated, or larger than
// the L2), otherwise a warning. On the cpu device, a test seam whose ceiling is a memcpy, only a median
// under 0.8 of the floor is rejected.
struct LightCheck {
  std::optional<std::string> rejected;
  std::optional<std::string> warning;
};
LightCheck faster_than_light(double median_ms, double flops, double min_bytes, const Ceilings& ceilings,
                             DType flops_dtype, Device device, int rotation_sets, int64_t rotation_bytes);

}  // namespace d2k
