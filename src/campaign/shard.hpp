// A campaign split into shards (`d2k campaign submit --slurm`). Shard i of n drives the runs dealt to it:
// the plan's runs are ordered by a hash of their key (splitmix of its FNV-1a), then dealt round-robin,
// so every shard gets n-th of the runs (one more or less) and a mix of models, tasks and conditions
// (dealing in plan order would stripe by condition or repeat: one shard all design-only runs, another
// all the costly ones). The experts are dealt the same way by task name. A run's shard depends on its
// key, the plan's keys and n alone: the plan's text is fixed for a campaign (the store refuses
// another), so a resubmitted shard gets the same runs.
//
// Each shard writes its own store next to the campaign's, <dir>/campaign.shard-<i>-of-<n>.db, and holds
// its own lock, <dir>/campaign.shard-<i>-of-<n>.lock; run folders and logs are shared (keys are distinct).
// `d2k campaign merge` (merge.hpp) combines the shard stores into <dir>/campaign.db.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/plan.hpp"

namespace d2k::campaign {

struct Shard {
  int index = 0;
  int count = 0;  // 0: the whole campaign, not a shard
  bool whole() const { return count == 0; }
  bool operator==(const Shard&) const = default;
};

// "I/N" with 0 <= I < N; an error names the text.
Shard parse_shard(std::string_view text);
std::string name_of(const Shard& shard);  // "shard 1 of 4"

// The runs shard `shard` drives (all of them for a whole campaign), in the plan's order.
std::vector<PlannedRun> shard_runs(const std::vector<PlannedRun>& runs, const Shard& shard);
// The tasks whose expert shard `shard` evaluates (all of them for a whole campaign).
std::vector<std::string> shard_experts(const std::vector<std::string>& tasks, const Shard& shard);
// The shard of each of `keys` (run keys, or task names for the experts), in their order.
std::vector<int> deal(const std::vector<std::string>& keys, int count);

// <dir>/campaign.shard-<i>-of-<n>.db and .lock.
std::filesystem::path shard_store(const std::filesystem::path& dir, const Shard& shard);
std::filesystem::path shard_lock(const std::filesystem::path& dir, const Shard& shard);

// The shard stores in a campaign's folder, by index. Names of shard stores of different counts are an
// error (a run's shard depends on the count), naming two of them.
struct ShardFile {
  Shard shard;
  std::filesystem::path file;
};
std::vector<ShardFile> find_shard_stores(const std::filesystem::path& dir);

}  // namespace d2k::campaign
