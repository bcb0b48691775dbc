#include "eval/workloads.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"

namespace d2k {

WorkloadTier default_tier(Device device, const std::vector<std::string>& names) {
  return device == Device::cpu && names.empty() ? WorkloadTier::smoke : WorkloadTier::all;
}

std::vector<const Workload*> select_workloads(const Task& task, const std::vector<std::string>& names,
                                              bool include_hidden, WorkloadTier tier) {
  const bool smoke_only = tier == WorkloadTier::smoke && names.empty();
  std::vector<const Workload*> selected;
  for (const auto& workload : task.workloads) {
    if (workload.hidden && !include_hidden) continue;
    if (smoke_only && !workload.smoke) continue;
    if (names.empty() || std::find(names.begin(), names.end(), workload.name) != names.end())
      selected.push_back(&workload);
  }
  std::vector<std::string> visible;
  for (const auto& w : task.workloads)
    if (include_hidden || !w.hidden) visible.push_back(w.name);
  for (const auto& name : names) {
    const auto* workload = task.find_workload(name);
    if (workload && (include_hidden || !workload->hidden)) continue;
    fail("task {} has no workload '{}' (it has: {})", task.name, name, fmt::join(visible, ", "));
  }
  if (smoke_only && selected.empty()) {
    fail("task {} has no smoke workload (smoke = true in {}), which the cpu device runs unless --workload names "
         "others (it has: {})",
         task.name, (task.dir / "task.toml").string(), fmt::join(visible, ", "));
  }
  return selected;
}

std::optional<std::string> smoke_tier_note(const std::vector<const Task*>& tasks, const std::vector<std::string>& names,
                                           bool include_hidden, WorkloadTier tier) {
  if (tier != WorkloadTier::smoke || !names.empty()) return std::nullopt;
  std::size_t smoke = 0, all = 0;
  for (const Task* task : tasks) {
    for (const auto& workload : task->workloads) {
      if (workload.hidden && !include_hidden) continue;
      ++all;
      smoke += workload.smoke;
    }
  }
  if (smoke == all) return std::nullopt;
  return fmt::format("cpu device: the smoke workloads ({} of {})", smoke, all);
}

}  // namespace d2k
