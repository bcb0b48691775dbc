#include "reference/inputs.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

// Values of one distribution, logical shape. Drawn in float64 only where the input's dtype needs more than
// float32 holds; float32 draws take half the time and memory, and the T=16384 workloads draw 67 M values
// per input (most of the harness's own time went here).
at::Tensor draw(const InputInit& init, at::IntArrayRef shape, at::Generator& gen, at::ScalarType type) {
  const auto options = at::TensorOptions().dtype(type);
  if (init.dist == "normal") return at::normal(init.mean, init.std, shape, gen, options);
  if (init.dist == "uniform") return at::empty(shape, options).uniform_(init.low, init.high, gen);
  if (init.dist == "student_t") {
    // t = z / sqrt(chi2(df) / df), chi2(df) = 2 * Gamma(df / 2): heavy tails that expose lost precision.
    auto z = at::normal(0.0, 1.0, shape, gen, options);
    auto chi2 = 2.0 * at::_standard_gamma(at::full(shape, init.df / 2.0, options), gen);
    return init.mean + init.std * z / at::sqrt(chi2 / init.df);
  }
  if (init.dist == "ties") {
    // Values on a coarse grid, so that equal values recur within a row.
    auto z = at::normal(init.mean, init.std, shape, gen, options);
    return at::round(z / init.quantum) * init.quantum;
  }
  if (init.dist == "randint")
    return at::randint(static_cast<int64_t>(init.low), static_cast<int64_t>(init.high), shape, gen, options);
  fail("unknown distribution '{}'", init.dist);
}

}  // namespace

TensorMap make_inputs(const Task& task, const TaskCode& code, const Workload& workload, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  if (auto custom = code.make_inputs(task, workload, gen)) {
    TensorMap laid;
    for (const auto& spec : task.inputs) {
      auto it = custom->find(spec.name);
      if (it == custom->end()) fail("{}: make_inputs did not produce input '{}'", task.name, spec.name);
      laid[spec.name] = lay_out(it->second, geometry_of(spec, workload), spec.dtype);
    }
    return laid;
  }
  TensorMap inputs;
  for (std::size_t i = 0; i < task.inputs.size(); ++i) {
    const auto& spec = task.inputs[i];
    const auto geometry = geometry_of(spec, workload);
    // One generator per input, so adding an input does not change the others' values.
    auto input_gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL + i);
    // Integers are drawn as float64, exact up to 2^53; floating inputs of 32 bits or fewer as float32.
    const bool narrow = is_floating(spec.dtype) && spec.dtype != DType::f64;
    const auto wide = narrow ? at::kFloat : at::kDouble;
    auto values = draw(init_of(spec, workload), geometry.shape, input_gen, wide);
    inputs[spec.name] = lay_out(values, geometry, spec.dtype);
  }
  return inputs;
}

Scalars scalars_for(const Task& task, const Workload& workload) {
  Scalars scalars;
  for (const auto& [spec, value] : scalars_of(task, workload)) scalars.values[spec->name] = value;
  scalars.axes = workload.axes;
  return scalars;
}

}  // namespace d2k
