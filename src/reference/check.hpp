// The checker: pure policy on the orchestrator's side. Given what the worker wrote (and where it
// wrote out of bounds) and the oracle's outputs, decide the status and say why.
#pragma once

#include <string>
#include <vector>

#include "core/task.hpp"
#include "core/trace.hpp"
#include "core/worker_protocol.hpp"
#include "reference/task_code.hpp"

namespace d2k {

struct Verdict {
  Status status = Status::passed;
  std::string message;
  std::vector<Comparison> comparisons;
};

// `got`: the solution's outputs as read back (declared dtype and layout, CPU). `want`: the oracle's
// outputs (any floating dtype, any device).
Verdict check(const Task& task, const TaskCode& code, const Scalars& scalars, const TensorMap& got,
              const TensorMap& want, const std::vector<GuardViolation>& violations);

}  // namespace d2k
