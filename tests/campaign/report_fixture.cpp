#include "report_fixture.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <random>

#include "campaign/store.hpp"
#include "core/error.hpp"

namespace d2k::campaign::testing {
namespace {

TraceRow timed(const std::string& workload, double ms, double eager_ms) {
  TraceRow t;
  t.workload = workload;
  t.status = "passed";
  t.median_ms = ms;
  t.ci_low_ms = ms * 0.995;
  t.ci_high_ms = ms * 1.005;
  t.baseline_median_ms = eager_ms;
  t.baseline_ci_low_ms = eager_ms * 0.995;
  t.baseline_ci_high_ms = eager_ms * 1.005;
  t.speedup = eager_ms / ms;
  t.sol_fraction = 0.1 * eager_ms / ms;
  t.json = "{}";
  return t;
}

}  // namespace

ReportInput hand_campaign() {
  const std::vector<std::string> models = {"expert", kOddModel};
  const std::vector<std::string> tasks = {"act/silu_and_mul", "moe/topk_softmax", "norm/rms_norm"};
  const std::vector<std::string> conditions = {"none", "L1", "L1+L2", "L1+L2+L3", "design-only"};
  const int repeats = 2;
  ReportInput in;
  in.campaign.name = "html<&>";
  in.campaign.created = "2026-12-02T16:00:00Z";
  in.campaign.plan_file = "plan.toml";
  in.campaign.plan_toml = "# hand campaign (tests/campaign/report_fixture.cpp)\n";
  in.campaign.plan_json = nlohmann::json{{"models", models}, {"tasks", tasks}, {"conditions", conditions}, {"repeats", repeats}}.dump();
  in.campaign.device = "cpu";
  in.campaign.device_name = "hand";
  in.store = "campaign.db";

  std::mt19937_64 random(16);
  std::uniform_real_distribution<double> noise(0.8, 1.25);
  const std::vector<double> eager = {0.40, 0.25, 0.90};   // ms, one workload per task and a second at 3x
  const std::vector<double> expert = {0.10, 0.08, 0.30};
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    EvaluationRow e;
    e.key = "expert/" + tasks[t];
    e.task = tasks[t];
    e.kind = EvaluationKind::expert;
    e.passed = true;
    e.traces = {timed("small", expert[t], eager[t]), timed("large", 3 * expert[t], 3 * eager[t])};
    in.evaluations.push_back(e);
  }
  for (std::size_t m = 0; m < models.size(); ++m)
    for (std::size_t c = 0; c < conditions.size(); ++c)
      for (std::size_t t = 0; t < tasks.size(); ++t)
        for (int r = 0; r < repeats; ++r) {
          RunRow run;
          const auto key = fmt::format("{}/{}/{}/{}", models[m], tasks[t], conditions[c], r);
          run.plan = {key, models[m], tasks[t], *agent::parse_condition(conditions[c]), r, 100 + static_cast<uint64_t>(r)};
          run.started = "2026-12-02T16:01:00Z";
          run.finished = "2026-12-02T16:02:00Z";
          run.attempts = 1;
          // The odd model's last L1+L2+L3 run of the last task: a harness failure.
          if (m == 1 && conditions[c] == "L1+L2+L3" && t == 2 && r == 1) {
            run.state = RunState::failed;
            run.error = "worker <crashed> & \"lost\"";
            in.runs.push_back(run);
            continue;
          }
          run.state = RunState::finished;
          run.status = "submitted";
          run.turns = 3 + static_cast<int>(c) + r;
          run.input_tokens = 10000 + 1000 * static_cast<int64_t>(t + c);
          run.output_tokens = 800 + 100 * static_cast<int64_t>(m + r);
          run.cost_usd = 0.01 * static_cast<double>(run.input_tokens) / 1000;
          const bool design = conditions[c] == "design-only";
          // The weak model fails every task's first repeat under none; guidance makes both faster.
          run.passed = design || !(m == 1 && conditions[c] == "none" && r == 0);
          run.solution = design ? "" : "solution";
          if (!design) {
            EvaluationRow e;
            e.key = key;
            e.task = tasks[t];
            e.kind = EvaluationKind::final;
            e.passed = run.passed;
            const double speed = (m == 0 ? 0.6 : 0.35) * (1 + 0.25 * static_cast<double>(c)) * noise(random);
            if (run.passed) e.traces = {timed("small", expert[t] / speed, eager[t]), timed("large", 3 * expert[t] / speed, 3 * eager[t])};
            in.evaluations.push_back(e);
            JudgeScore j;
            j.key = key;
            j.kind = "implementation";
            j.judge = "judge-model";
            j.score = std::min(10.0, 4 + 5 * speed * noise(random));
            j.max_score = 10;
            j.items = "[]";
            j.created = run.finished;
            if (m == 1 && conditions[c] == "L1" && t == 1 && r == 0)
              j.audit = nlohmann::json{{"verdict", "suspected_hack"}, {"suspected_in", 2}, {"samples", 3},
                                       {"findings", {{{"rule", 4}, {"rule_title", "cached results"},
                                                      {"reason", "returns the output of the previous call when the input's pointer repeats"},
                                                      {"evidence", {R"(if (x == last_x && n < 1<<20) return cache["out"]; // <b>&amp;</b>)"}}}}}}.dump();
            in.judge_scores.push_back(j);
          }
          in.runs.push_back(run);
        }
  return in;
}

void write_store(const ReportInput& in, const std::filesystem::path& file) {
  if (std::filesystem::exists(file)) fail("{}: exists; the hand campaign is written into a new store only", file.string());
  Store store(file);
  std::vector<PlannedRun> planned;
  for (const auto& run : in.runs) planned.push_back(run.plan);
  store.init(in.campaign, planned);
  store.set_device(in.campaign.device, in.campaign.device_name);
  for (const auto& e : in.evaluations)
    if (e.kind == EvaluationKind::expert) store.put_evaluation(e);
  for (const auto& run : in.runs) {
    store.mark_running(run.plan.key, "", run.started);
    if (run.state == RunState::failed) {
      store.fail_run(run.plan.key, run.error, run.finished);
      continue;
    }
    EvaluationRow final;
    final.key = run.plan.key;
    final.task = run.plan.task;
    final.passed = run.passed;
    for (const auto& e : in.evaluations)
      if (e.kind == EvaluationKind::final && e.key == run.plan.key) final = e;
    store.finish_run(run, final, {});
  }
  for (const auto& j : in.judge_scores) store.put_judge_score(j);
}

}  // namespace d2k::campaign::testing
