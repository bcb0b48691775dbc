#include "cli/table.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace d2k {
namespace {

std::string micros(double ms) { return fmt::format("{:.1f}", ms * 1e3); }

// The noise a person should see beside a median: p10-p90 of the samples, and the half-width of the
// median's 95% interval relative to it.
std::string spread(const TimingSummary& t) {
  std::string text = fmt::format("{}-{}", micros(t.p10_ms), micros(t.p90_ms));
  if (t.median_ms > 0) text += fmt::format(" ±{:.1f}%", 50.0 * (t.ci_high_ms - t.ci_low_ms) / t.median_ms);
  return text;
}

// The achieved rate on the side that bounds the workload: above the H200's ridge point (about 200 FLOP
// per byte for dense bf16) a workload is compute-bound, below it memory-bound.
std::string achieved(const Performance& p) {
  if (p.flops > 200.0 * p.min_bytes) return fmt::format("{:.1f} TFLOP/s", p.achieved_tflops);
  return fmt::format("{:.0f} GB/s", p.achieved_gbps);
}

struct Column {
  std::string title;
  bool left = false;
  std::size_t width = 0;
};

// Titles and rows, each column as wide as its widest cell.
void print_columns(std::ostream& out, std::vector<Column> columns, const std::vector<std::vector<std::string>>& rows) {
  for (std::size_t c = 0; c < columns.size(); ++c) {
    columns[c].width = columns[c].title.size();
    for (const auto& row : rows) columns[c].width = std::max(columns[c].width, row[c].size());
  }
  const auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const auto& col = columns[c];
      line += col.left ? fmt::format("{:<{}}", cells[c], col.width) : fmt::format("{:>{}}", cells[c], col.width);
      if (c + 1 < columns.size()) line += "  ";
    }
    out << line << '\n';
  };
  std::vector<std::string> titles;
  for (const auto& col : columns) titles.push_back(col.title);
  print_row(titles);
  for (const auto& row : rows) print_row(row);
}

}  // namespace

void print_repeat_table(std::ostream& out, const std::vector<RepeatRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  int clean = 0;
  for (const auto& r : rows) {
    clean += r.passed == r.runs;
    const bool timed = !r.medians_ms.empty();
    cells.push_back({r.task, r.workload, fmt::format("{}/{}", r.passed, r.runs), timed ? micros(r.median_ms) : "-",
                     timed ? micros(r.min_ms) : "-", timed ? micros(r.max_ms) : "-",
                     r.medians_ms.size() > 1 ? fmt::format("{:.2f}%", r.spread * 100.0) : "-"});
  }
  print_columns(out, {{"task", true}, {"workload", true}, {"passed"}, {"median us"}, {"min us"}, {"max us"}, {"spread"}},
                cells);
  for (const auto& r : rows)
    for (const auto& failure : r.failures) out << fmt::format("\n{} {}: {}\n", r.task, r.workload, failure);
  out << fmt::format("\n{} of {} workloads passed every run (spread: (max - min) / median of the runs' medians)\n",
                     clean, rows.size());
}

