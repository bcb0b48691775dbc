#include "campaign/slurm.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <sstream>

#include "core/error.hpp"
#include "runner/process.hpp"

namespace d2k::campaign {

namespace fs = std::filesystem;

namespace {

// A value on an #SBATCH line: sbatch splits those lines itself, without a shell's quoting.
std::string directive_value(const std::string& what, const std::string& value) {
  if (value.empty() || value.find_first_of(" \t\n\"'%\\") != std::string::npos)
    fail("{} '{}': cannot be written on an #SBATCH line (it holds a space, a quote, a backslash or a '%'); "
         "use a path without them",
         what, value);
  return value;
}

std::string job_name(const std::string& campaign) {
  std::string out = "d2k-";
  for (char c : campaign) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return out;
}

}  // namespace

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string array_spec(const std::vector<int>& indices) {
  std::string out;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(indices[i]) : fmt::format("{}-{}", indices[i], indices[j]);
    i = j + 1;
  }
  return out;
}

std::string slurm_time(int minutes) {
  return fmt::format("{}-{:02}:{:02}:00", minutes / (24 * 60), (minutes / 60) % 24, minutes % 60);
}

int array_task_minutes(double minutes_per_run, int largest_shard_runs, int concurrent_runs) {
  const int waves = (largest_shard_runs + concurrent_runs - 1) / concurrent_runs;
  return static_cast<int>(std::ceil(minutes_per_run * (waves + 1)));
}

std::string sbatch_script(const SbatchJob& job) {
  if (job.array.empty()) fail("sbatch_script: no shards to submit");
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << fmt::format("# d2k campaign {}: shards {} of {}, one array task each (the task's id is its shard's index).\n",
                   job.campaign, array_spec(job.array), job.shards);
  s << "# Written by `d2k campaign submit --slurm`; the same command again resubmits the shards that did not\n"
       "# finish, and a resubmitted shard skips the runs its store holds finished (docs/campaigns.md).\n";
  s << fmt::format("#SBATCH --job-name={}\n", job_name(job.campaign));
  s << fmt::format("#SBATCH --array={}\n", array_spec(job.array));
  s << "#SBATCH --ntasks=1\n";
  if (job.gpus_per_task > 0) s << fmt::format("#SBATCH --gres=gpu:{}\n", job.gpus_per_task);
  if (job.cpus_per_task) s << fmt::format("#SBATCH --cpus-per-task={}\n", *job.cpus_per_task);
  if (job.time_minutes) s << fmt::format("#SBATCH --time={}\n", slurm_time(*job.time_minutes));
  if (!job.partition.empty()) s << fmt::format("#SBATCH --partition={}\n", directive_value("partition", job.partition));
  if (!job.account.empty()) s << fmt::format("#SBATCH --account={}\n", directive_value("account", job.account));
  s << fmt::format("#SBATCH --output={}/%A_%a.out\n", directive_value("the output folder", job.output.string()));
  for (const auto& option : job.options) {
    if (option.rfind("--", 0) != 0 || option.find('\n') != std::string::npos)
      fail("sbatch option '{}': must be one long option on one line, as --name=value", option);
    s << "#SBATCH " << option << "\n";
  }
  s << "set -euo pipefail\n";
  s << "# The task's GPUs are its own (Slurm binds them), so its device locks are too: on the node's disk, not in a\n"
       "# cache folder the nodes may share, where every node's shards would queue for one \"device 0\".\n";
  s << "locks=\"${TMPDIR:-/tmp}/d2k-locks-${SLURM_JOB_ID}\"\n";
  s << "trap 'rm -rf \"$locks\"' EXIT\n";
  s << fmt::format("echo \"d2k campaign {}: shard ${{SLURM_ARRAY_TASK_ID}} of {} on $(hostname), job ${{SLURM_JOB_ID}}\"\n",
                   job.campaign, job.shards);
  s << fmt::format("{} --root {} campaign run {} --dir {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{}\" --locks-dir \"$locks\" "
                   "--progress-seconds 60\n",
                   shell_quote(job.d2k.string()), shell_quote(job.root.string()), shell_quote(job.plan.string()),
                   shell_quote(job.dir.string()), job.shards);
  return s.str();
}

std::string parse_job_id(std::string_view output) {
  std::istringstream lines{std::string(output)};
  std::string line, id;
  while (std::getline(lines, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    const auto semicolon = line.find(';');
    const auto head = line.substr(0, semicolon);
    if (!head.empty() && head.find_first_not_of("0123456789") == std::string::npos) id = head;
  }
  if (id.empty()) fail("sbatch printed no job id: {}", output.empty() ? "(nothing)" : std::string(output));
  return id;
}

std::set<int> shards_in_queue(std::string_view output, const std::set<std::string>& jobs) {
  std::set<int> out;
  std::istringstream lines{std::string(output)};
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string job, task, state;
    if (!(fields >> job >> task >> state)) continue;
    if (!jobs.count(job) || task.empty() || task.find_first_not_of("0123456789") != std::string::npos) continue;
    out.insert(std::stoi(task));
  }
  return out;
}

std::string submit_array(const fs::path& script) {
  ProcessSpec spec;
  spec.argv = {"sbatch", "--parsable", script.string()};
  spec.timeout_seconds = 120;
  const auto result = run_process(spec);
  if (!result.ok()) fail("sbatch {}: {}: {}", script.string(), result.describe(), result.output);
  return parse_job_id(result.output);
}

std::set<int> active_shards(const std::set<std::string>& jobs, std::string* warning) {
  if (jobs.empty()) return {};
  ProcessSpec spec;
  // Every array task on its own line (-r), as array job id, task id and state.
  spec.argv = {"squeue", "-h", "-r", "-o", "%F %K %T"};
  spec.timeout_seconds = 60;
  const auto result = run_process(spec);
  if (!result.ok()) {
    if (warning) *warning = fmt::format("squeue: {}: {}", result.describe(), result.output);
    return {};
  }
  return shards_in_queue(result.output, jobs);
}

}  // namespace d2k::campaign
