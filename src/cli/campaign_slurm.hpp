// `d2k campaign submit --slurm PLAN` and `d2k campaign merge CAMPAIGN` (docs/campaigns.md, "On a Slurm
// cluster"): a campaign as a Slurm job array of shards, and the shards' stores merged into one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "campaign/shard.hpp"
#include "cli/commands.hpp"

namespace d2k {

struct SubmitOptions {
  std::string plan;
  std::string dir;
  bool slurm = false;
  bool dry_run = false;
  std::optional<int> shards, gpus_per_task, cpus_per_task;
  std::optional<double> minutes_per_run;
  std::string time;  // the array task's limit as Slurm writes it, instead of the one from minutes per run
  std::string partition, account;
  std::vector<std::string> sbatch_options;
};

struct MergeOptions {
  std::string campaign;             // its folder or name
  std::vector<std::string> stores;  // shard stores; default: every campaign.shard-*-of-*.db in its folder
  std::string into;                 // default: <folder>/campaign.db
};

// A campaign's folder runs either as one campaign (campaign.db) or as shards of one count: `d2k campaign
// run` without --shard in a folder of shard stores, a shard of another count, or a shard beside a
// campaign.db that a run on one machine (not a merge) wrote, is refused, naming the folder or file.
void check_campaign_mode(const std::filesystem::path& dir, const campaign::Shard& shard);

CLI::App* add_submit_command(CLI::App& campaign, SubmitOptions& options);
CLI::App* add_merge_command(CLI::App& campaign, MergeOptions& options);
// 0: submitted (or nothing left to submit), 2: bad usage or sbatch refused.
int submit_command(const SubmitOptions& options, const GlobalOptions& global);
// 0: merged, and every run of the plan is finished in the merged store with its experts and re-runs;
// 1: merged, but shards are missing or work unfinished (the report covers what finished); 2: refused,
// nothing written.
int merge_command(const MergeOptions& options, const GlobalOptions& global);

}  // namespace d2k
