// Running a task's reference: natively (the eager baseline, timed) or in float64 (the oracle); and its
// library path, natively (the library baseline, timed).
#pragma once

#include "core/call_patch.hpp"
#include "core/device.hpp"
#include "core/task.hpp"
#include "reference/task_code.hpp"

namespace d2k {

enum class Precision { native, oracle };

// Copies of `inputs` on `device`, floating ones as float64 for the oracle. Layouts are kept.
TensorMap place_inputs(const TensorMap& inputs, Device device, Precision precision);

// Calls the reference on `inputs` (which it may update in place) and returns every output of the task
// by name: the ones it returned and the in-place ones taken from `inputs`. Throws d2k::Error when the
// reference leaves out an output.
TensorMap call_reference(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars);

// The oracle: call_reference on inputs placed at Precision::oracle, with a sampled output (metric
// 'sample') replaced by TaskCode::distribution of the same inputs.
TensorMap call_oracle(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars);

// Swaps the elements a timed call's patch names (core/call_patch.hpp) in `inputs`, tensors laid out as
// the task says (any device and floating precision: the storage offsets are the same), in place.
void apply_patch(const Task& task, TensorMap& inputs, const std::vector<ElementSwap>& patch);

// The same for the library path (TaskCode::library); throws d2k::Error when the task has none.
TensorMap call_library(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars);

}  // namespace d2k
