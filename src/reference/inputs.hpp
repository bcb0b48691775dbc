// Workload inputs: drawn on the CPU from a seed, so the same (task, workload, seed) gives the same
// bytes on every machine and device.
#pragma once

#include <cstdint>

#include "core/task.hpp"
#include "reference/task_code.hpp"

namespace d2k {

// Every input of the task, by name, in its declared dtype and geometry (lay_out), on the CPU.
TensorMap make_inputs(const Task& task, const TaskCode& code, const Workload& workload, uint64_t seed);

// The workload's scalars and axes by name.
Scalars scalars_for(const Task& task, const Workload& workload);

}  // namespace d2k
