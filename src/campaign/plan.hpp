// A campaign's plan (plan.toml): models x tasks x conditions x repeats, with the budget, the device, the
// workloads and the timing every run shares. Paired arms (the same model, task and repeat under each
// condition) get the same seed and the same workloads, so that the prompt's guidance is the only
// difference between them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/budget.hpp"
#include "agent/condition.hpp"
#include "core/device.hpp"
#include "runner/builder.hpp"

namespace d2k::campaign {

// One run of the plan. `key` names it everywhere: the store's rows, the run folder, the report.
struct PlannedRun {
  std::string key;  // <model>/<task>/<condition>/<repeat>
  std::string model;
  std::string task;
  agent::Condition condition = agent::Condition::none;
  int repeat = 0;   // 0-based
  uint64_t seed = 0;
  bool operator==(const PlannedRun&) const = default;
};

struct Timing {
  double max_seconds = 1.0;
  int min_samples = 0;  // 0: the device's default
  int warmup = 3;
  double worker_timeout_seconds = 120.0;
  bool baseline = true;
};

// `d2k campaign submit --slurm`'s settings (docs/campaigns.md, "On a Slurm cluster"); its flags override them.
struct SlurmSettings {
  std::optional<int> shards;                   // array tasks, each a shard of the plan (shard.hpp)
  std::optional<int> gpus_per_task;            // GPUs of each array task (--gres=gpu:N); default 1, 0 on the cpu device
  std::optional<int> cpus_per_task;            // not asked for when unset: the partition's default
  std::optional<double> minutes_per_run;       // one agent run's time; the array task's limit follows from it
  std::string partition, account;              // passed through when set
  std::vector<std::string> sbatch_options;     // more #SBATCH lines, each as written ("--qos=high")
};

struct Plan {
  std::filesystem::path file;         // absolute
  std::string text;                   // the file as written (kept in the store)
  std::string name;
  uint64_t seed = 1;                  // the campaign's; each (task, repeat) derives its own from it
  std::filesystem::path models_file;  // absolute; relative paths in the plan are relative to the plan
  std::vector<std::string> models;
  std::vector<std::string> tasks;
  std::vector<agent::Condition> conditions;
  int repeats = 1;
  std::string device = "auto";        // auto, cuda or cpu
  // What every agent run writes (campaign.language: cuda or triton, as `d2k agent --language`); none: the
  // device's default (agent::default_run_language). One language for the whole campaign, so paired arms
  // differ by their condition alone.
  std::optional<Language> language;
  std::string sandbox = "strict";
  std::map<std::string, std::vector<std::string>> workloads;  // per task; a task not named: every published workload
  agent::Budget budget;
  Timing timing;
  int concurrent_runs = 4;            // agent runs in flight at once, all endpoints together
  int per_endpoint = 2;               // agent runs in flight per model endpoint (base_url)
  bool rerun = true;                  // after the runs, each run's solution again, one at a time (the published table)
  SlurmSettings slurm;

  // Every run of the plan, in a fixed order (model, task, condition, repeat).
  std::vector<PlannedRun> runs() const;
};

// Reads and checks plan.toml. Every error names the file, the line, the field and the value:
// `plan.toml:4: campaign.repeats = 0: must be at least 1`.
Plan load_plan(const std::filesystem::path& file);
// The same from a plan's text (a store keeps it), as if read from `file`: relative paths resolve against it.
Plan parse_plan(const std::string& text, const std::filesystem::path& file);

// The language of the campaign's runs on `device` (the device campaign.device resolved to on this machine):
// campaign.language, else the device's default. Triton on the cpu device is refused, naming the plan file,
// campaign.language and campaign.device.
Language campaign_language(const Plan& plan, Device device);

// The seed of the runs of `task`'s `repeat`: the same under every condition and every model.
uint64_t paired_seed(uint64_t campaign_seed, const std::string& task, int repeat);

// The plan's settings as JSON (the store keeps them beside the text).
nlohmann::json plan_json(const Plan& plan);

// A key as a folder name: `/` and `+` kept readable, anything else outside [A-Za-z0-9._-] as `_`.
std::string folder_of(const std::string& key);

}  // namespace d2k::campaign
