#include "campaign/report_print.hpp"

#include <fmt/format.h>

#include <fstream>

#include "core/error.hpp"

namespace d2k::campaign {
namespace {

using nlohmann::json;

std::string num(const std::optional<double>& v, const char* format = "{:.3f}") {
  return v ? fmt::format(fmt::runtime(format), *v) : "-";
}
std::string pct(double v) { return fmt::format("{:.0f}%", 100 * v); }
std::string interval(const std::optional<Interval>& i) {
  return i ? fmt::format("[{:.3f}, {:.3f}]", i->low, i->high) : "-";
}
json opt(const std::optional<double>& v) { return v ? json(*v) : json(); }

json delta_json(const PairedDelta& d) {
  return {{"model", d.model}, {"condition", d.condition}, {"against", d.against}, {"pairs", d.pairs},
          {"ratio", opt(d.ratio)},
          {"interval95", d.interval ? json::array({d.interval->low, d.interval->high}) : json()},
          {"wilcoxon", {{"n", d.test.n}, {"w_plus", d.test.w_plus}, {"w_minus", d.test.w_minus},
                        {"p_value", d.test.p_value}, {"exact", d.test.exact}}},
          {"tasks_correct_in_both", d.both_correct}, {"speedup", opt(d.speedup)},
          {"speedup_against", opt(d.speedup_against)}};
}

TextTable delta_table(const std::string& name, const std::string& title, const std::vector<PairedDelta>& deltas) {
  TextTable t{name, title, {"model", "condition", "against", "pairs", "score ratio", "95% interval", "wilcoxon p",
                            "tasks correct in both", "speedup", "speedup against"}};
  for (const auto& d : deltas)
    t.rows.push_back({d.model, d.condition, d.against, std::to_string(d.pairs), num(d.ratio), interval(d.interval),
                      d.test.n ? fmt::format("{:.4f}", d.test.p_value) : "-", std::to_string(d.both_correct),
                      num(d.speedup, "{:.2f}x"), num(d.speedup_against, "{:.2f}x")});
  return t;
}

}  // namespace

std::vector<TextTable> report_tables(const Report& r) {
  std::vector<TextTable> tables;
  TextTable arms{"arms", "Per model and condition",
                 {"model", "condition", "tasks", "runs", "correct", "pass rate", "perf score", "speedup", "fast_1",
                  "fast_2", "% SOL", "turns", "input tokens", "output tokens", "cost $", "$ / pass", "tokens / pass",
                  "judge"}};
  for (const auto& a : r.arms)
    arms.rows.push_back({a.model, a.condition, std::to_string(a.tasks), fmt::format("{}/{}", a.finished, a.runs),
                         pct(a.correctness), pct(a.pass_rate), a.design_only ? "n/a" : num(a.performance_score),
                         a.design_only ? "n/a" : num(a.speedup, "{:.2f}x"), a.design_only ? "n/a" : pct(a.fast_1),
                         a.design_only ? "n/a" : pct(a.fast_2), num(a.percent_sol, "{:.1f}"), fmt::format("{:.1f}", a.turns),
                         std::to_string(a.input_tokens), std::to_string(a.output_tokens), fmt::format("{:.4f}", a.cost_usd),
                         num(a.cost_per_pass, "{:.4f}"), num(a.tokens_per_pass, "{:.0f}"), num(a.judge)});
  tables.push_back(arms);

  TextTable cells{"cells", "Per model, task and condition (repeats together)",
                  {"model", "task", "condition", "runs", "passed", "pass rate", "task score", "speedup", "fast_1",
                   "fast_2", "% SOL", "turns", "tokens", "cost $", "judge"}};
  for (const auto& c : r.cells) {
    const bool design = c.condition == "design-only";
    cells.rows.push_back({c.model, c.task, c.condition, fmt::format("{}/{}", c.finished, c.runs), std::to_string(c.passed),
                          pct(c.pass_rate), design ? "n/a" : num(c.task_score), design ? "n/a" : num(c.speedup, "{:.2f}x"),
                          design ? "n/a" : pct(c.fast_1), design ? "n/a" : pct(c.fast_2),
                          num(c.percent_sol, "{:.1f}"), fmt::format("{:.1f}", c.turns), std::to_string(c.tokens),
                          fmt::format("{:.4f}", c.cost_usd), num(c.judge)});
  }
  tables.push_back(cells);

  TextTable tasks{"tasks", "Per task and condition (models together)",
                  {"task", "condition", "runs", "pass rate", "task score", "speedup", "expert ms", "expert passed"}};
  for (const auto& t : r.task_rows)
    tasks.rows.push_back({t.task, t.condition, std::to_string(t.runs), pct(t.pass_rate), num(t.task_score),
                          num(t.speedup, "{:.2f}x"), num(t.expert_ms, "{:.4f}"), t.expert_passed ? "yes" : "no"});
  tables.push_back(tasks);

  tables.push_back(delta_table("paired", "Paired against none (same seeds and workloads; bootstrap 95% interval, Wilcoxon signed-rank)", r.paired));
  tables.push_back(delta_table("ablation", "Ablation: none -> L1 -> L1+L2 -> L1+L2+L3, each step against the previous", r.ablation));

  TextTable all{"all_correct", "Geomean speedup over eager of the models correct on every task", {"condition", "model", "speedup"}};
  for (const auto& a : r.all_correct) all.rows.push_back({a.condition, a.model, num(a.speedup, "{:.2f}x")});
  tables.push_back(all);
  return tables;
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& c = cells[i];
    if (i) line += ',';
    if (c.find_first_of(",\"\n") != std::string::npos) {
      line += '"';
      for (char ch : c) line += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      line += '"';
    } else {
      line += c;
    }
  }
  return line + "\n";
}

