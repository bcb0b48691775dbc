// The code half of a task: its eager reference, written once with the libtorch C++ API the way a model
// author writes eager PyTorch. The same function is the timed baseline (native dtypes, on the evaluation
// device) and, run on inputs upcast to float64, the correctness oracle.
//
// Each tasks/<family>/<name>/reference.cpp defines a subclass and registers it with
// D2K_REGISTER_TASK("<family>/<name>", Class). CMake compiles every reference.cpp into d2k, so adding
// a task touches no other folder.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/task.hpp"

namespace d2k {

using TensorMap = std::map<std::string, at::Tensor>;

// Scalar values of one workload, by name, and its axis values: a reference needs an axis when one of its
// outputs has an extent that no input shows (moe/topk_softmax's k).
struct Scalars {
  std::map<std::string, double> values;
  std::map<std::string, int64_t> axes;
  double f(const std::string& name) const;
  int64_t i(const std::string& name) const;
  int64_t axis(const std::string& name) const {
    auto it = axes.find(name);
    if (it == axes.end()) fail("the reference asked for axis '{}', which the workload does not define", name);
    return it->second;
  }
};

class TaskCode {
 public:
  virtual ~TaskCode() = default;

  // The eager reference. `inputs` holds every input by name; for an in-place output the reference
  // updates that input tensor itself (as the real op does). Returns the outputs that are not in-place,
  // by name. Must work for any floating dtype of the inputs (float64 for the oracle).
  virtual TensorMap reference(TensorMap& inputs, const Scalars& scalars) const = 0;

  // Optional: inputs with structure the generic generators cannot express (valid block tables, routing
  // ids). Return nothing to use the task.toml distributions. Must be deterministic in `generator`.
  virtual std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload,
                                               at::Generator& generator) const {
    return std::nullopt;
  }

  // Optional: what is compared instead of the raw outputs, e.g. fp8 values dequantized with their
  // scales. Called on the candidate's raw outputs (their declared dtypes, on the CPU, laid out as the
  // task says) and on the oracle's (float64 on the CPU), with the task's shapes: convert what you
  // compute with (e.g. q.to(at::kDouble)). The names returned must have a tolerance in task.toml (an output
  // name, or a [compare.<name>] table).
  virtual TensorMap comparable(const TensorMap& outputs, const Scalars& scalars) const {
    return outputs;
  }
};

using TaskCodeFactory = std::function<std::unique_ptr<TaskCode>()>;

// Registry of the compiled-in task references, keyed by task name.
void register_task_code(const std::string& task_name, TaskCodeFactory factory);
std::unique_ptr<TaskCode> make_task_code(const std::string& task_name);  // nullptr when unknown
std::vector<std::string> registered_task_codes();

namespace detail {
struct TaskCodeRegistrar {
  TaskCodeRegistrar(const char* name, TaskCodeFactory factory) {
    register_task_code(name, std::move(factory));
  }
};
}  // namespace detail

}  // namespace d2k

#define D2K_CONCAT_INNER(a, b) a##b
#define D2K_CONCAT(a, b) D2K_CONCAT_INNER(a, b)
#define D2K_REGISTER_TASK(task_name, Class)                                            \
  static const ::d2k::detail::TaskCodeRegistrar D2K_CONCAT(d2k_task_registrar_, __LINE__)( \
      task_name, [] { return std::unique_ptr<::d2k::TaskCode>(new Class()); })
