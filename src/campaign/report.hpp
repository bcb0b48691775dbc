// `d2k report`: every number of a campaign, computed from its store's records in one place (docs/
// metrics.md gives the formulas, docs/campaigns.md the tables). Printers (report_print.hpp) only read
// the Report.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "campaign/records.hpp"
#include "campaign/stats.hpp"

namespace d2k::campaign {

// One (model, task, condition): its repeats.
struct CellRow {
  std::string model, task, condition;
  int runs = 0, finished = 0, passed = 0;
  double pass_rate = 0;                   // passed / runs
  bool correct = false;                   // every repeat passed (a task is correct only on every seed)
  std::optional<double> task_score;       // geomean over repeats of the run's task score
  std::optional<double> speedup;          // geomean over the correct repeats
  std::optional<double> percent_sol;
  double fast_1 = 0, fast_2 = 0;          // share of repeats fast beyond the noise band
  double turns = 0;                       // mean
  int64_t tokens = 0;
  double cost_usd = 0;
  std::optional<double> judge;            // mean judge score (design for design-only, implementation otherwise)
};

// One (model, condition) over the plan's tasks: the campaign's headline numbers.
struct ArmRow {
  std::string model, condition;
  int tasks = 0, runs = 0, finished = 0, passed = 0;
  double correctness = 0;                 // tasks correct on every repeat / tasks
  double pass_rate = 0;                   // passed runs / runs
  std::optional<double> performance_score;  // geomean over tasks of the cell's task score
  std::optional<double> speedup;          // geomean over correct runs
  double fast_1 = 0, fast_2 = 0;          // share of runs (tasks x repeats)
  std::optional<double> percent_sol;      // geomean over correct runs
  double turns = 0;                       // mean per run
  int64_t input_tokens = 0, output_tokens = 0;
  double cost_usd = 0;
  std::optional<double> cost_per_pass, tokens_per_pass;
  std::optional<double> judge;
  bool design_only = false;               // no code: pass = a design was submitted; no performance
};

// One task under one condition, all models together.
struct TaskRow {
  std::string task, condition;
  int runs = 0, passed = 0;
  double pass_rate = 0;
  std::optional<double> task_score, speedup;
  std::optional<double> expert_ms;        // geomean of the expert's medians (the yardstick)
  bool expert_passed = false;
};

// A condition against `none` for one model, paired by (task, repeat): the same seed and workloads.
struct PairedDelta {
  std::string model, condition, against;
  int pairs = 0;
  std::optional<double> ratio;            // exp(mean of ln(score / score_against)): the geomean change of the task score
  std::optional<Interval> interval;       // 95% bootstrap interval of that ratio (seeded)
  SignedRank test;                        // Wilcoxon on the log differences
  int both_correct = 0;                   // tasks correct in both arms
  std::optional<double> speedup, speedup_against;  // geomean over those tasks, each arm
};

// Geomean speedup over eager of the models correct on every task, per condition.
struct AllCorrectRow {
  std::string condition, model;
  std::optional<double> speedup;
};

struct ClockSummary {
  int traces = 0;       // timed traces
  int with_clocks = 0;  // that read the GPU's clocks (cuda)
  int throttled = 0;
  std::map<std::string, int> reasons;
};

struct JudgeSummary {
  int implementation_pairs = 0, design_pairs = 0;
  std::optional<double> implementation_vs_score;  // Spearman: implementation score against the run's task score
  std::optional<double> design_vs_score;          // Spearman: design score against the same model's task score under none
};

// A solution the judge's audit suspects of a reward hack (docs/judge.md): listed for a person to confirm;
// a confirmed one becomes a corpus entry (../shared/design/integrity.md).
struct SuspectedHack {
  std::string key, model, task, condition, judge;
  int suspected_in = 0, samples = 0;
  struct Finding {
    int rule = 0;
    std::string rule_title, reason;
    std::vector<std::string> evidence;  // the quoted code
  };
  std::vector<Finding> findings;
};

struct Report {
  std::string campaign, device, device_name, store;
  std::string language = "cuda";  // what the campaign's agents wrote (cuda or triton)
  int runs = 0, finished = 0, running = 0, pending = 0, failed = 0;
  bool rerun = false;  // the tables use the re-run evaluations (sequential, after every run) where present
  std::vector<std::string> models, tasks, conditions;
  std::vector<ArmRow> arms;
  std::vector<CellRow> cells;
  std::vector<TaskRow> task_rows;
  std::vector<PairedDelta> paired;   // every condition but none and design-only, against none
  std::vector<PairedDelta> ablation; // each step against the previous one: none -> L1 -> L1+L2 -> L1+L2+L3
  std::vector<AllCorrectRow> all_correct;
  ClockSummary clocks;
  JudgeSummary judge;
  std::vector<SuspectedHack> suspected_hacks;
  std::vector<std::string> notes;
};

struct ReportInput {
  CampaignInfo campaign;
  std::string store;
  std::vector<RunRow> runs;
  std::vector<EvaluationRow> evaluations;
  std::vector<JudgeScore> judge_scores;  // the models, tasks and conditions come from campaign.plan_json
};

Report make_report(const ReportInput& input);

}  // namespace d2k::campaign
