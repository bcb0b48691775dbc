#include "eval/baselines.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "reference/oracle.hpp"
#include "timing/rotation.hpp"
#include "timing/stats.hpp"
#include "timing/timer.hpp"

namespace d2k {
namespace {

// Rotated like the solution's inputs (timing/rotation.hpp), so that no side is timed with a warmer L2
// than the other. The reference (or library) allocates its own outputs; only the inputs are copied.
// `setup` (the library path's), untimed, on the first copy; what it returns joins every copy as it is.
TimingSummary time_rotated(const std::function<void(TensorMap&)>& call, const TensorMap& inputs, Device device,
                           const TimingConfig& timing,
                           const std::function<TensorMap(const TensorMap&)>& setup = nullptr) {
  std::size_t set_bytes = 0;
  for (const auto& [name, tensor] : inputs) set_bytes += tensor.nbytes();
  const std::size_t budget = device == Device::cpu
                                 ? std::min<std::size_t>(kCpuRotationBudgetBytes, timing.rotate_max_bytes)
                                 : static_cast<std::size_t>(std::max<int64_t>(0, timing.rotate_max_bytes));
  const int sets = rotation_sets(set_bytes, 0, last_level_cache_bytes(device), budget, timing);
  std::vector<TensorMap> copies;
  for (int k = 0; k < sets; ++k) copies.push_back(place_inputs(inputs, device, Precision::native));
  if (setup) {
    const TensorMap shared = setup(copies.front());
    for (auto& copy : copies)
      for (const auto& [name, tensor] : shared) copy.insert_or_assign(name, tensor);
  }
  std::size_t next = 0;
  const CallHooks rotate{[&] { next = (next + 1) % copies.size(); }, {}};
  // The reference runs on torch's current stream, the legacy default one, which `nullptr` names.
  return summarize(measure(device, [&] { call(copies[next]); }, rotate, nullptr, timing));
}

}  // namespace

std::optional<TimingSummary> baseline_time(const Task& task, const Workload& workload, const TaskCode& code,
                                           const TensorMap& inputs, const Scalars& scalars, Device device,
                                           const TimingConfig& timing, BaselineCache& cache) {
  const auto key = task.name + "/" + workload.name;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const auto summary = time_rotated([&](TensorMap& copy) { call_reference(task, code, copy, scalars); }, inputs,
                                    device, timing);
  cache[key] = summary;
  return summary;
}

LibraryTime library_time(const Task& task, const Workload& workload, const TaskCode& code, const TensorMap& inputs,
                         const Scalars& scalars, Device device, const TimingConfig& timing, BaselineCache& cache) {
  if (!code.has_library()) return {};
  const auto key = "library:" + task.name + "/" + workload.name;
  if (auto it = cache.find(key); it != cache.end()) return {it->second, {}};
  try {
    const auto summary = time_rotated([&](TensorMap& copy) { call_library(task, code, copy, scalars); }, inputs,
                                      device, timing, [&](const TensorMap& copy) { return code.library_setup(copy, scalars); });
    cache[key] = summary;
    return {summary, {}};
  } catch (const std::exception& error) {
    // The first line: c10's errors go on with a C++ backtrace.
    const std::string text = error.what();
    return {std::nullopt, text.substr(0, text.find('\n'))};
  }
}

}  // namespace d2k
