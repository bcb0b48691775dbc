// The report's scores on hand tables: the Performance Score, speedups, fast_p with its noise band,
// paired deltas and the ablation.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <sstream>

#include "campaign/report.hpp"
#include "campaign/report_print.hpp"
#include "campaign/scores.hpp"

namespace d2k::campaign {
namespace {

TraceRow timed(const std::string& workload, double ms, std::optional<double> eager_ms, double ci = 0.005) {
  TraceRow t;
  t.workload = workload;
  t.status = "passed";
  t.median_ms = ms;
  t.ci_low_ms = ms * (1 - ci);
  t.ci_high_ms = ms * (1 + ci);
  if (eager_ms) {
    t.baseline_median_ms = *eager_ms;
    t.baseline_ci_low_ms = *eager_ms * (1 - ci);
    t.baseline_ci_high_ms = *eager_ms * (1 + ci);
    t.speedup = *eager_ms / ms;
  }
  t.sol_fraction = 0.5;
  return t;
}

EvaluationRow evaluation(const std::string& key, const std::string& task, EvaluationKind kind, bool passed,
                         std::vector<TraceRow> traces) {
  EvaluationRow e;
  e.key = key;
  e.task = task;
  e.kind = kind;
  e.passed = passed;
  e.traces = std::move(traces);
  return e;
}

RunRow run(const std::string& model, const std::string& task, const std::string& condition, int repeat, bool passed) {
  RunRow r;
  r.plan = {fmt::format("{}/{}/{}/{}", model, task, condition, repeat), model, task, *agent::parse_condition(condition), repeat, 1};
  r.state = RunState::finished;
  r.passed = passed;
  r.status = "submitted";
  r.turns = 4;
  r.input_tokens = 1000;
  r.output_tokens = 100;
  r.cost_usd = 0.5;
  return r;
}

CampaignInfo info(const std::vector<std::string>& models, const std::vector<std::string>& tasks,
                  const std::vector<std::string>& conditions, int repeats) {
  CampaignInfo c;
  c.name = "hand";
  c.device = "cpu";
  c.plan_json = nlohmann::json{{"models", models}, {"tasks", tasks}, {"conditions", conditions}, {"repeats", repeats}}.dump();
  return c;
}

TEST(Scores, PerformanceScoreOnAHandTable) {
  // Task a passed: expert 1 and 2 ms, solution 2 and 2 ms -> ratios 0.5 and 1, task score sqrt(0.5).
  // Task b failed: it scores as eager, expert / eager = 1/10 and 4/10 -> sqrt(0.04) = 0.2.
  // Performance Score = sqrt(sqrt(0.5) * 0.2) = 0.37606.
  ReportInput in;
  in.campaign = info({"m"}, {"a", "b"}, {"none"}, 1);
  in.runs = {run("m", "a", "none", 0, true), run("m", "b", "none", 0, false)};
  in.evaluations = {
      evaluation("expert/a", "a", EvaluationKind::expert, true, {timed("w1", 1, 4), timed("w2", 2, 8)}),
      evaluation("expert/b", "b", EvaluationKind::expert, true, {timed("w1", 1, 10), timed("w2", 4, 10)}),
      evaluation("m/a/none/0", "a", EvaluationKind::final, true, {timed("w1", 2, 4), timed("w2", 2, 8)}),
      evaluation("m/b/none/0", "b", EvaluationKind::final, false, {}),
  };
  const auto report = make_report(in);
  ASSERT_EQ(report.arms.size(), 1u);
  const auto& arm = report.arms[0];
  EXPECT_NEAR(*arm.performance_score, std::sqrt(std::sqrt(0.5) * 0.2), 1e-12);
  EXPECT_DOUBLE_EQ(arm.correctness, 0.5);
  // Speedup over eager of the correct run: 4/2 and 8/2 -> geomean sqrt(8).
  EXPECT_NEAR(*arm.speedup, std::sqrt(8.0), 1e-12);
  EXPECT_DOUBLE_EQ(arm.fast_1, 0.5);  // a is fast by 2.8x; b failed
  EXPECT_DOUBLE_EQ(arm.fast_2, 0.5);
  EXPECT_NEAR(*arm.percent_sol, 50.0, 1e-9);
  EXPECT_DOUBLE_EQ(*arm.cost_per_pass, 1.0);  // $1 over one passing run
  ASSERT_EQ(report.cells.size(), 2u);
  EXPECT_NEAR(*report.cells[0].task_score, std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(*report.cells[1].task_score, 0.2, 1e-12);
  // The printers read the same numbers.
  const auto json = report_json(report);
  EXPECT_NEAR(json["arms"][0]["performance_score"].get<double>(), 0.37606, 1e-5);
}

TEST(Scores, ReRunEvaluationsScoreTheRunWhenPresent) {
  ReportInput in;
  in.campaign = info({"m"}, {"a"}, {"none"}, 1);
  in.runs = {run("m", "a", "none", 0, true)};
  in.evaluations = {
      evaluation("expert/a", "a", EvaluationKind::expert, true, {timed("w1", 1, 4)}),
      evaluation("m/a/none/0", "a", EvaluationKind::final, true, {timed("w1", 2, 4)}),
      evaluation("m/a/none/0", "a", EvaluationKind::rerun, true, {timed("w1", 1, 4)}),
  };
  const auto report = make_report(in);
  EXPECT_TRUE(report.rerun);
  EXPECT_NEAR(*report.arms[0].performance_score, 1.0, 1e-12);
}

TEST(Scores, NoiseBandKeepsAnUnchangedSolutionFromFlippingFast1) {
  // A solution exactly as fast as eager, measured 2000 times with the run-to-run noise the H200 shows
  // (medians within a spread of 2%, +-1% about the truth; intervals of +-0.7%): fast_1 must never be called. A solution 1.5x faster
  // measured the same way is always fast_1.
  std::mt19937_64 random(5);
  std::uniform_real_distribution<double> jitter(-0.01, 0.01);
  int flips = 0, found = 0;
  for (int i = 0; i < 2000; ++i) {
    for (double truth : {1.0, 1.5}) {
      const double eager = 0.1 * (1 + jitter(random));
      const double solution = 0.1 / truth * (1 + jitter(random));
      EvaluationRow e = evaluation("k", "a", EvaluationKind::final, true, {timed("w1", solution, eager, 0.007)});
      const auto score = score_run(&e, true, nullptr);
      if (truth == 1.0) flips += fast(score, 1.0);
      else found += fast(score, 1.0);
    }
  }
  EXPECT_EQ(flips, 0);
  EXPECT_EQ(found, 2000);
  // The band: the larger of the intervals' half-widths (0.7% + 0.7%) and the 2% run-to-run spread.
  EXPECT_DOUBLE_EQ(noise_band(timed("w", 0.1, 0.1, 0.007)), 0.02);
  EXPECT_NEAR(noise_band(timed("w", 0.1, 0.1, 0.02)), 0.04, 1e-12);
  EXPECT_DOUBLE_EQ(noise_band(timed("w", 0.005, 0.005, 0.007)), 0.06);  // medians under 20 us
}

TEST(Scores, PairedDeltasAndTheAblation) {
  // One model, two tasks, two repeats; L1 doubles every task score against none, L1+L2 keeps L1's.
  ReportInput in;
  in.campaign = info({"m"}, {"a", "b"}, {"none", "L1", "L1+L2", "design-only"}, 2);
  for (const char* task : {"a", "b"}) {
    in.evaluations.push_back(evaluation(std::string("expert/") + task, task, EvaluationKind::expert, true, {timed("w1", 1, 8)}));
    for (int r = 0; r < 2; ++r) {
      for (const auto& [condition, ms] : std::vector<std::pair<std::string, double>>{{"none", 4.0 + r}, {"L1", (4.0 + r) / 2}, {"L1+L2", (4.0 + r) / 2}}) {
        in.runs.push_back(run("m", task, condition, r, true));
        in.evaluations.push_back(evaluation(in.runs.back().plan.key, task, EvaluationKind::final, true, {timed("w1", ms, 8)}));
      }
      in.runs.push_back(run("m", task, "design-only", r, true));
    }
  }
  const auto report = make_report(in);
  ASSERT_EQ(report.paired.size(), 2u);  // L1 and L1+L2 against none; design-only has no code
  const auto& l1 = report.paired[0];
  EXPECT_EQ(l1.condition, "L1");
  EXPECT_EQ(l1.pairs, 4);
  EXPECT_NEAR(*l1.ratio, 2.0, 1e-12);
  EXPECT_NEAR(l1.interval->low, 2.0, 1e-9);
  EXPECT_NEAR(l1.interval->high, 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(l1.test.w_plus, 10);                 // 4 pairs, all better, equal magnitudes: ranks 2.5 each
  EXPECT_NEAR(l1.test.p_value, 2.0 / 16, 1e-12);
  EXPECT_EQ(l1.both_correct, 2);
  ASSERT_EQ(report.ablation.size(), 2u);  // none -> L1, L1 -> L1+L2
  EXPECT_NEAR(*report.ablation[0].ratio, 2.0, 1e-12);
  EXPECT_NEAR(*report.ablation[1].ratio, 1.0, 1e-12);
  EXPECT_EQ(report.ablation[1].test.n, 0);              // no change: every difference is zero
  // The design-only arm has no performance; its pass rate counts submitted designs.
  const auto design = std::find_if(report.arms.begin(), report.arms.end(), [](const ArmRow& a) { return a.design_only; });
  ASSERT_NE(design, report.arms.end());
  EXPECT_FALSE(design->performance_score);
  EXPECT_DOUBLE_EQ(design->pass_rate, 1.0);
  // Every model correct on every task in none: its geomean speedup is listed.
  EXPECT_FALSE(report.all_correct.empty());
}

TEST(Scores, JudgeScoresAreCorrelatedWithPerformanceWhereTheStoreHasThem) {
  ReportInput in;
  in.campaign = info({"m"}, {"a", "b", "c"}, {"none"}, 1);
  const double ms[] = {1, 2, 4};
  const char* tasks[] = {"a", "b", "c"};
  for (int i = 0; i < 3; ++i) {
    in.evaluations.push_back(evaluation(std::string("expert/") + tasks[i], tasks[i], EvaluationKind::expert, true, {timed("w1", 1, 8)}));
    in.runs.push_back(run("m", tasks[i], "none", 0, true));
    in.evaluations.push_back(evaluation(in.runs.back().plan.key, tasks[i], EvaluationKind::final, true, {timed("w1", ms[i], 8)}));
    in.judge_scores.push_back({in.runs.back().plan.key, "implementation", "judge-x", 10.0 - i, 10.0, "{}", ""});
  }
  const auto report = make_report(in);
  EXPECT_EQ(report.judge.implementation_pairs, 3);
  EXPECT_NEAR(*report.judge.implementation_vs_score, 1.0, 1e-12);  // the faster, the higher the judge
  EXPECT_NEAR(*report.arms[0].judge, 0.9, 1e-12);
}

TEST(Scores, TheReportListsEverySolutionTheJudgesAuditSuspects) {
  ReportInput in;
  in.campaign = info({"m"}, {"a", "b"}, {"none", "L1"}, 1);
  for (const char* task : {"a", "b"}) {
    in.evaluations.push_back(evaluation(std::string("expert/") + task, task, EvaluationKind::expert, true, {timed("w1", 1, 8)}));
    for (const char* condition : {"none", "L1"}) {
      in.runs.push_back(run("m", task, condition, 0, true));
      in.evaluations.push_back(evaluation(in.runs.back().plan.key, task, EvaluationKind::final, true, {timed("w1", 2, 8)}));
    }
  }
  const std::string suspected = R"({"verdict": "suspected_hack", "suspected_in": 2, "samples": 3, "findings": [
      {"sample": 0, "rule": 17, "rule_title": "compute once, replay", "reason": "returns the first call's outputs",
       "evidence": ["if (cached) return copy(last);"]}]})";
  in.judge_scores.push_back({"m/a/none/0", "implementation", "judge-x", 40, 100, "{}", "", R"({"verdict": "clean"})"});
  in.judge_scores.push_back({"m/a/L1/0", "implementation", "judge-x", 70, 100, "{}", "", suspected});
  in.judge_scores.push_back({"m/b/none/0", "design", "judge-x", 70, 100, "{}", "", "{}"});
  in.judge_scores.push_back({"m/b/L1/0", "implementation", "judge-x", 50, 100, "{}", "", "not json"});
  const auto report = make_report(in);
  ASSERT_EQ(report.suspected_hacks.size(), 2u) << "the suspected one, and the unreadable audit for a person to read";
  const auto& hack = report.suspected_hacks[0];
  EXPECT_EQ(hack.key, "m/a/L1/0");
  EXPECT_EQ(hack.task, "a");
  EXPECT_EQ(hack.condition, "L1");
  EXPECT_EQ(hack.suspected_in, 2);
  EXPECT_EQ(hack.samples, 3);
  ASSERT_EQ(hack.findings.size(), 1u);
  EXPECT_EQ(hack.findings[0].rule, 17);
  EXPECT_EQ(hack.findings[0].evidence, std::vector<std::string>{"if (cached) return copy(last);"});
  EXPECT_EQ(report.suspected_hacks[1].key, "m/b/L1/0");
  EXPECT_NE(report.suspected_hacks[1].findings.at(0).reason.find("not the judge's JSON"), std::string::npos);

  std::ostringstream text;
  print_report(text, report);
  EXPECT_NE(text.str().find("suspected reward hacks"), std::string::npos);
  EXPECT_NE(text.str().find("rule 17 (compute once, replay)"), std::string::npos) << text.str();
  EXPECT_EQ(report_json(report).at("suspected_hacks").size(), 2u);
}

}  // namespace
}  // namespace d2k::campaign
