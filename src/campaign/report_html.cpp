#include "campaign/report_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "campaign/report_print.hpp"
#include "core/error.hpp"

namespace d2k::campaign {
namespace {

// The ablation's steps, in order (agent/condition.hpp names them).
const std::vector<std::string> kAblationSteps = {"none", "L1", "L1+L2", "L1+L2+L3"};
const std::vector<std::string> kPalette = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

constexpr double kWidth = 900, kHeight = 340, kLeft = 70, kRight = 170, kTop = 20, kBottom = 60;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1360px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f0f0f0}td:first-child,td.text{text-align:left}figure{margin:12px 0}
figcaption{font-size:13px;color:#444;max-width:900px}svg{background:#fff;border:1px solid #ddd}
svg text{font-size:11px;font-family:system-ui,sans-serif}pre{background:#f6f6f6;padding:6px;white-space:pre-wrap;font-size:12px}
.none{color:#666;font-style:italic})";

std::string color(std::size_t i) { return kPalette[i % kPalette.size()]; }
std::string f3(double v) { return fmt::format("{:.3f}", v); }
std::string xy(double v) { return fmt::format("{:.1f}", v); }

std::size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

// A y axis from 0 (or lo) to hi with 5 ticks and its grid lines; `map` turns a value into a y pixel.
template <class Map>
std::string y_axis(double lo, double hi, const std::string& label, Map map, bool log_ticks = false) {
  std::string s;
  for (int i = 0; i <= 4; ++i) {
    const double v = log_ticks ? std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * i / 4) : lo + (hi - lo) * i / 4;
    const double y = map(v);
    s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>)",
                     xy(kLeft), xy(y), xy(kLeft + kPlotW), xy(y), xy(kLeft - 6), xy(y + 4), html_escape(f3(v)));
  }
  s += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#888"/><line x1="{0}" y1="{2}" x2="{3}" y2="{2}" stroke="#888"/>)",
                   xy(kLeft), xy(kTop), xy(kTop + kPlotH), xy(kLeft + kPlotW));
  s += fmt::format(R"~(<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>)~", xy(kTop + kPlotH / 2),
                   xy(kTop + kPlotH / 2), html_escape(label));
  return s;
}

// A legend entry per name, in its palette colour; `shown` (when given) leaves out the names without marks.
std::string legend(const std::vector<std::string>& names, const std::string& shape = "rect",
                   const std::vector<std::string>* shown = nullptr) {
  std::string s;
  double row = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (shown && std::find(shown->begin(), shown->end(), names[i]) == shown->end()) continue;
    const double y = kTop + 10 + 18 * row++;
    const double x = kLeft + kPlotW + 16;
    if (shape == "rect") s += fmt::format(R"(<rect x="{}" y="{}" width="12" height="12" fill="{}"/>)", xy(x), xy(y - 10), color(i));
    else s += fmt::format(R"(<circle cx="{}" cy="{}" r="5" fill="{}"/>)", xy(x + 6), xy(y - 4), color(i));
    s += fmt::format(R"(<text x="{}" y="{}">{}</text>)", xy(x + 18), xy(y), html_escape(names[i]));
  }
  return s;
}

std::string figure(const std::string& id, const std::string& body, const std::string& caption) {
  return fmt::format(R"(<figure id="{}"><svg width="{}" height="{}" viewBox="0 0 {} {}" role="img">{}</svg><figcaption>{}</figcaption></figure>)",
                     id, kWidth, kHeight, kWidth, kHeight, body, caption) + "\n";
}