void print_trace_table(std::ostream& out, const std::vector<Trace>& traces, const RunSummary& summary) {
  // The library baseline's columns only when some workload has one (docs/metrics.md).
  const bool library = std::any_of(traces.begin(), traces.end(),
                                   [](const Trace& t) { return t.performance && t.performance->library; });
  std::vector<Column> columns = {{"task", true}, {"workload", true}, {"status", true}, {"eager us"}};
  if (library) columns.push_back({"library us"});
  for (const char* title : {"solution us", "p10-p90 us, 95% CI", "speedup"}) columns.push_back({title});
  if (library) columns.push_back({"vs library"});
  for (const char* title : {"achieved", "% SOL"}) columns.push_back({title});
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : traces) {
    std::vector<std::string> row = {t.task, t.workload, std::string(name_of(t.status))};
    const Performance* p = t.performance ? &*t.performance : nullptr;
    const auto cell = [&](bool shown, const auto& text) { row.push_back(p && shown ? std::string(text()) : "-"); };
    cell(p && p->baseline, [&] { return micros(p->baseline->median_ms); });
    if (library) cell(p && p->library, [&] { return micros(p->library->median_ms); });
    cell(true, [&] { return micros(p->solution.median_ms) + (t.clocks && t.clocks->throttled ? " !" : ""); });
    cell(true, [&] { return spread(p->solution); });
    cell(p && p->speedup, [&] { return fmt::format("{:.2f}x", *p->speedup); });
    if (library) cell(p && p->speedup_over_library, [&] { return fmt::format("{:.2f}x", *p->speedup_over_library); });
    cell(true, [&] { return achieved(*p); });
    cell(p && p->sol_fraction, [&] { return fmt::format("{:.1f}%", *p->sol_fraction * 100.0); });
    rows.push_back(std::move(row));
  }
  print_columns(out, columns, rows);

  for (const auto& t : traces) {
    if (t.status == Status::passed) continue;
    out << fmt::format("\n{} {}: {}: {}\n", t.task, t.workload, name_of(t.status), t.message);
    if (!t.log.empty() && (t.status == Status::compile_error || t.status == Status::runtime_error)) {
      const auto tail = t.log.size() > 2000 ? t.log.substr(t.log.size() - 2000) : t.log;
      out << "  log (end):\n" << tail << (tail.empty() || tail.back() == '\n' ? "" : "\n");
    }
  }
  if (summary.throttled > 0) out << '\n';
  for (const auto& t : traces)
    if (t.clocks && t.clocks->throttled) out << fmt::format("note: {} {} (!): {}\n", t.task, t.workload, t.clocks->warning);
  out << fmt::format("\n{} of {} passed", summary.passed, summary.total);
  if (summary.geomean_speedup) out << fmt::format("; geomean speedup over eager {:.2f}x", *summary.geomean_speedup);
  if (summary.geomean_speedup_over_library)
    out << fmt::format(", over the library path {:.2f}x ({} workloads)", *summary.geomean_speedup_over_library,
                       summary.over_library);
  out << '\n' << describe(summary.overhead) << '\n';
}

void print_task_list(std::ostream& out, const std::vector<Task>& tasks) {
  std::size_t width = 4;
  for (const auto& t : tasks) width = std::max(width, t.name.size());
  out << fmt::format("{:<{}}  {:>9}  {}\n", "task", width, "workloads", "summary");
  for (const auto& t : tasks) {
    const auto published = std::count_if(t.workloads.begin(), t.workloads.end(), [](const Workload& w) { return !w.hidden; });
    out << fmt::format("{:<{}}  {:>9}  {}\n", t.name, width, published, t.summary);
  }
}

void print_task(std::ostream& out, const Task& task, const std::set<int>& levels) {
  out << fmt::format("# {}\n\n{}\n\nSource: {}\nBaseline: {}\n\n{}\n", task.name, task.summary, task.source,
                     task.baseline, task.description);
  const auto tensor_line = [&](const TensorSpec& s, const char* role) {
    std::string shape;
    for (const auto& d : s.shape) shape += (shape.empty() ? "" : ", ") + d;
    out << fmt::format("  {} {:<10} {:<7} [{}]{}\n", role, s.name, name_of(s.dtype), shape, s.inplace ? "  (in place)" : "");
  };
  out << "\nTensors:\n";
  for (const auto& s : task.inputs) tensor_line(s, "in ");
  for (const auto& s : task.outputs) tensor_line(s, "out");
  if (!task.scalars.empty()) {
    out << "Scalars:";
    for (const auto& s : task.scalars) out << fmt::format(" {}={}", s.name, s.value);
    out << '\n';
  }
  out << fmt::format("FLOPs: {}\nMinimum bytes: {}\n\nWorkloads:\n", task.flops, task.min_bytes);
  int hidden = 0;
  for (const auto& w : task.workloads) {
    if (w.hidden) {
      ++hidden;
      continue;
    }
    std::string axes;
    for (const auto& [k, v] : w.axes) axes += fmt::format("{}{}={}", axes.empty() ? "" : " ", k, v);
    out << fmt::format("  {:<36} {:<18} {}\n", w.name, w.model, axes);
  }
  if (hidden) out << fmt::format("  (and {} hidden workload{}, run only by final evaluations)\n", hidden, hidden == 1 ? "" : "s");
  if (!levels.empty()) out << '\n' << render_guidance(task.guidance, levels);
}

}  // namespace d2k
