#include "campaign/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "campaign/plan.hpp"
#include "campaign/scores.hpp"
#include "core/metrics.hpp"

namespace d2k::campaign {
namespace {

constexpr uint64_t kBootstrapSeed = 0x626f6f7473747270ull;  // "bootstrp": every interval reproducible from the store
constexpr const char* kDesignOnly = "design-only";

struct Scored {
  const RunRow* run = nullptr;
  RunScore score;
  std::optional<double> judge;
};

double share(int part, int whole) { return whole ? static_cast<double>(part) / whole : 0.0; }

std::optional<double> mean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

PairedDelta compare(const std::string& model, const std::string& condition, const std::string& against,
                    const std::map<std::string, Scored>& by_key, const std::vector<std::string>& tasks,
                    const std::map<std::string, std::vector<const Scored*>>& cells, int repeats) {
  PairedDelta d;
  d.model = model;
  d.condition = condition;
  d.against = against;
  std::vector<double> logs;
  for (const auto& task : tasks)
    for (int r = 0; r < repeats; ++r) {
      const auto a = by_key.find(fmt::format("{}/{}/{}/{}", model, task, condition, r));
      const auto b = by_key.find(fmt::format("{}/{}/{}/{}", model, task, against, r));
      if (a == by_key.end() || b == by_key.end()) continue;
      if (a->second.run->state != RunState::finished || b->second.run->state != RunState::finished) continue;
      if (!a->second.score.task_score || !b->second.score.task_score) continue;
      logs.push_back(std::log(*a->second.score.task_score) - std::log(*b->second.score.task_score));
    }
  d.pairs = static_cast<int>(logs.size());
  if (auto m = mean(logs)) d.ratio = std::exp(*m);
  if (auto i = bootstrap_mean_interval(logs, paired_seed(kBootstrapSeed, model + "|" + condition + "|" + against, 0)))
    d.interval = Interval{std::exp(i->low), std::exp(i->high)};
  d.test = wilcoxon_signed_rank(logs);
  // The geomean speedup over the tasks correct in both arms (every repeat), each arm's.
  std::vector<double> mine, theirs;
  for (const auto& task : tasks) {
    const auto a = cells.find(model + "|" + task + "|" + condition), b = cells.find(model + "|" + task + "|" + against);
    if (a == cells.end() || b == cells.end()) continue;
    const auto all_correct = [](const std::vector<const Scored*>& runs) {
      return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const Scored* s) { return s->score.correct && s->score.speedup; });
    };
    if (!all_correct(a->second) || !all_correct(b->second)) continue;
    ++d.both_correct;
    for (const auto* s : a->second) mine.push_back(*s->score.speedup);
    for (const auto* s : b->second) theirs.push_back(*s->score.speedup);
  }
  d.speedup = geomean(mine);
  d.speedup_against = geomean(theirs);
  return d;
}

// Every implementation score whose audit suspects a reward hack, with the run it judged. An audit that
// is not the judge's JSON is listed too (as suspected, with why): the list is for a person, who must not
// miss one.
std::vector<SuspectedHack> suspected_hacks(const std::vector<JudgeScore>& scores, const std::map<std::string, Scored>& by_key) {
  std::vector<SuspectedHack> out;
  for (const auto& j : scores) {
    if (j.kind != "implementation") continue;
    const auto audit = nlohmann::json::parse(j.audit, nullptr, false);
    const bool readable = audit.is_object();
    if (readable && audit.value("verdict", "clean") != "suspected_hack") continue;
    SuspectedHack hack{.key = j.key, .judge = j.judge};
    if (const auto it = by_key.find(j.key); it != by_key.end()) {
      const auto& plan = it->second.run->plan;
      hack.model = plan.model;
      hack.task = plan.task;
      hack.condition = std::string(agent::name_of(plan.condition));
    }
    if (!readable) {
      hack.findings.push_back({.reason = "the stored audit is not the judge's JSON: read the score file"});
      out.push_back(std::move(hack));
      continue;
    }
    hack.suspected_in = audit.value("suspected_in", 0);
    hack.samples = audit.value("samples", 0);
    for (const auto& f : audit.value("findings", nlohmann::json::array())) {
      SuspectedHack::Finding finding{.rule = f.value("rule", 0), .rule_title = f.value("rule_title", ""),
                                     .reason = f.value("reason", "")};
      for (const auto& quote : f.value("evidence", nlohmann::json::array()))
        if (quote.is_string()) finding.evidence.push_back(quote.get<std::string>());
      hack.findings.push_back(std::move(finding));
    }
    out.push_back(std::move(hack));
  }
  return out;
}

}  // namespace