// Performance Score per model (groups) and condition (bars); design-only arms have none.
std::string score_chart(const Report& r) {
  std::vector<const ArmRow*> arms;
  double hi = 0;
  for (const auto& a : r.arms)
    if (!a.design_only && a.performance_score) arms.push_back(&a), hi = std::max(hi, *a.performance_score);
  if (arms.empty()) return R"(<p class="none">No arm has a Performance Score yet.</p>)";
  hi = hi > 0 ? hi * 1.15 : 1;
  const auto y = [&](double v) { return kTop + kPlotH * (1 - v / hi); };
  std::string s = y_axis(0, hi, "Performance Score", y);
  const double group = kPlotW / static_cast<double>(r.models.size());
  const double bar = std::min(36.0, group * 0.8 / static_cast<double>(std::max<std::size_t>(1, r.conditions.size())));
  for (std::size_t m = 0; m < r.models.size(); ++m) {
    const double x0 = kLeft + group * static_cast<double>(m) + group * 0.1;
    std::size_t k = 0;
    for (const auto* a : arms) {
      if (a->model != r.models[m]) continue;
      const double x = x0 + bar * static_cast<double>(k++);
      const double v = *a->performance_score;
      s += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{} {}: {}</title></rect>)", xy(x), xy(y(v)),
                       xy(bar - 2), xy(kTop + kPlotH - y(v)), color(index_of(r.conditions, a->condition)),
                       html_escape(a->model), html_escape(a->condition), f3(v));
      s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" font-size="9">{}</text>)", xy(x + bar / 2 - 1), xy(y(v) - 3), f3(v));
    }
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", xy(kLeft + group * (static_cast<double>(m) + 0.5)),
                     xy(kTop + kPlotH + 18), html_escape(r.models[m]));
  }
  std::vector<std::string> drawn;
  for (const auto* a : arms) drawn.push_back(a->condition);
  s += legend(r.conditions, "rect", &drawn);
  return figure("chart-score", s,
                "Performance Score (geomean over tasks of the task score; 1 = the expert's speed) per model and condition. "
                "A score has no interval of its own: the paired chart below carries the bootstrap intervals.");
}

// Each condition against none, per model: the score ratio with its 95% bootstrap interval as whiskers.
std::string paired_chart(const Report& r) {
  std::vector<const PairedDelta*> deltas;
  double lo = 1, hi = 1;
  for (const auto& d : r.paired) {
    if (!d.ratio) continue;
    deltas.push_back(&d);
    lo = std::min(lo, d.interval ? d.interval->low : *d.ratio), hi = std::max(hi, d.interval ? d.interval->high : *d.ratio);
    lo = std::min(lo, *d.ratio), hi = std::max(hi, *d.ratio);
  }
  if (deltas.empty()) return R"(<p class="none">No paired deltas against none (the plan has no condition beside none, or no pairs scored).</p>)";
  lo = std::max(lo / 1.2, 1e-6), hi *= 1.2;
  const auto y = [&](double v) { return kTop + kPlotH * (1 - (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo))); };
  std::string s = y_axis(lo, hi, "score ratio against none (log)", y, true);
  s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#444" stroke-dasharray="4 3"/>)", xy(kLeft), xy(y(1)),
                   xy(kLeft + kPlotW), xy(y(1)));
  const double step = kPlotW / static_cast<double>(deltas.size());
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    const auto& d = *deltas[i];
    const double x = kLeft + step * (static_cast<double>(i) + 0.5);
    const auto c = color(index_of(r.models, d.model));
    if (d.interval)
      s += fmt::format(R"(<g class="whisker"><line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="{3}" stroke-width="2"/><line x1="{4}" y1="{1}" x2="{5}" y2="{1}" stroke="{3}"/><line x1="{4}" y1="{2}" x2="{5}" y2="{2}" stroke="{3}"/></g>)",
                       xy(x), xy(y(d.interval->low)), xy(y(d.interval->high)), c, xy(x - 6), xy(x + 6));
    s += fmt::format(R"(<circle cx="{}" cy="{}" r="5" fill="{}"><title>{} {} / {}: {}</title></circle>)", xy(x), xy(y(*d.ratio)), c,
                     html_escape(d.model), html_escape(d.condition), html_escape(d.against), f3(*d.ratio));
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", xy(x), xy(kTop + kPlotH + 16), html_escape(d.condition));
  }
  s += legend(r.models, "circle");
  return figure("chart-paired", s,
                "Each condition against none for the same model, paired by task and repeat: the dot is the geomean "
                "ratio of the task score; the whiskers are its 95% bootstrap interval (seeded). Above the dashed "
                "line the condition scored higher.");
}

