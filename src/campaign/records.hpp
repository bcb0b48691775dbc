// The campaign's records as plain data: what the store keeps and the report reads. A run folder holds the
// artifacts (transcript, sources, logs); these rows point at it and carry what the report aggregates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/plan.hpp"
#include "core/trace.hpp"

namespace d2k::campaign {

// pending: not started; running: started and not finished (after a kill: resumed from its transcript);
// finished: its final evaluation is stored; failed: d2k itself could not drive it (a harness error,
// retried on the next `d2k campaign run`).
enum class RunState { pending, running, finished, failed };
std::string_view name_of(RunState state);
RunState parse_run_state(std::string_view name);

struct RunRow {
  PlannedRun plan;
  RunState state = RunState::pending;
  std::string run_dir;       // absolute
  int attempts = 0;          // times a `d2k campaign run` started or resumed it
  std::string started, finished;
  std::string status;        // agent::RunStatus's name once finished
  std::string reason;
  bool passed = false;       // the final evaluation passed every workload (or a design was submitted)
  std::string solution;      // the evaluated folder in the run folder; empty when none
  int turns = 0;
  int64_t input_tokens = 0, cached_input_tokens = 0, output_tokens = 0;
  double cost_usd = 0, wall_seconds = 0;
  std::string error;         // why d2k failed it (state failed)
  bool operator==(const RunRow&) const = default;
};

// One model response of a run (the transcript's response records).
struct TurnUsage {
  int seq = 0;   // the record's line in transcript.jsonl
  int turn = 0;
  int64_t input_tokens = 0, cached_input_tokens = 0, cache_write_input_tokens = 0, output_tokens = 0;
  double cost_usd = 0, latency_seconds = 0;
  std::string time;
};

// final: the run's own final evaluation; rerun: its solution evaluated again after every run, one at a
// time (the published table); expert: the task's expert solution on the same workloads (the Performance
// Score's yardstick; its key is "expert/<task>").
enum class EvaluationKind { final, rerun, expert };
std::string_view name_of(EvaluationKind kind);
EvaluationKind parse_evaluation_kind(std::string_view name);

struct TraceRow {
  std::string workload;
  std::string status;
  std::optional<double> median_ms, ci_low_ms, ci_high_ms;
  std::optional<double> baseline_median_ms, baseline_ci_low_ms, baseline_ci_high_ms;
  std::optional<double> speedup, sol_fraction;
  std::optional<bool> throttled;   // cuda traces with clocks
  std::string clock_reasons;       // the throttle reasons seen, comma-separated
  std::string json;                // the whole trace (core/json.hpp)
  bool operator==(const TraceRow&) const = default;
};

TraceRow trace_row(const Trace& trace);

struct EvaluationRow {
  int64_t id = 0;
  std::string key;      // the run's, or "expert/<task>"
  std::string task;
  EvaluationKind kind = EvaluationKind::final;
  std::string solution;
  uint64_t seed = 0;
  std::string device;
  std::string created;
  bool passed = false;
  std::vector<TraceRow> traces;
  // The same evaluation, wherever it is stored (the row ids of two stores differ).
  bool same_as(const EvaluationRow& other) const;
};

// A judge's score of a run's design (design-only runs) or final code (src/judge writes these).
struct JudgeScore {
  std::string key;
  std::string kind;     // design | implementation
  std::string judge;    // the judging model
  double score = 0;
  std::optional<double> max_score;
  std::string items;    // JSON: per guidance item
  std::string created;
  std::string audit = "{}";  // JSON: the judge's audit summary of a solution (verdict, findings); {} for a design
  bool operator==(const JudgeScore&) const = default;
};

struct CampaignInfo {
  std::string name;
  std::string created;
  std::string plan_file;
  std::string plan_toml;
  std::string plan_json;
  std::string root;
  std::string device;
  std::string device_name;
  std::string language;  // what the agents write (cuda or triton, campaign/plan.hpp); stores before it: cuda
};

}  // namespace d2k::campaign