Report make_report(const ReportInput& in) {
  Report report;
  report.campaign = in.campaign.name;
  report.device = in.campaign.device;
  report.device_name = in.campaign.device_name;
  if (!in.campaign.language.empty()) report.language = in.campaign.language;
  report.store = in.store;
  const auto plan = nlohmann::json::parse(in.campaign.plan_json);
  report.models = plan.at("models").get<std::vector<std::string>>();
  report.tasks = plan.at("tasks").get<std::vector<std::string>>();
  report.conditions = plan.at("conditions").get<std::vector<std::string>>();
  const int repeats = plan.at("repeats").get<int>();

  // The evaluation each run is scored by: the re-run (sequential, quiet device) where there is one.
  std::map<std::string, const EvaluationRow*> final_of, rerun_of, expert_of;
  for (const auto& e : in.evaluations) {
    if (e.kind == EvaluationKind::final) final_of[e.key] = &e;
    else if (e.kind == EvaluationKind::rerun) rerun_of[e.key] = &e;
    else expert_of[e.task] = &e;
  }
  report.rerun = !rerun_of.empty();
  std::map<std::string, std::vector<double>> judge_of;  // key -> scores (normalized to [0, 1] where a maximum is given)
  for (const auto& j : in.judge_scores) judge_of[j.key].push_back(j.max_score && *j.max_score > 0 ? j.score / *j.max_score : j.score);

  std::map<std::string, Scored> by_key;
  for (const auto& run : in.runs) {
    switch (run.state) {
      case RunState::finished: ++report.finished; break;
      case RunState::running: ++report.running; break;
      case RunState::pending: ++report.pending; break;
      case RunState::failed: ++report.failed; break;
    }
    ++report.runs;
    Scored s;
    s.run = &run;
    const EvaluationRow* evaluation = nullptr;
    if (auto it = rerun_of.find(run.plan.key); it != rerun_of.end()) evaluation = it->second;
    else if (auto f = final_of.find(run.plan.key); f != final_of.end()) evaluation = f->second;
    const auto expert = expert_of.find(run.plan.task);
    const bool design = agent::name_of(run.plan.condition) == kDesignOnly;
    if (run.state == RunState::finished && !design)
      s.score = score_run(evaluation, run.passed, expert == expert_of.end() ? nullptr : expert->second);
    if (auto j = judge_of.find(run.plan.key); j != judge_of.end()) s.judge = mean(j->second);
    by_key[run.plan.key] = s;
  }
  for (const auto& task : report.tasks)
    if (!expert_of.count(task)) report.notes.push_back(fmt::format("{}: no expert evaluation; its task scores are empty", task));
    else if (!expert_of[task]->passed) report.notes.push_back(fmt::format("{}: the expert solution did not pass; its task scores are suspect", task));

  // Cells.
  std::map<std::string, std::vector<const Scored*>> cells;  // model|task|condition
  for (const auto& [key, s] : by_key)
    cells[s.run->plan.model + "|" + s.run->plan.task + "|" + std::string(agent::name_of(s.run->plan.condition))].push_back(&s);
  for (const auto& model : report.models)
    for (const auto& task : report.tasks)
      for (const auto& condition : report.conditions) {
        const auto it = cells.find(model + "|" + task + "|" + condition);
        if (it == cells.end()) continue;
        CellRow c{model, task, condition};
        std::vector<double> scores, speedups, percents, turns, judges;
        int fast1 = 0, fast2 = 0;
        for (const auto* s : it->second) {
          ++c.runs;
          if (s->run->state != RunState::finished) continue;
          ++c.finished;
          c.passed += s->run->passed;
          if (s->score.task_score) scores.push_back(*s->score.task_score);
          if (s->score.speedup) speedups.push_back(*s->score.speedup);
          if (s->score.percent_sol) percents.push_back(*s->score.percent_sol);
          fast1 += fast(s->score, 1.0);
          fast2 += fast(s->score, 2.0);
          turns.push_back(s->run->turns);
          c.tokens += s->run->input_tokens + s->run->output_tokens;
          c.cost_usd += s->run->cost_usd;
          if (s->judge) judges.push_back(*s->judge);
        }
        c.pass_rate = share(c.passed, c.runs);
        c.correct = c.runs > 0 && c.passed == c.runs;
        c.task_score = geomean(scores);
        c.speedup = geomean(speedups);
        c.percent_sol = geomean(percents);
        c.fast_1 = share(fast1, c.runs);
        c.fast_2 = share(fast2, c.runs);
        c.turns = mean(turns).value_or(0);
        c.judge = mean(judges);
        report.cells.push_back(c);
      }

  // Arms: (model, condition) over the tasks.
  for (const auto& model : report.models)
    for (const auto& condition : report.conditions) {
      ArmRow a{model, condition};
      a.design_only = condition == kDesignOnly;
      std::vector<double> cell_scores, speedups, percents, turns, judges;
      int correct_tasks = 0, fast1 = 0, fast2 = 0;
      int64_t pass_tokens = 0;
      bool every_cell_scored = true;
      for (const auto& c : report.cells) {
        if (c.model != model || c.condition != condition) continue;
        ++a.tasks;
        correct_tasks += c.correct;
        if (c.task_score) cell_scores.push_back(*c.task_score);
        else every_cell_scored = false;
        if (c.judge) judges.push_back(*c.judge);
      }
      for (const auto& [key, s] : by_key) {
        const auto& p = s.run->plan;
        if (p.model != model || agent::name_of(p.condition) != condition) continue;
        ++a.runs;
        if (s.run->state != RunState::finished) continue;
        ++a.finished;
        a.passed += s.run->passed;
        if (s.score.speedup) speedups.push_back(*s.score.speedup);
        if (s.score.percent_sol) percents.push_back(*s.score.percent_sol);
        fast1 += fast(s.score, 1.0);
        fast2 += fast(s.score, 2.0);
        turns.push_back(s.run->turns);
        a.input_tokens += s.run->input_tokens;
        a.output_tokens += s.run->output_tokens;
        a.cost_usd += s.run->cost_usd;
        pass_tokens += s.run->input_tokens + s.run->output_tokens;
      }
      a.correctness = share(correct_tasks, a.tasks);
      a.pass_rate = share(a.passed, a.runs);
      if (!a.design_only && every_cell_scored) a.performance_score = geomean(cell_scores);
      a.speedup = geomean(speedups);
      a.percent_sol = geomean(percents);
      a.fast_1 = share(fast1, a.runs);
      a.fast_2 = share(fast2, a.runs);
      a.turns = mean(turns).value_or(0);
      if (a.passed > 0) {
        a.cost_per_pass = a.cost_usd / a.passed;
        a.tokens_per_pass = static_cast<double>(pass_tokens) / a.passed;
      }
      a.judge = mean(judges);
      if (a.runs > 0) report.arms.push_back(a);
    }

  // Per task, all models together.
  for (const auto& task : report.tasks)
    for (const auto& condition : report.conditions) {
      if (condition == kDesignOnly) continue;
      TaskRow t{task, condition};
      std::vector<double> scores, speedups;
      for (const auto& c : report.cells) {
        if (c.task != task || c.condition != condition) continue;
        t.runs += c.runs;
        t.passed += c.passed;
        if (c.task_score) scores.push_back(*c.task_score);
        if (c.speedup) speedups.push_back(*c.speedup);
      }
      if (t.runs == 0) continue;
      t.pass_rate = share(t.passed, t.runs);
      t.task_score = geomean(scores);
      t.speedup = geomean(speedups);
      if (auto e = expert_of.find(task); e != expert_of.end()) {
        t.expert_passed = e->second->passed;
        std::vector<double> ms;
        for (const auto& tr : e->second->traces)
          if (tr.median_ms) ms.push_back(*tr.median_ms);
        t.expert_ms = geomean(ms);
      }
      report.task_rows.push_back(t);
    }

  // Paired deltas against none, and the ablation's steps.
  const auto has = [&](const std::string& c) { return std::find(report.conditions.begin(), report.conditions.end(), c) != report.conditions.end(); };
  for (const auto& model : report.models) {
    if (has("none"))
      for (const auto& condition : report.conditions)
        if (condition != "none" && condition != kDesignOnly)
          report.paired.push_back(compare(model, condition, "none", by_key, report.tasks, cells, repeats));
    std::string previous;
    for (const char* step : {"none", "L1", "L1+L2", "L1+L2+L3"}) {
      if (!has(step)) continue;
      if (!previous.empty()) report.ablation.push_back(compare(model, step, previous, by_key, report.tasks, cells, repeats));
      previous = step;
    }
  }

  // The models correct on every task, per condition.
  for (const auto& condition : report.conditions) {
    if (condition == kDesignOnly) continue;
    for (const auto& model : report.models) {
      bool all = !report.tasks.empty();
      std::vector<double> speedups;
      for (const auto& c : report.cells)
        if (c.model == model && c.condition == condition) {
          all = all && c.correct;
          if (c.speedup) speedups.push_back(*c.speedup);
        }
      if (all) report.all_correct.push_back({condition, model, geomean(speedups)});
    }
  }

  // Clocks of every timed trace (final, rerun and expert evaluations).
  for (const auto& e : in.evaluations)
    for (const auto& t : e.traces) {
      if (!t.median_ms) continue;
      ++report.clocks.traces;
      if (!t.throttled) continue;
      ++report.clocks.with_clocks;
      if (*t.throttled) {
        ++report.clocks.throttled;
        std::size_t at = 0;
        while (at < t.clock_reasons.size()) {
          const auto comma = t.clock_reasons.find(',', at);
          ++report.clocks.reasons[t.clock_reasons.substr(at, comma - at)];
          if (comma == std::string::npos) break;
          at = comma + 1;
        }
      }
    }

  // Judge scores against performance.
  std::vector<double> impl, impl_score, design, design_score;
  for (const auto& j : in.judge_scores) {
    const auto it = by_key.find(j.key);
    if (it == by_key.end()) continue;
    const double value = j.max_score && *j.max_score > 0 ? j.score / *j.max_score : j.score;
    const auto& p = it->second.run->plan;
    if (j.kind == "implementation" && it->second.score.task_score) {
      impl.push_back(value);
      impl_score.push_back(*it->second.score.task_score);
    } else if (j.kind == "design") {
      const auto none = by_key.find(fmt::format("{}/{}/none/{}", p.model, p.task, p.repeat));
      if (none != by_key.end() && none->second.score.task_score) {
        design.push_back(value);
        design_score.push_back(*none->second.score.task_score);
      }
    }
  }
  report.judge.implementation_pairs = static_cast<int>(impl.size());
  report.judge.design_pairs = static_cast<int>(design.size());
  report.judge.implementation_vs_score = spearman(impl, impl_score);
  report.judge.design_vs_score = spearman(design, design_score);
  report.suspected_hacks = suspected_hacks(in.judge_scores, by_key);
  if (in.judge_scores.empty()) report.notes.push_back("no judge scores in the store yet: the judge columns are empty");
  if (report.finished < report.runs)
    report.notes.push_back(fmt::format("{} of {} runs have not finished: the tables cover the finished ones, and a task "
                                       "with an unfinished run is not correct", report.runs - report.finished, report.runs));
  return report;
}

}  // namespace d2k::campaign