// The ablation: the Performance Score along none -> L1 -> L1+L2 -> L1+L2+L3, a line per model.
std::string ablation_chart(const Report& r) {
  std::map<std::string, std::vector<std::pair<std::size_t, double>>> lines;
  double hi = 0;
  for (const auto& a : r.arms) {
    const auto step = index_of(kAblationSteps, a.condition);
    if (step == kAblationSteps.size() || !a.performance_score) continue;
    lines[a.model].emplace_back(step, *a.performance_score);
    hi = std::max(hi, *a.performance_score);
  }
  std::size_t longest = 0;
  for (const auto& [model, points] : lines) longest = std::max(longest, points.size());
  if (longest < 2) return R"(<p class="none">No model has a Performance Score on two ablation steps.</p>)";
  hi = hi > 0 ? hi * 1.15 : 1;
  const auto y = [&](double v) { return kTop + kPlotH * (1 - v / hi); };
  const auto x = [&](std::size_t step) { return kLeft + kPlotW * (static_cast<double>(step) + 0.5) / static_cast<double>(kAblationSteps.size()); };
  std::string s = y_axis(0, hi, "Performance Score", y);
  for (std::size_t i = 0; i < kAblationSteps.size(); ++i)
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", xy(x(i)), xy(kTop + kPlotH + 18), kAblationSteps[i]);
  for (const auto& [model, points] : lines) {
    const auto c = color(index_of(r.models, model));
    std::string path;
    for (const auto& [step, v] : points) path += fmt::format("{},{} ", xy(x(step)), xy(y(v)));
    s += fmt::format(R"(<polyline class="ablation-line" points="{}" fill="none" stroke="{}" stroke-width="2"><title>{}</title></polyline>)",
                     path, c, html_escape(model));
    for (const auto& [step, v] : points)
      s += fmt::format(R"(<circle cx="{}" cy="{}" r="4" fill="{}"><title>{} {}: {}</title></circle>)", xy(x(step)), xy(y(v)), c,
                       html_escape(model), kAblationSteps[step], f3(v));
  }
  s += legend(r.models, "circle");
  return figure("chart-ablation", s,
                "The ablation: each model's Performance Score as the guidance grows (none, then L1, L1+L2, L1+L2+L3). "
                "The ablation table below gives each step against the previous one with its bootstrap interval.");
}

// Judge score against the task score, a dot per (model, task, condition) cell that has both.
std::string judge_chart(const Report& r) {
  std::vector<const CellRow*> cells;
  double xmax = 0, ymax = 0;
  for (const auto& c : r.cells)
    if (c.judge && c.task_score && c.condition != "design-only")
      cells.push_back(&c), xmax = std::max(xmax, *c.task_score), ymax = std::max(ymax, *c.judge);
  if (cells.empty())
    return R"(<p class="none" id="no-judge">The store holds no implementation judge scores beside a task score: there is nothing to plot (d2k judge code &lt;run folder&gt; scores a run).</p>)";
  xmax = xmax > 0 ? xmax * 1.15 : 1, ymax = ymax > 0 ? ymax * 1.15 : 1;
  const auto y = [&](double v) { return kTop + kPlotH * (1 - v / ymax); };
  const auto x = [&](double v) { return kLeft + kPlotW * v / xmax; };
  std::string s = y_axis(0, ymax, "judge score", y);
  for (int i = 0; i <= 4; ++i)
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", xy(x(xmax * i / 4)), xy(kTop + kPlotH + 16), f3(xmax * i / 4));
  s += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">task score</text>)", xy(kLeft + kPlotW / 2), xy(kTop + kPlotH + 36));
  for (const auto* c : cells)
    s += fmt::format(R"(<circle class="judge-dot" cx="{}" cy="{}" r="5" fill="{}" fill-opacity="0.8"><title>{} {} {}: task score {}, judge {}</title></circle>)",
                     xy(x(*c->task_score)), xy(y(*c->judge)), color(index_of(r.models, c->model)), html_escape(c->model),
                     html_escape(c->task), html_escape(c->condition), f3(*c->task_score), f3(*c->judge));
  s += legend(r.models, "circle");
  const auto spearman = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string("-"); };
  return figure("chart-judge", s,
                fmt::format("The judge's mean implementation score against the task score, a dot per model, task and "
                            "condition. Spearman over runs: implementation score vs task score {} ({} runs); design score "
                            "vs task score under none {} ({} runs).",
                            spearman(r.judge.implementation_vs_score), r.judge.implementation_pairs,
                            spearman(r.judge.design_vs_score), r.judge.design_pairs));
}

