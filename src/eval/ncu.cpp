#include "eval/ncu.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>
#include <vector>

namespace d2k {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

// The harness's own kernels in the worker (the L2 flush, the digests of outputs, the swaps of patched
// elements) live in namespace d2k; a solution's kernels do not.
bool harness_kernel(std::string_view name) {
  if (name.starts_with("void ")) name.remove_prefix(5);
  return name.starts_with("d2k::");
}

bool ncu_metric_name(const std::string& name) {
  return !name.empty() && name.size() <= 200 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}

std::string ncu_profile_metrics() {
  std::string metrics;
  for (const auto& [name, key] : kMetrics) metrics += (metrics.empty() ? "" : ",") + std::string(name);
  return metrics;
}

// Parses `ncu --csv --print-units base --metrics ...` output: one row per kernel and metric.
json parse_ncu_csv(const std::string& output, std::size_t max_kernels, const std::vector<std::string>& more) {
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
    if (id.empty() || harness_kernel(name)) continue;
    if (!kernels.count(id)) {
      if (order.size() >= max_kernels) continue;
      order.push_back(id);
      kernels[id] = {{"kernel", name.substr(0, 200)}, {"grid", get("Grid Size")}, {"block", get("Block Size")}};
    }
    const auto metric = get("Metric Name");
    const auto value = [&] {
      std::string text = get("Metric Value");
      text.erase(std::remove(text.begin(), text.end(), ','), text.end());
      char* end = nullptr;
      const double number = std::strtod(text.c_str(), &end);
      return end && *end == '\0' && !text.empty() ? json(number) : json(text);
    };
    for (const auto& [ncu_name, key] : kMetrics)
      if (metric == ncu_name) kernels[id][key] = value();
    if (std::find(more.begin(), more.end(), metric) != more.end()) kernels[id]["more"][metric] = value();
  }
  json list = json::array();
  for (const auto& id : order) list.push_back(kernels[id]);
  return list;
}


std::optional<fs::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::stringstream folders(path);
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    if (folder.empty()) continue;
    const auto candidate = fs::path(folder) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::optional<NcuWrap> make_ncu_wrap(const std::string& metrics, int launch_count, const fs::path& report) {
  const auto ncu = find_on_path("ncu");
  if (!ncu) return std::nullopt;
  NcuWrap wrap;
  wrap.ncu = *ncu;
  // --clock-control none: ncu's default locks the GPU's clocks at base for the profiled launches; d2k leaves
  // the clocks alone (they are the machine's, and a profile at base clocks would not show the timed run).
  wrap.args = {"--csv", "--print-units", "base", "--clock-control", "none", "--launch-count", std::to_string(launch_count),
               "--metrics", metrics};
  wrap.report = report;
  // The CUDA toolkit's `bin/ncu` is a script that looks for its installation beside the toolkit or under
  // /opt/nvidia; both are made visible (read-only), with the folder the name on PATH resolves to.
  std::error_code error;
  const fs::path real = fs::canonical(*ncu, error);
  const fs::path resolved = error ? *ncu : real;
  wrap.read.push_back(resolved.parent_path().parent_path());
  if (ncu->parent_path() != resolved.parent_path()) wrap.read.push_back(ncu->parent_path());
  if (fs::is_directory("/opt/nvidia", error)) wrap.read.push_back("/opt/nvidia");
  return wrap;
}

}  // namespace d2k