void print_report(std::ostream& out, const Report& r) {
  out << fmt::format("campaign {} on {} ({}), language {}: {} runs, {} finished, {} running, {} pending, {} failed\n",
                     r.campaign, r.device, r.device_name, r.language, r.runs, r.finished, r.running, r.pending, r.failed);
  out << fmt::format("scored by {}; speedups over the libtorch C++ eager reference (conservative next to Python eager)\n",
                     r.rerun ? "the sequential re-runs of each solution" : "each run's own final evaluation");
  for (const auto& t : report_tables(r)) {
    if (t.rows.empty()) continue;
    out << "\n" << t.title << "\n";
    std::vector<std::size_t> width(t.columns.size());
    for (std::size_t i = 0; i < t.columns.size(); ++i) width[i] = t.columns[i].size();
    for (const auto& row : t.rows)
      for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    const auto line = [&](const std::vector<std::string>& cells) {
      std::string text;
      for (std::size_t i = 0; i < cells.size(); ++i) text += fmt::format("{:<{}}  ", cells[i], width[i]);
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out << text << "\n";
    };
    line(t.columns);
    for (const auto& row : t.rows) line(row);
  }
  out << fmt::format("\nclocks: {} timed traces, {} with GPU clocks, {} throttled", r.clocks.traces, r.clocks.with_clocks,
                     r.clocks.throttled);
  for (const auto& [reason, count] : r.clocks.reasons) out << fmt::format("; {} x{}", reason, count);
  out << "\n";
  out << fmt::format("judge: implementation score vs task score: Spearman {} ({} runs); design score vs task score "
                     "under none: Spearman {} ({} runs)\n",
                     num(r.judge.implementation_vs_score), r.judge.implementation_pairs, num(r.judge.design_vs_score),
                     r.judge.design_pairs);
  if (!r.suspected_hacks.empty()) {
    out << fmt::format("\nsuspected reward hacks (the judge's audit; a person confirms each, and a confirmed one becomes a "
                       "corpus entry): {}\n", r.suspected_hacks.size());
    for (const auto& h : r.suspected_hacks) {
      out << fmt::format("  {} ({} {} {}), judge {}: suspected in {} of {} samples\n", h.key, h.model, h.task, h.condition,
                         h.judge, h.suspected_in, h.samples);
      for (const auto& f : h.findings) {
        out << fmt::format("    rule {} ({}): {}\n", f.rule, f.rule_title, f.reason);
        for (const auto& quote : f.evidence) out << "      > " << quote.substr(0, 300) << "\n";
      }
    }
  }
  for (const auto& note : r.notes) out << "note: " << note << "\n";
}

