// The code half of a task: its eager reference, written once with the libtorch C++ API the way a model
// author writes eager PyTorch. The same function is the timed baseline (native dtypes, on the evaluation
// device) and, run on inputs upcast to float64, the correctness oracle.
//
// Where PyTorch has a fused library path for the operator (SDPA, _scaled_mm, _int_mm, _grouped_mm,
// cuBLAS through matmul), the subclass defines it too: a second baseline that the expert must beat.
//
// Each tasks/<family>/<name>/reference.cpp defines a subclass and registers it with
// D2K_REGISTER_TASK(Class). The name is the folder's: CMake compiles every reference.cpp into d2k with
// D2K_TASK_NAME="<family>/<name>" (src/CMakeLists.txt, d2k_task_references), so adding a task touches
// no other folder and its name is written nowhere but its path.
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

  // Optional, with make_inputs: the second draw's inputs that are not prepared (`prepare = true` inputs
  // are the first draw's, `first`, whatever this returns), for a task whose prepared inputs are costly to
  // draw again only to be replaced (a 70B layer's weight). Nothing: make_inputs draws them all afresh.
  virtual std::optional<TensorMap> make_unprepared_inputs(const Task& task, const Workload& workload,
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

  // Optional: the fused library path a model author would call instead of the eager composition (e.g.
  // at::_scaled_mm, at::scaled_dot_product_attention), timed as the library baseline on the same inputs
  // in their native dtypes. Same contract as reference(): in-place outputs are updated in `inputs`, the
  // others returned by name. A task that defines it overrides has_library() to return true and names
  // the path in task.toml (`library = "..."`); `d2k tasks --check` holds the two together.
  virtual bool has_library() const { return false; }

  // Optional, with library(): what the library path keeps from one call to the next, computed once per
  // workload outside its timed calls from the inputs d2k_prepare sees (the weights): a w4a16 GEMM's
  // weight dequantized to bf16, as a serving system without an int4 kernel holds it. library() finds these
  // among its inputs, by name, where the harness set them up (library_time); a caller that did not (a
  // test) leaves them out, and library() computes them itself. One set serves every rotated copy of the
  // inputs, as the solution's prepared state does.
  virtual TensorMap library_setup(const TensorMap& inputs, const Scalars& scalars) const { return {}; }

  // Required for a task with a sampled output (metric 'sample'): the exact distribution each of its
  // elements is drawn from, by output name, shaped as the output with one more dimension (the values it
  // can take, 0..n-1), computed from `inputs` (float64 for the oracle). It replaces the reference's draw
  // as the oracle of that output (call_oracle): a draw of the eager sampler says little about another.
  virtual TensorMap distribution(const TensorMap& inputs, const Scalars& scalars) const {
    fail("this task's reference code defines no distribution() for its sampled output");
  }

  virtual TensorMap library(TensorMap& inputs, const Scalars& scalars) const {
    fail("this task's reference code defines no library() (its has_library() returns {})", has_library());
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

// D2K_TASK_NAME comes from CMake, per reference.cpp: a compile error naming it here means the file is
// not where the build looks (tasks/<family>/<name>/reference.cpp) or the build predates it.
#define D2K_CONCAT_INNER(a, b) a##b
#define D2K_CONCAT(a, b) D2K_CONCAT_INNER(a, b)
#define D2K_REGISTER_TASK(Class)                                                               \
  static const ::d2k::detail::TaskCodeRegistrar D2K_CONCAT(d2k_task_registrar_, __LINE__)( \
      D2K_TASK_NAME, [] { return std::unique_ptr<::d2k::TaskCode>(new Class()); })
