#include "cli/profile.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/metrics.hpp"
#include "eval/ncu.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double number(const json& kernel, const char* key) {
  const auto it = kernel.find(key);
  return it != kernel.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string published_names(const Task& task) {
  std::string names;
  for (const auto& workload : task.workloads)
    if (!workload.hidden) names += (names.empty() ? "" : ", ") + workload.name;
  return names;
}

void print_kernels(std::ostream& out, const json& kernels) {
  out << fmt::format("{:<48} {:>14} {:>10} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>5} {:>7}\n", "kernel", "grid", "block",
                     "time us", "DRAM GB/s", "DRAM%", "mem%", "SM%", "occ%", "regs", "smem B");
  for (const auto& kernel : kernels) {
    std::string name = kernel.value("kernel", "");
    if (name.size() > 48) name = name.substr(0, 45) + "...";
    const double ns = number(kernel, "duration_ns"), bytes = number(kernel, "dram_bytes");
    out << fmt::format("{:<48} {:>14} {:>10} {:>9.2f} {:>9.0f} {:>6.1f} {:>6.1f} {:>6.1f} {:>6.1f} {:>5.0f} {:>7.0f}\n", name,
                       kernel.value("grid", ""), kernel.value("block", ""), ns / 1e3, ns > 0 ? bytes / ns : 0.0,
                       number(kernel, "dram_throughput_pct"), number(kernel, "memory_throughput_pct"),
                       number(kernel, "compute_throughput_pct"), number(kernel, "achieved_occupancy_pct"),
                       number(kernel, "registers_per_thread"),
                       number(kernel, "static_shared_bytes") + number(kernel, "dynamic_shared_bytes"));
  }
}

// Per kernel launch, the values of the metrics asked for beside the table's (in the order asked).
void print_more(std::ostream& out, const json& kernels, const std::vector<std::string>& more) {
  if (more.empty()) return;
  int index = 0;
  for (const auto& kernel : kernels) {
    out << fmt::format("kernel {} ({}):\n", ++index, kernel.value("kernel", "").substr(0, 60));
    const json none = json::object();
    const json& values = kernel.contains("more") ? kernel.at("more") : none;
    for (const auto& name : more) {
      const auto it = values.find(name);
      out << fmt::format("  {:<64} {}\n", name,
                         it == values.end() ? std::string("(not reported by ncu)")
                         : it->is_number() ? fmt::format("{:.6g}", it->get<double>())
                                           : it->get<std::string>());
    }
  }
}

}  // namespace

int profile_and_report(std::ostream& out, const Task& task, const Solution& solution,
                       const EvalEnvironment& environment, EvalSettings settings,
                       const std::vector<std::string>& more_metrics) {
  if (environment.device != Device::cuda)
    fail("--profile needs the cuda device (Nsight Compute profiles GPU kernels); the device is {}",
         name_of(environment.device));
  if (settings.workloads.size() != 1)
    fail("--profile profiles one workload: name it with -w (the task's published workloads: {})",
         published_names(task));
  const auto it = std::find_if(task.workloads.begin(), task.workloads.end(),
                               [&](const Workload& w) { return w.name == settings.workloads.front(); });
  if (it == task.workloads.end())
    fail("--profile: the task has no workload '{}' (its published workloads: {})", settings.workloads.front(),
         published_names(task));
  std::string metrics = ncu_profile_metrics();
  for (const auto& name : more_metrics) {
    if (!ncu_metric_name(name))
      fail("--profile-metrics: '{}' is not an Nsight Compute metric name (lower-case letters, digits, '_' and '.'; "
           "`ncu --query-metrics` lists them)", name);
    metrics += "," + name;
  }
  const fs::path report = fs::temp_directory_path() / fmt::format("d2k-profile-{}.csv", ::getpid());
  settings.ncu = make_ncu_wrap(metrics, 40, report);
  if (!settings.ncu) fail("--profile needs Nsight Compute: no `ncu` on PATH");
  settings.include_hidden = true;  // the named workload, whichever tier it is in
  settings.baseline = false;
  settings.time = false;
  settings.worker_timeout_seconds = std::max(settings.worker_timeout_seconds, 300.0);
  const auto traces = Evaluator(environment, settings).evaluate(task, solution);
  const auto text = file_bytes(report);
  const json kernels = parse_ncu_csv(text.value_or(""), 20, more_metrics);
  const Trace& trace = traces.front();
  out << fmt::format("{} {} on {}: {} (untimed, under Nsight Compute)\n", task.name, it->name, environment.device_name,
                     name_of(trace.status));
  if (kernels.empty()) {
    out << fmt::format("ncu profiled no kernel of the solution{}\n{}\n", text ? "" : " (no ncu report)",
                       trace.message.empty() ? trace.log : trace.message + "\n" + trace.log);
    return 1;
  }
  print_kernels(out, kernels);
  print_more(out, kernels, more_metrics);
  const double min_bytes = min_bytes_of(task, *it), flops = flops_of(task, *it);
  out << fmt::format("speed-of-light floor {:.2f} us ({:.4g} MB at {:.0f} GB/s; {:.4g} GFLOP); ncu's report: {}\n",
                     floor_ms(flops, min_bytes, environment.ceilings, task.flops_dtype) * 1e3, min_bytes / 1e6,
                     environment.ceilings.memory_gbps(), flops / 1e9, report.string());
  return 0;
}

}  // namespace d2k
