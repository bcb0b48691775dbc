// `d2k campaign run`: drives every run of a plan to its end and records it in the store. Agent runs go
// on concurrently in this process (threads; the agent loop of src/agent, started or resumed from its
// transcript), as many at once as the schedule allows per endpoint; their evaluations share the device
// through its lock. Before the runs, each task's expert is evaluated once (the Performance Score's
// yardstick); after them, each run's solution again, one at a time (the re-run the report publishes).
//
// Killed at any point and started again, it never redoes a finished run, resumes an interrupted one
// from its transcript, and loses nothing the store recorded: each record is one transaction.
#pragma once

#include <filesystem>
#include <map>
#include <ostream>
#include <string>

#include "agent/run_types.hpp"
#include "campaign/plan.hpp"
#include "campaign/shard.hpp"
#include "campaign/store.hpp"
#include "core/task.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"
#include "llm/model_config.hpp"

namespace d2k::campaign {

// Where a campaign lives: <dir>/campaign.db (the store), runs/<key>/ (run folders), logs/<key>.log (each
// run's console), campaign.lock (held by the process that drives it), device-holds.jsonl (every hold of
// the device lock, device_locks.hpp's journal). A shard (shard.hpp) has its own store and lock beside
// those, campaign.shard-<i>-of-<n>.db and .lock, and shares the rest.
struct CampaignPaths {
  std::filesystem::path dir;
  Shard shard;  // whole by default
  std::filesystem::path store() const { return shard.whole() ? dir / "campaign.db" : shard_store(dir, shard); }
  std::filesystem::path runs() const { return dir / "runs"; }
  std::filesystem::path logs() const { return dir / "logs"; }
  std::filesystem::path lock() const { return shard.whole() ? dir / "campaign.lock" : shard_lock(dir, shard); }
  std::filesystem::path holds() const { return dir / "device-holds.jsonl"; }
  std::filesystem::path run_dir(const std::string& key) const;
  std::filesystem::path log(const std::string& key) const;
};

struct CampaignSetup {
  Plan plan;
  CampaignPaths paths;
  std::map<std::string, Task> tasks;                 // every task of the plan, loaded
  std::map<std::string, llm::ModelConfig> models;    // the plan's models file
  EvalEnvironment environment;                       // the device; its lock is set by the runner
  EvalSettings eval;                                 // the runs' timing, timeouts and tier
  std::filesystem::path locks_dir;                   // the machine's device locks (shared by campaigns)
  std::string root;                                  // the d2k tree
  std::ostream* out = nullptr;                       // progress
  double progress_seconds = 10;                      // a summary line this often
};

struct CampaignOutcome {
  int runs = 0, finished = 0, failed = 0, passed = 0;
};

// The settings of a planned run started fresh: the plan's budget, timing, workloads and sandbox, the run's
// seed, the campaign's language, the device.
agent::RunSettings planned_run_settings(const Plan& plan, const PlannedRun& run, Language language,
                                       const EvalEnvironment& environment, const std::string& root,
                                       const llm::ModelConfig& model);

// Throws d2k::Error when the campaign is driven by another process (its lock is held).
CampaignOutcome run_campaign(CampaignSetup& setup);

// Holds <dir>/campaign.lock for the object's life; `who` reads the pid of the process holding it
// (nothing when none: the campaign is not being driven).
class CampaignLock {
 public:
  explicit CampaignLock(const std::filesystem::path& file);
  ~CampaignLock();
  CampaignLock(const CampaignLock&) = delete;
  CampaignLock& operator=(const CampaignLock&) = delete;
  static std::optional<long> holder(const std::filesystem::path& file);

 private:
  int fd_ = -1;
};

}  // namespace d2k::campaign
