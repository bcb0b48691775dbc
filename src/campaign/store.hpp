// The campaign's store: one SQLite file (WAL) per campaign, with a versioned schema migrated forward on
// open. Every write is one transaction, so a kill -9 at any point leaves either all of a write or none
// of it. One Store may be shared by threads (its connection is serialized by a mutex); readers in other
// processes (`d2k campaign status`) open their own.
//
// Tables (schema version 4): schema_version, campaign (one row: the plan's text and settings, the device
// and the language its agents write), plan (a row per planned run), run (its state and totals; points at
// its run folder), turn_usage (a row per model response), evaluation and trace (final, rerun and expert
// evaluations, a row per workload), judge_score (written by the judge, src/judge; empty until it runs),
// shard (a shard store's shard of the plan, shard.hpp), merged_shard (the shard stores `d2k campaign
// merge` combined into this one).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "campaign/records.hpp"
#include "campaign/shard.hpp"
#include "campaign/sqlite.hpp"

namespace d2k::campaign {

struct UsageTotals {
  int64_t responses = 0;
  int64_t input_tokens = 0, cached_input_tokens = 0, output_tokens = 0;
  double cost_usd = 0;
};

// Everything a store holds, read in one snapshot (a shard may be writing it): what a merge copies.
struct StoreContents {
  std::string file;
  std::optional<Shard> shard;
  std::optional<CampaignInfo> campaign;
  std::vector<RunRow> runs;
  std::map<std::string, std::vector<TurnUsage>> turns;  // by run key
  std::vector<EvaluationRow> evaluations;
  std::vector<JudgeScore> judge_scores;
};

// What a merge changed in the merged store; everything else was there already.
struct MergeCounts {
  int runs_updated = 0, runs_unchanged = 0;
  int evaluations_added = 0, evaluations_unchanged = 0;
  int turns_added = 0, judge_scores_added = 0;
};

// A shard store merged into this one: when, and what it held then.
struct MergedShard {
  Shard shard;
  std::string file, merged;
  int runs = 0, finished = 0;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 4;

  // Opens the store (creating it), applying every migration above its version in one transaction each.
  // A store written by a newer d2k (a version above kSchemaVersion) is refused, naming the file.
  explicit Store(const std::filesystem::path& file);

  int schema_version();
  const std::string& file() const { return db_.file(); }

  // The campaign's row and its plan's rows. A store that already holds a campaign must hold this one:
  // another plan text is refused (the error names both files), so that finished runs are never mixed
  // with another experiment's. Planned runs already present are kept as they are.
  void init(const CampaignInfo& info, const std::vector<PlannedRun>& runs);
  std::optional<CampaignInfo> campaign();
  void set_device(const std::string& device, const std::string& device_name);

  std::vector<RunRow> runs();
  std::optional<RunRow> run(const std::string& key);
  // The run is being driven now (started or resumed): its folder, the time, one more attempt.
  void mark_running(const std::string& key, const std::string& run_dir, const std::string& time);
  // The run ended: its totals, its final evaluation and the usage of every response, together.
  void finish_run(const RunRow& row, const EvaluationRow& final, const std::vector<TurnUsage>& turns);
  void fail_run(const std::string& key, const std::string& error, const std::string& time);

  // Responses as they happen (idempotent: a row per transcript line).
  void record_turns(const std::string& key, const std::vector<TurnUsage>& turns);
  std::vector<TurnUsage> turns(const std::string& key);
  UsageTotals usage_totals();

  // Replaces the evaluation of the same key and kind; returns its id.
  int64_t put_evaluation(const EvaluationRow& evaluation);
  std::vector<EvaluationRow> evaluations();
  bool has_evaluation(const std::string& key, EvaluationKind kind);

  void put_judge_score(const JudgeScore& score);
  std::vector<JudgeScore> judge_scores();

  // The shard of the plan this store holds (shard.hpp), recorded by the first `d2k campaign run --shard`.
  // Refused, naming the file: another shard of it, a whole campaign's store (or a merged one) given a
  // shard, a shard store given the whole campaign.
  void set_shard(const Shard& shard);
  std::optional<Shard> shard();

  // Merging shard stores (merge.hpp): this store's contents in one read, and the shards' contents
  // absorbed in one transaction. A run is taken from its shard unless this store has it finished: then
  // the shard's must be the same, or the merge is refused (naming the shard's file and the run) and
  // nothing is written. Evaluations and turn usage rows are added when missing and must otherwise be the
  // same; a judge score is the later of the two. Absorbing the same contents again changes nothing.
  StoreContents contents();
  // `info` and `runs` as for init (the campaign's row and every run of its plan), in the same transaction.
  MergeCounts absorb(const CampaignInfo& info, const std::vector<PlannedRun>& runs,
                     const std::vector<StoreContents>& shards, const std::string& time);
  std::vector<MergedShard> merged_shards();

 private:
  void migrate();
  void init_locked(const CampaignInfo& info, const std::vector<PlannedRun>& runs);
  std::optional<CampaignInfo> campaign_locked();
  std::vector<RunRow> runs_locked();
  std::vector<TurnUsage> turns_locked(const std::string& key);
  std::vector<EvaluationRow> evaluations_locked();
  std::vector<JudgeScore> judge_scores_locked();
  std::optional<Shard> shard_locked();
  void absorb_run(const StoreContents& shard, const RunRow& run, std::map<std::string, RunRow>& targets,
                  MergeCounts& counts);
  int64_t put_evaluation_locked(const EvaluationRow& evaluation);
  void record_turns_locked(const std::string& key, const std::vector<TurnUsage>& turns);

  std::mutex mutex_;
  sql::Database db_;
};

}  // namespace d2k::campaign
