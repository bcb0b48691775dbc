// profile: Nsight Compute on the worker process of a one-workload evaluation run in this process (ncu
// inside the worker's sandbox, eval/ncu.hpp). The harness's own L2 flush kernel is left out of the summary.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "agent/tools.hpp"
#include "eval/evaluator.hpp"
#include "eval/ncu.hpp"
#include "core/error.hpp"
#include "core/file_bytes.hpp"

namespace d2k::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

ToolOutcome unavailable(const std::string& why) {
  ToolOutcome outcome;
  outcome.result = {{"available", false}, {"error", "profiling is unavailable: " + why}};
  outcome.is_error = true;
  return outcome;
}

// One CSV line, with quoted fields ("a","b,c").
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

const char* kMetrics[][2] = {
    {"gpu__time_duration.sum", "duration_ns"},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "compute_throughput_pct"},
    {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "memory_throughput_pct"},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_throughput_pct"},
    {"dram__bytes.sum", "dram_bytes"},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "achieved_occupancy_pct"},
    {"launch__registers_per_thread", "registers_per_thread"},
    {"launch__shared_mem_per_block_static", "static_shared_bytes"},
    {"launch__shared_mem_per_block_dynamic", "dynamic_shared_bytes"},
};

}  // namespace

// Parses `ncu --csv --print-units base --metrics ...` output: one row per kernel and metric.
json parse_ncu_csv(const std::string& output, std::size_t max_kernels) {
  std::istringstream in(output);
  std::string line;
  std::vector<std::string> header;
  std::map<std::string, std::size_t> column;
  std::vector<std::string> order;
  std::map<std::string, json> kernels;
  while (std::getline(in, line)) {
    if (header.empty()) {
      if (!line.starts_with("\"ID\"")) continue;
      header = csv_fields(line);
      for (std::size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
      continue;
    }
    const auto fields = csv_fields(line);
    auto get = [&](const char* name) -> std::string {
      auto it = column.find(name);
      return it != column.end() && it->second < fields.size() ? fields[it->second] : std::string();
    };
    const auto id = get("ID");
    const auto name = get("Kernel Name");
    // The harness's own kernels in the worker: the L2 flush and the bytewise comparison of outputs.
    if (id.empty() || name.find("read_all") != std::string::npos || name.find("count_differences") != std::string::npos)
      continue;
    if (!kernels.count(id)) {
      if (order.size() >= max_kernels) continue;
      order.push_back(id);
      kernels[id] = {{"kernel", name.substr(0, 200)}, {"grid", get("Grid Size")}, {"block", get("Block Size")}};
    }
    const auto metric = get("Metric Name");
    for (const auto& [ncu_name, key] : kMetrics) {
      if (metric != ncu_name) continue;
      std::string value = get("Metric Value");
      value.erase(std::remove(value.begin(), value.end(), ','), value.end());
      char* end = nullptr;
      const double number = std::strtod(value.c_str(), &end);
      kernels[id][key] = end && *end == '\0' && !value.empty() ? json(number) : json(value);
    }
  }
  json list = json::array();
  for (const auto& id : order) list.push_back(kernels[id]);
  return list;
}

ToolOutcome ToolBox::profile(const json& args, int call_index) {
  auto it = args.find("workload");
  std::string workload;
  if (it != args.end() && !it->is_null()) {
    if (!it->is_string()) return unavailable("the argument 'workload' must be a string");
    workload = it->get<std::string>();
  }
  const auto published = select_workloads(*env_.task, env_.eval->workloads, false);
  if (published.empty()) return unavailable("the task has no published workload");
  if (workload.empty()) workload = published.front()->name;
  if (std::none_of(published.begin(), published.end(), [&](const Workload* w) { return w->name == workload; })) {
    std::string names;
    for (const auto* w : published) names += (names.empty() ? "" : ", ") + w->name;
    ToolOutcome outcome;
    outcome.result = {{"error", fmt::format("no published workload '{}' (they are: {})", workload, names)}};
    outcome.is_error = true;
    return outcome;
  }
  if (env_.environment->device != Device::cuda) return unavailable(fmt::format("the run's device is {}, not cuda", name_of(env_.environment->device)));
  const auto scratch = env_.run_dir / "profile";
  fs::create_directories(scratch);
  const auto report = scratch / "ncu-report.txt";
  std::error_code ignored;
  fs::remove(report, ignored);
  std::string metrics;
  for (const auto& [name, key] : kMetrics) metrics += (metrics.empty() ? "" : ",") + std::string(name);
  auto ncu = make_ncu_wrap(metrics, 40, report);
  if (!ncu) return unavailable("Nsight Compute (ncu) is not on PATH");
  Solution solution;
  try {
    solution = load_solution(workspace_.dir());
  } catch (const Error& e) {
    return unavailable(e.what());
  }

  // A one-workload evaluation, in this process, whose worker runs under ncu inside its sandbox
  // (eval/ncu.hpp): ncu outside the sandbox does not reach the worker. The reference runs in the
  // orchestrator, which ncu never sees, so only the solution's kernels and the worker's own (the L2
  // flush) are profiled. No baseline and a single timed call: the profile is what is wanted, not times.
  EvalSettings settings = *env_.eval;
  settings.workloads = {workload};
  settings.include_hidden = false;
  settings.seed = derive_seed(env_.seed, static_cast<uint64_t>(call_index));
  settings.baseline = false;
  settings.timing.min_samples = 1;
  settings.timing.warmup = 0;
  settings.timing.max_seconds = 0;
  settings.worker_timeout_seconds = 300;
  settings.ncu = std::move(ncu);
  const auto traces = Evaluator(*env_.environment, settings).evaluate(*env_.task, solution);
  const auto text = file_bytes(report);
  const auto kernels = parse_ncu_csv(text.value_or(""), 10);
  ToolOutcome outcome;
  if (kernels.empty()) {
    // The status only: the trace's message may name a reference value, which check and benchmark
    // redact and a model never sees.
    const Trace& trace = traces.front();
    outcome.result = {{"available", false},
                      {"error", fmt::format("ncu profiled no kernel of the solution (the evaluation: {}{})",
                                            name_of(trace.status), text ? "" : "; no ncu report")},
                      {"log", cap_text(trace.log + "\n" + text.value_or(""), 4096)}};
    outcome.is_error = true;
    return outcome;
  }
  outcome.result = {{"available", true}, {"workload", workload}, {"kernels", kernels}};
  return outcome;
}

}  // namespace d2k::agent