json report_json(const Report& r) {
  json out = {{"campaign", r.campaign}, {"device", r.device}, {"device_name", r.device_name}, {"language", r.language},
              {"store", r.store},
              {"runs", {{"total", r.runs}, {"finished", r.finished}, {"running", r.running}, {"pending", r.pending},
                        {"failed", r.failed}}},
              {"scored_by", r.rerun ? "rerun" : "final"}, {"models", r.models}, {"tasks", r.tasks},
              {"conditions", r.conditions}, {"notes", r.notes}};
  auto& arms = out["arms"] = json::array();
  for (const auto& a : r.arms)
    arms.push_back({{"model", a.model}, {"condition", a.condition}, {"design_only", a.design_only}, {"tasks", a.tasks},
                    {"runs", a.runs}, {"finished", a.finished}, {"passed", a.passed}, {"correctness", a.correctness},
                    {"pass_rate", a.pass_rate}, {"performance_score", opt(a.performance_score)}, {"speedup", opt(a.speedup)},
                    {"fast_1", a.fast_1}, {"fast_2", a.fast_2}, {"percent_of_speed_of_light", opt(a.percent_sol)},
                    {"turns_mean", a.turns}, {"input_tokens", a.input_tokens}, {"output_tokens", a.output_tokens},
                    {"cost_usd", a.cost_usd}, {"cost_usd_per_pass", opt(a.cost_per_pass)},
                    {"tokens_per_pass", opt(a.tokens_per_pass)}, {"judge", opt(a.judge)}});
  auto& cells = out["cells"] = json::array();
  for (const auto& c : r.cells)
    cells.push_back({{"model", c.model}, {"task", c.task}, {"condition", c.condition}, {"runs", c.runs},
                     {"finished", c.finished}, {"passed", c.passed}, {"pass_rate", c.pass_rate}, {"correct", c.correct},
                     {"task_score", opt(c.task_score)}, {"speedup", opt(c.speedup)},
                     {"percent_of_speed_of_light", opt(c.percent_sol)}, {"fast_1", c.fast_1}, {"fast_2", c.fast_2},
                     {"turns_mean", c.turns}, {"tokens", c.tokens}, {"cost_usd", c.cost_usd}, {"judge", opt(c.judge)}});
  auto& tasks = out["tasks_table"] = json::array();
  for (const auto& t : r.task_rows)
    tasks.push_back({{"task", t.task}, {"condition", t.condition}, {"runs", t.runs}, {"passed", t.passed},
                     {"pass_rate", t.pass_rate}, {"task_score", opt(t.task_score)}, {"speedup", opt(t.speedup)},
                     {"expert_ms", opt(t.expert_ms)}, {"expert_passed", t.expert_passed}});
  out["paired"] = json::array();
  for (const auto& d : r.paired) out["paired"].push_back(delta_json(d));
  out["ablation"] = json::array();
  for (const auto& d : r.ablation) out["ablation"].push_back(delta_json(d));
  out["all_correct"] = json::array();
  for (const auto& a : r.all_correct) out["all_correct"].push_back({{"condition", a.condition}, {"model", a.model}, {"speedup", opt(a.speedup)}});
  out["clocks"] = {{"timed_traces", r.clocks.traces}, {"with_clocks", r.clocks.with_clocks},
                   {"throttled", r.clocks.throttled}, {"reasons", r.clocks.reasons}};
  out["judge"] = {{"implementation_pairs", r.judge.implementation_pairs}, {"design_pairs", r.judge.design_pairs},
                  {"implementation_vs_score_spearman", opt(r.judge.implementation_vs_score)},
                  {"design_vs_score_spearman", opt(r.judge.design_vs_score)}};
  out["suspected_hacks"] = json::array();
  for (const auto& h : r.suspected_hacks) {
    json findings = json::array();
    for (const auto& f : h.findings)
      findings.push_back({{"rule", f.rule}, {"rule_title", f.rule_title}, {"reason", f.reason}, {"evidence", f.evidence}});
    out["suspected_hacks"].push_back({{"key", h.key}, {"model", h.model}, {"task", h.task}, {"condition", h.condition},
                                      {"judge", h.judge}, {"suspected_in", h.suspected_in}, {"samples", h.samples},
                                      {"findings", findings}});
  }
  return out;
}

std::vector<std::filesystem::path> write_report_csv(const Report& report, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> files;
  for (const auto& t : report_tables(report)) {
    const auto file = dir / (t.name + ".csv");
    std::ofstream out(file);
    if (!out) fail("{}: cannot write", file.string());
    out << csv_line(t.columns);
    for (const auto& row : t.rows) out << csv_line(row);
    if (!out) fail("{}: write failed", file.string());
    files.push_back(file);
  }
  return files;
}

}  // namespace d2k::campaign
