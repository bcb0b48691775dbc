#include "core/task.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.hpp"
#include "core/expr.hpp"

namespace d2k {
namespace {

template <typename T>
const T* find_named(const std::vector<T>& items, const std::string& name) {
  for (const auto& item : items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}

// Shapes and strides must come out whole: a formula like "H / 3" that leaves a remainder is a task bug,
// not something to round away silently.
int64_t whole(const std::string& formula, const Workload& workload, const std::string& what) {
  double value = evaluate(formula, workload.axes);
  double rounded = std::round(value);
  if (!std::isfinite(value) || std::abs(value - rounded) > 1e-9 * std::max(1.0, std::abs(value)) || rounded < 0 ||
      rounded > 9.0e15) {
    fail("{}: formula '{}' gives {} for workload '{}', not a non-negative integer", what, formula, value,
         workload.name);
  }
  return static_cast<int64_t>(rounded);
}

bool is_name_part(std::string_view part) {
  if (part.empty() || !std::islower(static_cast<unsigned char>(part.front()))) return false;
  return std::all_of(part.begin(), part.end(), [](unsigned char c) {
    return std::islower(c) || std::isdigit(c) || c == '_';
  });
}

}  // namespace

bool is_task_name(std::string_view name) {
  const auto slash = name.find('/');
  return slash != std::string_view::npos && is_name_part(name.substr(0, slash)) && is_name_part(name.substr(slash + 1));
}

const Workload* Task::find_workload(const std::string& name) const { return find_named(workloads, name); }
const TensorSpec* Task::find_input(const std::string& name) const { return find_named(inputs, name); }
const TensorSpec* Task::find_output(const std::string& name) const { return find_named(outputs, name); }
const TensorSpec* Task::sampled_output() const {
  for (const auto& output : outputs)
    if (output.tolerance.metric == Tolerance::Metric::sample) return &output;
  return nullptr;
}

const Tolerance* Task::tolerance_for(const std::string& name) const {
  if (auto found = compare.find(name); found != compare.end()) return &found->second;
  if (const TensorSpec* output = find_output(name)) return &output->tolerance;
  return nullptr;
}

int64_t Geometry::numel() const {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

int64_t Geometry::span() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

Geometry geometry_of(const TensorSpec& spec, const Workload& workload) {
  Geometry geometry;
  for (std::size_t i = 0; i < spec.shape.size(); ++i) {
    geometry.shape.push_back(whole(spec.shape[i], workload, fmt::format("tensor '{}' shape[{}]", spec.name, i)));
  }

  const std::vector<std::string>* strides = spec.strides.empty() ? nullptr : &spec.strides;
  std::string strides_field = "strides";
  if (auto choice = workload.layouts.find(spec.name); choice != workload.layouts.end()) {
    auto layout = spec.layouts.find(choice->second);
    if (layout == spec.layouts.end()) {
      fail("workload '{}' picks layout '{}' for tensor '{}', which has no such layout", workload.name,
           choice->second, spec.name);
    }
    strides = &layout->second;
    strides_field = "layouts." + choice->second;
  }
  if (strides == nullptr) {
    geometry.strides.assign(geometry.shape.size(), 1);
    for (std::size_t i = geometry.shape.size(); i-- > 1;) {
      geometry.strides[i - 1] = geometry.strides[i] * std::max<int64_t>(geometry.shape[i], 1);
    }
    return geometry;
  }
  if (strides->size() != spec.shape.size()) {
    fail("tensor '{}' {}: {} strides for {} dimensions", spec.name, strides_field, strides->size(),
         spec.shape.size());
  }
  for (std::size_t i = 0; i < strides->size(); ++i) {
    geometry.strides.push_back(
        whole((*strides)[i], workload, fmt::format("tensor '{}' {}[{}]", spec.name, strides_field, i)));
  }
  return geometry;
}

int64_t relabel_block_of(const Task& task, const TensorSpec& spec, const Workload& workload) {
  if (spec.relabel.empty()) return 0;
  const std::string field = fmt::format("tensor '{}' relabel", spec.name);
  // The block may name the integer scalars as well as the axes: a routing group's size is E over a
  // scalar's number of groups.
  Workload named = workload;
  for (const auto& [scalar, value] : scalars_of(task, workload)) {
    if (scalar->is_int) named.axes.emplace(scalar->name, static_cast<int64_t>(value));
  }
  const int64_t block = whole(spec.relabel, named, field);
  const int64_t columns = geometry_of(spec, workload).shape.back();
  if (block < 2 || columns % block != 0) {
    fail("{} = '{}' gives {} on workload '{}': a block must be at least 2 and divide the last dimension ({})",
         field, spec.relabel, block, workload.name, columns);
  }
  return block;
}

double flops_of(const Task& task, const Workload& workload) {
  return task.flops.empty() ? 0.0 : evaluate(task.flops, workload.axes);
}

double min_bytes_of(const Task& task, const Workload& workload) {
  return task.min_bytes.empty() ? 0.0 : evaluate(task.min_bytes, workload.axes);
}

std::vector<std::pair<const ScalarSpec*, double>> scalars_of(const Task& task, const Workload& workload) {
  std::vector<std::pair<const ScalarSpec*, double>> values;
  for (const auto& scalar : task.scalars) {
    auto override_value = workload.scalars.find(scalar.name);
    values.emplace_back(&scalar, override_value == workload.scalars.end() ? scalar.value : override_value->second);
  }
  return values;
}

InputInit init_of(const TensorSpec& input, const Workload& workload) {
  auto found = workload.inits.find(input.name);
  return found == workload.inits.end() ? input.init : found->second;
}

}  // namespace d2k
