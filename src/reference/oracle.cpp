#include "reference/oracle.hpp"

#include <ATen/TensorIndexing.h>

#include "core/error.hpp"
#include "reference/tensors.hpp"

namespace d2k {

TensorMap place_inputs(const TensorMap& inputs, Device device, Precision precision) {
  TensorMap placed;
  for (const auto& [name, tensor] : inputs) {
    auto type = tensor.scalar_type();
    if (precision == Precision::oracle && at::isFloatingType(type)) type = at::kDouble;
    auto copy = at::empty_strided(tensor.sizes(), tensor.strides(),
                                  tensor.options().device(to_torch(device)).dtype(type));
    copy.copy_(tensor);
    placed[name] = copy;
  }
  return placed;
}

namespace {

// Every output of the task by name: the ones `path` returned and the in-place ones from `inputs`.
TensorMap every_output(const Task& task, TensorMap outputs, TensorMap& inputs, const char* path) {
  for (const auto& spec : task.outputs) {
    if (spec.inplace) {
      outputs[spec.name] = inputs.at(spec.name);
    } else if (!outputs.count(spec.name)) {
      fail("{}/reference.cpp: the {} returned no output '{}'", task.dir.string(), path, spec.name);
    }
  }
  return outputs;
}

}  // namespace

TensorMap call_reference(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars) {
  return every_output(task, code.reference(inputs, scalars), inputs, "reference");
}

TensorMap call_oracle(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars) {
  const TensorSpec* sampled = task.sampled_output();
  if (sampled == nullptr) return call_reference(task, code, inputs, scalars);
  // The distribution first: the reference may update inputs in place.
  const TensorMap distributions = code.distribution(inputs, scalars);
  TensorMap outputs = call_reference(task, code, inputs, scalars);
  const auto it = distributions.find(sampled->name);
  if (it == distributions.end())
    fail("{}/reference.cpp: distribution() gave nothing for the sampled output '{}'", task.dir.string(), sampled->name);
  outputs[sampled->name] = it->second;
  return outputs;
}

TensorMap call_library(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars) {
  if (!code.has_library()) fail("{}/reference.cpp: the task has no library path", task.dir.string());
  return every_output(task, code.library(inputs, scalars), inputs, "library path");
}

void apply_patch(const Task& task, TensorMap& inputs, const std::vector<ElementSwap>& patch) {
  for (std::size_t i = 0; i < task.inputs.size(); ++i) {
    std::vector<int64_t> a, b;
    for (const auto& swap : patch) {
      if (swap.input != static_cast<int>(i)) continue;
      a.push_back(swap.a);
      b.push_back(swap.b);
    }
    if (a.empty()) continue;
    at::Tensor& tensor = inputs.at(task.inputs[i].name);
    const int64_t span = tensor.storage().nbytes() / tensor.element_size() - tensor.storage_offset();
    auto storage = tensor.as_strided({span}, {1}, tensor.storage_offset());
    const auto options = at::TensorOptions().dtype(at::kLong).device(tensor.device());
    const auto first = at::tensor(a, at::TensorOptions().dtype(at::kLong)).to(options.device());
    const auto second = at::tensor(b, at::TensorOptions().dtype(at::kLong)).to(options.device());
    // The elements of one patch are distinct, so the two assignments cannot step on each other.
    const auto at_first = storage.index({first}).clone();
    storage.index_put_({first}, storage.index({second}));
    storage.index_put_({second}, at_first);
  }
}

}  // namespace d2k
