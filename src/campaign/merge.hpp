// `d2k campaign merge`: the shard stores of a campaign submitted to Slurm (shard.hpp) combined into one
// store, <dir>/campaign.db, which `d2k report` and `d2k campaign status` read as they read a campaign run
// on one machine. The stores must be shards of one plan (the same plan text, shard count and device);
// anything else is refused before a row is written, naming the file. Merging again after more of the
// shards finished brings the merged store up to date; merging the same stores twice changes nothing.
#pragma once

#include <filesystem>
#include <vector>

#include "campaign/shard.hpp"
#include "campaign/store.hpp"

namespace d2k::campaign {

struct MergeResult {
  std::filesystem::path target;
  int shards = 0;                          // the plan's shard count
  std::vector<ShardFile> merged;           // the shard stores merged, by index
  std::vector<ShardFile> empty;            // shard stores of a shard that stopped before it recorded its plan
  std::vector<int> missing;                // shards without a store
  MergeCounts counts;
  int runs = 0, finished = 0;              // in the merged store, after the merge
  int evaluations_left = 0;                // experts and re-runs the merged shards still owe
  bool complete() const { return missing.empty() && finished == runs && evaluations_left == 0; }
};

// Where one shard stands, from its store: what is left to do (runs not finished, and the experts and
// re-runs a finished shard still owes). A shard without a store has all of it left.
struct ShardProgress {
  bool started = false;       // its store holds the campaign
  int runs = 0, finished = 0, failed = 0;
  int left = 0;               // runs, experts and re-runs still to do
  int evaluations_left = 0;   // of those, the experts and re-runs
  bool done() const { return started && left == 0; }
};
// `plan` must be the store's (its text); another is refused, naming the store.
ShardProgress shard_progress(const std::filesystem::path& store, const Plan& plan, const Shard& shard);

// Merges `stores` (shard stores; a file named twice counts once) into `target` (created when absent).
MergeResult merge_shards(const std::filesystem::path& target, const std::vector<std::filesystem::path>& stores);

}  // namespace d2k::campaign
