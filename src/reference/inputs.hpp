// Workload inputs: drawn on the CPU from a seed, so the same (task, workload, seed) gives the same
// bytes on every machine and device.
#pragma once

#include <cstdint>

#include "core/task.hpp"
#include "reference/task_code.hpp"

namespace d2k {

// Every input of the task, by name, in its declared dtype and geometry (lay_out), on the CPU.
TensorMap make_inputs(const Task& task, const TaskCode& code, const Workload& workload, uint64_t seed);

// A second draw that differs from `first` in a few elements only (about 1 in kSecondDrawChange of each
// input's elements, at least one), each redrawn from the input's distribution with `seed`: a
// solution that caches its outputs by address, or by a fingerprint of a few sampled elements, gives
// the first draw's outputs for it. Tasks with their own make_inputs get a whole fresh draw instead. Inputs
// d2k_prepare sees (TensorSpec::prepare) are the first draw's in both.
inline constexpr int64_t kSecondDrawChange = 1024;
TensorMap make_second_inputs(const Task& task, const TaskCode& code, const Workload& workload, const TensorMap& first,
                             uint64_t seed);

// The values of one input drawn from `init`, logical shape, in `type` (float32 or float64): fixed chunks of
// the flattened tensor, each from its own generator seeded by (seed, index, chunk), drawn in parallel, the
// same on any number of threads. A task's make_inputs draws its plain inputs with it beside the structured ones.
at::Tensor draw_input(const InputInit& init, at::IntArrayRef shape, uint64_t seed, uint64_t index, at::ScalarType type);

// The workload's scalars and axes by name.
Scalars scalars_for(const Task& task, const Workload& workload);

}  // namespace d2k