std::string table_html(const TextTable& t) {
  std::string s = fmt::format("<h2>{}</h2>\n", html_escape(t.title));
  if (t.rows.empty()) return s + R"(<p class="none">No rows.</p>)" + "\n";
  s += fmt::format(R"(<table id="table-{}"><thead><tr>)", html_escape(t.name));
  for (const auto& c : t.columns) s += "<th>" + html_escape(c) + "</th>";
  s += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (const auto& cell : row) s += "<td>" + html_escape(cell) + "</td>";
    s += "</tr>\n";
  }
  return s + "</tbody></table>\n";
}

std::string hacks_html(const Report& r) {
  std::string s = "<h2>Suspected reward hacks</h2>\n";
  if (r.suspected_hacks.empty()) return s + R"(<p class="none">The judge's audit suspects none.</p>)" + "\n";
  s += fmt::format("<p>{} solution(s) the judge's audit suspects; a person confirms each, and a confirmed one becomes a corpus entry.</p>\n<ul id=\"hacks\">\n",
                   r.suspected_hacks.size());
  for (const auto& h : r.suspected_hacks) {
    s += fmt::format("<li><b>{}</b> ({} {} {}), judge {}: suspected in {} of {} samples<ul>", html_escape(h.key), html_escape(h.model),
                     html_escape(h.task), html_escape(h.condition), html_escape(h.judge), h.suspected_in, h.samples);
    for (const auto& f : h.findings) {
      s += fmt::format("<li>rule {} ({}): {}", f.rule, html_escape(f.rule_title), html_escape(f.reason));
      for (const auto& quote : f.evidence) s += "<pre>" + html_escape(quote) + "</pre>";
      s += "</li>";
    }
    s += "</ul></li>\n";
  }
  return s + "</ul>\n";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string report_html(const Report& r) {
  const auto tables = report_tables(r);
  const auto table = [&](const std::string& name) {
    for (const auto& t : tables)
      if (t.name == name) return table_html(t);
    fail("report_html: report_tables() has no table '{}'", name);
  };
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  s += fmt::format("<title>d2k report: {}</title><style>{}</style></head><body>\n", html_escape(r.campaign), kStyle);
  s += fmt::format("<h1>d2k campaign <span id=\"campaign\">{}</span></h1>\n", html_escape(r.campaign));
  s += fmt::format(
      "<p id=\"summary\">device {} ({}); language <span id=\"language\">{}</span>; store {}<br>{} runs: {} finished, {} "
      "running, {} pending, {} failed<br>scored by {}; "
      "speedups over the libtorch C++ eager reference (conservative next to Python eager)</p>\n",
      html_escape(r.device), html_escape(r.device_name), html_escape(r.language), html_escape(r.store), r.runs, r.finished,
      r.running, r.pending, r.failed,
      r.rerun ? "the sequential re-runs of each solution" : "each run's own final evaluation");
  s += table("arms");
  s += "<h2>Performance Score per model and condition</h2>\n" + score_chart(r);
  s += "<h2>Paired against none</h2>\n" + paired_chart(r);
  s += table("paired");
  s += "<h2>Ablation</h2>\n" + ablation_chart(r);
  s += table("ablation");
  s += "<h2>Judge score against performance</h2>\n" + judge_chart(r);
  s += table("cells");
  s += table("tasks");
  s += table("all_correct");
  s += hacks_html(r);
  s += fmt::format("<h2>Clocks and notes</h2>\n<p id=\"clocks\">clocks: {} timed traces, {} with GPU clocks, {} throttled", r.clocks.traces,
                   r.clocks.with_clocks, r.clocks.throttled);
  for (const auto& [reason, count] : r.clocks.reasons) s += fmt::format("; {} x{}", html_escape(reason), count);
  s += "</p>\n<ul id=\"notes\">\n";
  for (const auto& note : r.notes) s += "<li>" + html_escape(note) + "</li>\n";
  if (r.notes.empty()) s += "<li class=\"none\">no notes</li>\n";
  return s + "</ul>\n</body></html>\n";
}

void write_report_html(const Report& report, const std::filesystem::path& file) {
  std::ofstream out(file);
  if (!out) fail("--html: cannot write {}", file.string());
  out << report_html(report);
  if (!out) fail("--html: write to {} failed", file.string());
}

}  // namespace d2k::campaign
