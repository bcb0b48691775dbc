// Which of a task's workloads an evaluation runs: the named ones, else every published one (and the
// hidden ones in a final evaluation), and on the cpu device by default only the smoke tier: small
// shapes that keep CI's end-to-end run of every task in seconds. The cuda device runs every workload.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/task.hpp"

namespace d2k {

enum class WorkloadTier {
  all,    // every workload the evaluation may see
  smoke,  // only those with `smoke = true` (when no workload is named)
};

// The tier a command line selects on `device`: smoke on the cpu device when no workload is named, so
// that `d2k bench` and `d2k eval` without --workload stay fast where the times mean little anyway.
WorkloadTier default_tier(Device device, const std::vector<std::string>& names);

// The workloads of `task` that `names` selects (all when empty, or the smoke ones when `tier` is
// smoke), hidden ones only when `include_hidden`; an unknown name is an error that lists the workloads
// the caller may see, and so is a smoke tier that selects nothing.
std::vector<const Workload*> select_workloads(const Task& task, const std::vector<std::string>& names,
                                              bool include_hidden, WorkloadTier tier = WorkloadTier::all);

// "cpu device: the smoke workloads (N of M)" when the smoke tier leaves out workloads of `tasks`, for
// the command line to say once; nothing otherwise.
std::optional<std::string> smoke_tier_note(const std::vector<const Task*>& tasks, const std::vector<std::string>& names,
                                           bool include_hidden, WorkloadTier tier);

}  // namespace d2k
