#include "reference/inputs.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

// Values of one distribution, float64, logical shape.
at::Tensor draw(const InputInit& init, at::IntArrayRef shape, at::Generator& gen) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  if (init.dist == "normal") return at::normal(init.mean, init.std, shape, gen, f64);
  if (init.dist == "uniform") return at::empty(shape, f64).uniform_(init.low, init.high, gen);
  if (init.dist == "student_t") {
    // t = z / sqrt(chi2(df) / df), chi2(df) = 2 * Gamma(df / 2): heavy tails that expose lost precision.
    auto z = at::normal(0.0, 1.0, shape, gen, f64);
    auto chi2 = 2.0 * at::_standard_gamma(at::full(shape, init.df / 2.0, f64), gen);
    return init.mean + init.std * z / at::sqrt(chi2 / init.df);
  }
  if (init.dist == "ties") {
    // Values on a coarse grid, so that equal values recur within a row.
    auto z = at::normal(init.mean, init.std, shape, gen, f64);
    return at::round(z / init.quantum) * init.quantum;
  }
  if (init.dist == "randint")
    return at::randint(static_cast<int64_t>(init.low), static_cast<int64_t>(init.high), shape, gen, f64);
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
      laid[spec.name] = lay_out(it->second.to(to_torch(spec.dtype)), geometry_of(spec, workload));
    }
    return laid;
  }
  TensorMap inputs;
  for (std::size_t i = 0; i < task.inputs.size(); ++i) {
    const auto& spec = task.inputs[i];
    const auto geometry = geometry_of(spec, workload);
    // One generator per input, so adding an input does not change the others' values.
    auto input_gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL + i);
    auto values = draw(init_of(spec, workload), geometry.shape, input_gen);
    inputs[spec.name] = lay_out(values.to(to_torch(spec.dtype)), geometry);
  }
  return inputs;
}

TensorMap make_second_inputs(const Task& task, const TaskCode& code, const Workload& workload, const TensorMap& first,
                             uint64_t seed) {
  auto fresh = make_inputs(task, code, workload, seed);
  {
    auto probe = at::make_generator<at::CPUGeneratorImpl>(seed);
    if (code.make_inputs(task, workload, probe)) return fresh;
  }
  TensorMap mixed;
  for (std::size_t i = 0; i < task.inputs.size(); ++i) {
    const auto& spec = task.inputs[i];
    const auto& old_values = first.at(spec.name);
    const auto& new_values = fresh.at(spec.name);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 7919ULL + i);
    auto change = at::empty(old_values.sizes(), at::TensorOptions().dtype(at::kDouble))
                      .uniform_(0.0, 1.0, gen)
                      .lt(1.0 / static_cast<double>(kSecondDrawChange));
    // At least one element, so that a tiny input differs too; where the fresh value happens to equal
    // the old one the element is still "changed", harmlessly.
    if (change.numel() > 0) change.view(-1)[at::randint(change.numel(), {1}, gen).item<int64_t>()].fill_(true);
    // Logical values of both draws in float64 (exact for every input dtype), mixed, laid out again.
    auto values = at::where(change, new_values.to(at::kDouble), old_values.to(at::kDouble));
    mixed[spec.name] = lay_out(values.to(to_torch(spec.dtype)), geometry_of(spec, workload));
  }
  return mixed;
}

Scalars scalars_for(const Task& task, const Workload& workload) {
  Scalars scalars;
  for (const auto& [spec, value] : scalars_of(task, workload)) scalars.values[spec->name] = value;
  scalars.axes = workload.axes;
  return scalars;
}

}  // namespace d2k
