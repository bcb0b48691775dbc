#include "reference/oracle.hpp"

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

TensorMap call_reference(const Task& task, const TaskCode& code, TensorMap& inputs, const Scalars& scalars) {
  auto outputs = code.reference(inputs, scalars);
  for (const auto& spec : task.outputs) {
    if (spec.inplace) {
      outputs[spec.name] = inputs.at(spec.name);
    } else if (!outputs.count(spec.name)) {
      fail("{}/reference.cpp: the reference returned no output '{}'", task.dir.string(), spec.name);
    }
  }
  return outputs;
}

}  // namespace d2k
