// `d2k campaign submit --slurm`: a campaign as a Slurm job array, one array task per shard of the plan
// (shard.hpp; the array task's id is its shard's index). The script each task runs is `d2k campaign run
// PLAN --shard I/N`, which writes the shard's store, resumes what a killed or timed-out task left, and
// skips what it finished. Writing the script is pure (sbatch_script); sbatch and squeue are run by
// submit_array and active_shards.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace d2k::campaign {

struct SbatchJob {
  std::string campaign;                // its name: the job's name is d2k-<campaign>
  int shards = 1;                      // the plan's shard count: each task runs --shard <task id>/<shards>
  std::vector<int> array;              // the shards this submission runs, ascending
  int gpus_per_task = 0;               // --gres=gpu:N per array task; 0: none asked for
  std::optional<int> cpus_per_task;    // none: the partition's default
  std::optional<int> time_minutes;     // --time per array task; none: the partition's default
  std::string partition, account;      // passed through when set
  std::vector<std::string> options;    // more #SBATCH lines, as written ("--qos=high")
  std::filesystem::path d2k;           // the d2k program (absolute)
  std::filesystem::path root;          // the d2k tree (--root)
  std::filesystem::path plan;          // the plan (absolute)
  std::filesystem::path dir;           // the campaign's folder (absolute)
  std::filesystem::path output;        // the tasks' console: <output>/<job>_<task>.out
};

// The whole sbatch script. Paths in #SBATCH lines cannot be quoted, so one holding a space, a quote or
// a '%' is an error naming it; the command line quotes every path.
std::string sbatch_script(const SbatchJob& job);

// "0-2,5,7-8": a Slurm --array list of ascending indices.
std::string array_spec(const std::vector<int>& indices);
// 'text' for a POSIX shell, quotes inside escaped.
std::string shell_quote(std::string_view text);
// Slurm's D-HH:MM:SS from minutes.
std::string slurm_time(int minutes);
// An array task's limit: the waves of runs of the largest shard (runs / concurrency.runs, rounded up),
// plus one wave for the experts and the re-runs, each `minutes_per_run` long; whole minutes.
int array_task_minutes(double minutes_per_run, int largest_shard_runs, int concurrent_runs);
// The job id in what `sbatch --parsable` printed ("1234" or "1234;cluster"); an error quotes the text.
std::string parse_job_id(std::string_view sbatch_output);
// The shards among `jobs`' array tasks that are queued or running, from `squeue -h -r -o "%F %K %T"`'s
// output (array job id, array task id, state).
std::set<int> shards_in_queue(std::string_view squeue_output, const std::set<std::string>& jobs);

// Runs `sbatch --parsable SCRIPT` and returns the job id; an error carries sbatch's output.
std::string submit_array(const std::filesystem::path& script);
// The shards of `jobs` that Slurm still holds as pending or running (squeue); nothing when squeue
// cannot say (then `warning` is set): the shard's lock still keeps two tasks off one shard.
std::set<int> active_shards(const std::set<std::string>& jobs, std::string* warning);

}  // namespace d2k::campaign
